/* The V8 runtime's two readers (agent/runtimes/v8/): v8_detect on this
 * machine's node and on shared objects holding V8's constants as node 20
 * exports them (tests/unit/v8dbg_fake.c: as is, with pointer compression,
 * with one left out), and v8_fn on V8 objects laid out in a fake memory:
 * names from strings (sequential, two-byte, cons, thin, sliced) and from
 * ScopeInfo, lines from line ends and from the source, and garbage. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../agent/runtimes/v8/v8_detect.h"
#include "../../agent/runtimes/v8/v8_fn.h"

#ifndef TEST_SO_DIR
#define TEST_SO_DIR "build/tests"
#endif

static int detect_path(const char *path, struct v8_binary *out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int r;

    if (fd < 0)
        return -2;
    r = v8_detect__elf(fd, out);
    close(fd);
    return r;
}

static void test_detect_node(void **state)
{
    struct v8_binary b;
    int r;

    (void)state;
    r = detect_path("/usr/bin/node", &b);
    if (r == -2) {
        skip();
        return;
    }
    assert_int_equal(r, 1);
    assert_true(b.usable);
    assert_true(b.nconsts > 100);
    assert_int_equal(b.l.fp_context, b.l.fp_function + 8);
    assert_true(b.l.type_fn_last >= b.l.type_fn_first);
    assert_true(b.l.type_fn_last < b.l.type_fn_first + 64);
    assert_true(b.l.type_sfi < b.l.type_fn_first || b.l.type_sfi > b.l.type_fn_last);
    struct cx_v8_proc p;
    v8_detect__to_bpf(&b.l, &p);
    assert_int_equal(p.fn_shared, b.l.fn_shared);
    assert_true(p.sfi_name % 8 == 0 && p.sfi_script % 8 == 0 && p.fn_shared % 8 == 0);
}

static void test_detect_fake(void **state)
{
    struct v8_binary b;

    (void)state;
    assert_int_equal(detect_path(TEST_SO_DIR "/v8dbg_fake.so", &b), 1);
    assert_true(b.usable);
    assert_int_equal(b.l.fp_function, -16);
    assert_int_equal(b.l.fn_shared, 24);
    assert_int_equal(b.l.type_fn_first, 2066);
    /* Up to the next type exported after JS_FUNCTION_TYPE. */
    assert_int_equal(b.l.type_fn_last, 2096);
    assert_int_equal(b.l.seq_tag, 0);
    assert_int_equal(b.l.one_byte_tag, 8);

    assert_int_equal(detect_path(TEST_SO_DIR "/v8dbg_ptrcomp.so", &b), 1);
    assert_false(b.usable);
    assert_non_null(strstr(b.why, "pointer compression"));

    assert_int_equal(detect_path(TEST_SO_DIR "/v8dbg_noscript.so", &b), 1);
    assert_false(b.usable);
    assert_non_null(strstr(b.why, "v8dbg_class_Script__name__Object"));

    /* V8 13's names for the SharedFunctionInfo's fields. */
    assert_int_equal(detect_path(TEST_SO_DIR "/v8dbg_v13.so", &b), 1);
    assert_true(b.usable);
    assert_int_equal(b.l.fn_shared, 32);
    assert_int_equal(b.l.sfi_name, 24);
    assert_int_equal(b.l.sfi_script, 40);
    assert_int_equal(b.l.scope_first_vars, 5);
}

static void test_detect_not_v8(void **state)
{
    struct v8_binary b;
    char path[] = "/tmp/cx-v8-XXXXXX";
    int fd;

    (void)state;
    /* An ELF file without V8: the test itself. */
    assert_int_equal(detect_path("/proc/self/exe", &b), 0);
    fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "not an ELF file\n", 16), 16);
    assert_int_equal(v8_detect__elf(fd, &b), -1);
    close(fd);
    unlink(path);
}

/* --- a fake V8 heap ------------------------------------------------------ */

#define BASE 0x100000000ull
#define HEAP 65536

static uint8_t heap[HEAP];
static size_t used;
static unsigned reads;

static int heap_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
    (void)ctx;
    reads++;
    if (addr < BASE || addr - BASE > HEAP || len > HEAP - (addr - BASE))
        return -EFAULT;
    memcpy(buf, heap + (addr - BASE), len);
    return 0;
}

static const struct py_reader rd = {heap_read, NULL};
static struct v8_layout L;

/* A new object of size bytes; returns its tagged address. */
static uint64_t alloc(size_t size)
{
    uint64_t at = BASE + used;

    used += (size + 63) & ~(size_t)63;
    assert_true(used <= HEAP);
    memset(heap + (at - BASE), 0, size);
    return at + 1;
}

static void put64(uint64_t tagged, unsigned off, uint64_t v)
{
    memcpy(heap + (tagged - 1 - BASE) + off, &v, 8);
}

static uint64_t smi(int64_t v)
{
    return (uint64_t)v << 32;
}

/* Maps, one per instance type used. */
static uint64_t map_of(uint16_t type)
{
    uint64_t m = alloc(64);

    memcpy(heap + (m - 1 - BASE) + L.map_type, &type, 2);
    return m;
}

static uint64_t obj(uint16_t type, size_t size)
{
    uint64_t o = alloc(size), m = map_of(type);

    put64(o, 0, m);
    return o;
}

static uint64_t seq1(const char *s)
{
    size_t n = strlen(s);
    uint64_t o = obj(L.seq_tag | L.one_byte_tag, L.seq1_chars + n + 64);
    int32_t len = (int32_t)n;

    memcpy(heap + (o - 1 - BASE) + L.str_length, &len, 4);
    memcpy(heap + (o - 1 - BASE) + L.seq1_chars, s, n);
    return o;
}

static uint64_t seq2(const uint16_t *s, int32_t n)
{
    uint64_t o = obj(L.seq_tag, L.seq2_chars + 2 * (size_t)n + 64);

    memcpy(heap + (o - 1 - BASE) + L.str_length, &n, 4);
    memcpy(heap + (o - 1 - BASE) + L.seq2_chars, s, 2 * (size_t)n);
    return o;
}

static uint64_t cons(uint64_t a, uint64_t b, int32_t len)
{
    uint64_t o = obj(L.cons_tag | L.one_byte_tag, 64);

    memcpy(heap + (o - 1 - BASE) + L.str_length, &len, 4);
    put64(o, L.cons_first, a);
    put64(o, L.cons_second, b);
    return o;
}

static uint64_t script(uint64_t name, uint64_t source, uint64_t line_ends)
{
    uint64_t o = obj(L.type_script, 128);

    put64(o, L.script_name, name);
    put64(o, L.script_source, source);
    put64(o, L.script_line_ends, line_ends);
    return o;
}

static uint64_t sfi(uint64_t name_or_scope, uint64_t scr)
{
    uint64_t o = obj(L.type_sfi, 64);

    put64(o, L.sfi_name, name_or_scope);
    put64(o, L.sfi_script, scr);
    return o;
}

/* An empty heap, and L as the shared object at path says. */
static int setup_from(const char *path)
{
    struct v8_binary b;

    used = 0;
    reads = 0;
    assert_int_equal(detect_path(path, &b), 1);
    assert_true(b.usable);
    L = b.l;
    return 0;
}

static int setup(void **state)
{
    (void)state;
    return setup_from(TEST_SO_DIR "/v8dbg_fake.so");
}

static struct v8_fn *read_fn(uint64_t s)
{
    const char *why = NULL;
    struct v8_fn *f = v8_fn__read(&rd, &L, s, 0, &why);

    if (!f)
        fail_msg("v8_fn__read: %s", why);
    return f;
}

static const char SRC[] = "\"use strict\";\n\nfunction hot_a(n) {\n  return n;\n}\n";

static void test_fn_string_name(void **state)
{
    (void)state;
    uint64_t scr = script(seq1("/app/main.js"), seq1(SRC), 0);
    struct v8_fn *f = read_fn(sfi(seq1("hot_a"), scr));

    assert_string_equal(f->name, "hot_a");
    assert_string_equal(f->file, "/app/main.js");
    assert_int_equal(f->line, 0); /* a name without a ScopeInfo: no position */
    rt_obj__put(&f->obj);
}

/* A ScopeInfo with n context locals, then the given slots. */
static uint64_t scope(int n, const uint64_t *tail, int ntail)
{
    uint64_t o = obj(L.type_scope_info, 8 + 8 * (size_t)(3 + 2 * n + ntail) + 64);
    uint64_t k = 8 + 8ull * L.scope_first_vars;

    put64(o, 8 + 8 * L.scope_ncontextlocals, smi(n));
    for (int i = 0; i < 2 * n; i++)
        put64(o, (unsigned)(k + 8 * i), i < n ? seq1("local") : smi(i));
    for (int i = 0; i < ntail; i++)
        put64(o, (unsigned)(k + 8 * (2 * n + i)), tail[i]);
    return o;
}

static void test_fn_scope_info(void **state)
{
    (void)state;
    /* The position of "function hot_a" in SRC: line 3. */
    int64_t pos = strstr(SRC, "function hot_a") - SRC;
    uint64_t scr = script(seq1("/app/main.js"), seq1(SRC), 0);
    /* receiver info, the function's name, its var index, its positions */
    uint64_t tail[] = {smi(7), seq1("hot_a"), smi(2), smi(pos), smi(pos + 30), smi(0)};
    struct v8_fn *f = read_fn(sfi(scope(2, tail, 6), scr));

    assert_string_equal(f->name, "hot_a");
    assert_int_equal(f->line, 3);
    rt_obj__put(&f->obj);

    /* An anonymous function: "" then the inferred name. */
    uint64_t tail2[] = {seq1(""), smi(-1), seq1("Module._load"), smi(pos), smi(pos + 9)};
    f = read_fn(sfi(scope(0, tail2, 5), scr));
    assert_string_equal(f->name, "Module._load");
    assert_int_equal(f->line, 3);
    rt_obj__put(&f->obj);

    /* The line from the script's line ends: positions of each "\n". */
    uint64_t ends = obj(L.type_fixed_array, L.fixed_data + 8 * 4);
    put64(ends, L.fixed_length, smi(4));
    for (int i = 0; i < 4; i++)
        put64(ends, L.fixed_data + 8 * i, smi(10 * (i + 1)));
    uint64_t tail3[] = {seq1("f"), smi(-1), smi(25), smi(26)};
    f = read_fn(sfi(scope(0, tail3, 4), script(seq1("x.js"), 0, ends)));
    assert_int_equal(f->line, 3); /* 25 is after the ends at 10 and 20 */
    rt_obj__put(&f->obj);

    /* A script's top level: no name, position 0. */
    uint64_t tail4[] = {smi(0), smi(90)};
    f = read_fn(sfi(scope(0, tail4, 2), scr));
    assert_string_equal(f->name, "");
    assert_int_equal(f->line, 1);
    rt_obj__put(&f->obj);
}

static int setup_v13(void **state)
{
    (void)state;
    return setup_from(TEST_SO_DIR "/v8dbg_v13.so");
}

/* V8 13: the positions in the two slots after the count of locals; after
 * the locals, the function's name, its slot, an inferred name left
 * undefined (an oddball), the outer ScopeInfo, and past the object's end
 * whatever follows (here a string: never taken for the name). */
static void test_fn_scope_info_v13(void **state)
{
    (void)state;
    int64_t pos = strstr(SRC, "function hot_a") - SRC;
    uint64_t scr = script(seq1("/app/main.js"), seq1(SRC), 0);
    uint64_t undef = obj(131, 64), outer = obj(L.type_scope_info, 64);
    uint64_t tail[] = {seq1("hot_a"), smi(-1), undef, outer, seq1("next object")};
    uint64_t sc = scope(1, tail, 5);
    put64(sc, 8 + 8 * (L.scope_ncontextlocals + 1), smi(pos));
    put64(sc, 8 + 8 * (L.scope_ncontextlocals + 2), smi(pos + 30));
    struct v8_fn *f = read_fn(sfi(sc, scr));
    assert_string_equal(f->name, "hot_a");
    assert_int_equal(f->line, 3);
    rt_obj__put(&f->obj);

    /* Anonymous, its inferred name undefined: "", not the next object's. */
    uint64_t tail2[] = {seq1(""), smi(-1), undef, outer, seq1("next object")};
    sc = scope(0, tail2, 5);
    put64(sc, 8 + 8 * (L.scope_ncontextlocals + 1), smi(0));
    put64(sc, 8 + 8 * (L.scope_ncontextlocals + 2), smi(90));
    f = read_fn(sfi(sc, scr));
    assert_string_equal(f->name, "");
    assert_int_equal(f->line, 1);
    rt_obj__put(&f->obj);
}

static void test_fn_strings(void **state)
{
    char out[64];
    static const uint16_t two[] = {'h', 0xe9, 0x4e2d, 0xd800};

    (void)state;
    assert_int_equal(
        v8_fn__read_str(&rd, &L, cons(seq1("Module."), seq1("_load"), 12), out, sizeof(out)), 12);
    assert_string_equal(out, "Module._load");
    assert_true(v8_fn__read_str(&rd, &L, seq2(two, 4), out, sizeof(out)) > 0);
    assert_string_equal(out, "h\xc3\xa9\xe4\xb8\xad?");
    /* Cut with "..." */
    char small[8];
    assert_int_equal(v8_fn__read_str(&rd, &L, seq1("abcdefghij"), small, sizeof(small)), 7);
    assert_string_equal(small, "abcd...");
    /* Thin and sliced. */
    uint64_t thin = obj(L.thin_tag | L.one_byte_tag, 64);
    int32_t len = 3;
    memcpy(heap + (thin - 1 - BASE) + L.str_length, &len, 4);
    put64(thin, L.thin_actual, seq1("abc"));
    assert_int_equal(v8_fn__read_str(&rd, &L, thin, out, sizeof(out)), 3);
    assert_string_equal(out, "abc");
    uint64_t sl = obj(L.sliced_tag | L.one_byte_tag, 64);
    memcpy(heap + (sl - 1 - BASE) + L.str_length, &len, 4);
    put64(sl, L.sliced_parent, seq1("xxhot_ayy"));
    put64(sl, L.sliced_offset, smi(2));
    len = 5;
    memcpy(heap + (sl - 1 - BASE) + L.str_length, &len, 4);
    assert_int_equal(v8_fn__read_str(&rd, &L, sl, out, sizeof(out)), 5);
    assert_string_equal(out, "hot_a");
}

static void test_fn_garbage(void **state)
{
    const char *why = NULL;
    char out[64];

    (void)state;
    uint64_t scr = script(seq1("a.js"), 0, 0), s = sfi(seq1("f"), scr);
    /* Unreadable, untagged, another type. */
    assert_null(v8_fn__read(&rd, &L, 0x7000001, 0, &why));
    assert_string_equal(why, "unreadable");
    assert_null(v8_fn__read(&rd, &L, s - 1, 0, &why));
    assert_null(v8_fn__read(&rd, &L, scr, 0, &why));
    assert_string_equal(why, "not a SharedFunctionInfo");
    /* Another function than the sample's: the fingerprint differs. */
    uint16_t tag = cx_v8_fingerprint(seq1("g"), scr);
    assert_null(v8_fn__read(&rd, &L, s, tag, &why));
    assert_string_equal(why, "function changed since the sample");
    /* A cons string whose halves are itself: the depth stops it. */
    uint64_t loop = cons(0, 0, 4);
    put64(loop, L.cons_first, loop);
    assert_int_equal(v8_fn__read_str(&rd, &L, loop, out, sizeof(out)), -ELOOP);
    /* A negative length, a map that is no heap object. */
    uint64_t bad = seq1("abc");
    int32_t neg = -1;
    memcpy(heap + (bad - 1 - BASE) + L.str_length, &neg, 4);
    assert_int_equal(v8_fn__read_str(&rd, &L, bad, out, sizeof(out)), -EINVAL);
    put64(bad, 0, 0x1000);
    assert_int_equal(v8_fn__read_str(&rd, &L, bad, out, sizeof(out)), -EINVAL);
    /* A ScopeInfo claiming a huge count of locals: no name, no crash. */
    uint64_t sc = obj(L.type_scope_info, 128);
    put64(sc, 8 + 8 * L.scope_ncontextlocals, smi(1 << 30));
    struct v8_fn *f = read_fn(sfi(sc, scr));
    assert_string_equal(f->name, "");
    assert_int_equal(f->line, 0);
    rt_obj__put(&f->obj);
    /* Line ends claiming more entries than exist: unreadable, line 0. */
    uint64_t ends = obj(L.type_fixed_array, 64);
    put64(ends, L.fixed_length, smi(1 << 20));
    uint64_t tail[] = {seq1("f"), smi(-1), smi(5), smi(6)};
    uint64_t sc2 = scope(0, tail, 4);
    f = read_fn(sfi(sc2, script(seq1("a.js"), 0, ends)));
    assert_int_equal(f->line, 0);
    rt_obj__put(&f->obj);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_detect_node),
        cmocka_unit_test(test_detect_fake),
        cmocka_unit_test(test_detect_not_v8),
        cmocka_unit_test_setup(test_fn_string_name, setup),
        cmocka_unit_test_setup(test_fn_scope_info, setup),
        cmocka_unit_test_setup(test_fn_scope_info_v13, setup_v13),
        cmocka_unit_test_setup(test_fn_strings, setup),
        cmocka_unit_test_setup(test_fn_garbage, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
