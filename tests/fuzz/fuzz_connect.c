/* libFuzzer target for server/connect_req.c, the readers of what Pyroscope's
 * querier API (POST /querier.v1.QuerierService/METHOD) takes from a
 * client: the first byte picks the reader (a request in JSON or in binary
 * protobuf, for one of the five methods, or a label selector), the rest is
 * its input. Each must keep its header's promises or refuse with a
 * reason. Built with ASan and UBSan (make fuzz):
 *   build/fuzz/fuzz_connect [-max_total_time=60] CORPUS_DIR... */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../server/connect_req.h"

static void check_strs(char **v, size_t n)
{
    if (n > CONNECT_MAX_STRS || (n && !v))
        abort();
    for (size_t i = 0; i < n; i++)
        if (!v[i] || strlen(v[i]) > CONNECT_MAX_STR)
            abort();
}

static void check_req(int method, bool json, const uint8_t *d, size_t n)
{
    struct connect_req r;
    char msg[512];

    if (connect_req__decode(method, json, d, n, &r, msg, sizeof(msg))) {
        struct connect_req zero = {0};
        if (!msg[0] || memcmp(&r, &zero, sizeof(r)))
            abort();
        return;
    }
    check_strs(r.matchers, r.nmatchers);
    check_strs(r.group_by, r.ngroup_by);
    const char *s[] = {r.profile_type, r.selector, r.name};
    for (int i = 0; i < 3; i++)
        if (s[i] && strlen(s[i]) > CONNECT_MAX_STR)
            abort();
    connect_req__free(&r);
}

static void check_sel(const uint8_t *d, size_t n)
{
    char *s = malloc(n + 1), msg[512];
    struct connect_sel sel;

    if (!s)
        abort();
    memcpy(s, d, n);
    s[n] = '\0';
    if (connect_sel__parse(s, &sel, msg, sizeof(msg))) {
        if (!msg[0] || sel.m || sel.n)
            abort();
    } else {
        if (sel.n > CONNECT_MAX_MATCHERS)
            abort();
        for (size_t i = 0; i < sel.n; i++)
            if (!sel.m[i].name || !sel.m[i].value || !strchr("=!~^", sel.m[i].op))
                abort();
        /* matching anything, absent or long, must be defined */
        connect_sel__match(&sel, "service_name", "web");
        connect_sel__match(&sel, "host", NULL);
        connect_sel__match(&sel, "host", s);
        connect_sel__free(&sel);
    }
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned pick = data[0] % 11;
    if (pick < 5)
        check_req(pick, true, data + 1, size - 1);
    else if (pick < 10)
        check_req(pick - 5, false, data + 1, size - 1);
    else
        check_sel(data + 1, size - 1);
    return 0;
}
