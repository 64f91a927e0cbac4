/* Loads each program of a BPF object on its own and says what the kernel's
 * verifier made of it: a load of the whole object stops at the first
 * program refused, and the first complaint is all it shows; one program at
 * a time shows every program's.
 *
 *   bpf_each OBJECT       (as root; make test-kernels runs it in its guests)
 *
 * Per program: "prog NAME: loaded" or "prog NAME: refused (ERR)" followed by
 * the last lines of the verifier's log. Exits 0 when every program loaded. */
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAIL_LINES 12

static char *logbuf;
static size_t loglen, logcap;

/* libbpf's messages, kept for the program being loaded (its warnings carry
 * the verifier's log when a load fails). */
static int keep(enum libbpf_print_level level, const char *fmt, va_list ap)
{
    char line[65536];
    int n;

    if (level == LIBBPF_DEBUG)
        return 0;
    n = vsnprintf(line, sizeof(line), fmt, ap);
    if (n < 0)
        return 0;
    if ((size_t)n >= sizeof(line))
        n = sizeof(line) - 1;
    if (loglen + n + 1 > logcap) {
        size_t cap = (loglen + n + 1) * 2;
        char *p = realloc(logbuf, cap);
        if (!p)
            return 0;
        logbuf = p;
        logcap = cap;
    }
    memcpy(logbuf + loglen, line, n);
    loglen += n;
    logbuf[loglen] = '\0';
    return 0;
}

/* The verifier's log is between libbpf's BEGIN and END markers; its last
 * lines are the complaint. Without the markers, libbpf's own lines. */
static void print_tail(void)
{
    const char *begin = logbuf ? strstr(logbuf, "-- BEGIN PROG LOAD LOG --\n") : NULL;
    const char *end = begin ? strstr(begin, "-- END PROG LOAD LOG --") : NULL;
    const char *from, *p;
    int lines = 0;

    if (!begin || !end) {
        for (p = logbuf; p && *p;) {
            const char *nl = strchr(p, '\n');
            int len = nl ? (int)(nl - p) : (int)strlen(p);
            if (strstr(p, "libbpf:") == p && len > 0)
                printf("    %.*s\n", len, p);
            p = nl ? nl + 1 : NULL;
        }
        return;
    }
    begin += strlen("-- BEGIN PROG LOAD LOG --\n");
    /* Back from the end, TAIL_LINES lines. */
    for (from = end; from > begin; from--) {
        if (from[-1] == '\n' && from != end && ++lines > TAIL_LINES)
            break;
    }
    if (from > begin)
        printf("    ...\n");
    for (p = from; p < end;) {
        const char *nl = memchr(p, '\n', end - p);
        int len = nl ? (int)(nl - p) : (int)(end - p);
        printf("    %.*s\n", len, p);
        p = nl ? nl + 1 : end;
    }
}

int main(int argc, char **argv)
{
    struct bpf_object *obj;
    struct bpf_program *prog;
    char names[64][128];
    int n = 0, refused = 0;

    if (argc != 2) {
        fprintf(stderr, "usage: bpf_each OBJECT\n");
        return 2;
    }
    libbpf_set_print(keep);
    obj = bpf_object__open_file(argv[1], NULL);
    if (!obj) {
        fprintf(stderr, "bpf_each: cannot open %s: %s\n", argv[1], strerror(errno));
        return 2;
    }
    bpf_object__for_each_program(prog, obj)
    {
        if (n < 64)
            snprintf(names[n++], sizeof(names[0]), "%s", bpf_program__name(prog));
    }
    bpf_object__close(obj);

    for (int i = 0; i < n; i++) {
        int err;

        obj = bpf_object__open_file(argv[1], NULL);
        if (!obj)
            return 2;
        bpf_object__for_each_program(prog, obj)
        {
            bpf_program__set_autoload(prog, strcmp(bpf_program__name(prog), names[i]) == 0);
        }
        loglen = 0;
        if (logbuf)
            logbuf[0] = '\0';
        err = bpf_object__load(obj);
        /* Prog array slots are filled after every program loaded: a slot
         * whose target was not loaded here fails then, the verifier's word
         * on this program already given. */
        if (err && logbuf && strstr(logbuf, "failed to initialize slot") &&
            !strstr(logbuf, "program load failed")) {
            printf("prog %s: loaded (alone: prog array slots of the others left empty)\n",
                   names[i]);
        } else if (err) {
            refused++;
            printf("prog %s: refused (%s)\n", names[i], strerror(-err));
            print_tail();
        } else {
            printf("prog %s: loaded\n", names[i]);
        }
        fflush(stdout);
        bpf_object__close(obj);
    }
    free(logbuf);
    return refused ? 1 : 0;
}
