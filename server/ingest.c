#include "ingest.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/buf.h"
#include "../common/gz.h"
#include "../common/hmap.h"
#include "profile.pb-c.h"

typedef Perftools__Profiles__Profile Profile;

/* protobuf-c allocates each message on its own: thousands of mallocs and
 * frees a profile, a fifth of ingest's time. An arena makes them bumps of a
 * pointer and one free at the end. Its cap bounds what a hostile body
 * (empty messages unpack to ~40 times their size) can make us allocate. */
struct arena_chunk {
    struct arena_chunk *next;
    size_t size, used;
    max_align_t data[];
};

struct arena {
    struct arena_chunk *head;
    size_t total, first, cap;
    bool exhausted;
};

static void *arena_alloc(void *ad, size_t n)
{
    struct arena *a = ad;
    struct arena_chunk *c = a->head;

    n = (n + 15) & ~(size_t)15;
    if (!c || c->size - c->used < n) {
        size_t size = c ? c->size * 2 : a->first;
        if (size < n)
            size = n;
        if (size > a->cap - a->total)
            size = a->cap - a->total;
        if (size < n) {
            a->exhausted = true;
            return NULL;
        }
        c = malloc(sizeof(*c) + size);
        if (!c)
            return NULL;
        c->size = size;
        c->used = 0;
        c->next = a->head;
        a->head = c;
        a->total += size;
    }
    void *p = (char *)c->data + c->used;
    c->used += n;
    return p;
}

static void arena_free_one(void *ad, void *p)
{
    (void)ad; /* everything goes at once, in arena_free */
    (void)p;
}

static void arena_free(struct arena *a)
{
    for (struct arena_chunk *c = a->head, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    a->head = NULL;
}

/* Everything ingest allocates for one request, freed in one place. */
struct work {
    Profile *p;
    struct arena arena; /* behind p */
    struct buf raw;
    struct hmap *loc_index, *fn_index; /* pprof id -> array index */
    uint32_t *loc_by_id;               /* the same for dense location ids: index + 1 */
    uint32_t *loc_off, *loc_frames;    /* location i's function indices */
    struct hmap *ls_index;             /* a sample's (key, str) pairs -> label set */
    struct store_function *functions;
    size_t nfunctions;
    uint32_t *frames;
    size_t nframes, cap_frames;
    struct store_stack *stacks;
    struct store_labelset *labelsets;
    struct store_label *labels;
    char *names; /* names made up for locations without lines */
    size_t names_len, names_cap;
};

static void work_free(struct work *w)
{
    arena_free(&w->arena);
    buf__free(&w->raw);
    hmap__free(w->loc_index);
    hmap__free(w->fn_index);
    hmap__free(w->ls_index);
    free(w->loc_by_id);
    free(w->loc_off);
    free(w->loc_frames);
    free(w->functions);
    free(w->frames);
    free(w->stacks);
    free(w->labelsets);
    free(w->labels);
    free(w->names);
}

static const char *str_at(const Profile *p, int64_t i)
{
    return i >= 0 && (size_t)i < p->n_string_table ? p->string_table[i] : NULL;
}

/* Finds a string label's value on a sample. */
static const char *label_of(const Profile *p, const Perftools__Profiles__Sample *s, const char *key)
{
    for (size_t i = 0; i < s->n_label; i++) {
        const char *k = str_at(p, s->label[i]->key);
        if (k && strcmp(k, key) == 0)
            return str_at(p, s->label[i]->str);
    }
    return NULL;
}

static int push_frame(struct work *w, uint32_t f)
{
    if (w->nframes == w->cap_frames) {
        size_t cap = w->cap_frames ? w->cap_frames * 2 : 4096;
        uint32_t *nf = realloc(w->frames, cap * sizeof(*nf));
        if (!nf)
            return -ENOMEM;
        w->frames = nf;
        w->cap_frames = cap;
    }
    w->frames[w->nframes++] = f;
    return 0;
}

/* A name for a location pprof gives no line for: never a bare address. */
static long synth_function(struct work *w, const Profile *p,
                           const Perftools__Profiles__Location *loc, size_t *extra_fns)
{
    const char *file = "[unknown]";
    uint64_t addr = loc->address;
    char name[512];

    for (size_t i = 0; i < p->n_mapping; i++) {
        const Perftools__Profiles__Mapping *m = p->mapping[i];
        if (m->id == loc->mapping_id) {
            const char *f = str_at(p, m->filename);
            if (f && *f) {
                const char *slash = strrchr(f, '/');
                file = slash ? slash + 1 : f;
            }
            if (addr >= m->memory_start)
                addr = addr - m->memory_start + m->file_offset;
            break;
        }
    }
    int n = snprintf(name, sizeof(name), "%s+0x%" PRIx64, file, addr);
    if (n < 0 || (size_t)n >= sizeof(name))
        n = sizeof(name) - 1;
    /* Names live in one growing buffer; fix up pointers once it is done. */
    if (w->names_len + n + 1 > w->names_cap) {
        size_t cap = w->names_cap ? w->names_cap * 2 : 4096;
        while (cap < w->names_len + n + 1)
            cap *= 2;
        char *nn = realloc(w->names, cap);
        if (!nn)
            return -1;
        w->names = nn;
        w->names_cap = cap;
    }
    memcpy(w->names + w->names_len, name, n + 1);
    long idx = p->n_function + (*extra_fns)++;
    w->functions[idx] = (struct store_function){(const char *)(uintptr_t)w->names_len, ""};
    w->names_len += n + 1;
    return idx;
}

int ingest__profile(struct store *st, const void *body, size_t len,
                    const struct ingest_identity *id, const struct ingest_limits *lim, char *msg,
                    size_t msglen)
{
    struct work w;
    const uint8_t *data = body;
    size_t dlen = len;
    int status = 400;

    memset(&w, 0, sizeof(w));
    buf__init(&w.raw, lim->max_decompressed);
    if (gz__is_gzip(body, len)) {
        int r = gz__decompress(body, len, &w.raw, lim->max_ratio);
        if (r == -E2BIG) {
            snprintf(msg, msglen,
                     "the body inflates past the limit (%zu bytes, or %zu times its size)",
                     lim->max_decompressed, lim->max_ratio);
            status = 413;
            goto out;
        }
        if (r) {
            snprintf(msg, msglen, "the body is not a whole gzip stream");
            goto out;
        }
        data = (const uint8_t *)w.raw.data;
        dlen = w.raw.len;
    }
    /* Unpacked, a real profile is 2-15 times its encoded size (tiny
     * messages like labels and lines are the most); beyond 32 it is built
     * to make us allocate, and at most 4 times the decompression cap. */
    w.arena.first = dlen * 3 + 65536;
    w.arena.cap = dlen * 32 + (1u << 20);
    if (w.arena.cap > lim->max_decompressed * 4)
        w.arena.cap = lim->max_decompressed * 4;
    ProtobufCAllocator pa = {arena_alloc, arena_free_one, &w.arena};
    w.p = perftools__profiles__profile__unpack(&pa, dlen, data);
    if (!w.p && w.arena.exhausted) {
        snprintf(msg, msglen, "the profile decodes past the memory limit (%zu bytes)", w.arena.cap);
        status = 413;
        goto out;
    }
    if (!w.p) {
        snprintf(msg, msglen, "the body is not a pprof profile (profile.proto did not decode)");
        goto out;
    }
    Profile *p = w.p;

    /* --- the checks pprof itself makes, and ours --- */
    if (p->n_string_table == 0 || p->string_table[0][0] != '\0') {
        snprintf(msg, msglen, "string_table must start with \"\"");
        goto out;
    }
    if (p->n_sample_type == 0) {
        snprintf(msg, msglen, "no sample_type");
        goto out;
    }
    if (p->n_sample > lim->max_samples) {
        snprintf(msg, msglen, "%zu samples: more than the limit of %zu", p->n_sample,
                 lim->max_samples);
        status = 413;
        goto out;
    }
    int samples_idx = -1, cpu_idx = -1;
    for (size_t i = 0; i < p->n_sample_type; i++) {
        const char *t = str_at(p, p->sample_type[i]->type);
        const char *u = str_at(p, p->sample_type[i]->unit);
        if (!t || !u) {
            snprintf(msg, msglen, "sample_type %zu: string index out of range", i);
            goto out;
        }
        if (strcmp(t, "samples") == 0 && samples_idx < 0)
            samples_idx = i;
        if (strcmp(t, "cpu") == 0 && strcmp(u, "nanoseconds") == 0 && cpu_idx < 0)
            cpu_idx = i;
    }
    if (samples_idx < 0)
        samples_idx = 0;
    const char *ptu = p->period_type ? str_at(p, p->period_type->unit) : NULL;
    if (p->period_type && (!ptu || !str_at(p, p->period_type->type))) {
        snprintf(msg, msglen, "period_type: string index out of range");
        goto out;
    }
    int64_t period_ns = ptu && strcmp(ptu, "nanoseconds") == 0 ? p->period : 0;

    w.fn_index = hmap__new();
    w.loc_index = hmap__new();
    /* Room for every pprof function and one made-up name per location. */
    w.functions = calloc(p->n_function + p->n_location + 1, sizeof(*w.functions));
    if (!w.fn_index || !w.loc_index || !w.functions)
        goto oom;
    for (size_t i = 0; i < p->n_function; i++) {
        const Perftools__Profiles__Function *f = p->function[i];
        const char *name = str_at(p, f->name), *file = str_at(p, f->filename);
        bool fresh;
        if (!name || !file || !str_at(p, f->system_name)) {
            snprintf(msg, msglen, "function %" PRIu64 ": string index out of range", f->id);
            goto out;
        }
        if (f->id == 0) {
            snprintf(msg, msglen, "function with id 0");
            goto out;
        }
        long k = hmap__put(w.fn_index, &f->id, sizeof(f->id), &fresh);
        if (k < 0)
            goto oom;
        if (!fresh) {
            snprintf(msg, msglen, "function id %" PRIu64 " appears twice", f->id);
            goto out;
        }
        *hmap__val(w.fn_index, k) = i;
        w.functions[i] = (struct store_function){name, file};
    }
    /* --- locations: each expanded once into function indices --- */
    size_t extra_fns = 0, nloc_frames = 0;
    uint64_t max_loc_id = 0;
    for (size_t i = 0; i < p->n_location; i++) {
        nloc_frames += p->location[i]->n_line ? p->location[i]->n_line : 1;
        if (p->location[i]->id > max_loc_id)
            max_loc_id = p->location[i]->id;
    }
    w.loc_off = calloc(p->n_location + 1, sizeof(*w.loc_off));
    w.loc_frames = calloc(nloc_frames + 1, sizeof(*w.loc_frames));
    /* pprof ids are nearly always 1..n: index them directly when dense. */
    bool dense = max_loc_id <= 4 * (uint64_t)p->n_location + 1024;
    if (dense)
        w.loc_by_id = calloc(max_loc_id + 1, sizeof(*w.loc_by_id));
    if (!w.loc_off || !w.loc_frames || (dense && !w.loc_by_id))
        goto oom;
    size_t lf = 0;
    for (size_t i = 0; i < p->n_location; i++) {
        const Perftools__Profiles__Location *l = p->location[i];
        bool fresh;
        if (l->id == 0) {
            snprintf(msg, msglen, "location with id 0");
            goto out;
        }
        if (dense) {
            fresh = w.loc_by_id[l->id] == 0;
            w.loc_by_id[l->id] = i + 1;
        } else {
            long k = hmap__put(w.loc_index, &l->id, sizeof(l->id), &fresh);
            if (k < 0)
                goto oom;
            *hmap__val(w.loc_index, k) = i;
        }
        if (!fresh) {
            snprintf(msg, msglen, "location id %" PRIu64 " appears twice", l->id);
            goto out;
        }
        w.loc_off[i] = lf;
        /* pprof: a location's lines go innermost (inlined) first. */
        for (size_t j = 0; j < l->n_line; j++) {
            long fk = hmap__find(w.fn_index, &l->line[j]->function_id, sizeof(uint64_t));
            if (fk < 0) {
                snprintf(msg, msglen, "location %" PRIu64 ": function id %" PRIu64 " not defined",
                         l->id, l->line[j]->function_id);
                goto out;
            }
            w.loc_frames[lf++] = *hmap__val(w.fn_index, fk);
        }
        if (l->n_line == 0) {
            long f = synth_function(&w, p, l, &extra_fns);
            if (f < 0)
                goto oom;
            w.loc_frames[lf++] = f;
        }
    }
    w.loc_off[p->n_location] = lf;

    /* --- samples -> stacks of function indices, and distinct label sets --- */
    size_t nlabels = 0;
    for (size_t i = 0; i < p->n_sample; i++)
        nlabels += p->sample[i]->n_label;
    w.stacks = calloc(p->n_sample + 1, sizeof(*w.stacks));
    w.labelsets = calloc(p->n_sample + 1, sizeof(*w.labelsets));
    w.labels = calloc(nlabels + 1, sizeof(*w.labels));
    w.ls_index = hmap__new();
    size_t *frame_off = calloc(p->n_sample + 1, sizeof(*frame_off));
    if (!w.stacks || !w.labelsets || !w.labels || !w.ls_index || !frame_off) {
        free(frame_off);
        goto oom;
    }
    size_t li = 0, nsets = 0;
    int64_t lkey[2 * 64];
    for (size_t i = 0; i < p->n_sample; i++) {
        const Perftools__Profiles__Sample *s = p->sample[i];
        if (s->n_value != p->n_sample_type) {
            snprintf(msg, msglen, "sample %zu has %zu values for %zu sample types", i, s->n_value,
                     p->n_sample_type);
            goto bad_sample;
        }
        frame_off[i] = w.nframes;
        for (size_t j = 0; j < s->n_location_id; j++) {
            uint64_t id = s->location_id[j];
            if (w.nframes - frame_off[i] > lim->max_stack_depth || w.nframes > lim->max_frames) {
                snprintf(msg, msglen, "sample %zu: deeper than %zu frames, or more than %zu in all",
                         i, lim->max_stack_depth, lim->max_frames);
                status = 413;
                goto bad_sample;
            }
            long idx = -1;
            if (dense) {
                if (id <= max_loc_id && w.loc_by_id[id])
                    idx = w.loc_by_id[id] - 1;
            } else {
                long k = hmap__find(w.loc_index, &id, sizeof(id));
                if (k >= 0)
                    idx = *hmap__val(w.loc_index, k);
            }
            if (idx < 0) {
                snprintf(msg, msglen, "sample %zu: location id %" PRIu64 " not defined", i, id);
                goto bad_sample;
            }
            for (uint32_t f = w.loc_off[idx]; f < w.loc_off[idx + 1]; f++) {
                if (push_frame(&w, w.loc_frames[f]))
                    goto oom_sample;
            }
        }
        /* Label sets repeat across samples: keep each distinct one once. */
        size_t nk = 0;
        for (size_t j = 0; j < s->n_label; j++) {
            const Perftools__Profiles__Label *l = s->label[j];
            if (!str_at(p, l->key) || (l->str && !str_at(p, l->str))) {
                snprintf(msg, msglen, "sample %zu: label string index out of range", i);
                goto bad_sample;
            }
            if (l->str && nk < 128) { /* numeric labels are not kept (yet) */
                lkey[nk++] = l->key;
                lkey[nk++] = l->str;
            }
        }
        uint32_t set = STORE_NO_LABELS;
        if (nk) {
            bool fresh;
            long k = hmap__put(w.ls_index, lkey, nk * sizeof(int64_t), &fresh);
            if (k < 0)
                goto oom_sample;
            if (fresh) {
                w.labelsets[nsets].labels = w.labels + li;
                w.labelsets[nsets].n = 0;
                for (size_t j = 0; j < nk; j += 2) {
                    const char *kk = str_at(p, lkey[j]), *v = str_at(p, lkey[j + 1]);
                    if (strlen(kk) > lim->max_label_bytes || strlen(v) > lim->max_label_bytes) {
                        snprintf(msg, msglen, "sample %zu: label '%.64s' longer than %zu bytes", i,
                                 kk, lim->max_label_bytes);
                        goto bad_sample;
                    }
                    w.labels[li++] = (struct store_label){kk, v};
                    w.labelsets[nsets].n++;
                }
                *hmap__val(w.ls_index, k) = nsets++;
            }
            set = *hmap__val(w.ls_index, k);
        }
        int64_t samples = s->value[samples_idx];
        int64_t cpu = cpu_idx >= 0 ? s->value[cpu_idx] : samples * period_ns;
        if (samples < 0 || cpu < 0) {
            snprintf(msg, msglen, "sample %zu: negative value", i);
            goto bad_sample;
        }
        if (w.nframes - frame_off[i] > lim->max_stack_depth) {
            snprintf(msg, msglen, "sample %zu: deeper than %zu frames", i, lim->max_stack_depth);
            status = 413;
            goto bad_sample;
        }
        w.stacks[i] = (struct store_stack){NULL, 0, set, samples, cpu};
    }
    /* frames and names are final now: point into them */
    for (size_t i = 0; i < p->n_sample; i++) {
        size_t end = i + 1 < p->n_sample ? frame_off[i + 1] : w.nframes;
        w.stacks[i].frames = w.frames + frame_off[i];
        w.stacks[i].nframes = end - frame_off[i];
    }
    for (size_t i = 0; i < extra_fns; i++) {
        struct store_function *f = &w.functions[p->n_function + i];
        f->name = w.names + (uintptr_t)f->name;
    }
    free(frame_off);

    /* --- identity: the query string, else the first sample's labels --- */
    const Perftools__Profiles__Sample *s0 = p->n_sample ? p->sample[0] : NULL;
    const char *app = id->service && *id->service ? id->service
                      : s0                        ? label_of(p, s0, "service")
                                                  : NULL;
    if (!app || !*app) {
        snprintf(msg, msglen, "no service: give ?service=NAME or a 'service' sample label");
        goto out;
    }
    if (strlen(app) > lim->max_label_bytes) {
        snprintf(msg, msglen, "service longer than %zu bytes", lim->max_label_bytes);
        goto out;
    }
    const char *host = id->host && *id->host ? id->host : s0 ? label_of(p, s0, "host") : NULL;
    int64_t pid = id->pid;
    if (!pid && s0) {
        const char *ps = label_of(p, s0, "pid");
        /* A profile whose samples carry different pids spans processes. */
        bool one = ps != NULL;
        for (size_t i = 1; one && i < p->n_sample; i++) {
            const char *o = label_of(p, p->sample[i], "pid");
            one = o && strcmp(o, ps) == 0;
        }
        if (one)
            pid = strtoll(ps, NULL, 10);
    }
    struct store_profile sp = {
        .app = app,
        .host = host ? host : "",
        .pid = pid,
        .time_ns = p->time_nanos,
        .duration_ns = p->duration_nanos,
        .period_ns = period_ns,
        .functions = w.functions,
        .nfunctions = p->n_function + extra_fns,
        .stacks = w.stacks,
        .nstacks = p->n_sample,
        .labelsets = w.labelsets,
        .nlabelsets = nsets,
        .bytes_in = len,
    };
    /* Where the process runs: the query string, else the first sample. */
    for (int i = 0; i < STORE_N_IDENTITY; i++) {
        const char *v = id->identity[i] && *id->identity[i] ? id->identity[i]
                        : s0 ? label_of(p, s0, store_identity_keys[i])
                             : NULL;
        if (v && strlen(v) > lim->max_label_bytes) {
            snprintf(msg, msglen, "%s longer than %zu bytes", store_identity_keys[i],
                     lim->max_label_bytes);
            goto out;
        }
        for (const char *c = v; c && *c; c++) {
            if ((unsigned char)*c < 0x20) {
                snprintf(msg, msglen, "%s holds a control character", store_identity_keys[i]);
                goto out;
            }
        }
        sp.identity[i] = v;
    }
    char serr[512];
    int pr = store__put(st, &sp, serr, sizeof(serr));
    if (pr) {
        snprintf(msg, msglen, "%s%s", pr == -E2BIG ? "" : "the store failed: ", serr);
        status = pr == -E2BIG ? 413 : 500;
        goto out;
    }
    status = 202;
    goto out;
bad_sample:
    free(frame_off);
    goto out;
oom_sample:
    free(frame_off);
oom:
    snprintf(msg, msglen, "out of memory");
    status = 500;
out:
    work_free(&w);
    return status;
}
