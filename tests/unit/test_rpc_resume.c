/*
 * Idempotent requests and RESUME at the target (docs/bulk-gateway.md,
 * "Resume"), in one process over na-shm: the API, the mark on the wire,
 * and a raw endpoint playing the gateway that re-forwards: a RESUME with
 * the id of an unanswered request is attached to it (its handler does not
 * run again, the answer goes to the RESUME), one with an unknown id or
 * after the answer runs as a new request, and malformed ones are dropped
 * and counted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rpc_priv.h"
#include "rpc_test_util.h"

#define RPC_HOLD "resume.hold"

struct srv {
    cw_context_t *ctx;
    cw_network_t *net;
    char uri[CW_URI_MAX];
    int runs;
    bool idem_seen;
    cw_handle_t *held; /* answered by the test */
};

/* Counts its runs and keeps the handle for the test to answer. */
static void h_hold(cw_handle_t *h, void *arg)
{
    struct srv *s = arg;

    s->runs++;
    s->idem_seen = cw_handle_idempotent(h);
    if (s->held != NULL) {
        cw_respond(h, CW_BUSY, NULL, NULL);
        cw_handle_release(h);
        return;
    }
    s->held = h;
}

static void srv_open(struct srv *s)
{
    memset(s, 0, sizeof(*s));
    assert_int_equal(cw_context_create(NULL, &s->ctx), CW_OK);
    assert_int_equal(cw_network_open(s->ctx, "shm://", CW_NET_LISTEN, &s->net),
                     CW_OK);
    assert_int_equal(cw_network_uri(s->net, s->uri, sizeof(s->uri)), CW_OK);
    assert_int_equal(cw_rpc_register(s->ctx, RPC_HOLD, h_hold, s, NULL, NULL),
                     CW_OK);
}

static void srv_close(struct srv *s)
{
    if (s->held != NULL) {
        cw_respond(s->held, CW_OK, NULL, NULL);
        cw_handle_release(s->held);
    }
    cw_context_destroy(s->ctx);
}

/* Progress until *flag reaches want (bounded), or a few rounds. */
static void spin(cw_context_t *ctx, cw_na_t *na, int *flag, int want)
{
    int rounds = flag != NULL ? 5000 : 20;

    for (int i = 0; i < rounds && (flag == NULL || *flag < want); i++) {
        if (na != NULL)
            cw_na_progress(na, 0, NULL);
        cw_progress(ctx, 1);
        cw_trigger(ctx, 0, 0, NULL);
    }
}

/* ---- API and the mark on the wire ------------------------------------- */

/* Forward @p h to the server, check what its handler saw, answer, and
 * check the call completed once. */
static void held_call(struct srv *s, cw_context_t *cctx, cw_handle_t *h,
                      bool idem)
{
    struct call c = {0};

    assert_int_equal(cw_forward(h, 5000, call_cb, &c), CW_OK);
    /* In flight: the mark can no longer change. */
    assert_int_equal(cw_handle_set_idempotent(h, !idem), CW_INVALID_ARG);
    for (int i = 0; i < 2000 && s->held == NULL; i++) {
        spin(s->ctx, NULL, NULL, 0);
        spin(cctx, NULL, NULL, 0);
    }
    assert_non_null(s->held);
    assert_true(s->idem_seen == idem);
    assert_int_equal(cw_handle_set_idempotent(s->held, true),
                     CW_INVALID_ARG); /* a server handle */
    cw_respond(s->held, CW_OK, NULL, NULL);
    cw_handle_release(s->held);
    s->held = NULL;
    for (int i = 0; i < 2000 && !c.done; i++) {
        spin(s->ctx, NULL, NULL, 0);
        spin(cctx, NULL, NULL, 0);
    }
    assert_int_equal(c.done, 1);
    assert_int_equal(c.st, CW_OK);
}

static void test_api(void **state)
{
    struct srv s;
    cw_context_t *cctx;
    cw_addr_t *dst;
    cw_handle_t *h;
    (void)state;

    srv_open(&s);
    assert_int_equal(cw_handle_set_idempotent(NULL, true), CW_INVALID_ARG);
    assert_false(cw_handle_idempotent(NULL));
    assert_int_equal(cw_context_create(NULL, &cctx), CW_OK);
    assert_int_equal(cw_addr_lookup(cctx, s.uri, &dst), CW_OK);
    assert_int_equal(cw_handle_create(cctx, dst, cw_rpc_id(RPC_HOLD), &h),
                     CW_OK);
    assert_false(cw_handle_idempotent(h));
    assert_int_equal(cw_handle_set_idempotent(h, true), CW_OK);
    assert_true(cw_handle_idempotent(h));
    assert_int_equal(cw_relay_set_resume(h), CW_INVALID_ARG); /* no gateway */
    held_call(&s, cctx, h, true);
    /* Unmarked again: the next call is not idempotent. */
    assert_int_equal(cw_handle_set_idempotent(h, false), CW_OK);
    held_call(&s, cctx, h, false);
    cw_handle_release(h);
    /* One-way RPCs cannot be marked. */
    {
        struct cw_rpc_opts ow = {.one_way = true};
        assert_int_equal(
            cw_rpc_register(cctx, "resume.oneway", NULL, NULL, &ow, NULL),
            CW_OK);
        assert_int_equal(
            cw_handle_create(cctx, dst, cw_rpc_id("resume.oneway"), &h), CW_OK);
        assert_int_equal(cw_handle_set_idempotent(h, true), CW_INVALID_ARG);
        cw_handle_release(h);
    }
    cw_addr_free(dst);
    cw_context_destroy(cctx);
    srv_close(&s);
}

/* ---- a raw endpoint playing the re-forwarding gateway ------------------ */

struct raw {
    cw_na_t *na;
    cw_na_addr_t *dst;
    int sent, got;
    uint8_t resp[512];
    size_t resp_len;
};

static void raw_sent(const struct cw_na_cb_info *info)
{
    ((struct raw *)info->arg)->sent++;
}

static void raw_recv(const struct cw_na_cb_info *info)
{
    struct raw *r = info->arg;

    if (info->status == CW_OK) {
        r->got++;
        r->resp_len = info->u.recv_expected.len;
    }
}

/* Send a request for RPC_HOLD with these ids and flags, with a response
 * receive posted on @p tag (unless 0). */
static void raw_req(struct srv *s, struct raw *r, uint64_t req_id, uint32_t tag,
                    uint16_t flags, uint64_t resume_id, cw_na_op_t **recv_p)
{
    struct cw_wire_hdr h = {
        .type = CW_MSG_REQ,
        .flags = flags,
        .rpc_id = cw_rpc_id(RPC_HOLD),
        .req_id = req_id,
        .budget_us = 10000000,
        .resp_tag = tag,
        .resume_id = resume_id,
    };
    static uint8_t msg[128];
    size_t n = cw_wire_hdr_size(flags);
    int want = r->sent + 1;
    struct cw_context_stats st0;
    uint64_t seen;

    cw_context_stats(s->ctx, &st0);
    seen = st0.rx_requests + st0.rx_dropped;

    cw_wire_hdr_encode(msg, &h);
    if (tag != 0)
        assert_int_equal(cw_na_msg_recv_expected(r->na, r->resp,
                                                 sizeof(r->resp), r->dst, tag,
                                                 raw_recv, r, recv_p),
                         CW_OK);
    assert_int_equal(
        cw_na_msg_send_unexpected(r->na, msg, n, r->dst, 0, raw_sent, r, NULL),
        CW_OK);
    spin(s->ctx, r->na, &r->sent, want);
    /* Until the server has taken it in (or dropped it), then run what it
     * queued. */
    for (int i = 0; i < 5000; i++) {
        struct cw_context_stats st;
        cw_context_stats(s->ctx, &st);
        if (st.rx_requests + st.rx_dropped > seen)
            break;
        spin(s->ctx, r->na, NULL, 0);
    }
    spin(s->ctx, r->na, NULL, 0);
}

static void test_attach(void **state)
{
    struct srv s;
    struct raw r = {0};
    struct cw_context_stats st0, st;
    struct cw_wire_msg m;
    cw_na_op_t *old_recv = NULL, *recv = NULL;
    const uint64_t id = 0xfeedface12345678ull;
    (void)state;

    srv_open(&s);
    assert_int_equal(cw_na_open("shm://", 0, NULL, &r.na), CW_OK);
    assert_int_equal(cw_na_addr_lookup(r.na, s.uri, &r.dst), CW_OK);

    /* The request, idempotent; its handler holds it. */
    raw_req(&s, &r, 100, 11, CW_HF_IDEMPOTENT, id, &old_recv);
    assert_int_equal(s.runs, 1);
    assert_non_null(s.held);
    assert_true(s.idem_seen);
    cw_context_stats(s.ctx, &st0);

    /* Malformed: RESUME without IDEMPOTENT (no resume id). */
    raw_req(&s, &r, 101, 0, CW_HF_RESUME, 0, NULL);
    cw_context_stats(s.ctx, &st);
    assert_int_equal(st.rx_dropped, st0.rx_dropped + 1);
    assert_int_equal(st.rx_requests, st0.rx_requests);
    assert_int_equal(s.runs, 1);

    /* The resumption, from the "other gateway" (new request id and tag):
     * attached, the handler does not run again. */
    raw_req(&s, &r, 200, 22, CW_HF_IDEMPOTENT | CW_HF_RESUME, id, &recv);
    cw_context_stats(s.ctx, &st);
    assert_int_equal(st.resumed, st0.resumed + 1);
    assert_int_equal(s.runs, 1);

    /* The answer goes to the resumption, not the first request. */
    cw_buf_put_u32(cw_handle_output(s.held), 77);
    assert_int_equal(cw_respond(s.held, CW_OK, NULL, NULL), CW_OK);
    cw_handle_release(s.held);
    s.held = NULL;
    spin(s.ctx, r.na, &r.got, 1);
    assert_int_equal(r.got, 1);
    assert_int_equal(cw_wire_decode(r.resp, r.resp_len, &m), CW_OK);
    assert_int_equal(m.hdr.type, CW_MSG_RESP);
    assert_int_equal(m.hdr.req_id, 200);
    assert_int_equal(m.hdr.status, CW_OK);
    assert_int_equal(m.hdr.payload_len, 4);
    cw_na_cancel(r.na, old_recv); /* never answered */
    spin(s.ctx, r.na, NULL, 0);
    assert_int_equal(r.got, 1);

    /* After the answer, the same id is unknown: a new request (correct,
     * since it is idempotent). */
    raw_req(&s, &r, 300, 0, CW_HF_IDEMPOTENT | CW_HF_RESUME, id, NULL);
    assert_int_equal(s.runs, 2);
    cw_context_stats(s.ctx, &st);
    assert_int_equal(st.resumed, st0.resumed + 1);
    /* An unknown id too, and a RESUME for another RPC id never matches. */
    cw_respond(s.held, CW_OK, NULL, NULL);
    cw_handle_release(s.held);
    s.held = NULL;
    raw_req(&s, &r, 400, 0, CW_HF_IDEMPOTENT | CW_HF_RESUME, id + 1, NULL);
    assert_int_equal(s.runs, 3);
    cw_context_stats(s.ctx, &st);
    assert_int_equal(st.resumed, st0.resumed + 1);

    cw_na_addr_free(r.na, r.dst);
    spin(s.ctx, r.na, NULL, 0);
    cw_na_close(r.na);
    srv_close(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_api),
        cmocka_unit_test(test_attach),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
