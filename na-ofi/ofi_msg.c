/*
 * na-ofi messages.  Expected and unexpected messages are untagged sends
 * (FI_MSG) with a fixed header carrying the sender's address, the user's
 * tag and whether the message is expected; both land in catch-all buffers
 * and are copied out by the plugin: an expected one to the receive posted
 * for its (source, tag), an unexpected one to the oldest unexpected
 * receive, or to the plugin's bounded queue (ofi_expected.c).  Where the
 * provider wants tags (cxi), unexpected messages are tagged sends on
 * OFI_TAG_UNEXP, scattered on receipt into the op's header slot and the
 * user's buffer, and expected ones tagged on OFI_TAG_EXP.  Control messages
 * (liveness ping/pong) use OFI_TAG_CTRL and never reach the user.
 */
#include <stdlib.h>
#include <string.h>

#include "ofi.h"

/* Posts (or re-posts) a message op; -FI_EAGAIN is the caller's business. */
static int ofi_msg_post_fi(struct cw_na_class *cls, struct cw_na_op *op)
{
    struct iovec iov[3];
    size_t n = 0;
    struct fi_msg_tagged msg = {.context = &op->ctx};

    switch (op->type) {
    case CW_NA_OP_SEND_UNEXPECTED:
    case CW_NA_OP_SEND_EXPECTED:
    case CW_NA_OP_RECV_UNEXPECTED:
        iov[n].iov_base = &op->hdr;
        iov[n++].iov_len = OFI_HDR_SIZE;
        if (op->len > 0) {
            iov[n].iov_base = op->buf;
            iov[n++].iov_len = op->len;
        }
        if (op->type == CW_NA_OP_RECV_UNEXPECTED && cls->discard != NULL &&
            op->len < cls->eager_size) {
            iov[n].iov_base = cls->discard;
            iov[n++].iov_len = cls->eager_size - op->len;
        }
        msg.msg_iov = iov;
        msg.iov_count = n;
        msg.tag =
            op->type == CW_NA_OP_SEND_EXPECTED ? OFI_TAG_EXP : OFI_TAG_UNEXP;
        if ((op->type == CW_NA_OP_SEND_EXPECTED && cls->exp_untagged) ||
            (op->type == CW_NA_OP_SEND_UNEXPECTED && cls->unexp_untagged)) {
            struct fi_msg m = {.msg_iov = iov,
                               .iov_count = n,
                               .addr = op->peer->fi,
                               .context = &op->ctx};
            return (int)fi_sendmsg(cls->ep, &m, FI_COMPLETION);
        }
        if (op->type != CW_NA_OP_RECV_UNEXPECTED) {
            msg.addr = op->peer->fi;
            return (int)fi_tsendmsg(cls->ep, &msg, FI_COMPLETION);
        }
        msg.addr = FI_ADDR_UNSPEC;
        msg.ignore = cls->tag_ignore; /* see the tag sinks below */
        return (int)fi_trecvmsg(cls->ep, &msg, FI_COMPLETION);
    default:
        return -FI_EINVAL;
    }
}

cw_status_t ofi_msg_post(struct cw_na_class *cls, struct cw_na_op *op)
{
    int rc;
    char str[128];

    if (op->type == CW_NA_OP_RECV_EXPECTED) {
        /* Matched by the plugin, never posted to the provider. */
        return ofi_exp_recv_post(cls, op);
    }
    if (op->type == CW_NA_OP_RECV_UNEXPECTED && cls->unexp_untagged)
        return ofi_unexp_recv_post(cls, op); /* likewise */
    rc = ofi_msg_post_fi(cls, op);
    if (rc == 0) {
        op->in_provider = true;
        return CW_OK;
    }
    if (rc != -FI_EAGAIN) {
        if (op->peer != NULL) {
            ofi_format_raw(cls, op->peer->raw, op->peer->len, str, sizeof(str));
            OFI_ERR(cls, "posting a message for %s failed: %s", str,
                    fi_strerror(-rc));
        } else {
            OFI_ERR(cls, "fi_trecvmsg() failed: %s", fi_strerror(-rc));
        }
    }
    return ofi_status(rc);
}

static cw_status_t ofi_msg_new(cw_na_class_t *cls, enum cw_na_op_type type,
                               void *buf, size_t len, cw_na_addr_t *peer,
                               uint32_t tag, cw_na_cb_t cb, void *arg,
                               cw_na_op_t **op_p)
{
    struct cw_na_op *op;

    if (cb == NULL || (buf == NULL && len > 0))
        return CW_INVALID_ARG;
    if ((type == CW_NA_OP_SEND_UNEXPECTED || type == CW_NA_OP_SEND_EXPECTED) &&
        len > cls->eager_size)
        return CW_OVERFLOW;
    if ((type == CW_NA_OP_SEND_UNEXPECTED || type == CW_NA_OP_SEND_EXPECTED) &&
        peer->nsends >= cls->peer_sends_max) {
        /* A peer that does not read: each send would wait in an rxm
         * buffer of its own, and the pool never shrinks.  A peer that
         * reads completes sends about as fast as they are posted. */
        ofi_drop_count(cls, "send refused: peer_sends_max sends to that "
                            "peer are waiting (it does not read)");
        return CW_BUSY;
    }
    op = ofi_op_new(cls, type, peer, cb, arg);
    if (op == NULL)
        return CW_NOMEM;
    op->buf = buf;
    op->len = len;
    op->tag = tag;
    if (type == CW_NA_OP_SEND_UNEXPECTED || type == CW_NA_OP_SEND_EXPECTED) {
        ofi_hdr_fill(cls, &op->hdr,
                     type == CW_NA_OP_SEND_UNEXPECTED && cls->unexp_untagged
                         ? OFI_KIND_UNEXP
                         : 0);
        op->hdr.tag = tag;
    }
    return ofi_op_submit(cls, op, op_p);
}

cw_status_t ofi_msg_send_unexpected(cw_na_class_t *cls, const void *buf,
                                    size_t len, cw_na_addr_t *dest,
                                    uint32_t tag, cw_na_cb_t cb, void *arg,
                                    cw_na_op_t **op_p)
{
    if (dest == NULL)
        return CW_INVALID_ARG;
    return ofi_msg_new(cls, CW_NA_OP_SEND_UNEXPECTED, (void *)buf, len, dest,
                       tag, cb, arg, op_p);
}

/* fi_inject() / fi_tinject(): the provider copies the message (our header
 * and the user's bytes, contiguous in a buffer on the stack) in the call
 * and writes no completion for it, so there is no op.  Only where nothing
 * else to @p dest is outstanding: no message send waiting for its
 * completion or a retry, no back-off, not known dead.  Then the inject
 * cannot overtake an earlier send, and a peer that does not read still
 * meets peer_sends_max once the provider refuses injects (-FI_EAGAIN:
 * rxm's and tcp's transmit queues are bounded by tx_size) and sends
 * become ops again.  A failure other than -FI_EAGAIN is left to the op
 * path too (CW_AGAIN), which reports it as a send does; one the provider
 * finds later reaches the CQ with no context (ofi_dispatch counts it). */
cw_status_t ofi_msg_inject(cw_na_class_t *cls, const void *buf, size_t len,
                           cw_na_addr_t *dest, uint32_t tag, bool expected)
{
    union {
        struct ofi_hdr hdr;
        uint8_t bytes[OFI_HDR_SIZE + OFI_INJECT_MAX];
    } m;
    bool untagged = expected ? cls->exp_untagged : cls->unexp_untagged;
    ssize_t rc;

    if (dest == NULL || (buf == NULL && len > 0))
        return CW_INVALID_ARG;
    if (len > cls->eager_size)
        return CW_OVERFLOW;
    if (len > cls->inject_max || dest->nsends > 0 || dest->nretry > 0 ||
        dest->dead || ofi_peer_backing_off(cls, dest))
        return CW_AGAIN;
    ofi_hdr_fill(cls, &m.hdr,
                 !expected && cls->unexp_untagged ? OFI_KIND_UNEXP : 0);
    m.hdr.tag = tag;
    if (len > 0)
        memcpy(m.bytes + OFI_HDR_SIZE, buf, len);
    if (untagged)
        rc = fi_inject(cls->ep, m.bytes, OFI_HDR_SIZE + len, dest->fi);
    else
        rc = fi_tinject(cls->ep, m.bytes, OFI_HDR_SIZE + len, dest->fi,
                        expected ? OFI_TAG_EXP : OFI_TAG_UNEXP);
    if (rc != 0)
        return CW_AGAIN;
    ofi_peer_accepted(cls, dest);
    return CW_OK;
}

cw_status_t ofi_msg_recv_unexpected(cw_na_class_t *cls, void *buf, size_t len,
                                    cw_na_cb_t cb, void *arg, cw_na_op_t **op_p)
{
    return ofi_msg_new(cls, CW_NA_OP_RECV_UNEXPECTED, buf, len, NULL, 0, cb,
                       arg, op_p);
}

cw_status_t ofi_msg_send_expected(cw_na_class_t *cls, const void *buf,
                                  size_t len, cw_na_addr_t *dest, uint32_t tag,
                                  cw_na_cb_t cb, void *arg, cw_na_op_t **op_p)
{
    if (dest == NULL)
        return CW_INVALID_ARG;
    return ofi_msg_new(cls, CW_NA_OP_SEND_EXPECTED, (void *)buf, len, dest, tag,
                       cb, arg, op_p);
}

cw_status_t ofi_msg_recv_expected(cw_na_class_t *cls, void *buf, size_t len,
                                  cw_na_addr_t *source, uint32_t tag,
                                  cw_na_cb_t cb, void *arg, cw_na_op_t **op_p)
{
    if (source == NULL)
        return CW_INVALID_ARG;
    return ofi_msg_new(cls, CW_NA_OP_RECV_EXPECTED, buf, len, source, tag, cb,
                       arg, op_p);
}

/* A completion (or error completion, @p err != 0) for a message op. */
void ofi_msg_complete(struct cw_na_class *cls, struct cw_na_op *op,
                      const struct fi_cq_tagged_entry *e, int err)
{
    cw_status_t st;

    if (err != 0) {
        st = ofi_op_error(op, err);
        if (op->peer != NULL && (st == CW_UNREACHABLE || st == CW_DISCONNECTED))
            ofi_peer_suspect(cls, op->peer);
        ofi_op_finish(cls, op, st);
        return;
    }
    if (op->type == CW_NA_OP_RECV_UNEXPECTED) {
        const struct ofi_hdr *h = &op->hdr;
        struct cw_na_addr *src = NULL;

        if (!ofi_hdr_valid(h, e->len) || h->kind != 0 ||
            ofi_peer_get(cls, h->addr, h->addrlen, &src) != CW_OK) {
            /* Malformed: drop, count, and keep the user's buffer posted
             * (at once: rxm may hold more of them for it). */
            ofi_drop_note(cls, "unexpected, malformed");
            if (op->forced != CW_OK) {
                ofi_op_finish(cls, op, op->forced);
                return;
            }
            op->in_provider = false;
            if (ofi_msg_post_fi(cls, op) == 0) {
                op->in_provider = true;
                return;
            }
            ofi_retry_push(cls, op);
            op->retry_deadline_ns = UINT64_MAX;
            return;
        }
        ofi_peer_alive(cls, src);
        op->source = src;
        op->recv_len = e->len - OFI_HDR_SIZE;
        op->tag = h->tag;
        if (op->recv_len > op->len) { /* its tail went to cls->discard */
            ofi_op_finish(cls, op, CW_OVERFLOW);
            return;
        }
    } else {
        ofi_peer_alive(cls, op->peer);
    }
    ofi_op_finish(cls, op, CW_OK);
}

/* ---- control traffic: liveness probes ---- */

cw_status_t ofi_ctrl_post_recv(struct cw_na_class *cls)
{
    int rc;

    cls->ctrl_ctx.kind = OFI_CTX_CTRL_RECV;
    rc = (int)fi_trecv(cls->ep, &cls->ctrl_buf, sizeof(cls->ctrl_buf), NULL,
                       FI_ADDR_UNSPEC, OFI_TAG_CTRL, cls->tag_ignore,
                       &cls->ctrl_ctx);
    if (rc == 0) {
        cls->ctrl_posted = true;
        return CW_OK;
    }
    if (rc == -FI_EAGAIN)
        return CW_OK; /* progress() retries while !ctrl_posted */
    OFI_ERR(cls, "fi_trecv() for control messages failed: %s",
            fi_strerror(-rc));
    return ofi_status(rc);
}

/* One more pong to an address the instance did not know (token bucket). */
static bool ofi_pong_unknown_allowed(struct cw_na_class *cls, uint64_t now)
{
    const uint64_t every = 1000000000ull / OFI_PONG_UNKNOWN_PER_S;
    uint64_t add = (now - cls->pong_refill_ns) / every;

    if (add > 0) {
        uint64_t tokens = cls->pong_tokens + add;

        cls->pong_tokens = tokens > OFI_PONG_UNKNOWN_PER_S
                               ? OFI_PONG_UNKNOWN_PER_S
                               : (unsigned)tokens;
        cls->pong_refill_ns += add * every;
    }
    if (cls->pong_tokens == 0)
        return false;
    cls->pong_tokens--;
    return true;
}

static void ofi_pong(struct cw_na_class *cls, struct cw_na_addr *peer,
                     uint64_t now)
{
    if (peer->pong_due) {
        peer->pong_due = false;
        cls->pongs_due--;
    }
    peer->last_pong_ns = now;
    ofi_ctrl_send(cls, peer, OFI_CTRL_PONG);
}

/* A ping says where to answer, and with no FI_SOURCE nothing tells whether
 * it came from there: a forged one made the plugin send a pong to (and
 * connect to) any address it named, once per ping.  Answers are bounded
 * instead (ofi.h, OFI_PONG_*): what a prober needs is one pong within
 * peer_timeout_ms, not one per ping. */
static void ofi_ctrl_ping(struct cw_na_class *cls, const struct ofi_hdr *h)
{
    struct cw_na_addr *peer = ofi_peer_find(cls, h->addr, h->addrlen);
    uint64_t now = ofi_now(cls);

    if (peer == NULL) {
        if (!ofi_pong_unknown_allowed(cls, now)) {
            ofi_drop_note(cls, "control, ping from an unknown address "
                               "beyond the rate limit");
            return;
        }
        if (ofi_peer_get(cls, h->addr, h->addrlen, &peer) != CW_OK) {
            ofi_drop_note(cls, "control, bad sender address");
            return;
        }
        ofi_addr_free(cls, peer); /* the table keeps it */
    }
    ofi_peer_alive(cls, peer);
    if (peer->last_pong_ns != 0 &&
        now - peer->last_pong_ns < OFI_PONG_INTERVAL_NS) {
        if (!peer->pong_due) {
            peer->pong_due = true;
            cls->pongs_due++;
        }
        return;
    }
    ofi_pong(cls, peer, now);
}

/* Answers the pings deferred by ofi_ctrl_ping() whose interval is over. */
void ofi_pongs_due(struct cw_na_class *cls, uint64_t now)
{
    for (struct nau_ptable_node *n = nau_ptable_iter(&cls->peers, NULL);
         n != NULL && cls->pongs_due > 0; n = nau_ptable_iter(&cls->peers, n)) {
        struct cw_na_addr *p = nau_container_of(n, struct cw_na_addr, pnode);

        if (p->pong_due && now - p->last_pong_ns >= OFI_PONG_INTERVAL_NS)
            ofi_pong(cls, p, now);
    }
}

void ofi_ctrl_recv_done(struct cw_na_class *cls,
                        const struct fi_cq_tagged_entry *e, int err)
{
    const struct ofi_hdr *h = &cls->ctrl_buf;
    struct cw_na_addr *peer = NULL;

    cls->ctrl_posted = false;
    if (err != 0) {
        if (err != FI_ECANCELED)
            OFI_DBG(cls, "control receive failed: %s", fi_strerror(err));
    } else if (!ofi_hdr_valid(h, e->len) ||
               (h->kind != OFI_CTRL_PING && h->kind != OFI_CTRL_PONG)) {
        ofi_drop_note(cls, "control, malformed");
    } else if (h->kind == OFI_CTRL_PING) {
        ofi_ctrl_ping(cls, h);
    } else {
        peer = ofi_peer_find(cls, h->addr, h->addrlen);
        if (peer != NULL)
            ofi_peer_alive(cls, peer);
    }
    ofi_ctrl_post_recv(cls);
}

/* ---- tag sinks: tagged messages on tags nobody posts for ----
 *
 * rxm keeps a tagged message that matches no posted receive until one is
 * posted for its tag, each in a buffer of its own: a peer sending on a
 * tag this plugin never uses (a hostile one, or another program) grew a
 * server by about 500 MiB per 50 000 64-byte messages, without end, and
 * every receive posted later was matched against that list (a 64 B RPC
 * took 4-75 ms).  Where the provider honours ignore masks (rxm), every
 * tag has a receive: the control receive takes any tag with bit 62 set and
 * bit 63 clear (a stray message there fails the header check like any
 * malformed one), and tag_sinks receives for each other class (both bits
 * clear, both set, and bit 63 alone, which unexpected messages used when
 * they were tagged; 32 by default, enough to drain a flood as it comes)
 * take the rest into one shared buffer, to be dropped and counted.  Where
 * unexpected messages are still tagged, their receives take bit 63 alone
 * and the sinks the two other classes.
 *
 * rxm compares an incoming tagged message with the posted tagged receives
 * in the order they were posted.  While unexpected messages were tagged, a
 * request's own receive, reposted after each request, was always behind
 * the sinks: with all 64 posted, every request cost the server 66
 * comparisons, about 1 150 instructions (callgrind, a tenth of a 64 B
 * round trip's).  Untagged, requests no longer meet the sinks, but the
 * control receive still does.  So one sink per class is posted at rest,
 * and the others only while messages on unused tags arrive: the first one
 * a sink drops posts them all, and after OFI_SINK_CALM_NS without a drop
 * the extra ones are canceled (docs/na-ofi.md, "Tag sinks").
 */
_Static_assert(OFI_TAG_UNEXP == 1ull << 63 && OFI_TAG_CTRL == 1ull << 62,
               "the sinks split the tags on bits 63 and 62");

#define OFI_SINK_CALM_NS (1000ull * 1000000ull)

/* Whether sink @p i is to be posted now: the first of each class always,
 * the others during a flood. */
static bool ofi_sink_wanted(const struct cw_na_class *cls, unsigned i)
{
    return i < cls->sink_classes || cls->sinks_flood;
}

static cw_status_t ofi_sink_post(struct cw_na_class *cls, struct ofi_sink *k)
{
    int rc =
        (int)fi_trecv(cls->ep, cls->sink_buf, OFI_HDR_SIZE + cls->eager_size,
                      NULL, FI_ADDR_UNSPEC, k->tag, k->ignore, &k->ctx);

    if (rc == 0) {
        k->posted = true;
        cls->sinks_unposted--;
        return CW_OK;
    }
    if (rc == -FI_EAGAIN)
        return CW_AGAIN; /* progress() retries while sinks_unposted > 0 */
    OFI_ERR(cls, "posting a receive for unused tags failed: %s",
            fi_strerror(-rc));
    return ofi_status(rc);
}

void ofi_sinks_post(struct cw_na_class *cls)
{
    for (unsigned i = 0; i < cls->nsinks && cls->sinks_unposted > 0; i++)
        if (ofi_sink_wanted(cls, i) && !cls->sinks[i].posted &&
            ofi_sink_post(cls, &cls->sinks[i]) == CW_AGAIN)
            return;
}

cw_status_t ofi_sinks_init(struct cw_na_class *cls)
{
    cls->sink_classes = cls->unexp_untagged ? 3u : 2u;
    cls->nsinks = cls->sink_classes * (unsigned)cls->tag_sinks;
    cls->sinks = calloc(cls->nsinks, sizeof(*cls->sinks));
    cls->sink_buf = malloc(OFI_HDR_SIZE + cls->eager_size);
    if (cls->sinks == NULL || cls->sink_buf == NULL)
        return CW_NOMEM;
    cls->tag_ignore = ~(OFI_TAG_UNEXP | OFI_TAG_CTRL);
    for (unsigned i = 0; i < cls->nsinks; i++) {
        struct ofi_sink *k = &cls->sinks[i];

        k->ctx.kind = OFI_CTX_SINK;
        static const uint64_t class_tag[3] = {0, OFI_TAG_UNEXP | OFI_TAG_CTRL,
                                              OFI_TAG_UNEXP};

        k->tag = class_tag[i % cls->sink_classes];
        k->ignore = cls->tag_ignore;
    }
    cls->sinks_flood = false;
    cls->sinks_unposted = cls->sink_classes; /* one of each class first */
    for (unsigned i = 0; i < cls->sink_classes; i++) {
        cw_status_t st = ofi_sink_post(cls, &cls->sinks[i]);
        if (st == CW_AGAIN)
            break;
        if (st != CW_OK)
            return st;
    }
    return CW_OK;
}

/* A sink dropped a message: during a flood every sink is posted, so that
 * it drains as fast as it comes. */
static void ofi_sinks_flood(struct cw_na_class *cls)
{
    cls->sinks_calm_ns = ofi_now(cls) + OFI_SINK_CALM_NS;
    if (cls->sinks_flood)
        return;
    cls->sinks_flood = true;
    for (unsigned i = cls->sink_classes; i < cls->nsinks; i++)
        if (!cls->sinks[i].posted)
            cls->sinks_unposted++;
    OFI_INFO(cls,
             "messages on unused tags: %u receives posted for them "
             "while they last",
             cls->nsinks);
}

void ofi_sinks_tick(struct cw_na_class *cls, uint64_t now)
{
    unsigned canceled = 0;

    if (!cls->sinks_flood || now < cls->sinks_calm_ns)
        return;
    cls->sinks_flood = false;
    for (unsigned i = cls->sink_classes; i < cls->nsinks; i++) {
        struct ofi_sink *k = &cls->sinks[i];

        if (!k->posted) {
            cls->sinks_unposted--; /* wanted a moment ago, no longer */
        } else if (!k->canceled) {
            /* Posted until its completion (FI_ECANCELED, or a message
             * that came first) is read from the CQ. */
            k->canceled = true;
            (void)fi_cancel(&cls->ep->fid, &k->ctx);
            canceled++;
        }
    }
    OFI_INFO(cls,
             "no message on unused tags for %llu ms: back to one "
             "receive per class (%u canceled)",
             (unsigned long long)(OFI_SINK_CALM_NS / 1000000ull), canceled);
}

void ofi_sink_done(struct cw_na_class *cls, struct ofi_ctx *ctx, int err)
{
    struct ofi_sink *k = nau_container_of(ctx, struct ofi_sink, ctx);
    unsigned i = (unsigned)(k - cls->sinks);

    k->posted = false;
    k->canceled = false;
    if (ofi_sink_wanted(cls, i))
        cls->sinks_unposted++;
    if (err == FI_ECANCELED)
        return; /* the calm after a flood, or the endpoint closing */
    ofi_drop_note(cls, err == 0
                           ? "tagged, on a tag no receive is posted for"
                           : "tagged, on an unused tag, failed or truncated");
    ofi_sinks_flood(cls);
    ofi_sinks_post(cls);
}

void ofi_ctrl_send(struct cw_na_class *cls, struct cw_na_addr *peer,
                   uint8_t kind)
{
    struct ofi_ctrl *c;
    int rc;

    /* fi_shm: a send takes a lock in the peer's region, and a peer killed
     * while it held that lock leaves it taken for good: fi_tsend() then
     * spins forever (a keepalive ping to a peer killed mid-get hung the
     * process in conformance-ofi+shm).  So nothing goes to a peer known
     * dead, and a probe first looks at the peer's liveness lock (a few
     * system calls; probes are rare).  Data sends in the window before
     * the death is noticed can still hang (docs/na-ofi.md). */
    if (cls->str_addr &&
        (peer->dead ||
         (peer->lock_seen && ofi_shm_owner((const char *)peer->raw) <= 0)))
        return; /* ofi_tick fails it */
    if (ofi_peer_backing_off(cls, peer)) {
        /* Not another connection attempt now (ofi_progress.c,
         * "Back-off"): as if refused. */
        c = NULL;
        rc = -FI_EAGAIN;
    } else {
        c = calloc(1, sizeof(*c));
        if (c == NULL)
            return;
        c->ctx.kind = OFI_CTX_CTRL_SEND;
        c->peer = peer;
        ofi_hdr_fill(cls, &c->hdr, kind);
        rc = (int)fi_tsend(cls->ep, &c->hdr, sizeof(c->hdr), NULL, peer->fi,
                           OFI_TAG_CTRL, &c->ctx);
        if (rc == -FI_EAGAIN)
            ofi_peer_again(cls, peer, ofi_now(cls));
        else if (rc == 0)
            ofi_peer_accepted(cls, peer);
    }
    if (rc != 0) {
        free(c);
        if (kind != OFI_CTRL_PING)
            return;
        /* rxm answers -FI_EAGAIN for as long as it cannot connect: count the
         * probe as sent so that the peer timeout still runs. */
        if (rc == -FI_EAGAIN) {
            peer->ping_sent_ns = ofi_now(cls);
            if (peer->last_err == 0)
                peer->last_err = FI_EAGAIN; /* rxm: still connecting */
        } else
            ofi_peer_failed(cls, peer, ofi_status(rc));
        return;
    }
    nau_list_add_tail(&cls->ctrl_sends, &c->link);
    peer->nctrl++;
    if (kind == OFI_CTRL_PING)
        peer->ping_sent_ns = ofi_now(cls);
}

void ofi_ctrl_send_done(struct cw_na_class *cls, struct ofi_ctrl *c, int err)
{
    nau_list_del(&c->link);
    c->peer->nctrl--;
    if (err != 0 && err != FI_ECANCELED) {
        cw_status_t st = ofi_status(err);
        char str[128];

        ofi_format_raw(cls, c->peer->raw, c->peer->len, str, sizeof(str));
        OFI_WARN_RL(cls, "peer %s: probe failed: %s", str, fi_strerror(err));
        ofi_peer_failed(cls, c->peer,
                        st == CW_UNREACHABLE ? st : CW_DISCONNECTED);
    }
    free(c);
}
