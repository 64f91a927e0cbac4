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
 * hour, up to now), a query per host when by_host, profile_type the one
 * type every series has (a selector on __profile_type__ or __name__ for
 * another selects nothing). A label's matchers become store matches: =
 * and != as they are (= "" the label absent, != "" present), =~ and !~
 * through the label's values over the range (the store's lists: a label
 * with STORE_MAX_VALUES values or more is refused for them, as is a
 * selector needing more than STORE_MAX_MATCHES matches). pid takes = only.
 * Returns 0, or an HTTP status (400, 500, 503) with msg; s is to be freed
 * either way (connect_scope__free). */
int connect_scope__init(struct store *st, struct connect_scope *s, const char *selector,
                        int64_t start_ms, int64_t end_ms, bool by_host, const char *profile_type,
                        const char *type_name, char *msg, size_t msglen);

/* Calls fn(ctx, value) for each value of label key in v (host, pid, an
 * identity key or another label; value lives as long as v) until fn
 * returns non-zero. Returns how many values v has for key (its lists are
 * capped at STORE_MAX_VALUES). */
size_t connect_scope__values(const struct store_values *v, const char *key,
                             int (*fn)(void *ctx, const char *value), void *ctx);

/* s may be zeroed; leaves it zeroed. */
void connect_scope__free(struct connect_scope *s);

#endif
