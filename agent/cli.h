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

/* `codexray-node-agent record ...` with the arguments after "record". */
int cli__record(int argc, char **argv);

#endif
