// Where frames go: the graph reads top down, the root on the first row, a
// frame's callees under it, width = CPU time; zoomed into frame z, z spans
// the whole width and its ancestors are drawn full width above it. Pure
// functions of a tree (tree.js), the zoomed frame and the width in CSS
// pixels; tests: layout.test.js.

export const ROW = 18; // px per frame row

// The frames worth drawing: z's ancestors, then z's subtree without frames
// narrower than half a pixel (nor their descendants), in depth-first order,
// into vis (an Int32Array of t.n). Returns how many, and the deepest depth.
export function visibleFrames(t, z, width, vis) {
    const scale = width / (t.total[z] || 1), end = t.end, total = t.total, depth = t.depth;
    let nv = 0, maxD = depth[z];
    for (let a = t.parent[z]; a >= 0; a = t.parent[a]) vis[nv++] = a;
    for (let i = z; i < end[z];) {
        if (total[i] * scale < 0.5) { i = end[i]; continue; }
        vis[nv++] = i;
        if (depth[i] > maxD) maxD = depth[i];
        i++;
    }
    return { nv, maxD };
}

// The box of frame i in CSS pixels.
export function frameBox(t, z, width, i) {
    const scale = width / (t.total[z] || 1);
    if (t.depth[i] < t.depth[z]) return { x: 0, y: t.depth[i] * ROW, w: width, h: ROW - 1 };
    return { x: (t.x[i] - t.x[z]) * scale, y: t.depth[i] * ROW, w: t.total[i] * scale, h: ROW - 1 };
}

// The frame drawn at (px, py) in CSS pixels, or -1.
export function frameAt(t, z, width, px, py) {
    if (!t || !t.n || px < 0 || py < 0) return -1;
    const d = Math.floor(py / ROW), zd = t.depth[z];
    if (d < zd) {
        let a = z;
        while (t.depth[a] > d) a = t.parent[a];
        return a;
    }
    const scale = width / (t.total[z] || 1), ux = t.x[z] + px / scale;
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
