/* A request's memory budget: everything ingest allocates for one request
 * (the inflated body, the reader's tables, its own arrays, the store's
 * put) is counted against one cap, so no body, whatever its shape, makes
 * a request take more (README, "The server": the bound per upload). */
#ifndef CODEXRAY_SERVER_BUDGET_H
#define CODEXRAY_SERVER_BUDGET_H

#include <stdbool.h>
#include <stddef.h>

struct budget {
    size_t used, max;
    bool over; /* something was refused for want of room: a 413, not a 500 */
};

/* An empty budget of max bytes. */
void budget__init(struct budget *b, size_t max);

/* Counts n items of size bytes. true when they fit (used grows); false,
 * with over set and used unchanged, when they do not (or n * size
 * overflows). */
bool budget__take(struct budget *b, size_t n, size_t size);

/* malloc / calloc of n items of size bytes, counted. NULL past the budget
 * (over set) or when out of memory. The caller frees with free(); the
 * count is not given back (a request's budget only grows). */
void *budget__malloc(struct budget *b, size_t n, size_t size);
void *budget__calloc(struct budget *b, size_t n, size_t size);

/* Grows the array *p of *cap items of size bytes to at least need items,
 * doubling from at least min; the growth counted. Returns 0 (also when it
 * is big enough), -E2BIG past the budget, -ENOMEM; *p and *cap are
 * unchanged on failure. */
int budget__grow(struct budget *b, void **p, size_t *cap, size_t need, size_t size, size_t min);

#endif
