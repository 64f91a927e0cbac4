/* libFuzzer target for the server's ingest path: a request body as it comes
 * over HTTP (pprof, gzipped or zstd), through ingest__profile into a real
 * SQLite store, and every 64th accepted profile read back through a merge
 * and the flame-graph writer. Built with ASan and UBSan (make fuzz):
 *   build/fuzz/fuzz_ingest [-max_total_time=60] CORPUS_DIR...
 * The store lives in a fresh directory under /dev/shm (tmpfs: a put's fsync
 * costs nothing), removed at exit. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/buf.h"
#include "../../server/ingest.h"
#include "../../server/query.h"
#include "../../server/store.h"

static struct store *st;
static char dir[64];

static void cleanup(void)
{
    char path[128];

    store__close(st);
    const char *files[] = {"profiles.db", "profiles.db-wal", "profiles.db-shm"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    char err[512];

    (void)argc;
    (void)argv;
    snprintf(dir, sizeof(dir), "%s/cx-fuzz-XXXXXX", access("/dev/shm", W_OK) ? "/tmp" : "/dev/shm");
    if (!mkdtemp(dir) || !(st = store_sqlite__open(dir, err, sizeof(err)))) {
        fprintf(stderr, "fuzz_ingest: cannot open a store in %s: %s\n", dir, err);
        exit(1);
    }
    atexit(cleanup);
    return 0;
}

/* Limits small enough that a run explores rather than allocates. */
static const struct ingest_limits lim = {
    .max_memory = 64u << 20,
    .max_decompressed = 32u << 20,
    .max_ratio = 100,
    .max_label_bytes = 4096,
    .max_samples = 1000000,
    .max_stack_depth = 2048,
    .max_frames = 4000000,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static unsigned stored;
    struct ingest_identity id = {NULL, NULL, {NULL}, 0};
    char msg[512];

    /* Half the inputs name their service in the "query string", half must
     * carry it in their labels. */
    if (size && data[0] & 1)
        id.service = "fuzz";
    if (ingest__profile(st, data, size, &id, &lim, msg, sizeof(msg)) != 202 || ++stored % 64)
        return 0;
    struct store_query q = {.app = "fuzz", .from_ns = 0, .to_ns = INT64_MAX};
    struct store_merged *m = NULL;
    if (store__merge(st, &q, &m) == 0) {
        struct buf out;
        buf__init(&out, 256u << 20);
        if (query__write_flamegraph(m, 100, &out) == 0)
            buf__reset(&out);
        if (query__write_collapsed(m, &out) == 0)
            buf__reset(&out);
        buf__free(&out);
        store_merged__free(m);
    }
    return 0;
}
