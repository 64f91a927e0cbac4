// The server's read API (/api/v1/...).

// The server's read key (--read-api-key), when it has one: asked for at
// the first 401 and kept in this tab's session storage (not across
// sessions, not in the URL), sent as Authorization: Bearer on every call.
const READ_KEY = 'codexray.readKey';

// GET path with params (empty ones left out): the parsed JSON, or the text
// with asText. Throws an Error saying what failed (the server's message).
export async function api(path, params, asText) {
    const q = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== ''));
    const url = path + '?' + q;
    let res;
    for (let tries = 0; tries < 3; tries++) {
        const key = sessionStorage.getItem(READ_KEY) || '';
        try {
            res = await fetch(url, key ? { headers: { Authorization: `Bearer ${key}` } } : undefined);
        } catch (e) {
            throw new Error('cannot reach codexray-server: is it running, and is this page served by it?');
        }
        if (res.status !== 401) break;
        // Calls made at once all come back 401: only the first asks, the
        // others find the new key and try again.
        if ((sessionStorage.getItem(READ_KEY) || '') === key) {
            const given = window.prompt('This server asks for its read API key (--read-api-key):');
            if (!given) break;
            sessionStorage.setItem(READ_KEY, given.trim());
        }
    }
    const body = await res.text();
    if (!res.ok) {
        let msg = body;
        try { msg = JSON.parse(body).error; } catch (e) { /* not JSON */ }
        throw new Error(`${url.split('?')[0]}: ${res.status} ${msg}`);
    }
    return asText ? body : JSON.parse(body);
}
