#include "hs_name.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* PcDescs read from one nmethod at most (a large C2 method has a few
 * thousand). */
#define HS_MAX_PCDESCS 65536
/* Line number tables read at most. */
#define HS_MAX_LINE_TABLE 65536

static void name_free(struct rt_obj *o)
{
    free(o);
}

/* One method of a frame, while the name is put together. */
struct part {
    char fn[2 * HS_NAME_MAX_SYMBOL + 2];
    char file[HS_NAME_MAX_SYMBOL];
    int64_t line;
};

static struct hs_name *name_new(const struct part *parts, unsigned n)
{
    size_t len = n * sizeof(struct hs_name_line), at = len;
    struct hs_name *h;

    for (unsigned i = 0; i < n; i++)
        len += strlen(parts[i].fn) + strlen(parts[i].file) + 2;
    h = calloc(1, sizeof(*h) + len);
    if (!h)
        return NULL;
    h->obj.refs = 1;
    h->obj.free = name_free;
    h->n = n;
    h->bytes = sizeof(*h) + len;
    h->lines = (struct hs_name_line *)h->data;
    for (unsigned i = 0; i < n; i++) {
        size_t lf = strlen(parts[i].fn) + 1, ll = strlen(parts[i].file) + 1;
        memcpy(h->data + at, parts[i].fn, lf);
        h->lines[i].function = h->data + at;
        at += lf;
        memcpy(h->data + at, parts[i].file, ll);
        h->lines[i].file = h->data + at;
        at += ll;
        h->lines[i].line = parts[i].line;
    }
    return h;
}

static int rd(const struct hs_mem *m, uint64_t addr, void *buf, size_t len)
{
    if (!addr)
        return -1;
    return m->read(m->ctx, addr, buf, len);
}

/* The Symbol at sym, its bytes into out (NUL-terminated); false when it
 * cannot be read or is longer than HS_NAME_MAX_SYMBOL. */
static bool symbol(const struct hs_mem *m, const struct hs_vm *vm, uint64_t sym, char *out)
{
    uint16_t len;

    if (rd(m, sym + vm->sym_length, &len, sizeof(len)) || len >= HS_NAME_MAX_SYMBOL ||
        rd(m, sym + vm->sym_body, out, len))
        return false;
    out[len] = '\0';
    return memchr(out, '\0', len) == NULL;
}

/* The Symbol in slot idx of the constant pool at cp. */
static bool cp_symbol(const struct hs_mem *m, const struct hs_vm *vm, uint64_t cp, int32_t cp_len,
                      uint16_t idx, char *out)
{
    uint64_t sym;

    if (idx == 0 || idx >= cp_len || rd(m, cp + vm->cp_size + 8 * (uint64_t)idx, &sym, 8))
        return false;
    /* Utf8 slots hold a Symbol*; a tagged value is something else. */
    return (sym & 7) == 0 && symbol(m, vm, sym, out);
}

/* HotSpot's compressed ints (UNSIGNED5: bytes below 192 end a number, at
 * most 5 bytes) from buf[*at] on; false past len. */
static bool read_u5(const uint8_t *buf, size_t len, size_t *at, uint32_t *v)
{
    uint32_t sum = 0;
    unsigned shift = 0;

    for (int i = 0; i < 5; i++) {
        if (*at >= len)
            return false;
        uint32_t b = buf[(*at)++];
        sum += b << shift;
        if (b < 192 || i == 4) {
            *v = sum;
            return true;
        }
        shift += 6;
    }
    return false;
}

static bool read_s5(const uint8_t *buf, size_t len, size_t *at, int32_t *v)
{
    uint32_t u;

    if (!read_u5(buf, len, at, &u))
        return false;
    *v = (int32_t)((u >> 1) ^ -(u & 1));
    return true;
}

/* The line of bytecode index bci in the method whose ConstMethod is cm
 * (HotSpot's rule: the entry for bci, else the closest below it); 0 when
 * not known. */
static int64_t line_of(const struct hs_mem *m, const struct hs_vm *vm, uint64_t cm, int32_t bci)
{
    uint16_t flags, code_size;
    uint8_t *t;
    size_t at = 0, len = 4096;
    int32_t b = 0, l = 0, best_bci = 0;
    int64_t best = 0;

    if (bci < 0 || rd(m, cm + vm->cm_flags, &flags, 2) || !(flags & vm->has_lines_flag) ||
        rd(m, cm + vm->cm_code_size, &code_size, 2) || bci >= code_size)
        return 0;
    uint64_t table = cm + vm->const_size + code_size;
    /* Read in pages: the table may end near the end of a mapping. */
    t = malloc(HS_MAX_LINE_TABLE);
    if (!t)
        return 0;
    len = 4096 - (table & 4095);
    if (rd(m, table, t, len)) {
        free(t);
        return 0;
    }
    for (;;) {
        if (at + 11 > len && len < HS_MAX_LINE_TABLE) {
            size_t more = HS_MAX_LINE_TABLE - len < 4096 ? HS_MAX_LINE_TABLE - len : 4096;
            if (rd(m, table + len, t + len, more) == 0)
                len += more;
        }
        if (at >= len || t[at] == 0)
            break;
        uint8_t next = t[at++];
        if (next == 0xff) {
            int32_t db, dl;
            if (!read_s5(t, len, &at, &db) || !read_s5(t, len, &at, &dl))
                break;
            b += db;
            l += dl;
        } else {
            b += next >> 3;
            l += next & 7;
        }
        if (b == bci) {
            best = l;
            break;
        }
        if (b < bci && b >= best_bci) {
            best_bci = b;
            best = l;
        }
    }
    free(t);
    return best > 0 ? best : 0;
}

/* Method's class and name (and, with bci >= 0, line) into p. */
static bool method_part(const struct hs_mem *m, const struct hs_vm *vm, uint64_t method,
                        int32_t bci, struct part *p)
{
    static char klass[HS_NAME_MAX_SYMBOL], name[HS_NAME_MAX_SYMBOL];
    uint64_t cm, cp, holder, ksym;
    uint16_t name_idx, src_idx;
    int32_t cp_len;

    if (rd(m, method + vm->method_const, &cm, 8) || rd(m, cm + vm->cm_constants, &cp, 8) ||
        rd(m, cm + vm->cm_name, &name_idx, 2) || rd(m, cp + vm->cp_length, &cp_len, 4) ||
        rd(m, cp + vm->cp_holder, &holder, 8) || rd(m, holder + vm->klass_name, &ksym, 8))
        return false;
    if (cp_len <= 0 || cp_len > 65536 || !cp_symbol(m, vm, cp, cp_len, name_idx, name) ||
        !symbol(m, vm, ksym, klass))
        return false;
    /* The class as Java writes it: java/util/HashMap -> java.util.HashMap. */
    for (char *c = klass; *c; c++) {
        if (*c == '/')
            *c = '.';
    }
    p->file[0] = '\0';
    if (rd(m, cp + vm->cp_source, &src_idx, 2) == 0 && src_idx)
        cp_symbol(m, vm, cp, cp_len, src_idx, p->file);
    snprintf(p->fn, sizeof(p->fn), "%s.%s", klass, name);
    p->line = line_of(m, vm, cm, bci);
    return true;
}

/* The bytecode index of an interpreted frame's bcp (its low 28 bits), or
 * -1. */
static int32_t interp_bci(const struct hs_mem *m, const struct hs_vm *vm, uint64_t method,
                          uint32_t bcp28)
{
    uint64_t cm;
    uint16_t code_size;

    if (!bcp28 || rd(m, method + vm->method_const, &cm, 8) ||
        rd(m, cm + vm->cm_code_size, &code_size, 2))
        return -1;
    uint32_t bci = (bcp28 - (uint32_t)(cm + vm->const_size)) & CX_HS_PC_OFF_MAX;
    return bci < code_size ? (int32_t)bci : -1;
}

/* The scopes at pc offset pc_off of the nmethod at nm: (Method*, bci)
 * pairs, innermost first, into methods/bcis. Returns how many, 0 when the
 * nmethod has none there (its own method is shown), -1 when it is not the
 * nmethod the sample saw (tag: its Method*'s bits). */
static int scopes(const struct hs_mem *m, const struct hs_vm *vm, uint64_t nm, uint32_t pc_off,
                  uint16_t tag, uint64_t *methods, int32_t *bcis, uint64_t *own)
{
    uint64_t method, scopes_begin;
    int32_t meta_off, pcs_off, deps_off, n, lo, hi, decode = 0;
    uint8_t *pcs = NULL;

    if (rd(m, nm + vm->cm_method, &method, 8) || (uint16_t)(method >> 3) != tag ||
        rd(m, nm + vm->cm_scopes, &scopes_begin, 8) || rd(m, nm + vm->nm_metadata, &meta_off, 4) ||
        rd(m, nm + vm->nm_pcs, &pcs_off, 4) || rd(m, nm + vm->nm_deps, &deps_off, 4))
        return -1;
    *own = method;
    n = (deps_off - pcs_off) / (int32_t)vm->pc_size;
    if (pcs_off <= 0 || n <= 0 || n > HS_MAX_PCDESCS || meta_off <= 0 ||
        scopes_begin < nm + (uint64_t)meta_off || !(pcs = malloc((size_t)n * vm->pc_size)) ||
        rd(m, nm + (uint64_t)pcs_off, pcs, (size_t)n * vm->pc_size)) {
        free(pcs);
        return 0;
    }
    /* The first PcDesc at or after the pc: a return address has its own,
     * any other pc is taken at the next one (they are sorted). */
    lo = 0;
    hi = n;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2, off;
        memcpy(&off, pcs + (size_t)mid * vm->pc_size + vm->pc_pc, 4);
        if ((uint32_t)off < pc_off)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < n)
        memcpy(&decode, pcs + (size_t)lo * vm->pc_size + vm->pc_scope, 4);
    free(pcs);
    uint64_t nmeta = (scopes_begin - (nm + (uint64_t)meta_off)) / 8;
    int k = 0;
    while (decode > 0 && k < HS_NAME_MAX_DEPTH) {
        uint8_t s[16];
        size_t at = 0;
        uint32_t sender, midx, bci;
        uint64_t mp;
        if (rd(m, scopes_begin + (uint64_t)decode, s, sizeof(s)) ||
            !read_u5(s, sizeof(s), &at, &sender) || !read_u5(s, sizeof(s), &at, &midx) ||
            !read_u5(s, sizeof(s), &at, &bci) || midx == 0 || midx > nmeta ||
            rd(m, nm + (uint64_t)meta_off + 8 * (uint64_t)(midx - 1), &mp, 8) || !mp)
            break;
        methods[k] = mp;
        bcis[k] = (int32_t)bci - 1; /* InvocationEntryBci is -1 */
        k++;
        if ((int32_t)sender <= 0 || (int32_t)sender == decode)
            break;
        decode = (int32_t)sender;
    }
    return k;
}

struct hs_name *hs_name__read(const struct hs_mem *m, const struct hs_vm *vm, uint64_t addr,
                              uint32_t aux, uint16_t tag, const char **why)
{
    static struct part parts[HS_NAME_MAX_DEPTH];
    uint64_t methods[HS_NAME_MAX_DEPTH], own = 0, p;
    int32_t bcis[HS_NAME_MAX_DEPTH];
    char buf[128];
    int n;

    switch (CX_HS_TYPE(aux)) {
    case CX_HS_INTERPRETED:
        *why = "method unreadable";
        if (!method_part(m, vm, addr, interp_bci(m, vm, addr, CX_HS_PC_OFF(aux)), &parts[0]))
            return NULL;
        break;
    case CX_HS_COMPILED:
        n = scopes(m, vm, addr, CX_HS_PC_OFF(aux), tag, methods, bcis, &own);
        if (n < 0) {
            *why = "compiled method freed";
            return NULL;
        }
        *why = "method unreadable";
        if (n == 0)
            return method_part(m, vm, own, -1, &parts[0]) ? name_new(parts, 1) : NULL;
        for (int i = 0; i < n; i++) {
            if (!method_part(m, vm, methods[i], bcis[i], &parts[i]))
                return NULL;
        }
        *why = NULL;
        return name_new(parts, (unsigned)n);
    case CX_HS_STUB:
        *why = "stub unreadable";
        if (rd(m, addr + vm->blob_name, &p, 8) || rd(m, p, buf, sizeof(buf)) ||
            !memchr(buf, '\0', sizeof(buf)))
            return NULL;
        snprintf(parts[0].fn, sizeof(parts[0].fn), "[stub] %s", buf);
        parts[0].file[0] = '\0';
        parts[0].line = 0;
        break;
    default:
        *why = "frame of a type not known";
        return NULL;
    }
    *why = NULL;
    return name_new(parts, 1);
}
