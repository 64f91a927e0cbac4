/* Warming the ClickHouse store's frames and names caches at open: a merge
 * after a start otherwise reads the frames and names of every stack it
 * sums (two more statements, over a day's stacks table), which made the
 * hour's first flame graph about twice as slow as the next. A thread reads,
 * once, the stacks and functions stored for today and then yesterday (the
 * days stacks are kept under: store_clickhouse.c) into the same caches, as
 * far as they hold (CH_FRAMES_MAX, CH_NAMES_MAX): a day's keys are stored
 * once, so this is a read of distinct rows, not of samples. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/log.h"
#include "store_clickhouse_int.h"

/* Reads the frames of the stacks of day into the cache, at most max.
 * Returns how many were read, or -1 (logged). */
static long warm_frames(struct ch_store *st, long long day, long max)
{
    struct buf sql, ans;
    long n = -1;
    uint64_t *f = malloc(STACK_KEY_MAX_FRAMES * 16);

    buf__init(&sql, 1 << 12);
    buf__init(&ans, CH_MAX_ANSWER);
    if (!f ||
        ch_sql__appendf(&sql,
                        "SELECT key_a, key_b, fa, fb FROM %s.stacks WHERE day = %lld LIMIT 1 BY "
                        "key_a, key_b LIMIT %ld FORMAT RowBinary",
                        st->db, day, max) ||
        chs_exec(st, 0, &sql, &ans))
        goto out;
    struct ch_rbr r;
    ch_rbr__init(&r, ans.data, ans.len);
    for (n = 0; !ch_rbr__done(&r); n++) {
        uint64_t k[2], na, nb;
        const unsigned char *fa, *fb;
        if (ch_rbr__u64(&r, &k[0]) || ch_rbr__u64(&r, &k[1]) ||
            ch_rbr__u64_array(&r, &fa, &na, STACK_KEY_MAX_FRAMES) ||
            ch_rbr__u64_array(&r, &fb, &nb, STACK_KEY_MAX_FRAMES) || na != nb) {
            log_error("clickhouse: a garbled answer listing stacks (warming the caches)");
            n = -1;
            break;
        }
        for (uint64_t x = 0; x < na; x++) {
            f[2 * x] = ch_rbr__le64(fa + 8 * x);
            f[2 * x + 1] = ch_rbr__le64(fb + 8 * x);
        }
        chs_frames__put(st->frames, k, f, (uint32_t)na);
    }
out:
    free(f);
    buf__free(&sql);
    buf__free(&ans);
    return n;
}

/* Reads the names of the functions of day into the cache, at most max.
 * Returns how many were read, or -1 (logged). */
static long warm_names(struct ch_store *st, long long day, long max)
{
    struct buf sql, ans;
    long n = -1;

    buf__init(&sql, 1 << 12);
    buf__init(&ans, CH_MAX_ANSWER);
    if (ch_sql__appendf(&sql,
                        "SELECT key_a, key_b, name, file FROM %s.functions WHERE day = %lld LIMIT "
                        "1 BY key_a, key_b LIMIT %ld FORMAT TabSeparated",
                        st->db, day, max) ||
        chs_exec(st, 0, &sql, &ans))
        goto out;
    struct ch_tsv t;
    char *f[4];
    int got;
    ch_tsv__init(&t, ans.data, ans.len);
    for (n = 0; (got = ch_tsv__row(&t, f, 4)) == 4; n++) {
        uint64_t k[2];
        if (ch_tsv__u64(f[0], &k[0]) || ch_tsv__u64(f[1], &k[1]))
            break;
        chs_names__put(st->names, k, f[2], f[3]);
    }
    if (got != 0) {
        log_error("clickhouse: a garbled answer naming functions (warming the caches)");
        n = -1;
    }
out:
    buf__free(&sql);
    buf__free(&ans);
    return n;
}

static uint64_t mono_ms(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static void *warm_thread(void *arg)
{
    struct ch_store *st = arg;
    long nf = 0, nn = 0;
    uint64_t t0 = mono_ms();
    long long today = (long long)(time(NULL) / 86400);

    /* Today first: what queries most likely ask for. */
    for (long long day = today; day >= today - 1 && nf >= 0 && nn >= 0; day--) {
        if (atomic_load(&st->closing))
            return NULL;
        long f = nf < CH_FRAMES_MAX ? warm_frames(st, day, CH_FRAMES_MAX - nf) : 0;
        long n = f >= 0 && nn < CH_NAMES_MAX && !atomic_load(&st->closing)
                     ? warm_names(st, day, CH_NAMES_MAX - nn)
                     : 0;
        nf = f < 0 ? -1 : nf + f;
        nn = n < 0 ? -1 : nn + n;
    }
    if (nf >= 0 && nn >= 0)
        log_info("clickhouse: caches warmed: frames of %ld stacks, names of %ld functions "
                 "(today's and yesterday's), in %llu ms",
                 nf, nn, (unsigned long long)(mono_ms() - t0));
    else
        log_warn("clickhouse: caches not warmed (see above); merges read what they lack");
    return NULL;
}
void chs_warm__start(struct ch_store *st)
{
    int e = pthread_create(&st->warm, NULL, warm_thread, st);

    st->warming = e == 0;
    if (e)
        log_warn("clickhouse: no thread to warm the caches: %s", strerror(e));
}

void chs_warm__join(struct ch_store *st)
{
    /* At most the statement under way is waited for (its timeout). */
    atomic_store(&st->closing, true);
    if (st->warming)
        pthread_join(st->warm, NULL);
    st->warming = false;
}
