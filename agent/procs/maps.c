#include "maps.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "../../common/buf.h"

/* PROCMAP_QUERY (Linux 6.11, include/uapi/linux/fs.h), declared here as
 * Debian's older kernel headers lack it: one mapping a call, those wanted
 * only, no text to format or parse. */
struct maps_query {
    uint64_t size;
    uint64_t query_flags;
    uint64_t query_addr;
    uint64_t vma_start, vma_end;
    uint64_t vma_flags;
    uint64_t vma_page_size;
    uint64_t vma_offset;
    uint64_t inode;
    uint32_t dev_major, dev_minor;
    uint32_t vma_name_size;
    uint32_t build_id_size;
    uint64_t vma_name_addr;
    uint64_t build_id_addr;
};
_Static_assert(sizeof(struct maps_query) == 104, "the kernel's struct procmap_query");
#define MAPS_QUERY_IOCTL 0xc0686611ul /* _IOWR('f', 17, struct procmap_query) */
#define QUERY_READABLE 0x01ull
#define QUERY_WRITABLE 0x02ull
#define QUERY_EXECUTABLE 0x04ull
#define QUERY_SHARED 0x08ull
#define QUERY_COVERING_OR_NEXT 0x10ull
/* The kernel refuses a name longer than PATH_MAX (ENAMETOOLONG). */
#define QUERY_NAME_MAX 4096

static const char *parse_hex(const char *p, const char *end, uint64_t *out)
{
    uint64_t v = 0;
    const char *s = p;

    while (p < end) {
        char c = *p;
        unsigned d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            break;
        if (v >> 60)
            return NULL; /* more than 64 bits */
        v = v << 4 | d;
        p++;
    }
    if (p == s)
        return NULL;
    *out = v;
    return p;
}

static const char *parse_dec(const char *p, const char *end, uint64_t *out)
{
    uint64_t v = 0;
    const char *s = p;

    while (p < end && *p >= '0' && *p <= '9') {
        if (v > (UINT64_MAX - 9) / 10)
            return NULL;
        v = v * 10 + (*p - '0');
        p++;
    }
    if (p == s)
        return NULL;
    *out = v;
    return p;
}

static const char *skip_spaces(const char *p, const char *end)
{
    while (p < end && *p == ' ')
        p++;
    return p;
}

/* What the kernel appends to the path of a file unlinked since. */
static const char deleted[] = " (deleted)";

/* "start-end perms offset major:minor inode   path". The path is left in
 * the text, not terminated: e->path points at it and *path_len says how
 * long it is (without a " (deleted)" suffix). */
static bool parse_line(const char *line, const char *end, struct maps_entry *e, size_t *path_len)
{
    const char *p = line;
    uint64_t maj, min;

    memset(e, 0, sizeof(*e));
    if (!(p = parse_hex(p, end, &e->start)) || p >= end || *p++ != '-')
        return false;
    if (!(p = parse_hex(p, end, &e->end)) || e->end < e->start)
        return false;
    p = skip_spaces(p, end);
    if (end - p < 4)
        return false;
    memcpy(e->perms, p, 4);
    e->perms[4] = '\0';
    p = skip_spaces(p + 4, end);
    if (!(p = parse_hex(p, end, &e->offset)))
        return false;
    p = skip_spaces(p, end);
    if (!(p = parse_hex(p, end, &maj)) || p >= end || *p++ != ':')
        return false;
    if (!(p = parse_hex(p, end, &min)) || maj > UINT32_MAX || min > UINT32_MAX)
        return false;
    e->dev_major = maj;
    e->dev_minor = min;
    p = skip_spaces(p, end);
    if (!(p = parse_dec(p, end, &e->inode)))
        return false;
    p = skip_spaces(p, end);
    /* The rest is the path, spaces and all. */
    size_t n = end - p, dl = sizeof(deleted) - 1;
    if (n >= dl && memcmp(end - dl, deleted, dl) == 0) {
        e->deleted = true;
        n -= dl;
    }
    e->path = p;
    *path_len = n;
    return true;
}

/* The end of the line that holds p. */
static const char *line_end(const char *p, const char *end)
{
    const char *nl = memchr(p, '\n', end - p);
    return nl ? nl : end;
}

/* Adds e to out, whose entries' array holds *cap. 0 or -ENOMEM. */
static int add_entry(struct maps *out, size_t *cap, const struct maps_entry *e)
{
    if (out->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 32;
        struct maps_entry *ne = realloc(out->e, nc * sizeof(*ne));
        if (!ne)
            return -ENOMEM;
        out->e = ne;
        *cap = nc;
    }
    out->e[out->n++] = *e;
    return 0;
}

int maps__parse(const char *text, size_t len, bool exec_only, struct maps *out, size_t *bad)
{
    size_t cap = 0, nbad = 0, bytes = 0;
    const char *line, *next, *end = text + len;
    char *w;

    memset(out, 0, sizeof(*out));
    for (line = text; line < end; line = next) {
        const char *le = line_end(line, end);
        next = le < end ? le + 1 : end;
        if (le == line)
            continue;
        struct maps_entry e;
        size_t plen;
        if (!parse_line(line, le, &e, &plen)) {
            nbad++;
            continue;
        }
        if (exec_only && e.perms[2] != 'x')
            continue;
        if (add_entry(out, &cap, &e)) {
            maps__free(out);
            return -ENOMEM;
        }
        bytes += plen + 1;
    }
    /* Only the kept entries' paths are copied: a process's maps are
     * mostly data, stacks and anonymous memory, and the whole text kept
     * with every process was pages to allocate and touch at each read. */
    out->text = malloc(bytes + 1);
    if (!out->text) {
        maps__free(out);
        return -ENOMEM;
    }
    w = out->text;
    for (size_t i = 0; i < out->n; i++) {
        struct maps_entry *e = &out->e[i];
        size_t n = line_end(e->path, end) - e->path - (e->deleted ? sizeof(deleted) - 1 : 0);
        memcpy(w, e->path, n);
        w[n] = '\0';
        e->path = w;
        w += n + 1;
    }
    *w = '\0';
    if (bad)
        *bad = nbad;
    return 0;
}

int maps__query(int fd, bool exec_only, size_t max_entries, size_t max_bytes, struct maps *out)
{
    struct maps_query q;
    char name[QUERY_NAME_MAX];
    struct buf names;
    uint64_t addr = 0;
    size_t cap = 0;
    int err = 0;

    memset(out, 0, sizeof(*out));
    buf__init(&names, max_bytes);
    for (;;) {
        memset(&q, 0, sizeof(q));
        q.size = sizeof(q);
        q.query_flags = QUERY_COVERING_OR_NEXT | (exec_only ? QUERY_EXECUTABLE : 0);
        q.query_addr = addr;
        q.vma_name_addr = (uintptr_t)name;
        q.vma_name_size = sizeof(name);
        if (ioctl(fd, MAPS_QUERY_IOCTL, &q)) {
            err = errno == ENOENT ? 0 : -errno; /* ENOENT: none past addr */
            break;
        }
        /* Each answer must lie past the last: a loop that cannot end
         * otherwise. */
        if (q.vma_end <= q.vma_start || q.vma_start < addr || q.vma_name_size > sizeof(name)) {
            err = -EIO;
            break;
        }
        if (out->n >= max_entries) {
            err = -E2BIG;
            break;
        }
        struct maps_entry e = {.start = q.vma_start,
                               .end = q.vma_end,
                               .offset = q.vma_offset,
                               .dev_major = q.dev_major,
                               .dev_minor = q.dev_minor,
                               .inode = q.inode};
        e.perms[0] = q.vma_flags & QUERY_READABLE ? 'r' : '-';
        e.perms[1] = q.vma_flags & QUERY_WRITABLE ? 'w' : '-';
        e.perms[2] = q.vma_flags & QUERY_EXECUTABLE ? 'x' : '-';
        e.perms[3] = q.vma_flags & QUERY_SHARED ? 's' : 'p';
        /* vma_name_size counts the NUL; 0 for an anonymous mapping. */
        size_t n = q.vma_name_size ? strnlen(name, q.vma_name_size - 1) : 0;
        size_t dl = sizeof(deleted) - 1;
        if (n >= dl && memcmp(name + n - dl, deleted, dl) == 0) {
            e.deleted = true;
            n -= dl;
        }
        if ((err = buf__append(&names, name, n)) || (err = buf__append(&names, "", 1)) ||
            (err = add_entry(out, &cap, &e)))
            break;
        addr = q.vma_end;
    }
    if (err && err != -E2BIG) {
        buf__free(&names);
        maps__free(out);
        return err;
    }
    /* The names in a row, in the entries' order. */
    if (!names.data && buf__append(&names, "", 0)) {
        maps__free(out);
        return -ENOMEM;
    }
    out->text = names.data;
    for (size_t i = 0, at = 0; i < out->n; i++) {
        out->e[i].path = out->text + at;
        at += strlen(out->text + at) + 1;
    }
    return err;
}

void maps__free(struct maps *m)
{
    if (!m)
        return;
    free(m->e);
    free(m->text);
    memset(m, 0, sizeof(*m));
}

const struct maps_entry *maps__find(const struct maps *m, uint64_t addr)
{
    size_t lo = 0, hi = m->n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (addr < m->e[mid].start)
            hi = mid;
        else if (addr >= m->e[mid].end)
            lo = mid + 1;
        else
            return &m->e[mid];
    }
    return NULL;
}
