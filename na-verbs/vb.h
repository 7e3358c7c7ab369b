/*
 * na-verbs: private declarations.  One instance (struct cw_na_class) owns a
 * listening rdma_cm id, a PD, one CQ with a completion channel, a shared
 * receive queue fed from a registered buffer pool, a registered send-buffer
 * pool and its RC connections.  Every verbs/rdma_cm call goes through
 * cls->ops (vb_ops.h): rdma-core, or the test-only fake device module.
 */
#ifndef CW_NA_VERBS_H
#define CW_NA_VERBS_H

#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <causeway/na_plugin.h>

#include "nau_list.h"
#include "nau_match.h"
#include "nau_pool.h"
#include "nau_ptable.h"
#include "vb_ops.h"

#define VB_SUBSYS "na-verbs"
#define VB_LOG(cls, lvl, ...)                                                  \
    CW_NA_LOG((cls)->host, lvl, VB_SUBSYS, __VA_ARGS__)
#define VB_ERR(cls, ...)  VB_LOG(cls, CW_LOG_ERROR, __VA_ARGS__)
#define VB_WARN(cls, ...) VB_LOG(cls, CW_LOG_WARN, __VA_ARGS__)
#define VB_DBG(cls, ...)  VB_LOG(cls, CW_LOG_DEBUG, __VA_ARGS__)

/* Data-path variant: at most one message per second per call site (the
 * state is atomic: instances may run in different threads). */
#define VB_LOG_RL(cls, lvl, ...)                                               \
    CW_NA_LOG_RL((cls)->host, lvl, VB_SUBSYS, __VA_ARGS__)
#define VB_WARN_RL(cls, ...) VB_LOG_RL(cls, CW_LOG_WARN, __VA_ARGS__)
#define VB_ERR_RL(cls, ...)  VB_LOG_RL(cls, CW_LOG_ERROR, __VA_ARGS__)

#define VB_DEV_MAX         20   /* device name length we carry */
#define VB_DEFAULT_CREDITS 32   /* receive buffers granted per connection */
#define VB_DEFAULT_BUF     8192 /* eager buffer incl. the header */
#define VB_EAGER_MIN       256  /* eager_size bounds (payload) */
#define VB_EAGER_MAX       (1u << 20)
#define VB_SQ_DEPTH        128
#define VB_SEND_BUFS       256
#define VB_MAX_SEGS        64
#define VB_UNEXP_QMAX                                                          \
    1024                  /* unexpected messages queued before credits are     \
                             withheld from their senders */
#define VB_EARLY_MAX 4096 /* expected messages kept without a receive ... */
#define VB_EARLY_BYTES                                                         \
    (16u << 20)                       /* ... and their payload bytes; beyond   \
                                         either, the oldest is dropped */
#define VB_OP_CACHE      256          /* freed ops kept for reuse */
#define VB_RMA_PIECE     (1ull << 30) /* largest single RDMA WR we post */
#define VB_CM_TIMEOUT_MS 2000
#define VB_RNR_RETRY     7           /* never fail on RNR: credits prevent it */
#define VB_PDATA_MAGIC   0x42565743u /* "CWVB" */
#define VB_WIRE_VERSION  2           /* 2: eager size in the private data */

/* Message header at the start of every SEND. */
enum vb_msg_type { VB_MSG_UNEXP = 1, VB_MSG_EXP = 2, VB_MSG_CREDIT = 3 };
struct vb_hdr {
    uint8_t type;
    uint8_t version;
    uint16_t credits; /* receive buffers the sender reposted for us */
    uint32_t tag;
};

/* Private data exchanged in connect/accept. */
struct vb_pdata {
    uint32_t magic;
    uint8_t version;
    uint8_t devport;
    uint16_t port; /* sender's listening port, network order */
    uint32_t ip;   /* sender's listening IPv4, network order */
    uint16_t credits;
    uint8_t devlen;
    uint8_t pad;
    char dev[VB_DEV_MAX];
    uint32_t eager; /* largest payload the sender can receive, network
                       order (wire version 2) */
};

/* wr_id tags in the low two bits. */
#define VB_WR_OP_LAST  0u /* op pointer: the op's final (signalled) WR */
#define VB_WR_OP_PIECE 1u /* op pointer: an earlier WR of a multi-WR op */
#define VB_WR_CTL      2u /* credit message (no resources) */
#define VB_WR_RECV     3u /* struct vb_rbuf pointer */

enum vb_err_kind {
    VB_E_RC, /* a verbs/rdma_cm return value: -1+errno, errno, or -errno */
    VB_E_WC, /* enum ibv_wc_status */
    VB_E_CM, /* enum rdma_cm_event_type of a failed connection */
};

struct cw_na_class;
struct vb_conn;
struct cw_na_op;

/* An address: one peer, identified by its listening IPv4 address (and
 * port: the key of cls->peers, see vb_peer_key()). */
struct cw_na_addr {
    struct nau_ptable_node pnode; /* and its references */
    struct sockaddr_in sin;
    char dev[VB_DEV_MAX + 1];
    uint8_t devport;
    struct vb_conn *conn; /* connection used to send to it, or NULL */
    unsigned nconns;      /* live connections with this peer */
};
typedef struct cw_na_addr vb_peer_t;

/* Operations waiting somewhere; op->on names the list an op is on. */
struct vb_list {
    struct nau_list ops;
    unsigned n;
};

struct vb_piece {
    uint64_t laddr;
    uint32_t lkey;
    uint64_t raddr;
    uint32_t rkey;
    uint32_t len;
};

struct cw_na_op {
    enum cw_na_op_type type;
    cw_na_cb_t cb;
    void *arg;
    cw_status_t status;
    bool canceled;
    bool posted; /* WRs handed to the QP; completion comes from the CQ */
    struct vb_list *on;
    struct nau_list link; /* on *on */
    vb_peer_t *peer;      /* reference held */
    struct vb_conn *conn;
    uint32_t tag;
    /* send */
    const void *sbuf;
    size_t slen;
    uint8_t msg_type;
    int sidx; /* send buffer in use, -1 if none */
    bool stalled;
    /* receive */
    void *rbuf;
    size_t rlen;
    size_t got;
    vb_peer_t *source; /* unexpected: sender, reference for the callback */
    /* rma */
    struct vb_piece *pieces;
    size_t npieces;
    size_t next_piece;
    size_t pieces_done;
};

static inline struct cw_na_op *vb_list_first(const struct vb_list *l)
{
    return nau_list_empty(&l->ops)
               ? NULL
               : nau_container_of(l->ops.next, struct cw_na_op, link);
}

/* An incoming message copied out of its receive buffer because nobody had
 * posted a receive for it (vb_early.c): unexpected ones wait on
 * cls->unexp_q (m.fifo), expected ones in cls->early by (peer, tag). */
struct vb_early {
    struct nau_match_entry m;
    vb_peer_t *peer; /* reference */
    size_t len;
    size_t cap; /* room in data[] */
    uint8_t data[];
};
struct vb_equeue {
    struct nau_list q; /* oldest first */
    unsigned n;
};

enum vb_conn_state {
    VC_RESOLVING_ADDR,
    VC_RESOLVING_ROUTE,
    VC_CONNECTING,
    VC_ACCEPTING,
    VC_UP,
    VC_CLOSING,
};

struct vb_conn {
    struct cw_na_class *cls;
    struct rdma_cm_id *id;
    vb_peer_t *peer; /* reference held */
    enum vb_conn_state state;
    bool active;
    bool counted; /* included in peer->nconns */
    bool granted; /* our receive buffers were added for it */
    uint32_t qpn;
    cw_status_t fail_status;
    int credits;            /* sends we may still post */
    unsigned peer_grant;    /* buffers the peer granted us: credits never
                               exceed it */
    unsigned owed;          /* credits to return to the peer */
    unsigned withheld;      /* credits held back while too much is queued */
    unsigned grant;         /* buffers we granted at setup */
    size_t peer_eager;      /* largest payload the peer can receive */
    uint64_t posted_seq;    /* WRs posted */
    uint64_t completed_seq; /* WRs known complete */
    uint64_t *sig;          /* ring: seq of each signalled WR, post order */
    unsigned sig_head;
    unsigned sig_count;
    unsigned unsignaled;
    unsigned inline_max;
    struct vb_list pending;       /* ops waiting for the connection, credits,
                                     send buffers or SQ slots */
    struct vb_list posted;        /* ops with WRs on the QP */
    struct cw_na_op *partial;     /* RMA op with pieces still to post */
    struct nau_ptable_node qnode; /* cls->by_qpn */
    struct vb_conn *next;
};

/* Receive pool: chunks of buffers registered as one MR each. */
struct vb_rbuf {
    struct vb_rchunk *chunk;
    uint8_t *data;
    bool posted;
};
struct vb_rchunk {
    struct ibv_mr *mr;
    uint8_t *mem;
    unsigned n;
    struct vb_rchunk *next;
    struct vb_rbuf bufs[];
};

/* Registration cache entry: one MR for an address range. */
struct vb_rce {
    uintptr_t addr;
    size_t len;
    int access;
    unsigned refs;
    struct ibv_mr *mr;
    struct vb_rce *next;
};

struct vb_mseg {
    uint64_t addr;
    uint64_t len;
    uint32_t key; /* lkey for local handles, rkey for remote ones */
    struct vb_rce *rce;
};

struct cw_na_mem {
    bool remote;
    uint32_t access;
    size_t n;
    uint64_t total;
    struct vb_mseg segs[];
};

struct vb_stats {
    uint64_t credit_stalls; /* sends that waited for credits */
    uint64_t credit_msgs;   /* explicit credit messages sent */
    uint64_t dropped;       /* messages dropped: malformed, or expected
                               ones pushed out of the early queue */
    uint64_t rcache_hits;
    uint64_t rcache_misses;
    uint64_t conns_torn_down;
    uint64_t conns_refused; /* connect requests from an IP other than the
                               one their private data claims */
};

struct cw_na_class {
    const struct cw_na_host *host;
    const struct vb_ops *ops;
    void *ops_module; /* the fake module's dlopen handle, or NULL */
    uint32_t flags;
    char dev[VB_DEV_MAX + 1];
    uint8_t devport;
    struct sockaddr_in self_sin;
    vb_peer_t *self;

    struct rdma_event_channel *cm_ch;
    struct rdma_cm_id *listen_id;
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_comp_channel *comp_ch;
    struct ibv_cq *cq;
    int cq_size;
    bool cq_armed;
    struct ibv_srq *srq;
    int srq_max;
    int epfd;

    size_t buf_size;  /* eager buffer incl. header */
    unsigned credits; /* granted per connection */
    unsigned max_conns;
    uint8_t rd_atom; /* outstanding RDMA READs per QP, each way */

    struct vb_rchunk *rchunks;
    unsigned rbufs_total;
    unsigned srq_posted;
    unsigned srq_target;

    uint8_t *smem;
    struct ibv_mr *smr;
    unsigned *sfree; /* stack of free send-buffer indices */
    unsigned nsfree;
    unsigned nsbufs;

    struct nau_ptable peers;
    struct vb_conn *conns;
    struct nau_ptable by_qpn; /* conns by QP number: completions name it */
    struct vb_rce *rcache;

    struct vb_list unexp_recvs;
    struct vb_list exp_recvs;
    struct vb_list done;
    struct vb_equeue unexp_q; /* unexpected messages without a receive */
    struct nau_match early;   /* expected messages without a receive */

    struct nau_pool op_pool; /* freed ops for reuse */

    struct ibv_wc stash[32];
    int nstash;

    struct vb_stats stats;
};
typedef struct cw_na_class vb_class_t;

/* vb_init.c */
VB_HIDDEN cw_status_t vb_status(enum vb_err_kind kind, int code);
VB_HIDDEN const char *vb_strerr(enum vb_err_kind kind, int code, char *buf,
                                size_t len);

/* vb_addr.c */
VB_HIDDEN cw_status_t vb_parse_location(const char *loc, char *dev,
                                        uint8_t *devport_p,
                                        struct sockaddr_in *sin_p,
                                        bool *has_ip_p);
VB_HIDDEN vb_peer_t *vb_peer_get(vb_class_t *cls, const struct sockaddr_in *sin,
                                 const char *dev, uint8_t devport);
VB_HIDDEN void vb_peer_put(vb_class_t *cls, vb_peer_t *peer);
VB_HIDDEN void vb_peers_free_all(vb_class_t *cls);
/* Returns @p buf, so that a (rate-limited) log call formats only when it
 * logs. */
VB_HIDDEN const char *vb_peer_format(const vb_peer_t *peer, char *buf,
                                     size_t len);
VB_HIDDEN void vb_addr_free(cw_na_class_t *cls, cw_na_addr_t *addr);
VB_HIDDEN cw_status_t vb_addr_lookup(cw_na_class_t *cls, const char *location,
                                     cw_na_addr_t **addr_p);
VB_HIDDEN cw_status_t vb_addr_self(cw_na_class_t *cls, cw_na_addr_t **addr_p);
VB_HIDDEN cw_status_t vb_addr_dup(cw_na_class_t *cls, cw_na_addr_t *addr,
                                  cw_na_addr_t **addr_p);
VB_HIDDEN bool vb_addr_cmp(cw_na_class_t *cls, cw_na_addr_t *a,
                           cw_na_addr_t *b);
VB_HIDDEN cw_status_t vb_addr_to_string(cw_na_class_t *cls, cw_na_addr_t *addr,
                                        char *buf, size_t *len_p);
VB_HIDDEN size_t vb_addr_serialize_size(cw_na_class_t *cls, cw_na_addr_t *addr);
VB_HIDDEN cw_status_t vb_addr_serialize(cw_na_class_t *cls, void *buf,
                                        size_t size, cw_na_addr_t *addr);
VB_HIDDEN cw_status_t vb_addr_deserialize(cw_na_class_t *cls, const void *buf,
                                          size_t size, cw_na_addr_t **addr_p);

/* vb_conn.c */
VB_HIDDEN cw_status_t vb_conn_for_send(vb_class_t *cls, vb_peer_t *peer,
                                       struct vb_conn **conn_p);
VB_HIDDEN void vb_send_wc(vb_class_t *cls, const struct ibv_wc *wc);
VB_HIDDEN bool vb_sq_full(const struct vb_conn *conn);
VB_HIDDEN void vb_sq_posted(struct vb_conn *conn, bool signalled);
VB_HIDDEN struct vb_conn *vb_conn_by_qpn(vb_class_t *cls, uint32_t qpn);
VB_HIDDEN void vb_conn_fail(struct vb_conn *conn, cw_status_t st);
VB_HIDDEN void vb_conn_kick(struct vb_conn *conn);
VB_HIDDEN void vb_cm_progress(vb_class_t *cls);
VB_HIDDEN void vb_conn_reap(vb_class_t *cls, bool all);
VB_HIDDEN void vb_pdata_fill(vb_class_t *cls, struct vb_pdata *pd);

/* vb_msg.c */
VB_HIDDEN cw_status_t vb_pool_init(vb_class_t *cls);
VB_HIDDEN void vb_pool_fini(vb_class_t *cls);
VB_HIDDEN cw_status_t vb_pool_grant(vb_class_t *cls, unsigned n);
VB_HIDDEN void vb_pool_ungrant(vb_class_t *cls, unsigned n);
VB_HIDDEN void vb_recv_done(vb_class_t *cls, const struct ibv_wc *wc);
VB_HIDDEN cw_status_t vb_post_send_op(struct vb_conn *conn, struct cw_na_op *op,
                                      bool *blocked_p);
VB_HIDDEN void vb_send_credits(struct vb_conn *conn, bool force);
VB_HIDDEN void vb_fail_peer_recvs(vb_class_t *cls, vb_peer_t *peer,
                                  cw_status_t st);
VB_HIDDEN cw_status_t vb_msg_send_unexpected(cw_na_class_t *cls,
                                             const void *buf, size_t len,
                                             cw_na_addr_t *dest, uint32_t tag,
                                             cw_na_cb_t cb, void *arg,
                                             cw_na_op_t **op_p);
VB_HIDDEN cw_status_t vb_msg_send_expected(cw_na_class_t *cls, const void *buf,
                                           size_t len, cw_na_addr_t *dest,
                                           uint32_t tag, cw_na_cb_t cb,
                                           void *arg, cw_na_op_t **op_p);
VB_HIDDEN cw_status_t vb_msg_recv_unexpected(cw_na_class_t *cls, void *buf,
                                             size_t len, cw_na_cb_t cb,
                                             void *arg, cw_na_op_t **op_p);
VB_HIDDEN cw_status_t vb_msg_recv_expected(cw_na_class_t *cls, void *buf,
                                           size_t len, cw_na_addr_t *source,
                                           uint32_t tag, cw_na_cb_t cb,
                                           void *arg, cw_na_op_t **op_p);

/* vb_early.c */
VB_HIDDEN void vb_unexp_queue(struct vb_conn *conn, uint32_t tag,
                              const uint8_t *data, size_t len);
VB_HIDDEN struct vb_early *vb_unexp_take(vb_class_t *cls);
VB_HIDDEN void vb_early_put(vb_class_t *cls, vb_peer_t *peer, uint32_t tag,
                            const uint8_t *data, size_t len);
VB_HIDDEN struct vb_early *vb_early_take(vb_class_t *cls, vb_peer_t *peer,
                                         uint32_t tag);
VB_HIDDEN void vb_early_free(vb_class_t *cls, struct vb_early *e);
VB_HIDDEN void vb_early_free_all(vb_class_t *cls);

/* vb_rma.c */
VB_HIDDEN cw_status_t vb_post_rma_op(struct vb_conn *conn, struct cw_na_op *op,
                                     bool *blocked_p);
VB_HIDDEN void vb_rcache_fini(vb_class_t *cls);
VB_HIDDEN cw_status_t vb_mem_register(cw_na_class_t *cls,
                                      const struct cw_na_segment *segs,
                                      size_t n, uint32_t access,
                                      cw_na_mem_t **mem_p);
VB_HIDDEN void vb_mem_release(cw_na_class_t *cls, cw_na_mem_t *mem);
VB_HIDDEN size_t vb_mem_serialize_size(cw_na_class_t *cls, cw_na_mem_t *mem);
VB_HIDDEN cw_status_t vb_mem_serialize(cw_na_class_t *cls, void *buf,
                                       size_t size, cw_na_mem_t *mem);
VB_HIDDEN cw_status_t vb_mem_deserialize(cw_na_class_t *cls, const void *buf,
                                         size_t size, cw_na_mem_t **mem_p);
VB_HIDDEN cw_status_t vb_put(cw_na_class_t *cls, cw_na_mem_t *local,
                             size_t local_off, cw_na_mem_t *remote,
                             size_t remote_off, size_t len, cw_na_addr_t *peer,
                             cw_na_cb_t cb, void *arg, cw_na_op_t **op_p);
VB_HIDDEN cw_status_t vb_get(cw_na_class_t *cls, cw_na_mem_t *local,
                             size_t local_off, cw_na_mem_t *remote,
                             size_t remote_off, size_t len, cw_na_addr_t *peer,
                             cw_na_cb_t cb, void *arg, cw_na_op_t **op_p);

VB_HIDDEN void vb_rma_piece_done(struct vb_conn *conn, struct cw_na_op *op,
                                 cw_status_t st);

/* vb_progress.c */
VB_HIDDEN struct cw_na_op *vb_op_new(vb_class_t *cls, enum cw_na_op_type type,
                                     cw_na_cb_t cb, void *arg);
VB_HIDDEN void vb_op_free(vb_class_t *cls, struct cw_na_op *op);
VB_HIDDEN void vb_list_init(struct vb_list *l);
VB_HIDDEN void vb_list_push(struct vb_list *l, struct cw_na_op *op);
VB_HIDDEN void vb_list_remove(struct cw_na_op *op);
/* Finalize: free the ops of @p l without callbacks. */
VB_HIDDEN void vb_list_free(vb_class_t *cls, struct vb_list *l);
VB_HIDDEN void vb_op_done(vb_class_t *cls, struct cw_na_op *op, cw_status_t st);
VB_HIDDEN void vb_drain_cq(vb_class_t *cls);
VB_HIDDEN int vb_get_wait_fd(cw_na_class_t *cls);
VB_HIDDEN bool vb_safe_to_sleep(cw_na_class_t *cls);
VB_HIDDEN cw_status_t vb_progress(cw_na_class_t *cls, unsigned max,
                                  unsigned *count_p);
VB_HIDDEN cw_status_t vb_cancel(cw_na_class_t *cls, cw_na_op_t *op);

/* Introspection for tests that link the plugin statically. */
VB_HIDDEN void vb_class_stats(cw_na_class_t *cls, struct vb_stats *st);
VB_HIDDEN unsigned vb_class_conn_count(cw_na_class_t *cls);

#endif /* CW_NA_VERBS_H */
