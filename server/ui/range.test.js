import { test } from 'node:test';
import assert from 'node:assert/strict';
import { toUnix, rangeValue, rangeLabel, stepFor } from './range.js';

const now = 1_800_000_000;

test('toUnix: now, now-N[smhdw], Unix seconds, dates; NaN otherwise', () => {
    assert.equal(toUnix('now', now), now);
    assert.equal(toUnix('', now), now);
    assert.equal(toUnix('now-90', now), now - 90);
    assert.equal(toUnix('now-15m', now), now - 900);
    assert.equal(toUnix('now-1.5h', now), now - 5400);
    assert.equal(toUnix('now-7d', now), now - 7 * 86400);
    assert.equal(toUnix('now-2w', now), now - 14 * 86400);
    assert.equal(toUnix('1700000000', now), 1700000000);
    assert.equal(toUnix('2026-12-03T12:00:00Z', now), Date.UTC(2026, 11, 3, 12) / 1000);
    assert.ok(Number.isNaN(toUnix('yesterday-ish', now)));
    assert.ok(Number.isNaN(toUnix('now-1y', now)));
});

test('rangeValue: kept as typed when the server reads it, a date as Unix seconds, else null', () => {
    assert.equal(rangeValue(' now-3h '), 'now-3h');
    assert.equal(rangeValue('now'), 'now');
    assert.equal(rangeValue('1700000000'), '1700000000');
    assert.equal(rangeValue(''), '');
    assert.equal(rangeValue('2026-12-03T12:00:00Z'), String(Date.UTC(2026, 11, 3, 12) / 1000));
    assert.equal(rangeValue('not a date'), null);
});

test('rangeLabel: a preset by its name, else both ends', () => {
    assert.equal(rangeLabel('now-1h', 'now'), 'last 1h');
    assert.equal(rangeLabel('now-15m', ''), 'last 15m');
    assert.match(rangeLabel('now-1h', '1700000000', now), / – /);
    assert.match(rangeLabel('now-2h', 'now', now), / – /);
});

test('stepFor: about 240 points, whole minutes, at least one', () => {
    assert.equal(stepFor(now - 900, now), 60);
    assert.equal(stepFor(now, now), 60);
    assert.equal(stepFor(now - 86400, now), 360);
    assert.equal(stepFor(now - 7 * 86400, now), 2520);
});
