/* The unwinder's tables into BPF: each built table copied into a BPF array
 * of its own, put in the "cfi_tables" array of maps in batches, registered
 * under the files it is mapped from in "file_unwind", and taken out again.
 * Main thread only (unwinder.h). */
#include <bpf/bpf.h>
#include <errno.h>
#include <linux/types.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../bpf/cfi_index.h"
#include "cfi_blocks.h"
#include "file_unwind.h"
#include "unwinder_int.h"

/* Puts t under every file it is mapped from in file_unwind. */
static void table_put_files(struct unwinder *u, const struct table *t)
{
    struct cx_file_unwind v;

    if (u->files_fd < 0 || t->state != T_LOADED ||
        !file_unwind__value((uint32_t)t->slot, t->blocks, t->base, t->segs, t->nseg, &v))
        return;
    for (unsigned i = 0; i < t->nkeys; i++) {
        if (bpf_map_update_elem(u->files_fd, &t->keys[i], &v, BPF_ANY) && !u->files_full_logged) {
            log_warn("unwind: cannot add %s to file_unwind (%s): its new processes are walked "
                     "by frame pointers until their maps are read",
                     t->bin->path, strerror(errno));
            u->files_full_logged = true;
        }
    }
}

/* A mapping of t from file k: registered (and put in BPF if t is loaded). */
void unwinder_table_add_file(struct unwinder *u, struct table *t, const struct cx_file_key *k)
{
    for (unsigned i = 0; i < t->nkeys; i++)
        if (t->keys[i].ino == k->ino && t->keys[i].dev == k->dev)
            return;
    if (t->nkeys == TABLE_MAX_FILES)
        return; /* those processes use proc_unwind once their maps are read */
    t->keys[t->nkeys++] = *k;
    table_put_files(u, t);
}

void unwinder_table_unload(struct unwinder *u, struct table *t)
{
    if (t->state != T_LOADED)
        return;
    /* Closing, the maps are freed with the sampler's object: a delete from
     * cfi_tables would wait for an RCU grace period per table (2.2 s at the
     * end of a whole-machine record). */
    for (unsigned i = 0; !u->closing && u->files_fd >= 0 && i < t->nkeys; i++)
        bpf_map_delete_elem(u->files_fd, &t->keys[i]);
    __u32 key = t->slot;
    if (!u->closing && bpf_map_delete_elem(u->tables_fd, &key) && errno != ENOENT)
        log_warn("unwind: cannot drop the table of %s: %s", t->bin->path, strerror(errno));
    u->slot_used[t->slot] = 0;
    u->bytes -= t->bytes;
    u->rows -= t->rows;
    u->unsupported -= t->unsupported;
    u->loaded--;
    t->slot = -1;
}

static int alloc_slot(struct unwinder *u)
{
    for (unsigned i = 0; i < CX_CFI_MAX_TABLES; i++) {
        unsigned s = (u->next_slot + i) % CX_CFI_MAX_TABLES;
        if (!u->slot_used[s]) {
            u->slot_used[s] = 1;
            u->next_slot = s + 1;
            return s;
        }
    }
    return -1;
}

uint64_t unwinder_unsupported_rows(const struct cfi_table_stats *s)
{
    uint64_t n = 0;

    for (int i = 0; i < CFI_UNSUP__N; i++)
        n += s->unsupported[i];
    return n;
}

/* Copies the rows, in blocks (bpf/unwind.h), into a new BPF array: its fd
 * in t->map_fd and a slot in t->slot, for tables_commit() to put in
 * cfi_tables. Returns 0, or -1 with t->why set (nothing held). */
int unwinder_table_fill(struct unwinder *u, struct table *t)
{
    struct cfi_table *ct = t->built;
    uint32_t nblocks = (ct->n + CX_CFI_BLOCK_ROWS - 1) / CX_CFI_BLOCK_ROWS;
    uint32_t ntotal = cx_cfi_total(nblocks);
    uint64_t bytes = (uint64_t)ntotal * sizeof(struct cx_cfi_block);
    struct cx_cfi_block *blocks = NULL;
    __u32 *keys = NULL;
    int fd = -1, slot = -1, err = -1;

    if (ct->n == 0 || ct->n > CX_CFI_MAX_ROWS) {
        snprintf(t->why, sizeof(t->why), "table of %u rows", ct->n);
        goto out;
    }
    if (u->bytes + u->filling_bytes + bytes > u->o.max_bytes) {
        snprintf(t->why, sizeof(t->why),
                 "table of %llu KiB over the cap (%llu of %llu MiB loaded; "
                 "--unwind-tables-max-mb)",
                 (unsigned long long)(bytes >> 10), (unsigned long long)(u->bytes >> 20),
                 (unsigned long long)(u->o.max_bytes >> 20));
        goto out;
    }
    slot = alloc_slot(u);
    if (slot < 0) {
        snprintf(t->why, sizeof(t->why), "all %u table slots in use", CX_CFI_MAX_TABLES);
        goto out;
    }
    /* The rows in blocks and the index over them (bpf/cfi_index.h). */
    blocks = cfi_blocks__build(ct->rows, ct->n, &nblocks, &ntotal);
    keys = malloc(sizeof(*keys) * (ntotal < LOAD_CHUNK ? ntotal : LOAD_CHUNK));
    if (!blocks || !keys) {
        snprintf(t->why, sizeof(t->why), "out of memory");
        goto out;
    }
    LIBBPF_OPTS(bpf_map_create_opts, mo, .map_flags = BPF_F_INNER_MAP);
    fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "cx_cfi_rows", sizeof(__u32),
                        sizeof(struct cx_cfi_block), ntotal, &mo);
    if (fd < 0) {
        snprintf(t->why, sizeof(t->why), "cannot create a BPF array of %u blocks: %s", ntotal,
                 strerror(errno));
        goto out;
    }
    for (uint32_t at = 0; at < ntotal; at += LOAD_CHUNK) {
        __u32 count = ntotal - at < LOAD_CHUNK ? ntotal - at : LOAD_CHUNK;
        for (__u32 i = 0; i < count; i++)
            keys[i] = at + i;
        LIBBPF_OPTS(bpf_map_batch_opts, bo);
        if (bpf_map_update_batch(fd, keys, &blocks[at], &count, &bo)) {
            /* Before Linux 5.6 arrays have no batch update: one by one. */
            count = ntotal - at < LOAD_CHUNK ? ntotal - at : LOAD_CHUNK;
            for (__u32 i = 0; i < count; i++) {
                if (bpf_map_update_elem(fd, &keys[i], &blocks[at + i], BPF_ANY)) {
                    snprintf(t->why, sizeof(t->why), "cannot fill the BPF array: %s",
                             strerror(errno));
                    goto out;
                }
            }
        }
    }
    t->slot = slot;
    t->map_fd = fd;
    t->blocks = nblocks;
    t->bytes = bytes;
    u->filling_bytes += bytes;
    slot = fd = -1;
    err = 0;
out:
    if (slot >= 0)
        u->slot_used[slot] = 0;
    if (fd >= 0)
        close(fd);
    free(blocks);
    free(keys);
    return err;
}

/* t, filled, now in cfi_tables (ok) or given up (its slot freed). */
static void table_committed(struct unwinder *u, struct table *t, bool ok, int errno_)
{
    struct cfi_table *ct = t->built;

    u->filling_bytes -= t->bytes;
    close(t->map_fd); /* cfi_tables holds the map now, or no one does */
    t->map_fd = -1;
    if (!ok) {
        u->slot_used[t->slot] = 0;
        t->slot = -1;
        t->state = T_NONE;
        snprintf(t->why, sizeof(t->why), "cannot add the table to cfi_tables: %s",
                 strerror(errno_));
        return;
    }
    t->base = ct->base;
    t->rows = ct->n;
    t->unsupported = unwinder_unsupported_rows(&ct->stats);
    t->state = T_LOADED;
    u->bytes += t->bytes;
    u->rows += ct->n;
    u->unsupported += t->unsupported;
    u->loaded++;
}

/* Puts the n filled tables in cfi_tables. An update of an array of maps
 * waits for an RCU grace period (10-20 ms here) so that no BPF program still
 * sees the old entry: one batch update waits once (Linux 6.7 and later), n
 * updates n times. Before 5.6, or when the batch fails, one by one. */
static void tables_commit(struct unwinder *u, struct table **ts, unsigned n)
{
    __u32 keys[COMMIT_MAX];
    int fds[COMMIT_MAX];
    __u32 count = n;

    if (n == 0)
        return;
    for (unsigned i = 0; i < n; i++) {
        keys[i] = (__u32)ts[i]->slot;
        fds[i] = ts[i]->map_fd;
    }
    LIBBPF_OPTS(bpf_map_batch_opts, bo);
    if (n > 1 && bpf_map_update_batch(u->tables_fd, keys, fds, &count, &bo) == 0) {
        for (unsigned i = 0; i < n; i++)
            table_committed(u, ts[i], true, 0);
        return;
    }
    for (unsigned i = 0; i < n; i++) {
        int r = bpf_map_update_elem(u->tables_fd, &keys[i], &fds[i], BPF_ANY);
        table_committed(u, ts[i], r == 0, r ? errno : 0);
    }
}

/* The filled tables into cfi_tables at once, then under their files in
 * file_unwind; their built rows freed. */
void unwinder_commit_filled(struct unwinder *u, struct table **ts, unsigned n)
{
    tables_commit(u, ts, n);
    for (unsigned i = 0; i < n; i++) {
        struct table *t = ts[i];
        if (t->state == T_LOADED) {
            table_put_files(u, t);
        } else {
            log_warn("unwind: %s: no table: %s", t->bin->path, t->why);
            u->without++;
        }
        cfi_table__free(t->built);
        t->built = NULL;
    }
}
