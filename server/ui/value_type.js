// What the Profiling tab measures (type= in the URL, the server's type=):
// CPU time, off-CPU time (threads blocked: locks, I/O, sleeps, idle
// pools; recorded by the agent unless started with --no-off-cpu) or wall time, the two
// on one tree. Pure (tests: value_type.test.js).

// [type, the selector's label, what the page calls it, the timeline's unit]
export const VALUE_TYPES = [
    ['cpu', 'CPU', 'CPU', 'cores'],
    ['off_cpu', 'Off-CPU', 'off-CPU time', 'threads waiting'],
    ['wall', 'Wall', 'wall time', 'threads'],
];

// The type a URL's parameters ask for: cpu unless another known one.
export function typeOf(p) {
    const t = p.get('type');
    return VALUE_TYPES.some(([v]) => v === t) ? t : 'cpu';
}

// The parameter the server takes: '' for cpu (its default, left out of the URL).
export function typeParam(type) { return type === 'cpu' ? '' : type; }

// What the page calls type's time ("CPU", "off-CPU time", "wall time").
export function nounOf(type) { return (VALUE_TYPES.find(([v]) => v === type) || VALUE_TYPES[0])[2]; }

// The unit of type's timeline ("cores", "threads waiting", "threads").
export function unitOf(type) { return (VALUE_TYPES.find(([v]) => v === type) || VALUE_TYPES[0])[3]; }

// A timeline's series (the server names it TYPE_cores: cpu_cores,
// off_cpu_cores, wall_cores), of the answer's type unless given; [] when none.
export function seriesOf(tl, type = tl.type || 'cpu') {
    return tl[`${type}_cores`] || [];
}
