// A tree the server trimmed (max_nodes: the smallest frames folded into an
// "other" child of their parent, every total kept) made whole where the
// user looks: the page asks the server for the stacks under one frame
// (/api/v1/profile?focus=PATH) and puts that subtree in place of the
// trimmed one, or for the paths down to the frames a search matches
// (search=TERM) and merges them in. Pure functions; tests: graft.test.js.
import { parseTree, resolvePath } from './tree.js';

// The node whose subtree the page should fetch whole for a zoom to path
// (names from the root's child down), or -1 when nothing under the zoom
// was folded. z: where path resolves in t (resolvePath). A zoom into a
// folded "other" frame, or to a path that stops at a parent with an
// "other" child (a frame folded since the URL was made), asks for the
// parent; the root is never asked for (it is the whole tree, trimmed on
// purpose).
export function focusTarget(t, z, path) {
    if (!t.n || z < 0) return -1;
    if (t.name[z] === 1) z = t.parent[z];
    if (z <= 0) return -1;
    const fb = foldedBefore(t);
    if (fb[t.end[z]] - fb[z + 1] === 0) return -1;
    if (t.depth[z] >= path.length) return z;
    // A path that stops short at z: only a folded child of z itself could
    // hold the rest of it.
    for (let c = z + 1; c < t.end[z]; c = t.end[c]) if (t.name[c] === 1) return z;
    return -1;
}

// Folded frames before each node, counted once a tree: a zoom then asks in
// O(1) whether its subtree holds one.
function foldedBefore(t) {
    if (!t.foldedBefore) {
        const fb = new Int32Array(t.n + 1);
        for (let i = 0; i < t.n; i++) fb[i + 1] = fb[i] + (t.name[i] === 1 ? 1 : 0);
        t.foldedBefore = fb;
    }
    return t.foldedBefore;
}

// Whether the server folded any frame of t into an "other".
export function hasFolded(t) {
    return t.n > 0 && foldedBefore(t)[t.n] > 0;
}

// Each node's number of children (the server's "nodes" field).
function childCounts(t) {
    const kids = new Int32Array(t.n);
    for (let i = 1; i < t.n; i++) kids[t.parent[i]]++;
    return kids;
}

// t with node z's subtree replaced by the same frame's subtree in sub (a
// parsed tree of the stacks under z's path, as focus= answers). Returns a
// new tree (as parseTree's; its names t's with sub's new ones appended), or
// null when sub does not hold z with z's exact total (the range's data
// changed between the two answers): a graft would break the sums.
export function graftSubtree(t, z, path, sub) {
    const zz = resolvePath(sub, path);
    if (zz < 0 || sub.depth[zz] !== path.length || sub.total[zz] !== t.total[z] || t.depth[z] !== path.length) {
        return null;
    }
    const { names, files, map } = unionNames(t, sub);
    const tk = childCounts(t), sk = childCounts(sub);
    const zEnd = t.end[z], sEnd = sub.end[zz];
    const n = z + (sEnd - zz) + (t.n - zEnd);
    const nodes = new Array(4 * n);
    let o = 0;
    const put = (nm, total, self, kids) => { nodes[o++] = nm; nodes[o++] = total; nodes[o++] = self; nodes[o++] = kids; };
    for (let i = 0; i < z; i++) put(t.name[i], t.total[i], t.self[i], tk[i]);
    for (let i = zz; i < sEnd; i++) put(map[sub.name[i]], sub.total[i], sub.self[i], sk[i]);
    for (let i = zEnd; i < t.n; i++) put(t.name[i], t.total[i], t.self[i], tk[i]);
    return parseTree({
        names, files, nodes, unit: t.unit, samples: t.samples, profiles: t.profiles, off_cpu: t.offCpu,
    });
}

// t's names and files with sub's new ones appended (a name is its text and
// file), and map: sub's name index -> the result's.
function unionNames(t, sub) {
    const names = t.names.slice(), files = t.files.slice();
    const key = (nm, f) => nm + '\0' + (f || '');
    const idx = new Map();
    for (let i = 0; i < names.length; i++) idx.set(key(names[i], files[i]), i);
    const map = new Int32Array(sub.names.length);
    for (let i = 0; i < sub.names.length; i++) {
        if (i < 2) { map[i] = i; continue; }
        const k = key(sub.names[i], sub.files[i]);
        let j = idx.get(k);
        if (j === undefined) { j = names.length; names.push(sub.names[i]); files.push(sub.files[i] || ''); idx.set(k, j); }
        map[i] = j;
    }
    return { names, files, map };
}

// t with the frames of s put in place, s a tree of the same range that
// the server trimmed another way (search=: the paths down to the frames a
// search matches, the rest of each frame in "other"), every total exact in
// both. A frame in both stays; one t folded comes from s with its subtree;
// each frame's "other" is then what its self and its children shown leave
// (none when nothing). Returns a new tree (as parseTree's), or null when
// the two disagree on a frame's time (the range's data changed between
// the answers).
export function mergeTrees(t, s) {
    if (!t.n || !s.n) return null;
    const { names, files, map } = unionNames(t, s);
    const tk = childCounts(t), sk = childCounts(s);
    const nodes = [];
    const put = (nm, total, self, kids) => { nodes.push(nm, total, self, kids); };
    const copy = (tr, i, kids, mp) => {
        for (let j = i; j < tr.end[i]; j++) put(mp ? mp[tr.name[j]] : tr.name[j], tr.total[j], tr.self[j], kids[j]);
    };
    const shown = (tr, i) => {
        const out = [];
        for (let c = i + 1; c < tr.end[i]; c = tr.end[c]) if (tr.name[c] !== 1) out.push(c);
        return out;
    };
    // Frame ti of t and si of s, the same frame: children from both, widest first.
    const both = (ti, si) => {
        if (t.total[ti] !== s.total[si] || t.self[ti] !== s.self[si]) return false;
        const fromS = new Map(shown(s, si).map((c) => [map[s.name[c]], c]));
        const kids = [];
        for (const c of shown(t, ti)) {
            kids.push([t.total[c], c, fromS.has(t.name[c]) ? fromS.get(t.name[c]) : -1]);
            fromS.delete(t.name[c]);
        }
        for (const c of fromS.values()) kids.push([s.total[c], -1, c]);
        kids.sort((a, b) => b[0] - a[0]);
        let other = t.total[ti] - t.self[ti];
        for (const k of kids) other -= k[0];
        if (other < 0) return false;
        put(t.name[ti], t.total[ti], t.self[ti], kids.length + (other > 0 ? 1 : 0));
        for (const [, tc, sc] of kids) {
            if (tc >= 0 && sc >= 0) {
                if (!both(tc, sc)) return false;
            } else if (tc >= 0) copy(t, tc, tk, null);
            else copy(s, sc, sk, map);
        }
        if (other > 0) put(1, other, other, 0);
        return true;
    };
    if (!both(0, 0)) return null;
    return parseTree({
        names, files, nodes, unit: t.unit, samples: t.samples, profiles: t.profiles, off_cpu: t.offCpu,
    });
}
