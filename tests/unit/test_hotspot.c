/* runtimes/hotspot on a fake JVM's memory: VMStructs tables read into the
 * walk's description (and refused when a field is missing or the release
 * is not known), Java frames named from Method metadata (class, method,
 * file, the line of a bytecode index in both encodings of the compressed
 * line table), a compiled frame's inlined methods from its PcDescs and
 * scopes, a reused nmethod refused; random memory read without harm. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../agent/runtimes/hotspot/hs_name.h"
#include "../../agent/runtimes/hotspot/hs_vm.h"

#define BASE 0x100000ull
#define SIZE (1u << 20)

struct image {
    uint8_t *mem;
    uint64_t top; /* bump allocator */
};

static unsigned img_reads; /* reads made, for the cache's test */

static int img_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
    struct image *im = ctx;

    img_reads++;
    if (addr < BASE || addr + len > BASE + SIZE || addr + len < addr)
        return -EFAULT;
    memcpy(buf, im->mem + (addr - BASE), len);
    return 0;
}

static uint64_t alloc(struct image *im, size_t len)
{
    uint64_t a = im->top;

    im->top += (len + 15) & ~15ull;
    assert_true(im->top <= BASE + SIZE);
    return a;
}

static void put(struct image *im, uint64_t addr, const void *v, size_t len)
{
    memcpy(im->mem + (addr - BASE), v, len);
}

static void put64(struct image *im, uint64_t addr, uint64_t v)
{
    put(im, addr, &v, 8);
}

static void put32(struct image *im, uint64_t addr, uint32_t v)
{
    put(im, addr, &v, 4);
}

static void put16(struct image *im, uint64_t addr, uint16_t v)
{
    put(im, addr, &v, 2);
}

static uint64_t str(struct image *im, const char *s)
{
    uint64_t a = alloc(im, strlen(s) + 1);
    put(im, a, s, strlen(s) + 1);
    return a;
}

/* A HotSpot Symbol: hash, u2 length, bytes. */
static uint64_t symbol(struct image *im, const char *s)
{
    uint64_t a = alloc(im, 6 + strlen(s));
    put16(im, a + 4, (uint16_t)strlen(s));
    put(im, a + 6, s, strlen(s));
    return a;
}

/* The fields, with the offsets this fake JVM has. */
struct fld {
    const char *type, *field;
    int is_static;
    uint64_t val; /* offset, or the static's address (filled later) */
};

/* JDK 25's fields where they differ from 17's (renamed, moved, retyped,
 * new: to of NULL means 17 has none), with their C types. */
struct fld25 {
    const char *type, *field; /* 17's */
    const char *to_type, *to_field;
    uint64_t val;
    const char *ctype;
};

static const struct fld25 fields25[] = {
    {"CodeBlob", "_name", "CodeBlob", "_name", 8, "const char*"},
    {"CodeBlob", "_frame_size", "CodeBlob", "_frame_size", 44, "int"},
    {"CodeBlob", "_frame_complete_offset", "CodeBlob", "_frame_complete_offset", 54, "int16_t"},
    {"CodeBlob", "_code_begin", "CodeBlob", "_code_offset", 36, "int"},
    {"CompiledMethod", "_method", "nmethod", "_method", 80, "Method*"},
    {"CompiledMethod", "_scopes_data_begin", "nmethod", "_scopes_data_offset", 200, "int"},
    {"nmethod", "_metadata_offset", "CodeBlob", "_mutable_data", 16, "address"},
    {"nmethod", "_dependencies_offset", "CodeBlob", "_relocation_size", 28, "int"},
    {"nmethod", "_scopes_pcs_offset", "nmethod", "_scopes_pcs_offset", 196, "int"},
    {"ConstMethod", "_flags", "ConstMethod", "_flags._flags", 28, "u4"},
    {"nmethod", "_compile_id", "nmethod", "_compile_id", 212, "int"},
    {NULL, NULL, "CodeBlob", "_mutable_data_size", 48, "int"},
    {NULL, NULL, "nmethod", "_immutable_data", 96, "address"},
};
#define NFIELDS25 (sizeof(fields25) / sizeof(fields25[0]))
/* fake_init makes JDK 25's tables */
static bool jdk25;

enum { S_HEAPS, S_LOW, S_HIGH, S_INTERP, S_RELEASE };

static struct fld fields[] = {
    [S_HEAPS] = {"CodeCache", "_heaps", 1, 0},
    [S_LOW] = {"CodeCache", "_low_bound", 1, 0},
    [S_HIGH] = {"CodeCache", "_high_bound", 1, 0},
    [S_INTERP] = {"AbstractInterpreter", "_code", 1, 0},
    [S_RELEASE] = {"Abstract_VM_Version", "_s_vm_release", 1, 0},
    {"GrowableArrayBase", "_len", 0, 0},
    {"GrowableArray<int>", "_data", 0, 8},
    {"CodeHeap", "_memory", 0, 8},
    {"CodeHeap", "_segmap", 0, 120},
    {"CodeHeap", "_log2_segment_size", 0, 256},
    {"VirtualSpace", "_low_boundary", 0, 0},
    {"VirtualSpace", "_high_boundary", 0, 8},
    {"VirtualSpace", "_low", 0, 16},
    {"HeapBlock", "_header", 0, 0},
    {"HeapBlock::Header", "_used", 0, 8},
    {"StubQueue", "_stub_buffer", 0, 8},
    {"StubQueue", "_buffer_limit", 0, 20},
    {"CodeBlob", "_name", 0, 96},
    {"CodeBlob", "_frame_size", 0, 28},
    {"CodeBlob", "_frame_complete_offset", 0, 20},
    {"CodeBlob", "_code_begin", 0, 32},
    {"CompiledMethod", "_method", 0, 112},
    {"CompiledMethod", "_scopes_data_begin", 0, 120},
    {"Method", "_constMethod", 0, 8},
    {"ConstMethod", "_constants", 0, 8},
    {"ConstMethod", "_name_index", 0, 34},
    {"ConstMethod", "_signature_index", 0, 36},
    {"ConstMethod", "_flags", 0, 28},
    {"ConstMethod", "_code_size", 0, 32},
    {"ConstantPool", "_pool_holder", 0, 24},
    {"ConstantPool", "_length", 0, 60},
    {"ConstantPool", "_source_file_name_index", 0, 54},
    {"Klass", "_name", 0, 24},
    {"Symbol", "_length", 0, 4},
    {"Symbol", "_body", 0, 6},
    {"nmethod", "_metadata_offset", 0, 260},
    {"nmethod", "_scopes_pcs_offset", 0, 268},
    {"nmethod", "_dependencies_offset", 0, 272},
    {"nmethod", "_compile_id", 0, 304},
    {"PcDesc", "_pc_offset", 0, 0},
    {"PcDesc", "_scope_decode_offset", 0, 4},
    {"Unrelated", "_field", 0, 4},
};
#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

struct fake {
    struct image im;
    struct hs_syms syms;
    uint64_t heap_start, segmap, interp;
    uint64_t statics[5];
};

/* HotSpot's UNSIGNED5 encoding of v. */
static size_t u5(uint8_t *out, uint32_t v)
{
    size_t n = 0;
    for (int i = 0;; i++) {
        if (v < 192 || i == 4) {
            out[n++] = (uint8_t)v;
            return n;
        }
        v -= 192;
        out[n++] = (uint8_t)(192 + v % 64);
        v >>= 6;
    }
}

static size_t s5(uint8_t *out, int32_t v)
{
    return u5(out, ((uint32_t)v << 1) ^ (uint32_t)(v >> 31));
}

/* The tables and the runtime structures; skip: a field left out (-1:
 * none); release: the VM's release string. */
static void fake_init(struct fake *f, int skip, const char *release)
{
    struct image *im = &f->im;
    uint64_t a;

    memset(f, 0, sizeof(*f));
    im->mem = calloc(1, SIZE);
    im->top = BASE + 16;
    for (int k = 0; k < 5; k++)
        fields[k].val = f->statics[k] = alloc(im, 8);
    /* gHotSpotVMStructs: 48-byte entries, a NULL type name at the end. */
    uint64_t arr = alloc(im, 48 * (NFIELDS + NFIELDS25 + 1));
    unsigned n = 0;
    for (unsigned i = 0; i < NFIELDS + NFIELDS25; i++) {
        struct fld fl = i < NFIELDS ? fields[i] : (struct fld){0};
        const char *ctype = NULL;
        for (unsigned j = 0; jdk25 && j < NFIELDS25; j++) {
            const struct fld25 *r = &fields25[j];
            if (i < NFIELDS
                    ? r->type && strcmp(r->type, fl.type) == 0 && strcmp(r->field, fl.field) == 0
                    : !r->type && j == i - NFIELDS)
                fl = (struct fld){r->to_type, r->to_field, 0, r->val}, ctype = r->ctype;
        }
        if ((int)i == skip || !fl.type)
            continue;
        uint64_t e = arr + 48 * n++;
        put64(im, e, str(im, fl.type));
        put64(im, e + 8, str(im, fl.field));
        if (ctype)
            put64(im, e + 16, str(im, ctype));
        put32(im, e + 24, (uint32_t)fl.is_static);
        put64(im, fl.is_static ? e + 40 : e + 32, fl.val);
    }
    static const struct {
        const char *name;
        uint64_t size;
    } types[] = {{"HeapBlock", 16}, {"ConstantPool", 72}, {"PcDesc", 16}, {"ConstMethod", 48}};
    uint64_t tarr = alloc(im, 32 * 5);
    for (unsigned i = 0; i < 4; i++) {
        put64(im, tarr + 32 * i, str(im, types[i].name));
        put64(im, tarr + 32 * i + 16, types[i].size);
    }
    const struct {
        const char *name;
        int32_t v;
    } ints[] = {{"frame::interpreter_frame_sender_sp_offset", -1},
                {"frame::interpreter_frame_last_sp_offset", -2},
                {jdk25 ? "ConstMethodFlags::_misc_has_linenumber_table"
                       : "ConstMethod::_has_linenumber_table",
                 1},
                {"InvocationEntryBci", -1}};
    uint64_t iarr = alloc(im, 16 * 5);
    for (unsigned i = 0; i < 4; i++) {
        put64(im, iarr + 16 * i, str(im, ints[i].name));
        put32(im, iarr + 16 * i + 8, (uint32_t)ints[i].v);
    }
    /* The exported symbols: each a uint64_t in memory (bias 0). */
    const uint64_t vals[HS_SYM__N] = {
        [HS_STRUCTS] = arr,         [HS_STRUCT_TYPE_NAME] = 0,
        [HS_STRUCT_FIELD_NAME] = 8, [HS_STRUCT_TYPE_STRING] = 16,
        [HS_STRUCT_IS_STATIC] = 24, [HS_STRUCT_OFFSET] = 32,
        [HS_STRUCT_ADDRESS] = 40,   [HS_STRUCT_STRIDE] = 48,
        [HS_TYPES] = tarr,          [HS_TYPE_TYPE_NAME] = 0,
        [HS_TYPE_SIZE] = 16,        [HS_TYPE_STRIDE] = 32,
        [HS_INTS] = iarr,           [HS_INT_NAME] = 0,
        [HS_INT_VALUE] = 8,         [HS_INT_STRIDE] = 16,
    };
    for (int k = 0; k < HS_SYM__N; k++) {
        f->syms.addr[k] = alloc(im, 8);
        put64(im, f->syms.addr[k], vals[k]);
    }
    put64(im, f->statics[S_RELEASE], str(im, release));
    /* One code heap of 64 KiB in 64-byte segments, its segment map. */
    f->heap_start = alloc(im, 65536);
    f->segmap = alloc(im, 1024);
    memset(im->mem + (f->segmap - BASE), 0xff, 1024);
    uint64_t heap = alloc(im, 344);
    put64(im, heap + 8 + 16, f->heap_start);
    put64(im, heap + 8 + 8, f->heap_start + 65536);
    put64(im, heap + 120 + 16, f->segmap);
    put32(im, heap + 256, 6);
    uint64_t data = alloc(im, 8), ga = alloc(im, 16);
    put64(im, data, heap);
    put32(im, ga, 1);
    put64(im, ga + 8, data);
    put64(im, f->statics[S_HEAPS], ga);
    put64(im, f->statics[S_LOW], f->heap_start);
    put64(im, f->statics[S_HIGH], f->heap_start + 65536);
    f->interp = f->heap_start + 16;
    a = alloc(im, 32);
    put64(im, a + 8, f->interp);
    put32(im, a + 20, 4096);
    put64(im, f->statics[S_INTERP], a);
}

static void fake_free(struct fake *f)
{
    free(f->im.mem);
}

/* A method Klass.name with a line table of (bci, line) pairs. */
static uint64_t method(struct image *im, const char *klass, const char *name, const char *file,
                       const int32_t (*lines)[2], unsigned nlines)
{
    uint64_t k = alloc(im, 64), cp = alloc(im, 72 + 8 * 4), cm = alloc(im, 48 + 64 + 64),
             m = alloc(im, 88);
    uint8_t t[64];
    size_t n = 0;
    int32_t b = 0, l = 0;

    put64(im, k + 24, symbol(im, klass));
    put64(im, cp + 24, k);
    put32(im, cp + 60, 4);
    put64(im, cp + 72 + 8 * 1, symbol(im, name));
    put64(im, cp + 72 + 8 * 2, symbol(im, "()V"));
    put64(im, cp + 72 + 8 * 3, symbol(im, file));
    put16(im, cp + 54, 3);
    put64(im, cm + 8, cp);
    put16(im, cm + 34, 1);
    put16(im, cm + 36, 2);
    put16(im, cm + 28, 1);  /* has a line number table */
    put16(im, cm + 32, 64); /* code size */
    for (unsigned i = 0; i < nlines; i++) {
        int32_t db = lines[i][0] - b, dl = lines[i][1] - l;
        if (db >= 0 && db < 32 && dl >= 0 && dl < 8) {
            t[n++] = (uint8_t)(db << 3 | dl);
        } else {
            t[n++] = 0xff;
            n += s5(t + n, db);
            n += s5(t + n, dl);
        }
        b = lines[i][0];
        l = lines[i][1];
    }
    t[n++] = 0;
    put(im, cm + 48 + 64, t, n);
    put64(im, m + 8, cm);
    return m;
}

static void test_vm_read(void **state)
{
    struct fake f;
    struct hs_vm vm;
    struct hs_mem m;
    char why[200];
    (void)state;

    fake_init(&f, -1, "17.0.15+6-Debian-1deb12u1");
    m = (struct hs_mem){img_read, &f.im};
    memset(&vm, 0, sizeof(vm));
    assert_int_equal(hs_vm__read(&m, &f.syms, 0, &vm, why, sizeof(why)), 1);
    assert_string_equal(vm.release, "17.0.15+6-Debian-1deb12u1");
    assert_int_equal(vm.major, 17);
    assert_int_equal(vm.bpf.n_heaps, 1);
    assert_true(vm.bpf.heap[0].start == f.heap_start && vm.bpf.heap[0].segmap == f.segmap);
    assert_int_equal(vm.bpf.heap[0].log2_seg, 6);
    assert_true(vm.bpf.interp_start == f.interp && vm.bpf.interp_end == f.interp + 4096);
    assert_int_equal(vm.bpf.blob, 16);
    assert_int_equal(vm.bpf.used, 8);
    assert_int_equal(vm.bpf.frame_size, 16 + 28);
    assert_int_equal(vm.bpf.name, 16 + 96);
    assert_int_equal(vm.bpf.method, 16 + 112);
    assert_int_equal(vm.cp_size, 72);

    /* Not initialised yet (no code heaps): 0, then 1 once there are. */
    uint64_t ga;
    memcpy(&ga, f.im.mem + (f.statics[S_HEAPS] - BASE), 8);
    put64(&f.im, f.statics[S_HEAPS], 0);
    memset(&vm, 0, sizeof(vm));
    assert_int_equal(hs_vm__read(&m, &f.syms, 0, &vm, why, sizeof(why)), 0);
    put64(&f.im, f.statics[S_HEAPS], ga);
    assert_int_equal(hs_vm__read(&m, &f.syms, 0, &vm, why, sizeof(why)), 1);
    fake_free(&f);

    /* A field missing: refused, saying which. */
    fake_init(&f, 20, "17.0.15");
    m = (struct hs_mem){img_read, &f.im};
    memset(&vm, 0, sizeof(vm));
    assert_int_equal(hs_vm__read(&m, &f.syms, 0, &vm, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "CodeBlob::_code_begin"));
    fake_free(&f);

    /* A release the walk does not know. */
    fake_init(&f, -1, "25.0.1+8-LTS");
    m = (struct hs_mem){img_read, &f.im};
    memset(&vm, 0, sizeof(vm));
    assert_int_equal(hs_vm__read(&m, &f.syms, 0, &vm, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "25.0.1"));
    fake_free(&f);
}

/* An nmethod of Outer.run (ma) with Inner.hot (mb) inlined at bci 4 in a
 * JDK 17 fake: PcDescs at 0x10 (no scope) and 0x40 (Inner.hot bci 3 <-
 * Outer.run bci 41). Returns its address. */
static uint64_t nmethod17(struct fake *f, uint64_t ma, uint64_t mb)
{
    uint64_t block = f->heap_start + 4096, nm = block + 16;
    put(&f->im, f->segmap + 64, "\0\1\2\3", 4);
    f->im.mem[block + 8 - BASE] = 1;
    put64(&f->im, nm + 112, ma);
    put32(&f->im, nm + 268, 512);              /* PcDescs */
    put32(&f->im, nm + 272, 512 + 2 * 16);     /* their end */
    put32(&f->im, nm + 260, 600);              /* metadata */
    put64(&f->im, nm + 120, nm + 600 + 2 * 8); /* scopes data, after 2 Method* */
    put64(&f->im, nm + 600, ma);
    put64(&f->im, nm + 608, mb);
    put32(&f->im, nm + 512, 0x10);
    put32(&f->im, nm + 528, 0x40);
    put32(&f->im, nm + 532, 1);
    uint8_t sc[32];
    size_t k = 1; /* offset 0 is the null scope */
    size_t outer_at = 20;
    k += u5(sc + k, (uint32_t)outer_at); /* the inner scope's sender */
    k += u5(sc + k, 2);                  /* Inner.hot */
    k += u5(sc + k, 3 + 1);              /* bci 3 */
    k = outer_at;
    k += u5(sc + k, 0);
    k += u5(sc + k, 1);      /* Outer.run */
    k += u5(sc + k, 41 + 1); /* bci 41 */
    put(&f->im, nm + 616, sc, sizeof(sc));
    return nm;
}

/* The two methods the naming tests read: com.example.Outer.run (lines 10,
 * 12 and 300 from bci 0, 5 and 40) and com.example.Inner.hot (7, 8 from
 * bci 0, 3). */
static void outer_inner(struct image *im, uint64_t *ma, uint64_t *mb)
{
    static const int32_t lines_a[][2] = {{0, 10}, {5, 12}, {40, 300}};
    static const int32_t lines_b[][2] = {{0, 7}, {3, 8}};

    *ma = method(im, "com/example/Outer", "run", "Outer.java", lines_a, 3);
    *mb = method(im, "com/example/Inner", "hot", "Inner.java", lines_b, 2);
}

static void test_names(void **state)
{
    struct fake f;
    struct hs_vm vm = {0};
    struct hs_mem m;
    char why_buf[200];
    const char *why;
    (void)state;

    fake_init(&f, -1, "17.0.15");
    m = (struct hs_mem){img_read, &f.im};
    assert_int_equal(hs_vm__read(&m, &f.syms, 0, &vm, why_buf, sizeof(why_buf)), 1);
    uint64_t ma, mb;
    outer_inner(&f.im, &ma, &mb);

    /* Interpreted, bcp at bci 41: line 300 (escaped pair); bci 6: 12. */
    uint64_t cm;
    memcpy(&cm, f.im.mem + (ma + 8 - BASE), 8);
    uint32_t aux = CX_HS_INTERPRETED | (uint32_t)((cm + 48 + 41) & CX_HS_PC_OFF_MAX) << 4;
    struct hs_name *n = hs_name__read(&m, &vm, NULL, ma, aux, 0, &why);
    assert_non_null(n);
    assert_int_equal(n->n, 1);
    assert_string_equal(n->lines[0].function, "com.example.Outer.run");
    assert_string_equal(n->lines[0].file, "Outer.java");
    assert_int_equal(n->lines[0].line, 300);
    rt_obj__put(&n->obj);
    aux = CX_HS_INTERPRETED | (uint32_t)((cm + 48 + 6) & CX_HS_PC_OFF_MAX) << 4;
    n = hs_name__read(&m, &vm, NULL, ma, aux, 0, &why);
    assert_int_equal(n->lines[0].line, 12);
    rt_obj__put(&n->obj);

    uint64_t nm = nmethod17(&f, ma, mb);
    uint16_t tag = (uint16_t)(ma >> 3);
    n = hs_name__read(&m, &vm, NULL, nm, CX_HS_COMPILED | 0x30 << 4, tag, &why);
    assert_non_null(n);
    assert_int_equal(n->n, 2);
    assert_string_equal(n->lines[0].function, "com.example.Inner.hot");
    assert_int_equal(n->lines[0].line, 8);
    assert_string_equal(n->lines[1].function, "com.example.Outer.run");
    assert_int_equal(n->lines[1].line, 300);
    rt_obj__put(&n->obj);
    /* At the PcDesc without scope: the nmethod's own method. */
    n = hs_name__read(&m, &vm, NULL, nm, CX_HS_COMPILED | 0x10 << 4, tag, &why);
    assert_int_equal(n->n, 1);
    assert_string_equal(n->lines[0].function, "com.example.Outer.run");
    rt_obj__put(&n->obj);
    /* Reused for another method since the sample: refused. */
    assert_null(hs_name__read(&m, &vm, NULL, nm, CX_HS_COMPILED | 0x30 << 4, tag ^ 1, &why));
    assert_string_equal(why, "compiled method freed");
    /* A stub, by its blob's name. */
    put64(&f.im, nm + 96, str(&f.im, "StubRoutines (1)"));
    n = hs_name__read(&m, &vm, NULL, nm, CX_HS_STUB, 0, &why);
    assert_string_equal(n->lines[0].function, "[stub] StubRoutines (1)");
    rt_obj__put(&n->obj);
    fake_free(&f);
}

/* JDK 25's tables: a CodeBlob with offsets (_code_offset, a 16-bit
 * _frame_complete_offset), nmethod::_method, the PcDescs and scopes in the
 * immutable data, the metadata after the relocations in the mutable data,
 * ConstMethod's flags a u4 of ConstMethodFlags. */
static void test_jdk25(void **state)
{
    struct fake f;
    struct hs_vm vm = {0};
    struct hs_mem m;
    char why_buf[200];
    const char *why;
    (void)state;

    jdk25 = true;
    fake_init(&f, -1, "25.0.5+1-Debian");
    jdk25 = false;
    m = (struct hs_mem){img_read, &f.im};
    assert_int_equal(hs_vm__read(&m, &f.syms, 0, &vm, why_buf, sizeof(why_buf)), 1);
    assert_true(vm.data_outside);
    assert_int_equal(vm.bpf.flags, CX_HS_CODE_OFFSET | CX_HS_COMPLETE16);
    assert_int_equal(vm.bpf.code_begin, 16 + 36);
    assert_int_equal(vm.bpf.frame_complete, 16 + 54);
    assert_int_equal(vm.bpf.frame_size, 16 + 44);
    assert_int_equal(vm.bpf.method, 16 + 80);
    assert_int_equal(vm.bpf.name, 16 + 8);
    assert_int_equal(vm.cm_flags_size, 4);
    uint64_t ma, mb;
    outer_inner(&f.im, &ma, &mb);

    /* The nmethod of test_names, its data outside. */
    uint64_t nm = f.heap_start + 4096 + 16, imm = alloc(&f.im, 256), mut = alloc(&f.im, 64);
    put64(&f.im, nm + 80, ma);
    put64(&f.im, nm + 96, imm);
    put32(&f.im, nm + 196, 8);          /* PcDescs */
    put32(&f.im, nm + 200, 8 + 2 * 16); /* scopes, after them */
    put64(&f.im, nm + 16, mut);
    put32(&f.im, nm + 28, 16); /* relocations, then the metadata */
    put32(&f.im, nm + 48, 16 + 2 * 8);
    put64(&f.im, mut + 16, ma);
    put64(&f.im, mut + 24, mb);
    put32(&f.im, imm + 8, 0x10);
    put32(&f.im, imm + 24, 0x40);
    put32(&f.im, imm + 28, 1);
    uint8_t sc[32] = {0};
    size_t k = 1, outer_at = 20;
    k += u5(sc + k, (uint32_t)outer_at);
    k += u5(sc + k, 2);     /* Inner.hot */
    k += u5(sc + k, 3 + 1); /* bci 3 */
    k = outer_at;
    k += u5(sc + k, 0);
    k += u5(sc + k, 1);      /* Outer.run */
    k += u5(sc + k, 41 + 1); /* bci 41 */
    put(&f.im, imm + 40, sc, sizeof(sc));
    uint16_t tag = (uint16_t)(ma >> 3);
    struct hs_name *n = hs_name__read(&m, &vm, NULL, nm, CX_HS_COMPILED | 0x30 << 4, tag, &why);
    assert_non_null(n);
    assert_int_equal(n->n, 2);
    assert_string_equal(n->lines[0].function, "com.example.Inner.hot");
    assert_int_equal(n->lines[0].line, 8);
    assert_string_equal(n->lines[1].function, "com.example.Outer.run");
    assert_int_equal(n->lines[1].line, 300);
    rt_obj__put(&n->obj);
    assert_null(hs_name__read(&m, &vm, NULL, nm, CX_HS_COMPILED | 0x30 << 4, tag ^ 1, &why));

    /* With a cache: the nmethod's PcDescs kept while its compile id is the
     * same; another pc reads no PcDesc again. */
    struct hs_name_cache *c = hs_name_cache__new();
    put32(&f.im, nm + 212, 7);
    n = hs_name__read(&m, &vm, c, nm, CX_HS_COMPILED | 0x30 << 4, tag, &why);
    assert_int_equal(n->n, 2);
    rt_obj__put(&n->obj);
    put32(&f.im, imm + 24, 0x20); /* the PcDesc moved: not seen while kept */
    n = hs_name__read(&m, &vm, c, nm, CX_HS_COMPILED | 0x30 << 4, tag, &why);
    assert_int_equal(n->n, 2);
    rt_obj__put(&n->obj);
    put32(&f.im, nm + 212, 8); /* another nmethod there: read again */
    n = hs_name__read(&m, &vm, c, nm, CX_HS_COMPILED | 0x18 << 4, tag, &why);
    assert_int_equal(n->n, 2);
    assert_string_equal(n->lines[0].function, "com.example.Inner.hot");
    rt_obj__put(&n->obj);
    hs_name_cache__free(c);
    fake_free(&f);

    /* JDK 25's tables with a 17 release, or a release after 27: refused. */
    jdk25 = true;
    fake_init(&f, -1, "28-ea");
    jdk25 = false;
    m = (struct hs_mem){img_read, &f.im};
    memset(&vm, 0, sizeof(vm));
    assert_int_equal(hs_vm__read(&m, &f.syms, 0, &vm, why_buf, sizeof(why_buf)), -1);
    assert_non_null(strstr(why_buf, "a release the walk does not know"));
    fake_free(&f);
}

/* The method cache: a method's second frame (another bytecode) reads one
 * word; a Method whose ConstMethod changed (freed, its memory another
 * method's) is read again. */
static void test_method_cache(void **state)
{
    struct fake f;
    struct hs_vm vm = {0};
    struct hs_mem m;
    char why_buf[200];
    const char *why;
    (void)state;

    fake_init(&f, -1, "21.0.9");
    m = (struct hs_mem){img_read, &f.im};
    assert_int_equal(hs_vm__read(&m, &f.syms, 0, &vm, why_buf, sizeof(why_buf)), 1);
    uint64_t ma, mb;
    outer_inner(&f.im, &ma, &mb);
    uint64_t cma, cmb;
    memcpy(&cma, f.im.mem + (ma + 8 - BASE), 8);
    memcpy(&cmb, f.im.mem + (mb + 8 - BASE), 8);
    struct hs_name_cache *c = hs_name_cache__new();
    assert_non_null(c);
    unsigned r0 = img_reads;
    uint32_t aux = CX_HS_INTERPRETED | (uint32_t)((cma + 48 + 41) & CX_HS_PC_OFF_MAX) << 4;
    struct hs_name *n = hs_name__read(&m, &vm, c, ma, aux, 0, &why);
    assert_int_equal(n->lines[0].line, 300);
    rt_obj__put(&n->obj);
    unsigned first = img_reads - r0;
    assert_true(hs_name_cache__bytes(c) > 0);
    r0 = img_reads;
    aux = CX_HS_INTERPRETED | (uint32_t)((cma + 48 + 6) & CX_HS_PC_OFF_MAX) << 4;
    n = hs_name__read(&m, &vm, c, ma, aux, 0, &why);
    assert_string_equal(n->lines[0].function, "com.example.Outer.run");
    assert_int_equal(n->lines[0].line, 12);
    rt_obj__put(&n->obj);
    assert_int_equal(img_reads - r0, 1);
    assert_true(first >= 10);
    /* ma's memory now a Method of Inner.hot's ConstMethod. */
    put64(&f.im, ma + 8, cmb);
    aux = CX_HS_INTERPRETED | (uint32_t)((cmb + 48 + 3) & CX_HS_PC_OFF_MAX) << 4;
    n = hs_name__read(&m, &vm, c, ma, aux, 0, &why);
    assert_string_equal(n->lines[0].function, "com.example.Inner.hot");
    assert_int_equal(n->lines[0].line, 8);
    rt_obj__put(&n->obj);
    hs_name_cache__free(c);
    hs_name_cache__free(NULL);
    fake_free(&f);
}

/* The cache's byte count when its methods start over (past 8,192) while
 * an nmethod is kept: the nmethod's bytes still counted, so that dropping
 * it later (another compile id at its address) leaves the count true, as
 * a fresh cache holding the same entries counts it (it wrapped below 0
 * when the clear zeroed the count, and the agent's 64 MiB cap with it). */
static void test_cache_bytes(void **state)
{
    enum { FILL = 8191 }; /* with ma and mb: the cache's 8,192 methods, and one */
    struct fake f;
    struct hs_vm vm = {0};
    struct hs_mem m;
    char why_buf[200];
    const char *why;
    (void)state;

    fake_init(&f, -1, "17.0.15");
    m = (struct hs_mem){img_read, &f.im};
    assert_int_equal(hs_vm__read(&m, &f.syms, 0, &vm, why_buf, sizeof(why_buf)), 1);
    uint64_t ma, mb;
    outer_inner(&f.im, &ma, &mb);
    uint64_t nm = nmethod17(&f, ma, mb), cm;
    uint16_t tag = (uint16_t)(ma >> 3);
    uint32_t compiled = CX_HS_COMPILED | 0x30 << 4;
    memcpy(&cm, f.im.mem + (ma + 8 - BASE), 8);
    uint32_t interp = CX_HS_INTERPRETED | (uint32_t)((cm + 48 + 6) & CX_HS_PC_OFF_MAX) << 4;
    /* FILL distinct Method*s of Outer.run's ConstMethod: a Method is read
     * by its word at +8 alone, so they overlap, 8 bytes apart. */
    uint64_t fill = alloc(&f.im, 8 * (FILL + 1));
    for (unsigned i = 1; i <= FILL; i++)
        put64(&f.im, fill + 8 * i, cm);

    struct hs_name_cache *c = hs_name_cache__new();
    assert_non_null(c);
    put32(&f.im, nm + 304, 7);
    struct hs_name *n = hs_name__read(&m, &vm, c, nm, compiled, tag, &why);
    assert_non_null(n);
    assert_int_equal(n->n, 2);
    rt_obj__put(&n->obj);
    /* The nmethod and 2 methods kept; FILL more methods: the last one
     * starts the methods over (alone kept), the nmethod stays. */
    for (unsigned i = 0; i < FILL; i++) {
        n = hs_name__read(&m, &vm, c, fill + 8 * i, interp, 0, &why);
        assert_non_null(n);
        rt_obj__put(&n->obj);
    }
    /* Another nmethod at nm's address: the kept one dropped, read again. */
    put32(&f.im, nm + 304, 8);
    n = hs_name__read(&m, &vm, c, nm, compiled, tag, &why);
    assert_non_null(n);
    assert_int_equal(n->n, 2);
    rt_obj__put(&n->obj);

    /* What c holds now (the last fill method, the new nmethod, ma and mb)
     * read into a fresh cache. */
    struct hs_name_cache *c2 = hs_name_cache__new();
    assert_non_null(c2);
    n = hs_name__read(&m, &vm, c2, fill + 8 * (FILL - 1), interp, 0, &why);
    rt_obj__put(&n->obj);
    n = hs_name__read(&m, &vm, c2, nm, compiled, tag, &why);
    rt_obj__put(&n->obj);
    assert_true(hs_name_cache__bytes(c2) > 0);
    assert_int_equal(hs_name_cache__bytes(c), hs_name_cache__bytes(c2));
    hs_name_cache__free(c2);
    hs_name_cache__free(c);
    fake_free(&f);
}

/* Random memory: every read bounded, nothing read out of bounds (the
 * image's reader refuses), no crash. */
static void test_random_memory(void **state)
{
    struct fake f;
    struct hs_vm vm;
    struct hs_mem m;
    char why_buf[200];
    const char *why;
    (void)state;

    fake_init(&f, -1, "17.0.15");
    m = (struct hs_mem){img_read, &f.im};
    memset(&vm, 0, sizeof(vm));
    assert_int_equal(hs_vm__read(&m, &f.syms, 0, &vm, why_buf, sizeof(why_buf)), 1);
    srand(7);
    for (unsigned i = 0; i < SIZE; i++)
        f.im.mem[i] = (uint8_t)(rand() % 4 ? rand() : 0);
    for (int i = 0; i < 20000; i++) {
        uint64_t addr = BASE + (uint64_t)(rand() % SIZE);
        uint32_t aux = (uint32_t)rand();
        struct hs_name *n = hs_name__read(&m, &vm, NULL, addr, aux, (uint16_t)rand(), &why);
        if (n) {
            assert_true(n->n >= 1 && n->n <= HS_NAME_MAX_DEPTH);
            rt_obj__put(&n->obj);
        }
    }
    struct hs_vm vm2;
    memset(&vm2, 0, sizeof(vm2));
    hs_vm__read(&m, &f.syms, 0, &vm2, why_buf, sizeof(why_buf));
    fake_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vm_read),     cmocka_unit_test(test_names),
        cmocka_unit_test(test_jdk25),       cmocka_unit_test(test_method_cache),
        cmocka_unit_test(test_cache_bytes), cmocka_unit_test(test_random_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
