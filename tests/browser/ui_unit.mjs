#!/usr/bin/env node
// The web UI's unit tests: server/ui/*.test.js, each beside the module it
// tests, run by node's own test runner (make unit runs this):
//   node tests/browser/ui_unit.mjs      (or: cd server/ui && node --test)
// Prints failures in full, the tests' diagnostics and one closing line;
// exits 1 when a test failed.
import { run } from 'node:test';
import fs from 'node:fs';
import path from 'node:path';

const dir = new URL('../../server/ui/', import.meta.url).pathname;
const files = fs.readdirSync(dir).filter((f) => f.endsWith('.test.js')).sort().map((f) => path.join(dir, f));
let passed = 0, failed = 0;
const stream = run({ files });
stream.on('test:pass', (d) => { if (d.details?.type !== 'suite') passed++; });
stream.on('test:fail', (d) => {
    failed++;
    const err = d.details?.error, cause = err?.cause ?? err;
    console.error(`FAIL ${path.basename(d.file || '')}: ${d.name}\n    ${String(cause?.stack || cause).split('\n').slice(0, 8).join('\n    ')}`);
});
// The tests' own notes ("classify: 0.8 us a name"), not the runner's counts.
stream.on('test:diagnostic', (d) => { if (/^[a-z_]+: /.test(d.message)) console.log(`    ui_unit: ${d.message}`); });
stream.on('end', () => {
    console.log(`    ui_unit: ${passed} tests passed, ${failed} failed (${files.length} files, node --test)`);
    process.exitCode = failed || !files.length ? 1 : 0;
});
// (The stream must be read for its events to flow.)
stream.resume?.();
