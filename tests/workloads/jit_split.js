// A JavaScript workload with a known answer: hot_a takes twice the CPU time
// of hot_b, each called from its own caller (call_a, call_b). Run with
// --perf-basic-prof; --max-inlined-bytecode-size=0 keeps TurboFan from
// inlining the hot functions into their callers, so each is its own frame.
// The two have the same body, so only the iteration counts set the split.
// Usage: node [flags] jit_split.js SECONDS
"use strict";

function hot_a(n) {
    let x = 1;
    for (let i = 0; i < n; i++) x = (x * 31 + i) % 1000003;
    return x;
}

function hot_b(n) {
    let x = 1;
    for (let i = 0; i < n; i++) x = (x * 31 + i) % 1000003;
    return x;
}

function call_a(n) {
    return hot_a(n) + 1;
}

function call_b(n) {
    return hot_b(n) + 1;
}

const seconds = Number(process.argv[2] || 5);
const end = Date.now() + seconds * 1000;
let sink = 0;
while (Date.now() < end) {
    // Rounds of about 3 ms keep the split steady at any moment.
    sink += call_a(200000);
    sink += call_b(100000);
}
const cpu = process.cpuUsage();
console.log(`cpu_seconds=${((cpu.user + cpu.system) / 1e6).toFixed(2)} sink=${sink % 10}`);
