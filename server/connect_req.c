/* Pyroscope's querier requests (binary protobuf through protobuf-c, or
 * protojson through a small bounded reader) into struct connect_req, and
 * its label selectors. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "connect_req.h"
#include "querier/v1/querier.pb-c.h"

static char *dup_str(const char *s, char *msg, size_t msglen)
{
    char *d;

    if (strlen(s) > CONNECT_MAX_STR) {
        snprintf(msg, msglen, "a string longer than %d bytes", CONNECT_MAX_STR);
        return NULL;
    }
    if (!(d = strdup(s)))
        snprintf(msg, msglen, "out of memory");
    return d;
}

static int dup_strs(char **in, size_t n, char ***out, size_t *nout, char *msg, size_t msglen)
{
    if (n > CONNECT_MAX_STRS) {
        snprintf(msg, msglen, "more than %d strings in a list", CONNECT_MAX_STRS);
        return -1;
    }
    *out = calloc(n ? n : 1, sizeof(**out));
    if (!*out) {
        snprintf(msg, msglen, "out of memory");
        return -1;
    }
    for (*nout = 0; *nout < n; (*nout)++)
        if (!((*out)[*nout] = dup_str(in[*nout], msg, msglen)))
            return -1;
    return 0;
}

/* --- binary --- */

static int decode_pb(enum connect_method method, const void *body, size_t len,
                     struct connect_req *r, char *msg, size_t msglen)
{
    const ProtobufCMessageDescriptor *d[] = {
        [CM_PROFILE_TYPES] = &querier__v1__profile_types_request__descriptor,
        [CM_LABEL_NAMES] = &types__v1__label_names_request__descriptor,
        [CM_LABEL_VALUES] = &types__v1__label_values_request__descriptor,
        [CM_SELECT_SERIES] = &querier__v1__select_series_request__descriptor,
        [CM_SELECT_MERGE] = &querier__v1__select_merge_stacktraces_request__descriptor,
    };
    ProtobufCMessage *pm = protobuf_c_message_unpack(d[method], NULL, len, body);
    int err = -1;

    if (!pm) {
        snprintf(msg, msglen, "the body is not a %s (binary protobuf)", d[method]->name);
        return -1;
    }
    switch (method) {
    case CM_PROFILE_TYPES: {
        Querier__V1__ProfileTypesRequest *m = (void *)pm;
        r->start_ms = m->start, r->end_ms = m->end;
        err = 0;
        break;
    }
    case CM_LABEL_NAMES: {
        Types__V1__LabelNamesRequest *m = (void *)pm;
        r->start_ms = m->start, r->end_ms = m->end;
        err = dup_strs(m->matchers, m->n_matchers, &r->matchers, &r->nmatchers, msg, msglen);
        break;
    }
    case CM_LABEL_VALUES: {
        Types__V1__LabelValuesRequest *m = (void *)pm;
        r->start_ms = m->start, r->end_ms = m->end;
        err = dup_strs(m->matchers, m->n_matchers, &r->matchers, &r->nmatchers, msg, msglen);
        err = err ?: (r->name = dup_str(m->name, msg, msglen)) ? 0 : -1;
        break;
    }
    case CM_SELECT_SERIES: {
        Querier__V1__SelectSeriesRequest *m = (void *)pm;
        r->start_ms = m->start, r->end_ms = m->end, r->step = m->step;
        err = dup_strs(m->group_by, m->n_group_by, &r->group_by, &r->ngroup_by, msg, msglen);
        err = err ?: (r->profile_type = dup_str(m->profile_typeid, msg, msglen)) ? 0 : -1;
        err = err ?: (r->selector = dup_str(m->label_selector, msg, msglen)) ? 0 : -1;
        break;
    }
    case CM_SELECT_MERGE: {
        Querier__V1__SelectMergeStacktracesRequest *m = (void *)pm;
        r->start_ms = m->start, r->end_ms = m->end, r->max_nodes = m->max_nodes;
        r->format = m->format;
        err = (r->profile_type = dup_str(m->profile_typeid, msg, msglen)) ? 0 : -1;
        err = err ?: (r->selector = dup_str(m->label_selector, msg, msglen)) ? 0 : -1;
        break;
    }
    }
    protobuf_c_message_free_unpacked(pm, NULL);
    return err;
}

/* --- protojson: one object of strings, numbers and lists of strings --- */

struct jr {
    const char *p, *end;
    char *msg;
    size_t msglen;
};

static void ws(struct jr *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static int fail(struct jr *j, const char *why)
{
    snprintf(j->msg, j->msglen, "the body is not a request in JSON: %s", why);
    return -1;
}

static int put_utf8(char *o, size_t *n, unsigned cp)
{
    if (cp < 0x80) {
        o[(*n)++] = (char)cp;
    } else if (cp < 0x800) {
        o[(*n)++] = (char)(0xc0 | cp >> 6);
        o[(*n)++] = (char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        o[(*n)++] = (char)(0xe0 | cp >> 12);
        o[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[(*n)++] = (char)(0x80 | (cp & 0x3f));
    } else {
        o[(*n)++] = (char)(0xf0 | cp >> 18);
        o[(*n)++] = (char)(0x80 | ((cp >> 12) & 0x3f));
        o[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[(*n)++] = (char)(0x80 | (cp & 0x3f));
    }
    return 0;
}

static int hex4(struct jr *j, unsigned *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++, j->p++) {
        if (j->p >= j->end || !isxdigit((unsigned char)*j->p))
            return fail(j, "a bad \\u escape");
        char c = (char)tolower((unsigned char)*j->p);
        *v = *v * 16 + (unsigned)(c <= '9' ? c - '0' : c - 'a' + 10);
    }
    return 0;
}

/* A string, unescaped into a new NUL-ended allocation (*out; NULL to skip).
 * The output is never longer than the input. */
static int jstr(struct jr *j, char **out)
{
    if (j->p >= j->end || *j->p != '"')
        return fail(j, "expected a string");
    const char *s = ++j->p;
    while (j->p < j->end && *j->p != '"')
        j->p += *j->p == '\\' ? 2 : 1;
    if (j->p >= j->end)
        return fail(j, "an unterminated string");
    size_t len = j->p - s;
    if (len > CONNECT_MAX_STR)
        return fail(j, "a string longer than 4096 bytes");
    const char *stop = j->p++;
    if (!out)
        return 0;
    char *o = malloc(len + 1);
    size_t n = 0;
    if (!o)
        return fail(j, "out of memory");
    struct jr sub = {s, stop, j->msg, j->msglen};
    while (sub.p < stop) {
        char c = *sub.p++;
        if ((unsigned char)c < 0x20)
            goto bad;
        if (c != '\\') {
            o[n++] = c;
            continue;
        }
        c = *sub.p++;
        const char *esc = strchr("\"\\/bfnrt", c);
        if (esc && c) {
            o[n++] = "\"\\/\b\f\n\r\t"[esc - "\"\\/bfnrt"];
            continue;
        }
        unsigned cp, lo;
        if (c != 'u' || hex4(&sub, &cp))
            goto bad;
        if (cp >= 0xd800 && cp < 0xdc00) { /* a pair: "\ud83d\ude00" is 12 bytes for 4 */
            if (stop - sub.p < 6 || sub.p[0] != '\\' || sub.p[1] != 'u')
                goto bad;
            sub.p += 2;
            if (hex4(&sub, &lo) || lo < 0xdc00 || lo > 0xdfff)
                goto bad;
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        } else if (cp >= 0xdc00 && cp < 0xe000) {
            goto bad;
        }
        if (cp == 0)
            goto bad;
        put_utf8(o, &n, cp);
    }
    o[n] = '\0';
    *out = o;
    return 0;
bad:
    free(o);
    return fail(j, "a bad escape or control character in a string");
}

/* A number, or a string of one (protojson's 64-bit integers). */
static int jnum(struct jr *j, double *d, int64_t *i, bool integer)
{
    char tmp[64], *end, *s = NULL;
    size_t n = 0;

    if (j->p < j->end && *j->p == '"') {
        if (jstr(j, &s))
            return -1;
        n = strlen(s);
        if (n >= sizeof(tmp)) {
            free(s);
            return fail(j, "a number too long");
        }
        memcpy(tmp, s, n + 1);
        free(s);
    } else {
        while (j->p < j->end && n + 1 < sizeof(tmp) && strchr("+-0123456789.eE", *j->p) && *j->p)
            tmp[n++] = *j->p++;
        tmp[n] = '\0';
    }
    if (!n)
        return fail(j, "expected a number");
    if (integer) {
        long long v = strtoll(tmp, &end, 10);
        if (*end)
            return fail(j, "expected a whole number");
        *i = v;
    } else {
        *d = strtod(tmp, &end);
        if (*end || !isfinite(*d))
            return fail(j, "expected a number");
    }
    return 0;
}

/* Any value, skipped (depth levels of nesting at most). */
static int jskip(struct jr *j, int depth)
{
    ws(j);
    if (j->p >= j->end)
        return fail(j, "cut short");
    if (depth > 32)
        return fail(j, "nested too deep");
    char c = *j->p;
    if (c == '"')
        return jstr(j, NULL);
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        j->p++;
        ws(j);
        if (j->p < j->end && *j->p == close)
            return j->p++, 0;
        for (;;) {
            if (c == '{') {
                ws(j);
                if (jstr(j, NULL))
                    return -1;
                ws(j);
                if (j->p >= j->end || *j->p++ != ':')
                    return fail(j, "expected ':'");
            }
            if (jskip(j, depth + 1))
                return -1;
            ws(j);
            if (j->p < j->end && *j->p == ',') {
                j->p++;
                continue;
            }
            if (j->p < j->end && *j->p == close)
                return j->p++, 0;
            return fail(j, "expected ',' or the end of a list or object");
        }
    }
    const char *s = j->p;
    while (j->p < j->end && (isalnum((unsigned char)*j->p) || strchr("+-.", *j->p)))
        j->p++;
    return j->p > s ? 0 : fail(j, "an unexpected character");
}

static int jstrs(struct jr *j, char ***out, size_t *n)
{
    if (j->p < j->end && *j->p == 'n')
        return jskip(j, 0); /* null */
    if (j->p >= j->end || *j->p++ != '[')
        return fail(j, "expected a list of strings");
    if (*out)
        return fail(j, "a field given twice");
    if (!(*out = calloc(CONNECT_MAX_STRS, sizeof(**out))))
        return fail(j, "out of memory");
    ws(j);
    if (j->p < j->end && *j->p == ']')
        return j->p++, 0;
    for (;;) {
        ws(j);
        if (*n == CONNECT_MAX_STRS)
            return fail(j, "more than 64 strings in a list");
        if (jstr(j, &(*out)[*n]))
            return -1;
        (*n)++;
        ws(j);
        if (j->p < j->end && *j->p == ',') {
            j->p++;
            continue;
        }
        if (j->p < j->end && *j->p == ']')
            return j->p++, 0;
        return fail(j, "expected ',' or ']'");
    }
}

static bool key_is(const char *k, const char *camel, const char *proto)
{
    return strcmp(k, camel) == 0 || strcmp(k, proto) == 0;
}

static int jfield(struct jr *j, const char *k, struct connect_req *r)
{
    char **s = NULL;

    if (j->p < j->end && *j->p == 'n') /* null: the default */
        return jskip(j, 0);
    if (key_is(k, "start", "start"))
        return jnum(j, NULL, &r->start_ms, true);
    if (key_is(k, "end", "end"))
        return jnum(j, NULL, &r->end_ms, true);
    if (key_is(k, "maxNodes", "max_nodes"))
        return jnum(j, NULL, &r->max_nodes, true);
    if (key_is(k, "format", "format")) {
        static const char *const names[] = {"PROFILE_FORMAT_UNSPECIFIED",
                                            "PROFILE_FORMAT_FLAMEGRAPH", "PROFILE_FORMAT_TREE"};
        char *v = NULL;
        if (j->p >= j->end || *j->p != '"')
            return jnum(j, NULL, &r->format, true);
        if (jstr(j, &v))
            return -1;
        r->format = -1;
        for (int i = 0; i < 3; i++)
            if (strcmp(v, names[i]) == 0)
                r->format = i;
        free(v);
        return 0;
    }
    if (key_is(k, "step", "step"))
        return jnum(j, &r->step, NULL, false);
    if (key_is(k, "matchers", "matchers"))
        return jstrs(j, &r->matchers, &r->nmatchers);
    if (key_is(k, "groupBy", "group_by"))
        return jstrs(j, &r->group_by, &r->ngroup_by);
    if (key_is(k, "profileTypeID", "profile_typeID"))
        s = &r->profile_type;
    else if (key_is(k, "labelSelector", "label_selector"))
        s = &r->selector;
    else if (key_is(k, "name", "name"))
        s = &r->name;
    else
        return jskip(j, 0);
    if (*s)
        return fail(j, "a field given twice");
    return jstr(j, s);
}

static int decode_json(const void *body, size_t len, struct connect_req *r, char *msg,
                       size_t msglen)
{
    struct jr j = {body, (const char *)body + len, msg, msglen};
    char *k = NULL;

    ws(&j);
    if (j.p >= j.end || *j.p++ != '{')
        return fail(&j, "expected an object");
    ws(&j);
    if (j.p < j.end && *j.p == '}') {
        j.p++;
        goto done;
    }
    for (;;) {
        ws(&j);
        if (jstr(&j, &k))
            return -1;
        ws(&j);
        if (j.p >= j.end || *j.p++ != ':' || (ws(&j), jfield(&j, k, r))) {
            free(k);
            return j.msg[0] ? -1 : fail(&j, "expected ':'");
        }
        free(k);
        k = NULL;
        ws(&j);
        if (j.p < j.end && *j.p == ',') {
            j.p++;
            continue;
        }
        if (j.p < j.end && *j.p == '}') {
            j.p++;
            break;
        }
        return fail(&j, "expected ',' or '}'");
    }
done:
    ws(&j);
    return j.p == j.end ? 0 : fail(&j, "something after the object");
}

int connect_req__decode(enum connect_method method, bool json, const void *body, size_t len,
                        struct connect_req *r, char *msg, size_t msglen)
{
    memset(r, 0, sizeof(*r));
    msg[0] = '\0';
    int err = json ? decode_json(body, len, r, msg, msglen)
                   : decode_pb(method, body, len, r, msg, msglen);
    if (err)
        connect_req__free(r);
    return err;
}

static void free_strs(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

void connect_req__free(struct connect_req *r)
{
    if (!r)
        return;
    free(r->profile_type);
    free(r->selector);
    free(r->name);
    free_strs(r->matchers, r->nmatchers);
    free_strs(r->group_by, r->ngroup_by);
    memset(r, 0, sizeof(*r));
}

/* --- label selectors --- */

static int sel_fail(struct connect_sel *sel, char *msg, size_t msglen, const char *why, size_t at)
{
    snprintf(msg, msglen, "label selector: %s at offset %zu", why, at);
    connect_sel__free(sel);
    return -1;
}

/* Whether re is one glibc compiles in bounded memory: no quantifier on a
 * quantifier ("a++", which RE2, Prometheus' engine, refuses too: glibc
 * takes gigabytes for a few dozen), none with nothing before it, counted
 * repetitions {n,m} of at most 1000 each and 1000 multiplied together (as
 * RE2's limit: glibc copies the repeated part that many times), no
 * backreferences (glibc's can take exponential time; RE2 has none), and
 * parentheses balanced (the anchors put around it must hold).
 * NULL when it is, else why not. */
static const char *regex_unbounded(const char *re)
{
    long product = 1, depth = 0;
    bool after_atom = false;

    for (const char *p = re; *p; p++) {
        if (*p == '\\') {
            if (!p[1])
                return "a trailing backslash";
            if (isdigit((unsigned char)p[1]))
                return "a backreference";
            p++;
            after_atom = true;
        } else if (*p == '[') { /* a bracket expression: to its ']' */
            const char *q = p + 1;
            if (*q == '^')
                q++;
            if (*q == ']')
                q++;
            for (; *q && *q != ']'; q++)
                if (*q == '[' && (q[1] == ':' || q[1] == '.' || q[1] == '=')) {
                    const char *e = strchr(q + 2, q[1]);
                    if (!e || e[1] != ']')
                        return "a bad bracket expression";
                    q = e + 1;
                }
            if (!*q)
                return "an unterminated bracket expression";
            p = q;
            after_atom = true;
        } else if (*p == '*' || *p == '+' || *p == '?' || *p == '{') {
            if (!after_atom)
                return "a repetition of nothing or of a repetition";
            after_atom = false;
            if (*p != '{')
                continue;
            char *end;
            long n = strtol(p + 1, &end, 10), m = n;
            if (end == p + 1)
                return "a bad {n,m}";
            if (*end == ',') {
                const char *mp = end + 1;
                m = *mp == '}' ? n : strtol(mp, &end, 10);
                if (*mp == '}')
                    end = (char *)mp;
            }
            if (*end != '}' || n < 0 || m < n || m > 1000)
                return "a bad {n,m} (at most 1000)";
            product *= m > 1 ? m : 1;
            if (product > 1000)
                return "counted repetitions past 1000 in all";
            p = end;
        } else {
            /* balanced, so the anchors around it hold: "a)|(b" would make
             * ^(a)|(b)$ */
            depth += *p == '(' ? 1 : *p == ')' ? -1 : 0;
            if (depth < 0)
                return "a ')' without its '('";
            after_atom = *p != '(' && *p != '|';
        }
    }
    return depth ? "a '(' without its ')'" : NULL;
}

int connect_sel__parse(const char *s, struct connect_sel *sel, char *msg, size_t msglen)
{
    const char *p = s;

    memset(sel, 0, sizeof(*sel));
    if (!s || !*s)
        return 0;
    if (strlen(s) > CONNECT_MAX_STR) {
        snprintf(msg, msglen, "label selector: longer than %d bytes", CONNECT_MAX_STR);
        return -1;
    }
#define FAIL(why) return sel_fail(sel, msg, msglen, why, (size_t)(p - s))
    while (isspace((unsigned char)*p))
        p++;
    if (*p++ != '{')
        FAIL("expected '{'");
    sel->m = calloc(CONNECT_MAX_MATCHERS, sizeof(*sel->m));
    if (!sel->m)
        FAIL("out of memory");
    for (;;) {
        while (isspace((unsigned char)*p))
            p++;
        if (*p == '}') /* {} and a trailing comma, as Prometheus takes them */
            break;
        if (sel->n == CONNECT_MAX_MATCHERS)
            FAIL("more than 32 matchers");
        const char *n0 = p;
        if (!isalpha((unsigned char)*p) && *p != '_')
            FAIL("expected a label name");
        /* '.' and '-' too: the keys of Pyroscope clients' labels
         * (otel.scope.name), as /ingest keeps them */
        while (isalnum((unsigned char)*p) || *p == '_' || *p == '.' || *p == '-')
            p++;
        size_t nlen = p - n0;
        while (isspace((unsigned char)*p))
            p++;
        char op;
        if (p[0] == '=' && p[1] == '~')
            op = '~', p += 2;
        else if (p[0] == '!' && p[1] == '~')
            op = '^', p += 2;
        else if (p[0] == '!' && p[1] == '=')
            op = '!', p += 2;
        else if (p[0] == '=')
            op = '=', p++;
        else
            FAIL("expected =, !=, =~ or !~");
        while (isspace((unsigned char)*p))
            p++;
        if (*p != '"')
            FAIL("expected a quoted value");
        struct connect_matcher *m = &sel->m[sel->n++];
        m->op = op;
        m->name = strndup(n0, nlen);
        m->value = malloc(strlen(p));
        if (!m->name || !m->value)
            FAIL("out of memory");
        size_t vl = 0;
        for (p++; *p && *p != '"'; p++) {
            if (*p == '\\') {
                p++;
                char c = *p == 'n' ? '\n' : *p == 't' ? '\t' : *p;
                if (!c)
                    break;
                /* A regex keeps its escapes but for \" and \\ (PromQL's rule). */
                if ((op == '~' || op == '^') && *p != '"' && *p != '\\')
                    m->value[vl++] = '\\';
                m->value[vl++] = c;
            } else {
                m->value[vl++] = *p;
            }
        }
        if (*p++ != '"')
            FAIL("an unterminated value");
        m->value[vl] = '\0';
        if (op == '~' || op == '^') {
            if (vl > CONNECT_MAX_REGEX)
                FAIL("a regular expression longer than 1024 bytes");
            const char *why = regex_unbounded(m->value);
            if (why) {
                char w[128];
                snprintf(w, sizeof(w), "a regular expression with %s", why);
                FAIL(w);
            }
            /* Anchored: Prometheus' matchers match the whole value. */
            char *re = malloc(vl + 5);
            if (!re)
                FAIL("out of memory");
            snprintf(re, vl + 5, "^(%s)$", m->value);
            int rc = regcomp(&m->re, re, REG_EXTENDED | REG_NOSUB);
            free(re);
            if (rc)
                FAIL("a bad regular expression (POSIX extended syntax)");
            m->has_re = true;
        }
        while (isspace((unsigned char)*p))
            p++;
        if (*p == ',') {
            p++;
            continue;
        }
        if (*p != '}')
            FAIL("expected ',' or '}'");
        break;
    }
    p++;
    while (isspace((unsigned char)*p))
        p++;
    if (*p)
        FAIL("something after '}'");
#undef FAIL
    return 0;
}

bool connect_sel__match(const struct connect_sel *sel, const char *name, const char *value)
{
    if (!value)
        value = "";
    for (size_t i = 0; i < sel->n; i++) {
        const struct connect_matcher *m = &sel->m[i];
        if (strcmp(m->name, name))
            continue;
        bool hit =
            m->has_re ? regexec(&m->re, value, 0, NULL, 0) == 0 : strcmp(m->value, value) == 0;
        if (hit != (m->op == '=' || m->op == '~'))
            return false;
    }
    return true;
}

void connect_sel__free(struct connect_sel *sel)
{
    if (!sel)
        return;
    for (size_t i = 0; sel->m && i < sel->n; i++) {
        free(sel->m[i].name);
        free(sel->m[i].value);
        if (sel->m[i].has_re)
            regfree(&sel->m[i].re);
    }
    free(sel->m);
    memset(sel, 0, sizeof(*sel));
}
