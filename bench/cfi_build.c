/* What building a CFI unwind table costs: `cfi_build FILE...` prints, per
 * file, the table's FDEs, rows, bytes (and per FDE), the unsupported rows by
 * reason and the build time, the median of 5 builds. A report, not a test. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int main(int argc, char **argv)
{
    int failed = 0;

    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE...\n", argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; i++)
        failed |= bench_file(argv[i]) != 0;
    return failed;
}
