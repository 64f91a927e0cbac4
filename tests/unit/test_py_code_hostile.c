/* py_code on hostile memory (the other half of test_py_code.c): strings
 * that end where memory ends, caps on strings and line tables, malformed
 * strings and sizes, every pointer unreadable in turn, layouts it cannot
 * use. The fake process memory is py_code_helpers.h's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../agent/runtimes/python/py_code.h"
#include "../../agent/runtimes/python/py_detect.h"
#include "py_helpers.h"
#include "py_code_helpers.h"

/* Strings whose memory ends where they end (the last object before an
 * unmapped page): their first read fails, the header is read alone. A
 * short ASCII string is smaller than the compact header (PyASCIIObject
 * and its characters, not PyCompactUnicodeObject): reading the compact
 * header's size of it fails where the string does not. */
static void test_str_at_end_of_memory(void **state)
{
    static const char *const strs[] = {"",  "a",    "run",  "run_loop",  "a_longer_ascii_name_x",
                                       "é", "café", "名前", "\U0001F600"};
    unsigned bad = 0, checked = 0;
    (void)state;

    for (unsigned li = 0; li < NLAYOUTS; li++) {
        const struct py_layout *l = layouts(li);
        assert_true(l->unicode_compact_size - l->unicode_ascii_size <= NEAR_END);
        for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
            struct image im;
            char out[64];
            image_init(&im);
            uint64_t a = make_str(&im, l, strs[i], 0);
            int got = read_str(&im, l, a, out, sizeof(out));
            if (got != (int)strlen(strs[i]) || strcmp(out, strs[i]) != 0) {
                printf("%x: \"%s\" (%zu bytes of memory) at the end of its memory: %d\n",
                       l->version, strs[i], region_of(&im, a)->len, got);
                bad++;
            } else {
                /* As a code object's name and file too. */
                struct code_spec cs = {FAKE_CODE_TYPE, 9, a, a, a, 0, 0};
                struct py_code *c =
                    read_ok(&im, l, FAKE_CODE_TYPE, make_code(&im, l, &cs), 0, false);
                assert_string_equal(c->name, strs[i]);
                assert_string_equal(c->filename, strs[i]);
                rt_obj__put(&c->obj);
            }
            checked++;
            image_free(&im);
        }
    }
    printf("%u strings at the end of their memory, %u unreadable\n", checked, bad);
    assert_int_equal(bad, 0);
}

/* Names and files longer than their caps: cut at a character, "..." added. */
static void test_caps(void **state)
{
    (void)state;
    for (unsigned li = 0; li < NLAYOUTS; li++) {
        const struct py_layout *l = layouts(li);
        struct image im;
        image_init(&im);
        size_t big = 3 * PY_CODE_MAX_FILE;
        char *s = malloc(4 * big + 1), *want = malloc(4 * big + 1);
        char out[PY_CODE_MAX_NAME];
        assert_non_null(s);
        assert_non_null(want);

        /* ASCII: at the cap minus 4 and one more. */
        static const size_t lens[] = {PY_CODE_MAX_NAME - 5, PY_CODE_MAX_NAME - 4,
                                      PY_CODE_MAX_NAME - 3, PY_CODE_MAX_NAME,
                                      PY_CODE_MAX_NAME + 1, 5000};
        for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
            memset(s, 'n', lens[i]);
            s[lens[i]] = '\0';
            uint64_t a = make_str(&im, l, s, NEAR_END);
            int got = read_str(&im, l, a, out, sizeof(out));
            if (lens[i] <= PY_CODE_MAX_NAME - 4) {
                assert_int_equal(got, (int)lens[i]);
                assert_string_equal(out, s);
            } else {
                memset(want, 'n', PY_CODE_MAX_NAME - 4);
                memcpy(want + PY_CODE_MAX_NAME - 4, "...", 4);
                assert_int_equal(got, PY_CODE_MAX_NAME - 1);
                assert_string_equal(out, want);
            }
        }
        /* Three-byte characters after one ASCII: 339 of them fit in 1020
         * bytes (1018), the 340th not. */
        s[0] = 'a';
        for (size_t i = 0; i < 2000; i++)
            memcpy(s + 1 + 3 * i, "名", 3);
        s[1 + 3 * 2000] = '\0';
        uint64_t a = make_str(&im, l, s, NEAR_END);
        assert_int_equal(read_str(&im, l, a, out, sizeof(out)), 1 + 3 * 339 + 3);
        memcpy(want, s, 1 + 3 * 339);
        memcpy(want + 1 + 3 * 339, "...", 4);
        assert_string_equal(out, want);
        /* Four-byte ones: 255 exactly fill 1020 bytes; more are cut. */
        for (size_t n = 255; n <= 256; n++) {
            for (size_t i = 0; i < n; i++)
                memcpy(s + 4 * i, "\U0001F600", 4);
            s[4 * n] = '\0';
            a = make_str(&im, l, s, NEAR_END);
            int got = read_str(&im, l, a, out, sizeof(out));
            if (n == 255) {
                assert_int_equal(got, 1020);
                assert_string_equal(out, s);
            } else {
                memcpy(want, s, 1020);
                memcpy(want + 1020, "...", 4);
                assert_int_equal(got, 1023);
                assert_string_equal(out, want);
            }
        }

        /* Through py_code__read: a long name and a longer file. */
        memset(s, 'q', 3000);
        s[3000] = '\0';
        uint64_t name = make_str(&im, l, s, NEAR_END);
        memset(s, 'f', big);
        s[big] = '\0';
        uint64_t file = make_str(&im, l, s, NEAR_END);
        struct code_spec cs = {FAKE_CODE_TYPE, 7, file, name, name, 0, 0};
        struct py_code *c = read_ok(&im, l, FAKE_CODE_TYPE, make_code(&im, l, &cs), 0, true);
        assert_int_equal(strlen(c->name), PY_CODE_MAX_NAME - 1);
        assert_int_equal(strlen(c->qualname), PY_CODE_MAX_NAME - 1);
        assert_int_equal(strlen(c->filename), PY_CODE_MAX_FILE - 1);
        assert_string_equal(c->name + PY_CODE_MAX_NAME - 4, "...");
        assert_string_equal(c->filename + PY_CODE_MAX_FILE - 4, "...");
        assert_int_equal(c->filename[0], 'f');
        rt_obj__put(&c->obj);
        free(s);
        free(want);
        image_free(&im);
    }
}

/* Strings py_code does not read: not compact, kinds that are none, an
 * ASCII flag on a wide kind, lengths past 2^30, data past the memory. As a
 * name or file the code object is refused; as a qualname, the name stands
 * in. */
static void test_odd_strings(void **state)
{
    static const struct {
        const char *what;
        unsigned kind;
        bool compact, ascii;
        uint64_t length;
    } odd[] = {
        {"not compact", 1, false, false, 3},
        {"not compact, ASCII", 1, false, true, 3},
        {"kind 0 (wchar_t, before 3.12)", 0, true, false, 3},
        {"kind 3", 3, true, false, 3},
        {"kind 5", 5, true, false, 3},
        {"kind 7", 7, true, false, 3},
        {"ASCII of kind 2", 2, true, true, 3},
        {"ASCII of kind 4", 4, true, true, 3},
        {"length 2^30 + 1", 1, true, true, (1u << 30) + 1},
        {"length 2^63", 1, true, true, 1ull << 63},
        {"length 2^64 - 1", 2, true, false, ~0ull},
        {"length past the memory", 1, true, true, 500},
        {"length 2^30 of UCS-4", 4, true, false, 1u << 30},
    };
    unsigned cases = 0;
    (void)state;

    for (unsigned li = 0; li < NLAYOUTS; li++) {
        const struct py_layout *l = layouts(li);
        for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
            struct image im;
            char out[PY_CODE_MAX_NAME];
            image_init(&im);
            struct built b = build(&im, l, "good", "Outer.good", "/x.py", 3, NEAR_END);
            uint64_t s = make_str(&im, l, "abc", NEAR_END);
            uint8_t *bytes = region_of(&im, s)->bytes;
            put32(bytes, l->unicode_state, str_state(l, odd[i].kind, odd[i].compact, odd[i].ascii));
            put64(bytes, l->unicode_length, odd[i].length);
            int got = read_str(&im, l, s, out, sizeof(out));
            if (got >= 0)
                fail_msg("%x: %s read as \"%s\"", l->version, odd[i].what, out);

            /* As the name, the file, the qualname. */
            for (int as = 0; as < 3; as++) {
                if (as == 2 && l->code_qualname < 0)
                    continue;
                struct code_spec cs = {FAKE_CODE_TYPE,
                                       3,
                                       as == 1 ? s : b.file,
                                       as == 0 ? s : b.name,
                                       as == 2 ? s : b.qualname,
                                       b.table,
                                       0};
                uint64_t code = make_code(&im, l, &cs);
                if (as < 2) {
                    const char *why = read_fails(&im, l, FAKE_CODE_TYPE, code, 0);
                    assert_non_null(strstr(why, "names"));
                } else {
                    struct py_code *c = read_ok(&im, l, FAKE_CODE_TYPE, code, 0, true);
                    assert_string_equal(c->qualname, "good");
                    rt_obj__put(&c->obj);
                }
                cases++;
            }
            image_free(&im);
        }
    }
    printf("%u odd strings as names, files and qualnames\n", cases);
}

/* Each region unreadable in turn: the code object or its names refuse it,
 * a qualname falls back to the name, a table costs the lines. Then every
 * pointer 0, and the code object cut at each length short of what is read
 * of it. */
static void test_unreadable(void **state)
{
    unsigned cases = 0;
    (void)state;

    for (unsigned li = 0; li < NLAYOUTS; li++) {
        const struct py_layout *l = layouts(li);
        for (int pad = 0; pad < 2; pad++) {
            struct image im;
            image_init(&im);
            struct built b = build(&im, l, "h", "K.h", "/h.py", 50, pad ? 512 : NEAR_END);
            const struct {
                uint64_t addr;
                const char *why; /* NULL: read, with what is missing replaced */
            } parts[] = {
                {b.code, "unreadable"}, {b.name, "names"}, {b.file, "names"},
                {b.qualname, NULL},     {b.table, NULL},
            };
            for (size_t p = 0; p < sizeof(parts) / sizeof(parts[0]); p++) {
                if (!parts[p].addr)
                    continue;
                struct region *r = region_of(&im, parts[p].addr);
                r->unreadable = true;
                if (parts[p].why) {
                    const char *why = read_fails(&im, l, FAKE_CODE_TYPE, b.code, b.tag);
                    assert_non_null(strstr(why, parts[p].why));
                } else {
                    struct py_code *c = read_ok(&im, l, FAKE_CODE_TYPE, b.code, b.tag, true);
                    assert_string_equal(c->name, "h");
                    if (parts[p].addr == b.table) {
                        assert_null(c->lines);
                        assert_int_equal(py_code__line(c, 14), 50);
                        assert_string_equal(c->qualname, l->code_qualname >= 0 ? "K.h" : "h");
                    } else {
                        assert_string_equal(c->qualname, "h");
                        assert_non_null(c->lines);
                    }
                    rt_obj__put(&c->obj);
                }
                r->unreadable = false;
                cases++;
            }
            /* A string's header readable, its characters not: the region
             * ends inside them. */
            struct region *nr = region_of(&im, b.file);
            size_t keep = nr->len;
            nr->len = (size_t)l->unicode_ascii_size + 2;
            const char *why = read_fails(&im, l, FAKE_CODE_TYPE, b.code, b.tag);
            assert_non_null(strstr(why, "names"));
            nr->len = keep;
            /* A table's header readable, its bytes not. */
            struct region *tr = region_of(&im, b.table);
            keep = tr->len;
            tr->len = (size_t)l->bytes_sval + 1;
            struct py_code *c = read_ok(&im, l, FAKE_CODE_TYPE, b.code, b.tag, true);
            assert_null(c->lines);
            rt_obj__put(&c->obj);
            tr->len = keep;
            cases += 2;
            image_free(&im);
        }

        /* Every pointer 0 in turn. */
        struct image im;
        image_init(&im);
        struct built b = build(&im, l, "z", "Z.z", "/z.py", 60, NEAR_END);
        uint8_t *code = region_of(&im, b.code)->bytes;
        int32_t ptrs[] = {l->code_name, l->code_filename, l->code_qualname, l->code_linetable};
        for (size_t p = 0; p < 4; p++) {
            if (ptrs[p] < 0)
                continue;
            uint8_t saved[8];
            memcpy(saved, code + ptrs[p], 8);
            put64(code, ptrs[p], 0);
            if (p < 2) {
                const char *why = read_fails(&im, l, FAKE_CODE_TYPE, b.code, 0);
                assert_non_null(strstr(why, "names"));
            } else {
                struct py_code *c = read_ok(&im, l, FAKE_CODE_TYPE, b.code, 0, true);
                assert_string_equal(c->name, "z");
                if (p == 2)
                    assert_string_equal(c->qualname, "z");
                else
                    assert_null(c->lines);
                rt_obj__put(&c->obj);
            }
            memcpy(code + ptrs[p], saved, 8);
            cases++;
        }
        /* The code object's memory ending early: what py_code reads of it
         * is the furthest field it uses plus 8. */
        size_t need = 0;
        int32_t used[] = {l->object_type,   l->code_firstlineno, l->code_filename, l->code_name,
                          l->code_qualname, l->code_linetable,   l->code_argcount};
        for (size_t k = 0; k < sizeof(used) / sizeof(used[0]); k++)
            need = used[k] >= 0 && (size_t)used[k] + 8 > need ? (size_t)used[k] + 8 : need;
        struct region *cr = region_of(&im, b.code);
        for (size_t len = 0; len <= need; len++) {
            cr->len = len;
            if (len < need) {
                const char *why = read_fails(&im, l, FAKE_CODE_TYPE, b.code, 0);
                assert_non_null(strstr(why, "unreadable"));
            } else {
                struct py_code *c = read_ok(&im, l, FAKE_CODE_TYPE, b.code, 0, true);
                rt_obj__put(&c->obj);
            }
            cases++;
        }
        cr->len = 512;
        /* Nothing at all there, or at 0. */
        assert_non_null(strstr(read_fails(&im, l, FAKE_CODE_TYPE, 0, 0), "unreadable"));
        assert_non_null(strstr(read_fails(&im, l, FAKE_CODE_TYPE, 0x1000, 0), "unreadable"));
        assert_non_null(strstr(read_fails(&im, l, FAKE_CODE_TYPE, ~0ull - 4, 0), "unreadable"));
        image_free(&im);
    }
    printf("%u unreadable cases\n", cases);
}

/* Layouts py_code cannot use. */
static void test_bad_layout(void **state)
{
    struct image im;
    struct py_layout l = py_layout_313;
    (void)state;

    image_init(&im);
    struct built b = build(&im, &l, "x", "x", "/x.py", 1, NEAR_END);
    l.code_name = -1;
    assert_non_null(strstr(read_fails(&im, &l, FAKE_CODE_TYPE, b.code, 0), "layout"));
    l = py_layout_313;
    l.code_linetable = 600; /* past what is read of a code object */
    assert_non_null(strstr(read_fails(&im, &l, FAKE_CODE_TYPE, b.code, 0), "layout"));
    l = py_layout_313;
    l.unicode_compact_size = 4096; /* a string header too big to read */
    char out[16];
    assert_int_equal(read_str(&im, &l, b.name, out, sizeof(out)), -EINVAL);
    image_free(&im);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_str_at_end_of_memory), cmocka_unit_test(test_caps),
        cmocka_unit_test(test_odd_strings),          cmocka_unit_test(test_unreadable),
        cmocka_unit_test(test_bad_layout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
