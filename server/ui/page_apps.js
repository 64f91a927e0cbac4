// The applications page: every application with profiles in the range, by
// CPU used, with a sparkline each; their off-CPU time (threads waiting, on
// average) when any has some.
//   #/?from=now-1h&to=now&q=FILTER
import { api } from './api.js';
import { cx, h, message, view } from './dom.js';
import { ago, cores, fmtWhen } from './format.js';
import { rangeLabel, stepFor, toUnix } from './range.js';
import { hashOf, update } from './router.js';
import { cpuChart, rangePicker } from './widgets.js';

let appsReq = 0; // the latest request: an older one's answer is dropped

export async function renderApps(p) {
    const from = p.get('from') || 'now-1h', to = p.get('to') || 'now';
    const req = ++appsReq;
    const filter = h('input', { type: 'search', placeholder: 'Filter applications', value: p.get('q') || '',
        'aria-label': 'filter applications', oninput: () => update({ q: filter.value }, true) });
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
    const off = apps.some((a) => a.off_cpu_cores > 0);
    const rows = shown.map((a) => appRow(a, from, to, off));
    body.replaceChildren(
        h('p', { class: 'muted' }, `${shown.length} of ${apps.length} applications, ${rangeLabel(from, to)}, by CPU used`),
        shown.length ? h('table', { class: 'apps' },
            h('thead', {}, h('tr', {}, h('th', {}, 'Application'), h('th', {}, 'Hosts'), h('th', { class: 'num' }, 'CPU (cores)'),
                off ? h('th', { class: 'num', title: 'Threads blocked (locks, I/O, sleeps), on average' },
                    'Off-CPU (threads)') : null,
                h('th', {}, 'CPU over the range'), h('th', {}, 'Last seen'))),
            h('tbody', {}, rows.map((r) => r.tr))) : message('empty', 'No application matches the filter.'));
    cx.ready = true;
    await sparklines(rows, req, from, to);
}

// An application's row, and the canvas of its sparkline (drawn later).
function appRow(a, from, to, off) {
    const spark = h('canvas', { class: 'spark', width: 120, height: 24, 'aria-hidden': 'true' });
    const link = hashOf(['app', a.name], new URLSearchParams({ from, to }));
    return { a, spark, tr: h('tr', {},
        h('td', {}, h('a', { href: link, class: 'app-link' }, a.name)),
        h('td', { class: 'hosts' }, a.hosts.join(', ')),
        h('td', { class: 'num' }, cores(a.cpu_cores)),
        off ? h('td', { class: 'num off-cpu' }, cores(a.off_cpu_cores || 0)) : null,
        h('td', {}, spark),
        h('td', { class: 'muted', title: fmtWhen(a.last_seen) }, ago(a.last_seen))) };
}

// Sparklines, a few requests at a time, for the first 100 rows; stops when
// a newer request replaced the page.
async function sparklines(rows, req, from, to) {
    const now = Date.now() / 1000, step = stepFor(toUnix(from, now), toUnix(to, now));
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
