// The breakdown panel of the Profiling tab (breakdown.js has the rows).
import { h } from './dom.js';
import { BREAKDOWN_LABELS, BREAKDOWN_TOP, rowsOf } from './breakdown.js';
import { fmtPct } from './format.js';
import { nounOf, unitOf } from './value_type.js';
import { cpuChart } from './widgets.js';

const cap = (s) => s[0].toUpperCase() + s.slice(1);

// The panel: a choice of label (panel.select), and for one the table. by: the label ('' none);
// load(label) -> the server's answer; pick(label, value) filters the page.
export function breakdownPanel(by, load, pick, choose, type = 'cpu') {
    const what = nounOf(type);
    const sel = h('select', { 'aria-label': 'break down by', onchange: () => choose(sel.value) },
        h('option', { value: '' }, 'no breakdown'),
        BREAKDOWN_LABELS.map((l) => h('option', { value: l, selected: l === by || undefined }, 'by ' + l)));
    const body = h('div', { class: 'bd-body' });
    // The choice sits in the toolbar (sel); the table under the chart, only with a label.
    const panel = h('div', { class: 'breakdown', hidden: !by || undefined }, h('strong', {}, `${cap(what)} by ${by}`), body);
    panel.state = { rows: null, error: '' };
    panel.select = sel;
    if (!by) return panel;
    body.replaceChildren(h('p', { class: 'muted' }, `Loading the ${what} by ${by}…`));
    panel.done = load(by).then((tl) => {
        const rows = rowsOf(tl);
        panel.state.rows = rows;
        if (!rows.length) {
            body.replaceChildren(h('p', { class: 'muted' }, `No ${what} with a ${by} label in this range.`));
            return;
        }
        const charts = [];
        const tbody = h('tbody', {}, rows.map((r) => {
            const c = h('canvas', { class: 'spark' });
            charts.push([c, r]);
            const tr = h('tr', { class: 'row' + (r.value === null ? ' other' : ''),
                title: r.value === null ? `every other ${by}, and ${what} without a ${by} label` : `show only ${by} ${r.value}`,
                onclick: r.value === null ? undefined : () => pick(by, r.value) },
            h('td', { class: 'bd-value' }, r.label), h('td', { class: 'num' }, fmtPct(r.share)),
            h('td', { class: 'num' }, r.mean.toFixed(2)), h('td', { class: 'spark-cell' }, c));
            return tr;
        }));
        const note = tl.values > BREAKDOWN_TOP
            ? h('p', { class: 'muted' }, `The ${BREAKDOWN_TOP} ${by} values with the most ${what} of ${tl.values}` +
                `${tl.capped ? '+' : ''}; the rest as other.`) : null;
        body.replaceChildren(h('table', { class: 'bd' },
            h('thead', {}, h('tr', {}, h('th', {}, by), h('th', { class: 'num' }, 'Share'),
                h('th', { class: 'num' }, `${cap(unitOf(type))} (mean)`), h('th', {}, 'Over time'))), tbody), ...(note ? [note] : []));
        // Drawn once in the page, when the canvases have a width.
        requestAnimationFrame(() => {
            // One step (a range shorter than the step) drawn as a level band, not a point.
            for (const [c, r] of charts) {
                const pts = r.cores.length === 1 ? [r.cores[0], r.cores[0]] : r.cores;
                cpuChart(c, { type, [`${type}_cores`]: pts, from: tl.from, step: tl.step }, { height: 22 });
            }
        });
    }).catch((e) => {
        panel.state.error = e.message;
        body.replaceChildren(h('p', { class: 'error' }, `Could not load the ${what} by ${by}: ${e.message}`));
    });
    return panel;
}
