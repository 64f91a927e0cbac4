/* Keeps the BPF side's CFI tables (bpf/unwind.h) in step with the processes
 * the agent sees: one table per binary, built from its .eh_frame on a
 * background thread (cfi_table.c), loaded into the "cfi_tables" array of
 * maps once, shared by every process that maps the binary, and freed a
 * while after the last such process has gone; one "proc_unwind" entry per
 * process listing its mappings that have a loaded table.
 *
 * A process without an entry (no table loaded yet, none of its binaries has
 * CFI, the caps reached) is walked by frame pointers, so nothing here is
 * needed for a sample to be taken. Main thread only, but for the builder
 * thread it owns.
 */
#ifndef CODEXRAY_AGENT_UNWIND_UNWINDER_H
#define CODEXRAY_AGENT_UNWIND_UNWINDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cx_frame; /* agent/bpf/sample.h */

struct proc;

struct unwinder_opts {
    uint64_t max_bytes; /* table memory loaded in BPF at once, all binaries */
};

struct unwinder_stats {
    unsigned tables;      /* loaded in BPF */
    uint64_t bytes;       /* their rows, in bytes */
    uint64_t rows;        /* their rows */
    unsigned pending;     /* queued or being built */
    unsigned cold;        /* not built: mapped at start, not sampled since (lazy) */
    unsigned without;     /* binaries with no table: no CFI, refused, or over a cap */
    unsigned procs;       /* processes with an entry in BPF */
    uint64_t unsupported; /* rows with rules the walk cannot follow, loaded tables */
    uint64_t build_ms;    /* time the builder spent, all tables so far */
};

struct unwinder;

/* tables_fd, procs_fd and files_fd are the sampler's "cfi_tables",
 * "proc_unwind" and "file_unwind" maps (borrowed: they must outlive the
 * unwinder; files_fd -1 where the walk has no bpf_find_vma fallback).
 * Starts the builder thread. Once unwinder__settle has returned, tables are
 * built newest first (a new process's samples are coming). Returns NULL
 * with a reason in err. */
struct unwinder *unwinder__new(int tables_fd, int procs_fd, int files_fd,
                               const struct unwinder_opts *o, char *err, size_t errlen);

/* Stops the builder and frees every table and entry. The BPF maps are left
 * as they are, not emptied: call it just before the sampler that owns them
 * is freed (emptying an array of maps waits for an RCU grace period per
 * table). u may be NULL. */
void unwinder__free(struct unwinder *u);

/* p's mappings were (re)read: its entry is rebuilt, and binaries seen for
 * the first time are queued for the builder. */
void unwinder__proc_maps(struct unwinder *u, const struct proc *p, uint64_t now_ns);

/* Process tgid is gone (exit, or forgotten): its entry is dropped. */
void unwinder__proc_gone(struct unwinder *u, uint32_t tgid, uint64_t now_ns);

/* Loads the tables the builder has finished and fills in the entries of the
 * processes waiting for them. Cheap when there is nothing to do: call it
 * from the main loop. */
void unwinder__poll(struct unwinder *u, uint64_t now_ns);

/* Whether tables are being built: the caller then polls often (a few ms),
 * so that each is loaded as soon as it is done, not at the next 100 ms. */
bool unwinder__building(const struct unwinder *u);

/* Frees the tables no process has mapped for a while (once a window). */
void unwinder__sweep(struct unwinder *u, uint64_t now_ns);

/* Waits up to timeout_ms for the builder's queue to drain and loads what it
 * built (tests and `record`, so that short runs are walked by CFI). Returns
 * true if nothing is left pending. */
bool unwinder__settle(struct unwinder *u, int timeout_ms, uint64_t now_ns);

void unwinder__stats(const struct unwinder *u, struct unwinder_stats *out);

/* While lazy, a binary first seen in a process's maps gets no table yet
 * (cold): the daemon's scan of the processes that ran before it, most of
 * whose binaries are never sampled (issue 36: 207 tables, 18.8 MB of BPF
 * memory built at start on a busy node). Not lazy (the default, and after
 * start-up), new binaries are queued at once, and so is a cold one that
 * a process maps again (a new process cannot wait for its first sample). */
void unwinder__set_lazy(struct unwinder *u, bool lazy);

/* A sample of tgid with its frames: the cold tables of the mappings its
 * native frames fall in are queued (first, after start-up). Its frames in
 * a cold mapping were walked by frame pointers, so a caller the walk
 * could not reach is queued by a later sample. Returns at once when
 * nothing is cold. */
void unwinder__sampled(struct unwinder *u, uint32_t tgid, const struct cx_frame *f, unsigned n);

#endif
