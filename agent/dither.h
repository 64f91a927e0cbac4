/* The sampling period, drawn at random around 1/rate and drawn again every
 * second, so that samples cannot fall in step with the
 * kernel's tick or with any periodic work (a fixed 10 ms period against a
 * 4 ms tick samples the same two points of the tick for ever; against work
 * that runs every 10 ms it sees that work always or never).
 *
 * Pure arithmetic, no system calls: the sampler applies the periods with
 * PERF_EVENT_IOC_PERIOD. The kernel restarts a cpu-clock event's timer from
 * the moment of that ioctl, so the time between a CPU's last sample and the
 * ioctl is not sampled: half a period on average. The frequency is raised by
 * that much (1 / (2 x the segment's length)) so that, on average, a CPU is
 * still sampled `rate` times a second and each sample still stands for
 * 1/rate seconds of CPU. */
#ifndef CODEXRAY_AGENT_DITHER_H
#define CODEXRAY_AGENT_DITHER_H

#include <stdint.h>

/* How far a frequency strays from the mean, either way: 1/5. A 4 ms tick
 * against periods of 8.3-12.5 ms: the period modulo the tick takes every
 * value, so successive samples walk through the tick's phases. */
#define DITHER_SPREAD_PERMILLE 200

/* How often periods are drawn again: every second, or every 100 periods at
 * rates under 100 Hz (a segment must hold many periods for the loss at its
 * start to be half a period on average; at 1 Hz a short segment would never
 * see a sample). Each draw is one ioctl per CPU, an IPI to that CPU that the
 * caller waits for (about 20 us on a VM): every 200 ms they were 8 % of the
 * agent's CPU with 500 processes, and drawing every second spreads samples
 * over the tick's phases as well (test_sample_times_not_in_step). */
#define DITHER_SEGMENT_NS 1000000000ull
#define DITHER_SEGMENT_PERIODS 100

struct dither {
    uint64_t rng;
    unsigned rate_hz;
};

/* The CPU time one sample stands for at rate_hz (0 is taken as 1): 1/rate
 * seconds, in nanoseconds. The period of --sample-times fixed, and the mean
 * the dithered periods keep; what every profile's period says. */
uint64_t dither__sample_ns(unsigned rate_hz);

/* seed: any value (0 is replaced). */
void dither__init(struct dither *d, unsigned rate_hz, uint64_t seed);

/* How long a segment between two draws should last at this rate. */
uint64_t dither__segment_ns(const struct dither *d);

/* A period in nanoseconds for one CPU's next segment, which is expected to
 * last segment_ns: its frequency uniform in
 * (rate + 1e9 / (2 segment_ns)) x [1 - spread, 1 + spread]. Never below
 * 10 us (the kernel's floor for cpu-clock). */
uint64_t dither__period(struct dither *d, uint64_t segment_ns);

#endif
