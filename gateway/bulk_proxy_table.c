/*
 * Proxy tokens (design §4).  Each descriptor of a forwarded request is
 * replaced by 16 random bytes naming it in this table, together with the
 * permission, the length, an expiry (the request's deadline) and the one
 * peer (the next hop) allowed to use it.  Tokens are revoked when the
 * forwarded RPC completes.  Raw memory keys never leave the ingress side.
 */
#include "gw_bulk.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

static unsigned btok_bucket(const uint8_t *tok)
{
    /* The token is random: its first bytes are a fine hash. */
    return (unsigned)(tok[0] | (tok[1] << 8)) % GW_BTOK_BUCKETS;
}

static cw_status_t btok_random(uint8_t *tok)
{
    size_t got = 0;

    while (got < CW_BPROXY_TOKEN_LEN) {
        ssize_t n = getrandom(tok + got, CW_BPROXY_TOKEN_LEN - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            CW_ERROR(GW_LOG, "getrandom: %s", strerror(errno));
            return CW_IO;
        }
        got += (size_t)n;
    }
    return CW_OK;
}

void gw_btok_unref(struct gw_btok *t)
{
    if (t == NULL || --t->refs > 0)
        return;
    cw_bulk_free(t->bulk);
    cw_addr_free(t->peer);
    cw_addr_free(t->hop);
    free(t);
}

static void btok_unlink(struct gw_bulk *gb, struct gw_btok *t)
{
    struct gw_btok **pp = &gb->btoks[btok_bucket(t->tok)];

    for (; *pp != NULL; pp = &(*pp)->hnext)
        if (*pp == t) {
            *pp = t->hnext;
            return;
        }
}

static cw_status_t btok_issue(struct gw_bulk *gb, cw_handle_t *in, unsigned i,
                              cw_addr_t *next, const char *bound,
                              struct gw_btok **t_p)
{
    struct gw_btok *t;
    unsigned b;
    cw_status_t st;

    t = calloc(1, sizeof(*t));
    if (t == NULL)
        return CW_NOMEM;
    st = btok_random(t->tok);
    if (st != CW_OK)
        goto err;
    st = cw_bproxy_desc_bulk(in, i, &t->bulk);
    if (st != CW_OK) {
        CW_LOG_RL(CW_LOG_WARN, GW_LOG, "descriptor %u of a request: %s", i,
                  cw_status_str(st));
        goto err;
    }
    st = cw_addr_dup(cw_handle_source(in), &t->peer);
    if (st == CW_OK)
        st = cw_addr_dup(next, &t->hop);
    if (st != CW_OK)
        goto err;
    t->sh = &gb->gw->shards[0];
    for (unsigned k = 1; k < gb->gw->nshards; k++)
        if (gb->gw->shards[k].ctx == cw_handle_context(in))
            t->sh = &gb->gw->shards[k];
    snprintf(t->bound, sizeof(t->bound), "%s", bound);
    t->perm = cw_bulk_perm(t->bulk);
    t->total = cw_bulk_size(t->bulk);
    t->expiry_ns = cw_now_ns() + cw_handle_remaining_ms(in) * 1000000ull;
    t->refs = 1;
    b = btok_bucket(t->tok);
    t->hnext = gb->btoks[b];
    gb->btoks[b] = t;
    gb->issued++;
    *t_p = t;
    return CW_OK;

err:
    cw_bulk_free(t->bulk);
    cw_addr_free(t->peer);
    free(t);
    return st;
}

cw_status_t gw_bulk_rewrite(struct gw *gw, struct gw_fwd *f, cw_handle_t *in,
                            struct gw_net *egress, cw_addr_t *next)
{
    struct gw_bulk *gb = gw->bulk;
    unsigned n = cw_relay_desc_count(in);
    char bound[CW_ADDR_STR_MAX];
    uint8_t desc[64];
    uint64_t now;
    cw_status_t st;

    if (n == 0) /* most requests: no clock read */
        return CW_OK;
    if (gb == NULL)
        return CW_UNSUPPORTED;
    now = cw_now_ns();
    /* Bound to the next hop as its plugin writes it, which is how the
     * delegation's source will read, whatever name the route used. */
    st = cw_addr_to_canonical(next, bound, sizeof(bound));
    if (st != CW_OK)
        return st;
    for (unsigned i = 0; i < n; i++) {
        struct gw_btok *t;
        size_t len;

        st = btok_issue(gb, in, i, next, bound, &t);
        if (st != CW_OK)
            goto err;
        t->fnext = f->btoks;
        f->btoks = t;
        st = cw_bproxy_desc_encode(
            egress->net, t->tok, t->perm, t->total,
            t->expiry_ns > now ? (t->expiry_ns - now) / 1000000u : 0, desc,
            sizeof(desc), &len);
        if (st == CW_OK)
            st = cw_relay_desc_replace(f->out, i, desc, len);
        if (st != CW_OK)
            goto err;
    }
    return CW_OK;

err:
    gw_bulk_revoke(gw, f);
    return st;
}

void gw_bulk_revoke(struct gw *gw, struct gw_fwd *f)
{
    struct gw_bulk *gb = gw->bulk;

    if (gb == NULL)
        return;
    while (f->btoks != NULL) {
        struct gw_btok *t = f->btoks;
        f->btoks = t->fnext;
        t->revoked = true;
        btok_unlink(gb, t);
        gb->revoked++;
        gw_pipe_revoke(gb, t);
        gw_btok_unref(t);
    }
}

cw_status_t gw_btok_check(struct gw_bulk *gb, const struct cw_bproxy_req *r,
                          cw_handle_t *h, struct gw_btok **tok_p)
{
    char src[CW_ADDR_STR_MAX], member[CW_ADDR_STR_MAX];
    struct gw_btok *t;
    uint32_t need =
        r->dir == CW_BULK_PULL ? CW_BULK_READ_ONLY : CW_BULK_WRITE_ONLY;

    src[0] = '\0';
    for (t = gb->btoks[btok_bucket(r->token)]; t != NULL; t = t->hnext)
        if (memcmp(t->tok, r->token, CW_BPROXY_TOKEN_LEN) == 0)
            break;
    /* A next hop that spreads its callers over several contexts serves
     * this gateway's requests on the member it pinned it to, and that
     * member is where the delegation comes from. */
    if (t == NULL || t->revoked ||
        cw_addr_to_string(cw_handle_source(h), src, sizeof(src)) != CW_OK ||
        (strcmp(src, t->bound) != 0 &&
         (cw_relay_hop_member(t->hop, member, sizeof(member)) != CW_OK ||
          strcmp(src, member) != 0))) {
        /* Unknown, revoked, or presented by another peer than the one it
         * was issued to: the same answer for all, nothing to learn. */
        gb->rej_bad_handle++;
        CW_LOG_RL(CW_LOG_WARN, GW_LOG,
                  "bulk delegation with an invalid "
                  "token (peer %s)",
                  src[0] ? src : "?");
        return CW_BAD_HANDLE;
    }
    if (cw_now_ns() >= t->expiry_ns) {
        gb->rej_expired++;
        return CW_EXPIRED;
    }
    if (!(t->perm & need)) {
        gb->rej_permission++;
        return CW_PERMISSION;
    }
    if (r->off > t->total || r->len > t->total - r->off) {
        gb->rej_range++;
        return CW_RANGE;
    }
    t->refs++;
    *tok_p = t;
    return CW_OK;
}

void gw_btok_fini(struct gw_bulk *gb)
{
    for (unsigned b = 0; b < GW_BTOK_BUCKETS; b++)
        while (gb->btoks[b] != NULL) {
            struct gw_btok *t = gb->btoks[b];
            gb->btoks[b] = t->hnext;
            t->revoked = true;
            gw_btok_unref(t);
        }
}
