/*
 * A resizable, keyed hash table for keys that peers choose (gateway
 * caches, admission's sources, the route index).  Intrusive: an entry
 * embeds a struct cw_hnode and owns its key's bytes; the table allocates
 * only its bucket array.  Chained buckets, a power of two of them, grown
 * (doubled) past 3/4 load and halved below 1/16, so a lookup costs the
 * same with 10 or 10^6 entries; hashed with SipHash-2-4 under the
 * process's random key (cw_siphash.h), so that no one outside can make
 * keys collide.  Every entry is also on a use-order list (oldest to
 * newest) that callers bound a cache with: touch on a hit, evict the
 * oldest they may drop.  Not thread-safe: the owner locks.
 *
 * A zeroed struct cw_htable is an empty table ready for use.
 */
#ifndef CW_HTABLE_H
#define CW_HTABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <causeway/status.h>

#include "cw_siphash.h"

/** Embedded in each entry. */
struct cw_hnode {
    struct cw_hnode *hnext;         /**< bucket chain */
    struct cw_hnode *older, *newer; /**< use order */
    const void *key;                /**< the entry's own key bytes */
    size_t klen;
    uint64_t hash;
};

/** The table. */
struct cw_htable {
    struct cw_hnode **buckets; /**< NULL until the first insert */
    size_t nbuckets;           /**< a power of two, or 0 */
    size_t count;
    struct cw_hnode *oldest, *newest;
    bool keyed; /**< key below is set */
    uint8_t key[CW_SIPHASH_KEY_LEN];
    uint64_t resizes; /**< grows and shrinks so far */
};

/** The entry that embeds node @p n as member @p member. */
#define CW_HNODE_ENTRY(n, type, member)                                        \
    ((type *)(void *)((char *)(n)-offsetof(type, member)))

/**
 * Key @p t with @p key instead of the process's key (tests: before any
 * insert).
 * @param t   an empty table.
 * @param key 16 bytes.
 */
void cw_htable_set_key(struct cw_htable *t,
                       const uint8_t key[CW_SIPHASH_KEY_LEN]);

/**
 * The hash @p t gives to a key.
 * @param t   the table (takes the process's key on first use).
 * @param key the key's bytes, @p len of them.
 * @return the 64-bit hash.
 */
uint64_t cw_htable_hash(struct cw_htable *t, const void *key, size_t len);

/**
 * Look a key up.  Does not change the use order (cw_htable_touch).
 * @return the entry's node, or NULL.
 */
struct cw_hnode *cw_htable_find(struct cw_htable *t, const void *key,
                                size_t len);

/**
 * cw_htable_find() with the key's @p hash from cw_htable_hash(), kept for
 * a cw_htable_insert_hash() of the same key on a miss (one hash a miss).
 */
struct cw_hnode *cw_htable_find_hash(struct cw_htable *t, const void *key,
                                     size_t len, uint64_t hash);

/** cw_htable_find() of a string key (without its terminator). */
struct cw_hnode *cw_htable_find_str(struct cw_htable *t, const char *key);

/**
 * Insert node @p n with key @p key (@p len bytes that the entry owns and
 * keeps unchanged while inserted) as the newest entry.  The key must not
 * be in the table already.  Grows the table past 3/4 load; if that
 * allocation fails the table stays as it is, only fuller.
 * @return CW_OK; CW_NOMEM when the first bucket array cannot be allocated
 *         (nothing inserted).
 */
cw_status_t cw_htable_insert(struct cw_htable *t, struct cw_hnode *n,
                             const void *key, size_t len);

/** cw_htable_insert() with the key's @p hash from cw_htable_hash(). */
cw_status_t cw_htable_insert_hash(struct cw_htable *t, struct cw_hnode *n,
                                  const void *key, size_t len, uint64_t hash);

/** cw_htable_insert() of a string key (without its terminator). */
cw_status_t cw_htable_insert_str(struct cw_htable *t, struct cw_hnode *n,
                                 const char *key);

/**
 * Take @p n out of @p t (it may be the node an iteration is at, once the
 * iteration read cw_htable_newer() of it).  The entry is the caller's.
 */
void cw_htable_remove(struct cw_htable *t, struct cw_hnode *n);

/** Make @p n the newest entry (used now). */
void cw_htable_touch(struct cw_htable *t, struct cw_hnode *n);

/** The least recently inserted or touched entry, or NULL when empty. */
static inline struct cw_hnode *cw_htable_oldest(const struct cw_htable *t)
{
    return t->oldest;
}

/** The entry used after @p n, or NULL: iterates oldest to newest. */
static inline struct cw_hnode *cw_htable_newer(const struct cw_hnode *n)
{
    return n->newer;
}

/** The number of entries. */
/**
 * The entry for @p key among the @p depth most recently used (inserted or
 * touched) ones, or NULL: a check without hashing for callers that look
 * the same few keys up again and again (a worker forwarding a stream of
 * requests to one destination).  Bounded by @p depth whatever the keys, so
 * it adds nothing a peer's choice of keys can make long; a miss says
 * nothing (the entry may still be in the table).
 */
static inline struct cw_hnode *cw_htable_find_recent(const struct cw_htable *t,
                                                     const void *key,
                                                     size_t len, unsigned depth)
{
    struct cw_hnode *n = t->newest;

    for (; n != NULL && depth > 0; n = n->older, depth--)
        if (n->klen == len && memcmp(n->key, key, len) == 0)
            return n;
    return NULL;
}

static inline size_t cw_htable_count(const struct cw_htable *t)
{
    return t->count;
}

/**
 * Free the bucket array; the entries (remove or iterate them first) stay
 * the caller's.  The table is empty and usable again afterwards, with the
 * same key.
 */
void cw_htable_fini(struct cw_htable *t);

#endif /* CW_HTABLE_H */
