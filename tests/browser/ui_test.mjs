// The web UI in headless Chromium against a server the real agent filled
// (tests/integration/browser_tests.py starts both and runs this):
//   node tests/browser/ui_test.mjs URL OUTDIR APP T0 TMID T1 [PYAPP PYPID]
// T0..TMID and TMID..T1 (Unix seconds) are two ranges with profiles of APP,
// whose hot function is hot_a; PYAPP's process PYPID ran
// tests/workloads/py_split.py in T0..T1. Exits 1 with what failed;
// screenshots in OUTDIR.
import { check, log, openPage, runChecks } from './harness.mjs';

const [url, out, app, t0, tmid, t1, pyApp, pyPid] = process.argv.slice(2);

const ctx = await openPage({ out, viewport: { width: 1500, height: 1000 } });
const { page, shot, ready, hash } = ctx;
// Pixels of the flame-graph canvas that are not white, and that are the search colour.
const pixels = () => page.evaluate(() => {
    const c = document.querySelector('.fg canvas');
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let ink = 0, magenta = 0;
    for (let i = 0; i < d.length; i += 4) {
        if (d[i] < 250 || d[i + 1] < 250 || d[i + 2] < 250) ink++;
        if (d[i] === 0xd6 && d[i + 1] === 0x3c && d[i + 2] === 0xd6) magenta++;
    }
    return { ink, magenta, w: c.width, h: c.height };
});
// The page coordinates of the widest frame named nm.
const frameAt = (nm) => page.evaluate((nm) => {
    const cx = window.__cx, t = cx.fg.tree;
    let best = -1;
    for (let i = 0; i < t.n; i++) if (t.names[t.name[i]] === nm && (best < 0 || t.total[i] > t.total[best])) best = i;
    if (best < 0) return null;
    const b = cx.fg.boxOf(best), r = cx.fg.overlay.getBoundingClientRect();
    return { x: r.left + b.x + b.w / 2, y: r.top + b.y + b.h / 2, w: b.w, i: best };
}, nm);

await runChecks(ctx, 'failure', async () => {
    // 1. The front page lists the application; the filter box narrows it.
    await page.goto(url + '/#/?from=now-15m');
    await page.waitForSelector('a.app-link', { timeout: 20000 });
    const names = await page.$$eval('a.app-link', (as) => as.map((a) => a.textContent));
    check(names.includes(app), `front page does not list ${app}: ${names.slice(0, 10)}`);
    check(await page.locator('canvas.spark').count() >= 1, 'no CPU sparkline');
    await page.waitForTimeout(300);
    await shot('1-applications');
    await page.fill('input[aria-label="filter applications"]', app);
    await page.waitForFunction((app) => [...document.querySelectorAll('a.app-link')].every((a) => a.textContent.includes(app)), app);
    log(`front page: ${names.length} applications, ${app} listed; filter works`);

    // 2. Pick the application: the flame graph is drawn, the table names the hot function.
    await page.click(`a.app-link:text-is("${app}")`);
    await ready({ mode: 'profile' });
    const drawn = await page.evaluate(() => window.__cx.drawn);
    const px = await pixels();
    check(drawn >= 5, `only ${drawn} frames drawn`);
    check(px.ink > 2000, `the flame graph canvas is blank (${px.ink} pixels of ink)`);
    const first = await page.textContent('table.funcs tbody tr:first-child td.fn');
    check(first === 'hot_a', `the function table's top row is ${first}, want hot_a`);
    const tableText = await page.textContent('table.funcs');
    for (const f of ['hot_b', 'hot_c', 'dispatch', 'main']) check(tableText.includes(f), `${f} not in the function table`);
    // The pid filter offers the pids the server saw (GET /api/v1/labels).
    await page.waitForFunction(() => document.querySelectorAll('#pid-values option').length > 0, null, { timeout: 10000 }).catch(() => {});
    const pids = await page.$$eval('#pid-values option', (os) => os.map((o) => o.value));
    check(pids.length >= 1 && pids.every((x) => /^[0-9]+$/.test(x)), `pid list: ${JSON.stringify(pids)}`);
    log(`profiling tab: ${drawn} frames drawn, ${px.ink} pixels, first draw ${(await page.evaluate(() => window.__cx.firstDrawMs)).toFixed(1)} ms, top function ${first}`);
    await shot('2-profiling');

    // 3. Hover names the frame, its file and times.
    const hot = await frameAt('hot_a');
    check(hot && hot.w > 20, `hot_a frame not visible: ${JSON.stringify(hot)}`);
    await page.mouse.move(hot.x, hot.y);
    await page.waitForSelector('.fg-tip:not([hidden])', { timeout: 5000 });
    const tip = await page.textContent('.fg-tip');
    check(tip.includes('hot_a') && tip.includes('cpu_split.c') && tip.includes('self') && tip.includes('%'), `tooltip: ${tip}`);
    log(`hover: ${tip.slice(0, 120)}`);
    await shot('3-hover');

    // 4. Search highlights it and says its share.
    await page.fill('input[aria-label="search functions"]', 'hot_a');
    await page.waitForFunction(() => /%/.test(window.__cx.search || ''));
    const info = await page.textContent('.search-info');
    const share = parseFloat(/([\d.]+) %/.exec(info)[1]) / 100;
    check(share > 0.3 && share < 0.7, `hot_a holds ${share} of the time, want about 0.5: ${info}`);
    const px2 = await pixels();
    check(px2.magenta > 200, `search highlighted ${px2.magenta} pixels`);
    check((await hash()).includes('q=hot_a'), `search not in the URL: ${await hash()}`);
    log(`search: ${info}`);
    await shot('4-search');

    // 5. Click zooms into a frame; back (history and the button) returns.
    const hb = await frameAt('hot_b');
    await page.mouse.click(hb.x, hb.y);
    await page.waitForFunction(() => window.__cx.zoom > 0);
    check(/zoom=.*;dispatch;hot_b/.test(await hash()), `zoom not in the URL: ${await hash()}`);
    const hbZoomed = await frameAt('hot_b');
    const width = await page.evaluate(() => window.__cx.fg.cssW);
    check(hbZoomed.w > width * 0.98, `hot_b ${hbZoomed.w} px wide after zooming into it, want the whole ${width} px`);
    check(await page.isVisible('.crumbs .reset'), 'no way back after zooming');
    await shot('5-zoom');
    await page.goBack();
    await page.waitForFunction(() => window.__cx.zoom === 0);
    check(Math.abs((await frameAt('hot_b')).w - hb.w) < 1, 'back did not restore the graph');
    await page.goForward();
    await page.waitForFunction(() => window.__cx.zoom > 0);
    await page.click('.crumbs .reset');
    await page.waitForFunction(() => window.__cx.zoom === 0);
    log(`zoom: hot_b ${hb.w.toFixed(0)} px -> ${hbZoomed.w.toFixed(0)} px; back, forward and reset work`);

    // 6. A table row finds its function in the graph.
    await page.click('table.funcs tr.row:has(td.fn:text-is("hot_b"))');
    await page.waitForFunction(() => document.querySelector('input[aria-label="search functions"]').value.includes('hot_b') &&
        /^1 function match/.test(window.__cx.search || ''));
    log(`table row: ${await page.textContent('.search-info')}`);

    // 7. Diff of two ranges.
    await page.goto(`${url}/#/app/${encodeURIComponent(app)}?from=${tmid}&to=${t1}&diff=1&bfrom=${t0}&bto=${tmid}`);
    await ready({ mode: 'diff' });
    const dpx = await pixels();
    check(dpx.ink > 2000, `diff canvas blank (${dpx.ink})`);
    const rows = await page.locator('table.funcs.diff tbody tr').count();
    check(rows >= 3, `the diff table has ${rows} rows`);
    const diffText = await page.textContent('table.funcs.diff');
    check(diffText.includes('hot_a'), 'hot_a not in the diff table');
    log(`diff: ${rows} rows of changes, ${dpx.ink} pixels`);
    await shot('6-diff');
    // And from the button: this range against the one before.
    await page.goto(`${url}/#/app/${encodeURIComponent(app)}?from=now-15m`);
    await ready({ mode: 'profile' });
    await page.click('button:text-is("Compare…")');
    await ready({ mode: 'diff' });
    check((await hash()).includes('diff=1'), 'Compare did not turn the diff on');

    // 8. Downloads: pprof and folded stacks of the current view.
    const hrefs = await page.$$eval('a[download]', (as) => as.map((a) => a.href));
    check(hrefs.length === 2, `downloads: ${hrefs}`);
    const folded = await (await page.request.get(hrefs.find((h) => h.includes('collapsed')))).text();
    check(/main;run;dispatch;hot_a \d+/.test(folded), `folded download: ${folded.slice(0, 200)}`);
    const pb = await page.request.get(hrefs.find((h) => h.includes('format=pprof')));
    check(pb.ok() && (await pb.body())[0] === 0x1f, 'pprof download is not gzip');

    // 9. Empty states say what to do.
    await page.goto(`${url}/#/app/no-such-app?from=now-15m`);
    await ready({ mode: 'profile' });
    check((await page.textContent('.msg')).includes('No profiles of no-such-app'), 'no empty state for an unknown application');
    await page.goto(`${url}/#/?from=1000000&to=1000600`);
    await page.waitForSelector('.msg.empty');
    check((await page.textContent('.msg.empty')).toLowerCase().includes('is the agent running and pointed at this server'), 'empty front page says nothing useful');
    await shot('7-empty');
    log('empty states, downloads: ok');

    // 10. A Python program: its frames named as Python names them, in
    // Python's greens (hue family PY_HUE), grouped by package; native
    // frames in other colours; the tooltip, legend and table say Python.
    if (pyApp) {
        await page.evaluate(() => { window.__cx.ready = false; }); // not the last page's
        await page.goto(`${url}/#/app/${encodeURIComponent(pyApp)}?from=${t0}&to=${t1}&pid=${pyPid}`);
        await ready({ mode: 'profile' });
        const py = await page.evaluate(async () => {
            const { KIND, PY_HUE } = await import('/ui/flamegraph.js');
            const fg = window.__cx.fg, t = fg.tree;
            const c = fg.canvas, dpr = fg.dpr || 1, ctx = c.getContext('2d');
            // The hue and saturation of a canvas pixel (CSS px), as HSL.
            const hs = (x, y) => {
                const [r, g, b] = ctx.getImageData(Math.floor(x * dpr), Math.floor(y * dpr), 1, 1).data;
                const mx = Math.max(r, g, b), mn = Math.min(r, g, b), d = mx - mn, l = (mx + mn) / 510;
                if (!d) return { h: 0, s: 0, rgb: [r, g, b] };
                const h = mx === r ? ((g - b) / d) % 6 : mx === g ? (b - r) / d + 2 : (r - g) / d + 4;
                return { h: Math.round((h * 60 + 360) % 360), s: Math.round((100 * d / 255) / (1 - Math.abs(2 * l - 1))), rgb: [r, g, b] };
            };
            const widest = (nm) => {
                let best = -1;
                for (let i = 0; i < t.n; i++) if (t.names[t.name[i]] === nm && (best < 0 || t.total[i] > t.total[best])) best = i;
                if (best < 0) return null;
                const b = fg.boxOf(best), k = t.name[best];
                // The pixel inside the frame's top-left corner: fill, not label.
                return { nm, share: t.total[best] / t.total[0], w: b.w, kind: t.kind[k], group: t.group[k], color: t.color[k], file: String(t.files[k]), px: hs(b.x + 1.5, b.y + 1.5) };
            };
            // Every name's colour: Python's in its hues, the others' (unless grey) not.
            const hslOf = (s) => (/^hsl\((\d+),(\d+)%/.exec(s) || []).slice(1).map(Number);
            let pyNames = 0, nativeNames = 0;
            const wrong = [];
            for (let i = 2; i < t.names.length; i++) {
                const [h, s] = hslOf(t.color[i]);
                if (t.kind[i] === KIND.PYTHON) {
                    pyNames++;
                    if (!(h >= PY_HUE[0] && h <= PY_HUE[1])) wrong.push(`${t.names[i]} ${t.color[i]}`);
                } else {
                    nativeNames++;
                    if (s >= 20 && h >= PY_HUE[0] - 20 && h <= PY_HUE[1] + 20) wrong.push(`${t.names[i]} (kind ${t.kind[i]}) ${t.color[i]}`);
                }
            }
            return { KIND_PYTHON: KIND.PYTHON, PY_HUE, pyNames, nativeNames, wrong,
                hot: widest('Crunch.hot_py'), json: widest('_make_iterencode.<locals>._iterencode_list'),
                lambda: widest('sort_py.<locals>.<lambda>'), main: widest('main') };
        });
        const inHue = (p) => p.s >= 20 && p.h >= py.PY_HUE[0] - 2 && p.h <= py.PY_HUE[1] + 2;
        const hot = py.hot;
        check(hot, `no Crunch.hot_py frame in ${pyApp}'s graph (pid ${pyPid})`);
        check(hot.kind === py.KIND_PYTHON && hot.group === 'workloads' && hot.file.endsWith('tests/workloads/py_split.py'),
            `Crunch.hot_py: kind ${hot.kind}, group ${hot.group}, file ${hot.file}`);
        check(hot.share > 0.2 && hot.w > 100, `Crunch.hot_py holds ${hot.share} of the time, ${hot.w} px`);
        check(inHue(hot.px), `Crunch.hot_py drawn in rgb(${hot.px.rgb}) = hue ${hot.px.h}, saturation ${hot.px.s}%, not Python's hues ${py.PY_HUE} (colour ${hot.color})`);
        check(py.json && py.json.kind === py.KIND_PYTHON && py.json.group === 'json' && py.json.file.includes('/json/encoder.py'),
            `the json encoder's frames: ${JSON.stringify(py.json)}`);
        if (py.json.w > 3) check(inHue(py.json.px), `the json encoder drawn in hue ${py.json.px.h}: ${JSON.stringify(py.json)}`);
        check(py.main && py.main.kind === py.KIND_PYTHON, `main: ${JSON.stringify(py.main)}`);
        check(py.pyNames >= 5 && py.nativeNames >= 1, `${py.pyNames} Python names, ${py.nativeNames} others`);
        check(py.wrong.length === 0, `colours outside their family: ${py.wrong.slice(0, 5).join('; ')}`);
        // The function table marks Python rows; the legend names Python packages.
        check(await page.locator('table.funcs tr.row.python td.fn:text-is("Crunch.hot_py")').count() === 1, 'Crunch.hot_py is not a Python row of the table');
        const legend = await page.textContent('.legend');
        check(/workloads \(Python\)/.test(legend), `legend: ${legend}`);
        const hf = await frameAt('Crunch.hot_py');
        await page.mouse.move(hf.x, hf.y);
        await page.waitForSelector('.fg-tip:not([hidden])', { timeout: 5000 });
        const ptip = await page.textContent('.fg-tip');
        check(ptip.includes('py_split.py') && ptip.includes('Python: workloads'), `tooltip: ${ptip}`);
        log(`python: ${pyApp} pid ${pyPid}: ${py.pyNames} Python names, ${py.nativeNames} native; Crunch.hot_py ${(hot.share * 100).toFixed(0)} %, drawn rgb(${hot.px.rgb}) hue ${hot.px.h}; json hue ${py.json.px.h}; legend: ${legend}`);
        await shot('8-python');

        // 11. Interpreter frames: hidden by default (Debian's python3 has no
        // symbol table: its unnamed frames' time is the Python functions'),
        // no note about frames without names, a Python function on the
        // table's first row; the toggle shows them, the same total, and back.
        const interpState = () => page.evaluate(() => {
            const cx = window.__cx, t = cx.fg.tree;
            // Frames in the graph (the names list has every function of the range).
            let marked = 0;
            for (let i = 1; i < t.n; i++) if (String(t.files[t.name[i]]).startsWith('[interpreter]')) marked++;
            return { interp: cx.interp, total: t.total[0], samples: t.samples, marked,
                button: document.querySelector('button.interp').textContent,
                pressed: document.querySelector('button.interp').getAttribute('aria-pressed'),
                notes: document.querySelector('.notes').textContent };
        });
        const hid = await interpState();
        check(hid.interp === 'hidden' && hid.button === 'Interpreter frames: hidden' && hid.pressed === 'false',
            `interpreter frames by default: ${JSON.stringify(hid)}`);
        check(hid.marked === 0, `${hid.marked} interpreter frames in the graph with them hidden`);
        check(!hid.notes.includes('without names'), `a note on unnamed frames with the interpreter's hidden: ${hid.notes}`);
        const firstRow = page.locator('table.funcs tr.row').first();
        check(await firstRow.evaluate((r) => r.classList.contains('python')),
            `the table's first row is not a Python function: ${await firstRow.textContent()}`);
        await page.evaluate(() => { window.__cx.ready = false; });
        await page.click('button.interp');
        await ready({ mode: 'profile' });
        const shownSt = await interpState();
        check(shownSt.interp === 'shown' && shownSt.button === 'Interpreter frames: shown' && shownSt.pressed === 'true' &&
            (await hash()).includes('interp=shown'), `after the toggle: ${JSON.stringify(shownSt)}, ${await hash()}`);
        check(shownSt.marked > 0, 'no interpreter frame shown after the toggle');
        check(shownSt.total === hid.total && shownSt.samples === hid.samples,
            `totals differ: hidden ${hid.total} ns ${hid.samples} samples, shown ${shownSt.total} ns ${shownSt.samples} samples`);
        await shot('9-python-interp-shown');
        await page.evaluate(() => { window.__cx.ready = false; });
        await page.click('button.interp');
        await ready({ mode: 'profile' });
        const back = await interpState();
        check(back.interp === 'hidden' && back.marked === 0 && !(await hash()).includes('interp='),
            `toggled back: ${JSON.stringify(back)}, ${await hash()}`);
        log(`interpreter frames: hidden by default (first row ${(await firstRow.textContent()).slice(0, 60)}), ` +
            `${shownSt.marked} shown after the toggle, the same ${hid.samples} samples`);
    }
});
