/* py_lines: CPython line tables decoded as the interpreters themselves
 * decode them, then hand-written tables for each format's corners, then
 * hostile ones (cut short, random, endless varints, floods) that must give
 * -1 or a line and never read past their length (run under valgrind once:
 * every table here is a heap block of exactly its length).
 *
 * The fixtures come from real interpreters: the .txt files of build/fixtures/py_lines/,
 * one per Python found on the machine, written by
 * tests/unit/fixtures/py_lines_dump.py (its docstring has the format). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../agent/runtimes/python/py_lines.h"

#define V37 0x0307
#define V38 0x0308
#define V310 0x030a
#define V311 0x030b

/* --- the fixtures ------------------------------------------------------- */

static const char *fixture_dir(void)
{
    static char path[512];
    const char *dir = getenv("CX_FIXTURES");
    snprintf(path, sizeof(path), "%s/py_lines", dir ? dir : "build/fixtures");
    return path;
}

/* One code object of a fixture file. */
struct pl_code {
    int64_t firstlineno;
    size_t ncode, ntab;
    char name[256];
    uint8_t *tab;   /* exactly ntab bytes (NULL when empty): valgrind sees overreads */
    int64_t *lines; /* ncode / 2: CPython's line of each 2-byte offset */
};

static void pl_code_free(struct pl_code *c)
{
    free(c->tab);
    free(c->lines);
    memset(c, 0, sizeof(*c));
}

static void expect_word(FILE *f, const char *want, const char *path)
{
    char word[32];
    if (fscanf(f, " %31s", word) != 1 || strcmp(word, want) != 0)
        fail_msg("%s: expected \"%s\"", path, want);
}

/* The next code object of the file; false at "end", whose count must be
 * the number of code objects read. */
static bool pl_read_code(FILE *f, const char *path, struct pl_code *c, size_t nread)
{
    char word[32];
    size_t count;

    memset(c, 0, sizeof(*c));
    if (fscanf(f, " %31s", word) != 1)
        fail_msg("%s: ends without \"end\"", path);
    if (strcmp(word, "end") == 0) {
        if (fscanf(f, "%zu", &count) != 1 || count != nread)
            fail_msg("%s: end count differs from the %zu code objects read", path, nread);
        return false;
    }
    if (strcmp(word, "code") != 0 ||
        fscanf(f, "%" SCNd64 " %zu %zu %255s", &c->firstlineno, &c->ncode, &c->ntab, c->name) != 4)
        fail_msg("%s: bad code line after %zu code objects", path, nread);
    expect_word(f, "hex", path);
    if (c->ntab == 0) {
        expect_word(f, "-", path);
    } else {
        c->tab = malloc(c->ntab);
        assert_non_null(c->tab);
        for (size_t i = 0; i < c->ntab; i++)
            if (fscanf(f, "%2hhx", &c->tab[i]) != 1)
                fail_msg("%s: %s: bad hex", path, c->name);
    }
    expect_word(f, "lines", path);
    c->lines = malloc((c->ncode / 2 + 1) * sizeof(*c->lines));
    assert_non_null(c->lines);
    for (size_t i = 0; i < c->ncode / 2; i++)
        if (fscanf(f, "%" SCNd64, &c->lines[i]) != 1)
            fail_msg("%s: %s: bad line list", path, c->name);
    return true;
}

/* Opens a fixture and reads its version line; the comment lines before it
 * are skipped. */
static FILE *pl_open(const char *path, unsigned *version, char *label, size_t label_size)
{
    unsigned major, minor, micro;
    FILE *f = fopen(path, "r");
    int ch;

    if (!f)
        fail_msg("%s: cannot open", path);
    while ((ch = fgetc(f)) == '#')
        while ((ch = fgetc(f)) != '\n' && ch != EOF)
            ;
    if (ch != EOF)
        ungetc(ch, f);
    if (fscanf(f, " version %u %u %u", &major, &minor, &micro) != 3)
        fail_msg("%s: no version line", path);
    *version = major << 8 | minor;
    snprintf(label, label_size, "%u.%u.%u", major, minor, micro);
    return f;
}

/* The fixture files, sorted; fails when there is none at all: a build that
 * found no interpreter has tested nothing. */
static int pl_list(struct dirent ***names)
{
    int n = scandir(fixture_dir(), names, NULL, alphasort);
    int kept = 0;

    if (n < 0)
        fail_msg("%s: no such directory (make build/tests/test_py_lines writes it)", fixture_dir());
    for (int i = 0; i < n; i++) {
        size_t len = strlen((*names)[i]->d_name);
        if (len > 4 && strcmp((*names)[i]->d_name + len - 4, ".txt") == 0)
            (*names)[kept++] = (*names)[i];
        else
            free((*names)[i]);
    }
    if (kept == 0)
        fail_msg("%s: no fixture: no Python interpreter was found to write one", fixture_dir());
    return kept;
}

static void pl_path(char *path, size_t size, const struct dirent *d)
{
    snprintf(path, size, "%s/%s", fixture_dir(), d->d_name);
}

/* Every offset of one code object against what CPython said; from 3.10,
 * where the table covers the bytecode exactly, the offset just past it must
 * be -1. Returns the mismatches (the first few printed). */
static size_t pl_check_code(const char *path, unsigned version, const struct pl_code *c)
{
    size_t bad = 0;

    for (size_t i = 0; i < c->ncode / 2; i++) {
        int64_t got = py_lines__line(version, c->tab, c->ntab, c->firstlineno, (uint32_t)(2 * i));
        if (got != c->lines[i] && bad++ < 5)
            print_message("%s: %s (line %" PRId64 "): offset %zu: line %" PRId64
                          ", CPython says %" PRId64 "\n",
                          path, c->name, c->firstlineno, 2 * i, got, c->lines[i]);
    }
    if (version >= V310 &&
        py_lines__line(version, c->tab, c->ntab, c->firstlineno, (uint32_t)c->ncode) != -1 &&
        bad++ < 5)
        print_message("%s: %s: the table goes past the bytecode's end\n", path, c->name);
    return bad;
}

static void test_real_interpreters(void **state)
{
    struct dirent **names;
    int n = pl_list(&names);
    size_t total_bad = 0;
    (void)state;

    for (int k = 0; k < n; k++) {
        char path[1024], label[32];
        unsigned version;
        size_t ncodes = 0, noffsets = 0, bad = 0;
        struct pl_code c;

        pl_path(path, sizeof(path), names[k]);
        FILE *f = pl_open(path, &version, label, sizeof(label));
        while (pl_read_code(f, path, &c, ncodes)) {
            bad += pl_check_code(path, version, &c);
            ncodes++;
            noffsets += c.ncode / 2;
            pl_code_free(&c);
        }
        fclose(f);
        print_message("%s: Python %s: %zu code objects, %zu offsets checked, %zu wrong\n",
                      names[k]->d_name, label, ncodes, noffsets, bad);
        if (ncodes == 0)
            fail_msg("%s: no code object", path);
        total_bad += bad;
        free(names[k]);
    }
    free(names);
    assert_int_equal(total_bad, 0);
}

/* --- hand-written tables ---------------------------------------------- */

static int64_t line_of(unsigned version, const uint8_t *t, size_t len, int64_t first,
                       uint32_t offset)
{
    /* A heap copy of exactly len bytes, so that valgrind sees any overread. */
    uint8_t *copy = len ? malloc(len) : NULL;
    int64_t got;

    if (len)
        memcpy(copy, t, len);
    got = py_lines__line(version, copy, len, first, offset);
    free(copy);
    return got;
}

#define LINE(v, t, first, off) line_of((v), (t), sizeof(t), (first), (off))

static void test_lnotab(void **state)
{
    (void)state;
    /* Empty: everything on the first line. */
    assert_int_equal(line_of(V38, NULL, 0, 5, 0), 5);
    assert_int_equal(line_of(V38, NULL, 0, 5, 100), 5);

    static const uint8_t simple[] = {6, 1, 8, 2};
    assert_int_equal(LINE(V38, simple, 10, 0), 10);
    assert_int_equal(LINE(V38, simple, 10, 5), 10);
    assert_int_equal(LINE(V38, simple, 10, 6), 11);
    assert_int_equal(LINE(V38, simple, 10, 13), 11);
    assert_int_equal(LINE(V38, simple, 10, 14), 13);
    /* Past the last entry: the last line. */
    assert_int_equal(LINE(V38, simple, 10, 1000), 13);
    assert_int_equal(LINE(V38, simple, 10, UINT32_MAX), 13);

    /* +300 lines at offset 4: split into line increments of 127, 127, 46. */
    static const uint8_t up[] = {4, 127, 0, 127, 0, 46, 2, 1};
    assert_int_equal(LINE(V38, up, 1, 3), 1);
    assert_int_equal(LINE(V38, up, 1, 4), 301);
    assert_int_equal(LINE(V38, up, 1, 6), 302);
    /* -300: -128, -128, -44 (signed from 3.6; unsigned before). */
    static const uint8_t down[] = {4, 0x80, 0, 0x80, 0, 0xd4};
    assert_int_equal(LINE(V38, down, 1000, 2), 1000);
    assert_int_equal(LINE(V38, down, 1000, 4), 700);
    assert_int_equal(LINE(0x0306, down, 1000, 4), 700);
    assert_int_equal(LINE(0x0305, down, 1000, 4), 1000 + 128 + 128 + 212);
    assert_int_equal(LINE(0x0300, down, 1000, 4), 1000 + 128 + 128 + 212);
    /* More than 255 bytes of bytecode on one line: 255 then 5. */
    static const uint8_t wide[] = {255, 0, 5, 1};
    assert_int_equal(LINE(V37, wide, 7, 259), 7);
    assert_int_equal(LINE(V37, wide, 7, 260), 8);

    /* Malformed: an odd length, a line below 0, before 3.0. */
    static const uint8_t odd[] = {2, 1, 2};
    assert_int_equal(LINE(V38, odd, 1, 0), -1);
    static const uint8_t negative[] = {0, 0x80};
    assert_int_equal(LINE(V38, negative, 10, 0), -1);
    assert_int_equal(LINE(V38, negative, 128, 0), 0);
    assert_int_equal(LINE(0x0207, simple, 10, 0), -1);
    assert_int_equal(line_of(V38, NULL, 0, (int64_t)INT32_MAX + 1, 0), -1);
    assert_int_equal(line_of(V38, NULL, 0, INT32_MAX, 0), INT32_MAX);
    assert_int_equal(py_lines__line(V38, NULL, 2, 1, 0), -1);
}

static void test_linetable_310(void **state)
{
    (void)state;
    /* 6 bytes on the first line, 4 on the next, 2 with no line, 4 two
     * lines further down (the -128 left the running line alone). */
    static const uint8_t t[] = {6, 0, 4, 1, 2, 0x80, 4, 2};
    assert_int_equal(LINE(V310, t, 10, 0), 10);
    assert_int_equal(LINE(V310, t, 10, 5), 10);
    assert_int_equal(LINE(V310, t, 10, 6), 11);
    assert_int_equal(LINE(V310, t, 10, 10), 0);
    assert_int_equal(LINE(V310, t, 10, 11), 0);
    assert_int_equal(LINE(V310, t, 10, 12), 13);
    assert_int_equal(LINE(V310, t, 10, 15), 13);
    /* The table ends before the offset. */
    assert_int_equal(LINE(V310, t, 10, 16), -1);
    assert_int_equal(LINE(V310, t, 10, UINT32_MAX), -1);
    assert_int_equal(line_of(V310, NULL, 0, 10, 0), -1);

    /* +300 in zero-length entries, which only move the running line. */
    static const uint8_t up[] = {2, 0, 0, 127, 0, 127, 4, 46};
    assert_int_equal(LINE(V310, up, 1, 0), 1);
    assert_int_equal(LINE(V310, up, 1, 2), 301);
    assert_int_equal(LINE(V310, up, 1, 5), 301);
    static const uint8_t down[] = {2, 0, 0, 0x80 + 1, 0, 0x81, 2, 0xd6};
    assert_int_equal(LINE(V310, down, 1000, 0), 1000);
    assert_int_equal(LINE(V310, down, 1000, 2), 1000 - 127 - 127 - 42);
    /* A no-line range between zero-length line moves and after them. */
    static const uint8_t noline[] = {2, 5, 0, 3, 2, 0x80, 2, 1};
    assert_int_equal(LINE(V310, noline, 1, 0), 6);
    assert_int_equal(LINE(V310, noline, 1, 2), 0);
    assert_int_equal(LINE(V310, noline, 1, 4), 10);
    /* Offset deltas of 254. */
    static const uint8_t wide[] = {254, 0, 254, 1};
    assert_int_equal(LINE(V310, wide, 3, 253), 3);
    assert_int_equal(LINE(V310, wide, 3, 254), 4);
    assert_int_equal(LINE(V310, wide, 3, 507), 4);
    assert_int_equal(LINE(V310, wide, 3, 508), -1);

    static const uint8_t odd[] = {2, 0, 2};
    assert_int_equal(LINE(V310, odd, 1, 0), -1);
    static const uint8_t negative[] = {2, 0xf0};
    assert_int_equal(LINE(V310, negative, 10, 0), -1);
}

/* The first byte of a location entry. */
#define LOC(code, units) ((uint8_t)(0x80 | (code) << 3 | ((units)-1)))

static void test_location_table(void **state)
{
    (void)state;
    static const uint8_t t[] = {
        LOC(0, 1),  0x00,             /* short form: 0-1 on the first line */
        LOC(11, 2), 0x04, 0x08,       /* one-line form, +1: 2-5 */
        LOC(15, 1),                   /* no location: 6-7 */
        LOC(13, 1), 0x58, 0x09,       /* no columns, svarint +300: 8-9 */
        LOC(14, 8), 0x75, 0x07, 0x00, /* long form, svarint -250: 10-25 */
        0x48,       0x03, 0x05,       /* (end line +0, columns 200 and 5) */
        LOC(12, 1), 0x00, 0x00,       /* one-line form, +2: 26-27 */
        LOC(10, 1), 0x00, 0x7f,       /* one-line form, +0: 28-29 */
    };
    for (unsigned v = V311; v <= 0x030e; v++) {
        assert_int_equal(LINE(v, t, 20, 0), 20);
        assert_int_equal(LINE(v, t, 20, 1), 20);
        assert_int_equal(LINE(v, t, 20, 2), 21);
        assert_int_equal(LINE(v, t, 20, 5), 21);
        assert_int_equal(LINE(v, t, 20, 6), 0);
        assert_int_equal(LINE(v, t, 20, 8), 321);
        assert_int_equal(LINE(v, t, 20, 10), 71);
        assert_int_equal(LINE(v, t, 20, 25), 71);
        assert_int_equal(LINE(v, t, 20, 26), 73);
        assert_int_equal(LINE(v, t, 20, 28), 73);
        assert_int_equal(LINE(v, t, 20, 30), -1);
        assert_int_equal(LINE(v, t, 20, UINT32_MAX), -1);
    }
    assert_int_equal(line_of(V311, NULL, 0, 1, 0), -1);

    /* The largest svarint, 2^31 - 1: 32 bits in six chunks. */
    static const uint8_t max[] = {LOC(13, 1), 0x7e, 0x7f, 0x7f, 0x7f, 0x7f, 0x03};
    assert_int_equal(LINE(V311, max, 0, 0), INT32_MAX);
    assert_int_equal(LINE(V311, max, 1, 0), -1); /* past INT32_MAX */
    /* 2^32: a seventh chunk's worth. */
    static const uint8_t over[] = {LOC(13, 1), 0x40, 0x40, 0x40, 0x40, 0x40, 0x04};
    assert_int_equal(LINE(V311, over, 0, 0), -1);
    static const uint8_t seven[] = {LOC(13, 1), 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x00};
    assert_int_equal(LINE(V311, seven, 0, 0), -1);
    /* -(2^31 - 1) from 2^31 - 1: line 0 on an entry that has a line, which
     * is 0 as CPython would say. */
    static const uint8_t min[] = {LOC(13, 1), 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x03};
    assert_int_equal(LINE(V311, min, INT32_MAX, 0), 0);
    assert_int_equal(LINE(V311, min, INT32_MAX - 1, 0), -1);

    /* Cut short, or not starting an entry where one must start. */
    static const uint8_t cut_short[] = {LOC(0, 1)};
    static const uint8_t cut_one_line[] = {LOC(11, 1), 0x04};
    static const uint8_t cut_long[] = {LOC(14, 1), 0x02, 0x00, 0x01};
    static const uint8_t cut_varint[] = {LOC(13, 1), 0x42};
    static const uint8_t no_head[] = {0x00, LOC(0, 1), 0x00};
    static const uint8_t head_inside[] = {LOC(0, 1), 0x80, LOC(0, 1), 0x00};
    assert_int_equal(LINE(V311, cut_short, 1, 0), -1);
    assert_int_equal(LINE(V311, cut_one_line, 1, 0), -1);
    assert_int_equal(LINE(V311, cut_long, 1, 0), -1);
    assert_int_equal(LINE(V311, cut_varint, 1, 0), -1);
    assert_int_equal(LINE(V311, no_head, 1, 0), -1);
    assert_int_equal(LINE(V311, head_inside, 1, 0), -1);
    /* What lies after the entry holding the offset is not looked at. */
    static const uint8_t bad_tail[] = {LOC(0, 1), 0x00, 0x00};
    assert_int_equal(LINE(V311, bad_tail, 1, 0), 1);
    assert_int_equal(LINE(V311, bad_tail, 1, 2), -1);
}

/* --- hostile tables ----------------------------------------------------- */

/* One code object of each fixture whose table is of a size to cut at every
 * byte: the largest up to 2 KiB. */
static bool pl_pick(const char *path, unsigned *version, struct pl_code *out)
{
    char label[32];
    struct pl_code c;
    size_t n = 0;
    FILE *f = pl_open(path, version, label, sizeof(label));

    memset(out, 0, sizeof(*out));
    while (pl_read_code(f, path, &c, n++)) {
        if (c.ntab <= 2048 && c.ntab > out->ntab) {
            pl_code_free(out);
            *out = c;
        } else {
            pl_code_free(&c);
        }
    }
    fclose(f);
    return out->ntab > 0;
}

/* A real table cut at every byte: no crash, no read past the cut, and from
 * 3.10 (whose decoding of a prefix either reaches the offset's entry or
 * not) either CPython's line or -1. Up to 3.9 a cut at an even length is a
 * shorter table and gives some line of it. */
static void test_truncated(void **state)
{
    struct dirent **names;
    int n = pl_list(&names);
    (void)state;

    for (int k = 0; k < n; k++) {
        char path[1024];
        unsigned version;
        struct pl_code c;
        size_t nunits, found = 0, cut_off = 0;

        pl_path(path, sizeof(path), names[k]);
        if (!pl_pick(path, &version, &c)) {
            free(names[k]);
            continue;
        }
        nunits = c.ncode / 2;
        for (size_t cut = 0; cut <= c.ntab; cut++) {
            uint8_t *t = cut ? malloc(cut) : NULL;
            if (cut)
                memcpy(t, c.tab, cut);
            for (size_t u = 0; u < nunits; u += 1 + nunits / 16) {
                int64_t got = py_lines__line(version, t, cut, c.firstlineno, (uint32_t)(2 * u));
                if (version >= V310 ? got != -1 && got != c.lines[u]
                                    : (cut % 2 == 0 ? got < 0 : got != -1) ||
                                          (cut == c.ntab && got != c.lines[u]))
                    fail_msg("%s: %s cut at %zu: offset %zu gives %" PRId64 ", CPython %" PRId64,
                             path, c.name, cut, 2 * u, got, c.lines[u]);
                got == -1 ? cut_off++ : found++;
            }
            free(t);
        }
        print_message("%s: %s, table of %zu bytes cut at every byte: %zu lines found, %zu -1\n",
                      names[k]->d_name, c.name, c.ntab, found, cut_off);
        pl_code_free(&c);
        free(names[k]);
    }
    free(names);
}

/* xorshift64: the same bytes on every run and every libc. */
static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void test_random_bytes(void **state)
{
    static const unsigned versions[] = {0x0305, V37, V38, 0x0309, V310, V311, 0x030c, 0x030d};
    static const int64_t firsts[] = {1, 0, -1, 1000, INT32_MAX, INT32_MIN, (int64_t)1 << 40};
    uint64_t seed = 0x5eed1234abcdULL;
    size_t lines = 0, malformed = 0;
    (void)state;

    for (unsigned i = 0; i < 200000; i++) {
        uint64_t r = rng_next(&seed);
        size_t len = r % 97;
        unsigned version = versions[(r >> 8) % 8];
        int64_t first = (r >> 16) % 4 ? (int64_t)((r >> 20) % 5000) : firsts[(r >> 24) % 7];
        uint32_t offset = (r >> 32) % 8 ? (uint32_t)((r >> 36) % 512) : (uint32_t)(r >> 32);
        uint8_t *t = len ? malloc(len) : NULL;

        for (size_t j = 0; j < len; j++) {
            uint64_t b = rng_next(&seed);
            /* Half the tables look like location tables: heads where they go. */
            t[j] = (uint8_t)((i % 2 && j % 3 == 0) ? (b | 0x80) : (i % 2 ? b & 0x7f : b));
        }
        int64_t got = py_lines__line(version, t, len, first, offset);
        if (got < -1 || got > INT32_MAX)
            fail_msg("random table %u: %" PRId64, i, got);
        got >= 0 ? lines++ : malformed++;
        free(t);
    }
    print_message("random tables: %zu lines, %zu -1\n", lines, malformed);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Varints that never end, 0xff floods, and a table longer than 4 GiB of
 * bytecode with the offset at its end: -1 or a line, in time linear in the
 * table (a quadratic decoder would not finish). */
static void test_floods(void **state)
{
    /* Offset sums past 2^32: (255, 0) pairs then (255, +1); enough pairs
     * that the sum wraps a 32-bit counter. */
    const size_t pairs = ((size_t)1 << 32) / 255 + 2;
    const size_t len = pairs * 2;
    uint8_t *t = malloc(len);
    double t0, secs;
    (void)state;

    assert_non_null(t);
    /* A long form whose first varint never ends. */
    memset(t, 0x7f, len);
    t[0] = LOC(14, 8);
    assert_int_equal(py_lines__line(V311, t, len, 1, 0), -1);
    t[0] = LOC(13, 8);
    memset(t + 1, 0x40, len - 1);
    assert_int_equal(py_lines__line(V311, t, len, 1, 0), -1);

    /* 0xff everywhere: location entries of 8 code units with no location;
     * (255, -1) pairs before 3.10, which drive the line below 0. */
    memset(t, 0xff, len);
    t0 = now();
    assert_int_equal(py_lines__line(V311, t, len, 1, (uint32_t)(len * 16 - 2)), 0);
    secs = now() - t0;
    assert_int_equal(py_lines__line(V311, t, len, 1, (uint32_t)(len * 16)), -1);
    assert_int_equal(py_lines__line(V311, t, len, 1, 16 * 1000 - 2), 0);
    assert_int_equal(py_lines__line(V310, t, len, 1, 0), 0);
    assert_int_equal(py_lines__line(V310, t, len, 1, UINT32_MAX), -1);
    assert_int_equal(py_lines__line(V38, t, len, 1, 0), 1);
    assert_int_equal(py_lines__line(V38, t, len, 1, UINT32_MAX), -1);
    assert_int_equal(py_lines__line(V38, t, len, INT32_MAX, UINT32_MAX),
                     INT32_MAX - UINT32_MAX / 255);
    print_message("0xff flood: %zu MiB of location table read to its end in %.3f s\n", len >> 20,
                  secs);

    /* Offsets past 2^32: the last pair's line is beyond any uint32 offset. */
    for (size_t i = 0; i < pairs; i++) {
        t[2 * i] = 0xff;
        t[2 * i + 1] = i + 1 == pairs ? 1 : 0;
    }
    t0 = now();
    assert_int_equal(py_lines__line(V38, t, len, 5, UINT32_MAX), 5);
    secs = now() - t0;
    assert_int_equal(py_lines__line(V310, t, len, 5, UINT32_MAX), 5);
    assert_int_equal(py_lines__line(V38, t, len - 2, 5, UINT32_MAX), 5);
    print_message("%zu MiB of co_lnotab read to its end in %.3f s\n", len >> 20, secs);
    /* Linear: about a nanosecond a byte here; a minute would be quadratic
     * (or valgrind on a very slow machine). */
    assert_true(secs < 60);

    /* A location table of 8-unit short forms, offset at its end. */
    for (size_t i = 0; i + 1 < len; i += 2) {
        t[i] = LOC(0, 8);
        t[i + 1] = 0x00;
    }
    uint32_t last = (uint32_t)((len / 2) * 16 - 2);
    assert_int_equal(py_lines__line(V311, t, len, 9, last), 9);
    assert_int_equal(py_lines__line(V311, t, len, 9, last + 2), -1);
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_interpreters),
        cmocka_unit_test(test_lnotab),
        cmocka_unit_test(test_linetable_310),
        cmocka_unit_test(test_location_table),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_random_bytes),
        cmocka_unit_test(test_floods),
    };
    return cmocka_run_group_tests_name("py_lines", tests, NULL, NULL);
}
