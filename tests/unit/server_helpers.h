/* What the server's unit tests share: a store in a temporary directory,
 * protobuf written by hand (for the bodies no writer would make), good
 * profiles written by the agent's pprof writer, and a merged result read
 * back as folded stacks. No root: the directory is made under $TMPDIR or
 * /tmp, which any user may write. Include after cmocka.h. */
#ifndef CODEXRAY_TESTS_SERVER_HELPERS_H
#define CODEXRAY_TESTS_SERVER_HELPERS_H

#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../common/buf.h"
#include "../../common/gz.h"
#include "../../common/pprof/pprof_writer.h"
#include "../../server/stack_key.h"
#include "../../server/store.h"

#define SEC 1000000000ll

/* --- a temporary directory, and a store in it --- */

static inline void tmpdir__make(char *dir, size_t n)
{
    const char *t = getenv("TMPDIR");
    snprintf(dir, n, "%s/cx-unit-XXXXXX", t && *t ? t : "/tmp");
    assert_non_null(mkdtemp(dir));
}

static inline int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    return remove(path);
}

/* Removes dir and everything in it. */
static inline void tmpdir__remove(const char *dir)
{
    nftw(dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

static inline struct store *store__open_tmp(char *dir, size_t n)
{
    char err[512];

    tmpdir__make(dir, n);
    struct store *st = store_sqlite__open(dir, err, sizeof(err));
    if (!st)
        fail_msg("store_sqlite__open(%s): %s", dir, err);
    return st;
}

/* --- a profile in the store's terms (store__put's input) --- */

#define MAXF 16

/* A profile in the store's terms, built by name: each function is a
 * location of its own, keys by the store's hasher. */
struct sprof {
    const struct stack_hasher *h;
    const char *names[MAXF];
    struct store_put_function fns[MAXF];
    uint32_t fidx[MAXF];
    struct store_location locs[MAXF];
    uint32_t frames[MAXF][8];
    struct store_stack stacks[MAXF];
    struct store_label labels[8];
    struct store_labelset ls[2];
    struct store_profile p;
};

static inline void sprof__init(struct sprof *s, struct store *st, const char *app, const char *host,
                               int64_t pid, int64_t time_ns)
{
    memset(s, 0, sizeof(*s));
    s->h = store__hasher(st);
    s->p = (struct store_profile){.app = app,
                                  .host = host,
                                  .pid = pid,
                                  .time_ns = time_ns,
                                  .duration_ns = 60 * SEC,
                                  .period_ns = 10000000,
                                  .functions = s->fns,
                                  .locations = s->locs,
                                  .stacks = s->stacks,
                                  .labelsets = s->ls,
                                  .bytes_in = 1000};
}

static inline uint32_t sprof__fn(struct sprof *s, const char *name)
{
    for (uint32_t i = 0; i < s->p.nfunctions; i++)
        if (strcmp(s->names[i], name) == 0)
            return i;
    uint32_t i = s->p.nfunctions++;
    assert_true(i < MAXF);
    s->names[i] = name;
    s->fns[i] = (struct store_put_function){
        {name, "x.c"}, stack_hasher__function(s->h, name, strlen(name), "x.c", 3)};
    s->fidx[i] = i;
    s->locs[i] = (struct store_location){&s->fidx[i], 1};
    s->p.nlocations = s->p.nfunctions;
    return i;
}

/* A stack of names, leaf first, with its samples (CPU: samples x 10 ms). */
static inline void sprof__stack(struct sprof *s, const char *const *names, uint32_t n,
                                int64_t samples, uint32_t labelset)
{
    size_t k = s->p.nstacks++;
    struct stack_key keys[8];

    assert_true(k < MAXF && n <= 8);
    for (uint32_t i = 0; i < n; i++) {
        s->frames[k][i] = sprof__fn(s, names[i]);
        keys[i] = s->fns[s->frames[k][i]].key;
    }
    s->stacks[k] = (struct store_stack){
        s->frames[k], n, labelset, stack_hasher__stack(s->h, keys, n), samples, samples * 10000000};
}

static inline void sprof__put(struct store *st, struct sprof *s)
{
    char err[512];
    if (store__put(st, &s->p, err, sizeof(err)))
        fail_msg("store__put: %s", err);
}

/* --- protobuf by hand --- */

static inline void pb__varint(struct buf *b, uint64_t v)
{
    uint8_t t[10];
    size_t n = 0;
    while (v >= 0x80) {
        t[n++] = (v & 0x7f) | 0x80;
        v >>= 7;
    }
    t[n++] = v;
    assert_int_equal(buf__append(b, t, n), 0);
}

/* Field num as a varint. */
static inline void pb__int(struct buf *b, int num, uint64_t v)
{
    pb__varint(b, (uint64_t)num << 3);
    pb__varint(b, v);
}

/* Field num as length-delimited bytes. */
static inline void pb__bytes(struct buf *b, int num, const void *d, size_t n)
{
    pb__varint(b, (uint64_t)num << 3 | 2);
    pb__varint(b, n);
    assert_int_equal(buf__append(b, d, n), 0);
}

static inline void pb__str(struct buf *b, int num, const char *s)
{
    pb__bytes(b, num, s, strlen(s));
}

/* Field num holding message m, which is freed. */
static inline void pb__msg(struct buf *b, int num, struct buf *m)
{
    pb__bytes(b, num, m->data ? m->data : "", m->len);
    buf__free(m);
}

/* --- good profiles, by the agent's writer --- */

/* A stack of a test profile: frame names leaf first ("" ends early), its
 * counts and its labels (key, value pairs; NULL ends). A frame
 * "name\tfile" has that file, others "<name>.c". */
struct tstack {
    const char *frames[8];
    int64_t samples;
    const char *labels[8];
    int64_t off_ns; /* off-CPU time: a sample of its own, [0, 0, off_ns] */
};

/* Where tprofile_types puts off_cpu/nanoseconds: nowhere (the CPU profile
 * of before), third (the agent's order, OFFCPU_CONTRACT.md) or first. */
enum toff { TOFF_NONE, TOFF_THIRD, TOFF_FIRST };

/* A profile of stacks as the agent writes one: samples/count and
 * cpu/nanoseconds, a period of 10 ms, starting at time_ns and lasting 60 s,
 * each function a location of its own in file "<name>.c". Appended to out,
 * gzipped when gzip. */
static inline void tprofile_types(struct buf *out, int64_t time_ns, const struct tstack *st,
                                  size_t n, bool gzip, enum toff off)
{
    struct pprof_writer *w = pprof_writer__new();

    assert_non_null(w);
    if (off == TOFF_FIRST)
        assert_int_equal(pprof_writer__add_sample_type(w, "off_cpu", "nanoseconds"), 0);
    assert_int_equal(pprof_writer__add_sample_type(w, "samples", "count"), 0);
    assert_int_equal(pprof_writer__add_sample_type(w, "cpu", "nanoseconds"), 0);
    if (off == TOFF_THIRD)
        assert_int_equal(pprof_writer__add_sample_type(w, "off_cpu", "nanoseconds"), 0);
    pprof_writer__set_period(w, "cpu", "nanoseconds", 10000000);
    pprof_writer__set_time(w, time_ns, 60 * SEC);
    const char *seen[64]; /* one location per function, by first sight */
    size_t nseen = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t locs[8];
        size_t nl = 0;
        for (; nl < 8 && st[i].frames[nl] && *st[i].frames[nl]; nl++) {
            char file[160], name[128];
            const char *tab = strchr(st[i].frames[nl], '\t');
            snprintf(name, sizeof(name), "%.*s",
                     tab ? (int)(tab - st[i].frames[nl]) : (int)strlen(st[i].frames[nl]),
                     st[i].frames[nl]);
            if (tab)
                snprintf(file, sizeof(file), "%s", tab + 1);
            else
                snprintf(file, sizeof(file), "%s.c", name);
            struct pprof_line l = {name, NULL, file, 10, 1};
            size_t k = 0;
            while (k < nseen && strcmp(seen[k], st[i].frames[nl]) != 0)
                k++;
            if (k == nseen) {
                assert_true(nseen < 64);
                seen[nseen++] = st[i].frames[nl];
            }
            locs[nl] = pprof_writer__location(w, 0, 0x1000 + 16 * k, &l, 1);
            assert_true(locs[nl] != 0);
        }
        struct pprof_label labels[4];
        size_t nlab = 0;
        for (; nlab < 4 && st[i].labels[2 * nlab]; nlab++)
            labels[nlab] =
                (struct pprof_label){st[i].labels[2 * nlab], st[i].labels[2 * nlab + 1], 0, NULL};
        int64_t v[3] = {st[i].samples, st[i].samples * 10000000, 0};
        if (off == TOFF_FIRST)
            v[0] = 0, v[1] = st[i].samples, v[2] = st[i].samples * 10000000;
        if (st[i].samples || off == TOFF_NONE)
            assert_int_equal(pprof_writer__add_sample(w, locs, nl, v, labels, nlab), 0);
        if (off != TOFF_NONE && st[i].off_ns) { /* the agent's off-CPU sample */
            int64_t o[3] = {0, 0, st[i].off_ns};
            if (off == TOFF_FIRST)
                o[0] = st[i].off_ns, o[2] = 0;
            assert_int_equal(pprof_writer__add_sample(w, locs, nl, o, labels, nlab), 0);
        }
    }
    assert_int_equal(pprof_writer__encode(w, out, gzip), 0);
    pprof_writer__free(w);
}

static inline void tprofile(struct buf *out, int64_t time_ns, const struct tstack *st, size_t n,
                            bool gzip)
{
    tprofile_types(out, time_ns, st, n, gzip, TOFF_NONE);
}

/* --- a merged result read back --- */

/* The samples of the stack "root;...;leaf" in m, 0 when it has none. */
static inline int64_t folded_samples(const struct store_merged *m, const char *folded, int64_t *cpu)
{
    int64_t sum = 0;

    if (cpu)
        *cpu = 0;
    for (size_t i = 0; i < m->nstacks; i++) {
        char s[512];
        size_t len = 0;
        s[0] = '\0';
        for (uint32_t j = m->stacks[i].nframes; j-- > 0;) {
            const char *name = m->functions[m->stacks[i].frames[j]].name;
            len += snprintf(s + len, sizeof(s) - len, "%s%s", len ? ";" : "", name);
            if (len >= sizeof(s))
                len = sizeof(s) - 1;
        }
        if (strcmp(s, folded) == 0) {
            sum += m->stacks[i].samples;
            if (cpu)
                *cpu += m->stacks[i].cpu_ns;
        }
    }
    return sum;
}

/* The merge of app over all time, which must succeed. */
static inline struct store_merged *merge_all(struct store *st, const char *app)
{
    struct store_query q = {.app = app, .from_ns = 0, .to_ns = INT64_MAX};
    struct store_merged *m = NULL;

    assert_int_equal(store__merge(st, &q, &m), 0);
    assert_non_null(m);
    return m;
}

#endif
