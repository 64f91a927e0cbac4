#include "cmdline_name.h"

#include <string.h>

/* Arguments looked at before the script, module or class: a JVM's options
 * run to a few dozen; past this the command line has no shape we name. */
#define ARGS_MAX 1024

enum family { FAM_NONE, FAM_PYTHON, FAM_JAVA, FAM_NODE, FAM_RUBY, FAM_PERL, FAM_SHELL };

/* One argument: not NUL-terminated (the last one may not be in the text). */
struct arg {
    const char *s;
    size_t n;
};

/* The options of a getopt-style interpreter: short options may be
 * clustered (python3 -um pylint, -Wignore), the first argument that is no
 * option is the script. */
struct lang {
    const char *value;             /* takes a value: the rest of the token, else the next arg */
    const char *attached;          /* takes only the rest of the token (perl -MFoo) */
    const char *digits;            /* takes only the digits right after it (perl -l0 -e) */
    const char *code;              /* inline code or stdin: no script to name */
    char module;                   /* python -m: the value is the name */
    bool plus;                     /* shells: +o name takes a value too */
    const char *const *long_value; /* take the next argument unless given as --opt=value */
    const char *const *long_code;
    const char *const *ext; /* stripped from the script's base name */
    /* NULL members: none. */
};

static const char *const py_long_value[] = {"--check-hash-based-pycs", NULL};
static const char *const py_ext[] = {".py", ".pyw", NULL};
/* Node's options with a value (node --help); listing one that only takes
 * "=value" is harmless: without it the command line is not valid. */
// clang-format off
static const char *const node_long_value[] = {
    "--require", "--import", "--loader", "--experimental-loader", "--conditions", "--input-type",
    "--title", "--redirect-warnings", "--diagnostic-dir", "--env-file", "--env-file-if-exists",
    "--icu-data-dir", "--openssl-config", "--tls-cipher-list", "--unhandled-rejections",
    "--dns-result-order", "--report-dir", "--report-directory", "--report-filename",
    "--report-signal", "--heapsnapshot-signal", "--heapsnapshot-near-heap-limit",
    "--cpu-prof-dir", "--cpu-prof-name", "--cpu-prof-interval", "--heap-prof-dir",
    "--heap-prof-name", "--heap-prof-interval", "--disable-warning", "--watch-path",
    "--experimental-policy", "--policy-integrity", "--inspect-port", "--debug-port",
    "--inspect-publish-uid", "--secure-heap", "--secure-heap-min", "--max-http-header-size",
    "--max-old-space-size", "--max-semi-space-size", "--stack-size", "--stack-trace-limit",
    "--experimental-config-file", "--localstorage-file", NULL};
// clang-format on
static const char *const node_long_code[] = {"--eval", "--print", "--interactive", "--run", NULL};
static const char *const node_ext[] = {".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", NULL};
static const char *const rb_long_value[] = {
    "--encoding", "--external-encoding", "--internal-encoding", "--enable", "--disable", "--dump",
    NULL};
static const char *const rb_ext[] = {".rb", NULL};
static const char *const pl_ext[] = {".pl", NULL};
static const char *const sh_long_value[] = {"--rcfile", "--init-file", NULL};
static const char *const sh_ext[] = {".sh", ".bash", NULL};

static const struct lang python = {
    .value = "WX", .code = "c", .module = 'm', .long_value = py_long_value, .ext = py_ext};
static const struct lang node = {.value = "rC",
                                 .code = "epi",
                                 .long_value = node_long_value,
                                 .long_code = node_long_code,
                                 .ext = node_ext};
static const struct lang ruby = {.value = "CIrE",
                                 .attached = "xFKW",
                                 .digits = "0T",
                                 .code = "e",
                                 .long_value = rb_long_value,
                                 .ext = rb_ext};
static const struct lang perl = {
    .value = "I", .attached = "MmxiFCdDV", .digits = "l0", .code = "eE", .ext = pl_ext};
static const struct lang shell = {
    .value = "oO", .code = "cs", .plus = true, .long_value = sh_long_value, .ext = sh_ext};

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_alnum(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Whether c is one of the options in set (NULL: none); c is never NUL. */
static bool has(const char *set, char c)
{
    return set && strchr(set, c);
}

static bool arg_is(struct arg a, const char *s)
{
    return a.n == strlen(s) && memcmp(a.s, s, a.n) == 0;
}

static bool arg_in(struct arg a, const char *const *list)
{
    for (; list && *list; list++) {
        if (arg_is(a, *list))
            return true;
    }
    return false;
}

static bool ends_with(const char *s, size_t n, const char *suffix)
{
    size_t k = strlen(suffix);
    return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

/* s is prefix, then an optional version ("3", "3.11"), then at most
 * `letters` lowercase letters (python3.11d, python3.13t). */
static bool versioned(const char *s, size_t n, const char *prefix, size_t letters)
{
    size_t k = strlen(prefix), i;

    if (n < k || memcmp(s, prefix, k) != 0)
        return false;
    i = k;
    if (i < n && is_digit(s[i])) {
        while (i < n && (is_digit(s[i]) || (s[i] == '.' && i + 1 < n && is_digit(s[i + 1]))))
            i++;
    }
    if (n - i > letters)
        return false;
    for (; i < n; i++) {
        if (s[i] < 'a' || s[i] > 'z')
            return false;
    }
    return true;
}

/* The family of an executable's base name (or of argv[0]'s). */
static enum family family_of(const char *s, size_t n)
{
    static const char *const shells[] = {"sh", "bash", "dash", "zsh", "ksh", "mksh", NULL};
    struct arg a = {s, n};

    if (versioned(s, n, "python", 3) ||
        (versioned(s, n, "pypy", 0) || (ends_with(s, n, "-c") && versioned(s, n - 2, "pypy", 0))))
        return FAM_PYTHON;
    if (arg_is(a, "java"))
        return FAM_JAVA;
    if (arg_is(a, "node") || arg_is(a, "nodejs"))
        return FAM_NODE;
    if (versioned(s, n, "ruby", 0))
        return FAM_RUBY;
    if (versioned(s, n, "perl", 0))
        return FAM_PERL;
    if (arg_in(a, shells))
        return FAM_SHELL;
    return FAM_NONE;
}

bool cmdline_name__interpreter(const char *exe)
{
    return exe && family_of(exe, strlen(exe)) != FAM_NONE;
}

/* The argument after *pos in cmdline[0..len), *pos moved past it. */
static bool next_arg(const char *cmdline, size_t len, size_t *pos, struct arg *a)
{
    const char *nul;

    if (*pos >= len)
        return false;
    a->s = cmdline + *pos;
    nul = memchr(a->s, '\0', len - *pos);
    a->n = nul ? (size_t)(nul - a->s) : len - *pos;
    *pos += a->n + 1;
    return true;
}

/* s[0..n) into out as a name: A-Z a-z 0-9 . _ - kept, any other byte '_',
 * cut at CMDLINE_NAME_MAX. False when it holds no letter or digit, or only
 * digits (a value taken for a script: node --stack-size 4096). */
static bool put_name(const char *s, size_t n, char *out, size_t outlen)
{
    size_t max = outlen ? outlen - 1 : 0, i;
    bool alnum = false, digits = true;

    if (max > CMDLINE_NAME_MAX)
        max = CMDLINE_NAME_MAX;
    if (n > max)
        n = max;
    for (i = 0; i < n; i++) {
        alnum |= is_alnum(s[i]);
        digits &= is_digit(s[i]);
    }
    if (!alnum || digits)
        return false;
    for (i = 0; i < n; i++) {
        char c = s[i];
        out[i] = is_alnum(c) || c == '.' || c == '_' || c == '-' ? c : '_';
    }
    out[n] = '\0';
    return true;
}

/* The base name of path p[0..n) (trailing slashes dropped), into *b. */
static void base_name(const char *p, size_t n, struct arg *b)
{
    const char *slash;

    while (n > 1 && p[n - 1] == '/')
        n--;
    slash = memrchr(p, '/', n);
    b->s = slash ? slash + 1 : p;
    b->n = p + n - b->s;
}

/* A script's name: its base name without the first extension of ext
 * (".py" alone is no name); __main__.py (a package or directory run) goes by its
 * directory's name. */
static bool script_name(struct arg a, const char *const *ext, char *out, size_t outlen)
{
    struct arg b;

    base_name(a.s, a.n, &b);
    if (arg_is(b, "__main__.py") && b.s > a.s + 1) {
        base_name(a.s, b.s - 1 - a.s, &b);
        if (arg_is(b, "/"))
            return false;
    }
    if (arg_is(b, ".") || arg_is(b, "..") || arg_is(b, "/"))
        return false; /* node . : the directory's name is in its cwd, not read */
    for (; ext && *ext; ext++) {
        if (ends_with(b.s, b.n, *ext)) {
            b.n -= strlen(*ext);
            break;
        }
    }
    return put_name(b.s, b.n, out, outlen);
}

/* A getopt-style interpreter's command line after argv[0]. */
static bool getopt_name(const struct lang *l, const char *cmdline, size_t len, size_t pos,
                        char *out, size_t outlen)
{
    struct arg a;

    for (unsigned seen = 0; seen < ARGS_MAX && next_arg(cmdline, len, &pos, &a); seen++) {
        if (arg_is(a, "--")) {
            if (!next_arg(cmdline, len, &pos, &a))
                return false;
            return a.n > 0 && a.s[0] != '-' && script_name(a, l->ext, out, outlen);
        }
        if (a.n >= 2 && a.s[0] == '-' && a.s[1] == '-') {
            const char *eq = memchr(a.s, '=', a.n);
            struct arg opt = {a.s, eq ? (size_t)(eq - a.s) : a.n};
            if (arg_in(opt, l->long_code))
                return false;
            if (!eq && arg_in(opt, l->long_value) && !next_arg(cmdline, len, &pos, &a))
                return false;
            continue;
        }
        if (a.n >= 2 && (a.s[0] == '-' || (l->plus && a.s[0] == '+'))) {
            /* A cluster of short options: the first taking a value ends it. */
            for (size_t i = 1; i < a.n; i++) {
                char c = a.s[i];
                if (has(l->code, c))
                    return false;
                if (c == l->module || has(l->value, c)) {
                    struct arg v = {a.s + i + 1, a.n - i - 1};
                    if (v.n == 0 && !next_arg(cmdline, len, &pos, &v))
                        return false;
                    if (c == l->module)
                        return put_name(v.s, v.n, out, outlen);
                    break;
                }
                if (has(l->attached, c))
                    break;
                if (has(l->digits, c)) {
                    while (i + 1 < a.n && is_digit(a.s[i + 1]))
                        i++;
                }
            }
            continue;
        }
        /* The script; "" or "-" (stdin) is none. */
        return a.n > 0 && !arg_is(a, "-") && script_name(a, l->ext, out, outlen);
    }
    return false;
}

/* A jar's name: its base name without ".jar" and without a version from
 * a '-' followed by digits and a dot (app-1.2.0-SNAPSHOT.jar -> app). */
static bool jar_name(struct arg a, char *out, size_t outlen)
{
    struct arg b;

    base_name(a.s, a.n, &b);
    if (ends_with(b.s, b.n, ".jar"))
        b.n -= 4;
    for (size_t i = 1; i + 3 <= b.n; i++) {
        if (b.s[i] == '-' && is_digit(b.s[i + 1])) {
            size_t j = i + 1;
            while (j < b.n && is_digit(b.s[j]))
                j++;
            if (j + 1 < b.n && b.s[j] == '.' && is_digit(b.s[j + 1])) {
                b.n = i;
                break;
            }
        }
    }
    return put_name(b.s, b.n, out, outlen);
}

/* A class's simple name, as jps shows it: com.example.Main -> Main; a
 * source file run as a program (java Hello.java) by its base name. */
static bool class_name(struct arg a, char *out, size_t outlen)
{
    static const char *const java_ext[] = {".java", NULL};
    const char *dot;

    if (ends_with(a.s, a.n, ".java"))
        return script_name(a, java_ext, out, outlen);
    dot = memrchr(a.s, '.', a.n);
    if (dot)
        return put_name(dot + 1, a.s + a.n - (dot + 1), out, outlen);
    return put_name(a.s, a.n, out, outlen);
}

/* java [options] (-jar file | -m module[/class] | class | file.java): the
 * launcher's options that take the next argument (java --help). */
static bool java_name(const char *cmdline, size_t len, size_t pos, char *out, size_t outlen)
{
    static const char *const value[] = {"-cp",
                                        "-classpath",
                                        "--class-path",
                                        "-p",
                                        "--module-path",
                                        "--upgrade-module-path",
                                        "--add-modules",
                                        "--limit-modules",
                                        "--add-reads",
                                        "--add-exports",
                                        "--add-opens",
                                        "--patch-module",
                                        "--enable-native-access",
                                        "--source",
                                        "-d",
                                        "--describe-module",
                                        "--illegal-access",
                                        "--sun-misc-unsafe-memory-access",
                                        NULL};
    struct arg a;

    for (unsigned seen = 0; seen < ARGS_MAX && next_arg(cmdline, len, &pos, &a); seen++) {
        if (arg_is(a, "-jar"))
            return next_arg(cmdline, len, &pos, &a) && jar_name(a, out, outlen);
        if (arg_is(a, "-m") || arg_is(a, "--module") ||
            (a.n > 9 && memcmp(a.s, "--module=", 9) == 0)) {
            if (a.s[1] == '-' && a.n > 9) {
                a.s += 9;
                a.n -= 9;
            } else if (!next_arg(cmdline, len, &pos, &a)) {
                return false;
            }
            const char *slash = memchr(a.s, '/', a.n);
            if (!slash)
                return put_name(a.s, a.n, out, outlen); /* the module */
            return class_name((struct arg){slash + 1, a.s + a.n - (slash + 1)}, out, outlen);
        }
        if (arg_in(a, value)) {
            if (!next_arg(cmdline, len, &pos, &a))
                return false;
            continue;
        }
        if (a.n > 0 && a.s[0] == '@')
            return false; /* options from a file, not read */
        if (a.n > 0 && a.s[0] == '-')
            continue; /* -Xmx1g, -Dk=v, -XX:..., -javaagent:..., --add-opens=... */
        return a.n > 0 && class_name(a, out, outlen);
    }
    return false;
}

bool cmdline_name__derive(const char *exe, const char *cmdline, size_t len, char *out,
                          size_t outlen)
{
    enum family fam = exe ? family_of(exe, strlen(exe)) : FAM_NONE;
    char name[CMDLINE_NAME_MAX + 1];
    struct arg a0, b0;
    size_t pos = 0;
    bool ok = false;

    if (fam == FAM_NONE || !cmdline || !outlen || !next_arg(cmdline, len, &pos, &a0))
        return false;
    /* argv[0] names the interpreter (the kernel puts the shebang's
     * interpreter there); anything else was exec'd under another name or
     * rewrote its command line (setproctitle): its arguments are not ours
     * to read. */
    base_name(a0.s, a0.n, &b0);
    if (family_of(b0.s, b0.n) != fam)
        return false;
    switch (fam) {
    case FAM_PYTHON:
        ok = getopt_name(&python, cmdline, len, pos, name, sizeof(name));
        break;
    case FAM_NODE:
        ok = getopt_name(&node, cmdline, len, pos, name, sizeof(name));
        break;
    case FAM_RUBY:
        ok = getopt_name(&ruby, cmdline, len, pos, name, sizeof(name));
        break;
    case FAM_PERL:
        ok = getopt_name(&perl, cmdline, len, pos, name, sizeof(name));
        break;
    case FAM_SHELL:
        ok = getopt_name(&shell, cmdline, len, pos, name, sizeof(name));
        break;
    case FAM_JAVA:
        ok = java_name(cmdline, len, pos, name, sizeof(name));
        break;
    case FAM_NONE:
        break;
    }
    /* Cut again to the caller's room, which must still hold a name. */
    return ok && put_name(name, strlen(name), out, outlen);
}
