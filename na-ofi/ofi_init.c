/*
 * na-ofi: plugin entry, instance lifecycle, capabilities and the one
 * libfabric-to-Causeway status translation.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nau_param.h"
#include "ofi.h"

#define OFI_API_VERSION FI_VERSION(1, 17)
#define OFI_MAX_EAGER   (1u << 20)

/* What a URI protocol means for fi_getinfo(). */
struct ofi_proto {
    const char *protocol;
    const char *prov_name;
    bool str_addr;
    /* Expected messages untagged (see ofi.h); not on cxi, untried. */
    bool exp_untagged;
    /* Their catch-alls as FI_MULTI_RECV buffers (ofi_expected.c): rxm,
     * fi_shm and sockets list it in libfabric 1.17. */
    bool multi_recv;
    /* Room for catch-all receives of expected messages (ofi_expected.c).
     * sockets: libfabric 1.17's sockets provider leaks the receives still
     * posted at close beyond its own pool of about 250 (LeakSanitizer); its
     * four multi-receive buffers are far below that, but should it fall
     * back to single buffers the small pool keeps them below it too. */
    size_t exp_pool_bytes;
    /* Tagged receives for the tags no receive is posted on (ofi_msg.c):
     * rxm honours ignore masks; fi_shm in libfabric 1.17 does not. */
    bool tag_sinks;
    /* Ask for FI_MR_VIRT_ADDR.  Not on fi_shm: given it (and no RMA
     * ordering), libfabric 1.17's shm takes its "fast RMA" path, which
     * reads and writes the target's memory with process_vm_readv/writev
     * at whatever address the initiator names, checking neither key,
     * bounds nor access: a peer that edited its copy of a read-only handle
     * wrote anywhere in the target.  Without it every RMA goes through the
     * target, which checks the key, range and access of the registration
     * (ofi_mr_map_verify). */
    bool mr_virt_addr;
    /* Post puts with FI_DELIVERY_COMPLETE.  The target's provider checks
     * a write's key and range only when it arrives, and a transmit-complete
     * write it rejected was reported CW_OK.  rxm passes the flag to tcp,
     * which then completes the write on the target's acknowledgement, or
     * with an error when the target dropped the connection over it; the
     * cost was not measurable (docs/na-ofi.md).  Not on fi_shm: it never
     * answers a rejected access, and a put would wait for the peer
     * timeout instead of being reported done. */
    bool delivery_complete;
    /* Reset the accepted sockets the provider leaves half-closed when a
     * peer closes before its connection request (ofi_reap.c): the tcp
     * provider under rxm. */
    bool reap_half_closed;
    /* Tell a refused peer from a slow one with a TCP connect of our own
     * (ofi_connprobe.c): tcp, whose addresses are the peers' listening
     * sockets. */
    bool probe_connect;
};

static const struct ofi_proto ofi_protos[] = {
    {"tcp", "tcp;ofi_rxm", false, true, true, OFI_EXP_POOL_BYTES, true, true,
     true, true, true},
    {"shm", "shm", true, true, true, OFI_EXP_POOL_BYTES, false, false, false,
     false},
    {"sockets", "sockets", false, true, true, OFI_EXP_POOL_BYTES_SMALL, false,
     true, false, false},
    {"verbs", "verbs;ofi_rxm", false, true, true, OFI_EXP_POOL_BYTES, true,
     true, false, false},
    {"cxi", "cxi", false, false, false, OFI_EXP_POOL_BYTES_SMALL, false, true,
     false, false},
};

static const struct ofi_proto *ofi_proto_find(const char *protocol)
{
    if (protocol == NULL || protocol[0] == '\0')
        protocol = "tcp";
    for (size_t i = 0; i < sizeof(ofi_protos) / sizeof(ofi_protos[0]); i++)
        if (strcmp(ofi_protos[i].protocol, protocol) == 0)
            return &ofi_protos[i];
    return NULL;
}

cw_status_t ofi_status(int fi_err)
{
    if (fi_err < 0)
        fi_err = -fi_err;
    switch (fi_err) {
    case 0:
        return CW_OK;
    case FI_EAGAIN:
        return CW_AGAIN;
    case FI_ENOMEM:
        return CW_NOMEM;
    case FI_EINVAL:
    case FI_EBADF:
    case FI_EBADFLAGS:
        return CW_INVALID_ARG;
    case FI_ENOENT:
    case FI_ENODATA:
        return CW_NOENT;
    case FI_ECANCELED:
        return CW_CANCELED;
    case FI_ETRUNC:
    case FI_EMSGSIZE:
    case FI_ETOOSMALL:
        return CW_OVERFLOW;
    case FI_ECONNREFUSED:
    case FI_EHOSTUNREACH:
    case FI_ENETUNREACH:
    case FI_EADDRNOTAVAIL:
    case FI_EHOSTDOWN:
    case FI_ENETDOWN:
        return CW_UNREACHABLE;
    case FI_ECONNRESET:
    case FI_ECONNABORTED:
    case FI_ENOTCONN:
    case EPIPE:
    case FI_ESHUTDOWN:
        return CW_DISCONNECTED;
    case FI_EADDRINUSE:
        return CW_ADDR_IN_USE;
    case FI_ETIMEDOUT:
        return CW_TIMEOUT;
    case FI_EACCES:
    case FI_EPERM:
    case FI_EKEYREJECTED:
    case FI_ENOKEY:
        return CW_PERMISSION;
    case FI_ENOSYS:
    case FI_EOPNOTSUPP:
    case FI_ENOPROTOOPT:
        return CW_UNSUPPORTED;
    case FI_EIO:
    case FI_EOTHER:
    case FI_ECRC:
        return CW_IO;
    case FI_EFAULT:
        return CW_FAULT;
    case ERANGE:
        return CW_RANGE;
    case FI_EBUSY:
        return CW_BUSY;
    case EEXIST:
        return CW_EXIST;
    default:
        return CW_INTERNAL;
    }
}

uint64_t ofi_now(const struct cw_na_class *cls)
{
    return cls->host->now_ns();
}

/* rxm moves a connection set-up forward only from progress calls at least
 * this many microseconds apart (libfabric's default is 10000): the steps
 * of the first contact with a peer then cost 10 ms each, twice the first
 * RPC's latency.  A process that set the variable keeps its value.
 * libfabric reads it once, at its first fi_getinfo(). */
static pthread_once_t ofi_env_once = PTHREAD_ONCE_INIT;

/* rxm's bounce buffers (libfabric's default 16 KiB) hold every message that
 * arrives before a receive takes it, and rxm preallocates pools of them:
 * sized for the default eager_size (8 KiB) plus the plugin's and rxm's
 * headers, an instance takes about 30 MiB less and a backlog of small
 * messages under a flood about half the memory.  Messages longer than the
 * buffer take a slower path (about 3x the latency), so a larger eager_size
 * wants a larger FI_OFI_RXM_BUFFER_SIZE (ofi_check_rxm_buffer()). */
#define OFI_RXM_BUFFER_SIZE     9216u
#define OFI_RXM_BUFFER_SIZE_STR "9216"
#define OFI_RXM_HDR_ROOM        512u

static void ofi_env_defaults(void)
{
    (void)setenv("FI_OFI_RXM_CM_PROGRESS_INTERVAL", "1000", 0);
    (void)setenv("FI_OFI_RXM_BUFFER_SIZE", OFI_RXM_BUFFER_SIZE_STR, 0);
}

/* Warns when this instance's eager messages would not fit rxm's buffers
 * (see OFI_RXM_BUFFER_SIZE); libfabric read the size once, process-wide. */
static void ofi_check_rxm_buffer(const struct cw_na_class *cls)
{
    const char *v = getenv("FI_OFI_RXM_BUFFER_SIZE");
    unsigned long long size = OFI_RXM_BUFFER_SIZE;
    char *end;

    if (strstr(cls->prov_name, "ofi_rxm") == NULL)
        return;
    if (v != NULL) {
        errno = 0;
        size = strtoull(v, &end, 0);
        if (errno != 0 || end == v)
            return; /* libfabric's to judge */
    }
    if (cls->eager_size + OFI_HDR_SIZE + OFI_RXM_HDR_ROOM > size)
        OFI_WARN(cls,
                 "eager_size %zu does not fit rxm's %llu-byte buffers: "
                 "messages near it take rxm's slower path; set "
                 "FI_OFI_RXM_BUFFER_SIZE to at least %zu",
                 cls->eager_size, size,
                 cls->eager_size + OFI_HDR_SIZE + OFI_RXM_HDR_ROOM);
}

static struct fi_info *ofi_hints(const struct ofi_proto *p, uint32_t flags)
{
    struct fi_info *hints;

    (void)pthread_once(&ofi_env_once, ofi_env_defaults);
    hints = fi_allocinfo();

    if (hints == NULL)
        return NULL;
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_READ | FI_WRITE | FI_SEND |
                  FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE;
    if (p->exp_untagged && p->multi_recv)
        hints->caps |= FI_MULTI_RECV;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->domain_attr->mr_mode =
        FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
    if (p->mr_virt_addr)
        hints->domain_attr->mr_mode |= FI_MR_VIRT_ADDR;
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
    hints->fabric_attr->prov_name = strdup(p->prov_name);
    if (hints->fabric_attr->prov_name == NULL) {
        fi_freeinfo(hints);
        return NULL;
    }
    (void)flags;
    return hints;
}

/* fi_getinfo(), without FI_MULTI_RECV if no provider offers it (the
 * catch-alls then are single buffers, ofi_expected.c). */
static int ofi_getinfo(struct fi_info *hints, struct fi_info **info)
{
    int rc = fi_getinfo(OFI_API_VERSION, NULL, NULL, 0, hints, info);

    if (rc == -FI_ENODATA && (hints->caps & FI_MULTI_RECV)) {
        hints->caps &= ~FI_MULTI_RECV;
        rc = fi_getinfo(OFI_API_VERSION, NULL, NULL, 0, hints, info);
    }
    return rc;
}

static bool ofi_check_protocol(const char *protocol)
{
    const struct ofi_proto *p = ofi_proto_find(protocol);
    struct fi_info *hints, *info = NULL;
    int rc;

    if (p == NULL)
        return false;
    hints = ofi_hints(p, 0);
    if (hints == NULL)
        return false;
    rc = ofi_getinfo(hints, &info);
    fi_freeinfo(hints);
    if (rc == 0)
        fi_freeinfo(info);
    return rc == 0;
}

/* Runtime parameters: key, bounds, the unit the value is scaled by, where
 * it goes and its default, given as a string parsed like user input.  Each
 * may also come from the environment as CAUSEWAY_OFI_<KEY> (upper case);
 * cw_na_open() parameters win over the environment. */
struct ofi_param {
    const char *key;
    uint64_t min, max, scale;
    size_t offset; /* uint64_t or size_t field of struct cw_na_class */
    bool is_size;
    const char *def;
};

#define OFI_P(k, lo, hi, sc, field, sz, d)                                     \
    {                                                                          \
        k, lo, hi, sc, offsetof(struct cw_na_class, field), sz, d              \
    }
static const struct ofi_param ofi_param_table[] = {
    OFI_P("eager_size", 64, OFI_MAX_EAGER, 1, eager_size, true, "8192"),
    OFI_P("retry_timeout_ms", 1, 3600000, 1000000, retry_timeout_ns, false,
          "10000"),
    OFI_P("keepalive_ms", 0, 3600000, 1000000, keepalive_ns, false, "1000"),
    OFI_P("peer_timeout_ms", 1, 3600000, 1000000, peer_timeout_ns, false,
          "5000"),
    OFI_P("cancel_grace_ms", 1, 3600000, 1000000, cancel_grace_ns, false,
          "1000"),
    OFI_P("spin_us", 0, 1000000, 1000, spin_ns, false, "0"),
    OFI_P("peer_idle_s", 0, 86400, 1000000000, peer_idle_ns, false, "300"),
    OFI_P("early_max", 0, 1000000, 1, early_max, true, "4096"),
    OFI_P("tag_sinks", 0, 256, 1, tag_sinks, true, "32"),
    OFI_P("reap_ms", 0, 3600000, 1000000, reap_ns, false, "1000"),
    OFI_P("probe_connect", 0, 1, 1, probe_connect, false, "1"),
    OFI_P("unexpected_queue_bytes", 1, SIZE_MAX, 1, unexp_queue_max, true,
          OFI_UNEXP_QUEUE_DEFAULT),
    OFI_P("unexpected_peer_bytes", 1, SIZE_MAX, 1, unexp_peer_max, true,
          OFI_UNEXP_PEER_DEFAULT),
    OFI_P("peer_sends_max", 1, 1u << 20, 1, peer_sends_max, true, "1024"),
    OFI_P("inject_size", 0, OFI_INJECT_MAX, 1, inject_size, true, "4096"),
};
#define OFI_NPARAMS (sizeof(ofi_param_table) / sizeof(ofi_param_table[0]))

/* Parses and stores one value; false (and logs, naming @p from) if bad. */
static bool ofi_param_set(struct cw_na_class *cls, const struct ofi_param *p,
                          const char *val, const char *from)
{
    uint64_t v;
    void *field = (char *)cls + p->offset;

    if (nau_param_uint(val, p->min, p->max, &v) != CW_OK) {
        OFI_ERR(cls, "%s %s=\"%s\": expected an integer in [%llu, %llu]", from,
                p->key, val, (unsigned long long)p->min,
                (unsigned long long)p->max);
        return false;
    }
    if (p->is_size)
        *(size_t *)field = (size_t)v * p->scale;
    else
        *(uint64_t *)field = v * p->scale;
    return true;
}

static cw_status_t ofi_params(struct cw_na_class *cls,
                              const char *const *params)
{
    for (size_t k = 0; k < OFI_NPARAMS; k++) {
        const struct ofi_param *p = &ofi_param_table[k];
        char env[64];
        const char *val;
        size_t j = 0;

        if (!ofi_param_set(cls, p, p->def, "default"))
            return CW_INTERNAL;
        j = (size_t)snprintf(env, sizeof(env), "CAUSEWAY_OFI_");
        for (const char *c = p->key; *c && j + 1 < sizeof(env); c++)
            env[j++] = (char)toupper((unsigned char)*c);
        env[j] = '\0';
        val = getenv(env);
        if (val != NULL && !ofi_param_set(cls, p, val, "environment"))
            return CW_INVALID_ARG;
    }
    for (size_t i = 0; params != NULL && params[i] != NULL; i += 2) {
        const char *key = params[i], *val = params[i + 1];
        size_t k;

        if (val == NULL) {
            OFI_ERR(cls, "parameter %s has no value", key);
            return CW_INVALID_ARG;
        }
        for (k = 0; k < OFI_NPARAMS; k++)
            if (strcmp(key, ofi_param_table[k].key) == 0)
                break;
        if (k == OFI_NPARAMS) {
            OFI_WARN(
                cls,
                "unknown parameter %s ignored (known: eager_size, "
                "retry_timeout_ms, keepalive_ms, peer_timeout_ms, "
                "cancel_grace_ms, spin_us, peer_idle_s, early_max, "
                "tag_sinks, reap_ms, probe_connect, unexpected_queue_bytes, "
                "unexpected_peer_bytes, peer_sends_max, inject_size)",
                key);
            continue;
        }
        if (!ofi_param_set(cls, &ofi_param_table[k], val, "parameter"))
            return CW_INVALID_ARG;
    }
    /* Whatever their order: a bound below one eager message would drop
     * every message of that size. */
    if (cls->unexp_queue_max < cls->eager_size + 1024 ||
        cls->unexp_peer_max < cls->eager_size + 1024) {
        OFI_ERR(cls,
                "unexpected_queue_bytes (%zu) and unexpected_peer_bytes (%zu) "
                "must be at least eager_size + 1024 (%zu)",
                cls->unexp_queue_max, cls->unexp_peer_max,
                cls->eager_size + 1024);
        return CW_INVALID_ARG;
    }
    return CW_OK;
}

static void ofi_finalize(cw_na_class_t *cls);

/* Opens the CQ with a wait fd where the provider has one and we may block;
 * shm has none, so fall back to a plain CQ. */
static cw_status_t ofi_open_cq(struct cw_na_class *cls)
{
    struct fi_cq_attr attr = {
        .format = FI_CQ_FORMAT_TAGGED,
        .size = 0,
        .wait_obj = FI_WAIT_NONE,
    };
    int rc;

    cls->wait_fd = -1;
    if (!(cls->flags & CW_NA_BUSY)) {
        attr.wait_obj = FI_WAIT_FD;
        rc = fi_cq_open(cls->domain, &attr, &cls->cq, NULL);
        if (rc == 0) {
            rc = fi_control(&cls->cq->fid, FI_GETWAIT, &cls->wait_fd);
            if (rc == 0)
                return CW_OK;
            OFI_DBG(cls, "fi_control(FI_GETWAIT) failed: %s", fi_strerror(-rc));
            fi_close(&cls->cq->fid);
            cls->cq = NULL;
            cls->wait_fd = -1;
        } else {
            OFI_DBG(cls,
                    "%s: no FI_WAIT_FD completion queue (%s), polling only",
                    cls->prov_name, fi_strerror(-rc));
        }
        attr.wait_obj = FI_WAIT_NONE;
    }
    rc = fi_cq_open(cls->domain, &attr, &cls->cq, NULL);
    if (rc != 0) {
        OFI_ERR(cls, "fi_cq_open() failed: %s", fi_strerror(-rc));
        return ofi_status(rc);
    }
    return CW_OK;
}

static cw_status_t ofi_open_endpoint(struct cw_na_class *cls,
                                     const char *location)
{
    struct fi_info *hints;
    struct fi_av_attr av_attr = {.type = FI_AV_UNSPEC};
    uint8_t raw[OFI_ADDR_MAX];
    size_t rawlen = sizeof(raw);
    cw_status_t st;
    int rc;

    hints = ofi_hints(ofi_proto_find(cls->protocol), cls->flags);
    if (hints == NULL)
        return CW_NOMEM;
    if (cls->str_addr)
        hints->addr_format = FI_ADDR_STR;
    if (location != NULL && location[0] != '\0') {
        st = ofi_location_to_raw(cls, location, true, raw, &rawlen);
        if (st != CW_OK)
            goto err_free_hints;
        hints->src_addr = malloc(rawlen);
        if (hints->src_addr == NULL) {
            st = CW_NOMEM;
            goto err_free_hints;
        }
        memcpy(hints->src_addr, raw, rawlen);
        hints->src_addrlen = rawlen;
        if (!cls->str_addr)
            hints->addr_format = ((struct sockaddr *)raw)->sa_family == AF_INET6
                                     ? FI_SOCKADDR_IN6
                                     : FI_SOCKADDR_IN;
    } else if (cls->str_addr) {
        static atomic_uint ofi_shm_seq;
        int n = snprintf((char *)raw, sizeof(raw), "cw-%ld-%u", (long)getpid(),
                         atomic_fetch_add(&ofi_shm_seq, 1));

        hints->src_addr = strdup((char *)raw);
        if (hints->src_addr == NULL) {
            st = CW_NOMEM;
            goto err_free_hints;
        }
        hints->src_addrlen = (size_t)n + 1;
    }
    /* Injected messages (ofi_msg_inject) carry our header: ask for room
     * for both.  rxm advertises 64 bytes unless asked and takes up to its
     * buffer size; a provider that cannot is asked again without, and
     * what it offers bounds the injects. */
    if (cls->inject_size > 0)
        hints->tx_attr->inject_size = OFI_HDR_SIZE + cls->inject_size;
    rc = ofi_getinfo(hints, &cls->info);
    if (rc == -FI_ENODATA && cls->inject_size > 0) {
        hints->tx_attr->inject_size = 0;
        rc = ofi_getinfo(hints, &cls->info);
    }
    if (rc != 0) {
        OFI_ERR(cls, "fi_getinfo(%s, \"%s\") failed: %s", cls->prov_name,
                location ? location : "", fi_strerror(-rc));
        st = rc == -FI_ENODATA ? CW_UNSUPPORTED : ofi_status(rc);
        goto err_free_hints;
    }
    fi_freeinfo(hints);
    hints = NULL;

    rc = fi_fabric(cls->info->fabric_attr, &cls->fabric, NULL);
    if (rc != 0) {
        OFI_ERR(cls, "fi_fabric() failed: %s", fi_strerror(-rc));
        return ofi_status(rc);
    }
    rc = fi_domain(cls->fabric, cls->info, &cls->domain, NULL);
    if (rc != 0) {
        OFI_ERR(cls, "fi_domain() failed: %s", fi_strerror(-rc));
        return ofi_status(rc);
    }
    if (cls->info->domain_attr->av_type != FI_AV_UNSPEC)
        av_attr.type = cls->info->domain_attr->av_type;
    rc = fi_av_open(cls->domain, &av_attr, &cls->av, NULL);
    if (rc != 0) {
        OFI_ERR(cls, "fi_av_open() failed: %s", fi_strerror(-rc));
        return ofi_status(rc);
    }
    st = ofi_open_cq(cls);
    if (st != CW_OK)
        return st;
    rc = fi_endpoint(cls->domain, cls->info, &cls->ep, NULL);
    if (rc != 0) {
        OFI_ERR(cls, "fi_endpoint() failed: %s", fi_strerror(-rc));
        return ofi_status(rc);
    }
    rc = fi_ep_bind(cls->ep, &cls->av->fid, 0);
    if (rc == 0)
        rc = fi_ep_bind(cls->ep, &cls->cq->fid, FI_TRANSMIT | FI_RECV);
    if (rc != 0) {
        OFI_ERR(cls, "fi_ep_bind() failed: %s", fi_strerror(-rc));
        return ofi_status(rc);
    }
    rc = fi_enable(cls->ep);
    if (rc != 0) {
        OFI_ERR(cls, "fi_enable() on %s \"%s\" failed: %s", cls->prov_name,
                location ? location : "", fi_strerror(-rc));
        return ofi_status(rc);
    }
    return CW_OK;

err_free_hints:
    fi_freeinfo(hints);
    return st;
}

static cw_status_t ofi_init(const struct cw_na_host *host,
                            const struct cw_na_init_info *info,
                            cw_na_class_t **cls_p)
{
    const struct ofi_proto *p;
    struct cw_na_class *cls;
    cw_status_t st;

    if (host == NULL || info == NULL || cls_p == NULL)
        return CW_INVALID_ARG;
    cls = calloc(1, sizeof(*cls));
    if (cls == NULL)
        return CW_NOMEM;
    cls->host = host;
    cls->flags = info->flags;
    cls->wait_fd = -1;
    cls->shm_lock_fd = -1;
    cls->reap.reserve_fd = -1;
    nau_list_init(&cls->retry);
    nau_list_init(&cls->done);
    nau_list_init(&cls->active);
    nau_list_init(&cls->zombies);
    nau_list_init(&cls->ctrl_sends);
    nau_pool_init(&cls->op_pool, sizeof(struct cw_na_op), OFI_OP_POOL_MAX);
    nau_list_init(&cls->mems);

    if (nau_ptable_init(&cls->peers, nau_seed()) != CW_OK) {
        st = CW_NOMEM;
        goto err_free;
    }
    p = ofi_proto_find(info->protocol);
    if (p == NULL) {
        OFI_ERR(cls,
                "unknown protocol \"%s\" (known: tcp, shm, sockets, "
                "verbs, cxi)",
                info->protocol);
        st = CW_UNSUPPORTED;
        goto err_free;
    }
    snprintf(cls->protocol, sizeof(cls->protocol), "%s", p->protocol);
    snprintf(cls->prov_name, sizeof(cls->prov_name), "%s", p->prov_name);
    cls->str_addr = p->str_addr;
    cls->exp_untagged = p->exp_untagged;
    cls->unexp_untagged = p->exp_untagged;
    cls->multi_recv = p->exp_untagged && p->multi_recv;
    cls->exp_pool_bytes = p->exp_pool_bytes;
    cls->put_flags = p->delivery_complete ? FI_DELIVERY_COMPLETE : 0;
    if (cls->multi_recv && (info->flags & CW_NA_LISTEN))
        cls->exp_pool_bytes *= OFI_EXP_POOL_LISTEN_MULT;
    cls->pong_tokens = OFI_PONG_UNKNOWN_PER_S;
    cls->pong_refill_ns = ofi_now(cls);
    st = ofi_params(cls, info->params);
    if (st != CW_OK)
        goto err_free;
    st = ofi_open_endpoint(cls, info->location);
    if (st != CW_OK)
        goto err_free;

    cls->mr_mode = cls->info->domain_attr->mr_mode;
    cls->iov_limit = cls->info->tx_attr->iov_limit;
    cls->rma_iov_limit = cls->info->tx_attr->rma_iov_limit;
    cls->max_msg_size = cls->info->ep_attr->max_msg_size;
    if (cls->iov_limit == 0)
        cls->iov_limit = 1;
    if (cls->max_msg_size == 0)
        cls->max_msg_size = SIZE_MAX;
    if (cls->eager_size + OFI_HDR_SIZE > cls->max_msg_size)
        cls->eager_size = cls->max_msg_size - OFI_HDR_SIZE;
    ofi_check_rxm_buffer(cls);
    cls->inject_max = 0;
    if (cls->inject_size > 0 &&
        cls->info->tx_attr->inject_size > OFI_HDR_SIZE) {
        cls->inject_max = cls->info->tx_attr->inject_size - OFI_HDR_SIZE;
        if (cls->inject_max > cls->inject_size)
            cls->inject_max = cls->inject_size;
        if (cls->inject_max > cls->eager_size)
            cls->inject_max = cls->eager_size;
    }
    if (cls->info->rx_attr->iov_limit >= 3) {
        cls->discard = malloc(cls->eager_size);
        if (cls->discard == NULL) {
            st = CW_NOMEM;
            goto err_free;
        }
    }

    st = ofi_addr_init_self(cls);
    if (st != CW_OK)
        goto err_free;
    if (p->reap_half_closed)
        ofi_reap_init(cls, cls->self->raw, cls->self->len);
    if (!p->probe_connect)
        cls->probe_connect = 0;
    if (cls->str_addr) {
        ofi_shm_lock_self(cls);
        ofi_shm_reap_dead(cls);
    }
    if (p->tag_sinks && cls->exp_untagged && cls->tag_sinks) {
        st = ofi_sinks_init(cls); /* first: it sets the ignore mask */
        if (st != CW_OK)
            goto err_free;
    }
    st = ofi_ctrl_post_recv(cls);
    if (st != CW_OK)
        goto err_free;
    st = ofi_exp_init(cls);
    if (st != CW_OK)
        goto err_free;
    OFI_DBG(cls,
            "opened %s endpoint (mr_mode 0x%llx, iov %zu/%zu, wait fd %d, "
            "expected catch-alls %u x %zu bytes%s)",
            cls->prov_name, (unsigned long long)cls->mr_mode, cls->iov_limit,
            cls->rma_iov_limit, cls->wait_fd, cls->nexp_bufs,
            cls->exp_buf_bytes, cls->exp_multi ? ", multi-receive" : "");
    *cls_p = cls;
    return CW_OK;

err_free:
    ofi_finalize(cls);
    return st;
}

static void ofi_close_fid(struct cw_na_class *cls, struct fid *fid,
                          const char *what)
{
    int rc;

    if (fid == NULL)
        return;
    rc = fi_close(fid);
    if (rc != 0)
        OFI_WARN(cls, "fi_close(%s) failed: %s", what, fi_strerror(-rc));
}

static void ofi_finalize(cw_na_class_t *cls)
{
    if (cls == NULL)
        return;
    /* Closing the endpoint first makes the provider drop every context it
     * still holds, so the op memory below can go. */
    ofi_close_fid(cls, cls->ep ? &cls->ep->fid : NULL, "endpoint");
    cls->ep = NULL;
    ofi_progress_fini(cls);
    ofi_mem_fini(cls);
    ofi_exp_fini(cls);
    free(cls->discard);
    free(cls->sinks);
    free(cls->sink_buf);
    ofi_addr_fini(cls);
    ofi_reap_fini(cls);
    ofi_close_fid(cls, cls->av ? &cls->av->fid : NULL, "address vector");
    ofi_close_fid(cls, cls->cq ? &cls->cq->fid : NULL, "completion queue");
    ofi_close_fid(cls, cls->domain ? &cls->domain->fid : NULL, "domain");
    ofi_close_fid(cls, cls->fabric ? &cls->fabric->fid : NULL, "fabric");
    if (cls->shm_lock_fd >= 0)
        close(cls->shm_lock_fd);
    if (cls->info != NULL)
        fi_freeinfo(cls->info);
    free(cls);
}

static void ofi_query(cw_na_class_t *cls, struct cw_na_caps *caps)
{
    memset(caps, 0, sizeof(*caps));
    caps->max_unexpected_size = cls->eager_size;
    caps->max_expected_size = cls->eager_size;
    caps->max_tag = UINT32_MAX;
    caps->max_rma_size = 0;
    caps->max_segments = OFI_MAX_SEGMENTS;
    caps->flags = CW_NA_CAP_RMA;
    if (cls->wait_fd >= 0)
        caps->flags |= CW_NA_CAP_WAIT_FD;
    if (cls->str_addr)
        caps->flags |= CW_NA_CAP_SAME_NODE;
    else
        caps->flags |= CW_NA_CAP_COALESCE; /* a socket or a NIC per send */
}

static uint64_t ofi_dropped(cw_na_class_t *cls)
{
    return cls->dropped;
}

/* cw-info: the libfabric this process runs with, and every provider and
 * domain fi_getinfo() offers without hints (not only those this plugin
 * has a protocol for). */
static cw_status_t ofi_describe(const struct cw_na_host *host,
                                cw_na_describe_cb_t emit, void *arg)
{
    struct fi_info *info = NULL;
    uint32_t v = fi_version();
    char buf[256];
    int rc;

    snprintf(buf, sizeof(buf), "libfabric %u.%u", FI_MAJOR(v), FI_MINOR(v));
    emit(arg, CW_NA_DESCRIBE_LIBRARY, buf);
    rc = fi_getinfo(OFI_API_VERSION, NULL, NULL, 0, NULL, &info);
    if (rc == -FI_ENODATA)
        return CW_OK; /* no provider works here */
    if (rc != 0) {
        CW_NA_LOG(host, CW_LOG_WARN, OFI_SUBSYS, "fi_getinfo() failed: %s",
                  fi_strerror(-rc));
        return ofi_status(rc);
    }
    /* A provider shows once per endpoint type and domain (cw-info keeps
     * one of each). */
    for (const struct fi_info *i = info; i != NULL; i = i->next) {
        if (i->fabric_attr == NULL || i->fabric_attr->prov_name == NULL ||
            i->domain_attr == NULL)
            continue;
        emit(arg, CW_NA_DESCRIBE_PROVIDER, i->fabric_attr->prov_name);
        if (i->domain_attr->name != NULL) {
            snprintf(buf, sizeof(buf), "%s/%s", i->fabric_attr->prov_name,
                     i->domain_attr->name);
            emit(arg, CW_NA_DESCRIBE_DEVICE, buf);
        }
    }
    fi_freeinfo(info);
    return CW_OK;
}

static const struct cw_na_ops ofi_ops = {
    .check_protocol = ofi_check_protocol,
    .init = ofi_init,
    .finalize = ofi_finalize,
    .query = ofi_query,
    .addr_lookup = ofi_addr_lookup,
    .addr_self = ofi_addr_self,
    .addr_dup = ofi_addr_dup,
    .addr_free = ofi_addr_free,
    .addr_cmp = ofi_addr_cmp,
    .addr_to_string = ofi_addr_to_string,
    .addr_serialize_size = ofi_addr_serialize_size,
    .addr_serialize = ofi_addr_serialize,
    .addr_deserialize = ofi_addr_deserialize,
    .msg_send_unexpected = ofi_msg_send_unexpected,
    .msg_recv_unexpected = ofi_msg_recv_unexpected,
    .msg_send_expected = ofi_msg_send_expected,
    .msg_inject = ofi_msg_inject,
    .msg_recv_expected = ofi_msg_recv_expected,
    .mem_register = ofi_mem_register,
    .mem_release = ofi_mem_release,
    .mem_serialize_size = ofi_mem_serialize_size,
    .mem_serialize = ofi_mem_serialize,
    .mem_deserialize = ofi_mem_deserialize,
    .put = ofi_put,
    .get = ofi_get,
    .get_wait_fd = ofi_get_wait_fd,
    .safe_to_sleep = ofi_safe_to_sleep,
    .progress = ofi_progress,
    .cancel = ofi_cancel,
    .dropped = ofi_dropped,
    .streaming = ofi_streaming,
    .describe = ofi_describe,
};

CW_NA_EXPORT const struct cw_na_plugin cw_na_plugin_entry = {
    .abi_version = CW_NA_ABI_VERSION,
    .ops_size = sizeof(struct cw_na_ops),
    .name = "ofi",
    .description = "libfabric (tcp;ofi_rxm, shm, sockets, verbs;ofi_rxm, cxi)",
    .ops = &ofi_ops,
};
