import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ROW, visibleFrames, frameAt, frameBox } from './layout.js';
import { parseTree } from './tree.js';
import { treeJson, nodeAt } from './test_trees.js';

// 1000 ns wide: at 1000 px, 1 px a ns.
const t = parseTree(treeJson({ 'main;a;b': 600, 'main;a;tiny': 0.4, 'main;c': 399.6 }));
const shown = (z, w) => {
    const vis = new Int32Array(t.n), r = visibleFrames(t, z, w, vis);
    return { names: Array.from(vis.subarray(0, r.nv), (i) => t.names[t.name[i]]), maxD: r.maxD };
};

test('visibleFrames: frames narrower than half a pixel left out, with their callees', () => {
    assert.deepEqual(shown(0, 1000), { names: ['all', 'main', 'a', 'b', 'c'], maxD: 3 });
    assert.deepEqual(shown(0, 2000).names, ['all', 'main', 'a', 'b', 'tiny', 'c']);
    assert.deepEqual(shown(0, 0.1).names, []); // even the root
});

test('visibleFrames: zoomed, the ancestors first, then the zoomed subtree', () => {
    const a = nodeAt(t, 'main;a');
    assert.deepEqual(shown(a, 1000), { names: ['main', 'all', 'a', 'b', 'tiny'], maxD: 3 });
});

test('frameBox and frameAt agree: the frame drawn at the middle of its box', () => {
    for (const z of [0, nodeAt(t, 'main;a')]) {
        const vis = new Int32Array(t.n), { nv } = visibleFrames(t, z, 1000, vis);
        assert.ok(nv >= 4);
        for (const i of vis.subarray(0, nv)) {
            const b = frameBox(t, z, 1000, i);
            assert.equal(frameAt(t, z, 1000, b.x + b.w / 2, b.y + b.h / 2), i, `frame ${t.names[t.name[i]]}, zoom ${z}`);
        }
    }
});

test('frameBox: zoomed into a, a spans the width and its ancestors are full width', () => {
    const a = nodeAt(t, 'main;a'), b = nodeAt(t, 'main;a;b');
    assert.deepEqual(frameBox(t, a, 1000, nodeAt(t, 'main')), { x: 0, y: ROW, w: 1000, h: ROW - 1 });
    assert.deepEqual(frameBox(t, a, 1000, a), { x: 0, y: 2 * ROW, w: 1000, h: ROW - 1 });
    const bb = frameBox(t, a, 1000, b);
    assert.ok(Math.abs(bb.w - 1000 * 600 / 600.4) < 1e-9 && bb.x === 0 && bb.y === 3 * ROW);
});

test('frameAt: nothing outside the frames, under a narrow frame, or above and left of the canvas', () => {
    assert.equal(frameAt(t, 0, 1000, 700, 3 * ROW + 5), -1); // under c: c has no callees
    assert.equal(frameAt(t, 0, 1000, 600.2, 3 * ROW + 5), -1); // tiny: 0.4 px
    assert.equal(frameAt(t, 0, 1000, 1000, 5), -1); // right of the root
    assert.equal(frameAt(t, 0, 1000, -1, 5), -1);
    assert.equal(frameAt(t, 0, 1000, 5, -1), -1);
    assert.equal(frameAt(t, 0, 1000, 5, 40 * ROW), -1);
    assert.equal(frameAt(parseTree({}), 0, 1000, 5, 5), -1);
    // Zoomed, a click on an ancestor's full-width row is that ancestor.
    assert.equal(frameAt(t, nodeAt(t, 'main;a'), 1000, 990, 5), 0);
});
