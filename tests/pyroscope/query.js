// Pyroscope's querier API of codexray-server called as Grafana's
// "Grafana Pyroscope" data source calls it: the real Connect client
// (@connectrpc/connect-node, pinned by package-lock.json) with code that
// protoc-gen-es generated from Pyroscope's .proto files (server/proto; `npx
// buf generate`, buf.gen.yaml), in binary protobuf and in JSON. Every answer
// is checked against our own API (/api/v1/...) for the same query, and the
// flame graph is rebuilt from its levels exactly as Grafana's levelsToTree
// does (grafana/grafana, pkg/tsdb/grafana-pyroscope-datasource) and compared
// node by node with our /api/v1/profile?format=flamegraph tree.
// The off-CPU and wall profile types are expected where some application
// has off-CPU time in [FROM_S, TO_S), and checked as CPU is.
// Usage: node query.js SERVER_URL READ_KEY APP FROM_S TO_S [open|keyed
//        [CPU_FROM_S CPU_TO_S]]
// ("open": the server has no read key, so a call without one is answered;
// with CPU_FROM_S and CPU_TO_S, APP must have off-CPU time in [FROM_S,
// TO_S), and [CPU_FROM_S, CPU_TO_S) holds profiles of CPU time alone, where
// CPU alone is offered)
// Prints one line per check; exits 1 on the first mismatch.
"use strict";
const { createClient, ConnectError, Code } = require("@connectrpc/connect");
const { createConnectTransport } = require("@connectrpc/connect-node");
const { QuerierService, ProfileFormat } = require("./gen/querier/v1/querier_pb");

const [url, key, app, fromS, toS, open, cpuFromS, cpuToS] = process.argv.slice(2);
const start = BigInt(fromS) * 1000n, end = BigInt(toS) * 1000n;
const TYPE = "process_cpu:cpu:nanoseconds:cpu:nanoseconds";
// [ID, name, sampleType, sampleUnit, periodType, periodUnit] and our type=.
const TYPES = [
    [[TYPE, "process_cpu", "cpu", "nanoseconds", "cpu", "nanoseconds"], "cpu"],
    [["off_cpu:off_cpu:nanoseconds:cpu:nanoseconds", "off_cpu", "off_cpu", "nanoseconds", "cpu",
      "nanoseconds"], "off_cpu"],
    [["wall:wall:nanoseconds:cpu:nanoseconds", "wall", "wall", "nanoseconds", "cpu",
      "nanoseconds"], "wall"],
];

function fail(msg) {
    console.error("FAIL: " + msg);
    process.exit(1);
}

function same(what, got, want) {
    const g = JSON.stringify(got), w = JSON.stringify(want);
    if (g !== w)
        fail(`${what}:\n  got  ${g.slice(0, 2000)}\n  want ${w.slice(0, 2000)}`);
    console.log(`ok ${what}`);
}

async function ours(path) {
    const r = await fetch(url + path, { headers: { Authorization: "Bearer " + key } });
    if (r.status !== 200)
        fail(`${path}: ${r.status} ${await r.text()}`);
    return r.json();
}

function client(binary, withKey = true) {
    const transport = createConnectTransport({
        baseUrl: url,
        httpVersion: "1.1",
        useBinaryFormat: binary,
        interceptors: withKey ? [(next) => async (req) => {
            req.header.set("Authorization", "Bearer " + key);
            return next(req);
        }] : [],
    });
    return createClient(QuerierService, transport);
}

// Grafana's levelsToTree, step by step: each level's items are given as
// [offset from the previous item's end, total, self, name index]; an item
// goes to the first parent (of the level above, in order) whose span holds
// it; the root's name is names[levels[0].values[0]].
function levelsToTree(levels, names) {
    if (levels.length === 0)
        return null;
    const v0 = levels[0].values.map(Number);
    const tree = { start: 0, value: v0[1], self: v0[2], name: names[v0[0]], nodes: [] };
    let parents = [tree];
    for (let level = 1; level < levels.length; level++) {
        if (parents.length === 0)
            fail(`levelsToTree: no parents left at level ${level}`);
        const values = levels[level].values.map(Number);
        const next = [];
        let parent = parents.shift();
        let offset = 0;
        for (let i = 0; i < values.length;) {
            const itemStart = values[i] + offset, itemValue = values[i + 1];
            const itemEnd = itemStart + itemValue, parentEnd = parent.start + parent.value;
            if (itemStart >= parent.start && itemEnd <= parentEnd) {
                const item = { start: itemStart, value: itemValue, self: values[i + 2],
                               name: names[values[i + 3]], nodes: [] };
                parent.nodes.push(item);
                next.push(item);
                i += 4;
                offset = itemEnd;
            } else {
                if (parents.length === 0)
                    fail(`levelsToTree: item ${i / 4} of level ${level} fits no parent`);
                parent = parents.shift();
            }
        }
        parents = next;
    }
    return tree;
}

// Both trees as {name, value, self, children} in their order.
function plain(t) {
    return { name: t.name, value: t.value, self: t.self, children: t.nodes.map(plain) };
}

// Our /api/v1/profile?format=flamegraph: nodes depth-first, four numbers a
// node (name, total, self, children); the root named "total" as Pyroscope
// names it.
function ourTree(fg) {
    let i = 0;
    function node() {
        const [n, total, self, kids] = fg.nodes.slice(i, i + 4);
        i += 4;
        const t = { name: i === 4 ? "total" : fg.names[n], value: total, self, children: [] };
        for (let k = 0; k < kids; k++)
            t.children.push(node());
        return t;
    }
    return node();
}

async function expectCode(what, p, code) {
    try {
        await p;
    } catch (e) {
        const ce = ConnectError.from(e);
        if (ce.code !== code)
            fail(`${what}: code ${Code[ce.code]} (${ce.rawMessage}), want ${Code[code]}`);
        console.log(`ok ${what}: ${Code[code]}: ${ce.rawMessage}`);
        return;
    }
    fail(`${what}: no error`);
}

async function run(binary) {
    const c = client(binary), tag = binary ? "binary" : "json";
    const sel = `{service_name="${app}"}`;

    // The applications with off-CPU time (ours): the off-CPU and wall types
    // are offered when there is one, and the off-CPU type selects them.
    const offApps = (await ours(`/api/v1/applications?from=${fromS}&to=${toS}&type=off_cpu`))
        .applications.filter((a) => a.off_cpu_cores > 0).map((a) => a.name).sort();
    if (cpuFromS && !offApps.includes(app))
        fail(`${app} has no off-CPU time: ${JSON.stringify(offApps)}`);
    const types = offApps.length ? TYPES : TYPES.slice(0, 1);
    const fields = (t) => [t.ID, t.name, t.sampleType, t.sampleUnit, t.periodType, t.periodUnit];
    const pt = await c.profileTypes({ start, end });
    same(`${tag} ProfileTypes`, pt.profileTypes.map(fields), types.map((t) => t[0]));
    if (cpuFromS) {
        const cpuOnly = await c.profileTypes({ start: BigInt(cpuFromS) * 1000n,
                                               end: BigInt(cpuToS) * 1000n });
        same(`${tag} ProfileTypes where no profile has off-CPU time`,
             cpuOnly.profileTypes.map(fields), [TYPES[0][0]]);
        const offSvc = await c.labelValues({ name: "service_name", start, end,
            matchers: [`{__profile_type__="${TYPES[1][0][0]}"}`] });
        same(`${tag} LabelValues service_name of the off-CPU type`, offSvc.names, offApps);
    }

    const apps = (await ours(`/api/v1/applications?from=${fromS}&to=${toS}`)).applications;
    const mine = apps.find((a) => a.name === app);
    if (!mine)
        fail(`${app} is not among /api/v1/applications`);
    const svc = await c.labelValues({ name: "service_name", start, end });
    same(`${tag} LabelValues service_name`, svc.names, apps.map((a) => a.name).sort());
    const hosts = await c.labelValues({ name: "host", matchers: [sel], start, end });
    same(`${tag} LabelValues host ${sel}`, hosts.names, [...mine.hosts].sort());

    // Our labels: host, pid, the identity keys, and the profiles' other
    // labels (a Pyroscope SDK's tags) under "labels".
    const raw = await ours(`/api/v1/labels?app=${app}&from=${fromS}&to=${toS}`);
    const others = raw.labels || {};
    const labels = { ...raw, ...others };
    delete labels.labels;
    const names = await c.labelNames({ matchers: [sel], start, end });
    const want = ["service_name", ...Object.keys(labels).filter((k) => labels[k].length)].sort();
    same(`${tag} LabelNames ${sel}`, names.names, want);
    for (const k of Object.keys(labels).filter((k) => k !== "host" && labels[k].length)) {
        const v = await c.labelValues({ name: k, matchers: [sel], start, end });
        same(`${tag} LabelValues ${k} ${sel}`, v.names, [...labels[k]].sort());
    }

    const step = 60;
    for (const [[TYPE], ours_t] of types) {
        // SelectSeries: the type's ns a step; our timeline has cores (ns / step ns).
        const tl = await ours(`/api/v1/timeline?app=${app}&from=${fromS}&to=${toS}&step=${step}` +
                              `&type=${ours_t}`);
        const ss = await c.selectSeries({ profileTypeID: TYPE, labelSelector: sel, start, end, step,
                                          groupBy: ["service_name"] });
        if (ss.series.length !== 1)
            fail(`${tag} ${ours_t} SelectSeries: ${ss.series.length} series, want 1`);
        same(`${tag} ${ours_t} SelectSeries labels`, ss.series[0].labels.map((l) => [l.name, l.value]),
             [["service_name", app]]);
        const got = ss.series[0].points.map((p) => [Number(p.timestamp), p.value / (step * 1e9)]);
        const wantPts = tl[`${ours_t}_cores`].map((v, i) => [Math.round((tl.from + i * step) * 1000), v]);
        if (got.length !== wantPts.length)
            fail(`${tag} ${ours_t} SelectSeries: ${got.length} points, want ${wantPts.length}`);
        for (let i = 0; i < got.length; i++)
            if (got[i][0] !== wantPts[i][0] || Math.abs(got[i][1] - wantPts[i][1]) > 1e-9 * Math.max(1, wantPts[i][1]))
                fail(`${tag} ${ours_t} SelectSeries point ${i}: ${got[i]} want ${wantPts[i]}`);
        console.log(`ok ${tag} ${ours_t} SelectSeries: ${got.length} points as /api/v1/timeline`);
        const byHost = await c.selectSeries({ profileTypeID: TYPE, labelSelector: sel, start, end,
                                              step, groupBy: ["host"] });
        // The hosts with some of the type (our timeline of each).
        const hostsWith = [];
        for (const h of mine.hosts) {
            const th = await ours(`/api/v1/timeline?app=${app}&host=${h}&from=${fromS}&to=${toS}` +
                                  `&step=${step}&type=${ours_t}`);
            if (th[`${ours_t}_cores`].some((v) => v > 0))
                hostsWith.push(h);
        }
        if (cpuFromS && ours_t === "off_cpu" && hostsWith.length === mine.hosts.length)
            fail(`every host of ${app} has off-CPU time: the test wants one without`);
        same(`${tag} ${ours_t} SelectSeries by host`, byHost.series.map((s) => s.labels[0].value).sort(),
             hostsWith.sort());

        // SelectMergeStacktraces, with and without max_nodes, by = and by regex.
        for (const [selector, maxNodes] of [[sel, 0n], [sel, 5n],
                                             [`{service_name=~"${app}|no-such-app", host!="no-such-host"}`, 0n]]) {
            const r = await c.selectMergeStacktraces({ profileTypeID: TYPE, labelSelector: selector,
                                                       start, end, maxNodes });
            const fg = r.flamegraph;
            const tree = plain(levelsToTree(fg.levels, fg.names));
            const q = `app=${app}&from=${fromS}&to=${toS}&format=flamegraph&type=${ours_t}` +
                      (maxNodes ? `&max_nodes=${maxNodes}` : "");
            const our = ourTree(await ours(`/api/v1/profile?${q}`));
            same(`${tag} ${ours_t} SelectMergeStacktraces ${selector} max_nodes=${maxNodes} (levelsToTree)`,
                 tree, our);
            if (Number(fg.total) !== our.value)
                fail(`${tag} ${ours_t} flamegraph total ${fg.total} want ${our.value}`);
        }
        // Every application with some of the type is a series of it.
        const all = await c.selectSeries({ profileTypeID: TYPE, labelSelector: "{}", start, end,
                                           step, groupBy: ["service_name"] });
        same(`${tag} ${ours_t} SelectSeries {} by service_name`,
             all.series.map((s) => s.labels[0].value).sort(),
             ours_t === "off_cpu" ? offApps : apps.map((a) => a.name).sort());
    }

    // The other labels: each value selected (=) as our label.KEY=VALUE
    // selects it, all of them by a regular expression, and group_by.
    for (const [k, vals] of Object.entries(others)) {
        for (const v of vals) {
            const selector = `{service_name="${app}", ${k}="${v}"}`;
            const r = await c.selectMergeStacktraces({ profileTypeID: TYPE, labelSelector: selector,
                                                       start, end });
            const q = `app=${app}&from=${fromS}&to=${toS}&format=flamegraph&label.${k}=` +
                      encodeURIComponent(v);
            const our = ourTree(await ours(`/api/v1/profile?${q}`));
            same(`${tag} SelectMergeStacktraces ${selector} (levelsToTree)`,
                 plain(levelsToTree(r.flamegraph.levels, r.flamegraph.names)), our);
            if (our.value <= 0)
                fail(`${tag} ${selector}: nothing selected`);
        }
        const none = await c.selectMergeStacktraces({ profileTypeID: TYPE, start, end,
            labelSelector: `{service_name="${app}", ${k}!~"${vals.join("|")}"}` });
        const all = await c.selectMergeStacktraces({ profileTypeID: TYPE, start, end,
            labelSelector: `{service_name="${app}", ${k}=~".+"}` });
        const whole = ourTree(await ours(`/api/v1/profile?app=${app}&from=${fromS}&to=${toS}` +
                                         "&format=flamegraph"));
        same(`${tag} ${k}=~".+" and ${k}!~ its values: the whole`,
             Number(all.flamegraph.total) + Number(none.flamegraph.total), whole.value);
        const g = await c.selectSeries({ profileTypeID: TYPE, labelSelector: sel, start, end, step,
                                         groupBy: [k] });
        const sums = {};
        for (const s of g.series) {
            const l = s.labels.find((x) => x.name === k);
            sums[l ? l.value : ""] = s.points.reduce((a, p) => a + p.value, 0);
        }
        const wantSums = {};
        for (const v of vals) {
            const t = await ours(`/api/v1/timeline?app=${app}&from=${fromS}&to=${toS}&step=${step}` +
                                 `&label.${k}=${encodeURIComponent(v)}`);
            wantSums[v] = Math.round(t.cpu_cores.reduce((a, x) => a + x, 0) * step * 1e9);
        }
        for (const v of Object.keys(sums))
            sums[v] = Math.round(sums[v]);
        delete sums[""];
        same(`${tag} SelectSeries group_by ${k}: CPU by value as our timelines`,
             Object.entries(sums).sort(), Object.entries(wantSums).sort());
    }

    // Errors as Connect errors.
    await expectCode(`${tag} bad selector`, c.selectMergeStacktraces({ profileTypeID: TYPE,
        labelSelector: "{service_name=}", start, end }), Code.InvalidArgument);
    await expectCode(`${tag} bad regex`, c.selectMergeStacktraces({ profileTypeID: TYPE,
        labelSelector: '{service_name=~"("}', start, end }), Code.InvalidArgument);
    await expectCode(`${tag} other profile type`, c.selectSeries({
        profileTypeID: "memory:alloc_space:bytes:space:bytes", labelSelector: sel, start, end,
        step: 60 }), Code.InvalidArgument);
    await expectCode(`${tag} tree format`, c.selectMergeStacktraces({ profileTypeID: TYPE,
        labelSelector: sel, start, end, format: ProfileFormat.TREE }), Code.Unimplemented);
    if (open !== "open")
        await expectCode(`${tag} no key`, client(binary, false).profileTypes({}),
                         Code.Unauthenticated);
}

(async () => {
    await run(true);
    await run(false);
    console.log("all ok");
})().catch((e) => fail(e.stack || String(e)));
