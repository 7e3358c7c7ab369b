/*
 * Contexts and networks: creation, pre-posted unexpected receives, the
 * completion queue, and teardown.
 */
#include "rpc_priv.h"

#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

/* Unexpected receives on a client network that may get batches. */
#define CW_CLIENT_URECVS 8u

#define CW_DEFAULT_UNEXPECTED  64
#define CW_DEFAULT_TIMEOUT_MS  30000
#define CW_DEFAULT_CHUNK       (1u << 20)
#define CW_DEFAULT_DEPTH       4
#define CW_DEFAULT_MAX_PAYLOAD (64u << 20)
#define CW_DRAIN_NS            2000000000ull

void cw_context_opts_init(struct cw_context_opts *opts)
{
    if (opts == NULL)
        return;
    memset(opts, 0, sizeof(*opts));
    opts->unexpected_bufs = CW_DEFAULT_UNEXPECTED;
    opts->default_timeout_ms = CW_DEFAULT_TIMEOUT_MS;
    opts->bulk_chunk = CW_DEFAULT_CHUNK;
    opts->bulk_depth = CW_DEFAULT_DEPTH;
    opts->max_hops = CW_DEFAULT_MAX_HOPS;
    opts->max_payload_size = CW_DEFAULT_MAX_PAYLOAD;
}

/* The default gateway (design §2), from the options or the environment. */
static cw_status_t ctx_gateway_init(cw_context_t *ctx,
                                    const struct cw_context_opts *opts)
{
    const char *gw = opts ? opts->default_gateway : NULL;
    struct cw_uri u;

    if (gw == NULL)
        gw = getenv("CAUSEWAY_GATEWAY");
    if (gw == NULL || gw[0] == '\0')
        return CW_OK;
    if (cw_uri_parse(gw, &u) != CW_OK) {
        CW_ERROR("core", "default gateway \"%s\" is not a plain address", gw);
        return CW_CONFIG;
    }
    ctx->default_gateway = strdup(gw);
    return ctx->default_gateway ? CW_OK : CW_NOMEM;
}

static void ctx_free(cw_context_t *ctx)
{
    cw_resolver_fini(ctx);
    free(ctx->default_gateway);
    free(ctx->rwait);
    pthread_mutex_destroy(&ctx->progress_lock);
    free(ctx);
}

/* The status of a system call that failed with @p err. */
static cw_status_t ctx_sys_status(int err)
{
    return err == ENOMEM ? CW_NOMEM : CW_IO;
}

cw_status_t cw_context_create(const struct cw_context_opts *opts,
                              cw_context_t **ctx_p)
{
    cw_context_t *ctx;
    struct epoll_event ev = {.events = EPOLLIN};
    cw_status_t st;

    if (ctx_p == NULL ||
        (opts && (opts->flags & ~(CW_CTX_BUSY | CW_CTX_COALESCE))))
        return CW_INVALID_ARG;
    cw_log_init();
    ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL)
        return CW_NOMEM;
    cw_context_opts_init(&ctx->opts);
    if (opts != NULL) {
        ctx->opts = *opts;
        if (!ctx->opts.unexpected_bufs)
            ctx->opts.unexpected_bufs = CW_DEFAULT_UNEXPECTED;
        if (!ctx->opts.default_timeout_ms)
            ctx->opts.default_timeout_ms = CW_DEFAULT_TIMEOUT_MS;
        if (!ctx->opts.bulk_chunk)
            ctx->opts.bulk_chunk = CW_DEFAULT_CHUNK;
        if (!ctx->opts.bulk_depth)
            ctx->opts.bulk_depth = CW_DEFAULT_DEPTH;
        if (ctx->opts.bulk_depth > CW_MAX_DEPTH)
            ctx->opts.bulk_depth = CW_MAX_DEPTH;
        if (!ctx->opts.max_hops)
            ctx->opts.max_hops = CW_DEFAULT_MAX_HOPS;
        if (!ctx->opts.max_payload_size)
            ctx->opts.max_payload_size = CW_DEFAULT_MAX_PAYLOAD;
    }
    ctx->max_hops = ctx->opts.max_hops > 255 ? 255 : ctx->opts.max_hops;
    ctx->opts.default_gateway = NULL;
    st = cw_idgen_init(&ctx->req_ids);
    if (st == CW_OK)
        st = ctx_gateway_init(ctx, opts);
    if (st != CW_OK) {
        free(ctx);
        return st;
    }
    nau_list_init(&ctx->inflight);
    nau_list_init(&ctx->wait_done);
    nau_list_init(&ctx->bulk_ops);
    nau_list_init(&ctx->incoming);
    nau_list_init(&ctx->responding);
    nau_list_init(&ctx->notices);
    nau_list_init(&ctx->bulks);
    nau_list_init(&ctx->rs_suspended);
    nau_list_init(&ctx->sendq);
    nau_list_init(&ctx->batches);
    cw_lock_init(&ctx->lock);
    cw_mutex_init(&ctx->progress_lock);
    /* Its deadlines are on the monotonic clock: a wall-clock step does
     * not stretch or cut a cw_trigger wait. */
    cw_cond_init(&ctx->cq_cond);
    ctx->rwait = calloc(CW_RWAIT_BUCKETS, sizeof(*ctx->rwait));
    if (ctx->rwait == NULL) {
        st = CW_NOMEM;
        goto err_free;
    }
    ctx->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (ctx->epfd < 0) {
        st = ctx_sys_status(errno);
        CW_ERROR("core", "epoll_create1() failed: %s", strerror(errno));
        goto err_free;
    }
    ctx->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (ctx->evfd < 0) {
        st = ctx_sys_status(errno);
        CW_ERROR("core", "eventfd() failed: %s", strerror(errno));
        goto err_close_ep;
    }
    ev.data.fd = ctx->evfd;
    if (epoll_ctl(ctx->epfd, EPOLL_CTL_ADD, ctx->evfd, &ev) != 0) {
        st = ctx_sys_status(errno);
        CW_ERROR("core", "epoll_ctl() failed: %s", strerror(errno));
        goto err_close_ev;
    }
    *ctx_p = ctx;
    return CW_OK;

err_close_ev:
    close(ctx->evfd);
err_close_ep:
    close(ctx->epfd);
err_free:
    ctx_free(ctx);
    return st;
}

cw_status_t cw_context_stats(cw_context_t *ctx,
                             struct cw_context_stats *stats_p)
{
    if (ctx == NULL || stats_p == NULL)
        return CW_INVALID_ARG;
    cw_lock_take(&ctx->lock);
    *stats_p = ctx->stats;
    stats_p->unanswered = 0;
    for (struct nau_list *e = ctx->incoming.next; e != &ctx->incoming;
         e = e->next)
        stats_p->unanswered++;
    stats_p->uncollected = 0;
    for (struct nau_list *e = ctx->wait_done.next; e != &ctx->wait_done;
         e = e->next)
        stats_p->uncollected++;
    /* Calls on a network's NA instance are serialized by this lock. */
    stats_p->na_dropped = 0;
    for (unsigned i = 0; i < ctx->nnets; i++)
        stats_p->na_dropped += cw_na_dropped(ctx->nets[i]->na);
    cw_lock_give(&ctx->lock);
    return CW_OK;
}

/* ---- completion queue --------------------------------------------------- */

void cw_cq_push(cw_context_t *ctx, struct cw_cqe *e)
{
    CW_LOCK_ASSERT_HELD(&ctx->lock);
    e->next = NULL;
    if (ctx->cq_tail)
        ctx->cq_tail->next = e;
    else
        ctx->cq_head = e;
    ctx->cq_tail = e;
    atomic_fetch_add_explicit(&ctx->cq_len, 1, memory_order_release);
    if (ctx->cq_waiters)
        cw_cond_signal(&ctx->cq_cond);
}

void cw_ctx_wake(cw_context_t *ctx)
{
    uint64_t one = 1;

    if (atomic_load_explicit(&ctx->sleepers, memory_order_relaxed) > 0)
        (void)!write(ctx->evfd, &one, sizeof(one));
}

cw_status_t cw_trigger(cw_context_t *ctx, unsigned timeout_ms, unsigned max,
                       unsigned *count_p)
{
    unsigned n = 0;
    struct timespec abs;
    bool have_abs = false;
    cw_context_t *prev;

    if (ctx == NULL)
        return CW_INVALID_ARG;
    /* Polling loops call this constantly: an empty queue costs no lock. */
    if (timeout_ms == 0 &&
        atomic_load_explicit(&ctx->cq_len, memory_order_acquire) == 0) {
        if (count_p)
            *count_p = 0;
        return CW_TIMEOUT;
    }
    prev = cw_sq_enter(ctx);
    cw_lock_take(&ctx->lock);
    while (max == 0 || n < max) {
        struct cw_cqe *e = ctx->cq_head;
        if (e == NULL) {
            if (n > 0 || timeout_ms == 0)
                break;
            if (!have_abs) {
                clock_gettime(CLOCK_MONOTONIC, &abs);
                abs.tv_sec += timeout_ms / 1000;
                abs.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
                if (abs.tv_nsec >= 1000000000L) {
                    abs.tv_sec++;
                    abs.tv_nsec -= 1000000000L;
                }
                have_abs = true;
            }
            ctx->cq_waiters++;
            int rc = cw_cond_timedwait(&ctx->cq_cond, &ctx->lock, &abs);
            ctx->cq_waiters--;
            cw_clock_pass_stale();
            if (rc == ETIMEDOUT && ctx->cq_head == NULL)
                break;
            continue;
        }
        ctx->cq_head = e->next;
        if (ctx->cq_head == NULL)
            ctx->cq_tail = NULL;
        atomic_fetch_sub_explicit(&ctx->cq_len, 1, memory_order_relaxed);
        cw_lock_give(&ctx->lock);
        e->fn(e);
        n++;
        /* Done, or nothing queued meanwhile: no lock to take again (what
         * another thread pushes now, it wakes a waiter for, or the next
         * call finds, as with the empty check above). */
        if ((max != 0 && n >= max) ||
            atomic_load_explicit(&ctx->cq_len, memory_order_acquire) == 0)
            goto out;
        cw_lock_take(&ctx->lock);
    }
    cw_lock_give(&ctx->lock);
out:
    cw_sq_leave(ctx, prev);
    if (count_p)
        *count_p = n;
    return n > 0 ? CW_OK : CW_TIMEOUT;
}

/* ---- networks ------------------------------------------------------------*/

static void net_urecv_cb(const struct cw_na_cb_info *info);

static cw_status_t net_urecv_post(struct cw_urecv *u)
{
    cw_network_t *net = u->net;
    cw_status_t st;

    st = cw_na_msg_recv_unexpected(net->na, u->buf, u->len, net_urecv_cb, u,
                                   &u->op);
    if (st != CW_OK) {
        CW_LOG_RL(CW_LOG_ERROR, "core",
                  "posting an unexpected receive on "
                  "%s failed: %s",
                  net->uri, cw_status_str(st));
        u->op = NULL;
        return st;
    }
    net->urecv_posted++;
    return CW_OK;
}

static void net_urecv_cb(const struct cw_na_cb_info *info)
{
    struct cw_urecv *u = info->arg;
    cw_network_t *net = u->net;
    cw_context_t *ctx = net->ctx;

    u->op = NULL;
    net->urecv_posted--;
    if (net->closed) {
        /* Arrived while cw_network_close cancels: nobody will answer. */
        if (info->status == CW_OK) {
            ctx->stats.rx_dropped++;
            if (info->u.recv_unexpected.source)
                cw_na_addr_free(net->na, info->u.recv_unexpected.source);
        }
        return;
    }
    if (info->status == CW_OK) {
        cw_rpc_recv_unexpected(net, u, info->u.recv_unexpected.len,
                               info->u.recv_unexpected.source);
    } else if (info->status != CW_CANCELED) {
        CW_LOG_RL(CW_LOG_WARN, "core", "unexpected receive on %s failed: %s",
                  net->uri, cw_status_str(info->status));
        ctx->stats.rx_dropped++;
        if (info->u.recv_unexpected.source)
            cw_na_addr_free(net->na, info->u.recv_unexpected.source);
    }
    if (!ctx->destroying && info->status != CW_CANCELED &&
        net_urecv_post(u) != CW_OK) {
        u->lost = true; /* not for good: cw_net_urecv_retry */
        net->urecv_lost++;
    }
}

void cw_net_urecv_retry(cw_context_t *ctx)
{
    CW_LOCK_ASSERT_HELD(&ctx->lock);
    if (ctx->destroying)
        return;
    for (unsigned i = 0; i < ctx->nnets; i++) {
        cw_network_t *net = ctx->nets[i];
        if (net->closed)
            continue;
        for (unsigned k = 0; k < net->nurecv && net->urecv_lost > 0; k++) {
            struct cw_urecv *u = &net->urecv[k];
            if (!u->lost)
                continue;
            if (net_urecv_post(u) != CW_OK)
                break; /* the plugin still refuses: next time */
            u->lost = false;
            net->urecv_lost--;
        }
    }
}

static void net_close(cw_network_t *net)
{
    if (net == NULL)
        return;
    for (unsigned i = 0; i < net->nurecv; i++)
        free(net->urecv[i].buf);
    free(net->urecv);
    if (net->self)
        cw_na_addr_free(net->na, net->self);
    cw_pins_free(net);
    cw_spread_free(net);
    cw_na_close(net->na);
    free(net);
}

cw_status_t cw_network_open_locked(cw_context_t *ctx, const char *uri,
                                   uint32_t flags, cw_network_t **net_p)
{
    cw_network_t *net;
    cw_status_t st;
    uint32_t naflags = 0;
    char loc[CW_URI_MAX];

    CW_LOCK_ASSERT_HELD(&ctx->lock);
    if (ctx->nnets >= CW_MAX_NETS) {
        CW_ERROR("core", "cannot open %s: a context holds at most %d networks",
                 uri, CW_MAX_NETS);
        return CW_OVERFLOW;
    }
    net = calloc(1, sizeof(*net));
    if (net == NULL)
        return CW_NOMEM;
    net->ctx = ctx;
    net->flags = flags;
    net->wait_fd = -1;
    net->refs = 1; /* the context's */
    if (cw_idgen_init(&net->tags) != CW_OK) {
        free(net);
        return CW_IO;
    }
    if (flags & CW_NET_LISTEN)
        naflags |= CW_NA_LISTEN;
    if (flags & CW_NET_ASYNC_RMA)
        naflags |= CW_NA_ASYNC_RMA;
    if (ctx->opts.flags & CW_CTX_BUSY)
        naflags |= CW_NA_BUSY;
    st = cw_na_open(uri, naflags, NULL, &net->na);
    if (st != CW_OK)
        goto err_free;
    net->caps = *cw_na_caps(net->na);
    if (net->caps.max_unexpected_size < CW_HDR_SIZE + 64 ||
        net->caps.max_expected_size < CW_HDR_SIZE + 64) {
        CW_ERROR("core", "%s: eager limit %zu/%zu too small for RPCs", uri,
                 net->caps.max_unexpected_size, net->caps.max_expected_size);
        st = CW_UNSUPPORTED;
        goto err_close;
    }
    snprintf(net->plugin, sizeof(net->plugin), "%s",
             cw_na_plugin_name(net->na));
    snprintf(net->protocol, sizeof(net->protocol), "%s",
             cw_na_protocol(net->na));
    st = cw_na_addr_self(net->na, &net->self);
    if (st != CW_OK)
        goto err_close;
    st = cw_na_addr_to_string(net->na, net->self, loc, sizeof(loc));
    if (st != CW_OK)
        goto err_close;
    snprintf(net->uri, sizeof(net->uri), "%s", loc);
    net->index = ctx->nnets;
    /* A client network takes unexpected messages too where its answers
     * may come in batches (docs/wire.md, "Batches"): a few receives, and
     * none if the plugin refuses them. */
    if ((flags & CW_NET_LISTEN) || (net->caps.flags & CW_NA_CAP_COALESCE)) {
        net->nurecv = (flags & CW_NET_LISTEN) ? ctx->opts.unexpected_bufs
                                              : CW_CLIENT_URECVS;
        net->urecv = calloc(net->nurecv, sizeof(*net->urecv));
        if (net->urecv == NULL) {
            st = CW_NOMEM;
            goto err_close;
        }
        for (unsigned i = 0; i < net->nurecv; i++) {
            struct cw_urecv *u = &net->urecv[i];
            u->net = net;
            u->len = net->caps.max_unexpected_size;
            u->buf = malloc(u->len);
            if (u->buf == NULL) {
                st = CW_NOMEM;
                goto err_cancel;
            }
            st = net_urecv_post(u);
            if (st != CW_OK && !(flags & CW_NET_LISTEN)) {
                free(u->buf);
                u->buf = NULL;
                net->nurecv = i; /* those posted; answers come one by one */
                break;
            }
            if (st != CW_OK)
                goto err_cancel;
        }
    }
    if (net->caps.flags & CW_NA_CAP_WAIT_FD) {
        net->wait_fd = cw_na_get_wait_fd(net->na);
        if (net->wait_fd >= 0) {
            struct epoll_event ev = {.events = EPOLLIN};
            ev.data.fd = net->wait_fd;
            if (epoll_ctl(ctx->epfd, EPOLL_CTL_ADD, net->wait_fd, &ev) != 0) {
                CW_WARN("core", "epoll_ctl(%s) failed: %s; polling only",
                        net->uri, strerror(errno));
                net->wait_fd = -1;
            }
        }
    }
    ctx->nets[ctx->nnets++] = net;
    *net_p = net;
    return CW_OK;

err_cancel:
    /* cw_na_close cancels and drains the receives already posted. */
err_close:
    net_close(net);
    return st;
err_free:
    free(net);
    return st;
}

cw_status_t cw_network_open(cw_context_t *ctx, const char *uri, uint32_t flags,
                            cw_network_t **net_p)
{
    cw_status_t st;
    cw_network_t *net;

    if (ctx == NULL || uri == NULL ||
        (flags & ~(CW_NET_LISTEN | CW_NET_ASYNC_RMA)))
        return CW_INVALID_ARG;
    cw_lock_take(&ctx->lock);
    st = cw_network_open_locked(ctx, uri, flags, &net);
    cw_lock_give(&ctx->lock);
    if (st == CW_OK && net_p)
        *net_p = net;
    return st;
}

/* ---- closing one network (cw_network_close) ----------------------------- */

void cw_net_unref_locked(cw_network_t *net)
{
    cw_context_t *ctx = net->ctx;

    CW_LOCK_ASSERT_HELD(&ctx->lock);
    if (--net->refs > 0)
        return;
    /* Only a closed network loses the context's reference. */
    for (cw_network_t **pp = &ctx->closed_nets; *pp; pp = &(*pp)->next_closed) {
        if (*pp == net) {
            *pp = net->next_closed;
            break;
        }
    }
    net_close(net);
}

/* Something of ours still waits on @p net. */
static bool net_busy(cw_context_t *ctx, cw_network_t *net)
{
    struct nau_list *e;

    CW_LOCK_ASSERT_HELD(&ctx->lock);
    if (net->urecv_posted > 0 || net->resp_sending > 0 ||
        cw_notice_pending(ctx, net))
        return true;
    for (e = ctx->inflight.next; e != &ctx->inflight; e = e->next) {
        cw_handle_t *h = nau_container_of(e, cw_handle_t, link);
        if (h->use.net == net && h->use.pending > 0)
            return true;
    }
    for (e = ctx->wait_done.next; e != &ctx->wait_done; e = e->next)
        if (nau_container_of(e, cw_handle_t, link)->use.net == net)
            return true;
    for (e = ctx->bulk_ops.next; e != &ctx->bulk_ops; e = e->next)
        if (nau_container_of(e, cw_bulk_op_t, link)->net == net)
            return true;
    return false;
}

/* Take @p net off the context (nothing of ours pending on it):
 * the arrays indexed by network shift down past it. */
static void net_detach(cw_context_t *ctx, cw_network_t *net)
{
    unsigned p = net->index;
    struct nau_list *e;

    CW_LOCK_ASSERT_HELD(&ctx->lock);
    for (e = ctx->bulks.next; e != &ctx->bulks; e = e->next) {
        cw_bulk_t *b = nau_container_of(e, cw_bulk_t, ctx_link);
        if (b->reg[p])
            cw_na_mem_release(net->na, b->reg[p]);
        memmove(&b->reg[p], &b->reg[p + 1],
                (ctx->nnets - p - 1) * sizeof(b->reg[0]));
        b->reg[ctx->nnets - 1] = NULL;
    }
    for (unsigned i = p + 1; i < ctx->nnets; i++) {
        ctx->nets[i - 1] = ctx->nets[i];
        ctx->nets[i - 1]->index = i - 1;
    }
    ctx->nets[--ctx->nnets] = NULL;
    if (net->wait_fd >= 0 &&
        epoll_ctl(ctx->epfd, EPOLL_CTL_DEL, net->wait_fd, NULL) != 0)
        CW_WARN("core", "epoll_ctl(DEL %s) failed: %s", net->uri,
                strerror(errno));
    net->wait_fd = -1;
    if (net->urecv_posted == 0) {
        for (unsigned i = 0; i < net->nurecv; i++)
            free(net->urecv[i].buf);
        free(net->urecv);
        net->urecv = NULL;
        net->nurecv = 0;
    }
    net->next_closed = ctx->closed_nets;
    ctx->closed_nets = net;
}

cw_status_t cw_network_close(cw_network_t *net)
{
    cw_context_t *ctx;
    struct nau_list *e;
    uint64_t until;

    if (net == NULL)
        return CW_INVALID_ARG;
    ctx = net->ctx;
    cw_lock_take(&ctx->lock);
    if (net->closed || ctx->destroying) {
        cw_lock_give(&ctx->lock);
        return CW_INVALID_ARG;
    }
    net->closed = true;
    /* Requests that came in on it and are not answered yet: their caller
     * can no longer be reached, so their respond completes CW_CANCELED
     * without sending (no bare answer for an overflowed caller either). */
    for (e = ctx->incoming.next; e != &ctx->incoming; e = e->next) {
        cw_handle_t *h = nau_container_of(e, cw_handle_t, link);
        if (h->use.net == net) {
            cw_h_set_canceled(h, true);
            h->use.rflags &= (uint16_t)~CW_HF_OVERFLOW;
        }
    }
    cw_rpc_cancel_net(ctx, net);
    for (unsigned i = 0; i < net->nurecv; i++)
        if (net->urecv[i].op)
            cw_na_cancel(net->na, net->urecv[i].op);
    cw_lock_give(&ctx->lock);

    /* The cancellations complete through the plugin: drive it until they
     * have (bounded, like cw_context_destroy). */
    until = cw_now_ns() + CW_DRAIN_NS;
    for (;;) {
        bool busy;
        cw_lock_take(&ctx->lock);
        (void)cw_na_progress(net->na, 0, NULL);
        cw_rpc_cancel_net(ctx, net);
        busy = net_busy(ctx, net);
        if (!busy || cw_now_ns() > until) {
            if (busy)
                CW_WARN("core", "closing %s with operations still pending",
                        net->uri);
            net_detach(ctx, net);
            break;
        }
        cw_lock_give(&ctx->lock);
        struct timespec ts = {0, 100000L};
        nanosleep(&ts, NULL);
    }
    cw_ctx_wake(ctx);
    CW_INFO("core", "network %s closed", net->uri);
    cw_net_unref_locked(net); /* the context's reference */
    cw_lock_give(&ctx->lock);
    return CW_OK;
}

cw_status_t cw_network_uri(cw_network_t *net, char *buf, size_t len)
{
    int n;

    if (net == NULL || buf == NULL)
        return CW_INVALID_ARG;
    n = snprintf(buf, len, "%s", net->uri);
    return (n < 0 || (size_t)n >= len) ? CW_OVERFLOW : CW_OK;
}

cw_network_t *cw_net_find(cw_context_t *ctx, const char *plugin,
                          const char *protocol)
{
    CW_LOCK_ASSERT_HELD(&ctx->lock);
    for (unsigned i = 0; i < ctx->nnets; i++) {
        cw_network_t *net = ctx->nets[i];
        if (strcmp(net->plugin, plugin) == 0 &&
            strcmp(net->protocol, protocol) == 0)
            return net;
    }
    return NULL;
}

uint64_t cw_ctx_req_id(cw_context_t *ctx)
{
    CW_LOCK_ASSERT_HELD(&ctx->lock);
    return cw_idgen_next64(&ctx->req_ids);
}

uint32_t cw_net_tag(cw_network_t *net)
{
    CW_LOCK_ASSERT_HELD(&net->ctx->lock);
    return cw_idgen_next32(&net->tags, net->caps.max_tag);
}

size_t cw_rpc_header_size(void)
{
    return CW_HDR_SIZE;
}

/* ---- teardown ------------------------------------------------------------*/

void cw_context_destroy(cw_context_t *ctx)
{
    uint64_t until;

    if (ctx == NULL)
        return;
    cw_lock_take(&ctx->lock);
    ctx->destroying = true;
    cw_rpc_cancel_all(ctx);
    cw_lock_give(&ctx->lock);
    until = cw_now_ns() + CW_DRAIN_NS;
    for (;;) {
        bool busy;
        cw_progress(ctx, 1);
        cw_trigger(ctx, 0, 0, NULL);
        cw_lock_take(&ctx->lock);
        cw_rpc_cancel_all(ctx);
        busy = cw_ctx_busy(ctx);
        cw_lock_give(&ctx->lock);
        if (!busy)
            break;
        if (cw_now_ns() > until) {
            CW_WARN("core", "context destroyed with operations still pending");
            break;
        }
    }
    for (unsigned i = 0; i < ctx->nnets; i++) {
        cw_network_t *net = ctx->nets[i];
        for (unsigned k = 0; k < net->nurecv; k++)
            if (net->urecv[k].op)
                cw_na_cancel(net->na, net->urecv[k].op);
    }
    until = cw_now_ns() + CW_DRAIN_NS;
    for (;;) {
        bool posted = false;
        cw_lock_take(&ctx->lock);
        for (unsigned i = 0; i < ctx->nnets; i++) {
            cw_na_progress(ctx->nets[i]->na, 0, NULL);
            posted |= ctx->nets[i]->urecv_posted > 0;
        }
        cw_lock_give(&ctx->lock);
        if (!posted || cw_now_ns() > until)
            break;
    }
    cw_trigger(ctx, 0, 0, NULL);
    cw_rpc_pool_fini(ctx);
    cw_rpc_classes_fini(ctx);
    for (unsigned i = ctx->nnets; i-- > 0;)
        net_close(ctx->nets[i]);
    /* Closed networks something still referred to (leaked by the user). */
    while (ctx->closed_nets) {
        cw_network_t *net = ctx->closed_nets;
        ctx->closed_nets = net->next_closed;
        net_close(net);
    }
    close(ctx->evfd);
    close(ctx->epfd);
    ctx_free(ctx);
}
