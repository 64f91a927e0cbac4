/* Just enough JSON reading for the files container runtimes keep on a node
 * (Docker's config.v2.json, containers/storage's containers.json): a
 * member's string value at the top level of an object, and the object of a
 * top-level array that has a given member. No allocation, no recursion;
 * strings are skipped whole, so a key or brace inside a value (an
 * environment variable, say) is never taken for structure. */
#ifndef CODEXRAY_AGENT_PROCS_JSON_SCAN_H
#define CODEXRAY_AGENT_PROCS_JSON_SCAN_H

#include <stdbool.h>
#include <stddef.h>

/* The value of the member `key` of the object that is the text s[0..n): a
 * string, or the first element of an array of strings ("names": ["web"]).
 * Decoded into out (at most outlen bytes, NUL included; escapes other than
 * \" \\ \/ and ASCII \uXXXX become '?'). Members of nested objects do not
 * count. Returns false when there is no such member or it is not a string,
 * leaving out unspecified. */
bool json_scan__top_string(const char *s, size_t n, const char *key, char *out, size_t outlen);

/* In the text s[0..n) whose top level is an array of objects, the first
 * object whose member `key` is the string `value` (compared after
 * decoding). Sets *obj and *objlen to that object's text, braces included.
 * Returns false when none matches or the text ends first. */
bool json_scan__find_object(const char *s, size_t n, const char *key, const char *value,
                            const char **obj, size_t *objlen);

/* The value of the member `key` of the object that is the text s[0..n)
 * when it is an object ("annotations": {...}): sets *obj and *objlen to its
 * text, braces included. Returns false when there is no such member, it is
 * not an object, or the text ends before it does. */
bool json_scan__top_object(const char *s, size_t n, const char *key, const char **obj,
                           size_t *objlen);

#endif
