/* The off-CPU hook's duty cycle: at high context-switch rates the
 * sched_switch program is attached only in some slots of time (the cost of
 * an attached program is its dispatch at every switch, even empty; measured
 * in docs/benchmarks.md). Time is cut into slots of about slot_ns; each slot
 * is watched with probability f = min(1, rate0 / R), R the machine's
 * switches a second over the last slot (/proc/stat's ctxt), drawn at
 * random for each slot independently of every other (a periodic pattern
 * would make some block lengths never seen whole). The BPF program weighs a
 * block by the inverse of the probability that both its ends were watched
 * (bpf/sample.h cx_off_weight), so totals stay unbiased.
 *
 * Pure arithmetic and a random draw: the sampler reads /proc/stat, attaches
 * and detaches (sampler.c). */
#ifndef CODEXRAY_AGENT_OFFDUTY_H
#define CODEXRAY_AGENT_OFFDUTY_H

#include <stdbool.h>
#include <stdint.h>

/* The floor of f, of 65536: a slot's weight is at most 1024 whatever the
 * switch rate (the cost then is rate / 1024 switches seen). */
#define OFFDUTY_MIN_F16 64u

struct offduty_opts {
    uint64_t slot_ns;   /* a slot's length (0: 250 ms) */
    uint64_t rate0;     /* switches a second, machine-wide, watched in full; 0: every slot */
    uint32_t fixed_f16; /* tests: every slot's f, of 65536; 0: from the rate */
};

/* The slot begun, as the BPF program is told it (CX_OFF_DUTY). */
struct offduty_slot {
    uint32_t id;  /* 1, 2, ...: never 0 */
    uint32_t f16; /* its probability of being watched, of 65536 (1 to 65536) */
    bool watched; /* the draw */
};

struct offduty;

/* A duty cycle starting at now_ns with the machine's switch count ctxt;
 * its first slot is watched with f 1 (no rate known yet). seed: any value.
 * NULL when out of memory. */
struct offduty *offduty__new(const struct offduty_opts *o, uint64_t seed, uint64_t now_ns,
                             uint64_t ctxt, struct offduty_slot *first);

/* f for a rate of `rate` switches a second against rate0, of 65536:
 * 65536 up to rate0 (and for rate0 0), rate0 / rate above, never below
 * OFFDUTY_MIN_F16. */
uint32_t offduty__f16(uint64_t rate, uint64_t rate0);

/* When the current slot ends (CLOCK_MONOTONIC ns). */
uint64_t offduty__due_ns(const struct offduty *d);

/* If the current slot has ended by now_ns, begins the next (its f from the
 * switches since the last slot began, ctxt the machine's count now) and
 * returns true with *next filled; false while the slot goes on. */
bool offduty__tick(struct offduty *d, uint64_t now_ns, uint64_t ctxt, struct offduty_slot *next);

/* The machine's context switches since boot (/proc/stat's ctxt line; path
 * for tests, NULL: /proc/stat). 0 when unreadable. */
uint64_t offduty__read_ctxt(const char *path);

/* Thread tid of tgid's switches so far, voluntary plus not
 * (/proc/TGID/task/TID/status), what the BPF program reads as nvcsw +
 * nivcsw; proc: the proc root (NULL: /proc). -ENOENT when the thread is
 * gone, another negative errno when unreadable. */
int64_t offduty__task_csw(const char *proc, uint32_t tgid, uint32_t tid);

/* d may be NULL. */
void offduty__free(struct offduty *d);

#endif
