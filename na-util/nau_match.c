/* na-util: the bounded (peer, tag) matcher of early messages. */
#include "nau_match.h"

#include <stdlib.h>

#include "nau_hash.h"

/* About a bucket per four entries the matcher may hold, so a full one
 * scans a handful a lookup; at most 1024, so an idle one stays small. */
#define NAU_MATCH_BUCKETS_MIN 16u
#define NAU_MATCH_BUCKETS_MAX 1024u

void nau_match_init(struct nau_match *m, unsigned max, size_t max_bytes,
                    uint64_t seed)
{
    *m = (struct nau_match){.max = max, .max_bytes = max_bytes, .seed = seed};
    nau_list_init(&m->fifo);
}

void nau_match_fini(struct nau_match *m)
{
    free(m->buckets);
    m->buckets = NULL;
}

static struct nau_list *nau_match_bucket(const struct nau_match *m,
                                         uint64_t peer, uint32_t tag)
{
    return &m->buckets[nau_mix64(nau_hash_u64(m->seed, peer) ^ tag) & m->mask];
}

cw_status_t nau_match_insert(struct nau_match *m, struct nau_match_entry *e,
                             uint64_t peer, uint32_t tag, size_t bytes)
{
    size_t n = NAU_MATCH_BUCKETS_MIN;

    if (m == NULL || e == NULL)
        return CW_INVALID_ARG;
    if (nau_match_full(m, bytes)) {
        m->refused++;
        return CW_BUSY;
    }
    if (m->buckets == NULL) {
        while (n < NAU_MATCH_BUCKETS_MAX && n * 4 < m->max)
            n *= 2;
        if ((m->buckets = malloc(n * sizeof(*m->buckets))) == NULL)
            return CW_NOMEM;
        for (size_t i = 0; i < n; i++)
            nau_list_init(&m->buckets[i]);
        m->mask = n - 1;
    }
    *e = (struct nau_match_entry){.peer = peer, .tag = tag, .bytes = bytes};
    nau_list_add_tail(&m->fifo, &e->fifo);
    nau_list_add_tail(nau_match_bucket(m, peer, tag), &e->blink);
    m->n++;
    m->bytes += bytes;
    return CW_OK;
}

void nau_match_remove(struct nau_match *m, struct nau_match_entry *e)
{
    if (!nau_list_linked(&e->fifo))
        return;
    nau_list_del(&e->fifo);
    nau_list_del(&e->blink);
    m->n--;
    m->bytes -= e->bytes;
}

/* The first entry with (@p peer, @p tag) from bucket node @p l on. */
static struct nau_match_entry *nau_match_scan(const struct nau_match *m,
                                              const struct nau_list *l,
                                              uint64_t peer, uint32_t tag)
{
    for (const struct nau_list *b = nau_match_bucket(m, peer, tag); l != b;
         l = l->next) {
        struct nau_match_entry *e =
            nau_container_of(l, struct nau_match_entry, blink);
        if (e->peer == peer && e->tag == tag)
            return e;
    }
    return NULL;
}

struct nau_match_entry *nau_match_lookup(const struct nau_match *m,
                                         uint64_t peer, uint32_t tag)
{
    return nau_match_scan(m, nau_match_bucket(m, peer, tag)->next, peer, tag);
}

struct nau_match_entry *nau_match_next(const struct nau_match *m,
                                       const struct nau_match_entry *e)
{
    return nau_match_scan(m, e->blink.next, e->peer, e->tag);
}
