/*
 * cw_progress's learning spin (core/progress.c): after a wait that
 * blocked and that a completion ended W ns in, the next spin is 50 us, or
 * W + W/4 for W up to 1 ms, capped at 1 ms; a longer wait, or one
 * that no completion ended, brings it back to 50 us.  The rule alone, no
 * clock: what it makes of a run of waits is what the bulk benchmarks
 * measure (docs/perf/2026-11-29-bulk-vs-mercury.md).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "rpc_priv.h"

#define US 1000ull

static void test_short_waits_keep_the_floor(void **state)
{
    (void)state;
    assert_int_equal(cw_progress_next_spin(0), 50 * US);
    assert_int_equal(cw_progress_next_spin(20 * US), 50 * US);
    /* 40 us + 10 us: the floor exactly. */
    assert_int_equal(cw_progress_next_spin(40 * US), 50 * US);
}

static void test_answers_that_come_late_are_waited_for(void **state)
{
    (void)state;
    /* A 1 MiB shm pull answers 150-200 us in. */
    assert_int_equal(cw_progress_next_spin(160 * US), 200 * US);
    assert_int_equal(cw_progress_next_spin(200 * US), 250 * US);
    assert_int_equal(cw_progress_next_spin(100 * US + 4), 125 * US + 5);
    /* A 4 MiB one 550-700 us in. */
    assert_int_equal(cw_progress_next_spin(600 * US), 750 * US);
    /* Past 800 us the quarter would pass the cap: the cap. */
    assert_int_equal(cw_progress_next_spin(800 * US), 1000 * US);
    assert_int_equal(cw_progress_next_spin(900 * US), 1000 * US);
    assert_int_equal(cw_progress_next_spin(1000 * US), 1000 * US);
}

static void test_long_or_empty_waits_reset(void **state)
{
    (void)state;
    assert_int_equal(cw_progress_next_spin(1000 * US + 1), 50 * US);
    assert_int_equal(cw_progress_next_spin(100000 * US), 50 * US);
    assert_int_equal(cw_progress_next_spin(UINT64_MAX), 50 * US);
}

static void test_a_run_of_waits(void **state)
{
    (void)state;
    /* What a context learns from waits of 150, 180, 1 500 and 160 us:
     * each sets the next spin; the long one resets it. */
    const uint64_t waits[] = {150 * US, 180 * US, 1500 * US, 160 * US};
    const uint64_t want[] = {187500, 225 * US, 50 * US, 200 * US};

    for (size_t i = 0; i < sizeof(waits) / sizeof(waits[0]); i++)
        assert_int_equal(cw_progress_next_spin(waits[i]), want[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_short_waits_keep_the_floor),
        cmocka_unit_test(test_answers_that_come_late_are_waited_for),
        cmocka_unit_test(test_long_or_empty_waits_reset),
        cmocka_unit_test(test_a_run_of_waits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
