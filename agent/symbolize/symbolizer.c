#include "symbolizer.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/hmap.h"
#include "../../common/log.h"
#include "demangle.h"
#include "dwarf_scopes.h"
#include "gopclntab.h"
#include "plt.h"
#include "symbolizer_int.h"
#include "symtab.h"

/* Results cached per binary before symbolizer__trim() starts over. */
#define CACHE_MAX_ENTRIES 200000

/* Only one symbolizer exists per process (the worker's); syms_free needs to
 * find it without a back pointer in every binary. */
static struct symbolizer *the_symbolizer;
/* Guards the_symbolizer->all: a binary's last reference may be dropped on
 * the main thread (its cache sweep) while the worker walks the list. The
 * binsyms themselves need no lock: a binary no one references is used by no
 * one. */
pthread_mutex_t symbolizer_all_mu = PTHREAD_MUTEX_INITIALIZER;

/* libdwfl maps binaries into memory. A user who truncates a file the agent
 * has mapped would make the next read of it raise SIGBUS and kill the agent:
 * every call into libdw runs under this guard, which turns the signal into
 * a jump back out, and the binary is given up (its libdw state is leaked,
 * never touched again). */
static __thread sigjmp_buf *sigbus_guard;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
    (void)si;
    (void)uc;
    if (sigbus_guard)
        siglongjmp(*sigbus_guard, 1);
    signal(sig, SIG_DFL); /* not ours: die as we would have */
    raise(sig);
}

static char *debuginfo_path = NULL; /* libdwfl's default: ":.debug:/usr/lib/debug" */

static const Dwfl_Callbacks callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = symbolizer_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &debuginfo_path,
};

static void release(struct binsyms *bs);

static void binsyms_free(void *p)
{
    struct binsyms *bs = p;
    struct symbolizer *s;

    if (!bs)
        return;
    pthread_mutex_lock(&symbolizer_all_mu);
    s = the_symbolizer;
    for (size_t i = 0; s && i < s->nall; i++) {
        if (s->all[i] == bs) {
            s->all[i] = s->all[--s->nall];
            break;
        }
    }
    pthread_mutex_unlock(&symbolizer_all_mu);
    release(bs);
    free(bs->fetched);
    free(bs);
}

/* Frees what bs holds (not bs, not its fetched path). */
static void release(struct binsyms *bs)
{
    if (bs->dwfl && !bs->broken)
        dwfl_end(bs->dwfl);
    gopclntab__free(bs->go);
    symtab__free(bs->symtab); /* before dwfl_end: its names are libdwfl's */
    plt__free(bs->plt);
    for (size_t i = 0; bs->cu_index && i < hmap__len(bs->cu_index); i++)
        cu_scopes__free((struct cu_scopes *)(uintptr_t)*hmap__val(bs->cu_index, i));
    hmap__free(bs->cu_index);
    hmap__free(bs->strings);
    hmap__free(bs->cache);
    free(bs->results);
    free(bs->cu_ranges);
}

struct symbolizer *symbolizer__new(void)
{
    struct symbolizer *s = calloc(1, sizeof(*s));

    if (!s)
        return NULL;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigaction(SIGBUS, &sa, NULL);
    pthread_mutex_lock(&symbolizer_all_mu);
    the_symbolizer = s;
    pthread_mutex_unlock(&symbolizer_all_mu);
    return s;
}

struct binary *symbolizer__vdso(struct symbolizer *s)
{
    if (!s->vdso_tried) {
        s->vdso = binary__open_vdso();
        s->vdso_tried = true;
    }
    return s->vdso;
}

void symbolizer__free(struct symbolizer *s)
{
    if (!s)
        return;
    binary__put(s->vdso); /* while its state can still be unlisted */
    pthread_mutex_lock(&symbolizer_all_mu);
    if (the_symbolizer == s)
        the_symbolizer = NULL;
    pthread_mutex_unlock(&symbolizer_all_mu);
    free(s->all);
    free(s);
}

const char *binsyms__intern(struct binsyms *bs, const char *str)
{
    long i;

    if (!str)
        str = "";
    i = hmap__put(bs->strings, str, strlen(str) + 1, NULL);
    return i < 0 ? "" : hmap__key(bs->strings, i, NULL);
}

static bool main_has_symtab(Elf *elf)
{
    for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
        GElf_Shdr sh;
        if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_SYMTAB && sh.sh_size > 0)
            return true;
    }
    return false;
}

static void load(struct binsyms *bs, struct binary *b)
{
    GElf_Addr bias = 0;
    Elf *elf;
    size_t nph;
    int fd;

    if (b->fd < 0) {
        snprintf(bs->why, sizeof(bs->why), "cannot open it (%s)", strerror(b->open_err));
        return;
    }
    if (bs->broken)
        return;
    /* Only ELF goes to libdwfl: given anything else it tries gzip, bzip2, xz
     * and zstd, and a hostile mapped file could be a decompression bomb. */
    unsigned char magic[4];
    if (pread(b->fd, magic, 4, 0) != 4 || memcmp(magic, ELFMAG, SELFMAG) != 0) {
        snprintf(bs->why, sizeof(bs->why), "not an ELF file");
        return;
    }
    fd = dup(b->fd); /* libdwfl closes what it is given, once it takes it */
    if (fd < 0) {
        snprintf(bs->why, sizeof(bs->why), "cannot open it (%s)", strerror(errno));
        return;
    }
    bs->dwfl = dwfl_begin(&callbacks);
    if (!bs->dwfl) {
        close(fd);
        snprintf(bs->why, sizeof(bs->why), "libdwfl: %s", dwfl_errmsg(-1));
        return;
    }
    dwfl_report_begin(bs->dwfl);
    bs->mod = dwfl_report_elf(bs->dwfl, b->name, b->path, fd, 0, false);
    dwfl_report_end(bs->dwfl, NULL, NULL);
    if (!bs->mod)
        close(fd); /* not taken on failure */
    if (!bs->mod || !(elf = dwfl_module_getelf(bs->mod, &bias))) {
        snprintf(bs->why, sizeof(bs->why), "not a readable ELF file (%s)", dwfl_errmsg(-1));
        bs->mod = NULL;
        return;
    }
    bs->bias = bias;
    void **ud = NULL; /* find_debuginfo's way back to bs */
    dwfl_module_info(bs->mod, &ud, NULL, NULL, NULL, NULL, NULL, NULL);
    if (ud)
        *ud = bs;
    /* File offsets become ELF addresses through the loadable segments. */
    if (elf_getphdrnum(elf, &nph) == 0) {
        for (size_t i = 0; i < nph && bs->nseg < MAX_SEGMENTS; i++) {
            GElf_Phdr ph;
            if (gelf_getphdr(elf, i, &ph) && ph.p_type == PT_LOAD)
                bs->seg[bs->nseg++] = (struct segment){ph.p_offset, ph.p_filesz, ph.p_vaddr};
        }
    }
    bool is_go = gopclntab__is_go(elf);
    if (is_go)
        bs->go = gopclntab__open_elf(elf);
    bs->has_symtab = main_has_symtab(elf);
    bs->nsyms = dwfl_module_getsymtab(bs->mod);
    if (bs->nsyms > 0)
        bs->symtab = symtab__build(bs->mod);
    bs->plt = plt__build(elf);
    Dwarf_Addr dbias;
    bs->has_dwarf = dwfl_module_getdwarf(bs->mod, &dbias) != NULL;
    const char *debugfile = NULL;
    dwfl_module_info(bs->mod, NULL, NULL, NULL, NULL, NULL, NULL, &debugfile);
    if (bs->go) {
        /* Named from .gopclntab, stripped or not. */
    } else if (is_go && bs->nsyms <= 0) {
        snprintf(bs->why, sizeof(bs->why),
                 "a Go binary without symbols whose .gopclntab could not be read (missing, "
                 "or a layout other than Go 1.2, 1.16, 1.18 or 1.20's)");
    } else if (bs->nsyms <= 0) {
        snprintf(bs->why, sizeof(bs->why),
                 "it has no symbols (stripped with --strip-all?) and no debug file was found "
                 "under /usr/lib/debug/.build-id/%s%.2s/ or by .gnu_debuglink",
                 b->build_id[0] ? "" : "(no build id) ", b->build_id);
    } else if (!bs->has_symtab && !debugfile) {
        snprintf(bs->why, sizeof(bs->why),
                 "it keeps only its exported symbols (.dynsym): internal functions have no name "
                 "and no debug file was found under /usr/lib/debug/.build-id/");
    }
    if (bs->why[0] && bs->fetched && debugfile)
        bs->why[0] = '\0'; /* the fetched file names what it can */
    log_debug("symbols: %s: loaded symbols=%d table_bytes=%zu symtab=%d dwarf=%d debug_file=%s "
              "gopclntab=%s",
              b->path, bs->nsyms, symtab__bytes(bs->symtab), bs->has_symtab, bs->has_dwarf,
              debugfile ? debugfile : "none",
              bs->go ? gopclntab__version(bs->go) : (is_go ? "unreadable" : "none"));
}

/* Hands back the file pages bs's ELF and debug file images hold: building
 * its tables read all of .symtab/.dynsym and their names, a C++ library's
 * tens of MiB, of which a window's lookups need a few pages (faulted in
 * again from the page cache). */
static void drop_images(struct binsyms *bs)
{
    Dwarf_Addr b;
    Dwarf *dw;

    if (!bs->mod || bs->broken)
        return;
    binary__drop_image(dwfl_module_getelf(bs->mod, &b));
    if ((dw = dwfl_module_getdwarf(bs->mod, &b)))
        binary__drop_image(dwarf_getelf(dw));
}

/* Empties bs for a fresh load, keeping what survives one (its place in the
 * symbolizer's list, the debuginfod state and fetched file). Out of memory,
 * bs is left without tables: its frames go unnamed. */
static void reset(struct binsyms *bs)
{
    struct binsyms keep = {.dbg = bs->dbg,
                           .fetched = bs->fetched,
                           .epoch = bs->epoch,
                           .unnamed_window = bs->unnamed_window,
                           .name = bs->name};
    release(bs);
    *bs = keep;
    bs->strings = hmap__new();
    bs->cache = hmap__new();
    if (!bs->strings || !bs->cache) {
        bs->broken = true; /* nothing is read; lookups find no module */
        snprintf(bs->why, sizeof(bs->why), "out of memory");
    }
}

static void give_up(struct binsyms *bs, struct binary *b)
{
    bs->broken = true;
    bs->mod = NULL;
    snprintf(bs->why, sizeof(bs->why),
             "it changed under the agent (SIGBUS reading it: truncated?)");
    log_warn("symbols: %s: %s; its frames stay unnamed", b->path, bs->why);
}

/* Loads b's symbols into bs (empty but for what survives a reload), under
 * the SIGBUS guard; then once more if debuginfod has its file already. */
static void load_guarded(struct symbolizer *s, struct binsyms *bs, struct binary *b)
{
    sigjmp_buf jb;

    bs->epoch = s->epoch;
    bs->name = b->name;
    if (sigsetjmp(jb, 1) == 0) {
        sigbus_guard = &jb;
        load(bs, b);
        if (symbolizer_ask_debuginfod(bs, b)) {
            reset(bs);
            load(bs, b);
            bs->dbg = DBG_FETCHED;
            log_info("symbols: %s build_id=%s: named from the debug file debuginfod fetched (%s)",
                     b->path, b->build_id, bs->why[0] ? bs->why : "symbols and DWARF");
        }
        drop_images(bs);
    } else {
        give_up(bs, b);
    }
    sigbus_guard = NULL;
}

static struct binsyms *get(struct symbolizer *s, struct binary *b)
{
    struct binsyms *bs = b->syms;

    /* A binary waiting for its debug file is asked about once a window, at
     * its first lookup, when no result of it is held: a reload then frees
     * nothing in use. */
    if (bs && (bs->dbg == DBG_PENDING || bs->dbg == DBG_FAILED) && bs->epoch != s->epoch) {
        bs->epoch = s->epoch;
        if (symbolizer_ask_debuginfod(bs, b)) {
            reset(bs);
            load_guarded(s, bs, b);
        }
    }
    if (bs)
        return bs;
    bs = calloc(1, sizeof(*bs));
    if (!bs)
        return NULL;
    bs->strings = hmap__new();
    bs->cache = hmap__new();
    if (!bs->strings || !bs->cache) {
        binsyms_free(bs);
        return NULL;
    }
    pthread_mutex_lock(&symbolizer_all_mu);
    if (s->nall == s->cap_all) {
        size_t cap = s->cap_all ? s->cap_all * 2 : 64;
        struct binsyms **a = realloc(s->all, cap * sizeof(*a));
        if (!a) {
            pthread_mutex_unlock(&symbolizer_all_mu);
            binsyms_free(bs);
            return NULL;
        }
        s->all = a;
        s->cap_all = cap;
    }
    s->all[s->nall++] = bs;
    pthread_mutex_unlock(&symbolizer_all_mu);
    load_guarded(s, bs, b);
    b->syms = bs;
    b->syms_free = binsyms_free;
    return bs;
}

static bool offset_to_vaddr(const struct binsyms *bs, uint64_t off, uint64_t *vaddr)
{
    for (unsigned i = 0; i < bs->nseg; i++) {
        const struct segment *g = &bs->seg[i];
        if (off >= g->offset && off < g->offset + g->filesz) {
            *vaddr = off - g->offset + g->vaddr;
            return true;
        }
    }
    return false;
}

static void resolve(struct binsyms *bs, uint64_t file_offset, bool is_return, struct sym_result *r)
{
    uint64_t vaddr;

    memset(r, 0, sizeof(*r));
    r->elf_addr = file_offset;
    /* A return address names the call before it, which may be the last
     * instruction of a segment: look up the byte before. */
    if (!bs->mod || !offset_to_vaddr(bs, file_offset - is_return, &vaddr))
        return;
    r->elf_addr = vaddr + is_return;
    /* Go code is named from .gopclntab whenever it covers the address, even
     * with .symtab and DWARF there: it is the table the Go runtime itself
     * reads, so the names, inlined frames and lines are the ones Go's own
     * tracebacks show, the same whether the binary is stripped or not, and
     * found without parsing DWARF. What it does not cover (cgo's C code)
     * goes on to libdwfl. */
    if (bs->go) {
        struct gopclntab_frame fr[SYM_MAX_INLINE];
        unsigned n = gopclntab__lookup(bs->go, vaddr, fr, SYM_MAX_INLINE);
        for (unsigned i = 0; i < n; i++) {
            const char *fn = binsyms__intern(bs, fr[i].function);
            r->lines[i] = (struct sym_line){fn, fn, binsyms__intern(bs, fr[i].file), fr[i].line};
        }
        if (n) {
            r->n = n;
            r->named = true;
            return;
        }
    }
    /* A PLT stub: no symbol covers it, its GOT slot's relocation names it. */
    const char *stub = plt__lookup(bs->plt, vaddr, NULL);
    if (stub) {
        const char *n = binsyms__intern(bs, stub);
        r->lines[0] = (struct sym_line){n, n, "", 0};
        r->n = 1;
        r->named = true;
        return;
    }
    Dwarf_Addr addr = vaddr + bs->bias;
    GElf_Off off;
    GElf_Sym sym;
    const char *sysname = NULL;
    if (bs->symtab)
        sysname = symtab__lookup(bs->symtab, addr, NULL);
    else if (bs->nsyms > 0) /* out of memory for the table: libdwfl's own search */
        sysname = dwfl_module_addrinfo(bs->mod, addr, &off, &sym, NULL, NULL, NULL);
    char *dem = sysname ? demangle(sysname) : NULL;
    const char *name = dem ? dem : sysname;
    if (bs->has_dwarf) {
        binsyms__name_from_dwarf(bs, addr, r, name, sysname);
        r->named = r->lines[0].function[0] != '\0';
    } else if (name) {
        r->lines[0] =
            (struct sym_line){binsyms__intern(bs, name), binsyms__intern(bs, sysname), "", 0};
        r->n = 1;
        r->named = true;
    }
    free(dem);
    /* A "return address" nothing before it names: a handler returning into
     * the signal trampoline (glibc's __restore_rt sits right after padding
     * no symbol covers). The address itself is then the better guess. */
    if (!r->named && is_return)
        resolve(bs, file_offset, false, r);
}

/* Counts r for the window summary when it is unnamed; returns it. */
static const struct sym_result *counted(struct binsyms *bs, const struct sym_result *r)
{
    bs->unnamed_window += !r->named;
    return r;
}

const struct sym_result *symbolizer__lookup(struct symbolizer *s, struct binary *b,
                                            uint64_t file_offset, bool is_return)
{
    static struct sym_result oom; /* named false: "out of memory" frames stay unnamed */
    struct binsyms *bs = get(s, b);
    uint64_t key = file_offset << 1 | is_return;
    long i;

    if (!bs || !bs->cache || !bs->strings)
        return &oom;
    i = hmap__find(bs->cache, &key, sizeof(key));
    if (i >= 0)
        return counted(bs, &bs->results[*hmap__val(bs->cache, i)]);
    /* Room for the result first, so a key never exists without one. */
    if (bs->nresults == bs->cap_results) {
        size_t cap = bs->cap_results ? bs->cap_results * 2 : 256;
        struct sym_result *nr = realloc(bs->results, cap * sizeof(*nr));
        if (!nr)
            return &oom;
        bs->results = nr;
        bs->cap_results = cap;
    }
    i = hmap__put(bs->cache, &key, sizeof(key), NULL);
    if (i < 0)
        return &oom;
    struct sym_result *r = &bs->results[bs->nresults];
    sigjmp_buf jb;
    /* Only a lookup the cache did not answer reads the files: the pages
     * to hand back (drop_touched) are those binaries'. */
    bs->touched = true;
    s->missed++;
    if (sigsetjmp(jb, 1) == 0) {
        sigbus_guard = &jb;
        resolve(bs, file_offset, is_return, r);
    } else {
        memset(r, 0, sizeof(*r));
        r->elf_addr = file_offset;
        give_up(bs, b);
    }
    sigbus_guard = NULL;
    s->unit_read |= bs->unit_read;
    *hmap__val(bs->cache, i) = bs->nresults++;
    bs->unnamed_window += !r->named;
    if (!r->named && !bs->logged) {
        bs->logged = true;
        /* load() says why where symbols or debug information are missing:
         * a debug package is then the fix. Otherwise the binary has all it
         * can have (its .symtab or a debug file) and the address is in code
         * no symbol covers: no package would name it. */
        bool missing = bs->why[0] != '\0';
        if (!missing)
            snprintf(bs->why, sizeof(bs->why),
                     "some of its code lies outside every symbol it has (ELF address 0x%llx: "
                     "generated code, padding or a stub)",
                     (unsigned long long)r->elf_addr);
        if (bs->dbg == DBG_PENDING)
            /* Not a problem yet: the file is on its way, and the reload
             * that takes it says again if frames stay unnamed (the
             * debuginfod client logs a failed fetch itself). */
            log_info("symbols: %s build_id=%s: frames shown as %s+0xADDR until its debug file "
                     "arrives from debuginfod",
                     b->path, b->build_id, b->name);
        else
            log_warn("symbols: %s%s%s: frames unnamed, shown as %s+0xADDR: %s%s", b->path,
                     b->build_id[0] ? " build_id=" : "", b->build_id, b->name, bs->why,
                     missing ? "; fix: install its debug package (-dbgsym/-dbg), serve its debug "
                               "file by debuginfod, or build with -g and do not strip --strip-all"
                             : "");
    }
    return r;
}

const char *symbolizer__why_unnamed(struct symbolizer *s, struct binary *b)
{
    struct binsyms *bs = get(s, b);

    if (!bs)
        return "out of memory";
    return bs->why[0] ? bs->why : NULL;
}

bool symbolizer__has_dwarf(struct symbolizer *s, struct binary *b)
{
    struct binsyms *bs = get(s, b);

    return bs && bs->has_dwarf;
}

/* Lookups the cache did not answer, across binaries, after which
 * symbolizer__drop_pages hands their pages back: one without DWARF reads a
 * page or two (a name, a PLT slot), so this holds at most a few hundred KiB
 * of file pages between two drops. Each drop reads pagemap over the whole
 * image of every binary touched (cc1: 7,000 pages); done after every
 * profile, a loaded node's hundreds of short compiler processes a window,
 * each naming a few new frames of cc1, made it a tenth of the worker's CPU
 * (perf, bench/run.py's loaded machine), with the page faults that read
 * them back. */
#define DROP_AFTER_MISSES 128

/* drop_images of every binary looked up since the last call (all), or,
 * unless enough lookups read files or one of them read a unit's DWARF (a
 * first window's naming: the unit's DIEs, line table and names, up to MiBs),
 * of none yet. The caller holds symbolizer_all_mu. */
static void drop_touched(struct symbolizer *s, bool all)
{
    if (!all && s->missed < DROP_AFTER_MISSES && !s->unit_read)
        return;
    for (size_t i = 0; i < s->nall; i++) {
        struct binsyms *bs = s->all[i];
        if (bs->touched)
            drop_images(bs);
        bs->touched = false;
        bs->unit_read = false;
    }
    s->missed = 0;
    s->unit_read = false;
}

void symbolizer__drop_pages(struct symbolizer *s)
{
    /* Most profiles' frames were all named before: nothing to hand back,
     * and no need to visit every binary's state (hundreds, a page each)
     * to find that out. missed and unit_read are this thread's. */
    if (s->missed < DROP_AFTER_MISSES && !s->unit_read)
        return;
    pthread_mutex_lock(&symbolizer_all_mu);
    drop_touched(s, false);
    pthread_mutex_unlock(&symbolizer_all_mu);
}

void symbolizer__trim(struct symbolizer *s)
{
    pthread_mutex_lock(&symbolizer_all_mu);
    s->epoch++;
    /* What the window's lookups touched (DWARF of the CUs it named, the
     * names it read) is not needed until the next one. */
    drop_touched(s, true);
    for (size_t i = 0; i < s->nall; i++) {
        struct binsyms *bs = s->all[i];
        bs->unnamed_window = 0;
        if (hmap__len(bs->cache) < CACHE_MAX_ENTRIES)
            continue;
        struct hmap *c = hmap__new(), *st = hmap__new();
        if (!c || !st) {
            hmap__free(c);
            hmap__free(st);
            continue;
        }
        hmap__free(bs->cache);
        hmap__free(bs->strings);
        bs->cache = c;
        bs->strings = st;
        bs->nresults = 0;
    }
    pthread_mutex_unlock(&symbolizer_all_mu);
}
