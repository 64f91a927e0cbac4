"""Kubernetes without a cluster (none runs here): every object of the
manifest checked against the API's own models (Debian's python3-kubernetes),
unknown fields and wrong types refused, required fields required; a planted
error proves the check fails; and the DaemonSet's agent container run as a
real container with the flags, mounts, limits and environment the manifest
gives it."""
import copy
import os
import re
import subprocess
import time

import yaml
from common import (BUILD, HOSTNAME, ROOT, Failure, apps, check, free_port, labels, stop_proc,
                    wait_for)

MANIFEST = os.path.join(ROOT, "deploy", "kubernetes", "node-agent.yaml")
# The models of the kinds a manifest may hold, by apiVersion and kind.
KINDS = {("v1", "Namespace"): "V1Namespace", ("v1", "ServiceAccount"): "V1ServiceAccount",
         ("apps/v1", "DaemonSet"): "V1DaemonSet", ("apps/v1", "Deployment"): "V1Deployment",
         ("v1", "PersistentVolumeClaim"): "V1PersistentVolumeClaim",
         ("v1", "Service"): "V1Service"}


def typed_errors(value, type_name, path, models):
    """Every way value is not of the model type type_name ('V1PodSpec',
    'list[V1Container]', 'dict(str, str)', 'str', 'int', 'bool', 'object')."""
    errs = []
    m = re.fullmatch(r"list\[(.+)\]", type_name)
    if m:
        if not isinstance(value, list):
            return [f"{path}: a list expected, got {type(value).__name__}"]
        for i, v in enumerate(value):
            errs += typed_errors(v, m.group(1), f"{path}[{i}]", models)
        return errs
    m = re.fullmatch(r"dict\(str, (.+)\)", type_name)
    if m:
        if not isinstance(value, dict):
            return [f"{path}: a map expected, got {type(value).__name__}"]
        for k, v in value.items():
            errs += typed_errors(v, m.group(1), f"{path}.{k}", models)
        return errs
    prim = {"str": str, "int": int, "bool": bool, "float": (int, float)}
    if type_name in prim:
        ok = isinstance(value, prim[type_name]) and not (
            type_name == "int" and isinstance(value, bool))
        return [] if ok else [f"{path}: {type_name} expected, got {value!r}"]
    if type_name == "object":  # IntOrString and friends: a scalar
        return [] if isinstance(value, (str, int)) and not isinstance(value, bool) else \
            [f"{path}: a string or a number expected, got {value!r}"]
    cls = getattr(models, type_name)
    if not isinstance(value, dict):
        return [f"{path}: a {type_name} object expected, got {value!r}"]
    by_json = {j: a for a, j in cls.attribute_map.items()}
    for k, v in value.items():
        if k not in by_json:
            errs.append(f"{path}.{k}: no such field in {type_name}")
        else:
            errs += typed_errors(v, cls.openapi_types[by_json[k]], f"{path}.{k}", models)
    if not errs:
        # The model's own constructor refuses a missing required field.
        try:
            cls(**{by_json[k]: v for k, v in value.items()})
        except ValueError as e:
            errs.append(f"{path}: {e}")
    return errs


def manifest_errors(docs):
    import kubernetes.client as models
    errs = []
    for i, d in enumerate(docs):
        kind = KINDS.get((d.get("apiVersion"), d.get("kind")))
        if not kind:
            errs.append(f"object {i}: unknown apiVersion/kind {d.get('apiVersion')}/{d.get('kind')}")
            continue
        errs += typed_errors(d, kind, f"{d['kind']}/{d.get('metadata', {}).get('name')}", models)
    return errs


def load():
    with open(MANIFEST) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def test_kubernetes_manifest_typed(tmp):
    docs = load()
    check(len(docs) == 6, f"{len(docs)} objects in the manifest")
    errs = manifest_errors(docs)
    check(not errs, "the manifest against the API's models:\n  " + "\n  ".join(errs))
    # Planted errors: each must be found, or the check proves nothing.
    bad = copy.deepcopy(docs)
    by_kind = {d["kind"]: d for d in bad}
    by_kind["DaemonSet"]["spec"]["template"]["spec"]["hostPid"] = True  # misspelt
    by_kind["Deployment"]["spec"]["replicas"] = "1"                     # a string
    del by_kind["DaemonSet"]["spec"]["template"]["spec"]["containers"][0]["name"]  # required
    errs = manifest_errors(bad)
    for want in ("spec.hostPid: no such field", "spec.replicas: int expected",
                 "must not be `None`"):
        check(any(want in e for e in errs), f"the planted error {want!r} was not found: {errs}")
    print(f"    {len(docs)} objects checked; planted errors found: {len(errs)}")


def daemonset_container(eng, tmp, cid):
    """The DaemonSet's agent as the kubelet would start it, on the container
    engine at hand: its image, hostPID, security context, limits, hostPath
    mounts and environment; the names of web-1 must come through."""
    ds = next(d for d in load() if d["kind"] == "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    c = pod["containers"][0]
    sc = c["securityContext"]
    args = ["run", "-d", *eng.run_extra, "--name", "cx-ds-agent"]
    # Sandbox: no bridge network here (a pod would have the cluster's).
    args += ["--network", "host"]
    check(pod.get("hostPID") is True, "hostPID")
    args += ["--pid", "host"]
    check(not sc.get("privileged"), "the DaemonSet asks for privileged")
    caps = sc["capabilities"]
    for cap in caps.get("drop", []):
        args += ["--cap-drop", cap]
    for cap in caps.get("add", []):
        if cap == "SYS_RESOURCE":
            continue  # Sandbox: not granted to any container here
        args += ["--cap-add", cap]
    if sc.get("seccompProfile", {}).get("type") == "Unconfined":
        args += ["--security-opt", "seccomp=unconfined"]
    if sc.get("allowPrivilegeEscalation") is False:
        args += ["--security-opt", "no-new-privileges"]
    if sc.get("readOnlyRootFilesystem"):
        args += ["--read-only"]
    if "runAsUser" in sc:
        args += ["--user", str(sc["runAsUser"])]
    lim = c["resources"]["limits"]
    args += ["--cpus", str(lim["cpu"]), "--memory", lim["memory"].replace("Mi", "m")]
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    spool = os.path.join(tmp, "ds-spool")
    os.makedirs(spool, exist_ok=True)
    for m in c.get("volumeMounts", []):
        host = vols[m["name"]]["hostPath"]["path"]
        if host == "/var/lib/codexray-agent":
            host = spool  # Test: a private spool, not the host's
        args += ["-v", f"{host}:{m['mountPath']}{':ro' if m.get('readOnly') else ''}"]
    for e in c.get("env", []):
        if "value" in e:
            val = e["value"]
            if e["name"] == "CODEXRAY_ENDPOINT":
                # No cluster DNS here: the Service's address is this server's.
                val = "http://127.0.0.1:@PORT@"
            args += ["-e", f"{e['name']}={val}"]
        elif e["valueFrom"].get("fieldRef", {}).get("fieldPath") == "spec.nodeName":
            args += ["-e", f"{e['name']}={HOSTNAME}"]  # the node's name
        elif not e["valueFrom"].get("secretKeyRef", {}).get("optional"):
            raise Failure(f"an env var the test cannot give: {e}")
    args += ["-e", "CODEXRAY_INTERVAL=5", c["image"].split(":")[0]]
    if not args[-1].endswith("codexray-node-agent"):
        raise Failure(f"image {c['image']}")
    # A server of its own (the host's build), so that what it shows came
    # from this agent alone.
    port = free_port()
    srv = subprocess.Popen([os.path.join(BUILD, "codexray-server"), "--listen",
                            f"127.0.0.1:{port}", "--data-dir", os.path.join(tmp, "ds-store")],
                           stderr=subprocess.DEVNULL)
    try:
        args = [a.replace("@PORT@", str(port)) for a in args]
        t0 = time.time()
        eng(*args)
        wait_for("web-1 from the DaemonSet's container", lambda: "web-1" in apps(port), 120)
        lab = labels(port, "web-1")
        check(lab.get("container") == ["web-1"] and lab.get("container_id") == [cid]
              and lab.get("host") == [HOSTNAME], f"web-1 from the DaemonSet's agent: {lab}")
        eng("stop", "-t", "30", "cx-ds-agent", timeout=60)
        rc = eng("inspect", "-f", "{{.State.ExitCode}}", "cx-ds-agent").stdout.strip()
        check(rc == "0", f"the DaemonSet's agent exited {rc}")
    finally:
        stop_proc(srv)
    print(f"    the DaemonSet's container (hostPID, {len(caps.get('add', []))} capabilities, "
          f"read-only root, limits) shipped web-1 in {time.time() - t0:.0f}s", flush=True)
