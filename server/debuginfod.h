/* The server's debuginfod: GET /debuginfod/buildid/ID/debuginfo and
 * /executable (the debuginfod protocol), answered from debug files uploaded
 * to it (PUT or POST with the ingest API key) and from upstream debuginfod
 * servers, each file fetched once and kept on disk, bounded, for every agent.
 *
 * Under DIR: uploads/ID.KIND (kept until removed by hand), cache/ID.KIND
 * (upstream's, least recently used out first past the bound), client/
 * (libdebuginfod's own, emptied after each fetch). Everything stored was
 * checked first: size cap, whole, the build id of its path
 * (common/debugfile.h).
 */
#ifndef CODEXRAY_SERVER_DEBUGINFOD_H
#define CODEXRAY_SERVER_DEBUGINFOD_H

#include <stddef.h>
#include <stdint.h>

#include "../common/buf.h"

struct dbgsrv_opts {
    const char *dir;
    const char *upstream; /* space-separated URLs; NULL or "": uploads only */
    uint64_t cache_max;   /* bytes under cache/ */
    uint64_t file_max;    /* the largest file taken, uploaded or fetched */
    unsigned timeout_s;   /* an upstream silent this long is given up */
};

struct dbgsrv;

/* Makes the directories and sets the environment libdebuginfod reads: call
 * before any thread starts. NULL with err filled on failure. */
struct dbgsrv *dbgsrv__new(const struct dbgsrv_opts *o, char *err, size_t errlen);
/* s may be NULL. */
void dbgsrv__free(struct dbgsrv *s);

/* Splits "/debuginfod/buildid/ID/KIND" (KIND debuginfo or executable).
 * Returns 0 with id (DEBUGFILE_ID_MAX+1 bytes) and *kind set, or -1 for
 * anything else: a malformed or hostile id (uppercase, "..", a slash, too
 * long), another KIND (source, section: not served), extra parts. */
int dbgsrv__parse_path(const char *url, char *id, const char **kind);

/* The file for (id, kind), opened: from uploads, the cache, else fetched
 * from upstream (one fetch per id at a time; others asking for the same id
 * wait for it). Returns 0 with *fd (the caller closes it) and *size; or
 * -ENOENT (no one has it; why says more), -EAGAIN (upstream unreachable or
 * too slow: ask again later), -EIO (what came back was refused). May block
 * up to about twice the timeout: it runs on an HTTP worker thread. */
int dbgsrv__open(struct dbgsrv *s, const char *id, const char *kind, int *fd, uint64_t *size,
                 char *why, size_t whylen);

struct dbgsrv_upload;
/* Starts an upload of (id, kind) of declared length (0: unknown). NULL with
 * why set when it is refused at once (too large, out of space). */
struct dbgsrv_upload *dbgsrv__upload_begin(struct dbgsrv *s, const char *id, const char *kind,
                                           uint64_t declared, char *why, size_t whylen);
/* Appends a part; past the cap the rest is dropped and finish refuses. */
void dbgsrv__upload_write(struct dbgsrv_upload *u, const void *p, size_t n);
/* Checks the whole file and stores it. Returns 0, or -1 with why. */
int dbgsrv__upload_finish(struct dbgsrv_upload *u, char *why, size_t whylen);
/* Drops an upload not finished (its temporary file goes). u may be NULL. */
void dbgsrv__upload_free(struct dbgsrv_upload *u);

/* Appends the Prometheus lines: hits, misses, bytes served, upstream
 * fetches and failures, uploads, refused files. Returns 0 or -ENOMEM. */
int dbgsrv__metrics(struct dbgsrv *s, struct buf *b);

#endif
