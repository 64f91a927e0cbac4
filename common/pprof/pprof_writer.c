#include "pprof_writer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../gz.h"
#include "../hmap.h"
#include "profile.pb-c.h"

/* Each kind of record is kept flat: interned through an hmap whose key is the
 * record itself (so its index is its id - 1), and unpacked at encode time. */
struct func_key {
    int64_t name, system_name, file, start_line;
};

struct mapping_key {
    uint64_t start, limit, offset;
    int64_t file, build_id;
    uint32_t flags;
    uint32_t pad;
};

/* A location key is a loc_head followed by n line_keys. */
struct loc_head {
    uint64_t mapping_id, address;
    uint64_t n;
};
struct line_key {
    uint64_t function_id;
    int64_t line;
};

struct sample_rec {
    size_t loc_off, nloc; /* into w->loc_ids */
    size_t val_off;       /* into w->values, nvalues long */
    size_t lab_off, nlab; /* into w->labels */
};

struct label_rec {
    int64_t key, str, num, num_unit;
};

/* Everything the protobuf-c message points at, kept by the writer from one
 * encode to the next (each array with its capacity, in elements; packed
 * and sbuf in bytes), freed in one place. */
struct encode_mem {
    Perftools__Profiles__ValueType *vt, **vtp, period_type;
    Perftools__Profiles__Sample *s, **sp;
    Perftools__Profiles__Label *l, **lp;
    Perftools__Profiles__Mapping *m, **mp;
    Perftools__Profiles__Location *loc, **locp;
    Perftools__Profiles__Line *line, **linep;
    Perftools__Profiles__Function *f, **fp;
    char **strings;
    unsigned char *packed;
    char *sbuf; /* the string table's text, NUL-terminated strings */
    size_t cap_vt, cap_s, cap_l, cap_m, cap_loc, cap_line, cap_f, cap_strings, cap_packed, cap_sbuf;
};

static void encode_mem_free(struct encode_mem *e)
{
    free(e->vt);
    free(e->vtp);
    free(e->s);
    free(e->sp);
    free(e->l);
    free(e->lp);
    free(e->m);
    free(e->mp);
    free(e->loc);
    free(e->locp);
    free(e->line);
    free(e->linep);
    free(e->f);
    free(e->fp);
    free(e->strings);
    free(e->packed);
    free(e->sbuf);
    memset(e, 0, sizeof(*e));
}

struct pprof_writer {
    struct hmap *strings, *functions, *mappings, *locations;
    int64_t sample_types[8][2];
    size_t nsample_types;
    int64_t period_type[2];
    int64_t period, time_nanos, duration_nanos, default_type;
    int64_t *comments;
    size_t ncomments;

    struct sample_rec *samples;
    size_t nsamples, cap_samples;
    uint64_t *loc_ids;
    size_t nloc_ids, cap_loc_ids;
    int64_t *values;
    size_t nvalues_total, cap_values;
    struct label_rec *labels;
    size_t nlabels, cap_labels;

    bool failed; /* an earlier call ran out of memory */
    struct encode_mem enc;
};

/* Grows *arr to hold `need` elements of `size`. */
static int reserve(void **arr, size_t *cap, size_t need, size_t size)
{
    size_t c = *cap ? *cap : 64;
    void *p;

    if (need <= *cap)
        return 0;
    while (c < need)
        c *= 2;
    p = realloc(*arr, c * size);
    if (!p)
        return -ENOMEM;
    *arr = p;
    *cap = c;
    return 0;
}

static int64_t str_id(struct pprof_writer *w, const char *s)
{
    long idx;

    if (!s)
        s = "";
    idx = hmap__put(w->strings, s, strlen(s), NULL);
    if (idx < 0)
        w->failed = true;
    return idx < 0 ? 0 : idx;
}

struct pprof_writer *pprof_writer__new(void)
{
    struct pprof_writer *w = calloc(1, sizeof(*w));

    if (!w)
        return NULL;
    w->strings = hmap__new();
    w->functions = hmap__new();
    w->mappings = hmap__new();
    w->locations = hmap__new();
    if (!w->strings || !w->functions || !w->mappings || !w->locations) {
        pprof_writer__free(w);
        return NULL;
    }
    str_id(w, ""); /* the string table starts with "" */
    return w;
}

void pprof_writer__free(struct pprof_writer *w)
{
    if (!w)
        return;
    hmap__free(w->strings);
    hmap__free(w->functions);
    hmap__free(w->mappings);
    hmap__free(w->locations);
    free(w->comments);
    free(w->samples);
    free(w->loc_ids);
    free(w->values);
    free(w->labels);
    encode_mem_free(&w->enc);
    free(w);
}

/* What pprof_writer__reset keeps of a writer's arrays, in elements: past
 * it (one large profile), they are freed and grow again from nothing. */
#define RESET_KEEP 4096

void pprof_writer__reset(struct pprof_writer *w)
{
    hmap__clear(w->strings);
    hmap__clear(w->functions);
    hmap__clear(w->mappings);
    hmap__clear(w->locations);
    memset(w->sample_types, 0, sizeof(w->sample_types));
    w->nsample_types = 0;
    memset(w->period_type, 0, sizeof(w->period_type));
    w->period = w->time_nanos = w->duration_nanos = w->default_type = 0;
    free(w->comments); /* never kept: reserve takes its count for its capacity */
    w->comments = NULL;
    w->ncomments = 0;
    if (w->cap_samples > RESET_KEEP || w->cap_loc_ids > 16 * RESET_KEEP ||
        w->cap_labels > 16 * RESET_KEEP) {
        free(w->samples);
        free(w->loc_ids);
        free(w->values);
        free(w->labels);
        w->samples = NULL;
        w->loc_ids = NULL;
        w->values = NULL;
        w->labels = NULL;
        w->cap_samples = w->cap_loc_ids = w->cap_values = w->cap_labels = 0;
    }
    w->nsamples = w->nloc_ids = w->nvalues_total = w->nlabels = 0;
    if (w->enc.cap_s > RESET_KEEP || w->enc.cap_loc > RESET_KEEP || w->enc.cap_line > RESET_KEEP ||
        w->enc.cap_f > RESET_KEEP || w->enc.cap_strings > RESET_KEEP ||
        w->enc.cap_l > 16 * RESET_KEEP || w->enc.cap_packed > 64 * RESET_KEEP ||
        w->enc.cap_sbuf > 64 * RESET_KEEP)
        encode_mem_free(&w->enc);
    w->failed = false;
    str_id(w, ""); /* the string table starts with "" */
}

int pprof_writer__add_sample_type(struct pprof_writer *w, const char *type, const char *unit)
{
    if (w->nsample_types == sizeof(w->sample_types) / sizeof(w->sample_types[0]) || w->nsamples > 0)
        return -EINVAL;
    w->sample_types[w->nsample_types][0] = str_id(w, type);
    w->sample_types[w->nsample_types][1] = str_id(w, unit);
    w->nsample_types++;
    return w->failed ? -ENOMEM : 0;
}

void pprof_writer__set_period(struct pprof_writer *w, const char *type, const char *unit,
                              int64_t period)
{
    w->period_type[0] = str_id(w, type);
    w->period_type[1] = str_id(w, unit);
    w->period = period;
}

void pprof_writer__set_time(struct pprof_writer *w, int64_t time_nanos, int64_t duration_nanos)
{
    w->time_nanos = time_nanos;
    w->duration_nanos = duration_nanos;
}

void pprof_writer__set_default_type(struct pprof_writer *w, const char *type)
{
    w->default_type = str_id(w, type);
}

int pprof_writer__add_comment(struct pprof_writer *w, const char *comment)
{
    size_t cap = w->ncomments;
    int64_t id = str_id(w, comment);

    if (w->failed || reserve((void **)&w->comments, &cap, w->ncomments + 1, sizeof(int64_t))) {
        w->failed = true;
        return -ENOMEM;
    }
    w->comments[w->ncomments++] = id;
    return 0;
}

uint64_t pprof_writer__mapping(struct pprof_writer *w, const struct pprof_mapping_info *m)
{
    struct mapping_key k;
    long idx;

    memset(&k, 0, sizeof(k));
    k.start = m->start;
    k.limit = m->limit;
    k.offset = m->offset;
    k.file = str_id(w, m->file);
    k.build_id = str_id(w, m->build_id);
    k.flags = m->has_functions | m->has_filenames << 1 | m->has_line_numbers << 2 |
              m->has_inline_frames << 3;
    if (w->failed)
        return 0;
    idx = hmap__put(w->mappings, &k, sizeof(k), NULL);
    if (idx < 0) {
        w->failed = true;
        return 0;
    }
    return idx + 1;
}

static uint64_t function_id(struct pprof_writer *w, const struct pprof_line *l)
{
    struct func_key k;
    long idx;

    k.name = str_id(w, l->function);
    k.system_name = l->system_name ? str_id(w, l->system_name) : k.name;
    k.file = str_id(w, l->file);
    k.start_line = l->start_line;
    if (w->failed)
        return 0;
    idx = hmap__put(w->functions, &k, sizeof(k), NULL);
    if (idx < 0) {
        w->failed = true;
        return 0;
    }
    return idx + 1;
}

uint64_t pprof_writer__location(struct pprof_writer *w, uint64_t mapping_id, uint64_t address,
                                const struct pprof_line *lines, size_t n)
{
    struct {
        struct loc_head h;
        struct line_key l[64];
    } k;
    long idx;

    if (n > 64)
        n = 64; /* deeper inlining than this is not seen in practice */
    memset(&k, 0, sizeof(k.h) + n * sizeof(k.l[0]));
    k.h.mapping_id = mapping_id;
    k.h.address = address;
    k.h.n = n;
    for (size_t i = 0; i < n; i++) {
        k.l[i].function_id = function_id(w, &lines[i]);
        k.l[i].line = lines[i].line;
    }
    if (w->failed)
        return 0;
    idx = hmap__put(w->locations, &k, sizeof(k.h) + n * sizeof(k.l[0]), NULL);
    if (idx < 0) {
        w->failed = true;
        return 0;
    }
    return idx + 1;
}

int pprof_writer__add_sample(struct pprof_writer *w, const uint64_t *locations, size_t nloc,
                             const int64_t *values, const struct pprof_label *labels,
                             size_t nlabels)
{
    size_t nv = w->nsample_types;
    struct sample_rec *s;

    if (w->failed)
        return -ENOMEM;
    if (reserve((void **)&w->samples, &w->cap_samples, w->nsamples + 1, sizeof(*w->samples)) ||
        reserve((void **)&w->loc_ids, &w->cap_loc_ids, w->nloc_ids + nloc, sizeof(uint64_t)) ||
        reserve((void **)&w->values, &w->cap_values, w->nvalues_total + nv, sizeof(int64_t)) ||
        reserve((void **)&w->labels, &w->cap_labels, w->nlabels + nlabels, sizeof(*w->labels))) {
        w->failed = true;
        return -ENOMEM;
    }
    s = &w->samples[w->nsamples];
    s->loc_off = w->nloc_ids;
    s->nloc = nloc;
    s->val_off = w->nvalues_total;
    s->lab_off = w->nlabels;
    s->nlab = nlabels;
    /* A sample may have no locations (and a writer no sample types yet):
     * the arrays may still be NULL, and NULL + 0 is undefined in C. */
    if (nloc)
        memcpy(w->loc_ids + w->nloc_ids, locations, nloc * sizeof(uint64_t));
    if (nv)
        memcpy(w->values + w->nvalues_total, values, nv * sizeof(int64_t));
    for (size_t i = 0; i < nlabels; i++) {
        struct label_rec *l = &w->labels[w->nlabels + i];
        l->key = str_id(w, labels[i].key);
        l->str = labels[i].str ? str_id(w, labels[i].str) : 0;
        l->num = labels[i].str ? 0 : labels[i].num;
        l->num_unit = labels[i].num_unit ? str_id(w, labels[i].num_unit) : 0;
    }
    if (w->failed)
        return -ENOMEM;
    w->nloc_ids += nloc;
    w->nvalues_total += nv;
    w->nlabels += nlabels;
    w->nsamples++;
    return 0;
}

size_t pprof_writer__sample_count(const struct pprof_writer *w)
{
    return w->nsamples;
}

/* Grows the pair of arrays *a (elements of size) and *ap (pointers to
 * them) to hold n + 1 each (+1: an empty table still has an array). */
static int reserve_pair(void **a, void **ap, size_t *cap, size_t n, size_t size)
{
    size_t c = *cap;

    if (reserve(a, &c, n + 1, size))
        return -ENOMEM;
    if (reserve(ap, cap, n + 1, sizeof(void *)))
        return -ENOMEM; /* *a grew: kept, its capacity counted at the next try */
    return 0;
}

/* The arrays the message points at, sized for w (nloc locations holding
 * nlines lines in all), grown from the last encode's: 0, or -ENOMEM (what
 * was had stays in e, freed with the writer). Their elements are set
 * (each message's init) by whoever fills them, not here. */
static int encode_alloc(const struct pprof_writer *w, struct encode_mem *e, size_t nlines)
{
    size_t nstr = hmap__len(w->strings), nfun = hmap__len(w->functions);
    size_t nmap = hmap__len(w->mappings), nloc = hmap__len(w->locations);

    if (reserve_pair((void **)&e->vt, (void **)&e->vtp, &e->cap_vt, w->nsample_types,
                     sizeof(*e->vt)) ||
        reserve_pair((void **)&e->s, (void **)&e->sp, &e->cap_s, w->nsamples, sizeof(*e->s)) ||
        reserve_pair((void **)&e->l, (void **)&e->lp, &e->cap_l, w->nlabels, sizeof(*e->l)) ||
        reserve_pair((void **)&e->m, (void **)&e->mp, &e->cap_m, nmap, sizeof(*e->m)) ||
        reserve_pair((void **)&e->loc, (void **)&e->locp, &e->cap_loc, nloc, sizeof(*e->loc)) ||
        reserve_pair((void **)&e->line, (void **)&e->linep, &e->cap_line, nlines,
                     sizeof(*e->line)) ||
        reserve_pair((void **)&e->f, (void **)&e->fp, &e->cap_f, nfun, sizeof(*e->f)) ||
        reserve((void **)&e->strings, &e->cap_strings, nstr + 1, sizeof(*e->strings)))
        return -ENOMEM;
    return 0;
}

/* The sample types, labels and samples of w into p, in e's arrays (which
 * encode_alloc sized). Cannot fail. */
static void encode_samples(const struct pprof_writer *w, struct encode_mem *e,
                           Perftools__Profiles__Profile *p)
{
    for (size_t i = 0; i < w->nsample_types; i++) {
        perftools__profiles__value_type__init(&e->vt[i]);
        e->vt[i].type = w->sample_types[i][0];
        e->vt[i].unit = w->sample_types[i][1];
        e->vtp[i] = &e->vt[i];
    }
    p->n_sample_type = w->nsample_types;
    p->sample_type = e->vtp;

    for (size_t i = 0; i < w->nlabels; i++) {
        perftools__profiles__label__init(&e->l[i]);
        e->l[i].key = w->labels[i].key;
        e->l[i].str = w->labels[i].str;
        e->l[i].num = w->labels[i].num;
        e->l[i].num_unit = w->labels[i].num_unit;
        e->lp[i] = &e->l[i];
    }
    for (size_t i = 0; i < w->nsamples; i++) {
        const struct sample_rec *r = &w->samples[i];
        perftools__profiles__sample__init(&e->s[i]);
        /* Empty parts point nowhere: their arrays may be NULL (no sample
         * has locations, or labels), and NULL + 0 is undefined. */
        e->s[i].n_location_id = r->nloc;
        e->s[i].location_id = r->nloc ? w->loc_ids + r->loc_off : NULL;
        e->s[i].n_value = w->nsample_types;
        e->s[i].value = w->nsample_types ? w->values + r->val_off : NULL;
        e->s[i].n_label = r->nlab;
        e->s[i].label = r->nlab ? e->lp + r->lab_off : NULL;
        e->sp[i] = &e->s[i];
    }
    p->n_sample = w->nsamples;
    p->sample = e->sp;
}

/* The mappings, locations (with their lines) and functions of w into p, in
 * e's arrays (which encode_alloc sized). Cannot fail. */
static void encode_tables(const struct pprof_writer *w, struct encode_mem *e,
                          Perftools__Profiles__Profile *p)
{
    size_t nfun = hmap__len(w->functions);
    size_t nmap = hmap__len(w->mappings), nloc = hmap__len(w->locations);

    for (size_t i = 0; i < nmap; i++) {
        const struct mapping_key *k = hmap__key(w->mappings, i, NULL);
        perftools__profiles__mapping__init(&e->m[i]);
        e->m[i].id = i + 1;
        e->m[i].memory_start = k->start;
        e->m[i].memory_limit = k->limit;
        e->m[i].file_offset = k->offset;
        e->m[i].filename = k->file;
        e->m[i].build_id = k->build_id;
        e->m[i].has_functions = k->flags & 1;
        e->m[i].has_filenames = !!(k->flags & 2);
        e->m[i].has_line_numbers = !!(k->flags & 4);
        e->m[i].has_inline_frames = !!(k->flags & 8);
        e->mp[i] = &e->m[i];
    }
    p->n_mapping = nmap;
    p->mapping = e->mp;

    size_t li = 0;
    for (size_t i = 0; i < nloc; i++) {
        const struct loc_head *h = hmap__key(w->locations, i, NULL);
        const struct line_key *lk = (const struct line_key *)(h + 1);
        perftools__profiles__location__init(&e->loc[i]);
        e->loc[i].id = i + 1;
        e->loc[i].mapping_id = h->mapping_id;
        e->loc[i].address = h->address;
        e->loc[i].n_line = h->n;
        e->loc[i].line = e->linep + li;
        for (size_t j = 0; j < h->n; j++, li++) {
            perftools__profiles__line__init(&e->line[li]);
            e->line[li].function_id = lk[j].function_id;
            e->line[li].line = lk[j].line;
            e->linep[li] = &e->line[li];
        }
        e->locp[i] = &e->loc[i];
    }
    p->n_location = nloc;
    p->location = e->locp;

    for (size_t i = 0; i < nfun; i++) {
        const struct func_key *k = hmap__key(w->functions, i, NULL);
        perftools__profiles__function__init(&e->f[i]);
        e->f[i].id = i + 1;
        e->f[i].name = k->name;
        e->f[i].system_name = k->system_name;
        e->f[i].filename = k->file;
        e->f[i].start_line = k->start_line;
        e->fp[i] = &e->f[i];
    }
    p->n_function = nfun;
    p->function = e->fp;
}

/* The string table of w into p: the strings copied out NUL-terminated into
 * one block, e->sbuf. 0, or -ENOMEM (p untouched). */
static int encode_strings(const struct pprof_writer *w, struct encode_mem *e,
                          Perftools__Profiles__Profile *p)
{
    size_t nstr = hmap__len(w->strings);

    /* Keys are stored without a NUL; copy them out terminated. */
    size_t total = 0;
    for (size_t i = 0; i < nstr; i++) {
        size_t len;
        hmap__key(w->strings, i, &len);
        total += len + 1;
    }
    if (reserve((void **)&e->sbuf, &e->cap_sbuf, total + 1, 1))
        return -ENOMEM;
    char *q = e->sbuf;
    for (size_t i = 0; i < nstr; i++) {
        size_t len;
        const char *k = hmap__key(w->strings, i, &len);
        memcpy(q, k, len);
        q[len] = '\0';
        e->strings[i] = q;
        q += len + 1;
    }
    p->n_string_table = nstr;
    p->string_table = e->strings;
    return 0;
}

static int encode(struct pprof_writer *w, struct buf *out, bool gzip, struct gz_deflater *gz)
{
    Perftools__Profiles__Profile p = PERFTOOLS__PROFILES__PROFILE__INIT;
    struct encode_mem *e = &w->enc;
    size_t nloc = hmap__len(w->locations), nlines = 0;
    int err;

    if (w->failed)
        return -ENOMEM;
    for (size_t i = 0; i < nloc; i++)
        nlines += ((const struct loc_head *)hmap__key(w->locations, i, NULL))->n;

    if (encode_alloc(w, e, nlines))
        return -ENOMEM;
    encode_samples(w, e, &p);
    encode_tables(w, e, &p);
    if (encode_strings(w, e, &p))
        return -ENOMEM;

    perftools__profiles__value_type__init(&e->period_type);
    e->period_type.type = w->period_type[0];
    e->period_type.unit = w->period_type[1];
    p.period_type = &e->period_type;
    p.period = w->period;
    p.default_sample_type = w->default_type;
    p.time_nanos = w->time_nanos;
    p.duration_nanos = w->duration_nanos;
    p.n_comment = w->ncomments;
    p.comment = w->comments;

    size_t size = perftools__profiles__profile__get_packed_size(&p);
    if (!gz && !gzip) {
        /* Packed straight into out: no copy. */
        if ((err = buf__reserve(out, size)))
            return err;
        perftools__profiles__profile__pack(&p, (uint8_t *)out->data + out->len);
        out->len += size;
        out->data[out->len] = '\0';
        return 0;
    }
    if (reserve((void **)&e->packed, &e->cap_packed, size + 1, 1))
        return -ENOMEM;
    perftools__profiles__profile__pack(&p, e->packed);
    if (gz)
        return gz_deflater__compress(gz, e->packed, size, out);
    return gz__compress(e->packed, size, out);
}

int pprof_writer__encode(struct pprof_writer *w, struct buf *out, bool gzip)
{
    return encode(w, out, gzip, NULL);
}

int pprof_writer__encode_with(struct pprof_writer *w, struct buf *out, struct gz_deflater *gz)
{
    return encode(w, out, true, gz);
}
