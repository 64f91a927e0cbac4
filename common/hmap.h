/* A hash map from byte strings to one uint64_t each, for interning: strings
 * in a pprof string table, stacks in an aggregation window, binaries in a
 * cache. Entries are numbered 0, 1, 2... in insertion order and are never
 * removed one by one (build a new map to drop entries), so an index is a
 * stable id and iteration is a loop over 0..hmap__len().
 *
 * Keys are copied in; the pointers hmap__key() returns stay valid until the
 * map is freed.
 */
#ifndef CODEXRAY_COMMON_HMAP_H
#define CODEXRAY_COMMON_HMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hmap;
struct arena;

/* Returns NULL when out of memory. */
struct hmap *hmap__new(void);
/* A map whose memory all comes from arena a (common/arena.h) and goes with
 * it: hmap__free does nothing then. Starts with room for nslots / 2 keys
 * (16 to 64 slots: a small map stays small). With a NULL, as hmap__new. */
struct hmap *hmap__new_in(struct arena *a, size_t nslots);
/* h may be NULL. */
void hmap__free(struct hmap *h);

/* Empties h for reuse, as if new: its memory is kept, up to a bound (a
 * map that grew large gives back what is past it), so a map filled and
 * emptied over and over (one per profile) allocates nothing and touches the
 * same pages each time. Every key pointer and index it gave is invalid
 * after. */
void hmap__clear(struct hmap *h);

/* Finds `key` or inserts it with value 0. Returns its index, or -1 when out
 * of memory (the map is unchanged). *inserted, when not NULL, says which. */
long hmap__put(struct hmap *h, const void *key, size_t len, bool *inserted);

/* Returns the index of `key`, or -1 when absent. */
long hmap__find(const struct hmap *h, const void *key, size_t len);

size_t hmap__len(const struct hmap *h);
const void *hmap__key(const struct hmap *h, size_t idx, size_t *len);
/* The value slot of entry idx, valid until the next hmap__put. */
uint64_t *hmap__val(struct hmap *h, size_t idx);

/* The hash used inside, for callers that want one. */
uint64_t hmap__hash(const void *key, size_t len);

#endif
