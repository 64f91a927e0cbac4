import { test } from 'node:test';
import assert from 'node:assert/strict';
import { KIND } from './classify.js';
import { PY_HUE, DIFF_COLORS, diffColor, hash } from './colors.js';
import { parseTree, nameInfo } from './tree.js';
import { PY, OTHER } from './test_names.js';

const hsl = (s) => (/^hsl\((\d+),(\d+)%,(\d+)%\)$/.exec(s) || []).slice(1).map(Number);
const names = ['all', 'other'], files = ['', ''];
for (const [n, f] of PY) { names.push(n); files.push(f); }
for (const [n, f] of OTHER) { names.push(n); files.push(f); }
const t = parseTree({ names, files, nodes: [0, 1, 1, 0] });
const colours = {};
for (let i = 0; i < names.length; i++) {
    nameInfo(t, i);
    colours[`${names[i]} ${files[i]}`] = t.color[i];
}

test('Python frames in their own hue family; the others away from it', () => {
    for (let i = 0; i < names.length; i++) {
        const [h, s, l] = hsl(t.color[i]);
        if (t.kind[i] === KIND.PYTHON) {
            assert.ok(h >= PY_HUE[0] && h <= PY_HUE[1] && s >= 40 && l >= 50 && l <= 70,
                `Python colour of ${names[i]}: ${t.color[i]}`);
        } else if (s >= 20) { // not grey
            assert.ok(h < PY_HUE[0] - 20 || h > PY_HUE[1] + 20, `colour of ${names[i]} away from Python's: ${t.color[i]}`);
        }
    }
});

test('a package\'s frames share a hue', () => {
    const hueOf = (n, f) => hsl(colours[`${n} ${f}`])[0];
    assert.equal(hueOf('JSONEncoder.encode', '/usr/lib/python3.11/json/encoder.py'),
        hueOf('_make_iterencode.<locals>._iterencode_list', '/usr/lib/python3.11/json/encoder.py'));
});

test('the other kinds\' colours, exactly as before Python had its own', () => {
    assert.equal(colours['list_sort_impl Objects/listobject.c'], 'hsl(11,69%,61%)');
    assert.equal(colours['std::vector<int>::push_back /usr/include/c++/12/bits/stl_vector.h'], 'hsl(42,68%,47%)');
    assert.equal(colours['do_syscall_64 [kernel.kallsyms]'], 'hsl(200,68%,65%)');
    assert.equal(colours['python3.11+0x1a2b /usr/bin/python3.11'], 'hsl(84,6%,69%)');
    assert.equal(colours['[python: thread state not found] '], 'hsl(0,0%,48%)');
    assert.equal(t.color[0], 'hsl(220,10%,78%)');
    assert.equal(t.color[1], 'hsl(0,0%,86%)');
});

test('hash is FNV-1a, 32 bits', () => {
    assert.equal(hash(''), 2166136261);
    assert.equal(hash('a'), 0xe40c292c);
    assert.equal(hash('foobar'), 0xbf9cf968);
});

test('diffColor: grey for no change, red for growth, blue for shrinkage, saturating at max', () => {
    assert.equal(DIFF_COLORS.length, 21);
    assert.equal(diffColor(0, 0.1), 'hsl(0,0%,82%)');
    assert.equal(diffColor(0.1, 0.1), 'hsl(0,90%,54%)');
    assert.equal(diffColor(5, 0.1), 'hsl(0,90%,54%)');
    assert.equal(diffColor(-0.1, 0.1), 'hsl(215,90%,54%)');
    assert.equal(diffColor(-0.05, 0.1), DIFF_COLORS[5]);
    assert.equal(diffColor(0.004, 0.1), 'hsl(0,0%,82%)'); // under half a step: unchanged
});
