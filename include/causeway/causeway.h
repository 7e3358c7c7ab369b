/*
 * Causeway RPC and bulk API.
 *
 * Model (Mercury's, familiar to Mochi users): a context owns one or more
 * networks (plugin instances), the registered RPCs and a completion queue.
 * Nothing happens behind the caller's back: cw_progress() moves the
 * networks, cw_trigger() runs completed callbacks.  Every forward, respond
 * and bulk transfer completes exactly once (CW_OK, an error, CW_TIMEOUT or
 * CW_CANCELED) and releases what it held.
 *
 * Arguments are written and read with the cw_buf_* helpers.  Bulk handles
 * put into arguments go to the message's descriptor section (design §3), so
 * a gateway can forward the payload as opaque bytes.
 *
 * Threading: a context may be used from several threads; callbacks run in
 * the thread that calls cw_trigger().
 */
#ifndef CAUSEWAY_CAUSEWAY_H
#define CAUSEWAY_CAUSEWAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <causeway/addr.h>
#include <causeway/log.h>
#include <causeway/status.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CW_VERSION_MAJOR 0
#define CW_VERSION_MINOR 1
#define CW_VERSION_PATCH 0

typedef struct cw_context cw_context_t; /**< RPC context */
typedef struct cw_network cw_network_t; /**< one open network */
typedef struct cw_addr cw_addr_t;       /**< resolved destination */
typedef struct cw_handle cw_handle_t;   /**< one RPC (either side) */
typedef struct cw_bulk cw_bulk_t;       /**< bulk memory handle */
typedef struct cw_bulk_op cw_bulk_op_t; /**< one bulk transfer */
typedef struct cw_buf cw_buf_t;         /**< argument encoder/decoder */
typedef uint64_t cw_rpc_id_t;           /**< 64-bit hash of the RPC name */

/* ------------------------------------------------------------------------ */
/* Context and networks                                                     */

/** Context flags. */
#define CW_CTX_BUSY 0x1u /**< busy-poll: never block in the kernel */
/** Coalesce: requests forwarded and responses given from callbacks of one
 *  cw_trigger call (or inside cw_context_batch_begin/_end) to the same peer
 *  leave as one message when the call returns, on plugins where a message
 *  costs a system call (a gateway's many requests to one next hop;
 *  docs/wire.md, "Batches").  Without the flag a context still answers in
 *  kind: responses given in one such pass to requests that arrived in a
 *  batch leave as one message. */
#define CW_CTX_COALESCE 0x2u

struct cw_context_opts {
    uint32_t flags;              /**< CW_CTX_* */
    unsigned unexpected_bufs;    /**< pre-posted receives per network
                                      (0 = default 64) */
    uint64_t default_timeout_ms; /**< for RPC classes without one
                                      (0 = 30000) */
    /** Default gateway for addresses no open network can reach
     *  (NULL = $CAUSEWAY_GATEWAY if set).  Client routes, which choose a
     *  gateway by destination, are a resolver (cw_context_set_resolver;
     *  cw_client_routes_load in <causeway/routing.h>). */
    const char *default_gateway;
    size_t bulk_chunk;   /**< bulk split size (0 = 1 MiB) */
    unsigned bulk_depth; /**< chunks in flight per transfer (0 = 4,
                              at most 16) */
    unsigned max_hops;   /**< hop limit (TTL) of forwarded requests
                              (0 = 8) */
    /** Largest RPC payload taken from a peer, in bytes (0 = 64 MiB): a
     *  request's arguments on a server, an answer on a client.  An
     *  overflowed one announcing more is refused before anything is
     *  allocated for it: the forward completes with CW_OVERFLOW (the
     *  caller's, for a request) and rx_dropped counts it. */
    size_t max_payload_size;
};

/** Fill @p opts with defaults. */
CW_PUBLIC void cw_context_opts_init(struct cw_context_opts *opts);

/**
 * Create a context.  Calls cw_plugins_load(NULL) if no plugin is loaded.
 * @param[in] opts  NULL for defaults.
 * @return CW_OK or an error: CW_INVALID_ARG for a NULL @p ctx_p or a
 *         flag that is not a CW_CTX_* one; CW_CONFIG for a default gateway
 *         that is not a plain address; CW_NOMEM; CW_IO when a system call
 *         the context needs fails otherwise (no file descriptor left for
 *         its epoll instance or eventfd, no random bytes for its ids).
 */
CW_PUBLIC cw_status_t cw_context_create(const struct cw_context_opts *opts,
                                        cw_context_t **ctx_p);

/**
 * Destroy a context: cancels what is in flight, runs the remaining
 * callbacks with CW_CANCELED, closes the networks.  Accepts NULL.
 * Release every handle, address and bulk handle of the context first.
 */
CW_PUBLIC void cw_context_destroy(cw_context_t *ctx);

/** Network flags. */
#define CW_NET_LISTEN 0x1u /**< accept RPCs from others */
/** Let the plugin run large transfers on a thread of its own
 *  (CW_NA_ASYNC_RMA; na-shm does from 256 KiB): for a process that moves
 *  data between networks, like a gateway. */
#define CW_NET_ASYNC_RMA 0x2u

/** Eager limit of the network a destination is reached through: the
 *  largest message (header included) sent without overflow, 0 for self. */
CW_PUBLIC size_t cw_addr_eager_limit(const cw_addr_t *addr);

/** Size of the fixed RPC header (for computing payloads at the eager
 *  edge). */
CW_PUBLIC size_t cw_rpc_header_size(void);

/**
 * Open a network ("shm://demo", "ofi+tcp://127.0.0.1:0").  Port 0 / empty
 * location lets the plugin choose; cw_network_self tells what it chose.
 * Clients need not call this: cw_addr_lookup opens a client network for a
 * plugin+protocol that has none.
 */
CW_PUBLIC cw_status_t cw_network_open(cw_context_t *ctx, const char *uri,
                                      uint32_t flags, cw_network_t **net_p);

/**
 * Close one network of a context; the others keep working.
 *
 * Everything in flight on it completes exactly once with CW_CANCELED:
 * forwards sent through it, bulk transfers over it, responds still waiting
 * for the caller's acknowledgement; requests that came in on it and are not
 * answered yet see cw_handle_canceled() and their cw_respond completes
 * CW_CANCELED without sending; responses already handed to the plugin are
 * cancelled (one the plugin cannot withdraw finishes) and the close waits
 * for their completions.  Messages still arriving are
 * dropped, the pre-posted receive buffers released, the wait fd leaves the
 * context's epoll set and the network is no longer used by cw_progress or
 * chosen by cw_addr_lookup.  Callbacks run from cw_trigger as usual.
 *
 * Addresses, server handles and remote bulk handles obtained through it
 * stay valid to release; using them fails with CW_DISCONNECTED
 * (cw_handle_create, cw_forward, cw_bulk_transfer, cw_network_self).  They
 * keep a reference: the plugin instance (and its endpoint, e.g. a
 * listening port) is closed and @p net freed when the last of them is
 * released, at once if there is none.  @p net must not be used after this
 * call.  Thread-safe (takes the context's lock), also from a callback run
 * by cw_trigger; it drives the plugin until the cancelled operations have
 * come back (at most 2 s, then it warns and detaches the network anyway).
 * @return CW_OK, or CW_INVALID_ARG for NULL, a network already closed or a
 *         context being destroyed.
 */
CW_PUBLIC cw_status_t cw_network_close(cw_network_t *net);

/**
 * Open one published address served by @p n contexts, each driven by its
 * own thread (docs/api.md, "Serving on several threads").
 *
 * @p uri is opened on @p ctxs[0] as cw_network_open would; each other
 * context gets an endpoint of the same plugin and protocol of its own (the
 * same host with a port the system chooses, or a name the plugin chooses).
 * Callers address only the published one: the first request a caller's
 * context sends there is answered with the member it is to use, round
 * robin over the @p n contexts, and that context sends everything for the
 * address to that member from then on, keeping its requests in order
 * across the move.  Each caller therefore stays on one context, and a
 * handler runs on the context that received its request and answers
 * there.  Register the same RPCs in every context.
 *
 * @param[in]  ctxs    @p n distinct contexts
 * @param[in]  n       at least 1 (1 is cw_network_open)
 * @param[in]  uri     the published address
 * @param[in]  flags   must include CW_NET_LISTEN
 * @param[out] nets_p  @p n networks, [i] in @p ctxs[i]; close each with
 *                     cw_network_close (the published one, [0], first)
 * @return CW_OK, CW_INVALID_ARG (NULL, n = 0, repeated contexts, no
 *         CW_NET_LISTEN) or what opening a network returns; on failure
 *         nothing stays open.
 */
CW_PUBLIC cw_status_t cw_network_open_spread(cw_context_t *const *ctxs,
                                             unsigned n, const char *uri,
                                             uint32_t flags,
                                             cw_network_t **nets_p);

/** Counters of a context (cw_context_stats). */
struct cw_context_stats {
    uint64_t rx_requests;  /**< requests received from networks */
    uint64_t rx_responses; /**< responses received */
    uint64_t rx_dropped;   /**< malformed or unmatched messages dropped */
    uint64_t tx_requests;  /**< requests sent on a network */
    uint64_t tx_responses; /**< responses sent on a network */
    uint64_t na_ops;       /**< network operations posted (any kind) */
    uint64_t self_rpcs;    /**< RPCs to self (no network) */
    uint64_t no_rpc;       /**< requests for an unregistered RPC */
    uint64_t timeouts;     /**< forwards that hit their deadline */
    uint64_t overflows;    /**< messages that overflowed into bulk */
    uint64_t bulk_bytes;   /**< bytes moved by bulk transfers */
    uint64_t resumed;      /**< RESUME requests attached to a request in
                                progress (its handler did not run again) */
    uint64_t suspended;    /**< delegated transfers suspended after their
                                gateway failed */
    uint64_t resume_bytes; /**< bytes delegated again after a resume */
    uint64_t reforwarded;  /**< idempotent forwards sent again through
                                another gateway of the client routes */
    uint64_t unanswered;   /**< gauge: requests received and not answered
                                yet (handler or forward running, or their
                                overflowed arguments still being pulled) */
    uint64_t uncollected;  /**< gauge: answers whose overflowed payload
                                the caller has not pulled yet (its memory
                                is still exposed to it) */
    uint64_t na_dropped;   /**< messages the plugins of the context's open
                                networks dropped before the RPC layer saw
                                them (cw_na_dropped) */
    uint64_t tx_batches;   /**< batches sent (CW_CTX_COALESCE) */
    uint64_t tx_batched;   /**< messages that left inside them */
    uint64_t rx_batches;   /**< batches received */
    uint64_t pins_given;   /**< answers that told a caller which member of
                                a spread address to use
                                (cw_network_open_spread) */
    uint64_t pins_taken;   /**< peers this context moved to the member a
                                spread address named */
    uint64_t pin_held;     /**< forwards that waited for the requests
                                still at a spread address's published
                                endpoint before going to the member */
};

/** Copy the counters of @p ctx into @p stats_p. */
CW_PUBLIC cw_status_t cw_context_stats(cw_context_t *ctx,
                                       struct cw_context_stats *stats_p);

/** Address of a network (for printing or handing to peers). */
CW_PUBLIC cw_status_t cw_network_self(cw_network_t *net, cw_addr_t **addr_p);

/** Full URI of a network's own address into @p buf. */
CW_PUBLIC cw_status_t cw_network_uri(cw_network_t *net, char *buf, size_t len);

/* ------------------------------------------------------------------------ */
/* Addresses                                                                */

/**
 * Resolve any address form: plain, "target@gw[@gw...]", "svc:name@gw".
 * A plain address goes through the gateway the context's resolver names
 * (cw_context_set_resolver), if any; failing that, if no open network can
 * reach it, through the default gateway if one is configured.
 */
CW_PUBLIC cw_status_t cw_addr_lookup(cw_context_t *ctx, const char *addr,
                                     cw_addr_t **addr_p);

/**
 * A resolver: how a plain address (neither "target@gw" nor a service) is
 * reached.  cw_addr_lookup asks it about every plain address it is given;
 * the client routes of libcauseway-routes (cw_client_routes_load) are one.
 * It is called with no lock of the context held, possibly from several
 * threads at once, and must not call cw_addr_lookup on the same context.
 * @param[in]  arg          as given to cw_context_set_resolver.
 * @param[in]  dest         the plain address.
 * @param[out] gateway      when *@p direct_p is false: the address of the
 *                          gateway to send it through, NUL-terminated.
 * @param[in]  gateway_len  bytes at @p gateway (CW_URI_MAX).
 * @param[out] direct_p     true: look @p dest up as it is (the default
 *                          gateway still applies if it cannot be reached);
 *                          false: as "<dest>@<gateway>".
 * @return CW_OK; any other status fails the lookup with that status.
 */
typedef cw_status_t (*cw_resolver_t)(void *arg, const char *dest, char *gateway,
                                     size_t gateway_len, bool *direct_p);

/**
 * Make @p fn the resolver of @p ctx (NULL: none), replacing any earlier
 * one.  Lookups already running finish with the resolver they started
 * with.  @p release (may be NULL) is called with @p arg once the context
 * no longer uses @p fn: when it has been replaced and the last lookup
 * running it has returned (on that lookup's thread), or at
 * cw_context_destroy.
 * @return CW_OK; CW_INVALID_ARG for a NULL @p ctx; CW_NOMEM.  On failure
 *         nothing changes and @p release is not called.
 */
CW_PUBLIC cw_status_t cw_context_set_resolver(cw_context_t *ctx,
                                              cw_resolver_t fn,
                                              void (*release)(void *arg),
                                              void *arg);
/** New reference. */
CW_PUBLIC cw_status_t cw_addr_dup(cw_addr_t *addr, cw_addr_t **addr_p);
/** Release; accepts NULL. */
CW_PUBLIC void cw_addr_free(cw_addr_t *addr);
/**
 * Whether @p a and @p b name the same peer the same way: one context and
 * network, the same routing destination (or none), and addresses the
 * network's plugin holds equal (two lookups of one peer, or a request's
 * source and a copy of it).  Cheaper than comparing strings: a server
 * that keeps state per caller can remember a caller's address (cw_addr_dup)
 * and find it again this way.  False when either is NULL.
 */
CW_PUBLIC bool cw_addr_cmp(const cw_addr_t *a, const cw_addr_t *b);
/** Address string as it would be given to cw_addr_lookup. */
CW_PUBLIC cw_status_t cw_addr_to_string(const cw_addr_t *addr, char *buf,
                                        size_t len);
/**
 * The address as its network's plugin writes it, whatever string it was
 * looked up with (a host name resolved: "ofi+tcp://localhost:7000" gives
 * "ofi+tcp://127.0.0.1:7000"), so that two addresses of one peer on one
 * network give the same string; a request's source is written this way.
 * CW_INVALID_ARG for a proxy address ("target@gw"), which is not one peer.
 */
CW_PUBLIC cw_status_t cw_addr_to_canonical(const cw_addr_t *addr, char *buf,
                                           size_t len);
/** True if @p addr is one of this context's own networks (RPCs to it never
 *  touch the network). */
CW_PUBLIC bool cw_addr_is_self(const cw_addr_t *addr);
/** The network @p addr is reached on (for a request's source: the network
 *  it arrived on), or NULL for a self address or NULL. */
CW_PUBLIC cw_network_t *cw_addr_network(const cw_addr_t *addr);

/* ------------------------------------------------------------------------ */
/* RPC registration                                                         */

/** Server-side handler: runs from cw_trigger(); must eventually call
 *  cw_respond (unless the RPC is one-way) and cw_handle_release. */
typedef void (*cw_rpc_handler_t)(cw_handle_t *h, void *arg);

struct cw_rpc_opts {
    uint64_t timeout_ms; /**< default deadline of forwards (0 = context) */
    bool one_way;        /**< no response expected */
};

/** The 64-bit id of an RPC name (stable across builds and hosts). */
CW_PUBLIC cw_rpc_id_t cw_rpc_id(const char *name);

/**
 * Register an RPC by name.  @p handler may be NULL on a client.
 * @return CW_OK, CW_EXIST (same name again), or CW_EXIST when another name
 *         hashes to the same id (the log names both).
 */
CW_PUBLIC cw_status_t cw_rpc_register(cw_context_t *ctx, const char *name,
                                      cw_rpc_handler_t handler, void *arg,
                                      const struct cw_rpc_opts *opts,
                                      cw_rpc_id_t *id_p);

/** Remove a registration. */
CW_PUBLIC cw_status_t cw_rpc_deregister(cw_context_t *ctx, cw_rpc_id_t id);

/* ------------------------------------------------------------------------ */
/* RPC handles                                                              */

/** Create a handle to call RPC @p id at @p dest. */
CW_PUBLIC cw_status_t cw_handle_create(cw_context_t *ctx, cw_addr_t *dest,
                                       cw_rpc_id_t id, cw_handle_t **h_p);

/**
 * Client: make @p h a new call of RPC @p id to @p dest (NULL: the same
 * target as before), as cw_handle_create would, but keeping the handle and
 * its buffers (Mercury's HG_Reset): the input is emptied, the output and
 * what cw_handle_set_idempotent set are dropped.  For a handle whose
 * forward has ended (its callback may be running) or never started.
 * @return CW_OK; CW_INVALID_ARG for a server handle, a @p dest of another
 *         context or a request a gateway relays; CW_BUSY while a forward
 *         is in flight; CW_DISCONNECTED if the target's network is closed.
 *         On failure the handle is unchanged.
 */
CW_PUBLIC cw_status_t cw_handle_reset(cw_handle_t *h, cw_addr_t *dest,
                                      cw_rpc_id_t id);

/** Drop a reference; the handle is freed when the last one goes.  A handle
 *  with a forward in flight stays alive until its callback has run. */
CW_PUBLIC void cw_handle_release(cw_handle_t *h);
/** Take a reference. */
CW_PUBLIC void cw_handle_ref(cw_handle_t *h);

/** Client: encoder for the request.  Server: decoder of the request. */
CW_PUBLIC cw_buf_t *cw_handle_input(cw_handle_t *h);
/** Server: encoder for the response.  Client (after completion): decoder
 *  of the response. */
CW_PUBLIC cw_buf_t *cw_handle_output(cw_handle_t *h);

/** Server: who sent the request (the peer for bulk transfers). */
CW_PUBLIC cw_addr_t *cw_handle_source(cw_handle_t *h);
/** Context of a handle. */
CW_PUBLIC cw_context_t *cw_handle_context(cw_handle_t *h);
/** RPC id of a handle. */
CW_PUBLIC cw_rpc_id_t cw_handle_rpc_id(cw_handle_t *h);
/** Server: time left before the caller's deadline, in ms (0 if past). */
CW_PUBLIC uint64_t cw_handle_remaining_ms(cw_handle_t *h);
/** Server: true once the caller has cancelled the request (cw_cancel at the
 *  origin propagates hop by hop) or its deadline has passed.  A handler may
 *  stop early; it must still respond (nothing is sent then) and release. */
CW_PUBLIC bool cw_handle_canceled(cw_handle_t *h);

/**
 * Client: mark the request idempotent (before cw_forward; not for one-way
 * RPCs) or not.  Running an idempotent request twice has the effect of
 * running it once, so when a gateway on its path fails mid-transfer, a
 * gateway before it may re-forward the request through another gateway
 * and the target continues the request's bulk transfers from the last
 * chunk acknowledged instead of failing (docs/bulk-gateway.md, "Resume").
 * Marking it picks a new random resume id (getrandom).
 * @return CW_OK; CW_INVALID_ARG for a server handle, a one-way RPC or a
 *         forward in flight; CW_IO if no random id could be had.
 */
CW_PUBLIC cw_status_t cw_handle_set_idempotent(cw_handle_t *h, bool on);

/** True if the request is marked idempotent (client or server side). */
CW_PUBLIC bool cw_handle_idempotent(cw_handle_t *h);

/** Completion of a forward: @p status is CW_OK when a response arrived and
 *  its output is decodable, else the failure (transport error, CW_TIMEOUT,
 *  CW_CANCELED, or the status the remote side responded with). */
typedef void (*cw_forward_cb_t)(cw_handle_t *h, cw_status_t status, void *arg);

/**
 * Send the request.  @p timeout_ms 0 takes the RPC's default.  Arguments
 * larger than the network's eager limit are moved by bulk automatically.
 * @return CW_OK; CW_BUSY while the handle's previous forward is running,
 *         or still lends its memory to the peer after failing (overflowed
 *         arguments the server may be reading, an answer a plugin is still
 *         pulling into it: docs/wire.md, "Overflow"); the handle becomes
 *         free through progress.
 */
CW_PUBLIC cw_status_t cw_forward(cw_handle_t *h, uint64_t timeout_ms,
                                 cw_forward_cb_t cb, void *arg);

/** Completion of a respond (the response has left or failed). */
typedef void (*cw_respond_cb_t)(cw_handle_t *h, cw_status_t status, void *arg);

/**
 * Answer a request with @p status and the output encoded so far.  A
 * non-OK status reaches the caller's forward callback as its status.
 * @p cb may be NULL.
 */
CW_PUBLIC cw_status_t cw_respond(cw_handle_t *h, cw_status_t status,
                                 cw_respond_cb_t cb, void *arg);

/** Cancel a forward in flight: its callback runs once with CW_CANCELED
 *  (or its real status if it had already completed). */
CW_PUBLIC cw_status_t cw_cancel(cw_handle_t *h);

/* ------------------------------------------------------------------------ */
/* Progress                                                                 */

/**
 * Move every network of the context.  Polls; if nothing completed and
 * @p timeout_ms > 0, spins briefly and then blocks on the networks' wait fds
 * (never longer than a bounded slice before polling again).  The spin is
 * 50 us, or, after a wait that a completion ended 50 us-1 ms in (it had
 * slept), a quarter longer than that wait, at most 1 ms: an answer that
 * keeps coming that late is then caught without a wake-up.
 * @return CW_OK if something completed, CW_TIMEOUT if not.
 */
CW_PUBLIC cw_status_t cw_progress(cw_context_t *ctx, unsigned timeout_ms);

/**
 * Make the cw_progress() call running on @p ctx (or, if none is, the next
 * one) return CW_OK at once instead of spinning or blocking, so that the
 * thread driving the context can look at work handed to it from other
 * threads.  Cheap when nobody sleeps (no system call); thread-safe.
 * @return CW_OK, or CW_INVALID_ARG for NULL.
 */
CW_PUBLIC cw_status_t cw_context_interrupt(cw_context_t *ctx);

/**
 * Open a batch scope on this thread: until the matching
 * cw_context_batch_end(), requests forwarded and responses given on @p ctx
 * by this thread are coalesced as if they came from callbacks of one
 * cw_trigger() call (CW_CTX_COALESCE; without the flag the scope changes
 * nothing).  For a thread that sends from outside cw_trigger(), e.g. work
 * handed over by another thread.  Scopes nest: one opened inside a scope
 * of the same context (or inside a cw_trigger() pass on it) sends nothing
 * when it closes, the outer one sends what both queued; one nested in
 * another context's flushes at its end.  Do not wait for a message sent inside
 * an open scope.
 * @return a token for cw_context_batch_end() (NULL for a NULL @p ctx).
 */
CW_PUBLIC void *cw_context_batch_begin(cw_context_t *ctx);

/**
 * Close the scope cw_context_batch_begin() opened, which returned @p token:
 * the messages it queued leave now, those to one peer as one message
 * (unless it was nested in a scope of the same context: then when that
 * one closes).
 */
CW_PUBLIC void cw_context_batch_end(cw_context_t *ctx, void *token);

/**
 * Also end a blocking cw_progress() on @p ctx when @p fd, a descriptor of
 * the application's (a listening socket, a signalfd), becomes readable:
 * cw_progress() then returns CW_OK and the caller reads @p fd.  Level-
 * triggered: a readable fd nobody reads keeps cw_progress() from sleeping.
 * At most 8 per context; remove with cw_context_unwatch_fd() before
 * closing @p fd.  Thread-safe.
 * @return CW_OK; CW_INVALID_ARG for NULL or a negative or unusable fd;
 *         CW_EXIST if @p fd is already watched; CW_BUSY if 8 are.
 */
CW_PUBLIC cw_status_t cw_context_watch_fd(cw_context_t *ctx, int fd);

/**
 * Stop watching @p fd (cw_context_watch_fd).
 * @return CW_OK, CW_INVALID_ARG for NULL or a negative fd, CW_NOENT if
 *         @p fd is not watched.
 */
CW_PUBLIC cw_status_t cw_context_unwatch_fd(cw_context_t *ctx, int fd);

/**
 * Run up to @p max completed callbacks (0 = all ready), waiting up to
 * @p timeout_ms for the first.  @return CW_OK if any ran, else CW_TIMEOUT.
 */
CW_PUBLIC cw_status_t cw_trigger(cw_context_t *ctx, unsigned timeout_ms,
                                 unsigned max, unsigned *count_p);

/* ------------------------------------------------------------------------ */
/* Argument encoding (checked: every read is bounds-checked; errors stick) */
/*
 * Encoders append, decoders consume in the same order (docs/wire.md gives
 * the byte layout: little-endian integers, u32 length prefixes).  Every
 * call returns CW_OK or the buffer's first error, which sticks: later
 * calls do nothing and return it again, so code may encode or decode a
 * whole message and check cw_buf_error() once.  Errors: CW_INVALID_ARG
 * (NULL buffer, encoding into a decoder or the reverse), CW_NOMEM,
 * CW_RANGE (reading past the end, an index past the descriptor section),
 * CW_PROTOCOL (a string without its NUL), CW_OVERFLOW (more than 64 bulk
 * handles).  Output parameters are written only on success.
 */

/** Append a fixed-size integer (1, 2, 4, 8 bytes). */
CW_PUBLIC cw_status_t cw_buf_put_u8(cw_buf_t *b, uint8_t v);
CW_PUBLIC cw_status_t cw_buf_put_u16(cw_buf_t *b, uint16_t v);
CW_PUBLIC cw_status_t cw_buf_put_u32(cw_buf_t *b, uint32_t v);
CW_PUBLIC cw_status_t cw_buf_put_u64(cw_buf_t *b, uint64_t v);
CW_PUBLIC cw_status_t cw_buf_put_i64(cw_buf_t *b, int64_t v);
/** Length-prefixed byte string. */
CW_PUBLIC cw_status_t cw_buf_put_bytes(cw_buf_t *b, const void *p, size_t len);
/** Length-prefixed string (NULL encodes as absent). */
CW_PUBLIC cw_status_t cw_buf_put_str(cw_buf_t *b, const char *s);
/** Append a bulk handle to the descriptor section; the payload carries its
 *  index.  The handle must outlive the forward/respond. */
CW_PUBLIC cw_status_t cw_buf_put_bulk(cw_buf_t *b, cw_bulk_t *bulk);

/** Read a fixed-size integer; @p v_p may be NULL to skip it. */
CW_PUBLIC cw_status_t cw_buf_get_u8(cw_buf_t *b, uint8_t *v_p);
CW_PUBLIC cw_status_t cw_buf_get_u16(cw_buf_t *b, uint16_t *v_p);
CW_PUBLIC cw_status_t cw_buf_get_u32(cw_buf_t *b, uint32_t *v_p);
CW_PUBLIC cw_status_t cw_buf_get_u64(cw_buf_t *b, uint64_t *v_p);
CW_PUBLIC cw_status_t cw_buf_get_i64(cw_buf_t *b, int64_t *v_p);
/** View into the message (valid while the handle lives). */
CW_PUBLIC cw_status_t cw_buf_get_bytes(cw_buf_t *b, const void **p_p,
                                       size_t *len_p);
/** View of a NUL-terminated string (NULL if it was encoded absent). */
CW_PUBLIC cw_status_t cw_buf_get_str(cw_buf_t *b, const char **s_p);
/** A remote bulk handle from the descriptor section; caller frees it with
 *  cw_bulk_free. */
CW_PUBLIC cw_status_t cw_buf_get_bulk(cw_buf_t *b, cw_bulk_t **bulk_p);

/** First error met by this buffer (CW_OK if none). */
CW_PUBLIC cw_status_t cw_buf_error(const cw_buf_t *b);
/** Bytes written (encoder) or total (decoder). */
CW_PUBLIC size_t cw_buf_len(const cw_buf_t *b);
/** Bytes not yet read. */
CW_PUBLIC size_t cw_buf_remaining(const cw_buf_t *b);

/** Standalone buffers, for tests and tools: a decoder over @p len bytes
 *  (no descriptor section) and a growable encoder.  Free with
 *  cw_buf_destroy. */
CW_PUBLIC cw_status_t cw_buf_create_reader(const void *data, size_t len,
                                           cw_buf_t **b_p);
CW_PUBLIC cw_status_t cw_buf_create_writer(size_t initial, cw_buf_t **b_p);
/** Contents of an encoder. */
CW_PUBLIC const void *cw_buf_data(const cw_buf_t *b);
CW_PUBLIC void cw_buf_destroy(cw_buf_t *b);

/* ------------------------------------------------------------------------ */
/* Bulk                                                                     */

/** Permission a bulk handle grants to the remote side. */
#define CW_BULK_READ_ONLY  0x1u /**< remote may pull from it */
#define CW_BULK_WRITE_ONLY 0x2u /**< remote may push into it */
#define CW_BULK_READ_WRITE 0x3u

/** One piece of local memory. */
struct cw_segment {
    void *base;
    size_t len;
};

/** Describe 1..n segments as one handle (registration happens lazily per
 *  network). */
CW_PUBLIC cw_status_t cw_bulk_create(cw_context_t *ctx,
                                     const struct cw_segment *segs, size_t n,
                                     uint32_t perm, cw_bulk_t **bulk_p);
/** Release; accepts NULL.  A handle with transfers in flight is freed when
 *  they complete. */
CW_PUBLIC void cw_bulk_free(cw_bulk_t *bulk);
/** Total bytes. */
CW_PUBLIC size_t cw_bulk_size(const cw_bulk_t *bulk);
/** Permission flags. */
CW_PUBLIC uint32_t cw_bulk_perm(const cw_bulk_t *bulk);

enum cw_bulk_dir {
    CW_BULK_PULL = 1, /**< remote -> local */
    CW_BULK_PUSH = 2, /**< local -> remote */
};

typedef void (*cw_bulk_cb_t)(cw_status_t status, void *arg);

/**
 * Move @p len bytes between @p remote (a handle received from @p peer) at
 * @p remote_off and @p local at @p local_off.  Large transfers are split in
 * chunks with several in flight.  The remote handle's permission is checked
 * (CW_PERMISSION), so are bounds (CW_RANGE).  @p cb and @p op_p may be
 * NULL; @p peer may not (CW_INVALID_ARG), also for a handle of this
 * process (an RPC to self).
 */
CW_PUBLIC cw_status_t cw_bulk_transfer(cw_context_t *ctx, enum cw_bulk_dir dir,
                                       cw_addr_t *peer, cw_bulk_t *remote,
                                       size_t remote_off, cw_bulk_t *local,
                                       size_t local_off, size_t len,
                                       cw_bulk_cb_t cb, void *arg,
                                       cw_bulk_op_t **op_p);

/** Stop a transfer; its callback runs once with CW_CANCELED (or its real
 *  status if it had already finished).  @p op is valid until its callback
 *  has run; do not cancel it afterwards. */
CW_PUBLIC cw_status_t cw_bulk_cancel(cw_bulk_op_t *op);

#ifdef __cplusplus
}
#endif

#endif /* CAUSEWAY_CAUSEWAY_H */
