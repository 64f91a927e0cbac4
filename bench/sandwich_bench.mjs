// The sandwich (server/ui/sandwich.js) on a synthetic 400,000-node flame
// graph: 2,000 functions, random stacks to depth 40, in node. Prints the
// time per function and whether its total is functionStats' (true).
//   node bench/sandwich_bench.mjs
import { parseTree, functionStats } from '../server/ui/tree.js';
import { sandwich } from '../server/ui/sandwich.js';
// A 400,000-node tree: 2,000 functions, random stacks up to depth 40.
let seed = 1; const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
const NF = 2000, names = ['all', 'other'];
for (let i = 0; i < NF; i++) names.push('fn' + i);
const nodes = []; let count = 0;
function gen(depth) {
    const idx = nodes.length; count++;
    nodes.push(depth ? 2 + Math.floor((rnd() ** 3) * NF) : 0, 0, 0, 0);
    let total = 1 + Math.floor(rnd() * 100); nodes[idx + 2] = total;
    const kids = depth < 40 && count < 400000 ? Math.floor(rnd() * (depth < 3 ? 12 : 2.6)) : 0;
    let k = 0;
    for (; k < kids && count < 400000; k++) total += gen(depth + 1);
    nodes[idx + 1] = total; nodes[idx + 3] = k;
    return total;
}
nodes.push(0, 0, 0, 0); count = 1; let rootKids = 0, rootTotal = 0;
while (count < 400000) { rootTotal += gen(1); rootKids++; }
nodes[1] = rootTotal; nodes[3] = rootKids;
const t = parseTree({ names, files: [], nodes });
const st = functionStats(t);
console.log('nodes', t.n);
const order = [...Array(names.length).keys()].slice(2).sort((a, b) => st.total[b] - st.total[a]);
for (const nm of [order[0], order[10], order[500]]) {
    const t0 = performance.now(); const s = sandwich(t, nm); const ms = performance.now() - t0;
    console.log(names[nm], 'calls', s.calls, 'callers', s.callers.n, 'callees', s.callees.n, ms.toFixed(1) + ' ms', s.total === st.total[nm]);
}
const cnt = new Int32Array(names.length); for (let i = 1; i < t.n; i++) cnt[t.name[i]]++;
const most = order.slice().sort((a, b) => cnt[b] - cnt[a])[0];
// A function above everything: every node under it.
for (let i = 1; i < t.n; i++) if (t.depth[i] === 1) t.name[i] = most;
for (let r = 0; r < 3; r++) {
    const t0 = performance.now(); const s = sandwich(t, most); const ms = performance.now() - t0;
    console.log('worst', names[most], 'nodes of it', cnt[most], 'calls', s.calls, 'callers', s.callers.n, 'callees', s.callees.n, ms.toFixed(1) + ' ms');
}
