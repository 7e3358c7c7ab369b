/*
 * Request ids and response tags a third party cannot guess (docs/wire.md,
 * "Forged responses").
 *
 * A response is matched at the caller by the response tag it was sent on
 * and checked against the request id it carries.  Counted from 1, both
 * were guessable: a peer that could reach a client could answer the
 * client's requests to another server in that server's name (na-ofi, like
 * Mercury's, takes the sender's address from the message) or cancel them.
 * Each is now a keyed permutation of a counter: unique until the counter
 * wraps (2^32 tags per network, 2^64 ids per context), as the matching
 * needs, and without the key, drawn from getrandom() when the context or
 * network is made, unrelated from one to the next.
 *
 * The permutation is a Feistel network whose round function mixes the
 * right half with a round key (a 64-bit multiply-xorshift finalizer); a
 * few nanoseconds an id.  It is not a vetted cipher: it stops a peer that
 * must guess, not one that sees many of one context's ids and sets out to
 * recover its keys, and a peer that sees a request (the server, a
 * gateway on the path) is trusted with its answer anyway.
 */
#include "ids.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include <causeway/log.h>

cw_status_t cw_random_fill(void *buf, size_t len)
{
    size_t got = 0;

    while (got < len) {
        ssize_t n = getrandom((char *)buf + got, len - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            CW_ERROR("core", "getrandom() failed: %s", strerror(errno));
            return CW_IO;
        }
        got += (size_t)n;
    }
    return CW_OK;
}

cw_status_t cw_idgen_init(struct cw_idgen *g)
{
    memset(g, 0, sizeof(*g));
    return cw_random_fill(g->key, sizeof(g->key));
}

static inline uint64_t ids_mix(uint64_t x, uint64_t k)
{
    x ^= k;
    x ^= x >> 31;
    x *= 0x7fb5d329728ea185ull;
    x ^= x >> 27;
    x *= 0x81dadef4bc2dd44dull;
    x ^= x >> 33;
    return x;
}

/* A Feistel network on 2 x @p half bits (half <= 32). */
static uint64_t ids_feistel(const struct cw_idgen *g, uint64_t x, unsigned half)
{
    uint64_t mask = (1ull << half) - 1;
    uint64_t l = (x >> half) & mask, r = x & mask;

    for (unsigned i = 0; i < CW_IDGEN_ROUNDS; i++) {
        uint64_t t = l ^ (ids_mix(r, g->key[i]) >> (64 - half));
        l = r;
        r = t;
    }
    return (l << half) | r;
}

uint64_t cw_idgen_perm64(const struct cw_idgen *g, uint64_t x)
{
    return ids_feistel(g, x, 32);
}

uint32_t cw_idgen_perm32(const struct cw_idgen *g, uint32_t x)
{
    return (uint32_t)ids_feistel(g, x, 16);
}

uint64_t cw_idgen_next64(struct cw_idgen *g)
{
    uint64_t id;

    do
        id = cw_idgen_perm64(g, ++g->next);
    while (id == 0);
    return id;
}

uint32_t cw_idgen_next32(struct cw_idgen *g, uint32_t max)
{
    uint32_t id;

    if (max != UINT32_MAX) {
        /* A plugin with fewer tags (none here): counted, as before. */
        if (g->next >= max)
            g->next = 0;
        return (uint32_t)++g->next;
    }
    do
        id = cw_idgen_perm32(g, (uint32_t)++g->next);
    while (id == 0);
    return id;
}
