#include "pprof_reader.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* profile.proto's field numbers. */
enum {
    F_SAMPLE_TYPE = 1,
    F_SAMPLE = 2,
    F_MAPPING = 3,
    F_LOCATION = 4,
    F_FUNCTION = 5,
    F_STRING_TABLE = 6,
    F_TIME_NANOS = 9,
    F_DURATION_NANOS = 10,
    F_PERIOD_TYPE = 11,
    F_PERIOD = 12,
    F_DEFAULT_SAMPLE_TYPE = 14,
};

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

/* A string index that does not fit 32 bits: never < nstrings. */
#define BAD_INDEX UINT32_MAX

struct span {
    const uint8_t *p;
    size_t len;
};

/* Every allocation the reader makes, counted against the caller's cap. No
 * array per sample: a body of millions of samples costs nothing beyond its
 * bytes. Samples are found again by a scan of the message from the last one
 * found (the cursor), so decoding them in order reads each field once. */
struct pprof_reader_mem {
    size_t used, max;
    struct span *strs; /* each string's bytes in the input, until copied */
    char *strings;     /* the NUL-terminated copies */
    size_t cap_types, cap_functions, cap_mappings, cap_locations, cap_lines, cap_strings;
    const uint8_t *first, *end; /* the first sample's field; the message's end */
    const uint8_t *next;        /* the cursor: past sample next_i - 1 */
    size_t next_i;
    struct span last; /* sample next_i - 1, asked for again by a caller that retries */
};

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (errlen) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -EBADMSG;
}

/* --- the wire format --- */

static inline __attribute__((always_inline)) bool rd_varint(const uint8_t **pp, const uint8_t *end,
                                                            uint64_t *out)
{
    return varint__read(pp, end, out);
}

struct field {
    uint32_t num, wt;
    uint64_t v;       /* WT_VARINT, WT_I64, WT_I32 */
    const uint8_t *p; /* WT_LEN */
    size_t len;
};

/* The next field of the message in [*pp, end): 1 and f filled, 0 at the
 * end, -1 when malformed (a group, a length past the end). */
static inline __attribute__((always_inline)) int next_field(const uint8_t **pp, const uint8_t *end,
                                                            struct field *f)
{
    const uint8_t *p = *pp;
    uint64_t tag;

    if (p >= end)
        return 0;
    if (!rd_varint(&p, end, &tag) || tag >> 3 == 0 || tag >> 3 > UINT32_MAX)
        return -1;
    f->num = tag >> 3;
    f->wt = tag & 7;
    switch (f->wt) {
    case WT_VARINT:
        if (!rd_varint(&p, end, &f->v))
            return -1;
        break;
    case WT_I64:
        if (end - p < 8)
            return -1;
        memcpy(&f->v, p, 8); /* little-endian hosts only (x86_64, arm64) */
        p += 8;
        break;
    case WT_I32: {
        uint32_t v32;
        if (end - p < 4)
            return -1;
        memcpy(&v32, p, 4);
        f->v = v32;
        p += 4;
        break;
    }
    case WT_LEN:
        if (!rd_varint(&p, end, &f->v) || f->v > (uint64_t)(end - p))
            return -1;
        f->p = p;
        f->len = f->v;
        p += f->len;
        break;
    default: /* groups (3, 4) are not in profile.proto; 6 and 7 do not exist */
        return -1;
    }
    *pp = p;
    return 1;
}

static inline uint32_t str_index(uint64_t v)
{
    return v < BAD_INDEX ? (uint32_t)v : BAD_INDEX;
}

/* --- growing tables under the cap --- */

static int grow(struct pprof_reader_mem *m, void **arr, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : 64;
    size_t more = (ncap - *cap) * size;
    if (m->used + more > m->max)
        return -E2BIG;
    void *na = realloc(*arr, ncap * size);
    if (!na)
        return -ENOMEM;
    *arr = na;
    *cap = ncap;
    m->used += more;
    return 0;
}

#define PUSH(r, arr, n, capf)                                                                      \
    grow((r)->mem, (void **)&(r)->arr, &(r)->mem->capf, (r)->n, sizeof(*(r)->arr))

size_t pprof_reader__mem_used(const struct pprof_reader *r)
{
    return r && r->mem ? r->mem->used + sizeof(*r->mem) : 0;
}

/* --- the tables' messages --- */

static int read_valuetype(const struct field *f, struct pprof_rvaluetype *vt)
{
    const uint8_t *p = f->p, *end = f->p + f->len;
    struct field g = {0};
    int k;

    while ((k = next_field(&p, end, &g)) > 0) {
        if (g.wt != WT_VARINT) {
            if (g.num <= 2)
                return -1;
            continue;
        }
        if (g.num == 1)
            vt->type = str_index(g.v);
        else if (g.num == 2)
            vt->unit = str_index(g.v);
    }
    return k;
}

static int read_function(const struct field *f, struct pprof_rfunction *fn)
{
    const uint8_t *p = f->p, *end = f->p + f->len;
    struct field g = {0};
    int k;

    memset(fn, 0, sizeof(*fn));
    while ((k = next_field(&p, end, &g)) > 0) {
        if (g.wt != WT_VARINT) {
            if (g.num <= 5)
                return -1;
            continue;
        }
        switch (g.num) {
        case 1:
            fn->id = g.v;
            break;
        case 2:
            fn->name = str_index(g.v);
            break;
        case 3:
            fn->system_name = str_index(g.v);
            break;
        case 4:
            fn->filename = str_index(g.v);
            break;
        }
    }
    return k;
}

static int read_mapping(const struct field *f, struct pprof_rmapping *m)
{
    const uint8_t *p = f->p, *end = f->p + f->len;
    struct field g = {0};
    int k;

    memset(m, 0, sizeof(*m));
    while ((k = next_field(&p, end, &g)) > 0) {
        if (g.wt != WT_VARINT) {
            if (g.num <= 10)
                return -1;
            continue;
        }
        switch (g.num) {
        case 1:
            m->id = g.v;
            break;
        case 2:
            m->memory_start = g.v;
            break;
        case 3:
            m->memory_limit = g.v;
            break;
        case 4:
            m->file_offset = g.v;
            break;
        case 5:
            m->filename = str_index(g.v);
            break;
        case 6:
            m->build_id = str_index(g.v);
            break;
        }
    }
    return k;
}

static int read_location(struct pprof_reader *r, const struct field *f, struct pprof_rlocation *l)
{
    const uint8_t *p = f->p, *end = f->p + f->len;
    struct field g = {0};
    int k, e;

    memset(l, 0, sizeof(*l));
    l->line_off = r->nlines;
    while ((k = next_field(&p, end, &g)) > 0) {
        if (g.num == 4 && g.wt == WT_LEN) {
            if ((e = PUSH(r, lines, nlines, cap_lines)))
                return e;
            struct pprof_rline *ln = &r->lines[r->nlines];
            const uint8_t *q = g.p, *qend = g.p + g.len;
            struct field h = {0};
            memset(ln, 0, sizeof(*ln));
            while ((k = next_field(&q, qend, &h)) > 0) {
                if (h.wt != WT_VARINT) {
                    if (h.num <= 3)
                        return -1;
                    continue;
                }
                if (h.num == 1)
                    ln->function_id = h.v;
                else if (h.num == 2)
                    ln->line = (int64_t)h.v;
            }
            if (k < 0)
                return -1;
            r->nlines++;
            l->nlines++;
            continue;
        }
        if (g.wt != WT_VARINT || g.num == 4) { /* 4 (line) is a message, the rest varints */
            if (g.num <= 5)
                return -1;
            continue;
        }
        switch (g.num) {
        case 1:
            l->id = g.v;
            break;
        case 2:
            l->mapping_id = g.v;
            break;
        case 3:
            l->address = g.v;
            break;
        }
    }
    return k;
}

/* NUL-terminated copies of the string table, all in one block. */
static int copy_strings(struct pprof_reader *r)
{
    const struct span *at = r->mem->strs;
    size_t total = 0, n = r->nstrings;

    for (size_t i = 0; i < n; i++)
        total += at[i].len + 1;
    size_t more = total + n * (sizeof(*r->strings) + sizeof(*r->string_len));
    if (r->mem->used + more > r->mem->max)
        return -E2BIG;
    char *s = malloc(total);
    r->strings = malloc(n * sizeof(*r->strings));
    r->string_len = malloc(n * sizeof(*r->string_len));
    r->mem->strings = s;
    if (!s || !r->strings || !r->string_len)
        return -ENOMEM;
    r->mem->used += more;
    for (size_t i = 0; i < n; i++) {
        memcpy(s, at[i].p, at[i].len);
        s[at[i].len] = '\0';
        r->strings[i] = s;
        /* Its length as C sees it: everyone downstream (keys, the store)
         * takes the string up to a NUL it may hold, and must agree. */
        r->string_len[i] = strlen(r->strings[i]);
        s += at[i].len + 1;
    }
    return 0;
}

#define CHECK_STR(idx, what, ...)                                                                  \
    do {                                                                                           \
        if ((idx) >= r->nstrings) {                                                                \
            err_code = fail(err, errlen, what ": string index out of range", __VA_ARGS__);         \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

int pprof_reader__read(struct pprof_reader *r, const void *data, size_t len, size_t max_mem,
                       char *err, size_t errlen)
{
    const uint8_t *p = data, *end = p + len;
    struct field f = {0};
    int k, err_code = 0;

    memset(r, 0, sizeof(*r));
    r->mem = calloc(1, sizeof(*r->mem));
    if (!r->mem)
        return -ENOMEM;
    r->mem->max = max_mem;
    r->mem->end = end;
    for (const uint8_t *at = p; (k = next_field(&p, end, &f)) > 0; at = p) {
        /* A known field in a wire type it does not have is malformed, as
         * protobuf-c and Go's pprof reader take it (fields 1-6 and 11 are
         * messages and strings, 7-10, 12 and 14 varints, 13 either:
         * comments may be packed). */
        bool len_field = f.num <= F_STRING_TABLE || f.num == F_PERIOD_TYPE;
        if (f.num <= 14 && f.num != 13 && (len_field ? f.wt != WT_LEN : f.wt != WT_VARINT))
            goto malformed;
        if (f.num == 13 && f.wt != WT_VARINT && f.wt != WT_LEN) /* comments: packed or not */
            goto malformed;
        if (f.wt == WT_LEN) {
            switch (f.num) {
            case F_SAMPLE:
                if (f.len >= UINT32_MAX) {
                    err_code = fail(err, errlen, "a sample of %zu bytes", f.len);
                    goto out;
                }
                if (!r->nsamples++)
                    r->mem->first = at;
                continue;
            case F_STRING_TABLE:
                if ((err_code = PUSH(r, mem->strs, nstrings, cap_strings)))
                    goto out;
                if (f.len >= UINT32_MAX) {
                    err_code = fail(err, errlen, "a string of %zu bytes", f.len);
                    goto out;
                }
                r->mem->strs[r->nstrings++] = (struct span){f.p, f.len};
                continue;
            case F_FUNCTION:
                if ((err_code = PUSH(r, functions, nfunctions, cap_functions)))
                    goto out;
                if (read_function(&f, &r->functions[r->nfunctions]) < 0)
                    goto malformed;
                r->nfunctions++;
                continue;
            case F_LOCATION:
                if ((err_code = PUSH(r, locations, nlocations, cap_locations)))
                    goto out;
                if ((k = read_location(r, &f, &r->locations[r->nlocations])) < 0) {
                    if (k == -1)
                        goto malformed;
                    err_code = k;
                    goto out;
                }
                r->nlocations++;
                continue;
            case F_MAPPING:
                if ((err_code = PUSH(r, mappings, nmappings, cap_mappings)))
                    goto out;
                if (read_mapping(&f, &r->mappings[r->nmappings]) < 0)
                    goto malformed;
                r->nmappings++;
                continue;
            case F_SAMPLE_TYPE:
                if ((err_code = PUSH(r, sample_types, nsample_types, cap_types)))
                    goto out;
                r->sample_types[r->nsample_types] = (struct pprof_rvaluetype){0, 0};
                if (read_valuetype(&f, &r->sample_types[r->nsample_types]) < 0)
                    goto malformed;
                r->nsample_types++;
                continue;
            case F_PERIOD_TYPE: /* a singular message: a second one merges */
                if (read_valuetype(&f, &r->period_type) < 0)
                    goto malformed;
                r->has_period_type = 1;
                continue;
            }
        } else if (f.wt == WT_VARINT) {
            switch (f.num) {
            case F_TIME_NANOS:
                r->time_nanos = (int64_t)f.v;
                break;
            case F_DURATION_NANOS:
                r->duration_nanos = (int64_t)f.v;
                break;
            case F_PERIOD:
                r->period = (int64_t)f.v;
                break;
            case F_DEFAULT_SAMPLE_TYPE:
                r->default_sample_type = (int64_t)f.v;
                break;
            }
        }
        /* anything else: a field this reader does not keep (drop_frames,
         * comments, fields newer than it) */
    }
    if (k < 0)
        goto malformed;

    /* --- the string table, then every index into it --- */
    if (r->nstrings == 0 || r->mem->strs[0].len != 0) {
        err_code = fail(err, errlen, "string_table must start with \"\"");
        goto out;
    }
    if ((err_code = copy_strings(r)))
        goto out;
    for (size_t i = 0; i < r->nsample_types; i++) {
        CHECK_STR(r->sample_types[i].type, "sample_type %zu", i);
        CHECK_STR(r->sample_types[i].unit, "sample_type %zu", i);
    }
    if (r->has_period_type) {
        CHECK_STR(r->period_type.type, "period_type%s", "");
        CHECK_STR(r->period_type.unit, "period_type%s", "");
    }
    for (size_t i = 0; i < r->nfunctions; i++) {
        const struct pprof_rfunction *fn = &r->functions[i];
        CHECK_STR(fn->name, "function %llu", (unsigned long long)fn->id);
        CHECK_STR(fn->system_name, "function %llu", (unsigned long long)fn->id);
        CHECK_STR(fn->filename, "function %llu", (unsigned long long)fn->id);
    }
    for (size_t i = 0; i < r->nmappings; i++) {
        const struct pprof_rmapping *m = &r->mappings[i];
        CHECK_STR(m->filename, "mapping %llu", (unsigned long long)m->id);
        CHECK_STR(m->build_id, "mapping %llu", (unsigned long long)m->id);
    }
    goto out;
malformed:
    err_code = fail(err, errlen, "the body is not a pprof profile (malformed protobuf)");
out:
    return err_code;
}

/* Appends the varint(s) of a repeated scalar field, packed or not. */
static inline int rd_repeated(const struct field *f, uint64_t *out, size_t *n, size_t cap,
                              bool *over)
{
    if (f->wt == WT_VARINT) {
        if (*n < cap)
            out[*n] = f->v;
        else
            *over = true;
        (*n)++;
        return 0;
    }
    if (f->wt != WT_LEN)
        return -1; /* a wire type the field does not have */
    const uint8_t *p = f->p, *end = f->p + f->len;
    size_t i = *n;
    /* With room for the longest varint left, no bounds checks per byte. */
    while (i < cap && end - p >= 10) {
        uint64_t v = p[0];
        if (v < 0x80) {
            p++;
        } else if (p[1] < 0x80) {
            v = (v & 0x7f) | (uint64_t)p[1] << 7;
            p += 2;
        } else if (!rd_varint(&p, end, &v)) {
            return -1;
        }
        out[i++] = v;
    }
    while (p < end) {
        uint64_t v;
        if (!rd_varint(&p, end, &v))
            return -1;
        if (i < cap)
            out[i] = v;
        i++;
    }
    if (i > cap)
        *over = true;
    *n = i;
    return 0;
}

/* Sample i's bytes: the one before the cursor again, else a scan on from
 * the cursor (from the first sample when i is behind it). The message was
 * checked whole by pprof_reader__read, so the scan meets no error. */
static struct span sample_span(struct pprof_reader_mem *m, size_t i)
{
    struct field f = {0};

    if (m->next_i && i == m->next_i - 1)
        return m->last;
    if (i < m->next_i || !m->next) {
        m->next = m->first;
        m->next_i = 0;
    }
    while (m->next && next_field(&m->next, m->end, &f) > 0) {
        if (f.num != F_SAMPLE || f.wt != WT_LEN)
            continue;
        m->last = (struct span){f.p, f.len};
        if (m->next_i++ == i)
            return m->last;
    }
    return (struct span){m->end, 0}; /* i >= nsamples: the caller's error */
}

/* Both ways of reading a sample: with ids NULL, its location ids are
 * decoded into s; else left in place, *ids and *ids_end around them, when
 * they are one packed field (-EAGAIN when not). */
static inline __attribute__((always_inline)) int
read_sample(const struct pprof_reader *r, size_t i, struct pprof_rsample *s, const uint8_t **ids,
            const uint8_t **ids_end, char *err, size_t errlen)
{
    struct span sp = sample_span(r->mem, i);
    const uint8_t *p = sp.p, *end = p + sp.len;
    struct field f = {0};
    bool over = false, seen_ids = false;
    int k;

    s->nlocation_ids = s->nvalues = s->nlabels = 0;
    if (ids)
        *ids = *ids_end = p; /* no location ids: an empty run */
    while ((k = next_field(&p, end, &f)) > 0) {
        switch (f.num) {
        case 1:
            if (ids) {
                if (f.wt == WT_VARINT || (f.wt == WT_LEN && seen_ids))
                    return -EAGAIN;
                if (f.wt != WT_LEN)
                    goto malformed;
                seen_ids = true;
                *ids = f.p;
                *ids_end = f.p + f.len;
            } else if (rd_repeated(&f, s->location_ids, &s->nlocation_ids, s->cap_location_ids,
                                   &over)) {
                goto malformed;
            }
            break;
        case 2:
            if (rd_repeated(&f, (uint64_t *)s->values, &s->nvalues, s->cap_values, &over))
                goto malformed;
            break;
        case 3: {
            if (f.wt != WT_LEN)
                goto malformed;
            struct pprof_rlabel l = {0, 0, 0, 0};
            const uint8_t *q = f.p, *qend = f.p + f.len;
            struct field g = {0};
            /* The usual label, {key, str} with small indices, in 4 bytes. */
            if (f.len == 4 && q[0] == 0x08 && q[2] == 0x10 && !((q[1] | q[3]) & 0x80)) {
                l.key = q[1];
                l.str = q[3];
                q = qend;
            }
            while ((k = next_field(&q, qend, &g)) > 0) {
                if (g.wt != WT_VARINT) {
                    if (g.num <= 4)
                        goto malformed;
                    continue;
                }
                if (g.num == 1)
                    l.key = str_index(g.v);
                else if (g.num == 2)
                    l.str = str_index(g.v);
                else if (g.num == 3)
                    l.num = (int64_t)g.v;
                else if (g.num == 4)
                    l.num_unit = str_index(g.v);
            }
            if (k < 0)
                goto malformed;
            if (l.key >= r->nstrings || l.str >= r->nstrings || l.num_unit >= r->nstrings)
                return fail(err, errlen, "sample %zu: label string index out of range", i);
            if (s->nlabels < s->cap_labels)
                s->labels[s->nlabels] = l;
            else
                over = true;
            s->nlabels++;
            break;
        }
        }
    }
    if (k < 0)
        goto malformed;
    return over ? -E2BIG : 0;
malformed:
    return fail(err, errlen, "sample %zu: malformed protobuf", i);
}

int pprof_reader__sample(const struct pprof_reader *r, size_t i, struct pprof_rsample *s, char *err,
                         size_t errlen)
{
    return read_sample(r, i, s, NULL, NULL, err, errlen);
}

int pprof_reader__sample_packed(const struct pprof_reader *r, size_t i, struct pprof_rsample *s,
                                const uint8_t **ids, const uint8_t **ids_end, char *err,
                                size_t errlen)
{
    return read_sample(r, i, s, ids, ids_end, err, errlen);
}

void pprof_reader__free(struct pprof_reader *r)
{
    if (!r)
        return;
    free(r->strings);
    free(r->string_len);
    free(r->sample_types);
    free(r->functions);
    free(r->mappings);
    free(r->locations);
    free(r->lines);
    if (r->mem) {
        free(r->mem->strs);
        free(r->mem->strings);
    }
    free(r->mem);
    memset(r, 0, sizeof(*r));
}
