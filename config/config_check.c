/* Checks across keys and sections (references, duplicates, reachability),
 * run after every key was stored, and the reload check. */
#include "config_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Location of key k of item i of section s, falling back to the item. */
static void keyloc(const struct cfg_ctx *ctx, int s, size_t i, int k,
                   const struct cw_config_loc *item, unsigned *line,
                   unsigned *col)
{
    const struct cfg_keyloc *l = &ctx->keylocs[s][i][k];

    *line = l->line ? l->line : item->line;
    *col = l->line ? l->column : item->column;
}

static void names_list(const struct cw_config *cfg, char *buf, size_t len)
{
    size_t off = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < cfg->nnetworks && off < len; i++) {
        bool seen = false;
        if (cfg->networks[i].name == NULL)
            continue;
        for (size_t j = 0; j < i; j++)
            seen = seen ||
                   (cfg->networks[j].name &&
                    strcmp(cfg->networks[j].name, cfg->networks[i].name) == 0);
        if (!seen)
            off += (size_t)snprintf(buf + off, len - off, "%s%s",
                                    off ? ", " : "", cfg->networks[i].name);
    }
}

/* An unknown network name: say which exist and suggest the closest. */
static void bad_network_ref(struct cfg_ctx *ctx, unsigned line, unsigned col,
                            const char *what, const char *name)
{
    const struct cw_config *cfg = ctx->cfg;
    const char *cands[64];
    size_t n = 0;
    char list[512];
    const char *hint;

    for (size_t i = 0; i < cfg->nnetworks && n < 64; i++)
        if (cfg->networks[i].name)
            cands[n++] = cfg->networks[i].name;
    hint = cfg_suggest(name, cands, n);
    names_list(cfg, list, sizeof(list));
    if (hint)
        cfg_error(ctx, line, col,
                  "%s: unknown network '%.64s' (did you mean "
                  "'%s'?)",
                  what, name, hint);
    else
        cfg_error(ctx, line, col, "%s: unknown network '%.64s' (defined: %s)",
                  what, name, n ? list : "none");
}

static void check_networks(struct cfg_ctx *ctx)
{
    struct cw_config *cfg = ctx->cfg;
    char why[CFG_ERR_MAX];
    unsigned line;
    unsigned col;

    if (!cfg->routes_only && cfg->nnetworks == 0 && !ctx->empty &&
        !ctx->sec_bad[SEC_NETWORKS])
        cfg_error(
            ctx,
            ctx->sec_loc[SEC_NETWORKS].line ? ctx->sec_loc[SEC_NETWORKS].line
                                            : 1,
            ctx->sec_loc[SEC_NETWORKS].line ? ctx->sec_loc[SEC_NETWORKS].column
                                            : 1,
            "networks: at least one network is required "
            "(- {name: eth0, address: \"ofi+tcp://10.0.0.1:7000\"})");
    for (size_t i = 0; i < cfg->nnetworks; i++) {
        struct cw_config_network *net = &cfg->networks[i];
        if (!net->loc.line)
            continue;
        if (net->address && cw_uri_parse(net->address, &net->uri) == CW_OK &&
            cfg_addr_check(&net->uri, CFG_ADDR_LISTEN, why, sizeof(why)) !=
                CW_OK) {
            keyloc(ctx, SEC_NETWORKS, i, NET_ADDRESS, &net->loc, &line, &col);
            cfg_error(ctx, line, col, "networks[%zu].address: %s", i, why);
        }
        for (size_t j = 0; j < i; j++) {
            struct cw_config_network *prev = &cfg->networks[j];
            if (net->name && prev->name && strcmp(net->name, prev->name) == 0) {
                keyloc(ctx, SEC_NETWORKS, i, NET_NAME, &net->loc, &line, &col);
                cfg_error(ctx, line, col,
                          "networks[%zu].name: duplicate "
                          "network name '%s' (first defined at line %u)",
                          i, net->name, prev->loc.line);
            }
            if (net->address && prev->address &&
                cw_uri_equal(&net->uri, &prev->uri)) {
                keyloc(ctx, SEC_NETWORKS, i, NET_ADDRESS, &net->loc, &line,
                       &col);
                cfg_error(ctx, line, col,
                          "networks[%zu].address: '%s' is "
                          "already the address of network '%s' (line %u)",
                          i, net->address, prev->name ? prev->name : "?",
                          prev->loc.line);
            }
        }
    }
}

/* Leading bits two IP addresses of one family share. */
static unsigned common_bits(const uint8_t *a, const uint8_t *b, unsigned n)
{
    unsigned bits = 0;

    for (unsigned i = 0; i < n; i++) {
        uint8_t x = a[i] ^ b[i];
        if (x == 0) {
            bits += 8;
            continue;
        }
        while (!(x & 0x80)) {
            bits++;
            x = (uint8_t)(x << 1);
        }
        break;
    }
    return bits;
}

/* Network whose plugin and protocol are those of a gateway address; among
 * several (two subnets on one fabric), the one whose address shares the
 * longest IP prefix with it. */
static int network_for(const struct cw_config *cfg, const struct cw_uri *uri)
{
    char host[CW_URI_LOCATION_MAX];
    uint16_t port;
    uint8_t gfam = 0;
    uint8_t gip[16];
    int best = -1;
    unsigned best_bits = 0;

    if (cw_location_host(uri->location, host, &port, &gfam, gip) != CW_OK)
        gfam = 0;
    for (size_t i = 0; i < cfg->nnetworks; i++) {
        const struct cw_config_network *n = &cfg->networks[i];
        uint8_t nfam = 0;
        uint8_t nip[16];
        unsigned bits = 0;
        if (!n->address || strcmp(n->uri.plugin, uri->plugin) != 0 ||
            strcmp(n->uri.protocol, uri->protocol) != 0)
            continue;
        if (gfam &&
            cw_location_host(n->uri.location, host, &port, &nfam, nip) ==
                CW_OK &&
            nfam == gfam)
            bits = common_bits(gip, nip, gfam == 4 ? 4 : 16);
        if (best < 0 || bits > best_bits) {
            best = (int)i;
            best_bits = bits;
        }
    }
    return best;
}

/* A via route delivers on its network: the gateway looks the destination
 * up there, which only works for addresses of that network's plugin and
 * protocol (ofi:// and ofi+tcp:// are different fabrics to it). */
static void check_via_fabric(struct cfg_ctx *ctx, size_t i, unsigned line,
                             unsigned col)
{
    const struct cw_config_route *r = &ctx->cfg->routes[i];
    const struct cw_config_network *net = &ctx->cfg->networks[r->network];
    const struct cw_addr_pattern *pat = &r->pattern;
    char fabric[CW_URI_PLUGIN_MAX + CW_URI_PROTOCOL_MAX + 1];

    if (net->address == NULL || net->uri.plugin[0] == '\0')
        return; /* the network's own address is already reported */
    if ((strcmp(pat->plugin, "*") == 0 ||
         strcmp(pat->plugin, net->uri.plugin) == 0) &&
        (strcmp(pat->protocol, "*") == 0 ||
         strcmp(pat->protocol, net->uri.protocol) == 0))
        return;
    snprintf(fabric, sizeof(fabric), "%s%s%s", net->uri.plugin,
             net->uri.protocol[0] ? "+" : "", net->uri.protocol);
    cfg_error(ctx, line, col,
              "routes[%zu].via: network '%s' is %s://, "
              "which cannot deliver to dest '%s': a via route carries only "
              "addresses of its network's plugin and protocol (use dest "
              "\"%s://...\", or a gateway: next hop for another fabric)",
              i, net->name, fabric, r->dest, fabric);
}

static void check_route(struct cfg_ctx *ctx, size_t i)
{
    struct cw_config *cfg = ctx->cfg;
    struct cw_config_route *r = &cfg->routes[i];
    char where[48];
    unsigned line;
    unsigned col;
    bool via_given;
    bool gw_given;
    bool dest_ok = false;
    char why[CFG_ERR_MAX];

    snprintf(where, sizeof(where), "routes[%zu]", i);
    r->network = -1;
    if (!r->loc.line)
        return;
    if (r->dest &&
        cw_addr_pattern_parse(r->dest, &r->pattern, NULL, 0) == CW_OK) {
        dest_ok = cfg_fabric_check(r->pattern.plugin, r->pattern.protocol, why,
                                   sizeof(why)) == CW_OK;
        if (!dest_ok) {
            keyloc(ctx, SEC_ROUTES, i, RT_DEST, &r->loc, &line, &col);
            cfg_error(ctx, line, col, "%s.dest: %s", where, why);
        }
    }
    /* Judge what was written, even if a value did not parse. */
    via_given = ctx->keylocs[SEC_ROUTES][i][RT_VIA].line != 0;
    gw_given = ctx->keylocs[SEC_ROUTES][i][RT_GATEWAY].line != 0;
    if (via_given && gw_given) {
        keyloc(ctx, SEC_ROUTES, i, RT_GATEWAY, &r->loc, &line, &col);
        cfg_error(ctx, line, col,
                  "%s: has both 'via' and 'gateway': give "
                  "exactly one (via: a network to deliver on directly, "
                  "gateway: a next-hop address)",
                  where);
        return;
    }
    if (!via_given && !gw_given) {
        cfg_error(ctx, r->loc.line, r->loc.column,
                  "%s: needs 'via' (a "
                  "network to deliver on directly) or 'gateway' (a next-hop "
                  "address)",
                  where);
        return;
    }
    if (r->via == NULL && r->gateway == NULL)
        return; /* the value did not parse; already reported */
    if (r->via) {
        keyloc(ctx, SEC_ROUTES, i, RT_VIA, &r->loc, &line, &col);
        if (cfg->routes_only) {
            if (strcmp(r->via, "direct") != 0)
                cfg_error(ctx, line, col,
                          "%s.via: a client routes file has "
                          "no networks: expected 'direct', got '%.64s'",
                          where, r->via);
            return;
        }
        r->network = cw_config_network_find(cfg, r->via);
        if (r->network < 0) {
            snprintf(where + strlen(where), sizeof(where) - strlen(where),
                     ".via");
            bad_network_ref(ctx, line, col, where, r->via);
        } else if (dest_ok) {
            check_via_fabric(ctx, i, line, col);
        }
        return;
    }
    if (cw_uri_parse(r->gateway, &r->gateway_uri) != CW_OK)
        return; /* already reported by the value parser */
    if (cfg_addr_check(&r->gateway_uri, CFG_ADDR_PEER, why, sizeof(why)) !=
        CW_OK) {
        keyloc(ctx, SEC_ROUTES, i, RT_GATEWAY, &r->loc, &line, &col);
        cfg_error(ctx, line, col, "%s.gateway: %s", where, why);
        return;
    }
    if (cfg->routes_only)
        return;
    keyloc(ctx, SEC_ROUTES, i, RT_GATEWAY, &r->loc, &line, &col);
    for (size_t n = 0; n < cfg->nnetworks; n++) {
        if (cfg->networks[n].address &&
            cw_uri_equal(&cfg->networks[n].uri, &r->gateway_uri)) {
            cfg_error(ctx, line, col,
                      "%s.gateway: '%s' is this gateway's "
                      "own network '%s': use via: %s to deliver directly",
                      where, r->gateway, cfg->networks[n].name,
                      cfg->networks[n].name);
            return;
        }
    }
    r->network = network_for(cfg, &r->gateway_uri);
    if (r->network < 0 && cfg->nnetworks)
        cfg_error(ctx, line, col,
                  "%s.gateway: '%s' is unreachable: no "
                  "network of this gateway uses %s%s%s",
                  where, r->gateway, r->gateway_uri.plugin,
                  r->gateway_uri.protocol[0] ? "+" : "",
                  r->gateway_uri.protocol);
}

static const char *nexthop_of(const struct cw_config_route *r)
{
    return r->via ? r->via : r->gateway ? r->gateway : "";
}

static int route_cmp(const void *a, const void *b)
{
    const struct cw_config_route *x = *(const struct cw_config_route *const *)a;
    const struct cw_config_route *y = *(const struct cw_config_route *const *)b;
    int c = strcmp(x->dest, y->dest);

    if (c == 0)
        c = (x->via != NULL) - (y->via != NULL);
    if (c == 0)
        c = strcmp(nexthop_of(x), nexthop_of(y));
    if (c == 0)
        c = x < y ? -1 : x > y;
    return c;
}

static void check_routes(struct cfg_ctx *ctx)
{
    struct cw_config *cfg = ctx->cfg;
    struct cw_config_route **sorted;
    size_t n = 0;

    for (size_t i = 0; i < cfg->nroutes; i++)
        check_route(ctx, i);
    /* Duplicates (same dest and next hop) by sorting, not pairwise, so
     * that 10 000 routes load quickly. */
    sorted = malloc((cfg->nroutes ? cfg->nroutes : 1) * sizeof(*sorted));
    if (sorted == NULL) {
        cfg_error(ctx, 0, 0, "out of memory");
        return;
    }
    for (size_t i = 0; i < cfg->nroutes; i++)
        if (cfg->routes[i].loc.line && cfg->routes[i].dest &&
            (cfg->routes[i].via || cfg->routes[i].gateway))
            sorted[n++] = &cfg->routes[i];
    qsort(sorted, n, sizeof(*sorted), route_cmp);
    for (size_t i = 1, first = 0; i < n; i++) {
        const struct cw_config_route *p = sorted[first];
        const struct cw_config_route *r = sorted[i];
        if (strcmp(p->dest, r->dest) != 0 ||
            (p->via != NULL) != (r->via != NULL) ||
            strcmp(nexthop_of(p), nexthop_of(r)) != 0) {
            first = i;
            continue;
        }
        cfg_error(ctx, r->loc.line, r->loc.column,
                  "routes[%zu]: duplicate "
                  "route: same dest '%s' and next hop as the route at line "
                  "%u",
                  (size_t)(r - cfg->routes), r->dest, p->loc.line);
    }
    free(sorted);
}

static void check_services(struct cfg_ctx *ctx)
{
    struct cw_config *cfg = ctx->cfg;
    unsigned line;
    unsigned col;

    for (size_t i = 0; i < cfg->nservices; i++) {
        struct cw_config_service *s = &cfg->services[i];
        if (s->name == NULL)
            continue;
        for (size_t j = 0; j < i; j++) {
            if (cfg->services[j].name &&
                strcmp(cfg->services[j].name, s->name) == 0) {
                keyloc(ctx, SEC_SERVICES, i, SVC_NAME, &s->loc, &line, &col);
                cfg_error(ctx, line, col,
                          "services[%zu].name: duplicate "
                          "service name '%s' (first defined at line %u)",
                          i, s->name, cfg->services[j].loc.line);
                break;
            }
        }
    }
}

static void check_acl(struct cfg_ctx *ctx)
{
    struct cw_config *cfg = ctx->cfg;
    unsigned line;
    unsigned col;
    char where[48];

    for (size_t i = 0; i < cfg->nacl; i++) {
        struct cw_config_acl *a = &cfg->acl[i];
        const char *ends[2] = {a->from, a->to};
        for (int e = 0; e < 2; e++) {
            if (ends[e] == NULL || strcmp(ends[e], "*") == 0 ||
                cw_config_network_find(cfg, ends[e]) >= 0)
                continue;
            keyloc(ctx, SEC_ACL, i, e ? ACL_TO : ACL_FROM, &a->loc, &line,
                   &col);
            snprintf(where, sizeof(where), "acl[%zu].%s", i, e ? "to" : "from");
            bad_network_ref(ctx, line, col, where, ends[e]);
        }
        for (size_t k = 0; k < a->allow.n; k++) {
            const char *v = a->allow.v[k];
            if (strncmp(v, "svc:", 4) != 0 || strcmp(v + 4, "*") == 0 ||
                cw_config_service_find(cfg, v + 4) >= 0)
                continue;
            size_t written = k;
            keyloc(ctx, SEC_ACL, i, ACL_ALLOW, &a->loc, &line, &col);
            for (size_t e = 0; e < ctx->nentries; e++) {
                if (ctx->entries[e].list == &a->allow &&
                    ctx->entries[e].stored == k) {
                    line = ctx->entries[e].line;
                    col = ctx->entries[e].column;
                    written = ctx->entries[e].written;
                }
            }
            {
                const char *cands[64];
                size_t nc = 0;
                const char *hint;
                for (size_t j = 0; j < cfg->nservices && nc < 64; j++)
                    if (cfg->services[j].name)
                        cands[nc++] = cfg->services[j].name;
                hint = cfg_suggest(v + 4, cands, nc);
                cfg_error(ctx, line, col,
                          "acl[%zu].allow[%zu]: unknown "
                          "service '%s'%s%s%s",
                          i, written, v + 4,
                          hint ? " (did you mean 'svc:" : " (not in services)",
                          hint ? hint : "", hint ? "'?)" : "");
            }
        }
    }
}

/* An error about key k of map section s: at the key when it was written,
 * else at the section, else at the top of the file. */
static void section_error(struct cfg_ctx *ctx, int s, int k,
                          const struct cw_config_loc *sec, const char *what,
                          const char *a, const char *rel, const char *other,
                          const char *b)
{
    const struct cfg_keyloc *kl = &ctx->keylocs[s][0][k];
    unsigned line = kl->line ? kl->line : sec->line ? sec->line : 1;
    unsigned col = kl->line ? kl->column : sec->line ? sec->column : 1;

    cfg_error(ctx, line, col, "%s: %s %s %s %s", what, a, rel, other, b);
}

static void check_sections(struct cfg_ctx *ctx)
{
    struct cw_config *cfg = ctx->cfg;
    char a[32];
    char b[32];

    if (cfg->routes_only)
        return;
    if (cfg->buffers.staging / cfg->buffers.chunk < cfg->buffers.depth) {
        cfg_format_size(cfg->buffers.staging, a, sizeof(a));
        cfg_format_size(cfg->buffers.chunk * cfg->buffers.depth, b, sizeof(b));
        section_error(ctx, SEC_BUFFERS, 2, &cfg->buffers.loc, "buffers.staging",
                      a, "cannot hold", "depth x chunk =", b);
    }
    if (cfg->health.timeout_ns > cfg->health.interval_ns) {
        cfg_format_duration(cfg->health.timeout_ns, a, sizeof(a));
        cfg_format_duration(cfg->health.interval_ns, b, sizeof(b));
        section_error(ctx, SEC_HEALTH, 2, &cfg->health.loc, "health.timeout", a,
                      "is longer than", "health.interval", b);
    }
    if (cfg->limits.default_timeout_ns > cfg->limits.max_timeout_ns) {
        cfg_format_duration(cfg->limits.default_timeout_ns, a, sizeof(a));
        cfg_format_duration(cfg->limits.max_timeout_ns, b, sizeof(b));
        section_error(ctx, SEC_LIMITS, 2, &cfg->limits.loc,
                      "limits.default_timeout", a, "is longer than",
                      "limits.max_timeout", b);
    }
}

void cfg_check(struct cfg_ctx *ctx)
{
    check_networks(ctx);
    check_routes(ctx);
    check_services(ctx);
    check_acl(ctx);
    check_sections(ctx);
    cfg_check_admin(ctx);
}

cw_status_t cw_config_check_reload(const struct cw_config *cur,
                                   const struct cw_config *next,
                                   struct cw_config_diag *diag)
{
    const struct cw_config_section *schema = cw_config_schema(NULL);
    size_t before = cw_config_diag_count(diag);
    unsigned bad = 0;

    if (cur == NULL || next == NULL)
        return CW_INVALID_ARG;
    for (int s = 0; s < SEC_COUNT; s++) {
        const struct cw_config_section *sec = &schema[s];
        if (sec->is_list) {
            const char *a = *(char *const *)((const char *)cur + sec->offset);
            const char *b = *(char *const *)((const char *)next + sec->offset);
            size_t na =
                *(const size_t *)((const char *)cur + sec->count_offset);
            size_t nb =
                *(const size_t *)((const char *)next + sec->count_offset);
            bool same = na == nb;
            if (!sec->reload) {
                for (size_t i = 0; same && i < na; i++)
                    for (size_t k = 0; k < sec->nkeys; k++)
                        if (!cfg_value_equal(&sec->keys[k],
                                             a + i * sec->item_size,
                                             b + i * sec->item_size))
                            same = false;
                if (!same) {
                    bad++;
                    cw_config_diag_add(diag, next->path, 1, 1,
                                       "%s: cannot "
                                       "be changed by a reload (restart the "
                                       "gateway)",
                                       sec->name);
                }
                continue;
            }
            /* Items may come and go; an item kept (same name) may change
             * only its reloadable keys. */
            if (strcmp(sec->keys[0].name, "name") != 0)
                continue;
            for (size_t j = 0; j < nb; j++) {
                const char *bj = b + j * sec->item_size;
                const char *bname = *(char *const *)(bj + sec->keys[0].offset);
                const struct cw_config_loc *loc =
                    (const struct cw_config_loc *)bj;
                for (size_t i = 0; i < na; i++) {
                    const char *ai = a + i * sec->item_size;
                    if (strcmp(*(char *const *)(ai + sec->keys[0].offset),
                               bname) != 0)
                        continue;
                    for (size_t k = 1; k < sec->nkeys; k++) {
                        if (sec->keys[k].reload ||
                            cfg_value_equal(&sec->keys[k], ai, bj))
                            continue;
                        bad++;
                        cw_config_diag_add(diag, next->path, loc->line,
                                           loc->column,
                                           "%s[%zu].%s: cannot "
                                           "be changed by a reload (restart "
                                           "the gateway)",
                                           sec->name, j, sec->keys[k].name);
                    }
                }
            }
            continue;
        }
        const void *a = (const char *)cur + sec->offset;
        const void *b = (const char *)next + sec->offset;
        const struct cw_config_loc *loc = b;
        for (size_t k = 0; k < sec->nkeys; k++) {
            if (sec->keys[k].reload || cfg_value_equal(&sec->keys[k], a, b))
                continue;
            bad++;
            cw_config_diag_add(diag, next->path, loc->line ? loc->line : 1,
                               loc->line ? loc->column : 1,
                               "%s.%s: cannot be changed by a reload "
                               "(restart the gateway)",
                               sec->name, sec->keys[k].name);
        }
    }
    (void)before;
    return bad ? CW_CONFIG : CW_OK;
}
