#!/bin/sh
# /init of the test guest (tools/kernels/run.py boots it): PID 1 in an
# initramfs that holds busybox, the agent, its workloads and the shared
# libraries they load. Runs the checks, sends what they left (profiles,
# logs, exit codes) to the host as a base64 tar on its results port (cx.port=
# on the kernel's command line: ttyS1, the second serial port, by default;
# hvc0, a virtio console, on arm64), and powers off. The host reads the
# answers; nothing is judged here.
#
# The console gets "cx:" progress lines among the kernel's messages.
# Debian root's order: the packages' programs (dpkg, tar, where the host put
# them) ahead of busybox's applets of the same names, which --install leaves
# in /bin beside them (it keeps a file that is there), for the programs dpkg
# runs. This shell runs its own applets whatever PATH says: dpkg and
# dpkg-query are called by their paths.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
/bin/busybox --install -s /bin

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null
hostname cx-guest

CX=/opt/cx
AGENT=$CX/codexray-node-agent
R=/results
mkdir -p $R
SECS=$(sed -n 's/.*cx.secs=\([0-9]*\).*/\1/p' /proc/cmdline)
[ -n "$SECS" ] || SECS=5
PORT=$(sed -n 's/.*cx.port=\([a-zA-Z0-9]*\).*/\1/p' /proc/cmdline)
[ -n "$PORT" ] || PORT=ttyS1
# cx.round: the split workloads' round (cpu_split.c), where the host gives
# one; their own otherwise.
ROUND=$(sed -n 's/.*cx.round=\([0-9]*\).*/\1/p' /proc/cmdline)

say() { echo "cx: $*" > /dev/console; }
t0=$(cut -d' ' -f1 /proc/uptime)
say "init at ${t0}s of uptime: $(uname -r)"
uname -r > $R/uname
# The modules of the kernel under test the host put here (the results
# port's driver, where it is not built in), in their order.
while read -r m; do
    insmod "$CX/modules/$m" 2>> $R/modules.log || say "insmod $m failed: $(tail -1 $R/modules.log)"
done 2>/dev/null < $CX/modules.list
# The port's device node comes with its driver's probe.
n=0
while [ ! -e "/dev/$PORT" ] && [ $n -lt 50 ]; do
    sleep 0.1
    n=$((n + 1))
done
[ -e "/dev/$PORT" ] || say "no /dev/$PORT: no results will reach the host"
cut -d' ' -f1 /proc/uptime > $R/boot_s
if [ -r /sys/kernel/btf/vmlinux ]; then echo yes > $R/btf; else echo no > $R/btf; fi
nproc > $R/nproc

# The agent from its package where the host put one (arm64): dpkg -i on the
# image's dpkg database (its dependencies recorded as installed: the
# packages the image holds files of), its maintainer scripts run (no
# systemd here: the unit is not started), and everything below runs the
# agent it installed.
for deb in "$CX"/codexray-node-agent_*.deb; do
    [ -f "$deb" ] || continue
    say "dpkg -i ${deb##*/}"
    s=$(cut -d' ' -f1 /proc/uptime)
    /usr/bin/dpkg -i "$deb" > $R/dpkg.log 2>&1
    echo $? > $R/dpkg.rc
    e=$(cut -d' ' -f1 /proc/uptime)
    echo "$s $e" > $R/dpkg.time
    /usr/bin/dpkg-query -W -f '${Status} ${Version}\n' codexray-node-agent > $R/dpkg.status 2>&1
    # The postinst's deb-systemd-helper enables the unit as on a first
    # install (its link in multi-user.target.wants, which the host reads).
    readlink /etc/systemd/system/multi-user.target.wants/codexray-node-agent.service \
        > $R/dpkg.enabled 2>&1
    AGENT=/usr/bin/codexray-node-agent
    say "dpkg -i: $(cat $R/dpkg.rc), $(cat $R/dpkg.status)"
done
echo "$AGENT" > $R/agent.path

# record: one run of the agent for every workload (each start costs 5 to 50
# s of BPF verification under TCG), the frame-pointer cpu_split, the same
# code without frame pointers, cfi_split, and a Python 2:1 split; where the
# host put them, the same code with PAC-signed return addresses (pac_split),
# a Go 2:1 split (go_split) and a 2:1 split in code generated at run time,
# named by its perf map (jit_perfmap). The host reads each one's samples by
# its pid label. On failure, again with the debug log.
names=""
for f in "$CX"/*_split "$CX"/jit_perfmap; do
    [ -x "$f" ] && names="$names${f##*/} "
done
say "record: --duration $SECS, ${names}python"
# Until killed: under TCG the agent's start alone can take a minute.
pids=""
start() { # KEY COMMAND...: the workload in the background, its pid in KEY.pid
    key=$1
    shift
    "$@" > "$R/$key.workload" 2>&1 &
    echo $! > "$R/$key.pid"
    pids="$pids $!"
}
start fp $CX/cpu_split 100000 1 ${ROUND:+"$ROUND"}
start cfi $CX/cfi_split 100000 1 ${ROUND:+"$ROUND"}
[ -x $CX/pac_split ] && start pac $CX/pac_split 100000 1 ${ROUND:+"$ROUND"}
[ -x $CX/go_split ] && start go $CX/go_split 100000 ${ROUND:+"$ROUND"}
[ -x $CX/jit_perfmap ] && start jit $CX/jit_perfmap 100000 ${ROUND:+"$ROUND"}
start py python3 -S -I $CX/py_guest.py $R/py.cpu
sleep 1
s=$(cut -d' ' -f1 /proc/uptime)
date -u +%s > $R/record.launched
# The Python workload's own CPU time per hot function (py_guest.py) when
# the agent starts sampling and $SECS later: the split the samples are held
# to.
(
    while ! grep -q ' record: sample_rate_hz=' $R/record.log 2>/dev/null; do
        sleep 0.2
    done
    cp $R/py.cpu $R/py.cpu0
    sleep "$SECS"
    cp $R/py.cpu $R/py.cpu1
) &
cpu_watch=$!
$AGENT record --duration "$SECS" --output $R/record.pb.gz 2> $R/record.log
echo $? > $R/record.rc
# The watcher's second copy comes $SECS after it saw the sampling line,
# which can be after a quick agent has written its profile and exited:
# wait for it (killed, it left no py.cpu1 once on sid), unless the agent
# never sampled.
if grep -q ' record: sample_rate_hz=' $R/record.log; then
    wait $cpu_watch
else
    kill $cpu_watch 2>/dev/null
fi
e=$(cut -d' ' -f1 /proc/uptime)
echo "$s $e" > $R/record.time
if [ "$(cat $R/record.rc)" != 0 ]; then
    say "record: failed ($(cat $R/record.rc)); again with --log-level debug"
    $AGENT record --duration 1 --output $R/record-debug.pb.gz --log-level debug \
        2> $R/record-debug.log
fi
# shellcheck disable=SC2009 # all but the kernel threads, their CPU time
ps | grep -v " \[" > $R/record.ps
# shellcheck disable=SC2086 # one word per pid
kill $pids 2>/dev/null
# shellcheck disable=SC2086
wait $pids 2>/dev/null
say "record: done ($(cat $R/record.rc))"

# Daemon mode: two windows of 2 s (two window lines, 120 s at most), then
# SIGTERM, on which the agent writes its last window and exits 0.
say "daemon: --output-dir --interval 2 --kernel-stacks --off-cpu"
mkdir -p $R/daemon
$CX/cpu_split 100000 1 ${ROUND:+"$ROUND"} > $R/daemon.workload &
w=$!
echo $w > $R/daemon.pid
# A known user chain into system calls (main -> do_reads -> raw_read ->
# read(2)), for --kernel-stacks: kernel frames under it, whole to main.
$CX/syscall_heavy 100000 > $R/syscall.workload 2>&1 &
k=$!
echo $k > $R/syscall.pid
s=$(cut -d' ' -f1 /proc/uptime)
date -u +%s > $R/daemon.launched
# --config /dev/null: the flags alone, as before the package put its
# agent.conf in /etc/codexray (its endpoint a server the guest has not).
# --off-cpu: the sched_switch program must load on every kernel too.
$AGENT --config /dev/null --output-dir $R/daemon --interval 2 --kernel-stacks --off-cpu \
    2> $R/daemon.log &
a=$!
n=0
while [ $n -lt 240 ] && kill -0 $a 2>/dev/null; do
    [ "$(grep -c ' window: processes=' $R/daemon.log)" -ge 2 ] && break
    sleep 0.5
    n=$((n + 1))
done
kill -TERM $a 2>/dev/null
wait $a
echo $? > $R/daemon.rc
e=$(cut -d' ' -f1 /proc/uptime)
echo "$s $e" > $R/daemon.time
kill $w $k 2>/dev/null
wait $w $k 2>/dev/null
say "daemon: done ($(cat $R/daemon.rc))"

# The verifier's word on each BPF program when the agent did not load them:
# each loaded alone (a load of the whole object stops at the first refused).
if [ "$(cat $R/record.rc)" != 0 ] || [ "$(cat $R/daemon.rc)" != 0 ]; then
    say "bpf_each: each program of the agent's BPF object on its own"
    $CX/bpf_each $CX/sampler.bpf.o > $R/bpf_each.log 2>&1
    echo $? > $R/bpf_each.rc
fi

dmesg > $R/dmesg.txt
cut -d' ' -f1 /proc/uptime > $R/end_s
say "sending results"
stty -F "/dev/$PORT" raw -echo 2>/dev/null
{
    echo "==CX-RESULTS-BEGIN=="
    tar -C $R -cz . | base64
    echo "==CX-RESULTS-END=="
} > "/dev/$PORT"
say "results sent; power off"
sync
poweroff -f
# Should poweroff fail, the kernel panics when init exits, and qemu
# (-no-reboot, panic=-1) stops.
sleep 5
exit 1
