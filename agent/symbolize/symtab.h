/* A binary's symbols sorted by address, for naming an address with a binary
 * search: libdwfl's dwfl_module_addrinfo looks at every symbol for every
 * address (30 % of the agent's CPU naming frames in a 15,000-symbol
 * libpython, measured), this table pays for the sort once per binary.
 *
 * It takes the symbols libdwfl gathered for the module (.symtab, .dynsym,
 * .gnu_debugdata, a separate debug file) and answers as
 * dwfl_module_addrinfo does: the symbol with a size that holds the address,
 * the highest-addressed one where several do; at one address a symbol with
 * a size before one without, then global before weak before local, then the
 * first in libdwfl's order (the last, of symbols without a size); where no sized symbol holds it,
 * the closest symbol without a size below it, if no other symbol starts between them. test_symtab
 * checks the two agree on every symbol's edges and on random addresses of real binaries.
 */
#ifndef CODEXRAY_AGENT_SYMBOLIZE_SYMTAB_H
#define CODEXRAY_AGENT_SYMBOLIZE_SYMTAB_H

#include <elfutils/libdwfl.h>
#include <stddef.h>
#include <stdint.h>

struct symtab;

/* The symbols of mod, sorted. Names point into libdwfl's state of mod: the
 * table lives no longer than mod's Dwfl. NULL when out of memory or mod has
 * no symbols. */
struct symtab *symtab__build(Dwfl_Module *mod);
/* t may be NULL. */
void symtab__free(struct symtab *t);

/* The name of the symbol naming module address addr, or NULL; *start, when
 * not NULL, gets the symbol's address. */
const char *symtab__lookup(const struct symtab *t, uint64_t addr, uint64_t *start);

size_t symtab__count(const struct symtab *t);
/* Memory the table holds. */
size_t symtab__bytes(const struct symtab *t);

#endif
