/*
 * na-ucx: liveness probes.  UCX notices a peer whose process died (its
 * sockets reset) but not one that stopped answering while its host keeps
 * the connection up (a hung or stopped process), nor quickly one whose host
 * vanished with data in flight (TCP retransmits for minutes).  So while
 * something waits on a peer (an expected receive, a put/get answer) and the
 * peer has been silent for a while, the plugin sends it a header-only probe;
 * a probe unanswered for the liveness timeout fails the connection like a
 * UCX error would.  Idle connections are never probed.
 */
#include <string.h>

#include "ucx.h"

#define UCX_LIVE_SCAN_NS                                                       \
    250000000ull /* how often connections are looked at                        \
                  */

/* A probe or its answer goes out only if UCX can send it at once, so no
 * request is ever left behind; a busy endpoint is retried at the next
 * scan. */
static bool ucx_live_send(ucp_ep_h ep, unsigned id)
{
    static const uint32_t magic = UCX_WIRE_MAGIC;
    ucp_request_param_t p = {0};
    ucs_status_ptr_t req;

    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL;
    p.flags = UCP_AM_SEND_FLAG_REPLY;
    req = ucp_am_send_nbx(ep, id, &magic, sizeof(magic), NULL, 0, &p);
    if (UCS_PTR_IS_PTR(req)) { /* not expected with FORCE_IMM_CMPL */
        ucp_request_free(req);
        return true;
    }
    return req == NULL;
}

void ucx_live_heard(struct ucx_cls *cls, ucp_ep_h ep)
{
    struct ucx_conn *conn = ucx_conn_by_ep(cls, ep);

    if (conn) {
        conn->heard_ns = cls->host->now_ns();
        conn->probing = false;
    }
}

static ucs_status_t ucx_am_ping_cb(void *arg, const void *header, size_t hlen,
                                   void *data, size_t length,
                                   const ucp_am_recv_param_t *param)
{
    struct ucx_cls *cls = arg;
    uint32_t magic;

    if (hlen != sizeof(magic) || length != 0 ||
        !(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)) {
        ucx_log_dropped(cls, "malformed liveness probe");
        return UCS_OK;
    }
    memcpy(&magic, header, sizeof(magic));
    if (magic != UCX_WIRE_MAGIC) {
        ucx_log_dropped(cls, "malformed liveness probe");
        return UCS_OK;
    }
    ucx_live_heard(cls, param->reply_ep);
    ucx_live_send(param->reply_ep, UCX_AM_PONG);
    return UCS_OK;
}

static ucs_status_t ucx_am_pong_cb(void *arg, const void *header, size_t hlen,
                                   void *data, size_t length,
                                   const ucp_am_recv_param_t *param)
{
    if (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)
        ucx_live_heard(arg, param->reply_ep);
    return UCS_OK;
}

cw_status_t ucx_live_register_am(struct ucx_cls *cls)
{
    static const struct {
        unsigned id;
        ucp_am_recv_callback_t cb;
    } h[] = {{UCX_AM_PING, ucx_am_ping_cb}, {UCX_AM_PONG, ucx_am_pong_cb}};

    for (size_t i = 0; i < sizeof(h) / sizeof(h[0]); i++) {
        cw_status_t st = ucx_set_am_handler(cls, h[i].id, h[i].cb, 0);
        if (st != CW_OK)
            return st;
    }
    return CW_OK;
}

/* Something waits for this peer: an answer to a put/get, or an expected
 * receive while this connection is the one the peer is reached by. */
static bool ucx_live_awaited(const struct ucx_conn *conn)
{
    return !nau_list_empty(&conn->rma) ||
           (conn->peer && conn->peer->conn == conn &&
            !nau_list_empty(&conn->peer->recvs));
}

/* From progress: probe silent awaited peers, fail unanswered ones. */
void ucx_live_scan(struct ucx_cls *cls, uint64_t now)
{
    uint64_t quiet;
    struct nau_list *l, *next;

    if (cls->live_timeout_ns == 0)
        return;
    if (now < cls->live_next_ns)
        return;
    cls->live_next_ns = now + UCX_LIVE_SCAN_NS;
    /* Probe after a fifth of the timeout of silence. */
    quiet = cls->live_timeout_ns / 5;
    for (l = cls->conns.next; l != &cls->conns; l = next) {
        struct ucx_conn *conn = nau_container_of(l, struct ucx_conn, link);
        next = l->next;
        if (!ucx_live_awaited(conn)) {
            conn->probing = false;
            continue;
        }
        if (conn->heard_ns == 0)
            conn->heard_ns = now; /* start the clock when waiting starts */
        if (conn->probing) {
            if (now - conn->probe_ns >= cls->live_timeout_ns) {
                UCX_WARN_RL(
                    cls,
                    "peer %s did not answer a liveness probe in "
                    "%llu ms",
                    conn->peer ? conn->peer->str : "?",
                    (unsigned long long)(cls->live_timeout_ns / 1000000));
                ucx_conn_fail(conn, UCS_ERR_ENDPOINT_TIMEOUT);
            }
        } else if (now - conn->heard_ns >= quiet &&
                   ucx_live_send(conn->ep, UCX_AM_PING)) {
            conn->probing = true;
            conn->probe_ns = now;
        }
    }
}
