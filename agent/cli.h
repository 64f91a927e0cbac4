/* What main.c and record.c share. */
#ifndef CODEXRAY_AGENT_CLI_H
#define CODEXRAY_AGENT_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/config.h"

#ifndef CODEXRAY_VERSION
#define CODEXRAY_VERSION "dev"
#endif

/* SIGINT and SIGTERM set a flag that cli__stopping() reads. */
void cli__install_signals(void);
bool cli__stopping(void);

/* Applies --log-level, raises the open-files limit to its hard cap and works
 * out the host label. Returns 0, or 2 (usage) after printing why. */
int cli__common_setup(struct config *c, char *host, size_t hostlen);

struct unwinder_opts;
/* Reads --unwind and --unwind-tables-max-mb into *uo; *out is uo for cfi,
 * NULL for fp. Returns 0, or 2 (usage) after printing why. */
int cli__unwind_opts(struct config *c, struct unwinder_opts *uo, const struct unwinder_opts **out);

struct sampler_opts;
/* Reads --sample-rate and --sample-times into *so, for every process
 * (only_tgid 0) or one. Returns 0, or 2 (usage) after printing why. */
int cli__sample_opts(struct config *c, uint32_t only_tgid, struct sampler_opts *so);

/* The debuginfod options, in both the daemon's and record's tables. */
#define CLI_DEBUGINFOD_OPTS                                                                        \
    {"debuginfod",                                                                                 \
     CONFIG_STRING,                                                                                \
     NULL,                                                                                         \
     0,                                                                                            \
     0,                                                                                            \
     "URLS",                                                                                       \
     "fetch debug files of stripped binaries from these debuginfod servers (space-separated; "     \
     "default: $DEBUGINFOD_URLS, else ENDPOINT/debuginfod with --endpoint; \"none\": off)"},       \
        {"debuginfod-cache-max",                                                                   \
         CONFIG_INT,                                                                               \
         "1073741824",                                                                             \
         1048576,                                                                                  \
         1l << 42,                                                                                 \
         "BYTES",                                                                                  \
         "the debug files kept under DATA_DIR/debuginfod; past it the least used go first"},       \
        {"debuginfod-file-max",         CONFIG_INT, "536870912", 4096, 1l << 36, "BYTES",          \
         "the largest debug file taken"},                                                          \
    {                                                                                              \
        "debuginfod-timeout", CONFIG_INT, "30", 1, 3600, "SECONDS",                                \
            "a debuginfod server silent this long is given up (asked again later)"                 \
    }

struct debuginfod;
/* Starts the background debuginfod client the options ask for (see
 * CLI_DEBUGINFOD_OPTS), keeping its files under DATA_DIR/debuginfod;
 * endpoint (may be NULL) is the server the agent ships to, asked when
 * nothing else is set, with api_key. Returns NULL when it is off (and then
 * clears DEBUGINFOD_URLS, so that libdwfl never asks on its own) or cannot
 * start (logged). Call before any thread starts: it sets the environment
 * libdebuginfod reads. */
struct debuginfod *cli__debuginfod(struct config *c, const char *data_dir, const char *endpoint,
                                   const char *api_key);

/* `codexray-node-agent record ...` with the arguments after "record". */
int cli__record(int argc, char **argv);

#endif
