/*
 * Failure, cancel and deadlines of handles in flight: decide a failure
 * and withdraw what is outstanding, tell the next hop of a cancel, expire
 * deadlines, and cancel everything on a network that closes.
 */
#include "rpc_priv.h"

void cw_h_cancel_send(cw_handle_t *h)
{
    /* A queued message is dropped at the flush; one inside a batch in
     * flight completes with its batch (coalesce.c). */
    if (h->use.send_op == CW_SQ_QUEUED)
        cw_h_flag_set(h, CW_HFL_SQ_CANCEL);
    else if (h->use.send_op && h->use.send_op != CW_SQ_BATCHED)
        cw_na_cancel(h->use.net->na, h->use.send_op);
}

/* The request is on a network, or was: a message still queued for the
 * end of the pass (coalesce.c) has not left, and never will once
 * cancelled. */
static bool h_left(const cw_handle_t *h)
{
    return cw_h_flag(h, CW_HFL_SENT) && h->use.send_op != CW_SQ_QUEUED;
}

static void h_cancel_ops(cw_handle_t *h)
{
    cw_h_cancel_send(h);
    if (h->use.recv_op && !cw_h_flag(h, CW_HFL_RECV_CANCELED)) {
        cw_h_flag_set(h, CW_HFL_RECV_CANCELED);
        cw_na_cancel(h->use.net->na, h->use.recv_op);
    }
}

/* The caller hears now; the handle stays busy until what it lent the peer
 * comes back, or @p until (cw_rpc_timers). */
static void h_linger(cw_handle_t *h, uint64_t until)
{
    cw_h_flag_set(h, CW_HFL_LINGER);
    h->use.cli.linger_until = until;
    cw_ctx_timer_at(h->ctx, until);
}

void cw_h_fail(cw_handle_t *h, cw_status_t st)
{
    CW_LOCK_ASSERT_HELD(&h->ctx->lock);
    if (h->use.state != CW_H_ACTIVE)
        return;
    cw_h_set_final(h, st);
    if (cw_h_flag(h, CW_HFL_PIN_HELD))
        cw_pin_unhold(h);
    if (h->use.role == CW_H_CLIENT && (h->use.rflags & CW_HF_OVERFLOW) &&
        h_left(h) && h->use.recv_op) {
        /* The server may be pulling our payload right now: keep it exposed
         * until its answer (it answers even a cancelled or expired request
         * that overflowed), so that it never reads released memory.  The
         * caller hears now; the handle lingers. */
        uint64_t now = cw_now_ns();
        h_linger(h, (h->use.deadline_ns > now ? h->use.deadline_ns : now) +
                        CW_DONE_GRACE_NS);
    } else {
        /* Pulling an overflowed answer into the handle's own buffer: the
         * pull is cancelled below, but a plugin may hold its pieces until
         * they come back (na-ofi: up to cancel_grace_ms).  The caller
         * hears now, at its deadline; the handle lingers until the pull
         * has ended (fwd_pull_done). */
        if (h->use.role == CW_H_CLIENT && h->use.bulk_op != NULL)
            h_linger(h, cw_now_ns() + CW_DONE_GRACE_NS);
        h_cancel_ops(h);
    }
    if (h->use.bulk_op)
        cw_bulk_op_cancel_locked(h->use.bulk_op);
    if (h->use.self_peer) {
        /* The server side of a self call hears of a cancel as a remote
         * one would (cw_handle_canceled). */
        if (h->use.role == CW_H_CLIENT && st == CW_CANCELED)
            cw_h_set_canceled(h->use.self_peer, true);
        h->use.self_peer->use.self_peer = NULL;
        h->use.self_peer = NULL;
    }
}

void cw_h_cancel_locked(cw_handle_t *h)
{
    struct cw_wire_hdr hdr = {.type = CW_MSG_CANCEL};

    CW_LOCK_ASSERT_HELD(&h->ctx->lock);
    if (h->use.state != CW_H_ACTIVE)
        return;
    /* Tell the next hop, so that cancel propagates downstream (best
     * effort: the local completion waits neither for an answer nor for
     * the message to leave, notice.c). */
    if (h_left(h) && !(h->use.rflags & CW_HF_ONE_WAY) &&
        h->use.recv_op != NULL) {
        hdr.rpc_id = h->use.id;
        hdr.req_id = h->use.req_id;
        (void)cw_notice_send(h->ctx, h->use.net, h->use.cli.peer, &hdr);
    }
    cw_h_fail(h, CW_CANCELED);
    cw_h_check(h);
}

cw_status_t cw_cancel(cw_handle_t *h)
{
    cw_context_t *ctx;

    if (h == NULL)
        return CW_INVALID_ARG;
    if (h->use.role == CW_H_SERVER)
        return CW_UNSUPPORTED;
    ctx = h->ctx;
    cw_lock_take(&ctx->lock);
    cw_h_cancel_locked(h);
    cw_lock_give(&ctx->lock);
    return CW_OK;
}

/* Scans only when something may have expired, and remembers the soonest
 * deadline left, so thousands of RPCs in flight cost nothing per poll. */
void cw_rpc_timers(cw_context_t *ctx, uint64_t now)
{
    struct nau_list *e, *next;
    uint64_t soonest = UINT64_MAX;

    if (now < ctx->next_deadline)
        return;
    for (e = ctx->inflight.next; e != &ctx->inflight; e = next) {
        cw_handle_t *h = nau_container_of(e, cw_handle_t, link);
        next = e->next;
        if (h->use.state == CW_H_ACTIVE) {
            if (now >= h->use.deadline_ns) {
                ctx->stats.timeouts++;
                cw_h_fail(h, CW_TIMEOUT);
                if (cw_h_flag(h, CW_HFL_LINGER) &&
                    h->use.cli.linger_until < soonest)
                    soonest = h->use.cli.linger_until;
                cw_h_check(h);
            } else if (h->use.deadline_ns < soonest) {
                soonest = h->use.deadline_ns;
            }
        } else if (cw_h_flag(h, CW_HFL_LINGER)) {
            if (now >= h->use.cli.linger_until)
                h_cancel_ops(h); /* the server never answered: give up */
            else if (h->use.cli.linger_until < soonest)
                soonest = h->use.cli.linger_until;
        }
    }
    for (e = ctx->wait_done.next; e != &ctx->wait_done; e = next) {
        cw_handle_t *h = nau_container_of(e, cw_handle_t, link);
        next = e->next;
        if (now >= h->use.deadline_ns) {
            /* The client never acknowledged an overflowed response. */
            nau_list_del(&h->link);
            h->use.pending--;
            cw_h_set_final(h, CW_TIMEOUT);
            cw_h_check(h);
        } else if (h->use.deadline_ns < soonest) {
            soonest = h->use.deadline_ns;
        }
    }
    cw_rs_timers(ctx, now, &soonest);
    ctx->next_deadline = soonest;
}

void cw_rpc_cancel_all(cw_context_t *ctx)
{
    cw_rpc_cancel_net(ctx, NULL);
}

/* Everything in flight, or only what runs on @p net (NULL = all). */
void cw_rpc_cancel_net(cw_context_t *ctx, cw_network_t *net)
{
    struct nau_list *e, *next;

    CW_LOCK_ASSERT_HELD(&ctx->lock);
    for (e = ctx->inflight.next; e != &ctx->inflight; e = next) {
        cw_handle_t *h = nau_container_of(e, cw_handle_t, link);
        next = e->next;
        if (net && h->use.net != net)
            continue;
        cw_h_fail(h, CW_CANCELED);
        if (cw_h_flag(h, CW_HFL_LINGER))
            h_cancel_ops(h);
        cw_h_check(h);
    }
    for (e = ctx->wait_done.next; e != &ctx->wait_done; e = next) {
        cw_handle_t *h = nau_container_of(e, cw_handle_t, link);
        next = e->next;
        if (net && h->use.net != net)
            continue;
        nau_list_del(&h->link);
        h->use.pending--;
        cw_h_set_final(h, CW_CANCELED);
        cw_h_check(h);
    }
    for (e = ctx->bulk_ops.next; e != &ctx->bulk_ops; e = next) {
        cw_bulk_op_t *op = nau_container_of(e, cw_bulk_op_t, link);
        next = e->next;
        if (net && op->net != net)
            continue;
        cw_bulk_op_cancel_locked(op);
    }
    cw_rs_cancel_net(ctx, net);
    cw_notice_cancel_net(ctx, net);
    /* A response to a peer that died may never complete by itself (the
     * plugin is still waiting to notice): withdraw it, once, so shutdown
     * and network close do not leave its handle behind. */
    for (e = ctx->responding.next; e != &ctx->responding; e = e->next) {
        cw_handle_t *h = nau_container_of(e, cw_handle_t, resp_link);
        if ((net && h->use.net != net) || h->use.send_op == NULL ||
            cw_h_flag(h, CW_HFL_SEND_CANCELED))
            continue;
        cw_h_flag_set(h, CW_HFL_SEND_CANCELED);
        cw_h_cancel_send(h);
    }
    cw_sq_cancel_net(ctx, net);
}
