#include "kallsyms.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/buf.h"

#define KALLSYMS_MAX (64u << 20)

struct ksym {
    uint64_t addr;
    const char *name;
    const char *module;
};

struct kallsyms {
    struct ksym *syms;
    size_t n;
    char *text;
};

static int cmp_ksym(const void *a, const void *b)
{
    const struct ksym *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

struct kallsyms *kallsyms__parse(const char *text, size_t len, const char **why)
{
    struct kallsyms *ks = calloc(1, sizeof(*ks));
    size_t cap = 0, nonzero = 0;
    char *line, *next, *end;

    *why = "out of memory";
    if (!ks || !(ks->text = malloc(len + 1)))
        goto fail;
    memcpy(ks->text, text, len);
    ks->text[len] = '\0';
    end = ks->text + len;
    /* "ffffffff81000000 T _stext" or "ffffffffc0a01000 t foo\t[mod]" */
    for (line = ks->text; line < end; line = next) {
        char *nl = memchr(line, '\n', end - line);
        next = nl ? nl + 1 : end;
        if (nl)
            *nl = '\0';
        char *sp1 = strchr(line, ' ');
        if (!sp1 || !sp1[1] || sp1[2] != ' ')
            continue;
        char type = sp1[1];
        if (type != 't' && type != 'T' && type != 'w' && type != 'W')
            continue;
        char *name = sp1 + 3, *mod = strchr(name, '\t');
        const char *module = "";
        if (mod) {
            *mod++ = '\0';
            if (*mod == '[') {
                mod++;
                char *close = strchr(mod, ']');
                if (close)
                    *close = '\0';
                module = mod;
            }
        }
        *sp1 = '\0';
        char *hend;
        uint64_t addr = strtoull(line, &hend, 16);
        if (hend == line || *hend)
            continue;
        nonzero += addr != 0;
        if (ks->n == cap) {
            cap = cap ? cap * 2 : 65536;
            struct ksym *s = realloc(ks->syms, cap * sizeof(*s));
            if (!s)
                goto fail;
            ks->syms = s;
        }
        ks->syms[ks->n++] = (struct ksym){addr, name, module};
    }
    if (nonzero == 0) {
        *why = "every address in /proc/kallsyms is 0: kernel.kptr_restrict hides them "
               "(the agent needs root or CAP_SYSLOG, and kptr_restrict below 2)";
        goto fail;
    }
    qsort(ks->syms, ks->n, sizeof(*ks->syms), cmp_ksym);
    *why = NULL;
    return ks;
fail:
    kallsyms__free(ks);
    return NULL;
}

struct kallsyms *kallsyms__load(const char **why)
{
    struct kallsyms *ks = NULL;
    struct buf b;
    int r;

    buf__init(&b, KALLSYMS_MAX);
    r = buf__read_file(&b, AT_FDCWD, "/proc/kallsyms");
    if (r) {
        *why = r == -E2BIG ? "/proc/kallsyms is larger than 64 MiB" : "cannot read /proc/kallsyms";
        goto out;
    }
    ks = kallsyms__parse(b.data, b.len, why);
out:
    buf__free(&b);
    return ks;
}

void kallsyms__free(struct kallsyms *ks)
{
    if (!ks)
        return;
    free(ks->syms);
    free(ks->text);
    free(ks);
}

const char *kallsyms__lookup(const struct kallsyms *ks, uint64_t addr, const char **module)
{
    size_t lo = 0, hi = ks->n;

    /* The last symbol at or below addr. */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ks->syms[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    if (module)
        *module = ks->syms[lo - 1].module;
    return ks->syms[lo - 1].name;
}

size_t kallsyms__count(const struct kallsyms *ks)
{
    return ks->n;
}
