// The chosen function's timeline (fn_timeline.js), under the application's:
// its total and self in cores per step on the same time axis, its share of
// the application's CPU, and where it changed most (a deploy's step).
import { h } from './dom.js';
import { cores, fmtPct, fmtWhen } from './format.js';
import { seriesOf, stepChange } from './fn_timeline.js';

const TOTAL = '#c2255c', SELF = '#5f3dc4';
// Cores, in millicores when under a hundredth (a function is often that small).
const fmtCores = (x) => (x > 0 && x < 0.01 ? `${(x * 1000).toPrecision(2)} millicores` : `${cores(x)} cores`);

// Fills box with the timeline of function nm; load() -> the server's
// answer (a promise). Returns the panel's state for scripts
// ({ name, loading, error, series, change }), updated as the answer comes.
export function fnTimelinePanel(box, nm, load) {
    const state = { name: nm, loading: true, error: '', series: null, change: null };
    const canvas = h('canvas', { class: 'timeline fn-tl-chart', 'aria-label': `CPU of ${nm} over time` });
    const info = h('span', { class: 'muted' }, 'loading…');
    box.replaceChildren(h('div', { class: 'fn-tl-head' },
        h('strong', {}, 'Over time: '), h('span', { class: 'fn-tl-name' }, nm), ' ',
        h('span', { class: 'fn-tl-key', style: `color:${TOTAL}` }, '— total'), ' ',
        h('span', { class: 'fn-tl-key', style: `color:${SELF}` }, '— self'), ' ', info), canvas);
    box.hidden = false;
    state.done = load().then((tl) => {
        const s = seriesOf(tl), change = stepChange(s.total);
        Object.assign(state, { loading: false, series: s, change });
        info.textContent = `total ${fmtPct(s.share)} of the application's CPU, self ${fmtPct(s.selfShare)}` +
            (change && change.after !== change.before
                ? `; largest change ${fmtCores(change.before)} → ${fmtCores(change.after)} at ` +
                  fmtWhen(s.from + change.at * s.step) : '');
        requestAnimationFrame(() => draw(canvas, s, change));
    }).catch((e) => {
        Object.assign(state, { loading: false, error: e.message });
        info.textContent = `could not load it: ${e.message}`;
        info.className = 'error';
    });
    return state;
}

function draw(canvas, s, change) {
    const W = canvas.clientWidth || 300, H = 70, dpr = window.devicePixelRatio || 1;
    canvas.width = W * dpr; canvas.height = H * dpr; canvas.style.height = H + 'px';
    const c = canvas.getContext('2d');
    c.setTransform(dpr, 0, 0, dpr, 0, 0);
    c.clearRect(0, 0, W, H);
    const n = s.total.length, max = Math.max(...s.total, 0.001), pad = 14;
    // The application's axis: step i spans [i, i + 1) of n, as its chart draws it.
    const X = (i) => (n <= 1 ? W / 2 : (i / (n - 1)) * (W - 2) + 1), Y = (v) => H - 1 - (v / max) * (H - pad - 2);
    const line = (v, color, fill) => {
        c.beginPath();
        for (let i = 0; i < n; i++) (i ? c.lineTo : c.moveTo).call(c, X(i), Y(v[i]));
        if (fill) {
            c.lineTo(X(n - 1), H); c.lineTo(X(0), H); c.closePath();
            c.fillStyle = color + '26'; c.fill();
        } else {
            c.strokeStyle = color; c.lineWidth = 1.5; c.stroke();
        }
    };
    if (n) {
        line(s.total, TOTAL, true); line(s.total, TOTAL); line(s.self, SELF);
    }
    c.fillStyle = '#666'; c.font = '11px system-ui, sans-serif';
    c.fillText(fmtCores(max), 4, 11);
    if (change && change.after !== change.before) {
        const x = (X(change.at - 1) + X(change.at)) / 2;
        c.strokeStyle = '#888'; c.setLineDash([3, 3]); c.lineWidth = 1;
        c.beginPath(); c.moveTo(x, 0); c.lineTo(x, H); c.stroke(); c.setLineDash([]);
    }
}
