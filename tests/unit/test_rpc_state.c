/*
 * The life of a handle's use (core/rpc_priv.h): the state transition
 * table, written out here again by hand, must say the same as
 * cw_h_state_ok for every role and pair of states; the flag rules accept
 * the changes the core makes and refuse others; the setters move a handle
 * through both roles' lives, and in a debug build a step the table does
 * not allow aborts.  No network, no context.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "rpc_priv.h"

/* Short names for the table. */
#define I CW_H_IDLE
#define A CW_H_ACTIVE
#define D CW_H_DECIDED
#define Q CW_H_QUEUED
#define F CW_H_DONE

/* The allowed steps, one per line, as the design states them. */
static const struct {
    enum cw_hrole role;
    enum cw_hstate from, to;
} allowed[] = {
    {CW_H_CLIENT, I, A}, /* cw_forward */
    {CW_H_CLIENT, A, D}, /* outcome decided */
    {CW_H_CLIENT, A, I}, /* a first forward could not start */
    {CW_H_CLIENT, A, F}, /* a later one could not start */
    {CW_H_CLIENT, D, Q}, /* the caller is told */
    {CW_H_CLIENT, Q, F}, /* its callback runs */
    {CW_H_CLIENT, F, A}, /* forwarded again */
    {CW_H_SERVER, I, A}, /* cw_respond */
    {CW_H_SERVER, A, D}, {CW_H_SERVER, D, Q},
    {CW_H_SERVER, D, F}, /* no callback to run */
    {CW_H_SERVER, Q, F},
};

static bool listed(enum cw_hrole role, enum cw_hstate from, enum cw_hstate to)
{
    for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
        if (allowed[i].role == role && allowed[i].from == from &&
            allowed[i].to == to)
            return true;
    return false;
}

static void test_state_table(void **state)
{
    unsigned n = 0;
    (void)state;

    for (int r = CW_H_CLIENT; r <= CW_H_SERVER; r++)
        for (int from = 0; from < CW_H_NSTATES; from++)
            for (int to = 0; to < CW_H_NSTATES; to++) {
                bool ok = cw_h_state_ok((enum cw_hrole)r, (enum cw_hstate)from,
                                        (enum cw_hstate)to);
                if (ok != listed((enum cw_hrole)r, (enum cw_hstate)from,
                                 (enum cw_hstate)to))
                    fail_msg("role %d: %d -> %d %s", r, from, to,
                             ok ? "allowed, not listed" : "listed, refused");
                n += ok;
            }
    assert_int_equal(n, sizeof(allowed) / sizeof(allowed[0]));
    /* Nothing stays put, and a server answers once. */
    assert_false(cw_h_state_ok(CW_H_CLIENT, A, A));
    assert_false(cw_h_state_ok(CW_H_SERVER, F, A));
    assert_false(cw_h_state_ok(CW_H_CLIENT, I, F));
    /* Out of range. */
    assert_false(cw_h_state_ok((enum cw_hrole)2, I, A));
    assert_false(cw_h_state_ok(CW_H_CLIENT, (enum cw_hstate)CW_H_NSTATES, A));
    assert_false(cw_h_state_ok(CW_H_CLIENT, I, (enum cw_hstate)7));
}

static void test_flag_rules(void **state)
{
    (void)state;
    /* What the core does. */
    assert_true(cw_h_flag_ok(CW_H_CLIENT, A, CW_HFL_SENT, true));
    assert_true(cw_h_flag_ok(CW_H_CLIENT, F, CW_HFL_SENT, false));
    assert_true(cw_h_flag_ok(CW_H_CLIENT, D, CW_HFL_LINGER, true));
    assert_true(cw_h_flag_ok(CW_H_CLIENT, F, CW_HFL_LINGER, false));
    assert_true(cw_h_flag_ok(CW_H_CLIENT, Q, CW_HFL_RECV_CANCELED, true));
    assert_true(cw_h_flag_ok(CW_H_SERVER, D, CW_HFL_SEND_CANCELED, true));
    assert_true(cw_h_flag_ok(CW_H_SERVER, A, CW_HFL_SQ_CANCEL, false));
    assert_true(cw_h_flag_ok(CW_H_CLIENT, F, CW_HFL_REFORWARD, true));
    assert_true(cw_h_flag_ok(CW_H_SERVER, I, CW_HFL_SELF, true));
    assert_true(cw_h_flag_ok(CW_H_SERVER, I, CW_HFL_FROM_BATCH, true));
    assert_true(cw_h_flag_ok(CW_H_SERVER, F, CW_HFL_XCTX, false));
    assert_true(cw_h_flag_ok(CW_H_CLIENT, A, CW_HFL_PIN_HELD, true));
    assert_true(cw_h_flag_ok(CW_H_CLIENT, D, CW_HFL_PIN_HELD, false));
    assert_true(cw_h_flag_ok(CW_H_CLIENT, Q, CW_HFL_PIN_HOME, false));
    /* A flag of the other role, or in the wrong state. */
    assert_false(cw_h_flag_ok(CW_H_SERVER, D, CW_HFL_LINGER, true));
    assert_false(cw_h_flag_ok(CW_H_CLIENT, I, CW_HFL_SELF, true));
    assert_false(cw_h_flag_ok(CW_H_CLIENT, A, CW_HFL_LINGER, true));
    assert_false(cw_h_flag_ok(CW_H_CLIENT, I, CW_HFL_SENT, true));
    assert_false(cw_h_flag_ok(CW_H_SERVER, A, CW_HFL_SEND_CANCELED, false));
    assert_false(cw_h_flag_ok(CW_H_SERVER, A, CW_HFL_SELF, true));
    assert_false(cw_h_flag_ok(CW_H_CLIENT, D, CW_HFL_PIN_HOME, true));
    assert_false(cw_h_flag_ok(CW_H_CLIENT, Q, CW_HFL_PIN_HELD, false));
    /* Not one flag. */
    assert_false(cw_h_flag_ok(CW_H_CLIENT, A, 0, true));
    assert_false(
        cw_h_flag_ok(CW_H_CLIENT, A, CW_HFL_SENT | CW_HFL_PIN_HOME, true));
    assert_false(cw_h_flag_ok(CW_H_CLIENT, A, 1u << 20, true));
}

static void test_lives(void **state)
{
    cw_handle_t *h = calloc(1, sizeof(*h));
    (void)state;

    assert_non_null(h);
    /* A client forwards, fails while the server may pull its payload
     * (busy while it lingers), hears, and forwards again. */
    h->use.role = CW_H_CLIENT;
    assert_false(cw_h_busy(h));
    cw_h_state_set(h, CW_H_ACTIVE);
    cw_h_flag_set(h, CW_HFL_SENT);
    assert_true(cw_h_busy(h));
    cw_h_set_final(h, CW_TIMEOUT);
    assert_int_equal(h->use.state, CW_H_DECIDED);
    cw_h_set_final(h, CW_OK); /* the first decision stands */
    assert_int_equal(h->use.final, CW_TIMEOUT);
    cw_h_flag_set(h, CW_HFL_LINGER);
    cw_h_state_set(h, CW_H_QUEUED);
    cw_h_state_set(h, CW_H_DONE);
    assert_true(cw_h_busy(h)); /* the payload is still exposed */
    cw_h_flag_clear(h, CW_HFL_LINGER);
    assert_false(cw_h_busy(h));
    cw_h_flag_clear(h, CW_HFL_SENT);
    assert_false(cw_h_flag(h, CW_HFL_SENT));
    cw_h_state_set(h, CW_H_ACTIVE);
    cw_h_state_set(h, CW_H_DONE); /* that one could not start */
    /* A server answers once, with nobody to tell. */
    memset(&h->use, 0, sizeof(h->use));
    h->use.role = CW_H_SERVER;
    cw_h_flag_set(h, CW_HFL_SELF);
    cw_h_state_set(h, CW_H_ACTIVE);
    cw_h_set_final(h, CW_OK);
    cw_h_state_set(h, CW_H_DONE);
    assert_false(cw_h_busy(h));
    assert_true(cw_h_flag(h, CW_HFL_SELF));
    free(h);
}

#ifndef NDEBUG
/* Run @p step in a child: true if it died of an abort. */
static bool aborts(void (*step)(cw_handle_t *))
{
    pid_t pid = fork();
    int st;

    assert_true(pid >= 0);
    if (pid == 0) {
        cw_handle_t *h = calloc(1, sizeof(*h));

        /* The abort is expected: no core file for it. */
        signal(SIGABRT, SIG_DFL);
        step(h);
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT;
}

static void skip_to_done(cw_handle_t *h)
{
    cw_h_state_set(h, CW_H_DONE); /* IDLE to DONE: never */
}

static void server_linger(cw_handle_t *h)
{
    h->use.role = CW_H_SERVER;
    cw_h_state_set(h, CW_H_ACTIVE);
    cw_h_set_final(h, CW_OK);
    cw_h_flag_set(h, CW_HFL_LINGER); /* a client's flag */
}
#endif

static void test_refused_aborts(void **state)
{
    (void)state;
#ifdef NDEBUG
    skip(); /* the checks are compiled out of release builds */
#else
    assert_true(aborts(skip_to_done));
    assert_true(aborts(server_linger));
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_state_table),
        cmocka_unit_test(test_flag_rules),
        cmocka_unit_test(test_lives),
        cmocka_unit_test(test_refused_aborts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
