/*
 * na-ucx: addresses (peers), the listener and connections (endpoints).
 *
 * A peer is named by its canonical listen address "a.b.c.d:port" or
 * "[v6]:port".  One peer object exists per name, so addr_cmp is a pointer
 * comparison.  A peer is reached through an endpoint we opened to it by
 * sockaddr or, once its first message told us its name, through the
 * endpoint it opened to us.
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ucx.h"

/* Split "host:port", "[v6]:port", "host" (port 0). */
static cw_status_t ucx_split(const char *loc, char *host, size_t hostlen,
                             uint16_t *port_p)
{
    const char *colon, *hend;
    unsigned long port = 0;

    if (loc[0] == '[') {
        hend = strchr(loc, ']');
        if (hend == NULL)
            return CW_INVALID_ARG;
        colon = hend[1] == ':' ? hend + 1 : NULL;
        if (hend[1] != '\0' && colon == NULL)
            return CW_INVALID_ARG;
        loc++;
    } else {
        colon = strrchr(loc, ':');
        if (colon && strchr(loc, ':') != colon)
            return CW_INVALID_ARG; /* bare IPv6 needs brackets */
        hend = colon ? colon : loc + strlen(loc);
    }
    if ((size_t)(hend - loc) >= hostlen)
        return CW_INVALID_ARG;
    memcpy(host, loc, (size_t)(hend - loc));
    host[hend - loc] = '\0';
    if (colon) {
        const char *p = colon + 1;
        if (*p == '\0' || strlen(p) > 5)
            return CW_INVALID_ARG;
        for (; *p; p++) {
            if (*p < '0' || *p > '9')
                return CW_INVALID_ARG;
            port = port * 10 + (unsigned long)(*p - '0');
        }
        if (port > 65535)
            return CW_INVALID_ARG;
    }
    *port_p = (uint16_t)port;
    return CW_OK;
}

static void ucx_set_port(struct sockaddr_storage *ss, uint16_t port)
{
    if (ss->ss_family == AF_INET)
        ((struct sockaddr_in *)ss)->sin_port = htons(port);
    else
        ((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
}

static uint16_t ucx_get_port(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)ss)->sin_port);
    return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
}

/* Numeric IP, or (unless numeric_only) an interface name or a host name. */
static cw_status_t ucx_resolve(const char *host, bool numeric_only,
                               struct sockaddr_storage *ss, socklen_t *len_p)
{
    struct sockaddr_in *sin = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
    struct addrinfo hints, *res = NULL;
    struct ifaddrs *ifs = NULL;
    bool found = false;

    memset(ss, 0, sizeof(*ss));
    if (inet_pton(AF_INET, host, &sin->sin_addr) == 1) {
        sin->sin_family = AF_INET;
        *len_p = sizeof(*sin);
        return CW_OK;
    }
    if (inet_pton(AF_INET6, host, &sin6->sin6_addr) == 1) {
        sin6->sin6_family = AF_INET6;
        *len_p = sizeof(*sin6);
        return CW_OK;
    }
    if (numeric_only)
        return CW_INVALID_ARG;
    if (strlen(host) < IF_NAMESIZE && getifaddrs(&ifs) == 0) {
        /* Prefer the interface's IPv4 address, else its IPv6 one. */
        for (int fam = 0; fam < 2 && !found; fam++) {
            for (struct ifaddrs *i = ifs; i && !found; i = i->ifa_next) {
                int want = fam == 0 ? AF_INET : AF_INET6;
                if (i->ifa_addr == NULL || i->ifa_addr->sa_family != want ||
                    strcmp(i->ifa_name, host) != 0)
                    continue;
                *len_p = want == AF_INET ? sizeof(*sin) : sizeof(*sin6);
                memcpy(ss, i->ifa_addr, *len_p);
                found = true;
            }
        }
        freeifaddrs(ifs);
        if (found)
            return CW_OK;
    }
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, NULL, &hints, &res) != 0 || res == NULL)
        return CW_NOENT;
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *len_p = res->ai_addrlen;
    freeaddrinfo(res);
    return CW_OK;
}

static void ucx_format(const struct sockaddr_storage *ss, char *buf, size_t len)
{
    char ip[INET6_ADDRSTRLEN];

    if (ss->ss_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, ip,
                  sizeof(ip));
        snprintf(buf, len, "%s:%u", ip, ucx_get_port(ss));
    } else {
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, ip,
                  sizeof(ip));
        snprintf(buf, len, "[%s]:%u", ip, ucx_get_port(ss));
    }
}

static struct cw_na_addr *ucx_peer_find(struct ucx_cls *cls, const char *str)
{
    uint64_t h = nau_ptable_hash(&cls->peers, str, strlen(str));

    for (struct nau_ptable_node *n = nau_ptable_first(&cls->peers, h); n;
         n = nau_ptable_next(n)) {
        struct cw_na_addr *p = nau_container_of(n, struct cw_na_addr, pnode);
        if (strcmp(p->str, str) == 0)
            return p;
    }
    return NULL;
}

static cw_status_t ucx_peer_create(struct ucx_cls *cls,
                                   const struct sockaddr_storage *ss,
                                   socklen_t sslen, struct cw_na_addr **peer_p)
{
    char str[UCX_ADDR_STR_MAX];
    struct cw_na_addr *peer;
    uint64_t id;

    ucx_format(ss, str, sizeof(str));
    peer = ucx_peer_find(cls, str);
    if (peer) {
        nau_ptable_ref(&peer->pnode);
        *peer_p = peer;
        return CW_OK;
    }
    peer = calloc(1, sizeof(*peer));
    if (peer == NULL)
        return CW_NOMEM;
    peer->pnode.refs = 1;
    id = nau_fnv1a64(str, strlen(str));
    peer->tag_id = (uint32_t)(id ^ (id >> 32));
    memcpy(&peer->ss, ss, sslen);
    peer->sslen = sslen;
    nau_list_init(&peer->recvs);
    nau_list_init(&peer->uq);
    memcpy(peer->str, str, sizeof(str));
    nau_ptable_insert(&cls->peers, &peer->pnode,
                      nau_ptable_hash(&cls->peers, str, strlen(str)));
    *peer_p = peer;
    return CW_OK;
}

/* strict: numeric addresses in canonical form only (wire input). */
cw_status_t ucx_peer_get(struct ucx_cls *cls, const char *str, bool strict,
                         struct cw_na_addr **peer_p)
{
    char host[UCX_ADDR_STR_MAX], canon[UCX_ADDR_STR_MAX];
    struct sockaddr_storage ss;
    struct cw_na_addr *peer;
    socklen_t sslen;
    uint16_t port;
    cw_status_t ret;

    if (str == NULL)
        return CW_INVALID_ARG;
    if (strict) {
        peer = ucx_peer_find(cls, str);
        if (peer) {
            nau_ptable_ref(&peer->pnode);
            *peer_p = peer;
            return CW_OK;
        }
    }
    ret = ucx_split(str, host, sizeof(host), &port);
    if (ret != CW_OK || port == 0 || host[0] == '\0')
        return CW_INVALID_ARG;
    ret = ucx_resolve(host, strict, &ss, &sslen);
    if (ret != CW_OK) {
        if (!strict)
            UCX_ERR(cls,
                    "cannot resolve '%s' (not an address, interface or "
                    "host name)",
                    host);
        return ret;
    }
    ucx_set_port(&ss, port);
    if (strict) {
        ucx_format(&ss, canon, sizeof(canon));
        if (strcmp(canon, str) != 0)
            return CW_INVALID_ARG;
    }
    return ucx_peer_create(cls, &ss, sslen, peer_p);
}

void ucx_peer_put(struct ucx_cls *cls, struct cw_na_addr *peer)
{
    if (peer == NULL || !nau_ptable_unref(&peer->pnode))
        return;
    nau_ptable_remove(&cls->peers, &peer->pnode);
    free(peer);
}

void ucx_peers_free_all(struct ucx_cls *cls)
{
    struct nau_ptable_node *n;

    while ((n = nau_ptable_iter(&cls->peers, NULL)) != NULL) {
        nau_ptable_remove(&cls->peers, n);
        free(nau_container_of(n, struct cw_na_addr, pnode));
    }
}

/* ---- connections ---- */

static void ucx_ep_err_cb(void *arg, ucp_ep_h ep, ucs_status_t st)
{
    ucx_conn_fail(arg, st);
}

/* Mark a connection broken; the next progress fails what waits on it and
 * closes it. */
void ucx_conn_fail(struct ucx_conn *conn, ucs_status_t st)
{
    struct ucx_cls *cls = conn->cls;

    if (conn->failed)
        return;
    conn->failed = true;
    conn->error = st;
    nau_list_del(&conn->link);
    nau_list_add_tail(&cls->dead, &conn->link);
    if (conn->outgoing)
        UCX_WARN_RL(cls, "connection to %s failed: %s",
                    conn->peer ? conn->peer->str : "?", ucs_status_string(st));
    else
        UCX_LOG_RL(cls, CW_LOG_INFO, "connection from %s closed: %s",
                   conn->peer ? conn->peer->str : "unidentified peer",
                   ucs_status_string(st));
}

static struct ucx_conn *ucx_conn_new(struct ucx_cls *cls, bool outgoing)
{
    struct ucx_conn *conn = calloc(1, sizeof(*conn));

    if (conn == NULL)
        return NULL;
    conn->cls = cls;
    conn->outgoing = outgoing;
    nau_list_init(&conn->rma);
    nau_list_init(&conn->rkeys);
    return conn;
}

static void ucx_conn_add(struct ucx_cls *cls, struct ucx_conn *conn)
{
    nau_ptable_insert_u64(&cls->eps, &conn->enode, (uintptr_t)conn->ep);
    nau_list_add_tail(&cls->conns, &conn->link);
}

static void ucx_ep_params_common(ucp_ep_params_t *p, struct ucx_conn *conn)
{
    p->field_mask |=
        UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    p->err_mode = UCP_ERR_HANDLING_MODE_PEER;
    p->err_handler.cb = ucx_ep_err_cb;
    p->err_handler.arg = conn;
}

cw_status_t ucx_peer_conn(struct ucx_cls *cls, struct cw_na_addr *peer,
                          struct ucx_conn **conn_p)
{
    ucp_ep_params_t p = {0};
    struct ucx_conn *conn;
    ucs_status_t st;

    if (peer->conn && !peer->conn->failed) {
        *conn_p = peer->conn;
        return CW_OK;
    }
    conn = ucx_conn_new(cls, true);
    if (conn == NULL)
        return CW_NOMEM;
    p.field_mask = UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_FLAGS;
    p.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    p.sockaddr.addr = (const struct sockaddr *)&peer->ss;
    p.sockaddr.addrlen = peer->sslen;
    ucx_ep_params_common(&p, conn);
    st = ucp_ep_create(cls->worker, &p, &conn->ep);
    if (st != UCS_OK) {
        UCX_ERR_RL(cls, "ucp_ep_create(%s) failed: %s", peer->str,
                   ucs_status_string(st));
        free(conn);
        return ucx_status(st);
    }
    ucx_conn_add(cls, conn);
    conn->peer = peer;
    nau_ptable_ref(&peer->pnode);
    peer->conn = conn;
    *conn_p = conn;
    return CW_OK;
}

struct ucx_conn *ucx_conn_by_ep(struct ucx_cls *cls, ucp_ep_h ep)
{
    struct nau_ptable_node *n = nau_ptable_find_u64(&cls->eps, (uintptr_t)ep);

    return n ? nau_container_of(n, struct ucx_conn, enode) : NULL;
}

void ucx_conn_identify(struct ucx_cls *cls, struct ucx_conn *conn,
                       struct cw_na_addr *peer)
{
    if (conn == NULL || conn->failed)
        return;
    if (conn->peer == NULL) {
        conn->peer = peer;
        nau_ptable_ref(&peer->pnode);
    }
    if (conn->peer == peer && (peer->conn == NULL || peer->conn->failed))
        peer->conn = conn;
}

static void ucx_conn_request_cb(ucp_conn_request_h req, void *arg)
{
    struct ucx_cls *cls = arg;
    ucp_ep_params_t p = {0};
    struct ucx_conn *conn;
    ucs_status_t st;

    if (cls->listener != NULL && ucx_guard_refuse(cls)) {
        ucp_listener_reject(cls->listener, req);
        return;
    }
    conn = ucx_conn_new(cls, false);
    if (conn == NULL) {
        UCX_ERR_RL(cls, "out of memory accepting a connection");
        ucp_listener_reject(cls->listener, req);
        return;
    }
    p.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST;
    p.conn_request = req;
    ucx_ep_params_common(&p, conn);
    st = ucp_ep_create(cls->worker, &p, &conn->ep);
    if (st != UCS_OK) {
        UCX_ERR_RL(cls, "ucp_ep_create(accept) failed: %s",
                   ucs_status_string(st));
        free(conn);
        return;
    }
    ucx_conn_add(cls, conn);
}

static void ucx_close_cb(void *req, ucs_status_t st, void *user_data)
{
    struct ucx_conn *conn = user_data;

    if (!conn->released)
        ucp_request_free(req);
    if (conn->posting) { /* see ucx_op_req_posted() */
        conn->close_done = true;
        return;
    }
    conn->close_req = NULL;
    nau_list_del(&conn->link);
    if (conn->peer)
        ucx_peer_put(conn->cls, conn->peer);
    free(conn);
}

static void ucx_conn_close(struct ucx_cls *cls, struct ucx_conn *conn,
                           bool force)
{
    ucp_request_param_t p = {0};
    void *req;

    nau_ptable_remove(&cls->eps, &conn->enode);
    /* Its put/get wait on conn->rma, which goes with it. */
    ucx_rma_fail_conn(cls, conn, CW_DISCONNECTED);
    conn->failed = true; /* later error callbacks are for the close */
    if (conn->peer && conn->peer->conn == conn)
        conn->peer->conn = NULL;
    nau_list_del(&conn->link);
    ucx_rkey_conn_closed(conn);
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = ucx_close_cb;
    p.user_data = conn;
    if (force) {
        p.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
        p.flags = UCP_EP_CLOSE_FLAG_FORCE;
    }
    conn->posting = true;
    req = ucp_ep_close_nbx(conn->ep, &p);
    conn->posting = false;
    if (UCS_PTR_IS_PTR(req) && !conn->close_done) {
        conn->close_req = req;
        nau_list_add_tail(&cls->closing, &conn->link);
        return;
    }
    if (conn->peer)
        ucx_peer_put(cls, conn->peer);
    free(conn);
}

/* After progress: fail what waited on broken connections, then close. */
void ucx_conns_reap(struct ucx_cls *cls)
{
    while (!nau_list_empty(&cls->dead)) {
        struct ucx_conn *conn =
            nau_container_of(cls->dead.next, struct ucx_conn, link);
        cw_status_t st = ucx_status(conn->error);
        struct cw_na_addr *peer = conn->peer;

        if (st == CW_OK || st == CW_CANCELED || st == CW_INTERNAL)
            st = CW_DISCONNECTED;
        ucx_rma_fail_conn(cls, conn, st);
        if (peer && (peer->conn == conn || peer->conn == NULL)) {
            peer->conn = NULL;
            ucx_msg_fail_peer(cls, peer, st);
        }
        ucx_conn_close(cls, conn, true);
    }
}

static void ucx_flush_cb(void *req, ucs_status_t st, void *user_data)
{
    struct ucx_cls *cls = user_data;

    ucp_request_free(req);
    cls->flushing--;
}

/* Finalize: a send completes once UCX has the data, not once the peer has
 * it, and the force close below discards what UCX and the socket still
 * hold (a burst sent just before closing lost a thousand completed
 * sends).  So first flush every live endpoint, for at most @p timeout_ns;
 * unlike a graceful close, a flush needs nothing from a peer that is not
 * progressing beyond reading its socket.  A peer that reads keeps the
 * worker busy (the 6000-send burst flushed in 15 ms); one that stopped
 * reading leaves it idle, and the flush gives up after @p idle_ns without
 * an event rather than hold the caller (a gateway's worker closing a
 * network on reload) for the whole timeout.  Both bounds are parameters
 * (close_flush_ms, close_idle_ms): a flush of 0 ms skips it, an idle
 * bound of 0 leaves only the flush's. */
static void ucx_conns_flush(struct ucx_cls *cls, uint64_t timeout_ns,
                            uint64_t idle_ns)
{
    uint64_t now = cls->host->now_ns();
    uint64_t deadline = now + timeout_ns;
    uint64_t quiet_until = idle_ns != 0 ? now + idle_ns : UINT64_MAX;

    for (struct nau_list *l = cls->conns.next; l != &cls->conns; l = l->next) {
        struct ucx_conn *conn = nau_container_of(l, struct ucx_conn, link);
        ucp_request_param_t p = {0};
        ucs_status_ptr_t req;

        p.op_attr_mask =
            UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
        p.cb.send = ucx_flush_cb;
        p.user_data = cls;
        /* Counted first: UCX 1.13 may run the callback inside the call. */
        cls->flushing++;
        req = ucp_ep_flush_nbx(conn->ep, &p);
        if (!UCS_PTR_IS_PTR(req))
            cls->flushing--;
    }
    while (cls->flushing > 0 && now < deadline && now < quiet_until) {
        /* Finalize's: no drain here, which would start receives into
         * held ones' buffers (ucx_finalize starts nothing new). */
        if (ucp_worker_progress(cls->worker) != 0 && idle_ns != 0)
            quiet_until = now + idle_ns;
        now = cls->host->now_ns();
    }
    if (cls->flushing > 0)
        UCX_DBG(cls, "closing with %u endpoint flush(es) unfinished: %s",
                cls->flushing, now < deadline ? "peers idle" : "timeout");
}

void ucx_conns_close_all(struct ucx_cls *cls)
{
    ucx_conns_reap(cls);
    if (cls->close_flush_ns != 0)
        ucx_conns_flush(cls, cls->close_flush_ns, cls->close_idle_ns);
    ucx_conns_reap(cls);
    while (!nau_list_empty(&cls->conns))
        ucx_conn_close(cls,
                       nau_container_of(cls->conns.next, struct ucx_conn, link),
                       true);
}

/* Finalize, drain timed out: let UCX release what is still out. */
void ucx_conns_release_reqs(struct ucx_cls *cls)
{
    for (struct nau_list *l = cls->closing.next; l != &cls->closing;
         l = l->next) {
        struct ucx_conn *conn = nau_container_of(l, struct ucx_conn, link);
        if (conn->close_req && !conn->released) {
            ucp_request_free(conn->close_req);
            conn->released = true;
        }
    }
}

void ucx_conns_free_all(struct ucx_cls *cls)
{
    struct nau_list *lists[] = {&cls->conns, &cls->dead, &cls->closing};

    for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
        while (!nau_list_empty(lists[i])) {
            struct ucx_conn *conn =
                nau_container_of(lists[i]->next, struct ucx_conn, link);
            nau_list_del(&conn->link);
            if (conn->peer)
                ucx_peer_put(cls, conn->peer);
            free(conn);
        }
    }
}

/* The interface that owns the location's address ("10.0.0.1:7000" or
 * "eth0:0"), so that UCX uses only that device: its other devices (lo in a
 * network namespace, say) may carry addresses the peer cannot reach. */
bool ucx_location_ifname(const char *location, char *ifname, size_t len)
{
    char host[UCX_ADDR_STR_MAX];
    struct sockaddr_storage ss;
    struct ifaddrs *ifs = NULL;
    socklen_t sslen;
    uint16_t port;
    bool found = false;

    if (location == NULL ||
        ucx_split(location, host, sizeof(host), &port) != CW_OK ||
        host[0] == '\0' || strcmp(host, "*") == 0 ||
        strcmp(host, "0.0.0.0") == 0 || getifaddrs(&ifs) != 0)
        return false;
    for (struct ifaddrs *i = ifs; i && !found; i = i->ifa_next)
        found = strcmp(i->ifa_name, host) == 0;
    if (found) {
        snprintf(ifname, len, "%s", host);
    } else if (ucx_resolve(host, true, &ss, &sslen) == CW_OK) {
        for (struct ifaddrs *i = ifs; i && !found; i = i->ifa_next) {
            if (i->ifa_addr == NULL || i->ifa_addr->sa_family != ss.ss_family)
                continue;
            if (ss.ss_family == AF_INET)
                found = memcmp(&((struct sockaddr_in *)i->ifa_addr)->sin_addr,
                               &((struct sockaddr_in *)&ss)->sin_addr,
                               sizeof(struct in_addr)) == 0;
            else
                found = memcmp(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr,
                               &((struct sockaddr_in6 *)&ss)->sin6_addr,
                               sizeof(struct in6_addr)) == 0;
            if (found)
                snprintf(ifname, len, "%s", i->ifa_name);
        }
    }
    freeifaddrs(ifs);
    return found;
}

/* Advertised address for a wildcard listener: the first configured
 * non-loopback IPv4 interface that is up, else the loopback. */
static void ucx_pick_host(struct sockaddr_storage *ss, socklen_t *len_p)
{
    struct sockaddr_in *sin = (struct sockaddr_in *)ss;
    struct ifaddrs *ifs = NULL;

    memset(ss, 0, sizeof(*ss));
    sin->sin_family = AF_INET;
    sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    *len_p = sizeof(*sin);
    if (getifaddrs(&ifs) != 0)
        return;
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
            (i->ifa_flags & IFF_UP) && !(i->ifa_flags & IFF_LOOPBACK)) {
            memcpy(sin, i->ifa_addr, sizeof(*sin));
            break;
        }
    }
    freeifaddrs(ifs);
}

ucs_status_t ucx_listener_open(struct ucx_cls *cls)
{
    ucp_listener_params_t lp = {0};

    lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR |
                    UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    lp.sockaddr.addr = (const struct sockaddr *)&cls->listen_ss;
    lp.sockaddr.addrlen = cls->listen_len;
    lp.conn_handler.cb = ucx_conn_request_cb;
    lp.conn_handler.arg = cls;
    return ucp_listener_create(cls->worker, &lp, &cls->listener);
}

cw_status_t ucx_listen(struct ucx_cls *cls, const char *location)
{
    char host[UCX_ADDR_STR_MAX], str[UCX_ADDR_STR_MAX];
    struct sockaddr_storage bind_ss, adv_ss;
    ucp_listener_attr_t attr = {0};
    socklen_t bind_len, adv_len;
    uint16_t port = 0;
    ucs_status_t st;
    cw_status_t ret;

    if (location == NULL)
        location = "";
    ret = ucx_split(location, host, sizeof(host), &port);
    if (ret != CW_OK) {
        UCX_ERR(cls, "bad location '%s' (want host:port)", location);
        return ret;
    }
    if (host[0] == '\0' || strcmp(host, "*") == 0 ||
        strcmp(host, "0.0.0.0") == 0) {
        struct sockaddr_in *sin = (struct sockaddr_in *)&bind_ss;
        memset(&bind_ss, 0, sizeof(bind_ss));
        sin->sin_family = AF_INET;
        sin->sin_addr.s_addr = htonl(INADDR_ANY);
        bind_len = sizeof(*sin);
        ucx_pick_host(&adv_ss, &adv_len);
    } else {
        ret = ucx_resolve(host, false, &bind_ss, &bind_len);
        if (ret != CW_OK) {
            UCX_ERR(cls,
                    "cannot resolve '%s' (not an address, interface or "
                    "host name)",
                    host);
            return ret;
        }
        adv_ss = bind_ss;
        adv_len = bind_len;
    }
    ucx_set_port(&bind_ss, port);

    cls->listen_ss = bind_ss;
    cls->listen_len = bind_len;
    st = ucx_listener_open(cls);
    if (st != UCS_OK) {
        UCX_ERR(cls, "ucp_listener_create(%s) failed: %s", location,
                ucs_status_string(st));
        return ucx_status(st);
    }
    attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    st = ucp_listener_query(cls->listener, &attr);
    if (st != UCS_OK) {
        UCX_ERR(cls, "ucp_listener_query() failed: %s", ucs_status_string(st));
        return ucx_status(st);
    }
    /* Opened again after a pause, it must be on the same port. */
    ucx_set_port(&cls->listen_ss, ucx_get_port(&attr.sockaddr));
    cls->listening = true;
    ucx_set_port(&adv_ss, ucx_get_port(&attr.sockaddr));
    ucx_format(&adv_ss, str, sizeof(str));
    ret = ucx_peer_create(cls, &adv_ss, adv_len, &cls->self);
    if (ret != CW_OK)
        return ret;
    cls->self_tag_id = cls->self->tag_id;
    return CW_OK;
}

/* ---- address ops ---- */

cw_status_t ucx_addr_lookup(cw_na_class_t *c, const char *location,
                            cw_na_addr_t **addr_p)
{
    if (location == NULL || addr_p == NULL)
        return CW_INVALID_ARG;
    return ucx_peer_get(ucx_cls(c), location, false, addr_p);
}

cw_status_t ucx_addr_self(cw_na_class_t *c, cw_na_addr_t **addr_p)
{
    struct ucx_cls *cls = ucx_cls(c);

    nau_ptable_ref(&cls->self->pnode);
    *addr_p = cls->self;
    return CW_OK;
}

cw_status_t ucx_addr_dup(cw_na_class_t *c, cw_na_addr_t *addr,
                         cw_na_addr_t **addr_p)
{
    if (addr == NULL)
        return CW_INVALID_ARG;
    nau_ptable_ref(&addr->pnode);
    *addr_p = addr;
    return CW_OK;
}

void ucx_addr_free(cw_na_class_t *c, cw_na_addr_t *addr)
{
    ucx_peer_put(ucx_cls(c), addr);
}

bool ucx_addr_cmp(cw_na_class_t *c, cw_na_addr_t *a, cw_na_addr_t *b)
{
    return a == b;
}

cw_status_t ucx_addr_to_string(cw_na_class_t *c, cw_na_addr_t *addr, char *buf,
                               size_t *len_p)
{
    size_t need;

    if (addr == NULL || len_p == NULL)
        return CW_INVALID_ARG;
    need = strlen(addr->str) + 1;
    if (buf == NULL || *len_p < need) {
        *len_p = need;
        return CW_OVERFLOW;
    }
    memcpy(buf, addr->str, need);
    return CW_OK;
}

/* Serialized form: one length byte, then the canonical string. */
size_t ucx_addr_serialize_size(cw_na_class_t *c, cw_na_addr_t *addr)
{
    return addr ? 1 + strlen(addr->str) : 0;
}

cw_status_t ucx_addr_serialize(cw_na_class_t *c, void *buf, size_t size,
                               cw_na_addr_t *addr)
{
    size_t n;

    if (addr == NULL || buf == NULL)
        return CW_INVALID_ARG;
    n = strlen(addr->str);
    if (size < 1 + n)
        return CW_OVERFLOW;
    ((uint8_t *)buf)[0] = (uint8_t)n;
    memcpy((uint8_t *)buf + 1, addr->str, n);
    return CW_OK;
}

cw_status_t ucx_addr_deserialize(cw_na_class_t *c, const void *buf, size_t size,
                                 cw_na_addr_t **addr_p)
{
    char str[UCX_ADDR_STR_MAX];
    const uint8_t *p = buf;
    size_t n;

    if (buf == NULL || addr_p == NULL || size < 1)
        return CW_INVALID_ARG;
    n = p[0];
    if (n == 0 || n >= sizeof(str) || size < 1 + n)
        return CW_INVALID_ARG;
    memcpy(str, p + 1, n);
    str[n] = '\0';
    if (strlen(str) != n)
        return CW_INVALID_ARG;
    return ucx_peer_get(ucx_cls(c), str, true, addr_p);
}
