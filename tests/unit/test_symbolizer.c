#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../agent/symbolize/binary.h"
#include "../../agent/symbolize/debugplain.h"
#include "../../agent/symbolize/demangle.h"
#include "../../agent/symbolize/symbolizer.h"
#include "elf_helpers.h"

static const char *fixture(const char *name)
{
    static char path[512];
    const char *dir = getenv("CX_FIXTURES");
    snprintf(path, sizeof(path), "%s/%s", dir ? dir : "build/fixtures", name);
    return path;
}

struct ctx {
    struct symbolizer *s;
};

static int setup(void **state)
{
    struct ctx *c = calloc(1, sizeof(*c));
    c->s = symbolizer__new();
    *state = c;
    return c->s ? 0 : -1;
}

static int teardown(void **state)
{
    struct ctx *c = *state;
    symbolizer__free(c->s);
    free(c);
    return 0;
}

static void test_symtab_and_lines(void **state)
{
    struct ctx *c = *state;
    char path[512];
    uint64_t va, size, off;

    snprintf(path, sizeof(path), "%s", fixture("fp_c"));
    struct binary *b = binary__open(path);
    assert_non_null(b);
    assert_true(b->fd >= 0);
    assert_true(strlen(b->build_id) >= 40);

    assert_int_equal(elf_symbol(path, "hot_a", &va, &size, &off), 0);
    const struct sym_result *r = symbolizer__lookup(c->s, b, off + 4, false);
    assert_true(r->named);
    assert_int_equal(r->elf_addr, va + 4);
    assert_string_equal(r->lines[r->n - 1].function, "hot_a");
    assert_non_null(strstr(r->lines[r->n - 1].file, "cpu_split.c"));
    assert_true(r->lines[r->n - 1].line > 0);
    assert_true(symbolizer__has_dwarf(c->s, b));
    assert_null(symbolizer__why_unnamed(c->s, b));

    /* A return address at the very end of a function names that function,
     * not the next one: the call before it is what is looked up. */
    assert_int_equal(elf_symbol(path, "dispatch", &va, &size, &off), 0);
    r = symbolizer__lookup(c->s, b, off + size, true);
    assert_true(r->named);
    assert_string_equal(r->lines[r->n - 1].function, "dispatch");
    /* Cached: the same answer, the same memory. */
    assert_ptr_equal(symbolizer__lookup(c->s, b, off + size, true), r);
    binary__put(b);
}

/* Resident KiB of this process's mappings of files under dir (libdwfl's
 * private maps of the debug files it opened), counting only mappings of
 * at least 1 MiB (not a library's own data segment). */
static long rss_kib_under(const char *dir)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[1024];
    long total = 0;
    bool in = false;

    assert_non_null(f);
    while (fgets(line, sizeof(line), f)) {
        unsigned long lo, hi;
        char path[512] = "";
        if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %511s", &lo, &hi, path) >= 2 &&
            strchr(line, '-') < strchr(line, ' ')) {
            in = hi - lo >= (1ul << 20) && strncmp(path, dir, strlen(dir)) == 0;
            continue;
        }
        long kib;
        if (in && sscanf(line, "Rss: %ld kB", &kib) == 1)
            total += kib;
    }
    fclose(f);
    return total;
}

/* libc named from its debug file (Debian's libc6-dbg, where installed):
 * the file's pages libdwfl mapped are handed back once its tables are
 * built and at each window's trim (issue 36: 4 MiB of it stayed in the
 * agent's RSS), and names are the same before and after. */
static void test_images_dropped(void **state)
{
    struct ctx *c = *state;
    const char *libc = "/lib/x86_64-linux-gnu/libc.so.6";
    uint64_t va, size, off;

    if (access(libc, R_OK) || access("/usr/lib/debug/.build-id", R_OK) ||
        elf_symbol(libc, "qsort", &va, &size, &off)) {
        skip();
        return;
    }
    struct binary *b = binary__open(libc);
    assert_non_null(b);
    const struct sym_result *r = symbolizer__lookup(c->s, b, off + 4, false);
    assert_true(r->named);
    if (!symbolizer__has_dwarf(c->s, b)) {
        binary__put(b);
        skip(); /* no debug file for this libc */
        return;
    }
    char first[256];
    snprintf(first, sizeof(first), "%s", r->lines[r->n - 1].function);
    long after_load = rss_kib_under("/usr/lib/debug/");
    print_message("    debug file resident after loading: %ld KiB\n", after_load);
    assert_true(after_load < 1024);
    symbolizer__trim(c->s);
    r = symbolizer__lookup(c->s, b, off + 4, false);
    assert_true(r->named);
    assert_string_equal(r->lines[r->n - 1].function, first);
    assert_true(r->lines[r->n - 1].line > 0);
    symbolizer__trim(c->s);
    long after_trim = rss_kib_under("/usr/lib/debug/");
    print_message("    after a lookup and a trim: %ld KiB\n", after_trim);
    assert_true(after_trim < 1024);
    binary__put(b);
}

/* Every name and line of a lookup at each of these addresses of libc,
 * one after another, and the heap the first lookup (its debug file's
 * loading) took, by a fresh symbolizer. */
#define PLAIN_FNS 8
#define PLAIN_STEP 4
struct libc_names {
    char *text; /* "function file:line|..." per address, one a line */
    size_t heap;
    size_t n;
};

static size_t heap_now(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

static void libc_names(const char *libc, const uint64_t *offs, const uint64_t *sizes,
                       struct libc_names *out)
{
    struct symbolizer *s = symbolizer__new();
    struct binary *b = binary__open(libc);
    size_t len = 0, cap = 1 << 20;

    assert_non_null(s);
    assert_non_null(b);
    out->text = malloc(cap);
    out->n = 0;
    out->text[0] = '\0';
    for (int i = 0; i < PLAIN_FNS; i++) {
        for (uint64_t o = 0; o < sizes[i]; o += PLAIN_STEP) {
            size_t before = heap_now();
            const struct sym_result *r = symbolizer__lookup(s, b, offs[i] + o, false);
            if (out->n == 0)
                out->heap = heap_now() - before;
            for (unsigned k = 0; r->named && k < r->n; k++) {
                if (cap - len < 1024) {
                    cap *= 2;
                    out->text = realloc(out->text, cap);
                }
                len += (size_t)snprintf(out->text + len, cap - len, "%s %s:%lld|",
                                        r->lines[k].function, r->lines[k].file,
                                        (long long)r->lines[k].line);
            }
            len += (size_t)snprintf(out->text + len, cap - len, "\n");
            out->n++;
        }
    }
    binary__put(b);
    symbolizer__free(s);
}

/* Whether libc's debug file under /usr/lib/debug/.build-id/ has
 * compressed sections (libc6-dbg's has). */
static bool libc_debug_compressed(const char *libc)
{
    struct binary *b = binary__open(libc);
    char path[512];
    bool comp = false;

    assert_non_null(b);
    snprintf(path, sizeof(path), "/usr/lib/debug/.build-id/%.2s/%s.debug", b->build_id,
             b->build_id + 2);
    binary__put(b);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return false;
    elf_version(EV_CURRENT);
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    for (Elf_Scn *sc = NULL; e && (sc = elf_nextscn(e, sc));) {
        GElf_Shdr sh;
        comp |= gelf_getshdr(sc, &sh) && (sh.sh_flags & SHF_COMPRESSED);
    }
    elf_end(e);
    close(fd);
    return comp;
}

/* libc named from its debug file (libc6-dbg's: compressed sections) read
 * through a decompressed copy (symbolize/debugplain.h): the same names and
 * lines as from the compressed file, and without the 10 MiB the
 * decompressed sections took in the heap (issue 36). */
static void test_plain_debug_file_same_names(void **state)
{
    (void)state;
    const char *libc = "/lib/x86_64-linux-gnu/libc.so.6";
    const char *fns[PLAIN_FNS] = {"qsort",  "malloc",  "fopen",  "vfprintf",
                                  "strtod", "regcomp", "getenv", "pthread_create"};
    uint64_t offs[PLAIN_FNS], sizes[PLAIN_FNS], va;
    char dir[] = "/tmp/cx-plain-XXXXXX", err[256], cmd[128];
    struct libc_names compressed, plain;
    uint64_t made, reused;

    for (int i = 0; i < PLAIN_FNS; i++) {
        if (access(libc, R_OK) || access("/usr/lib/debug/.build-id", R_OK) ||
            elf_symbol(libc, fns[i], &va, &sizes[i], &offs[i])) {
            skip();
            return;
        }
    }
    if (!libc_debug_compressed(libc)) {
        skip(); /* no libc6-dbg, or its sections are not compressed */
        return;
    }
    libc_names(libc, offs, sizes, &compressed);
    assert_non_null(mkdtemp(dir));
    struct debugplain *p = debugplain__new(dir, 256 << 20, err, sizeof(err));
    assert_non_null(p);
    symbolizer__set_debug_plain(p);
    libc_names(libc, offs, sizes, &plain);
    symbolizer__set_debug_plain(NULL);
    debugplain__counts(p, &made, &reused);
    debugplain__free(p);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    print_message("    %zu lookups; heap of libc's loading: compressed debug file %zu KiB, "
                  "decompressed copy %zu KiB\n",
                  plain.n, compressed.heap >> 10, plain.heap >> 10);
    assert_int_equal(made, 1);
    assert_true(plain.n > 1000);
    assert_string_equal(plain.text, compressed.text);
    assert_non_null(strstr(plain.text, "qsort")); /* named from DWARF, with lines */
    assert_true(plain.heap + (4u << 20) < compressed.heap);
    free(compressed.text);
    free(plain.text);
}

static void test_inlined_frames(void **state)
{
    struct ctx *c = *state;
    char path[512];
    uint64_t va, size, off;
    bool found = false;

    snprintf(path, sizeof(path), "%s", fixture("inline_c"));
    struct binary *b = binary__open(path);
    assert_int_equal(elf_symbol(path, "outer", &va, &size, &off), 0);
    for (uint64_t i = 0; i < size && !found; i++) {
        const struct sym_result *r = symbolizer__lookup(c->s, b, off + i, false);
        assert_true(r->named);
        assert_string_equal(r->lines[r->n - 1].function, "outer");
        if (r->n >= 2 && strcmp(r->lines[0].function, "inlined_leaf") == 0) {
            found = true;
            assert_non_null(strstr(r->lines[0].file, "inline.c"));
            /* The caller's line is where the inlined copy was called. */
            assert_int_equal(r->lines[r->n - 1].line, 15);
        }
    }
    assert_true(found);
    binary__put(b);
}

static void test_cxx_demangled(void **state)
{
    struct ctx *c = *state;
    char path[512];
    uint64_t va, size, off;

    snprintf(path, sizeof(path), "%s", fixture("cxx"));
    struct binary *b = binary__open(path);
    assert_int_equal(elf_symbol(path, "_ZN2ns6Widget4spinEi", &va, &size, &off), 0);
    const struct sym_result *r = symbolizer__lookup(c->s, b, off + 1, false);
    assert_true(r->named);
    assert_string_equal(r->lines[r->n - 1].function, "ns::Widget::spin(int)");
    assert_string_equal(r->lines[r->n - 1].system_name, "_ZN2ns6Widget4spinEi");
    assert_int_equal(elf_symbol(path, "_ZN2ns5twiceIlEET_S1_", &va, &size, &off), 0);
    r = symbolizer__lookup(c->s, b, off, false);
    assert_string_equal(r->lines[r->n - 1].function, "long ns::twice<long>(long)");
    binary__put(b);
}

static void test_stripped_says_why(void **state)
{
    struct ctx *c = *state;
    char path[512];
    uint64_t va, size, off;

    snprintf(path, sizeof(path), "%s", fixture("fp_c"));
    assert_int_equal(elf_symbol(path, "hot_a", &va, &size, &off), 0);
    snprintf(path, sizeof(path), "%s", fixture("stripped_c"));
    struct binary *b = binary__open(path);
    const struct sym_result *r = symbolizer__lookup(c->s, b, off, false);
    assert_false(r->named);
    assert_int_equal(r->elf_addr, va); /* what addr2line -e on the unstripped file takes */
    const char *why = symbolizer__why_unnamed(c->s, b);
    assert_non_null(why);
    assert_non_null(strstr(why, "symbols"));
    binary__put(b);

    b = binary__open("/nonexistent/binary");
    assert_int_equal(b->fd, -1);
    r = symbolizer__lookup(c->s, b, 0x1000, false);
    assert_false(r->named);
    assert_non_null(strstr(symbolizer__why_unnamed(c->s, b), "cannot open"));
    binary__put(b);
}

static void test_separate_debug_file(void **state)
{
    struct ctx *c = *state;
    char path[512];
    uint64_t va, size, off;

    /* Names come from split.debug, found through the stripped binary's
     * .gnu_debuglink in its own directory. */
    snprintf(path, sizeof(path), "%s", fixture("fp_c"));
    assert_int_equal(elf_symbol(path, "hot_b", &va, &size, &off), 0);
    snprintf(path, sizeof(path), "%s", fixture("debuglink_c"));
    struct binary *b = binary__open(path);
    const struct sym_result *r = symbolizer__lookup(c->s, b, off + 2, false);
    assert_true(r->named);
    assert_string_equal(r->lines[r->n - 1].function, "hot_b");
    assert_non_null(strstr(r->lines[r->n - 1].file, "cpu_split.c"));
    assert_null(symbolizer__why_unnamed(c->s, b));
    binary__put(b);
}

static void test_not_elf(void **state)
{
    struct ctx *c = *state;
    char path[] = "/tmp/cx-notelf-XXXXXX";
    int fd = mkstemp(path);

    assert_int_equal(write(fd, "#!/bin/sh\necho hi\n", 18), 18);
    close(fd);
    struct binary *b = binary__open(path);
    const struct sym_result *r = symbolizer__lookup(c->s, b, 0, false);
    assert_false(r->named);
    assert_non_null(symbolizer__why_unnamed(c->s, b));
    binary__put(b);
    unlink(path);
}

static void test_demangle(void **state)
{
    (void)state;
    char *d = demangle("_ZN4core3fmt5write17h0123456789abcdefE");
    assert_non_null(d);
    assert_string_equal(d, "core::fmt::write");
    free(d);
    d = demangle("_ZNSt6vectorIiSaIiEE9push_backERKi");
    assert_non_null(d);
    assert_string_equal(d, "std::vector<int, std::allocator<int> >::push_back(int const&)");
    free(d);
    assert_null(demangle("main"));
    assert_null(demangle("_Zgarbage("));
    assert_null(demangle(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_symtab_and_lines),
        cmocka_unit_test_setup_teardown(test_images_dropped, setup, teardown),
        cmocka_unit_test(test_plain_debug_file_same_names),
        cmocka_unit_test(test_inlined_frames),
        cmocka_unit_test(test_cxx_demangled),
        cmocka_unit_test(test_stripped_says_why),
        cmocka_unit_test(test_separate_debug_file),
        cmocka_unit_test(test_not_elf),
        cmocka_unit_test(test_demangle),
    };
    return cmocka_run_group_tests_name("symbolizer", tests, setup, teardown);
}
