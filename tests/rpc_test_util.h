/*
 * Helpers shared by the RPC tests (tests/unit/test_rpc_*.c,
 * tests/integration/test_rpc_*.c): data patterns, a completion recorder
 * and an echo handler.  Header-only; every function is static.
 */
#ifndef CW_RPC_TEST_UTIL_H
#define CW_RPC_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include <causeway/causeway.h>

/** FNV-1a over @p n bytes (data checksums). */
static inline uint64_t checksum(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/** Deterministic pseudo-random bytes from @p seed. */
static inline void fill(uint8_t *p, size_t n, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (uint8_t)x;
    }
}

/** Records how often and with what a forward completed. */
struct call {
    int done;
    cw_status_t st;
};

static inline void call_cb(cw_handle_t *h, cw_status_t st, void *arg)
{
    struct call *c = arg;
    (void)h;
    c->done++;
    c->st = st;
}

/** Handler answering its bytes argument unchanged. */
static inline void h_echo(cw_handle_t *h, void *arg)
{
    const void *p;
    size_t n;
    (void)arg;
    if (cw_buf_get_bytes(cw_handle_input(h), &p, &n) == CW_OK)
        cw_buf_put_bytes(cw_handle_output(h), p, n);
    cw_respond(h, cw_buf_error(cw_handle_input(h)), NULL, NULL);
    cw_handle_release(h);
}

#endif /* CW_RPC_TEST_UTIL_H */
