// The flame-graph tree: the server's compact JSON (server/query.c) in flat
// typed arrays, laid out in the same pass, and the walks the page needs over
// those arrays (paths, per-function stats, unnamed frames). Pure
// functions; tests: tree.test.js.
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

// Time under frames without names: overall and per binary, a stack counted
// once however many such frames it holds.
export function unnamedReport(t) {
    classifyAll(t);
    const byBin = new Map();
    const stk = new Int32Array(t.maxDepth + 2), seen = new Map();
    let sp = 0, depthIn = 0, all = 0;
    for (let i = 0; i < t.n; i++) {
        while (sp > 0 && i >= t.end[stk[sp - 1]]) {
            const j = stk[--sp], nm = t.name[j];
            if (t.unnamed[nm]) { depthIn--; seen.set(t.binary[nm], seen.get(t.binary[nm]) - 1); }
        }
        const nm = t.name[i];
        if (t.unnamed[nm]) {
            const b = t.binary[nm], k = seen.get(b) || 0;
            if (depthIn === 0) all += t.total[i];
            if (k === 0) byBin.set(b, (byBin.get(b) || 0) + t.total[i]);
            seen.set(b, k + 1);
            depthIn++;
        }
        stk[sp++] = i;
    }
    const root = t.n ? t.total[0] : 0;
    const binaries = [...byBin].map(([binary, time]) => ({ binary, time, share: root ? time / root : 0 }))
        .sort((a, b) => b.time - a.time);
    return { time: all, share: root ? all / root : 0, binaries };
}
