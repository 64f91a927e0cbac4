/* The store interface: what the server needs of wherever profiles live.
 * SQLite (store_sqlite.c) is the default; a ClickHouse store implements the
 * same operations for clusters.
 *
 * Profiles arrive in the store's own terms, close to pprof's: a function
 * table (name, file), locations (the functions of one frame, inlined ones
 * first) and stacks of location indices, leaf first, each with its counts
 * and an optional label set; functions and stacks carry their keys
 * (stack_key.h), which the caller computes with the store's hasher. Stores deduplicate functions,
 * stacks and label sets across profiles, so a query sums stored counts and never re-parses a stored
 * pprof.
 *
 * Every operation is safe to call from several threads at once.
 */
#ifndef CODEXRAY_SERVER_STORE_H
#define CODEXRAY_SERVER_STORE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "stack_key.h"

struct store_function {
    const char *name;
    const char *file; /* "" when unknown */
};

/* A function of a profile going in: its name and file, and its key by the
 * store's hasher (store__hasher). */
struct store_put_function {
    struct store_function f;
    struct stack_key key;
};

struct store_label {
    const char *key;
    const char *value;
};

struct store_labelset {
    const struct store_label *labels;
    size_t n;
};

/* A pprof location: one frame, or several where calls were inlined. */
struct store_location {
    const uint32_t *functions; /* indices into store_profile.functions, innermost first */
    uint32_t nfunctions;
};

/* key: the stack's key by the store's hasher, over its functions' keys.
 * off_cpu_ns: the time its threads spent blocked (pprof's off_cpu sample
 * type; 0 in a CPU-only profile). */
struct store_stack {
    const uint32_t *locations; /* indices into store_profile.locations, leaf first */
    uint32_t nlocations;
    uint32_t labelset; /* index into store_profile.labelsets, or STORE_NO_LABELS */
    struct stack_key key;
    int64_t samples;
    int64_t cpu_ns;
    int64_t off_cpu_ns;
};

/* What a query measures: CPU time, off-CPU time (blocked: locks, I/O,
 * sleeps), or wall time, the two summed on one tree. Zero is CPU, so a
 * zeroed store_query asks for CPU as before off-CPU existed. */
enum store_value { STORE_VALUE_CPU = 0, STORE_VALUE_OFF_CPU, STORE_VALUE_WALL };

/* A stack's value as v measures it; the wall sum saturates at INT64_MAX. */
static inline int64_t store_value__of(enum store_value v, int64_t cpu_ns, int64_t off_cpu_ns)
{
    if (v == STORE_VALUE_CPU)
        return cpu_ns;
    if (v == STORE_VALUE_OFF_CPU)
        return off_cpu_ns;
    return cpu_ns > INT64_MAX - off_cpu_ns ? INT64_MAX : cpu_ns + off_cpu_ns;
}

#define STORE_NO_LABELS UINT32_MAX

/* The labels that say where a process runs, kept per profile so queries
 * can filter and list by them: container_id, pod, namespace, container,
 * systemd_unit, in that order. */
#define STORE_N_IDENTITY 5
extern const char *const store_identity_keys[STORE_N_IDENTITY];

/* A profile's other labels (a Pyroscope client's region=eu, ...): kept
 * beside the identity labels, matched and listed like them. At most
 * STORE_MAX_LABELS a profile; a key is [A-Za-z0-9_.-], at most
 * STORE_LABEL_KEY_MAX bytes, none of the identity keys nor host, pid or
 * service_name; a value at most STORE_LABEL_VALUE_MAX bytes, no control
 * characters (the caller checks; the store refuses a profile past these
 * with -E2BIG). */
#define STORE_MAX_LABELS 16
#define STORE_LABEL_KEY_MAX 64
#define STORE_LABEL_VALUE_MAX 256

/* A query's condition on one label of a profile (an identity key or
 * another label): the profile has key = value (value NULL: key with any
 * value), or, negate, has not. */
struct store_label_match {
    const char *key, *value;
    int negate;
};
#define STORE_MAX_MATCHES 1024 /* in one query */

struct store_profile {
    const char *app;
    const char *host;
    const char *identity[STORE_N_IDENTITY]; /* "" or NULL when none; no control characters */
    int64_t pid;                            /* 0 when the profile spans processes */
    int64_t time_ns, duration_ns, period_ns;
    const struct store_put_function *functions;
    size_t nfunctions;
    const struct store_location *locations;
    size_t nlocations;
    const struct store_stack *stacks;
    size_t nstacks;
    const struct store_labelset *labelsets;
    size_t nlabelsets;
    const struct store_label *labels; /* its other labels (STORE_MAX_LABELS), any order */
    size_t nlabels;
    size_t bytes_in; /* the request body as it came, for the bytes-stored ratio */
};

struct store_query {
    const char *app;
    int64_t from_ns, to_ns;                 /* [from, to) over profile start times */
    const char *host;                       /* NULL = any */
    int64_t pid;                            /* 0 = any */
    const char *identity[STORE_N_IDENTITY]; /* NULL = any */
    /* A merge keeps the stacks with some of it (CPU: samples or CPU time;
     * they carry both values either way); a timeline sums it. */
    enum store_value value;
    const struct store_label_match *match; /* all must hold; at most STORE_MAX_MATCHES */
    size_t nmatch;
};

/* Distinct values over a range: [0] hosts, [1] pids (as text), then the
 * identity keys in store_identity_keys' order. At most STORE_MAX_VALUES
 * each. labels: the other labels as "key=value", each pair once, at most
 * STORE_MAX_VALUES. Owned by the caller; free with store_values__free. */
#define STORE_MAX_VALUES 1000
struct store_values {
    char **v[STORE_N_IDENTITY + 2];
    size_t n[STORE_N_IDENTITY + 2];
    char **labels;
    size_t nlabels;
    int matched; /* some profile matched (it may have no label at all) */
};

/* A merged result: its own compact function table and one entry per
 * distinct stack. Owned by the caller; free with store_merged__free. */
struct store_merged_stack {
    uint32_t *frames; /* indices into functions, leaf first */
    uint32_t nframes;
    int64_t samples, cpu_ns, off_cpu_ns;
};

struct store_merged {
    struct store_function *functions; /* strings owned by the result */
    size_t nfunctions;
    struct store_merged_stack *stacks;
    size_t nstacks;
    int64_t profiles;       /* how many stored profiles went into it */
    enum store_value value; /* the query's: what the writers (query.h) draw */
    void *mem;              /* the store's allocation behind the arrays */
    uint32_t *frame_mem;    /* when set, every stack's frames are in it (one
                               allocation, not one a stack) */
};

struct store_app {
    char *name;
    char **hosts;
    size_t nhosts;
    int64_t last_seen_ns; /* the end of its newest profile */
    int64_t cpu_ns;       /* over the asked range */
    int64_t off_cpu_ns;   /* the same, blocked */
};

struct store;

struct store_ops {
    const struct stack_hasher *(*hasher)(struct store *s);
    int (*put)(struct store *s, const struct store_profile *p, char *err, size_t errlen);
    int (*group_begin)(struct store *s, char *err, size_t errlen); /* NULL: no groups */
    int (*group_end)(struct store *s, char *err, size_t errlen);
    /* Optional (NULL: a group is its thread's alone). */
    void *(*group_share)(struct store *s);
    void (*group_join)(struct store *s, void *group);
    size_t (*put_mem)(struct store *s, const struct store_profile *p);
    int (*merge)(struct store *s, const struct store_query *q, struct store_merged **out);
    int (*applications)(struct store *s, int64_t from_ns, int64_t to_ns, struct store_app **out,
                        size_t *n);
    int (*values)(struct store *s, const struct store_query *q, struct store_values **out);
    int (*timeline)(struct store *s, const struct store_query *q, int64_t step_ns, int64_t **cpu_ns,
                    size_t *nsteps);
    /* Optional (NULL: fn_timeline.c composes it from merges, one a step);
     * called through fn_timeline__get, whose contract it keeps. */
    int (*fn_timeline)(struct store *s, const struct store_query *q, int64_t step_ns,
                       const char *fn, bool hide_interp, int64_t **self_ns, int64_t **total_ns,
                       size_t *nsteps);
    int (*retain)(struct store *s, int64_t older_than_ns, int64_t *deleted);
    int (*rollup)(struct store *s, int64_t now_ns, int64_t *built, int64_t *pending);
    int64_t (*size_bytes)(struct store *s);
    void (*close)(struct store *s);
};

struct store {
    const struct store_ops *ops;
};

/* Opens (creating) the SQLite store under dir. NULL with err filled. */
struct store *store_sqlite__open(const char *dir, char *err, size_t errlen);

/* Opens (creating its tables) the ClickHouse store: urls, a list
 * (common/list.h: commas or spaces, empty entries skipped, trailing slashes
 * dropped) of http:// or https:// URLs of ClickHouse (with cluster, its
 * nodes, where the tables are made; one URL: made ON CLUSTER), cluster
 * (NULL or "" for one server) and db name plain identifiers; insert
 * "shards" (or NULL: inserts go into each shard's local table when every
 * shard's node is among urls, else through the Distributed tables) or
 * "distributed" (always through them); timeout_ms bounds each request.
 * NULL with err filled ("--clickhouse: ..." for a bad list or insert),
 * also for a database of another schema version (refused before anything
 * is changed in it: store_clickhouse_schema.c). Its operations return
 * -EAGAIN when ClickHouse cannot be reached, errs, times out or answers
 * garbage (logged): the caller answers 503. */
struct store *store_clickhouse__open(const char *urls, const char *cluster, const char *db,
                                     const char *insert, long timeout_ms, char *err, size_t errlen);

/* How the store keys stacks and functions: the caller of store__put
 * computes the keys of what it puts with it (as it decodes, where it is
 * cheapest). Lives as long as s. */
static inline const struct stack_hasher *store__hasher(struct store *s)
{
    return s->ops->hasher(s);
}

/* Durably stores p. The keys in p must be the hasher's: a stack is stored
 * once per key, so a wrong key files samples under another stack. Returns 0, -E2BIG when p is past
 * the store's size limits, or another negative value for a store failure, with err filled (the
 * profile is not stored, and nothing stored before is touched). */
static inline int store__put(struct store *s, const struct store_profile *p, char *err,
                             size_t errlen)
{
    return s->ops->put(s, p, err, errlen);
}

/* Opens a group of puts made durable together, by store__group_end: one
 * disk flush (SQLite) or one INSERT per table (ClickHouse) for many
 * profiles (a batch upload) instead of one each. Until then the calling
 * thread's store__put stores into the group: a put that fails leaves
 * nothing of its profile and keeps the others'; SQLite's other threads'
 * writes wait. Returns 0, -EOPNOTSUPP when the store has no groups (each
 * put is then durable alone), or another negative value with err filled.
 * One group per thread at a time; end it soon (SQLite: it holds the
 * store's writer; ClickHouse: its rows wait in memory, at most 64 MiB). */
static inline int store__group_begin(struct store *s, char *err, size_t errlen)
{
    if (!s->ops->group_begin) {
        snprintf(err, errlen, "this store has no groups");
        return -EOPNOTSUPP;
    }
    return s->ops->group_begin(s, err, errlen);
}

/* Whether a group can take puts from several threads at once
 * (store__group_share): ClickHouse's can (its rows are gathered for one
 * write), SQLite's cannot (its one writer). */
static inline bool store__group_shares(const struct store *s)
{
    return s->ops->group_share && s->ops->group_join;
}

/* The calling thread's open group, for another thread to join while the
 * caller's group stays open (store__group_shares must hold). */
static inline void *store__group_share(struct store *s)
{
    return s->ops->group_share(s);
}

/* Makes group (from store__group_share) the calling thread's too, so its
 * store__put stores into it, or (NULL) the thread's no longer. The thread
 * that began the group ends it, once every thread that joined has left. */
static inline void store__group_join(struct store *s, void *group)
{
    s->ops->group_join(s, group);
}

/* Ends the calling thread's group: returns 0 when every put of it that
 * returned 0 is durable, or a negative value with err filled when they
 * are to be taken as not stored: none is (SQLite, and a ClickHouse group
 * under its 64 MiB), or some written before may be (a larger ClickHouse
 * group; sent again, they count once). */
static inline int store__group_end(struct store *s, char *err, size_t errlen)
{
    return s->ops->group_end(s, err, errlen);
}

/* The most memory store__put allocates for p (beyond p itself), for a
 * caller that counts a request's memory. */
static inline size_t store__put_mem(struct store *s, const struct store_profile *p)
{
    return s->ops->put_mem(s, p);
}

/* The merge of every profile matching q. Returns 0 (an empty result when
 * none matched) or -errno. */
static inline int store__merge(struct store *s, const struct store_query *q,
                               struct store_merged **out)
{
    return s->ops->merge(s, q, out);
}

/* Applications with a profile starting in [from, to), by CPU used, each
 * with its CPU and off-CPU time over the range. */
static inline int store__applications(struct store *s, int64_t from_ns, int64_t to_ns,
                                      struct store_app **out, size_t *n)
{
    return s->ops->applications(s, from_ns, to_ns, out, n);
}

/* The hosts, pids and identity labels of the profiles q matches. */
static inline int store__values(struct store *s, const struct store_query *q,
                                struct store_values **out)
{
    return s->ops->values(s, q, out);
}

/* q->value (CPU, off-CPU or both) per step over [from, to): (to - from) /
 * step entries, caller frees. */
static inline int store__timeline(struct store *s, const struct store_query *q, int64_t step_ns,
                                  int64_t **cpu_ns, size_t *nsteps)
{
    return s->ops->timeline(s, q, step_ns, cpu_ns, nsteps);
}

/* Deletes profiles that started before older_than_ns. */
static inline int store__retain(struct store *s, int64_t older_than_ns, int64_t *deleted)
{
    return s->ops->retain(s, older_than_ns, deleted);
}

/* Precomputes what queries read: the rollups of buckets complete by now_ns
 * that new profiles made stale. Called from a background thread; a store
 * without rollups does nothing. built: how many were made; pending: how many
 * complete buckets still wait (what a failure left). Returns 0 or -errno. */
static inline int store__rollup(struct store *s, int64_t now_ns, int64_t *built, int64_t *pending)
{
    *built = *pending = 0;
    return s->ops->rollup ? s->ops->rollup(s, now_ns, built, pending) : 0;
}

static inline int64_t store__size_bytes(struct store *s)
{
    return s->ops->size_bytes(s);
}

/* s may be NULL. */
static inline void store__close(struct store *s)
{
    if (s)
        s->ops->close(s);
}

void store_merged__free(struct store_merged *m);
void store_values__free(struct store_values *v);
void store_apps__free(struct store_app *apps, size_t n);

#endif
