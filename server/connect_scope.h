/* What one querier API call spans (http_connect.c): a label selector over
 * a time range turned into store queries, one per (application, host)
 * pair it selects, each with the selector's conditions on the profiles'
 * labels (identity and other labels, store.h) as store label matches.
 * Only http_connect.c uses it. */
#ifndef CODEXRAY_SERVER_CONNECT_SCOPE_H
#define CODEXRAY_SERVER_CONNECT_SCOPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "connect_req.h"
#include "store.h"

/* The (application, host) pairs one query may span. */
#define CONNECT_MAX_SERIES 1000

/* A profile type, as Pyroscope names it (id NAME:SAMPLE_TYPE:UNIT:
 * PERIOD_TYPE:PERIOD_UNIT; __name__ is NAME), and what it measures:
 * connect_types[0] CPU time, [1] off-CPU time (blocked: locks, I/O,
 * sleeps), [2] wall time (the two summed). */
struct connect_type {
    const char *id, *name, *sample;
    enum store_value value;
};
#define CONNECT_N_TYPES 3
extern const struct connect_type connect_types[CONNECT_N_TYPES];

/* The type of id, or NULL. */
const struct connect_type *connect_type__of(const char *id);

struct connect_scope {
    struct connect_sel sel;
    int64_t from, to;
    struct store_app *apps;
    size_t napps;
    struct store_query *q; /* nq entries, each with match/nmatch below */
    size_t nq;
    bool by_host;                    /* a query per host (else host is NULL: any) */
    struct store_label_match *match; /* shared by every q; strings in sel or vals */
    size_t nmatch;
    struct store_values **vals; /* per application, what regex matchers were resolved with */
    size_t nvals;
};

/* Fills s for selector (NULL: all) over [start_ms, end_ms) (0: the last
 * hour, up to now), a query per host when by_host, for profile type t
 * (NULL: the one the selector's __profile_type__ and __name__ name, CPU
 * when they name none; a selector naming another type than t selects
 * nothing): each query measures t (its value), and the off-CPU type spans
 * only the applications with off-CPU time in the range. A label's matchers become store matches: =
 * and != as they are (= "" the label absent, != "" present), =~ and !~
 * through the label's values over the range (the store's lists: a label
 * with STORE_MAX_VALUES values or more is refused for them, as is a
 * selector needing more than STORE_MAX_MATCHES matches). pid takes = only.
 * Returns 0, or an HTTP status (400, 500, 503) with msg; s is to be freed
 * either way (connect_scope__free). */
int connect_scope__init(struct store *st, struct connect_scope *s, const char *selector,
                        int64_t start_ms, int64_t end_ms, bool by_host,
                        const struct connect_type *t, char *msg, size_t msglen);

/* Calls fn(ctx, value) for each value of label key in v (host, pid, an
 * identity key or another label; value lives as long as v) until fn
 * returns non-zero. Returns how many values v has for key (its lists are
 * capped at STORE_MAX_VALUES). */
size_t connect_scope__values(const struct store_values *v, const char *key,
                             int (*fn)(void *ctx, const char *value), void *ctx);

/* s may be zeroed; leaves it zeroed. */
void connect_scope__free(struct connect_scope *s);

#endif
