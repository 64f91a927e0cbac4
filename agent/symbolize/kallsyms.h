/* Kernel function names from /proc/kallsyms. */
#ifndef CODEXRAY_AGENT_SYMBOLIZE_KALLSYMS_H
#define CODEXRAY_AGENT_SYMBOLIZE_KALLSYMS_H

#include <stddef.h>
#include <stdint.h>

struct kallsyms;

/* Parses kallsyms text (text[len] need not be NUL): text symbols only,
 * sorted. Returns NULL when out of memory or when every address is zero
 * (kptr_restrict hid them); *why then says which. */
struct kallsyms *kallsyms__parse(const char *text, size_t len, const char **why);

/* Reads and parses /proc/kallsyms (capped at 64 MiB). */
struct kallsyms *kallsyms__load(const char **why);

/* ks may be NULL. */
void kallsyms__free(struct kallsyms *ks);

/* The function holding addr, and its module ("" for the kernel image), or
 * NULL when addr is below every symbol. Pointers live as long as ks. */
const char *kallsyms__lookup(const struct kallsyms *ks, uint64_t addr, const char **module);

size_t kallsyms__count(const struct kallsyms *ks);

#endif
