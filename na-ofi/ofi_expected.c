/*
 * na-ofi expected messages, matched by the plugin rather than the provider.
 *
 * Every expected message is an untagged send (FI_MSG; a tagged one on
 * OFI_TAG_EXP where the provider wants that) with the plugin header in
 * front (the sender's address and the user's tag).  The plugin keeps
 * catch-all receive buffers posted for them, so the provider never has to
 * hold an expected message nobody asked for: rxm
 * would keep each one in a whole rx buffer until the connection closes, and
 * fi_shm scans its growing unexpected list for every message.
 *
 * Where the provider offers FI_MULTI_RECV (rxm, fi_shm, sockets), the
 * catch-alls are a few large multi-receive buffers instead of one buffer
 * per message: each message takes only its own length, so a flood of small
 * ones fills them thousands at a time before rxm has to keep any in its own
 * buffers, and the provider releases a buffer (FI_MULTI_RECV in the
 * completion) once less than one eager message fits; it is reposted then.
 * Each message is copied out when its completion is read, so a released
 * buffer holds nothing the plugin still needs.
 *
 * A message that arrives is matched in software against the posted expected
 * receives (same sender address, same tag, oldest receive first) and copied
 * into the user's buffer.  One that matches nothing goes to the early queue,
 * which a later receive for the same (source, tag) consults first.  The
 * early queue is bounded (early_max messages, OFI_EARLY_BYTES_MAX bytes):
 * beyond that the oldest message is dropped and counted.  Both are na-util
 * matchers keyed by the tag and the hash the peer table gives the sender's
 * address (seeded: the address is the sender's word); each candidate's
 * address is compared in full.
 *
 * Unexpected messages.  Where expected messages are untagged
 * (unexp_untagged), unexpected ones are too, with OFI_KIND_UNEXP in their
 * header, and land in the same catch-alls.  Posted on the provider's
 * tagged receives instead, as before, each one that came while the user's
 * receives were all taken waited in rxm's unexpected queue in a whole rxm
 * buffer, from a pool that never shrinks: a peer flooding a gateway with
 * small requests grew it by 40-82 MiB, for good (docs/reliability.md).
 * Now each is copied out of the catch-all when its completion is read: to
 * the oldest receive the user posted, or, when none is, to a queue of the
 * plugin's own, per sender and served in turn (one message from each
 * sender with any waiting, round and round), bounded in all
 * (unexpected_queue_bytes) and per sender (unexpected_peer_bytes); beyond
 * either it is dropped and counted.  na-ucx does the same with its
 * unexpected queue.
 */
#include <assert.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "ofi.h"

#define OFI_EXP_BUFS_MIN 4u
#define OFI_EXP_BUFS_MAX 512u
/* Multi-receive catch-alls: the pool in this many buffers, so that while
 * one waits to be reposted the others take what arrives. */
#define OFI_EXP_MULTI_BUFS 4u
#define OFI_DROP_LOG_NS    1000000000ull

struct ofi_exp_buf {
    struct ofi_ctx ctx;
    bool posted;
    struct ofi_hdr hdr; /* the payload follows in data[] */
    uint8_t data[];
};

/* The "peer" under which the matchers file expected messages and their
 * receives: none, the tag alone.  An expected message's tag is one the
 * receiver chose (the core's response tags, a keyed permutation a network,
 * unique among its receives posted), so the tag alone finds a short
 * bucket, and the sender's address is compared on each candidate.  Keying
 * by the address as well cost a hash of it for every message that arrived
 * (about 100 instructions a round trip at the caller). */
#define OFI_EXP_KEY 0

struct ofi_early {
    struct nau_match_entry m; /* cls->early */
    uint16_t addrlen;
    uint8_t addr[OFI_ADDR_MAX];
    size_t len;
    size_t cap; /* room in data[] */
    uint8_t data[];
};

/* An unexpected message waiting for a receive (unexp_untagged). */
struct ofi_umsg {
    struct nau_list link;      /* its sender's uq */
    struct nau_slab *slab;     /* the slab it lies in, or NULL: malloc() */
    struct cw_na_addr *source; /* reference, handed to the receive */
    uint32_t tag;
    size_t len;
    uint8_t data[];
};
/* What a queued message is charged beyond its length: its record and
 * the allocator's header, so that a flood of empty messages is bounded
 * too. */
#define OFI_UMSG_OVERHEAD (sizeof(struct ofi_umsg) + 16u)

/* Smallest room an early message gets, so that an evicted entry can carry
 * the next small message without another allocation. */
#define OFI_EARLY_MIN_CAP 256u

static bool ofi_same_addr(const struct cw_na_addr *peer, const uint8_t *addr,
                          uint16_t addrlen)
{
    return peer->len == addrlen && memcmp(peer->raw, addr, addrlen) == 0;
}

static int ofi_exp_recv_multi(struct cw_na_class *cls, struct ofi_exp_buf *b)
{
    struct iovec iov = {&b->hdr, cls->exp_buf_bytes};
    struct fi_msg msg = {
        .msg_iov = &iov,
        .iov_count = 1,
        .addr = FI_ADDR_UNSPEC,
        .context = &b->ctx,
    };

    return (int)fi_recvmsg(cls->ep, &msg, FI_MULTI_RECV);
}

static cw_status_t ofi_exp_post_buf(struct cw_na_class *cls,
                                    struct ofi_exp_buf *b)
{
    size_t len = cls->exp_buf_bytes;
    int rc =
        cls->exp_multi ? ofi_exp_recv_multi(cls, b)
        : cls->exp_untagged
            ? (int)fi_recv(cls->ep, &b->hdr, len, NULL, FI_ADDR_UNSPEC, &b->ctx)
            : (int)fi_trecv(cls->ep, &b->hdr, len, NULL, FI_ADDR_UNSPEC,
                            OFI_TAG_EXP, 0, &b->ctx);

    if (rc == 0) {
        b->posted = true;
        cls->exp_unposted--;
        return CW_OK;
    }
    if (rc == -FI_EAGAIN)
        return CW_AGAIN; /* progress() retries while exp_unposted > 0 */
    OFI_ERR(cls, "posting a receive for expected messages failed: %s",
            fi_strerror(-rc));
    return ofi_status(rc);
}

cw_status_t ofi_exp_post_bufs(struct cw_na_class *cls)
{
    for (unsigned i = 0; i < cls->nexp_bufs && cls->exp_unposted > 0; i++) {
        struct ofi_exp_buf *b = cls->exp_bufs[i];
        cw_status_t st;

        if (b->posted)
            continue;
        st = ofi_exp_post_buf(cls, b);
        if (st == CW_AGAIN)
            return CW_OK;
        if (st != CW_OK)
            return st;
    }
    return CW_OK;
}

/* Multi-receive catch-alls where the provider offers them: the provider
 * releases a buffer once less than one eager message fits in it. */
static bool ofi_exp_multi_setup(struct cw_na_class *cls)
{
    size_t min = OFI_HDR_SIZE + cls->eager_size;
    int rc;

    if (!cls->multi_recv || !(cls->info->caps & FI_MULTI_RECV))
        return false;
    rc = fi_setopt(&cls->ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min,
                   sizeof(min));
    if (rc != 0) {
        OFI_DBG(cls, "FI_OPT_MIN_MULTI_RECV: %s; one buffer per message",
                fi_strerror(-rc));
        return false;
    }
    cls->exp_buf_bytes = cls->exp_pool_bytes / OFI_EXP_MULTI_BUFS;
    if (cls->exp_buf_bytes < 4 * min)
        cls->exp_buf_bytes = 4 * min;
    return true;
}

cw_status_t ofi_exp_init(struct cw_na_class *cls)
{
    size_t n;

    nau_list_init(&cls->unexp_posted);
    nau_list_init(&cls->unexp_ready);
    nau_match_init(&cls->exp_posted, UINT_MAX, SIZE_MAX, nau_seed());
    nau_match_init(&cls->early, (unsigned)cls->early_max, OFI_EARLY_BYTES_MAX,
                   nau_seed());
    cls->exp_multi = ofi_exp_multi_setup(cls);
    if (cls->exp_multi) {
        n = OFI_EXP_MULTI_BUFS;
    } else {
        cls->exp_buf_bytes = OFI_HDR_SIZE + cls->eager_size;
        n = cls->exp_pool_bytes /
            (sizeof(struct ofi_exp_buf) + cls->eager_size);
        if (n < OFI_EXP_BUFS_MIN)
            n = OFI_EXP_BUFS_MIN;
        if (n > OFI_EXP_BUFS_MAX)
            n = OFI_EXP_BUFS_MAX;
    }
    /* hdr is followed by data[]: a buffer receives exp_buf_bytes there. */
    size_t size =
        sizeof(struct ofi_exp_buf) + cls->exp_buf_bytes - OFI_HDR_SIZE;
    cls->exp_bufs = calloc(n, sizeof(*cls->exp_bufs));
    if (cls->exp_bufs == NULL)
        return CW_NOMEM;
    for (; cls->nexp_bufs < n; cls->nexp_bufs++) {
        struct ofi_exp_buf *b = calloc(1, size);

        if (b == NULL)
            return CW_NOMEM; /* finalize frees what was allocated */
        b->ctx.kind = OFI_CTX_EXP_RECV;
        cls->exp_bufs[cls->nexp_bufs] = b;
        cls->exp_unposted++;
    }
    return ofi_exp_post_bufs(cls);
}

static void ofi_early_free(struct cw_na_class *cls, struct ofi_early *e)
{
    nau_match_remove(&cls->early, &e->m);
    free(e);
}

/* Hands an unexpected message (from @p src, a reference the receive
 * takes) to the receive @p op and completes it. */
static void ofi_unexp_deliver(struct cw_na_class *cls, struct cw_na_op *op,
                              struct cw_na_addr *src, uint32_t tag,
                              const void *data, size_t len)
{
    op->source = src;
    op->tag = tag;
    op->recv_len = len;
    if (len > op->len) {
        ofi_op_finish(cls, op, CW_OVERFLOW);
        return;
    }
    if (len > 0)
        memcpy(op->buf, data, len);
    ofi_op_finish(cls, op, CW_OK);
}

/* Queued messages lie in slabs of the instance's own (nau_slab.h),
 * unmapped once emptied, at most unexpected_queue_bytes of them. */
static void ofi_umsg_free(struct cw_na_class *cls, struct ofi_umsg *m)
{
    nau_slab_free(&cls->slabs, m, sizeof(*m) + m->len, m->slab);
}

/* The next queued message: the oldest of the sender whose turn it is,
 * which then goes to the back of the line if it has more. */
static struct ofi_umsg *ofi_unexp_next(struct cw_na_class *cls)
{
    struct cw_na_addr *peer =
        nau_container_of(cls->unexp_ready.next, struct cw_na_addr, uq_link);
    struct ofi_umsg *m = nau_container_of(peer->uq.next, struct ofi_umsg, link);
    size_t charge = OFI_UMSG_OVERHEAD + m->len;

    nau_list_del(&m->link);
    nau_list_del(&peer->uq_link);
    if (!nau_list_empty(&peer->uq))
        nau_list_add_tail(&cls->unexp_ready, &peer->uq_link);
    cls->unexp_queued -= charge;
    peer->uq_bytes -= charge;
    return m;
}

/* Posting an unexpected receive (unexp_untagged): a queued message
 * completes it at once, otherwise it waits for the next one. */
cw_status_t ofi_unexp_recv_post(struct cw_na_class *cls, struct cw_na_op *op)
{
    if (!nau_list_empty(&cls->unexp_ready)) {
        struct ofi_umsg *m = ofi_unexp_next(cls);

        ofi_unexp_deliver(cls, op, m->source, m->tag, m->data, m->len);
        ofi_umsg_free(cls, m);
        return CW_OK;
    }
    nau_list_add_tail(&cls->unexp_posted, &op->link);
    op->unexp_waiting = true;
    return CW_OK;
}

/* An unexpected message read from a catch-all. */
static void ofi_unexp_arrived(struct cw_na_class *cls, const struct ofi_hdr *h,
                              const void *data, size_t len)
{
    size_t charge = OFI_UMSG_OVERHEAD + len;
    struct cw_na_addr *src;
    struct nau_slab *slab;
    struct ofi_umsg *m;

    if (ofi_peer_get(cls, h->addr, h->addrlen, &src) != CW_OK) {
        ofi_drop_note(cls, "unexpected, sender's address refused");
        return;
    }
    ofi_peer_alive(cls, src);
    if (!nau_list_empty(&cls->unexp_posted)) {
        struct cw_na_op *op =
            nau_container_of(cls->unexp_posted.next, struct cw_na_op, link);

        nau_list_del(&op->link);
        op->unexp_waiting = false;
        ofi_unexp_deliver(cls, op, src, h->tag, data, len);
        return;
    }
    if (charge > cls->unexp_queue_max - cls->unexp_queued) {
        ofi_addr_free(cls, src);
        ofi_drop_note(cls, "unexpected, queue full (no receive posted)");
        return;
    }
    if (charge > cls->unexp_peer_max - src->uq_bytes) {
        ofi_addr_free(cls, src);
        ofi_drop_note(cls, "unexpected, its sender's share of the queue is "
                           "full (no receive posted)");
        return;
    }
    m = nau_slab_alloc(&cls->slabs, sizeof(*m) + len, cls->unexp_queue_max,
                       &slab);
    if (m == NULL) {
        ofi_addr_free(cls, src);
        ofi_drop_note(cls, "unexpected, no memory to queue it");
        return;
    }
    m->slab = slab;
    m->source = src;
    m->tag = h->tag;
    m->len = len;
    if (len > 0)
        memcpy(m->data, data, len);
    nau_list_add_tail(&src->uq, &m->link);
    if (!nau_list_linked(&src->uq_link))
        nau_list_add_tail(&cls->unexp_ready, &src->uq_link);
    cls->unexp_queued += charge;
    src->uq_bytes += charge;
}

/* Frees what waits in the unexpected queue (finalize). */
static void ofi_unexp_flush(struct cw_na_class *cls)
{
    if (cls->unexp_ready.next == NULL)
        return; /* never initialised */
    while (!nau_list_empty(&cls->unexp_ready)) {
        struct ofi_umsg *m = ofi_unexp_next(cls);

        ofi_addr_free(cls, m->source);
        ofi_umsg_free(cls, m);
    }
    /* Every message is gone: so is every slab. */
    if (nau_slabs_fini(&cls->slabs) != 0)
        assert(!"a slab outlives its messages");
}

/* After the endpoint is closed: the provider holds no buffer any more. */
void ofi_exp_fini(struct cw_na_class *cls)
{
    ofi_unexp_flush(cls);
    cls->next_drop_log_ns = 0; /* report the last drops now */
    ofi_drop_log(cls, 0);
    while (nau_match_oldest(&cls->early) != NULL)
        ofi_early_free(cls, nau_container_of(nau_match_oldest(&cls->early),
                                             struct ofi_early, m));
    nau_match_fini(&cls->early);
    nau_match_fini(&cls->exp_posted);
    for (unsigned i = 0; i < cls->nexp_bufs; i++)
        free(cls->exp_bufs[i]);
    free(cls->exp_bufs);
    cls->exp_bufs = NULL;
    cls->nexp_bufs = 0;
}

/* Hands @p len bytes of @p data to the receive @p op and completes it;
 * a message longer than the user's buffer is CW_OVERFLOW. */
static void ofi_exp_deliver(struct cw_na_class *cls, struct cw_na_op *op,
                            const void *data, size_t len)
{
    cw_status_t st = CW_OK;

    if (len > op->len) {
        OFI_DBG(cls, "expected message of %zu bytes for a %zu-byte buffer", len,
                op->len);
        st = CW_OVERFLOW;
    } else if (len > 0) {
        memcpy(op->buf, data, len);
    }
    op->recv_len = len;
    ofi_op_finish(cls, op, st);
}

/* Posting an expected receive: an early message for it completes it at
 * once, otherwise it waits in the table of posted receives. */
cw_status_t ofi_exp_recv_post(struct cw_na_class *cls, struct cw_na_op *op)
{
    uint64_t key = OFI_EXP_KEY;

    for (struct nau_match_entry *m = nau_match_find(&cls->early, key, op->tag);
         m != NULL; m = nau_match_next(&cls->early, m)) {
        struct ofi_early *e = nau_container_of(m, struct ofi_early, m);

        if (ofi_same_addr(op->peer, e->addr, e->addrlen)) {
            ofi_exp_deliver(cls, op, e->data, e->len);
            ofi_early_free(cls, e);
            return CW_OK;
        }
    }
    return nau_match_insert(&cls->exp_posted, &op->mentry, key, op->tag, 0);
}

void ofi_exp_recv_unlink(struct cw_na_class *cls, struct cw_na_op *op)
{
    nau_match_remove(&cls->exp_posted, &op->mentry);
}

/* Logs the drops not reported yet, at most once per OFI_DROP_LOG_NS; also
 * called from progress so the last ones of a burst are reported too. */
void ofi_drop_log(struct cw_na_class *cls, uint64_t now)
{
    if (cls->drops_unlogged == 0 || now < cls->next_drop_log_ns)
        return;
    OFI_WARN(cls, "dropped %llu message(s) (the last: %s; %llu dropped so far)",
             (unsigned long long)cls->drops_unlogged, cls->drop_reason,
             (unsigned long long)cls->dropped);
    cls->drops_unlogged = 0;
    cls->next_drop_log_ns = now + OFI_DROP_LOG_NS;
}

/* A message not delivered (an outgoing one refused, or one of those below),
 * counted and logged at a limited rate. */
void ofi_drop_count(struct cw_na_class *cls, const char *why)
{
    cls->dropped++;
    cls->drops_unlogged++;
    cls->drop_reason = why;
    ofi_drop_log(cls, ofi_now(cls));
}

/* A received message dropped: also counted as drained, which keeps
 * ofi_read_cq reading while a flood is dropped. */
void ofi_drop_note(struct cw_na_class *cls, const char *why)
{
    cls->drained++;
    ofi_drop_count(cls, why);
}

/* Keeps a message (filed under @p key, OFI_EXP_KEY) nobody has posted a
 * receive for yet, dropping the oldest ones beyond the bound. */
static void ofi_early_keep(struct cw_na_class *cls, const struct ofi_hdr *h,
                           uint64_t key, const void *data, size_t len)
{
    struct ofi_early *e = NULL;
    struct nau_match_entry *old;
    size_t cap = len < OFI_EARLY_MIN_CAP ? OFI_EARLY_MIN_CAP : len;

    if (cls->early_max == 0) {
        ofi_drop_note(cls, "expected, no receive posted, early queue disabled");
        return;
    }
    /* Drop the oldest beyond the bound; the last one dropped is reused
     * when it has the same room (a flood then allocates nothing). */
    while (nau_match_full(&cls->early, cap) &&
           (old = nau_match_oldest(&cls->early)) != NULL) {
        free(e);
        e = nau_container_of(old, struct ofi_early, m);
        nau_match_remove(&cls->early, old);
        ofi_drop_note(cls, "expected, no receive posted, early queue full");
    }
    if (e != NULL && e->cap != cap) {
        free(e);
        e = NULL;
    }
    if (e == NULL && (e = malloc(sizeof(*e) + cap)) != NULL)
        e->cap = cap;
    if (e == NULL ||
        nau_match_insert(&cls->early, &e->m, key, h->tag, cap) != CW_OK) {
        free(e);
        ofi_drop_note(cls, "no memory for the early queue");
        return;
    }
    e->addrlen = h->addrlen;
    memcpy(e->addr, h->addr, h->addrlen);
    e->len = len;
    if (len > 0)
        memcpy(e->data, data, len);
}

/* Where the message of completion @p e starts in catch-all @p b, or NULL
 * if the provider placed it outside the buffer. */
static const uint8_t *ofi_exp_msg(const struct cw_na_class *cls,
                                  const struct ofi_exp_buf *b,
                                  const struct fi_cq_tagged_entry *e)
{
    const uint8_t *base = (const uint8_t *)&b->hdr;
    const uint8_t *m = e->buf;

    if (!cls->exp_multi)
        return base;
    if (m == NULL || m < base || (size_t)(m - base) > cls->exp_buf_bytes ||
        e->len > cls->exp_buf_bytes - (size_t)(m - base))
        return NULL;
    return m;
}

/* A catch-all buffer completed (@p err != 0: with an error).  A
 * multi-receive buffer stays posted until a completion says it was
 * released (FI_MULTI_RECV). */
void ofi_exp_recv_done(struct cw_na_class *cls, struct ofi_ctx *ctx,
                       const struct fi_cq_tagged_entry *e, int err)
{
    struct ofi_exp_buf *b = nau_container_of(ctx, struct ofi_exp_buf, ctx);
    bool released = !cls->exp_multi || (e->flags & FI_MULTI_RECV) != 0;
    const uint8_t *msg = err == 0 ? ofi_exp_msg(cls, b, e) : NULL;
    struct ofi_hdr hc; /* aligned: a packed message may not be */
    const struct ofi_hdr *h = &hc;

    if (released) {
        b->posted = false;
        cls->exp_unposted++;
    }
    if (msg != NULL && e->len >= OFI_HDR_SIZE)
        memcpy(&hc, msg, OFI_HDR_SIZE);
    if (err != 0) {
        if (err == FI_ETRUNC)
            ofi_drop_note(cls, "longer than eager_size");
        else if (err != FI_ECANCELED)
            OFI_DBG(cls, "expected-message receive failed: %s",
                    fi_strerror(err));
    } else if (cls->exp_multi && e->len == 0) {
        /* Only the release of the buffer. */
    } else if (msg == NULL) {
        ofi_drop_note(cls, "placed outside its receive buffer");
    } else if (e->len > OFI_HDR_SIZE + cls->eager_size) {
        /* Fits a multi-receive buffer, not this instance's limit. */
        ofi_drop_note(cls, "longer than eager_size");
    } else if (!ofi_hdr_valid(h, e->len) ||
               (h->kind != 0 &&
                (h->kind != OFI_KIND_UNEXP || !cls->unexp_untagged))) {
        ofi_drop_note(cls, "malformed header");
    } else if (h->kind == OFI_KIND_UNEXP) {
        ofi_unexp_arrived(cls, h, msg + OFI_HDR_SIZE, e->len - OFI_HDR_SIZE);
    } else {
        const uint8_t *data = msg + OFI_HDR_SIZE;
        size_t len = e->len - OFI_HDR_SIZE;
        uint64_t key = OFI_EXP_KEY;
        struct nau_match_entry *m =
            nau_match_find(&cls->exp_posted, key, h->tag);

        for (; m != NULL; m = nau_match_next(&cls->exp_posted, m)) {
            struct cw_na_op *op = nau_container_of(m, struct cw_na_op, mentry);

            if (ofi_same_addr(op->peer, h->addr, h->addrlen)) {
                ofi_peer_alive(cls, op->peer);
                ofi_exp_deliver(cls, op, data, len);
                break;
            }
        }
        if (m == NULL)
            ofi_early_keep(cls, h, key, data, len);
    }
    if (released)
        ofi_exp_post_buf(cls, b);
}
