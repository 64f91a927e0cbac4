/* The agent's command line, for both of its modes: the one flag table, the
 * usage texts and the usage exit, signals, and the settings both modes read
 * the same way. main.c (the daemon) and record.c (the one-shot mode) use
 * it; it uses neither. */
#ifndef CODEXRAY_AGENT_CLI_H
#define CODEXRAY_AGENT_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../common/config.h"

#ifndef CODEXRAY_VERSION
#define CODEXRAY_VERSION "dev"
#endif

/* The modes, as bits: a flag of the table names the modes it belongs to. */
enum cli_mode {
    CLI_RUN = 1,    /* codexray-node-agent [FLAGS] */
    CLI_RECORD = 2, /* codexray-node-agent record ... */
};

/* A config of mode's flags, in the table's order. NULL when out of memory.
 * The caller frees it with config__free. */
struct config *cli__config_new(enum cli_mode mode);

/* Prints mode's usage (its synopsis and flags) to f. */
void cli__usage(enum cli_mode mode, FILE *f);

/* The usage exit: "PROGRAM: why", then the usage, on stderr. Returns 2, the
 * exit status of a usage error. */
int cli__usage_error(enum cli_mode mode, const char *why);

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

struct debuginfod;
/* Starts the background debuginfod client the --debuginfod* flags ask for,
 * keeping its files under DATA_DIR/debuginfod; endpoint (may be NULL) is
 * the server the agent ships to, asked when nothing else is set, with
 * api_key. Returns NULL when it is off (and then clears DEBUGINFOD_URLS, so
 * that libdwfl never asks on its own) or cannot start (logged). Call before
 * any thread starts: it sets the environment libdebuginfod reads
 * (cli_debuginfod.c). */
struct debuginfod *cli__debuginfod(struct config *c, const char *data_dir, const char *endpoint,
                                   const char *api_key);

/* The bound of DATA_DIR/debug-plain: libc6-dbg's libc, libm and ld.so take
 * 15 MiB there; a copy over half of it is not made. */
#define CLI_DEBUG_PLAIN_MAX (256ull << 20)

struct debugplain;
/* Keeps compressed debug files decompressed under DATA_DIR/debug-plain
 * (symbolize/debugplain.h) for every symbolizer; NULL (logged) when that
 * directory cannot be made: libdw then decompresses them in memory, as
 * before. Call before the first symbolizer is made; free the result after
 * the last one. */
struct debugplain *cli__debug_plain(const char *data_dir);

#endif
