/* What every store shares (store_common.h): label texts, label values,
 * application order and the building of merged results. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store_common.h"

const char *const store_identity_keys[STORE_N_IDENTITY] = {"container_id", "pod", "namespace",
                                                           "container", "systemd_unit"};

const char *const store_key_base_names[STACK_HASHER_BASES] = {"stack_base_a", "stack_base_b",
                                                              "stack_base_c", "stack_base_d"};

/* --- label texts --- */

static int cmp_label(const void *a, const void *b)
{
    const struct store_label *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : strcmp(x->value, y->value);
}

int store_labelset__text(struct buf *b, const struct store_labelset *ls)
{
    struct store_label sorted[64];
    size_t n = ls->n < 64 ? ls->n : 64;

    buf__reset(b);
    memcpy(sorted, ls->labels, n * sizeof(*sorted));
    qsort(sorted, n, sizeof(*sorted), cmp_label);
    for (size_t j = 0; j < n; j++) {
        if ((j && buf__append(b, "\x1f", 1)) ||
            buf__append(b, sorted[j].key, strlen(sorted[j].key)) || buf__append(b, "=", 1) ||
            buf__append(b, sorted[j].value, strlen(sorted[j].value)))
            return -E2BIG;
    }
    return 0;
}

int store_identity__text(struct buf *b, const char *const identity[STORE_N_IDENTITY])
{
    buf__reset(b);
    for (int i = 0; i < STORE_N_IDENTITY; i++) {
        const char *v = identity[i];
        if (v && *v &&
            ((!b->len && buf__append(b, "\x1f", 1)) ||
             buf__append(b, store_identity_keys[i], strlen(store_identity_keys[i])) ||
             buf__append(b, "=", 1) || buf__append(b, v, strlen(v)) || buf__append(b, "\x1f", 1)))
            return -E2BIG;
    }
    return 0;
}

int store_identity__needle(struct buf *b, int k, const char *value)
{
    buf__reset(b);
    if (buf__append(b, "\x1f", 1) ||
        buf__append(b, store_identity_keys[k], strlen(store_identity_keys[k])) ||
        buf__append(b, "=", 1) || buf__append(b, value, strlen(value)) ||
        buf__append(b, "\x1f", 2)) /* and the NUL */
        return -E2BIG;
    b->len--;
    return 0;
}

/* A key as store.h allows for a profile's other labels. */
static bool label_key_ok(const char *k)
{
    size_t n = strlen(k);

    if (!n || n > STORE_LABEL_KEY_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((k[i] >= 'a' && k[i] <= 'z') || (k[i] >= 'A' && k[i] <= 'Z') ||
              (k[i] >= '0' && k[i] <= '9') || k[i] == '_' || k[i] == '.' || k[i] == '-'))
            return false;
    return true;
}

static bool label_value_ok(const char *v)
{
    size_t n = strlen(v);

    if (n > STORE_LABEL_VALUE_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f)
            return false;
    return true;
}

bool store_label__reserved(const char *key)
{
    static const char *const others[] = {"host", "pid", "service_name"};

    for (int i = 0; i < STORE_N_IDENTITY; i++)
        if (strcmp(key, store_identity_keys[i]) == 0)
            return true;
    for (size_t i = 0; i < sizeof(others) / sizeof(*others); i++)
        if (strcmp(key, others[i]) == 0)
            return true;
    return false;
}

int store_profile__labels_text(struct buf *b, const struct store_profile *p)
{
    struct store_label sorted[STORE_MAX_LABELS];
    int err;

    if (p->nlabels > STORE_MAX_LABELS)
        return -E2BIG;
    if ((err = store_identity__text(b, p->identity)))
        return err;
    if (p->nlabels)
        memcpy(sorted, p->labels, p->nlabels * sizeof(*sorted));
    qsort(sorted, p->nlabels, sizeof(*sorted), cmp_label);
    for (size_t i = 0; i < p->nlabels; i++) {
        const struct store_label *l = &sorted[i];
        if (!label_key_ok(l->key) || store_label__reserved(l->key) || !label_value_ok(l->value) ||
            (i && strcmp(l->key, sorted[i - 1].key) == 0))
            return -E2BIG;
        if (!*l->value)
            continue;
        if ((!b->len && buf__append(b, "\x1f", 1)) || buf__append(b, l->key, strlen(l->key)) ||
            buf__append(b, "=", 1) || buf__append(b, l->value, strlen(l->value)) ||
            buf__append(b, "\x1f", 1))
            return -E2BIG;
    }
    return 0;
}

int store_match__needle(struct buf *b, const struct store_label_match *m)
{
    buf__reset(b);
    if (buf__append(b, "\x1f", 1) || buf__append(b, m->key, strlen(m->key)) ||
        buf__append(b, "=", 1) ||
        (m->value && (buf__append(b, m->value, strlen(m->value)) || buf__append(b, "\x1f", 1))) ||
        buf__append(b, "", 1)) /* the NUL */
        return -E2BIG;
    b->len--;
    return 0;
}

int store_match__spec(struct buf *b, const struct store_label_match *m, size_t n)
{
    struct buf needle;
    int err = 0;

    buf__reset(b);
    if (n > STORE_MAX_MATCHES)
        return -E2BIG;
    buf__init(&needle, 1 << 16);
    for (size_t i = 0; i < n && !err; i++) {
        err = store_match__needle(&needle, &m[i]);
        if (!err &&
            ((i && buf__append(b, "\x1e", 1)) || buf__append(b, m[i].negate ? "-" : "+", 1) ||
             buf__append(b, needle.data, needle.len)))
            err = -E2BIG;
    }
    buf__free(&needle);
    return err ?: buf__append(b, "", 1) ? -E2BIG : (b->len--, 0);
}

bool store_match__test(const char *labels, size_t len, const char *spec, size_t speclen)
{
    const char *end = spec + speclen;

    while (spec < end) {
        const char *c = memchr(spec, '\x1e', end - spec);
        if (!c)
            c = end;
        if (c - spec >= 2) {
            bool has = memmem(labels, len, spec + 1, c - spec - 1) != NULL;
            if (has == (*spec == '-'))
                return false;
        }
        spec = c + 1;
    }
    return true;
}

/* --- label values --- */

void store_values__free(struct store_values *v)
{
    if (!v)
        return;
    for (int k = 0; k < STORE_N_IDENTITY + 2; k++) {
        for (size_t i = 0; i < v->n[k]; i++)
            free(v->v[k][i]);
        free(v->v[k]);
    }
    for (size_t i = 0; i < v->nlabels; i++)
        free(v->labels[i]);
    free(v->labels);
    free(v);
}

int store_values__add(struct store_values *v, struct hmap *seen, int k, const char *val, size_t len)
{
    char key[4200];
    bool fresh;

    if (!len || len + 2 > sizeof(key) || v->n[k] >= STORE_MAX_VALUES)
        return 0;
    key[0] = (char)('0' + k);
    memcpy(key + 1, val, len);
    if (hmap__put(seen, key, len + 1, &fresh) < 0)
        return -ENOMEM;
    if (!fresh)
        return 0;
    char **nv = realloc(v->v[k], (v->n[k] + 1) * sizeof(*nv));
    if (!nv)
        return -ENOMEM;
    v->v[k] = nv;
    if (!(nv[v->n[k]] = strndup(val, len)))
        return -ENOMEM;
    v->n[k]++;
    return 0;
}

/* Adds "k=v" (len bytes) to v's other labels once. */
static int values_add_label(struct store_values *v, struct hmap *seen, const char *kv, size_t len)
{
    char key[STORE_LABEL_KEY_MAX + STORE_LABEL_VALUE_MAX + 8];
    bool fresh;

    if (len + 1 > sizeof(key) || v->nlabels >= STORE_MAX_VALUES)
        return 0;
    key[0] = 'L';
    memcpy(key + 1, kv, len);
    if (hmap__put(seen, key, len + 1, &fresh) < 0)
        return -ENOMEM;
    if (!fresh)
        return 0;
    char **nv = realloc(v->labels, (v->nlabels + 1) * sizeof(*nv));
    if (!nv)
        return -ENOMEM;
    v->labels = nv;
    if (!(nv[v->nlabels] = strndup(kv, len)))
        return -ENOMEM;
    v->nlabels++;
    return 0;
}

int store_values__add_identity(struct store_values *v, struct hmap *seen, const char *p)
{
    int err = 0;

    v->matched = 1;
    /* "\x1fk=v\x1fk=v\x1f": identity labels to their lists, others to labels */
    while (!err && p && *p) {
        const char *end = strchr(p + 1, '\x1f'), *eq;
        bool identity = false;
        if (!end)
            break;
        for (int k = 0; k < STORE_N_IDENTITY && !err; k++) {
            size_t kl = strlen(store_identity_keys[k]);
            eq = p + 1 + kl;
            if (eq < end && *eq == '=' && strncmp(p + 1, store_identity_keys[k], kl) == 0) {
                err = store_values__add(v, seen, k + 2, eq + 1, end - eq - 1);
                identity = true;
            }
        }
        eq = memchr(p + 1, '=', end - p - 1);
        if (!err && !identity && eq && eq > p + 1 && eq + 1 < end)
            err = values_add_label(v, seen, p + 1, end - p - 1);
        p = end;
        if (!p[1])
            break;
    }
    return err;
}

/* --- applications --- */

void store_apps__free(struct store_app *apps, size_t n)
{
    for (size_t i = 0; apps && i < n; i++) {
        free(apps[i].name);
        for (size_t j = 0; j < apps[i].nhosts; j++)
            free(apps[i].hosts[j]);
        free(apps[i].hosts);
    }
    free(apps);
}

static int cmp_app_cpu(const void *a, const void *b)
{
    const struct store_app *x = a, *y = b;
    if (x->cpu_ns != y->cpu_ns)
        return x->cpu_ns > y->cpu_ns ? -1 : 1;
    return strcmp(x->name, y->name);
}

void store_apps__sort(struct store_app *apps, size_t n)
{
    if (n)
        qsort(apps, n, sizeof(*apps), cmp_app_cpu);
}

/* --- merged results --- */

void store_merged__free(struct store_merged *m)
{
    if (!m)
        return;
    for (size_t i = 0; !m->frame_mem && i < m->nstacks; i++)
        free(m->stacks[i].frames);
    free(m->frame_mem);
    free(m->stacks);
    free(m->functions);
    buf__free(m->mem);
    free(m->mem);
    free(m);
}

int merged_builder__init(struct merged_builder *b, enum store_value value)
{
    memset(b, 0, sizeof(*b));
    b->value = value;
    b->m = calloc(1, sizeof(*b->m));
    b->fn = hmap__new();
    b->names = calloc(1, sizeof(*b->names));
    if (!b->m || !b->fn || !b->names) {
        free(b->names);
        b->names = NULL;
        return -ENOMEM;
    }
    buf__init(b->names, 1u << 30);
    b->m->mem = b->names;
    b->m->value = value;
    return 0;
}

void merged_builder__free(struct merged_builder *b)
{
    /* Not finished: the stacks' frames are offsets into b->frames, freed
     * with it (offsets are all 0, NULL, while it is). */
    if (b->m && !b->m->frame_mem) {
        b->m->frame_mem = b->frames;
        b->frames = NULL;
    }
    store_merged__free(b->m); /* and names, its mem */
    hmap__free(b->fn);
    free(b->name_off);
    free(b->frames);
    memset(b, 0, sizeof(*b));
}

int merged_builder__stack(struct merged_builder *b, int64_t samples, int64_t cpu_ns,
                          int64_t off_cpu_ns)
{
    struct store_merged *m = b->m;

    b->skip = b->value == STORE_VALUE_CPU ? !samples && !cpu_ns
                                          : !store_value__of(b->value, cpu_ns, off_cpu_ns);
    if (b->skip)
        return 0;
    if (m->nstacks == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        struct store_merged_stack *s = realloc(m->stacks, cap * sizeof(*s));
        if (!s)
            return -ENOMEM;
        m->stacks = s;
        b->cap = cap;
    }
    /* Its offset in b->frames until finish: the array moves as it grows. */
    m->stacks[m->nstacks++] =
        (struct store_merged_stack){.frames = (uint32_t *)(uintptr_t)b->nframes,
                                    .nframes = 0,
                                    .samples = samples,
                                    .cpu_ns = cpu_ns,
                                    .off_cpu_ns = off_cpu_ns};
    return 0;
}

long merged_builder__function(struct merged_builder *b, const void *key, size_t len)
{
    long li = hmap__put(b->fn, key, len, NULL);
    return li < 0 ? -ENOMEM : li;
}

int merged_builder__frame(struct merged_builder *b, const void *key, size_t len)
{
    if (b->skip)
        return 0;
    long li = merged_builder__function(b, key, len);
    return li < 0 ? (int)li : merged_builder__frame_of(b, (uint32_t)li);
}

int merged_builder__grow_frames(struct merged_builder *b)
{
    size_t cap = b->frames_cap ? b->frames_cap * 2 : 4096;
    uint32_t *f = realloc(b->frames, cap * sizeof(*f));

    if (!f)
        return -ENOMEM;
    b->frames = f;
    b->frames_cap = cap;
    return 0;
}

size_t merged_builder__nfunctions(const struct merged_builder *b)
{
    return hmap__len(b->fn);
}

const void *merged_builder__key(const struct merged_builder *b, size_t i, size_t *len)
{
    return hmap__key(b->fn, i, len);
}

int merged_builder__finish(struct merged_builder *b, int64_t profiles,
                           void (*name_of)(void *ctx, size_t i, const void *key, size_t len,
                                           const char **name, const char **file),
                           void *ctx, struct store_merged **out)
{
    size_t nfn = hmap__len(b->fn);
    struct store_merged *m = b->m;
    int err = -ENOMEM;

    *out = NULL;
    b->name_off = malloc((nfn + 1) * 2 * sizeof(*b->name_off));
    if (!b->name_off)
        goto out;
    /* Names into one buffer first: its pointers are fixed once it stops growing. */
    for (size_t i = 0; i < nfn; i++) {
        const char *name = NULL, *file = NULL;
        size_t len;
        const void *key = hmap__key(b->fn, i, &len);
        name_of(ctx, i, key, len, &name, &file);
        if (!name)
            name = "?";
        if (!file)
            file = "";
        b->name_off[2 * i] = b->names->len;
        int r1 = buf__append(b->names, name, strlen(name) + 1);
        b->name_off[2 * i + 1] = b->names->len;
        if ((err = r1 ? r1 : buf__append(b->names, file, strlen(file) + 1)))
            goto out;
    }
    err = -ENOMEM;
    m->functions = calloc(nfn + 1, sizeof(*m->functions));
    if (!m->functions)
        goto out;
    for (size_t i = 0; i < nfn; i++)
        m->functions[i] = (struct store_function){b->names->data + b->name_off[2 * i],
                                                  b->names->data + b->name_off[2 * i + 1]};
    m->nfunctions = nfn;
    m->profiles = profiles;
    /* Offsets into pointers, now that the frames stay where they are
     * (never NULL, even with no stack: it marks where they live). */
    m->frame_mem = b->frames ? b->frames : malloc(sizeof(*b->frames));
    if (!m->frame_mem)
        goto out;
    b->frames = NULL;
    for (size_t i = 0; i < m->nstacks; i++)
        m->stacks[i].frames = m->frame_mem + (uintptr_t)m->stacks[i].frames;
    *out = m;
    b->m = NULL;
    b->names = NULL;
    err = 0;
out:
    merged_builder__free(b);
    return err;
}
