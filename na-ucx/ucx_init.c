/*
 * na-ucx: instance lifecycle, capabilities, status translation and the
 * exported plugin entry.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "nau_param.h"
#include "ucx.h"

#include <uct/api/uct.h>

#define UCX_EAGER_DEFAULT            (64u * 1024u)
#define UCX_EAGER_MAX                (16u * 1024u * 1024u)
#define UCX_KEEPALIVE_DEFAULT        "1s"
#define UCX_UNEXP_QUEUE_DEFAULT      (64u * 1024u * 1024u)
#define UCX_UNEXP_PEER_DEFAULT       (8u * 1024u * 1024u)
#define UCX_FD_RESERVE_DEFAULT       256u
#define UCX_LISTENER_BACKLOG_DEFAULT "128"
#define UCX_LIVENESS_DEFAULT_MS      10000u
#define UCX_CLOSE_FLUSH_DEFAULT_MS   1000u
#define UCX_CLOSE_IDLE_DEFAULT_MS    100u

/* UCX keeps process-wide state (its async event thread) that does not
 * survive fork(): a child forked while the parent has live instances can
 * create a worker, but its connections are never serviced.  Refuse that
 * case loudly instead of hanging. */
static pthread_mutex_t ucx_proc_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t ucx_proc_pid;
static unsigned ucx_proc_live;

static cw_status_t ucx_proc_enter(struct ucx_cls *cls)
{
    pid_t me = getpid();
    cw_status_t ret = CW_OK;

    pthread_mutex_lock(&ucx_proc_lock);
    if (ucx_proc_live > 0 && ucx_proc_pid != me) {
        UCX_ERR(cls,
                "UCX was initialized in parent process %ld before "
                "fork(); UCX cannot be used in a forked child (use "
                "fork+exec, or fork before opening ucx instances)",
                (long)ucx_proc_pid);
        ret = CW_UNSUPPORTED;
    } else {
        ucx_proc_pid = me;
        ucx_proc_live++;
        cls->proc_counted = true;
    }
    pthread_mutex_unlock(&ucx_proc_lock);
    return ret;
}

static void ucx_proc_leave(struct ucx_cls *cls)
{
    if (!cls->proc_counted)
        return;
    pthread_mutex_lock(&ucx_proc_lock);
    ucx_proc_live--;
    pthread_mutex_unlock(&ucx_proc_lock);
}

/* The one place UCS statuses become Causeway statuses. */
cw_status_t ucx_set_am_handler(struct ucx_cls *cls, unsigned id,
                               ucp_am_recv_callback_t cb, uint32_t flags)
{
    ucp_am_handler_param_t p = {0};
    ucs_status_t st;

    p.field_mask =
        UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
        UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    p.id = id;
    p.flags = flags;
    p.cb = cb;
    p.arg = cls;
    st = ucp_worker_set_am_recv_handler(cls->worker, &p);
    if (st != UCS_OK) {
        UCX_ERR(cls, "ucp_worker_set_am_recv_handler(%u) failed: %s", id,
                ucs_status_string(st));
        return ucx_status(st);
    }
    return CW_OK;
}

cw_status_t ucx_status(ucs_status_t st)
{
    switch (st) {
    case UCS_OK:
    case UCS_INPROGRESS:
        return CW_OK;
    case UCS_ERR_NO_MEMORY:
        return CW_NOMEM;
    case UCS_ERR_INVALID_PARAM:
    case UCS_ERR_INVALID_ADDR:
        return CW_INVALID_ARG;
    case UCS_ERR_NO_ELEM:
        return CW_NOENT;
    case UCS_ERR_NO_DEVICE:
        return CW_UNSUPPORTED; /* e.g. the URI's transport is absent here */
    case UCS_ERR_NO_RESOURCE:
        return CW_AGAIN;
    case UCS_ERR_BUSY:
        /* UCX's socket code reports EADDRINUSE as "Device is busy";
         * ucp_worker_arm's UCS_ERR_BUSY is handled where it is returned. */
        return CW_ADDR_IN_USE;
    case UCS_ERR_CANCELED:
        return CW_CANCELED;
    case UCS_ERR_TIMED_OUT:
        return CW_TIMEOUT;
    case UCS_ERR_MESSAGE_TRUNCATED:
    case UCS_ERR_EXCEEDS_LIMIT:
        return CW_OVERFLOW;
    case UCS_ERR_UNSUPPORTED:
        return CW_UNSUPPORTED;
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_REJECTED:
    case UCS_ERR_NOT_CONNECTED: /* the connection was never established */
        return CW_UNREACHABLE;
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
        return CW_DISCONNECTED;
    case UCS_ERR_ALREADY_EXISTS:
        return CW_ADDR_IN_USE;
    case UCS_ERR_IO_ERROR:
        return CW_IO;
    case UCS_ERR_OUT_OF_RANGE:
        return CW_RANGE;
    default:
        return CW_INTERNAL;
    }
}

/* Data-path drops: counted always, logged at most once a second. */
void ucx_log_dropped(struct ucx_cls *cls, const char *what)
{
    uint64_t now;

    cls->dropped++;
    if (cls->host == NULL || cls->host->now_ns == NULL)
        return;
    now = cls->host->now_ns();
    if (now < cls->rl_next_ns)
        return;
    cls->rl_next_ns = now + 1000000000ull;
    UCX_WARN(cls, "dropped %s (%llu dropped so far)", what,
             (unsigned long long)cls->dropped);
}

static cw_status_t ucx_config_set(struct ucx_cls *cls, ucp_config_t *config,
                                  const char *name, const char *value)
{
    ucs_status_t st = ucp_config_modify(config, name, value);

    if (st != UCS_OK) {
        UCX_ERR(cls, "ucp_config_modify(%s=%s) failed: %s", name, value,
                ucs_status_string(st));
        return ucx_status(st);
    }
    return CW_OK;
}

/* Runtime parameters: "eager_size", "keepalive" and any "UCX_<NAME>" which
 * is applied to this instance's UCP configuration only. */
static cw_status_t ucx_apply_params(struct ucx_cls *cls, ucp_config_t *config,
                                    const char *const *params)
{
    bool keepalive_set = false, backlog_set = false, peer_set = false;
    const char *env_rma = getenv("CAUSEWAY_UCX_RMA");
    cw_status_t st;

    if (env_rma && (strcmp(env_rma, "am") == 0 || strcmp(env_rma, "rkey") == 0))
        cls->rma_rkey = strcmp(env_rma, "rkey") == 0;
    else if (env_rma)
        UCX_WARN(cls, "CAUSEWAY_UCX_RMA=%s ignored (want am or rkey)", env_rma);

    for (size_t i = 0; params && params[i] && params[i + 1]; i += 2) {
        const char *k = params[i], *v = params[i + 1];
        uint64_t n;

        if (strcmp(k, "eager_size") == 0) {
            if (nau_param_uint(v, 64, UCX_EAGER_MAX, &n) != CW_OK) {
                UCX_ERR(cls, "eager_size=%s: expected 64..%u", v,
                        UCX_EAGER_MAX);
                return CW_INVALID_ARG;
            }
            cls->eager_size = (size_t)n;
        } else if (strcmp(k, "unexpected_queue_bytes") == 0 ||
                   strcmp(k, "unexpected_peer_bytes") == 0) {
            if (nau_param_uint(v, 1, SIZE_MAX, &n) != CW_OK) {
                UCX_ERR(cls, "%s=%s: expected a number of bytes", k, v);
                return CW_INVALID_ARG;
            }
            if (strcmp(k, "unexpected_queue_bytes") == 0) {
                cls->unexp_queue_max = (size_t)n;
            } else {
                cls->unexp_peer_max = (size_t)n;
                peer_set = true;
            }
        } else if (strcmp(k, "fd_reserve") == 0) {
            if (nau_param_uint(v, 0, 1u << 20, &n) != CW_OK) {
                UCX_ERR(cls, "fd_reserve=%s: expected 0..1048576", v);
                return CW_INVALID_ARG;
            }
            cls->fd_reserve = (size_t)n;
        } else if (strcmp(k, "liveness_ms") == 0) {
            if (nau_param_uint(v, 0, 3600000, &n) != CW_OK ||
                (n != 0 && n < 100)) {
                UCX_ERR(cls,
                        "liveness_ms=%s: expected 0 (off) or "
                        "100..3600000",
                        v);
                return CW_INVALID_ARG;
            }
            cls->live_timeout_ns = n * 1000000ull;
        } else if (strcmp(k, "close_flush_ms") == 0 ||
                   strcmp(k, "close_idle_ms") == 0) {
            if (nau_param_uint(v, 0, 3600000, &n) != CW_OK) {
                UCX_ERR(cls, "%s=%s: expected 0..3600000", k, v);
                return CW_INVALID_ARG;
            }
            if (strcmp(k, "close_flush_ms") == 0)
                cls->close_flush_ns = n * 1000000ull;
            else
                cls->close_idle_ns = n * 1000000ull;
        } else if (strcmp(k, "rma") == 0) {
            if (strcmp(v, "am") != 0 && strcmp(v, "rkey") != 0) {
                UCX_ERR(cls, "rma=%s: expected 'am' or 'rkey'", v);
                return CW_INVALID_ARG;
            }
            cls->rma_rkey = strcmp(v, "rkey") == 0;
        } else if (strcmp(k, "keepalive") == 0) {
            st = ucx_config_set(cls, config, "KEEPALIVE_INTERVAL", v);
            if (st != CW_OK)
                return st;
            keepalive_set = true;
        } else if (strncmp(k, "UCX_", 4) == 0 && k[4] != '\0') {
            st = ucx_config_set(cls, config, k + 4, v);
            if (st != CW_OK)
                return st;
            if (strcmp(k + 4, "KEEPALIVE_INTERVAL") == 0)
                keepalive_set = true;
            if (strcmp(k + 4, "LISTENER_BACKLOG") == 0)
                backlog_set = true;
        } else {
            UCX_WARN(cls, "unknown parameter '%s' ignored", k);
        }
    }
    /* Checked once all are read, whatever their order: a bound below what
     * a message of the eager limit is charged (its length and its record,
     * UCX_UMSG_OVERHEAD) would drop every message of that size. */
    if (!peer_set && cls->unexp_peer_max < cls->eager_size + UCX_UMSG_OVERHEAD)
        cls->unexp_peer_max = cls->eager_size + UCX_UMSG_OVERHEAD;
    if (cls->unexp_queue_max < cls->eager_size + UCX_UMSG_OVERHEAD ||
        cls->unexp_peer_max < cls->eager_size + UCX_UMSG_OVERHEAD) {
        UCX_ERR(cls,
                "unexpected_queue_bytes (%zu) and unexpected_peer_bytes (%zu) "
                "must be at least eager_size + %zu (%zu): what a message of "
                "the eager limit is charged",
                cls->unexp_queue_max, cls->unexp_peer_max,
                (size_t)UCX_UMSG_OVERHEAD, cls->eager_size + UCX_UMSG_OVERHEAD);
        return CW_INVALID_ARG;
    }
    /* UCX accepts on its own thread, as many at once as the kernel holds
     * completed: a short queue keeps a burst of connections below the
     * descriptors the listener pause keeps in reserve (ucx_guard.c). */
    if (!backlog_set && getenv("UCX_LISTENER_BACKLOG") == NULL) {
        st = ucx_config_set(cls, config, "LISTENER_BACKLOG",
                            UCX_LISTENER_BACKLOG_DEFAULT);
        if (st != CW_OK)
            return st;
    }
    if (!keepalive_set && getenv("UCX_KEEPALIVE_INTERVAL") == NULL)
        return ucx_config_set(cls, config, "KEEPALIVE_INTERVAL",
                              UCX_KEEPALIVE_DEFAULT);
    return CW_OK;
}

static cw_status_t ucx_context_create(struct ucx_cls *cls,
                                      const struct cw_na_init_info *info)
{
    ucp_params_t params = {0};
    char ifname[64];
    ucp_config_t *config;
    ucs_status_t st;
    cw_status_t ret;

    st = ucp_config_read(NULL, NULL, &config);
    if (st != UCS_OK) {
        UCX_ERR(cls, "ucp_config_read() failed: %s", ucs_status_string(st));
        return ucx_status(st);
    }
    ret = ucx_config_set(cls, config, "TLS", cls->tls);
    if (ret != CW_OK)
        goto out_release;
    if (ucx_location_ifname(info->location, ifname, sizeof(ifname)) &&
        getenv("UCX_NET_DEVICES") == NULL) {
        ret = ucx_config_set(cls, config, "NET_DEVICES", ifname);
        if (ret != CW_OK)
            goto out_release;
    }
    ret = ucx_apply_params(cls, config, info->params);
    if (ret != CW_OK)
        goto out_release;

    params.field_mask = UCP_PARAM_FIELD_FEATURES |
                        UCP_PARAM_FIELD_MT_WORKERS_SHARED |
                        UCP_PARAM_FIELD_NAME;
    params.features = UCP_FEATURE_AM | UCP_FEATURE_TAG;
    if (cls->rma_rkey)
        params.features |= UCP_FEATURE_RMA;
    if (!cls->busy)
        params.features |= UCP_FEATURE_WAKEUP;
    params.mt_workers_shared = 0;
    params.name = "causeway";
    st = ucp_init(&params, config, &cls->context);
    if (st != UCS_OK) {
        UCX_ERR(cls, "ucp_init(tls=%s) failed: %s", cls->tls,
                ucs_status_string(st));
        ret = ucx_status(st);
    }
out_release:
    ucp_config_release(config);
    return ret;
}

static cw_status_t ucx_worker_create(struct ucx_cls *cls)
{
    ucp_worker_params_t wp = {0};
    ucp_worker_attr_t attr = {0};
    ucs_status_t st;

    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    ucx_guard_init(); /* before the worker's async context exists */
    st = ucp_worker_create(cls->context, &wp, &cls->worker);
    if (st != UCS_OK) {
        UCX_ERR(cls, "ucp_worker_create() failed: %s", ucs_status_string(st));
        return ucx_status(st);
    }
    attr.field_mask = UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER;
    st = ucp_worker_query(cls->worker, &attr);
    if (st != UCS_OK) {
        UCX_ERR(cls, "ucp_worker_query() failed: %s", ucs_status_string(st));
        return ucx_status(st);
    }
    if (attr.max_am_header < sizeof(struct ucx_rma_hdr) ||
        attr.max_am_header < UCX_UNEXP_HDR_MAX) {
        UCX_ERR(cls, "UCX active message header limit %zu is below %zu",
                attr.max_am_header, (size_t)UCX_UNEXP_HDR_MAX);
        return CW_UNSUPPORTED;
    }
    if (!cls->busy) {
        st = ucp_worker_get_efd(cls->worker, &cls->efd);
        if (st != UCS_OK) {
            UCX_ERR(cls, "ucp_worker_get_efd() failed: %s",
                    ucs_status_string(st));
            return ucx_status(st);
        }
    }
    return CW_OK;
}

static void ucx_finalize(cw_na_class_t *c)
{
    struct ucx_cls *cls = ucx_cls(c);

    if (cls == NULL)
        return;
    /* The final flush and drain progress the worker: what peers send
     * meanwhile must start nothing new (a queued message, data moving into
     * or out of memory) that the teardown below would have to undo. */
    cls->finalizing = true;
    if (cls->worker) {
        if (cls->listener)
            ucp_listener_destroy(cls->listener);
        cls->listener = NULL;
        ucx_msg_flush_queue(cls);
        ucx_ops_cancel_all(cls);
        ucx_conns_close_all(cls);
        ucx_drain_requests(cls, 2000000000ull);
        ucx_ops_release_reqs(cls);
        ucx_conns_release_reqs(cls);
        ucx_rma_release_ctls(cls);
        ucx_early_release_reqs(cls);
    }
    /* Operations the core did not drain are dropped without callbacks. */
    for (struct nau_list *l = cls->ops.next, *next; l != &cls->ops; l = next) {
        next = l->next;
        ucx_op_discard(nau_container_of(l, struct cw_na_op, alink));
    }
    if (cls->self)
        ucx_peer_put(cls, cls->self);
    cls->self = NULL;
    ucx_mems_release_all(cls);
    if (cls->worker)
        ucp_worker_destroy(cls->worker);
    if (cls->context)
        ucp_cleanup(cls->context);
    ucx_ops_free_all(cls);
    nau_pool_fini(&cls->op_pool);
    ucx_rma_free_ctls(cls);
    ucx_early_free_all(cls);
    ucx_conns_free_all(cls);
    ucx_peers_free_all(cls);
    nau_ptable_fini(&cls->peers);
    nau_ptable_fini(&cls->eps);
    nau_ptable_fini(&cls->mems);
    nau_ptable_fini(&cls->rma_ops);
    nau_match_fini(&cls->early);
    nau_match_fini(&cls->held);
    ucx_proc_leave(cls);
    free(cls);
}

static bool ucx_check_protocol(const char *protocol)
{
    return protocol != NULL && strlen(protocol) < 64 &&
           strpbrk(protocol, " \t\n") == NULL;
}

static cw_status_t ucx_init(const struct cw_na_host *host,
                            const struct cw_na_init_info *info,
                            cw_na_class_t **cls_p)
{
    struct ucx_cls *cls;
    cw_status_t ret;

    if (host == NULL || info == NULL || cls_p == NULL)
        return CW_INVALID_ARG;
    cls = calloc(1, sizeof(*cls));
    if (cls == NULL)
        return CW_NOMEM;
    cls->host = host;
    cls->flags = info->flags;
    cls->busy = (info->flags & CW_NA_BUSY) != 0;
    cls->efd = -1;
    cls->eager_size = UCX_EAGER_DEFAULT;
    cls->unexp_queue_max = UCX_UNEXP_QUEUE_DEFAULT;
    cls->unexp_peer_max = UCX_UNEXP_PEER_DEFAULT;
    cls->fd_reserve = UCX_FD_RESERVE_DEFAULT;
    cls->live_timeout_ns = UCX_LIVENESS_DEFAULT_MS * 1000000ull;
    cls->close_flush_ns = UCX_CLOSE_FLUSH_DEFAULT_MS * 1000000ull;
    cls->close_idle_ns = UCX_CLOSE_IDLE_DEFAULT_MS * 1000000ull;
    cls->next_op_id = 1;
    cls->next_mem_id = 1;
    nau_list_init(&cls->conns);
    nau_list_init(&cls->dead);
    nau_list_init(&cls->closing);
    nau_list_init(&cls->done);
    nau_list_init(&cls->ops);
    nau_pool_init(&cls->op_pool, sizeof(struct cw_na_op), UCX_OP_POOL_MAX);
    nau_list_init(&cls->unexp_posted);
    nau_list_init(&cls->unexp_ready);
    nau_list_init(&cls->ctls);
    nau_list_init(&cls->early_all);
    nau_match_init(&cls->early, UCX_EARLY_MAX_MSGS, UCX_EARLY_MAX_BYTES,
                   nau_seed());
    /* As many as the caller posts: each is an op of its own. */
    nau_match_init(&cls->held, UINT_MAX, SIZE_MAX, nau_seed());
    /* Structure is valid (empty lists) from here: finalize can unwind. */

    if (info->protocol == NULL || info->protocol[0] == '\0')
        snprintf(cls->tls, sizeof(cls->tls), "tcp");
    else if (!ucx_check_protocol(info->protocol)) {
        UCX_ERR(cls, "bad protocol '%s'", info->protocol);
        ret = CW_INVALID_ARG;
        goto err_finalize;
    } else {
        /* "all" and lists such as "tcp,self" go to UCX_TLS verbatim; ';'
         * is accepted as a separator since ',' may not appear in URIs. */
        snprintf(cls->tls, sizeof(cls->tls), "%s", info->protocol);
        for (char *p = cls->tls; *p; p++)
            if (*p == ';')
                *p = ',';
    }

    ret = ucx_proc_enter(cls);
    if (ret != CW_OK)
        goto err_finalize;
    ret = nau_ptable_init(&cls->peers, nau_seed());
    if (ret == CW_OK)
        ret = nau_ptable_init(&cls->eps, nau_seed());
    if (ret == CW_OK)
        ret = nau_ptable_init(&cls->mems, nau_seed());
    if (ret == CW_OK)
        ret = nau_ptable_init(&cls->rma_ops, nau_seed());
    if (ret != CW_OK)
        goto err_finalize;

    ret = ucx_context_create(cls, info);
    if (ret != CW_OK)
        goto err_finalize;
    ret = ucx_worker_create(cls);
    if (ret != CW_OK)
        goto err_finalize;
    ret = ucx_msg_register_am(cls);
    if (ret != CW_OK)
        goto err_finalize;
    ret = ucx_rma_register_am(cls);
    if (ret != CW_OK)
        goto err_finalize;
    ret = ucx_live_register_am(cls);
    if (ret != CW_OK)
        goto err_finalize;
    ret = ucx_listen(cls, info->location);
    if (ret != CW_OK)
        goto err_finalize;

    UCX_DBG(cls, "instance tls=%s listening on %s", cls->tls, cls->self->str);
    *cls_p = (cw_na_class_t *)(void *)cls;
    return CW_OK;

err_finalize:
    ucx_finalize((cw_na_class_t *)(void *)cls);
    return ret;
}

static void ucx_query(cw_na_class_t *c, struct cw_na_caps *caps)
{
    struct ucx_cls *cls = ucx_cls(c);

    memset(caps, 0, sizeof(*caps));
    caps->max_unexpected_size = cls->eager_size;
    caps->max_expected_size = cls->eager_size;
    caps->max_tag = UINT32_MAX;
    caps->max_rma_size = 0;
    caps->max_segments = 1024;
    caps->flags = CW_NA_CAP_RMA | CW_NA_CAP_COALESCE |
                  (cls->busy ? 0 : CW_NA_CAP_WAIT_FD);
}

static uint64_t ucx_dropped(cw_na_class_t *c)
{
    return ucx_cls(c)->dropped;
}

/* The transports and devices of one memory domain. */
static cw_status_t ucx_describe_md(const struct cw_na_host *host,
                                   uct_component_h comp, const char *md_name,
                                   cw_na_describe_cb_t emit, void *arg)
{
    uct_md_config_t *config;
    uct_tl_resource_desc_t *tls;
    unsigned ntls;
    uct_md_h md;
    ucs_status_t us;

    us = uct_md_config_read(comp, NULL, NULL, &config);
    if (us != UCS_OK)
        goto err;
    us = uct_md_open(comp, md_name, config, &md);
    uct_config_release(config);
    if (us != UCS_OK)
        goto err;
    us = uct_md_query_tl_resources(md, &tls, &ntls);
    if (us != UCS_OK)
        goto err_close_md;
    /* A transport shows once per device (cw-info keeps one of each). */
    for (unsigned k = 0; k < ntls; k++) {
        char dev[UCT_TL_NAME_MAX + UCT_DEVICE_NAME_MAX + 2];

        snprintf(dev, sizeof(dev), "%s/%s", tls[k].tl_name, tls[k].dev_name);
        emit(arg, CW_NA_DESCRIBE_TRANSPORT, tls[k].tl_name);
        emit(arg, CW_NA_DESCRIBE_DEVICE, dev);
    }
    uct_release_tl_resource_list(tls);
    uct_md_close(md);
    return CW_OK;

err_close_md:
    uct_md_close(md);
err:
    CW_NA_LOG(host, CW_LOG_WARN, UCX_SUBSYS, "memory domain %s: %s", md_name,
              ucs_status_string(us));
    return ucx_status(us);
}

/* cw-info: the UCX this process runs with and what its transport layer
 * (UCT) finds: each memory domain's transports and devices.  UCX_TLS
 * narrows what a UCP context then uses among them. */
static cw_status_t ucx_describe(const struct cw_na_host *host,
                                cw_na_describe_cb_t emit, void *arg)
{
    uct_component_h *comps;
    unsigned ncomps;
    char buf[128];
    cw_status_t st = CW_OK;
    ucs_status_t us;

    snprintf(buf, sizeof(buf), "UCX %s", ucp_get_version_string());
    emit(arg, CW_NA_DESCRIBE_LIBRARY, buf);
    us = uct_query_components(&comps, &ncomps);
    if (us != UCS_OK) {
        CW_NA_LOG(host, CW_LOG_WARN, UCX_SUBSYS,
                  "uct_query_components() failed: %s", ucs_status_string(us));
        return ucx_status(us);
    }
    for (unsigned c = 0; c < ncomps; c++) {
        uct_component_attr_t attr = {
            .field_mask = UCT_COMPONENT_ATTR_FIELD_NAME |
                          UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT,
        };
        uct_md_resource_desc_t *mds;

        if (uct_component_query(comps[c], &attr) != UCS_OK ||
            attr.md_resource_count == 0)
            continue;
        mds = calloc(attr.md_resource_count, sizeof(*mds));
        if (mds == NULL) {
            st = CW_NOMEM;
            break;
        }
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
        attr.md_resources = mds;
        if (uct_component_query(comps[c], &attr) == UCS_OK)
            for (unsigned m = 0; m < attr.md_resource_count; m++)
                if (ucx_describe_md(host, comps[c], mds[m].md_name, emit,
                                    arg) != CW_OK)
                    st = CW_IO;
        free(mds);
    }
    uct_release_component_list(comps);
    return st;
}

static const struct cw_na_ops ucx_ops = {
    .check_protocol = ucx_check_protocol,
    .init = ucx_init,
    .finalize = ucx_finalize,
    .query = ucx_query,
    .addr_lookup = ucx_addr_lookup,
    .addr_self = ucx_addr_self,
    .addr_dup = ucx_addr_dup,
    .addr_free = ucx_addr_free,
    .addr_cmp = ucx_addr_cmp,
    .addr_to_string = ucx_addr_to_string,
    .addr_serialize_size = ucx_addr_serialize_size,
    .addr_serialize = ucx_addr_serialize,
    .addr_deserialize = ucx_addr_deserialize,
    .msg_send_unexpected = ucx_msg_send_unexpected,
    .msg_recv_unexpected = ucx_msg_recv_unexpected,
    .msg_send_expected = ucx_msg_send_expected,
    .msg_recv_expected = ucx_msg_recv_expected,
    .mem_register = ucx_mem_register,
    .mem_release = ucx_mem_release,
    .mem_serialize_size = ucx_mem_serialize_size,
    .mem_serialize = ucx_mem_serialize,
    .mem_deserialize = ucx_mem_deserialize,
    .put = ucx_put,
    .get = ucx_get,
    .get_wait_fd = ucx_get_wait_fd,
    .safe_to_sleep = ucx_safe_to_sleep,
    .progress = ucx_progress,
    .cancel = ucx_cancel,
    .dropped = ucx_dropped,
    .streaming = ucx_streaming,
    .describe = ucx_describe,
    .msg_inject = ucx_msg_inject,
};

CW_NA_EXPORT const struct cw_na_plugin cw_na_plugin_entry = {
    .abi_version = CW_NA_ABI_VERSION,
    .ops_size = sizeof(struct cw_na_ops),
    .name = "ucx",
    .description = "UCX (UCP active messages, tag matching; tcp and more)",
    .ops = &ucx_ops,
};
