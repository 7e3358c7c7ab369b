/*
 * RPC registration, handle pool and the completion state machine shared by
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

/* FNV-1a, 64 bit: stable across builds, hosts and endianness. */
cw_rpc_id_t cw_rpc_id(const char *name)
{
    uint64_t h = 0xcbf29ce484222325ull;

    if (name == NULL)
        return 0;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        h ^= *p;
        h *= 0x100000001b3ull;
    }
    return h;
}

struct cw_rpc_class *cw_rpc_class_find(cw_context_t *ctx, cw_rpc_id_t id)
{
    struct cw_rpc_class *c = ctx->rpcs[id % CW_RPC_BUCKETS];

    while (c && c->id != id)
        c = c->next;
    return c;
}

cw_status_t cw_rpc_register(cw_context_t *ctx, const char *name,
                            cw_rpc_handler_t handler, void *arg,
                            const struct cw_rpc_opts *opts, cw_rpc_id_t *id_p)
{
    struct cw_rpc_class *c;
    cw_rpc_id_t id;
    size_t n;

    if (ctx == NULL || name == NULL || name[0] == '\0')
        return CW_INVALID_ARG;
    id = cw_rpc_id(name);
    n = strlen(name);
    pthread_mutex_lock(&ctx->lock);
    c = cw_rpc_class_find(ctx, id);
    if (c != NULL) {
        if (strcmp(c->name, name) == 0)
            CW_ERROR("core", "RPC \"%s\" is already registered", name);
        else
            CW_ERROR("core",
                     "RPC \"%s\" hashes to the id of \"%s\" (%016llx); "
                     "rename one of them",
                     name, c->name, (unsigned long long)id);
        pthread_mutex_unlock(&ctx->lock);
        return CW_EXIST;
    }
    c = calloc(1, sizeof(*c) + n + 1);
    if (c == NULL) {
        pthread_mutex_unlock(&ctx->lock);
        return CW_NOMEM;
    }
    c->id = id;
    c->handler = handler;
    c->arg = arg;
    if (opts)
        c->opts = *opts;
    memcpy(c->name, name, n + 1);
    c->next = ctx->rpcs[id % CW_RPC_BUCKETS];
    ctx->rpcs[id % CW_RPC_BUCKETS] = c;
    pthread_mutex_unlock(&ctx->lock);
    if (id_p)
        *id_p = id;
    return CW_OK;
}

cw_status_t cw_rpc_deregister(cw_context_t *ctx, cw_rpc_id_t id)
{
    struct cw_rpc_class **pp;

    if (ctx == NULL)
        return CW_INVALID_ARG;
    pthread_mutex_lock(&ctx->lock);
    for (pp = &ctx->rpcs[id % CW_RPC_BUCKETS]; *pp; pp = &(*pp)->next) {
        if ((*pp)->id == id) {
            struct cw_rpc_class *c = *pp;
            *pp = c->next;
            free(c);
            pthread_mutex_unlock(&ctx->lock);
            return CW_OK;
        }
    }
    pthread_mutex_unlock(&ctx->lock);
    return CW_NOENT;
}

void cw_rpc_classes_fini(cw_context_t *ctx)
{
    for (unsigned i = 0; i < CW_RPC_BUCKETS; i++) {
        while (ctx->rpcs[i]) {
            struct cw_rpc_class *c = ctx->rpcs[i];
            ctx->rpcs[i] = c->next;
            free(c);
        }
    }
}

cw_status_t cw_grow(uint8_t **p, size_t *cap, size_t need)
{
    uint8_t *n;
    size_t ncap;

    if (need <= *cap)
        return CW_OK;
    ncap = *cap ? *cap : 256;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2)
            return CW_NOMEM;
        ncap *= 2;
    }
    n = realloc(*p, ncap);
    if (n == NULL)
        return CW_NOMEM;
    *p = n;
    *cap = ncap;
    return CW_OK;
}

/* ---- handle pool ----------------------------------------------------------*/

struct cw_handle *cw_handle_alloc(cw_context_t *ctx, bool server)
{
    cw_handle_t *h = ctx->free_handles;

    if (h != NULL) {
        ctx->free_handles = h->next_free;
        ctx->nfree_handles--;
    } else {
        h = calloc(1, sizeof(*h));
        if (h == NULL)
            return NULL;
        h->ctx = ctx;
        cw_buf_init_writer(&h->out, CW_HDR_SIZE);
        cw_list_init(&h->link);
        cw_list_init(&h->resp_link);
        cw_list_init(&h->sq_link);
    }
    atomic_init(&h->refs, 1);
    h->server = server;
    h->state = CW_H_IDLE;
    /* The writer is "in" for a client and "out" for a server: swap the
     * embedded buffers so the allocation is kept across reuse. */
    if (server != h->out.writer) {
        cw_buf_t tmp = h->in;
        h->in = h->out;
        h->out = tmp;
    }
    cw_buf_t *r = server ? &h->in : &h->out;
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
    free(h->route);
    free(h->desc_copy);
    free(h->fwd_route_buf);
    free(h);
}

static void handle_recycle_locked(cw_handle_t *h)
{
    cw_context_t *ctx = h->ctx;
    cw_buf_t *w = h->server ? &h->out : &h->in;
    cw_buf_t *r = h->server ? &h->in : &h->out;

    if (h->addr) {
        cw_addr_unref_locked(h->addr);
        h->addr = NULL;
    }
    if (h->src.na) {
        cw_na_addr_free(h->src.net->na, h->src.na);
        h->src.na = NULL;
        cw_net_unref_locked(h->src.net);
    }
    cw_buf_reset(w);
    w->writer = true;
    cw_buf_init_reader(r, NULL, 0);
    r->h = h;
    if (h->ovf_local) {
        cw_bulk_unref(h->ovf_local);
        h->ovf_local = NULL;
    }
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
    cw_list_del(&h->link);
    if (h->fwd_xctx) {
        cw_fwd_unlink_xctx(h);
    } else if (h->fwd_in) {
        if (h->fwd_in->fwd_out == h)
            h->fwd_in->fwd_out = NULL;
        cw_handle_unref_locked(h->fwd_in);
        h->fwd_in = NULL;
    }
    h->fwd_out = NULL;
    h->canceled = false;
    h->sent = false;
    h->linger = false;
    h->user_done = false;
    h->fwd_route = NULL;
    if (h->fwd_route_cap > CW_POOL_KEEP_BYTES) {
        free(h->fwd_route_buf);
        h->fwd_route_buf = NULL;
        h->fwd_route_cap = 0;
    }
    h->desc_copy_len = 0;
    h->raw_desc = NULL;
    h->raw_desc_len = 0;
    h->raw_ndesc = 0;
    h->resp_desc = NULL;
    h->resp_desc_len = 0;
    h->resp_ndesc = 0;
    h->cls = NULL;
    h->hfn = NULL;
    h->hook = NULL;
    h->self_call = false;
    h->auto_release = false;
    h->overflowed = false;
    if (h->self_peer) {
        /* A self request dropped unanswered: its caller must not reach
         * this handle once it serves another request. */
        h->self_peer->self_peer = NULL;
        h->self_peer = NULL;
    }
    h->one_way = false;
    cw_rs_handle_leave(h);
    h->idempotent = false;
    h->resume = false;
    h->resume_id = 0;
    h->reforwards = 0;
    h->hops = 0;
    h->pending = 0;
    h->final_set = false;
    h->queued = false;
    h->send_op = h->recv_op = NULL;
    h->recv_canceled = false;
    h->batches = false;
    h->from_batch = false;
    /* A pooled handle must not carry a pin of another network (freed with
     * it) into its next use (core/spread.c). */
    h->pin = NULL;
    h->peer = NULL;
    h->pin_home = h->pin_asker = h->pin_warm = h->pin_held = false;
    h->pin_ask = false;
    cw_rwait_del(h);
    free(h->bresp); /* only if a batch answered a handle already failed */
    h->bresp = NULL;
    h->bulk_op = NULL;
    h->net = NULL;
    if (h->route)
        h->route[0] = '\0';
    if (ctx->nfree_handles < CW_POOL_MAX && !ctx->destroying) {
        h->next_free = ctx->free_handles;
        ctx->free_handles = h;
        ctx->nfree_handles++;
        return;
    }
    handle_free(h);
}

void cw_rpc_pool_fini(cw_context_t *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    while (ctx->free_handles) {
        cw_handle_t *h = ctx->free_handles;
        ctx->free_handles = h->next_free;
        handle_free(h);
    }
    ctx->nfree_handles = 0;
    pthread_mutex_unlock(&ctx->lock);
}

void cw_handle_unref_locked(cw_handle_t *h)
{
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
    pthread_mutex_lock(&ctx->lock);
    handle_recycle_locked(h);
    pthread_mutex_unlock(&ctx->lock);
}

void cw_handle_ref(cw_handle_t *h)
{
    if (h)
        atomic_fetch_add(&h->refs, 1);
}

cw_status_t cw_handle_create_locked(cw_context_t *ctx, cw_addr_t *dest,
                                    cw_rpc_id_t id, cw_handle_t **h_p)
{
    cw_handle_t *h;
    cw_addr_t *ref;
    struct cw_rpc_class *c;
    cw_status_t st;

    CW_ASSERT_LOCKED(&ctx->lock);
    st = cw_addr_dup_locked(dest, &ref);
    if (st != CW_OK)
        return st;
    if (ref->net->closed) {
        cw_addr_unref_locked(ref);
        return CW_DISCONNECTED; /* cw_network_close */
    }
    h = cw_handle_alloc(ctx, false);
    if (h == NULL) {
        cw_addr_unref_locked(ref);
        return CW_NOMEM;
    }
    h->addr = ref;
    h->net = ref->net;
    h->id = id;
    c = cw_rpc_class_find(ctx, id);
    h->one_way = c ? c->opts.one_way : false;
    h->cls_timeout_ms = c ? c->opts.timeout_ms : 0;
    *h_p = h;
    return CW_OK;
}

cw_status_t cw_handle_create(cw_context_t *ctx, cw_addr_t *dest, cw_rpc_id_t id,
                             cw_handle_t **h_p)
{
    cw_status_t st;

    if (ctx == NULL || dest == NULL || h_p == NULL || dest->ctx != ctx)
        return CW_INVALID_ARG;
    pthread_mutex_lock(&ctx->lock);
    st = cw_handle_create_locked(ctx, dest, id, h_p);
    pthread_mutex_unlock(&ctx->lock);
    return st;
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
    return h->server ? &h->src : h->addr;
}

cw_context_t *cw_handle_context(cw_handle_t *h)
{
    return h ? h->ctx : NULL;
}

cw_rpc_id_t cw_handle_rpc_id(cw_handle_t *h)
{
    return h ? h->id : 0;
}

bool cw_handle_canceled(cw_handle_t *h)
{
    bool c;

    if (h == NULL || !h->server)
        return false;
    pthread_mutex_lock(&h->ctx->lock);
    c = h->canceled || cw_now_ns() > h->deadline_ns;
    pthread_mutex_unlock(&h->ctx->lock);
    return c;
}

cw_status_t cw_handle_set_idempotent(cw_handle_t *h, bool on)
{
    uint64_t id = 0;
    cw_status_t st = CW_OK;

    if (h == NULL || h->server)
        return CW_INVALID_ARG;
    if (on && cw_random_fill(&id, sizeof(id)) != CW_OK)
        return CW_IO;
    pthread_mutex_lock(&h->ctx->lock);
    if (h->one_way || h->state == CW_H_ACTIVE || h->fwd_in != NULL) {
        st = CW_INVALID_ARG;
    } else {
        h->idempotent = on;
        h->resume = false;
        h->resume_id = id;
    }
    pthread_mutex_unlock(&h->ctx->lock);
    return st;
}

bool cw_handle_idempotent(cw_handle_t *h)
{
    return h != NULL && h->idempotent;
}

uint64_t cw_handle_remaining_ms(cw_handle_t *h)
{
    uint64_t now = cw_now_ns();

    if (h == NULL || now >= h->deadline_ns)
        return 0;
    return (h->deadline_ns - now) / 1000000ull;
}

/* ---- completion state machine (lock held) --------------------------------*/

void cw_h_set_final(cw_handle_t *h, cw_status_t st)
{
    if (!h->final_set) {
        h->final_set = true;
        h->final = st;
    }
}

void cw_h_cancel_send(cw_handle_t *h)
{
    /* A queued message is dropped at the flush; one inside a batch in
     * flight completes with its batch (coalesce.c). */
    if (h->send_op == CW_SQ_QUEUED)
        h->sq_cancel = true;
    else if (h->send_op && h->send_op != CW_SQ_BATCHED)
        cw_na_cancel(h->net->na, h->send_op);
}

/* The request is on a network, or was: a message still queued for the
 * end of the pass (coalesce.c) has not left, and never will once
 * cancelled. */
static bool h_left(const cw_handle_t *h)
{
    return h->sent && h->send_op != CW_SQ_QUEUED;
}

static void h_cancel_ops(cw_handle_t *h)
{
    cw_h_cancel_send(h);
    if (h->recv_op && !h->recv_canceled) {
        h->recv_canceled = true;
        cw_na_cancel(h->net->na, h->recv_op);
    }
}

void cw_h_fail(cw_handle_t *h, cw_status_t st)
{
    if (h->final_set)
        return;
    cw_h_set_final(h, st);
    if (h->pin_held)
        cw_pin_unhold(h);
    if (!h->server && h->overflowed && h_left(h) && h->recv_op) {
        /* The server may be pulling our payload right now: keep it exposed
         * until its answer (it answers even a cancelled or expired request
         * that overflowed), so that it never reads released memory.  The
         * caller hears now; the handle lingers. */
        uint64_t now = cw_now_ns();
        h->linger = true;
        h->linger_until =
            (h->deadline_ns > now ? h->deadline_ns : now) + CW_DONE_GRACE_NS;
        cw_ctx_timer_at(h->ctx, h->linger_until);
    } else {
        h_cancel_ops(h);
    }
    if (h->bulk_op)
        cw_bulk_op_cancel_locked(h->bulk_op);
    if (h->self_peer) {
        /* The server side of a self call hears of a cancel as a remote
         * one would (cw_handle_canceled). */
        if (!h->server && st == CW_CANCELED)
            cw_fwd_set_canceled(h->self_peer, true);
        h->self_peer->self_peer = NULL;
        h->self_peer = NULL;
    }
}

void cw_h_check(cw_handle_t *h)
{
    if (!h->final_set || h->state != CW_H_ACTIVE)
        return;
    if (h->pin != NULL && h->pending == 0) {
        cw_pin_check_member(h);
        if (h->pin_home || h->pin_warm)
            cw_pin_gate_done(h); /* may send forwards that waited on it */
    }
    if (h->pending > 0) {
        if (h->linger && !h->queued) {
            h->queued = true; /* the caller hears now */
            cw_cq_push(h->ctx, &h->cqe);
        }
        return;
    }
    if (h->linger) {
        /* Nothing outstanding any more: the payload may go. */
        h->linger = false;
        cw_list_del(&h->link);
        if (h->ovf_local) {
            cw_bulk_unref(h->ovf_local);
            h->ovf_local = NULL;
        }
        if (h->queued) {
            if (h->user_done) {
                h->state = CW_H_DONE;
                cw_handle_unref_locked(h);
            }
            return; /* else cw_h_complete finishes */
        }
    }
    if (h->queued)
        return;
    h->queued = true;
    cw_list_del(&h->link);
    if (h->ovf_local) {
        cw_bulk_unref(h->ovf_local);
        h->ovf_local = NULL;
    }
    if (h->server && h->rcb == NULL) {
        /* Nobody to tell: finish here instead of a trip through the queue. */
        h->state = CW_H_DONE;
        cw_handle_unref_locked(h);
        return;
    }
    cw_cq_push(h->ctx, &h->cqe);
}

static void cancel_sent_cb(const struct cw_na_cb_info *info)
{
    cw_handle_t *h = info->arg;

    h->pending--;
    cw_h_check(h);
}

void cw_h_cancel_locked(cw_handle_t *h)
{
    struct cw_wire_hdr hdr = {.type = CW_MSG_CANCEL};
    cw_na_op_t *op;

    if (h->state != CW_H_ACTIVE || h->final_set)
        return;
    /* Tell the next hop, so that cancel propagates downstream (best
     * effort: the local completion does not wait for an answer). */
    if (h_left(h) && !h->one_way && h->recv_op != NULL) {
        hdr.rpc_id = h->id;
        hdr.req_id = h->req_id;
        cw_wire_hdr_encode(h->cancel_msg, &hdr);
        if (cw_na_msg_send_unexpected(h->net->na, h->cancel_msg, CW_HDR_SIZE,
                                      h->peer, 0, cancel_sent_cb, h,
                                      &op) == CW_OK) {
            h->pending++;
            h->ctx->stats.na_ops++;
        }
    }
    cw_h_fail(h, CW_CANCELED);
    cw_h_check(h);
}

cw_status_t cw_cancel(cw_handle_t *h)
{
    cw_context_t *ctx;

    if (h == NULL)
        return CW_INVALID_ARG;
    if (h->server)
        return CW_UNSUPPORTED;
    ctx = h->ctx;
    pthread_mutex_lock(&ctx->lock);
    cw_h_cancel_locked(h);
    pthread_mutex_unlock(&ctx->lock);
    return CW_OK;
}

/* Scans only when something may have expired, and remembers the soonest
 * deadline left, so thousands of RPCs in flight cost nothing per poll. */
void cw_rpc_timers(cw_context_t *ctx, uint64_t now)
{
    struct cw_list *e, *next;
    uint64_t soonest = UINT64_MAX;

    if (now < ctx->next_deadline)
        return;
    for (e = ctx->inflight.next; e != &ctx->inflight; e = next) {
        cw_handle_t *h = cw_container_of(e, cw_handle_t, link);
        next = e->next;
        if (!h->final_set) {
            if (now >= h->deadline_ns) {
                ctx->stats.timeouts++;
                cw_h_fail(h, CW_TIMEOUT);
                if (h->linger && h->linger_until < soonest)
                    soonest = h->linger_until;
                cw_h_check(h);
            } else if (h->deadline_ns < soonest) {
                soonest = h->deadline_ns;
            }
        } else if (h->linger) {
            if (now >= h->linger_until)
                h_cancel_ops(h); /* the server never answered: give up */
            else if (h->linger_until < soonest)
                soonest = h->linger_until;
        }
    }
    for (e = ctx->wait_done.next; e != &ctx->wait_done; e = next) {
        cw_handle_t *h = cw_container_of(e, cw_handle_t, link);
        next = e->next;
        if (now >= h->deadline_ns) {
            /* The client never acknowledged an overflowed response. */
            cw_list_del(&h->link);
            h->pending--;
            cw_h_set_final(h, CW_TIMEOUT);
            cw_h_check(h);
        } else if (h->deadline_ns < soonest) {
            soonest = h->deadline_ns;
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
    struct cw_list *e, *next;

    for (e = ctx->inflight.next; e != &ctx->inflight; e = next) {
        cw_handle_t *h = cw_container_of(e, cw_handle_t, link);
        next = e->next;
        if (net && h->net != net)
            continue;
        cw_h_fail(h, CW_CANCELED);
        if (h->linger)
            h_cancel_ops(h);
        cw_h_check(h);
    }
    for (e = ctx->wait_done.next; e != &ctx->wait_done; e = next) {
        cw_handle_t *h = cw_container_of(e, cw_handle_t, link);
        next = e->next;
        if (net && h->net != net)
            continue;
        cw_list_del(&h->link);
        h->pending--;
        cw_h_set_final(h, CW_CANCELED);
        cw_h_check(h);
    }
    for (e = ctx->bulk_ops.next; e != &ctx->bulk_ops; e = next) {
        cw_bulk_op_t *op = cw_container_of(e, cw_bulk_op_t, link);
        next = e->next;
        if (net && op->net != net)
            continue;
        cw_bulk_op_cancel_locked(op);
    }
    cw_rs_cancel_net(ctx, net);
    /* A response to a peer that died may never complete by itself (the
     * plugin is still waiting to notice): withdraw it, once, so shutdown
     * and network close do not leave its handle behind. */
    for (e = ctx->responding.next; e != &ctx->responding; e = e->next) {
        cw_handle_t *h = cw_container_of(e, cw_handle_t, resp_link);
        if ((net && h->net != net) || h->send_op == NULL || h->send_canceled)
            continue;
        h->send_canceled = true;
        cw_h_cancel_send(h);
    }
    cw_sq_cancel_net(ctx, net);
}

#define CW_MAX_REFORWARDS 3

/* A forward of an idempotent request that the client routes sent through
 * a gateway failed on its transport: send it again, marked RESUME, through
 * another gateway of the route (docs/bulk-gateway.md, "Resume").  True if
 * it went; runs without the lock, from the queue. */
static bool h_reforward(cw_handle_t *h, cw_status_t st)
{
    cw_context_t *ctx = h->ctx;
    cw_status_t fst;
    cw_addr_t *addr;
    uint64_t now;

    /* Every completion asks: the clock is read only for the few that may
     * go again. */
    if (h->server || !h->idempotent || h->one_way || h->fwd_in != NULL ||
        (st != CW_DISCONNECTED && st != CW_UNREACHABLE && st != CW_IO) ||
        h->reforwards >= CW_MAX_REFORWARDS)
        return false;
    now = cw_now_ns();
    if (now + 1000000 >= h->deadline_ns ||
        cw_addr_reroute(h->addr, &addr) != CW_OK)
        return false;
    pthread_mutex_lock(&ctx->lock);
    cw_addr_unref_locked(h->addr);
    h->addr = addr;
    h->net = addr->net;
    h->state = CW_H_IDLE;
    h->resume = true;
    h->reforwards++;
    h->reforwarding = true;
    pthread_mutex_unlock(&ctx->lock);
    fst = cw_forward(h, (h->deadline_ns - now) / 1000000u, h->fcb, h->farg);
    pthread_mutex_lock(&ctx->lock);
    h->reforwarding = false;
    if (fst == CW_OK) {
        ctx->stats.reforwarded++;
        CW_LOG_RL(CW_LOG_INFO, "core",
                  "forward through a gateway failed "
                  "(%s): request resumed through another one",
                  cw_status_name(st));
    } else {
        h->state = CW_H_DONE;
    }
    pthread_mutex_unlock(&ctx->lock);
    return fst == CW_OK;
}

/* Queued completion of a forward (client) or a respond (server). */
void cw_h_complete(struct cw_cqe *e)
{
    cw_handle_t *h = cw_container_of(e, cw_handle_t, cqe);
    cw_context_t *ctx = h->ctx;
    cw_forward_cb_t cb;
    void *arg;
    cw_status_t st;

    bool keep;

    pthread_mutex_lock(&ctx->lock);
    keep = h->linger; /* still exposed to the peer: see cw_h_fail */
    if (keep) {
        /* The linger may end (cw_h_check drops the forward's reference)
         * on another thread, or in a progress call the callback makes,
         * while the callback still uses the handle: hold it until then. */
        h->user_done = true;
        cw_handle_ref(h);
    } else {
        h->state = CW_H_DONE;
    }
    cb = h->server ? h->rcb : h->fcb;
    arg = h->server ? h->rarg : h->farg;
    st = h->final;
    pthread_mutex_unlock(&ctx->lock);
    if (!keep && h_reforward(h, st)) {
        cw_handle_release(h); /* the new forward holds its own */
        return;
    }
    if (cb)
        cb(h, st, arg);
    cw_handle_release(h); /* the forward's, or the one held above */
}

cw_status_t cw_payload_check(cw_context_t *ctx, const struct cw_wire_msg *m,
                             const char *what, const cw_network_t *net)
{
    /* The size is the sender's word: refuse what we would not take before
     * allocating room for it. */
    if (m->hdr.payload_len <= ctx->opts.max_payload_size)
        return CW_OK;
    ctx->stats.rx_dropped++;
    CW_LOG_RL(CW_LOG_WARN, "core",
              "overflowed %s of %u bytes on %s refused "
              "(max_payload_size %zu)",
              what, m->hdr.payload_len, net->uri, ctx->opts.max_payload_size);
    return CW_OVERFLOW;
}

cw_status_t cw_h_pull(cw_handle_t *h, const struct cw_wire_msg *m,
                      cw_na_addr_t *peer,
                      void (*done)(cw_bulk_op_t *, cw_status_t, void *))
{
    cw_context_t *ctx = h->ctx;
    struct cw_wire_desc d;
    cw_bulk_t *remote, *local;
    cw_status_t st;

    st = cw_grow(&h->ovf_buf, &h->ovf_cap,
                 m->hdr.payload_len ? m->hdr.payload_len : 1);
    if (st != CW_OK)
        return st;
    cw_wire_desc_get(m->ovf, m->hdr.ovf_len, 1, 0, &d, NULL, NULL);
    st = cw_bulk_from_desc(ctx, h->net, &d, &remote);
    if (st != CW_OK)
        return st;
    st = cw_bulk_create_locked(ctx, h->ovf_buf, m->hdr.payload_len,
                               CW_BULK_READ_WRITE, &local);
    if (st == CW_OK) {
        st = cw_bulk_start(ctx, CW_BULK_PULL, peer, remote, 0, local, 0,
                           m->hdr.payload_len, NULL, h, done, &h->bulk_op);
        cw_bulk_unref(local);
    }
    cw_bulk_unref(remote);
    if (st == CW_OK) {
        h->pending++;
        ctx->stats.overflows++;
    }
    return st;
}

/* Bytes of the descriptors of a bulk list on @p net; with @p p, write them. */
static cw_status_t bulks_desc(cw_buf_t *w, cw_network_t *net, uint8_t *p,
                              size_t *len_p)
{
    size_t total = 0;

    for (unsigned i = 0; i < w->nbulk; i++) {
        size_t n;
        cw_status_t st = cw_bulk_desc_size(w->bulks[i], net, &n);
        if (st == CW_OK && p)
            st = cw_bulk_desc_write(w->bulks[i], net, p + total, n);
        if (st != CW_OK)
            return st;
        total += n;
    }
    *len_p = total;
    return CW_OK;
}

cw_status_t cw_msg_build(cw_handle_t *h, cw_buf_t *w, size_t limit,
                         const char *route, const uint8_t *raw_desc,
                         size_t raw_len, unsigned raw_n,
                         struct cw_wire_hdr *hdr, uint8_t **msg_p,
                         size_t *len_p)
{
    cw_network_t *net = h->net;
    size_t dest_len = route ? strlen(route) : 0;
    size_t hdr_len = cw_wire_hdr_size(hdr->flags);
    size_t desc_len = raw_len, ovf_len = 0, total;
    size_t payload_len = w->len;
    bool overflow;
    uint8_t *msg, *p;
    cw_status_t st;

    if (raw_desc == NULL) {
        st = bulks_desc(w, net, NULL, &desc_len);
        if (st != CW_OK)
            return st;
        raw_n = w->nbulk;
    }
    if (desc_len > UINT32_MAX || payload_len > UINT32_MAX)
        return CW_OVERFLOW;
    total = hdr_len + dest_len + desc_len + payload_len;
    overflow = total > limit;
    if (overflow) {
        st = cw_bulk_create_locked(h->ctx, w->data, payload_len,
                                   CW_BULK_READ_ONLY, &h->ovf_local);
        if (st == CW_OK)
            st = cw_bulk_desc_size(h->ovf_local, net, &ovf_len);
        if (st != CW_OK)
            return st;
        total = hdr_len + dest_len + desc_len + ovf_len;
        if (total > limit) {
            CW_ERROR("core",
                     "header and descriptors (%zu bytes) exceed the "
                     "eager limit %zu of %s",
                     total, limit, net->uri);
            return CW_OVERFLOW;
        }
        h->ctx->stats.overflows++;
    }
    if (!overflow && dest_len == 0 && desc_len == 0 && hdr_len == CW_HDR_SIZE) {
        /* Common case: the payload already sits behind reserved room. */
        st = cw_buf_reserve(w, 1);
        if (st != CW_OK)
            return st;
        msg = w->data - CW_HDR_SIZE;
    } else {
        st = cw_grow(&h->sbuf, &h->sbuf_cap, total);
        if (st != CW_OK)
            return st;
        msg = h->sbuf;
        p = msg + hdr_len;
        if (dest_len)
            memcpy(p, route, dest_len);
        p += dest_len;
        if (raw_desc)
            memcpy(p, raw_desc, desc_len);
        else if ((st = bulks_desc(w, net, p, &desc_len)) != CW_OK)
            return st;
        p += desc_len;
        if (overflow)
            st = cw_bulk_desc_write(h->ovf_local, net, p, ovf_len);
        else if (payload_len)
            memcpy(p, w->data, payload_len);
        if (st != CW_OK)
            return st;
    }
    hdr->flags |= overflow ? CW_HF_OVERFLOW : 0;
    hdr->dest_len = (uint16_t)dest_len;
    hdr->ndesc = (uint16_t)raw_n;
    hdr->desc_len = (uint32_t)desc_len;
    hdr->payload_len = (uint32_t)payload_len;
    hdr->ovf_len = (uint16_t)ovf_len;
    cw_wire_hdr_encode(msg, hdr);
    *msg_p = msg;
    *len_p = total;
    return CW_OK;
}
