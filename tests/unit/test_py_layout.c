/* py_layout: the table of 3.7 to 3.12 against the headers it was made from,
 * 3.13's layout as the interpreter's own _Py_DebugOffsets gives it against
 * its headers, py_layout__from_debug_offsets against hostile input (every
 * length, every offset past its structure, sizes 0 and huge, versions
 * before and after, random bytes: run once under valgrind, each buffer is a
 * heap block of exactly its length), and the BPF side's view of every
 * layout.
 *
 * The header-derived layouts are build/fixtures/py_layout/<pyenv
 * version>.txt, written by tools/python_layout.sh --one for each pyenv 3.7+
 * whose headers are installed (tests/tests.mk). Without pyenv nothing is
 * compared with headers; with it, every installed version must have been. */
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

/* --- the header-derived fixtures ---------------------------------------- */

static const char *fixture_dir(void)
{
    static char path[512];
    const char *dir = getenv("CX_FIXTURES");
    snprintf(path, sizeof(path), "%s/py_layout", dir ? dir : "build/fixtures");
    return path;
}

struct hdr {
    char label[64];   /* the pyenv version: "3.11.7" */
    char prefix[512]; /* where it lives */
    struct py_layout l;
};

/* Reads one fixture: "# prefix DIR", then "name value" lines, every field
 * of struct py_layout once and nothing else. */
static void hdr_read(const char *name, struct hdr *h)
{
    char path[1024], line[600];
    bool seen[64] = {false};
    bool have_version = false;
    FILE *f;

    memset(h, 0, sizeof(*h));
    snprintf(h->label, sizeof(h->label), "%.*s", (int)(strlen(name) - 4), name);
    snprintf(path, sizeof(path), "%s/%s", fixture_dir(), name);
    f = fopen(path, "r");
    if (!f)
        fail_msg("%s: cannot open", path);
    while (fgets(line, sizeof(line), f)) {
        char key[64];
        long value;
        if (sscanf(line, "# prefix %511s", h->prefix) == 1 || line[0] == '#')
            continue;
        if (sscanf(line, "%63s %ld", key, &value) != 2)
            fail_msg("%s: bad line \"%s\"", path, line);
        if (strcmp(key, "version") == 0) {
            h->l.version = (unsigned)value;
            have_version = true;
            continue;
        }
        size_t i;
        for (i = 0; i < py_layout_nfields; i++) {
            if (strcmp(key, py_layout_fields[i].name) == 0)
                break;
        }
        if (i == py_layout_nfields)
            fail_msg("%s: field %s is not in struct py_layout", path, key);
        if (seen[i])
            fail_msg("%s: field %s twice", path, key);
        seen[i] = true;
        int32_t v = (int32_t)value;
        memcpy((char *)&h->l + py_layout_fields[i].offset, &v, sizeof(v));
    }
    fclose(f);
    if (!have_version || !h->prefix[0])
        fail_msg("%s: no version or prefix line", path);
    for (size_t i = 0; i < py_layout_nfields; i++) {
        if (!seen[i])
            fail_msg("%s: no value for %s", path, py_layout_fields[i].name);
    }
}

/* The fixtures, sorted by version; how many. */
static int hdr_list(struct hdr *out, int max)
{
    struct dirent **names;
    int n = scandir(fixture_dir(), &names, NULL, versionsort), kept = 0;

    for (int i = 0; i < n; i++) {
        size_t len = strlen(names[i]->d_name);
        if (len > 4 && strcmp(names[i]->d_name + len - 4, ".txt") == 0 && kept < max)
            hdr_read(names[i]->d_name, &out[kept++]);
        free(names[i]);
    }
    if (n >= 0)
        free(names);
    return kept;
}

/* Fails unless every pyenv version of [from, to] with headers has a
 * fixture among h that was checked (checked[i] for h[i]). */
static void require_all_checked(unsigned from, unsigned to, const struct hdr *h,
                                const bool *checked, int nh)
{
    struct pyenv_python py[64];
    int np = pyenv_pythons(from & 0xff, py, 64);

    for (int i = 0; i < np; i++) {
        char inc[700], h_file[720];
        bool found = false;
        if (py[i].version > to ||
            !py_file(py[i].prefix, py[i].version, "include", inc, sizeof(inc)))
            continue;
        snprintf(h_file, sizeof(h_file), "%s/Python.h", inc);
        if (!py_is_file(h_file))
            continue; /* no headers: no fixture (tests/tests.mk) */
        for (int k = 0; k < nh; k++)
            found |= strcmp(h[k].label, py[i].name) == 0 && checked[k];
        if (!found)
            fail_msg("pyenv has %s (%s) but its layout was not checked: no fixture %s/%s.txt "
                     "(make build/tests/test_py_layout writes it)",
                     py[i].name, inc, fixture_dir(), py[i].name);
    }
}

/* (a) The table, field by field, against the headers it came from. */
static void test_table_against_headers(void **state)
{
    struct hdr h[32];
    bool checked[32] = {false};
    int nh = hdr_list(h, 32), ntabled = 0, nchecked = 0;
    unsigned tabled[32];
    size_t bad = 0;
    (void)state;

    /* The table: 3.7 to 3.12, each once, sorted. */
    ntabled = (int)py_layout__table_versions(tabled, 32);
    assert_int_equal(ntabled, 6);
    for (int i = 0; i < ntabled; i++)
        assert_int_equal(tabled[i], 0x0307 + (unsigned)i);
    assert_null(py_layout__for_version(0x0306));
    assert_null(py_layout__for_version(0x030d));
    assert_null(py_layout__for_version(0x0207));
    assert_null(py_layout__for_version(0));

    for (int k = 0; k < nh; k++) {
        if (h[k].l.version >= 0x030d)
            continue;
        const struct py_layout *t = py_layout__for_version(h[k].l.version);
        if (!t)
            fail_msg("%s: headers of version 0x%x, which the table lacks", h[k].label,
                     h[k].l.version);
        size_t b = py_layout_diff(h[k].label, t, "table", &h[k].l, "headers");
        printf("%s: %zu fields of the table against the headers: %zu differ\n", h[k].label,
               py_layout_nfields, b);
        bad += b;
        checked[k] = true;
        nchecked++;
    }
    printf("table: %d of %d tabled versions checked against their headers\n", nchecked, ntabled);
    require_all_checked(0x0307, 0x030c, h, checked, nh);
    assert_int_equal(bad, 0);
}

/* _PyRuntime's first PY_DEBUG_OFFSETS_MAX bytes in the file at path, read
 * through libelf's view of the symbol table (not py_detect's). */
static size_t read_runtime(const char *path, uint8_t *buf)
{
    uint64_t va, size;
    int64_t off;
    int fd;
    ssize_t n;

    if (py_elf_sym(path, SHT_DYNSYM, "_PyRuntime", &va, &size))
        fail_msg("%s: no _PyRuntime in .dynsym", path);
    off = py_elf_offset(path, va);
    if (off < 0)
        fail_msg("%s: _PyRuntime 0x%llx has no bytes in the file", path, (unsigned long long)va);
    fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    n = pread(fd, buf, PY_DEBUG_OFFSETS_MAX, off);
    close(fd);
    assert_int_equal(n, PY_DEBUG_OFFSETS_MAX);
    return size < PY_DEBUG_OFFSETS_MAX ? (size_t)size : PY_DEBUG_OFFSETS_MAX;
}

/* The 3.13.0 _Py_DebugOffsets, as libpython3.13.so.1.0 of pyenv's 3.13.0
 * holds it (x86-64, gcc): 73 words, the cookie first. The hostile tests
 * start from it, so they run without pyenv; where 3.13.0 is installed,
 * test_debug_offsets_against_headers checks it is still its bytes. */
#define DBG313_WORDS 73
static const uint64_t dbg313[DBG313_WORDS] = {
    0x7970677562656478ull, /* "xdebugpy" */
    0x30d00f0,
    0,
    283320,
    608,
    632,
    194968,
    7272,
    7264,
    7344,
    7400,
    7656,
    7640,
    7648,
    16,
    7752,
    0,
    7768,
    7760,
    304,
    0,
    8,
    16,
    72,
    152,
    160,
    232,
    32,
    80,
    8,
    0,
    56,
    72,
    70,
    208,
    112,
    120,
    128,
    136,
    68,
    52,
    96,
    104,
    200,
    16,
    8,
    416,
    24,
    88,
    168,
    32,
    24,
    16,
    40,
    24,
    16,
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
    240,
    200,
};

/* (b) 3.13 on: what _PyRuntime's _Py_DebugOffsets says, read by
 * py_detect__elf and by hand, against the headers. */
static void test_debug_offsets_against_headers(void **state)
{
    struct hdr h[32];
    bool checked[32] = {false};
    int nh = hdr_list(h, 32), nchecked = 0;
    size_t bad = 0;
    (void)state;

    for (int k = 0; k < nh; k++) {
        char lib[700], label[800];
        uint8_t buf[PY_DEBUG_OFFSETS_MAX];
        struct py_layout l;
        struct py_binary b;
        unsigned version;
        char why[192] = "";

        if (h[k].l.version < 0x030d)
            continue;
        /* libpython, or the interpreter itself where it is linked statically. */
        if (!py_file(h[k].prefix, h[k].l.version, "lib", lib, sizeof(lib)) &&
            !py_file(h[k].prefix, h[k].l.version, "bin", lib, sizeof(lib)))
            fail_msg("%s: neither libpython nor the interpreter under %s", h[k].label, h[k].prefix);

        /* By hand: the bytes at _PyRuntime, then the parser alone. */
        size_t len = read_runtime(lib, buf);
        assert_memory_equal(buf, "xdebugpy", 8);
        if (py_layout__from_debug_offsets(buf, len, &l, &version, why, sizeof(why)))
            fail_msg("%s: %s", lib, why);
        assert_int_equal(version, h[k].l.version);
        snprintf(label, sizeof(label), "%.60s (_Py_DebugOffsets of %.700s)", h[k].label, lib);
        bad += py_layout_diff(label, &l, "debug offsets", &h[k].l, "headers");

        /* Through py_detect__elf, as the agent reads it. */
        int fd = open(lib, O_RDONLY);
        assert_true(fd >= 0);
        assert_int_equal(py_detect__elf(fd, lib, &b), 1);
        close(fd);
        if (!b.usable)
            fail_msg("%s: not usable: %s", lib, b.why);
        assert_int_equal(b.version, h[k].l.version);
        snprintf(label, sizeof(label), "%.60s (py_detect__elf of %.700s)", h[k].label, lib);
        bad += py_layout_diff(label, &b.layout, "py_detect", &h[k].l, "headers");

        /* The test's own copy of 3.13.0's bytes is still what 3.13.0 has. */
        if (strcmp(h[k].label, "3.13.0") == 0) {
            assert_memory_equal(buf, dbg313, sizeof(dbg313));
            bad += py_layout_diff("3.13.0 (the test's copy)", &py_layout_313, "copy", &h[k].l,
                                  "headers");
        }
        printf("%s: %zu fields of _Py_DebugOffsets (by hand and by py_detect__elf) against the "
               "headers\n",
               h[k].label, py_layout_nfields);
        checked[k] = true;
        nchecked++;
    }
    printf("_Py_DebugOffsets: %d versions checked against their headers\n", nchecked);
    require_all_checked(0x030d, 0x03ff, h, checked, nh);
    assert_int_equal(bad, 0);
}

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

/* --- (d) the BPF side's view -------------------------------------------- */

/* One field of a read window: present or CX_PY_NO_FIELD, inside the window,
 * at the layout's offset, aligned to its size. */
static void check_rel(const char *label, const char *name, uint16_t rel, uint16_t base,
                      uint16_t len, int32_t off, unsigned size)
{
    if (off < 0) {
        if (rel != CX_PY_NO_FIELD)
            fail_msg("%s: %s absent but at %u", label, name, rel);
        return;
    }
    if (rel == CX_PY_NO_FIELD || (unsigned)rel + size > len || base + rel != off)
        fail_msg("%s: %s at %u of a window [%u, +%u), the layout says %d", label, name, rel, base,
                 len, off);
    if (rel % size != 0)
        fail_msg("%s: %s at %u of its window: not %u-aligned", label, name, rel, size);
}

static void check_abs(const char *label, const char *name, uint16_t got, int32_t off)
{
    if (got != (off < 0 ? CX_PY_NO_FIELD : off))
        fail_msg("%s: %s is %u, the layout says %d", label, name, got, off);
}

static void check_bpf(const char *label, const struct py_layout *l)
{
    struct cx_py_offsets o;
    char why[192];

    memset(&o, 0xee, sizeof(o));
    if (py_layout__to_bpf(l, &o, why, sizeof(why)))
        fail_msg("%s: %s", label, why);
    if (o.fr_len > CX_PY_FRAME_READ || o.co_len > CX_PY_CODE_READ || o.fr_base % 8 ||
        o.co_base % 8 || o.fr_len == 0 || o.co_len == 0)
        fail_msg("%s: frame window [%u, +%u), code window [%u, +%u)", label, o.fr_base, o.fr_len,
                 o.co_base, o.co_len);
    bool lasti = l->version < 0x030b;
    check_rel(label, "fr_previous", o.fr_previous, o.fr_base, o.fr_len, l->frame_previous, 8);
    check_rel(label, "fr_code", o.fr_code, o.fr_base, o.fr_len, l->frame_code, 8);
    check_rel(label, "fr_instr", o.fr_instr, o.fr_base, o.fr_len, l->frame_instr, lasti ? 4 : 8);
    check_rel(label, "fr_owner", o.fr_owner, o.fr_base, o.fr_len, l->frame_owner, 1);
    check_rel(label, "fr_is_entry", o.fr_is_entry, o.fr_base, o.fr_len, l->frame_is_entry, 1);
    check_rel(label, "co_firstlineno", o.co_firstlineno, o.co_base, o.co_len, l->code_firstlineno,
              4);
    check_rel(label, "co_filename", o.co_filename, o.co_base, o.co_len, l->code_filename, 8);
    check_rel(label, "co_name", o.co_name, o.co_base, o.co_len, l->code_name, 8);
    check_abs(label, "rt_interp_head", o.rt_interp_head, l->runtime_interpreters_head);
    check_abs(label, "interp_next", o.interp_next, l->interp_next);
    check_abs(label, "interp_threads_head", o.interp_threads_head, l->interp_threads_head);
    check_abs(label, "ts_next", o.ts_next, l->tstate_next);
    check_abs(label, "ts_native_tid", o.ts_native_tid, l->tstate_native_thread_id);
    check_abs(label, "ts_thread_id", o.ts_thread_id, l->tstate_thread_id);
    check_abs(label, "ts_frame", o.ts_frame, l->tstate_frame);
    check_abs(label, "cframe_current", o.cframe_current, l->cframe_current_frame);
    check_abs(label, "co_code_adaptive", o.co_code_adaptive, l->code_code_adaptive);
    /* The thread state's fields the walk reads are pointers or thread ids. */
    assert_true(o.rt_interp_head % 8 == 0 && o.interp_threads_head % 8 == 0 && o.ts_next % 8 == 0 &&
                o.ts_frame % 8 == 0);
    /* What each model needs: is_entry in 3.11, owner from 3.12, no cframe
     * from 3.13, the native thread id from 3.11. */
    unsigned want = l->version <= 0x030a   ? CX_PY_ONE_PER_EVAL
                    : l->version == 0x030b ? CX_PY_IS_ENTRY
                                           : CX_PY_CSTACK;
    if (o.model != want)
        fail_msg("%s: model %u, want %u", label, o.model, want);
    if (want == CX_PY_IS_ENTRY)
        assert_int_not_equal(o.fr_is_entry, CX_PY_NO_FIELD);
    if (want == CX_PY_CSTACK)
        assert_int_not_equal(o.fr_owner, CX_PY_NO_FIELD);
    if (l->version >= 0x030b)
        assert_int_not_equal(o.ts_native_tid, CX_PY_NO_FIELD);
    if (l->version == 0x030b || l->version == 0x030c)
        assert_int_not_equal(o.cframe_current, CX_PY_NO_FIELD);
    for (size_t i = 0; i < sizeof(o.pad); i++)
        assert_int_equal(o.pad[i], 0);
    printf("%s: frame window [%u, +%u), code window [%u, +%u), model %u\n", label, o.fr_base,
           o.fr_len, o.co_base, o.co_len, o.model);
}

static void test_to_bpf(void **state)
{
    unsigned versions[32];
    unsigned n = py_layout__table_versions(versions, 32), checked = 0;
    struct hdr h[32];
    int nh = hdr_list(h, 32);
    (void)state;

    for (unsigned i = 0; i < n; i++) {
        char label[32];
        snprintf(label, sizeof(label), "table %u.%u", versions[i] >> 8, versions[i] & 0xff);
        check_bpf(label, py_layout__for_version(versions[i]));
        checked++;
    }
    check_bpf("3.13.0", &py_layout_313);
    checked++;
    /* And every installed 3.13+ as its headers have it. */
    for (int k = 0; k < nh; k++) {
        if (h[k].l.version >= 0x030d) {
            check_bpf(h[k].label, &h[k].l);
            checked++;
        }
    }
    printf("BPF offsets: %u layouts checked\n", checked);

    /* Layouts the walk cannot use: refused with a reason. */
    struct py_layout l;
    struct cx_py_offsets o;
    char why[192];
    const struct py_layout *t311 = py_layout__for_version(0x030b);
    const struct py_layout *t312 = py_layout__for_version(0x030c);
    const struct py_layout *t38 = py_layout__for_version(0x0308);
    assert_non_null(t311);
    assert_non_null(t312);
    assert_non_null(t38);

    l = py_layout_313;
    l.frame_owner = l.frame_previous + CX_PY_FRAME_READ; /* a frame window too wide */
    assert_int_equal(py_layout__to_bpf(&l, &o, why, sizeof(why)), -1);
    assert_true(why[0] != '\0');
    l = py_layout_313;
    l.code_firstlineno = l.code_name + CX_PY_CODE_READ; /* a code window too wide */
    assert_int_equal(py_layout__to_bpf(&l, &o, why, sizeof(why)), -1);
    l = *t311;
    l.frame_is_entry = -1;
    assert_int_equal(py_layout__to_bpf(&l, &o, why, sizeof(why)), -1);
    l = *t312;
    l.frame_owner = -1;
    assert_int_equal(py_layout__to_bpf(&l, &o, why, sizeof(why)), -1);
    l = *t312;
    l.code_code_adaptive = -1;
    assert_int_equal(py_layout__to_bpf(&l, &o, why, sizeof(why)), -1);
    l = *t38;
    l.tstate_thread_id = -1;
    assert_int_equal(py_layout__to_bpf(&l, &o, why, sizeof(why)), -1);
    static const size_t needed[] = {
        offsetof(struct py_layout, frame_previous),
        offsetof(struct py_layout, frame_code),
        offsetof(struct py_layout, frame_instr),
        offsetof(struct py_layout, runtime_interpreters_head),
        offsetof(struct py_layout, interp_threads_head),
        offsetof(struct py_layout, tstate_next),
        offsetof(struct py_layout, tstate_frame),
    };
    for (size_t i = 0; i < sizeof(needed) / sizeof(needed[0]); i++) {
        int32_t none = -1;
        l = py_layout_313;
        memcpy((char *)&l + needed[i], &none, sizeof(none));
        assert_int_equal(py_layout__to_bpf(&l, &o, why, sizeof(why)), -1);
    }
    /* Just fitting: a frame window of exactly CX_PY_FRAME_READ bytes. */
    l = py_layout_313;
    l.frame_code = 0;
    l.frame_owner = CX_PY_FRAME_READ - 1;
    assert_int_equal(py_layout__to_bpf(&l, &o, why, sizeof(why)), 0);
    assert_int_equal(o.fr_len, CX_PY_FRAME_READ);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_against_headers),
        cmocka_unit_test(test_debug_offsets_against_headers),
        cmocka_unit_test(test_debug_offsets_valid),
        cmocka_unit_test(test_debug_offsets_short),
        cmocka_unit_test(test_debug_offsets_header),
        cmocka_unit_test(test_debug_offsets_bounds),
        cmocka_unit_test(test_debug_offsets_versions),
        cmocka_unit_test(test_debug_offsets_garbage),
        cmocka_unit_test(test_to_bpf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
