/*
 * Causeway network abstraction (NA) plugin ABI.
 *
 * A plugin is a shared module exporting exactly one symbol,
 * CW_NA_PLUGIN_SYMBOL, a const struct cw_na_plugin.  The core loader
 * (cw_plugins_load) checks abi_version, ops_size, the name and that every
 * mandatory op is present before registering it.
 *
 * Threading: calls on one instance (cw_na_class_t) are serialized by the
 * core; a plugin need not lock against concurrent calls on the same
 * instance.  Different instances, of the same plugin or not, may be used
 * from different threads at the same time, so plugin-global state must be
 * protected or avoided.
 *
 * Completions: every posted operation completes exactly once, by a call to
 * its callback, and only from inside ops->progress() (never from inside the
 * call that posted it, so callers may post from callbacks).  The one
 * exception is ops->msg_inject, which posts no operation.  Status CW_OK,
 * an error, or CW_CANCELED after ops->cancel().  After its callback returns
 * the operation handle is invalid and must not be cancelled.
 *
 * Addresses handed to plugins are the part of the URI after "://"
 * ("10.0.0.1:7000" for "ofi+tcp://10.0.0.1:7000"); the protocol part
 * ("tcp") is given once at init.  addr_to_string produces the same form.
 */
#ifndef CAUSEWAY_NA_PLUGIN_H
#define CAUSEWAY_NA_PLUGIN_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#ifndef __cplusplus
#include <stdatomic.h> /* CW_NA_LOG_RL */
#endif

#include <causeway/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Bumped on any incompatible change of this header. */
#define CW_NA_ABI_VERSION 1u

/** Name of the one symbol a plugin exports. */
#define CW_NA_PLUGIN_SYMBOL "cw_na_plugin_entry"

#if defined(__GNUC__)
#define CW_NA_EXPORT __attribute__((visibility("default")))
#else
#define CW_NA_EXPORT
#endif

/* Opaque, plugin-defined objects. */
typedef struct cw_na_class cw_na_class_t; /**< one plugin instance (endpoint) */
typedef struct cw_na_addr cw_na_addr_t;   /**< a peer (or self) address */
typedef struct cw_na_mem cw_na_mem_t;     /**< local or remote memory handle */
typedef struct cw_na_op cw_na_op_t;       /**< a posted operation */

/** Log levels, shared with the core logger. */
enum cw_log_level {
    CW_LOG_NONE = 0,
    CW_LOG_ERROR = 1,
    CW_LOG_WARN = 2,
    CW_LOG_INFO = 3,
    CW_LOG_DEBUG = 4,
    CW_LOG_TRACE = 5,
};

/**
 * Services the host (core) hands to a plugin at init, so that a plugin links
 * only against its network library.
 */
struct cw_na_host {
    uint32_t version; /**< CW_NA_ABI_VERSION */
    /** Current log threshold; read it before formatting a message. */
    const volatile int *log_level;
    /** Log one message (already level-checked by the caller). */
    void (*log)(int level, const char *subsys, const char *file, int line,
                const char *func, const char *fmt, va_list ap);
    /** Monotonic clock in nanoseconds. */
    uint64_t (*now_ns)(void);
};

/** Instance flags given at init. */
#define CW_NA_LISTEN 0x1u /**< accept unexpected messages from anyone */
#define CW_NA_BUSY   0x2u /**< busy-poll: never arm wait objects */
/** Large put/get may be carried out by a thread of the plugin, so that the
 *  caller's thread keeps progressing other networks meanwhile (a gateway
 *  moving chunks between fabrics).  Plugins may ignore it. */
#define CW_NA_ASYNC_RMA 0x4u

/** What the core asks a plugin to create. */
struct cw_na_init_info {
    const char *protocol; /**< "tcp", "shm", ... or "" when the URI has none */
    const char *location; /**< address part to listen on / bind to, may be
                               NULL or "" for "any" (plugin picks) */
    uint32_t flags;       /**< CW_NA_LISTEN | CW_NA_BUSY | CW_NA_ASYNC_RMA */
    /** Optional runtime parameters as NULL-terminated key/value pairs
     *  (params[0]=key, params[1]=value, ...), may be NULL. */
    const char *const *params;
};

/** Instance capabilities (ops->query). */
struct cw_na_caps {
    size_t max_unexpected_size; /**< eager limit, unexpected messages */
    size_t max_expected_size;   /**< eager limit, expected messages */
    uint32_t max_tag;           /**< highest usable tag */
    size_t max_rma_size;        /**< largest single put/get the core should
                                     post (plugin splits beyond its own limit
                                     anyway); 0 = no limit */
    uint32_t max_segments;      /**< most segments in one memory handle */
    uint32_t flags;             /**< CW_NA_CAP_* */
};
#define CW_NA_CAP_RMA       0x1u /**< put/get supported */
#define CW_NA_CAP_WAIT_FD   0x2u /**< get_wait_fd returns a usable fd */
#define CW_NA_CAP_SAME_NODE 0x4u /**< all peers are on this node */
/** Memory handles are not capabilities: any process of the node that can
 *  reach the owner may use a handle (access is the kernel's, e.g.
 *  cross-memory attach), and mem_restrict is implemented.  A gateway may
 *  then hand a peer a restricted handle instead of staging
 *  (docs/bulk-gateway.md, "Zero-staging"). */
#define CW_NA_CAP_NODE_RMA 0x8u
/** Each message sent costs a system call or a doorbell: a coalescing
 *  context (CW_CTX_COALESCE) sends several small ones to the same peer as
 *  one (docs/wire.md, "Batches").  Not set where a message is a copy into
 *  shared memory, which the batch's extra copies would only slow down. */
#define CW_NA_CAP_COALESCE 0x10u

/** Operation kinds reported to callbacks. */
enum cw_na_op_type {
    CW_NA_OP_SEND_UNEXPECTED = 1,
    CW_NA_OP_RECV_UNEXPECTED,
    CW_NA_OP_SEND_EXPECTED,
    CW_NA_OP_RECV_EXPECTED,
    CW_NA_OP_PUT,
    CW_NA_OP_GET,
};

/** What a completion reports. */
struct cw_na_cb_info {
    cw_status_t status;
    enum cw_na_op_type type;
    void *arg; /**< the arg given when posting */
    union {
        struct {
            size_t len;           /**< bytes received */
            cw_na_addr_t *source; /**< sender; a new reference the callback
                                       owns (free with addr_free); NULL on
                                       error */
            uint32_t tag;
        } recv_unexpected;
        struct {
            size_t len; /**< bytes received */
        } recv_expected;
    } u;
};

/** Completion callback; runs inside ops->progress(). */
typedef void (*cw_na_cb_t)(const struct cw_na_cb_info *info);

/** One contiguous piece of local memory. */
struct cw_na_segment {
    void *base;
    size_t len;
};

/** Memory access granted to remote peers. */
#define CW_NA_MEM_READ  0x1u /**< remote peers may get from it */
#define CW_NA_MEM_WRITE 0x2u /**< remote peers may put into it */

/** Keys of the facts ops->describe reports. */
#define CW_NA_DESCRIBE_LIBRARY                                                 \
    "library"                                /**< network library and the      \
                                                  version found at run         \
                                                  time: "libfabric 1.17" */
#define CW_NA_DESCRIBE_PROVIDER  "provider"  /**< a libfabric provider */
#define CW_NA_DESCRIBE_TRANSPORT "transport" /**< a UCX transport */
#define CW_NA_DESCRIBE_DEVICE                                                  \
    "device" /**< a device or domain the                                       \
                  library can use, as                                          \
                  "PROVIDER/NAME" or                                           \
                  "TRANSPORT/NAME" where                                       \
                  one is named */
/** Receives one fact from ops->describe. */
typedef void (*cw_na_describe_cb_t)(void *arg, const char *key,
                                    const char *value);

/**
 * The operations table.  Mandatory ops are marked (M); the loader refuses a
 * plugin missing any of them.  Optional ops may be NULL: the core then
 * answers CW_UNSUPPORTED (or a documented default).
 */
struct cw_na_ops {
    /* ---- lifecycle ---- */
    /** (optional) Whether this plugin can serve @p protocol here (e.g. the
     *  provider exists).  NULL means "any protocol the plugin parses". */
    bool (*check_protocol)(const char *protocol);
    /** (M) Create an instance. */
    cw_status_t (*init)(const struct cw_na_host *host,
                        const struct cw_na_init_info *info,
                        cw_na_class_t **cls_p);
    /** (M) Destroy an instance; pending ops are dropped without callbacks
     *  (the core cancels and drains first).  Accepts half-built objects. */
    void (*finalize)(cw_na_class_t *cls);
    /** (M) Capabilities; never fails for a live instance. */
    void (*query)(cw_na_class_t *cls, struct cw_na_caps *caps);

    /* ---- addresses ---- */
    /** (M) Resolve a location string ("host:port", "name"). */
    cw_status_t (*addr_lookup)(cw_na_class_t *cls, const char *location,
                               cw_na_addr_t **addr_p);
    /** (M) This instance's own address. */
    cw_status_t (*addr_self)(cw_na_class_t *cls, cw_na_addr_t **addr_p);
    /** (M) New reference/copy of @p addr. */
    cw_status_t (*addr_dup)(cw_na_class_t *cls, cw_na_addr_t *addr,
                            cw_na_addr_t **addr_p);
    /** (M) Release; accepts NULL. */
    void (*addr_free)(cw_na_class_t *cls, cw_na_addr_t *addr);
    /** (M) True if both name the same peer. */
    bool (*addr_cmp)(cw_na_class_t *cls, cw_na_addr_t *a, cw_na_addr_t *b);
    /** (M) Write the location string into @p buf (NUL-terminated).
     *  On entry *len_p is the buffer size; on CW_OVERFLOW it is set to the
     *  size needed (including the NUL). */
    cw_status_t (*addr_to_string)(cw_na_class_t *cls, cw_na_addr_t *addr,
                                  char *buf, size_t *len_p);
    /** (M) Bytes addr_serialize will write. */
    size_t (*addr_serialize_size)(cw_na_class_t *cls, cw_na_addr_t *addr);
    /** (M) Write a portable form of @p addr. */
    cw_status_t (*addr_serialize)(cw_na_class_t *cls, void *buf, size_t size,
                                  cw_na_addr_t *addr);
    /** (M) Read it back; input is untrusted. */
    cw_status_t (*addr_deserialize)(cw_na_class_t *cls, const void *buf,
                                    size_t size, cw_na_addr_t **addr_p);

    /* ---- messages ---- */
    /** (M) Send an unexpected message (len <= max_unexpected_size).  @p buf
     *  must stay valid until completion. */
    cw_status_t (*msg_send_unexpected)(cw_na_class_t *cls, const void *buf,
                                       size_t len, cw_na_addr_t *dest,
                                       uint32_t tag, cw_na_cb_t cb, void *arg,
                                       cw_na_op_t **op_p);
    /** (M) Post a buffer for one unexpected message from any source. */
    cw_status_t (*msg_recv_unexpected)(cw_na_class_t *cls, void *buf,
                                       size_t len, cw_na_cb_t cb, void *arg,
                                       cw_na_op_t **op_p);
    /** (M) Send an expected message (len <= max_expected_size). */
    cw_status_t (*msg_send_expected)(cw_na_class_t *cls, const void *buf,
                                     size_t len, cw_na_addr_t *dest,
                                     uint32_t tag, cw_na_cb_t cb, void *arg,
                                     cw_na_op_t **op_p);
    /** (M) Post a receive matched on (@p source, @p tag).  A message longer
     *  than @p len completes the receive with CW_OVERFLOW. */
    cw_status_t (*msg_recv_expected)(cw_na_class_t *cls, void *buf, size_t len,
                                     cw_na_addr_t *source, uint32_t tag,
                                     cw_na_cb_t cb, void *arg,
                                     cw_na_op_t **op_p);

    /* ---- memory and RMA (optional as a group: all or none) ---- */
    /** Register 1..n segments as one handle; offsets in put/get run over
     *  the concatenation of the segments. */
    cw_status_t (*mem_register)(cw_na_class_t *cls,
                                const struct cw_na_segment *segs, size_t n,
                                uint32_t access, cw_na_mem_t **mem_p);
    /** Release a handle from mem_register or mem_deserialize; accepts
     *  NULL. */
    void (*mem_release)(cw_na_class_t *cls, cw_na_mem_t *mem);
    /** Bytes mem_serialize will write. */
    size_t (*mem_serialize_size)(cw_na_class_t *cls, cw_na_mem_t *mem);
    /** Portable form of a local handle, for a peer. */
    cw_status_t (*mem_serialize)(cw_na_class_t *cls, void *buf, size_t size,
                                 cw_na_mem_t *mem);
    /** Remote handle from a peer's serialized form; input is untrusted. */
    cw_status_t (*mem_deserialize)(cw_na_class_t *cls, const void *buf,
                                   size_t size, cw_na_mem_t **mem_p);
    /** Write @p len bytes from local (@p local, @p local_off) to remote
     *  (@p remote, @p remote_off) at @p peer.  Bounds and the remote
     *  handle's access are checked: CW_RANGE / CW_PERMISSION. */
    cw_status_t (*put)(cw_na_class_t *cls, cw_na_mem_t *local, size_t local_off,
                       cw_na_mem_t *remote, size_t remote_off, size_t len,
                       cw_na_addr_t *peer, cw_na_cb_t cb, void *arg,
                       cw_na_op_t **op_p);
    /** Read @p len bytes from remote into local; as put. */
    cw_status_t (*get)(cw_na_class_t *cls, cw_na_mem_t *local, size_t local_off,
                       cw_na_mem_t *remote, size_t remote_off, size_t len,
                       cw_na_addr_t *peer, cw_na_cb_t cb, void *arg,
                       cw_na_op_t **op_p);

    /* ---- progress ---- */
    /** (optional) A file descriptor that becomes readable when progress may
     *  have work, or -1.  Valid for the life of the instance. */
    int (*get_wait_fd)(cw_na_class_t *cls);
    /** (optional) Arm the wait fd and say whether it is safe to block on it
     *  now (no completions pending, nothing to retry).  false means "poll
     *  again soon": the core keeps polling (yielding the CPU) and falls
     *  back to short bounded sleeps only if the instance stays unsafe.
     *  NULL means never safe: the core then uses bounded sleeps only. */
    bool (*safe_to_sleep)(cw_na_class_t *cls);
    /** (M) Non-blocking: make progress and run up to @p max completion
     *  callbacks (0 = no limit).  *count_p (may be NULL) gets how many ran. */
    cw_status_t (*progress)(cw_na_class_t *cls, unsigned max,
                            unsigned *count_p);
    /** (M) Ask a posted operation to stop.  Its callback still runs exactly
     *  once, from a later progress(), with CW_CANCELED or, if it finished
     *  first, its real status. */
    cw_status_t (*cancel)(cw_na_class_t *cls, cw_na_op_t *op);

    /* ---- added later (optional) ---- */
    /** (optional) A new remote handle naming only [@p off, @p off + @p len)
     *  of the remote handle @p mem (from mem_deserialize), with access
     *  @p access, which must be a subset of @p mem's (CW_PERMISSION
     *  otherwise; CW_RANGE if the range does not fit, CW_INVALID_ARG for a
     *  local handle or @p len 0).  The result can be serialized with
     *  mem_serialize and released with mem_release. */
    cw_status_t (*mem_restrict)(cw_na_class_t *cls, cw_na_mem_t *mem,
                                size_t off, size_t len, uint32_t access,
                                cw_na_mem_t **mem_p);
    /** (optional) Incoming messages this instance has dropped since it
     *  opened, without any operation of the user's seeing them: malformed,
     *  unmatched beyond its own bounds, on tags it never posts for. */
    uint64_t (*dropped)(cw_na_class_t *cls);
    /** (optional) True while the instance has data moving that only its
     *  progress calls advance and that may complete none of the caller's
     *  operations for a long while: the far side of a put or get that
     *  another process drives on this memory (UCX's tcp transport), or an
     *  RMA of its own in flight (rxm).  While safe_to_sleep() says no and
     *  this says yes, the core keeps polling (yielding between polls)
     *  instead of falling back to bounded sleeps, which would stall the
     *  transfer for as long as each sleep. */
    bool (*streaming)(cw_na_class_t *cls);
    /** (optional) What the plugin finds on this machine, without opening
     *  an instance (cw-info): calls @p emit for each fact (the same one
     *  may come more than once), @p key one of
     *  CW_NA_DESCRIBE_*, @p value a short NUL-terminated text valid only
     *  during the call.  CW_OK, or the network library's error when it
     *  cannot be asked (the facts emitted until then stand). */
    cw_status_t (*describe)(const struct cw_na_host *host,
                            cw_na_describe_cb_t emit, void *arg);
    /** (optional) Send a message at once, with no operation and no
     *  callback, where the transport can take it now (as libfabric's
     *  fi_inject): CW_OK means it was taken and the send is complete
     *  (@p buf may be reused on return); CW_AGAIN that it cannot be taken
     *  now and nothing was done (post it with msg_send_unexpected or
     *  msg_send_expected instead); another status is the error those would
     *  have given.  It never overtakes an earlier send to @p dest that is
     *  still queued.  @p expected: sent as msg_send_expected sends (matched
     *  by tag at the peer), otherwise as msg_send_unexpected. */
    cw_status_t (*msg_inject)(cw_na_class_t *cls, const void *buf, size_t len,
                              cw_na_addr_t *dest, uint32_t tag, bool expected);
};

/** The one exported object. */
struct cw_na_plugin {
    uint32_t abi_version;    /**< CW_NA_ABI_VERSION */
    uint32_t ops_size;       /**< sizeof(struct cw_na_ops); a core
                                  accepts any size from the first ABI-1
                                  table (ending before mem_restrict) to
                                  its own, ops beyond it seen as NULL */
    const char *name;        /**< URI scheme: "shm", "ofi", "ucx", ... */
    const char *description; /**< one line for cw-info */
    const struct cw_na_ops *ops;
};

/* ------------------------------------------------------------------------ */
/* Helpers for plugin authors (header-only, so plugins stay self-contained) */

/** Log through the host if @p level is enabled; formats nothing otherwise. */
#define CW_NA_LOG(host, level, subsys, ...)                                    \
    do {                                                                       \
        if ((host) && (host)->log_level && *(host)->log_level >= (level))      \
            cw_na_host_log_((host), (level), (subsys), __FILE__, __LINE__,     \
                            __func__, __VA_ARGS__);                            \
    } while (0)

/**
 * CW_NA_LOG at most once a second per call site (any thread), the next
 * printed line of the site preceded by the count of those suppressed; for
 * what a peer can make happen at will: its connections and their failures,
 * malformed or dropped messages, a peer gone.
 */
#define CW_NA_LOG_RL(host, level, subsys, ...)                                 \
    do {                                                                       \
        if ((host) && (host)->log_level && *(host)->log_level >= (level)) {    \
            static _Atomic uint64_t cw_na_rl_next_;                            \
            static _Atomic unsigned cw_na_rl_dropped_;                         \
            uint64_t cw_na_rl_now_ = (host)->now_ns();                         \
            uint64_t cw_na_rl_at_ =                                            \
                atomic_load_explicit(&cw_na_rl_next_, memory_order_relaxed);   \
            if (cw_na_rl_now_ >= cw_na_rl_at_ &&                               \
                atomic_compare_exchange_strong_explicit(                       \
                    &cw_na_rl_next_, &cw_na_rl_at_,                            \
                    cw_na_rl_now_ + 1000000000ull, memory_order_relaxed,       \
                    memory_order_relaxed)) {                                   \
                unsigned cw_na_rl_n_ = atomic_exchange_explicit(               \
                    &cw_na_rl_dropped_, 0, memory_order_relaxed);              \
                if (cw_na_rl_n_)                                               \
                    cw_na_host_log_((host), (level), (subsys), __FILE__,       \
                                    __LINE__, __func__,                        \
                                    "(%u similar messages suppressed)",        \
                                    cw_na_rl_n_);                              \
                cw_na_host_log_((host), (level), (subsys), __FILE__, __LINE__, \
                                __func__, __VA_ARGS__);                        \
            } else {                                                           \
                atomic_fetch_add_explicit(&cw_na_rl_dropped_, 1,               \
                                          memory_order_relaxed);               \
            }                                                                  \
        }                                                                      \
    } while (0)

static inline void
#if defined(__GNUC__)
    __attribute__((format(printf, 7, 8)))
#endif
    cw_na_host_log_(const struct cw_na_host *host, int level,
                    const char *subsys, const char *file, int line,
                    const char *func, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    host->log(level, subsys, file, line, func, fmt, ap);
    va_end(ap);
}

/**
 * Walk a range [off, off+len) of a segment list: for each contiguous piece
 * calls fn(base_of_piece, piece_len, ctx) in order.  Returns CW_RANGE if the
 * range does not fit, or the first non-OK status fn returns.
 */
static inline cw_status_t
cw_na_seg_walk(const struct cw_na_segment *segs, size_t n, size_t off,
               size_t len,
               cw_status_t (*fn)(void *base, size_t piece, size_t seg_index,
                                 size_t seg_off, void *ctx),
               void *ctx)
{
    size_t i = 0;
    size_t total = 0;
    for (size_t k = 0; k < n; k++) {
        if (segs[k].len > SIZE_MAX - total)
            return CW_RANGE;
        total += segs[k].len;
    }
    if (off > total || len > total - off)
        return CW_RANGE;
    while (i < n && off >= segs[i].len) {
        off -= segs[i].len;
        i++;
    }
    while (len > 0 && i < n) {
        size_t piece = segs[i].len - off;
        if (piece > len)
            piece = len;
        if (piece > 0) {
            cw_status_t st = fn((char *)segs[i].base + off, piece, i, off, ctx);
            if (st != CW_OK)
                return st;
        }
        len -= piece;
        off = 0;
        i++;
    }
    return CW_OK;
}

#ifdef __cplusplus
}
#endif

#endif /* CAUSEWAY_NA_PLUGIN_H */
