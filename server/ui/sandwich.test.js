import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseTree, functionStats } from './tree.js';
import { sandwich, outermostCalls } from './sandwich.js';
import { treeJson } from './test_trees.js';

// A sandwich tree as folded stacks, its root included (zero selfs left out).
function folded(t) {
    const out = {};
    for (let i = 0; i < t.n; i++) {
        if (!t.self[i]) continue;
        const path = [];
        for (let j = i; j >= 0; j = t.parent[j]) path.push(t.names[t.name[j]]);
        const k = path.reverse().join(';');
        out[k] = (out[k] || 0) + t.self[i];
    }
    return out;
}

const id = (t, nm) => t.names.indexOf(nm);

test('sandwich: a function called from several places at several depths', () => {
    const t = parseTree(treeJson({
        'main;a;f;g': 4, 'main;a;f': 1, 'main;b;c;f;h': 3, 'main;b;c;f;g': 2, 'main;f': 5, 'main;b': 7, 'f': 6,
    }));
    const f = id(t, 'f'), s = sandwich(t, f), st = functionStats(t);
    assert.equal(s.calls, 4);
    assert.equal(s.total, 21);
    assert.equal(s.total, st.total[f]);
    assert.equal(s.self, st.self[f]);
    assert.equal(s.self, 12);
    // Callers inverted: f at the root, its direct callers next, then theirs.
    assert.deepEqual(folded(s.callers), { 'f;a;main': 5, 'f;c;b;main': 5, 'f;main': 5, f: 6 });
    assert.equal(s.callers.total[0], 21);
    // Callees merged by path: the g under a;f and under b;c;f are one frame.
    assert.deepEqual(folded(s.callees), { 'f;g': 6, 'f;h': 3, f: 12 });
    assert.equal(s.callees.total[0], 21);
    assert.equal(s.callees.self[0], st.self[f]);
});

test('sandwich: recursion counted once per stack, at the outermost call', () => {
    const t = parseTree(treeJson({ 'main;f;f;f;g': 4, 'main;f;g;f': 2, 'main;f': 1, 'main;x;f;f': 3, 'main;g': 2 }));
    const f = id(t, 'f'), g = id(t, 'g'), st = functionStats(t);
    const s = sandwich(t, f);
    assert.equal(s.calls, 2);
    assert.deepEqual(outermostCalls(t, f).map((i) => t.names[t.name[t.parent[i]]]), ['main', 'x']);
    assert.equal(s.total, 10);
    assert.equal(s.total, st.total[f]); // not 10 + 4 + 4 + 2 + 3
    assert.equal(s.self, st.self[f]);
    assert.deepEqual(folded(s.callers), { 'f;main': 7, 'f;x;main': 3 });
    // The inner calls stay in the callees, so every self of the subtree is there once.
    assert.deepEqual(folded(s.callees), { 'f;f;f;g': 4, 'f;g;f': 2, f: 1, 'f;f': 3 });
    // g: called from f (twice, at two depths) and from main; the selfs add up to its total.
    const sg = sandwich(t, g);
    assert.equal(sg.total, st.total[g]);
    assert.equal(sg.total, 8);
    assert.deepEqual(folded(sg.callers), { 'g;f;f;f;main': 4, 'g;f;main': 2, 'g;main': 2 });
    const selfs = Object.values(folded(sg.callers)).reduce((a, b) => a + b, 0);
    assert.equal(selfs, sg.total);
});

test('sandwich: every frame of the flame graph\'s function accounted for', () => {
    // Each outermost call's total is in both trees; the callees' selfs are the subtrees' selfs.
    const stacks = { 'main;a;b;c': 3, 'main;c;a;b': 2, 'main;b': 4, 'main;a;b': 1, 'main;a;b;b;d': 6 };
    const t = parseTree(treeJson(stacks)), st = functionStats(t);
    for (const nm of ['main', 'a', 'b', 'c', 'd']) {
        const k = id(t, nm), s = sandwich(t, k);
        assert.equal(s.total, st.total[k], nm);
        assert.equal(s.callees.total[0], st.total[k], nm);
        const sum = (x) => Object.values(folded(x)).reduce((a, b) => a + b, 0);
        assert.equal(sum(s.callees), st.total[k], nm);
        assert.equal(sum(s.callers), st.total[k], nm);
    }
});

test('sandwich: a name not in the tree, "other" and an empty tree give empty trees', () => {
    const t = parseTree({ ...treeJson({ 'main;other': 3, 'main;a': 1 }) });
    t.names.push('gone'); // a name no frame has
    for (const nm of [1, 0, id(t, 'gone'), 99, -1]) {
        const s = sandwich(t, nm);
        assert.equal(s.callers.n, 0);
        assert.equal(s.callees.n, 0);
        assert.equal(s.total, 0);
    }
    assert.equal(sandwich(parseTree({}), 2).callers.n, 0);
});
