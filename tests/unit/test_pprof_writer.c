#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "../../common/gz.h"
#include "../../common/pprof/pprof_writer.h"
#include "profile.pb-c.h"

/* Decodes with protobuf-c's own unpacker: the writer must produce what the
 * schema describes, not merely what our code expects. */
static Perftools__Profiles__Profile *decode(struct buf *b, bool gz)
{
    struct buf raw;
    buf__init(&raw, 64 << 20);
    if (gz)
        assert_int_equal(gz__decompress(b->data, b->len, &raw, 0), 0);
    else
        assert_int_equal(buf__append(&raw, b->data, b->len), 0);
    Perftools__Profiles__Profile *p =
        perftools__profiles__profile__unpack(NULL, raw.len, (uint8_t *)raw.data);
    buf__free(&raw);
    assert_non_null(p);
    return p;
}

static const char *str(const Perftools__Profiles__Profile *p, int64_t i)
{
    assert_true(i >= 0 && (size_t)i < p->n_string_table);
    return p->string_table[i];
}

static void test_write_and_read_back(void **state)
{
    (void)state;
    struct pprof_writer *w = pprof_writer__new();
    struct buf out;

    assert_non_null(w);
    assert_int_equal(pprof_writer__add_sample_type(w, "samples", "count"), 0);
    assert_int_equal(pprof_writer__add_sample_type(w, "cpu", "nanoseconds"), 0);
    pprof_writer__set_period(w, "cpu", "nanoseconds", 10000000);
    pprof_writer__set_time(w, 1700000000000000000ll, 60000000000ll);
    assert_int_equal(pprof_writer__add_comment(w, "hello"), 0);

    struct pprof_mapping_info mi = {0x1000, 0x2000, 0, "/bin/app", "abcd", true, true, true, true};
    uint64_t m = pprof_writer__mapping(w, &mi);
    assert_int_equal(pprof_writer__mapping(w, &mi), m); /* interned */
    struct pprof_line inl[2] = {{"leaf", NULL, "a.c", 10}, {"caller", "_Z6callerv", "a.c", 20}};
    uint64_t l1 = pprof_writer__location(w, m, 0x1100, inl, 2);
    uint64_t l2 = pprof_writer__location(w, m, 0x1200, &inl[1], 1);
    assert_int_equal(pprof_writer__location(w, m, 0x1100, inl, 2), l1);
    assert_int_not_equal(l1, l2);
    uint64_t stack[2] = {l1, l2};
    int64_t vals[2] = {3, 30000000};
    struct pprof_label labels[] = {{"pid", "42", 0, NULL}, {"bytes", NULL, 7, "bytes"}};
    assert_int_equal(pprof_writer__add_sample(w, stack, 2, vals, labels, 2), 0);
    assert_int_equal(pprof_writer__sample_count(w), 1);

    buf__init(&out, 1 << 20);
    assert_int_equal(pprof_writer__encode(w, &out, true), 0);
    assert_true(gz__is_gzip(out.data, out.len));
    Perftools__Profiles__Profile *p = decode(&out, true);

    assert_string_equal(str(p, 0), "");
    assert_int_equal(p->n_sample_type, 2);
    assert_string_equal(str(p, p->sample_type[1]->type), "cpu");
    assert_string_equal(str(p, p->sample_type[1]->unit), "nanoseconds");
    assert_int_equal(p->period, 10000000);
    assert_string_equal(str(p, p->period_type->type), "cpu");
    assert_int_equal(p->time_nanos, 1700000000000000000ll);
    assert_int_equal(p->duration_nanos, 60000000000ll);
    assert_int_equal(p->n_comment, 1);
    assert_string_equal(str(p, p->comment[0]), "hello");

    assert_int_equal(p->n_mapping, 1);
    assert_int_equal(p->mapping[0]->id, m);
    assert_int_equal(p->mapping[0]->memory_start, 0x1000);
    assert_string_equal(str(p, p->mapping[0]->filename), "/bin/app");
    assert_string_equal(str(p, p->mapping[0]->build_id), "abcd");

    assert_int_equal(p->n_location, 2);
    Perftools__Profiles__Location *loc = p->location[0];
    assert_int_equal(loc->id, l1);
    assert_int_equal(loc->mapping_id, m);
    assert_int_equal(loc->address, 0x1100);
    assert_int_equal(loc->n_line, 2);
    /* Every id a line names exists. */
    for (size_t i = 0; i < loc->n_line; i++)
        assert_true(loc->line[i]->function_id >= 1 && loc->line[i]->function_id <= p->n_function);
    Perftools__Profiles__Function *f0 = p->function[loc->line[0]->function_id - 1];
    Perftools__Profiles__Function *f1 = p->function[loc->line[1]->function_id - 1];
    assert_string_equal(str(p, f0->name), "leaf");
    assert_string_equal(str(p, f0->system_name), "leaf");
    assert_string_equal(str(p, f1->name), "caller");
    assert_string_equal(str(p, f1->system_name), "_Z6callerv");
    assert_string_equal(str(p, f1->filename), "a.c");
    assert_int_equal(loc->line[1]->line, 20);
    assert_int_equal(p->n_function, 2); /* "caller" interned once */

    assert_int_equal(p->n_sample, 1);
    Perftools__Profiles__Sample *s = p->sample[0];
    assert_int_equal(s->n_location_id, 2);
    assert_int_equal(s->location_id[0], l1);
    assert_int_equal(s->value[0], 3);
    assert_int_equal(s->value[1], 30000000);
    assert_int_equal(s->n_label, 2);
    assert_string_equal(str(p, s->label[0]->key), "pid");
    assert_string_equal(str(p, s->label[0]->str), "42");
    assert_int_equal(s->label[1]->num, 7);
    assert_string_equal(str(p, s->label[1]->num_unit), "bytes");
    perftools__profiles__profile__free_unpacked(p, NULL);

    /* Plain, and twice from the same writer: the same bytes. */
    struct buf a, b;
    buf__init(&a, 1 << 20);
    buf__init(&b, 1 << 20);
    assert_int_equal(pprof_writer__encode(w, &a, false), 0);
    assert_int_equal(pprof_writer__encode(w, &b, false), 0);
    assert_int_equal(a.len, b.len);
    assert_memory_equal(a.data, b.data, a.len);
    p = decode(&a, false);
    assert_int_equal(p->n_sample, 1);
    perftools__profiles__profile__free_unpacked(p, NULL);
    buf__free(&a);
    buf__free(&b);
    buf__free(&out);
    pprof_writer__free(w);
    pprof_writer__free(NULL);
}

static void test_empty_profile(void **state)
{
    (void)state;
    struct pprof_writer *w = pprof_writer__new();
    struct buf out;

    buf__init(&out, 1 << 20);
    assert_int_equal(pprof_writer__encode(w, &out, true), 0);
    Perftools__Profiles__Profile *p = decode(&out, true);
    assert_int_equal(p->n_sample, 0);
    assert_int_equal(p->n_string_table, 1);
    perftools__profiles__profile__free_unpacked(p, NULL);
    buf__free(&out);
    pprof_writer__free(w);
}

static void test_output_cap(void **state)
{
    (void)state;
    struct pprof_writer *w = pprof_writer__new();
    struct buf out;
    char name[64];

    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof(name), "function_number_%d", i);
        struct pprof_line l = {name, NULL, NULL, 0};
        uint64_t loc = pprof_writer__location(w, 0, i, &l, 1);
        assert_int_equal(pprof_writer__add_sample(w, &loc, 1, NULL, NULL, 0), 0);
    }
    buf__init(&out, 100);
    assert_int_not_equal(pprof_writer__encode(w, &out, false), 0);
    buf__free(&out);
    pprof_writer__free(w);
}

/* One profile, its content drawn from seed: big ones (past what a reset
 * keeps) and small ones. */
static void fill_profile(struct pprof_writer *w, int seed, int n)
{
    char name[64], file[64];

    assert_int_equal(pprof_writer__add_sample_type(w, "samples", "count"), 0);
    if (seed % 2)
        assert_int_equal(pprof_writer__add_sample_type(w, "off_cpu", "nanoseconds"), 0);
    pprof_writer__set_period(w, "cpu", "nanoseconds", 10000000 + seed);
    pprof_writer__set_time(w, 1700000000000000000ll + seed, 60000000000ll);
    if (seed % 3 == 0)
        assert_int_equal(pprof_writer__add_comment(w, "a comment"), 0);
    struct pprof_mapping_info mi = {0x1000, 0x2000, 0, "/bin/app", "abcd", true, true, true, true};
    uint64_t m = pprof_writer__mapping(w, &mi);
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof(name), "fn_%d_%d", seed, i);
        snprintf(file, sizeof(file), "f%d.c", i % 7);
        struct pprof_line l[2] = {{name, NULL, file, i}, {"caller", "_Z6callerv", "a.c", 20}};
        uint64_t locs[2] = {pprof_writer__location(w, m, 0x1000 + i, l, 2),
                            pprof_writer__location(w, m, 0x1800, &l[1], 1)};
        int64_t vals[2] = {i + 1, seed};
        struct pprof_label lab[2] = {{"pid", "42", 0, NULL}, {"n", NULL, i, "count"}};
        assert_int_equal(pprof_writer__add_sample(w, locs, 2, vals, lab, 1 + i % 2), 0);
    }
}

/* A writer reset and used again writes what a new one would, byte for
 * byte, whatever it held before (more, less, bigger than it keeps). */
static void test_reset_writes_as_new(void **state)
{
    (void)state;
    struct pprof_writer *reused = pprof_writer__new();
    const int sizes[] = {3, 50, 1, 9000, 0, 20, 5000, 2};
    struct buf a, b;

    buf__init(&a, 64 << 20);
    buf__init(&b, 64 << 20);
    for (int k = 0; k < (int)(sizeof(sizes) / sizeof(sizes[0])); k++) {
        struct pprof_writer *fresh = pprof_writer__new();
        if (k)
            pprof_writer__reset(reused);
        fill_profile(fresh, k, sizes[k]);
        fill_profile(reused, k, sizes[k]);
        buf__reset(&a);
        buf__reset(&b);
        assert_int_equal(pprof_writer__encode(fresh, &a, k % 2), 0);
        assert_int_equal(pprof_writer__encode(reused, &b, k % 2), 0);
        assert_int_equal(a.len, b.len);
        assert_memory_equal(a.data, b.data, a.len);
        /* Encoded twice, the same again (the encoder's arrays reused). */
        buf__reset(&b);
        assert_int_equal(pprof_writer__encode(reused, &b, k % 2), 0);
        assert_int_equal(a.len, b.len);
        assert_memory_equal(a.data, b.data, a.len);
        assert_int_equal(pprof_writer__sample_count(reused), sizes[k]);
        pprof_writer__free(fresh);
    }
    buf__free(&a);
    buf__free(&b);
    pprof_writer__free(reused);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_write_and_read_back),
        cmocka_unit_test(test_empty_profile),
        cmocka_unit_test(test_output_cap),
        cmocka_unit_test(test_reset_writes_as_new),
    };
    return cmocka_run_group_tests_name("pprof_writer", tests, NULL, NULL);
}
