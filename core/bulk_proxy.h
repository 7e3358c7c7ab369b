/*
 * Proxy bulk handles (design §4, docs/bulk-gateway.md).  Internal to
 * libcauseway and causewayd; not installed.
 *
 * Target side: a descriptor flagged PROXY carries a gateway token instead
 * of a memory key.  cw_bulk_transfer on such a handle sends the request
 * CW_BPROXY_RPC to the gateway the handle came from (the peer given to the
 * transfer), passing a bulk handle over exactly the local bytes concerned;
 * the gateway moves the bytes and the transfer completes with its answer.
 *
 * Gateway side: the helpers below read an incoming request's descriptors
 * as bulk handles, write proxy descriptors for the egress network and
 * decode delegation requests.
 */
#ifndef CW_BULK_PROXY_H
#define CW_BULK_PROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <causeway/causeway.h>

#define CW_BPROXY_RPC       "causeway.bulk.proxy"
#define CW_BPROXY_TOKEN_LEN 16
/** Memory handle of a proxy descriptor: the token, then its remaining
 *  lifetime in milliseconds (u64, little-endian) when it was sent. */
#define CW_BPROXY_MEM_LEN (CW_BPROXY_TOKEN_LEN + 8)

/** Delegation flags. */
#define CW_BPROXY_IDEMPOTENT 0x1u /**< may be resumed chunk-wise */
#define CW_BPROXY_DIRECT     0x2u /**< the requester takes a grant */
#define CW_BPROXY_FLAGS_ALL  0x3u

/** First byte of a non-empty answer to a delegation: a grant
 *  (docs/bulk-gateway.md, "Zero-staging"). */
#define CW_BPROXY_GRANT 1u
/** Longest life of a grant: the time within which the target must start
 *  its transfer. */
#define CW_BPROXY_GRANT_LIFE_MS 5000u

/** A decoded delegation request. */
struct cw_bproxy_req {
    uint8_t token[CW_BPROXY_TOKEN_LEN];
    enum cw_bulk_dir dir; /**< as the target asked: PULL = proxy -> bulk */
    uint64_t off;         /**< offset into the proxy handle */
    uint64_t len;
    uint32_t flags;  /**< CW_BPROXY_* */
    cw_bulk_t *bulk; /**< the target's bytes (remote handle, len
                          bytes); caller frees */
};

/* ---- target side (called from core/bulk.c) ------------------------------ */

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
 *  handle with permission @p perm (no lock held). */
cw_status_t cw_bproxy_sub_bulk(cw_context_t *ctx, const cw_bulk_t *b,
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

/* ---- gateway side ------------------------------------------------------- */

/* CW_PUBLIC here marks the few internals causewayd and the white-box
 * tests call: exported by libcauseway, declared by no installed header, not
 * part of the API. */

/** Descriptor @p i of the incoming request @p in as a remote bulk handle on
 *  the network it arrived on (a proxy handle again when it came from
 *  another gateway).  Permission and length are the descriptor's. */
CW_PUBLIC cw_status_t cw_bproxy_desc_bulk(cw_handle_t *in, unsigned i,
                                          cw_bulk_t **b_p);

/** Write a proxy descriptor for @p egress into @p buf (@p cap bytes); the
 *  token stays valid @p life_ms from now. */
CW_PUBLIC cw_status_t cw_bproxy_desc_encode(
    cw_network_t *egress, const uint8_t token[CW_BPROXY_TOKEN_LEN],
    uint32_t perm, uint64_t total, uint64_t life_ms, void *buf, size_t cap,
    size_t *len_p);

/** Decode a delegation request received by a CW_BPROXY_RPC handler. */
CW_PUBLIC cw_status_t cw_bproxy_req_decode(cw_handle_t *h,
                                           struct cw_bproxy_req *r);

/** Whether the delegation @p h (decoded into @p r) on the proxied handle
 *  @p origin may be answered with a grant: the requester asked for one,
 *  @p origin is a native handle (not a proxy of an earlier gateway), and
 *  it and the requester are on networks of the same plugin, one that says
 *  CW_NA_CAP_NODE_RMA. */
CW_PUBLIC bool cw_bgrant_possible(cw_handle_t *h, const struct cw_bproxy_req *r,
                                  const cw_bulk_t *origin);

/** Write into the output of @p h a grant for exactly [r->off, r->off +
 *  r->len) of @p origin, with the one right r->dir needs, owned by
 *  @p owner, valid @p life_ms.  The output is left empty on failure. */
CW_PUBLIC cw_status_t cw_bgrant_write(cw_handle_t *h,
                                      const struct cw_bproxy_req *r,
                                      cw_bulk_t *origin, cw_addr_t *owner,
                                      uint64_t life_ms);

/** True if @p b is a proxy handle. */
CW_PUBLIC bool cw_bproxy_is_proxy(const cw_bulk_t *b);

#endif /* CW_BULK_PROXY_H */
