// What every browser test shares: headless Chromium (Debian's, or
// $CHROMIUM) driven by playwright-core, a page whose script errors are
// collected, screenshots, and the run's end (what failed, a screenshot of
// it, the exit status). A test keeps only its own checks:
//   const t = await openPage({ out, viewport: { width: 1500, height: 1000 } });
//   const { page, shot, ready, hash } = t;
//   await runChecks(t, 'name-failure', async () => { ... check(...) ... });
// runChecks exits the process: 0 when every check held and the page logged
// no error, 1 (with what failed on stderr) otherwise.
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import path from 'node:path';

// A failed check: its message says all (no stack printed).
class CheckFailure extends Error {}

// Throws msg unless cond holds.
export const check = (cond, msg) => { if (!cond) throw new CheckFailure(msg); };
// A line of the test's progress, indented under the Python runner's name.
export const log = (s) => console.log('    ' + s);

// Headless Chromium, and a page of viewport's size (none when viewport is
// null: the test opens its own with browser.newPage()) whose console
// errors and uncaught exceptions go to problems. out: the screenshots'
// folder (made), or null for none. Returns { browser, page, problems,
// shot(name), ready(want), hash() }: ready waits (20 s) for the UI's
// window.__cx.ready with each field of want equal ({ mode: 'diff' }).
export async function openPage({ out = null, viewport = { width: 1400, height: 1000 } } = {}) {
    if (out) fs.mkdirSync(out, { recursive: true });
    const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox'] });
    const problems = [];
    const page = viewport ? await browser.newPage({ viewport }) : null;
    if (page) {
        page.on('console', (m) => { if (m.type() === 'error') problems.push('console: ' + m.text()); });
        page.on('pageerror', (e) => problems.push('page error: ' + e.message));
    }
    const shot = (name) => page.screenshot({ path: path.join(out, name + '.png'), fullPage: true });
    const ready = (want = {}) => {
        if (typeof want !== 'object') throw new TypeError(`ready: fields to wait for, not ${JSON.stringify(want)}`);
        return page.waitForFunction((w) => window.__cx && window.__cx.ready &&
            Object.entries(w).every(([k, v]) => window.__cx[k] === v), want, { timeout: 20000 });
    };
    const hash = () => page.evaluate(() => decodeURIComponent(location.hash));
    return { browser, page, problems, shot, ready, hash };
}

// Runs the test's checks, then fails it if the page logged an error; on a
// failure prints why (and the page's errors) and saves the screenshot
// failShot when the test has a folder for them. Closes the browser and
// exits the process with the result.
export async function runChecks(t, failShot, checks) {
    let failed = false;
    try {
        await checks();
        check(t.problems.length === 0, `script errors: ${t.problems.join('; ')}`);
    } catch (e) {
        failed = true;
        console.error('FAIL: ' + (e instanceof CheckFailure ? e.message : e.stack || String(e)));
        if (t.problems.length) console.error('script errors: ' + t.problems.join('; '));
        if (t.page && failShot) await t.shot(failShot).catch(() => {});
    }
    await t.browser.close();
    process.exit(failed ? 1 : 0);
}
