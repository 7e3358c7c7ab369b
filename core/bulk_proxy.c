/*
 * Proxy bulk handles (design §4): the target side delegates a transfer on
 * a PROXY handle to the gateway that issued it, and the gateway side reads
 * descriptors, writes proxy descriptors and decodes delegation requests.
 * The pipelined data movement itself lives in the gateway
 * (gateway/bulk_pipe.c).
 */
#include "bulk_proxy.h"
#include "rpc_priv.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(((cw_bulk_t *)0)->ptoken) == CW_BPROXY_TOKEN_LEN,
               "token size");

/* Lifetimes are budgets like request deadlines: clamped to a day. */
#define CW_BPROXY_MAX_LIFE_MS (24ull * 3600 * 1000)

/* ---- target side -------------------------------------------------------- */

/* Remaining lifetime of the token in a proxy descriptor, as a deadline. */
static uint64_t px_expiry(const struct cw_wire_desc *d)
{
    uint64_t life_ms = 0;

    for (int i = 7; i >= 0; i--)
        life_ms = (life_ms << 8) | d->mem[CW_BPROXY_TOKEN_LEN + i];
    if (life_ms > CW_BPROXY_MAX_LIFE_MS)
        life_ms = CW_BPROXY_MAX_LIFE_MS;
    return cw_now_ns() + life_ms * 1000000ull;
}

static cw_status_t px_desc_check(cw_network_t *net,
                                 const struct cw_wire_desc *d)
{
    if (d->plugin_len != strlen(net->plugin) ||
        memcmp(d->plugin, net->plugin, d->plugin_len) != 0)
        return CW_PROTOCOL;
    if (d->mem_len != CW_BPROXY_MEM_LEN)
        return CW_BAD_HANDLE;
    return CW_OK;
}

cw_status_t cw_bproxy_from_desc(cw_context_t *ctx, cw_network_t *net,
                                const struct cw_wire_desc *d, cw_bulk_t **b_p)
{
    cw_bulk_t *b;
    cw_status_t st;

    CW_LOCK_ASSERT_HELD(&ctx->lock);
    st = px_desc_check(net, d);
    if (st != CW_OK)
        return st;
    b = calloc(1, sizeof(*b));
    if (b == NULL)
        return CW_NOMEM;
    memcpy(b->ptoken, d->mem, CW_BPROXY_TOKEN_LEN);
    b->pexpiry_ns = px_expiry(d);
    b->ctx = ctx;
    atomic_init(&b->refs, 1);
    b->remote = true;
    b->perm = d->perm;
    b->flags = d->flags;
    b->total = d->total;
    b->net = net;
    *b_p = b;
    return CW_OK;
}

cw_status_t cw_bproxy_retarget(cw_bulk_t *b, cw_network_t *net,
                               const struct cw_wire_desc *d, bool apply)
{
    cw_status_t st;

    CW_LOCK_ASSERT_HELD(&b->ctx->lock);
    if (!(d->flags & CW_DF_PROXY) || d->perm != b->perm || d->total != b->total)
        return CW_BAD_HANDLE;
    st = px_desc_check(net, d);
    if (st != CW_OK || !apply)
        return st;
    memcpy(b->ptoken, d->mem, CW_BPROXY_TOKEN_LEN);
    b->pexpiry_ns = px_expiry(d);
    if (b->net != net) {
        cw_net_ref(net);
        cw_net_unref_locked(b->net);
        b->net = net;
    }
    return CW_OK;
}

bool cw_bproxy_is_proxy(const cw_bulk_t *b)
{
    return b != NULL && b->remote && (b->flags & CW_DF_PROXY);
}

bool cw_bproxy_is_op(const cw_bulk_op_t *op)
{
    return op != NULL && (op->proxy_h != NULL || op->rsess != NULL);
}

/* The segments of local @p b covering [@p off, @p off + @p len) as a new
 * handle with permission @p perm; @p locked: the caller holds the lock. */
static cw_status_t px_sub_bulk(cw_context_t *ctx, const cw_bulk_t *b,
                               size_t off, size_t len, uint32_t perm,
                               bool locked, cw_bulk_t **sub_p)
{
    struct cw_segment *segs = calloc(b->nsegs, sizeof(*segs));
    size_t i = 0, n = 0;
    cw_status_t st;

    if (segs == NULL)
        return CW_NOMEM;
    while (i < b->nsegs && off >= b->segs[i].len) {
        off -= b->segs[i].len;
        i++;
    }
    for (; i < b->nsegs && len > 0; i++) {
        size_t take = b->segs[i].len - off;
        if (take == 0) {
            off = 0;
            continue;
        }
        if (take > len)
            take = len;
        segs[n].base = (char *)b->segs[i].base + off;
        segs[n].len = take;
        n++;
        len -= take;
        off = 0;
    }
    if (locked)
        st = cw_bulk_create_segs_locked(ctx, segs, n, perm, sub_p);
    else
        st = cw_bulk_create(ctx, segs, n, perm, sub_p);
    free(segs);
    return st;
}

cw_status_t cw_bproxy_sub_bulk(cw_context_t *ctx, const cw_bulk_t *b,
                               size_t off, size_t len, uint32_t perm,
                               cw_bulk_t **sub_p)
{
    CW_LOCK_ASSERT_FREE(&ctx->lock);
    return px_sub_bulk(ctx, b, off, len, perm, false, sub_p);
}

cw_status_t cw_bproxy_sub_bulk_locked(cw_context_t *ctx, const cw_bulk_t *b,
                                      size_t off, size_t len, uint32_t perm,
                                      cw_bulk_t **sub_p)
{
    CW_LOCK_ASSERT_HELD(&ctx->lock);
    return px_sub_bulk(ctx, b, off, len, perm, true, sub_p);
}

void cw_bproxy_op_free(cw_bulk_op_t *op)
{
    CW_LOCK_ASSERT_FREE(&op->ctx->lock);
    if (op->direct_peer != NULL) {
        cw_lock_take(&op->ctx->lock);
        cw_na_addr_free(op->remote->net->na, op->direct_peer);
        cw_lock_give(&op->ctx->lock);
    }
    cw_bulk_free(op->direct_remote);
    cw_handle_release(op->proxy_h);
    cw_bulk_free(op->proxy_sub);
    cw_bulk_free(op->remote);
    cw_bulk_free(op->local);
    free(op);
}

static void px_fwd_cb(cw_handle_t *h, cw_status_t st, void *arg)
{
    cw_bulk_op_t *op = arg;
    cw_context_t *ctx = op->ctx;

    /* An answer with a body is a grant: the bytes are ours to move. */
    if (st == CW_OK && cw_buf_remaining(cw_handle_output(h)) > 0) {
        st = cw_bgrant_start(op, cw_handle_output(h));
        if (st == CW_OK)
            return;
    } else if (st == CW_OK) {
        cw_lock_take(&ctx->lock);
        ctx->stats.bulk_bytes += op->len;
        cw_lock_give(&ctx->lock);
    }
    if (op->cb)
        op->cb(st, op->arg);
    cw_bproxy_op_free(op);
}

static void px_empty_done(struct cw_cqe *e)
{
    cw_bulk_op_t *op = nau_container_of(e, cw_bulk_op_t, cqe);

    if (op->cb)
        op->cb(CW_OK, op->arg);
    cw_bulk_free(op->remote);
    cw_bulk_free(op->local);
    free(op);
}

cw_status_t cw_bproxy_transfer(cw_context_t *ctx, enum cw_bulk_dir dir,
                               cw_addr_t *peer, cw_bulk_t *remote,
                               size_t remote_off, cw_bulk_t *local,
                               size_t local_off, size_t len, cw_bulk_cb_t cb,
                               void *arg, cw_bulk_op_t **op_p)
{
    cw_bulk_op_t *op;
    uint64_t now = cw_now_ns(), tmo_ms;
    cw_status_t st;

    CW_LOCK_ASSERT_FREE(&ctx->lock);
    if (peer == NULL || peer->net != remote->net)
        return CW_INVALID_ARG;
    if (now >= remote->pexpiry_ns)
        return CW_EXPIRED; /* the gateway would refuse it too */
    /* An idempotent request's transfer goes in resumable windows, unless
     * the gateway may grant it (zero-staging): then the bytes never pass
     * through the gateway, and its failure after the grant stops nothing. */
    if (remote->rsess != NULL && len > 0 &&
        !(remote->net->caps.flags & CW_NA_CAP_NODE_RMA))
        return cw_rs_transfer(ctx, dir, peer, remote, remote_off, local,
                              local_off, len, cb, arg, op_p);
    /* The delegation may take as long as the token lives. */
    tmo_ms = (remote->pexpiry_ns - now) / 1000000u + 1;
    op = cw_bulk_op_new(ctx, dir, remote, remote_off, local, local_off, len, cb,
                        arg);
    if (op == NULL)
        return CW_NOMEM;
    if (len == 0) {
        op->cqe.fn = px_empty_done;
        op->stop = true;
        cw_lock_take(&ctx->lock);
        cw_cq_push(ctx, &op->cqe);
        cw_lock_give(&ctx->lock);
        cw_ctx_wake(ctx);
        if (op_p)
            *op_p = op;
        return CW_OK;
    }
    /* The gateway gets exactly the bytes concerned, with the one right it
     * needs: write them for a pull, read them for a push. */
    st = cw_bproxy_sub_bulk(ctx, local, local_off, len,
                            dir == CW_BULK_PULL ? CW_BULK_WRITE_ONLY
                                                : CW_BULK_READ_ONLY,
                            &op->proxy_sub);
    if (st != CW_OK)
        goto err;
    st = cw_handle_create(ctx, peer, cw_rpc_id(CW_BPROXY_RPC), &op->proxy_h);
    if (st != CW_OK)
        goto err;
    /* Where the plugin's memory handles are not capabilities the gateway
     * may let us move the bytes ourselves (zero-staging). */
    op->proxy_direct = (remote->net->caps.flags & CW_NA_CAP_NODE_RMA) != 0;
    st = cw_bproxy_req_encode(
        cw_handle_input(op->proxy_h), remote->ptoken, dir, remote_off, len,
        op->proxy_direct ? CW_BPROXY_DIRECT : 0, op->proxy_sub);
    if (st != CW_OK)
        goto err;
    st = cw_forward(op->proxy_h, tmo_ms, px_fwd_cb, op);
    if (st != CW_OK)
        goto err;
    /* Only now: a failed forward frees the operation. */
    if (op_p)
        *op_p = op;
    return CW_OK;

err:
    cw_bproxy_op_free(op);
    return st;
}

cw_status_t cw_bproxy_req_encode(cw_buf_t *in,
                                 const uint8_t token[CW_BPROXY_TOKEN_LEN],
                                 enum cw_bulk_dir dir, uint64_t off,
                                 uint64_t len, uint32_t flags, cw_bulk_t *sub)
{
    cw_buf_put_bytes(in, token, CW_BPROXY_TOKEN_LEN);
    cw_buf_put_u8(in, (uint8_t)dir);
    cw_buf_put_u64(in, off);
    cw_buf_put_u64(in, len);
    cw_buf_put_u32(in, flags);
    cw_buf_put_bulk(in, sub);
    return cw_buf_error(in);
}

cw_status_t cw_bproxy_cancel(cw_bulk_op_t *op)
{
    cw_context_t *ctx = op->ctx;

    if (op->rsess != NULL)
        return cw_rs_cancel(op);
    cw_lock_take(&ctx->lock);
    op->proxy_canceled = true;
    if (op->direct_op != NULL) {
        cw_bulk_op_cancel_locked(op->direct_op);
        cw_lock_give(&ctx->lock);
        return CW_OK;
    }
    cw_lock_give(&ctx->lock);
    return cw_cancel(op->proxy_h);
}

/* ---- gateway side ------------------------------------------------------- */

cw_status_t cw_bproxy_desc_bulk(cw_handle_t *in, unsigned i, cw_bulk_t **b_p)
{
    struct cw_wire_desc d;
    cw_context_t *ctx;
    cw_status_t st;

    if (in == NULL || in->use.role == CW_H_CLIENT || b_p == NULL ||
        i >= in->use.srv.raw_ndesc)
        return CW_INVALID_ARG;
    ctx = in->ctx;
    st = cw_wire_desc_get(in->use.srv.raw_desc, in->use.srv.raw_desc_len,
                          in->use.srv.raw_ndesc, i, &d, NULL, NULL);
    if (st != CW_OK)
        return st;
    /* cw_bulk_from_desc handles PROXY descriptors too (and whatever
     * references a remote handle takes). */
    cw_lock_take(&ctx->lock);
    st = cw_bulk_from_desc(ctx, in->use.net, &d, b_p);
    cw_lock_give(&ctx->lock);
    return st;
}

cw_status_t cw_bproxy_desc_encode(cw_network_t *egress,
                                  const uint8_t token[CW_BPROXY_TOKEN_LEN],
                                  uint32_t perm, uint64_t total,
                                  uint64_t life_ms, void *buf, size_t cap,
                                  size_t *len_p)
{
    size_t n;
    uint8_t *p;

    if (egress == NULL || token == NULL || buf == NULL || len_p == NULL ||
        perm == 0 || (perm & ~CW_BULK_READ_WRITE))
        return CW_INVALID_ARG;
    n = cw_wire_desc_size(strlen(egress->plugin), CW_BPROXY_MEM_LEN);
    if (n > cap)
        return CW_OVERFLOW;
    p = cw_wire_desc_encode(buf, CW_DF_PROXY, (uint8_t)perm, total,
                            egress->plugin, CW_BPROXY_MEM_LEN);
    memcpy(p, token, CW_BPROXY_TOKEN_LEN);
    for (int i = 0; i < 8; i++)
        p[CW_BPROXY_TOKEN_LEN + i] = (uint8_t)(life_ms >> (8 * i));
    *len_p = n;
    return CW_OK;
}

cw_status_t cw_bproxy_req_decode(cw_handle_t *h, struct cw_bproxy_req *r)
{
    cw_buf_t *in;
    const void *tok = NULL;
    size_t toklen = 0;
    uint8_t dir = 0;
    cw_status_t st;

    if (h == NULL || r == NULL)
        return CW_INVALID_ARG;
    in = cw_handle_input(h);
    memset(r, 0, sizeof(*r));
    cw_buf_get_bytes(in, &tok, &toklen);
    cw_buf_get_u8(in, &dir);
    cw_buf_get_u64(in, &r->off);
    cw_buf_get_u64(in, &r->len);
    cw_buf_get_u32(in, &r->flags);
    st = cw_buf_error(in);
    if (st != CW_OK)
        return CW_PROTOCOL;
    if (toklen != CW_BPROXY_TOKEN_LEN)
        return CW_BAD_HANDLE;
    if ((dir != CW_BULK_PULL && dir != CW_BULK_PUSH) ||
        (r->flags & ~CW_BPROXY_FLAGS_ALL))
        return CW_PROTOCOL;
    memcpy(r->token, tok, CW_BPROXY_TOKEN_LEN);
    r->dir = (enum cw_bulk_dir)dir;
    st = cw_buf_get_bulk(in, &r->bulk);
    if (st != CW_OK)
        return st == CW_RANGE ? CW_PROTOCOL : st;
    if (cw_bulk_size(r->bulk) != r->len) {
        cw_bulk_free(r->bulk);
        r->bulk = NULL;
        return CW_RANGE;
    }
    return CW_OK;
}
