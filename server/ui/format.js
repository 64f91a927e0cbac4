// How times, shares and core counts read on the page. Pure functions;
// tests: format.test.js.

// Nanoseconds of CPU: "950.0 ms", "2.50 s", "1.5 min", "2.00 h".
export function fmtTime(ns) {
    const s = ns / 1e9;
    if (s >= 3600) return (s / 3600).toFixed(2) + ' h';
    if (s >= 60) return (s / 60).toFixed(1) + ' min';
    if (s >= 1) return s.toFixed(2) + ' s';
    return (s * 1000).toFixed(1) + ' ms';
}

// A share (0.123) as a percentage with three significant digits or so.
export function fmtPct(x) {
    const p = x * 100;
    return (Math.abs(p) >= 10 ? p.toFixed(1) : Math.abs(p) >= 0.1 ? p.toFixed(2) : p.toFixed(3)) + ' %';
}

// CPU cores used: more digits for small values, "0" for none.
export function cores(x) { return x >= 10 ? x.toFixed(1) : x >= 0.01 ? x.toFixed(2) : x > 0 ? x.toFixed(3) : '0'; }

// A moment (Unix seconds) in the browser's locale and time zone.
export function fmtWhen(unix) {
    return new Date(unix * 1000).toLocaleString(undefined,
        { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit' });
}

// How long ago a moment (Unix seconds) was, at now (Unix seconds).
export function ago(unix, now = Date.now() / 1000) {
    const s = now - unix;
    if (s < 90) return `${Math.max(0, Math.round(s))} s ago`;
    if (s < 5400) return `${Math.round(s / 60)} min ago`;
    if (s < 172800) return `${Math.round(s / 3600)} h ago`;
    return `${Math.round(s / 86400)} d ago`;
}
