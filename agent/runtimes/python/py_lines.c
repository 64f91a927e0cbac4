/* CPython line tables (py_lines.h): three decoders, one per format, each a
 * single forward pass that stops at the entry holding the offset. Written
 * from the format notes (Objects/lnotab_notes.txt of 3.8 and 3.10,
 * Objects/locations.md of 3.11) and checked against what the interpreters
 * themselves say (tests/unit/test_py_lines.c).
 *
 * Lines are summed in int64_t from co_firstlineno and increments that are at
 * most 2^31 each; the running line must stay within a C int (CPython's own
 * type for it: a table that leaves that range is one CPython mis-decodes
 * too), so nothing can overflow however long the table. The result must be
 * in [0, INT32_MAX]: a negative line means a hostile or corrupt table (or a
 * code object whose co_firstlineno was replaced with nonsense) and gives -1.
 * A computed line of 0 on an entry that has a line is returned as 0, the
 * same as "no line": CPython reports such instructions as line 0 too. */
#include "py_lines.h"

#include <stdbool.h>

/* A code unit, the step of bytecode offsets from 3.6 on. */
#define PY_LINES_CODE_UNIT 2

/* The location table's codes (bits 3-6 of an entry's first byte), from
 * locations.md; 0-9 are the short forms. */
enum {
    LOC_ONE_LINE0 = 10, /* 10, 11, 12: one-line forms, line delta code - 10 */
    LOC_NO_COLUMNS = 13,
    LOC_LONG = 14,
    LOC_NONE = 15,
};

static bool running_ok(int64_t line)
{
    return line >= INT32_MIN && line <= INT32_MAX;
}

static int64_t result(int64_t line)
{
    return line >= 0 && line <= INT32_MAX ? line : -1;
}

/* Up to 3.9, co_lnotab: (offset increment, line increment) byte pairs; the
 * line increment is unsigned before 3.6 and int8 from 3.6. The line of
 * `offset` is firstlineno plus the line increments of every pair whose
 * cumulative offset is <= offset, so an offset past the last pair is on the
 * last pair's line and an empty table means firstlineno. Pairs with an
 * offset increment of 0 (big line jumps) or a line increment of 0 (big
 * offset jumps) are just more terms of the same sums. An odd length never
 * comes from CPython (it reads len / 2 pairs) and is taken as malformed. */
static int64_t lnotab_line(const uint8_t *t, size_t len, int64_t line, uint32_t offset,
                           bool signed_lines)
{
    uint64_t addr = 0;

    if (len % 2 != 0)
        return -1;
    for (size_t i = 0; i < len; i += 2) {
        addr += t[i];
        if (addr > offset)
            break;
        line += signed_lines ? (int8_t)t[i + 1] : t[i + 1];
        if (!running_ok(line))
            return -1;
    }
    return result(line);
}

/* 3.10, co_linetable: (offset delta, line delta) byte pairs, the offset
 * delta unsigned and in bytes, the line delta int8 with -128 meaning "this
 * range has no line" (the running line is then left as it was). Each pair
 * ends a range [previous end, end); pairs with an offset delta of 0 only move
 * the running line (CPython merges them into the next range, whose line is
 * the last pair's). So the first pair whose end passes the offset is the
 * one: the table must reach it. */
static int64_t linetable310_line(const uint8_t *t, size_t len, int64_t line, uint32_t offset)
{
    uint64_t end = 0;

    if (len % 2 != 0)
        return -1;
    for (size_t i = 0; i < len; i += 2) {
        int8_t delta = (int8_t)t[i + 1];
        end += t[i];
        if (delta != -128) {
            line += delta;
            if (!running_ok(line))
                return -1;
        }
        if (end > offset)
            return delta == -128 ? 0 : result(line);
    }
    return -1;
}

/* The location table's bytes, read forward; nothing past `end`. */
struct loc_cursor {
    const uint8_t *p, *end;
};

/* One byte inside an entry: every byte after an entry's first has bit 7
 * clear (that is how CPython finds the next entry), so one with it set means
 * the entry was cut short or the table is garbage. */
static bool loc_byte(struct loc_cursor *c, uint8_t *b)
{
    if (c->p == c->end || (*c->p & 0x80))
        return false;
    *b = *c->p++;
    return true;
}

/* A varint: 6-bit chunks, least significant first, bit 6 set on every chunk
 * but the last. Six chunks cover 32 bits; a seventh, or a value past
 * UINT32_MAX, is malformed. */
static bool loc_varint(struct loc_cursor *c, uint32_t *out)
{
    uint64_t v = 0;
    unsigned shift = 0;
    uint8_t b;

    for (;;) {
        if (!loc_byte(c, &b))
            return false;
        v |= (uint64_t)(b & 63) << shift;
        if (!(b & 64))
            break;
        shift += 6;
        if (shift > 30)
            return false;
    }
    if (v > UINT32_MAX)
        return false;
    *out = (uint32_t)v;
    return true;
}

/* A signed varint: the magnitude shifted left by one, the sign in bit 0. */
static bool loc_svarint(struct loc_cursor *c, int64_t *out)
{
    uint32_t u;

    if (!loc_varint(c, &u))
        return false;
    *out = (u & 1) ? -(int64_t)(u >> 1) : (int64_t)(u >> 1);
    return true;
}

/* The rest of an entry whose first byte gave `code`: its line delta, and
 * whether it has a line at all; the column fields are read only to be
 * skipped. False when the entry is cut short or malformed. */
static bool loc_entry(struct loc_cursor *c, unsigned code, int64_t *delta, bool *has_line)
{
    uint32_t skip;
    uint8_t b;

    *delta = 0;
    *has_line = true;
    switch (code) {
    case LOC_NONE:
        *has_line = false;
        return true;
    case LOC_LONG:
        /* line delta, end line delta, start column + 1, end column + 1 */
        return loc_svarint(c, delta) && loc_varint(c, &skip) && loc_varint(c, &skip) &&
               loc_varint(c, &skip);
    case LOC_NO_COLUMNS:
        return loc_svarint(c, delta);
    case LOC_ONE_LINE0:
    case LOC_ONE_LINE0 + 1:
    case LOC_ONE_LINE0 + 2:
        /* start and end column, one byte each */
        *delta = code - LOC_ONE_LINE0;
        return loc_byte(c, &b) && loc_byte(c, &b);
    default:
        /* short forms: one byte of columns, same line */
        return loc_byte(c, &b);
    }
}

/* 3.11 on, the location table: entries of a first byte (bit 7 set, code in
 * bits 3-6, length - 1 in code units in bits 0-2) and then the code's
 * fields. Each entry covers the next `length` code units and moves the
 * running line by its delta ("no location" entries leave it as it was).
 * Entries past the one holding the offset are not looked at. */
static int64_t loctable_line(const uint8_t *t, size_t len, int64_t line, uint32_t offset)
{
    struct loc_cursor c = {t, t + len};
    uint64_t end = 0;

    while (c.p < c.end) {
        uint8_t head = *c.p++;
        int64_t delta;
        bool has_line;

        if (!(head & 0x80))
            return -1;
        if (!loc_entry(&c, (head >> 3) & 15, &delta, &has_line))
            return -1;
        line += delta;
        if (!running_ok(line))
            return -1;
        end += (uint64_t)((head & 7) + 1) * PY_LINES_CODE_UNIT;
        if (end > offset)
            return has_line ? result(line) : 0;
    }
    return -1;
}

int64_t py_lines__line(unsigned version, const uint8_t *table, size_t len, int64_t firstlineno,
                       uint32_t offset)
{
    if (version < 0x0300 || (table == NULL && len > 0) || !running_ok(firstlineno))
        return -1;
    if (version < 0x030a)
        return lnotab_line(table, len, firstlineno, offset, version >= 0x0306);
    if (version < 0x030b)
        return linetable310_line(table, len, firstlineno, offset);
    return loctable_line(table, len, firstlineno, offset);
}
