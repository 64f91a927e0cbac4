// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* An empty tp_btf/sched_switch program: what the hook alone costs each
 * context switch (the tracepoint, the BPF dispatch, the indirect call),
 * the floor under any off-CPU profiler's program there. bench/switch_floor
 * loads it for offcpu_bench.py's "hook" mode. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

SEC("tp_btf/sched_switch")
int BPF_PROG(cx_switch_floor, bool preempt, struct task_struct *prev, struct task_struct *next)
{
    return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
