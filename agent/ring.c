#include "ring.h"

#include <errno.h>
#include <linux/bpf.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <unistd.h>

struct ring {
    ring_record_fn fn;
    void *ctx;
    unsigned long *consumer_pos; /* the first page, the only one writable */
    unsigned long *producer_pos; /* the second page, read-only */
    char *data;                  /* after it: the data pages, once */
    size_t bytes, page;          /* the data's size (a power of two); a page's */
    int epfd;
    char *bounce; /* a wrapped record, put together; grows to the largest */
    size_t bounce_cap;
};

struct ring *ring__new(int map_fd, size_t ring_bytes, ring_record_fn fn, void *ctx)
{
    struct ring *r = calloc(1, sizeof(*r));
    struct epoll_event ev = {.events = EPOLLIN};
    void *m;
    int e;

    if (!r)
        return NULL;
    r->fn = fn;
    r->ctx = ctx;
    r->bytes = ring_bytes;
    r->page = (size_t)sysconf(_SC_PAGESIZE);
    r->epfd = -1;
    if (ring_bytes < r->page || (ring_bytes & (ring_bytes - 1))) {
        errno = EINVAL;
        goto fail;
    }
    m = mmap(NULL, r->page, PROT_READ | PROT_WRITE, MAP_SHARED, map_fd, 0);
    if (m == MAP_FAILED)
        goto fail;
    r->consumer_pos = m;
    /* The producer's page and the data, once (libbpf maps 2 * ring_bytes). */
    m = mmap(NULL, r->page + ring_bytes, PROT_READ, MAP_SHARED, map_fd, (off_t)r->page);
    if (m == MAP_FAILED)
        goto fail;
    r->producer_pos = m;
    r->data = (char *)m + r->page;
    r->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (r->epfd < 0 || epoll_ctl(r->epfd, EPOLL_CTL_ADD, map_fd, &ev))
        goto fail;
    return r;
fail:
    e = errno;
    ring__free(r);
    errno = e;
    return NULL;
}

void ring__free(struct ring *r)
{
    if (!r)
        return;
    if (r->consumer_pos)
        munmap(r->consumer_pos, r->page);
    if (r->producer_pos)
        munmap(r->producer_pos, r->page + r->bytes);
    if (r->epfd >= 0)
        close(r->epfd);
    free(r->bounce);
    free(r);
}

/* The record of len bytes at data offset off, in one piece: in place, or
 * put together in the bounce buffer when it wraps past the end. NULL when
 * out of memory. */
static void *record_at(struct ring *r, size_t off, size_t len)
{
    size_t first = r->bytes - off;

    if (len <= first)
        return r->data + off;
    if (len > r->bounce_cap) {
        char *b = realloc(r->bounce, len);
        if (!b)
            return NULL;
        r->bounce = b;
        r->bounce_cap = len;
    }
    memcpy(r->bounce, r->data + off, first);
    memcpy(r->bounce + first, r->data, len - first);
    return r->bounce;
}

int ring__consume(struct ring *r)
{
    unsigned long cons = __atomic_load_n(r->consumer_pos, __ATOMIC_ACQUIRE), prod;
    int64_t n = 0;
    bool more;

    do {
        more = false;
        prod = __atomic_load_n(r->producer_pos, __ATOMIC_ACQUIRE);
        while (cons < prod) {
            uint32_t *hdr = (uint32_t *)(r->data + (cons & (r->bytes - 1)));
            uint32_t len = __atomic_load_n(hdr, __ATOMIC_ACQUIRE);
            if (len & BPF_RINGBUF_BUSY_BIT)
                goto done; /* reserved, not yet committed */
            more = true;
            uint32_t size = len & ~(BPF_RINGBUF_BUSY_BIT | BPF_RINGBUF_DISCARD_BIT);
            unsigned long next = cons + ((size + BPF_RINGBUF_HDR_SZ + 7) & ~7ul);
            int ret = 0;
            if (!(len & BPF_RINGBUF_DISCARD_BIT) && size <= r->bytes - BPF_RINGBUF_HDR_SZ) {
                void *rec =
                    record_at(r, (cons + BPF_RINGBUF_HDR_SZ) & (r->bytes - 1), (size_t)size);
                if (rec) {
                    ret = r->fn(r->ctx, rec, size);
                    n++;
                }
            }
            cons = next;
            __atomic_store_n(r->consumer_pos, cons, __ATOMIC_RELEASE);
            if (ret < 0)
                return ret;
        }
    } while (more);
done:
    return n > INT32_MAX ? INT32_MAX : (int)n;
}

int ring__poll(struct ring *r, int timeout_ms)
{
    struct epoll_event ev;
    int got = epoll_wait(r->epfd, &ev, 1, timeout_ms);

    if (got < 0)
        return -errno;
    return ring__consume(r);
}
