/* A region of memory that things are allocated from one after another and
 * freed all at once: what one aggregation window builds (its processes,
 * their maps of stacks, names) lives as long as the window. One malloc per
 * chunk instead of one per object: the agent's main thread made about 15
 * allocations per process per window, and on a busy node each cost a walk
 * of cold free lists (docs/benchmarks.md).
 *
 * Not thread-safe: one owner at a time (the window passes from the main
 * thread to the worker whole).
 */
#ifndef CODEXRAY_COMMON_ARENA_H
#define CODEXRAY_COMMON_ARENA_H

#include <stddef.h>

struct arena;

/* An empty arena whose first chunk will hold `first` bytes (rounded up to
 * 256; each next chunk doubles, up to 1 MiB). NULL when out of memory. */
struct arena *arena__new(size_t first);
/* Frees every allocation and the arena; a may be NULL. */
void arena__free(struct arena *a);

/* size bytes aligned to 16, uninitialised; NULL when out of memory or size
 * is absurd (over 1 GiB). */
void *arena__alloc(struct arena *a, size_t size);
/* n * size zeroed bytes; NULL on overflow or out of memory. */
void *arena__calloc(struct arena *a, size_t n, size_t size);
/* old (old_size bytes from this arena, or NULL) moved to new_size bytes,
 * in place when old was the last allocation and its chunk has room; the
 * bytes past old_size are uninitialised. On NULL old is untouched. A moved
 * block's old bytes stay allocated until the arena is freed. */
void *arena__grow(struct arena *a, void *old, size_t old_size, size_t new_size);
/* A copy of s; NULL when out of memory. */
char *arena__strdup(struct arena *a, const char *s);

/* Bytes the arena holds from malloc (its chunks). */
size_t arena__bytes(const struct arena *a);

#endif
