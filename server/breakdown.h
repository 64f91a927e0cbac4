/* The CPU of an application broken down by one label (host, pid, an
 * identity key or another label of the profiles): per value a timeline, the values with the most
 * CPU first, the rest summed as "other". Composed from the store's own reads (store__values,
 * store__timeline), so every store has it. */
#ifndef CODEXRAY_SERVER_BREAKDOWN_H
#define CODEXRAY_SERVER_BREAKDOWN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

#define BREAKDOWN_MAX_TOP 50

struct breakdown_group {
    char *value;     /* NULL: "other", every CPU not in a group before it */
    int64_t *cpu_ns; /* nsteps values */
    int64_t total_ns;
};

struct breakdown {
    int64_t *cpu_ns; /* the whole, nsteps values */
    int64_t total_ns;
    size_t nsteps;
    struct breakdown_group *groups; /* the top values, most CPU first, then other (if any CPU) */
    size_t ngroups;
    size_t nvalues; /* distinct values the store saw */
    bool capped;    /* the store listed STORE_MAX_VALUES values: there may be more */
};

/* The index of label in store__values' lists (0 host, 1 pid, then the
 * identity keys), BREAKDOWN_OTHER for another label of the profiles
 * (store.h's key rules, not a reserved key), or -1 for none of them. */
#define BREAKDOWN_OTHER (STORE_N_IDENTITY + 2)
int breakdown__label_index(const char *label);

/* The timeline of q (step_ns a step) broken down by the label of index
 * label_idx (breakdown__label_index; label its name): the top values by CPU over the range
 * (at most top, 1..BREAKDOWN_MAX_TOP), each with its timeline, and
 * "other": the whole's CPU less the top values' (other values, and
 * profiles without the label). One store read per value (at most
 * STORE_MAX_VALUES) and one for the whole. Returns 0 or -errno (-EINVAL
 * for a bad label or top); *out owned by the caller, breakdown__free. */
int breakdown__timeline(struct store *st, const struct store_query *q, int64_t step_ns,
                        int label_idx, const char *label, size_t top, struct breakdown **out);

/* Frees b; NULL is fine. */
void breakdown__free(struct breakdown *b);

#endif
