import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
    parseTree, childNamed, pathOf, resolvePath, functionStats, unnamedReport,
} from './tree.js';
import { treeJson, nodeAt } from './test_trees.js';

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

test('unnamedReport: time under frames without names, once per stack, per binary', () => {
    const t = parseTree(treeJson({
        'main;libx.so+0x10;libx.so+0x20;f': 4, 'main;liby.so+0x1;libx.so+0x30': 2, 'main;f': 4,
    }));
    const r = unnamedReport(t);
    assert.equal(r.time, 6);
    assert.equal(r.share, 0.6);
    assert.deepEqual(r.binaries, [{ binary: 'libx.so', time: 6, share: 0.6 }, { binary: 'liby.so', time: 2, share: 0.2 }]);
});
