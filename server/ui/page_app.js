// An application's Profiling tab: the timeline, the flame graph (or the
// diff of two ranges) and the function table, of CPU time, off-CPU time or
// wall time (type=, value_type.js; cpu when absent).
//   #/app/NAME?from=&to=&type=off_cpu|wall&host=&pid=&q=SEARCH&zoom=a;b;c&collapse=1&sort=self|total&fn=FILTER
//              &diff=1&bfrom=&bto=&bhost=&bpid=&interp=shown&sw=FUNCTION
//              &by=LABEL&pod=&container=&namespace=&container_id=&systemd_unit=
// by shows the CPU broken down by a label (breakdown_view.js); a click on
// a value sets its filter (host=, pid= or the identity label's).
// sw opens the sandwich of a function (sandwich.js: its callers and
// callees, merged over every place it is called from), computed here from
// the tree the page has. The function of the sandwich, else the one the
// search finds alone, also gets its timeline under the application's
// (fn_timeline.js, one request). A change of q, zoom, collapse, sort, fn or sw only
// redraws (applyView); any
// other parameter loads the page anew. interp=shown asks the server for the
// interpreters' frames without a name (hidden by default: their time is the
// Python functions' self time).
import { api } from './api.js';
import { cx, h, message, view } from './dom.js';
import {
    FlameGraph, alignDiff, collapseRecursion, diffTable, fmtPct, fmtTime, functionStats, matchNames, matchShare,
    hasDirectRecursion, parseTree, pathOf, resolvePath, sandwich,
} from './flamegraph.js';
import { focusTarget, graftSubtree, hasFolded, mergeTrees } from './graft.js';
import { diffControls, legendOf, renderTable, unnamedNotes } from './table.js';
import { IDENTITY_FILTERS } from './breakdown.js';
import { breakdownPanel } from './breakdown_view.js';
import { chosenFunction } from './fn_timeline.js';
import { fnTimelinePanel } from './fn_timeline_view.js';
import { rangeLabel, stepFor, toUnix } from './range.js';
import { hashOf, parseHash, update } from './router.js';
import { nounOf, typeOf, typeParam } from './value_type.js';
import { cpuChart, rangePicker, typePicker } from './widgets.js';

const MAX_NODES = 100000;
const cache = new Map(); // query string -> parsed tree (the last few)

// A relative time (now-1h, now) as Unix seconds at now, so that the
// subtrees fetched later (focus=, graft.js) are of the very same range.
function absTime(s, now) {
    const v = toUnix(s, now);
    return Number.isFinite(v) ? v.toFixed(3) : s;
}

async function loadTree(params) {
    const key = JSON.stringify(params);
    if (cache.has(key)) return cache.get(key);
    const now = Date.now() / 1000;
    const range = { from: absTime(params.from, now), to: absTime(params.to, now) };
    const text = await api('/api/v1/profile', { ...params, ...range, format: 'flamegraph', max_nodes: MAX_NODES }, true);
    performance.mark('cx-data');
    const tree = parseTree(JSON.parse(text));
    performance.mark('cx-parsed');
    tree.query = { ...params, ...range };
    tree.cacheKey = key;
    cache.set(key, tree);
    if (cache.size > 4) cache.delete(cache.keys().next().value);
    return tree;
}

let page = null; // the current Profiling tab: kept while only q/zoom/collapse/sort/fn change

// Whether the Profiling tab is open and zoomed (Esc then zooms out).
export function appZoomed() { return !!page && !!parseHash().p.get('zoom'); }

// Leaving the tab for another page.
export function leaveApp() {
    if (page) page.destroy();
    page = null;
}

function dataKey(parts, p) {
    const keys = ['from', 'to', 'type', 'host', 'pid', 'diff', 'bfrom', 'bto', 'bhost', 'bpid', 'interp', 'by', ...IDENTITY_FILTERS];
    return JSON.stringify([parts[1], ...keys.map((k) => p.get(k) || '')]);
}

function baseRange(p) {
    const now = Date.now() / 1000;
    const f = p.get('from') || 'now-1h', t = p.get('to') || 'now';
    if (p.get('bfrom')) return { from: p.get('bfrom'), to: p.get('bto') || 'now' };
    // The period just before, as long as this one.
    const a = toUnix(f, now), b = toUnix(t, now);
    return { from: String(Math.floor(2 * a - b)), to: String(Math.ceil(a)) };
}

// What the URL asks to load: the selection, and the baseline's in a diff.
function queryOf(app, p) {
    const from = p.get('from') || 'now-1h', to = p.get('to') || 'now';
    const host = p.get('host') || '', pid = p.get('pid') || '';
    const diff = p.get('diff') === '1';
    const interp = p.get('interp') === 'shown' ? 'shown' : ''; // '': the server's default, hidden
    const type = typeOf(p), tp = typeParam(type); // tp '': cpu, the server's default
    const ids = {}; // the identity labels filtered on
    for (const k of IDENTITY_FILTERS) if (p.get(k)) ids[k] = p.get(k);
    const sel = { app, from, to, type: tp, host, pid, interp, ...ids };
    const base = diff
        ? { app, ...baseRange(p), type: tp, host: p.get('bhost') ?? host, pid: p.get('bpid') ?? pid, interp, ...ids }
        : null;
    return { app, from, to, type, host, pid, diff, interp, ids, by: p.get('by') || '', sel, base };
}

export async function renderApp(parts, p) {
    const key = dataKey(parts, p);
    if (page && page.key === key) { page.apply(p); return; }
    if (page) page.destroy();
    cx.ready = false;
    cx.noOffCpu = false;
    const q = queryOf(parts[1], p), ui = buildPage(q, p);
    const fg = new FlameGraph(ui.fgBox, {
        onClick: (i) => update({ zoom: i === 0 ? null : pathOf(fg.tree, i).join(';') }),
    });
    // Until the tree is in, a change of search or zoom has nothing to apply: the
    // view is applied from the URL as it is then.
    const st = { key, q, fg, ui, tree: null, base: null, collapsed: null, diffRows: null, stats: null,
        apply: () => {}, destroy: () => { fg.destroy(); closeSandwich(st); } };
    page = st;
    cx.fg = fg;
    cx.mode = q.diff ? 'diff' : 'profile';
    cx.type = q.type;
    loadAround(st, q);
    await loadGraph(st, q, p);
}

// The page's elements, in the view.
function buildPage(q, p) {
    const ui = { app: q.app };
    ui.chart = h('canvas', { class: 'timeline', 'aria-label': `${nounOf(q.type)} over time; drag to select a range` });
    ui.fnTl = h('div', { class: 'fn-tl', hidden: true });
    ui.breakdown = h('div', { class: 'bd-box' });
    ui.bdSel = h('span', { class: 'bd-sel' });
    ui.notes = h('div', { class: 'notes' });
    ui.search = h('input', { type: 'search', class: 'search', placeholder: 'Search functions (text or /regex/)',
        value: p.get('q') || '', 'aria-label': 'search functions', oninput: () => update({ q: ui.search.value }, true) });
    ui.searchInfo = h('span', { class: 'search-info', 'aria-live': 'polite' });
    ui.collapse = h('button', { type: 'button', class: 'collapse', 'aria-pressed': 'false',
        title: 'Show a function that calls itself directly once, its time kept',
        onclick: () => update({ collapse: parseHash().p.get('collapse') === '1' ? null : '1' }) }, 'Collapse recursion');
    const shown = q.interp === 'shown';
    ui.interp = h('button', { type: 'button', class: 'interp' + (shown ? ' on' : ''), 'aria-pressed': String(shown),
        title: 'Frames of an interpreter (python3) that have no name: hidden, their time is the Python function\'s ' +
            'that runs them; shown, as the agent recorded them',
        onclick: () => update({ interp: shown ? null : 'shown', zoom: null }) },
    `Interpreter frames: ${shown ? 'shown' : 'hidden'}`);
    cx.interp = shown ? 'shown' : 'hidden';
    ui.crumbs = h('div', { class: 'crumbs' });
    ui.fgBox = h('div', { class: 'fg-box' });
    ui.sandwich = h('section', { class: 'sandwich', hidden: true, 'aria-label': 'sandwich' });
    ui.side = h('div', { class: 'side' });
    ui.legend = h('div', { class: 'legend' });
    ui.diffBar = q.diff ? diffControls(p, q.base) : null;
    const tab = h('span', { class: 'tab on', role: 'tab', 'aria-selected': 'true' }, 'Profiling');
    view.replaceChildren(h('section', { class: 'page' },
        h('nav', { class: 'breadcrumb' },
            h('a', { href: hashOf([], new URLSearchParams({ from: q.from, to: q.to })) }, 'Applications'), ' / ',
            h('strong', { class: 'app-name' }, q.app)),
        h('div', { class: 'tabs', role: 'tablist' }, tab),
        toolbar(q, p, ui),
        h('div', { class: 'chart-box' }, ui.chart, ui.fnTl),
        ui.breakdown,
        ui.diffBar,
        ui.notes,
        h('div', { class: 'fg-toolbar' }, ui.search, ui.searchInfo, h('span', { class: 'spacer' }), ui.interp,
            ui.collapse), ui.crumbs, ui.sandwich,
        h('div', { class: 'split' }, h('div', { class: 'fg-col' }, ui.fgBox, ui.legend), ui.side)));
    return ui;
}

// The range, host and pid, the diff's switch, the downloads.
function toolbar(q, p, ui) {
    const { app, from, to, host, pid, diff, interp } = q;
    ui.hostSel = h('select', { 'aria-label': 'host', onchange: () => update({ host: ui.hostSel.value, zoom: null }) },
        h('option', { value: '' }, 'all hosts'));
    // The pids the store saw for this app and range (GET /api/v1/labels), offered as a list; any can be typed.
    ui.pidList = h('datalist', { id: 'pid-values' });
    const pidBox = h('input', { type: 'text', inputmode: 'numeric', placeholder: 'pid', size: 7, value: pid,
        'aria-label': 'pid', list: 'pid-values', onchange: () => update({ pid: pidBox.value.trim(), zoom: null }) });
    const dl = (fmt, ext) => {
        const params = Object.entries({ app, from, to, type: q.sel.type, host, pid, interp, ...q.ids, format: fmt })
            .filter(([, v]) => v);
        return h('a', { class: 'button', download: `${app}.${ext}`, href: '/api/v1/profile?' + new URLSearchParams(params) },
            ext === 'pb.gz' ? 'pprof' : 'folded');
    };
    const compare = h('button', { type: 'button', class: diff ? 'on' : '',
        onclick: () => update({ diff: diff ? null : '1', bfrom: null, bto: null, bhost: null, bpid: null }) },
    diff ? 'Diff: on' : 'Compare…');
    // The identity filters set (from the breakdown), each removable.
    const chips = Object.entries(q.ids).map(([k, v]) => h('button', { type: 'button', class: 'chip',
        title: `Remove the filter ${k}=${v}`, onclick: () => update({ [k]: null, zoom: null }) }, `${k}=${v} ×`));
    // Another type is another tree: its zoom and sandwich may not be in it.
    const types = typePicker(q.type, (t) => update({ type: typeParam(t), zoom: null, sw: null }));
    return h('div', { class: 'toolbar' },
        rangePicker(p, (f, t) => update({ from: f, to: t, zoom: null })), types, ui.hostSel, pidBox, ui.pidList,
        ...chips,
        ui.bdSel, compare,
        h('span', { class: 'spacer' }), h('span', { class: 'muted' }, 'Download'),
        dl('pprof', 'pb.gz'), dl('collapsed', 'folded.txt'));
}

// Around the graph: the app's hosts, its pids, the timeline.
function loadAround(st, q) {
    const { app, from, to, host, pid, diff, base } = q, ui = st.ui;
    const now = Date.now() / 1000, f0 = toUnix(from, now), t0 = toUnix(to, now);
    const appsFrom = diff ? String(Math.floor(Math.min(f0, toUnix(base.from, now)))) : from;
    api('/api/v1/applications', { from: appsFrom, to }).then((r) => {
        const a = (r.applications || []).find((x) => x.name === app);
        const hosts = new Set(a ? a.hosts : []);
        if (host) hosts.add(host);
        for (const x of [...hosts].sort()) {
            ui.hostSel.append(h('option', { value: x, selected: x === host || undefined }, x));
        }
        if (ui.diffBar) ui.diffBar.setHosts([...hosts].sort());
    }).catch(() => {});
    api('/api/v1/labels', { app, from, to, host, ...q.ids }).then((v) => {
        ui.pidList.replaceChildren(...(v.pid || []).sort((a, b) => a - b).map((x) => h('option', { value: x })));
    }).catch(() => {});
    const onSelect = (a, b) => update({ from: String(a), to: String(b), zoom: null });
    const step = stepFor(f0, t0) + 's';
    const type = q.sel.type;
    api('/api/v1/timeline', { app, from, to, type, host, pid, ...q.ids, step })
        .then((tl) => { if (page === st) cpuChart(ui.chart, tl, { onSelect }); })
        .catch((e) => { ui.chart.title = e.message; });
    const load = (by) => api('/api/v1/timeline', { app, from, to, type, host, pid, ...q.ids, step, group_by: by });
    const pick = (by, v) => update({ [by]: v, by: null, zoom: null, sw: null });
    const panel = breakdownPanel(q.by, load, pick, (by) => update({ by }), q.type);
    ui.breakdown.replaceChildren(panel);
    ui.bdSel.replaceChildren(panel.select);
    cx.breakdown = panel.state;
}

// The tree (and the baseline's): the graph drawn first; the table, notes
// and legend once it is on screen.
async function loadGraph(st, q, p) {
    const { fg, ui } = st, { app, from, to, host, pid } = q;
    ui.fgBox.replaceChildren(h('p', { class: 'muted loading' }, 'Loading the profile…'));
    try {
        const trees = Promise.all([loadTree(q.sel), q.base ? loadTree(q.base) : null]);
        fg.warm(); // while the data is on its way
        const [tree, btree] = await trees;
        if (page !== st) return;
        ui.fgBox.replaceChildren();
        fg.attach();
        st.tree = tree;
        if ((!tree.n || !tree.total[0]) && tree.profiles && q.type === 'off_cpu') {
            // Profiles, but none with this time: CPU-only agents.
            ui.fgBox.replaceChildren(message('empty',
                `No off-CPU data of ${app} in the ${rangeLabel(from, to)}` +
                `${host ? ' on ' + host : ''}${pid ? ' for pid ' + pid : ''}: ` +
                `${tree.profiles > 1 ? `its ${tree.profiles} profiles hold` : 'its profile holds'} CPU time only.`,
                'Off-CPU time (threads blocked on locks, I/O, sleeps) is recorded by the agent by default; ' +
                'not by agents started with --no-off-cpu (config off-cpu = false) or older than it. ' +
                'The CPU view has this range\'s profiles.'));
            cx.ready = true;
            cx.noOffCpu = true;
            return;
        }
        if (!tree.n || !tree.total[0]) {
            ui.fgBox.replaceChildren(message('empty',
                `No profiles of ${app} in the ${rangeLabel(from, to)}` +
                `${host ? ' on ' + host : ''}${pid ? ' for pid ' + pid : ''}.`,
                'Pick a longer range or clear the host and pid filters. If the application is running now, is the agent ' +
                'running and pointed at this server? Profiles arrive once a window (one minute by default) has closed.'));
            cx.ready = true;
            return;
        }
        st.base = btree;
        st.apply = (v) => applyView(st, v);
        st.tableKey = 'later';
        st.apply(p);
        performance.mark('cx-drawn');
        cx.firstDrawMs = performance.measure('cx-first-draw', 'cx-data', 'cx-drawn').duration;
        cx.stages = { parse: performance.measure('cx-parse', 'cx-data', 'cx-parsed').duration };
        cx.tree = tree;
        requestAnimationFrame(() => setTimeout(() => { if (page === st) afterFirstFrame(st, tree, btree); }, 0));
    } catch (e) {
        if (page !== st) return;
        ui.fgBox.replaceChildren(message('error', 'Could not load the profile', e.message));
        cx.ready = true;
    }
}

function afterFirstFrame(st, tree, btree) {
    const ui = st.ui;
    cx.firstFrameMs = performance.measure('cx-first-frame', 'cx-data').duration;
    st.stats = functionStats(st.tree);
    if (btree) {
        st.diffRows = diffTable(tree, btree);
        if (!btree.n || !btree.total[0]) {
            ui.notes.append(message('warn', 'The baseline has no profiles.',
                'Every frame shows as grown; pick a baseline range or host that has data.'));
        }
    }
    if (cx.type === 'wall' && !tree.offCpu) {
        ui.notes.append(message('warn', 'No off-CPU data in this range: wall time here is CPU time alone.',
            'Off-CPU time is recorded by the agent by default; not by agents started with --no-off-cpu ' +
            '(config off-cpu = false) or older than it.'));
        cx.noOffCpu = true;
    }
    ui.notes.append(...unnamedNotes(tree));
    ui.legend.replaceChildren(...legendOf(tree, !!btree));
    // Nothing to collapse: said on the button, which stays to turn collapse=1 off.
    if (!hasDirectRecursion(tree) && !(btree && hasDirectRecursion(btree)) && !cx.collapse) {
        ui.collapse.disabled = true;
        ui.collapse.title = 'No function calls itself directly in this range';
    }
    st.tableKey = null;
    st.apply(parseHash().p);
    cx.tableMs = performance.measure('cx-table', 'cx-data').duration;
    cx.ready = true;
}

// The tree drawn: as loaded, or with direct recursion collapsed (made once
// per page, the baseline's too in a diff).
function shownTrees(st, collapse) {
    if (!collapse) return { tree: st.tree, base: st.base };
    if (!st.collapsed) {
        st.collapsed = { tree: collapseRecursion(st.tree), base: st.base ? collapseRecursion(st.base) : null };
    }
    return st.collapsed;
}

// What only needs a redraw: search, zoom, collapse, table sort and filter.
function applyView(st, p) {
    const fg = st.fg, ui = st.ui;
    const collapse = p.get('collapse') === '1';
    const { tree: t, base } = shownTrees(st, collapse);
    if (fg.tree !== t) {
        fg.setTree(t);
        if (base) fg.setDiff(alignDiff(t, base).base, base.n ? base.total[0] : 0);
    }
    if (collapse) ui.collapse.disabled = false;
    ui.collapse.classList.toggle('on', collapse);
    ui.collapse.setAttribute('aria-pressed', String(collapse));
    cx.collapse = collapse;
    let zoomPath = (p.get('zoom') || '').split(';').filter(Boolean);
    // A path from the full graph, collapsed: gc;gc;gc;f is gc;f there.
    if (collapse) zoomPath = zoomPath.filter((nm, k) => k === 0 || nm !== zoomPath[k - 1]);
    const z = resolvePath(t, zoomPath);
    // Part of the zoom folded by the server: its stacks fetched whole.
    if (!base && !collapse) fetchFolded(st, t, z, zoomPath);
    fg.setZoom(z);
    const match = applySearch(fg, t, p.get('q') || '', ui);
    // Searched where the server folded frames: the matching ones fetched.
    if (!base && !collapse) fetchSearch(st, p.get('q') || '');
    const crumbs = crumbsOf(t, z);
    // Drawn before the crumbs change the page, so the draw forces no layout.
    const t0 = performance.now();
    fg.draw();
    cx.drawMs = performance.now() - t0;
    ui.crumbs.replaceChildren(...crumbs);
    applySandwich(st, t, p.get('sw') || '');
    applyFnTimeline(st, chosenFunction(p.get('sw') || '', t.names, match));
    cx.drawn = fg.lastDraw.drawn;
    cx.zoom = z;
    // The table shows the whole range: rebuilt only when its sort or filter change.
    if (st.tableKey === 'later') return;
    const tableKey = (p.get('sort') || '') + '\n' + (p.get('fn') || '');
    if (st.tableKey !== tableKey) {
        st.tableKey = tableKey;
        renderTable(st, p);
    }
}

// Zoomed where the server folded frames into "other" (max_nodes): the
// stacks under the zoomed frame fetched (focus=) and put in place of its
// trimmed subtree (graft.js), then the view applied again; once a frame.
// A diff and a collapsed view show what the first answer had.
function fetchFolded(st, t, z, zoomPath) {
    const f = focusTarget(t, z, zoomPath);
    if (f < 0 || !t.query) return;
    const path = pathOf(t, f), key = path.join(';');
    st.focused = st.focused || new Set();
    if (st.focused.has(key)) return;
    st.focused.add(key);
    cx.focusing = (cx.focusing || 0) + 1;
    api('/api/v1/profile', { ...t.query, format: 'flamegraph', max_nodes: MAX_NODES, focus: key }, true)
        .then((text) => {
            if (page !== st || st.tree !== t) return;
            const g = graftSubtree(t, f, path, parseTree(JSON.parse(text)));
            if (!g) {
                st.ui.notes.append(message('warn', `The frames under ${path[path.length - 1]} changed since the page was loaded.`,
                    'Reload the page to see them: the range has new profiles.'));
                return;
            }
            cx.grafts = (cx.grafts || 0) + 1;
            adoptTree(st, t, g);
        })
        .catch((e) => { st.ui.notes.append(message('error', 'Could not load the folded frames', e.message)); })
        .finally(() => { cx.focusing--; });
}

// g, the page's tree t with frames fetched put in place, shown from now
// on (and kept in the cache for the same query), the view applied again.
function adoptTree(st, t, g) {
    g.query = t.query;
    g.cacheKey = t.cacheKey;
    cache.set(t.cacheKey, g);
    st.tree = g;
    cx.tree = g;
    st.collapsed = null;
    if (st.stats) { st.stats = functionStats(g); if (st.tableKey !== 'later') st.tableKey = null; }
    st.apply(parseHash().p);
}

// Searched in a tree the server trimmed (max_nodes): the paths down to
// the frames the search matches fetched (search=, every total exact) and
// merged in (graft.js), so that a folded frame is found, drawn and
// counted; once a text a page, after the typing rests. A diff and a
// collapsed view search what the first answer had.
function fetchSearch(st, q) {
    const t = st.tree;
    if (!q || !t.query || !hasFolded(t) || (st.searched && st.searched.has(q))) return;
    clearTimeout(st.searchTimer);
    st.searchTimer = setTimeout(() => {
        if (page !== st || (parseHash().p.get('q') || '') !== q) return;
        st.searched = st.searched || new Set();
        if (st.searched.has(q)) return;
        st.searched.add(q);
        cx.searching = (cx.searching || 0) + 1;
        api('/api/v1/profile', { ...t.query, format: 'flamegraph', search: q }, true)
            .then((text) => {
                if (page !== st) return;
                const js = JSON.parse(text), cur = st.tree;
                const g = mergeTrees(cur, parseTree(js));
                if (!g) {
                    st.ui.notes.append(message('warn', `The search for ${q} found frames that changed since the page was loaded.`,
                        'Reload the page to see them: the range has new profiles.'));
                    return;
                }
                g.searched = { ...cur.searched, [q]: { matched: js.matched, paths: js.paths, kept: js.kept, capped: js.capped } };
                cx.searchGrafts = (cx.searchGrafts || 0) + 1;
                adoptTree(st, cur, g);
            })
            .catch((e) => { st.ui.notes.append(message('error', `Could not search the folded frames for ${q}`, e.message)); })
            .finally(() => { cx.searching--; });
    }, 250);
}

// The sandwich of the function named nm in the tree shown (t), or none:
// made again only when the function or the tree change.
function applySandwich(st, t, nm) {
    const ui = st.ui;
    if (!nm) { closeSandwich(st); ui.sandwich.hidden = true; cx.sandwich = null; return; }
    if (st.sw && st.sw.nm === nm && st.sw.t === t) return;
    closeSandwich(st);
    const k = t.names.indexOf(nm);
    const t0 = performance.now();
    const s = sandwich(t, k);
    const ms = performance.now() - t0;
    const close = h('button', { type: 'button', class: 'reset', onclick: () => update({ sw: null }) }, 'Close');
    const root = t.total[0] || 1;
    const head = h('div', { class: 'sw-head' }, h('strong', {}, 'Sandwich: '), h('span', { class: 'sw-name' }, nm),
        s.calls ? h('span', { class: 'muted' },
            ` total ${fmtPct(s.total / root)} (${fmtTime(s.total)}), self ${fmtPct(s.self / root)} ` +
            `(${fmtTime(s.self)}), called from ${s.calls} place${s.calls > 1 ? 's' : ''}; ` +
            'click a frame for its own sandwich') : null,
        h('span', { class: 'spacer' }), close);
    if (!s.calls) {
        ui.sandwich.replaceChildren(head, message('empty', `${nm} has no frame in this profile.`,
            'Another range, host, pid or setting of the interpreter frames may not have it.'));
    } else {
        const boxUp = h('div', { class: 'fg-box sw-callers' }), boxDown = h('div', { class: 'fg-box sw-callees' });
        const open = (g) => (i) => { const name = String(g.tree.names[g.tree.name[i]]); if (i > 0) update({ sw: name }); };
        const up = new FlameGraph(boxUp, { onClick: (i) => open(up)(i) });
        const down = new FlameGraph(boxDown, { onClick: (i) => open(down)(i) });
        ui.sandwich.replaceChildren(head,
            h('h3', {}, `Callers of ${nm} (it on top, who calls it below, down to the first frame)`), boxUp,
            h('h3', {}, `Callees of ${nm} (what it calls, merged over every call)`), boxDown);
        up.setTree(s.callers); down.setTree(s.callees);
        up.draw(); down.draw();
        st.swGraphs = [up, down];
    }
    ui.sandwich.hidden = false;
    st.sw = { nm, t };
    cx.sandwich = { name: nm, calls: s.calls, total: s.total, self: s.self, callers: s.callers, callees: s.callees, ms };
}

// The timeline of function nm under the application's, or none: fetched
// again only when the function changes (the range reloads the page).
function applyFnTimeline(st, nm) {
    const ui = st.ui;
    if ((st.fnTl ? st.fnTl.name : '') === nm) return;
    st.fnTl = null;
    ui.fnTl.hidden = true;
    ui.fnTl.replaceChildren();
    if (nm) {
        const now = Date.now() / 1000, step = stepFor(toUnix(st.q.from, now), toUnix(st.q.to, now)) + 's';
        st.fnTl = fnTimelinePanel(ui.fnTl, nm, () => api('/api/v1/timeline', { ...st.q.sel, step, fn: nm }));
    }
    cx.fnTimeline = st.fnTl;
}

function closeSandwich(st) {
    for (const g of st.swGraphs || []) g.destroy();
    st.swGraphs = null;
    st.sw = null;
}

function applySearch(fg, t, q, ui) {
    if (ui.search.value !== q && document.activeElement !== ui.search) ui.search.value = q;
    const m = matchNames(t, q);
    fg.setMatch(m);
    if (m) {
        const s = matchShare(t, m);
        ui.searchInfo.textContent = s.funcs
            ? `${s.funcs} function${s.funcs > 1 ? 's' : ''} match, ${fmtPct(s.share)} of the time (${fmtTime(s.time)})`
            : 'no function matches';
        // More matching paths than the server sends: their time, not all drawn.
        const srv = t.searched && t.searched[q];
        if (srv && srv.capped) {
            ui.searchInfo.append(` (in all: ${fmtPct(srv.matched / t.total[0])}, ${fmtTime(srv.matched)}; ` +
                `the ${srv.kept} largest of ${srv.paths} paths drawn)`);
        }
        // One function found: its sandwich a click away.
        const one = s.funcs === 1 ? m.indexOf(1) : -1;
        if (one > 1 && m.indexOf(1, one + 1) < 0) {
            ui.searchInfo.append(' ', h('button', { type: 'button', class: 'reset sw-open',
                onclick: () => update({ sw: String(t.names[one]) }) }, 'Sandwich'));
        }
    } else ui.searchInfo.textContent = '';
    cx.search = ui.searchInfo.firstChild ? ui.searchInfo.firstChild.textContent : '';
    return m;
}

// The way back: the path of the zoomed frame z, each step clickable.
function crumbsOf(t, z) {
    const crumbs = [];
    if (z <= 0) {
        return [h('span', { class: 'muted' }, 'Click a frame to zoom into it; Esc or the browser\'s back button to come back.')];
    }
    crumbs.push(h('button', { type: 'button', class: 'reset', onclick: () => update({ zoom: null }) }, 'Reset zoom'));
    const path = pathOf(t, z);
    if (t.name[z] > 1) {
        crumbs.push(h('button', { type: 'button', class: 'reset sw-open', title: 'Its callers and callees, merged',
            onclick: () => update({ sw: path[path.length - 1] }) }, 'Sandwich'));
    }
    crumbs.push(h('a', { href: '#', onclick: (e) => { e.preventDefault(); update({ zoom: null }); } }, 'all'));
    path.forEach((nm, k) => {
        crumbs.push(' › ');
        crumbs.push(k === path.length - 1 ? h('strong', {}, nm)
            : h('a', { href: '#', onclick: (e) => { e.preventDefault(); update({ zoom: path.slice(0, k + 1).join(';') }); } },
                nm));
    });
    return crumbs;
}
