// The flame-graph tree: the server's compact JSON (server/query.c) in flat
// typed arrays, laid out in the same pass, and the walks the page needs over
// those arrays (paths, per-function stats, unnamed frames, recursion
// collapsed). Pure functions; tests: tree.test.js.
//
// The tree JSON: names[0] = "all" (the root), names[1] = "other" (folded
// nodes), names[i + 2] / files[i + 2] = function i; nodes = [name, total,
// self, nchildren, ...], depth first, a node's children right after it,
// widest first. Times are nanoseconds of CPU.
import { classify } from './classify.js';
import { colorFor } from './colors.js';

// Parses the flame-graph JSON (an object) into flat typed arrays and lays
// it out in the same pass: x (offset from the root's left edge, in ns),
// depth, subtree end (the index after a node's last descendant), parent.
// Names are classified (kind, colour) on first use, not here: the first
// draw needs only the ones it shows. Throws on a malformed tree.
export function parseTree(fg) {
    const nodes = fg.nodes || [], names = fg.names || ['all', 'other'], files = fg.files || [];
    const n = Math.floor(nodes.length / 4), nn = names.length;
    const name = new Int32Array(n), total = new Float64Array(n), self = new Float64Array(n),
        x = new Float64Array(n), depth = new Uint16Array(n), end = new Int32Array(n), parent = new Int32Array(n);
    const rem = new Int32Array(n), nextX = new Float64Array(n), stk = new Int32Array(n + 1);
    let sp = 0, maxDepth = 0;
    for (let i = 0, o = 0; i < n; i++, o += 4) {
        const nm = nodes[o], tot = nodes[o + 1], kids = nodes[o + 3];
        if (!(nm >= 0 && nm < nn)) throw new Error(`node ${i}: name ${nm} out of range`);
        name[i] = nm;
        total[i] = tot;
        self[i] = nodes[o + 2];
        let xi = 0;
        if (sp > 0) {
            const p = stk[sp - 1], d = depth[p] + 1;
            parent[i] = p;
            depth[i] = d;
            if (d > maxDepth) maxDepth = d;
            xi = nextX[p];
            nextX[p] = xi + tot;
            rem[p]--;
        } else {
            if (i > 0) throw new Error(`node ${i}: a second root`);
            parent[i] = -1;
        }
        x[i] = xi;
        nextX[i] = xi;
        rem[i] = kids;
        if (kids > 0) {
            stk[sp++] = i;
        } else {
            end[i] = i + 1;
            while (sp > 0 && rem[stk[sp - 1]] === 0) end[stk[--sp]] = i + 1;
        }
    }
    while (sp > 0) end[stk[--sp]] = n; // a cut-off tree: close what is open
    return {
        n, names, files, unit: fg.unit, samples: fg.samples || 0, profiles: fg.profiles || 0,
        offCpu: fg.off_cpu || 0,
        name, total, self, x, depth, end, parent, maxDepth,
        // Per name, filled on first use (nameInfo) or all at once
        // (classifyAll): kind, colour, package group, binary (unnamed frames).
        classified: new Uint8Array(nn), kind: new Uint8Array(nn), unnamed: new Uint8Array(nn),
        color: new Array(nn).fill(''), group: new Array(nn).fill(''), binary: new Array(nn).fill(''),
    };
}

// Kind, colour, group and binary of name nm (once).
export function nameInfo(t, nm) {
    if (t.classified[nm]) return;
    const name = String(t.names[nm]), c = classify(name, String(t.files[nm] || ''), nm);
    t.kind[nm] = c.kind;
    t.unnamed[nm] = c.unnamed ? 1 : 0;
    t.group[nm] = c.group;
    t.binary[nm] = c.binary;
    t.color[nm] = colorFor(c.kind, c.group, name);
    t.classified[nm] = 1;
}

export function classifyAll(t) {
    for (let i = 0; i < t.names.length; i++) if (!t.classified[i]) nameInfo(t, i);
    return t;
}

// The child of node p named nm (a name string), or -1.
export function childNamed(t, p, nm) {
    for (let c = p + 1; c < t.end[p]; c = t.end[c]) if (t.names[t.name[c]] === nm) return c;
    return -1;
}

// A node as the names from the root's child down to it, and back. A path
// no longer in the tree resolves as far as it goes.
export function pathOf(t, i) {
    const out = [];
    for (; i > 0; i = t.parent[i]) out.push(t.names[t.name[i]]);
    return out.reverse();
}

export function resolvePath(t, path) {
    let i = 0;
    for (const nm of path) {
        const c = childNamed(t, i, nm);
        if (c < 0) break;
        i = c;
    }
    return t.n ? i : -1;
}

// Per function name: self, and total counted once per stack (a recursive
// function's inner calls are inside its outer call's total).
export function functionStats(t) {
    const nn = t.names.length;
    const self = new Float64Array(nn), total = new Float64Array(nn), onPath = new Int32Array(nn);
    const stk = new Int32Array(t.maxDepth + 2);
    let sp = 0;
    for (let i = 0; i < t.n; i++) {
        while (sp > 0 && i >= t.end[stk[sp - 1]]) onPath[t.name[stk[--sp]]]--;
        const nm = t.name[i];
        self[nm] += t.self[i];
        if (onPath[nm] === 0) total[nm] += t.total[i];
        onPath[nm]++;
        stk[sp++] = i;
    }
    return { self, total };
}

// The share of the self time in frames without names above which the page
// says so (table.js unnamedNotes).
export const UNNAMED_NOTE_SHARE = 0.1;

// Self time in frames without names, overall and per binary: what a reader
// sees, the time the graph and the function table put on frames that have
// no name (a stack that merely passes through one does not count: the
// time is named where it is spent). With the interpreters' frames hidden
// (the server's interp=hidden), their time is already the Python
// functions'.
export function unnamedReport(t) {
    classifyAll(t);
    const byBin = new Map();
    let all = 0;
    for (let i = 1; i < t.n; i++) {
        const nm = t.name[i];
        if (!t.unnamed[nm] || !t.self[i]) continue;
        all += t.self[i];
        byBin.set(t.binary[nm], (byBin.get(t.binary[nm]) || 0) + t.self[i]);
    }
    const root = t.n ? t.total[0] : 0;
    const binaries = [...byBin].map(([binary, time]) => ({ binary, time, share: root ? time / root : 0 }))
        .sort((a, b) => b.time - a.time);
    return { time: all, share: root ? all / root : 0, binaries };
}

// Whether a function calls itself directly somewhere in t (folded frames,
// "other", are not a function).
export function hasDirectRecursion(t) {
    for (let i = 1; i < t.n; i++) if (t.name[i] > 1 && t.name[i] === t.name[t.parent[i]]) return true;
    return false;
}

// Direct recursion collapsed, as the Firefox Profiler's "collapse direct
// recursion" does: a frame named as its caller is merged into it, its self
// time added to the caller's and its callees made the caller's (merged by
// name with the caller's own), so f -> f -> f -> g shows as f -> g, every
// total kept. Recursion through another function (f -> g -> f) stays.
// Returns a new tree (as parseTree's), or t itself when no function calls
// itself directly.
export function collapseRecursion(t) {
    const n = t.n, nn = t.names.length;
    if (!hasDirectRecursion(t)) return t;
    // The merged tree's nodes, a caller created before its callees.
    const to = new Int32Array(n); // a node -> its merged node
    const name = new Int32Array(n), total = new Float64Array(n), self = new Float64Array(n),
        parent = new Int32Array(n), kids = new Int32Array(n);
    const byName = new Map(); // merged parent * nn + name -> merged node
    let m = 0;
    for (let i = 0; i < n; i++) {
        const p = t.parent[i], nm = t.name[i];
        if (p < 0) {
            name[0] = nm; total[0] = t.total[i]; self[0] = t.self[i]; parent[0] = -1;
            m = 1;
            continue;
        }
        const q = to[p];
        if (nm > 1 && nm === name[q]) { to[i] = q; self[q] += t.self[i]; continue; }
        const key = q * nn + nm;
        let c = byName.get(key);
        if (c === undefined) {
            c = m++;
            byName.set(key, c);
            name[c] = nm; parent[c] = q; kids[q]++;
        }
        total[c] += t.total[i];
        self[c] += t.self[i];
        to[i] = c;
    }
    // Each node's callees, widest first, then depth first as the server sends it.
    const first = new Int32Array(m + 1);
    for (let c = 0; c < m; c++) first[c + 1] = first[c] + kids[c];
    const fill = first.slice(0, m), child = new Int32Array(Math.max(m - 1, 0));
    for (let c = 1; c < m; c++) child[fill[parent[c]]++] = c;
    const nodes = new Array(4 * m), stk = [0];
    let o = 0;
    while (stk.length) {
        const c = stk.pop();
        const cs = Array.from(child.subarray(first[c], first[c + 1])).sort((a, b) => total[b] - total[a] || a - b);
        nodes[o++] = name[c]; nodes[o++] = total[c]; nodes[o++] = self[c]; nodes[o++] = cs.length;
        for (let k = cs.length - 1; k >= 0; k--) stk.push(cs[k]);
    }
    const out = parseTree({ names: t.names, files: t.files, nodes, unit: t.unit, samples: t.samples, profiles: t.profiles });
    // The same names: their kinds and colours are t's, shared as t fills them.
    for (const k of ['classified', 'kind', 'unnamed', 'color', 'group', 'binary']) out[k] = t[k];
    return out;
}
