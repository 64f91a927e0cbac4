/* What the profiles of one window share on the worker: the names of native
 * frames by (binary, offset), so the hundreds of processes of one binary
 * (a pool of workers, a fleet of sidecars) pay the naming of a frame once a
 * window, not once a process; and the scratch maps each profile fills,
 * emptied and refilled rather than made anew for every profile.
 *
 * A name kept here points at the symbolizer's strings, which live until
 * symbolizer__trim(): call profile_cache__window_end() before it. Owned by
 * one thread (the worker).
 */
#ifndef CODEXRAY_AGENT_PROFILE_CACHE_H
#define CODEXRAY_AGENT_PROFILE_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/pprof/pprof_writer.h"
#include "symbolize/binary.h"

/* Names kept a window at most; past it, frames are named by the
 * symbolizer each time, as without the cache. */
#define PROFILE_CACHE_MAX 200000

struct profile_cache;

/* NULL when out of memory. */
struct profile_cache *profile_cache__new(void);
/* pc may be NULL. */
void profile_cache__free(struct profile_cache *pc);

/* The name kept for the code at file_offset of b (is_return as
 * symbolizer__lookup's): its lines, innermost first, and *entry (the
 * outermost function is where a stack starts). Returns the number of lines
 * (*lines points at them until the window's end), 0 when none is kept. */
unsigned profile_cache__get(struct profile_cache *pc, const struct binary *b, uint64_t file_offset,
                            bool is_return, const struct pprof_line **lines, bool *entry);

/* Keeps a named frame's n lines (1..SYM_MAX_INLINE; their strings must
 * live to the window's end) and entry. Out of memory or past
 * PROFILE_CACHE_MAX it keeps nothing, which only costs the next lookup. */
void profile_cache__put(struct profile_cache *pc, const struct binary *b, uint64_t file_offset,
                        bool is_return, const struct pprof_line *lines, unsigned n, bool entry);

/* How many names are kept (tests). */
size_t profile_cache__len(const struct profile_cache *pc);

/* Forgets every name: the window's binaries and the symbolizer's strings
 * may go after this. */
void profile_cache__window_end(struct profile_cache *pc);

/* The scratch of one profile: two maps, emptied, and n zeroed ids. NULL
 * when out of memory. Valid until the next call. */
struct hmap *profile_cache__seen(struct profile_cache *pc, unsigned which);
uint64_t *profile_cache__ids(struct profile_cache *pc, size_t n);

#endif
