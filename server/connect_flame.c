/* Pyroscope's FlameGraph from our flame-graph tree, and merged results
 * combined. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../common/buf.h"
#include "../common/hmap.h"
#include "connect_flame.h"
#include "query.h"

/* Appends one node's four values to level d, making the level when it is
 * the next one down; caps[d] is its room. */
static int level_add(struct connect_flame *f, size_t **caps, size_t d, const int64_t v[4])
{
    if (d == f->nlevels) {
        int64_t **l = realloc(f->levels, (d + 1) * sizeof(*l));
        if (l)
            f->levels = l;
        size_t *nv = l ? realloc(f->nvalues, (d + 1) * sizeof(*nv)) : NULL;
        if (nv)
            f->nvalues = nv;
        size_t *c = nv ? realloc(*caps, (d + 1) * sizeof(*c)) : NULL;
        if (!c)
            return -ENOMEM;
        *caps = c;
        f->levels[d] = NULL;
        f->nvalues[d] = (*caps)[d] = 0;
        f->nlevels++;
    }
    if (f->nvalues[d] + 4 > (*caps)[d]) {
        size_t cap = (*caps)[d] ? 2 * (*caps)[d] : 16;
        int64_t *p = realloc(f->levels[d], cap * sizeof(*p));
        if (!p)
            return -ENOMEM;
        f->levels[d] = p;
        (*caps)[d] = cap;
    }
    memcpy(f->levels[d] + f->nvalues[d], v, 4 * sizeof(int64_t));
    f->nvalues[d] += 4;
    return 0;
}

/* Per depth while walking the nodes: the children still to come and
 * where the next one starts. */
struct frame {
    int64_t left, children;
};

int connect_flame__build(const struct store_merged *m, size_t max_nodes, struct connect_flame *f)
{
    struct buf nodes;
    struct frame *stack = NULL;
    size_t *caps = NULL, depth = 0;
    int64_t *end = NULL; /* per level: where its last node ends */
    int err;

    memset(f, 0, sizeof(*f));
    buf__init(&nodes, (size_t)1 << 34);
    if ((err = query__flamegraph_nodes(m, max_nodes, &nodes)))
        goto out;
    size_t n = nodes.len / (4 * sizeof(int64_t));
    const int64_t *v = (const int64_t *)nodes.data;
    err = -ENOMEM;
    f->names = malloc((m->nfunctions + 2) * sizeof(*f->names));
    stack = malloc((n + 1) * sizeof(*stack));
    end = calloc(n + 1, sizeof(*end));
    if (!f->names || !stack || !end)
        goto out;
    f->names[0] = "total";
    f->names[1] = "other";
    for (size_t i = 0; i < m->nfunctions; i++)
        f->names[i + 2] = m->functions[i].name;
    f->nnames = m->nfunctions + 2;
    /* Depth-first, children left to right: each level's nodes come left
     * to right, so a node's offset is from the end of the one before it
     * on its level. */
    for (size_t i = 0; i < n; i++, v += 4) {
        int64_t left = depth ? stack[depth - 1].left : 0;
        int64_t val[4] = {left - end[depth], v[1], v[2], v[0]};
        if ((err = level_add(f, &caps, depth, val)))
            goto out;
        end[depth] = left + v[1];
        if (v[2] > f->max_self)
            f->max_self = v[2];
        if (depth) {
            stack[depth - 1].left += v[1];
            stack[depth - 1].children--;
        } else {
            f->total = v[1];
        }
        stack[depth++] = (struct frame){left, v[3]};
        while (depth && stack[depth - 1].children <= 0)
            depth--;
    }
    err = 0;
out:
    buf__free(&nodes);
    free(stack);
    free(end);
    free(caps);
    if (err)
        connect_flame__free(f);
    return err;
}

void connect_flame__free(struct connect_flame *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->nlevels; i++)
        free(f->levels[i]);
    free(f->levels);
    free(f->nvalues);
    free(f->names);
    memset(f, 0, sizeof(*f));
}

int connect_flame__merge(struct store_merged *const *parts, size_t n, struct store_merged **out)
{
    struct hmap *fn = hmap__new();
    struct store_merged *m = calloc(1, sizeof(*m));
    struct buf *names = calloc(1, sizeof(*names));
    struct buf key;
    size_t nstacks = 0, *off = NULL, nfn = 0;
    int err = -ENOMEM;

    buf__init(&key, (size_t)1 << 30);
    if (!fn || !m || !names)
        goto fail;
    buf__init(names, (size_t)1 << 34);
    m->mem = names;
    for (size_t p = 0; p < n; p++) {
        nstacks += parts[p]->nstacks;
        m->profiles += parts[p]->profiles;
        m->value = parts[p]->value; /* the same in every part: one query's */
    }
    if (!(m->stacks = calloc(nstacks + 1, sizeof(*m->stacks))))
        goto fail;
    for (size_t p = 0; p < n; p++) {
        const struct store_merged *s = parts[p];
        uint32_t *map = malloc((s->nfunctions + 1) * sizeof(*map));
        if (!map)
            goto fail;
        for (size_t i = 0; i < s->nfunctions; i++) {
            const struct store_function *f = &s->functions[i];
            size_t nl = strlen(f->name), fl = strlen(f->file);
            bool fresh;
            buf__reset(&key);
            long k = -1;
            if (!buf__append(&key, f->name, nl + 1) && !buf__append(&key, f->file, fl + 1))
                k = hmap__put(fn, key.data, key.len, &fresh);
            if (k >= 0 && fresh) {
                size_t *o = realloc(off, (nfn + 1) * sizeof(*o));
                if (o)
                    off = o, off[nfn++] = names->len;
                if (!o || buf__append(names, key.data, key.len))
                    k = -1;
            }
            if (k < 0) {
                free(map);
                goto fail;
            }
            map[i] = (uint32_t)k;
        }
        for (size_t i = 0; i < s->nstacks; i++) {
            const struct store_merged_stack *st = &s->stacks[i];
            struct store_merged_stack *d = &m->stacks[m->nstacks];
            if (!(d->frames = malloc((st->nframes + 1) * sizeof(*d->frames)))) {
                free(map);
                goto fail;
            }
            for (uint32_t j = 0; j < st->nframes; j++)
                d->frames[j] = map[st->frames[j]];
            d->nframes = st->nframes;
            d->samples = st->samples;
            d->cpu_ns = st->cpu_ns;
            d->off_cpu_ns = st->off_cpu_ns;
            m->nstacks++;
        }
        free(map);
    }
    /* The names are in place now: point the functions at them. */
    if (!(m->functions = calloc(nfn + 1, sizeof(*m->functions))))
        goto fail;
    for (size_t i = 0; i < nfn; i++) {
        m->functions[i].name = names->data + off[i];
        m->functions[i].file = names->data + off[i] + strlen(names->data + off[i]) + 1;
    }
    m->nfunctions = nfn;
    *out = m;
    err = 0;
    goto out;
fail:
    if (!m || !m->mem)
        free(names);
    store_merged__free(m);
out:
    hmap__free(fn);
    buf__free(&key);
    free(off);
    return err;
}
