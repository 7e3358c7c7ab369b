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

void cw_forward_send_done(cw_handle_t *h, cw_status_t st)
{
    h->use.send_op = NULL;
    h->use.pending--;
    if (cw_h_flag(h, CW_HFL_PIN_ASKER) || cw_h_flag(h, CW_HFL_PIN_WARM))
        cw_pin_sent(h); /* core/spread.c: those behind it may go */
    if (st != CW_OK)
        cw_h_fail(h, st);
    else if ((h->use.rflags & (CW_HF_ONE_WAY | CW_HF_OVERFLOW)) ==
             CW_HF_ONE_WAY)
        cw_h_set_final(h, CW_OK);
    cw_h_check(h);
}

void cw_forward_send_cb(const struct cw_na_cb_info *info)
{
    cw_forward_send_done(info->arg, info->status);
}

/* Tell the server it may release an overflowed response.  The caller
 * does not wait for it (notice.c): its answer is in, or its outcome
 * decided, whatever becomes of the acknowledgment. */
static void fwd_send_ack(cw_handle_t *h)
{
    struct cw_wire_hdr hdr = {
        .type = CW_MSG_DONE, .rpc_id = h->use.id, .req_id = h->use.req_id};

    (void)cw_notice_send(h->ctx, h->use.net, h->use.cli.peer, &hdr);
}

static void fwd_pull_done(cw_bulk_op_t *op, cw_status_t st, void *arg)
{
    cw_handle_t *h = arg;
    (void)op;

    h->use.bulk_op = NULL;
    h->use.pending--;
    if (st == CW_OK) {
        const uint8_t *desc = h->out.desc;
        size_t desc_len = h->out.desc_len;
        unsigned ndesc = h->out.ndesc;
        cw_buf_init_reader(&h->out, h->ovf_buf, h->out.len);
        h->out.desc = desc;
        h->out.desc_len = desc_len;
        h->out.ndesc = ndesc;
        cw_h_set_final(h, h->use.cli.resp_status);
    } else {
        cw_h_fail(h, st);
    }
    /* The server keeps the answer exposed until this acknowledgment, or
     * until its own deadline.  Not to a peer whose connection failed under
     * the pull: the send would wait for the plugin to give the peer up
     * (na-ofi: peer_timeout_ms, 5 s), and the caller with it. */
    if (!cw_status_peer_gone(st))
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
    cw_handle_t **b = &h->ctx->rwait[rwait_bucket(h->use.req_id)];

    h->use.cli.rwait_next = *b;
    *b = h;
    cw_h_flag_set(h, CW_HFL_RWAIT);
}

void cw_rwait_del(cw_handle_t *h)
{
    cw_handle_t **p;

    if (!cw_h_flag(h, CW_HFL_RWAIT))
        return;
    for (p = &h->ctx->rwait[rwait_bucket(h->use.req_id)]; *p;
         p = &(*p)->use.cli.rwait_next)
        if (*p == h) {
            *p = h->use.cli.rwait_next;
            break;
        }
    h->use.cli.rwait_next = NULL;
    cw_h_flag_clear(h, CW_HFL_RWAIT);
}

bool cw_rpc_batch_resp(cw_network_t *net, const struct cw_wire_msg *m,
                       uint8_t *msg, size_t cap, size_t len,
                       cw_na_addr_t *source)
{
    cw_context_t *ctx = net->ctx;
    cw_handle_t *h;

    for (h = ctx->rwait[rwait_bucket(m->hdr.req_id)]; h;
         h = h->use.cli.rwait_next)
        if (h->use.req_id == m->hdr.req_id)
            break;
    /* Only the peer the request went to may answer it, and once: as on
     * its tag (the plugin matches the source there, we do here). */
    if (h == NULL || h->use.net != net || h->use.recv_op == NULL ||
        h->use.cli.bresp || !cw_na_addr_cmp(net->na, h->use.cli.peer, source)) {
        ctx->stats.rx_dropped++;
        CW_LOG_RL(CW_LOG_WARN, "core",
                  "a response in a batch on %s matched "
                  "no request waiting for it from its source: dropped",
                  net->uri);
        return false;
    }
    /* Its receive, posted for the response alone, is withdrawn; the
     * response is taken in when that completes (fwd_recv_cb). */
    h->use.cli.bresp = msg;
    h->use.cli.bresp_cap = cap;
    h->use.cli.bresp_len = len;
    if (!cw_h_flag(h, CW_HFL_RECV_CANCELED)) {
        cw_h_flag_set(h, CW_HFL_RECV_CANCELED);
        cw_na_cancel(net->na, h->use.recv_op);
    }
    return true;
}

/* Post the receive for the response (buffer grown by cw_forward_net). */
static inline cw_status_t fwd_recv_post(cw_handle_t *h)
{
    cw_network_t *net = h->use.net;
    cw_status_t st;

    cw_h_flag_clear(h, CW_HFL_RECV_CANCELED);
    st = cw_na_msg_recv_expected(net->na, h->msg, net->caps.max_expected_size,
                                 h->use.cli.peer, h->use.tag, fwd_recv_cb, h,
                                 &h->use.recv_op);
    if (st != CW_OK)
        return st;
    rwait_add(h);
    h->use.pending++;
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

    h->use.recv_op = NULL;
    h->use.pending--;
    cw_rwait_del(h);
    if (h->use.cli.bresp != NULL) {
        /* The response came in a batch: whatever ended the receive, the
         * answer is that one, and its buffer becomes the handle's. */
        free(h->msg);
        h->msg = h->use.cli.bresp;
        h->msg_cap = h->use.cli.bresp_cap;
        len = h->use.cli.bresp_len;
        h->use.cli.bresp = NULL;
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
    if (m.hdr.type != CW_MSG_RESP || m.hdr.req_id != h->use.req_id) {
        /* Well formed but not our answer: someone else's, or forged
         * (docs/wire.md, "Forged responses").  Not trusted, and not a reason
         * to give up on the real one: wait for it again. */
        ctx->stats.rx_dropped++;
        CW_LOG_RL(CW_LOG_WARN, "core",
                  "a message on the response tag of "
                  "request %016llx was not its response: dropped",
                  (unsigned long long)h->use.req_id);
        if (h->use.state == CW_H_ACTIVE) {
            st = fwd_recv_post(h);
            if (st != CW_OK)
                cw_h_fail(h, st);
        }
        goto out;
    }
    ctx->stats.rx_responses++;
    if (m.hdr.flags & CW_HF_PIN)
        cw_pin_answer(h, m.dest, m.hdr.dest_len);
    if (h->use.state != CW_H_ACTIVE) {
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
        h->use.cli.resp_status = (cw_status_t)m.hdr.status;
        /* The size is the server's word (rpc_server.c, requests). */
        st = cw_payload_check(ctx, &m, "answer", h->use.net);
        if (st == CW_OK)
            st = cw_h_pull(h, &m, h->use.cli.peer, fwd_pull_done);
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

cw_status_t cw_forward_net(cw_handle_t *h)
{
    cw_context_t *ctx = h->ctx;
    cw_network_t *net = h->use.net;
    const char *route =
        h->use.relay.route ? h->use.relay.route : h->use.cli.addr->route;
    uint64_t now = cw_now_pass_ns();
    struct cw_wire_hdr hdr;
    uint8_t *msg;
    size_t total;
    cw_status_t st;

    CW_LOCK_ASSERT_HELD(&h->ctx->lock);
    memset(&hdr, 0, sizeof(hdr));
    hdr.type = CW_MSG_REQ;
    hdr.flags = h->use.rflags & CW_HF_ONE_WAY;
    if (cw_pin_route(h, &hdr.flags))
        return CW_OK; /* waits for its peer's move (core/spread.c) */
    /* Answers may come batched where this network takes unexpected
     * messages and batching pays (docs/wire.md, "Batches"). */
    if (!(h->use.rflags & CW_HF_ONE_WAY) && net->nurecv > 0 &&
        (net->caps.flags & CW_NA_CAP_COALESCE))
        hdr.flags |= CW_HF_BATCHES;
    if (h->use.rflags & CW_HF_IDEMPOTENT) {
        hdr.flags |= h->use.rflags & (CW_HF_IDEMPOTENT | CW_HF_RESUME);
        hdr.resume_id = h->use.resume_id;
    }
    hdr.rpc_id = h->use.id;
    hdr.req_id = h->use.req_id;
    hdr.budget_us =
        h->use.deadline_ns > now ? (h->use.deadline_ns - now) / 1000 : 0;
    hdr.hops = h->use.hops;
    h->use.tag = cw_net_tag(net);
    hdr.resp_tag = h->use.tag;
    hdr.resp_limit = net->caps.max_expected_size > 0xffffff
                         ? 0xffffff
                         : (uint32_t)net->caps.max_expected_size;
    if (h->use.relay.in)
        st = cw_msg_build(h, &h->in, net->caps.max_unexpected_size, route,
                          h->desc_copy, h->use.relay.desc_len,
                          h->use.relay.ndesc, &hdr, &msg, &total);
    else
        st = cw_msg_build(h, &h->in, net->caps.max_unexpected_size, route, NULL,
                          0, 0, &hdr, &msg, &total);
    if (st != CW_OK)
        return st;
    h->use.rflags |= hdr.flags & CW_HF_OVERFLOW; /* cleared by cw_forward */
    if (!(h->use.rflags & CW_HF_ONE_WAY) || (h->use.rflags & CW_HF_OVERFLOW)) {
        st = cw_grow(&h->msg, &h->msg_cap, net->caps.max_expected_size);
        if (st != CW_OK)
            return st;
        st = fwd_recv_post(h);
        if (st != CW_OK)
            return st;
    }
    if (cw_sq_offer(h, msg, total)) {
        st = CW_OK;
    } else if ((h->use.rflags & (CW_HF_ONE_WAY | CW_HF_OVERFLOW)) == 0 &&
               !cw_h_flag(h, CW_HFL_PIN_ASKER) &&
               !cw_h_flag(h, CW_HFL_PIN_WARM) &&
               (st = cw_na_msg_inject(net->na, msg, total, h->use.cli.peer, 0,
                                      false)) != CW_AGAIN) {
        /* Taken at once: the send is complete, and with the answer's
         * receive posted, cw_forward_send_done would have nothing to do
         * but count it. */
        if (st != CW_OK) {
            cw_h_fail(h, st);
            return CW_OK;
        }
        cw_h_flag_set(h, CW_HFL_SENT);
        ctx->stats.na_ops++;
        ctx->stats.tx_requests++;
        return CW_OK;
    } else {
        st = cw_na_msg_send_unexpected(net->na, msg, total, h->use.cli.peer, 0,
                                       cw_forward_send_cb, h, &h->use.send_op);
    }
    if (st != CW_OK) {
        /* The receive is posted: report the failure through completion. */
        h->use.send_op = NULL;
        cw_h_fail(h, st);
        return CW_OK;
    }
    h->use.pending++;
    cw_h_flag_set(h, CW_HFL_SENT);
    ctx->stats.na_ops++;
    ctx->stats.tx_requests++;
    return CW_OK;
}

cw_status_t cw_forward_self(cw_handle_t *h)
{
    cw_context_t *ctx = h->ctx;
    cw_handle_t *sh;
    cw_status_t st;

    CW_LOCK_ASSERT_HELD(&h->ctx->lock);
    sh = cw_handle_alloc(ctx, CW_H_SERVER);
    if (sh == NULL)
        return CW_NOMEM;
    cw_h_flag_set(sh, CW_HFL_SELF);
    sh->use.id = h->use.id;
    sh->use.net = h->use.net;
    sh->use.srv.src.ctx = ctx;
    sh->use.srv.src.net = h->use.net;
    sh->use.srv.src.embedded = true;
    sh->use.srv.src.self = true;
    st = cw_na_addr_dup(h->use.net->na, h->use.net->self, &sh->use.srv.src.na);
    if (st != CW_OK)
        goto err_unref;
    cw_net_ref(h->use.net);
    st = cw_grow(&sh->msg, &sh->msg_cap, h->in.len ? h->in.len : 1);
    if (st != CW_OK)
        goto err_unref;
    if (h->in.len)
        memcpy(sh->msg, h->in.data, h->in.len);
    cw_buf_init_reader(&sh->in, sh->msg, h->in.len);
    st = cw_buf_copy_bulks(&sh->in, &h->in);
    if (st != CW_OK)
        goto err_unref;
    sh->use.req_id = h->use.req_id;
    sh->use.deadline_ns = h->use.deadline_ns;
    sh->use.rflags = h->use.rflags & CW_HF_ONE_WAY;
    sh->use.hops = h->use.hops;
    ctx->stats.self_rpcs++;
    if (h->use.rflags & CW_HF_ONE_WAY) {
        cw_h_set_final(h, CW_OK);
    } else {
        sh->use.self_peer = h;
        h->use.self_peer = sh;
    }
    cw_rpc_dispatch(sh);
    return CW_OK;

err_unref:
    cw_handle_unref_locked(sh);
    return st;
}

cw_status_t cw_handle_set_idempotent(cw_handle_t *h, bool on)
{
    uint64_t id = 0;
    cw_status_t st = CW_OK;

    if (h == NULL || h->use.role == CW_H_SERVER)
        return CW_INVALID_ARG;
    if (on && cw_random_fill(&id, sizeof(id)) != CW_OK)
        return CW_IO;
    cw_lock_take(&h->ctx->lock);
    if ((h->use.rflags & CW_HF_ONE_WAY) || cw_h_busy(h) ||
        h->use.relay.in != NULL) {
        st = CW_INVALID_ARG;
    } else {
        h->use.rflags &= (uint16_t) ~(CW_HF_IDEMPOTENT | CW_HF_RESUME);
        if (on)
            h->use.rflags |= CW_HF_IDEMPOTENT;
        h->use.resume_id = id;
    }
    cw_lock_give(&h->ctx->lock);
    return st;
}

cw_status_t cw_forward_locked(cw_handle_t *h, uint64_t timeout_ms,
                              cw_forward_cb_t cb, void *arg)
{
    cw_context_t *ctx = h->ctx;
    enum cw_hstate from;
    cw_status_t st;

    CW_LOCK_ASSERT_HELD(&ctx->lock);
    if (cw_h_busy(h))
        return CW_BUSY;
    if (ctx->destroying)
        return CW_CANCELED;
    if (h->use.net && h->use.net->closed)
        return CW_DISCONNECTED; /* cw_network_close */
    /* The caller canceled before this got going: its cancel found nothing
     * in flight to stop. */
    if (cw_h_flag(h, CW_HFL_XCTX) && cw_relay_in_canceled_xctx(h))
        return CW_CANCELED;
    st = h->in.err;
    if (st != CW_OK)
        return st;
    if (timeout_ms == 0)
        timeout_ms = h->use.cli.cls_timeout_ms ? h->use.cli.cls_timeout_ms
                                               : ctx->opts.default_timeout_ms;
    if (timeout_ms > CW_MAX_TIMEOUT_MS)
        timeout_ms = CW_MAX_TIMEOUT_MS;
    h->use.cli.cb = cb;
    h->use.cli.arg = arg;
    if (!cw_h_flag(h, CW_HFL_REFORWARD)) {
        h->use.cli.reforwards = 0;
        if (h->use.relay.in == NULL) /* a gateway's: cw_relay_set_resume */
            h->use.rflags &= (uint16_t)~CW_HF_RESUME;
    }
    /* What one forward decides starts afresh (the state holds the rest). */
    h->use.pending = 0;
    h->use.rflags &= (uint16_t)~CW_HF_OVERFLOW;
    cw_h_flag_clear(h, CW_HFL_SENT);
    h->cqe.fn = cw_h_complete;
    if (h->use.relay.in)
        h->use.deadline_ns = h->use.relay.in->use.deadline_ns;
    else
        h->use.deadline_ns = cw_now_pass_ns() + timeout_ms * 1000000ull;
    h->use.req_id = cw_ctx_req_id(ctx);
    if (h->use.ovf_local) {
        cw_bulk_unref(h->use.ovf_local);
        h->use.ovf_local = NULL;
    }
    /* In flight (listed, referenced) before anything can complete it. */
    cw_ctx_timer_at(ctx, h->use.deadline_ns);
    from = h->use.state;
    cw_h_state_set(h, CW_H_ACTIVE);
    atomic_fetch_add(&h->refs, 1);
    nau_list_add_tail(&ctx->inflight, &h->link);
    /* cw_addr_is_self, read in place: every forward asks. */
    if (h->use.cli.addr->self && h->use.cli.addr->route == NULL &&
        !h->use.relay.in)
        st = cw_forward_self(h);
    else
        st = cw_forward_net(h);
    if (st != CW_OK) {
        nau_list_del(&h->link);
        atomic_fetch_sub(&h->refs, 1); /* the caller still holds one */
        if (h->use.ovf_local) {
            cw_bulk_unref(h->use.ovf_local);
            h->use.ovf_local = NULL;
        }
        cw_h_state_set(h, from); /* as if never started */
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

    if (h == NULL || h->use.role == CW_H_SERVER)
        return CW_INVALID_ARG;
    cw_lock_take(&h->ctx->lock);
    st = cw_forward_locked(h, timeout_ms, cb, arg);
    cw_lock_give(&h->ctx->lock);
    return st;
}

/* A forward of an idempotent request that the client routes sent through
 * a gateway failed on its transport: send it again, marked RESUME, through
 * another gateway of the route (docs/bulk-gateway.md, "Resume").  True if
 * it went; runs without the lock, from the queue, in state DONE (which a
 * failed cw_forward leaves it in). */
bool cw_h_reforward(cw_handle_t *h, cw_status_t st)
{
    cw_context_t *ctx = h->ctx;
    cw_status_t fst;
    cw_addr_t *addr;
    uint64_t now;

    now = cw_now_ns();
    if (now + 1000000 >= h->use.deadline_ns ||
        cw_addr_reroute(h->use.cli.addr, &addr) != CW_OK)
        return false;
    cw_lock_take(&ctx->lock);
    cw_addr_unref_locked(h->use.cli.addr);
    h->use.cli.addr = addr;
    h->use.net = addr->net;
    h->use.rflags |= CW_HF_RESUME;
    h->use.cli.reforwards++;
    cw_h_flag_set(h, CW_HFL_REFORWARD);
    cw_lock_give(&ctx->lock);
    fst = cw_forward(h, (h->use.deadline_ns - now) / 1000000u, h->use.cli.cb,
                     h->use.cli.arg);
    cw_lock_take(&ctx->lock);
    cw_h_flag_clear(h, CW_HFL_REFORWARD);
    if (fst == CW_OK) {
        ctx->stats.reforwarded++;
        CW_LOG_RL(CW_LOG_INFO, "core",
                  "forward through a gateway failed "
                  "(%s): request resumed through another one",
                  cw_status_name(st));
    }
    cw_lock_give(&ctx->lock);
    return fst == CW_OK;
}
