/*
 * na-ucx: unexpected messages (active messages carrying the sender's listen
 * address and the tag) and expected messages (UCP tag matching; the upper
 * 32 tag bits name the sender, the lower 32 are the caller's tag).
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "ucx.h"

static inline uint64_t ucx_tag64(uint32_t sender, uint32_t tag)
{
    return ((uint64_t)sender << 32) | tag;
}

/* Account for a request just returned by UCX: completed at once (NULL),
 * failed (error pointer: the caller discards the op), or in flight. */
static cw_status_t ucx_track(struct cw_na_op *op, void **slot,
                             ucs_status_ptr_t req)
{
    if (req == NULL) {
        ucx_op_finish(op, CW_OK);
        return CW_OK;
    }
    if (UCS_PTR_IS_ERR(req))
        return ucx_status(UCS_PTR_STATUS(req));
    ucx_op_req_posted(op, slot, req);
    return CW_OK;
}

static void ucx_recv_data_cb(void *req, ucs_status_t st, size_t length,
                             void *user_data)
{
    struct cw_na_op *op = user_data;

    if (st == UCS_OK)
        op->len = length;
    ucx_op_req_done(op, req, st, true);
}

/* Receive rendezvous data of an unexpected message into the op's buffer. */
static void ucx_unexp_rndv(struct ucx_cls *cls, struct cw_na_op *op, void *desc,
                           size_t length)
{
    ucp_request_param_t p = {0};
    ucs_status_ptr_t req;

    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.recv_am = ucx_recv_data_cb;
    p.user_data = op;
    op->len = length;
    req = ucp_am_recv_data_nbx(cls->worker, desc, op->buf, length, &p);
    if (UCS_PTR_IS_ERR(req)) {
        UCX_WARN_RL(cls, "ucp_am_recv_data_nbx() failed: %s",
                    ucs_status_string(UCS_PTR_STATUS(req)));
        ucx_op_finish(op, ucx_status(UCS_PTR_STATUS(req)));
        return;
    }
    ucx_track(op, &op->data_req, req);
}

/* Queued unexpected messages lie in slabs of the instance's own
 * (nau_slab.h), unmapped once emptied, at most unexpected_queue_bytes of
 * them. */
static struct ucx_umsg *ucx_umsg_alloc(struct ucx_cls *cls, size_t size)
{
    struct nau_slab *slab;
    struct ucx_umsg *m =
        nau_slab_alloc(&cls->slabs, size, cls->unexp_queue_max, &slab);

    if (m != NULL)
        m->slab = slab;
    return m;
}

static void ucx_umsg_free(struct ucx_cls *cls, struct ucx_umsg *m)
{
    nau_slab_free(&cls->slabs, m, sizeof(*m) + (m->rndv ? 0 : m->len), m->slab);
}

/* Hand a queued message to a posted receive. */
static void ucx_unexp_deliver(struct ucx_cls *cls, struct cw_na_op *op,
                              struct ucx_umsg *m)
{
    op->source = m->source;
    op->tag = m->tag;
    if (m->len > op->buf_len) {
        if (m->rndv)
            ucp_am_data_release(cls->worker, m->data);
        ucx_op_finish(op, CW_OVERFLOW);
    } else if (m->rndv) {
        ucx_unexp_rndv(cls, op, m->data, m->len);
    } else {
        memcpy(op->buf, m->data, m->len);
        op->len = m->len;
        ucx_op_finish(op, CW_OK);
    }
    ucx_umsg_free(cls, m);
}

static ucs_status_t ucx_am_unexp_cb(void *arg, const void *header, size_t hlen,
                                    void *data, size_t length,
                                    const ucp_am_recv_param_t *param)
{
    struct ucx_cls *cls = arg;
    const uint8_t *h = header;
    char str[UCX_ADDR_STR_MAX];
    struct cw_na_addr *peer;
    struct ucx_conn *conn = NULL;
    bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    uint32_t magic, tag;
    struct ucx_umsg *m;
    size_t alen, cost;

    if (cls->finalizing)
        return UCS_OK;
    if (hlen < UCX_UNEXP_HDR_FIXED)
        goto drop;
    memcpy(&magic, h, 4);
    memcpy(&tag, h + 4, 4);
    alen = h[8];
    if (magic != UCX_WIRE_MAGIC || alen == 0 || alen >= sizeof(str) ||
        hlen != UCX_UNEXP_HDR_FIXED + alen)
        goto drop;
    /* The sender names itself; the connection it came on usually knows
     * that peer already, which spares parsing and hashing the name (about
     * 130 of some 470 instructions a message, callgrind). */
    if (memchr(h + UCX_UNEXP_HDR_FIXED, '\0', alen) != NULL)
        goto drop;
    if (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)
        conn = ucx_conn_by_ep(cls, param->reply_ep);
    if (conn != NULL && conn->peer != NULL && conn->peer->str[alen] == '\0' &&
        memcmp(conn->peer->str, h + UCX_UNEXP_HDR_FIXED, alen) == 0) {
        peer = conn->peer;
        nau_ptable_ref(&peer->pnode);
    } else {
        memcpy(str, h + UCX_UNEXP_HDR_FIXED, alen);
        str[alen] = '\0';
        if (ucx_peer_get(cls, str, true, &peer) != CW_OK)
            goto drop;
    }
    if (conn != NULL) {
        ucx_conn_identify(cls, conn, peer);
        if (cls->live_timeout_ns) {
            conn->heard_ns = cls->host->now_ns();
            conn->probing = false;
        }
    }

    if (!nau_list_empty(&cls->unexp_posted)) {
        struct cw_na_op *op =
            nau_container_of(cls->unexp_posted.next, struct cw_na_op, link);
        nau_list_del(&op->link);
        op->source = peer;
        op->tag = tag;
        if (length > op->buf_len) {
            ucx_op_finish(op, CW_OVERFLOW);
        } else if (rndv) {
            ucx_unexp_rndv(cls, op, data, length);
        } else {
            memcpy(op->buf, data, length);
            op->len = length;
            ucx_op_finish(op, CW_OK);
        }
        return UCS_OK;
    }

    /* No buffer posted: keep it until one is, behind the sender's earlier
     * ones.  Eager data is copied, so what the queue holds is bounded in
     * all and per sender, each message charged its copy and its record
     * (a rendezvous message's data stays at the sender: its record
     * only). */
    cost = UCX_UMSG_OVERHEAD + (rndv ? 0 : length);
    if (cost > cls->unexp_queue_max - cls->unexp_queued) {
        ucx_peer_put(cls, peer);
        ucx_log_dropped(cls, "unexpected message (queue full: no receive "
                             "posted)");
        return UCS_OK;
    }
    if (cost > cls->unexp_peer_max - peer->uq_bytes) {
        ucx_peer_put(cls, peer);
        ucx_log_dropped(cls, "unexpected message (its sender's share of the "
                             "queue is full: no receive posted)");
        return UCS_OK;
    }
    m = ucx_umsg_alloc(cls, sizeof(*m) + (rndv ? 0 : length));
    if (m == NULL)
        goto nomem;
    m->source = peer;
    m->tag = tag;
    m->len = length;
    m->cost = cost;
    m->rndv = rndv;
    if (rndv) {
        m->data = data;
    } else {
        m->data = m->copy;
        if (length > 0)
            memcpy(m->copy, data, length);
    }
    nau_list_add_tail(&peer->uq, &m->link);
    if (!nau_list_linked(&peer->uq_link))
        nau_list_add_tail(&cls->unexp_ready, &peer->uq_link);
    cls->unexp_queued += cost;
    peer->uq_bytes += cost;
    return rndv ? UCS_INPROGRESS : UCS_OK;

nomem:
    UCX_ERR_RL(cls, "out of memory queueing an unexpected message from %s",
               peer->str);
    ucx_peer_put(cls, peer);
    return UCS_OK;
drop:
    ucx_log_dropped(cls, "malformed unexpected message header");
    return UCS_OK;
}

cw_status_t ucx_msg_register_am(struct ucx_cls *cls)
{
    return ucx_set_am_handler(cls, UCX_AM_UNEXP, ucx_am_unexp_cb,
                              UCP_AM_FLAG_WHOLE_MSG);
}

void ucx_msg_flush_queue(struct ucx_cls *cls)
{
    while (!nau_list_empty(&cls->unexp_ready)) {
        struct cw_na_addr *peer =
            nau_container_of(cls->unexp_ready.next, struct cw_na_addr, uq_link);
        struct nau_list all;

        /* Off the peer first: its last message's reference may free it. */
        nau_list_del(&peer->uq_link);
        nau_list_init(&all);
        while (!nau_list_empty(&peer->uq)) {
            struct nau_list *l = peer->uq.next;

            nau_list_del(l);
            nau_list_add_tail(&all, l);
        }
        peer->uq_bytes = 0;
        while (!nau_list_empty(&all)) {
            struct ucx_umsg *m =
                nau_container_of(all.next, struct ucx_umsg, link);

            nau_list_del(&m->link);
            if (m->rndv)
                ucp_am_data_release(cls->worker, m->data);
            ucx_peer_put(cls, m->source);
            ucx_umsg_free(cls, m);
        }
    }
    cls->unexp_queued = 0;
    /* Every message is gone: so is every slab. */
    if (nau_slabs_fini(&cls->slabs) != 0)
        assert(!"a slab outlives its messages");
}

/* The next queued message to hand out: the oldest of the peer whose turn
 * it is, which then goes to the back of the line if it has more. */
static struct ucx_umsg *ucx_unexp_next(struct ucx_cls *cls)
{
    struct cw_na_addr *peer =
        nau_container_of(cls->unexp_ready.next, struct cw_na_addr, uq_link);
    struct ucx_umsg *m = nau_container_of(peer->uq.next, struct ucx_umsg, link);

    nau_list_del(&m->link);
    nau_list_del(&peer->uq_link);
    if (!nau_list_empty(&peer->uq))
        nau_list_add_tail(&cls->unexp_ready, &peer->uq_link);
    cls->unexp_queued -= m->cost;
    peer->uq_bytes -= m->cost;
    return m;
}

static void ucx_send_params(ucp_request_param_t *p, struct cw_na_op *op)
{
    memset(p, 0, sizeof(*p));
    p->op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p->cb.send = ucx_send_cb;
    p->user_data = op;
}

/* Common checks of both sends; on success the op exists and @p conn_p
 * names the endpoint to use. */
static cw_status_t ucx_send_prep(struct ucx_cls *cls, const void *buf,
                                 size_t len, cw_na_addr_t *dest,
                                 enum cw_na_op_type type, cw_na_cb_t cb,
                                 void *arg, struct ucx_conn **conn_p,
                                 struct cw_na_op **op_p)
{
    cw_status_t ret;

    if (dest == NULL || (buf == NULL && len > 0))
        return CW_INVALID_ARG;
    if (len > cls->eager_size)
        return CW_OVERFLOW;
    ret = ucx_peer_conn(cls, dest, conn_p);
    if (ret != CW_OK)
        return ret;
    *op_p = ucx_op_new(cls, type, cb, arg);
    if (*op_p == NULL)
        return CW_NOMEM;
    return CW_OK;
}

cw_status_t ucx_msg_send_unexpected(cw_na_class_t *c, const void *buf,
                                    size_t len, cw_na_addr_t *dest,
                                    uint32_t tag, cw_na_cb_t cb, void *arg,
                                    cw_na_op_t **op_p)
{
    struct ucx_cls *cls = ucx_cls(c);
    size_t alen = strlen(cls->self->str);
    ucp_request_param_t p;
    struct ucx_conn *conn;
    struct cw_na_op *op;
    uint32_t magic = UCX_WIRE_MAGIC;
    cw_status_t ret;

    ret = ucx_send_prep(cls, buf, len, dest, CW_NA_OP_SEND_UNEXPECTED, cb, arg,
                        &conn, &op);
    if (ret != CW_OK)
        return ret;
    memcpy(op->hdr.unexp, &magic, 4);
    memcpy(op->hdr.unexp + 4, &tag, 4);
    op->hdr.unexp[8] = (uint8_t)alen;
    memcpy(op->hdr.unexp + UCX_UNEXP_HDR_FIXED, cls->self->str, alen);
    ucx_send_params(&p, op);
    p.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_AM_SEND_FLAG_REPLY;
    ret = ucx_track(op, &op->req,
                    ucp_am_send_nbx(conn->ep, UCX_AM_UNEXP, op->hdr.unexp,
                                    UCX_UNEXP_HDR_FIXED + alen, buf, len, &p));
    if (ret != CW_OK) {
        ucx_op_discard(op);
        return ret;
    }
    if (op_p)
        *op_p = op;
    return CW_OK;
}

cw_status_t ucx_msg_recv_unexpected(cw_na_class_t *c, void *buf, size_t len,
                                    cw_na_cb_t cb, void *arg, cw_na_op_t **op_p)
{
    struct ucx_cls *cls = ucx_cls(c);
    struct cw_na_op *op;

    if (buf == NULL && len > 0)
        return CW_INVALID_ARG;
    op = ucx_op_new(cls, CW_NA_OP_RECV_UNEXPECTED, cb, arg);
    if (op == NULL)
        return CW_NOMEM;
    op->buf = buf;
    op->buf_len = len;
    if (op_p)
        *op_p = op;
    if (!nau_list_empty(&cls->unexp_ready)) {
        ucx_unexp_deliver(cls, op, ucx_unexp_next(cls));
        return CW_OK;
    }
    nau_list_add_tail(&cls->unexp_posted, &op->link);
    return CW_OK;
}

cw_status_t ucx_msg_send_expected(cw_na_class_t *c, const void *buf, size_t len,
                                  cw_na_addr_t *dest, uint32_t tag,
                                  cw_na_cb_t cb, void *arg, cw_na_op_t **op_p)
{
    struct ucx_cls *cls = ucx_cls(c);
    ucp_request_param_t p;
    struct ucx_conn *conn;
    struct cw_na_op *op;
    cw_status_t ret;

    ret = ucx_send_prep(cls, buf, len, dest, CW_NA_OP_SEND_EXPECTED, cb, arg,
                        &conn, &op);
    if (ret != CW_OK)
        return ret;
    ucx_send_params(&p, op);
    ret = ucx_track(op, &op->req,
                    ucp_tag_send_nbx(conn->ep, buf, len,
                                     ucx_tag64(cls->self_tag_id, tag), &p));
    if (ret != CW_OK) {
        ucx_op_discard(op);
        return ret;
    }
    if (op_p)
        *op_p = op;
    return CW_OK;
}

/* A send UCX completes in the call or not at all
 * (UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL: its short protocol, the data copied
 * to the socket or the transport's buffer), so no operation is needed.
 * UCS_ERR_NO_RESOURCE, where it would have queued a request (a full send
 * buffer, a connection not wired up yet, a message past the short size):
 * CW_AGAIN.  The same ordering as a send: UCX tries the short protocol
 * first for those too. */
cw_status_t ucx_msg_inject(cw_na_class_t *c, const void *buf, size_t len,
                           cw_na_addr_t *dest, uint32_t tag, bool expected)
{
    struct ucx_cls *cls = ucx_cls(c);
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL};
    size_t alen = strlen(cls->self->str);
    uint8_t hdr[UCX_UNEXP_HDR_MAX];
    uint32_t magic = UCX_WIRE_MAGIC;
    struct ucx_conn *conn;
    ucs_status_ptr_t req;
    cw_status_t ret;

    if (dest == NULL || (buf == NULL && len > 0))
        return CW_INVALID_ARG;
    if (len > cls->eager_size)
        return CW_OVERFLOW;
    ret = ucx_peer_conn(cls, dest, &conn);
    if (ret != CW_OK)
        return ret;
    if (expected) {
        req = ucp_tag_send_nbx(conn->ep, buf, len,
                               ucx_tag64(cls->self_tag_id, tag), &p);
    } else {
        memcpy(hdr, &magic, 4);
        memcpy(hdr + 4, &tag, 4);
        hdr[8] = (uint8_t)alen;
        memcpy(hdr + UCX_UNEXP_HDR_FIXED, cls->self->str, alen);
        p.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
        p.flags = UCP_AM_SEND_FLAG_REPLY;
        req = ucp_am_send_nbx(conn->ep, UCX_AM_UNEXP, hdr,
                              UCX_UNEXP_HDR_FIXED + alen, buf, len, &p);
    }
    if (UCS_PTR_IS_PTR(req)) {
        /* Not what UCX does with the flag; should one, its request uses
         * our buffers until it ends, so it ends here (its completion, like
         * every UCX callback of ours, only queues). */
        while (ucp_request_check_status(req) == UCS_INPROGRESS)
            ucp_worker_progress(cls->worker);
        ucp_request_free(req);
        /* What those calls queued in UCX is taken out, as after every
         * progress (the held receives wait for it: ucx_early.c). */
        ucx_early_drain(cls);
        return CW_OK;
    }
    if (UCS_PTR_STATUS(req) == UCS_ERR_NO_RESOURCE)
        return CW_AGAIN;
    return ucx_status(UCS_PTR_STATUS(req));
}

static void ucx_tag_recv_cb(void *req, ucs_status_t st,
                            const ucp_tag_recv_info_t *info, void *user_data)
{
    struct cw_na_op *op = user_data;

    if (st == UCS_OK)
        op->len = info->length;
    ucx_op_req_done(op, req, st, true);
}

/* Post @p op's receive to UCX, which matches its message as it lands. */
static cw_status_t ucx_recv_post(struct ucx_cls *cls, struct cw_na_op *op,
                                 uint64_t tag)
{
    ucp_request_param_t p = {0};
    ucs_status_ptr_t req;

    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                     UCP_OP_ATTR_FIELD_RECV_INFO;
    p.cb.recv = ucx_tag_recv_cb;
    p.user_data = op;
    p.recv_info.tag_info = &op->tag_info;
    req = ucp_tag_recv_nbx(cls->worker, op->buf, op->buf_len, tag, UINT64_MAX,
                           &p);
    if (req == NULL) {
        op->len = op->tag_info.length;
        ucx_op_finish(op, CW_OK);
    } else if (UCS_PTR_IS_ERR(req)) {
        if (UCS_PTR_STATUS(req) != UCS_ERR_MESSAGE_TRUNCATED)
            return ucx_status(UCS_PTR_STATUS(req));
        ucx_op_finish(op, CW_OVERFLOW);
    } else {
        ucx_op_req_posted(op, &op->req, req);
    }
    return CW_OK;
}

/* Where a caller has several answers awaited, its receive is held by the
 * plugin instead of posted to UCX (ucx_early.c): from this many on.  Its
 * answers then mostly come inside batches (docs/wire.md, "Batches"), and
 * the receive posted for each had to be cancelled in UCX, a
 * ucp_tag_recv_nbx(), a ucp_request_cancel() and the cancelled request's
 * completion, where a held one costs a matcher insert and remove: a
 * gateway forwarding over ucx+tcp runs 220-350 fewer instructions per
 * forward (callgrind, tests/bench/gw-instr.sh).  A lone answer costs more
 * through UCX's unexpected queue than a posted receive (about 330 instructions
 * of a 64 B round trip, tests/bench/rtt-instr.sh), so a caller with fewer
 * than four calls out keeps posting. */
#define UCX_HOLD_AFTER 4u

cw_status_t ucx_msg_recv_expected(cw_na_class_t *c, void *buf, size_t len,
                                  cw_na_addr_t *source, uint32_t tag,
                                  cw_na_cb_t cb, void *arg, cw_na_op_t **op_p)
{
    struct ucx_cls *cls = ucx_cls(c);
    struct ucx_conn *conn;
    struct cw_na_op *op;
    uint64_t tag64;
    bool hold;
    cw_status_t st = CW_OK;

    if (source == NULL || (buf == NULL && len > 0))
        return CW_INVALID_ARG;
    /* An endpoint to the source lets its failure fail this receive; a
     * connection error now is reported by that error path too. */
    (void)ucx_peer_conn(cls, source, &conn);
    op = ucx_op_new(cls, CW_NA_OP_RECV_EXPECTED, cb, arg);
    if (op == NULL)
        return CW_NOMEM;
    op->buf = buf;
    op->buf_len = len;
    op->peer = source;
    nau_ptable_ref(&source->pnode);
    hold = cls->exp_waiting >= UCX_HOLD_AFTER;
    op->exp_counted = true;
    cls->exp_waiting++;
    tag64 = ucx_tag64(source->tag_id, tag);
    if (!ucx_early_take(cls, op, tag64))
        st = hold
                 ? nau_match_insert(&cls->held, &op->hm, source->tag_id, tag, 0)
                 : ucx_recv_post(cls, op, tag64);
    if (st != CW_OK) {
        ucx_op_discard(op);
        return st;
    }
    if (op->state == UCX_OP_ACTIVE) /* waits for its message */
        nau_list_add_tail(&source->recvs, &op->link);
    if (op_p)
        *op_p = op;
    return CW_OK;
}

/* The peer's connection broke: its expected receives end with @p st. */
void ucx_msg_fail_peer(struct ucx_cls *cls, struct cw_na_addr *peer,
                       cw_status_t st)
{
    struct nau_list *l, *next;

    for (l = peer->recvs.next; l != &peer->recvs; l = next) {
        struct cw_na_op *op = nau_container_of(l, struct cw_na_op, link);
        next = l->next;
        op->cancel_status = st;
        if (op->req)
            ucp_request_cancel(cls->worker, op->req);
        else
            ucx_op_finish(op, st);
    }
}
