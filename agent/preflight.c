#include "preflight.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "caps.h"

#define PARANOID_UNKNOWN (-100)

/* How to let a container or a unit make the call, whichever runs it. */
#define SECCOMP_FIX                                                                                \
    "`--security-opt seccomp=unconfined` (docker run, podman run), `seccompProfile: {type: "       \
    "Unconfined}` (Kubernetes), a SystemCallFilter= that allows it (systemd)"

void preflight__explain(const char *call, int e, bool capable, int paranoid, char *out, size_t len)
{
    bool perf = strcmp(call, "perf_event_open()") == 0;
    char para[160] = "";

    if (e != EPERM && e != EACCES) {
        snprintf(out, len, "%s failed: %s", call, strerror(e));
        return;
    }
    if (!capable) {
        snprintf(out, len,
                 "%s was refused (%s): the agent lacks %s; run it as root or add the "
                 "capability (`--cap-add SYS_ADMIN`, which every engine knows, or `--cap-add %s` "
                 "where the engine knows it)",
                 call, strerror(e),
                 perf ? "CAP_PERFMON (or CAP_SYS_ADMIN)" : "CAP_BPF (or CAP_SYS_ADMIN)",
                 perf ? "PERFMON" : "BPF");
        return;
    }
    if (perf && paranoid > 2)
        snprintf(para, sizeof(para),
                 "; or kernel.perf_event_paranoid=%d (above 2 some kernels refuse even "
                 "CAP_PERFMON: `sysctl kernel.perf_event_paranoid=2` on the host)",
                 paranoid);
    snprintf(out, len,
             "%s was refused (%s) although the agent holds %s: the likely cause is a seccomp "
             "profile that blocks it (the default profiles of container engines do), fixed "
             "by " SECCOMP_FIX "; or a user namespace (rootless Podman, --userns): run the "
             "agent as root in the host's user namespace%s%s",
             call, strerror(e), perf ? "CAP_PERFMON or CAP_SYS_ADMIN" : "CAP_BPF or CAP_SYS_ADMIN",
             para,
             perf ? ""
                  : "; or kernel lockdown (/sys/kernel/security/lockdown in "
                    "`confidentiality` mode refuses BPF that reads kernel memory)");
}

int preflight__bpf(char *err, size_t errlen)
{
    int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "cx_preflight", 4, 4, 1, NULL);

    if (fd >= 0) {
        close(fd);
        return 0;
    }
    int e = errno;
    preflight__explain("bpf()", e, caps__have(CAP_BPF) || caps__have(CAP_SYS_ADMIN),
                       PARANOID_UNKNOWN, err, errlen);
    return -1;
}

static int read_paranoid(void)
{
    FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "re");
    int v = PARANOID_UNKNOWN;

    if (f) {
        if (fscanf(f, "%d", &v) != 1)
            v = PARANOID_UNKNOWN;
        fclose(f);
    }
    return v;
}

int preflight__perf_event(char *err, size_t errlen)
{
    struct perf_event_attr attr;
    int ncpus = libbpf_num_possible_cpus(), e = ENODEV;

    memset(&attr, 0, sizeof(attr));
    attr.size = sizeof(attr);
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_CPU_CLOCK;
    attr.sample_period = 10000000;
    attr.disabled = 1;
    for (int cpu = 0; cpu < (ncpus > 0 ? ncpus : 1); cpu++) {
        int fd = syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
        if (fd >= 0) {
            close(fd);
            return 0;
        }
        e = errno;
        if (e != ENODEV && e != ENOENT) /* not an offline CPU: the answer for all */
            break;
    }
    preflight__explain("perf_event_open()", e, caps__have(CAP_PERFMON) || caps__have(CAP_SYS_ADMIN),
                       read_paranoid(), err, errlen);
    return -1;
}
