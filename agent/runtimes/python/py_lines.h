/* CPython line tables: which source line a bytecode offset belongs to, from
 * the table a code object carries, in each version's format:
 *
 *   up to 3.9   co_lnotab: (offset increment, line increment) byte pairs,
 *               the line increment signed from 3.6 (Objects/lnotab_notes.txt)
 *   3.10        co_linetable: (offset delta, line delta) byte pairs, a line
 *               delta of -128 meaning "no line" (Objects/lnotab_notes.txt)
 *   3.11 on     co_linetable: the location table, entries of a code and a
 *               length in code units, then varints (Objects/locations.md)
 *
 * Everything here comes from another process's memory: the decoders never
 * read past the length they are given, take time linear in it, and treat a
 * table that ends early or says something impossible as malformed.
 */
#ifndef CODEXRAY_AGENT_RUNTIMES_PYTHON_PY_LINES_H
#define CODEXRAY_AGENT_RUNTIMES_PYTHON_PY_LINES_H

#include <stddef.h>
#include <stdint.h>

/* The line of the instruction at byte `offset` of the code object's
 * bytecode (co_code; from 3.11 the adaptive code, whose offsets are the
 * same, cache entries included: the table covers them with their
 * instruction's line). version is (major << 8) | minor, e.g. 0x030b for
 * 3.11; table and len the bytes of co_lnotab or co_linetable; firstlineno
 * the code object's co_firstlineno.
 *
 * The offset is in bytes, which is not what every frame holds: 3.10's
 * f_lasti counts code units (offset = 2 * f_lasti); 3.11 and 3.12's
 * prev_instr and 3.13's instr_ptr are code-unit pointers (offset = 2 * (ptr -
 * first unit)). A frame that has not started has f_lasti -1 (3.10) or
 * prev_instr one unit before the code (3.11, 3.12): CPython gives
 * co_firstlineno for a negative offset, and so should the caller.
 *
 * Returns the line (> 0); 0 when the table gives that instruction no line
 * (an artificial instruction: 3.10's -128, 3.11's "no location" entries, or
 * a computed line of 0, which CPython reports as 0 too); -1 when the table
 * is malformed (an odd length up to 3.10, an entry cut short or not starting
 * with bit 7 set, a varint past 32 bits), or says something impossible (a
 * line outside [0, INT32_MAX], or a running line outside a C int, as
 * co_firstlineno must be), or (3.10 on, where the table covers the whole
 * bytecode) ends before the offset, or the version is older than 3.0. Up to
 * 3.9 an offset past the last entry is on the last entry's line. From 3.11,
 * entries after the one holding the offset are not looked at.
 *
 * Reads no byte past table + len, takes time linear in len (at most), cannot
 * fail otherwise; allocates nothing. */
int64_t py_lines__line(unsigned version, const uint8_t *table, size_t len, int64_t firstlineno,
                       uint32_t offset);

#endif
