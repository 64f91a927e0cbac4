/* The agent's debuginfod options turned into a running client
 * (symbolize/debuginfod.h): which servers, where the files go; and where
 * compressed debug files are kept decompressed (symbolize/debugplain.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/list.h"
#include "../common/log.h"
#include "cli.h"
#include "symbolize/debuginfod.h"
#include "symbolize/debugplain.h"
#include "symbolize/symbolizer.h"

struct debuginfod *cli__debuginfod(struct config *c, const char *data_dir, const char *endpoint,
                                   const char *api_key)
{
    const char *urls = config__str(c, "debuginfod");
    const char *env = getenv("DEBUGINFOD_URLS");
    char derived[4096], dir[4096], err[512], *list = NULL;
    struct debuginfod *d = NULL;
    const char *token = NULL, *from = "--debuginfod";

    if (!urls || !*urls) {
        from = "DEBUGINFOD_URLS";
        urls = env;
    }
    if ((!urls || !*urls) && endpoint && *endpoint) {
        /* The agent's own server: it fetches once for the fleet, and no
         * node needs to reach the internet. Only it gets the API key. */
        size_t l = strlen(endpoint);
        while (l && endpoint[l - 1] == '/')
            l--;
        snprintf(derived, sizeof(derived), "%.*s/debuginfod", (int)l, endpoint);
        urls = derived;
        token = api_key;
        from = "--endpoint";
    }
    if (!urls || !*urls || strcmp(urls, "none") == 0) {
        unsetenv("DEBUGINFOD_URLS");
        log_debug("debuginfod: off (no --debuginfod, DEBUGINFOD_URLS or --endpoint)");
        return NULL;
    }
    /* Read as every list is (common/list.h; a bad --debuginfod was refused
     * by cli__common_setup), handed on space-separated as libdebuginfod
     * reads DEBUGINFOD_URLS. */
    list = list__join_urls(urls, NULL, ' ', err, sizeof(err));
    if (!list || !*list) {
        unsetenv("DEBUGINFOD_URLS");
        if (list)
            log_debug("debuginfod: off (%s has no URL)", from);
        else
            log_error("debuginfod: %s: %s; stripped binaries stay unnamed", from, err);
        goto out;
    }
    urls = list;
    snprintf(dir, sizeof(dir), "%s/debuginfod", data_dir);
    struct debuginfod_opts o = {urls,
                                dir,
                                (uint64_t)config__int(c, "debuginfod-cache-max"),
                                (uint64_t)config__int(c, "debuginfod-file-max"),
                                (unsigned)config__int(c, "debuginfod-timeout"),
                                token};
    d = debuginfod__start(&o, err, sizeof(err));
    if (!d) {
        unsetenv("DEBUGINFOD_URLS");
        log_error("debuginfod: %s; stripped binaries stay unnamed", err);
        goto out;
    }
    log_info("debuginfod: urls=\"%s\" (from %s) cache=%s/files cache_max=%ld file_max=%ld", urls,
             from, dir, config__int(c, "debuginfod-cache-max"),
             config__int(c, "debuginfod-file-max"));
out:
    free(list);
    return d;
}

struct debugplain *cli__debug_plain(const char *data_dir)
{
    char dir[4096], err[512];
    struct debugplain *p;

    snprintf(dir, sizeof(dir), "%s/debug-plain", data_dir);
    p = debugplain__new(dir, CLI_DEBUG_PLAIN_MAX, err, sizeof(err));
    if (!p)
        log_warn("symbols: compressed debug files are decompressed in memory: %s", err);
    symbolizer__set_debug_plain(p);
    return p;
}
