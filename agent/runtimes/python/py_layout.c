#include "py_layout.h"

#include <stdio.h>
#include <string.h>

extern const struct py_layout py_layout_table[];
extern const size_t py_layout_table_len;

#define F(name)                                                                                    \
    {                                                                                              \
#name, offsetof(struct py_layout, name)                                                    \
    }
const struct py_layout_field py_layout_fields[] = {
    F(runtime_interpreters_head),
    F(interp_next),
    F(interp_threads_head),
    F(tstate_next),
    F(tstate_native_thread_id),
    F(tstate_thread_id),
    F(tstate_frame),
    F(cframe_current_frame),
    F(frame_previous),
    F(frame_code),
    F(frame_instr),
    F(frame_owner),
    F(frame_is_entry),
    F(code_argcount),
    F(code_firstlineno),
    F(code_filename),
    F(code_name),
    F(code_qualname),
    F(code_code_adaptive),
    F(code_linetable),
    F(object_type),
    F(unicode_state),
    F(unicode_length),
    F(unicode_ascii_size),
    F(unicode_compact_size),
    F(bytes_size),
    F(bytes_sval),
};
#undef F
const size_t py_layout_nfields = sizeof(py_layout_fields) / sizeof(py_layout_fields[0]);

const struct py_layout *py_layout__for_version(unsigned version)
{
    for (size_t i = 0; i < py_layout_table_len; i++) {
        if (py_layout_table[i].version == version)
            return &py_layout_table[i];
    }
    return NULL;
}

unsigned py_layout__table_versions(unsigned *out, unsigned max)
{
    unsigned n = 0;

    for (size_t i = 0; i < py_layout_table_len && n < max; i++)
        out[n++] = py_layout_table[i].version;
    return n;
}

/* --- _Py_DebugOffsets --- */

/* The structure is a list of groups of uint64_t, each group starting with
 * the size of the CPython structure its offsets are into. Releases add
 * fields (inside groups and whole groups), so each shape this agent knows
 * is a list of where the fields it needs are, in 8-byte words. */
struct dbg_shape {
    const char *name;
    unsigned min_version; /* (major << 8) | minor */
    /* Word indices; a group's size is at the word `*_size`. */
    unsigned free_threaded;
    unsigned rt_size, rt_interpreters_head;
    unsigned is_size, is_next, is_threads_head;
    unsigned ts_size, ts_next, ts_current_frame, ts_thread_id, ts_native_thread_id;
    unsigned if_size, if_previous, if_executable, if_instr_ptr, if_owner;
    unsigned co_size, co_filename, co_name, co_qualname, co_linetable, co_firstlineno, co_argcount,
        co_code_adaptive;
    unsigned ob_size, ob_type;
    unsigned by_size, by_ob_size, by_ob_sval;
    unsigned un_size, un_state, un_length, un_ascii_size;
    unsigned words; /* words read: up to the last field used */
};

/* 3.13: Include/internal/pycore_runtime.h. 3.14 (pycore_debug_offsets.h)
 * added a group for sets (after lists), and fields:
 * interpreter_state.threads_main (after threads_head) and two at its end,
 * interpreter_frame.stackpointer and tlbc_index, code_object.co_tlbc, then
 * groups at the end. The second 3.14 shape is that without the set group,
 * in case a release lacks it (3.14.10's headers have it); the checks below
 * pick whichever reads true. Debian's 3.14.10 reads true in the first
 * (test_py_layout_hostile.c has its words).
 *
 * 3.15 (3.15.2's pycore_debug_offsets.h): thread_state grew base_frame,
 * last_profiled_frame and last_profiled_frame_seq before thread_id, then
 * native_thread_id, and holds_gil, gil_requested, current_exception and
 * exc_state after status; a group err_stackitem (one word, no size)
 * follows it; type_object grew tp_basicsize and tp_dictoffset, and a
 * group heap_type_object (size, ht_cached_keys) follows it; unicode_object
 * ends with compactunicodeobject_size (none of these read here). Every
 * word index below was checked against the 3.14.10 and 3.15.2 headers
 * (docs/internals/runtimes.md). */
static const struct dbg_shape shapes[] = {
    {
        .name = "3.13",
        .min_version = 0x030d,
        .free_threaded = 2,
        .rt_size = 3,
        .rt_interpreters_head = 5,
        .is_size = 6,
        .is_next = 8,
        .is_threads_head = 9,
        .ts_size = 19,
        .ts_next = 21,
        .ts_current_frame = 23,
        .ts_thread_id = 24,
        .ts_native_thread_id = 25,
        .if_size = 28,
        .if_previous = 29,
        .if_executable = 30,
        .if_instr_ptr = 31,
        .if_owner = 33,
        .co_size = 34,
        .co_filename = 35,
        .co_name = 36,
        .co_qualname = 37,
        .co_linetable = 38,
        .co_firstlineno = 39,
        .co_argcount = 40,
        .co_code_adaptive = 43,
        .ob_size = 44,
        .ob_type = 45,
        .by_size = 64,
        .by_ob_size = 65,
        .by_ob_sval = 66,
        .un_size = 67,
        .un_state = 68,
        .un_length = 69,
        .un_ascii_size = 70,
        .words = 71,
    },
    {
        .name = "3.14",
        .min_version = 0x030e,
        .free_threaded = 2,
        .rt_size = 3,
        .rt_interpreters_head = 5,
        .is_size = 6,
        .is_next = 8,
        .is_threads_head = 9,
        .ts_size = 22,
        .ts_next = 24,
        .ts_current_frame = 26,
        .ts_thread_id = 27,
        .ts_native_thread_id = 28,
        .if_size = 31,
        .if_previous = 32,
        .if_executable = 33,
        .if_instr_ptr = 34,
        .if_owner = 36,
        .co_size = 39,
        .co_filename = 40,
        .co_name = 41,
        .co_qualname = 42,
        .co_linetable = 43,
        .co_firstlineno = 44,
        .co_argcount = 45,
        .co_code_adaptive = 48,
        .ob_size = 50,
        .ob_type = 51,
        .by_size = 74,
        .by_ob_size = 75,
        .by_ob_sval = 76,
        .un_size = 77,
        .un_state = 78,
        .un_length = 79,
        .un_ascii_size = 80,
        .words = 81,
    },
    {
        .name = "3.14 (no sets)",
        .min_version = 0x030e,
        .free_threaded = 2,
        .rt_size = 3,
        .rt_interpreters_head = 5,
        .is_size = 6,
        .is_next = 8,
        .is_threads_head = 9,
        .ts_size = 22,
        .ts_next = 24,
        .ts_current_frame = 26,
        .ts_thread_id = 27,
        .ts_native_thread_id = 28,
        .if_size = 31,
        .if_previous = 32,
        .if_executable = 33,
        .if_instr_ptr = 34,
        .if_owner = 36,
        .co_size = 39,
        .co_filename = 40,
        .co_name = 41,
        .co_qualname = 42,
        .co_linetable = 43,
        .co_firstlineno = 44,
        .co_argcount = 45,
        .co_code_adaptive = 48,
        .ob_size = 50,
        .ob_type = 51,
        .by_size = 70,
        .by_ob_size = 71,
        .by_ob_sval = 72,
        .un_size = 73,
        .un_state = 74,
        .un_length = 75,
        .un_ascii_size = 76,
        .words = 77,
    },
    {
        .name = "3.15",
        .min_version = 0x030f,
        .free_threaded = 2,
        .rt_size = 3,
        .rt_interpreters_head = 5,
        .is_size = 6,
        .is_next = 8,
        .is_threads_head = 9,
        .ts_size = 22,
        .ts_next = 24,
        .ts_current_frame = 26,
        .ts_thread_id = 30,
        .ts_native_thread_id = 31,
        .if_size = 39,
        .if_previous = 40,
        .if_executable = 41,
        .if_instr_ptr = 42,
        .if_owner = 44,
        .co_size = 47,
        .co_filename = 48,
        .co_name = 49,
        .co_qualname = 50,
        .co_linetable = 51,
        .co_firstlineno = 52,
        .co_argcount = 53,
        .co_code_adaptive = 56,
        .ob_size = 58,
        .ob_type = 59,
        .by_size = 86,
        .by_ob_size = 87,
        .by_ob_sval = 88,
        .un_size = 89,
        .un_state = 90,
        .un_length = 91,
        .un_ascii_size = 92,
        .words = 93,
    },
};

static uint64_t word(const void *d, unsigned i)
{
    uint64_t v;

    memcpy(&v, (const char *)d + 8 * (size_t)i, sizeof(v));
    return v;
}

/* An offset into a structure of `size` bytes, of a field of `field` bytes:
 * fits, and the structure is of a size CPython's could be. */
static bool fits(uint64_t off, uint64_t size, uint64_t field)
{
    return size >= 8 && size < (1u << 20) && off < size && off + field <= size &&
           off < CX_PY_NO_FIELD;
}

/* Reads shape sh into out. Returns 0, or -1 when an offset is implausible
 * (the shape is not this release's). */
static int read_shape(const void *d, const struct dbg_shape *sh, struct py_layout *out)
{
    uint64_t rt = word(d, sh->rt_size), is = word(d, sh->is_size), ts = word(d, sh->ts_size);
    uint64_t fr = word(d, sh->if_size), co = word(d, sh->co_size), ob = word(d, sh->ob_size);
    uint64_t by = word(d, sh->by_size), un = word(d, sh->un_size);
#define W(field, size, fsize)                                                                      \
    (fits(word(d, sh->field), size, fsize) ? (int32_t)word(d, sh->field) : -2)
    struct py_layout l = {
        .runtime_interpreters_head = W(rt_interpreters_head, rt, 8),
        .interp_next = W(is_next, is, 8),
        .interp_threads_head = W(is_threads_head, is, 8),
        .tstate_next = W(ts_next, ts, 8),
        .tstate_native_thread_id = W(ts_native_thread_id, ts, 8),
        .tstate_thread_id = W(ts_thread_id, ts, 8),
        .tstate_frame = W(ts_current_frame, ts, 8),
        .cframe_current_frame = -1,
        .frame_previous = W(if_previous, fr, 8),
        .frame_code = W(if_executable, fr, 8),
        .frame_instr = W(if_instr_ptr, fr, 8),
        .frame_owner = W(if_owner, fr, 1),
        .frame_is_entry = -1,
        .code_argcount = W(co_argcount, co, 4),
        .code_firstlineno = W(co_firstlineno, co, 4),
        .code_filename = W(co_filename, co, 8),
        .code_name = W(co_name, co, 8),
        .code_qualname = W(co_qualname, co, 8),
        .code_code_adaptive = W(co_code_adaptive, co + 1, 1),
        .code_linetable = W(co_linetable, co, 8),
        .object_type = W(ob_type, ob, 8),
        .unicode_state = W(un_state, un, 4),
        .unicode_length = W(un_length, un, 8),
        .unicode_ascii_size = W(un_ascii_size, un, 0),
        .bytes_size = W(by_ob_size, by, 8),
        .bytes_sval = W(by_ob_sval, by, 1),
    };
#undef W
    /* PyCompactUnicodeObject is PyUnicodeObject without its data pointer. */
    l.unicode_compact_size = un >= 16 ? (int32_t)(un - 8) : -2;
    for (size_t i = 0; i < py_layout_nfields; i++) {
        int32_t v;
        memcpy(&v, (const char *)&l + py_layout_fields[i].offset, sizeof(v));
        if (v == -2)
            return -1;
    }
    /* What every CPython since 3.0 has: the type after the refcount, a
     * string's length after its header, its data after the compact header,
     * bytes after the size and hash. */
    if (l.object_type != 8 || l.unicode_length != 16 || l.bytes_size != 16 ||
        l.unicode_ascii_size < 24 || l.unicode_compact_size <= l.unicode_ascii_size ||
        l.bytes_sval < 24 || l.bytes_sval > 48 || l.code_code_adaptive < 64)
        return -1;
    /* A shape read at the wrong words mostly lands on other groups' sizes
     * and offsets: what a release whose shape is not known yet must also
     * hold before its frames are walked by it. A PyObject of a GIL build is
     * two words; a frame's header is small; the fields read are distinct. */
    if (ob != 16 || fr > 256 || l.frame_previous == l.frame_code ||
        l.frame_previous == l.frame_instr || l.frame_code == l.frame_instr ||
        l.tstate_frame == l.tstate_next || l.tstate_thread_id == l.tstate_native_thread_id ||
        l.tstate_frame == l.tstate_native_thread_id || l.code_filename == l.code_name ||
        l.code_name == l.code_qualname || l.code_filename == l.code_linetable)
        return -1;
    *out = l;
    return 0;
}

int py_layout__from_debug_offsets(const void *d, size_t len, struct py_layout *out,
                                  unsigned *version, char *why, size_t whylen)
{
    return py_layout__read_debug_offsets(d, len, out, version, NULL, why, whylen);
}

int py_layout__read_debug_offsets(const void *d, size_t len, struct py_layout *out,
                                  unsigned *version, const char **shape, char *why, size_t whylen)
{
    const struct dbg_shape *best = NULL;

    *version = 0;
    if (len < 24 || memcmp(d, "xdebugpy", 8) != 0) {
        snprintf(why, whylen, "no _Py_DebugOffsets at _PyRuntime");
        return -1;
    }
    uint64_t hex = word(d, 1);
    *version = (unsigned)(hex >> 16) & 0xffff;
    if (*version < 0x030d || (hex >> 24) != 3) {
        snprintf(why, whylen, "_Py_DebugOffsets says version 0x%llx", (unsigned long long)hex);
        return -1;
    }
    if (word(d, 2)) {
        snprintf(why, whylen, "a free-threaded build (%u.%u t): not walked yet", *version >> 8,
                 *version & 0xff);
        return -1;
    }
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        /* Only shapes of this release or before: a newer release is tried
         * with the newest shape that reads true. */
        if (shapes[i].min_version > *version || (size_t)shapes[i].words * 8 > len)
            continue;
        struct py_layout l;
        if (read_shape(d, &shapes[i], &l))
            continue;
        if (!best || shapes[i].min_version > best->min_version) {
            best = &shapes[i];
            *out = l;
        }
    }
    if (!best) {
        snprintf(why, whylen,
                 "Python %u.%u's _Py_DebugOffsets has a shape this agent does not know",
                 *version >> 8, *version & 0xff);
        return -1;
    }
    out->version = *version;
    if (shape)
        *shape = best->name;
    return 0;
}

/* --- the BPF side's view --- */

struct span {
    int32_t off;
    unsigned size;
};

/* The 8-aligned window covering the present spans. Returns its length. */
static unsigned window(const struct span *s, size_t n, int32_t *base)
{
    int32_t lo = INT32_MAX, hi = 0;

    for (size_t i = 0; i < n; i++) {
        if (s[i].off < 0)
            continue;
        if (s[i].off < lo)
            lo = s[i].off;
        if (s[i].off + (int32_t)s[i].size > hi)
            hi = s[i].off + (int32_t)s[i].size;
    }
    if (lo == INT32_MAX)
        lo = hi = 0;
    *base = lo & ~7;
    return (unsigned)(hi - *base);
}

static uint16_t rel(int32_t off, int32_t base)
{
    return off < 0 ? CX_PY_NO_FIELD : (uint16_t)(off - base);
}

static uint16_t abs16(int32_t off)
{
    return off < 0 || off >= CX_PY_NO_FIELD ? CX_PY_NO_FIELD : (uint16_t)off;
}

int py_layout__to_bpf(const struct py_layout *l, struct cx_py_offsets *o, char *why, size_t whylen)
{
    bool lasti = l->version < 0x030b; /* f_lasti, an int, until 3.10 */
    struct span fr[] = {{l->frame_previous, 8},
                        {l->frame_code, 8},
                        {l->frame_instr, lasti ? 4 : 8},
                        {l->frame_owner, 1},
                        {l->frame_is_entry, 1}};
    struct span co[] = {{l->code_firstlineno, 4}, {l->code_filename, 8}, {l->code_name, 8}};
    int32_t fb, cb;
    unsigned fl = window(fr, 5, &fb), cl = window(co, 3, &cb);

    memset(o, 0, sizeof(*o));
    if (fl > CX_PY_FRAME_READ || cl > CX_PY_CODE_READ || fb >= CX_PY_NO_FIELD ||
        cb >= CX_PY_NO_FIELD) {
        snprintf(why, whylen, "a frame's fields span %u bytes, a code object's %u: more than read",
                 fl, cl);
        return -1;
    }
    if (l->frame_previous < 0 || l->frame_code < 0 || l->frame_instr < 0 ||
        l->runtime_interpreters_head < 0 || l->interp_threads_head < 0 || l->tstate_next < 0 ||
        l->tstate_frame < 0 || (l->tstate_native_thread_id < 0 && l->tstate_thread_id < 0) ||
        (l->version >= 0x030b && l->code_code_adaptive < 0) ||
        (l->version >= 0x030c && l->frame_owner < 0) ||
        (l->version == 0x030b && l->frame_is_entry < 0)) {
        snprintf(why, whylen, "the layout lacks a field the walk needs");
        return -1;
    }
    o->rt_interp_head = abs16(l->runtime_interpreters_head);
    o->interp_next = abs16(l->interp_next);
    o->interp_threads_head = abs16(l->interp_threads_head);
    o->ts_next = abs16(l->tstate_next);
    o->ts_native_tid = abs16(l->tstate_native_thread_id);
    o->ts_thread_id = abs16(l->tstate_thread_id);
    o->ts_frame = abs16(l->tstate_frame);
    o->cframe_current = abs16(l->cframe_current_frame);
    o->fr_base = (uint16_t)fb;
    o->fr_len = (uint16_t)fl;
    o->fr_previous = rel(l->frame_previous, fb);
    o->fr_code = rel(l->frame_code, fb);
    o->fr_instr = rel(l->frame_instr, fb);
    o->fr_owner = rel(l->frame_owner, fb);
    o->fr_is_entry = rel(l->frame_is_entry, fb);
    o->co_base = (uint16_t)cb;
    o->co_len = (uint16_t)cl;
    o->co_firstlineno = rel(l->code_firstlineno, cb);
    o->co_filename = rel(l->code_filename, cb);
    o->co_name = rel(l->code_name, cb);
    o->co_code_adaptive = abs16(l->code_code_adaptive);
    o->model = l->version < 0x030b   ? CX_PY_ONE_PER_EVAL
               : l->version < 0x030c ? CX_PY_IS_ENTRY
                                     : CX_PY_CSTACK;
    return 0;
}
