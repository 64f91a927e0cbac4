// For the unit tests only (*.test.js; not embedded in the server): flame
// graphs in the server's JSON (server/query.c), built from folded stacks as
// a reader would write them, so a test states its tree in one line each.

// { 'main;a;b': 5, 'main;c': 2 } (ns of self time per stack, root first;
// file of a name: files[name]) -> the flame-graph JSON: children widest
// first, then by name, as the server sends them.
export function treeJson(stacks, files = {}) {
    const names = ['all', 'other'], idx = new Map();
    const root = { name: 0, total: 0, self: 0, kids: new Map() };
    for (const [stack, ns] of Object.entries(stacks)) {
        let node = root;
        root.total += ns;
        for (const fn of stack.split(';')) {
            if (fn !== 'other' && !idx.has(fn)) { idx.set(fn, names.length); names.push(fn); }
            const nm = fn === 'other' ? 1 : idx.get(fn);
            let c = node.kids.get(nm);
            if (!c) node.kids.set(nm, c = { name: nm, total: 0, self: 0, kids: new Map() });
            c.total += ns;
            node = c;
        }
        node.self += ns;
    }
    const nodes = [], stk = [root];
    while (stk.length) {
        const n = stk.pop();
        const kids = [...n.kids.values()].sort((a, b) => b.total - a.total || (names[a.name] < names[b.name] ? -1 : 1));
        nodes.push(n.name, n.total, n.self, kids.length);
        for (let k = kids.length - 1; k >= 0; k--) stk.push(kids[k]);
    }
    return { unit: 'nanoseconds', samples: 1, profiles: 1, names, files: names.map((n) => files[n] || ''), nodes };
}

// A tree as folded stacks again ('main;a;b' -> self ns, zero selfs left
// out): what a test compares, whatever the node order.
export function folded(t) {
    const out = {};
    for (let i = 1; i < t.n; i++) {
        if (!t.self[i]) continue;
        const path = [];
        for (let j = i; j > 0; j = t.parent[j]) path.push(t.names[t.name[j]]);
        const k = path.reverse().join(';');
        out[k] = (out[k] || 0) + t.self[i];
    }
    return out;
}

// The node at a path of names ('main;a'), or -1.
export function nodeAt(t, path) {
    let i = 0;
    for (const nm of path.split(';')) {
        let found = -1;
        for (let c = i + 1; c < t.end[i]; c = t.end[c]) if (t.names[t.name[c]] === nm) { found = c; break; }
        if (found < 0) return -1;
        i = found;
    }
    return i;
}
