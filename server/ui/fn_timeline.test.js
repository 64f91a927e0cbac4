import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chosenFunction, seriesOf, stepChange } from './fn_timeline.js';

test('chosenFunction: the sandwich first, else a search that finds one function', () => {
    const names = ['all', 'other', 'main', 'parse', 'render'];
    assert.equal(chosenFunction('render', names, null), 'render');
    assert.equal(chosenFunction('render', names, Uint8Array.from([0, 0, 0, 1, 0])), 'render');
    assert.equal(chosenFunction('', names, Uint8Array.from([0, 0, 0, 1, 0])), 'parse');
    assert.equal(chosenFunction('', names, Uint8Array.from([0, 0, 0, 1, 1])), '');
    assert.equal(chosenFunction('', names, Uint8Array.from([0, 0, 0, 0, 0])), '');
    assert.equal(chosenFunction('', names, null), '');
});

test('seriesOf: every series the application\'s length, shares of its CPU', () => {
    const s = seriesOf({ from: 100, step: 60, cpu_cores: [2, 2, 4], self_cores: [0.5, 0.5, 1], total_cores: [1, 1, 2, 9] });
    assert.deepEqual(s.total, [1, 1, 2]);
    assert.deepEqual(s.self, [0.5, 0.5, 1]);
    assert.equal(s.share, 0.5);
    assert.equal(s.selfShare, 0.25);
    const e = seriesOf({ cpu_cores: [0, 0] });
    assert.deepEqual(e.self, [0, 0]);
    assert.equal(e.share, 0);
});

test('stepChange: finds a deploy\'s step, not noise', () => {
    const v = [1, 1.1, 0.9, 1, 1, 3, 3.1, 2.9, 3, 3];
    const c = stepChange(v);
    assert.equal(c.at, 5);
    assert.ok(Math.abs(c.before - 1) < 1e-9 && Math.abs(c.after - 3) < 1e-9);
    assert.equal(stepChange([2, 2, 2]), null);
    assert.equal(stepChange([1]), null);
    // A single spike is a weaker change than a lasting step of the same height.
    const spike = stepChange([1, 1, 1, 1, 3, 1, 1, 1, 1, 1]);
    assert.ok(spike.score < c.score);
});
