/*
 * na-util: the bounded matcher of early messages, expected messages that
 * came before their receive, kept until a receive for the same (peer, tag)
 * takes them.  Such a message may never be asked for (the answer to a call
 * that was cancelled, or a hostile peer's), so the matcher holds at most
 * max entries of max_bytes in all: a full one refuses (CW_BUSY, counted in
 * refused), and the plugin drops the message or evicts the oldest entry
 * and tries again.  Entries are indexed by a seeded hash of (peer, tag),
 * so a receive finds its message in a short bucket whatever the peers
 * send; arrival order is kept, within a key (the oldest of several comes
 * first) and across all entries (fifo).  "peer" is any 64-bit name of the
 * sender (an id, a pointer, a hash of its address, which the plugin then
 * checks on each candidate).  Entries are embedded in the plugin's
 * objects; the matcher allocates only its buckets, on the first insert.
 * Not thread-safe: the owner locks.
 */
#ifndef NAU_MATCH_H
#define NAU_MATCH_H

#include <stdbool.h>
#include <stdint.h>

#include <causeway/status.h>

#include "nau_list.h"

/** Embedded in each early message. */
struct nau_match_entry {
    struct nau_list fifo;  /**< all entries, oldest first */
    struct nau_list blink; /**< its bucket, oldest first */
    uint64_t peer;
    uint32_t tag;
    size_t bytes; /**< counted against max_bytes */
};

/** The matcher; the counters are read-only. */
struct nau_match {
    struct nau_list fifo;
    struct nau_list *buckets;
    size_t mask;
    uint64_t seed;
    unsigned max;
    size_t max_bytes;
    unsigned n;       /**< entries held */
    size_t bytes;     /**< their bytes */
    uint64_t refused; /**< inserts refused: full */
};

/** An empty matcher of @p max entries (0: refuses all), @p max_bytes in
 *  all, hashing under @p seed (nau_seed()). */
void nau_match_init(struct nau_match *m, unsigned max, size_t max_bytes,
                    uint64_t seed);

/** Free the buckets; the entries (removed first) are the owner's. */
void nau_match_fini(struct nau_match *m);

/** True if an entry of @p bytes would not fit now. */
static inline bool nau_match_full(const struct nau_match *m, size_t bytes)
{
    return m->n >= m->max || bytes > m->max_bytes - m->bytes;
}

/**
 * Keep @p e for (@p peer, @p tag), counting @p bytes.
 * @return CW_OK; CW_BUSY when full (refused counted); CW_NOMEM when the
 *         buckets cannot be allocated; CW_INVALID_ARG for a NULL argument.
 */
cw_status_t nau_match_insert(struct nau_match *m, struct nau_match_entry *e,
                             uint64_t peer, uint32_t tag, size_t bytes);

/** Take @p e out (an entry in no matcher is left alone). */
void nau_match_remove(struct nau_match *m, struct nau_match_entry *e);

/** Out of line part of nau_match_find(). */
struct nau_match_entry *nau_match_lookup(const struct nau_match *m,
                                         uint64_t peer, uint32_t tag);

/** The oldest entry for (@p peer, @p tag), or NULL. */
static inline struct nau_match_entry *
nau_match_find(const struct nau_match *m, uint64_t peer, uint32_t tag)
{
    return m->n == 0 ? NULL : nau_match_lookup(m, peer, tag);
}

/** The next oldest entry with the key of @p e, or NULL. */
struct nau_match_entry *nau_match_next(const struct nau_match *m,
                                       const struct nau_match_entry *e);

/** The oldest entry of all (the one to evict), or NULL. */
static inline struct nau_match_entry *
nau_match_oldest(const struct nau_match *m)
{
    return m->n == 0
               ? NULL
               : nau_container_of(m->fifo.next, struct nau_match_entry, fifo);
}

#endif /* NAU_MATCH_H */
