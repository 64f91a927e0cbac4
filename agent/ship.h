/* Shipping profiles to codexray-server: a thread uploads each window's
 * profiles straight from memory (bounded at 64 MiB). A profile goes to the
 * spool directory on disk (durably, spool.h) only when it cannot be sent:
 * an upload failed (then every waiting profile is spilled), the memory
 * bound was passed, or the agent is stopping. The spool is sent first,
 * oldest first, each file deleted once the server answers 202. A server
 * outage or an agent restart therefore loses nothing within the spool's
 * bound (past it the oldest files go first, counted in the log); an agent
 * killed outright loses only the window being sent. Writing every profile
 * to disk first cost a file created, fsync'd, listed, read and deleted per
 * process per window. */
#ifndef CODEXRAY_AGENT_SHIP_H
#define CODEXRAY_AGENT_SHIP_H

#include <stddef.h>
#include <stdint.h>

#include "procs/identity.h"

struct ship_opts {
    const char *endpoint; /* the server's base URL */
    const char *api_key;  /* NULL = none */
    const char *spool_dir;
    uint64_t spool_max_bytes;
};

struct shipper;

/* Creates the spool directory and starts the upload thread; files already
 * spooled (from before a restart) are sent first. NULL with err filled. */
struct shipper *shipper__start(const struct ship_opts *opts, char *err, size_t errlen);

/* Queues one profile for upload, with its identity (id's fields, pid and
 * host become the upload's query parameters, URL-encoded; empty fields are
 * left out). data is copied; shipper__flush sends it. Returns 0 or -errno
 * (the profile is then not queued, and the caller logs it). Called from one
 * thread at a time. */
int shipper__enqueue(struct shipper *sh, const struct identity *id, uint32_t pid, const char *host,
                     uint64_t start_ns, const void *data, size_t len);

/* Wakes the upload thread for what was spooled: once a window, so a
 * window goes out in one pass and one log line. sh may be NULL. */
void shipper__flush(struct shipper *sh);

/* Stops the thread after its current upload; what is unsent stays spooled
 * for the next start. sh may be NULL. */
void shipper__stop(struct shipper *sh);

#endif
