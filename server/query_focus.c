/* query__focus: a merged result narrowed to the stacks under a path of
 * function names (query_focus.h). */
#include "query_focus.h"

#include <string.h>

/* Whether stack s's frames, root first, begin with the names path[0..n),
 * each of len[k] bytes. */
static int stack_under(const struct store_merged *m, const struct store_merged_stack *s,
                       const char *const *path, const size_t *len, size_t n)
{
    if (s->nframes < n)
        return 0;
    for (size_t k = 0; k < n; k++) {
        uint32_t f = s->frames[s->nframes - 1 - k]; /* leaf first: the root is last */
        if (f >= m->nfunctions)
            return 0;
        const char *nm = m->functions[f].name;
        if (!nm || strncmp(nm, path[k], len[k]) || nm[len[k]])
            return 0;
    }
    return 1;
}

long query__focus(struct store_merged *m, const char *path)
{
    const char *names[QUERY_FOCUS_MAX_DEPTH];
    size_t len[QUERY_FOCUS_MAX_DEPTH];
    size_t n = 0;

    if (!m || !path || !*path)
        return -1;
    /* The path split in place of pointers and lengths: the string is the
     * caller's and stays as it is. */
    for (const char *p = path;;) {
        const char *semi = strchr(p, ';');
        size_t l = semi ? (size_t)(semi - p) : strlen(p);
        if (l == 0 || n == QUERY_FOCUS_MAX_DEPTH)
            return -1;
        names[n] = p;
        len[n++] = l;
        if (!semi)
            break;
        p = semi + 1;
    }
    size_t kept = 0;
    for (size_t i = 0; i < m->nstacks; i++) {
        if (stack_under(m, &m->stacks[i], names, len, n))
            m->stacks[kept++] = m->stacks[i];
    }
    m->nstacks = kept;
    return (long)kept;
}
