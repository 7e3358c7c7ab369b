/*
 * na-ofi progress: operation lifecycle, the completion queue, the retry
 * queue for -FI_EAGAIN, cancel, peer liveness, and the wait fd.
 *
 * An op is on exactly one of: the active list (posted or waiting to be
 * retried), the done list (status decided, callback due) or the zombie
 * list (callback ran after a cancel the provider did not honour in time;
 * the provider still holds its context, so its memory waits for that).
 */
#include <stdlib.h>
#include <string.h>

#include "ofi.h"

/* Completions taken per fi_cq_read().  Every call also runs rxm's
 * progress, which may read a socket's worth of new messages; returning
 * only a few completions per call let a flooding peer's messages pile up in
 * rxm's unexpected queue (16 KiB buffer each, a pool that never shrinks). */
#define OFI_CQ_BATCH        64
#define OFI_CQ_MAX_PER_CALL 256
#define OFI_DRAIN_MAX       8192 /* dropped messages per call, at most */
#define OFI_TICK_NS         (50ull * 1000000ull)

struct cw_na_op *ofi_op_new(struct cw_na_class *cls, enum cw_na_op_type type,
                            struct cw_na_addr *peer, cw_na_cb_t cb, void *arg)
{
    struct cw_na_op *op = nau_pool_get(&cls->op_pool);

    if (op == NULL)
        return NULL;
    memset(op, 0, sizeof(*op));
    op->ctx.kind = OFI_CTX_OP;
    op->type = type;
    op->cb = cb;
    op->arg = arg;
    op->peer = peer;
    if (peer != NULL)
        nau_ptable_ref(&peer->pnode);
    nau_list_init(&op->subs);
    return op;
}

void ofi_op_free(struct cw_na_class *cls, struct cw_na_op *op)
{
    while (!nau_list_empty(&op->subs)) {
        struct ofi_sub *s =
            nau_container_of(op->subs.next, struct ofi_sub, link);

        nau_list_del(&s->link);
        free(s);
    }
    ofi_addr_free(cls, op->peer);
    ofi_addr_free(cls, op->source);
    nau_pool_put(&cls->op_pool, op);
}

/* ---- Back-off ----
 *
 * rxm answers -FI_EAGAIN to a send while it has no connection to the peer,
 * and a send to a peer with no connection (none yet, or the last attempt
 * refused) starts an attempt.  Each refused attempt closes its connection,
 * and rxm then reads the completion queue every connection shares until
 * it is empty (rxm_close_conn -> rxm_flush_msg_cq in 1.17): while another
 * peer floods us, that read takes in its whole backlog at once, where the
 * catch-alls cannot keep up and rxm keeps each message in a buffer of its
 * own from a pool that never shrinks (docs/na-ofi.md, "Limitations").
 * Re-posting at every progress call made a gateway try a gone peer's
 * address hundreds of times a second until the peer timed out.
 *
 * So a peer's posts refused for longer than OFI_AGAIN_FREE_NS (a
 * connection set-up on a loaded machine) are spaced out: a gap from
 * OFI_AGAIN_MIN_NS, doubled at each refusal, up to OFI_AGAIN_MAX_NS.  A
 * post accepted ends it.  A message from the peer does not: rxm may have
 * held it long after the peer went (a gateway still read a gone
 * flooder's backlog 30 s after it exited, and each request it answered
 * had reset the back-off).  Each peer backs off alone: the retry list
 * skips its sends (keeping their order, a refused one back in its place)
 * and goes on with the others, where it used to stop at the first
 * refusal. */
#define OFI_AGAIN_FREE_NS (1000ull * 1000ull)
#define OFI_AGAIN_MIN_NS  (1000ull * 1000ull)
#define OFI_AGAIN_MAX_NS  (1000ull * 1000ull * 1000ull)

static bool ofi_is_send(const struct cw_na_op *op)
{
    return op->type == CW_NA_OP_SEND_UNEXPECTED ||
           op->type == CW_NA_OP_SEND_EXPECTED;
}

/* A send with a peer: what the back-off applies to. */
static bool ofi_peer_send(const struct cw_na_op *op)
{
    return op->peer != NULL && ofi_is_send(op);
}

/* A post to @p peer was refused with -FI_EAGAIN at @p now.  Even in the
 * free period the next post waits for a later call: within one pass of
 * the retry list the peer's later sends must not overtake a refused one
 * (rxm may finish connecting inside the next send call). */
void ofi_peer_again(struct cw_na_class *cls, struct cw_na_addr *peer,
                    uint64_t now)
{
    if (peer->again_since_ns == 0) {
        peer->again_since_ns = now;
        peer->again_gap_ns = 0;
    }
    if (now - peer->again_since_ns < OFI_AGAIN_FREE_NS) {
        peer->again_next_ns = now + 1;
        return;
    }
    if (peer->again_gap_ns == 0) {
        char str[128];

        ofi_format_raw(cls, peer->raw, peer->len, str, sizeof(str));
        OFI_DBG(cls, "peer %s: no connection for %llu ms; posts backed off",
                str,
                (unsigned long long)((now - peer->again_since_ns) / 1000000));
        peer->again_gap_ns = OFI_AGAIN_MIN_NS;
    } else if (peer->again_gap_ns < OFI_AGAIN_MAX_NS / 2)
        peer->again_gap_ns *= 2;
    else
        peer->again_gap_ns = OFI_AGAIN_MAX_NS;
    peer->again_next_ns = now + peer->again_gap_ns;
}

/* A post to @p peer went through: no back-off. */
void ofi_peer_accepted(struct cw_na_class *cls, struct cw_na_addr *peer)
{
    if (peer->again_since_ns == 0)
        return;
    peer->again_since_ns = 0;
    peer->again_next_ns = 0;
    peer->again_gap_ns = 0;
    cls->retry_next_ns = 0; /* its sends may go now */
}

bool ofi_peer_backing_off(const struct cw_na_class *cls,
                          const struct cw_na_addr *peer)
{
    return peer->again_next_ns != 0 && peer->again_next_ns > ofi_now(cls);
}

/* Puts @p op on the retry list before @p where (the list's head: at the
 * tail). */
static void ofi_retry_insert(struct cw_na_class *cls, struct cw_na_op *op,
                             struct nau_list *where)
{
    op->in_retry = true;
    nau_list_add_tail(where, &op->link);
    if (ofi_peer_send(op)) {
        op->peer->nretry++;
        /* Scanned when its peer's gap ends (at the next call if none). */
        if (op->peer->again_next_ns < cls->retry_next_ns)
            cls->retry_next_ns = op->peer->again_next_ns;
    } else {
        cls->retry_next_ns = 0;
    }
}

static void ofi_retry_unlink(struct cw_na_op *op)
{
    nau_list_del(&op->link);
    op->in_retry = false;
    if (ofi_peer_send(op))
        op->peer->nretry--;
}

void ofi_retry_push(struct cw_na_class *cls, struct cw_na_op *op)
{
    if (op->in_retry)
        return;
    op->retry_deadline_ns = ofi_now(cls) + cls->retry_timeout_ns;
    ofi_retry_insert(cls, op, &cls->retry);
}

static void ofi_op_deactivate(struct cw_na_class *cls, struct cw_na_op *op);

/* A send to the same peer as @p op waits ahead of it in the retry list,
 * or its peer backs off.  rxm answers -FI_EAGAIN while it connects and
 * moves the connection on inside the send calls themselves, so of a
 * window posted at once the first sends were refused and the last ones
 * accepted: requests reached a server out of order
 * (unit-rpc-spread-ofi-tcp).  A later send therefore queues behind an
 * earlier one still waiting. */
static bool ofi_send_must_wait(struct cw_na_class *cls,
                               const struct cw_na_op *op)
{
    if (!ofi_peer_send(op))
        return false;
    return op->peer->nretry > 0 || ofi_peer_backing_off(cls, op->peer);
}

static cw_status_t ofi_op_post(struct cw_na_class *cls, struct cw_na_op *op)
{
    if (op->type == CW_NA_OP_PUT || op->type == CW_NA_OP_GET)
        return ofi_rma_post(cls, op);
    return ofi_msg_post(cls, op);
}

cw_status_t ofi_op_start(struct cw_na_class *cls, struct cw_na_op *op)
{
    cw_status_t st;

    /* Active before posting: a zero-length RMA finishes inside the post. */
    nau_list_add_tail(&cls->active, &op->alink);
    if (op->peer != NULL)
        op->peer->nactive++;
    if (op->peer != NULL && ofi_is_send(op))
        op->peer->nsends++;
    if (op->type == CW_NA_OP_PUT || op->type == CW_NA_OP_GET)
        cls->nrma++;
    if (op->peer != NULL && op->peer->dead && cls->str_addr &&
        ofi_shm_owner((const char *)op->peer->raw) <= 0) {
        /* A dead fi_shm peer's region swallows sends without error. */
        ofi_op_finish(cls, op, CW_DISCONNECTED);
        return CW_OK;
    }
    if (ofi_send_must_wait(cls, op)) {
        ofi_retry_push(cls, op);
        return CW_OK;
    }
    st = ofi_op_post(cls, op);
    if (st == CW_AGAIN) {
        if (ofi_peer_send(op))
            ofi_peer_again(cls, op->peer, ofi_now(cls));
        ofi_retry_push(cls, op);
        return CW_OK;
    }
    if (st != CW_OK)
        ofi_op_deactivate(cls, op);
    else if (ofi_peer_send(op))
        ofi_peer_accepted(cls, op->peer);
    return st;
}

cw_status_t ofi_op_submit(struct cw_na_class *cls, struct cw_na_op *op,
                          cw_na_op_t **op_p)
{
    cw_status_t st = ofi_op_start(cls, op);

    if (st != CW_OK) {
        ofi_op_free(cls, op);
        return st;
    }
    if (op_p != NULL)
        *op_p = op;
    return CW_OK;
}

static void ofi_op_deactivate(struct cw_na_class *cls, struct cw_na_op *op)
{
    nau_list_del(&op->alink);
    if (op->peer != NULL)
        op->peer->nactive--;
    if (op->peer != NULL && ofi_is_send(op))
        op->peer->nsends--;
    if (op->type == CW_NA_OP_PUT || op->type == CW_NA_OP_GET)
        cls->nrma--;
    if (op->in_retry)
        ofi_retry_unlink(op);
    if (op->unexp_waiting) {
        nau_list_del(&op->link);
        op->unexp_waiting = false;
    }
    ofi_exp_recv_unlink(cls, op);
}

/* The provider (or the plugin) is done with @p op: decide its status and
 * queue its callback.  For an op already completed by an abandoned cancel
 * this only releases what the provider held. */
void ofi_op_finish(struct cw_na_class *cls, struct cw_na_op *op,
                   cw_status_t status)
{
    op->in_provider = false;
    if (op->finished) {
        if (op->cb_done) {
            nau_list_del(&op->zlink);
            ofi_op_free(cls, op);
        }
        return;
    }
    if (op->forced != CW_OK && status != CW_OK)
        status = op->forced;
    if (op->status == CW_OK)
        op->status = status;
    op->finished = true;
    ofi_op_deactivate(cls, op);
    nau_list_add_tail(&cls->done, &op->link);
}

/* Ask the provider to drop @p op.  RMA pieces already posted are left to
 * finish: cancelling a read whose reply is on the wire makes the tcp
 * provider drop the whole connection; the op stops posting pieces and
 * completes, canceled, when they are back (or after cancel_grace_ms). */
static void ofi_op_fi_cancel(struct cw_na_class *cls, struct cw_na_op *op)
{
    if (op->type != CW_NA_OP_PUT && op->type != CW_NA_OP_GET)
        fi_cancel(&cls->ep->fid, &op->ctx);
}

static void ofi_op_abort(struct cw_na_class *cls, struct cw_na_op *op,
                         cw_status_t status)
{
    if (op->finished || op->forced != CW_OK)
        return;
    op->forced = status;
    if (!op->in_provider) {
        ofi_op_finish(cls, op, status);
        return;
    }
    if (op->in_retry)
        ofi_retry_unlink(op); /* an RMA op: stop posting pieces */
    op->abandon_ns = ofi_now(cls) + cls->cancel_grace_ns;
    ofi_op_fi_cancel(cls, op);
}

cw_status_t ofi_cancel(cw_na_class_t *cls, cw_na_op_t *op)
{
    if (op == NULL)
        return CW_INVALID_ARG;
    ofi_op_abort(cls, op, CW_CANCELED);
    return CW_OK;
}

cw_status_t ofi_op_error(const struct cw_na_op *op, int err)
{
    if (op->forced != CW_OK)
        return op->forced;
    /* Nobody asked: rxm flushes the ops of a connection that failed with
     * FI_ECANCELED. */
    if (err == FI_ECANCELED)
        return CW_DISCONNECTED;
    return ofi_status(err);
}

void ofi_peer_alive(struct cw_na_class *cls, struct cw_na_addr *peer)
{
    if (peer == NULL)
        return;
    peer->last_alive_ns = ofi_now(cls);
    peer->ping_sent_ns = 0;
    peer->dead = false;
    peer->ever_alive = true;
    peer->last_err = 0;
    if (peer->cprobe_fd1 != 0)
        ofi_cprobe_close(peer);
}

/* An operation with @p peer failed with a connection error.  rxm
 * reconnects by itself (tcp drops a connection, for example, when a remote
 * read hits a released region), so that alone does not condemn the peer:
 * probe it now and let the probe decide. */
void ofi_peer_suspect(struct cw_na_class *cls, struct cw_na_addr *peer)
{
    if (peer->ping_sent_ns == 0 && !peer->dead && cls->keepalive_ns != 0 &&
        peer != cls->self)
        ofi_ctrl_send(cls, peer, OFI_CTRL_PING);
}

void ofi_peer_failed(struct cw_na_class *cls, struct cw_na_addr *peer,
                     cw_status_t status)
{
    struct nau_list *l, *next;

    if (!peer->dead) {
        char str[128];

        ofi_format_raw(cls, peer->raw, peer->len, str, sizeof(str));
        OFI_WARN_RL(cls,
                    "peer %s is %s (last libfabric error: %s); failing its "
                    "%u pending operation(s)",
                    str, status == CW_UNREACHABLE ? "unreachable" : "gone",
                    peer->last_err ? fi_strerror(peer->last_err)
                                   : "none, no answer to probes",
                    peer->nactive);
    }
    peer->dead = true;
    peer->ping_sent_ns = 0;
    ofi_cprobe_close(peer);
    if (!cls->str_addr)
        ofi_peer_reset(cls, peer);
    for (l = cls->active.next; l != &cls->active; l = next) {
        struct cw_na_op *op = nau_container_of(l, struct cw_na_op, alink);

        next = l->next;
        if (op->peer == peer)
            ofi_op_abort(cls, op, status);
    }
}

/* Logs an error completion with the peer's address and libfabric's own
 * texts, and remembers the error on the peer for its failure report.
 * Rate-limited: a peer that vanishes with many operations in flight, or a
 * flood of them, fails each one (docs/reliability.md, "Floods"). */
static void ofi_log_cq_error(struct cw_na_class *cls,
                             const struct fi_cq_err_entry *err,
                             struct cw_na_addr *peer)
{
    char str[128] = "?";
    char pbuf[256];
    const char *pmsg;

    int code = err->err < 0 ? -err->err : err->err;

    if (code == FI_ECANCELED)
        return;
    pmsg = fi_cq_strerror(cls->cq, err->prov_errno, err->err_data, pbuf,
                          sizeof(pbuf));
    if (peer != NULL) {
        ofi_format_raw(cls, peer->raw, peer->len, str, sizeof(str));
        peer->last_err = code;
    }
    if (code == FI_ETRUNC)
        OFI_DBG(cls, "message truncated (%zu bytes over)", (size_t)err->olen);
    else
        OFI_WARN_RL(cls, "operation with %s failed: %s (%s)", str,
                    fi_strerror(code), pmsg ? pmsg : "");
}

static void ofi_dispatch(struct cw_na_class *cls, void *context,
                         const struct fi_cq_tagged_entry *e,
                         const struct fi_cq_err_entry *err)
{
    struct ofi_ctx *ctx = context;
    int code = err ? (err->err < 0 ? -err->err : err->err) : 0;

    if (ctx == NULL) {
        /* An injected send (ofi_msg_inject) the provider could not deliver:
         * it has no op to fail; the RPC it carried meets its deadline. */
        if (err != NULL) {
            ofi_log_cq_error(cls, err, NULL);
            ofi_drop_count(cls, "an injected send failed");
        }
        return;
    }
    switch (ctx->kind) {
    case OFI_CTX_OP: {
        struct cw_na_op *op = nau_container_of(ctx, struct cw_na_op, ctx);

        if (err)
            ofi_log_cq_error(cls, err, op->peer);
        if (op->finished) /* abandoned earlier: just release */
            ofi_op_finish(cls, op, CW_CANCELED);
        else
            ofi_msg_complete(cls, op, e, code);
        break;
    }
    case OFI_CTX_SUB: {
        struct ofi_sub *s = nau_container_of(ctx, struct ofi_sub, ctx);

        if (err)
            ofi_log_cq_error(cls, err, s->op->peer);
        ofi_rma_sub_done(cls, s, code);
        break;
    }
    case OFI_CTX_CTRL_RECV:
        ofi_ctrl_recv_done(cls, e, code);
        break;
    case OFI_CTX_EXP_RECV:
        ofi_exp_recv_done(cls, ctx, e, code);
        break;
    case OFI_CTX_SINK:
        ofi_sink_done(cls, ctx, code);
        break;
    case OFI_CTX_CTRL_SEND: {
        struct ofi_ctrl *c = nau_container_of(ctx, struct ofi_ctrl, ctx);

        if (err)
            ofi_log_cq_error(cls, err, c->peer);
        ofi_ctrl_send_done(cls, c, code);
        break;
    }
    }
}

/* Reads the CQ until empty (bounded); *n_p gets how many entries and
 * *empty_p whether the provider had nothing more. */
static cw_status_t ofi_read_cq(struct cw_na_class *cls, unsigned *n_p,
                               bool *empty_p)
{
    struct fi_cq_tagged_entry ev[OFI_CQ_BATCH];
    unsigned total = 0;
    bool empty = false;

    /* A receive reposted after dropping a message (a sink, a malformed
     * unexpected or control message) completes again at once while rxm
     * holds more for it: keep reading while messages are dropped (bounded
     * apart), so that a flood of them goes as fast as it comes and does not
     * pile up in rxm (ofi_msg.c, "tag sinks"). */
    cls->drained = 0;
    while (total - cls->drained < OFI_CQ_MAX_PER_CALL &&
           cls->drained < OFI_DRAIN_MAX) {
        unsigned hits = cls->drained;
        ssize_t n = fi_cq_read(cls->cq, ev, OFI_CQ_BATCH);

        if (n > 0) {
            for (ssize_t i = 0; i < n; i++)
                ofi_dispatch(cls, ev[i].op_context, &ev[i], NULL);
            total += (unsigned)n;
            if (n < OFI_CQ_BATCH && cls->drained == hits)
                break;
        } else if (n == -FI_EAVAIL) {
            struct fi_cq_err_entry err;
            struct fi_cq_tagged_entry e;

            memset(&err, 0, sizeof(err));
            n = fi_cq_readerr(cls->cq, &err, 0);
            if (n < 0) {
                if (n == -FI_EAGAIN)
                    continue;
                OFI_ERR(cls, "fi_cq_readerr() failed: %s",
                        fi_strerror((int)-n));
                return ofi_status((int)n);
            }
            memset(&e, 0, sizeof(e));
            e.op_context = err.op_context;
            e.flags = err.flags;
            e.len = err.len;
            e.buf = err.buf;
            e.tag = err.tag;
            ofi_dispatch(cls, err.op_context, &e, &err);
            total++;
        } else if (n == -FI_EAGAIN) {
            empty = true;
            break;
        } else {
            OFI_ERR(cls, "fi_cq_read() failed: %s", fi_strerror((int)-n));
            return ofi_status((int)n);
        }
    }
    *n_p = total;
    *empty_p = empty;
    return CW_OK;
}

/* Reads the CQ until the provider has nothing more (bounded); false if
 * it still had. */
static bool ofi_read_cq_all(struct cw_na_class *cls)
{
    for (int i = 0; i < 64; i++) {
        unsigned n;
        bool empty;

        if (ofi_read_cq(cls, &n, &empty) != CW_OK)
            return false;
        if (empty)
            return true;
    }
    return false;
}

static void ofi_run_retries(struct cw_na_class *cls, uint64_t now)
{
    struct nau_list *l, *next;
    uint64_t wake = UINT64_MAX;

    if (now < cls->retry_next_ns)
        return; /* every op waits for its peer's gap */
    for (l = cls->retry.next; l != &cls->retry; l = next) {
        struct cw_na_op *op = nau_container_of(l, struct cw_na_op, link);
        bool send = ofi_peer_send(op);
        cw_status_t st;

        next = l->next;
        if (now > op->retry_deadline_ns) {
            OFI_WARN_RL(
                cls,
                "operation could not be posted within %llu ms "
                "(provider kept answering -FI_EAGAIN)",
                (unsigned long long)(cls->retry_timeout_ns / 1000000ull));
            ofi_retry_unlink(op);
            if (op->in_provider)
                ofi_op_abort(cls, op, CW_TIMEOUT);
            else
                ofi_op_finish(cls, op, CW_TIMEOUT);
            continue;
        }
        if (send && op->peer->again_next_ns > now) {
            /* Its peer backs off; its later sends wait behind it. */
            if (op->peer->again_next_ns < wake)
                wake = op->peer->again_next_ns;
            if (op->retry_deadline_ns < wake)
                wake = op->retry_deadline_ns;
            continue;
        }
        ofi_retry_unlink(op);
        st = ofi_op_post(cls, op);
        if (st == CW_AGAIN) {
            /* Back in its place (the RMA path may already have queued it
             * again, at the tail). */
            if (!op->in_retry)
                ofi_retry_insert(cls, op, next);
            if (!send) {
                wake = 0; /* the provider pushes back: the rest later */
                break;
            }
            ofi_peer_again(cls, op->peer, now);
            if (op->peer->again_next_ns < wake)
                wake = op->peer->again_next_ns;
            if (op->retry_deadline_ns < wake)
                wake = op->retry_deadline_ns;
            continue;
        }
        if (st != CW_OK)
            ofi_op_finish(cls, op, st);
        else if (send)
            ofi_peer_accepted(cls, op->peer);
    }
    cls->retry_next_ns = wake == UINT64_MAX ? 0 : wake;
}

/* Liveness probes and abandoned cancels; runs at most every OFI_TICK_NS. */
static void ofi_tick(struct cw_na_class *cls, uint64_t now)
{
    struct nau_list *l, *next;
    struct nau_ptable_node *n, *pnext;

    if (now < cls->next_liveness_ns)
        return;
    cls->next_liveness_ns = now + OFI_TICK_NS;
    ofi_drop_log(cls, now);
    if (cls->sinks != NULL)
        ofi_sinks_tick(cls, now);
    for (l = cls->active.next; l != &cls->active; l = next) {
        struct cw_na_op *op = nau_container_of(l, struct cw_na_op, alink);

        next = l->next;
        if (op->abandon_ns != 0 && now >= op->abandon_ns && !op->finished) {
            /* The provider did not give the context back in time; report
             * the op done and keep its memory until it does. */
            cw_status_t st = op->forced;

            op->finished = true;
            op->status = st;
            ofi_op_deactivate(cls, op);
            nau_list_add_tail(&cls->done, &op->link);
        }
    }
    if (cls->pongs_due > 0)
        ofi_pongs_due(cls, now);
    ofi_peers_reap(cls, now);
    ofi_reap_tick(cls, now);
    if (cls->keepalive_ns == 0)
        return;
    for (n = nau_ptable_iter(&cls->peers, NULL); n != NULL; n = pnext) {
        struct cw_na_addr *p = nau_container_of(n, struct cw_na_addr, pnode);

        pnext = nau_ptable_iter(&cls->peers, n);
        if (p->nactive == 0 || p == cls->self)
            continue;
        if (cls->str_addr && !p->dead) {
            int owner = ofi_shm_owner((const char *)p->raw);

            if (owner > 0) {
                p->lock_seen = true;
            } else if (owner < 0 || p->lock_seen) {
                if (owner == 0)
                    ofi_shm_reap(cls, (const char *)p->raw);
                /* What it sent before it went is in our region, not
                 * all of it read yet: read it first, or the receives
                 * it completes would fail instead. */
                if (!ofi_read_cq_all(cls))
                    continue; /* judged at the next tick */
                ofi_peer_failed(cls, p, CW_DISCONNECTED);
                continue;
            }
        } else if (cls->str_addr) {
            /* Dead, its ops failed, some still held by the provider:
             * no probe (ofi_ctrl_send). */
            continue;
        }
        if (p->ping_sent_ns != 0) {
            /* Refused by rxm: if nothing accepts connections at its
             * address any more, the peer we heard from has gone. */
            if (cls->probe_connect && p->ever_alive && p->again_since_ns != 0 &&
                ofi_cprobe_run(p) == OFI_CPROBE_REFUSED) {
                p->last_err = FI_ECONNREFUSED;
                ofi_peer_failed(cls, p, CW_DISCONNECTED);
                continue;
            }
            if (now - p->ping_sent_ns > cls->peer_timeout_ns)
                ofi_peer_failed(
                    cls, p, p->ever_alive ? CW_DISCONNECTED : CW_UNREACHABLE);
        } else if (now - p->last_alive_ns > cls->keepalive_ns) {
            ofi_ctrl_send(cls, p, OFI_CTRL_PING);
        }
    }
}

static unsigned ofi_run_callbacks(struct cw_na_class *cls, unsigned max)
{
    unsigned n = 0;

    while (!nau_list_empty(&cls->done) && (max == 0 || n < max)) {
        struct cw_na_op *op =
            nau_container_of(cls->done.next, struct cw_na_op, link);
        struct cw_na_cb_info info = {
            .status = op->status,
            .type = op->type,
            .arg = op->arg,
        };
        cw_na_cb_t cb = op->cb;

        nau_list_del(&op->link);
        if (op->type == CW_NA_OP_RECV_UNEXPECTED) {
            info.u.recv_unexpected.len = op->status == CW_OK ? op->recv_len : 0;
            info.u.recv_unexpected.tag = op->tag;
            if (op->status == CW_OK) {
                info.u.recv_unexpected.source = op->source;
                op->source = NULL; /* the callback owns it now */
            }
        } else if (op->type == CW_NA_OP_RECV_EXPECTED) {
            info.u.recv_expected.len = op->status == CW_OK ? op->recv_len : 0;
        }
        op->cb_done = true;
        if (op->in_provider)
            nau_list_add_tail(&cls->zombies, &op->zlink);
        else
            ofi_op_free(cls, op);
        cb(&info);
        n++;
    }
    return n;
}

cw_status_t ofi_progress(cw_na_class_t *cls, unsigned max, unsigned *count_p)
{
    unsigned n = 0;
    bool empty;
    cw_status_t st = ofi_read_cq(cls, &n, &empty);
    uint64_t now = ofi_now(cls);

    if (st != CW_OK)
        return st;
    if (n > 0)
        cls->last_activity_ns = now;
    if (!cls->ctrl_posted)
        ofi_ctrl_post_recv(cls);
    if (cls->exp_unposted > 0)
        ofi_exp_post_bufs(cls);
    if (cls->sinks_unposted > 0)
        ofi_sinks_post(cls);
    if (!nau_list_empty(&cls->retry))
        ofi_run_retries(cls, now);
    ofi_tick(cls, now);
    n = ofi_run_callbacks(cls, max);
    if (count_p != NULL)
        *count_p = n;
    return CW_OK;
}

int ofi_get_wait_fd(cw_na_class_t *cls)
{
    return (cls->flags & CW_NA_BUSY) ? -1 : cls->wait_fd;
}

/* rxm moves RMA (and rendezvous data) only from progress calls, and a
 * transfer completes nothing until its end: poll throughout. */
bool ofi_streaming(cw_na_class_t *cls)
{
    return cls->nrma > 0;
}

bool ofi_safe_to_sleep(cw_na_class_t *cls)
{
    struct fid *fids[1];

    if ((cls->flags & CW_NA_BUSY) || cls->wait_fd < 0)
        return false;
    if (!nau_list_empty(&cls->done) || !nau_list_empty(&cls->retry) ||
        !cls->ctrl_posted || cls->exp_unposted > 0 || cls->sinks_unposted > 0)
        return false;
    /* rxm drives RMA (and rendezvous) from progress calls, not always from
     * events that signal the CQ's fd: keep polling while any is in flight. */
    if (cls->nrma > 0)
        return false;
    /* Right after traffic the next completion is usually microseconds
     * away, and waking a halted CPU costs tens of them (more in a VM): with
     * spin_us set, say "not yet" for that long so a caller that polls on
     * "not safe" keeps polling. */
    if (cls->spin_ns != 0 &&
        ofi_now(cls) - cls->last_activity_ns < cls->spin_ns)
        return false;
    fids[0] = &cls->cq->fid;
    return fi_trywait(cls->fabric, fids, 1) == FI_SUCCESS;
}

void ofi_progress_fini(struct cw_na_class *cls)
{
    struct nau_list *lists[] = {&cls->done, &cls->zombies, &cls->active,
                                &cls->ctrl_sends};

    for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
        struct nau_list *h = lists[i];

        if (h->next == NULL)
            continue;
        while (!nau_list_empty(h)) {
            struct nau_list *l = h->next;

            nau_list_del(l);
            if (h == &cls->ctrl_sends) {
                free(nau_container_of(l, struct ofi_ctrl, link));
                continue;
            }
            {
                struct cw_na_op *op =
                    h == &cls->active
                        ? nau_container_of(l, struct cw_na_op, alink)
                    : h == &cls->zombies
                        ? nau_container_of(l, struct cw_na_op, zlink)
                        : nau_container_of(l, struct cw_na_op, link);

                if (h == &cls->active && (op->in_retry || op->unexp_waiting))
                    nau_list_del(&op->link);
                ofi_op_free(cls, op);
            }
        }
    }
    nau_pool_fini(&cls->op_pool);
}
