/* identity: the cgroup layouts systemd, Docker, containerd and CRI-O leave,
 * and the files Docker and the kubelet write, built in a temporary
 * directory. No root, no Docker, no Kubernetes. */
#include "identity_helpers.h"

static void test_systemd(void **state)
{
    struct identity id;

    (void)state;
    resolve("0::/system.slice/nginx.service\n", "nginx-bin", &id);
    assert_string_equal(id.service, "nginx");
    assert_string_equal(id.systemd_unit, "nginx.service");
    assert_string_equal(id.container_id, "");
    assert_string_equal(id.pod, "");

    /* cgroup v1: name=systemd and the controllers say it. */
    resolve("12:cpu,cpuacct:/system.slice/postgresql@15-main.service\n"
            "1:name=systemd:/system.slice/postgresql@15-main.service\n0::/\n",
            "postgres", &id);
    assert_string_equal(id.service, "postgresql");
    assert_string_equal(id.systemd_unit, "postgresql@15-main.service");

    /* A template's instance, nested slices: the service is the template. */
    resolve("0::/system.slice/system-getty.slice/getty@tty1.service\n", "agetty", &id);
    assert_string_equal(id.service, "getty");
    assert_string_equal(id.systemd_unit, "getty@tty1.service");

    /* A user session is not a service: the executable names it. */
    resolve("0::/user.slice/user-0.slice/session-3.scope\n", "bash", &id);
    assert_string_equal(id.service, "bash");
    assert_string_equal(id.systemd_unit, "");

    /* A service of the user's manager: the innermost unit. */
    resolve("0::/user.slice/user-1000.slice/user@1000.service/app.slice/pipewire.service\n",
            "pipewire", &id);
    assert_string_equal(id.service, "pipewire");

    /* Nothing: the exe, then "unknown". */
    resolve("0::/\n", "cat", &id);
    assert_string_equal(id.service, "cat");
    identity__resolve(NULL, 0, &roots, NULL, &id);
    assert_string_equal(id.service, "unknown");
    /* ".service" alone is no unit. */
    resolve("0::/system.slice/.service\n", "x", &id);
    assert_string_equal(id.service, "x");
}

static void test_docker(void **state)
{
    struct identity id;

    (void)state;
    mkdirs("docker/containers/" CID);
    /* "Name" also appears inside MountPoints: the top-level one is the container's. */
    put("docker/containers/" CID "/config.v2.json",
        "{\"MountPoints\":{\"/data\":{\"Name\":\"volume-x\",\"RW\":true}},"
        "\"Config\":{\"Env\":[\"A=\\\"Name\\\":\\\"/no\\\"\"]},"
        "\"Name\" : \"/web-1\",\"Driver\":\"overlay2\"}");

    /* cgroupfs driver, v1 and v2 */
    resolve("0::/docker/" CID "\n", "nginx", &id);
    assert_string_equal(id.service, "web-1");
    assert_string_equal(id.container, "web-1");
    assert_string_equal(id.container_id, CID);
    assert_string_equal(id.systemd_unit, "");
    resolve("4:memory:/docker/" CID "\n1:name=systemd:/docker/" CID "\n", "nginx", &id);
    assert_string_equal(id.service, "web-1");

    /* systemd driver */
    resolve("0::/system.slice/docker-" CID ".scope\n", "nginx", &id);
    assert_string_equal(id.service, "web-1");
    assert_string_equal(id.container_id, CID);

    /* No readable config: the short id. */
    resolve("0::/system.slice/docker-" CID2 ".scope\n", "nginx", &id);
    assert_string_equal(id.service, "fedcba987654");
    assert_string_equal(id.container_id, CID2);
    assert_string_equal(id.container, "");

    /* dockerd itself is a service, not a container. */
    resolve("0::/system.slice/docker.service\n", "dockerd", &id);
    assert_string_equal(id.service, "docker");
    assert_string_equal(id.container_id, "");

    /* A config that is a symlink is not followed. */
    mkdirs("docker/containers/" CID2);
    char target[512], link[512];
    snprintf(target, sizeof(target), "%s/docker/containers/" CID "/config.v2.json", root);
    snprintf(link, sizeof(link), "%s/docker/containers/" CID2 "/config.v2.json", root);
    assert_int_equal(symlink(target, link), 0);
    resolve("0::/docker/" CID2 "\n", "nginx", &id);
    assert_string_equal(id.service, "fedcba987654");

    /* Not 64 hex: not a container. */
    resolve("0::/docker/../../etc\n", "sh", &id);
    assert_string_equal(id.service, "sh");
    assert_string_equal(id.container_id, "");
}

/* containers/storage's containers.json, as Podman 4 writes it (compact,
 * the name also inside the "metadata" string). */
#define PODMAN_JSON(id, name)                                                                      \
    "{\"id\":\"" id "\",\"names\":[\"" name "\"],\"image\":\"6074\",\"layer\":\"7540\","           \
    "\"metadata\":\"{\\\"image-name\\\":\\\"localhost/debian:12\\\",\\\"name\\\":\\\"" name        \
    "\\\"}\",\"created\":\"2026-12-05T20:50:22Z\",\"flags\":{\"MountLabel\":\"\"}}"

static void test_podman(void **state)
{
    struct identity id;

    (void)state;
    mkdirs("containers/overlay-containers");
    put("containers/overlay-containers/containers.json",
        "[" PODMAN_JSON(CID2, "db") "," PODMAN_JSON(CID, "web-2") "]");

    /* Rootful, cgroupfs manager (no systemd): /libpod_parent/libpod-<id>. */
    resolve("4:memory:/libpod_parent/libpod-" CID "\n0::/libpod_parent/libpod-" CID "\n", "sh",
            &id);
    assert_string_equal(id.service, "web-2");
    assert_string_equal(id.container, "web-2");
    assert_string_equal(id.container_id, CID);
    assert_string_equal(id.systemd_unit, "");
    /* Rootful, systemd manager. */
    resolve("0::/machine.slice/libpod-" CID2 ".scope\n", "postgres", &id);
    assert_string_equal(id.service, "db");
    assert_string_equal(id.container_id, CID2);
    /* conmon, the container's monitor, is not the container. */
    resolve("0::/machine.slice/libpod-conmon-" CID ".scope\n", "conmon", &id);
    assert_string_equal(id.service, "conmon");
    assert_string_equal(id.container_id, "");
    resolve("0::/libpod_parent/conmon\n", "conmon", &id);
    assert_string_equal(id.container_id, "");

    /* Rootless: the user's storage under the home that /etc/passwd gives,
     * not root's (where the same id is named otherwise). */
    mkdirs("etc");
    put("etc/passwd", "root:x:0:0:root:/root:/bin/bash\n"
                      "bad:x:1001:1001::../../etc:/bin/sh\n"
                      "alice:x:1000:1000:Alice,,,:/home/alice:/bin/bash\n");
    mkdirs("home/alice/.local/share/containers/storage/overlay-containers");
    put("home/alice/.local/share/containers/storage/overlay-containers/containers.json",
        "[" PODMAN_JSON(CID, "alices-web") "]");
    resolve("0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" CID ".scope\n",
            "node", &id);
    assert_string_equal(id.service, "alices-web");
    assert_string_equal(id.container, "alices-web");
    assert_string_equal(id.systemd_unit, "");
    /* A user without a usable home, an unknown user: the short id. */
    resolve("0::/user.slice/user-1001.slice/user@1001.service/user.slice/libpod-" CID ".scope\n",
            "node", &id);
    assert_string_equal(id.service, "0123456789ab");
    assert_string_equal(id.container, "");
    resolve("0::/user.slice/user-1002.slice/user@1002.service/user.slice/libpod-" CID ".scope\n",
            "node", &id);
    assert_string_equal(id.service, "0123456789ab");

    /* An id the storage does not list: the short id. */
    resolve("0::/libpod_parent/libpod-" CID3 "\n", "sh", &id);
    assert_string_equal(id.service, "aaaaaaaaaaaa");
    assert_string_equal(id.container_id, CID3);

    /* A Podman container inside a Kubernetes pod is the pod's. */
    resolve("0::/kubepods/burstable/pod" UID "/libpod-" CID "\n", "x", &id);
    assert_string_equal(id.container_id, CID);
    assert_string_equal(id.service, "x");
}

static void test_roots_under(void **state)
{
    struct identity_roots r;
    char storage[5 * 64], tiny[40];

    (void)state;
    assert_true(identity__roots_under("/proc/1/root", &r, storage, sizeof(storage)));
    assert_string_equal(r.docker, "/proc/1/root/var/lib/docker");
    assert_string_equal(r.log, "/proc/1/root/var/log");
    assert_string_equal(r.kubelet, "/proc/1/root/var/lib/kubelet");
    assert_string_equal(r.containers, "/proc/1/root/var/lib/containers/storage");
    assert_string_equal(r.host, "/proc/1/root");
    assert_true(identity__roots_under("", &r, storage, sizeof(storage)));
    assert_string_equal(r.docker, "/var/lib/docker");
    assert_string_equal(r.host, "");
    /* Too small: the defaults (NULL members), not cut paths. */
    assert_false(identity__roots_under("/proc/1/root", &r, tiny, sizeof(tiny)));
    assert_null(r.docker);
    assert_null(r.host);
}

static void k8s_layout(void)
{
    mkdirs("log/pods/shop_web-7d4b9c8f6-x2x7k_" UID "/nginx");
    mkdirs("log/pods/shop_web-7d4b9c8f6-x2x7k_" UID "/sidecar");
    mkdirs("log/pods/kube-system_other-pod_11111111-2222-3333-4444-555555555555/c");
    mkdirs("log/containers");
    put("log/containers/web-7d4b9c8f6-x2x7k_shop_nginx-" CID ".log", "");
    put("log/containers/web-7d4b9c8f6-x2x7k_shop_sidecar-" CID2 ".log", "");
}

static void test_kubernetes(void **state)
{
    struct identity id;

    (void)state;
    k8s_layout();
    /* containerd, systemd driver */
    resolve("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_
            ".slice/cri-containerd-" CID ".scope\n",
            "nginx", &id);
    assert_string_equal(id.service, "web");
    assert_string_equal(id.pod, "web-7d4b9c8f6-x2x7k");
    assert_string_equal(id.namespace, "shop");
    assert_string_equal(id.container, "nginx");
    assert_string_equal(id.container_id, CID);
    assert_string_equal(id.systemd_unit, "");

    /* cgroupfs driver, v1, the other container */
    resolve("11:cpu,cpuacct:/kubepods/burstable/pod" UID "/" CID2 "\n", "envoy", &id);
    assert_string_equal(id.service, "web");
    assert_string_equal(id.container, "sidecar");
    assert_string_equal(id.container_id, CID2);

    /* CRI-O, a guaranteed pod (no QoS slice) */
    resolve("0::/kubepods.slice/kubepods-pod" UID_ ".slice/crio-" CID ".scope\n", "nginx", &id);
    assert_string_equal(id.container, "nginx");
    assert_string_equal(id.pod, "web-7d4b9c8f6-x2x7k");

    /* 65 hex is not a container id: the pod is still known. */
    resolve("0::/kubepods/besteffort/pod" UID "/" CID "0\n", "pause", &id);
    assert_string_equal(id.service, "web");
    assert_string_equal(id.container_id, "");
    /* The pause container has no log: the pod still names it; the container
     * stays unknown since the pod has two. */
    resolve("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_
            ".slice/cri-containerd-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
            ".scope\n",
            "pause", &id);
    assert_string_equal(id.service, "web");
    assert_string_equal(id.pod, "web-7d4b9c8f6-x2x7k");
    assert_string_equal(id.container, "");

    /* A pod the node has no directory for: the exe, with the container id. */
    resolve("0::/kubepods/pod99999999-8888-7777-6666-555555555555/" CID "\n", "java", &id);
    assert_string_equal(id.service, "java");
    assert_string_equal(id.container_id, CID);
    assert_string_equal(id.pod, "");

    /* No log symlinks, one container in the kubelet's pod directory. */
    mkdirs("kubelet/pods/99999999-8888-7777-6666-555555555555/containers/app");
    resolve("0::/kubepods/pod99999999-8888-7777-6666-555555555555/" CID "\n", "java", &id);
    assert_string_equal(id.container, "app");

    /* The kubelet itself (a unit above kubepods would be wrong to take). */
    resolve("0::/system.slice/kubelet.service\n", "kubelet", &id);
    assert_string_equal(id.service, "kubelet");
    /* A uid with characters that could walk out of the directory: ignored. */
    resolve("0::/kubepods/pod../../../etc/" CID "\n", "sh", &id);
    assert_string_equal(id.pod, "");
    assert_string_equal(id.service, "sh");
}

static void test_pod_owner(void **state)
{
    static const char *const cases[][2] = {
        {"web-7d4b9c8f6-x2x7k", "web"}, /* ReplicaSet */
        {"coredns-5d78c9869d-qz4b8", "coredns"},
        {"my-app-6b7f9d5c48-z9k2m", "my-app"},
        {"db-0", "db"}, /* StatefulSet */
        {"kafka-broker-12", "kafka-broker"},
        {"agent-x2x7k", "agent"}, /* DaemonSet */
        {"kube-proxy-x2x7k", "kube-proxy"},
        {"backup-28123456-x2x7k", "backup"}, /* CronJob's Job */
        {"my-app", "my-app"},                /* a bare pod with dashes */
        {"kube-proxy", "kube-proxy"},
        {"web-aeiou", "web-aeiou"}, /* vowels: not generated */
        {"web-123456", "web-123456"},
        {"web", "web"},
        {"-0", "-0"},
        {"", ""},
    };
    char out[IDENTITY_NAME_MAX];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        identity__pod_owner(cases[i][0], out, sizeof(out));
        assert_string_equal(out, cases[i][1]);
    }
    identity__pod_owner("web-7d4b9c8f6-x2x7k", out, 3);
    assert_string_equal(out, "we");
}

static void test_profiling_disabled(void **state)
{
    static const char on[] = "PATH=/bin\0CODEXRAY_PROFILING=disabled\0HOME=/";
    static const char last[] = "A=1\0CODEXRAY_PROFILING=disabled";
    static const char off[] = "CODEXRAY_PROFILING=disabledx\0XCODEXRAY_PROFILING=disabled\0"
                              "CODEXRAY_PROFILING=enabled\0CODEXRAY_PROFILING=disable";

    (void)state;
    assert_true(identity__profiling_disabled(on, sizeof(on)));
    assert_true(identity__profiling_disabled(last, sizeof(last) - 1)); /* no final NUL */
    assert_false(identity__profiling_disabled(off, sizeof(off)));
    assert_false(identity__profiling_disabled("", 0));
    assert_false(identity__profiling_disabled(NULL, 10));
    /* Cut in the middle of the entry: not a match. */
    assert_false(identity__profiling_disabled(on, 20));
}

static void test_hostile(void **state)
{
    struct identity id;
    char big[70000];

    (void)state;
    /* Lines without colons, huge paths, binary junk: no crash, the exe. */
    memset(big, '/', sizeof(big));
    memcpy(big, "0::", 3);
    resolve("no colons\n:::\n\n0:\n", "x", &id);
    assert_string_equal(id.service, "x");
    identity__resolve(big, sizeof(big), &roots, "x", &id);
    assert_string_equal(id.service, "x");
    for (size_t i = 3; i < sizeof(big); i++)
        big[i] = (char)(i * 7919 % 251 + 1);
    identity__resolve(big, sizeof(big), &roots, "x", &id);
    assert_true(id.service[0] != '\0');
    /* A unit name longer than the field: left out, not cut. */
    char line[1200] = "0::/system.slice/";
    memset(line + strlen(line), 'a', 600);
    strcat(line, ".service\n");
    resolve(line, "x", &id);
    assert_string_equal(id.service, "x");

    /* A truncated or odd Docker config: the short id. */
    mkdirs("docker/containers/" CID2 "x");
    static const char *const configs[] = {
        "{\"Name\":",    "{\"Name\":\"/unterminated",      "[\"Name\",\"/x\"]",
        "{\"Name\":42}", "{\"A\":{\"Name\":\"/nested\"}}", "\"Name\":\"/top-level-without-object\"",
    };
    char cid[80];
    for (size_t i = 0; i < sizeof(configs) / sizeof(configs[0]); i++) {
        char dir[200], file[300];
        snprintf(cid, sizeof(cid), "%063zx%x", i, 0xe);
        snprintf(dir, sizeof(dir), "docker/containers/%s", cid);
        mkdirs(dir);
        snprintf(file, sizeof(file), "%s/config.v2.json", dir);
        put(file, configs[i]);
        char cg[200];
        snprintf(cg, sizeof(cg), "0::/docker/%s\n", cid);
        resolve(cg, "x", &id);
        assert_int_equal(strncmp(id.service, cid, 12), 0);
        assert_string_equal(id.container, "");
    }
    /* Escapes decode; control characters do not pass. */
    snprintf(cid, sizeof(cid), "%064x", 0xabc);
    char dir[200], file[300], cg[200];
    snprintf(dir, sizeof(dir), "docker/containers/%s", cid);
    mkdirs(dir);
    snprintf(file, sizeof(file), "%s/config.v2.json", dir);
    put(file, "{\"Name\":\"\\/a\\u0041\\n\\\"b\"}");
    snprintf(cg, sizeof(cg), "0::/docker/%s\n", cid);
    resolve(cg, "x", &id);
    assert_string_equal(id.service, "aA?\"b");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_systemd),
        cmocka_unit_test(test_docker),
        cmocka_unit_test(test_podman),
        cmocka_unit_test(test_roots_under),
        cmocka_unit_test(test_kubernetes),
        cmocka_unit_test(test_pod_owner),
        cmocka_unit_test(test_profiling_disabled),
        cmocka_unit_test(test_hostile),
    };
    return cmocka_run_group_tests_name("identity", tests, setup, teardown);
}
