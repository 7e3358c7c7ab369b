/*
 * Fake verbs device: the connection manager and the wire below it.  Each
 * connected rdma_cm_id owns a loopback TCP socket; the CM exchange is
 * REQ -> REP -> RTU (reject: REJ; teardown: DREQ/DREP), then the socket
 * carries the RC packets of the id's QP.  Events are queued on the
 * channel; the channel fd is an epoll fd over an eventfd (events queued)
 * and every socket of the channel, so it also becomes readable when wire
 * traffic needs the owner's attention (a spurious wakeup for rdma_cm,
 * which callers must tolerate anyway).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fake.h"

#define FAKE_MAX_FRAME       ((1u << 31) + 4096u)
#define FAKE_REJ_NO_LISTENER 8  /* IB CM: invalid service ID */
#define FAKE_REJ_CONSUMER    28 /* IB CM: consumer reject */

/* ---- byte buffers ---- */

int fake_buf_reserve(struct fake_buf *b, size_t more)
{
    if (b->off > 0 && b->off == b->len) {
        b->off = b->len = 0;
    } else if (b->off > 0 && b->off > b->cap / 2) {
        memmove(b->data, b->data + b->off, b->len - b->off);
        b->len -= b->off;
        b->off = 0;
    }
    if (b->cap - b->len >= more)
        return 0;
    size_t ncap = b->cap ? b->cap : 65536;
    while (ncap - b->len < more)
        ncap *= 2;
    uint8_t *n = realloc(b->data, ncap);
    if (!n)
        return -1;
    b->data = n;
    b->cap = ncap;
    return 0;
}

static void fake_buf_free(struct fake_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof(*b));
}

/* ---- events ---- */

static void ch_signal(struct fake_cmch *ch, bool on)
{
    uint64_t v = 1;
    if (on) {
        if (write(ch->efd, &v, sizeof(v)) < 0)
            return;
    } else if (read(ch->efd, &v, sizeof(v)) < 0) {
        return;
    }
}

static void queue_event(struct fake_id *fid, enum rdma_cm_event_type type,
                        int status, const void *pdata, size_t plen)
{
    struct fake_ev *e = calloc(1, sizeof(*e));
    if (!e)
        return; /* as with a lost MAD: the peer times out */
    e->ev.id = &fid->id;
    e->ev.event = type;
    e->ev.status = status;
    if (type == RDMA_CM_EVENT_CONNECT_REQUEST && fid->listener)
        e->ev.listen_id = &fid->listener->id;
    if (plen > FAKE_MAX_PDATA)
        plen = FAKE_MAX_PDATA;
    if (plen)
        memcpy(e->pdata, pdata, plen);
    e->ev.param.conn.private_data = e->pdata;
    e->ev.param.conn.private_data_len = (uint8_t)plen;
    e->ev.param.conn.qp_num = fid->peer_qpn;
    e->ev.param.conn.rnr_retry_count = fid->peer_rnr_retry;
    e->ev.param.conn.srq = 0;
    if (fid->ch->evtail)
        fid->ch->evtail->next = e;
    else {
        fid->ch->evhead = e;
        ch_signal(fid->ch, true);
    }
    fid->ch->evtail = e;
}

/* ---- sockets ---- */

static void id_epoll(struct fake_id *fid, bool add, bool out)
{
    struct epoll_event ev = {.events = EPOLLIN | (out ? EPOLLOUT : 0u),
                             .data.ptr = fid};
    epoll_ctl(fid->ch->ch.fd, add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fid->fd,
              &ev);
    fid->epollout = out;
}

static void id_close_fd(struct fake_id *fid)
{
    if (fid->fd >= 0) {
        epoll_ctl(fid->ch->ch.fd, EPOLL_CTL_DEL, fid->fd, NULL);
        close(fid->fd);
        fid->fd = -1;
    }
}

uint8_t *fake_id_frame(struct fake_id *fid, const struct fake_hdr *h)
{
    if (fake_buf_reserve(&fid->out, sizeof(*h) + h->len) != 0)
        return NULL;
    memcpy(fid->out.data + fid->out.len, h, sizeof(*h));
    uint8_t *p = fid->out.data + fid->out.len + sizeof(*h);
    fid->out.len += sizeof(*h) + h->len;
    return p;
}

void fake_id_flush(struct fake_id *fid)
{
    if (fid->fd < 0 || fid->eof) {
        fid->out.len = fid->out.off = 0;
        return;
    }
    if (fid->st == FI_TCP_CONNECTING)
        return;
    while (fid->out.off < fid->out.len) {
        ssize_t n = send(fid->fd, fid->out.data + fid->out.off,
                         fid->out.len - fid->out.off, MSG_NOSIGNAL);
        if (n > 0) {
            fid->out.off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!fid->epollout)
                id_epoll(fid, false, true);
            return;
        }
        /* The peer is gone; the next pump reports it. */
        fid->eof = true;
        ch_signal(fid->ch, true);
        fid->out.len = fid->out.off = 0;
        return;
    }
    fid->out.len = fid->out.off = 0;
    if (fid->epollout)
        id_epoll(fid, false, false);
}

/* Small packets (ACKs, credits) must not wait for Nagle + delayed ACK. */
static void sock_nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int sock_new(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd >= 0)
        sock_nodelay(fd);
    return fd;
}

/* ---- ids ---- */

static struct fake_id *id_new(struct fake_cmch *ch, void *context,
                              enum rdma_port_space ps)
{
    struct fake_id *fid = calloc(1, sizeof(*fid));
    if (!fid)
        return NULL;
    fid->id.channel = &ch->ch;
    fid->id.context = context;
    fid->id.ps = ps;
    fid->id.qp_type = IBV_QPT_RC;
    fid->ch = ch;
    fid->fd = -1;
    /* rdma_cm starts each connection at a random 24-bit PSN. */
    fid->start_psn =
        (uint32_t)((fake_now_ns() ^ (uintptr_t)fid) * 2654435761u) & 0xffffffu;
    fid->next = ch->ids;
    ch->ids = fid;
    return fid;
}

static void id_free(struct fake_id *fid)
{
    struct fake_cmch *ch = fid->ch;
    for (struct fake_id **pp = &ch->ids; *pp; pp = &(*pp)->next)
        if (*pp == fid) {
            *pp = fid->next;
            break;
        }
    struct fake_ev **pe = &ch->evhead;
    ch->evtail = NULL;
    while (*pe) {
        struct fake_ev *e = *pe;
        if (e->ev.id == &fid->id || e->ev.listen_id == &fid->id) {
            *pe = e->next;
            free(e);
        } else {
            ch->evtail = e;
            pe = &e->next;
        }
    }
    if (!ch->evhead)
        ch_signal(ch, false);
    id_close_fd(fid);
    fake_buf_free(&fid->in);
    fake_buf_free(&fid->out);
    free(fid);
}

static void id_set_local(struct fake_id *fid)
{
    socklen_t sl = sizeof(fid->id.route.addr.src_sin);
    getsockname(fid->fd, &fid->id.route.addr.src_addr, &sl);
}

static void on_peer_gone(struct fake_id *fid, int err)
{
    enum fake_id_state st = fid->st;
    id_close_fd(fid);
    fid->eof = true;
    fid->st = FI_DISCONNECTED;
    switch (st) {
    case FI_CONNECTED:
    case FI_DISCONNECTING:
        if (fid->id.qp && fid->id.qp->state != IBV_QPS_ERR) {
            /* What the HCA reports once transport retries run out. */
            fake_qp_set_error((struct fake_qp *)fid->id.qp,
                              IBV_WC_RETRY_EXC_ERR);
        }
        queue_event(fid, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0);
        break;
    case FI_REP_SENT:
    case FI_REQ_REPORTED:
        queue_event(fid, RDMA_CM_EVENT_CONNECT_ERROR, -err, NULL, 0);
        break;
    case FI_TCP_CONNECTING:
        if (err == ECONNREFUSED)
            queue_event(fid, RDMA_CM_EVENT_REJECTED, FAKE_REJ_NO_LISTENER, NULL,
                        0);
        else
            queue_event(fid, RDMA_CM_EVENT_UNREACHABLE, -err, NULL, 0);
        break;
    case FI_REQ_SENT:
        queue_event(fid, RDMA_CM_EVENT_UNREACHABLE, -err, NULL, 0);
        break;
    default:
        break;
    }
}

/* REQ and REP start with the sender's struct fake_cm_peer; @p p_p moves
 * to the private data after it. */
static bool peer_take(struct fake_id *fid, const struct fake_hdr *h,
                      const uint8_t **p_p)
{
    if (h->len < sizeof(struct fake_cm_peer))
        return false;
    memcpy(&fid->peer, *p_p, sizeof(fid->peer));
    *p_p += sizeof(fid->peer);
    return true;
}

/* Append a REQ or REP: our struct fake_cm_peer, then the private data. */
static int cm_frame(struct fake_id *fid, struct fake_hdr *h,
                    const struct rdma_conn_param *param)
{
    struct fake_cm_peer me;
    fake_cm_peer_self(&me, fid->id.qp);
    h->len = (uint32_t)sizeof(me) + param->private_data_len;
    uint8_t *p = fake_id_frame(fid, h);
    if (!p)
        return ENOMEM;
    memcpy(p, &me, sizeof(me));
    if (param->private_data_len)
        memcpy(p + sizeof(me), param->private_data, param->private_data_len);
    return 0;
}

static void on_frame(struct fake_id *fid, const struct fake_hdr *h,
                     const uint8_t *p)
{
    struct fake_qp *qp = (struct fake_qp *)fid->id.qp;
    switch (h->type) {
    case FP_REQ:
        if (fid->st != FI_IDLE || !fid->listener || !peer_take(fid, h, &p))
            return;
        fid->peer_qpn = h->a;
        fid->peer_rnr_retry = (uint8_t)h->b;
        fid->peer_start_psn = h->psn;
        fid->st = FI_REQ_REPORTED;
        queue_event(fid, RDMA_CM_EVENT_CONNECT_REQUEST, 0, p,
                    h->len - sizeof(struct fake_cm_peer));
        fid->listener = NULL;
        return;
    case FP_REP:
        if (fid->st != FI_REQ_SENT || !qp || !peer_take(fid, h, &p))
            return;
        fid->peer_qpn = h->a;
        fid->peer_rnr_retry = (uint8_t)h->b;
        fid->peer_start_psn = h->psn;
        /* As librdmacm on the connect response: RTR, RTS, then RTU. */
        int rc = fake_qp_connect(qp, h->a, h->psn, fid->start_psn, &fid->conn,
                                 fid->peer_rnr_retry);
        if (rc) {
            struct fake_hdr rej = {.type = FP_REJ};
            fake_id_frame(fid, &rej);
            fid->st = FI_DISCONNECTED;
            queue_event(fid, RDMA_CM_EVENT_CONNECT_ERROR, -rc, NULL, 0);
            return;
        }
        fid->st = FI_CONNECTED;
        {
            struct fake_hdr rtu = {.type = FP_RTU};
            fake_id_frame(fid, &rtu);
        }
        queue_event(fid, RDMA_CM_EVENT_ESTABLISHED, 0, p,
                    h->len - sizeof(struct fake_cm_peer));
        return;
    case FP_RTU:
        if (fid->st != FI_REP_SENT)
            return;
        fid->st = FI_CONNECTED;
        queue_event(fid, RDMA_CM_EVENT_ESTABLISHED, 0, NULL, 0);
        return;
    case FP_REJ:
        if (fid->st != FI_REQ_SENT)
            return;
        fid->st = FI_DISCONNECTED;
        queue_event(fid, RDMA_CM_EVENT_REJECTED, FAKE_REJ_CONSUMER, p, h->len);
        return;
    case FP_DREQ: {
        if (fid->st != FI_CONNECTED && fid->st != FI_DISCONNECTING)
            return;
        if (qp)
            fake_qp_set_error(qp, IBV_WC_WR_FLUSH_ERR);
        struct fake_hdr d = {.type = FP_DREP};
        fake_id_frame(fid, &d);
        fid->st = FI_DISCONNECTED;
        queue_event(fid, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0);
        return;
    }
    case FP_DREP:
        if (fid->st != FI_DISCONNECTING)
            return;
        fid->st = FI_DISCONNECTED;
        queue_event(fid, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0);
        return;
    default:
        if (qp && (fid->st == FI_CONNECTED || fid->st == FI_REP_SENT ||
                   fid->st == FI_DISCONNECTING))
            fake_qp_rx(qp, h, p);
        return;
    }
}

static void pump_listener(struct fake_id *l)
{
    for (;;) {
        struct sockaddr_in peer;
        socklen_t sl = sizeof(peer);
        int fd = accept4(l->fd, (struct sockaddr *)&peer, &sl,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        struct fake_id *c = id_new(l->ch, l->id.context, l->id.ps);
        if (!c) {
            close(fd);
            continue;
        }
        sock_nodelay(fd);
        c->fd = fd;
        c->listener = l;
        id_set_local(c);
        c->id.route.addr.dst_sin = peer;
        c->id.verbs =
            fake_ctx_for_ip(ntohl(c->id.route.addr.src_sin.sin_addr.s_addr));
        c->id.port_num = 1;
        id_epoll(c, true, false);
        fake_id_pump(c);
    }
}

void fake_id_pump(struct fake_id *fid)
{
    if (fid->st == FI_LISTEN) {
        pump_listener(fid);
        return;
    }
    if (fid->deadline_ns && fake_now_ns() > fid->deadline_ns) {
        fid->deadline_ns = 0;
        if (fid->st == FI_TCP_CONNECTING || fid->st == FI_REQ_SENT) {
            on_peer_gone(fid, ETIMEDOUT);
            return;
        }
        if (fid->st == FI_DISCONNECTING) {
            fid->st = FI_DISCONNECTED;
            queue_event(fid, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0);
        }
    }
    if (fid->fd < 0)
        return;
    if (fid->st == FI_TCP_CONNECTING) {
        struct pollfd p = {.fd = fid->fd, .events = POLLOUT};
        if (poll(&p, 1, 0) != 1)
            return;
        int err = 0;
        socklen_t sl = sizeof(err);
        getsockopt(fid->fd, SOL_SOCKET, SO_ERROR, &err, &sl);
        if (err) {
            on_peer_gone(fid, err);
            return;
        }
        id_set_local(fid);
        fid->st = FI_REQ_SENT;
    }
    fake_id_flush(fid);
    int gone = fid->eof ? EPIPE : 0;
    while (!gone) {
        if (fake_buf_reserve(&fid->in, 65536) != 0)
            break;
        ssize_t n = recv(fid->fd, fid->in.data + fid->in.len,
                         fid->in.cap - fid->in.len, 0);
        if (n > 0) {
            fid->in.len += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        gone = n == 0 ? ECONNRESET : errno;
    }
    while (fid->in.len - fid->in.off >= sizeof(struct fake_hdr)) {
        struct fake_hdr h;
        memcpy(&h, fid->in.data + fid->in.off, sizeof(h));
        if (h.len > FAKE_MAX_FRAME) {
            gone = EPROTO;
            break;
        }
        if (fid->in.len - fid->in.off - sizeof(h) < h.len)
            break;
        const uint8_t *p = fid->in.data + fid->in.off + sizeof(h);
        fid->in.off += sizeof(h) + h.len;
        on_frame(fid, &h, p);
        if (fid->fd < 0)
            return;
    }
    if (fid->in.off == fid->in.len)
        fid->in.off = fid->in.len = 0;
    fake_id_flush(fid);
    if (gone || fid->eof) {
        on_peer_gone(fid, gone ? gone : EPIPE);
        if (fid->listener)
            id_free(fid); /* hung up before its request: never reported */
    }
}

/* ---- rdma_cm entry points ---- */

/* What librdmacm checks of connect/accept parameters: private data size,
 * and read depths within the device's (RDMA_MAX_RESP_RES / _INIT_DEPTH,
 * 0xff, mean "the device's maximum"). */
static bool conn_param_ok(const struct rdma_conn_param *p)
{
    return p && p->private_data_len <= FAKE_MAX_PDATA &&
           (p->responder_resources == 0xff ||
            p->responder_resources <= FAKE_MAX_RD_ATOM) &&
           (p->initiator_depth == 0xff ||
            p->initiator_depth <= FAKE_MAX_RD_ATOM) &&
           p->retry_count <= 7;
}

static void conn_param_keep(struct fake_id *fid,
                            const struct rdma_conn_param *p)
{
    fid->conn = *p;
    fid->conn.private_data = NULL;
    fid->conn.private_data_len = 0;
    if (fid->conn.responder_resources == 0xff)
        fid->conn.responder_resources = FAKE_MAX_RD_ATOM;
    if (fid->conn.initiator_depth == 0xff)
        fid->conn.initiator_depth = FAKE_MAX_RD_ATOM;
}

struct rdma_event_channel *fake_create_event_channel(void)
{
    struct fake_cmch *ch = calloc(1, sizeof(*ch));
    if (!ch) {
        errno = ENOMEM;
        return NULL;
    }
    ch->ch.fd = epoll_create1(EPOLL_CLOEXEC);
    if (ch->ch.fd < 0)
        goto err_free;
    ch->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (ch->efd < 0)
        goto err_close_ep;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    if (epoll_ctl(ch->ch.fd, EPOLL_CTL_ADD, ch->efd, &ev) != 0)
        goto err_close_efd;
    return &ch->ch;

err_close_efd:
    close(ch->efd);
err_close_ep:
    close(ch->ch.fd);
err_free : {
    int e = errno;
    free(ch);
    errno = e;
}
    return NULL;
}

void fake_destroy_event_channel(struct rdma_event_channel *c)
{
    struct fake_cmch *ch = (struct fake_cmch *)c;
    if (!ch)
        return;
    /* Ids the user never saw (connect requests not yet reported). */
    while (ch->ids)
        id_free(ch->ids);
    while (ch->evhead) {
        struct fake_ev *e = ch->evhead;
        ch->evhead = e->next;
        free(e);
    }
    close(ch->efd);
    close(ch->ch.fd);
    free(ch);
}

int fake_create_id(struct rdma_event_channel *c, struct rdma_cm_id **id_p,
                   void *context, enum rdma_port_space ps)
{
    if (!c || !id_p || (ps != RDMA_PS_TCP && ps != RDMA_PS_IB)) {
        errno = EINVAL;
        return -1;
    }
    struct fake_id *fid = id_new((struct fake_cmch *)c, context, ps);
    if (!fid) {
        errno = ENOMEM;
        return -1;
    }
    *id_p = &fid->id;
    return 0;
}

int fake_destroy_id(struct rdma_cm_id *id)
{
    struct fake_id *fid = (struct fake_id *)id;
    if (!fid) {
        errno = EINVAL;
        return -1;
    }
    if (id->qp || fid->events_out) {
        errno = EBUSY;
        return -1;
    }
    if (fid->st == FI_LISTEN) {
        for (struct fake_id *c = fid->ch->ids, *n; c; c = n) {
            n = c->next;
            if (c->listener == fid)
                id_free(c);
        }
    }
    id_free(fid);
    return 0;
}

static int sin_check(const struct sockaddr *sa, struct ibv_context **ctx_p)
{
    if (!sa || sa->sa_family != AF_INET) {
        errno = EAFNOSUPPORT;
        return -1;
    }
    uint32_t ip = ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr);
    *ctx_p = ip == INADDR_ANY ? NULL : fake_ctx_for_ip(ip);
    if (ip != INADDR_ANY && !*ctx_p) {
        errno = EADDRNOTAVAIL;
        return -1;
    }
    return 0;
}

int fake_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
    struct fake_id *fid = (struct fake_id *)id;
    struct ibv_context *ctx;
    if (!fid || fid->st != FI_IDLE || fid->listener) {
        errno = EINVAL;
        return -1;
    }
    if (sin_check(addr, &ctx) != 0)
        return -1;
    int fd = sock_new();
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, addr, sizeof(struct sockaddr_in)) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    fid->fd = fd;
    id_set_local(fid);
    fid->id.verbs = ctx;
    fid->id.port_num = ctx ? 1 : 0;
    fid->st = FI_BOUND;
    return 0;
}

int fake_listen(struct rdma_cm_id *id, int backlog)
{
    struct fake_id *fid = (struct fake_id *)id;
    if (!fid || fid->st != FI_BOUND) {
        errno = EINVAL;
        return -1;
    }
    if (listen(fid->fd, backlog > 0 ? backlog : 128) != 0)
        return -1;
    id_epoll(fid, true, false);
    fid->st = FI_LISTEN;
    return 0;
}

int fake_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src,
                      struct sockaddr *dst, int timeout_ms)
{
    struct fake_id *fid = (struct fake_id *)id;
    struct ibv_context *sctx = NULL, *dctx = NULL;
    if (!fid || fid->st != FI_IDLE || fid->listener || timeout_ms <= 0) {
        errno = EINVAL;
        return -1;
    }
    if ((src && sin_check(src, &sctx) != 0) || sin_check(dst, &dctx) != 0)
        return -1;
    fid->id.route.addr.dst_sin = *(const struct sockaddr_in *)dst;
    if (src)
        fid->id.route.addr.src_sin = *(const struct sockaddr_in *)src;
    fid->id.verbs = sctx ? sctx : dctx;
    fid->id.port_num = 1;
    if (!fid->id.verbs) {
        queue_event(fid, RDMA_CM_EVENT_ADDR_ERROR, -EADDRNOTAVAIL, NULL, 0);
        return 0;
    }
    fid->st = FI_ADDR_RESOLVED;
    queue_event(fid, RDMA_CM_EVENT_ADDR_RESOLVED, 0, NULL, 0);
    return 0;
}

int fake_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
    struct fake_id *fid = (struct fake_id *)id;
    if (!fid || fid->st != FI_ADDR_RESOLVED || timeout_ms <= 0) {
        errno = EINVAL;
        return -1;
    }
    fid->st = FI_ROUTE_RESOLVED;
    queue_event(fid, RDMA_CM_EVENT_ROUTE_RESOLVED, 0, NULL, 0);
    return 0;
}

int fake_connect(struct rdma_cm_id *id, struct rdma_conn_param *param)
{
    struct fake_id *fid = (struct fake_id *)id;
    if (!fid || fid->st != FI_ROUTE_RESOLVED || !id->qp ||
        !conn_param_ok(param) ||
        (param->private_data_len && !param->private_data)) {
        errno = EINVAL;
        return -1;
    }
    conn_param_keep(fid, param);
    int fd = sock_new();
    if (fd < 0)
        return -1;
    struct sockaddr_in src = id->route.addr.src_sin;
    src.sin_port = 0;
    if (src.sin_family == AF_INET &&
        bind(fd, (struct sockaddr *)&src, sizeof(src)) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    fid->fd = fd;
    struct fake_hdr h = {.type = FP_REQ,
                         .psn = fid->start_psn,
                         .a = id->qp->qp_num,
                         .b = param->rnr_retry_count};
    if (cm_frame(fid, &h, param) != 0) {
        id_close_fd(fid);
        errno = ENOMEM;
        return -1;
    }
    fid->st = FI_TCP_CONNECTING;
    fid->deadline_ns = fake_now_ns() + FAKE_CONNECT_TIMEOUT_NS;
    id_epoll(fid, true, true);
    if (connect(fd, (struct sockaddr *)&id->route.addr.dst_sin,
                sizeof(struct sockaddr_in)) != 0 &&
        errno != EINPROGRESS) {
        on_peer_gone(fid, errno);
        return 0; /* reported as an event, like the real CM */
    }
    return 0;
}

int fake_accept(struct rdma_cm_id *id, struct rdma_conn_param *param)
{
    struct fake_id *fid = (struct fake_id *)id;
    if (!fid || fid->st != FI_REQ_REPORTED || !id->qp ||
        !conn_param_ok(param)) {
        errno = EINVAL;
        return -1;
    }
    conn_param_keep(fid, param);
    /* As librdmacm's rdma_accept(): RTR and RTS before the REP goes. */
    int rc = fake_qp_connect((struct fake_qp *)id->qp, fid->peer_qpn,
                             fid->peer_start_psn, fid->start_psn, &fid->conn,
                             param->rnr_retry_count);
    if (rc) {
        errno = rc;
        return -1;
    }
    struct fake_hdr h = {.type = FP_REP,
                         .psn = fid->start_psn,
                         .a = id->qp->qp_num,
                         .b = param->rnr_retry_count};
    if (cm_frame(fid, &h, param) != 0) {
        errno = ENOMEM;
        return -1;
    }
    fid->st = FI_REP_SENT;
    fake_id_flush(fid);
    if (fid->fd < 0)
        on_peer_gone(fid, ECONNRESET);
    return 0;
}

int fake_reject(struct rdma_cm_id *id, const void *pdata, uint8_t len)
{
    struct fake_id *fid = (struct fake_id *)id;
    if (!fid || fid->st != FI_REQ_REPORTED || len > FAKE_MAX_PDATA) {
        errno = EINVAL;
        return -1;
    }
    struct fake_hdr h = {.type = FP_REJ, .len = len};
    uint8_t *p = fake_id_frame(fid, &h);
    if (p && len)
        memcpy(p, pdata, len);
    fake_id_flush(fid);
    fid->st = FI_DISCONNECTED;
    return 0;
}

int fake_disconnect(struct rdma_cm_id *id)
{
    struct fake_id *fid = (struct fake_id *)id;
    if (!fid) {
        errno = EINVAL;
        return -1;
    }
    if (fid->st == FI_DISCONNECTED || fid->st == FI_DISCONNECTING)
        return 0;
    if (fid->st != FI_CONNECTED && fid->st != FI_REP_SENT) {
        errno = EINVAL;
        return -1;
    }
    if (id->qp)
        fake_qp_set_error((struct fake_qp *)id->qp, IBV_WC_WR_FLUSH_ERR);
    struct fake_hdr h = {.type = FP_DREQ};
    fake_id_frame(fid, &h);
    fid->st = FI_DISCONNECTING;
    fid->deadline_ns = fake_now_ns() + 1000000000ull;
    fake_id_flush(fid);
    return 0;
}

int fake_get_cm_event(struct rdma_event_channel *c, struct rdma_cm_event **ev_p)
{
    struct fake_cmch *ch = (struct fake_cmch *)c;
    if (!ch || !ev_p) {
        errno = EINVAL;
        return -1;
    }
    for (;;) {
        for (struct fake_id *f = ch->ids, *n; f; f = n) {
            n = f->next;
            fake_id_pump(f);
        }
        struct fake_ev *e = ch->evhead;
        if (e) {
            ch->evhead = e->next;
            if (!ch->evhead) {
                ch->evtail = NULL;
                ch_signal(ch, false);
            }
            ((struct fake_id *)e->ev.id)->events_out++;
            *ev_p = &e->ev;
            return 0;
        }
        int fl = fcntl(ch->ch.fd, F_GETFL);
        if (fl >= 0 && (fl & O_NONBLOCK)) {
            errno = EAGAIN;
            return -1;
        }
        struct pollfd p = {.fd = ch->ch.fd, .events = POLLIN};
        poll(&p, 1, 10);
    }
}

int fake_ack_cm_event(struct rdma_cm_event *ev)
{
    if (!ev) {
        errno = EINVAL;
        return -1;
    }
    struct fake_ev *e = (struct fake_ev *)ev;
    struct fake_id *fid = (struct fake_id *)ev->id;
    if (fid->events_out)
        fid->events_out--;
    free(e);
    return 0;
}
