/*
 * Private structures of the RPC and bulk layers (context, networks,
 * addresses, handles, buffers, bulk handles, wire format).  Not installed.
 *
 * Locking: one lock per context (ctx->lock, util/cw_lock.h) protects every
 * object of the context.  Network progress runs with it held, so NA completion
 * callbacks see consistent state and may post new operations; user callbacks
 * never run with it held (cw_trigger drops it first).
 */
#ifndef CW_RPC_PRIV_H
#define CW_RPC_PRIV_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <causeway/causeway.h>
#include <causeway/forward.h>
#include <causeway/na.h>

#include "cw_clock.h"
#include "cw_lock.h"
#include "cw_mutex.h"
#include "ids.h"
#include "nau_list.h"

/* Thread-locals of libcauseway, which programs link (not dlopen): the
 * initial-exec model reads them at a fixed offset from the thread pointer
 * instead of calling __tls_get_addr (about 10 instructions and a call, on
 * every message queued in a batch scope). */
#define CW_TLS _Thread_local __attribute__((tls_model("initial-exec")))

#define CW_MAX_NETS  8 /**< networks per context */
#define CW_MAX_WATCH 8 /**< application fds per context (watch_fd) */
/** Marks an application's fd in the context's epoll data (fds fit in 32
 * bits; the networks' wait fds and the eventfd are stored bare). */
#define CW_WATCH_TAG        (1ull << 40)
#define CW_MAX_DESC         64 /**< descriptors in one message */
#define CW_MAX_DEPTH        16 /**< bulk chunks in flight per transfer */
#define CW_DEFAULT_MAX_HOPS 8  /**< TTL */
#define CW_DONE_GRACE_NS    5000000000ull /**< wait for an overflow ack */

/* ---- wire format (docs/wire.md) ---------------------------------------- */

#define CW_WIRE_MAGIC   0x31595743u /* "CWY1" little-endian */
#define CW_WIRE_VERSION 1u
#define CW_HDR_SIZE     56u

enum cw_msg_type {
    CW_MSG_REQ = 1,    /**< request (unexpected) */
    CW_MSG_RESP = 2,   /**< response (expected, tag from the request) */
    CW_MSG_DONE = 3,   /**< client pulled an overflowed response (unexpected) */
    CW_MSG_CANCEL = 4, /**< client cancelled a request (unexpected) */
    CW_MSG_BATCH = 5,  /**< several unexpected messages to one peer, each
                            as it would travel alone (coalesce.c) */
};
#define CW_MSG_LAST        CW_MSG_BATCH
#define CW_BATCH_ENTRY_HDR 4u  /**< length prefix of a batch entry */
#define CW_BATCH_MAX       64u /**< messages in one batch */

#define CW_HF_ONE_WAY  0x1u /**< no response wanted */
#define CW_HF_OVERFLOW 0x2u /**< payload left in sender memory: pull it */
#define CW_HF_IDEMPOTENT                                                       \
    0x4u                  /**< REQ: may be resumed; a resume id follows        \
                              the header (docs/bulk-gateway.md) */
#define CW_HF_RESUME 0x8u /**< REQ: resumes the request with that id */
#define CW_HF_BATCHES                                                          \
    0x10u /**< REQ: the sender takes unexpected messages on                    \
               this network: its response may come inside                      \
               a batch (docs/wire.md, "Batches") */
#define CW_HF_PIN_ASK                                                          \
    0x20u /**< REQ: the sender asks which member of a spread                   \
               address to use (core/spread.c) */
#define CW_HF_PIN                                                              \
    0x40u /**< RESP: the routing section names the member                      \
               the caller is to use from now on */
#define CW_HF_ALL         0x7fu
#define CW_HDR_EXT_RESUME 8u /**< bytes of the resume id after the header */

#define CW_DF_PROXY 0x1u /**< descriptor names a gateway proxy handle */
#define CW_DF_ALL   0x1u

struct cw_wire_hdr {
    uint8_t type;
    uint16_t flags;
    uint8_t hops;
    uint64_t rpc_id;
    uint64_t req_id;
    uint64_t budget_us; /**< remaining deadline budget */
    uint32_t resp_tag;
    uint32_t resp_limit; /**< REQ: caller's response eager limit in
                              bytes (24 bits), 0 = unknown */
    uint16_t status;
    uint16_t dest_len;
    uint16_t ndesc;
    uint16_t ovf_len;
    uint32_t desc_len;
    uint32_t payload_len;
    uint64_t resume_id; /**< REQ with CW_HF_IDEMPOTENT */
};

/** A decoded, validated message (pointers into the message). */
struct cw_wire_msg {
    struct cw_wire_hdr hdr;
    const char *dest;       /**< not NUL-terminated, hdr.dest_len bytes */
    const uint8_t *desc;    /**< descriptor section, hdr.desc_len bytes */
    const uint8_t *ovf;     /**< overflow descriptor, hdr.ovf_len bytes */
    const uint8_t *payload; /**< NULL when CW_HF_OVERFLOW */
};

/** One decoded descriptor (pointers into the message). */
struct cw_wire_desc {
    uint8_t flags;
    uint8_t perm;
    uint64_t total;
    const char *plugin; /**< plugin_len bytes */
    uint8_t plugin_len;
    const uint8_t *mem;
    uint16_t mem_len;
};

/** Encode a header (and, with CW_HF_IDEMPOTENT, the resume id after it:
 *  cw_wire_hdr_size() bytes in all). */
void cw_wire_hdr_encode(void *buf, const struct cw_wire_hdr *h);
/** Bytes of a header with these flags (the fixed part and its extension). */
static inline size_t cw_wire_hdr_size(uint16_t flags)
{
    return CW_HDR_SIZE + ((flags & CW_HF_IDEMPOTENT) ? CW_HDR_EXT_RESUME : 0);
}
/** Validate a whole message into *@p m_p; CW_PROTOCOL/CW_VERSION on
 *  hostile input, when *@p m_p is partly written and not to be used. */
cw_status_t cw_wire_decode(const void *msg, size_t len,
                           struct cw_wire_msg *m_p);
/** Next entry of a validated batch payload at *@p off_p: CW_OK and the
 *  entry's message, CW_NOENT at the end, CW_PROTOCOL on a bad frame. */
cw_status_t cw_wire_batch_next(const uint8_t *p, size_t len, size_t *off_p,
                               const uint8_t **msg_p, size_t *msg_len_p);
/** Append one batch entry (length prefix and @p len bytes of @p msg) at
 *  @p p; returns the bytes written. */
size_t cw_wire_batch_put(uint8_t *p, const void *msg, size_t len);
/** Validate a descriptor section of @p n entries in @p len bytes. */
cw_status_t cw_wire_desc_check(const uint8_t *p, size_t len, unsigned n);
/** Find descriptor @p i of a validated section.  @p raw_p/@p raw_len_p
 *  (may be NULL) get the entry including its length prefix. */
cw_status_t cw_wire_desc_get(const uint8_t *p, size_t len, unsigned n,
                             unsigned i, struct cw_wire_desc *d_p,
                             const uint8_t **raw_p, size_t *raw_len_p);
/** Size of an encoded descriptor. */
size_t cw_wire_desc_size(size_t plugin_len, size_t mem_len);
/** Encode a descriptor header; the memory handle bytes follow at the
 *  returned pointer (@p mem_len of them). */
uint8_t *cw_wire_desc_encode(uint8_t *p, uint8_t flags, uint8_t perm,
                             uint64_t total, const char *plugin,
                             size_t mem_len);

/* ---- lists and completion queue ---------------------------------------- */

/* Lists are na-util's (nau_list.h), the plugins' own: a node on no list
 * is zeroed (nau_list_node_init), and deleting it does nothing. */

/** A queued user callback. */
struct cw_cqe {
    struct cw_cqe *next;
    void (*fn)(struct cw_cqe *e);
};

/* ---- buffers -------------------------------------------------------------*/

struct cw_buf {
    uint8_t *data;  /**< payload start */
    size_t len;     /**< writer: bytes written; reader: total */
    size_t pos;     /**< reader position */
    size_t cap;     /**< writer: payload capacity */
    uint8_t *alloc; /**< writer: owned allocation (head room + data) */
    size_t head;    /**< writer: room reserved before data */
    cw_status_t err;
    bool writer;
    bool standalone; /**< from cw_buf_create_*: free the struct too */
    /* writer: bulk handles for the descriptor section */
    cw_bulk_t **bulks;
    unsigned nbulk, bulk_cap;
    /* reader: descriptor section of the message */
    const uint8_t *desc;
    size_t desc_len;
    unsigned ndesc;
    struct cw_handle *h; /**< owner, for cw_buf_get_bulk (may be NULL) */
};

void cw_buf_init_writer(cw_buf_t *b, size_t head);
/** A buffer that was a writer or holds bulk handles (cw_buf_init_reader). */
void cw_buf_init_reader_slow(cw_buf_t *b, const void *data, size_t len);
/** Make @p b a reader of @p len bytes at @p data.  Inline: a pooled handle
 *  does this several times a request, nearly always on a reader already,
 *  whose writer fields are zero and which owns nothing to free. */
static inline void cw_buf_init_reader(cw_buf_t *b, const void *data, size_t len)
{
    if (b->writer || b->bulks != NULL) {
        cw_buf_init_reader_slow(b, data, len);
        return;
    }
    b->data = (uint8_t *)data;
    b->len = len;
    b->pos = 0;
    b->err = CW_OK;
    b->desc = NULL;
    b->desc_len = 0;
    b->ndesc = 0;
}
/** Writer back to empty (keeps memory), dropping bulk references (their
 *  context's lock held when it has any). */
void cw_buf_reset(cw_buf_t *b);
/** Free a writer's allocation if its capacity is over @p keep bytes. */
void cw_buf_trim(cw_buf_t *b, size_t keep);
/** Release memory and bulk references of an embedded buffer (as
 *  cw_buf_reset). */
void cw_buf_fini(cw_buf_t *b);
/** Make sure the writer has @p need bytes free at @p b->len. */
cw_status_t cw_buf_reserve(cw_buf_t *b, size_t need);
/** Copy another buffer's bulk list (references taken). */
cw_status_t cw_buf_copy_bulks(cw_buf_t *dst, const cw_buf_t *src);

/* ---- context, networks, addresses -------------------------------------- */

struct cw_urecv {
    cw_network_t *net;
    uint8_t *buf;
    size_t len;
    cw_na_op_t *op;
    bool lost; /**< its re-post failed (cw_net_urecv_retry) */
};

struct cw_network {
    cw_context_t *ctx;
    cw_na_t *na;
    unsigned index;
    uint32_t flags;
    struct cw_na_caps caps;
    cw_na_addr_t *self;
    char uri[CW_URI_MAX];
    char plugin[CW_URI_PLUGIN_MAX];
    char protocol[CW_URI_PROTOCOL_MAX];
    struct cw_idgen tags; /**< response tags (ids.c) */
    int wait_fd;
    struct cw_urecv *urecv;
    unsigned nurecv;
    unsigned urecv_posted;
    unsigned urecv_lost; /**< slots whose re-post failed: posted again
                              by the timers (cw_net_urecv_retry) */
    /* cw_network_close (ctx->lock): the context's list holds one reference,
     * so do addresses, server handles' sources and remote bulk handles on
     * it; the NA instance is closed when the last one goes. */
    unsigned refs;
    unsigned resp_sending;          /**< responses handed to the plugin */
    bool closed;                    /**< off ctx->nets: every use fails */
    struct cw_spread *spread;       /**< a spread address's published endpoint:
                                         its members (core/spread.c) */
    struct cw_pin *pins;            /**< peers asked or pinned, CW_PIN_MAX */
    struct cw_network *next_closed; /**< ctx->closed_nets */
};

struct cw_addr {
    cw_context_t *ctx;
    atomic_int refs;
    cw_network_t *net;
    cw_na_addr_t *na;
    bool self;
    bool embedded;      /**< lives inside a handle: free does nothing */
    char *route;        /**< routing destination for the first hop, or NULL */
    char *str;          /**< the string it was looked up with, or NULL */
    bool via_routes;    /**< a plain address the client routes sent through
                             a gateway (route is that address) */
    struct cw_pin *pin; /**< its first hop's pin (core/spread.c), or NULL */
    bool pin_none;      /**< no pin to be had: the table was full */
};

/* ---- one address on several contexts (core/spread.c) ------------------- */

#define CW_PIN_MAX 1024 /**< peers a network remembers pins for */

enum cw_pin_state {
    CW_PIN_NEW = 0, /**< nothing asked yet */
    CW_PIN_ASKED,   /**< a request carries CW_HF_PIN_ASK */
    CW_PIN_MOVING,  /**< pinned: waiting for the published address to
                         finish what was sent to it */
    CW_PIN_WARMING, /**< one forward at the member: the rest wait for it */
    CW_PIN_MOVED,   /**< everything goes to the member */
    CW_PIN_HOME,    /**< the peer does not spread: use it as it is */
};

/** Requests of a caller to one routing destination (none: the peer
 *  itself) while its pin moves: their order is kept per destination, so
 *  that one destination's requests still at the published endpoint hold
 *  back only that destination's later ones (core/spread.c). */
struct cw_pin_lane {
    uint64_t key;  /**< FNV-1a of the destination ("" for none) */
    unsigned home; /**< counted at the published endpoint (PIN_HOME) */
    unsigned held; /**< waiting on pin->held */
};

#define CW_PIN_LANES_MAX 256 /**< destinations a pin tells apart */

/** What a caller's network knows of one peer address (ctx->lock). */
struct cw_pin {
    struct cw_pin *next;  /**< net->pins */
    cw_na_addr_t *home;   /**< the published address */
    cw_na_addr_t *member; /**< MOVING, MOVED: the member given */
    enum cw_pin_state state;
    unsigned home_inflight;         /**< forwards sent to home, not complete */
    bool opened;                    /**< ASKED: the asking request has left */
    struct cw_pin_retired *retired; /**< members given up on, freed with
                                         the network (forwards sent there
                                         may still use them) */
    struct nau_list held;           /**< forwards waiting, in order */
    /* Lane 0 is ovf: every destination the table has no room for, and
     * one not in the table while ovf has requests (it may hold some of
     * it); lane i > 0 is lanes[i - 1], free when both counts are 0. */
    struct cw_pin_lane ovf;
    struct cw_pin_lane *lanes;
    unsigned nlanes, lanes_cap;
    const struct cw_handle *releasing; /**< leaving pin->held now */
};

struct cw_rpc_class {
    struct cw_rpc_class *next;
    cw_rpc_id_t id;
    cw_rpc_handler_t handler;
    void *arg;
    struct cw_rpc_opts opts;
    char name[];
};

#define CW_RPC_BUCKETS 64

struct cw_context {
    cw_lock_t lock;
    pthread_mutex_t progress_lock;
    cw_cond_t cq_cond;
    struct cw_context_opts opts;
    cw_network_t *nets[CW_MAX_NETS];
    unsigned nnets;
    struct cw_rpc_class *rpcs[CW_RPC_BUCKETS];
    struct cw_cqe *cq_head, *cq_tail;
    atomic_uint cq_len; /**< entries queued (read without the lock) */
    unsigned cq_waiters;
    struct nau_list inflight;   /**< client handles with a deadline */
    struct nau_list wait_done;  /**< server handles awaiting a DONE */
    struct nau_list bulk_ops;   /**< transfers in flight */
    struct nau_list incoming;   /**< server handles not answered yet */
    struct nau_list responding; /**< server handles whose response is still
                                    in a plugin (cancelled on shutdown) */
    struct nau_list notices;    /**< acknowledgments and cancels in flight
                                    (notice.c) */
    /* Pooled handles by the shape their buffers have: [1] server-shaped
     * (out is the writer), [0] client-shaped; a gateway's handles
     * alternate roles, and a handle of its own shape needs no swap. */
    struct cw_handle *free_handles[2];
    unsigned nfree_handles;
    struct cw_idgen req_ids; /**< request ids (ids.c) */
    uint64_t next_timer_ns;
    uint64_t next_deadline; /**< soonest deadline of anything listed */
    unsigned polls;
    int epfd;
    int evfd;
    atomic_int sleepers;
    atomic_bool interrupted; /**< cw_context_interrupt: return from progress */
    bool destroying;
    cw_relay_hook_t relay_hook;
    void *relay_arg;
    unsigned max_hops;
    struct cw_context_stats stats;
    struct cw_resolver *resolver; /**< cw_context_set_resolver, or NULL */
    char *default_gateway;        /**< or NULL */
    struct nau_list bulks;        /**< every bulk handle (cw_network_close) */
    cw_network_t *closed_nets;    /**< closed, still referenced */
    struct nau_list rs_suspended; /**< delegations waiting for a resume */
    unsigned nrsess, nsuspended;  /**< resume sessions, suspended ops */
    int watch[CW_MAX_WATCH];      /**< cw_context_watch_fd descriptors */
    uint64_t active_ns;           /**< last completion or network event */
    _Atomic uint64_t spin_ns;     /**< cw_progress's spin before blocking
                                       (core/progress.c); 0: the default */
    unsigned nwatch;
    /* CW_CTX_COALESCE (coalesce.c) */
    struct nau_list sendq; /**< handles whose request or response
                               waits for the end of the pass */
    unsigned nsendq;
    struct nau_list batches;  /**< batches in a plugin (coalesce.c) */
    struct cw_handle **rwait; /**< handles with a response receive
                                   posted, by req_id (CW_RWAIT_BUCKETS) */
};
#define CW_RWAIT_BUCKETS 1024u

/** Anything in flight that only progress moves on. */
static inline bool cw_ctx_busy(const cw_context_t *ctx)
{
    CW_LOCK_ASSERT_HELD(&ctx->lock);
    return !nau_list_empty(&ctx->inflight) ||
           !nau_list_empty(&ctx->wait_done) ||
           !nau_list_empty(&ctx->bulk_ops) ||
           !nau_list_empty(&ctx->responding) ||
           !nau_list_empty(&ctx->rs_suspended) ||
           !nau_list_empty(&ctx->notices) || ctx->cq_head != NULL;
}

/* ---- handles -------------------------------------------------------------*/

/*
 * A handle has parts by role.  A client forwards a request and takes in
 * its response; a server takes in a request and answers it; a gateway
 * relays a request with two handles, the incoming (server) one and the
 * outgoing (client) one made for it (cw_relay_create), linked by their relay
 * parts.  A pooled handle serves either role on its next use.
 *
 * Everything one use needs sits in struct cw_h_use, zeroed in one step
 * when the handle goes back to its pool: a recycled handle is a fresh one
 * but for the buffers it keeps (struct cw_handle, "kept").
 *
 * The life of a use is its state (enum cw_hstate) and its flags (enum
 * cw_hflag).  Both change only through cw_h_state_set, cw_h_flag_set and
 * cw_h_flag_clear, which check each change against the tables of
 * cw_h_state_ok and cw_h_flag_ok in debug builds.
 */

enum cw_hrole {
    CW_H_CLIENT = 0,
    CW_H_SERVER = 1,
};

enum cw_hstate {
    CW_H_IDLE = 0, /**< client: ready to forward; server: not answered */
    CW_H_ACTIVE,   /**< forward or respond in flight, outcome open */
    CW_H_DECIDED,  /**< outcome decided (use.final): operations of it may
                        still be outstanding (use.pending) */
    CW_H_QUEUED,   /**< completion queued for the caller */
    CW_H_DONE,     /**< completion taken: the callback ran, or runs */
};
#define CW_H_NSTATES 5

/** A set of states, for the tables below. */
#define CW_H_IN(s) (1u << (s))
#define CW_H_ANY   ((1u << CW_H_NSTATES) - 1)

/**
 * Whether a handle of @p role may go from @p from to @p to: the whole
 * life of a use, in one table.
 */
static inline bool cw_h_state_ok(enum cw_hrole role, enum cw_hstate from,
                                 enum cw_hstate to)
{
    static const uint8_t next[2][CW_H_NSTATES] = {
        [CW_H_CLIENT] =
            {
                /* cw_forward */
                [CW_H_IDLE] = CW_H_IN(CW_H_ACTIVE),
                /* the outcome is decided; or the forward could not start:
                 * back where it started from */
                [CW_H_ACTIVE] = CW_H_IN(CW_H_DECIDED) | CW_H_IN(CW_H_IDLE) |
                                CW_H_IN(CW_H_DONE),
                /* nothing outstanding any more, or lingering (LINGER):
                 * the caller hears now */
                [CW_H_DECIDED] = CW_H_IN(CW_H_QUEUED),
                /* cw_h_complete */
                [CW_H_QUEUED] = CW_H_IN(CW_H_DONE),
                /* forwarded again: by the caller, or by the core through
                 * another gateway (REFORWARD) */
                [CW_H_DONE] = CW_H_IN(CW_H_ACTIVE),
            },
        [CW_H_SERVER] =
            {
                /* cw_respond */
                [CW_H_IDLE] = CW_H_IN(CW_H_ACTIVE),
                [CW_H_ACTIVE] = CW_H_IN(CW_H_DECIDED),
                /* nothing outstanding any more; DONE at once when there
                 * is no callback to run */
                [CW_H_DECIDED] = CW_H_IN(CW_H_QUEUED) | CW_H_IN(CW_H_DONE),
                [CW_H_QUEUED] = CW_H_IN(CW_H_DONE),
                /* answered once: recycled from here */
                [CW_H_DONE] = 0,
            },
    };

    return (unsigned)role < 2 && (unsigned)from < CW_H_NSTATES &&
           (unsigned)to < CW_H_NSTATES && ((next[role][from] >> to) & 1u);
}

/** Flags of a use (use.flags); cw_h_flag_ok says who holds each, and in
 *  which states it may be set and cleared. */
enum cw_hflag {
    CW_HFL_SENT = 1u << 0,          /**< client: the request left, or is
                                         queued to leave (coalesce.c) */
    CW_HFL_LINGER = 1u << 1,        /**< client: failed while the server may
                                         still pull its payload: exposed,
                                         and the handle busy, until the
                                         server answers */
    CW_HFL_RECV_CANCELED = 1u << 2, /**< client: cw_na_cancel asked for
                                         recv_op */
    CW_HFL_SEND_CANCELED = 1u << 3, /**< server: cw_na_cancel asked for the
                                         response's send_op */
    CW_HFL_SQ_CANCEL = 1u << 4,     /**< cancelled while queued (coalesce.c):
                                         never sent */
    CW_HFL_RWAIT = 1u << 5,         /**< client: on ctx->rwait */
    CW_HFL_REFORWARD = 1u << 6,     /**< client: cw_forward called by the
                                         core (cw_h_reforward) */
    CW_HFL_SELF = 1u << 7,          /**< server: the server side of an RPC
                                         to self */
    CW_HFL_FROM_BATCH = 1u << 8,    /**< server: the request came in a
                                         CW_MSG_BATCH */
    CW_HFL_XCTX = 1u << 9,          /**< relay: the pair lives in two
                                         contexts: the link is under
                                         cw_relay_link_lock, without a
                                         reference */
    CW_HFL_PIN_HOME = 1u << 10,     /**< client: counted in
                                         pin->home_inflight (spread.c) */
    CW_HFL_PIN_WARM = 1u << 11,     /**< client: the first forward to the
                                         member */
    CW_HFL_PIN_ASKER = 1u << 12,    /**< client: carries CW_HF_PIN_ASK */
    CW_HFL_PIN_HELD = 1u << 13,     /**< client: waiting on pin->held */
};

/**
 * Whether a handle of @p role in state @p state may set (@p on) or clear
 * flag @p flag (one of enum cw_hflag).
 */
static inline bool cw_h_flag_ok(enum cw_hrole role, enum cw_hstate state,
                                unsigned flag, bool on)
{
#define CW_H_C 1u /* client */
#define CW_H_S 2u /* server */
#define CW_H_LATER                                                             \
    (CW_H_IN(CW_H_DECIDED) | CW_H_IN(CW_H_QUEUED) | CW_H_IN(CW_H_DONE))
    static const struct {
        unsigned flag;
        uint8_t roles, set_in, clear_in;
    } rule[] = {
        /* set by the send, cleared when the next forward starts */
        {CW_HFL_SENT, CW_H_C, CW_H_IN(CW_H_ACTIVE),
         CW_H_IN(CW_H_IDLE) | CW_H_IN(CW_H_DONE)},
        /* set with the failure, cleared when the server has answered */
        {CW_HFL_LINGER, CW_H_C, CW_H_IN(CW_H_DECIDED), CW_H_LATER},
        /* set by a cancel (a lingering handle's too), cleared when the
         * receive is posted */
        {CW_HFL_RECV_CANCELED, CW_H_C, CW_H_IN(CW_H_ACTIVE) | CW_H_LATER,
         CW_H_IN(CW_H_ACTIVE)},
        /* the response is in a plugin: its respond is not complete */
        {CW_HFL_SEND_CANCELED, CW_H_S,
         CW_H_IN(CW_H_ACTIVE) | CW_H_IN(CW_H_DECIDED), 0},
        {CW_HFL_SQ_CANCEL, CW_H_C | CW_H_S, CW_H_IN(CW_H_ACTIVE) | CW_H_LATER,
         CW_H_IN(CW_H_ACTIVE)},
        {CW_HFL_RWAIT, CW_H_C, CW_H_IN(CW_H_ACTIVE), CW_H_ANY},
        /* around the core's cw_forward of a completed forward */
        {CW_HFL_REFORWARD, CW_H_C, CW_H_IN(CW_H_DONE), CW_H_ANY},
        /* what the request is, from its start */
        {CW_HFL_SELF, CW_H_S, CW_H_IN(CW_H_IDLE), 0},
        {CW_HFL_FROM_BATCH, CW_H_S, CW_H_IN(CW_H_IDLE), 0},
        /* linked by cw_relay_create_on, unlinked on recycle */
        {CW_HFL_XCTX, CW_H_C | CW_H_S, CW_H_ANY, CW_H_ANY},
        /* taken by the send, given back at the completion */
        {CW_HFL_PIN_HOME, CW_H_C, CW_H_IN(CW_H_ACTIVE), CW_H_LATER},
        {CW_HFL_PIN_WARM, CW_H_C, CW_H_IN(CW_H_ACTIVE), CW_H_LATER},
        {CW_HFL_PIN_ASKER, CW_H_C, CW_H_IN(CW_H_ACTIVE), CW_H_LATER},
        /* waits before its send; let go, or failed while waiting */
        {CW_HFL_PIN_HELD, CW_H_C, CW_H_IN(CW_H_ACTIVE),
         CW_H_IN(CW_H_ACTIVE) | CW_H_IN(CW_H_DECIDED)},
    };
#undef CW_H_C
#undef CW_H_S
#undef CW_H_LATER

    if ((unsigned)role >= 2 || (unsigned)state >= CW_H_NSTATES)
        return false;
    for (size_t i = 0; i < sizeof(rule) / sizeof(rule[0]); i++)
        if (rule[i].flag == flag)
            return ((rule[i].roles >> role) & 1u) &&
                   (((on ? rule[i].set_in : rule[i].clear_in) >> state) & 1u);
    return false;
}

/** Client part of a use: a forward. */
struct cw_h_client {
    cw_addr_t *addr;    /**< destination (referenced) */
    cw_na_addr_t *peer; /**< where this forward goes: the address's own,
                             or the member it is pinned to (spread.c) */
    cw_forward_cb_t cb;
    void *arg;
    uint64_t cls_timeout_ms;      /**< its RPC class's timeout (0: none) */
    uint64_t linger_until;        /**< LINGER: when to stop waiting */
    cw_status_t resp_status;      /**< remote status while pulling a response */
    uint8_t reforwards;           /**< sent again through another gateway */
    struct cw_handle *rwait_next; /**< ctx->rwait chain */
    uint8_t *bresp;               /**< response that came in a batch, or NULL */
    size_t bresp_cap, bresp_len;
    struct cw_pin *pin;       /**< the pin it counts on or waits in
                                   (spread.c) */
    uint16_t pin_lane;        /**< its lane there (PIN_HOME, PIN_HELD) */
    struct nau_list pin_link; /**< pin->held, while PIN_HELD */
};

/** Server part of a use: a request taken in, and its answer. */
struct cw_h_server {
    struct cw_addr src; /**< the caller (embedded address) */
    char *route;        /**< routing destination (NUL-terminated, in
                             route_buf), or NULL: none */
    size_t resp_limit;  /**< caller's response eager limit */
    cw_respond_cb_t cb;
    void *arg;
    /* set at dispatch: a handler, or the gateway's relay hook */
    cw_rpc_handler_t hfn;
    void *harg;
    cw_relay_hook_t hook;
    void *hook_arg;
    const uint8_t *raw_desc; /**< the request's descriptor section */
    size_t raw_desc_len;
    const uint8_t *resp_desc; /**< descriptor section of the response */
    size_t resp_desc_len;
    unsigned raw_ndesc;
    unsigned resp_ndesc;
    struct cw_rsess *rsess; /**< its resume session (bulk_resume.c), or
                                 NULL */
    /** The caller cancelled.  Not a flag: across contexts the outgoing
     *  handle of a relay reads it under cw_relay_link_lock, while this
     *  handle's thread changes its flags under its own lock only. */
    bool canceled;
};

/** Relay part of a use (gateway, include/causeway/forward.h). */
struct cw_h_relay {
    struct cw_handle *in;  /**< outgoing: the incoming handle */
    struct cw_handle *out; /**< incoming: its outgoing handle */
    char *route;           /**< outgoing: routing destination (in
                                relay_route_buf), or NULL: none */
    size_t desc_len;       /**< outgoing: bytes of the section at desc_copy */
    unsigned ndesc;        /**< outgoing: its descriptors */
};

/**
 * One use of a handle: all zero while the handle is in its pool.  A use
 * writes the common and relay parts and its own role's part of the union
 * only, so recycling clears those (cw_h_use_size) and the rest is zero
 * already.
 */
struct cw_h_use {
    uint8_t role;     /**< enum cw_hrole */
    uint8_t state;    /**< enum cw_hstate */
    uint8_t hops;     /**< gateways crossed */
    uint16_t rflags;  /**< what the request says of itself: CW_HF_ONE_WAY,
                           _IDEMPOTENT, _RESUME, and _OVERFLOW (a client's:
                           this forward's request overflowed); a server's
                           also _BATCHES and _PIN_ASK */
    uint16_t flags;   /**< enum cw_hflag */
    uint32_t tag;     /**< response tag */
    unsigned pending; /**< operations outstanding */
    cw_status_t final;
    cw_rpc_id_t id;
    cw_network_t *net;
    uint64_t req_id;
    uint64_t deadline_ns;
    uint64_t resume_id;  /**< CW_HF_IDEMPOTENT: chosen at the origin, kept
                              by gateways (core/bulk_resume.c) */
    cw_na_op_t *send_op; /**< coalesce.c: CW_SQ_QUEUED while on ctx->sendq,
                              CW_SQ_BATCHED once inside a batch in flight */
    cw_na_op_t *recv_op;
    cw_bulk_op_t *bulk_op;
    cw_bulk_t *ovf_local; /**< our payload exposed for the peer to pull */
    struct cw_handle *self_peer; /**< RPC to self: the other side */
    struct cw_h_relay relay;
    union {
        struct cw_h_client cli;
        struct cw_h_server srv;
    };
};
_Static_assert(CW_HFL_PIN_HELD <= UINT16_MAX, "use.flags holds every flag");

/** Bytes of a use of @p role: what recycling clears. */
static inline size_t cw_h_use_size(enum cw_hrole role)
{
    return offsetof(struct cw_h_use, cli) + (role == CW_H_SERVER
                                                 ? sizeof(struct cw_h_server)
                                                 : sizeof(struct cw_h_client));
}

struct cw_handle {
    cw_context_t *ctx;
    atomic_int refs;
    struct cw_handle *next_free; /**< ctx->free_handles[] */
    /* kept: what a pooled handle keeps for its next use, so that it does
     * not allocate again (trimmed to CW_POOL_KEEP_BYTES on recycle) */
    cw_buf_t in;
    cw_buf_t out;
    uint8_t *msg; /**< received message / response buffer */
    size_t msg_cap;
    uint8_t *sbuf; /**< assembled outgoing message when not in place */
    size_t sbuf_cap;
    uint8_t *ovf_buf; /**< payload pulled from the peer */
    size_t ovf_cap;
    char *route_buf; /**< server: room for use.srv.route */
    size_t route_cap;
    uint8_t *desc_copy; /**< relay, outgoing: its descriptor section,
                             use.relay.desc_len bytes */
    size_t desc_copy_cap;
    char *relay_route_buf; /**< relay, outgoing: room for use.relay.route */
    size_t relay_route_cap;
    /* empty (self-linked) between uses */
    struct nau_list link;      /**< ctx->inflight, incoming or wait_done */
    struct nau_list resp_link; /**< ctx->responding */
    struct nau_list sq_link;   /**< ctx->sendq */
    /* written before each use of them */
    struct cw_cqe cqe;
    struct cw_cqe xcancel_cqe; /**< relay, outgoing: cancel from in's ctx */
    const uint8_t *sq_msg;     /**< coalesce.c: the message while queued */
    size_t sq_len;
    uint8_t done_msg[CW_HDR_SIZE]; /**< server: srv_send_ack */
    struct cw_h_use use;
};

/** Move @p h to state @p to (lock held). */
static inline void cw_h_state_set(cw_handle_t *h, enum cw_hstate to)
{
    CW_ASSERT(cw_h_state_ok(h->use.role, h->use.state, to));
    h->use.state = to;
}

/** Whether flag @p f of @p h is set. */
static inline bool cw_h_flag(const cw_handle_t *h, enum cw_hflag f)
{
    return (h->use.flags & f) != 0;
}

/** Set flag @p f of @p h (lock held). */
static inline void cw_h_flag_set(cw_handle_t *h, enum cw_hflag f)
{
    CW_ASSERT(cw_h_flag_ok(h->use.role, h->use.state, f, true));
    h->use.flags |= f;
}

/** Clear flag @p f of @p h (lock held). */
static inline void cw_h_flag_clear(cw_handle_t *h, enum cw_hflag f)
{
    CW_ASSERT(cw_h_flag_ok(h->use.role, h->use.state, f, false));
    h->use.flags &= ~(unsigned)f;
}

/** A forward or respond of @p h is under way: its completion has not run,
 *  or it lingers. */
static inline bool cw_h_busy(const cw_handle_t *h)
{
    return (h->use.state != CW_H_IDLE && h->use.state != CW_H_DONE) ||
           cw_h_flag(h, CW_HFL_LINGER);
}

extern const char cw_sq_marks[2];
#define CW_SQ_QUEUED  ((cw_na_op_t *)(void *)&cw_sq_marks[0])
#define CW_SQ_BATCHED ((cw_na_op_t *)(void *)&cw_sq_marks[1])

/** Queue a built message instead of sending it, when this thread is inside
 *  a pass (cw_trigger or a batch scope) of the context and either the
 *  context coalesces or the message answers, in kind, a request that came
 *  in a batch; true if queued (send_op set; the caller counts it pending
 *  as if sent). */
bool cw_sq_offer(cw_handle_t *h, const uint8_t *msg, size_t len);
/** Send everything queued (lock held): per peer, one message alone as it
 *  is, several as one CW_MSG_BATCH. */
void cw_sq_flush(cw_context_t *ctx);
/** Withdraw the batches in flight on @p net (NULL: all), once each: their
 *  handles complete with the batch; messages still queued for it complete
 *  CW_CANCELED at once (lock held). */
void cw_sq_cancel_net(cw_context_t *ctx, cw_network_t *net);
/** Open a pass of @p ctx on this thread (returns the enclosing one) and
 *  close it, flushing what it queued (takes the lock). */
cw_context_t *cw_sq_enter(cw_context_t *ctx);
void cw_sq_leave(cw_context_t *ctx, cw_context_t *prev);
/** Request send finished (NA completion, or a queued one failed). */
void cw_forward_send_done(cw_handle_t *h, cw_status_t st);
/** The NA completion of a request sent alone (arg: the handle). */
void cw_forward_send_cb(const struct cw_na_cb_info *info);
/** Response send finished, and its NA completion when sent alone. */
void cw_resp_send_done(cw_handle_t *h, cw_status_t st);
void cw_resp_send_cb(const struct cw_na_cb_info *info);
/** Cancel a handle's send, wherever it is (queued, batched, in a plugin). */
void cw_h_cancel_send(cw_handle_t *h);
/** A response inside a batch (@p msg, @p len bytes, in a buffer of @p cap
 *  the call takes when it returns true): delivered to the request waiting
 *  for it from that source, or dropped and counted (false). */
bool cw_rpc_batch_resp(cw_network_t *net, const struct cw_wire_msg *m,
                       uint8_t *msg, size_t cap, size_t len,
                       cw_na_addr_t *source);
/** Requests waiting for a response, by request id (rpc_client.c). */
void cw_rwait_del(cw_handle_t *h);

/** A CW_MSG_BATCH arrived on @p net (lock held; takes @p source). */
void cw_rpc_recv_batch(cw_network_t *net, struct cw_urecv *u,
                       const struct cw_wire_msg *m, cw_na_addr_t *source);

/* ---- bulk ----------------------------------------------------------------*/

struct cw_bulk {
    cw_context_t *ctx;
    atomic_int refs;
    uint32_t perm;
    uint8_t flags; /**< CW_DF_* of a remote handle */
    size_t total;
    bool remote;
    /* local */
    struct cw_segment *segs;
    size_t nsegs;
    cw_na_mem_t *reg[CW_MAX_NETS];
    /* remote */
    cw_network_t *net;
    cw_na_mem_t *rmem;
    uint8_t ptoken[16];       /**< PROXY: gateway token (core/bulk_proxy.c) */
    uint64_t pexpiry_ns;      /**< PROXY: end of the token's life (our clock) */
    struct nau_list ctx_link; /**< ctx->bulks */
    struct cw_rsess *rsess;   /**< PROXY of an idempotent request: session */
    unsigned rs_idx;          /**< its descriptor index in the request */
    struct nau_list rs_link;  /**< rsess->bulks */
};

/* ---- chunk-level resume (core/bulk_resume.c, docs/bulk-gateway.md) ----- */

#define CW_RS_WIN_BYTES     (4u << 20) /**< bytes per delegation window */
#define CW_RS_NWIN          2          /**< windows outstanding per transfer */
#define CW_RS_MAX_SESS      4096       /**< live resume sessions per context */
#define CW_RS_MAX_SUSPENDED 256        /**< suspended delegations per context */

/** What an idempotent request's transfers need to continue on another
 *  path: its server handle (to take over a RESUME request's return path)
 *  and the proxy handles and delegations made from its descriptors. */
struct cw_rsess {
    cw_context_t *ctx;
    unsigned refs;  /**< handle + bulks + ops (ctx->lock) */
    uint64_t id;    /**< the origin's resume id */
    cw_handle_t *h; /**< the server handle while it lives (no ref) */
    unsigned gen;   /**< RESUME requests attached so far */
    uint8_t *desc;  /**< the last RESUME's descriptor section */
    size_t desc_len;
    struct nau_list bulks; /**< cw_bulk.rs_link */
    struct nau_list ops;   /**< cw_bulk_op.rs_link */
};

/** One delegation window of a resumable transfer. */
struct cw_rs_win {
    struct cw_bulk_op *op;
    cw_handle_t *h;  /**< the CW_BPROXY_RPC request */
    cw_bulk_t *sub;  /**< the local bytes it exposes */
    size_t off, len; /**< within the transfer */
    bool busy, ok;   /**< in flight / answered OK past the prefix */
};

struct cw_bulk_slot {
    cw_bulk_op_t *op;
    cw_na_op_t *naop;
    size_t len;
};

struct cw_bulk_op {
    cw_context_t *ctx;
    enum cw_bulk_dir dir;
    cw_bulk_t *remote, *local;
    cw_network_t *net;
    cw_na_addr_t *peer;
    size_t roff, loff, len, next, chunk;
    unsigned depth, inflight;
    cw_status_t st;
    bool stop;
    cw_bulk_cb_t cb;
    void *arg;
    /** Internal completion (runs under ctx->lock) instead of a queued one. */
    void (*icb)(cw_bulk_op_t *op, cw_status_t st, void *arg);
    struct cw_cqe cqe;
    struct nau_list link;
    struct cw_bulk_slot slots[CW_MAX_DEPTH];
    cw_handle_t *proxy_h;     /**< delegated to a gateway (core/bulk_proxy.c) */
    cw_bulk_t *proxy_sub;     /**< the local bytes the gateway may touch */
    bool proxy_direct;        /**< asked for a grant (CW_BPROXY_DIRECT) */
    bool proxy_canceled;      /**< cw_bulk_cancel seen (ctx->lock) */
    cw_bulk_op_t *direct_op;  /**< granted: the transfer (ctx->lock) */
    cw_bulk_t *direct_remote; /**< granted: the owner's bytes */
    cw_na_addr_t *direct_peer; /**< granted: their owner */
    /* delegated in windows, resumable (core/bulk_resume.c) */
    struct cw_rsess *rsess;
    struct nau_list rs_link;   /**< rsess->ops */
    struct nau_list susp_link; /**< ctx->rs_suspended while suspended */
    struct cw_rs_win win[CW_RS_NWIN];
    cw_addr_t *rs_peer; /**< the gateway the windows go to */
    size_t acked;       /**< contiguous prefix answered OK */
    unsigned gen;       /**< session attach count it issued under */
    uint64_t susp_deadline;
    bool suspended, user_cancel, finished;
};

/* ---- internal entry points (ctx->lock held unless noted; CW_ASSERT_LOCKED
 * says so in their bodies) ------------------------------------------------*/

/** Make sure the timers look again at @p t. */
static inline void cw_ctx_timer_at(cw_context_t *ctx, uint64_t t)
{
    CW_LOCK_ASSERT_HELD(&ctx->lock);
    if (t < ctx->next_deadline)
        ctx->next_deadline = t;
}

void cw_cq_push(cw_context_t *ctx, struct cw_cqe *e);

/** Send a one-header control message (@p hdr) to @p peer on @p net, owned
 *  by the context: nobody waits for it (notice.c). */
cw_status_t cw_notice_send(cw_context_t *ctx, cw_network_t *net,
                           cw_na_addr_t *peer, const struct cw_wire_hdr *hdr);
/** Cancel the notices in flight on @p net (NULL: all). */
void cw_notice_cancel_net(cw_context_t *ctx, cw_network_t *net);
/** Whether a notice is in flight on @p net (NULL: any). */
bool cw_notice_pending(cw_context_t *ctx, const cw_network_t *net);
/** Wake a thread blocked in cw_progress (any lock state). */
void cw_ctx_wake(cw_context_t *ctx);

/** Get the NA registration of a local bulk on @p net (lazily). */
cw_status_t cw_bulk_reg(cw_bulk_t *b, cw_network_t *net, cw_na_mem_t **m_p);
/** Bytes of the descriptor of local bulk @p b on @p net. */
cw_status_t cw_bulk_desc_size(cw_bulk_t *b, cw_network_t *net, size_t *n_p);
/** Write the descriptor; @p p has cw_bulk_desc_size bytes. */
cw_status_t cw_bulk_desc_write(cw_bulk_t *b, cw_network_t *net, uint8_t *p,
                               size_t n);
/** Remote handle from a descriptor received on @p net. */
cw_status_t cw_bulk_from_desc(cw_context_t *ctx, cw_network_t *net,
                              const struct cw_wire_desc *d, cw_bulk_t **b_p);
/** Local bulk over one buffer, lock held. */
cw_status_t cw_bulk_create_locked(cw_context_t *ctx, void *base, size_t len,
                                  uint32_t perm, cw_bulk_t **b_p);
/** cw_bulk_create, lock held. */
cw_status_t cw_bulk_create_segs_locked(cw_context_t *ctx,
                                       const struct cw_segment *segs, size_t n,
                                       uint32_t perm, cw_bulk_t **b_p);
/** A new transfer record (calloc'ed; references on @p remote and
 *  @p local taken); NULL when out of memory. */
cw_bulk_op_t *cw_bulk_op_new(cw_context_t *ctx, enum cw_bulk_dir dir,
                             cw_bulk_t *remote, size_t roff, cw_bulk_t *local,
                             size_t loff, size_t len, cw_bulk_cb_t cb,
                             void *arg);
/** Start a transfer with an internal completion. */
cw_status_t cw_bulk_start(cw_context_t *ctx, enum cw_bulk_dir dir,
                          cw_na_addr_t *peer, cw_bulk_t *remote, size_t roff,
                          cw_bulk_t *local, size_t loff, size_t len,
                          cw_bulk_cb_t cb, void *arg,
                          void (*icb)(cw_bulk_op_t *, cw_status_t, void *),
                          cw_bulk_op_t **op_p);
/** Cancel a transfer, lock held. */
void cw_bulk_op_cancel_locked(cw_bulk_op_t *op);
/** Drop a reference, @p b's context lock held (releases registrations);
 *  without it, cw_bulk_free. */
void cw_bulk_unref(cw_bulk_t *b);

/** Called by the networks for every unexpected message. */
void cw_rpc_recv_unexpected(cw_network_t *net, struct cw_urecv *u, size_t len,
                            cw_na_addr_t *source);
/** Expire deadlines (called from progress). */
void cw_rpc_timers(cw_context_t *ctx, uint64_t now);
/** Cancel everything in flight (context destroy). */
void cw_rpc_cancel_all(cw_context_t *ctx);
/** Free pooled handles. */
void cw_rpc_pool_fini(cw_context_t *ctx);
struct cw_rpc_class *cw_rpc_class_find(cw_context_t *ctx, cw_rpc_id_t id);
void cw_rpc_classes_fini(cw_context_t *ctx);

/** A network of the context by plugin and protocol, or NULL. */
cw_network_t *cw_net_find(cw_context_t *ctx, const char *plugin,
                          const char *protocol);
cw_status_t cw_network_open_locked(cw_context_t *ctx, const char *uri,
                                   uint32_t flags, cw_network_t **net_p);
/** Reference a network (lock held): addresses, server handles' sources and
 *  remote bulk handles on it. */
static inline void cw_net_ref(cw_network_t *net)
{
    CW_LOCK_ASSERT_HELD(&net->ctx->lock);
    net->refs++;
}
/** Drop a network reference (lock held); the last one of a closed network
 *  closes its NA instance and frees it. */
void cw_net_unref_locked(cw_network_t *net);
/** Post again the receive slots whose re-post failed (lock held). */
void cw_net_urecv_retry(cw_context_t *ctx);
/** Cancel what depends on @p net (cw_network_close, lock held). */
void cw_rpc_cancel_net(cw_context_t *ctx, cw_network_t *net);
/** Allocate a request id. */
uint64_t cw_ctx_req_id(cw_context_t *ctx);
/** Next response tag of a network. */
uint32_t cw_net_tag(cw_network_t *net);

/** A fresh handle of @p role from the pool (lock held), one reference. */
struct cw_handle *cw_handle_alloc(cw_context_t *ctx, enum cw_hrole role);
/** Drop a reference with the lock held. */
void cw_handle_unref_locked(cw_handle_t *h);
/** Release what the handle's use holds and clear it, buffers kept (the
 *  role cleared too): the pool's recycle and cw_handle_reset. */
void cw_h_clear_locked(cw_handle_t *h);
/** Decide the final status once (first caller wins): ACTIVE to DECIDED. */
static inline void cw_h_set_final(cw_handle_t *h, cw_status_t st)
{
    if (h->use.state == CW_H_ACTIVE) {
        h->use.final = st;
        cw_h_state_set(h, CW_H_DECIDED);
    }
}
/** Decide a failure and cancel what is outstanding. */
void cw_h_fail(cw_handle_t *h, cw_status_t st);
/** cw_h_check's work once the outcome is decided. */
void cw_h_settle(cw_handle_t *h);
/** Queue the completion once the status is decided and nothing is
 *  outstanding (most calls find the outcome open: nothing to do). */
static inline void cw_h_check(cw_handle_t *h)
{
    if (h->use.state >= CW_H_DECIDED)
        cw_h_settle(h);
}
/** Grow a byte buffer to at least @p need. */
cw_status_t cw_grow(uint8_t **p, size_t *cap, size_t need);
/** Cancel a forward (lock held), telling the next hop. */
void cw_h_cancel_locked(cw_handle_t *h);
/** Queued completion of a forward or respond. */
void cw_h_complete(struct cw_cqe *e);

/** @p st says the peer, or the path to it, failed (not the request):
 *  nothing more can be sent that way, and another path may work. */
static inline bool cw_status_peer_gone(cw_status_t st)
{
    return st == CW_DISCONNECTED || st == CW_UNREACHABLE || st == CW_IO;
}

#define CW_MAX_REFORWARDS 3
/** Whether forward @p h, completed with @p st, is one the core may send
 *  again through another gateway (the cheap part: every completion asks,
 *  no lock held). */
static inline bool cw_h_may_reforward(const cw_handle_t *h, cw_status_t st)
{
    return (h->use.rflags & (CW_HF_IDEMPOTENT | CW_HF_ONE_WAY)) ==
               CW_HF_IDEMPOTENT &&
           h->use.role == CW_H_CLIENT && h->use.relay.in == NULL &&
           cw_status_peer_gone(st) && h->use.cli.reforwards < CW_MAX_REFORWARDS;
}
/** Send @p h again, marked RESUME, through another gateway of its route
 *  (no lock held, from its completion, once cw_h_may_reforward said it
 *  may): true if it went. */
bool cw_h_reforward(cw_handle_t *h, cw_status_t st);
/** CW_OK if the overflowed payload @p m announces is at most the context's
 *  max_payload_size; else count it in rx_dropped, log it (@p what: request
 *  or answer, arrived on @p net) and return CW_OVERFLOW. */
cw_status_t cw_payload_check(cw_context_t *ctx, const struct cw_wire_msg *m,
                             const char *what, const cw_network_t *net);
/** Pull an overflowed payload described by @p m from @p peer into
 *  h->ovf_buf; @p done runs under the lock (h->pending is counted). */
cw_status_t cw_h_pull(cw_handle_t *h, const struct cw_wire_msg *m,
                      cw_na_addr_t *peer,
                      void (*done)(cw_bulk_op_t *, cw_status_t, void *));
/**
 * Assemble an outgoing message for @p h on h->net: header @p hdr (type,
 * ids, status, flags filled in by the caller; lengths and overflow filled
 * here), routing destination, descriptor section (@p raw_desc, or the bulk
 * handles of @p w when NULL), then the payload of @p w or, past @p limit,
 * an overflow descriptor exposing it (h->ovf_local).
 */
cw_status_t cw_msg_build(cw_handle_t *h, cw_buf_t *w, size_t limit,
                         const char *route, const uint8_t *raw_desc,
                         size_t raw_len, unsigned raw_n,
                         struct cw_wire_hdr *hdr, uint8_t **msg_p,
                         size_t *len_p);
/** Answer a request (lock held). */
cw_status_t cw_respond_locked(cw_handle_t *h, cw_status_t status,
                              cw_respond_cb_t cb, void *arg);
/** Answer on the core's behalf and drop the owner reference. */
void cw_respond_internal(cw_handle_t *h, cw_status_t status);
/** Hand a request to its handler or the relay hook (lock held). */
void cw_rpc_dispatch(cw_handle_t *h);
/** Forward paths (lock held). */
cw_status_t cw_forward_net(cw_handle_t *h);
cw_status_t cw_forward_self(cw_handle_t *h);
/** Guards the relay links use.relay.in/out (and the incoming handle's
 *  canceled mark) between handles of two contexts; a leaf lock, taken with
 *  at most one context lock held. */
extern pthread_mutex_t cw_relay_link_lock;
/** Unlink a cross-context relay pair from either side (handle's own
 *  context lock held). */
void cw_relay_unlink_xctx(cw_handle_t *h);
/** The caller of incoming handle @p in canceled (its context's lock held):
 *  cancel its outgoing handle in another context, from cw_trigger. */
void cw_relay_cancel_xctx(cw_handle_t *in);
/** True if the incoming handle of cross-context outgoing @p out was
 *  canceled (@p out's context lock held). */
bool cw_relay_in_canceled_xctx(cw_handle_t *out);
/** Set server handle @p in's canceled mark (its context's lock held),
 *  under the link lock while an outgoing handle of another context may
 *  read it (cw_relay_in_canceled_xctx). */
void cw_h_set_canceled(cw_handle_t *in, bool canceled);

/** Release an address reference with the lock held. */
void cw_addr_unref_locked(cw_addr_t *addr);
/** cw_addr_dup with @p addr's context lock held. */
cw_status_t cw_addr_dup_locked(cw_addr_t *addr, cw_addr_t **addr_p);
/** cw_handle_create and cw_forward with the lock held. */
cw_status_t cw_handle_create_locked(cw_context_t *ctx, cw_addr_t *dest,
                                    cw_rpc_id_t id, cw_handle_t **h_p);
cw_status_t cw_forward_locked(cw_handle_t *h, uint64_t timeout_ms,
                              cw_forward_cb_t cb, void *arg);
/** Another gateway than @p addr's for the plain address it was looked up
 *  with, from the resolver (no lock held).  CW_NOENT if none. */
cw_status_t cw_addr_reroute(cw_addr_t *addr, cw_addr_t **addr_p);
/** Drop the context's resolver (context destroy, no lock held). */
void cw_resolver_fini(cw_context_t *ctx);

/* ---- spread addresses (core/spread.c), lock held ------------------------ */

/** Server: the member to name in an answer to a CW_HF_PIN_ASK request on
 *  @p net, or NULL when @p net is not a spread address's published one. */
const char *cw_spread_pick(cw_network_t *net);
/** Free @p net's member list (network freed). */
void cw_spread_free(cw_network_t *net);
/** Client, first thing of a send on the network: choose h->peer, mark
 *  @p flags with CW_HF_PIN_ASK when it asks.  True when @p h must wait
 *  (queued on its pin, counted pending): the caller sends nothing now. */
bool cw_pin_route(cw_handle_t *h, uint16_t *flags);
/** Client: the answer to @p h named member @p uri (@p len bytes). */
void cw_pin_answer(cw_handle_t *h, const char *uri, size_t len);
/** Client: forward @p h, counted on its pin's published address or the
 *  first to its member (h->pin_home, h->pin_warm), is over. */
void cw_pin_gate_done(cw_handle_t *h);
/** Client: the send of @p h, its pin's asking request or first request to
 *  the member, is over (whatever its status): those behind it may go. */
void cw_pin_sent(cw_handle_t *h);
/** Client: take held forward @p h off its pin (it failed while waiting). */
void cw_pin_unhold(cw_handle_t *h);
/** Client: forward @p h is over; if it went to its pin's member and the
 *  member is gone, forget the member (h->pin set, lock held). */
void cw_pin_check_member(cw_handle_t *h);
/** Free @p net's pins (network freed). */
void cw_pins_free(cw_network_t *net);

/* ---- chunk-level resume (core/bulk_resume.c), lock held ---------------- */

/** Open the resume session of server handle @p h, dispatched to its
 *  handler, when the request is idempotent (and the table has room). */
void cw_rs_open(cw_handle_t *h);
/** The descriptor section bulk handles of server handle @p h are decoded
 *  from: the request's, or that of the last RESUME attached to it. */
const uint8_t *cw_rs_desc(cw_handle_t *h, const cw_buf_t *in, size_t *len_p);
/** Proxy bulk @p b was decoded from descriptor @p idx of server handle
 *  @p h: join the resume session of @p h when it is idempotent. */
void cw_rs_bulk_join(cw_handle_t *h, cw_bulk_t *b, unsigned idx);
/** A bulk handle is freed: leave its session. */
void cw_rs_bulk_leave(cw_bulk_t *b);
/** A server handle is recycled: its session can no longer be resumed. */
void cw_rs_handle_leave(cw_handle_t *h);
/** A RESUME request @p m arrived from @p source on @p net: attach it to
 *  the unanswered request it resumes.  True if attached (@p source is
 *  taken over); false to handle it as a new request. */
bool cw_rs_attach(cw_network_t *net, const struct cw_wire_msg *m,
                  cw_na_addr_t *source, uint64_t deadline_ns);
/** Complete suspended delegations past their deadline; lowers
 *  @p soonest_p to the next one. */
void cw_rs_timers(cw_context_t *ctx, uint64_t now, uint64_t *soonest_p);
/** Complete suspended delegations on @p net (NULL: all) as cancelled. */
void cw_rs_cancel_net(cw_context_t *ctx, cw_network_t *net);

/** cw_progress's spin before its next block, in ns, after a wait that
 *  blocked and that a completion ended @p waited ns in (UINT64_MAX: none
 *  did): 50 us, or a quarter longer than a wait of at most 1 ms, at most
 *  1 ms (core/progress.c). */
uint64_t cw_progress_next_spin(uint64_t waited);

#endif /* CW_RPC_PRIV_H */
