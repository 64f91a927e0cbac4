#include "debugplain.h"

#include <dirent.h>
#include <elf.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "../../common/debugfile.h"
#include "../../common/log.h"

#ifndef ELFCOMPRESS_ZSTD
#define ELFCOMPRESS_ZSTD 2 /* the gABI's; Debian 12's elf.h lacks it */
#endif

/* Bytes read and written at a time: what the copy costs in memory. */
#define CHUNK (64u << 10)
/* Sections a file may have for a copy to be made (libc's has 74). */
#define MAX_SECTIONS 4096
/* Notes larger than this are not build ids. */
#define NOTE_MAX (64u << 10)
/* Largest section alignment kept (linkers write at most a page's). */
#define MAX_ALIGN (64u << 10)

struct debugplain {
    char *dir;
    uint64_t max_bytes;
    _Atomic uint64_t made, reused;
};

/* One section of the source as the copy lays it out. */
struct sec {
    GElf_Shdr sh;      /* the source's header, then the copy's */
    uint64_t src_off;  /* where its bytes are in the source */
    uint64_t src_size; /* how many (compressed: with the Chdr) */
    uint32_t ctype;    /* ELFCOMPRESS_ZLIB / _ZSTD, or 0: copied as it is */
};

/* What a copy is made from: the source's headers, read by libelf. */
struct plan {
    GElf_Ehdr eh;
    struct sec *secs; /* every section header, index order (0 included) */
    size_t n;
    uint64_t prefix; /* bytes [0, prefix) are copied as they are */
    uint64_t size;   /* the copy's size */
    char id[DEBUGFILE_ID_MAX + 1];
};

struct debugplain *debugplain__new(const char *dir, uint64_t max_bytes, char *err, size_t errlen)
{
    struct debugplain *p = calloc(1, sizeof(*p));
    DIR *d = NULL;
    struct dirent *de;

    if (!p || !(p->dir = strdup(dir))) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    struct stat st;
    if (debugfile__mkdir_p(dir) || stat(dir, &st) || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "cannot make %s: %s", dir,
                 errno ? strerror(errno) : "not a directory");
        goto fail;
    }
    p->max_bytes = max_bytes;
    /* Copies half written when an agent died: never renamed, never read. */
    if ((d = opendir(dir))) {
        while ((de = readdir(d))) {
            size_t l = strlen(de->d_name);
            if (de->d_name[0] == '.' && l > 4 && strcmp(de->d_name + l - 4, ".tmp") == 0)
                unlinkat(dirfd(d), de->d_name, 0);
        }
        closedir(d);
    }
    return p;
fail:
    debugplain__free(p);
    return NULL;
}

void debugplain__free(struct debugplain *p)
{
    if (!p)
        return;
    free(p->dir);
    free(p);
}

void debugplain__counts(const struct debugplain *p, uint64_t *made, uint64_t *reused)
{
    *made = p ? atomic_load(&p->made) : 0;
    *reused = p ? atomic_load(&p->reused) : 0;
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

static int by_offset(const void *a, const void *b)
{
    const struct sec *x = *(struct sec *const *)a, *y = *(struct sec *const *)b;
    return x->src_off < y->src_off ? -1 : x->src_off > y->src_off;
}

/* Reads the section headers of the file at fd into pl and lays the copy
 * out: 0 when there is a copy to make, 1 when there is nothing to gain, -1
 * when it cannot be made (why says which). */
static int plan_copy(int fd, uint64_t file_size, uint64_t cap, struct plan *pl, char *why,
                     size_t whylen)
{
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    size_t shnum = 0;
    bool any = false;
    int ret = -1;
    struct sec **order = NULL;

    if (!e || elf_kind(e) != ELF_K_ELF || !gelf_getehdr(e, &pl->eh) || elf_getshdrnum(e, &shnum)) {
        snprintf(why, whylen, "an unreadable ELF file");
        goto out;
    }
    if (pl->eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        pl->eh.e_ident[EI_DATA] != (BYTE_ORDER == LITTLE_ENDIAN ? ELFDATA2LSB : ELFDATA2MSB) ||
        pl->eh.e_shentsize != sizeof(Elf64_Shdr) || pl->eh.e_ehsize != sizeof(Elf64_Ehdr)) {
        ret = 1; /* left to libdw: not this machine's kind of file */
        goto out;
    }
    if (shnum < 2 || shnum > MAX_SECTIONS) {
        ret = 1;
        goto out;
    }
    pl->secs = calloc(shnum, sizeof(*pl->secs));
    order = calloc(shnum, sizeof(*order));
    if (!pl->secs || !order) {
        snprintf(why, whylen, "out of memory");
        goto out;
    }
    pl->n = shnum;
    uint64_t first_c = UINT64_MAX;
    for (size_t i = 0; i < shnum; i++) {
        struct sec *s = &pl->secs[i];
        Elf_Scn *scn = elf_getscn(e, i);
        if (!scn || !gelf_getshdr(scn, &s->sh)) {
            snprintf(why, whylen, "an unreadable section header");
            goto out;
        }
        s->src_off = s->sh.sh_offset;
        s->src_size = s->sh.sh_type == SHT_NOBITS ? 0 : s->sh.sh_size;
        if (i && (s->src_off > file_size || s->src_size > file_size - s->src_off)) {
            snprintf(why, whylen, "a section ends past the file's %llu bytes",
                     (unsigned long long)file_size);
            goto out;
        }
        if (i && !pl->id[0] && s->sh.sh_type == SHT_NOTE && s->sh.sh_size <= NOTE_MAX) {
            Elf_Data *d = elf_getdata(scn, NULL);
            if (d)
                debugfile__note_build_id(d, pl->id);
        }
        if (i && (s->sh.sh_flags & SHF_COMPRESSED) && s->src_size) {
            any = true;
            if (s->src_off < first_c)
                first_c = s->src_off;
        }
    }
    if (!any) {
        ret = 1;
        goto out;
    }
    if (!pl->id[0]) {
        snprintf(why, whylen, "it has no build id to keep its copy by");
        goto out;
    }
    /* Everything before the first compressed section stays where it is
     * (the headers, the notes the program headers point at); what follows
     * is laid out anew, in the source's order. */
    pl->prefix = first_c;
    if (pl->eh.e_phnum &&
        (pl->eh.e_phoff > first_c ||
         (uint64_t)pl->eh.e_phnum * pl->eh.e_phentsize > first_c - pl->eh.e_phoff)) {
        snprintf(why, whylen, "program headers after its compressed sections");
        goto out;
    }
    size_t no = 0;
    for (size_t i = 1; i < shnum; i++) {
        struct sec *s = &pl->secs[i];
        if (!s->src_size) {
            /* Empty, or NOBITS: no bytes to move, but an offset inside the
             * copy (debugfile__check holds it to that). */
            if (s->src_off > first_c)
                s->sh.sh_offset = first_c;
            continue;
        }
        if (s->src_off >= first_c)
            order[no++] = s;
        else if (s->src_off + s->src_size > first_c) {
            snprintf(why, whylen, "sections overlap its compressed ones");
            goto out;
        }
    }
    qsort(order, no, sizeof(*order), by_offset);
    uint64_t at = first_c;
    for (size_t k = 0; k < no; k++) {
        struct sec *s = order[k];
        uint64_t size = s->src_size, al = s->sh.sh_addralign ? s->sh.sh_addralign : 1;
        if (s->sh.sh_flags & SHF_COMPRESSED) {
            Elf64_Chdr ch;
            if (s->src_size < sizeof(ch) ||
                pread(fd, &ch, sizeof(ch), (off_t)s->src_off) != (ssize_t)sizeof(ch)) {
                snprintf(why, whylen, "a compressed section without its header");
                goto out;
            }
            if (ch.ch_type != ELFCOMPRESS_ZLIB && ch.ch_type != ELFCOMPRESS_ZSTD) {
                snprintf(why, whylen, "compression type %u", ch.ch_type);
                goto out;
            }
            s->ctype = ch.ch_type;
            size = ch.ch_size;
            al = ch.ch_addralign ? ch.ch_addralign : 1;
            s->sh.sh_flags &= ~(uint64_t)SHF_COMPRESSED;
            s->sh.sh_size = size;
            s->sh.sh_addralign = al;
        }
        if (al > MAX_ALIGN || (al & (al - 1))) {
            snprintf(why, whylen, "a section aligned to %llu", (unsigned long long)al);
            goto out;
        }
        at = align_up(at, al);
        if (size > cap || at > cap - size) {
            snprintf(why, whylen, "its sections decompress to more than %llu bytes",
                     (unsigned long long)cap);
            goto out;
        }
        s->sh.sh_offset = at;
        at += size;
    }
    pl->eh.e_shoff = align_up(at, 8);
    pl->size = pl->eh.e_shoff + (uint64_t)shnum * sizeof(Elf64_Shdr);
    if (pl->size > cap) {
        snprintf(why, whylen, "its copy would take more than %llu bytes", (unsigned long long)cap);
        goto out;
    }
    ret = 0;
out:
    free(order);
    elf_end(e);
    return ret;
}

static int write_all(int fd, const void *buf, size_t n, uint64_t off)
{
    const char *p = buf;
    while (n) {
        ssize_t w = pwrite(fd, p, n, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
        off += (uint64_t)w;
    }
    return 0;
}

/* Copies n bytes of in at src to out at dst. */
static int copy_range(int in, uint64_t src, int out, uint64_t dst, uint64_t n, char *buf)
{
    while (n) {
        size_t want = n < CHUNK ? (size_t)n : CHUNK;
        ssize_t r = pread(in, buf, want, (off_t)src);
        if (r <= 0 || write_all(out, buf, (size_t)r, dst))
            return -1;
        src += (uint64_t)r;
        dst += (uint64_t)r;
        n -= (uint64_t)r;
    }
    return 0;
}

/* Decompresses section s of in into out at its new offset, a chunk at a
 * time: exactly its stated size, or -1 (a stream cut short, one that goes
 * on past the size its header states, a corrupt one). */
static int inflate_section(int in, int out, const struct sec *s, char *ibuf, char *obuf)
{
    uint64_t src = s->src_off + sizeof(Elf64_Chdr), left = s->src_size - sizeof(Elf64_Chdr);
    uint64_t dst = s->sh.sh_offset, want = s->sh.sh_size, got = 0;
    bool zlib = s->ctype == ELFCOMPRESS_ZLIB, end = false;
    z_stream z = {0};
    ZSTD_DStream *zs = NULL;
    int ret = -1;

    if (zlib ? inflateInit(&z) != Z_OK
             : !(zs = ZSTD_createDStream()) || ZSTD_isError(ZSTD_initDStream(zs)))
        goto out;
    while (!end) {
        size_t n = left < CHUNK ? (size_t)left : CHUNK, o;
        if (!n || pread(in, ibuf, n, (off_t)src) != (ssize_t)n)
            goto out; /* the input ended before the stream did */
        src += n;
        left -= n;
        if (zlib) {
            z.next_in = (unsigned char *)ibuf;
            z.avail_in = (unsigned)n;
            do {
                z.next_out = (unsigned char *)obuf;
                z.avail_out = CHUNK;
                int zr = inflate(&z, Z_NO_FLUSH);
                if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR)
                    goto out;
                end = zr == Z_STREAM_END;
                o = CHUNK - z.avail_out;
                if (o > want - got || write_all(out, obuf, o, dst + got))
                    goto out;
                got += o;
            } while (!end && z.avail_out == 0);
        } else {
            ZSTD_inBuffer zi = {ibuf, n, 0};
            size_t zr;
            do {
                ZSTD_outBuffer zo = {obuf, CHUNK, 0};
                zr = ZSTD_decompressStream(zs, &zo, &zi);
                if (ZSTD_isError(zr))
                    goto out;
                o = zo.pos;
                if (o > want - got || write_all(out, obuf, o, dst + got))
                    goto out;
                got += o;
            } while (zi.pos < zi.size || o == CHUNK);
            end = zr == 0 && !left; /* the last frame whole, the input all read */
        }
    }
    ret = got == want ? 0 : -1;
out:
    if (zlib)
        inflateEnd(&z);
    ZSTD_freeDStream(zs);
    return ret;
}

/* Writes the copy pl lays out of in to out. */
static int write_copy(int in, int out, const struct plan *pl, char *why, size_t whylen)
{
    char *ibuf = malloc(CHUNK), *obuf = malloc(CHUNK);
    Elf64_Shdr *sh = calloc(pl->n, sizeof(*sh));
    int ret = -1;

    if (!ibuf || !obuf || !sh) {
        snprintf(why, whylen, "out of memory");
        goto out;
    }
    if (ftruncate(out, (off_t)pl->size) || copy_range(in, 0, out, 0, pl->prefix, ibuf)) {
        snprintf(why, whylen, "cannot write its copy: %s", strerror(errno));
        goto out;
    }
    for (size_t i = 1; i < pl->n; i++) {
        const struct sec *s = &pl->secs[i];
        if (!s->src_size || s->src_off < pl->prefix)
            continue;
        int r = s->ctype ? inflate_section(in, out, s, ibuf, obuf)
                         : copy_range(in, s->src_off, out, s->sh.sh_offset, s->src_size, ibuf);
        if (r) {
            snprintf(why, whylen, "section %zu: %s", i,
                     s->ctype ? "does not decompress to its stated size" : "cannot be copied");
            goto out;
        }
    }
    for (size_t i = 0; i < pl->n; i++)
        memcpy(&sh[i], &pl->secs[i].sh, sizeof(sh[i])); /* GElf_Shdr is Elf64_Shdr */
    Elf64_Ehdr eh;
    memcpy(&eh, &pl->eh, sizeof(eh));
    if (write_all(out, sh, pl->n * sizeof(*sh), pl->eh.e_shoff) ||
        write_all(out, &eh, sizeof(eh), 0) || fdatasync(out)) {
        snprintf(why, whylen, "cannot write its copy: %s", strerror(errno));
        goto out;
    }
    ret = 0;
out:
    free(ibuf);
    free(obuf);
    free(sh);
    return ret;
}

/* The copy of id already made, checked: its descriptor, or -1. */
static int open_made(struct debugplain *p, const char *path, const char *id)
{
    char why[256];
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);

    if (fd < 0)
        return -1;
    if (debugfile__check(fd, id, p->max_bytes / 2, why, sizeof(why))) {
        log_debug("debugplain: %s set aside: %s", path, why);
        close(fd);
        unlink(path);
        return -1;
    }
    futimens(fd, NULL); /* used: the last the bound deletes */
    return fd;
}

int debugplain__swap(struct debugplain *p, int fd, const char *want_id)
{
    struct plan pl = {0};
    struct stat st;
    char why[256] = "", *path = NULL, *tmp = NULL;
    int out = -1, got = -1;

    if (!p || fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode))
        return fd;
    elf_version(EV_CURRENT);
    int r = plan_copy(fd, (uint64_t)st.st_size, p->max_bytes / 2, &pl, why, sizeof(why));
    if (r)
        goto out;
    if (want_id && strcmp(pl.id, want_id) != 0) {
        snprintf(why, sizeof(why), "its build id is %s, not %s", pl.id, want_id);
        goto out;
    }
    if (asprintf(&path, "%s/%s.debug", p->dir, pl.id) < 0 ||
        asprintf(&tmp, "%s/.%s.%d.tmp", p->dir, pl.id, (int)gettid()) < 0) {
        path = tmp = NULL;
        snprintf(why, sizeof(why), "out of memory");
        goto out;
    }
    if ((got = open_made(p, path, pl.id)) >= 0) {
        atomic_fetch_add(&p->reused, 1);
        goto out;
    }
    out = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (out < 0) {
        snprintf(why, sizeof(why), "cannot make %s: %s", tmp, strerror(errno));
        goto out;
    }
    if (write_copy(fd, out, &pl, why, sizeof(why)) || rename(tmp, path)) {
        if (!why[0])
            snprintf(why, sizeof(why), "cannot rename its copy: %s", strerror(errno));
        unlink(tmp);
        goto out;
    }
    if ((got = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0) {
        snprintf(why, sizeof(why), "cannot open %s: %s", path, strerror(errno));
        goto out;
    }
    atomic_fetch_add(&p->made, 1);
    log_debug("debugplain: %s: %llu bytes decompressed", path, (unsigned long long)pl.size);
    debugfile__trim(p->dir, p->max_bytes);
out:
    if (why[0])
        log_debug("debugplain: a debug file left compressed: %s", why);
    if (out >= 0)
        close(out);
    free(path);
    free(tmp);
    free(pl.secs);
    if (got < 0)
        return fd;
    close(fd);
    return got;
}
