/*
 * causewayd private state.  With gateway.threads = 1 everything runs on the
 * gateway's main thread and nothing is locked.  With threads > 1 the
 * gateway is split into shards (threads.c), one thread and one context
 * each; the state below is then shared and guarded by gw->lock (gw_lock),
 * held for bookkeeping only; each shard's address cache has its own lock.
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

#define GW_LOG "gw"
#define GW_MAX_NETS 8
#define GW_MAX_SHARDS 64 /* gateway.threads: workers */
#define GW_HIST_BUCKETS 24 /* log2 buckets of added latency, 1 us .. 8 s */
#define GW_PING_RPC "causeway.ping"

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
    struct cw_hnode node;       /**< in gw_shard.addrs, keyed by key */
    cw_addr_t *addr;
    char key[];
};

/** One progress thread with its own context and the networks on it. */
struct gw_shard {
    struct gw *gw;
    unsigned idx;
    cw_context_t *ctx;
    pthread_t tid;
    bool started;
    unsigned nnets;                   /**< networks opened on it */
    uint64_t forwarded;               /**< forwards it ran that ended with
                                           an answer (gw->lock) */
    _Atomic(struct gw_work *) inbox;  /**< lock-free MPSC (gw_shard_post) */
    /* A reload's barrier (gw_fwd_barrier): the marker goes through the
     * inbox behind the sends staged before the reload. */
    struct gw_work mark;
    bool mark_queued;                 /**< in the inbox (gw->lock) */
    uint64_t mark_epoch;              /**< what it passes (gw->lock) */
    uint64_t mark_passed;             /**< the last one it passed */
    uint64_t passed;                  /**< every send staged on it before
                                           this epoch was sent (gw->lock) */
    struct gw_work *held, *held_tail; /**< sends of a later epoch than
                                           gw->epoch_clear, oldest first
                                           (the shard's thread only) */
    pthread_mutex_t addr_lock;        /**< threaded mode: the cache below */
    struct cw_htable addrs;           /**< next hops in ctx (gw_addr_ent),
                                           at most limits.max_cached_addrs,
                                           least recently used dropped */
    uint64_t addrs_evicted;           /**< entries dropped for the bound */
};

/** One open network. */
struct gw_net {
    char name[32];
    char uri[CW_URI_MAX];       /**< as written in the config */
    char self[CW_URI_MAX];      /**< what the plugin chose */
    struct cw_uri parsed;       /**< of self */
    cw_network_t *net;          /**< the published endpoint (members[0]) */
    /** Its endpoint in each shard's context: one published address served
     *  by every shard (cw_network_open_spread); [i] is in shards[i]. */
    cw_network_t *members[GW_MAX_SHARDS];
    bool removed;               /**< dropped by a reload (still bound) */
    uint64_t rx, denied, busy;  /**< requests that arrived on it */
    unsigned inflight;          /**< forwarded RPCs that came in on it */
    unsigned max_inflight;      /**< its limit from the config, 0 = none */
};

/** Counters of one route (kept across reloads, keyed by text). */
struct gw_route_stats {
    struct gw_route_stats *next;  /**< gw->routes, in first-seen order */
    struct cw_hnode node;       /**< in gw->rstats, keyed by dest, '\0',
                                     nexthop (both in one allocation) */
    char *dest;                 /**< pattern or kind ("proxy", "svc:x") */
    char *nexthop;              /**< network name or gateway address */
    uint64_t forwarded, failed, timedout, denied, busy, canceled;
    unsigned inflight;
    uint64_t hist[GW_HIST_BUCKETS];
    uint64_t lat_sum_ns, lat_n;
};

/** A source's queued requests to one route, oldest first. */
struct gw_lane {
    struct gw_lane *next;             /**< the source's other lanes */
    struct gw_route_stats *rs;        /**< NULL: to be routed again (reload,
                                           gw_queue_relane) */
    unsigned cap;                     /**< its routes[].max_inflight */
    struct gw_queued *qhead, *qtail;
};

/** One caller (per-source fairness): kept while it has RPCs in flight or
 *  waiting in the queue. */
struct gw_source {
    struct cw_hnode node;             /**< in gw->srcs, keyed by key */
    unsigned inflight;
    unsigned queued;                  /**< requests waiting for a slot */
    struct gw_lane *lanes;            /**< those requests, one FIFO a route */
    struct gw_lane *lcur;             /**< the lane tried next (NULL: first) */
    struct gw_source *qprev, *qnext;  /**< gw->qring while queued > 0 */
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
    bool has_nexthop, has_backend;
    unsigned nexthop, service, backend;
    uint64_t t_in, t_sent, t_done;
    bool cut;                     /**< canceled at limits.max_timeout */
    unsigned resumes;             /**< re-forwarded after a next hop failed */
    bool hop_down;                /**< failed: health took its hop down */
    struct gw_btok *btoks;        /**< proxy bulk tokens (bulk_proxy_table.c) */
    /* threaded mode (threads.c) */
    struct gw_shard *in_sh, *eg_sh; /**< ingress and egress shards */
    cw_status_t st;               /**< how the outgoing forward ended */
    bool send_failed;             /**< it never left (st says why) */
    bool resume;                  /**< re-forwarded: send it as RESUME */
    struct gw_work work;          /**< hand-off between shards */
    uint64_t epoch;               /**< gw->epoch when it was staged */
    char next_addr[CW_URI_MAX];   /**< resolved next hop (cache key) */
    struct gw_fwd *prev, *next;   /**< gw->fwds */
    char dest[CW_ADDR_STR_MAX];   /**< threaded: destination beyond next */
};

/** A request waiting for a slot (or, deferred, an answer to send). */
struct gw_queued {
    struct gw_queued *next;
    cw_handle_t *in;
    cw_status_t st;
    uint64_t seq;                 /**< queued: its arrival (gw->qseq) */
    const cw_network_t *net;      /**< queued: the network it came in on
                                       (its published endpoint) */
};

/** A routing destination parsed once (forward.c): its own hops stripped,
 *  what the ACL is asked about, and what the route table is asked for. */
struct gw_rent {
    struct cw_hnode node;       /**< in gw->rcache, keyed by key */
    uint8_t kind;               /**< GW_RK_* (forward.c) */
    struct cw_uri target;       /**< parsed target, kinds HOPS and PLAIN */
    const char *target_s;       /**< formatted target (HOPS, PLAIN) */
    const char *rest;           /**< HOPS: the path beyond the next gateway */
    const char *acl_dest;       /**< "svc:name" or the final target */
    const char *acl_svc;        /**< the name in acl_dest, if a service */
    struct cw_uri acl_uri;      /**< acl_dest parsed, if not a service */
    struct cw_route_memo memo;  /**< the routes target matched */
    struct gw_route_stats *rs;  /**< counters of the last route taken... */
    const char *rs_dest, *rs_hop; /**< ... its pattern and next hop */
    const char *service;        /**< SERVICE: its name */
    char key[];                 /**< the destination string, then the rest */
};


/** A health-checked target: next-hop gateway or service backend. */
struct gw_hc {
    char *addr;
    bool is_backend;
    unsigned nexthop;           /**< when !is_backend */
    unsigned service, backend;  /**< when is_backend */
    bool inflight;
    uint64_t next_ns;
    uint64_t ok, fail;          /**< totals */
    cw_status_t last;
    uint64_t last_rtt_ns;
};

/** An admin connection. */
/* An admin connection: it reads one request, then writes the answer
 * without blocking (as the socket takes it), then reads what the client
 * still sends until it closes; each phase has a deadline. */
struct gw_admin_conn {
    int fd;
    char buf[512];
    size_t len;
    uint64_t deadline_ns;
    bool local;          /**< the client connected from a loopback address */
    char *out;           /**< the answer, once the request is complete */
    size_t out_len, out_off;
    bool closing; /**< answer sent, write side shut */
};

#define GW_ADMIN_CONNS 8

struct gw {
    const char *config_path;
    struct cw_config *own_cfg;       /**< after a reload; else NULL */
    const struct cw_config *cfg;     /**< current */
    struct cw_route_table *table;    /**< current (one reference) */
    cw_context_t *ctx;
    cw_rpc_id_t ping_id;
    struct gw_net nets[GW_MAX_NETS];
    unsigned nnets;
    bool busy_poll;
    uint64_t spin_ns;                /**< poll this long after activity */

    /* forwarding */
    struct gw_fwd *fwds;
    struct gw_fwd *free_fwds;        /**< pool: no malloc per RPC */
    struct gw_source *qring;         /**< sources with queued requests,
                                          next to be served first */
    unsigned nqueued, nqsrcs;
    uint64_t qseq;                   /**< the last arrival number given to
                                          a queued request */
    uint64_t next_cut_ns;
    uint64_t n_queued_total;
    unsigned nfree_fwds;
    unsigned inflight;
    struct gw_route_stats *routes;
    struct gw_route_stats **routes_tail; /**< where the next one goes */
    struct cw_htable rstats;         /**< gw_route_stats by dest, next hop */
    struct cw_htable rcache;         /**< gw_rent by destination string, at
                                          most limits.max_cached_dests,
                                          least recently used dropped */
    uint64_t n_rcache_evicted;       /**< entries dropped for the bound */
    struct cw_htable srcs;           /**< gw_source by source address, at
                                          most limits.max_sources */
    unsigned nsrcs;                  /**< cw_htable_count(&srcs) */
    uint64_t n_src_refused;          /**< requests of a new source refused
                                          with CW_BUSY at the bound */
    uint64_t started_ns;
    uint64_t n_forwarded, n_failed, n_timedout, n_denied, n_busy,
        n_noroute, n_draining, n_refused_bulk, n_canceled, n_resumed;

    /* health */
    struct gw_hc *hcs;
    unsigned nhcs;
    uint64_t health_generation;
    unsigned pings_inflight;

    /* signals, admin, lifecycle */
    int sigfd;
    int admin_fd;
    bool watching;              /**< sigfd, admin_fd wake cw_progress */
    char admin_addr[80];        /**< bound admin host:port */
    struct gw_admin_conn conns[GW_ADMIN_CONNS];
    bool draining;
    bool drain_canceled;
    uint64_t unanswered;        /**< requests not answered yet, or whose
                                     overflowed answer is not collected
                                     yet, all shards (gw_unanswered_update,
                                     housekeeping) */
    bool cancel_all;            /**< threaded: cancel every forward now */
    uint64_t drain_deadline_ns;
    bool stop;
    uint64_t reloads, reload_failures;
    char last_reload_error[256];

    struct gw_bulk *bulk;            /**< bulk delegation (gw_bulk.h) */

    /* shards (threads.c): one without gateway.threads > 1 */
    struct gw_shard *shards;
    unsigned nshards;
    bool threaded;                   /**< nshards > 1: gw->lock is used */
    pthread_mutex_t lock;
    atomic_bool threads_stop;
    uint64_t epoch;               /**< reloads so far (gw->lock) */
    _Atomic uint64_t epoch_clear; /**< every shard passed this epoch's
                                       barrier: its sends may go */
    _Atomic uint64_t handoffs;    /**< forwards staged from a thread to
                                       another shard's (threaded) */
    _Atomic unsigned max_cached_addrs; /**< limits.max_cached_addrs of the
                                            current config (read by every
                                            worker without gw->lock) */
};

static inline struct gw_fwd *gw_fwd_of_work(struct gw_work *w)
{
    return (struct gw_fwd *)(void *)((char *)w - offsetof(struct gw_fwd, work));
}

/** Take the gateway lock (threaded mode only). */
static inline void gw_lock(struct gw *gw)
{
    if (gw->threaded)
        pthread_mutex_lock(&gw->lock);
}

static inline void gw_unlock(struct gw *gw)
{
    if (gw->threaded)
        pthread_mutex_unlock(&gw->lock);
}

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
void gw_forward_hook(cw_handle_t *in, void *arg);
/** Forward one request: @p qseq is 0 for a new one, else its arrival
 *  number in the wait queue, where it comes from. */
void gw_forward(struct gw *gw, cw_handle_t *in, uint64_t qseq);
/** Answer a request with @p st and release it. */
void gw_answer(cw_handle_t *in, cw_status_t st);
/** A next hop from @p sh's cache (looked up in its context on a miss);
 *  threaded mode: sh->addr_lock held. */
cw_status_t gw_addr_get(struct gw_shard *sh, const char *uri,
                        cw_addr_t **addr_p);
/** Forget a cached next hop (takes sh->addr_lock). */
void gw_addr_forget(struct gw_shard *sh, const char *uri);
/** Entries in every shard's address cache and how many were dropped for
 *  the bound (takes each sh->addr_lock). */
void gw_addr_cache_stats(struct gw *gw, uint64_t *count_p,
                         uint64_t *evicted_p);
/** Empty every shard's address cache. */
void gw_addr_cache_fini(struct gw *gw);
/** The shard whose context holds @p ctx (shard 0 if none). */
struct gw_shard *gw_shard_of_ctx(struct gw *gw, const cw_context_t *ctx);
/** Forget a cached next hop in every shard. */
void gw_addr_forget_all(struct gw *gw, const char *uri);
/** Forget every parsed destination (the networks or the table changed). */
void gw_rcache_clear(struct gw *gw);
/** The open network @p net is, or NULL. */
struct gw_net *gw_net_of(struct gw *gw, const cw_network_t *net);
struct gw_route_stats *gw_route_stats_get(struct gw *gw, const char *dest,
                                          const char *nexthop);
void gw_route_stats_fini(struct gw *gw);
void gw_fwd_cancel_all(struct gw *gw);
/** Cancel forwarded RPCs older than limits.max_timeout (CW_TIMEOUT). */
void gw_fwd_cut_old(struct gw *gw, uint64_t now);
/** Free the pool of forward records. */
void gw_fwd_pool_fini(struct gw *gw);
/** True for statuses that say the next hop itself failed. */
bool gw_status_is_transport(cw_status_t st);
/** Health took next hop @p addr down: re-forward the idempotent requests
 *  waiting on it (docs/bulk-gateway.md, "Resume"). */
void gw_fwd_hop_down(struct gw *gw, const char *addr);
/** Release a finished record: counters, admission, tokens, out handle. */
void gw_fwd_free(struct gw_fwd *f);
/** Count how a relayed forward ended, passive health, then free it. */
void gw_fwd_account(struct gw_fwd *f, cw_status_t st, uint64_t t_end);
/** Count a forward that could not be sent (@p st). */
void gw_fwd_fail_account(struct gw_fwd *f, cw_status_t st);

/* forward_mt.c */
/** Threaded mode: gw_forward hands @p f to its egress shard for sending
 *  (gw->lock held, so that a shard's queue holds the requests in the
 *  order they were admitted); the caller runs gw_deferred_flush once it
 *  dropped the lock, which wakes that shard, or sends when it is this
 *  one. */
void gw_fwd_stage(struct gw_fwd *f);
/** Threaded mode, gw->lock held, where a reload swaps the route table:
 *  requests staged from now on are sent only once every shard has sent
 *  those staged before (a route may have moved to another shard's
 *  network: FIFO per source and route across the reload).  The caller
 *  runs gw_deferred_flush once it dropped the lock. */
void gw_fwd_barrier(struct gw *gw);
/** Threaded mode: whether @p sh holds sends its barrier has let go. */
bool gw_fwd_held_ready(struct gw_shard *sh);
/** Threaded mode: on @p sh's thread, send what gw_fwd_held_ready found. */
void gw_fwd_held_run(struct gw_shard *sh);
/** Threaded mode: cancel every forward in flight (@p all) or those past
 *  limits.max_timeout; takes gw->lock, cancels after dropping it. */
void gw_fwd_cancel_mt(struct gw *gw, bool all);
/** Threaded mode: the forward hook of a shard's context (@p arg). */
void gw_forward_hook_mt(cw_handle_t *in, void *arg);
/** Threaded mode: gw_forward taking gw->lock, answering after it. */
void gw_forward_mt(struct gw *gw, cw_handle_t *in, uint64_t qseq);
/** Threaded mode: on the egress shard, send a record gw_forward made. */
void gw_fwd_send(struct gw_fwd *f);
/** Threaded mode: on the ingress shard, relay how the forward ended. */
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
cw_status_t gw_admission(struct gw *gw, cw_handle_t *in,
                         struct gw_net *ingress, struct gw_route_stats *rs,
                         unsigned route_cap, const char *src_key,
                         uint64_t qseq, struct gw_source **src_p);
void gw_admit_done(struct gw *gw, struct gw_source *src);
void gw_sources_fini(struct gw *gw);
/** Forward queued requests while there is room, one source after another. */
void gw_queue_run(struct gw *gw);
/** Threaded mode: the same, taking gw->lock per request (any shard). */
void gw_queue_run_mt(struct gw *gw);
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
/** Threaded: end outgoing forward @p out with CW_DISCONNECTED once gw->lock
 *  is dropped (gw_deferred_flush); a reference is taken now. */
void gw_fwd_fail_later(cw_handle_t *out);
/** Threaded: re-forward @p f, whose next hop failed (f->st), through
 *  another gateway of its route, marked RESUME; true if it was staged. */
bool gw_fwd_resume_mt(struct gw_fwd *f);
/** Answer queued requests past their deadline with @p st, those their
 *  caller canceled with CW_CANCELED (or @p all with @p st). */
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
 *  @p table is the current one (gw->lock held in threaded mode). */
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
cw_status_t gw_admin_open(struct gw *gw, const char *hostport);
void gw_admin_poll(struct gw *gw, uint64_t now);
void gw_admin_close(struct gw *gw);
/** Run one admin command line; writes "OK\n"/"ERR ...\n" and a body.
 *  Commands that change the gateway (reload, drain) need @p local: a
 *  client on a loopback address; the others answer anyone the admin
 *  socket accepts (a scraper on another host, with admin on 0.0.0.0). */
void gw_admin_exec(struct gw *gw, const char *line, bool local, FILE *out);

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
/** Create the shards' contexts (@p n of them, one when n <= 1). */
cw_status_t gw_shards_init(struct gw *gw, const struct cw_context_opts *o,
                           unsigned n);
/** Install the forward hook and the ping RPC on every shard. */
cw_status_t gw_shards_setup(struct gw *gw);
/** Start the threads of shards 1..n-1 (shard 0 is the main thread). */
cw_status_t gw_threads_start(struct gw *gw);
/** Stop and join them (their queues are run empty on the caller). */
void gw_threads_stop(struct gw *gw);
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
/** Run what was queued for @p sh, in the order it was queued, behind the
 *  sends a reload's barrier held here once it lets them go
 *  (gw_fwd_barrier); true if anything ran.  Called again from within a
 *  work item it runs, it leaves the new items to the outer call, which
 *  runs them after the rest of its batch. */
bool gw_shard_drain(struct gw_shard *sh);
/** The shard this thread drives, or NULL. */
struct gw_shard *gw_shard_self(void);

#endif /* CW_GW_INT_H */
