/* Options from four places, later ones winning: the built-in default, the
 * config file (`key = value` lines, # comments), CODEXRAY_* environment
 * variables, then command-line flags.
 *
 * One definition names an option everywhere: "sample-rate" is the flag
 * --sample-rate, the file key sample_rate (or sample-rate) and the
 * variable CODEXRAY_SAMPLE_RATE.
 */
#ifndef CODEXRAY_COMMON_CONFIG_H
#define CODEXRAY_COMMON_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum config_type { CONFIG_STRING, CONFIG_INT, CONFIG_BOOL };

struct config_def {
    const char *name; /* flag spelling, without the dashes */
    enum config_type type;
    const char *def; /* default, as text; NULL = unset */
    long min, max;   /* CONFIG_INT bounds */
    const char *metavar;
    const char *help;
};

struct config;

/* defs must outlive the config. Returns NULL when out of memory. */
struct config *config__new(const struct config_def *defs, size_t n);
/* c may be NULL. */
void config__free(struct config *c);

/* Reads `key = value` lines. A missing file is fine unless must_exist.
 * Returns 0, or -1 with a message in err (unknown key, bad value, unreadable). */
int config__load_file(struct config *c, const char *path, bool must_exist, char *err,
                      size_t errlen);
/* Reads CODEXRAY_<NAME> for every option. Returns 0, or -1 with a message. */
int config__load_env(struct config *c, char *err, size_t errlen);
/* Reads --name VALUE, --name=VALUE and, for booleans, bare --name (true)
 * and bare --no-name (false). Every argument must be a known flag. Returns
 * 0, or -1 with a message. */
int config__load_args(struct config *c, int argc, char **argv, char *err, size_t errlen);

/* All four sources in order: defaults, the file named by the "config" option
 * (which itself may come from the environment or a flag; a missing file is
 * an error only when named), CODEXRAY_* variables, flags. Returns 0, or -1
 * with a message. */
int config__load_all(struct config *c, int argc, char **argv, char *err, size_t errlen);

/* Scans argv for --help/-h (returns 1) or --version (returns 2); else 0. */
int config__wants_help_or_version(int argc, char **argv);

/* The value of option `name`, which must be defined. Strings may be NULL. */
const char *config__str(const struct config *c, const char *name);
long config__int(const struct config *c, const char *name);
bool config__bool(const struct config *c, const char *name);
/* True when the value came from somewhere other than the default. */
bool config__is_set(const struct config *c, const char *name);

/* Prints one line per option: flag, metavar, help and default. */
void config__usage(const struct config_def *defs, size_t n, FILE *f);

#endif
