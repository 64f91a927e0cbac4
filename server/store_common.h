/* What every store shares, included by the stores' files alone (their face
 * is store.h): the rollup bucket rules, the label texts, the building of a
 * merged result and of label value lists, the sorting of applications. A
 * store keeps only its own database's work in its files.
 */
#ifndef CODEXRAY_SERVER_STORE_COMMON_H
#define CODEXRAY_SERVER_STORE_COMMON_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/buf.h"
#include "../common/hmap.h"
#include "store.h"

/* --- rollup buckets: an application's profiles summed per 10 minutes
 * (level 0) and per 3 hours (level 1); a bucket starts at a multiple of
 * its length --- */
#define N_LEVELS 2
static const int64_t level_ns[N_LEVELS] = {600ll * 1000000000, 10800ll * 1000000000};

/* The start of t's bucket of length len (t may be negative). */
static inline int64_t bucket_of(int64_t t, int64_t len)
{
    int64_t b = t / len * len;
    return b > t ? b - len : b;
}

/* --- the stack key bases: drawn once per store (stack_hasher__new_bases),
 * kept in it under these names with the key version, read at open --- */
#define STACK_KEY_VERSION 2 /* keys as stack_key.h makes them now */
extern const char *const store_key_base_names[STACK_HASHER_BASES];

/* --- label texts, as stores keep them --- */

/* A label set as "k=v\x1fk=v", keys sorted (the first 64 labels), into b
 * (reset first). Returns 0 or -E2BIG when b's cap is reached. */
int store_labelset__text(struct buf *b, const struct store_labelset *ls);

/* A profile's identity labels as "\x1fk=v\x1fk=v\x1f" in store_identity_keys'
 * order, "" when none, into b (reset first). Returns 0 or -E2BIG. */
int store_identity__text(struct buf *b, const char *const identity[STORE_N_IDENTITY]);

/* The needle that finds identity label k = value in such a text
 * ("\x1fk=value\x1f"), into b (reset first). Returns 0 or -E2BIG. */
int store_identity__needle(struct buf *b, int k, const char *value);

/* Whether key is the name of an identity label, host, pid or
 * service_name: never one of a profile's other labels. */
bool store_label__reserved(const char *key);

/* The labels text of p: its identity labels (store_identity__text), then
 * its other labels, keys sorted, empty values left out, as
 * "\x1fk=v\x1fk=v\x1f", into b (reset first). Returns 0, or -E2BIG for
 * other labels against store.h's rules (too many, a key repeated, a
 * reserved or malformed key, a long value or one with a control
 * character) or past b's cap. */
int store_profile__labels_text(struct buf *b, const struct store_profile *p);

/* The needle that finds m's label in a labels text: "\x1fk=v\x1f", or
 * "\x1fk=" when m->value is NULL. Into b (reset first); 0 or -E2BIG. */
int store_match__needle(struct buf *b, const struct store_label_match *m);

/* n matches as one text, for a store that tests them in its database
 * (SQLite's cx_labels): "+needle" or "-needle" each, split by \x1e (no
 * label holds a control character). Into b (reset first, NUL-ended, not
 * counted in len); 0 or -E2BIG (past STORE_MAX_MATCHES or b's cap). */
int store_match__spec(struct buf *b, const struct store_label_match *m, size_t n);

/* Whether the labels text (len bytes) passes every match of spec. */
bool store_match__test(const char *labels, size_t len, const char *spec, size_t speclen);

/* --- label values --- */

/* Adds value (len bytes) to list k of v once (seen remembers), up to
 * STORE_MAX_VALUES; empty values are skipped. Returns 0 or -ENOMEM. */
int store_values__add(struct store_values *v, struct hmap *seen, int k, const char *val,
                      size_t len);
/* Adds the labels of a labels text (store_profile__labels_text): the
 * identity labels to their lists, the others to v->labels as "k=v";
 * sets v->matched: a store calls it for every profile (row) it lists. */
int store_values__add_identity(struct store_values *v, struct hmap *seen, const char *text);

/* --- applications --- */

/* Sorts apps by CPU, most first, then by name. */
void store_apps__sort(struct store_app *apps, size_t n);

/* --- merged results: a store adds each distinct stack with its frames,
 * functions named by the store's own key bytes (an id, a key); the builder
 * numbers functions as they first appear, then the store names them --- */
struct merged_builder {
    struct store_merged *m;
    size_t cap;        /* of m->stacks */
    struct hmap *fn;   /* function key bytes -> nothing; index = local index */
    size_t *name_off;  /* local index -> (name, file) offsets in names */
    struct buf *names; /* the strings, owned by m (its mem) */
    enum store_value value;
    bool skip; /* the last stack offered was left out: its frames too */
    /* Every kept stack's frames, one after another (a stack's frames
     * pointer holds its offset until finish): one allocation instead of
     * two or three a stack. */
    uint32_t *frames;
    size_t nframes, frames_cap;
};

/* A builder of a merge measuring value (the query's): it keeps the stacks
 * with some of it. Returns 0 or -ENOMEM (b is then safe to pass to
 * merged_builder__free). */
int merged_builder__init(struct merged_builder *b, enum store_value value);
/* Offers a stack with its counts; its frames follow. A stack without any
 * of the builder's value (CPU: neither samples nor CPU time) is left out,
 * and so are the frames that follow it: an off-CPU stack is no node of a
 * CPU flame graph. Returns 0 or -ENOMEM. */
int merged_builder__stack(struct merged_builder *b, int64_t samples, int64_t cpu_ns,
                          int64_t off_cpu_ns);
/* Appends a frame, the function of key (len bytes, at most 64), to the
 * last stack added (nothing when it was left out). Returns 0 or -ENOMEM. */
int merged_builder__frame(struct merged_builder *b, const void *key, size_t len);
/* The same in two halves, for a store that caches a function's index by
 * its own id (merged_builder__frame hashes the key at every frame): the
 * index of the function of key (numbered on first sight), or -ENOMEM;
 * then a frame of the function of that index. */
long merged_builder__function(struct merged_builder *b, const void *key, size_t len);
/* Doubles the room for b's frames (merged_builder__frame_of's slow path).
 * Returns 0 or -ENOMEM. */
int merged_builder__grow_frames(struct merged_builder *b);
/* Inline: a merge appends a frame per stored frame (2 million on the
 * server bench's hour), a call each was 4 % of the query. */
static inline int merged_builder__frame_of(struct merged_builder *b, uint32_t index)
{
    if (b->skip)
        return 0;
    struct store_merged_stack *ms = &b->m->stacks[b->m->nstacks - 1];
    int err;

    if (ms->nframes == UINT32_MAX)
        return -E2BIG;
    if (b->nframes == b->frames_cap && (err = merged_builder__grow_frames(b)))
        return err;
    b->frames[b->nframes++] = index;
    ms->nframes++;
    return 0;
}
/* The functions met so far, and the key of function i. */
size_t merged_builder__nfunctions(const struct merged_builder *b);
const void *merged_builder__key(const struct merged_builder *b, size_t i, size_t *len);
/* Names every function through name_of, which fills name and file (each
 * NUL-ended, kept until the next call) or leaves them: "?" and "" then.
 * Hands the result to *out. Returns 0 or -errno (b is freed either way). */
int merged_builder__finish(struct merged_builder *b, int64_t profiles,
                           void (*name_of)(void *ctx, size_t i, const void *key, size_t len,
                                           const char **name, const char **file),
                           void *ctx, struct store_merged **out);
/* Frees what b holds (after a failure; finish frees it itself). */
void merged_builder__free(struct merged_builder *b);

#endif
