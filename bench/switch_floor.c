/* Loads and attaches bench/switch_floor.bpf.c's empty sched_switch program
 * until SIGINT or SIGTERM: offcpu_bench.py's "hook" mode, the cost of the
 * hook itself under the off-CPU programs'. Says "attached" on stderr once
 * it is.
 *
 *     switch_floor OBJECT
 */
#include <bpf/libbpf.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

int main(int argc, char **argv)
{
    struct bpf_object *obj = NULL;
    struct bpf_program *prog;
    struct bpf_link *link = NULL;
    int err = 1;

    if (argc != 2) {
        fprintf(stderr, "usage: switch_floor OBJECT\n");
        return 2;
    }
    obj = bpf_object__open_file(argv[1], NULL);
    if (!obj || bpf_object__load(obj)) {
        fprintf(stderr, "switch_floor: cannot load %s\n", argv[1]);
        goto out;
    }
    prog = bpf_object__find_program_by_name(obj, "cx_switch_floor");
    link = prog ? bpf_program__attach(prog) : NULL;
    if (!link) {
        fprintf(stderr, "switch_floor: cannot attach to sched_switch\n");
        goto out;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    fprintf(stderr, "attached\n");
    while (!stop)
        pause();
    err = 0;
out:
    bpf_link__destroy(link);
    bpf_object__close(obj);
    return err;
}
