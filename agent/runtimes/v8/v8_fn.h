/* A V8 function as the agent names frames with it: its name, its script's
 * name and the line it starts at, read out of the process that runs it
 * from its SharedFunctionInfo (v8.h), while it runs.
 *
 * Everything comes from another process's memory, which may be garbage (an
 * object the garbage collector moved since the sample) or hostile: each
 * object's type is checked through its map, the SharedFunctionInfo's
 * fingerprint must be the one the BPF side took, strings are read up to
 * V8_FN_MAX_NAME bytes (longer ones cut, marked "..."), through at most 8
 * levels of cons, thin and sliced strings; external strings (node's own
 * modules' sources) are not read. The function's name comes from the
 * SharedFunctionInfo (a string) or its ScopeInfo, where V8 11 keeps it
 * after the context locals' names and infos, followed by the function's
 * start and end positions; the line is found from the script's line ends
 * when V8 computed them, else by counting the newlines of its source before
 * the start (at most V8_FN_MAX_SCAN bytes; past it the line is 0: unknown).
 */
#ifndef CODEXRAY_AGENT_RUNTIMES_V8_V8_FN_H
#define CODEXRAY_AGENT_RUNTIMES_V8_V8_FN_H

#include <stdint.h>

#include "../python/py_code.h" /* struct py_reader: how process memory is read */
#include "../runtime.h"
#include "v8_detect.h"

#define V8_FN_MAX_NAME 1024
#define V8_FN_MAX_FILE 4096
#define V8_FN_MAX_SCAN (256u << 10)

struct v8_fn {
    struct rt_obj obj; /* first: a v8_fn is an rt_obj */
    uint16_t tag;      /* the fingerprint of the object it was read from */
    int64_t line;      /* the function's first line, 1-based; 0 when not known */
    const char *name;  /* "" for an anonymous function (a script's top level) */
    const char *file;  /* the script's name; "" when it has none */
    size_t bytes;      /* memory it holds, for the caches' bounds */
    char data[];
};

/* Reads the function whose SharedFunctionInfo is at tagged address sfi
 * through r. tag: the fingerprint the sample carried (0: not checked).
 * Returns a new v8_fn (one reference), or NULL with a static reason in
 * *why: unreadable, not a SharedFunctionInfo (moved or freed), another one
 * than sampled (changed), out of memory. */
struct v8_fn *v8_fn__read(const struct py_reader *r, const struct v8_layout *l, uint64_t sfi,
                          uint16_t tag, const char **why);

/* Reads the V8 string at tagged address p as UTF-8 into out (size outlen >
 * 4), cut at outlen - 4 bytes with "..." added. Returns the length, or a
 * negative errno (-EINVAL: not a string, -ENOTSUP: a kind not read). */
int v8_fn__read_str(const struct py_reader *r, const struct v8_layout *l, uint64_t p, char *out,
                    size_t outlen);

#endif
