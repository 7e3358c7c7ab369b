/*
 * Proxy bulk handles (design §4, docs/bulk-gateway.md), the target side.
 * Internal to libcauseway; the gateway side is <causeway/relay.h>.
 *
 * A descriptor flagged PROXY carries a gateway token instead of a memory
 * key.  cw_bulk_transfer on such a handle sends the request CW_BPROXY_RPC
 * to the gateway the handle came from (the peer given to the transfer),
 * passing a bulk handle over exactly the local bytes concerned; the
 * gateway moves the bytes and the transfer completes with its answer.
 */
#ifndef CW_BULK_PROXY_H
#define CW_BULK_PROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <causeway/causeway.h>
#include <causeway/relay.h>

struct cw_wire_desc;

/** Remote handle from a PROXY descriptor received on @p net. */
cw_status_t cw_bproxy_from_desc(cw_context_t *ctx, cw_network_t *net,
                                const struct cw_wire_desc *d, cw_bulk_t **b_p);

/** Delegate a transfer on the proxy handle @p remote to @p peer (checked
 *  arguments, no lock held). */
cw_status_t cw_bproxy_transfer(cw_context_t *ctx, enum cw_bulk_dir dir,
                               cw_addr_t *peer, cw_bulk_t *remote,
                               size_t remote_off, cw_bulk_t *local,
                               size_t local_off, size_t len, cw_bulk_cb_t cb,
                               void *arg, cw_bulk_op_t **op_p);

/** The segments of local @p b covering [@p off, @p off + @p len) as a new
 *  handle with permission @p perm (no lock held; _locked: held). */
cw_status_t cw_bproxy_sub_bulk(cw_context_t *ctx, const cw_bulk_t *b,
                               size_t off, size_t len, uint32_t perm,
                               cw_bulk_t **sub_p);
cw_status_t cw_bproxy_sub_bulk_locked(cw_context_t *ctx, const cw_bulk_t *b,
                                      size_t off, size_t len, uint32_t perm,
                                      cw_bulk_t **sub_p);

/** Encode a delegation request into @p in; the status is the buffer's. */
cw_status_t cw_bproxy_req_encode(cw_buf_t *in,
                                 const uint8_t token[CW_BPROXY_TOKEN_LEN],
                                 enum cw_bulk_dir dir, uint64_t off,
                                 uint64_t len, uint32_t flags, cw_bulk_t *sub);

/** Check that descriptor @p d received on @p net stands for the same
 *  region as proxy handle @p b (a resumed request's new token); with
 *  @p apply, make @p b use its token, lifetime and network (lock held). */
cw_status_t cw_bproxy_retarget(cw_bulk_t *b, cw_network_t *net,
                               const struct cw_wire_desc *d, bool apply);

/** Delegate in windows a transfer on a proxy handle of an idempotent
 *  request (core/bulk_resume.c); same contract as cw_bproxy_transfer. */
cw_status_t cw_rs_transfer(cw_context_t *ctx, enum cw_bulk_dir dir,
                           cw_addr_t *peer, cw_bulk_t *remote,
                           size_t remote_off, cw_bulk_t *local,
                           size_t local_off, size_t len, cw_bulk_cb_t cb,
                           void *arg, cw_bulk_op_t **op_p);

/** Cancel a windowed delegation. */
cw_status_t cw_rs_cancel(cw_bulk_op_t *op);

/** Cancel a delegated transfer (cw_bulk_cancel of a proxy op). */
cw_status_t cw_bproxy_cancel(cw_bulk_op_t *op);

/** True if @p op is a delegated transfer. */
bool cw_bproxy_is_op(const cw_bulk_op_t *op);

/** Free a delegated transfer (no lock held). */
void cw_bproxy_op_free(cw_bulk_op_t *op);

/** The gateway answered the delegation @p op with a grant (@p out, the
 *  response): check it against what @p op asked and move the bytes
 *  directly (core/bulk_grant.c).  CW_OK: @p op completes later; otherwise
 *  the caller completes it with the status returned. */
cw_status_t cw_bgrant_start(cw_bulk_op_t *op, cw_buf_t *out);

/** True if @p b is a proxy handle. */
bool cw_bproxy_is_proxy(const cw_bulk_t *b);

#endif /* CW_BULK_PROXY_H */
