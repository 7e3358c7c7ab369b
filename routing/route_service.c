/* Services (svc:<name> -> backend by policy) and the ACL. */
#include "routing_int.h"

#include <stdlib.h>
#include <string.h>

cw_status_t rt_build_services(struct cw_route_table *t,
                              const struct cw_config *cfg)
{
    if (cfg->nservices == 0)
        return CW_OK;
    t->services = calloc(cfg->nservices, sizeof(*t->services));
    if (t->services == NULL)
        return CW_NOMEM;
    for (size_t i = 0; i < cfg->nservices; i++) {
        const struct cw_config_service *cs = &cfg->services[i];
        struct rt_service *s = &t->services[i];
        t->nservices++;
        s->name = strdup(cs->name);
        s->policy = cs->policy;
        atomic_init(&s->rr, 0);
        s->backends =
            calloc(cs->backends.n ? cs->backends.n : 1, sizeof(*s->backends));
        if (s->name == NULL || s->backends == NULL)
            return CW_NOMEM;
        for (size_t b = 0; b < cs->backends.n; b++) {
            struct rt_backend *be = &s->backends[b];
            be->address = strdup(cs->backends.v[b]);
            if (be->address == NULL)
                return CW_NOMEM;
            s->nbackends++;
            atomic_init(&be->ejected, false);
            atomic_init(&be->fails, 0);
            atomic_init(&be->successes, 0);
            atomic_init(&be->inflight, 0);
        }
        if (rt_hash_put(&t->service_index, s->name, s) != CW_OK)
            return CW_NOMEM;
    }
    return CW_OK;
}

static bool be_ok(struct rt_backend *be)
{
    return !atomic_load_explicit(&be->ejected, memory_order_relaxed);
}

static size_t pick_round_robin(struct rt_service *s)
{
    size_t n = s->nbackends;
    size_t start = atomic_fetch_add(&s->rr, 1) % n;

    for (size_t k = 0; k < n; k++) {
        size_t i = (start + k) % n;
        if (be_ok(&s->backends[i]))
            return i;
    }
    return start;
}

static size_t pick_least(struct rt_service *s)
{
    size_t n = s->nbackends;
    size_t start = atomic_fetch_add(&s->rr, 1) % n;
    size_t best = start;
    unsigned best_load = ~0u;
    bool any_ok = false;

    for (size_t k = 0; k < n; k++) {
        size_t i = (start + k) % n;
        unsigned l = atomic_load(&s->backends[i].inflight);
        if (!be_ok(&s->backends[i]))
            continue;
        if (!any_ok || l < best_load) {
            best = i;
            best_load = l;
            any_ok = true;
        }
    }
    return best;
}

/* Rendezvous hashing: a caller keeps its backend while it stays in
 * service, and only the callers of an ejected backend move. */
static size_t pick_hash(struct rt_service *s, const char *caller)
{
    uint64_t seed = rt_hash_seeded(caller ? caller : "", 0x9e3779b97f4a7c15ull);
    size_t best = 0;
    uint64_t best_w = 0;
    bool any_ok = false;

    for (size_t i = 0; i < s->nbackends; i++) {
        uint64_t w = rt_hash_seeded(s->backends[i].address, seed);
        if (!be_ok(&s->backends[i]))
            continue;
        if (!any_ok || w > best_w) {
            best = i;
            best_w = w;
            any_ok = true;
        }
    }
    if (!any_ok) {
        for (size_t i = 0; i < s->nbackends; i++) {
            uint64_t w = rt_hash_seeded(s->backends[i].address, seed);
            if (i == 0 || w > best_w) {
                best = i;
                best_w = w;
            }
        }
    }
    return best;
}

cw_status_t cw_route_table_service_pick(struct cw_route_table *table,
                                        const char *name, const char *caller,
                                        struct cw_service_pick *pick_p)
{
    struct rt_service *s;
    size_t b;

    if (table == NULL || name == NULL || pick_p == NULL)
        return CW_INVALID_ARG;
    if (strncmp(name, "svc:", 4) == 0)
        name += 4;
    s = rt_hash_get(&table->service_index, name);
    if (s == NULL || s->nbackends == 0)
        return CW_NOENT;
    switch (s->policy) {
    case CW_POLICY_LEAST_INFLIGHT:
        b = pick_least(s);
        break;
    case CW_POLICY_HASH:
        b = pick_hash(s, caller);
        break;
    default:
        b = pick_round_robin(s);
        break;
    }
    pick_p->service = (unsigned)(s - table->services);
    pick_p->backend = (unsigned)b;
    pick_p->address = s->backends[b].address;
    return CW_OK;
}

static struct rt_backend *backend(struct cw_route_table *t, unsigned service,
                                  unsigned b)
{
    if (t == NULL || service >= t->nservices ||
        b >= t->services[service].nbackends)
        return NULL;
    return &t->services[service].backends[b];
}

void cw_route_table_backend_set_ejected(struct cw_route_table *table,
                                        unsigned service, unsigned b,
                                        bool ejected)
{
    struct rt_backend *be = backend(table, service, b);

    if (be == NULL)
        return;
    atomic_store(&be->ejected, ejected);
    atomic_store(&be->fails, 0);
    atomic_store(&be->successes, 0);
}

bool cw_route_table_backend_is_up(const struct cw_route_table *table,
                                  unsigned service, unsigned b)
{
    struct rt_backend *be = backend((struct cw_route_table *)table, service, b);

    return be != NULL && be_ok(be);
}

unsigned cw_route_table_backend_inflight(const struct cw_route_table *table,
                                         unsigned service, unsigned b)
{
    struct rt_backend *be = backend((struct cw_route_table *)table, service, b);

    return be ? atomic_load(&be->inflight) : 0;
}

const char *cw_route_table_backend_address(const struct cw_route_table *table,
                                           unsigned service, unsigned b)
{
    struct rt_backend *be = backend((struct cw_route_table *)table, service, b);

    return be ? be->address : NULL;
}

enum cw_health_change
cw_route_table_backend_report(struct cw_route_table *table, unsigned service,
                              unsigned b, bool success)
{
    struct rt_backend *be = backend(table, service, b);

    if (be == NULL)
        return CW_HEALTH_SAME;
    return rt_health_report(&be->ejected, true, &be->fails, &be->successes,
                            success, table->eject_after, table->recover_after);
}

void cw_route_table_backend_load(struct cw_route_table *table, unsigned service,
                                 unsigned b, int delta)
{
    struct rt_backend *be = backend(table, service, b);

    if (be == NULL)
        return;
    if (delta >= 0)
        atomic_fetch_add(&be->inflight, (unsigned)delta);
    else
        atomic_fetch_sub(&be->inflight, (unsigned)-delta);
}

cw_status_t rt_build_acl(struct cw_route_table *t, const struct cw_config *cfg)
{
    t->has_acl = cfg->has_acl;
    if (cfg->nacl == 0)
        return CW_OK;
    t->acl = calloc(cfg->nacl, sizeof(*t->acl));
    if (t->acl == NULL)
        return CW_NOMEM;
    for (size_t i = 0; i < cfg->nacl; i++) {
        const struct cw_config_acl *ca = &cfg->acl[i];
        struct rt_acl *a = &t->acl[i];
        t->nacl++;
        a->from = strdup(ca->from);
        a->to = strdup(ca->to);
        a->allow = calloc(ca->allow.n ? ca->allow.n : 1, sizeof(*a->allow));
        if (a->from == NULL || a->to == NULL || a->allow == NULL)
            return CW_NOMEM;
        for (size_t k = 0; k < ca->allow.n; k++) {
            const char *v = ca->allow.v[k];
            struct rt_allow *al = &a->allow[a->nallow];
            if (strcmp(v, "*") == 0) {
                al->kind = RT_ALLOW_ANY;
            } else if (strcmp(v, "svc:*") == 0) {
                al->kind = RT_ALLOW_SVC_ANY;
            } else if (strncmp(v, "svc:", 4) == 0) {
                al->kind = RT_ALLOW_SVC;
                al->svc = strdup(v + 4);
                if (al->svc == NULL)
                    return CW_NOMEM;
            } else {
                al->kind = RT_ALLOW_PATTERN;
                if (cw_addr_pattern_parse(v, &al->pat, NULL, 0) != CW_OK)
                    return CW_INVALID_ARG;
            }
            a->nallow++;
        }
    }
    return CW_OK;
}

static bool allow_match(const struct rt_allow *al, const char *svc,
                        const struct cw_uri *uri)
{
    switch (al->kind) {
    case RT_ALLOW_ANY:
        return true;
    case RT_ALLOW_SVC_ANY:
        return svc != NULL;
    case RT_ALLOW_SVC:
        return svc != NULL && strcmp(al->svc, svc) == 0;
    case RT_ALLOW_PATTERN:
        return svc == NULL && cw_addr_pattern_match(&al->pat, uri);
    }
    return false;
}

cw_status_t cw_route_table_acl_check(const struct cw_route_table *table,
                                     const char *from, const char *to,
                                     const char *dest)
{
    struct cw_uri uri;

    if (table == NULL || dest == NULL)
        return CW_INVALID_ARG;
    if (strncmp(dest, "svc:", 4) == 0)
        return cw_route_table_acl_check_parsed(table, from, to, dest + 4, NULL);
    if (cw_uri_parse(dest, &uri) != CW_OK)
        return CW_INVALID_ARG;
    return cw_route_table_acl_check_parsed(table, from, to, NULL, &uri);
}

cw_status_t cw_route_table_acl_check_parsed(const struct cw_route_table *table,
                                            const char *from, const char *to,
                                            const char *svc,
                                            const struct cw_uri *uri)
{
    if (table == NULL || (svc == NULL) == (uri == NULL))
        return CW_INVALID_ARG;
    if (!table->has_acl)
        return CW_OK;
    for (size_t i = 0; i < table->nacl; i++) {
        const struct rt_acl *a = &table->acl[i];
        if (strcmp(a->from, "*") != 0 &&
            (from == NULL || strcmp(a->from, from) != 0))
            continue;
        if (to && strcmp(a->to, "*") != 0 && strcmp(a->to, to) != 0)
            continue;
        for (size_t k = 0; k < a->nallow; k++)
            if (allow_match(&a->allow[k], svc, uri))
                return CW_OK;
    }
    return CW_DENIED;
}
