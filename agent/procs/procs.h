/* The process table: every process the sampler has seen, with its
 * executable mappings (each holding its binary) and its identity.
 *
 * A process is read from /proc on its first sample or exec event, read
 * again after exec, and forgotten a little after it exits. Main thread only.
 */
#ifndef CODEXRAY_AGENT_PROCS_PROCS_H
#define CODEXRAY_AGENT_PROCS_PROCS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../symbolize/binary.h"
#include "identity.h"
#include "maps.h"

#define PROC_NAME_MAX 256

struct proc_map {
    uint64_t start, end, offset;
    struct binary *bin; /* a reference; NULL for anonymous or special ranges */
    const char *name;   /* path or "[vdso]"; points into the proc's maps */
};

/* What every sample reads comes first, within two cache lines (the table
 * is walked for a different process at nearly every sample, with cold
 * caches); the identity and names, read when a profile is written, after. */
struct proc {
    uint32_t tgid;
    unsigned generation; /* bumped when the identity is read anew (exec, reuse) */
    struct proc *next;   /* hash chain */
    bool disabled;       /* CODEXRAY_PROFILING=disabled in its environment */
    bool skipped;        /* in the sampler's skip map (collect.c keeps it) */
    bool maps_stale;     /* exec'd since the maps were read */
    bool start_given;    /* start_time and comm are the exec event's (procs__exec) */
    bool exited;
    int maps_err; /* errno when the maps could not be read */
    uint64_t exited_ns;
    uint64_t maps_read_ns;
    uint64_t seen_ns;     /* first read, or the last exec */
    struct maps maps;     /* executable ranges only */
    struct proc_map *map; /* one per maps entry */
    /* The aggregator's (aggregate.c), never read here: the process's entry
     * in the open window and that window's serial. A sample then finds it
     * without a lookup by tgid, which cost a third of the main thread's
     * time with 500 processes (cold cache lines in a table per sample). */
    void *agg;
    uint64_t agg_serial;
    uint64_t start_time;     /* /proc/PID/stat field 22: tells a reused pid apart */
    uint64_t cgroup_id;      /* the cgroup v2 it exec'd in (BPF), 0 when not known */
    char comm[16];           /* the process's name (its main thread's) */
    char exe[PROC_NAME_MAX]; /* base name of the executable */
    struct identity id;      /* service, container, pod, unit: identity.h */
};

struct procs;

/* proc_root is "/proc" (or a test's copy); roots says where Docker's and the
 * kubelet's files are (NULL: the defaults); both are copied. NULL when out of
 * memory. */
struct procs *procs__new(struct binary_cache *bc, const char *proc_root,
                         const struct identity_roots *roots);
/* ps may be NULL. */
void procs__free(struct procs *ps);

/* The process, read from /proc on first sight (and again after exec): comm,
 * exe, its cgroup (the identity) and environment (`disabled`). Returns NULL only when out of
 * memory; a process that vanished before it was read comes back with
 * maps_err set and what the sample itself said (its comm). */
struct proc *procs__get(struct procs *ps, uint32_t tgid, const char *comm, uint64_t now_ns);

/* The mapping holding addr, or NULL. For a leaf address (`reread`) in no
 * mapping, the maps are read again first, at most once a second: a library
 * loaded since, or JIT code. Return addresses in no mapping are not worth a
 * read: they are what a frame-pointer walk through code without frame
 * pointers finds. */
const struct proc_map *procs__find_map(struct procs *ps, struct proc *p, uint64_t addr, bool reread,
                                       uint64_t now_ns);

/* Exec (CX_REC_EXEC): the process read again now (identity, maps), or
 * first read as procs__get does. cgroup_id is the cgroup v2 it exec'd in
 * (bpf_get_current_cgroup_id, 0 when not known): when /proc/PID/cgroup is
 * gone by the time the event is handled (a short process, a busy agent),
 * the cgroup's path still gives its identity. start_ns is its start in ns
 * since boot (task_struct.start_boottime, 0 when not known): with comm,
 * its stat and comm are not read from /proc. Returns as procs__get. */
struct proc *procs__exec(struct procs *ps, uint32_t tgid, const char *comm, uint64_t cgroup_id,
                         uint64_t start_ns, uint64_t now_ns);

/* With on, procs__exec reads nothing of /proc: the process is read at its
 * first procs__get (its first sample), and hints and procs__reread_exec
 * pass it by until then. Only where BPF wakes user space at a new
 * program's first sample (the sampler's fresh_tgids, with use_vma): most
 * of a build node's processes end unsampled, and their reads were most of
 * the agent's cost there. A process excluded (skipped) before its exec is
 * still read at once: BPF does not sample it. */
void procs__lazy_exec(struct procs *ps, bool on);

/* What the walk's hint (CX_REC_MAPS) says ran: the mapping starting at
 * addr (0: not said), of the file with inode ino on device dev (the
 * kernel's dev_t, major << 20 | minor). */
struct procs_hint {
    uint64_t addr, ino;
    uint32_t dev;
};

/* A hint from the walk (taken at hint_ns on the monotonic clock) that
 * process tgid runs code in a mapping it may have mapped since: its maps
 * are read again now unless they were read after the hint, already hold
 * that mapping of that file, or it has exited. */
void procs__hint_maps(struct procs *ps, uint32_t tgid, uint64_t hint_ns, const struct procs_hint *h,
                      uint64_t now_ns);

/* Reads the maps of process tgid again now (once ld.so has mapped the
 * libraries of the program it exec'd, by mapped_ns), if it is in the
 * table, has not exited, and they were neither read since its exec's read
 * nor first read at or after mapped_ns: the listener hears of it as of
 * any read. */
void procs__reread_exec(struct procs *ps, uint32_t tgid, uint64_t mapped_ns, uint64_t now_ns);
/* Exit: forgotten by procs__sweep once it has been gone for a while.
 * Returns the process (valid until the next sweep), or NULL if unknown. */
struct proc *procs__exit(struct procs *ps, uint32_t tgid, uint64_t now_ns);

/* Reads every process in /proc now (at start). Returns how many. */
unsigned procs__scan(struct procs *ps, uint64_t now_ns);

/* Calls fn(ctx, tgid) for every process in /proc whose environment opts
 * out (CODEXRAY_PROFILING=disabled), reading only each one's environ: the
 * start-up's first pass, so those go into BPF's skip map before the full
 * scan (maps, tables) that takes seconds on a busy machine. Adds nothing to
 * the table. Returns how many were found. */
unsigned procs__scan_disabled(struct procs *ps, void (*fn)(void *ctx, uint32_t tgid), void *ctx);

/* Forgets processes that exited before `exited_before_ns`. With
 * check_alive, also asks /proc after every other process (an access() and
 * a read of its stat each): one /proc no longer has, or whose pid was
 * reused, is taken as exited then (its exit event was lost), and
 * forgotten at a later sweep. */
void procs__sweep(struct procs *ps, uint64_t exited_before_ns, bool check_alive);

/* Calls fn for every process in the table; fn must not add or forget any. */
void procs__each(struct procs *ps, void (*fn)(void *ctx, struct proc *p), void *ctx);

unsigned procs__count(const struct procs *ps);

/* How many times, since procs__new, a process's maps were read, and its
 * identity (cgroup, environment, executable: at first sight and after
 * exec): what a busy node's new processes cost, in the window's log line. */
void procs__reads(const struct procs *ps, uint64_t *maps, uint64_t *identities);

/* Who else keeps state per process (the CFI unwinder, the runtimes): told
 * after every read of a process's maps (also a failed one: no maps then),
 * when a process exits (`exited`, at its exit event: what BPF needs of it
 * may go) and when it is forgotten (`gone`, by procs__sweep, after the
 * window that holds its last samples was drained: what names them may go
 * now). A process whose exit event was lost is only forgotten. */
struct procs_listener {
    void (*maps_read)(void *ctx, const struct proc *p, uint64_t now_ns);
    void (*exited)(void *ctx, uint32_t tgid, uint64_t now_ns);
    void (*gone)(void *ctx, uint32_t tgid, uint64_t now_ns);
    void *ctx;
};
void procs__set_listener(struct procs *ps, const struct procs_listener *l);

/* How long ago a process started, in ms, from its start time in clock
 * ticks since boot (/proc/PID/stat field 22); -1 when unknown. */
long long procs__age_ms(uint64_t start_ticks);

#endif
