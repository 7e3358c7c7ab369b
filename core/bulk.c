/*
 * Bulk handles and transfers.  A local handle is registered lazily on each
 * network it is sent over; a remote handle is the deserialized descriptor
 * of a peer's handle.  A transfer is split into chunks with several in
 * flight and completes exactly once; permission and bounds are checked
 * before anything moves.
 */
#include "bulk_proxy.h"
#include "rpc_priv.h"

#include <stdlib.h>
#include <string.h>

static uint32_t perm_to_access(uint32_t perm)
{
    return ((perm & CW_BULK_READ_ONLY) ? CW_NA_MEM_READ : 0) |
           ((perm & CW_BULK_WRITE_ONLY) ? CW_NA_MEM_WRITE : 0);
}

static cw_status_t bulk_new(cw_context_t *ctx, const struct cw_segment *segs,
                            size_t n, uint32_t perm, cw_bulk_t **b_p)
{
    cw_bulk_t *b;
    size_t total = 0;

    if (n == 0 || segs == NULL || perm == 0 || (perm & ~CW_BULK_READ_WRITE))
        return CW_INVALID_ARG;
    for (size_t i = 0; i < n; i++) {
        if ((segs[i].base == NULL && segs[i].len > 0) ||
            segs[i].len > SIZE_MAX - total)
            return CW_INVALID_ARG;
        total += segs[i].len;
    }
    b = calloc(1, sizeof(*b));
    if (b == NULL)
        return CW_NOMEM;
    b->segs = malloc(n * sizeof(*segs));
    if (b->segs == NULL) {
        free(b);
        return CW_NOMEM;
    }
    memcpy(b->segs, segs, n * sizeof(*segs));
    b->nsegs = n;
    b->ctx = ctx;
    atomic_init(&b->refs, 1);
    b->perm = perm;
    b->total = total;
    *b_p = b;
    return CW_OK;
}

cw_status_t cw_bulk_create(cw_context_t *ctx, const struct cw_segment *segs,
                           size_t n, uint32_t perm, cw_bulk_t **bulk_p)
{
    cw_bulk_t *b;
    cw_status_t st;

    if (ctx == NULL || bulk_p == NULL)
        return CW_INVALID_ARG;
    st = bulk_new(ctx, segs, n, perm, &b);
    if (st != CW_OK)
        return st;
    cw_lock_take(&ctx->lock);
    nau_list_add_tail(&ctx->bulks, &b->ctx_link);
    cw_lock_give(&ctx->lock);
    *bulk_p = b;
    return CW_OK;
}

cw_status_t cw_bulk_create_segs_locked(cw_context_t *ctx,
                                       const struct cw_segment *segs, size_t n,
                                       uint32_t perm, cw_bulk_t **b_p)
{
    cw_bulk_t *b;
    cw_status_t st;

    CW_LOCK_ASSERT_HELD(&ctx->lock);
    st = bulk_new(ctx, segs, n, perm, &b);
    if (st != CW_OK)
        return st;
    nau_list_add_tail(&ctx->bulks, &b->ctx_link);
    *b_p = b;
    return CW_OK;
}

cw_status_t cw_bulk_create_locked(cw_context_t *ctx, void *base, size_t len,
                                  uint32_t perm, cw_bulk_t **b_p)
{
    struct cw_segment seg = {base, len};

    return cw_bulk_create_segs_locked(ctx, &seg, 1, perm, b_p);
}

/* The last reference is gone: release what the context tracks of @p b
 * (its lock held); the memory is freed after. */
static void bulk_release_locked(cw_bulk_t *b)
{
    if (b->remote) {
        cw_rs_bulk_leave(b);
        cw_na_mem_release(b->net->na, b->rmem);
        cw_net_unref_locked(b->net);
    } else {
        for (unsigned i = 0; i < CW_MAX_NETS; i++)
            if (b->reg[i])
                cw_na_mem_release(b->ctx->nets[i]->na, b->reg[i]);
        nau_list_del(&b->ctx_link);
    }
}

void cw_bulk_unref(cw_bulk_t *b)
{
    if (b == NULL)
        return;
    CW_LOCK_ASSERT_HELD(&b->ctx->lock);
    if (atomic_fetch_sub(&b->refs, 1) != 1)
        return;
    bulk_release_locked(b);
    free(b->segs);
    free(b);
}

void cw_bulk_free(cw_bulk_t *bulk)
{
    if (bulk == NULL)
        return;
    CW_LOCK_ASSERT_FREE(&bulk->ctx->lock);
    if (atomic_fetch_sub(&bulk->refs, 1) != 1)
        return;
    cw_lock_take(&bulk->ctx->lock);
    bulk_release_locked(bulk);
    cw_lock_give(&bulk->ctx->lock);
    free(bulk->segs);
    free(bulk);
}

size_t cw_bulk_size(const cw_bulk_t *bulk)
{
    return bulk ? bulk->total : 0;
}

uint32_t cw_bulk_perm(const cw_bulk_t *bulk)
{
    return bulk ? bulk->perm : 0;
}

cw_status_t cw_bulk_reg(cw_bulk_t *b, cw_network_t *net, cw_na_mem_t **m_p)
{
    struct cw_na_segment one = {0}, *segs = &one;
    cw_status_t st;

    CW_LOCK_ASSERT_HELD(&b->ctx->lock);
    if (b->remote)
        return CW_INVALID_ARG;
    if (net->closed)
        return CW_DISCONNECTED; /* cw_network_close */
    if (b->reg[net->index] == NULL) {
        if (b->nsegs > 1) {
            segs = malloc(b->nsegs * sizeof(*segs));
            if (segs == NULL)
                return CW_NOMEM;
        }
        for (size_t i = 0; i < b->nsegs; i++) {
            segs[i].base = b->segs[i].base;
            segs[i].len = b->segs[i].len;
        }
        st = cw_na_mem_register(net->na, segs, b->nsegs,
                                perm_to_access(b->perm), &b->reg[net->index]);
        if (segs != &one)
            free(segs);
        if (st != CW_OK) {
            /* The plugin has said why. */
            CW_DEBUG("core", "registering %zu bytes on %s failed: %s", b->total,
                     net->uri, cw_status_str(st));
            b->reg[net->index] = NULL;
            return st;
        }
    }
    *m_p = b->reg[net->index];
    return CW_OK;
}

cw_status_t cw_bulk_desc_size(cw_bulk_t *b, cw_network_t *net, size_t *n_p)
{
    cw_na_mem_t *m;
    size_t mlen;
    cw_status_t st = cw_bulk_reg(b, net, &m);

    if (st != CW_OK)
        return st;
    mlen = cw_na_mem_serialize_size(net->na, m);
    if (mlen == 0 || mlen > UINT16_MAX)
        return CW_OVERFLOW;
    *n_p = cw_wire_desc_size(strlen(net->plugin), mlen);
    return CW_OK;
}

cw_status_t cw_bulk_desc_write(cw_bulk_t *b, cw_network_t *net, uint8_t *p,
                               size_t n)
{
    cw_na_mem_t *m;
    size_t mlen;
    cw_status_t st = cw_bulk_reg(b, net, &m);

    if (st != CW_OK)
        return st;
    mlen = cw_na_mem_serialize_size(net->na, m);
    if (cw_wire_desc_size(strlen(net->plugin), mlen) != n)
        return CW_INTERNAL;
    p = cw_wire_desc_encode(p, 0, (uint8_t)b->perm, b->total, net->plugin,
                            mlen);
    return cw_na_mem_serialize(net->na, p, mlen, m);
}

cw_status_t cw_bulk_from_desc(cw_context_t *ctx, cw_network_t *net,
                              const struct cw_wire_desc *d, cw_bulk_t **b_p)
{
    cw_bulk_t *b;
    cw_status_t st;

    CW_LOCK_ASSERT_HELD(&ctx->lock);
    if (d->flags & CW_DF_PROXY) {
        cw_status_t pst = cw_bproxy_from_desc(ctx, net, d, b_p);
        if (pst == CW_OK)
            cw_net_ref(net); /* dropped by cw_bulk_unref */
        return pst;
    }
    if (d->plugin_len != strlen(net->plugin) ||
        memcmp(d->plugin, net->plugin, d->plugin_len) != 0)
        return CW_PROTOCOL;
    b = calloc(1, sizeof(*b));
    if (b == NULL)
        return CW_NOMEM;
    st = cw_na_mem_deserialize(net->na, d->mem, d->mem_len, &b->rmem);
    if (st != CW_OK) {
        free(b);
        return st;
    }
    b->ctx = ctx;
    atomic_init(&b->refs, 1);
    b->remote = true;
    b->perm = d->perm;
    b->flags = d->flags;
    b->total = d->total;
    b->net = net;
    cw_net_ref(net);
    *b_p = b;
    return CW_OK;
}

/* ---- transfers ---------------------------------------------------------- */

static void op_free_locked(cw_bulk_op_t *op)
{
    cw_bulk_unref(op->remote);
    cw_bulk_unref(op->local);
    free(op);
}

static void op_complete(struct cw_cqe *e)
{
    cw_bulk_op_t *op = nau_container_of(e, cw_bulk_op_t, cqe);

    if (op->cb)
        op->cb(op->st, op->arg);
    cw_bulk_free(op->remote);
    cw_bulk_free(op->local);
    free(op);
}

static void op_finish(cw_bulk_op_t *op)
{
    CW_LOCK_ASSERT_HELD(&op->ctx->lock);
    nau_list_del(&op->link);
    op->stop = true;
    if (op->icb) {
        op->icb(op, op->st, op->arg);
        op_free_locked(op);
    } else {
        cw_cq_push(op->ctx, &op->cqe);
    }
}

static void chunk_cb(const struct cw_na_cb_info *info);

static void op_issue(cw_bulk_op_t *op)
{
    cw_na_mem_t *lm;
    cw_status_t st;

    if (cw_bulk_reg(op->local, op->net, &lm) != CW_OK) {
        op->st = CW_IO;
        op->stop = true;
        return;
    }
    while (!op->stop && op->inflight < op->depth && op->next < op->len) {
        struct cw_bulk_slot *s = NULL;
        size_t n = op->len - op->next;
        for (unsigned i = 0; i < op->depth; i++)
            if (op->slots[i].op == NULL) {
                s = &op->slots[i];
                break;
            }
        if (s == NULL)
            break;
        if (n > op->chunk)
            n = op->chunk;
        s->op = op;
        s->len = n;
        if (op->dir == CW_BULK_PULL)
            st = cw_na_get(op->net->na, lm, op->loff + op->next,
                           op->remote->rmem, op->roff + op->next, n, op->peer,
                           chunk_cb, s, &s->naop);
        else
            st = cw_na_put(op->net->na, lm, op->loff + op->next,
                           op->remote->rmem, op->roff + op->next, n, op->peer,
                           chunk_cb, s, &s->naop);
        if (st != CW_OK) {
            s->op = NULL;
            s->naop = NULL;
            op->st = st;
            op->stop = true;
            break;
        }
        op->ctx->stats.na_ops++;
        op->inflight++;
        op->next += n;
    }
}

static void chunk_cb(const struct cw_na_cb_info *info)
{
    struct cw_bulk_slot *s = info->arg;
    cw_bulk_op_t *op = s->op;

    s->op = NULL;
    s->naop = NULL;
    op->inflight--;
    if (info->status != CW_OK) {
        if (op->st == CW_OK)
            op->st = info->status;
        cw_bulk_op_cancel_locked(op);
    } else if (!op->stop) {
        op->ctx->stats.bulk_bytes += s->len;
        op_issue(op);
    }
    if (op->inflight == 0 && (op->stop || op->next >= op->len))
        op_finish(op);
}

void cw_bulk_op_cancel_locked(cw_bulk_op_t *op)
{
    CW_LOCK_ASSERT_HELD(&op->ctx->lock);
    if (op->stop)
        return;
    op->stop = true;
    if (op->st == CW_OK)
        op->st = CW_CANCELED;
    for (unsigned i = 0; i < op->depth; i++)
        if (op->slots[i].op && op->slots[i].naop)
            cw_na_cancel(op->net->na, op->slots[i].naop);
}

cw_bulk_op_t *cw_bulk_op_new(cw_context_t *ctx, enum cw_bulk_dir dir,
                             cw_bulk_t *remote, size_t roff, cw_bulk_t *local,
                             size_t loff, size_t len, cw_bulk_cb_t cb,
                             void *arg)
{
    cw_bulk_op_t *op = calloc(1, sizeof(*op));

    if (op == NULL)
        return NULL;
    op->ctx = ctx;
    op->dir = dir;
    op->remote = remote;
    op->local = local;
    atomic_fetch_add(&remote->refs, 1);
    atomic_fetch_add(&local->refs, 1);
    op->roff = roff;
    op->loff = loff;
    op->len = len;
    op->cb = cb;
    op->arg = arg;
    nau_list_node_init(&op->link);
    return op;
}

cw_status_t cw_bulk_start(cw_context_t *ctx, enum cw_bulk_dir dir,
                          cw_na_addr_t *peer, cw_bulk_t *remote, size_t roff,
                          cw_bulk_t *local, size_t loff, size_t len,
                          cw_bulk_cb_t cb, void *arg,
                          void (*icb)(cw_bulk_op_t *, cw_status_t, void *),
                          cw_bulk_op_t **op_p)
{
    cw_bulk_op_t *op;
    size_t maxrma = remote->net->caps.max_rma_size;
    cw_status_t st;

    CW_LOCK_ASSERT_HELD(&ctx->lock);
    if (remote->net->closed)
        return CW_DISCONNECTED; /* cw_network_close */
    op = cw_bulk_op_new(ctx, dir, remote, roff, local, loff, len, cb, arg);
    if (op == NULL)
        return CW_NOMEM;
    op->net = remote->net;
    op->peer = peer;
    op->chunk = ctx->opts.bulk_chunk;
    if (maxrma && op->chunk > maxrma)
        op->chunk = maxrma;
    op->depth = ctx->opts.bulk_depth;
    op->icb = icb;
    op->cqe.fn = op_complete;
    if (len == 0) {
        if (icb) {
            op_free_locked(op);
            return CW_INVALID_ARG;
        }
        nau_list_add_tail(&ctx->bulk_ops, &op->link);
        if (op_p)
            *op_p = op;
        op_finish(op);
        return CW_OK;
    }
    op_issue(op);
    if (op->inflight == 0) {
        st = op->st != CW_OK ? op->st : CW_INTERNAL;
        op_free_locked(op);
        return st;
    }
    nau_list_add_tail(&ctx->bulk_ops, &op->link);
    if (op_p)
        *op_p = op;
    return CW_OK;
}

/* Copy between two local segment lists (transfers on a self RPC). */
static void copy_segs(const cw_bulk_t *dst, size_t doff, const cw_bulk_t *src,
                      size_t soff, size_t len)
{
    size_t di = 0, si = 0;

    while (di < dst->nsegs && doff >= dst->segs[di].len) {
        doff -= dst->segs[di].len;
        di++;
    }
    while (si < src->nsegs && soff >= src->segs[si].len) {
        soff -= src->segs[si].len;
        si++;
    }
    while (len > 0) {
        size_t dn = dst->segs[di].len - doff, sn = src->segs[si].len - soff;
        size_t n = dn < sn ? dn : sn;
        if (n > len)
            n = len;
        memmove((char *)dst->segs[di].base + doff,
                (const char *)src->segs[si].base + soff, n);
        len -= n;
        doff += n;
        soff += n;
        if (doff == dst->segs[di].len) {
            di++;
            doff = 0;
        }
        if (soff == src->segs[si].len) {
            si++;
            soff = 0;
        }
    }
}

cw_status_t cw_bulk_transfer(cw_context_t *ctx, enum cw_bulk_dir dir,
                             cw_addr_t *peer, cw_bulk_t *remote,
                             size_t remote_off, cw_bulk_t *local,
                             size_t local_off, size_t len, cw_bulk_cb_t cb,
                             void *arg, cw_bulk_op_t **op_p)
{
    cw_status_t st;

    if (ctx == NULL || peer == NULL || remote == NULL || local == NULL ||
        local->remote || (dir != CW_BULK_PULL && dir != CW_BULK_PUSH))
        return CW_INVALID_ARG;
    CW_LOCK_ASSERT_FREE(&ctx->lock);
    if (dir == CW_BULK_PULL && !(remote->perm & CW_BULK_READ_ONLY))
        return CW_PERMISSION;
    if (dir == CW_BULK_PUSH && !(remote->perm & CW_BULK_WRITE_ONLY))
        return CW_PERMISSION;
    if (remote_off > remote->total || len > remote->total - remote_off ||
        local_off > local->total || len > local->total - local_off)
        return CW_RANGE;
    if (cw_bproxy_is_proxy(remote))
        return cw_bproxy_transfer(ctx, dir, peer, remote, remote_off, local,
                                  local_off, len, cb, arg, op_p);
    if (!remote->remote) {
        /* A handle of this process (RPC to self): copy directly. */
        cw_bulk_op_t *op = cw_bulk_op_new(ctx, dir, remote, remote_off, local,
                                          local_off, len, cb, arg);
        if (op == NULL)
            return CW_NOMEM;
        op->cqe.fn = op_complete;
        op->stop = true;
        if (len) {
            if (dir == CW_BULK_PULL)
                copy_segs(local, local_off, remote, remote_off, len);
            else
                copy_segs(remote, remote_off, local, local_off, len);
        }
        cw_lock_take(&ctx->lock);
        ctx->stats.bulk_bytes += len;
        cw_cq_push(ctx, &op->cqe);
        cw_lock_give(&ctx->lock);
        if (op_p)
            *op_p = op;
        return CW_OK;
    }
    if (peer == NULL || peer->net != remote->net)
        return CW_INVALID_ARG;
    cw_lock_take(&ctx->lock);
    st = cw_bulk_start(ctx, dir, peer->na, remote, remote_off, local, local_off,
                       len, cb, arg, NULL, op_p);
    cw_lock_give(&ctx->lock);
    cw_ctx_wake(ctx);
    return st;
}

cw_status_t cw_bulk_cancel(cw_bulk_op_t *op)
{
    cw_context_t *ctx;

    if (op == NULL)
        return CW_INVALID_ARG;
    if (cw_bproxy_is_op(op))
        return cw_bproxy_cancel(op);
    ctx = op->ctx;
    cw_lock_take(&ctx->lock);
    cw_bulk_op_cancel_locked(op);
    cw_lock_give(&ctx->lock);
    return CW_OK;
}
