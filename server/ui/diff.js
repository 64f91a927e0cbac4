// Diff of two trees: a's frames matched to the baseline b's by path, the
// per-frame change of share, and the per-function table of changes. Pure
// functions; tests: diff.test.js.
import { functionStats } from './tree.js';

// Diff: b's nodes matched to a's by path (the same names from the root).
// Returns per a-node the baseline total (0 where the path is new) and the
// per-name stats of both, aligned to a's name indices where the names agree.
export function alignDiff(a, b) {
    const nameIdx = new Map();
    for (let i = 0; i < a.names.length; i++) nameIdx.set(String(a.names[i]), i);
    const nn = a.names.length + 1;
    const key = new Map(); // parentA * nn + nameA -> a node
    for (let i = 1; i < a.n; i++) key.set(a.parent[i] * nn + a.name[i], i);
    const match = new Int32Array(b.n).fill(-1);
    const base = new Float64Array(a.n);
    if (a.n && b.n) { match[0] = 0; base[0] = b.total[0]; }
    for (let j = 1; j < b.n; j++) {
        const pa = match[b.parent[j]];
        if (pa < 0) continue;
        const na = nameIdx.get(String(b.names[b.name[j]]));
        if (na === undefined) continue;
        const ai = key.get(pa * nn + na);
        if (ai === undefined) continue;
        match[j] = ai;
        base[ai] += b.total[j];
    }
    return { base, match };
}

// Per-function changes between baseline b and a, as shares of each side's
// whole so ranges of different lengths compare; biggest first.
export function diffTable(a, b) {
    const sa = functionStats(a), sb = functionStats(b);
    const ra = a.n ? a.total[0] : 0, rb = b.n ? b.total[0] : 0;
    const rows = new Map();
    const add = (t, s, r, side) => {
        for (let i = 2; i < t.names.length; i++) {
            if (!s.total[i] && !s.self[i]) continue;
            const nm = String(t.names[i]);
            let row = rows.get(nm);
            if (!row) {
                row = { name: nm, file: String(t.files[i] || ''), a: 0, b: 0, aSelf: 0, bSelf: 0 };
                rows.set(nm, row);
            }
            row[side] = r ? s.total[i] / r : 0;
            row[side + 'Self'] = r ? s.self[i] / r : 0;
        }
    };
    add(a, sa, ra, 'a');
    add(b, sb, rb, 'b');
    const out = [...rows.values()];
    for (const r of out) { r.delta = r.a - r.b; r.selfDelta = r.aSelf - r.bSelf; }
    out.sort((x, y) => Math.abs(y.selfDelta) - Math.abs(x.selfDelta) || Math.abs(y.delta) - Math.abs(x.delta));
    return out;
}

// Per a-node the change of its share of the whole against the baseline
// (base from alignDiff, rb the baseline root's total), and the largest
// change, never below 5 points of share: noise between two ranges should
// look pale, not alarming.
export function diffShares(t, base, rb) {
    const ra = t.total[0] || 1;
    const d = new Float32Array(t.n);
    let max = 0;
    for (let i = 0; i < t.n; i++) {
        d[i] = t.total[i] / ra - (rb ? base[i] / rb : 0);
        if (Math.abs(d[i]) > max) max = Math.abs(d[i]);
    }
    return { d, max: Math.max(max, 0.05) };
}
