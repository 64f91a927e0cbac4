#include "demangle.h"

#include <stddef.h>
#include <string.h>

/* libiberty's demangler, the one binutils and gdb use: it knows both C++ and
 * both Rust schemes, and Debian ships it (libiberty-dev). */
#include <libiberty/demangle.h>

char *demangle(const char *name)
{
    if (!name || !(strncmp(name, "_Z", 2) == 0 || strncmp(name, "_R", 2) == 0))
        return NULL;
    /* DMGL_AUTO tries Rust before C++: legacy Rust names are valid C++ ones
     * too, but read better with the hash dropped. */
    return cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI | DMGL_AUTO);
}
