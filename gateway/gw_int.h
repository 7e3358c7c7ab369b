/*
 * causewayd private state.  The gateway runs gateway.threads workers
 * (threads.c), each one thread and one context with an endpoint on every
 * network; a request runs to completion on the worker whose endpoint it
 * reached.  What a request touches is the worker's own (struct gw_shard:
 * its forwards, wait queue, sources, parsed destinations, counters),
 * guarded by the worker's lock (gw_wlock), which only that worker takes
 * per request; what workers share is atomic (totals, per-network and
 * per-route counters, the route table's health and load) or read-mostly
 * (route table, configuration, networks), replaced only under every
 * worker's lock (gw_lock_all: reload, admin, health, drain).  gw->lock
 * guards the rest of the shared state (the route counters' index, bulk
 * tokens, health checks).  Lock order: workers' locks by index, then
 * gw->lock, then a worker's addr_lock.  With one worker nothing is locked.
 */
#ifndef CW_GW_INT_H
#define CW_GW_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <causeway/causeway.h>
#include <causeway/config.h>
#include <causeway/forward.h>
#include <causeway/log.h>
#include <causeway/routing.h>

#include "gateway.h"
#include "cw_htable.h"
#include "cw_mutex.h"
#include "nau_list.h"
#include "nau_pool.h"

#define GW_LOG             "gw"
#define GW_MAX_NETS        8
#define GW_MAX_SHARDS      64   /* gateway.threads: workers */
#define GW_HIST_BUCKETS    24   /* log2 buckets of added latency, 1 us .. 8 s */
#define GW_FWD_POOL_MAX    4096 /* forward records a worker keeps for reuse */
#define GW_PING_RPC        "causeway.ping"
#define GW_ADMIN_REQ_MAX   4096 /* an admin request, HTTP headers included */
#define GW_ADMIN_TOKEN_MAX 4096 /* longest admin token (a file's worth) */

/** Life-cycle messages (where it listens, reloads, drain): shown at the
 *  default level (warn) and above, labelled info; hidden by error/none. */
#define GW_NOTICE(...)                                                         \
    do {                                                                       \
        if (cw_log_level_ >= CW_LOG_WARN)                                      \
            cw_log_write(CW_LOG_INFO, GW_LOG, __FILE__, __LINE__, __func__,    \
                         __VA_ARGS__);                                         \
    } while (0)

struct gw_btok;
struct gw_bulk;
struct gw_shard;

/** Work handed to a shard's thread (gw_shard_post). */
struct gw_work {
    struct gw_work *next;
    void (*fn)(struct gw_work *w);
};

/** Cached resolved address: the cache holds one reference; an RPC sent to
 *  it takes its own (cw_handle_create), so dropping the entry never ends
 *  an address in use. */
struct gw_addr_ent {
    struct cw_hnode node; /**< in gw_shard.addrs, keyed by key */
    cw_addr_t *addr;
    uint64_t last_ns; /**< last looked up (a forward to it) */
    char key[];
};

/** How requests ended (per worker, summed when read). */
struct gw_counts {
    uint64_t forwarded, failed, timedout, denied, busy, noroute, draining,
        refused_bulk, canceled, resumed;
    uint64_t queued_total;   /**< requests that waited in a queue */
    uint64_t rcache_evicted; /**< parsed destinations dropped for
                                  limits.max_cached_dests */
    uint64_t src_refused;    /**< requests of a new source refused
                                  with CW_BUSY at the bound */
};

/** One worker: a thread with its own context and an endpoint on every
 *  network (shard 0 is the main thread). */
struct gw_shard {
    struct gw *gw;
    unsigned idx;
    cw_context_t *ctx;
    pthread_t tid;
    bool started;
    unsigned nnets;                  /**< networks opened on it */
    _Atomic(struct gw_work *) inbox; /**< lock-free MPSC (gw_shard_post) */
    pthread_mutex_t addr_lock;       /**< threaded mode: the cache below */
    struct cw_htable addrs;          /**< next hops in ctx (gw_addr_ent),
                                          at most limits.max_cached_addrs,
                                          least recently used dropped */
    uint64_t addrs_evicted;          /**< entries dropped for the bound */

    /* The worker's forwarding state, under its lock (gw_wlock). */
    pthread_mutex_t lock;
    struct nau_list fwds;     /**< its forwards in flight (link) */
    struct nau_pool fwd_pool; /**< records: no malloc per RPC */
    unsigned inflight;        /**< forwards in flight (fwds) */
    /* The route table its new forwards take (gw->table): one reference
     * for all of them, so that a forward does not write the table's
     * shared count (gw_table_take). */
    struct cw_route_table *table;
    unsigned table_users;       /**< its forwards on table */
    unsigned held;              /**< slots of the total its requests hold */
    unsigned lease;             /**< slots of gw->inflight it took: held and
                                     spare (gw_total_take) */
    struct gw_source *qring;    /**< sources with queued requests,
                                     next to be served first */
    _Atomic unsigned nqueued;   /**< its share of gw->nqueued (read
                                     by other workers: atomic) */
    _Atomic unsigned kick;      /**< a freed slot is offered to its
                                     queue: 1 + the workers that
                                     passed it on (0: none) */
    unsigned nqsrcs;            /**< its share of gw->nqsrcs */
    uint64_t qseq;              /**< the last arrival number given
                                     to a queued request */
    uint64_t next_cut_ns;       /**< next limits.max_timeout scan */
    struct cw_htable rcache;    /**< gw_rent by destination string, at
                                     most limits.max_cached_dests,
                                     least recently used dropped */
    struct cw_htable srcs;      /**< gw_source by source address, at
                                     most limits.max_sources (all
                                     workers together) */
    unsigned nsrcs;             /**< the active sources in srcs (all
                                     but the parked one) */
    struct gw_source *src_last; /**< the source of the last request
                                     admitted, while in srcs or parked */
    struct gw_source *parked;   /**< the last source gone idle, kept
                                     in srcs (with its address) for its
                                     next request, counted in no share
                                     or bound; freed after GW_PARK_NS */
    struct cw_htable peers;     /**< gw_peer: sources gone idle, at
                                     most GW_PEERS_KEPT, the least
                                     recently active dropped */
    struct gw_counts n;         /**< what its requests came to */
};

/** Counters that every forward adds to, one set per worker: only that
 *  worker's thread adds to its set (no other writes the cache line), the
 *  admin interface sums them.  Shared counters here cost each forward
 *  several cache-line transfers between the cores of the workers. */
#define GW_CTR_ADD(c, d)                                                       \
    atomic_fetch_add_explicit(&(c), (d), memory_order_relaxed)
#define GW_CTR_INC(c) GW_CTR_ADD(c, 1)
#define GW_CTR_DEC(c) atomic_fetch_sub_explicit(&(c), 1, memory_order_relaxed)
#define GW_CTR_GET(c) atomic_load_explicit(&(c), memory_order_relaxed)

/** A network's counters as one worker keeps them. */
struct gw_net_ctr {
    _Atomic uint64_t rx, denied, busy; /**< requests that arrived on it */
    _Atomic unsigned inflight;         /**< forwarded RPCs that came in on it */
} __attribute__((aligned(64)));

/** One open network. */
struct gw_net {
    char name[32];
    char uri[CW_URI_MAX];  /**< as written in the config */
    char self[CW_URI_MAX]; /**< what the plugin chose */
    struct cw_uri parsed;  /**< of self */
    cw_network_t *net;     /**< the published endpoint (members[0]) */
    /** Its endpoint in each shard's context: one published address served
     *  by every shard (cw_network_open_spread); [i] is in shards[i]. */
    cw_network_t *members[GW_MAX_SHARDS];
    bool removed; /**< dropped by a reload (still bound) */
    /** Its counters, one set per worker (gw_net_sum adds them up). */
    struct gw_net_ctr per[GW_MAX_SHARDS];
    /** Forwards holding a slot against max_inflight, shared by the
     *  workers: counted only while the network has that limit
     *  (GW_CAP_NET in gw_fwd.caps). */
    _Atomic unsigned cap_held;
    unsigned max_inflight; /**< its limit from the config, 0 = none */
};

/** The sum of a network's gw_net_ctr over the workers. */
struct gw_net_sum {
    uint64_t rx, denied, busy;
    unsigned inflight;
};

/** A route's counters as one worker keeps them. */
struct gw_rs_ctr {
    _Atomic uint64_t forwarded, failed, timedout, denied, busy, canceled;
    _Atomic uint64_t lat_sum_ns, lat_n;
    _Atomic uint64_t hist[GW_HIST_BUCKETS];
    _Atomic unsigned inflight; /**< its forwards on the route */
} __attribute__((aligned(64)));

/** Counters of one route (kept across reloads, keyed by text). */
struct gw_route_stats {
    struct gw_route_stats *next; /**< gw->routes, in first-seen order */
    struct cw_hnode node;        /**< in gw->rstats, keyed by dest, '\0',
                                      nexthop (both in one allocation) */
    char *dest;                  /**< pattern or kind ("proxy", "svc:x") */
    char *nexthop;               /**< network name or gateway address */
    struct gw_rs_ctr *per;       /**< [gw->nshards], one per worker */
    /** Forwards holding a slot against the route's max_inflight, shared
     *  by the workers: counted only while the route has that limit
     *  (GW_CAP_ROUTE in gw_fwd.caps). */
    _Atomic unsigned cap_held;
};

/** The sum of a route's gw_rs_ctr over the workers. */
struct gw_rs_sum {
    uint64_t forwarded, failed, timedout, denied, busy, canceled;
    uint64_t lat_sum_ns, lat_n;
    uint64_t hist[GW_HIST_BUCKETS];
    unsigned inflight;
};

static inline struct gw_rs_ctr *gw_rs_ctr(struct gw_route_stats *rs,
                                          unsigned worker)
{
    return &rs->per[worker];
}

/** A caller whose requests have all ended, remembered for the admin's
 *  "peers" (a gw_source lives only while it holds requests). */
struct gw_peer {
    struct cw_hnode node; /**< in gw_shard.peers, keyed by key */
    uint64_t last_ns;     /**< its last request's admission */
    uint64_t requests;    /**< requests admitted, all told */
    char key[];
};

#define GW_PEERS_KEPT 1024 /* idle callers remembered per worker */
/* How long a worker keeps its parked source after that source's last
 * admission (gw_sources_expire). */
#define GW_PARK_NS (100ull * 1000 * 1000)

/** A source's queued requests to one route, oldest first. */
struct gw_lane {
    struct gw_lane *next;      /**< the source's other lanes */
    struct gw_route_stats *rs; /**< NULL: to be routed again (reload,
                                    gw_queue_relane) */
    unsigned cap;              /**< its routes[].max_inflight */
    struct gw_queued *qhead, *qtail;
};

/** One caller (per-source fairness): kept while it has RPCs in flight or
 *  waiting in the queue. */
struct gw_source {
    struct cw_hnode node; /**< in gw->srcs, keyed by key */
    uint64_t last_ns;     /**< its last request's admission */
    uint64_t requests;    /**< requests admitted */
    unsigned inflight;
    unsigned queued;                 /**< requests waiting for a slot */
    struct gw_lane *lanes;           /**< those requests, one FIFO a route */
    struct gw_lane *lcur;            /**< the lane tried next (NULL: first) */
    struct gw_source *qprev, *qnext; /**< gw->qring while queued > 0 */
    cw_addr_t *addr; /**< a copy of its address once a request of it is
                          admitted (gw_source_seen), or NULL */
    char key[];
};

/** One forwarded RPC. */
struct gw_fwd {
    struct gw *gw;
    cw_handle_t *in, *out;
    struct cw_route_table *table; /**< the table it started with */
    struct gw_route_stats *rs;
    struct gw_source *src;
    struct gw_net *ingress;
    uint8_t caps; /**< GW_CAP_*: the shared limits it holds a slot of */
    bool has_nexthop, has_backend;
    unsigned nexthop, service, backend;
    uint64_t t_in, t_sent, t_done;
    bool cut;              /**< canceled at limits.max_timeout */
    unsigned resumes;      /**< re-forwarded after a next hop failed */
    bool hop_down;         /**< failed: health took its hop down */
    struct gw_btok *btoks; /**< proxy bulk tokens (bulk_proxy_table.c) */
    /* the worker it runs on, start to end (both the same: in_sh names
     * where it came in, eg_sh where it leaves) */
    struct gw_shard *in_sh, *eg_sh;
    cw_status_t st;             /**< how the outgoing forward ended */
    bool send_failed;           /**< it never left (st says why) */
    bool resume;                /**< re-forwarded: send it as RESUME */
    struct gw_work work;        /**< in its worker's queue */
    char next_addr[CW_URI_MAX]; /**< resolved next hop (cache key) */
    struct nau_list link;       /**< on its worker's fwds */
    char dest[CW_ADDR_STR_MAX]; /**< threaded: destination beyond next */
};

/** A request waiting for a slot (or, deferred, an answer to send). */
struct gw_queued {
    struct gw_queued *next;
    cw_handle_t *in;
    cw_status_t st;
    uint64_t seq;            /**< queued: its arrival (gw->qseq) */
    const cw_network_t *net; /**< queued: the network it came in on
                                  (its published endpoint) */
};

/** A routing destination parsed once (forward.c): its own hops stripped,
 *  what the ACL is asked about, and what the route table is asked for. */
struct gw_rent {
    struct cw_hnode node;         /**< in gw->rcache, keyed by key */
    uint8_t kind;                 /**< GW_RK_* (forward.c) */
    struct cw_uri target;         /**< parsed target, kinds HOPS and PLAIN */
    const char *target_s;         /**< formatted target (HOPS, PLAIN) */
    const char *rest;             /**< HOPS: the path beyond the next gateway */
    const char *acl_dest;         /**< "svc:name" or the final target */
    const char *acl_svc;          /**< the name in acl_dest, if a service */
    struct cw_uri acl_uri;        /**< acl_dest parsed, if not a service */
    struct cw_route_memo memo;    /**< the routes target matched */
    struct gw_route_stats *rs;    /**< counters of the last route taken... */
    const char *rs_dest, *rs_hop; /**< ... its pattern and next hop */
    const char *service;          /**< SERVICE: its name */
    char key[];                   /**< the destination string, then the rest */
};

/** A health-checked target: next-hop gateway or service backend. */
struct gw_hc {
    char *addr;
    bool is_backend;
    unsigned nexthop;          /**< when !is_backend */
    unsigned service, backend; /**< when is_backend */
    bool inflight;
    uint64_t next_ns;
    uint64_t ok, fail; /**< totals */
    cw_status_t last;
    uint64_t last_ns; /**< when the last check ended (0: none) */
    uint64_t last_rtt_ns;
};

/** An admin connection: it reads one request, then writes the answer
 *  without blocking (as the socket takes it), then reads what the client
 *  still sends until it closes; each phase has a deadline. */
struct gw_admin_conn {
    int fd;
    char buf[GW_ADMIN_REQ_MAX]; /**< the request (HTTP: with its headers) */
    size_t len;
    uint64_t deadline_ns;
    bool tcp;   /**< on the TCP endpoint (else the Unix socket) */
    bool local; /**< the client is on this host: a loopback
                     address, or the Unix socket */
    char *out;  /**< the answer, once the request is complete */
    size_t out_len, out_off;
    bool closing; /**< answer sent, write side shut */
};

#define GW_ADMIN_CONNS 8

struct gw {
    const char *config_path;
    struct cw_config *own_cfg;    /**< after a reload; else NULL */
    const struct cw_config *cfg;  /**< current */
    struct cw_route_table *table; /**< current (one reference) */
    cw_context_t *ctx;
    cw_rpc_id_t ping_id;
    struct gw_net nets[GW_MAX_NETS];
    unsigned nnets;
    bool busy_poll;
    uint64_t spin_ns; /**< poll this long after activity */

    /* forwarding: totals over the workers (each has its own share) */
    _Atomic unsigned inflight;     /**< forwards in flight, and the
                                        workers' spare slots (leases) */
    unsigned lease_batch;          /**< slots a worker leases at once
                                        (gw_lease_batch_set) */
    _Atomic unsigned nqueued;      /**< requests waiting for a slot */
    _Atomic unsigned nqsrcs;       /**< sources with requests waiting */
    _Atomic unsigned nsrcs;        /**< sources holding a slot or waiting */
    _Atomic unsigned qturn;        /**< the worker whose queue is offered
                                        the next freed slot (round robin
                                        over those with requests waiting) */
    struct gw_route_stats *routes; /**< gw->lock */
    struct gw_route_stats **routes_tail; /**< where the next one goes */
    struct cw_htable rstats;             /**< gw_route_stats by dest, next hop
                                              (gw->lock) */
    uint64_t started_ns;

    /* health */
    struct gw_hc *hcs;
    unsigned nhcs;
    uint64_t health_generation;
    unsigned pings_inflight;

    /* signals, admin, lifecycle */
    int sigfd;
    int admin_fd;              /**< gateway.admin (TCP), or -1 */
    int admin_unix_fd;         /**< gateway.admin_socket, or -1 */
    bool watching;             /**< sigfd, admin fds wake cw_progress */
    char admin_addr[80];       /**< bound admin host:port */
    char admin_unix_path[108]; /**< the socket file bound here ... */
    uint64_t admin_unix_dev, admin_unix_ino; /**< ... and its identity,
                                                  checked before unlink */
    char *admin_token;       /**< gateway.admin_token_file's token: the
                                  TCP endpoint needs it; NULL: none */
    int64_t config_loaded_s; /**< when it was loaded (wall clock, s) */
    struct gw_admin_conn conns[GW_ADMIN_CONNS];
    bool draining;
    bool drain_canceled;
    uint64_t unanswered; /**< requests not answered yet, or whose
                              overflowed answer is not collected
                              yet, all shards (gw_unanswered_update,
                              housekeeping) */
    bool cancel_all;     /**< threaded: cancel every forward now
                              (the main loop, once it dropped the
                              locks) */
    uint64_t drain_deadline_ns;
    bool stop;
    uint64_t reloads, reload_failures;
    char last_reload_error[256];
    const struct cw_config *start_cfg; /**< the one it started with (the
                                            caller's, alive while it runs) */
    char restart_pending[512];         /**< keys a reload changed that only a
                                            restart applies ("a, b"), or "" */

    struct gw_bulk *bulk; /**< bulk delegation (gw_bulk.h) */

    /* shards (threads.c): one without gateway.threads > 1 */
    struct gw_shard *shards;
    unsigned nshards;
    bool threaded; /**< nshards > 1: locks are used */
    pthread_mutex_t lock;
    atomic_bool threads_stop;
    /** Threaded, from gw_threads_start to gw_threads_stop: other threads
     *  may run, so the lock assertions apply (setup and teardown run on
     *  one thread without them). */
    atomic_bool threads_on;
    _Atomic uint64_t handoffs;         /**< forwards staged from a thread to
                                            another shard's (threaded) */
    _Atomic unsigned max_cached_addrs; /**< limits.max_cached_addrs of the
                                            current config (read by every
                                            worker without gw->lock) */
};

static inline struct gw_fwd *gw_fwd_of_work(struct gw_work *w)
{
    return (struct gw_fwd *)(void *)((char *)w - offsetof(struct gw_fwd, work));
}

/** Take @p m in threaded mode only (one worker takes no lock). */
static inline void gw_mlock(const struct gw *gw, pthread_mutex_t *m)
{
    if (gw->threaded)
        cw_mutex_lock(m);
}

static inline void gw_munlock(const struct gw *gw, pthread_mutex_t *m)
{
    if (gw->threaded)
        cw_mutex_unlock(m);
}

/** Whether the lock assertions apply: threaded mode with the worker
 *  threads running (setup and teardown run on one thread, unlocked). */
static inline bool gw_locking(const struct gw *gw)
{
    return gw->threaded &&
           atomic_load_explicit(&gw->threads_on, memory_order_relaxed);
}

/** Whether the calling thread holds every worker's lock (for assertions:
 *  the locks are error-checking where asserts are on). */
static inline bool gw_workers_held(const struct gw *gw)
{
    for (unsigned i = 0; i < gw->nshards; i++)
        if (!cw_mutex_held(&gw->shards[i].lock))
            return false;
    return true;
}

/** Whether the calling thread holds gw->lock or a worker's lock: a reload
 *  (gw_lock_all) cannot swap the configuration or the table meanwhile. */
static inline bool gw_some_held(const struct gw *gw)
{
    if (cw_mutex_held(&gw->lock))
        return true;
    for (unsigned i = 0; i < gw->nshards; i++)
        if (cw_mutex_held(&gw->shards[i].lock))
            return true;
    return false;
}

/** The calling thread holds @p m, where the locks apply. */
#define GW_ASSERT_LOCKED(gw, m) CW_ASSERT(!gw_locking(gw) || cw_mutex_held(m))
/** The calling thread does not hold @p m. */
#define GW_ASSERT_UNLOCKED(gw, m)                                              \
    CW_ASSERT(!(gw)->threaded || !cw_mutex_held(m))
/** Every worker's lock is held, where the locks apply. */
#define GW_ASSERT_WORKERS_LOCKED(gw)                                           \
    CW_ASSERT(!gw_locking(gw) || gw_workers_held(gw))
/** Every worker's lock and gw->lock are held (gw_lock_all), where the
 *  locks apply. */
#define GW_ASSERT_ALL_LOCKED(gw)                                               \
    CW_ASSERT(!gw_locking(gw) ||                                               \
              (gw_workers_held(gw) && cw_mutex_held(&(gw)->lock)))

/** The gateway lock: shared state off the request path. */
static inline void gw_lock(struct gw *gw)
{
    gw_mlock(gw, &gw->lock);
}
static inline void gw_unlock(struct gw *gw)
{
    gw_munlock(gw, &gw->lock);
}

/** Worker @p w's lock: its forwarding state. */
static inline void gw_wlock(struct gw_shard *w)
{
    gw_mlock(w->gw, &w->lock);
}
static inline void gw_wunlock(struct gw_shard *w)
{
    gw_munlock(w->gw, &w->lock);
}

/** Worker @p w's next-hop address cache lock. */
static inline void gw_alock(struct gw_shard *w)
{
    gw_mlock(w->gw, &w->addr_lock);
}

static inline void gw_aunlock(struct gw_shard *w)
{
    gw_munlock(w->gw, &w->addr_lock);
}

/** Every worker's lock, then gw->lock (threaded mode only): the control
 *  plane, which reads or changes what the workers use. */
static inline void gw_lock_all(struct gw *gw)
{
    if (!gw->threaded)
        return;
    for (unsigned i = 0; i < gw->nshards; i++)
        cw_mutex_lock(&gw->shards[i].lock);
    cw_mutex_lock(&gw->lock);
}

static inline void gw_unlock_all(struct gw *gw)
{
    if (!gw->threaded)
        return;
    cw_mutex_unlock(&gw->lock);
    for (unsigned i = gw->nshards; i-- > 0;)
        cw_mutex_unlock(&gw->shards[i].lock);
}

/** The counters of every worker summed (their locks taken one at a time
 *  unless @p locked: the caller holds them all). */
void gw_counts_sum(struct gw *gw, bool locked, struct gw_counts *c);

/** The counters summed, every worker's lock held by the caller (the
 *  admin interface runs under gw_lock_all). */
static inline struct gw_counts gw_counts_locked(struct gw *gw)
{
    struct gw_counts c;

    GW_ASSERT_WORKERS_LOCKED(gw);
    gw_counts_sum(gw, true, &c);
    return c;
}

/** Parsed destinations cached by every worker (their locks held). */
size_t gw_rcache_count(struct gw *gw);

/* gateway.c */
struct gw_net *gw_net_by_name(struct gw *gw, const char *name);
/** True if @p net is one of @p gn's endpoints (any shard's). */
bool gw_net_has(const struct gw *gw, const struct gw_net *gn,
                const cw_network_t *net);
/** The network a source address arrived on (by plugin and protocol),
 *  removed ones included. */
struct gw_net *gw_net_of_addr(struct gw *gw, const char *uri);
cw_status_t gw_net_open(struct gw *gw, const struct cw_config_network *cn,
                        struct gw_net *gn);
/** Install @p cfg (+ new @p table, reference taken over) as current. */
void gw_set_config(struct gw *gw, struct cw_config *own,
                   const struct cw_config *cfg, struct cw_route_table *table);

/* forward.c */
/** Forward one request on worker @p w, whose endpoint it reached (its
 *  lock held in threaded mode): @p qseq is 0 for a new one, else its
 *  arrival number in the wait queue, where it comes from. */
void gw_forward(struct gw_shard *w, cw_handle_t *in, uint64_t qseq);
/** Answer a request with @p st and release it. */
void gw_answer(cw_handle_t *in, cw_status_t st);
/** A next hop from @p sh's cache (looked up in its context on a miss),
 *  marked used at @p now (cw_now_ns); threaded mode: sh->addr_lock held. */
cw_status_t gw_addr_get(struct gw_shard *sh, const char *uri, uint64_t now,
                        cw_addr_t **addr_p);
/** Forget a cached next hop (takes sh->addr_lock). */
void gw_addr_forget(struct gw_shard *sh, const char *uri);
/** Entries in every shard's address cache and how many were dropped for
 *  the bound (takes each sh->addr_lock). */
void gw_addr_cache_stats(struct gw *gw, uint64_t *count_p, uint64_t *evicted_p);
/** Empty every shard's address cache. */
void gw_addr_cache_fini(struct gw *gw);
/** The shard whose context holds @p ctx (shard 0 if none). */
struct gw_shard *gw_shard_of_ctx(struct gw *gw, const cw_context_t *ctx);
/** Forget a cached next hop in every shard. */
void gw_addr_forget_all(struct gw *gw, const char *uri);
/** Forget every parsed destination of every worker (the networks or the
 *  table changed; their locks held in threaded mode). */
void gw_rcache_clear(struct gw *gw);
/** The open network @p net is, or NULL. */
struct gw_net *gw_net_of(struct gw *gw, const cw_network_t *net);
struct gw_route_stats *gw_route_stats_get(struct gw *gw, const char *dest,
                                          const char *nexthop);
void gw_route_stats_fini(struct gw *gw);
void gw_fwd_cancel_all(struct gw *gw);
/** Cancel forwarded RPCs older than limits.max_timeout (CW_TIMEOUT). */
void gw_fwd_cut_old(struct gw *gw, uint64_t now);
/** Free every worker's pool of forward records. */
void gw_fwd_pool_fini(struct gw *gw);
/** True for statuses that say the next hop itself failed. */
bool gw_status_is_transport(cw_status_t st);
/** Health took next hop @p addr down: re-forward the idempotent requests
 *  waiting on it (docs/bulk-gateway.md, "Resume"); every worker's lock
 *  held in threaded mode. */
void gw_fwd_hop_down(struct gw *gw, const char *addr);
/** Release a finished record: counters, admission, tokens, out handle. */
void gw_fwd_free(struct gw_fwd *f);
/** Count how a relayed forward ended, passive health, then free it. */
void gw_fwd_account(struct gw_fwd *f, cw_status_t st, uint64_t t_end);
/** Count a forward that could not be sent (@p st). */
void gw_fwd_fail_account(struct gw_fwd *f, cw_status_t st);

/* forward_mt.c */
/** gw_forward puts @p f in its worker's queue for sending
 *  (the worker's lock held, so that the queue holds the requests in the
 *  order they were admitted); the caller runs gw_deferred_flush once it
 *  dropped the lock, which sends them. */
void gw_fwd_stage(struct gw_fwd *f);
/** Cancel every forward in flight (@p all) or those past
 *  limits.max_timeout; takes each worker's lock in turn, cancels after
 *  dropping it. */
void gw_fwd_cancel_mt(struct gw *gw, bool all);
/** The forward hook of a worker's context (@p arg). */
void gw_forward_hook_mt(cw_handle_t *in, void *arg);
/** gw_forward taking @p w's lock, answering after it. */
void gw_forward_mt(struct gw_shard *w, cw_handle_t *in, uint64_t qseq);
/** On its worker, send a record gw_forward made. */
void gw_fwd_send(struct gw_fwd *f);
/** On its worker, relay how the forward ended. */
void gw_fwd_finish(struct gw_fwd *f);

/* admission.c */
/** Admission of request @p in from @p src_key, which arrived on @p ingress
 *  (or NULL), on route @p rs capped at @p route_cap (0: no cap).
 *  @p qseq: 0 for a new request, else its arrival number in the wait queue,
 *  where it comes from.  Returns CW_OK when it holds a slot and goes now
 *  (*src_p: its source, for gw_admit_done); CW_AGAIN when it waits in the
 *  queue (it is the queue's now); else the status to answer it with
 *  (CW_BUSY: over a queue bound or the source's fair share; counted as
 *  busy).  A request never takes a slot while an older one of its source
 *  waits for the same route (or to be routed again after a reload). */
#define GW_CAP_ROUTE 1u /* a slot of its route's max_inflight */
#define GW_CAP_NET   2u /* a slot of its network's max_inflight */
/*  *caps_p (with CW_OK): the GW_CAP_* slots it holds besides the total. */
cw_status_t gw_admission(struct gw_shard *w, cw_handle_t *in,
                         struct gw_net *ingress, struct gw_route_stats *rs,
                         unsigned route_cap, const char *src_key, uint64_t qseq,
                         uint64_t now, struct gw_source **src_p,
                         unsigned *caps_p);
void gw_admit_done(struct gw_shard *w, struct gw_source *src);
/** The key (address string) of the source of request @p in: the last
 *  admitted source's key when @p in comes from the same peer (cw_addr_cmp
 *  on a copy of its address, not a string written and hashed again),
 *  else written into @p buf (@p len bytes; "" when it cannot be). */
const char *gw_source_key(struct gw_shard *w, cw_handle_t *in, char *buf,
                          size_t len);
/** Give back the slots gw_admission took for a request that is not
 *  forwarded after all (@p caps as it said), and its source's hold (@p src,
 *  or NULL); gw_fwd_free does the same for a forward. */
void gw_admit_undo(struct gw_shard *w, struct gw_net *ingress,
                   struct gw_route_stats *rs, struct gw_source *src,
                   unsigned caps);
/** A network's and a route's counters summed over the workers. */
void gw_net_sum(const struct gw *gw, const struct gw_net *n,
                struct gw_net_sum *s);
void gw_rs_sum(const struct gw *gw, const struct gw_route_stats *rs,
               struct gw_rs_sum *s);
/* forward.c: the route table of a forward of worker @p w (its lock held):
 * taken from the worker's reference, given back to it or, for a table a
 * reload replaced, to the table. */
struct cw_route_table *gw_table_take(struct gw_shard *w);
void gw_table_put(struct gw_shard *w, struct cw_route_table *t);
/** Every worker's lock held: new forwards take @p table (NULL: the
 *  workers drop theirs, at the end). */
void gw_tables_switch(struct gw *gw, struct cw_route_table *table);
/** Set gw->lease_batch from the limit and the workers (at start and
 *  each reload, every worker's lock held). */
void gw_lease_batch_set(struct gw *gw);
/** Release one slot of the total a request of worker @p w held (its
 *  lock held). */
void gw_total_put(struct gw_shard *w);
/** Requests holding a slot of the total, over the workers (their locks
 *  held); gw->inflight also counts the workers' spare slots. */
unsigned gw_inflight_now(const struct gw *gw);
/** Forwards in flight that came in on @p n, over the workers. */
unsigned gw_net_inflight(const struct gw *gw, const struct gw_net *n);
void gw_sources_fini(struct gw *gw);
/** Free each worker's parked source admitted last before @p now minus
 *  GW_PARK_NS, or every one (@p all: a network is closing, whose
 *  addresses they may hold).  Every worker's lock held. */
void gw_sources_expire(struct gw *gw, uint64_t now, bool all);
/** On worker @p w, no lock held: forward its queued requests while there
 *  is room, one source after another, taking its lock per request, in
 *  one batch scope of its context; returns how many requests left the
 *  queue (forwarded or answered). */
unsigned gw_queue_run_mt(struct gw_shard *w);
/** On worker @p w, no lock held: a slot was freed here.
 *  It is offered to the workers' queues in turn (round robin over those
 *  with requests waiting, so that the sources of every worker get their
 *  share): run here if it is this worker's turn, else that worker is
 *  kicked (gw_queue_kicked) and woken. */
void gw_queue_offer(struct gw_shard *w);
/** On worker @p w: it was offered a slot; it runs its
 *  queue, and passes the offer on if nothing there could use it. */
void gw_queue_kicked(struct gw_shard *w);
/** Whether a freed slot is being offered to a worker's queue now. */
bool gw_queue_offered(struct gw *gw);
/** On worker @p w, no lock held, when no offer is on its way: offer
 *  whatever slot is free to the worker whose turn it is (after a reload,
 *  and as a periodic safety net against an offer that no queue took
 *  while a request was going into one). */
void gw_queue_nudge(struct gw_shard *w);
/** The route table changed (reload): each source's queued requests go into
 *  one lane, in arrival order, and are routed again, oldest first, as the
 *  queue serves them (gw->lock held in threaded mode). */
void gw_queue_relane(struct gw *gw);
/** Answer @p in with @p st, now or (threaded, gw->lock held) once the lock
 *  is dropped (gw_deferred_flush). */
void gw_reject(struct gw *gw, cw_handle_t *in, cw_status_t st);
/** Send the answers gw_reject deferred on this thread (and the fails
 *  decided under gw->lock); wake the shards gw_fwd_stage handed requests
 *  to, and run this shard's own queue if it handed itself some. */
void gw_deferred_flush(void);
/** End outgoing forward @p out with CW_DISCONNECTED once gw->lock
 *  is dropped (gw_deferred_flush); a reference is taken now. */
void gw_fwd_fail_later(cw_handle_t *out);
/** Re-forward @p f, whose next hop failed (f->st), through
 *  another gateway of its route, marked RESUME; true if it was staged. */
bool gw_fwd_resume_mt(struct gw_fwd *f);
/** Answer queued requests past their deadline with @p st, those their
 *  caller canceled with CW_CANCELED (or @p all with @p st), on every
 *  worker (their locks held in threaded mode). */
void gw_queue_expire(struct gw *gw, bool all, cw_status_t st);
/** Answer the queued requests that came in on network @p net with @p st
 *  (a reload removed it); returns how many there were. */
unsigned gw_queue_answer_net(struct gw *gw, const cw_network_t *net,
                             cw_status_t st);

/* admin_metrics.c */
/** The counters in the Prometheus text exposition format (admin
 *  "metrics", HTTP GET /metrics). */
void gw_admin_metrics(struct gw *gw, FILE *out);
/** Messages dropped and requests for unknown RPCs, summed over the shards
 *  (rx_dropped, na_dropped, no_rpc of @p cs; the rest zero). */
void gw_ctx_totals(struct gw *gw, struct cw_context_stats *cs);
/** A metric family's "# HELP" and "# TYPE" lines. */
void gw_metric_head(FILE *out, const char *name, const char *type,
                    const char *help);

/* health.c */
cw_status_t gw_health_rebuild(struct gw *gw);
/** Report an outcome (@p by: what it was, @p st: its status) on next hop
 *  @p id of @p table, and log the hop leaving or rejoining rotation when
 *  @p table is the current one (threaded mode: gw->lock or the calling
 *  worker's lock held, either of which keeps a reload from swapping the
 *  table meanwhile). */
void gw_health_report_nexthop(struct gw *gw, struct cw_route_table *table,
                              unsigned id, bool ok, const char *by,
                              cw_status_t st);
/** The same for backend @p backend of service @p service. */
void gw_health_report_backend(struct gw *gw, struct cw_route_table *table,
                              unsigned service, unsigned backend, bool ok,
                              const char *by, cw_status_t st);
void gw_health_tick(struct gw *gw, uint64_t now);
void gw_health_fini(struct gw *gw);
/** True while a ping is in flight. */
bool gw_health_busy(const struct gw *gw);
/** When the next ping is due (UINT64_MAX: none). */
uint64_t gw_health_next(const struct gw *gw);
void gw_ping_handler(cw_handle_t *h, void *arg);

/* admin.c */
/** Open the admin endpoints @p g asks for (TCP, Unix socket) and read the
 *  TCP endpoint's token; logs and returns the first failure. */
cw_status_t gw_admin_open(struct gw *gw, const struct cw_config_gateway *g);
void gw_admin_poll(struct gw *gw, uint64_t now);
void gw_admin_close(struct gw *gw);
/** Run one admin command line; writes "OK\n"/"ERR ...\n" and a body.
 *  Commands that change the gateway (reload, drain) need @p local: a
 *  client on a loopback address; the others answer anyone the admin
 *  socket accepts (a scraper on another host, with admin on 0.0.0.0). */
void gw_admin_exec(struct gw *gw, const char *line, bool local, FILE *out);

/** Wall-clock seconds @p s as ISO-8601 UTC into @p buf. */
void gw_iso_time(int64_t s, char *buf, size_t len);

/* admin_peers.c */
#define GW_PEERS_SHOWN 100 /* rows of each kind "peers" shows by default */
/** The clients and next hops the gateway knows (every worker's lock
 *  held): "OK" and the @p limit most recently active of each, and how
 *  many more; "ERR" if out of memory. */
void gw_admin_peers(struct gw *gw, FILE *out, bool json, unsigned limit);

/* admin_http.c */
/** Answer HTTP request @p req (request line and headers) to @p out:
 *  the path is the command, the query its argument and "json". */
void gw_admin_http(struct gw *gw, const char *req, bool local, FILE *out);
/** The HTTP answer to a request without the admin token (401). */
void gw_admin_http_unauthorized(FILE *out);

/* reload.c */
/** Reload the configuration file; on failure @p err gets a summary. */
cw_status_t gw_reload(struct gw *gw, char *err, size_t errlen);
void gw_drain_start(struct gw *gw, const char *why);
/** Refresh gw->unanswered from the core's gauge on every shard (takes the
 *  contexts' locks: never under gw->lock). */
void gw_unanswered_update(struct gw *gw);
/** Drain bookkeeping (returns true once the gateway may exit). */
bool gw_drain_check(struct gw *gw, uint64_t now);
int gw_signals_open(void);
void gw_signals_poll(struct gw *gw);

/* threads.c */
/** gateway.threads: auto: the CPUs this process may run on, at most 16. */
unsigned gw_threads_auto(void);
/** Create the shards' contexts (@p n of them; 0: gw_threads_auto()). */
cw_status_t gw_shards_init(struct gw *gw, const struct cw_context_opts *o,
                           unsigned n);
/** Install the forward hook and the ping RPC on every shard. */
cw_status_t gw_shards_setup(struct gw *gw);
/** Start the threads of shards 1..n-1 (shard 0 is the main thread). */
cw_status_t gw_threads_start(struct gw *gw);
/** Stop and join them (their queues are run empty on the caller). */
void gw_threads_stop(struct gw *gw);
/** Run what is still queued on every worker (no worker thread left). */
void gw_shards_quiesce(struct gw *gw);
/** Destroy the shards' contexts. */
void gw_shards_fini(struct gw *gw);
/** Hand @p w to @p sh's thread: run at once if that is this thread. */
void gw_shard_post(struct gw_shard *sh, struct gw_work *w);
/** Queue @p w for @p sh's thread (its next pass, even from that thread). */
void gw_shard_queue(struct gw_shard *sh, struct gw_work *w);
/** Queue @p w for @p sh's thread without waking it.  Returns true when the
 *  queue was empty: the caller must then gw_shard_wake(@p sh) (unless it
 *  is @p sh's thread and drains it itself). */
bool gw_shard_push(struct gw_shard *sh, struct gw_work *w);
/** Wake @p sh's thread to look at its queue. */
void gw_shard_wake(struct gw_shard *sh);
/** Run what was queued for @p sh, in the order it was queued; true if
 *  anything ran.  Called again from within a work item it runs, it leaves
 *  the new items to the outer call, which runs them after the rest of its
 *  batch. */
bool gw_shard_drain(struct gw_shard *sh);
/** The shard this thread drives, or NULL. */
struct gw_shard *gw_shard_self(void);

#endif /* CW_GW_INT_H */
