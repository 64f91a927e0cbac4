#include "arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ALIGN 16
#define CHUNK_MAX ((size_t)1 << 20)
#define ALLOC_MAX ((size_t)1 << 30)

struct chunk {
    struct chunk *next;
    size_t used, size;
    /* Keeps data 16-aligned whatever the fields above. */
    _Alignas(ALIGN) unsigned char data[];
};

struct arena {
    struct chunk *top; /* where allocations go; older chunks follow */
    size_t next_size;  /* the next chunk's data bytes */
    size_t bytes;      /* every chunk's, headers included */
    void *last;        /* the last allocation, which may grow in place */
};

struct arena *arena__new(size_t first)
{
    struct arena *a = calloc(1, sizeof(*a));

    if (!a)
        return NULL;
    if (first > CHUNK_MAX)
        first = CHUNK_MAX;
    a->next_size = first < 256 ? 256 : (first + ALIGN - 1) & ~(size_t)(ALIGN - 1);
    return a;
}

void arena__free(struct arena *a)
{
    struct chunk *c, *next;

    if (!a)
        return;
    for (c = a->top; c; c = next) {
        next = c->next;
        free(c);
    }
    free(a);
}

/* A chunk with room for need bytes, made the top. A block bigger than the
 * chunks gets a chunk of its own, put under the top so the top's free room
 * is not lost. */
static struct chunk *chunk_for(struct arena *a, size_t need)
{
    size_t size = a->next_size;
    struct chunk *c;

    if (size < need)
        size = need;
    c = malloc(sizeof(*c) + size);
    if (!c)
        return NULL;
    c->used = 0;
    c->size = size;
    a->bytes += sizeof(*c) + size;
    if (size > a->next_size && a->top && a->top->size - a->top->used >= ALIGN) {
        c->next = a->top->next;
        a->top->next = c;
        return c;
    }
    c->next = a->top;
    a->top = c;
    if (a->next_size < CHUNK_MAX)
        a->next_size *= 2;
    return c;
}

void *arena__alloc(struct arena *a, size_t size)
{
    size_t need = (size + ALIGN - 1) & ~(size_t)(ALIGN - 1);
    struct chunk *c = a->top;
    void *p;

    if (size > ALLOC_MAX)
        return NULL;
    if (need == 0)
        need = ALIGN;
    if (!c || c->size - c->used < need) {
        c = chunk_for(a, need);
        if (!c)
            return NULL;
    }
    p = c->data + c->used;
    c->used += need;
    a->last = c == a->top ? p : NULL;
    return p;
}

void *arena__calloc(struct arena *a, size_t n, size_t size)
{
    void *p;

    if (size && n > ALLOC_MAX / size)
        return NULL;
    p = arena__alloc(a, n * size);
    if (p)
        memset(p, 0, n * size);
    return p;
}

void *arena__grow(struct arena *a, void *old, size_t old_size, size_t new_size)
{
    struct chunk *c = a->top;
    void *p;

    if (new_size > ALLOC_MAX)
        return NULL;
    if (old && old == a->last && c) {
        /* The top chunk's last block: extend it where it is. */
        size_t start = (size_t)((unsigned char *)old - c->data);
        size_t need = (new_size + ALIGN - 1) & ~(size_t)(ALIGN - 1);
        if (need <= c->size - start) {
            if (start + need > c->used)
                c->used = start + need;
            return old;
        }
    }
    p = arena__alloc(a, new_size);
    if (p && old)
        memcpy(p, old, old_size < new_size ? old_size : new_size);
    return p;
}

char *arena__strdup(struct arena *a, const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = arena__alloc(a, n);

    if (p)
        memcpy(p, s, n);
    return p;
}

size_t arena__bytes(const struct arena *a)
{
    return a ? a->bytes : 0;
}
