// The controls the pages share: the range picker, the type selector and
// the timeline.
import { h } from './dom.js';
import { cores, fmtWhen } from './format.js';
import { RANGES, rangeValue } from './range.js';
import { VALUE_TYPES, seriesOf, unitOf } from './value_type.js';

// CPU / Off-CPU / Wall, type the one pressed; onPick(type) on a choice.
export function typePicker(type, onPick) {
    return h('div', { class: 'range types', role: 'group', 'aria-label': 'profile type' },
        VALUE_TYPES.map(([v, label]) => h('button', { type: 'button', class: v === type ? 'on' : '',
            'aria-pressed': String(v === type), 'data-type': v, onclick: () => onPick(v) }, label)));
}

// The preset ranges and a custom from-to form; onPick(from, to) on a choice.
export function rangePicker(p, onPick) {
    const from = p.get('from') || 'now-1h', to = p.get('to') || 'now';
    const isPreset = RANGES.some(([, v]) => v === from) && to === 'now';
    const onsubmit = (e) => {
        e.preventDefault();
        const f = rangeValue(custom.elements.from.value), t = rangeValue(custom.elements.to.value);
        if (f === null || t === null) {
            custom.elements.from.setCustomValidity('now-3h, Unix seconds or a date');
            custom.reportValidity();
            return;
        }
        onPick(f, t || 'now');
    };
    const custom = h('form', { class: 'custom', hidden: isPreset || undefined, onsubmit },
        h('input', { name: 'from', value: from, 'aria-label': 'from', size: 18,
            title: 'now-3h, Unix seconds, or a date like 2026-12-03 12:00' }),
        '–', h('input', { name: 'to', value: to, 'aria-label': 'to', size: 18 }), h('button', { type: 'submit' }, 'Apply'));
    return h('div', { class: 'range' },
        RANGES.map(([label, v]) => h('button',
            { type: 'button', class: isPreset && from === v ? 'on' : '', onclick: () => onPick(v, 'now') }, label)),
        h('button', { type: 'button', class: isPreset ? '' : 'on', onclick: () => { custom.hidden = !custom.hidden; } },
            'custom'),
        custom);
}

// A line of cores (or threads: off-CPU and wall time) over time on a
// canvas, the series of the timeline's type; with onSelect, dragging across
// it selects a range (Unix seconds).
export function cpuChart(canvas, tl, { onSelect, height = 90, color = '#e8590c' } = {}) {
    const pts = seriesOf(tl), n = pts.length;
    const draw = (sel) => {
        const W = canvas.clientWidth || 120, H = height, dpr = window.devicePixelRatio || 1;
        canvas.width = W * dpr; canvas.height = H * dpr; canvas.style.height = H + 'px';
        const c = canvas.getContext('2d');
        c.setTransform(dpr, 0, 0, dpr, 0, 0);
        c.clearRect(0, 0, W, H);
        const max = Math.max(...pts, 0.001), pad = onSelect ? 14 : 2;
        if (onSelect) {
            c.fillStyle = '#666'; c.font = '11px system-ui, sans-serif';
            c.fillText(`${cores(max)} ${unitOf(tl.type || 'cpu')}`, 4, 11);
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
        if (sel) {
            c.fillStyle = 'rgba(40,90,200,0.18)';
            c.fillRect(Math.min(sel[0], sel[1]), 0, Math.abs(sel[1] - sel[0]), H);
        }
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
