/* query__write_search: the paths down to the frames a search matches, as
 * a flame-graph tree with exact totals (query_search.h).
 *
 * Three passes over the stacks: which functions match (each name tested
 * once), each stack's path down to its first matching frame (grouped
 * alike by a sort, the largest kept), then every stack walked down the
 * tree of the kept paths for the totals and selves of its nodes. The tree
 * holds at most max_paths paths, so the walk costs a few node visits a
 * stack whatever the profile's size. */
#include "query_search.h"

#include <errno.h>
#include <regex.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/json.h"
#include "query.h"
#include "sat.h"

#define NONE UINT32_MAX

/* A search term, parsed: a substring or a compiled expression. */
struct matcher {
    const char *sub; /* NULL: rx */
    regex_t rx;
    bool has_rx;
};

/* A stack's path down to its first matching frame: frames[nframes - len
 * .. nframes) of stack i, and (once grouped) every alike path's time. */
struct hit {
    uint64_t hash;
    uint32_t stack, len;
    int64_t total;
};

/* A node of the tree of the kept paths. */
struct tnode {
    uint32_t fn; /* function index; NONE for the root */
    uint32_t first, next;
    int64_t total, self;
};

/* The nodes, and the edges (parent, function) -> child in an open
 * addressing table sized for every node the kept paths can make, so a
 * stack's walk down the tree costs a lookup a frame however many
 * children a node has. */
struct tree {
    struct tnode *n;
    size_t len, cap;
    uint64_t *ekey; /* parent << 32 | function + 1; 0 free */
    uint32_t *echild;
    size_t emask;
};

static void matcher_free(struct matcher *mt)
{
    if (mt->has_rx)
        regfree(&mt->rx);
    mt->has_rx = false;
}

/* The most copies of an atom an expression may compile to (rx_cost):
 * glibc's regcomp writes out every bounded repeat ("a{1,1000}" is a
 * thousand nested copies, 10 MB; "(a{1,32767})" took over 3 GB), so an
 * unchecked one is a way to exhaust the server's memory with one GET. */
#define RX_MAX_COST 1000
#define RX_MAX_NEST 64

/* The end of the bracket expression that starts at p ('['): past its
 * ']', or the string's end (regcomp then refuses it). */
static const char *rx_bracket_end(const char *p)
{
    p++;
    if (*p == '^')
        p++;
    if (*p == ']')
        p++; /* a ']' first is one of the set */
    for (; *p && *p != ']'; p++)
        if (*p == '[' && (p[1] == ':' || p[1] == '.' || p[1] == '=')) {
            const char *e = strchr(p + 2, p[1]);
            while (e && e[1] != ']')
                e = strchr(e + 1, p[1]);
            if (!e)
                return p + strlen(p);
            p = e + 1;
        }
    return *p ? p + 1 : p;
}

/* How many times a repeat at p ('{', '+') copies its atom as glibc
 * compiles it (an upper bound), with *end past it; 0 when p is no repeat
 * (a '{' not followed by a count is taken as a character). */
static size_t rx_repeat(const char *p, const char **end)
{
    char *e;
    unsigned long m, n;

    if (*p == '+') {
        *end = p + 1;
        return 2; /* x x* */
    }
    if (p[1] < '0' || p[1] > '9')
        return 0;
    m = strtoul(p + 1, &e, 10);
    n = m;
    if (*e == ',') {
        n = e[1] == '}' ? m + 1 : strtoul(e + 1, &e, 10); /* {m,}: m copies, then x* */
        if (e[0] == ',')
            e++;
    }
    if (*e != '}')
        return 0;
    *end = e + 1;
    n = n > m ? n : m;
    return n > 32768 ? 32768 : n ? n : 1;
}

/* Whether RE (len bytes) compiles to at most RX_MAX_COST copies of its
 * atoms and has no backreference. Returns 0, or -1 with why in msg. */
static int rx_cost(const char *re, size_t len, char *msg, size_t n)
{
    /* Per open group: its size so far, and the size of its last atom (what
     * a repeat after it copies). */
    size_t total[RX_MAX_NEST + 1] = {0}, last[RX_MAX_NEST + 1] = {0}, d = 0, k;
    const char *p = re, *stop = re + len, *next;

    while (p < stop) {
        size_t atom = 1;
        next = p + 1;
        switch (*p) {
        case '\\':
            if (p[1] >= '1' && p[1] <= '9') {
                snprintf(msg, n, "search: /RE/ with a backreference (\\%c) is not taken", p[1]);
                return -1;
            }
            next = p[1] ? p + 2 : p + 1;
            break;
        case '[':
            next = rx_bracket_end(p);
            break;
        case '(':
            if (d == RX_MAX_NEST) {
                snprintf(msg, n, "search: /RE/ nests more than %d groups", RX_MAX_NEST);
                return -1;
            }
            d++;
            total[d] = last[d] = 0;
            p = next;
            continue;
        case ')':
            if (!d)
                break; /* a character (glibc) */
            atom = total[d] ? total[d] : 1;
            d--;
            break;
        case '|':
            last[d] = 0; /* an alternative: the sizes add up */
            p = next;
            continue;
        case '*':
        case '?':
            p = next;
            continue;
        case '+':
        case '{':
            k = rx_repeat(p, &next);
            if (!k)
                break;
            total[d] += last[d] * (k - 1);
            last[d] *= k;
            p = next;
            goto check;
        default:
            break;
        }
        total[d] += atom;
        last[d] = atom;
        p = next < stop ? next : stop;
    check:
        if (total[d] > RX_MAX_COST || last[d] > RX_MAX_COST) {
            snprintf(msg, n,
                     "search: /RE/ too large compiled (its repeats make more than %d copies)",
                     RX_MAX_COST);
            return -1;
        }
    }
    return 0;
}

/* As the UI's search box reads it (search.js): "/RE/FLAGS" with RE not
 * empty and FLAGS lowercase letters is an expression, anything else a
 * substring. Returns 0, or -1 with msg. */
static int matcher_init(struct matcher *mt, const char *term, char *msg, size_t n)
{
    size_t len = term ? strlen(term) : 0;

    memset(mt, 0, sizeof(*mt));
    if (!len || len > QUERY_SEARCH_MAX_BYTES) {
        snprintf(
            msg, n,
            "search: a text or /regular expression/, not empty, at most " QUERY_SEARCH_MAX_BYTES_S
            " bytes");
        return -1;
    }
    const char *slash = strrchr(term, '/');
    bool re = term[0] == '/' && slash && slash - term >= 2;
    bool icase = false;
    for (const char *f = re ? slash + 1 : ""; *f && re; f++) {
        re = *f >= 'a' && *f <= 'z';
        icase |= *f == 'i';
    }
    if (!re) {
        mt->sub = term;
        return 0;
    }
    char pat[QUERY_SEARCH_MAX_BYTES + 1];
    snprintf(pat, sizeof(pat), "%.*s", (int)(slash - term - 1), term + 1);
    if (rx_cost(pat, strlen(pat), msg, n))
        return -1;
    int rc = regcomp(&mt->rx, pat, REG_EXTENDED | REG_NOSUB | (icase ? REG_ICASE : 0));
    if (rc) {
        char why[128];
        regerror(rc, &mt->rx, why, sizeof(why));
        snprintf(msg, n, "search: /%s/ is not a POSIX extended regular expression: %s", pat, why);
        return -1;
    }
    mt->has_rx = true;
    return 0;
}

static bool matches(const struct matcher *mt, const char *name)
{
    if (!name)
        return false;
    return mt->sub ? strcasestr(name, mt->sub) != NULL : regexec(&mt->rx, name, 0, NULL, 0) == 0;
}

int query__search_check(const char *term, char *msg, size_t n)
{
    struct matcher mt;
    int err = matcher_init(&mt, term, msg, n);

    matcher_free(&mt);
    return err;
}

/* Frame k of s from the root. */
static inline uint32_t frame_at(const struct store_merged_stack *s, uint32_t k)
{
    return s->frames[s->nframes - 1 - k];
}

static uint64_t path_hash(const struct store_merged_stack *s, uint32_t len)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (uint32_t k = 0; k < len; k++) {
        h ^= frame_at(s, k);
        h *= 1099511628211ull;
    }
    return h ^ len;
}

/* Paths by hash, then frames (ctx: the merge); alike ones compare 0. */
static int cmp_path(const void *a, const void *b, void *ctx)
{
    const struct store_merged *m = ctx;
    const struct hit *x = a, *y = b;
    if (x->hash != y->hash)
        return x->hash < y->hash ? -1 : 1;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    const struct store_merged_stack *s = &m->stacks[x->stack], *t = &m->stacks[y->stack];
    for (uint32_t k = 0; k < x->len; k++) {
        uint32_t f = frame_at(s, k), g = frame_at(t, k);
        if (f != g)
            return f < g ? -1 : 1;
    }
    return 0;
}

/* Largest first; alike totals by hash, so the answer is the same each time. */
static int cmp_total(const void *a, const void *b)
{
    const struct hit *x = a, *y = b;
    if (x->total != y->total)
        return x->total > y->total ? -1 : 1;
    return x->hash < y->hash ? -1 : x->hash > y->hash;
}

static size_t edge_slot(const struct tree *t, uint64_t key)
{
    size_t h = (size_t)((key * 0x9e3779b97f4a7c15ull) >> 17) & t->emask;
    while (t->ekey[h] && t->ekey[h] != key)
        h = (h + 1) & t->emask;
    return h;
}

/* The child of node p for function fn, or NONE. */
static uint32_t child_of(const struct tree *t, uint32_t p, uint32_t fn)
{
    size_t h = edge_slot(t, (uint64_t)p << 32 | ((uint64_t)fn + 1));
    return t->ekey[h] ? t->echild[h] : NONE;
}

/* A tree of the root alone, room for nodes more. Returns 0 or -ENOMEM. */
static int tree_init(struct tree *t, size_t nodes)
{
    size_t slots = 16;
    while (slots < 2 * (nodes + 1))
        slots *= 2;
    t->cap = nodes + 1;
    t->n = malloc(t->cap * sizeof(*t->n));
    t->ekey = calloc(slots, sizeof(*t->ekey));
    t->echild = malloc(slots * sizeof(*t->echild));
    t->emask = slots - 1;
    if (!t->n || !t->ekey || !t->echild)
        return -ENOMEM;
    t->n[0] = (struct tnode){NONE, NONE, NONE, 0, 0};
    t->len = 1;
    return 0;
}

static void tree_free(struct tree *t)
{
    free(t->n);
    free(t->ekey);
    free(t->echild);
}

/* Adds path (stack s's first len frames) to t, whose room (tree_init's)
 * counted every frame of it. */
static void tree_add(struct tree *t, const struct store_merged_stack *s, uint32_t len)
{
    uint32_t p = 0;
    for (uint32_t k = 0; k < len && t->len < t->cap; k++) {
        uint32_t fn = frame_at(s, k);
        uint64_t key = (uint64_t)p << 32 | ((uint64_t)fn + 1);
        size_t h = edge_slot(t, key);
        if (!t->ekey[h]) {
            uint32_t c = (uint32_t)t->len++;
            t->n[c] = (struct tnode){fn, NONE, t->n[p].first, 0, 0};
            t->n[p].first = c;
            t->ekey[h] = key;
            t->echild[h] = c;
        }
        p = t->echild[h];
    }
}

/* Every stack's time added to the nodes of t it passes through. */
static void tree_sum(struct tree *t, const struct store_merged *m, int64_t *samples)
{
    for (size_t i = 0; i < m->nstacks; i++) {
        const struct store_merged_stack *s = &m->stacks[i];
        int64_t v = store_value__of(m->value, s->cpu_ns, s->off_cpu_ns);
        uint32_t p = 0, k = 0;
        sat__acc(samples, s->samples);
        sat__acc(&t->n[0].total, v);
        for (; k < s->nframes; k++) {
            uint32_t c = child_of(t, p, frame_at(s, k));
            if (c == NONE)
                break;
            sat__acc(&t->n[c].total, v);
            p = c;
        }
        if (k == s->nframes)
            sat__acc(&t->n[p].self, v);
    }
}

/* Children ordered widest first (the flame-graph writer's order). */
static int tree_sort(struct tree *t)
{
    uint32_t *kids = malloc(t->len * sizeof(*kids));
    if (!kids)
        return -ENOMEM;
    for (size_t p = 0; p < t->len; p++) {
        size_t nk = 0;
        for (uint32_t c = t->n[p].first; c != NONE; c = t->n[c].next)
            kids[nk++] = c;
        /* Insertion sort: a node has few children (at most the paths). */
        for (size_t a = 1; a < nk; a++)
            for (size_t b = a; b > 0 && t->n[kids[b]].total > t->n[kids[b - 1]].total; b--) {
                uint32_t x = kids[b];
                kids[b] = kids[b - 1];
                kids[b - 1] = x;
            }
        t->n[p].first = nk ? kids[0] : NONE;
        for (size_t a = 0; a < nk; a++)
            t->n[kids[a]].next = a + 1 < nk ? kids[a + 1] : NONE;
    }
    free(kids);
    return 0;
}

/* The nodes, depth first, each frame's part not shown as an "other" child
 * (name 1). names[fn] is the function's index in the answer's names. */
static int emit(const struct tree *t, const uint32_t *names, struct buf *out)
{
    /* A node, or a node and its other's marker: 3 entries a node at most. */
    uint32_t *stack = malloc((3 * t->len + 1) * sizeof(*stack));
    int err = stack ? 0 : -ENOMEM;
    size_t sp = 0, count = 0;

    if (stack)
        stack[sp++] = 0;
    while (!err && sp) {
        uint32_t i = stack[--sp];
        if (i == NONE) { /* an "other" marker: its node follows */
            uint32_t p = stack[--sp];
            int64_t rest = t->n[p].total - t->n[p].self;
            for (uint32_t c = t->n[p].first; c != NONE; c = t->n[c].next)
                rest -= t->n[c].total;
            err = json__raw(out, count++ ? ",1," : "1,");
            err = err ?: json__i64(out, rest);
            err = err ?: json__raw(out, ",");
            err = err ?: json__i64(out, rest);
            err = err ?: json__raw(out, ",0");
            continue;
        }
        const struct tnode *n = &t->n[i];
        int64_t rest = n->total - n->self;
        uint32_t kids = 0;
        for (uint32_t c = n->first; c != NONE; c = t->n[c].next, kids++)
            rest -= t->n[c].total;
        err = json__raw(out, count++ ? "," : "");
        err = err ?: json__i64(out, i ? names[n->fn] : 0);
        err = err ?: json__raw(out, ",");
        err = err ?: json__i64(out, n->total);
        err = err ?: json__raw(out, ",");
        err = err ?: json__i64(out, n->self);
        err = err ?: json__raw(out, ",");
        err = err ?: json__i64(out, kids + (rest > 0));
        /* Pushed in reverse: the other last, the widest child first. */
        if (rest > 0) {
            stack[sp++] = i;
            stack[sp++] = NONE;
        }
        size_t at = sp;
        for (uint32_t c = n->first; c != NONE; c = t->n[c].next)
            stack[sp++] = c;
        for (size_t a = at, b = sp; a + 1 < b; a++, b--) {
            uint32_t x = stack[a];
            stack[a] = stack[b - 1];
            stack[b - 1] = x;
        }
    }
    free(stack);
    return err;
}

/* "names" and "files" of the functions t uses, numbering them in names
 * (2 and up: 0 is "all", 1 "other"). */
static int emit_names(const struct tree *t, const struct store_merged *m, uint32_t *names,
                      struct buf *out)
{
    uint32_t next = 2;
    int err = json__raw(out, ",\"names\":[\"all\",\"other\"");
    for (size_t i = 1; i < t->len && !err; i++) {
        uint32_t fn = t->n[i].fn;
        if (names[fn])
            continue;
        names[fn] = next++;
        err = json__raw(out, ",");
        err = err ?: json__str(out, m->functions[fn].name);
    }
    err = err ?: json__raw(out, "],\"files\":[\"\",\"\"");
    /* The same order: a function's first node. */
    for (size_t i = 1, seen = 2; i < t->len && !err; i++) {
        uint32_t fn = t->n[i].fn;
        if (names[fn] != seen)
            continue;
        seen++;
        err = json__raw(out, ",");
        err = err ?: json__str(out, m->functions[fn].file ? m->functions[fn].file : "");
    }
    return err ?: json__raw(out, "]");
}

/* Each stack's path down to its first matching frame, in hits; *matched
 * the time of the stacks with one, *deep whether one lay too deep. */
static size_t find_hits(const struct store_merged *m, const uint8_t *match, struct hit *hits,
                        int64_t *matched, bool *deep)
{
    size_t nh = 0;
    for (size_t i = 0; i < m->nstacks; i++) {
        const struct store_merged_stack *s = &m->stacks[i];
        for (uint32_t k = 0; k < s->nframes; k++) {
            uint32_t f = frame_at(s, k);
            if (f >= m->nfunctions)
                break; /* not a function of the merge: no name to match */
            if (!match[f])
                continue;
            sat__acc(matched, store_value__of(m->value, s->cpu_ns, s->off_cpu_ns));
            if (k >= QUERY_SEARCH_MAX_DEPTH) {
                *deep = true;
                break;
            }
            hits[nh++] = (struct hit){path_hash(s, k + 1), (uint32_t)i, k + 1,
                                      store_value__of(m->value, s->cpu_ns, s->off_cpu_ns)};
            break;
        }
    }
    return nh;
}

/* Alike paths (sorted together) made one, their times summed. Returns how
 * many distinct. */
static size_t group_hits(const struct store_merged *m, struct hit *hits, size_t nh)
{
    size_t k = 0;
    qsort_r(hits, nh, sizeof(*hits), cmp_path, (void *)m);
    for (size_t i = 0; i < nh; i++) {
        if (k && cmp_path(&hits[k - 1], &hits[i], (void *)m) == 0)
            sat__acc(&hits[k - 1].total, hits[i].total);
        else
            hits[k++] = hits[i];
    }
    return k;
}

int query__write_search(const struct store_merged *m, const char *term, size_t max_paths,
                        struct buf *out)
{
    struct matcher mt;
    struct tree t = {0};
    struct hit *hits = NULL;
    uint8_t *match = NULL;
    uint32_t *names = NULL;
    int64_t matched = 0, samples = 0, off = 0;
    bool deep = false;
    char msg[8];
    int err = -EINVAL;

    if (matcher_init(&mt, term, msg, sizeof(msg)))
        return err;
    err = -ENOMEM;
    if (!max_paths || max_paths > QUERY_SEARCH_MAX_PATHS)
        max_paths = QUERY_SEARCH_MAX_PATHS;
    match = calloc(m->nfunctions + 1, 1);
    names = calloc(m->nfunctions + 1, sizeof(*names));
    hits = malloc((m->nstacks + 1) * sizeof(*hits));
    if (!match || !names || !hits)
        goto out;
    for (size_t f = 0; f < m->nfunctions; f++)
        match[f] = matches(&mt, m->functions[f].name);
    size_t nh = find_hits(m, match, hits, &matched, &deep);
    size_t paths = group_hits(m, hits, nh);
    qsort(hits, paths, sizeof(*hits), cmp_total);
    size_t kept = paths < max_paths ? paths : max_paths, nodes = 0;
    for (size_t i = 0; i < kept; i++)
        nodes += hits[i].len;
    if ((err = tree_init(&t, nodes)))
        goto out;
    for (size_t i = 0; i < kept; i++)
        tree_add(&t, &m->stacks[hits[i].stack], hits[i].len);
    tree_sum(&t, m, &samples);
    if ((err = tree_sort(&t)))
        goto out;
    for (size_t i = 0; i < m->nstacks; i++)
        sat__acc(&off, m->stacks[i].off_cpu_ns);
    if ((err = json__raw(out, "{\"unit\":\"nanoseconds\",\"type\":\"")) ||
        (err = json__raw(out, query__value_name(m->value))) ||
        (err = json__raw(out, "\",\"total\":")) || (err = json__i64(out, t.n[0].total)) ||
        (err = json__raw(out, ",\"samples\":")) || (err = json__i64(out, samples)) ||
        (err = json__raw(out, ",\"off_cpu\":")) || (err = json__i64(out, off)) ||
        (err = json__raw(out, ",\"profiles\":")) || (err = json__i64(out, m->profiles)) ||
        (err = json__raw(out, ",\"matched\":")) || (err = json__i64(out, matched)) ||
        (err = json__raw(out, ",\"paths\":")) || (err = json__i64(out, (int64_t)paths)) ||
        (err = json__raw(out, ",\"kept\":")) || (err = json__i64(out, (int64_t)kept)) ||
        (err = json__raw(out, kept < paths || deep ? ",\"capped\":true" : ",\"capped\":false")))
        goto out;
    if ((err = emit_names(&t, m, names, out)) || (err = json__raw(out, ",\"nodes\":[")) ||
        (err = emit(&t, names, out)))
        goto out;
    err = json__raw(out, "]}");
out:
    matcher_free(&mt);
    free(match);
    free(names);
    free(hits);
    tree_free(&t);
    return err;
}
