/* Podman's names for its containers, from the containers/storage metadata
 * it keeps on the node: overlay-containers/containers.json under the
 * storage root, /var/lib/containers/storage for root's containers and
 * ~/.local/share/containers/storage for a user's (rootless). Read capped,
 * without following a final symlink. */
#ifndef CODEXRAY_AGENT_PROCS_PODMAN_META_H
#define CODEXRAY_AGENT_PROCS_PODMAN_META_H

#include <stdbool.h>
#include <stddef.h>

/* The name of the container `cid` (64 hex digits) in the storage under
 * storage_root: the first of its "names". Returns false when the file,
 * the container or its name cannot be found. */
bool podman_meta__name(const char *storage_root, const char *cid, char *out, size_t len);

/* The home directory of user `uid` in host_root/etc/passwd, as the host
 * sees it (without host_root): absolute, without "..". Returns false when
 * the user or a usable home is not found. */
bool podman_meta__home(const char *host_root, unsigned uid, char *out, size_t len);

/* The storage root of the rootless containers of user `uid` on the node
 * whose root is host_root ("" or "/proc/1/root"): the user's home from
 * host_root/etc/passwd, then HOME/.local/share/containers/storage, all under
 * host_root. Returns false when the user or a usable home is not found. */
bool podman_meta__user_storage(const char *host_root, unsigned uid, char *out, size_t len);

#endif
