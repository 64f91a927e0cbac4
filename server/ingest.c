#include "ingest.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/buf.h"
#include "../common/gz.h"
#include "../common/hmap.h"
#include "../common/zst.h"
#include "../common/pprof/pprof_reader.h"
#include "budget.h"
#include "pprof_ids.h"
#include "sat.h"
#include "text.h"

/* Labels kept per sample (the rest are ignored) and values read per sample. */
#define MAX_LABELS 64
#define MAX_VALUES 64

/* What a profile may claim. Its CPU: at most what MAX_CORES cores give over
 * its duration (8,192 is the most CPUs a distribution's kernel supports,
 * NR_CPUS; doubled for headroom), and at most one sample per microsecond a
 * core (perf allows 100 kHz). Its duration: at most a day; a profile
 * without one is taken to span UNTIMED_NS. Its start: from 1970 to 2100.
 * With these, one profile's totals are at most 1.4e18 ns: several still
 * pass 64 bits, which every sum in the store and the queries saturates. */
#define MAX_CORES 16384
#define SAMPLES_PER_CORE_NS 1000
#define MAX_DURATION_NS (86400ll * 1000000000ll)
#define UNTIMED_NS (3600ll * 1000000000ll)
#define MAX_TIME_NS (4102444800ll * 1000000000ll)

/* An upper bound of what the label set index (a hmap) takes a set, beyond
 * its key: its entry (32 bytes, up to twice over as the array doubles), its
 * slots (up to 4 a set, 4 bytes each) and the key's rounding. */
#define LS_INDEX_BYTES 96

/* Everything ingest allocates for one request, freed in one place, and
 * counted against one budget (mem). */
struct work {
    struct budget mem;
    struct pprof_reader r;
    struct buf raw;
    struct id_index fns, locs, maps; /* pprof ids -> array indices */
    uint32_t *loc_off, *loc_frames;  /* location i's function indices */
    struct store_location *locations;
    struct loc_part *parts;     /* [i + 1]: location i's part of its stacks' keys */
    struct stack_strkey *skeys; /* string i's share of function keys; pc 0 until made */
    struct hmap *ls_index;      /* a sample's (key, str) pairs -> label set */
    uint64_t *sample_locs;      /* one sample's location ids */
    struct store_put_function *functions;
    uint32_t *frames; /* the samples' location indices, one after another */
    size_t nframes, cap_frames, total_depth;
    struct store_stack *stacks; /* one per distinct (stack, label set): samples merged */
    size_t nstacks, cap_stacks;
    uint32_t *merge; /* (stack key, label set) -> index into stacks + 1; 0 empty */
    size_t nmerge;   /* slots: a power of two, at least twice nstacks */
    struct store_labelset *labelsets;
    uint32_t *ls_pid; /* each label set's pid label (a string index), or UINT32_MAX */
    size_t cap_sets, cap_pids;
    struct store_label *labels;
    size_t nsets, nlabels, cap_labels;
    char *names; /* names made up for locations without lines */
    size_t names_len, names_cap, names_max;
};

static void work_free(struct work *w)
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
static int reserve_frames(struct work *w, size_t n)
{
    return budget__grow(&w->mem, (void **)&w->frames, &w->cap_frames, w->nframes + n + 1,
                        sizeof(*w->frames), 65536);
}

static size_t merge_slot(const struct work *w, struct stack_key key, uint32_t set)
{
    /* The key is a hash with the store's secret bases: uniform, and no
     * sender can choose keys that collide. */
    return (size_t)(key.a ^ (key.b << 7) ^ (set * 0x9e3779b97f4a7c15ull)) & (w->nmerge - 1);
}

/* Doubles the merge table (8 slots at first) and places every stack again.
 * Returns 0, -E2BIG or -ENOMEM. */
static int merge_grow(struct work *w)
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
static long merge_stack(struct work *w, struct stack_key key, uint32_t set, size_t start,
                        bool *fresh)
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
static long synth_function(struct work *w, const struct stack_hasher *h,
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

/* A location as the hot loop reads it: its part of a stack's key
 * (stack_key.h) and its number of frames, in one place. */
struct loc_part {
    uint64_t a, b;
    uint32_t nframes, pad;
};

/* What the hot loop reads: the profile's locations by pprof id, and the
 * powers of the stack key's bases. */
struct id_map {
    const uint32_t *dense;        /* location id -> index + 1 into parts, 0 for none */
    const struct loc_part *parts; /* [0]: none (0 frames); then each location's */
    const uint64_t *pow_a, *pow_b;
    uint64_t max_id;
    size_t max_depth;
};

/* The hot loop of ingest, run for every frame of every sample: one packed
 * run of location ids [q, end) decoded, each id mapped to its location
 * index (written to out, which has room for one per byte), and the
 * location's part added to the stack's key. Returns the number of
 * locations; -EBADMSG for a malformed varint, -ENOENT for an id not
 * defined (*bad set), -E2BIG past max_depth frames. *depth: the frames.
 *
 * Written for the common case, so the CPU runs ahead: ids of one or two
 * bytes, locations of one frame (the depth then grows by one without
 * waiting for the location's entry to load). */
/* Ids in a run of at most this many bytes are at most as many: their sums
 * (each product < 2^122) fit 128 bits without folding, and single-frame
 * locations cannot take the depth past the power tables' slack. */
#define SHORT_RUN 63

static inline __attribute__((always_inline)) long map_run(const struct id_map *m, const uint8_t *q,
                                                          const uint8_t *end, uint32_t *out,
                                                          size_t *depth_out, struct stack_key *key,
                                                          uint64_t *bad, const bool is_short)
{
    const uint32_t *dense = m->dense;
    const struct loc_part *parts = m->parts;
    const uint64_t *pow_a = m->pow_a, *pow_b = m->pow_b;
    unsigned __int128 sa = 0, sb = 0;
    size_t depth = 0, terms = 0, max_depth = m->max_depth;
    uint64_t max_id = m->max_id;
    uint32_t *o = out;

    while (q < end) {
        /* Branches, not arithmetic: predicted, they let the CPU decode
         * ahead; computed, each id would wait for the one before it. */
        uint64_t id = *q;
        if (id < 0x80) {
            q++;
        } else if (end - q >= 2 && q[1] < 0x80) {
            id = (id & 0x7f) | (uint64_t)q[1] << 7;
            q += 2;
        } else if (!pprof_varint(&q, end, &id)) {
            return -EBADMSG;
        }
        uint32_t li = id <= max_id ? dense[id] : 0;
        const struct loc_part *lp = &parts[li];
        if (!is_short) {
            if (terms == 32) { /* each product < 2^122: 32 fit the 128-bit sums */
                sa = stack_key__mod(sa);
                sb = stack_key__mod(sb);
                terms = 0;
            }
            terms++;
            if (depth >= max_depth)
                return -E2BIG;
        }
        if (lp->nframes == 1) {
            sa += (unsigned __int128)lp->a * pow_a[depth];
            sb += (unsigned __int128)lp->b * pow_b[depth];
            depth++;
        } else {
            if (!li) {
                *bad = id;
                return -ENOENT;
            }
            if (depth + lp->nframes > max_depth)
                return -E2BIG;
            sa += (unsigned __int128)lp->a * pow_a[depth];
            sb += (unsigned __int128)lp->b * pow_b[depth];
            depth += lp->nframes;
        }
        *o++ = li - 1;
    }
    if (depth > max_depth) /* short runs check once, here */
        return -E2BIG;
    key->a = stack_key__mod(sa);
    key->b = stack_key__mod(sb);
    *depth_out = depth;
    return o - out;
}

static long map_ids(const struct id_map *m, const uint8_t *q, const uint8_t *end, uint32_t *out,
                    size_t *depth_out, struct stack_key *key, uint64_t *bad)
{
    if (end - q <= SHORT_RUN)
        return map_run(m, q, end, out, depth_out, key, bad, true);
    return map_run(m, q, end, out, depth_out, key, bad, false);
}

/* The value of a string label in a label set, or NULL. */
static const char *label_in(const struct store_labelset *ls, const char *key)
{
    for (size_t i = 0; ls && i < ls->n; i++)
        if (strcmp(ls->labels[i].key, key) == 0)
            return ls->labels[i].value;
    return NULL;
}

/* The label set of a sample's (key, str) string index pairs lkey[0..nk),
 * made when it is new: label sets repeat across samples, each is kept
 * once. Returns its index; -EBADMSG for a label past max_bytes (*bad: its
 * key's string index), -E2BIG past the budget, -ENOMEM. */
static long label_set(struct work *w, const uint32_t *lkey, size_t nk, size_t max_bytes,
                      uint32_t *bad)
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

#define BAD(...)                                                                                   \
    do {                                                                                           \
        snprintf(msg, msglen, __VA_ARGS__);                                                        \
        goto out;                                                                                  \
    } while (0)

int ingest__profile(struct store *st, const void *body, size_t len,
                    const struct ingest_identity *id, const struct ingest_limits *lim, char *msg,
                    size_t msglen)
{
    struct work w;
    const struct pprof_reader *r = &w.r;
    const struct stack_hasher *h = store__hasher(st);
    /* the key tables' size bounds the depth too */
    size_t max_depth =
        lim->max_stack_depth < STACK_KEY_MAX_FRAMES ? lim->max_stack_depth : STACK_KEY_MAX_FRAMES;
    const uint8_t *data = body;
    size_t dlen = len;
    int status = 400, e;

    memset(&w, 0, sizeof(w));
    budget__init(&w.mem, lim->max_memory);
    buf__init(&w.raw,
              lim->max_decompressed < lim->max_memory ? lim->max_decompressed : lim->max_memory);
    /* Told apart by their magic bytes; anything else is read as pprof. */
    bool gz = gz__is_gzip(body, len), zst = !gz && zst__is_zstd(body, len);
    if (gz || zst) {
        e = gz ? gz__decompress(body, len, &w.raw, lim->max_ratio)
               : zst__decompress(body, len, &w.raw, lim->max_ratio);
        if (e == -E2BIG) {
            status = 413;
            BAD("the body inflates past the limit (%zu bytes, or %zu times its size)", w.raw.max,
                lim->max_ratio);
        }
        if (e == -ENOMEM)
            goto oom;
        if (e && gz)
            BAD("the body is not a whole gzip stream");
        if (e)
            BAD("the body is not whole zstd frames (or asks for a window over %d MiB)",
                1 << (ZST_WINDOW_LOG_MAX - 20));
        data = (const uint8_t *)w.raw.data;
        dlen = w.raw.len;
        if (!budget__take(&w.mem, w.raw.cap, 1))
            goto oom; /* a 413: the inflated body alone fills the budget */
    }
    /* The reader's tables get what the inflated body left of the budget (a
     * real profile needs 1-3 times its encoded size; a body of empty
     * messages up to 24 times). Names made for locations without lines, up
     * to 512 bytes from a location of a few, at most 16 times the body. */
    w.names_max = dlen * 16 + (1u << 20);
    e = pprof_reader__read(&w.r, data, dlen, w.mem.max - w.mem.used, msg, msglen);
    if (e == -E2BIG)
        w.mem.over = true;
    if (e == -ENOMEM || e == -E2BIG || !budget__take(&w.mem, pprof_reader__mem_used(&w.r), 1))
        goto oom;
    if (e)
        goto out; /* msg says what is wrong */

    /* --- the checks pprof itself makes, and ours --- */
    if (r->nsample_types == 0)
        BAD("no sample_type");
    if (r->nsample_types > MAX_VALUES)
        BAD("%zu sample types: more than %d", r->nsample_types, MAX_VALUES);
    if (r->nsamples > lim->max_samples) {
        status = 413;
        BAD("%zu samples: more than the limit of %zu", r->nsamples, lim->max_samples);
    }
    int samples_idx = -1, cpu_idx = -1;
    for (size_t i = 0; i < r->nsample_types; i++) {
        const char *t = r->strings[r->sample_types[i].type];
        const char *u = r->strings[r->sample_types[i].unit];
        if (strcmp(t, "samples") == 0 && samples_idx < 0)
            samples_idx = i;
        if (strcmp(t, "cpu") == 0 && strcmp(u, "nanoseconds") == 0 && cpu_idx < 0)
            cpu_idx = i;
    }
    if (samples_idx < 0)
        samples_idx = 0;
    int64_t period_ns =
        r->has_period_type && strcmp(r->strings[r->period_type.unit], "nanoseconds") == 0
            ? r->period
            : 0;

    /* --- ids of functions, locations and mappings -> their indices --- */
    if ((e = id_index__table(&w.fns, &w.mem, r->functions, r->nfunctions, sizeof(*r->functions),
                             "function", msg, msglen)) ||
        (e = id_index__table(&w.locs, &w.mem, r->locations, r->nlocations, sizeof(*r->locations),
                             "location", msg, msglen)) ||
        (e = id_index__table(&w.maps, &w.mem, r->mappings, r->nmappings, sizeof(*r->mappings),
                             "mapping", msg, msglen))) {
        if (e != -EBADMSG)
            goto oom;
        goto out;
    }

    /* --- functions --- */
    /* Room for every pprof function and one made-up name per location. */
    w.functions = budget__malloc(&w.mem, r->nfunctions + r->nlocations + 1, sizeof(*w.functions));
    w.skeys = budget__calloc(&w.mem, r->nstrings, sizeof(*w.skeys));
    if (!w.functions || !w.skeys)
        goto oom;
    for (size_t i = 0; i < r->nfunctions; i++) {
        const struct pprof_rfunction *f = &r->functions[i];
        /* Each string hashed once, however many functions share it (a
         * file has many). */
        uint32_t si[2] = {f->name, f->filename};
        for (int k = 0; k < 2; k++)
            if (!w.skeys[si[k]].pc)
                w.skeys[si[k]] = stack_hasher__string(h, r->strings[si[k]], r->string_len[si[k]]);
        w.functions[i] =
            (struct store_put_function){{r->strings[f->name], r->strings[f->filename]},
                                        stack_hasher__join(w.skeys[f->name], w.skeys[f->filename])};
    }

    /* --- locations: each expanded once into function indices --- */
    size_t extra_fns = 0, nloc_frames = 0;
    for (size_t i = 0; i < r->nlocations; i++)
        nloc_frames += r->locations[i].nlines ? r->locations[i].nlines : 1;
    w.loc_off = budget__malloc(&w.mem, r->nlocations + 1, sizeof(*w.loc_off));
    w.loc_frames = budget__malloc(&w.mem, nloc_frames + 1, sizeof(*w.loc_frames));
    if (!w.loc_off || !w.loc_frames)
        goto oom;
    size_t lf = 0;
    for (size_t i = 0; i < r->nlocations; i++) {
        const struct pprof_rlocation *l = &r->locations[i];
        w.loc_off[i] = lf;
        /* pprof: a location's lines go innermost (inlined) first. */
        for (size_t j = 0; j < l->nlines; j++) {
            uint64_t fid = r->lines[l->line_off + j].function_id;
            long fi = id_index__find(&w.fns, fid);
            if (fi < 0)
                BAD("location %" PRIu64 ": function id %" PRIu64 " not defined", l->id, fid);
            w.loc_frames[lf++] = fi;
        }
        if (l->nlines == 0) {
            long f = synth_function(&w, h, l, &extra_fns);
            if (f == -EOVERFLOW) {
                status = 413;
                BAD("the names made for locations without lines pass %zu bytes", w.names_max);
            }
            if (f < 0)
                goto oom; /* a 413 past the budget */
            w.loc_frames[lf++] = f;
        }
    }
    w.loc_off[r->nlocations] = lf;
    w.locations = budget__malloc(&w.mem, r->nlocations + 1, sizeof(*w.locations));
    w.parts = budget__malloc(&w.mem, r->nlocations + 1, sizeof(*w.parts));
    if (!w.locations || !w.parts)
        goto oom;
    w.parts[0] = (struct loc_part){0, 0, 0, 0}; /* an undefined id maps here */
    for (size_t i = 0; i < r->nlocations; i++) {
        uint32_t n = w.loc_off[i + 1] - w.loc_off[i];
        if (n > lim->max_stack_depth) {
            status = 413;
            BAD("location %" PRIu64 ": %u inlined frames, more than %zu", r->locations[i].id, n,
                lim->max_stack_depth);
        }
        struct stack_key keys[64];
        struct stack_sum sum;
        stack_sum__init(&sum);
        for (uint32_t j = 0; j < n; j += 64) { /* in runs of 64: no location has more */
            uint32_t m = n - j < 64 ? n - j : 64;
            for (uint32_t k = 0; k < m; k++)
                keys[k] = w.functions[w.loc_frames[w.loc_off[i] + j + k]].key;
            struct stack_part part = stack_hasher__part(h, keys, m);
            stack_sum__add(&sum, h, part.a, part.b, m);
        }
        struct stack_key k = stack_sum__key(&sum);
        w.parts[i + 1] = (struct loc_part){k.a, k.b, n, 0};
        w.locations[i] = (struct store_location){w.loc_frames + w.loc_off[i], n};
    }
    bool dense_locs = w.locs.dense != NULL;
    struct id_map idm = {w.locs.dense, w.parts, h->pow_a, h->pow_b, w.locs.max_id, max_depth};

    /* --- samples -> stacks of function indices, and distinct label sets --- */
    size_t nsamples = r->nsamples;
    w.ls_index = hmap__new();
    w.sample_locs = budget__malloc(&w.mem, lim->max_stack_depth + 1, sizeof(*w.sample_locs));
    if (!w.ls_index || !w.sample_locs)
        goto oom;
    int64_t values[MAX_VALUES];
    struct pprof_rlabel labels[MAX_LABELS];
    struct pprof_rsample s = {
        w.sample_locs, 0, lim->max_stack_depth + 1, values, 0, MAX_VALUES, labels, 0, MAX_LABELS};
    uint32_t lkey[2 * MAX_LABELS], prev_key[2 * MAX_LABELS];
    size_t prev_nk = SIZE_MAX;
    int64_t total_samples = 0, total_cpu = 0;
    uint32_t prev_set = STORE_NO_LABELS;
    for (size_t i = 0; i < nsamples; i++) {
        /* The location ids, mapped as they are decoded where they are one
         * packed run of a dense table's ids (as every writer makes them);
         * else decoded first. */
        const uint8_t *q, *qend;
        size_t start = w.nframes, depth = 0;
        struct stack_sum sum;
        struct stack_key key;
        stack_sum__init(&sum);
        e = dense_locs ? pprof_reader__sample_packed(r, i, &s, &q, &qend, msg, msglen) : -EAGAIN;
        if (e == -EAGAIN) {
            e = pprof_reader__sample(r, i, &s, msg, msglen);
            if (e == -EBADMSG)
                goto out;
            if (s.nlocation_ids > lim->max_stack_depth) {
                status = 413;
                BAD("sample %zu: deeper than %zu frames", i, lim->max_stack_depth);
            }
            if (reserve_frames(&w, s.nlocation_ids))
                goto oom;
            for (size_t j = 0; j < s.nlocation_ids; j++) {
                long li = id_index__find(&w.locs, s.location_ids[j]);
                if (li < 0)
                    BAD("sample %zu: location id %" PRIu64 " not defined", i, s.location_ids[j]);
                const struct loc_part *lp = &w.parts[li + 1];
                if (depth + lp->nframes > max_depth) {
                    status = 413;
                    BAD("sample %zu: deeper than %zu frames", i, max_depth);
                }
                stack_sum__add(&sum, h, lp->a, lp->b, lp->nframes);
                depth += lp->nframes;
                w.frames[w.nframes++] = li;
            }
            key = stack_sum__key(&sum);
        } else {
            if (e == -EBADMSG)
                goto out;
            /* At most one id a byte; map_ids writes no more than max_depth
             * of them, or than a short run's bytes. */
            size_t most = qend - q;
            if (most > max_depth + SHORT_RUN + 1)
                most = max_depth + SHORT_RUN + 1;
            if (reserve_frames(&w, most))
                goto oom;
            uint64_t bad = 0;
            long n = map_ids(&idm, q, qend, w.frames + w.nframes, &depth, &key, &bad);
            if (n == -EBADMSG)
                BAD("sample %zu: malformed protobuf", i);
            if (n == -ENOENT)
                BAD("sample %zu: location id %" PRIu64 " not defined", i, bad);
            if (n < 0) {
                status = 413;
                BAD("sample %zu: deeper than %zu frames", i, max_depth);
            }
            w.nframes += n;
        }
        if (s.nvalues != r->nsample_types)
            BAD("sample %zu has %zu values for %zu sample types", i, s.nvalues, r->nsample_types);
        /* labels past MAX_LABELS (the only other -E2BIG) are not kept */
        if (depth > lim->max_stack_depth) {
            status = 413;
            BAD("sample %zu: deeper than %zu frames", i, lim->max_stack_depth);
        }
        /* Label sets repeat across samples, most often from one sample to
         * the next. */
        size_t nk = 0;
        for (size_t j = 0; j < s.nlabels && j < MAX_LABELS; j++) {
            if (s.labels[j].str) { /* numeric labels are not kept (yet) */
                lkey[nk++] = s.labels[j].key;
                lkey[nk++] = s.labels[j].str;
            }
        }
        uint32_t set = STORE_NO_LABELS;
        if (nk == prev_nk && memcmp(lkey, prev_key, nk * sizeof(*lkey)) == 0) {
            set = prev_set;
        } else if (nk) {
            uint32_t bad = 0;
            long k = label_set(&w, lkey, nk, lim->max_label_bytes, &bad);
            if (k == -EBADMSG)
                BAD("sample %zu: label '%.64s' longer than %zu bytes", i, r->strings[bad],
                    lim->max_label_bytes);
            if (k < 0)
                goto oom;
            set = k;
        }
        memcpy(prev_key, lkey, nk * sizeof(*lkey));
        prev_nk = nk;
        prev_set = set;
        int64_t samples = values[samples_idx], cpu;
        if (cpu_idx >= 0)
            cpu = values[cpu_idx];
        else if (__builtin_mul_overflow(samples, period_ns, &cpu))
            BAD("sample %zu: samples x period past 64 bits", i);
        if (samples < 0 || cpu < 0)
            BAD("sample %zu: negative value", i);
        /* The profile's totals must fit too (the store keeps them). */
        if (__builtin_add_overflow(total_samples, samples, &total_samples) ||
            __builtin_add_overflow(total_cpu, cpu, &total_cpu))
            BAD("sample %zu: the profile's total samples or CPU past 64 bits", i);
        /* A stack seen before with the same labels takes the counts; its
         * frames just written go. */
        bool fresh = false;
        long k = merge_stack(&w, key, set, start, &fresh);
        if (k < 0)
            goto oom;
        if (!fresh) {
            w.nframes = start;
        } else if ((w.total_depth += depth) > lim->max_frames) {
            status = 413;
            BAD("sample %zu: more than %zu frames in all distinct stacks", i, lim->max_frames);
        }
        w.stacks[k].samples += samples; /* at most the totals, which fit */
        w.stacks[k].cpu_ns += cpu;
    }
    if (r->time_nanos < 0 || r->time_nanos > MAX_TIME_NS)
        BAD("time_nanos %" PRId64 " is not between 1970 and 2100", r->time_nanos);
    if (r->duration_nanos < 0 || r->duration_nanos > MAX_DURATION_NS)
        BAD("duration_nanos %" PRId64 " is not between 0 and a day", r->duration_nanos);
    int64_t window = r->duration_nanos ? r->duration_nanos : UNTIMED_NS;
    if ((__int128)total_cpu > (__int128)window * MAX_CORES)
        BAD("%" PRId64 " ns of CPU in %" PRId64 " ns: more than %d cores can use", total_cpu,
            window, MAX_CORES);
    if ((__int128)total_samples * SAMPLES_PER_CORE_NS > (__int128)window * MAX_CORES)
        BAD("%" PRId64 " samples in %" PRId64 " ns: more than one a microsecond on %d cores",
            total_samples, window, MAX_CORES);
    /* frames, labels and names are final now: point into them */
    for (size_t i = 0; i < w.nstacks; i++) {
        size_t off = (uintptr_t)w.stacks[i].locations;
        size_t end = i + 1 < w.nstacks ? (uintptr_t)w.stacks[i + 1].locations : w.nframes;
        w.stacks[i].locations = w.frames + off;
        w.stacks[i].nlocations = end - off;
    }
    for (size_t i = 0; i < w.nsets; i++)
        w.labelsets[i].labels = w.labels + (uintptr_t)w.labelsets[i].labels;
    for (size_t i = 0; i < extra_fns; i++) {
        struct store_function *f = &w.functions[r->nfunctions + i].f;
        f->name = w.names + (uintptr_t)f->name;
    }

    /* --- identity: the query string, else the first sample's labels --- */
    const struct store_labelset *ls0 = w.nstacks && w.stacks[0].labelset != STORE_NO_LABELS
                                           ? &w.labelsets[w.stacks[0].labelset]
                                           : NULL;
    const char *app = id->service && *id->service ? id->service : label_in(ls0, "service");
    if (!app || !*app)
        BAD("no service: give ?service=NAME or a 'service' sample label");
    const char *host = id->host && *id->host ? id->host : label_in(ls0, "host");
    /* The rules of every identity label (below): they are listed, logged
     * and matched by value. */
    const char *what = "service", *why = text__label_problem(app, lim->max_label_bytes);
    if (!why) {
        what = "host";
        why = text__label_problem(host, lim->max_label_bytes);
    }
    if (why)
        BAD("%s %s (at most %zu bytes of UTF-8 without control characters)", what, why,
            lim->max_label_bytes);
    int64_t pid = id->pid;
    if (!pid && w.nstacks) {
        /* A profile whose samples carry different pids spans processes. */
        uint32_t set0 = w.stacks[0].labelset;
        const char *ps = set0 != STORE_NO_LABELS && w.ls_pid[set0] != UINT32_MAX
                             ? r->strings[w.ls_pid[set0]]
                             : NULL;
        bool one = ps != NULL;
        for (size_t i = 1; one && i < w.nstacks; i++) {
            uint32_t set = w.stacks[i].labelset;
            one = set != STORE_NO_LABELS && w.ls_pid[set] != UINT32_MAX &&
                  strcmp(r->strings[w.ls_pid[set]], ps) == 0;
        }
        if (one)
            pid = strtoll(ps, NULL, 10);
    }
    struct store_profile sp = {
        .app = app,
        .host = host ? host : "",
        .pid = pid,
        .time_ns = r->time_nanos,
        .duration_ns = r->duration_nanos,
        .period_ns = period_ns,
        .functions = w.functions,
        .nfunctions = r->nfunctions + extra_fns,
        .locations = w.locations,
        .nlocations = r->nlocations,
        .stacks = w.stacks,
        .nstacks = w.nstacks,
        .labelsets = w.labelsets,
        .nlabelsets = w.nsets,
        .bytes_in = len,
    };
    /* Where the process runs: the query string, else the first sample. */
    for (int i = 0; i < STORE_N_IDENTITY; i++) {
        const char *v = id->identity[i] && *id->identity[i] ? id->identity[i]
                                                            : label_in(ls0, store_identity_keys[i]);
        if ((why = text__label_problem(v, lim->max_label_bytes)))
            BAD("%s %s (at most %zu bytes of UTF-8 without control characters)",
                store_identity_keys[i], why, lim->max_label_bytes);
        sp.identity[i] = v;
    }
    /* What the store allocates to put it, counted too. */
    if (!budget__take(&w.mem, 1, store__put_mem(st, &sp)))
        goto oom;
    char serr[512];
    int pr = store__put(st, &sp, serr, sizeof(serr));
    if (pr) {
        status = pr == -E2BIG ? 413 : pr == -EAGAIN ? 503 : 500;
        BAD("%s%s", pr == -E2BIG ? "" : "the store failed: ", serr);
    }
    status = 202;
    goto out;
oom:
    if (w.mem.over) {
        snprintf(msg, msglen,
                 "the profile needs more than the %zu bytes of memory a request may use",
                 w.mem.max);
        status = 413;
    } else {
        snprintf(msg, msglen, "out of memory");
        status = 500;
    }
out:
    work_free(&w);
    return status;
}
