// Off-CPU time in JavaScript functions, then the process exits at once
// (`node js_waits.js ROUNDS MS`, no flag): warm spins 300 ms of CPU first
// (its first samples make the agent read the process and put what it
// walks in BPF), then waiter blocks MS ms in Atomics.wait, ROUNDS times,
// under main -> the script's top level. Prints slept= at the end.
"use strict";

function warm() {
    const end = Date.now() + 300;
    let x = 0;
    while (Date.now() < end) x = (x * 31 + 1) % 1000003;
    return x;
}

function waiter(ms) {
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

function main(rounds, ms) {
    warm();
    for (let i = 0; i < rounds; i++) waiter(ms);
}

const rounds = Number(process.argv[2] || 3), ms = Number(process.argv[3] || 400);
main(rounds, ms);
console.log(`slept=${(rounds * ms / 1000).toFixed(2)}`);
