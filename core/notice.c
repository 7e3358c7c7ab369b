/*
 * Notices: the one-header control messages a client sends and does not
 * wait for (the acknowledgment that lets a server release an overflowed
 * answer, the cancel that tells the next hop to stop).  Each is owned by
 * the context, not by the handle it is about, so that the caller hears as
 * soon as its outcome is decided: a peer that is stalled, or gone without
 * the plugin knowing yet, holds only the notice (na-ofi gives a dead peer
 * up after peer_timeout_ms; a verbs send waits for the receiver's buffers),
 * never the caller's completion.  Closing a network cancels its notices
 * and waits for them like any operation of the context.
 */
#include "rpc_priv.h"

#include <stdlib.h>

struct cw_notice {
    struct nau_list link; /**< ctx->notices */
    cw_network_t *net;
    cw_na_addr_t *peer; /**< our own reference */
    cw_na_op_t *op;
    bool canceled;
    uint8_t msg[CW_HDR_SIZE];
};

static void notice_free(struct cw_notice *n)
{
    nau_list_del(&n->link);
    cw_na_addr_free(n->net->na, n->peer);
    free(n);
}

static void notice_sent_cb(const struct cw_na_cb_info *info)
{
    notice_free(info->arg);
}

cw_status_t cw_notice_send(cw_context_t *ctx, cw_network_t *net,
                           cw_na_addr_t *peer, const struct cw_wire_hdr *hdr)
{
    struct cw_notice *n;
    cw_status_t st;

    CW_LOCK_ASSERT_HELD(&ctx->lock);
    if (net->closed)
        return CW_DISCONNECTED;
    n = calloc(1, sizeof(*n));
    if (n == NULL)
        return CW_NOMEM;
    n->net = net;
    st = cw_na_addr_dup(net->na, peer, &n->peer);
    if (st != CW_OK) {
        free(n);
        return st;
    }
    cw_wire_hdr_encode(n->msg, hdr);
    nau_list_node_init(&n->link);
    nau_list_add_tail(&ctx->notices, &n->link);
    st = cw_na_msg_send_unexpected(net->na, n->msg, CW_HDR_SIZE, n->peer, 0,
                                   notice_sent_cb, n, &n->op);
    if (st != CW_OK) {
        notice_free(n);
        return st;
    }
    ctx->stats.na_ops++;
    return CW_OK;
}

void cw_notice_cancel_net(cw_context_t *ctx, cw_network_t *net)
{
    struct nau_list *e, *next;

    CW_LOCK_ASSERT_HELD(&ctx->lock);
    for (e = ctx->notices.next; e != &ctx->notices; e = next) {
        struct cw_notice *n = nau_container_of(e, struct cw_notice, link);
        next = e->next; /* a plugin may complete the cancel at once */
        if ((net == NULL || n->net == net) && !n->canceled) {
            n->canceled = true;
            cw_na_cancel(n->net->na, n->op);
        }
    }
}

bool cw_notice_pending(cw_context_t *ctx, const cw_network_t *net)
{
    CW_LOCK_ASSERT_HELD(&ctx->lock);
    for (struct nau_list *e = ctx->notices.next; e != &ctx->notices;
         e = e->next)
        if (net == NULL ||
            nau_container_of(e, struct cw_notice, link)->net == net)
            return true;
    return false;
}
