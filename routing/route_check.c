/* Several gateways' configs checked together: routing loops, next hops
 * that are no gateway's network, dead ends and missing return routes. */
#include "routing_int.h"

#include <stdlib.h>
#include <string.h>

#define CHK_MAX_WORK 200000 /* route steps explored, to bound the search */

struct chk_step {
    size_t g;
    unsigned route;
};

struct chk {
    const struct cw_config *const *cfgs;
    struct cw_route_table **t;
    size_t n;
    struct cw_config_diag *diag;
    char **seen; /* messages already reported */
    size_t nseen;
    unsigned problems;
    unsigned long work;
    bool oom;
};

static void chk_report(struct chk *c, const char *file, unsigned line,
                       const char *msg)
{
    char *key;
    size_t len = strlen(file) + strlen(msg) + 16;
    char **ns;

    key = malloc(len);
    if (key == NULL) {
        c->oom = true;
        return;
    }
    snprintf(key, len, "%s:%u:%s", file, line, msg);
    for (size_t i = 0; i < c->nseen; i++) {
        if (strcmp(c->seen[i], key) == 0) {
            free(key);
            return;
        }
    }
    ns = realloc(c->seen, (c->nseen + 1) * sizeof(*ns));
    if (ns == NULL) {
        free(key);
        c->oom = true;
        return;
    }
    c->seen = ns;
    c->seen[c->nseen++] = key;
    c->problems++;
    cw_config_diag_add(c->diag, file, line, 0, "%s", msg);
}

/* The gateway that owns a network with exactly this address, or -1. */
static long owner_of(const struct chk *c, const char *addr)
{
    struct cw_uri uri;

    if (cw_uri_parse(addr, &uri) != CW_OK)
        return -1;
    for (size_t g = 0; g < c->n; g++)
        for (size_t i = 0; i < c->cfgs[g]->nnetworks; i++)
            if (cw_uri_equal(&c->cfgs[g]->networks[i].uri, &uri))
                return (long)g;
    return -1;
}

/* A concrete address standing for a pattern: wildcard parts stay "*",
 * which only wildcard patterns match. */
static void representative(const struct cw_addr_pattern *pat,
                           struct cw_uri *uri)
{
    memset(uri, 0, sizeof(*uri));
    snprintf(uri->plugin, sizeof(uri->plugin), "%s", pat->plugin);
    snprintf(uri->protocol, sizeof(uri->protocol), "%s", pat->protocol);
    switch (pat->kind) {
    case CW_PATTERN_PREFIX: {
        char ip[64];
        if (pat->family == 4)
            snprintf(ip, sizeof(ip), "%u.%u.%u.%u", pat->ip[0], pat->ip[1],
                     pat->ip[2], pat->ip[3]);
        else {
            size_t off = 0;
            for (int i = 0; i < 16; i += 2)
                off += (size_t)snprintf(
                    ip + off, sizeof(ip) - off, "%s%x", i ? ":" : "",
                    (unsigned)(pat->ip[i] << 8 | pat->ip[i + 1]));
        }
        snprintf(uri->location, sizeof(uri->location), "%s", ip);
        break;
    }
    case CW_PATTERN_HOSTPORT:
        snprintf(uri->location, sizeof(uri->location),
                 strchr(pat->host, ':') ? "[%s]:%u" : "%s:%u", pat->host,
                 pat->port);
        break;
    case CW_PATTERN_HOST:
    case CW_PATTERN_EXACT:
        snprintf(uri->location, sizeof(uri->location), "%s", pat->host);
        break;
    default:
        snprintf(uri->location, sizeof(uri->location), "*");
        break;
    }
}

static const char *gw_name(const struct chk *c, size_t g)
{
    return c->cfgs[g]->gateway.name ? c->cfgs[g]->gateway.name : "?";
}

static void report_loop(struct chk *c, const struct chk_step *steps,
                        size_t from, size_t to, const char *dest)
{
    char msg[1536];
    size_t off;
    size_t start = from;
    size_t len = to - from;

    /* Rotate so the same cycle found from any of its routes reads the
     * same and is reported once. */
    for (size_t k = from; k < to; k++)
        if (steps[k].g < steps[start].g ||
            (steps[k].g == steps[start].g &&
             steps[k].route < steps[start].route))
            start = k;
    off = (size_t)snprintf(msg, sizeof(msg), "routing loop for %s:", dest);
    for (size_t i = 0; i < len && off < sizeof(msg); i++) {
        const struct chk_step *s = &steps[from + (start - from + i) % len];
        const struct rt_route *r = &c->t[s->g]->routes[s->route];
        off +=
            (size_t)snprintf(msg + off, sizeof(msg) - off, " %s (%s:%u) -> %s;",
                             gw_name(c, s->g), r->loc.file, r->loc.line,
                             c->t[s->g]->nexthops[r->nexthop].name);
    }
    if (off < sizeof(msg))
        snprintf(msg + off, sizeof(msg) - off, " back to %s",
                 gw_name(c, steps[start].g));
    {
        const struct chk_step *s = &steps[start];
        const struct rt_route *r = &c->t[s->g]->routes[s->route];
        chk_report(c, r->loc.file, r->loc.line, msg);
    }
}

static void walk(struct chk *c, size_t g, const struct cw_uri *dest,
                 const char *dest_text, struct chk_step *steps, size_t depth);

/* Follow route ri of gateway g (already chosen for dest). */
static void follow(struct chk *c, size_t g, unsigned ri,
                   const struct cw_uri *dest, const char *dest_text,
                   struct chk_step *steps, size_t depth)
{
    const struct rt_route *r = &c->t[g]->routes[ri];
    const struct rt_nexthop *nh = &c->t[g]->nexthops[r->nexthop];
    char msg[1024];
    long j;

    if (++c->work > CHK_MAX_WORK || !nh->is_gateway)
        return;
    j = owner_of(c, nh->name);
    if (j < 0) {
        snprintf(msg, sizeof(msg),
                 "unreachable next hop: gateway %s of the "
                 "route to %s is not a network address of any loaded "
                 "gateway",
                 nh->name, r->dest);
        chk_report(c, r->loc.file, r->loc.line, msg);
        return;
    }
    steps[depth].g = g;
    steps[depth].route = ri;
    for (size_t k = 0; k <= depth; k++) {
        if (steps[k].g == (size_t)j) {
            report_loop(c, steps, k, depth + 1, dest_text);
            return;
        }
    }
    walk(c, (size_t)j, dest, dest_text, steps, depth + 1);
}

static void walk(struct chk *c, size_t g, const struct cw_uri *dest,
                 const char *dest_text, struct chk_step *steps, size_t depth)
{
    struct rt_match_set *set;
    unsigned best[64];
    size_t nbest;
    char msg[1024];

    if (depth >= c->n || c->work > CHK_MAX_WORK)
        return;
    set = malloc(sizeof(*set));
    if (set == NULL) {
        c->oom = true;
        return;
    }
    rt_match(c->t[g], dest, set);
    /* A wildcard plugin or protocol stands for many fabrics; the next
     * gateway may well serve some of them without a wildcard route, so
     * only a concrete destination can be called a dead end. */
    if (set->n == 0 &&
        (strcmp(dest->plugin, "*") == 0 || strcmp(dest->protocol, "*") == 0)) {
        free(set);
        return;
    }
    if (set->n == 0) {
        const struct chk_step *prev = &steps[depth - 1];
        const struct rt_route *pr = &c->t[prev->g]->routes[prev->route];
        snprintf(msg, sizeof(msg),
                 "dead end: %s (%s) has no route to %s, "
                 "which this route sends to it",
                 gw_name(c, g), c->cfgs[g]->path, dest_text);
        chk_report(c, pr->loc.file, pr->loc.line, msg);
        free(set);
        return;
    }
    nbest = rt_group_best(c->t[g], set->g[0], best, 64);
    free(set);
    for (size_t k = 0; k < nbest; k++)
        follow(c, g, best[k], dest, dest_text, steps, depth);
}

/* Can gateway g get a message to dest (delivered directly somewhere)? */
static bool reaches(struct chk *c, size_t g, const struct cw_uri *dest,
                    size_t *visited, size_t nvisited)
{
    struct rt_match_set *set;
    unsigned best[64];
    size_t nbest;
    bool ok = false;

    if (nvisited > c->n || ++c->work > CHK_MAX_WORK)
        return true; /* give up quietly rather than report a guess */
    for (size_t k = 0; k < nvisited; k++)
        if (visited[k] == g)
            return false;
    visited[nvisited] = g;
    set = malloc(sizeof(*set));
    if (set == NULL) {
        c->oom = true;
        return true;
    }
    rt_match(c->t[g], dest, set);
    nbest = set->n ? rt_group_best(c->t[g], set->g[0], best, 64) : 0;
    free(set);
    for (size_t k = 0; k < nbest && !ok; k++) {
        const struct rt_route *r = &c->t[g]->routes[best[k]];
        const struct rt_nexthop *nh = &c->t[g]->nexthops[r->nexthop];
        long j;
        if (!nh->is_gateway)
            return true;
        j = owner_of(c, nh->name);
        if (j >= 0)
            ok = reaches(c, (size_t)j, dest, visited, nvisited + 1);
    }
    return ok;
}

static void check_return(struct chk *c, size_t g, size_t ci)
{
    const struct cw_config *cfg = c->cfgs[g];
    const struct cw_config_route *r = &cfg->routes[ci];
    size_t visited[64];
    char msg[1024];
    long j;

    if (r->gateway == NULL)
        return;
    j = owner_of(c, r->gateway);
    if (j < 0 || (size_t)j == g)
        return;
    for (size_t i = 0; i < cfg->nnetworks; i++) {
        const struct cw_config_network *in = &cfg->networks[i];
        if ((int)i == r->network || c->n > 64)
            continue;
        if (reaches(c, (size_t)j, &in->uri, visited, 0))
            continue;
        snprintf(msg, sizeof(msg),
                 "missing return route: %s (%s) forwards "
                 "%s to %s (%s), which has no route back to %s (network %s "
                 "of %s)",
                 gw_name(c, g), cfg->path, r->dest, gw_name(c, (size_t)j),
                 c->cfgs[j]->path, in->address, in->name, gw_name(c, g));
        chk_report(c, cfg->path, r->loc.line, msg);
    }
}

cw_status_t cw_route_check_set(const struct cw_config *const *cfgs, size_t n,
                               struct cw_config_diag *diag)
{
    struct chk c;
    struct chk_step *steps;
    cw_status_t st = CW_OK;

    if (cfgs == NULL || n == 0)
        return CW_INVALID_ARG;
    memset(&c, 0, sizeof(c));
    c.cfgs = cfgs;
    c.n = n;
    c.diag = diag;
    c.t = calloc(n, sizeof(*c.t));
    steps = calloc(n + 1, sizeof(*steps));
    if (c.t == NULL || steps == NULL) {
        st = CW_NOMEM;
        goto out;
    }
    for (size_t g = 0; g < n; g++) {
        st = cw_route_table_build(cfgs[g], &c.t[g]);
        if (st != CW_OK)
            goto out;
    }
    for (size_t g = 0; g < n; g++) {
        struct cw_route_table *t = c.t[g];
        for (size_t ri = 0; ri < t->nwritten; ri++) {
            struct cw_uri rep;
            char text[CW_URI_MAX + 8];
            if (!t->nexthops[t->routes[ri].nexthop].is_gateway)
                continue;
            representative(&cfgs[g]->routes[t->routes[ri].cfg_index].pattern,
                           &rep);
            snprintf(text, sizeof(text), "%s", t->routes[ri].dest);
            c.work = 0;
            follow(&c, g, (unsigned)ri, &rep, text, steps, 0);
            c.work = 0;
            check_return(&c, g, (size_t)t->routes[ri].cfg_index);
        }
    }
    if (c.oom)
        st = CW_NOMEM;
    else if (c.problems)
        st = CW_CONFIG;
out:
    for (size_t i = 0; i < c.nseen; i++)
        free(c.seen[i]);
    free(c.seen);
    for (size_t g = 0; c.t && g < n; g++)
        cw_route_table_unref(c.t[g]);
    free(c.t);
    free(steps);
    return st;
}
