/* Debug files fetched by build id from debuginfod servers, in the
 * background, for binaries the agent cannot name from what is on the node
 * (stripped, no debug package installed).
 *
 * One thread asks the servers through elfutils' client (libdebuginfod), one
 * build id at a time; the symbolizer only asks "is it here yet?", which
 * never waits on the network. What comes back is checked (size cap, whole,
 * the build id asked for: common/debugfile.h) and kept under DIR/files,
 * bounded (least recently used out first), so a restart does not fetch it
 * again. A failure is remembered and asked again after a backoff (10 s,
 * doubling to 10 min); the first one per build id is logged with its reason.
 *
 * libdebuginfod reads its servers from the environment (DEBUGINFOD_URLS),
 * for the whole process: debuginfod__start sets it, so it must run before
 * any other thread starts. libdwfl would then query the servers itself,
 * synchronously, from the symbolizer; symbolizer.c keeps it from doing so
 * (its own find_debuginfo callback).
 */
#ifndef CODEXRAY_AGENT_SYMBOLIZE_DEBUGINFOD_H
#define CODEXRAY_AGENT_SYMBOLIZE_DEBUGINFOD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct debuginfod_opts {
    const char *urls;       /* space-separated, as DEBUGINFOD_URLS */
    const char *dir;        /* DIR/files keeps the debug files, DIR/client libdebuginfod's own */
    uint64_t cache_max;     /* bytes under DIR/files */
    uint64_t file_max;      /* the largest debug file taken */
    unsigned timeout_s;     /* a server silent this long is given up */
    const char *auth_token; /* sent as Authorization: Bearer TOKEN; NULL: none */
};

enum debuginfod_state {
    DEBUGINFOD_PENDING, /* asked for, or about to be */
    DEBUGINFOD_READY,   /* path filled */
    DEBUGINFOD_FAILED,  /* why filled; asked again later */
};

struct debuginfod;

/* Makes the directories, sets the environment libdebuginfod reads and
 * starts the thread. Call before any other thread exists. NULL with err
 * filled on failure. */
struct debuginfod *debuginfod__start(const struct debuginfod_opts *o, char *err, size_t errlen);

/* Stops the thread (a download under way is cut short) and frees d. d may
 * be NULL. */
void debuginfod__stop(struct debuginfod *d);

/* The debug file of build id `id` (lowercase hex): READY with its path,
 * PENDING (queued if it was not: `what` names the binary in the logs), or
 * FAILED with the reason of the last try. Never waits on the network. A
 * READY file is marked as used, so the cache keeps it longest. */
enum debuginfod_state debuginfod__want(struct debuginfod *d, const char *id, const char *what,
                                       char *path, size_t pathlen, char *why, size_t whylen);

/* Waits until nothing is queued or being fetched, at most timeout_ms.
 * Returns true when idle. For the one-shot `record`. */
bool debuginfod__wait_idle(struct debuginfod *d, unsigned timeout_ms);

/* The URLs in use. */
const char *debuginfod__urls(const struct debuginfod *d);

#endif
