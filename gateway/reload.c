/*
 * Signals, reload and drain.  Signals arrive through a signalfd read from
 * the progress loop; no work is done in a signal handler.
 *
 * Reload: the whole file is loaded and validated first; only a valid file
 * replaces the route table (RPCs in flight keep the table they started
 * with through their own reference).  Networks added by the new file are
 * opened; networks it removes stop taking new requests at once (they are
 * refused, and no route leaves through them), and are closed
 * (cw_network_close: port released, gone from cwctl status) as soon as no
 * forwarded RPC that came in on them is in flight any more.  Those drain
 * normally, bounded by their deadlines and limits.max_timeout; requests
 * from them still queued are answered CW_UNREACHABLE on them before they
 * are closed (gw_reload_reap).  RPCs that
 * were sent out through the closed network (it was the one the core picked
 * for their next hop's plugin) are cancelled by the close and their callers
 * get CW_CANCELED.
 *
 * Drain: new requests are answered CW_DRAINING, those in flight (or queued)
 * finish until gateway.drain_grace; whatever is left then is canceled (its
 * caller gets CW_CANCELED) and the gateway exits 0.
 */
#include "gw_int.h"
#include "notify.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

int gw_signals_open(void)
{
    sigset_t set;
    int fd;

    sigemptyset(&set);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0) {
        CW_ERROR(GW_LOG, "pthread_sigmask() failed");
        return -1;
    }
    fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (fd < 0)
        CW_ERROR(GW_LOG, "signalfd() failed: %s", strerror(errno));
    /* A dead admin client must not kill the gateway. */
    signal(SIGPIPE, SIG_IGN);
    return fd;
}

static void gw_reload_reap(struct gw *gw);

/* Also the housekeeping point where removed networks get closed. */
void gw_signals_poll(struct gw *gw)
{
    struct signalfd_siginfo si;
    char err[256];

    gw_reload_reap(gw);
    while (read(gw->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        switch (si.ssi_signo) {
        case SIGHUP:
            GW_NOTICE("SIGHUP: reloading %s",
                      gw->config_path ? gw->config_path : "(no file)");
            (void)gw_reload(gw, err, sizeof(err));
            break;
        case SIGTERM:
        case SIGINT:
            if (gw->draining) {
                CW_WARN(GW_LOG, "second %s: stopping now",
                        strsignal((int)si.ssi_signo));
                gw->drain_deadline_ns = 0;
            } else {
                gw_drain_start(gw, strsignal((int)si.ssi_signo));
            }
            break;
        default:
            break;
        }
    }
}

/* Close removed network @p i and take it off gw->nets. */
static void gw_net_close_at(struct gw *gw, unsigned i)
{
    struct gw_net *n = &gw->nets[i];
    cw_status_t st;

    GW_NOTICE("network %s (%s) removed by the reload and idle: closing it",
              n->name, n->self);
    /* Cached next-hop addresses may resolve through it: forget them all;
     * they are looked up again on their next use (RPCs in flight hold
     * their own references). */
    gw_addr_cache_fini(gw);
    gw_rcache_clear(gw);
    gw_sources_expire(gw, 0, true); /* their address copies too */
    st = CW_OK;
    for (unsigned k = 0; k < gw->nshards; k++) {
        /* The published endpoint first: no caller is sent to a member
         * already closed. */
        cw_status_t kst =
            n->members[k] ? cw_network_close(n->members[k]) : CW_OK;
        if (kst != CW_OK && st == CW_OK)
            st = kst;
        gw->shards[k].nnets--;
    }
    if (st != CW_OK)
        CW_WARN(GW_LOG, "closing network %s failed: %s", n->name,
                cw_status_str(st));
    /* Forward records point into gw->nets: follow the shift. */
    GW_ASSERT_WORKERS_LOCKED(gw);
    for (unsigned k = 0; k < gw->nshards; k++) {
        struct nau_list *l;

        nau_list_for_each(l, &gw->shards[k].fwds)
        {
            struct gw_fwd *f = nau_container_of(l, struct gw_fwd, link);

            if (f->ingress != NULL && f->ingress > n)
                f->ingress--;
        }
    }
    memmove(&gw->nets[i], &gw->nets[i + 1],
            (gw->nnets - i - 1) * sizeof(gw->nets[0]));
    gw->nnets--;
    memset(&gw->nets[gw->nnets], 0, sizeof(gw->nets[0]));
}

/* Close the removed networks nothing in flight came in on any more.
 * Requests that came in on one and still wait in the queue are refused
 * as the ones arriving on it now are, while it is open to carry their
 * answers; it is closed at a later pass (after gw->lock is dropped, the
 * deferred answers are sent). */
static void gw_reload_reap(struct gw *gw)
{
    for (unsigned i = 0; i < gw->nnets;) {
        struct gw_net *n = &gw->nets[i];

        if (n->removed && gw->nqueued != 0 &&
            gw_queue_answer_net(gw, n->net, CW_UNREACHABLE) > 0)
            i++;
        else if (n->removed && gw_net_inflight(gw, n) == 0)
            gw_net_close_at(gw, i);
        else
            i++;
    }
}

static bool gw_net_same(const struct gw_net *gn,
                        const struct cw_config_network *cn)
{
    return strcmp(gn->name, cn->name) == 0 && strcmp(gn->uri, cn->address) == 0;
}

/* Open the networks @p next adds, mark those it drops. */
static cw_status_t gw_reload_networks(struct gw *gw,
                                      const struct cw_config *next)
{
    for (unsigned i = 0; i < gw->nnets; i++) {
        bool keep = false;
        for (size_t j = 0; j < next->nnetworks && !keep; j++)
            keep = gw_net_same(&gw->nets[i], &next->networks[j]);
        if (!keep && !gw->nets[i].removed) {
            /* Closed by gw_reload_reap once its RPCs in flight are done. */
            gw->nets[i].removed = true;
            CW_WARN(GW_LOG,
                    "network %s (%s) removed by the reload: takes "
                    "no new requests, closed once its %u RPCs in flight "
                    "are done",
                    gw->nets[i].name, gw->nets[i].self,
                    gw_net_inflight(gw, &gw->nets[i]));
        }
    }
    for (size_t j = 0; j < next->nnetworks; j++) {
        bool have = false;
        for (unsigned i = 0; i < gw->nnets && !have; i++) {
            if (gw_net_same(&gw->nets[i], &next->networks[j])) {
                have = true;
                gw->nets[i].removed = false;
            }
        }
        if (have)
            continue;
        if (gw->nnets == GW_MAX_NETS) {
            CW_ERROR(GW_LOG, "cannot add network %s: at most %d networks",
                     next->networks[j].name, GW_MAX_NETS);
            return CW_UNSUPPORTED;
        }
        cw_status_t st =
            gw_net_open(gw, &next->networks[j], &gw->nets[gw->nnets]);
        if (st != CW_OK)
            return st;
        gw->nnets++;
    }
    return CW_OK;
}

/* Add the key a "restart needed" diagnostic @p msg names ("FILE:L:C:
 * KEY: cannot be changed by a reload ...") to the list @p buf. */
static void gw_pending_add(char *buf, size_t len, const char *msg)
{
    const char *end = strstr(msg, ": cannot be changed"), *key = end;
    size_t used = strlen(buf);

    if (end == NULL)
        return;
    while (key > msg && !(key[-1] == ' ' && key - 1 > msg && key[-2] == ':'))
        key--;
    snprintf(buf + used, len - used, "%s%.*s", used ? ", " : "",
             (int)(end - key), key);
}

cw_status_t gw_reload(struct gw *gw, char *err, size_t errlen)
{
    char pending[sizeof(gw->restart_pending)];
    struct cw_config_diag *diag = NULL;
    struct cw_config *next = NULL;
    struct cw_route_table *table = NULL;
    cw_status_t st;

    gw_notify_reloading(gw->config_path ? gw->config_path : "(no file)");
    if (gw->config_path == NULL) {
        snprintf(err, errlen, "no configuration file to reload");
        st = CW_INVALID_ARG;
        goto fail;
    }
    diag = cw_config_diag_new();
    if (diag == NULL) {
        snprintf(err, errlen, "out of memory");
        st = CW_NOMEM;
        goto fail;
    }
    st = cw_config_load(gw->config_path, 0, diag, &next);
    if (st != CW_OK) {
        for (size_t i = 0; i < cw_config_diag_count(diag); i++)
            CW_ERROR(GW_LOG, "reload: %s", cw_config_diag_get(diag, i));
        snprintf(err, errlen, "%s (%zu errors; first: %s)", cw_status_str(st),
                 cw_config_diag_count(diag),
                 cw_config_diag_count(diag) ? cw_config_diag_get(diag, 0)
                                            : "-");
        goto fail;
    }
    /* Keys that need a restart are reported but do not stop the reload;
     * networks are handled below.  Against the configuration the gateway
     * started with, which is what runs for those keys: a second reload
     * of the same file still reports them. */
    cw_config_diag_clear(diag);
    pending[0] = '\0';
    if (cw_config_check_reload(gw->start_cfg != NULL ? gw->start_cfg : gw->cfg,
                               next, diag) != CW_OK)
        for (size_t i = 0; i < cw_config_diag_count(diag); i++) {
            CW_WARN(GW_LOG, "reload: %s", cw_config_diag_get(diag, i));
            gw_pending_add(pending, sizeof(pending),
                           cw_config_diag_get(diag, i));
        }
    st = cw_route_table_build(next, &table);
    if (st != CW_OK) {
        snprintf(err, errlen, "cannot build the route table: %s",
                 cw_status_str(st));
        goto fail;
    }
    st = gw_reload_networks(gw, next);
    if (st != CW_OK) {
        snprintf(err, errlen, "cannot open the new networks: %s",
                 cw_status_str(st));
        goto fail;
    }
    /* Each worker takes the new table at its next request; those in
     * flight finish on theirs.  A route that moves to another network
     * still leaves from the same worker, behind what it queued before
     * (FIFO per source and route). */
    GW_ASSERT_ALL_LOCKED(gw);
    gw_set_config(gw, next, next, table);
    gw_reload_reap(gw);
    gw->reloads++;
    memcpy(gw->restart_pending, pending, sizeof(pending));
    /* Queued requests may go through other routes now. */
    gw_queue_relane(gw);
    gw->last_reload_error[0] = '\0';
    GW_NOTICE("reloaded %s: %zu routes, %zu services", gw->config_path,
              cw_route_table_size(table), next->nservices);
    cw_config_diag_free(diag);
    gw_notify("READY=1\nSTATUS=serving: reloaded, %zu routes",
              cw_route_table_size(table));
    return CW_OK;

fail:
    cw_route_table_unref(table);
    cw_config_free(next);
    cw_config_diag_free(diag);
    gw->reload_failures++;
    snprintf(gw->last_reload_error, sizeof(gw->last_reload_error), "%s", err);
    CW_ERROR(GW_LOG, "reload failed, keeping the current table: %s", err);
    gw_notify("READY=1\nSTATUS=serving: reload failed, kept the current "
              "table: %s",
              err);
    return st;
}

void gw_drain_start(struct gw *gw, const char *why)
{
    if (gw->draining)
        return;
    gw->draining = true;
    gw->drain_deadline_ns = cw_now_ns() + gw->cfg->gateway.drain_grace_ns;
    unsigned n = gw_inflight_now(gw);

    gw_notify("STOPPING=1\nSTATUS=draining %u RPCs in flight", n);
    GW_NOTICE("%s: draining %u RPCs in flight (grace %.1f s)", why, n,
              gw->cfg->gateway.drain_grace_ns / 1e9);
}

void gw_unanswered_update(struct gw *gw)
{
    uint64_t n = 0;

    for (unsigned i = 0; i < gw->nshards; i++) {
        struct cw_context_stats cs;
        if (cw_context_stats(gw->shards[i].ctx, &cs) == CW_OK)
            n += cs.unanswered + cs.uncollected;
    }
    gw_lock(gw);
    gw->unanswered = n;
    gw_unlock(gw);
}

/* Done when nothing is forwarded, queued or pinged and no request is left
 * unanswered: one whose overflowed arguments are still being pulled is not
 * forwarded yet, and would lose its connection if the gateway exited now;
 * nor an answer whose overflowed payload its caller is still pulling (the
 * memory would go away under it).
 * Once the grace is over, only what the cancel completes is waited for. */
bool gw_drain_check(struct gw *gw, uint64_t now)
{
    if (gw->inflight == 0 && gw->nqueued == 0 && !gw_health_busy(gw) &&
        (gw->unanswered == 0 || gw->drain_canceled))
        return true;
    if (now >= gw->drain_deadline_ns && !gw->drain_canceled) {
        gw_queue_expire(gw, true, CW_CANCELED);
        CW_WARN(GW_LOG, "drain grace over: canceling %u RPCs in flight",
                gw_inflight_now(gw));
        gw->cancel_all = true; /* gw_loop, once the locks are dropped */
        gw->drain_canceled = true;
    }
    return false;
}
