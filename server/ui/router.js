// The URL's hash is the view: "#/PART/PART?k=v&...". parseHash and hashOf
// are pure (tests: router.test.js); navigate and update change the URL and
// call the route handler the entry module set with onRoute.

let routeHandler = () => {};
export function onRoute(fn) { routeHandler = fn; }

// A hash ("#/app/x?from=now-1h") as its decoded path parts and parameters.
export function parseHash(hash = location.hash) {
    const raw = hash.replace(/^#/, '') || '/';
    const q = raw.indexOf('?');
    const path = q < 0 ? raw : raw.slice(0, q);
    return {
        parts: path.split('/').filter(Boolean).map(decodeURIComponent),
        p: new URLSearchParams(q < 0 ? '' : raw.slice(q + 1)),
    };
}

// The hash of path parts and parameters, empty parameters left out.
export function hashOf(parts, p) {
    const clean = new URLSearchParams();
    for (const [k, v] of p) if (v !== '' && v !== null) clean.set(k, v);
    const qs = clean.toString();
    return '#/' + parts.map(encodeURIComponent).join('/') + (qs ? '?' + qs : '');
}

// Changes the URL; replace = no new history entry (typing in a box). The
// view follows at once, in the caller's task: through the history API,
// not location.hash, which would wait for a hashchange task and first
// scroll to the fragment (a layout of the page) on every zoom. Back and
// forward still come as hashchange events (app.js).
export function navigate(parts, p, replace) {
    const url = hashOf(parts, p);
    if (url === location.hash) return;
    if (replace) history.replaceState(null, '', url);
    else history.pushState(null, '', url);
    routeHandler();
}

// Changes some parameters of the current view; null or '' removes one.
export function update(changes, replace) {
    const { parts, p } = parseHash();
    for (const [k, v] of Object.entries(changes)) {
        if (v === null || v === undefined || v === '') p.delete(k); else p.set(k, v);
    }
    navigate(parts, p, replace);
}
