/*
 * na-verbs: operations, completion dispatch, progress, blocking support
 * and cancel.  Every completion goes through the instance's done list and
 * its callback runs from vb_progress() only.  Blocking: the wait fd is an
 * epoll set of the completion channel and the rdma_cm channel;
 * safe_to_sleep arms the CQ with ibv_req_notify_cq and then polls once
 * more, so a completion that raced the arming is never slept on.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vb.h"

#define VB_POLL_BATCH  32
#define VB_POLL_ROUNDS 16

/* Ops are recycled through a small pool: no allocator call per message
 * once it is warm, and no allocator churn under a message flood. */
struct cw_na_op *vb_op_new(vb_class_t *cls, enum cw_na_op_type type,
                           cw_na_cb_t cb, void *arg)
{
    struct cw_na_op *op = nau_pool_get(&cls->op_pool);
    if (!op)
        return NULL;
    memset(op, 0, sizeof(*op));
    op->type = type;
    op->cb = cb;
    op->arg = arg;
    op->sidx = -1;
    return op;
}

void vb_op_free(vb_class_t *cls, struct cw_na_op *op)
{
    if (op->sidx >= 0)
        cls->sfree[cls->nsfree++] = (unsigned)op->sidx;
    vb_peer_put(cls, op->peer);
    vb_peer_put(cls, op->source);
    free(op->pieces);
    nau_pool_put(&cls->op_pool, op);
}

void vb_list_init(struct vb_list *l)
{
    nau_list_init(&l->ops);
    l->n = 0;
}

void vb_list_push(struct vb_list *l, struct cw_na_op *op)
{
    op->on = l;
    nau_list_add_tail(&l->ops, &op->link);
    l->n++;
}

void vb_list_remove(struct cw_na_op *op)
{
    if (!op->on)
        return;
    nau_list_del(&op->link);
    op->on->n--;
    op->on = NULL;
}

void vb_list_free(vb_class_t *cls, struct vb_list *l)
{
    for (struct cw_na_op *op; (op = vb_list_first(l));) {
        vb_list_remove(op);
        vb_op_free(cls, op);
    }
}

void vb_op_done(vb_class_t *cls, struct cw_na_op *op, cw_status_t st)
{
    if (op->on == &cls->done)
        return;
    vb_list_remove(op);
    if (op->sidx >= 0) {
        cls->sfree[cls->nsfree++] = (unsigned)op->sidx;
        op->sidx = -1;
    }
    op->status = st;
    vb_list_push(&cls->done, op);
}

void vb_send_wc(vb_class_t *cls, const struct ibv_wc *wc)
{
    unsigned tag = (unsigned)(wc->wr_id & 3u);
    struct cw_na_op *op =
        (struct cw_na_op *)(uintptr_t)(wc->wr_id & ~(uint64_t)3);
    struct vb_conn *conn = vb_conn_by_qpn(cls, wc->qp_num);
    cw_status_t st = vb_status(VB_E_WC, wc->status);

    if (wc->status == IBV_WC_SUCCESS && conn && conn->sig_count) {
        conn->completed_seq = conn->sig[conn->sig_head];
        conn->sig_head = (conn->sig_head + 1) % VB_SQ_DEPTH;
        conn->sig_count--;
    }
    if (wc->status == IBV_WC_WR_FLUSH_ERR)
        st = conn && conn->fail_status != CW_OK ? conn->fail_status
                                                : CW_DISCONNECTED;
    if (wc->status != IBV_WC_SUCCESS && wc->status != IBV_WC_WR_FLUSH_ERR &&
        conn) {
        char eb[64], name[64];
        vb_peer_format(conn->peer, name, sizeof(name));
        VB_ERR_RL(cls, "QP %u to %s: %s", wc->qp_num, name,
                  vb_strerr(VB_E_WC, wc->status, eb, sizeof(eb)));
        vb_conn_fail(conn, CW_DISCONNECTED);
    }
    switch (tag) {
    case VB_WR_OP_LAST:
        vb_op_done(cls, op, st);
        break;
    case VB_WR_OP_PIECE:
        vb_rma_piece_done(op->conn, op, st);
        break;
    default:
        break;
    }
    if (conn && conn->state == VC_UP)
        vb_conn_kick(conn);
}

static void dispatch(vb_class_t *cls, const struct ibv_wc *wc)
{
    if ((wc->wr_id & 3u) == VB_WR_RECV)
        vb_recv_done(cls, wc);
    else
        vb_send_wc(cls, wc);
}

void vb_drain_cq(vb_class_t *cls)
{
    struct ibv_wc wc[VB_POLL_BATCH];
    for (int i = 0; i < cls->nstash; i++)
        dispatch(cls, &cls->stash[i]);
    cls->nstash = 0;
    for (int r = 0; r < VB_POLL_ROUNDS; r++) {
        int n = cls->ops->poll_cq(cls->cq, VB_POLL_BATCH, wc);
        if (n < 0) {
            char eb[64];
            VB_ERR(cls, "ibv_poll_cq() failed: %s",
                   vb_strerr(VB_E_RC, n, eb, sizeof(eb)));
            return;
        }
        for (int i = 0; i < n; i++)
            dispatch(cls, &wc[i]);
        if (n < VB_POLL_BATCH)
            return;
    }
}

static void drain_cq_events(vb_class_t *cls)
{
    struct ibv_cq *cq;
    void *ctx;
    while (cls->ops->get_cq_event(cls->comp_ch, &cq, &ctx) == 0) {
        cls->ops->ack_cq_events(cq, 1);
        cls->cq_armed = false;
    }
}

cw_status_t vb_progress(cw_na_class_t *cls, unsigned max, unsigned *count_p)
{
    unsigned n = 0;
    vb_cm_progress(cls);
    if (!(cls->flags & CW_NA_BUSY))
        drain_cq_events(cls);
    vb_drain_cq(cls);
    for (struct vb_conn *c = cls->conns; c; c = c->next)
        if (c->state == VC_UP)
            vb_conn_kick(c);
    vb_conn_reap(cls, false);
    for (struct cw_na_op *op;
         (max == 0 || n < max) && (op = vb_list_first(&cls->done));) {
        struct cw_na_cb_info info = {
            .status = op->status, .type = op->type, .arg = op->arg};
        vb_list_remove(op);
        if (op->type == CW_NA_OP_RECV_UNEXPECTED) {
            info.u.recv_unexpected.len = op->got;
            info.u.recv_unexpected.tag = op->tag;
            if (op->status == CW_OK) {
                info.u.recv_unexpected.source = op->source;
                op->source = NULL; /* the callback owns it now */
            }
        } else if (op->type == CW_NA_OP_RECV_EXPECTED) {
            info.u.recv_expected.len = op->got;
        }
        op->cb(&info);
        vb_op_free(cls, op);
        n++;
    }
    if (count_p)
        *count_p = n;
    return CW_OK;
}

cw_status_t vb_cancel(cw_na_class_t *cls, cw_na_op_t *op)
{
    if (!op)
        return CW_INVALID_ARG;
    if (op->on == &cls->done)
        return CW_OK;
    if (op->posted) {
        /* On the QP: it completes with its real status when the work
         * request comes back. */
        op->canceled = true;
        return CW_OK;
    }
    vb_op_done(cls, op, CW_CANCELED);
    return CW_OK;
}

int vb_get_wait_fd(cw_na_class_t *cls)
{
    return cls->epfd;
}

bool vb_safe_to_sleep(cw_na_class_t *cls)
{
    if ((cls->flags & CW_NA_BUSY) || vb_list_first(&cls->done) || cls->nstash)
        return false;
    if (!cls->cq_armed) {
        int rc = cls->ops->req_notify_cq(cls->cq, 0);
        if (rc) {
            char eb[64];
            VB_ERR(cls, "ibv_req_notify_cq() failed: %s",
                   vb_strerr(VB_E_RC, rc, eb, sizeof(eb)));
            return false;
        }
        cls->cq_armed = true;
    }
    /* Re-poll: a completion that arrived before arming raises no event. */
    int n = cls->ops->poll_cq(
        cls->cq, (int)(sizeof(cls->stash) / sizeof(cls->stash[0])), cls->stash);
    if (n > 0) {
        cls->nstash = n;
        return false;
    }
    return n == 0;
}
