// A function over time: the CPU of the function the page has chosen (its
// sandwich, sw=NAME; else the search when it finds exactly one function,
// as a click on a row of the function table does) per step of the range,
// self and total in cores, from /api/v1/timeline?fn=NAME, drawn under the
// application's own timeline on the same time axis. Pure (tests:
// fn_timeline.test.js); the panel is fn_timeline_view.js.

// The chosen function's name, or '': sw when set, else the one function
// the search matches (match: the search's per-name marks, matchNames).
export function chosenFunction(sw, names, match) {
    if (sw) return sw;
    if (!match) return '';
    const one = match.indexOf(1);
    if (one < 0 || match.indexOf(1, one + 1) >= 0) return '';
    return String(names[one]);
}

// The server's answer as series of cores per step (the application's,
// and the function's self and total), each the same length, and the
// function's share of the application's CPU over the range.
export function seriesOf(tl) {
    const n = (tl.cpu_cores || []).length;
    const fit = (a) => Array.from({ length: n }, (_, i) => (a && a[i]) || 0);
    const app = fit(tl.cpu_cores), self = fit(tl.self_cores), total = fit(tl.total_cores);
    const sum = (a) => a.reduce((x, y) => x + y, 0);
    const appSum = sum(app);
    return {
        from: tl.from || 0, step: tl.step || 60, app, self, total,
        share: appSum > 0 ? sum(total) / appSum : 0, selfShare: appSum > 0 ? sum(self) / appSum : 0,
    };
}

// Where a series changes most as a step: the index i (0 < i < n) that
// splits it into the two parts whose means differ most, weighted as a
// change-point statistic (|mean after - mean before| x sqrt(a x b / n)),
// with both means; null for fewer than 2 points or a flat series.
export function stepChange(v) {
    const n = v.length;
    if (n < 2) return null;
    const total = v.reduce((a, b) => a + b, 0);
    let best = null, pre = 0;
    for (let i = 1; i < n; i++) {
        pre += v[i - 1];
        const before = pre / i, after = (total - pre) / (n - i);
        const score = Math.abs(after - before) * Math.sqrt((i * (n - i)) / n);
        if (score > 0 && (!best || score > best.score)) best = { at: i, before, after, score };
    }
    return best;
}
