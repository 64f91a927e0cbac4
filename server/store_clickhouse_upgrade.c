/* The ClickHouse store's schema upgrades in place, so a server upgrade
 * keeps the profiles stored:
 *   2 -> 3  off_cpu_ns added to profiles, samples and rollups on every node;
 *   3 -> 4  version 3's samples (a row a stack) copied into psamples (a row
 *           a profile and label set, the stacks as arrays), then dropped.
 * A version 2 database takes both, in that order.
 *
 * ClickHouse 18.16 has no ADD COLUMN IF NOT EXISTS: each table's columns
 * are read first (system.columns, on each node; through the one URL of a
 * cluster, every node's with cluster()), and a column is added where it
 * lacks. An ALTER that fails is forgiven when the column is there once
 * read again: another server starting at once added it, or, ON CLUSTER,
 * some nodes had it from an upgrade interrupted half-way (those nodes fail
 * the statement, the others run it). Rows stored before read the column as
 * its DEFAULT 0: no off-CPU time.
 *
 * The copy is an INSERT ... SELECT a day at a time through the first node
 * (on a cluster, Distributed to Distributed: psamples is sharded by the
 * same key as samples, so every row stays on its shard). Copied twice
 * (two servers starting at once, or a start cut short and run again) it
 * collapses: psamples is a ReplacingMergeTree by the profile's identity.
 * samples is dropped only once the version row of 4 is stored, so a copy
 * cut short is made again whole; a copy that fails because another server
 * dropped samples meanwhile is taken as done (that server had copied it).
 * The version row is the schema's business (store_clickhouse_schema.c);
 * the old one is deleted here.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "store_clickhouse_int.h"

/* The columns version 3 added, each after the column it follows in
 * version 3's tables (store_clickhouse_schema.c), so an upgraded table has
 * a new one's columns in the same order. */
static const struct {
    const char *table, *column, *type, *after;
} added[] = {
    {"profiles", "off_cpu_ns", "Int64", "labels"},
    {"samples", "off_cpu_ns", "Int64", "cpu_ns"},
    {"rollups", "off_cpu_ns", "Int64", "cpu_ns"},
};
#define N_ADDED (sizeof(added) / sizeof(added[0]))

bool chs_upgrade__added(const char *table, const char *column, const char *type)
{
    for (size_t i = 0; i < N_ADDED; i++)
        if (!strcmp(added[i].table, table) && !strcmp(added[i].column, column) &&
            !strcmp(added[i].type, type))
            return true;
    return false;
}

int chs_upgrade__count(const char *table)
{
    int n = 0;
    for (size_t i = 0; i < N_ADDED; i++)
        n += !strcmp(added[i].table, table);
    return n;
}

/* Where a node's columns are listed: its system.columns or, through the
 * one URL of a cluster, every node's (the cluster table function, a row
 * per node). */
static void columns_table(const struct ch_store *st, char *out, size_t len)
{
    if (st->on_cluster)
        snprintf(out, len, "cluster('%s', system, columns)", st->cluster);
    else
        snprintf(out, len, "system.columns");
}

/* How many nodes (1 but through the one URL of a cluster) have the column
 * of added[a] in table (T or T_local) of the database: into *have, and
 * how many nodes answer into *nodes. 0, or -EAGAIN with why filled. */
static int count_have(struct ch_store *st, size_t node, size_t a, const char *table, int64_t *have,
                      int64_t *nodes, char *why, size_t whylen)
{
    char from[200], nodes_sql[200];
    struct buf sql, ans;
    struct ch_tsv t;
    char *f[2];
    int err;

    buf__init(&sql, 1 << 12);
    buf__init(&ans, 1 << 12);
    columns_table(st, from, sizeof(from));
    /* cluster() reads one node a shard: as many as answer the columns. */
    if (st->on_cluster)
        snprintf(nodes_sql, sizeof(nodes_sql), "(SELECT count() FROM cluster('%s', system, one))",
                 st->cluster);
    else
        snprintf(nodes_sql, sizeof(nodes_sql), "1");
    if ((err = ch_sql__appendf(&sql,
                               "SELECT (SELECT count() FROM %s WHERE database = '%s' AND table = "
                               "'%s' AND name = '%s' AND type = '%s'), %s FORMAT TabSeparated",
                               from, st->db, table, added[a].column, added[a].type, nodes_sql)) ||
        (err = chs_exec_why(st, node, NULL, &sql, &ans, why, whylen)))
        goto out;
    ch_tsv__init(&t, ans.data, ans.len);
    if (ch_tsv__row(&t, f, 2) != 2 || ch_tsv__i64(f[0], have) || ch_tsv__i64(f[1], nodes)) {
        snprintf(why, whylen, "a garbled answer counting the columns of %s", table);
        err = -EAGAIN;
    }
out:
    buf__free(&sql);
    buf__free(&ans);
    return err;
}

/* Adds added[a]'s column to table (T or T_local) on node (ON CLUSTER
 * through the one URL of a cluster) unless every node has it; logs what
 * it did. 0, or -EAGAIN with why filled. */
static int add_column(struct ch_store *st, size_t node, size_t a, const char *table, char *why,
                      size_t whylen)
{
    char oc[100] = "", ddl_why[600] = "";
    int64_t have, nodes;
    struct buf sql;
    int err;

    buf__init(&sql, 1 << 12);
    if ((err = count_have(st, node, a, table, &have, &nodes, why, whylen)) || have == nodes)
        goto out;
    if (st->on_cluster)
        snprintf(oc, sizeof(oc), " ON CLUSTER %s", st->cluster);
    if ((err = ch_sql__appendf(&sql, "ALTER TABLE %s.%s%s ADD COLUMN %s %s DEFAULT 0 AFTER %s",
                               st->db, table, oc, added[a].column, added[a].type, added[a].after)))
        goto out;
    int ddl = chs_ddl(st, node, &sql, ddl_why, sizeof(ddl_why));
    int64_t before = have;
    if ((err = count_have(st, node, a, table, &have, &nodes, why, whylen)))
        goto out;
    if (have != nodes) {
        snprintf(why, whylen, "adding column %s to %s: %s", added[a].column, table,
                 ddl ? ddl_why : "not there after the ALTER");
        err = -EAGAIN;
        goto out;
    }
    if (!ddl)
        log_info("store: clickhouse database %s: column %s added to %s at %s%s (%lld of %lld "
                 "nodes had it before)",
                 st->db, added[a].column, table, st->nodes[node], oc, (long long)before,
                 (long long)nodes);
    else
        log_info("store: clickhouse database %s: column %s of %s at %s%s on every node now: the "
                 "ALTER failed where another server or an earlier start had added it (%lld of "
                 "%lld nodes had it before)",
                 st->db, added[a].column, table, st->nodes[node], oc, (long long)before,
                 (long long)nodes);
out:
    buf__free(&sql);
    return err;
}

/* Whether node has version 3's samples table (the Distributed one on a
 * cluster, or both: the copy reads it): into *yes. 0, or -EAGAIN with why
 * filled. */
static int legacy_at(struct ch_store *st, size_t node, bool *yes, char *why, size_t whylen)
{
    struct buf sql, ans;
    int64_t n = 0;
    int err;

    buf__init(&sql, 1 << 12);
    buf__init(&ans, 1 << 12);
    if (!(err = ch_sql__appendf(&sql,
                                "SELECT count() FROM system.tables WHERE database = '%s' AND "
                                "name IN ('samples', 'samples_local') FORMAT TabSeparated",
                                st->db)) &&
        !(err = chs_exec_why(st, node, NULL, &sql, &ans, why, whylen))) {
        struct ch_tsv t;
        char *f[1];
        ch_tsv__init(&t, ans.data, ans.len);
        if (ch_tsv__row(&t, f, 1) != 1 || ch_tsv__i64(f[0], &n)) {
            snprintf(why, whylen, "a garbled answer listing the tables");
            err = -EAGAIN;
        }
    }
    *yes = n > 0;
    buf__free(&sql);
    buf__free(&ans);
    return err;
}

/* Copies samples into psamples, a day at a time, through the first node.
 * 0, or -EAGAIN with why filled. */
static int copy_samples(struct ch_store *st, char *why, size_t whylen)
{
    struct buf sql, ans;
    int64_t *days = NULL;
    size_t ndays = 0;
    int err;

    buf__init(&sql, 1 << 12);
    buf__init(&ans, 1 << 20);
    if ((err = ch_sql__appendf(&sql,
                               "SELECT DISTINCT intDiv(time_ns, %lld) AS d FROM %s.samples "
                               "ORDER BY d FORMAT TabSeparated",
                               CH_DAY_NS, st->db)) ||
        (err = chs_exec_why(st, 0, NULL, &sql, &ans, why, whylen)))
        goto out;
    struct ch_tsv t;
    char *f[1];
    int n;
    ch_tsv__init(&t, ans.data, ans.len);
    while ((n = ch_tsv__row(&t, f, 1)) == 1) {
        int64_t *more = realloc(days, (ndays + 1) * sizeof(*days));
        if (!more) {
            snprintf(why, whylen, "out of memory");
            err = -EAGAIN;
            goto out;
        }
        days = more;
        if (ch_tsv__i64(f[0], &days[ndays++]))
            n = -1;
        if (n < 0)
            break;
    }
    if (n != 0) {
        snprintf(why, whylen, "a garbled answer listing the days of samples");
        err = -EAGAIN;
        goto out;
    }
    for (size_t i = 0; i < ndays && !err; i++) {
        buf__reset(&sql);
        if (!(err = ch_sql__appendf(
                  &sql,
                  "INSERT INTO %s.psamples (app, time_ns, host, pid, labels, labelset, stack_a, "
                  "stack_b, samples, cpu_ns, off_cpu_ns) SELECT app, time_ns, host, pid, labels, "
                  "labelset, groupArray(stack_a), groupArray(stack_b), groupArray(samples), "
                  "groupArray(cpu_ns), groupArray(off_cpu_ns) FROM %s.samples FINAL WHERE "
                  "intDiv(time_ns, %lld) = %lld GROUP BY app, time_ns, host, pid, labels, labelset",
                  st->db, st->db, CH_DAY_NS, (long long)days[i])))
            err = chs_exec_why(st, 0, NULL, &sql, NULL, why, whylen);
    }
    if (!err)
        log_info("store: clickhouse database %s: samples of %zu days copied into psamples at %s",
                 st->db, ndays, st->nodes[0]);
out:
    free(days);
    buf__free(&sql);
    buf__free(&ans);
    return err;
}

/* Whether version 4's row is stored: another server's copy is whole. */
static bool copied_by_another(struct ch_store *st)
{
    struct buf sql, ans;
    char why[600];
    int64_t n = 0;

    buf__init(&sql, 1 << 12);
    buf__init(&ans, 1 << 12);
    if (!ch_sql__appendf(&sql,
                         "SELECT count() FROM %s.meta WHERE k = 'schema_version' AND v = 4 "
                         "FORMAT TabSeparated",
                         st->db) &&
        !chs_exec_why(st, 0, NULL, &sql, &ans, why, sizeof(why))) {
        struct ch_tsv t;
        char *f[1];
        ch_tsv__init(&t, ans.data, ans.len);
        if (ch_tsv__row(&t, f, 1) != 1 || ch_tsv__i64(f[0], &n))
            n = 0;
    }
    buf__free(&sql);
    buf__free(&ans);
    return n > 0;
}

int chs_upgrade__run(struct ch_store *st, bool copied, char *why, size_t whylen)
{
    size_t nodes = st->on_cluster ? 1 : st->nnodes;
    char table[80];
    bool legacy;
    int err = 0;

    for (size_t node = 0; node < nodes; node++) {
        if ((err = legacy_at(st, node, &legacy, why, whylen)))
            return err;
        for (size_t a = 0; a < N_ADDED; a++) {
            /* Version 3's samples, where there still is one to copy. */
            if (!strcmp(added[a].table, "samples") && (!legacy || copied))
                continue;
            /* The shards' tables before the Distributed one over them, so
             * it never lists a column they lack. */
            snprintf(table, sizeof(table), "%s%s", added[a].table, st->cluster[0] ? "_local" : "");
            if ((err = add_column(st, node, a, table, why, whylen)))
                return err;
            if (st->cluster[0] && (err = add_column(st, node, a, added[a].table, why, whylen)))
                return err;
        }
    }
    if ((err = legacy_at(st, 0, &legacy, why, whylen)) || !legacy || copied)
        return err;
    if (!(err = copy_samples(st, why, whylen)))
        return 0;
    /* samples dropped meanwhile by a server that had copied it: it stores
     * version 4's row first. */
    if (copied_by_another(st)) {
        log_info("store: clickhouse database %s: samples copied by another server", st->db);
        return 0;
    }
    return err;
}

void chs_upgrade__drop(struct ch_store *st)
{
    size_t nodes = st->on_cluster ? 1 : st->nnodes;
    char oc[100] = "", why[600] = "";
    struct buf sql;

    buf__init(&sql, 1 << 12);
    if (st->on_cluster)
        snprintf(oc, sizeof(oc), " ON CLUSTER %s", st->cluster);
    /* The Distributed table first: it never outlives the shards' tables. */
    for (size_t node = 0; node < nodes; node++)
        for (int local = 0; local < (st->cluster[0] ? 2 : 1); local++) {
            buf__reset(&sql);
            if (ch_sql__appendf(&sql, "DROP TABLE IF EXISTS %s.samples%s%s", st->db,
                                local ? "_local" : "", oc) ||
                chs_ddl(st, node, &sql, why, sizeof(why)))
                log_error("store: clickhouse database %s at %s: version 3's samples%s not "
                          "dropped (%s); the next start drops it",
                          st->db, st->nodes[node], local ? "_local" : "", why);
        }
    buf__free(&sql);
}

void chs_upgrade__forget(struct ch_store *st, int version)
{
    size_t nodes = st->on_cluster ? 1 : st->nnodes;
    char oc[100] = "", why[600] = "";
    struct buf sql;

    buf__init(&sql, 1 << 12);
    if (st->on_cluster)
        snprintf(oc, sizeof(oc), " ON CLUSTER %s", st->cluster);
    /* A mutation: ClickHouse deletes the rows in the background. */
    for (size_t node = 0; node < nodes; node++) {
        buf__reset(&sql);
        if (ch_sql__appendf(&sql,
                            "ALTER TABLE %s.meta%s%s DELETE WHERE k = 'schema_version' AND v != %d",
                            st->db, st->cluster[0] ? "_local" : "", oc, version) ||
            chs_ddl(st, node, &sql, why, sizeof(why)))
            log_error("store: clickhouse database %s at %s: the old schema version row not "
                      "deleted (%s); this server takes the database, older ones refuse it as "
                      "holding several versions",
                      st->db, st->nodes[node], why);
    }
    buf__free(&sql);
}
