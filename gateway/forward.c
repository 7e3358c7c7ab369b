/*
 * The forward hook: resolve the routing destination of an incoming request
 * (proxy path, service or plain address), check drain, bulk, ACL and
 * admission, and send it on to the next hop without decoding the payload.
 * The response is copied back unchanged when the outgoing RPC completes.
 */
#include "gw_int.h"
#include "gw_bulk.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

struct gw_target {
    char next[CW_URI_MAX];          /**< address the RPC is sent to */
    const char *dest;               /**< routing destination beyond it */
    const char *acl_dest;           /**< what the ACL is asked about */
    const char *acl_svc;            /**< ... parsed: a service's name */
    const struct cw_uri *acl_uri;   /**< ... or a plain address */
    char dest_buf[CW_ADDR_STR_MAX]; /**< dest when built for this request */
    struct cw_route_result res;
    struct gw_rent *rent; /**< the destination's cache entry */
    struct gw_net *egress;
    bool has_backend;
    struct cw_service_pick pick;
};

bool gw_status_is_transport(cw_status_t st)
{
    return st == CW_TIMEOUT || st == CW_DISCONNECTED || st == CW_UNREACHABLE ||
           st == CW_IO;
}

/* The next hop itself failed (not a deadline): its cached address is
 * forgotten, and an idempotent request may resume elsewhere. */
static bool gw_hop_failed(cw_status_t st)
{
    return st == CW_DISCONNECTED || st == CW_UNREACHABLE || st == CW_IO;
}

/* ---- address cache ------------------------------------------------------ */

/* A peer chooses the next hops of a route such as ofi+tcp://(any): the
 * cache keeps the limits.max_cached_addrs used last (per shard).  Dropping
 * an entry drops the cache's reference only; RPCs in flight to it hold
 * their own. */
static void gw_addr_ent_free(struct gw_shard *sh, struct gw_addr_ent *e)
{
    cw_htable_remove(&sh->addrs, &e->node);
    cw_addr_free(e->addr);
    free(e);
}

cw_status_t gw_addr_get(struct gw_shard *sh, const char *uri, uint64_t now,
                        cw_addr_t **addr_p)
{
    GW_ASSERT_LOCKED(sh->gw, &sh->addr_lock);
    /* Read on every worker while a reload may swap gw->cfg (under
     * gw->lock, which this path does not take): gw_set_config copies it. */
    unsigned max =
        atomic_load_explicit(&sh->gw->max_cached_addrs, memory_order_relaxed);
    size_t len = strlen(uri);
    struct cw_hnode *n = cw_htable_find_recent(&sh->addrs, uri, len, 2);
    uint64_t h = 0;
    struct gw_addr_ent *e;
    cw_status_t st;

    if (n == NULL) {
        h = cw_htable_hash(&sh->addrs, uri, len);
        n = cw_htable_find_hash(&sh->addrs, uri, len, h);
    }
    if (n != NULL) {
        e = CW_HNODE_ENTRY(n, struct gw_addr_ent, node);
        cw_htable_touch(&sh->addrs, n);
        e->last_ns = now;
        *addr_p = e->addr;
        return CW_OK;
    }
    e = malloc(sizeof(*e) + len + 1);
    if (e == NULL)
        return CW_NOMEM;
    memcpy(e->key, uri, len + 1);
    e->last_ns = now;
    st = cw_addr_lookup(sh->ctx, uri, &e->addr);
    if (st != CW_OK) {
        CW_LOG_RL(CW_LOG_WARN, GW_LOG, "cannot resolve next hop %s: %s", uri,
                  cw_status_str(st));
        free(e);
        return st;
    }
    if (cw_htable_insert_hash(&sh->addrs, &e->node, e->key, len, h) != CW_OK) {
        cw_addr_free(e->addr);
        free(e);
        return CW_NOMEM;
    }
    /* The new entry is the newest: the oldest go first. */
    while (max != 0 && cw_htable_count(&sh->addrs) > max) {
        n = cw_htable_oldest(&sh->addrs);
        gw_addr_ent_free(sh, CW_HNODE_ENTRY(n, struct gw_addr_ent, node));
        sh->addrs_evicted++;
    }
    *addr_p = e->addr;
    return CW_OK;
}

void gw_addr_forget(struct gw_shard *sh, const char *uri)
{
    struct cw_hnode *n;

    gw_alock(sh);
    n = cw_htable_find_str(&sh->addrs, uri);
    if (n != NULL)
        gw_addr_ent_free(sh, CW_HNODE_ENTRY(n, struct gw_addr_ent, node));
    gw_aunlock(sh);
}

void gw_addr_cache_fini(struct gw *gw)
{
    for (unsigned i = 0; i < gw->nshards; i++) {
        struct gw_shard *sh = &gw->shards[i];
        struct cw_hnode *n;
        gw_alock(sh);
        while ((n = cw_htable_oldest(&sh->addrs)) != NULL)
            gw_addr_ent_free(sh, CW_HNODE_ENTRY(n, struct gw_addr_ent, node));
        cw_htable_fini(&sh->addrs);
        gw_aunlock(sh);
    }
}

void gw_addr_cache_stats(struct gw *gw, uint64_t *count_p, uint64_t *evicted_p)
{
    uint64_t count = 0, evicted = 0;

    for (unsigned i = 0; i < gw->nshards; i++) {
        struct gw_shard *sh = &gw->shards[i];
        gw_alock(sh);
        count += cw_htable_count(&sh->addrs);
        evicted += sh->addrs_evicted;
        gw_aunlock(sh);
    }
    *count_p = count;
    *evicted_p = evicted;
}

void gw_addr_forget_all(struct gw *gw, const char *uri)
{
    for (unsigned k = 0; k < gw->nshards; k++)
        gw_addr_forget(&gw->shards[k], uri);
}

/* ---- per-route counters ------------------------------------------------- */

/* Counters per (route, next hop): looked up on every request, so hashed
 * rather than searched (a gateway may serve thousands of routes).  The key
 * is both strings, each with its terminator. */
static struct gw_route_stats *
gw_route_stats_find(struct gw *gw, const char *dest, const char *nexthop)
{
    size_t ld = strlen(dest) + 1, lh = strlen(nexthop) + 1;
    struct gw_route_stats *rs = NULL;
    struct cw_hnode *n;
    char kbuf[256], *key = kbuf;

    GW_ASSERT_LOCKED(gw, &gw->lock);
    /* Looked up in a buffer on the stack where it fits; kept on insert. */
    if (ld + lh > sizeof(kbuf) && (key = malloc(ld + lh)) == NULL)
        return NULL;
    memcpy(key, dest, ld);
    memcpy(key + ld, nexthop, lh);
    n = cw_htable_find(&gw->rstats, key, ld + lh);
    if (n != NULL) {
        if (key != kbuf)
            free(key);
        return CW_HNODE_ENTRY(n, struct gw_route_stats, node);
    }
    if (key == kbuf) {
        if ((key = malloc(ld + lh)) == NULL)
            return NULL;
        memcpy(key, kbuf, ld + lh);
    }
    rs = calloc(1, sizeof(*rs));
    if (rs == NULL)
        goto err_free_key;
    /* A cache line (or more) per worker: aligned, whole lines. */
    rs->per = aligned_alloc(_Alignof(struct gw_rs_ctr),
                            gw->nshards * sizeof(*rs->per));
    if (rs->per == NULL)
        goto err_free_rs;
    memset(rs->per, 0, gw->nshards * sizeof(*rs->per));
    rs->dest = key;
    rs->nexthop = key + ld;
    if (cw_htable_insert(&gw->rstats, &rs->node, key, ld + lh) != CW_OK)
        goto err_free_rs;
    /* The admin listing keeps first-seen order. */
    if (gw->routes_tail == NULL)
        gw->routes_tail = &gw->routes;
    *gw->routes_tail = rs;
    gw->routes_tail = &rs->next;
    return rs;

err_free_rs:
    free(rs->per);
    free(rs);
err_free_key:
    free(key);
    return NULL;
}

/* Shared by the workers: the index under gw->lock, taken only when a
 * destination's cache entry does not know its counters yet. */
struct gw_route_stats *gw_route_stats_get(struct gw *gw, const char *dest,
                                          const char *nexthop)
{
    struct gw_route_stats *rs;

    gw_lock(gw);
    rs = gw_route_stats_find(gw, dest, nexthop);
    gw_unlock(gw);
    return rs;
}

void gw_route_stats_fini(struct gw *gw)
{
    while (gw->routes != NULL) {
        struct gw_route_stats *rs = gw->routes;
        gw->routes = rs->next;
        cw_htable_remove(&gw->rstats, &rs->node);
        free(rs->dest); /* nexthop is in the same allocation */
        free(rs->per);
        free(rs);
    }
    gw->routes_tail = NULL;
    cw_htable_fini(&gw->rstats);
}

/* The counters of the route @p t takes: the destination's cache entry
 * remembers the last ones, found again by the identity of the route
 * table's strings (the entry does not outlive the table). */
static struct gw_route_stats *gw_target_stats(struct gw *gw,
                                              const struct gw_target *t)
{
    const char *dest = t->has_backend ? t->acl_dest : t->res.dest;
    const char *hop = t->res.direct ? t->res.network_name : t->res.gateway;
    struct gw_rent *e = t->rent;
    struct gw_route_stats *rs;

    if (e->rs != NULL && e->rs_dest == dest && e->rs_hop == hop)
        return e->rs;
    rs = gw_route_stats_get(gw, dest, hop);
    if (rs != NULL) {
        e->rs = rs;
        e->rs_dest = dest;
        e->rs_hop = hop;
    }
    return rs;
}

static void gw_hist_add(struct gw_rs_ctr *c, uint64_t ns)
{
    uint64_t us = ns / 1000;
    /* floor(log2(us)): bucket b holds [2^b, 2^(b+1)) us, the first one
     * also 0 and 1 us, the last one everything above. */
    unsigned b = us > 1 ? 63u - (unsigned)__builtin_clzll(us) : 0;

    if (b > GW_HIST_BUCKETS - 1)
        b = GW_HIST_BUCKETS - 1;
    GW_CTR_INC(c->hist[b]);
    GW_CTR_ADD(c->lat_sum_ns, ns);
    GW_CTR_INC(c->lat_n);
}

/* ---- resolution --------------------------------------------------------- */

static bool gw_is_self(struct gw *gw, const struct cw_uri *u)
{
    for (unsigned i = 0; i < gw->nnets; i++)
        if (cw_uri_equal(&gw->nets[i].parsed, u))
            return true;
    return false;
}

/* ---- parsed destinations ------------------------------------------------ */

/* Parsing a destination, stripping the hops that name this gateway and
 * formatting what is left are the same for every request to the same
 * destination, and cost more than the rest of the forward: they are done
 * once per destination string and kept until the networks or the
 * configuration change (gw_rcache_clear), or until the cache holds
 * limits.max_cached_dests newer ones (peers choose the strings).  The route
 * table is still asked on every request (health, load and round robin
 * change its answer). */
enum { GW_RK_HOPS, GW_RK_SERVICE, GW_RK_PLAIN };

void gw_rcache_clear(struct gw *gw)
{
    GW_ASSERT_WORKERS_LOCKED(gw);
    for (unsigned k = 0; k < gw->nshards; k++) {
        struct gw_shard *w = &gw->shards[k];
        struct cw_hnode *n;

        while ((n = cw_htable_oldest(&w->rcache)) != NULL) {
            cw_htable_remove(&w->rcache, n);
            free(CW_HNODE_ENTRY(n, struct gw_rent, node));
        }
        cw_htable_fini(&w->rcache);
    }
}

size_t gw_rcache_count(struct gw *gw)
{
    size_t n = 0;

    GW_ASSERT_WORKERS_LOCKED(gw);
    for (unsigned k = 0; k < gw->nshards; k++)
        n += cw_htable_count(&gw->shards[k].rcache);
    return n;
}

/* Parse @p route into a new entry; returns the status to answer with. */
static cw_status_t gw_rent_build(struct gw *gw, const char *route,
                                 struct gw_rent **e_p)
{
    struct cw_addr_path path;
    struct cw_uri next; /* the next hop parsed, unless a service's */
    char target[CW_URI_MAX], rest[CW_ADDR_STR_MAX], acl[CW_ADDR_STR_MAX];
    char err[128];
    struct gw_rent *e;
    size_t lk, lt = 0, lr = 0, la, ls = 0;
    uint8_t kind;
    char *p;
    cw_status_t st;

    if (strncmp(route, "svc:", 4) == 0 && strchr(route, '@') == NULL) {
        /* The last leg of "svc:name@gw": the service is ours to resolve
         * (cw_addr_path_parse wants a gateway after a service name). */
        size_t n = strlen(route + 4);
        memset(&path, 0, sizeof(path));
        if (n == 0 || n >= sizeof(path.service))
            return CW_INVALID_ARG;
        path.is_service = true;
        memcpy(path.service, route + 4, n + 1);
        st = CW_OK;
    } else {
        st = cw_addr_path_parse(route, &path, err, sizeof(err));
    }
    if (st != CW_OK) {
        CW_LOG_RL(CW_LOG_WARN, GW_LOG, "bad routing destination \"%s\": %s",
                  route, err);
        return CW_INVALID_ARG;
    }
    /* Hops naming this gateway itself are already crossed. */
    while (path.nhops > 0 && gw_is_self(gw, &path.hops[0])) {
        memmove(&path.hops[0], &path.hops[1],
                (path.nhops - 1) * sizeof(path.hops[0]));
        path.nhops--;
    }
    rest[0] = '\0';
    if (path.is_service)
        snprintf(acl, sizeof(acl), "svc:%s", path.service);
    else if (cw_uri_format(&path.target, acl, sizeof(acl)) != CW_OK)
        return CW_INVALID_ARG;

    if (path.nhops > 0) {
        /* An explicit next gateway: send it the rest of the path. */
        kind = GW_RK_HOPS;
        if (cw_uri_format(&path.hops[0], target, sizeof(target)) != CW_OK)
            return CW_INVALID_ARG;
        next = path.hops[0];
        memmove(&path.hops[0], &path.hops[1],
                (path.nhops - 1) * sizeof(path.hops[0]));
        path.nhops--;
        if (cw_addr_path_format(&path, rest, sizeof(rest)) != CW_OK)
            return CW_INVALID_ARG;
    } else if (path.is_service) {
        kind = GW_RK_SERVICE;
        target[0] = '\0';
    } else {
        kind = GW_RK_PLAIN;
        if (strlen(acl) >= sizeof(target))
            return CW_OVERFLOW;
        memcpy(target, acl, strlen(acl) + 1);
        next = path.target;
    }
    /* The target is kept parsed as it was (not parsed again from its
     * formatted text: an address formats back to one that parses the same,
     * which the address fuzzer checks). */

    lk = strlen(route) + 1;
    la = strlen(acl) + 1;
    if (kind != GW_RK_SERVICE)
        lt = strlen(target) + 1;
    if (kind == GW_RK_HOPS)
        lr = strlen(rest) + 1;
    if (kind == GW_RK_SERVICE)
        ls = strlen(path.service) + 1;
    e = malloc(sizeof(*e) + lk + la + lt + lr + ls);
    if (e == NULL)
        return CW_NOMEM;
    memset(e, 0, sizeof(*e));
    e->kind = kind;
    if (kind != GW_RK_SERVICE)
        e->target = next;
    p = e->key;
    memcpy(p, route, lk);
    p += lk;
    memcpy(p, acl, la);
    e->acl_dest = p;
    if (path.is_service)
        e->acl_svc = p + 4;
    else
        e->acl_uri = path.target;
    p += la;
    if (lt != 0) {
        memcpy(p, target, lt);
        e->target_s = p;
        p += lt;
    }
    e->rest = "";
    if (lr != 0) {
        memcpy(p, rest, lr);
        e->rest = p;
        p += lr;
    }
    if (ls != 0) {
        memcpy(p, path.service, ls);
        e->service = p;
    }
    *e_p = e;
    return CW_OK;
}

/* The parsed form of @p route, from the cache or parsed now.  It is the
 * newest entry afterwards: the bound (at least 16) drops older ones only,
 * so the two a resolution holds (a service and its backend) stay. */
static cw_status_t gw_rent_get(struct gw_shard *w, const char *route,
                               struct gw_rent **e_p)
{
    struct gw *gw = w->gw;
    unsigned max = gw->cfg->limits.max_cached_dests;
    size_t len = strlen(route);
    /* A service and its backend are the two newest after a resolution. */
    struct cw_hnode *n = cw_htable_find_recent(&w->rcache, route, len, 2);
    uint64_t h = 0;
    struct gw_rent *e;
    cw_status_t st;

    if (n == NULL) {
        h = cw_htable_hash(&w->rcache, route, len);
        n = cw_htable_find_hash(&w->rcache, route, len, h);
    }
    if (n != NULL) {
        cw_htable_touch(&w->rcache, n);
        *e_p = CW_HNODE_ENTRY(n, struct gw_rent, node);
        return CW_OK;
    }
    st = gw_rent_build(gw, route, &e);
    if (st != CW_OK)
        return st;
    if (cw_htable_insert_hash(&w->rcache, &e->node, e->key, len, h) != CW_OK) {
        free(e);
        return CW_NOMEM;
    }
    while (max != 0 && cw_htable_count(&w->rcache) > max) {
        n = cw_htable_oldest(&w->rcache);
        cw_htable_remove(&w->rcache, n);
        free(CW_HNODE_ENTRY(n, struct gw_rent, node));
        w->n.rcache_evicted++;
    }
    *e_p = e;
    return CW_OK;
}

/* Resolve the routing destination @p route into a next hop.  Returns the
 * status to answer the caller with when it cannot. */
static cw_status_t gw_resolve(struct gw_shard *w, const char *route,
                              const char *src, struct gw_target *t)
{
    struct gw *gw = w->gw;
    struct gw_rent *e, *be;
    struct cw_route_memo *memo;
    const struct cw_uri *target;
    const char *target_s;
    cw_status_t st;

    /* Entries stay valid until the next resolution: the cache drops its
     * oldest ones when it gets a new one (gw_rent_get). */
    st = gw_rent_get(w, route, &e);
    if (st != CW_OK)
        return st;
    t->rent = e;
    t->acl_dest = e->acl_dest;
    t->acl_svc = e->acl_svc;
    t->acl_uri = e->acl_svc ? NULL : &e->acl_uri;
    if (e->kind == GW_RK_SERVICE) {
        st = cw_route_table_service_pick(gw->table, e->service, src, &t->pick);
        if (st != CW_OK)
            return CW_NO_ROUTE;
        t->has_backend = true;
        /* The backend's address is parsed once too. */
        st = gw_rent_get(w, t->pick.address, &be);
        if (st != CW_OK)
            return st;
        if (be->kind != GW_RK_PLAIN)
            return CW_INVALID_ARG;
        target_s = be->target_s;
        target = &be->target;
        memo = &be->memo;
    } else {
        target_s = e->target_s;
        target = &e->target;
        memo = &e->memo;
    }
    size_t target_len = strlen(target_s);

    if (target_len >= sizeof(t->next))
        return CW_OVERFLOW;

    st = cw_route_table_lookup_memo(gw->table, target, memo, &t->res);
    if (st != CW_OK)
        return st == CW_INVALID_ARG ? CW_INVALID_ARG : CW_NO_ROUTE;
    if (t->res.direct) {
        memcpy(t->next, target_s, target_len + 1);
        t->dest = e->rest;
        t->egress = gw_net_by_name(gw, t->res.network_name);
        if (t->egress == NULL)
            t->egress = gw_net_of_addr(gw, target_s);
    } else {
        int n;

        if (strlen(t->res.gateway) >= sizeof(t->next))
            return CW_OVERFLOW;
        memcpy(t->next, t->res.gateway, strlen(t->res.gateway) + 1);
        /* The next gateway is told the target (and what lies beyond). */
        if (e->rest[0] != '\0')
            n = snprintf(t->dest_buf, sizeof(t->dest_buf), "%s@%s", e->rest,
                         target_s);
        else
            n = snprintf(t->dest_buf, sizeof(t->dest_buf), "%s", target_s);
        if (n < 0 || (size_t)n >= sizeof(t->dest_buf))
            return CW_OVERFLOW;
        t->dest = t->dest_buf;
        t->egress = gw_net_by_name(gw, t->res.network_name);
        if (t->egress == NULL)
            t->egress = gw_net_of_addr(gw, t->next);
    }
    if (t->egress == NULL || t->egress->removed)
        return CW_UNREACHABLE;
    return CW_OK;
}

/* ---- forwarding --------------------------------------------------------- */

/* The destination beyond the next hop, kept in the record until it is
 * sent (the string it comes from may be a cache entry a reload drops);
 * as long as an address path can be (CW_ADDR_STR_MAX), which fits. */
static void gw_fwd_set_dest(struct gw_fwd *f, const char *dest)
{
    size_t n = strnlen(dest, sizeof(f->dest) - 1);

    memcpy(f->dest, dest, n);
    f->dest[n] = '\0';
}

void gw_answer(cw_handle_t *in, cw_status_t st)
{
    cw_status_t rst = cw_respond(in, st, NULL, NULL);

    if (rst != CW_OK)
        CW_LOG_RL(CW_LOG_WARN, GW_LOG, "cannot answer a request (%s): %s",
                  cw_status_name(st), cw_status_str(rst));
    cw_handle_release(in);
}

void gw_fwd_free(struct gw_fwd *f)
{
    struct gw *gw = f->gw;
    struct gw_shard *w = f->in_sh;

    GW_ASSERT_LOCKED(gw, &w->lock);
    nau_list_del(&f->link);
    w->inflight--;
    gw_total_put(w);
    if (f->ingress != NULL) {
        GW_CTR_DEC(f->ingress->per[w->idx].inflight);
        if (f->caps & GW_CAP_NET)
            f->ingress->cap_held--;
    }
    if (f->rs != NULL) {
        GW_CTR_DEC(gw_rs_ctr(f->rs, w->idx)->inflight);
        if (f->caps & GW_CAP_ROUTE)
            f->rs->cap_held--;
    }
    if (f->has_nexthop)
        cw_route_table_nexthop_load(f->table, f->nexthop, -1);
    if (f->has_backend)
        cw_route_table_backend_load(f->table, f->service, f->backend, -1);
    gw_admit_done(w, f->src);
    if (f->btoks != NULL) { /* shared with the bulk handlers */
        gw_lock(gw);
        gw_bulk_revoke(gw, f);
        gw_unlock(gw);
    }
    gw_table_put(w, f->table);
    if (f->out != NULL)
        cw_handle_release(f->out);
    nau_pool_put(&w->fwd_pool, f);
}

/* A worker holds one reference to the current table for all its
 * forwards and counts them: the table's own count, an atomic every worker
 * would write twice per forward, is left alone.  When a reload replaces
 * the table, the worker's count becomes references of their own
 * (gw_tables_switch), which those forwards drop as they end.  (Forwards
 * last for as long as their deadlines allow, too long to be read-side
 * sections of userspace RCU: a count it is, split per worker as Linux's
 * percpu_ref splits one per CPU.) */
struct cw_route_table *gw_table_take(struct gw_shard *w)
{
    w->table_users++;
    return w->table;
}

void gw_table_put(struct gw_shard *w, struct cw_route_table *t)
{
    if (t == w->table)
        w->table_users--;
    else
        cw_route_table_unref(t);
}

void gw_tables_switch(struct gw *gw, struct cw_route_table *table)
{
    GW_ASSERT_WORKERS_LOCKED(gw);
    for (unsigned k = 0; k < gw->nshards; k++) {
        struct gw_shard *w = &gw->shards[k];

        if (w->table == table)
            continue;
        if (w->table != NULL) {
            for (unsigned n = w->table_users; n > 0; n--)
                cw_route_table_ref(w->table);
            cw_route_table_unref(w->table);
        }
        w->table = table != NULL ? cw_route_table_ref(table) : NULL;
        w->table_users = 0;
    }
}

/* A record from the worker's pool: the fields before next_addr cleared,
 * the strings empty (each is written before it is read). */
static struct gw_fwd *gw_fwd_alloc(struct gw_shard *w)
{
    struct gw_fwd *f = nau_pool_get(&w->fwd_pool);

    if (f == NULL)
        return NULL;
    memset(f, 0, offsetof(struct gw_fwd, next_addr));
    f->next_addr[0] = '\0';
    f->dest[0] = '\0';
    nau_list_node_init(&f->link);
    return f;
}

void gw_fwd_pool_fini(struct gw *gw)
{
    for (unsigned k = 0; k < gw->nshards; k++)
        nau_pool_fini(&gw->shards[k].fwd_pool);
}

#define GW_MAX_RESUMES 3

/* Another gateway than the failed one (by address) for the request of
 * @p f; a few lookups get past round robin. */
static bool gw_resolve_other(struct gw_fwd *f, struct gw_target *t)
{
    char src[CW_ADDR_STR_MAX];

    if (cw_addr_to_string(cw_handle_source(f->in), src, sizeof(src)) != CW_OK)
        src[0] = '\0';
    for (unsigned i = 0; i < 4; i++) {
        memset(t, 0, sizeof(*t));
        if (gw_resolve(f->in_sh, cw_relay_dest(f->in), src, t) != CW_OK ||
            t->res.direct || t->has_backend)
            return false;
        if (strcmp(t->next, f->next_addr) != 0)
            return true;
    }
    return false;
}

/* Whether @p f may be re-forwarded after its next hop failed with @p st,
 * and through which other gateway (@p t). */
static bool gw_fwd_resumable(struct gw_fwd *f, cw_status_t st,
                             struct gw_target *t)
{
    cw_handle_t *in = f->in;

    return f->has_nexthop && !f->has_backend && !f->cut &&
           f->resumes < GW_MAX_RESUMES && gw_hop_failed(st) &&
           cw_handle_idempotent(in) && !cw_handle_canceled(in) &&
           cw_handle_remaining_ms(in) > 0 && gw_resolve_other(f, t);
}

/* Move @p f from its failed next hop to the one in @p t: the failed hop is
 * counted and reported as a failure and its tokens revoked.  Returns the
 * old outgoing handle, for the caller to release. */
static cw_handle_t *gw_fwd_retarget(struct gw_fwd *f, const struct gw_target *t,
                                    struct gw_route_stats *rs, cw_status_t st)
{
    struct gw *gw = f->gw;
    unsigned wi = f->in_sh->idx;
    cw_handle_t *old = f->out;

    GW_CTR_INC(gw_rs_ctr(f->rs, wi)->failed);
    GW_CTR_DEC(gw_rs_ctr(f->rs, wi)->inflight);
    if (f->caps & GW_CAP_ROUTE)
        f->rs->cap_held--;
    gw_health_report_nexthop(gw, f->table, f->nexthop, false,
                             "forwarded request", st);
    cw_route_table_nexthop_load(f->table, f->nexthop, -1);
    gw_addr_forget(f->eg_sh, f->next_addr);
    if (f->btoks != NULL) {
        gw_lock(gw);
        gw_bulk_revoke(gw, f);
        gw_unlock(gw);
    }
    f->out = NULL;
    gw_table_put(f->in_sh, f->table);
    f->table = gw_table_take(f->in_sh);
    f->rs = rs;
    GW_CTR_INC(gw_rs_ctr(rs, wi)->inflight);
    /* Held against the new route's limit, without waiting for room: it
     * was admitted already. */
    f->caps &= (uint8_t)~GW_CAP_ROUTE;
    if (t->res.max_inflight != 0) {
        rs->cap_held++;
        f->caps |= GW_CAP_ROUTE;
    }
    f->nexthop = t->res.nexthop;
    cw_route_table_nexthop_load(f->table, f->nexthop, 1);
    memcpy(f->next_addr, t->next, sizeof(f->next_addr));
    f->resumes++;
    f->hop_down = false;
    return old;
}

/* The next-hop gateway of an idempotent request failed: send the request
 * again through another gateway of its route, marked RESUME, with fresh
 * proxy tokens, so the target continues where its transfers stopped
 * (docs/bulk-gateway.md, "Resume"): its worker re-resolves it and sends it
 * from its own queue.  True if it went. */
bool gw_fwd_resume_mt(struct gw_fwd *f)
{
    struct gw *gw = f->gw;
    struct gw_shard *w = f->in_sh;
    struct gw_route_stats *rs = NULL;
    struct gw_target t;
    cw_handle_t *old;

    /* Only a transport failure resumes (gw_fwd_resumable), and this
     * worker set the status: an answer needs no lock to say no. */
    if (!gw_hop_failed(f->st))
        return false;
    gw_wlock(w);
    if (gw_fwd_resumable(f, f->st, &t))
        rs = gw_route_stats_get(gw, t.res.dest, t.res.gateway);
    if (rs == NULL) {
        gw_wunlock(w);
        return false;
    }
    old = gw_fwd_retarget(f, &t, rs, f->st);
    gw_fwd_set_dest(f, t.dest);
    f->resume = true; /* gw_fwd_send marks the new outgoing handle */
    w->n.resumed++;
    CW_LOG_RL(CW_LOG_INFO, GW_LOG,
              "next hop failed (%s): request resumed "
              "through %s",
              cw_status_name(f->st), t.next);
    f->st = CW_OK;
    gw_fwd_stage(f);
    gw_wunlock(w);
    cw_handle_release(old);
    gw_deferred_flush(); /* sends it from this worker's queue */
    return true;
}

/* The gateway's and the route's counters for how a forward ended (@p sent:
 * it went out; a status of our own otherwise). */
static void gw_fwd_count(struct gw_fwd *f, cw_status_t st, bool sent)
{
    struct gw_counts *n = &f->in_sh->n;
    struct gw_rs_ctr *c = gw_rs_ctr(f->rs, f->in_sh->idx);

    if (st == CW_CANCELED) {
        n->canceled++;
        GW_CTR_INC(c->canceled);
    } else if (st == CW_TIMEOUT) {
        n->timedout++;
        GW_CTR_INC(c->timedout);
    } else if (sent && (st == CW_OK || !gw_status_is_transport(st))) {
        n->forwarded++;
        GW_CTR_INC(c->forwarded);
    } else {
        n->failed++;
        GW_CTR_INC(c->failed);
    }
}

/* Passive health: tell the route table how the next hop or backend did
 * (@p st: how the forward ended). */
static void gw_fwd_report(struct gw_fwd *f, bool ok, cw_status_t st)
{
    if (f->has_nexthop)
        gw_health_report_nexthop(f->gw, f->table, f->nexthop, ok,
                                 "forwarded request", st);
    if (f->has_backend)
        gw_health_report_backend(f->gw, f->table, f->service, f->backend, ok,
                                 "forwarded request", st);
}

/* Counters, passive health and the record's release once the response
 * went back. */
void gw_fwd_account(struct gw_fwd *f, cw_status_t st, uint64_t t_end)
{
    GW_ASSERT_LOCKED(f->gw, &f->in_sh->lock);
    gw_fwd_count(f, st, true);
    gw_hist_add(gw_rs_ctr(f->rs, f->in_sh->idx),
                (f->t_sent - f->t_in) + (t_end - f->t_done));

    /* Passive health: the next hop or backend answered (any status the far
     * side chose counts) or did not. */
    if (st != CW_CANCELED) {
        gw_fwd_report(f, !gw_status_is_transport(st), st);
        if (gw_hop_failed(st))
            gw_addr_forget(f->eg_sh, f->next_addr);
    }
    gw_fwd_free(f);
}

/* The request could not be sent on (@p st): counters and passive health. */
void gw_fwd_fail_account(struct gw_fwd *f, cw_status_t st)
{
    GW_ASSERT_LOCKED(f->gw, &f->in_sh->lock);
    f->t_sent = f->t_done = cw_now_pass_ns();
    /* CW_CANCELED: the caller canceled while the request waited here. */
    gw_fwd_count(f, st, false);
    if (st != CW_TIMEOUT && st != CW_CANCELED) {
        gw_fwd_report(f, false, st);
        gw_addr_forget(f->eg_sh, f->next_addr);
    }
}

void gw_forward(struct gw_shard *w, cw_handle_t *in, uint64_t qseq)
{
    struct gw *gw = w->gw;
    bool requeued = qseq != 0;
    uint64_t t_in = cw_now_pass_ns();
    char src_buf[CW_ADDR_STR_MAX];
    const char *src;
    struct gw_target t;
    struct gw_net *ingress = NULL;
    struct gw_source *source = NULL;
    struct gw_route_stats *rs;
    struct gw_fwd *f;
    unsigned caps = 0;
    cw_status_t st;

    GW_ASSERT_LOCKED(gw, &w->lock);
    src = gw_source_key(w, in, src_buf, sizeof(src_buf));
    ingress = gw_net_of(gw, cw_addr_network(cw_handle_source(in)));
    if (ingress != NULL && !requeued)
        GW_CTR_INC(ingress->per[w->idx].rx);
    if (ingress != NULL && ingress->removed) {
        /* The network was removed by a reload but is still bound. */
        w->n.noroute++;
        gw_reject(gw, in, CW_UNREACHABLE);
        return;
    }
    if (gw->draining && !requeued) {
        w->n.draining++;
        gw_reject(gw, in, CW_DRAINING);
        return;
    }
    t.dest = "";
    t.has_backend = false;
    st = gw_resolve(w, cw_relay_dest(in), src, &t);
    if (st != CW_OK) {
        w->n.noroute++;
        CW_LOG_RL(CW_LOG_INFO, GW_LOG, "no way to \"%s\" from %s: %s",
                  cw_relay_dest(in), src, cw_status_name(st));
        gw_reject(gw, in, st);
        return;
    }
    rs = gw_target_stats(gw, &t);
    if (rs == NULL) {
        gw_reject(gw, in, CW_NOMEM);
        return;
    }
    if (cw_route_table_acl_check_parsed(
            gw->table, ingress ? ingress->name : NULL, t.egress->name,
            t.acl_svc, t.acl_uri) != CW_OK) {
        w->n.denied++;
        GW_CTR_INC(gw_rs_ctr(rs, w->idx)->denied);
        if (ingress != NULL)
            GW_CTR_INC(ingress->per[w->idx].denied);
        CW_LOG_RL(CW_LOG_INFO, GW_LOG, "denied: %s -> %s (%s -> %s)", src,
                  t.acl_dest, ingress ? ingress->name : "?", t.egress->name);
        gw_reject(gw, in, CW_DENIED);
        return;
    }
    /* It holds its slots (total, network, route) from here: released by
     * gw_fwd_free, or by gw_admit_undo if no record is made. */
    st = gw_admission(w, in, ingress, rs, t.res.max_inflight, src, qseq, t_in,
                      &source, &caps);
    if (st == CW_AGAIN)
        return; /* it waits in the queue */
    if (st != CW_OK) {
        gw_reject(gw, in, st);
        return;
    }
    f = gw_fwd_alloc(w);
    if (f == NULL) {
        gw_admit_undo(w, ingress, rs, source, caps);
        gw_reject(gw, in, CW_NOMEM);
        return;
    }
    memcpy(f->next_addr, t.next, strlen(t.next) + 1); /* gw_resolve: fits */
    f->gw = gw;
    f->in = in;
    f->rs = rs;
    f->src = source;
    f->ingress = ingress;
    f->caps = (uint8_t)caps;
    f->t_in = t_in;
    f->table = gw_table_take(w);
    f->in_sh = f->eg_sh = w; /* every worker reaches every network */
    nau_list_add_tail(&w->fwds, &f->link);
    w->inflight++;
    if (!t.res.direct) {
        f->has_nexthop = true;
        f->nexthop = t.res.nexthop;
        cw_route_table_nexthop_load(f->table, f->nexthop, 1);
    }
    if (t.has_backend) {
        f->has_backend = true;
        f->service = t.pick.service;
        f->backend = t.pick.backend;
        cw_route_table_backend_load(f->table, f->service, f->backend, 1);
    }

    /* Sent from the worker's queue (gw_fwd_send) once its lock is
     * dropped: gw_forward_mt. */
    gw_fwd_set_dest(f, t.dest);
    gw_fwd_stage(f);
}

void gw_fwd_cancel_all(struct gw *gw)
{
    gw_fwd_cancel_mt(gw, true);
}

void gw_fwd_hop_down(struct gw *gw, const char *addr)
{
    GW_ASSERT_WORKERS_LOCKED(gw);
    /* The transport may take longer to notice (or never, if something
     * answers its probes on that address again): health checks decide. */
    unsigned n = 0;

    for (unsigned k = 0; k < gw->nshards; k++) {
        struct nau_list *l;

        nau_list_for_each(l, &gw->shards[k].fwds)
        {
            struct gw_fwd *f = nau_container_of(l, struct gw_fwd, link);

            if (f->out != NULL && f->has_nexthop && !f->hop_down && !f->cut &&
                cw_handle_idempotent(f->in) &&
                strcmp(f->next_addr, addr) == 0) {
                f->hop_down = true;
                gw_fwd_fail_later(f->out); /* the locks are held */
                n++;
            }
        }
    }
    if (n > 0)
        CW_LOG_RL(CW_LOG_INFO, GW_LOG,
                  "next hop %s down: %u idempotent "
                  "request(s) to re-forward",
                  addr, n);
}

void gw_fwd_cut_old(struct gw *gw, uint64_t now)
{
    (void)now;
    gw_fwd_cancel_mt(gw, false);
}
