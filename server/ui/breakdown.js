// The CPU of the application broken down by a label (by=LABEL in the URL):
// per value its share of the range and a small timeline, from
// /api/v1/timeline?group_by=LABEL (the server keeps the top values, the
// rest as "other"); a click on a value filters the page to it. Pure
// (tests: breakdown.test.js); the panel is breakdown_view.js.

import { seriesOf } from './value_type.js';

// The labels a breakdown can be by, as the server names them.
export const BREAKDOWN_LABELS = ['host', 'pid', 'container', 'pod', 'namespace', 'container_id', 'systemd_unit'];
// The identity labels the page filters by (host and pid have their own boxes).
export const IDENTITY_FILTERS = ['container_id', 'pod', 'namespace', 'container', 'systemd_unit'];
// How many values the server keeps (the rest is "other").
export const BREAKDOWN_TOP = 10;

// The server's answer as table rows, biggest share first, other last:
// { value (null: other), label, share, cores (per step), mean (cores) }.
export function rowsOf(tl) {
    const rows = (tl.groups || []).map((g) => {
        const cores = seriesOf(g, tl.type || 'cpu');
        const mean = cores.length ? cores.reduce((a, b) => a + b, 0) / cores.length : 0;
        return { value: g.value ?? null, label: g.value ?? 'other', share: g.share || 0, cores, mean };
    });
    rows.sort((a, b) => (a.value === null) - (b.value === null) || b.share - a.share);
    return rows;
}
