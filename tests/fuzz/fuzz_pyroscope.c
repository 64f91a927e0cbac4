/* libFuzzer target for server/pyroscope.c, the readers of what POST
 * /ingest takes from a Pyroscope client: the first byte picks the reader,
 * the rest is its input (a name, a from/until value, a multipart body
 * whose first line is its Content-Type, folded lines), a name's other labels
 * taken by the store's labels text. Each must keep its
 * header's promises or refuse with a reason. Built with ASan and UBSan
 * (make fuzz):
 *   build/fuzz/fuzz_pyroscope [-max_total_time=60] CORPUS_DIR... */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../server/pyroscope.h"
#include "../../server/store_common.h"

#define MAX 256

static char *cstr(const uint8_t *d, size_t n)
{
    char *s = malloc(n + 1);
    if (!s)
        abort();
    memcpy(s, d, n);
    s[n] = '\0';
    return s;
}

static void check_name(const char *text)
{
    struct pyro_name n;
    char msg[256];

    if (pyro_name__parse(text, MAX, &n, msg, sizeof(msg))) {
        if (!msg[0] || n.copy)
            abort();
        return;
    }
    if (!n.app || !*n.app || strlen(n.app) > MAX || n.nlabels > PYRO_MAX_LABELS)
        abort();
    for (size_t i = 0; i < n.nlabels; i++) {
        const char *k = n.labels[i].key, *v = n.labels[i].value;
        if (!*k || strlen(k) > MAX || strlen(v) > MAX || strpbrk(v, "{}=,") ||
            strspn(k, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") !=
                strlen(k))
            abort();
        for (size_t j = 0; j < i; j++)
            if (strcmp(k, n.labels[j].key) == 0)
                abort();
    }
    /* The other labels: within store.h's rules, or refused with a reason;
     * what is taken, the store takes (store_profile__labels_text). */
    struct store_label other[STORE_MAX_LABELS];
    size_t nother = 0;
    msg[0] = '\0';
    if (pyro_name__labels(&n, n.nlabels & 1, other, &nother, msg, sizeof(msg))) {
        if (!msg[0])
            abort();
    } else {
        struct store_profile p = {.app = n.app, .labels = other, .nlabels = nother};
        struct buf b;
        buf__init(&b, 1 << 20);
        if (nother > STORE_MAX_LABELS || store_profile__labels_text(&b, &p))
            abort();
        buf__free(&b);
    }
    pyro_name__free(&n);
}

static void check_multipart(const uint8_t *d, size_t n)
{
    const uint8_t *nl = memchr(d, '\n', n);
    if (!nl)
        return;
    char *ct = cstr(d, nl - d), msg[256];
    const uint8_t *body = nl + 1;
    size_t len = n - (nl + 1 - d), plen = 0;
    const void *part = NULL;
    int e = pyro_multipart__part(body, len, ct, "profile", &part, &plen, msg, sizeof(msg));
    if (e == 0 && ((const uint8_t *)part < body || (const uint8_t *)part + plen > body + len))
        abort();
    if (e && e != -ENOENT && e != -EINVAL && e != -E2BIG)
        abort();
    free(ct);
}

static void check_folded(const uint8_t *d, size_t n)
{
    struct pyro_folded_limits lim = {1000, 64, 256, 4096};
    struct buf out;
    char msg[256] = "";

    buf__init(&out, 1u << 20);
    int e = pyro_folded__to_pprof(d, n, 10000000, 1700000000000000000ll, 10000000000ll, &lim, &out,
                                  msg, sizeof(msg));
    if (e == 0 && out.len == 0)
        abort();
    if ((e == -EINVAL || e == -E2BIG) && !msg[0])
        abort();
    buf__free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const uint8_t *d = data + 1;
    size_t n = size - 1;
    switch (data[0] % 4) {
    case 0: {
        char *s = cstr(d, n);
        check_name(s);
        free(s);
        break;
    }
    case 1: {
        char *s = cstr(d, n);
        int64_t ns = -1;
        if (pyro_time__parse(s, &ns) == 0 && (ns < 0 || !*s))
            abort();
        free(s);
        break;
    }
    case 2:
        check_multipart(d, n);
        break;
    default:
        check_folded(d, n);
    }
    return 0;
}
