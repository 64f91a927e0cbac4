/* A small JSON writer into a capped buffer. Callers emit the punctuation
 * they need; json__str escapes a string (UTF-8 passes through, control
 * characters and quotes are escaped, invalid bytes become U+FFFD). */
#ifndef CODEXRAY_COMMON_JSON_H
#define CODEXRAY_COMMON_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

/* Each returns 0 or buf__append's error; once one fails the buffer is left
 * as it was cut, and later calls fail the same way. */
int json__raw(struct buf *b, const char *s);
int json__str(struct buf *b, const char *s);
int json__strn(struct buf *b, const char *s, size_t n);
int json__i64(struct buf *b, int64_t v);
int json__f64(struct buf *b, double v);

#endif
