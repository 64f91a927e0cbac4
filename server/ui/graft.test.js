import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseTree, pathOf } from './tree.js';
import { focusTarget, graftSubtree, hasFolded, mergeTrees } from './graft.js';
import { treeJson, folded, nodeAt } from './test_trees.js';

// The whole profile, and what a server trimming to a few nodes sends:
// main;serve's small callees folded into an "other" frame of the same
// total (as query.c folds).
const whole = { 'main;serve;parse;lex': 50, 'main;serve;tiny': 2, 'main;serve;small': 3, 'main;idle': 40, 'main;gc': 5 };
const trimmed = { 'main;serve;parse;lex': 50, 'main;serve;other': 5, 'main;idle': 40, 'main;gc': 5 };

test('focusTarget: a zoom over a folded frame asks for its parent; none when nothing is folded', () => {
    const t = parseTree(treeJson(trimmed));
    const serve = nodeAt(t, 'main;serve'), other = nodeAt(t, 'main;serve;other');
    assert.equal(focusTarget(t, serve, ['main', 'serve']), serve);
    assert.equal(focusTarget(t, nodeAt(t, 'main'), ['main']), nodeAt(t, 'main'));
    assert.equal(focusTarget(t, other, ['main', 'serve', 'other']), serve);
    // A URL's path to the folded frame stops at serve: serve is asked for.
    assert.equal(focusTarget(t, serve, ['main', 'serve', 'tiny']), serve);
    // Nothing folded under idle or parse; the root is never asked for.
    assert.equal(focusTarget(t, nodeAt(t, 'main;idle'), ['main', 'idle']), -1);
    assert.equal(focusTarget(t, nodeAt(t, 'main;serve;parse'), ['main', 'serve', 'parse']), -1);
    assert.equal(focusTarget(t, 0, []), -1);
    assert.equal(focusTarget(parseTree(treeJson(whole)), 1, ['main']), -1);
});

test('graftSubtree: the focused answer put in place of the trimmed subtree, every total kept', () => {
    const t = parseTree(treeJson(trimmed));
    const serve = nodeAt(t, 'main;serve'), path = pathOf(t, serve);
    // The server's focus=main;serve answer: only the stacks under it.
    const sub = parseTree(treeJson({ 'main;serve;parse;lex': 50, 'main;serve;tiny': 2, 'main;serve;small': 3 }));
    const g = graftSubtree(t, serve, path, sub);
    assert.ok(g);
    assert.deepEqual(folded(g), folded(parseTree(treeJson(whole))));
    assert.equal(g.total[0], t.total[0]);
    // The tiny frame is a frame of its own now, reachable by a path.
    const tiny = nodeAt(g, 'main;serve;tiny');
    assert.ok(tiny > 0);
    assert.equal(g.total[tiny], 2);
    assert.equal(nodeAt(g, 'main;serve;other'), -1);
    // The frames around it kept, laid out again (x, end, parent).
    assert.equal(g.total[nodeAt(g, 'main;idle')], 40);
    assert.equal(g.x[nodeAt(g, 'main;gc')], 95);
    assert.equal(g.end[0], g.n);
});

test('graftSubtree: names new to the page appended, known ones shared; refused when totals differ', () => {
    const t = parseTree(treeJson(trimmed));
    const serve = nodeAt(t, 'main;serve');
    const sub = parseTree(treeJson({ 'main;serve;parse;lex': 50, 'main;serve;tiny': 2, 'main;serve;small': 3 }));
    const g = graftSubtree(t, serve, ['main', 'serve'], sub);
    assert.deepEqual(g.names.slice(0, t.names.length), t.names);
    assert.equal(g.names.filter((x) => x === 'lex').length, 1);
    assert.ok(g.names.includes('tiny'));
    // A profile arrived between the two answers: serve's total differs.
    const late = parseTree(treeJson({ 'main;serve;parse;lex': 51, 'main;serve;tiny': 2, 'main;serve;small': 3 }));
    assert.equal(graftSubtree(t, serve, ['main', 'serve'], late), null);
    // The answer lacks the frame.
    assert.equal(graftSubtree(t, serve, ['main', 'serve'], parseTree(treeJson({ 'main;idle': 40 }))), null);
});

test('mergeTrees: a search answer merged into the trimmed tree, its frames drawn, every total kept', () => {
    const t = parseTree(treeJson(trimmed));
    assert.ok(hasFolded(t));
    assert.ok(!hasFolded(parseTree(treeJson(whole))));
    // search=tiny: the path down to it, the rest of each frame in "other".
    const s = parseTree(treeJson({ 'main;serve;tiny': 2, 'main;serve;other': 53, 'main;other': 45 }));
    const g = mergeTrees(t, s);
    assert.ok(g);
    assert.deepEqual(folded(g), { 'main;serve;parse;lex': 50, 'main;serve;tiny': 2, 'main;serve;other': 3, 'main;idle': 40, 'main;gc': 5 });
    assert.equal(g.total[0], 100);
    assert.equal(g.total[nodeAt(g, 'main;serve;tiny')], 2);
    assert.equal(g.end[0], g.n);
    assert.deepEqual(g.names.slice(0, t.names.length), t.names);
    // Merged again (small found too): serve's "other" gone.
    const g2 = mergeTrees(g, parseTree(treeJson({ 'main;serve;small': 3, 'main;serve;other': 52, 'main;other': 45 })));
    assert.deepEqual(folded(g2), whole);
    assert.equal(nodeAt(g2, 'main;serve;other'), -1);
    assert.ok(!hasFolded(g2));
});

test('mergeTrees: a frame folded higher up comes whole from the answer; refused when totals differ', () => {
    // serve and gc folded into main's "other".
    const t = parseTree(treeJson({ 'main;idle': 40, 'main;other': 60 }));
    const s = parseTree(treeJson({ 'main;serve;parse;lex': 50, 'main;serve;other': 5, 'main;other': 45 }));
    const g = mergeTrees(t, s);
    assert.deepEqual(folded(g), { 'main;idle': 40, 'main;serve;parse;lex': 50, 'main;serve;other': 5, 'main;other': 5 });
    // Children widest first: serve (55) before idle (40), "other" last.
    const main = nodeAt(g, 'main');
    assert.equal(g.names[g.name[main + 1]], 'serve');
    assert.equal(g.name[g.end[main] - 1], 1);
    // A profile arrived between the two answers: main's total differs.
    assert.equal(mergeTrees(t, parseTree(treeJson({ 'main;serve;parse;lex': 51, 'main;serve;other': 5, 'main;other': 45 }))), null);
    // More shown than the frame holds.
    assert.equal(mergeTrees(parseTree(treeJson({ 'main;idle': 99, 'main;other': 1 })), s), null);
});
