/* Reads an encoded pprof Profile (profile.proto, not gzipped) in one pass,
 * without building a message per field: the tables come out as arrays of
 * plain structs, and samples stay in the input, found and decoded one at a
 * time into the caller's buffers by pprof_reader__sample (nothing is kept
 * per sample: millions of them take no memory beyond their bytes). The server's ingest reads
 * every profile through it; a profile of 5,000 stacks 24 frames deep costs a
 * few hundred microseconds where protobuf-c's unpack took milliseconds.
 *
 * What it checks: the wire format (every length inside its message, varints
 * at most 10 bytes, wire types that fit the field), every string index
 * against the string table (which must start with ""), and its memory
 * against the caller's cap. What it leaves to the caller: pprof's meaning
 * (ids unique and non-zero, location and function ids defined, values per
 * sample type), since the caller maps ids anyway.
 *
 * Protobuf's rules hold: fields in any order, repeated scalars packed or
 * not, unknown fields skipped, the last of a scalar field wins, a repeated
 * singular message (period_type) merges.
 */
#ifndef CODEXRAY_COMMON_PPROF_READER_H
#define CODEXRAY_COMMON_PPROF_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../varint.h"

/* String indices below are checked: each is < nstrings. */
struct pprof_rvaluetype {
    uint32_t type, unit;
};

struct pprof_rfunction {
    uint64_t id;
    uint32_t name, system_name, filename;
};

struct pprof_rmapping {
    uint64_t id, memory_start, memory_limit, file_offset;
    uint32_t filename, build_id;
};

struct pprof_rlocation {
    uint64_t id, mapping_id, address;
    uint32_t line_off, nlines; /* into pprof_reader.lines; innermost first, as pprof orders them */
};

struct pprof_rline {
    uint64_t function_id;
    int64_t line;
};

struct pprof_rlabel {
    uint32_t key, str; /* str 0 ("") for a numeric label */
    uint32_t num_unit;
    int64_t num;
};

struct pprof_reader {
    const char **strings; /* NUL-terminated copies (a string holding a NUL reads shorter) */
    uint32_t *string_len; /* strlen of each copy: up to such a NUL */
    size_t nstrings;
    struct pprof_rvaluetype *sample_types;
    size_t nsample_types;
    struct pprof_rfunction *functions;
    size_t nfunctions;
    struct pprof_rmapping *mappings;
    size_t nmappings;
    struct pprof_rlocation *locations;
    size_t nlocations;
    struct pprof_rline *lines;
    size_t nlines;
    size_t nsamples;
    int64_t time_nanos, duration_nanos, period, default_sample_type;
    struct pprof_rvaluetype period_type; /* {0, 0} when absent */
    int has_period_type;

    struct pprof_reader_mem *mem; /* private: the samples' bytes, the memory behind it all */
};

/* Reads data[0..len) into r. max_mem caps what the reader allocates (the
 * tables grow with the input: a body of empty messages would make them many
 * times its size). Returns 0; -EBADMSG when data is not a valid profile,
 * with err saying what is wrong; -E2BIG past max_mem; -ENOMEM. r owns its
 * memory (free with pprof_reader__free, also after a failure) and points
 * into data for the samples: data must outlive r. */
int pprof_reader__read(struct pprof_reader *r, const void *data, size_t len, size_t max_mem,
                       char *err, size_t errlen);

/* One decoded sample, in the caller's buffers: up to the given capacities
 * of location ids, values and labels. */
struct pprof_rsample {
    uint64_t *location_ids;
    size_t nlocation_ids, cap_location_ids;
    int64_t *values;
    size_t nvalues, cap_values;
    struct pprof_rlabel *labels;
    size_t nlabels, cap_labels;
};

/* The bytes r allocated, all counted against max_mem. */
size_t pprof_reader__mem_used(const struct pprof_reader *r);

/* Decodes sample i (< r->nsamples) into s, whose counts it sets. Samples
 * are found by a scan on from the last one asked for: in order (0, 1, 2...,
 * each once or twice) every byte is read once; going back starts the scan
 * at the first sample. The scan's place is kept in r: one thread at a time
 * per reader. Returns 0;
 * -E2BIG when a capacity is too small (s holds what fitted; the counts say
 * how many there were); -EBADMSG for a malformed sample or a label string
 * index out of range, with err filled. */
int pprof_reader__sample(const struct pprof_reader *r, size_t i, struct pprof_rsample *s, char *err,
                         size_t errlen);

/* The same, but the location ids left encoded, for a caller that maps them
 * as it decodes them (with varint__read, common/varint.h): *ids .. *ids_end is the one
 * packed field that holds them, as every pprof writer puts them. Returns
 * -EAGAIN where they are not (several fields, or unpacked): decode that
 * sample with pprof_reader__sample. */
int pprof_reader__sample_packed(const struct pprof_reader *r, size_t i, struct pprof_rsample *s,
                                const uint8_t **ids, const uint8_t **ids_end, char *err,
                                size_t errlen);

/* Frees what r holds and zeroes it; r may be NULL or zeroed. */
void pprof_reader__free(struct pprof_reader *r);

#endif
