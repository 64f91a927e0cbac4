/* A function over time (server/fn_timeline.c, server/store_sqlite_fn.c) on
 * a SQLite store in a temporary file: self and total per step with a known
 * step in the function's CPU, recursion counted once, interpreter frames
 * hidden or shown, rollups and raw profiles alike; and the composed path
 * (one merge a step, what a store without its own gets) giving the same
 * figures as the store's one pass. Runs as any user. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>

#include "server_helpers.h"
#include "../../server/fn_timeline.h"

#define T0 (1764763200ll * SEC) /* a multiple of 3 hours */
#define MIN (60 * SEC)
#define INTERP "[interpreter]/usr/bin/python3"

/* Stacks root first: name or "name@file"; a minute's CPU before and after
 * minute DEPLOY. */
#define DEPLOY 100
static const struct {
    const char *frames[5];
    int64_t before_ms, after_ms;
} STACKS[] = {
    {{"main", "serve", "parse"}, 10, 30},
    {{"main", "serve", "render"}, 20, 20},
    {{"main", "serve"}, 5, 5},
    {{"main", "idle"}, 40, 40},
    {{"main", "serve", "serve", "parse"}, 1, 1},
    {{"main", "serve", "parse", "python3+0x10@" INTERP}, 2, 2},
};
#define NSTACKS (sizeof(STACKS) / sizeof(STACKS[0]))

/* One minute's profile put into st. */
static void put_minute(struct store *st, int64_t t, bool after)
{
    const struct stack_hasher *h = store__hasher(st);
    struct store_put_function fns[16];
    char names[16][64], files[16][64];
    uint32_t idx[16], frames[NSTACKS][5];
    struct store_location locs[16];
    struct store_stack stacks[NSTACKS];
    size_t nf = 0;
    char err[256];

    for (size_t s = 0; s < NSTACKS; s++) {
        size_t n = 0;
        while (n < 5 && STACKS[s].frames[n])
            n++;
        struct stack_key keys[5];
        for (size_t j = 0; j < n; j++) { /* leaf first */
            const char *fr = STACKS[s].frames[n - 1 - j], *at = strchr(fr, '@');
            char name[64], file[64];
            snprintf(name, sizeof(name), "%.*s", at ? (int)(at - fr) : (int)strlen(fr), fr);
            snprintf(file, sizeof(file), "%s", at ? at + 1 : "x.c");
            size_t k = 0;
            while (k < nf && (strcmp(names[k], name) || strcmp(files[k], file)))
                k++;
            if (k == nf) {
                assert_true(nf < 16);
                strcpy(names[k], name);
                strcpy(files[k], file);
                fns[k] = (struct store_put_function){
                    {names[k], files[k]},
                    stack_hasher__function(h, name, strlen(name), file, strlen(file))};
                idx[k] = k;
                locs[k] = (struct store_location){&idx[k], 1};
                nf++;
            }
            frames[s][j] = k;
            keys[j] = fns[k].key;
        }
        int64_t ms = after ? STACKS[s].after_ms : STACKS[s].before_ms;
        stacks[s] = (struct store_stack){
            frames[s], n, STORE_NO_LABELS, stack_hasher__stack(h, keys, n), ms, ms * 1000000};
    }
    struct store_profile p = {.app = "svc",
                              .host = "h1",
                              .pid = 7,
                              .time_ns = t,
                              .duration_ns = MIN,
                              .period_ns = 1000000,
                              .functions = fns,
                              .nfunctions = nf,
                              .locations = locs,
                              .nlocations = nf,
                              .stacks = stacks,
                              .nstacks = NSTACKS,
                              .bytes_in = 1000};
    if (store__put(st, &p, err, sizeof(err)))
        fail_msg("store__put: %s", err);
}

/* A minute's CPU of fn (self or total) from STACKS, in ns. */
static int64_t want_minute(const char *fn, bool self, bool after, bool hide)
{
    int64_t sum = 0;
    for (size_t s = 0; s < NSTACKS; s++) {
        const char *kept[5];
        size_t n = 0;
        for (size_t j = 0; j < 5 && STACKS[s].frames[j]; j++) {
            const char *fr = STACKS[s].frames[j], *at = strchr(fr, '@');
            if (hide && at && strncmp(at + 1, "[interpreter]", 13) == 0)
                continue;
            kept[n++] = fr;
        }
        bool in = false;
        for (size_t j = 0; j < n; j++)
            in |= strncmp(kept[j], fn, strlen(fn)) == 0 &&
                  (kept[j][strlen(fn)] == 0 || kept[j][strlen(fn)] == '@');
        bool leaf = n && strncmp(kept[n - 1], fn, strlen(fn)) == 0 &&
                    (kept[n - 1][strlen(fn)] == 0 || kept[n - 1][strlen(fn)] == '@');
        if (self ? leaf : in)
            sum += (after ? STACKS[s].after_ms : STACKS[s].before_ms) * 1000000;
    }
    return sum;
}

/* fn's timeline through the store's own pass, and through the composed one. */
static void both(struct store *st, const struct store_query *q, int64_t step, const char *fn,
                 bool hide, int64_t **self, int64_t **total, size_t *n)
{
    struct store_ops ops = *st->ops;
    const struct store_ops *own = st->ops;
    int64_t *s2, *t2;
    size_t n2;

    assert_non_null(own->fn_timeline);
    assert_int_equal(fn_timeline__get(st, q, step, fn, hide, self, total, n), 0);
    ops.fn_timeline = NULL; /* the composed path, on the same store */
    st->ops = &ops;
    int err = fn_timeline__get(st, q, step, fn, hide, &s2, &t2, &n2);
    st->ops = own;
    assert_int_equal(err, 0);
    assert_int_equal(n2, *n);
    assert_memory_equal(s2, *self, *n * sizeof(*s2));
    assert_memory_equal(t2, *total, *n * sizeof(*t2));
    free(s2);
    free(t2);
}

static void test_step_at_deploy(void **state)
{
    char dir[256];
    struct store *st = store__open_tmp(dir, sizeof(dir));
    int64_t built, pending;

    (void)state;
    for (int m = 0; m < 180; m++)
        put_minute(st, T0 + m * MIN + SEC, m >= DEPLOY);
    /* Rollups for every complete bucket: the first range below reads
     * them, the host filter reads raw profiles. */
    assert_int_equal(store__rollup(st, T0 + 5 * 3600 * SEC, &built, &pending), 0);
    assert_true(built >= 19);
    const char *fns[] = {"parse", "serve", "main", "idle", "python3+0x10", "nothing"};
    for (int hide = 0; hide < 2; hide++) {
        for (size_t f = 0; f < sizeof(fns) / sizeof(fns[0]); f++) {
            for (int raw = 0; raw < 2; raw++) {
                struct store_query q = {.app = "svc", .from_ns = T0, .to_ns = T0 + 3 * 3600 * SEC};
                q.host = raw ? "h1" : NULL;
                int64_t *self, *total;
                size_t n;
                both(st, &q, 10 * MIN, fns[f], hide, &self, &total, &n);
                assert_int_equal(n, 18);
                for (size_t i = 0; i < n; i++) {
                    int64_t ws = 0, wt = 0;
                    for (int k = 0; k < 10; k++) {
                        ws += want_minute(fns[f], true, i * 10 + k >= DEPLOY, hide);
                        wt += want_minute(fns[f], false, i * 10 + k >= DEPLOY, hide);
                    }
                    if (self[i] != ws || total[i] != wt)
                        fail_msg("%s hide=%d raw=%d step %zu: self %lld (want %lld), total %lld "
                                 "(want %lld)",
                                 fns[f], hide, raw, i, (long long)self[i], (long long)ws,
                                 (long long)total[i], (long long)wt);
                }
                free(self);
                free(total);
            }
        }
    }
    /* The step: parse's self is 13 ms a minute before, 33 after. */
    struct store_query q = {.app = "svc", .from_ns = T0 + 90 * MIN, .to_ns = T0 + 110 * MIN};
    int64_t *self, *total;
    size_t n;
    both(st, &q, 10 * MIN, "parse", true, &self, &total, &n);
    assert_int_equal(n, 2);
    assert_int_equal(self[0], 10 * 13 * 1000000ll);
    assert_int_equal(self[1], 10 * 33 * 1000000ll);
    free(self);
    free(total);
    /* A ragged range by the minute, a last step cut short. */
    q = (struct store_query){
        .app = "svc", .from_ns = T0 + 95 * MIN + 30 * SEC, .to_ns = T0 + 105 * MIN + 10 * SEC};
    both(st, &q, MIN, "serve", true, &self, &total, &n);
    assert_int_equal(n, 10);
    for (size_t i = 0; i < n; i++) {
        bool after = 96 + (int)i >= DEPLOY; /* step i holds the profile of minute 96 + i */
        assert_int_equal(total[i], want_minute("serve", false, after, true));
        assert_int_equal(self[i], 5 * 1000000ll);
    }
    free(self);
    free(total);
    store__close(st);
    tmpdir__remove(dir);
}

static void test_bad_arguments(void **state)
{
    char dir[256];
    struct store *st = store__open_tmp(dir, sizeof(dir));
    struct store_query q = {.app = "svc", .from_ns = T0, .to_ns = T0 + 3600 * SEC};
    int64_t *self = (int64_t *)1, *total = (int64_t *)1;
    size_t n = 1;

    (void)state;
    assert_int_equal(fn_timeline__get(st, &q, MIN, "", true, &self, &total, &n), -EINVAL);
    assert_null(self);
    assert_int_equal(fn_timeline__get(st, &q, 0, "f", true, &self, &total, &n), -EINVAL);
    q.to_ns = q.from_ns;
    assert_int_equal(fn_timeline__get(st, &q, MIN, "f", true, &self, &total, &n), -EINVAL);
    /* The composed path refuses more merges than FN_TIMELINE_MERGE_STEPS. */
    struct store_ops ops = *st->ops;
    const struct store_ops *own = st->ops;
    ops.fn_timeline = NULL;
    st->ops = &ops;
    q.to_ns = q.from_ns + (FN_TIMELINE_MERGE_STEPS + 1) * SEC;
    assert_int_equal(fn_timeline__get(st, &q, SEC, "f", true, &self, &total, &n), -E2BIG);
    q.to_ns = q.from_ns + FN_TIMELINE_MERGE_STEPS * SEC;
    assert_int_equal(fn_timeline__get(st, &q, SEC, "f", true, &self, &total, &n), 0);
    assert_int_equal(n, FN_TIMELINE_MERGE_STEPS);
    free(self);
    free(total);
    st->ops = own;
    store__close(st);
    tmpdir__remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_step_at_deploy),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
