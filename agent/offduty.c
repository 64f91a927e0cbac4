#include "offduty.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OFFDUTY_SLOT_NS 250000000ull
#define F_ONE 65536u

struct offduty {
    struct offduty_opts o;
    uint64_t rng;
    uint64_t slot_start_ns, ctxt_start;
    uint32_t id;
};

/* xorshift64*, as dither.c: the draws only need to be independent of the
 * workload, not of an adversary. */
static uint64_t next_rand(struct offduty *d)
{
    uint64_t x = d->rng;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    d->rng = x;
    return x * 0x2545f4914f6cdd1dull;
}

uint32_t offduty__f16(uint64_t rate, uint64_t rate0)
{
    if (!rate0 || rate <= rate0)
        return F_ONE;
    /* rate > rate0 >= 1: the quotient is below 65536; rate0 is a config
     * value (at most 10^9), so rate0 * 65536 fits 64 bits. */
    uint64_t f = rate0 * F_ONE / rate;
    return f < OFFDUTY_MIN_F16 ? OFFDUTY_MIN_F16 : (uint32_t)f;
}

struct offduty *offduty__new(const struct offduty_opts *o, uint64_t seed, uint64_t now_ns,
                             uint64_t ctxt, struct offduty_slot *first)
{
    struct offduty *d = calloc(1, sizeof(*d));

    if (!d)
        return NULL;
    d->o = *o;
    if (!d->o.slot_ns)
        d->o.slot_ns = OFFDUTY_SLOT_NS;
    if (d->o.fixed_f16 > F_ONE)
        d->o.fixed_f16 = F_ONE;
    d->rng = seed ? seed : 0x9e3779b97f4a7c15ull;
    d->slot_start_ns = now_ns;
    d->ctxt_start = ctxt;
    d->id = 1;
    *first = (struct offduty_slot){1, F_ONE, true};
    return d;
}

uint64_t offduty__due_ns(const struct offduty *d)
{
    return d->slot_start_ns + d->o.slot_ns;
}

bool offduty__tick(struct offduty *d, uint64_t now_ns, uint64_t ctxt, struct offduty_slot *next)
{
    if (now_ns < offduty__due_ns(d))
        return false;
    uint64_t span = now_ns - d->slot_start_ns;
    /* A count that went back (unreadable: 0) says nothing: taken as rate 0. */
    uint64_t n = ctxt >= d->ctxt_start ? ctxt - d->ctxt_start : 0;
    /* Switches a second; n * 1e9 would overflow past 1.8e10 switches in a
     * slot, which no machine does in a second: n is capped first. */
    uint64_t rate = (n > (1ull << 32) ? 1ull << 32 : n) * 1000000000ull / (span ? span : 1);
    uint32_t f = d->o.fixed_f16 ? d->o.fixed_f16 : offduty__f16(rate, d->o.rate0);

    d->slot_start_ns = now_ns;
    d->ctxt_start = ctxt;
    d->id = d->id == UINT32_MAX ? 1 : d->id + 1;
    next->id = d->id;
    next->f16 = f;
    /* Watched with probability f: a uniform draw of 16 bits below f. */
    next->watched = f >= F_ONE || (uint32_t)(next_rand(d) >> 48) < f;
    return true;
}

uint64_t offduty__read_ctxt(const char *path)
{
    FILE *f = fopen(path ? path : "/proc/stat", "re");
    char line[256];
    uint64_t v = 0;

    if (!f)
        return 0;
    /* Lines longer than the buffer (intr) come in pieces: only a piece at
     * a line's start is looked at. */
    for (bool at_start = true; fgets(line, sizeof(line), f);) {
        if (at_start && strncmp(line, "ctxt ", 5) == 0) {
            v = strtoull(line + 5, NULL, 10);
            break;
        }
        at_start = strchr(line, '\n') != NULL;
    }
    fclose(f);
    return v;
}

int64_t offduty__task_csw(const char *proc, uint32_t tgid, uint32_t tid)
{
    char path[96], line[128];
    uint64_t vol = 0, invol = 0;
    int found = 0;

    snprintf(path, sizeof(path), "%s/%" PRIu32 "/task/%" PRIu32 "/status", proc ? proc : "/proc",
             tgid, tid);
    FILE *f = fopen(path, "re");
    if (!f)
        return errno == ENOENT || errno == ESRCH ? -ENOENT : -(errno ? errno : EIO);
    /* A line longer than the buffer comes in pieces; only a piece at a
     * line's start is looked at (a comm cannot forge one: it has no
     * newline). */
    for (bool at_start = true; found != 3 && fgets(line, sizeof(line), f);) {
        if (at_start && strncmp(line, "voluntary_ctxt_switches:", 24) == 0) {
            vol = strtoull(line + 24, NULL, 10);
            found |= 1;
        } else if (at_start && strncmp(line, "nonvoluntary_ctxt_switches:", 27) == 0) {
            invol = strtoull(line + 27, NULL, 10);
            found |= 2;
        }
        at_start = strchr(line, '\n') != NULL;
    }
    fclose(f);
    if (found != 3)
        return -EIO;
    return (int64_t)((vol + invol) & INT64_MAX);
}

void offduty__free(struct offduty *d)
{
    free(d);
}
