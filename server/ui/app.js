// The CodeXray web UI: the applications list (page_apps.js) and each
// application's Profiling tab (page_app.js). Every view is the URL's hash
// (router.js): this module routes it to its page.
//   #/?from=now-1h&to=now&q=FILTER
//   #/app/NAME?from=&to=&host=&pid=&q=SEARCH&zoom=a;b;c&collapse=1&sort=self|total&fn=FILTER
//              &diff=1&bfrom=&bto=&bhost=&bpid=
import { cx, message, view } from './dom.js';
import { appZoomed, leaveApp, renderApp } from './page_app.js';
import { renderApps } from './page_apps.js';
import { onRoute, parseHash, update } from './router.js';

function route() {
    const { parts, p } = parseHash();
    try {
        if (parts[0] === 'app' && parts[1]) { document.title = `${parts[1]} · CodeXray`; return renderApp(parts, p); }
        leaveApp();
        document.title = 'Applications · CodeXray';
        return renderApps(p);
    } catch (e) {
        view.replaceChildren(message('error', 'Something went wrong', e.message));
    }
}

window.addEventListener('error', (e) => cx.errors.push(String(e.message)));
window.addEventListener('unhandledrejection', (e) => cx.errors.push(String(e.reason)));
window.addEventListener('hashchange', route);
window.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && appZoomed() && document.activeElement.tagName !== 'INPUT') update({ zoom: null });
});
onRoute(route);
route();
