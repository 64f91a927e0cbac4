/* The process table on a /proc of our own making: what a re-read of a
 * process's maps does when the process has gone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../agent/procs/procs.h"
#include "../../agent/symbolize/binary.h"

#define PID 4242
#define MS (1000ull * 1000)

static void put(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%d/%s", dir, PID, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* name's bytes, NULs included (a cmdline). */
static void put_bytes(const char *dir, const char *name, const char *data, size_t len)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%d/%s", dir, PID, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

/* A /proc of one process, PID, in a new directory: root is filled in. */
static void fake_proc(char *root)
{
    char dir[512];

    assert_non_null(mkdtemp(root));
    snprintf(dir, sizeof(dir), "%s/%d", root, PID);
    assert_int_equal(mkdir(dir, 0700), 0);
    put(root, "stat", "4242 (qsort_cb) S 1 4242 4242 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 777 0 0\n");
    put(root, "comm", "qsort_cb\n");
}

/* The process table over the /proc at root, with its binary cache. */
static struct procs *table_open(const char *root, struct binary_cache **bc)
{
    *bc = binary_cache__new(root);
    struct procs *ps = procs__new(*bc, root, NULL);
    assert_non_null(ps);
    return ps;
}

/* Frees the table and removes the /proc at root. */
static void table_close(struct procs *ps, struct binary_cache *bc, const char *root)
{
    char cmd[600];

    procs__free(ps);
    binary_cache__free(bc);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    assert_int_equal(system(cmd), 0);
}

/* A process whose maps were read, then gone (a zombie's maps are empty; a
 * reaped process has none): a re-read forced by an unknown address keeps
 * what was read, so its samples still in the ring find their libraries.
 * Before, the re-read emptied the table and every return address of the
 * process looked like junk. */
static void test_maps_kept_when_gone(void **state)
{
    (void)state;
    char root[] = "/tmp/cx-procs-XXXXXX", cmd[600];

    fake_proc(root);
    put(root, "maps",
        "7f0000000000-7f0000010000 r-xp 00000000 08:01 1234 /nonexistent/libc.so.6\n"
        "7f0000100000-7f0000101000 r-xp 00000000 08:01 1235 /nonexistent/prog\n");
    struct binary_cache *bc;
    struct procs *ps = table_open(root, &bc);
    struct proc *p = procs__get(ps, PID, "qsort_cb", 1 * MS);
    assert_non_null(p);
    assert_non_null(procs__find_map(ps, p, 0x7f0000001000, false, 2 * MS));

    put(root, "maps", ""); /* exited: a zombie */
    /* An address in no mapping, the process young: its maps are read again. */
    assert_null(procs__find_map(ps, p, 0x1000, true, 100 * MS));
    const struct proc_map *m = procs__find_map(ps, p, 0x7f0000001000, false, 101 * MS);
    assert_non_null(m);
    assert_int_equal(m->start, 0x7f0000000000);
    snprintf(cmd, sizeof(cmd), "%s/%d/maps", root, PID);
    assert_int_equal(unlink(cmd), 0); /* reaped */
    assert_null(procs__find_map(ps, p, 0x1000, true, 300 * MS));
    assert_non_null(procs__find_map(ps, p, 0x7f0000100010, false, 301 * MS));

    /* After an exec the old image's maps are not kept. */
    put(root, "maps", "");
    p = procs__exec(ps, PID, "qsort_cb", 0, 0, 400 * MS);
    assert_null(procs__find_map(ps, p, 0x7f0000001000, false, 402 * MS));

    table_close(ps, bc, root);
}

/* The walk's hint (a young process ran a library's first code): maps read
 * before it are read again, so libc is known; a hint older than the last
 * read, or for a mapping the maps hold, costs nothing; one for another file
 * at an address the maps hold (dlclose, then dlopen) reads them. */
static void test_hint_reads_maps(void **state)
{
    (void)state;
    char root[] = "/tmp/cx-procs-XXXXXX";
    const uint32_t dev = 8 << 20 | 1; /* 08:01 as the kernel's dev_t */

    fake_proc(root);
    /* At exec: the program and ld.so only. */
    put(root, "maps", "7f0000100000-7f0000101000 r-xp 00000000 08:01 1235 /nonexistent/prog\n");
    struct binary_cache *bc;
    struct procs *ps = table_open(root, &bc);
    struct proc *p = procs__get(ps, PID, "qsort_cb", 10 * MS);
    assert_non_null(p);
    put(root, "maps",
        "7f0000000000-7f0000010000 r-xp 00000000 08:01 1234 /nonexistent/libc.so.6\n"
        "7f0000100000-7f0000101000 r-xp 00000000 08:01 1235 /nonexistent/prog\n");
    /* A hint from before the read: nothing read. */
    procs__hint_maps(ps, PID, 9 * MS, &(struct procs_hint){0, 0, 0}, 11 * MS);
    assert_null(procs__find_map(ps, p, 0x7f0000001000, false, 12 * MS));
    /* A hint from after it: read now, libc found. */
    procs__hint_maps(ps, PID, 13 * MS, &(struct procs_hint){0x7f0000000000, 1234, dev}, 14 * MS);
    const struct proc_map *m = procs__find_map(ps, p, 0x7f0000001000, false, 15 * MS);
    assert_non_null(m);
    assert_int_equal(m->start, 0x7f0000000000);

    /* A later hint for a library the maps already hold (the next library's
     * first code, each waking the agent): not read again. */
    put(root, "maps",
        "7f0000000000-7f0000010000 r-xp 00000000 08:01 1234 /nonexistent/libc.so.6\n"
        "7f0000020000-7f0000030000 r-xp 00000000 08:01 1236 /nonexistent/libz.so.1\n"
        "7f0000100000-7f0000101000 r-xp 00000000 08:01 1235 /nonexistent/prog\n");
    procs__hint_maps(ps, PID, 16 * MS, &(struct procs_hint){0x7f0000000000, 1234, dev}, 17 * MS);
    assert_null(procs__find_map(ps, p, 0x7f0000021000, false, 18 * MS));
    /* One for a mapping they lack (a dlopen): read. */
    procs__hint_maps(ps, PID, 19 * MS, &(struct procs_hint){0x7f0000020000, 1236, dev}, 20 * MS);
    m = procs__find_map(ps, p, 0x7f0000021000, false, 21 * MS);
    assert_non_null(m);
    assert_int_equal(m->start, 0x7f0000020000);
    assert_string_equal(m->name, "/nonexistent/libz.so.1");

    /* libz closed and another library opened where it was: a hint of the
     * new file reads the maps, and its code is named by it, not by libz. */
    put(root, "maps",
        "7f0000000000-7f0000010000 r-xp 00000000 08:01 1234 /nonexistent/libc.so.6\n"
        "7f0000020000-7f0000030000 r-xp 00000000 08:01 1237 /nonexistent/libbz2.so.1\n"
        "7f0000100000-7f0000101000 r-xp 00000000 08:01 1235 /nonexistent/prog\n");
    procs__hint_maps(ps, PID, 22 * MS, &(struct procs_hint){0x7f0000020000, 1237, dev}, 23 * MS);
    m = procs__find_map(ps, p, 0x7f0000021000, false, 24 * MS);
    assert_non_null(m);
    assert_string_equal(m->name, "/nonexistent/libbz2.so.1");
    /* The same inode on another device is another file too. */
    put(root, "maps",
        "7f0000000000-7f0000010000 r-xp 00000000 08:01 1234 /nonexistent/libc.so.6\n"
        "7f0000020000-7f0000030000 r-xp 00000000 08:02 1237 /nonexistent/libbz2-other.so.1\n"
        "7f0000100000-7f0000101000 r-xp 00000000 08:01 1235 /nonexistent/prog\n");
    procs__hint_maps(ps, PID, 25 * MS, &(struct procs_hint){0x7f0000020000, 1237, 8 << 20 | 2},
                     26 * MS);
    m = procs__find_map(ps, p, 0x7f0000021000, false, 27 * MS);
    assert_non_null(m);
    assert_string_equal(m->name, "/nonexistent/libbz2-other.so.1");

    table_close(ps, bc, root);
}

/* An exec event that carries the process's start and comm (BPF's): the
 * table takes them and does not read /proc/PID/stat or comm for them; one
 * without (an old kernel) reads both. */
static void test_exec_start_from_event(void **state)
{
    (void)state;
    char root[] = "/tmp/cx-procs-XXXXXX";
    long hz = sysconf(_SC_CLK_TCK);

    fake_proc(root); /* stat says 777 ticks, comm qsort_cb */
    put(root, "maps", "");
    struct binary_cache *bc;
    struct procs *ps = table_open(root, &bc);
    assert_true(hz > 0);
    uint64_t start_ns = 5000ull * (1000000000ull / (uint64_t)hz) + 123;
    struct proc *p = procs__exec(ps, PID, "fromevent", 0, start_ns, 1 * MS);
    assert_non_null(p);
    assert_int_equal(p->start_time, 5000);
    assert_string_equal(p->comm, "fromevent");
    p = procs__exec(ps, PID, "fromevent", 0, 0, 2 * MS);
    assert_int_equal(p->start_time, 777);
    assert_string_equal(p->comm, "qsort_cb");

    table_close(ps, bc, root);
}

/* The read 10 ms after an exec (collect.c) is skipped when a hint had the
 * maps read since the exec's own read, and made when none did. */
static void test_exec_reread_after_hint(void **state)
{
    (void)state;
    char root[] = "/tmp/cx-procs-XXXXXX";
    uint64_t maps0, maps1, ids;

    fake_proc(root);
    put(root, "maps", "7f0000100000-7f0000101000 r-xp 00000000 08:01 1235 /nonexistent/prog\n");
    struct binary_cache *bc;
    struct procs *ps = table_open(root, &bc);
    assert_non_null(procs__exec(ps, PID, "qsort_cb", 0, 0, 1 * MS));
    procs__reads(ps, &maps0, &ids);
    procs__reread_exec(ps, PID, 11 * MS, 11 * MS); /* no hint: read */
    procs__reads(ps, &maps1, &ids);
    assert_int_equal(maps1, maps0 + 1);

    assert_non_null(procs__exec(ps, PID, "qsort_cb", 0, 0, 20 * MS));
    put(root, "maps",
        "7f0000000000-7f0000010000 r-xp 00000000 08:01 1234 /nonexistent/libc.so.6\n"
        "7f0000100000-7f0000101000 r-xp 00000000 08:01 1235 /nonexistent/prog\n");
    procs__hint_maps(ps, PID, 22 * MS, &(struct procs_hint){0x7f0000000000, 1234, 8 << 20 | 1},
                     23 * MS);
    procs__reads(ps, &maps0, &ids);
    procs__reread_exec(ps, PID, 30 * MS, 30 * MS); /* the hint's read found the libraries */
    procs__reads(ps, &maps1, &ids);
    assert_int_equal(maps1, maps0);

    table_close(ps, bc, root);
}

/* Lazy exec (procs__lazy_exec, where BPF wakes the agent at a new
 * program's first sample): the exec reads nothing, nor do hints or the
 * read 10 ms on; the first procs__get reads identity and maps, with the
 * event's start time. */
static void test_exec_lazy(void **state)
{
    (void)state;
    char root[] = "/tmp/cx-procs-XXXXXX";
    uint64_t maps0, ids0, maps1, ids1;
    long hz = sysconf(_SC_CLK_TCK);

    fake_proc(root);
    put(root, "maps",
        "7f0000000000-7f0000010000 r-xp 00000000 08:01 1234 /nonexistent/libc.so.6\n"
        "7f0000100000-7f0000101000 r-xp 00000000 08:01 1235 /nonexistent/prog\n");
    struct binary_cache *bc;
    struct procs *ps = table_open(root, &bc);
    procs__lazy_exec(ps, true);
    assert_true(hz > 0);
    uint64_t start_ns = 6000ull * (1000000000ull / (uint64_t)hz);
    procs__reads(ps, &maps0, &ids0);
    struct proc *p = procs__exec(ps, PID, "cc1", 0, start_ns, 1 * MS);
    assert_non_null(p);
    assert_true(p->maps_stale);
    procs__hint_maps(ps, PID, 2 * MS, &(struct procs_hint){0x7f0000000000, 1234, 8 << 20 | 1},
                     3 * MS);
    procs__reread_exec(ps, PID, 11 * MS, 11 * MS);
    procs__reads(ps, &maps1, &ids1);
    assert_int_equal(maps1, maps0);
    assert_int_equal(ids1, ids0);
    /* Its first sample. */
    p = procs__get(ps, PID, "cc1", 20 * MS);
    procs__reads(ps, &maps1, &ids1);
    assert_int_equal(maps1, maps0 + 1);
    assert_int_equal(ids1, ids0 + 1);
    assert_false(p->maps_stale);
    assert_int_equal(p->start_time, 6000);
    assert_string_equal(p->comm, "cc1");
    const struct proc_map *m = procs__find_map(ps, p, 0x7f0000001000, false, 21 * MS);
    assert_non_null(m);
    assert_string_equal(m->name, "/nonexistent/libc.so.6");
    /* Read 19 ms after its exec: the read due 10 ms after it is not made. */
    procs__reread_exec(ps, PID, 11 * MS, 30 * MS);
    procs__reads(ps, &maps0, &ids0);
    assert_int_equal(maps0, maps1);

    /* Excluded before its exec (BPF skips it, no sample will come): read
     * at once, its new environment decides. */
    p->skipped = true;
    procs__reads(ps, &maps0, &ids0);
    p = procs__exec(ps, PID, "cc1", 0, start_ns, 30 * MS);
    procs__reads(ps, &maps1, &ids1);
    assert_int_equal(ids1, ids0 + 1);
    assert_false(p->maps_stale);

    /* An earlier process with the pid was excluded (its exit took it out
     * of the skip map): a new program is not taken for excluded unread,
     * which would keep it out of BPF's samples and so unread for good. */
    p->skipped = false;
    p->disabled = true;
    p = procs__exec(ps, PID, "cc1", 0, start_ns, 40 * MS);
    assert_true(p->maps_stale);
    assert_false(p->disabled);
    /* It exits unsampled; its pid goes to a process that never execs (a
     * fork): read as a new process, its start time from /proc, not the
     * exec event's of the one before. */
    procs__exit(ps, PID, 50 * MS);
    p = procs__get(ps, PID, NULL, 400 * MS);
    assert_false(p->maps_stale);
    assert_int_equal(p->start_time, 777);

    table_close(ps, bc, root);
}

/* A process whose exit event was lost: only a sweep that asks /proc sees
 * it gone (taken as exited then, forgotten at a later sweep); a sweep that
 * does not ask costs no read of /proc and keeps it. A pid reused (another
 * start time) counts as gone too. */
static void test_sweep_asks_proc_when_told(void **state)
{
    (void)state;
    char root[] = "/tmp/cx-procs-XXXXXX", cmd[600];

    fake_proc(root);
    put(root, "maps", "");
    struct binary_cache *bc;
    struct procs *ps = table_open(root, &bc);
    assert_non_null(procs__get(ps, PID, "qsort_cb", 1 * MS));

    procs__sweep(ps, 10 * MS, true); /* alive: kept */
    assert_int_equal(procs__count(ps), 1);
    /* The pid reused by a process started later. */
    put(root, "stat", "4242 (other) S 1 4242 4242 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 999 0 0\n");
    procs__sweep(ps, 20 * MS, false); /* not asked: kept */
    assert_int_equal(procs__count(ps), 1);
    procs__sweep(ps, 30 * MS, true); /* asked: exited as of now */
    assert_int_equal(procs__count(ps), 1);
    procs__sweep(ps, 40 * MS, false); /* forgotten once past the grace */
    assert_int_equal(procs__count(ps), 0);

    /* Gone from /proc altogether. */
    put(root, "stat", "4242 (qsort_cb) S 1 4242 4242 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 777 0 0\n");
    assert_non_null(procs__get(ps, PID, "qsort_cb", 50 * MS));
    snprintf(cmd, sizeof(cmd), "rm -rf %s/%d", root, PID);
    assert_int_equal(system(cmd), 0);
    procs__sweep(ps, 60 * MS, false);
    assert_int_equal(procs__count(ps), 1);
    procs__sweep(ps, 70 * MS, true);
    procs__sweep(ps, 80 * MS, false);
    assert_int_equal(procs__count(ps), 0);

    table_close(ps, bc, root);
}

/* An exited process gone from /proc, asked for again past the reuse check
 * (its off-CPU sums named at the window's end): the same process, its
 * identity as read while it lived, not read again from a vanished pid
 * (which named it by its comm and lost its cgroup's service). A pid back
 * in /proc with another start time is a new process. */
static void test_exited_not_taken_for_reused(void **state)
{
    (void)state;
    char root[] = "/tmp/cx-procs-XXXXXX", cmd[600];

    fake_proc(root);
    put(root, "maps", "");
    struct binary_cache *bc;
    struct procs *ps = table_open(root, &bc);
    struct proc *p = procs__get(ps, PID, "qsort_cb", 1 * MS);
    assert_non_null(p);
    uint64_t ids0, ids1, maps0, maps1, start = p->start_time;
    char exe[sizeof(p->exe)];
    snprintf(exe, sizeof(exe), "%s", p->exe);

    procs__exit(ps, PID, 10 * MS);
    snprintf(cmd, sizeof(cmd), "rm -rf %s/%d", root, PID);
    assert_int_equal(system(cmd), 0);
    procs__reads(ps, &maps0, &ids0);
    p = procs__get(ps, PID, NULL, 500 * MS);
    procs__reads(ps, &maps1, &ids1);
    assert_non_null(p);
    assert_true(p->exited);
    assert_int_equal(ids1, ids0);
    assert_int_equal(maps1, maps0);
    assert_string_equal(p->exe, exe);
    assert_int_equal(p->start_time, start);

    snprintf(cmd, sizeof(cmd), "%s/%d", root, PID);
    assert_int_equal(mkdir(cmd, 0700), 0);
    put(root, "comm", "other\n");
    put(root, "maps", "");
    put(root, "stat", "4242 (other) S 1 4242 4242 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 999 0 0\n");
    p = procs__get(ps, PID, NULL, 600 * MS);
    assert_false(p->exited);
    assert_int_equal(p->start_time, 999);

    table_close(ps, bc, root);
}

/* An interpreter outside any unit, container or pod is named by what it
 * runs (cmdline_name.h), read at first sight and after exec: a command
 * line rewritten since (setproctitle) renames nothing; inline code keeps
 * the executable's name; a unit's name wins over the script's. */
static void test_interpreter_named_by_script(void **state)
{
    (void)state;
    static const char pylint[] = "/usr/bin/python3\0/usr/bin/pylint\0src\0";
    static const char inline_code[] = "python3\0-c\0pass\0";
    char root[] = "/tmp/cx-procs-XXXXXX", exe[600];

    fake_proc(root);
    put(root, "maps", "");
    put(root, "cgroup", "0::/user.slice/user-0.slice/session-3.scope\n");
    put_bytes(root, "cmdline", pylint, sizeof(pylint) - 1);
    snprintf(exe, sizeof(exe), "%s/%d/exe", root, PID);
    assert_int_equal(symlink("/usr/bin/python3.11", exe), 0);
    struct binary_cache *bc;
    struct procs *ps = table_open(root, &bc);
    struct proc *p = procs__get(ps, PID, "pylint", 1 * MS);
    assert_non_null(p);
    assert_string_equal(p->exe, "python3.11");
    assert_string_equal(p->id.service, "pylint");

    /* Rewritten in place: still the name read at first sight. */
    put(root, "cmdline", "pylint: linting src");
    p = procs__get(ps, PID, NULL, 2 * MS);
    assert_string_equal(p->id.service, "pylint");
    /* An exec into inline code: the executable's name. */
    put_bytes(root, "cmdline", inline_code, sizeof(inline_code) - 1);
    p = procs__exec(ps, PID, "python3", 0, 0, 3 * MS);
    assert_string_equal(p->id.service, "python3.11");
    /* A unit's process: the unit's name, whatever it runs. */
    put_bytes(root, "cmdline", pylint, sizeof(pylint) - 1);
    put(root, "cgroup", "0::/system.slice/lint.service\n");
    p = procs__exec(ps, PID, "pylint", 0, 0, 4 * MS);
    assert_string_equal(p->id.service, "lint");
    table_close(ps, bc, root);
}

/* The cgroup2 hierarchy's root, or NULL. */
static const char *cgroup2_root(void)
{
    static const char *const at[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
    char probe[64];

    for (size_t i = 0; i < 2; i++) {
        snprintf(probe, sizeof(probe), "%s/cgroup.procs", at[i]);
        struct stat st;
        /* cgroup v1's root has cgroup.procs too, but no cgroup.controllers. */
        char ctl[64];
        snprintf(ctl, sizeof(ctl), "%s/cgroup.controllers", at[i]);
        if (stat(probe, &st) == 0 && stat(ctl, &st) == 0)
            return at[i];
    }
    return NULL;
}

/* Makes the cgroup of unit NAME-PID.service under cg's system.slice (made
 * too when missing: *made_slice says so). Fills unit with its path, st
 * with its stat (a cgroup2 directory's inode is its id) and want with the
 * service it names, NAME-PID. */
static void make_unit(const char *cg, const char *name, char *slice, size_t slice_len, char *unit,
                      size_t unit_len, struct stat *st, char *want, size_t want_len,
                      bool *made_slice)
{
    snprintf(slice, slice_len, "%s/system.slice", cg);
    *made_slice = mkdir(slice, 0755) == 0;
    snprintf(unit, unit_len, "%s/%s-%d.service", slice, name, (int)getpid());
    assert_int_equal(mkdir(unit, 0755), 0);
    assert_int_equal(stat(unit, st), 0);
    snprintf(want, want_len, "%s-%d", name, (int)getpid());
}

/* A process whose exec event is handled after it has gone (a busy agent;
 * /proc/PID has no cgroup file left): the cgroup id BPF took at the exec
 * still names its unit. With id 0 it is named by its executable, as
 * before. Needs root and a cgroup2 hierarchy (it makes a unit's cgroup). */
static void test_exec_named_by_cgroup_id(void **state)
{
    (void)state;
    const char *cg = cgroup2_root();
    char root[] = "/tmp/cx-procs-XXXXXX", slice[128], unit[192], want[64];
    struct stat st;
    bool made_slice;

    if (geteuid() != 0 || !cg) {
        print_message("skipped: needs root and a cgroup2 hierarchy\n");
        skip();
    }
    make_unit(cg, "cxunit-web", slice, sizeof(slice), unit, sizeof(unit), &st, want, sizeof(want),
              &made_slice);

    fake_proc(root);
    put(root, "maps", "");
    struct binary_cache *bc;
    struct procs *ps = table_open(root, &bc);
    struct proc *p = procs__exec(ps, PID, "cpu_split", 0, 0, 1 * MS);
    assert_non_null(p);
    assert_string_equal(p->id.service, "qsort_cb");
    p = procs__exec(ps, PID, "cpu_split", st.st_ino, 0, 2 * MS);
    assert_string_equal(p->id.service, want);
    assert_string_equal(strstr(unit, want), p->id.systemd_unit);
    /* An id of no cgroup (removed since): named by its executable again. */
    assert_int_equal(rmdir(unit), 0);
    p = procs__exec(ps, PID, "cpu_split", st.st_ino, 0, 3 * MS);
    assert_string_equal(p->id.service, "qsort_cb");

    table_close(ps, bc, root);
    if (made_slice)
        rmdir(slice);
}

/* The cgroup of an exec's id is read once: a second process exec'd in it
 * is named without reading its cgroup file (here rewritten to say another
 * unit, which only a read would see). A file that does not say what the id
 * does (a process moved since its exec) is not remembered, and a process
 * without an id is read as before. Needs root and a cgroup2 hierarchy. */
static void test_cgroup_read_once_per_id(void **state)
{
    (void)state;
    const char *cg = cgroup2_root();
    char root[] = "/tmp/cx-procs-XXXXXX", slice[128], unit[192], text[300], want[64];
    struct stat st;
    bool made_slice;

    if (geteuid() != 0 || !cg) {
        print_message("skipped: needs root and a cgroup2 hierarchy\n");
        skip();
    }
    make_unit(cg, "cxunit-db", slice, sizeof(slice), unit, sizeof(unit), &st, want, sizeof(want),
              &made_slice);

    fake_proc(root);
    put(root, "maps", "");
    /* A file that is not the id's: read, not remembered. */
    put(root, "cgroup", "0::/system.slice/liar.service\n");
    struct binary_cache *bc;
    struct procs *ps = table_open(root, &bc);
    struct proc *p = procs__exec(ps, PID, "cpu_split", st.st_ino, 0, 1 * MS);
    assert_string_equal(p->id.service, "liar");
    put(root, "cgroup", "0::/system.slice/other.service\n");
    p = procs__exec(ps, PID, "cpu_split", st.st_ino, 0, 2 * MS);
    assert_string_equal(p->id.service, "other");
    /* The id's own line: remembered, and the file is not read again. */
    snprintf(text, sizeof(text), "0::%s\n", unit + strlen(cg));
    put(root, "cgroup", text);
    p = procs__exec(ps, PID, "cpu_split", st.st_ino, 0, 3 * MS);
    assert_string_equal(p->id.service, want);
    put(root, "cgroup", "0::/system.slice/other.service\n");
    p = procs__exec(ps, PID, "cpu_split", st.st_ino, 0, 4 * MS);
    assert_string_equal(p->id.service, want);
    /* No id (an exec event without one, a first sight): the file. */
    p = procs__exec(ps, PID, "cpu_split", 0, 0, 5 * MS);
    assert_string_equal(p->id.service, "other");

    table_close(ps, bc, root);
    assert_int_equal(rmdir(unit), 0);
    if (made_slice)
        rmdir(slice);
}

static void found(void *ctx, uint32_t tgid)
{
    uint32_t *got = ctx;
    assert_int_equal(*got, 0);
    *got = tgid;
}

/* The start-up's first pass finds an excluded process from its environ
 * alone, adds nothing to the table, and passes over the others (another
 * value, a variable that only ends in the name, no environ at all). */
static void test_scan_disabled(void **state)
{
    (void)state;
    static const char off[] = "HOME=/\0CODEXRAY_PROFILING=disabled\0";
    static const char other[] = "MY_CODEXRAY_PROFILING=disabled\0CODEXRAY_PROFILING=enabled\0";
    char root[] = "/tmp/cx-procs-XXXXXX", dir[600], path[700];
    uint32_t got = 0;

    fake_proc(root);
    put_bytes(root, "environ", off, sizeof(off) - 1);
    snprintf(dir, sizeof(dir), "%s/%d", root, PID + 1);
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(path, sizeof(path), "%s/environ", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(other, 1, sizeof(other) - 1, f), sizeof(other) - 1);
    fclose(f);
    snprintf(dir, sizeof(dir), "%s/%d", root, PID + 2); /* no environ: gone, or a kernel thread */
    assert_int_equal(mkdir(dir, 0700), 0);
    struct binary_cache *bc;
    struct procs *ps = table_open(root, &bc);
    assert_int_equal(procs__scan_disabled(ps, found, &got), 1);
    assert_int_equal(got, PID);
    assert_int_equal(procs__count(ps), 0);
    table_close(ps, bc, root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_maps_kept_when_gone),
        cmocka_unit_test(test_cgroup_read_once_per_id),
        cmocka_unit_test(test_hint_reads_maps),
        cmocka_unit_test(test_exec_start_from_event),
        cmocka_unit_test(test_exec_reread_after_hint),
        cmocka_unit_test(test_exec_lazy),
        cmocka_unit_test(test_sweep_asks_proc_when_told),
        cmocka_unit_test(test_exited_not_taken_for_reused),
        cmocka_unit_test(test_interpreter_named_by_script),
        cmocka_unit_test(test_exec_named_by_cgroup_id),
        cmocka_unit_test(test_scan_disabled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
