/*
 * na-util: the peer table.  Peers are looked up by what the wire carries
 * (an address, an endpoint id), so the table hashes under a seed
 * (nau_hash.h) and doubles its bucket array past one entry per bucket: a
 * lookup costs the same with ten peers or a million, and no peer can make
 * keys collide.  Intrusive: a peer embeds a struct nau_ptable_node holding
 * its hash and its reference count; the table allocates only its buckets.
 * The plugin hashes its key (nau_ptable_hash*()) and compares the key of
 * each candidate of that hash (nau_ptable_first(), nau_ptable_next()), so
 * keys keep their own types.  The table never shrinks, so iterating
 * (nau_ptable_iter()) may remove the node it is at once it has the next.  What
 * the count of references means, and whether a peer leaves the table when it
 * drops to zero, is the plugin's.  Not thread-safe: the owner locks.
 */
#ifndef NAU_PTABLE_H
#define NAU_PTABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <causeway/status.h>

#include "nau_hash.h"

/** Embedded in each peer. */
struct nau_ptable_node {
    struct nau_ptable_node *next, **pprev; /**< bucket chain */
    uint64_t hash;
    unsigned refs;
};

/** The table. */
struct nau_ptable {
    struct nau_ptable_node **buckets;
    size_t mask; /**< buckets - 1 */
    size_t count;
    uint64_t seed;
    uint64_t grows; /**< times the bucket array doubled */
};

/**
 * An empty table hashing under @p seed (nau_seed()), with its first bucket
 * array, so that inserting never fails.
 * @return CW_OK; CW_NOMEM (the table is then zeroed: empty, and only
 *         nau_ptable_fini() may be called on it).
 */
cw_status_t nau_ptable_init(struct nau_ptable *t, uint64_t seed);

/** Free the bucket array; the peers (remove them first) are the owner's. */
void nau_ptable_fini(struct nau_ptable *t);

/** The hash of a key of @p len bytes. */
static inline uint64_t nau_ptable_hash(const struct nau_ptable *t,
                                       const void *key, size_t len)
{
    return nau_hash_bytes(t->seed, key, len);
}

/**
 * The hash of a 64-bit key: a bijection, so two keys have one hash only if
 * they are equal, and nau_ptable_find_u64() compares no key.
 */
static inline uint64_t nau_ptable_hash_u64(const struct nau_ptable *t,
                                           uint64_t key)
{
    return nau_hash_u64(t->seed, key);
}

/** The first node after @p n in its chain with @p hash, or NULL. */
static inline struct nau_ptable_node *
nau_ptable_chain(struct nau_ptable_node *n, uint64_t hash)
{
    while (n != NULL && n->hash != hash)
        n = n->next;
    return n;
}

/** The first node whose key has @p hash, or NULL. */
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
    return nau_ptable_first(t, nau_ptable_hash_u64(t, key));
}

/**
 * Insert @p n, whose key has @p hash (it must not be in a table), into an
 * initialised table.  Grows the bucket array past one node per bucket; if
 * that allocation fails the table stays as it is, only fuller.
 */
void nau_ptable_insert(struct nau_ptable *t, struct nau_ptable_node *n,
                       uint64_t hash);

/** nau_ptable_insert() of @p n with the 64-bit key @p key. */
static inline void nau_ptable_insert_u64(struct nau_ptable *t,
                                         struct nau_ptable_node *n,
                                         uint64_t key)
{
    nau_ptable_insert(t, n, nau_ptable_hash_u64(t, key));
}

/** Take @p n out of @p t; a node in no table is left alone. */
void nau_ptable_remove(struct nau_ptable *t, struct nau_ptable_node *n);

/** Iterate: the node after @p n (NULL: the first), in no given order. */
struct nau_ptable_node *nau_ptable_iter(const struct nau_ptable *t,
                                        const struct nau_ptable_node *n);

/** Take a reference. */
static inline void nau_ptable_ref(struct nau_ptable_node *n)
{
    n->refs++;
}

/** Drop a reference; true when that was the last one. */
static inline bool nau_ptable_unref(struct nau_ptable_node *n)
{
    return --n->refs == 0;
}

#endif /* NAU_PTABLE_H */
