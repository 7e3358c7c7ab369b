/*
 * Unguessable request ids and response tags (ids.c).
 */
#ifndef CW_IDS_H
#define CW_IDS_H

#include <stddef.h>
#include <stdint.h>

#include <causeway/status.h>

#define CW_IDGEN_ROUNDS 4

/** A keyed permutation of a counter. */
struct cw_idgen {
    uint64_t key[CW_IDGEN_ROUNDS];
    uint64_t next; /**< counter of the last id given */
};

/** Fill @p buf with @p len bytes from getrandom(); CW_IO if it fails. */
cw_status_t cw_random_fill(void *buf, size_t len);

/** Fresh keys, counter at 0. */
cw_status_t cw_idgen_init(struct cw_idgen *g);

/** The permutations themselves (bijective for a given key). */
uint64_t cw_idgen_perm64(const struct cw_idgen *g, uint64_t x);
uint32_t cw_idgen_perm32(const struct cw_idgen *g, uint32_t x);

/** Next 64-bit id: never 0, unique until 2^64 ids have been given. */
uint64_t cw_idgen_next64(struct cw_idgen *g);

/** Next 32-bit id in [1, max]: permuted when max is UINT32_MAX (never 0,
 *  unique until 2^32 ids have been given), counted otherwise. */
uint32_t cw_idgen_next32(struct cw_idgen *g, uint32_t max);

#endif
