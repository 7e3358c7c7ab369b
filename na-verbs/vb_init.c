/*
 * na-verbs: instance life cycle (device and address selection, PD, CQ,
 * completion channel, SRQ, pools), capabilities, the one translator from
 * verbs/rdma_cm results to cw_status_t, and the exported plugin entry.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "nau_param.h"
#include "vb.h"

cw_status_t vb_status(enum vb_err_kind kind, int code)
{
    switch (kind) {
    case VB_E_RC: {
        int e = code == -1 ? errno : code < 0 ? -code : code;
        switch (e) {
        case 0:
            return CW_OK;
        case ENOMEM:
        case ENOBUFS:
            return CW_NOMEM;
        case EINVAL:
            return CW_INVALID_ARG;
        case EAGAIN:
            return CW_AGAIN;
        case EBUSY:
            return CW_BUSY;
        case EADDRINUSE:
            return CW_ADDR_IN_USE;
        case EADDRNOTAVAIL:
        case ENODEV:
        case ENOENT:
        case ENXIO:
            return CW_NOENT;
        case ECONNREFUSED:
        case EHOSTUNREACH:
        case ENETUNREACH:
        case ETIMEDOUT:
            return CW_UNREACHABLE;
        case ECONNRESET:
        case ECONNABORTED:
        case EPIPE:
            return CW_DISCONNECTED;
        case EPERM:
        case EACCES:
            return CW_PERMISSION;
        case ENOSYS:
        case EOPNOTSUPP:
        case EAFNOSUPPORT:
        case EPROTONOSUPPORT:
            return CW_UNSUPPORTED;
        case EFAULT:
            return CW_FAULT;
        case EOVERFLOW:
            return CW_OVERFLOW;
        default:
            return CW_IO;
        }
    }
    case VB_E_WC:
        switch ((enum ibv_wc_status)code) {
        case IBV_WC_SUCCESS:
            return CW_OK;
        case IBV_WC_LOC_LEN_ERR:
            return CW_OVERFLOW;
        case IBV_WC_LOC_PROT_ERR:
        case IBV_WC_REM_ACCESS_ERR:
        case IBV_WC_MW_BIND_ERR:
            return CW_PERMISSION;
        case IBV_WC_WR_FLUSH_ERR:
            return CW_CANCELED;
        case IBV_WC_RETRY_EXC_ERR:
        case IBV_WC_RESP_TIMEOUT_ERR:
            return CW_DISCONNECTED;
        case IBV_WC_RNR_RETRY_EXC_ERR:
            return CW_BUSY;
        case IBV_WC_REM_INV_REQ_ERR:
        case IBV_WC_BAD_RESP_ERR:
            return CW_PROTOCOL;
        default:
            return CW_IO;
        }
    case VB_E_CM:
        switch ((enum rdma_cm_event_type)code) {
        case RDMA_CM_EVENT_ESTABLISHED:
            return CW_OK;
        case RDMA_CM_EVENT_DISCONNECTED:
        case RDMA_CM_EVENT_DEVICE_REMOVAL:
        case RDMA_CM_EVENT_TIMEWAIT_EXIT:
            return CW_DISCONNECTED;
        default:
            return CW_UNREACHABLE;
        }
    }
    return CW_INTERNAL;
}

const char *vb_strerr(enum vb_err_kind kind, int code, char *buf, size_t len)
{
    switch (kind) {
    case VB_E_RC: {
        int e = code == -1 ? errno : code < 0 ? -code : code;
        snprintf(buf, len, "%s", strerror(e));
        break;
    }
    case VB_E_WC:
        snprintf(buf, len, "%s", ibv_wc_status_str((enum ibv_wc_status)code));
        break;
    case VB_E_CM:
        snprintf(buf, len, "%s", rdma_event_str((enum rdma_cm_event_type)code));
        break;
    }
    return buf;
}

static cw_status_t vb_params(vb_class_t *cls, const char *const *params)
{
    const char *credits = nau_param(params, "credits", NULL);
    const char *eager = nau_param(params, "eager_size", NULL);
    uint64_t v = VB_DEFAULT_CREDITS;

    if (credits && nau_param_uint(credits, 4, 1024, &v) != CW_OK) {
        VB_ERR(cls, "parameter credits=%s: want 4..1024", credits);
        return CW_INVALID_ARG;
    }
    cls->credits = (unsigned)v;
    v = VB_DEFAULT_BUF - sizeof(struct vb_hdr);
    if (eager &&
        nau_param_uint(eager, VB_EAGER_MIN, VB_EAGER_MAX, &v) != CW_OK) {
        VB_ERR(cls, "parameter eager_size=%s: want %u..%u", eager, VB_EAGER_MIN,
               VB_EAGER_MAX);
        return CW_INVALID_ARG;
    }
    cls->buf_size = (size_t)v + sizeof(struct vb_hdr);
    return CW_OK;
}

/* Real devices only: the first IPv4 address whose rdma_cm binding lands on
 * the wanted device (any device when @p dev is empty). */
static cw_status_t vb_pick_ip(vb_class_t *cls, struct sockaddr_in *sin)
{
    struct ifaddrs *ifs, *i;
    cw_status_t st = CW_NOENT;
    if (getifaddrs(&ifs) != 0) {
        VB_ERR(cls, "getifaddrs() failed: %s", strerror(errno));
        return CW_IO;
    }
    for (i = ifs; i && st != CW_OK; i = i->ifa_next) {
        struct rdma_cm_id *id;
        struct sockaddr_in a;
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
            continue;
        memcpy(&a, i->ifa_addr, sizeof(a));
        if ((ntohl(a.sin_addr.s_addr) >> 24) == 127)
            continue;
        if (cls->ops->create_id(cls->cm_ch, &id, NULL, RDMA_PS_TCP) != 0)
            break;
        a.sin_port = 0;
        if (cls->ops->bind_addr(id, (struct sockaddr *)&a) == 0 && id->verbs &&
            (!cls->dev[0] ||
             strcmp(ibv_get_device_name(id->verbs->device), cls->dev) == 0)) {
            sin->sin_addr = a.sin_addr;
            st = CW_OK;
        }
        cls->ops->destroy_id(id);
    }
    freeifaddrs(ifs);
    if (st != CW_OK)
        VB_ERR(cls, "no IPv4 address on RDMA device %s",
               cls->dev[0] ? cls->dev : "(any)");
    return st;
}

static void vb_finalize(cw_na_class_t *cls);

static cw_status_t vb_set_nonblock(vb_class_t *cls, int fd, const char *what)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) {
        VB_ERR(cls, "fcntl(%s, O_NONBLOCK) failed: %s", what, strerror(errno));
        return CW_IO;
    }
    return CW_OK;
}

static cw_status_t vb_open_device(vb_class_t *cls)
{
    char eb[128];
    const char *name;
    struct ibv_port_attr pa;
    struct ibv_device_attr da;
    int rc;

    if (cls->ops->bind_addr(cls->listen_id,
                            (struct sockaddr *)&cls->self_sin)) {
        int e = errno;
        char ip[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &cls->self_sin.sin_addr, ip, sizeof(ip));
        VB_ERR(cls, "rdma_bind_addr(%s:%u) failed: %s", ip,
               ntohs(cls->self_sin.sin_port), strerror(e));
        return vb_status(VB_E_RC, e);
    }
    cls->ctx = cls->listen_id->verbs;
    if (!cls->ctx) {
        VB_ERR(cls, "bound address is not on an RDMA device");
        return CW_NOENT;
    }
    name = ibv_get_device_name(cls->ctx->device);
    if (cls->dev[0] && strcmp(name, cls->dev) != 0) {
        VB_ERR(cls, "address belongs to device %s, not %s", name, cls->dev);
        return CW_INVALID_ARG;
    }
    snprintf(cls->dev, sizeof(cls->dev), "%s", name);
    rc = cls->ops->query_port(cls->ctx, cls->devport, &pa);
    if (rc) {
        VB_ERR(cls, "ibv_query_port(%s, %u) failed: %s", cls->dev, cls->devport,
               vb_strerr(VB_E_RC, rc, eb, sizeof(eb)));
        return vb_status(VB_E_RC, rc);
    }
    if (pa.state != IBV_PORT_ACTIVE) {
        VB_ERR(cls, "port %u of %s is not active (%s)", cls->devport, cls->dev,
               ibv_port_state_str(pa.state));
        return CW_UNREACHABLE;
    }
    rc = cls->ops->query_device(cls->ctx, &da);
    if (rc) {
        VB_ERR(cls, "ibv_query_device(%s) failed: %s", cls->dev,
               vb_strerr(VB_E_RC, rc, eb, sizeof(eb)));
        return vb_status(VB_E_RC, rc);
    }
    cls->srq_max = da.max_srq_wr < 16384 ? da.max_srq_wr : 16384;
    cls->cq_size = da.max_cqe < 65536 ? da.max_cqe : 65536;
    if (cls->srq_max < (int)cls->credits || cls->cq_size <= cls->srq_max ||
        da.max_qp_wr < VB_SQ_DEPTH) {
        VB_ERR(cls, "device %s too small (srq %d, cqe %d, qp_wr %d)", cls->dev,
               da.max_srq_wr, da.max_cqe, da.max_qp_wr);
        return CW_UNSUPPORTED;
    }
    cls->rd_atom = 16;
    if (da.max_qp_rd_atom < cls->rd_atom)
        cls->rd_atom = (uint8_t)da.max_qp_rd_atom;
    if (da.max_qp_init_rd_atom < cls->rd_atom)
        cls->rd_atom = (uint8_t)da.max_qp_init_rd_atom;
    cls->max_conns = (unsigned)(cls->srq_max / (int)cls->credits);
    unsigned by_cq = (unsigned)((cls->cq_size - cls->srq_max) / VB_SQ_DEPTH);
    if (by_cq < cls->max_conns)
        cls->max_conns = by_cq;
    if (cls->ops->listen(cls->listen_id, 128)) {
        VB_ERR(cls, "rdma_listen() failed: %s", strerror(errno));
        return vb_status(VB_E_RC, -1);
    }
    memcpy(&cls->self_sin, &cls->listen_id->route.addr.src_sin,
           sizeof(cls->self_sin));
    return CW_OK;
}

static cw_status_t vb_resources(vb_class_t *cls)
{
    struct ibv_srq_init_attr sa = {0};
    struct epoll_event ev = {.events = EPOLLIN};
    cw_status_t st;

    cls->pd = cls->ops->alloc_pd(cls->ctx);
    if (!cls->pd) {
        VB_ERR(cls, "ibv_alloc_pd() failed: %s", strerror(errno));
        return vb_status(VB_E_RC, -1);
    }
    cls->comp_ch = cls->ops->create_comp_channel(cls->ctx);
    if (!cls->comp_ch) {
        VB_ERR(cls, "ibv_create_comp_channel() failed: %s", strerror(errno));
        return vb_status(VB_E_RC, -1);
    }
    st = vb_set_nonblock(cls, cls->comp_ch->fd, "completion channel");
    if (st != CW_OK)
        return st;
    cls->cq = cls->ops->create_cq(cls->ctx, cls->cq_size, cls, cls->comp_ch, 0);
    if (!cls->cq) {
        VB_ERR(cls, "ibv_create_cq(%d) failed: %s", cls->cq_size,
               strerror(errno));
        return vb_status(VB_E_RC, -1);
    }
    sa.attr.max_wr = (uint32_t)cls->srq_max;
    sa.attr.max_sge = 1;
    cls->srq = cls->ops->create_srq(cls->pd, &sa);
    if (!cls->srq) {
        VB_ERR(cls, "ibv_create_srq(%d) failed: %s", cls->srq_max,
               strerror(errno));
        return vb_status(VB_E_RC, -1);
    }
    st = vb_pool_init(cls);
    if (st != CW_OK)
        return st;
    if (cls->flags & CW_NA_BUSY)
        return CW_OK;
    cls->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (cls->epfd < 0) {
        VB_ERR(cls, "epoll_create1() failed: %s", strerror(errno));
        return CW_IO;
    }
    if (epoll_ctl(cls->epfd, EPOLL_CTL_ADD, cls->comp_ch->fd, &ev) != 0 ||
        epoll_ctl(cls->epfd, EPOLL_CTL_ADD, cls->cm_ch->fd, &ev) != 0) {
        VB_ERR(cls, "epoll_ctl() failed: %s", strerror(errno));
        return CW_IO;
    }
    return CW_OK;
}

/* The ops table (rdma-core, or the fake module when the environment names
 * one), a device to use, and the address of a device whose addresses are
 * not interface addresses. */
static cw_status_t vb_select_device(vb_class_t *cls, bool *has_ip)
{
    char err[512];
    struct ibv_device **l;
    int n = 0;

    if (vb_ops_acquire(&cls->ops, &cls->ops_module, err, sizeof(err))) {
        VB_ERR(cls, "%s", err);
        return CW_UNSUPPORTED;
    }
    l = cls->ops->get_device_list(&n);
    if (l)
        cls->ops->free_device_list(l);
    if (n <= 0) {
        VB_ERR(cls, "no RDMA device present (ibv_get_device_list: %s)",
               l ? "empty" : strerror(errno));
        return CW_NOENT;
    }
    if (!*has_ip && cls->ops->default_addr) {
        int rc = cls->ops->default_addr(cls->dev, &cls->self_sin.sin_addr);
        if (rc) {
            VB_ERR(cls, "no address for device %s: %s",
                   cls->dev[0] ? cls->dev : "(any)", strerror(rc));
            return CW_NOENT;
        }
        *has_ip = true;
    }
    return CW_OK;
}

static cw_status_t vb_init(const struct cw_na_host *host,
                           const struct cw_na_init_info *info,
                           cw_na_class_t **cls_p)
{
    vb_class_t *cls;
    bool has_ip = false;
    cw_status_t st;

    if (!host || !info || !cls_p)
        return CW_INVALID_ARG;
    if (info->protocol && info->protocol[0]) {
        CW_NA_LOG(host, CW_LOG_ERROR, VB_SUBSYS,
                  "verbs has no protocol variants (got '%s')", info->protocol);
        return CW_UNSUPPORTED;
    }
    cls = calloc(1, sizeof(*cls));
    if (!cls)
        return CW_NOMEM;
    cls->host = host;
    cls->flags = info->flags;
    cls->epfd = -1;
    vb_list_init(&cls->done);
    vb_list_init(&cls->unexp_recvs);
    vb_list_init(&cls->exp_recvs);
    nau_list_init(&cls->unexp_q.q);
    nau_match_init(&cls->early, VB_EARLY_MAX, VB_EARLY_BYTES, nau_seed());
    nau_pool_init(&cls->op_pool, sizeof(struct cw_na_op), VB_OP_CACHE);
    st = nau_ptable_init(&cls->peers, nau_seed());
    if (st == CW_OK)
        st = nau_ptable_init(&cls->by_qpn, nau_seed());
    if (st == CW_OK)
        st = vb_params(cls, info->params);
    if (st != CW_OK)
        goto err_fini;
    st = vb_parse_location(info->location ? info->location : "", cls->dev,
                           &cls->devport, &cls->self_sin, &has_ip);
    if (st != CW_OK) {
        VB_ERR(cls, "bad verbs location '%s' (want [dev[:port]/]ip[:port])",
               info->location);
        goto err_fini;
    }
    st = vb_select_device(cls, &has_ip);
    if (st != CW_OK)
        goto err_fini;
    cls->cm_ch = cls->ops->create_event_channel();
    if (!cls->cm_ch) {
        VB_ERR(cls, "rdma_create_event_channel() failed: %s", strerror(errno));
        st = vb_status(VB_E_RC, -1);
        goto err_fini;
    }
    st = vb_set_nonblock(cls, cls->cm_ch->fd, "rdma_cm channel");
    if (st != CW_OK)
        goto err_fini;
    if (!has_ip && (st = vb_pick_ip(cls, &cls->self_sin)) != CW_OK)
        goto err_fini;
    if (cls->ops->create_id(cls->cm_ch, &cls->listen_id, NULL, RDMA_PS_TCP)) {
        VB_ERR(cls, "rdma_create_id() failed: %s", strerror(errno));
        st = vb_status(VB_E_RC, -1);
        goto err_fini;
    }
    st = vb_open_device(cls);
    if (st != CW_OK)
        goto err_fini;
    st = vb_resources(cls);
    if (st != CW_OK)
        goto err_fini;
    cls->self = vb_peer_get(cls, &cls->self_sin, cls->dev, cls->devport);
    if (!cls->self) {
        st = CW_NOMEM;
        goto err_fini;
    }
    VB_DBG(cls, "listening on %s:%u/%s:%u (%s)", cls->dev, cls->devport,
           inet_ntoa(cls->self_sin.sin_addr), ntohs(cls->self_sin.sin_port),
           cls->ops->name);
    *cls_p = cls;
    return CW_OK;

err_fini:
    vb_finalize(cls);
    return st;
}

static void vb_finalize(cw_na_class_t *cls)
{
    if (!cls)
        return;
    vb_conn_reap(cls, true);
    vb_list_free(cls, &cls->done);
    vb_list_free(cls, &cls->unexp_recvs);
    vb_list_free(cls, &cls->exp_recvs);
    vb_early_free_all(cls);
    nau_pool_fini(&cls->op_pool);
    if (cls->self)
        vb_peer_put(cls, cls->self);
    vb_peers_free_all(cls);
    nau_ptable_fini(&cls->by_qpn);
    vb_rcache_fini(cls);
    vb_pool_fini(cls);
    if (cls->srq)
        cls->ops->destroy_srq(cls->srq);
    if (cls->cq)
        cls->ops->destroy_cq(cls->cq);
    if (cls->comp_ch)
        cls->ops->destroy_comp_channel(cls->comp_ch);
    if (cls->pd)
        cls->ops->dealloc_pd(cls->pd);
    if (cls->listen_id)
        cls->ops->destroy_id(cls->listen_id);
    if (cls->cm_ch)
        cls->ops->destroy_event_channel(cls->cm_ch);
    if (cls->epfd >= 0)
        close(cls->epfd);
    vb_ops_release(cls->ops_module);
    free(cls);
}

static void vb_query(cw_na_class_t *cls, struct cw_na_caps *caps)
{
    memset(caps, 0, sizeof(*caps));
    caps->max_unexpected_size = cls->buf_size - sizeof(struct vb_hdr);
    caps->max_expected_size = cls->buf_size - sizeof(struct vb_hdr);
    caps->max_tag = UINT32_MAX;
    caps->max_rma_size = 0;
    caps->max_segments = VB_MAX_SEGS;
    caps->flags = CW_NA_CAP_RMA;
    if (!(cls->flags & CW_NA_BUSY))
        caps->flags |= CW_NA_CAP_WAIT_FD;
}

void vb_class_stats(cw_na_class_t *cls, struct vb_stats *st)
{
    *st = cls->stats;
}

unsigned vb_class_conn_count(cw_na_class_t *cls)
{
    unsigned n = 0;
    for (struct vb_conn *c = cls->conns; c; c = c->next)
        n++;
    return n;
}

static uint64_t vb_dropped(cw_na_class_t *cls)
{
    return cls->stats.dropped;
}

/* The rdma-core release of the libibverbs this process runs with: the
 * library's file is libibverbs.so.1.<ABI>.<rdma-core version>
 * (libibverbs.so.1.14.44.0 is rdma-core 44.0), and rdma-core has no call
 * that says it. */
static void vb_library(char *buf, size_t len)
{
    char real[PATH_MAX];
    const char *base;
    unsigned abi_major, abi_minor, major, minor;
    Dl_info dli;

    if (dladdr((void *)ibv_get_device_list, &dli) == 0 ||
        dli.dli_fname == NULL || realpath(dli.dli_fname, real) == NULL) {
        snprintf(buf, len, "libibverbs (file not found)");
        return;
    }
    base = strrchr(real, '/') ? strrchr(real, '/') + 1 : real;
    if (sscanf(base, "libibverbs.so.%u.%u.%u.%u", &abi_major, &abi_minor,
               &major, &minor) == 4)
        snprintf(buf, len, "libibverbs %u.%u (rdma-core %u.%u)", abi_major,
                 abi_minor, major, minor);
    else
        snprintf(buf, len, "libibverbs (%s)", base);
}

/* cw-info: the libibverbs found, and the devices the ops table in use (the
 * fake module's under CAUSEWAY_VERBS_FAKE) lists. */
static cw_status_t vb_describe(const struct cw_na_host *host,
                               cw_na_describe_cb_t emit, void *arg)
{
    const struct vb_ops *ops;
    struct ibv_device **l;
    void *module;
    char buf[PATH_MAX + 64];
    int n = 0;

    vb_library(buf, sizeof(buf));
    emit(arg, CW_NA_DESCRIBE_LIBRARY, buf);
    if (vb_ops_acquire(&ops, &module, buf, sizeof(buf))) {
        CW_NA_LOG(host, CW_LOG_WARN, VB_SUBSYS, "%s", buf);
        return CW_UNSUPPORTED;
    }
    if (module != NULL)
        emit(arg, CW_NA_DESCRIBE_LIBRARY,
             "fake device module (" VB_FAKE_ENV ")");
    l = ops->get_device_list(&n);
    if (l == NULL) {
        /* No RDMA device (or no verbs driver) is not an error here. */
        CW_NA_LOG(host, CW_LOG_INFO, VB_SUBSYS,
                  "ibv_get_device_list() found none: %s", strerror(errno));
        vb_ops_release(module);
        return CW_OK;
    }
    for (int i = 0; i < n; i++)
        emit(arg, CW_NA_DESCRIBE_DEVICE, l[i]->name);
    ops->free_device_list(l);
    vb_ops_release(module);
    return CW_OK;
}

static const struct cw_na_ops vb_na_ops = {
    .check_protocol = NULL,
    .init = vb_init,
    .finalize = vb_finalize,
    .query = vb_query,
    .addr_lookup = vb_addr_lookup,
    .addr_self = vb_addr_self,
    .addr_dup = vb_addr_dup,
    .addr_free = vb_addr_free,
    .addr_cmp = vb_addr_cmp,
    .addr_to_string = vb_addr_to_string,
    .addr_serialize_size = vb_addr_serialize_size,
    .addr_serialize = vb_addr_serialize,
    .addr_deserialize = vb_addr_deserialize,
    .msg_send_unexpected = vb_msg_send_unexpected,
    .msg_recv_unexpected = vb_msg_recv_unexpected,
    .msg_send_expected = vb_msg_send_expected,
    .msg_recv_expected = vb_msg_recv_expected,
    .mem_register = vb_mem_register,
    .mem_release = vb_mem_release,
    .mem_serialize_size = vb_mem_serialize_size,
    .mem_serialize = vb_mem_serialize,
    .mem_deserialize = vb_mem_deserialize,
    .put = vb_put,
    .get = vb_get,
    .get_wait_fd = vb_get_wait_fd,
    .safe_to_sleep = vb_safe_to_sleep,
    .progress = vb_progress,
    .cancel = vb_cancel,
    .dropped = vb_dropped,
    .describe = vb_describe,
};

CW_NA_EXPORT const struct cw_na_plugin cw_na_plugin_entry = {
    .abi_version = CW_NA_ABI_VERSION,
    .ops_size = sizeof(struct cw_na_ops),
    .name = "verbs",
    .description = "RDMA verbs (rdma-core, RC + SRQ, rdma_cm)",
    .ops = &vb_na_ops,
};
