/* cityHash64(app, host, toInt64(pid), toInt64(time_ns)) as ClickHouse 18.16
 * computed them; a and h are the test strings of 40 and 70 bytes. */
assert_int_equal(key4("a", "h", 1ll, 2ll), 3102317136964315156ull);
assert_int_equal(key4("", "", 0ll, 0ll), 9482439809741710762ull);
assert_int_equal(key4("app-x", "host.example", 123456ll, 1700000000123456789ll),
                 16987587310459872413ull);
assert_int_equal(key4(a, h, -5ll, -1700000000000000000ll), 13535210508831786817ull);
