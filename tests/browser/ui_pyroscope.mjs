// The web UI showing what a Pyroscope SDK sent to POST /ingest
// (tests/integration/pyroscope_tests.py starts the server, runs the SDK,
// then this):
//   node tests/browser/ui_pyroscope.mjs URL APP FROM TO OUT_PNG SHARE
// APP's Profiling tab: the flame graph is drawn, and the function table's
// top row is hot_a, its self share of hot_a + hot_b within 0.06 of SHARE
// (what the program measured). Prints the
// shares; exits 1 with what failed.
import { check, log, openPage, runChecks } from './harness.mjs';

const [url, app, from, to, png, wantArg] = process.argv.slice(2);
const want = Number(wantArg);

const ctx = await openPage({ viewport: { width: 1400, height: 900 } });
const { page } = ctx;
await runChecks(ctx, null, async () => {
    await page.goto(`${url}/#/app/${encodeURIComponent(app)}?from=${from}&to=${to}`);
    await page.waitForSelector('table.funcs tbody tr.row', { timeout: 30000 });
    // Rows: the function (the SDK names it FILE:FUNCTION:LINE), its self share.
    const rows = await page.$$eval('table.funcs tbody tr.row', (trs) => trs.map((tr) => [
        tr.querySelector('td.fn').textContent, parseFloat(tr.querySelectorAll('td.num')[0].textContent)]));
    const self = (fn) => rows.filter(([name]) => name.split(':').slice(-2)[0] === fn).reduce((s, [, v]) => s + v, 0);
    const a = self('hot_a'), b = self('hot_b');
    log(`UI: top row ${rows[0][0]}; hot_a ${a.toFixed(1)} %, hot_b ${b.toFixed(1)} % self`);
    check(rows[0][0].includes(':hot_a:'), `the function table's top row is ${rows[0][0]}, want hot_a`);
    const share = a / (a + b);
    check(Math.abs(share - want) < 0.06, `hot_a's share in the table ${share.toFixed(3)}, the program measured ${want}`);
    const ink = await page.evaluate(() => window.__cx && window.__cx.drawn);
    check(ink >= 3, `only ${ink} frames drawn`);
    await page.screenshot({ path: png });
});
