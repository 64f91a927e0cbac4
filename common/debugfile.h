/* Debug files fetched by build id (the debuginfod protocol), shared by the
 * agent's client and the server's cache: what comes back is checked before
 * it is used, and the directories that keep them stay within a bound.
 *
 * Nothing here touches the network; everything is plain files.
 */
#ifndef CODEXRAY_COMMON_DEBUGFILE_H
#define CODEXRAY_COMMON_DEBUGFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libelf.h>

/* Longest build id accepted, in hex digits (64 bytes: more than any linker
 * writes; sha1 ids are 40 digits). */
#define DEBUGFILE_ID_MAX 128

/* True when s is a build id as the protocol spells it: lowercase hex, an
 * even number of digits, 8 to DEBUGFILE_ID_MAX of them. Anything else (a
 * "..", a slash, uppercase, a NUL-cut string) is refused, so an id can be
 * put into a path as it is. */
bool debugfile__valid_id(const char *s);

/* Checks the ELF file open at fd before it is used: at most max_bytes, an
 * ELF file whose section headers and sections lie inside it (a truncated
 * download fails here), carrying the GNU build id want_id (hex). Reads with
 * pread (no mapping: a file cut short under us cannot raise SIGBUS).
 * Returns 0, or -1 with the reason in why. */
int debugfile__check(int fd, const char *want_id, uint64_t max_bytes, char *why, size_t whylen);

/* Deletes the least recently used regular files directly in dir (oldest
 * mtime first; users of a file touch it) until the files there take at
 * most max_bytes. Files whose name starts with '.' (being written) are
 * counted but kept. Returns how many were deleted, or -1 when dir cannot be
 * read. */
int debugfile__trim(const char *dir, uint64_t max_bytes);

/* The GNU build id in the notes d holds (a PT_NOTE segment's or a SHT_NOTE
 * section's), as lowercase hex into out (DEBUGFILE_ID_MAX + 1 bytes);
 * false when there is none (or a longer one). */
bool debugfile__note_build_id(Elf_Data *d, char *out);

/* mkdir -p with mode 0700: 0, or -1 with errno (path longer than 4 KiB:
 * -1). */
int debugfile__mkdir_p(const char *path);

/* "a/b", malloc'd; NULL when out of memory. */
char *debugfile__join(const char *a, const char *b);

/* Removes libdebuginfod's config files (cache_clean_interval_s,
 * max_unused_age_s, cache_miss_s) from its cache directory client_dir: call
 * it before each debuginfod_find_*. elfutils up to 0.188 (PR29696, Debian
 * 12's) reads a non-empty one through fdopen, fclose, then close()s the fd
 * again: a close of whatever another thread opened in between under that
 * number (a spool file, a socket). Absent, the file is created empty and
 * closed once. */
void debugfile__client_config_reset(const char *client_dir);

#endif
