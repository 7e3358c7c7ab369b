/*
 * RPC-level addresses: plain URIs, proxied "target@gw[@gw...]" (sent to the
 * first gateway with the rest of the path as routing destination) and
 * "svc:name@gw".  A plain URI whose plugin+protocol has no open network
 * gets a client network opened for it.
 */
#include "rpc_priv.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static cw_status_t addr_new(cw_context_t *ctx, cw_network_t *net,
                            cw_na_addr_t *na, const char *route,
                            const char *str, cw_addr_t **addr_p)
{
    cw_addr_t *a = calloc(1, sizeof(*a));

    if (a == NULL)
        return CW_NOMEM;
    a->ctx = ctx;
    atomic_init(&a->refs, 1);
    a->net = net;
    a->na = na;
    if (route && (a->route = strdup(route)) == NULL)
        goto err_free;
    if (str && (a->str = strdup(str)) == NULL)
        goto err_free;
    a->self = cw_na_addr_cmp(net->na, na, net->self);
    cw_net_ref(net);
    *addr_p = a;
    return CW_OK;

err_free:
    free(a->route);
    free(a);
    return CW_NOMEM;
}

static cw_status_t addr_lookup(cw_context_t *ctx, const char *addr, bool routed,
                               cw_addr_t **addr_p);

/* A context's resolver, shared by the lookups running it: the last of them
 * or the context releases it (refs under ctx->lock). */
struct cw_resolver {
    cw_resolver_t fn;
    void (*release)(void *arg);
    void *arg;
    unsigned refs;
};

static void resolver_unref(cw_context_t *ctx, struct cw_resolver *r)
{
    bool last;

    cw_lock_take(&ctx->lock);
    last = --r->refs == 0;
    cw_lock_give(&ctx->lock);
    if (!last)
        return;
    if (r->release)
        r->release(r->arg);
    free(r);
}

cw_status_t cw_context_set_resolver(cw_context_t *ctx, cw_resolver_t fn,
                                    void (*release)(void *arg), void *arg)
{
    struct cw_resolver *r = NULL, *old;

    if (ctx == NULL)
        return CW_INVALID_ARG;
    if (fn) {
        r = calloc(1, sizeof(*r));
        if (r == NULL)
            return CW_NOMEM;
        r->fn = fn;
        r->release = release;
        r->arg = arg;
        r->refs = 1; /* the context's */
    }
    cw_lock_take(&ctx->lock);
    old = ctx->resolver;
    ctx->resolver = r;
    cw_lock_give(&ctx->lock);
    if (old)
        resolver_unref(ctx, old);
    return CW_OK;
}

void cw_resolver_fini(cw_context_t *ctx)
{
    if (ctx->resolver)
        resolver_unref(ctx, ctx->resolver);
    ctx->resolver = NULL;
}

/* Ask the resolver, if there is one, about plain address @p addr. */
static cw_status_t addr_resolve(cw_context_t *ctx, const char *addr, char *gw,
                                size_t gw_len, bool *direct_p)
{
    struct cw_resolver *r;
    cw_status_t st;

    cw_lock_take(&ctx->lock);
    r = ctx->resolver;
    if (r)
        r->refs++;
    cw_lock_give(&ctx->lock);
    *direct_p = true;
    if (r == NULL)
        return CW_OK;
    st = r->fn(r->arg, addr, gw, gw_len, direct_p);
    resolver_unref(ctx, r);
    if (st == CW_OK && !*direct_p && memchr(gw, '\0', gw_len) == NULL)
        st = CW_OVERFLOW; /* not terminated: the resolver's bug */
    return st;
}

/* A plain address: through the gateway the resolver names; through the
 * default gateway when no network can reach it. */
static cw_status_t addr_lookup_plain(cw_context_t *ctx, const char *addr,
                                     cw_addr_t **addr_p)
{
    char gw[CW_URI_MAX];
    char proxied[CW_ADDR_STR_MAX];
    bool direct;
    cw_status_t st;

    st = addr_resolve(ctx, addr, gw, sizeof(gw), &direct);
    if (st != CW_OK)
        return st;
    if (!direct) {
        snprintf(proxied, sizeof(proxied), "%s@%s", addr, gw);
        st = addr_lookup(ctx, proxied, true, addr_p);
        if (st == CW_OK)
            (*addr_p)->via_routes = true;
        return st;
    }
    st = addr_lookup(ctx, addr, true, addr_p);
    if (st != CW_OK && ctx->default_gateway &&
        (st == CW_NOENT || st == CW_UNSUPPORTED || st == CW_UNREACHABLE)) {
        CW_INFO("core",
                "%s: not reachable directly (%s); trying the default "
                "gateway %s",
                addr, cw_status_str(st), ctx->default_gateway);
        snprintf(proxied, sizeof(proxied), "%s@%s", addr, ctx->default_gateway);
        st = addr_lookup(ctx, proxied, true, addr_p);
    }
    return st;
}

cw_status_t cw_addr_lookup(cw_context_t *ctx, const char *addr,
                           cw_addr_t **addr_p)
{
    return addr_lookup(ctx, addr, false, addr_p);
}

cw_status_t cw_addr_reroute(cw_addr_t *addr, cw_addr_t **addr_p)
{
    cw_context_t *ctx = addr->ctx;
    cw_status_t st = CW_NOENT;

    CW_LOCK_ASSERT_FREE(&ctx->lock);
    /* Only a plain address the resolver sent through a gateway. */
    if (!addr->via_routes || addr->route == NULL ||
        strchr(addr->route, '@') != NULL)
        return CW_NOENT;
    /* Equal routes take turns: a few lookups find another gateway. */
    for (unsigned i = 0; i < 4; i++) {
        cw_addr_t *other;
        bool same;

        st = addr_lookup_plain(ctx, addr->route, &other);
        if (st != CW_OK)
            return st;
        cw_lock_take(&ctx->lock);
        same = other->net == addr->net &&
               cw_na_addr_cmp(addr->net->na, other->na, addr->na);
        cw_lock_give(&ctx->lock);
        if (!same) {
            *addr_p = other;
            return CW_OK;
        }
        cw_addr_free(other);
        st = CW_NOENT;
    }
    return st;
}

static cw_status_t addr_lookup(cw_context_t *ctx, const char *addr, bool routed,
                               cw_addr_t **addr_p)
{
    struct cw_addr_path path;
    struct cw_uri hop;
    char err[128];
    char route[CW_ADDR_STR_MAX];
    char uri[CW_URI_MAX];
    bool has_route = false;
    cw_network_t *net;
    cw_na_addr_t *na;
    cw_status_t st;

    if (ctx == NULL || addr == NULL || addr_p == NULL)
        return CW_INVALID_ARG;
    st = cw_addr_path_parse(addr, &path, err, sizeof(err));
    if (st != CW_OK) {
        CW_ERROR("core", "bad address \"%s\": %s", addr, err);
        return st;
    }
    if (path.nhops == 0 && !path.is_service && !routed)
        return addr_lookup_plain(ctx, addr, addr_p);
    if (path.nhops > 0) {
        hop = path.hops[0];
        /* The remaining path (without the first gateway) travels in the
         * header as the routing destination. */
        memmove(&path.hops[0], &path.hops[1],
                (path.nhops - 1) * sizeof(path.hops[0]));
        path.nhops--;
        st = cw_addr_path_format(&path, route, sizeof(route));
        if (st != CW_OK)
            return st;
        if (strlen(route) > UINT16_MAX)
            return CW_OVERFLOW;
        has_route = true;
    } else {
        hop = path.target;
    }
    st = cw_uri_format(&hop, uri, sizeof(uri));
    if (st != CW_OK)
        return st;
    cw_lock_take(&ctx->lock);
    net = cw_net_find(ctx, hop.plugin, hop.protocol);
    if (net == NULL) {
        char any[CW_URI_MAX];
        snprintf(any, sizeof(any), "%s%s%s://", hop.plugin,
                 hop.protocol[0] ? "+" : "", hop.protocol);
        st = cw_network_open_locked(ctx, any, 0, &net);
        if (st != CW_OK)
            goto out;
    }
    st = cw_na_addr_lookup(net->na, uri, &na);
    if (st != CW_OK) {
        /* The plugin has said why. */
        CW_DEBUG("core", "cannot resolve %s: %s", uri, cw_status_str(st));
        goto out;
    }
    st = addr_new(ctx, net, na, has_route ? route : NULL, addr, addr_p);
    if (st != CW_OK)
        cw_na_addr_free(net->na, na);
out:
    cw_lock_give(&ctx->lock);
    return st;
}

cw_status_t cw_network_self(cw_network_t *net, cw_addr_t **addr_p)
{
    cw_context_t *ctx;
    cw_na_addr_t *na;
    cw_status_t st;

    if (net == NULL || addr_p == NULL)
        return CW_INVALID_ARG;
    ctx = net->ctx;
    cw_lock_take(&ctx->lock);
    if (net->closed) {
        cw_lock_give(&ctx->lock);
        return CW_DISCONNECTED; /* cw_network_close */
    }
    st = cw_na_addr_dup(net->na, net->self, &na);
    if (st == CW_OK) {
        st = addr_new(ctx, net, na, NULL, net->uri, addr_p);
        if (st != CW_OK)
            cw_na_addr_free(net->na, na);
    }
    cw_lock_give(&ctx->lock);
    return st;
}

cw_status_t cw_addr_dup_locked(cw_addr_t *addr, cw_addr_t **addr_p)
{
    cw_na_addr_t *na;
    cw_status_t st;

    CW_LOCK_ASSERT_HELD(&addr->ctx->lock);
    if (!addr->embedded) {
        atomic_fetch_add(&addr->refs, 1);
        *addr_p = addr;
        return CW_OK;
    }
    /* A handle's source address lives in the handle: copy it out. */
    st = cw_na_addr_dup(addr->net->na, addr->na, &na);
    if (st == CW_OK) {
        st = addr_new(addr->ctx, addr->net, na, NULL, NULL, addr_p);
        if (st != CW_OK)
            cw_na_addr_free(addr->net->na, na);
    }
    return st;
}

cw_status_t cw_addr_dup(cw_addr_t *addr, cw_addr_t **addr_p)
{
    cw_status_t st;

    if (addr == NULL || addr_p == NULL)
        return CW_INVALID_ARG;
    if (!addr->embedded) {
        atomic_fetch_add(&addr->refs, 1);
        *addr_p = addr;
        return CW_OK;
    }
    cw_lock_take(&addr->ctx->lock);
    st = cw_addr_dup_locked(addr, addr_p);
    cw_lock_give(&addr->ctx->lock);
    return st;
}

static void addr_destroy_locked(cw_addr_t *addr)
{
    cw_na_addr_free(addr->net->na, addr->na);
    cw_net_unref_locked(addr->net);
    free(addr->route);
    free(addr->str);
    free(addr);
}

void cw_addr_unref_locked(cw_addr_t *addr)
{
    if (addr == NULL || addr->embedded)
        return;
    CW_LOCK_ASSERT_HELD(&addr->ctx->lock);
    if (atomic_fetch_sub(&addr->refs, 1) == 1)
        addr_destroy_locked(addr);
}

void cw_addr_free(cw_addr_t *addr)
{
    cw_context_t *ctx;

    if (addr == NULL || addr->embedded)
        return;
    CW_LOCK_ASSERT_FREE(&addr->ctx->lock);
    if (atomic_fetch_sub(&addr->refs, 1) != 1)
        return;
    ctx = addr->ctx;
    cw_lock_take(&ctx->lock);
    addr_destroy_locked(addr);
    cw_lock_give(&ctx->lock);
}

/* The plugin's string of the (first hop's) NA address. */
static cw_status_t addr_na_string(const cw_addr_t *addr, char *buf, size_t len)
{
    cw_status_t st;

    /* Written in place: the plugin checks the room left after the prefix
     * and leaves the string NUL-terminated when it fits. */
    cw_lock_take(&addr->ctx->lock);
    st = cw_na_addr_to_string(addr->net->na, addr->na, buf, len);
    cw_lock_give(&addr->ctx->lock);
    if (st != CW_OK)
        buf[0] = '\0';
    return st;
}

cw_status_t cw_addr_to_string(const cw_addr_t *addr, char *buf, size_t len)
{
    if (addr == NULL || buf == NULL || len == 0)
        return CW_INVALID_ARG;
    if (addr->str) {
        size_t sl = strlen(addr->str);
        if (sl >= len)
            return CW_OVERFLOW;
        memcpy(buf, addr->str, sl + 1);
        return CW_OK;
    }
    return addr_na_string(addr, buf, len);
}

cw_status_t cw_addr_to_canonical(const cw_addr_t *addr, char *buf, size_t len)
{
    if (addr == NULL || buf == NULL || len == 0 || addr->route != NULL)
        return CW_INVALID_ARG;
    return addr_na_string(addr, buf, len);
}

bool cw_addr_cmp(const cw_addr_t *a, const cw_addr_t *b)
{
    bool same;

    if (a == NULL || b == NULL)
        return false;
    if (a == b)
        return true;
    if (a->ctx != b->ctx || a->net != b->net ||
        (a->route == NULL) != (b->route == NULL) ||
        (a->route != NULL && strcmp(a->route, b->route) != 0))
        return false;
    cw_lock_take(&a->ctx->lock);
    same = cw_na_addr_cmp(a->net->na, a->na, b->na);
    cw_lock_give(&a->ctx->lock);
    return same;
}

bool cw_addr_is_self(const cw_addr_t *addr)
{
    return addr != NULL && addr->self && addr->route == NULL;
}

cw_network_t *cw_addr_network(const cw_addr_t *addr)
{
    if (addr == NULL || cw_addr_is_self(addr))
        return NULL;
    return addr->net;
}

size_t cw_addr_eager_limit(const cw_addr_t *addr)
{
    if (addr == NULL || cw_addr_is_self(addr))
        return 0;
    return addr->net->caps.max_unexpected_size;
}
