/* The off-CPU hook under its duty cycle (offduty.h): the sched_switch
 * program's link attached and detached slot by slot, and the program told
 * the slot through its off_duty word (bpf/offcpu.bpf.h). */
#ifndef CODEXRAY_AGENT_OFFHOOK_H
#define CODEXRAY_AGENT_OFFHOOK_H

#include <stdbool.h>
#include <stdint.h>

#include "offduty.h"

struct bpf_program;
struct offhook;

/* Attaches prog for the cycle's first slot (watched) and says so in *word
 * (the program's off_duty, in the skeleton's mapped .bss). NULL with errno
 * set when the attach fails or memory runs out. */
struct offhook *offhook__start(struct bpf_program *prog, uint64_t *word,
                               const struct offduty_opts *o);

/* When the current slot ends: a poll should come back by then. */
uint64_t offhook__due_ns(const struct offhook *h);

/* Begins the next slot if the current one is over at now_ns: attached and
 * told, or told nothing is watched and detached. */
void offhook__step(struct offhook *h, uint64_t now_ns);

/* Whether the program has watched every moment since t_ns (no slot
 * unwatched, no attach or detach under way, since then). */
bool offhook__watched_since(const struct offhook *h, uint64_t t_ns);

/* Detaches, logging the slots watched and what an attach and a detach
 * took. h may be NULL. */
void offhook__free(struct offhook *h);

#endif
