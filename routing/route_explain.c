/* "Which route would carry a message to ADDR, and why" (like ip route get),
 * and the client side: routes-only files and plain-address lookups. */
#include "routing_int.h"
#include "cw_json.h"

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

/* One candidate route: a line, or (json) an object. */
static void print_route(const struct cw_route_table *t, unsigned ri,
                        bool chosen, bool json, FILE *out)
{
    const struct rt_route *r = &t->routes[ri];
    const struct rt_nexthop *nh = &t->nexthops[r->nexthop];

    if (json) {
        fprintf(out, "{\"kind\":\"%s\",\"nexthop\":",
                nh->is_gateway ? "gateway" : "via");
        cw_json_str(out, nh->name);
        fprintf(out,
                ",\"priority\":%u,\"hop\":%u,\"up\":%s,\"inflight\":%u,"
                "\"chosen\":%s,\"route\":",
                r->priority, r->hop, atomic_load(&nh->up) ? "true" : "false",
                atomic_load(&nh->inflight), chosen ? "true" : "false");
        if (r->implicit)
            fprintf(out, "\"connected\"");
        else
            fprintf(out, "\"routes[%d]\"", r->cfg_index);
        fprintf(out, ",\"file\":");
        cw_json_str(out, r->loc.file);
        fprintf(out, ",\"line\":%u,\"column\":%u}", r->loc.line, r->loc.column);
        return;
    }
    fprintf(out, "      -> %s %s  priority %u hop %u  %s, %u in flight%s",
            nh->is_gateway ? "gateway" : "via", nh->name, r->priority, r->hop,
            atomic_load(&nh->up) ? "up" : "DOWN", atomic_load(&nh->inflight),
            chosen ? "  [chosen]" : "");
    if (r->implicit)
        fprintf(out, "  (connected network, %s:%u:%u)\n", r->loc.file,
                r->loc.line, r->loc.column);
    else
        fprintf(out, "  (routes[%d], %s:%u:%u)\n", r->cfg_index, r->loc.file,
                r->loc.line, r->loc.column);
}

/* Why route @p ri won, one sentence per reason, into @p buf. */
static void explain_why(struct cw_route_table *t,
                        const struct rt_match_set *set, long ri, char *buf,
                        size_t len)
{
    const struct rt_route *r = &t->routes[ri];
    const struct rt_nexthop *nh = &t->nexthops[r->nexthop];
    unsigned best[64];
    char kind[96];
    size_t off = 0, nbest;

#define WHY(...)                                                               \
    do {                                                                       \
        if (off < len)                                                         \
            off += (size_t)snprintf(buf + off, len - off, __VA_ARGS__);        \
    } while (0)
    buf[0] = '\0';
    for (size_t i = 0; i < set->n; i++) {
        bool in = false;
        for (size_t k = 0; k < set->g[i]->nroutes; k++)
            in = in || set->g[i]->routes[k] == (unsigned)ri;
        if (!in)
            continue;
        if (i > 0)
            WHY(" the %zu more specific dest(s) have every next hop down;", i);
        else
            WHY(" most specific matching dest (%s);",
                kind_text(&set->g[i]->pat, kind, sizeof(kind)));
        nbest = rt_group_best(t, set->g[i], best, 64);
        if (set->g[i]->nroutes > 1)
            WHY(" lowest priority %u, fewest hops %u among %zu route(s) for "
                "it;",
                r->priority, r->hop, set->g[i]->nroutes);
        if (nbest > 1)
            WHY(" %zu equal routes: healthiest, least loaded, then round "
                "robin;",
                nbest);
        break;
    }
    WHY(" next hop %s", atomic_load(&nh->up) ? "up"
                                             : "down (every "
                                               "alternative is down too)");
#undef WHY
}

static cw_status_t explain_uri(struct cw_route_table *t,
                               const struct cw_uri *uri, const char *shown,
                               bool json, FILE *out)
{
    struct rt_match_set set;
    const struct rt_route *r;
    const struct rt_nexthop *nh;
    char kind[96], why[1024];
    long ri;

    ri = rt_select(t, uri, &set);
    if (ri < 0) {
        const char *reason =
            t->nnetworks
                ? "no dest pattern matches and no network uses this "
                  "plugin+protocol"
                : "no dest pattern matches; a client sends it directly";
        if (json) {
            fprintf(out, "\"target\":");
            cw_json_str(out, shown);
            fprintf(out, ",\"result\":\"no_route\",\"reason\":\"%s\"", reason);
        } else {
            fprintf(out, "%s: no route (%s)\n", shown, reason);
        }
        return CW_NO_ROUTE;
    }
    r = &t->routes[ri];
    nh = &t->nexthops[r->nexthop];
    explain_why(t, &set, ri, why, sizeof(why));
    if (json) {
        fprintf(out, "\"target\":");
        cw_json_str(out, shown);
        fprintf(out, ",\"result\":\"route\",\"kind\":\"%s\",\"nexthop\":",
                nh->is_gateway     ? "gateway"
                : nh->network >= 0 ? "via"
                                   : "direct");
        cw_json_str(out, nh->name);
        fprintf(out, ",\"network\":");
        if (nh->network >= 0)
            cw_json_str(out, t->network_names[nh->network]);
        else
            fprintf(out, "null");
        fprintf(out, ",\"up\":%s,\"route\":",
                atomic_load(&nh->up) ? "true" : "false");
        print_route(t, (unsigned)ri, true, true, out);
        fprintf(out, ",\"dest\":");
        cw_json_str(out, r->dest);
        fprintf(out, ",\"why\":");
        cw_json_str(out, why + 1);
        fprintf(out, ",\"matches\":[");
    } else {
        if (nh->is_gateway)
            fprintf(out, "%s gateway %s%s%s\n", shown, nh->name,
                    nh->network >= 0 ? " dev " : "",
                    nh->network >= 0 ? t->network_names[nh->network] : "");
        else if (nh->network >= 0)
            fprintf(out, "%s via %s (deliver directly)\n", shown, nh->name);
        else
            fprintf(out, "%s direct\n", shown);
        if (r->implicit)
            fprintf(out,
                    "  route: connected network %s (%s:%u:%u), dest "
                    "%s\n",
                    nh->name, r->loc.file, r->loc.line, r->loc.column, r->dest);
        else
            fprintf(out, "  route: routes[%d] at %s:%u:%u, dest \"%s\"\n",
                    r->cfg_index, r->loc.file, r->loc.line, r->loc.column,
                    r->dest);
        fprintf(out, "  why:%s\n", why);
        fprintf(out, "  matching dests, most specific first:\n");
    }
    for (size_t i = 0; i < set.n; i++) {
        char pat[CW_URI_MAX + 64];
        const struct rt_group *g = set.g[i];
        const char *dest;

        cw_addr_pattern_format(&g->pat, pat, sizeof(pat));
        dest = g->nroutes ? t->routes[g->routes[0]].dest : pat;
        kind_text(&g->pat, kind, sizeof(kind));
        if (json) {
            fprintf(out, "%s{\"dest\":", i ? "," : "");
            cw_json_str(out, dest);
            fprintf(out, ",\"match\":\"%s\",\"routes\":[", kind);
        } else {
            fprintf(out, "    %zu. %s  (%s)\n", i + 1, dest, kind);
        }
        for (size_t k = 0; k < g->nroutes; k++) {
            if (json && k > 0)
                fputc(',', out);
            print_route(t, g->routes[k], g->routes[k] == (unsigned)ri, json,
                        out);
        }
        if (json)
            fprintf(out, "]}");
    }
    if (json)
        fprintf(out, "]");
    return CW_OK;
}

static cw_status_t explain(struct cw_route_table *table, const char *addr,
                           bool json, FILE *out)
{
    struct cw_addr_path *path;
    char err[256];
    cw_status_t st;

    if (table == NULL || addr == NULL || out == NULL)
        return CW_INVALID_ARG;
    path = malloc(sizeof(*path));
    if (path == NULL)
        return CW_NOMEM;
    if (json) {
        fprintf(out, "{\"address\":");
        cw_json_str(out, addr);
        fputc(',', out);
    }
    if (strncmp(addr, "svc:", 4) == 0 && strchr(addr, '@') == NULL) {
        struct cw_service_pick pick;
        struct cw_uri uri;
        const char *policy;

        st = cw_route_table_service_pick(table, addr, NULL, &pick);
        if (st != CW_OK) {
            if (json) {
                fprintf(out, "\"result\":\"no_service\",\"reason\":");
                cw_json_str(out, "no such service");
            } else {
                fprintf(out, "%s: no such service in %s\n", addr, table->path);
            }
            goto out_free;
        }
        policy = (const char *[]){"round_robin", "least_inflight",
                                  "hash"}[table->services[pick.service].policy];
        if (json) {
            fprintf(out, "\"service\":{\"name\":");
            cw_json_str(out, addr + 4);
            fprintf(out, ",\"backends\":%zu,\"policy\":\"%s\",\"pick\":",
                    table->services[pick.service].nbackends, policy);
            cw_json_str(out, pick.address);
            fprintf(out, "},");
        } else {
            fprintf(out,
                    "%s: service '%s' (%zu backends, policy %s) -> "
                    "next pick %s\n",
                    addr, addr + 4, table->services[pick.service].nbackends,
                    policy, pick.address);
        }
        if (cw_uri_parse(pick.address, &uri) != CW_OK) {
            st = CW_INVALID_ARG;
            if (json)
                fprintf(out, "\"result\":\"invalid\"");
            goto out_free;
        }
        st = explain_uri(table, &uri, pick.address, json, out);
        goto out_free;
    }
    if (cw_addr_path_parse(addr, path, err, sizeof(err)) != CW_OK) {
        if (json) {
            fprintf(out, "\"result\":\"invalid\",\"reason\":");
            cw_json_str(out, err);
        } else {
            fprintf(out, "%s: not an address: %s\n", addr, err);
        }
        st = CW_INVALID_ARG;
        goto out_free;
    }
    if (path->nhops > 0) {
        char first[CW_URI_MAX];
        cw_uri_format(&path->hops[0], first, sizeof(first));
        if (json)
            fprintf(out, "\"gateways\":%u,", path->nhops);
        else
            fprintf(out,
                    "%s: proxied address; the first hop is %s "
                    "(%u gateway(s))\n",
                    addr, first, path->nhops);
        st = explain_uri(table, &path->hops[0], first, json, out);
    } else {
        st = explain_uri(table, &path->target, addr, json, out);
    }
out_free:
    if (json)
        fprintf(out, "}\n");
    free(path);
    return st;
}

cw_status_t cw_route_table_explain(struct cw_route_table *table,
                                   const char *addr, FILE *out)
{
    return explain(table, addr, false, out);
}

cw_status_t cw_route_table_explain_json(struct cw_route_table *table,
                                        const char *addr, FILE *out)
{
    return explain(table, addr, true, out);
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
