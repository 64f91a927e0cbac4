import { test } from 'node:test';
import assert from 'node:assert/strict';
import { matchNames, matchShare } from './search.js';
import { parseTree } from './tree.js';
import { treeJson } from './test_trees.js';

const t = parseTree(treeJson({ 'main;Parse;lex': 4, 'main;parse_expr;lex': 2, 'main;eval': 3, 'main;parse_expr;parse_expr': 1 }));
const matched = (m) => t.names.filter((_, i) => m[i]);

test('matchNames: text is a case-insensitive substring of the name', () => {
    assert.deepEqual(matched(matchNames(t, 'PARSE')), ['Parse', 'parse_expr']);
    assert.deepEqual(matched(matchNames(t, 'ex')), ['lex', 'parse_expr']);
    assert.equal(matchNames(t, ''), null);
    // The root and the folded frames are never a match.
    assert.deepEqual(matched(matchNames(t, 'all')), []);
});

test('matchNames: /re/flags is a regular expression; a bad one matches nothing', () => {
    assert.deepEqual(matched(matchNames(t, '/^parse/')), ['parse_expr']);
    assert.deepEqual(matched(matchNames(t, '/^parse/i')), ['Parse', 'parse_expr']);
    assert.deepEqual(matched(matchNames(t, '/^(lex|eval)$/')), ['lex', 'eval']);
    const bad = matchNames(t, '/(/');
    assert.equal(bad.length, t.names.length);
    assert.deepEqual(matched(bad), []);
    // Not a regular expression without its closing slash.
    assert.deepEqual(matched(matchNames(t, '/lex')), []);
});

test('matchShare: each stack counted once, however many matching frames it holds', () => {
    const s = matchShare(t, matchNames(t, 'parse'));
    assert.equal(s.time, 7); // Parse 4 + parse_expr 3 (its recursive call inside)
    assert.equal(s.share, 0.7);
    assert.equal(s.funcs, 2);
    const lex = matchShare(t, matchNames(t, '/^lex$/'));
    assert.deepEqual(lex, { time: 6, share: 0.6, funcs: 1 });
    assert.deepEqual(matchShare(t, matchNames(t, 'nothing')), { time: 0, share: 0, funcs: 0 });
});
