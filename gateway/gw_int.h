/*
 * causewayd private state.  Everything here runs on the gateway's main
 * thread (the one that calls cw_trigger), so none of it is locked; helper
 * progress threads (gateway.threads > 1) only drive the networks.
 */
#ifndef CW_GW_INT_H
#define CW_GW_INT_H

#include <pthread.h>
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

#define GW_LOG "gw"
#define GW_MAX_NETS 8
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

/** One open network. */
struct gw_net {
    char name[32];
    char uri[CW_URI_MAX];       /**< as written in the config */
    char self[CW_URI_MAX];      /**< what the plugin chose */
    struct cw_uri parsed;       /**< of self */
    cw_network_t *net;
    bool removed;               /**< dropped by a reload (still bound) */
    uint64_t rx, denied, busy;  /**< requests that arrived on it */
    unsigned inflight;          /**< forwarded RPCs that came in on it */
    unsigned max_inflight;      /**< its limit from the config, 0 = none */
};

/** Counters of one route (kept across reloads, keyed by text). */
struct gw_route_stats {
    struct gw_route_stats *next;
    char *key;                  /**< "dest -> next hop" */
    char *dest;                 /**< pattern or kind ("proxy", "svc:x") */
    char *nexthop;              /**< network name or gateway address */
    uint64_t forwarded, failed, timedout, denied, busy, canceled;
    unsigned inflight;
    uint64_t hist[GW_HIST_BUCKETS];
    uint64_t lat_sum_ns, lat_n;
};

/** One caller (per-source fairness). */
struct gw_source {
    struct gw_source *next;
    unsigned inflight;
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
    char next_addr[CW_URI_MAX];   /**< resolved next hop (cache key) */
    struct gw_fwd *prev, *next;   /**< gw->fwds */
};

/** A request waiting for a slot. */
struct gw_queued {
    struct gw_queued *next;
    cw_handle_t *in;
};

/** A routing destination parsed once (forward.c): its own hops stripped,
 *  what the ACL is asked about, and what the route table is asked for. */
struct gw_rent {
    struct gw_rent *next;
    uint8_t kind;               /**< GW_RK_* (forward.c) */
    struct cw_uri target;       /**< parsed target, kinds HOPS and PLAIN */
    const char *target_s;       /**< formatted target (HOPS, PLAIN) */
    const char *rest;           /**< HOPS: the path beyond the next gateway */
    const char *acl_dest;       /**< "svc:name" or the final target */
    const char *service;        /**< SERVICE: its name */
    char key[];                 /**< the destination string, then the rest */
};

#define GW_RCACHE_BUCKETS 256
#define GW_RCACHE_MAX 4096

/** Cached resolved address. */
struct gw_addr_ent {
    struct gw_addr_ent *next;
    cw_addr_t *addr;
    char key[];
};

#define GW_ADDR_BUCKETS 256
#define GW_SRC_BUCKETS 256

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
struct gw_admin_conn {
    int fd;
    char buf[512];
    size_t len;
    uint64_t deadline_ns;
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
    struct gw_queued *queue_head, *queue_tail;
    unsigned nqueued;
    uint64_t next_cut_ns;
    uint64_t n_queued_total;
    unsigned nfree_fwds;
    unsigned inflight;
    struct gw_route_stats *routes;
    struct gw_addr_ent *addrs[GW_ADDR_BUCKETS];
    struct gw_rent *rcache[GW_RCACHE_BUCKETS];
    unsigned nrcache;
    struct gw_source *srcs[GW_SRC_BUCKETS];
    unsigned nsrcs;
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
    char admin_addr[80];        /**< bound admin host:port */
    struct gw_admin_conn conns[GW_ADMIN_CONNS];
    bool draining;
    bool drain_canceled;
    uint64_t drain_deadline_ns;
    bool stop;
    uint64_t reloads, reload_failures;
    char last_reload_error[256];

    struct gw_bulk *bulk;            /**< bulk delegation (gw_bulk.h) */

    /* helper progress threads */
    pthread_t *threads;
    unsigned nthreads;
    atomic_bool threads_stop;
};

/* gateway.c */
struct gw_net *gw_net_by_name(struct gw *gw, const char *name);
/** The network a source address arrived on (by plugin and protocol),
 *  removed ones included. */
struct gw_net *gw_net_of_addr(struct gw *gw, const char *uri);
cw_status_t gw_net_open(struct gw *gw, const struct cw_config_network *cn,
                        struct gw_net *gn);
/** Install @p cfg (+ new @p table, reference taken over) as current. */
void gw_set_config(struct gw *gw, struct cw_config *own,
                   const struct cw_config *cfg, struct cw_route_table *table);

/* forward.c */
/** FNV-1a of a string (cache and source tables). */
uint64_t gw_hash(const char *s);
void gw_forward_hook(cw_handle_t *in, void *arg);
/** Forward one request (@p requeued: it comes from the wait queue). */
void gw_forward(struct gw *gw, cw_handle_t *in, bool requeued);
/** Answer a request with @p st and release it. */
void gw_answer(cw_handle_t *in, cw_status_t st);
cw_status_t gw_addr_get(struct gw *gw, const char *uri, cw_addr_t **addr_p);
void gw_addr_forget(struct gw *gw, const char *uri);
void gw_addr_cache_fini(struct gw *gw);
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

/* admission.c */
/** Admit one RPC from @p src_key on route @p rs; CW_OK or CW_BUSY. */
cw_status_t gw_admit(struct gw *gw, struct gw_net *ingress,
                     struct gw_route_stats *rs, unsigned route_cap,
                     const char *src_key, struct gw_source **src_p);
void gw_admit_done(struct gw *gw, struct gw_source *src);
void gw_sources_fini(struct gw *gw);
/** Queue a request over capacity; CW_BUSY when the queue is full. */
cw_status_t gw_queue_push(struct gw *gw, cw_handle_t *in);
/** Forward queued requests while there is room. */
void gw_queue_run(struct gw *gw);
/** Answer queued requests past their deadline with @p st, those their
 *  caller canceled with CW_CANCELED (or @p all with @p st). */
void gw_queue_expire(struct gw *gw, bool all, cw_status_t st);

/* health.c */
cw_status_t gw_health_rebuild(struct gw *gw);
void gw_health_tick(struct gw *gw, uint64_t now);
void gw_health_fini(struct gw *gw);
/** True while a ping is in flight. */
bool gw_health_busy(const struct gw *gw);
void gw_ping_handler(cw_handle_t *h, void *arg);

/* admin.c */
cw_status_t gw_admin_open(struct gw *gw, const char *hostport);
void gw_admin_poll(struct gw *gw, uint64_t now);
void gw_admin_close(struct gw *gw);
/** Run one admin command line; writes "OK\n"/"ERR ...\n" and a body. */
void gw_admin_exec(struct gw *gw, const char *line, FILE *out);

/* reload.c */
/** Reload the configuration file; on failure @p err gets a summary. */
cw_status_t gw_reload(struct gw *gw, char *err, size_t errlen);
void gw_drain_start(struct gw *gw, const char *why);
/** Drain bookkeeping (returns true once the gateway may exit). */
bool gw_drain_check(struct gw *gw, uint64_t now);
int gw_signals_open(void);
void gw_signals_poll(struct gw *gw);

/* threads.c */
cw_status_t gw_threads_start(struct gw *gw, unsigned n);
void gw_threads_stop(struct gw *gw);

#endif /* CW_GW_INT_H */
