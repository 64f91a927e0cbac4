import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseHash, hashOf } from './router.js';

test('parseHash: decoded path parts and parameters', () => {
    const { parts, p } = parseHash('#/app/my%20app%2Fv2?from=now-1h&zoom=main%3Bf&q=');
    assert.deepEqual(parts, ['app', 'my app/v2']);
    assert.equal(p.get('from'), 'now-1h');
    assert.equal(p.get('zoom'), 'main;f');
    assert.equal(p.get('q'), '');
    assert.deepEqual(parseHash('').parts, []);
    assert.deepEqual(parseHash('#/').parts, []);
    assert.equal(parseHash('#/?q=x').p.get('q'), 'x');
});

test('hashOf: empty parameters left out; parseHash reads it back', () => {
    const p = new URLSearchParams({ from: 'now-1h', q: '', zoom: 'main;std::vector<int>::at', collapse: '1' });
    const h = hashOf(['app', 'svc/a b'], p);
    assert.equal(h, '#/app/svc%2Fa%20b?from=now-1h&zoom=main%3Bstd%3A%3Avector%3Cint%3E%3A%3Aat&collapse=1');
    const back = parseHash(h);
    assert.deepEqual(back.parts, ['app', 'svc/a b']);
    assert.equal(back.p.get('zoom'), 'main;std::vector<int>::at');
    assert.equal(back.p.has('q'), false);
    assert.equal(hashOf([], new URLSearchParams()), '#/');
});
