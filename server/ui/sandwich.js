// The sandwich view of one function: its callers as an inverted tree (the
// function at the root, who calls it one level down, their callers below)
// and its callees (every subtree under the function, merged by path), both
// merged over every place the function is called from. Computed here from
// the flame-graph tree the page already has (no request). Pure functions;
// tests: sandwich.test.js.
//
// Recursion: a stack is counted once, at the function's outermost call in
// it (the occurrences with no caller of the same name above them). Its
// subtree holds the inner calls, so the callees' root total is the
// function's total as functionStats counts it, and the callers' tree has
// every stack once (an inner call's callers, inside the outer call, are
// already in the callees' tree). The self time shown is functionStats's:
// every frame of the function, outer and inner.
import { parseTree } from './tree.js';

// The occurrences of name nm in t that have no ancestor named nm, in
// index order.
export function outermostCalls(t, nm) {
    const out = [];
    for (let i = 1; i < t.n;) {
        if (t.name[i] === nm) { out.push(i); i = t.end[i]; } else i++;
    }
    return out;
}

// A merged tree under construction: nodes keyed by (parent, name).
function merger(nn) {
    const m = { n: 1, name: [0], total: [0], self: [0], parent: [-1], kids: [0], byKey: new Map() };
    m.child = (q, nm) => {
        const key = q * nn + nm;
        let c = m.byKey.get(key);
        if (c === undefined) {
            c = m.n++;
            m.byKey.set(key, c);
            m.name.push(nm); m.total.push(0); m.self.push(0); m.parent.push(q); m.kids.push(0);
            m.kids[q]++;
        }
        return c;
    };
    return m;
}

// The merged tree as parseTree's: children widest first (then by index,
// as made), depth first.
function finish(t, m) {
    const first = new Int32Array(m.n + 1);
    for (let c = 0; c < m.n; c++) first[c + 1] = first[c] + m.kids[c];
    const fill = first.slice(0, m.n), child = new Int32Array(Math.max(m.n - 1, 0));
    for (let c = 1; c < m.n; c++) child[fill[m.parent[c]]++] = c;
    const nodes = new Array(4 * m.n), stk = m.n ? [0] : [];
    let o = 0;
    while (stk.length) {
        const c = stk.pop();
        const cs = Array.from(child.subarray(first[c], first[c + 1])).sort((a, b) => m.total[b] - m.total[a] || a - b);
        nodes[o++] = m.name[c]; nodes[o++] = m.total[c]; nodes[o++] = m.self[c]; nodes[o++] = cs.length;
        for (let k = cs.length - 1; k >= 0; k--) stk.push(cs[k]);
    }
    const out = parseTree({ names: t.names, files: t.files, nodes, unit: t.unit, samples: t.samples, profiles: t.profiles });
    // The same names: their kinds and colours are t's, shared as t fills them.
    for (const k of ['classified', 'kind', 'unnamed', 'color', 'group', 'binary']) out[k] = t[k];
    return out;
}

// The sandwich of the function named nm (an index into t.names, > 1) in t:
// { callers, callees } (trees as parseTree's, rooted at nm), calls (how
// many outermost calls were merged), total (once per stack) and self
// (every frame of it). A name with no frame gives empty trees.
export function sandwich(t, nm) {
    const nn = t.names.length;
    const calls = nm > 1 && nm < nn ? outermostCalls(t, nm) : [];
    const up = merger(nn), down = merger(nn);
    up.name[0] = down.name[0] = nm;
    const to = new Int32Array(t.n);
    let self = 0;
    for (const o of calls) {
        const w = t.total[o];
        // Callers: the path from o up to the root's child, merged inverted;
        // the outermost caller's self is the time of these stacks.
        up.total[0] += w;
        let q = 0;
        for (let p = t.parent[o]; p > 0; p = t.parent[p]) {
            q = up.child(q, t.name[p]);
            up.total[q] += w;
        }
        up.self[q] += w;
        // Callees: o's subtree merged by path under the root.
        down.total[0] += w;
        down.self[0] += t.self[o];
        to[o] = 0;
        for (let i = o + 1; i < t.end[o]; i++) {
            const c = down.child(to[t.parent[i]], t.name[i]);
            down.total[c] += t.total[i];
            down.self[c] += t.self[i];
            to[i] = c;
            if (t.name[i] === nm) self += t.self[i];
        }
        self += t.self[o];
    }
    if (!calls.length) up.n = down.n = 0;
    return { callers: finish(t, up), callees: finish(t, down), calls: calls.length, total: up.total[0], self };
}
