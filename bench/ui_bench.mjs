// The web UI's speed on a big tree, in headless Chromium (make bench):
//   node bench/ui_bench.mjs [--nodes 50000,400000] [--runs 7] [--trace]
// Starts build/codexray-server (it serves the embedded UI; CX_SERVER=PATH
// another build's), answers the profile request with a synthesized
// flame-graph JSON of each --nodes size (50,000 and 400,000, an hour of a
// busy application, by default), and measures, median of --runs page loads:
//   first draw: from the JSON text arriving to the flame graph drawn (parse,
//     layout, canvas; the function table comes after); and to the next
//     painted frame; and from the profile's request (its transfer included);
//   hover: mouse moves dispatched on the canvas, one per animation frame:
//     frames per second, and the work per move;
//   zoom: a click on a frame (through the URL, as a user's click goes) and
//     its redraw, one per animation frame: frames per second and work.
// Ends with the headline medians per size against the targets.
// Targets (the web UI issue): first draw within 200 ms, hover and zoom at
// 30 frames a second or better.
import { createRequire } from 'node:module';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import net from 'node:net';

const require = createRequire(new URL('../tests/browser/package.json', import.meta.url));
const { chromium } = require('playwright-core');
const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const arg = (k, d) => { const i = process.argv.indexOf(k); return i > 0 ? Number(process.argv[i + 1]) : d; };
const argList = (k, d) => { const i = process.argv.indexOf(k); return i > 0 ? process.argv[i + 1].split(',').map(Number) : d; };
// 50,000 nodes, and 400,000: an hour of a busy application (issue 37).
const SIZES = argList('--nodes', [50000, 400000]), RUNS = arg('--runs', 7);
// --trace: the first run's zoom clicks traced (Chrome's timeline), and the
// events that took the most time printed: where a zoom's time goes.
const TRACE = process.argv.includes('--trace');

// --- a synthetic tree with the shapes real profiles have --------------------
function rng(seed) { return () => ((seed = Math.imul(seed ^ (seed >>> 15), 2246822507) + 0x9e3779b9 | 0) >>> 0) / 4294967296; }
function synthesize(n) {
    const r = rng(42);
    const names = ['all', 'other'], files = ['', ''];
    const nf = Math.max(100, Math.floor(n / 6));
    for (let i = 0; i < nf; i++) {
        const k = i % 10;
        if (k < 4) { names.push(`app::module${i % 97}::Type${i % 13}::method_${i}`); files.push(`/src/app/module${i % 97}.cc`); }
        else if (k < 6) { names.push(`github.com/org/svc/pkg${i % 31}.(*T${i % 7}).Func${i}`); files.push(`/go/src/pkg${i % 31}/f.go`); }
        else if (k < 8) { names.push(`std::__detail::helper_${i}<int>`); files.push('/usr/include/c++/12/bits/x.h'); }
        else if (k === 8) { names.push(`do_syscall_${i}`); files.push('[kernel.kallsyms]'); }
        else { names.push(`libfoo${i % 5}.so+0x${(i * 4099).toString(16)}`); files.push(`/usr/lib/libfoo${i % 5}.so`); }
    }
    // Shape: a node's children get a share of its descendants each, a few
    // wide children and a long tail, as in a real profile.
    const kids = [], self = [], nameOf = [];
    const make = (name) => { kids.push([]); self.push(0); nameOf.push(name); return kids.length - 1; };
    const root = make(0);
    const queue = [[root, n - 1, 0]];
    while (queue.length) {
        const [v, budget, depth] = queue.pop();
        if (budget <= 0 || depth > 60) { self[v] += 1 + Math.floor(r() * 1000); continue; }
        const k = Math.min(budget, 1 + Math.floor(r() * r() * 12));
        const w = Array.from({ length: k }, () => Math.pow(r(), 3) + 0.01);
        const sum = w.reduce((a, b) => a + b, 0);
        let left = budget - k;
        if (r() < 0.3) self[v] += Math.floor(r() * 200);
        for (let j = 0; j < k; j++) {
            const share = j === k - 1 ? left : Math.min(left, Math.floor((left * w[j]) / sum));
            left -= share;
            const c = make(2 + Math.floor(r() * nf));
            kids[v].push(c);
            queue.push([c, share, depth + 1]);
        }
    }
    const total = new Array(kids.length).fill(0);
    for (let v = kids.length - 1; v >= 0; v--) { total[v] += self[v] * 1e6; for (const c of kids[v]) total[v] += total[c]; }
    for (let v = 0; v < kids.length; v++) self[v] *= 1e6;
    const nodes = [];
    const stack = [root];
    while (stack.length) {
        const v = stack.pop();
        const cs = kids[v].slice().sort((a, b) => total[b] - total[a]);
        nodes.push(v === root ? 0 : nameOf[v], total[v], self[v], cs.length);
        for (let j = cs.length - 1; j >= 0; j--) stack.push(cs[j]);
    }
    return { unit: 'nanoseconds', total: total[root], samples: total[root] / 1e7, profiles: 60, names, files, nodes };
}

// The complete events of the renderer's main thread summed by name (self
// time: a child's time taken from its parent's), the top 15.
function printTrace(tr) {
    const all = tr.traceEvents || tr;
    const mains = new Set(all.filter((e) => e.ph === 'M' && e.name === 'thread_name' && e.args.name === 'CrRendererMain')
        .map((e) => e.pid + ':' + e.tid));
    const mine = all.filter((e) => e.ph === 'X' && e.dur !== undefined && mains.has(e.pid + ':' + e.tid))
        .sort((a, b) => a.ts - b.ts || b.dur - a.dur);
    const self = new Map(), stack = [];
    for (const e of mine) {
        while (stack.length && stack[stack.length - 1].ts + stack[stack.length - 1].dur <= e.ts) stack.pop();
        const key = e.name + (e.args && e.args.data && e.args.data.functionName ? ' ' + e.args.data.functionName : '');
        self.set(key, (self.get(key) || 0) + e.dur);
        if (stack.length) { const p = stack[stack.length - 1]; self.set(p.key, self.get(p.key) - e.dur); }
        e.key = key;
        stack.push(e);
    }
    console.log('  trace of the first run (self ms by event):');
    for (const [k, v] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 15)) console.log(`    ${(v / 1000).toFixed(1).padStart(8)}  ${k}`);
}

function median(xs) { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; }
async function freePort() {
    return new Promise((res) => { const s = net.createServer().listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => res(p)); }); });
}

const port = await freePort();
const data = fs.mkdtempSync(path.join(os.tmpdir(), 'cx-ui-bench-'));
// CX_SERVER: another build's server (and so its UI), for a side-by-side run.
const srv = spawn(process.env.CX_SERVER || path.join(ROOT, 'build', 'codexray-server'), ['--listen', `127.0.0.1:${port}`, '--data-dir', data], { stdio: 'ignore' });
const url = `http://127.0.0.1:${port}`;
for (let i = 0; i < 100; i++) {
    try { if ((await fetch(url + '/healthz')).ok) break; } catch (e) { await new Promise((r) => setTimeout(r, 50)); }
}
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox'] });
const errors = [];
const summary = [];
try {
    for (const NODES of SIZES) summary.push(await measure(NODES));
} finally {
    await browser.close();
    srv.kill('SIGTERM');
    fs.rmSync(data, { recursive: true, force: true });
}
if (SIZES.length > 1) {
    console.log('summary (medians): nodes, first draw on screen ms, zoom frames/s (targets 200 ms, 30 frames/s)');
    for (const x of summary) {
        console.log(`  ${String(x.nodes).padStart(7)}  ${x.frame.toFixed(1).padStart(6)} ms ${x.frame <= 200 ? 'met' : 'NOT met'}` +
            `  ${x.zoomFps.toFixed(1).padStart(5)} frames/s ${x.zoomFps >= 30 ? 'met' : 'NOT met'}`);
    }
}

// Loads the page RUNS times with a synthesized tree of NODES nodes; prints
// the medians, returns the headline ones.
async function measure(NODES) {
    const fg = synthesize(NODES);
    const json = JSON.stringify(fg);
    const res = { fromRequest: [], redrawMs: [], parse: [], table: [], first: [], frame: [], hoverFps: [], hoverMs: [], zoomFps: [], zoomMs: [], drawn: [] };
    for (let run = 0; run < RUNS; run++) {
        const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
        page.on('pageerror', (e) => errors.push(e.message));
        await page.route('**/api/v1/profile?*', (r) => r.fulfill({ status: 200, contentType: 'application/json', body: json }));
        await page.goto(`${url}/#/app/bench?from=now-1h`);
        await page.waitForFunction(() => window.__cx.ready && window.__cx.tableMs !== undefined, null, { timeout: 60000 });
        if (TRACE && run === 0 && NODES === SIZES[0]) {
            await browser.startTracing(page, { categories: ['devtools.timeline', 'disabled-by-default-devtools.timeline', 'v8.execute'] });
        }
        const m = await page.evaluate(async () => {
            const cx = window.__cx, f = cx.fg, t = f.tree;
            const raf = () => new Promise((r) => requestAnimationFrame(r));
            const out = { first: cx.firstDrawMs, frame: cx.firstFrameMs, drawn: cx.drawn, parse: cx.stages.parse, table: cx.tableMs };
            // From the profile's request to the graph drawn: with the JSON's
            // transfer (from the bench, not the server: no query time).
            const req = performance.getEntriesByType('resource').find((e) => e.name.includes('/api/v1/profile?'));
            out.fromRequest = performance.getEntriesByName('cx-drawn')[0].startTime - req.startTime;
            // Frames wide enough to point at and zoom into.
            const cand = [];
            for (let i = 1; i < t.n && cand.length < 400; i += 7) if (f.boxOf(i).w > 3 && t.end[i] > i + 1) cand.push(i);
            const r = f.overlay.getBoundingClientRect();
            // Hover: one mousemove per frame, through the page's own handler.
            let work = [];
            await raf();
            let t0 = performance.now();
            const N = 120;
            for (let k = 0; k < N; k++) {
                const b = f.boxOf(cand[k % cand.length]);
                const w0 = performance.now();
                f.overlay.dispatchEvent(new MouseEvent('mousemove', { clientX: r.left + b.x + b.w / 2, clientY: r.top + b.y + 5, bubbles: true }));
                await raf(); // the page's hover runs in this frame
                work.push(performance.now() - w0);
                f.hoverAt(b.x + b.w / 2, b.y + 5); // measured apart: the work itself
            }
            out.hoverFps = N / ((performance.now() - t0) / 1000);
            work = [];
            for (let k = 0; k < N; k++) {
                const b = f.boxOf(cand[k % cand.length]);
                const w0 = performance.now();
                f.hoverAt(b.x + b.w / 2, b.y + 5);
                work.push(performance.now() - w0);
            }
            work.sort((a, b) => a - b);
            out.hoverMs = work[N >> 1];
            // Zoom: a click on a frame, then a click on the root row to come
            // back, one per frame, through the page's handlers and the URL.
            const clicks = [], redraws = [];
            t0 = performance.now();
            const Z = 40;
            for (let k = 0; k < Z; k++) {
                const b = k % 2 === 0 ? f.boxOf(cand[(k * 13) % cand.length]) : { x: 10, y: 0, w: 0 };
                const w0 = performance.now(), r = f.overlay.getBoundingClientRect(), before = cx.zoom;
                // A UI whose URL change goes through location.hash redraws in
                // the hashchange handler: waited for (or given up after a
                // second: a click that changed nothing). One that routes in
                // the click's own task has redrawn when dispatchEvent returns.
                const waitHash = new Promise((res) => {
                    const tm = setTimeout(() => res(false), 1000);
                    window.addEventListener('hashchange', () => setTimeout(() => { clearTimeout(tm); res(true); }, 0), { once: true });
                });
                f.overlay.dispatchEvent(new MouseEvent('click', { clientX: r.left + b.x + b.w / 2, clientY: r.top + b.y + 5, bubbles: true }));
                const ok = cx.zoom !== before || await waitHash;
                if (!ok || cx.zoom === before) continue;
                clicks.push(performance.now() - w0);
                redraws.push(cx.drawMs);
                await raf();
            }
            out.zoomFps = Z / ((performance.now() - t0) / 1000);
            clicks.sort((a, b) => a - b);
            out.zoomMs = clicks[clicks.length >> 1];
            redraws.sort((a, b) => a - b);
            out.redrawMs = redraws[redraws.length >> 1];
            if (clicks.length < Z / 2) throw new Error(`only ${clicks.length} of ${Z} zoom clicks changed the view`);
            return out;
        });
        if (TRACE && run === 0 && NODES === SIZES[0]) printTrace(JSON.parse((await browser.stopTracing()).toString()));
        for (const k of Object.keys(res)) res[k].push(m[k]);
        await page.close();
    }
    const f1 = (x) => x.toFixed(1);
    console.log(`web UI, ${NODES} nodes (${(json.length / 1e6).toFixed(1)} MB of JSON, ${fg.names.length - 2} functions), headless Chromium, median of ${RUNS}:`);
    console.log(`  first draw (JSON text in -> flame graph drawn): ${f1(median(res.first))} ms, of which JSON.parse + layout ${f1(median(res.parse))} ms; on screen (next painted frame) ${f1(median(res.frame))} ms (target 200 ms)`);
    console.log(`  from the profile's request to the graph drawn (the JSON's transfer included, no server work): ${f1(median(res.fromRequest))} ms`);
    console.log(`  function table, notes and legend done: ${f1(median(res.table))} ms after the data`);
    console.log(`  frames drawn at the root: ${median(res.drawn)} (wider than 0.5 px)`);
    console.log(`  hover: ${f1(median(res.hoverFps))} frames/s (one move per frame; the display's rate caps it), ${median(res.hoverMs).toFixed(2)} ms of work per move`);
    console.log(`  zoom: ${f1(median(res.zoomFps))} frames/s (click -> URL -> redraw, one per frame), ${f1(median(res.zoomMs))} ms from click to redrawn, of which the canvas redraw ${f1(median(res.redrawMs))} ms (target 30 frames/s = 33 ms)`);
    return { nodes: NODES, frame: median(res.frame), zoomFps: median(res.zoomFps) };
}
