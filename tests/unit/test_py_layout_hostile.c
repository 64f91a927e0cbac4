/* py_layout__from_debug_offsets against odd input (the other half of
 * test_py_layout.c): every length, every offset past its structure, sizes 0
 * and huge, versions before and after, random bytes. Run once under
 * valgrind: each buffer is a heap block of exactly its length. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../agent/runtimes/python/py_detect.h"
#include "../../agent/runtimes/python/py_layout.h"
#include "py_helpers.h"
#include "py_layout_headers.h"
#include "py_layout_helpers.h"

/* --- (c) py_layout__from_debug_offsets against odd input ---------------- */

/* Calls the parser on a heap copy of exactly len bytes of d. */
static int parse(const void *d, size_t len, struct py_layout *out, unsigned *version, char *why,
                 size_t whylen)
{
    uint8_t *copy = malloc(len ? len : 1);
    int ret;

    assert_non_null(copy);
    memcpy(copy, d, len);
    why[0] = '\0';
    ret = py_layout__from_debug_offsets(copy, len, out, version, why, whylen);
    free(copy);
    return ret;
}

/* What every layout the parser accepts must be: each field -1 or an offset
 * under CX_PY_NO_FIELD, the fixed ones where CPython has always had them;
 * and the BPF view either refused or inside its windows. */
static void check_accepted(const struct py_layout *l, unsigned version)
{
    struct cx_py_offsets o;
    char why[192];

    assert_int_equal(l->version, version);
    for (size_t i = 0; i < py_layout_nfields; i++) {
        int32_t v = py_field(l, i);
        if (v < -1 || v >= CX_PY_NO_FIELD)
            fail_msg("accepted a layout with %s = %d", py_layout_fields[i].name, v);
    }
    assert_int_equal(l->object_type, 8);
    assert_int_equal(l->unicode_length, 16);
    assert_int_equal(l->bytes_size, 16);
    assert_int_equal(l->cframe_current_frame, -1);
    assert_int_equal(l->frame_is_entry, -1);
    if (py_layout__to_bpf(l, &o, why, sizeof(why)) == 0) {
        assert_true(o.fr_len <= CX_PY_FRAME_READ);
        assert_true(o.co_len <= CX_PY_CODE_READ);
    }
}

/* Word index, group-size word index and field size of each offset the 3.13
 * shape reads (pycore_runtime.h of 3.13). */
static const struct {
    const char *name;
    unsigned word, size_word, bytes;
} fields313[] = {
    {"runtime_state.interpreters_head", 5, 3, 8},
    {"interpreter_state.next", 8, 6, 8},
    {"interpreter_state.threads_head", 9, 6, 8},
    {"thread_state.next", 21, 19, 8},
    {"thread_state.current_frame", 23, 19, 8},
    {"thread_state.thread_id", 24, 19, 8},
    {"thread_state.native_thread_id", 25, 19, 8},
    {"interpreter_frame.previous", 29, 28, 8},
    {"interpreter_frame.executable", 30, 28, 8},
    {"interpreter_frame.instr_ptr", 31, 28, 8},
    {"interpreter_frame.owner", 33, 28, 1},
    {"code_object.filename", 35, 34, 8},
    {"code_object.name", 36, 34, 8},
    {"code_object.qualname", 37, 34, 8},
    {"code_object.linetable", 38, 34, 8},
    {"code_object.firstlineno", 39, 34, 4},
    {"code_object.argcount", 40, 34, 4},
    {"code_object.co_code_adaptive", 43, 34, 0}, /* the bytecode: at the end */
    {"pyobject.ob_type", 45, 44, 8},
    {"bytes_object.ob_size", 65, 64, 8},
    {"bytes_object.ob_sval", 66, 64, 0},
    {"unicode_object.state", 68, 67, 4},
    {"unicode_object.length", 69, 67, 8},
    {"unicode_object.asciiobject_size", 70, 67, 1},
};
/* The groups' size words: those the shape reads, then those it does not. */
static const unsigned used_groups313[] = {3, 6, 19, 28, 34, 44, 64, 67};
static const unsigned unused_groups313[] = {46, 50, 53, 56, 59, 61, 71};

static void test_debug_offsets_valid(void **state)
{
    struct py_layout l;
    unsigned version;
    char why[192];
    (void)state;

    assert_int_equal(parse(dbg313, sizeof(dbg313), &l, &version, why, sizeof(why)), 0);
    assert_int_equal(version, 0x030d);
    assert_int_equal(py_layout_diff("3.13.0", &l, "parsed", &py_layout_313, "headers"), 0);
    check_accepted(&l, 0x030d);
    /* More than the structure (as the agent passes: up to 1 KiB of _PyRuntime). */
    uint8_t big[PY_DEBUG_OFFSETS_MAX];
    memset(big, 0xa5, sizeof(big));
    memcpy(big, dbg313, sizeof(dbg313));
    assert_int_equal(parse(big, sizeof(big), &l, &version, why, sizeof(why)), 0);
    assert_int_equal(py_layout_diff("3.13.0 in 1 KiB", &l, "parsed", &py_layout_313, "headers"), 0);
}

/* Every length from 0 to the whole structure: -1 until the last word the
 * 3.13 shape reads (index 70) is in, the version known once it is in. */
static void test_debug_offsets_short(void **state)
{
    struct py_layout l;
    unsigned version;
    char why[192];
    unsigned ok = 0, refused = 0;
    (void)state;

    for (size_t len = 0; len <= sizeof(dbg313); len++) {
        int ret = parse(dbg313, len, &l, &version, why, sizeof(why));
        if (len >= 71 * 8) {
            assert_int_equal(ret, 0);
            assert_int_equal(version, 0x030d);
            ok++;
        } else {
            if (ret != -1 || !why[0])
                fail_msg("%zu bytes: %d (%s)", len, ret, why);
            /* The version is said once the cookie and the header are there. */
            assert_int_equal(version, len >= 24 ? 0x030d : 0);
            refused++;
        }
    }
    printf("lengths 0..%zu: %u refused, %u read\n", sizeof(dbg313), refused, ok);
}

static void test_debug_offsets_header(void **state)
{
    uint64_t w[DBG313_WORDS];
    struct py_layout l;
    unsigned version;
    char why[192];
    (void)state;

    /* No cookie: each of its bytes changed in turn. */
    for (unsigned i = 0; i < 8; i++) {
        memcpy(w, dbg313, sizeof(w));
        ((uint8_t *)w)[i] ^= 0x20;
        assert_int_equal(parse(w, sizeof(w), &l, &version, why, sizeof(why)), -1);
        assert_int_equal(version, 0);
        assert_non_null(strstr(why, "no _Py_DebugOffsets"));
    }
    /* Versions the structure did not exist in, or not CPython 3's. */
    static const struct {
        uint64_t hex;
        unsigned version;
    } old[] = {
        {0x030c01f0, 0x030c},
        {0x030b07f0, 0x030b},
        {0x030700f0, 0x0307},
        {0x020712f0, 0x0207},
        {0x040d00f0, 0x040d},
        {0, 0},
        {0x030d, 0},
        {~0ull, 0xffff},
        {0x0100030d00f0ull, 0x030d}, /* bits above the 32 of PY_VERSION_HEX */
    };
    for (size_t i = 0; i < sizeof(old) / sizeof(old[0]); i++) {
        memcpy(w, dbg313, sizeof(w));
        w[1] = old[i].hex;
        if (parse(w, sizeof(w), &l, &version, why, sizeof(why)) != -1)
            fail_msg("version 0x%llx accepted", (unsigned long long)old[i].hex);
        assert_int_equal(version, old[i].version);
        assert_true(why[0] != '\0');
    }
    /* Free-threaded builds: any non-zero flag. */
    static const uint64_t ft[] = {1, 2, 0x100, ~0ull};
    for (size_t i = 0; i < sizeof(ft) / sizeof(ft[0]); i++) {
        memcpy(w, dbg313, sizeof(w));
        w[2] = ft[i];
        assert_int_equal(parse(w, sizeof(w), &l, &version, why, sizeof(why)), -1);
        assert_int_equal(version, 0x030d);
        assert_non_null(strstr(why, "free-threaded"));
    }
    /* A why buffer of 1 byte, and of none. */
    memcpy(w, dbg313, sizeof(w));
    w[2] = 1;
    char one[1] = {'x'};
    assert_int_equal(py_layout__from_debug_offsets(w, sizeof(w), &l, &version, one, 1), -1);
    assert_int_equal(one[0], '\0');
    assert_int_equal(py_layout__from_debug_offsets(w, sizeof(w), &l, &version, NULL, 0), -1);
}

/* Each offset the shape reads: at or past the end of its structure, or
 * absurd: refused. Each group's size 0, too small or huge: refused when the
 * shape reads that group, no matter when it does not. */
static void test_debug_offsets_bounds(void **state)
{
    uint64_t w[DBG313_WORDS];
    struct py_layout l;
    unsigned version;
    char why[192];
    unsigned cases = 0;
    (void)state;

    for (size_t f = 0; f < sizeof(fields313) / sizeof(fields313[0]); f++) {
        uint64_t size = dbg313[fields313[f].size_word];
        uint64_t bad[] = {size,       size + 8, size - fields313[f].bytes + 1,
                          1u << 20,   0xffff,   1ull << 32,
                          1ull << 63, ~0ull};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
            /* co_code_adaptive is the trailing bytecode: it may be at the end. */
            if (fields313[f].word == 43 && bad[i] == size)
                continue;
            memcpy(w, dbg313, sizeof(w));
            w[fields313[f].word] = bad[i];
            if (parse(w, sizeof(w), &l, &version, why, sizeof(why)) != -1)
                fail_msg("%s = %llu (structure of %llu bytes) accepted", fields313[f].name,
                         (unsigned long long)bad[i], (unsigned long long)size);
            cases++;
        }
    }
    for (size_t g = 0; g < sizeof(used_groups313) / sizeof(used_groups313[0]); g++) {
        uint64_t bad[] = {0, 1, 7, 1u << 20, 1ull << 32, 1ull << 63, ~0ull};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
            memcpy(w, dbg313, sizeof(w));
            w[used_groups313[g]] = bad[i];
            if (parse(w, sizeof(w), &l, &version, why, sizeof(why)) != -1)
                fail_msg("size word %u = %llu accepted", used_groups313[g],
                         (unsigned long long)bad[i]);
            cases++;
        }
    }
    for (size_t g = 0; g < sizeof(unused_groups313) / sizeof(unused_groups313[0]); g++) {
        uint64_t odd[] = {0, ~0ull};
        for (size_t i = 0; i < 2; i++) {
            memcpy(w, dbg313, sizeof(w));
            w[unused_groups313[g]] = odd[i];
            assert_int_equal(parse(w, sizeof(w), &l, &version, why, sizeof(why)), 0);
            assert_int_equal(py_layout_diff("unused group", &l, "parsed", &py_layout_313, "3.13"),
                             0);
            cases++;
        }
    }
    /* What CPython has always had, said otherwise: refused. */
    static const struct {
        unsigned word;
        uint64_t value;
    } fixed[] = {
        {45, 0},  /* ob_type not after the refcount */
        {69, 24}, /* a string's length elsewhere */
        {65, 8},  /* a bytes object's size elsewhere */
        {66, 16}, /* its data before the hash */
        {70, 16}, /* a compact string's header shorter than its length field */
        {67, 40}, /* PyUnicodeObject no bigger than PyASCIIObject */
        {43, 8},  /* the bytecode inside the object header */
    };
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
        memcpy(w, dbg313, sizeof(w));
        w[fixed[i].word] = fixed[i].value;
        if (parse(w, sizeof(w), &l, &version, why, sizeof(why)) != -1)
            fail_msg("word %u = %llu accepted", fixed[i].word, (unsigned long long)fixed[i].value);
        cases++;
    }
    printf("offsets and sizes out of bounds: %u cases\n", cases);
}

/* 3.14's shape (Include/internal/pycore_debug_offsets.h): 3.13's with
 * interpreter_state.threads_main after threads_head and two words at its
 * end, interpreter_frame.stackpointer and tlbc_index, code_object.co_tlbc,
 * a set group after the list group, groups at the end. Built from 3.13's
 * values, with the frame pointer at 80 to tell the shapes apart. */
#define DBG314_WORDS 100
static void make314(uint64_t *w, bool sets)
{
    unsigned at = 0;
#define PUT(from, to)                                                                              \
    for (unsigned i_ = (from); i_ <= (to); i_++)                                                   \
    w[at++] = dbg313[i_]
    memset(w, 0, DBG314_WORDS * 8);
    PUT(0, 9); /* header, runtime, interpreter up to threads_head */
    w[1] = 0x030e00f0;
    w[at++] = 7352; /* threads_main */
    PUT(10, 18);
    w[at++] = 7900; /* code_object_generation */
    w[at++] = 0;    /* tlbc_generation */
    PUT(19, 33);    /* thread state, frame up to owner */
    w[at++] = 64;   /* stackpointer */
    w[at++] = 0;    /* tlbc_index */
    PUT(34, 43);    /* code object */
    w[at++] = 0;    /* co_tlbc */
    PUT(44, 55);    /* object, type, tuple, list */
    if (sets) {
        w[at++] = 200; /* set: size, used, table, mask */
        w[at++] = 24;
        w[at++] = 40;
        w[at++] = 32;
    }
    PUT(56, 72); /* dict, float, long, bytes, unicode, gc */
    for (unsigned i = 0; i < 12; i++)
        w[at++] = 8 * i; /* gen_object, llist_node, debugger_support */
#undef PUT
    assert_true(at <= DBG314_WORDS);
    assert_int_equal(w[22], 304); /* the thread state group where 3.14 has it */
    w[26] = 80;                   /* thread_state.current_frame */
}

static void test_debug_offsets_versions(void **state)
{
    uint64_t w[DBG314_WORDS];
    struct py_layout l, want = py_layout_313;
    unsigned version;
    char why[192];
    (void)state;

    /* A release newer than every shape the agent knows, still in 3.13's
     * shape: read with the newest shape that reads true, 3.13's. */
    static const uint64_t newer[] = {0x030e00a1, 0x030f00a0, 0x031000f0, 0x03ff00f0};
    for (size_t i = 0; i < sizeof(newer) / sizeof(newer[0]); i++) {
        memcpy(w, dbg313, sizeof(dbg313));
        w[1] = newer[i];
        if (parse(w, sizeof(dbg313), &l, &version, why, sizeof(why)))
            fail_msg("0x%llx in 3.13's shape refused: %s", (unsigned long long)newer[i], why);
        want.version = (unsigned)(newer[i] >> 16);
        assert_int_equal(version, want.version);
        assert_int_equal(py_layout_diff("3.13's shape", &l, "parsed", &want, "3.13"), 0);
        check_accepted(&l, want.version);
    }

    /* 3.14's shape, with and without the set group; 3.15 in 3.14's shape. */
    for (int sets = 1; sets >= 0; sets--) {
        static const uint64_t v314[] = {0x030e00f0, 0x030f00a0};
        for (size_t i = 0; i < 2; i++) {
            make314(w, sets);
            w[1] = v314[i];
            if (parse(w, sizeof(w), &l, &version, why, sizeof(why)))
                fail_msg("3.14's shape (sets %d) as 0x%llx refused: %s", sets,
                         (unsigned long long)v314[i], why);
            want = py_layout_313;
            want.version = (unsigned)(v314[i] >> 16);
            want.tstate_frame = 80;
            assert_int_equal(py_layout_diff("3.14's shape", &l, "parsed", &want, "expected"), 0);
            check_accepted(&l, want.version);
        }
        /* Not for 3.13, which never had it. */
        make314(w, sets);
        w[1] = 0x030d00f0;
        assert_int_equal(parse(w, sizeof(w), &l, &version, why, sizeof(why)), -1);
    }

    /* A release whose shape is none of these (a word inserted at the start
     * of the thread state group): refused, whatever version it says. */
    static const uint64_t any[] = {0x030d00f0, 0x030e00f0, 0x030f00f0};
    for (size_t i = 0; i < sizeof(any) / sizeof(any[0]); i++) {
        memset(w, 0, sizeof(w));
        memcpy(w, dbg313, 20 * 8);
        w[20] = 0;
        memcpy(w + 21, dbg313 + 20, (DBG313_WORDS - 20) * 8);
        w[1] = any[i];
        if (parse(w, (DBG313_WORDS + 1) * 8, &l, &version, why, sizeof(why)) != -1)
            fail_msg("an unknown shape said 0x%llx and was accepted", (unsigned long long)any[i]);
    }
}

/* Random bytes behind a valid header, and the real structure with random
 * words changed: never a crash, -1 or a layout inside its bounds. */
static void test_debug_offsets_garbage(void **state)
{
    uint64_t seed = 0x70796c61796f7574ull;
    uint64_t w[DBG314_WORDS];
    struct py_layout l;
    unsigned version;
    char why[192];
    unsigned accepted = 0, refused = 0;
    (void)state;

    for (unsigned i = 0; i < 100000; i++) {
        uint64_t r = py_rng(&seed);
        size_t len;
        if (i % 3 == 0) {
            /* Random words after a 3.13+ header. */
            len = (r % (DBG314_WORDS * 8 + 1));
            for (unsigned k = 0; k < DBG314_WORDS; k++) {
                uint64_t x = py_rng(&seed);
                w[k] = x % 4 == 0 ? x : x % 4 == 1 ? x % 512 : x % 4 == 2 ? 8 * (x % 64) : 0;
            }
            w[0] = dbg313[0];
            w[1] = 0x030d00f0 + ((r >> 12) % 4) * 0x10000;
            w[2] = 0;
        } else {
            /* The real one with one to four words changed. */
            len = sizeof(dbg313) + (r >> 8) % 64;
            memset(w, 0, sizeof(w));
            memcpy(w, dbg313, sizeof(dbg313));
            for (unsigned k = 0; k < 1 + (r >> 16) % 4; k++) {
                uint64_t x = py_rng(&seed);
                unsigned at = 1 + (unsigned)(x % (DBG313_WORDS - 1));
                x >>= 8;
                w[at] = x % 3 == 0 ? x : x % 3 == 1 ? w[at] + x % 17 - 8 : x % 256;
            }
        }
        int ret = parse(w, len, &l, &version, why, sizeof(why));
        if (ret == 0) {
            check_accepted(&l, version);
            accepted++;
        } else {
            assert_int_equal(ret, -1);
            assert_true(why[0] != '\0');
            refused++;
        }
    }
    printf("random structures: %u accepted, %u refused\n", accepted, refused);
}

/* The words of Debian unstable's 3.14.10 and 3.15.2 at _PyRuntime (their
 * _Py_DebugOffsets, up to the last word a shape reads; test_py_detect
 * reads the binaries themselves where they are). The same, word for word,
 * as _Py_DebugOffsets_INIT compiled against those releases' headers with
 * the binaries' -D_Py_TIER2=3 -D_Py_JIT (see py_layout_headers.h). */
static const uint64_t dbg314[] = {
    0x7970677562656478,
    0x30e0af0,
    0,
    316616,
    784,
    808,
    225864,
    7280,
    7272,
    7344,
    7360,
    7408,
    7688,
    7672,
    7680,
    16,
    7784,
    0,
    7800,
    7792,
    7992,
    0,
    832,
    0,
    8,
    16,
    72,
    152,
    160,
    232,
    32,
    88,
    8,
    0,
    56,
    80,
    74,
    64,
    0,
    216,
    112,
    120,
    128,
    136,
    68,
    52,
    96,
    104,
    208,
    0,
    16,
    8,
    416,
    24,
    88,
    168,
    40,
    32,
    16,
    40,
    24,
    16,
    200,
    24,
    40,
    32,
    48,
    32,
    40,
    24,
    16,
    32,
    16,
    24,
    40,
    16,
    32,
    64,
    32,
    16,
    40,
    264,
};
static const uint64_t dbg315[] = {
    0x7970677562656478,
    0x30f02f0,
    0,
    346568,
    912,
    936,
    226240,
    7272,
    7264,
    7336,
    7352,
    7400,
    7592,
    7576,
    7584,
    16,
    7736,
    0,
    7752,
    7744,
    7944,
    0,
    888,
    0,
    8,
    16,
    72,
    80,
    88,
    96,
    176,
    184,
    256,
    32,
    36,
    40,
    136,
    288,
    0,
    88,
    8,
    0,
    56,
    80,
    74,
    64,
    0,
    216,
    112,
    120,
    128,
    136,
    68,
    52,
    96,
    104,
    208,
    0,
    16,
    8,
    424,
    24,
    88,
    168,
    32,
    288,
    944,
    888,
    40,
    32,
    16,
    40,
    24,
    16,
    200,
    24,
    40,
    32,
    48,
    32,
    40,
    24,
    16,
    32,
    16,
    24,
    40,
    16,
    32,
    64,
    32,
    16,
    40,
    56,
};

/* Each read in its own release's shape, to what 3.13's layout becomes
 * and to what its headers say (py_layout_headers.h):
 * the frame's owner at 74 (3.14 put stackpointer before it), the bytecode
 * at 208; 3.15's thread ids 24 bytes on. A later release (3.16 here) in
 * 3.15's shape is read in it and says so; in none of the shapes (3.15's
 * thread state without its three new words): refused. */
static void test_debug_offsets_debian(void **state)
{
    struct py_layout l, want;
    unsigned version;
    const char *shape = NULL;
    char why[192];
    uint64_t w[DBG314_WORDS];
    (void)state;

    for (int k = 0; k < 2; k++) {
        const uint64_t *d = k ? dbg315 : dbg314;
        size_t len = k ? sizeof(dbg315) : sizeof(dbg314);
        if (py_layout__read_debug_offsets(d, len, &l, &version, &shape, why, sizeof(why)))
            fail_msg("Debian's 3.%d refused: %s", 14 + k, why);
        want = py_layout_313;
        want.version = 0x030e + (unsigned)k;
        want.runtime_interpreters_head = k ? 936 : 808;
        want.interp_next = k ? 7264 : 7272;
        want.interp_threads_head = k ? 7336 : 7344;
        want.frame_owner = 74;
        want.code_code_adaptive = 208;
        if (k) {
            want.tstate_thread_id = 176;
            want.tstate_native_thread_id = 184;
        }
        assert_int_equal(version, want.version);
        assert_string_equal(shape, k ? "3.15" : "3.14");
        assert_int_equal(py_layout_diff(k ? "3.15.2" : "3.14.10", &l, "parsed", &want, "expected"),
                         0);
        /* And what those releases' headers say, each field. */
        assert_int_equal(py_layout_diff(k ? "3.15.2" : "3.14.10", &l, "parsed",
                                        k ? &py_layout_3152_headers : &py_layout_31410_headers,
                                        "headers"),
                         0);
        check_accepted(&l, version);
    }
    memcpy(w, dbg315, sizeof(dbg315));
    w[1] = 0x031000f0;
    if (py_layout__read_debug_offsets(w, sizeof(dbg315), &l, &version, &shape, why, sizeof(why)))
        fail_msg("3.16 in 3.15's shape refused: %s", why);
    assert_int_equal(version, 0x0310);
    assert_string_equal(shape, "3.15");
    assert_int_equal(l.tstate_thread_id, 176);
    memset(w, 0, sizeof(w));
    memcpy(w, dbg315, 27 * 8);
    memcpy(w + 27, dbg315 + 30, sizeof(dbg315) - 30 * 8);
    assert_int_equal(parse(w, sizeof(dbg315), &l, &version, why, sizeof(why)), -1);
    printf("Debian's 3.14 and 3.15 read in their shapes; 3.16 in 3.15's; a shape unknown: %s\n",
           why);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_debug_offsets_valid),    cmocka_unit_test(test_debug_offsets_short),
        cmocka_unit_test(test_debug_offsets_header),   cmocka_unit_test(test_debug_offsets_bounds),
        cmocka_unit_test(test_debug_offsets_versions), cmocka_unit_test(test_debug_offsets_debian),
        cmocka_unit_test(test_debug_offsets_garbage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
