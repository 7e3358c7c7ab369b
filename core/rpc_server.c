/*
 * Server side of an RPC: validate an incoming message, pull an overflowed
 * request, dispatch it to its handler (or the gateway's relay hook), and
 * send the response, overflowing into bulk when it exceeds the eager limit.
 */
#include "rpc_priv.h"

#include <stdlib.h>
#include <string.h>

#define CW_MAX_BUDGET_US (86400ull * 1000000ull) /* clamp hostile budgets */

static void run_handler(struct cw_cqe *e)
{
    cw_handle_t *h = nau_container_of(e, cw_handle_t, cqe);

    h->use.srv.hfn(h, h->use.srv.harg);
}

static void run_hook(struct cw_cqe *e)
{
    cw_handle_t *h = nau_container_of(e, cw_handle_t, cqe);

    h->use.srv.hook(h, h->use.srv.hook_arg);
}

static bool route_is_ours(cw_context_t *ctx, const char *route)
{
    for (unsigned i = 0; i < ctx->nnets; i++)
        if (strcmp(ctx->nets[i]->uri, route) == 0)
            return true;
    return false;
}

void cw_rpc_dispatch(cw_handle_t *h)
{
    cw_context_t *ctx = h->ctx;
    struct cw_rpc_class *c;

    CW_LOCK_ASSERT_HELD(&h->ctx->lock);
    if (h->use.srv.route != NULL && !route_is_ours(ctx, h->use.srv.route)) {
        if (ctx->relay_hook == NULL) {
            if (h->use.rflags & CW_HF_ONE_WAY)
                cw_handle_unref_locked(h);
            else
                cw_respond_internal(h, CW_NO_ROUTE);
            return;
        }
        h->use.srv.hook = ctx->relay_hook;
        h->use.srv.hook_arg = ctx->relay_arg;
        h->cqe.fn = run_hook;
        cw_cq_push(ctx, &h->cqe);
        return;
    }
    c = cw_rpc_class_find(ctx, h->use.id);
    if (c == NULL || c->handler == NULL) {
        ctx->stats.no_rpc++;
        CW_LOG_RL(CW_LOG_INFO, "core", "request for unregistered RPC %016llx",
                  (unsigned long long)h->use.id);
        if (h->use.rflags & CW_HF_ONE_WAY)
            cw_handle_unref_locked(h);
        else
            cw_respond_internal(h, CW_NO_RPC);
        return;
    }
    if (h->use.rflags & CW_HF_IDEMPOTENT)
        cw_rs_open(h);
    h->use.srv.hfn = c->handler;
    h->use.srv.harg = c->arg;
    h->cqe.fn = run_handler;
    cw_cq_push(ctx, &h->cqe);
}

/* ---- receive ----------------------------------------------------------- */

static void ack_sent_cb(const struct cw_na_cb_info *info)
{
    cw_handle_unref_locked(info->arg);
}

/* A one-way request that overflowed: tell the client its memory is free. */
static void srv_send_ack(cw_handle_t *h, cw_status_t st)
{
    struct cw_wire_hdr hdr = {.type = CW_MSG_RESP,
                              .rpc_id = h->use.id,
                              .req_id = h->use.req_id,
                              .status = (uint16_t)st};
    cw_na_op_t *op;

    cw_wire_hdr_encode(h->done_msg, &hdr);
    atomic_fetch_add(&h->refs, 1);
    if (cw_na_msg_send_expected(h->use.net->na, h->done_msg, CW_HDR_SIZE,
                                h->use.srv.src.na, h->use.tag, ack_sent_cb, h,
                                &op) != CW_OK)
        cw_handle_unref_locked(h);
    else
        h->ctx->stats.na_ops++;
}

static void srv_pull_done(cw_bulk_op_t *op, cw_status_t st, void *arg)
{
    cw_handle_t *h = arg;
    const uint8_t *desc = h->in.desc;
    size_t desc_len = h->in.desc_len;
    unsigned ndesc = h->in.ndesc;
    (void)op;

    h->use.bulk_op = NULL;
    h->use.pending--;
    /* A one-way caller hears whether its payload arrived. */
    if (h->use.rflags & CW_HF_ONE_WAY)
        srv_send_ack(h, st);
    if (st != CW_OK) {
        CW_LOG_RL(CW_LOG_WARN, "core",
                  "pulling an overflowed request "
                  "failed: %s",
                  cw_status_str(st));
        if (h->use.rflags & CW_HF_ONE_WAY)
            cw_handle_unref_locked(h);
        else
            cw_respond_internal(h, st);
        return;
    }
    cw_buf_init_reader(&h->in, h->ovf_buf, h->in.len);
    h->in.desc = desc;
    h->in.desc_len = desc_len;
    h->in.ndesc = ndesc;
    cw_rpc_dispatch(h);
}

static void recv_done(cw_network_t *net, const struct cw_wire_msg *m,
                      cw_na_addr_t *source)
{
    cw_context_t *ctx = net->ctx;
    struct nau_list *e;

    for (e = ctx->wait_done.next; e != &ctx->wait_done; e = e->next) {
        cw_handle_t *h = nau_container_of(e, cw_handle_t, link);
        if (h->use.req_id == m->hdr.req_id && h->use.net == net &&
            cw_na_addr_cmp(net->na, h->use.srv.src.na, source)) {
            nau_list_del(&h->link);
            h->use.pending--;
            cw_h_set_final(h, CW_OK);
            cw_h_check(h);
            return;
        }
    }
    ctx->stats.rx_dropped++;
}

/* The caller cancelled: mark the request and cancel what we forwarded. */
static void recv_cancel(cw_network_t *net, const struct cw_wire_msg *m,
                        cw_na_addr_t *source)
{
    cw_context_t *ctx = net->ctx;
    struct nau_list *e;

    for (e = ctx->incoming.next; e != &ctx->incoming; e = e->next) {
        cw_handle_t *h = nau_container_of(e, cw_handle_t, link);
        if (h->use.req_id == m->hdr.req_id && h->use.net == net &&
            cw_na_addr_cmp(net->na, h->use.srv.src.na, source)) {
            if (cw_h_flag(h, CW_HFL_XCTX)) {
                cw_relay_cancel_xctx(h);
                return;
            }
            h->use.srv.canceled = true;
            if (h->use.relay.out)
                cw_h_cancel_locked(h->use.relay.out);
            return;
        }
    }
    /* Already answered, or never seen: nothing to do. */
}

static void recv_request(cw_network_t *net, struct cw_urecv *u, bool batched,
                         const struct cw_wire_msg *wm, cw_na_addr_t *source)
{
    cw_context_t *ctx = net->ctx;
    struct cw_wire_msg m = *wm;
    cw_handle_t *h;
    uint64_t budget;
    cw_status_t st;

    ctx->stats.rx_requests++;
    if ((m.hdr.flags & CW_HF_RESUME) && !(m.hdr.flags & CW_HF_ONE_WAY) &&
        m.hdr.hops <= ctx->max_hops) {
        budget = m.hdr.budget_us < CW_MAX_BUDGET_US ? m.hdr.budget_us
                                                    : CW_MAX_BUDGET_US;
        if (cw_rs_attach(net, &m, source, cw_now_ns() + budget * 1000ull))
            return;
    }
    h = cw_handle_alloc(ctx, CW_H_SERVER);
    if (h == NULL) {
        ctx->stats.rx_dropped++;
        cw_na_addr_free(net->na, source);
        return;
    }
    h->use.net = net;
    h->use.srv.src.ctx = ctx;
    h->use.srv.src.net = net;
    h->use.srv.src.na = source;
    cw_net_ref(net);
    h->use.srv.src.embedded = true;
    h->use.srv.src.self = false;
    /* Take the receive buffer instead of copying the message: the slot is
     * reposted with the handle's old buffer (pooled handles keep theirs,
     * so this allocates only the first time a handle serves a request). */
    if (h->msg_cap < u->len) {
        uint8_t *nb = realloc(h->msg, u->len);
        if (nb == NULL) {
            ctx->stats.rx_dropped++;
            cw_handle_unref_locked(h);
            return;
        }
        h->msg = nb;
        h->msg_cap = u->len;
    }
    {
        uint8_t *mine = h->msg; /* at least u->len bytes */
        h->msg = u->buf;
        h->msg_cap = u->len;
        u->buf = mine;
    }
    h->use.id = m.hdr.rpc_id;
    h->use.req_id = m.hdr.req_id;
    h->use.tag = m.hdr.resp_tag;
    h->use.srv.resp_limit = m.hdr.resp_limit;
    h->use.hops = m.hdr.hops;
    h->use.rflags =
        m.hdr.flags & (CW_HF_ONE_WAY | CW_HF_OVERFLOW | CW_HF_IDEMPOTENT |
                       CW_HF_RESUME | CW_HF_BATCHES | CW_HF_PIN_ASK);
    h->use.resume_id = m.hdr.resume_id;
    if (batched)
        cw_h_flag_set(h, CW_HFL_FROM_BATCH);
    budget =
        m.hdr.budget_us < CW_MAX_BUDGET_US ? m.hdr.budget_us : CW_MAX_BUDGET_US;
    h->use.deadline_ns = cw_now_pass_ns() + budget * 1000ull;
    if (m.hdr.dest_len > 0) {
        if (cw_grow((uint8_t **)&h->route_buf, &h->route_cap,
                    (size_t)m.hdr.dest_len + 1) != CW_OK) {
            ctx->stats.rx_dropped++;
            cw_handle_unref_locked(h);
            return;
        }
        memcpy(h->route_buf, m.dest, m.hdr.dest_len);
        h->route_buf[m.hdr.dest_len] = '\0';
        h->use.srv.route = h->route_buf;
    }
    cw_buf_init_reader(&h->in, m.payload, m.hdr.payload_len);
    h->in.desc = m.desc;
    h->in.desc_len = m.hdr.desc_len;
    h->in.ndesc = m.hdr.ndesc;
    h->use.srv.raw_desc = m.desc;
    h->use.srv.raw_desc_len = m.hdr.desc_len;
    h->use.srv.raw_ndesc = m.hdr.ndesc;
    if (!(h->use.rflags & CW_HF_ONE_WAY))
        nau_list_add_tail(&ctx->incoming, &h->link);
    if (h->use.hops > ctx->max_hops) {
        if (h->use.rflags & CW_HF_ONE_WAY)
            cw_handle_unref_locked(h);
        else
            cw_respond_internal(h, CW_TTL_EXPIRED);
        return;
    }
    if (m.hdr.flags & CW_HF_OVERFLOW) {
        st = cw_payload_check(ctx, &m, "request", net);
        if (st == CW_OK)
            st = cw_h_pull(h, &m, h->use.srv.src.na, srv_pull_done);
        if (st != CW_OK) {
            if (h->use.rflags & CW_HF_ONE_WAY) {
                srv_send_ack(h, st);
                cw_handle_unref_locked(h);
            } else {
                cw_respond_internal(h, st);
            }
        }
        return;
    }
    cw_rpc_dispatch(h);
}

void cw_rpc_recv_unexpected(cw_network_t *net, struct cw_urecv *u, size_t len,
                            cw_na_addr_t *source)
{
    const uint8_t *msg = u->buf;
    cw_context_t *ctx = net->ctx;
    struct cw_wire_msg m;
    cw_status_t st;

    st = cw_wire_decode(msg, len, &m);
    if (st != CW_OK || m.hdr.type == CW_MSG_RESP || source == NULL) {
        ctx->stats.rx_dropped++;
        CW_LOG_RL(CW_LOG_WARN, "core",
                  "malformed message on %s dropped "
                  "(%zu bytes)",
                  net->uri, len);
        if (source)
            cw_na_addr_free(net->na, source);
        return;
    }
    if (m.hdr.type == CW_MSG_DONE) {
        recv_done(net, &m, source);
        cw_na_addr_free(net->na, source);
        return;
    }
    if (m.hdr.type == CW_MSG_CANCEL) {
        recv_cancel(net, &m, source);
        cw_na_addr_free(net->na, source);
        return;
    }
    if (m.hdr.type == CW_MSG_BATCH) {
        cw_rpc_recv_batch(net, u, &m, source);
        return;
    }
    recv_request(net, u, false, &m, source);
}

/* Each entry of a batch as if it had arrived alone.  A response goes to
 * the request waiting for it (rpc_client.c); a request takes its
 * own buffer (copied from the batch, into memory of the same size as a
 * receive slot, so the pooled handles' buffers stay interchangeable) and
 * its own reference to the source.  Entries are checked one by one: a
 * malformed one is dropped and counted, a broken frame ends the batch. */
void cw_rpc_recv_batch(cw_network_t *net, struct cw_urecv *u,
                       const struct cw_wire_msg *bm, cw_na_addr_t *source)
{
    cw_context_t *ctx = net->ctx;
    struct cw_urecv tmp = {.net = net, .len = u->len};
    size_t off = 0, len;
    const uint8_t *msg;
    unsigned n = 0;
    cw_status_t st;

    CW_LOCK_ASSERT_HELD(&net->ctx->lock);
    ctx->stats.rx_batches++;
    for (;;) {
        struct cw_wire_msg m;
        cw_na_addr_t *src;

        st = cw_wire_batch_next(bm->payload, bm->hdr.payload_len, &off, &msg,
                                &len);
        if (st == CW_NOENT)
            break;
        if (st != CW_OK || ++n > CW_BATCH_MAX) {
            ctx->stats.rx_dropped++;
            CW_LOG_RL(CW_LOG_WARN, "core",
                      "malformed batch on %s: rest "
                      "dropped",
                      net->uri);
            break;
        }
        if (tmp.buf == NULL && (tmp.buf = malloc(tmp.len)) == NULL) {
            ctx->stats.rx_dropped++;
            continue;
        }
        memcpy(tmp.buf, msg, len);
        st = cw_wire_decode(tmp.buf, len, &m);
        if (st == CW_OK && m.hdr.type == CW_MSG_RESP) {
            /* Hands tmp.buf to the request waiting for it, or drops and
             * counts. */
            if (cw_rpc_batch_resp(net, &m, tmp.buf, tmp.len, len, source))
                tmp.buf = NULL;
            continue;
        }
        if (st != CW_OK || m.hdr.type == CW_MSG_BATCH) {
            ctx->stats.rx_dropped++;
            CW_LOG_RL(CW_LOG_WARN, "core",
                      "malformed message in a batch on "
                      "%s dropped (%zu bytes)",
                      net->uri, len);
            continue;
        }
        if (cw_na_addr_dup(net->na, source, &src) != CW_OK) {
            ctx->stats.rx_dropped++;
            continue;
        }
        if (m.hdr.type == CW_MSG_DONE) {
            recv_done(net, &m, src);
            cw_na_addr_free(net->na, src);
        } else if (m.hdr.type == CW_MSG_CANCEL) {
            recv_cancel(net, &m, src);
            cw_na_addr_free(net->na, src);
        } else {
            /* Takes src, and tmp.buf in exchange for a free buffer. */
            recv_request(net, &tmp, true, &m, src);
        }
    }
    free(tmp.buf);
    cw_na_addr_free(net->na, source);
}

/* ---- respond ------------------------------------------------------------ */

void cw_resp_send_cb(const struct cw_na_cb_info *info)
{
    cw_resp_send_done(info->arg, info->status);
}

void cw_resp_send_done(cw_handle_t *h, cw_status_t status)
{
    h->use.send_op = NULL;
    nau_list_del(&h->resp_link);
    h->use.pending--;
    h->use.net->resp_sending--;
    if (status != CW_OK) {
        if (nau_list_linked(&h->link)) {
            nau_list_del(&h->link);
            h->use.pending--;
        }
        cw_h_set_final(h, status);
    } else if (!nau_list_linked(&h->link)) {
        cw_h_set_final(h, CW_OK);
    }
    cw_h_check(h);
}

/* A self RPC: hand the output straight to the caller's handle. */
static cw_status_t respond_self(cw_handle_t *h, cw_status_t status)
{
    cw_handle_t *c = h->use.self_peer;
    cw_status_t st = CW_OK;

    if (c != NULL) {
        h->use.self_peer = NULL;
        c->use.self_peer = NULL;
        st = cw_grow(&c->msg, &c->msg_cap, h->out.len ? h->out.len : 1);
        if (st == CW_OK) {
            if (h->out.len)
                memcpy(c->msg, h->out.data, h->out.len);
            cw_buf_init_reader(&c->out, c->msg, h->out.len);
            st = cw_buf_copy_bulks(&c->out, &h->out);
        }
        cw_h_set_final(c, st == CW_OK ? status : st);
        cw_h_check(c);
    }
    cw_h_set_final(h, st);
    return CW_OK;
}

static cw_status_t respond_net(cw_handle_t *h, cw_status_t status)
{
    cw_context_t *ctx = h->ctx;
    cw_network_t *net = h->use.net;
    const char *member = NULL;
    size_t limit;
    struct cw_wire_hdr hdr;
    uint8_t *msg;
    size_t total;
    cw_status_t st;

    if (net->closed)
        return CW_DISCONNECTED; /* cw_network_close */
    memset(&hdr, 0, sizeof(hdr));
    hdr.type = CW_MSG_RESP;
    hdr.rpc_id = h->use.id;
    hdr.req_id = h->use.req_id;
    hdr.status = (uint16_t)status;
    /* The caller's receive buffer may be smaller than what we could send. */
    limit = net->caps.max_expected_size;
    if (h->use.srv.resp_limit >= CW_HDR_SIZE + 64 &&
        h->use.srv.resp_limit < limit)
        limit = h->use.srv.resp_limit;
    if ((h->use.rflags & CW_HF_PIN_ASK) &&
        (member = cw_spread_pick(net)) != NULL)
        hdr.flags |= CW_HF_PIN;
    st = cw_msg_build(h, &h->out, limit, member, h->use.srv.resp_desc,
                      h->use.srv.resp_desc_len, h->use.srv.resp_ndesc, &hdr,
                      &msg, &total);
    if (st != CW_OK)
        return st;
    if (!cw_sq_offer(h, msg, total)) {
        /* Where the plugin takes it at once, the answer is sent and its
         * send complete here, as cw_resp_send_done would find it (not for
         * an overflow either way, which waits for the caller's word). */
        if (!((hdr.flags | h->use.rflags) & CW_HF_OVERFLOW)) {
            st = cw_na_msg_inject(net->na, msg, total, h->use.srv.src.na,
                                  h->use.tag, true);
            if (st == CW_OK) {
                ctx->stats.na_ops++;
                ctx->stats.tx_responses++;
                if (!nau_list_linked(&h->link))
                    cw_h_set_final(h, CW_OK);
                return CW_OK;
            }
            if (st != CW_AGAIN)
                return st;
        }
        st = cw_na_msg_send_expected(net->na, msg, total, h->use.srv.src.na,
                                     h->use.tag, cw_resp_send_cb, h,
                                     &h->use.send_op);
        if (st != CW_OK)
            return st;
    }
    h->use.pending++;
    net->resp_sending++;
    nau_list_add_tail(&ctx->responding, &h->resp_link);
    ctx->stats.na_ops++;
    ctx->stats.tx_responses++;
    if (hdr.flags & CW_HF_OVERFLOW) {
        uint64_t now = cw_now_ns();
        h->use.deadline_ns =
            (h->use.deadline_ns > now ? h->use.deadline_ns : now) +
            CW_DONE_GRACE_NS;
        h->use.pending++;
        nau_list_add_tail(&ctx->wait_done, &h->link);
        cw_ctx_timer_at(ctx, h->use.deadline_ns);
    }
    return CW_OK;
}

cw_status_t cw_respond_locked(cw_handle_t *h, cw_status_t status,
                              cw_respond_cb_t cb, void *arg)
{
    cw_status_t st;

    CW_LOCK_ASSERT_HELD(&h->ctx->lock);
    if (h->use.role == CW_H_CLIENT || h->use.state != CW_H_IDLE ||
        (h->use.rflags & CW_HF_ONE_WAY) || !cw_status_valid((int)status))
        return CW_INVALID_ARG;
    if (status == CW_OK && h->out.err != CW_OK)
        status = h->out.err;
    h->use.srv.cb = cb;
    h->use.srv.arg = arg;
    cw_h_state_set(h, CW_H_ACTIVE);
    h->use.pending = 0;
    h->cqe.fn = cw_h_complete;
    atomic_fetch_add(&h->refs, 1);
    nau_list_del(&h->link); /* off the incoming list */
    if (!cw_h_flag(h, CW_HFL_SELF) &&
        (h->use.srv.canceled || cw_now_pass_ns() > h->use.deadline_ns)) {
        cw_status_t why = h->use.srv.canceled ? CW_CANCELED : CW_TIMEOUT;
        /* The caller has given up: an answer would only be dropped, except
         * that a caller whose payload overflowed keeps it exposed until
         * it hears from us, so it gets a bare one. */
        if (h->use.rflags & CW_HF_OVERFLOW) {
            cw_buf_reset(&h->out);
            h->use.srv.resp_desc = NULL;
            if (respond_net(h, why) == CW_OK) {
                cw_h_set_final(h, why);
                cw_h_check(h);
                return CW_OK;
            }
        }
        cw_h_set_final(h, why);
        cw_h_check(h);
        return CW_OK;
    }
    if (cw_h_flag(h, CW_HFL_SELF)) {
        st = respond_self(h, status);
    } else {
        st = respond_net(h, status);
        if (st != CW_OK && status == CW_OK && h->use.send_op == NULL) {
            /* The output could not be sent: tell the caller why. */
            CW_LOG_RL(CW_LOG_WARN, "core",
                      "response of %zu bytes could not "
                      "be sent (%s); answering with the error",
                      h->out.len, cw_status_str(st));
            if (h->use.ovf_local) {
                cw_bulk_unref(h->use.ovf_local);
                h->use.ovf_local = NULL;
            }
            cw_buf_reset(&h->out);
            h->use.srv.resp_desc = NULL;
            st = respond_net(h, st);
        }
    }
    if (st != CW_OK) {
        cw_h_set_final(h, st);
        /* Completion still runs (it drops the reference taken above). */
    }
    cw_h_check(h);
    return CW_OK;
}

cw_status_t cw_respond(cw_handle_t *h, cw_status_t status, cw_respond_cb_t cb,
                       void *arg)
{
    cw_status_t st;

    if (h == NULL)
        return CW_INVALID_ARG;
    cw_lock_take(&h->ctx->lock);
    st = cw_respond_locked(h, status, cb, arg);
    cw_lock_give(&h->ctx->lock);
    cw_ctx_wake(h->ctx);
    return st;
}

void cw_respond_internal(cw_handle_t *h, cw_status_t status)
{
    if (cw_respond_locked(h, status, NULL, NULL) != CW_OK) {
        cw_handle_unref_locked(h);
        return;
    }
    /* The respond holds its own reference until it completes. */
    cw_handle_unref_locked(h);
}
