/* Inserts straight into each shard's local table (docs/clickhouse.md, "How
 * inserts reach the shards"). Through a Distributed table, the node that
 * takes an INSERT parses all its rows, splits them by the sharding key and
 * sends the other shards' rows on in its own format before they are
 * written; here the server splits the rows by the same key (ch_shard.h)
 * and each shard's node parses and writes only its own, all at once. A
 * row lands on the shard the Distributed table would have chosen, so a
 * retry, or a row written by a server inserting the other way, collapses
 * with its first copy as before. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "ch_shard.h"
#include "store_clickhouse_int.h"

/* The most shards, and the most slots (shards by weight), taken. */
#define MAX_SHARDS 256
#define MAX_SLOTS 65536

/* Each batched table's sharding key as the schema creates it
 * (store_clickhouse_schema.c), after its local table's name in the
 * Distributed engine's arguments. */
static const char *const key_of[CH_N_INSERTS] = {
    [CH_FUNCTIONS] = "key_a",
    [CH_STACKS] = "key_a",
    [CH_SAMPLES] = "cityHash64(app, host, pid, time_ns)",
    [CH_PROFILES] = "cityHash64(app)",
};
static const char *const name_of[CH_N_INSERTS] = {
    [CH_FUNCTIONS] = "functions",
    [CH_STACKS] = "stacks",
    [CH_SAMPLES] = "psamples",
    [CH_PROFILES] = "profiles",
};
static const enum ch_shard_key how_of[CH_N_INSERTS] = {
    [CH_FUNCTIONS] = CH_KEY_FUNCTIONS,
    [CH_STACKS] = CH_KEY_STACKS,
    [CH_SAMPLES] = CH_KEY_PSAMPLES,
    [CH_PROFILES] = CH_KEY_PROFILES,
};

/* Runs sql on node 0 and reads its TabSeparated answer into ans. */
static int ask(struct ch_store *st, size_t node, const char *sql, struct buf *ans, char *why,
               size_t whylen)
{
    struct buf q;
    int err;

    buf__init(&q, 4096);
    err = buf__append(&q, sql, strlen(sql));
    if (!err)
        err = chs_exec_why(st, node, NULL, &q, ans, why, whylen);
    buf__free(&q);
    return err;
}

/* The cluster's shards (one replica each) and their weights, into st's
 * slots; 0, or -1 with why. */
static int read_cluster(struct ch_store *st, struct buf *ans, char *why, size_t whylen)
{
    char sql[256];
    uint32_t weight[MAX_SHARDS];
    size_t n = 0, slots = 0;

    snprintf(sql, sizeof(sql),
             "SELECT shard_num, shard_weight, count() FROM system.clusters WHERE cluster = '%s' "
             "GROUP BY shard_num, shard_weight ORDER BY shard_num FORMAT TabSeparated",
             st->cluster);
    if (ask(st, 0, sql, ans, why, whylen))
        return -1;
    for (char *line = ans->data, *next; line && *line; line = next) {
        unsigned long num, w, replicas;
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        if (sscanf(line, "%lu\t%lu\t%lu", &num, &w, &replicas) != 3 || num != n + 1) {
            snprintf(why, whylen, "system.clusters answered '%.60s'", line);
            return -1;
        }
        if (replicas != 1) {
            snprintf(why, whylen, "shard %lu has %lu replicas (the Distributed table writes each)",
                     num, replicas);
            return -1;
        }
        if (n == MAX_SHARDS || w > MAX_SLOTS || slots + w > MAX_SLOTS) {
            snprintf(why, whylen, "more than %d shards or %d slots", MAX_SHARDS, MAX_SLOTS);
            return -1;
        }
        weight[n++] = (uint32_t)w;
        slots += w;
    }
    if (n < 2 || !slots) {
        snprintf(why, whylen, "cluster %s has %zu shards", st->cluster, n);
        return -1;
    }
    st->slot = calloc(slots, sizeof(*st->slot));
    st->shard_node = calloc(n, sizeof(*st->shard_node));
    if (!st->slot || !st->shard_node) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    for (size_t i = 0, s = 0; i < n; i++)
        for (uint32_t k = 0; k < weight[i]; k++)
            st->slot[s++] = (uint32_t)i;
    st->nslots = slots;
    for (size_t i = 0; i < n; i++)
        st->shard_node[i] = weight[i] ? SIZE_MAX : 0; /* a weight 0 shard takes no row */
    st->nshards = n;
    return 0;
}

/* Which node given is which shard: each node names its own (is_local),
 * and each must see the cluster as node 0 does (its shards, weights and
 * addresses in the same order): a node whose config lists the shards
 * otherwise would place a row of a Distributed insert through it on
 * another shard than the one ch_shard computes from node 0's view, and
 * a retry would not collapse with its first copy. */
static int map_nodes(struct ch_store *st, struct buf *ans, char *why, size_t whylen)
{
    char sql[320], self[256];
    char *view0 = NULL;
    int err = -1;

    snprintf(sql, sizeof(sql),
             "SELECT shard_num, shard_weight, replica_num, host_address, port FROM "
             "system.clusters WHERE cluster = '%s' ORDER BY shard_num, replica_num "
             "FORMAT TabSeparated",
             st->cluster);
    snprintf(self, sizeof(self),
             "SELECT shard_num FROM system.clusters WHERE cluster = '%s' AND is_local "
             "FORMAT TabSeparated",
             st->cluster);
    for (size_t node = 0; node < st->nnodes; node++) {
        unsigned long num;
        if (ask(st, node, sql, ans, why, whylen))
            goto out;
        if (!view0 && !(view0 = strdup(ans->data ? ans->data : ""))) {
            snprintf(why, whylen, "out of memory");
            goto out;
        }
        if (strcmp(view0, ans->data ? ans->data : "")) {
            snprintf(why, whylen,
                     "node %zu's system.clusters lists cluster %s otherwise than node 1's",
                     node + 1, st->cluster);
            goto out;
        }
        if (ask(st, node, self, ans, why, whylen))
            goto out;
        if (sscanf(ans->data ? ans->data : "", "%lu", &num) != 1 || num < 1 || num > st->nshards)
            continue; /* not a node of the cluster's shards as it sees itself */
        if (st->shard_node[num - 1] == SIZE_MAX)
            st->shard_node[num - 1] = node;
    }
    for (size_t i = 0; i < st->nshards; i++)
        if (st->shard_node[i] == SIZE_MAX) {
            snprintf(why, whylen, "no URL given is shard %zu's node", i + 1);
            goto out;
        }
    err = 0;
out:
    free(view0);
    return err;
}

/* Whether each batched table's Distributed engine has the key ch_shard computes. */
static int check_keys(struct ch_store *st, struct buf *ans, char *why, size_t whylen)
{
    for (int i = 0; i < CH_N_INSERTS; i++) {
        char sql[256], want[128];
        snprintf(sql, sizeof(sql), "SHOW CREATE TABLE %s.%s FORMAT TabSeparated", st->db,
                 name_of[i]);
        snprintf(want, sizeof(want), "%s_local, %s)", name_of[i], key_of[i]);
        if (ask(st, 0, sql, ans, why, whylen))
            return -1;
        if (!ans->data || !strstr(ans->data, want)) {
            snprintf(why, whylen, "%s is not sharded by %s", name_of[i], key_of[i]);
            return -1;
        }
    }
    return 0;
}

void chs_shards__discover(struct ch_store *st)
{
    struct buf ans;
    char why[300] = "";

    if (!st->cluster[0] || !st->insert_shards)
        return;
    if (st->on_cluster) {
        log_info("clickhouse: inserts go through the Distributed tables (one URL: the other "
                 "shards' nodes are not known; give every node's URL to insert into each)");
        return;
    }
    buf__init(&ans, 1 << 20);
    if (read_cluster(st, &ans, why, sizeof(why)) || map_nodes(st, &ans, why, sizeof(why)) ||
        check_keys(st, &ans, why, sizeof(why))) {
        log_warn("clickhouse: inserts go through the Distributed tables: %s", why);
        free(st->slot);
        free(st->shard_node);
        st->slot = NULL;
        st->shard_node = NULL;
        st->nshards = st->nslots = 0;
    } else {
        log_info("clickhouse: inserts go to each of the %zu shards' local tables directly",
                 st->nshards);
    }
    buf__free(&ans);
}

struct shard_write {
    struct ch_store *st;
    size_t node;
    const struct buf *sql;
    int result;
};

static void *shard_thread(void *arg)
{
    struct shard_write *w = arg;
    w->result = chs_exec(w->st, w->node, w->sql, NULL) ? -EAGAIN : 0;
    return NULL;
}

/* sql's rows split into out[0..nshards), each behind its local table's
 * INSERT text ("INSERT INTO db.T (cols) FORMAT RowBinary\n" becomes
 * "INSERT INTO db.T_local (cols) ..."). 0, or -errno (-EINVAL: sql is not
 * such an INSERT, or its rows do not parse). */
static int split(struct ch_store *st, int table, const struct buf *sql, struct buf *out)
{
    const char *head = sql->data;
    const char *nl = memchr(head, '\n', sql->len);
    size_t pre = strlen("INSERT INTO ") + strlen(st->db) + 1 + strlen(name_of[table]);
    int err = 0;

    if (!nl || (size_t)(nl - head) < pre || head[pre] != ' ')
        return -EINVAL;
    for (size_t i = 0; i < st->nshards && !err; i++) {
        err = buf__append(&out[i], head, pre);
        if (!err)
            err = buf__append(&out[i], "_local", 6);
        if (!err)
            err = buf__append(&out[i], head + pre, (size_t)(nl + 1 - head) - pre);
    }
    size_t hl = (size_t)(nl + 1 - head);
    if (!err)
        err = ch_shard__split(how_of[table], (const uint8_t *)nl + 1, sql->len - hl, st->slot,
                              st->nslots, out, st->nshards);
    /* A shard without rows sends nothing. */
    for (size_t i = 0; i < st->nshards && !err; i++)
        if (out[i].len == hl + strlen("_local"))
            out[i].len = 0;
    return err;
}

int chs_shards__exec(struct ch_store *st, int table, const struct buf *sql)
{
    struct buf out[MAX_SHARDS];
    struct shard_write w[MAX_SHARDS];
    pthread_t th[MAX_SHARDS];
    bool started[MAX_SHARDS] = {false};
    int err;

    if (!st->nshards || !sql->len)
        return chs_exec(st, 0, sql, NULL) ? -EAGAIN : 0;
    for (size_t i = 0; i < st->nshards; i++)
        buf__init(&out[i], CH_MAX_STATEMENT);
    err = split(st, table, sql, out);
    if (err == -EINVAL) {
        /* Rows of this server that do not parse: a bug, not the batch's
         * fault; the Distributed table places them the same way. */
        log_error("clickhouse: %s rows do not split by shard; inserted through the "
                  "Distributed table",
                  name_of[table]);
        err = chs_exec(st, 0, sql, NULL) ? -EAGAIN : 0;
        goto out;
    }
    if (err)
        goto out;
    /* Every shard's INSERT at once; the batch is acknowledged only if all
     * are (a failed one makes every profile of it answer 503, and the
     * resent rows collapse with those the other shards took). */
    for (size_t i = 0; i < st->nshards; i++) {
        w[i] = (struct shard_write){st, st->shard_node[i], &out[i], 0};
        if (!out[i].len)
            continue;
        if (pthread_create(&th[i], NULL, shard_thread, &w[i]) == 0)
            started[i] = true;
        else
            shard_thread(&w[i]);
    }
    for (size_t i = 0; i < st->nshards; i++) {
        if (started[i])
            pthread_join(th[i], NULL);
        if (w[i].result)
            err = -EAGAIN;
    }
out:
    for (size_t i = 0; i < st->nshards; i++)
        buf__free(&out[i]);
    return err;
}
