#include "query.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/hmap.h"
#include "../common/interp_frames.h"
#include "../common/json.h"
#include "../common/pprof/pprof_writer.h"
#include "sat.h"

static int unit_ns(char u, int64_t *mul)
{
    switch (u) {
    case 's':
        *mul = 1000000000ll;
        return 0;
    case 'm':
        *mul = 60ll * 1000000000ll;
        return 0;
    case 'h':
        *mul = 3600ll * 1000000000ll;
        return 0;
    case 'd':
        *mul = 86400ll * 1000000000ll;
        return 0;
    case 'w':
        *mul = 7ll * 86400ll * 1000000000ll;
        return 0;
    }
    return -1;
}

int query__parse_duration(const char *s, int64_t *out_ns)
{
    char *end;
    int64_t mul = 1000000000ll;

    if (!s || !*s)
        return -1;
    double v = strtod(s, &end);
    /* strtod takes "nan" and "inf": every comparison with NaN is false, so
     * refuse them before any range check. */
    if (end == s || !isfinite(v) || v < 0)
        return -1;
    if (*end) {
        if (end[1] || unit_ns(*end, &mul))
            return -1;
    }
    if (v * mul > 9.0e18) /* past int64: refused, never wrapped */
        return -1;
    *out_ns = (int64_t)(v * mul);
    return 0;
}

int query__parse_time(const char *s, int64_t now_ns, int64_t *out_ns)
{
    int64_t d;
    char *end;

    if (!s || !*s)
        return -1;
    if (strncmp(s, "now", 3) == 0) {
        if (!s[3]) {
            *out_ns = now_ns;
            return 0;
        }
        if (s[3] != '-' || query__parse_duration(s + 4, &d) || d > now_ns)
            return -1;
        *out_ns = now_ns - d;
        return 0;
    }
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v) || v < 0 || v > 9.0e9)
        return -1;
    *out_ns = (int64_t)(v * 1e9);
    return 0;
}

long query__hide_interp(struct store_merged *m)
{
    bool *interp = calloc(m->nfunctions + 1, sizeof(*interp));
    bool any = false;
    long gone = 0;

    if (!interp)
        return -ENOMEM;
    for (size_t f = 0; f < m->nfunctions; f++)
        any |= interp[f] = cx__is_interp_file(m->functions[f].file);
    for (size_t i = 0; any && i < m->nstacks; i++) {
        struct store_merged_stack *s = &m->stacks[i];
        uint32_t kept = 0;
        for (uint32_t j = 0; j < s->nframes; j++) {
            uint32_t f = s->frames[j];
            if (f < m->nfunctions && interp[f])
                continue;
            s->frames[kept++] = f;
        }
        gone += s->nframes - kept;
        s->nframes = kept;
    }
    free(interp);
    return gone;
}

static const char *const value_names[] = {"cpu", "off_cpu", "wall"};

const char *query__value_name(enum store_value v)
{
    return v <= STORE_VALUE_WALL ? value_names[v] : "cpu";
}

int query__parse_value(const char *s, enum store_value *v)
{
    *v = STORE_VALUE_CPU;
    for (int i = 0; s && i <= STORE_VALUE_WALL; i++)
        if (strcmp(s, value_names[i]) == 0) {
            *v = (enum store_value)i;
            return 0;
        }
    return s ? -1 : 0;
}

int query__write_pprof(const struct store_merged *m, int64_t from_ns, int64_t to_ns,
                       struct buf *out)
{
    struct pprof_writer *w = pprof_writer__new();
    uint64_t *loc = NULL, *ids = NULL;
    size_t cap = 0;
    int err = -ENOMEM;
    /* off_cpu when asked for or present; wall, their sum, when asked for */
    bool off = m->value != STORE_VALUE_CPU, wall = m->value == STORE_VALUE_WALL;

    if (!w)
        return -ENOMEM;
    for (size_t i = 0; i < m->nstacks && !off; i++)
        off = m->stacks[i].off_cpu_ns != 0;
    if (pprof_writer__add_sample_type(w, "samples", "count") ||
        pprof_writer__add_sample_type(w, "cpu", "nanoseconds") ||
        (off && pprof_writer__add_sample_type(w, "off_cpu", "nanoseconds")) ||
        (wall && pprof_writer__add_sample_type(w, "wall", "nanoseconds")))
        goto out;
    pprof_writer__set_period(w, "cpu", "nanoseconds", 0);
    pprof_writer__set_time(w, from_ns, to_ns - from_ns);
    pprof_writer__set_default_type(w, query__value_name(m->value));
    loc = calloc(m->nfunctions + 1, sizeof(*loc)); /* function -> location id */
    if (!loc)
        goto out;
    for (size_t i = 0; i < m->nstacks; i++) {
        const struct store_merged_stack *s = &m->stacks[i];
        if (s->nframes > cap) {
            cap = s->nframes;
            uint64_t *n = realloc(ids, cap * sizeof(*n));
            if (!n)
                goto out;
            ids = n;
        }
        for (uint32_t j = 0; j < s->nframes; j++) {
            uint32_t f = s->frames[j];
            if (!loc[f]) {
                struct pprof_line l = {m->functions[f].name, NULL, m->functions[f].file, 0};
                loc[f] = pprof_writer__location(w, 0, 0, &l, 1);
                if (!loc[f])
                    goto out;
            }
            ids[j] = loc[f];
        }
        int64_t v[4] = {s->samples, s->cpu_ns, s->off_cpu_ns,
                        store_value__of(STORE_VALUE_WALL, s->cpu_ns, s->off_cpu_ns)};
        if (pprof_writer__add_sample(w, ids, s->nframes, v, NULL, 0))
            goto out;
    }
    err = pprof_writer__encode(w, out, true);
out:
    free(loc);
    free(ids);
    pprof_writer__free(w);
    return err;
}

/* Folded-stack lines use ';' between frames and ' ' before the count:
 * neither may appear raw in a name, nor a newline. */
static int append_folded_name(struct buf *b, const char *s)
{
    char tmp[256];
    size_t n = 0;
    int err = 0;

    for (; *s && !err; s++) {
        char c = *s;
        tmp[n++] = c == ';' ? ':' : (c == '\n' || c == '\r') ? ' ' : c;
        if (n == sizeof(tmp)) {
            err = buf__append(b, tmp, n);
            n = 0;
        }
    }
    return err ? err : buf__append(b, tmp, n);
}

int query__write_collapsed(const struct store_merged *m, struct buf *out)
{
    char num[32];
    int err = 0;

    for (size_t i = 0; i < m->nstacks && !err; i++) {
        const struct store_merged_stack *s = &m->stacks[i];
        /* CPU in samples, as ever; off-CPU and wall time in nanoseconds */
        int64_t count = m->value == STORE_VALUE_CPU
                            ? s->samples
                            : store_value__of(m->value, s->cpu_ns, s->off_cpu_ns);
        if (!s->nframes || count <= 0)
            continue;
        for (uint32_t j = s->nframes; j-- > 0 && !err;) {
            err = append_folded_name(out, m->functions[s->frames[j]].name);
            if (!err && j)
                err = buf__append(out, ";", 1);
        }
        int n = snprintf(num, sizeof(num), " %lld\n", (long long)count);
        if (!err)
            err = buf__append(out, num, n);
    }
    return err;
}
