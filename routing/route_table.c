/* Building the route table from a config, and route selection. */
#include "routing_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Serial numbers of built tables (route memos tell them apart even when
 * one is allocated where a freed one was). */
static atomic_uint_fast64_t rt_serials;

static void table_free(struct cw_route_table *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->nnexthops; i++)
        free(t->nexthops[i].name);
    free(t->nexthops);
    for (size_t i = 0; i < t->nroutes; i++)
        free(t->routes[i].dest);
    free(t->routes);
    for (size_t i = 0; i < t->ngroups; i++) {
        if (t->groups[i])
            free(t->groups[i]->routes);
        free(t->groups[i]);
    }
    free(t->groups);
    for (size_t i = 0; i < t->nbuckets; i++) {
        rt_pfx_free(t->buckets[i]);
        rt_hash_free(&t->buckets[i]->exact);
        rt_hash_free(&t->buckets[i]->hostport);
        rt_hash_free(&t->buckets[i]->host);
        free(t->buckets[i]);
    }
    free(t->buckets);
    rt_hash_free(&t->bucket_index);
    for (size_t i = 0; i < t->nservices; i++) {
        for (size_t b = 0; b < t->services[i].nbackends; b++)
            free(t->services[i].backends[b].address);
        free(t->services[i].backends);
        free(t->services[i].name);
    }
    free(t->services);
    rt_hash_free(&t->service_index);
    for (size_t i = 0; i < t->nacl; i++) {
        for (size_t k = 0; k < t->acl[i].nallow; k++)
            free(t->acl[i].allow[k].svc);
        free(t->acl[i].allow);
        free(t->acl[i].from);
        free(t->acl[i].to);
    }
    free(t->acl);
    for (size_t i = 0; i < t->nnetworks; i++)
        free(t->network_names[i]);
    free(t->network_names);
    free(t->path);
    free(t);
}

static cw_status_t nexthop_get(struct cw_route_table *t, const char *name,
                               bool is_gateway, int network, unsigned *id_p)
{
    struct rt_nexthop *nh;

    for (size_t i = 0; i < t->nnexthops; i++) {
        if (strcmp(t->nexthops[i].name, name) == 0) {
            *id_p = (unsigned)i;
            return CW_OK;
        }
    }
    /* nexthops was sized for the worst case by the caller. */
    nh = &t->nexthops[t->nnexthops];
    nh->name = strdup(name);
    if (nh->name == NULL)
        return CW_NOMEM;
    nh->is_gateway = is_gateway;
    nh->network = network;
    atomic_init(&nh->up, true);
    atomic_init(&nh->fails, 0);
    atomic_init(&nh->successes, 0);
    atomic_init(&nh->inflight, 0);
    *id_p = (unsigned)t->nnexthops++;
    return CW_OK;
}

static struct rt_bucket *bucket_get(struct cw_route_table *t, const char *pp,
                                    const struct cw_addr_pattern *pat)
{
    struct rt_bucket *b = rt_hash_get(&t->bucket_index, pp);
    struct rt_bucket **nb;

    if (b)
        return b;
    nb = realloc(t->buckets, (t->nbuckets + 1) * sizeof(*nb));
    if (nb == NULL)
        return NULL;
    t->buckets = nb;
    b = calloc(1, sizeof(*b));
    if (b == NULL)
        return NULL;
    b->pp_rank = rt_pattern_spec(pat) & 0xff;
    if (rt_hash_put(&t->bucket_index, pp, b) != CW_OK) {
        free(b);
        return NULL;
    }
    t->buckets[t->nbuckets++] = b;
    return b;
}

/* The group of a pattern in its bucket, or NULL. */
static struct rt_group *group_find(const struct cw_route_table *t,
                                   const struct rt_bucket *b,
                                   const struct cw_addr_pattern *pat,
                                   const char *hpkey)
{
    int32_t gi;

    switch (pat->kind) {
    case CW_PATTERN_ANY:
        return b->any;
    case CW_PATTERN_EXACT:
        return rt_hash_get(&b->exact, pat->host);
    case CW_PATTERN_HOST:
        return rt_hash_get(&b->host, pat->host);
    case CW_PATTERN_HOSTPORT:
        return rt_hash_get(&b->hostport, hpkey);
    case CW_PATTERN_PREFIX:
        gi = rt_pfx_find(b, pat->family, pat->prefix_len, pat->ip);
        return gi >= 0 ? t->groups[gi] : NULL;
    }
    return NULL;
}

static cw_status_t group_index(struct cw_route_table *t, struct rt_bucket *b,
                               const struct cw_addr_pattern *pat,
                               const char *hpkey, struct rt_group *g)
{
    switch (pat->kind) {
    case CW_PATTERN_ANY:
        b->any = g;
        return CW_OK;
    case CW_PATTERN_EXACT:
        return rt_hash_put(&b->exact, pat->host, g);
    case CW_PATTERN_HOST:
        return rt_hash_put(&b->host, pat->host, g);
    case CW_PATTERN_HOSTPORT:
        return rt_hash_put(&b->hostport, hpkey, g);
    case CW_PATTERN_PREFIX:
        return rt_pfx_insert(b, pat->family, pat->prefix_len, pat->ip,
                             (int32_t)(t->ngroups - 1));
    }
    return CW_INVALID_ARG;
}

/* Add route index ri to the group of its pattern, creating the group. */
static cw_status_t group_add(struct cw_route_table *t,
                             const struct cw_addr_pattern *pat, unsigned ri,
                             bool implicit_only_if_new)
{
    char pp[CW_URI_PLUGIN_MAX + CW_URI_PROTOCOL_MAX + 2];
    char hpkey[CW_URI_LOCATION_MAX + 8];
    struct rt_group *g;
    struct rt_bucket *b;
    unsigned *nr;
    cw_status_t st;

    snprintf(pp, sizeof(pp), "%s+%s", pat->plugin, pat->protocol);
    snprintf(hpkey, sizeof(hpkey), "%s#%u", pat->host, pat->port);
    b = bucket_get(t, pp, pat);
    if (b == NULL)
        return CW_NOMEM;
    g = group_find(t, b, pat, hpkey);
    if (g && implicit_only_if_new)
        return CW_EXIST;
    if (g == NULL) {
        g = calloc(1, sizeof(*g));
        if (g == NULL)
            return CW_NOMEM;
        g->pat = *pat;
        g->spec = rt_pattern_spec(pat);
        atomic_init(&g->rr, 0);
        t->groups[t->ngroups++] = g;
        st = group_index(t, b, pat, hpkey, g);
        if (st != CW_OK)
            return st;
    }
    nr = realloc(g->routes, (g->nroutes + 1) * sizeof(*nr));
    if (nr == NULL)
        return CW_NOMEM;
    g->routes = nr;
    g->routes[g->nroutes++] = ri;
    return CW_OK;
}

static cw_status_t add_route(struct cw_route_table *t,
                             const struct cw_addr_pattern *pat,
                             const char *dest, unsigned nexthop,
                             unsigned priority, unsigned hop,
                             unsigned max_inflight, int cfg_index,
                             const struct cw_config_loc *loc, bool implicit)
{
    struct rt_route *r = &t->routes[t->nroutes];
    cw_status_t st;

    memset(r, 0, sizeof(*r));
    r->dest = strdup(dest);
    if (r->dest == NULL)
        return CW_NOMEM;
    t->nroutes++;
    r->nexthop = nexthop;
    r->priority = priority;
    r->hop = hop;
    r->max_inflight = max_inflight;
    r->cfg_index = cfg_index;
    r->implicit = implicit;
    if (loc) {
        r->loc = *loc;
        r->loc.file = t->path;
    }
    st = group_add(t, pat, (unsigned)(t->nroutes - 1), implicit);
    if (st == CW_EXIST) {
        /* A written route has this dest: no implicit route. */
        free(r->dest);
        t->nroutes--;
        return CW_OK;
    }
    return st;
}

static cw_status_t build_routes(struct cw_route_table *t,
                                const struct cw_config *cfg)
{
    size_t maxr = cfg->nroutes + cfg->nnetworks;
    cw_status_t st;

    t->routes = calloc(maxr ? maxr : 1, sizeof(*t->routes));
    t->nexthops = calloc(maxr ? maxr : 1, sizeof(*t->nexthops));
    t->groups = calloc(maxr ? maxr : 1, sizeof(*t->groups));
    if (t->routes == NULL || t->nexthops == NULL || t->groups == NULL)
        return CW_NOMEM;
    for (size_t i = 0; i < cfg->nroutes; i++) {
        const struct cw_config_route *r = &cfg->routes[i];
        unsigned nh;
        if (r->gateway) {
            char norm[CW_URI_MAX];
            if (cw_uri_format(&r->gateway_uri, norm, sizeof(norm)) != CW_OK)
                return CW_INVALID_ARG;
            st = nexthop_get(t, norm, true, r->network, &nh);
        } else {
            st = nexthop_get(t, r->via, false, r->network, &nh);
        }
        if (st == CW_OK)
            st = add_route(t, &r->pattern, r->dest, nh, r->priority, r->hop,
                           r->max_inflight, (int)i, &r->loc, false);
        if (st != CW_OK)
            return st;
    }
    t->nwritten = t->nroutes;
    for (size_t i = 0; i < cfg->nnetworks; i++) {
        const struct cw_config_network *n = &cfg->networks[i];
        struct cw_addr_pattern pat;
        char dest[CW_URI_PLUGIN_MAX + CW_URI_PROTOCOL_MAX + 8];
        unsigned nh;

        bool shared = false;

        /* Two networks on one plugin+protocol (two subnets): which one
         * reaches a destination is for written routes to say. */
        for (size_t j = 0; j < cfg->nnetworks; j++)
            shared =
                shared ||
                (j != i &&
                 strcmp(cfg->networks[j].uri.plugin, n->uri.plugin) == 0 &&
                 strcmp(cfg->networks[j].uri.protocol, n->uri.protocol) == 0);
        if (shared)
            continue;
        snprintf(dest, sizeof(dest), "%s%s%s://*", n->uri.plugin,
                 n->uri.protocol[0] ? "+" : "", n->uri.protocol);
        if (cw_addr_pattern_parse(dest, &pat, NULL, 0) != CW_OK)
            return CW_INVALID_ARG;
        st = nexthop_get(t, n->name, false, (int)i, &nh);
        if (st == CW_OK)
            st = add_route(t, &pat, dest, nh, 0, 1, 0, -1, &n->loc, true);
        if (st != CW_OK)
            return st;
    }
    return CW_OK;
}

cw_status_t cw_route_table_build(const struct cw_config *cfg,
                                 struct cw_route_table **table_p)
{
    struct cw_route_table *t;
    cw_status_t st;

    if (cfg == NULL || table_p == NULL)
        return CW_INVALID_ARG;
    t = calloc(1, sizeof(*t));
    if (t == NULL)
        return CW_NOMEM;
    atomic_init(&t->refs, 1);
    t->serial = atomic_fetch_add(&rt_serials, 1) + 1;
    t->path = strdup(cfg->path ? cfg->path : "");
    t->network_names =
        calloc(cfg->nnetworks ? cfg->nnetworks : 1, sizeof(char *));
    if (t->path == NULL || t->network_names == NULL) {
        st = CW_NOMEM;
        goto err_free;
    }
    for (size_t i = 0; i < cfg->nnetworks; i++) {
        t->network_names[i] = strdup(cfg->networks[i].name);
        if (t->network_names[i] == NULL) {
            st = CW_NOMEM;
            goto err_free;
        }
        t->nnetworks++;
    }
    t->eject_after = cfg->health.eject_after ? cfg->health.eject_after : 3;
    t->recover_after =
        cfg->health.recover_after ? cfg->health.recover_after : 2;
    st = build_routes(t, cfg);
    if (st != CW_OK)
        goto err_free;
    st = rt_build_services(t, cfg);
    if (st != CW_OK)
        goto err_free;
    st = rt_build_acl(t, cfg);
    if (st != CW_OK)
        goto err_free;
    *table_p = t;
    return CW_OK;
err_free:
    table_free(t);
    return st;
}

struct cw_route_table *cw_route_table_ref(struct cw_route_table *table)
{
    if (table)
        atomic_fetch_add(&table->refs, 1);
    return table;
}

void cw_route_table_unref(struct cw_route_table *table)
{
    if (table && atomic_fetch_sub(&table->refs, 1) == 1)
        table_free(table);
}

size_t cw_route_table_size(const struct cw_route_table *table)
{
    return table ? table->nwritten : 0;
}

/* Choose among a group's routes; false when only_up and none is up. */
static bool group_select(struct cw_route_table *t, struct rt_group *g,
                         bool only_up, unsigned *route_p)
{
    unsigned ties[64];
    size_t nties = 0;
    unsigned bp = ~0u, bh = ~0u, bf = ~0u, bl = ~0u;

    /* One route (the usual case): no ranking, no tie to break. */
    if (g->nroutes == 1) {
        const struct rt_route *r = &t->routes[g->routes[0]];

        if (only_up && !atomic_load_explicit(&t->nexthops[r->nexthop].up,
                                             memory_order_relaxed))
            return false;
        *route_p = g->routes[0];
        return true;
    }
    for (size_t i = 0; i < g->nroutes; i++) {
        const struct rt_route *r = &t->routes[g->routes[i]];
        struct rt_nexthop *nh = &t->nexthops[r->nexthop];
        unsigned f;
        unsigned l;
        if (only_up && !atomic_load_explicit(&nh->up, memory_order_relaxed))
            continue;
        f = atomic_load_explicit(&nh->fails, memory_order_relaxed);
        l = atomic_load_explicit(&nh->inflight, memory_order_relaxed);
        if (r->priority < bp ||
            (r->priority == bp &&
             (r->hop < bh ||
              (r->hop == bh && (f < bf || (f == bf && l < bl)))))) {
            bp = r->priority;
            bh = r->hop;
            bf = f;
            bl = l;
            nties = 0;
        } else if (!(r->priority == bp && r->hop == bh && f == bf && l == bl)) {
            continue;
        }
        if (nties < 64)
            ties[nties++] = g->routes[i];
    }
    if (nties == 0)
        return false;
    if (nties == 1) {
        *route_p = ties[0];
        return true;
    }
    *route_p = ties[atomic_fetch_add_explicit(&g->rr, 1, memory_order_relaxed) %
                    nties];
    return true;
}

static void fill_result(const struct cw_route_table *t, unsigned ri,
                        struct cw_route_result *res)
{
    const struct rt_route *r = &t->routes[ri];
    const struct rt_nexthop *nh = &t->nexthops[r->nexthop];

    memset(res, 0, sizeof(*res));
    res->direct = !nh->is_gateway;
    res->network = nh->network;
    res->network_name = nh->network >= 0 && (size_t)nh->network < t->nnetworks
                            ? t->network_names[nh->network]
                            : NULL;
    res->gateway = nh->is_gateway ? nh->name : NULL;
    res->nexthop = r->nexthop;
    res->priority = r->priority;
    res->hop = r->hop;
    res->max_inflight = r->max_inflight;
    res->implicit = r->implicit;
    res->dest = r->dest;
    res->loc = r->loc;
}

/* The route among the matched groups @p g (most specific first). */
static long select_in(struct cw_route_table *t, struct rt_group *const *g,
                      size_t n)
{
    unsigned ri;

    if (n == 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (group_select(t, g[i], true, &ri))
            return ri;
    /* Every next hop is down: better to try than to drop. */
    if (group_select(t, g[0], false, &ri))
        return ri;
    return -1;
}

long rt_select(struct cw_route_table *t, const struct cw_uri *dest,
               struct rt_match_set *set)
{
    rt_match(t, dest, set);
    return select_in(t, set->g, set->n);
}

cw_status_t cw_route_table_lookup(struct cw_route_table *table,
                                  const struct cw_uri *dest,
                                  struct cw_route_result *res_p)
{
    struct rt_match_set set;
    long ri;

    if (table == NULL || dest == NULL || res_p == NULL)
        return CW_INVALID_ARG;
    ri = rt_select(table, dest, &set);
    if (ri < 0)
        return CW_NO_ROUTE;
    fill_result(table, (unsigned)ri, res_p);
    return CW_OK;
}

cw_status_t cw_route_table_lookup_memo(struct cw_route_table *table,
                                       const struct cw_uri *dest,
                                       struct cw_route_memo *memo,
                                       struct cw_route_result *res_p)
{
    struct rt_group *g[CW_ROUTE_MEMO_GROUPS];
    long ri;

    if (table == NULL || dest == NULL || memo == NULL || res_p == NULL)
        return CW_INVALID_ARG;
    if (memo->table_serial == table->serial &&
        memo->n <= CW_ROUTE_MEMO_GROUPS) {
        for (uint32_t i = 0; i < memo->n; i++)
            g[i] = (struct rt_group *)memo->group[i];
        ri = select_in(table, g, memo->n);
    } else {
        /* Matching builds keys from the destination and probes the
         * indexes: the part worth remembering, when it fits. */
        struct rt_match_set set;

        rt_match(table, dest, &set);
        memo->table_serial = table->serial;
        memo->n = (uint32_t)set.n;
        for (size_t i = 0; i < set.n && i < CW_ROUTE_MEMO_GROUPS; i++)
            memo->group[i] = set.g[i];
        ri = select_in(table, set.g, set.n);
    }
    if (ri < 0)
        return CW_NO_ROUTE;
    fill_result(table, (unsigned)ri, res_p);
    return CW_OK;
}

cw_status_t cw_route_table_lookup_str(struct cw_route_table *table,
                                      const char *dest,
                                      struct cw_route_result *res_p)
{
    struct cw_uri uri;

    if (cw_uri_parse(dest, &uri) != CW_OK)
        return CW_INVALID_ARG;
    return cw_route_table_lookup(table, &uri, res_p);
}

void rt_fill_result(const struct cw_route_table *t, unsigned ri,
                    struct cw_route_result *res)
{
    fill_result(t, ri, res);
}

unsigned cw_route_table_nexthop_count(const struct cw_route_table *table)
{
    return table ? (unsigned)table->nnexthops : 0;
}

const char *cw_route_table_nexthop_name(const struct cw_route_table *table,
                                        unsigned id)
{
    if (table == NULL || id >= table->nnexthops)
        return NULL;
    return table->nexthops[id].name;
}

cw_status_t cw_route_table_nexthop_find(const struct cw_route_table *table,
                                        const char *name, unsigned *id_p)
{
    struct cw_uri uri;
    char norm[CW_URI_MAX];

    if (table == NULL || name == NULL || id_p == NULL)
        return CW_INVALID_ARG;
    if (cw_uri_parse(name, &uri) == CW_OK &&
        cw_uri_format(&uri, norm, sizeof(norm)) == CW_OK)
        name = norm;
    for (size_t i = 0; i < table->nnexthops; i++) {
        if (strcmp(table->nexthops[i].name, name) == 0) {
            *id_p = (unsigned)i;
            return CW_OK;
        }
    }
    return CW_NOENT;
}

void cw_route_table_nexthop_set_up(struct cw_route_table *table, unsigned id,
                                   bool up)
{
    if (table == NULL || id >= table->nnexthops)
        return;
    atomic_store(&table->nexthops[id].up, up);
    atomic_store(&table->nexthops[id].fails, 0);
    atomic_store(&table->nexthops[id].successes, 0);
}

bool cw_route_table_nexthop_is_up(const struct cw_route_table *table,
                                  unsigned id)
{
    if (table == NULL || id >= table->nnexthops)
        return false;
    return atomic_load(&table->nexthops[id].up);
}

/* The transition itself is a compare-and-swap, so that of two reports
 * racing over the threshold only one returns the change. */
enum cw_health_change rt_health_report(atomic_bool *in_service, bool invert,
                                       atomic_uint *fails,
                                       atomic_uint *successes, bool success,
                                       unsigned eject_after,
                                       unsigned recover_after)
{
    bool cur = atomic_load(in_service) != invert;
    bool expect;

    if (success) {
        atomic_store(fails, 0);
        if (!cur && atomic_fetch_add(successes, 1) + 1 >= recover_after) {
            atomic_store(successes, 0);
            expect = invert;
            if (atomic_compare_exchange_strong(in_service, &expect, !invert))
                return CW_HEALTH_UP;
        }
        return CW_HEALTH_SAME;
    }
    atomic_store(successes, 0);
    if (atomic_fetch_add(fails, 1) + 1 >= eject_after && cur) {
        expect = !invert;
        if (atomic_compare_exchange_strong(in_service, &expect, invert))
            return CW_HEALTH_DOWN;
    }
    return CW_HEALTH_SAME;
}

enum cw_health_change
cw_route_table_nexthop_report(struct cw_route_table *table, unsigned id,
                              bool success)
{
    struct rt_nexthop *nh;

    if (table == NULL || id >= table->nnexthops)
        return CW_HEALTH_SAME;
    nh = &table->nexthops[id];
    return rt_health_report(&nh->up, false, &nh->fails, &nh->successes, success,
                            table->eject_after, table->recover_after);
}

void cw_route_table_nexthop_load(struct cw_route_table *table, unsigned id,
                                 int delta)
{
    if (table == NULL || id >= table->nnexthops)
        return;
    if (delta >= 0)
        atomic_fetch_add(&table->nexthops[id].inflight, (unsigned)delta);
    else
        atomic_fetch_sub(&table->nexthops[id].inflight, (unsigned)-delta);
}

unsigned cw_route_table_nexthop_inflight(const struct cw_route_table *table,
                                         unsigned id)
{
    if (table == NULL || id >= table->nnexthops)
        return 0;
    return atomic_load(&table->nexthops[id].inflight);
}
