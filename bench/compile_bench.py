#!/usr/bin/env python3
"""make bench, compile part (issue 15): what recording and naming a g++
compile costs the agent, against `perf record --call-graph dwarf` plus
`perf script` on the same compile, in the same run.

Workload: g++ -O2 -c on a C++ file that pulls in the standard library's
heavy headers, REPS times in a row (cc1plus, as and collect2 start and end:
stripped binaries, 30,000 exported symbols in cc1plus, new processes all the
time). Each round records it twice, one tool at a time, which goes first
alternating:
  - the agent: `codexray-node-agent record` of the whole machine for the
    compile's length; its CPU (user + sys of the process, from wait4),
    and how long after the recording's end its profile was written;
  - perf: `perf record -a -F 100 --call-graph dwarf` for the same length,
    then `perf script` of what it wrote, as it comes and with --no-inline;
    CPU of each (wait4).
Medians over the rounds, and the ratio agent / perf.

    python3 bench/compile_bench.py [--rounds 3] [--reps 3]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
AGENT = os.path.join(ROOT, "build", "codexray-node-agent")
SOURCE = r"""
#include <algorithm>
#include <functional>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>
template <int N> struct Fib { static constexpr long v = Fib<N - 1>::v + Fib<N - 2>::v; };
template <> struct Fib<0> { static constexpr long v = 0; };
template <> struct Fib<1> { static constexpr long v = 1; };
int main(int argc, char **argv) {
    std::map<std::string, std::vector<int>> m;
    std::unordered_map<std::string, std::function<int(int)>> f;
    std::regex r(argc > 1 ? argv[1] : "a+b");
    std::ostringstream o;
    for (auto &kv : m) o << kv.first << kv.second.size();
    f["x"] = [](int x) { return x * 2; };
    std::vector<int> v(10);
    std::sort(v.begin(), v.end(), std::greater<int>());
    std::cout << o.str() << Fib<40>::v << std::regex_match("aab", r) << f["x"](3) << "\n";
}
"""


def cpu_of(p):
    """Waits for p; its user + sys CPU in seconds (its own, by wait4)."""
    _, _, ru = os.wait4(p.pid, 0)
    return ru.ru_utime + ru.ru_stime


def compile_loop(src, obj, reps):
    t0 = time.monotonic()
    for _ in range(reps):
        subprocess.run(["g++", "-O2", "-c", src, "-o", obj], check=True)
    return time.monotonic() - t0


def agent_round(tmp, src, reps, seconds):
    out = os.path.join(tmp, "agent.pb.gz")
    a = subprocess.Popen([AGENT, "record", "--duration", str(seconds), "--output", out],
                         stderr=subprocess.PIPE, text=True)
    for line in a.stderr:  # counting starts at this line (after the start-up tables)
        if "record: sample_rate_hz=" in line:
            break
    t_start = time.monotonic()
    compile_loop(src, os.path.join(tmp, "a.o"), reps)
    rest = a.stderr.read()
    cpu = cpu_of(a)
    written = time.monotonic() - (t_start + seconds)
    samples = next((w.split("=")[1] for w in rest.split() if w.startswith("samples=")), "?")
    return cpu, written, samples


def perf_round(tmp, src, reps, seconds):
    """perf over the whole machine for the same length, as the agent records
    (wait4 on perf's own workload, `sleep`, counts perf and not the
    compiles), then perf script as it comes and with --no-inline (without
    it, perf 6.1 asks addr2line for every inlined frame)."""
    data = os.path.join(tmp, "perf.data")
    p = subprocess.Popen(["perf", "record", "-a", "-F", "100", "--call-graph", "dwarf", "-o", data,
                          "--", "sleep", str(seconds)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    compile_loop(src, os.path.join(tmp, "p.o"), reps)
    rec = cpu_of(p)
    out = []
    for extra in ([], ["--no-inline"]):
        s = subprocess.Popen(["perf", "script", "-i", data, *extra], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL)
        n = sum(1 for line in s.stdout if line[:1] not in (b"\t", b"\n", b" "))
        out.append((cpu_of(s), n))
    return rec, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="cx-compile-") as tmp:
        src = os.path.join(tmp, "big.cc")
        with open(src, "w") as f:
            f.write(SOURCE)
        one = compile_loop(src, os.path.join(tmp, "w.o"), 1)  # warm the page cache
        seconds = int(one * a.reps + 2)
        print(f"compile: bench/compile_bench.py's source, g++ -O2, {a.reps} in a row "
              f"({one:.1f} s each); recordings of {seconds} s")
        agent, written, perf, script = [], [], [], []
        for r in range(a.rounds):
            order = ("agent", "perf") if r % 2 == 0 else ("perf", "agent")
            for who in order:
                if who == "agent":
                    cpu, w, n = agent_round(tmp, src, a.reps, seconds)
                    agent.append(cpu)
                    written.append(w)
                    print(f"  round {r + 1} agent: {cpu:.2f} s CPU, {n} samples, profile written "
                          f"{w:.2f} s after the recording's end")
                else:
                    rec, ((scr, n), (noinl, _)) = perf_round(tmp, src, a.reps, seconds)
                    perf.append(rec + scr)
                    script.append(rec + noinl)
                    print(f"  round {r + 1} perf: record {rec:.2f} s + script {scr:.2f} s CPU "
                          f"(--no-inline {noinl:.2f} s), {n} samples")
        ma, mp = statistics.median(agent), statistics.median(perf)
        mn = statistics.median(script)
        print(f"compile: agent {ma:.2f} s CPU (median of {a.rounds}); perf record --call-graph "
              f"dwarf + perf script {mp:.2f} s, with --no-inline {mn:.2f} s; agent / perf = "
              f"{ma / mp:.3f} ({ma / mn:.2f} against --no-inline); profile written "
              f"{statistics.median(written):.2f} s after the end (median)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
