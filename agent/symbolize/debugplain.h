/* Debug files whose DWARF sections are compressed (SHF_COMPRESSED: Debian's
 * libc6-dbg, objcopy --compress-debug-sections), kept decompressed on disk.
 *
 * libdw decompresses every compressed section into the heap when it opens
 * such a file and keeps it there as long as the file is open: libc's debug
 * file alone was 10 MiB of the agent's heap. Here the file is decompressed
 * once into a directory of the agent's, by build id, and libdw is given that
 * copy: its sections are then file pages, read through the mapping and
 * handed back after each window like every other binary's
 * (binary__drop_image).
 */
#ifndef CODEXRAY_DEBUGPLAIN_H
#define CODEXRAY_DEBUGPLAIN_H

#include <stddef.h>
#include <stdint.h>

struct debugplain;

/* A cache of decompressed copies in dir (created, mode 0700), holding at
 * most max_bytes (the least recently used copies go first); a file whose
 * copy would take more than half of it is left compressed. NULL with the
 * reason in err when dir cannot be made. */
struct debugplain *debugplain__new(const char *dir, uint64_t max_bytes, char *err, size_t errlen);

/* Given fd, a debug file just found (opened read-only), returns a
 * descriptor of its decompressed copy, made now if there is none yet, and
 * closes fd; or fd itself when there is nothing to gain or it cannot be
 * done (no compressed section, no build id, not a 64-bit ELF file of this
 * machine's byte order, a section that does not decompress to its stated
 * size, a copy over the bound, a full disk): the reason is then logged at
 * debug level. A copy is written under a temporary name and renamed, so a
 * reader never sees half of one; one found is checked (its build id, its
 * sections inside it) before it is used. want_id (lowercase hex; NULL:
 * any): the build id fd's file must have for a copy to be given. p NULL:
 * fd. */
int debugplain__swap(struct debugplain *p, int fd, const char *want_id);

/* Copies made and copies reused since p was made. */
void debugplain__counts(const struct debugplain *p, uint64_t *made, uint64_t *reused);

void debugplain__free(struct debugplain *p);

#endif
