/* What the files of the unwinder share (unwinder.c the builder thread, the
 * processes' entries and the main loop's side; unwinder_tables.c the
 * tables' loading into BPF and their registration by file). Only those
 * files include it; the module's face is unwinder.h.
 */
#ifndef CODEXRAY_AGENT_UNWIND_UNWINDER_INT_H
#define CODEXRAY_AGENT_UNWIND_UNWINDER_INT_H

#include <linux/types.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "../bpf/unwind.h"
#include "../symbolize/binary.h"
#include "cfi_table.h"
#include "unwinder.h"

/* Files one table is registered under in file_unwind, at most. */
#define TABLE_MAX_FILES 8
/* A table no process maps is kept this long: a binary run again and again
 * (a compiler in a build) is not rebuilt every time. */
#define UNUSED_GRACE_NS (30ull * 1000 * 1000 * 1000)
#define NBUCKETS 1024
#define MAX_SEGS 8
/* Rows per batch update: one syscall per 64k rows, not one per row. */
#define LOAD_CHUNK 65536
#define COMMIT_MAX 64 /* tables put in cfi_tables in one batch */
/* A binary mapped by this many processes at the lazy scan gets its table
 * built at start all the same (unwinder__set_lazy). */
#define SHARED_USERS 16
/* Tables built since the heap was last trimmed before it is trimmed again. */
#define TRIM_AFTER_BYTES (1u << 20)

/* Main thread only: the builder hands back `built` or `why`, and poll sets
 * the state. */
enum table_state {
    T_QUEUED, /* with the builder (queued, being built, or done and not polled yet) */
    T_LOADED, /* in cfi_tables[slot] */
    T_NONE,   /* no table: why[] says why */
    /* Mapped only by processes that ran before the agent, none of them
     * sampled in it yet (unwinder__set_lazy): not built until one is. */
    T_COLD,
};

/* One binary's table. The builder thread writes only `built`, `segs`,
 * `nseg` and `why` of a table it was handed, before it puts the table in
 * the done list (under u->mu); the main thread reads them after taking it
 * from there. */
struct table {
    struct binary *bin; /* a reference */
    enum table_state state;
    struct cfi_table *built;
    struct binary_seg segs[MAX_SEGS];
    unsigned nseg;
    uint64_t base;
    uint32_t rows, blocks;
    uint64_t bytes, unsupported;
    int slot;
    int map_fd;     /* its filled BPF array until cfi_tables holds it; else -1 */
    unsigned users; /* processes whose list holds it */
    uint64_t unused_since_ns;
    char why[160];
    /* The files (device, inode) processes map it from, for file_unwind:
     * usually one; copies in containers' own layers add more. */
    struct cx_file_key keys[TABLE_MAX_FILES];
    unsigned nkeys;
    struct table *hnext; /* hash chain */
    struct table *qnext; /* builder queue or done list */
};

struct umap {
    uint64_t start, end, offset;
    struct table *t;
};

/* A process as the unwinder sees it: its mappings of binaries. */
struct uproc {
    uint32_t tgid;
    struct umap *m;
    unsigned n;
    bool in_bpf;      /* has an entry in proc_unwind */
    bool waiting;     /* some of its tables are not loaded yet */
    bool over_logged; /* said once that it maps more binaries with tables than fit */
    unsigned ncold;   /* of its mappings, those whose table is T_COLD */
    /* Its image was mapped before the lazy start-up scan read it: its
     * cold tables wait for a sample. Cleared when its image changes
     * (exec: the proc's generation), as for a process started later. */
    bool from_scan;
    unsigned generation; /* the proc's, when last read */
    struct uproc *next;
};

struct unwinder {
    int tables_fd, procs_fd, files_fd;
    bool settled; /* the start-up's tables are built: new ones go first */
    bool lazy;    /* tables first seen now stay T_COLD until sampled */
    unsigned ncold_tables;
    bool files_full_logged;
    struct unwinder_opts o;
    struct table *tables[NBUCKETS];
    struct uproc *procs[NBUCKETS];
    unsigned char *slot_used; /* CX_CFI_MAX_TABLES */
    unsigned next_slot;
    uint64_t bytes, rows, unsupported;
    uint64_t filling_bytes;    /* of tables filled, not yet in cfi_tables */
    uint64_t built_since_trim; /* bytes of rows */
    bool closing;              /* unwinder__free: the BPF maps are not emptied */
    unsigned loaded, without, nprocs_bpf;
    bool procs_full_logged, slots_full_logged;
    struct binary *vdso; /* the kernel's vDSO image, as a file; NULL if not had */
    struct cx_proc_unwind *scratch;

    /* The builder thread and what it shares, under mu. */
    pthread_t th;
    bool th_started;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    struct table *queue, **queue_tail;
    struct table *done;
    unsigned pending; /* handed to the builder, not yet taken back by poll */
    unsigned unbuilt; /* queued or being built */
    bool stopping;
    uint64_t build_ns;
};
/* --- unwinder_tables.c: the tables' loading into BPF --- */

/* A mapping of t from file k: registered (and put in BPF if t is loaded). */
void unwinder_table_add_file(struct unwinder *u, struct table *t, const struct cx_file_key *k);

/* t out of cfi_tables and file_unwind (nothing when t is not loaded), its
 * slot freed and its rows taken off the totals. */
void unwinder_table_unload(struct unwinder *u, struct table *t);

/* The rows of s whose rules the walk cannot follow, all kinds. */
uint64_t unwinder_unsupported_rows(const struct cfi_table_stats *s);

/* Copies the rows, in blocks (bpf/unwind.h), into a new BPF array: its fd
 * in t->map_fd and a slot in t->slot, for unwinder_commit_filled() to put in
 * cfi_tables. Returns 0, or -1 with t->why set (nothing held). */
int unwinder_table_fill(struct unwinder *u, struct table *t);

/* The n (at most COMMIT_MAX) filled tables into cfi_tables at once, then
 * under their files in file_unwind; their built rows freed. A table that
 * could not be added is T_NONE, logged and counted in u->without. */
void unwinder_commit_filled(struct unwinder *u, struct table **ts, unsigned n);

#endif
