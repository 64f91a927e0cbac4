#include "profile_cache.h"

#include <stdlib.h>
#include <string.h>

#include "../common/hmap.h"

struct name_key {
    uintptr_t bin;
    uint64_t off; /* file offset << 1 | is_return */
};

/* A kept name: lines[first .. first + n) of the cache's lines. */
struct name_rec {
    uint32_t first;
    uint8_t n;
    bool entry;
};

struct profile_cache {
    struct hmap *names; /* name_key -> index into recs */
    struct name_rec *recs;
    size_t nrecs, cap_recs;
    struct pprof_line *lines;
    size_t nlines, cap_lines;

    struct hmap *seen[2];
    uint64_t *ids;
    size_t cap_ids;
};

/* What a window's end keeps of the arrays (elements); the rest is freed. */
#define KEEP_RECS 4096

struct profile_cache *profile_cache__new(void)
{
    struct profile_cache *pc = calloc(1, sizeof(*pc));

    if (!pc)
        return NULL;
    pc->names = hmap__new();
    pc->seen[0] = hmap__new();
    pc->seen[1] = hmap__new();
    if (!pc->names || !pc->seen[0] || !pc->seen[1]) {
        profile_cache__free(pc);
        return NULL;
    }
    return pc;
}

void profile_cache__free(struct profile_cache *pc)
{
    if (!pc)
        return;
    hmap__free(pc->names);
    hmap__free(pc->seen[0]);
    hmap__free(pc->seen[1]);
    free(pc->recs);
    free(pc->lines);
    free(pc->ids);
    free(pc);
}

unsigned profile_cache__get(struct profile_cache *pc, const struct binary *b, uint64_t file_offset,
                            bool is_return, const struct pprof_line **lines, bool *entry)
{
    struct name_key k = {(uintptr_t)b, file_offset << 1 | is_return};
    long i = hmap__find(pc->names, &k, sizeof(k));

    if (i < 0)
        return 0;
    const struct name_rec *r = &pc->recs[*hmap__val(pc->names, i)];
    *lines = pc->lines + r->first;
    *entry = r->entry;
    return r->n;
}

/* Grows *arr (elements of size) to hold need. 0 or -1. */
static int grow(void **arr, size_t *cap, size_t need, size_t size)
{
    size_t c = *cap ? *cap : 256;

    if (need <= *cap)
        return 0;
    while (c < need)
        c *= 2;
    void *p = realloc(*arr, c * size);
    if (!p)
        return -1;
    *arr = p;
    *cap = c;
    return 0;
}

void profile_cache__put(struct profile_cache *pc, const struct binary *b, uint64_t file_offset,
                        bool is_return, const struct pprof_line *lines, unsigned n, bool entry)
{
    struct name_key k = {(uintptr_t)b, file_offset << 1 | is_return};
    bool fresh;

    if (!n || n > UINT8_MAX || pc->nrecs >= PROFILE_CACHE_MAX ||
        grow((void **)&pc->recs, &pc->cap_recs, pc->nrecs + 1, sizeof(*pc->recs)) ||
        grow((void **)&pc->lines, &pc->cap_lines, pc->nlines + n, sizeof(*pc->lines)))
        return;
    long i = hmap__put(pc->names, &k, sizeof(k), &fresh);
    if (i < 0 || !fresh)
        return;
    memcpy(pc->lines + pc->nlines, lines, n * sizeof(*lines));
    pc->recs[pc->nrecs] = (struct name_rec){(uint32_t)pc->nlines, (uint8_t)n, entry};
    *hmap__val(pc->names, i) = pc->nrecs++;
    pc->nlines += n;
}

size_t profile_cache__len(const struct profile_cache *pc)
{
    return pc->nrecs;
}

void profile_cache__window_end(struct profile_cache *pc)
{
    hmap__clear(pc->names);
    pc->nrecs = pc->nlines = 0;
    if (pc->cap_recs > KEEP_RECS || pc->cap_lines > 4 * KEEP_RECS) {
        free(pc->recs);
        free(pc->lines);
        pc->recs = NULL;
        pc->lines = NULL;
        pc->cap_recs = pc->cap_lines = 0;
    }
}

struct hmap *profile_cache__seen(struct profile_cache *pc, unsigned which)
{
    struct hmap *h = pc->seen[which & 1];

    hmap__clear(h);
    return h;
}

uint64_t *profile_cache__ids(struct profile_cache *pc, size_t n)
{
    if (grow((void **)&pc->ids, &pc->cap_ids, n + 1, sizeof(*pc->ids)))
        return NULL;
    memset(pc->ids, 0, (n + 1) * sizeof(*pc->ids));
    return pc->ids;
}
