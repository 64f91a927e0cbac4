/* The flame-graph tree of a merged result (query.h's
 * query__write_flamegraph and query__flamegraph_nodes): built from the
 * stacks sorted root first, folded to max_nodes, written as the UI's
 * compact JSON or as raw nodes. */
#include "query.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../common/json.h"
#include "sat.h"

/* --- the flame-graph tree --- */

/* 32 bytes: the walks over a tree of a million nodes are trips through
 * memory, so what only folding needs (a node's parent, whether it went)
 * is kept beside it, and only when folding. */
struct node {
    int64_t total, self;
    uint32_t name; /* function index, UINT32_MAX for the root, UINT32_MAX-1 for "other" */
    uint32_t first_child, next_sibling; /* UINT32_MAX = none */
    uint32_t nchildren;
};

#define NONE UINT32_MAX
#define OTHER (UINT32_MAX - 1)

struct tree {
    struct node *n;
    size_t len, cap;
    uint32_t *parent; /* each node's, with max_nodes only (NULL otherwise) */
    bool *gone;       /* folded into its parent's "other", once folding ran */
    bool raw;         /* emit four int64_t a node rather than JSON text */
    bool folded;      /* some node folded: emit looks for "other" sums */
};

static void tree_free(struct tree *t)
{
    free(t->n);
    free(t->parent);
    free(t->gone);
}

/* A new last child of parent named name: its index, or -1 out of memory. */
static long new_child(struct tree *t, uint32_t parent, uint32_t name)
{
    if (t->len == t->cap) {
        size_t cap = t->cap * 2;
        struct node *n = realloc(t->n, cap * sizeof(*n));
        if (!n)
            return -1;
        t->n = n;
        if (t->parent) {
            uint32_t *p = realloc(t->parent, cap * sizeof(*p));
            if (!p)
                return -1;
            t->parent = p;
        }
        t->cap = cap;
    }
    struct node *pn = &t->n[parent];
    uint32_t c = t->len++;
    t->n[c] = (struct node){0, 0, name, NONE, pn->first_child, 0};
    if (t->parent)
        t->parent[c] = parent;
    pn->first_child = c;
    pn->nchildren++;
    return c;
}

/* The most a node's text takes: a comma, four numbers of at most
 * JSON_I64_ROOM characters and their commas (a name's text is copied 8
 * bytes at once, fewer than a number's room and comma). */
#define NODE_TEXT_MAX (1 + 4 * (JSON_I64_ROOM + 1))

/* Where emit writes: the raw nodes through buf__append, or the text
 * straight into out's memory at p, the room checked against lim (out's
 * end less NODE_TEXT_MAX), out->len set only when it grows and at the
 * end. names[v] is name number v's text with its comma ("1234,", at most
 * 8 bytes, name_len[v] of them), made once: each of the tree's nodes
 * names one of a few thousand functions, so its number is copied rather
 * than written again (NULL past 9,999,999 names, or with fewer nodes
 * than names: then written). */
struct writer {
    struct buf *out;
    char *p, *lim;
    uint64_t *names;
    uint8_t *name_len;
    bool raw;
};

/* Grows out (by half, at least 4 KiB: a realloc in many nodes) so that
 * a node's text fits at w->p. 0 or buf__reserve's error. */
static int writer_room(struct writer *w)
{
    struct buf *out = w->out;
    int err;

    if (w->p) /* NULL before the first node: out->len is where it starts */
        out->len = w->p - out->data;
    err = buf__reserve(out, out->len < (1u << 20) ? 4096 : out->len / 2);
    if (err && (err = buf__reserve(out, NODE_TEXT_MAX)))
        return err;
    w->p = out->data + out->len;
    w->lim = out->data + out->cap - 1 - NODE_TEXT_MAX;
    return 0;
}

/* Starts writing at out's end; for the text of nodes nodes, the name
 * table of nnames names when it pays (fewer names than nodes). 0 or
 * -ENOMEM. */
static int writer_init(struct writer *w, struct buf *out, bool raw, size_t nnames, size_t nodes)
{
    *w = (struct writer){out, NULL, NULL, NULL, NULL, raw};
    if (raw)
        return 0;
    if (nnames <= 9999999 && nnames < nodes) {
        w->names = malloc(nnames * sizeof(*w->names));
        w->name_len = malloc(nnames);
        if (!w->names || !w->name_len)
            return -ENOMEM;
        for (size_t v = 0; v < nnames; v++) {
            char tmp[JSON_I64_ROOM];
            int n = json__put_i64(tmp, (int64_t)v);
            tmp[n++] = ',';
            memcpy(&w->names[v], tmp, 8);
            w->name_len[v] = (uint8_t)n;
        }
    }
    return writer_room(w);
}

/* Ends the text: out->len set, NUL-terminated; frees the name table. */
static void writer_end(struct writer *w)
{
    if (!w->raw && w->p) {
        w->out->len = w->p - w->out->data;
        w->out->data[w->out->len] = '\0';
    }
    free(w->names);
    free(w->name_len);
}

/* Appends ",name,total,self,kids" (or without the comma); in a raw tree,
 * the four int64_t. name is a name number (0 the root, 1 "other", a
 * function's index + 2). */
static inline __attribute__((always_inline)) int
put_node(struct writer *w, bool comma, uint32_t name, int64_t total, int64_t self, int64_t kids)
{
    int err;

    if (w->raw) {
        int64_t v[4] = {name, total, self, kids};
        return buf__append(w->out, v, sizeof(v));
    }
    if (w->p > w->lim && (err = writer_room(w)))
        return err;
    char *p = w->p;
    *p = ',';
    p += comma;
    if (w->names) {
        memcpy(p, &w->names[name], 8);
        p += w->name_len[name];
    } else {
        p += json__put_i64(p, name);
        *p++ = ',';
    }
    p += json__put_i64(p, total);
    *p++ = ',';
    p += json__put_i64(p, self);
    *p++ = ',';
    p += json__put_i64(p, kids);
    w->p = p;
    return 0;
}

/* --- folding: which nodes go into their parent's "other" --- */

/* Fenwick trees over the nodes in depth-first order, where a subtree is a
 * range [pre, pre + size): one counts the visible nodes (a subtree's count
 * is a difference of two prefix sums), the other marks folded subtrees (a
 * node is gone when a prefix sum at its position is non-zero). Each step is
 * O(log n), so folding a tree of n nodes is O(n log n) whatever its shape;
 * walking ancestors instead took O(depth) a node, quadratic for deep trees. */
struct fenwick {
    int64_t *f; /* 1-based */
    size_t n;
};

static void fen_add(struct fenwick *fw, size_t i, int64_t v)
{
    for (i++; i <= fw->n; i += i & -i)
        fw->f[i] += v;
}

/* The sum over positions [0, i). */
static int64_t fen_prefix(const struct fenwick *fw, size_t i)
{
    int64_t s = 0;

    for (; i; i -= i & -i)
        s += fw->f[i];
    return s;
}

struct fold_item {
    int64_t total;
    uint32_t node;
};

/* Smallest first; among equals the node made first (an ancestor before its
 * descendants), so a chain of equal nodes folds at its top in one step. */
static int cmp_fold(const void *a, const void *b)
{
    const struct fold_item *x = a, *y = b;
    if (x->total != y->total)
        return x->total < y->total ? -1 : 1;
    return x->node < y->node ? -1 : x->node > y->node;
}

/* Each node's position in depth-first order (pre) and its subtree's size:
 * children have larger indices than their parents, so sizes are summed
 * from the last node back and positions handed out from the first on. */
static void preorder(const struct tree *t, uint32_t *pre, uint32_t *size)
{
    for (size_t i = 0; i < t->len; i++)
        size[i] = 1;
    for (size_t i = t->len; i-- > 1;)
        size[t->parent[i]] += size[i];
    pre[0] = 0;
    for (size_t i = 0; i < t->len; i++) {
        uint32_t next = pre[i] + 1;
        for (uint32_t c = t->n[i].first_child; c != NONE; c = t->n[c].next_sibling) {
            pre[c] = next;
            next += size[c];
        }
    }
}

/* Folds the smallest nodes (never the root) into their parent's "other"
 * until at most max remain visible, the "other" nodes counted. A folded
 * node takes its subtree with it. Returns the nodes left visible, or
 * -ENOMEM (then nothing is folded). */
static long fold_smallest(struct tree *t, size_t max)
{
    size_t visible = t->len, n = t->len;
    struct fold_item *items = NULL;
    uint32_t *pre = NULL, *size = NULL;
    struct fenwick vis = {NULL, n}, gone = {NULL, n};
    bool *other_of = NULL;
    long ret = -ENOMEM;

    if (visible <= max)
        return visible;
    items = malloc(n * sizeof(*items));
    pre = malloc(n * sizeof(*pre));
    size = malloc(n * sizeof(*size));
    vis.f = malloc((n + 1) * sizeof(*vis.f));
    gone.f = calloc(n + 1, sizeof(*gone.f));
    other_of = calloc(n, sizeof(*other_of));
    t->gone = calloc(n, sizeof(*t->gone));
    if (!items || !pre || !size || !vis.f || !gone.f || !other_of || !t->gone)
        goto out;
    preorder(t, pre, size);
    /* Every node visible: position i's cell covers (i - lowbit(i), i]. */
    vis.f[0] = 0;
    for (size_t i = 1; i <= n; i++)
        vis.f[i] = (int64_t)(i & -i);
    for (size_t i = 1; i < n; i++)
        items[i - 1] = (struct fold_item){t->n[i].total, (uint32_t)i};
    qsort(items, n - 1, sizeof(*items), cmp_fold);
    for (size_t k = 0; k < n - 1 && visible > max; k++) {
        uint32_t i = items[k].node, p = t->parent[i];
        if (fen_prefix(&gone, pre[i] + 1)) /* inside a folded subtree */
            continue;
        t->gone[i] = true;
        t->folded = true;
        fen_add(&gone, pre[i], 1);
        fen_add(&gone, pre[i] + size[i], -1);
        /* What goes: the visible nodes under it and itself; what comes: its
         * parent's "other", with the parent's first folded child. */
        int64_t under = fen_prefix(&vis, pre[i] + size[i]) - fen_prefix(&vis, pre[i]);
        fen_add(&vis, pre[i], -under);
        if (!other_of[p]) {
            other_of[p] = true;
            fen_add(&vis, pre[p], 1);
            under--;
        }
        visible -= under;
    }
    ret = (long)visible;
out:
    free(items);
    free(pre);
    free(size);
    free(vis.f);
    free(gone.f);
    free(other_of);
    return ret;
}

struct sort_item {
    int64_t total;
    uint32_t pos, node;
};

/* Widest first; among equals, the order they were in (a stable sort). */
static int cmp_sort(const void *a, const void *b)
{
    const struct sort_item *x = a, *y = b;
    if (x->total != y->total)
        return x->total > y->total ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Orders i's children widest first (stable: among equals, the order they
 * were in), in *list's scratch (grown as needed). Insertion sort for short
 * lists, the most common by far (qsort's merge sort allocates a buffer a
 * call); qsort past 16, so a node of 100,000 children costs n log n. Both
 * give the one order cmp_sort defines. */
static int sort_node(struct tree *t, uint32_t i, struct sort_item **list, uint32_t *cap)
{
    struct node *pn = &t->n[i];

    if (pn->nchildren < 2)
        return 0;
    if (pn->nchildren > *cap) {
        struct sort_item *l = realloc(*list, pn->nchildren * sizeof(*l));
        if (!l)
            return -ENOMEM;
        *list = l;
        *cap = pn->nchildren;
    }
    struct sort_item *li = *list;
    uint32_t nl = 0;
    for (uint32_t c = pn->first_child; c != NONE && nl < *cap; c = t->n[c].next_sibling, nl++) {
        struct sort_item it = {t->n[c].total, nl, c};
        if (pn->nchildren > 16) {
            li[nl] = it;
            continue;
        }
        uint32_t k = nl;
        for (; k > 0 && li[k - 1].total < it.total; k--)
            li[k] = li[k - 1];
        li[k] = it;
    }
    if (pn->nchildren > 16)
        qsort(li, nl, sizeof(*li), cmp_sort);
    pn->first_child = li[0].node;
    for (uint32_t a = 0; a + 1 < nl; a++)
        t->n[li[a].node].next_sibling = li[a + 1].node;
    t->n[li[nl - 1].node].next_sibling = NONE;
    return 0;
}

/* Orders every sibling list widest first, so the graph reads left to
 * right by size; folded children go last. One scratch array for all;
 * O(n log n) over the tree, however wide a node. */
static int sort_children(struct tree *t)
{
    struct sort_item *list = NULL;
    uint32_t cap = 0;
    int err = 0;

    for (size_t i = 0; i < t->len && !err; i++)
        err = sort_node(t, (uint32_t)i, &list, &cap);
    free(list);
    return err;
}

static inline __attribute__((always_inline)) int emit_node(struct tree *t, uint32_t i,
                                                           struct writer *w, bool first)
{
    int64_t other = 0;
    uint32_t kids = t->folded ? 0 : t->n[i].nchildren;

    for (uint32_t c = t->folded ? t->n[i].first_child : NONE; c != NONE; c = t->n[c].next_sibling) {
        if (t->gone[c])
            sat__acc(&other, t->n[c].total);
        else
            kids++;
    }
    return put_node(w, !first, i == 0 ? 0 : t->n[i].name + 2, t->n[i].total, t->n[i].self,
                    kids + (other > 0));
}

/* The nodes in DFS order, children widest first, each node's folded
 * children summed into one "other" after its last child, appended to
 * out; nnames is the functions' count + 2. Iterative: a stack can be
 * thousands of frames deep. */
static int emit(struct tree *t, struct buf *out, size_t nnames)
{
    uint32_t *path = malloc((t->len + 1) * sizeof(*path));
    struct writer w;
    size_t depth = 0;
    int err = writer_init(&w, out, t->raw, nnames, t->len);

    if (err || !path) {
        err = err ?: -ENOMEM;
        goto out;
    }
    if ((err = emit_node(t, 0, &w, true)))
        goto out;
    path[depth++] = 0;
    uint32_t next = t->n[0].first_child;
    while (depth) {
        while (t->folded && next != NONE && t->gone[next])
            next = t->n[next].next_sibling;
        if (next != NONE) {
            if ((err = emit_node(t, next, &w, false)))
                goto out;
            path[depth++] = next;
            /* Its next sibling comes once its subtree is written: fetched
             * now, it is in cache by then (siblings sit apart in memory,
             * where the hardware's prefetch does not look). */
            if (t->n[next].next_sibling != NONE)
                __builtin_prefetch(&t->n[t->n[next].next_sibling]);
            next = t->n[next].first_child;
            continue;
        }
        /* The node on top is done: its "other", then its next sibling. */
        uint32_t done = path[--depth];
        int64_t other = 0;
        for (uint32_t c = t->folded ? t->n[done].first_child : NONE; c != NONE;
             c = t->n[c].next_sibling)
            if (t->gone[c])
                sat__acc(&other, t->n[c].total);
        if (other > 0 && (err = put_node(&w, true, 1, other, other, 0)))
            goto out;
        next = depth ? t->n[done].next_sibling : NONE;
    }
out:
    writer_end(&w);
    free(path);
    return err;
}

/* ",name,name..." (or the files) of every function, JSON-escaped. */
static int function_strings(struct buf *out, const struct store_merged *m, bool files)
{
    int err = 0;

    for (size_t i = 0; i < m->nfunctions && !err; i++) {
        err = json__raw(out, ",");
        if (!err)
            err = json__str(out, files ? m->functions[i].file : m->functions[i].name);
    }
    return err;
}

/* A stack to sort: its first eight functions from the root, 16 bits each
 * (index + 1, 0 past its end), compare as the stacks do, so most
 * comparisons read no frame (four left most of the bench's week's stacks
 * tied, each tie two cache misses into the frames). */
struct sort_stack {
    uint64_t key[2];
    uint32_t i;
};

static void root_key(const struct store_merged_stack *s, bool keyed, uint64_t key[2])
{
    for (uint32_t h = 0; h < 2; h++) {
        uint64_t k = 0;
        for (uint32_t d = 4 * h; keyed && d < 4 * h + 4; d++)
            k = k << 16 | (d < s->nframes ? s->frames[s->nframes - 1 - d] + 1 : 0);
        key[h] = k;
    }
}

/* Stacks root first, function by function; a stack before those it is a
 * prefix of. */
static int cmp_root_first(const void *a, const void *b, void *ctx)
{
    const struct store_merged *m = ctx;
    const struct sort_stack *sa = a, *sb = b;
    if (sa->key[0] != sb->key[0])
        return sa->key[0] < sb->key[0] ? -1 : 1;
    if (sa->key[1] != sb->key[1])
        return sa->key[1] < sb->key[1] ? -1 : 1;
    const struct store_merged_stack *x = &m->stacks[sa->i];
    const struct store_merged_stack *y = &m->stacks[sb->i];
    uint32_t i = x->nframes, j = y->nframes;

    while (i && j) {
        uint32_t fx = x->frames[--i], fy = y->frames[--j];
        if (fx != fy)
            return fx < fy ? -1 : 1;
    }
    return (i > 0) - (j > 0);
}

/* Sorts order[0, n) as cmp_root_first does. With keys, a counting sort
 * per key field, the deepest first (each stable, so the fields end up
 * compared root first; a field's values are function index + 1, at most
 * nfunctions), then the runs of equal keys by their frames: qsort's merge
 * sort moving 24-byte items was 6 % of the bench's week. Returns 0 or
 * -ENOMEM. */
static int sort_stacks(struct sort_stack *order, size_t n, const struct store_merged *m, bool keyed)
{
    struct sort_stack *tmp = NULL;
    size_t *count = NULL, nv = m->nfunctions + 1;

    if (!keyed || n < 1024) {
        qsort_r(order, n, sizeof(*order), cmp_root_first, (void *)m);
        return 0;
    }
    tmp = malloc(n * sizeof(*tmp));
    count = malloc((nv + 1) * sizeof(*count));
    if (!tmp || !count) {
        free(tmp);
        free(count);
        return -ENOMEM;
    }
    struct sort_stack *src = order, *dst = tmp;
    for (int f = 7; f >= 0; f--) {
        int h = f / 4, shift = 16 * (3 - f % 4);
        memset(count, 0, (nv + 1) * sizeof(*count));
        for (size_t i = 0; i < n; i++)
            count[(src[i].key[h] >> shift & 0xffff) + 1]++;
        if (count[(src[0].key[h] >> shift & 0xffff) + 1] == n)
            continue; /* one value: already in order */
        for (size_t v = 1; v <= nv; v++)
            count[v] += count[v - 1];
        for (size_t i = 0; i < n; i++)
            dst[count[src[i].key[h] >> shift & 0xffff]++] = src[i];
        struct sort_stack *t = src;
        src = dst;
        dst = t;
    }
    if (src != order)
        memcpy(order, src, n * sizeof(*order));
    for (size_t a = 0, b; a < n; a = b) {
        for (b = a + 1;
             b < n && order[b].key[0] == order[a].key[0] && order[b].key[1] == order[a].key[1]; b++)
            ;
        if (b - a > 1)
            qsort_r(order + a, b - a, sizeof(*order), cmp_root_first, (void *)m);
    }
    free(tmp);
    free(count);
    return 0;
}

/* Node path[d] is complete (no stack left goes through it): its total
 * (its self and its children's totals so far) goes to its parent, after
 * its children are sorted when sort is set (they are complete too, and
 * likely still in cache). Totals are sums of values >= 0, saturating: the
 * same whatever their order. */
static inline __attribute__((always_inline)) int finish_node(struct tree *t, const uint32_t *path,
                                                             uint32_t d, bool sort,
                                                             struct sort_item **list, uint32_t *cap)
{
    uint32_t x = path[d];
    /* most nodes have one child: no call */
    int err = sort && t->n[x].nchildren > 1 ? sort_node(t, x, list, cap) : 0;

    sat__acc(&t->n[d ? path[d - 1] : 0].total, t->n[x].total);
    return err;
}

/* How many frames from the root stacks x and y share. Frames are kept
 * leaf first, so from their ends back; two at a time (~36 a stack on the
 * bench's hour), then one by one where they part. */
static inline uint32_t shared_depth(const struct store_merged_stack *x,
                                    const struct store_merged_stack *y)
{
    uint32_t n = x->nframes < y->nframes ? x->nframes : y->nframes, d = 0;

    if (!n)
        return 0;
    const uint32_t *a = x->frames + x->nframes, *b = y->frames + y->nframes; /* past the roots */
    for (; d + 2 <= n; d += 2) {
        uint64_t u, v;
        memcpy(&u, a - d - 2, 8);
        memcpy(&v, b - d - 2, 8);
        if (u != v)
            break;
    }
    while (d < n && a[-1 - (long)d] == b[-1 - (long)d])
        d++;
    return d;
}

/* Builds the tree of m's stacks in t (folded to max_nodes when > 0),
 * children widest first; *total and *samples summed. Returns 0 or -ENOMEM
 * (t freed by the caller either way).
 *
 * The stacks go in sorted root first: a stack then shares with the one
 * before it the path down to where they part, and below that every node
 * is new (whatever else has that prefix came before, all together), so no
 * node is ever looked up among its siblings: one comparison of the two
 * stacks' frames, then appends. A hash of (parent, name) per frame cost
 * twice as much on the week of the server bench (1 million frames). The
 * nodes below where a stack parts from the one before are complete:
 * their totals go up and their children are sorted then, while the path
 * is in cache, rather than in passes over the whole tree after (866,000
 * nodes of 40 bytes on the bench's week: each pass a trip through memory).
 * Folding needs every total first, so with max_nodes the sort comes after
 * it. */
static int build_tree(struct tree *t, const struct store_merged *m, size_t max_nodes,
                      int64_t *total, int64_t *samples)
{
    struct sort_stack *order = NULL;
    struct sort_item *list = NULL;
    uint32_t *path = NULL, maxdepth = 0, lcap = 0;
    size_t frames = 0;
    bool sort = !max_nodes;
    int err = -ENOMEM;

    for (size_t i = 0; i < m->nstacks; i++) {
        if (m->stacks[i].nframes > maxdepth)
            maxdepth = m->stacks[i].nframes;
        frames += m->stacks[i].nframes;
    }
    /* At most a node a frame: room for all at once (no copy as it grows)
     * unless that is far more than a shared tree needs. */
    t->cap = frames < 1024 ? 1024 : frames < (8u << 20) ? frames + 1 : 8u << 20;
    t->n = malloc(t->cap * sizeof(*t->n));
    if (!t->n)
        return -ENOMEM;
    t->n[0] = (struct node){0, 0, NONE, NONE, NONE, 0};
    if (max_nodes && !(t->parent = malloc(t->cap * sizeof(*t->parent))))
        return -ENOMEM;
    if (t->parent)
        t->parent[0] = NONE;
    t->len = 1;
    order = malloc((m->nstacks + 1) * sizeof(*order));
    path = malloc((maxdepth + 1) * sizeof(*path));
    if (!order || !path)
        goto out;
    /* Keys only while an index + 1 fits 16 bits (else every key 0: the
     * frames decide). */
    bool keyed = m->nfunctions < 0xffff;
    for (size_t i = 0; i < m->nstacks; i++) {
        order[i].i = (uint32_t)i;
        root_key(&m->stacks[i], keyed, order[i].key);
    }
    if (sort_stacks(order, m->nstacks, m, keyed))
        goto out;
    const struct store_merged_stack *prev = NULL;
    uint32_t depth = 0; /* the path's nodes not yet complete */
    for (size_t k = 0; k < m->nstacks; k++) {
        const struct store_merged_stack *s = &m->stacks[order[k].i];
        /* The stacks are in no order in memory: the next one's root
         * frames, and the one after's record, fetched ahead. */
        if (k + 1 < m->nstacks) {
            const struct store_merged_stack *s1 = &m->stacks[order[k + 1].i];
            if (s1->nframes)
                __builtin_prefetch(&s1->frames[s1->nframes - 1]);
            if (k + 2 < m->nstacks)
                __builtin_prefetch(&m->stacks[order[k + 2].i]);
        }
        uint32_t n = s->nframes, d = 0;
        /* Saturating: many profiles' CPU can pass 64 bits, and a total
         * wrapped negative would draw nothing. */
        int64_t v = store_value__of(m->value, s->cpu_ns, s->off_cpu_ns);
        sat__acc(total, v);
        sat__acc(samples, s->samples);
        if (prev)
            d = shared_depth(s, prev);
        for (; depth > d; depth--)
            if ((err = finish_node(t, path, depth - 1, sort, &list, &lcap)))
                goto out;
        err = -ENOMEM;
        for (; d < n; d++) {
            long c = new_child(t, d ? path[d - 1] : 0, s->frames[n - 1 - d]);
            if (c < 0)
                goto out;
            path[d] = (uint32_t)c;
        }
        depth = n;
        struct node *leaf = &t->n[n ? path[n - 1] : 0];
        sat__acc(&leaf->self, v);
        sat__acc(&leaf->total, v);
        prev = s;
    }
    for (; depth > 0; depth--)
        if ((err = finish_node(t, path, depth - 1, sort, &list, &lcap)))
            goto out;
    err = sort ? sort_node(t, 0, &list, &lcap) : 0;
    if (!err && max_nodes && fold_smallest(t, max_nodes) < 0)
        err = -ENOMEM;
    if (!err && !sort)
        err = sort_children(t);
out:
    free(order);
    free(path);
    free(list);
    return err;
}

int query__write_flamegraph(const struct store_merged *m, size_t max_nodes, struct buf *out)
{
    struct tree t = {0};
    int64_t total = 0, samples = 0;
    int err;

    if ((err = build_tree(&t, m, max_nodes, &total, &samples)))
        goto out;
    int64_t off = 0; /* the off-CPU time of the stacks drawn */
    for (size_t i = 0; i < m->nstacks; i++)
        sat__acc(&off, m->stacks[i].off_cpu_ns);
    /* names: "all" (the root), "other" (folded nodes), then the functions,
     * so a function's name index is its index + 2. */
    if ((err = json__raw(out, "{\"unit\":\"nanoseconds\",\"type\":\"")) ||
        (err = json__raw(out, query__value_name(m->value))) ||
        (err = json__raw(out, "\",\"total\":")) || (err = json__i64(out, total)) ||
        (err = json__raw(out, ",\"samples\":")) || (err = json__i64(out, samples)) ||
        (err = json__raw(out, ",\"off_cpu\":")) || (err = json__i64(out, off)) ||
        (err = json__raw(out, ",\"profiles\":")) || (err = json__i64(out, m->profiles)) ||
        (err = json__raw(out, ",\"names\":[\"all\",\"other\"")))
        goto out;
    if ((err = function_strings(out, m, false)) ||
        (err = json__raw(out, "],\"files\":[\"\",\"\"")) ||
        (err = function_strings(out, m, true)) || (err = json__raw(out, "],\"nodes\":[")))
        goto out;
    if ((err = buf__reserve(out, t.len * 24)) || (err = emit(&t, out, m->nfunctions + 2)))
        goto out;
    err = json__raw(out, "]}");
out:
    tree_free(&t);
    return err;
}

int query__flamegraph_nodes(const struct store_merged *m, size_t max_nodes, struct buf *out)
{
    struct tree t = {.raw = true};
    int64_t total = 0, samples = 0;
    int err = build_tree(&t, m, max_nodes, &total, &samples);

    err = err ?: emit(&t, out, m->nfunctions + 2);
    tree_free(&t);
    return err;
}
