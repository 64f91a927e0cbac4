/* plt: PLT stubs named as objdump names them (`puts@plt`), in lazy .plt,
 * IBT .plt.sec and .plt.got stubs, and in libc and libstdc++ as Debian
 * ships them; checked against objdump -d, which finds them another way
 * (binutils' own synthetic symbols). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../agent/symbolize/plt.h"

struct opened {
    int fd;
    Elf *e;
};

static struct plt *build(const char *path, struct opened *o)
{
    elf_version(EV_CURRENT);
    o->fd = open(path, O_RDONLY);
    assert_true(o->fd >= 0);
    o->e = elf_begin(o->fd, ELF_C_READ, NULL);
    assert_non_null(o->e);
    return plt__build(o->e);
}

static void done(struct plt *p, struct opened *o)
{
    plt__free(p);
    elf_end(o->e);
    close(o->fd);
}

/* Every stub objdump labels NAME@plt gets the same name from its first to
 * its last byte of the entry; one labelled *ABS*+0xRESOLVER@plt (IRELATIVE)
 * gets the name of an IFUNC symbol at RESOLVER; no more are named than
 * objdump labels. Returns how many were compared. */
static size_t against_objdump(const char *path, struct plt *p)
{
    char cmd[512], line[1024];
    size_t n = 0, named = 0;

    snprintf(cmd, sizeof(cmd),
             "objdump -d -j .plt -j .plt.sec -j .plt.got '%s' 2>/dev/null | "
             "grep -E '^[0-9a-f]+ <.*@plt>:$'",
             path);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    while (fgets(line, sizeof(line), f)) {
        unsigned long long addr;
        char name[900];
        if (sscanf(line, "%llx <%899[^>]>:", &addr, name) != 2)
            continue;
        n++;
        uint64_t start = 0;
        unsigned long long resolver;
        if (sscanf(name, "*ABS*+0x%llx@plt", &resolver) == 1) {
            /* An IFUNC's stub: named after a dynamic IFUNC symbol at the
             * resolver's address, which nm -D lists with type i. */
            const char *got = plt__lookup(p, addr, &start);
            assert_non_null(got);
            assert_int_equal(start, addr);
            char want[600];
            snprintf(cmd, sizeof(cmd), "nm -D '%s' | grep -qE '^0*%llx i %.*s(@.*)?$'", path,
                     resolver, (int)(strlen(got) - 4), got);
            snprintf(want, sizeof(want), "%s", got);
            if (system(cmd) != 0)
                print_message("    %s: 0x%llx %s: ours %s, not an IFUNC at 0x%llx\n", path, addr,
                              name, want, resolver);
            assert_int_equal(system(cmd), 0);
            named++;
            continue;
        }
        const char *got = plt__lookup(p, addr, &start);
        const char *inside = plt__lookup(p, addr + 7, NULL);
        if (!got || strcmp(got, name) || start != addr || !inside || strcmp(inside, name))
            print_message("    %s: 0x%llx objdump %s, ours %s / %s\n", path, addr, name,
                          got ? got : "(none)", inside ? inside : "(none)");
        assert_non_null(got);
        assert_string_equal(got, name);
        assert_int_equal(start, addr);
        assert_non_null(inside);
        assert_string_equal(inside, name);
        named++;
    }
    pclose(f);
    print_message("    %s: %zu stubs named as objdump names them (of %zu it labels)\n", path, named,
                  n);
    assert_int_equal(plt__count(p), named);
    return named;
}

static void test_fixtures(void **state)
{
    (void)state;
    static const char *const paths[] = {"build/fixtures/plt_c", "build/fixtures/plt_ibt"};
    for (size_t i = 0; i < 2; i++) {
        struct opened o;
        struct plt *p = build(paths[i], &o);
        assert_non_null(p);
        assert_true(against_objdump(paths[i], p) >= 4);
        assert_string_equal(plt__lookup(p, 0x1060, NULL), "__cxa_finalize@plt"); /* .plt.got */
        done(p, &o);
    }
}

/* Addresses outside every stub: PLT0, before the PLT, far away. */
static void test_outside(void **state)
{
    (void)state;
    struct opened o;
    struct plt *p = build("build/fixtures/plt_c", &o);

    assert_null(plt__lookup(p, 0x1020, NULL)); /* PLT0 */
    assert_null(plt__lookup(p, 0x1000, NULL));
    assert_null(plt__lookup(p, ~0ull, NULL));
    assert_null(plt__lookup(NULL, 0x1030, NULL));
    done(p, &o);
}

static void test_system_libraries(void **state)
{
    (void)state;
    static const char *const paths[] = {"/lib/x86_64-linux-gnu/libc.so.6",
                                        "/lib/x86_64-linux-gnu/libstdc++.so.6"};
    for (size_t i = 0; i < 2; i++) {
        if (access(paths[i], R_OK))
            continue;
        struct opened o;
        struct plt *p = build(paths[i], &o);
        against_objdump(paths[i], p);
        done(p, &o);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures),
        cmocka_unit_test(test_outside),
        cmocka_unit_test(test_system_libraries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
