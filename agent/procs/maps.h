/* Parses /proc/PID/maps: which file (or special region) backs each range of
 * a process's address space. */
#ifndef CODEXRAY_AGENT_PROCS_MAPS_H
#define CODEXRAY_AGENT_PROCS_MAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct maps_entry {
    uint64_t start, end; /* [start, end) */
    uint64_t offset;     /* file offset of start */
    uint32_t dev_major, dev_minor;
    uint64_t inode;   /* 0 for anonymous and special regions */
    char perms[5];    /* "r-xp" */
    bool deleted;     /* the file was unlinked after it was mapped */
    const char *path; /* "" when anonymous; "[vdso]", "[stack]"...; points into maps.text */
};

struct maps {
    struct maps_entry *e; /* sorted by start, as the kernel writes them */
    size_t n;
    char *text; /* owns the strings the entries point at (their paths only) */
};

/* Parses the text of a maps file (text[len] need not be NUL). With
 * exec_only, keeps only executable ranges. Lines that do not parse are
 * skipped and counted in *bad (when not NULL). Returns 0 or -ENOMEM; on
 * failure *out is empty. */
int maps__parse(const char *text, size_t len, bool exec_only, struct maps *out, size_t *bad);

/* The same entries asked of the kernel one at a time (PROCMAP_QUERY, Linux
 * 6.11) on fd, an open /proc/PID/maps, instead of read as text: the kernel
 * formats no line, and only the mappings wanted are looked at. Entries and
 * paths are those maps__parse gives, but for the legacy [vsyscall] page (no
 * mapping of the process: never sampled) and a path with a newline (text
 * escapes it as \012). At most max_entries entries and max_bytes of paths.
 * Returns 0; -E2BIG past a cap (*out holds those before); -ENOTTY or
 * -EINVAL where the kernel lacks the call, -ENAMETOOLONG for a path longer
 * than PATH_MAX, another -errno (*out then empty). */
int maps__query(int fd, bool exec_only, size_t max_entries, size_t max_bytes, struct maps *out);

/* Frees what maps__parse or maps__query made; m may be NULL or empty. */
void maps__free(struct maps *m);

/* The entry holding addr, or NULL. */
const struct maps_entry *maps__find(const struct maps *m, uint64_t addr);

#endif
