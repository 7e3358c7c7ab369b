/*
 * The fake verbs device on its own, driven through its ops table: it must
 * reject what hardware rejects (bad lkey/rkey, out-of-bounds, missing
 * access flags, posting on a QP in error, RNR when no receive is posted),
 * complete in order, copy data before completing, and work between two
 * processes.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "vb_fake_test.h"

static const struct vb_ops *F = &vb_fake_ops;

/* Two connected RC QPs in one process: A (active) and B (passive). */
struct pair {
    struct rdma_event_channel *ch;
    struct rdma_cm_id *listen;
    struct rdma_cm_id *a;
    struct rdma_cm_id *b;
    struct ibv_pd *pd;
    struct ibv_cq *cqa;
    struct ibv_cq *cqb;
    struct ibv_srq *srq;
};

static struct sockaddr_in sin_of(const char *ip, uint16_t port)
{
    struct sockaddr_in s = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, ip, &s.sin_addr);
    return s;
}

static void qp_attr(struct ibv_qp_init_attr *qa, struct ibv_cq *cq,
                    struct ibv_srq *srq)
{
    memset(qa, 0, sizeof(*qa));
    qa->send_cq = cq;
    qa->recv_cq = cq;
    qa->srq = srq;
    qa->qp_type = IBV_QPT_RC;
    qa->cap.max_send_wr = 64;
    qa->cap.max_recv_wr = srq ? 0 : 64;
    qa->cap.max_send_sge = 4;
    qa->cap.max_recv_sge = srq ? 0 : 4;
    qa->cap.max_inline_data = 64;
}

static void pair_open(struct pair *p, uint8_t rnr_retry, bool srq)
{
    struct sockaddr_in l = sin_of("127.0.0.1", 0);
    struct ibv_qp_init_attr qa;
    struct rdma_conn_param cp = {.rnr_retry_count = rnr_retry,
                                 .private_data = "hello",
                                 .private_data_len = 6};
    struct rdma_cm_event *ev;

    memset(p, 0, sizeof(*p));
    p->ch = F->create_event_channel();
    assert_non_null(p->ch);
    nonblock(p->ch->fd);
    assert_int_equal(F->create_id(p->ch, &p->listen, NULL, RDMA_PS_TCP), 0);
    assert_int_equal(F->bind_addr(p->listen, (struct sockaddr *)&l), 0);
    assert_non_null(p->listen->verbs);
    assert_string_equal(p->listen->verbs->device->name, "fake0");
    assert_int_equal(F->listen(p->listen, 8), 0);
    p->pd = F->alloc_pd(p->listen->verbs);
    p->cqa = F->create_cq(p->listen->verbs, 256, NULL, NULL, 0);
    p->cqb = F->create_cq(p->listen->verbs, 256, NULL, NULL, 0);
    assert_non_null(p->pd);
    assert_non_null(p->cqa);
    assert_non_null(p->cqb);
    if (srq) {
        struct ibv_srq_init_attr sa = {.attr = {.max_wr = 64, .max_sge = 2}};
        p->srq = F->create_srq(p->pd, &sa);
        assert_non_null(p->srq);
    }
    assert_int_equal(F->create_id(p->ch, &p->a, NULL, RDMA_PS_TCP), 0);
    assert_int_equal(
        F->resolve_addr(p->a, NULL, &p->listen->route.addr.src_addr, 1000), 0);
    F->ack_cm_event(wait_ev(p->ch, RDMA_CM_EVENT_ADDR_RESOLVED));
    assert_int_equal(F->resolve_route(p->a, 1000), 0);
    F->ack_cm_event(wait_ev(p->ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
    qp_attr(&qa, p->cqa, NULL);
    assert_int_equal(F->create_qp(p->a, p->pd, &qa), 0);
    assert_int_equal(F->connect(p->a, &cp), 0);
    ev = wait_ev(p->ch, RDMA_CM_EVENT_CONNECT_REQUEST);
    assert_ptr_equal(ev->listen_id, p->listen);
    assert_int_equal(ev->param.conn.private_data_len, 6);
    assert_string_equal(ev->param.conn.private_data, "hello");
    p->b = ev->id;
    F->ack_cm_event(ev);
    qp_attr(&qa, p->cqb, p->srq);
    assert_int_equal(F->create_qp(p->b, p->pd, &qa), 0);
    assert_int_equal(F->accept(p->b, &cp), 0);
    F->ack_cm_event(wait_ev(p->ch, RDMA_CM_EVENT_ESTABLISHED));
    F->ack_cm_event(wait_ev(p->ch, RDMA_CM_EVENT_ESTABLISHED));
    assert_int_equal(p->a->qp->state, IBV_QPS_RTS);
    assert_int_equal(p->b->qp->state, IBV_QPS_RTS);
}

static void pair_close(struct pair *p)
{
    struct ibv_wc wc[16];
    /* Drain so the CQs hold nothing for destroyed QPs. */
    while (F->poll_cq(p->cqa, 16, wc) > 0)
        ;
    while (F->poll_cq(p->cqb, 16, wc) > 0)
        ;
    F->destroy_qp(p->a);
    F->destroy_qp(p->b);
    assert_int_equal(F->destroy_id(p->a), 0);
    assert_int_equal(F->destroy_id(p->b), 0);
    assert_int_equal(F->destroy_id(p->listen), 0);
    if (p->srq)
        assert_int_equal(F->destroy_srq(p->srq), 0);
    assert_int_equal(F->destroy_cq(p->cqa), 0);
    assert_int_equal(F->destroy_cq(p->cqb), 0);
    assert_int_equal(F->dealloc_pd(p->pd), 0);
    F->destroy_event_channel(p->ch);
}

/* Poll @p cq for one completion, pumping the other side too. */
static void poll1(struct pair *p, struct ibv_cq *cq, struct ibv_wc *wc)
{
    uint64_t end = now_ms() + 5000;
    while (now_ms() < end) {
        F->poll_cq(cq == p->cqa ? p->cqb : p->cqa, 0, NULL);
        int n = F->poll_cq(cq, 1, wc);
        assert_true(n >= 0);
        if (n == 1)
            return;
    }
    fail_msg("no completion within 5 s");
}

static int post_send1(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t id,
                      void *buf, uint32_t len, uint32_t lkey, uint64_t raddr,
                      uint32_t rkey, unsigned flags)
{
    struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = len, .lkey = lkey};
    struct ibv_send_wr wr = {.wr_id = id,
                             .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = op,
                             .send_flags = IBV_SEND_SIGNALED | flags},
                       *bad;
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    return F->post_send(qp, &wr, &bad);
}

static int post_recv1(struct pair *p, struct ibv_qp *qp, uint64_t id, void *buf,
                      uint32_t len, uint32_t lkey)
{
    struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = len, .lkey = lkey};
    struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = 1}, *bad;
    if (p && p->srq && qp == p->b->qp)
        return F->post_srq_recv(p->srq, &wr, &bad);
    return F->post_recv(qp, &wr, &bad);
}

/* ---------------------------------------------------------------------- */

static void test_mr_checks(void **state)
{
    struct pair p;
    static char buf[8192];
    long pg = sysconf(_SC_PAGESIZE);
    struct vb_fake_stats st0, st1;

    pair_open(&p, 7, false);
    fake_stats_get(&st0);
    /* Remote write needs local write. */
    errno = 0;
    assert_null(F->reg_mr(p.pd, buf, sizeof(buf), IBV_ACCESS_REMOTE_WRITE));
    assert_int_equal(errno, EINVAL);
    assert_null(F->reg_mr(p.pd, buf, 0, IBV_ACCESS_LOCAL_WRITE));
    assert_null(F->reg_mr(p.pd, buf, sizeof(buf), 0x10000));
    /* Unmapped memory cannot be pinned. */
    char *m = mmap(NULL, (size_t)pg * 2, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(m != MAP_FAILED);
    munmap(m, (size_t)pg * 2);
    errno = 0;
    assert_null(F->reg_mr(p.pd, m, (size_t)pg, IBV_ACCESS_LOCAL_WRITE));
    assert_int_equal(errno, EFAULT);
    /* Good registrations get distinct keys; a PD with MRs cannot go. */
    struct ibv_mr *a = F->reg_mr(p.pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
    struct ibv_mr *b =
        F->reg_mr(p.pd, buf + 4096, 4096,
                  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_not_equal(a->lkey, b->lkey);
    assert_int_not_equal(a->rkey, b->rkey);
    assert_int_not_equal(a->lkey, a->rkey);
    assert_int_equal(F->dealloc_pd(p.pd), EBUSY);
    fake_stats_get(&st1);
    assert_int_equal(st1.mrs_live - st0.mrs_live, 2);
    assert_int_equal(F->dereg_mr(a), 0);
    assert_int_equal(F->dereg_mr(b), 0);
    pair_close(&p);
}

static void test_send_recv_order(void **state)
{
    struct pair p;
    static char out[3][100], in[3][128];
    struct ibv_wc wc;

    pair_open(&p, 7, true);
    struct ibv_mr *mo = F->reg_mr(p.pd, out, sizeof(out), 0);
    struct ibv_mr *mi = F->reg_mr(p.pd, in, sizeof(in), IBV_ACCESS_LOCAL_WRITE);
    for (int i = 0; i < 3; i++) {
        memset(out[i], 'a' + i, sizeof(out[i]));
        assert_int_equal(post_recv1(&p, p.b->qp, 100 + i, in[i], 128, mi->lkey),
                         0);
    }
    for (int i = 0; i < 3; i++)
        assert_int_equal(post_send1(p.a->qp, IBV_WR_SEND, 10 + i, out[i],
                                    (uint32_t)(50 + i), mo->lkey, 0, 0, 0),
                         0);
    for (int i = 0; i < 3; i++) {
        poll1(&p, p.cqb, &wc);
        assert_int_equal(wc.status, IBV_WC_SUCCESS);
        assert_int_equal(wc.opcode, IBV_WC_RECV);
        assert_int_equal(wc.wr_id, 100 + i);
        assert_int_equal(wc.byte_len, 50 + i);
        assert_int_equal(wc.src_qp, p.a->qp->qp_num);
        assert_int_equal(in[i][0], 'a' + i);
    }
    for (int i = 0; i < 3; i++) {
        poll1(&p, p.cqa, &wc);
        assert_int_equal(wc.status, IBV_WC_SUCCESS);
        assert_int_equal(wc.opcode, IBV_WC_SEND);
        assert_int_equal(wc.wr_id, 10 + i);
    }
    /* Unsignalled inline send: no send completion, data still arrives. */
    struct ibv_sge sge = {.addr = (uintptr_t) "inline!", .length = 8};
    struct ibv_send_wr wr = {.wr_id = 99,
                             .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_INLINE},
                       *bad;
    assert_int_equal(post_recv1(&p, p.b->qp, 200, in[0], 128, mi->lkey), 0);
    assert_int_equal(F->post_send(p.a->qp, &wr, &bad), 0);
    poll1(&p, p.cqb, &wc);
    assert_int_equal(wc.wr_id, 200);
    assert_string_equal(in[0], "inline!");
    assert_int_equal(F->poll_cq(p.cqa, 1, &wc), 0);
    /* Inline larger than max_inline_data is refused at post time. */
    static char big[512];
    sge.addr = (uintptr_t)big;
    sge.length = sizeof(big);
    assert_int_equal(F->post_send(p.a->qp, &wr, &bad), EINVAL);
    assert_ptr_equal(bad, &wr);
    F->dereg_mr(mo);
    F->dereg_mr(mi);
    pair_close(&p);
}

static void test_rnr_exhausted_then_qp_error(void **state)
{
    struct pair p;
    static char out[64];
    struct ibv_wc wc;
    struct vb_fake_stats s0, s1;

    pair_open(&p, 2, false); /* retry RNR twice */
    struct ibv_mr *mo = F->reg_mr(p.pd, out, sizeof(out), 0);
    fake_stats_get(&s0);
    assert_int_equal(
        post_send1(p.a->qp, IBV_WR_SEND, 1, out, 8, mo->lkey, 0, 0, 0), 0);
    assert_int_equal(
        post_send1(p.a->qp, IBV_WR_SEND, 2, out, 8, mo->lkey, 0, 0, 0), 0);
    poll1(&p, p.cqa, &wc);
    assert_int_equal(wc.wr_id, 1);
    assert_int_equal(wc.status, IBV_WC_RNR_RETRY_EXC_ERR);
    poll1(&p, p.cqa, &wc);
    assert_int_equal(wc.wr_id, 2);
    assert_int_equal(wc.status, IBV_WC_WR_FLUSH_ERR);
    fake_stats_get(&s1);
    assert_int_equal(s1.rnr_naks - s0.rnr_naks, 3);
    assert_int_equal(s1.rnr_retry_exc - s0.rnr_retry_exc, 1);
    assert_int_equal(p.a->qp->state, IBV_QPS_ERR);
    /* A QP in error takes new work and flushes it (IBA 10.8.3.1). */
    assert_int_equal(
        post_send1(p.a->qp, IBV_WR_SEND, 3, out, 8, mo->lkey, 0, 0, 0), 0);
    poll1(&p, p.cqa, &wc);
    assert_int_equal(wc.wr_id, 3);
    assert_int_equal(wc.status, IBV_WC_WR_FLUSH_ERR);
    F->dereg_mr(mo);
    pair_close(&p);
}

static void test_rnr_recovers(void **state)
{
    struct pair p;
    static char out[64], in[64];
    struct ibv_wc wc;
    struct vb_fake_stats s0, s1;

    pair_open(&p, 7, false); /* 7 = retry forever */
    struct ibv_mr *mo = F->reg_mr(p.pd, out, sizeof(out), 0);
    struct ibv_mr *mi = F->reg_mr(p.pd, in, sizeof(in), IBV_ACCESS_LOCAL_WRITE);
    fake_stats_get(&s0);
    strcpy(out, "late receive");
    assert_int_equal(
        post_send1(p.a->qp, IBV_WR_SEND, 1, out, 13, mo->lkey, 0, 0, 0), 0);
    /* Retried (RNR NAKs keep coming) but never completed meanwhile. */
    uint64_t end = now_ms() + 5000;
    do {
        F->poll_cq(p.cqb, 0, NULL);
        assert_int_equal(F->poll_cq(p.cqa, 1, &wc), 0);
        fake_stats_get(&s1);
    } while (s1.rnr_naks < s0.rnr_naks + 3 && now_ms() < end);
    assert_true(s1.rnr_naks >= s0.rnr_naks + 3);
    assert_int_equal(post_recv1(&p, p.b->qp, 5, in, sizeof(in), mi->lkey), 0);
    poll1(&p, p.cqa, &wc);
    assert_int_equal(wc.status, IBV_WC_SUCCESS);
    poll1(&p, p.cqb, &wc);
    assert_int_equal(wc.status, IBV_WC_SUCCESS);
    assert_string_equal(in, "late receive");
    F->dereg_mr(mo);
    F->dereg_mr(mi);
    pair_close(&p);
}

/* WRITE/READ checks on the responder: key from another PD, out of
 * bounds, missing remote access; each moves both QPs to error. */
static void rma_violation(uint64_t case_no)
{
    struct pair p;
    static char local[256], remote[256];
    struct ibv_wc wc;
    struct ibv_pd *pd2;
    struct vb_fake_stats s0, s1;

    pair_open(&p, 7, false);
    pd2 = F->alloc_pd(p.a->verbs);
    struct ibv_mr *ml =
        F->reg_mr(p.pd, local, sizeof(local), IBV_ACCESS_LOCAL_WRITE);
    struct ibv_mr *mr =
        F->reg_mr(p.pd, remote, sizeof(remote),
                  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    struct ibv_mr *other =
        F->reg_mr(pd2, remote, sizeof(remote),
                  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                      IBV_ACCESS_REMOTE_READ);
    fake_stats_get(&s0);
    int rc = 0;
    switch (case_no) {
    case 0: /* rkey of another PD */
        rc = post_send1(p.a->qp, IBV_WR_RDMA_WRITE, 1, local, 16, ml->lkey,
                        (uintptr_t)remote, other->rkey, 0);
        break;
    case 1: /* one byte past the end */
        rc = post_send1(p.a->qp, IBV_WR_RDMA_WRITE, 1, local, 16, ml->lkey,
                        (uintptr_t)remote + 241, mr->rkey, 0);
        break;
    case 2: /* READ without REMOTE_READ */
        rc = post_send1(p.a->qp, IBV_WR_RDMA_READ, 1, local, 16, ml->lkey,
                        (uintptr_t)remote, mr->rkey, 0);
        break;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(post_send1(p.a->qp, IBV_WR_RDMA_WRITE, 2, local, 16,
                                ml->lkey, (uintptr_t)remote, mr->rkey, 0),
                     0);
    poll1(&p, p.cqa, &wc);
    assert_int_equal(wc.wr_id, 1);
    assert_int_equal(wc.status, IBV_WC_REM_ACCESS_ERR);
    poll1(&p, p.cqa, &wc);
    assert_int_equal(wc.wr_id, 2);
    assert_int_equal(wc.status, IBV_WC_WR_FLUSH_ERR);
    assert_int_equal(p.a->qp->state, IBV_QPS_ERR);
    assert_int_equal(p.b->qp->state, IBV_QPS_ERR);
    fake_stats_get(&s1);
    assert_int_equal(s1.access_naks - s0.access_naks, 1);
    F->dereg_mr(ml);
    F->dereg_mr(mr);
    F->dereg_mr(other);
    assert_int_equal(F->dealloc_pd(pd2), 0);
    pair_close(&p);
}

static void test_rkey_other_pd(void **state)
{
    rma_violation(0);
}

static void test_write_out_of_bounds(void **state)
{
    rma_violation(1);
}

static void test_read_without_access(void **state)
{
    rma_violation(2);
}

static void test_local_errors(void **state)
{
    struct pair p;
    static char buf[256], small[16];
    struct ibv_wc wc;

    /* Bad lkey on a SEND: local protection error. */
    pair_open(&p, 7, false);
    assert_int_equal(
        post_send1(p.a->qp, IBV_WR_SEND, 1, buf, 8, 0xdead, 0, 0, 0), 0);
    poll1(&p, p.cqa, &wc);
    assert_int_equal(wc.status, IBV_WC_LOC_PROT_ERR);
    assert_int_equal(p.a->qp->state, IBV_QPS_ERR);
    pair_close(&p);

    /* READ into memory without local write: local protection error. */
    pair_open(&p, 7, false);
    struct ibv_mr *ro = F->reg_mr(p.pd, buf, 128, 0);
    struct ibv_mr *src = F->reg_mr(
        p.pd, buf + 128, 128, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
    assert_int_equal(post_send1(p.a->qp, IBV_WR_RDMA_READ, 1, buf, 64, ro->lkey,
                                (uintptr_t)buf + 128, src->rkey, 0),
                     0);
    poll1(&p, p.cqa, &wc);
    assert_int_equal(wc.status, IBV_WC_LOC_PROT_ERR);
    F->dereg_mr(ro);
    F->dereg_mr(src);
    pair_close(&p);

    /* A message longer than the receive buffer. */
    pair_open(&p, 7, false);
    struct ibv_mr *mb = F->reg_mr(p.pd, buf, sizeof(buf), 0);
    struct ibv_mr *ms =
        F->reg_mr(p.pd, small, sizeof(small), IBV_ACCESS_LOCAL_WRITE);
    assert_int_equal(post_recv1(&p, p.b->qp, 7, small, sizeof(small), ms->lkey),
                     0);
    assert_int_equal(
        post_send1(p.a->qp, IBV_WR_SEND, 1, buf, 100, mb->lkey, 0, 0, 0), 0);
    poll1(&p, p.cqb, &wc);
    assert_int_equal(wc.wr_id, 7);
    assert_int_equal(wc.status, IBV_WC_LOC_LEN_ERR);
    poll1(&p, p.cqa, &wc);
    assert_int_equal(wc.status, IBV_WC_REM_INV_REQ_ERR);
    F->dereg_mr(mb);
    F->dereg_mr(ms);
    pair_close(&p);
}

static void test_read_write_data(void **state)
{
    struct pair p;
    static char a[4096], b[4096];
    struct ibv_wc wc;

    pair_open(&p, 7, false);
    struct ibv_mr *ma = F->reg_mr(p.pd, a, sizeof(a), IBV_ACCESS_LOCAL_WRITE);
    struct ibv_mr *mb =
        F->reg_mr(p.pd, b, sizeof(b),
                  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                      IBV_ACCESS_REMOTE_READ);
    for (int i = 0; i < 4096; i++)
        b[i] = (char)(i * 7);
    memset(a, 0, sizeof(a));
    assert_int_equal(post_send1(p.a->qp, IBV_WR_RDMA_READ, 1, a + 100, 1000,
                                ma->lkey, (uintptr_t)b + 200, mb->rkey, 0),
                     0);
    /* One-sided: done without the owner of b running (its CQ, the only
     * way into the fake for it, is never polled here). */
    assert_int_equal(F->poll_cq(p.cqa, 1, &wc), 1);
    assert_int_equal(wc.status, IBV_WC_SUCCESS);
    assert_int_equal(wc.opcode, IBV_WC_RDMA_READ);
    assert_int_equal(wc.byte_len, 1000);
    assert_memory_equal(a + 100, b + 200, 1000);
    memset(a, 0x5a, sizeof(a));
    assert_int_equal(post_send1(p.a->qp, IBV_WR_RDMA_WRITE, 2, a, 4096,
                                ma->lkey, (uintptr_t)b, mb->rkey, 0),
                     0);
    assert_int_equal(F->poll_cq(p.cqa, 1, &wc), 1);
    assert_int_equal(wc.status, IBV_WC_SUCCESS);
    assert_int_equal(wc.opcode, IBV_WC_RDMA_WRITE);
    assert_memory_equal(a, b, 4096);
    F->dereg_mr(ma);
    F->dereg_mr(mb);
    pair_close(&p);
}

/* Active side up to rdma_connect against @p dst; returns the id. */
static struct rdma_cm_id *connect_to(struct rdma_event_channel *ch,
                                     struct sockaddr_in *dst, struct ibv_pd *pd,
                                     struct ibv_cq *cq)
{
    struct rdma_cm_id *a;
    struct ibv_qp_init_attr qa;
    struct rdma_conn_param cp = {.rnr_retry_count = 7};
    assert_int_equal(F->create_id(ch, &a, NULL, RDMA_PS_TCP), 0);
    assert_int_equal(F->resolve_addr(a, NULL, (struct sockaddr *)dst, 1000), 0);
    F->ack_cm_event(wait_ev(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
    assert_int_equal(F->resolve_route(a, 1000), 0);
    F->ack_cm_event(wait_ev(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
    qp_attr(&qa, cq, NULL);
    assert_int_equal(F->create_qp(a, pd, &qa), 0);
    assert_int_equal(F->connect(a, &cp), 0);
    return a;
}

static void test_cm_reject_refused(void **state)
{
    struct rdma_event_channel *ch = F->create_event_channel();
    struct rdma_cm_id *l, *a;
    struct sockaddr_in any = sin_of("127.0.0.1", 0);
    struct rdma_cm_event *ev;
    int n;

    nonblock(ch->fd);
    struct ibv_device **devs = F->get_device_list(&n);
    assert_int_equal(n, 4);
    struct ibv_context *ctx = F->open_device(devs[0]);
    F->free_device_list(devs);
    struct ibv_pd *pd = F->alloc_pd(ctx);
    struct ibv_cq *cq = F->create_cq(ctx, 64, NULL, NULL, 0);

    /* An address of another fake device is refused by name. */
    struct sockaddr_in bad = sin_of("10.1.2.3", 0);
    assert_int_equal(F->create_id(ch, &l, NULL, RDMA_PS_TCP), 0);
    errno = 0;
    assert_int_equal(F->bind_addr(l, (struct sockaddr *)&bad), -1);
    assert_int_equal(errno, EADDRNOTAVAIL);
    struct sockaddr_in two = sin_of("127.0.0.2", 0);
    assert_int_equal(F->bind_addr(l, (struct sockaddr *)&two), 0);
    assert_string_equal(l->verbs->device->name, "fake1");
    assert_int_equal(F->destroy_id(l), 0);

    /* Nobody listens there any more: rejected, invalid service ID. */
    assert_int_equal(F->create_id(ch, &l, NULL, RDMA_PS_TCP), 0);
    assert_int_equal(F->bind_addr(l, (struct sockaddr *)&any), 0);
    struct sockaddr_in dead = l->route.addr.src_sin;
    assert_int_equal(F->destroy_id(l), 0);
    a = connect_to(ch, &dead, pd, cq);
    ev = wait_ev(ch, RDMA_CM_EVENT_REJECTED);
    assert_int_equal(ev->status, 8);
    F->ack_cm_event(ev);
    F->destroy_qp(a);
    assert_int_equal(F->destroy_id(a), 0);

    /* A listener that says no, with a reason. */
    assert_int_equal(F->create_id(ch, &l, NULL, RDMA_PS_TCP), 0);
    assert_int_equal(F->bind_addr(l, (struct sockaddr *)&any), 0);
    assert_int_equal(F->listen(l, 4), 0);
    struct sockaddr_in live = l->route.addr.src_sin;
    a = connect_to(ch, &live, pd, cq);
    ev = wait_ev(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
    struct rdma_cm_id *pas = ev->id;
    F->ack_cm_event(ev);
    assert_int_equal(F->reject(pas, "nope", 5), 0);
    ev = wait_ev(ch, RDMA_CM_EVENT_REJECTED);
    assert_int_equal(ev->status, 28);
    assert_int_equal(ev->param.conn.private_data_len, 5);
    assert_string_equal(ev->param.conn.private_data, "nope");
    F->ack_cm_event(ev);
    F->destroy_qp(a);
    assert_int_equal(F->destroy_id(a), 0);
    assert_int_equal(F->destroy_id(pas), 0);
    assert_int_equal(F->destroy_id(l), 0);
    assert_int_equal(F->destroy_cq(cq), 0);
    assert_int_equal(F->dealloc_pd(pd), 0);
    F->close_device(ctx);
    F->destroy_event_channel(ch);
}

/* The child owns the memory; the parent READs and WRITEs it, then kills
 * the child and must see its next operation fail and a disconnect. */
struct xinfo {
    struct sockaddr_in addr;
    uint64_t raddr;
    uint32_t rkey;
};

#define XLEN 65536

static void child_serve(int wfd, int rfd)
{
    static unsigned char mem[XLEN];
    struct rdma_event_channel *ch = F->create_event_channel();
    struct rdma_cm_id *l, *c = NULL;
    struct sockaddr_in any = sin_of("127.0.0.1", 0);
    struct rdma_cm_event *ev;
    struct xinfo xi;
    struct ibv_qp_init_attr qa;
    struct rdma_conn_param cp = {.rnr_retry_count = 7};

    nonblock(ch->fd);
    for (int i = 0; i < XLEN; i++)
        mem[i] = (unsigned char)(i * 13 + 1);
    if (F->create_id(ch, &l, NULL, RDMA_PS_TCP) ||
        F->bind_addr(l, (struct sockaddr *)&any) || F->listen(l, 4))
        _exit(2);
    struct ibv_pd *pd = F->alloc_pd(l->verbs);
    struct ibv_cq *cq = F->create_cq(l->verbs, 64, NULL, NULL, 0);
    struct ibv_mr *mr =
        F->reg_mr(pd, mem, XLEN,
                  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
                      IBV_ACCESS_REMOTE_WRITE);
    if (!pd || !cq || !mr)
        _exit(3);
    memset(&xi, 0, sizeof(xi)); /* its padding goes down the pipe too */
    xi.addr = l->route.addr.src_sin;
    xi.raddr = (uintptr_t)mem;
    xi.rkey = mr->rkey;
    if (write(wfd, &xi, sizeof(xi)) != sizeof(xi))
        _exit(4);
    nonblock(rfd);
    for (;;) {
        char cmd;
        if (F->get_cm_event(ch, &ev) == 0) {
            if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
                c = ev->id;
                qp_attr(&qa, cq, NULL);
                if (F->create_qp(c, pd, &qa) || F->accept(c, &cp))
                    _exit(5);
            }
            F->ack_cm_event(ev);
        }
        F->poll_cq(cq, 0, NULL);
        /* The parent asks to check what it wrote. */
        if (read(rfd, &cmd, 1) == 1) {
            char ok = mem[0] == 0xee && mem[XLEN - 1] == 0xee ? 'y' : 'n';
            if (write(wfd, &ok, 1) != 1)
                _exit(6);
        }
        usleep(100);
    }
}

static void test_two_processes(void **state)
{
    int up[2], down[2];
    struct xinfo xi;
    static unsigned char buf[XLEN];
    struct ibv_wc wc;
    char ok;

    assert_int_equal(pipe(up), 0);
    assert_int_equal(pipe(down), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(up[0]);
        close(down[1]);
        child_serve(up[1], down[0]);
    }
    close(up[1]);
    close(down[0]);
    assert_int_equal(read(up[0], &xi, sizeof(xi)), sizeof(xi));

    struct rdma_event_channel *ch = F->create_event_channel();
    nonblock(ch->fd);
    int n;
    struct ibv_device **devs = F->get_device_list(&n);
    struct ibv_context *ctx = F->open_device(devs[0]);
    F->free_device_list(devs);
    struct ibv_pd *pd = F->alloc_pd(ctx);
    struct ibv_cq *cq = F->create_cq(ctx, 64, NULL, NULL, 0);
    struct ibv_mr *mr = F->reg_mr(pd, buf, XLEN, IBV_ACCESS_LOCAL_WRITE);
    struct rdma_cm_id *a = connect_to(ch, &xi.addr, pd, cq);
    F->ack_cm_event(wait_ev(ch, RDMA_CM_EVENT_ESTABLISHED));

    struct pair p = {.cqa = cq, .cqb = cq};
    assert_int_equal(post_send1(a->qp, IBV_WR_RDMA_READ, 1, buf, XLEN, mr->lkey,
                                xi.raddr, xi.rkey, 0),
                     0);
    poll1(&p, cq, &wc);
    assert_int_equal(wc.status, IBV_WC_SUCCESS);
    for (int i = 0; i < XLEN; i++)
        assert_int_equal(buf[i], (unsigned char)(i * 13 + 1));
    memset(buf, 0xee, XLEN);
    assert_int_equal(post_send1(a->qp, IBV_WR_RDMA_WRITE, 2, buf, XLEN,
                                mr->lkey, xi.raddr, xi.rkey, 0),
                     0);
    poll1(&p, cq, &wc);
    assert_int_equal(wc.status, IBV_WC_SUCCESS);
    assert_int_equal(write(down[1], "?", 1), 1);
    assert_int_equal(read(up[0], &ok, 1), 1);
    assert_int_equal(ok, 'y');

    /* The owner dies: the next READ fails and the CM says so, quickly. */
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    uint64_t t0 = now_ms();
    int rc = post_send1(a->qp, IBV_WR_RDMA_READ, 3, buf, 64, mr->lkey, xi.raddr,
                        xi.rkey, 0);
    if (rc == 0) {
        poll1(&p, cq, &wc);
        assert_int_not_equal(wc.status, IBV_WC_SUCCESS);
    }
    F->ack_cm_event(wait_ev(ch, RDMA_CM_EVENT_DISCONNECTED));
    assert_true(now_ms() - t0 < 2000);
    assert_int_equal(a->qp->state, IBV_QPS_ERR);
    F->destroy_qp(a);
    assert_int_equal(F->destroy_id(a), 0);
    F->dereg_mr(mr);
    assert_int_equal(F->destroy_cq(cq), 0);
    assert_int_equal(F->dealloc_pd(pd), 0);
    F->destroy_event_channel(ch);
    close(up[0]);
    close(down[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mr_checks),
        cmocka_unit_test(test_send_recv_order),
        cmocka_unit_test(test_rnr_exhausted_then_qp_error),
        cmocka_unit_test(test_rnr_recovers),
        cmocka_unit_test(test_rkey_other_pd),
        cmocka_unit_test(test_write_out_of_bounds),
        cmocka_unit_test(test_read_without_access),
        cmocka_unit_test(test_local_errors),
        cmocka_unit_test(test_read_write_data),
        cmocka_unit_test(test_cm_reject_refused),
        cmocka_unit_test(test_two_processes),
    };
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
