/*
 * Coalescing (CW_CTX_COALESCE, docs/wire.md "Batches").
 *
 * A gateway forwards many requests to the same next hop, and answers many
 * requests of one client, in one pass of its completion queue; each
 * message sent alone costs a system call, and on loopback TCP the
 * receiver's whole stack as well.  In a coalescing context, a message
 * built inside cw_trigger waits on ctx->sendq until the pass ends; then
 * the messages bound for one peer leave as one CW_MSG_BATCH (a single one
 * still leaves alone, exactly as without coalescing, so a lone RPC pays
 * nothing).  Nothing waits beyond the pass that queued it, so no timer is
 * involved and latency is unchanged when there is nothing to coalesce.
 *
 * Requests, and responses to a caller whose request said it takes
 * batches (CW_HF_BATCHES: its network posts unexpected receives); a
 * response inside a batch reaches its request by request id and source,
 * and the receive posted for it is withdrawn (rpc_client.c).
 *
 * Answers in kind: a context without the flag still queues the answers
 * its handlers give, inside the pass, to requests that came in a batch
 * from a caller that takes batches.  That caller (a gateway forwarding
 * many clients' requests, or a coalescing client) sent them together, so
 * answering them together delays none by more than the pass that ran
 * them, and saves the server a send per answer and the caller a receive
 * (docs/wire.md, "Batches").
 *
 * Ownership: a queued handle counts its send pending, as if a plugin held
 * it; send_op is CW_SQ_QUEUED, then CW_SQ_BATCHED once its batch is in a
 * plugin.  A message or batch the plugin takes at once (cw_na_msg_inject)
 * completes in the flush, as its callback would have.  A cancel marks a queued
 * message (never sent, completed with CW_CANCELED at the flush) and leaves a
 * batched one alone: the batch completes soon, or fails with the connection.
 * Only closing the network or the context withdraws batches in flight
 * (cw_sq_cancel_net): a batch to a peer that died may never complete by itself;
 * it completes the queued messages for that network at once too, since the
 * close may be called from a callback of the very pass they wait for.
 */
#include "rpc_priv.h"

#include <stdlib.h>
#include <string.h>

const char cw_sq_marks[2];

/* Queued messages looked at for one batch. */
#define CW_SQ_SCAN (4u * CW_BATCH_MAX)

struct cw_batch {
    struct nau_list link; /**< ctx->batches */
    cw_network_t *net;
    cw_na_op_t *op;
    bool canceled;
    unsigned n;
    uint8_t *msg;
    cw_handle_t *h[CW_BATCH_MAX];
};

/* The context whose pass this thread is in (cw_trigger), or NULL. */
static CW_TLS cw_context_t *sq_scope;
/* Messages this thread queued in contexts without CW_CTX_COALESCE (answers
 * in kind) since its outermost pass began: only then does leaving a pass
 * of such a context take its lock to flush. */
static CW_TLS unsigned sq_in_kind;

bool cw_sq_offer(cw_handle_t *h, const uint8_t *msg, size_t len)
{
    cw_context_t *ctx = h->ctx;
    bool in_kind =
        h->use.role == CW_H_SERVER && cw_h_flag(h, CW_HFL_FROM_BATCH);

    CW_LOCK_ASSERT_HELD(&ctx->lock);
    if (sq_scope != ctx || (!(ctx->opts.flags & CW_CTX_COALESCE) && !in_kind) ||
        !(h->use.net->caps.flags & CW_NA_CAP_COALESCE) ||
        (h->use.role == CW_H_SERVER && !(h->use.rflags & CW_HF_BATCHES)) ||
        len + CW_HDR_SIZE + CW_BATCH_ENTRY_HDR >
            h->use.net->caps.max_unexpected_size)
        return false;
    if (!(ctx->opts.flags & CW_CTX_COALESCE))
        sq_in_kind++;
    h->sq_msg = msg;
    h->sq_len = len;
    cw_h_flag_clear(h, CW_HFL_SQ_CANCEL);
    h->use.send_op = CW_SQ_QUEUED;
    nau_list_add_tail(&ctx->sendq, &h->sq_link);
    ctx->nsendq++;
    return true;
}

/* Where the handle's message goes: a request to its destination, a
 * response to the request's source. */
static inline cw_na_addr_t *sq_dest(cw_handle_t *h)
{
    return h->use.role == CW_H_SERVER ? h->use.srv.src.na : h->use.cli.peer;
}

static void sq_done(cw_handle_t *h, cw_status_t st)
{
    if (h->use.role == CW_H_SERVER)
        cw_resp_send_done(h, st);
    else
        cw_forward_send_done(h, st);
}

static void sq_take(cw_context_t *ctx, cw_handle_t *h)
{
    nau_list_del(&h->sq_link);
    ctx->nsendq--;
}

/* Complete a queued message that will not be sent: cancelled, or its
 * network closed. */
static void sq_drop(cw_context_t *ctx, cw_handle_t *h)
{
    sq_take(ctx, h);
    sq_done(h, cw_h_flag(h, CW_HFL_SQ_CANCEL) ? CW_CANCELED : CW_DISCONNECTED);
}

static void batch_sent_cb(const struct cw_na_cb_info *info)
{
    struct cw_batch *b = info->arg;

    nau_list_del(&b->link);
    for (unsigned i = 0; i < b->n; i++)
        sq_done(b->h[i], info->status);
    free(b->msg);
    free(b);
}

/* Send one queued message by itself, as it would have gone unqueued.
 * Where the plugin takes it at once (cw_na_msg_inject), its send is
 * complete here, as its callback would have found it: the handle counted
 * the send pending when it was queued, and sq_done does the rest. */
static void sq_send_alone(cw_handle_t *h)
{
    bool srv = h->use.role == CW_H_SERVER;
    cw_status_t st;

    st = cw_na_msg_inject(h->use.net->na, h->sq_msg, h->sq_len, sq_dest(h),
                          srv ? h->use.tag : 0, srv);
    if (st != CW_AGAIN) {
        sq_done(h, st);
        return;
    }
    if (srv)
        st = cw_na_msg_send_expected(h->use.net->na, h->sq_msg, h->sq_len,
                                     h->use.srv.src.na, h->use.tag,
                                     cw_resp_send_cb, h, &h->use.send_op);
    else
        st = cw_na_msg_send_unexpected(h->use.net->na, h->sq_msg, h->sq_len,
                                       h->use.cli.peer, 0, cw_forward_send_cb,
                                       h, &h->use.send_op);
    if (st != CW_OK)
        sq_done(h, st);
}

/* Send the batch of @p n requests (n >= 2) in @p hs: one message whose
 * entries are the requests as each would have travelled alone. */
static void sq_send_batch(cw_context_t *ctx, cw_handle_t **hs, unsigned n,
                          size_t bytes)
{
    struct cw_wire_hdr hdr = {.type = CW_MSG_BATCH};
    cw_network_t *net = hs[0]->use.net;
    struct cw_batch *b;
    size_t off = CW_HDR_SIZE;
    bool injected;
    cw_status_t st;

    b = malloc(sizeof(*b));
    if (b == NULL || (b->msg = malloc(CW_HDR_SIZE + bytes)) == NULL) {
        /* No memory for the batch: each one alone. */
        free(b);
        for (unsigned i = 0; i < n; i++)
            sq_send_alone(hs[i]);
        return;
    }
    b->n = n;
    b->net = net;
    b->op = NULL;
    b->canceled = false;
    nau_list_add_tail(&ctx->batches,
                      &b->link); /* before: it may complete at once */
    hdr.payload_len = (uint32_t)bytes;
    cw_wire_hdr_encode(b->msg, &hdr);
    for (unsigned i = 0; i < n; i++) {
        off += cw_wire_batch_put(b->msg + off, hs[i]->sq_msg, hs[i]->sq_len);
        b->h[i] = hs[i];
        hs[i]->use.send_op = CW_SQ_BATCHED;
    }
    /* Taken at once (or refused): complete now, as its callback would. */
    st = cw_na_msg_inject(net->na, b->msg, off, sq_dest(hs[0]), 0, false);
    injected = st != CW_AGAIN;
    if (!injected)
        st = cw_na_msg_send_unexpected(net->na, b->msg, off, sq_dest(hs[0]), 0,
                                       batch_sent_cb, b, &b->op);
    if (injected || st != CW_OK) {
        struct cw_na_cb_info info = {.status = st, .arg = b};
        batch_sent_cb(&info);
        if (st != CW_OK)
            return;
    }
    ctx->stats.na_ops++;
    ctx->stats.tx_batches++;
    ctx->stats.tx_batched += n;
}

void cw_sq_flush(cw_context_t *ctx)
{
    cw_handle_t *hs[CW_BATCH_MAX];

    CW_LOCK_ASSERT_HELD(&ctx->lock);
    while (!nau_list_empty(&ctx->sendq)) {
        cw_handle_t *first =
            nau_container_of(ctx->sendq.next, cw_handle_t, sq_link);
        cw_network_t *net = first->use.net;
        size_t limit = net->caps.max_unexpected_size - CW_HDR_SIZE;
        size_t bytes = 0;
        unsigned n = 0, seen = 0;
        struct nau_list *e, *next;

        /* The first message's peer: gather its messages in order, as many
         * as one batch holds; the rest wait for the next round.  The scan
         * for them is bounded, so that a pass answering hundreds of
         * different peers costs a constant per message, not one address
         * comparison per pair. */
        for (e = ctx->sendq.next;
             e != &ctx->sendq && n < CW_BATCH_MAX && seen < CW_SQ_SCAN;
             e = next, seen++) {
            cw_handle_t *h = nau_container_of(e, cw_handle_t, sq_link);
            size_t need = CW_BATCH_ENTRY_HDR + h->sq_len;
            next = e->next;
            if (h != first &&
                (h->use.net != net ||
                 !cw_na_addr_cmp(net->na, sq_dest(h), sq_dest(first))))
                continue;
            if (cw_h_flag(h, CW_HFL_SQ_CANCEL) || net->closed) {
                sq_drop(ctx, h);
                if (h == first)
                    break;
                continue;
            }
            if (bytes + need > limit)
                break;
            sq_take(ctx, h);
            hs[n++] = h;
            bytes += need;
        }
        if (n == 1)
            sq_send_alone(hs[0]);
        else if (n > 1)
            sq_send_batch(ctx, hs, n, bytes);
    }
}

void cw_sq_cancel_net(cw_context_t *ctx, cw_network_t *net)
{
    struct nau_list *e, *next;

    CW_LOCK_ASSERT_HELD(&ctx->lock);
    /* Queued messages complete now, not at the end of the pass: the close
     * may run inside that pass (a callback), waiting for them. */
    for (e = ctx->sendq.next; e != &ctx->sendq; e = next) {
        cw_handle_t *h = nau_container_of(e, cw_handle_t, sq_link);
        next = e->next;
        if (net == NULL || h->use.net == net) {
            sq_take(ctx, h);
            sq_done(h, CW_CANCELED);
        }
    }
    for (e = ctx->batches.next; e != &ctx->batches; e = next) {
        struct cw_batch *b = nau_container_of(e, struct cw_batch, link);
        next = e->next; /* a plugin may complete it inside the cancel */
        if ((net && b->net != net) || b->canceled || b->op == NULL)
            continue;
        b->canceled = true;
        cw_na_cancel(b->net->na, b->op);
    }
}

cw_context_t *cw_sq_enter(cw_context_t *ctx)
{
    cw_context_t *prev = sq_scope;

    sq_scope = ctx;
    return prev;
}

void cw_sq_leave(cw_context_t *ctx, cw_context_t *prev)
{
    bool in_kind = sq_in_kind > 0;

    sq_scope = prev;
    /* A pass nested in another context's may have queued nothing here:
     * the count is per thread, so it is cleared only by the outermost
     * pass, and an inner one just finds an empty queue. */
    if (prev == NULL)
        sq_in_kind = 0;
    if (!(ctx->opts.flags & CW_CTX_COALESCE) && !in_kind)
        return;
    cw_lock_take(&ctx->lock);
    if (ctx->nsendq > 0)
        cw_sq_flush(ctx);
    cw_lock_give(&ctx->lock);
}

void *cw_context_batch_begin(cw_context_t *ctx)
{
    if (ctx == NULL)
        return NULL;
    /* The token is the enclosing scope, only ever compared, never
     * dereferenced: a wrong one cannot crash. */
    return cw_sq_enter(ctx);
}

void cw_context_batch_end(cw_context_t *ctx, void *token)
{
    if (ctx == NULL)
        return;
    /* Nested in a scope of the same context (a forward hook's own, inside
     * cw_trigger's pass): the outer one sends what both queued, together.
     * A cw_trigger nested in a callback still flushes when it ends, for a
     * caller that waits there for what it sent. */
    if (token == (void *)ctx) {
        cw_sq_enter(ctx);
        return;
    }
    cw_sq_leave(ctx, token);
}
