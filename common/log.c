#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static enum log_level min_level = LOG_INFO;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

void log__set_level(enum log_level level)
{
    min_level = level;
}

int log__parse_level(const char *s, enum log_level *out)
{
    for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
        if (strcmp(s, level_names[i]) == 0) {
            *out = (enum log_level)i;
            return 0;
        }
    }
    return -1;
}

void log__msg(enum log_level level, const char *fmt, ...)
{
    char line[4096];
    struct timespec ts;
    struct tm tm;
    va_list ap;
    int n, m;

    if (level < min_level)
        return;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s ",
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                 ts.tv_nsec / 1000000, level_names[level]);
    va_start(ap, fmt);
    m = vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        m = 0;
    n += m;
    if (n > (int)sizeof(line) - 2)
        n = sizeof(line) - 2; /* cut, but still one line */
    line[n++] = '\n';
    /* One write per line keeps lines from threads whole. */
    if (write(STDERR_FILENO, line, n) < 0) {
        /* Nowhere left to say it. */
    }
}
