#include "ingest.h"

#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/gz.h"
#include "../common/zst.h"
#include "ingest_int.h"
#include "sat.h"
#include "text.h"

/* What a profile may claim. Its CPU: at most what MAX_CORES cores give over
 * its duration (8,192 is the most CPUs a distribution's kernel supports,
 * NR_CPUS; doubled for headroom), and at most one sample per microsecond a
 * core (perf allows 100 kHz). Its duration: at most a day; a profile
 * without one is taken to span UNTIMED_NS. Its start: from 1970 to 2100.
 * With these, one profile's totals are at most 1.4e18 ns: several still
 * pass 64 bits, which every sum in the store and the queries saturates. */
#define MAX_CORES 16384
/* Its off-CPU time: at most every thread blocked for the whole window, with
 * at most PID_MAX_LIMIT (2^22) threads on a host. */
#define MAX_THREADS (1ll << 22)
#define SAMPLES_PER_CORE_NS 1000
#define MAX_DURATION_NS (86400ll * 1000000000ll)
#define UNTIMED_NS (3600ll * 1000000000ll)
#define MAX_TIME_NS (4102444800ll * 1000000000ll)

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
        } else if (!varint__read(&q, end, &id)) {
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

/* A request's failure: w->msg written from fmt, status returned. */
static int __attribute__((format(printf, 3, 4)))
fail(struct ingest_work *w, int status, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(w->msg, w->msglen, fmt, ap);
    va_end(ap);
    return status;
}

/* An allocation failed: 413 when it was the request's memory budget that
 * ran out, else 500. */
static int no_memory(struct ingest_work *w)
{
    if (w->mem.over)
        return fail(w, 413, "the profile needs more than the %zu bytes of memory a request may use",
                    w->mem.max);
    return fail(w, 500, "out of memory");
}

/* --- decode --- */

/* The body (gzip, zstd or pprof as it is, told apart by their magic bytes)
 * inflated within the limits and read into w->r, within what is left of
 * the budget. Returns 0, or the status with w->msg saying why: 400 not
 * whole or not pprof, 413 past a limit, 500 out of memory. */
static int decode(struct ingest_work *w, const void *body, size_t len)
{
    const struct ingest_limits *lim = w->lim;
    const uint8_t *data = body;
    size_t dlen = len;
    int e;

    bool gz = gz__is_gzip(body, len), zst = !gz && zst__is_zstd(body, len);
    if (gz || zst) {
        e = gz ? gz__decompress(body, len, &w->raw, lim->max_ratio)
               : zst__decompress(body, len, &w->raw, lim->max_ratio);
        if (e == -E2BIG)
            return fail(w, 413,
                        "the body inflates past the limit (%zu bytes, or %zu times its size)",
                        w->raw.max, lim->max_ratio);
        if (e == -ENOMEM)
            return no_memory(w);
        if (e && gz)
            return fail(w, 400, "the body is not a whole gzip stream");
        if (e)
            return fail(w, 400,
                        "the body is not whole zstd frames (or asks for a window over %d MiB)",
                        1 << (ZST_WINDOW_LOG_MAX - 20));
        data = (const uint8_t *)w->raw.data;
        dlen = w->raw.len;
        if (!budget__take(&w->mem, w->raw.cap, 1))
            return no_memory(w); /* a 413: the inflated body alone fills the budget */
    }
    /* The reader's tables get what the inflated body left of the budget (a
     * real profile needs 1-3 times its encoded size; a body of empty
     * messages up to 24 times). Names made for locations without lines, up
     * to 512 bytes from a location of a few, at most 16 times the body. */
    w->names_max = dlen * 16 + (1u << 20);
    e = pprof_reader__read(&w->r, data, dlen, w->mem.max - w->mem.used, w->msg, w->msglen);
    if (e == -E2BIG)
        w->mem.over = true;
    if (e == -ENOMEM || e == -E2BIG || !budget__take(&w->mem, pprof_reader__mem_used(&w->r), 1))
        return no_memory(w);
    if (e)
        return 400; /* msg says what is wrong */
    return 0;
}

/* --- validate --- */

/* 422 for a profile without CPU, its sample types named. */
static int no_cpu(struct ingest_work *w)
{
    const struct pprof_reader *r = &w->r;
    char types[256] = "";
    size_t n = 0;

    for (size_t i = 0; i < r->nsample_types && n < sizeof(types) - 1; i++)
        n += snprintf(types + n, sizeof(types) - n, "%s%.40s/%.40s", i ? ", " : "",
                      r->strings[r->sample_types[i].type], r->strings[r->sample_types[i].unit]);
    return fail(w, 422,
                "no cpu/nanoseconds sample type (this profile has %s): only CPU profiles are "
                "kept",
                types);
}

/* The checks pprof itself makes of a decoded profile, and ours: sample
 * types, the number of samples, which values count samples and CPU, the
 * period; then the ids of functions, locations and mappings indexed (each
 * defined once). Returns 0, or the status with w->msg: 400, 413 (too many
 * samples, or the budget), 500. */
static int validate(struct ingest_work *w)
{
    const struct pprof_reader *r = &w->r;
    const struct ingest_limits *lim = w->lim;
    int e;

    if (r->nsample_types == 0)
        return fail(w, 400, "no sample_type");
    if (r->nsample_types > MAX_VALUES)
        return fail(w, 400, "%zu sample types: more than %d", r->nsample_types, MAX_VALUES);
    if (r->nsamples > lim->max_samples)
        return fail(w, 413, "%zu samples: more than the limit of %zu", r->nsamples,
                    lim->max_samples);
    w->samples_idx = w->cpu_idx = w->off_idx = -1;
    /* By name, not position: the agent adds off_cpu as a third type only
     * when it records it (docs/internals/ingest.md). */
    for (size_t i = 0; i < r->nsample_types; i++) {
        const char *t = r->strings[r->sample_types[i].type];
        const char *u = r->strings[r->sample_types[i].unit];
        if (strcmp(t, "samples") == 0 && w->samples_idx < 0)
            w->samples_idx = i;
        if (strcmp(t, "cpu") == 0 && strcmp(u, "nanoseconds") == 0 && w->cpu_idx < 0)
            w->cpu_idx = i;
        if (strcmp(t, "off_cpu") == 0 && strcmp(u, "nanoseconds") == 0 && w->off_idx < 0)
            w->off_idx = i;
    }
    /* Without a samples type the first value counts samples; with
     * cpu_only each sample counts one instead (its first value may be the
     * CPU in nanoseconds). */
    if (w->samples_idx < 0 && !w->cpu_only)
        w->samples_idx = 0;
    w->period_ns = r->has_period_type && strcmp(r->strings[r->period_type.unit], "nanoseconds") == 0
                       ? r->period
                       : 0;
    if (w->cpu_only && w->cpu_idx < 0)
        return no_cpu(w);
    if (w->cpu_only && !(r->has_period_type && strcmp(r->strings[r->period_type.type], "cpu") == 0))
        w->period_ns = 0; /* a wall profile's period is not CPU */

    /* ids of functions, locations and mappings -> their indices */
    if ((e = id_index__table(&w->fns, &w->mem, r->functions, r->nfunctions, sizeof(*r->functions),
                             "function", w->msg, w->msglen)) ||
        (e = id_index__table(&w->locs, &w->mem, r->locations, r->nlocations, sizeof(*r->locations),
                             "location", w->msg, w->msglen)) ||
        (e = id_index__table(&w->maps, &w->mem, r->mappings, r->nmappings, sizeof(*r->mappings),
                             "mapping", w->msg, w->msglen)))
        return e == -EBADMSG ? 400 : no_memory(w);
    return 0;
}

/* What a profile claims, checked once its samples are summed: its start
 * and duration in range, and no more CPU or samples than MAX_CORES could
 * give over its duration. Returns 0 or 400 with w->msg. */
static int validate_claims(struct ingest_work *w)
{
    const struct pprof_reader *r = &w->r;

    if (r->time_nanos < 0 || r->time_nanos > MAX_TIME_NS)
        return fail(w, 400, "time_nanos %" PRId64 " is not between 1970 and 2100", r->time_nanos);
    if (r->duration_nanos < 0 || r->duration_nanos > MAX_DURATION_NS)
        return fail(w, 400, "duration_nanos %" PRId64 " is not between 0 and a day",
                    r->duration_nanos);
    int64_t window = r->duration_nanos ? r->duration_nanos : UNTIMED_NS;
    if ((__int128)w->total_cpu > (__int128)window * MAX_CORES)
        return fail(w, 400, "%" PRId64 " ns of CPU in %" PRId64 " ns: more than %d cores can use",
                    w->total_cpu, window, MAX_CORES);
    if ((__int128)w->total_off > (__int128)window * MAX_THREADS)
        return fail(w, 400,
                    "%" PRId64 " ns off-CPU in %" PRId64 " ns: more than %lld threads can wait",
                    w->total_off, window, MAX_THREADS);
    if ((__int128)w->total_samples * SAMPLES_PER_CORE_NS > (__int128)window * MAX_CORES)
        return fail(w, 400,
                    "%" PRId64 " samples in %" PRId64
                    " ns: more than one a microsecond on %d cores",
                    w->total_samples, window, MAX_CORES);
    return 0;
}

/* --- key: functions, locations and samples in the store's terms --- */

/* Every pprof function with its key, each string hashed once however many
 * functions share it (a file has many). Returns 0 or the status of
 * no_memory. */
static int key_functions(struct ingest_work *w)
{
    const struct pprof_reader *r = &w->r;
    const struct stack_hasher *h = w->h;

    /* Room for every pprof function and one made-up name per location. */
    w->functions =
        budget__malloc(&w->mem, r->nfunctions + r->nlocations + 1, sizeof(*w->functions));
    w->skeys = budget__calloc(&w->mem, r->nstrings, sizeof(*w->skeys));
    if (!w->functions || !w->skeys)
        return no_memory(w);
    for (size_t i = 0; i < r->nfunctions; i++) {
        const struct pprof_rfunction *f = &r->functions[i];
        uint32_t si[2] = {f->name, f->filename};
        for (int k = 0; k < 2; k++)
            if (!w->skeys[si[k]].pc)
                w->skeys[si[k]] = stack_hasher__string(h, r->strings[si[k]], r->string_len[si[k]]);
        w->functions[i] = (struct store_put_function){
            {r->strings[f->name], r->strings[f->filename]},
            stack_hasher__join(w->skeys[f->name], w->skeys[f->filename])};
    }
    return 0;
}

/* Each location expanded once into its function indices (loc_off,
 * loc_frames): its lines', innermost (inlined) first as pprof has them, or
 * one function named for its address when it has no line. Returns 0, or
 * the status with w->msg: 400 an undefined function, 413 past names_max or
 * the budget, 500. */
static int expand_locations(struct ingest_work *w)
{
    const struct pprof_reader *r = &w->r;
    size_t nloc_frames = 0, lf = 0;

    for (size_t i = 0; i < r->nlocations; i++)
        nloc_frames += r->locations[i].nlines ? r->locations[i].nlines : 1;
    w->loc_off = budget__malloc(&w->mem, r->nlocations + 1, sizeof(*w->loc_off));
    w->loc_frames = budget__malloc(&w->mem, nloc_frames + 1, sizeof(*w->loc_frames));
    if (!w->loc_off || !w->loc_frames)
        return no_memory(w);
    for (size_t i = 0; i < r->nlocations; i++) {
        const struct pprof_rlocation *l = &r->locations[i];
        w->loc_off[i] = lf;
        for (size_t j = 0; j < l->nlines; j++) {
            uint64_t fid = r->lines[l->line_off + j].function_id;
            long fi = id_index__find(&w->fns, fid);
            if (fi < 0)
                return fail(w, 400, "location %" PRIu64 ": function id %" PRIu64 " not defined",
                            l->id, fid);
            w->loc_frames[lf++] = fi;
        }
        if (l->nlines == 0) {
            long f = ingest_work__synth_function(w, w->h, l, &w->extra_fns);
            if (f == -EOVERFLOW)
                return fail(w, 413, "the names made for locations without lines pass %zu bytes",
                            w->names_max);
            if (f < 0)
                return no_memory(w); /* a 413 past the budget */
            w->loc_frames[lf++] = f;
        }
    }
    w->loc_off[r->nlocations] = lf;
    return 0;
}

/* Each location's part of its stacks' keys (parts[i + 1]; parts[0] is
 * where an undefined id maps) and its frames as the store takes them.
 * Returns 0, or the status with w->msg: 413 a location deeper than
 * max_stack_depth or past the budget, 500. */
static int key_locations(struct ingest_work *w)
{
    const struct pprof_reader *r = &w->r;
    const struct stack_hasher *h = w->h;

    w->locations = budget__malloc(&w->mem, r->nlocations + 1, sizeof(*w->locations));
    w->parts = budget__malloc(&w->mem, r->nlocations + 1, sizeof(*w->parts));
    if (!w->locations || !w->parts)
        return no_memory(w);
    w->parts[0] = (struct loc_part){0, 0, 0, 0};
    for (size_t i = 0; i < r->nlocations; i++) {
        uint32_t n = w->loc_off[i + 1] - w->loc_off[i];
        if (n > w->lim->max_stack_depth)
            return fail(w, 413, "location %" PRIu64 ": %u inlined frames, more than %zu",
                        r->locations[i].id, n, w->lim->max_stack_depth);
        struct stack_key keys[64];
        struct stack_sum sum;
        stack_sum__init(&sum);
        for (uint32_t j = 0; j < n; j += 64) { /* in runs of 64: no location has more */
            uint32_t m = n - j < 64 ? n - j : 64;
            for (uint32_t k = 0; k < m; k++)
                keys[k] = w->functions[w->loc_frames[w->loc_off[i] + j + k]].key;
            struct stack_part part = stack_hasher__part(h, keys, m);
            stack_sum__add(&sum, h, part.a, part.b, m);
        }
        struct stack_key k = stack_sum__key(&sum);
        w->parts[i + 1] = (struct loc_part){k.a, k.b, n, 0};
        w->locations[i] = (struct store_location){w->loc_frames + w->loc_off[i], n};
    }
    return 0;
}

/* Sample i's stack: its location indices appended to w->frames (not yet
 * counted in nframes, *n of them), its key and its depth in frames. The
 * location ids are mapped as they are decoded where they are one packed
 * run of a dense table's ids (as every writer makes them), else decoded
 * first into s. Returns 0, or the status with w->msg: 400 malformed or an
 * undefined location, 413 deeper than the limits or past the budget, 500. */
static int sample_stack(struct ingest_work *w, const struct id_map *idm, size_t i,
                        struct pprof_rsample *s, struct stack_key *key, size_t *depth_out,
                        size_t *n_out)
{
    const struct pprof_reader *r = &w->r;
    size_t max_depth = w->max_depth, depth = 0;
    const uint8_t *q, *qend;

    int e = w->locs.dense ? pprof_reader__sample_packed(r, i, s, &q, &qend, w->msg, w->msglen)
                          : -EAGAIN;
    if (e == -EAGAIN) {
        struct stack_sum sum;
        stack_sum__init(&sum);
        e = pprof_reader__sample(r, i, s, w->msg, w->msglen);
        if (e == -EBADMSG)
            return 400;
        if (s->nlocation_ids > w->lim->max_stack_depth)
            return fail(w, 413, "sample %zu: deeper than %zu frames", i, w->lim->max_stack_depth);
        if (ingest_work__reserve_frames(w, s->nlocation_ids))
            return no_memory(w);
        uint32_t *out = w->frames + w->nframes;
        for (size_t j = 0; j < s->nlocation_ids; j++) {
            long li = id_index__find(&w->locs, s->location_ids[j]);
            if (li < 0)
                return fail(w, 400, "sample %zu: location id %" PRIu64 " not defined", i,
                            s->location_ids[j]);
            const struct loc_part *lp = &w->parts[li + 1];
            if (depth + lp->nframes > max_depth)
                return fail(w, 413, "sample %zu: deeper than %zu frames", i, max_depth);
            stack_sum__add(&sum, w->h, lp->a, lp->b, lp->nframes);
            depth += lp->nframes;
            out[j] = li;
        }
        *key = stack_sum__key(&sum);
        *n_out = s->nlocation_ids;
        *depth_out = depth;
        return 0;
    }
    if (e == -EBADMSG)
        return 400;
    /* At most one id a byte; map_ids writes no more than max_depth of
     * them, or than a short run's bytes. */
    size_t most = qend - q;
    if (most > max_depth + SHORT_RUN + 1)
        most = max_depth + SHORT_RUN + 1;
    if (ingest_work__reserve_frames(w, most))
        return no_memory(w);
    uint64_t bad = 0;
    long n = map_ids(idm, q, qend, w->frames + w->nframes, &depth, key, &bad);
    if (n == -EBADMSG)
        return fail(w, 400, "sample %zu: malformed protobuf", i);
    if (n == -ENOENT)
        return fail(w, 400, "sample %zu: location id %" PRIu64 " not defined", i, bad);
    if (n < 0)
        return fail(w, 413, "sample %zu: deeper than %zu frames", i, max_depth);
    *n_out = n;
    *depth_out = depth;
    return 0;
}

/* The label set of the sample before, kept: label sets repeat across
 * samples, most often from one sample to the next. */
struct last_set {
    uint32_t key[2 * MAX_LABELS];
    size_t nk; /* SIZE_MAX: none yet */
    uint32_t set;
};

/* Sample s's label set: its string labels (numeric ones are not kept, nor
 * labels past MAX_LABELS), STORE_NO_LABELS when it has none. Returns 0
 * with *set, or the status with w->msg: 400 a label longer than
 * max_label_bytes, 413 past the budget, 500. */
static int sample_labels(struct ingest_work *w, size_t i, const struct pprof_rsample *s,
                         struct last_set *last, uint32_t *set)
{
    uint32_t lkey[2 * MAX_LABELS];
    size_t nk = 0;

    for (size_t j = 0; j < s->nlabels && j < MAX_LABELS; j++) {
        if (s->labels[j].str) {
            lkey[nk++] = s->labels[j].key;
            lkey[nk++] = s->labels[j].str;
        }
    }
    *set = STORE_NO_LABELS;
    if (nk == last->nk && memcmp(lkey, last->key, nk * sizeof(*lkey)) == 0) {
        *set = last->set;
    } else if (nk) {
        uint32_t bad = 0;
        long k = ingest_work__label_set(w, lkey, nk, w->lim->max_label_bytes, &bad);
        if (k == -EBADMSG)
            return fail(w, 400, "sample %zu: label '%.64s' longer than %zu bytes", i,
                        w->r.strings[bad], w->lim->max_label_bytes);
        if (k < 0)
            return no_memory(w);
        *set = k;
    }
    memcpy(last->key, lkey, nk * sizeof(*lkey));
    last->nk = nk;
    last->set = *set;
    return 0;
}

/* Sample i's counts from its values: samples, CPU (its own value, else
 * samples x period) and off-CPU time (0 without the type), added to the
 * profile's totals, which must fit 64 bits too (the store keeps them).
 * Returns 0 or 400 with w->msg. */
static int sample_counts(struct ingest_work *w, size_t i, const int64_t *values,
                         int64_t *samples_out, int64_t *cpu_out, int64_t *off_out)
{
    int64_t samples = w->samples_idx >= 0 ? values[w->samples_idx] : 1, cpu;
    int64_t off = w->off_idx >= 0 ? values[w->off_idx] : 0;

    if (w->cpu_idx >= 0)
        cpu = values[w->cpu_idx];
    else if (__builtin_mul_overflow(samples, w->period_ns, &cpu))
        return fail(w, 400, "sample %zu: samples x period past 64 bits", i);
    if (samples < 0 || cpu < 0 || off < 0)
        return fail(w, 400, "sample %zu: negative value", i);
    if (__builtin_add_overflow(w->total_samples, samples, &w->total_samples) ||
        __builtin_add_overflow(w->total_cpu, cpu, &w->total_cpu) ||
        __builtin_add_overflow(w->total_off, off, &w->total_off))
        return fail(w, 400, "sample %zu: the profile's total samples, CPU or off-CPU past 64 bits",
                    i);
    *samples_out = samples;
    *cpu_out = cpu;
    *off_out = off;
    return 0;
}

/* Every sample read into stacks of location indices and distinct label
 * sets, identical samples (the same stack and label set) merged into one
 * stack as they are read, so a body of millions of samples of a few stacks
 * takes memory for a few. Stacks' frames and label sets' labels are
 * offsets until finish(). Returns 0, or the status with w->msg. */
static int key_samples(struct ingest_work *w)
{
    const struct pprof_reader *r = &w->r;
    const struct ingest_limits *lim = w->lim;
    int e;

    w->ls_index = hmap__new();
    w->sample_locs = budget__malloc(&w->mem, lim->max_stack_depth + 1, sizeof(*w->sample_locs));
    if (!w->ls_index || !w->sample_locs)
        return no_memory(w);
    struct id_map idm = {w->locs.dense, w->parts,       w->h->pow_a,
                         w->h->pow_b,   w->locs.max_id, w->max_depth};
    int64_t values[MAX_VALUES];
    struct pprof_rlabel labels[MAX_LABELS];
    struct pprof_rsample s = {
        w->sample_locs, 0, lim->max_stack_depth + 1, values, 0, MAX_VALUES, labels, 0, MAX_LABELS};
    struct last_set last = {.nk = SIZE_MAX, .set = STORE_NO_LABELS};
    for (size_t i = 0; i < r->nsamples; i++) {
        size_t start = w->nframes, depth = 0, n = 0;
        struct stack_key key = {0, 0};
        if ((e = sample_stack(w, &idm, i, &s, &key, &depth, &n)))
            return e;
        w->nframes += n;
        if (s.nvalues != r->nsample_types)
            return fail(w, 400, "sample %zu has %zu values for %zu sample types", i, s.nvalues,
                        r->nsample_types);
        /* labels past MAX_LABELS (the only other -E2BIG) are not kept */
        if (depth > lim->max_stack_depth)
            return fail(w, 413, "sample %zu: deeper than %zu frames", i, lim->max_stack_depth);
        uint32_t set = STORE_NO_LABELS;
        int64_t samples = 0, cpu = 0, off = 0;
        if ((e = sample_labels(w, i, &s, &last, &set)) ||
            (e = sample_counts(w, i, values, &samples, &cpu, &off)))
            return e;
        if (w->cpu_only && cpu == 0 && off == 0) { /* a wall profile's idle sample */
            w->total_samples -= samples;
            w->nframes = start;
            continue;
        }
        /* A stack seen before with the same labels takes the counts; its
         * frames just written go. */
        bool fresh = false;
        long k = ingest_work__merge_stack(w, key, set, start, &fresh);
        if (k < 0)
            return no_memory(w);
        if (!fresh)
            w->nframes = start;
        else if ((w->total_depth += depth) > lim->max_frames)
            return fail(w, 413, "sample %zu: more than %zu frames in all distinct stacks", i,
                        lim->max_frames);
        w->stacks[k].samples += samples; /* at most the totals, which fit */
        w->stacks[k].cpu_ns += cpu;
        w->stacks[k].off_cpu_ns += off;
    }
    return 0;
}

/* Frames, labels and names are final now: the offsets kept while they grew
 * made pointers into them. Cannot fail. */
static void finish(struct ingest_work *w)
{
    for (size_t i = 0; i < w->nstacks; i++) {
        size_t off = (uintptr_t)w->stacks[i].locations;
        size_t end = i + 1 < w->nstacks ? (uintptr_t)w->stacks[i + 1].locations : w->nframes;
        w->stacks[i].locations = w->frames + off;
        w->stacks[i].nlocations = end - off;
    }
    for (size_t i = 0; i < w->nsets; i++)
        w->labelsets[i].labels = w->labels + (uintptr_t)w->labelsets[i].labels;
    for (size_t i = 0; i < w->extra_fns; i++) {
        struct store_function *f = &w->functions[w->r.nfunctions + i].f;
        f->name = w->names + (uintptr_t)f->name;
    }
}

/* --- put --- */

/* The pid every sample's label set names, else 0: a profile whose samples
 * carry different pids spans processes. */
static int64_t common_pid(const struct ingest_work *w)
{
    const struct pprof_reader *r = &w->r;

    if (!w->nstacks)
        return 0;
    uint32_t set0 = w->stacks[0].labelset;
    const char *ps = set0 != STORE_NO_LABELS && w->ls_pid[set0] != UINT32_MAX
                         ? r->strings[w->ls_pid[set0]]
                         : NULL;
    bool one = ps != NULL;
    for (size_t i = 1; one && i < w->nstacks; i++) {
        uint32_t set = w->stacks[i].labelset;
        one = set != STORE_NO_LABELS && w->ls_pid[set] != UINT32_MAX &&
              strcmp(r->strings[w->ls_pid[set]], ps) == 0;
    }
    return one ? strtoll(ps, NULL, 10) : 0;
}

/* The profile in the store's terms, *sp, with its identity: each part from
 * the query string (id), else the first sample's labels; service required,
 * every identity label within text__label_problem's rules (they are
 * listed, logged and matched by value). sp points into w and id. Returns 0
 * or 400 with w->msg. */
static int identify(struct ingest_work *w, const struct ingest_identity *id, size_t len,
                    struct store_profile *sp)
{
    const struct pprof_reader *r = &w->r;
    size_t max = w->lim->max_label_bytes;
    const struct store_labelset *ls0 = w->nstacks && w->stacks[0].labelset != STORE_NO_LABELS
                                           ? &w->labelsets[w->stacks[0].labelset]
                                           : NULL;

    const char *app = id->service && *id->service ? id->service : label_in(ls0, "service");
    if (!app || !*app)
        return fail(w, 400, "no service: give ?service=NAME or a 'service' sample label");
    const char *host = id->host && *id->host ? id->host : label_in(ls0, "host");
    const char *what = "service", *why = text__label_problem(app, max);
    if (!why) {
        what = "host";
        why = text__label_problem(host, max);
    }
    if (why)
        return fail(w, 400, "%s %s (at most %zu bytes of UTF-8 without control characters)", what,
                    why, max);
    *sp = (struct store_profile){
        .app = app,
        .host = host ? host : "",
        .pid = id->pid ? id->pid : common_pid(w),
        .time_ns = r->time_nanos,
        .duration_ns = r->duration_nanos,
        .period_ns = w->period_ns,
        .functions = w->functions,
        .nfunctions = r->nfunctions + w->extra_fns,
        .locations = w->locations,
        .nlocations = r->nlocations,
        .stacks = w->stacks,
        .nstacks = w->nstacks,
        .labelsets = w->labelsets,
        .nlabelsets = w->nsets,
        .labels = id->labels,
        .nlabels = id->nlabels,
        .bytes_in = len,
    };
    /* Where the process runs: the query string, else the first sample. */
    for (int i = 0; i < STORE_N_IDENTITY; i++) {
        const char *v = id->identity[i] && *id->identity[i] ? id->identity[i]
                                                            : label_in(ls0, store_identity_keys[i]);
        if ((why = text__label_problem(v, max)))
            return fail(w, 400, "%s %s (at most %zu bytes of UTF-8 without control characters)",
                        store_identity_keys[i], why, max);
        sp->identity[i] = v;
    }
    return 0;
}

/* sp stored, what the store allocates for it counted against the budget
 * first. Returns 0, or the status with w->msg: 413 past the budget or the
 * store's own limit, 500 the store failed. */
static int put(struct ingest_work *w, struct store *st, const struct store_profile *sp)
{
    char serr[512];

    if (!budget__take(&w->mem, 1, store__put_mem(st, sp)))
        return no_memory(w);
    int pr = store__put(st, sp, serr, sizeof(serr));
    if (pr)
        return fail(w,
                    pr == -E2BIG    ? 413
                    : pr == -EAGAIN ? 503
                                    : 500,
                    "%s%s", pr == -E2BIG ? "" : "the store failed: ", serr);
    return 0;
}

int ingest__profile(struct store *st, const void *body, size_t len,
                    const struct ingest_identity *id, const struct ingest_limits *lim, char *msg,
                    size_t msglen)
{
    struct ingest_work w;
    struct store_profile sp;

    memset(&w, 0, sizeof(w));
    w.lim = lim;
    w.h = store__hasher(st);
    /* the key tables' size bounds the depth too */
    w.max_depth =
        lim->max_stack_depth < STACK_KEY_MAX_FRAMES ? lim->max_stack_depth : STACK_KEY_MAX_FRAMES;
    w.msg = msg;
    w.msglen = msglen;
    budget__init(&w.mem, lim->max_memory);
    buf__init(&w.raw,
              lim->max_decompressed < lim->max_memory ? lim->max_decompressed : lim->max_memory);
    w.cpu_only = id->cpu_only;
    int status = decode(&w, body, len);
    if (!status && !w.r.time_nanos)
        w.r.time_nanos = id->time_ns;
    if (!status && !w.r.duration_nanos)
        w.r.duration_nanos = id->duration_ns;
    if (!status)
        status = validate(&w);
    if (!status)
        status = key_functions(&w);
    if (!status)
        status = expand_locations(&w);
    if (!status)
        status = key_locations(&w);
    if (!status)
        status = key_samples(&w);
    if (!status)
        status = validate_claims(&w);
    if (!status) {
        finish(&w);
        status = identify(&w, id, len, &sp);
    }
    if (!status)
        status = put(&w, st, &sp);
    ingest_work__free(&w);
    return status ? status : 202;
}
