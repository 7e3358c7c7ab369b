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
 * do; instead the queue is bounded (VB_EARLY_MAX messages, VB_EARLY_BYTES
 * of payload) and the oldest one is dropped and counted to make room.  A
 * hash on (peer, tag) keeps matching a newly posted receive cheap however
 * full the queue is; within a bucket, arrival order, so the oldest of
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
    peer->refs++;
    e->tag = tag;
    e->len = len;
    e->in_q = e->in_key = (struct vb_elink){NULL, NULL};
    if (len)
        memcpy(e->data, data, len);
    return e;
}

void vb_early_free(vb_class_t *cls, struct vb_early *e)
{
    vb_peer_put(cls, e->peer);
    free(e);
}

/* Both lists an expected message is on are struct vb_equeue; @p by_key
 * says which of its links a list uses. */
static struct vb_elink *link_of(struct vb_early *e, bool by_key)
{
    return by_key ? &e->in_key : &e->in_q;
}

static void q_push(struct vb_equeue *q, struct vb_early *e, bool by_key)
{
    struct vb_elink *l = link_of(e, by_key);
    l->next = NULL;
    l->prev = q->tail;
    if (q->tail)
        link_of(q->tail, by_key)->next = e;
    else
        q->head = e;
    q->tail = e;
    q->n++;
    q->bytes += e->len;
}

static void q_remove(struct vb_equeue *q, struct vb_early *e, bool by_key)
{
    struct vb_elink *l = link_of(e, by_key);
    if (l->prev)
        link_of(l->prev, by_key)->next = l->next;
    else
        q->head = l->next;
    if (l->next)
        link_of(l->next, by_key)->prev = l->prev;
    else
        q->tail = l->prev;
    l->prev = l->next = NULL;
    q->n--;
    q->bytes -= e->len;
}

/* ---- unexpected ---- */

void vb_unexp_queue(struct vb_conn *conn, uint32_t tag, const uint8_t *data,
                    size_t len)
{
    vb_class_t *cls = conn->cls;
    struct vb_early *e = early_new(cls, conn->peer, tag, data, len, NULL);
    if (!e)
        return;
    q_push(&cls->unexp_q, e, false);
    if (cls->unexp_q.n > VB_UNEXP_QMAX) {
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
    struct vb_early *e = cls->unexp_q.head;
    if (!e)
        return NULL;
    q_remove(&cls->unexp_q, e, false);
    unexp_release(cls);
    return e;
}

/* ---- expected ---- */

static struct vb_equeue *bucket_of(vb_class_t *cls, const vb_peer_t *peer,
                                   uint32_t tag)
{
    uint64_t k =
        (uint64_t)(uintptr_t)peer ^ ((uint64_t)tag * 0x9e3779b97f4a7c15ull);
    k ^= k >> 31;
    k *= 0xbf58476d1ce4e5b9ull;
    k ^= k >> 29;
    return &cls->early_by_key[k & (VB_EARLY_BUCKETS - 1)];
}

static void early_unlink(vb_class_t *cls, struct vb_early *e)
{
    q_remove(&cls->early, e, false);
    q_remove(bucket_of(cls, e->peer, e->tag), e, true);
}

/* Make room for @p len more bytes by dropping the oldest messages; the
 * last one dropped is returned (its peer reference gone) for reuse, so a
 * full queue takes new messages without allocator churn. */
static struct vb_early *early_evict(vb_class_t *cls, size_t len)
{
    struct vb_early *spare = NULL;
    while (cls->early.head && (cls->early.n >= VB_EARLY_MAX ||
                               cls->early.bytes + len > VB_EARLY_BYTES)) {
        struct vb_early *e = cls->early.head;
        char name[64];
        early_unlink(cls, e);
        cls->stats.dropped++;
        VB_WARN_RL(cls,
                   "early queue full: dropped the oldest expected "
                   "message (tag %u from %s) no receive was posted for "
                   "(%llu dropped so far)",
                   e->tag, vb_peer_format(e->peer, name, sizeof(name)),
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
    if (!e)
        return;
    q_push(&cls->early, e, false);
    q_push(bucket_of(cls, peer, tag), e, true);
}

struct vb_early *vb_early_take(vb_class_t *cls, vb_peer_t *peer, uint32_t tag)
{
    if (!cls->early.n)
        return NULL;
    for (struct vb_early *e = bucket_of(cls, peer, tag)->head; e;
         e = e->in_key.next) {
        if (e->peer == peer && e->tag == tag) {
            early_unlink(cls, e);
            return e;
        }
    }
    return NULL;
}

void vb_early_free_all(vb_class_t *cls)
{
    struct vb_early *e;
    while ((e = cls->unexp_q.head)) {
        q_remove(&cls->unexp_q, e, false);
        vb_early_free(cls, e);
    }
    while ((e = cls->early.head)) {
        early_unlink(cls, e);
        vb_early_free(cls, e);
    }
}
