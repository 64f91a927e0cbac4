/* The identity of a stack, and of a function, in 122 bits; and a table from
 * identities to ids.
 *
 * Ingest meets each of a profile's stacks (5,000 in a busy process's
 * minute) and must find its id among every stack stored. Comparing whole
 * stacks costs a walk over their frames and several cache misses a lookup;
 * instead each stack gets a key computed while its frames are decoded, and
 * keys are looked up in a table that holds them inline.
 *
 * A function's key hashes its name and file, as one sequence of values
 * (7-byte chunks marked with bit 56, each string ended by its length + 1,
 * so no two (name, file) pairs give the same sequence), by Horner's rule
 * modulo the prime P = 2^61 - 1 with secret bases C and D, one lane each.
 * A stack's key is, in each lane, with secret bases A and B:
 *
 *     sum over frames i = 0.. (leaf first) of (function key[i] + 1) * A^i   (mod P)
 *
 * Two different values of n terms hash alike in one lane for at most n of
 * the P possible bases (their difference is a non-zero polynomial of degree
 * < n). So two different functions share a key with probability at most
 * (m / 2^61)^2 for m chunks, and two different stacks of at most n frames,
 * their functions' keys distinct, with probability at most (n / 2^61)^2:
 * about 2^-100 for a stack of 2,048 frames. The bases are drawn once when a
 * store is made and kept in it.
 *
 * The sum splits by location: a pprof location with inlined frames adds
 * (sum over its frames j of (key_j + 1) * A^j) * A^offset, so the part of
 * each location is computed once per profile, and each frame of a sample
 * costs one multiplication a lane as it is decoded.
 */
#ifndef CODEXRAY_SERVER_STACK_KEY_H
#define CODEXRAY_SERVER_STACK_KEY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STACK_KEY_P ((1ull << 61) - 1)
/* The deepest stack a key is made for, in frames (inlined ones included). */
#define STACK_KEY_MAX_FRAMES 4096
#define STACK_KEY_SLACK 64

struct stack_key {
    uint64_t a, b; /* each < STACK_KEY_P */
};

/* The bases, and powers of the stack bases. */
struct stack_hasher {
    uint64_t base_a, base_b; /* stacks */
    uint64_t base_c, base_d; /* functions' names and files */
    /* A^0 .. A^(STACK_KEY_MAX_FRAMES + STACK_KEY_SLACK), and B's, C's, D's:
     * the slack lets a caller check the depth once after a short run. */
    uint64_t *pow_a, *pow_b, *pow_c, *pow_d;
};

#define STACK_HASHER_BASES 4

/* Fills h for the bases (a, b, c, d, each in [2, P-2]). Returns 0 or -ENOMEM. */
int stack_hasher__init(struct stack_hasher *h, const uint64_t base[STACK_HASHER_BASES]);
/* h may be zeroed. */
void stack_hasher__free(struct stack_hasher *h);

/* Random bases for a new store (getrandom). Returns 0 or -errno. */
int stack_hasher__new_bases(uint64_t base[STACK_HASHER_BASES]);

/* A function's key from its name and file (lengths given: no NUL needed). */
struct stack_key stack_hasher__function(const struct stack_hasher *h, const char *name,
                                        size_t name_len, const char *file, size_t file_len);

/* One string's share of function keys, for callers that meet the same
 * string in many functions (a file, a name in several files): its hash and
 * C^m, D^m for its m values. pc is never 0. */
struct stack_strkey {
    uint64_t a, b, pc, pd;
};

struct stack_strkey stack_hasher__string(const struct stack_hasher *h, const char *s, size_t len);

/* Run of frames: what a location adds to a stack's key, as if it started
 * at offset 0, and how many frames it has. */
struct stack_part {
    uint64_t a, b;
    uint32_t nframes;
};

/* The part of frames whose function keys are keys[0..n), leaf (innermost)
 * first. n <= STACK_KEY_MAX_FRAMES. */
struct stack_part stack_hasher__part(const struct stack_hasher *h, const struct stack_key *keys,
                                     size_t n);

/* Sums parts into a stack's key: stack_sum__init, then each location's
 * part leaf first, then stack_sum__key. stack_sum__add returns false past
 * STACK_KEY_MAX_FRAMES frames. */
struct stack_sum {
    unsigned __int128 a, b;
    uint32_t offset, terms;
};

static inline void stack_sum__init(struct stack_sum *s)
{
    s->a = s->b = 0;
    s->offset = s->terms = 0;
}

static inline uint64_t stack_key__mod(unsigned __int128 x)
{
    /* 2^61 = 1 (mod P): fold the high bits onto the low ones, twice. */
    uint64_t r =
        (uint64_t)(x & STACK_KEY_P) + (uint64_t)(x >> 61 & STACK_KEY_P) + (uint64_t)(x >> 122);
    r = (r & STACK_KEY_P) + (r >> 61);
    return r >= STACK_KEY_P ? r - STACK_KEY_P : r;
}

/* The key of the function (name, file) from the strings' shares: the same
 * as stack_hasher__function's. */
static inline struct stack_key stack_hasher__join(struct stack_strkey name,
                                                  struct stack_strkey file)
{
    return (struct stack_key){stack_key__mod((unsigned __int128)name.a * file.pc + file.a),
                              stack_key__mod((unsigned __int128)name.b * file.pd + file.b)};
}

static inline bool stack_sum__add(struct stack_sum *s, const struct stack_hasher *h, uint64_t a,
                                  uint64_t b, uint32_t nframes)
{
    if (s->offset + nframes > STACK_KEY_MAX_FRAMES)
        return false;
    /* Each product is < 2^122: 32 of them fit the 128-bit sums. */
    if (s->terms == 32) {
        s->a = stack_key__mod(s->a);
        s->b = stack_key__mod(s->b);
        s->terms = 0;
    }
    s->a += (unsigned __int128)a * h->pow_a[s->offset];
    s->b += (unsigned __int128)b * h->pow_b[s->offset];
    s->offset += nframes;
    s->terms++;
    return true;
}

static inline struct stack_key stack_sum__key(const struct stack_sum *s)
{
    return (struct stack_key){stack_key__mod(s->a), stack_key__mod(s->b)};
}

/* The key of a stack from its functions' keys, leaf first (n <= STACK_KEY_MAX_FRAMES). */
struct stack_key stack_hasher__stack(const struct stack_hasher *h, const struct stack_key *keys,
                                     size_t n);

/* --- a table from keys (of stacks or of functions) to ids (int64 > 0),
 * open addressing, keys inline so a lookup costs one cache miss; callers
 * look up many keys at once and prefetch ahead --- */
struct stack_keymap;

/* max: entries before the table empties itself (it is a cache; the store
 * holds the truth). NULL when out of memory. */
struct stack_keymap *stack_keymap__new(size_t max);
/* m may be NULL. */
void stack_keymap__free(struct stack_keymap *m);
/* Forgets everything (after a rolled-back write). */
void stack_keymap__clear(struct stack_keymap *m);

/* Hints that key will be looked up soon. */
void stack_keymap__prefetch(const struct stack_keymap *m, struct stack_key key);
/* The id of key, or 0 when absent. */
int64_t stack_keymap__get(const struct stack_keymap *m, struct stack_key key);
/* Sets key's id (id > 0). Returns 0 or -ENOMEM (the table is then unchanged). */
int stack_keymap__put(struct stack_keymap *m, struct stack_key key, int64_t id);

/* Forgets key (nothing when absent). */
void stack_keymap__del(struct stack_keymap *m, struct stack_key key);

size_t stack_keymap__len(const struct stack_keymap *m);

/* The 16 bytes a key is stored as (little-endian a, then b), and back. */
void stack_key__encode(struct stack_key k, unsigned char out[16]);
struct stack_key stack_key__decode(const unsigned char in[16]);

#endif
