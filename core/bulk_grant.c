/*
 * Zero-staging grants (docs/bulk-gateway.md, "Zero-staging").  Where the
 * origin's memory and the target are on the same plugin family and that
 * plugin's memory handles are not capabilities (na-shm: any process of the
 * node that passes the kernel's ptrace check may attach), the gateway does
 * not stage a delegated transfer: after checking the token as usual it
 * answers with a grant, a handle restricted to exactly the requested range
 * with exactly the requested right, plus the owner's address, and the
 * target moves the bytes itself with one copy.  The gateway's token check
 * stays the gate; the target trusts a grant only in answer to a delegation
 * it sent asking for one, and only if it matches what it asked.
 *
 * A grant is the body of a CW_OK answer to CW_BPROXY_RPC:
 *   u8 kind (CW_BPROXY_GRANT), str owner address, u8 permission,
 *   u64 length, u64 life in ms, bytes the plugin's serialized handle.
 */
#include "bulk_proxy.h"
#include "rpc_priv.h"

#include <stdlib.h>
#include <string.h>

/* ---- gateway side ------------------------------------------------------- */

bool cw_bgrant_possible(cw_handle_t *h, const struct cw_bproxy_req *r,
                        const cw_bulk_t *origin)
{
    const cw_network_t *in, *own;

    if (h == NULL || r == NULL || origin == NULL || !origin->remote ||
        cw_bproxy_is_proxy(origin) || !(r->flags & CW_BPROXY_DIRECT) ||
        r->len == 0)
        return false;
    in = h->use.net;
    own = origin->net;
    return in != NULL && own != NULL && !in->closed && !own->closed &&
           strcmp(in->plugin, own->plugin) == 0 &&
           (in->caps.flags & CW_NA_CAP_NODE_RMA) &&
           (own->caps.flags & CW_NA_CAP_NODE_RMA);
}

cw_status_t cw_bgrant_write(cw_handle_t *h, const struct cw_bproxy_req *r,
                            cw_bulk_t *origin, cw_addr_t *owner,
                            uint64_t life_ms)
{
    cw_context_t *ctx;
    cw_buf_t *out;
    char addr[CW_ADDR_STR_MAX];
    uint32_t perm, access;
    cw_na_mem_t *sub = NULL;
    uint8_t *mem = NULL;
    size_t mlen = 0;
    cw_status_t st;

    if (!cw_bgrant_possible(h, r, origin) || owner == NULL ||
        owner->net != origin->net)
        return CW_INVALID_ARG;
    ctx = h->ctx;
    out = cw_handle_output(h);
    perm = r->dir == CW_BULK_PULL ? CW_BULK_READ_ONLY : CW_BULK_WRITE_ONLY;
    access = r->dir == CW_BULK_PULL ? CW_NA_MEM_READ : CW_NA_MEM_WRITE;
    st = cw_addr_to_string(owner, addr, sizeof(addr));
    if (st != CW_OK)
        return st;
    cw_lock_take(&ctx->lock);
    st = cw_na_mem_restrict(origin->net->na, origin->rmem, r->off, r->len,
                            access, &sub);
    if (st == CW_OK) {
        mlen = cw_na_mem_serialize_size(origin->net->na, sub);
        if (mlen == 0 || mlen > UINT16_MAX)
            st = CW_OVERFLOW;
        else if ((mem = malloc(mlen)) == NULL)
            st = CW_NOMEM;
        else
            st = cw_na_mem_serialize(origin->net->na, mem, mlen, sub);
        cw_na_mem_release(origin->net->na, sub);
    }
    cw_lock_give(&ctx->lock);
    if (st != CW_OK)
        goto out;
    cw_buf_put_u8(out, CW_BPROXY_GRANT);
    cw_buf_put_str(out, addr);
    cw_buf_put_u8(out, (uint8_t)perm);
    cw_buf_put_u64(out, r->len);
    cw_buf_put_u64(out, life_ms);
    cw_buf_put_bytes(out, mem, mlen);
    st = cw_buf_error(out);
    if (st != CW_OK)
        cw_buf_reset(out);
out:
    free(mem);
    return st;
}

/* ---- target side -------------------------------------------------------- */

static void grant_done(cw_status_t st, void *arg)
{
    cw_bulk_op_t *op = arg;

    cw_lock_take(&op->ctx->lock);
    op->direct_op = NULL;
    cw_lock_give(&op->ctx->lock);
    if (op->cb)
        op->cb(st, op->arg);
    cw_bproxy_op_free(op);
}

/* Decode the grant in @p out and check it against what @p op asked: one
 * right, the one its direction needs, exactly its length. */
static cw_status_t grant_decode(cw_bulk_op_t *op, cw_buf_t *out,
                                const char **owner_p, uint32_t *perm_p,
                                const void **mem_p, size_t *mlen_p)
{
    uint32_t want =
        op->dir == CW_BULK_PULL ? CW_BULK_READ_ONLY : CW_BULK_WRITE_ONLY;
    uint8_t kind = 0, perm = 0;
    uint64_t len = 0, life_ms = 0;
    const char *owner = NULL;
    const void *mem = NULL;
    size_t mlen = 0;

    cw_buf_get_u8(out, &kind);
    cw_buf_get_str(out, &owner);
    cw_buf_get_u8(out, &perm);
    cw_buf_get_u64(out, &len);
    cw_buf_get_u64(out, &life_ms);
    cw_buf_get_bytes(out, &mem, &mlen);
    if (cw_buf_error(out) != CW_OK || cw_buf_remaining(out) != 0 ||
        kind != CW_BPROXY_GRANT || owner == NULL || perm != want ||
        len != op->len || mlen == 0 || mlen > UINT16_MAX) {
        CW_LOG_RL(CW_LOG_WARN, "core",
                  "malformed or mismatched bulk grant "
                  "(kind %u, permission %u of %u, %llu bytes of %zu)",
                  kind, perm, want, (unsigned long long)len, op->len);
        return CW_PROTOCOL;
    }
    if (life_ms == 0 || cw_now_ns() >= op->remote->pexpiry_ns)
        return CW_EXPIRED;
    *owner_p = owner;
    *perm_p = perm;
    *mem_p = mem;
    *mlen_p = mlen;
    return CW_OK;
}

cw_status_t cw_bgrant_start(cw_bulk_op_t *op, cw_buf_t *out)
{
    cw_context_t *ctx = op->ctx;
    cw_network_t *net = op->remote->net;
    struct cw_wire_desc d;
    const char *owner;
    const void *mem;
    size_t mlen;
    uint32_t perm;
    cw_status_t st;

    CW_LOCK_ASSERT_FREE(&ctx->lock);
    /* Only an answer to a delegation that asked for a grant may be one. */
    if (!op->proxy_direct) {
        CW_LOG_RL(CW_LOG_WARN, "core", "bulk grant not asked for, refused");
        return CW_PROTOCOL;
    }
    st = grant_decode(op, out, &owner, &perm, &mem, &mlen);
    if (st != CW_OK)
        return st;
    memset(&d, 0, sizeof(d));
    d.perm = (uint8_t)perm;
    d.total = op->len;
    d.plugin = net->plugin;
    d.plugin_len = (uint8_t)strlen(net->plugin);
    d.mem = mem;
    d.mem_len = (uint16_t)mlen;
    cw_lock_take(&ctx->lock);
    if (op->proxy_canceled) {
        st = CW_CANCELED;
        goto out_unlock;
    }
    if (net->closed) {
        st = CW_DISCONNECTED;
        goto out_unlock;
    }
    st = cw_na_addr_lookup(net->na, owner, &op->direct_peer);
    if (st != CW_OK) {
        CW_LOG_RL(CW_LOG_WARN, "core", "owner %s of a bulk grant: %s", owner,
                  cw_status_str(st));
        goto out_unlock;
    }
    st = cw_bulk_from_desc(ctx, net, &d, &op->direct_remote);
    if (st != CW_OK)
        goto out_unlock;
    /* The plugin checks the handle's bounds and access again, and that it
     * belongs to the owner named. */
    st = cw_bulk_start(ctx, op->dir, op->direct_peer, op->direct_remote, 0,
                       op->local, op->loff, op->len, grant_done, op, NULL,
                       &op->direct_op);
out_unlock:
    cw_lock_give(&ctx->lock);
    if (st == CW_OK)
        cw_ctx_wake(ctx);
    return st;
}
