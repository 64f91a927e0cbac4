import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
    parseTree, childNamed, pathOf, resolvePath, functionStats, unnamedReport, collapseRecursion, nameInfo,
    UNNAMED_NOTE_SHARE,
    hasDirectRecursion,
} from './tree.js';
import { KIND } from './classify.js';
import { treeJson, folded, nodeAt } from './test_trees.js';

const names = (t) => Array.from(t.name, (nm) => t.names[nm]);

test('parseTree lays out a tree in one pass: x, depth, subtree end, parent', () => {
    const t = parseTree(treeJson({ 'main;a;b': 5, 'main;a': 1, 'main;c': 2, 'main;a;d': 3 }));
    assert.equal(t.n, 6);
    assert.deepEqual(names(t), ['all', 'main', 'a', 'b', 'd', 'c']);
    assert.deepEqual(Array.from(t.total), [11, 11, 9, 5, 3, 2]);
    assert.deepEqual(Array.from(t.self), [0, 0, 1, 5, 3, 2]);
    assert.deepEqual(Array.from(t.depth), [0, 1, 2, 3, 3, 2]);
    assert.deepEqual(Array.from(t.parent), [-1, 0, 1, 2, 2, 1]);
    assert.deepEqual(Array.from(t.end), [6, 6, 5, 4, 5, 6]);
    // A frame starts where its elder siblings end, inside its parent.
    assert.deepEqual(Array.from(t.x), [0, 0, 0, 0, 5, 9]);
    assert.equal(t.maxDepth, 3);
});

test('parseTree: an empty tree, a cut-off tree, and malformed ones', () => {
    const empty = parseTree({});
    assert.equal(empty.n, 0);
    assert.deepEqual(empty.names, ['all', 'other']);
    // The root says two children, only one came: what is open is closed.
    const cut = parseTree({ names: ['all', 'other', 'f'], nodes: [0, 10, 0, 2, 2, 4, 4, 0] });
    assert.deepEqual(Array.from(cut.end), [2, 2]);
    assert.throws(() => parseTree({ names: ['all', 'other'], nodes: [0, 1, 1, 0, 7, 1, 1, 0] }), /node 1: name 7 out of range/);
    assert.throws(() => parseTree({ names: ['all', 'other'], nodes: [0, 1, 1, 0, 0, 1, 1, 0] }), /node 1: a second root/);
    assert.throws(() => parseTree({ names: ['all', 'other'], nodes: [-1, 1, 1, 0] }), /name -1 out of range/);
});

test('paths: a node as names from the root and back, as far as a path goes', () => {
    const t = parseTree(treeJson({ 'main;a;b': 5, 'main;c': 2 }));
    const b = nodeAt(t, 'main;a;b');
    assert.deepEqual(pathOf(t, b), ['main', 'a', 'b']);
    assert.equal(resolvePath(t, ['main', 'a', 'b']), b);
    assert.equal(resolvePath(t, []), 0);
    assert.equal(resolvePath(t, ['main', 'a', 'gone', 'b']), nodeAt(t, 'main;a'));
    assert.equal(childNamed(t, nodeAt(t, 'main'), 'c'), nodeAt(t, 'main;c'));
    assert.equal(childNamed(t, nodeAt(t, 'main'), 'b'), -1);
    assert.equal(resolvePath(parseTree({}), ['x']), -1);
});

test('functionStats: self summed, total once per stack for recursive functions', () => {
    const t = parseTree(treeJson({ 'main;f;f;f;g': 4, 'main;f': 1, 'main;g': 2 }));
    const s = functionStats(t), id = (nm) => t.names.indexOf(nm);
    assert.equal(s.self[id('f')], 1);
    assert.equal(s.total[id('f')], 5); // not 5 + 4 + 4
    assert.equal(s.self[id('g')], 6);
    assert.equal(s.total[id('g')], 6);
    assert.equal(s.total[id('main')], 7);
});

test('unnamedReport: self time in frames without names, per binary; passing through one is not counted', () => {
    const t = parseTree(treeJson({
        'main;libx.so+0x10;libx.so+0x20;f': 4, 'main;liby.so+0x1;libx.so+0x30': 2, 'main;f': 3, 'main;libx.so+0x10': 1,
    }));
    const r = unnamedReport(t);
    assert.equal(r.time, 3); // libx.so+0x30's 2 and libx.so+0x10's 1; f's 4 under two unnamed frames is f's
    assert.equal(r.share, 0.3);
    assert.deepEqual(r.binaries, [{ binary: 'libx.so', time: 3, share: 0.3 }]);
});

test('unnamedReport: a Python program whose interpreter frames are hidden has little unnamed time', () => {
    // As the server sends it with interp=hidden: every stack passes through the
    // interpreter's unnamed frames below the Python ones, the time is spent in
    // Python functions and a named C function.
    const t = parseTree(treeJson({
        'main;python3.11+0x647d97;<module>;hot': 90, 'main;python3.11+0x647d97;<module>;hot;PyLong_FromLong': 8,
        'main;python3.11+0x647d97': 2,
    }, { '<module>': 'app.py', hot: 'app.py' }));
    const r = unnamedReport(t);
    assert.equal(r.time, 2);
    assert.equal(r.share, 0.02);
    assert.ok(r.share <= UNNAMED_NOTE_SHARE); // the note stays silent
});

test('collapseRecursion: f -> f -> f shown once, every total and self kept', () => {
    const t = parseTree(treeJson({ 'main;f;f;f;g': 4, 'main;f;f;h': 3, 'main;f;g': 2, 'main;f': 1, 'main;k': 5 }));
    const c = collapseRecursion(t);
    assert.notEqual(c, t);
    assert.deepEqual(folded(c), { 'main;f;g': 6, 'main;f;h': 3, 'main;f': 1, 'main;k': 5 });
    const f = nodeAt(c, 'main;f');
    assert.equal(c.total[0], t.total[0]);
    assert.equal(c.total[f], t.total[nodeAt(t, 'main;f')]);
    assert.equal(c.total[nodeAt(c, 'main;f;g')], 6); // g under the outer f and under the inner f, merged
    assert.equal(c.maxDepth, 3);
    // Laid out again: widest first, each child inside its parent.
    assert.deepEqual(names(c), ['all', 'main', 'f', 'g', 'h', 'k']);
    assert.deepEqual(Array.from(c.x), [0, 0, 0, 0, 6, 10]);
    // The per-function table does not change.
    const a = functionStats(t), b = functionStats(c);
    assert.deepEqual(Array.from(b.self), Array.from(a.self));
    assert.deepEqual(Array.from(b.total), Array.from(a.total));
});

test('collapseRecursion: only direct recursion; none returns the tree itself', () => {
    const t = parseTree(treeJson({ 'main;f;g;f;g': 3, 'main;g': 1 }));
    assert.equal(hasDirectRecursion(t), false);
    assert.equal(collapseRecursion(t), t);
    const u = parseTree(treeJson({ 'main;f;g;g;f;f': 3 }));
    assert.equal(hasDirectRecursion(u), true);
    assert.deepEqual(folded(collapseRecursion(u)), { 'main;f;g;f': 3 });
    // Folded frames ("other") are not a function calling itself.
    const o = parseTree(treeJson({ 'main;other;other': 2, 'main;a': 1 }));
    assert.equal(hasDirectRecursion(o), false);
    assert.equal(collapseRecursion(o), o);
});

test('collapseRecursion: a 5000-deep recursion in one pass', () => {
    const deep = Array(5000).fill('mark').join(';');
    const t = parseTree(treeJson({ ['main;' + deep + ';leaf']: 6, ['main;' + deep]: 2, 'main;parse': 2 }));
    assert.equal(t.maxDepth, 5002);
    const c = collapseRecursion(t);
    assert.deepEqual(folded(c), { 'main;mark;leaf': 6, 'main;mark': 2, 'main;parse': 2 });
    assert.equal(c.total[nodeAt(c, 'main;mark')], 8);
    assert.equal(c.maxDepth, 3);
});

test('collapseRecursion shares the names\' kinds and colours with the tree it came from', () => {
    const t = parseTree(treeJson({ 'main;f;f': 1 }, { f: '/usr/lib/python3.11/json/encoder.py' }));
    const c = collapseRecursion(t), f = t.names.indexOf('f');
    nameInfo(c, f);
    assert.equal(t.classified[f], 1);
    assert.equal(t.kind[f], KIND.PYTHON);
    assert.equal(t.color[f], c.color[f]);
});
