/* The functions and inlined calls of one DWARF compile unit by address, for
 * naming an address with its chain of inlined frames without walking the
 * unit's tree each time: libdw's dwarf_getscopes and dwarf_getscopes_die
 * each walk every DIE of the unit from its root, per address (most of the
 * agent's CPU naming a new address of libpython's eval loop, measured).
 *
 * The unit is walked once: every DW_TAG_subprogram and
 * DW_TAG_inlined_subroutine with addresses becomes one entry per address
 * range, with its depth and the entry of the function or inlined call
 * around it (lexical blocks and other scopes between are passed through).
 * test_dwarf_scopes checks the chains against libdw's on real binaries.
 */
#ifndef CODEXRAY_AGENT_SYMBOLIZE_DWARF_SCOPES_H
#define CODEXRAY_AGENT_SYMBOLIZE_DWARF_SCOPES_H

#include <elfutils/libdw.h>
#include <stddef.h>
#include <stdint.h>

struct cu_scopes;

/* The index of compile unit cu. NULL when out of memory (or a unit of more
 * than DWARF_SCOPES_MAX entries: the caller names that unit the slow way).
 * The unit's Dwarf must outlive it. */
#define DWARF_SCOPES_MAX (4u << 20)
struct cu_scopes *cu_scopes__build(Dwarf_Die *cu);
/* s may be NULL. */
void cu_scopes__free(struct cu_scopes *s);

/* The DIE offsets of the scopes holding address addr (the unit's own
 * addresses, without the module's bias), innermost first: inlined calls
 * out to the function they were inlined into, which is last. Returns how
 * many were written to out (at most max), 0 when no function holds addr. */
int cu_scopes__chain(const struct cu_scopes *s, Dwarf_Addr addr, Dwarf_Off *out, int max);

/* Memory the index holds. */
size_t cu_scopes__bytes(const struct cu_scopes *s);

#endif
