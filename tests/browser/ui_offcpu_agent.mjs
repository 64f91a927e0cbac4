// The Off-CPU selector on the real agent's data (tests/integration/
// browser_tests.py test_browser_offcpu_agent: the daemon with --off-cpu
// shipped offcpu_mix to the server, whose API gave WANT):
//   node tests/browser/ui_offcpu_agent.mjs URL OUTDIR APP FROM TO WANT
// WANT, JSON: {off: the off-CPU root in ns, classes: {"[off-CPU: sleep]": ns,
// ...}}. Checks the Off-CPU view's root, that each class is in the table and
// that the search gives its share as the API does. Exits 1 with what
// failed; a screenshot in OUTDIR.
import { check, log, openPage, runChecks } from './harness.mjs';

const [url, out, app, from, to, wantJson] = process.argv.slice(2);
const want = JSON.parse(wantJson);

const ctx = await openPage({ out, viewport: { width: 1400, height: 1000 } });
const { page, shot } = ctx;
const ready = (type) => ctx.ready({ type, mode: 'profile' });
const state = () => page.evaluate(() => {
    const t = window.__cx.fg.tree;
    return {
        root: t && t.n ? t.total[0] : 0, search: window.__cx.search,
        rows: [...document.querySelectorAll('table.funcs tr.row td.fn')].map((td) => td.textContent),
    };
});

await runChecks(ctx, 'offcpu-agent-failure', async () => {
    await page.goto(`${url}/#/app/${encodeURIComponent(app)}?from=${from}&to=${to}`);
    await ready('cpu');
    await page.click('[aria-label="profile type"] button[data-type="off_cpu"]');
    await ready('off_cpu');
    let s = await state();
    check(s.root === want.off, `off-CPU root ${s.root}, want ${want.off}`);
    for (const [cls, ns] of Object.entries(want.classes)) {
        check(s.rows.includes(cls), `${cls} not in the table: ${s.rows.slice(0, 20)}`);
        await page.fill('input[aria-label="search functions"]', cls);
        await page.waitForFunction((c) => (window.__cx.search || '').includes('of the time') &&
            document.querySelector('input[aria-label="search functions"]').value === c, cls);
        s = await state();
        const p = 100 * ns / want.off; // as format.js's percent writes it
        const pct = (p >= 10 ? p.toFixed(1) : p >= 0.1 ? p.toFixed(2) : p.toFixed(3)) + ' %';
        check(s.search.includes(pct), `search ${cls}: "${s.search}", want ${pct}`);
        log(`${cls}: ${s.search}`);
    }
    await shot('offcpu-agent');
});
