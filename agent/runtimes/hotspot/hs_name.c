#include "hs_name.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void name_free(struct rt_obj *o)
{
    free(o);
}

static struct hs_name *name_new(const char *fn, const char *file)
{
    size_t lf = strlen(fn) + 1, ll = strlen(file) + 1;
    struct hs_name *n = malloc(sizeof(*n) + lf + ll);

    if (!n)
        return NULL;
    n->obj.refs = 1;
    n->obj.free = name_free;
    memcpy(n->data, fn, lf);
    memcpy(n->data + lf, file, ll);
    n->function = n->data;
    n->file = n->data + lf;
    n->bytes = sizeof(*n) + lf + ll;
    return n;
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

static struct hs_name *method_name(const struct hs_mem *m, const struct hs_vm *vm, uint64_t method,
                                   const char **why)
{
    static char klass[HS_NAME_MAX_SYMBOL], name[HS_NAME_MAX_SYMBOL], file[HS_NAME_MAX_SYMBOL];
    char fn[2 * HS_NAME_MAX_SYMBOL + 2];
    uint64_t cm, cp, holder, ksym;
    uint16_t name_idx, src_idx;
    int32_t cp_len;

    *why = "method unreadable";
    if (rd(m, method + vm->method_const, &cm, 8) || rd(m, cm + vm->cm_constants, &cp, 8) ||
        rd(m, cm + vm->cm_name, &name_idx, 2) || rd(m, cp + vm->cp_length, &cp_len, 4) ||
        rd(m, cp + vm->cp_holder, &holder, 8) || rd(m, holder + vm->klass_name, &ksym, 8))
        return NULL;
    if (cp_len <= 0 || cp_len > 65536 || !cp_symbol(m, vm, cp, cp_len, name_idx, name) ||
        !symbol(m, vm, ksym, klass))
        return NULL;
    /* The class as Java writes it: java/util/HashMap -> java.util.HashMap. */
    for (char *p = klass; *p; p++) {
        if (*p == '/')
            *p = '.';
    }
    file[0] = '\0';
    if (rd(m, cp + vm->cp_source, &src_idx, 2) == 0 && src_idx)
        cp_symbol(m, vm, cp, cp_len, src_idx, file);
    snprintf(fn, sizeof(fn), "%s.%s", klass, name);
    *why = NULL;
    return name_new(fn, file);
}

static struct hs_name *stub_name(const struct hs_mem *m, const struct hs_vm *vm, uint64_t blob,
                                 const char **why)
{
    char buf[128], fn[160];
    uint64_t p;

    *why = "stub unreadable";
    if (rd(m, blob + vm->blob_name, &p, 8) || rd(m, p, buf, sizeof(buf)) ||
        !memchr(buf, '\0', sizeof(buf)))
        return NULL;
    snprintf(fn, sizeof(fn), "[stub] %s", buf);
    *why = NULL;
    return name_new(fn, "");
}

struct hs_name *hs_name__read(const struct hs_mem *m, const struct hs_vm *vm, unsigned type,
                              uint64_t addr, const char **why)
{
    switch (type) {
    case CX_HS_INTERPRETED:
    case CX_HS_COMPILED:
        return method_name(m, vm, addr, why);
    case CX_HS_STUB:
        return stub_name(m, vm, addr, why);
    default:
        *why = "frame of a type not known";
        return NULL;
    }
}
