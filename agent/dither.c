#include "dither.h"

void dither__init(struct dither *d, unsigned rate_hz, uint64_t seed)
{
    d->rng = seed ? seed : 0x9e3779b97f4a7c15ull;
    d->rate_hz = rate_hz ? rate_hz : 1;
}

uint64_t dither__sample_ns(unsigned rate_hz)
{
    return 1000000000ull / (rate_hz ? rate_hz : 1);
}

uint64_t dither__segment_ns(const struct dither *d)
{
    uint64_t periods = DITHER_SEGMENT_PERIODS * 1000000000ull / d->rate_hz;

    return periods > DITHER_SEGMENT_NS ? periods : DITHER_SEGMENT_NS;
}

/* xorshift64*: statistically plenty for spreading sample times. */
static uint64_t next(struct dither *d)
{
    uint64_t x = d->rng;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    d->rng = x;
    return x * 0x2545f4914f6cdd1dull;
}

uint64_t dither__period(struct dither *d, uint64_t segment_ns)
{
    /* Frequencies in millihertz: integers, no floating point. */
    uint64_t mean = (uint64_t)d->rate_hz * 1000u;

    if (segment_ns)
        mean += 500000000000ull / segment_ns; /* 1e9 / (2 seg) Hz, in mHz */
    uint64_t lo = mean * (1000u - DITHER_SPREAD_PERMILLE) / 1000u;
    uint64_t width = mean * 2u * DITHER_SPREAD_PERMILLE / 1000u;
    /* The top 32 bits scaled into [0, width]. */
    uint64_t f = lo + (((next(d) >> 32) * (width + 1)) >> 32);
    uint64_t period = f ? 1000000000000ull / f : 1000000000ull;

    return period < 10000 ? 10000 : period;
}
