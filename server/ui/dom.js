// What every page shares: the element the pages fill, the state tests and
// the benchmark read (window.__cx), and building elements.

export const view = document.getElementById('view');
export const cx = (window.__cx = { ready: false, errors: [] }); // what tests and the benchmark read

// An element: h('a', { href, class, onclick }, ...children). Attributes
// that are undefined, null or false are left out; true is an empty one.
export function h(tag, attrs, ...kids) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
        if (v === undefined || v === null || v === false) continue;
        if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
        else if (k === 'class') el.className = v;
        else el.setAttribute(k, v === true ? '' : v);
    }
    for (const k of kids.flat()) {
        if (k !== null && k !== undefined && k !== false) el.append(k instanceof Node ? k : String(k));
    }
    return el;
}

// A box that says something: kind is 'error', 'warn' or 'empty'.
export function message(kind, title, ...body) {
    return h('div', { class: 'msg ' + kind, role: kind === 'error' ? 'alert' : 'status' },
        h('strong', {}, title), ...body.map((b) => h('p', {}, b)));
}
