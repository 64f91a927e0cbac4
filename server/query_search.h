/* A merged result searched: the frames whose function's name matches a
 * search term, as the flame-graph tree of the paths down to them (every
 * total exact, the rest of each frame folded into "other"). What the web
 * UI asks for when its search box is used on a tree the server trimmed
 * (max_nodes), so that a frame folded away is found, drawn and counted. */
#ifndef CODEXRAY_SERVER_QUERY_SEARCH_H
#define CODEXRAY_SERVER_QUERY_SEARCH_H

#include <stddef.h>

#include "../common/buf.h"
#include "store.h"

/* The longest search= the HTTP API takes, in bytes. */
#define QUERY_SEARCH_MAX_BYTES 512
#define QUERY_SEARCH_MAX_BYTES_S "512"
/* The most paths (a stack's root down to its first matching frame) an
 * answer holds: the largest kept, "capped" said when more matched. */
#define QUERY_SEARCH_MAX_PATHS 500
/* The deepest matching frame a path may end at (deeper: left out, and
 * "capped" said). */
#define QUERY_SEARCH_MAX_DEPTH 1024

/* Whether term is a search the server takes: a case-insensitive substring
 * (ASCII), or "/RE/FLAGS" (as the UI's search box writes it) whose RE is a
 * POSIX extended regular expression and whose FLAGS are letters, i making
 * it case-insensitive (the others are JavaScript's and ignored). Returns 0,
 * or -1 with why in msg (never longer than n - 1 bytes). */
int query__search_check(const char *term, char *msg, size_t n);

/* Writes the search of term (query__search_check's) over m as JSON:
 *   {"unit":"nanoseconds","type":T,"total":ALL,"samples":N,"off_cpu":O,
 *    "profiles":P,"matched":M,"paths":K,"kept":J,"capped":B,
 *    "names":["all","other",...],"files":["","",...],
 *    "nodes":[name,total,self,children, ...]}
 * the tree format of query__write_flamegraph (root first, depth first,
 * children widest first, the part of a frame not shown in an "other"
 * child), holding the path from the root down to each stack's first
 * (shallowest) matching frame: K distinct paths of which the J largest
 * are kept (at most max_paths, 0 for QUERY_SEARCH_MAX_PATHS), B true when
 * any was left out. Every node's total and self are the full tree's
 * (m's, of m->value); M is the time of the stacks with a matching frame,
 * each counted once. names and files hold only the functions the tree
 * uses. Returns 0, -EINVAL for a term query__search_check refuses,
 * -ENOMEM, or -E2BIG past out's cap. */
int query__write_search(const struct store_merged *m, const char *term, size_t max_paths,
                        struct buf *out);

#endif
