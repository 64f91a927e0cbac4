/* The off-CPU stacks user space has been sent (CX_REC_OFFCPU records), by
 * the key their sums are kept under in BPF (struct cx_off_key): the sums
 * come later, from sampler__drain_off at each window's end, and name their
 * stack only by key. A stack is sent again when its key is new to the BPF
 * map, so one unused for OFFCPU_KEEP_NS is forgotten; a sum whose stack is
 * not here (a thread blocked longer than that, or a table that was full)
 * is counted as time without a stack, not guessed.
 */
#ifndef CODEXRAY_AGENT_OFFCPU_H
#define CODEXRAY_AGENT_OFFCPU_H

#include <stddef.h>
#include <stdint.h>

#include <linux/types.h> /* the __u32 and friends sample.h is written in */

#include "bpf/sample.h"

#define OFFCPU_KEEP_NS (10ull * 60 * 1000 * 1000 * 1000)
/* The table's bounds: past either a new stack is refused (counted). */
#define OFFCPU_MAX_STACKS 65536
#define OFFCPU_MAX_BYTES (64u << 20)

struct offcpu;

/* NULL when out of memory. */
struct offcpu *offcpu__new(void);
/* o may be NULL. */
void offcpu__free(struct offcpu *o);

/* Keeps a copy of stack s (a CX_REC_OFFCPU record of `size` bytes, checked
 * by the caller to hold its frames), replacing one of the same key.
 * Returns 0, or -E2BIG past the bounds, -ENOMEM. */
int offcpu__put(struct offcpu *o, const struct cx_sample *s, uint64_t now_ns);

/* The stack kept for k (marked used at now_ns), or NULL. Valid until the
 * next offcpu__put or offcpu__sweep. */
const struct cx_sample *offcpu__get(struct offcpu *o, const struct cx_off_key *k, uint64_t now_ns);

/* Forgets the stacks unused for OFFCPU_KEEP_NS. Returns 0 or -ENOMEM (the
 * table is then unchanged). */
int offcpu__sweep(struct offcpu *o, uint64_t now_ns);

/* Stacks held, and stacks refused since new (bounds or memory). */
size_t offcpu__len(const struct offcpu *o);
uint64_t offcpu__refused(const struct offcpu *o);

#endif
