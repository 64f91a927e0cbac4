/* The two calls profiling rests on, bpf() and perf_event_open(), tried
 * once before anything is loaded, so that a refusal is explained in words a
 * user can act on: which call, the likely cause (a seccomp profile, a
 * missing capability, a user namespace, kernel.perf_event_paranoid, kernel
 * lockdown) and the flag that fixes it. A refusal is never put down to the
 * kernel's version. */
#ifndef CODEXRAY_AGENT_PREFLIGHT_H
#define CODEXRAY_AGENT_PREFLIGHT_H

#include <stdbool.h>
#include <stddef.h>

/* bpf(): creates and closes the smallest array map. 0, or -1 with err
 * filled when the call is refused (EPERM, EACCES) or fails otherwise. */
int preflight__bpf(char *err, size_t errlen);

/* perf_event_open(): a cpu-clock event on the first CPU that takes one,
 * opened disabled and closed at once. 0, or -1 with err filled. */
int preflight__perf_event(char *err, size_t errlen);

/* The message for `call` failing with errno `e` (pure: the unit tests call
 * it). `capable`: whether the agent holds the capability the call wants;
 * `paranoid`: kernel.perf_event_paranoid, or a value below -1 when unknown
 * (perf_event_open() only). */
void preflight__explain(const char *call, int e, bool capable, int paranoid, char *out, size_t len);

#endif
