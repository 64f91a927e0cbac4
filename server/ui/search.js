// Search: which function names the search box matches, and the time in
// matching frames. Pure functions; tests: search.test.js.

// A matcher from the search box: "/re/" is a regular expression, anything
// else a case-insensitive substring. Returns per-name 0/1, or null for "".
export function matchNames(t, q) {
    if (!q) return null;
    let test;
    const re = /^\/(.+)\/([a-z]*)$/.exec(q);
    if (re) {
        let r;
        try { r = new RegExp(re[1], re[2]); } catch (e) { r = null; }
        if (!r) return new Uint8Array(t.names.length);
        test = (s) => r.test(s);
    } else {
        const lq = q.toLowerCase();
        test = (s) => s.toLowerCase().includes(lq);
    }
    const m = new Uint8Array(t.names.length);
    for (let i = 2; i < t.names.length; i++) if (test(String(t.names[i]))) m[i] = 1;
    return m;
}

// The time in matching frames, each stack counted once (a match inside a
// match adds nothing), and how many distinct functions match.
export function matchShare(t, m) {
    let sum = 0, funcs = 0;
    const stk = new Int32Array(t.maxDepth + 2);
    let sp = 0, inMatch = 0;
    for (let i = 0; i < t.n; i++) {
        while (sp > 0 && i >= t.end[stk[sp - 1]]) if (m[t.name[stk[--sp]]]) inMatch--;
        const hit = m[t.name[i]];
        if (hit && inMatch === 0) sum += t.total[i];
        if (hit) inMatch++;
        stk[sp++] = i;
    }
    for (let i = 0; i < m.length; i++) funcs += m[i];
    return { time: sum, share: t.n ? sum / t.total[0] : 0, funcs };
}

