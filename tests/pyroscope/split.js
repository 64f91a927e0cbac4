// A Node program with a known CPU split, profiled by the real Pyroscope SDK
// (@pyroscope/nodejs from npm, pinned by package-lock.json) pushing to a
// codexray-server's /ingest: hot_a takes twice the CPU of hot_b (the same
// body, twice the iterations; tests/workloads/jit_split.js's split).
// Usage: node split.js SERVER_URL KEY SECONDS [bearer|basic [APP]]
// With "basic" the key goes as basic auth's password, else as a Bearer token.
"use strict";
const Pyroscope = require("@pyroscope/nodejs");

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

async function main() {
    const [url, key, secs, auth, app] = process.argv.slice(2);
    const seconds = Number(secs || 10);
    Pyroscope.init({
        serverAddress: url,
        appName: app || "node-split",
        ...(auth === "basic" ? { basicAuthUser: "node", basicAuthPassword: key } : { authToken: key }),
        tags: { region: "x1", host: "pyro-host", pod: "split-pod" },
        flushIntervalMs: 2000,
        // A sample every 2 ms (the SDK's default is 10 ms): each sample's
        // stack takes the CPU used since the one before, so the split is
        // counted in samples, five times more of them on a busy machine.
        wall: { collectCpuTime: true, samplingDurationMs: 2000, samplingIntervalMicros: 2000 },
    });
    Pyroscope.start();
    const end = Date.now() + seconds * 1000;
    let sink = 0, nsA = 0n, nsB = 0n;
    const used = () => {
        const u = process.cpuUsage();
        return u.user + u.system;
    };
    while (Date.now() < end) {
        // Rounds of about 3 ms keep the split steady at any moment; a
        // yield now and then lets the SDK's timers flush. The time of each
        // call is measured too (the monotonic clock: no system call, and a
        // busy machine's preemptions fall on both alike): the JIT may make
        // the two bodies run at different speeds, so the answer is what
        // they took, not 2:1.
        const round = Date.now() + 100;
        while (Date.now() < round) {
            const t0 = process.hrtime.bigint();
            sink += call_a(200000);
            const t1 = process.hrtime.bigint();
            sink += call_b(100000);
            nsA += t1 - t0;
            nsB += process.hrtime.bigint() - t1;
        }
        await new Promise((r) => setImmediate(r));
    }
    await Pyroscope.stop();
    const a = Number(nsA) / 1e9, b = Number(nsB) / 1e9;
    console.log(`cpu_seconds=${(used() / 1e6).toFixed(2)} hot_a_share=${(a / (a + b)).toFixed(3)} ` +
        `hot_a_s=${a.toFixed(2)} hot_b_s=${b.toFixed(2)} sink=${sink % 10}`);
}

main().catch((e) => {
    console.error(e);
    process.exit(1);
});
