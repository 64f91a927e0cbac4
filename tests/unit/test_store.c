/* The SQLite store (server/store_sqlite*.c) on a temporary file: profiles
 * put in the store's own terms, merged, listed, counted over time,
 * reopened and expired. Runs as any user. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>

#include "server_helpers.h"

#define T0 (1764763200ll * SEC)
/* A stack blocked off-CPU for off_ns, no samples nor CPU (as the agent's
 * off-CPU samples are), or adding off_ns to the last stack when again. */
static void sprof__off(struct sprof *s, const char *const *names, uint32_t n, int64_t off_ns,
                       bool again)
{
    if (!again)
        sprof__stack(s, names, n, 0, STORE_NO_LABELS);
    s->stacks[s->p.nstacks - 1].off_cpu_ns = off_ns;
}

static const char *const LEAF_A[] = {"leaf", "a", "main"};
static const char *const LEAF_B[] = {"leafb", "b", "main"};

/* Two profiles of one application merged: a stack in both is one stack
 * with their counts summed; filters by host, pid and time pick one; the
 * functions keep their names and files. */
static void test_put_and_merge(void **state)
{
    char dir[256];
    struct store *st = store__open_tmp(dir, sizeof(dir));
    struct sprof s;
    (void)state;

    sprof__init(&s, st, "api", "h1", 11, T0);
    sprof__stack(&s, LEAF_A, 3, 30, STORE_NO_LABELS);
    sprof__stack(&s, LEAF_B, 3, 10, STORE_NO_LABELS);
    sprof__put(st, &s);
    sprof__init(&s, st, "api", "h2", 12, T0 + 60 * SEC);
    sprof__stack(&s, LEAF_A, 3, 5, STORE_NO_LABELS);
    sprof__stack(&s, LEAF_B + 1, 2, 7, STORE_NO_LABELS); /* b;main */
    sprof__put(st, &s);

    struct store_merged *m = merge_all(st, "api");
    int64_t cpu;
    assert_int_equal(m->profiles, 2);
    assert_int_equal(m->nstacks, 3);
    assert_int_equal(folded_samples(m, "main;a;leaf", &cpu), 35);
    assert_int_equal(cpu, 350000000);
    assert_int_equal(folded_samples(m, "main;b;leafb", NULL), 10);
    assert_int_equal(folded_samples(m, "main;b", NULL), 7);
    for (size_t i = 0; i < m->nfunctions; i++)
        assert_string_equal(m->functions[i].file, "x.c");
    store_merged__free(m);

    struct store_query q = {.app = "api", .from_ns = 0, .to_ns = INT64_MAX, .host = "h2"};
    assert_int_equal(store__merge(st, &q, &m), 0);
    assert_int_equal(m->profiles, 1);
    assert_int_equal(folded_samples(m, "main;a;leaf", NULL), 5);
    assert_int_equal(folded_samples(m, "main;b;leafb", NULL), 0);
    store_merged__free(m);
    q = (struct store_query){.app = "api", .from_ns = 0, .to_ns = INT64_MAX, .pid = 11};
    assert_int_equal(store__merge(st, &q, &m), 0);
    assert_int_equal(m->profiles, 1);
    assert_int_equal(folded_samples(m, "main;b;leafb", NULL), 10);
    store_merged__free(m);
    q = (struct store_query){.app = "api", .from_ns = T0 + SEC, .to_ns = INT64_MAX};
    assert_int_equal(store__merge(st, &q, &m), 0);
    assert_int_equal(m->profiles, 1);
    assert_int_equal(folded_samples(m, "main;b", NULL), 7);
    store_merged__free(m);
    m = merge_all(st, "nobody-sent-this");
    assert_int_equal(m->profiles, 0);
    assert_int_equal(m->nstacks, 0);
    store_merged__free(m);

    /* what a put holds is durable: closed and opened again, all there */
    store__close(st);
    char err[512];
    st = store_sqlite__open(dir, err, sizeof(err));
    assert_non_null(st);
    m = merge_all(st, "api");
    assert_int_equal(m->profiles, 2);
    assert_int_equal(folded_samples(m, "main;a;leaf", NULL), 35);
    store_merged__free(m);
    store__close(st);
    tmpdir__remove(dir);
}

/* Applications by CPU used, with their hosts; the label values (hosts,
 * pids, identity labels) of what a query matches. */
static void test_applications_and_labels(void **state)
{
    char dir[256];
    struct store *st = store__open_tmp(dir, sizeof(dir));
    struct sprof s;
    (void)state;

    sprof__init(&s, st, "db", "h1", 21, T0);
    s.p.identity[0] = "c0ffee";
    s.p.identity[4] = "db.service";
    sprof__stack(&s, LEAF_A, 3, 100, STORE_NO_LABELS);
    sprof__put(st, &s);
    sprof__init(&s, st, "api", "h1", 22, T0);
    sprof__stack(&s, LEAF_A, 3, 10, STORE_NO_LABELS);
    sprof__put(st, &s);
    sprof__init(&s, st, "api", "h2", 23, T0 + 60 * SEC);
    s.p.identity[1] = "api-7d9f";
    s.p.identity[2] = "prod";
    sprof__stack(&s, LEAF_B, 3, 20, STORE_NO_LABELS);
    sprof__put(st, &s);

    struct store_app *apps = NULL;
    size_t n = 0;
    assert_int_equal(store__applications(st, 0, INT64_MAX, &apps, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(apps[0].name, "db"); /* the most CPU first */
    assert_int_equal(apps[0].cpu_ns, 1000000000);
    assert_int_equal(apps[0].nhosts, 1);
    assert_string_equal(apps[1].name, "api");
    assert_int_equal(apps[1].cpu_ns, 300000000);
    assert_int_equal(apps[1].nhosts, 2);
    assert_int_equal(apps[1].last_seen_ns, T0 + 120 * SEC);
    store_apps__free(apps, n);
    /* a range with only the second api profile's start */
    assert_int_equal(store__applications(st, T0 + SEC, INT64_MAX, &apps, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(apps[0].name, "api");
    assert_int_equal(apps[0].nhosts, 1);
    assert_string_equal(apps[0].hosts[0], "h2");
    store_apps__free(apps, n);

    struct store_values *v = NULL;
    struct store_query q = {.app = "api", .from_ns = 0, .to_ns = INT64_MAX};
    assert_int_equal(store__values(st, &q, &v), 0);
    assert_int_equal(v->n[0], 2); /* hosts */
    assert_int_equal(v->n[1], 2); /* pids */
    bool p22 = false, p23 = false;
    for (size_t i = 0; i < v->n[1]; i++) {
        p22 |= strcmp(v->v[1][i], "22") == 0;
        p23 |= strcmp(v->v[1][i], "23") == 0;
    }
    assert_true(p22 && p23);
    assert_int_equal(v->n[2], 0); /* no container_id */
    assert_int_equal(v->n[3], 1); /* pod */
    assert_string_equal(v->v[3][0], "api-7d9f");
    assert_int_equal(v->n[4], 1); /* namespace */
    store_values__free(v);
    q.app = "db";
    assert_int_equal(store__values(st, &q, &v), 0);
    assert_int_equal(v->n[2], 1);
    assert_string_equal(v->v[2][0], "c0ffee");
    assert_string_equal(v->v[6][0], "db.service");
    store_values__free(v);
    /* an identity label filters a merge */
    q = (struct store_query){.app = "api", .from_ns = 0, .to_ns = INT64_MAX};
    q.identity[1] = "api-7d9f";
    struct store_merged *m = NULL;
    assert_int_equal(store__merge(st, &q, &m), 0);
    assert_int_equal(m->profiles, 1);
    store_merged__free(m);
    store_values__free(NULL);
    store__close(st);
    tmpdir__remove(dir);
}

/* CPU per step, by the profiles' start times; rollups built for complete
 * buckets change no answer; retention deletes what started before its
 * bound and nothing after. */
static void test_timeline_rollup_retention(void **state)
{
    char dir[256];
    struct store *st = store__open_tmp(dir, sizeof(dir));
    struct sprof s;
    (void)state;

    for (int i = 0; i < 6; i++) {
        sprof__init(&s, st, "api", "h1", 5, T0 + i * 60 * SEC);
        sprof__stack(&s, LEAF_A, 3, 100 * (i + 1), STORE_NO_LABELS);
        sprof__put(st, &s);
    }
    struct store_query q = {.app = "api", .from_ns = T0, .to_ns = T0 + 6 * 60 * SEC};
    int64_t *cpu = NULL;
    size_t n = 0;
    assert_int_equal(store__timeline(st, &q, 120 * SEC, &cpu, &n), 0);
    assert_int_equal(n, 3);
    for (size_t i = 0; i < 3; i++) /* (2i+1 + 2i+2) x 100 samples x 10 ms */
        assert_int_equal(cpu[i], (int64_t)(4 * i + 3) * 100 * 10000000);
    free(cpu);
    assert_int_equal(store__timeline(st, &q, 0, &cpu, &n), -EINVAL);

    struct store_merged *m = merge_all(st, "api");
    assert_int_equal(folded_samples(m, "main;a;leaf", NULL), 2100);
    store_merged__free(m);
    int64_t built = -1, pending = -1;
    assert_int_equal(store__rollup(st, T0 + 86400 * SEC, &built, &pending), 0);
    assert_int_equal(pending, 0);
    m = merge_all(st, "api");
    assert_int_equal(m->profiles, 6);
    assert_int_equal(folded_samples(m, "main;a;leaf", NULL), 2100);
    store_merged__free(m);

    int64_t deleted = -1;
    assert_int_equal(store__retain(st, T0 + 150 * SEC, &deleted), 0);
    assert_int_equal(deleted, 3);
    m = merge_all(st, "api");
    assert_int_equal(m->profiles, 3);
    assert_int_equal(folded_samples(m, "main;a;leaf", NULL), 1500);
    store_merged__free(m);
    assert_int_equal(store__retain(st, T0, &deleted), 0);
    assert_int_equal(deleted, 0);
    assert_true(store__size_bytes(st) > 0);
    store__close(st);
    tmpdir__remove(dir);
}

/* The merged stack "root;...;leaf" of m, NULL when none. */
static const struct store_merged_stack *folded(const struct store_merged *m, const char *f)
{
    for (size_t i = 0; i < m->nstacks; i++) {
        char s[512];
        size_t len = 0;
        for (uint32_t j = m->stacks[i].nframes; j-- > 0 && len < sizeof(s);)
            len += snprintf(s + len, sizeof(s) - len, "%s%s", len ? ";" : "",
                            m->functions[m->stacks[i].frames[j]].name);
        if (len < sizeof(s) && strcmp(s, f) == 0)
            return &m->stacks[i];
    }
    return NULL;
}

static const char *const OFF_LOCK[] = {"[off-CPU: lock]", "futex_wait", "a", "main"};

/* What each value of a merge keeps, with the wall sum of a stack both on
 * and off CPU; the timeline and the applications by value. */
static void check_off_cpu(struct store *st)
{
    struct store_merged *m;
    struct store_query q = {.app = "api", .from_ns = 0, .to_ns = INT64_MAX};
    const struct store_merged_stack *k;

    assert_int_equal(store__merge(st, &q, &m), 0); /* CPU: as before off-CPU */
    assert_int_equal(m->value, STORE_VALUE_CPU);
    assert_int_equal(m->nstacks, 2);
    assert_non_null(k = folded(m, "main;a;leaf"));
    assert_true(k->samples == 35 && k->cpu_ns == 350000000 && k->off_cpu_ns == 0);
    assert_null(folded(m, "main;a;futex_wait;[off-CPU: lock]"));
    store_merged__free(m);
    q.value = STORE_VALUE_OFF_CPU;
    assert_int_equal(store__merge(st, &q, &m), 0);
    assert_int_equal(m->profiles, 2);
    assert_int_equal(m->nstacks, 2);
    assert_null(folded(m, "main;a;leaf"));
    assert_non_null(k = folded(m, "main;a;futex_wait;[off-CPU: lock]"));
    assert_true(k->samples == 0 && k->cpu_ns == 0 && k->off_cpu_ns == 5 * SEC);
    assert_non_null(k = folded(m, "main;b;leafb"));
    assert_true(k->cpu_ns == 100000000 && k->off_cpu_ns == 2 * SEC);
    store_merged__free(m);
    q.value = STORE_VALUE_WALL;
    assert_int_equal(store__merge(st, &q, &m), 0);
    assert_int_equal(m->nstacks, 3);
    int64_t wall = 0;
    for (size_t i = 0; i < m->nstacks; i++)
        wall += store_value__of(STORE_VALUE_WALL, m->stacks[i].cpu_ns, m->stacks[i].off_cpu_ns);
    assert_true(wall == 450000000 + 7 * SEC);
    store_merged__free(m);

    /* per minute: 400 ms CPU and 7 s off-CPU, then 50 ms CPU */
    static const int64_t want[3][2] = {
        {400000000, 50000000}, {7 * SEC, 0}, {400000000 + 7 * SEC, 50000000}};
    for (int v = STORE_VALUE_CPU; v <= STORE_VALUE_WALL; v++) {
        struct store_query tq = {.app = "api", .from_ns = T0, .to_ns = T0 + 120 * SEC};
        int64_t *ns = NULL;
        size_t n = 0;
        tq.value = (enum store_value)v;
        assert_int_equal(store__timeline(st, &tq, 60 * SEC, &ns, &n), 0);
        assert_int_equal(n, 2);
        assert_true(ns[0] == want[v][0] && ns[1] == want[v][1]);
        free(ns);
    }
    struct store_app *apps;
    size_t napps;
    assert_int_equal(store__applications(st, 0, INT64_MAX, &apps, &napps), 0);
    assert_int_equal(napps, 1);
    assert_true(apps[0].cpu_ns == 450000000 && apps[0].off_cpu_ns == 7 * SEC);
    store_apps__free(apps, napps);
}

/* Off-CPU time (issue 32): stored beside CPU, merged by value, kept
 * through rollups, and a store made before it (no off_cpu_ns column)
 * upgraded at open. */
static void test_off_cpu(void **state)
{
    char dir[256], err[512];
    struct store *st = store__open_tmp(dir, sizeof(dir));
    struct sprof s;
    (void)state;

    sprof__init(&s, st, "api", "h1", 11, T0);
    sprof__stack(&s, LEAF_A, 3, 30, STORE_NO_LABELS);
    sprof__off(&s, OFF_LOCK, 4, 5 * SEC, false);
    sprof__stack(&s, LEAF_B, 3, 10, STORE_NO_LABELS);
    sprof__off(&s, LEAF_B, 3, 2 * SEC, true);
    sprof__put(st, &s);
    sprof__init(&s, st, "api", "h1", 11, T0 + 60 * SEC); /* CPU only */
    sprof__stack(&s, LEAF_A, 3, 5, STORE_NO_LABELS);
    sprof__put(st, &s);
    check_off_cpu(st);
    int64_t built = -1, pending = -1;
    assert_int_equal(store__rollup(st, T0 + 86400 * SEC, &built, &pending), 0);
    assert_true(built > 0 && pending == 0);
    check_off_cpu(st); /* now from the rollups */
    store__close(st);

    /* a store from before off-CPU: its profiles table without the column */
    char path[300];
    sqlite3 *db;
    snprintf(path, sizeof(path), "%s/profiles.db", dir);
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "DELETE FROM rollups; DELETE FROM profiles WHERE off_cpu_ns > 0;"
                                  "ALTER TABLE profiles DROP COLUMN off_cpu_ns",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    st = store_sqlite__open(dir, err, sizeof(err));
    if (!st)
        fail_msg("store_sqlite__open: %s", err);
    struct store_app *apps;
    size_t napps;
    assert_int_equal(store__applications(st, 0, INT64_MAX, &apps, &napps), 0);
    assert_true(napps == 1 && apps[0].cpu_ns == 50000000 && apps[0].off_cpu_ns == 0);
    store_apps__free(apps, napps);
    sprof__init(&s, st, "api", "h1", 11, T0 + 120 * SEC);
    sprof__off(&s, OFF_LOCK, 4, 3 * SEC, false);
    sprof__put(st, &s);
    struct store_query q = {.app = "api", .from_ns = 0, .to_ns = INT64_MAX};
    q.value = STORE_VALUE_OFF_CPU;
    struct store_merged *m;
    assert_int_equal(store__merge(st, &q, &m), 0);
    assert_int_equal(m->nstacks, 1);
    assert_true(m->stacks[0].off_cpu_ns == 3 * SEC);
    store_merged__free(m);
    store__close(st);
    tmpdir__remove(dir);
}

/* Puts from several threads at once (the HTTP layer's pool does this):
 * every profile stored once, the counts exact. */
struct put_arg {
    struct store *st;
    int id;
};

static void *put_many(void *p)
{
    struct put_arg *a = p;
    struct sprof *s = malloc(sizeof(*s));
    char err[512];

    for (int i = 0; s && i < 20; i++) {
        sprof__init(s, a->st, "par", "h", a->id, T0 + (a->id * 20 + i) * SEC);
        sprof__stack(s, LEAF_A, 3, 1, STORE_NO_LABELS);
        if (store__put(a->st, &s->p, err, sizeof(err)))
            break;
    }
    free(s);
    return NULL;
}

static void test_concurrent_puts(void **state)
{
    char dir[256];
    struct store *st = store__open_tmp(dir, sizeof(dir));
    pthread_t t[4];
    struct put_arg a[4];
    (void)state;

    for (int i = 0; i < 4; i++) {
        a[i] = (struct put_arg){st, i + 1};
        assert_int_equal(pthread_create(&t[i], NULL, put_many, &a[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    struct store_merged *m = merge_all(st, "par");
    assert_int_equal(m->profiles, 80);
    assert_int_equal(m->nstacks, 1);
    assert_int_equal(folded_samples(m, "main;a;leaf", NULL), 80);
    store_merged__free(m);
    store__close(st);
    tmpdir__remove(dir);
}

/* A group of puts (what a batch upload makes): a put the store refuses
 * inside it leaves nothing and keeps the others; the group's end makes
 * them durable together (there after a reopen); another thread's put,
 * which waits for the group, is stored too; a put outside any group is
 * stored alone as before. */
struct grouped_arg {
    struct store *st;
    int rc;
};

static void *put_outside(void *p)
{
    struct grouped_arg *a = p;
    struct sprof *s = malloc(sizeof(*s));
    char err[512];

    sprof__init(s, a->st, "grp", "other-thread", 9, T0 + 9 * SEC);
    sprof__stack(s, LEAF_B, 3, 1, STORE_NO_LABELS);
    a->rc = store__put(a->st, &s->p, err, sizeof(err));
    free(s);
    return NULL;
}

static void test_group(void **state)
{
    char dir[256], err[512];
    struct store *st = store__open_tmp(dir, sizeof(dir));
    struct sprof s;
    pthread_t t;
    struct grouped_arg a = {st, -1};
    (void)state;

    assert_int_equal(store__group_begin(st, err, sizeof(err)), 0);
    assert_int_equal(store__group_begin(st, err, sizeof(err)), -EBUSY); /* one a thread */
    /* Started while the group is open: waits for it. */
    assert_int_equal(pthread_create(&t, NULL, put_outside, &a), 0);
    sprof__init(&s, st, "grp", "h", 1, T0);
    sprof__stack(&s, LEAF_A, 3, 3, STORE_NO_LABELS);
    sprof__put(st, &s);
    /* Refused by the store: a label set past its 1 MiB of text. */
    size_t big = (1u << 20) + 10;
    char *value = malloc(big + 1);
    assert_non_null(value);
    memset(value, 'v', big);
    value[big] = '\0';
    sprof__init(&s, st, "grp", "h", 2, T0 + SEC);
    s.labels[0] = (struct store_label){"k", value};
    s.ls[0] = (struct store_labelset){s.labels, 1};
    s.p.nlabelsets = 1;
    sprof__stack(&s, LEAF_A, 3, 100, 0);
    assert_int_equal(store__put(st, &s.p, err, sizeof(err)), -E2BIG);
    free(value);
    sprof__init(&s, st, "grp", "h", 3, T0 + 2 * SEC);
    sprof__stack(&s, LEAF_A, 3, 4, STORE_NO_LABELS);
    sprof__put(st, &s);
    assert_int_equal(store__group_end(st, err, sizeof(err)), 0);
    assert_int_equal(store__group_end(st, err, sizeof(err)), -EINVAL); /* none open */
    pthread_join(t, NULL);
    assert_int_equal(a.rc, 0);

    store__close(st);
    st = store_sqlite__open(dir, err, sizeof(err));
    assert_non_null(st);
    struct store_merged *m = merge_all(st, "grp");
    assert_int_equal(m->profiles, 3);
    assert_int_equal(folded_samples(m, "main;a;leaf", NULL), 7);
    assert_int_equal(folded_samples(m, "main;b;leafb", NULL), 1);
    store_merged__free(m);
    store__close(st);
    tmpdir__remove(dir);
}

/* One profile of app "re": pid, labels and duration given, the rest fixed. */
static void resent_profile(struct sprof *s, struct store *st, int64_t pid, const char *region,
                           int64_t duration_ns, int64_t samples)
{
    sprof__init(s, st, "re", "h1", pid, T0);
    s->p.duration_ns = duration_ns;
    s->p.identity[0] = "c0ffee";
    if (region) {
        s->labels[0] = (struct store_label){"region", region};
        s->p.labels = s->labels;
        s->p.nlabels = 1;
    }
    sprof__stack(s, LEAF_A, 3, samples, STORE_NO_LABELS);
}

/* app "re" read every way: profiles and samples merged (raw), CPU of the
 * application, of the timeline, and merged again once rolled up. */
static void resent_check(struct store *st, int64_t profiles, int64_t samples)
{
    struct store_merged *m = merge_all(st, "re");
    assert_int_equal(m->profiles, profiles);
    assert_int_equal(folded_samples(m, "main;a;leaf", NULL), samples);
    store_merged__free(m);
    struct store_app *apps = NULL;
    size_t n = 0;
    assert_int_equal(store__applications(st, 0, INT64_MAX, &apps, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(apps[0].cpu_ns, samples * 10000000);
    store_apps__free(apps, n);
    struct store_query q = {.app = "re", .from_ns = T0, .to_ns = T0 + 600 * SEC};
    int64_t *cpu = NULL;
    assert_int_equal(store__timeline(st, &q, 600 * SEC, &cpu, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(cpu[0], samples * 10000000);
    free(cpu);
    int64_t built = -1, pending = -1;
    assert_int_equal(store__rollup(st, T0 + 86400 * SEC, &built, &pending), 0);
    assert_int_equal(pending, 0);
    q = (struct store_query){.app = "re", .from_ns = T0 - 86400 * SEC, .to_ns = T0 + 86400 * SEC};
    assert_int_equal(store__merge(st, &q, &m), 0);
    assert_int_equal(m->profiles, profiles);
    assert_int_equal(folded_samples(m, "main;a;leaf", NULL), samples);
    store_merged__free(m);
}

/* Runs sql on the store's file in dir, past the store. */
static void resent_sql(const char *dir, const char *sql)
{
    char path[300];
    sqlite3 *db = NULL;

    snprintf(path, sizeof(path), "%s/profiles.db", dir);
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
}

/* A profile sent again after it was stored (the agent's answer lost),
 * alone or in a batch resent whole or in part, is answered stored and
 * counted once; other processes, other labels (two Pyroscope SDKs) and
 * another duration are other profiles. A store from before, already
 * holding a profile twice, opens, keeps it, and stores no third. */
static void test_resent(void **state)
{
    char dir[256], err[512];
    struct store *st = store__open_tmp(dir, sizeof(dir));
    struct sprof s;
    (void)state;

    resent_profile(&s, st, 7, "eu", 60 * SEC, 10);
    sprof__put(st, &s);
    resent_profile(&s, st, 7, "us", 60 * SEC, 20); /* another SDK's labels */
    sprof__put(st, &s);
    resent_profile(&s, st, 8, "eu", 60 * SEC, 40); /* another process */
    sprof__put(st, &s);
    resent_profile(&s, st, 7, "eu", 30 * SEC, 80); /* another duration */
    sprof__put(st, &s);
    resent_profile(&s, st, 7, NULL, 60 * SEC, 160); /* no other labels */
    sprof__put(st, &s);
    /* Every identity column the same, another content: two replicas of a
     * Pyroscope client that sends no host or pid, in the same window. */
    resent_profile(&s, st, 7, "eu", 60 * SEC, 11);
    sprof__put(st, &s);
    resent_check(st, 6, 321);

    resent_profile(&s, st, 7, "eu", 60 * SEC, 10); /* sent again alone */
    sprof__put(st, &s);
    /* A batch sent again in part, one of its profiles twice, one new. */
    assert_int_equal(store__group_begin(st, err, sizeof(err)), 0);
    resent_profile(&s, st, 8, "eu", 60 * SEC, 40);
    sprof__put(st, &s);
    resent_profile(&s, st, 9, "eu", 60 * SEC, 320);
    sprof__put(st, &s);
    sprof__put(st, &s);
    assert_int_equal(store__group_end(st, err, sizeof(err)), 0);
    resent_check(st, 7, 641);

    /* After a reopen too, and after the buckets were rolled up. */
    store__close(st);
    st = store_sqlite__open(dir, err, sizeof(err));
    assert_non_null(st);
    resent_profile(&s, st, 9, "eu", 60 * SEC, 320);
    sprof__put(st, &s);
    resent_check(st, 7, 641);
    store__close(st);

    /* A store from before the identity index that stored pid 9's profile
     * twice: it opens, the copy stays (a plain index), no third. */
    resent_sql(dir, "DROP INDEX profiles_identity;"
                    "INSERT INTO profiles(app, host, pid, container_id, time_ns, duration_ns, "
                    "period_ns, samples, cpu_ns, bytes_in, data, labels, off_cpu_ns, content) "
                    "SELECT app, host, pid, container_id, time_ns, duration_ns, period_ns, "
                    "samples, cpu_ns, bytes_in, data, labels, off_cpu_ns, content FROM profiles "
                    "WHERE pid = 9;"
                    "INSERT OR IGNORE INTO rollup_dirty(app, level, bucket_ns) SELECT app, "
                    "level, bucket_ns FROM rollups");
    st = store_sqlite__open(dir, err, sizeof(err));
    assert_non_null(st);
    sprof__put(st, &s);
    resent_check(st, 8, 961);
    store__close(st);
    /* Once the copy is gone, the next open makes the index unique again. */
    resent_sql(dir, "DELETE FROM profiles WHERE id = (SELECT max(id) FROM profiles);"
                    "INSERT OR IGNORE INTO rollup_dirty(app, level, bucket_ns) SELECT app, "
                    "level, bucket_ns FROM rollups;"
                    "CREATE TABLE t AS SELECT \"unique\" AS u FROM "
                    "pragma_index_list('profiles') WHERE name = 'profiles_identity'");
    st = store_sqlite__open(dir, err, sizeof(err));
    assert_non_null(st);
    sprof__put(st, &s);
    resent_check(st, 7, 641);
    store__close(st);
    char path[300];
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    snprintf(path, sizeof(path), "%s/profiles.db", dir);
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT (SELECT u FROM t), \"unique\" FROM "
                                        "pragma_index_list('profiles') WHERE name = "
                                        "'profiles_identity'",
                                        -1, &q, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(q, 0), 0); /* plain while the copy was there */
    assert_int_equal(sqlite3_column_int(q, 1), 1); /* unique since */
    sqlite3_finalize(q);
    sqlite3_close(db);
    tmpdir__remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_and_merge),
        cmocka_unit_test(test_applications_and_labels),
        cmocka_unit_test(test_timeline_rollup_retention),
        cmocka_unit_test(test_concurrent_puts),
        cmocka_unit_test(test_group),
        cmocka_unit_test(test_off_cpu),
        cmocka_unit_test(test_resent),
    };
    return cmocka_run_group_tests_name("store", tests, NULL, NULL);
}
