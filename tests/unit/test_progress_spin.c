/*
 * cw_progress's learning spin (core/progress.c): after a wait that
 * blocked and that a completion ended W ns in, the next spin is 50 us, or
 * W + W/4 for W up to 1 ms, capped at 1 ms; a longer wait, or one
 * that no completion ended, brings it back to 50 us.  The rule alone, no
 * clock: what it makes of a run of waits is what the bulk benchmarks
 * measure (docs/perf/2026-11-29-bulk-vs-mercury.md).
 *
 * And the pass clock (causeway/log.h) that a worker's loop brackets its
 * passes with: one reading per pass, taken again by each progress poll,
 * after a wait in cw_trigger and at each begin and end.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "rpc_priv.h"

#define US 1000ull

/* The first cw_now_ns() reading after @p t (bounded: the clock moves). */
static uint64_t clock_after(uint64_t t)
{
    uint64_t now;

    for (unsigned i = 0; i < 100000000u; i++)
        if ((now = cw_now_ns()) > t)
            return now;
    fail_msg("the monotonic clock did not move past %llu",
             (unsigned long long)t);
    return 0;
}

static void test_pass_clock_outside_a_pass_is_the_clock(void **state)
{
    uint64_t a, b;

    (void)state;
    a = cw_now_pass_ns();
    b = cw_now_pass_ns();
    assert_true(b >= a);
    clock_after(b);
    assert_true(cw_now_pass_ns() > b);
}

static void test_pass_clock_reads_once_a_pass(void **state)
{
    uint64_t before, in, inner;

    (void)state;
    before = cw_now_ns();
    cw_clock_pass_begin();
    in = cw_now_pass_ns();
    assert_true(in >= before);
    clock_after(in);
    /* The clock moved; the pass's reading did not. */
    assert_int_equal(cw_now_pass_ns(), in);
    /* A nested pass starts with a new reading... */
    cw_clock_pass_begin();
    inner = cw_now_pass_ns();
    assert_true(inner > in);
    clock_after(inner);
    assert_int_equal(cw_now_pass_ns(), inner);
    /* ...and its end leaves the outer one open, with a new reading. */
    cw_clock_pass_end();
    in = cw_now_pass_ns();
    assert_true(in > inner);
    clock_after(in);
    assert_int_equal(cw_now_pass_ns(), in);
    cw_clock_pass_end();
    /* Closed: the clock itself again.  An extra end is harmless. */
    assert_true(cw_now_pass_ns() > in);
    cw_clock_pass_end();
    in = cw_now_pass_ns();
    clock_after(in);
    assert_true(cw_now_pass_ns() > in);
}

static void test_pass_clock_new_reading_per_poll_and_wait(void **state)
{
    cw_context_t *ctx = NULL;
    uint64_t in;
    unsigned ran = 7;

    (void)state;
    assert_int_equal(cw_context_create(NULL, &ctx), CW_OK);
    cw_clock_pass_begin();
    in = cw_now_pass_ns();
    clock_after(in);
    /* A progress poll stamps what it finds afresh. */
    (void)cw_progress(ctx, 0);
    assert_true(cw_now_pass_ns() > in);
    in = cw_now_pass_ns();
    clock_after(in);
    /* An empty trigger with no wait takes nothing new... */
    assert_int_equal(cw_trigger(ctx, 0, 0, &ran), CW_TIMEOUT);
    assert_int_equal(ran, 0);
    assert_int_equal(cw_now_pass_ns(), in);
    /* ...one that waited does. */
    assert_int_equal(cw_trigger(ctx, 1, 0, &ran), CW_TIMEOUT);
    assert_true(cw_now_pass_ns() > in);
    cw_clock_pass_end();
    cw_context_destroy(ctx);
}

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
        cmocka_unit_test(test_pass_clock_outside_a_pass_is_the_clock),
        cmocka_unit_test(test_pass_clock_reads_once_a_pass),
        cmocka_unit_test(test_pass_clock_new_reading_per_poll_and_wait),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
