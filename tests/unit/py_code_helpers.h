/* What test_py_code.c and test_py_code_hostile.c share: a fake process
 * memory (regions, reads outside them failing), code objects and strings
 * built in it in a given layout, and the checks of what py_code reads back. */
#ifndef CODEXRAY_TESTS_PY_CODE_HELPERS_H
#define CODEXRAY_TESTS_PY_CODE_HELPERS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../agent/runtimes/python/py_code.h"
#include "../../agent/runtimes/python/py_detect.h"
#include "py_helpers.h"

/* --- a fake memory ------------------------------------------------------ */

#define MAX_REGIONS 64
#define FAKE_CODE_TYPE 0x5600000c0de0ull
#define FAKE_STR_TYPE 0x560000005170ull
#define FAKE_BYTES_TYPE 0x56000000b170ull

struct region {
    uint64_t addr;
    size_t len;
    uint8_t *bytes; /* exactly len bytes */
    bool unreadable;
};

struct image {
    struct region r[MAX_REGIONS];
    unsigned n;
    uint64_t next;
    unsigned reads, failed;
};

/* Serves [addr, addr + len) when one readable region holds all of it. */
static inline int image_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
    struct image *im = ctx;

    im->reads++;
    for (unsigned i = 0; i < im->n; i++) {
        const struct region *r = &im->r[i];
        if (!r->unreadable && addr >= r->addr && addr - r->addr <= r->len &&
            len <= r->len - (addr - r->addr)) {
            memcpy(buf, r->bytes + (addr - r->addr), len);
            return 0;
        }
    }
    im->failed++;
    return -EFAULT;
}

static inline void image_init(struct image *im)
{
    memset(im, 0, sizeof(*im));
    im->next = 0x7f5500001000ull;
}

static inline void image_free(struct image *im)
{
    for (unsigned i = 0; i < im->n; i++)
        free(im->r[i].bytes);
    memset(im, 0, sizeof(*im));
}

/* A new zeroed region of len bytes, a page of nothing after it. */
static inline struct region *image_add(struct image *im, size_t len)
{
    assert_true(im->n < MAX_REGIONS);
    struct region *r = &im->r[im->n++];
    r->addr = im->next;
    r->len = len;
    r->bytes = calloc(1, len ? len : 1);
    assert_non_null(r->bytes);
    im->next += (len + 4096 + 15) & ~(uint64_t)15;
    return r;
}

static inline struct region *region_of(struct image *im, uint64_t addr)
{
    for (unsigned i = 0; i < im->n; i++) {
        if (im->r[i].addr == addr)
            return &im->r[i];
    }
    fail_msg("no region at 0x%" PRIx64, addr);
    return NULL;
}

static inline struct py_reader reader_of(struct image *im)
{
    return (struct py_reader){image_read, im};
}

static inline void put64(uint8_t *b, int32_t off, uint64_t v)
{
    assert_true(off >= 0);
    memcpy(b + off, &v, 8);
}

static inline void put32(uint8_t *b, int32_t off, uint32_t v)
{
    assert_true(off >= 0);
    memcpy(b + off, &v, 4);
}

/* --- objects in a layout ------------------------------------------------ */

/* UTF-8 to code points (the test's own decoder). Returns how many. */
static inline size_t utf8_decode(const char *s, uint32_t *out, size_t max)
{
    const uint8_t *p = (const uint8_t *)s;
    size_t n = 0;

    while (*p && n < max) {
        uint32_t c = *p++;
        int more = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : c >= 0xc0 ? 1 : 0;
        c &= more == 3 ? 0x07 : more == 2 ? 0x0f : more == 1 ? 0x1f : 0x7f;
        while (more-- > 0)
            c = c << 6 | (*p++ & 0x3f);
        out[n++] = c;
    }
    return n;
}

/* A string's state word: interned 0, kind, compact, ascii, ready (up to
 * 3.11). */
static inline uint32_t str_state(const struct py_layout *l, unsigned kind, bool compact, bool ascii)
{
    return kind << 2 | (uint32_t)compact << 5 | (uint32_t)ascii << 6 |
           (l->version < 0x030c ? 1u << 7 : 0);
}

/* A compact str of n code points, pad bytes of memory after it. */
static inline uint64_t make_str_cp(struct image *im, const struct py_layout *l, const uint32_t *cp,
                                   size_t n, size_t pad)
{
    uint32_t max = 0;
    for (size_t i = 0; i < n; i++)
        max = cp[i] > max ? cp[i] : max;
    unsigned kind = max < 0x100 ? 1 : max < 0x10000 ? 2 : 4;
    bool ascii = max < 0x80;
    size_t head = (size_t)(ascii ? l->unicode_ascii_size : l->unicode_compact_size);
    struct region *r = image_add(im, head + (n + 1) * kind + pad);

    put64(r->bytes, 0, 1);
    put64(r->bytes, l->object_type, FAKE_STR_TYPE);
    put64(r->bytes, l->unicode_length, n);
    put32(r->bytes, l->unicode_state, str_state(l, kind, true, ascii));
    for (size_t i = 0; i < n; i++) {
        if (kind == 1)
            r->bytes[head + i] = (uint8_t)cp[i];
        else if (kind == 2)
            memcpy(r->bytes + head + 2 * i, &(uint16_t){(uint16_t)cp[i]}, 2);
        else
            memcpy(r->bytes + head + 4 * i, &cp[i], 4);
    }
    return r->addr;
}

static inline uint64_t make_str(struct image *im, const struct py_layout *l, const char *utf8,
                                size_t pad)
{
    size_t cap = strlen(utf8) + 1;
    uint32_t *cp = malloc(cap * sizeof(*cp));
    assert_non_null(cp);
    size_t n = utf8_decode(utf8, cp, cap);
    uint64_t addr = make_str_cp(im, l, cp, n, pad);
    free(cp);
    return addr;
}

/* A bytes object holding n bytes of d, its size word saying size. */
static inline uint64_t make_bytes(struct image *im, const struct py_layout *l, const uint8_t *d,
                                  size_t n, int64_t size)
{
    struct region *r = image_add(im, (size_t)l->bytes_sval + n + 1);

    put64(r->bytes, 0, 1);
    put64(r->bytes, l->object_type, FAKE_BYTES_TYPE);
    put64(r->bytes, l->bytes_size, (uint64_t)size);
    put64(r->bytes, l->bytes_size + 8, (uint64_t)-1); /* the hash */
    if (n)
        memcpy(r->bytes + l->bytes_sval, d, n);
    return r->addr;
}

struct code_spec {
    uint64_t type;
    int32_t firstlineno;
    uint64_t filename, name, qualname, linetable;
    size_t size; /* of the object's memory; 0: 512 */
};

static inline uint64_t make_code(struct image *im, const struct py_layout *l,
                                 const struct code_spec *s)
{
    struct region *r = image_add(im, s->size ? s->size : 512);

    put64(r->bytes, 0, 1);
    put64(r->bytes, l->object_type, s->type);
    put32(r->bytes, l->code_argcount, 2);
    put32(r->bytes, l->code_firstlineno, (uint32_t)s->firstlineno);
    put64(r->bytes, l->code_filename, s->filename);
    put64(r->bytes, l->code_name, s->name);
    if (l->code_qualname >= 0)
        put64(r->bytes, l->code_qualname, s->qualname);
    put64(r->bytes, l->code_linetable, s->linetable);
    return r->addr;
}

/* Memory after a string in most tests: less than STR_FIRST (py_code.c), so
 * that the first read of a string (its header and first characters) fails
 * and the header is read alone, then the characters; enough for the
 * compact header (see test_str_at_end_of_memory). 512: the one-read path. */
#define NEAR_END 32

/* The layouts the fake objects are built in. */
static inline const struct py_layout *layouts(unsigned i)
{
    static const unsigned table[] = {0x0308, 0x030a, 0x030b, 0x030c};
    if (i < 4) {
        const struct py_layout *l = py_layout__for_version(table[i]);
        assert_non_null(l);
        return l;
    }
    return i == 4 ? &py_layout_313 : NULL;
}
#define NLAYOUTS 5

/* A line table in version's format: bytes 0-5 on the first line, 6-13 one
 * further, 14-17 three further; from 3.10 the table ends there (3.11 on:
 * then an instruction without a line, 18-19). */
static inline size_t line_table(unsigned version, uint8_t *t)
{
#define LOC(code, units) ((uint8_t)(0x80 | (code) << 3 | ((units)-1)))
    if (version < 0x030a) {
        static const uint8_t lnotab[] = {6, 1, 8, 2};
        memcpy(t, lnotab, sizeof(lnotab));
        return sizeof(lnotab);
    }
    if (version == 0x030a) {
        static const uint8_t lt[] = {6, 0, 8, 1, 4, 2};
        memcpy(t, lt, sizeof(lt));
        return sizeof(lt);
    }
    const uint8_t loc[] = {LOC(10, 3), 0, 5, LOC(11, 4), 0, 5, LOC(12, 2), 0, 5, LOC(15, 1)};
    memcpy(t, loc, sizeof(loc));
    return sizeof(loc);
#undef LOC
}

/* One whole code object: its names, file, lines, in layout l. */
struct built {
    uint64_t code, name, qualname, file, table;
    uint16_t tag;
};

static inline struct built build(struct image *im, const struct py_layout *l, const char *name,
                                 const char *qualname, const char *file, int32_t first, size_t pad)
{
    struct built b;
    uint8_t t[64];
    size_t n = line_table(l->version, t);

    b.name = make_str(im, l, name, pad);
    b.qualname = l->code_qualname >= 0 ? make_str(im, l, qualname, pad) : 0;
    b.file = make_str(im, l, file, pad);
    b.table = make_bytes(im, l, t, n, (int64_t)n);
    struct code_spec s = {FAKE_CODE_TYPE, first, b.file, b.name, b.qualname, b.table, 0};
    b.code = make_code(im, l, &s);
    b.tag = cx_py_fingerprint((uint32_t)first, b.file, b.name);
    return b;
}

static inline struct py_code *read_ok(struct image *im, const struct py_layout *l,
                                      uint64_t code_type, uint64_t addr, uint16_t tag,
                                      bool keep_lines)
{
    struct py_reader r = reader_of(im);
    const char *why = NULL;
    struct py_code *c = py_code__read(&r, l, code_type, addr, tag, keep_lines, &why);
    if (!c)
        fail_msg("%x: code object at 0x%" PRIx64 ": %s", l->version, addr, why);
    return c;
}

static inline const char *read_fails(struct image *im, const struct py_layout *l,
                                     uint64_t code_type, uint64_t addr, uint16_t tag)
{
    struct py_reader r = reader_of(im);
    const char *why = NULL;
    struct py_code *c = py_code__read(&r, l, code_type, addr, tag, true, &why);
    if (c)
        fail_msg("%x: code object at 0x%" PRIx64 " read as %s", l->version, addr, c->name);
    assert_non_null(why);
    return why;
}

/* --- tests on the fake memory -------------------------------------------- */

static inline int read_str(struct image *im, const struct py_layout *l, uint64_t addr, char *out,
                           size_t outlen)
{
    struct py_reader r = reader_of(im);
    return py_code__read_str(&r, l, addr, out, outlen);
}

#endif
