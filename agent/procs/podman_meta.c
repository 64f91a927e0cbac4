#include "podman_meta.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/buf.h"
#include "../../common/str.h"
#include "json_scan.h"

/* containers.json lists every container of the storage, about 500 bytes
 * each: past this the containers listed later go by their short id. */
#define CONTAINERS_JSON_MAX (8u << 20)
#define PASSWD_MAX (4u << 20)
#define PATH_LEN 4096

bool podman_meta__name(const char *storage_root, const char *cid, char *out, size_t len)
{
    char path[PATH_LEN];
    const char *obj;
    size_t objlen;
    struct buf b;
    bool found = false;

    if (snprintf(path, sizeof(path), "%s/overlay-containers/containers.json", storage_root) >=
        (int)sizeof(path))
        return false;
    buf__init(&b, CONTAINERS_JSON_MAX);
    int r = buf__read_file(&b, AT_FDCWD, path);
    if ((r == 0 || r == -E2BIG) && b.data &&
        json_scan__find_object(b.data, b.len, "id", cid, &obj, &objlen))
        found = json_scan__top_string(obj, objlen, "names", out, len) && out[0];
    buf__free(&b);
    return found;
}

/* The home directory of uid in the text of a passwd file. */
static bool passwd_home(const char *s, size_t n, unsigned uid, char *out, size_t len)
{
    for (size_t i = 0; i < n;) {
        const char *line = s + i, *nl = memchr(line, '\n', n - i);
        size_t ll = nl ? (size_t)(nl - line) : n - i;
        const char *f[7];
        size_t nf = 0;

        i += ll + 1;
        f[nf++] = line;
        for (const char *p = line; p < line + ll && nf < 7; p++) {
            if (*p == ':')
                f[nf++] = p + 1;
        }
        if (nf < 7)
            continue;
        char *end;
        unsigned long u = strtoul(f[2], &end, 10);
        if (end == f[2] || *end != ':' || u != uid)
            continue;
        size_t hl = (size_t)(f[6] - 1 - f[5]);
        if (hl == 0 || hl >= len || f[5][0] != '/')
            return false;
        memcpy(out, f[5], hl);
        out[hl] = '\0';
        /* The home becomes part of a path under the host's root: no way out. */
        return strstr(out, "..") == NULL;
    }
    return false;
}

bool podman_meta__home(const char *host_root, unsigned uid, char *out, size_t len)
{
    char path[PATH_LEN];
    struct buf b;
    bool found;

    if (snprintf(path, sizeof(path), "%s/etc/passwd", host_root) >= (int)sizeof(path))
        return false;
    buf__init(&b, PASSWD_MAX);
    int r = buf__read_file(&b, AT_FDCWD, path);
    found = (r == 0 || r == -E2BIG) && b.data && passwd_home(b.data, b.len, uid, out, len);
    buf__free(&b);
    return found;
}

bool podman_meta__user_storage(const char *host_root, unsigned uid, char *out, size_t len)
{
    char home[PATH_LEN];

    return podman_meta__home(host_root, uid, home, sizeof(home)) &&
           snprintf(out, len, "%s%s/.local/share/containers/storage", host_root, home) < (int)len;
}
