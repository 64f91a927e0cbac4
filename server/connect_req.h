/* The requests of Pyroscope's querier API (Connect unary RPCs, in binary
 * protobuf or protojson) read into one plain struct, and the label
 * selectors they carry ({service_name="x", host=~"a.*"}). Only
 * http_connect.c uses it. */
#ifndef CODEXRAY_SERVER_CONNECT_REQ_H
#define CODEXRAY_SERVER_CONNECT_REQ_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum connect_method {
    CM_PROFILE_TYPES,
    CM_LABEL_NAMES,
    CM_LABEL_VALUES,
    CM_SELECT_SERIES,
    CM_SELECT_MERGE,
};

/* Caps on what a request may carry. */
#define CONNECT_MAX_STRS 64     /* matchers, group_by */
#define CONNECT_MAX_STR 4096    /* any one string */
#define CONNECT_MAX_MATCHERS 32 /* in one selector */
#define CONNECT_MAX_REGEX 1024  /* a =~ or !~ pattern */

/* Every field of the five requests; what a method does not have stays 0
 * or NULL. Strings owned (connect_req__free). */
struct connect_req {
    int64_t start_ms, end_ms;
    char *profile_type, *selector, *name;
    char **matchers, **group_by;
    size_t nmatchers, ngroup_by;
    int64_t max_nodes;
    int64_t format; /* ProfileFormat: 0, 1 the flame graph; -1 a name not known */
    double step;    /* seconds */
};

/* Reads body (len bytes) as method's request message: binary protobuf, or
 * protojson when json (field names in lowerCamelCase or as in the .proto,
 * 64-bit integers as numbers or strings, enums as names or numbers, unknown
 * fields skipped). Returns
 * 0, or -1 with msg saying why (r is then empty). */
int connect_req__decode(enum connect_method method, bool json, const void *body, size_t len,
                        struct connect_req *r, char *msg, size_t msglen);
/* r may be zeroed; leaves it zeroed. */
void connect_req__free(struct connect_req *r);

/* One matcher: name op "value"; ops '=' (=), '!' (!=), '~' (=~), '^' (!~). */
struct connect_matcher {
    char *name, *value;
    char op;
    bool has_re;
    regex_t re; /* =~ and !~: the value anchored, POSIX extended */
};

struct connect_sel {
    struct connect_matcher *m;
    size_t n;
};

/* Parses a selector ("{}", "", or {name op "value", ...}, Prometheus'
 * syntax, names also with '.' and '-' after their first character, as
 * Pyroscope clients' label keys have them; regular expressions match the
 * whole value). Returns 0, or -1
 * with msg saying why (sel then empty). */
int connect_sel__parse(const char *s, struct connect_sel *sel, char *msg, size_t msglen);
/* Whether value (NULL or "" when the label is absent) passes every matcher
 * of sel on label name. */
bool connect_sel__match(const struct connect_sel *sel, const char *name, const char *value);
/* sel may be zeroed; leaves it zeroed. */
void connect_sel__free(struct connect_sel *sel);

#endif
