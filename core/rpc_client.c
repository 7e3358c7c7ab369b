/*
 * Client side of an RPC: forward (to a network or to self), receive the
 * response, pull an overflowed response and acknowledge it.
 */
#include "rpc_priv.h"

#include <stdlib.h>
#include <string.h>

/* Longer timeouts (about 35 years) mean "none to speak of": clamped so
 * that deadlines and the grace added to them cannot wrap. */
#define CW_MAX_TIMEOUT_MS (1ull << 40)

void cw_fwd_send_done(cw_handle_t *h, cw_status_t st)
{
    h->send_op = NULL;
    h->pending--;
    if (h->pin_asker || h->pin_warm)
        cw_pin_sent(h); /* core/spread.c: those behind it may go */
    if (st != CW_OK)
        cw_h_fail(h, st);
    else if (h->one_way && !h->overflowed)
        cw_h_set_final(h, CW_OK);
    cw_h_check(h);
}

void cw_fwd_send_cb(const struct cw_na_cb_info *info)
{
    cw_fwd_send_done(info->arg, info->status);
}

static void fwd_ack_cb(const struct cw_na_cb_info *info)
{
    cw_handle_t *h = info->arg;

    h->pending--;
    cw_h_check(h);
}

/* Tell the server it may release an overflowed response. */
static void fwd_send_ack(cw_handle_t *h)
{
    struct cw_wire_hdr hdr = {
        .type = CW_MSG_DONE, .rpc_id = h->id, .req_id = h->req_id};
    cw_na_op_t *op;
    cw_status_t st;

    cw_wire_hdr_encode(h->done_msg, &hdr);
    st = cw_na_msg_send_unexpected(h->net->na, h->done_msg, CW_HDR_SIZE,
                                   h->peer, 0, fwd_ack_cb, h, &op);
    if (st == CW_OK) {
        h->pending++;
        h->ctx->stats.na_ops++;
    }
}

static void fwd_pull_done(cw_bulk_op_t *op, cw_status_t st, void *arg)
{
    cw_handle_t *h = arg;
    (void)op;

    h->bulk_op = NULL;
    h->pending--;
    if (st == CW_OK) {
        const uint8_t *desc = h->out.desc;
        size_t desc_len = h->out.desc_len;
        unsigned ndesc = h->out.ndesc;
        cw_buf_init_reader(&h->out, h->ovf_buf, h->out.len);
        h->out.desc = desc;
        h->out.desc_len = desc_len;
        h->out.ndesc = ndesc;
        cw_h_set_final(h, h->resp_status);
    } else {
        cw_h_fail(h, st);
    }
    fwd_send_ack(h);
    cw_h_check(h);
}

static void fwd_recv_cb(const struct cw_na_cb_info *info);

/* ---- requests waiting for a response, by request id ---------------------*/

static inline unsigned rwait_bucket(uint64_t req_id)
{
    /* Request ids are a keyed permutation (ids.c): any bits are uniform. */
    return (unsigned)(req_id ^ (req_id >> 32)) & (CW_RWAIT_BUCKETS - 1);
}

static void rwait_add(cw_handle_t *h)
{
    cw_handle_t **b = &h->ctx->rwait[rwait_bucket(h->req_id)];

    h->rwait_next = *b;
    *b = h;
    h->rwaiting = true;
}

void cw_rwait_del(cw_handle_t *h)
{
    cw_handle_t **p;

    if (!h->rwaiting)
        return;
    for (p = &h->ctx->rwait[rwait_bucket(h->req_id)]; *p; p = &(*p)->rwait_next)
        if (*p == h) {
            *p = h->rwait_next;
            break;
        }
    h->rwait_next = NULL;
    h->rwaiting = false;
}

bool cw_rpc_batch_resp(cw_network_t *net, const struct cw_wire_msg *m,
                       uint8_t *msg, size_t cap, size_t len,
                       cw_na_addr_t *source)
{
    cw_context_t *ctx = net->ctx;
    cw_handle_t *h;

    for (h = ctx->rwait[rwait_bucket(m->hdr.req_id)]; h; h = h->rwait_next)
        if (h->req_id == m->hdr.req_id)
            break;
    /* Only the peer the request went to may answer it, and once: as on
     * its tag (the plugin matches the source there, we do here). */
    if (h == NULL || h->net != net || h->recv_op == NULL || h->bresp ||
        !cw_na_addr_cmp(net->na, h->peer, source)) {
        ctx->stats.rx_dropped++;
        CW_LOG_RL(CW_LOG_WARN, "core",
                  "a response in a batch on %s matched "
                  "no request waiting for it from its source: dropped",
                  net->uri);
        return false;
    }
    /* Its receive, posted for the response alone, is withdrawn; the
     * response is taken in when that completes (fwd_recv_cb). */
    h->bresp = msg;
    h->bresp_cap = cap;
    h->bresp_len = len;
    if (!h->recv_canceled) {
        h->recv_canceled = true;
        cw_na_cancel(net->na, h->recv_op);
    }
    return true;
}

/* Post the receive for the response (buffer grown by cw_fwd_net). */
static cw_status_t fwd_recv_post(cw_handle_t *h)
{
    cw_network_t *net = h->net;
    cw_status_t st;

    h->recv_canceled = false;
    st = cw_na_msg_recv_expected(net->na, h->msg, net->caps.max_expected_size,
                                 h->peer, h->tag, fwd_recv_cb, h, &h->recv_op);
    if (st != CW_OK)
        return st;
    rwait_add(h);
    h->pending++;
    h->ctx->stats.na_ops++;
    return CW_OK;
}

static void fwd_recv_cb(const struct cw_na_cb_info *info)
{
    cw_handle_t *h = info->arg;
    cw_context_t *ctx = h->ctx;
    struct cw_wire_msg m;
    size_t len = info->u.recv_expected.len;
    cw_status_t st;

    h->recv_op = NULL;
    h->pending--;
    cw_rwait_del(h);
    if (h->bresp != NULL) {
        /* The response came in a batch: whatever ended the receive, the
         * answer is that one, and its buffer becomes the handle's. */
        free(h->msg);
        h->msg = h->bresp;
        h->msg_cap = h->bresp_cap;
        len = h->bresp_len;
        h->bresp = NULL;
    } else if (info->status != CW_OK) {
        cw_h_fail(h, info->status);
        goto out;
    }
    st = cw_wire_decode(h->msg, len, &m);
    if (st != CW_OK) {
        ctx->stats.rx_dropped++;
        CW_LOG_RL(CW_LOG_WARN, "core", "malformed response dropped (%s)",
                  cw_status_str(st));
        cw_h_fail(h, CW_PROTOCOL);
        goto out;
    }
    if (m.hdr.type != CW_MSG_RESP || m.hdr.req_id != h->req_id) {
        /* Well formed but not our answer: someone else's, or forged
         * (docs/wire.md, "Forged responses").  Not trusted, and not a reason
         * to give up on the real one: wait for it again. */
        ctx->stats.rx_dropped++;
        CW_LOG_RL(CW_LOG_WARN, "core",
                  "a message on the response tag of "
                  "request %016llx was not its response: dropped",
                  (unsigned long long)h->req_id);
        if (!h->final_set) {
            st = fwd_recv_post(h);
            if (st != CW_OK)
                cw_h_fail(h, st);
        }
        goto out;
    }
    ctx->stats.rx_responses++;
    if (m.hdr.flags & CW_HF_PIN)
        cw_pin_answer(h, m.dest, m.hdr.dest_len);
    if (h->final_set) {
        /* Too late for the caller; still release the server's memory. */
        if (m.hdr.flags & CW_HF_OVERFLOW)
            fwd_send_ack(h);
        goto out;
    }
    cw_buf_init_reader(&h->out, m.payload, m.hdr.payload_len);
    h->out.desc = m.desc;
    h->out.desc_len = m.hdr.desc_len;
    h->out.ndesc = m.hdr.ndesc;
    if (m.hdr.flags & CW_HF_OVERFLOW) {
        h->resp_status = (cw_status_t)m.hdr.status;
        /* The size is the server's word (rpc_server.c, requests). */
        st = cw_payload_check(ctx, &m, "answer", h->net);
        if (st == CW_OK)
            st = cw_h_pull(h, &m, h->peer, fwd_pull_done);
        if (st != CW_OK) {
            cw_h_fail(h, st);
            fwd_send_ack(h);
        }
        goto out;
    }
    cw_h_set_final(h, (cw_status_t)m.hdr.status);
out:
    cw_h_check(h);
}

cw_status_t cw_fwd_net(cw_handle_t *h)
{
    cw_context_t *ctx = h->ctx;
    cw_network_t *net = h->net;
    const char *route = h->fwd_route ? h->fwd_route : h->addr->route;
    uint64_t now = cw_now_ns();
    struct cw_wire_hdr hdr;
    uint8_t *msg;
    size_t total;
    cw_status_t st;

    memset(&hdr, 0, sizeof(hdr));
    hdr.type = CW_MSG_REQ;
    hdr.flags = h->one_way ? CW_HF_ONE_WAY : 0;
    if (cw_pin_route(h, &hdr.flags))
        return CW_OK; /* waits for its peer's move (core/spread.c) */
    /* Answers may come batched where this network takes unexpected
     * messages and batching pays (docs/wire.md, "Batches"). */
    if (!h->one_way && net->nurecv > 0 &&
        (net->caps.flags & CW_NA_CAP_COALESCE))
        hdr.flags |= CW_HF_BATCHES;
    if (h->idempotent) {
        hdr.flags |= CW_HF_IDEMPOTENT | (h->resume ? CW_HF_RESUME : 0);
        hdr.resume_id = h->resume_id;
    }
    hdr.rpc_id = h->id;
    hdr.req_id = h->req_id;
    hdr.budget_us = h->deadline_ns > now ? (h->deadline_ns - now) / 1000 : 0;
    hdr.hops = h->hops;
    h->tag = cw_net_tag(net);
    hdr.resp_tag = h->tag;
    hdr.resp_limit = net->caps.max_expected_size > 0xffffff
                         ? 0xffffff
                         : (uint32_t)net->caps.max_expected_size;
    if (h->fwd_in)
        st = cw_msg_build(h, &h->in, net->caps.max_unexpected_size, route,
                          h->desc_copy, h->desc_copy_len, h->raw_ndesc, &hdr,
                          &msg, &total);
    else
        st = cw_msg_build(h, &h->in, net->caps.max_unexpected_size, route, NULL,
                          0, 0, &hdr, &msg, &total);
    if (st != CW_OK)
        return st;
    h->overflowed = (hdr.flags & CW_HF_OVERFLOW) != 0;
    if (!h->one_way || h->overflowed) {
        st = cw_grow(&h->msg, &h->msg_cap, net->caps.max_expected_size);
        if (st != CW_OK)
            return st;
        st = fwd_recv_post(h);
        if (st != CW_OK)
            return st;
    }
    if (cw_sq_offer(h, msg, total))
        st = CW_OK;
    else
        st = cw_na_msg_send_unexpected(net->na, msg, total, h->peer, 0,
                                       cw_fwd_send_cb, h, &h->send_op);
    if (st != CW_OK) {
        /* The receive is posted: report the failure through completion. */
        h->send_op = NULL;
        cw_h_fail(h, st);
        return CW_OK;
    }
    h->pending++;
    h->sent = true;
    ctx->stats.na_ops++;
    ctx->stats.tx_requests++;
    return CW_OK;
}

cw_status_t cw_fwd_self(cw_handle_t *h)
{
    cw_context_t *ctx = h->ctx;
    cw_handle_t *sh;
    cw_status_t st;

    sh = cw_handle_alloc(ctx, true);
    if (sh == NULL)
        return CW_NOMEM;
    sh->self_call = true;
    sh->id = h->id;
    sh->net = h->net;
    sh->src.ctx = ctx;
    sh->src.net = h->net;
    sh->src.embedded = true;
    sh->src.self = true;
    st = cw_na_addr_dup(h->net->na, h->net->self, &sh->src.na);
    if (st != CW_OK)
        goto err_unref;
    cw_net_ref(h->net);
    st = cw_grow(&sh->msg, &sh->msg_cap, h->in.len ? h->in.len : 1);
    if (st != CW_OK)
        goto err_unref;
    if (h->in.len)
        memcpy(sh->msg, h->in.data, h->in.len);
    cw_buf_init_reader(&sh->in, sh->msg, h->in.len);
    st = cw_buf_copy_bulks(&sh->in, &h->in);
    if (st != CW_OK)
        goto err_unref;
    sh->req_id = h->req_id;
    sh->deadline_ns = h->deadline_ns;
    sh->one_way = h->one_way;
    sh->hops = h->hops;
    ctx->stats.self_rpcs++;
    if (h->one_way) {
        cw_h_set_final(h, CW_OK);
    } else {
        sh->self_peer = h;
        h->self_peer = sh;
    }
    cw_rpc_dispatch(sh);
    return CW_OK;

err_unref:
    cw_handle_unref_locked(sh);
    return st;
}

cw_status_t cw_forward_locked(cw_handle_t *h, uint64_t timeout_ms,
                              cw_forward_cb_t cb, void *arg)
{
    cw_context_t *ctx = h->ctx;
    cw_status_t st;

    CW_ASSERT_LOCKED(&ctx->lock);
    if (h->state == CW_H_ACTIVE)
        return CW_BUSY;
    if (ctx->destroying)
        return CW_CANCELED;
    if (h->net && h->net->closed)
        return CW_DISCONNECTED; /* cw_network_close */
    if (h->fwd_xctx && cw_fwd_in_canceled_xctx(h)) {
        /* The caller canceled before this got going: its cancel found
         * nothing in flight to stop. */
        return CW_CANCELED;
    }
    st = h->in.err;
    if (st != CW_OK)
        return st;
    if (timeout_ms == 0)
        timeout_ms = h->cls_timeout_ms ? h->cls_timeout_ms
                                       : ctx->opts.default_timeout_ms;
    if (timeout_ms > CW_MAX_TIMEOUT_MS)
        timeout_ms = CW_MAX_TIMEOUT_MS;
    h->fcb = cb;
    h->farg = arg;
    if (!h->reforwarding) {
        h->reforwards = 0;
        if (h->fwd_in == NULL)
            h->resume = false; /* a gateway's is set by cw_fwd_set_resume */
    }
    h->final_set = false;
    h->queued = false;
    h->pending = 0;
    h->overflowed = false;
    h->sent = false;
    h->linger = false;
    h->user_done = false;
    h->cqe.fn = cw_h_complete;
    if (h->fwd_in)
        h->deadline_ns = h->fwd_in->deadline_ns;
    else
        h->deadline_ns = cw_now_ns() + timeout_ms * 1000000ull;
    h->req_id = cw_ctx_req_id(ctx);
    if (h->ovf_local) {
        cw_bulk_unref(h->ovf_local);
        h->ovf_local = NULL;
    }
    /* In flight (listed, referenced) before anything can complete it. */
    cw_ctx_timer_at(ctx, h->deadline_ns);
    h->state = CW_H_ACTIVE;
    atomic_fetch_add(&h->refs, 1);
    cw_list_add(&ctx->inflight, &h->link);
    if (cw_addr_is_self(h->addr) && !h->fwd_in)
        st = cw_fwd_self(h);
    else
        st = cw_fwd_net(h);
    if (st != CW_OK) {
        cw_list_del(&h->link);
        atomic_fetch_sub(&h->refs, 1); /* the caller still holds one */
        if (h->ovf_local) {
            cw_bulk_unref(h->ovf_local);
            h->ovf_local = NULL;
        }
        h->state = CW_H_IDLE;
        return st;
    }
    cw_h_check(h);
    cw_ctx_wake(ctx);
    return CW_OK;
}

cw_status_t cw_forward(cw_handle_t *h, uint64_t timeout_ms, cw_forward_cb_t cb,
                       void *arg)
{
    cw_status_t st;

    if (h == NULL || h->server)
        return CW_INVALID_ARG;
    pthread_mutex_lock(&h->ctx->lock);
    st = cw_forward_locked(h, timeout_ms, cb, arg);
    pthread_mutex_unlock(&h->ctx->lock);
    return st;
}
