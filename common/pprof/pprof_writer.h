/* Builds one pprof Profile (profile.proto) and encodes it, gzipped.
 *
 * Strings, functions, mappings and locations are interned: adding the same
 * one twice returns the same id. Samples are appended as given; callers that
 * want one sample per distinct stack aggregate first.
 *
 * Every id is > 0 on success and 0 on failure (out of memory); a failed call
 * leaves the writer as it was, and pprof_writer__encode() fails if any call
 * before it did, so callers may check once at the end.
 */
#ifndef CODEXRAY_COMMON_PPROF_WRITER_H
#define CODEXRAY_COMMON_PPROF_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../buf.h"

struct pprof_writer;

/* One line of a location: a function and where in it. A location carries one
 * per inlined frame, the innermost first. */
struct pprof_line {
    const char *function;    /* the name shown; NULL = "" */
    const char *system_name; /* the mangled name; NULL = same as function */
    const char *file;        /* NULL = "" */
    int64_t line;            /* 0 = unknown */
    int64_t start_line;      /* the function's first line; 0 = unknown */
};

struct pprof_label {
    const char *key;
    const char *str; /* NULL for a numeric label */
    int64_t num;
    const char *num_unit; /* NULL = none */
};

struct pprof_mapping_info {
    uint64_t start, limit, offset;
    const char *file;
    const char *build_id; /* hex; NULL = none */
    bool has_functions, has_filenames, has_line_numbers, has_inline_frames;
};

/* Returns NULL when out of memory. */
struct pprof_writer *pprof_writer__new(void);
/* w may be NULL. */
void pprof_writer__free(struct pprof_writer *w);

/* Empties w for the next profile, as pprof_writer__new would give it, but
 * keeping its memory (up to a bound; see hmap__clear), the encoder's arrays
 * included: a writer reused for hundreds of small profiles allocates
 * nothing after the first and touches the same pages each time. */
void pprof_writer__reset(struct pprof_writer *w);

/* Adds a sample type, e.g. ("samples", "count"), ("cpu", "nanoseconds").
 * Each sample carries one value per type, in this order. */
int pprof_writer__add_sample_type(struct pprof_writer *w, const char *type, const char *unit);
void pprof_writer__set_period(struct pprof_writer *w, const char *type, const char *unit,
                              int64_t period);
void pprof_writer__set_time(struct pprof_writer *w, int64_t time_nanos, int64_t duration_nanos);
int pprof_writer__add_comment(struct pprof_writer *w, const char *comment);
/* The sample type a reader shows unless told (pprof's default_sample_type,
 * e.g. "off_cpu"); unset, readers take the last type. */
void pprof_writer__set_default_type(struct pprof_writer *w, const char *type);

uint64_t pprof_writer__mapping(struct pprof_writer *w, const struct pprof_mapping_info *m);

/* mapping_id 0 = none. lines may be empty (n 0) for an unnamed address. */
uint64_t pprof_writer__location(struct pprof_writer *w, uint64_t mapping_id, uint64_t address,
                                const struct pprof_line *lines, size_t n);

/* locations: leaf first. values: one per sample type. */
int pprof_writer__add_sample(struct pprof_writer *w, const uint64_t *locations, size_t nloc,
                             const int64_t *values, const struct pprof_label *labels,
                             size_t nlabels);

size_t pprof_writer__sample_count(const struct pprof_writer *w);

struct gz_deflater;

/* Appends the encoded profile to out, gzipped when `gzip`. Returns 0,
 * -ENOMEM (also when an earlier call failed), or out's cap error. The writer
 * may still be used afterwards. */
int pprof_writer__encode(struct pprof_writer *w, struct buf *out, bool gzip)
    __attribute__((warn_unused_result));

/* Same, gzipped through a compressor the caller keeps (see gz.h). */
int pprof_writer__encode_with(struct pprof_writer *w, struct buf *out, struct gz_deflater *gz)
    __attribute__((warn_unused_result));

#endif
