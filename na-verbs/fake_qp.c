/*
 * Fake verbs device: RC queue pairs.  The requester keeps every posted WR
 * until the responder acknowledges it (ACK, READ response) and generates
 * completions in order; the responder executes SEND/WRITE/READ against its
 * own memory with lkey/rkey, bounds and access checks, answers RNR NAK when
 * no receive is posted (the requester retries after a back-off, then fails
 * with IBV_WC_RNR_RETRY_EXC_ERR), and NAKs access violations, which moves
 * both QPs to the error state.  Like hardware, the requester goes back to
 * the NAKed PSN and the responder drops packets until it sees that PSN.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fake.h"

#define FAKE_RNR_DELAY_NS 2000000ull /* min_rnr_timer 0.64 ms * a bit */

static atomic_uint_fast32_t fake_qpn_next = 0x100;

static inline bool psn_le(uint32_t a, uint32_t b)
{
    return (int32_t)(a - b) <= 0;
}

static struct fake_swqe *sq_at(struct fake_qp *qp, int i)
{
    return &qp->sq[(qp->sq_head + i) % (int)qp->cap.max_send_wr];
}

static enum ibv_wc_opcode wc_opcode(enum ibv_wr_opcode op)
{
    switch (op) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
        return IBV_WC_RDMA_WRITE;
    case IBV_WR_RDMA_READ:
        return IBV_WC_RDMA_READ;
    default:
        return IBV_WC_SEND;
    }
}

static void sq_complete_head(struct fake_qp *qp, enum ibv_wc_status st,
                             uint32_t byte_len)
{
    struct fake_swqe *w = sq_at(qp, 0);
    if (st != IBV_WC_SUCCESS || (w->flags & IBV_SEND_SIGNALED) ||
        qp->sq_sig_all) {
        struct ibv_wc wc = {
            .wr_id = w->wr_id,
            .status = st,
            .opcode = wc_opcode(w->opcode),
            .byte_len = byte_len,
            .qp_num = qp->qp.qp_num,
            .src_qp = qp->remote_qpn,
        };
        fake_cq_push((struct fake_cq *)qp->qp.send_cq, &wc);
    }
    free(w->inl);
    w->inl = NULL;
    qp->sq_head = (qp->sq_head + 1) % (int)qp->cap.max_send_wr;
    qp->sq_count--;
    if (qp->sq_sent > 0)
        qp->sq_sent--;
}

/* Move to the error state: WR @p bad (index from the head, -1 for none)
 * completes with @p st, every other outstanding WR is flushed, in order. */
static void qp_error_at(struct fake_qp *qp, int bad, enum ibv_wc_status st)
{
    if (qp->qp.state != IBV_QPS_ERR) {
        qp->qp.state = IBV_QPS_ERR;
        atomic_fetch_add(&fake_cnt.qp_errors, 1);
    }
    for (int i = 0; qp->sq_count > 0; i++)
        sq_complete_head(qp, i == bad ? st : IBV_WC_WR_FLUSH_ERR, 0);
    while (qp->rq_count > 0) {
        struct fake_rwqe *r = &qp->rq[qp->rq_head];
        struct ibv_wc wc = {
            .wr_id = r->wr_id,
            .status = IBV_WC_WR_FLUSH_ERR,
            .qp_num = qp->qp.qp_num,
        };
        fake_cq_push((struct fake_cq *)qp->qp.recv_cq, &wc);
        qp->rq_head = (qp->rq_head + 1) % (int)qp->cap.max_recv_wr;
        qp->rq_count--;
    }
    qp->resend_at_ns = 0;
}

void fake_qp_set_error(struct fake_qp *qp, enum ibv_wc_status first)
{
    qp_error_at(qp, first == IBV_WC_WR_FLUSH_ERR ? -1 : 0, first);
}

static void send_ctl(struct fake_qp *qp, uint8_t type, uint32_t psn, uint32_t a)
{
    struct fake_hdr h = {.type = type, .psn = psn, .a = a};
    fake_id_frame(qp->id, &h);
}

static bool one_sided(enum ibv_wr_opcode op)
{
    return op == IBV_WR_RDMA_READ || op == IBV_WR_RDMA_WRITE;
}

/* Execute the one-sided WR at the head of the send queue (fake_rma.c).
 * It runs only once every WR before it has completed, so it is ordered
 * after them as the responder would order it; a refused access fails the
 * QP here and, through FP_ABORT, the target's.  False if the QP failed. */
static bool qp_exec_head(struct fake_qp *qp)
{
    struct fake_swqe *w = sq_at(qp, 0);
    enum ibv_wc_status st = fake_rma_exec(qp, w);
    if (st != IBV_WC_SUCCESS) {
        if (st == IBV_WC_REM_ACCESS_ERR)
            send_ctl(qp, FP_ABORT, 0, 0);
        qp_error_at(qp, 0, st);
        return false;
    }
    sq_complete_head(qp, IBV_WC_SUCCESS, w->len);
    return true;
}

/* Transmit the WRs not sent yet (or resent after an RNR NAK); execute
 * one-sided ones when they reach the head. */
static void qp_tx(struct fake_qp *qp)
{
    struct fake_pd *pd = (struct fake_pd *)qp->qp.pd;
    while (qp->qp.state == IBV_QPS_RTS && qp->resend_at_ns == 0 &&
           qp->sq_sent < qp->sq_count) {
        struct fake_swqe *w = sq_at(qp, qp->sq_sent);
        struct fake_hdr h = {.psn = w->psn, .a = w->rkey, .addr = w->raddr};
        uint32_t len = 0;
        if (one_sided(w->opcode)) {
            if (qp->sq_sent > 0 || !qp_exec_head(qp))
                break; /* wait for what is ahead to be acknowledged */
            continue;
        }
        if (w->inl)
            len = w->len;
        else if (fake_sge_copy_out(pd, w->sge, w->num_sge, NULL, &len)) {
            atomic_fetch_add(&fake_cnt.local_prot_errs, 1);
            qp_error_at(qp, qp->sq_sent, IBV_WC_LOC_PROT_ERR);
            break;
        }
        h.type = w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM ? FP_WRITE : FP_SEND;
        h.len = len;
        if (w->opcode == IBV_WR_SEND_WITH_IMM ||
            w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
            h.flags = 1;
            h.b = w->imm;
        }
        uint8_t *p = fake_id_frame(qp->id, &h);
        if (!p) {
            qp_error_at(qp, qp->sq_sent, IBV_WC_GENERAL_ERR);
            break;
        }
        if (h.len) {
            if (w->inl)
                memcpy(p, w->inl, len);
            else
                fake_sge_copy_out(pd, w->sge, w->num_sge, p, &len);
        }
        qp->sq_sent++;
    }
    fake_id_flush(qp->id);
}

void fake_qp_tick(struct fake_qp *qp)
{
    if (qp->resend_at_ns && fake_now_ns() >= qp->resend_at_ns) {
        qp->resend_at_ns = 0;
        qp_tx(qp);
    }
}

/* Take a receive WQE from the SRQ or the QP's own receive queue. */
static bool rq_take(struct fake_qp *qp, struct fake_rwqe *w)
{
    if (qp->qp.srq)
        return fake_srq_take((struct fake_srq *)qp->qp.srq, w);
    if (qp->rq_count == 0)
        return false;
    *w = qp->rq[qp->rq_head];
    qp->rq_head = (qp->rq_head + 1) % (int)qp->cap.max_recv_wr;
    qp->rq_count--;
    return true;
}

static bool rq_empty(struct fake_qp *qp)
{
    if (qp->qp.srq)
        return ((struct fake_srq *)qp->qp.srq)->count == 0;
    return qp->rq_count == 0;
}

static void recv_wc(struct fake_qp *qp, const struct fake_rwqe *r,
                    enum ibv_wc_status st, enum ibv_wc_opcode op, uint32_t len,
                    const struct fake_hdr *h)
{
    struct ibv_wc wc = {
        .wr_id = r->wr_id,
        .status = st,
        .opcode = op,
        .byte_len = len,
        .qp_num = qp->qp.qp_num,
        .src_qp = qp->remote_qpn,
    };
    if (h->flags & 1) {
        wc.wc_flags = IBV_WC_WITH_IMM;
        wc.imm_data = h->b;
    }
    fake_cq_push((struct fake_cq *)qp->qp.recv_cq, &wc);
}

/* Responder side of SEND and WRITE with immediate. */
static void responder(struct fake_qp *qp, const struct fake_hdr *h,
                      const uint8_t *payload)
{
    struct fake_pd *pd = (struct fake_pd *)qp->qp.pd;
    struct fake_rwqe r;

    if (qp->qp.state != IBV_QPS_RTS && qp->qp.state != IBV_QPS_RTR)
        return;
    if (h->psn != qp->expected_psn)
        return; /* go-back-N: wait for the retransmission */
    qp->rnr_nak_sent = false;

    bool needs_rwqe = h->type == FP_SEND || (h->flags & 1);
    if (needs_rwqe && rq_empty(qp)) {
        atomic_fetch_add(&fake_cnt.rnr_naks, 1);
        qp->rnr_nak_sent = true;
        send_ctl(qp, FP_NAK, h->psn, FN_RNR);
        return;
    }
    switch (h->type) {
    case FP_SEND: {
        rq_take(qp, &r);
        int rc = fake_sge_copy_in(pd, r.sge, r.num_sge, payload, h->len);
        if (rc) {
            atomic_fetch_add(&fake_cnt.local_prot_errs, 1);
            recv_wc(qp, &r, rc == -2 ? IBV_WC_LOC_LEN_ERR : IBV_WC_LOC_PROT_ERR,
                    IBV_WC_RECV, 0, h);
            send_ctl(qp, FP_NAK, h->psn, FN_INVALID);
            qp_error_at(qp, -1, IBV_WC_WR_FLUSH_ERR);
            return;
        }
        atomic_fetch_add(&fake_cnt.sends, 1);
        recv_wc(qp, &r, IBV_WC_SUCCESS, IBV_WC_RECV, h->len, h);
        break;
    }
    case FP_WRITE:
        if (!(qp->attr.access & IBV_ACCESS_REMOTE_WRITE) ||
            fake_mr_check(pd, h->a, true, h->addr, h->len,
                          IBV_ACCESS_REMOTE_WRITE) != 0) {
            atomic_fetch_add(&fake_cnt.access_naks, 1);
            send_ctl(qp, FP_NAK, h->psn, FN_ACCESS);
            qp_error_at(qp, -1, IBV_WC_WR_FLUSH_ERR);
            return;
        }
        if (h->len)
            memcpy((void *)(uintptr_t)h->addr, payload, h->len);
        atomic_fetch_add(&fake_cnt.writes, 1);
        if (h->flags & 1) {
            rq_take(qp, &r);
            recv_wc(qp, &r, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, h->len,
                    h);
        }
        break;
    }
    qp->expected_psn++;
    send_ctl(qp, FP_ACK, h->psn, 0);
}

/* Requester side: ACK and NAK. */
static void requester(struct fake_qp *qp, const struct fake_hdr *h,
                      const uint8_t *payload)
{
    if (qp->qp.state != IBV_QPS_RTS)
        return;
    switch (h->type) {
    case FP_ACK:
        while (qp->sq_count > 0 && qp->sq_sent > 0) {
            struct fake_swqe *w = sq_at(qp, 0);
            if (!psn_le(w->psn, h->psn))
                break;
            sq_complete_head(qp, IBV_WC_SUCCESS, w->len);
            qp->rnr_left = qp->rnr_retry;
        }
        break;
    case FP_NAK:
        if (qp->sq_count == 0 || sq_at(qp, 0)->psn != h->psn)
            return;
        if (h->a == FN_RNR) {
            if (qp->rnr_retry != 7 && qp->rnr_left == 0) {
                atomic_fetch_add(&fake_cnt.rnr_retry_exc, 1);
                qp_error_at(qp, 0, IBV_WC_RNR_RETRY_EXC_ERR);
                return;
            }
            if (qp->rnr_retry != 7)
                qp->rnr_left--;
            qp->sq_sent = 0;
            qp->resend_at_ns = fake_now_ns() + FAKE_RNR_DELAY_NS;
        } else {
            qp_error_at(qp, 0,
                        h->a == FN_ACCESS ? IBV_WC_REM_ACCESS_ERR
                                          : IBV_WC_REM_INV_REQ_ERR);
        }
        break;
    }
}

void fake_qp_rx(struct fake_qp *qp, const struct fake_hdr *h,
                const uint8_t *payload)
{
    if (h->type == FP_ABORT) {
        if (qp->qp.state == IBV_QPS_RTR || qp->qp.state == IBV_QPS_RTS)
            qp_error_at(qp, -1, IBV_WC_WR_FLUSH_ERR);
        return;
    }
    if (h->type == FP_SEND || h->type == FP_WRITE)
        responder(qp, h, payload);
    else
        requester(qp, h, payload);
    qp_tx(qp);
}

/* ---- verbs entry points ---- */

int fake_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
                   struct ibv_send_wr **bad_wr)
{
    struct fake_qp *qp = (struct fake_qp *)ibqp;
    int err = 0;
    if (!qp)
        return EINVAL;
    for (; wr; wr = wr->next) {
        uint64_t total = 0;
        /* The send queue works in RTS; in ERR a WR is taken and flushed;
         * before RTS posting is an immediate error (IBA 10.8.3.1). */
        if (qp->qp.state != IBV_QPS_RTS && qp->qp.state != IBV_QPS_ERR) {
            err = EINVAL;
            break;
        }
        if (wr->num_sge < 0 || wr->num_sge > (int)qp->cap.max_send_sge ||
            (wr->num_sge > 0 && !wr->sg_list)) {
            err = EINVAL;
            break;
        }
        if (qp->sq_count == (int)qp->cap.max_send_wr) {
            err = ENOMEM;
            break;
        }
        switch (wr->opcode) {
        case IBV_WR_SEND:
        case IBV_WR_SEND_WITH_IMM:
        case IBV_WR_RDMA_WRITE:
        case IBV_WR_RDMA_WRITE_WITH_IMM:
        case IBV_WR_RDMA_READ:
            break;
        default:
            err = EINVAL;
        }
        if (err)
            break;
        for (int i = 0; i < wr->num_sge; i++)
            total += wr->sg_list[i].length;
        if (total > (1ull << 31)) {
            err = EINVAL;
            break;
        }
        bool inl = (wr->send_flags & IBV_SEND_INLINE) != 0;
        if (inl && (wr->opcode == IBV_WR_RDMA_READ ||
                    total > qp->cap.max_inline_data)) {
            err = EINVAL;
            break;
        }
        if (qp->qp.state == IBV_QPS_ERR) {
            struct ibv_wc wc = {
                .wr_id = wr->wr_id,
                .status = IBV_WC_WR_FLUSH_ERR,
                .opcode = wc_opcode(wr->opcode),
                .qp_num = qp->qp.qp_num,
            };
            fake_cq_push((struct fake_cq *)qp->qp.send_cq, &wc);
            continue;
        }
        struct fake_swqe *w = sq_at(qp, qp->sq_count);
        memset(w, 0, sizeof(*w));
        if (inl && total) {
            w->inl = malloc(total);
            if (!w->inl) {
                err = ENOMEM;
                break;
            }
            size_t off = 0;
            for (int i = 0; i < wr->num_sge; i++) {
                memcpy(w->inl + off,
                       (const void *)(uintptr_t)wr->sg_list[i].addr,
                       wr->sg_list[i].length);
                off += wr->sg_list[i].length;
            }
        }
        w->wr_id = wr->wr_id;
        w->opcode = wr->opcode;
        w->flags = wr->send_flags;
        w->psn = one_sided(wr->opcode) ? 0 : qp->next_psn++;
        w->num_sge = wr->num_sge;
        if (wr->num_sge)
            memcpy(w->sge, wr->sg_list,
                   sizeof(w->sge[0]) * (size_t)wr->num_sge);
        w->len = (uint32_t)total;
        w->raddr = wr->wr.rdma.remote_addr;
        w->rkey = wr->wr.rdma.rkey;
        w->imm = wr->imm_data;
        qp->sq_count++;
    }
    if (err && bad_wr)
        *bad_wr = wr;
    qp_tx(qp);
    return err;
}

int fake_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
                   struct ibv_recv_wr **bad_wr)
{
    struct fake_qp *qp = (struct fake_qp *)ibqp;
    if (!qp)
        return EINVAL;
    for (; wr; wr = wr->next) {
        int err = 0;
        if (qp->qp.srq || qp->qp.state == IBV_QPS_RESET || wr->num_sge < 0 ||
            wr->num_sge > (int)qp->cap.max_recv_sge)
            err = EINVAL;
        else if (qp->rq_count == (int)qp->cap.max_recv_wr)
            err = ENOMEM;
        if (err) {
            if (bad_wr)
                *bad_wr = wr;
            return err;
        }
        if (qp->qp.state == IBV_QPS_ERR) {
            struct ibv_wc wc = {
                .wr_id = wr->wr_id,
                .status = IBV_WC_WR_FLUSH_ERR,
                .opcode = IBV_WC_RECV,
                .qp_num = qp->qp.qp_num,
            };
            fake_cq_push((struct fake_cq *)qp->qp.recv_cq, &wc);
            continue;
        }
        struct fake_rwqe *r =
            &qp->rq[(qp->rq_head + qp->rq_count) % (int)qp->cap.max_recv_wr];
        r->wr_id = wr->wr_id;
        r->num_sge = wr->num_sge;
        memcpy(r->sge, wr->sg_list, sizeof(r->sge[0]) * (size_t)wr->num_sge);
        qp->rq_count++;
    }
    return 0;
}

/* ---- the QP state machine (IBA 10.3.1; rdma-core/the kernel's
 * ib_modify_qp_is_ok() for RC): which masks each transition requires and
 * which it allows besides IBV_QP_STATE.  SQD and SQE are not modelled. */

struct qp_trans {
    enum ibv_qp_state from, to;
    int req, opt;
};

static const struct qp_trans qp_trans_tab[] = {
    {IBV_QPS_RESET, IBV_QPS_INIT, FAKE_QPM_INIT, 0},
    {IBV_QPS_INIT, IBV_QPS_INIT, 0, FAKE_QPM_INIT},
    {IBV_QPS_INIT, IBV_QPS_RTR, FAKE_QPM_RTR,
     IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX},
    {IBV_QPS_RTR, IBV_QPS_RTS, FAKE_QPM_RTS,
     IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
         IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE},
    {IBV_QPS_RTS, IBV_QPS_RTS, 0,
     IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH |
         IBV_QP_PATH_MIG_STATE | IBV_QP_MIN_RNR_TIMER},
};

static bool qp_trans_ok(enum ibv_qp_state from, enum ibv_qp_state to, int mask)
{
    int attrs = mask & ~IBV_QP_STATE;
    /* Any state may go to RESET or ERR, with no other attribute. */
    if (to == IBV_QPS_RESET || to == IBV_QPS_ERR)
        return attrs == 0;
    for (size_t i = 0; i < sizeof(qp_trans_tab) / sizeof(qp_trans_tab[0]);
         i++) {
        const struct qp_trans *t = &qp_trans_tab[i];
        if (t->from == from && t->to == to)
            return (attrs & t->req) == t->req &&
                   (attrs & ~(t->req | t->opt)) == 0;
    }
    return false;
}

/* Attribute values the device refuses (EINVAL as from the kernel). */
static bool qp_attr_ok(struct fake_qp *qp, const struct ibv_qp_attr *a, int m)
{
    const int known = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                      IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    if ((m & IBV_QP_PORT) && a->port_num != 1)
        return false;
    if ((m & IBV_QP_PKEY_INDEX) && a->pkey_index != 0)
        return false;
    if ((m & IBV_QP_ACCESS_FLAGS) && (a->qp_access_flags & ~known))
        return false;
    if ((m & IBV_QP_PATH_MTU) &&
        (a->path_mtu < IBV_MTU_256 || a->path_mtu > IBV_MTU_4096))
        return false;
    if ((m & IBV_QP_AV) && a->ah_attr.port_num != 0 && a->ah_attr.port_num != 1)
        return false;
    if ((m & IBV_QP_DEST_QPN) && a->dest_qp_num > 0xffffffu)
        return false;
    if ((m & IBV_QP_RQ_PSN) && a->rq_psn > 0xffffffu)
        return false;
    if ((m & IBV_QP_SQ_PSN) && a->sq_psn > 0xffffffu)
        return false;
    if ((m & IBV_QP_MAX_DEST_RD_ATOMIC) &&
        a->max_dest_rd_atomic > FAKE_MAX_RD_ATOM)
        return false;
    if ((m & IBV_QP_MAX_QP_RD_ATOMIC) && a->max_rd_atomic > FAKE_MAX_RD_ATOM)
        return false;
    if ((m & IBV_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31)
        return false;
    if ((m & IBV_QP_TIMEOUT) && a->timeout > 31)
        return false;
    if ((m & IBV_QP_RETRY_CNT) && a->retry_cnt > 7)
        return false;
    if ((m & IBV_QP_RNR_RETRY) && a->rnr_retry > 7)
        return false;
    if ((m & IBV_QP_CUR_STATE) && a->cur_qp_state != qp->qp.state)
        return false;
    return true;
}

/* RESET discards every queued WR without a completion (IBA 10.3.1). */
static void qp_reset(struct fake_qp *qp)
{
    for (int i = 0; i < qp->sq_count; i++)
        free(sq_at(qp, i)->inl);
    qp->sq_head = qp->sq_count = qp->sq_sent = 0;
    qp->rq_head = qp->rq_count = 0;
    qp->next_psn = qp->expected_psn = 0;
    qp->resend_at_ns = 0;
    qp->rnr_nak_sent = false;
    qp->remote_qpn = 0;
    memset(&qp->attr, 0, sizeof(qp->attr));
}

int fake_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
    struct fake_qp *qp = (struct fake_qp *)ibqp;
    enum ibv_qp_state from, to;
    if (!qp || !attr)
        return EINVAL;
    from = qp->qp.state;
    to = (mask & IBV_QP_STATE) ? attr->qp_state : from;
    if (!qp_trans_ok(from, to, mask) || !qp_attr_ok(qp, attr, mask))
        return EINVAL;

    if (mask & IBV_QP_PKEY_INDEX)
        qp->attr.pkey_index = attr->pkey_index;
    if (mask & IBV_QP_PORT)
        qp->attr.port_num = attr->port_num;
    if (mask & IBV_QP_ACCESS_FLAGS)
        qp->attr.access = attr->qp_access_flags;
    if (mask & IBV_QP_PATH_MTU)
        qp->attr.path_mtu = attr->path_mtu;
    if (mask & IBV_QP_DEST_QPN)
        qp->remote_qpn = attr->dest_qp_num;
    if (mask & IBV_QP_RQ_PSN)
        qp->expected_psn = attr->rq_psn;
    if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
        qp->attr.max_dest_rd_atomic = attr->max_dest_rd_atomic;
    if (mask & IBV_QP_MIN_RNR_TIMER)
        qp->attr.min_rnr_timer = attr->min_rnr_timer;
    if (mask & IBV_QP_TIMEOUT)
        qp->attr.timeout = attr->timeout;
    if (mask & IBV_QP_RETRY_CNT)
        qp->attr.retry_cnt = attr->retry_cnt;
    if (mask & IBV_QP_RNR_RETRY) {
        qp->rnr_retry = attr->rnr_retry;
        qp->rnr_left = attr->rnr_retry;
    }
    if (mask & IBV_QP_SQ_PSN)
        qp->next_psn = attr->sq_psn;
    if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
        qp->attr.max_rd_atomic = attr->max_rd_atomic;

    switch (to) {
    case IBV_QPS_RESET:
        qp_reset(qp);
        qp->qp.state = IBV_QPS_RESET;
        break;
    case IBV_QPS_ERR:
        qp_error_at(qp, -1, IBV_WC_WR_FLUSH_ERR);
        break;
    default:
        qp->qp.state = to;
        if (to == IBV_QPS_RTS && qp->id)
            qp_tx(qp);
        break;
    }
    return 0;
}

int fake_qp_connect(struct fake_qp *qp, uint32_t remote_qpn, uint32_t rq_psn,
                    uint32_t sq_psn, const struct rdma_conn_param *mine,
                    uint8_t rnr_retry)
{
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_RTR,
        .path_mtu = IBV_MTU_4096,
        .dest_qp_num = remote_qpn,
        .rq_psn = rq_psn & 0xffffffu,
        .max_dest_rd_atomic = mine->responder_resources,
        .min_rnr_timer = 12, /* librdmacm's default: 0.64 ms */
        .ah_attr = {.port_num = 1},
    };
    int rc = fake_modify_qp(&qp->qp, &a, IBV_QP_STATE | FAKE_QPM_RTR);
    if (rc)
        return rc;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14; /* the CM's packet life time based default: ~67 ms */
    a.retry_cnt = mine->retry_count;
    a.rnr_retry = rnr_retry > 7 ? 7 : rnr_retry;
    a.sq_psn = sq_psn & 0xffffffu;
    a.max_rd_atomic = mine->initiator_depth;
    return fake_modify_qp(&qp->qp, &a, IBV_QP_STATE | FAKE_QPM_RTS);
}

int fake_create_qp(struct rdma_cm_id *id, struct ibv_pd *ibpd,
                   struct ibv_qp_init_attr *attr)
{
    struct fake_id *fid = (struct fake_id *)id;
    struct fake_pd *pd = (struct fake_pd *)ibpd;
    struct ibv_qp_cap *c;
    int err = ENOMEM;
    if (!fid || !pd || !attr || id->qp || !id->verbs ||
        ibpd->context != id->verbs || attr->qp_type != IBV_QPT_RC ||
        !attr->send_cq || !attr->recv_cq)
        goto err_inval;
    c = &attr->cap;
    if (c->max_send_wr == 0 || c->max_send_wr > FAKE_MAX_QP_WR ||
        c->max_send_sge > FAKE_MAX_SGE ||
        c->max_inline_data > fake_max_inline(id->verbs))
        goto err_inval;
    if (!attr->srq && (c->max_recv_wr == 0 || c->max_recv_wr > FAKE_MAX_QP_WR ||
                       c->max_recv_sge > FAKE_MAX_SGE))
        goto err_inval;
    struct fake_qp *qp = calloc(1, sizeof(*qp));
    if (!qp)
        goto err_nomem;
    qp->sq = calloc(c->max_send_wr, sizeof(*qp->sq));
    if (!qp->sq)
        goto err_free_qp;
    if (!attr->srq) {
        qp->rq = calloc(c->max_recv_wr, sizeof(*qp->rq));
        if (!qp->rq)
            goto err_free_sq;
    } else {
        c->max_recv_wr = 0;
        c->max_recv_sge = 0;
    }
    qp->cap = *c;
    qp->id = fid;
    qp->sq_sig_all = attr->sq_sig_all != 0;
    qp->qp.context = id->verbs;
    qp->qp.qp_context = attr->qp_context;
    qp->qp.pd = ibpd;
    qp->qp.send_cq = attr->send_cq;
    qp->qp.recv_cq = attr->recv_cq;
    qp->qp.srq = attr->srq;
    qp->qp.qp_num = (uint32_t)atomic_fetch_add(&fake_qpn_next, 1) & 0xffffffu;
    qp->qp.state = IBV_QPS_RESET;
    qp->qp.qp_type = IBV_QPT_RC;
    /* rdma_create_qp() moves the new QP to INIT itself. */
    struct ibv_qp_attr ia = {
        .qp_state = IBV_QPS_INIT,
        .port_num = id->port_num ? id->port_num : 1,
        .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
                           IBV_ACCESS_REMOTE_WRITE,
    };
    err = fake_modify_qp(&qp->qp, &ia, IBV_QP_STATE | FAKE_QPM_INIT);
    if (err)
        goto err_free_rq;
    fake_cq_attach((struct fake_cq *)attr->send_cq, qp);
    fake_cq_attach((struct fake_cq *)attr->recv_cq, qp);
    pd->nobj++;
    id->qp = &qp->qp;
    return 0;

err_free_rq:
    free(qp->rq);
err_free_sq:
    free(qp->sq);
err_free_qp:
    free(qp);
err_nomem:
    errno = err;
    return -1;
err_inval:
    errno = EINVAL;
    return -1;
}

void fake_destroy_qp(struct rdma_cm_id *id)
{
    if (!id || !id->qp)
        return;
    struct fake_qp *qp = (struct fake_qp *)id->qp;
    fake_cq_detach((struct fake_cq *)qp->qp.send_cq, qp);
    fake_cq_detach((struct fake_cq *)qp->qp.recv_cq, qp);
    for (int i = 0; i < qp->sq_count; i++)
        free(sq_at(qp, i)->inl);
    ((struct fake_pd *)qp->qp.pd)->nobj--;
    free(qp->sq);
    free(qp->rq);
    free(qp);
    id->qp = NULL;
}
