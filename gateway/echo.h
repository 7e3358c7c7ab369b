/*
 * A tiny echo service and a synchronous echo call, shared by the demo
 * (causewayd --demo), cw-ping and the gateway tests.
 */
#ifndef CW_GW_ECHO_H
#define CW_GW_ECHO_H

#include <stddef.h>
#include <stdint.h>

#include <causeway/causeway.h>

#define CW_ECHO_RPC "causeway.echo"

/** Register "causeway.echo" (answers its input bytes back) and
 *  "causeway.ping" on @p ctx.  @p delay_ms delays every echo answer
 *  (a slow target for deadline tests; 0 = none). */
cw_status_t cw_echo_register(cw_context_t *ctx, unsigned delay_ms);

/** Progress and trigger @p ctx for @p ms (serves pending echo requests,
 *  including delayed ones). */
void cw_echo_serve(cw_context_t *ctx, unsigned ms);

/** Requests answered, and delayed requests dropped early because their
 *  caller canceled them. */
void cw_echo_counts(uint64_t *served_p, uint64_t *canceled_p);

/**
 * Call "causeway.echo" at @p dest with @p len bytes of a pattern derived
 * from @p seed, wait for the answer (progressing @p ctx), and check that
 * the same bytes came back.
 * @param[out] rtt_ns_p  round-trip time (may be NULL).
 * @return CW_OK; the RPC's failure status; CW_PROTOCOL if the bytes differ.
 */
cw_status_t cw_echo_call(cw_context_t *ctx, cw_addr_t *dest, size_t len,
                         unsigned seed, uint64_t timeout_ms,
                         uint64_t *rtt_ns_p);

#endif /* CW_GW_ECHO_H */
