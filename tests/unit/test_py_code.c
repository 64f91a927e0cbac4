/* py_code: code objects and strings read out of a fake process memory
 * (regions the test builds in each version's layout, reads outside them
 * failing; py_code_helpers.h), for 3.8, 3.10, 3.11, 3.12 and 3.13: names in
 * each string kind, qualname and its fallback, the type and fingerprint
 * checks, line tables' sizes; then code objects of real interpreters
 * (pyenv's, Debian's), read with process_vm_readv from a child that says
 * what they are. Hostile memory (caps, malformed strings, unreadable
 * pointers) is test_py_code_hostile.c's. Run once under valgrind. */
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

#include "../../agent/runtimes/proc_mem.h"
#include "../../agent/runtimes/python/py_code.h"
#include "../../agent/runtimes/python/py_detect.h"
#include "py_helpers.h"
#include "py_code_helpers.h"

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
    struct py_reader r = {proc_mem__read, (void *)(intptr_t)ch.pid};

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
        cmocka_unit_test(test_read_each_layout), cmocka_unit_test(test_read_str),
        cmocka_unit_test(test_type_and_tag),     cmocka_unit_test(test_table_sizes),
        cmocka_unit_test(test_real_processes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
