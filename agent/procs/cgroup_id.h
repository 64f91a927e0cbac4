/* A cgroup v2 id (what BPF's bpf_get_current_cgroup_id gives) back to the
 * cgroup's path, through the cgroup2 file system's file handles.
 *
 * For a process the agent reads late: the exec event carries the id of the
 * cgroup it exec'd in, and when /proc/PID/cgroup is gone by the time the
 * event is handled (a short process on a busy machine), the path still
 * names its unit, container or pod. The cgroup outlives the process while
 * its service runs. */
#ifndef CODEXRAY_AGENT_PROCS_CGROUP_ID_H
#define CODEXRAY_AGENT_PROCS_CGROUP_ID_H

#include <stddef.h>
#include <stdint.h>

struct cgroup_ids;

/* The cgroup2 hierarchy under host_root ("" or "/proc/N/root"): at
 * /sys/fs/cgroup (unified) or /sys/fs/cgroup/unified (hybrid). NULL when
 * there is none (cgroup v1 only), or it cannot be opened. */
struct cgroup_ids *cgroup_ids__open(const char *host_root);
/* c may be NULL. */
void cgroup_ids__free(struct cgroup_ids *c);

/* Writes the cgroup's line as /proc/PID/cgroup gives it ("0::/a/b.service\n")
 * into out (len bytes, NUL-terminated). Returns its length, or 0 when c is
 * NULL, id is 0, the cgroup is gone, or its path does not fit. Needs
 * CAP_DAC_READ_SEARCH (open_by_handle_at). */
size_t cgroup_ids__line(struct cgroup_ids *c, uint64_t id, char *out, size_t len);

/* What a process of cgroup id gave as its /proc/PID/cgroup, remembered by
 * cgroup_ids__remember, or NULL (*len its length). Valid until the next
 * cgroup_ids__remember. A process is read with the id of the cgroup it
 * exec'd in: one moved to another cgroup between its exec and its read is
 * named by the first. */
const char *cgroup_ids__cached(struct cgroup_ids *c, uint64_t id, size_t *len);

/* Remembers text, a process's /proc/PID/cgroup, for id when it is exactly
 * the one line id's cgroup gives (cgroup_ids__line: cgroup v2 alone, and
 * the process still where it exec'd); otherwise nothing. A bounded number
 * of ids, the oldest in a slot forgotten. c may be NULL. */
void cgroup_ids__remember(struct cgroup_ids *c, uint64_t id, const char *text, size_t len);

#endif
