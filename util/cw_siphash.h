/*
 * Keyed hashing of strings that peers choose.  SipHash-2-4 (Aumasson and
 * Bernstein, "SipHash: a fast short-input PRF", 2012) under a key drawn
 * from getrandom() once per process, so that a peer cannot pick keys that
 * collide in a table (docs/gateway.md, "Caches and limits").  Internal to
 * Causeway: built hidden into libcauseway, the routing library and
 * causewayd (util/meson.build), never exported.
 */
#ifndef CW_SIPHASH_H
#define CW_SIPHASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CW_SIPHASH_KEY_LEN 16

/**
 * SipHash-2-4 of @p len bytes at @p data under @p key.
 * @param key  16 bytes, read as two little-endian 64-bit words.
 * @param data the message (may be NULL when @p len is 0).
 * @param len  its length in bytes.
 * @return the 64-bit hash.
 */
uint64_t cw_siphash_24(const uint8_t key[CW_SIPHASH_KEY_LEN], const void *data,
                       size_t len);

/**
 * SipHash-1-3 (one round per message word, three at the end) of @p len
 * bytes at @p data under @p key: about half the rounds of SipHash-2-4 on
 * the 20-60 byte addresses the tables hold; the variant hash tables keyed
 * per process use against chosen-key flooding (a collision needs the key,
 * which a peer never sees).  What cw_htable hashes with.
 */
uint64_t cw_siphash_13(const uint8_t key[CW_SIPHASH_KEY_LEN], const void *data,
                       size_t len);

/**
 * The process's hashing key: on first use, 16 bytes from getrandom() (or,
 * where that fails, /dev/urandom; then the clock, the process id and an
 * address, logged as a warning), unless cw_siphash_seed_set() fixed it.
 * Thread-safe; the key never changes afterwards.
 * @param key_p out: the key.
 */
void cw_siphash_seed_get(uint8_t key_p[CW_SIPHASH_KEY_LEN]);

/**
 * Fix the process's hashing key (tests that need reproducible hashes),
 * before anything used it: the key never changes once drawn, since
 * tables hash with it.
 * @param key the key.
 * @return true when set; false when a key was already in use (unchanged).
 */
bool cw_siphash_seed_set(const uint8_t key[CW_SIPHASH_KEY_LEN]);

/**
 * SipHash-1-3 of the string @p s (without its terminator) under the
 * process's key (as cw_htable's tables hash).
 */
uint64_t cw_siphash_str(const char *s);

#endif /* CW_SIPHASH_H */
