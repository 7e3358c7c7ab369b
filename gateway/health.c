/*
 * Active health checks: every health.interval each next-hop gateway and
 * each service backend gets a "causeway.ping" RPC with health.timeout.  Any
 * answer counts as alive (a backend that does not know the RPC answers
 * CW_NO_RPC, which proves it is there); a transport failure or timeout
 * counts as a failure.  The routing table turns eject_after consecutive
 * failures into "down" and recover_after successes back into "up"; the
 * forward path reports its outcomes to the same counters (passive checks).
 */
#include "gw_int.h"

#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

struct gw_ping {
    struct gw *gw;
    struct cw_route_table *table;
    uint64_t generation;
    unsigned index;
    uint64_t t0;
    /* sent from worker 0's queue (gw_ping_send) */
    struct gw_work work;
    struct gw_shard *sh;
    uint64_t timeout_ms;
    char target[CW_ADDR_STR_MAX];
};

bool gw_health_busy(const struct gw *gw)
{
    return gw->pings_inflight > 0;
}

uint64_t gw_health_next(const struct gw *gw)
{
    uint64_t next = UINT64_MAX;

    if (!gw->cfg->health.enabled || gw->draining)
        return next;
    for (unsigned i = 0; i < gw->nhcs; i++)
        if (!gw->hcs[i].inflight && gw->hcs[i].next_ns < next)
            next = gw->hcs[i].next_ns;
    return next;
}

void gw_ping_handler(cw_handle_t *h, void *arg)
{
    cw_status_t st = cw_respond(h, CW_OK, NULL, NULL);

    (void)arg;
    if (st != CW_OK)
        CW_LOG_RL(CW_LOG_WARN, GW_LOG, "cannot answer a ping: %s",
                  cw_status_str(st));
    cw_handle_release(h);
}

/* A next hop or backend left or rejoined rotation.  Leaving is a warning;
 * rejoining is shown at the same default level, so that the log never
 * leaves a hop looking down that is back.  Changes on a table a reload
 * replaced are not: that table only finishes its RPCs. */
static void gw_health_log(const struct gw *gw,
                          const struct cw_route_table *table,
                          enum cw_health_change ch, const char *kind,
                          const char *name, const char *by, cw_status_t st)
{
    if (ch == CW_HEALTH_SAME || table != gw->table)
        return;
    if (name == NULL)
        name = "?";
    if (ch == CW_HEALTH_DOWN)
        CW_WARN(GW_LOG,
                "%s %s out of rotation: %u consecutive failures, "
                "the last a %s that ended %s",
                kind, name, gw->cfg->health.eject_after, by,
                cw_status_name(st));
    else
        GW_NOTICE("%s %s back in rotation: %u consecutive successes, the "
                  "last a %s",
                  kind, name, gw->cfg->health.recover_after, by);
}

void gw_health_report_nexthop(struct gw *gw, struct cw_route_table *table,
                              unsigned id, bool ok, const char *by,
                              cw_status_t st)
{
    CW_ASSERT(!gw_locking(gw) || gw_some_held(gw));
    gw_health_log(gw, table, cw_route_table_nexthop_report(table, id, ok),
                  "next hop", cw_route_table_nexthop_name(table, id), by, st);
}

void gw_health_report_backend(struct gw *gw, struct cw_route_table *table,
                              unsigned service, unsigned backend, bool ok,
                              const char *by, cw_status_t st)
{
    gw_health_log(
        gw, table, cw_route_table_backend_report(table, service, backend, ok),
        "backend", cw_route_table_backend_address(table, service, backend), by,
        st);
}

void gw_health_fini(struct gw *gw)
{
    for (unsigned i = 0; i < gw->nhcs; i++)
        free(gw->hcs[i].addr);
    free(gw->hcs);
    gw->hcs = NULL;
    gw->nhcs = 0;
}

static cw_status_t gw_hc_add(struct gw *gw, unsigned *cap, const char *addr,
                             struct gw_hc **hc_p)
{
    struct gw_hc *hc;

    if (gw->nhcs == *cap) {
        unsigned ncap = *cap ? *cap * 2 : 8;
        struct gw_hc *n = realloc(gw->hcs, ncap * sizeof(*n));
        if (n == NULL)
            return CW_NOMEM;
        gw->hcs = n;
        *cap = ncap;
    }
    hc = &gw->hcs[gw->nhcs];
    memset(hc, 0, sizeof(*hc));
    hc->addr = strdup(addr);
    if (hc->addr == NULL)
        return CW_NOMEM;
    hc->last = CW_NOT_READY;
    gw->nhcs++;
    *hc_p = hc;
    return CW_OK;
}

cw_status_t gw_health_rebuild(struct gw *gw)
{
    unsigned cap = 0, n = cw_route_table_nexthop_count(gw->table);
    struct gw_hc *hc;
    cw_status_t st;

    gw_health_fini(gw);
    gw->health_generation++;
    for (unsigned id = 0; id < n; id++) {
        const char *name = cw_route_table_nexthop_name(gw->table, id);
        if (name == NULL || strstr(name, "://") == NULL)
            continue; /* a network of ours, not a gateway */
        st = gw_hc_add(gw, &cap, name, &hc);
        if (st != CW_OK)
            return st;
        hc->nexthop = id;
    }
    for (size_t s = 0; s < gw->cfg->nservices; s++) {
        const struct cw_config_service *sv = &gw->cfg->services[s];
        for (size_t b = 0; b < sv->backends.n; b++) {
            st = gw_hc_add(gw, &cap, sv->backends.v[b], &hc);
            if (st != CW_OK)
                return st;
            hc->is_backend = true;
            hc->service = (unsigned)s;
            hc->backend = (unsigned)b;
        }
    }
    return CW_OK;
}

static void gw_ping_cb(cw_handle_t *h, cw_status_t st, void *arg)
{
    struct gw_ping *p = arg;
    struct gw *gw = p->gw;
    bool ok = !gw_status_is_transport(st) && st != CW_CANCELED;

    /* Threaded: this runs on worker 0, which sent it; the hop going down
     * touches every worker's forwards. */
    gw_lock_all(gw);
    if (st != CW_CANCELED && p->generation == gw->health_generation &&
        p->index < gw->nhcs) {
        struct gw_hc *hc = &gw->hcs[p->index];
        hc->inflight = false;
        hc->last = st;
        hc->last_ns = cw_now_ns();
        hc->last_rtt_ns = hc->last_ns - p->t0;
        if (ok)
            hc->ok++;
        else
            hc->fail++;
        if (hc->is_backend)
            gw_health_report_backend(gw, p->table, hc->service, hc->backend, ok,
                                     "health check", st);
        else
            gw_health_report_nexthop(gw, p->table, hc->nexthop, ok,
                                     "health check", st);
        if (!ok && !hc->is_backend && p->table == gw->table &&
            !cw_route_table_nexthop_is_up(p->table, hc->nexthop))
            gw_fwd_hop_down(gw, hc->addr);
        if (!ok)
            gw_addr_forget_all(gw, hc->addr);
    }
    gw->pings_inflight--;
    gw_unlock_all(gw);
    gw_deferred_flush(); /* gw_fwd_hop_down's fails */
    cw_route_table_unref(p->table);
    cw_handle_release(h);
    free(p);
}

/* Address to ping @p hc at: backends reachable only through another
 * gateway are pinged through it. */
/* Threaded: on @p p->sh's thread, which owns the network the ping leaves
 * by (gw_ping handed it over). */
static void gw_ping_send(struct gw_work *w)
{
    struct gw_ping *p =
        (struct gw_ping *)(void *)((char *)w - offsetof(struct gw_ping, work));
    cw_handle_t *h = NULL;
    cw_addr_t *addr;
    cw_status_t st;

    gw_alock(p->sh);
    st = gw_addr_get(p->sh, p->target, cw_now_ns(), &addr);
    if (st == CW_OK)
        st = cw_handle_create(p->sh->ctx, addr, p->gw->ping_id, &h);
    gw_aunlock(p->sh);
    if (st == CW_OK)
        st = cw_forward(h, p->timeout_ms, gw_ping_cb, p);
    if (st != CW_OK)
        gw_ping_cb(h, st, p); /* a failed check; frees p */
}

static cw_status_t gw_hc_addr(struct gw *gw, struct gw_hc *hc, char *buf,
                              size_t len)
{
    struct cw_route_result res;
    int n;

    if (!hc->is_backend ||
        cw_route_table_lookup_str(gw->table, hc->addr, &res) != CW_OK ||
        res.direct)
        n = snprintf(buf, len, "%s", hc->addr);
    else
        n = snprintf(buf, len, "%s@%s", hc->addr, res.gateway);
    return n < 0 || (size_t)n >= len ? CW_OVERFLOW : CW_OK;
}

static struct gw_ping *gw_ping_new(struct gw *gw, unsigned i, uint64_t now)
{
    const struct cw_config_health *hcfg = &gw->cfg->health;
    struct gw_ping *p = calloc(1, sizeof(*p));

    if (p == NULL)
        return NULL;
    p->gw = gw;
    p->table = cw_route_table_ref(gw->table);
    p->generation = gw->health_generation;
    p->index = i;
    p->t0 = now;
    p->timeout_ms =
        hcfg->timeout_ns / 1000000u ? hcfg->timeout_ns / 1000000u : 1;
    return p;
}

static void gw_ping(struct gw *gw, unsigned i, uint64_t now)
{
    struct gw_hc *hc = &gw->hcs[i];
    char target[CW_ADDR_STR_MAX];
    struct gw_ping *p;
    cw_status_t st;

    hc->next_ns = now + gw->cfg->health.interval_ns;
    st = gw_hc_addr(gw, hc, target, sizeof(target));
    if (st != CW_OK)
        goto err;
    p = gw_ping_new(gw, i, now);
    if (p == NULL) {
        st = CW_NOMEM;
        goto err;
    }
    /* Worker 0 sends it from its queue, once this thread has dropped the
     * control plane's locks: it has an endpoint on every network. */
    p->sh = &gw->shards[0];
    memcpy(p->target, target, sizeof(p->target));
    p->work.fn = gw_ping_send;
    hc->inflight = true;
    gw->pings_inflight++;
    gw_shard_queue(p->sh, &p->work);
    return;

err:
    /* The target could not even be addressed: that is a failed check. */
    hc->fail++;
    hc->last = st;
    hc->last_ns = cw_now_ns();
    if (hc->is_backend)
        gw_health_report_backend(gw, gw->table, hc->service, hc->backend, false,
                                 "health check", st);
    else
        gw_health_report_nexthop(gw, gw->table, hc->nexthop, false,
                                 "health check", st);
}

/* Descriptors are what a connection flood exhausts, and no limit of ours
 * bounds them below RLIMIT_NOFILE: the plugins accept what comes (on
 * ofi+tcp, connections closed before their handshake are even kept;
 * docs/reliability.md, "Floods").  Once a second, while nine tenths of
 * the limit are open, say so (rate-limited: the log is not a second
 * flood); the count is /metrics' process_open_fds.  One gateway a
 * process: the time of the next look is the process's. */
static void gw_fd_watch(uint64_t now)
{
    static uint64_t next_ns;
    unsigned long n = 0;
    struct rlimit rl;
    DIR *d;

    if (now < next_ns)
        return;
    next_ns = now + 1000000000ull;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return;
    d = opendir("/proc/self/fd");
    if (d == NULL) {
        if (errno == EMFILE || errno == ENFILE)
            CW_LOG_RL(CW_LOG_WARN, GW_LOG,
                      "all %llu file descriptors are open: new connections "
                      "are refused",
                      (unsigned long long)rl.rlim_cur);
        return;
    }
    while (readdir(d) != NULL)
        n++;
    closedir(d);
    n = n > 3 ? n - 3 : 0; /* ".", ".." and the directory's own */
    if (n * 10 >= rl.rlim_cur * 9)
        CW_LOG_RL(CW_LOG_WARN, GW_LOG,
                  "%lu of %llu file descriptors open: new connections will "
                  "be refused at the limit",
                  n, (unsigned long long)rl.rlim_cur);
}

void gw_health_tick(struct gw *gw, uint64_t now)
{
    gw_fd_watch(now);
    if (!gw->cfg->health.enabled || gw->draining)
        return;
    for (unsigned i = 0; i < gw->nhcs; i++)
        if (!gw->hcs[i].inflight && now >= gw->hcs[i].next_ns)
            gw_ping(gw, i, now);
}
