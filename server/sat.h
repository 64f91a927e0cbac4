/* Saturating sums of counts that come from outside (samples, CPU
 * nanoseconds): past int64 a sum stays at the limit instead of wrapping
 * negative, so no stored profile can turn a total, a timeline or a sort
 * order upside down. */
#ifndef CODEXRAY_SERVER_SAT_H
#define CODEXRAY_SERVER_SAT_H

#include <stdint.h>

/* a + b, held at INT64_MAX (or INT64_MIN) where it would overflow. */
static inline int64_t sat__add(int64_t a, int64_t b)
{
    int64_t r;

    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

/* *acc += v, saturating. */
static inline void sat__acc(int64_t *acc, int64_t v)
{
    *acc = sat__add(*acc, v);
}

#endif
