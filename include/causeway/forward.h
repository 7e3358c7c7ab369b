/*
 * Causeway relay API: a gateway passes RPCs on without decoding their
 * payloads.  (A client's send is a forward, cw_forward(); what a gateway
 * does with a request for someone else is a relay, cw_relay_*.)
 *
 * A gateway (causewayd) installs a relay hook on its context.  Every
 * incoming request whose routing destination is not this process is handed
 * to the hook instead of a registered handler.  The hook creates an
 * outgoing handle towards the next hop with cw_relay_create() (same RPC id,
 * opaque payload, descriptor section and remaining deadline; hop count + 1;
 * a new routing destination), forwards it with cw_forward(), and when it
 * completes answers the incoming handle with cw_relay_respond(), which copies
 * the response (status, payload, descriptors) through unchanged.
 *
 * The core enforces the hop limit before the hook runs: a request that has
 * crossed more than the context's max_hops gateways is answered with
 * CW_TTL_EXPIRED.  A gateway replaces the descriptors of what it relays
 * (cw_relay_desc_count() > 0) with proxy handles of its own
 * (cw_relay_desc_replace, <causeway/relay.h>; docs/bulk-gateway.md).
 */
#ifndef CAUSEWAY_FORWARD_H
#define CAUSEWAY_FORWARD_H

#include <causeway/causeway.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Called from cw_trigger() for an incoming request addressed beyond this
 * process.  The hook owns one reference to @p in: it must answer it
 * (cw_relay_respond or cw_respond) and release it.
 */
typedef void (*cw_relay_hook_t)(cw_handle_t *in, void *arg);

/**
 * Install (or with NULL remove) the relay hook.  Without a hook, such
 * requests are answered with CW_NO_ROUTE.
 */
CW_PUBLIC cw_status_t cw_context_set_relay_hook(cw_context_t *ctx,
                                                cw_relay_hook_t hook,
                                                void *arg);

/** Set the hop limit (default 8, at most 255). */
CW_PUBLIC cw_status_t cw_context_set_max_hops(cw_context_t *ctx,
                                              unsigned max_hops);

/** Routing destination of an incoming request ("" if it is for us). */
CW_PUBLIC const char *cw_relay_dest(cw_handle_t *in);

/** Gateways the request has crossed so far. */
CW_PUBLIC unsigned cw_relay_hops(cw_handle_t *in);

/**
 * Create the outgoing handle for @p in towards @p next_hop.  The handle
 * carries the same RPC id, payload bytes and descriptor section, the
 * remaining deadline and the hop count + 1.
 * @param[in] dest  routing destination for the next hop; NULL or "" when
 *                  @p next_hop is the final target.
 * @return CW_OK, CW_TIMEOUT (no budget left), CW_NOMEM, CW_INVALID_ARG.
 */
CW_PUBLIC cw_status_t cw_relay_create(cw_handle_t *in, cw_addr_t *next_hop,
                                      const char *dest, cw_handle_t **out_p);

/**
 * Mark an outgoing handle created by cw_relay_create for an idempotent
 * request as a resumption of it (RESUME, same resume id): the target
 * attaches it to the request in progress instead of running it again
 * (docs/bulk-gateway.md, "Resume").
 * @return CW_OK, or CW_INVALID_ARG unless @p out is such a handle and
 *         not in flight.
 */
CW_PUBLIC cw_status_t cw_relay_set_resume(cw_handle_t *out);

/**
 * End the forward of outgoing handle @p out now with @p status (a
 * transport error: CW_DISCONNECTED, CW_UNREACHABLE or CW_IO), without
 * telling its next hop: the caller knows it is dead (health checks), so
 * a CANCEL would only wait for the transport to find out too.  Its
 * callback runs once, as for any completion.
 * @return CW_OK (also when it already completed), CW_INVALID_ARG.
 */
CW_PUBLIC cw_status_t cw_relay_fail(cw_handle_t *out, cw_status_t status);

/**
 * Like cw_relay_create(), with the outgoing handle in @p out_ctx, which may be
 * another context than @p in's (a gateway with one context per progress
 * thread).  @p next_hop must have been looked up in @p out_ctx.  Across two
 * contexts the outgoing handle holds no reference to @p in: keep @p in until
 * the outgoing forward has completed.  A cancel from @p in's caller still
 * cancels the outgoing forward (from @p in's context's cw_trigger).
 * @return as cw_relay_create(); CW_INVALID_ARG also when @p next_hop belongs
 *         to another context.
 */
CW_PUBLIC cw_status_t cw_relay_create_on(cw_context_t *out_ctx, cw_handle_t *in,
                                         cw_addr_t *next_hop, const char *dest,
                                         cw_handle_t **out_p);

/**
 * Answer @p in with the response of the completed outgoing handle @p out:
 * @p status (the status its forward callback got) and, when a response
 * arrived, its payload and descriptor section unchanged.  For a one-way
 * request there is nothing to answer: returns CW_OK and @p cb is not
 * called.
 */
CW_PUBLIC cw_status_t cw_relay_respond(cw_handle_t *in, cw_handle_t *out,
                                       cw_status_t status, cw_respond_cb_t cb,
                                       void *arg);

/** Number of bulk descriptors an incoming request carries. */
CW_PUBLIC unsigned cw_relay_desc_count(cw_handle_t *in);

/**
 * Raw bytes of descriptor @p i (see docs/wire.md), valid while @p in lives
 * and until the next cw_relay_desc_replace.
 */
CW_PUBLIC cw_status_t cw_relay_desc_get(cw_handle_t *in, unsigned i,
                                        const void **p_p, size_t *len_p);

/**
 * Replace descriptor @p i of an outgoing handle created by cw_relay_create
 * with @p len raw bytes (validated as a descriptor).
 */
CW_PUBLIC cw_status_t cw_relay_desc_replace(cw_handle_t *out, unsigned i,
                                            const void *p, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* CAUSEWAY_FORWARD_H */
