import { test } from 'node:test';
import assert from 'node:assert/strict';
import { alignDiff, diffTable, diffShares } from './diff.js';
import { parseTree } from './tree.js';
import { treeJson, nodeAt } from './test_trees.js';

// a: now; b: the baseline, its names in another order (other indices).
const a = parseTree(treeJson({ 'main;a;x': 6, 'main;b': 2, 'main;new': 2 }));
const b = parseTree(treeJson({ 'main;gone': 5, 'main;b': 10, 'main;a;x': 3, 'other;a': 2 }));

test('alignDiff: the baseline\'s frames matched to a\'s by path of names', () => {
    const { base, match } = alignDiff(a, b);
    assert.notEqual(a.names.indexOf('b'), b.names.indexOf('b'));
    assert.equal(base[0], b.total[0]);
    assert.equal(base[nodeAt(a, 'main')], 18);
    assert.equal(base[nodeAt(a, 'main;a')], 3);
    assert.equal(base[nodeAt(a, 'main;a;x')], 3);
    assert.equal(base[nodeAt(a, 'main;b')], 10);
    assert.equal(base[nodeAt(a, 'main;new')], 0); // new since the baseline
    assert.equal(match[nodeAt(b, 'main;gone')], -1); // gone since
    assert.equal(match[nodeAt(b, 'other;a')], -1); // same name, another path
    assert.equal(match[nodeAt(b, 'main;a;x')], nodeAt(a, 'main;a;x'));
});

test('alignDiff: an empty side', () => {
    const e = parseTree({});
    assert.deepEqual(Array.from(alignDiff(a, e).base), new Array(a.n).fill(0));
    assert.equal(alignDiff(e, b).base.length, 0);
});

test('diffShares: change of share per frame; colours saturate at 5 points at least', () => {
    const { base } = alignDiff(a, b);
    const { d, max } = diffShares(a, base, b.total[0]);
    const at = (p) => d[nodeAt(a, p)];
    assert.ok(Math.abs(at('main;a;x') - (0.6 - 0.15)) < 1e-6);
    assert.ok(Math.abs(at('main;b') - (0.2 - 0.5)) < 1e-6);
    assert.ok(Math.abs(at('main;new') - 0.2) < 1e-6);
    assert.ok(Math.abs(max - 0.45) < 1e-6);
    const same = diffShares(a, Float64Array.from(a.total), a.total[0]);
    assert.equal(same.max, 0.05);
    assert.deepEqual(Array.from(same.d), new Array(a.n).fill(0));
});

test('diffTable: per function, shares of each side\'s whole, biggest self change first', () => {
    const rows = diffTable(a, b);
    const by = Object.fromEntries(rows.map((r) => [r.name, r]));
    assert.deepEqual(rows.map((r) => r.name), ['x', 'b', 'gone', 'new', 'a', 'main']);
    assert.ok(Math.abs(by.x.selfDelta - 0.45) < 1e-9);
    assert.equal(by.b.aSelf, 0.2);
    assert.equal(by.b.bSelf, 0.5);
    assert.equal(by.gone.a, 0);
    assert.equal(by.gone.b, 0.25);
    assert.equal(by.new.b, 0);
    // a's total: under main and, in the baseline, under the folded frames too.
    assert.ok(Math.abs(by.a.delta - (0.6 - 0.25)) < 1e-9);
    assert.equal(by.main.selfDelta, 0);
});
