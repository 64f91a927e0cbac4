/* The tables one ingest request grows: frames, the merge of identical
 * samples, names made for locations without lines, label sets. Every byte
 * counted against the request's budget. */
#include "ingest_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ingest_work__free(struct ingest_work *w)
{
    pprof_reader__free(&w->r);
    buf__free(&w->raw);
    id_index__free(&w->fns);
    id_index__free(&w->locs);
    id_index__free(&w->maps);
    hmap__free(w->ls_index);
    free(w->loc_off);
    free(w->loc_frames);
    free(w->locations);
    free(w->parts);
    free(w->skeys);
    free(w->sample_locs);
    free(w->functions);
    free(w->frames);
    free(w->stacks);
    free(w->merge);
    free(w->labelsets);
    free(w->ls_pid);
    free(w->labels);
    free(w->names);
}

/* Room for n more location indices. Returns 0, -E2BIG or -ENOMEM. Always
 * room for one more: frames is never NULL once a sample is read (samples
 * without locations index it too, and NULL + 0 is undefined). */
int ingest_work__reserve_frames(struct ingest_work *w, size_t n)
{
    return budget__grow(&w->mem, (void **)&w->frames, &w->cap_frames, w->nframes + n + 1,
                        sizeof(*w->frames), 65536);
}

static size_t merge_slot(const struct ingest_work *w, struct stack_key key, uint32_t set)
{
    /* The key is a hash with the store's secret bases: uniform, and no
     * sender can choose keys that collide. */
    return (size_t)(key.a ^ (key.b << 7) ^ (set * 0x9e3779b97f4a7c15ull)) & (w->nmerge - 1);
}

/* Doubles the merge table (8 slots at first) and places every stack again.
 * Returns 0, -E2BIG or -ENOMEM. */
static int merge_grow(struct ingest_work *w)
{
    size_t n = w->nmerge ? w->nmerge * 2 : 8;
    uint32_t *slots = budget__calloc(&w->mem, n, sizeof(*slots));

    if (!slots)
        return w->mem.over ? -E2BIG : -ENOMEM;
    free(w->merge);
    w->merge = slots;
    w->nmerge = n;
    for (size_t i = 0; i < w->nstacks; i++) {
        size_t j = merge_slot(w, w->stacks[i].key, w->stacks[i].labelset);
        while (w->merge[j])
            j = (j + 1) & (n - 1);
        w->merge[j] = i + 1;
    }
    return 0;
}

/* The stack of (key, set) so far, else a new one (*fresh set), its counts
 * 0 and its frames at `start` (an offset until the frames are final):
 * identical samples become one stack as they are read, so a body of
 * millions of samples of a few stacks takes memory for a few. Returns its
 * index, or -E2BIG / -ENOMEM. */
long ingest_work__merge_stack(struct ingest_work *w, struct stack_key key, uint32_t set,
                              size_t start, bool *fresh)
{
    int e;

    if ((w->nstacks + 1) * 2 > w->nmerge && (e = merge_grow(w)))
        return e;
    size_t j = merge_slot(w, key, set);
    for (; w->merge[j]; j = (j + 1) & (w->nmerge - 1)) {
        const struct store_stack *k = &w->stacks[w->merge[j] - 1];
        if (k->key.a == key.a && k->key.b == key.b && k->labelset == set) {
            *fresh = false;
            return w->merge[j] - 1;
        }
    }
    if ((e = budget__grow(&w->mem, (void **)&w->stacks, &w->cap_stacks, w->nstacks + 1,
                          sizeof(*w->stacks), 1024)))
        return e;
    w->stacks[w->nstacks] =
        (struct store_stack){(const uint32_t *)(uintptr_t)start, 0, set, key, 0, 0};
    w->merge[j] = w->nstacks + 1;
    *fresh = true;
    return w->nstacks++;
}

/* A name for a location pprof gives no line for: never a bare address.
 * Returns its function index; -EOVERFLOW past names_max, -E2BIG past the
 * budget, -ENOMEM. */
long ingest_work__synth_function(struct ingest_work *w, const struct stack_hasher *h,
                                 const struct pprof_rlocation *loc, size_t *extra_fns)
{
    const struct pprof_reader *r = &w->r;
    const char *file = "[unknown]";
    uint64_t addr = loc->address;
    char name[512];

    long mi = loc->mapping_id ? id_index__find(&w->maps, loc->mapping_id) : -1;
    if (mi >= 0) {
        const struct pprof_rmapping *m = &r->mappings[mi];
        const char *f = r->strings[m->filename];
        if (*f) {
            const char *slash = strrchr(f, '/');
            file = slash ? slash + 1 : f;
        }
        if (addr >= m->memory_start)
            addr = addr - m->memory_start + m->file_offset;
    }
    int n = snprintf(name, sizeof(name), "%s+0x%" PRIx64, file, addr);
    if (n < 0 || (size_t)n >= sizeof(name))
        n = sizeof(name) - 1;
    /* Names live in one growing buffer; fix up pointers once it is done.
     * Up to 512 bytes from a location of a few: counted against the
     * request's memory budget like the reader's tables. */
    if (w->names_len + n + 1 > w->names_max)
        return -EOVERFLOW;
    int e = budget__grow(&w->mem, (void **)&w->names, &w->names_cap, w->names_len + n + 1, 1, 4096);
    if (e)
        return e;
    memcpy(w->names + w->names_len, name, n);
    w->names[w->names_len + n] = '\0';
    long idx = r->nfunctions + (*extra_fns)++;
    w->functions[idx] = (struct store_put_function){{(const char *)(uintptr_t)w->names_len, ""},
                                                    stack_hasher__function(h, name, n, "", 0)};
    w->names_len += n + 1;
    return idx;
}

/* The label set of a sample's (key, str) string index pairs lkey[0..nk),
 * made when it is new: label sets repeat across samples, each is kept
 * once. Returns its index; -EBADMSG for a label past max_bytes (*bad: its
 * key's string index), -E2BIG past the budget, -ENOMEM. */
long ingest_work__label_set(struct ingest_work *w, const uint32_t *lkey, size_t nk,
                            size_t max_bytes, uint32_t *bad)
{
    const struct pprof_reader *r = &w->r;
    size_t n = nk / 2, set = w->nsets;
    bool fresh;
    int e;

    long k = hmap__find(w->ls_index, lkey, nk * sizeof(*lkey));
    if (k >= 0)
        return *hmap__val(w->ls_index, k);
    for (size_t j = 0; j < nk; j++) {
        if (r->string_len[lkey[j]] > max_bytes) {
            *bad = lkey[j & ~(size_t)1];
            return -EBADMSG;
        }
    }
    if (!budget__take(&w->mem, 1, nk * sizeof(*lkey) + LS_INDEX_BYTES))
        return -E2BIG;
    if ((k = hmap__put(w->ls_index, lkey, nk * sizeof(*lkey), &fresh)) < 0)
        return -ENOMEM;
    if ((e = budget__grow(&w->mem, (void **)&w->labels, &w->cap_labels, w->nlabels + n,
                          sizeof(*w->labels), 1024)) ||
        (e = budget__grow(&w->mem, (void **)&w->labelsets, &w->cap_sets, set + 1,
                          sizeof(*w->labelsets), 64)) ||
        (e = budget__grow(&w->mem, (void **)&w->ls_pid, &w->cap_pids, set + 1, sizeof(*w->ls_pid),
                          64)))
        return e;
    w->labelsets[set].labels = (void *)(uintptr_t)w->nlabels; /* fixed up once final */
    w->labelsets[set].n = n;
    w->ls_pid[set] = UINT32_MAX;
    for (size_t j = 0; j < nk; j += 2) {
        const char *key = r->strings[lkey[j]];
        w->labels[w->nlabels++] = (struct store_label){key, r->strings[lkey[j + 1]]};
        if (strcmp(key, "pid") == 0 && w->ls_pid[set] == UINT32_MAX)
            w->ls_pid[set] = lkey[j + 1];
    }
    *hmap__val(w->ls_index, k) = set;
    return w->nsets++;
}
