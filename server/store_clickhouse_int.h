/* The ClickHouse store's private header, included by its files alone (the
 * store's face is store.h). Files by concern:
 *   store_clickhouse.c       HTTP to ClickHouse, open, stack key bases,
 *                            retention, size, close
 *   store_clickhouse_schema.c the tables, made on each node or ON CLUSTER, and
 *                            the schema version kept in the database
 *   store_clickhouse_rw.c    ingest, merge, applications, timeline, label values
 *   store_clickhouse_batch.c group commit: concurrent puts share INSERTs
 *   store_clickhouse_group.c groups (store__group_begin): a batch upload's
 *                            puts written by one INSERT per table
 *   store_clickhouse_rollup.c rollups: built, and chosen for a merge
 *   store_clickhouse_names.c function names seen, kept for later merges
 *   store_clickhouse_frames.c stacks' frames seen, kept for later merges
 *   store_clickhouse_warm.c  the frames and names caches warmed at open
 * The tables are described at the top of store_clickhouse.c.
 */
#ifndef CODEXRAY_STORE_CLICKHOUSE_INT_H
#define CODEXRAY_STORE_CLICKHOUSE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/buf.h"
#include "../common/list.h"
#include "ch_sql.h"
#include "stack_key.h"
#include "store.h"

#define CH_DAY_NS 86400000000000ll

/* psamples' arrays, and what turns them into a row a stack (stack_a,
 * stack_b, samples, cpu_ns, off_cpu_ns): "FROM (SELECT " CH_SAMPLES_COLS
 * " FROM db.psamples [FINAL] WHERE ...)" CH_SAMPLES_JOIN, the WHERE inside
 * so that only the query's profiles are expanded (a granule of the table
 * holds thousands of other profiles). */
#define CH_SAMPLES_COLS "stack_a, stack_b, samples, cpu_ns, off_cpu_ns"
#define CH_SAMPLES_JOIN " ARRAY JOIN " CH_SAMPLES_COLS

/* The largest answer read from ClickHouse, and the largest statement sent. */
#define CH_MAX_ANSWER (1u << 30)
#define CH_MAX_STATEMENT (1u << 30)
/* The longest URL of a node: a request's is it and its parameters. */
#define CH_MAX_URL 1000

/* Idle curl handles (each with its open connection) kept a node. */
#define CH_IDLE_MAX 8

struct ch_store {
    struct store base;
    struct list *urls;  /* the ClickHouse HTTP URLs given, trailing slashes dropped */
    const char **nodes; /* urls' entries; nodes[0] takes queries and inserts */
    size_t nnodes;
    char db[65];
    char cluster[65]; /* "" for one server */
    bool on_cluster;  /* one URL for a cluster: DDL runs ON CLUSTER through it */
    long timeout_ms;  /* of each request */
    struct stack_hasher hasher;
    /* Keys known to be stored, each with the day + 1 it was last stored
     * for (a cache: ClickHouse holds the truth, and a key stored twice on
     * a day collapses in its ReplacingMergeTree). */
    pthread_mutex_t mu;
    struct stack_keymap *fns, *stacks;
    struct ch_names *names;   /* function names seen (store_clickhouse_names.c) */
    struct ch_frames *frames; /* stacks' frames seen (store_clickhouse_frames.c) */
    /* Group commit (store_clickhouse_batch.c), under bmu. */
    pthread_mutex_t bmu;
    pthread_cond_t bcv;
    struct ch_batch *open; /* rows waiting for the next write; NULL when none */
    bool writing;          /* a batch is being written */
    int arriving;          /* puts decoding, not yet in a batch (chs_batch__arrive) */
    pthread_t warm;        /* warming the caches at open (store_clickhouse_warm.c) */
    bool warming;          /* warm is to be joined */
    atomic_bool closing;   /* close waits for warm: it stops between statements */
    /* Inserts into each shard's local table (store_clickhouse_shards.c):
     * nshards 0 when they go through the Distributed tables. */
    bool insert_shards; /* --clickhouse-insert shards (the default) */
    size_t nshards;
    size_t *shard_node; /* shard i's node (index into nodes) */
    uint32_t *slot;     /* the shard of a key's value % nslots */
    size_t nslots;
    /* Connections kept open between statements (chs_exec_why): a node's
     * idle curl handles, each keeping its connection, under idle_mu. */
    struct {
        void *h[CH_IDLE_MAX]; /* CURL * */
        size_t n;
    } * idle; /* one a node (nnodes) */
    pthread_mutex_t idle_mu;
};

/* Schema upgrades in place (store_clickhouse_upgrade.c). added: whether
 * column of type in table (its name without _local) is one an upgrade
 * adds; count: how many it adds to table. run: adds the columns the
 * upgrade adds wherever they lack, on every node (ON CLUSTER through the
 * one URL of a cluster), logging each, then copies version 3's samples
 * into psamples unless copied (the version row of 4 is stored: a copy was
 * whole); safe to run again, and beside another server doing the same; 0,
 * or -EAGAIN with why filled. forget: deletes the version rows other than
 * version, on every node (a mutation, done in the background; a failure
 * is logged only). drop: drops version 3's samples tables on every node
 * (a failure is logged: the next start drops them). */
bool chs_upgrade__added(const char *table, const char *column, const char *type);
int chs_upgrade__count(const char *table);
int chs_upgrade__run(struct ch_store *st, bool copied, char *why, size_t whylen);
void chs_upgrade__forget(struct ch_store *st, int version);
void chs_upgrade__drop(struct ch_store *st);

/* A function's key as merges carry it: its a and b lanes, 8 bytes each. */
#define CH_FN_KEY_LEN 16

/* The most entries of the names and the frames caches. */
#define CH_NAMES_MAX 1000000
#define CH_FRAMES_MAX 2000000

/* The cache of function names (a key's names never change). NULL when out
 * of memory; free accepts NULL. get fills name and file (valid while the
 * cache lives) and says whether key was there; put copies them in, or
 * does nothing when the cache is full. Both lock inside. */
struct ch_names;
struct ch_names *chs_names__new(void);
void chs_names__free(struct ch_names *n);
bool chs_names__get(struct ch_names *n, const void *key, const char **name, const char **file);
void chs_names__put(struct ch_names *n, const void *key, const char *name, const char *file);

/* Up to this many stacks or functions a merge lacks, the statement that
 * reads them lists their keys; past it, it asks for those of all the
 * merge's rows: a long IN list costs ClickHouse 18.16 ~30 us a key to
 * parse, the rows' keys ~30 ms for an hour. */
#define CH_FETCH_LIST_MAX 512

/* A stack's key as merges carry it: its a and b lanes, 8 bytes each. */
#define CH_STACK_KEY_LEN 16

/* A stack of a merge: its key and sums, and its frames (nframes function
 * keys, each its a then b lane) once looked up. */
struct chs_stack {
    uint64_t key[2];
    int64_t samples, cpu_ns, off_cpu_ns;
    const uint64_t *frames;
    uint32_t nframes;
};

/* The cache of stacks' frames (a key's frames never change). NULL when
 * out of memory; free accepts NULL. */
struct ch_frames;
struct ch_frames *chs_frames__new(void);
void chs_frames__free(struct ch_frames *f);

/* Copies n frames (function keys, each its a then b lane) of the stack
 * key in, unless the cache is full or has it. Locks inside. */
void chs_frames__put(struct ch_frames *f, const uint64_t key[2], const uint64_t *frames,
                     uint32_t n);

/* Starts a thread that fills the frames and names caches with the stacks
 * and functions stored for today, then yesterday, as far as the caches
 * hold (two statements a day; logged); join it before the store is freed
 * (join stops it after the statement under way).
 * A merge meanwhile reads what the caches lack, as without it. */
void chs_warm__start(struct ch_store *st);
void chs_warm__join(struct ch_store *st);

/* Fills the frames of stacks[0..n) from the cache, and those it lacks
 * with one statement over the stacks table in q's days (they then enter
 * the cache while it has room): by their keys when few are lacking, else
 * by the keys of K (a SELECT of stack_a, stack_b: the merge's rows). Frames point into the cache
 * (valid while the store is open) or into *own, which the caller frees (also on error). A key
 * ClickHouse does not have keeps frames NULL. Returns 0, -ENOMEM, -E2BIG or -EAGAIN (ClickHouse
 * failed, or answered garbage). */
int chs_frames__lookup(struct ch_store *st, const struct store_query *q, const char *K,
                       struct chs_stack *stacks, size_t n, uint64_t **own);

static inline struct ch_store *CH(struct store *s)
{
    return (struct ch_store *)s;
}

/* Runs sql (the whole body of the request) on node i; with answer, the
 * answer's text goes there (reset first). Returns 0, or -EAGAIN when
 * ClickHouse cannot be reached, times out or errs: logged with the reason. */
int chs_exec(struct ch_store *st, size_t node, const struct buf *sql, struct buf *answer);

/* chs_exec with params added to the URL's query ("a=1&b=2", or NULL), and
 * the failure's reason (as logged) in why when why is not NULL. */
int chs_exec_why(struct ch_store *st, size_t node, const char *params, const struct buf *sql,
                 struct buf *answer, char *why, size_t whylen);

/* Runs a DDL statement (no answer) on node; with st->on_cluster, sql says
 * ON CLUSTER and this returns once every node of the cluster ran it: a
 * node that failed or did not answer within the request's timeout fails
 * it. Returns 0 or -EAGAIN, the reason logged and in why (when not NULL). */
int chs_ddl(struct ch_store *st, size_t node, const struct buf *sql, char *why, size_t whylen);

/* store_clickhouse_schema.c: checks the schema version the database
 * holds on every node given (through the one URL of a cluster: that one),
 * then creates the database and the tables missing, and stores the
 * version in a new database. Returns 0, or -1 with err filled: a database
 * of another schema version (nothing is then changed in it), or a node
 * that cannot be reached or failed the DDL. */
int chs_schema__open(struct ch_store *st, char *err, size_t errlen);

/* The inserts of a put, in the order they run: a stack's functions are
 * stored before it, and its samples before the profile's row. */
enum { CH_FUNCTIONS, CH_STACKS, CH_SAMPLES, CH_PROFILES, CH_N_INSERTS };

/* A batch of puts' rows, written by one set of INSERTs (group commit). */
struct ch_batch;

/* Adds the rows (RowBinary, or empty) of one put to the open batch (the
 * put arrived before: chs_batch__arrive) and returns once ClickHouse
 * acknowledged that batch's INSERTs: 0, or
 * -EAGAIN (logged) when any failed (none of its puts is then acknowledged;
 * a retry writes the same rows, which collapse). Puts arriving while a
 * batch is written wait for the next, so concurrent uploads share
 * INSERTs: ClickHouse wants few large inserts, not many small ones. */
int chs_batch__submit(struct ch_store *st, const struct buf rows[CH_N_INSERTS]);
/* A put announces itself when it starts (arrive), so a batch about to be
 * written may wait a few ms for it; it is counted until its submit, or
 * its leave when it fails before. */
void chs_batch__arrive(struct ch_store *st);
void chs_batch__leave(struct ch_store *st);
/* Frees the open batch (at close, with no put running). */
void chs_batch__free(struct ch_batch *b);

/* store_clickhouse_shards.c. discover: on a cluster with several URLs
 * and --clickhouse-insert shards, finds each shard's node among the URLs
 * (system.clusters: shards, weights, and which shard each node is) and
 * checks the tables' sharding keys are those ch_shard.h computes; if
 * anything does not fit (one replica a shard, a URL for each), inserts
 * stay on the Distributed tables: logged either way. exec: runs the
 * batched INSERT sql of table (CH_FUNCTIONS..CH_PROFILES) as discovered:
 * through node 0, or split into one INSERT a shard into its local
 * table, all at once. Returns 0, or -EAGAIN (logged) when any failed. */
void chs_shards__discover(struct ch_store *st);
int chs_shards__exec(struct ch_store *st, int table, const struct buf *sql);

/* store_clickhouse_group.c. The most rows (bytes) a group holds before
 * it writes them and goes on (so a group's memory is bounded, whatever
 * its profiles). */
#define CH_GROUP_MAX (64u << 20)

/* A group of puts (store.h's store__group_begin), the calling thread's. */
struct ch_group;
int chs_group__begin(struct store *s, char *err, size_t errlen);
int chs_group__end(struct store *s, char *err, size_t errlen);
/* store.h's group_share and group_join: a group other threads put into
 * as well (chs_group__add and a put's look-ups under the group's lock). */
void *chs_group__share(struct store *s);
void chs_group__join(struct store *s, void *group);
/* The calling thread's open group on st, or NULL. */
struct ch_group *chs_group__current(struct ch_store *st);
/* Held by a put from its chs_group__has look-ups to its chs_group__add
 * (taken before st->mu, never after it): two puts at once never both
 * send a key new to the group. */
void chs_group__lock(struct ch_group *g);
void chs_group__unlock(struct ch_group *g);
/* Whether g holds the row of a function (stack false) or stack's key for
 * day: a later put of the group need not send it again. */
bool chs_group__has(const struct ch_group *g, bool stack, struct stack_key key, int64_t day);
/* Adds one put's rows (want_fn/want_st: the functions and stacks of p
 * whose rows are in rows) to g; past CH_GROUP_MAX, writes what g held
 * first. Returns 0, or -EAGAIN (a write failed: g fails as a whole, and
 * so does every later put into it) or -ENOMEM/-E2BIG (this put not
 * added). */
int chs_group__add(struct ch_group *g, const struct buf rows[CH_N_INSERTS],
                   const struct store_profile *p, const bool *want_fn, const bool *want_st);

/* A saturating sum of the Int64 column C (>= 0, as ingest admits them) in
 * SQL: ClickHouse's sum() wraps past int64, so a wrapped sum (negative, or
 * past 2^64 as a Float64 sum shows) is held at INT64_MAX, as sat.h does in
 * C and the SQLite store does. Two uses of the same sum() are computed once. */
#define CH_SAT_SUM(C)                                                                              \
    "if(sum(" C ") < 0 OR sum(toFloat64(" C ")) > 1.8e19, toInt64(9223372036854775807), "          \
    "sum(" C "))"

/* store_clickhouse_rollup.c: the rows a merge of q without host, pid or
 * label filters sums, into rows (a SELECT of stack_a, stack_b, samples,
 * cpu_ns: current rollups for whole buckets, raw samples for the rest),
 * the same SELECT without FINAL into keys (for the stack keys alone: a
 * retried row adds no key, and FINAL costs more than the read), and its
 * profiles count into count (a SELECT of one row, column c). One round
 * trip to choose. Returns 0 or -errno (-EAGAIN: ClickHouse failed). */
int chs_rollup__rows(struct ch_store *st, const struct store_query *q, struct buf *rows,
                     struct buf *keys, struct buf *count);
int chs_rollup(struct store *s, int64_t now_ns, int64_t *built, int64_t *pending);

/* The store_ops of store_clickhouse_rw.c (store.h says what each does). */
const struct stack_hasher *chs_hasher(struct store *s);
int chs_put(struct store *s, const struct store_profile *p, char *err, size_t errlen);
size_t chs_put_mem(struct store *s, const struct store_profile *p);
int chs_merge(struct store *s, const struct store_query *q, struct store_merged **out);
int chs_applications(struct store *s, int64_t from_ns, int64_t to_ns, struct store_app **out,
                     size_t *n);
int chs_timeline(struct store *s, const struct store_query *q, int64_t step_ns, int64_t **cpu_ns,
                 size_t *nsteps);
int chs_values(struct store *s, const struct store_query *q, struct store_values **out);

#endif
