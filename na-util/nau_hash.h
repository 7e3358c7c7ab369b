/*
 * na-util: hashing.  Tables keyed by what peers send (addresses, ids,
 * tags) hash under a seed drawn once per process, which no peer learns, so
 * that no peer can choose keys that pile up in one bucket.  FNV-1a is kept
 * only for a value that must be the same in every process (an identity on
 * the wire), never to index a table.
 */
#ifndef NAU_HASH_H
#define NAU_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/** The process's seed: drawn from getrandom() on first use (the clock, the
 *  pid and an address where that fails), never changed.  Thread-safe. */
uint64_t nau_seed(void);

/** splitmix64's finaliser: a bijection in which every bit moves every bit. */
static inline uint64_t nau_mix64(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/** Hash of the 64-bit @p x under @p seed (a bijection of @p x). */
static inline uint64_t nau_hash_u64(uint64_t seed, uint64_t x)
{
    return nau_mix64(x ^ seed);
}

/** Hash of @p len bytes under @p seed, a mix per 8-byte word, chained. */
static inline uint64_t nau_hash_bytes(uint64_t seed, const void *key,
                                      size_t len)
{
    const unsigned char *p = key;
    uint64_t h = seed ^ ((uint64_t)len * 0x9e3779b97f4a7c15ull), w;

    for (; len >= 8; p += 8, len -= 8) {
        memcpy(&w, p, 8);
        h = nau_mix64(h ^ w);
    }
    for (w = 0; len > 0; len--)
        w = (w << 8) | p[len - 1];
    return nau_mix64(h ^ w);
}

/** FNV-1a, 64 bits, unseeded: the same in every process. */
static inline uint64_t nau_fnv1a64(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ull;

    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

#endif /* NAU_HASH_H */
