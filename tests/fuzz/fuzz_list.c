/* libFuzzer target for common/list.c, the reader of every list-valued
 * option (--clickhouse, --debuginfod, --debuginfod-upstream,
 * DEBUGINFOD_URLS): any bytes, read as a value, must come back as a list
 * that keeps list.h's promises, or be refused with a reason, at once (the
 * issue it was written for was a URL list that never finished). Built with
 * ASan and UBSan (make fuzz):
 *   build/fuzz/fuzz_list [-max_total_time=60] CORPUS_DIR...
 * What it checks of an accepted list: at most LIST_MAX_ENTRIES entries,
 * each non-empty, at most LIST_MAX_ENTRY bytes, with no separator and no
 * control character in it; the entries in the order of the input, each a
 * piece of it; joined by ',' and split again, the same list; and
 * list__urls leaves each entry without a trailing slash, or refuses it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/list.h"

static int is_sep(unsigned char c)
{
    return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static void check_entries(const struct list *l, const char *text)
{
    const char *from = text;

    if (list__count(l) > LIST_MAX_ENTRIES)
        abort();
    for (size_t i = 0; i < list__count(l); i++) {
        const char *e = list__get(l, i);
        size_t n = strlen(e);
        if (!n || n > LIST_MAX_ENTRY)
            abort();
        for (size_t j = 0; j < n; j++)
            if (is_sep((unsigned char)e[j]) || (unsigned char)e[j] < 0x20 ||
                (unsigned char)e[j] == 0x7f)
                abort();
        /* a piece of the input, after the previous one, between separators */
        const char *at = strstr(from, e);
        if (!at || (at > text && !is_sep((unsigned char)at[-1])) ||
            (at[n] && !is_sep((unsigned char)at[n])))
            abort();
        from = at + n;
    }
    if (list__get(l, list__count(l)))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    /* An option's value is a C string: it ends at its first NUL. */
    char *text = malloc(size + 1);

    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    struct list *l = list__split(text, err, sizeof(err));
    if (!l) {
        if (!err[0] || !memchr(err, '\0', sizeof(err)))
            abort();
        free(text);
        return 0;
    }
    check_entries(l, text);

    char *joined = list__join(l, ',');
    if (!joined)
        abort();
    struct list *again = list__split(joined, err, sizeof(err));
    if (!again || list__count(again) != list__count(l))
        abort();
    for (size_t i = 0; i < list__count(l); i++)
        if (strcmp(list__get(again, i), list__get(l, i)))
            abort();

    /* URLs, with and without a scheme list. */
    static const char *const http[] = {"http", "https", NULL};
    err[0] = '\0';
    if (list__urls(again, (size & 1) ? http : NULL, err, sizeof(err)) == 0) {
        for (size_t i = 0; i < list__count(again); i++) {
            const char *e = list__get(again, i);
            size_t n = strlen(e);
            if (!n || e[n - 1] == '/' || !strstr(e, "://"))
                abort();
        }
    } else if (!err[0]) {
        abort();
    }
    list__free(again);
    free(joined);
    list__free(l);
    free(text);
    return 0;
}
