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

/* The line of bytecode index bci in line number table t (len bytes,
 * HotSpot's rule: the entry for bci, else the closest below it); 0 when
 * not known. *end: the bytes the table takes, its terminator included (0
 * when it runs past len). */
static int64_t line_in(const uint8_t *t, size_t len, int32_t bci, size_t *end)
{
    size_t at = 0;
    int32_t b = 0, l = 0, best_bci = 0;
    int64_t best = 0;
    bool found = false;

    *end = 0;
    for (;;) {
        if (at >= len)
            break;
        if (t[at] == 0) {
            *end = at + 1;
            break;
        }
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
        if (found)
            continue; /* on to the end, for *end */
        if (b == bci) {
            best = l;
            found = true;
        } else if (b < bci && b >= best_bci) {
            best_bci = b;
            best = l;
        }
    }
    return best > 0 ? best : 0;
}

/* The line number table of the ConstMethod at cm (code_size bytes of
 * code), read in pages up to its end or HS_MAX_LINE_TABLE bytes: a new
 * buffer and *len, or NULL. */
static uint8_t *line_table(const struct hs_mem *m, const struct hs_vm *vm, uint64_t cm,
                           uint16_t code_size, size_t *len)
{
    uint64_t table = cm + vm->const_size + code_size;
    uint8_t *t = malloc(HS_MAX_LINE_TABLE);
    size_t end;

    if (!t)
        return NULL;
    /* The table may end near the end of a mapping. */
    *len = 4096 - (table & 4095);
    if (rd(m, table, t, *len)) {
        free(t);
        return NULL;
    }
    while (line_in(t, *len, INT32_MAX, &end), end == 0 && *len < HS_MAX_LINE_TABLE) {
        size_t more = HS_MAX_LINE_TABLE - *len < 4096 ? HS_MAX_LINE_TABLE - *len : 4096;
        if (rd(m, table + *len, t + *len, more))
            break;
        *len += more;
    }
    if (end)
        *len = end;
    return t;
}

/* A method's name as read once: kept per Method* while the Method still
 * points at the same ConstMethod (a Method freed and its memory reused
 * for another has another). */
struct meth {
    uint64_t method, cm;
    uint16_t code_size;
    bool lines;       /* it has a line number table */
    uint8_t *table;   /* the table, when at most HS_CACHE_TABLE_MAX bytes */
    size_t table_len; /* else read at each use */
    char *fn, *file;
    struct meth *next;
};

#define HS_CACHE_BUCKETS 1024
/* Methods kept per process at most; past it the cache starts over. */
#define HS_CACHE_MAX 8192
#define HS_CACHE_TABLE_MAX 2048

/* nmethods kept at most, and the PcDescs one may have to be kept (16
 * bytes each: 16 KiB) */
#define HS_CACHE_NM_MAX 2048
#define HS_CACHE_PCDESCS_MAX 1024
#define HS_PCDESC_BYTES 16

struct nmc;

struct hs_name_cache {
    struct meth *b[HS_CACHE_BUCKETS];
    struct nmc *nb[HS_CACHE_BUCKETS]; /* nmethods */
    unsigned n, nn;
    size_t bytes;
};

struct hs_name_cache *hs_name_cache__new(void)
{
    return calloc(1, sizeof(struct hs_name_cache));
}

/* The bytes a method entry holds, counted in c->bytes. */
static size_t meth_bytes(const struct meth *e)
{
    return sizeof(*e) + strlen(e->fn) + strlen(e->file) + 3 + e->table_len;
}

/* Drops the method entries; the nmethods stay, and their bytes in
 * c->bytes with them (zeroing the count here made it wrap below 0 when
 * one was dropped later). */
static void cache_clear(struct hs_name_cache *c)
{
    for (unsigned i = 0; i < HS_CACHE_BUCKETS; i++) {
        struct meth *e, *en;
        for (e = c->b[i]; e; e = en) {
            en = e->next;
            c->bytes -= meth_bytes(e);
            free(e->table);
            free(e);
        }
        c->b[i] = NULL;
    }
    c->n = 0;
}

static void nmc_drop(struct hs_name_cache *c, struct nmc **pp);

void hs_name_cache__free(struct hs_name_cache *c)
{
    if (!c)
        return;
    cache_clear(c);
    for (unsigned i = 0; i < HS_CACHE_BUCKETS; i++) {
        while (c->nb[i])
            nmc_drop(c, &c->nb[i]);
    }
    free(c);
}

size_t hs_name_cache__bytes(const struct hs_name_cache *c)
{
    return c ? c->bytes : 0;
}

static unsigned meth_bucket(uint64_t method)
{
    return (unsigned)((method >> 3) * 0x9E3779B97F4A7C15ull >> 40) % HS_CACHE_BUCKETS;
}

/* Method's name, class and file read from its metadata (no line): a new
 * cache entry, not linked, or NULL. */
static struct meth *meth_read(const struct hs_mem *m, const struct hs_vm *vm, uint64_t method,
                              uint64_t cm)
{
    static char klass[HS_NAME_MAX_SYMBOL], name[HS_NAME_MAX_SYMBOL], file[HS_NAME_MAX_SYMBOL];
    uint64_t cp, holder, ksym;
    uint16_t name_idx, src_idx;
    uint32_t flags = 0;
    int32_t cp_len;
    struct meth *e;

    if (rd(m, cm + vm->cm_constants, &cp, 8) || rd(m, cm + vm->cm_name, &name_idx, 2) ||
        rd(m, cp + vm->cp_length, &cp_len, 4) || rd(m, cp + vm->cp_holder, &holder, 8) ||
        rd(m, holder + vm->klass_name, &ksym, 8))
        return NULL;
    if (cp_len <= 0 || cp_len > 65536 || !cp_symbol(m, vm, cp, cp_len, name_idx, name) ||
        !symbol(m, vm, ksym, klass))
        return NULL;
    /* The class as Java writes it: java/util/HashMap -> java.util.HashMap. */
    for (char *c = klass; *c; c++) {
        if (*c == '/')
            *c = '.';
    }
    file[0] = '\0';
    if (rd(m, cp + vm->cp_source, &src_idx, 2) == 0 && src_idx)
        cp_symbol(m, vm, cp, cp_len, src_idx, file);
    size_t lk = strlen(klass), ln = strlen(name), lf = strlen(file);
    e = calloc(1, sizeof(*e) + lk + ln + lf + 3);
    if (!e)
        return NULL;
    e->method = method;
    e->cm = cm;
    e->fn = (char *)(e + 1);
    memcpy(e->fn, klass, lk);
    e->fn[lk] = '.';
    memcpy(e->fn + lk + 1, name, ln + 1);
    e->file = e->fn + lk + ln + 2;
    memcpy(e->file, file, lf + 1);
    if (rd(m, cm + vm->cm_code_size, &e->code_size, 2) == 0 &&
        rd(m, cm + vm->cm_flags, &flags, vm->cm_flags_size) == 0)
        e->lines = (flags & vm->has_lines_flag) != 0;
    if (e->lines) {
        size_t len;
        uint8_t *t = line_table(m, vm, cm, e->code_size, &len);
        if (t && len <= HS_CACHE_TABLE_MAX) {
            e->table = realloc(t, len);
            e->table_len = len;
            if (!e->table) {
                e->table = t;
            }
        } else {
            free(t);
        }
    }
    return e;
}

/* Method's entry: from c while its ConstMethod is the same (one read of
 * the process's memory), else read and kept; NULL when it cannot be read.
 * Without c (NULL) the entry is the caller's to free (*own). */
static struct meth *meth_get(const struct hs_mem *m, const struct hs_vm *vm,
                             struct hs_name_cache *c, uint64_t method, bool *own)
{
    uint64_t cm;
    struct meth **pp = NULL, *e = NULL, *ne;

    *own = false;
    if (rd(m, method + vm->method_const, &cm, 8) || !cm)
        return NULL;
    if (c) {
        for (pp = &c->b[meth_bucket(method)]; (e = *pp); pp = &e->next) {
            if (e->method == method)
                break;
        }
        if (e && e->cm == cm)
            return e;
        if (e) {
            /* Its Method another's now: the old entry goes. */
            *pp = e->next;
            c->n--;
            c->bytes -= meth_bytes(e);
            free(e->table);
            free(e);
        }
    }
    ne = meth_read(m, vm, method, cm);
    if (!ne || !c) {
        *own = ne != NULL;
        return ne;
    }
    if (c->n >= HS_CACHE_MAX)
        cache_clear(c);
    pp = &c->b[meth_bucket(method)];
    ne->next = *pp;
    *pp = ne;
    c->n++;
    c->bytes += meth_bytes(ne);
    return ne;
}

/* Method's class and name (and line, of bytecode index bci, or of the
 * interpreted frame's bcp's low 28 bits when bcp28) into p. */
static bool method_part(const struct hs_mem *m, const struct hs_vm *vm, struct hs_name_cache *c,
                        uint64_t method, int32_t bci, uint32_t bcp28, struct part *p)
{
    bool own;
    struct meth *e = meth_get(m, vm, c, method, &own);

    if (!e)
        return false;
    snprintf(p->fn, sizeof(p->fn), "%s", e->fn);
    snprintf(p->file, sizeof(p->file), "%s", e->file);
    if (bcp28) {
        uint32_t b = (bcp28 - (uint32_t)(e->cm + vm->const_size)) & CX_HS_PC_OFF_MAX;
        bci = b < e->code_size ? (int32_t)b : -1;
    }
    p->line = 0;
    if (e->lines && bci >= 0 && bci < e->code_size) {
        size_t end, len;
        if (e->table) {
            p->line = line_in(e->table, e->table_len, bci, &end);
        } else {
            uint8_t *t = line_table(m, vm, e->cm, e->code_size, &len);
            if (t)
                p->line = line_in(t, len, bci, &end);
            free(t);
        }
    }
    if (own) {
        free(e->table);
        free(e);
    }
    return true;
}

/* Where an nmethod's debug information is: its PcDescs (n of them), its
 * scopes data, its metadata table (nmeta entries). False when it cannot be
 * read or is not sane. */
struct nm_data {
    uint64_t pcs, scopes, meta;
    int32_t n;
    uint64_t nmeta;
};

static bool nm_data(const struct hs_mem *m, const struct hs_vm *vm, uint64_t nm, struct nm_data *d)
{
    int32_t pcs_off, a, b;

    if (rd(m, nm + vm->nm_pcs, &pcs_off, 4) || pcs_off <= 0)
        return false;
    if (vm->data_outside) {
        /* JDK 25: PcDescs then scopes in the immutable data, the metadata
         * after the relocations in the mutable data. */
        uint64_t imm, mut;
        int32_t scopes_off;
        if (rd(m, nm + vm->nm_immutable, &imm, 8) ||
            rd(m, nm + vm->nm_scopes_data, &scopes_off, 4) ||
            rd(m, nm + vm->blob_mutable, &mut, 8) || rd(m, nm + vm->blob_reloc_size, &a, 4) ||
            rd(m, nm + vm->blob_mutable_size, &b, 4) || !imm || !mut || scopes_off < pcs_off ||
            a < 0 || b < a)
            return false;
        d->pcs = imm + (uint64_t)pcs_off;
        d->n = (scopes_off - pcs_off) / (int32_t)vm->pc_size;
        d->scopes = imm + (uint64_t)scopes_off;
        d->meta = mut + (uint64_t)a;
        d->nmeta = (uint64_t)(b - a) / 8;
        return true;
    }
    /* Before: offsets from the nmethod, scopes at CompiledMethod's pointer
     * (just after the metadata). */
    if (rd(m, nm + vm->cm_scopes, &d->scopes, 8) || rd(m, nm + vm->nm_metadata, &a, 4) ||
        rd(m, nm + vm->nm_deps, &b, 4) || a <= 0 || d->scopes < nm + (uint64_t)a)
        return false;
    d->pcs = nm + (uint64_t)pcs_off;
    d->n = (b - pcs_off) / (int32_t)vm->pc_size;
    d->meta = nm + (uint64_t)a;
    d->nmeta = (d->scopes - d->meta) / 8;
    return true;
}

/* An nmethod's debug information as read: kept by its address while its
 * Method* and compile id are the same (an nmethod freed and another made
 * there has another compile id). */
struct nmc {
    uint64_t nm, method;
    int32_t compile_id;
    struct nm_data d;
    uint8_t *pcs; /* d.n PcDescs */
    struct nmc *next;
};

/* The bytes an nmethod entry of n PcDescs holds, counted in c->bytes. */
static size_t nmc_bytes(int32_t n)
{
    return sizeof(struct nmc) + (size_t)n * HS_PCDESC_BYTES;
}

static void nmc_drop(struct hs_name_cache *c, struct nmc **pp)
{
    struct nmc *e = *pp;

    *pp = e->next;
    c->nn--;
    c->bytes -= nmc_bytes(e->d.n);
    free(e->pcs);
    free(e);
}

/* The PcDescs of the nmethod at nm (of method, compile id cid) and where
 * its debug information is: from c when kept, else read (and kept when
 * small enough). Returns the PcDescs (*tofree set when the caller frees
 * them), or NULL. */
static const uint8_t *nm_pcs(const struct hs_mem *m, const struct hs_vm *vm,
                             struct hs_name_cache *c, uint64_t nm, uint64_t method, int32_t cid,
                             struct nm_data *d, uint8_t **tofree)
{
    struct nmc **pp = NULL, *e = NULL;
    uint8_t *pcs = NULL;

    *tofree = NULL;
    if (c) {
        for (pp = &c->nb[meth_bucket(nm)]; (e = *pp); pp = &e->next) {
            if (e->nm == nm)
                break;
        }
        if (e && e->method == method && e->compile_id == cid) {
            *d = e->d;
            return e->pcs;
        }
        if (e)
            nmc_drop(c, pp);
    }
    if (!nm_data(m, vm, nm, d) || d->n <= 0 || d->n > HS_MAX_PCDESCS ||
        !(pcs = malloc((size_t)d->n * vm->pc_size)) ||
        rd(m, d->pcs, pcs, (size_t)d->n * vm->pc_size)) {
        free(pcs);
        return NULL;
    }
    if (!c || vm->pc_size != HS_PCDESC_BYTES || d->n > HS_CACHE_PCDESCS_MAX ||
        !(e = calloc(1, sizeof(*e)))) {
        *tofree = pcs;
        return pcs;
    }
    if (c->nn >= HS_CACHE_NM_MAX) {
        for (unsigned i = 0; i < HS_CACHE_BUCKETS; i++) {
            while (c->nb[i])
                nmc_drop(c, &c->nb[i]);
        }
    }
    e->nm = nm;
    e->method = method;
    e->compile_id = cid;
    e->d = *d;
    e->pcs = pcs;
    pp = &c->nb[meth_bucket(nm)];
    e->next = *pp;
    *pp = e;
    c->nn++;
    c->bytes += nmc_bytes(d->n);
    return pcs;
}

/* The scopes at pc offset pc_off of the nmethod at nm: (Method*, bci)
 * pairs, innermost first, into methods/bcis. Returns how many, 0 when the
 * nmethod has none there (its own method is shown), -1 when it is not the
 * nmethod the sample saw (tag: its Method*'s bits). */
static int scopes(const struct hs_mem *m, const struct hs_vm *vm, struct hs_name_cache *c,
                  uint64_t nm, uint32_t pc_off, uint16_t tag, uint64_t *methods, int32_t *bcis,
                  uint64_t *own)
{
    uint64_t method;
    struct nm_data d;
    int32_t n, lo, hi, decode = 0, cid = -1;
    const uint8_t *pcs;
    uint8_t *tofree;

    if (rd(m, nm + vm->cm_method, &method, 8) || (uint16_t)(method >> 3) != tag ||
        rd(m, nm + vm->nm_compile_id, &cid, 4))
        return -1;
    *own = method;
    if (!(pcs = nm_pcs(m, vm, c, nm, method, cid, &d, &tofree)))
        return 0;
    n = d.n;
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
    free(tofree);
    int k = 0;
    while (decode > 0 && k < HS_NAME_MAX_DEPTH) {
        uint8_t s[16];
        size_t at = 0;
        uint32_t sender, midx, bci;
        uint64_t mp;
        if (rd(m, d.scopes + (uint64_t)decode, s, sizeof(s)) ||
            !read_u5(s, sizeof(s), &at, &sender) || !read_u5(s, sizeof(s), &at, &midx) ||
            !read_u5(s, sizeof(s), &at, &bci) || midx == 0 || midx > d.nmeta ||
            rd(m, d.meta + 8 * (uint64_t)(midx - 1), &mp, 8) || !mp)
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

struct hs_name *hs_name__read(const struct hs_mem *m, const struct hs_vm *vm,
                              struct hs_name_cache *c, uint64_t addr, uint32_t aux, uint16_t tag,
                              const char **why)
{
    static struct part parts[HS_NAME_MAX_DEPTH];
    uint64_t methods[HS_NAME_MAX_DEPTH], own = 0, p;
    int32_t bcis[HS_NAME_MAX_DEPTH];
    char buf[128];
    int n;

    switch (CX_HS_TYPE(aux)) {
    case CX_HS_INTERPRETED:
        *why = "method unreadable";
        if (!method_part(m, vm, c, addr, -1, CX_HS_PC_OFF(aux), &parts[0]))
            return NULL;
        break;
    case CX_HS_COMPILED:
        n = scopes(m, vm, c, addr, CX_HS_PC_OFF(aux), tag, methods, bcis, &own);
        if (n < 0) {
            *why = "compiled method freed";
            return NULL;
        }
        *why = "method unreadable";
        if (n == 0)
            return method_part(m, vm, c, own, -1, 0, &parts[0]) ? name_new(parts, 1) : NULL;
        for (int i = 0; i < n; i++) {
            if (!method_part(m, vm, c, methods[i], bcis[i], 0, &parts[i]))
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
