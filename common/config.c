#include "config.h"

#include <ctype.h>
#include <fcntl.h>
#include <strings.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"

#define CONFIG_FILE_MAX (1 << 20)

struct config {
    const struct config_def *defs;
    size_t n;
    char **values;
    bool *set;
};

struct config *config__new(const struct config_def *defs, size_t n)
{
    struct config *c = calloc(1, sizeof(*c));

    if (!c)
        return NULL;
    c->defs = defs;
    c->n = n;
    c->values = calloc(n, sizeof(*c->values));
    c->set = calloc(n, sizeof(*c->set));
    if (!c->values || !c->set)
        goto fail;
    for (size_t i = 0; i < n; i++) {
        if (defs[i].def && !(c->values[i] = strdup(defs[i].def)))
            goto fail;
    }
    return c;
fail:
    config__free(c);
    return NULL;
}

void config__free(struct config *c)
{
    if (!c)
        return;
    for (size_t i = 0; c->values && i < c->n; i++)
        free(c->values[i]);
    free(c->values);
    free(c->set);
    free(c);
}

/* Matches "sample-rate" against "sample_rate", "sample-rate" or, with
 * upper, "SAMPLE_RATE". */
static bool name_eq(const char *def, const char *s, size_t len)
{
    size_t i;

    for (i = 0; i < len && def[i]; i++) {
        char a = def[i], b = s[i];
        if (a == '-')
            a = '_';
        if (b == '-')
            b = '_';
        if (tolower((unsigned char)a) != tolower((unsigned char)b))
            return false;
    }
    return i == len && def[i] == '\0';
}

static long find(const struct config *c, const char *s, size_t len)
{
    for (size_t i = 0; i < c->n; i++) {
        if (name_eq(c->defs[i].name, s, len))
            return i;
    }
    return -1;
}

static int parse_bool(const char *v, bool *out)
{
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};

    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(v, yes[i]) == 0) {
            *out = true;
            return 0;
        }
        if (strcasecmp(v, no[i]) == 0) {
            *out = false;
            return 0;
        }
    }
    return -1;
}

static int parse_long(const char *v, long *out)
{
    char *end;
    long x;

    errno = 0;
    x = strtol(v, &end, 10);
    if (errno || end == v || *end != '\0')
        return -1;
    *out = x;
    return 0;
}

/* Checks and stores one value. `where` names its source for messages. */
static int set_value(struct config *c, size_t i, const char *v, const char *where, char *err,
                     size_t errlen)
{
    const struct config_def *d = &c->defs[i];
    char *copy;
    long x;
    bool b;

    if (d->type == CONFIG_INT) {
        if (parse_long(v, &x) || x < d->min || x > d->max) {
            snprintf(err, errlen, "%s: %s must be a whole number from %ld to %ld, not '%s'", where,
                     d->name, d->min, d->max, v);
            return -1;
        }
    } else if (d->type == CONFIG_BOOL && parse_bool(v, &b)) {
        snprintf(err, errlen, "%s: %s must be true or false, not '%s'", where, d->name, v);
        return -1;
    }
    copy = strdup(v);
    if (!copy) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    free(c->values[i]);
    c->values[i] = copy;
    c->set[i] = true;
    return 0;
}

static char *trim(char *s)
{
    char *e;

    while (isspace((unsigned char)*s))
        s++;
    e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

int config__load_file(struct config *c, const char *path, bool must_exist, char *err, size_t errlen)
{
    struct buf b;
    char where[512];
    int lineno = 0, ret = -1, r;
    char *line, *next;

    buf__init(&b, CONFIG_FILE_MAX);
    /* Symlinks followed: ConfigMap mounts are links. Only root writes here. */
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    r = fd < 0 ? -errno : buf__read_fd(&b, fd);
    if (fd >= 0)
        close(fd);
    if (r == -ENOENT && !must_exist) {
        ret = 0;
        goto out;
    }
    if (r) {
        snprintf(err, errlen, "config file %s: %s", path,
                 r == -E2BIG ? "larger than 1 MiB" : strerror(-r));
        goto out;
    }
    for (line = b.data; line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *s = trim(line);
        if (!*s)
            continue;
        snprintf(where, sizeof(where), "%s:%d", path, lineno);
        char *eq = strchr(s, '=');
        if (!eq) {
            snprintf(err, errlen, "%s: expected 'key = value'", where);
            goto out;
        }
        *eq = '\0';
        char *key = trim(s), *val = trim(eq + 1);
        if (strlen(val) >= 2 && (val[0] == '"' || val[0] == '\'') &&
            val[strlen(val) - 1] == val[0]) {
            val[strlen(val) - 1] = '\0';
            val++;
        }
        long i = find(c, key, strlen(key));
        if (i < 0) {
            snprintf(err, errlen, "%s: unknown key '%s'", where, key);
            goto out;
        }
        if (set_value(c, i, val, where, err, errlen))
            goto out;
    }
    ret = 0;
out:
    buf__free(&b);
    return ret;
}

int config__load_env(struct config *c, char *err, size_t errlen)
{
    char var[128], where[160];

    for (size_t i = 0; i < c->n; i++) {
        size_t k = snprintf(var, sizeof(var), "CODEXRAY_");
        for (const char *p = c->defs[i].name; *p && k < sizeof(var) - 1; p++)
            var[k++] = *p == '-' ? '_' : toupper((unsigned char)*p);
        var[k] = '\0';
        const char *v = getenv(var);
        if (!v)
            continue;
        snprintf(where, sizeof(where), "environment %s", var);
        if (set_value(c, i, v, where, err, errlen))
            return -1;
    }
    return 0;
}

int config__load_args(struct config *c, int argc, char **argv, char *err, size_t errlen)
{
    for (int a = 0; a < argc; a++) {
        const char *arg = argv[a], *val = NULL;
        char where[160];

        if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0') {
            snprintf(err, errlen, "unexpected argument '%s'", arg);
            return -1;
        }
        const char *name = arg + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        long i = find(c, name, len);
        /* --no-NAME turns a boolean that is on by default off (bare only:
         * --no-NAME=true would read both ways). */
        if (i < 0 && !eq && len > 3 && strncmp(name, "no-", 3) == 0) {
            i = find(c, name + 3, len - 3);
            if (i >= 0 && c->defs[i].type == CONFIG_BOOL)
                val = "false";
            else
                i = -1;
        }
        /* Only dashes in flags: --sample_rate is not a flag. */
        if (i < 0 || memchr(name, '_', len)) {
            snprintf(err, errlen, "unknown flag '--%.*s'", (int)len, name);
            return -1;
        }
        if (val) {
            /* --no-NAME */
        } else if (eq) {
            val = eq + 1;
        } else if (c->defs[i].type == CONFIG_BOOL) {
            val = "true";
        } else if (a + 1 < argc) {
            val = argv[++a];
        } else {
            snprintf(err, errlen, "flag --%s needs a value", c->defs[i].name);
            return -1;
        }
        snprintf(where, sizeof(where), "flag --%s", c->defs[i].name);
        if (set_value(c, i, val, where, err, errlen))
            return -1;
    }
    return 0;
}

static size_t must_find(const struct config *c, const char *name)
{
    long i = find(c, name, strlen(name));

    if (i < 0)
        abort(); /* a programming error: every name asked for is defined */
    return i;
}

const char *config__str(const struct config *c, const char *name)
{
    return c->values[must_find(c, name)];
}

long config__int(const struct config *c, const char *name)
{
    long x = 0;
    const char *v = c->values[must_find(c, name)];

    if (v)
        parse_long(v, &x);
    return x;
}

bool config__bool(const struct config *c, const char *name)
{
    bool b = false;
    const char *v = c->values[must_find(c, name)];

    if (v)
        parse_bool(v, &b);
    return b;
}

bool config__is_set(const struct config *c, const char *name)
{
    return c->set[must_find(c, name)];
}

void config__usage(const struct config_def *defs, size_t n, FILE *f)
{
    for (size_t i = 0; i < n; i++) {
        char flag[96];
        snprintf(flag, sizeof(flag), "--%s%s%s", defs[i].name, defs[i].metavar ? " " : "",
                 defs[i].metavar ? defs[i].metavar : "");
        fprintf(f, "  %-28s %s", flag, defs[i].help);
        if (defs[i].def && *defs[i].def && defs[i].type != CONFIG_BOOL)
            fprintf(f, " (default %s)", defs[i].def);
        else if (defs[i].type == CONFIG_BOOL && defs[i].def && strcmp(defs[i].def, "true") == 0)
            fprintf(f, " (on by default; --no-%s turns it off)", defs[i].name);
        fputc('\n', f);
    }
}

int config__load_all(struct config *c, int argc, char **argv, char *err, size_t errlen)
{
    /* The file's path can come from the environment or a flag: read those
     * first, then the file, then both again so they win over it. */
    if (config__load_env(c, err, errlen) || config__load_args(c, argc, argv, err, errlen))
        return -1;
    if (config__load_file(c, config__str(c, "config"), config__is_set(c, "config"), err, errlen))
        return -1;
    return config__load_env(c, err, errlen) || config__load_args(c, argc, argv, err, errlen) ? -1
                                                                                             : 0;
}

int config__wants_help_or_version(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return 1;
        if (strcmp(argv[i], "--version") == 0)
            return 2;
    }
    return 0;
}
