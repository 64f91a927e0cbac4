/* Benchmark input for the server: NPROCS processes x NMIN one-minute
 * profiles of one application, each with about NSTACKS distinct stacks
 * drawn from a shared universe (so processes overlap, as real replicas do),
 * written as gzipped pprof with the project's own writer.
 *
 *   gen_profiles OUTDIR NPROCS NMIN NSTACKS [START_UNIX_S [SEED [DEPLOYS]]]
 *
 * SEED (not 0) stands for a build of the application (bench/fleet_sim.py's
 * deploys): another universe of stacks, and a tenth of the functions
 * renamed, as a new release changes some code and moves the rest.
 * DEPLOYS (0 by default; bench/server_bench.py's week): as after that many
 * deploys, each of which regrew a fifth of the universe's stacks (the next
 * fifth each time, new paths through the same functions), so profiles of
 * deploy k and k+1 share four fifths of their stacks.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "../common/buf.h"
#include "../common/pprof/pprof_writer.h"

#define NFUNCS 3000
#define MAXDEPTH 40

static uint64_t rng = 88172645463325252ull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: gen_profiles OUTDIR NPROCS NMIN NSTACKS [START_UNIX_S [SEED "
                        "[DEPLOYS]]]\n");
        return 2;
    }
    const char *dir = argv[1];
    int nprocs = atoi(argv[2]), nmin = atoi(argv[3]), nstacks = atoi(argv[4]);
    long long start = argc > 5 ? atoll(argv[5]) : (long long)time(NULL) - nmin * 60;
    int deploys = argc > 7 ? atoi(argv[7]) : 0;
    size_t universe = (size_t)nstacks * 4;
    char(*names)[64] = malloc(NFUNCS * sizeof(*names));
    uint16_t(*stacks)[MAXDEPTH] = malloc(universe * sizeof(*stacks));
    uint8_t *depth = malloc(universe);

    if (!names || !stacks || !depth)
        return 1;
    mkdir(dir, 0755);
    unsigned long long seed = argc > 6 ? strtoull(argv[6], NULL, 10) : 0;
    if (seed)
        rng ^= seed * 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < NFUNCS; i++)
        if (seed && (unsigned long long)i % 10 == seed % 10)
            snprintf(names[i], sizeof(names[i]), "pkg%d.(*Type%d).Method%d_r%llu", i % 40, i % 300,
                     i, seed);
        else
            snprintf(names[i], sizeof(names[i]), "pkg%d.(*Type%d).Method%d", i % 40, i % 300, i);
    /* Stacks grow from a few roots, so they share prefixes like real ones. */
    for (int k = 0; k <= deploys; k++) {
        /* k = 0: every stack; then deploy k regrows fifth (k - 1) % 5. */
        size_t lo = k ? (size_t)((k - 1) % 5) * universe / 5 : 0;
        size_t hi = k ? (size_t)((k - 1) % 5 + 1) * universe / 5 : universe;
        for (size_t s = lo; s < hi; s++) {
            depth[s] = 8 + next() % (MAXDEPTH - 8);
            stacks[s][0] = next() % 8;
            for (int d = 1; d < depth[s]; d++)
                stacks[s][d] = (stacks[s][d - 1] * 31 + next() % 12) % NFUNCS;
        }
    }
    struct buf out;
    buf__init(&out, 256u << 20);
    for (int p = 0; p < nprocs; p++) {
        for (int m = 0; m < nmin; m++) {
            struct pprof_writer *w = pprof_writer__new();
            char pid[16], path[4096];
            pprof_writer__add_sample_type(w, "samples", "count");
            pprof_writer__add_sample_type(w, "cpu", "nanoseconds");
            pprof_writer__set_period(w, "cpu", "nanoseconds", 10000000);
            pprof_writer__set_time(w, (start + m * 60ll) * 1000000000ll, 60000000000ll);
            snprintf(pid, sizeof(pid), "%d", 1000 + p);
            struct pprof_label labels[] = {{"pid", pid, 0, NULL},
                                           {"service", "benchapp", 0, NULL},
                                           {"host", "bench-host", 0, NULL}};
            for (int k = 0; k < nstacks; k++) {
                size_t s = next() % universe;
                uint64_t locs[MAXDEPTH];
                for (int d = 0; d < depth[s]; d++) {
                    /* leaf first */
                    int f = stacks[s][depth[s] - 1 - d];
                    struct pprof_line l = {names[f], NULL, "bench.go", 0};
                    locs[d] = pprof_writer__location(w, 0, 0x1000 + f, &l, 1);
                }
                int64_t n = 1 + next() % 10;
                int64_t v[2] = {n, n * 10000000};
                pprof_writer__add_sample(w, locs, depth[s], v, labels, 3);
            }
            buf__reset(&out);
            if (pprof_writer__encode(w, &out, true))
                return 1;
            snprintf(path, sizeof(path), "%s/p%03d_m%04d.pb.gz", dir, p, m);
            FILE *f = fopen(path, "wb");
            if (!f || fwrite(out.data, 1, out.len, f) != out.len || fclose(f))
                return 1;
            pprof_writer__free(w);
        }
    }
    buf__free(&out);
    return 0;
}
