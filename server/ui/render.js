// The flame graph on a canvas: draws a tree (tree.js) as layout.js places
// it, in a viewport of its own that scrolls when the graph is taller than
// the window allows (a 512-deep recursion must not make the page 10,000 px
// tall), with a hover outline and tooltip on an overlay canvas.
import { KIND } from './classify.js';
import { diffColor } from './colors.js';
import { diffShares } from './diff.js';
import { fmtPct, fmtTime } from './format.js';
import { ROW, frameAt, frameBox, visibleFrames } from './layout.js';
import { nameInfo } from './tree.js';

// The viewport's height: the window's less what the Profiling tab shows
// above the graph (about 340 px: the toolbars, the timeline, the path) and
// the legend below, so the page need not scroll; never less than 300 px.
// (A fixed allowance, not a measure: a draw must not force a layout. The
// window's height too is read ahead, in warm() and on resize: reading
// innerHeight in a draw would lay the page out there and then.)
const VIEWPORT_CHROME = 360;
let windowH = 0;
function readWindowH() { windowH = window.innerHeight || 1000; }
window.addEventListener('resize', readWindowH, { passive: true });
function viewportMax() {
    if (!windowH) readWindowH();
    return Math.max(300, windowH - VIEWPORT_CHROME);
}

let scrollbarW = -1; // the width of a vertical scrollbar, measured once
function scrollbarWidth() {
    if (scrollbarW < 0) {
        const d = document.createElement('div');
        d.style.cssText = 'position:absolute;top:-200px;width:100px;height:100px;overflow-y:scroll';
        document.body.append(d);
        scrollbarW = d.offsetWidth - d.clientWidth;
        d.remove();
    }
    return scrollbarW;
}

export class FlameGraph {
    // container: an element to fill; onClick(i) when frame i is clicked,
    // onHover(i) when the pointer is over frame i (-1: none).
    constructor(container, { onClick, onHover } = {}) {
        this.el = container;
        this.el.classList.add('fg');
        this.box = document.createElement('div');
        this.box.className = 'fg-scroll';
        this.canvas = document.createElement('canvas');
        this.overlay = document.createElement('canvas');
        this.overlay.className = 'fg-overlay';
        this.tip = document.createElement('div');
        this.tip.className = 'fg-tip';
        this.tip.hidden = true;
        this.box.append(this.canvas, this.overlay);
        this.el.append(this.box, this.tip);
        this.ctx = this.canvas.getContext('2d', { alpha: false });
        this.octx = this.overlay.getContext('2d');
        this.onClick = onClick;
        this.onHover = onHover;
        this.tree = null;
        this.zoom = 0;
        this.match = null;
        this.diff = null;
        this.hover = -1;
        this.vis = new Int32Array(0);
        this.nvis = 0;
        this.lastDraw = { drawn: 0, ms: 0, labels: 0 };
        this._pending = null;
        this._raf = 0;
        // The viewport's scroll, kept here: reading scrollTop in a draw would
        // force a layout of the page.
        this.scrollY = 0;
        this.box.addEventListener('scroll', () => { this.scrollY = this.box.scrollTop; }, { passive: true });
        this.overlay.addEventListener('mousemove', (e) => this._queueHover(e.offsetX, e.offsetY, e.clientX, e.clientY));
        this.overlay.addEventListener('mouseleave', () => this._queueHover(-1, -1));
        this.overlay.addEventListener('click', (e) => {
            const i = this.nodeAt(e.offsetX, e.offsetY);
            if (i >= 0 && this.onClick) this.onClick(i);
        });
        // The width comes from a ResizeObserver, so a draw never forces a
        // layout of the page to learn it.
        this.width = 0;
        this._ro = new ResizeObserver((es) => {
            const w = Math.floor(es[es.length - 1].contentRect.width);
            if (w > 0 && w !== this.width) {
                this.width = w;
                const drawn = this.cssW + (this.scrolls ? scrollbarWidth() : 0);
                if (this.tree && this.tree.n && this.cssW && w !== drawn) this.draw();
            }
        });
        this._ro.observe(this.el);
    }

    destroy() { this._ro.disconnect(); cancelAnimationFrame(this._raf); }

    // The parts of the graph, back in container after a caller emptied it.
    attach() { this.el.append(this.box, this.tip); }

    setTree(t) {
        this.tree = t;
        this.zoom = 0;
        this.match = null;
        this.diff = null;
        this.hover = -1;
        this.treeH = 0;
        this.shownZoom = -1;
        if (this.vis.length < t.n) this.vis = new Int32Array(t.n);
    }

    setZoom(i) { this.zoom = this.tree && i >= 0 && i < this.tree.n ? i : 0; }
    setMatch(m) { this.match = m; }
    // base: per node the baseline total (from alignDiff), rb: baseline root.
    setDiff(base, rb) {
        if (!base) { this.diff = null; return; }
        const { d, max } = diffShares(this.tree, base, rb);
        this.diff = { d, max, base, rb };
    }

    // Lays out the visible frames (wider than half a pixel, inside the zoomed
    // frame, plus its ancestors full width) and draws them.
    draw() {
        const t0 = performance.now(), t = this.tree;
        if (!t || !t.n) return;
        const dpr = window.devicePixelRatio || 1, maxH = viewportMax();
        const z = this.zoom, vis = this.vis;
        let W = Math.max(this.width || Math.floor(this.el.clientWidth), 100);
        let { nv, maxD } = visibleFrames(t, z, W, vis);
        // Grows, never shrinks, within one tree: zooming in and out then
        // redraws the canvas without a new layout of the page.
        const H = Math.max((maxD + 1) * ROW + 4, this.treeH || 0);
        this.treeH = H;
        // Taller than the viewport: it scrolls, and the scrollbar takes its width.
        const deep = H > maxH;
        if (deep && scrollbarWidth() > 0) {
            W = Math.max(W - scrollbarWidth(), 100);
            ({ nv } = visibleFrames(t, z, W, vis));
        }
        this.nvis = nv;
        if (this.cssW !== W || this.cssH !== H || this.dpr !== dpr) {
            this.canvas.width = Math.round(W * dpr);
            this.canvas.height = Math.round(H * dpr);
            for (const c of [this.canvas, this.overlay]) {
                c.style.width = W + 'px';
                c.style.height = H + 'px';
            }
            // The overlay gets its pixels on the first hover: until then an
            // empty canvas costs the first frame nothing to paint.
            this.overlay.width = this.overlay.height = 0;
            this.box.style.height = Math.min(H, maxH) + 'px';
            this.box.classList.toggle('scrolls', deep);
            this.scrolls = deep;
            this.cssW = W; this.cssH = H; this.dpr = dpr;
            this._hoverShown = false; // resized canvases are blank
            this._fontSet = false; // and has its state reset
        }
        this._paint(W, H, nv);
        if (deep && z !== this.shownZoom) this._scrollTo(z, maxH);
        this.shownZoom = z;
        this.lastDraw.ms = performance.now() - t0;
        return this.lastDraw;
    }

    _paint(W, H, nv) {
        const t = this.tree, ctx = this.ctx, dpr = this.dpr, vis = this.vis, z = this.zoom;
        ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
        ctx.fillStyle = '#fff';
        ctx.fillRect(0, 0, W, H);
        this._font();
        const charW = this.charW, names = t.names, color = t.color, kind = t.kind;
        const nameOf = t.name, cls = t.classified;
        const total = t.total, depth = t.depth, x0 = t.x[z], scale = W / (t.total[z] || 1);
        const m = this.match, diff = this.diff, zd = depth[z];
        let labels = 0, alpha = 1, style = '';
        ctx.globalAlpha = 1;
        for (let k = 0; k < nv; k++) {
            const i = vis[k], d = depth[i];
            let x, w;
            if (d < zd) { x = 0; w = W; } else { x = (t.x[i] - x0) * scale; w = total[i] * scale; }
            const y = d * ROW, nm = nameOf[i];
            if (!cls[nm]) nameInfo(t, nm);
            let fill;
            if (m && m[nm]) fill = '#d63cd6';
            else if (diff) fill = diffColor(diff.d[i], diff.max);
            else fill = color[nm];
            // (Each state change costs the canvas: made only when it changes.)
            if (fill !== style) ctx.fillStyle = style = fill;
            const a = d < zd || (m && !m[nm]) ? 0.6 : 1;
            if (a !== alpha) ctx.globalAlpha = alpha = a;
            ctx.fillRect(x, y, w > 2 ? w - 1 : w, ROW - 1);
            if (w > charW * 3 + 6) {
                const s = String(names[nm]), fit = Math.floor((w - 6) / charW);
                const label = s.length > fit ? s.slice(0, fit - 1) + '…' : s;
                if (alpha !== 1) ctx.globalAlpha = alpha = 1;
                ctx.fillStyle = style = kind[nm] === KIND.MARKER ? '#fff' : '#1a1a1a';
                ctx.fillText(label, x + 3, y + ROW / 2);
                labels++;
            }
        }
        ctx.globalAlpha = 1;
        if (this.hover >= 0 || this._hoverShown) this._drawHover();
        this.lastDraw = { drawn: nv, labels, ms: 0 };
    }

    // A graph taller than its viewport, zoomed to a frame out of view:
    // scrolled so the frame's row is near the top, a few of its callers above.
    _scrollTo(z, maxH) {
        const y = this.tree.depth[z] * ROW, top = this.scrollY;
        if (y >= top && y + ROW <= top + maxH) return;
        this.box.scrollTop = this.scrollY = Math.max(0, y - 3 * ROW);
    }

    // The labels' font on the canvas, and its character width. The first
    // use of a font costs (finding and loading it): warm() does that while
    // the data is still on its way.
    _font() {
        if (this._fontSet) return;
        const ctx = this.ctx;
        ctx.font = '12px ui-monospace, "DejaVu Sans Mono", monospace';
        ctx.textBaseline = 'middle';
        if (!this.charW) this.charW = ctx.measureText('M').width || 7.2;
        this._fontSet = true;
    }

    // Done while the data is on its way: the font, the scrollbar's width
    // and the window's height (a layout of the page, then cheap; in a first
    // draw, not).
    warm() { this._font(); scrollbarWidth(); readWindowH(); }

    // The frame under (px, py) in CSS pixels of the canvas, or -1.
    nodeAt(px, py) { return frameAt(this.tree, this.zoom, this.cssW, px, py); }

    // The box of frame i in CSS pixels of the canvas.
    boxOf(i) { return frameBox(this.tree, this.zoom, this.cssW, i); }

    // Hover: the work of a mouse move is done once per animation frame.
    _queueHover(px, py, cx, cy) {
        this._pending = [px, py, cx, cy];
        if (!this._raf) this._raf = requestAnimationFrame(() => { this._raf = 0; this.hoverAt(...this._pending); });
    }

    hoverAt(px, py, cx, cy) {
        const i = px < 0 ? -1 : this.nodeAt(px, py);
        this.hover = i;
        this._drawHover();
        if (i < 0) { this.tip.hidden = true; if (this.onHover) this.onHover(-1); return; }
        this._fillTip(i);
        // The tip is placed in the container, which does not scroll: the
        // point's place in the canvas is moved by the viewport's scroll.
        const r = this.el.getBoundingClientRect(), sy = this.scrolls ? this.scrollY : 0;
        const tx = (cx ?? r.left + px) - r.left + 14, ty = (cy ?? r.top + py - sy) - r.top + 16;
        this.tip.hidden = false;
        this.tip.style.left = Math.min(tx, Math.max(0, this.cssW - this.tip.offsetWidth - 4)) + 'px';
        this.tip.style.top = ty + 'px';
        if (this.onHover) this.onHover(i);
    }

    _drawHover() {
        const o = this.octx, dpr = this.dpr || 1;
        if (this.hover >= 0 && !this.overlay.width) {
            this.overlay.width = this.canvas.width;
            this.overlay.height = this.canvas.height;
        }
        o.setTransform(dpr, 0, 0, dpr, 0, 0);
        o.clearRect(0, 0, this.cssW || 0, this.cssH || 0);
        this._hoverShown = false;
        if (this.hover < 0 || !this.tree || this.hover >= this.tree.n) return;
        this._hoverShown = true;
        const b = this.boxOf(this.hover);
        o.lineWidth = 2;
        o.strokeStyle = '#111';
        o.strokeRect(b.x + 1, b.y + 1, Math.max(b.w - 2, 1), b.h - 1);
    }

    _fillTip(i) {
        const t = this.tree, nm = t.name[i], root = t.total[0] || 1, z = this.zoom;
        nameInfo(t, nm);
        const lines = [];
        const kinds = ['', 'kernel', 'no name: symbols missing', 'marker', 'folded small frames', '', 'Python'];
        lines.push(['b', String(t.names[nm])]);
        const file = String(t.files[nm] || '');
        const kind = t.kind[nm] === KIND.PYTHON ? `Python: ${t.group[nm]}` : kinds[t.kind[nm]];
        if (file || kind) lines.push(['f', [file, kind].filter(Boolean).join(' · ')]);
        lines.push(['', `total ${fmtTime(t.total[i])} · ${fmtPct(t.total[i] / root)}` +
            (z > 0 && t.depth[i] >= t.depth[z] ? ` (${fmtPct(t.total[i] / t.total[z])} of the zoomed frame)` : '')]);
        lines.push(['', `self ${fmtTime(t.self[i])} · ${fmtPct(t.self[i] / root)}`]);
        if (this.diff) {
            const was = this.diff.rb ? this.diff.base[i] / this.diff.rb : 0;
            const d = this.diff.d[i];
            const change = `baseline ${fmtPct(was)} → ${fmtPct(t.total[i] / root)} (${d >= 0 ? '+' : ''}${fmtPct(d)})`;
            lines.push([d > 0 ? 'up' : d < 0 ? 'down' : '', change]);
        }
        this.tip.replaceChildren(...lines.map(([c, s]) => {
            const div = document.createElement('div');
            if (c) div.className = c;
            div.textContent = s;
            return div;
        }));
    }
}
