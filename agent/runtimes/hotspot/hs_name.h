/* Java frames' names, read from a JVM's metadata in its memory: a Method
 * gives its class (through its constant pool's holder), its name and its
 * source file; a stub's CodeBlob its name. Every read is bounded and may
 * fail (the JVM keeps running and may free what was sampled).
 */
#ifndef CODEXRAY_AGENT_RUNTIMES_HOTSPOT_HS_NAME_H
#define CODEXRAY_AGENT_RUNTIMES_HOTSPOT_HS_NAME_H

#include "../runtime.h"
#include "hs_vm.h"

/* Longest class, method or file name read; longer ones are refused. */
#define HS_NAME_MAX_SYMBOL 1024

struct hs_name {
    struct rt_obj obj;    /* first: an hs_name is an rt_obj */
    const char *function; /* "java.util.HashMap.get", "[stub] StubRoutines (1)" */
    const char *file;     /* "HashMap.java", or "" */
    size_t bytes;
    char data[];
};

/* The name of the Java frame of type `type` (enum cx_hs_frame_type) at
 * addr (a Method*, or a CodeBlob for a stub), read through m with vm's
 * offsets. A new reference, or NULL when it cannot be read (*why: a short
 * reason) or memory ran out (*why NULL). */
struct hs_name *hs_name__read(const struct hs_mem *m, const struct hs_vm *vm, unsigned type,
                              uint64_t addr, const char **why);

#endif
