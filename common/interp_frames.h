/* Interpreter frames without a name: how the agent marks them and the server
 * finds them, the one convention both sides share.
 *
 * An interpreter runtime (CPython) shows its programs' frames in place of
 * its evaluation function; the interpreter's own code between and above
 * them (the call machinery, object allocation, arithmetic) has no name when
 * the binary carries no symbol table (Debian's /usr/bin/python3). The agent
 * names such a frame as any unnamed one ("python3.11+0x50ba84") but gives it
 * the file CX_INTERP_FILE_PREFIX followed by the binary's path, so that a
 * query can fold it into the program's frame that runs it (its samples then
 * count as that function's self time), or show it. Frames with a name, and
 * frames of any other binary (C extensions, libc), are never marked.
 */
#ifndef CODEXRAY_COMMON_INTERP_FRAMES_H
#define CODEXRAY_COMMON_INTERP_FRAMES_H

#include <stdbool.h>
#include <string.h>

#define CX_INTERP_FILE_PREFIX "[interpreter]"

/* Whether a function's file marks an interpreter frame without a name.
 * file may be NULL (not one). */
static inline bool cx__is_interp_file(const char *file)
{
    return file && strncmp(file, CX_INTERP_FILE_PREFIX, sizeof(CX_INTERP_FILE_PREFIX) - 1) == 0;
}

#endif
