/* Where a row goes on a ClickHouse cluster, computed in the server as the
 * Distributed table computes it, so the store can insert each shard's rows
 * into that shard's local table directly (docs/clickhouse.md, "How
 * inserts reach the shards"): the sharding keys' hashes (ClickHouse's
 * cityHash64, which is CityHash v1.0.2 with its own way of hashing
 * several arguments), the slot a key falls in by the shards' weights, and
 * the split of an INSERT's RowBinary rows by the shard of each row.
 */
#ifndef CODEXRAY_SERVER_CH_SHARD_H
#define CODEXRAY_SERVER_CH_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "../common/buf.h"

/* ClickHouse's cityHash64(s) of a String of len bytes. */
uint64_t ch_shard__city64(const void *s, size_t len);
/* ClickHouse's hash of an (U)Int64 argument to cityHash64 (its value's
 * 8 bytes as an unsigned integer). */
uint64_t ch_shard__int(uint64_t v);
/* How cityHash64(a, b, ...) folds the hash of a further argument (h)
 * into the hash of those before it (acc). */
uint64_t ch_shard__combine(uint64_t acc, uint64_t h);

/* Which rows a table's sharding key reads (the tables of
 * store_clickhouse_schema.c whose rows the store batches). */
enum ch_shard_key {
    CH_KEY_FUNCTIONS, /* key_a of (day, key_a, key_b, name, file) */
    CH_KEY_STACKS,    /* key_a of (day, key_a, key_b, fa[], fb[]) */
    CH_KEY_PSAMPLES,  /* cityHash64(app, host, pid, time_ns) of (app, time_ns, host, pid,
                         labels, labelset, 5 arrays of 8-byte values) */
    CH_KEY_PROFILES,  /* cityHash64(app) of (app, time_ns, host, pid, labels, 6 Int64) */
};

/* The shard (0-based) of a key's value: slot[value % nslots], the slots
 * being each shard's index repeated by its weight, in the cluster's shard
 * order (how ClickHouse's Distributed table places a row). nslots > 0. */
static inline uint32_t ch_shard__of(uint64_t value, const uint32_t *slot, size_t nslots)
{
    return slot[value % nslots];
}

/* Appends each row of rows (len bytes of RowBinary rows of the table key
 * reads; NULL when len is 0) to out[its shard] (nshards buffers, each as
 * the caller prepared it, e.g. with the INSERT's text). Returns 0, -EINVAL
 * when rows do not parse as that table's rows (nothing is then to be
 * sent), or -E2BIG / -ENOMEM from a buffer. */
int ch_shard__split(enum ch_shard_key key, const void *rows, size_t len, const uint32_t *slot,
                    size_t nslots, struct buf *out, size_t nshards)
    __attribute__((warn_unused_result));

#endif
