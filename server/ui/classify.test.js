import { test } from 'node:test';
import assert from 'node:assert/strict';
import { KIND, classify, isPythonFile, pythonPackageOf, packageOf } from './classify.js';
import { PY, OTHER } from './test_names.js';

const kindName = (k) => Object.keys(KIND).find((x) => KIND[x] === k);

test('Python frames: recognised by their file, grouped by top-level package', () => {
    for (const [name, file, group] of PY) {
        assert.equal(isPythonFile(name, file), true, `isPythonFile(${name}, ${file})`);
        assert.equal(pythonPackageOf(file), group, `pythonPackageOf(${file})`);
        const c = classify(name, file, 5);
        assert.deepEqual([kindName(c.kind), c.group], ['PYTHON', group], `classify(${name}, ${file})`);
    }
});

test('every other frame keeps its kind: native code, kernel, unnamed, markers', () => {
    for (const [name, file, kind, group] of OTHER) {
        const c = classify(name, file, 5);
        assert.deepEqual([kindName(c.kind), c.group], [kind, group], `classify(${name}, ${file})`);
    }
});

test('unnamed frames name their binary; the root and the folded frames are theirs', () => {
    assert.deepEqual(classify('libfoo.so+0x1f', '/usr/lib/libfoo.so', 9),
        { kind: KIND.UNNAMED, group: 'libfoo.so', binary: 'libfoo.so', unnamed: true });
    assert.equal(classify('[kernel]+0xffffffff81000000', '', 9).unnamed, true);
    // An interpreter's frame shown (interp=shown): unnamed in its binary, not the kernel's.
    assert.deepEqual(classify('python3.11+0x50ba84', '[interpreter]/usr/bin/python3.11', 9),
        { kind: KIND.UNNAMED, group: 'python3.11', binary: 'python3.11', unnamed: true });
    // "+0x" in a name with spaces or parentheses is not an address.
    assert.equal(classify('operator+(int)+0x10', '', 9).kind, KIND.USER);
    assert.equal(classify('all', '', 0).kind, KIND.ROOT);
    assert.equal(classify('other', '', 1).kind, KIND.OTHER);
    assert.equal(classify('f', '[unknown]', 9).kind, KIND.USER);
});

test('packageOf: C++/Rust "ns::", Go "path/pkg.", Java "a.b.", else the directory', () => {
    assert.equal(packageOf('json.dumps', ''), 'json');
    assert.equal(packageOf('const std::string::size', ''), 'std');
    assert.equal(packageOf('core::ptr::drop_in_place<T>', ''), 'core');
    // (Java's names group by their first part only: the match stops at the
    // first dot, so the "a.b" cut in packageOf never applies to them.)
    assert.equal(packageOf('org.apache.kafka.Producer.send', ''), 'org');
    assert.equal(packageOf('github.com/org/svc/pkg.(*T).Func', ''), 'github.com/org/svc/pkg');
    assert.equal(packageOf('net/http.(*conn).serve', ''), 'net/http');
    assert.equal(packageOf('main', '/src/app/main.c'), '/src/app');
    assert.equal(packageOf('main', 'main.c'), 'main.c');
    assert.equal(packageOf('main', ''), '');
});

test('classify stays cheap: it runs per distinct name on the first draw', (t) => {
    const many = [];
    for (let i = 0; i < 200000; i++) {
        many.push(i % 4 === 0 ? [`Cls${i}.method`, `/app/.venv/lib/python3.12/site-packages/pkg${i % 50}/m${i}.py`]
            : i % 4 === 1 ? [`ns${i % 30}::f${i}`, `/src/ns/f${i}.cc`]
                : i % 4 === 2 ? [`lib.so+0x${i.toString(16)}`, '/usr/lib/lib.so'] : [`f${i}`, `/src/d${i % 40}/f.c`]);
    }
    const t0 = performance.now();
    let py = 0;
    for (let i = 0; i < many.length; i++) if (classify(many[i][0], many[i][1], i + 2).kind === KIND.PYTHON) py++;
    const ms = performance.now() - t0;
    assert.equal(py, 50000);
    t.diagnostic(`classify: ${(ms * 1000 / many.length).toFixed(2)} us a name (200000 names, a quarter Python)`);
});
