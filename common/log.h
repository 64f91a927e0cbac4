/* Logging on stderr, one event a line:
 *   2026-12-03T12:00:00.123Z info  sampler: started sample_rate_hz=100 cpus=2
 * Safe to call from any thread: each line is written with one write(2).
 */
#ifndef CODEXRAY_COMMON_LOG_H
#define CODEXRAY_COMMON_LOG_H

enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR };

/* Lines below `level` are dropped. Default LOG_INFO. */
void log__set_level(enum log_level level);
/* Parses "debug", "info", "warn" or "error"; returns -1 for anything else. */
int log__parse_level(const char *s, enum log_level *out);

void log__msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_debug(...) log__msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log__msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log__msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log__msg(LOG_ERROR, __VA_ARGS__)

#endif
