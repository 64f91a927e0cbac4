/* The spool's file format and directory: profiles the shipper could not
 * send yet, one file each, SEQ~PID.cxspool, SEQ (ns, 20 digits) sorting
 * oldest first. A file is a small text header, then the pprof as the
 * worker made it (raw: the shipper compresses whole batches; earlier
 * agents spooled zstd or gzip, which the server takes as well):
 *
 *   codexray-spool 1\n
 *   service=nginx\n          one line per query parameter, value URL-encoded
 *   host=web-1\n
 *   pid=1234\n
 *   systemd_unit=nginx.service\n
 *   \n
 *   <body>
 *
 * The header travels with the body, so the two can never disagree, and a
 * new label is a new line, not a new name format. A profile waiting in
 * memory is kept in the same form, so spilling it is one write. Files of
 * earlier agents, SEQ~PID~HOST~SERVICE.pb.gz (the identity in the name, the
 * body alone), are still read and sent. */
#ifndef CODEXRAY_AGENT_SPOOL_H
#define CODEXRAY_AGENT_SPOOL_H

#include <stddef.h>
#include <stdint.h>

#include "../common/buf.h"
#include "procs/identity.h"

#define SPOOL_HEADER_MAX 8192
/* The largest profile the shipper keeps or sends. */
#define SPOOL_FILE_MAX (64u << 20)

struct spooled {
    char name[1024];
    uint64_t size;
};

/* Appends the spool form of one profile (header, then data) to b. Returns
 * 0 or -errno (-E2BIG when b's cap is too small). */
int spool__format(struct buf *b, const struct identity *id, uint32_t pid, const char *host,
                  const void *data, size_t len);

/* The upload's query string ("service=...&host=...") of the profile named
 * name (a file name, for the legacy form) whose spool form is f, and where
 * its body starts. Every key must be one spool__format writes and every
 * value URL-safe as it stands: a file edited or cut short is refused, not
 * sent as garbage. Returns 0, or -1 with why filled. */
int spool__query(const char *name, const struct buf *f, char *query, size_t qlen, size_t *body,
                 char *why, size_t whylen);

/* Lists the spool directory dir, oldest first, with the total of the
 * files' sizes. Only regular files with a spool name count. Caller frees
 * *out. Returns 0 or -errno. */
int spool__list(const char *dir, struct spooled **out, size_t *n, uint64_t *total);

/* Writes one profile in spool form (f) durably under dir as SEQ~PID, SEQ
 * greater than *seq (updated). *total is the spool's size in bytes as the
 * caller keeps it (updated): only when f would take it past max is the
 * directory listed, for its real size, and its oldest files dropped while
 * the spool would pass max (logged with their count). So writing a file
 * costs no listing while the spool is within its bound. Returns 0 or
 * -errno. */
int spool__write(const char *dir, uint64_t *seq, uint32_t pid, const struct buf *f, uint64_t max,
                 uint64_t *total);

#endif
