/* Entries of the BPF "file_unwind" map (bpf/unwind.h): a loaded table by
 * the file the kernel maps, for the walk's bpf_find_vma fallback. */
#ifndef CODEXRAY_AGENT_UNWIND_FILE_UNWIND_H
#define CODEXRAY_AGENT_UNWIND_FILE_UNWIND_H

#include <stdbool.h>
#include <stdint.h>

#include <linux/types.h>

#include "../bpf/unwind.h"
#include "../symbolize/binary.h"

/* The key of a mapping as /proc/PID/maps shows it (major:minor inode):
 * the device in the kernel's encoding, as the walk reads it from the
 * mapping's inode. */
struct cx_file_key file_unwind__key(uint32_t dev_major, uint32_t dev_minor, uint64_t inode);

/* The entry of a table in slot `table` of `blocks` blocks, whose rows are
 * relative to `base`, for a binary with executable segments segs: false
 * when it has none. */
bool file_unwind__value(uint32_t table, uint32_t blocks, uint64_t base,
                        const struct binary_seg *segs, unsigned nseg, struct cx_file_unwind *out);

#endif
