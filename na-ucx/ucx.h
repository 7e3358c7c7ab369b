/*
 * na-ucx private definitions.
 *
 * Objects: a class (one UCP context + worker + listener), peers (the
 * cw_na_addr_t handed out, one per listen address, reference counted),
 * connections (one UCP endpoint each, outgoing or accepted), operations and
 * memory handles.  Unexpected messages travel as active messages carrying
 * the sender's listen address; expected messages are tagged sends whose
 * upper 32 tag bits identify the sender; put/get are active-message
 * requests served by the memory owner with rendezvous into registered
 * memory (see docs/na-ucx.md for why).
 */
#ifndef CW_NA_UCX_H
#define CW_NA_UCX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <ucp/api/ucp.h>

#include <causeway/na_plugin.h>

#include "nau_list.h"
#include "nau_match.h"
#include "nau_pool.h"
#include "nau_ptable.h"
#include "nau_slab.h"

#define UCX_SUBSYS "na-ucx"

#define UCX_LOG(cls, level, ...)                                               \
    CW_NA_LOG((cls)->host, (level), UCX_SUBSYS, __VA_ARGS__)
#define UCX_ERR(cls, ...)  UCX_LOG(cls, CW_LOG_ERROR, __VA_ARGS__)
#define UCX_WARN(cls, ...) UCX_LOG(cls, CW_LOG_WARN, __VA_ARGS__)
/* Lines a peer can provoke at any rate (one per connection it opens and
 * drops): one a second per site, the next counting the ones suppressed. */
#define UCX_LOG_RL(cls, level, ...)                                            \
    CW_NA_LOG_RL((cls)->host, level, UCX_SUBSYS, __VA_ARGS__)
#define UCX_ERR_RL(cls, ...)  UCX_LOG_RL(cls, CW_LOG_ERROR, __VA_ARGS__)
#define UCX_WARN_RL(cls, ...) UCX_LOG_RL(cls, CW_LOG_WARN, __VA_ARGS__)
#define UCX_INFO_RL(cls, ...) UCX_LOG_RL(cls, CW_LOG_INFO, __VA_ARGS__)
#define UCX_DBG(cls, ...)     UCX_LOG(cls, CW_LOG_DEBUG, __VA_ARGS__)

/* Longest canonical "ip:port" / "[v6]:port" string, incl. NUL. */
#define UCX_ADDR_STR_MAX 64

/* Active message ids. */
enum {
    UCX_AM_UNEXP = 1,    /* unexpected message: hdr = tag + sender address */
    UCX_AM_PUT = 2,      /* put request: hdr = ucx_rma_hdr, data = payload */
    UCX_AM_PUT_ACK = 3,  /* put done: hdr = ucx_rma_ack */
    UCX_AM_GET = 4,      /* get request: hdr = ucx_rma_hdr, no data */
    UCX_AM_GET_RESP = 5, /* get answer: hdr = ucx_rma_ack, data = payload */
    UCX_AM_PING = 6,     /* liveness probe: hdr = magic */
    UCX_AM_PONG = 7,     /* its answer: hdr = magic */
};

/* Wire headers (host byte order: UCX here is homogeneous x86-64/LE; the
 * header carries a magic so a mismatch is dropped, not trusted). */
#define UCX_WIRE_MAGIC      0x43575558u /* "CWUX" */
#define UCX_UNEXP_HDR_FIXED 9u          /* magic(4) tag(4) addr_len(1) */
#define UCX_UNEXP_HDR_MAX   (UCX_UNEXP_HDR_FIXED + UCX_ADDR_STR_MAX)

struct ucx_rma_hdr {
    uint32_t magic;
    uint32_t pad;
    uint64_t op_id;
    uint64_t mem_id;
    uint64_t key;
    uint64_t off;
    uint64_t len;
};

struct ucx_rma_ack {
    uint32_t magic;
    uint32_t status; /* cw_status_t */
    uint64_t op_id;
};

struct ucx_conn;

/* A peer, named by its canonical listen address. */
struct cw_na_addr {
    struct nau_ptable_node pnode; /* key: str, in cls->peers */
    /* Upper tag bits of its expected sends: FNV-1a of str, computed alike
     * by the sender (of itself) and every receiver (of the sender). */
    uint32_t tag_id;
    struct sockaddr_storage ss;
    socklen_t sslen;
    struct ucx_conn *conn; /* endpoint used to reach it, may be NULL */
    struct nau_list recvs; /* expected receives posted for it */
    /* Its unexpected messages waiting for a receive (ucx_msg.c), oldest
     * first, and its place in cls->unexp_ready while there are any. */
    struct nau_list uq;
    struct nau_list uq_link;
    size_t uq_bytes; /* eager bytes copied into uq */
    char str[UCX_ADDR_STR_MAX];
};

/* One UCP endpoint. */
struct ucx_conn {
    struct nau_ptable_node enode; /* key: (uintptr_t)ep, in cls->eps */
    struct nau_list link;         /* cls->conns, then cls->dead, cls->closing */
    struct ucx_cls *cls;
    ucp_ep_h ep;
    struct cw_na_addr *peer; /* reference; NULL while unidentified */
    struct nau_list rma;     /* put/get waiting for this peer's answer */
    struct nau_list rkeys;   /* remote keys unpacked on this endpoint */
    bool outgoing;
    bool failed;
    bool released;   /* close_req handed back to UCX at finalize */
    bool probing;    /* a liveness probe is out */
    bool posting;    /* inside ucp_ep_close_nbx() */
    bool close_done; /* the close completed inside that call */
    ucs_status_t error;
    void *close_req;
    uint64_t heard_ns; /* last message or probe answer from the peer */
    uint64_t probe_ns; /* when the outstanding probe was sent */
};

/* A memory handle, local (registered) or remote (deserialized). */
/* One segment as UCX sees it (rkey mode): its address at the owner, a
 * mapping (local only) and the packed remote key. */
struct ucx_rseg {
    uint64_t addr;
    uint64_t len;
    ucp_mem_h memh;
    uint32_t bloblen;
    void *blob;
};

struct cw_na_mem {
    struct nau_ptable_node mnode; /* key: id, in cls->mems (local only) */
    bool local;
    uint32_t access;
    uint64_t id;
    uint64_t key;
    uint64_t total;
    size_t nsegs;
    struct cw_na_segment *segs; /* local only */
    size_t nrsegs;
    struct ucx_rseg *rsegs;    /* rkey mode only, else NULL */
    struct nau_list rkey_sets; /* unpacked keys, one set per endpoint */
};

/* Where an operation is. */
enum ucx_op_state {
    UCX_OP_ACTIVE = 0, /* posted, not finished */
    UCX_OP_FINISHED,   /* result known, UCX requests still out */
    UCX_OP_DONE,       /* in cls->done, callback pending */
};

#define UCX_IOV_INLINE  4
#define UCX_OP_POOL_MAX 256u

struct cw_na_op {
    struct nau_list link;         /* waiting list or cls->done */
    struct nau_list alink;        /* cls->ops: every live op */
    struct nau_ptable_node rnode; /* key: op id, in cls->rma_ops while
                                     waiting */
    struct ucx_cls *cls;
    enum cw_na_op_type type;
    enum ucx_op_state state;
    bool rma_counted; /* a put/get counted in cls->rma_inflight */
    bool exp_counted; /* an expected recv counted in cls->exp_waiting */
    cw_na_cb_t cb;
    void *arg;
    cw_status_t status;
    cw_status_t cancel_status; /* what UCS_ERR_CANCELED means */
    bool orphan;               /* discarded by finalize, no callback */
    bool released;             /* requests handed back to UCX (finalize) */
    void *req;                 /* main request (send, tag recv) */
    void *data_req;            /* rendezvous data receive */
    void *hdr_req;             /* send of a header only (get request) */
    void *inline_done;         /* request completed inside its posting call */
    unsigned nrma;             /* rkey mode: put/get pieces in flight */
    bool flushed;              /* rkey mode: the endpoint flush completed */
    cw_status_t rma_err;       /* rkey mode: first piece error */
    void *buf;
    size_t buf_len;
    size_t len; /* received bytes */
    uint32_t tag;
    struct cw_na_addr *peer;   /* expected recv: reference */
    struct cw_na_addr *source; /* unexpected recv: reference, handed over */
    struct ucx_conn *conn;     /* put/get: connection awaiting answer */
    struct ucx_early *early;   /* expected recv: message it waits to land */
    /* A held expected recv (not posted to UCX): in cls->held, by (sender
     * id, tag), until its message comes out of UCX's queue
     * (ucx_early_drain). */
    struct nau_match_entry hm;
    cw_na_mem_t *local;
    size_t local_off;
    ucp_dt_iov_t *iov;
    size_t iovcnt;
    /* From here on, not cleared by ucx_op_new: each is written before it
     * is read (UCX fills tag_info; the iov and header builders fill the
     * rest). */
    ucp_tag_recv_info_t tag_info;
    ucp_dt_iov_t iov_inline[UCX_IOV_INLINE];
    union {
        uint8_t unexp[UCX_UNEXP_HDR_MAX];
        struct ucx_rma_hdr rma;
    } hdr;
};

/* Bounds of the early queue (ucx_early.c). */
#define UCX_EARLY_MAX_MSGS  4096u
#define UCX_EARLY_MAX_BYTES (16u << 20)

/* An expected message that came before its receive was posted (ucx_early.c):
 * taken out of UCX's unexpected queue into the plugin's bounded one. */
struct ucx_early {
    /* cls->early by (sender id, tag), the upper and lower halves of the
     * tag it was sent with, until a receive takes it or it is dropped. */
    struct nau_match_entry m;
    struct nau_list link; /* cls->early_all, oldest first, until freed */
    struct ucx_cls *cls;
    size_t len;
    void *data;              /* malloc'ed copy; NULL when len == 0 */
    void *req;               /* UCX receive still moving it, or NULL */
    ucs_status_t status;     /* of that receive, once done */
    struct cw_na_op *waiter; /* receive posted while it was moving */
    bool landed;             /* its receive completed */
    bool posting;            /* inside ucp_tag_msg_recv_nbx() */
    bool dropped;            /* evicted while moving: freed once it lands */
    bool released;           /* req handed back to UCX at finalize */
};

/* A received unexpected message waiting for a posted buffer: one
 * allocation, the record and, for an eager message, its copy. */
struct ucx_umsg {
    struct nau_list link;
    struct nau_slab *slab;     /* the slab it lies in, or NULL: malloc() */
    struct cw_na_addr *source; /* reference */
    uint32_t tag;
    size_t len;
    size_t cost; /* what it is charged in the queue's bounds */
    bool rndv;
    void *data;     /* copy[], or the UCX rendezvous descriptor */
    uint8_t copy[]; /* an eager message's bytes */
};
/* What a queued message is charged beyond its length (eager) or in all
 * (rendezvous): its record and the allocator's header, so that the
 * bounds hold the heap the queue takes, a flood of small messages
 * included. */
#define UCX_UMSG_OVERHEAD (sizeof(struct ucx_umsg) + 16u)

struct ucx_cls {
    const struct cw_na_host *host;
    uint32_t flags;
    bool busy;
    bool proc_counted; /* counted in the process-wide instance count */
    bool finalizing;   /* requests and messages from peers are dropped */
    char tls[64];
    size_t eager_size;
    bool rma_rkey; /* put/get with UCX RMA and remote keys */
    ucp_context_h context;
    ucp_worker_h worker;
    ucp_listener_h listener; /* NULL while paused (ucx_guard.c) */
    /* The listener's address (its real port) to open it again after a
     * pause, and the descriptor guard (ucx_guard.c). */
    struct sockaddr_storage listen_ss;
    socklen_t listen_len;
    bool listening;    /* opened with CW_NA_LISTEN */
    bool fds_low;      /* fewer than fd_reserve descriptors were left */
    size_t fd_reserve; /* parameter; 0: never pause */
    uint64_t guard_next_ns;
    uint64_t guard_paused; /* times the listener was closed */
    int efd;
    struct cw_na_addr *self; /* reference */
    uint32_t self_tag_id;
    struct nau_ptable peers;
    struct nau_ptable eps;
    struct nau_ptable mems;
    struct nau_ptable rma_ops;
    unsigned rma_inflight; /* put/get ops posted, not finished */
    unsigned flushing;     /* finalize: endpoint flushes out */
    struct nau_list conns;
    struct nau_list dead;    /* failed, not yet closed */
    struct nau_list closing; /* close request outstanding */
    struct nau_list done;    /* completed ops, callbacks pending */
    struct nau_list ops;     /* every live op */
    /* Freed ops kept for reuse: two per round trip came from calloc() and
     * went back to free(), about 700 instructions of a 64 B round trip's
     * 8 500 at a cw-perf client (callgrind). */
    struct nau_pool op_pool;
    struct nau_list unexp_posted; /* posted unexpected receive buffers */
    /* Peers with unexpected messages waiting for a buffer, served in turn
     * (one message each), so a flooding peer delays nobody else's. */
    struct nau_list unexp_ready;
    struct nau_list ctls;      /* RMA control messages in flight */
    struct nau_list early_all; /* expected messages before their recv */
    struct nau_match early;    /* those a receive may still take */
    struct nau_match held;     /* expected receives held (ucx_early.c) */
    unsigned exp_waiting;      /* expected receives not finished */
    size_t unexp_queued;       /* bytes copied into unexp_queue */
    struct nau_slabs slabs;    /* where they lie (nau_slab.h) */
    size_t unexp_queue_max;    /* bound on those bytes */
    size_t unexp_peer_max;     /* bound on one peer's share of them */
    uint64_t next_op_id;
    uint64_t next_mem_id;
    uint64_t dropped;         /* malformed wire messages dropped */
    uint64_t rl_next_ns;      /* rate limit for data-path warnings */
    uint64_t live_timeout_ns; /* silent peer declared dead after this; 0 off */
    uint64_t live_next_ns;    /* next liveness scan */
    uint64_t close_flush_ns;  /* finalize's endpoint flush lasts at most this */
    uint64_t close_idle_ns;   /* ... and gives up after this without events */
};

/* Cast the opaque class. */
static inline struct ucx_cls *ucx_cls(cw_na_class_t *c)
{
    return (struct ucx_cls *)(void *)c;
}

/* Requests touching user memory hold back the callback; all of them hold
 * back freeing the op. */
static inline bool ucx_op_user_busy(const struct cw_na_op *op)
{
    return op->req != NULL || op->data_req != NULL || op->nrma > 0;
}
static inline bool ucx_op_any_busy(const struct cw_na_op *op)
{
    return ucx_op_user_busy(op) || op->hdr_req != NULL;
}

/* ucx_init.c */
cw_status_t ucx_status(ucs_status_t st);
/** One active-message handler on the worker (@p flags: UCP_AM_FLAG_*). */
cw_status_t ucx_set_am_handler(struct ucx_cls *cls, unsigned id,
                               ucp_am_recv_callback_t cb, uint32_t flags);

/* The status of one of @p op's requests that ended with @p st: a request
 * cancelled by UCX itself means its endpoint failed, unless the user
 * cancelled the op (op->cancel_status says which). */
static inline cw_status_t ucx_req_status(const struct cw_na_op *op,
                                         ucs_status_t st)
{
    return st == UCS_ERR_CANCELED ? op->cancel_status : ucx_status(st);
}
void ucx_log_dropped(struct ucx_cls *cls, const char *what);

/* ucx_progress.c: operations */
struct cw_na_op *ucx_op_new(struct ucx_cls *cls, enum cw_na_op_type type,
                            cw_na_cb_t cb, void *arg);
void ucx_op_discard(struct cw_na_op *op);
void ucx_ops_cancel_all(struct ucx_cls *cls);
void ucx_ops_free_all(struct ucx_cls *cls);
void ucx_ops_release_reqs(struct ucx_cls *cls);
void ucx_op_finish(struct cw_na_op *op, cw_status_t st);
void ucx_op_req_forget(struct cw_na_op *op, void *req);
void ucx_op_req_done(struct cw_na_op *op, void *req, ucs_status_t st,
                     bool final);
void ucx_op_req_posted(struct cw_na_op *op, void **slot, void *req);
void ucx_op_settle(struct cw_na_op *op);
cw_status_t ucx_progress(cw_na_class_t *c, unsigned max, unsigned *count_p);
cw_status_t ucx_cancel(cw_na_class_t *c, cw_na_op_t *op);
int ucx_get_wait_fd(cw_na_class_t *c);
bool ucx_safe_to_sleep(cw_na_class_t *c);
bool ucx_streaming(cw_na_class_t *c);

/* A put or get stops counting as data in flight (once). */
static inline void ucx_op_uncount(struct cw_na_op *op)
{
    if (op->rma_counted) {
        op->rma_counted = false;
        op->cls->rma_inflight--;
    }
    if (op->exp_counted) {
        op->exp_counted = false;
        op->cls->exp_waiting--;
    }
}

void ucx_drain_requests(struct ucx_cls *cls, uint64_t timeout_ns);

/* ucx_addr.c */
cw_status_t ucx_peer_get(struct ucx_cls *cls, const char *str, bool strict,
                         struct cw_na_addr **peer_p);
void ucx_peer_put(struct ucx_cls *cls, struct cw_na_addr *peer);
cw_status_t ucx_peer_conn(struct ucx_cls *cls, struct cw_na_addr *peer,
                          struct ucx_conn **conn_p);
struct ucx_conn *ucx_conn_by_ep(struct ucx_cls *cls, ucp_ep_h ep);
void ucx_conn_fail(struct ucx_conn *conn, ucs_status_t st);
void ucx_conn_identify(struct ucx_cls *cls, struct ucx_conn *conn,
                       struct cw_na_addr *peer);
cw_status_t ucx_listen(struct ucx_cls *cls, const char *location);
ucs_status_t ucx_listener_open(struct ucx_cls *cls);

/* ucx_guard.c */
void ucx_guard_init(void);
void ucx_guard_tick(struct ucx_cls *cls, uint64_t now);
bool ucx_guard_refuse(struct ucx_cls *cls);
bool ucx_location_ifname(const char *location, char *ifname, size_t len);
void ucx_conns_reap(struct ucx_cls *cls);
void ucx_conns_close_all(struct ucx_cls *cls);
void ucx_conns_free_all(struct ucx_cls *cls);
void ucx_conns_release_reqs(struct ucx_cls *cls);
void ucx_peers_free_all(struct ucx_cls *cls);
cw_status_t ucx_addr_lookup(cw_na_class_t *c, const char *location,
                            cw_na_addr_t **addr_p);
cw_status_t ucx_addr_self(cw_na_class_t *c, cw_na_addr_t **addr_p);
cw_status_t ucx_addr_dup(cw_na_class_t *c, cw_na_addr_t *addr,
                         cw_na_addr_t **addr_p);
void ucx_addr_free(cw_na_class_t *c, cw_na_addr_t *addr);
bool ucx_addr_cmp(cw_na_class_t *c, cw_na_addr_t *a, cw_na_addr_t *b);
cw_status_t ucx_addr_to_string(cw_na_class_t *c, cw_na_addr_t *addr, char *buf,
                               size_t *len_p);
size_t ucx_addr_serialize_size(cw_na_class_t *c, cw_na_addr_t *addr);
cw_status_t ucx_addr_serialize(cw_na_class_t *c, void *buf, size_t size,
                               cw_na_addr_t *addr);
cw_status_t ucx_addr_deserialize(cw_na_class_t *c, const void *buf, size_t size,
                                 cw_na_addr_t **addr_p);

/* ucx_msg.c */
cw_status_t ucx_msg_register_am(struct ucx_cls *cls);
void ucx_msg_flush_queue(struct ucx_cls *cls);
cw_status_t ucx_msg_send_unexpected(cw_na_class_t *c, const void *buf,
                                    size_t len, cw_na_addr_t *dest,
                                    uint32_t tag, cw_na_cb_t cb, void *arg,
                                    cw_na_op_t **op_p);
cw_status_t ucx_msg_recv_unexpected(cw_na_class_t *c, void *buf, size_t len,
                                    cw_na_cb_t cb, void *arg,
                                    cw_na_op_t **op_p);
cw_status_t ucx_msg_send_expected(cw_na_class_t *c, const void *buf, size_t len,
                                  cw_na_addr_t *dest, uint32_t tag,
                                  cw_na_cb_t cb, void *arg, cw_na_op_t **op_p);
cw_status_t ucx_msg_inject(cw_na_class_t *c, const void *buf, size_t len,
                           cw_na_addr_t *dest, uint32_t tag, bool expected);
cw_status_t ucx_msg_recv_expected(cw_na_class_t *c, void *buf, size_t len,
                                  cw_na_addr_t *source, uint32_t tag,
                                  cw_na_cb_t cb, void *arg, cw_na_op_t **op_p);
void ucx_msg_fail_peer(struct ucx_cls *cls, struct cw_na_addr *peer,
                       cw_status_t st);
void ucx_send_cb(void *req, ucs_status_t st, void *user_data);

/* ucx_early.c */
void ucx_early_drain(struct ucx_cls *cls);
bool ucx_early_take(struct ucx_cls *cls, struct cw_na_op *op, uint64_t tag);
bool ucx_early_moving(const struct ucx_cls *cls);
void ucx_early_release_reqs(struct ucx_cls *cls);
void ucx_early_free_all(struct ucx_cls *cls);

/* ucx_live.c */
cw_status_t ucx_live_register_am(struct ucx_cls *cls);
void ucx_live_heard(struct ucx_cls *cls, ucp_ep_h ep);
void ucx_live_scan(struct ucx_cls *cls, uint64_t now);

/* ucx_mem.c */
#define UCX_MAX_SEGS 1024u
cw_status_t ucx_rkey_post(struct ucx_cls *cls, struct cw_na_op *op,
                          struct ucx_conn *conn, cw_na_mem_t *local,
                          size_t local_off, cw_na_mem_t *remote,
                          size_t remote_off, size_t len);
void ucx_rkey_conn_closed(struct ucx_conn *conn);

/* ucx_rma.c */
cw_status_t ucx_rma_register_am(struct ucx_cls *cls);
void ucx_rma_fail_conn(struct ucx_cls *cls, struct ucx_conn *conn,
                       cw_status_t st);
void ucx_rma_mem_released(struct ucx_cls *cls, struct cw_na_mem *mem);
void ucx_mems_release_all(struct ucx_cls *cls);
void ucx_rma_free_ctls(struct ucx_cls *cls);
void ucx_rma_release_ctls(struct ucx_cls *cls);
cw_status_t ucx_mem_register(cw_na_class_t *c, const struct cw_na_segment *segs,
                             size_t n, uint32_t access, cw_na_mem_t **mem_p);
void ucx_mem_release(cw_na_class_t *c, cw_na_mem_t *mem);
size_t ucx_mem_serialize_size(cw_na_class_t *c, cw_na_mem_t *mem);
cw_status_t ucx_mem_serialize(cw_na_class_t *c, void *buf, size_t size,
                              cw_na_mem_t *mem);
cw_status_t ucx_mem_deserialize(cw_na_class_t *c, const void *buf, size_t size,
                                cw_na_mem_t **mem_p);
cw_status_t ucx_put(cw_na_class_t *c, cw_na_mem_t *local, size_t local_off,
                    cw_na_mem_t *remote, size_t remote_off, size_t len,
                    cw_na_addr_t *peer, cw_na_cb_t cb, void *arg,
                    cw_na_op_t **op_p);
cw_status_t ucx_get(cw_na_class_t *c, cw_na_mem_t *local, size_t local_off,
                    cw_na_mem_t *remote, size_t remote_off, size_t len,
                    cw_na_addr_t *peer, cw_na_cb_t cb, void *arg,
                    cw_na_op_t **op_p);

#endif /* CW_NA_UCX_H */
