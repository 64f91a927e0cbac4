// The web UI against a server with --read-api-key
// (tests/integration/browser_tests.py starts it and runs this):
//   node tests/browser/ui_read_key.mjs URL KEY APP
// Without the key the page says why; given at the prompt, APP is listed,
// the key is kept in session storage and sent on every data call. Exits 1
// with what failed.
import { check, log, openPage, runChecks } from './harness.mjs';

const [url, key, app] = process.argv.slice(2);

// Pages of its own: each answers the key prompt its way.
const ctx = await openPage({ viewport: null });
const { browser } = ctx;
await runChecks(ctx, null, async () => {
    // 1. The prompt dismissed: an error that names the status, no list.
    let page = await browser.newPage();
    let prompts = 0;
    page.on('dialog', (d) => { prompts++; d.dismiss(); });
    await page.goto(url + '/#/?from=now-15m');
    await page.waitForFunction(() => document.body.textContent.includes('401'), null, { timeout: 20000 });
    check(prompts === 1, `asked ${prompts} times for the key, want once`);
    check(await page.locator('a.app-link').count() === 0, 'applications listed without the key');
    log('without the key: 401 shown, asked once');
    await page.close();

    // 2. A wrong key, then the right one: listed; the key in session storage.
    page = await browser.newPage();
    const answers = ['wrong', key];
    prompts = 0;
    page.on('dialog', (d) => { prompts++; d.accept(answers.shift() || ''); });
    const sent = [];
    page.on('request', (r) => { if (r.url().includes('/api/')) sent.push(r.headers().authorization || ''); });
    await page.goto(url + '/#/?from=now-15m');
    await page.waitForSelector('a.app-link', { timeout: 20000 });
    const names = await page.$$eval('a.app-link', (as) => as.map((a) => a.textContent));
    check(names.includes(app), `${app} not listed: ${names}`);
    check(prompts === 2, `asked ${prompts} times, want 2 (a wrong key, then the right one)`);
    check(await page.evaluate(() => sessionStorage.getItem('codexray.readKey')) === key, 'key not in session storage');
    // A reload asks no more: every call carries the key.
    sent.length = 0;
    await page.reload();
    await page.waitForSelector('a.app-link', { timeout: 20000 });
    check(prompts === 2, 'asked again after a reload');
    check(sent.length > 0 && sent.every((a) => a === `Bearer ${key}`), `calls without the key: ${sent}`);
    log(`with the key: ${app} listed, ${sent.length} calls after a reload all with the key`);
});
