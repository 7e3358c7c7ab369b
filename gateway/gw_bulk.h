/*
 * Bulk through the gateway (design §4, docs/bulk-gateway.md): proxy
 * tokens issued for the descriptors of forwarded requests
 * (bulk_proxy_table.c), the staging pool and its credits (staging.c) and
 * the pipelined delegation service (bulk_pipe.c).  Threaded mode: all of
 * it runs under gw->lock, each chunk transfer on the context of its side.
 */
#ifndef CW_GW_BULK_H
#define CW_GW_BULK_H

#include "gw_int.h"

#include <causeway/relay.h>

#define GW_BTOK_BUCKETS 256
/** Staged delegations one proxy handle may have at once; more get CW_BUSY
 *  (a target splitting one region into many transfers stays far below). */
#define GW_BTOK_MAX_PIPES 256

/** One issued proxy token. */
struct gw_btok {
    uint8_t tok[CW_BPROXY_TOKEN_LEN];
    struct gw_btok *hnext;       /**< hash chain */
    struct gw_btok *fnext;       /**< tokens of the same forward */
    cw_bulk_t *bulk;             /**< the descriptor it stands for */
    cw_addr_t *peer;             /**< where that descriptor came from */
    struct gw_shard *sh;         /**< whose context bulk and peer are in */
    char bound[CW_ADDR_STR_MAX]; /**< the peer that may use it: the next
                                      hop, or the member of it the
                                      requests go to (hop) */
    cw_addr_t *hop;              /**< that next hop, in sh's context */
    uint32_t perm;
    uint64_t total;
    uint64_t expiry_ns;
    unsigned refs;   /**< table + running pipes */
    unsigned npipes; /**< staged delegations on it now */
    bool revoked;
};

/** One staging buffer (a chunk) and the chunk it carries. */
struct gw_stage_slot {
    struct gw_stage_slot *next; /**< free list */
    cw_bulk_t **bulk;           /**< one per shard (its context), in the
                                     pool's array of nslots x nshards */
    struct gw_pipe *pipe;       /**< user while held */
    cw_bulk_op_t *op;           /**< chunk transfer in flight */
    size_t off, n;              /**< chunk within the transfer */
};

/** Staging pool with credits handed out fairly per transfer. */
struct gw_staging {
    char *mem;
    size_t bytes, chunk;
    unsigned nslots, nfree, nshards;
    struct gw_stage_slot *slots, *free;
    cw_bulk_t **bulks; /**< slot i's handles at [i * nshards] */
    struct gw_pipe *wait_head, *wait_tail; /**< transfers wanting a slot */
    uint64_t waits;                        /**< times a transfer waited */
    uint64_t uses;                         /**< slots handed out */
};

/** One delegated transfer. */
struct gw_pipe {
    struct gw_bulk *gb;
    cw_handle_t *h; /**< the delegation request */
    struct gw_btok *tok;
    cw_bulk_t *req_bulk;      /**< the requester's bytes */
    cw_bulk_t *sbulk, *dbulk; /**< source and destination */
    cw_addr_t *speer, *dpeer;
    struct gw_shard *ssh, *dsh; /**< contexts of the source and dest side */
    size_t soff, doff, len, next, done;
    unsigned active, depth;
    cw_status_t st;
    bool stop, waiting;
    struct gw_pipe *wnext; /**< staging wait queue */
    struct nau_list link;  /**< on gb->pipes: all running pipes */
};

struct gw_bulk {
    struct gw *gw;
    cw_rpc_id_t rpc_id;
    struct gw_btok *btoks[GW_BTOK_BUCKETS];
    struct gw_staging pool;
    struct nau_list pipes; /**< running (gw_pipe.link) */
    unsigned npipes;
    uint64_t issued, revoked;
    uint64_t rej_bad_handle, rej_expired, rej_range, rej_permission;
    uint64_t rej_malformed, rej_busy;
    uint64_t transfers, bytes, failed;
    uint64_t direct_transfers, direct_bytes; /**< answered with a grant */
};

/* bulk_proxy_table.c */
/** Replace every descriptor of @p in by a proxy token valid on @p egress
 *  for the next hop @p next, on the outgoing handle @p f->out. */
cw_status_t gw_bulk_rewrite(struct gw *gw, struct gw_fwd *f, cw_handle_t *in,
                            struct gw_net *egress, cw_addr_t *next);
/** Revoke the tokens of a finished forward. */
void gw_bulk_revoke(struct gw *gw, struct gw_fwd *f);
/** Find and check the token a delegation uses; counts rejections. */
cw_status_t gw_btok_check(struct gw_bulk *gb, const struct cw_bproxy_req *r,
                          cw_handle_t *h, struct gw_btok **tok_p);
void gw_btok_unref(struct gw_btok *t);
void gw_btok_fini(struct gw_bulk *gb);

/* staging.c */
/** The pool over @p bytes, one bulk handle per slot and shard. */
cw_status_t gw_staging_init(struct gw_staging *s, struct gw *gw, size_t bytes,
                            size_t chunk);
/** A free slot for @p p, or NULL with @p p queued for the next one. */
struct gw_stage_slot *gw_staging_get(struct gw_staging *s, struct gw_pipe *p);
/** Return a slot; waiting transfers are handed slots in turn. */
void gw_staging_put(struct gw_staging *s, struct gw_stage_slot *slot);
/** Drop @p p from the wait queue. */
void gw_staging_unwait(struct gw_staging *s, struct gw_pipe *p);
void gw_staging_fini(struct gw_staging *s);

/* bulk_pipe.c */
cw_status_t gw_bulk_init(struct gw *gw, const struct cw_config *cfg);
void gw_bulk_fini(struct gw *gw);
/** Bulk counters for the admin "stats" command (a ",\"bulk\":{...}" member
 *  in JSON, lines otherwise). */
void gw_bulk_stats(struct gw *gw, FILE *out, bool json);
/** The same counters in the Prometheus text format (admin "metrics"). */
void gw_bulk_metrics(struct gw *gw, FILE *out);
/** Staging hands @p slot to the waiting transfer @p p. */
void gw_pipe_resume(struct gw_pipe *p, struct gw_stage_slot *slot);
/** @p t was just revoked: answer its delegations waiting for staging
 *  (CW_CANCELED) now; its running ones stop at their next chunk. */
void gw_pipe_revoke(struct gw_bulk *gb, struct gw_btok *t);

#endif /* CW_GW_BULK_H */
