"""CFI unwinding (issue 6): the real agent on workloads built without frame
pointers, each with a known answer (a CPU split, a call chain), read back
with `go tool pprof`; the chain is also checked against `perf record
--call-graph dwarf`, which unwinds the same process by another method."""
import os
import re
import shutil
import subprocess
import tempfile
import time

from pprof_read import traces

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
AGENT = os.path.join(ROOT, "build", "codexray-node-agent")
WORK = os.path.join(ROOT, "build", "workloads")
TRUNC = "[truncated"


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def start(name, *args):
    return subprocess.Popen([os.path.join(WORK, name), *map(str, args)],
                            stdout=subprocess.DEVNULL)


def stop(w):
    w.kill()
    w.wait()


def record(tmp, pid, seconds, *extra):
    out = os.path.join(tmp, f"cfi-{pid}-{time.monotonic_ns()}.pb.gz")
    p = subprocess.run([AGENT, "record", "--duration", str(seconds), "--pid", str(pid),
                        "--output", out, *extra], capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, f"record exited {p.returncode}: {p.stderr[-2000:]}")
    return traces(out), p.stderr


def base(frame):
    """A frame's function without pprof's " (inline)" mark."""
    return frame[:-len(" (inline)")] if frame.endswith(" (inline)") else frame


def names(t):
    return [base(f) for f in t.frames]


def follows(frames, chain):
    """Whether chain (leaf first) appears in frames in order, each link
    right above the one before it, starting at frames' first entry."""
    return frames[:len(chain)] == chain


def split_check(per, want, tolerance):
    hot = sum(per.values())
    check(hot > 0, "no sample in a hot function")
    for fn, share in want.items():
        got = per[fn] / hot
        print(f"    {fn}: {got:.3f} (want {share:.3f})")
        check(abs(got - share) <= tolerance, f"{fn} share {got:.3f}, want {share:.3f} "
                                             f"+- {tolerance}")


def perf_dwarf_stacks(pid, seconds):
    """perf's own unwinding of pid (libunwind/libdw over copied stack
    bytes): a list of stacks, each a list of symbol names, leaf first."""
    with tempfile.TemporaryDirectory(prefix="cx-perf-") as d:
        data = os.path.join(d, "perf.data")
        subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", "100", "--call-graph",
                        "dwarf,16384", "-p", str(pid), "-o", data, "--", "sleep", str(seconds)],
                       check=True, capture_output=True, timeout=60)
        out = subprocess.run(["perf", "script", "-i", data, "-F", "ip,sym"], check=True,
                             capture_output=True, text=True, timeout=120).stdout
    stacks, cur = [], []
    for line in out.splitlines():
        parts = line.split(None, 1)
        if not parts:
            if cur:
                stacks.append(cur)
            cur = []
            continue
        sym = parts[1].strip() if len(parts) > 1 else "[unknown]"
        cur.append(sym.split("+0x")[0])
    if cur:
        stacks.append(cur)
    return stacks


# --- the tests ---------------------------------------------------------------

C_SPLIT = {"hot_a": 3 / 6, "hot_b": 2 / 6, "hot_c": 1 / 6}


def test_cfi_c_split_without_frame_pointers(tmp):
    """gcc -O2 -fomit-frame-pointer, two threads: the 3:2:1 split within 5
    points, >= 97 % of samples whole (hot -> dispatch -> run -> main or
    thread_main, and no truncation), and no fewer whole stacks than perf's
    DWARF unwinding of the same process finds."""
    w = start("cfi_split", 14, 2)
    try:
        time.sleep(0.5)
        ts, log = record(tmp, w.pid, 5)
        stacks = perf_dwarf_stacks(w.pid, 3)
    finally:
        stop(w)
    per, whole, total = {k: 0 for k in C_SPLIT}, 0, 0
    for t in ts:
        fr = names(t)
        total += t.count
        if fr[0] in per:
            per[fr[0]] += t.count
            if fr[1:3] == ["dispatch", "run"] and fr[3] in ("main", "thread_main") \
                    and not any(f.startswith(TRUNC) for f in fr):
                whole += t.count
    split_check(per, C_SPLIT, 0.05)
    print(f"    whole: {whole}/{total} = {whole / total:.3f}")
    check(whole / total >= 0.97, f"only {whole}/{total} samples whole: {ts[:4]}")
    # perf: the same chain, by its own unwinder.
    hot = [s for s in stacks if s and s[0] in C_SPLIT]
    pwhole = sum(1 for s in hot if s[1:3] == ["dispatch", "run"]
                 and len(s) > 3 and s[3] in ("main", "thread_main"))
    check(len(hot) >= 100, f"perf found {len(hot)} hot samples of {len(stacks)}")
    print(f"    perf --call-graph dwarf: {pwhole}/{len(hot)} = {pwhole / len(hot):.3f} whole")
    check(whole / total >= pwhole / len(hot) - 0.02,
          f"ours {whole / total:.3f} whole, perf's {pwhole / len(hot):.3f}")
    lines = [l for l in log.splitlines() if "unwind=" in l]
    check(lines and "unwind=cfi" in lines[0], f"no unwind=cfi in the log: {log[-1500:]}")


QSORT_CHAIN = ["sort_round", "run", "main"]


def qsort_whole(ts):
    """by_key's samples, and those whose stack passes through libc's qsort
    to sort_round -> run -> main."""
    leaf, whole, libc_frames = 0, 0, 0
    for t in ts:
        fr = names(t)
        if fr[0] != "by_key":
            continue
        leaf += t.count
        rest = fr[1:]
        if "sort_round" in rest:
            i = rest.index("sort_round")
            if rest[i:i + 3] == QSORT_CHAIN and i > 0 and "qsort_r" in rest[:i]:
                whole += t.count
                libc_frames = max(libc_frames, i)
    return leaf, whole, libc_frames


def test_cfi_through_libc_qsort(tmp):
    """Our comparator called by Debian's libc qsort (no frame pointers): >=
    95 % of its samples reach main through qsort_r; with --unwind fp the
    walk breaks in libc (under half reach main), which is what CFI fixes."""
    w = start("qsort_cb", 14)
    try:
        time.sleep(0.5)
        ts, _ = record(tmp, w.pid, 4)
        fts, flog = record(tmp, w.pid, 3, "--unwind", "fp")
    finally:
        stop(w)
    leaf, whole, depth = qsort_whole(ts)
    total = sum(t.count for t in ts)
    check(leaf >= 0.8 * total, f"only {leaf}/{total} samples in by_key")
    print(f"    cfi: {whole}/{leaf} = {whole / leaf:.3f} of by_key's samples reach main, "
          f"up to {depth} frames of libc between")
    check(whole / leaf >= 0.95, f"only {whole}/{leaf} whole: {ts[:3]}")
    fleaf, fwhole, _ = qsort_whole(fts)
    check(fleaf > 0, f"no by_key sample with --unwind fp: {fts[:3]}")
    print(f"    fp:  {fwhole}/{fleaf} = {fwhole / fleaf:.3f}")
    check("unwind=fp" in flog, f"no unwind=fp in the log: {flog[-1000:]}")
    check(fwhole / fleaf < 0.5, f"--unwind fp reached main in {fwhole}/{fleaf}: is it CFI?")


SIG_CHAIN = ["in_handler", "on_alarm", "__restore_rt", "interrupted", "run", "main"]


def test_cfi_signal_handler(tmp):
    """A SIGALRM handler, all code without frame pointers: its samples walk
    through the kernel's signal frame (__restore_rt) into the interrupted
    function and on to main, >= 95 % of them."""
    w = start("cfi_signal", 12)
    try:
        time.sleep(0.5)
        ts, _ = record(tmp, w.pid, 5)
    finally:
        stop(w)
    total = sum(t.count for t in ts)
    inh = sum(t.count for t in ts if names(t)[0] == "in_handler")
    whole = sum(t.count for t in ts if follows(names(t), SIG_CHAIN))
    print(f"    {inh}/{total} samples in the handler, {whole} of them whole "
          f"({' <- '.join(SIG_CHAIN)})")
    check(inh >= 0.08 * total, f"only {inh}/{total} samples in the handler")
    check(whole >= 0.95 * inh, f"only {whole}/{inh} handler samples whole: "
                               f"{[t for t in ts if names(t)[0] == 'in_handler'][:3]}")
    main_line = sum(t.count for t in ts if follows(names(t), ["interrupted", "run", "main"]))
    check(main_line >= 0.95 * (total - inh), f"{main_line}/{total - inh} outside the handler")


def test_cfi_vdso(tmp):
    """clock_gettime in a loop, answered by the vDSO (no file, no frame
    pointers): >= half the samples in it, __vdso_clock_gettime named, and
    >= 95 % of those walked on to poll_clock -> run -> main. The vDSO's own
    static functions have no symbol; they show as [vdso]+0xOFFSET."""
    w = start("vdso_loop", 10)
    try:
        time.sleep(0.5)
        ts, _ = record(tmp, w.pid, 3)
    finally:
        stop(w)
    total = sum(t.count for t in ts)
    vdso = [t for t in ts if any(f.startswith(("[vdso]", "__vdso_")) for f in names(t))]
    inv = sum(t.count for t in vdso)
    named = sum(t.count for t in vdso if "__vdso_clock_gettime" in names(t))
    whole = 0
    for t in vdso:
        fr = names(t)
        if "poll_clock" in fr and fr[fr.index("poll_clock"):][:3] == ["poll_clock", "run", "main"]:
            whole += t.count
    print(f"    {inv}/{total} samples in the vDSO, {named} under __vdso_clock_gettime, "
          f"{whole} whole to main")
    check(inv >= 0.5 * total, f"only {inv}/{total} samples in the vDSO: {ts[:3]}")
    check(named >= 0.95 * inv, f"__vdso_clock_gettime in {named}/{inv}: {vdso[:3]}")
    check(whole >= 0.95 * inv, f"only {whole}/{inv} vDSO samples whole: {vdso[:3]}")


CXX_SPLIT = {"Square::area(unsigned long) const": 2 / 3,
             "Circle::area(unsigned long) const": 1 / 3}


def test_cfi_cxx_split(tmp):
    """g++ -O2 -fomit-frame-pointer, virtual calls through std::function in
    a template, exceptions each round: 2:1 within 5 points, >= 97 % whole
    to main through apply_all and run."""
    w = start("cxx_split", 12)
    try:
        time.sleep(0.5)
        ts, _ = record(tmp, w.pid, 5)
    finally:
        stop(w)
    per, whole, total = {k: 0 for k in CXX_SPLIT}, 0, 0
    for t in ts:
        fr = names(t)
        total += t.count
        hot = next((f for f in fr[:2] if f in per), None)
        if hot is None:
            continue
        per[hot] += t.count
        rest = fr[fr.index(hot) + 1:]
        ok = any(f.startswith("void apply_all<") for f in rest) and "run(double)" in rest \
            and "main" in rest and rest.index("run(double)") < rest.index("main") \
            and not any(f.startswith(TRUNC) for f in rest)
        whole += t.count if ok else 0
    split_check(per, CXX_SPLIT, 0.05)
    print(f"    whole: {whole}/{total} = {whole / total:.3f}")
    check(whole / total >= 0.97, f"only {whole}/{total} whole: {ts[:3]}")


RUST_SPLIT = {"rust_split::hot_a": 2 / 3, "rust_split::hot_b": 1 / 3}
RUST_CHAIN = ["rust_split::dispatch", "rust_split::run", "rust_split::main"]


def test_cfi_rust_split(tmp):
    """rustc -O (no frame pointers in our code or in std): 2:1 within 5
    points, >= 97 % whole: through std's lang_start to C's main."""
    w = start("rust_split", 12)
    try:
        time.sleep(0.5)
        ts, _ = record(tmp, w.pid, 5)
    finally:
        stop(w)
    per, whole, total = {k: 0 for k in RUST_SPLIT}, 0, 0
    for t in ts:
        # The leaf location's own function is its first frame not marked
        # inline: spin, opaque and core's wrapping_add are inlined into
        # hot_a/hot_b (as addr2line -i names them).
        own = next((i for i, f in enumerate(t.frames) if not f.endswith(" (inline)")), None)
        total += t.count
        if own is None:
            continue
        fr = names(t)[own:]
        if fr[0] not in per:
            continue
        per[fr[0]] += t.count
        rest = fr[1:]
        lang = "std::rt::lang_start_internal"
        if rest[:3] == RUST_CHAIN and lang in rest and "main" in rest \
                and rest.index("main") > rest.index(lang):
            whole += t.count
    split_check(per, RUST_SPLIT, 0.05)
    print(f"    whole: {whole}/{total} = {whole / total:.3f}")
    check(whole / total >= 0.97, f"only {whole}/{total} whole: {ts[:3]}")


JIT_SPLIT = {"jit_hot_a": 2 / 3, "jit_hot_b": 1 / 3}
JIT_CALLER = {"jit_hot_a": "call_a", "jit_hot_b": "call_b"}


def test_jit_perf_map_only(tmp):
    """Machine code generated at run time into anonymous memory, with no CFI
    and no file, named only by the program's /tmp/perf-PID.map
    (jit_perfmap): both functions named, 2:1 within 5 points or 4 sigma,
    >= 99 % of them under their C caller, through dispatch and run to main
    (the walk crosses the generated code by its frame record). With the map
    removed, the same code is not named."""
    # Rounds of ~20 ms: a window on a busy machine holds many whole ones.
    w = start("jit_perfmap", 60, 5000000)
    pm = f"/tmp/perf-{w.pid}.map"
    try:
        for _ in range(50):  # written before the first round
            if os.path.exists(pm):
                break
            time.sleep(0.1)
        check(os.path.exists(pm), f"jit_perfmap wrote no {pm}")
        # 5 s at a time until 200 samples: a loaded machine gives the
        # workload a fraction of a CPU.
        ts = []
        for _ in range(4):
            more, _ = record(tmp, w.pid, 5)
            ts += more
            if sum(t.count for t in ts) >= 200:
                break
        os.unlink(pm)
        bare, _ = record(tmp, w.pid, 2)
    finally:
        stop(w)
        if os.path.exists(pm):
            os.unlink(pm)
    per, whole, total = {k: 0 for k in JIT_SPLIT}, 0, 0
    for t in ts:
        fr = names(t)
        total += t.count
        if fr[0] in per:
            per[fr[0]] += t.count
            if follows(fr[1:], [JIT_CALLER[fr[0]], "dispatch", "run", "main"]) and \
                    not any(f.startswith(TRUNC) for f in fr):
                whole += t.count
    hot = sum(per.values())
    check(hot >= 0.9 * total, f"only {hot}/{total} samples in the generated code: {ts[:3]}")
    check(hot >= 100, f"{hot} samples in 20 s: too few to judge a split")
    split_check(per, JIT_SPLIT, max(0.05, 4 * (2 / 9 / hot) ** 0.5))
    print(f"    under their callers to main: {whole}/{hot}")
    check(whole >= 0.99 * hot, f"only {whole}/{hot} under their callers to main: {ts[:4]}")
    named = sum(t.count for t in bare if set(t.frames) & set(JIT_SPLIT))
    check(named == 0, f"{named} samples named from a perf map that is gone")
    check(sum(t.count for t in bare) > 0, "no samples without the map")


def reap_cpu(p):
    """Waits for Popen p and returns the CPU seconds it used (user and
    system, from wait4's rusage)."""
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return ru.ru_utime + ru.ru_stime


def test_cfi_new_processes_whole(tmp):
    """Processes started while a whole-machine record runs, of a binary the
    agent has never seen (a fresh copy: its own inode) whose hot path
    crosses libc without frame pointers (qsort calling back into it): one
    that runs 3 s and 20 that live 0.15 s each, beside two CPU burners. At
    least 99 % of their samples whole (no truncation mark), and of the
    whole machine's: tables are built
    newest first and loaded as soon as done, the walk finds a new process's
    binaries by file before user space has read its maps (bpf_find_vma,
    Linux 5.17), and user space reads its maps again when the walk's fault
    hook sees it run a library's first code (ld.so has mapped them all by
    then)."""
    fresh = os.path.join(tmp, "qsort_fresh")
    shutil.copy(os.path.join(WORK, "qsort_cb"), fresh)
    burners = [start("cfi_split", 30), start("cfi_split", 30)]
    out = os.path.join(tmp, "new.pb.gz")
    agent = subprocess.Popen([AGENT, "record", "--duration", "9", "--output", out],
                             stderr=subprocess.PIPE, text=True)
    pids, cpu_s = [], 0.0
    try:
        for line in agent.stderr:
            if "record: sample_rate_hz=" in line:
                break
        long_one = subprocess.Popen([fresh, "3"], stdout=subprocess.DEVNULL)
        for _ in range(20):
            p = subprocess.Popen([fresh, "0.15"], stdout=subprocess.DEVNULL)
            cpu_s += reap_cpu(p)
            pids.append(p.pid)
        cpu_s += reap_cpu(long_one)
        pids.append(long_one.pid)
        _, log = agent.communicate(timeout=120)
    finally:
        for b in burners:
            stop(b)
        if agent.poll() is None:
            agent.kill()
            agent.wait()
    check(agent.returncode == 0, f"record exited {agent.returncode}: {log[-2000:]}")
    want = {str(p) for p in pids}
    total = cut = all_total = all_cut = 0
    examples, all_examples = [], {}
    in_exec = 0
    for t in traces(out):
        all_total += t.count
        in_exec += t.count if any(f.startswith("[in execve") for f in t.frames) else 0
        if any(f.startswith(TRUNC) for f in t.frames):
            all_cut += t.count
            k = f"{t.labels.get('comm', '?')}: " + " <- ".join(t.frames[-2:])
            all_examples[k] = all_examples.get(k, 0) + t.count
        if t.labels.get("pid") not in want:
            continue
        total += t.count
        if any(f.startswith(TRUNC) for f in t.frames):
            cut += t.count
            examples.append(f"pid {t.labels.get('pid')}: " + " <- ".join(t.frames[-3:]))
    vma = " ".join(re.findall(r"vma_\w+=\d+", log))
    print(f"    pids in start order: {pids[-1]} (3 s), {pids[:-1]}; their CPU {cpu_s:.2f} s")
    print(f"    {total - cut}/{total} samples whole of 21 new processes ({vma}); cut: "
          f"{examples[:3]}")
    # A sample inside execve (in the kernel, after the new program took the
    # address space, the registers still the old one's) has no user stack
    # to walk: it says so, and is not a cut walk.
    print(f"    whole machine: {all_total - all_cut}/{all_total} samples whole "
          f"({in_exec} in execve); cut: "
          f"{sorted(all_examples.items(), key=lambda x: -x[1])[:4]}")
    # Their CPU, not their wall time: beside the burners on a loaded machine
    # they ran 145 samples' worth where an idle one gives them 400.
    check(total >= 50 and total >= 0.5 * cpu_s * 100,
          f"only {total} samples of the new processes for {cpu_s:.2f} s of their CPU")
    # 99 %: measured 2,344 of 2,348 (99.8 %) over 11 runs since the walk
    # wakes user space to read a young process's maps while it runs its
    # libraries' first code; 95.8-97.6 % before (user space read them at
    # exec and 10 ms later, often before ld.so had mapped libc, and a 0.15 s
    # process is gone by the time its samples are read, so return addresses
    # into libc were cut as junk). What is left: a sample of the forked
    # Python child in its last instructions before execve, read after the
    # exec, against the new program's maps.
    check(cut <= 0.01 * total, f"{cut}/{total} samples truncated: {examples[:5]}")
    # The whole machine too (the burners, the new processes, whatever else
    # runs): 14,297 of 14,302 samples whole over 8 runs.
    check(all_cut <= 0.01 * all_total, f"whole machine: {all_cut}/{all_total} samples truncated: "
          f"{sorted(all_examples.items(), key=lambda x: -x[1])[:5]}")


def test_cfi_startup_tables_sampled(tmp):
    """The daemon started beside processes already running (issue 36): the
    table of a binary they run but never sample (an idle copy of `sleep`)
    is not built at start; that of the one sampled (cfi_split, without frame
    pointers) is, and its first window's stacks are whole (>= 97 %, as
    record's); so is that of one seen only waiting (off-CPU). Before, every
    mapped binary's table was built at start."""
    idle_bin = os.path.join(tmp, "idle-sleeper")
    # A binary only this process maps: without its build id (which a copy
    # would share with every `sleep` running) the agent keys it by file.
    subprocess.run(["objcopy", "--remove-section=.note.gnu.build-id", "/usr/bin/sleep",
                    idle_bin], check=True)
    idle = subprocess.Popen([idle_bin, "60"])
    # One seen only waiting (off-CPU records, next to no CPU): a copy of
    # bash, keyed by file as above, blocking 50 ms at a time in `read -t`.
    waiter_bin = os.path.join(tmp, "waiter-bash")
    subprocess.run(["objcopy", "--remove-section=.note.gnu.build-id", "/usr/bin/bash",
                    waiter_bin], check=True)
    fifo = os.path.join(tmp, "fifo")
    os.mkfifo(fifo)
    waiter = subprocess.Popen([waiter_bin, "-c",
                               f"exec 3<>{fifo}; while :; do read -t 0.05 -u 3; done"])
    w = start("cfi_split", 20, 2)
    out = os.path.join(tmp, "out")
    os.mkdir(out)
    agent = None
    try:
        time.sleep(0.5)
        agent = subprocess.Popen([AGENT, "--interval", "3", "--output-dir", out, "--off-cpu",
                                  "--log-level", "debug"], stderr=subprocess.PIPE, text=True)
        log = []
        for line in agent.stderr:
            log.append(line)
            if " window: processes=" in line:
                break
        agent.terminate()
        log += agent.stderr.readlines()
        agent.wait(timeout=60)
    finally:
        if agent and agent.poll() is None:
            agent.kill()
            agent.wait()
        stop(w)
        stop(idle)
        stop(waiter)
    text = "".join(log)
    before = text.split(" window: processes=")[0]
    for line in log:
        if "unwind: start-up:" in line:
            print("   ", line.split("info  ")[-1].strip())
    check(f"unwind: {idle_bin}:" not in before,
          f"the idle binary's table was built at start: {text[-1500:]}")
    check(f"unwind: {waiter_bin}:" in text,
          f"the waiting binary's table was not built from its off-CPU records: {text[-1500:]}")
    check(re.search(r"unwind: \S*/cfi_split: ", before),
          f"cfi_split's table was not built before the first window: {text[-1500:]}")
    files = sorted(f for f in os.listdir(out) if f".{w.pid}." in f)
    check(files, f"no profile of cfi_split: {os.listdir(out)}")
    ts = traces(os.path.join(out, files[0]))
    whole = total = 0
    for t in ts:
        fr = names(t)
        if fr[0] not in C_SPLIT:
            continue
        total += t.count
        if fr[1:3] == ["dispatch", "run"] and len(fr) > 3 and \
                fr[3] in ("main", "thread_main") and not any(f.startswith(TRUNC) for f in fr):
            whole += t.count
    print(f"    first window whole: {whole}/{total}")
    check(total >= 50, f"only {total} hot samples in the first window")
    check(whole / total >= 0.97, f"only {whole}/{total} whole in the first window: {ts[:4]}")


TESTS = [test_cfi_c_split_without_frame_pointers, test_cfi_through_libc_qsort,
         test_cfi_signal_handler, test_cfi_vdso, test_cfi_cxx_split, test_cfi_rust_split,
         test_jit_perf_map_only,
         test_cfi_new_processes_whole, test_cfi_startup_tables_sampled]
