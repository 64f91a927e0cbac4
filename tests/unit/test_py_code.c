/* py_code: code objects and strings read out of a fake process memory
 * (regions the test builds in each version's layout, reads outside them
 * failing), for 3.8, 3.10, 3.11, 3.12 and 3.13: names in each string kind,
 * qualname and its fallback, the type and fingerprint checks, caps on
 * strings and line tables, malformed strings and sizes, every pointer
 * unreadable in turn; then code objects of real interpreters (pyenv's,
 * Debian's), read with process_vm_readv from a child that says what they
 * are. Run once under valgrind. */
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
static int image_read(void *ctx, uint64_t addr, void *buf, size_t len)
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

static void image_init(struct image *im)
{
    memset(im, 0, sizeof(*im));
    im->next = 0x7f5500001000ull;
}

static void image_free(struct image *im)
{
    for (unsigned i = 0; i < im->n; i++)
        free(im->r[i].bytes);
    memset(im, 0, sizeof(*im));
}

/* A new zeroed region of len bytes, a page of nothing after it. */
static struct region *image_add(struct image *im, size_t len)
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

static struct region *region_of(struct image *im, uint64_t addr)
{
    for (unsigned i = 0; i < im->n; i++) {
        if (im->r[i].addr == addr)
            return &im->r[i];
    }
    fail_msg("no region at 0x%" PRIx64, addr);
    return NULL;
}

static struct py_reader reader_of(struct image *im)
{
    return (struct py_reader){image_read, im};
}

static void put64(uint8_t *b, int32_t off, uint64_t v)
{
    assert_true(off >= 0);
    memcpy(b + off, &v, 8);
}

static void put32(uint8_t *b, int32_t off, uint32_t v)
{
    assert_true(off >= 0);
    memcpy(b + off, &v, 4);
}

/* --- objects in a layout ------------------------------------------------ */

/* UTF-8 to code points (the test's own decoder). Returns how many. */
static size_t utf8_decode(const char *s, uint32_t *out, size_t max)
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
static uint32_t str_state(const struct py_layout *l, unsigned kind, bool compact, bool ascii)
{
    return kind << 2 | (uint32_t)compact << 5 | (uint32_t)ascii << 6 |
           (l->version < 0x030c ? 1u << 7 : 0);
}

/* A compact str of n code points, pad bytes of memory after it. */
static uint64_t make_str_cp(struct image *im, const struct py_layout *l, const uint32_t *cp,
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

static uint64_t make_str(struct image *im, const struct py_layout *l, const char *utf8, size_t pad)
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
static uint64_t make_bytes(struct image *im, const struct py_layout *l, const uint8_t *d, size_t n,
                           int64_t size)
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

static uint64_t make_code(struct image *im, const struct py_layout *l, const struct code_spec *s)
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
static const struct py_layout *layouts(unsigned i)
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
static size_t line_table(unsigned version, uint8_t *t)
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

static void check_lines(const struct py_code *c, int64_t first)
{
    static const struct {
        uint32_t offset;
        int64_t delta;
    } want[] = {{0, 0}, {5, 0}, {6, 1}, {13, 1}, {14, 3}, {17, 3}};
    assert_non_null(c->lines);
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        if (py_code__line(c, want[i].offset) != first + want[i].delta)
            fail_msg("%x: offset %u: line %" PRId64 ", want %" PRId64, c->version, want[i].offset,
                     py_code__line(c, want[i].offset), first + want[i].delta);
    }
    /* A frame not started; past the table (3.10 on: -1 there); no line. */
    assert_int_equal(py_code__line(c, UINT32_MAX), first);
    if (c->version >= 0x030a)
        assert_int_equal(py_code__line(c, 400), first);
    else
        assert_int_equal(py_code__line(c, 400), first + 3);
    if (c->version >= 0x030b)
        assert_int_equal(py_code__line(c, 18), first);
}

/* One whole code object: its names, file, lines, in layout l. */
struct built {
    uint64_t code, name, qualname, file, table;
    uint16_t tag;
};

static struct built build(struct image *im, const struct py_layout *l, const char *name,
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

static struct py_code *read_ok(struct image *im, const struct py_layout *l, uint64_t code_type,
                               uint64_t addr, uint16_t tag, bool keep_lines)
{
    struct py_reader r = reader_of(im);
    const char *why = NULL;
    struct py_code *c = py_code__read(&r, l, code_type, addr, tag, keep_lines, &why);
    if (!c)
        fail_msg("%x: code object at 0x%" PRIx64 ": %s", l->version, addr, why);
    return c;
}

static const char *read_fails(struct image *im, const struct py_layout *l, uint64_t code_type,
                              uint64_t addr, uint16_t tag)
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

static int read_str(struct image *im, const struct py_layout *l, uint64_t addr, char *out,
                    size_t outlen)
{
    struct py_reader r = reader_of(im);
    return py_code__read_str(&r, l, addr, out, outlen);
}

/* Strings whose memory ends where they end (the last object before an
 * unmapped page): their first read fails, the header is read alone. A
 * short ASCII string is smaller than the compact header (PyASCIIObject
 * and its characters, not PyCompactUnicodeObject): reading the compact
 * header's size of it fails where the string does not. */
static void test_str_at_end_of_memory(void **state)
{
    static const char *const strs[] = {"",  "a",    "run",  "run_loop",  "a_longer_ascii_name_x",
                                       "é", "café", "名前", "\U0001F600"};
    unsigned bad = 0, checked = 0;
    (void)state;

    for (unsigned li = 0; li < NLAYOUTS; li++) {
        const struct py_layout *l = layouts(li);
        assert_true(l->unicode_compact_size - l->unicode_ascii_size <= NEAR_END);
        for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
            struct image im;
            char out[64];
            image_init(&im);
            uint64_t a = make_str(&im, l, strs[i], 0);
            int got = read_str(&im, l, a, out, sizeof(out));
            if (got != (int)strlen(strs[i]) || strcmp(out, strs[i]) != 0) {
                printf("%x: \"%s\" (%zu bytes of memory) at the end of its memory: %d\n",
                       l->version, strs[i], region_of(&im, a)->len, got);
                bad++;
            } else {
                /* As a code object's name and file too. */
                struct code_spec cs = {FAKE_CODE_TYPE, 9, a, a, a, 0, 0};
                struct py_code *c =
                    read_ok(&im, l, FAKE_CODE_TYPE, make_code(&im, l, &cs), 0, false);
                assert_string_equal(c->name, strs[i]);
                assert_string_equal(c->filename, strs[i]);
                rt_obj__put(&c->obj);
            }
            checked++;
            image_free(&im);
        }
    }
    printf("%u strings at the end of their memory, %u unreadable\n", checked, bad);
    assert_int_equal(bad, 0);
}

/* Names of each string kind, in each layout, with and without memory after
 * the strings (the one-read path and the header-then-data path). */
static void test_read_each_layout(void **state)
{
    static const struct {
        const char *name, *qualname, *file;
    } names[] = {
        {"run_loop", "Worker.run_loop", "/srv/app/worker.py"},                        /* ASCII */
        {"café_ñandú", "Menu.café_ñandú", "/srv/app/ménu.py"},                        /* Latin-1 */
        {"名前_Ωμέγα", "クラス.名前_Ωμέγα", "/srv/アプリ/名前.py"},                   /* UCS-2 */
        {"f_\U00020000_\U0001F600", "C.f_\U00020000_\U0001F600", "/t/\U0001F40D.py"}, /* UCS-4 */
        {"", "", ""},                                                                 /* empty */
    };
    unsigned checked = 0;
    (void)state;

    for (unsigned li = 0; li < NLAYOUTS; li++) {
        const struct py_layout *l = layouts(li);
        for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
            for (size_t pad = NEAR_END; pad <= 512; pad += 512 - NEAR_END) {
                struct image im;
                image_init(&im);
                struct built b =
                    build(&im, l, names[k].name, names[k].qualname, names[k].file, 42, pad);
                struct py_code *c = read_ok(&im, l, FAKE_CODE_TYPE, b.code, b.tag, true);
                assert_string_equal(c->name, names[k].name);
                /* co_qualname from 3.11; co_name before. */
                assert_string_equal(c->qualname,
                                    l->version >= 0x030b ? names[k].qualname : names[k].name);
                assert_string_equal(c->filename, names[k].file);
                assert_int_equal(c->firstlineno, 42);
                assert_int_equal(c->version, l->version);
                assert_int_equal(c->tag, b.tag);
                assert_int_equal(c->obj.refs, 1);
                uint8_t t[64];
                size_t n = line_table(l->version, t);
                assert_int_equal(c->nlines, n);
                assert_memory_equal(c->lines, t, n);
                check_lines(c, 42);
                assert_true(c->bytes >= sizeof(*c) + strlen(c->name) + strlen(c->qualname) +
                                            strlen(c->filename) + 3 + n);
                /* With memory after each string, no read fails (without,
                 * a string's first read, header and STR_FIRST bytes, does). */
                if (pad == 512)
                    assert_int_equal(im.failed, 0);

                /* The same contents elsewhere: the same hash; another
                 * name: another. */
                struct built b2 =
                    build(&im, l, names[k].name, names[k].qualname, names[k].file, 42, pad);
                struct py_code *c2 = read_ok(&im, l, FAKE_CODE_TYPE, b2.code, 0, true);
                assert_int_equal(c->hash, c2->hash);
                struct built b3 = build(&im, l, "other", "other", names[k].file, 42, pad);
                struct py_code *c3 = read_ok(&im, l, FAKE_CODE_TYPE, b3.code, 0, true);
                assert_int_not_equal(c->hash, c3->hash);
                /* Without the lines. */
                struct py_code *c4 = read_ok(&im, l, FAKE_CODE_TYPE, b.code, b.tag, false);
                assert_null(c4->lines);
                assert_int_equal(c4->nlines, 0);
                assert_int_equal(py_code__line(c4, 6), 42);
                assert_int_equal(py_code__line(c4, UINT32_MAX), 42);

                rt_obj__put(&c->obj);
                rt_obj__put(&c2->obj);
                rt_obj__put(&c3->obj);
                rt_obj__put(&c4->obj);
                image_free(&im);
                checked++;
            }
        }
    }
    printf("%u code objects read in %d layouts\n", checked, NLAYOUTS);
}

/* Strings alone: each kind to UTF-8, code points UTF-8 cannot carry, the
 * output's size at its smallest. */
static void test_read_str(void **state)
{
    (void)state;
    for (unsigned li = 0; li < NLAYOUTS; li++) {
        const struct py_layout *l = layouts(li);
        struct image im;
        char out[64];
        image_init(&im);

        static const char *const ok[] = {"a", "ÿ", "Āā", "\U0010FFFF", "a\U00010000ÿĀ"};
        for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
            uint64_t s = make_str(&im, l, ok[i], NEAR_END);
            assert_int_equal(read_str(&im, l, s, out, sizeof(out)), (int)strlen(ok[i]));
            assert_string_equal(out, ok[i]);
        }
        /* Lone surrogates and values past Unicode: U+FFFD. */
        static const uint32_t bad[] = {'a', 0xd800, 0xdfff, 0x110000, 0xffffffff, 'z'};
        uint64_t s = make_str_cp(&im, l, bad, 6, NEAR_END);
        assert_int_equal(read_str(&im, l, s, out, sizeof(out)), 14);
        assert_string_equal(out, "a\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdz");
        /* A string saying ASCII with bytes past 0x7f: Latin-1's reading. */
        s = make_str(&im, l, "abc", NEAR_END);
        region_of(&im, s)->bytes[l->unicode_ascii_size + 1] = 0xe9;
        assert_int_equal(read_str(&im, l, s, out, sizeof(out)), 4);
        assert_string_equal(out, "a\xc3\xa9"
                                 "c");

        /* The output at its smallest: 5 bytes, room for one character. */
        s = make_str(&im, l, "ab", NEAR_END);
        assert_int_equal(read_str(&im, l, s, out, 5), 4);
        assert_string_equal(out, "a...");
        s = make_str(&im, l, "a", NEAR_END);
        assert_int_equal(read_str(&im, l, s, out, 5), 1);
        assert_string_equal(out, "a");
        s = make_str(&im, l, "é", NEAR_END); /* two bytes do not fit in one */
        assert_int_equal(read_str(&im, l, s, out, 5), 3);
        assert_string_equal(out, "...");
        assert_int_equal(read_str(&im, l, s, out, 4), -EINVAL);
        assert_int_equal(read_str(&im, l, s, out, 0), -EINVAL);
        assert_int_equal(read_str(&im, l, 0, out, sizeof(out)), -EINVAL);
        assert_true(read_str(&im, l, 0x1000, out, sizeof(out)) < 0);
        image_free(&im);
    }
}

/* Names and files longer than their caps: cut at a character, "..." added. */
static void test_caps(void **state)
{
    (void)state;
    for (unsigned li = 0; li < NLAYOUTS; li++) {
        const struct py_layout *l = layouts(li);
        struct image im;
        image_init(&im);
        size_t big = 3 * PY_CODE_MAX_FILE;
        char *s = malloc(4 * big + 1), *want = malloc(4 * big + 1);
        char out[PY_CODE_MAX_NAME];
        assert_non_null(s);
        assert_non_null(want);

        /* ASCII: at the cap minus 4 and one more. */
        static const size_t lens[] = {PY_CODE_MAX_NAME - 5, PY_CODE_MAX_NAME - 4,
                                      PY_CODE_MAX_NAME - 3, PY_CODE_MAX_NAME,
                                      PY_CODE_MAX_NAME + 1, 5000};
        for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
            memset(s, 'n', lens[i]);
            s[lens[i]] = '\0';
            uint64_t a = make_str(&im, l, s, NEAR_END);
            int got = read_str(&im, l, a, out, sizeof(out));
            if (lens[i] <= PY_CODE_MAX_NAME - 4) {
                assert_int_equal(got, (int)lens[i]);
                assert_string_equal(out, s);
            } else {
                memset(want, 'n', PY_CODE_MAX_NAME - 4);
                memcpy(want + PY_CODE_MAX_NAME - 4, "...", 4);
                assert_int_equal(got, PY_CODE_MAX_NAME - 1);
                assert_string_equal(out, want);
            }
        }
        /* Three-byte characters after one ASCII: 339 of them fit in 1020
         * bytes (1018), the 340th not. */
        s[0] = 'a';
        for (size_t i = 0; i < 2000; i++)
            memcpy(s + 1 + 3 * i, "名", 3);
        s[1 + 3 * 2000] = '\0';
        uint64_t a = make_str(&im, l, s, NEAR_END);
        assert_int_equal(read_str(&im, l, a, out, sizeof(out)), 1 + 3 * 339 + 3);
        memcpy(want, s, 1 + 3 * 339);
        memcpy(want + 1 + 3 * 339, "...", 4);
        assert_string_equal(out, want);
        /* Four-byte ones: 255 exactly fill 1020 bytes; more are cut. */
        for (size_t n = 255; n <= 256; n++) {
            for (size_t i = 0; i < n; i++)
                memcpy(s + 4 * i, "\U0001F600", 4);
            s[4 * n] = '\0';
            a = make_str(&im, l, s, NEAR_END);
            int got = read_str(&im, l, a, out, sizeof(out));
            if (n == 255) {
                assert_int_equal(got, 1020);
                assert_string_equal(out, s);
            } else {
                memcpy(want, s, 1020);
                memcpy(want + 1020, "...", 4);
                assert_int_equal(got, 1023);
                assert_string_equal(out, want);
            }
        }

        /* Through py_code__read: a long name and a longer file. */
        memset(s, 'q', 3000);
        s[3000] = '\0';
        uint64_t name = make_str(&im, l, s, NEAR_END);
        memset(s, 'f', big);
        s[big] = '\0';
        uint64_t file = make_str(&im, l, s, NEAR_END);
        struct code_spec cs = {FAKE_CODE_TYPE, 7, file, name, name, 0, 0};
        struct py_code *c = read_ok(&im, l, FAKE_CODE_TYPE, make_code(&im, l, &cs), 0, true);
        assert_int_equal(strlen(c->name), PY_CODE_MAX_NAME - 1);
        assert_int_equal(strlen(c->qualname), PY_CODE_MAX_NAME - 1);
        assert_int_equal(strlen(c->filename), PY_CODE_MAX_FILE - 1);
        assert_string_equal(c->name + PY_CODE_MAX_NAME - 4, "...");
        assert_string_equal(c->filename + PY_CODE_MAX_FILE - 4, "...");
        assert_int_equal(c->filename[0], 'f');
        rt_obj__put(&c->obj);
        free(s);
        free(want);
        image_free(&im);
    }
}

/* Strings py_code does not read: not compact, kinds that are none, an
 * ASCII flag on a wide kind, lengths past 2^30, data past the memory. As a
 * name or file the code object is refused; as a qualname, the name stands
 * in. */
static void test_odd_strings(void **state)
{
    static const struct {
        const char *what;
        unsigned kind;
        bool compact, ascii;
        uint64_t length;
    } odd[] = {
        {"not compact", 1, false, false, 3},
        {"not compact, ASCII", 1, false, true, 3},
        {"kind 0 (wchar_t, before 3.12)", 0, true, false, 3},
        {"kind 3", 3, true, false, 3},
        {"kind 5", 5, true, false, 3},
        {"kind 7", 7, true, false, 3},
        {"ASCII of kind 2", 2, true, true, 3},
        {"ASCII of kind 4", 4, true, true, 3},
        {"length 2^30 + 1", 1, true, true, (1u << 30) + 1},
        {"length 2^63", 1, true, true, 1ull << 63},
        {"length 2^64 - 1", 2, true, false, ~0ull},
        {"length past the memory", 1, true, true, 500},
        {"length 2^30 of UCS-4", 4, true, false, 1u << 30},
    };
    unsigned cases = 0;
    (void)state;

    for (unsigned li = 0; li < NLAYOUTS; li++) {
        const struct py_layout *l = layouts(li);
        for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
            struct image im;
            char out[PY_CODE_MAX_NAME];
            image_init(&im);
            struct built b = build(&im, l, "good", "Outer.good", "/x.py", 3, NEAR_END);
            uint64_t s = make_str(&im, l, "abc", NEAR_END);
            uint8_t *bytes = region_of(&im, s)->bytes;
            put32(bytes, l->unicode_state, str_state(l, odd[i].kind, odd[i].compact, odd[i].ascii));
            put64(bytes, l->unicode_length, odd[i].length);
            int got = read_str(&im, l, s, out, sizeof(out));
            if (got >= 0)
                fail_msg("%x: %s read as \"%s\"", l->version, odd[i].what, out);

            /* As the name, the file, the qualname. */
            for (int as = 0; as < 3; as++) {
                if (as == 2 && l->code_qualname < 0)
                    continue;
                struct code_spec cs = {FAKE_CODE_TYPE,
                                       3,
                                       as == 1 ? s : b.file,
                                       as == 0 ? s : b.name,
                                       as == 2 ? s : b.qualname,
                                       b.table,
                                       0};
                uint64_t code = make_code(&im, l, &cs);
                if (as < 2) {
                    const char *why = read_fails(&im, l, FAKE_CODE_TYPE, code, 0);
                    assert_non_null(strstr(why, "names"));
                } else {
                    struct py_code *c = read_ok(&im, l, FAKE_CODE_TYPE, code, 0, true);
                    assert_string_equal(c->qualname, "good");
                    rt_obj__put(&c->obj);
                }
                cases++;
            }
            image_free(&im);
        }
    }
    printf("%u odd strings as names, files and qualnames\n", cases);
}

/* The type check, and the fingerprint: a code object freed and another
 * made at its address is not named as the one sampled. */
static void test_type_and_tag(void **state)
{
    (void)state;
    for (unsigned li = 0; li < NLAYOUTS; li++) {
        const struct py_layout *l = layouts(li);
        struct image im;
        image_init(&im);
        struct built a = build(&im, l, "first", "A.first", "/a.py", 10, NEAR_END);

        /* Of another type: refused when the type is known, read when not. */
        uint8_t *code = region_of(&im, a.code)->bytes;
        put64(code, l->object_type, FAKE_STR_TYPE);
        const char *why = read_fails(&im, l, FAKE_CODE_TYPE, a.code, a.tag);
        assert_non_null(strstr(why, "not a code object"));
        struct py_code *c = read_ok(&im, l, 0, a.code, a.tag, true);
        assert_string_equal(c->name, "first");
        rt_obj__put(&c->obj);
        put64(code, l->object_type, FAKE_CODE_TYPE);
        /* A string taken for a code object. */
        why = read_fails(&im, l, FAKE_CODE_TYPE, make_str(&im, l, "not code", 512), NEAR_END);
        assert_non_null(strstr(why, "not a code object"));

        /* The fingerprint: any other tag is another code object. */
        for (unsigned bit = 0; bit < 16; bit++) {
            if ((a.tag ^ (1u << bit)) == 0)
                continue; /* 0 is "not checked" */
            why = read_fails(&im, l, FAKE_CODE_TYPE, a.code, (uint16_t)(a.tag ^ (1u << bit)));
            assert_non_null(strstr(why, "changed"));
        }
        c = read_ok(&im, l, FAKE_CODE_TYPE, a.code, 0, true); /* 0: not checked */
        rt_obj__put(&c->obj);

        /* Freed, and another made at the same address: its first line, or
         * its name's address, or its file's. */
        struct built b = build(&im, l, "second", "B.second", "/b.py", 20, NEAR_END);
        uint8_t saved[512];
        memcpy(saved, code, 512);
        for (int what = 0; what < 3; what++) {
            memcpy(code, saved, 512);
            if (what == 0)
                put32(code, l->code_firstlineno, 11);
            else if (what == 1)
                put64(code, l->code_name, b.name);
            else
                put64(code, l->code_filename, b.file);
            uint16_t now = cx_py_fingerprint(what == 0 ? 11 : 10, what == 2 ? b.file : a.file,
                                             what == 1 ? b.name : a.name);
            if (now == a.tag)
                continue; /* one in 65536: the same fingerprint */
            why = read_fails(&im, l, FAKE_CODE_TYPE, a.code, a.tag);
            assert_non_null(strstr(why, "changed"));
            c = read_ok(&im, l, FAKE_CODE_TYPE, a.code, now, true);
            assert_int_equal(c->tag, now);
            assert_string_equal(c->name, what == 1 ? "second" : "first");
            rt_obj__put(&c->obj);
        }
        image_free(&im);
    }
}

/* Line tables: sizes negative, huge, past the cap or past the memory are
 * left out (the first line stands for every offset); at the cap, kept. */
static void test_table_sizes(void **state)
{
    static const int64_t sizes[] = {
        -1,        INT64_MIN,        PY_CODE_MAX_LINES + 1,
        INT64_MAX, (int64_t)1 << 32, (int64_t)PY_CODE_MAX_LINES - 1 /* past the memory */};
    (void)state;

    for (unsigned li = 0; li < NLAYOUTS; li++) {
        const struct py_layout *l = layouts(li);
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
            struct image im;
            image_init(&im);
            struct built b = build(&im, l, "f", "f", "/f.py", 30, NEAR_END);
            put64(region_of(&im, b.table)->bytes, l->bytes_size, (uint64_t)sizes[i]);
            struct py_code *c = read_ok(&im, l, FAKE_CODE_TYPE, b.code, b.tag, true);
            assert_null(c->lines);
            assert_int_equal(c->nlines, 0);
            assert_string_equal(c->name, "f");
            assert_int_equal(py_code__line(c, 0), 30);
            assert_int_equal(py_code__line(c, 14), 30);
            assert_int_equal(py_code__line(c, UINT32_MAX), 30);
            rt_obj__put(&c->obj);
            image_free(&im);
        }
        /* Empty, and exactly PY_CODE_MAX_LINES bytes (of one-line entries:
         * (2, 0) pairs up to 3.10, short-form location entries from 3.11). */
        for (int at_cap = 0; at_cap < 2; at_cap++) {
            struct image im;
            image_init(&im);
            size_t n = at_cap ? PY_CODE_MAX_LINES : 0;
            uint8_t *t = malloc(n + 1);
            assert_non_null(t);
            for (size_t k = 0; k < n; k += 2) {
                t[k] = l->version >= 0x030b ? 0x80 : 2; /* LOC(0, 1) : 2 bytes */
                t[k + 1] = 0;
            }
            uint64_t table = make_bytes(&im, l, t, n, (int64_t)n);
            uint64_t name = make_str(&im, l, "g", NEAR_END),
                     file = make_str(&im, l, "/g.py", NEAR_END);
            struct code_spec cs = {FAKE_CODE_TYPE, 5, file, name, name, table, 0};
            struct py_code *c = read_ok(&im, l, FAKE_CODE_TYPE, make_code(&im, l, &cs), 0, true);
            assert_int_equal(c->nlines, n);
            if (n) {
                assert_memory_equal(c->lines, t, n);
                assert_int_equal(py_code__line(c, 1000), 5);
            }
            assert_int_equal(py_code__line(c, 0), 5);
            assert_int_equal(py_code__line(c, UINT32_MAX), 5);
            rt_obj__put(&c->obj);
            free(t);
            image_free(&im);
        }
    }
}

/* Each region unreadable in turn: the code object or its names refuse it,
 * a qualname falls back to the name, a table costs the lines. Then every
 * pointer 0, and the code object cut at each length short of what is read
 * of it. */
static void test_unreadable(void **state)
{
    unsigned cases = 0;
    (void)state;

    for (unsigned li = 0; li < NLAYOUTS; li++) {
        const struct py_layout *l = layouts(li);
        for (int pad = 0; pad < 2; pad++) {
            struct image im;
            image_init(&im);
            struct built b = build(&im, l, "h", "K.h", "/h.py", 50, pad ? 512 : NEAR_END);
            const struct {
                uint64_t addr;
                const char *why; /* NULL: read, with what is missing replaced */
            } parts[] = {
                {b.code, "unreadable"}, {b.name, "names"}, {b.file, "names"},
                {b.qualname, NULL},     {b.table, NULL},
            };
            for (size_t p = 0; p < sizeof(parts) / sizeof(parts[0]); p++) {
                if (!parts[p].addr)
                    continue;
                struct region *r = region_of(&im, parts[p].addr);
                r->unreadable = true;
                if (parts[p].why) {
                    const char *why = read_fails(&im, l, FAKE_CODE_TYPE, b.code, b.tag);
                    assert_non_null(strstr(why, parts[p].why));
                } else {
                    struct py_code *c = read_ok(&im, l, FAKE_CODE_TYPE, b.code, b.tag, true);
                    assert_string_equal(c->name, "h");
                    if (parts[p].addr == b.table) {
                        assert_null(c->lines);
                        assert_int_equal(py_code__line(c, 14), 50);
                        assert_string_equal(c->qualname, l->code_qualname >= 0 ? "K.h" : "h");
                    } else {
                        assert_string_equal(c->qualname, "h");
                        assert_non_null(c->lines);
                    }
                    rt_obj__put(&c->obj);
                }
                r->unreadable = false;
                cases++;
            }
            /* A string's header readable, its characters not: the region
             * ends inside them. */
            struct region *nr = region_of(&im, b.file);
            size_t keep = nr->len;
            nr->len = (size_t)l->unicode_ascii_size + 2;
            const char *why = read_fails(&im, l, FAKE_CODE_TYPE, b.code, b.tag);
            assert_non_null(strstr(why, "names"));
            nr->len = keep;
            /* A table's header readable, its bytes not. */
            struct region *tr = region_of(&im, b.table);
            keep = tr->len;
            tr->len = (size_t)l->bytes_sval + 1;
            struct py_code *c = read_ok(&im, l, FAKE_CODE_TYPE, b.code, b.tag, true);
            assert_null(c->lines);
            rt_obj__put(&c->obj);
            tr->len = keep;
            cases += 2;
            image_free(&im);
        }

        /* Every pointer 0 in turn. */
        struct image im;
        image_init(&im);
        struct built b = build(&im, l, "z", "Z.z", "/z.py", 60, NEAR_END);
        uint8_t *code = region_of(&im, b.code)->bytes;
        int32_t ptrs[] = {l->code_name, l->code_filename, l->code_qualname, l->code_linetable};
        for (size_t p = 0; p < 4; p++) {
            if (ptrs[p] < 0)
                continue;
            uint8_t saved[8];
            memcpy(saved, code + ptrs[p], 8);
            put64(code, ptrs[p], 0);
            if (p < 2) {
                const char *why = read_fails(&im, l, FAKE_CODE_TYPE, b.code, 0);
                assert_non_null(strstr(why, "names"));
            } else {
                struct py_code *c = read_ok(&im, l, FAKE_CODE_TYPE, b.code, 0, true);
                assert_string_equal(c->name, "z");
                if (p == 2)
                    assert_string_equal(c->qualname, "z");
                else
                    assert_null(c->lines);
                rt_obj__put(&c->obj);
            }
            memcpy(code + ptrs[p], saved, 8);
            cases++;
        }
        /* The code object's memory ending early: what py_code reads of it
         * is the furthest field it uses plus 8. */
        size_t need = 0;
        int32_t used[] = {l->object_type,   l->code_firstlineno, l->code_filename, l->code_name,
                          l->code_qualname, l->code_linetable,   l->code_argcount};
        for (size_t k = 0; k < sizeof(used) / sizeof(used[0]); k++)
            need = used[k] >= 0 && (size_t)used[k] + 8 > need ? (size_t)used[k] + 8 : need;
        struct region *cr = region_of(&im, b.code);
        for (size_t len = 0; len <= need; len++) {
            cr->len = len;
            if (len < need) {
                const char *why = read_fails(&im, l, FAKE_CODE_TYPE, b.code, 0);
                assert_non_null(strstr(why, "unreadable"));
            } else {
                struct py_code *c = read_ok(&im, l, FAKE_CODE_TYPE, b.code, 0, true);
                rt_obj__put(&c->obj);
            }
            cases++;
        }
        cr->len = 512;
        /* Nothing at all there, or at 0. */
        assert_non_null(strstr(read_fails(&im, l, FAKE_CODE_TYPE, 0, 0), "unreadable"));
        assert_non_null(strstr(read_fails(&im, l, FAKE_CODE_TYPE, 0x1000, 0), "unreadable"));
        assert_non_null(strstr(read_fails(&im, l, FAKE_CODE_TYPE, ~0ull - 4, 0), "unreadable"));
        image_free(&im);
    }
    printf("%u unreadable cases\n", cases);
}

/* Layouts py_code cannot use. */
static void test_bad_layout(void **state)
{
    struct image im;
    struct py_layout l = py_layout_313;
    (void)state;

    image_init(&im);
    struct built b = build(&im, &l, "x", "x", "/x.py", 1, NEAR_END);
    l.code_name = -1;
    assert_non_null(strstr(read_fails(&im, &l, FAKE_CODE_TYPE, b.code, 0), "layout"));
    l = py_layout_313;
    l.code_linetable = 600; /* past what is read of a code object */
    assert_non_null(strstr(read_fails(&im, &l, FAKE_CODE_TYPE, b.code, 0), "layout"));
    l = py_layout_313;
    l.unicode_compact_size = 4096; /* a string header too big to read */
    char out[16];
    assert_int_equal(read_str(&im, &l, b.name, out, sizeof(out)), -EINVAL);
    image_free(&im);
}

/* --- real interpreters --------------------------------------------------- */

/* The child: code objects with names of each kind, in files named in each
 * kind, described on stdout (strings in hex UTF-8, each even offset's line,
 * 0 for none); then it waits for stdin to close. */
static const char child_script[] =
    "import sys, dis\n"
    "SRC = '''\n"
    "def plain(a, b):\n"
    "    c = a + b\n"
    "    if c > 10:\n"
    "        return c * 2\n"
    "    return c\n"
    "\n"
    "def caf\\xe9_\\xf1(x):\n"
    "    return [i * x for i in range(3)]\n"
    "\n"
    "def \\u540d\\u524d(x):\n"
    "    y = x\n"
    "    for i in range(2):\n"
    "        y += i\n"
    "\n"
    "\n"
    "    return y\n"
    "\n"
    "def f_\\U00020000(x):\n"
    "    return x\n"
    "\n"
    "class Outer:\n"
    "    def method(self):\n"
    "        def inner():\n"
    "            return 1\n"
    "        return inner\n"
    "\n"
    "def LONGNAME():\n"
    "    pass\n"
    "'''\n"
    "keep = []\n"
    "def load(src, filename):\n"
    "    ns = {}\n"
    "    exec(compile(src, filename, 'exec'), ns)\n"
    "    keep.append(ns)\n"
    "    return ns\n"
    "a = load(SRC.replace('LONGNAME', 'n' * 1500), "
    "'/tmp/\\u30d5\\u30a1\\u30a4\\u30eb_\\U0001F600.py')\n"
    "b = load('def g(x):\\n    return x\\n', '/srv/caf\\xe9/m\\xf3dulo.py')\n"
    "c = load('def h(x):\\n    return -x\\n', '/srv/app/plain.py')\n"
    "fns = [a['plain'], a['caf\\xe9_\\xf1'], a['\\u540d\\u524d'], a['f_\\U00020000'],\n"
    "       a['Outer'].method, a['Outer']().method(), a['n' * 1500], b['g'], c['h']]\n"
    "keep.append(fns)\n"
    "def hx(s):\n"
    "    return s.encode('utf-8').hex() or '-'\n"
    "def lines(co):\n"
    "    n = len(co.co_code) // 2\n"
    "    out = [0] * n\n"
    "    if sys.version_info >= (3, 10):\n"
    "        for start, end, line in co.co_lines():\n"
    "            for o in range(start, end, 2):\n"
    "                if o // 2 < n:\n"
    "                    out[o // 2] = line or 0\n"
    "    else:\n"
    "        starts = list(dis.findlinestarts(co))\n"
    "        for i in range(n):\n"
    "            line = co.co_firstlineno\n"
    "            for o, l in starts:\n"
    "                if o <= 2 * i:\n"
    "                    line = l\n"
    "            out[i] = line\n"
    "    return out\n"
    "print('python', sys.hexversion >> 16, id(type(fns[0].__code__)))\n"
    "for f in fns:\n"
    "    co = f.__code__\n"
    "    q = getattr(co, 'co_qualname', co.co_name)\n"
    "    print('code', id(co), co.co_firstlineno, id(co.co_filename), id(co.co_name))\n"
    "    print('names', hx(co.co_name), hx(q), hx(co.co_filename))\n"
    "    ls = lines(co)\n"
    "    print('lines', len(ls), *ls)\n"
    "print('end', len(fns))\n"
    "sys.stdout.flush()\n"
    "sys.stdin.read()\n";

struct child {
    pid_t pid;
    FILE *out;
    int in;
};

static void spawn(const char *python, struct child *c)
{
    int out[2], in[2];

    assert_int_equal(pipe2(out, O_CLOEXEC), 0);
    assert_int_equal(pipe2(in, O_CLOEXEC), 0);
    c->pid = fork();
    assert_true(c->pid >= 0);
    if (c->pid == 0) {
        dup2(out[1], 1);
        dup2(in[0], 0);
        execl(python, python, "-I", "-c", child_script, (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    close(in[0]);
    c->out = fdopen(out[0], "r");
    assert_non_null(c->out);
    c->in = in[1];
}

static void reap(struct child *c)
{
    int status;

    close(c->in); /* its stdin ends: it exits */
    fclose(c->out);
    if (waitpid(c->pid, &status, 0) != c->pid)
        fail_msg("child %d: %s", (int)c->pid, strerror(errno));
}

/* Hex UTF-8 ("-" for empty) into out. */
static void unhex(const char *hex, char *out, size_t outlen)
{
    size_t n = 0;

    if (strcmp(hex, "-") != 0) {
        for (; hex[0] && hex[1] && n + 1 < outlen; hex += 2)
            sscanf(hex, "%2hhx", (unsigned char *)&out[n++]);
    }
    out[n] = '\0';
}

/* A name as py_code keeps it: cut to cap - 4 bytes at a character, "...". */
static void capped(const char *s, size_t cap, char *out)
{
    size_t len = strlen(s);

    if (len <= cap - 4) {
        memcpy(out, s, len + 1);
        return;
    }
    size_t at = cap - 4;
    while (at > 0 && ((uint8_t)s[at] & 0xc0) == 0x80)
        at--;
    memcpy(out, s, at);
    memcpy(out + at, "...", 4);
}

/* Reads every code object the child describes; returns how many. */
static unsigned check_child(const char *label, const char *python, const struct py_layout *l,
                            unsigned want_version)
{
    struct child ch;
    unsigned version, n = 0, nfns = 0, offsets = 0;
    unsigned long long code_type;
    char word[16];

    spawn(python, &ch);
    if (fscanf(ch.out, " python %u %llu", &version, &code_type) != 2)
        fail_msg("%s: %s said nothing", label, python);
    assert_int_equal(version, want_version);
    assert_int_equal(l->version, version);
    struct py_reader r = {py_reader__pid, (void *)(intptr_t)ch.pid};

    static char hex[3][16384], name[8192], qual[8192], file[8192], want[8192];
    while (fscanf(ch.out, " %15s", word) == 1 && strcmp(word, "code") == 0) {
        unsigned long long code, file_id, name_id;
        long long first;
        size_t nl;
        const char *why = NULL;

        if (fscanf(ch.out, "%llu %lld %llu %llu names %16383s %16383s %16383s lines %zu", &code,
                   &first, &file_id, &name_id, hex[0], hex[1], hex[2], &nl) != 8)
            fail_msg("%s: bad description", label);
        unhex(hex[0], name, sizeof(name));
        unhex(hex[1], qual, sizeof(qual));
        unhex(hex[2], file, sizeof(file));
        uint16_t tag = cx_py_fingerprint((uint32_t)first, file_id, name_id);
        struct py_code *c = py_code__read(&r, l, code_type, code, tag, true, &why);
        if (!c)
            fail_msg("%s: %s: code object 0x%llx: %s", label, name, code, why);
        capped(name, PY_CODE_MAX_NAME, want);
        assert_string_equal(c->name, want);
        capped(l->version >= 0x030b ? qual : name, PY_CODE_MAX_NAME, want);
        assert_string_equal(c->qualname, want);
        capped(file, PY_CODE_MAX_FILE, want);
        assert_string_equal(c->filename, want);
        assert_int_equal(c->firstlineno, first);
        assert_int_equal(c->tag, tag);
        assert_non_null(c->lines);
        for (size_t i = 0; i < nl; i++) {
            long long line;
            assert_int_equal(fscanf(ch.out, "%lld", &line), 1);
            int64_t got = py_code__line(c, (uint32_t)(2 * i)), exp = line > 0 ? line : first;
            if (got != exp)
                fail_msg("%s: %s: offset %zu: line %" PRId64 ", the interpreter says %lld", label,
                         name, 2 * i, got, line);
            offsets++;
        }
        assert_int_equal(py_code__line(c, UINT32_MAX), first);

        /* What the agent must refuse of the same memory. */
        why = NULL;
        assert_null(py_code__read(&r, l, code_type + 8, code, tag, true, &why));
        assert_non_null(strstr(why, "not a code object"));
        if ((tag ^ 0x100) != 0) {
            assert_null(py_code__read(&r, l, code_type, code, (uint16_t)(tag ^ 0x100), true, &why));
            assert_non_null(strstr(why, "changed"));
        }
        assert_null(py_code__read(&r, l, code_type, name_id, 0, true, &why));
        assert_non_null(strstr(why, "not a code object"));
        rt_obj__put(&c->obj);
        n++;
    }
    if (strcmp(word, "end") != 0 || fscanf(ch.out, "%u", &nfns) != 1 || nfns != n)
        fail_msg("%s: %u code objects read, the child described %u", label, n, nfns);
    /* Nothing mapped at 16. */
    const char *why = NULL;
    assert_null(py_code__read(&r, l, code_type, 16, 0, true, &why));
    assert_non_null(strstr(why, "unreadable"));
    reap(&ch);
    printf("%s (%s): %u code objects, %u offsets' lines as the interpreter says\n", label, python,
           n, offsets);
    return n;
}

static void test_real_processes(void **state)
{
    struct pyenv_python py[64];
    int n = pyenv_pythons(7, py, 64), checked = 0;
    (void)state;

    signal(SIGPIPE, SIG_IGN);
    for (int i = 0; i < n; i++) {
        char bin[700], lib[700];
        struct py_binary b;
        const struct py_layout *l;
        if (!py_file(py[i].prefix, py[i].version, "bin", bin, sizeof(bin)))
            fail_msg("pyenv's %s has no interpreter under %s", py[i].name, py[i].prefix);
        if (py[i].version <= 0x030c) {
            l = py_layout__for_version(py[i].version);
            assert_non_null(l);
        } else {
            /* 3.13 on: the layout the interpreter carries, as the agent reads it. */
            if (!py_file(py[i].prefix, py[i].version, "lib", lib, sizeof(lib)))
                snprintf(lib, sizeof(lib), "%s", bin);
            int fd = open(lib, O_RDONLY);
            assert_true(fd >= 0);
            assert_int_equal(py_detect__elf(fd, lib, &b), 1);
            close(fd);
            if (!b.usable)
                fail_msg("%s: %s", lib, b.why);
            l = &b.layout;
        }
        check_child(py[i].name, bin, l, py[i].version);
        checked++;
    }
    if (py_is_file("/usr/bin/python3")) {
        struct py_binary b;
        int fd = open("/usr/bin/python3", O_RDONLY);
        assert_true(fd >= 0);
        assert_int_equal(py_detect__elf(fd, "/usr/bin/python3", &b), 1);
        close(fd);
        if (!b.usable)
            fail_msg("/usr/bin/python3: %s", b.why);
        const struct py_layout *l =
            b.version <= 0x030c ? py_layout__for_version(b.version) : &b.layout;
        assert_non_null(l);
        check_child("debian", "/usr/bin/python3", l, b.version);
        checked++;
    }
    printf("real interpreters: %d checked (pyenv has %d CPython 3.7+)\n", checked, n);
    if (n > 0 && checked < n)
        fail_msg("pyenv has %d CPython 3.7+, %d checked", n, checked);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_each_layout),     cmocka_unit_test(test_read_str),
        cmocka_unit_test(test_str_at_end_of_memory), cmocka_unit_test(test_caps),
        cmocka_unit_test(test_odd_strings),          cmocka_unit_test(test_type_and_tag),
        cmocka_unit_test(test_table_sizes),          cmocka_unit_test(test_unreadable),
        cmocka_unit_test(test_bad_layout),           cmocka_unit_test(test_real_processes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
