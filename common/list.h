/* Lists given as one option value (--clickhouse URL,URL, --debuginfod and
 * --debuginfod-upstream URLS, DEBUGINFOD_URLS): every list-valued flag, config
 * key and variable of the agent and the server is read by list__split, so
 * they all follow one rule.
 *
 * The rule: entries are separated by commas and/or whitespace (space, tab,
 * newline); each entry is what is between two separators, so it has no
 * surrounding spaces. Empty entries (",,", a leading or a trailing comma,
 * "a, ,b") are skipped. At most LIST_MAX_ENTRIES entries of at most
 * LIST_MAX_ENTRY bytes each, from a value of at most LIST_MAX_TEXT bytes; a
 * control character in an entry is refused. A list with no entry at all is
 * not an error here: the caller says whether its flag needs one.
 */
#ifndef CODEXRAY_COMMON_LIST_H
#define CODEXRAY_COMMON_LIST_H

#include <stddef.h>

#define LIST_MAX_TEXT 65536
#define LIST_MAX_ENTRIES 256
#define LIST_MAX_ENTRY 2048

/* Entries, each a NUL-terminated copy owned by the list. */
struct list;

/* Splits text (NULL reads as "") by the rule above. Returns the list, which
 * the caller frees with list__free, or NULL with the reason in err: out of
 * memory, too long, too many entries, an entry too long or with a control
 * character. err never names the option: the caller prefixes its name
 * ("--clickhouse: " + err). */
struct list *list__split(const char *text, char *err, size_t errlen);

/* The number of entries, 0 for NULL. */
size_t list__count(const struct list *l);

/* Entry i (i < list__count), valid until list__free. */
const char *list__get(const struct list *l, size_t i);

/* Reads every entry as a URL: trailing slashes are dropped ("http://h:8123/"
 * becomes "http://h:8123"), then each must be SCHEME://HOST... (or
 * file:///PATH) with a scheme
 * from schemes (a NULL-terminated array of names such as "http", compared
 * without case), or any scheme of letters, digits, +, - and . when schemes is
 * NULL. Returns 0, or -1 with the first bad entry named in err (the entries
 * before it may already be trimmed). */
int list__urls(struct list *l, const char *const *schemes, char *err, size_t errlen);

/* The entries joined by sep, as a new string the caller frees; "" for an
 * empty list. NULL when out of memory. */
char *list__join(const struct list *l, char sep);

/* list__split, list__urls and list__join in one, for a list of URLs handed
 * on as text (DEBUGINFOD_URLS): a new string the caller frees, "" when text
 * has no entry, or NULL with the reason in err (not naming the option). */
char *list__join_urls(const char *text, const char *const *schemes, char sep, char *err,
                      size_t errlen);

/* l may be NULL. */
void list__free(struct list *l);

#endif
