import { test } from 'node:test';
import assert from 'node:assert/strict';
import { nounOf, seriesOf, typeOf, typeParam, unitOf } from './value_type.js';

test('typeOf: cpu unless a known type', () => {
    assert.equal(typeOf(new URLSearchParams('')), 'cpu');
    assert.equal(typeOf(new URLSearchParams('type=off_cpu')), 'off_cpu');
    assert.equal(typeOf(new URLSearchParams('type=wall')), 'wall');
    assert.equal(typeOf(new URLSearchParams('type=bogus')), 'cpu');
    assert.equal(typeParam('cpu'), '');
    assert.equal(typeParam('wall'), 'wall');
});

test('seriesOf: the series the answer names, of its type', () => {
    assert.deepEqual(seriesOf({ type: 'off_cpu', off_cpu_cores: [1, 2] }), [1, 2]);
    assert.deepEqual(seriesOf({ cpu_cores: [3] }), [3]);
    assert.deepEqual(seriesOf({ value: 'x', wall_cores: [4] }, 'wall'), [4]);
    assert.deepEqual(seriesOf({ type: 'wall', cpu_cores: [1] }), []);
    assert.equal(nounOf('off_cpu'), 'off-CPU time');
    assert.equal(unitOf('cpu'), 'cores');
    assert.equal(unitOf('nope'), 'cores');
});
