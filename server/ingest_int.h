/* ingest's private header: the work of one request (ingest.c's phases)
 * and the tables it grows (ingest_work.c). Only ingest*.c include it. */
#ifndef CODEXRAY_SERVER_INGEST_INT_H
#define CODEXRAY_SERVER_INGEST_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/buf.h"
#include "../common/hmap.h"
#include "../common/pprof/pprof_reader.h"
#include "budget.h"
#include "ingest.h"
#include "pprof_ids.h"
#include "stack_key.h"
#include "store.h"

/* Labels kept per sample (the rest are ignored) and values read per sample. */
#define MAX_LABELS 64
#define MAX_VALUES 64

/* An upper bound of what the label set index (a hmap) takes a set, beyond
 * its key: its entry (32 bytes, up to twice over as the array doubles), its
 * slots (up to 4 a set, 4 bytes each) and the key's rounding. */
#define LS_INDEX_BYTES 96

/* Everything ingest allocates for one request, freed in one place, and
 * counted against one budget (mem). */
struct ingest_work {
    /* the request */
    const struct ingest_limits *lim;
    const struct stack_hasher *h;
    size_t max_depth; /* lim's, and at most what the key tables allow */
    char *msg;        /* why it failed */
    size_t msglen;
    /* what validate finds */
    int samples_idx, cpu_idx, off_idx; /* the value counting samples, CPU, off-CPU (or -1) */
    int64_t period_ns;                 /* 0 when the period is not in nanoseconds */
    bool cpu_only;                     /* ingest_identity's */
    /* what key makes */
    size_t extra_fns;                            /* functions made up for locations without lines */
    int64_t total_samples, total_cpu, total_off; /* the profile's totals */
    struct budget mem;
    struct pprof_reader r;
    struct buf raw;
    struct id_index fns, locs, maps; /* pprof ids -> array indices */
    uint32_t *loc_off, *loc_frames;  /* location i's function indices */
    struct store_location *locations;
    struct loc_part *parts;     /* [i + 1]: location i's part of its stacks' keys */
    struct stack_strkey *skeys; /* string i's share of function keys; pc 0 until made */
    struct hmap *ls_index;      /* a sample's (key, str) pairs -> label set */
    uint64_t *sample_locs;      /* one sample's location ids */
    struct store_put_function *functions;
    uint32_t *frames; /* the samples' location indices, one after another */
    size_t nframes, cap_frames, total_depth;
    struct store_stack *stacks; /* one per distinct (stack, label set): samples merged */
    size_t nstacks, cap_stacks;
    uint32_t *merge; /* (stack key, label set) -> index into stacks + 1; 0 empty */
    size_t nmerge;   /* slots: a power of two, at least twice nstacks */
    struct store_labelset *labelsets;
    uint32_t *ls_pid; /* each label set's pid label (a string index), or UINT32_MAX */
    size_t cap_sets, cap_pids;
    struct store_label *labels;
    size_t nsets, nlabels, cap_labels;
    char *names; /* names made up for locations without lines */
    size_t names_len, names_cap, names_max;
};

/* Frees what w holds (not w); w may be zeroed. */
void ingest_work__free(struct ingest_work *w);

/* Room for n more location indices in w->frames. Returns 0, -E2BIG or
 * -ENOMEM. Always room for one more: frames is never NULL once a sample is
 * read (samples without locations index it too, and NULL + 0 is
 * undefined). */
int ingest_work__reserve_frames(struct ingest_work *w, size_t n);

/* The stack of (key, set) so far, else a new one (*fresh set), its counts
 * 0 and its frames at `start` (an offset until the frames are final):
 * identical samples become one stack as they are read, so a body of
 * millions of samples of a few stacks takes memory for a few. Returns its
 * index, or -E2BIG / -ENOMEM. */
long ingest_work__merge_stack(struct ingest_work *w, struct stack_key key, uint32_t set,
                              size_t start, bool *fresh);

/* A name for a location pprof gives no line for: never a bare address.
 * Returns its function index (functions[nfunctions + (*extra_fns)++]), its
 * name an offset into w->names until they are final; -EOVERFLOW past
 * names_max, -E2BIG past the budget, -ENOMEM. */
long ingest_work__synth_function(struct ingest_work *w, const struct stack_hasher *h,
                                 const struct pprof_rlocation *loc, size_t *extra_fns);

/* The label set of a sample's (key, str) string index pairs lkey[0..nk),
 * made when it is new: label sets repeat across samples, each is kept
 * once. Returns its index; -EBADMSG for a label past max_bytes (*bad: its
 * key's string index), -E2BIG past the budget, -ENOMEM. */
long ingest_work__label_set(struct ingest_work *w, const uint32_t *lkey, size_t nk,
                            size_t max_bytes, uint32_t *bad);

#endif
