#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "../../agent/symbolize/kallsyms.h"

static void test_parse_and_lookup(void **state)
{
    (void)state;
    static const char text[] = "ffffffff81000000 T _stext\n"
                               "ffffffff81000100 t do_thing\n"
                               "ffffffff81002000 D some_data\n"
                               "ffffffff81001000 T vfs_read\n"
                               "ffffffffc0a01000 t ext4_foo\t[ext4]\n";
    const char *why, *mod;
    struct kallsyms *ks = kallsyms__parse(text, strlen(text), &why);

    assert_non_null(ks);
    assert_int_equal(kallsyms__count(ks), 4); /* data symbols are left out */
    assert_string_equal(kallsyms__lookup(ks, 0xffffffff81000150ull, &mod), "do_thing");
    assert_string_equal(mod, "");
    assert_string_equal(kallsyms__lookup(ks, 0xffffffff81001000ull, &mod), "vfs_read");
    assert_string_equal(kallsyms__lookup(ks, 0xffffffffc0a01010ull, &mod), "ext4_foo");
    assert_string_equal(mod, "ext4");
    assert_null(kallsyms__lookup(ks, 0x1000, &mod));
    kallsyms__free(ks);
    kallsyms__free(NULL);
}

static void test_hidden_addresses_say_why(void **state)
{
    (void)state;
    static const char text[] = "0000000000000000 T _stext\n0000000000000000 t do_thing\n";
    const char *why = NULL;

    assert_null(kallsyms__parse(text, strlen(text), &why));
    assert_non_null(strstr(why, "kptr_restrict"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_and_lookup),
        cmocka_unit_test(test_hidden_addresses_say_why),
    };
    return cmocka_run_group_tests_name("kallsyms", tests, NULL, NULL);
}
