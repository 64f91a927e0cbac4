// The sandwich view and the CPU breakdown in headless Chromium against a
// server the real agent filled (tests/integration/browser_tests.py
// test_browser_sandwich starts both and runs this):
//   node tests/browser/ui_sandwich.mjs URL OUTDIR APP T0 T1 PID1 PID2 TM
// Two cpu_split processes (PID1, PID2) ran at once in T0..T1: main -> run
// -> dispatch -> hot_a / hot_b / hot_c (3:2:1); profiles start both before
// TM and from it on (the diff's two sides). Exits 1 with what failed;
// screenshots in OUTDIR.
import { check, log, openPage, runChecks } from './harness.mjs';

const [url, out, app, t0, t1, pid1, pid2, tm] = process.argv.slice(2);

const ctx = await openPage({ out, viewport: { width: 1500, height: 1000 } });
const { page, shot, ready, hash } = ctx;
// The sandwich the page shows: its trees' first levels, and the page's own
// per-function stats of the same function (what the table shows).
const sandwichState = () => page.evaluate(async () => {
    const cx = window.__cx, s = cx.sandwich;
    if (!s) return null;
    const { functionStats } = await import('/ui/flamegraph.js');
    const kids = (t) => {
        const out = [];
        for (let c = 1; c < t.end[0]; c = t.end[c]) out.push({ name: String(t.names[t.name[c]]), total: t.total[c] });
        return out;
    };
    const t = cx.fg.tree, k = t.names.indexOf(s.name), st = functionStats(t);
    const ink = [...document.querySelectorAll('.sandwich canvas:not(.fg-overlay)')].map((c) => {
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let i = 0; i < d.length; i += 4) if (d[i] < 250 || d[i + 1] < 250 || d[i + 2] < 250) n++;
        return n;
    });
    return {
        name: s.name, calls: s.calls, total: s.total, self: s.self, ms: s.ms,
        upRoot: String(s.callers.names[s.callers.name[0]]), upTotal: s.callers.total[0], up: kids(s.callers),
        downRoot: String(s.callees.names[s.callees.name[0]]), downTotal: s.callees.total[0], down: kids(s.callees),
        statTotal: st.total[k], statSelf: st.self[k], shown: !document.querySelector('.sandwich').hidden, ink,
    };
});

await runChecks(ctx, 'failure', async () => {
    const base = `${url}/#/app/${encodeURIComponent(app)}?from=${t0}&to=${t1}`;
    await page.goto(base);
    await ready({ mode: 'profile' });

    // 1. The sandwich of dispatch, opened from its row in the function table.
    await page.waitForSelector('table.funcs tr.row:has(td.fn:text-is("dispatch")) button.sw-open');
    await page.click('table.funcs tr.row:has(td.fn:text-is("dispatch")) button.sw-open');
    await page.waitForFunction(() => window.__cx.sandwich && window.__cx.sandwich.name === 'dispatch');
    check((await hash()).includes('sw=dispatch'), `sandwich not in the URL: ${await hash()}`);
    check(!(await hash()).includes('q='), `the sandwich button also ran the row's search: ${await hash()}`);
    let s = await sandwichState();
    check(s.shown, 'the sandwich panel is hidden');
    check(s.upRoot === 'dispatch' && s.downRoot === 'dispatch', `roots: ${s.upRoot}, ${s.downRoot}`);
    // Its only caller is run; its callees hot_a, hot_b, hot_c, widest first (3:2:1).
    check(s.up.length === 1 && s.up[0].name === 'run', `callers of dispatch: ${JSON.stringify(s.up)}`);
    const down = s.down.map((x) => x.name);
    check(down[0] === 'hot_a' && down[1] === 'hot_b' && down[2] === 'hot_c', `callees of dispatch: ${down}`);
    // Totals are the flame graph's: the table's total, in both trees.
    check(s.total > 0 && s.total === s.statTotal && s.upTotal === s.statTotal && s.downTotal === s.statTotal,
        `totals: sandwich ${s.total}, callers ${s.upTotal}, callees ${s.downTotal}, table ${s.statTotal}`);
    check(s.self === s.statSelf, `self: sandwich ${s.self}, table ${s.statSelf}`);
    check(s.ink.length === 2 && s.ink.every((n) => n > 500), `sandwich canvases: ${s.ink} pixels of ink`);
    await shot('sandwich-dispatch');
    log(`sandwich of dispatch: ${s.calls} call site(s), callers ${s.up.map((x) => x.name)}, callees ${down}, ` +
        `total ${(s.total / 1e9).toFixed(2)} s = the table's, computed in ${s.ms.toFixed(2)} ms`);

    // 1b. Its timeline under the application's (GET /api/v1/timeline?fn=dispatch):
    // over the range the same CPU as the graph's, self none (it only calls), on
    // the application's steps.
    await page.waitForFunction(() => {
        const f = window.__cx.fnTimeline;
        return f && f.name === 'dispatch' && !f.loading;
    }, null, { timeout: 20000 });
    const ft = await page.evaluate(() => {
        const f = window.__cx.fnTimeline;
        return { error: f.error, s: f.series, hidden: document.querySelector('.fn-tl').hidden };
    });
    check(!ft.error && !ft.hidden, `dispatch's timeline: ${ft.error}`);
    const ftTotal = ft.s.total.reduce((a, b) => a + b, 0) * ft.s.step * 1e9;
    const ftSelf = ft.s.self.reduce((a, b) => a + b, 0) * ft.s.step * 1e9;
    check(Math.abs(ftTotal - s.total) <= 1e-6 * s.total + 1,
        `dispatch over time: ${ftTotal} ns in all, the graph's total ${s.total}`);
    check(Math.abs(ftSelf - s.self) <= 1e-6 * s.total + 1, `dispatch's self over time ${ftSelf}, the graph's ${s.self}`);
    check(ft.s.share > 0.5 && ft.s.share <= 1 + 1e-9, `dispatch's share of the application: ${ft.s.share}`);
    log(`dispatch over time: ${ft.s.total.length} steps, ${(ftTotal / 1e9).toFixed(2)} s in all = the graph's, ` +
        `${(ft.s.share * 100).toFixed(1)} % of the application's CPU`);

    // 2. The sandwich of hot_a from the search box (one function found); back closes it again.
    await page.fill('input[aria-label="search functions"]', 'hot_a');
    await page.waitForSelector('.search-info button.sw-open');
    await page.click('.search-info button.sw-open');
    await page.waitForFunction(() => window.__cx.sandwich && window.__cx.sandwich.name === 'hot_a');
    s = await sandwichState();
    check(s.up.length === 1 && s.up[0].name === 'dispatch', `callers of hot_a: ${JSON.stringify(s.up)}`);
    check(s.total === s.statTotal, `hot_a total ${s.total}, table ${s.statTotal}`);
    await page.goBack();
    await page.waitForFunction(() => window.__cx.sandwich && window.__cx.sandwich.name === 'dispatch');
    await page.goto(base);
    await ready({ mode: 'profile' });
    check(await page.evaluate(() => document.querySelector('.sandwich').hidden && !window.__cx.sandwich),
        'the sandwich stays open without sw=');
    log('sandwich from the search, back to the previous one, closed without sw=: ok');

    // 3. The sandwich in a diff and with the interpreter frames shown: the same function's.
    await page.goto(`${url}/#/app/${encodeURIComponent(app)}?from=${tm}&to=${t1}&diff=1&bfrom=${t0}&bto=${tm}&sw=dispatch`);
    await ready({ mode: 'diff' });
    await page.waitForFunction(() => window.__cx.sandwich && window.__cx.sandwich.name === 'dispatch');
    s = await sandwichState();
    check(s.calls >= 1 && s.total === s.statTotal, `sandwich in a diff: ${JSON.stringify(s)}`);
    await page.goto(`${base}&interp=shown&sw=dispatch`);
    await ready({ mode: 'profile' });
    await page.waitForFunction(() => window.__cx.sandwich && window.__cx.sandwich.name === 'dispatch');
    s = await sandwichState();
    check(s.calls >= 1 && s.down[0].name === 'hot_a', `sandwich with interp=shown: ${JSON.stringify(s.down)}`);
    log('sandwich in a diff and with interpreter frames shown: ok');

    // 4. The CPU by pid: the two processes, each with its share; a click filters the page to one.
    await page.goto(base);
    await ready({ mode: 'profile' });
    await page.selectOption('select[aria-label="break down by"]', 'pid');
    await ready({ mode: 'profile' });
    await page.waitForFunction(() => window.__cx.breakdown && (window.__cx.breakdown.rows || window.__cx.breakdown.error),
        null, { timeout: 20000 });
    const bd = await page.evaluate(() => window.__cx.breakdown);
    check(!bd.error, `breakdown: ${bd.error}`);
    const byPid = Object.fromEntries(bd.rows.map((r) => [r.label, r.share]));
    check(byPid[pid1] > 0.1 && byPid[pid2] > 0.1, `breakdown by pid: ${JSON.stringify(byPid)}, want ${pid1} and ${pid2}`);
    check(Math.abs(byPid[pid1] + byPid[pid2] - 1) < 0.01, `the two pids' shares add to ${byPid[pid1] + byPid[pid2]}`);
    const rows = await page.$$eval('table.bd tbody tr', (rs) => rs.map((r) => r.textContent));
    check(rows.some((r) => r.startsWith(pid1)) && rows.some((r) => r.startsWith(pid2)), `breakdown table: ${rows}`);
    // Each value's sparkline has ink; no stray text after the table.
    await page.waitForFunction(() => [...document.querySelectorAll('canvas.spark')].every((c) => c.width > 0));
    const sparks = await page.evaluate(() => [...document.querySelectorAll('canvas.spark')].map((c) => {
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
        return n;
    }));
    check(sparks.length >= 2 && sparks.every((n) => n > 20), `sparklines' ink: ${sparks}`);
    const after = await page.evaluate(() => document.querySelector('.bd-body').textContent);
    check(!after.includes('null'), `the breakdown shows: ${after}`);
    await shot('breakdown-pid');
    log(`breakdown by pid: ${bd.rows.map((r) => `${r.label} ${(r.share * 100).toFixed(1)} %`).join(', ')}`);
    await page.click(`table.bd tbody tr:has(td.bd-value:text-is("${pid1}"))`);
    await ready({ mode: 'profile' });
    await page.waitForFunction((p) => new URLSearchParams(location.hash.split('?')[1]).get('pid') === p, pid1);
    check(await page.inputValue('input[aria-label="pid"]') === pid1, 'the pid box does not show the picked pid');
    check(!(await hash()).includes('by='), `the breakdown stays after a pick: ${await hash()}`);
    log(`a click on ${pid1}: the page filtered to pid ${pid1}`);
});
