/*
 * Chunk-level resume of delegated transfers (docs/bulk-gateway.md,
 * "Resume").  A transfer on a proxy handle of an idempotent request is
 * delegated in windows; the contiguous prefix of windows the gateway
 * answered OK is acknowledged.  When the gateway fails, the transfer is
 * suspended until the request's deadline.  A RESUME request with the same
 * resume id (re-forwarded by a gateway through another path) is attached
 * to the unanswered server handle instead of running the handler again:
 * the proxy handles take its new tokens, the handle its return path, and
 * the suspended transfers continue from their acknowledged offset.
 */
#include "bulk_proxy.h"
#include "rpc_priv.h"

#include <stdlib.h>
#include <string.h>

static void rs_unref(struct cw_rsess *s)
{
    if (s == NULL || --s->refs > 0)
        return;
    s->ctx->nrsess--;
    free(s->desc);
    free(s);
}

void cw_rs_open(cw_handle_t *h)
{
    cw_context_t *ctx = h->ctx;
    struct cw_rsess *s;

    CW_LOCK_ASSERT_HELD(&ctx->lock);
    if (h->use.role == CW_H_CLIENT || !(h->use.rflags & CW_HF_IDEMPOTENT) ||
        (h->use.rflags & CW_HF_ONE_WAY) || cw_h_flag(h, CW_HFL_SELF) ||
        h->use.srv.rsess != NULL)
        return;
    if (ctx->nrsess >= CW_RS_MAX_SESS) {
        CW_LOG_RL(CW_LOG_WARN, "core",
                  "%u idempotent requests in flight: "
                  "this one will not be resumable",
                  ctx->nrsess);
        return;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return;
    s->ctx = ctx;
    s->refs = 1; /* the handle's */
    s->id = h->use.resume_id;
    s->h = h;
    nau_list_init(&s->bulks);
    nau_list_init(&s->ops);
    ctx->nrsess++;
    h->use.srv.rsess = s;
}

const uint8_t *cw_rs_desc(cw_handle_t *h, const cw_buf_t *in, size_t *len_p)
{
    CW_LOCK_ASSERT_HELD(&h->ctx->lock);
    if (h->use.srv.rsess != NULL && h->use.srv.rsess->desc != NULL) {
        *len_p = h->use.srv.rsess->desc_len;
        return h->use.srv.rsess->desc;
    }
    *len_p = in->desc_len;
    return in->desc;
}

void cw_rs_bulk_join(cw_handle_t *h, cw_bulk_t *b, unsigned idx)
{
    struct cw_rsess *s = h->use.srv.rsess;

    CW_LOCK_ASSERT_HELD(&h->ctx->lock);
    if (s == NULL || !cw_bproxy_is_proxy(b) || b->rsess != NULL)
        return;
    s->refs++;
    b->rsess = s;
    b->rs_idx = idx;
    nau_list_add_tail(&s->bulks, &b->rs_link);
}

void cw_rs_bulk_leave(cw_bulk_t *b)
{
    CW_LOCK_ASSERT_HELD(&b->ctx->lock);
    if (b->rsess == NULL)
        return;
    nau_list_del(&b->rs_link);
    rs_unref(b->rsess);
    b->rsess = NULL;
}

void cw_rs_handle_leave(cw_handle_t *h)
{
    CW_LOCK_ASSERT_HELD(&h->ctx->lock);
    if (h->use.srv.rsess == NULL)
        return;
    h->use.srv.rsess->h = NULL;
    rs_unref(h->use.srv.rsess);
    h->use.srv.rsess = NULL;
}

/* ---- windows ------------------------------------------------------------ */

static void rs_step(cw_bulk_op_t *op);

static void rs_done(struct cw_cqe *e)
{
    cw_bulk_op_t *op = nau_container_of(e, cw_bulk_op_t, cqe);
    cw_context_t *ctx = op->ctx;

    if (op->cb)
        op->cb(op->st, op->arg);
    cw_addr_free(op->rs_peer);
    cw_bulk_free(op->remote);
    cw_bulk_free(op->local);
    cw_lock_take(&ctx->lock);
    rs_unref(op->rsess);
    cw_lock_give(&ctx->lock);
    free(op);
}

static void rs_unsuspend(cw_bulk_op_t *op)
{
    if (!op->suspended)
        return;
    op->suspended = false;
    nau_list_del(&op->susp_link);
    op->ctx->nsuspended--;
}

/* Complete once, from the queue. */
static void rs_finish(cw_bulk_op_t *op, cw_status_t st)
{
    cw_context_t *ctx = op->ctx;

    CW_LOCK_ASSERT_HELD(&ctx->lock);
    op->finished = true;
    op->st = st;
    rs_unsuspend(op);
    nau_list_del(&op->rs_link);
    op->cqe.fn = rs_done;
    cw_cq_push(ctx, &op->cqe);
    cw_ctx_wake(ctx);
}

static void rs_win_cb(cw_handle_t *h, cw_status_t st, void *arg)
{
    struct cw_rs_win *w = arg;
    cw_bulk_op_t *op = w->op;
    cw_context_t *ctx = op->ctx;
    bool found;

    (void)h;
    cw_lock_take(&ctx->lock);
    w->busy = false;
    cw_handle_unref_locked(w->h);
    w->h = NULL;
    cw_bulk_unref(w->sub);
    w->sub = NULL;
    if (st == CW_OK) {
        w->ok = true;
        ctx->stats.bulk_bytes += w->len;
        if (op->gen > 0)
            ctx->stats.resume_bytes += w->len;
    } else if (op->st == CW_OK) {
        op->st = st; /* the first failure since the last (re)start */
        if (st != CW_CANCELED)
            CW_LOG_RL(CW_LOG_INFO, "core",
                      "delegated window of %zu bytes at "
                      "%zu failed: %s",
                      w->len, w->off, cw_status_name(st));
    }
    /* Advance the acknowledged prefix over windows answered OK. */
    do {
        found = false;
        for (unsigned i = 0; i < CW_RS_NWIN; i++) {
            struct cw_rs_win *x = &op->win[i];
            if (x->ok && x->off == op->acked) {
                op->acked += x->len;
                x->ok = false;
                found = true;
            }
        }
    } while (found);
    rs_step(op);
    cw_lock_give(&ctx->lock);
}

static cw_status_t rs_win_issue(cw_bulk_op_t *op, struct cw_rs_win *w)
{
    cw_context_t *ctx = op->ctx;
    size_t n = op->len - op->next;
    uint64_t now = cw_now_ns(), tmo_ms;
    cw_status_t st;

    CW_LOCK_ASSERT_HELD(&ctx->lock);
    if (n > CW_RS_WIN_BYTES)
        n = CW_RS_WIN_BYTES;
    if (now >= op->remote->pexpiry_ns)
        return CW_EXPIRED;
    tmo_ms = (op->remote->pexpiry_ns - now) / 1000000u + 1;
    st = cw_bproxy_sub_bulk_locked(ctx, op->local, op->loff + op->next, n,
                                   op->dir == CW_BULK_PULL ? CW_BULK_WRITE_ONLY
                                                           : CW_BULK_READ_ONLY,
                                   &w->sub);
    if (st != CW_OK)
        return st;
    st = cw_handle_create_locked(ctx, op->rs_peer, cw_rpc_id(CW_BPROXY_RPC),
                                 &w->h);
    if (st == CW_OK)
        st = cw_bproxy_req_encode(cw_handle_input(w->h), op->remote->ptoken,
                                  op->dir, op->roff + op->next, n,
                                  CW_BPROXY_IDEMPOTENT, w->sub);
    if (st == CW_OK)
        st = cw_forward_locked(w->h, tmo_ms, rs_win_cb, w);
    if (st != CW_OK) {
        if (w->h != NULL)
            cw_handle_unref_locked(w->h);
        w->h = NULL;
        cw_bulk_unref(w->sub);
        w->sub = NULL;
        return st;
    }
    w->op = op;
    w->off = op->next;
    w->len = n;
    w->busy = true;
    w->ok = false;
    op->next += n;
    return CW_OK;
}

/* Stop the windows in flight.  Only a cancel by the user is told to the
 * gateway: otherwise it is dead, or being left for another one, and a
 * CANCEL would only wait for the transport to notice. */
static void rs_cancel_windows(cw_bulk_op_t *op, bool tell)
{
    for (unsigned i = 0; i < CW_RS_NWIN; i++) {
        cw_handle_t *h = op->win[i].h;

        if (!op->win[i].busy)
            continue;
        if (tell) {
            cw_h_cancel_locked(h);
        } else if (h->use.state == CW_H_ACTIVE) {
            cw_h_fail(h, CW_CANCELED);
            cw_h_check(h);
        }
    }
}

static bool rs_busy(const cw_bulk_op_t *op)
{
    for (unsigned i = 0; i < CW_RS_NWIN; i++)
        if (op->win[i].busy)
            return true;
    return false;
}

/* Decide what the transfer does next. */
static void rs_step(cw_bulk_op_t *op)
{
    cw_context_t *ctx = op->ctx;
    struct cw_rsess *s = op->rsess;

    CW_LOCK_ASSERT_HELD(&ctx->lock);
    if (op->finished)
        return;
    if (op->st == CW_OK && !op->user_cancel) {
        if (op->acked == op->len) {
            rs_finish(op, CW_OK);
            return;
        }
        for (unsigned i = 0; i < CW_RS_NWIN && op->next < op->len; i++) {
            cw_status_t st;
            if (op->win[i].busy || op->win[i].ok)
                continue;
            st = rs_win_issue(op, &op->win[i]);
            if (st != CW_OK) {
                op->st = st;
                break;
            }
        }
        if (op->st == CW_OK)
            return;
    }
    if (rs_busy(op)) {
        /* Stop the rest; decide when all of them are back. */
        rs_cancel_windows(op, op->user_cancel);
        return;
    }
    /* Nothing in flight: what was not acknowledged is done again. */
    for (unsigned i = 0; i < CW_RS_NWIN; i++)
        op->win[i].ok = false;
    op->next = op->acked;
    if (op->user_cancel) {
        rs_finish(op, CW_CANCELED);
        return;
    }
    if (op->gen != s->gen) {
        /* A RESUME was attached meanwhile: continue on the new path. */
        op->gen = s->gen;
        op->st = CW_OK;
        rs_step(op);
        return;
    }
    if (cw_status_peer_gone(op->st) && s->h != NULL && !ctx->destroying &&
        cw_now_ns() < s->h->use.deadline_ns &&
        ctx->nsuspended < CW_RS_MAX_SUSPENDED) {
        CW_LOG_RL(CW_LOG_INFO, "core",
                  "delegated transfer suspended at "
                  "%zu of %zu bytes (%s): waiting for a resume",
                  op->acked, op->len, cw_status_name(op->st));
        op->suspended = true;
        op->susp_deadline = s->h->use.deadline_ns;
        nau_list_add_tail(&ctx->rs_suspended, &op->susp_link);
        ctx->nsuspended++;
        ctx->stats.suspended++;
        cw_ctx_timer_at(ctx, op->susp_deadline);
        return;
    }
    rs_finish(op, op->st);
}

cw_status_t cw_rs_transfer(cw_context_t *ctx, enum cw_bulk_dir dir,
                           cw_addr_t *peer, cw_bulk_t *remote,
                           size_t remote_off, cw_bulk_t *local,
                           size_t local_off, size_t len, cw_bulk_cb_t cb,
                           void *arg, cw_bulk_op_t **op_p)
{
    cw_bulk_op_t *op;
    cw_status_t st;

    CW_LOCK_ASSERT_FREE(&ctx->lock);
    st = cw_addr_dup(peer, &peer);
    if (st != CW_OK)
        return st;
    op = cw_bulk_op_new(ctx, dir, remote, remote_off, local, local_off, len, cb,
                        arg);
    if (op == NULL) {
        cw_addr_free(peer);
        return CW_NOMEM;
    }
    op->rs_peer = peer;
    nau_list_node_init(&op->susp_link);
    cw_lock_take(&ctx->lock);
    op->rsess = remote->rsess;
    op->rsess->refs++;
    op->gen = op->rsess->gen;
    nau_list_add_tail(&op->rsess->ops, &op->rs_link);
    if (op_p)
        *op_p = op;
    rs_step(op); /* a failure to start completes it through the queue */
    cw_lock_give(&ctx->lock);
    cw_ctx_wake(ctx);
    return CW_OK;
}

cw_status_t cw_rs_cancel(cw_bulk_op_t *op)
{
    cw_context_t *ctx = op->ctx;

    CW_LOCK_ASSERT_FREE(&ctx->lock);
    cw_lock_take(&ctx->lock);
    if (!op->finished) {
        op->user_cancel = true;
        if (op->suspended)
            rs_finish(op, CW_CANCELED);
        else
            rs_cancel_windows(op, true);
    }
    cw_lock_give(&ctx->lock);
    return CW_OK;
}

/* ---- attach a RESUME request -------------------------------------------- */

static cw_handle_t *rs_find(cw_context_t *ctx, const struct cw_wire_msg *m)
{
    for (struct nau_list *e = ctx->incoming.next; e != &ctx->incoming;
         e = e->next) {
        cw_handle_t *h = nau_container_of(e, cw_handle_t, link);
        if (h->use.srv.rsess != NULL &&
            h->use.srv.rsess->id == m->hdr.resume_id &&
            h->use.id == m->hdr.rpc_id && h->use.state == CW_H_IDLE &&
            h->use.srv.hfn != NULL)
            return h;
    }
    return NULL;
}

/* Every proxy handle of the session has a matching descriptor in @p m. */
static cw_status_t rs_retarget_all(struct cw_rsess *s, cw_network_t *net,
                                   const struct cw_wire_msg *m, bool apply)
{
    for (struct nau_list *e = s->bulks.next; e != &s->bulks; e = e->next) {
        cw_bulk_t *b = nau_container_of(e, cw_bulk_t, rs_link);
        struct cw_wire_desc d;
        cw_status_t st;

        st = cw_wire_desc_get(m->desc, m->hdr.desc_len, m->hdr.ndesc, b->rs_idx,
                              &d, NULL, NULL);
        if (st == CW_OK)
            st = cw_bproxy_retarget(b, net, &d, apply);
        if (st != CW_OK)
            return st;
    }
    return CW_OK;
}

bool cw_rs_attach(cw_network_t *net, const struct cw_wire_msg *m,
                  cw_na_addr_t *source, uint64_t deadline_ns)
{
    cw_context_t *ctx = net->ctx;
    cw_handle_t *h = rs_find(ctx, m);
    struct cw_rsess *s;
    cw_status_t st;
    uint8_t *desc = NULL;

    CW_LOCK_ASSERT_HELD(&ctx->lock);
    if (h == NULL)
        return false; /* unknown or answered: run it as a new request */
    s = h->use.srv.rsess;
    st = m->hdr.ndesc == h->in.ndesc ? rs_retarget_all(s, net, m, false)
                                     : CW_RANGE;
    if (st == CW_OK && m->hdr.desc_len > 0) {
        /* Handles decoded from now on take the new tokens too. */
        desc = malloc(m->hdr.desc_len);
        if (desc == NULL)
            st = CW_NOMEM;
        else
            memcpy(desc, m->desc, m->hdr.desc_len);
    }
    if (st != CW_OK) {
        CW_LOG_RL(CW_LOG_WARN, "core",
                  "resume of request %016llx does not "
                  "match its descriptors (%s): handled as a new request",
                  (unsigned long long)m->hdr.resume_id, cw_status_name(st));
        return false;
    }
    rs_retarget_all(s, net, m, true);
    free(s->desc);
    s->desc = desc;
    s->desc_len = m->hdr.desc_len;
    /* The answer goes back the way the resume came. */
    cw_net_ref(net);
    cw_na_addr_free(h->use.srv.src.net->na, h->use.srv.src.na);
    cw_net_unref_locked(h->use.srv.src.net);
    h->use.srv.src.na = source;
    h->use.srv.src.net = net;
    h->use.net = net;
    h->use.req_id = m->hdr.req_id;
    h->use.tag = m->hdr.resp_tag;
    h->use.srv.resp_limit = m->hdr.resp_limit;
    h->use.hops = m->hdr.hops;
    h->use.rflags = (uint16_t)((h->use.rflags & ~CW_HF_OVERFLOW) |
                               (m->hdr.flags & CW_HF_OVERFLOW));
    h->use.deadline_ns = deadline_ns;
    /* The old path may have cancelled it on its way down; the caller has
     * not (it resumed). */
    cw_h_set_canceled(h, false);
    s->gen++;
    ctx->stats.resumed++;
    CW_LOG_RL(CW_LOG_INFO, "core", "request %016llx resumed (%u)",
              (unsigned long long)s->id, s->gen);
    for (struct nau_list *e = s->ops.next, *next; e != &s->ops; e = next) {
        cw_bulk_op_t *op = nau_container_of(e, cw_bulk_op_t, rs_link);
        cw_addr_t *peer;

        next = e->next;
        if (cw_addr_dup_locked(&h->use.srv.src, &peer) == CW_OK) {
            cw_addr_unref_locked(op->rs_peer);
            op->rs_peer = peer;
        }
        if (op->suspended) {
            rs_unsuspend(op);
            op->gen = s->gen;
            op->st = CW_OK;
            rs_step(op);
        } else {
            /* Still waiting on the old path: stop it, then continue. */
            rs_cancel_windows(op, false);
        }
    }
    return true;
}

/* ---- deadlines and shutdown --------------------------------------------- */

void cw_rs_timers(cw_context_t *ctx, uint64_t now, uint64_t *soonest_p)
{
    struct nau_list *e, *next;

    CW_LOCK_ASSERT_HELD(&ctx->lock);
    for (e = ctx->rs_suspended.next; e != &ctx->rs_suspended; e = next) {
        cw_bulk_op_t *op = nau_container_of(e, cw_bulk_op_t, susp_link);
        next = e->next;
        if (now >= op->susp_deadline)
            rs_finish(op, op->st); /* no resume came */
        else if (op->susp_deadline < *soonest_p)
            *soonest_p = op->susp_deadline;
    }
}

void cw_rs_cancel_net(cw_context_t *ctx, cw_network_t *net)
{
    struct nau_list *e, *next;

    CW_LOCK_ASSERT_HELD(&ctx->lock);
    for (e = ctx->rs_suspended.next; e != &ctx->rs_suspended; e = next) {
        cw_bulk_op_t *op = nau_container_of(e, cw_bulk_op_t, susp_link);
        next = e->next;
        if (net == NULL || op->remote->net == net)
            rs_finish(op, CW_CANCELED);
    }
}
