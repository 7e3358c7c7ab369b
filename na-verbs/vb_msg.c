/*
 * na-verbs: two-sided messages.  Receives come from a shared receive queue
 * fed by a registered buffer pool; every connection is granted a fixed
 * number of those buffers and its sender holds one credit per buffer, so a
 * SEND never finds the SRQ empty (no RNR).  Credits come back piggybacked
 * on every message header, or in an explicit inline credit message once
 * half the grant is owed; one credit is kept in reserve for that message
 * so two peers that only receive can never deadlock.  Sends are copied
 * into a registered send buffer (eager protocol).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vb.h"

/* ---- pools ---- */

cw_status_t vb_pool_init(vb_class_t *cls)
{
    size_t bytes = (size_t)VB_SEND_BUFS * cls->buf_size;
    cls->smem = aligned_alloc(4096, (bytes + 4095) & ~(size_t)4095);
    cls->sfree = calloc(VB_SEND_BUFS, sizeof(*cls->sfree));
    if (!cls->smem || !cls->sfree)
        return CW_NOMEM;
    cls->smr =
        cls->ops->reg_mr(cls->pd, cls->smem, bytes, IBV_ACCESS_LOCAL_WRITE);
    if (!cls->smr) {
        VB_ERR(cls, "ibv_reg_mr(send pool, %zu) failed: %s", bytes,
               strerror(errno));
        return vb_status(VB_E_RC, -1);
    }
    cls->nsbufs = VB_SEND_BUFS;
    for (unsigned i = 0; i < VB_SEND_BUFS; i++)
        cls->sfree[i] = VB_SEND_BUFS - 1 - i;
    cls->nsfree = VB_SEND_BUFS;
    return CW_OK;
}

void vb_pool_fini(vb_class_t *cls)
{
    while (cls->rchunks) {
        struct vb_rchunk *c = cls->rchunks;
        cls->rchunks = c->next;
        if (c->mr)
            cls->ops->dereg_mr(c->mr);
        free(c->mem);
        free(c);
    }
    if (cls->smr)
        cls->ops->dereg_mr(cls->smr);
    free(cls->smem);
    free(cls->sfree);
}

static cw_status_t rbuf_post(vb_class_t *cls, struct vb_rbuf *b)
{
    struct ibv_sge sge = {.addr = (uintptr_t)b->data,
                          .length = (uint32_t)cls->buf_size,
                          .lkey = b->chunk->mr->lkey};
    struct ibv_recv_wr wr = {
        .wr_id = (uintptr_t)b | VB_WR_RECV, .sg_list = &sge, .num_sge = 1};
    struct ibv_recv_wr *bad;
    int rc = cls->ops->post_srq_recv(cls->srq, &wr, &bad);
    if (rc) {
        char eb[64];
        VB_ERR(cls, "ibv_post_srq_recv() failed: %s",
               vb_strerr(VB_E_RC, rc, eb, sizeof(eb)));
        return vb_status(VB_E_RC, rc);
    }
    b->posted = true;
    cls->srq_posted++;
    return CW_OK;
}

static cw_status_t pool_grow(vb_class_t *cls, unsigned n)
{
    size_t bytes = (size_t)n * cls->buf_size;
    struct vb_rchunk *c = calloc(1, sizeof(*c) + n * sizeof(c->bufs[0]));
    if (!c)
        return CW_NOMEM;
    c->mem = aligned_alloc(4096, (bytes + 4095) & ~(size_t)4095);
    if (!c->mem) {
        free(c);
        return CW_NOMEM;
    }
    c->mr = cls->ops->reg_mr(cls->pd, c->mem, bytes, IBV_ACCESS_LOCAL_WRITE);
    if (!c->mr) {
        VB_ERR(cls, "ibv_reg_mr(receive pool, %zu) failed: %s", bytes,
               strerror(errno));
        free(c->mem);
        free(c);
        return vb_status(VB_E_RC, -1);
    }
    c->n = n;
    for (unsigned i = 0; i < n; i++) {
        c->bufs[i].chunk = c;
        c->bufs[i].data = c->mem + (size_t)i * cls->buf_size;
    }
    c->next = cls->rchunks;
    cls->rchunks = c;
    cls->rbufs_total += n;
    return CW_OK;
}

cw_status_t vb_pool_grant(vb_class_t *cls, unsigned n)
{
    cw_status_t st;
    if (cls->srq_target + n > (unsigned)cls->srq_max)
        return CW_BUSY;
    while (cls->rbufs_total < cls->srq_target + n)
        if ((st = pool_grow(cls, cls->credits)) != CW_OK)
            return st;
    cls->srq_target += n;
    for (struct vb_rchunk *c = cls->rchunks; c; c = c->next)
        for (unsigned i = 0; i < c->n && cls->srq_posted < cls->srq_target; i++)
            if (!c->bufs[i].posted && (st = rbuf_post(cls, &c->bufs[i]))) {
                /* Nothing is granted on failure: the caller does not
                 * ungrant.  Buffers already posted stay in the SRQ and are
                 * not reposted once used while above the target. */
                cls->srq_target -= n;
                return st;
            }
    return CW_OK;
}

void vb_pool_ungrant(vb_class_t *cls, unsigned n)
{
    cls->srq_target -= n < cls->srq_target ? n : cls->srq_target;
}

/* ---- sending ---- */

void vb_send_credits(struct vb_conn *conn, bool force)
{
    vb_class_t *cls = conn->cls;
    struct vb_hdr h = {.type = VB_MSG_CREDIT, .version = VB_WIRE_VERSION};
    if (conn->state != VC_UP || conn->owed == 0 || conn->credits < 1 ||
        vb_sq_full(conn) || (!force && conn->owed < conn->grant / 2))
        return;
    h.credits = (uint16_t)(conn->owed > 65535 ? 65535 : conn->owed);
    bool sig = conn->unsignaled >= VB_SQ_DEPTH / 4;
    struct ibv_sge sge = {.addr = (uintptr_t)&h, .length = sizeof(h)};
    struct ibv_send_wr wr =
                           {
                               .wr_id = VB_WR_CTL,
                               .sg_list = &sge,
                               .num_sge = 1,
                               .opcode = IBV_WR_SEND,
                               .send_flags = IBV_SEND_INLINE |
                                             (sig ? IBV_SEND_SIGNALED : 0u),
                           },
                       *bad;
    int rc = cls->ops->post_send(conn->id->qp, &wr, &bad);
    if (rc) {
        char eb[64];
        VB_ERR(cls, "ibv_post_send(credit) failed: %s",
               vb_strerr(VB_E_RC, rc, eb, sizeof(eb)));
        vb_conn_fail(conn, vb_status(VB_E_RC, rc));
        return;
    }
    vb_sq_posted(conn, sig);
    conn->owed -= h.credits;
    conn->credits--;
    cls->stats.credit_msgs++;
}

cw_status_t vb_post_send_op(struct vb_conn *conn, struct cw_na_op *op,
                            bool *blocked_p)
{
    vb_class_t *cls = conn->cls;
    if (op->slen > conn->peer_eager) {
        /* Queued before the peer's eager size was known. */
        char name[64];
        VB_WARN_RL(cls,
                   "%zu-byte message to %s refused: it takes at most "
                   "%zu bytes",
                   op->slen, vb_peer_format(conn->peer, name, sizeof(name)),
                   conn->peer_eager);
        vb_op_done(cls, op, CW_OVERFLOW);
        return CW_OK;
    }
    /* One credit stays in reserve for an explicit credit message. */
    if (conn->credits < 2 || vb_sq_full(conn) || cls->nsfree == 0) {
        if (conn->credits < 2 && !op->stalled) {
            op->stalled = true;
            cls->stats.credit_stalls++;
        }
        *blocked_p = true;
        return CW_OK;
    }
    unsigned idx = cls->sfree[--cls->nsfree];
    uint8_t *b = cls->smem + (size_t)idx * cls->buf_size;
    struct vb_hdr h = {.type = op->msg_type,
                       .version = VB_WIRE_VERSION,
                       .credits =
                           (uint16_t)(conn->owed > 65535 ? 65535 : conn->owed),
                       .tag = op->tag};
    memcpy(b, &h, sizeof(h));
    if (op->slen)
        memcpy(b + sizeof(h), op->sbuf, op->slen);
    struct ibv_sge sge = {.addr = (uintptr_t)b,
                          .length = (uint32_t)(sizeof(h) + op->slen),
                          .lkey = cls->smr->lkey};
    struct ibv_send_wr wr =
                           {
                               .wr_id = (uintptr_t)op | VB_WR_OP_LAST,
                               .sg_list = &sge,
                               .num_sge = 1,
                               .opcode = IBV_WR_SEND,
                               .send_flags = IBV_SEND_SIGNALED,
                           },
                       *bad;
    if (sge.length <= conn->inline_max)
        wr.send_flags |= IBV_SEND_INLINE;
    int rc = cls->ops->post_send(conn->id->qp, &wr, &bad);
    if (rc) {
        char eb[64];
        cls->sfree[cls->nsfree++] = idx;
        VB_ERR(cls, "ibv_post_send() failed: %s",
               vb_strerr(VB_E_RC, rc, eb, sizeof(eb)));
        cw_status_t st = vb_status(VB_E_RC, rc);
        vb_op_done(cls, op, st);
        vb_conn_fail(conn, CW_DISCONNECTED);
        return st;
    }
    vb_sq_posted(conn, true);
    conn->owed -= h.credits;
    conn->credits--;
    op->sidx = (int)idx;
    op->posted = true;
    vb_list_remove(op);
    vb_list_push(&conn->posted, op);
    return CW_OK;
}

static cw_status_t msg_send(vb_class_t *cls, const void *buf, size_t len,
                            vb_peer_t *dest, uint32_t tag, cw_na_cb_t cb,
                            void *arg, cw_na_op_t **op_p, bool unexpected)
{
    struct vb_conn *conn;
    if ((!buf && len) || !dest || !cb)
        return CW_INVALID_ARG;
    if (len > cls->buf_size - sizeof(struct vb_hdr))
        return CW_OVERFLOW;
    cw_status_t st = vb_conn_for_send(cls, dest, &conn);
    if (st != CW_OK)
        return st;
    if (conn->state == VC_UP && len > conn->peer_eager) {
        char name[64];
        VB_WARN_RL(cls,
                   "%zu-byte message to %s refused: it takes at most "
                   "%zu bytes",
                   len, vb_peer_format(dest, name, sizeof(name)),
                   conn->peer_eager);
        return CW_OVERFLOW;
    }
    struct cw_na_op *op = vb_op_new(
        cls, unexpected ? CW_NA_OP_SEND_UNEXPECTED : CW_NA_OP_SEND_EXPECTED, cb,
        arg);
    if (!op)
        return CW_NOMEM;
    op->sbuf = buf;
    op->slen = len;
    op->tag = tag;
    op->msg_type = unexpected ? VB_MSG_UNEXP : VB_MSG_EXP;
    op->conn = conn;
    op->peer = dest;
    nau_ptable_ref(&dest->pnode);
    vb_list_push(&conn->pending, op);
    if (op_p)
        *op_p = op;
    vb_conn_kick(conn);
    return CW_OK;
}

cw_status_t vb_msg_send_unexpected(cw_na_class_t *cls, const void *buf,
                                   size_t len, cw_na_addr_t *dest, uint32_t tag,
                                   cw_na_cb_t cb, void *arg, cw_na_op_t **op_p)
{
    return msg_send(cls, buf, len, dest, tag, cb, arg, op_p, true);
}

cw_status_t vb_msg_send_expected(cw_na_class_t *cls, const void *buf,
                                 size_t len, cw_na_addr_t *dest, uint32_t tag,
                                 cw_na_cb_t cb, void *arg, cw_na_op_t **op_p)
{
    return msg_send(cls, buf, len, dest, tag, cb, arg, op_p, false);
}

/* ---- receiving ---- */

static void deliver(vb_class_t *cls, struct cw_na_op *op, vb_peer_t *from,
                    uint32_t tag, const uint8_t *data, size_t len)
{
    size_t n = len < op->rlen ? len : op->rlen;
    if (n)
        memcpy(op->rbuf, data, n);
    op->got = n;
    if (op->type == CW_NA_OP_RECV_UNEXPECTED) {
        op->source = from;
        nau_ptable_ref(&from->pnode);
        op->tag = tag;
    }
    vb_op_done(cls, op, len > op->rlen ? CW_OVERFLOW : CW_OK);
}

static struct cw_na_op *match_expected(vb_class_t *cls, vb_peer_t *from,
                                       uint32_t tag)
{
    struct nau_list *l;

    nau_list_for_each(l, &cls->exp_recvs.ops)
    {
        struct cw_na_op *op = nau_container_of(l, struct cw_na_op, link);
        if (op->peer == from && op->tag == tag)
            return op;
    }
    return NULL;
}

static void malformed(vb_class_t *cls, const struct vb_conn *conn,
                      uint32_t byte_len, const struct vb_hdr *h)
{
    char name[64];
    cls->stats.dropped++;
    VB_WARN_RL(cls,
               "dropped a malformed %u-byte message from %s (type %d, "
               "version %d; %llu dropped so far)",
               byte_len, vb_peer_format(conn->peer, name, sizeof(name)),
               h ? h->type : -1, h ? h->version : -1,
               (unsigned long long)cls->stats.dropped);
}

void vb_recv_done(vb_class_t *cls, const struct ibv_wc *wc)
{
    struct vb_rbuf *b = (struct vb_rbuf *)(uintptr_t)(wc->wr_id & ~(uint64_t)3);
    struct vb_conn *conn = vb_conn_by_qpn(cls, wc->qp_num);
    struct vb_hdr h;

    b->posted = false;
    cls->srq_posted--;
    if (wc->status != IBV_WC_SUCCESS) {
        if (conn && wc->status != IBV_WC_WR_FLUSH_ERR) {
            char eb[64], name[64];
            vb_peer_format(conn->peer, name, sizeof(name));
            VB_ERR_RL(cls, "receive from %s failed: %s", name,
                      vb_strerr(VB_E_WC, wc->status, eb, sizeof(eb)));
            vb_conn_fail(conn, CW_DISCONNECTED);
        }
        goto repost;
    }
    if (!conn || conn->state == VC_CLOSING)
        goto repost;
    /* The buffer is reposted below in any case (a message nobody has
     * asked for yet is copied out): one credit back for it, unless held
     * back in vb_unexp_queue(). */
    conn->owed++;
    if (wc->byte_len < sizeof(h) || wc->byte_len > cls->buf_size) {
        malformed(cls, conn, wc->byte_len, NULL);
        goto repost;
    }
    memcpy(&h, b->data, sizeof(h));
    if (h.version != VB_WIRE_VERSION ||
        (h.type != VB_MSG_UNEXP && h.type != VB_MSG_EXP &&
         h.type != VB_MSG_CREDIT) ||
        h.credits > conn->peer_grant - (unsigned)conn->credits) {
        malformed(cls, conn, wc->byte_len, &h);
        goto repost;
    }
    conn->credits += h.credits;
    const uint8_t *data = b->data + sizeof(h);
    size_t len = wc->byte_len - sizeof(h);
    if (h.type == VB_MSG_UNEXP) {
        if (vb_list_first(&cls->unexp_recvs))
            deliver(cls, vb_list_first(&cls->unexp_recvs), conn->peer, h.tag,
                    data, len);
        else
            vb_unexp_queue(conn, h.tag, data, len);
    } else if (h.type == VB_MSG_EXP) {
        struct cw_na_op *op = match_expected(cls, conn->peer, h.tag);
        if (op)
            deliver(cls, op, conn->peer, h.tag, data, len);
        else
            vb_early_put(cls, conn->peer, h.tag, data, len);
    }
repost:
    if (cls->srq_posted < cls->srq_target)
        rbuf_post(cls, b);
    if (conn && conn->state == VC_UP)
        vb_conn_kick(conn);
}

cw_status_t vb_msg_recv_unexpected(cw_na_class_t *cls, void *buf, size_t len,
                                   cw_na_cb_t cb, void *arg, cw_na_op_t **op_p)
{
    if ((!buf && len) || !cb)
        return CW_INVALID_ARG;
    struct cw_na_op *op = vb_op_new(cls, CW_NA_OP_RECV_UNEXPECTED, cb, arg);
    if (!op)
        return CW_NOMEM;
    op->rbuf = buf;
    op->rlen = len;
    struct vb_early *e = vb_unexp_take(cls);
    if (e) {
        deliver(cls, op, e->peer, e->m.tag, e->data, e->len);
        vb_early_free(cls, e);
    } else {
        vb_list_push(&cls->unexp_recvs, op);
    }
    if (op_p)
        *op_p = op;
    return CW_OK;
}

cw_status_t vb_msg_recv_expected(cw_na_class_t *cls, void *buf, size_t len,
                                 cw_na_addr_t *source, uint32_t tag,
                                 cw_na_cb_t cb, void *arg, cw_na_op_t **op_p)
{
    if ((!buf && len) || !cb || !source)
        return CW_INVALID_ARG;
    struct cw_na_op *op = vb_op_new(cls, CW_NA_OP_RECV_EXPECTED, cb, arg);
    if (!op)
        return CW_NOMEM;
    op->rbuf = buf;
    op->rlen = len;
    op->peer = source;
    op->tag = tag;
    nau_ptable_ref(&source->pnode);
    struct vb_early *e = vb_early_take(cls, source, tag);
    if (e) {
        deliver(cls, op, e->peer, e->m.tag, e->data, e->len);
        vb_early_free(cls, e);
    } else {
        vb_list_push(&cls->exp_recvs, op);
    }
    if (op_p)
        *op_p = op;
    return CW_OK;
}

void vb_fail_peer_recvs(vb_class_t *cls, vb_peer_t *peer, cw_status_t st)
{
    struct nau_list *l, *t;

    nau_list_for_each_safe(l, t, &cls->exp_recvs.ops)
    {
        struct cw_na_op *op = nau_container_of(l, struct cw_na_op, link);
        if (op->peer == peer)
            vb_op_done(cls, op, st);
    }
}
