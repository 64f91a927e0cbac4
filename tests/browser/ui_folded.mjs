// No frame out of reach, in headless Chromium (tests/integration/
// browser_tests.py test_browser_folded starts the server, fills it and runs
// this):
//   node tests/browser/ui_folded.mjs URL OUTDIR APP WANT_JSON
// The server holds one profile of APP in which serve calls parse (large),
// tiny_handler and small_handler (tiny). The page's max_nodes is lowered
// to WANT.maxNodes on its way to the real server, which then folds the two
// handlers into an "other" frame under serve. A zoom into serve must fetch
// serve's stacks (focus=) and show tiny_handler with its exact time
// (WANT.tiny ns), reachable by a click, by a URL and by the search, every
// total kept. A search for a frame still folded asks the server for it
// (search=) and shows it with its exact time and share, highlighted.
// Exits 1 with what failed; screenshots in OUTDIR.
import { fmtPct } from '../../server/ui/format.js';
import { check, log, openPage, runChecks } from './harness.mjs';

const [url, out, app, wantJson] = process.argv.slice(2);
const want = JSON.parse(wantJson);

const ctx = await openPage({ out, viewport: { width: 1500, height: 1000 } });
const { page, shot, ready, hash } = ctx;
// Every profile request, with the page's cap lowered so this small profile is trimmed.
const calls = [];
await page.route('**/api/v1/profile?*', (r) => {
    const u = new URL(r.request().url());
    if (u.searchParams.get('max_nodes')) u.searchParams.set('max_nodes', String(want.maxNodes));
    calls.push(u.searchParams);
    return r.continue({ url: u.toString() });
});
// The tree shown: per node its path and total; the zoomed frame's path.
const state = () => page.evaluate(() => {
    const cx = window.__cx, t = cx.fg.tree, paths = [];
    for (let i = 0; i < t.n; i++) {
        const p = [];
        for (let j = i; j > 0; j = t.parent[j]) p.push(t.names[t.name[j]]);
        paths.push([p.reverse().join(';'), t.total[i]]);
    }
    const zp = [];
    for (let j = cx.zoom; j > 0; j = t.parent[j]) zp.push(t.names[t.name[j]]);
    return { nodes: Object.fromEntries(paths), zoom: zp.reverse().join(';'), grafts: cx.grafts || 0, search: cx.search,
        crumbs: document.querySelector('.crumbs').textContent };
});
// Clicks the frame at a path (as a user's click: mouse on the canvas).
const clickFrame = async (p) => {
    const at = await page.evaluate((p) => {
        const fg = window.__cx.fg, t = fg.tree;
        for (let i = 0; i < t.n; i++) {
            const q = [];
            for (let j = i; j > 0; j = t.parent[j]) q.push(t.names[t.name[j]]);
            if (q.reverse().join(';') !== p) continue;
            const b = fg.boxOf(i), r = fg.overlay.getBoundingClientRect();
            return { x: r.left + b.x + b.w / 2, y: r.top + b.y + b.h / 2, w: b.w };
        }
        return null;
    }, p);
    check(at, `no frame ${p} to click`);
    await page.mouse.click(at.x, at.y);
    return at;
};

await runChecks(ctx, 'folded-failure', async () => {
    const base = `${url}/#/app/${encodeURIComponent(app)}?from=now-1h`;
    await page.goto(base);
    await ready();
    let s = await state();
    // 1. Trimmed: the handlers folded into serve's "other", totals exact.
    check(s.nodes[''] === want.root, `root ${s.nodes['']}, want ${want.root}`);
    check(s.nodes['main;serve'] === want.serve, `serve ${s.nodes['main;serve']}, want ${want.serve}`);
    check(s.nodes['main;serve;other'] > 0 && s.nodes['main;serve;tiny_handler'] === undefined,
        `not trimmed as the test needs: ${JSON.stringify(s.nodes)}`);
    check(calls.length === 1 && !calls[0].get('focus'), `first load: ${calls.map(String)}`);
    // The range asked as Unix seconds, so a later subtree is of the same range.
    check(/^\d+\.\d{3}$/.test(calls[0].get('from')), `from sent as ${calls[0].get('from')}`);
    log(`trimmed to ${Object.keys(s.nodes).length} frames, serve's small callees folded`);
    await shot('folded-1-trimmed');

    // 2. A click on serve: its stacks fetched and put in place; tiny_handler shown, exact.
    await clickFrame('main;serve');
    await page.waitForFunction(() => (window.__cx.grafts || 0) >= 1, null, { timeout: 10000 });
    s = await state();
    const focus = calls.filter((c) => c.get('focus'));
    check(focus.length === 1 && focus[0].get('focus') === 'main;serve' && focus[0].get('from') === calls[0].get('from'),
        `focus requests: ${focus.map(String)}`);
    check(s.zoom === 'main;serve', `zoomed to ${s.zoom}`);
    check(s.nodes['main;serve;tiny_handler'] === want.tiny, `tiny_handler ${s.nodes['main;serve;tiny_handler']}, want ${want.tiny}`);
    check(s.nodes['main;serve;other'] === undefined, 'serve still has an "other" frame');
    check(s.nodes[''] === want.root && s.nodes['main;serve'] === want.serve, `totals changed: ${JSON.stringify(s.nodes)}`);
    log(`zoom into serve: focus=main;serve fetched, tiny_handler ${want.tiny / 1e6} ms, root still ${want.root / 1e9} s`);
    await shot('folded-2-serve');

    // 3. The tiny frame, a click away now.
    await clickFrame('main;serve;tiny_handler');
    await page.waitForFunction(() => { const t = window.__cx.fg.tree; return t.names[t.name[window.__cx.zoom]] === 'tiny_handler'; });
    s = await state();
    check((await hash()).includes('zoom=main;serve;tiny_handler'), `URL: ${await hash()}`);
    check(s.crumbs.includes('tiny_handler'), `path: ${s.crumbs}`);
    await shot('folded-3-tiny');
    log('tiny_handler zoomed into by a click');

    // 4. The search finds it with its exact share (the graph has it now).
    await page.fill('input.search', 'tiny_handler');
    await page.waitForFunction(() => /1 function match/.test(window.__cx.search || ''));
    s = await state();
    const pct = (100 * want.tiny / want.root).toFixed(2);
    check(s.search.includes('1 function match'), `search: ${s.search}`);
    log(`search: ${s.search} (want ${pct}%)`);

    // 5. A URL to it, opened afresh: the folded frame fetched and zoomed into.
    calls.length = 0;
    await page.goto('about:blank');
    await page.goto(`${base}&zoom=main;serve;tiny_handler`);
    await page.waitForFunction(() => { const c = window.__cx; return c.ready && c.fg && c.fg.tree && c.zoom > 0 &&
        c.fg.tree.names[c.fg.tree.name[c.zoom]] === 'tiny_handler'; }, null, { timeout: 10000 });
    s = await state();
    check(calls.some((c) => c.get('focus') === 'main;serve'), `URL load: ${calls.map(String)}`);
    check(s.zoom === 'main;serve;tiny_handler' && s.nodes['main;serve;tiny_handler'] === want.tiny, `URL load: zoom ${s.zoom}`);
    log('a URL to tiny_handler opens zoomed into it');
    await shot('folded-4-url');

    // 6. A search for a frame still folded (a fresh page, the search in its
    // URL): the server searched (search=), no zoom, no focus; the frame
    // merged into the tree with its exact time, highlighted, its share exact.
    calls.length = 0;
    await page.goto('about:blank');
    await page.goto(`${base}&q=small_handler`);
    await page.waitForFunction(() => (window.__cx.searchGrafts || 0) >= 1 && /1 function match/.test(window.__cx.search || ''),
        null, { timeout: 10000 });
    s = await state();
    const searched = calls.filter((c) => c.get('search'));
    check(searched.length === 1 && searched[0].get('search') === 'small_handler' && !calls.some((c) => c.get('focus')) &&
        searched[0].get('from') === calls[0].get('from'), `search requests: ${calls.map(String)}`);
    check(s.zoom === '', `zoomed to ${s.zoom}`);
    check(s.nodes['main;serve;small_handler'] === want.small, `small_handler ${s.nodes['main;serve;small_handler']}, want ${want.small}`);
    check(s.nodes['main;serve;other'] === want.tiny, `serve's other ${s.nodes['main;serve;other']}, want tiny_handler's ${want.tiny}`);
    check(s.nodes[''] === want.root && s.nodes['main;serve'] === want.serve, `totals changed: ${JSON.stringify(s.nodes)}`);
    check(s.search.includes(fmtPct(want.small / want.root)), `search: ${s.search}, want ${fmtPct(want.small / want.root)}`);
    const lit = await page.evaluate(() => {
        const fg = window.__cx.fg, t = fg.tree;
        return [...t.name].filter((nm, i) => i > 0 && fg.match && fg.match[nm]).map((nm) => t.names[nm]);
    });
    check(lit.length === 1 && lit[0] === 'small_handler', `highlighted: ${lit}`);
    await shot('folded-5-search');
    log(`search for the folded small_handler: ${s.search}, drawn with ${want.small / 1e6} ms, serve's other now ${want.tiny / 1e6} ms`);

    // 7. Typed: the other folded frame searched too; nothing of serve folded now.
    await page.fill('input.search', 'tiny_handler');
    await page.waitForFunction(() => (window.__cx.searchGrafts || 0) >= 2 && /1 function match/.test(window.__cx.search || ''),
        null, { timeout: 10000 });
    s = await state();
    check(s.nodes['main;serve;tiny_handler'] === want.tiny && s.nodes['main;serve;other'] === undefined,
        `after tiny_handler's search: ${JSON.stringify(s.nodes)}`);
    check(s.search.includes(fmtPct(want.tiny / want.root)), `search: ${s.search}`);
    log(`typed tiny_handler: ${s.search}`);
});
