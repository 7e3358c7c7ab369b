/*
 * na-util: the peer table.  Peers are looked up by what the wire carries
 * (an address, an id), so the table hashes under a seed (nau_hash.h) and
 * doubles its buckets past one node per bucket: a lookup costs the same
 * with ten peers or a million, and no peer can make keys collide.  A peer
 * embeds a node holding its hash and its references; the plugin hashes
 * its key and compares the key of each node of that hash
 * (nau_ptable_first(), nau_ptable_next()), so keys keep their own types;
 * a 64-bit key's hash is a bijection, so nau_ptable_find_u64() compares
 * none.  What the references count, and whether a peer leaves the table
 * at zero, is the plugin's.  The table never shrinks, so an iteration
 * (nau_ptable_iter()) may remove the node it is at once it has the next.
 * Not thread-safe: the owner locks.
 */
#ifndef NAU_PTABLE_H
#define NAU_PTABLE_H

#include <stdbool.h>

#include <causeway/status.h>

#include "nau_hash.h"

/** Embedded in each peer. */
struct nau_ptable_node {
    struct nau_ptable_node *next, **pprev; /**< bucket chain */
    uint64_t hash;
    unsigned refs;
};

struct nau_ptable {
    struct nau_ptable_node **buckets;
    size_t mask; /**< buckets - 1 */
    size_t count;
    uint64_t seed;
    uint64_t grows; /**< times the buckets doubled */
};

/**
 * An empty table hashing under @p seed (nau_seed()), with its first
 * buckets, so that inserting never fails.
 * @return CW_OK; CW_NOMEM (the table is then empty: only fini applies).
 */
cw_status_t nau_ptable_init(struct nau_ptable *t, uint64_t seed);

/** Free the buckets; the peers (removed first) are the owner's. */
void nau_ptable_fini(struct nau_ptable *t);

/** Insert @p n (in no table) with @p hash; grows past one node a bucket
 *  (if that allocation fails, the chains only get longer). */
void nau_ptable_insert(struct nau_ptable *t, struct nau_ptable_node *n,
                       uint64_t hash);

/** Take @p n out of @p t (a node in no table is left alone). */
void nau_ptable_remove(struct nau_ptable *t, struct nau_ptable_node *n);

/** The node after @p n (NULL: the first), in no given order, or NULL. */
struct nau_ptable_node *nau_ptable_iter(const struct nau_ptable *t,
                                        const struct nau_ptable_node *n);

/** The hash of a key of @p len bytes. */
static inline uint64_t nau_ptable_hash(const struct nau_ptable *t,
                                       const void *key, size_t len)
{
    return nau_hash_bytes(t->seed, key, len);
}

/** The first node from @p n on in its chain with @p hash, or NULL. */
static inline struct nau_ptable_node *
nau_ptable_chain(struct nau_ptable_node *n, uint64_t hash)
{
    while (n != NULL && n->hash != hash)
        n = n->next;
    return n;
}

/** The first node with @p hash, or NULL. */
static inline struct nau_ptable_node *
nau_ptable_first(const struct nau_ptable *t, uint64_t hash)
{
    return t->count == 0 ? NULL
                         : nau_ptable_chain(t->buckets[hash & t->mask], hash);
}

/** The next node with the hash of @p n, or NULL. */
static inline struct nau_ptable_node *
nau_ptable_next(const struct nau_ptable_node *n)
{
    return nau_ptable_chain(n->next, n->hash);
}

/** The node inserted with the 64-bit key @p key, or NULL. */
static inline struct nau_ptable_node *
nau_ptable_find_u64(const struct nau_ptable *t, uint64_t key)
{
    return nau_ptable_first(t, nau_hash_u64(t->seed, key));
}

/** nau_ptable_insert() with the 64-bit key @p key. */
static inline void nau_ptable_insert_u64(struct nau_ptable *t,
                                         struct nau_ptable_node *n,
                                         uint64_t key)
{
    nau_ptable_insert(t, n, nau_hash_u64(t->seed, key));
}

static inline void nau_ptable_ref(struct nau_ptable_node *n)
{
    n->refs++;
}

/** Drop a reference; true when that was the last. */
static inline bool nau_ptable_unref(struct nau_ptable_node *n)
{
    return --n->refs == 0;
}

#endif /* NAU_PTABLE_H */
