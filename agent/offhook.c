#include "offhook.h"

#include <bpf/libbpf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "../common/clock.h"
#include "../common/log.h"
#include "bpf/sample.h"

struct offhook {
    struct bpf_program *prog;
    uint64_t *word;
    struct offduty *duty;
    struct bpf_link *link; /* while attached */
    bool watching;         /* *word names a slot */
    uint64_t resumed_ns;   /* when watching last began again */
    uint64_t slots, watched, attaches, attach_ns, detaches, detach_ns;
};

/* Begins slot d: the word is written after the attach and zeroed before
 * the detach, so the program watches exactly while it names a slot. */
static void apply(struct offhook *h, const struct offduty_slot *d)
{
    uint64_t t0 = clock__mono_ns();

    h->slots++;
    if (!d->watched) {
        __atomic_store_n(h->word, 0, __ATOMIC_RELEASE);
        h->watching = false;
        if (h->link) {
            bpf_link__destroy(h->link);
            h->link = NULL;
            h->detaches++;
            h->detach_ns += clock__mono_ns() - t0;
        }
        return;
    }
    if (!h->link) {
        h->link = bpf_program__attach(h->prog);
        if (!h->link) {
            /* The slot goes unwatched; the next watched one tries again. */
            log_warn("sampler: cannot attach the off-CPU hook: %s", strerror(errno));
            return;
        }
        h->attaches++;
        h->attach_ns += clock__mono_ns() - t0;
    }
    __atomic_store_n(h->word, CX_OFF_DUTY(d->id, d->f16), __ATOMIC_RELEASE);
    h->watched++;
    if (!h->watching)
        h->resumed_ns = clock__mono_ns(); /* after the store: blocks since are sure */
    h->watching = true;
}

struct offhook *offhook__start(struct bpf_program *prog, uint64_t *word,
                               const struct offduty_opts *o)
{
    struct offhook *h = calloc(1, sizeof(*h));
    struct offduty_slot first;
    uint64_t seed = 0;

    if (!h)
        return NULL;
    h->prog = prog;
    h->word = word;
    if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != sizeof(seed))
        seed = clock__mono_ns() * 0x9e3779b97f4a7c15ull;
    h->duty = offduty__new(o, seed, clock__mono_ns(), offduty__read_ctxt(NULL), &first);
    if (!h->duty) {
        free(h);
        errno = ENOMEM;
        return NULL;
    }
    apply(h, &first);
    if (!h->link) {
        int e = errno;
        offduty__free(h->duty);
        free(h);
        errno = e;
        return NULL;
    }
    return h;
}

uint64_t offhook__due_ns(const struct offhook *h)
{
    return offduty__due_ns(h->duty);
}

void offhook__step(struct offhook *h, uint64_t now_ns)
{
    struct offduty_slot d;

    if (now_ns >= offduty__due_ns(h->duty) &&
        offduty__tick(h->duty, now_ns, offduty__read_ctxt(NULL), &d))
        apply(h, &d);
}

bool offhook__watched_since(const struct offhook *h, uint64_t t_ns)
{
    return h->watching && t_ns >= h->resumed_ns;
}

void offhook__free(struct offhook *h)
{
    if (!h)
        return;
    log_info("sampler: off-CPU duty cycle: %llu slots, %llu watched; %llu attaches, %.0f us each, "
             "%llu detaches, %.0f us each",
             (unsigned long long)h->slots, (unsigned long long)h->watched,
             (unsigned long long)h->attaches, h->attaches ? h->attach_ns / 1e3 / h->attaches : 0.0,
             (unsigned long long)h->detaches, h->detaches ? h->detach_ns / 1e3 / h->detaches : 0.0);
    bpf_link__destroy(h->link);
    offduty__free(h->duty);
    free(h);
}
