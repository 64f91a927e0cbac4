/* Small string helpers. */
#ifndef CODEXRAY_COMMON_STR_H
#define CODEXRAY_COMMON_STR_H

#include <stddef.h>
#include <string.h>

/* Copies src into dst[0..len), always NUL-terminated when len > 0, cutting
 * what does not fit. Returns strlen(src), so a result >= len means cut. */
static inline size_t str__copy(char *dst, size_t len, const char *src)
{
    size_t n = strlen(src);

    if (len) {
        size_t k = n < len - 1 ? n : len - 1;
        memcpy(dst, src, k);
        dst[k] = '\0';
    }
    return n;
}

#endif
