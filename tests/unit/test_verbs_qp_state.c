/*
 * The fake verbs device's QP state machine, as rdma-core and the kernel
 * define it for RC QPs (ibv_modify_qp(3), IBA 10.3.1): RESET -> INIT ->
 * RTR -> RTS, each transition with the attribute masks it requires and
 * no others, any state -> ERR or RESET; anything else EINVAL with the QP
 * left as it was.  Posting sends before RTS is an immediate error,
 * posting receives in RESET too; in ERR both are taken and flushed.  The
 * connection manager drives the same transitions (what librdmacm does on
 * hardware), which the end of the file checks.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "vb_fake_test.h"

static const struct vb_ops *F = &vb_fake_ops;

#define INIT_MASK FAKE_QPM_INIT
#define RTR_MASK  FAKE_QPM_RTR
#define RTS_MASK  FAKE_QPM_RTS

/* One QP on an rdma_cm id that never connects. */
struct lone {
    struct rdma_event_channel *ch;
    struct rdma_cm_id *id;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_mr *mr;
    char buf[64];
};

static void lone_open(struct lone *l)
{
    struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons(9)};
    struct ibv_qp_init_attr qa;

    memset(l, 0, sizeof(*l));
    inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
    l->ch = F->create_event_channel();
    assert_non_null(l->ch);
    nonblock(l->ch->fd);
    assert_int_equal(F->create_id(l->ch, &l->id, NULL, RDMA_PS_TCP), 0);
    assert_int_equal(
        F->resolve_addr(l->id, NULL, (struct sockaddr *)&dst, 1000), 0);
    F->ack_cm_event(wait_ev(l->ch, RDMA_CM_EVENT_ADDR_RESOLVED));
    l->pd = F->alloc_pd(l->id->verbs);
    l->cq = F->create_cq(l->id->verbs, 64, NULL, NULL, 0);
    assert_non_null(l->pd);
    assert_non_null(l->cq);
    l->mr = F->reg_mr(l->pd, l->buf, sizeof(l->buf), IBV_ACCESS_LOCAL_WRITE);
    assert_non_null(l->mr);
    qp_init_attr(&qa, l->cq);
    assert_int_equal(F->create_qp(l->id, l->pd, &qa), 0);
}

static void lone_close(struct lone *l)
{
    struct ibv_wc wc[16];
    while (F->poll_cq(l->cq, 16, wc) > 0)
        ;
    F->destroy_qp(l->id);
    assert_int_equal(F->destroy_id(l->id), 0);
    assert_int_equal(F->dereg_mr(l->mr), 0);
    assert_int_equal(F->destroy_cq(l->cq), 0);
    assert_int_equal(F->dealloc_pd(l->pd), 0);
    F->destroy_event_channel(l->ch);
}

static int post_send(struct lone *l, uint64_t id)
{
    struct ibv_sge sge = {
        .addr = (uintptr_t)l->buf, .length = 8, .lkey = l->mr->lkey};
    struct ibv_send_wr wr = {.wr_id = id,
                             .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED},
                       *bad = NULL;
    int rc = F->post_send(l->id->qp, &wr, &bad);
    if (rc)
        assert_ptr_equal(bad, &wr);
    return rc;
}

static int post_recv(struct lone *l, uint64_t id)
{
    struct ibv_sge sge = {
        .addr = (uintptr_t)l->buf, .length = 8, .lkey = l->mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = 1},
                       *bad = NULL;
    return F->post_recv(l->id->qp, &wr, &bad);
}

static void expect_flush(struct lone *l, uint64_t id)
{
    struct ibv_wc wc;
    assert_int_equal(F->poll_cq(l->cq, 1, &wc), 1);
    assert_int_equal(wc.wr_id, id);
    assert_int_equal(wc.status, IBV_WC_WR_FLUSH_ERR);
}

/* Attributes valid for every transition of the walk. */
static struct ibv_qp_attr good_attr(enum ibv_qp_state to)
{
    struct ibv_qp_attr a = {
        .qp_state = to,
        .cur_qp_state = IBV_QPS_RESET,
        .pkey_index = 0,
        .port_num = 1,
        .qp_access_flags = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE,
        .path_mtu = IBV_MTU_1024,
        .dest_qp_num = 0x1234,
        .rq_psn = 0x100,
        .sq_psn = 0x200,
        .max_dest_rd_atomic = 4,
        .max_rd_atomic = 4,
        .min_rnr_timer = 12,
        .timeout = 14,
        .retry_cnt = 7,
        .rnr_retry = 7,
        .ah_attr = {.port_num = 1},
    };
    return a;
}

/* modify_qp to @p to with good attributes and @p mask besides the state. */
static int try_to(struct lone *l, enum ibv_qp_state to, int mask)
{
    struct ibv_qp_attr a = good_attr(to);
    return F->modify_qp(l->id->qp, &a, IBV_QP_STATE | mask);
}

/* Each required bit of @p req left out in turn, then one bit the
 * transition does not allow added: EINVAL, state unchanged. */
static void refuse_partial(struct lone *l, enum ibv_qp_state to, int req,
                           int foreign)
{
    enum ibv_qp_state before = l->id->qp->state;
    struct ibv_qp_attr a = good_attr(to);
    for (int bit = 1; bit < (1 << 30); bit <<= 1) {
        if (!(req & bit))
            continue;
        assert_int_equal(
            F->modify_qp(l->id->qp, &a, IBV_QP_STATE | (req & ~bit)), EINVAL);
        assert_int_equal(l->id->qp->state, before);
    }
    assert_int_equal(F->modify_qp(l->id->qp, &a, IBV_QP_STATE | req | foreign),
                     EINVAL);
    assert_int_equal(l->id->qp->state, before);
}

static void test_walk(void **state)
{
    struct lone l;
    struct ibv_qp_attr a;
    struct fake_qp *fq;

    lone_open(&l);
    fq = (struct fake_qp *)l.id->qp;
    /* rdma_create_qp() leaves the QP in INIT. */
    assert_int_equal(l.id->qp->state, IBV_QPS_INIT);

    /* INIT -> RESET, then nothing can be posted. */
    assert_int_equal(try_to(&l, IBV_QPS_RESET, 0), 0);
    assert_int_equal(l.id->qp->state, IBV_QPS_RESET);
    assert_int_equal(post_send(&l, 1), EINVAL);
    assert_int_equal(post_recv(&l, 1), EINVAL);

    /* Out of order from RESET. */
    assert_int_equal(try_to(&l, IBV_QPS_RTR, RTR_MASK), EINVAL);
    assert_int_equal(try_to(&l, IBV_QPS_RTS, RTS_MASK), EINVAL);
    assert_int_equal(l.id->qp->state, IBV_QPS_RESET);

    /* RESET -> INIT */
    refuse_partial(&l, IBV_QPS_INIT, INIT_MASK, IBV_QP_SQ_PSN);
    a = good_attr(IBV_QPS_INIT);
    a.port_num = 2; /* the device has one port */
    assert_int_equal(F->modify_qp(l.id->qp, &a, IBV_QP_STATE | INIT_MASK),
                     EINVAL);
    assert_int_equal(try_to(&l, IBV_QPS_INIT, INIT_MASK), 0);
    assert_int_equal(l.id->qp->state, IBV_QPS_INIT);
    assert_int_equal(fq->attr.access, a.qp_access_flags);
    assert_int_equal(post_send(&l, 2), EINVAL);
    assert_int_equal(post_recv(&l, 2), 0); /* receives may be posted */
    assert_int_equal(try_to(&l, IBV_QPS_RTS, RTS_MASK), EINVAL);

    /* INIT -> RTR */
    refuse_partial(&l, IBV_QPS_RTR, RTR_MASK, IBV_QP_SQ_PSN);
    a = good_attr(IBV_QPS_RTR);
    a.max_dest_rd_atomic = FAKE_MAX_RD_ATOM + 1;
    assert_int_equal(F->modify_qp(l.id->qp, &a, IBV_QP_STATE | RTR_MASK),
                     EINVAL);
    a = good_attr(IBV_QPS_RTR);
    a.path_mtu = (enum ibv_mtu)6;
    assert_int_equal(F->modify_qp(l.id->qp, &a, IBV_QP_STATE | RTR_MASK),
                     EINVAL);
    assert_int_equal(try_to(&l, IBV_QPS_RTR, RTR_MASK), 0);
    assert_int_equal(l.id->qp->state, IBV_QPS_RTR);
    assert_int_equal(fq->remote_qpn, 0x1234);
    assert_int_equal(fq->expected_psn, 0x100);
    assert_int_equal(post_send(&l, 3), EINVAL);
    assert_int_equal(F->modify_qp(l.id->qp, &a, IBV_QP_STATE | RTR_MASK),
                     EINVAL); /* RTR -> RTR is no transition */

    /* RTR -> RTS */
    refuse_partial(&l, IBV_QPS_RTS, RTS_MASK, IBV_QP_DEST_QPN);
    a = good_attr(IBV_QPS_RTS);
    a.retry_cnt = 8;
    assert_int_equal(F->modify_qp(l.id->qp, &a, IBV_QP_STATE | RTS_MASK),
                     EINVAL);
    assert_int_equal(try_to(&l, IBV_QPS_RTS, RTS_MASK), 0);
    assert_int_equal(l.id->qp->state, IBV_QPS_RTS);
    assert_int_equal(fq->next_psn, 0x200);

    /* In RTS: a send is taken (it stays outstanding: nobody is
     * connected); RTS -> RTS changes only what it may. */
    assert_int_equal(post_send(&l, 4), 0);
    assert_int_equal(try_to(&l, IBV_QPS_RTS, IBV_QP_TIMEOUT), EINVAL);
    a = good_attr(IBV_QPS_RTS);
    a.min_rnr_timer = 20;
    assert_int_equal(
        F->modify_qp(l.id->qp, &a, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER), 0);
    assert_int_equal(fq->attr.min_rnr_timer, 20);
    /* Without IBV_QP_STATE: the current state's own transition. */
    a.min_rnr_timer = 21;
    assert_int_equal(F->modify_qp(l.id->qp, &a, IBV_QP_MIN_RNR_TIMER), 0);
    assert_int_equal(fq->attr.min_rnr_timer, 21);
    a.cur_qp_state = IBV_QPS_RTR; /* wrong */
    assert_int_equal(
        F->modify_qp(l.id->qp, &a, IBV_QP_STATE | IBV_QP_CUR_STATE), EINVAL);
    assert_int_equal(try_to(&l, IBV_QPS_INIT, INIT_MASK), EINVAL);
    assert_int_equal(l.id->qp->state, IBV_QPS_RTS);

    /* -> ERR takes no other attribute; it flushes the receive posted in
     * INIT and the send posted in RTS. */
    assert_int_equal(try_to(&l, IBV_QPS_ERR, IBV_QP_TIMEOUT), EINVAL);
    assert_int_equal(try_to(&l, IBV_QPS_ERR, 0), 0);
    assert_int_equal(l.id->qp->state, IBV_QPS_ERR);
    expect_flush(&l, 4);
    expect_flush(&l, 2);
    /* In ERR, new work is taken and flushed. */
    assert_int_equal(post_send(&l, 5), 0);
    expect_flush(&l, 5);
    assert_int_equal(post_recv(&l, 6), 0);
    expect_flush(&l, 6);
    assert_int_equal(try_to(&l, IBV_QPS_RTS, RTS_MASK), EINVAL);
    assert_int_equal(try_to(&l, IBV_QPS_INIT, INIT_MASK), EINVAL);

    /* ERR -> RESET -> ERR -> RESET -> INIT: the QP can be used again. */
    assert_int_equal(try_to(&l, IBV_QPS_RESET, 0), 0);
    assert_int_equal(try_to(&l, IBV_QPS_ERR, 0), 0);
    assert_int_equal(try_to(&l, IBV_QPS_RESET, 0), 0);
    assert_int_equal(try_to(&l, IBV_QPS_INIT, INIT_MASK), 0);
    assert_int_equal(l.id->qp->state, IBV_QPS_INIT);
    lone_close(&l);
}

/* RESET empties the queues without a completion: a receive posted
 * before it is not flushed by a later move to ERR. */
static void test_reset_discards(void **state)
{
    struct lone l;
    struct ibv_wc wc;

    lone_open(&l);
    assert_int_equal(post_recv(&l, 7), 0);
    assert_int_equal(try_to(&l, IBV_QPS_RESET, 0), 0);
    assert_int_equal(try_to(&l, IBV_QPS_ERR, 0), 0);
    assert_int_equal(F->poll_cq(l.cq, 1, &wc), 0);
    lone_close(&l);
}

/* rdma_cm connects through the same state machine: after ESTABLISHED both
 * QPs are RTS, each one's destination is the other, and each expects the
 * PSN the other starts sending at (random, as rdma_cm's). */
static void test_cm_drives_rts(void **state)
{
    struct rdma_event_channel *ch = F->create_event_channel();
    struct rdma_cm_id *lid, *a, *b;
    struct sockaddr_in l = {.sin_family = AF_INET};
    struct ibv_qp_init_attr qa;
    struct rdma_conn_param cp = {.rnr_retry_count = 7,
                                 .retry_count = 7,
                                 .responder_resources = 4,
                                 .initiator_depth = 4};
    struct rdma_conn_param bad = cp;
    struct rdma_cm_event *ev;

    assert_non_null(ch);
    nonblock(ch->fd);
    inet_pton(AF_INET, "127.0.0.1", &l.sin_addr);
    assert_int_equal(F->create_id(ch, &lid, NULL, RDMA_PS_TCP), 0);
    assert_int_equal(F->bind_addr(lid, (struct sockaddr *)&l), 0);
    assert_int_equal(F->listen(lid, 4), 0);
    struct ibv_pd *pd = F->alloc_pd(lid->verbs);
    struct ibv_cq *cq = F->create_cq(lid->verbs, 64, NULL, NULL, 0);
    assert_non_null(pd);
    assert_non_null(cq);
    assert_int_equal(F->create_id(ch, &a, NULL, RDMA_PS_TCP), 0);
    assert_int_equal(F->resolve_addr(a, NULL, &lid->route.addr.src_addr, 1000),
                     0);
    F->ack_cm_event(wait_ev(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
    assert_int_equal(F->resolve_route(a, 1000), 0);
    F->ack_cm_event(wait_ev(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
    qp_init_attr(&qa, cq);
    assert_int_equal(F->create_qp(a, pd, &qa), 0);
    assert_int_equal(a->qp->state, IBV_QPS_INIT);
    /* More outstanding READs than the device has: refused by connect. */
    bad.initiator_depth = FAKE_MAX_RD_ATOM + 1;
    assert_int_equal(F->connect(a, &bad), -1);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(F->connect(a, &cp), 0);
    ev = wait_ev(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
    b = ev->id;
    F->ack_cm_event(ev);
    qp_init_attr(&qa, cq);
    assert_int_equal(F->create_qp(b, pd, &qa), 0);
    assert_int_equal(b->qp->state, IBV_QPS_INIT);
    assert_int_equal(F->accept(b, &bad), -1);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(b->qp->state, IBV_QPS_INIT);
    assert_int_equal(F->accept(b, &cp), 0);
    /* The passive side is RTS once it accepted (librdmacm's order). */
    assert_int_equal(b->qp->state, IBV_QPS_RTS);
    F->ack_cm_event(wait_ev(ch, RDMA_CM_EVENT_ESTABLISHED));
    F->ack_cm_event(wait_ev(ch, RDMA_CM_EVENT_ESTABLISHED));
    assert_int_equal(a->qp->state, IBV_QPS_RTS);

    struct fake_qp *fa = (struct fake_qp *)a->qp, *fb = (struct fake_qp *)b->qp;
    assert_int_equal(fa->remote_qpn, b->qp->qp_num);
    assert_int_equal(fb->remote_qpn, a->qp->qp_num);
    assert_int_equal(fa->expected_psn, fb->next_psn);
    assert_int_equal(fb->expected_psn, fa->next_psn);
    assert_int_equal(fa->attr.max_rd_atomic, 4);
    assert_int_equal(fb->attr.max_dest_rd_atomic, 4);
    assert_int_equal(fa->rnr_retry, 7);

    F->destroy_qp(a);
    F->destroy_qp(b);
    assert_int_equal(F->destroy_id(a), 0);
    assert_int_equal(F->destroy_id(b), 0);
    assert_int_equal(F->destroy_id(lid), 0);
    assert_int_equal(F->destroy_cq(cq), 0);
    assert_int_equal(F->dealloc_pd(pd), 0);
    F->destroy_event_channel(ch);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_walk),
        cmocka_unit_test(test_reset_discards),
        cmocka_unit_test(test_cm_drives_rts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
