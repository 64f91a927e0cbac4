/* What test_identity.c and test_identity_runtimes.c share: a temporary
 * directory standing for the host's root, with Docker's, the logs', the
 * kubelet's and Podman's places under it (roots), files written there, and
 * identity__resolve() over them. */
#ifndef CODEXRAY_TESTS_IDENTITY_HELPERS_H
#define CODEXRAY_TESTS_IDENTITY_HELPERS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../agent/procs/identity.h"

#define CID "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define CID3 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define CID2 "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
#define UID "5f1c2e3a-7b8d-4c9e-a1b2-c3d4e5f60718"
#define UID_ "5f1c2e3a_7b8d_4c9e_a1b2_c3d4e5f60718"

/* The temporary directory every file of a test goes under. */
static char root[256];
static struct identity_roots roots;
static char docker_root[300], log_root[300], kubelet_root[300], containers_root[300];

static inline void mkdirs(const char *rel)
{
    char path[1024], *p;

    snprintf(path, sizeof(path), "%s/%s", root, rel);
    for (p = path + strlen(root) + 1; (p = strchr(p, '/')); p++) {
        *p = '\0';
        mkdir(path, 0755);
        *p = '/';
    }
    mkdir(path, 0755);
}

static inline void put(const char *rel, const char *text)
{
    char path[1024];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", root, rel);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static inline int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof(root), "/tmp/cx-identity-XXXXXX");
    if (!mkdtemp(root))
        return -1;
    snprintf(docker_root, sizeof(docker_root), "%s/docker", root);
    snprintf(log_root, sizeof(log_root), "%s/log", root);
    snprintf(kubelet_root, sizeof(kubelet_root), "%s/kubelet", root);
    snprintf(containers_root, sizeof(containers_root), "%s/containers", root);
    /* The host's root is the temporary directory: /etc/passwd and homes. */
    roots = (struct identity_roots){docker_root, log_root, kubelet_root, containers_root, root};
    return 0;
}

static inline int teardown(void **state)
{
    char cmd[512];

    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

static inline void resolve(const char *cgroup, const char *exe, struct identity *id)
{
    identity__resolve(cgroup, strlen(cgroup), &roots, exe, id);
}

#endif
