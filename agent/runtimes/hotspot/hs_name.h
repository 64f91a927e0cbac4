/* Java frames' names, read from a JVM's metadata in its memory: a Method
 * gives its class (through its constant pool's holder), its name, its
 * source file and, from a bytecode index, the line (its compressed line
 * number table); a compiled frame's pc gives, through its nmethod's PcDesc
 * and scope descriptors, the methods inlined there; a stub's CodeBlob its
 * name. Every read is bounded and may fail (the JVM keeps running and may
 * free what was sampled).
 */
#ifndef CODEXRAY_AGENT_RUNTIMES_HOTSPOT_HS_NAME_H
#define CODEXRAY_AGENT_RUNTIMES_HOTSPOT_HS_NAME_H

#include "../runtime.h"
#include "hs_vm.h"

/* Longest class, method or file name read; longer ones are refused. */
#define HS_NAME_MAX_SYMBOL 1024
/* Methods inlined at one pc shown at most (innermost first). */
#define HS_NAME_MAX_DEPTH 32

struct hs_name_line {
    const char *function; /* "java.util.HashMap.get", "[stub] StubRoutines (1)" */
    const char *file;     /* "HashMap.java", or "" */
    int64_t line;         /* 0: not known */
};

/* What one Java frame shows: the method, and for a compiled frame the
 * methods inlined into it at the pc, innermost first. */
struct hs_name {
    struct rt_obj obj; /* first: an hs_name is an rt_obj */
    unsigned n;
    size_t bytes;               /* memory it holds */
    struct hs_name_line *lines; /* n of them, in data */
    char data[];
};

/* One process's methods as read (class, name, file, line number table),
 * by Method*, checked at each use against the Method's ConstMethod: a
 * compiled method's frame at another pc, or an interpreted one at another
 * bytecode, reads one word of the process's memory per method instead of
 * ~10 and the line table. Bounded (HS_CACHE_MAX methods, tables of at
 * most 2 KiB kept). */
struct hs_name_cache;

/* A new empty cache, or NULL when out of memory. */
struct hs_name_cache *hs_name_cache__new(void);

/* Frees c and what it holds; NULL is fine. */
void hs_name_cache__free(struct hs_name_cache *c);

/* The bytes c holds (its entries). */
size_t hs_name_cache__bytes(const struct hs_name_cache *c);

/* The name of the Java frame f's addr, aux and tag (CX_FRAME_JAVA,
 * hotspot.h), read through m with vm's offsets, its methods through c
 * (NULL: none kept). A new reference, or NULL when it cannot be read (*why:
 * a short reason) or memory ran out (*why NULL). */
struct hs_name *hs_name__read(const struct hs_mem *m, const struct hs_vm *vm,
                              struct hs_name_cache *c, uint64_t addr, uint32_t aux, uint16_t tag,
                              const char **why);

#endif
