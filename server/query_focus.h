/* A merged result narrowed to the stacks under one frame of the flame
 * graph: what the web UI fetches when it zooms into a part of the tree
 * the server folded into "other" (max_nodes), so no frame is out of
 * reach. */
#ifndef CODEXRAY_SERVER_QUERY_FOCUS_H
#define CODEXRAY_SERVER_QUERY_FOCUS_H

#include "store.h"

/* The most frames a focus path may name (deeper stacks are cut there by
 * the agent anyway). */
#define QUERY_FOCUS_MAX_DEPTH 1024
#define QUERY_FOCUS_MAX_DEPTH_S "1024"
/* The longest focus= the HTTP API takes, in bytes. */
#define QUERY_FOCUS_MAX_BYTES (256 * 1024)
#define QUERY_FOCUS_MAX_BYTES_S "262144"

/* Keeps in m only the stacks whose frames, from the root, begin with the
 * functions named by path: names joined by ';' as the UI's zoom= holds
 * them ("main;serve;parse"), a frame matching when its function's name is
 * the path's (any file). The stacks kept are untouched, so the tree
 * written from m is the full tree's chain down to that frame with the
 * frame's whole subtree, every total exact. In place (m's stacks array is
 * compacted; nothing is freed). Returns how many stacks were kept, or -1
 * (with m untouched) for an empty path, an empty name or more than
 * QUERY_FOCUS_MAX_DEPTH names. */
long query__focus(struct store_merged *m, const char *path);

#endif
