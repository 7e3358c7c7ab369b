/*
 * Fake verbs device: private declarations shared by fake_dev.c (devices,
 * PD, MR, CQ, SRQ), fake_qp.c (queue pairs and the RC wire) and fake_cm.c
 * (connection manager).
 *
 * The "fabric" under the fake is loopback TCP: every connected rdma_cm_id
 * owns one socket carrying CM messages (REQ/REP/RTU/REJ/DREQ) and the RC
 * packets of its QP (SEND, WRITE with immediate, ACK, NAK, ABORT).  The
 * responder side of a packet is executed by the process owning the memory,
 * inside its own calls into the fake (poll_cq, get_cq_event, get_cm_event),
 * so a SEND that finds no posted receive is answered with an RNR NAK.
 *
 * RDMA READ and WRITE (without immediate) are one-sided, as on an HCA:
 * the initiator executes them itself (fake_rma.c).  Every process keeps
 * its registrations in a table in its own memory (key, address, length,
 * access, PD) whose address, with the process id, the QP's PD and access
 * flags, travels in REQ/REP; the initiator reads the target's entry and
 * moves the bytes with process_vm_readv/writev, checking the key, PD,
 * bounds and access as the adapter would.  The target's CPU takes no
 * part.
 *
 * IPv4 address 127.0.0.N belongs to device fake<(N-1) % FAKE_NDEV>.
 */
#ifndef CW_NA_VERBS_FAKE_H
#define CW_NA_VERBS_FAKE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vb_ops.h"

#define FAKE_NDEV               4
#define FAKE_MAX_SGE            16
#define FAKE_MAX_INLINE         256
#define FAKE_MAX_QP_WR          4096
#define FAKE_MAX_SRQ_WR         16384
#define FAKE_MAX_CQE            65536
#define FAKE_MAX_RD_ATOM        16  /* outstanding READs each way per QP */
#define FAKE_MAX_PDATA          196 /* rdma_cm private data limit (RC connect) */
#define FAKE_CONNECT_TIMEOUT_NS (4ull * 1000000000ull)

/* Wire packet types. */
enum fake_pkt {
    FP_REQ = 1, /* CM connect request: qpn in a, rnr_retry in b */
    FP_REP,     /* CM connect reply */
    FP_RTU,     /* CM ready to use */
    FP_REJ,     /* CM reject */
    FP_DREQ,    /* CM disconnect request */
    FP_DREP,    /* CM disconnect reply */
    FP_SEND,    /* psn, imm in b, flags: has imm */
    FP_WRITE,   /* with immediate only: psn, rkey in a, raddr, imm in b */
    FP_ACK,     /* psn */
    FP_NAK,     /* psn, syndrome in a */
    FP_ABORT,   /* the initiator's one-sided access was refused: the
                   responder QP goes to error, as the HCA moves it */
};

/* What REQ and REP carry before the private data: where the initiator of
 * one-sided operations finds the sender's registrations. */
struct fake_cm_peer {
    uint32_t pid;
    uint32_t qp_access; /* the QP's qp_access_flags */
    uint64_t mrt;       /* address of its registration table */
    uint64_t pd;        /* its QP's PD (registrations are per PD) */
};

/* One registration as the initiator reads it (fake_rma.c).  seq is odd
 * while the owner changes the entry. */
#define FAKE_MRT_SLOTS 65536u
struct fake_mrt_ent {
    uint32_t seq;
    uint32_t rkey; /* 0: free */
    uint32_t access;
    uint32_t pad;
    uint64_t pd;
    uint64_t addr;
    uint64_t len;
};

enum fake_nak {
    FN_RNR = 1,
    FN_ACCESS,
    FN_INVALID,
};

struct fake_hdr {
    uint32_t len; /* payload bytes after the header */
    uint8_t type;
    uint8_t flags;
    uint16_t pad;
    uint32_t psn;
    uint32_t a;
    uint32_t b;
    uint32_t pad2;
    uint64_t addr;
};

/* A growable byte buffer (socket input and output). */
struct fake_buf {
    uint8_t *data;
    size_t len;
    size_t off; /* consumed (output: written) bytes */
    size_t cap;
};

struct fake_pd;
struct fake_cq;
struct fake_qp;
struct fake_id;
struct fake_cmch;

struct fake_mr {
    struct ibv_mr mr;
    int access;
    uint32_t slot; /* its entry in the registration table */
    struct fake_mr *next;
};

struct fake_pd {
    struct ibv_pd pd;
    struct fake_mr *mrs;
    unsigned nobj; /* MRs, QPs and SRQs still using it */
};

struct fake_chan {
    struct ibv_comp_channel ch;
    struct fake_cq *cqs;    /* every CQ bound to the channel */
    struct fake_cq *evhead; /* CQs with an event to report */
    struct fake_cq *evtail;
};

struct fake_cq {
    struct ibv_cq cq;
    struct ibv_wc *ring;
    int cap;
    int head;
    int count;
    bool armed;
    bool queued_event;
    bool overrun;
    unsigned events;
    unsigned acked;
    struct fake_chan *chan;
    struct fake_cq *chan_next;
    struct fake_cq *ev_next;
    struct fake_qp **qps; /* QPs whose send or recv CQ this is */
    size_t nqps;
    size_t qps_cap;
};

struct fake_rwqe {
    uint64_t wr_id;
    int num_sge;
    struct ibv_sge sge[FAKE_MAX_SGE];
};

struct fake_srq {
    struct ibv_srq srq;
    struct fake_rwqe *ring;
    int cap;
    int head;
    int count;
    int max_sge;
};

struct fake_swqe {
    uint64_t wr_id;
    enum ibv_wr_opcode opcode;
    unsigned flags;
    uint32_t psn;
    int num_sge;
    struct ibv_sge sge[FAKE_MAX_SGE];
    uint8_t *inl; /* inline copy, when IBV_SEND_INLINE */
    uint32_t len;
    uint64_t raddr;
    uint32_t rkey;
    uint32_t imm;
};

/* The attribute masks an RC QP's transitions require besides
 * IBV_QP_STATE (ibv_modify_qp(3)): RESET->INIT, INIT->RTR, RTR->RTS. */
#define FAKE_QPM_INIT (IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)
#define FAKE_QPM_RTR                                                           \
    (IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |           \
     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)
#define FAKE_QPM_RTS                                                           \
    (IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |    \
     IBV_QP_MAX_QP_RD_ATOMIC)

/* Attributes set by modify_qp (what ibv_query_qp would report). */
struct fake_qp_attr {
    uint16_t pkey_index;
    uint8_t port_num;
    int access; /* qp_access_flags */
    enum ibv_mtu path_mtu;
    uint8_t max_dest_rd_atomic;
    uint8_t min_rnr_timer;
    uint8_t timeout;
    uint8_t retry_cnt;
    uint8_t max_rd_atomic;
};

struct fake_qp {
    struct ibv_qp qp; /* qp.state: RESET, INIT, RTR, RTS or ERR */
    struct ibv_qp_cap cap;
    struct fake_qp_attr attr;
    struct fake_id *id;
    bool sq_sig_all;
    /* requester */
    struct fake_swqe *sq; /* ring of posted, not yet completed WRs */
    int sq_head;
    int sq_count;
    int sq_sent; /* WRs from the head already transmitted */
    uint32_t next_psn;
    uint8_t rnr_retry; /* 7 = infinite */
    uint8_t rnr_left;
    uint64_t resend_at_ns; /* RNR back-off: retransmit from head then */
    /* responder */
    struct fake_rwqe *rq; /* own receive queue when there is no SRQ */
    int rq_head;
    int rq_count;
    uint32_t expected_psn;
    bool rnr_nak_sent; /* discarding until expected_psn is resent */
    uint32_t remote_qpn;
};

enum fake_id_state {
    FI_IDLE = 0,
    FI_BOUND,
    FI_LISTEN,
    FI_ADDR_RESOLVED,
    FI_ROUTE_RESOLVED,
    FI_TCP_CONNECTING,
    FI_REQ_SENT,
    FI_REQ_RCVD, /* passive, not yet reported */
    FI_REQ_REPORTED,
    FI_REP_SENT,
    FI_CONNECTED,
    FI_DISCONNECTING,
    FI_DISCONNECTED,
};

struct fake_id {
    struct rdma_cm_id id;
    struct fake_cmch *ch;
    enum fake_id_state st;
    int fd;
    bool eof;
    bool epollout;
    struct fake_buf in;
    struct fake_buf out;
    struct fake_id *listener; /* passive ids until reported */
    struct fake_id *next;     /* channel list */
    uint64_t deadline_ns;
    uint8_t peer_rnr_retry;
    uint32_t peer_qpn;
    struct fake_cm_peer peer;    /* from the peer's REQ/REP */
    uint32_t start_psn;          /* our first PSN, sent in REQ/REP */
    uint32_t peer_start_psn;     /* the peer's, from its REQ/REP */
    struct rdma_conn_param conn; /* our connect/accept parameters */
    unsigned events_out;         /* reported events not yet acked */
};

struct fake_ev {
    struct rdma_cm_event ev;
    uint8_t pdata[FAKE_MAX_PDATA];
    struct fake_ev *next;
};

struct fake_cmch {
    struct rdma_event_channel ch; /* ch.fd is an epoll fd */
    int efd;                      /* eventfd: events queued */
    struct fake_id *ids;
    struct fake_ev *evhead;
    struct fake_ev *evtail;
};

/* Process-wide counters. */
struct fake_counters {
    atomic_uint_fast64_t rnr_naks;
    atomic_uint_fast64_t rnr_retry_exc;
    atomic_uint_fast64_t access_naks;
    atomic_uint_fast64_t local_prot_errs;
    atomic_uint_fast64_t qp_errors;
    atomic_uint_fast64_t sends;
    atomic_uint_fast64_t writes;
    atomic_uint_fast64_t reads;
    atomic_uint_fast64_t mrs_registered;
    atomic_uint_fast64_t mrs_live;
};
VB_HIDDEN extern struct fake_counters fake_cnt;

/* The fake device's table (fake_dev.c), exported by cw-verbs-fake.so
 * through vb_fake_module_entry (fake_mod.c). */
VB_HIDDEN extern const struct vb_ops vb_fake_ops;
/* Snapshot of the counters. */
VB_HIDDEN void fake_stats_get(struct vb_fake_stats *st);

/* fake_dev.c */
VB_HIDDEN uint64_t fake_now_ns(void);
VB_HIDDEN struct ibv_context *fake_ctx_for_ip(uint32_t ip_host_order);
VB_HIDDEN uint32_t fake_max_inline(struct ibv_context *ctx);
VB_HIDDEN int fake_mr_check(struct fake_pd *pd, uint32_t key, bool remote,
                            uint64_t addr, uint64_t len, int need_access);
VB_HIDDEN int fake_sge_copy_out(struct fake_pd *pd, const struct ibv_sge *sge,
                                int n, uint8_t *dst, uint32_t *len_p);
VB_HIDDEN int fake_sge_copy_in(struct fake_pd *pd, const struct ibv_sge *sge,
                               int n, const uint8_t *src, uint32_t len);
VB_HIDDEN void fake_cq_push(struct fake_cq *cq, const struct ibv_wc *wc);
VB_HIDDEN void fake_cq_attach(struct fake_cq *cq, struct fake_qp *qp);
VB_HIDDEN void fake_cq_detach(struct fake_cq *cq, struct fake_qp *qp);
VB_HIDDEN bool fake_srq_take(struct fake_srq *srq, struct fake_rwqe *wqe);

/* fake_rma.c */
/* Enter a registration in the table; returns its rkey (0: table full). */
VB_HIDDEN uint32_t fake_mrt_add(struct fake_mr *mr, uint32_t key_hint);
VB_HIDDEN void fake_mrt_del(struct fake_mr *mr);
VB_HIDDEN void fake_cm_peer_self(struct fake_cm_peer *me, struct ibv_qp *qp);
/* Execute RDMA READ or WRITE @p w of @p qp against its peer's memory;
 * returns the completion status (the bytes have moved on success). */
VB_HIDDEN enum ibv_wc_status fake_rma_exec(struct fake_qp *qp,
                                           const struct fake_swqe *w);

/* fake_qp.c */
VB_HIDDEN void fake_qp_set_error(struct fake_qp *qp, enum ibv_wc_status first);
VB_HIDDEN void fake_qp_rx(struct fake_qp *qp, const struct fake_hdr *h,
                          const uint8_t *payload);
VB_HIDDEN void fake_qp_tick(struct fake_qp *qp);
/* What librdmacm does around connect/accept: INIT -> RTR -> RTS with the
 * attributes of the connection, through fake_modify_qp().  Returns 0 or
 * an errno value. */
VB_HIDDEN int fake_qp_connect(struct fake_qp *qp, uint32_t remote_qpn,
                              uint32_t rq_psn, uint32_t sq_psn,
                              const struct rdma_conn_param *mine,
                              uint8_t rnr_retry);
VB_HIDDEN int fake_buf_reserve(struct fake_buf *b, size_t more);

/* fake_cm.c */
VB_HIDDEN void fake_id_pump(struct fake_id *fid);
/* Append a packet to the id's output; returns where its h->len payload
 * bytes go (filled by the caller before the next call), NULL if out of
 * memory.  fake_id_flush() writes what the socket accepts. */
VB_HIDDEN uint8_t *fake_id_frame(struct fake_id *fid, const struct fake_hdr *h);
VB_HIDDEN void fake_id_flush(struct fake_id *fid);

/* Entry points of the table defined in fake_qp.c and fake_cm.c. */
VB_HIDDEN int fake_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
                             struct ibv_send_wr **bad_wr);
VB_HIDDEN int fake_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
                             struct ibv_recv_wr **bad_wr);
VB_HIDDEN int fake_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
                             int mask);
VB_HIDDEN struct rdma_event_channel *fake_create_event_channel(void);
VB_HIDDEN void fake_destroy_event_channel(struct rdma_event_channel *ch);
VB_HIDDEN int fake_create_id(struct rdma_event_channel *ch,
                             struct rdma_cm_id **id, void *context,
                             enum rdma_port_space ps);
VB_HIDDEN int fake_destroy_id(struct rdma_cm_id *id);
VB_HIDDEN int fake_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr);
VB_HIDDEN int fake_listen(struct rdma_cm_id *id, int backlog);
VB_HIDDEN int fake_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src,
                                struct sockaddr *dst, int timeout_ms);
VB_HIDDEN int fake_resolve_route(struct rdma_cm_id *id, int timeout_ms);
VB_HIDDEN int fake_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd,
                             struct ibv_qp_init_attr *attr);
VB_HIDDEN void fake_destroy_qp(struct rdma_cm_id *id);
VB_HIDDEN int fake_connect(struct rdma_cm_id *id, struct rdma_conn_param *p);
VB_HIDDEN int fake_accept(struct rdma_cm_id *id, struct rdma_conn_param *p);
VB_HIDDEN int fake_reject(struct rdma_cm_id *id, const void *pdata,
                          uint8_t len);
VB_HIDDEN int fake_disconnect(struct rdma_cm_id *id);
VB_HIDDEN int fake_get_cm_event(struct rdma_event_channel *ch,
                                struct rdma_cm_event **ev);
VB_HIDDEN int fake_ack_cm_event(struct rdma_cm_event *ev);

#endif /* CW_NA_VERBS_FAKE_H */
