#include "binary.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../../common/debugfile.h"
#include "../../common/hmap.h"
#include "../procs/maps.h"

/* binary__drop_pages: smaller ranges are left as they are. */
#define DROP_MIN_BYTES (256u << 10)

/* Build ids longer than this are not real build ids; ELF notes are capped. */
#define NOTE_SCAN_MAX (64 << 10)

struct binary_cache {
    char *proc_root;
    /* Two indexes onto the same binaries (each holds one reference per key):
     * `by_map` from what a maps line says (device, inode, path), so most
     * lookups open nothing; `by_id` from the identity read off the file. */
    struct hmap *by_map, *by_id;
    struct binary **list; /* by_id's binaries, index = by_id index */
    size_t nlist;
    struct binary **map_list; /* by_map's binaries, index = by_map index */
    size_t nmap_list;
};

struct binary *binary__get(struct binary *b)
{
    if (b)
        __atomic_add_fetch(&b->refs, 1, __ATOMIC_RELAXED);
    return b;
}

void binary__put(struct binary *b)
{
    if (!b || __atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    if (b->syms && b->syms_free)
        b->syms_free(b->syms);
    if (b->fd >= 0)
        close(b->fd);
    free(b->path);
    free(b);
}

struct binary_cache *binary_cache__new(const char *proc_root)
{
    struct binary_cache *bc = calloc(1, sizeof(*bc));

    if (!bc)
        return NULL;
    bc->proc_root = strdup(proc_root);
    bc->by_map = hmap__new();
    bc->by_id = hmap__new();
    if (!bc->proc_root || !bc->by_map || !bc->by_id) {
        binary_cache__free(bc);
        return NULL;
    }
    return bc;
}

void binary_cache__free(struct binary_cache *bc)
{
    if (!bc)
        return;
    for (size_t i = 0; i < bc->nlist; i++)
        binary__put(bc->list[i]);
    for (size_t i = 0; i < bc->nmap_list; i++)
        binary__put(bc->map_list[i]);
    free(bc->list);
    free(bc->map_list);
    hmap__free(bc->by_map);
    hmap__free(bc->by_id);
    free(bc->proc_root);
    free(bc);
}

unsigned binary_cache__count(const struct binary_cache *bc)
{
    unsigned n = 0;
    for (size_t i = 0; i < bc->nlist; i++)
        n += bc->list[i] != NULL;
    return n;
}

/* The notes are read by the same code as a fetched debug file's. */
_Static_assert(BINARY_BUILD_ID_MAX * 2 == DEBUGFILE_ID_MAX, "one cap for build ids");

int binary__read_build_id(int fd, char *hex)
{
    Elf *e = NULL;
    size_t nph;
    int ret = -1;

    hex[0] = '\0';
    if (elf_version(EV_CURRENT) == EV_NONE)
        return -1;
    /* Read, not mapped: a file truncated under us must not raise SIGBUS on
     * the main thread. libelf reads what is asked for, not the whole file. */
    e = elf_begin(fd, ELF_C_READ, NULL);
    if (!e || elf_kind(e) != ELF_K_ELF)
        goto out;
    /* Program headers first: they are what the loader used. */
    if (elf_getphdrnum(e, &nph) == 0) {
        for (size_t i = 0; i < nph && ret; i++) {
            GElf_Phdr ph;
            if (!gelf_getphdr(e, i, &ph) || ph.p_type != PT_NOTE || ph.p_filesz > NOTE_SCAN_MAX)
                continue;
            Elf_Data *d = elf_getdata_rawchunk(e, ph.p_offset, ph.p_filesz,
                                               ph.p_align == 8 ? ELF_T_NHDR8 : ELF_T_NHDR);
            if (d)
                ret = debugfile__note_build_id(d, hex) ? 0 : -1;
        }
    }
    /* Then sections, for files without a PT_NOTE (separate debug files). */
    for (Elf_Scn *s = NULL; ret && (s = elf_nextscn(e, s));) {
        GElf_Shdr sh;
        if (!gelf_getshdr(s, &sh) || sh.sh_type != SHT_NOTE || sh.sh_size > NOTE_SCAN_MAX)
            continue;
        Elf_Data *d = elf_getdata(s, NULL);
        if (d)
            ret = debugfile__note_build_id(d, hex) ? 0 : -1;
    }
out:
    elf_end(e);
    return ret;
}

/* Opens path as seen from the process's root, resolving every symlink and
 * ".." inside that root (openat2 RESOLVE_IN_ROOT, Linux 5.6). */
static int open_in_root(const char *proc_root, pid_t pid, const char *path)
{
    char root[256];
    struct open_how how;
    int rootfd, fd, e;

    snprintf(root, sizeof(root), "%s/%d/root", proc_root, (int)pid);
    rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0)
        return -errno;
    memset(&how, 0, sizeof(how));
    how.flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
    fd = syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
    e = errno;
    close(rootfd);
    return fd < 0 ? -e : fd;
}

static int open_mapped(const char *proc_root, pid_t pid, const struct maps_entry *m)
{
    char p[256];
    int fd;

    /* map_files names the very file mapped, even when it was replaced or
     * deleted since, and even across mount namespaces. It needs
     * CAP_SYS_ADMIN in the process's user namespace. */
    snprintf(p, sizeof(p), "%s/%d/map_files/%llx-%llx", proc_root, (int)pid,
             (unsigned long long)m->start, (unsigned long long)m->end);
    fd = open(p, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd >= 0)
        return fd;
    /* Without map_files (no CAP_SYS_ADMIN) the path is all there is, and it
     * may name another file by now: a deleted one is gone, and a replaced
     * one (a package upgrade) would give wrong names. */
    if (m->path[0] != '/' || m->deleted)
        return -ENOENT;
    fd = open_in_root(proc_root, pid, m->path);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) || st.st_ino != m->inode || major(st.st_dev) != m->dev_major ||
                    minor(st.st_dev) != m->dev_minor)) {
        close(fd);
        return -ESTALE;
    }
    return fd;
}

/* Stores b at list[idx], growing the list; the slot takes one reference. */
static int list_set(struct binary ***list, size_t *n, size_t idx, struct binary *b)
{
    if (idx >= *n) {
        struct binary **l = realloc(*list, (idx + 1) * sizeof(*l));
        if (!l)
            return -1;
        for (size_t i = *n; i <= idx; i++)
            l[i] = NULL;
        *list = l;
        *n = idx + 1;
    }
    if ((*list)[idx])
        return 0;
    (*list)[idx] = binary__get(b);
    b->cache_keys++;
    return 0;
}

static struct binary *binary_new(const char *path)
{
    struct binary *b = calloc(1, sizeof(*b));

    if (!b)
        return NULL;
    b->refs = 1;
    b->fd = -1;
    b->path = strdup(path);
    if (!b->path) {
        free(b);
        return NULL;
    }
    const char *slash = strrchr(b->path, '/');
    b->name = slash ? slash + 1 : b->path;
    return b;
}

struct binary *binary_cache__get(struct binary_cache *bc, pid_t pid, const struct maps_entry *m,
                                 uint64_t now_ns)
{
    struct binary *b = NULL;
    struct stat st;
    char mkey[4096 + 64], idkey[256];
    size_t mlen;
    bool fresh;
    long mi, ii;
    int fd;

    mlen = snprintf(mkey, sizeof(mkey), "%u:%u:%llu:%s", m->dev_major, m->dev_minor,
                    (unsigned long long)m->inode, m->path);
    if (mlen >= sizeof(mkey))
        mlen = sizeof(mkey) - 1;
    mi = hmap__find(bc->by_map, mkey, mlen);
    if (mi >= 0 && (size_t)mi < bc->nmap_list && bc->map_list[mi]) {
        b = bc->map_list[mi];
        b->last_used_ns = now_ns;
        return binary__get(b);
    }

    fd = open_mapped(bc->proc_root, pid, m);
    if (fd >= 0 && (fstat(fd, &st) || !S_ISREG(st.st_mode))) {
        close(fd);
        fd = -EINVAL; /* a device or FIFO is nothing to parse */
    }
    if (fd < 0) {
        /* Not cached: it may open next time (e.g. a transient EACCES). */
        b = binary_new(m->path);
        if (b)
            b->open_err = -fd;
        return b;
    }

    char hex[BINARY_BUILD_ID_MAX * 2 + 1];
    /* The size goes into the key too: a crafted file carrying another's build
     * id must at least match its size to share its names. */
    if (binary__read_build_id(fd, hex) == 0)
        snprintf(idkey, sizeof(idkey), "b:%s:%lld", hex, (long long)st.st_size);
    else
        snprintf(idkey, sizeof(idkey), "f:%llu:%llu:%lld.%09ld:%lld", (unsigned long long)st.st_dev,
                 (unsigned long long)st.st_ino, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
                 (long long)st.st_size);
    ii = hmap__put(bc->by_id, idkey, strlen(idkey), &fresh);
    if (ii < 0) {
        close(fd);
        return NULL;
    }
    if (!fresh && (size_t)ii < bc->nlist && bc->list[ii]) {
        close(fd);
        b = bc->list[ii];
    } else {
        b = binary_new(m->path);
        if (!b) {
            close(fd);
            return NULL;
        }
        b->fd = fd;
        b->size = st.st_size;
        if (idkey[0] == 'b')
            memcpy(b->build_id, hex, sizeof(hex));
        int r = list_set(&bc->list, &bc->nlist, ii, b);
        binary__put(b); /* the list's reference, if any, is the one kept */
        if (r)
            return NULL;
    }
    b->last_used_ns = now_ns;
    mi = hmap__put(bc->by_map, mkey, mlen, NULL);
    if (mi >= 0)
        list_set(&bc->map_list, &bc->nmap_list, mi, b); /* a miss only costs a reopen */
    return binary__get(b);
}

/* Builds a new index holding only the keys whose slot is still filled. */
static int compact(struct hmap **map, struct binary ***list, size_t *n)
{
    struct hmap *nm = hmap__new();
    struct binary **nl = NULL;
    size_t nn = 0;

    if (!nm)
        return -1;
    for (size_t i = 0; i < *n; i++) {
        if (!(*list)[i])
            continue;
        size_t len;
        const void *k = hmap__key(*map, i, &len);
        long j = hmap__put(nm, k, len, NULL);
        struct binary **l = j < 0 ? NULL : realloc(nl, (nn + 1) * sizeof(*nl));
        if (!l) {
            free(nl);
            hmap__free(nm);
            return -1;
        }
        nl = l;
        nl[nn++] = (*list)[i]; /* the reference moves with the key */
    }
    hmap__free(*map);
    free(*list);
    *map = nm;
    *list = nl;
    *n = nn;
    return 0;
}

static size_t live(struct binary **list, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += list[i] != NULL;
    return k;
}

void binary_cache__sweep(struct binary_cache *bc, uint64_t older_than_ns)
{
    bool any = false;

    /* A binary held only by the cache's own slots, and not used lately, goes:
     * its slots are cleared here and the keys dropped below. */
    for (size_t i = 0; i < bc->nlist; i++) {
        struct binary *b = bc->list[i];
        if (!b || b->last_used_ns >= older_than_ns ||
            __atomic_load_n(&b->refs, __ATOMIC_ACQUIRE) != (int)b->cache_keys)
            continue;
        b->cache_keys = 0; /* marks it: no one else can take a reference now */
        any = true;
    }
    if (!any)
        return;
    for (size_t j = 0; j < bc->nmap_list; j++) {
        struct binary *b = bc->map_list[j];
        if (b && b->cache_keys == 0) {
            bc->map_list[j] = NULL;
            binary__put(b);
        }
    }
    for (size_t i = 0; i < bc->nlist; i++) {
        struct binary *b = bc->list[i];
        if (b && b->cache_keys == 0) {
            bc->list[i] = NULL;
            binary__put(b);
        }
    }
    /* Cleared keys would pile up with every short-lived binary: rebuild the
     * indexes once they are mostly empty. On failure they stay as they are. */
    if (live(bc->map_list, bc->nmap_list) * 2 < bc->nmap_list)
        compact(&bc->by_map, &bc->map_list, &bc->nmap_list);
    if (live(bc->list, bc->nlist) * 2 < bc->nlist)
        compact(&bc->by_id, &bc->list, &bc->nlist);
}

struct binary *binary__open(const char *path)
{
    struct binary *b = binary_new(path);
    struct stat st;

    if (!b)
        return NULL;
    b->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (b->fd < 0) {
        b->open_err = errno;
        return b;
    }
    if (fstat(b->fd, &st) || !S_ISREG(st.st_mode)) {
        close(b->fd);
        b->fd = -1;
        b->open_err = EINVAL;
        return b;
    }
    b->size = st.st_size;
    binary__read_build_id(b->fd, b->build_id);
    return b;
}

struct binary *binary__open_vdso(void)
{
    const unsigned char *img = (const void *)getauxval(AT_SYSINFO_EHDR);
    struct binary *b = NULL;
    char path[64];
    size_t size = 0;
    int fd;

    if (!img || memcmp(img, ELFMAG, SELFMAG) != 0 || img[EI_CLASS] != ELFCLASS64)
        return NULL;
    /* The image ends with its section headers (the kernel builds it so). */
    const Elf64_Ehdr *eh = (const void *)img;
    size = eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize;
    if (eh->e_shoff == 0 || size > (1u << 20))
        return NULL;
    fd = memfd_create("codexray-vdso", MFD_CLOEXEC);
    if (fd < 0)
        return NULL;
    if (write(fd, img, size) == (ssize_t)size) {
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        b = binary__open(path);
        char *name = strdup("[vdso]");
        if (b && b->fd >= 0 && name) {
            free(b->path); /* for the log: the memfd's path says nothing */
            b->path = name;
            b->name = name;
            name = NULL;
        } else {
            binary__put(b);
            b = NULL;
        }
        free(name);
    }
    close(fd);
    return b;
}

unsigned binary__exec_segments(int fd, struct binary_seg *out, unsigned max)
{
    Elf *e;
    size_t n = 0;
    unsigned got = 0;

    elf_version(EV_CURRENT);
    e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (!e || elf_kind(e) != ELF_K_ELF || elf_getphdrnum(e, &n)) {
        elf_end(e);
        return 0;
    }
    for (size_t i = 0; i < n && got < max; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
            out[got++] = (struct binary_seg){ph.p_offset, ph.p_filesz, ph.p_vaddr};
    }
    elf_end(e);
    return got;
}

bool binary__map_bias(const struct binary_seg *segs, unsigned n, uint64_t start, uint64_t offset,
                      uint64_t *bias)
{
    for (unsigned i = 0; i < n; i++) {
        uint64_t page_off = segs[i].offset & ~4095ull;
        if (offset >= page_off && offset < segs[i].offset + segs[i].filesz) {
            *bias = start - offset - (segs[i].vaddr - segs[i].offset);
            return true;
        }
    }
    return false;
}

/* Hands back the pages [lo, hi) that pagemap shows mapped from the file
 * (bit 61: a file page, or shared anonymous memory, which libelf never
 * maps; bit 63: present), one madvise a run. A private page written to
 * since (copy on write: anonymous now) and any heap page are left as they
 * are: MADV_DONTNEED would lose what was written. */
static void drop_file_pages(int pm, uintptr_t lo, uintptr_t hi, uintptr_t pg)
{
    uint64_t e[512];
    uintptr_t run = 0;

    for (uintptr_t a = lo; a < hi;) {
        size_t n = (hi - a) / pg < 512 ? (hi - a) / pg : 512;
        ssize_t got = pread(pm, e, n * 8, (off_t)(a / pg * 8));
        if (got < 8)
            break;
        n = (size_t)got / 8;
        for (size_t i = 0; i < n; i++, a += pg) {
            bool file = (e[i] >> 61 & 1) && !(e[i] >> 62 & 1); /* not swapped */
            if (file && !run)
                run = a;
            if (!file && run) {
                madvise((void *)run, a - run, MADV_DONTNEED);
                run = 0;
            }
        }
    }
    if (run)
        madvise((void *)run, hi - run, MADV_DONTNEED);
}

void binary__drop_pages(Elf *e, const void *p, size_t n)
{
    size_t size = 0;
    const char *base = e ? elf_rawfile(e, &size) : NULL;
    uintptr_t lo = (uintptr_t)p, hi = lo + n;
    long pg = sysconf(_SC_PAGESIZE);

    if (!base || !p || pg <= 0 || lo < (uintptr_t)base || hi > (uintptr_t)base + size || hi < lo)
        return;
    lo = (lo + (uintptr_t)pg - 1) & ~((uintptr_t)pg - 1);
    hi &= ~((uintptr_t)pg - 1);
    /* Small ranges are not worth a read of pagemap. */
    if (hi < lo + DROP_MIN_BYTES)
        return;
    int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (pm < 0)
        return; /* kept: no way to tell file pages from written ones */
    drop_file_pages(pm, lo, hi, (uintptr_t)pg);
    close(pm);
}

void binary__drop_image(Elf *e)
{
    size_t size = 0;
    const char *base = e ? elf_rawfile(e, &size) : NULL;

    binary__drop_pages(e, base, size);
}
