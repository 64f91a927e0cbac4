/* Writes profiles as files: `--output-dir` and `record --output`. */
#ifndef CODEXRAY_AGENT_OUTPUT_H
#define CODEXRAY_AGENT_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Writes data to path whole or not at all (a temporary file renamed into
 * place), so a reader never sees half a profile. With durable, the data is
 * on disk (fsync) before the rename; without, a crash of the machine may
 * lose the file, never corrupt it. Returns 0 or -errno. */
int output__write_file(const char *path, const void *data, size_t len, bool durable);

/* The file name for one process's window: SERVICE.PID.YYYYmmddTHHMMSSZ.pb.gz,
 * the service reduced to [A-Za-z0-9._-]. Returns 0, or -ENAMETOOLONG. */
int output__profile_name(char *out, size_t len, const char *dir, const char *service, uint32_t pid,
                         uint64_t start_ns);

#endif
