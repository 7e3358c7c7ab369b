/*
 * Causeway relay API, bulk side: what a gateway needs to carry RPCs with
 * bulk descriptors between networks (design §4, docs/bulk-gateway.md).
 *
 * Raw memory keys never cross a gateway.  When a gateway forwards a request
 * (<causeway/forward.h>) it reads each descriptor of the incoming request
 * as a bulk handle on the network it arrived on (cw_bproxy_desc_bulk),
 * issues a token of its own for it, and writes in its place a proxy
 * descriptor valid on the egress network (cw_bproxy_desc_encode, then
 * cw_relay_desc_replace).  A target's core that transfers on a proxy handle
 * sends the delegation request CW_BPROXY_RPC to the gateway, which decodes
 * it (cw_bproxy_req_decode), checks the token, and moves the bytes itself
 * or, where origin and target share a node-local plugin, answers with a
 * grant the target uses directly (cw_bgrant_possible, cw_bgrant_write).
 *
 * Thread-safety: as the handles and networks passed (each call takes the
 * context's lock where it needs it).
 */
#ifndef CAUSEWAY_RELAY_H
#define CAUSEWAY_RELAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <causeway/causeway.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Name of the delegation RPC a gateway registers on its contexts. */
#define CW_BPROXY_RPC "causeway.bulk.proxy"
/** Bytes of a proxy token. */
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

/**
 * Descriptor @p i of the incoming request @p in as a remote bulk handle on
 * the network it arrived on (a proxy handle again when it came from
 * another gateway).  Permission and length are the descriptor's.
 * @param[in]  in   an incoming (server) handle.
 * @param[in]  i    descriptor index, below cw_relay_desc_count(in).
 * @param[out] b_p  the handle (cw_bulk_free it).
 * @return CW_OK; CW_INVALID_ARG; else the status of decoding the
 *         descriptor or of making the handle (CW_NOMEM among them).
 */
CW_PUBLIC cw_status_t cw_bproxy_desc_bulk(cw_handle_t *in, unsigned i,
                                          cw_bulk_t **b_p);

/**
 * Write a proxy descriptor for @p egress into @p buf: the token
 * @p token standing for @p total bytes with permission @p perm, valid
 * @p life_ms from now.
 * @param[in]  cap    bytes at @p buf.
 * @param[out] len_p  bytes written.
 * @return CW_OK; CW_INVALID_ARG; CW_OVERFLOW when @p cap is short.
 */
CW_PUBLIC cw_status_t cw_bproxy_desc_encode(
    cw_network_t *egress, const uint8_t token[CW_BPROXY_TOKEN_LEN],
    uint32_t perm, uint64_t total, uint64_t life_ms, void *buf, size_t cap,
    size_t *len_p);

/**
 * Decode a delegation request received by a CW_BPROXY_RPC handler.
 * @param[in]  h  the request.
 * @param[out] r  the request decoded; on CW_OK r->bulk is the caller's to
 *                free.
 * @return CW_OK; CW_INVALID_ARG; CW_PROTOCOL for a malformed request,
 *         CW_BAD_HANDLE for a token of the wrong length, CW_RANGE when the
 *         target's bytes are not r->len long; else the status of decoding
 *         the target's bulk handle.
 */
CW_PUBLIC cw_status_t cw_bproxy_req_decode(cw_handle_t *h,
                                           struct cw_bproxy_req *r);

/**
 * Whether the delegation @p h (decoded into @p r) on the proxied handle
 * @p origin may be answered with a grant: the requester asked for one,
 * @p origin is a native handle (not a proxy of an earlier gateway), and
 * it and the requester are on networks of the same plugin, one that says
 * CW_NA_CAP_NODE_RMA.
 */
CW_PUBLIC bool cw_bgrant_possible(cw_handle_t *h, const struct cw_bproxy_req *r,
                                  const cw_bulk_t *origin);

/**
 * Write into the output of @p h a grant for exactly [r->off, r->off +
 * r->len) of @p origin, with the one right r->dir needs, owned by
 * @p owner, valid @p life_ms.  The output is left empty on failure.
 * @return CW_OK; CW_INVALID_ARG when no grant is possible
 *         (cw_bgrant_possible) or @p owner is not on @p origin's network;
 *         else the status of restricting or serializing @p origin's memory
 *         handle (CW_NOMEM among them).
 */
CW_PUBLIC cw_status_t cw_bgrant_write(cw_handle_t *h,
                                      const struct cw_bproxy_req *r,
                                      cw_bulk_t *origin, cw_addr_t *owner,
                                      uint64_t life_ms);

/**
 * The member of @p hop's server that this context's requests to @p hop go
 * to, as its plugin writes it (docs/api.md, "Serving on several threads":
 * a server that spreads its callers over several contexts pins each
 * caller's context to one of them).  That member, not @p hop, is the
 * peer a delegation on a token bound to @p hop comes from.
 * @param[in]  hop  an address of this context (cw_addr_lookup), the
 *                  published address the requests are addressed to.
 * @param[out] buf  the member's address, NUL-terminated.
 * @param[in]  len  bytes at @p buf.
 * @return CW_OK; CW_NOENT when the requests go to @p hop itself (no member
 *         given yet, or a server that does not spread); CW_OVERFLOW when
 *         @p len is too short; CW_INVALID_ARG for NULL arguments, a
 *         routed address or this context's own.
 */
CW_PUBLIC cw_status_t cw_relay_hop_member(const cw_addr_t *hop, char *buf,
                                          size_t len);

#ifdef __cplusplus
}
#endif

#endif /* CAUSEWAY_RELAY_H */
