/*
 * Admin "peers": who the gateway talks to.  Clients are the sources of
 * requests: those holding requests now (admission's gw_source, with what
 * they have in flight and queued) and those seen lately (gw_peer, kept per
 * worker after their last request ended, the least recently active
 * dropped).  Next hops are the gateways and service backends of the route
 * table (with their state, health checks and load) and every address the
 * workers' caches resolved to forward to (delivered directly), with the
 * forwards in flight to each and when one last went there.  Both lists
 * are sorted by last activity and cut at a limit, with a count of the
 * rest, so that a gateway with 10^5 callers answers in bounded size.
 * Runs under every worker's lock (the control plane).
 */
#include "gw_int.h"
#include "cw_json.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct gw_client_row {
    const char *addr;
    uint64_t workers; /* bit k: known to worker k */
    unsigned inflight, queued;
    uint64_t requests, last_ns;
};

struct gw_hop_row {
    const char *addr;
    const char *kind;       /* gateway, backend, direct */
    const char *state;      /* up, down, ejected, "-" (direct) */
    const struct gw_hc *hc; /* its health checks, or NULL */
    unsigned inflight;      /* forwards in flight to it */
    unsigned rank;          /* 0: the route table's, 1: a cache's */
    uint64_t last_ns;       /* a forward last went there (0: none) */
};

/* Monotonic @p ns as wall-clock time: ISO-8601 and seconds ago. */
struct gw_clock {
    uint64_t mono_ns;
    int64_t wall_s;
};

static void gw_when(const struct gw_clock *c, uint64_t ns, char *iso,
                    size_t len, double *ago_p)
{
    double ago = ns == 0 || ns > c->mono_ns ? 0 : (c->mono_ns - ns) / 1e9;

    *ago_p = ago;
    if (ns == 0)
        snprintf(iso, len, "-");
    else
        gw_iso_time(c->wall_s - (int64_t)(ago + 0.5), iso, len);
}

static int gw_client_cmp_addr(const void *a, const void *b)
{
    return strcmp(((const struct gw_client_row *)a)->addr,
                  ((const struct gw_client_row *)b)->addr);
}

static int gw_client_cmp(const void *a, const void *b)
{
    const struct gw_client_row *x = a, *y = b;

    if (x->last_ns != y->last_ns)
        return x->last_ns > y->last_ns ? -1 : 1;
    return strcmp(x->addr, y->addr);
}

/* By address only: a lookup in the rows, one an address. */
static int gw_hop_cmp_key(const void *a, const void *b)
{
    return strcmp(((const struct gw_hop_row *)a)->addr,
                  ((const struct gw_hop_row *)b)->addr);
}

/* By address; the table's row of an address before the caches'. */
static int gw_hop_cmp_addr(const void *a, const void *b)
{
    const struct gw_hop_row *x = a, *y = b;
    int c = strcmp(x->addr, y->addr);

    return c != 0 ? c : (int)x->rank - (int)y->rank;
}

static int gw_hop_cmp_recent(const void *a, const void *b)
{
    const struct gw_hop_row *x = a, *y = b;

    if (x->last_ns != y->last_ns)
        return x->last_ns > y->last_ns ? -1 : 1;
    return strcmp(x->addr, y->addr);
}

/* Every client of every worker: the active sources, then the idle ones
 * remembered; one row an address (a caller's first request reaches one
 * worker, the rest the worker it was given). */
static struct gw_client_row *gw_clients(struct gw *gw, size_t *n_p)
{
    struct gw_client_row *rows;
    size_t n = 0, m, cap = 0;

    for (unsigned k = 0; k < gw->nshards; k++)
        cap += cw_htable_count(&gw->shards[k].srcs) +
               cw_htable_count(&gw->shards[k].peers);
    rows = calloc(cap ? cap : 1, sizeof(*rows));
    if (rows == NULL)
        return NULL;
    for (unsigned k = 0; k < gw->nshards; k++) {
        struct gw_shard *w = &gw->shards[k];
        const struct cw_hnode *h;

        for (h = cw_htable_oldest(&w->srcs); h != NULL;
             h = cw_htable_newer(h)) {
            const struct gw_source *s =
                CW_HNODE_ENTRY(h, struct gw_source, node);
            const struct cw_hnode *ph;
            struct gw_client_row *r;

            if (s == w->parked) /* idle: listed from its peer record */
                continue;
            ph = cw_htable_find_str(&w->peers, s->key);
            r = &rows[n++];

            r->addr = s->key;
            r->workers = 1ull << k;
            r->inflight = s->inflight;
            r->queued = s->queued;
            r->requests = s->requests;
            r->last_ns = s->last_ns;
            if (ph != NULL)
                r->requests +=
                    CW_HNODE_ENTRY(ph, struct gw_peer, node)->requests;
        }
        for (h = cw_htable_oldest(&w->peers); h != NULL;
             h = cw_htable_newer(h)) {
            const struct gw_peer *p = CW_HNODE_ENTRY(h, struct gw_peer, node);
            const struct cw_hnode *sh = cw_htable_find_str(&w->srcs, p->key);

            if (sh != NULL &&
                CW_HNODE_ENTRY(sh, struct gw_source, node) != w->parked)
                continue; /* active: listed above */
            rows[n++] = (struct gw_client_row){
                .addr = p->key,
                .workers = 1ull << k,
                .requests = p->requests,
                .last_ns = p->last_ns,
            };
        }
    }
    qsort(rows, n, sizeof(*rows), gw_client_cmp_addr);
    m = 0;
    for (size_t i = 0; i < n; i++) {
        struct gw_client_row *r = m > 0 ? &rows[m - 1] : NULL;

        if (r != NULL && strcmp(r->addr, rows[i].addr) == 0) {
            r->workers |= rows[i].workers;
            r->inflight += rows[i].inflight;
            r->queued += rows[i].queued;
            r->requests += rows[i].requests;
            if (rows[i].last_ns > r->last_ns)
                r->last_ns = rows[i].last_ns;
            continue;
        }
        rows[m++] = rows[i];
    }
    qsort(rows, m, sizeof(*rows), gw_client_cmp);
    *n_p = m;
    return rows;
}

static const struct gw_hc *gw_hc_of(const struct gw *gw, bool backend,
                                    unsigned a, unsigned b)
{
    for (unsigned i = 0; i < gw->nhcs; i++) {
        const struct gw_hc *hc = &gw->hcs[i];
        if (hc->is_backend == backend &&
            (backend ? hc->service == a && hc->backend == b : hc->nexthop == a))
            return hc;
    }
    return NULL;
}

/* The table's gateways and backends and what the workers' address caches
 * hold, one row an address (a table row takes a cache entry's time);
 * forwards in flight counted per address. */
static struct gw_hop_row *gw_hops(struct gw *gw, size_t *n_p)
{
    const struct cw_config *cfg = gw->cfg;
    unsigned nh = cw_route_table_nexthop_count(gw->table);
    size_t n = 0, cap = nh, m;
    struct gw_hop_row *rows;

    for (size_t s = 0; s < cfg->nservices; s++)
        cap += cfg->services[s].backends.n;
    for (unsigned k = 0; k < gw->nshards; k++) {
        gw_alock(&gw->shards[k]);
        cap += cw_htable_count(&gw->shards[k].addrs);
    }
    rows = calloc(cap ? cap : 1, sizeof(*rows));
    if (rows == NULL)
        goto out_unlock;
    for (unsigned id = 0; id < nh; id++) {
        const char *name = cw_route_table_nexthop_name(gw->table, id);

        if (name == NULL || strstr(name, "://") == NULL)
            continue; /* a network of ours: delivered directly */
        rows[n++] = (struct gw_hop_row){
            .addr = name,
            .kind = "gateway",
            .state =
                cw_route_table_nexthop_is_up(gw->table, id) ? "up" : "down",
            .hc = gw_hc_of(gw, false, id, 0),
        };
    }
    for (size_t s = 0; s < cfg->nservices; s++)
        for (size_t b = 0; b < cfg->services[s].backends.n; b++)
            rows[n++] = (struct gw_hop_row){
                .addr = cfg->services[s].backends.v[b],
                .kind = "backend",
                .state = cw_route_table_backend_is_up(gw->table, (unsigned)s,
                                                      (unsigned)b)
                             ? "up"
                             : "ejected",
                .hc = gw_hc_of(gw, true, (unsigned)s, (unsigned)b),
            };
    for (unsigned k = 0; k < gw->nshards; k++)
        for (const struct cw_hnode *h = cw_htable_oldest(&gw->shards[k].addrs);
             h != NULL; h = cw_htable_newer(h)) {
            const struct gw_addr_ent *e =
                CW_HNODE_ENTRY(h, const struct gw_addr_ent, node);
            rows[n++] = (struct gw_hop_row){
                .addr = e->key,
                .kind = "direct",
                .state = "-",
                .rank = 1,
                .last_ns = e->last_ns,
            };
        }
    /* One row an address: the table's first, the latest time. */
    qsort(rows, n, sizeof(*rows), gw_hop_cmp_addr);
    m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m > 0 && strcmp(rows[m - 1].addr, rows[i].addr) == 0) {
            if (rows[i].last_ns > rows[m - 1].last_ns)
                rows[m - 1].last_ns = rows[i].last_ns;
            continue;
        }
        rows[m++] = rows[i];
    }
    n = m;
    for (unsigned k = 0; k < gw->nshards; k++) {
        struct nau_list *l;

        nau_list_for_each(l, &gw->shards[k].fwds)
        {
            const struct gw_fwd *f = nau_container_of(l, struct gw_fwd, link);
            struct gw_hop_row key = {.addr = f->next_addr}, *r;

            if (f->next_addr[0] == '\0')
                continue;
            r = bsearch(&key, rows, n, sizeof(*rows), gw_hop_cmp_key);
            if (r != NULL)
                r->inflight++;
        }
    }
    qsort(rows, n, sizeof(*rows), gw_hop_cmp_recent);
    *n_p = n;
out_unlock:
    for (unsigned k = gw->nshards; k-- > 0;)
        gw_aunlock(&gw->shards[k]);
    return rows;
}

static const char *gw_hc_health(const struct gw_hc *hc)
{
    if (hc == NULL)
        return "-";
    if (hc->last == CW_NOT_READY)
        return "unknown";
    return gw_status_is_transport(hc->last) ? "failing" : "ok";
}

/* What "peers" shows: both lists, sorted, and how many rows of each. */
struct gw_peers_view {
    struct gw_clock clock;
    const struct gw_client_row *cl;
    size_t ncl;
    const struct gw_hop_row *hop;
    size_t nhop;
    unsigned limit;
};

static void gw_peers_json(FILE *out, const struct gw_peers_view *v)
{
    char iso[32];
    double ago;

    fprintf(out, "{\"clients\":{\"total\":%zu,\"shown\":%zu,\"list\":[", v->ncl,
            v->ncl < v->limit ? v->ncl : v->limit);
    for (size_t i = 0; i < v->ncl && i < v->limit; i++) {
        const struct gw_client_row *r = &v->cl[i];

        gw_when(&v->clock, r->last_ns, iso, sizeof(iso), &ago);
        fprintf(out, "%s{\"address\":", i ? "," : "");
        cw_json_str(out, r->addr);
        fprintf(out, ",\"workers\":[");
        for (unsigned k = 0, first = 1; k < 64; k++)
            if (r->workers & (1ull << k)) {
                fprintf(out, "%s%u", first ? "" : ",", k);
                first = 0;
            }
        fprintf(out,
                "],\"inflight\":%u,\"queued\":%u,\"requests\":%" PRIu64
                ",\"last_activity\":",
                r->inflight, r->queued, r->requests);
        if (r->last_ns != 0)
            fprintf(out, "\"%s\",\"idle_s\":%.3f}", iso, ago);
        else
            fprintf(out, "null,\"idle_s\":null}");
    }
    fprintf(out, "]},\"nexthops\":{\"total\":%zu,\"shown\":%zu,\"list\":[",
            v->nhop, v->nhop < v->limit ? v->nhop : v->limit);
    for (size_t i = 0; i < v->nhop && i < v->limit; i++) {
        const struct gw_hop_row *r = &v->hop[i];

        gw_when(&v->clock, r->last_ns, iso, sizeof(iso), &ago);
        fprintf(out, "%s{\"address\":", i ? "," : "");
        cw_json_str(out, r->addr);
        fprintf(out,
                ",\"kind\":\"%s\",\"state\":\"%s\",\"inflight\":%u,"
                "\"last_activity\":",
                r->kind, r->state, r->inflight);
        if (r->last_ns != 0)
            fprintf(out, "\"%s\",\"idle_s\":%.3f", iso, ago);
        else
            fprintf(out, "null,\"idle_s\":null");
        fprintf(out, ",\"health\":\"%s\"", gw_hc_health(r->hc));
        if (r->hc != NULL) {
            gw_when(&v->clock, r->hc->last_ns, iso, sizeof(iso), &ago);
            fprintf(out,
                    ",\"pings_ok\":%" PRIu64 ",\"pings_failed\":%" PRIu64
                    ",\"last_check\":",
                    r->hc->ok, r->hc->fail);
            if (r->hc->last_ns != 0)
                fprintf(out,
                        "\"%s\",\"last_check_status\":\"%s\","
                        "\"last_rtt_us\":%.1f",
                        iso, cw_status_name(r->hc->last),
                        r->hc->last_rtt_ns / 1e3);
            else
                fprintf(out, "null,\"last_check_status\":null,"
                             "\"last_rtt_us\":null");
        }
        fputc('}', out);
    }
    fprintf(out, "]}}\n");
}

static void gw_peers_text(FILE *out, const struct gw_peers_view *v)
{
    char iso[32];
    double ago;

    fprintf(out, "CLIENTS (%zu)\n%-44s %7s %8s %6s %10s  %s\n", v->ncl,
            "ADDRESS", "WORKERS", "INFLIGHT", "QUEUED", "REQUESTS",
            "LAST ACTIVITY");
    for (size_t i = 0; i < v->ncl && i < v->limit; i++) {
        const struct gw_client_row *r = &v->cl[i];

        gw_when(&v->clock, r->last_ns, iso, sizeof(iso), &ago);
        fprintf(out, "%-44s %7u %8u %6u %10" PRIu64 "  %s (%.1f s ago)\n",
                r->addr, (unsigned)__builtin_popcountll(r->workers),
                r->inflight, r->queued, r->requests, iso, ago);
    }
    if (v->ncl > v->limit)
        fprintf(out, "... and %zu more (cwctl peers --limit N)\n",
                v->ncl - v->limit);
    fprintf(out, "\nNEXT HOPS (%zu)\n%-44s %-8s %-7s %8s %-8s %s\n", v->nhop,
            "ADDRESS", "KIND", "STATE", "INFLIGHT", "HEALTH", "LAST ACTIVITY");
    for (size_t i = 0; i < v->nhop && i < v->limit; i++) {
        const struct gw_hop_row *r = &v->hop[i];

        gw_when(&v->clock, r->last_ns, iso, sizeof(iso), &ago);
        fprintf(out, "%-44s %-8s %-7s %8u %-8s %s", r->addr, r->kind, r->state,
                r->inflight, gw_hc_health(r->hc), iso);
        if (r->last_ns != 0)
            fprintf(out, " (%.1f s ago)", ago);
        fputc('\n', out);
    }
    if (v->nhop > v->limit)
        fprintf(out, "... and %zu more (cwctl peers --limit N)\n",
                v->nhop - v->limit);
}

void gw_admin_peers(struct gw *gw, FILE *out, bool json, unsigned limit)
{
    struct gw_client_row *cl;
    struct gw_hop_row *hop;
    struct gw_peers_view v = {
        .clock = {.mono_ns = cw_now_ns(), .wall_s = (int64_t)time(NULL)},
        .limit = limit,
    };

    GW_ASSERT_WORKERS_LOCKED(gw);
    cl = gw_clients(gw, &v.ncl);
    hop = gw_hops(gw, &v.nhop);
    if (cl == NULL || hop == NULL) {
        fprintf(out, "ERR peers: out of memory\n");
        goto out;
    }
    v.cl = cl;
    v.hop = hop;
    fprintf(out, "OK\n");
    if (json)
        gw_peers_json(out, &v);
    else
        gw_peers_text(out, &v);
out:
    free(hop);
    free(cl);
}
