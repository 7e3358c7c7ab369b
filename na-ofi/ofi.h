/*
 * na-ofi private declarations: the libfabric plugin's objects and the
 * functions the per-object files share.  Nothing here is exported; the one
 * exported symbol is cw_na_plugin_entry in ofi_init.c.
 */
#ifndef CW_NA_OFI_H
#define CW_NA_OFI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <causeway/na_plugin.h>

#include "nau_list.h"
#include "nau_match.h"
#include "nau_pool.h"
#include "nau_ptable.h"
#include "nau_slab.h"

#define OFI_SUBSYS "na-ofi"
#define OFI_LOG(cls, lvl, ...)                                                 \
    CW_NA_LOG((cls)->host, lvl, OFI_SUBSYS, __VA_ARGS__)
#define OFI_ERR(cls, ...)  OFI_LOG(cls, CW_LOG_ERROR, __VA_ARGS__)
#define OFI_WARN(cls, ...) OFI_LOG(cls, CW_LOG_WARN, __VA_ARGS__)
#define OFI_INFO(cls, ...) OFI_LOG(cls, CW_LOG_INFO, __VA_ARGS__)
#define OFI_DBG(cls, ...)  OFI_LOG(cls, CW_LOG_DEBUG, __VA_ARGS__)
/* Data-path lines a peer can provoke at any rate: one a second per site,
 * the next printed line counting the ones suppressed. */
#define OFI_LOG_RL(cls, lvl, ...)                                              \
    CW_NA_LOG_RL((cls)->host, lvl, OFI_SUBSYS, __VA_ARGS__)
#define OFI_WARN_RL(cls, ...) OFI_LOG_RL(cls, CW_LOG_WARN, __VA_ARGS__)
#define OFI_ERR_RL(cls, ...)  OFI_LOG_RL(cls, CW_LOG_ERROR, __VA_ARGS__)

/* Longest raw provider address we carry (sockaddr_in6 is 28 bytes, fi_shm
 * names are short strings).  The plugin header has a fixed size because the
 * receiver scatters it into a fixed slot in front of the user's buffer. */
#define OFI_ADDR_MAX     52
#define OFI_SHM_NAME_MAX 48
#define OFI_HDR_MAGIC    0x46574f43u /* "COWF" little-endian */
/* 2: expected messages carry it too; 3: expected messages are untagged */
#define OFI_HDR_VERSION 3

/* Tag layout: one tag per class: unexpected messages, plugin control
 * traffic (liveness probes) and expected messages, so the classes can never
 * match each other's receives.  Where the provider allows it
 * (exp_untagged), expected messages are untagged (FI_MSG) instead: rxm keeps
 * posted untagged receives on a list of their own, so the plugin's many
 * catch-all buffers for them do not lengthen the list every tagged message
 * is matched against.  Every receive matches one exact tag (fi_shm
 * in libfabric 1.17 does not honour ignore masks), so the user's tag
 * travels in the header. */
#define OFI_TAG_UNEXP (1ull << 63)
#define OFI_TAG_CTRL  (1ull << 62)
#define OFI_TAG_EXP   (1ull << 61)

/* Catch-all receive buffers for expected messages (ofi_expected.c): enough
 * that what one progress call reads from peers' sockets lands in them
 * rather than in rxm's unexpected queue, where each message would hold a
 * whole rxm buffer (a pool that never shrinks) until a catch-all is
 * reposted.  One peer flooding a gateway with expected messages nobody
 * waits for grew it by up to 150 MiB with 31 buffers (256 KiB); with about
 * 490 it does not grow.  Untagged, they cost tagged messages nothing.
 * As multi-receive buffers (where the provider has them) small messages
 * are packed: a listening instance, which takes messages from many peers,
 * gets OFI_EXP_POOL_LISTEN_MULT times the room (four peers each flooding
 * 20 000 small messages at once grew a gateway by 0.4-1.1 GiB with 490
 * single buffers, by about 20 MiB with 16 MiB of multi-receive ones). */
#define OFI_EXP_POOL_BYTES       (4096u * 1024u)
#define OFI_EXP_POOL_LISTEN_MULT 4u
#define OFI_EXP_POOL_BYTES_SMALL (256u * 1024u)
#define OFI_CTRL_PING            1u
#define OFI_CTRL_PONG            2u
/* Header kind of an unexpected message sent untagged (unexp_untagged):
 * it lands in the catch-alls with the expected ones (kind 0) and goes to
 * the plugin's own bounded queue (ofi_expected.c, "Unexpected messages"). */
#define OFI_KIND_UNEXP 8u
/* Defaults of unexpected_queue_bytes and unexpected_peer_bytes, as na-ucx */
#define OFI_UNEXP_QUEUE_DEFAULT "67108864"
#define OFI_UNEXP_PEER_DEFAULT  "8388608"

/* A ping names the address to answer, and nothing checks that it came from
 * there: pongs are bounded so that forged pings cannot turn the plugin
 * into a reflector (ofi_msg.c, ofi_ctrl_ping()).  A peer gets at most one
 * pong per interval (later pings are answered when it has passed); pings
 * naming addresses the instance does not know are answered at most
 * OFI_PONG_UNKNOWN_PER_S a second (bursts of as many), the rest dropped. */
#define OFI_PONG_INTERVAL_NS   (50ull * 1000000ull)
#define OFI_PONG_UNKNOWN_PER_S 16u

#define OFI_MEM_MAGIC    0x4d574f43u
#define OFI_MAX_SEGMENTS 256u

/* Sent in front of every message so the receiver can
 * answer even when the provider cannot report the source (no FI_SOURCE). */
struct ofi_hdr {
    uint32_t magic;
    uint8_t version;
    uint8_t kind; /* 0 = user message, OFI_CTRL_* for control */
    uint16_t addrlen;
    uint32_t tag; /* the user's tag (unexpected and expected messages) */
    uint8_t addr[OFI_ADDR_MAX];
};
#define OFI_HDR_SIZE sizeof(struct ofi_hdr)
/* Bound of the inject_size parameter: an injected message is copied, with
 * our header, into a buffer on the stack (ofi_msg_inject). */
#define OFI_INJECT_MAX 4096u

/* Every context handed to libfabric starts with this, so a completion can
 * tell what it belongs to. */
enum ofi_ctx_kind {
    OFI_CTX_OP = 1,
    OFI_CTX_SUB,
    OFI_CTX_CTRL_RECV,
    OFI_CTX_CTRL_SEND,
    OFI_CTX_EXP_RECV, /* a catch-all expected-message buffer */
    OFI_CTX_SINK,     /* a receive for tags this plugin never uses */
};
struct ofi_ctx {
    struct fi_context2 fctx; /* must stay first */
    enum ofi_ctx_kind kind;
};

/* A peer (or self).  Entries are unique per raw address and stay in the AV
 * while idle, so that dropping the last reference does not tear down a
 * connection the next RPC would rebuild; one unused for peer_idle_s is
 * removed (a gateway meets many short-lived clients). */
struct cw_na_addr {
    /* In cls->peers by its raw address; refs: user and op references. */
    struct nau_ptable_node pnode;
    unsigned nctrl;        /* control messages in flight to it */
    uint64_t last_used_ns; /* last reference dropped / evidence of life */
    fi_addr_t fi;
    uint16_t len;
    uint8_t raw[OFI_ADDR_MAX];
    /* raw as text, formatted on first use: a gateway asks for a caller's
     * address on every request (per-source fairness) */
    uint8_t str_len; /* 0: not formatted yet (or too long to keep) */
    char str[OFI_ADDR_MAX + 8];
    /* liveness */
    unsigned nactive;       /* posted ops bound to this peer */
    unsigned nsends;        /* of them, message sends (peer_sends_max) */
    uint64_t last_alive_ns; /* last evidence the peer is alive */
    uint64_t ping_sent_ns;  /* 0 = no probe outstanding */
    bool dead;
    bool ever_alive; /* we have heard from it at least once */
    bool lock_seen;  /* fi_shm: its owner held the liveness lock */
    /* Connect probe (ofi_connprobe.c): its socket + 1 while the connect is
     * in progress (0: none), and the probe (ping_sent_ns) it was made for. */
    int cprobe_fd1;
    uint64_t cprobe_ping_ns;
    bool pong_due; /* a ping came within OFI_PONG_INTERVAL_NS of a pong */
    uint64_t last_pong_ns;
    int last_err; /* last libfabric error seen with it (positive) */
    /* Posts to it refused with -FI_EAGAIN (ofi_progress.c, "Back-off"):
     * since when without one accepted (0: none refused), the earliest time
     * of the next post, and the gap before it; nretry counts its message
     * sends on cls->retry (later ones queue behind them). */
    uint64_t again_since_ns;
    uint64_t again_next_ns;
    uint64_t again_gap_ns;
    unsigned nretry;
    /* Unexpected messages from it waiting for a receive (unexp_untagged),
     * oldest first, and its place in cls->unexp_ready while there are
     * any; uq_bytes is what they are charged (ofi_expected.c). */
    struct nau_list uq;
    struct nau_list uq_link;
    size_t uq_bytes;
};

struct ofi_seg {
    uint64_t addr; /* remote address for RMA (virtual or 0-based offset) */
    uint64_t len;
    uint64_t key;
    void *base;        /* local handles: start of the segment */
    struct fid_mr *mr; /* local handles only */
    void *desc;
};

struct cw_na_mem {
    struct nau_list link; /* cls->mems: released with the instance */
    bool local;
    uint32_t access;
    uint32_t nseg;
    uint64_t total;
    struct ofi_seg seg[];
};

/* One RMA piece posted to the provider. */
struct ofi_sub {
    struct ofi_ctx ctx;
    struct cw_na_op *op;
    struct nau_list link; /* op->subs */
};

struct cw_na_op {
    struct ofi_ctx ctx; /* message ops post this one */
    enum cw_na_op_type type;
    cw_na_cb_t cb;
    void *arg;
    cw_status_t status; /* result (first error wins for RMA) */
    cw_status_t forced; /* set by cancel / peer death, CW_OK otherwise */
    bool in_provider;   /* the provider holds the op's context(s) */
    bool finished;      /* status decided, on the done list or called back */
    bool cb_done;       /* callback ran (zombie if still in_provider) */
    bool in_retry;
    bool unexp_waiting;            /* on cls->unexp_posted (by link) */
    struct nau_list link;          /* retry, done or unexp_posted list */
    struct nau_list alink;         /* active list */
    struct nau_list zlink;         /* zombie list */
    struct nau_match_entry mentry; /* posted expected receive: exp_posted */
    uint64_t retry_deadline_ns;
    uint64_t abandon_ns;     /* after cancel: complete anyway past this */
    struct cw_na_addr *peer; /* reference; dest / source / RMA peer */
    /* messages */
    void *buf;
    size_t len;
    uint32_t tag;
    size_t recv_len;
    struct cw_na_addr *source; /* unexpected recv result (new reference) */
    struct ofi_hdr hdr;
    /* RMA */
    struct cw_na_mem *local, *remote;
    size_t loff, roff, pos;
    unsigned inflight;
    struct nau_list subs;
};

struct ofi_ctrl {
    struct ofi_ctx ctx;
    struct nau_list link;    /* cls->ctrl_sends */
    struct cw_na_addr *peer; /* no reference: peers live until finalize */
    struct ofi_hdr hdr;
};

#define OFI_EARLY_BYTES_MAX (4u << 20)
#define OFI_OP_POOL_MAX     256u

struct ofi_exp_buf;

/* Sockets left half-closed before their handshake (ofi_reap.c). */
struct ofi_reaper {
    bool on;
    bool any_addr; /* listening on the wildcard address */
    int family;    /* AF_INET or AF_INET6 */
    uint16_t port; /* listening port */
    uint8_t addr[16];
    int reserve_fd; /* given up for a scan at the descriptor limit */
    uint64_t next_ns;
    uint64_t *seen; /* socket inodes found in the last scan, sorted */
    size_t nseen;
    uint64_t reaped;
};

struct cw_na_class {
    const struct cw_na_host *host;
    uint32_t flags;
    char protocol[32];
    char prov_name[32];
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    struct fid_cq *cq;
    struct fid_ep *ep;
    int wait_fd;
    bool str_addr;     /* FI_ADDR_STR provider (shm) */
    bool exp_untagged; /* expected messages are FI_MSG, not OFI_TAG_EXP */
    /* Unexpected messages too (where expected ones are): both land in the
     * catch-alls, and rxm never has to keep one (ofi_expected.c). */
    bool unexp_untagged;
    bool multi_recv;       /* the protocol offers FI_MULTI_RECV (untagged) */
    size_t exp_pool_bytes; /* room for catch-all expected receives */
    int shm_lock_fd; /* fi_shm: read lock on our region, held while open */
    uint64_t mr_mode;
    uint64_t put_flags; /* FI_DELIVERY_COMPLETE where it reports rejections */
    size_t iov_limit, rma_iov_limit, max_msg_size;
    /* Tail of every unexpected receive shorter than eager_size, so the
     * provider never truncates (tcp drops the connection when it does);
     * contents meaningless.  NULL if the provider takes fewer than three
     * receive iovecs. */
    void *discard;
    size_t eager_size;
    uint64_t retry_timeout_ns, keepalive_ns, peer_timeout_ns, cancel_grace_ns;
    uint64_t spin_ns;      /* keep polling this long after activity */
    uint64_t peer_idle_ns; /* drop unused peers after this */
    uint64_t reap_ns;      /* scan for half-closed sockets (0: never) */
    /* Probe a peer whose connection attempts fail with a TCP connect of
     * our own (ofi_connprobe.c): set for tcp, where it may be turned off
     * (probe_connect 0). */
    uint64_t probe_connect;
    struct ofi_reaper reap;
    uint64_t last_activity_ns; /* last time the CQ had something */
    struct cw_na_addr *self;
    struct nau_ptable peers; /* by raw address */
    struct nau_list retry;   /* ops to (re)post */
    /* Nothing on it may be posted or time out before this (every op
     * waits for its peer's back-off): ofi_run_retries skips the scan. */
    uint64_t retry_next_ns;
    struct nau_list done;   /* ops whose callback is due */
    struct nau_list active; /* every op between post and completion */
    struct nau_list zombies;
    struct nau_list ctrl_sends;
    /* Freed ops kept for reuse: a stream of messages then allocates
     * nothing (and, under ASan, does not fill the quarantine). */
    struct nau_pool op_pool;
    struct nau_list mems; /* every memory handle not yet released */
    unsigned nrma;        /* RMA ops in flight */
    uint64_t next_liveness_ns;
    unsigned pongs_due;      /* peers with pong_due set */
    unsigned pong_tokens;    /* pongs to unknown addresses allowed now */
    uint64_t pong_refill_ns; /* when pong_tokens last grew */
    uint64_t dropped;        /* malformed or unmatched messages dropped */
    unsigned drained;        /* of them, in this CQ read (ofi_read_cq) */
    /* expected messages (ofi_expected.c) */
    struct ofi_exp_buf **exp_bufs; /* catch-all receive buffers */
    unsigned nexp_bufs, exp_unposted;
    /* The catch-alls are FI_MULTI_RECV buffers: each takes many messages,
     * packed, and is released by the provider when nearly full. */
    bool exp_multi;
    size_t exp_buf_bytes; /* room in each catch-all */
    /* Posted receives, and messages that came before theirs (bounded by
     * early_max and OFI_EARLY_BYTES_MAX), by (hash of the raw address in
     * cls->peers, tag). */
    struct nau_match exp_posted;
    struct nau_match early;
    size_t early_max;
    /* Unexpected messages (unexp_untagged): the receives the user posted,
     * and the peers with messages waiting for one, served in turn; what
     * waits is bounded in all and per peer (charged its length and
     * OFI_UMSG_OVERHEAD bytes each). */
    struct nau_list unexp_posted;
    struct nau_list unexp_ready;
    size_t unexp_queued;
    size_t unexp_queue_max, unexp_peer_max; /* parameters */
    struct nau_slabs slabs;                 /* where they lie */
    /* Message sends to one peer between post and completion beyond which
     * a new one is refused (CW_BUSY): rxm copies each into a buffer of
     * its own from a pool that never shrinks, and a peer that does not
     * read its answers held them all (ofi_msg.c). */
    size_t peer_sends_max;
    size_t inject_size; /* parameter: largest message injected (0: none) */
    size_t inject_max;  /* what ofi_msg_inject takes: the parameter, within
                           the provider's inject_size less our header */
    uint64_t drops_unlogged, next_drop_log_ns;
    const char *drop_reason; /* of the last drop (a literal) */
    struct ofi_ctx ctrl_ctx;
    bool ctrl_posted;
    struct ofi_hdr ctrl_buf;
    /* Tag sinks (ofi_msg.c): NULL where the provider ignores ignore masks */
    size_t tag_sinks;    /* parameter: sinks per class (0: none) */
    uint64_t tag_ignore; /* of the plugin's tagged receives (ofi_msg.c) */
    struct ofi_sink *sinks;
    unsigned nsinks;         /* allocated: sink_classes x tag_sinks */
    unsigned sink_classes;   /* 2, or 3 with unexp_untagged */
    unsigned sinks_unposted; /* wanted (ofi_sink_wanted) and not posted */
    bool sinks_flood;        /* all of them wanted, not just one per class */
    uint64_t sinks_calm_ns;  /* back to one per class after this */
    void *sink_buf;          /* shared by all sinks; contents meaningless */
};

/* A posted tagged receive matching a set of tags nobody posts for. */
struct ofi_sink {
    struct ofi_ctx ctx; /* first */
    uint64_t tag, ignore;
    bool posted;
    bool canceled; /* fi_cancel() called, its completion not read yet */
};

/* ofi_init.c */
cw_status_t ofi_status(int fi_err);
uint64_t ofi_now(const struct cw_na_class *cls);

/* ofi_reap.c */
void ofi_reap_init(struct cw_na_class *cls, const void *raw, size_t len);
void ofi_reap_tick(struct cw_na_class *cls, uint64_t now);
void ofi_reap_fini(struct cw_na_class *cls);

/* ofi_connprobe.c */
enum ofi_cprobe {
    OFI_CPROBE_WAIT,      /* nothing known (yet) */
    OFI_CPROBE_LISTENING, /* something accepts connections there */
    OFI_CPROBE_REFUSED,   /* nothing does: the peer has gone */
};
enum ofi_cprobe ofi_cprobe_run(struct cw_na_addr *p);
void ofi_cprobe_close(struct cw_na_addr *p);

/* ofi_addr.c */
cw_status_t ofi_addr_init_self(struct cw_na_class *cls);
void ofi_addr_fini(struct cw_na_class *cls);
void ofi_peer_reset(struct cw_na_class *cls, struct cw_na_addr *peer);
void ofi_peers_reap(struct cw_na_class *cls, uint64_t now);
cw_status_t ofi_peer_get(struct cw_na_class *cls, const void *raw, size_t len,
                         struct cw_na_addr **addr_p);
struct cw_na_addr *ofi_peer_find(struct cw_na_class *cls, const void *raw,
                                 size_t len);
int ofi_shm_owner(const char *name);
void ofi_shm_reap(struct cw_na_class *cls, const char *name);
void ofi_shm_reap_dead(struct cw_na_class *cls);
cw_status_t ofi_shm_lock_self(struct cw_na_class *cls);
void ofi_hdr_fill(struct cw_na_class *cls, struct ofi_hdr *hdr, uint8_t kind);
bool ofi_hdr_valid(const struct ofi_hdr *hdr, size_t len);
int ofi_format_raw(const struct cw_na_class *cls, const uint8_t *raw,
                   size_t len, char *buf, size_t size);
cw_status_t ofi_location_to_raw(const struct cw_na_class *cls,
                                const char *location, bool for_bind, void *raw,
                                size_t *len_p);
cw_status_t ofi_addr_lookup(cw_na_class_t *cls, const char *location,
                            cw_na_addr_t **addr_p);
cw_status_t ofi_addr_self(cw_na_class_t *cls, cw_na_addr_t **addr_p);
cw_status_t ofi_addr_dup(cw_na_class_t *cls, cw_na_addr_t *addr,
                         cw_na_addr_t **addr_p);
void ofi_addr_free(cw_na_class_t *cls, cw_na_addr_t *addr);
bool ofi_addr_cmp(cw_na_class_t *cls, cw_na_addr_t *a, cw_na_addr_t *b);
cw_status_t ofi_addr_to_string(cw_na_class_t *cls, cw_na_addr_t *addr,
                               char *buf, size_t *len_p);
size_t ofi_addr_serialize_size(cw_na_class_t *cls, cw_na_addr_t *addr);
cw_status_t ofi_addr_serialize(cw_na_class_t *cls, void *buf, size_t size,
                               cw_na_addr_t *addr);
cw_status_t ofi_addr_deserialize(cw_na_class_t *cls, const void *buf,
                                 size_t size, cw_na_addr_t **addr_p);

/* ofi_msg.c */
cw_status_t ofi_msg_send_unexpected(cw_na_class_t *cls, const void *buf,
                                    size_t len, cw_na_addr_t *dest,
                                    uint32_t tag, cw_na_cb_t cb, void *arg,
                                    cw_na_op_t **op_p);
cw_status_t ofi_msg_recv_unexpected(cw_na_class_t *cls, void *buf, size_t len,
                                    cw_na_cb_t cb, void *arg,
                                    cw_na_op_t **op_p);
cw_status_t ofi_msg_inject(cw_na_class_t *cls, const void *buf, size_t len,
                           cw_na_addr_t *dest, uint32_t tag, bool expected);
cw_status_t ofi_msg_send_expected(cw_na_class_t *cls, const void *buf,
                                  size_t len, cw_na_addr_t *dest, uint32_t tag,
                                  cw_na_cb_t cb, void *arg, cw_na_op_t **op_p);
cw_status_t ofi_msg_recv_expected(cw_na_class_t *cls, void *buf, size_t len,
                                  cw_na_addr_t *source, uint32_t tag,
                                  cw_na_cb_t cb, void *arg, cw_na_op_t **op_p);
cw_status_t ofi_msg_post(struct cw_na_class *cls, struct cw_na_op *op);
void ofi_msg_complete(struct cw_na_class *cls, struct cw_na_op *op,
                      const struct fi_cq_tagged_entry *e, int err);
cw_status_t ofi_ctrl_post_recv(struct cw_na_class *cls);
void ofi_ctrl_recv_done(struct cw_na_class *cls,
                        const struct fi_cq_tagged_entry *e, int err);
void ofi_ctrl_send(struct cw_na_class *cls, struct cw_na_addr *peer,
                   uint8_t kind);
void ofi_ctrl_send_done(struct cw_na_class *cls, struct ofi_ctrl *c, int err);
void ofi_pongs_due(struct cw_na_class *cls, uint64_t now);
cw_status_t ofi_sinks_init(struct cw_na_class *cls);
void ofi_sinks_post(struct cw_na_class *cls);
void ofi_sinks_tick(struct cw_na_class *cls, uint64_t now);
void ofi_sink_done(struct cw_na_class *cls, struct ofi_ctx *ctx, int err);

/* ofi_expected.c */
cw_status_t ofi_exp_init(struct cw_na_class *cls);
void ofi_exp_fini(struct cw_na_class *cls);
cw_status_t ofi_exp_post_bufs(struct cw_na_class *cls);
cw_status_t ofi_exp_recv_post(struct cw_na_class *cls, struct cw_na_op *op);
void ofi_exp_recv_unlink(struct cw_na_class *cls, struct cw_na_op *op);
cw_status_t ofi_unexp_recv_post(struct cw_na_class *cls, struct cw_na_op *op);
void ofi_drop_log(struct cw_na_class *cls, uint64_t now);
void ofi_drop_count(struct cw_na_class *cls, const char *why);
void ofi_drop_note(struct cw_na_class *cls, const char *why);
void ofi_exp_recv_done(struct cw_na_class *cls, struct ofi_ctx *ctx,
                       const struct fi_cq_tagged_entry *e, int err);

/* ofi_rma.c */
cw_status_t ofi_mem_register(cw_na_class_t *cls,
                             const struct cw_na_segment *segs, size_t n,
                             uint32_t access, cw_na_mem_t **mem_p);
void ofi_mem_release(cw_na_class_t *cls, cw_na_mem_t *mem);
void ofi_mem_fini(struct cw_na_class *cls);
size_t ofi_mem_serialize_size(cw_na_class_t *cls, cw_na_mem_t *mem);
cw_status_t ofi_mem_serialize(cw_na_class_t *cls, void *buf, size_t size,
                              cw_na_mem_t *mem);
cw_status_t ofi_mem_deserialize(cw_na_class_t *cls, const void *buf,
                                size_t size, cw_na_mem_t **mem_p);
cw_status_t ofi_put(cw_na_class_t *cls, cw_na_mem_t *local, size_t local_off,
                    cw_na_mem_t *remote, size_t remote_off, size_t len,
                    cw_na_addr_t *peer, cw_na_cb_t cb, void *arg,
                    cw_na_op_t **op_p);
cw_status_t ofi_get(cw_na_class_t *cls, cw_na_mem_t *local, size_t local_off,
                    cw_na_mem_t *remote, size_t remote_off, size_t len,
                    cw_na_addr_t *peer, cw_na_cb_t cb, void *arg,
                    cw_na_op_t **op_p);
cw_status_t ofi_rma_post(struct cw_na_class *cls, struct cw_na_op *op);
void ofi_rma_sub_done(struct cw_na_class *cls, struct ofi_sub *sub, int err);

/* ofi_progress.c */
struct cw_na_op *ofi_op_new(struct cw_na_class *cls, enum cw_na_op_type type,
                            struct cw_na_addr *peer, cw_na_cb_t cb, void *arg);
void ofi_op_free(struct cw_na_class *cls, struct cw_na_op *op);
void ofi_retry_push(struct cw_na_class *cls, struct cw_na_op *op);
void ofi_peer_again(struct cw_na_class *cls, struct cw_na_addr *peer,
                    uint64_t now);
void ofi_peer_accepted(struct cw_na_class *cls, struct cw_na_addr *peer);
bool ofi_peer_backing_off(const struct cw_na_class *cls,
                          const struct cw_na_addr *peer);
cw_status_t ofi_op_start(struct cw_na_class *cls, struct cw_na_op *op);
/* Starts @p op; frees it on failure, hands it out via @p op_p (may be
 * NULL) on success. */
cw_status_t ofi_op_submit(struct cw_na_class *cls, struct cw_na_op *op,
                          cw_na_op_t **op_p);
void ofi_op_finish(struct cw_na_class *cls, struct cw_na_op *op,
                   cw_status_t status);
/* Status of an op's error completion @p err (positive fi errno): the cancel
 * or peer failure that caused it if any, else the translated error. */
cw_status_t ofi_op_error(const struct cw_na_op *op, int err);
void ofi_peer_alive(struct cw_na_class *cls, struct cw_na_addr *peer);
void ofi_peer_suspect(struct cw_na_class *cls, struct cw_na_addr *peer);
void ofi_peer_failed(struct cw_na_class *cls, struct cw_na_addr *peer,
                     cw_status_t status);
void ofi_progress_fini(struct cw_na_class *cls);
int ofi_get_wait_fd(cw_na_class_t *cls);
bool ofi_safe_to_sleep(cw_na_class_t *cls);
bool ofi_streaming(cw_na_class_t *cls);
cw_status_t ofi_progress(cw_na_class_t *cls, unsigned max, unsigned *count_p);
cw_status_t ofi_cancel(cw_na_class_t *cls, cw_na_op_t *op);

#endif /* CW_NA_OFI_H */
