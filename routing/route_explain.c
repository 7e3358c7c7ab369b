/* "Which route would carry a message to ADDR, and why" (like ip route get),
 * and the client side: routes-only files and plain-address lookups. */
#include "routing_int.h"

#include <stdlib.h>
#include <string.h>

static const char *kind_text(const struct cw_addr_pattern *pat, char *buf,
                             size_t len)
{
    const char *pp = strcmp(pat->plugin, "*") && strcmp(pat->protocol, "*")
                         ? "exact plugin+protocol"
                         : "wildcard plugin/protocol";

    switch (pat->kind) {
    case CW_PATTERN_EXACT:
        snprintf(buf, len, "exact location, %s", pp);
        break;
    case CW_PATTERN_HOSTPORT:
        snprintf(buf, len, "exact host:port, %s", pp);
        break;
    case CW_PATTERN_HOST:
        snprintf(buf, len, "exact host, any port, %s", pp);
        break;
    case CW_PATTERN_PREFIX:
        snprintf(buf, len, "IP prefix /%u, %s", pat->prefix_len, pp);
        break;
    default:
        snprintf(buf, len, "any location, %s", pp);
        break;
    }
    return buf;
}

static void print_route(const struct cw_route_table *t, unsigned ri,
                        bool chosen, FILE *out)
{
    const struct rt_route *r = &t->routes[ri];
    const struct rt_nexthop *nh = &t->nexthops[r->nexthop];

    fprintf(out, "      -> %s %s  priority %u hop %u  %s, %u in flight%s",
            nh->is_gateway ? "gateway" : "via", nh->name, r->priority, r->hop,
            atomic_load(&nh->up) ? "up" : "DOWN",
            atomic_load(&nh->inflight), chosen ? "  [chosen]" : "");
    if (r->implicit)
        fprintf(out, "  (connected network, %s:%u:%u)\n", r->loc.file,
                r->loc.line, r->loc.column);
    else
        fprintf(out, "  (routes[%d], %s:%u:%u)\n", r->cfg_index, r->loc.file,
                r->loc.line, r->loc.column);
}

static cw_status_t explain_uri(struct cw_route_table *t,
                               const struct cw_uri *uri, const char *shown,
                               FILE *out)
{
    struct rt_match_set set;
    const struct rt_route *r;
    const struct rt_nexthop *nh;
    char kind[96];
    unsigned best[64];
    size_t nbest;
    long ri;

    ri = rt_select(t, uri, &set);
    if (ri < 0) {
        fprintf(out, "%s: no route (no dest pattern matches%s)\n", shown,
                t->nnetworks ? " and no network uses this plugin+protocol"
                             : "; a client sends it directly");
        return CW_NO_ROUTE;
    }
    r = &t->routes[ri];
    nh = &t->nexthops[r->nexthop];
    if (nh->is_gateway)
        fprintf(out, "%s gateway %s%s%s\n", shown, nh->name,
                nh->network >= 0 ? " dev " : "",
                nh->network >= 0 ? t->network_names[nh->network] : "");
    else if (nh->network >= 0)
        fprintf(out, "%s via %s (deliver directly)\n", shown, nh->name);
    else
        fprintf(out, "%s direct\n", shown);
    if (r->implicit)
        fprintf(out, "  route: connected network %s (%s:%u:%u), dest %s\n",
                nh->name, r->loc.file, r->loc.line, r->loc.column, r->dest);
    else
        fprintf(out, "  route: routes[%d] at %s:%u:%u, dest \"%s\"\n",
                r->cfg_index, r->loc.file, r->loc.line, r->loc.column,
                r->dest);
    fprintf(out, "  why:");
    for (size_t i = 0; i < set.n; i++) {
        bool in = false;
        for (size_t k = 0; k < set.g[i]->nroutes; k++)
            in = in || set.g[i]->routes[k] == (unsigned)ri;
        if (!in)
            continue;
        if (i > 0)
            fprintf(out, " the %zu more specific dest(s) have every next hop "
                    "down;", i);
        else
            fprintf(out, " most specific matching dest (%s);",
                    kind_text(&set.g[i]->pat, kind, sizeof(kind)));
        nbest = rt_group_best(t, set.g[i], best, 64);
        if (set.g[i]->nroutes > 1)
            fprintf(out, " lowest priority %u, fewest hops %u among %zu "
                    "route(s) for it;", r->priority, r->hop,
                    set.g[i]->nroutes);
        if (nbest > 1)
            fprintf(out, " %zu equal routes: healthiest, least loaded, then "
                    "round robin;", nbest);
        break;
    }
    fprintf(out, " next hop %s\n", atomic_load(&nh->up) ? "up" : "down "
            "(every alternative is down too)");
    fprintf(out, "  matching dests, most specific first:\n");
    for (size_t i = 0; i < set.n; i++) {
        char pat[CW_URI_MAX + 64];
        const struct rt_group *g = set.g[i];
        cw_addr_pattern_format(&g->pat, pat, sizeof(pat));
        fprintf(out, "    %zu. %s  (%s)\n", i + 1,
                g->nroutes ? t->routes[g->routes[0]].dest : pat,
                kind_text(&g->pat, kind, sizeof(kind)));
        for (size_t k = 0; k < g->nroutes; k++)
            print_route(t, g->routes[k], g->routes[k] == (unsigned)ri, out);
    }
    return CW_OK;
}

cw_status_t cw_route_table_explain(struct cw_route_table *table,
                                   const char *addr, FILE *out)
{
    struct cw_addr_path *path;
    char err[256];
    cw_status_t st;

    if (table == NULL || addr == NULL || out == NULL)
        return CW_INVALID_ARG;
    path = malloc(sizeof(*path));
    if (path == NULL)
        return CW_NOMEM;
    if (strncmp(addr, "svc:", 4) == 0 && strchr(addr, '@') == NULL) {
        struct cw_service_pick pick;
        struct cw_uri uri;
        st = cw_route_table_service_pick(table, addr, NULL, &pick);
        if (st != CW_OK) {
            fprintf(out, "%s: no such service in %s\n", addr, table->path);
            goto out_free;
        }
        fprintf(out, "%s: service '%s' (%zu backends, policy %s) -> next "
                "pick %s\n", addr, addr + 4,
                table->services[pick.service].nbackends,
                (const char *[]){"round_robin", "least_inflight",
                                 "hash"}[table->services[pick.service]
                                             .policy],
                pick.address);
        if (cw_uri_parse(pick.address, &uri) != CW_OK) {
            st = CW_INVALID_ARG;
            goto out_free;
        }
        st = explain_uri(table, &uri, pick.address, out);
        goto out_free;
    }
    if (cw_addr_path_parse(addr, path, err, sizeof(err)) != CW_OK) {
        fprintf(out, "%s: not an address: %s\n", addr, err);
        st = CW_INVALID_ARG;
        goto out_free;
    }
    if (path->nhops > 0) {
        char first[CW_URI_MAX];
        cw_uri_format(&path->hops[0], first, sizeof(first));
        fprintf(out, "%s: proxied address; the first hop is %s "
                "(%u gateway(s))\n", addr, first, path->nhops);
        st = explain_uri(table, &path->hops[0], first, out);
    } else {
        st = explain_uri(table, &path->target, addr, out);
    }
out_free:
    free(path);
    return st;
}

cw_status_t cw_route_table_load_client(const char *path,
                                       struct cw_config_diag *diag,
                                       struct cw_route_table **table_p)
{
    struct cw_config *cfg;
    cw_status_t st;

    if (table_p == NULL)
        return CW_INVALID_ARG;
    if (path == NULL) {
        path = getenv("CAUSEWAY_ROUTES");
        if (path == NULL || path[0] == '\0')
            return CW_NOENT;
    }
    st = cw_config_load(path, CW_CONFIG_ROUTES_ONLY, diag, &cfg);
    if (st != CW_OK)
        return st;
    st = cw_route_table_build(cfg, table_p);
    cw_config_free(cfg);
    return st;
}

cw_status_t cw_route_table_client_lookup(struct cw_route_table *table,
                                         const char *addr, char *gateway,
                                         size_t gateway_len, bool *direct_p)
{
    struct cw_route_result res;
    struct cw_uri uri;
    size_t len;
    cw_status_t st;

    if (table == NULL || addr == NULL || direct_p == NULL)
        return CW_INVALID_ARG;
    if (cw_uri_parse(addr, &uri) != CW_OK)
        return CW_INVALID_ARG;
    st = cw_route_table_lookup(table, &uri, &res);
    if (st == CW_NO_ROUTE || (st == CW_OK && res.direct)) {
        *direct_p = true;
        return CW_OK;
    }
    if (st != CW_OK)
        return st;
    len = strlen(res.gateway);
    if (gateway == NULL || len >= gateway_len)
        return CW_OVERFLOW;
    memcpy(gateway, res.gateway, len + 1);
    *direct_p = false;
    return CW_OK;
}
