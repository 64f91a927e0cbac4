#include "dwarf_scopes.h"

#include <dwarf.h>
#include <stdbool.h>
#include <stdlib.h>

/* DIEs deeper than this in a unit are not looked into. */
#define MAX_DEPTH 256

struct scope {
    Dwarf_Addr lo, hi;
    Dwarf_Off die;
    int32_t parent; /* an entry of the enclosing function or inlined call; -1 */
    uint32_t depth; /* of function and inlined-call nesting */
};

struct cu_scopes {
    struct scope *e;
    Dwarf_Addr *max_hi; /* max_hi[i]: the highest hi of e[0..i] */
    size_t n, cap;
    bool too_big;
};

static int cmp_scope(const void *pa, const void *pb)
{
    const struct scope *a = pa, *b = pb;

    if (a->lo != b->lo)
        return a->lo < b->lo ? -1 : 1;
    return a->depth < b->depth ? -1 : a->depth > b->depth;
}

static bool is_function(int tag)
{
    return tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine;
}

/* Adds one entry per address range of die; returns the first one's index,
 * -1 when it has none (or on failure, then s->too_big). */
static int32_t add(struct cu_scopes *s, Dwarf_Die *die, int32_t parent, uint32_t depth)
{
    Dwarf_Addr base, lo, hi;
    ptrdiff_t off = 0;
    int32_t first = -1;

    while ((off = dwarf_ranges(die, off, &base, &lo, &hi)) > 0) {
        if (hi <= lo)
            continue;
        if (s->n == s->cap) {
            size_t cap = s->cap ? s->cap * 2 : 256;
            struct scope *e = cap > DWARF_SCOPES_MAX ? NULL : realloc(s->e, cap * sizeof(*e));
            if (!e) {
                s->too_big = true;
                return -1;
            }
            s->e = e;
            s->cap = cap;
        }
        if (first < 0)
            first = (int32_t)s->n;
        s->e[s->n++] = (struct scope){lo, hi, dwarf_dieoffset(die), parent, depth};
    }
    return first;
}

struct cu_scopes *cu_scopes__build(Dwarf_Die *cu)
{
    struct cu_scopes *s = calloc(1, sizeof(*s));
    Dwarf_Die stack[MAX_DEPTH];
    int32_t parent[MAX_DEPTH];
    uint32_t fdepth[MAX_DEPTH];
    int top = 0;

    if (!s)
        return NULL;
    if (dwarf_child(cu, &stack[0]) != 0)
        goto done; /* an empty unit */
    parent[0] = -1;
    fdepth[0] = 0;
    /* Depth first, with an explicit stack: stack[top] is the DIE at hand,
     * parent[top] and fdepth[top] the function entry around it. */
    for (;;) {
        Dwarf_Die *d = &stack[top];
        int32_t p = parent[top];
        uint32_t depth = fdepth[top];
        int tag = dwarf_tag(d);
        if (is_function(tag)) {
            int32_t me = add(s, d, p, depth);
            if (s->too_big)
                break;
            if (me >= 0) {
                p = me;
                depth++;
            }
        }
        /* Into its children, then on to its sibling, or up. */
        if (top + 1 < MAX_DEPTH && dwarf_child(d, &stack[top + 1]) == 0) {
            parent[top + 1] = p;
            fdepth[top + 1] = depth;
            top++;
            continue;
        }
        while (top >= 0 && dwarf_siblingof(&stack[top], &stack[top]) != 0)
            top--;
        if (top < 0)
            break;
    }
done:
    if (s->too_big) {
        cu_scopes__free(s);
        return NULL;
    }
    /* Parents point at entries by index: where each one goes is kept. */
    size_t n = s->n;
    int32_t *where = malloc((n ? n : 1) * sizeof(*where));
    if (!where || (n && !(s->max_hi = malloc(n * sizeof(*s->max_hi))))) {
        free(where);
        cu_scopes__free(s);
        return NULL;
    }
    /* Sort by address, keeping track of where each entry went. */
    struct keyed {
        struct scope sc;
        int32_t old;
    } *k = malloc((n ? n : 1) * sizeof(*k));
    if (!k) {
        free(where);
        cu_scopes__free(s);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        k[i] = (struct keyed){s->e[i], (int32_t)i};
    qsort(k, n, sizeof(*k), cmp_scope);
    for (size_t i = 0; i < n; i++)
        where[k[i].old] = (int32_t)i;
    for (size_t i = 0; i < n; i++) {
        s->e[i] = k[i].sc;
        if (s->e[i].parent >= 0)
            s->e[i].parent = where[s->e[i].parent];
        s->max_hi[i] = i && s->max_hi[i - 1] > s->e[i].hi ? s->max_hi[i - 1] : s->e[i].hi;
    }
    free(k);
    free(where);
    /* Kept for as long as the binary's names are: the doubling's spare
     * room given back (up to half of a big unit's index). */
    if (n && n < s->cap) {
        struct scope *e = realloc(s->e, n * sizeof(*e));
        if (e) {
            s->e = e;
            s->cap = n;
        }
    }
    return s;
}

void cu_scopes__free(struct cu_scopes *s)
{
    if (!s)
        return;
    free(s->e);
    free(s->max_hi);
    free(s);
}

int cu_scopes__chain(const struct cu_scopes *s, Dwarf_Addr addr, Dwarf_Off *out, int max)
{
    size_t lo = 0, hi = s ? s->n : 0;
    const struct scope *best = NULL;
    int n = 0;

    while (lo < hi) { /* the entries starting at or below addr: e[0..lo) */
        size_t mid = lo + (hi - lo) / 2;
        if (s->e[mid].lo <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* The deepest entry holding addr, walking down while one could. */
    for (size_t j = lo; j > 0 && s->max_hi[j - 1] > addr; j--) {
        const struct scope *e = &s->e[j - 1];
        if (addr < e->hi && (!best || e->depth > best->depth))
            best = e;
    }
    for (const struct scope *e = best; e && n < max;) {
        out[n++] = e->die;
        e = e->parent >= 0 ? &s->e[e->parent] : NULL;
    }
    return n;
}

size_t cu_scopes__bytes(const struct cu_scopes *s)
{
    return s ? sizeof(*s) + s->cap * sizeof(*s->e) + s->n * sizeof(*s->max_hi) : 0;
}
