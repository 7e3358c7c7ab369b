/*
 * RPC registration, the client handle made for an RPC (cw_handle_create),
 * and what both roles share to build and take in messages: overflow checks
 * and pulls, and message assembly (header, routing destination, descriptor
 * section, payload or overflow descriptor).
 */
#include "rpc_priv.h"

#include "nau_hash.h"

#include <stdlib.h>
#include <string.h>

/* FNV-1a, 64 bit: stable across builds, hosts and endianness (an RPC's
 * identity on the wire, the same in every process). */
cw_rpc_id_t cw_rpc_id(const char *name)
{
    return name == NULL ? 0 : nau_fnv1a64(name, strlen(name));
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
    cw_lock_take(&ctx->lock);
    c = cw_rpc_class_find(ctx, id);
    if (c != NULL) {
        if (strcmp(c->name, name) == 0)
            CW_ERROR("core", "RPC \"%s\" is already registered", name);
        else
            CW_ERROR("core",
                     "RPC \"%s\" hashes to the id of \"%s\" (%016llx); "
                     "rename one of them",
                     name, c->name, (unsigned long long)id);
        cw_lock_give(&ctx->lock);
        return CW_EXIST;
    }
    c = calloc(1, sizeof(*c) + n + 1);
    if (c == NULL) {
        cw_lock_give(&ctx->lock);
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
    cw_lock_give(&ctx->lock);
    if (id_p)
        *id_p = id;
    return CW_OK;
}

cw_status_t cw_rpc_deregister(cw_context_t *ctx, cw_rpc_id_t id)
{
    struct cw_rpc_class **pp;

    if (ctx == NULL)
        return CW_INVALID_ARG;
    cw_lock_take(&ctx->lock);
    for (pp = &ctx->rpcs[id % CW_RPC_BUCKETS]; *pp; pp = &(*pp)->next) {
        if ((*pp)->id == id) {
            struct cw_rpc_class *c = *pp;
            *pp = c->next;
            free(c);
            cw_lock_give(&ctx->lock);
            return CW_OK;
        }
    }
    cw_lock_give(&ctx->lock);
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

/* A client use of @p h: a call of RPC @p id to @p ref (a reference the
 * handle takes over). */
static void client_init(cw_handle_t *h, cw_addr_t *ref, cw_rpc_id_t id)
{
    struct cw_rpc_class *c = cw_rpc_class_find(h->ctx, id);

    h->use.cli.addr = ref;
    h->use.net = ref->net;
    h->use.id = id;
    if (c != NULL && c->opts.one_way)
        h->use.rflags = CW_HF_ONE_WAY;
    h->use.cli.cls_timeout_ms = c ? c->opts.timeout_ms : 0;
}

cw_status_t cw_handle_create_locked(cw_context_t *ctx, cw_addr_t *dest,
                                    cw_rpc_id_t id, cw_handle_t **h_p)
{
    cw_handle_t *h;
    cw_addr_t *ref;
    cw_status_t st;

    CW_LOCK_ASSERT_HELD(&ctx->lock);
    st = cw_addr_dup_locked(dest, &ref);
    if (st != CW_OK)
        return st;
    if (ref->net->closed) {
        cw_addr_unref_locked(ref);
        return CW_DISCONNECTED; /* cw_network_close */
    }
    h = cw_handle_alloc(ctx, CW_H_CLIENT);
    if (h == NULL) {
        cw_addr_unref_locked(ref);
        return CW_NOMEM;
    }
    client_init(h, ref, id);
    *h_p = h;
    return CW_OK;
}

cw_status_t cw_handle_create(cw_context_t *ctx, cw_addr_t *dest, cw_rpc_id_t id,
                             cw_handle_t **h_p)
{
    cw_status_t st;

    if (ctx == NULL || dest == NULL || h_p == NULL || dest->ctx != ctx)
        return CW_INVALID_ARG;
    cw_lock_take(&ctx->lock);
    st = cw_handle_create_locked(ctx, dest, id, h_p);
    cw_lock_give(&ctx->lock);
    return st;
}

cw_status_t cw_handle_reset(cw_handle_t *h, cw_addr_t *dest, cw_rpc_id_t id)
{
    cw_context_t *ctx;
    cw_addr_t *ref = NULL;
    cw_status_t st;

    if (h == NULL || h->use.role == CW_H_SERVER ||
        (dest != NULL && dest->ctx != h->ctx))
        return CW_INVALID_ARG;
    ctx = h->ctx;
    cw_lock_take(&ctx->lock);
    /* A gateway's relayed request is the core's own, and one whose
     * forward has not ended still has operations on its buffers. */
    if (h->use.relay.in != NULL || cw_h_flag(h, CW_HFL_XCTX)) {
        st = CW_INVALID_ARG;
        goto out;
    }
    if (cw_h_busy(h)) {
        st = CW_BUSY;
        goto out;
    }
    if (dest == NULL)
        dest = h->use.cli.addr;
    if (dest->net->closed) {
        st = CW_DISCONNECTED; /* cw_network_close */
        goto out;
    }
    if (dest != h->use.cli.addr) {
        st = cw_addr_dup_locked(dest, &ref);
        if (st != CW_OK)
            goto out;
    } else {
        /* The same target: the handle's reference is carried over. */
        ref = h->use.cli.addr;
        h->use.cli.addr = NULL;
    }
    cw_h_clear_locked(h);
    h->use.role = CW_H_CLIENT;
    client_init(h, ref, id);
out:
    cw_lock_give(&ctx->lock);
    return st;
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
    st = cw_bulk_from_desc(ctx, h->use.net, &d, &remote);
    if (st != CW_OK)
        return st;
    st = cw_bulk_create_locked(ctx, h->ovf_buf, m->hdr.payload_len,
                               CW_BULK_READ_WRITE, &local);
    if (st == CW_OK) {
        st = cw_bulk_start(ctx, CW_BULK_PULL, peer, remote, 0, local, 0,
                           m->hdr.payload_len, NULL, h, done, &h->use.bulk_op);
        cw_bulk_unref(local);
    }
    cw_bulk_unref(remote);
    if (st == CW_OK) {
        h->use.pending++;
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
    cw_network_t *net = h->use.net;
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
                                   CW_BULK_READ_ONLY, &h->use.ovf_local);
        if (st == CW_OK)
            st = cw_bulk_desc_size(h->use.ovf_local, net, &ovf_len);
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
            st = cw_bulk_desc_write(h->use.ovf_local, net, p, ovf_len);
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
