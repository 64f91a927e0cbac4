// Colours: a frame's by its kind and group (a package's frames share a hue,
// each name its own shade), and the diff's scale from blue (shrank) through
// grey to red (grew). Pure functions; tests: colors.test.js.
import { KIND } from './classify.js';

// FNV-1a of a string: the same colour for the same name on every load.
export function hash(s) {
    let h = 2166136261;
    for (let i = 0; i < s.length; i++) {
        h ^= s.charCodeAt(i);
        h = Math.imul(h, 16777619);
    }
    return h >>> 0;
}

// The hues of Python frames, inclusive (the browser test checks them).
export const PY_HUE = [90, 150];

const groupHash = new Map(); // a group's hash, once: groups repeat

// The fill of a frame of this kind, group and name, as "hsl(h,s%,l%)".
export function colorFor(kind, group, name) {
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
        // Greens, between user code's warm hues (0-55) and the kernel's blues.
        case KIND.PYTHON: {
            const h = PY_HUE[0] + (g % (PY_HUE[1] - PY_HUE[0] + 1));
            return `hsl(${h},${44 + (n % 18)}%,${52 + ((g >>> 8) % 8) + (n % 6)}%)`;
        }
        default: return `hsl(${(g % 56)},${68 + (n % 18)}%,${54 + ((g >> 8) % 8) + (n % 6)}%)`;
    }
}

// The diff's 21 steps: index 0 shrank most, 10 unchanged, 20 grew most.
export const DIFF_COLORS = [];
for (let k = -10; k <= 10; k++) {
    const t = Math.abs(k) / 10;
    DIFF_COLORS.push(k === 0 ? 'hsl(0,0%,82%)'
        : k > 0 ? `hsl(0,${45 + 45 * t}%,${84 - 30 * t}%)` : `hsl(215,${45 + 45 * t}%,${84 - 30 * t}%)`);
}

// The diff colour of a change d (a share of the whole) against the largest
// change max: saturates at +-max.
export function diffColor(d, max) {
    const s = Math.round(Math.max(-1, Math.min(1, d / max)) * 10);
    return DIFF_COLORS[s + 10];
}
