/* Queries: time ranges as users write them, and a merged result written out
 * as pprof, folded stacks, or the compact flame-graph tree the UI draws. */
#ifndef CODEXRAY_SERVER_QUERY_H
#define CODEXRAY_SERVER_QUERY_H

#include <stdint.h>

#include "../common/buf.h"
#include "store.h"

/* Parses Unix seconds ("1764763200", "1764763200.5"), "now", or "now-15m"
 * (s, m, h, d, w). Returns 0 or -1 (also for NaN and infinities, which
 * strtod would take). */
int query__parse_time(const char *s, int64_t now_ns, int64_t *out_ns);

/* Parses a duration: "60", "60s", "15m", "1h", "7d". Returns 0 or -1
 * (negative, not finite, or past int64 nanoseconds). */
int query__parse_duration(const char *s, int64_t *out_ns);

/* Folds the interpreters' frames without a name (common/interp_frames.h:
 * those whose file is marked) into the frames that run them: each is taken
 * out of its stack, so its time counts in its caller's (a Python
 * function's) self time. Every stack keeps its samples and CPU, so every
 * total is unchanged; stacks left alike are not merged (the writers sum
 * them). In place; m's strings and arrays are untouched but for the
 * frames. Returns how many frames were taken out, or -ENOMEM. */
long query__hide_interp(struct store_merged *m);

/* What type= names: "cpu", "off_cpu" or "wall" into *v (CPU when s is
 * NULL). Returns 0, or -1 for another text. */
int query__parse_value(const char *s, enum store_value *v);
/* v's name as type= takes it. */
const char *query__value_name(enum store_value v);

/* Gzipped pprof: sample types samples/count and cpu/nanoseconds, then
 * off_cpu/nanoseconds when m's merge measured off-CPU or wall time or has
 * any, and wall/nanoseconds (their sum) for wall; the default sample type
 * the merge's (m->value); one location per function. */
int query__write_pprof(const struct store_merged *m, int64_t from_ns, int64_t to_ns,
                       struct buf *out);

/* "root;child;leaf COUNT" lines, root first; COUNT in samples for a CPU
 * merge, in nanoseconds of m->value for off-CPU and wall. */
int query__write_collapsed(const struct store_merged *m, struct buf *out);

/* The flame-graph tree of m->value (CPU, off-CPU or wall time) as JSON:
 *   {"unit":"nanoseconds","type":"cpu|off_cpu|wall","total":T,"samples":N,"off_cpu":O,
 *    "profiles":P,
 *    "names":["all","other",...],"files":["","",...],
 *    "nodes":[name,total,self,children, ...]}
 * nodes is flat, four integers a node in depth-first order (a node's
 * children follow it, widest first), the first node the root "all"; name
 * indexes names and files (function i is name i + 2); O the off-CPU time
 * of the stacks drawn (all of it for off_cpu and wall, 0 when none). With max_nodes > 0,
 * the smallest nodes are folded into an "other" child of their parent until
 * at most max_nodes remain. Sums saturate at INT64_MAX. O(n log n) in the
 * tree's nodes whatever its shape (wide or deep). */
int query__write_flamegraph(const struct store_merged *m, size_t max_nodes, struct buf *out);

/* The same tree's nodes as query__write_flamegraph's "nodes", each four
 * int64_t in out (name, total, self, children; name 0 the root, 1
 * "other", i + 2 function i), in the same order. Returns 0 or -errno
 * (-E2BIG past out's cap). */
int query__flamegraph_nodes(const struct store_merged *m, size_t max_nodes, struct buf *out);

#endif
