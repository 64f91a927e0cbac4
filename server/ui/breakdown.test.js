import { test } from 'node:test';
import assert from 'node:assert/strict';
import { rowsOf, BREAKDOWN_LABELS, IDENTITY_FILTERS } from './breakdown.js';

test('rowsOf: biggest share first, other last, mean cores per value', () => {
    const rows = rowsOf({ from: 0, step: 60, groups: [
        { value: null, share: 0.5, cpu_cores: [1, 1] },
        { value: '202', share: 0.2, cpu_cores: [0.2, 0.6] },
        { value: '101', share: 0.3, cpu_cores: [0, 1.2] },
    ] });
    assert.deepEqual(rows.map((r) => r.label), ['101', '202', 'other']);
    assert.deepEqual(rows.map((r) => r.value), ['101', '202', null]);
    assert.ok(Math.abs(rows[0].mean - 0.6) < 1e-9);
    assert.ok(Math.abs(rows[1].mean - 0.4) < 1e-9);
    assert.deepEqual(rowsOf({}), []);
    assert.equal(rowsOf({ groups: [{ value: 'h1' }] })[0].mean, 0);
});

test('the labels a breakdown offers are the server\'s group_by values', () => {
    for (const l of IDENTITY_FILTERS) assert.ok(BREAKDOWN_LABELS.includes(l), l);
    assert.ok(BREAKDOWN_LABELS.includes('host') && BREAKDOWN_LABELS.includes('pid'));
});

test('rowsOf: the series of the answer\'s type (off_cpu_cores for type off_cpu)', () => {
    const rows = rowsOf({ type: 'off_cpu', groups: [{ value: 'a', share: 1, off_cpu_cores: [1, 3], cpu_cores: [9, 9] }] });
    assert.deepEqual(rows[0].cores, [1, 3]);
    assert.equal(rows[0].mean, 2);
});
