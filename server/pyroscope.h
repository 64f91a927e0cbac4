/* What POST /ingest (Pyroscope's push API) sends, read without a network:
 * its name (app{k=v,...}), its from/until, a multipart body's part, and
 * its folded-lines body turned into a pprof that ingest__profile takes.
 * Pure functions, each bounded by its caller's limits: http_pyroscope.c
 * calls them, tests/fuzz/fuzz_pyroscope.c feeds them anything. */
#ifndef CODEXRAY_SERVER_PYROSCOPE_H
#define CODEXRAY_SERVER_PYROSCOPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/buf.h"
#include "store.h"

/* Labels a name may carry; parts a multipart body may have. */
#define PYRO_MAX_LABELS 64
#define PYRO_MAX_PARTS 16

struct pyro_label {
    const char *key, *value; /* into the name's copy */
};

/* A name as Pyroscope's clients write it: app{k=v,...}. */
struct pyro_name {
    char *copy; /* owned: the name split in place */
    const char *app;
    struct pyro_label labels[PYRO_MAX_LABELS];
    size_t nlabels;
};

/* name parsed into *n: the application before '{' (a ".cpu" suffix
 * dropped: Pyroscope's older clients name the type that way), then
 * comma-separated key=value labels up to the closing '}' (empty ones
 * skipped). A key is [A-Za-z0-9_.-], a value anything but ',', '{', '}'
 * and '='; the application and each key and value at most max bytes, at
 * most PYRO_MAX_LABELS labels, a key once. Returns 0, or -1 with msg
 * saying why (n then holds nothing to free). Free with pyro_name__free. */
int pyro_name__parse(const char *name, size_t max, struct pyro_name *n, char *msg, size_t msglen);
/* Frees what n holds (not n); n may be NULL or zeroed. */
void pyro_name__free(struct pyro_name *n);
/* The value of label key in n, or NULL. */
const char *pyro_name__label(const struct pyro_name *n, const char *key);

/* The name's labels that are the profile's other labels (store.h): all
 * but host, hostname (when it names the host), pid, service_name, the
 * identity keys, and Pyroscope's reserved "__" keys (__session_id__, a
 * value per process start, would make every profile a series of its
 * own). Into out (STORE_MAX_LABELS entries; pointing into n), their count
 * in *nout. Returns 0, or -1 with msg for a name past store.h's rules:
 * more than STORE_MAX_LABELS such labels, a key longer than
 * STORE_LABEL_KEY_MAX bytes, a value longer than STORE_LABEL_VALUE_MAX,
 * not valid UTF-8 or with a control character. */
int pyro_name__labels(const struct pyro_name *n, bool host_from_hostname, struct store_label *out,
                      size_t *nout, char *msg, size_t msglen);

/* The distinct values of the other labels the server has taken since it
 * started, bounded: at most max_keys keys and max_values values of each.
 * A label past them refuses its profile, so a client that puts a request
 * id or a timestamp in a label cannot grow the store's label lists (and
 * every query's) without end. Safe from several threads. */
struct pyro_card;
#define PYRO_CARD_KEYS 64
#define PYRO_CARD_VALUES 1000
/* NULL when out of memory. */
struct pyro_card *pyro_card__new(size_t max_keys, size_t max_values);
/* Takes the n labels (all or none; check_only: none, only whether they
 * would fit): 0, or -1 with msg naming the label past the bounds (or out
 * of memory). A caller checks before it stores a profile and takes once
 * it is stored, so refused uploads fill nothing; uploads between the two
 * may pass the bounds by the number stored at once. */
int pyro_card__take(struct pyro_card *c, const struct store_label *l, size_t n, bool check_only,
                    char *msg, size_t msglen);
/* c may be NULL. */
void pyro_card__free(struct pyro_card *c);

/* A from/until value: decimal digits whose count tells the unit (up to 10
 * seconds, 11-13 milliseconds, 14-16 microseconds, 17-19 nanoseconds), in
 * *ns. Returns 0, or -1 for anything else (empty, a sign, another
 * character, more than 19 digits, past 64 bits). */
int pyro_time__parse(const char *s, int64_t *ns);

/* The part named `name` of a multipart/form-data body whose Content-Type
 * is content_type (its boundary= read from it): *part and *plen point into
 * body. Returns 0; -ENOENT when the body has no such part; -EINVAL when
 * content_type has no usable boundary or the body is not well-formed
 * multipart (msg says why), -E2BIG past PYRO_MAX_PARTS parts. */
int pyro_multipart__part(const void *body, size_t len, const char *content_type, const char *name,
                         const void **part, size_t *plen, char *msg, size_t msglen);

/* Limits on a folded-lines body. */
struct pyro_folded_limits {
    size_t max_lines;       /* lines with a count (ingest's max_samples) */
    size_t max_depth;       /* frames in one line */
    size_t max_frame_bytes; /* one frame's name */
    size_t max_frames;      /* frames in all lines: what bounds the writer's tables */
};

/* Folded lines ("a;b;c 123\n", the root first, as Pyroscope's 'groups'
 * format has them) written as one pprof in out: sample types samples/count
 * and cpu/nanoseconds, each line's count its samples and count x period_ns
 * its CPU, its period cpu/nanoseconds period_ns, its time time_ns and
 * duration duration_ns. Blank lines are skipped; lines of the same stack
 * are added. Returns 0; -EINVAL for a line without a count, with a count
 * that is not a positive decimal number, with an empty frame, or with a
 * NUL (msg says which line); -E2BIG past lim (msg says which): its
 * memory is about 200 bytes a frame of lim->max_frames at most; -ENOMEM;
 * out's own cap error. */
int pyro_folded__to_pprof(const void *body, size_t len, int64_t period_ns, int64_t time_ns,
                          int64_t duration_ns, const struct pyro_folded_limits *lim,
                          struct buf *out, char *msg, size_t msglen);

#endif
