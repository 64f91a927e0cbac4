// Time ranges as the URL holds them ("now-1h", "now", Unix seconds) and as
// users type them. Pure functions; tests: range.test.js.
import { fmtWhen } from './format.js';

// The preset ranges of the range picker: [label, from].
export const RANGES = [['15m', 'now-15m'], ['1h', 'now-1h'], ['6h', 'now-6h'], ['24h', 'now-24h'], ['7d', 'now-7d']];

// "now-1h", "now", Unix seconds or a date: to Unix seconds at now (NaN when
// unreadable), for the charts.
export function toUnix(s, now) {
    if (!s || s === 'now') return now;
    const m = /^now-(\d+(?:\.\d+)?)([smhdw]?)$/.exec(s);
    if (m) return now - parseFloat(m[1]) * ({ '': 1, s: 1, m: 60, h: 3600, d: 86400, w: 604800 }[m[2]]);
    const v = Number(s);
    if (Number.isFinite(v)) return v;
    const d = Date.parse(s);
    return Number.isFinite(d) ? d / 1000 : NaN;
}

// What a user types in a custom range box: kept as typed when the server
// reads it (now-3h, Unix seconds), else a date turned into Unix seconds;
// null when it is neither.
export function rangeValue(s) {
    s = s.trim();
    if (!s || /^now(-\d+(\.\d+)?[smhdw]?)?$/.test(s) || /^\d+(\.\d+)?$/.test(s)) return s;
    const d = Date.parse(s);
    return Number.isFinite(d) ? String(Math.round(d / 1000)) : null;
}

// "last 1h" for a preset, else both ends as moments.
export function rangeLabel(from, to, now = Date.now() / 1000) {
    const preset = RANGES.find(([, v]) => v === from);
    if (preset && (!to || to === 'now')) return 'last ' + preset[0];
    return `${fmtWhen(toUnix(from, now))} – ${fmtWhen(toUnix(to || 'now', now))}`;
}

// The timeline's step (seconds) for a range: about 240 points, whole
// minutes, at least one.
export function stepFor(from, to) {
    const span = Math.max(60, to - from);
    return Math.max(60, Math.ceil(span / 240 / 60) * 60);
}
