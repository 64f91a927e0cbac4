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
    const char *path; /* "" when anonymous; "[vdso]", "[stack]"...; points into maps */
};

struct maps {
    struct maps_entry *e; /* sorted by start, as the kernel writes them */
    size_t n;
    char *text; /* owns the strings the entries point at */
};

/* Parses the text of a maps file (text[len] need not be NUL). With
 * exec_only, keeps only executable ranges. Lines that do not parse are
 * skipped and counted in *bad (when not NULL). Returns 0 or -ENOMEM; on
 * failure *out is empty. */
int maps__parse(const char *text, size_t len, bool exec_only, struct maps *out, size_t *bad);

/* Frees what maps__parse made; m may be NULL or empty. */
void maps__free(struct maps *m);

/* The entry holding addr, or NULL. */
const struct maps_entry *maps__find(const struct maps *m, uint64_t addr);

#endif
