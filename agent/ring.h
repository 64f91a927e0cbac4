/* The consumer side of a BPF ring buffer (BPF_MAP_TYPE_RINGBUF), mapping
 * its data pages once.
 *
 * libbpf's consumer (ring_buffer__new) maps the data area twice in a row so
 * that a record that wraps past the end reads as one piece; the kernel maps
 * every page of both at once, so the agent's RSS counted a 4 MiB ring as
 * 8 MiB at every moment. Here the data is mapped once and a record that
 * wraps (a few in each ring's turn) is copied into a buffer of its own.
 * The layout read is the kernel's (include/uapi/linux/bpf.h: an 8-byte
 * header, BPF_RINGBUF_BUSY_BIT and BPF_RINGBUF_DISCARD_BIT in its length,
 * records rounded up to 8 bytes), as libbpf reads it.
 */
#ifndef CODEXRAY_AGENT_RING_H
#define CODEXRAY_AGENT_RING_H

#include <stddef.h>

struct ring;

/* Called for each record, in order; a negative return stops the reading
 * (the record is consumed) and is returned. data is valid only during the
 * call. */
typedef int (*ring_record_fn)(void *ctx, void *data, size_t size);

/* The consumer of the ring buffer map map_fd, whose data is ring_bytes
 * (its max_entries: a power of two, at least a page). NULL with errno set
 * when it cannot be mapped. */
struct ring *ring__new(int map_fd, size_t ring_bytes, ring_record_fn fn, void *ctx);

/* Waits up to timeout_ms (-1: no limit) for the kernel's wake-up, then
 * reads every record committed. Returns how many were read, or a negative
 * errno (-EINTR when a signal came). */
int ring__poll(struct ring *r, int timeout_ms);

/* Reads every record committed, without waiting. Returns how many were
 * read, or the callback's negative return. */
int ring__consume(struct ring *r);

void ring__free(struct ring *r);

#endif
