#include "debugfile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Notes larger than this are not build ids. */
#define NOTE_MAX (64u << 10)
/* Files a cache directory may list before trim stops reading it. */
#define TRIM_MAX_FILES 1000000

bool debugfile__valid_id(const char *s)
{
    size_t n = 0;

    if (!s)
        return false;
    for (; s[n]; n++) {
        char ch = s[n];
        if (n >= DEBUGFILE_ID_MAX || !((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f')))
            return false;
    }
    return n >= 8 && n % 2 == 0;
}

int debugfile__mkdir_p(const char *p)
{
    char tmp[4096];
    size_t n = strlen(p);

    if (n == 0 || n >= sizeof(tmp))
        return -1;
    memcpy(tmp, p, n + 1);
    for (char *s = tmp + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(tmp, 0700) && errno != EEXIST)
            return -1;
        *s = '/';
    }
    return mkdir(tmp, 0700) && errno != EEXIST ? -1 : 0;
}

char *debugfile__join(const char *a, const char *b)
{
    char *s = NULL;
    return asprintf(&s, "%s/%s", a, b) < 0 ? NULL : s;
}

static void hex(const unsigned char *p, size_t n, char *out)
{
    static const char d[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = d[p[i] >> 4];
        out[2 * i + 1] = d[p[i] & 15];
    }
    out[2 * n] = '\0';
}

bool debugfile__note_build_id(Elf_Data *d, char *out)
{
    size_t off = 0, name_off, desc_off;
    GElf_Nhdr nh;

    while (off < d->d_size && (off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
        if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
            memcmp((char *)d->d_buf + name_off, "GNU", 4) == 0 && nh.n_descsz > 0 &&
            nh.n_descsz <= DEBUGFILE_ID_MAX / 2) {
            hex((unsigned char *)d->d_buf + desc_off, nh.n_descsz, out);
            return true;
        }
    }
    return false;
}

int debugfile__check(int fd, const char *want_id, uint64_t max_bytes, char *why, size_t whylen)
{
    char got[DEBUGFILE_ID_MAX + 1] = "";
    struct stat st;
    Elf *e = NULL;
    size_t shnum = 0;
    int ret = -1;

    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        snprintf(why, whylen, "not a regular file");
        return -1;
    }
    if ((uint64_t)st.st_size > max_bytes) {
        snprintf(why, whylen, "%lld bytes, over the cap of %llu", (long long)st.st_size,
                 (unsigned long long)max_bytes);
        return -1;
    }
    unsigned char magic[SELFMAG];
    if (pread(fd, magic, SELFMAG, 0) != SELFMAG || memcmp(magic, ELFMAG, SELFMAG) != 0) {
        snprintf(why, whylen, "not an ELF file");
        return -1;
    }
    elf_version(EV_CURRENT);
    e = elf_begin(fd, ELF_C_READ, NULL);
    GElf_Ehdr eh;
    if (!e || elf_kind(e) != ELF_K_ELF || !gelf_getehdr(e, &eh) || elf_getshdrnum(e, &shnum)) {
        snprintf(why, whylen, "an unreadable ELF file (%s)", elf_errmsg(-1));
        goto out;
    }
    /* Everything the file says it holds must be inside it: a download cut
     * short keeps a valid header but loses its tail (the section headers
     * sit at the end, as linkers and objcopy write them). */
    uint64_t size = (uint64_t)st.st_size;
    if (eh.e_shoff > size || (uint64_t)shnum * eh.e_shentsize > size - eh.e_shoff) {
        snprintf(why, whylen, "truncated (its section headers end past its %llu bytes)",
                 (unsigned long long)size);
        goto out;
    }
    for (Elf_Scn *s = NULL; (s = elf_nextscn(e, s));) {
        GElf_Shdr sh;
        if (!gelf_getshdr(s, &sh)) {
            snprintf(why, whylen, "an unreadable section header");
            goto out;
        }
        if (sh.sh_type != SHT_NOBITS && (sh.sh_offset > size || sh.sh_size > size - sh.sh_offset)) {
            snprintf(why, whylen, "truncated (a section ends past its %llu bytes)",
                     (unsigned long long)size);
            goto out;
        }
        if (!got[0] && sh.sh_type == SHT_NOTE && sh.sh_size <= NOTE_MAX) {
            Elf_Data *d = elf_getdata(s, NULL);
            if (d)
                debugfile__note_build_id(d, got);
        }
    }
    if (!got[0]) {
        snprintf(why, whylen, "it has no GNU build id");
        goto out;
    }
    if (strcmp(got, want_id) != 0) {
        snprintf(why, whylen, "its build id is %s, not the one asked for", got);
        goto out;
    }
    ret = 0;
out:
    elf_end(e);
    return ret;
}

struct entry {
    char *name;
    uint64_t size;
    struct timespec mtime;
};

static int by_age(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec)
        return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    if (x->mtime.tv_nsec != y->mtime.tv_nsec)
        return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
    return strcmp(x->name, y->name);
}

int debugfile__trim(const char *dir, uint64_t max_bytes)
{
    DIR *d = opendir(dir);
    struct entry *v = NULL;
    size_t n = 0, cap = 0;
    uint64_t total = 0;
    int deleted = 0;
    struct dirent *de;

    if (!d)
        return -1;
    while ((de = readdir(d)) && n < TRIM_MAX_FILES) {
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
            continue;
        total += (uint64_t)st.st_size;
        if (de->d_name[0] == '.')
            continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 64;
            struct entry *nv = realloc(v, nc * sizeof(*nv));
            if (!nv)
                break;
            v = nv;
            cap = nc;
        }
        v[n].name = strdup(de->d_name);
        if (!v[n].name)
            break;
        v[n].size = (uint64_t)st.st_size;
        v[n].mtime = st.st_mtim;
        n++;
    }
    qsort(v, n, sizeof(*v), by_age);
    for (size_t i = 0; i < n && total > max_bytes; i++) {
        if (unlinkat(dirfd(d), v[i].name, 0) == 0) {
            total -= v[i].size;
            deleted++;
        }
    }
    for (size_t i = 0; i < n; i++)
        free(v[i].name);
    free(v);
    closedir(d);
    return deleted;
}

void debugfile__client_config_reset(const char *client_dir)
{
    static const char *const names[] = {"cache_clean_interval_s", "max_unused_age_s",
                                        "cache_miss_s"};
    char p[4096];

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        int n = snprintf(p, sizeof(p), "%s/%s", client_dir, names[i]);
        if (n > 0 && (size_t)n < sizeof(p))
            unlink(p); /* libdebuginfod writes it anew at each query */
    }
}
