/* The SQLite store's private header: what its files share, included by
 * them alone (the store's face is store.h). Files by concern:
 *   store_sqlite.c        open, schema and migrations, stack key bases, close
 *   store_sqlite_put.c    ingest: functions, stacks, label sets, profiles
 *   store_sqlite_read.c   merge, applications, timeline, label values
 *   store_sqlite_fn.c     a function's timeline
 *   store_sqlite_maint.c  rollups, retention, orphan collection, size
 * The tables and the data blob format are described at the top of
 * store_sqlite.c.
 */
#ifndef CODEXRAY_STORE_SQLITE_INT_H
#define CODEXRAY_STORE_SQLITE_INT_H

#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/hmap.h"
#include "../common/varint.h"
#include "stack_key.h"
#include "store.h"
#include "store_common.h"

/* Entries in each id cache before it is dropped and refilled from the
 * database: the caches are a speed-up, never the truth. */
#define CACHE_MAX 2000000
/* Stack keys cached: 24 bytes each, at most 2x that in the table. */
#define STACK_CACHE_MAX 4000000

/* The rows a store_query selects (?11: its matches as store_match__spec
 * writes them, tested by the SQL function cx_labels that sqls_open_db
 * adds); bind_query (store_sqlite_read.c) fills its parameters. The
 * (app, time_ns) index serves it; pid and host only filter. */
#define LABEL_FILTER(n) " AND (?" #n " IS NULL OR instr(labels, ?" #n ") > 0)"
#define QUERY_FILTER                                                                               \
    "app = ?1 AND time_ns >= ?2 AND time_ns < ?3 AND (?4 = 0 OR pid = ?4) "                        \
    "AND (?5 IS NULL OR host = ?5)" LABEL_FILTER(6) LABEL_FILTER(7) LABEL_FILTER(8)                \
        LABEL_FILTER(9) LABEL_FILTER(10) " AND (?11 IS NULL OR cx_labels(labels, ?11))"

struct bits; /* a growable bit set (store_sqlite_maint.c) */

/* The SQLite store's rollup levels, finest first: the number a level has
 * in rollups and rollup_dirty, and its buckets' length (each a multiple of
 * the one before, so buckets nest). 0 and 1 are the levels every store has
 * (store_common.h's level_ns); the minute (2) and the day (3) came later,
 * numbered after them so that rows written before keep their meaning, and
 * a server from before them passes over their rows. A minute serves only
 * the ragged ends of a range (a range's minutes inside a whole 10-minute
 * bucket are that bucket's rollup), so a query reads at most 18 of them;
 * it is kept only where it halves the rows its profiles hold (replicas
 * sharing their stacks), not for an application of one process, where it
 * would repeat each profile. The day makes a week 6 rollups, not 56. */
struct sqls_level {
    int id;
    int64_t ns;
};
#define SQLS_LEVELS 4
#define SQLS_MINUTE 0 /* the index of the minute in sqls_levels */
static const struct sqls_level sqls_levels[SQLS_LEVELS] = {{2, 60ll * 1000000000},
                                                           {0, 600ll * 1000000000},
                                                           {1, 10800ll * 1000000000},
                                                           {3, 86400ll * 1000000000}};

/* The statements a merge reads through, one set per connection: queries
 * read on rdb, the rollup builder on wdb inside its write transaction. */
struct readers {
    sqlite3_stmt *profiles; /* data of raw profiles: QUERY_FILTER */
    sqlite3_stmt *rollups;  /* current rollups of an app, one level, in a range */
    sqlite3_stmt *rollup;   /* one rollup's profiles and data */
};

struct sqlite_store {
    struct store base;
    char *path;
    sqlite3 *wdb, *rdb;
    pthread_mutex_t wmu, rmu;
    /* writer's caches: key -> id (rowid) */
    struct hmap *labelset_ids;
    struct stack_keymap *fn_ids, *stack_ids; /* function key, stack key -> id */
    struct stack_hasher hasher;
    sqlite3_stmt *ins_fn, *sel_fn, *ins_stack, *sel_stack, *sel_frames, *ins_ls, *sel_ls,
        *ins_profile, *sel_profile, *ins_dirty;
    struct readers wr; /* the rollup builder's, on wdb */
    /* reader's statements */
    struct readers rd;
    sqlite3_stmt *q_timeline, *q_stack, *q_fn;
    /* Orphan collection (collect_orphans): while it runs, puts mark what
     * they use, under wmu, so nothing it found unused but a put just took
     * is deleted. */
    bool gc_active, gc_oom;
    struct bits *gc_stacks, *gc_fns, *gc_labelsets;
    int64_t gc_last_ns; /* when it last ran, monotonic; 0 never */
    int64_t gc_pending; /* profiles deleted since */
};

static inline struct sqlite_store *S(struct store *s)
{
    return (struct sqlite_store *)s;
}

/* --- data blobs: see the top of store_sqlite.c --- */

#define BLOB_ROW_MAX 50  /* five varints */
#define BLOB_HEAD_MAX 12 /* the 0 byte, the period, the off-CPU mark */

/* Starts a blob at p (BLOB_HEAD_MAX bytes of room); returns the end. With
 * off_cpu its rows carry off-CPU time as a fifth varint, which a stack id
 * of 0 (never a real one: ids are rowids from 1) announces, so blobs of
 * CPU-only profiles keep their size and older blobs read as before. */
static inline unsigned char *blob_begin(unsigned char *p, int64_t period, bool off_cpu)
{
    *p++ = 0;
    p = varint__write(p, (uint64_t)period);
    if (off_cpu)
        *p++ = 0;
    return p;
}

/* One stack's row at p (BLOB_ROW_MAX bytes of room); returns the end; off
 * written only in a blob begun with off_cpu. The arithmetic wraps the same
 * way both ways, so any values come back exact. */
static inline unsigned char *blob_put(unsigned char *p, int64_t period, uint64_t sid, uint64_t ls,
                                      int64_t samples, int64_t cpu, bool off_cpu, int64_t off)
{
    int64_t d = (int64_t)((uint64_t)cpu - (uint64_t)samples * (uint64_t)period);
    p = varint__write(p, sid);
    p = varint__write(p, ls);
    p = varint__write(p, (uint64_t)samples);
    p = varint__write(p, ((uint64_t)d << 1) ^ (uint64_t)(d >> 63));
    return off_cpu ? varint__write(p, (uint64_t)off) : p;
}

/* Sets bit i of b. Returns 0 or -ENOMEM (then the set is unchanged). */
int sqls_bits_set(struct bits *b, uint64_t i);

/* Opens (creating) the database at path with the store's pragmas into *db.
 * Returns 0, or -1 with err filled (*db may be set: the caller closes it). */
int sqls_open_db(const char *path, sqlite3 **db, char *err, size_t errlen);

/* Sums by stack id. Stack ids are rowids, dense from 1: up to DENSE_MAX
 * they index an array directly; ids past it (or past the table's size
 * when the merge began) go through a hash map. */
#define DENSE_MAX (16u << 20)

struct acc_val {
    uint64_t sid;
    int64_t samples, cpu, off;
};

struct merge_acc {
    uint32_t *dense; /* stack id -> index into vals + 1 */
    uint64_t ndense;
    struct hmap *stacks; /* the rest: stack id -> index into vals */
    struct acc_val *vals;
    size_t nvals, cap;
    uint64_t rows; /* blob rows summed in */
};

/* Zeroes a and sizes its dense index from db's stacks. Returns 0 or -ENOMEM. */
int sqls_acc_init(struct merge_acc *a, sqlite3 *db);
/* Frees what a holds (not a itself); a zeroed a is fine. */
void sqls_acc_free(struct merge_acc *a);
/* Sums what q selects into a through r, rollups of sqls_levels[0,
 * max_level) where they serve; counts the profiles in *profiles. Returns 0
 * or -errno. Run inside one transaction. */
int sqls_accumulate(struct readers *r, const struct store_query *q, int max_level,
                    struct merge_acc *a, int64_t *profiles);

/* The store_ops, by file (store.h says what each does). */
/* store_sqlite_put.c */
const struct stack_hasher *sqls_hasher(struct store *s);
int sqls_put(struct store *s, const struct store_profile *p, char *err, size_t errlen);
int sqls_group_begin(struct store *s, char *err, size_t errlen);
int sqls_group_end(struct store *s, char *err, size_t errlen);
size_t sqls_put_mem(struct store *s, const struct store_profile *p);
/* store_sqlite_read.c */
int sqls_merge(struct store *s, const struct store_query *q, struct store_merged **out);
int sqls_applications(struct store *s, int64_t from_ns, int64_t to_ns, struct store_app **out,
                      size_t *n);
int sqls_timeline(struct store *s, const struct store_query *q, int64_t step_ns, int64_t **cpu_ns,
                  size_t *nsteps);
int sqls_values(struct store *s, const struct store_query *q, struct store_values **out);
/* store_sqlite_fn.c */
int sqls_fn_timeline(struct store *s, const struct store_query *q, int64_t step_ns, const char *fn,
                     bool hide_interp, int64_t **self_ns, int64_t **total_ns, size_t *nsteps);
/* store_sqlite_maint.c */
int sqls_retain(struct store *s, int64_t older_than_ns, int64_t *deleted);
int sqls_rollup(struct store *s, int64_t now_ns, int64_t *built, int64_t *pending);
int64_t sqls_size_bytes(struct store *s);

#endif
