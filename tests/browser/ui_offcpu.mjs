// The Profiling tab's type selector (CPU / Off-CPU / Wall) in headless
// Chromium (tests/integration/browser_tests.py test_browser_offcpu fills
// the server with offcpu_server_tests.py's profiles and runs this):
//   node tests/browser/ui_offcpu.mjs URL OUTDIR FROM TO MID WANT
// offsvc holds two profiles with off-CPU time (at FROM+... and MID), cpuonly
// one without; WANT is the known answer, JSON: {cpu, off, lock} in ns over
// FROM..TO. Checks each type's tree, table, search, timeline and diff, the
// type held in the URL, and the messages for a range without off-CPU data.
// Exits 1 with what failed; screenshots in OUTDIR.
import { check, log, openPage, runChecks } from './harness.mjs';

const [url, out, from, to, mid, wantJson] = process.argv.slice(2);
const want = JSON.parse(wantJson);

const ctx = await openPage({ out, viewport: { width: 1400, height: 1000 } });
const { page, shot, hash } = ctx;
const calls = []; // the API calls the page made
page.on('request', (r) => { if (r.url().includes('/api/v1/')) calls.push(decodeURIComponent(r.url())); });
const ready = (type, mode = 'profile') => ctx.ready({ type, mode });
const state = () => page.evaluate(() => {
    const cx = window.__cx, t = cx.fg.tree;
    const names = t ? [...new Set(Array.from(t.name, (k) => String(t.names[k])))] : [];
    return {
        root: t && t.n ? t.total[0] : 0, names, search: cx.search, noOff: cx.noOffCpu,
        rows: [...document.querySelectorAll('table.funcs tr.row td.fn')].map((td) => td.textContent),
        pressed: [...document.querySelectorAll('[aria-label="profile type"] button')]
            .filter((b) => b.getAttribute('aria-pressed') === 'true').map((b) => b.dataset.type),
        empty: (document.querySelector('.fg-box .empty') || {}).textContent || '',
        notes: document.querySelector('.notes').textContent,
        chart: document.querySelector('canvas.timeline').getAttribute('aria-label'),
    };
});
const lastCall = (what) => calls.filter((c) => c.includes(what)).slice(-1)[0] || '';

await runChecks(ctx, 'offcpu-failure', async () => {
    const base = `${url}/#/app/offsvc?from=${from}&to=${to}`;
    // 1. CPU, the default: no off-CPU frame, the CPU total.
    await page.goto(base);
    await ready('cpu');
    let s = await state();
    check(s.root === want.cpu, `cpu root ${s.root}, want ${want.cpu}`);
    check(!s.names.some((n) => n.startsWith('[off-CPU')), `off-CPU frames in the CPU view: ${s.names}`);
    check(s.pressed.join() === 'cpu', `pressed: ${s.pressed}`);
    check(!lastCall('/api/v1/profile').includes('type='), `the CPU view asks for a type: ${lastCall('/api/v1/profile')}`);
    log(`CPU: ${(s.root / 1e9).toFixed(2)} s, no off-CPU frame`);

    // 2. Off-CPU from the selector: in the URL, the tree, the table, the timeline, the search.
    await page.click('[aria-label="profile type"] button[data-type="off_cpu"]');
    await ready('off_cpu');
    check((await hash()).includes('type=off_cpu'), `type not in the URL: ${await hash()}`);
    s = await state();
    check(s.root === want.off, `off-CPU root ${s.root}, want ${want.off}`);
    check(s.rows.includes('[off-CPU: lock]') && !s.rows.includes('work'), `table: ${s.rows}`);
    check(s.chart.startsWith('off-CPU time over time'), `chart: ${s.chart}`);
    await page.waitForFunction(() => true);
    check(lastCall('/api/v1/timeline').includes('type=off_cpu'), `timeline: ${lastCall('/api/v1/timeline')}`);
    await page.fill('input[aria-label="search functions"]', '[off-CPU: lock]');
    await page.waitForFunction(() => (window.__cx.search || '').includes('of the time'));
    s = await state();
    const pct = (100 * want.lock / want.off).toFixed(1) + ' %'; // as format.js writes it
    check(s.search.includes(pct), `search: "${s.search}", want ${pct}`);
    await shot('offcpu-lock');
    log(`Off-CPU: ${(s.root / 1e9).toFixed(0)} s; search: ${s.search}`);
    // The download links carry the type.
    const dl = await page.evaluate(() => [...document.querySelectorAll('a.button[download]')].map((a) => a.href));
    check(dl.length === 2 && dl.every((h) => h.includes('type=off_cpu')), `downloads: ${dl}`);

    // 3. Wall: CPU and off-CPU on one tree; back returns to off-CPU.
    await page.click('[aria-label="profile type"] button[data-type="wall"]');
    await ready('wall');
    s = await state();
    check(s.root === want.cpu + want.off, `wall root ${s.root}, want ${want.cpu + want.off}`);
    check(s.names.includes('work') && s.names.includes('[off-CPU: lock]'), `wall names: ${s.names}`);
    check(!s.noOff, 'wall says there is no off-CPU data');
    await shot('offcpu-wall');
    await page.goBack();
    await ready('off_cpu');
    s = await state();
    check(s.root === want.off && s.pressed.join() === 'off_cpu', `back: root ${s.root}, pressed ${s.pressed}`);
    log(`Wall: ${(want.cpu + want.off) / 1e9} s; back to Off-CPU`);

    // 4. A diff of off-CPU time: both ranges asked of that type.
    calls.length = 0;
    await page.goto(`${url}/#/app/offsvc?from=${mid}&to=${to}&type=off_cpu&diff=1&bfrom=${from}&bto=${mid}`);
    await ready('off_cpu', 'diff');
    const profCalls = calls.filter((c) => c.includes('/api/v1/profile?'));
    check(profCalls.length === 2 && profCalls.every((c) => c.includes('type=off_cpu')), `diff calls: ${profCalls}`);
    s = await state();
    check(s.root === want.off / 2, `diff selection root ${s.root}, want ${want.off / 2}`);
    await shot('offcpu-diff');
    log('diff of off-CPU time: both ranges off-CPU');

    // 5. An application without off-CPU data: said so, in Off-CPU and in Wall.
    await page.goto(`${url}/#/app/cpuonly?from=${from}&to=${to}&type=off_cpu`);
    await ready('off_cpu');
    s = await state();
    check(s.noOff && s.empty.includes('No off-CPU data of cpuonly') && s.empty.includes('--no-off-cpu'),
        `no off-CPU message: "${s.empty}"`);
    await shot('offcpu-none');
    await page.click('[aria-label="profile type"] button[data-type="wall"]');
    await ready('wall');
    await page.waitForFunction(() => window.__cx.noOffCpu === true, null, { timeout: 20000 });
    s = await state();
    check(s.notes.includes('No off-CPU data in this range') && s.root > 0, `wall note: "${s.notes}"`);
    log('no off-CPU data: said in Off-CPU and in Wall');

    // 6. The applications page: the off-CPU column.
    await page.goto(`${url}/#/?from=${from}&to=${to}`);
    // A hash change, not a load: __cx.ready may still be the last page's,
    // so wait for the applications table itself.
    await page.waitForSelector('table.apps th', { timeout: 20000 });
    const cols = await page.evaluate(() => [...document.querySelectorAll('table.apps th')].map((x) => x.textContent));
    check(cols.includes('Off-CPU (threads)'), `applications columns: ${cols}`);
});
