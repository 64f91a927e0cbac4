/* Text that comes from requests (labels, identity, anything logged): the
 * rules it must meet to be stored, and how it is written into the log so
 * that no value can start a line of its own or drive a terminal. */
#ifndef CODEXRAY_SERVER_TEXT_H
#define CODEXRAY_SERVER_TEXT_H

#include <stddef.h>

/* Why s cannot be an identity label (service, host, container_id, pod,
 * namespace, container, systemd_unit), or NULL when it can: at most max
 * bytes, valid UTF-8 (no overlong forms, surrogates or code points past
 * U+10FFFF), no control characters (C0, DEL, C1). The reason is a static
 * string ("longer than the limit", ...). s may be NULL (no problem). */
const char *text__label_problem(const char *s, size_t max);

/* s written into out[0..outlen) for a log line: printable ASCII and valid
 * UTF-8 other than control characters as they are, a backslash as \\,
 * anything else as \xNN; cut with "..." where out is too small. Always
 * NUL-terminated (outlen > 4). s may be NULL ("-"). Returns out. */
char *text__escape(char *out, size_t outlen, const char *s);

#endif
