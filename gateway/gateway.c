/*
 * causewayd lifecycle: open every configured network, build the route
 * table, install the forward hook, then run the progress loop with the
 * housekeeping (signals, admin, health, drain) between slices.
 */
#include "gw_int.h"
#include "gw_bulk.h"
#include "notify.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define GW_SLICE_MS        5
#define GW_HOUSEKEEPING_NS 2000000ull
#define GW_CONTROL_MAX_NS  50000000ull /* a full pass at least this often */
#define GW_IDLE_MS         100 /* longest sleep with nothing to do (core's bound) */
#define GW_SPIN_NS         0ull    /* default off; CAUSEWAYD_SPIN_US sets it */
#define GW_YIELD_AFTER_NS  1000ull /* busy poll: idle this long, then yield */
/* An idle loop woken by no callback looks at signals, admin clients and
 * pings at once, but at most this often: at low load every forwarded RPC
 * ends in such a wake-up (its last send completing), and the housekeeping
 * system calls (signalfd, accept) would otherwise be paid per RPC. */
#define GW_EARLY_HK_NS   500000ull
#define GW_UCX_EAGER_MAX (4ull << 20) /* chunks up to this go eagerly (ucx) */

struct gw_net *gw_net_by_name(struct gw *gw, const char *name)
{
    if (name == NULL)
        return NULL;
    for (unsigned i = 0; i < gw->nnets; i++)
        if (strcmp(gw->nets[i].name, name) == 0)
            return &gw->nets[i];
    return NULL;
}

struct gw_net *gw_net_of_addr(struct gw *gw, const char *uri)
{
    struct cw_uri u;

    if (cw_uri_parse(uri, &u) != CW_OK)
        return NULL;
    for (unsigned i = 0; i < gw->nnets; i++) {
        struct gw_net *n = &gw->nets[i];
        if (strcmp(n->parsed.plugin, u.plugin) == 0 &&
            strcmp(n->parsed.protocol, u.protocol) == 0)
            return n;
    }
    return NULL;
}

bool gw_net_has(const struct gw *gw, const struct gw_net *gn,
                const cw_network_t *net)
{
    if (net == NULL)
        return false;
    for (unsigned k = 0; k < gw->nshards; k++)
        if (gn->members[k] == net)
            return true;
    return false;
}

struct gw_net *gw_net_of(struct gw *gw, const cw_network_t *net)
{
    if (net == NULL)
        return NULL;
    for (unsigned i = 0; i < gw->nnets; i++)
        if (gw_net_has(gw, &gw->nets[i], net))
            return &gw->nets[i];
    return NULL;
}

cw_status_t gw_net_open(struct gw *gw, const struct cw_config_network *cn,
                        struct gw_net *gn)
{
    cw_context_t *ctxs[GW_MAX_SHARDS];
    cw_status_t st;

    memset(gn, 0, sizeof(*gn));
    snprintf(gn->name, sizeof(gn->name), "%s", cn->name);
    snprintf(gn->uri, sizeof(gn->uri), "%s", cn->address);
    /* Every shard serves the one published address: callers are spread
     * over the shards and each request runs to completion on the shard
     * it reached (docs/gateway.md, "Threads").  Chunks staged between
     * fabrics: let a plugin copy them on a thread of its own while this
     * one receives the next (na-shm does). */
    for (unsigned k = 0; k < gw->nshards; k++)
        ctxs[k] = gw->shards[k].ctx;
    st = cw_network_open_spread(ctxs, gw->nshards, cn->address,
                                CW_NET_LISTEN | CW_NET_ASYNC_RMA, gn->members);
    if (st != CW_OK) {
        CW_ERROR(GW_LOG, "network %s: cannot listen on %s: %s", cn->name,
                 cn->address, cw_status_str(st));
        return st;
    }
    gn->net = gn->members[0];
    st = cw_network_uri(gn->net, gn->self, sizeof(gn->self));
    if (st == CW_OK)
        st = cw_uri_parse(gn->self, &gn->parsed);
    if (st != CW_OK) {
        CW_ERROR(GW_LOG, "network %s: cannot read its own address: %s",
                 cn->name, cw_status_str(st));
        return st;
    }
    for (unsigned k = 0; k < gw->nshards; k++)
        gw->shards[k].nnets++;
    if (gw->threaded)
        GW_NOTICE("network %s listening on %s (%u threads)", gn->name, gn->self,
                  gw->nshards);
    else
        GW_NOTICE("network %s listening on %s", gn->name, gn->self);
    return CW_OK;
}

void gw_set_config(struct gw *gw, struct cw_config *own,
                   const struct cw_config *cfg, struct cw_route_table *table)
{
    struct cw_route_table *old_table = gw->table;
    struct cw_config *old_own = gw->own_cfg;

    /* RPCs in flight hold the old table through their worker's count,
     * which gw_tables_switch turns into references of their own, so
     * dropping ours here only frees it once they are done. */
    gw->table = table;
    gw_tables_switch(gw, table);
    gw->cfg = cfg;
    gw_lease_batch_set(gw);
    gw->own_cfg = own;
    gw->config_loaded_s = (int64_t)time(NULL);
    atomic_store_explicit(&gw->max_cached_addrs,
                          (unsigned)cfg->limits.max_cached_addrs,
                          memory_order_relaxed);
    /* Limits per network are read on every admission: copy them here. */
    for (unsigned i = 0; i < gw->nnets; i++) {
        int j = cw_config_network_find(cfg, gw->nets[i].name);
        gw->nets[i].max_inflight = j >= 0 ? cfg->networks[j].max_inflight : 0;
    }
    gw_rcache_clear(gw);
    cw_route_table_unref(old_table);
    cw_config_free(old_own);
    for (unsigned i = 0; i < gw->nshards; i++)
        if (cw_context_set_max_hops(gw->shards[i].ctx, cfg->limits.max_hops) !=
            CW_OK)
            CW_WARN(GW_LOG, "cannot set the hop limit to %u",
                    cfg->limits.max_hops);
    if (gw_health_rebuild(gw) != CW_OK)
        CW_ERROR(GW_LOG, "health checks disabled: out of memory");
}

static bool gw_coalesce_enabled(void)
{
    const char *v = getenv("CAUSEWAY_COALESCE");

    return v == NULL || strcmp(v, "0") != 0;
}

static cw_status_t gw_start(struct gw *gw, const struct cw_config *cfg)
{
    struct cw_context_opts copts;
    struct cw_route_table *table = NULL;
    cw_status_t st;

    gw->busy_poll = cfg->gateway.busy_poll;
    cw_context_opts_init(&copts);
    if (gw->busy_poll)
        copts.flags |= CW_CTX_BUSY;
    /* Requests forwarded in one pass to the same next hop leave as one
     * message (docs/wire.md, "Batches"); CAUSEWAY_COALESCE=0 turns it off. */
    if (gw_coalesce_enabled())
        copts.flags |= CW_CTX_COALESCE;
    copts.default_timeout_ms = cfg->limits.default_timeout_ns / 1000000u;
    copts.max_hops = cfg->limits.max_hops;
    copts.max_payload_size = (size_t)cfg->limits.max_payload_size;
    /* A gateway takes requests from many clients at once. */
    copts.unexpected_bufs = 128;
    st = gw_shards_init(gw, &copts, cfg->gateway.threads);
    if (st != CW_OK)
        return st;
    st = cw_rpc_register(gw->ctx, GW_PING_RPC, gw_ping_handler, gw, NULL,
                         &gw->ping_id);
    if (st != CW_OK) {
        CW_ERROR(GW_LOG, "cannot register %s: %s", GW_PING_RPC,
                 cw_status_str(st));
        return st;
    }
    st = gw_bulk_init(gw, cfg);
    if (st != CW_OK)
        return st;
    if (cfg->nnetworks > GW_MAX_NETS) {
        CW_ERROR(GW_LOG, "%zu networks configured, at most %d supported",
                 cfg->nnetworks, GW_MAX_NETS);
        return CW_UNSUPPORTED;
    }
    for (size_t i = 0; i < cfg->nnetworks; i++) {
        st = gw_net_open(gw, &cfg->networks[i], &gw->nets[gw->nnets]);
        if (st != CW_OK)
            return st;
        gw->nnets++;
    }
    st = cw_route_table_build(cfg, &table);
    if (st != CW_OK) {
        CW_ERROR(GW_LOG, "cannot build the route table: %s", cw_status_str(st));
        return st;
    }
    gw_set_config(gw, NULL, cfg, table);
    st = gw_shards_setup(gw);
    if (st != CW_OK)
        return st;
    st = gw_admin_open(gw, &cfg->gateway);
    if (st != CW_OK)
        return st;
    return gw_threads_start(gw);
}

/* Control-plane work under way: requests queued, a drain, a cancel, a
 * ping in flight, a network a reload removed, an admin connection open. */
static bool gw_control_pending(const struct gw *gw)
{
    if (gw->nqueued != 0 || gw->draining || gw->cancel_all ||
        gw_health_busy(gw))
        return true;
    for (unsigned i = 0; i < gw->nnets; i++)
        if (gw->nets[i].removed)
            return true;
    for (unsigned i = 0; i < GW_ADMIN_CONNS; i++)
        if (gw->conns[i].fd >= 0)
            return true;
    return false;
}

/* Nothing in flight, queued, draining, being closed or talked to over the
 * admin interface: the loop may sleep until the next ping, a request, a
 * signal or an admin connection. */
static bool gw_idle(const struct gw *gw)
{
    GW_ASSERT_LOCKED(gw, &gw->lock);
    return gw->watching && !gw->busy_poll && gw->inflight == 0 &&
           !gw_control_pending(gw);
}

/* How long an idle loop may block: until the next ping, at most
 * GW_IDLE_MS, at least the busy slice. */
static unsigned gw_idle_ms(const struct gw *gw, uint64_t now)
{
    uint64_t next = gw_health_next(gw), ms;

    if (next <= now)
        return GW_SLICE_MS;
    ms = (next - now + 999999ull) / 1000000ull;
    return ms > GW_IDLE_MS    ? GW_IDLE_MS
           : ms < GW_SLICE_MS ? GW_SLICE_MS
                              : (unsigned)ms;
}

/* Let the signalfd and the admin socket end a blocking progress call, so
 * that an idle gateway sleeps without missing either.  Without them the
 * loop keeps its 2 ms housekeeping. */
static void gw_watch(struct gw *gw)
{
    gw->watching = cw_context_watch_fd(gw->ctx, gw->sigfd) == CW_OK;
    if (gw->watching && gw->admin_fd >= 0 &&
        cw_context_watch_fd(gw->ctx, gw->admin_fd) != CW_OK) {
        (void)cw_context_unwatch_fd(gw->ctx, gw->sigfd);
        gw->watching = false;
    }
    if (gw->watching && gw->admin_unix_fd >= 0 &&
        cw_context_watch_fd(gw->ctx, gw->admin_unix_fd) != CW_OK) {
        (void)cw_context_unwatch_fd(gw->ctx, gw->sigfd);
        if (gw->admin_fd >= 0)
            (void)cw_context_unwatch_fd(gw->ctx, gw->admin_fd);
        gw->watching = false;
    }
    if (!gw->watching)
        CW_WARN(GW_LOG, "idle gateway polls every %d ms", GW_SLICE_MS);
}

static void gw_unwatch(struct gw *gw)
{
    if (!gw->watching)
        return;
    (void)cw_context_unwatch_fd(gw->ctx, gw->sigfd);
    if (gw->admin_fd >= 0)
        (void)cw_context_unwatch_fd(gw->ctx, gw->admin_fd);
    if (gw->admin_unix_fd >= 0)
        (void)cw_context_unwatch_fd(gw->ctx, gw->admin_unix_fd);
    gw->watching = false;
}

/* Cancel what is in flight while the workers' threads still run its
 * completions, then stop them. */
static void gw_stop_workers(struct gw *gw)
{
    bool busy = true;

    for (int i = 0; i < 200 && busy; i++) {
        if (i % 10 == 0) {
            gw_lock_all(gw);
            gw_queue_expire(gw, true, CW_CANCELED);
            gw_unlock_all(gw);
            gw_deferred_flush();
            gw_fwd_cancel_all(gw);
        }
        gw_shard_drain(&gw->shards[0]);
        cw_progress(gw->ctx, 5);
        cw_trigger(gw->ctx, 0, 0, NULL);
        gw_lock(gw);
        busy = gw->inflight != 0 || gw_health_busy(gw);
        gw_unlock(gw);
    }
    gw_threads_stop(gw);
}

static void gw_stop(struct gw *gw)
{
    gw_unwatch(gw);
    /* Whatever is still in flight completes (CW_CANCELED) now; the
     * callbacks answer their callers and free the forward state. */
    if (gw->ctx != NULL)
        gw_stop_workers(gw);
    gw_admin_close(gw);
    /* What the workers' queues still hold runs before their state goes. */
    if (gw->shards != NULL)
        gw_shards_quiesce(gw);
    gw_bulk_fini(gw);
    gw_health_fini(gw);
    gw_fwd_pool_fini(gw);
    gw_addr_cache_fini(gw);
    gw_rcache_clear(gw);
    /* Each worker's tables go before the workers do. */
    gw_sources_fini(gw);
    if (gw->shards != NULL) {
        gw_tables_switch(gw, NULL);
        gw_shards_fini(gw);
    }
    gw_route_stats_fini(gw);
    cw_route_table_unref(gw->table);
    gw->table = NULL;
    cw_config_free(gw->own_cfg);
    gw->own_cfg = NULL;
    if (gw->sigfd >= 0)
        close(gw->sigfd);
    gw->sigfd = -1;
}

static void gw_write_ready(struct gw *gw, int fd)
{
    char line[CW_URI_MAX + 64];

    if (fd < 0)
        return;
    for (unsigned i = 0; i < gw->nnets; i++) {
        int n = snprintf(line, sizeof(line), "%s %s\n", gw->nets[i].name,
                         gw->nets[i].self);
        if (n > 0 && write(fd, line, (size_t)n) != n)
            CW_WARN(GW_LOG, "cannot write the ready line: %s", strerror(errno));
    }
    if (gw->admin_fd >= 0) {
        int n = snprintf(line, sizeof(line), "admin %s\n", gw->admin_addr);
        if (n > 0 && write(fd, line, (size_t)n) != n)
            CW_WARN(GW_LOG, "cannot write the ready line: %s", strerror(errno));
    }
    if (gw->admin_unix_fd >= 0) {
        int n = snprintf(line, sizeof(line), "admin_socket %s\n",
                         gw->admin_unix_path);
        if (n > 0 && write(fd, line, (size_t)n) != n)
            CW_WARN(GW_LOG, "cannot write the ready line: %s", strerror(errno));
    }
    if (write(fd, "ready\n", 6) != 6)
        CW_WARN(GW_LOG, "cannot write the ready line: %s", strerror(errno));
}

/* Whether housekeeping has work that needs every worker's lock: a
 * signal or an admin client to read, an admin connection open, a health
 * ping due or in flight, requests queued, a drain, a cancel, a network a
 * reload removed; and at least every GW_CONTROL_MAX_NS in any case.  Each
 * worker's lock taken from this thread every 2 ms, and each context's for
 * the unanswered count, had made 8 workers sleep on them about 8 000
 * times a second on 16 cores (docs/perf/2026-11-30-manycore.md). */
static bool gw_control_due(struct gw *gw, uint64_t now, uint64_t last_full)
{
    struct pollfd p[3];
    nfds_t n = 0;

    if (now - last_full >= GW_CONTROL_MAX_NS || gw_control_pending(gw) ||
        now >= gw_health_next(gw))
        return true;
    if (gw->sigfd >= 0)
        p[n++] = (struct pollfd){.fd = gw->sigfd, .events = POLLIN};
    if (gw->admin_fd >= 0)
        p[n++] = (struct pollfd){.fd = gw->admin_fd, .events = POLLIN};
    if (gw->admin_unix_fd >= 0)
        p[n++] = (struct pollfd){.fd = gw->admin_unix_fd, .events = POLLIN};
    return n > 0 && poll(p, n, 0) != 0;
}

/* Worker 0's loop, on the main thread, which also runs the control plane
 * (housekeeping): the same with one worker or many (the other workers run
 * gw_shard_main, threads.c). */
static void gw_loop(struct gw *gw)
{
    struct gw_shard *sh = &gw->shards[0];
    unsigned slice = gw->busy_poll ? 0 : GW_SLICE_MS, wait;
    uint64_t next_hk = 0, last_hk = 0, spin_until = 0, idle_since = 0;
    uint64_t last_full = 0;

    while (!gw->stop) {
        bool moved, idle, cancel, inflight;
        uint64_t now;
        unsigned ran = 0;
        cw_status_t pst;

        /* One clock reading stamps what a pass forwards (log.h); the
         * control plane's work below runs outside it. */
        cw_clock_pass_begin();
        moved = gw_shard_drain(sh);
        now = cw_now_pass_ns();

        gw_lock(gw);
        idle = gw_idle(gw);
        gw_unlock(gw);
        wait = idle ? gw_idle_ms(gw, now) : slice;
        /* After activity, with forwards in flight, poll without sleeping
         * for gw->spin_ns (CAUSEWAYD_SPIN_US; off by default): their
         * answers may come back sooner than a sleep and wake-up cost. */
        if (moved || (gw->inflight != 0 && now < spin_until))
            wait = 0;
        pst = cw_progress(sh->ctx, wait);
        cw_trigger(sh->ctx, 0, 0, &ran);
        if (atomic_load_explicit(&sh->kick, memory_order_relaxed) != 0)
            gw_queue_kicked(sh);
        now = cw_now_pass_ns();
        cw_clock_pass_end();
        if (ran > 0 || pst == CW_OK || moved) {
            spin_until = now + gw->spin_ns;
            idle_since = now;
        } else if (slice == 0 && now - idle_since >= GW_YIELD_AFTER_NS) {
            /* Busy poll, idle for a while: let a client or server that
             * shares this core run; it is the one we are waiting for. */
            sched_yield();
        }
        /* Idle, woken by no request: a signal, an admin client or a ping
         * due; look now rather than at the next 2 ms mark (a watched fd
         * nobody reads keeps waking the loop until then). */
        if (now < next_hk &&
            !(idle && ran == 0 && !moved && now - last_hk >= GW_EARLY_HK_NS))
            continue;
        last_hk = now;
        next_hk = now + GW_HOUSEKEEPING_NS;
        if (!gw_control_due(gw, now, last_full)) {
            if (gw->inflight != 0)
                gw_fwd_cut_old(gw, now);
            continue;
        }
        last_full = now;
        gw_unanswered_update(gw); /* contexts' locks, then gw->lock */
        /* Control plane under every lock (reload opens and closes
         * networks, health pings are sent from here: rare plugin calls);
         * each worker waits for it at most between two requests. */
        gw_lock_all(gw);
        gw_signals_poll(gw);
        gw_admin_poll(gw, now);
        gw_health_tick(gw, now);
        if (gw->nqueued != 0)
            gw_queue_expire(gw, false, CW_TIMEOUT);
        gw_sources_expire(gw, now, false);
        if (gw->draining && gw_drain_check(gw, now))
            gw->stop = true;
        inflight = gw->inflight != 0;
        cancel = gw->cancel_all;
        gw->cancel_all = false;
        gw_unlock_all(gw);
        gw_deferred_flush();
        /* A reload may have opened routes for queued requests; and no
         * slot stays unoffered longer than a housekeeping period. */
        if (gw->nqueued != 0)
            gw_queue_nudge(sh);
        if (cancel)
            gw_fwd_cancel_all(gw);
        else if (inflight)
            gw_fwd_cut_old(gw, now);
    }
}

int cw_gateway_main(const struct cw_config *cfg, const char *config_path,
                    const struct cw_gateway_run_opts *opts)
{
    struct gw *gw;
    int level = opts != NULL ? opts->log_level : -1;
    int ready_fd = opts != NULL ? opts->ready_fd : -1;
    int rc = 1;

    cw_log_init();
    cw_log_set_level(level >= 0 ? level : cfg->gateway.log_level);
    gw = calloc(1, sizeof(*gw));
    if (gw == NULL) {
        CW_ERROR(GW_LOG, "out of memory");
        return 1;
    }
    gw->config_path = config_path;
    gw->admin_fd = -1;
    gw->admin_unix_fd = -1;
    gw->spin_ns = GW_SPIN_NS;
    {
        const char *e = getenv("CAUSEWAYD_SPIN_US");
        if (e != NULL && *e != '\0')
            gw->spin_ns = strtoull(e, NULL, 10) * 1000ull;
    }
    /* UCX 1.13's tcp put-zcopy, the data path of its rendezvous protocol,
     * aborted the gateway on an internal assertion once in a few hundred
     * callers killed mid-transfer (docs/gateway.md, "Limitations";
     * gw-bulk-kills).  A gateway must outlive its peers: it runs without
     * it unless the environment says otherwise.  No thread exists yet. */
    (void)setenv("UCX_TCP_PUT_ENABLE", "n", 0);
    /* A bulk chunk the gateway puts to a ucx peer goes in one eager active
     * message rather than by UCX's rendezvous, whose handshake with the
     * peer costs each chunk more than the copy it saves (ofi+tcp ->
     * ucx+tcp, 1 MiB chunks, gateway on its own CPU: pull 1420-1480 ->
     * 1840-1870 MiB/s).  The gateway's own sends only: the same policy in
     * na-ucx for every process halved direct ucx+tcp transfers (64 MiB
     * pull 4500-5460 -> 2710-2850 MiB/s), where both ends keep up with
     * the handshake.  Up to GW_UCX_EAGER_MAX: an eager message is held
     * whole by the receiver until it is copied in.  The environment may
     * say otherwise. */
    if (cfg->buffers.chunk <= GW_UCX_EAGER_MAX) {
        char thresh[32];

        snprintf(thresh, sizeof(thresh), "%llu",
                 (unsigned long long)cfg->buffers.chunk + 4096);
        (void)setenv("UCX_RNDV_THRESH", thresh, 0);
    }
    gw->started_ns = cw_now_ns();
    for (unsigned i = 0; i < GW_ADMIN_CONNS; i++)
        gw->conns[i].fd = -1;
    /* Block the signals before any thread exists so that they are all
     * delivered through the signalfd. */
    gw->sigfd = gw_signals_open();
    if (gw->sigfd < 0)
        goto out;
    gw->start_cfg = cfg;
    if (gw_start(gw, cfg) != CW_OK)
        goto out;
    GW_NOTICE("gateway %s up: %u networks, %zu routes, "
              "%zu services",
              cfg->gateway.name ? cfg->gateway.name : "", gw->nnets,
              cw_route_table_size(gw->table), cfg->nservices);
    gw_watch(gw);
    gw_write_ready(gw, ready_fd);
    gw_notify("READY=1\nSTATUS=serving: %u networks, %zu routes", gw->nnets,
              cw_route_table_size(gw->table));
    gw_loop(gw);
    {
        struct gw_counts c;

        gw_counts_sum(gw, false, &c);
        GW_NOTICE("gateway stopped: %" PRIu64 " forwarded, %" PRIu64 " failed",
                  c.forwarded, c.failed);
    }
    rc = 0;
out:
    gw_stop(gw);
    free(gw);
    return rc;
}
