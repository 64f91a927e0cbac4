// The CodeXray web UI: the applications list and each application's
// Profiling tab. Every view is the URL's hash:
//   #/?from=now-1h&to=now&q=FILTER
//   #/app/NAME?from=&to=&host=&pid=&q=SEARCH&zoom=a;b;c&sort=self|total&fn=FILTER
//              &diff=1&bfrom=&bto=&bhost=&bpid=
import {
    FlameGraph, KIND, parseTree, classifyAll, pathOf, resolvePath, functionStats, matchNames, matchShare,
    unnamedReport, alignDiff, diffTable, fmtTime, fmtPct,
} from './flamegraph.js';

const RANGES = [['15m', 'now-15m'], ['1h', 'now-1h'], ['6h', 'now-6h'], ['24h', 'now-24h'], ['7d', 'now-7d']];
const MAX_NODES = 100000;
const view = document.getElementById('view');
const cx = (window.__cx = { ready: false, errors: [] }); // what tests and the benchmark read

// --- small helpers ---------------------------------------------------------

function h(tag, attrs, ...kids) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
        if (v === undefined || v === null || v === false) continue;
        if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
        else if (k === 'class') el.className = v;
        else el.setAttribute(k, v === true ? '' : v);
    }
    for (const k of kids.flat()) if (k !== null && k !== undefined && k !== false) el.append(k instanceof Node ? k : String(k));
    return el;
}

function parseHash() {
    const raw = location.hash.replace(/^#/, '') || '/';
    const q = raw.indexOf('?');
    const path = q < 0 ? raw : raw.slice(0, q);
    return { parts: path.split('/').filter(Boolean).map(decodeURIComponent), p: new URLSearchParams(q < 0 ? '' : raw.slice(q + 1)) };
}

function hashOf(parts, p) {
    const clean = new URLSearchParams();
    for (const [k, v] of p) if (v !== '' && v !== null) clean.set(k, v);
    const qs = clean.toString();
    return '#/' + parts.map(encodeURIComponent).join('/') + (qs ? '?' + qs : '');
}

// Changes the URL; replace = no new history entry (typing in a box).
function navigate(parts, p, replace) {
    const url = hashOf(parts, p);
    if (url === location.hash) return;
    if (replace) { history.replaceState(null, '', url); route(); } else location.hash = url;
}

function update(changes, replace) {
    const { parts, p } = parseHash();
    for (const [k, v] of Object.entries(changes)) {
        if (v === null || v === undefined || v === '') p.delete(k); else p.set(k, v);
    }
    navigate(parts, p, replace);
}

// The server's read key (--read-api-key), when it has one: asked for at
// the first 401 and kept in this tab's session storage (not across
// sessions, not in the URL), sent as Authorization: Bearer on every call.
const READ_KEY = 'codexray.readKey';

async function api(path, params, asText) {
    const url = path + '?' + new URLSearchParams(Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== ''));
    let res;
    for (let tries = 0; tries < 3; tries++) {
        const key = sessionStorage.getItem(READ_KEY) || '';
        try {
            res = await fetch(url, key ? { headers: { Authorization: `Bearer ${key}` } } : undefined);
        } catch (e) {
            throw new Error('cannot reach codexray-server: is it running, and is this page served by it?');
        }
        if (res.status !== 401) break;
        // Calls made at once all come back 401: only the first asks, the
        // others find the new key and try again.
        if ((sessionStorage.getItem(READ_KEY) || '') === key) {
            const given = window.prompt('This server asks for its read API key (--read-api-key):');
            if (!given) break;
            sessionStorage.setItem(READ_KEY, given.trim());
        }
    }
    const body = await res.text();
    if (!res.ok) {
        let msg = body;
        try { msg = JSON.parse(body).error; } catch (e) { /* not JSON */ }
        throw new Error(`${url.split('?')[0]}: ${res.status} ${msg}`);
    }
    return asText ? body : JSON.parse(body);
}

// "now-1h", "now", Unix seconds: to Unix seconds, for the charts.
function toUnix(s, now) {
    if (!s || s === 'now') return now;
    const m = /^now-(\d+(?:\.\d+)?)([smhdw]?)$/.exec(s);
    if (m) return now - parseFloat(m[1]) * ({ '': 1, s: 1, m: 60, h: 3600, d: 86400, w: 604800 }[m[2]]);
    const v = Number(s);
    if (Number.isFinite(v)) return v;
    const d = Date.parse(s);
    return Number.isFinite(d) ? d / 1000 : NaN;
}

// What a user types in a custom range box: kept as typed when the server
// reads it (now-3h, Unix seconds), else a date turned into Unix seconds.
function rangeValue(s) {
    s = s.trim();
    if (!s || /^now(-\d+(\.\d+)?[smhdw]?)?$/.test(s) || /^\d+(\.\d+)?$/.test(s)) return s;
    const d = Date.parse(s);
    return Number.isFinite(d) ? String(Math.round(d / 1000)) : null;
}

function fmtWhen(unix) {
    return new Date(unix * 1000).toLocaleString(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit' });
}

function rangeLabel(from, to) {
    const preset = RANGES.find(([, v]) => v === from);
    if (preset && (!to || to === 'now')) return 'last ' + preset[0];
    const now = Date.now() / 1000;
    return `${fmtWhen(toUnix(from, now))} – ${fmtWhen(toUnix(to || 'now', now))}`;
}

function ago(unix) {
    const s = Date.now() / 1000 - unix;
    if (s < 90) return `${Math.max(0, Math.round(s))} s ago`;
    if (s < 5400) return `${Math.round(s / 60)} min ago`;
    if (s < 172800) return `${Math.round(s / 3600)} h ago`;
    return `${Math.round(s / 86400)} d ago`;
}

function stepFor(from, to) {
    const span = Math.max(60, to - from);
    return Math.max(60, Math.ceil(span / 240 / 60) * 60);
}

function cores(x) { return x >= 10 ? x.toFixed(1) : x >= 0.01 ? x.toFixed(2) : x > 0 ? x.toFixed(3) : '0'; }

function message(kind, title, ...body) {
    return h('div', { class: 'msg ' + kind, role: kind === 'error' ? 'alert' : 'status' }, h('strong', {}, title), ...body.map((b) => h('p', {}, b)));
}

function rangePicker(p, onPick) {
    const from = p.get('from') || 'now-1h', to = p.get('to') || 'now';
    const isPreset = RANGES.some(([, v]) => v === from) && to === 'now';
    const custom = h('form', { class: 'custom', hidden: isPreset || undefined, onsubmit: (e) => {
        e.preventDefault();
        const f = rangeValue(custom.elements.from.value), t = rangeValue(custom.elements.to.value);
        if (f === null || t === null) { custom.elements.from.setCustomValidity('now-3h, Unix seconds or a date'); custom.reportValidity(); return; }
        onPick(f, t || 'now');
    } },
    h('input', { name: 'from', value: from, 'aria-label': 'from', size: 18, title: 'now-3h, Unix seconds, or a date like 2026-12-03 12:00' }),
    '–', h('input', { name: 'to', value: to, 'aria-label': 'to', size: 18 }), h('button', { type: 'submit' }, 'Apply'));
    return h('div', { class: 'range' },
        RANGES.map(([label, v]) => h('button', { type: 'button', class: isPreset && from === v ? 'on' : '', onclick: () => onPick(v, 'now') }, label)),
        h('button', { type: 'button', class: isPreset ? '' : 'on', onclick: () => { custom.hidden = !custom.hidden; } }, 'custom'),
        custom);
}

// A line of CPU cores over time on a canvas; with onSelect, dragging
// across it selects a range (Unix seconds).
function cpuChart(canvas, tl, { onSelect, height = 90, color = '#e8590c' } = {}) {
    const pts = tl.cpu_cores || [], n = pts.length;
    const draw = (sel) => {
        const W = canvas.clientWidth || 120, H = height, dpr = window.devicePixelRatio || 1;
        canvas.width = W * dpr; canvas.height = H * dpr; canvas.style.height = H + 'px';
        const c = canvas.getContext('2d');
        c.setTransform(dpr, 0, 0, dpr, 0, 0);
        c.clearRect(0, 0, W, H);
        const max = Math.max(...pts, 0.001), pad = onSelect ? 14 : 2;
        if (onSelect) {
            c.fillStyle = '#666'; c.font = '11px system-ui, sans-serif';
            c.fillText(`${cores(max)} cores`, 4, 11);
        }
        const X = (i) => (n <= 1 ? W / 2 : (i / (n - 1)) * (W - 2) + 1), Y = (v) => H - 1 - (v / max) * (H - pad - 2);
        c.beginPath(); c.moveTo(X(0), H);
        for (let i = 0; i < n; i++) c.lineTo(X(i), Y(pts[i]));
        c.lineTo(X(n - 1), H); c.closePath();
        c.fillStyle = color + '33'; c.fill();
        c.beginPath();
        for (let i = 0; i < n; i++) (i ? c.lineTo : c.moveTo).call(c, X(i), Y(pts[i]));
        c.strokeStyle = color; c.lineWidth = 1.5; c.stroke();
        if (onSelect && tl.step) {
            c.fillStyle = '#888';
            c.fillText(fmtWhen(tl.from), 4, H - 3);
            const endLabel = fmtWhen(tl.from + n * tl.step);
            c.fillText(endLabel, W - 4 - c.measureText(endLabel).width, H - 3);
            if (!n) c.fillText('no samples in this range', W / 2 - 60, H / 2);
        }
        if (sel) { c.fillStyle = 'rgba(40,90,200,0.18)'; c.fillRect(Math.min(sel[0], sel[1]), 0, Math.abs(sel[1] - sel[0]), H); }
    };
    draw();
    if (!onSelect) return;
    let start = null;
    const xOf = (e) => e.clientX - canvas.getBoundingClientRect().left;
    const timeAt = (x) => tl.from + (x / (canvas.clientWidth || 1)) * n * tl.step;
    canvas.onmousedown = (e) => { start = xOf(e); draw([start, start]); };
    canvas.onmousemove = (e) => { if (start !== null) draw([start, xOf(e)]); };
    window.addEventListener('mouseup', (e) => {
        if (start === null) return;
        const a = start, b = xOf(e);
        start = null;
        if (Math.abs(b - a) < 4) { draw(); return; }
        onSelect(Math.floor(timeAt(Math.min(a, b))), Math.ceil(timeAt(Math.max(a, b))));
    }, { once: false });
}

// --- the applications page ---------------------------------------------------

let appsReq = 0;
async function renderApps(p) {
    const from = p.get('from') || 'now-1h', to = p.get('to') || 'now';
    const req = ++appsReq;
    const filter = h('input', { type: 'search', placeholder: 'Filter applications', value: p.get('q') || '', 'aria-label': 'filter applications',
        oninput: () => update({ q: filter.value }, true) });
    const body = h('div', { class: 'apps-body' }, h('p', { class: 'muted' }, 'Loading…'));
    view.replaceChildren(h('section', { class: 'page' },
        h('div', { class: 'toolbar' }, h('h1', {}, 'Applications'), rangePicker(p, (f, t) => update({ from: f, to: t })), filter),
        body));
    filter.focus();
    let apps;
    try {
        apps = (await api('/api/v1/applications', { from, to })).applications || [];
    } catch (e) {
        if (req === appsReq) body.replaceChildren(message('error', 'Could not load the applications', e.message));
        return;
    }
    if (req !== appsReq) return;
    apps.sort((a, b) => b.cpu_cores - a.cpu_cores);
    if (!apps.length) {
        body.replaceChildren(message('empty', `No profiles yet (${rangeLabel(from, to)}).`,
            'Is the agent running and pointed at this server? Start it on each node with:',
            h('code', {}, `codexray-node-agent --endpoint ${location.origin}`),
            'Profiles arrive once a collection window (one minute by default) has closed; or pick a longer range.'));
        cx.ready = true;
        return;
    }
    const q = (p.get('q') || '').toLowerCase();
    const shown = apps.filter((a) => !q || a.name.toLowerCase().includes(q) || a.hosts.some((x) => x.toLowerCase().includes(q)));
    const now = Date.now() / 1000, f0 = toUnix(from, now), t0 = toUnix(to, now), step = stepFor(f0, t0);
    const rows = shown.map((a) => {
        const spark = h('canvas', { class: 'spark', width: 120, height: 24, 'aria-hidden': 'true' });
        const link = hashOf(['app', a.name], new URLSearchParams({ from, to }));
        return { a, spark, tr: h('tr', {},
            h('td', {}, h('a', { href: link, class: 'app-link' }, a.name)),
            h('td', { class: 'hosts' }, a.hosts.join(', ')),
            h('td', { class: 'num' }, cores(a.cpu_cores)),
            h('td', {}, spark),
            h('td', { class: 'muted', title: fmtWhen(a.last_seen) }, ago(a.last_seen))) };
    });
    body.replaceChildren(
        h('p', { class: 'muted' }, `${shown.length} of ${apps.length} applications, ${rangeLabel(from, to)}, by CPU used`),
        shown.length ? h('table', { class: 'apps' },
            h('thead', {}, h('tr', {}, h('th', {}, 'Application'), h('th', {}, 'Hosts'), h('th', { class: 'num' }, 'CPU (cores)'), h('th', {}, 'CPU over the range'), h('th', {}, 'Last seen'))),
            h('tbody', {}, rows.map((r) => r.tr))) : message('empty', 'No application matches the filter.'));
    cx.ready = true;
    // Sparklines, a few requests at a time, for the first 100 rows.
    const queue = rows.slice(0, 100);
    const worker = async () => {
        for (let r; (r = queue.shift());) {
            if (req !== appsReq) return;
            try {
                const tl = await api('/api/v1/timeline', { app: r.a.name, from, to, step: step + 's' });
                if (req === appsReq) cpuChart(r.spark, tl, { height: 24 });
            } catch (e) { r.spark.title = e.message; }
        }
    };
    await Promise.all([worker(), worker(), worker(), worker()]);
}

// --- the Profiling tab ---------------------------------------------------------

const cache = new Map(); // query string -> parsed tree (the last few)
async function loadTree(params) {
    const key = JSON.stringify(params);
    if (cache.has(key)) return cache.get(key);
    const text = await api('/api/v1/profile', { ...params, format: 'flamegraph', max_nodes: MAX_NODES }, true);
    performance.mark('cx-data');
    const tree = parseTree(JSON.parse(text));
    performance.mark('cx-parsed');
    cache.set(key, tree);
    if (cache.size > 4) cache.delete(cache.keys().next().value);
    return tree;
}

let page = null; // the current Profiling tab: kept while only q/zoom/sort change

function dataKey(parts, p) {
    return JSON.stringify([parts[1], ...['from', 'to', 'host', 'pid', 'diff', 'bfrom', 'bto', 'bhost', 'bpid'].map((k) => p.get(k) || '')]);
}

function baseRange(p) {
    const now = Date.now() / 1000;
    const f = p.get('from') || 'now-1h', t = p.get('to') || 'now';
    if (p.get('bfrom')) return { from: p.get('bfrom'), to: p.get('bto') || 'now' };
    // The period just before, as long as this one.
    const a = toUnix(f, now), b = toUnix(t, now);
    return { from: String(Math.floor(2 * a - b)), to: String(Math.ceil(a)) };
}

async function renderApp(parts, p) {
    const app = parts[1];
    const key = dataKey(parts, p);
    if (page && page.key === key) { page.apply(p); return; }
    if (page) page.destroy();
    cx.ready = false;
    const from = p.get('from') || 'now-1h', to = p.get('to') || 'now';
    const host = p.get('host') || '', pid = p.get('pid') || '';
    const diff = p.get('diff') === '1';
    const sel = { app, from, to, host, pid };
    const base = diff ? { app, ...baseRange(p), host: p.get('bhost') ?? host, pid: p.get('bpid') ?? pid } : null;

    const hostSel = h('select', { 'aria-label': 'host', onchange: () => update({ host: hostSel.value, zoom: null }) }, h('option', { value: '' }, 'all hosts'));
    // The pids the store saw for this app and range (GET /api/v1/labels), offered as a list; any can be typed.
    const pidList = h('datalist', { id: 'pid-values' });
    const pidBox = h('input', { type: 'text', inputmode: 'numeric', placeholder: 'pid', size: 7, value: pid, 'aria-label': 'pid',
        list: 'pid-values', onchange: () => update({ pid: pidBox.value.trim(), zoom: null }) });
    const dl = (fmt, ext) => h('a', { class: 'button', download: `${app}.${ext}`,
        href: '/api/v1/profile?' + new URLSearchParams(Object.entries({ app, from, to, host, pid, format: fmt }).filter(([, v]) => v)) }, ext === 'pb.gz' ? 'pprof' : 'folded');
    const chart = h('canvas', { class: 'timeline', 'aria-label': 'CPU used over time; drag to select a range' });
    const notes = h('div', { class: 'notes' });
    const search = h('input', { type: 'search', class: 'search', placeholder: 'Search functions (text or /regex/)', value: p.get('q') || '', 'aria-label': 'search functions',
        oninput: () => update({ q: search.value }, true) });
    const searchInfo = h('span', { class: 'search-info', 'aria-live': 'polite' });
    const crumbs = h('div', { class: 'crumbs' });
    const fgBox = h('div', { class: 'fg-box' });
    const side = h('div', { class: 'side' });
    const legend = h('div', { class: 'legend' });
    const diffBar = diff ? diffControls(p, base) : null;

    view.replaceChildren(h('section', { class: 'page' },
        h('nav', { class: 'breadcrumb' }, h('a', { href: hashOf([], new URLSearchParams({ from, to })) }, 'Applications'), ' / ', h('strong', { class: 'app-name' }, app)),
        h('div', { class: 'tabs', role: 'tablist' }, h('span', { class: 'tab on', role: 'tab', 'aria-selected': 'true' }, 'Profiling')),
        h('div', { class: 'toolbar' }, rangePicker(p, (f, t) => update({ from: f, to: t, zoom: null })), hostSel, pidBox, pidList,
            h('button', { type: 'button', class: diff ? 'on' : '', onclick: () => update({ diff: diff ? null : '1', bfrom: null, bto: null, bhost: null, bpid: null }) }, diff ? 'Diff: on' : 'Compare…'),
            h('span', { class: 'spacer' }), h('span', { class: 'muted' }, 'Download'), dl('pprof', 'pb.gz'), dl('collapsed', 'folded.txt')),
        h('div', { class: 'chart-box' }, chart),
        diffBar,
        notes,
        h('div', { class: 'fg-toolbar' }, search, searchInfo), crumbs,
        h('div', { class: 'split' }, h('div', { class: 'fg-col' }, fgBox, legend), side)));
    const fg = new FlameGraph(fgBox, {
        onClick: (i) => update({ zoom: i === 0 ? null : pathOf(st.tree, i).join(';') }),
    });
    // Until the tree is in, a change of search or zoom has nothing to apply: the
    // view is applied from the URL as it is then.
    const st = { key, fg, tree: null, base: null, diffRows: null, stats: null, apply: () => {}, destroy: () => fg.destroy() };
    page = st;
    cx.fg = fg;
    cx.mode = diff ? 'diff' : 'profile';

    // The data: the app's hosts, the timeline, the tree (and the baseline's).
    const now = Date.now() / 1000, f0 = toUnix(from, now), t0 = toUnix(to, now);
    api('/api/v1/applications', { from: diff ? String(Math.floor(Math.min(f0, toUnix(base.from, now)))) : from, to }).then((r) => {
        const a = (r.applications || []).find((x) => x.name === app);
        const hosts = new Set(a ? a.hosts : []);
        if (host) hosts.add(host);
        for (const x of [...hosts].sort()) hostSel.append(h('option', { value: x, selected: x === host || undefined }, x));
        if (diffBar) diffBar.setHosts([...hosts].sort());
    }).catch(() => {});
    api('/api/v1/labels', { app, from, to, host }).then((v) => {
        pidList.replaceChildren(...(v.pid || []).sort((a, b) => a - b).map((x) => h('option', { value: x })));
    }).catch(() => {});
    api('/api/v1/timeline', { app, from, to, host, pid, step: stepFor(f0, t0) + 's' })
        .then((tl) => { if (page === st) cpuChart(chart, tl, { onSelect: (a, b) => update({ from: String(a), to: String(b), zoom: null }) }); })
        .catch((e) => { chart.title = e.message; });
    fgBox.replaceChildren(h('p', { class: 'muted loading' }, 'Loading the profile…'));
    try {
        const trees = Promise.all([loadTree(sel), base ? loadTree(base) : null]);
        fg.warm(); // while the data is on its way
        const [tree, btree] = await trees;
        if (page !== st) return;
        fgBox.replaceChildren();
        fg.el.append(fg.canvas, fg.overlay, fg.tip);
        st.tree = tree;
        if (!tree.n || !tree.total[0]) {
            fgBox.replaceChildren(message('empty', `No profiles of ${app} in the ${rangeLabel(from, to)}${host ? ' on ' + host : ''}${pid ? ' for pid ' + pid : ''}.`,
                'Pick a longer range or clear the host and pid filters. If the application is running now, is the agent running and pointed at this server? Profiles arrive once a window (one minute by default) has closed.'));
            cx.ready = true;
            return;
        }
        // The graph first; the table, notes and legend once it is on screen.
        fg.setTree(tree);
        if (btree) {
            st.base = btree;
            fg.setDiff(alignDiff(tree, btree).base, btree.n ? btree.total[0] : 0);
        }
        const ui = { search, searchInfo, crumbs, side, app };
        st.apply = (q) => applyView(st, q, ui);
        st.tableKey = 'later';
        st.apply(p);
        performance.mark('cx-drawn');
        cx.firstDrawMs = performance.measure('cx-first-draw', 'cx-data', 'cx-drawn').duration;
        cx.stages = { parse: performance.measure('cx-parse', 'cx-data', 'cx-parsed').duration };
        cx.tree = tree;
        requestAnimationFrame(() => setTimeout(() => {
            if (page !== st) return;
            cx.firstFrameMs = performance.measure('cx-first-frame', 'cx-data').duration;
            st.stats = functionStats(tree);
            if (btree) {
                st.diffRows = diffTable(tree, btree);
                if (!btree.n || !btree.total[0]) notes.append(message('warn', 'The baseline has no profiles.', 'Every frame shows as grown; pick a baseline range or host that has data.'));
            }
            notes.append(...unnamedNotes(tree));
            legend.replaceChildren(...legendOf(tree, !!btree));
            st.tableKey = null;
            st.apply(parseHash().p);
            cx.tableMs = performance.measure('cx-table', 'cx-data').duration;
            cx.ready = true;
        }, 0));
    } catch (e) {
        if (page !== st) return;
        fgBox.replaceChildren(message('error', 'Could not load the profile', e.message));
        cx.ready = true;
    }
    st.apply = st.apply || (() => {});
}

function diffControls(p, base) {
    const bhost = h('select', { 'aria-label': 'baseline host', onchange: () => update({ bhost: bhost.value }) },
        h('option', { value: '' }, 'all hosts'));
    const f = h('input', { name: 'bfrom', value: base.from, size: 18, 'aria-label': 'baseline from' });
    const t = h('input', { name: 'bto', value: base.to, size: 18, 'aria-label': 'baseline to' });
    const form = h('form', { class: 'diff-bar', onsubmit: (e) => {
        e.preventDefault();
        const a = rangeValue(f.value), b = rangeValue(t.value);
        if (a === null || b === null) { f.setCustomValidity('now-3h, Unix seconds or a date'); form.reportValidity(); return; }
        update({ bfrom: a, bto: b || 'now' });
    } },
    h('strong', {}, 'Diff'), h('span', {}, 'this range against the baseline'), f, '–', t, bhost, h('button', { type: 'submit' }, 'Compare'),
    h('span', { class: 'legend-inline' }, h('i', { class: 'sw grew' }), 'grew', h('i', { class: 'sw shrank' }), 'shrank'),
    h('span', { class: 'muted' }, `(${rangeLabel(base.from, base.to)}; shares of each side's whole)`));
    form.setHosts = (hosts) => {
        const cur = p.get('bhost') ?? p.get('host') ?? '';
        for (const x of hosts) bhost.append(h('option', { value: x, selected: x === cur || undefined }, x));
    };
    return form;
}

function unnamedNotes(t) {
    const r = unnamedReport(t);
    if (r.share <= 0.1) return [];
    const bins = r.binaries.slice(0, 6).map((b) => `${b.binary} (${fmtPct(b.share)})`).join(', ');
    return [message('warn', `${fmtPct(r.share)} of the time is in frames without names, in ${bins}.`,
        'To name them: keep symbols in these binaries (strip --strip-unneeded at most, not --strip-all), install their debug packages (-dbgsym / -dbg), or have their debug files fetched by build id (codexray-server --debuginfod-upstream, or upload your own builds\' to /debuginfod/; the agent log\'s unnamed_binaries says whether each was looked for), and build with frame pointers (-fno-omit-frame-pointer -mno-omit-leaf-frame-pointer); for Java, run the JVM with -XX:+PreserveFramePointer.')];
}

function legendOf(t, diff) {
    if (diff) return [];
    classifyAll(t);
    const byGroup = new Map();
    for (let i = 1; i < t.n; i++) {
        const nm = t.name[i];
        if (t.kind[nm] === KIND.OTHER || t.kind[nm] === KIND.ROOT) continue;
        const kind = t.kind[nm], g = kind === KIND.KERNEL ? 'kernel' : t.group[nm] || '(no package)';
        // A Python package and a native group of the same name are two entries.
        const key = kind === KIND.PYTHON ? 'py\n' + g : g;
        const e = byGroup.get(key) || { g, self: 0, color: t.color[nm], kind };
        e.self += t.self[i];
        byGroup.set(key, e);
    }
    return [...byGroup.values()].sort((a, b) => b.self - a.self).slice(0, 8).map((e) =>
        h('span', { class: 'lg' }, h('i', { class: 'sw', style: `background:${e.color}` }),
            e.g + (e.kind === KIND.UNNAMED ? ' (no symbols)' : e.kind === KIND.PYTHON ? ' (Python)' : '')));
}

// What only needs a redraw: search, zoom, table sort and filter.
function applyView(st, p, ui) {
    const t = st.tree, fg = st.fg;
    const zoomPath = (p.get('zoom') || '').split(';').filter(Boolean);
    const z = resolvePath(t, zoomPath);
    fg.setZoom(z);
    const q = p.get('q') || '';
    if (ui.search.value !== q && document.activeElement !== ui.search) ui.search.value = q;
    const m = matchNames(t, q);
    fg.setMatch(m);
    if (m) {
        const s = matchShare(t, m);
        ui.searchInfo.textContent = s.funcs ? `${s.funcs} function${s.funcs > 1 ? 's' : ''} match, ${fmtPct(s.share)} of the time (${fmtTime(s.time)})` : 'no function matches';
    } else ui.searchInfo.textContent = '';
    cx.search = ui.searchInfo.textContent;
    // The way back: the path of the zoomed frame, each step clickable.
    const crumbs = [];
    if (z > 0) {
        crumbs.push(h('button', { type: 'button', class: 'reset', onclick: () => update({ zoom: null }) }, 'Reset zoom'));
        const path = pathOf(t, z);
        crumbs.push(h('a', { href: '#', onclick: (e) => { e.preventDefault(); update({ zoom: null }); } }, 'all'));
        path.forEach((nm, k) => {
            crumbs.push(' › ');
            crumbs.push(k === path.length - 1 ? h('strong', {}, nm)
                : h('a', { href: '#', onclick: (e) => { e.preventDefault(); update({ zoom: path.slice(0, k + 1).join(';') }); } }, nm));
        });
    } else crumbs.push(h('span', { class: 'muted' }, 'Click a frame to zoom into it; Esc or the browser\'s back button to come back.'));
    // Drawn before the crumbs change the page, so the draw forces no layout.
    const t0 = performance.now();
    fg.draw();
    cx.drawMs = performance.now() - t0;
    ui.crumbs.replaceChildren(...crumbs);
    cx.drawn = fg.lastDraw.drawn;
    cx.zoom = z;
    // The table shows the whole range: rebuilt only when its sort or filter change.
    if (st.tableKey === 'later') return;
    const tableKey = (p.get('sort') || '') + '\n' + (p.get('fn') || '');
    if (st.tableKey !== tableKey) {
        st.tableKey = tableKey;
        renderTable(st, p, ui);
    }
}

function renderTable(st, p, ui) {
    const t = st.tree, root = t.total[0] || 1;
    const filterVal = p.get('fn') || '';
    const fq = filterVal.toLowerCase();
    const filter = h('input', { type: 'search', placeholder: 'Filter functions', value: filterVal, 'aria-label': 'filter functions',
        oninput: () => { update({ fn: filter.value }, true); } });
    const find = (name) => update({ q: '/^' + name.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&') + '$/' });
    let table;
    if (st.diffRows) {
        const sort = p.get('sort') || 'change';
        const rows = st.diffRows.filter((r) => !fq || r.name.toLowerCase().includes(fq));
        if (sort === 'total') rows.sort((a, b) => Math.abs(b.delta) - Math.abs(a.delta));
        const th = (k, label) => h('th', { class: 'num sortable' + (sort === k ? ' on' : ''), onclick: () => update({ sort: k }, true) }, label);
        table = h('table', { class: 'funcs diff' },
            h('caption', {}, 'Biggest changes (self time, share of the whole)'),
            h('thead', {}, h('tr', {}, h('th', {}, 'Function'), h('th', { class: 'num' }, 'Before'), h('th', { class: 'num' }, 'After'), th('change', 'Self Δ'), th('total', 'Total Δ'))),
            h('tbody', {}, rows.slice(0, st.rows || 200).map((r) => h('tr', { class: 'row', title: r.file, onclick: () => find(r.name) },
                h('td', { class: 'fn' }, r.name), h('td', { class: 'num' }, fmtPct(r.bSelf)), h('td', { class: 'num' }, fmtPct(r.aSelf)),
                h('td', { class: 'num ' + (r.selfDelta > 0 ? 'up' : r.selfDelta < 0 ? 'down' : '') }, (r.selfDelta > 0 ? '+' : '') + fmtPct(r.selfDelta)),
                h('td', { class: 'num ' + (r.delta > 0 ? 'up' : r.delta < 0 ? 'down' : '') }, (r.delta > 0 ? '+' : '') + fmtPct(r.delta))))));
    } else {
        const sort = p.get('sort') === 'total' ? 'total' : p.get('sort') === 'name' ? 'name' : 'self';
        const { self, total } = st.stats;
        const idx = [];
        for (let i = 2; i < t.names.length; i++) {
            if (!total[i] && !self[i]) continue;
            if (fq && !String(t.names[i]).toLowerCase().includes(fq)) continue;
            idx.push(i);
        }
        if (sort === 'name') idx.sort((a, b) => String(t.names[a]).localeCompare(String(t.names[b])));
        else { const k = sort === 'self' ? self : total; idx.sort((a, b) => k[b] - k[a] || total[b] - total[a]); }
        const th = (k, label, cls) => h('th', { class: (cls || '') + ' sortable' + (sort === k ? ' on' : ''), onclick: () => update({ sort: k }, true), 'aria-sort': sort === k ? 'descending' : undefined }, label);
        table = h('table', { class: 'funcs' },
            h('caption', {}, `Functions (${idx.length}), click one to find it in the graph`),
            h('thead', {}, h('tr', {}, th('name', 'Function'), th('self', 'Self', 'num'), th('total', 'Total', 'num'))),
            h('tbody', {}, idx.slice(0, st.rows || 200).map((i) => h('tr', { class: 'row' + (t.kind[i] === KIND.KERNEL ? ' kernel' : t.kind[i] === KIND.PYTHON ? ' python' : ''), title: String(t.files[i] || ''), onclick: () => find(String(t.names[i])) },
                h('td', { class: 'fn' }, String(t.names[i])),
                h('td', { class: 'num', title: fmtTime(self[i]) }, fmtPct(self[i] / root)),
                h('td', { class: 'num', title: fmtTime(total[i]) }, fmtPct(total[i] / root))))));
    }
    const hadFocus = document.activeElement && document.activeElement.getAttribute('aria-label') === 'filter functions';
    const count = st.diffRows ? st.diffRows.length : t.names.length;
    const more = count > (st.rows || 200) ? h('button', { type: 'button', class: 'more', onclick: () => { st.rows = (st.rows || 200) * 4; renderTable(st, parseHash().p, ui); } }, 'Show more rows') : null;
    ui.side.replaceChildren(filter, h('div', { class: 'table-wrap' }, table, more));
    if (hadFocus) { filter.focus(); filter.setSelectionRange(filter.value.length, filter.value.length); }
}

// --- routing ---------------------------------------------------------------

function route() {
    const { parts, p } = parseHash();
    try {
        if (parts[0] === 'app' && parts[1]) { document.title = `${parts[1]} · CodeXray`; return renderApp(parts, p); }
        if (page) { page.destroy(); page = null; }
        document.title = 'Applications · CodeXray';
        return renderApps(p);
    } catch (e) {
        view.replaceChildren(message('error', 'Something went wrong', e.message));
    }
}

window.addEventListener('error', (e) => cx.errors.push(String(e.message)));
window.addEventListener('unhandledrejection', (e) => cx.errors.push(String(e.reason)));
window.addEventListener('hashchange', route);
window.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && page && parseHash().p.get('zoom') && document.activeElement.tagName !== 'INPUT') update({ zoom: null });
});
route();
