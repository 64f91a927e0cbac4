// The flame graph: the server's compact tree (server/query.c) in flat typed
// arrays, laid out once, drawn on a canvas, plus the walks the page needs
// over the same arrays (function table, search share, diff, unnamed frames).
//
// The tree JSON: names[0] = "all" (the root), names[1] = "other" (folded
// nodes), names[i + 2] / files[i + 2] = function i; nodes = [name, total,
// self, nchildren, ...], depth first, a node's children right after it,
// widest first. Times are nanoseconds of CPU.

export const KIND = { USER: 0, KERNEL: 1, UNNAMED: 2, MARKER: 3, OTHER: 4, ROOT: 5 };
export const ROW = 18; // px per frame row

const UNNAMED_RE = /^(.+)\+0x[0-9a-fA-F]+$/;

// What a frame is, from how the agent names it (agent/profile.c):
// kernel frames carry the file "[kernel.kallsyms]" or "[module]" (or are
// "[kernel]+0xADDR" when kallsyms had no name), frames without a name are
// "binary+0xADDR", markers are "[truncated: ...]" / "[lost samples: ...]".
// (The regular expressions run only where a cheap test says they may match:
// the first draw classifies thousands of names.)
export function classify(name, file, idx) {
    if (idx === 0) return { kind: KIND.ROOT, group: 'all', binary: '' };
    if (idx === 1) return { kind: KIND.OTHER, group: 'other', binary: '' };
    if (name.charCodeAt(0) === 91) { // [
        if (name.startsWith('[kernel]+0x')) return { kind: KIND.KERNEL, group: 'kernel', binary: '[kernel]', unnamed: true };
        if (/^\[(truncated|lost)/.test(name)) return { kind: KIND.MARKER, group: 'marker', binary: '' };
    }
    if (file.charCodeAt(0) === 91 && /^\[[^\]]+\]$/.test(file) && file !== '[unknown]') return { kind: KIND.KERNEL, group: file.slice(1, -1), binary: file };
    const m = name.includes('+0x') ? UNNAMED_RE.exec(name) : null;
    if (m && !/[\s(]/.test(m[1])) return { kind: KIND.UNNAMED, group: m[1], binary: m[1], unnamed: true };
    return { kind: KIND.USER, group: packageOf(name, file), binary: '' };
}

// A package for colouring: C++/Rust "ns::", Go "path/pkg.", Java "a.b.",
// else the source file's directory.
export function packageOf(name, file) {
    let m = name.includes('::') ? /^[<&*\s]*(?:const\s+)?([A-Za-z_$][\w$]*)::/.exec(name) : null;
    if (m) return m[1];
    m = name.includes('.') && !name.includes(' ') ? /^((?:[\w.-]+\/)*[\w-]+)\.[\w(*$]/.exec(name) : null;
    if (m) {
        const parts = m[1].split('.');
        return parts.length > 2 ? parts.slice(0, 2).join('.') : m[1];
    }
    if (file) {
        const slash = file.lastIndexOf('/');
        return slash > 0 ? file.slice(0, slash) : file;
    }
    return '';
}

function hash(s) {
    let h = 2166136261;
    for (let i = 0; i < s.length; i++) {
        h ^= s.charCodeAt(i);
        h = Math.imul(h, 16777619);
    }
    return h >>> 0;
}

const groupHash = new Map(); // a group's hash, once: groups repeat
function colorFor(kind, group, name) {
    let g = groupHash.get(group);
    if (g === undefined) {
        g = hash(group);
        if (groupHash.size < 100000) groupHash.set(group, g);
    }
    const n = hash(name);
    switch (kind) {
        case KIND.ROOT: return 'hsl(220,10%,78%)';
        case KIND.OTHER: return 'hsl(0,0%,86%)';
        case KIND.MARKER: return 'hsl(0,0%,48%)';
        case KIND.UNNAMED: return `hsl(${g % 360},6%,${68 + (n % 10)}%)`;
        case KIND.KERNEL: return `hsl(${190 + (g % 40)},${55 + (n % 20)}%,${62 + (n % 10)}%)`;
        default: return `hsl(${(g % 56)},${68 + (n % 18)}%,${54 + ((g >> 8) % 8) + (n % 6)}%)`;
    }
}

// Parses the flame-graph JSON (an object) into flat typed arrays and lays
// it out in the same pass: x (offset from the root's left edge, in ns),
// depth, subtree end (the index after a node's last descendant), parent.
// Names are classified (kind, colour) on first use, not here: the first
// draw needs only the ones it shows. Throws on a malformed tree.
export function parseTree(fg) {
    const nodes = fg.nodes || [], names = fg.names || ['all', 'other'], files = fg.files || [];
    const n = Math.floor(nodes.length / 4), nn = names.length;
    const name = new Int32Array(n), total = new Float64Array(n), self = new Float64Array(n),
        x = new Float64Array(n), depth = new Uint16Array(n), end = new Int32Array(n), parent = new Int32Array(n);
    const rem = new Int32Array(n), nextX = new Float64Array(n), stk = new Int32Array(n + 1);
    let sp = 0, maxDepth = 0;
    for (let i = 0, o = 0; i < n; i++, o += 4) {
        const nm = nodes[o], tot = nodes[o + 1], kids = nodes[o + 3];
        if (!(nm >= 0 && nm < nn)) throw new Error(`node ${i}: name ${nm} out of range`);
        name[i] = nm;
        total[i] = tot;
        self[i] = nodes[o + 2];
        let xi = 0;
        if (sp > 0) {
            const p = stk[sp - 1], d = depth[p] + 1;
            parent[i] = p;
            depth[i] = d;
            if (d > maxDepth) maxDepth = d;
            xi = nextX[p];
            nextX[p] = xi + tot;
            rem[p]--;
        } else {
            if (i > 0) throw new Error(`node ${i}: a second root`);
            parent[i] = -1;
        }
        x[i] = xi;
        nextX[i] = xi;
        rem[i] = kids;
        if (kids > 0) {
            stk[sp++] = i;
        } else {
            end[i] = i + 1;
            while (sp > 0 && rem[stk[sp - 1]] === 0) end[stk[--sp]] = i + 1;
        }
    }
    while (sp > 0) end[stk[--sp]] = n; // a cut-off tree: close what is open
    return {
        n, names, files, unit: fg.unit, samples: fg.samples || 0, profiles: fg.profiles || 0,
        name, total, self, x, depth, end, parent, maxDepth,
        // Per name, filled on first use (nameInfo) or all at once
        // (classifyAll): kind, colour, package group, binary (unnamed frames).
        classified: new Uint8Array(nn), kind: new Uint8Array(nn), unnamed: new Uint8Array(nn),
        color: new Array(nn).fill(''), group: new Array(nn).fill(''), binary: new Array(nn).fill(''),
    };
}

// Kind, colour, group and binary of name nm (once).
export function nameInfo(t, nm) {
    if (t.classified[nm]) return;
    const name = String(t.names[nm]), c = classify(name, String(t.files[nm] || ''), nm);
    t.kind[nm] = c.kind;
    t.unnamed[nm] = c.unnamed ? 1 : 0;
    t.group[nm] = c.group;
    t.binary[nm] = c.binary;
    t.color[nm] = colorFor(c.kind, c.group, name);
    t.classified[nm] = 1;
}

export function classifyAll(t) {
    for (let i = 0; i < t.names.length; i++) if (!t.classified[i]) nameInfo(t, i);
    return t;
}

// The child of node p named nm (a name string), or -1.
export function childNamed(t, p, nm) {
    for (let c = p + 1; c < t.end[p]; c = t.end[c]) if (t.names[t.name[c]] === nm) return c;
    return -1;
}

// A node as the names from the root's child down to it, and back. A path
// no longer in the tree resolves as far as it goes.
export function pathOf(t, i) {
    const out = [];
    for (; i > 0; i = t.parent[i]) out.push(t.names[t.name[i]]);
    return out.reverse();
}

export function resolvePath(t, path) {
    let i = 0;
    for (const nm of path) {
        const c = childNamed(t, i, nm);
        if (c < 0) break;
        i = c;
    }
    return t.n ? i : -1;
}

// Per function name: self, and total counted once per stack (a recursive
// function's inner calls are inside its outer call's total).
export function functionStats(t) {
    const nn = t.names.length;
    const self = new Float64Array(nn), total = new Float64Array(nn), onPath = new Int32Array(nn);
    const stk = new Int32Array(t.maxDepth + 2);
    let sp = 0;
    for (let i = 0; i < t.n; i++) {
        while (sp > 0 && i >= t.end[stk[sp - 1]]) onPath[t.name[stk[--sp]]]--;
        const nm = t.name[i];
        self[nm] += t.self[i];
        if (onPath[nm] === 0) total[nm] += t.total[i];
        onPath[nm]++;
        stk[sp++] = i;
    }
    return { self, total };
}

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

// Time under frames without names: overall and per binary, a stack counted
// once however many such frames it holds.
export function unnamedReport(t) {
    classifyAll(t);
    const byBin = new Map();
    const stk = new Int32Array(t.maxDepth + 2), seen = new Map();
    let sp = 0, depthIn = 0, all = 0;
    for (let i = 0; i < t.n; i++) {
        while (sp > 0 && i >= t.end[stk[sp - 1]]) {
            const j = stk[--sp], nm = t.name[j];
            if (t.unnamed[nm]) { depthIn--; seen.set(t.binary[nm], seen.get(t.binary[nm]) - 1); }
        }
        const nm = t.name[i];
        if (t.unnamed[nm]) {
            const b = t.binary[nm], k = seen.get(b) || 0;
            if (depthIn === 0) all += t.total[i];
            if (k === 0) byBin.set(b, (byBin.get(b) || 0) + t.total[i]);
            seen.set(b, k + 1);
            depthIn++;
        }
        stk[sp++] = i;
    }
    const root = t.n ? t.total[0] : 0;
    const binaries = [...byBin].map(([binary, time]) => ({ binary, time, share: root ? time / root : 0 }))
        .sort((a, b) => b.time - a.time);
    return { time: all, share: root ? all / root : 0, binaries };
}

// Diff: b's nodes matched to a's by path (the same names from the root).
// Returns per a-node the baseline total (0 where the path is new) and the
// per-name stats of both, aligned to a's name indices where the names agree.
export function alignDiff(a, b) {
    const nameIdx = new Map();
    for (let i = 0; i < a.names.length; i++) nameIdx.set(String(a.names[i]), i);
    const nn = a.names.length + 1;
    const key = new Map(); // parentA * nn + nameA -> a node
    for (let i = 1; i < a.n; i++) key.set(a.parent[i] * nn + a.name[i], i);
    const match = new Int32Array(b.n).fill(-1);
    const base = new Float64Array(a.n);
    if (a.n && b.n) { match[0] = 0; base[0] = b.total[0]; }
    for (let j = 1; j < b.n; j++) {
        const pa = match[b.parent[j]];
        if (pa < 0) continue;
        const na = nameIdx.get(String(b.names[b.name[j]]));
        if (na === undefined) continue;
        const ai = key.get(pa * nn + na);
        if (ai === undefined) continue;
        match[j] = ai;
        base[ai] += b.total[j];
    }
    return { base, match };
}

// Per-function changes between baseline b and a, as shares of each side's
// whole so ranges of different lengths compare; biggest first.
export function diffTable(a, b) {
    const sa = functionStats(a), sb = functionStats(b);
    const ra = a.n ? a.total[0] : 0, rb = b.n ? b.total[0] : 0;
    const rows = new Map();
    const add = (t, s, r, side) => {
        for (let i = 2; i < t.names.length; i++) {
            if (!s.total[i] && !s.self[i]) continue;
            const nm = String(t.names[i]);
            let row = rows.get(nm);
            if (!row) rows.set(nm, row = { name: nm, file: String(t.files[i] || ''), a: 0, b: 0, aSelf: 0, bSelf: 0 });
            row[side] = r ? s.total[i] / r : 0;
            row[side + 'Self'] = r ? s.self[i] / r : 0;
        }
    };
    add(a, sa, ra, 'a');
    add(b, sb, rb, 'b');
    const out = [...rows.values()];
    for (const r of out) { r.delta = r.a - r.b; r.selfDelta = r.aSelf - r.bSelf; }
    out.sort((x, y) => Math.abs(y.selfDelta) - Math.abs(x.selfDelta) || Math.abs(y.delta) - Math.abs(x.delta));
    return out;
}

// Colours for the diff: 21 steps from blue (shrank) through grey to red (grew).
const DIFF_COLORS = [];
for (let k = -10; k <= 10; k++) {
    const t = Math.abs(k) / 10;
    DIFF_COLORS.push(k === 0 ? 'hsl(0,0%,82%)'
        : k > 0 ? `hsl(0,${45 + 45 * t}%,${84 - 30 * t}%)` : `hsl(215,${45 + 45 * t}%,${84 - 30 * t}%)`);
}

export function fmtTime(ns) {
    const s = ns / 1e9;
    if (s >= 3600) return (s / 3600).toFixed(2) + ' h';
    if (s >= 60) return (s / 60).toFixed(1) + ' min';
    if (s >= 1) return s.toFixed(2) + ' s';
    return (s * 1000).toFixed(1) + ' ms';
}

export function fmtPct(x) {
    const p = x * 100;
    return (Math.abs(p) >= 10 ? p.toFixed(1) : Math.abs(p) >= 0.1 ? p.toFixed(2) : p.toFixed(3)) + ' %';
}

// The renderer. The graph reads top down: the root on the first row, a
// frame's callees under it, width = CPU time.
export class FlameGraph {
    constructor(container, { onClick, onHover } = {}) {
        this.el = container;
        this.el.classList.add('fg');
        this.canvas = document.createElement('canvas');
        this.overlay = document.createElement('canvas');
        this.overlay.className = 'fg-overlay';
        this.tip = document.createElement('div');
        this.tip.className = 'fg-tip';
        this.tip.hidden = true;
        this.el.append(this.canvas, this.overlay, this.tip);
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
            if (w > 0 && w !== this.width) { this.width = w; if (this.tree && this.tree.n && this.cssW && w !== this.cssW) this.draw(); }
        });
        this._ro.observe(this.el);
    }

    destroy() { this._ro.disconnect(); cancelAnimationFrame(this._raf); }

    setTree(t) {
        this.tree = t;
        this.zoom = 0;
        this.match = null;
        this.diff = null;
        this.hover = -1;
        this.treeH = 0;
        if (this.vis.length < t.n) this.vis = new Int32Array(t.n);
    }

    setZoom(i) { this.zoom = this.tree && i >= 0 && i < this.tree.n ? i : 0; }
    setMatch(m) { this.match = m; }
    // base: per node the baseline total (from alignDiff), rb: baseline root.
    setDiff(base, rb) {
        if (!base) { this.diff = null; return; }
        const t = this.tree, ra = t.total[0] || 1;
        const d = new Float32Array(t.n);
        let max = 0;
        for (let i = 0; i < t.n; i++) {
            d[i] = t.total[i] / ra - (rb ? base[i] / rb : 0);
            if (Math.abs(d[i]) > max) max = Math.abs(d[i]);
        }
        // Colours saturate at the largest change, but never below 5 points of
        // share: noise between two ranges should look pale, not alarming.
        this.diff = { d, max: Math.max(max, 0.05), base, rb };
    }

    // Lays out the visible frames (wider than half a pixel, inside the zoomed
    // frame, plus its ancestors full width) and draws them.
    draw() {
        const t0 = performance.now(), t = this.tree;
        if (!t || !t.n) return;
        const W = Math.max(this.width || Math.floor(this.el.clientWidth), 100), dpr = window.devicePixelRatio || 1;
        const z = this.zoom, x0 = t.x[z], scale = W / (t.total[z] || 1);
        const end = t.end, total = t.total, depth = t.depth, vis = this.vis;
        let nv = 0, maxD = 0;
        for (let a = t.parent[z]; a >= 0; a = t.parent[a]) vis[nv++] = a;
        for (let i = z; i < end[z];) {
            if (total[i] * scale < 0.5) { i = end[i]; continue; }
            vis[nv++] = i;
            if (depth[i] > maxD) maxD = depth[i];
            i++;
        }
        if (depth[z] > maxD) maxD = depth[z];
        this.nvis = nv;
        // Grows, never shrinks, within one tree: zooming in and out then
        // redraws the canvas without a new layout of the page.
        const H = Math.max((maxD + 1) * ROW + 4, this.treeH || 0);
        this.treeH = H;
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
            this.el.style.height = H + 'px';
            this.cssW = W; this.cssH = H; this.dpr = dpr;
            this._hoverShown = false; // resized canvases are blank
            this._fontSet = false; // and has its state reset
        }
        const ctx = this.ctx;
        ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
        ctx.fillStyle = '#fff';
        ctx.fillRect(0, 0, W, H);
        this._font();
        const charW = this.charW, names = t.names, color = t.color, kind = t.kind, nameOf = t.name, cls = t.classified;
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
            else if (diff) {
                const s = Math.round(Math.max(-1, Math.min(1, diff.d[i] / diff.max)) * 10);
                fill = DIFF_COLORS[s + 10];
            } else fill = color[nm];
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
        this.lastDraw = { drawn: nv, labels, ms: performance.now() - t0 };
        return this.lastDraw;
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

    warm() { this._font(); }

    // The frame under (px, py) in CSS pixels, or -1.
    nodeAt(px, py) {
        const t = this.tree;
        if (!t || !t.n || px < 0 || py < 0) return -1;
        const d = Math.floor(py / ROW), z = this.zoom, zd = t.depth[z];
        if (d < zd) {
            let a = z;
            while (t.depth[a] > d) a = t.parent[a];
            return a;
        }
        const scale = this.cssW / (t.total[z] || 1), ux = t.x[z] + px / scale;
        let i = z;
        if (ux < t.x[z] || ux >= t.x[z] + t.total[z]) return -1;
        while (t.depth[i] < d) {
            let found = -1;
            for (let c = i + 1; c < t.end[i]; c = t.end[c]) {
                if (ux >= t.x[c] && ux < t.x[c] + t.total[c]) { found = c; break; }
            }
            if (found < 0) return -1;
            i = found;
        }
        return t.total[i] * scale >= 0.5 ? i : -1;
    }

    // The box of frame i in CSS pixels.
    boxOf(i) {
        const t = this.tree, z = this.zoom, scale = this.cssW / (t.total[z] || 1);
        if (t.depth[i] < t.depth[z]) return { x: 0, y: t.depth[i] * ROW, w: this.cssW, h: ROW - 1 };
        return { x: (t.x[i] - t.x[z]) * scale, y: t.depth[i] * ROW, w: t.total[i] * scale, h: ROW - 1 };
    }

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
        const r = this.el.getBoundingClientRect();
        const tx = (cx ?? r.left + px) - r.left + 14, ty = (cy ?? r.top + py) - r.top + 16;
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
        const kinds = ['', 'kernel', 'no name: symbols missing', 'marker', 'folded small frames', ''];
        lines.push(['b', String(t.names[nm])]);
        const file = String(t.files[nm] || '');
        if (file || kinds[t.kind[nm]]) lines.push(['f', [file, kinds[t.kind[nm]]].filter(Boolean).join(' · ')]);
        lines.push(['', `total ${fmtTime(t.total[i])} · ${fmtPct(t.total[i] / root)}` +
            (z > 0 && t.depth[i] >= t.depth[z] ? ` (${fmtPct(t.total[i] / t.total[z])} of the zoomed frame)` : '')]);
        lines.push(['', `self ${fmtTime(t.self[i])} · ${fmtPct(t.self[i] / root)}`]);
        if (this.diff) {
            const was = this.diff.rb ? this.diff.base[i] / this.diff.rb : 0;
            const d = this.diff.d[i];
            lines.push([d > 0 ? 'up' : d < 0 ? 'down' : '', `baseline ${fmtPct(was)} → ${fmtPct(t.total[i] / root)} (${d >= 0 ? '+' : ''}${fmtPct(d)})`]);
        }
        this.tip.replaceChildren(...lines.map(([c, s]) => {
            const div = document.createElement('div');
            if (c) div.className = c;
            div.textContent = s;
            return div;
        }));
    }
}
