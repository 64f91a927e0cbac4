/* py_layout: the table of 3.7 to 3.12 against the headers it was made from,
 * 3.13's layout as the interpreter's own _Py_DebugOffsets gives it against
 * its headers, and the BPF side's view of every layout. Hostile input to
 * py_layout__from_debug_offsets is test_py_layout_hostile.c's.
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
#include "py_layout_helpers.h"

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
        cmocka_unit_test(test_to_bpf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
