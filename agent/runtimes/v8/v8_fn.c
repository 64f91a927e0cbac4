#include "v8_fn.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* A heap object's fields are read in one go, this far into it. */
#define OBJ_HEAD 64
/* Levels of cons, thin and sliced strings followed at most. */
#define STR_DEPTH 8
/* V8 11's kScopeInfoMaxInlinedLocalNamesSize: from this many context
 * locals on, their names are in one hash table slot instead. */
#define SCOPE_INLINED_NAMES 75
/* Slots of a ScopeInfo looked at after its context locals. */
#define SCOPE_SLOTS 16
/* Context locals believed at most (a bigger count is garbage). */
#define SCOPE_MAX_LOCALS 65536
/* Line-end entries believed at most. */
#define MAX_LINE_ENDS (16u << 20)

static bool is_heap(uint64_t v)
{
    return (v & 3) == 1;
}

static bool is_smi(uint64_t v)
{
    return (v & 1) == 0;
}

/* A Smi's value: the upper 32 bits (64-bit V8 without pointer compression). */
static int64_t smi(uint64_t v)
{
    return (int64_t)(int32_t)(v >> 32);
}

static uint64_t get_u64(const uint8_t *b, unsigned off)
{
    uint64_t v;

    memcpy(&v, b + off, sizeof(v));
    return v;
}

/* Reads the head of the object at tagged p and its instance type. */
static int obj_read(const struct py_reader *r, const struct v8_layout *l, uint64_t p,
                    uint8_t head[OBJ_HEAD], uint16_t *type)
{
    uint64_t map;
    int e;

    if (!is_heap(p))
        return -EINVAL;
    if ((e = r->read(r->ctx, p - 1, head, OBJ_HEAD)))
        return e;
    map = get_u64(head, 0);
    if (!is_heap(map))
        return -EINVAL;
    return r->read(r->ctx, map - 1 + l->map_type, type, sizeof(*type));
}

struct sbuf {
    char *out;
    size_t cap, n; /* cap: bytes for text, a NUL and a "..." left over */
    bool cut;
};

/* Appends one UTF-16 code unit (or Latin-1 byte) as UTF-8. */
static void put_unit(struct sbuf *b, unsigned c)
{
    char tmp[3];
    size_t k;

    if (c < 0x80) {
        tmp[0] = (char)c;
        k = 1;
    } else if (c < 0x800) {
        tmp[0] = (char)(0xc0 | c >> 6);
        tmp[1] = (char)(0x80 | (c & 0x3f));
        k = 2;
    } else if (c >= 0xd800 && c < 0xe000) {
        tmp[0] = '?'; /* half of a surrogate pair: not decoded */
        k = 1;
    } else {
        tmp[0] = (char)(0xe0 | c >> 12);
        tmp[1] = (char)(0x80 | ((c >> 6) & 0x3f));
        tmp[2] = (char)(0x80 | (c & 0x3f));
        k = 3;
    }
    if (b->n + k > b->cap) {
        b->cut = true;
        return;
    }
    memcpy(b->out + b->n, tmp, k);
    b->n += k;
}

/* Appends count characters from index start of the sequential string at
 * tagged p (two_byte: of 16 bits). */
static int seq_append(const struct py_reader *r, const struct v8_layout *l, uint64_t p,
                      bool two_byte, uint32_t start, uint32_t count, struct sbuf *b)
{
    uint8_t chunk[256];
    unsigned w = two_byte ? 2 : 1;
    uint64_t at = p - 1 + (two_byte ? l->seq2_chars : l->seq1_chars) + (uint64_t)start * w;
    int e;

    while (count && !b->cut) {
        uint32_t k = count < sizeof(chunk) / w ? count : (uint32_t)(sizeof(chunk) / w);
        if ((e = r->read(r->ctx, at, chunk, (size_t)k * w)))
            return e;
        for (uint32_t i = 0; i < k && !b->cut; i++)
            put_unit(b, two_byte ? (unsigned)(chunk[2 * i] | chunk[2 * i + 1] << 8) : chunk[i]);
        at += (uint64_t)k * w;
        count -= k;
    }
    return 0;
}

static int str_append(const struct py_reader *r, const struct v8_layout *l, uint64_t p,
                      struct sbuf *b, int depth)
{
    uint8_t head[OBJ_HEAD];
    uint16_t type;
    int32_t len;
    int e;

    if (depth > STR_DEPTH)
        return -ELOOP;
    if ((e = obj_read(r, l, p, head, &type)))
        return e;
    if (type >= l->first_nonstring)
        return -EINVAL;
    memcpy(&len, head + l->str_length, sizeof(len));
    if (len < 0)
        return -EINVAL;
    unsigned repr = type & l->str_repr_mask;
    bool two_byte = (type & l->str_enc_mask) != l->one_byte_tag;
    if (repr == l->seq_tag)
        return seq_append(r, l, p, two_byte, 0, (uint32_t)len, b);
    if (repr == l->cons_tag) {
        if ((e = str_append(r, l, get_u64(head, l->cons_first), b, depth + 1)))
            return e;
        return b->cut ? 0 : str_append(r, l, get_u64(head, l->cons_second), b, depth + 1);
    }
    if (repr == l->thin_tag)
        return str_append(r, l, get_u64(head, l->thin_actual), b, depth + 1);
    if (repr == l->sliced_tag) {
        uint64_t parent = get_u64(head, l->sliced_parent), off = get_u64(head, l->sliced_offset);
        uint8_t phead[OBJ_HEAD];
        uint16_t ptype;
        if (!is_smi(off) || smi(off) < 0 || (e = obj_read(r, l, parent, phead, &ptype)))
            return e ? e : -EINVAL;
        if (ptype >= l->first_nonstring || (ptype & l->str_repr_mask) != l->seq_tag)
            return -ENOTSUP;
        return seq_append(r, l, parent, (ptype & l->str_enc_mask) != l->one_byte_tag,
                          (uint32_t)smi(off), (uint32_t)len, b);
    }
    return -ENOTSUP; /* external strings: their characters are outside the heap */
}

int v8_fn__read_str(const struct py_reader *r, const struct v8_layout *l, uint64_t p, char *out,
                    size_t outlen)
{
    struct sbuf b = {out, outlen - 4, 0, false};
    int e;

    if (outlen <= 4)
        return -EINVAL;
    if ((e = str_append(r, l, p, &b, 0)))
        return e;
    if (b.cut) {
        memcpy(out + b.n, "...", 3);
        b.n += 3;
    }
    out[b.n] = '\0';
    return (int)b.n;
}

/* The name and start position a ScopeInfo at tagged p holds. After the
 * context locals come, each there only when it applies: a class variable's
 * slot (a Smi), the function variable's name and slot index, the inferred
 * name; then V8 up to 11 puts the start and end positions, and V8 12 on
 * has them in two fixed slots after the count of context locals (its first
 * variable's slot is then three past that count, not one). The first
 * non-empty string before any other heap object (V8 13 leaves an inferred
 * name undefined; an outer ScopeInfo follows) is the name. For V8 up to
 * 11, the first two Smis after it (after its slot index, for the
 * function's own name) with 0 <= start < end are the positions. */
static void scope_info(const struct py_reader *r, const struct v8_layout *l, uint64_t p, char *name,
                       size_t namelen, int64_t *start)
{
    uint64_t slots[SCOPE_SLOTS], v, pos[2];
    uint64_t base = p - 1 + 8; /* the slots follow the map */
    bool fixed_pos = l->scope_first_vars >= l->scope_ncontextlocals + 3;
    int64_t n;
    bool named = false;

    name[0] = '\0';
    if (r->read(r->ctx, base + 8ull * l->scope_ncontextlocals, &v, sizeof(v)) || !is_smi(v))
        return;
    n = smi(v);
    if (n < 0 || n > SCOPE_MAX_LOCALS)
        return;
    if (fixed_pos &&
        !r->read(r->ctx, base + 8ull * (l->scope_ncontextlocals + 1u), pos, sizeof(pos)) &&
        is_smi(pos[0]) && is_smi(pos[1]) && smi(pos[0]) >= 0 && smi(pos[0]) <= smi(pos[1]))
        *start = smi(pos[0]);
    uint64_t skip = l->scope_first_vars + (n < SCOPE_INLINED_NAMES ? 2 * n : n + 1);
    if (r->read(r->ctx, base + 8 * skip, slots, sizeof(slots)))
        return;
    int from = 0, strings = 0;
    for (int i = 0; i < SCOPE_SLOTS && !named; i++) {
        if (!is_heap(slots[i]))
            continue;
        int n8 = v8_fn__read_str(r, l, slots[i], name, namelen);
        /* An anonymous function's name is "", its inferred name
         * ("Module._load") follows. The function's own name is followed by
         * its variable's slot index (a Smi, not a position). */
        if (n8 > 0) {
            named = true;
            from = i + (strings == 0 ? 2 : 1);
        } else if (n8 < 0) {
            from = i + 1;
            break; /* not a string: the names are behind */
        }
        strings++;
    }
    if (!named)
        name[0] = '\0';
    if (fixed_pos)
        return;
    /* The positions follow the name (or, without one, come first). */
    for (int i = from; i + 1 < SCOPE_SLOTS; i++) {
        if (is_smi(slots[i]) && is_smi(slots[i + 1]) && smi(slots[i]) >= 0 &&
            smi(slots[i]) < smi(slots[i + 1])) {
            *start = smi(slots[i]);
            return;
        }
    }
}

/* The 1-based line of position pos in the script whose head is `head`:
 * from its line ends (a FixedArray of Smis, the position of each line's
 * end) when V8 computed them, else from the newlines of its source before
 * pos. 0 when neither can be read. */
static int64_t script_line(const struct py_reader *r, const struct v8_layout *l,
                           const uint8_t *head, int64_t pos)
{
    uint8_t h[OBJ_HEAD];
    uint16_t type;
    uint64_t ends = get_u64(head, l->script_line_ends), v;

    if (pos < 0)
        return 0;
    if (is_heap(ends) && !obj_read(r, l, ends, h, &type) && type == l->type_fixed_array &&
        is_smi(v = get_u64(h, l->fixed_length)) && smi(v) > 0 && smi(v) <= MAX_LINE_ENDS) {
        /* The first line whose end is at or after pos. */
        int64_t lo = 0, hi = smi(v);
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            uint64_t e;
            if (r->read(r->ctx, ends - 1 + l->fixed_data + 8 * (uint64_t)mid, &e, sizeof(e)) ||
                !is_smi(e))
                return 0;
            if (smi(e) < pos)
                lo = mid + 1;
            else
                hi = mid;
        }
        return lo + 1;
    }
    /* The source: a sequential one-byte string, its newlines counted. */
    uint64_t src = get_u64(head, l->script_source);
    int32_t len;
    if (pos > V8_FN_MAX_SCAN || obj_read(r, l, src, h, &type) || type >= l->first_nonstring ||
        (type & l->str_repr_mask) != l->seq_tag || (type & l->str_enc_mask) != l->one_byte_tag)
        return 0;
    memcpy(&len, h + l->str_length, sizeof(len));
    if (len < 0 || pos > len)
        return 0;
    uint8_t chunk[4096];
    int64_t line = 1;
    for (int64_t at = 0; at < pos;) {
        size_t k = pos - at < (int64_t)sizeof(chunk) ? (size_t)(pos - at) : sizeof(chunk);
        if (r->read(r->ctx, src - 1 + l->seq1_chars + (uint64_t)at, chunk, k))
            return 0;
        for (size_t i = 0; i < k; i++)
            line += chunk[i] == '\n';
        at += (int64_t)k;
    }
    return line;
}

static void v8_fn_free(struct rt_obj *o)
{
    free(o);
}

struct v8_fn *v8_fn__read(const struct py_reader *r, const struct v8_layout *l, uint64_t sfi,
                          uint16_t tag, const char **why)
{
    uint8_t head[OBJ_HEAD], sh[OBJ_HEAD], nh[OBJ_HEAD];
    uint16_t type, stype, ntype;
    char name[V8_FN_MAX_NAME], file[V8_FN_MAX_FILE];
    int64_t start = -1, line = 0;

    name[0] = file[0] = '\0';
    if (obj_read(r, l, sfi, head, &type)) {
        *why = "unreadable";
        return NULL;
    }
    if (type != l->type_sfi) {
        *why = "not a SharedFunctionInfo";
        return NULL;
    }
    uint64_t nos = get_u64(head, l->sfi_name), script = get_u64(head, l->sfi_script);
    if (tag && cx_v8_fingerprint(nos, script) != tag) {
        *why = "function changed since the sample";
        return NULL;
    }
    if (is_heap(nos) && !obj_read(r, l, nos, nh, &ntype)) {
        if (ntype < l->first_nonstring) {
            if (v8_fn__read_str(r, l, nos, name, sizeof(name)) < 0)
                name[0] = '\0';
        } else if (ntype == l->type_scope_info) {
            scope_info(r, l, nos, name, sizeof(name), &start);
        }
    }
    if (is_heap(script) && !obj_read(r, l, script, sh, &stype) && stype == l->type_script) {
        uint64_t sn = get_u64(sh, l->script_name);
        if (is_heap(sn) && v8_fn__read_str(r, l, sn, file, sizeof(file)) < 0)
            file[0] = '\0';
        if (start >= 0)
            line = script_line(r, l, sh, start);
    }
    size_t nl = strlen(name) + 1, fl = strlen(file) + 1;
    struct v8_fn *f = calloc(1, sizeof(*f) + nl + fl);
    if (!f) {
        *why = "out of memory";
        return NULL;
    }
    f->obj.refs = 1;
    f->obj.free = v8_fn_free;
    f->tag = cx_v8_fingerprint(nos, script);
    f->line = line;
    memcpy(f->data, name, nl);
    memcpy(f->data + nl, file, fl);
    f->name = f->data;
    f->file = f->data + nl;
    f->bytes = sizeof(*f) + nl + fl;
    return f;
}
