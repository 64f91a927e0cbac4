/* identity with runtime_roots: container runtimes that keep their metadata
 * away from the defaults (a data disk), found from their daemons' command
 * lines and configurations. A fake /proc of daemons beside a fake host's
 * root, in a temporary directory. No root needed (as root, a rootless
 * user's files are chowned to uid 1000), no Docker, no Kubernetes. */
#include "../../agent/procs/runtime_roots.h"
#include "identity_helpers.h"

/* containers/storage's containers.json, as Podman 4 writes it (compact,
 * the name also inside the "metadata" string). */
#define PODMAN_JSON(id, name)                                                                      \
    "{\"id\":\"" id "\",\"names\":[\"" name "\"],\"image\":\"6074\",\"layer\":\"7540\","           \
    "\"metadata\":\"{\\\"image-name\\\":\\\"localhost/debian:12\\\",\\\"name\\\":\\\"" name        \
    "\\\"}\",\"created\":\"2026-12-05T20:50:22Z\",\"flags\":{\"MountLabel\":\"\"}}"

/* --- Runtimes that keep their data elsewhere: a fake host's root and a
 * fake /proc under <root>/<base>, daemons found by their comm. --- */

static char host[300], procdir[300];
static struct runtime_roots *rr;

static void put_bytes(const char *rel, const char *data, size_t len)
{
    char path[1024];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", root, rel);
    f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

/* A process of the fake /proc: its comm, its uid and its command line
 * (arguments separated by '\0' in argv, of argv_len bytes). */
static void fake_proc(const char *base, int pid, const char *comm, unsigned uid, const char *argv,
                      size_t argv_len)
{
    char rel[512], text[256];

    snprintf(rel, sizeof(rel), "%s/proc/%d", base, pid);
    mkdirs(rel);
    snprintf(rel, sizeof(rel), "%s/proc/%d/comm", base, pid);
    snprintf(text, sizeof(text), "%s\n", comm);
    put(rel, text);
    snprintf(rel, sizeof(rel), "%s/proc/%d/status", base, pid);
    snprintf(text, sizeof(text), "Name:\t%s\nUmask:\t0022\nState:\tS\nUid:\t%u\t%u\t%u\t%u\n", comm,
             uid, uid, uid, uid);
    put(rel, text);
    snprintf(rel, sizeof(rel), "%s/proc/%d/cmdline", base, pid);
    put_bytes(rel, argv, argv_len);
}
#define FAKE_PROC(base, pid, comm, uid, argv) fake_proc(base, pid, comm, uid, argv, sizeof(argv))

/* A host in <root>/<base>/host with the default roots under it, a /proc in
 * <root>/<base>/proc, and a runtime_roots over them (ttl_ns: see
 * runtime_roots__new). */
static void rt_begin(const char *base, uint64_t ttl_ns)
{
    static char d[400], l[400], k[400], c[400];
    char rel[512];

    snprintf(rel, sizeof(rel), "%s/host/etc", base);
    mkdirs(rel);
    snprintf(rel, sizeof(rel), "%s/proc", base);
    mkdirs(rel);
    snprintf(host, sizeof(host), "%s/%s/host", root, base);
    snprintf(procdir, sizeof(procdir), "%s/%s/proc", root, base);
    snprintf(d, sizeof(d), "%s/var/lib/docker", host);
    snprintf(l, sizeof(l), "%s/var/log", host);
    snprintf(k, sizeof(k), "%s/var/lib/kubelet", host);
    snprintf(c, sizeof(c), "%s/var/lib/containers/storage", host);
    rr = runtime_roots__new(procdir, host, ttl_ns);
    assert_non_null(rr);
    roots = (struct identity_roots){d, l, k, c, host, rr};
}

static void rt_end(void)
{
    runtime_roots__free(rr);
    rr = NULL;
}

static void docker_config(const char *rel_root, const char *cid, const char *name)
{
    char rel[512], text[256];

    snprintf(rel, sizeof(rel), "%s/containers/%s", rel_root, cid);
    mkdirs(rel);
    snprintf(rel, sizeof(rel), "%s/containers/%s/config.v2.json", rel_root, cid);
    snprintf(text, sizeof(text), "{\"ID\":\"%s\",\"Name\":\"/%s\",\"Driver\":\"overlay2\"}", cid,
             name);
    put(rel, text);
}

static void test_docker_data_root(void **state)
{
    struct identity id;

    (void)state;
    rt_begin("dr", 0);
    /* daemon.json moves the data root to a data disk. */
    mkdirs("dr/host/etc/docker");
    put("dr/host/etc/docker/daemon.json",
        "{\"log-driver\":\"json-file\",\"data-root\":\"/mnt/disk1/docker\",\"hosts\":[]}");
    docker_config("dr/host/mnt/disk1/docker", CID, "web-1");
    FAKE_PROC("dr", 812, "dockerd", 0, "/usr/bin/dockerd\0-H\0fd://");
    resolve("0::/system.slice/docker-" CID ".scope\n", "nginx", &id);
    assert_string_equal(id.service, "web-1");
    assert_string_equal(id.container, "web-1");
    assert_string_equal(id.container_id, CID);
    /* Without what the daemon says, the default root has nothing: the id. */
    roots.runtimes = NULL;
    resolve("0::/system.slice/docker-" CID ".scope\n", "nginx", &id);
    assert_string_equal(id.service, "0123456789ab");
    roots.runtimes = rr;

    /* The command line wins over daemon.json: --data-root, --data-root=, -g. */
    docker_config("dr/host/srv/docker-a", CID2, "api");
    FAKE_PROC("dr", 812, "dockerd", 0, "dockerd\0--data-root\0/srv/docker-a\0--host\0unix:///x");
    resolve("0::/docker/" CID2 "\n", "java", &id);
    assert_string_equal(id.service, "api");
    /* A daemon restarted with another root (ttl 0: every question walks). */
    docker_config("dr/host/srv/docker-b", CID2, "api-b");
    FAKE_PROC("dr", 812, "dockerd", 0, "dockerd\0--data-root=/srv/docker-b/");
    resolve("0::/docker/" CID2 "\n", "java", &id);
    assert_string_equal(id.service, "api-b");
    FAKE_PROC("dr", 812, "dockerd", 0, "dockerd\0-g\0/srv/docker-a");
    resolve("0::/docker/" CID2 "\n", "java", &id);
    assert_string_equal(id.service, "api");

    /* --config-file elsewhere. */
    mkdirs("dr/host/opt/etc");
    put("dr/host/opt/etc/d.json", "{\"data-root\" : \"/srv/docker-b\"}");
    FAKE_PROC("dr", 812, "dockerd", 0, "dockerd\0--config-file=/opt/etc/d.json");
    resolve("0::/docker/" CID2 "\n", "java", &id);
    assert_string_equal(id.service, "api-b");

    /* Something named dockerd run by a user cannot rename root's containers. */
    FAKE_PROC("dr", 812, "dockerd", 0, "dockerd");
    FAKE_PROC("dr", 900, "dockerd", 1000, "dockerd\0--data-root\0/srv/docker-a");
    resolve("0::/docker/" CID2 "\n", "java", &id);
    assert_string_equal(id.service, "fedcba987654");

    /* Hostile flags and configuration: relative, "..", a symlinked
     * daemon.json: none is used. */
    FAKE_PROC("dr", 812, "dockerd", 0, "dockerd\0--data-root\0srv/docker-a");
    resolve("0::/docker/" CID2 "\n", "java", &id);
    assert_string_equal(id.service, "fedcba987654");
    FAKE_PROC("dr", 812, "dockerd", 0, "dockerd\0--data-root\0/etc/../srv/docker-a");
    resolve("0::/docker/" CID2 "\n", "java", &id);
    assert_string_equal(id.service, "fedcba987654");
    char target[512], link[512];
    snprintf(target, sizeof(target), "%s/opt/etc/d.json", host);
    snprintf(link, sizeof(link), "%s/etc/docker/daemon.json", host);
    unlink(link);
    assert_int_equal(symlink(target, link), 0);
    FAKE_PROC("dr", 812, "dockerd", 0, "dockerd");
    resolve("0::/docker/" CID2 "\n", "java", &id);
    assert_string_equal(id.service, "fedcba987654");
    /* A command line of 200 KiB: cut at its cap, still a dockerd. */
    static char big[200 << 10];
    memset(big, 'x', sizeof(big));
    memcpy(big, "dockerd\0-g\0/srv/docker-a\0", 25);
    fake_proc("dr", 812, "dockerd", 0, big, sizeof(big));
    resolve("0::/docker/" CID2 "\n", "java", &id);
    assert_string_equal(id.service, "api");
    rt_end();
}

/* A rootless user whose configuration files the test can make theirs:
 * uid 1000 when the test runs as root (it chowns them), else the test's own
 * uid. USER2 is another user, who owns none of them. */
static unsigned user1(void)
{
    return geteuid() ? (unsigned)geteuid() : 1000;
}

static void own(const char *rel)
{
    char path[1024];

    snprintf(path, sizeof(path), "%s/%s", root, rel);
    if (geteuid() == 0)
        assert_int_equal(lchown(path, 1000, 1000), 0);
}

/* The cgroup of a rootless user's Docker container. */
static void rootless_docker(unsigned uid, const char *cid, const char *exe, struct identity *id)
{
    char cg[512];

    snprintf(cg, sizeof(cg),
             "0::/user.slice/user-%u.slice/user@%u.service/docker.service/docker-%s.scope\n", uid,
             uid, cid);
    resolve(cg, exe, id);
}

/* Rootless dockerd: ~/.local/share/docker, or data-root in
 * ~/.config/docker/daemon.json when the user owns it; and what is learned
 * is kept. */
static void test_docker_rootless_and_cache(void **state)
{
    struct identity id;
    char passwd[256];
    unsigned u = user1(), u2 = user1() + 1;

    (void)state;
    rt_begin("dl", 60ull * 1000 * 1000 * 1000);
    snprintf(passwd, sizeof(passwd),
             "root:x:0:0:root:/root:/bin/bash\nbob:x:%u:%u::/home/bob:/bin/bash\n"
             "eve:x:%u:%u::/home/eve:/bin/bash\n",
             u, u, u2, u2);
    put("dl/host/etc/passwd", passwd);
    docker_config("dl/host/home/bob/.local/share/docker", CID, "bobs-web");
    fake_proc("dl", 4242, "dockerd", u, "dockerd", 8);
    rootless_docker(u, CID, "node", &id);
    assert_string_equal(id.service, "bobs-web");
    mkdirs("dl/host/home/bob/.config/docker");
    put("dl/host/home/bob/.config/docker/daemon.json", "{\"data-root\":\"/home/bob/d\"}");
    own("dl/host/home/bob/.config/docker/daemon.json");
    docker_config("dl/host/home/bob/d", CID2, "bobs-db");
    rootless_docker(u, CID2, "pg", &id);
    /* Learned a minute ago: the daemon.json written since is not read yet. */
    assert_string_equal(id.service, "fedcba987654");
    runtime_roots__free(rr);
    rr = runtime_roots__new(procdir, host, 60ull * 1000 * 1000 * 1000);
    roots.runtimes = rr;
    rootless_docker(u, CID2, "pg", &id);
    assert_string_equal(id.service, "bobs-db");

    /* eve's daemon.json is not eve's: not read. */
    mkdirs("dl/host/home/eve/.config/docker");
    put("dl/host/home/eve/.config/docker/daemon.json", "{\"data-root\":\"/home/eve/d\"}");
    docker_config("dl/host/home/eve/d", CID3, "eves-app");
    fake_proc("dl", 4243, "dockerd", u2, "dockerd", 8);
    runtime_roots__free(rr);
    rr = runtime_roots__new(procdir, host, 0);
    roots.runtimes = rr;
    rootless_docker(u2, CID3, "sh", &id);
    assert_string_equal(id.service, "aaaaaaaaaaaa");
    /* Nor is one given by --config-file. */
    fake_proc("dl", 4243, "dockerd", u2,
              "dockerd\0--config-file\0/home/eve/.config/docker/daemon.json", 59);
    rootless_docker(u2, CID3, "sh", &id);
    assert_string_equal(id.service, "aaaaaaaaaaaa");
    /* Bob's own --config-file is read. */
    fake_proc("dl", 4242, "dockerd", u,
              "dockerd\0--config-file=/home/bob/.config/docker/daemon.json", 59);
    rootless_docker(u, CID2, "pg", &id);
    assert_string_equal(id.service, "bobs-db");
    rt_end();
}

#define CRI_BUNDLE(pod, ns, container, uid)                                                        \
    "{\"ociVersion\":\"1.1.0\",\"process\":{\"env\":[\"X=\\\"annotations\\\":{\"]},"               \
    "\"annotations\":{\"io.kubernetes.cri.container-type\":\"container\","                         \
    "\"io.kubernetes.cri.sandbox-uid\":\"" uid "\","                                               \
    "\"io.kubernetes.cri.container-name\":\"" container "\","                                      \
    "\"io.kubernetes.cri.sandbox-name\":\"" pod "\","                                              \
    "\"io.kubernetes.cri.sandbox-namespace\":\"" ns "\"},\"linux\":{}}"

static void test_containerd_state(void **state)
{
    struct identity id;
    const char *cg = "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_
                     ".slice/cri-containerd-" CID ".scope\n";

    (void)state;
    rt_begin("ct", 0);
    /* config.toml says root and state (a table's own "state" is not it). */
    mkdirs("ct/host/etc/containerd");
    put("ct/host/etc/containerd/config.toml",
        "# moved to the data disk\nversion = 2\nroot = \"/disk/containerd\"\n"
        "state = '/disk/run/containerd'\n\n[plugins.\"io.containerd.grpc.v1.cri\"]\n"
        "  state = \"/wrong\"\n");
    mkdirs("ct/host/disk/run/containerd/io.containerd.runtime.v2.task/k8s.io/" CID);
    put("ct/host/disk/run/containerd/io.containerd.runtime.v2.task/k8s.io/" CID "/config.json",
        CRI_BUNDLE("web-7d4b9c8f6-x2x7k", "shop", "nginx", UID));
    FAKE_PROC("ct", 77, "containerd", 0, "/usr/bin/containerd");
    resolve(cg, "nginx", &id);
    assert_string_equal(id.pod, "web-7d4b9c8f6-x2x7k");
    assert_string_equal(id.namespace, "shop");
    assert_string_equal(id.container, "nginx");
    assert_string_equal(id.service, "web");

    /* --state and --config on the command line. */
    mkdirs("ct/host/opt/ctd");
    put("ct/host/opt/ctd/c.toml", "[plugins]\n");
    mkdirs("ct/host/srv/state/io.containerd.runtime.v2.task/k8s.io/" CID);
    put("ct/host/srv/state/io.containerd.runtime.v2.task/k8s.io/" CID "/config.json",
        CRI_BUNDLE("db-0", "data", "postgres", UID));
    FAKE_PROC("ct", 77, "containerd", 0,
              "containerd\0--config\0/opt/ctd/c.toml\0--state=/srv/state");
    resolve(cg, "postgres", &id);
    assert_string_equal(id.pod, "db-0");
    assert_string_equal(id.service, "db");
    assert_string_equal(id.container, "postgres");

    /* Another pod's bundle under this id: not this pod's names. */
    put("ct/host/srv/state/io.containerd.runtime.v2.task/k8s.io/" CID "/config.json",
        CRI_BUNDLE("db-0", "data", "postgres", "00000000-0000-0000-0000-000000000000"));
    resolve(cg, "postgres", &id);
    assert_string_equal(id.pod, "");
    assert_string_equal(id.service, "postgres");

    /* The kubelet's log directories still come first. */
    mkdirs("ct/host/var/log/pods/shop_cart-5c9d7f8b6-x2x7k_" UID "/cart");
    resolve(cg, "node", &id);
    assert_string_equal(id.pod, "cart-5c9d7f8b6-x2x7k");
    assert_string_equal(id.service, "cart");
    assert_string_equal(id.container, "cart");
    rt_end();
}

static void test_podman_graphroot(void **state)
{
    struct identity id;

    (void)state;
    rt_begin("pm", 0);
    /* storage.conf's graphroot, no process needed. */
    mkdirs("pm/host/etc/containers");
    put("pm/host/etc/containers/storage.conf",
        "[storage]\ndriver = \"overlay\"\nrunroot = \"/run/containers/storage\"\n"
        "graphroot = \"/disk/containers\"\nrootless_storage_path = \"$HOME/ctr-$UID\"\n"
        "[storage.options]\ngraphroot = \"/wrong\"\n");
    mkdirs("pm/host/disk/containers/overlay-containers");
    put("pm/host/disk/containers/overlay-containers/containers.json",
        "[" PODMAN_JSON(CID, "pm-web") "]");
    resolve("0::/machine.slice/libpod-" CID ".scope\n", "nginx", &id);
    assert_string_equal(id.service, "pm-web");
    assert_string_equal(id.container, "pm-web");

    /* A conmon's bundle and podman --root among its exit command's
     * arguments: another storage. */
    mkdirs("pm/host/srv/pods/overlay-containers");
    put("pm/host/srv/pods/overlay-containers/containers.json",
        "[" PODMAN_JSON(CID2, "from-conmon") "]");
    FAKE_PROC("pm", 3100, "conmon", 0,
              "/usr/bin/conmon\0--api-version\0001\0-c\0" CID2
              "\0-b\0/srv/pods/overlay-containers/" CID2 "/userdata\0--exit-command\0/usr/bin/"
              "podman\0--exit-command-arg\0--root\0--exit-command-arg\0/srv/pods2");
    resolve("0::/machine.slice/libpod-" CID2 ".scope\n", "sh", &id);
    assert_string_equal(id.service, "from-conmon");
    mkdirs("pm/host/srv/pods2/overlay-containers");
    put("pm/host/srv/pods2/overlay-containers/containers.json",
        "[" PODMAN_JSON(CID3, "from-exit") "]");
    resolve("0::/machine.slice/libpod-" CID3 ".scope\n", "sh", &id);
    assert_string_equal(id.service, "from-exit");

    /* Rootless: the user's storage.conf, then rootless_storage_path. */
    char passwd[256], cg[512];
    snprintf(passwd, sizeof(passwd),
             "root:x:0:0:root:/root:/bin/bash\nalice:x:%u:%u::/home/alice:/bin/bash\n"
             "carol:x:%u:%u::/home/carol:/bin/bash\n",
             user1(), user1(), user1() + 1, user1() + 1);
    put("pm/host/etc/passwd", passwd);
    mkdirs("pm/host/home/alice/.config/containers");
    put("pm/host/home/alice/.config/containers/storage.conf",
        "[storage]\ngraphroot=\"/home/alice/big/storage\"\n");
    own("pm/host/home/alice/.config/containers/storage.conf");
    mkdirs("pm/host/home/alice/big/storage/overlay-containers");
    put("pm/host/home/alice/big/storage/overlay-containers/containers.json",
        "[" PODMAN_JSON(CID, "alices") "]");
    snprintf(cg, sizeof(cg),
             "0::/user.slice/user-%u.slice/user@%u.service/user.slice/libpod-%s.scope\n", user1(),
             user1(), CID);
    resolve(cg, "node", &id);
    assert_string_equal(id.service, "alices");
    /* carol: rootless_storage_path, $HOME and $UID replaced. */
    char rel[256];
    snprintf(rel, sizeof(rel), "pm/host/home/carol/ctr-%u/overlay-containers", user1() + 1);
    mkdirs(rel);
    snprintf(rel, sizeof(rel), "pm/host/home/carol/ctr-%u/overlay-containers/containers.json",
             user1() + 1);
    put(rel, "[" PODMAN_JSON(CID, "carols") "]");
    snprintf(cg, sizeof(cg),
             "0::/user.slice/user-%u.slice/user@%u.service/user.slice/libpod-%s.scope\n",
             user1() + 1, user1() + 1, CID);
    resolve(cg, "node", &id);
    assert_string_equal(id.service, "carols");
    rt_end();
}

/* A name not found is logged once per container, with the places tried
 * and what would fix it. */
static void test_miss_logged_once(void **state)
{
    struct identity id;
    char path[512], text[8192];
    int saved = dup(2);

    (void)state;
    rt_begin("ms", 0);
    mkdirs("ms/host/etc/docker");
    put("ms/host/etc/docker/daemon.json", "{\"data-root\":\"/mnt/d\"}");
    FAKE_PROC("ms", 812, "dockerd", 0, "dockerd");
    snprintf(path, sizeof(path), "%s/ms/log", root);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    dup2(fd, 2);
    resolve("0::/docker/" CID "\n", "nginx", &id);
    resolve("0::/docker/" CID "\n", "nginx", &id);
    resolve("0::/docker/" CID2 "\n", "nginx", &id);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fd);
    assert_string_equal(id.service, "fedcba987654");
    fd = open(path, O_RDONLY);
    ssize_t n = read(fd, text, sizeof(text) - 1);
    close(fd);
    assert_true(n > 0);
    text[n] = '\0';
    const char *first = strstr(text, "Docker container " CID);
    assert_non_null(first);
    assert_null(strstr(first + 1, "Docker container " CID));
    assert_non_null(strstr(text, "Docker container " CID2));
    assert_non_null(
        strstr(first, "/mnt/d (dockerd pid 812: data-root in /etc/docker/daemon.json)"));
    assert_non_null(strstr(first, "/var/lib/docker (default)"));
    assert_non_null(strstr(first, "named 0123456789ab"));
    assert_non_null(strstr(first, "--pid host"));
    rt_end();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_docker_data_root), cmocka_unit_test(test_docker_rootless_and_cache),
        cmocka_unit_test(test_containerd_state), cmocka_unit_test(test_podman_graphroot),
        cmocka_unit_test(test_miss_logged_once),
    };
    return cmocka_run_group_tests_name("identity_runtimes", tests, setup, teardown);
}
