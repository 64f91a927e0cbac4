// A deep recursion in headless Chromium (tests/integration/browser_tests.py
// ingests the profile and runs this):
//   node tests/browser/ui_deep.mjs URL OUTDIR APP WANT FLATAPP
// APP's profile is main -> compile -> gc_mark x 512 -> mark_leaf, and more
// (DEEP_STACKS there); WANT is the known answer, JSON: the root's, gc_mark's
// (total, self) and mark_leaf's times in ns, and the deepest stack's depth.
// Checks that the page stays about a window tall with the graph scrolling
// in its own viewport (the zoom path and the table in view), and that
// "collapse recursion" shows gc_mark once, every time kept, held in the URL;
// FLATAPP's profile has no recursion: there the button is disabled.
// Exits 1 with what failed; screenshots in OUTDIR.
import { check, log, openPage, runChecks } from './harness.mjs';

const [url, out, app, wantJson, flatApp] = process.argv.slice(2);
const want = JSON.parse(wantJson);
const near = (a, b) => Math.abs(a - b) <= Math.max(1, Math.abs(b) * 1e-9);

const ctx = await openPage({ out, viewport: { width: 1400, height: 900 } });
const { page, shot, ready, hash } = ctx;

// The page's geometry, and what the drawn tree says of gc_mark and mark_leaf.
const state = () => page.evaluate(() => {
    const cx = window.__cx, fg = cx.fg, t = fg.tree, box = document.querySelector('.fg-scroll');
    const rect = (sel) => { const r = document.querySelector(sel).getBoundingClientRect(); return { top: r.top, bottom: r.bottom }; };
    const of = (nm) => {
        let n = 0, outer = -1, self = 0;
        for (let i = 0; i < t.n; i++) {
            if (t.names[t.name[i]] !== nm) continue;
            n++;
            self += t.self[i];
            if (outer < 0 || t.depth[i] < t.depth[outer]) outer = i;
        }
        return { n, total: outer < 0 ? 0 : t.total[outer], self, depth: outer < 0 ? -1 : t.depth[outer] };
    };
    return {
        pageH: document.documentElement.scrollHeight, winH: window.innerHeight, scrollY: window.scrollY,
        canvasH: fg.cssH, boxH: box.clientHeight, boxScrollH: box.scrollHeight, boxTop: box.scrollTop,
        crumbs: rect('.crumbs'), table: rect('table.funcs'), graph: rect('.fg'),
        maxDepth: t.maxDepth, root: t.total[0], gc: of('gc_mark'), leaf: of('mark_leaf'),
        collapse: cx.collapse, zoom: cx.zoom, zoomName: t.names[t.name[cx.zoom]], pressed: document.querySelector('button.collapse').getAttribute('aria-pressed'),
    };
});
const inView = (r, winH) => r.top >= 0 && r.bottom <= winH;

await runChecks(ctx, 'deep-failure', async () => {
    // 1. The deep graph: about a window tall, scrolling in its own viewport.
    await page.goto(`${url}/#/app/${encodeURIComponent(app)}?from=now-15m`);
    await ready();
    let s = await state();
    check(s.maxDepth === want.depth, `the tree is ${s.maxDepth} deep, want ${want.depth}`);
    check(near(s.root, want.root), `root ${s.root} ns, want ${want.root}`);
    check(s.gc.n === 512 && near(s.gc.total, want.gc_mark), `gc_mark: ${JSON.stringify(s.gc)}, want 512 frames, ${want.gc_mark} ns`);
    check(s.canvasH > 512 * 18, `the graph is ${s.canvasH} px tall, want all ${want.depth} rows`);
    check(s.pageH <= s.winH * 1.5, `the page is ${s.pageH} px tall in a ${s.winH} px window (graph ${s.canvasH} px)`);
    check(s.boxH < s.boxScrollH && s.boxScrollH >= s.canvasH, `the graph's viewport ${s.boxH} of ${s.boxScrollH} px does not scroll`);
    check(inView(s.crumbs, s.winH) && s.table.top < s.winH && s.graph.bottom <= s.winH + 2,
        `path ${JSON.stringify(s.crumbs)}, table ${JSON.stringify(s.table)}, graph ${JSON.stringify(s.graph)} not in a ${s.winH} px window`);
    log(`deep: ${s.maxDepth} frames deep, graph ${s.canvasH} px in a ${s.boxH} px viewport, page ${s.pageH} px (window ${s.winH})`);
    await shot('deep-1-top');

    // 2. Scrolled inside, to the bottom: the page does not move; the
    // deepest frame is under the pointer where it is drawn.
    await page.evaluate(() => { const b = document.querySelector('.fg-scroll'); b.scrollTop = b.scrollHeight; });
    const leaf = await page.evaluate(() => {
        const fg = window.__cx.fg, t = fg.tree;
        let i = 0;
        while (i < t.n && t.names[t.name[i]] !== 'mark_leaf') i++;
        const b = fg.boxOf(i), r = fg.overlay.getBoundingClientRect();
        return { x: r.left + b.x + Math.min(b.w / 2, 200), y: r.top + b.y + b.h / 2 };
    });
    check(leaf.y > 0 && leaf.y < (await state()).winH, `mark_leaf at y ${leaf.y} after scrolling to it`);
    await page.mouse.move(leaf.x, leaf.y);
    await page.waitForSelector('.fg-tip:not([hidden])', { timeout: 5000 });
    const tip = await page.textContent('.fg-tip');
    check(tip.includes('mark_leaf'), `tooltip at the bottom: ${tip}`);
    s = await state();
    check(s.scrollY === 0 && s.boxTop > 0, `page scrolled to ${s.scrollY}, viewport to ${s.boxTop}`);
    // A click there zooms: the path (all 514 steps) stays in view above the graph.
    await page.mouse.click(leaf.x, leaf.y);
    await page.waitForFunction(() => window.__cx.zoom > 0);
    s = await state();
    check(/zoom=main;compile;gc_mark;.*;mark_leaf$/.test(await hash()), `zoom not in the URL: ${(await hash()).slice(0, 200)}`);
    check(inView(s.crumbs, s.winH) && s.pageH <= s.winH * 1.5, `zoomed: path ${JSON.stringify(s.crumbs)}, page ${s.pageH} px`);
    log(`scrolled to the bottom: tooltip "${tip.slice(0, 40)}…", zoomed into mark_leaf, the path in view, page ${s.pageH} px`);
    await shot('deep-2-zoomed');

    // 3. Collapse recursion: gc_mark once, its total and self the sum of its
    // frames', mark_leaf's time kept; the URL holds it; zoom path resolves.
    await page.click('button.collapse');
    await page.waitForFunction(() => window.__cx.collapse === true);
    check((await hash()).includes('collapse=1'), `collapse not in the URL: ${(await hash()).slice(-80)}`);
    s = await state();
    check(s.gc.n === 1 && s.gc.depth === 3, `collapsed: gc_mark ${JSON.stringify(s.gc)}, want once at depth 3`);
    check(near(s.gc.total, want.gc_mark) && near(s.gc.self, want.gc_mark_self),
        `collapsed gc_mark ${s.gc.total} ns (self ${s.gc.self}), want ${want.gc_mark} (${want.gc_mark_self})`);
    check(s.leaf.n === 1 && s.leaf.depth === 4 && near(s.leaf.total, want.mark_leaf), `collapsed mark_leaf: ${JSON.stringify(s.leaf)}`);
    check(near(s.root, want.root) && s.maxDepth === 4, `collapsed: root ${s.root}, depth ${s.maxDepth}`);
    check(s.pressed === 'true' && s.zoomName === 'mark_leaf', `button pressed ${s.pressed}, zoomed into ${s.zoomName}, want mark_leaf`);
    check(s.boxH === s.boxScrollH, `collapsed graph still scrolls: ${s.boxH} of ${s.boxScrollH}`);
    const table = await page.textContent('table.funcs');
    check(table.includes('gc_mark') && table.includes('mark_leaf'), 'the table lost functions');
    log(`collapsed: gc_mark once, ${(s.gc.total / 1e9).toFixed(2)} s total, ${(s.gc.self / 1e9).toFixed(2)} s self; depth ${s.maxDepth}`);
    await shot('deep-3-collapsed');

    // 4. From the URL alone; and back to the full graph with the browser's back.
    await page.evaluate(() => { window.__cx.ready = false; });
    await page.goto(`${url}/#/app/${encodeURIComponent(app)}?from=now-15m&collapse=1`);
    await page.reload();
    await ready();
    s = await state();
    check(s.collapse === true && s.gc.n === 1 && s.maxDepth === 4, `collapse=1 in the URL: ${JSON.stringify(s.gc)}, depth ${s.maxDepth}`);
    await page.click('button.collapse');
    await page.waitForFunction(() => window.__cx.collapse === false);
    s = await state();
    check(s.gc.n === 512 && !(await hash()).includes('collapse'), `uncollapsed: gc_mark ${s.gc.n} frames, ${await hash()}`);
    await page.goBack();
    await page.waitForFunction(() => window.__cx.collapse === true);
    check((await state()).gc.n === 1, 'back did not collapse again');
    log('collapse from the URL, toggled off and back: ok');

    // 5. A diff, collapsed: both sides collapsed, gc_mark once.
    await page.evaluate(() => { window.__cx.ready = false; });
    await page.goto(`${url}/#/app/${encodeURIComponent(app)}?from=now-15m&diff=1&collapse=1`);
    await page.waitForFunction(() => window.__cx.ready && window.__cx.mode === 'diff', null, { timeout: 20000 });
    s = await state();
    check(s.gc.n === 1 && near(s.gc.total, want.gc_mark) && s.pressed === 'true', `collapsed diff: gc_mark ${JSON.stringify(s.gc)}`);
    check(await page.locator('table.funcs.diff tbody tr').count() >= 3, 'the diff table is empty');
    log('diff, collapsed: ok');

    // 6. Nothing to collapse: the button says so, disabled; a short graph
    // does not scroll.
    await page.evaluate(() => { window.__cx.ready = false; });
    await page.goto(`${url}/#/app/${encodeURIComponent(flatApp)}?from=now-15m`);
    await ready();
    check(await page.isDisabled('button.collapse'), 'collapse recursion enabled for a profile without recursion');
    s = await state();
    check(s.boxH === s.boxScrollH && s.boxH === s.canvasH && !s.collapse, `flat graph: viewport ${s.boxH} of ${s.boxScrollH}, canvas ${s.canvasH}`);
    log(`no recursion: the button disabled, the graph ${s.canvasH} px without scrolling`);
});
