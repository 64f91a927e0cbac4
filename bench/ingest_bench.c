/* The server's ingest without HTTP: every file of DIR (bodies as they would
 * be posted: gzip, zstd or raw pprof) through ingest__profile into a SQLite
 * store in a temporary directory, once to warm the store (a running server
 * knows most stacks), then REPS more times, timed on this process's CPU
 * clock. What HTTP adds is the difference from server_bench.py's figure.
 *
 *   ingest_bench DIR [REPS]      prints "ingest_bench: N profiles, X ms each"
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/buf.h"
#include "../server/ingest.h"

static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: ingest_bench DIR [REPS]\n");
        return 2;
    }
    int reps = argc > 2 ? atoi(argv[2]) : 2;
    struct dirent **ents;
    int n = scandir(argv[1], &ents, NULL, alphasort);
    if (n < 0) {
        perror(argv[1]);
        return 1;
    }
    struct buf *bodies = calloc(n, sizeof(*bodies));
    int nb = 0;
    for (int i = 0; i < n; i++) {
        char path[4096];
        if (ents[i]->d_name[0] != '.') {
            snprintf(path, sizeof(path), "%s/%s", argv[1], ents[i]->d_name);
            buf__init(&bodies[nb], 64u << 20);
            if (buf__read_file(&bodies[nb], AT_FDCWD, path)) {
                fprintf(stderr, "cannot read %s\n", path);
                return 1;
            }
            nb++;
        }
        free(ents[i]);
    }
    free(ents);
    char dir[] = "/tmp/cx-ingest-bench-XXXXXX", err[512];
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    struct store *st = store_sqlite__open(dir, err, sizeof(err));
    if (!st) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    struct ingest_limits lim = {512u << 20, 256u << 20, 100, 4096, 10000000, 2048, 64000000};
    struct ingest_identity id = {0};
    double t0 = 0;
    for (int r = 0; r <= reps; r++) {
        if (r == 1)
            t0 = cpu_s(); /* the first pass only warms the store */
        for (int i = 0; i < nb; i++) {
            int status =
                ingest__profile(st, bodies[i].data, bodies[i].len, &id, &lim, err, sizeof(err));
            if (status != 202) {
                fprintf(stderr, "ingest_bench: %d %s\n", status, err);
                return 1;
            }
        }
    }
    double per = (cpu_s() - t0) / ((double)nb * reps);
    printf("ingest_bench: %d profiles, %.3f ms each = %.0f/s on one core\n", nb * reps, per * 1000,
           1 / per);
    store__close(st);
    for (int i = 0; i < nb; i++)
        buf__free(&bodies[i]);
    free(bodies);
    /* the store's files, then its directory */
    const char *files[] = {"profiles.db", "profiles.db-wal", "profiles.db-shm"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
        unlink(path);
    }
    return rmdir(dir) ? 1 : 0;
}
