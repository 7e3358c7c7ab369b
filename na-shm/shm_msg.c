/*
 * na-shm: messages.  The ring is a bounded MPSC queue with a sequence
 * number per slot: a producer claims a slot by CAS on the tail, fills it
 * and publishes it by storing seq = pos + 1; the consumer frees it by
 * storing seq = pos + nslots.  No locks, no system calls; the eventfd is
 * written only if the consumer said it may sleep, once per sleep.
 */
#include <stdlib.h>
#include <string.h>

#include "shm.h"

static inline struct shm_slot *shm_slots(struct shm_seg_hdr *seg)
{
    return (struct shm_slot *)(void *)(seg + 1);
}

bool shm_ring_push(struct shm_peer *dest, uint32_t type, uint32_t tag,
                   const void *buf, size_t len)
{
    struct cw_na_class *cls = dest->cls;
    struct shm_seg_hdr *seg = dest->seg;
    struct shm_slot *slots = shm_slots(seg);
    uint64_t mask = dest->nslots - 1;
    uint64_t pos = atomic_load_explicit(&seg->tail, memory_order_relaxed);
    struct shm_slot *s;
    /* The ring is the receiver's memory: a slot ahead of a tail that does
     * not move (only a corrupt ring has one) or a tail that never settles
     * ends the attempt as a full ring would, and the send waits in the
     * backlog. */
    for (unsigned tries = 0;; tries++) {
        if (tries == SHM_PUSH_TRIES)
            return false;
        s = &slots[pos & mask];
        uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
        int64_t diff = (int64_t)(seq - pos);
        if (diff == 0) {
            if (atomic_compare_exchange_weak_explicit(&seg->tail, &pos, pos + 1,
                                                      memory_order_relaxed,
                                                      memory_order_relaxed))
                break;
        } else if (diff < 0) {
            return false; /* full */
        } else {
            /* The slot was claimed at pos already, so the tail has moved
             * on (that claim happens before the seq we acquired). */
            uint64_t tail =
                atomic_load_explicit(&seg->tail, memory_order_relaxed);
            if (tail == pos)
                return false;
            pos = tail;
        }
    }
    atomic_store_explicit(&s->sender_uid, cls->uid, memory_order_relaxed);
    s->type = type;
    s->tag = tag;
    s->len = (uint32_t)len;
    s->name_len = cls->name_len;
    memcpy(s->sender_name, cls->name, SHM_NAME_MAX);
    if (len)
        memcpy(s->data, buf, len);
    atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
    /* Pairs with the fence in shm_safe_to_sleep: either the consumer sees
     * the slot or we see its sleeping flag.  The sender that sees it takes
     * it and wakes the consumer; the pushes after it, until the consumer
     * sleeps again, find it clear and cost no system call: the woken
     * consumer drains the whole ring, and sets the flag again (and then
     * looks at the ring) before it sleeps. */
    atomic_thread_fence(memory_order_seq_cst);
    if (!dest->self &&
        atomic_load_explicit(&seg->sleeping, memory_order_relaxed) &&
        atomic_exchange_explicit(&seg->sleeping, 0, memory_order_relaxed))
        shm_peer_wake(dest);
    return true;
}

bool shm_ring_has_room(struct shm_peer *dest)
{
    struct shm_seg_hdr *seg = dest->seg;
    uint64_t pos = atomic_load_explicit(&seg->tail, memory_order_relaxed);
    struct shm_slot *s = &shm_slots(seg)[pos & (dest->nslots - 1)];
    return atomic_load_explicit(&s->seq, memory_order_acquire) == pos;
}

/* Before blocking with sends backlogged: ask each full receiver to wake us
 * when it frees a slot.  False if one has room already (retry instead). */
bool shm_backlog_arm(struct cw_na_class *cls)
{
    for (struct nau_list *l = cls->peers.next; l != &cls->peers; l = l->next) {
        struct shm_peer *p = nau_container_of(l, struct shm_peer, link);
        if (nau_list_empty(&p->backlog) || !p->seg)
            continue;
        atomic_store_explicit(&p->seg->senders_waiting, 1,
                              memory_order_relaxed);
        /* Pairs with the fence in shm_ring_drain: either we see the room
         * or the consumer sees the flag. */
        atomic_thread_fence(memory_order_seq_cst);
        if (shm_ring_has_room(p))
            return false;
    }
    return true;
}

bool shm_ring_pending(struct cw_na_class *cls)
{
    uint64_t head = cls->head;
    struct shm_slot *s = &shm_slots(cls->seg)[head & (cls->nslots - 1)];
    return atomic_load_explicit(&s->seq, memory_order_acquire) == head + 1;
}

static void shm_deliver(struct cw_na_op *op, const void *data, size_t len,
                        uint32_t tag, struct shm_peer *source)
{
    struct cw_na_class *cls = source->cls;
    if (len > op->len) {
        shm_op_complete(cls, op, CW_OVERFLOW);
        return;
    }
    if (len)
        memcpy(op->rbuf, data, len);
    op->rlen = len;
    op->tag = tag;
    if (op->type == CW_NA_OP_RECV_UNEXPECTED) {
        shm_peer_ref(source);
        op->source = source;
    }
    shm_op_complete(cls, op, CW_OK);
}

static struct cw_na_op *shm_match_expected(struct cw_na_class *cls,
                                           uint64_t uid, uint32_t tag)
{
    for (struct nau_list *l = cls->exp_posted.next; l != &cls->exp_posted;
         l = l->next) {
        struct cw_na_op *op = nau_container_of(l, struct cw_na_op, link);
        if (op->tag == tag && op->peer->uid == uid) {
            nau_list_del(l);
            return op;
        }
    }
    return NULL;
}

/* What the consumer uses of a published slot.  The producer can still
 * write the slot, so each field is read from it once (volatile: not
 * again behind our back) and only these copies are checked and used. */
struct shm_slot_head {
    uint32_t type;
    uint32_t tag;
    uint32_t len;
    uint32_t name_len;
    uint64_t uid;
};

static bool shm_slot_read(const struct shm_slot *s, struct shm_slot_head *h)
{
    const volatile struct shm_slot *v = s;
    h->type = v->type;
    h->tag = v->tag;
    h->len = v->len;
    h->name_len = v->name_len;
    h->uid = atomic_load_explicit(&s->sender_uid, memory_order_relaxed);
    return (h->type == SHM_MSG_UNEXPECTED || h->type == SHM_MSG_EXPECTED) &&
           h->len <= SHM_EAGER_SIZE && h->uid != 0;
}

/* Copy the sender's name out of the slot and check the copy. */
static bool shm_slot_name(const struct shm_slot *s, uint32_t name_len,
                          char name[SHM_NAME_MAX])
{
    memcpy(name, s->sender_name, SHM_NAME_MAX);
    return name_len < SHM_NAME_MAX && name[name_len] == '\0' &&
           shm_name_valid(name, name_len);
}

/* Take early message @p e off its queue. */
static void shm_early_unlink(struct cw_na_class *cls, struct shm_early *e)
{
    if (nau_list_linked(&e->m.blink)) {
        nau_match_remove(&cls->early, &e->m);
    } else {
        nau_list_del(&e->m.fifo);
        cls->nearly_unexp--;
    }
}

static void shm_early_free(struct cw_na_class *cls, struct shm_early *e)
{
    shm_early_unlink(cls, e);
    shm_peer_unref(e->source);
    free(e);
}

/* The early queue is full: make room by dropping its oldest expected
 * message.  An expected message nobody posted a receive for (a response
 * that came after its receive was cancelled, or a hostile peer's) would
 * otherwise stay for good, and enough of them would stop this ring from
 * being drained at all.  False if every entry is unexpected: those are
 * taken by the next posted receives, so waiting for them is back-pressure
 * that ends. */
static bool shm_early_evict_expected(struct cw_na_class *cls)
{
    struct nau_match_entry *m = nau_match_oldest(&cls->early);

    if (m == NULL)
        return false;
    cls->dropped++;
    SHM_WARN_RL(cls,
                "early queue full: dropped an expected message "
                "(tag %u) no receive was posted for (%llu dropped so "
                "far)",
                m->tag, (unsigned long long)cls->dropped);
    shm_early_free(cls, nau_container_of(m, struct shm_early, m));
    return true;
}

/* Keep the message of slot @p s (@p h: its checked fields) from @p src
 * until a receive takes it; false if it must stay in the ring. */
static bool shm_early_keep(struct cw_na_class *cls, const struct shm_slot *s,
                           const struct shm_slot_head *h, struct shm_peer *src)
{
    if (cls->nearly_unexp + cls->early.n >= SHM_EARLY_MAX &&
        !shm_early_evict_expected(cls))
        return false;
    struct shm_early *e = malloc(sizeof(*e) + h->len);
    if (!e)
        return false;
    e->m.blink.next = NULL;
    e->m.tag = h->tag;
    e->len = h->len;
    memcpy(e->data, s->data, h->len);
    if (h->type == SHM_MSG_UNEXPECTED) {
        nau_list_add_tail(&cls->early_unexp, &e->m.fifo);
        cls->nearly_unexp++;
    } else if (nau_match_insert(&cls->early, &e->m, h->uid, h->tag, 0) !=
               CW_OK) {
        free(e);
        return false;
    }
    e->source = src;
    shm_peer_ref(src);
    return true;
}

/* The sender of a slot whose id is held by a record known only from
 * ring slots: that record's name must be the slot's.  Otherwise one of
 * the two was forged; the endpoint that really has the id said HELLO
 * before it pushed, and reading that HELLO forgets the forged record.
 * False (drop the slot) if the names still disagree. */
static bool shm_slot_sender_check(struct cw_na_class *cls,
                                  const struct shm_slot *s,
                                  const struct shm_slot_head *h,
                                  struct shm_peer **src_p)
{
    char name[SHM_NAME_MAX];
    if (!shm_slot_name(s, h->name_len, name))
        return false;
    if (strcmp(name, (*src_p)->name) == 0)
        return true;
    shm_hello_read_pending(cls);
    *src_p = shm_peer_find_uid(cls, h->uid);
    return !*src_p || !shm_peer_slot_only(*src_p) ||
           strcmp(name, (*src_p)->name) == 0;
}

/* Take one published slot (@p h: its checked fields); false if it must
 * stay (early queue full of unexpected messages, no memory).  A slot from
 * an unknown sender with a bad name, or from one more unknown sender than
 * the table takes, is dropped, as is one whose name contradicts the
 * record of its id known only from ring slots. */
static bool shm_slot_consume(struct cw_na_class *cls, struct shm_slot *s,
                             const struct shm_slot_head *h)
{
    struct shm_peer *src = shm_peer_find_uid(cls, h->uid);
    struct cw_na_op *op = NULL;

    if (src && shm_peer_slot_only(src) &&
        !shm_slot_sender_check(cls, s, h, &src)) {
        cls->dropped++;
        SHM_WARN_RL(cls,
                    "dropped a message whose sender name contradicts "
                    "the one its id was first seen with (%llu dropped so "
                    "far)",
                    (unsigned long long)cls->dropped);
        return true;
    }
    if (!src) {
        char name[SHM_NAME_MAX];
        if (!shm_slot_name(s, h->name_len, name)) {
            cls->dropped++;
            SHM_WARN_RL(cls,
                        "dropped a message with a malformed sender name "
                        "(%llu dropped so far)",
                        (unsigned long long)cls->dropped);
            return true;
        }
        cw_status_t st = shm_peer_from_slot(cls, name, h->uid, &src);
        if (st == CW_OVERFLOW) {
            cls->dropped++;
            SHM_WARN_RL(cls,
                        "dropped a message from unknown sender "
                        "shm://%s: %u peers known only from the ring are "
                        "in use (%llu dropped so far)",
                        name, cls->nunsolicited,
                        (unsigned long long)cls->dropped);
            return true;
        }
        if (st != CW_OK)
            return false;
    }
    if (h->type == SHM_MSG_EXPECTED) {
        op = shm_match_expected(cls, h->uid, h->tag);
    } else if (!nau_list_empty(&cls->unexp_posted)) {
        op = nau_container_of(cls->unexp_posted.next, struct cw_na_op, link);
        nau_list_del(&op->link);
    }
    if (op) {
        shm_deliver(op, s->data, h->len, h->tag, src);
        return true;
    }
    return shm_early_keep(cls, s, h, src);
}

unsigned shm_ring_drain(struct cw_na_class *cls, unsigned max)
{
    struct shm_seg_hdr *seg = cls->seg;
    struct shm_slot *slots = shm_slots(seg);
    uint64_t mask = cls->nslots - 1;
    uint64_t head = cls->head;
    unsigned n = 0;
    while (n < max) {
        struct shm_slot *s = &slots[head & mask];
        if (atomic_load_explicit(&s->seq, memory_order_acquire) != head + 1)
            break;
        struct shm_slot_head h;
        if (!shm_slot_read(s, &h)) {
            cls->dropped++;
            SHM_WARN_RL(cls,
                        "dropped a malformed message in slot %llu "
                        "(%llu dropped so far)",
                        (unsigned long long)head,
                        (unsigned long long)cls->dropped);
        } else if (!shm_slot_consume(cls, s, &h)) {
            break;
        }
        atomic_store_explicit(&s->sender_uid, 0, memory_order_relaxed);
        atomic_store_explicit(&s->seq, head + cls->nslots,
                              memory_order_release);
        head++;
        cls->head = head;
        atomic_store_explicit(&seg->head, head, memory_order_relaxed);
        n++;
    }
    if (n) {
        atomic_thread_fence(memory_order_seq_cst);
        if (atomic_load_explicit(&seg->senders_waiting, memory_order_relaxed))
            shm_wake_senders(cls);
    }
    return n;
}

void shm_ring_unstick(struct cw_na_class *cls)
{
    struct shm_seg_hdr *seg = cls->seg;
    uint64_t head = cls->head;
    struct shm_slot *s = &shm_slots(seg)[head & (cls->nslots - 1)];
    if (atomic_load_explicit(&s->seq, memory_order_acquire) == head + 1 ||
        atomic_load_explicit(&seg->tail, memory_order_relaxed) == head) {
        cls->stuck_since = 0; /* published, or nothing claimed */
        return;
    }
    uint64_t now = cls->host->now_ns();
    if (cls->stuck_since == 0 || cls->stuck_head != head) {
        cls->stuck_head = head;
        cls->stuck_since = now;
        return;
    }
    uint64_t uid = atomic_load_explicit(&s->sender_uid, memory_order_relaxed);
    if (now - cls->stuck_since < SHM_STUCK_NS || uid == 0)
        return; /* slow, or the claimer is not known yet */
    /* Every producer connects before it pushes, so a live one is a peer
     * here whose connection is open; only a gone one is skipped.  One
     * known only from ring slots has not connected (its HELLO, if any,
     * is read first). */
    struct shm_peer *p = shm_peer_find_uid(cls, uid);
    if (p && shm_peer_slot_only(p)) {
        shm_hello_read_pending(cls);
        p = shm_peer_find_uid(cls, uid);
    }
    if (p && !shm_peer_slot_only(p))
        return;
    cls->dropped++;
    SHM_WARN_RL(cls,
                "skipping ring slot %llu: claimed %.1f s ago by an "
                "endpoint that is gone and never published",
                (unsigned long long)head,
                (double)(now - cls->stuck_since) / 1e9);
    atomic_store_explicit(&s->sender_uid, 0, memory_order_relaxed);
    atomic_store_explicit(&s->seq, head + cls->nslots, memory_order_release);
    cls->head = head + 1;
    atomic_store_explicit(&seg->head, cls->head, memory_order_relaxed);
    cls->stuck_since = 0;
}

unsigned shm_early_drop(struct cw_na_class *cls, const struct shm_peer *source)
{
    struct nau_list *queues[] = {&cls->early_unexp, &cls->early.fifo}, *l, *t;
    unsigned n = 0;

    for (size_t i = 0; i < 2; i++) {
        nau_list_for_each_safe(l, t, queues[i])
        {
            struct shm_early *e = nau_container_of(l, struct shm_early, m.fifo);

            if (source == NULL || e->source == source) {
                shm_early_free(cls, e);
                n++;
            }
        }
    }
    return n;
}

/* A posted receive may match a message that arrived before it. */
static bool shm_early_match(struct cw_na_class *cls, struct cw_na_op *op)
{
    struct nau_match_entry *m =
        op->type == CW_NA_OP_RECV_EXPECTED
            ? nau_match_find(&cls->early, op->peer->uid, op->tag)
        : nau_list_empty(&cls->early_unexp)
            ? NULL
            : nau_container_of(cls->early_unexp.next, struct nau_match_entry,
                               fifo);

    if (m == NULL)
        return false;
    struct shm_early *e = nau_container_of(m, struct shm_early, m);
    shm_deliver(op, e->data, e->len, m->tag, e->source);
    shm_early_free(cls, e);
    return true;
}

void shm_backlog_retry(struct cw_na_class *cls)
{
    for (struct nau_list *l = cls->peers.next;
         l != &cls->peers && cls->nbacklog; l = l->next) {
        struct shm_peer *p = nau_container_of(l, struct shm_peer, link);
        while (!nau_list_empty(&p->backlog)) {
            struct cw_na_op *op =
                nau_container_of(p->backlog.next, struct cw_na_op, link);
            uint32_t type = op->type == CW_NA_OP_SEND_UNEXPECTED
                                ? SHM_MSG_UNEXPECTED
                                : SHM_MSG_EXPECTED;
            if (!shm_ring_push(p, type, op->tag, op->sbuf, op->len))
                break;
            nau_list_del(&op->link);
            cls->nbacklog--;
            shm_op_complete(cls, op, CW_OK);
        }
    }
}

/* The checks of a send, and its peer attached. */
static cw_status_t shm_send_peer(cw_na_class_t *cls, const void *buf,
                                 size_t len, cw_na_addr_t *dest,
                                 struct shm_peer **peer_p)
{
    struct shm_peer *peer = shm_peer_of(dest);

    if (!peer || (len && !buf))
        return CW_INVALID_ARG;
    if (len > SHM_EAGER_SIZE)
        return CW_OVERFLOW;
    *peer_p = peer;
    return shm_peer_attach(cls, peer);
}

static cw_status_t shm_msg_send(cw_na_class_t *cls, enum cw_na_op_type type,
                                const void *buf, size_t len, cw_na_addr_t *dest,
                                uint32_t tag, cw_na_cb_t cb, void *arg,
                                cw_na_op_t **op_p)
{
    struct shm_peer *peer;
    cw_status_t st =
        cb ? shm_send_peer(cls, buf, len, dest, &peer) : CW_INVALID_ARG;
    if (st != CW_OK)
        return st;
    struct cw_na_op *op = shm_op_new(cls, type, cb, arg);
    if (!op)
        return CW_NOMEM;
    shm_peer_ref(peer);
    op->peer = peer;
    op->sbuf = buf;
    op->len = len;
    op->tag = tag;
    uint32_t mtype = type == CW_NA_OP_SEND_UNEXPECTED ? SHM_MSG_UNEXPECTED
                                                      : SHM_MSG_EXPECTED;
    if (nau_list_empty(&peer->backlog) &&
        shm_ring_push(peer, mtype, tag, buf, len)) {
        shm_op_complete(cls, op, CW_OK);
    } else {
        /* Ring full: keep order behind earlier sends, retried in progress. */
        nau_list_add_tail(&peer->backlog, &op->link);
        cls->nbacklog++;
    }
    if (op_p)
        *op_p = op;
    return CW_OK;
}

cw_status_t shm_msg_send_unexpected(cw_na_class_t *cls, const void *buf,
                                    size_t len, cw_na_addr_t *dest,
                                    uint32_t tag, cw_na_cb_t cb, void *arg,
                                    cw_na_op_t **op_p)
{
    return shm_msg_send(cls, CW_NA_OP_SEND_UNEXPECTED, buf, len, dest, tag, cb,
                        arg, op_p);
}

cw_status_t shm_msg_send_expected(cw_na_class_t *cls, const void *buf,
                                  size_t len, cw_na_addr_t *dest, uint32_t tag,
                                  cw_na_cb_t cb, void *arg, cw_na_op_t **op_p)
{
    return shm_msg_send(cls, CW_NA_OP_SEND_EXPECTED, buf, len, dest, tag, cb,
                        arg, op_p);
}

/* A message that fits a ring slot is copied into the peer's ring and is
 * then as sent as it will ever be: no operation is needed for it, nor a
 * completion to run later (most of what a send costs here).  Not while
 * earlier sends wait for room, which it must not overtake. */
cw_status_t shm_msg_inject(cw_na_class_t *cls, const void *buf, size_t len,
                           cw_na_addr_t *dest, uint32_t tag, bool expected)
{
    struct shm_peer *peer;
    cw_status_t st = shm_send_peer(cls, buf, len, dest, &peer);

    if (st != CW_OK)
        return st;
    if (!nau_list_empty(&peer->backlog) ||
        !shm_ring_push(peer, expected ? SHM_MSG_EXPECTED : SHM_MSG_UNEXPECTED,
                       tag, buf, len))
        return CW_AGAIN;
    return CW_OK;
}

cw_status_t shm_msg_recv_unexpected(cw_na_class_t *cls, void *buf, size_t len,
                                    cw_na_cb_t cb, void *arg, cw_na_op_t **op_p)
{
    if (!cb || (len && !buf))
        return CW_INVALID_ARG;
    struct cw_na_op *op = shm_op_new(cls, CW_NA_OP_RECV_UNEXPECTED, cb, arg);
    if (!op)
        return CW_NOMEM;
    op->rbuf = buf;
    op->len = len;
    if (!shm_early_match(cls, op))
        nau_list_add_tail(&cls->unexp_posted, &op->link);
    if (op_p)
        *op_p = op;
    return CW_OK;
}

cw_status_t shm_msg_recv_expected(cw_na_class_t *cls, void *buf, size_t len,
                                  cw_na_addr_t *source, uint32_t tag,
                                  cw_na_cb_t cb, void *arg, cw_na_op_t **op_p)
{
    struct shm_peer *peer = shm_peer_of(source);
    if (!peer || !cb || (len && !buf))
        return CW_INVALID_ARG;
    struct cw_na_op *op = shm_op_new(cls, CW_NA_OP_RECV_EXPECTED, cb, arg);
    if (!op)
        return CW_NOMEM;
    shm_peer_ref(peer);
    op->peer = peer;
    op->rbuf = buf;
    op->len = len;
    op->tag = tag;
    if (!shm_early_match(cls, op)) {
        if (peer->state == SHM_PEER_DEAD) /* nothing more will come */
            shm_op_complete(cls, op, CW_DISCONNECTED);
        else
            nau_list_add_tail(&cls->exp_posted, &op->link);
    }
    if (op_p)
        *op_p = op;
    return CW_OK;
}
