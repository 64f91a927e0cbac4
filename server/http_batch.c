/* POST /api/v1/profiles/batch: many profiles in one request (the format
 * in common/batch.h), as it is or the whole body one zstd stream
 * (Content-Encoding: zstd), each profile stored as POST /api/v1/profiles
 * would store it alone, under one ingest slot for the whole batch. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../common/batch.h"
#include "../common/clock.h"
#include "../common/json.h"
#include "../common/log.h"
#include "../common/zst.h"
#include "http_int.h"

/* Refused profiles logged in full per batch; the rest are only counted (one
 * more line, and one for those not tried): a batch of 10,000 bad profiles
 * writes at most 5 lines. */
#define LOG_LINES 3

/* The query keys of the identity, in the order of the pointers in
 * entry_identity; "pid" last. */
#define N_KEYS (2 + STORE_N_IDENTITY + 1)

/* A zstd batch may inflate to this many times --max-ratio (see
 * inflate_zstd). */
#define BATCH_RATIO_TIMES 10

static const char NOT_TRIED[] = "not tried: an earlier profile of the batch failed";

/* e's identity from its query as the single upload reads its query
 * string, the values decoded into room (roomlen bytes): service, host,
 * every key of store_identity_keys and pid; other keys ignored. room of
 * the query's length + 1 always holds them (a value decodes to no more
 * bytes than its key=value takes). Returns 0, or 400 with msg: a value
 * that is not valid percent-encoding (or a NUL), a pid that is not one. */
static int entry_identity(const struct batch_entry *e, char *room, size_t roomlen,
                          struct ingest_identity *id, char *msg, size_t msglen)
{
    const char *pid = NULL;
    const char **dst[N_KEYS] = {&id->service, &id->host};
    const char *keys[N_KEYS] = {"service", "host"};
    size_t used = 0;

    for (int i = 0; i < STORE_N_IDENTITY; i++) {
        keys[2 + i] = store_identity_keys[i];
        dst[2 + i] = &id->identity[i];
    }
    keys[N_KEYS - 1] = "pid";
    dst[N_KEYS - 1] = &pid;
    *id = (struct ingest_identity){0};
    for (int k = 0; k < N_KEYS; k++) {
        int r = batch__arg(e, keys[k], room + used, roomlen - used);
        if (r < 0) {
            snprintf(msg, msglen, "%s: not a valid percent-encoded value", keys[k]);
            return 400;
        }
        if (r == 1) {
            *dst[k] = room + used;
            used += strlen(room + used) + 1;
        }
    }
    if (http_parse_pid(pid, &id->pid)) {
        snprintf(msg, msglen, "pid: not a process id");
        return 400;
    }
    return 0;
}

/* A batch's profiles are stored in groups (store__group_begin), each made
 * durable by one flush at its end: one fsync for up to GROUP_MAX profiles
 * instead of one each. A group is also ended after GROUP_NS, since it
 * holds the store's writer, which other uploads and the rollups wait for. */
#define GROUP_MAX 256
#define GROUP_NS (250ull * 1000 * 1000)

/* What became of one profile of the batch: its status, and for anything
 * but 202 where its message starts in the batch's messages. */
struct outcome {
    int status;
    size_t msg;
    size_t len; /* its bytes, counted once stored */
};

struct batch_run {
    struct http *h;
    struct outcome *out; /* one a profile */
    struct buf msgs;     /* their messages, each NUL-terminated */
    size_t n, done;      /* profiles; those with an outcome */
    size_t group_from;   /* the open group's first profile */
    bool grouped;        /* a group is open */
    uint64_t group_t0;
    atomic_bool *stop; /* a 5xx in any part of the batch: the rest is not tried */
    bool shared;       /* its group is shared with another half: open, not closed here */
};

/* Records profile r->done's outcome. Returns false when out of memory. */
static bool settle(struct batch_run *r, int status, size_t len, const char *msg)
{
    struct outcome *o = &r->out[r->done++];

    o->status = status;
    o->len = len;
    o->msg = r->msgs.len;
    return status == 202 || buf__append(&r->msgs, msg, strlen(msg) + 1) == 0;
}

/* Ends the open group, if any: on failure none of its profiles is stored,
 * and those it had taken become 503 (the client sends them again). Returns
 * false when it failed. */
static bool group_close(struct batch_run *r, bool *cut)
{
    char err[HTTP_MSG_MAX / 2], msg[HTTP_MSG_MAX];

    if (!r->grouped || r->shared)
        return true;
    r->grouped = false;
    if (store__group_end(r->h->st, err, sizeof(err)) == 0)
        return true;
    snprintf(msg, sizeof(msg), "not stored: the store could not make it durable: %s", err);
    log_error("ingest: a batch's group of %zu profiles lost: %s", r->done - r->group_from, err);
    size_t at = r->msgs.len;
    if (buf__append(&r->msgs, msg, strlen(msg) + 1))
        *cut = true;
    for (size_t k = r->group_from; k < r->done; k++)
        if (r->out[k].status == 202)
            r->out[k] = (struct outcome){503, at, r->out[k].len};
    return false;
}

/* Opens a group before profile r->done when none is open: after the last
 * one was closed, or when it is full or old. A store without groups
 * stores each profile alone. Returns false when the group could not be
 * closed (the store failed: stop). */
static bool group_ready(struct batch_run *r, bool *cut)
{
    char err[HTTP_MSG_MAX];

    if (r->shared)
        return true;
    if (r->grouped &&
        (r->done - r->group_from >= GROUP_MAX || clock__mono_ns() - r->group_t0 >= GROUP_NS) &&
        !group_close(r, cut))
        return false;
    if (!r->grouped && store__group_begin(r->h->st, err, sizeof(err)) == 0) {
        r->grouped = true;
        r->group_from = r->done;
        r->group_t0 = clock__mono_ns();
    }
    return true;
}

/* The profiles of the batch that rd has opened, r->n of them, ingested in
 * order into r->out. After a 5xx (the store failed or is away) the rest
 * would fail too, each perhaps after the store's timeout: they are not
 * tried, and say 503 so the client sends them again. The caller holds an
 * ingest slot. */
static void ingest_all(struct batch_run *r, struct batch_reader *rd, bool *cut)
{
    char room[BATCH_QUERY_MAX + 2], msg[HTTP_MSG_MAX], why[256];
    size_t refused = 0;
    struct batch_entry e;
    int status = 0;

    while (r->done < r->n && status < 500 && !atomic_load(r->stop) &&
           batch__next(rd, &e, why, sizeof(why)) == 1) {
        struct ingest_identity id;
        size_t i = r->done;

        if (!group_ready(r, cut)) {
            atomic_store(r->stop, true);
            break;
        }
        if (!(status = entry_identity(&e, room, sizeof(room), &id, msg, sizeof(msg))))
            status =
                ingest__profile(r->h->st, e.data, e.len, &id, &r->h->opts.limits, msg, sizeof(msg));
        if (!settle(r, status, e.len, msg))
            *cut = true;
        if (status == 202)
            continue;
        if (refused++ < LOG_LINES) {
            char what[96];
            snprintf(what, sizeof(what), "profile %zu of a batch of %zu, ", i, r->n);
            http_log_refused(what, e.len, id.service, status, msg);
        }
    }
    bool closed = group_close(r, cut);
    if (status >= 500 || !closed)
        atomic_store(r->stop, true);
    if (refused > LOG_LINES)
        log_warn("ingest: refused %zu more profiles of that batch of %zu (not logged one by one)",
                 refused - LOG_LINES, r->n);
    if (r->done < r->n)
        log_warn("ingest: %zu profiles of that batch of %zu not tried after profile %zu's %d",
                 r->n - r->done, r->n, r->done - 1, r->done ? r->out[r->done - 1].status : 0);
    while (r->done < r->n)
        if (!settle(r, 503, 0, NOT_TRIED))
            *cut = true;
}

/* The fewest profiles a batch has for its second half to go to a thread. */
#define APART_MIN 16

struct half {
    struct batch_run r;
    struct batch_reader rd;
    void *group;
    bool cut;
};

static void *half_thread(void *arg)
{
    struct half *x = arg;

    store__group_join(x->r.h->st, x->group);
    ingest_all(&x->r, &x->rd, &x->cut);
    store__group_join(x->r.h->st, NULL);
    return NULL;
}

/* ingest_all, but with a store whose group takes puts from several
 * threads (ClickHouse) and no other upload being stored
 * (http_slot_spare: with others, the cores are theirs), the batch's
 * second half decoded by a thread of its own into the same group: the
 * profiles are decoded on two cores, and still written as one group
 * (one INSERT a table and shard). The group is not cut by GROUP_MAX or
 * GROUP_NS (the store bounds its memory itself); its failure makes every
 * profile it had taken 503. Each half stops at a 5xx of either, the rest
 * answered 503 as ingest_all does. The second slot bounds the memory, as
 * a second batch would (each half decodes one profile at a time). */
static void ingest_batch(struct batch_run *r, struct batch_reader *rd, bool *cut)
{
    struct half x = {.r = {.h = r->h, .stop = r->stop, .grouped = true}, .rd = *rd};
    char err[HTTP_MSG_MAX];
    /* Halves of equal bytes rather than of equal counts: a window's few
     * large profiles hold most of its decoding. */
    size_t half = batch__halve(rd, r->n);
    struct batch_entry e;
    pthread_t th;

    if (r->n < APART_MIN || !store__group_shares(r->h->st) || !http_slot_spare(r->h)) {
        ingest_all(r, rd, cut);
        return;
    }
    if (store__group_begin(r->h->st, err, sizeof(err))) {
        http_slot_put(r->h);
        ingest_all(r, rd, cut);
        return;
    }
    for (size_t i = 0; i < half; i++)
        (void)batch__next(&x.rd, &e, err, sizeof(err)); /* the framing was read whole */
    x.group = store__group_share(r->h->st);
    x.r.out = r->out + half;
    x.r.n = r->n - half;
    x.r.shared = r->shared = r->grouped = true;
    r->group_from = 0;
    buf__init(&x.r.msgs, r->msgs.max);
    r->n = half;
    bool apart = pthread_create(&th, NULL, half_thread, &x) == 0;
    if (apart)
        http_count(&r->h->m.batches_split, 1);
    ingest_all(r, rd, cut);
    if (apart)
        pthread_join(th, NULL);
    else
        ingest_all(&x.r, &x.rd, &x.cut);
    http_slot_put(r->h);
    /* The second half's outcomes after the first's, its messages too. */
    for (size_t i = 0; i < x.r.done; i++)
        if (x.r.out[i].status != 202)
            x.r.out[i].msg += r->msgs.len;
    if (x.cut || buf__append(&r->msgs, x.r.msgs.data, x.r.msgs.len))
        *cut = true;
    r->n += x.r.n;
    r->done += x.r.done;
    buf__free(&x.r.msgs);
    /* The group's end, for both halves: on failure, every profile stored
     * into it (202 so far) becomes 503. */
    r->shared = false;
    group_close(r, cut);
}

/* Each profile's outcome counted in the metrics. Returns those stored. */
static size_t count_outcomes(struct batch_run *r)
{
    size_t stored = 0;
    uint64_t bytes = 0;

    for (size_t i = 0; i < r->done; i++) {
        if (r->out[i].status == 202) {
            stored++;
            bytes += r->out[i].len;
        } else {
            http_count_reject(r->h, r->out[i].status);
        }
    }
    http_count(&r->h->m.profiles, stored);
    http_count(&r->h->m.bytes, bytes);
    return stored;
}

/* The answer: {"stored":N,"statuses":[...],"errors":[...]}. Returns 0, or
 * -1 when out of memory. */
static int answer(const struct batch_run *r, size_t stored, struct buf *out)
{
    if (json__raw(out, "{\"stored\":") || json__i64(out, (int64_t)stored) ||
        json__raw(out, ",\"statuses\":["))
        return -1;
    for (size_t i = 0; i < r->n; i++)
        if (json__raw(out, i ? "," : "") || json__i64(out, r->out[i].status))
            return -1;
    if (json__raw(out, "],\"errors\":["))
        return -1;
    for (size_t i = 0; i < r->n; i++) {
        const struct outcome *o = &r->out[i];
        if (json__raw(out, i ? "," : "") ||
            (o->status == 202 ? json__raw(out, "null") : json__str(out, r->msgs.data + o->msg)))
            return -1;
    }
    return json__raw(out, "]}\n");
}

enum { CODING_NONE, CODING_ZSTD };

/* The Content-Encoding headers of a request: how many, the last value. */
struct codings {
    unsigned n;
    const char *value;
};

static enum MHD_Result coding_seen(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value)
{
    struct codings *cs = cls;

    (void)kind;
    if (strcasecmp(key, "Content-Encoding") == 0) {
        cs->n++;
        cs->value = value ? value : "";
    }
    return MHD_YES;
}

/* The request's Content-Encoding (one header, one coding, any case):
 * CODING_NONE when absent, empty or "identity", CODING_ZSTD for "zstd",
 * -1 with msg filled for anything else (another coding, a list of them,
 * the header twice). */
static int body_coding(struct MHD_Connection *c, char *msg, size_t msglen)
{
    struct codings cs = {0, NULL};
    const char *v;
    size_t n;

    MHD_get_connection_values(c, MHD_HEADER_KIND, coding_seen, &cs);
    if (cs.n == 0)
        return CODING_NONE;
    v = cs.value + strspn(cs.value, " \t");
    n = strlen(v);
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    if (cs.n == 1 && (n == 0 || (n == 8 && strncasecmp(v, "identity", 8) == 0)))
        return CODING_NONE;
    if (cs.n == 1 && n == 4 && strncasecmp(v, "zstd", 4) == 0)
        return CODING_ZSTD;
    snprintf(msg, msglen,
             "Content-Encoding: a batch is taken as it is (no Content-Encoding, or identity) or as "
             "one zstd stream (zstd); not another coding, a list of them or the header twice");
    return -1;
}

/* body (len bytes, Content-Encoding: zstd) inflated into raw, within
 * --max-decompressed (raw's cap) and 10 times --max-ratio: a host's
 * profiles repeat each other's names and paths, so a whole batch
 * compresses far better than one profile (32 times measured), and 10
 * times the single profile's ratio still cuts a bomb off early. The
 * caller holds an ingest slot. Returns 0, or the status with msg: 413 past
 * a limit (which, and the flag that raises it), 400 not whole zstd frames,
 * 500 out of memory. */
static int inflate_zstd(struct http *h, const void *body, size_t len, struct buf *raw, char *msg,
                        size_t msglen)
{
    size_t cap = h->opts.limits.max_decompressed, ratio = h->opts.limits.max_ratio;

    ratio = ratio > SIZE_MAX / BATCH_RATIO_TIMES ? SIZE_MAX : ratio * BATCH_RATIO_TIMES;
    /* (An empty body would otherwise meet the ratio's limit of 0 bytes.) */
    int e = zst__is_zstd(body, len) ? zst__decompress(body, len, raw, ratio) : -EBADMSG;
    if (e == -E2BIG && ratio && len <= SIZE_MAX / ratio && len * ratio < cap)
        snprintf(msg, msglen,
                 "the zstd batch inflates past %zu times its %zu bytes (%d x --max-ratio): raise "
                 "--max-ratio to take it",
                 ratio, len, BATCH_RATIO_TIMES);
    else if (e == -E2BIG)
        snprintf(msg, msglen,
                 "the zstd batch inflates past %zu bytes (--max-decompressed): raise "
                 "--max-decompressed to take it, or send smaller batches",
                 cap);
    else if (e == -ENOMEM)
        snprintf(msg, msglen, "out of memory inflating the zstd batch");
    else if (e)
        snprintf(msg, msglen,
                 "the body is not whole zstd frames (Content-Encoding: zstd), or asks for a window "
                 "over %d MiB",
                 1 << (ZST_WINDOW_LOG_MAX - 20));
    return e == 0 ? 0 : e == -E2BIG ? 413 : e == -ENOMEM ? 500 : 400;
}

/* The framing of the batch in body read whole, so that a batch cut short
 * or lying about a length is refused before anything of it is stored:
 * the reader at its first profile in *start and their number in *n.
 * Returns 0, or 400 with msg. */
static int read_framing(const void *body, size_t len, struct batch_reader *start, size_t *n,
                        char *msg, size_t msglen)
{
    struct batch_reader r;
    struct batch_entry e;
    int got;

    *n = 0;
    if (!batch__open(&r, body, len, msg, msglen))
        return 400;
    *start = r;
    while ((got = batch__next(&r, &e, msg, msglen)) == 1)
        (*n)++;
    return got < 0 ? 400 : 0;
}

enum MHD_Result http_batch__ingest(struct http *h, struct MHD_Connection *c, const void *body,
                                   size_t len)
{
    struct batch_reader start;
    atomic_bool stop = false;
    struct batch_run run = {.h = h, .stop = &stop};
    struct buf raw, out;
    char msg[HTTP_MSG_MAX];
    size_t n = 0;
    bool held = false, cut = false;
    int status, coding = body_coding(c, msg, sizeof(msg));

    buf__init(&raw, h->opts.limits.max_decompressed);
    buf__init(&run.msgs, 0);
    buf__init(&out, 0);
    if (coding < 0) {
        status = 415;
        goto done;
    }
    if (coding == CODING_ZSTD) {
        /* The slot before the inflating: at most --ingest-concurrency
         * inflated batches exist at once. */
        if (!(held = http_slot_take(h))) {
            status = 503;
            snprintf(msg, sizeof(msg), "%s", HTTP_BUSY);
            goto done;
        }
        if ((status = inflate_zstd(h, body, len, &raw, msg, sizeof(msg)))) {
            log_warn("ingest: refused a zstd batch of %zu bytes: %d %s", len, status, msg);
            goto done;
        }
        body = raw.data ? raw.data : "";
        len = raw.len;
    }
    if ((status = read_framing(body, len, &start, &n, msg, sizeof(msg))))
        goto done;
    /* At most BATCH_MAX_PROFILES messages of HTTP_MSG_MAX bytes, and in
     * the answer each escaped to at most 6 (\u00XX): about 31 MB at worst,
     * 16 bytes a profile when all are stored. */
    run.n = n;
    run.out = calloc(n + 1, sizeof(*run.out));
    buf__init(&run.msgs, (n + 2) * HTTP_MSG_MAX); /* + a group's failure in each half */
    buf__init(&out, 64 + n * 4 + n * (6 * HTTP_MSG_MAX + 4));
    if (!run.out) {
        status = 500;
        snprintf(msg, sizeof(msg), "out of memory");
        goto done;
    }
    if (n) {
        /* One slot for the whole batch: it is decoded one profile at a
         * time, each within limits.max_memory, as a single upload is. */
        if (!held && !(held = http_slot_take(h))) {
            status = 503;
            snprintf(msg, sizeof(msg), "%s", HTTP_BUSY);
            goto done;
        }
        ingest_batch(&run, &start, &cut);
    }
    if (held)
        http_slot_put(h);
    held = false;
    buf__free(&raw); /* the profiles pointed into it; their outcomes are copies */
    size_t stored = count_outcomes(&run);
    if (cut || answer(&run, stored, &out)) {
        /* Only when out of memory: what was stored stays stored, and the
         * client, with no statuses to read, sends the batch again. */
        status = 500;
        snprintf(msg, sizeof(msg), "out of memory writing the batch's answer");
    }
done:
    if (held)
        http_slot_put(h);
    buf__free(&raw);
    buf__free(&run.msgs);
    free(run.out);
    if (status) {
        buf__free(&out);
        return http_respond_error(h, c, status, msg);
    }
    return http_respond_buf(c, 200, "application/json", &out);
}
