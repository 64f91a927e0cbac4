// A function over time in headless Chromium (tests/integration/
// browser_tests.py test_browser_fn_timeline starts the server, fills it and
// runs this):
//   node tests/browser/ui_fn_timeline.mjs URL OUTDIR APP FROM TO WANT_JSON
// The server holds one-minute profiles of APP over FROM..TO in which parse
// costs WANT.before ms a minute (total, interpreter frames hidden) until
// the minute WANT.deploy and WANT.after ms from then on; serve's self is
// WANT.serveSelf ms every minute. Exits 1 with what failed; screenshots in
// OUTDIR.
import { check, log, openPage, runChecks } from './harness.mjs';

const [url, out, app, from, to, wantJson] = process.argv.slice(2);
const want = JSON.parse(wantJson);
const near = (a, b) => Math.abs(a - b) <= 1e-9 + Math.abs(b) * 1e-6;

const ctx = await openPage({ out, viewport: { width: 1500, height: 1000 } });
const { page, shot, ready, hash } = ctx;
// The function timeline the page shows, once loaded (null when none).
const shown = async (name) => {
    await page.waitForFunction((n) => {
        const f = window.__cx.fnTimeline;
        return n === null ? !f : f && f.name === n && !f.loading;
    }, name, { timeout: 20000 });
    return page.evaluate(() => {
        const f = window.__cx.fnTimeline, box = document.querySelector('.fn-tl');
        if (!f) return { hidden: box.hidden };
        const c = box.querySelector('canvas');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let ink = 0;
        for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 0) ink++;
        return { hidden: box.hidden, name: f.name, error: f.error, s: f.series, change: f.change, ink,
            text: box.textContent };
    });
};

await runChecks(ctx, 'fn-timeline-failure', async () => {
    const base = `${url}/#/app/${encodeURIComponent(app)}?from=${from}&to=${to}`;
    await page.goto(base);
    await ready();
    let f = await shown(null);
    check(f.hidden, 'a function timeline with no function chosen');

    // 1. parse from its row in the function table: the search finds it alone.
    await page.click('table.funcs tr.row:has(td.fn:text-is("parse"))');
    f = await shown('parse');
    check((await hash()).includes('q=/^parse$/'), `the row's search not in the URL: ${await hash()}`);
    check(!f.hidden && !f.error, `panel hidden or failed: ${f.error}`);
    const n = f.s.total.length, step = f.s.step;
    check(n === (to - from) / step, `${n} steps of ${step} s for ${to - from} s`);
    // The profile of minute m starts at from + 60 m + 1: step m by the minute.
    for (let i = 0; i < n; i++) {
        const m = Math.floor((i * step) / 60), w = (m >= want.deploy ? want.after : want.before) * 1e6 / (60 * 1e9);
        check(near(f.s.total[i], w), `parse total at step ${i}: ${f.s.total[i]} cores, want ${w}`);
    }
    check(f.change && f.change.at === want.deploy * 60 / step,
        `the step found at ${f.change && f.change.at}, the deploy at ${want.deploy * 60 / step}`);
    check(near(f.change.before, want.before / 60e3) && near(f.change.after, want.after / 60e3),
        `the step ${JSON.stringify(f.change)}`);
    check(f.ink > 1000, `the chart has ${f.ink} pixels of ink`);
    check(f.s.share > 0 && f.s.share < 1 && f.text.includes('largest change'), `panel text: ${f.text}`);
    await shot('fn-timeline-parse');
    log(`parse over time: ${n} steps, ${(f.change.before * 1000).toFixed(3)} -> ${(f.change.after * 1000).toFixed(3)} ` +
        `millicores at step ${f.change.at} (the deploy), ${(f.s.share * 100).toFixed(1)} % of the application's CPU`);

    // 2. serve's sandwich: its timeline replaces parse's; self flat, total with the step.
    await page.click('table.funcs tr.row:has(td.fn:text-is("serve")) button.sw-open');
    f = await shown('serve');
    check((await hash()).includes('sw=serve'), `sandwich not in the URL: ${await hash()}`);
    check(f.s.self.every((v) => near(v, want.serveSelf / 60e3)), `serve self: ${f.s.self.slice(0, 5)}...`);
    check(f.change && f.change.at === want.deploy * 60 / step, `serve's step at ${f.change && f.change.at}`);
    await shot('fn-timeline-serve');

    // 3. The URL alone brings it back (a link shows a colleague the same).
    await page.goto('about:blank');
    await page.goto(`${base}&sw=parse`);
    f = await shown('parse');
    check(f.change && f.change.at === want.deploy * 60 / step, 'parse from a link');
    // 4. Closing the sandwich (no search): no function, no timeline.
    await page.click('.sandwich button.reset:text-is("Close")');
    f = await shown(null);
    check(f.hidden, 'the timeline stayed after the sandwich closed');
    log('from the table, the sandwich and a link; gone when none is chosen');
});
