/*
 * na-verbs: RC connections.  The active side resolves address and route,
 * creates its QP on the instance's PD/CQ/SRQ and connects with private
 * data naming its listening address, the credits it grants and its eager
 * size; the passive side checks that data (the claimed IP against the one
 * the request comes from), creates its QP and accepts.  The rdma_cm
 * event channel is drained by progress.  A connection that fails (error
 * completion, reject, disconnect, peer gone) moves its QP to the error
 * state, fails what was queued on it and is destroyed once every posted
 * operation has come back flushed; other connections are not touched.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vb.h"

#define VB_CM_EVENTS_PER_CALL 64

void vb_pdata_fill(vb_class_t *cls, struct vb_pdata *pd)
{
    memset(pd, 0, sizeof(*pd));
    pd->magic = VB_PDATA_MAGIC;
    pd->version = VB_WIRE_VERSION;
    pd->devport = cls->devport;
    pd->port = cls->self_sin.sin_port;
    pd->ip = cls->self_sin.sin_addr.s_addr;
    pd->credits = (uint16_t)cls->credits;
    pd->devlen = (uint8_t)strlen(cls->dev);
    memcpy(pd->dev, cls->dev, pd->devlen);
    pd->eager = htonl((uint32_t)(cls->buf_size - sizeof(struct vb_hdr)));
}

/* Private data from a peer is untrusted.  When it is refused, @p out
 * still holds what came (zeros beyond), so that the caller can name a
 * wire version it does not speak. */
static bool pdata_ok(const void *p, size_t len, struct vb_pdata *out)
{
    memset(out, 0, sizeof(*out));
    if (!p)
        return false;
    memcpy(out, p, len < sizeof(*out) ? len : sizeof(*out));
    if (len < sizeof(*out) || out->magic != VB_PDATA_MAGIC ||
        out->version != VB_WIRE_VERSION || out->devlen > VB_DEV_MAX ||
        out->credits < 2 || out->credits > 1024 || out->port == 0 ||
        out->ip == 0 || ntohl(out->eager) < VB_EAGER_MIN ||
        ntohl(out->eager) > VB_EAGER_MAX)
        return false;
    for (unsigned i = 0; i < out->devlen; i++) {
        char c = out->dev[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.'))
            return false;
    }
    return true;
}

/* The listening address a peer claims is its word; the IP it connected
 * from is rdma_cm's (on hardware, set by the peer's kernel).  The active
 * side binds its id to its listening IP (vb_conn_for_send), so the two
 * must match.  The port cannot be checked: the connection's source port is
 * rdma_cm's own, not the listening one. */
static bool peer_ip_ok(vb_class_t *cls, struct rdma_cm_id *id,
                       const struct vb_pdata *pd)
{
    const struct sockaddr *sa = rdma_get_peer_addr(id);
    const struct sockaddr_in *src = (const struct sockaddr_in *)sa;
    char from[INET_ADDRSTRLEN] = "?", claim[INET_ADDRSTRLEN];

    if (sa->sa_family == AF_INET && src->sin_addr.s_addr == pd->ip)
        return true;
    cls->stats.conns_refused++;
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &src->sin_addr, from, sizeof(from));
    inet_ntop(AF_INET, &pd->ip, claim, sizeof(claim));
    VB_WARN_RL(cls,
               "refused a connection from %s claiming to be %s:%u "
               "(%llu refused so far)",
               from, claim, ntohs(pd->port),
               (unsigned long long)cls->stats.conns_refused);
    return false;
}

/* What the peer's private data tells us about the connection. */
static void conn_peer_params(struct vb_conn *conn, const struct vb_pdata *pd)
{
    vb_class_t *cls = conn->cls;
    size_t ours = cls->buf_size - sizeof(struct vb_hdr);
    char name[64];

    conn->credits = pd->credits;
    conn->peer_grant = pd->credits;
    conn->peer_eager = ntohl(pd->eager);
    if (conn->peer_eager < ours)
        VB_WARN_RL(cls,
                   "%s takes messages of up to %zu bytes, ours may be "
                   "up to %zu (eager_size): larger sends to it fail "
                   "with CW_OVERFLOW",
                   vb_peer_format(conn->peer, name, sizeof(name)),
                   conn->peer_eager, ours);
}

/* Why a peer's private data was refused, for the log. */
static const char *pdata_why(const struct vb_pdata *pd, char *buf, size_t len)
{
    if (pd->magic == VB_PDATA_MAGIC && pd->version != VB_WIRE_VERSION)
        snprintf(buf, len, "wire version %u, we speak %u", pd->version,
                 VB_WIRE_VERSION);
    else
        snprintf(buf, len, "bad private data");
    return buf;
}

static struct vb_conn *conn_new(vb_class_t *cls, vb_peer_t *peer, bool active)
{
    struct vb_conn *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->sig = calloc(VB_SQ_DEPTH, sizeof(*c->sig));
    if (!c->sig) {
        free(c);
        return NULL;
    }
    c->cls = cls;
    c->peer = peer;
    nau_ptable_ref(&peer->pnode);
    vb_list_init(&c->pending);
    vb_list_init(&c->posted);
    c->active = active;
    c->next = cls->conns;
    cls->conns = c;
    return c;
}

struct vb_conn *vb_conn_by_qpn(vb_class_t *cls, uint32_t qpn)
{
    struct nau_ptable_node *n = nau_ptable_find_u64(&cls->by_qpn, qpn);
    return n ? nau_container_of(n, struct vb_conn, qnode) : NULL;
}

bool vb_sq_full(const struct vb_conn *conn)
{
    return conn->posted_seq - conn->completed_seq >= VB_SQ_DEPTH - 1;
}

void vb_sq_posted(struct vb_conn *conn, bool signalled)
{
    conn->posted_seq++;
    if (signalled) {
        conn->sig[(conn->sig_head + conn->sig_count) % VB_SQ_DEPTH] =
            conn->posted_seq;
        conn->sig_count++;
        conn->unsignaled = 0;
    } else {
        conn->unsignaled++;
    }
}

static cw_status_t conn_create_qp(struct vb_conn *conn)
{
    vb_class_t *cls = conn->cls;
    char peer[64];
    struct ibv_qp_init_attr qa = {
        .qp_context = conn,
        .send_cq = cls->cq,
        .recv_cq = cls->cq,
        .srq = cls->srq,
        .cap = {.max_send_wr = VB_SQ_DEPTH,
                .max_send_sge = 1,
                .max_inline_data = 64},
        .qp_type = IBV_QPT_RC,
        .sq_sig_all = 0,
    };
    cw_status_t st = vb_pool_grant(cls, cls->credits);
    if (st != CW_OK) {
        if (st == CW_BUSY)
            VB_WARN_RL(cls,
                       "no receive buffers left for another connection "
                       "(%u)",
                       cls->max_conns);
        return st;
    }
    conn->granted = true;
    conn->grant = cls->credits;
    int rc = cls->ops->create_qp(conn->id, cls->pd, &qa);
    if (rc != 0 && errno == EINVAL) {
        /* Some devices cannot send 64 bytes inline; credit messages only
         * need the header. */
        qa.cap.max_inline_data = sizeof(struct vb_hdr);
        rc = cls->ops->create_qp(conn->id, cls->pd, &qa);
    }
    if (rc != 0) {
        int e = errno;
        vb_peer_format(conn->peer, peer, sizeof(peer));
        VB_ERR_RL(cls, "rdma_create_qp() for %s failed: %s", peer, strerror(e));
        return vb_status(VB_E_RC, e);
    }
    if (qa.cap.max_inline_data < sizeof(struct vb_hdr)) {
        VB_ERR(cls, "device %s cannot send %zu bytes inline", cls->dev,
               sizeof(struct vb_hdr));
        return CW_UNSUPPORTED;
    }
    conn->inline_max = qa.cap.max_inline_data;
    conn->qpn = conn->id->qp->qp_num;
    nau_ptable_insert_u64(&cls->by_qpn, &conn->qnode, conn->qpn);
    return CW_OK;
}

cw_status_t vb_conn_for_send(vb_class_t *cls, vb_peer_t *peer,
                             struct vb_conn **conn_p)
{
    struct sockaddr_in src;
    struct vb_conn *c = peer->conn;
    char name[64];
    if (c && c->state != VC_CLOSING) {
        *conn_p = c;
        return CW_OK;
    }
    c = conn_new(cls, peer, true);
    if (!c)
        return CW_NOMEM;
    c->state = VC_RESOLVING_ADDR;
    if (cls->ops->create_id(cls->cm_ch, &c->id, c, RDMA_PS_TCP) != 0) {
        VB_ERR(cls, "rdma_create_id() failed: %s", strerror(errno));
        goto err_fail;
    }
    src = cls->self_sin;
    src.sin_port = 0;
    if (cls->ops->resolve_addr(c->id, (struct sockaddr *)&src,
                               (struct sockaddr *)&peer->sin,
                               VB_CM_TIMEOUT_MS) != 0) {
        vb_peer_format(peer, name, sizeof(name));
        VB_ERR_RL(cls, "rdma_resolve_addr(%s) failed: %s", name,
                  strerror(errno));
        goto err_fail;
    }
    peer->conn = c;
    *conn_p = c;
    return CW_OK;

err_fail : {
    cw_status_t st = vb_status(VB_E_RC, -1);
    vb_conn_fail(c, st);
    return st;
}
}

static void fail_list(vb_class_t *cls, struct vb_list *l, cw_status_t st)
{
    for (struct cw_na_op *op; (op = vb_list_first(l));)
        vb_op_done(cls, op, st);
}

void vb_conn_fail(struct vb_conn *conn, cw_status_t st)
{
    vb_class_t *cls = conn->cls;
    vb_peer_t *peer = conn->peer;
    enum vb_conn_state prev = conn->state;
    if (prev == VC_CLOSING)
        return;
    conn->state = VC_CLOSING;
    conn->fail_status = st;
    cls->stats.conns_torn_down++;
    if (conn->id && conn->id->qp) {
        struct ibv_qp_attr qa = {.qp_state = IBV_QPS_ERR};
        if (prev == VC_UP || prev == VC_ACCEPTING)
            cls->ops->disconnect(conn->id);
        /* Flush whatever is still posted, connected or not. */
        cls->ops->modify_qp(conn->id->qp, &qa, IBV_QP_STATE);
    }
    fail_list(cls, &conn->pending, st);
    if (conn->partial) {
        struct cw_na_op *op = conn->partial;
        conn->partial = NULL;
        if (op->status == CW_OK)
            op->status = st;
        if (op->pieces_done == op->next_piece)
            vb_op_done(cls, op, op->status);
    }
    if (peer->conn == conn)
        peer->conn = NULL;
    if (conn->counted) {
        conn->counted = false;
        peer->nconns--;
    }
    if (peer->nconns == 0)
        vb_fail_peer_recvs(cls, peer, st);
}

void vb_conn_kick(struct vb_conn *conn)
{
    bool blocked = false;
    if (conn->state != VC_UP)
        return;
    while (!blocked && (conn->partial || vb_list_first(&conn->pending))) {
        struct cw_na_op *op =
            conn->partial ? conn->partial : vb_list_first(&conn->pending);
        cw_status_t st;
        if (op->type == CW_NA_OP_PUT || op->type == CW_NA_OP_GET)
            st = vb_post_rma_op(conn, op, &blocked);
        else
            st = vb_post_send_op(conn, op, &blocked);
        if (st != CW_OK)
            break; /* the op was completed; the connection is failing */
    }
    vb_send_credits(conn, false);
}

static void conn_destroy(struct vb_conn *conn)
{
    vb_class_t *cls = conn->cls;
    for (struct vb_conn **pp = &cls->conns; *pp; pp = &(*pp)->next)
        if (*pp == conn) {
            *pp = conn->next;
            break;
        }
    /* Only at finalize can ops remain: they are dropped without callbacks. */
    vb_list_free(cls, &conn->pending);
    vb_list_free(cls, &conn->posted);
    if (conn->id) {
        if (conn->id->qp) {
            nau_ptable_remove(&cls->by_qpn, &conn->qnode);
            cls->ops->destroy_qp(conn->id);
        }
        cls->ops->destroy_id(conn->id);
    }
    if (conn->granted)
        vb_pool_ungrant(cls, conn->grant);
    if (conn->peer->conn == conn)
        conn->peer->conn = NULL;
    if (conn->counted)
        conn->peer->nconns--;
    vb_peer_put(cls, conn->peer);
    free(conn->sig);
    free(conn);
}

void vb_conn_reap(vb_class_t *cls, bool all)
{
    struct vb_conn *c = cls->conns, *n;
    for (; c; c = n) {
        n = c->next;
        if (all || (c->state == VC_CLOSING && c->posted.n == 0))
            conn_destroy(c);
    }
}

static void conn_event_failed(struct vb_conn *conn, int event, int status)
{
    vb_class_t *cls = conn->cls;
    char name[64], eb[64];
    vb_peer_format(conn->peer, name, sizeof(name));
    VB_ERR_RL(cls, "connection to %s failed: %s (status %d)", name,
              vb_strerr(VB_E_CM, event, eb, sizeof(eb)), status);
    vb_conn_fail(conn, vb_status(VB_E_CM, event));
}

/* Connect/accept parameters: our private data, up to 16 outstanding READs
 * each way, full transport retries, and RNR retry "infinite" because credits
 * already guarantee a posted receive. */
static void conn_param(vb_class_t *cls, struct vb_pdata *mine,
                       struct rdma_conn_param *cp)
{
    vb_pdata_fill(cls, mine);
    memset(cp, 0, sizeof(*cp));
    cp->private_data = mine;
    cp->private_data_len = sizeof(*mine);
    cp->responder_resources = cls->rd_atom;
    cp->initiator_depth = cls->rd_atom;
    cp->retry_count = 7;
    cp->rnr_retry_count = VB_RNR_RETRY;
}

static void on_connect_request(vb_class_t *cls, struct rdma_cm_id *id,
                               const struct vb_pdata *pd)
{
    struct sockaddr_in sin = {.sin_family = AF_INET};
    char dev[VB_DEV_MAX + 1];
    struct vb_pdata mine;
    struct vb_conn *conn;
    vb_peer_t *peer;

    sin.sin_addr.s_addr = pd->ip;
    sin.sin_port = pd->port;
    memcpy(dev, pd->dev, pd->devlen);
    dev[pd->devlen] = '\0';
    peer = vb_peer_get(cls, &sin, dev, pd->devport);
    conn = peer ? conn_new(cls, peer, false) : NULL;
    vb_peer_put(cls, peer);
    if (!conn) {
        cls->ops->reject(id, NULL, 0);
        cls->ops->destroy_id(id);
        return;
    }
    conn->id = id;
    id->context = conn;
    conn->state = VC_ACCEPTING;
    conn_peer_params(conn, pd);
    if (conn_create_qp(conn) != CW_OK) {
        cls->ops->reject(id, NULL, 0);
        vb_conn_fail(conn, CW_BUSY);
        return;
    }
    struct rdma_conn_param cp;
    conn_param(cls, &mine, &cp);
    if (cls->ops->accept(id, &cp) != 0) {
        char name[64];
        vb_peer_format(peer, name, sizeof(name));
        VB_ERR_RL(cls, "rdma_accept(%s) failed: %s", name, strerror(errno));
        vb_conn_fail(conn, vb_status(VB_E_RC, -1));
    }
}

static void on_route_resolved(struct vb_conn *conn)
{
    vb_class_t *cls = conn->cls;
    struct vb_pdata mine;
    cw_status_t st = conn_create_qp(conn);
    if (st != CW_OK) {
        vb_conn_fail(conn, st);
        return;
    }
    struct rdma_conn_param cp;
    conn_param(cls, &mine, &cp);
    conn->state = VC_CONNECTING;
    if (cls->ops->connect(conn->id, &cp) != 0) {
        char name[64];
        vb_peer_format(conn->peer, name, sizeof(name));
        VB_ERR_RL(cls, "rdma_connect(%s) failed: %s", name, strerror(errno));
        vb_conn_fail(conn, vb_status(VB_E_RC, -1));
    }
}

static void on_established(struct vb_conn *conn, const struct vb_pdata *pd,
                           bool pd_valid)
{
    vb_class_t *cls = conn->cls;
    if (conn->active) {
        if (!pd_valid) {
            char name[64], why[64];
            vb_peer_format(conn->peer, name, sizeof(name));
            VB_ERR_RL(cls, "connection to %s: %s in reply", name,
                      pdata_why(pd, why, sizeof(why)));
            cls->stats.dropped++;
            vb_conn_fail(conn, CW_PROTOCOL);
            return;
        }
        conn_peer_params(conn, pd);
    }
    conn->state = VC_UP;
    conn->counted = true;
    conn->peer->nconns++;
    if (!conn->peer->conn)
        conn->peer->conn = conn; /* replies go back the same way */
    vb_conn_kick(conn);
}

/* One event, already copied out and acked. */
static void on_event(vb_class_t *cls, struct rdma_cm_id *id, int event,
                     int status, const struct vb_pdata *pd, bool pd_valid)
{
    struct vb_conn *conn = id->context;
    char eb[64];

    if (event == RDMA_CM_EVENT_CONNECT_REQUEST) {
        if (!pd_valid) {
            char why[64];
            VB_WARN_RL(cls, "rejecting a connection: %s",
                       pdata_why(pd, why, sizeof(why)));
            cls->stats.dropped++;
            cls->ops->reject(id, NULL, 0);
            cls->ops->destroy_id(id);
            return;
        }
        if (!peer_ip_ok(cls, id, pd)) {
            cls->ops->reject(id, NULL, 0);
            cls->ops->destroy_id(id);
            return;
        }
        on_connect_request(cls, id, pd);
        return;
    }
    if (!conn || conn->state == VC_CLOSING) {
        if (!conn)
            VB_DBG(cls, "rdma_cm event %s on an unknown id",
                   vb_strerr(VB_E_CM, event, eb, sizeof(eb)));
        return;
    }
    switch (event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
        if (id->verbs != cls->ctx) {
            char name[64];
            vb_peer_format(conn->peer, name, sizeof(name));
            VB_ERR_RL(cls, "%s is reached through device %s, not %s", name,
                      id->verbs ? ibv_get_device_name(id->verbs->device) : "?",
                      cls->dev);
            vb_conn_fail(conn, CW_UNREACHABLE);
            return;
        }
        conn->state = VC_RESOLVING_ROUTE;
        if (cls->ops->resolve_route(id, VB_CM_TIMEOUT_MS) != 0) {
            VB_ERR(cls, "rdma_resolve_route() failed: %s", strerror(errno));
            vb_conn_fail(conn, vb_status(VB_E_RC, -1));
        }
        return;
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
        on_route_resolved(conn);
        return;
    case RDMA_CM_EVENT_ESTABLISHED:
        on_established(conn, pd, pd_valid);
        return;
    case RDMA_CM_EVENT_DISCONNECTED:
    case RDMA_CM_EVENT_DEVICE_REMOVAL: {
        char name[64];
        vb_peer_format(conn->peer, name, sizeof(name));
        VB_DBG(cls, "connection to %s: %s", name,
               vb_strerr(VB_E_CM, event, eb, sizeof(eb)));
        /* What the peer sent before it disconnected has arrived (its sends
         * completed): take it from the CQ before failing its receives. */
        vb_drain_cq(cls);
        vb_conn_fail(conn, CW_DISCONNECTED);
        return;
    }
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
    case RDMA_CM_EVENT_CONNECT_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_REJECTED:
        conn_event_failed(conn, event, status);
        return;
    default:
        return;
    }
}

void vb_cm_progress(vb_class_t *cls)
{
    for (int i = 0; i < VB_CM_EVENTS_PER_CALL; i++) {
        struct rdma_cm_event *ev;
        struct vb_pdata pd;
        if (cls->ops->get_cm_event(cls->cm_ch, &ev) != 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                VB_ERR(cls, "rdma_get_cm_event() failed: %s", strerror(errno));
            break;
        }
        struct rdma_cm_id *id = ev->id;
        int event = ev->event, status = ev->status;
        bool ok = pdata_ok(ev->param.conn.private_data,
                           ev->param.conn.private_data_len, &pd);
        cls->ops->ack_cm_event(ev);
        on_event(cls, id, event, status, &pd, ok);
    }
}
