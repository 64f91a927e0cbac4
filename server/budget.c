#include "budget.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

void budget__init(struct budget *b, size_t max)
{
    *b = (struct budget){0, max, false};
}

bool budget__take(struct budget *b, size_t n, size_t size)
{
    size_t bytes;

    if (__builtin_mul_overflow(n, size, &bytes) || bytes > b->max - b->used) {
        b->over = true;
        return false;
    }
    b->used += bytes;
    return true;
}

void *budget__malloc(struct budget *b, size_t n, size_t size)
{
    /* at least one item: malloc(0) may answer NULL */
    return budget__take(b, n ? n : 1, size) ? malloc((n ? n : 1) * size) : NULL;
}

void *budget__calloc(struct budget *b, size_t n, size_t size)
{
    return budget__take(b, n ? n : 1, size) ? calloc(n ? n : 1, size) : NULL;
}

int budget__grow(struct budget *b, void **p, size_t *cap, size_t need, size_t size, size_t min)
{
    size_t ncap = *cap ? *cap : min ? min : 1;

    if (need <= *cap)
        return 0;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2)
            return -E2BIG;
        ncap *= 2;
    }
    if (!budget__take(b, ncap - *cap, size))
        return -E2BIG;
    void *np = realloc(*p, ncap * size);
    if (!np) {
        b->used -= (ncap - *cap) * size;
        return -ENOMEM;
    }
    *p = np;
    *cap = ncap;
    return 0;
}
