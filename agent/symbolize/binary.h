/* A binary (executable or shared library) that some process maps, opened
 * once and shared by every process that maps it.
 *
 * Identity is the GNU build id when the file has one, else device, inode,
 * size and mtime: the same libc in two containers is one binary. The file is
 * held open, so frames can still be named after every process that mapped it
 * has exited.
 *
 * Reference counted: binary__get() takes a reference, binary__put() drops
 * one; the last put frees it. Counts are atomic, so a window handed to the
 * worker thread may drop its references there. Everything but the `syms`
 * slot is immutable after creation; `syms` belongs to the symbolizer (one
 * thread), which frees it through syms_free.
 */
#ifndef CODEXRAY_AGENT_SYMBOLIZE_BINARY_H
#define CODEXRAY_AGENT_SYMBOLIZE_BINARY_H

#include <stdbool.h>
#include <stdint.h>
#include <libelf.h>
#include <sys/types.h>

/* A mapping as procs/maps.h reads it: only pointed to here, so this header
 * does not include procs/ (which includes this one). */
struct maps_entry;

#define BINARY_BUILD_ID_MAX 64 /* bytes; hex is twice that */

struct binary {
    int refs;
    char *path;       /* as the process sees it, e.g. /usr/lib/x86_64-linux-gnu/libc.so.6 */
    const char *name; /* its base name, within path */
    char build_id[BINARY_BUILD_ID_MAX * 2 + 1]; /* hex; "" when none */
    int fd;                                     /* -1 when it could not be opened */
    int open_err;                               /* errno of the failed open */
    uint64_t size;
    uint64_t last_used_ns; /* the cache's bookkeeping, main thread only */
    unsigned cache_keys;   /* the cache's bookkeeping: references it holds */

    void *syms; /* the symbolizer's, see above */
    void (*syms_free)(void *syms);
};

struct binary *binary__get(struct binary *b);
/* b may be NULL. */
void binary__put(struct binary *b);

struct binary_cache;

/* proc_root is where /proc is ("/proc", or a test's copy). NULL when out of
 * memory. */
struct binary_cache *binary_cache__new(const char *proc_root);
/* Drops the cache's references; binaries still referenced elsewhere live on.
 * bc may be NULL. */
void binary_cache__free(struct binary_cache *bc);

/* The binary behind mapping m of process pid, opened on first sight through
 * /proc/PID/map_files (the exact file mapped) or else the path inside
 * /proc/PID/root (never outside it). Returns a new reference, which the
 * caller puts, or NULL when out of memory. A binary that cannot be opened is
 * still returned, with fd -1 and open_err set, so its frames can say why. */
struct binary *binary_cache__get(struct binary_cache *bc, pid_t pid, const struct maps_entry *m,
                                 uint64_t now_ns);

/* Forgets binaries that no one else references and that were last used
 * before `older_than_ns`. */
void binary_cache__sweep(struct binary_cache *bc, uint64_t older_than_ns);

/* How many binaries the cache holds. */
unsigned binary_cache__count(const struct binary_cache *bc);

/* A binary opened straight from a path, outside any cache (tests, tools).
 * Returns a reference, or NULL when out of memory; a file that cannot be
 * opened still gives a binary with fd -1 and open_err set. */
struct binary *binary__open(const char *path);

/* The vDSO (clock_gettime, gettimeofday, time: hot in many services) has
 * symbols and CFI but no file behind its mapping. Every process on this
 * kernel maps the same image, so the agent's own, copied into a memfd,
 * stands for all; its path is "[vdso]". Returns a reference, or NULL when
 * there is no vDSO (or it does not look like one). */
struct binary *binary__open_vdso(void);

/* Reads the GNU build id of an open ELF file into hex (2*BINARY_BUILD_ID_MAX+1
 * bytes). Returns 0, or -1 when the file has none or is not ELF. */
int binary__read_build_id(int fd, char *hex);

/* An executable PT_LOAD segment: where its code is in the file, and at
 * which address the ELF file puts it. */
struct binary_seg {
    uint64_t offset, filesz, vaddr;
};

/* The executable PT_LOAD segments of the ELF file open at fd, at most max.
 * Returns how many, 0 when it has none or is not ELF. */
unsigned binary__exec_segments(int fd, struct binary_seg *out, unsigned max);

/* The load bias of a mapping starting at `start`, of file offset `offset`,
 * of a binary with segments segs: an address in the process is the ELF
 * address plus *bias. False when the mapping holds none of the segments.
 * The kernel maps whole pages: a mapping's offset is its segment's rounded
 * down. */
bool binary__map_bias(const struct binary_seg *segs, unsigned n, uint64_t start, uint64_t offset,
                      uint64_t *bias);

/* Hands back the pages of [p, p + n) that e's mapped file image holds
 * from the file: whole pages inside the range only, so a neighbour's bytes
 * stay, and only those pagemap shows as file pages (not one written to
 * since, copy on write, nor a file libelf read into the heap). They come
 * back from the page cache if touched again; left mapped, each one counts
 * in the agent's RSS and its cgroup's memory for as long as the Elf is open
 * (chromium's .rela.dyn is 25 MiB; a C++ library's .dynstr, its DWARF).
 * Nothing when p is outside e's image or the range is under 256 KiB. */
void binary__drop_pages(Elf *e, const void *p, size_t n);

/* binary__drop_pages over e's whole file image. */
void binary__drop_image(Elf *e);

#endif
