/* What building a CFI unwind table costs: `cfi_build FILE...` prints, per
 * file, the table's FDEs, rows, bytes (and per FDE), the unsupported rows by
 * reason and the build time, the median of 5 builds. A report, not a test.
 *
 * `cfi_build --compare FILE...`: each table built both ways, by our own
 * interpreter and by libdw one address at a time; says whether the rows and
 * the counts are the same, and the CPU time of each (the median of 5). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../agent/unwind/cfi_table.h"

#define RUNS 5

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int bench_file(const char *path)
{
    struct cfi_table *t = NULL;
    uint64_t ns[RUNS];
    char err[256];
    int fd = open(path, O_RDONLY | O_CLOEXEC), ret = 0;

    if (fd < 0) {
        perror(path);
        return -1;
    }
    for (int i = 0; i < RUNS; i++) {
        cfi_table__free(t);
        ret = cfi_table__build(fd, NULL, &t, err, sizeof(err));
        if (ret) {
            printf("%s: error %d: %s\n", path, ret, err);
            goto cleanup;
        }
        ns[i] = t->stats.build_ns;
    }
    qsort(ns, RUNS, sizeof(ns[0]), cmp_u64);
    const struct cfi_table_stats *s = &t->stats;
    printf("%s\n  %s: %u FDEs, %u rows (%u before merging), %llu bytes, %.1f bytes/FDE, "
           "median %.2f ms (min %.2f, max %.2f)\n",
           path, s->source == CFI_SRC_DEBUG_FRAME ? "debug_frame" : "eh_frame", s->fdes, s->rows,
           s->rows_raw, (unsigned long long)s->bytes, s->fdes ? (double)s->bytes / s->fdes : 0.0,
           ns[RUNS / 2] / 1e6, ns[0] / 1e6, ns[RUNS - 1] / 1e6);
    printf("  rows: signal %u, end %u, plt %u; unsupported:", s->signal_rows, s->end_rows,
           s->plt_rows);
    for (int r = 0; r < CFI_UNSUP__N; r++)
        printf(" %s %u", cfi_table__unsup_name(r), s->unsupported[r]);
    printf("\n  FDEs skipped:");
    for (int r = 0; r < CFI_SKIP__N; r++)
        printf(" %s %u", cfi_table__skip_name(r), s->skipped[r]);
    printf("\n");

cleanup:
    cfi_table__free(t);
    close(fd);
    return ret;
}

static uint64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The median CPU time of RUNS builds with opts o; the last table in *out. */
static int build_timed(int fd, const struct cfi_table_opts *o, struct cfi_table **out, uint64_t *ns,
                       char *err, size_t errlen)
{
    uint64_t t[RUNS];

    *out = NULL;
    for (int i = 0; i < RUNS; i++) {
        cfi_table__free(*out);
        uint64_t t0 = cpu_ns();
        int r = cfi_table__build(fd, o, out, err, errlen);
        t[i] = cpu_ns() - t0;
        if (r)
            return r;
    }
    qsort(t, RUNS, sizeof(t[0]), cmp_u64);
    *ns = t[RUNS / 2];
    return 0;
}

/* 0 when both ways give the same table; 1 when they differ; -1 when the file
 * has no table (the same error both ways) or cannot be read. */
static int compare_file(const char *path, uint64_t *ours_ns, uint64_t *libdw_ns)
{
    struct cfi_table_opts o = {.max_ms = 60000}, ol = {.max_ms = 60000, .libdw_rows = true};
    struct cfi_table *a = NULL, *l = NULL;
    char err[256], errl[256];
    int fd = open(path, O_RDONLY | O_CLOEXEC), ret = 1;
    uint64_t na = 0, nl = 0;

    if (fd < 0)
        return -1;
    int ra = build_timed(fd, &o, &a, &na, err, sizeof(err));
    int rl = build_timed(fd, &ol, &l, &nl, errl, sizeof(errl));
    if (ra || rl) {
        if (ra == rl) {
            ret = -1;
        } else {
            printf("%s: ours %d (%s), libdw %d (%s)\n", path, ra, ra ? err : "", rl,
                   rl ? errl : "");
        }
        goto out;
    }
    *ours_ns += na;
    *libdw_ns += nl;
    if (a->n != l->n || a->base != l->base) {
        printf("%s: %u rows at 0x%llx, libdw %u rows at 0x%llx\n", path, a->n,
               (unsigned long long)a->base, l->n, (unsigned long long)l->base);
    }
    for (uint32_t i = 0; i < a->n && i < l->n; i++) {
        const struct cx_cfi_row *x = &a->rows[i], *y = &l->rows[i];
        if (x->pc != y->pc || x->rule != y->rule || x->cfa_off != y->cfa_off ||
            x->fp_off != y->fp_off) {
            printf("%s: row %u differs: pc 0x%x rule 0x%x cfa %d fp %d; libdw pc 0x%x rule 0x%x "
                   "cfa %d fp %d\n",
                   path, i, x->pc, x->rule, x->cfa_off, x->fp_off, y->pc, y->rule, y->cfa_off,
                   y->fp_off);
            goto out;
        }
    }
    if (a->n != l->n ||
        memcmp(a->stats.unsupported, l->stats.unsupported, sizeof(a->stats.unsupported)) != 0 ||
        a->stats.rows_raw != l->stats.rows_raw || a->stats.signal_rows != l->stats.signal_rows ||
        a->stats.end_rows != l->stats.end_rows || a->stats.plt_rows != l->stats.plt_rows) {
        char sa[512], sl[512];
        cfi_table__stats_str(&a->stats, sa, sizeof(sa));
        cfi_table__stats_str(&l->stats, sl, sizeof(sl));
        printf("%s: counts differ:\n  ours  %s\n  libdw %s\n", path, sa, sl);
        goto out;
    }
    ret = 0;
out:
    cfi_table__free(a);
    cfi_table__free(l);
    close(fd);
    return ret;
}

int main(int argc, char **argv)
{
    int failed = 0, same = 0, differ = 0, none = 0;
    uint64_t ours = 0, libdw = 0;

    if (argc < 2) {
        fprintf(stderr, "usage: %s [--compare] FILE...\n", argv[0]);
        return 2;
    }
    if (strcmp(argv[1], "--compare") == 0) {
        for (int i = 2; i < argc; i++) {
            int r = compare_file(argv[i], &ours, &libdw);
            same += r == 0, differ += r == 1, none += r < 0;
        }
        printf("%d files: %d the same table both ways, %d different, %d without a table; "
               "CPU ours %.1f ms, libdw %.1f ms (%.1fx)\n",
               argc - 2, same, differ, none, ours / 1e6, libdw / 1e6,
               ours ? (double)libdw / (double)ours : 0.0);
        return differ != 0;
    }
    for (int i = 1; i < argc; i++)
        failed |= bench_file(argv[i]) != 0;
    return failed;
}
