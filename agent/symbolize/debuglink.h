/* A binary's separate debug file named by its .gnu_debuglink, looked for
 * where libdwfl looks: beside the binary, in .debug/ beside it, and under
 * /usr/lib/debug/ plus the binary's directory.
 *
 * libdwfl's own search (dwfl_standard_find_debuginfo) ends by asking the
 * debuginfod servers of DEBUGINFOD_URLS, synchronously; once the agent has
 * set that variable for its background client (debuginfod.h), the
 * symbolizer searches with this instead, which never leaves the disk.
 */
#ifndef CODEXRAY_AGENT_SYMBOLIZE_DEBUGLINK_H
#define CODEXRAY_AGENT_SYMBOLIZE_DEBUGLINK_H

#include <stdint.h>

/* file is the binary's path, link the name in its .gnu_debuglink (an
 * absolute path is tried as it is), crc its CRC-32 (0: not checked). A
 * candidate that is the binary itself, or whose CRC differs, is skipped.
 * Returns an open fd and sets *path (the caller frees it), or -1. */
int debuglink__open(const char *file, const char *link, uint32_t crc, char **path);

#endif
