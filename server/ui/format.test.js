import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fmtTime, fmtPct, cores, ago } from './format.js';

test('fmtTime: ms below a second, then s, min, h', () => {
    assert.equal(fmtTime(0), '0.0 ms');
    assert.equal(fmtTime(1.25e6), '1.3 ms');
    assert.equal(fmtTime(999e6), '999.0 ms');
    assert.equal(fmtTime(1e9), '1.00 s');
    assert.equal(fmtTime(59.994e9), '59.99 s');
    assert.equal(fmtTime(90e9), '1.5 min');
    assert.equal(fmtTime(3600e9), '1.00 h');
    assert.equal(fmtTime(5400e9), '1.50 h');
});

test('fmtPct: about three significant digits, signed', () => {
    assert.equal(fmtPct(1), '100.0 %');
    assert.equal(fmtPct(0.1234), '12.3 %');
    assert.equal(fmtPct(0.05), '5.00 %');
    assert.equal(fmtPct(0.001), '0.10 %');
    assert.equal(fmtPct(0.0009), '0.090 %');
    assert.equal(fmtPct(0.0001234), '0.012 %');
    assert.equal(fmtPct(0), '0.000 %');
    assert.equal(fmtPct(-0.25), '-25.0 %');
    assert.equal(fmtPct(-0.005), '-0.50 %');
});

test('cores: more digits for less', () => {
    assert.equal(cores(12.34), '12.3');
    assert.equal(cores(1.234), '1.23');
    assert.equal(cores(0.01), '0.01');
    assert.equal(cores(0.0042), '0.004');
    assert.equal(cores(0), '0');
});

test('ago: seconds, minutes, hours, days', () => {
    const now = 1_800_000_000;
    assert.equal(ago(now, now), '0 s ago');
    assert.equal(ago(now + 5, now), '0 s ago'); // a clock ahead: not negative
    assert.equal(ago(now - 89, now), '89 s ago');
    assert.equal(ago(now - 90, now), '2 min ago');
    assert.equal(ago(now - 5399, now), '90 min ago');
    assert.equal(ago(now - 5400, now), '2 h ago');
    assert.equal(ago(now - 172800, now), '2 d ago');
});
