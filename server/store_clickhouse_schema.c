/* The ClickHouse store's schema: its tables (described at the top of
 * store_clickhouse.c), made on each node given or, through the one URL of
 * a cluster, ON CLUSTER; and the schema version the database holds, so a
 * server meeting a database of another schema refuses at start, naming
 * it, instead of failing on its first insert or query.
 *
 * The version is a row of meta: (draw 0, k 'schema_version', v). meta and
 * that row keep their shape in every schema, so any server can read it.
 *   1  the first schema: stacks and functions without day, samples
 *      sharded by (app, stack_a); it holds no version row
 *   2  stacks and functions by day, rollups (the version row since this
 *      file; databases made by servers before it hold none, but the
 *      columns of their tables are this schema's, which says it)
 *   3  off_cpu_ns in profiles, samples and rollups: off-CPU time; a version
 *      2 database (or one made before versions were kept) is upgraded in
 *      place at start (store_clickhouse_upgrade.c): the columns added on
 *      every node, then the row of version 3 stored and that of version 2
 *      deleted. meta is a plain MergeTree, so the two rows live side by
 *      side until ClickHouse has run the deletion: a server of this
 *      version reads versions 2 and 3 together as an upgrade to finish
 *      (run again: it does only what is left), an older server refuses
 *      them (several versions) as it refuses 3 alone (newer).
 *   4  psamples, a row a profile and label set with its stacks as arrays,
 *      in place of samples (a row a stack); a version 3 (or 2) database
 *      is upgraded in place at start (store_clickhouse_upgrade.c): samples
 *      copied into psamples, the row of version 4 stored, the older rows
 *      deleted, then samples dropped. A database that still has samples
 *      (an upgrade cut short after its version row) is upgraded again:
 *      with the row of version 4 there, only the drop is left.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "store_clickhouse_int.h"

#define SCHEMA_VERSION 4
/* The oldest version this server upgrades in place. */
#define UPGRADE_FROM 2

static const struct {
    const char *name, *columns, *engine, *shard;
} tables[] = {
    {"meta", "draw UInt64, k String, v UInt64", "MergeTree ORDER BY (draw, k)", "draw"},
    {"functions", "day Int64, key_a UInt64, key_b UInt64, name String, file String",
     "ReplacingMergeTree PARTITION BY day ORDER BY (key_a, key_b)", "key_a"},
    {"stacks", "day Int64, key_a UInt64, key_b UInt64, fa Array(UInt64), fb Array(UInt64)",
     "ReplacingMergeTree PARTITION BY day ORDER BY (key_a, key_b)", "key_a"},
    {"profiles",
     "app String, time_ns Int64, host String, pid Int64, duration_ns Int64, period_ns Int64, "
     "samples Int64, cpu_ns Int64, bytes_in Int64, labels String, off_cpu_ns Int64",
     "ReplacingMergeTree PARTITION BY intDiv(time_ns, 86400000000000) "
     "ORDER BY (app, time_ns, host, pid)",
     "cityHash64(app)"},
    /* A row a profile and label set: its stacks and their values as
     * arrays (read with CH_SAMPLES_JOIN). Version 3's samples table had a
     * row a stack; the upgrade copies it here (store_clickhouse_upgrade.c).
     * A mark every 32 rows, not 8192: a row is a whole profile (~80 KiB of
     * arrays for 2,000 stacks), and with 8192 a query read every profile of
     * a part (6 hours of them) and FINAL merged them in 65536-row blocks:
     * the hour's raw edges took a shard 95 ms, 5 ms with 32. Still fewer
     * marks than version 3's 8192 rows of single stacks. */
    {"psamples",
     "app String, time_ns Int64, host String, pid Int64, labels String, labelset String, "
     "stack_a Array(UInt64), stack_b Array(UInt64), samples Array(Int64), "
     "cpu_ns Array(Int64), off_cpu_ns Array(Int64)",
     "ReplacingMergeTree PARTITION BY intDiv(time_ns, 86400000000000) "
     "ORDER BY (app, time_ns, host, pid, labels, labelset) SETTINGS index_granularity = 32",
     "cityHash64(app, host, pid, time_ns)"},
    /* store_clickhouse_rollup.c */
    {"rollups",
     "app String, level UInt8, bucket_ns Int64, stack_a UInt64, stack_b UInt64, samples Int64, "
     "cpu_ns Int64, off_cpu_ns Int64, version Int64",
     "ReplacingMergeTree(version) PARTITION BY intDiv(bucket_ns, 86400000000000) "
     "ORDER BY (app, level, bucket_ns, stack_a, stack_b)",
     "cityHash64(app, stack_a)"},
    {"rollup_buckets", "app String, level UInt8, bucket_ns Int64, profiles Int64, version Int64",
     "ReplacingMergeTree(version) PARTITION BY intDiv(bucket_ns, 86400000000000) "
     "ORDER BY (app, level, bucket_ns)",
     "cityHash64(app)"},
};
#define N_TABLES (sizeof(tables) / sizeof(tables[0]))

/* Whether name (a column) of type is in cols ("name Type, name Type"). */
static bool has_column(const char *cols, const char *name, const char *type)
{
    size_t nl = strlen(name), tl = strlen(type);

    for (const char *p = cols; p && *p;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == nl + 1 + tl && !memcmp(p, name, nl) && p[nl] == ' ' &&
            !memcmp(p + nl + 1, type, tl))
            return true;
        p = e ? e + 2 : NULL; /* past ", " */
    }
    return false;
}

static int count_columns(const char *cols)
{
    int n = 1;
    for (; *cols; cols++)
        n += *cols == ',';
    return n;
}

/* Our table named name (T, or T_local on a cluster): its index, or -1. */
static int table_of(const struct ch_store *st, const char *name, bool *local)
{
    for (size_t i = 0; i < N_TABLES; i++) {
        size_t n = strlen(tables[i].name);
        if (strncmp(name, tables[i].name, n))
            continue;
        if (!name[n] || (st->cluster[0] && !strcmp(name + n, "_local"))) {
            *local = name[n] != 0;
            return (int)i;
        }
    }
    return -1;
}

/* What the database holds on node: *ours, how many of our tables; *same,
 * whether each has this schema's columns; *older, whether each has them
 * or the previous schema's (some columns an upgrade adds lacking);
 * *legacy, whether version 3's samples table is there; *version, the
 * version row (0: none; the oldest when rows of versions from UPGRADE_FROM
 * up are there: an upgrade not finished), *newest the newest. Returns 0,
 * or -EAGAIN with why filled (ClickHouse failed), or -EBADMSG when the
 * database holds several versions otherwise. */
static int schema_survey(struct ch_store *st, size_t node, int *ours, bool *same, bool *older,
                         bool *legacy, uint64_t *version, uint64_t *newest, char *why,
                         size_t whylen)
{
    int seen[N_TABLES][2] = {{0}}, news[N_TABLES][2] = {{0}};
    struct buf sql, ans;
    int err = 0;

    *ours = 0;
    *same = true;
    *older = true;
    *version = *newest = 0;
    *legacy = false;
    buf__init(&sql, 1 << 16);
    buf__init(&ans, 1 << 24);
    if ((err = ch_sql__appendf(&sql,
                               "SELECT table, name, type FROM system.columns WHERE database = '%s' "
                               "FORMAT TabSeparated",
                               st->db)) ||
        (err = chs_exec_why(st, node, NULL, &sql, &ans, why, whylen)))
        goto out;
    struct ch_tsv t;
    char *f[3];
    int n;
    ch_tsv__init(&t, ans.data, ans.len);
    while ((n = ch_tsv__row(&t, f, 3)) == 3) {
        bool local;
        int i = table_of(st, f[0], &local);
        if (!strcmp(f[0], "samples") || !strcmp(f[0], "samples_local"))
            *legacy = true;
        if (i < 0)
            continue; /* not ours */
        seen[i][local]++;
        if (!has_column(tables[i].columns, f[1], f[2]))
            *same = *older = false;
        else if (chs_upgrade__added(tables[i].name, f[1], f[2]))
            news[i][local]++;
    }
    if (n != 0) {
        snprintf(why, whylen, "a garbled answer listing the columns");
        err = -EAGAIN;
        goto out;
    }
    const char *meta = NULL;
    for (size_t i = 0; i < N_TABLES; i++)
        for (int local = 0; local < 2; local++) {
            if (!seen[i][local])
                continue;
            (*ours)++;
            if (seen[i][local] != count_columns(tables[i].columns))
                *same = false;
            /* The columns an upgrade adds may lack, all or some of them
             * (an upgrade interrupted half-way). */
            if (seen[i][local] + chs_upgrade__count(tables[i].name) - news[i][local] !=
                count_columns(tables[i].columns))
                *older = false;
            /* On a cluster the Distributed meta reads every shard's rows. */
            if (i == 0 && (!meta || !local))
                meta = local ? "meta_local" : "meta";
        }
    if (!meta)
        goto out;
    buf__reset(&sql);
    if ((err = ch_sql__appendf(&sql,
                               "SELECT DISTINCT v FROM %s.%s WHERE k = 'schema_version' "
                               "ORDER BY v FORMAT TabSeparated",
                               st->db, meta)) ||
        (err = chs_exec_why(st, node, NULL, &sql, &ans, why, whylen)))
        goto out;
    ch_tsv__init(&t, ans.data, ans.len);
    for (int rows = 0; (n = ch_tsv__row(&t, f, 1)) != 0; rows++) {
        uint64_t v;
        if (n != 1 || ch_tsv__u64(f[0], &v)) {
            snprintf(why, whylen, "a garbled answer reading the schema version");
            err = -EAGAIN;
            goto out;
        }
        /* Ordered: an upgrade's old rows, then its new one (until
         * ClickHouse has deleted the old ones). */
        if (rows && !(*version >= UPGRADE_FROM && v <= SCHEMA_VERSION)) {
            err = -EBADMSG;
            goto out;
        }
        if (!rows)
            *version = v;
        *newest = v;
    }
out:
    buf__free(&sql);
    buf__free(&ans);
    return err;
}

/* Creates the database and tables on node i (ON CLUSTER when one node
 * stands for a cluster: ClickHouse then needs its distributed DDL). */
static int create_schema(struct ch_store *st, size_t node, char *why, size_t whylen)
{
    struct buf sql;
    char oc[100] = "";
    int err = 0;

    buf__init(&sql, 1 << 16);
    if (st->on_cluster)
        snprintf(oc, sizeof(oc), " ON CLUSTER %s", st->cluster);
    if ((err = ch_sql__appendf(&sql, "CREATE DATABASE IF NOT EXISTS %s%s", st->db, oc)) ||
        (err = chs_ddl(st, node, &sql, why, whylen)))
        goto out;
    for (size_t i = 0; i < N_TABLES; i++) {
        const char *local = st->cluster[0] ? "_local" : "";
        buf__reset(&sql);
        if ((err = ch_sql__appendf(&sql, "CREATE TABLE IF NOT EXISTS %s.%s%s%s (%s) ENGINE = %s",
                                   st->db, tables[i].name, local, oc, tables[i].columns,
                                   tables[i].engine)) ||
            (err = chs_ddl(st, node, &sql, why, whylen)))
            goto out;
        if (!st->cluster[0])
            continue;
        buf__reset(&sql);
        if ((err = ch_sql__appendf(&sql,
                                   "CREATE TABLE IF NOT EXISTS %s.%s%s AS %s.%s_local "
                                   "ENGINE = Distributed(%s, %s, %s_local, %s)",
                                   st->db, tables[i].name, oc, st->db, tables[i].name, st->cluster,
                                   st->db, tables[i].name, tables[i].shard)) ||
            (err = chs_ddl(st, node, &sql, why, whylen)))
            goto out;
    }
out:
    buf__free(&sql);
    return err;
}

/* Whether node's database can be taken as it is or upgraded (*upgrade
 * set): 0; or -1 with err filled saying why not and what to do. *version
 * gets the version row found, if any. */
static int check_node(struct ch_store *st, size_t i, uint64_t *version, bool *upgrade, bool *copied,
                      char *err, size_t errlen)
{
    const char *url = st->nodes[i];
    char why[600] = "";
    int ours, e;
    bool same, older, legacy;
    uint64_t v, newest;

    if ((e = schema_survey(st, i, &ours, &same, &older, &legacy, &v, &newest, why, sizeof(why)))) {
        if (e == -EBADMSG)
            snprintf(err, errlen,
                     "clickhouse: database %s at %s holds several schema versions: it was "
                     "not made by codexray-server alone; give another --clickhouse-database",
                     st->db, url);
        else
            snprintf(err, errlen, "clickhouse: cannot read database %s at %s: %s", st->db, url,
                     why);
        return -1;
    }
    if (v && v < UPGRADE_FROM) {
        snprintf(err, errlen,
                 "clickhouse: database %s at %s holds schema version %llu, older than this "
                 "server's %d, which cannot use it: start the server with a new "
                 "--clickhouse-database (the old one stays readable by the server version "
                 "that made it; drop it when its profiles are no longer needed)",
                 st->db, url, (unsigned long long)v, SCHEMA_VERSION);
        return -1;
    }
    if (v > SCHEMA_VERSION) {
        snprintf(err, errlen,
                 "clickhouse: database %s at %s holds schema version %llu, newer than this "
                 "server's %d: run a codexray-server as new as the one that made it, or give "
                 "another --clickhouse-database",
                 st->db, url, (unsigned long long)v, SCHEMA_VERSION);
        return -1;
    }
    /* Version 2 or 3, or made before versions were kept (version 2 or 1):
     * the upgrade adds the columns it lacks, if its tables are version
     * 2's, and copies the samples. */
    bool old = v >= UPGRADE_FROM && v < SCHEMA_VERSION;
    if ((old || (!v && ours)) && !same && !older) {
        if (v)
            snprintf(err, errlen,
                     "clickhouse: database %s at %s holds schema version %llu, but its tables "
                     "are neither that version's nor this server's (%d), so it cannot be "
                     "upgraded: tables changed by hand? start the server with a new "
                     "--clickhouse-database",
                     st->db, url, (unsigned long long)v, SCHEMA_VERSION);
        else
            snprintf(err, errlen,
                     "clickhouse: database %s at %s holds tables of another schema than this "
                     "server's (version %d), without a version: the first schema (version 1, "
                     "made by the first codexray-server with ClickHouse), or tables not made "
                     "by codexray-server; start the server with a new --clickhouse-database "
                     "(drop the old one when its profiles are no longer needed)",
                     st->db, url, SCHEMA_VERSION);
        return -1;
    }
    if (old || (!v && ours && !same) || legacy)
        *upgrade = true;
    /* The row of this version is stored once the copy is whole. */
    if (newest == SCHEMA_VERSION)
        *copied = true;
    if (v)
        *version = v;
    return 0;
}

int chs_schema__open(struct ch_store *st, char *err, size_t errlen)
{
    size_t nodes = st->on_cluster ? 1 : st->nnodes;
    uint64_t version = 0;
    bool upgrade = false, copied = false;
    char why[600] = "";
    struct buf sql;
    int rc = -1;

    buf__init(&sql, 4096);
    /* Every node is looked at before anything is made or changed on any. */
    for (size_t i = 0; i < nodes; i++)
        if (check_node(st, i, &version, &upgrade, &copied, err, errlen))
            goto out;
    for (size_t i = 0; i < nodes; i++)
        if (create_schema(st, i, why, sizeof(why))) {
            if (st->on_cluster)
                snprintf(err, errlen,
                         "clickhouse: cannot create the tables ON CLUSTER %s through %s: %s "
                         "(through one URL, every node of the cluster must be up and have "
                         "ClickHouse's distributed DDL: <zookeeper> and <distributed_ddl> in "
                         "its config; or give every node's URL)",
                         st->cluster, st->nodes[i], why);
            else
                snprintf(err, errlen, "clickhouse: cannot create the tables at %s: %s",
                         st->nodes[i], why);
            goto out;
        }
    if (upgrade) {
        log_info("store: clickhouse database %s: upgrading schema version %llu to %d in place",
                 st->db, (unsigned long long)(version ? version : UPGRADE_FROM), SCHEMA_VERSION);
        if (chs_upgrade__run(st, copied, why, sizeof(why))) {
            snprintf(err, errlen,
                     "clickhouse: cannot upgrade database %s to schema version %d: %s (nothing "
                     "is lost: a server started again finishes the upgrade)",
                     st->db, SCHEMA_VERSION, why);
            goto out;
        }
    }
    /* A new database, one made before versions were kept, or upgraded:
     * this version, stored once every node has its tables. Servers
     * starting at once may each add the row: the same row. */
    if ((!version || upgrade) &&
        (ch_sql__appendf(&sql, "INSERT INTO %s.meta (draw, k, v) VALUES (0, 'schema_version', %d)",
                         st->db, SCHEMA_VERSION) ||
         chs_exec_why(st, 0, NULL, &sql, NULL, why, sizeof(why)))) {
        snprintf(err, errlen, "clickhouse: cannot store the schema version at %s: %s", st->nodes[0],
                 why);
        goto out;
    }
    if (upgrade && version)
        chs_upgrade__forget(st, SCHEMA_VERSION);
    if (upgrade)
        chs_upgrade__drop(st);
    log_info("store: clickhouse database %s, schema version %d%s", st->db, SCHEMA_VERSION,
             upgrade   ? " (upgraded now)"
             : version ? ""
                       : " (stored now)");
    rc = 0;
out:
    buf__free(&sql);
    return rc;
}
