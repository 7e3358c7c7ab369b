/*
 * The handle's life: the pool it comes from and returns to, its
 * references, its accessors, and the completion state machine shared by
 * forwards and responds: a handle completes when its final status is
 * decided and no network or bulk operation of it is outstanding, exactly
 * once.
 */
#include "rpc_priv.h"

#include <stdlib.h>
#include <string.h>

#define CW_POOL_MAX 256
/* A pooled handle keeps buffers up to this size for its next use, not
 * what one large RPC grew them to (up to max_payload_size each). */
#define CW_POOL_KEEP_BYTES (1u << 20)

/* ---- handle pool ----------------------------------------------------------*/

struct cw_handle *cw_handle_alloc(cw_context_t *ctx, enum cw_hrole role)
{
    unsigned shape = role == CW_H_SERVER;
    cw_handle_t *h = ctx->free_handles[shape];

    CW_LOCK_ASSERT_HELD(&ctx->lock);
    if (h == NULL)
        h = ctx->free_handles[shape ^= 1u];
    if (h != NULL) {
        ctx->free_handles[shape] = h->next_free;
        ctx->nfree_handles--;
    } else {
        h = calloc(1, sizeof(*h));
        if (h == NULL)
            return NULL;
        h->ctx = ctx;
        cw_buf_init_writer(&h->out, CW_HDR_SIZE);
        nau_list_node_init(&h->link);
        nau_list_node_init(&h->resp_link);
        nau_list_node_init(&h->sq_link);
    }
    atomic_init(&h->refs, 1);
    h->use.role = role;
    /* The writer is "in" for a client and "out" for a server: swap the
     * embedded buffers so the allocation is kept across reuse. */
    if ((role == CW_H_SERVER) != h->out.writer) {
        cw_buf_t tmp = h->in;
        h->in = h->out;
        h->out = tmp;
    }
    cw_buf_t *r = role == CW_H_SERVER ? &h->in : &h->out;
    r->h = h;
    return h;
}

static void handle_free(cw_handle_t *h)
{
    cw_buf_fini(&h->in);
    cw_buf_fini(&h->out);
    free(h->msg);
    free(h->sbuf);
    free(h->ovf_buf);
    free(h->route_buf);
    free(h->desc_copy);
    free(h->relay_route_buf);
    free(h);
}

#if CW_ASSERTS
static bool all_zero(const void *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (((const unsigned char *)p)[i] != 0)
            return false;
    return true;
}
#endif

/* Release what this use holds, then clear it in one step: the next use
 * starts from a fresh handle but for the kept buffers (the role too is
 * cleared: the caller sets it). */
void cw_h_clear_locked(cw_handle_t *h)
{
    struct cw_h_use *u = &h->use;
    cw_buf_t *w = u->role == CW_H_SERVER ? &h->out : &h->in;
    cw_buf_t *r = u->role == CW_H_SERVER ? &h->in : &h->out;

    if (u->role == CW_H_SERVER) {
        if (u->srv.src.na) {
            cw_na_addr_free(u->srv.src.net->na, u->srv.src.na);
            cw_net_unref_locked(u->srv.src.net);
        }
        cw_rs_handle_leave(h);
    } else {
        if (u->cli.addr)
            cw_addr_unref_locked(u->cli.addr);
        cw_rwait_del(h);
        if (u->cli.bresp) /* a batch answered a handle already failed */
            free(u->cli.bresp);
    }
    cw_buf_reset(w);
    w->writer = true;
    cw_buf_init_reader(r, NULL, 0);
    r->h = h;
    if (u->ovf_local)
        cw_bulk_unref(u->ovf_local);
    /* After the registrations of these buffers are gone. */
    cw_buf_trim(w, CW_POOL_KEEP_BYTES);
    if (h->ovf_cap > CW_POOL_KEEP_BYTES) {
        free(h->ovf_buf);
        h->ovf_buf = NULL;
        h->ovf_cap = 0;
    }
    if (h->desc_copy_cap > CW_POOL_KEEP_BYTES) {
        free(h->desc_copy);
        h->desc_copy = NULL;
        h->desc_copy_cap = 0;
    }
    if (h->relay_route_cap > CW_POOL_KEEP_BYTES) {
        free(h->relay_route_buf);
        h->relay_route_buf = NULL;
        h->relay_route_cap = 0;
    }
    nau_list_del(&h->link);
    if (cw_h_flag(h, CW_HFL_XCTX)) {
        cw_relay_unlink_xctx(h);
    } else if (u->relay.in) {
        if (u->relay.in->use.relay.out == h)
            u->relay.in->use.relay.out = NULL;
        cw_handle_unref_locked(u->relay.in);
    }
    /* A self request dropped unanswered: its caller must not reach this
     * handle once it serves another request. */
    if (u->self_peer)
        u->self_peer->use.self_peer = NULL;
        /* Nothing of this use is carried into the next: not a pin of another
         * network (freed with it, core/spread.c), not a flag.  The other role's
         * part of the union was left alone, and is zero still. */
#if CW_ASSERTS
    {
        size_t used = cw_h_use_size(u->role);

        CW_ASSERT(all_zero((const char *)u + used, sizeof(*u) - used));
    }
#endif
    /* Each role's size a constant: the compiler clears it with wide
     * stores inline instead of calling memset() for a run-time length. */
    if (u->role == CW_H_SERVER)
        memset(u, 0, cw_h_use_size(CW_H_SERVER));
    else
        memset(u, 0, cw_h_use_size(CW_H_CLIENT));
}

static void handle_recycle_locked(cw_handle_t *h)
{
    cw_context_t *ctx = h->ctx;

    cw_h_clear_locked(h);
    if (ctx->nfree_handles < CW_POOL_MAX && !ctx->destroying) {
        h->next_free = ctx->free_handles[h->out.writer];
        ctx->free_handles[h->out.writer] = h;
        ctx->nfree_handles++;
        return;
    }
    handle_free(h);
}

void cw_rpc_pool_fini(cw_context_t *ctx)
{
    cw_lock_take(&ctx->lock);
    for (unsigned k = 0; k < 2; k++) {
        while (ctx->free_handles[k]) {
            cw_handle_t *h = ctx->free_handles[k];
            ctx->free_handles[k] = h->next_free;
            handle_free(h);
        }
    }
    ctx->nfree_handles = 0;
    cw_lock_give(&ctx->lock);
}

void cw_handle_unref_locked(cw_handle_t *h)
{
    CW_LOCK_ASSERT_HELD(&h->ctx->lock);
    if (atomic_fetch_sub(&h->refs, 1) == 1)
        handle_recycle_locked(h);
}

void cw_handle_release(cw_handle_t *h)
{
    cw_context_t *ctx;

    if (h == NULL)
        return;
    if (atomic_fetch_sub(&h->refs, 1) != 1)
        return;
    ctx = h->ctx;
    cw_lock_take(&ctx->lock);
    handle_recycle_locked(h);
    cw_lock_give(&ctx->lock);
}

void cw_handle_ref(cw_handle_t *h)
{
    if (h)
        atomic_fetch_add(&h->refs, 1);
}

cw_buf_t *cw_handle_input(cw_handle_t *h)
{
    return h ? &h->in : NULL;
}

cw_buf_t *cw_handle_output(cw_handle_t *h)
{
    return h ? &h->out : NULL;
}

cw_addr_t *cw_handle_source(cw_handle_t *h)
{
    if (h == NULL)
        return NULL;
    return h->use.role == CW_H_SERVER ? &h->use.srv.src : h->use.cli.addr;
}

cw_context_t *cw_handle_context(cw_handle_t *h)
{
    return h ? h->ctx : NULL;
}

cw_rpc_id_t cw_handle_rpc_id(cw_handle_t *h)
{
    return h ? h->use.id : 0;
}

bool cw_handle_canceled(cw_handle_t *h)
{
    bool c;

    if (h == NULL || h->use.role == CW_H_CLIENT)
        return false;
    cw_lock_take(&h->ctx->lock);
    c = h->use.srv.canceled || cw_now_ns() > h->use.deadline_ns;
    cw_lock_give(&h->ctx->lock);
    return c;
}

bool cw_handle_idempotent(cw_handle_t *h)
{
    return h != NULL && (h->use.rflags & CW_HF_IDEMPOTENT);
}

uint64_t cw_handle_remaining_ms(cw_handle_t *h)
{
    uint64_t now = cw_now_ns();

    if (h == NULL || now >= h->use.deadline_ns)
        return 0;
    return (h->use.deadline_ns - now) / 1000000ull;
}

/* ---- completion state machine (lock held) --------------------------------*/

/* Moves a decided handle on: to QUEUED once nothing of it is outstanding,
 * or at once when it lingers (the caller hears while the server may still
 * pull its payload); a lingering one lets its payload go when the last of
 * its operations ends. */
void cw_h_settle(cw_handle_t *h)
{
    struct cw_h_use *u = &h->use;
    bool linger = cw_h_flag(h, CW_HFL_LINGER);

    if (u->state == CW_H_DONE && !linger)
        return;
    if (u->role == CW_H_CLIENT && u->cli.pin != NULL && u->pending == 0) {
        cw_pin_check_member(h);
        if (cw_h_flag(h, CW_HFL_PIN_HOME) || cw_h_flag(h, CW_HFL_PIN_WARM))
            cw_pin_gate_done(h); /* may send forwards that waited on it */
    }
    if (u->pending > 0) {
        if (linger && u->state == CW_H_DECIDED) {
            cw_h_state_set(h, CW_H_QUEUED); /* the caller hears now */
            cw_cq_push(h->ctx, &h->cqe);
        }
        return;
    }
    if (linger) {
        /* Nothing outstanding any more: the payload may go. */
        cw_h_flag_clear(h, CW_HFL_LINGER);
        nau_list_del(&h->link);
        if (u->ovf_local) {
            cw_bulk_unref(u->ovf_local);
            u->ovf_local = NULL;
        }
        if (u->state == CW_H_DONE) {
            /* The callback ran (cw_h_complete holds its own reference
             * while it runs): the forward's reference goes. */
            cw_handle_unref_locked(h);
            return;
        }
        if (u->state == CW_H_QUEUED)
            return; /* cw_h_complete finishes */
    }
    if (u->state != CW_H_DECIDED)
        return;
    nau_list_del(&h->link);
    if (u->ovf_local) {
        cw_bulk_unref(u->ovf_local);
        u->ovf_local = NULL;
    }
    if (u->role == CW_H_SERVER && u->srv.cb == NULL) {
        /* Nobody to tell: finish here instead of a trip through the queue. */
        cw_h_state_set(h, CW_H_DONE);
        cw_handle_unref_locked(h);
        return;
    }
    cw_h_state_set(h, CW_H_QUEUED);
    cw_cq_push(h->ctx, &h->cqe);
}

/* Queued completion of a forward (client) or a respond (server). */
void cw_h_complete(struct cw_cqe *e)
{
    cw_handle_t *h = nau_container_of(e, cw_handle_t, cqe);
    cw_context_t *ctx = h->ctx;
    cw_forward_cb_t cb;
    void *arg;
    cw_status_t st;
    bool keep;

    cw_lock_take(&ctx->lock);
    /* Still exposed to the peer (see cw_h_fail): the linger may end (and
     * cw_h_check drop the forward's reference) on another thread, or in a
     * progress call the callback makes, while the callback still uses the
     * handle: hold it until then. */
    keep = cw_h_flag(h, CW_HFL_LINGER);
    if (keep)
        cw_handle_ref(h);
    cw_h_state_set(h, CW_H_DONE);
    cb = h->use.role == CW_H_SERVER ? h->use.srv.cb : h->use.cli.cb;
    arg = h->use.role == CW_H_SERVER ? h->use.srv.arg : h->use.cli.arg;
    st = h->use.final;
    cw_lock_give(&ctx->lock);
    if (!keep && cw_h_may_reforward(h, st) && cw_h_reforward(h, st)) {
        cw_handle_release(h); /* the new forward holds its own */
        return;
    }
    if (cb)
        cb(h, st, arg);
    cw_handle_release(h); /* the forward's, or the one held above */
}
