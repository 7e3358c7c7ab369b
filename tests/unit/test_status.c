/* Status codes: fixed numbers (they cross the wire) and complete strings. */
#include <causeway/status.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

static void test_numbers_fixed(void **state)
{
    /* Never renumber: these values are on the wire. */
    assert_int_equal(CW_OK, 0);
    assert_int_equal(CW_INVALID_ARG, 1);
    assert_int_equal(CW_TIMEOUT, 5);
    assert_int_equal(CW_CANCELED, 6);
    assert_int_equal(CW_BUSY, 8);
    assert_int_equal(CW_PERMISSION, 10);
    assert_int_equal(CW_PROTOCOL, 12);
    assert_int_equal(CW_NO_RPC, 19);
    assert_int_equal(CW_DENIED, 20);
    assert_int_equal(CW_DRAINING, 21);
    assert_int_equal(CW_TTL_EXPIRED, 22);
    assert_int_equal(CW_NO_ROUTE, 24);
    assert_int_equal(CW_EXPIRED, 27);
    assert_int_equal(CW_BAD_HANDLE, 28);
    assert_int_equal(CW_REMOTE, 30);
}

static void test_strings_complete(void **state)
{
    for (int s = 0; s < CW_STATUS_MAX; s++) {
        assert_true(cw_status_valid(s));
        assert_true(strlen(cw_status_str((cw_status_t)s)) > 0);
        assert_memory_equal(cw_status_name((cw_status_t)s), "CW_", 3);
        for (int t = 0; t < s; t++)
            assert_string_not_equal(cw_status_name((cw_status_t)s),
                                    cw_status_name((cw_status_t)t));
    }
    assert_string_equal(cw_status_name(CW_TIMEOUT), "CW_TIMEOUT");
    assert_string_equal(cw_status_str(CW_OK), "success");
}

static void test_unknown(void **state)
{
    assert_false(cw_status_valid(-1));
    assert_false(cw_status_valid(CW_STATUS_MAX));
    assert_false(cw_status_valid(100000));
    assert_string_equal(cw_status_str((cw_status_t)9999), "unknown status");
    assert_string_equal(cw_status_name((cw_status_t)-3), "CW_UNKNOWN");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_numbers_fixed),
        cmocka_unit_test(test_strings_complete),
        cmocka_unit_test(test_unknown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
