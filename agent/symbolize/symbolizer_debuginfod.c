/* The symbolizer's debuginfod side: libdwfl's search for debug files kept
 * off the network, the symbolizer_fetcher asked about binaries that lack names, and the
 * window summary of the binaries left unnamed. */
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/debugfile.h"
#include "debuginfod.h"
#include "debuglink.h"
#include "debugplain.h"
#include "symbolizer_int.h"

/* Binaries the window summary names (those with the most unnamed frames). */
#define SUMMARY_TOP 5

struct debuginfod *symbolizer_fetcher;
struct debugplain *symbolizer_plain;

static const char *const dbg_names[] = {"not_asked", "no_build_id", "pending", "failed", "fetched"};

/* The decompressed copy of mod's debug file under /usr/lib/debug/.build-id/
 * (libdwfl's place for it, debuginfo_path being its default), when that
 * file has compressed sections; -1 otherwise. Looked for before libdwfl's
 * own search: that one opens the file it finds by build id itself and
 * keeps its own handle on it, whatever descriptor is handed back. */
static int plain_by_build_id(Dwfl_Module *mod, char **debuginfo_file_name)
{
    const unsigned char *bits;
    GElf_Addr vaddr;
    char id[DEBUGFILE_ID_MAX + 1], path[64 + DEBUGFILE_ID_MAX];
    int n = dwfl_module_build_id(mod, &bits, &vaddr), fd, got;

    if (!symbolizer_plain || n < 2 || n > DEBUGFILE_ID_MAX / 2)
        return -1;
    for (int i = 0; i < n; i++)
        snprintf(id + 2 * i, 3, "%02x", bits[i]);
    snprintf(path, sizeof(path), "/usr/lib/debug/.build-id/%.2s/%s.debug", id, id + 2);
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return -1;
    got = debugplain__swap(symbolizer_plain, fd, id);
    if (got == fd) {
        close(fd); /* nothing to gain: libdwfl finds it as it always did */
        return -1;
    }
    *debuginfo_file_name = strdup(path);
    return got;
}

/* libdwfl's search for a separate debug file. Without a symbolizer_fetcher it is
 * libdwfl's own. With one, DEBUGINFOD_URLS is set, and libdwfl's search
 * would end by asking those servers itself, in this thread: so the local
 * places are searched here (/usr/lib/debug/.build-id/, then the fetched
 * file, then .gnu_debuglink), and never the network. A file with
 * compressed sections is handed over as its decompressed copy
 * (symbolizer_plain; its name stays the one found), except one libdwfl's
 * own search found (it reads what it opened). */
int symbolizer_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
                              Dwarf_Addr base, const char *file_name, const char *debuglink_file,
                              GElf_Word debuglink_crc, char **debuginfo_file_name)
{
    struct binsyms *bs = userdata ? *userdata : NULL;
    int fd;

    if ((fd = plain_by_build_id(mod, debuginfo_file_name)) >= 0)
        return fd;
    if (!symbolizer_fetcher)
        return dwfl_standard_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file,
                                            debuglink_crc, debuginfo_file_name);
    fd = dwfl_build_id_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file,
                                      debuglink_crc, debuginfo_file_name);
    if (fd >= 0)
        return fd;
    if (bs && bs->fetched && !bs->fetched_used) {
        fd = open(bs->fetched, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            bs->fetched_used = true;
            *debuginfo_file_name = strdup(bs->fetched);
            return debugplain__swap(symbolizer_plain, fd, NULL);
        }
    }
    fd = debuglink__open(file_name, debuglink_file, debuglink_crc, debuginfo_file_name);
    return fd >= 0 ? debugplain__swap(symbolizer_plain, fd, NULL) : fd;
}

/* Asks the symbolizer_fetcher about a binary that lacks names: called after each
 * load, and again in each later window while its file is on its way.
 * Returns true when the file is here and bs should be loaded anew. */
bool symbolizer_ask_debuginfod(struct binsyms *bs, struct binary *b)
{
    char path[4096], why[256];
    size_t l;

    if (!symbolizer_fetcher || bs->broken || !bs->mod || bs->dbg == DBG_FETCHED || !bs->why[0] ||
        bs->go)
        return false;
    if (!b->build_id[0]) {
        bs->dbg = DBG_NO_ID;
        return false;
    }
    enum debuginfod_state st = debuginfod__want(symbolizer_fetcher, b->build_id, b->path, path,
                                                sizeof(path), why, sizeof(why));
    if (st == DEBUGINFOD_READY) {
        free(bs->fetched);
        bs->fetched = strdup(path);
        return bs->fetched != NULL;
    }
    bool first = bs->dbg == DBG_NOT_ASKED;
    bs->dbg = st == DEBUGINFOD_FAILED ? DBG_FAILED : DBG_PENDING;
    if (first && (l = strlen(bs->why)) < sizeof(bs->why))
        snprintf(bs->why + l, sizeof(bs->why) - l, "; %s",
                 st == DEBUGINFOD_FAILED ? "debuginfod has no debug file for it yet"
                                         : "its debug file is being fetched from debuginfod "
                                           "(named from a later window)");
    return false;
}

void symbolizer__set_debuginfod(struct symbolizer *s, struct debuginfod *d)
{
    (void)s;
    symbolizer_fetcher = d;
}

void symbolizer__set_debug_plain(struct debugplain *p)
{
    symbolizer_plain = p;
}

static int by_unnamed(const void *a, const void *b)
{
    const struct binsyms *x = *(struct binsyms *const *)a, *y = *(struct binsyms *const *)b;
    return x->unnamed_window > y->unnamed_window ? -1 : x->unnamed_window < y->unnamed_window;
}

void symbolizer__unnamed_summary(struct symbolizer *s, char *out, size_t n)
{
    struct binsyms *top[SUMMARY_TOP];
    size_t k = 0, more = 0, len = 0;

    out[0] = '\0';
    pthread_mutex_lock(&symbolizer_all_mu);
    for (size_t i = 0; i < s->nall; i++) {
        struct binsyms *bs = s->all[i];
        if (!bs->unnamed_window)
            continue;
        if (k < SUMMARY_TOP) {
            top[k++] = bs;
            continue;
        }
        /* Keep the biggest: replace the smallest held. */
        size_t min = 0;
        for (size_t j = 1; j < k; j++)
            if (top[j]->unnamed_window < top[min]->unnamed_window)
                min = j;
        more++;
        if (bs->unnamed_window > top[min]->unnamed_window)
            top[min] = bs;
    }
    qsort(top, k, sizeof(top[0]), by_unnamed);
    for (size_t j = 0; j < k && len + 1 < n; j++) {
        int w =
            snprintf(out + len, n - len, "%s%s:%llu:debuginfod=%s", j ? "," : "",
                     top[j]->name ? top[j]->name : "?", (unsigned long long)top[j]->unnamed_window,
                     symbolizer_fetcher ? dbg_names[top[j]->dbg] : "off");
        if (w < 0)
            break;
        len += (size_t)w;
    }
    if (more && len + 1 < n)
        snprintf(out + len, n - len, ",+%zu", more);
    pthread_mutex_unlock(&symbolizer_all_mu);
    if (!out[0] && n > 1)
        snprintf(out, n, "none");
}
