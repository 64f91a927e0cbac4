/* Reading a process's memory for the runtimes' namers (CPython, V8,
 * HotSpot): one reader, its signature that of their reader callbacks
 * (struct py_reader, struct hs_mem), so tests can hand them fake memory. */
#ifndef CODEXRAY_AGENT_RUNTIMES_PROC_MEM_H
#define CODEXRAY_AGENT_RUNTIMES_PROC_MEM_H

#include <stddef.h>
#include <stdint.h>

/* Reads len bytes at addr of the process whose pid is ctx (cast from an
 * intptr_t) with process_vm_readv. Returns 0 when all of them were read,
 * -EFAULT for a short read, or -errno. */
int proc_mem__read(void *ctx, uint64_t addr, void *buf, size_t len);

#endif
