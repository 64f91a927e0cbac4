/* What the process table's first read of a new process costs the agent's
 * main thread: procs__exec (lazy, as on Linux 5.17 and later: nothing read)
 * then procs__get, as at the process's first sample, on live cc1 processes
 * (each waiting on its stdin, so its libraries are mapped), each read after
 * a 10 ms sleep so that its pages are as cold as after the agent's wakeup.
 * Thread CPU time; the first process (which opens every binary) apart.
 *
 *   build/bench/procs_read [N] [CC1]     (root: /proc/PID/environ, map_files)
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../agent/procs/procs.h"
#include "../agent/symbolize/binary.h"

static double thread_us(void)
{
    struct timespec t;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static uint64_t mono_ns(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000ull + t.tv_nsec;
}

/* The cgroup v2 id of this process's cgroup (its children's), as the exec
 * event would carry it; 0 when there is no cgroup2 at /sys/fs/cgroup. */
static uint64_t own_cgroup_id(void)
{
    char line[512] = "", path[600];
    struct stat st;
    FILE *f = fopen("/proc/self/cgroup", "re");

    while (f && fgets(line, sizeof(line), f) && strncmp(line, "0::", 3) != 0)
        line[0] = '\0';
    if (f)
        fclose(f);
    if (strncmp(line, "0::", 3) != 0)
        return 0;
    line[strcspn(line, "\n")] = '\0';
    snprintf(path, sizeof(path), "/sys/fs/cgroup%s", line + 3);
    return stat(path, &st) == 0 ? st.st_ino : 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 40;
    const char *cc1 = argc > 2 ? argv[2] : "/usr/lib/gcc/x86_64-linux-gnu/12/cc1";
    uint64_t cgid = own_cgroup_id();
    size_t maps = 0;

    if (n < 2 || n > 1000) {
        fprintf(stderr, "usage: procs_read [N: 2-1000] [CC1]\n");
        return 2;
    }
    struct binary_cache *bc = binary_cache__new("/proc");
    struct procs *ps = bc ? procs__new(bc, "/proc", NULL) : NULL;
    pid_t *kids = calloc(n, sizeof(*kids));
    int *in = calloc(n, sizeof(*in));
    double *us = calloc(n, sizeof(*us));
    if (!ps || !kids || !in || !us)
        return 1;
    procs__lazy_exec(ps, true);
    for (int i = 0; i < n; i++) {
        int p[2];
        if (pipe(p))
            return 1;
        kids[i] = fork();
        if (kids[i] == 0) {
            int null = open("/dev/null", O_WRONLY);
            dup2(p[0], 0);
            dup2(null, 1);
            dup2(null, 2);
            close(p[1]);
            execl(cc1, "cc1", "-quiet", "-", (char *)NULL);
            _exit(127);
        }
        close(p[0]);
        in[i] = p[1];
    }
    usleep(300 * 1000); /* each has mapped its libraries */
    for (int i = 0; i < n; i++) {
        usleep(10 * 1000);
        uint64_t now = mono_ns();
        double t0 = thread_us();
        procs__exec(ps, kids[i], "cc1", cgid, now, now);
        struct proc *p = procs__get(ps, kids[i], "cc1", now);
        us[i] = thread_us() - t0;
        maps += p ? p->maps.n : 0;
    }
    qsort(us + 1, n - 1, sizeof(*us), cmp_double);
    printf("procs_read: %d cc1 processes (%.1f executable mappings each), cgroup id %s: first "
           "%.1f us, then median %.1f us a process (quartiles %.1f-%.1f)\n",
           n, (double)maps / n, cgid ? "known" : "none", us[0], us[1 + (n - 1) / 2],
           us[1 + (n - 1) / 4], us[1 + 3 * (n - 1) / 4]);
    for (int i = 0; i < n; i++) {
        close(in[i]);
        kill(kids[i], SIGKILL);
        waitpid(kids[i], NULL, 0);
    }
    procs__free(ps);
    binary_cache__free(bc);
    free(kids);
    free(in);
    free(us);
    return 0;
}
