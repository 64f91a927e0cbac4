#include "py_code.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "../../../common/hmap.h"
#include "py_lines.h"

/* A code object's fields are read in one go, this far into it. */
#define CODE_HEAD_MAX 512
/* A string's first bytes come with its header. */
#define STR_FIRST 256

static uint64_t get_u64(const uint8_t *b, int32_t off)
{
    uint64_t v;

    memcpy(&v, b + off, sizeof(v));
    return v;
}

static uint32_t get_u32(const uint8_t *b, int32_t off)
{
    uint32_t v;

    memcpy(&v, b + off, sizeof(v));
    return v;
}

/* Appends code point cp as UTF-8 (a surrogate or a value past Unicode as
 * U+FFFD). Returns the bytes written, 0 when it does not fit in room. */
static size_t utf8(uint32_t cp, char *out, size_t room)
{
    if ((cp >= 0xd800 && cp < 0xe000) || cp > 0x10ffff)
        cp = 0xfffd;
    if (cp < 0x80 && room >= 1) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800 && room >= 2) {
        out[0] = (char)(0xc0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000 && room >= 3) {
        out[0] = (char)(0xe0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    if (cp >= 0x10000 && room >= 4) {
        out[0] = (char)(0xf0 | cp >> 18);
        out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
        out[2] = (char)(0x80 | (cp >> 6 & 0x3f));
        out[3] = (char)(0x80 | (cp & 0x3f));
        return 4;
    }
    return 0;
}

int py_code__read_str(const struct py_reader *r, const struct py_layout *l, uint64_t addr,
                      char *out, size_t outlen)
{
    uint8_t head[STR_FIRST + 128];
    size_t hlen = (size_t)l->unicode_compact_size + STR_FIRST, at = 0;
    int err;

    if (outlen <= 4 || hlen > sizeof(head) || !addr)
        return -EINVAL;
    /* Header and first characters at once; a string near the end of a
     * mapping may not have STR_FIRST bytes after it: then the header alone,
     * the ASCII one (a short ASCII string is smaller than the compact
     * header: reading that much could fail where the string does not end). */
    if (r->read(r->ctx, addr, head, hlen)) {
        hlen = (size_t)l->unicode_ascii_size;
        if ((err = r->read(r->ctx, addr, head, hlen)))
            return err;
    }
    uint32_t state = get_u32(head, l->unicode_state);
    uint64_t length = get_u64(head, l->unicode_length);
    unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
    /* Bits the same since 3.3: interned:2, kind:3, compact:1, ascii:1. */
    if (!compact || (kind != 1 && kind != 2 && kind != 4) || (ascii && kind != 1) ||
        length > (1u << 30))
        return -EINVAL;
    size_t data_off = ascii ? (size_t)l->unicode_ascii_size : (size_t)l->unicode_compact_size;
    /* At most what fits the output even as ASCII. */
    size_t want = length < outlen ? (size_t)length : outlen;
    size_t nbytes = want * kind;
    uint8_t *data, *heap = NULL;
    if (data_off + nbytes <= hlen) {
        data = head + data_off;
    } else {
        heap = malloc(nbytes ? nbytes : 1);
        if (!heap)
            return -ENOMEM;
        if ((err = r->read(r->ctx, addr + data_off, heap, nbytes))) {
            free(heap);
            return err;
        }
        data = heap;
    }
    bool cut = false;
    for (size_t i = 0; i < want; i++) {
        uint32_t cp = kind == 1   ? data[i]
                      : kind == 2 ? (uint32_t)data[2 * i] | (uint32_t)data[2 * i + 1] << 8
                                  : get_u32(data, (int32_t)(4 * i));
        size_t n = utf8(cp, out + at, outlen - 4 - at);
        if (!n) {
            cut = true;
            break;
        }
        at += n;
    }
    if (cut || want < length) {
        memcpy(out + at, "...", 3);
        at += 3;
    }
    out[at] = '\0';
    free(heap);
    return (int)at;
}

static void code_free(struct rt_obj *o)
{
    free(o);
}

/* The bytes object at addr (co_lnotab, co_linetable) into a new buffer.
 * Returns 0, -E2BIG when longer than PY_CODE_MAX_LINES, or another errno. */
static int read_bytes(const struct py_reader *r, const struct py_layout *l, uint64_t addr,
                      uint8_t **out, size_t *len)
{
    uint8_t head[64];
    int err;

    *out = NULL;
    *len = 0;
    if (!addr || (size_t)l->bytes_sval > sizeof(head))
        return -EINVAL;
    if ((err = r->read(r->ctx, addr, head, (size_t)l->bytes_sval)))
        return err;
    int64_t n = (int64_t)get_u64(head, l->bytes_size);
    if (n < 0)
        return -EINVAL;
    if (n > PY_CODE_MAX_LINES)
        return -E2BIG;
    *out = malloc(n ? (size_t)n : 1);
    if (!*out)
        return -ENOMEM;
    if ((err = r->read(r->ctx, addr + (uint64_t)l->bytes_sval, *out, (size_t)n))) {
        free(*out);
        *out = NULL;
        return err;
    }
    *len = (size_t)n;
    return 0;
}

struct py_code *py_code__read(const struct py_reader *r, const struct py_layout *l,
                              uint64_t code_type, uint64_t addr, uint16_t tag, bool keep_lines,
                              const char **why)
{
    uint8_t head[CODE_HEAD_MAX];
    char qual[PY_CODE_MAX_NAME], name[PY_CODE_MAX_NAME], file[PY_CODE_MAX_FILE];
    int32_t fields[] = {l->object_type,   l->code_firstlineno, l->code_filename, l->code_name,
                        l->code_qualname, l->code_linetable,   l->code_argcount};
    size_t need = 0;
    uint8_t *table = NULL;
    size_t ntable = 0;
    struct py_code *c = NULL;

    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        if (fields[i] >= 0 && (size_t)fields[i] + 8 > need)
            need = (size_t)fields[i] + 8;
    }
    if (need > sizeof(head) || l->code_firstlineno < 0 || l->code_filename < 0 ||
        l->code_name < 0) {
        *why = "layout";
        return NULL;
    }
    if (!addr || r->read(r->ctx, addr, head, need)) {
        *why = "code object unreadable";
        return NULL;
    }
    if (code_type && get_u64(head, l->object_type) != code_type) {
        *why = "not a code object";
        return NULL;
    }
    uint32_t first = get_u32(head, l->code_firstlineno);
    uint64_t fileptr = get_u64(head, l->code_filename), nameptr = get_u64(head, l->code_name);
    uint16_t fp = cx_py_fingerprint(first, fileptr, nameptr);
    if (tag && fp != tag) {
        *why = "code object changed since the sample";
        return NULL;
    }
    if (py_code__read_str(r, l, nameptr, name, sizeof(name)) < 0 ||
        py_code__read_str(r, l, fileptr, file, sizeof(file)) < 0) {
        *why = "code object's names unreadable";
        return NULL;
    }
    if (l->code_qualname < 0 ||
        py_code__read_str(r, l, get_u64(head, l->code_qualname), qual, sizeof(qual)) < 0)
        memcpy(qual, name, strlen(name) + 1);
    /* A table that cannot be had costs the lines only. */
    if (keep_lines && l->code_linetable >= 0 &&
        read_bytes(r, l, get_u64(head, l->code_linetable), &table, &ntable)) {
        table = NULL;
        ntable = 0;
    }
    size_t lq = strlen(qual) + 1, ln = strlen(name) + 1, lf = strlen(file) + 1;
    c = malloc(sizeof(*c) + lq + ln + lf + ntable);
    if (!c) {
        free(table);
        *why = "out of memory";
        return NULL;
    }
    c->obj.refs = 1;
    c->obj.free = code_free;
    c->version = l->version;
    c->tag = fp;
    c->firstlineno = (int32_t)first;
    char *p = c->data;
    c->qualname = memcpy(p, qual, lq);
    p += lq;
    c->name = memcpy(p, name, ln);
    p += ln;
    c->filename = memcpy(p, file, lf);
    p += lf;
    c->lines = table ? memcpy(p, table, ntable) : NULL;
    c->nlines = ntable;
    c->bytes = sizeof(*c) + lq + ln + lf + ntable;
    free(table);
    /* The identity of its contents, for sharing one copy between processes
     * (forked workers run the same code). */
    uint64_t h[5] = {hmap__hash(c->qualname, lq), hmap__hash(c->filename, lf),
                     hmap__hash(c->name, ln), c->lines ? hmap__hash(c->lines, ntable) : 0,
                     (uint64_t)c->firstlineno ^ (uint64_t)c->version << 32};
    c->hash = hmap__hash(h, sizeof(h));
    return c;
}

int64_t py_code__line(const struct py_code *c, uint32_t offset)
{
    int64_t line;

    if (offset == UINT32_MAX || !c->lines)
        return c->firstlineno;
    line = py_lines__line(c->version, c->lines, c->nlines, c->firstlineno, offset);
    return line > 0 ? line : c->firstlineno;
}
