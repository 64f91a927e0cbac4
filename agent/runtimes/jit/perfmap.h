/* Perf maps: the names a JIT (V8, HotSpot, .NET, LuaJIT...) writes for the
 * code it generates, by the perf convention `/tmp/perf-PID.map`, one
 * `START SIZE name` line per piece of code (START and SIZE in hex, with or
 * without 0x; the name is the rest of the line, spaces and all).
 *
 * A perfmap holds the entries of one file, sorted by start, and is read
 * again as the file grows, from where the last read stopped. Everything in
 * it comes from the process: the file is capped (PERFMAP_MAX_BYTES), lines
 * are capped (PERFMAP_MAX_LINE, longer ones dropped), entries are capped
 * (PERFMAP_MAX_ENTRIES), and the file is opened inside the process's root
 * without following a symlink out of it.
 *
 * A perfmap_cache keeps one perfmap per process for the worker thread. Not
 * thread safe: one owner.
 */
#ifndef CODEXRAY_AGENT_RUNTIMES_JIT_PERFMAP_H
#define CODEXRAY_AGENT_RUNTIMES_JIT_PERFMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PERFMAP_MAX_BYTES (64u << 20)
#define PERFMAP_MAX_LINE 4096u
#define PERFMAP_MAX_ENTRIES (1u << 20)

struct perfmap;

/* An empty map; NULL when out of memory. */
struct perfmap *perfmap__new(void);
/* pm may be NULL. */
void perfmap__free(struct perfmap *pm);

/* Parses text as the next bytes of the file: whole lines only. Returns the
 * bytes consumed (up to and with the last newline; a partial last line is
 * left for the next call, unless it is already longer than PERFMAP_MAX_LINE,
 * in which case it is consumed and the rest of it skipped when it comes), or
 * -ENOMEM (entries added before stay). Lines that do not parse are counted
 * (perfmap__bad). Call perfmap__sort before looking up. */
long perfmap__feed(struct perfmap *pm, const char *text, size_t len);

/* Sorts what perfmap__feed added. Cannot fail. */
void perfmap__sort(struct perfmap *pm);

/* The name of the code holding addr, or NULL. Where entries overlap (code
 * freed and its memory reused), the one written last wins. The string lives
 * until pm is freed or reset (a reread of a replaced file). */
const char *perfmap__lookup(const struct perfmap *pm, uint64_t addr);

size_t perfmap__count(const struct perfmap *pm);
size_t perfmap__bad(const struct perfmap *pm);
/* True when a cap cut the map (bytes or entries). */
bool perfmap__capped(const struct perfmap *pm);

/* Reads what was appended to the file behind fd since the last read (all of
 * it when the file was replaced or shrank: another inode, or a size below
 * the last offset), at most up to PERFMAP_MAX_BYTES, and sorts. Does not
 * close fd. Returns 0 (also when nothing new), -EINVAL when fd is not a
 * regular file, -ENOMEM or a read errno; entries read before stay. */
int perfmap__read_fd(struct perfmap *pm, int fd);

/* Opens the perf map of process pid as the process sees it:
 * `<proc_root>/PID/root` + `/tmp/perf-NSPID.map`, NSPID being the pid in the
 * process's own pid namespace (the last NSpid of /proc/PID/status). The path
 * is resolved inside the process's root (openat2 RESOLVE_IN_ROOT, no magic
 * links; else /tmp and the file opened with O_NOFOLLOW), the file must be a
 * regular file owned by root or by the process's real or effective uid.
 * Returns the descriptor (the caller closes it), or a negative errno:
 * -ENOENT when there is no map, -EPERM when the owner is wrong, -EINVAL when
 * it is not a regular file. */
int perfmap__open_proc(const char *proc_root, uint32_t pid);

struct perfmap_cache;

/* proc_root is "/proc" (or a test's copy), copied. NULL when out of memory. */
struct perfmap_cache *perfmap_cache__new(const char *proc_root);
/* c may be NULL. */
void perfmap_cache__free(struct perfmap_cache *c);

/* The perf map of process tgid, read or read further when the file grew,
 * opened at most once per `recheck_ns` per process (now_ns a monotonic
 * clock). start_time tells a reused pid apart (0: unknown, not checked).
 * Returns NULL when the process has no perf map (or it cannot be read);
 * *why then says why (a static string), when why is not NULL. The map stays
 * valid until the next call for the same process or perfmap_cache__sweep. */
struct perfmap *perfmap_cache__get(struct perfmap_cache *c, uint32_t tgid, uint64_t start_time,
                                   uint64_t now_ns, uint64_t recheck_ns, const char **why);

/* The process's map is read whole again at the next perfmap_cache__get, and
 * that get opens it whatever recheck_ns says: for a map the runtime has
 * written anew in place (HotSpot's Compiler.perfmap truncates and rewrites
 * it, which reading on from the last offset would get wrong). */
void perfmap_cache__invalidate(struct perfmap_cache *c, uint32_t tgid, uint64_t start_time);

/* One-shot flag per process: returns true the first time it is asked for
 * (tgid, start_time, key), false after. For hints logged once per process.
 * Returns false when out of memory. */
bool perfmap_cache__once(struct perfmap_cache *c, uint32_t tgid, uint64_t start_time, unsigned key);

/* Whether perfmap_cache__once was already asked for (tgid, start_time,
 * key), without asking. */
bool perfmap_cache__seen(struct perfmap_cache *c, uint32_t tgid, uint64_t start_time, unsigned key);

/* Rate limit per process: returns true, and starts the clock again, when
 * the last true for (tgid, start_time) was `every_ns` or more before now_ns
 * (or there was none). False when out of memory. */
bool perfmap_cache__due(struct perfmap_cache *c, uint32_t tgid, uint64_t start_time,
                        uint64_t now_ns, uint64_t every_ns);

/* Forgets processes not asked for since before `unused_before_ns`. */
void perfmap_cache__sweep(struct perfmap_cache *c, uint64_t unused_before_ns);

#endif
