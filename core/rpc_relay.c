/*
 * The relay API (include/causeway/forward.h): a gateway passes a request on
 * to the next hop with its payload and descriptor section as opaque bytes,
 * and the response back unchanged.  The incoming (server) handle and the
 * outgoing (client) one are linked by their relay parts; across two
 * contexts the link is under cw_relay_link_lock and holds no reference.
 */
#include "rpc_priv.h"

#include <stdlib.h>
#include <string.h>

cw_status_t cw_context_set_relay_hook(cw_context_t *ctx, cw_relay_hook_t hook,
                                      void *arg)
{
    if (ctx == NULL)
        return CW_INVALID_ARG;
    cw_lock_take(&ctx->lock);
    ctx->relay_hook = hook;
    ctx->relay_arg = arg;
    cw_lock_give(&ctx->lock);
    return CW_OK;
}

cw_status_t cw_context_set_max_hops(cw_context_t *ctx, unsigned max_hops)
{
    if (ctx == NULL || max_hops > 255)
        return CW_INVALID_ARG;
    cw_lock_take(&ctx->lock);
    ctx->max_hops = max_hops;
    cw_lock_give(&ctx->lock);
    return CW_OK;
}

const char *cw_relay_dest(cw_handle_t *in)
{
    if (in == NULL || in->use.role == CW_H_CLIENT || in->use.srv.route == NULL)
        return "";
    return in->use.srv.route;
}

unsigned cw_relay_hops(cw_handle_t *in)
{
    return in ? in->use.hops : 0;
}

unsigned cw_relay_desc_count(cw_handle_t *in)
{
    return (in && in->use.role == CW_H_SERVER) ? in->use.srv.raw_ndesc : 0;
}

cw_status_t cw_relay_desc_get(cw_handle_t *h, unsigned i, const void **p_p,
                              size_t *len_p)
{
    const uint8_t *sect, *raw;
    size_t sect_len, raw_len;
    unsigned n;
    cw_status_t st;

    if (h == NULL || p_p == NULL || len_p == NULL)
        return CW_INVALID_ARG;
    if (h->use.role == CW_H_SERVER) {
        sect = h->use.srv.raw_desc;
        sect_len = h->use.srv.raw_desc_len;
        n = h->use.srv.raw_ndesc;
    } else if (h->use.relay.in) {
        sect = h->desc_copy;
        sect_len = h->use.relay.desc_len;
        n = h->use.relay.ndesc;
    } else {
        return CW_INVALID_ARG;
    }
    st = cw_wire_desc_get(sect, sect_len, n, i, NULL, &raw, &raw_len);
    if (st != CW_OK)
        return st;
    *p_p = raw;
    *len_p = raw_len;
    return CW_OK;
}

pthread_mutex_t cw_relay_link_lock = CW_MUTEX_INITIALIZER;

cw_status_t cw_relay_create(cw_handle_t *in, cw_addr_t *next_hop,
                            const char *dest, cw_handle_t **out_p)
{
    if (in == NULL)
        return CW_INVALID_ARG;
    return cw_relay_create_on(in->ctx, in, next_hop, dest, out_p);
}

cw_status_t cw_relay_create_on(cw_context_t *out_ctx, cw_handle_t *in,
                               cw_addr_t *next_hop, const char *dest,
                               cw_handle_t **out_p)
{
    cw_context_t *ctx;
    cw_handle_t *out;
    bool xctx;
    cw_status_t st;

    if (out_ctx == NULL || in == NULL || in->use.role == CW_H_CLIENT ||
        next_hop == NULL || out_p == NULL || next_hop->ctx != out_ctx)
        return CW_INVALID_ARG;
    if (dest && strlen(dest) > UINT16_MAX)
        return CW_INVALID_ARG;
    ctx = in->ctx;
    xctx = out_ctx != ctx;
    if (cw_now_pass_ns() >= in->use.deadline_ns)
        return CW_TIMEOUT;
    /* The new handle is not known to anyone yet: filling it in needs only
     * the incoming handle's lock (never both contexts' locks).  In one
     * context, made under the same hold. */
    if (!xctx) {
        cw_lock_take(&ctx->lock);
        st = cw_handle_create_locked(ctx, next_hop, in->use.id, &out);
        if (st != CW_OK) {
            cw_lock_give(&ctx->lock);
            return st;
        }
    } else {
        st = cw_handle_create(out_ctx, next_hop, in->use.id, &out);
        if (st != CW_OK)
            return st;
        cw_lock_take(&ctx->lock);
    }
    out->use.rflags =
        in->use.rflags & (CW_HF_ONE_WAY | CW_HF_IDEMPOTENT | CW_HF_RESUME);
    out->use.resume_id = in->use.resume_id;
    out->use.hops = (uint8_t)(in->use.hops < 255 ? in->use.hops + 1 : 255);
    if (dest && dest[0]) {
        size_t dlen = strlen(dest) + 1;

        st = cw_grow((uint8_t **)&out->relay_route_buf, &out->relay_route_cap,
                     dlen);
        if (st != CW_OK)
            goto err_unlock;
        memcpy(out->relay_route_buf, dest, dlen);
        out->use.relay.route = out->relay_route_buf;
    }
    st = cw_buf_reserve(&out->in, in->in.len ? in->in.len : 1);
    if (st != CW_OK)
        goto err_unlock;
    if (in->in.len)
        memcpy(out->in.data, in->in.data, in->in.len);
    out->in.len = in->in.len;
    /* Its own capacity: once allocated, a recycled handle reuses it
     * (with the length as capacity, every forward called realloc()). */
    st = cw_grow(&out->desc_copy, &out->desc_copy_cap,
                 in->use.srv.raw_desc_len ? in->use.srv.raw_desc_len : 1);
    if (st != CW_OK)
        goto err_unlock;
    memcpy(out->desc_copy, in->use.srv.raw_desc, in->use.srv.raw_desc_len);
    out->use.relay.desc_len = in->use.srv.raw_desc_len;
    out->use.relay.ndesc = in->use.srv.raw_ndesc;
    if (in->use.srv.canceled) {
        st = CW_CANCELED;
        goto err_unlock;
    }
    if (xctx) {
        /* No reference across contexts: either side unlinks itself when
         * it is reset (cw_relay_unlink_xctx). */
        cw_mutex_lock(&cw_relay_link_lock);
        cw_h_flag_set(out, CW_HFL_XCTX);
        cw_h_flag_set(in, CW_HFL_XCTX);
        out->use.relay.in = in;
        in->use.relay.out = out;
        cw_mutex_unlock(&cw_relay_link_lock);
    } else {
        atomic_fetch_add(&in->refs, 1);
        out->use.relay.in = in;
        in->use.relay.out = out;
    }
    cw_lock_give(&ctx->lock);
    *out_p = out;
    return CW_OK;

err_unlock:
    cw_lock_give(&ctx->lock);
    cw_handle_release(out);
    return st;
}

cw_status_t cw_relay_set_resume(cw_handle_t *out)
{
    cw_status_t st = CW_INVALID_ARG;

    if (out == NULL || out->use.role == CW_H_SERVER)
        return CW_INVALID_ARG;
    cw_lock_take(&out->ctx->lock);
    if (out->use.relay.in != NULL && (out->use.rflags & CW_HF_IDEMPOTENT) &&
        out->use.state == CW_H_IDLE) {
        out->use.rflags |= CW_HF_RESUME;
        st = CW_OK;
    }
    cw_lock_give(&out->ctx->lock);
    return st;
}

cw_status_t cw_relay_fail(cw_handle_t *out, cw_status_t status)
{
    if (out == NULL || out->use.role == CW_H_SERVER ||
        out->use.relay.in == NULL ||
        (status != CW_DISCONNECTED && status != CW_UNREACHABLE &&
         status != CW_IO))
        return CW_INVALID_ARG;
    cw_lock_take(&out->ctx->lock);
    if (out->use.state == CW_H_ACTIVE) {
        cw_h_fail(out, status);
        cw_h_check(out);
    }
    cw_lock_give(&out->ctx->lock);
    cw_ctx_wake(out->ctx);
    return CW_OK;
}

void cw_relay_unlink_xctx(cw_handle_t *h)
{
    cw_mutex_lock(&cw_relay_link_lock);
    if (h->use.role == CW_H_SERVER) {
        if (h->use.relay.out != NULL && h->use.relay.out->use.relay.in == h)
            h->use.relay.out->use.relay.in = NULL;
    } else if (h->use.relay.in != NULL && h->use.relay.in->use.relay.out == h) {
        h->use.relay.in->use.relay.out = NULL;
    }
    h->use.relay.in = h->use.relay.out = NULL;
    cw_h_flag_clear(h, CW_HFL_XCTX);
    cw_mutex_unlock(&cw_relay_link_lock);
}

bool cw_relay_in_canceled_xctx(cw_handle_t *out)
{
    bool canceled;

    cw_mutex_lock(&cw_relay_link_lock);
    canceled = out->use.relay.in != NULL && out->use.relay.in->use.srv.canceled;
    cw_mutex_unlock(&cw_relay_link_lock);
    return canceled;
}

void cw_h_set_canceled(cw_handle_t *in, bool canceled)
{
    if (!cw_h_flag(in, CW_HFL_XCTX)) {
        in->use.srv.canceled = canceled;
        return;
    }
    cw_mutex_lock(&cw_relay_link_lock);
    in->use.srv.canceled = canceled;
    cw_mutex_unlock(&cw_relay_link_lock);
}

static void relay_xcancel_run(struct cw_cqe *e)
{
    cw_handle_t *out = nau_container_of(e, cw_handle_t, xcancel_cqe);

    (void)cw_cancel(out); /* takes the other context's lock */
    cw_handle_release(out);
}

void cw_relay_cancel_xctx(cw_handle_t *in)
{
    cw_handle_t *out;
    int refs;

    cw_mutex_lock(&cw_relay_link_lock);
    if (in->use.srv.canceled) {
        cw_mutex_unlock(&cw_relay_link_lock);
        return; /* a repeated cancel */
    }
    in->use.srv.canceled = true;
    out = in->use.relay.out;
    /* Keep the outgoing handle alive past the link lock unless it is
     * already on its way back to its pool. */
    if (out != NULL) {
        refs = atomic_load(&out->refs);
        while (refs > 0 &&
               !atomic_compare_exchange_weak(&out->refs, &refs, refs + 1))
            ;
        if (refs == 0)
            out = NULL;
    }
    cw_mutex_unlock(&cw_relay_link_lock);
    if (out == NULL)
        return;
    /* Its context's lock cannot be taken under ours: cancel it from our
     * cw_trigger, where no lock is held. */
    out->xcancel_cqe.fn = relay_xcancel_run;
    cw_cq_push(in->ctx, &out->xcancel_cqe);
}

cw_status_t cw_relay_desc_replace(cw_handle_t *out, unsigned i, const void *p,
                                  size_t len)
{
    const uint8_t *raw;
    size_t raw_len, before, after, nlen;
    uint8_t *n;
    cw_status_t st;

    if (out == NULL || out->use.role == CW_H_SERVER ||
        out->use.relay.in == NULL || p == NULL)
        return CW_INVALID_ARG;
    if (cw_wire_desc_check(p, len, 1) != CW_OK)
        return CW_INVALID_ARG;
    st = cw_wire_desc_get(out->desc_copy, out->use.relay.desc_len,
                          out->use.relay.ndesc, i, NULL, &raw, &raw_len);
    if (st != CW_OK)
        return st;
    before = (size_t)(raw - out->desc_copy);
    after = out->use.relay.desc_len - before - raw_len;
    nlen = before + len + after;
    n = malloc(nlen);
    if (n == NULL)
        return CW_NOMEM;
    memcpy(n, out->desc_copy, before);
    memcpy(n + before, p, len);
    memcpy(n + before + len, raw + raw_len, after);
    free(out->desc_copy);
    out->desc_copy = n;
    out->use.relay.desc_len = nlen;
    out->desc_copy_cap = nlen;
    return CW_OK;
}

cw_status_t cw_relay_respond(cw_handle_t *in, cw_handle_t *out,
                             cw_status_t status, cw_respond_cb_t cb, void *arg)
{
    cw_context_t *ctx;
    cw_status_t st = CW_OK;
    bool done;

    if (in == NULL || in->use.role == CW_H_CLIENT || out == NULL ||
        out->use.role == CW_H_SERVER)
        return CW_INVALID_ARG;
    if (in->use.rflags & CW_HF_ONE_WAY)
        return CW_OK; /* nobody waits for an answer */
    /* @p out may belong to another context, whose thread can still be
     * finishing it (a lingering handle's last acknowledgement ends its
     * linger): read its state under that context's lock.  Its response
     * does not change once it has completed, and the caller's reference
     * keeps it. */
    ctx = in->ctx;
    if (out->ctx != ctx) {
        cw_lock_take(&out->ctx->lock);
        done = out->use.state == CW_H_DONE && !cw_h_busy(out);
        cw_lock_give(&out->ctx->lock);
        cw_lock_take(&ctx->lock);
    } else {
        cw_lock_take(&ctx->lock);
        done = out->use.state == CW_H_DONE && !cw_h_busy(out);
    }
    cw_buf_reset(&in->out);
    if (done && out->out.data != NULL) {
        st = cw_buf_reserve(&in->out, out->out.len ? out->out.len : 1);
        if (st == CW_OK) {
            memcpy(in->out.data, out->out.data, out->out.len);
            in->out.len = out->out.len;
            if (out->out.desc_len > 0) {
                /* The outgoing handle keeps its response until released. */
                in->use.srv.resp_desc = out->out.desc;
                in->use.srv.resp_desc_len = out->out.desc_len;
                in->use.srv.resp_ndesc = out->out.ndesc;
            }
        }
    }
    if (st == CW_OK)
        st = cw_respond_locked(in, status, cb, arg);
    cw_lock_give(&ctx->lock);
    cw_ctx_wake(ctx);
    return st;
}
