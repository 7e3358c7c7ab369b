/*
 * na-util: the bounded matcher of early messages: expected messages that
 * came before their receive, kept until a receive for the same (peer, tag)
 * takes them.  Such a message may never be asked for (the answer to a call
 * that was cancelled, or a hostile peer's), so the matcher holds at most
 * max entries and max_bytes bytes; a full one refuses (CW_BUSY, counted in
 * refused) and the plugin drops the new message or evicts the oldest
 * (nau_match_oldest()) and tries again.  Entries are indexed by a hash of
 * (peer, tag) under a seed, so a receive finds its message in one short
 * bucket however full the matcher is and whatever the peers send; within a
 * key, and across all entries, arrival order is kept: the oldest of
 * several messages with one key is found first.
 *
 * "peer" is any 64-bit name the plugin gives the sender (an id, a pointer,
 * a hash of its address, which it then checks on each candidate).  Entries
 * are embedded in the plugin's objects; the matcher allocates only its
 * bucket array, on the first insert.  Not thread-safe: the owner locks.
 */
#ifndef NAU_MATCH_H
#define NAU_MATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <causeway/status.h>

#include "nau_list.h"

/** Embedded in each early message. */
struct nau_match_entry {
    struct nau_list fifo;  /**< every entry, oldest first */
    struct nau_list blink; /**< its bucket, oldest first */
    uint64_t peer;
    uint32_t tag;
    size_t bytes; /**< what it counts against max_bytes */
};

/** The matcher; the counters are read-only. */
struct nau_match {
    struct nau_list fifo;
    struct nau_list *buckets; /**< NULL until the first insert */
    size_t mask;              /**< buckets - 1 */
    uint64_t seed;
    unsigned max;
    size_t max_bytes;
    unsigned n;       /**< entries held */
    size_t bytes;     /**< their bytes */
    uint64_t refused; /**< inserts refused because the matcher was full */
};

/**
 * An empty matcher holding at most @p max entries of @p max_bytes bytes in
 * all (0 entries: it refuses everything), hashing under @p seed
 * (nau_seed()).
 */
void nau_match_init(struct nau_match *m, unsigned max, size_t max_bytes,
                    uint64_t seed);

/** Free the bucket array; the entries (remove them first) are the owner's. */
void nau_match_fini(struct nau_match *m);

/**
 * Keep entry @p e for (@p peer, @p tag), counting @p bytes.
 * @return CW_OK; CW_BUSY when that would pass max or max_bytes (nothing
 *         kept, refused counted); CW_NOMEM when the bucket array cannot be
 *         allocated; CW_INVALID_ARG for a NULL matcher or entry.
 */
cw_status_t nau_match_insert(struct nau_match *m, struct nau_match_entry *e,
                             uint64_t peer, uint32_t tag, size_t bytes);

/** True if an entry of @p bytes would not fit now (an insert refuses it). */
static inline bool nau_match_full(const struct nau_match *m, size_t bytes)
{
    return m->n >= m->max || bytes > m->max_bytes - m->bytes;
}

/** Take @p e out of @p m (it stays the owner's). */
void nau_match_remove(struct nau_match *m, struct nau_match_entry *e);

/** The entry after @p e with its key, or NULL: the next candidate. */
struct nau_match_entry *nau_match_next(const struct nau_match *m,
                                       const struct nau_match_entry *e);

/** Out of line part of nau_match_find(). */
struct nau_match_entry *nau_match_lookup(const struct nau_match *m,
                                         uint64_t peer, uint32_t tag);

/** The oldest entry for (@p peer, @p tag), or NULL. */
static inline struct nau_match_entry *
nau_match_find(const struct nau_match *m, uint64_t peer, uint32_t tag)
{
    return m->n == 0 ? NULL : nau_match_lookup(m, peer, tag);
}

/** The oldest entry of all, or NULL (the one to evict). */
static inline struct nau_match_entry *
nau_match_oldest(const struct nau_match *m)
{
    return m->n == 0
               ? NULL
               : nau_container_of(m->fifo.next, struct nau_match_entry, fifo);
}

#endif /* NAU_MATCH_H */
