/* Compressed debug files kept decompressed on disk (agent/symbolize/
 * debugplain.c): the copy holds the same sections, decompressed; libdw
 * reading it takes no heap for them; a copy is made once and reused; a
 * hostile or broken file leaves nothing behind and is handed back as it
 * was. The debug files are this test binary's DWARF (several MiB), put
 * through objcopy --only-keep-debug --compress-debug-sections. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../agent/symbolize/debugplain.h"

static char tmp[64], zlib_file[128], zstd_file[128], cache[128];
static bool have_zstd;

static int setup(void **state)
{
    char cmd[1024];

    (void)state;
    elf_version(EV_CURRENT);
    snprintf(tmp, sizeof(tmp), "/tmp/cx-debugplain-XXXXXX");
    if (!mkdtemp(tmp))
        return -1;
    snprintf(zlib_file, sizeof(zlib_file), "%s/zlib.debug", tmp);
    snprintf(zstd_file, sizeof(zstd_file), "%s/zstd.debug", tmp);
    snprintf(cache, sizeof(cache), "%s/cache", tmp);
    snprintf(cmd, sizeof(cmd),
             "objcopy --only-keep-debug --compress-debug-sections=zlib /proc/%d/exe %s",
             (int)getpid(), zlib_file);
    if (system(cmd))
        return -1;
    snprintf(cmd, sizeof(cmd),
             "objcopy --only-keep-debug --compress-debug-sections=zstd /proc/%d/exe %s "
             "2>/dev/null",
             (int)getpid(), zstd_file);
    have_zstd = system(cmd) == 0;
    return 0;
}

static int teardown(void **state)
{
    char cmd[256];

    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
    return system(cmd) ? -1 : 0;
}

static void fresh_cache(void)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", cache);
    assert_int_equal(system(cmd), 0);
}

/* Regular files in the cache, hidden ones (being written) included. */
static int cache_files(void)
{
    DIR *d = opendir(cache);
    struct dirent *de;
    int n = 0;

    if (!d)
        return 0;
    while ((de = readdir(d)))
        n += de->d_type == DT_REG;
    closedir(d);
    return n;
}

static void copy_file(const char *from, const char *to)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "cp %s %s", from, to);
    assert_int_equal(system(cmd), 0);
}

/* The decompressed bytes of the DWARF sections of the file at path (its
 * sections whose name starts with .debug_). */
static uint64_t dwarf_bytes(const char *path, int *ncompressed)
{
    int fd = open(path, O_RDONLY);
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    size_t shstrndx;
    uint64_t n = 0;

    *ncompressed = 0;
    assert_non_null(e);
    assert_int_equal(elf_getshdrstrndx(e, &shstrndx), 0);
    for (Elf_Scn *s = NULL; (s = elf_nextscn(e, s));) {
        GElf_Shdr sh;
        GElf_Chdr ch;
        assert_non_null(gelf_getshdr(s, &sh));
        const char *name = elf_strptr(e, shstrndx, sh.sh_name);
        if (!name || strncmp(name, ".debug_", 7) != 0)
            continue;
        if (sh.sh_flags & SHF_COMPRESSED) {
            assert_non_null(gelf_getchdr(s, &ch));
            n += ch.ch_size;
            (*ncompressed)++;
        } else {
            n += sh.sh_size;
        }
    }
    elf_end(e);
    close(fd);
    return n;
}

/* Every section of a (objcopy --decompress-debug-sections' output) and b
 * the same: headers (but their offsets) and contents. */
static void assert_same_sections(int fa, int fb)
{
    Elf *a = elf_begin(fa, ELF_C_READ, NULL), *b = elf_begin(fb, ELF_C_READ, NULL);
    size_t na, nb;

    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(elf_getshdrnum(a, &na), 0);
    assert_int_equal(elf_getshdrnum(b, &nb), 0);
    assert_int_equal(na, nb);
    for (size_t i = 1; i < na; i++) {
        Elf_Scn *sa = elf_getscn(a, i), *sb = elf_getscn(b, i);
        GElf_Shdr ha, hb;
        assert_non_null(gelf_getshdr(sa, &ha));
        assert_non_null(gelf_getshdr(sb, &hb));
        assert_int_equal(ha.sh_flags & SHF_COMPRESSED, 0);
        assert_int_equal(ha.sh_name, hb.sh_name);
        assert_int_equal(ha.sh_type, hb.sh_type);
        /* objcopy sets SHF_INFO_LINK on the relocation sections it writes. */
        assert_int_equal(ha.sh_flags & ~(uint64_t)SHF_INFO_LINK,
                         hb.sh_flags & ~(uint64_t)SHF_INFO_LINK);
        assert_int_equal(ha.sh_size, hb.sh_size);
        assert_int_equal(ha.sh_addr, hb.sh_addr);
        assert_int_equal(ha.sh_addralign, hb.sh_addralign);
        assert_int_equal(ha.sh_link, hb.sh_link);
        assert_int_equal(ha.sh_info, hb.sh_info);
        if (ha.sh_type == SHT_NOBITS)
            continue;
        assert_int_equal(hb.sh_offset % (hb.sh_addralign ? hb.sh_addralign : 1), 0);
        Elf_Data *da = elf_rawdata(sa, NULL), *db = elf_rawdata(sb, NULL);
        assert_non_null(da);
        assert_non_null(db);
        assert_int_equal(da->d_size, db->d_size);
        assert_memory_equal(da->d_buf, db->d_buf, da->d_size);
    }
    elf_end(a);
    elf_end(b);
}

/* fd of src decompressed by objcopy. */
static int reference(const char *src)
{
    char cmd[512], ref[160];

    snprintf(ref, sizeof(ref), "%s/ref.debug", tmp);
    snprintf(cmd, sizeof(cmd), "objcopy --decompress-debug-sections %s %s", src, ref);
    assert_int_equal(system(cmd), 0);
    int fd = open(ref, O_RDONLY);
    assert_true(fd >= 0);
    unlink(ref);
    return fd;
}

static void check_copy(const char *src)
{
    struct debugplain *p;
    char err[256];
    int ncomp, fd, got, again;
    struct stat s1, s2;
    uint64_t made, reused;

    fresh_cache();
    p = debugplain__new(cache, 256 << 20, err, sizeof(err));
    assert_non_null(p);
    assert_true(dwarf_bytes(src, &ncomp) > 0);
    assert_true(ncomp >= 3); /* .debug_info, _abbrev, _line at least */
    fd = open(src, O_RDONLY);
    got = debugplain__swap(p, fd, NULL);
    assert_true(got >= 0);
    assert_int_not_equal(got, fd); /* fd closed: the copy's descriptor instead */
    assert_int_equal(fcntl(fd, F_GETFD), -1);
    int ref = reference(src);
    assert_same_sections(ref, got);
    close(ref);
    debugplain__counts(p, &made, &reused);
    assert_int_equal(made, 1);
    assert_int_equal(reused, 0);
    assert_int_equal(cache_files(), 1);
    /* A second open takes the same copy. */
    again = debugplain__swap(p, open(src, O_RDONLY), NULL);
    assert_int_equal(fstat(got, &s1), 0);
    assert_int_equal(fstat(again, &s2), 0);
    assert_int_equal(s1.st_ino, s2.st_ino);
    debugplain__counts(p, &made, &reused);
    assert_int_equal(made, 1);
    assert_int_equal(reused, 1);
    close(got);
    close(again);
    debugplain__free(p);
}

static void test_zlib_copy(void **state)
{
    (void)state;
    check_copy(zlib_file);
}

static void test_zstd_copy(void **state)
{
    (void)state;
    if (!have_zstd)
        skip(); /* objcopy without zstd */
    check_copy(zstd_file);
}

static size_t heap_now(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

/* Heap libdw holds once it has opened the file at fd and read its first
 * unit's DIE (libdw takes the sections it reads when it opens a file). */
static size_t libdw_heap(int fd)
{
    size_t before = heap_now(), after;
    Dwarf *dw = dwarf_begin(fd, DWARF_C_READ);
    Dwarf_Off next;
    size_t hsize;
    Dwarf_Die cu;

    assert_non_null(dw);
    assert_int_equal(dwarf_nextcu(dw, 0, &next, &hsize, NULL, NULL, NULL), 0);
    assert_non_null(dwarf_offdie(dw, hsize, &cu));
    after = heap_now();
    dwarf_end(dw);
    return after - before;
}

/* The point of it all: libdw decompresses a compressed file's DWARF into
 * the heap; given the copy, it reads it through its mapping. */
static void test_copy_takes_no_heap(void **state)
{
    (void)state;
    struct debugplain *p;
    char err[256];
    int ncomp;
    uint64_t dwarf = dwarf_bytes(zlib_file, &ncomp);

    fresh_cache();
    p = debugplain__new(cache, 256 << 20, err, sizeof(err));
    assert_non_null(p);
    int orig = open(zlib_file, O_RDONLY);
    size_t heap_orig = libdw_heap(orig);
    close(orig);
    int plain = debugplain__swap(p, open(zlib_file, O_RDONLY), NULL);
    size_t heap_plain = libdw_heap(plain);
    close(plain);
    debugplain__free(p);
    print_message("DWARF %llu bytes; libdw's heap: compressed file %zu, copy %zu\n",
                  (unsigned long long)dwarf, heap_orig, heap_plain);
    assert_true(dwarf > (512u << 10));
    assert_true(heap_orig >= dwarf * 8 / 10);
    assert_true(heap_plain < dwarf / 4);
}

/* Offset of the Chdr of the file's section named name. */
static off_t chdr_offset(const char *path, const char *name)
{
    int fd = open(path, O_RDONLY);
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    size_t shstrndx;
    off_t at = -1;

    assert_int_equal(elf_getshdrstrndx(e, &shstrndx), 0);
    for (Elf_Scn *s = NULL; (s = elf_nextscn(e, s));) {
        GElf_Shdr sh;
        gelf_getshdr(s, &sh);
        const char *n = elf_strptr(e, shstrndx, sh.sh_name);
        if (n && strcmp(n, name) == 0 && (sh.sh_flags & SHF_COMPRESSED))
            at = (off_t)sh.sh_offset;
    }
    elf_end(e);
    close(fd);
    assert_true(at > 0);
    return at;
}

/* A copy of the zlib file with .debug_info's stated size moved by delta
 * (or, delta 0, a byte of its stream changed); the fd returned by swap must
 * be the one given, and nothing left in the cache. */
static void check_refused(int64_t delta, uint64_t absolute)
{
    char bad[160], err[256];
    struct debugplain *p;
    Elf64_Chdr ch;

    snprintf(bad, sizeof(bad), "%s/bad.debug", tmp);
    copy_file(zlib_file, bad);
    off_t at = chdr_offset(bad, ".debug_info");
    int w = open(bad, O_RDWR);
    assert_int_equal(pread(w, &ch, sizeof(ch), at), sizeof(ch));
    if (absolute) {
        ch.ch_size = absolute;
    } else if (delta) {
        ch.ch_size += (uint64_t)delta;
    } else {
        unsigned char b;
        assert_int_equal(pread(w, &b, 1, at + sizeof(ch) + 100), 1);
        b ^= 0x5a;
        assert_int_equal(pwrite(w, &b, 1, at + sizeof(ch) + 100), 1);
    }
    assert_int_equal(pwrite(w, &ch, sizeof(ch), at), sizeof(ch));
    close(w);
    fresh_cache();
    p = debugplain__new(cache, 256 << 20, err, sizeof(err));
    int fd = open(bad, O_RDONLY);
    assert_int_equal(debugplain__swap(p, fd, NULL), fd);
    assert_int_equal(cache_files(), 0);
    close(fd);
    debugplain__free(p);
}

static void test_hostile_refused(void **state)
{
    (void)state;
    check_refused(1, 0);          /* the stream ends before its stated size */
    check_refused(-1, 0);         /* it goes on past it */
    check_refused(0, 0);          /* a corrupt stream */
    check_refused(0, 1ull << 40); /* 1 TiB stated: over the bound, nothing written */
}

/* A copy cut short (a crash, a full disk) is not used: it is made anew. */
static void test_broken_copy_remade(void **state)
{
    (void)state;
    struct debugplain *p;
    char err[256], path[512];
    struct stat st;
    DIR *d;
    struct dirent *de;

    fresh_cache();
    p = debugplain__new(cache, 256 << 20, err, sizeof(err));
    close(debugplain__swap(p, open(zlib_file, O_RDONLY), NULL));
    path[0] = '\0';
    d = opendir(cache);
    while ((de = readdir(d)))
        if (de->d_type == DT_REG)
            snprintf(path, sizeof(path), "%s/%s", cache, de->d_name);
    closedir(d);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(truncate(path, st.st_size / 2), 0);
    int got = debugplain__swap(p, open(zlib_file, O_RDONLY), NULL);
    uint64_t made, reused;
    debugplain__counts(p, &made, &reused);
    assert_int_equal(made, 2);
    assert_int_equal(reused, 0);
    int ref = reference(zlib_file);
    assert_same_sections(ref, got);
    close(ref);
    close(got);
    debugplain__free(p);
}

/* A file with nothing compressed, and a bound too small for the copy:
 * handed back as it was. */
static void test_left_alone(void **state)
{
    (void)state;
    struct debugplain *p;
    char err[256];

    fresh_cache();
    p = debugplain__new(cache, 256 << 20, err, sizeof(err));
    int fd = open("/proc/self/exe", O_RDONLY);
    assert_int_equal(debugplain__swap(p, fd, NULL), fd);
    close(fd);
    debugplain__free(p);
    p = debugplain__new(cache, 1 << 20, err, sizeof(err)); /* copies up to 512 KiB */
    fd = open(zlib_file, O_RDONLY);
    assert_int_equal(debugplain__swap(p, fd, NULL), fd);
    close(fd);
    assert_int_equal(cache_files(), 0);
    debugplain__free(p);
    assert_int_equal(debugplain__swap(NULL, 7, NULL), 7);
    /* Not the build id asked for: handed back, no copy. */
    p = debugplain__new(cache, 256 << 20, err, sizeof(err));
    fd = open(zlib_file, O_RDONLY);
    assert_int_equal(debugplain__swap(p, fd, "0123456789abcdef0123456789abcdef01234567"), fd);
    close(fd);
    assert_int_equal(cache_files(), 0);
    debugplain__free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zlib_copy),          cmocka_unit_test(test_zstd_copy),
        cmocka_unit_test(test_copy_takes_no_heap), cmocka_unit_test(test_hostile_refused),
        cmocka_unit_test(test_broken_copy_remade), cmocka_unit_test(test_left_alone),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
