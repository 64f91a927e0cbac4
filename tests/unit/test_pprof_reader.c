#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/pprof/pprof_reader.h"
#include "../../common/pprof/pprof_writer.h"
#include "profile.pb-c.h"

typedef Perftools__Profiles__Profile Profile;

#define MEM (64u << 20)

/* A profile with every table filled: two sample types, a mapping, an
 * inlined location, string and numeric labels, 200 samples. */
static void make_profile(struct buf *out)
{
    struct pprof_writer *w = pprof_writer__new();
    assert_non_null(w);
    assert_int_equal(pprof_writer__add_sample_type(w, "samples", "count"), 0);
    assert_int_equal(pprof_writer__add_sample_type(w, "cpu", "nanoseconds"), 0);
    pprof_writer__set_period(w, "cpu", "nanoseconds", 10000000);
    pprof_writer__set_time(w, 1700000000000000000ll, 60000000000ll);
    struct pprof_mapping_info mi = {0x400000, 0x500000, 0x1000, "/bin/app", "abcd",
                                    true,     true,     true,   true};
    uint64_t m = pprof_writer__mapping(w, &mi);
    struct pprof_line inl[2] = {{"leaf", NULL, "a.c", 10}, {"caller", "_Z6callerv", "a.c", 20}};
    uint64_t locs[300];
    locs[0] = pprof_writer__location(w, m, 0x401100, inl, 2);
    for (int i = 1; i < 300; i++) { /* ids past 127: two-byte varints */
        char name[32];
        snprintf(name, sizeof(name), "fn%d", i);
        struct pprof_line l = {name, NULL, "b.c", i};
        locs[i] = pprof_writer__location(w, m, 0x402000 + i, &l, 1);
    }
    uint64_t unnamed = pprof_writer__location(w, m, 0x403000, NULL, 0);
    for (int s = 0; s < 200; s++) {
        uint64_t stack[40];
        size_t n = 0;
        stack[n++] = s % 3 ? locs[0] : unnamed;
        for (int d = 0; d < 30; d++)
            stack[n++] = locs[1 + (s * 7 + d * 13) % 299];
        int64_t v[2] = {s + 1, (s + 1) * 10000000ll};
        char pid[16];
        snprintf(pid, sizeof(pid), "%d", 100 + s % 4);
        struct pprof_label labels[] = {{"pid", pid, 0, NULL}, {"bytes", NULL, s, "bytes"}};
        assert_int_equal(pprof_writer__add_sample(w, stack, n, v, labels, 2), 0);
    }
    buf__init(out, 64 << 20);
    assert_int_equal(pprof_writer__encode(w, out, false), 0);
    pprof_writer__free(w);
}

/* Every field the reader gives, against protobuf-c's unpacking of the same
 * bytes: an independent reader of the schema. */
static void check_same(const struct pprof_reader *r, const Profile *p)
{
    assert_int_equal(r->nstrings, p->n_string_table);
    for (size_t i = 0; i < r->nstrings; i++) {
        assert_string_equal(r->strings[i], p->string_table[i]);
        assert_int_equal(r->string_len[i], strlen(p->string_table[i]));
    }
    assert_int_equal(r->nsample_types, p->n_sample_type);
    for (size_t i = 0; i < r->nsample_types; i++) {
        assert_int_equal(r->sample_types[i].type, p->sample_type[i]->type);
        assert_int_equal(r->sample_types[i].unit, p->sample_type[i]->unit);
    }
    assert_true(r->has_period_type);
    assert_int_equal(r->period_type.type, p->period_type->type);
    assert_int_equal(r->period_type.unit, p->period_type->unit);
    assert_int_equal(r->period, p->period);
    assert_int_equal(r->time_nanos, p->time_nanos);
    assert_int_equal(r->duration_nanos, p->duration_nanos);
    assert_int_equal(r->nmappings, p->n_mapping);
    for (size_t i = 0; i < r->nmappings; i++) {
        assert_int_equal(r->mappings[i].id, p->mapping[i]->id);
        assert_int_equal(r->mappings[i].memory_start, p->mapping[i]->memory_start);
        assert_int_equal(r->mappings[i].memory_limit, p->mapping[i]->memory_limit);
        assert_int_equal(r->mappings[i].file_offset, p->mapping[i]->file_offset);
        assert_int_equal(r->mappings[i].filename, p->mapping[i]->filename);
        assert_int_equal(r->mappings[i].build_id, p->mapping[i]->build_id);
    }
    assert_int_equal(r->nfunctions, p->n_function);
    for (size_t i = 0; i < r->nfunctions; i++) {
        assert_int_equal(r->functions[i].id, p->function[i]->id);
        assert_int_equal(r->functions[i].name, p->function[i]->name);
        assert_int_equal(r->functions[i].system_name, p->function[i]->system_name);
        assert_int_equal(r->functions[i].filename, p->function[i]->filename);
    }
    assert_int_equal(r->nlocations, p->n_location);
    for (size_t i = 0; i < r->nlocations; i++) {
        const struct pprof_rlocation *l = &r->locations[i];
        assert_int_equal(l->id, p->location[i]->id);
        assert_int_equal(l->mapping_id, p->location[i]->mapping_id);
        assert_int_equal(l->address, p->location[i]->address);
        assert_int_equal(l->nlines, p->location[i]->n_line);
        for (size_t j = 0; j < l->nlines; j++) {
            assert_int_equal(r->lines[l->line_off + j].function_id,
                             p->location[i]->line[j]->function_id);
            assert_int_equal(r->lines[l->line_off + j].line, p->location[i]->line[j]->line);
        }
    }
    assert_int_equal(r->nsamples, p->n_sample);
    uint64_t ids[64];
    int64_t values[8];
    struct pprof_rlabel labels[8];
    char err[256];
    for (size_t i = 0; i < r->nsamples; i++) {
        const Perftools__Profiles__Sample *ps = p->sample[i];
        struct pprof_rsample s = {ids, 0, 64, values, 0, 8, labels, 0, 8};
        assert_int_equal(pprof_reader__sample(r, i, &s, err, sizeof(err)), 0);
        assert_int_equal(s.nlocation_ids, ps->n_location_id);
        assert_memory_equal(ids, ps->location_id, s.nlocation_ids * sizeof(uint64_t));
        assert_int_equal(s.nvalues, ps->n_value);
        assert_memory_equal(values, ps->value, s.nvalues * sizeof(int64_t));
        assert_int_equal(s.nlabels, ps->n_label);
        for (size_t j = 0; j < s.nlabels; j++) {
            assert_int_equal(labels[j].key, ps->label[j]->key);
            assert_int_equal(labels[j].str, ps->label[j]->str);
            assert_int_equal(labels[j].num, ps->label[j]->num);
            assert_int_equal(labels[j].num_unit, ps->label[j]->num_unit);
        }
        /* The packed form: the same ids, decoded by the caller. */
        const uint8_t *q, *end;
        assert_int_equal(pprof_reader__sample_packed(r, i, &s, &q, &end, err, sizeof(err)), 0);
        size_t n = 0;
        uint64_t id;
        while (q < end) {
            assert_true(varint__read(&q, end, &id));
            assert_int_equal(id, ps->location_id[n++]);
        }
        assert_int_equal(n, ps->n_location_id);
    }
}

static void test_reads_what_protobuf_c_reads(void **state)
{
    (void)state;
    struct buf b;
    struct pprof_reader r;
    char err[256];

    make_profile(&b);
    Profile *p = perftools__profiles__profile__unpack(NULL, b.len, (uint8_t *)b.data);
    assert_non_null(p);
    assert_int_equal(pprof_reader__read(&r, b.data, b.len, MEM, err, sizeof(err)), 0);
    check_same(&r, p);
    /* A capacity too small says so, and how many there were. */
    uint64_t ids[4];
    int64_t values[8];
    struct pprof_rlabel labels[8];
    struct pprof_rsample s = {ids, 0, 4, values, 0, 8, labels, 0, 8};
    assert_int_equal(pprof_reader__sample(&r, 0, &s, err, sizeof(err)), -E2BIG);
    assert_int_equal(s.nlocation_ids, 31);
    assert_int_equal(ids[0], p->sample[0]->location_id[0]);
    pprof_reader__free(&r);
    pprof_reader__free(&r); /* zeroed: a second free does nothing */
    pprof_reader__free(NULL);
    perftools__profiles__profile__free_unpacked(p, NULL);
    buf__free(&b);
}

/* --- hand-made protobuf --- */

static void put_varint(struct buf *b, uint64_t v)
{
    unsigned char t[10];
    size_t n = 0;
    do {
        t[n] = v & 0x7f;
        v >>= 7;
        if (v)
            t[n] |= 0x80;
        n++;
    } while (v);
    assert_int_equal(buf__append(b, t, n), 0);
}

static void put_tag(struct buf *b, unsigned field, unsigned wt)
{
    put_varint(b, field << 3 | wt);
}

static void put_bytes(struct buf *b, unsigned field, const void *p, size_t n)
{
    put_tag(b, field, 2);
    put_varint(b, n);
    assert_int_equal(buf__append(b, p, n), 0);
}

static void put_msg(struct buf *b, unsigned field, struct buf *m)
{
    put_bytes(b, field, m->data ? m->data : "", m->len);
    buf__reset(m);
}

static void test_protobuf_rules(void **state)
{
    (void)state;
    struct buf b, m, l;
    struct pprof_reader r;
    char err[256];

    buf__init(&b, 1 << 20);
    buf__init(&m, 1 << 20);
    buf__init(&l, 1 << 20);
    /* A sample before the string table it uses, its ids unpacked (one
     * field each), an unknown field of each wire type. */
    put_tag(&m, 1, 0), put_varint(&m, 7);
    put_tag(&m, 9, 1), assert_int_equal(buf__append(&m, "12345678", 8), 0); /* unknown fixed64 */
    put_tag(&m, 1, 0), put_varint(&m, 300);
    put_tag(&m, 2, 0), put_varint(&m, 5);
    put_tag(&l, 1, 0), put_varint(&l, 3), put_tag(&l, 2, 0), put_varint(&l, 4);
    put_msg(&m, 3, &l);
    put_msg(&b, 2, &m);
    put_tag(&b, 99, 5), assert_int_equal(buf__append(&b, "1234", 4), 0); /* unknown fixed32 */
    put_bytes(&b, 100, "ignored", 7);                                    /* unknown bytes */
    /* period_type twice: a singular message merges (type from the first,
     * unit from the second); time twice: the last wins. */
    put_tag(&m, 1, 0), put_varint(&m, 1);
    put_msg(&b, 11, &m);
    put_tag(&m, 2, 0), put_varint(&m, 2);
    put_msg(&b, 11, &m);
    put_tag(&b, 9, 0), put_varint(&b, 1);
    put_tag(&b, 9, 0), put_varint(&b, 2);
    const char *strs[] = {"", "cpu", "nanoseconds", "pid", "42"};
    for (size_t i = 0; i < 5; i++)
        put_bytes(&b, 6, strs[i], strlen(strs[i]));
    put_tag(&m, 1, 0), put_varint(&m, 1), put_tag(&m, 2, 0), put_varint(&m, 2);
    put_msg(&b, 1, &m);
    assert_int_equal(pprof_reader__read(&r, b.data, b.len, MEM, err, sizeof(err)), 0);
    assert_int_equal(r.nsamples, 1);
    assert_int_equal(r.period_type.type, 1);
    assert_int_equal(r.period_type.unit, 2);
    assert_int_equal(r.time_nanos, 2);
    assert_string_equal(r.strings[4], "42");
    uint64_t ids[8];
    int64_t values[8];
    struct pprof_rlabel labels[8];
    struct pprof_rsample s = {ids, 0, 8, values, 0, 8, labels, 0, 8};
    assert_int_equal(pprof_reader__sample(&r, 0, &s, err, sizeof(err)), 0);
    assert_int_equal(s.nlocation_ids, 2);
    assert_int_equal(ids[0], 7);
    assert_int_equal(ids[1], 300);
    assert_int_equal(s.nvalues, 1);
    assert_int_equal(values[0], 5);
    assert_int_equal(s.nlabels, 1);
    assert_int_equal(labels[0].key, 3);
    assert_int_equal(labels[0].str, 4);
    /* unpacked ids are not one packed run: the caller is sent back */
    const uint8_t *q, *end;
    assert_int_equal(pprof_reader__sample_packed(&r, 0, &s, &q, &end, err, sizeof(err)), -EAGAIN);
    pprof_reader__free(&r);

    /* A label's string index out of range is caught where it is read. */
    buf__reset(&b);
    put_bytes(&b, 6, "", 0);
    put_tag(&l, 1, 0), put_varint(&l, 0), put_tag(&l, 2, 0), put_varint(&l, 5);
    put_msg(&m, 3, &l);
    put_msg(&b, 2, &m);
    assert_int_equal(pprof_reader__read(&r, b.data, b.len, MEM, err, sizeof(err)), 0);
    assert_int_equal(pprof_reader__sample(&r, 0, &s, err, sizeof(err)), -EBADMSG);
    assert_non_null(strstr(err, "label string index out of range"));
    pprof_reader__free(&r);

    /* A function's, when the profile is read. */
    buf__reset(&b);
    put_bytes(&b, 6, "", 0);
    put_tag(&m, 1, 0), put_varint(&m, 1), put_tag(&m, 2, 0), put_varint(&m, 1);
    put_msg(&b, 5, &m);
    assert_int_equal(pprof_reader__read(&r, b.data, b.len, MEM, err, sizeof(err)), -EBADMSG);
    assert_non_null(strstr(err, "function 1: string index out of range"));
    pprof_reader__free(&r);

    /* The string table must start with "". */
    buf__reset(&b);
    put_bytes(&b, 6, "x", 1);
    assert_int_equal(pprof_reader__read(&r, b.data, b.len, MEM, err, sizeof(err)), -EBADMSG);
    assert_non_null(strstr(err, "string_table must start"));
    pprof_reader__free(&r);

    /* A group (wire type 3) is not in profile.proto. */
    buf__reset(&b);
    put_tag(&b, 7, 3);
    assert_int_equal(pprof_reader__read(&r, b.data, b.len, MEM, err, sizeof(err)), -EBADMSG);
    pprof_reader__free(&r);

    /* A body of empty messages grows the tables past the cap: -E2BIG, not
     * the memory. */
    buf__reset(&b);
    for (int i = 0; i < 100000; i++)
        put_bytes(&b, 5, "", 0);
    assert_int_equal(pprof_reader__read(&r, b.data, b.len, 1 << 20, err, sizeof(err)), -E2BIG);
    pprof_reader__free(&r);
    buf__free(&b);
    buf__free(&m);
    buf__free(&l);
}

/* Cuts at 2,000 places and 3,000 random corruptions of a real profile: no
 * crash, nothing read out of bounds (run it under valgrind to see), and
 * whatever protobuf-c cannot unpack we refuse too. */
static void test_truncated_and_garbled(void **state)
{
    (void)state;
    struct buf b;
    struct pprof_reader r;
    char err[256];
    uint64_t ids[64];
    int64_t values[8];
    struct pprof_rlabel labels[8];

    make_profile(&b);
    unsigned char *copy = malloc(b.len);
    assert_non_null(copy);
    unsigned long seed = 12345;
    size_t refused = 0, tried = 0;
    for (size_t k = 0; k < b.len + 3000; k += k < b.len ? 1 + b.len / 2000 : 1) {
        size_t len = b.len;
        memcpy(copy, b.data, b.len);
        if (k < b.len) {
            len = k;
        } else {
            for (int f = 0; f < 4; f++) {
                seed = seed * 6364136223846793005ul + 1442695040888963407ul;
                copy[(seed >> 33) % b.len] ^= 1u << ((seed >> 20) & 7);
            }
        }
        tried++;
        Profile *p = perftools__profiles__profile__unpack(NULL, len, copy);
        /* Samples are read one at a time, after the tables: a bad one is
         * found then, and the profile refused as well. */
        int e = pprof_reader__read(&r, copy, len, MEM, err, sizeof(err));
        for (size_t i = 0; e == 0 && i < r.nsamples; i++) {
            struct pprof_rsample s = {ids, 0, 64, values, 0, 8, labels, 0, 8};
            e = pprof_reader__sample(&r, i, &s, err, sizeof(err));
        }
        if (!p)
            assert_int_not_equal(e, 0);
        if (e)
            refused++;
        pprof_reader__free(&r);
        if (p)
            perftools__profiles__profile__free_unpacked(p, NULL);
    }
    assert_true(refused > 0 && refused < tried);
    free(copy);
    buf__free(&b);
}

/* A million samples, each a value and a location id, with the string
 * table after them: read within 64 KiB of memory (nothing kept per sample),
 * and every sample found in order, again, and back from the start. */
static void test_samples_take_no_memory(void **state)
{
    enum { N = 1000000 };
    struct buf b;
    struct pprof_reader r;
    char err[256];
    uint64_t ids[4];
    int64_t values[4];
    struct pprof_rlabel labels[4];
    struct pprof_rsample s = {ids, 0, 4, values, 0, 4, labels, 0, 4};

    (void)state;
    buf__init(&b, 64u << 20);
    /* sample_type {1, 2}; then per sample: field 2, {location_id i % 100 + 1, value i} */
    assert_int_equal(buf__append(&b, "\x0a\x04\x08\x01\x10\x02", 6), 0);
    for (uint32_t i = 0; i < N; i++) {
        uint8_t m[16];
        size_t n = 0, v = i;
        m[n++] = 0x08;
        m[n++] = (uint8_t)(i % 100 + 1);
        m[n++] = 0x10;
        do {
            m[n++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
            v >>= 7;
        } while (v);
        uint8_t hdr[2] = {0x12, (uint8_t)n};
        assert_int_equal(buf__append(&b, hdr, 2), 0);
        assert_int_equal(buf__append(&b, m, n), 0);
    }
    assert_int_equal(buf__append(&b,
                                 "\x32\x00\x32\x01s\x32\x01"
                                 "c",
                                 8),
                     0);
    assert_int_equal(pprof_reader__read(&r, b.data, b.len, 64 << 10, err, sizeof(err)), 0);
    assert_int_equal(r.nsamples, N);
    assert_true(pprof_reader__mem_used(&r) <= 64 << 10);
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < N; i += 1 + pass * 99999) {
            assert_int_equal(pprof_reader__sample(&r, i, &s, err, sizeof(err)), 0);
            assert_int_equal(s.nvalues, 1);
            assert_int_equal(values[0], (int64_t)i);
            assert_int_equal(ids[0], i % 100 + 1);
            /* the same one again (a caller's retry) */
            assert_int_equal(pprof_reader__sample(&r, i, &s, err, sizeof(err)), 0);
            assert_int_equal(values[0], (int64_t)i);
        }
    }
    assert_int_equal(pprof_reader__sample(&r, 7, &s, err, sizeof(err)), 0);
    assert_int_equal(values[0], 7);
    pprof_reader__free(&r);
    buf__free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_what_protobuf_c_reads),
        cmocka_unit_test(test_protobuf_rules),
        cmocka_unit_test(test_truncated_and_garbled),
        cmocka_unit_test(test_samples_take_no_memory),
    };
    return cmocka_run_group_tests_name("pprof_reader", tests, NULL, NULL);
}
