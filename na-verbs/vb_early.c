/*
 * na-verbs: messages that arrive before anyone posted a receive for them.
 * Each is copied out of its receive buffer, which goes straight back to
 * the SRQ, so a queued message never holds a buffer.
 *
 * Unexpected messages (cls->unexp_q) are all taken by later receives, in
 * order; nothing is dropped.  Past VB_UNEXP_QMAX queued, the credit of each
 * further one is held back from its sender, which then stalls until the
 * queue is half empty again: back-pressure that ends when receives come.
 *
 * Expected messages (cls->early) may never be asked for: the answer to a
 * call that was cancelled or timed out, or a hostile peer's.  Holding back
 * credits for them would wedge the connection for good, so they never
 * do; instead the queue, na-util's matcher, is bounded (VB_EARLY_MAX
 * messages, VB_EARLY_BYTES of payload) and the oldest one is dropped and
 * counted to make room.  Its seeded hash on (peer, tag) keeps matching a
 * newly posted receive cheap however full the queue is, and the oldest of
 * several messages with the same peer and tag is delivered first.
 */
#include <stdlib.h>
#include <string.h>

#include "vb.h"

/* @p spare, if not NULL, is a dropped entry to reuse when it has room. */
static struct vb_early *early_new(vb_class_t *cls, vb_peer_t *peer,
                                  uint32_t tag, const uint8_t *data, size_t len,
                                  struct vb_early *spare)
{
    struct vb_early *e = NULL;
    if (spare && spare->cap >= len)
        e = spare;
    else if (spare)
        free(spare);
    if (!e && (e = malloc(sizeof(*e) + len)))
        e->cap = len;
    if (!e) {
        char name[64];
        cls->stats.dropped++;
        VB_WARN_RL(cls,
                   "out of memory queueing a %zu-byte message from %s: "
                   "dropped (%llu dropped so far)",
                   len, vb_peer_format(peer, name, sizeof(name)),
                   (unsigned long long)cls->stats.dropped);
        return NULL;
    }
    e->peer = peer;
    nau_ptable_ref(&peer->pnode);
    e->m = (struct nau_match_entry){.tag = tag};
    e->len = len;
    if (len)
        memcpy(e->data, data, len);
    return e;
}

void vb_early_free(vb_class_t *cls, struct vb_early *e)
{
    vb_peer_put(cls, e->peer);
    free(e);
}

/* ---- unexpected ---- */

void vb_unexp_queue(struct vb_conn *conn, uint32_t tag, const uint8_t *data,
                    size_t len)
{
    vb_class_t *cls = conn->cls;
    struct vb_early *e = early_new(cls, conn->peer, tag, data, len, NULL);
    if (!e)
        return;
    nau_list_add_tail(&cls->unexp_q.q, &e->m.fifo);
    if (++cls->unexp_q.n > VB_UNEXP_QMAX) {
        /* The caller counted this buffer's credit as owed. */
        conn->owed--;
        conn->withheld++;
    }
}

/* The queue went down: give back the credits held back. */
static void unexp_release(vb_class_t *cls)
{
    if (cls->unexp_q.n > VB_UNEXP_QMAX / 2)
        return;
    for (struct vb_conn *c = cls->conns; c; c = c->next) {
        if (!c->withheld)
            continue;
        c->owed += c->withheld;
        c->withheld = 0;
        vb_send_credits(c, true);
    }
}

struct vb_early *vb_unexp_take(vb_class_t *cls)
{
    struct vb_early *e;
    if (nau_list_empty(&cls->unexp_q.q))
        return NULL;
    e = nau_container_of(cls->unexp_q.q.next, struct vb_early, m.fifo);
    nau_list_del(&e->m.fifo);
    cls->unexp_q.n--;
    unexp_release(cls);
    return e;
}

/* ---- expected ---- */

/* Make room for @p len more bytes by dropping the oldest messages; the
 * last one dropped is returned (its peer reference gone) for reuse, so a
 * full queue takes new messages without allocator churn. */
static struct vb_early *early_evict(vb_class_t *cls, size_t len)
{
    struct vb_early *spare = NULL;
    struct nau_match_entry *m;
    while (nau_match_full(&cls->early, len) &&
           (m = nau_match_oldest(&cls->early))) {
        struct vb_early *e = nau_container_of(m, struct vb_early, m);
        char name[64];
        nau_match_remove(&cls->early, m);
        cls->stats.dropped++;
        VB_WARN_RL(cls,
                   "early queue full: dropped the oldest expected "
                   "message (tag %u from %s) no receive was posted for "
                   "(%llu dropped so far)",
                   m->tag, vb_peer_format(e->peer, name, sizeof(name)),
                   (unsigned long long)cls->stats.dropped);
        vb_peer_put(cls, e->peer);
        free(spare);
        spare = e;
    }
    return spare;
}

void vb_early_put(vb_class_t *cls, vb_peer_t *peer, uint32_t tag,
                  const uint8_t *data, size_t len)
{
    struct vb_early *spare = early_evict(cls, len);
    struct vb_early *e = early_new(cls, peer, tag, data, len, spare);
    if (e && nau_match_insert(&cls->early, &e->m, (uintptr_t)peer, tag, len) !=
                 CW_OK) {
        cls->stats.dropped++;
        VB_WARN_RL(cls, "no memory for the early queue: dropped a message");
        vb_early_free(cls, e);
    }
}

struct vb_early *vb_early_take(vb_class_t *cls, vb_peer_t *peer, uint32_t tag)
{
    struct nau_match_entry *m =
        nau_match_find(&cls->early, (uintptr_t)peer, tag);
    if (!m)
        return NULL;
    nau_match_remove(&cls->early, m);
    return nau_container_of(m, struct vb_early, m);
}

void vb_early_free_all(vb_class_t *cls)
{
    struct nau_match_entry *m;
    struct nau_list *l, *t;
    nau_list_for_each_safe(l, t, &cls->unexp_q.q)
    {
        nau_list_del(l);
        vb_early_free(cls, nau_container_of(l, struct vb_early, m.fifo));
    }
    cls->unexp_q.n = 0;
    while ((m = nau_match_oldest(&cls->early))) {
        nau_match_remove(&cls->early, m);
        vb_early_free(cls, nau_container_of(m, struct vb_early, m));
    }
    nau_match_fini(&cls->early);
}
