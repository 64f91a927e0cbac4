// Beside and around the flame graph: the function table (or the table of
// changes in a diff), the diff's baseline controls, the legend and the
// note on frames without names.
import { h, message } from './dom.js';
import { KIND, UNNAMED_NOTE_SHARE, classifyAll, fmtPct, fmtTime, unnamedReport } from './flamegraph.js';
import { rangeLabel, rangeValue } from './range.js';
import { parseHash, update } from './router.js';

// The diff's bar: the baseline's range and host.
export function diffControls(p, base) {
    const bhost = h('select', { 'aria-label': 'baseline host', onchange: () => update({ bhost: bhost.value }) },
        h('option', { value: '' }, 'all hosts'));
    const f = h('input', { name: 'bfrom', value: base.from, size: 18, 'aria-label': 'baseline from' });
    const t = h('input', { name: 'bto', value: base.to, size: 18, 'aria-label': 'baseline to' });
    const onsubmit = (e) => {
        e.preventDefault();
        const a = rangeValue(f.value), b = rangeValue(t.value);
        if (a === null || b === null) { f.setCustomValidity('now-3h, Unix seconds or a date'); form.reportValidity(); return; }
        update({ bfrom: a, bto: b || 'now' });
    };
    const form = h('form', { class: 'diff-bar', onsubmit },
        h('strong', {}, 'Diff'), h('span', {}, 'this range against the baseline'), f, '–', t, bhost,
        h('button', { type: 'submit' }, 'Compare'),
        h('span', { class: 'legend-inline' }, h('i', { class: 'sw grew' }), 'grew', h('i', { class: 'sw shrank' }), 'shrank'),
        h('span', { class: 'muted' }, `(${rangeLabel(base.from, base.to)}; shares of each side's whole)`));
    form.setHosts = (hosts) => {
        const cur = p.get('bhost') ?? p.get('host') ?? '';
        for (const x of hosts) bhost.append(h('option', { value: x, selected: x === cur || undefined }, x));
    };
    return form;
}

// A warning when more than a tenth of the self time is in frames without
// names (what the graph and the table show of them, not every stack that
// passes through one).
export function unnamedNotes(t) {
    const r = unnamedReport(t);
    if (r.share <= UNNAMED_NOTE_SHARE) return [];
    const bins = r.binaries.slice(0, 6).map((b) => `${b.binary} (${fmtPct(b.share)})`).join(', ');
    return [message('warn', `${fmtPct(r.share)} of the self time is in frames without names, in ${bins}.`,
        'To name them: keep symbols in these binaries (strip --strip-unneeded at most, not --strip-all), install their ' +
        'debug packages (-dbgsym / -dbg), or have their debug files fetched by build id (codexray-server ' +
        '--debuginfod-upstream, or upload your own builds\' to /debuginfod/; the agent log\'s unnamed_binaries says ' +
        'whether each was looked for), and build with frame pointers (-fno-omit-frame-pointer ' +
        '-mno-omit-leaf-frame-pointer); for Java, run the JVM with -XX:+PreserveFramePointer.')];
}

// The colours' legend: the eight groups with the most self time.
export function legendOf(t, diff) {
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

const escapeRe = (s) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

// The table of the page st (st.tree, st.stats or st.diffRows) into
// st.ui.side, sorted and filtered as p says.
export function renderTable(st, p) {
    const t = st.tree, ui = st.ui;
    const filterVal = p.get('fn') || '';
    const fq = filterVal.toLowerCase();
    const filter = h('input', { type: 'search', placeholder: 'Filter functions', value: filterVal,
        'aria-label': 'filter functions', oninput: () => { update({ fn: filter.value }, true); } });
    const find = (name) => update({ q: '/^' + escapeRe(name) + '$/' });
    const table = st.diffRows ? diffRowsTable(st, p, fq, find) : functionsTable(st, p, fq, find);
    const hadFocus = document.activeElement && document.activeElement.getAttribute('aria-label') === 'filter functions';
    const count = st.diffRows ? st.diffRows.length : t.names.length;
    const moreRows = () => { st.rows = (st.rows || 200) * 4; renderTable(st, parseHash().p); };
    const more = count > (st.rows || 200)
        ? h('button', { type: 'button', class: 'more', onclick: moreRows }, 'Show more rows') : null;
    ui.side.replaceChildren(filter, h('div', { class: 'table-wrap' }, table, more));
    if (hadFocus) { filter.focus(); filter.setSelectionRange(filter.value.length, filter.value.length); }
}

const signed = (x) => (x > 0 ? '+' : '') + fmtPct(x);
const upDown = (x) => (x > 0 ? 'up' : x < 0 ? 'down' : '');

function diffRowsTable(st, p, fq, find) {
    const sort = p.get('sort') || 'change';
    const rows = st.diffRows.filter((r) => !fq || r.name.toLowerCase().includes(fq));
    if (sort === 'total') rows.sort((a, b) => Math.abs(b.delta) - Math.abs(a.delta));
    const th = (k, label) => h('th',
        { class: 'num sortable' + (sort === k ? ' on' : ''), onclick: () => update({ sort: k }, true) }, label);
    const num = (s, cls) => h('td', { class: 'num' + (cls ? ' ' + cls : '') }, s);
    return h('table', { class: 'funcs diff' },
        h('caption', {}, 'Biggest changes (self time, share of the whole)'),
        h('thead', {}, h('tr', {}, h('th', {}, 'Function'), h('th', { class: 'num' }, 'Before'),
            h('th', { class: 'num' }, 'After'), th('change', 'Self Δ'), th('total', 'Total Δ'))),
        h('tbody', {}, rows.slice(0, st.rows || 200).map((r) =>
            h('tr', { class: 'row', title: r.file, onclick: () => find(r.name) },
                h('td', { class: 'fn' }, r.name), num(fmtPct(r.bSelf)), num(fmtPct(r.aSelf)),
                num(signed(r.selfDelta), upDown(r.selfDelta)), num(signed(r.delta), upDown(r.delta))))));
}

function functionsTable(st, p, fq, find) {
    const t = st.tree, root = t.total[0] || 1;
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
    const th = (k, label, cls) => h('th', { class: (cls || '') + ' sortable' + (sort === k ? ' on' : ''),
        onclick: () => update({ sort: k }, true), 'aria-sort': sort === k ? 'descending' : undefined }, label);
    const rowClass = (i) => 'row' + (t.kind[i] === KIND.KERNEL ? ' kernel' : t.kind[i] === KIND.PYTHON ? ' python' : '');
    return h('table', { class: 'funcs' },
        h('caption', {}, `Functions (${idx.length}), click one to find it in the graph, ↕ for its callers and callees`),
        h('thead', {}, h('tr', {}, h('th', { class: 'sw' }), th('name', 'Function'), th('self', 'Self', 'num'),
            th('total', 'Total', 'num'))),
        h('tbody', {}, idx.slice(0, st.rows || 200).map((i) =>
            h('tr', { class: rowClass(i), title: String(t.files[i] || ''), onclick: () => find(String(t.names[i])) },
                h('td', { class: 'sw' }, h('button', { type: 'button', class: 'sw-open', 'aria-label': 'sandwich',
                    title: 'Callers and callees of this function, merged (sandwich)',
                    onclick: (e) => { e.stopPropagation(); update({ sw: String(t.names[i]) }); } }, '↕')),
                h('td', { class: 'fn' }, String(t.names[i])),
                h('td', { class: 'num', title: fmtTime(self[i]) }, fmtPct(self[i] / root)),
                h('td', { class: 'num', title: fmtTime(total[i]) }, fmtPct(total[i] / root))))));
}
