/*
 * gateway.threads: workers ("shards" in the code).  Each worker is one
 * thread and one context with its own lock, completion queue and wait
 * fds, and an endpoint on every network (cw_network_open_spread: one
 * published address); only that thread calls cw_progress and cw_trigger
 * on it, so the plugins' system calls of its endpoints run on its core.
 * Worker 0 is the main thread, which also runs the control plane
 * (signals, admin, health, reload, drain).
 *
 * A worker sends from a lock-free multi-producer queue of its own (a
 * Treiber stack the owner takes whole and reverses); another thread that
 * puts work there (a health ping for worker 0) wakes its context
 * (cw_context_interrupt: the context's eventfd when the thread sleeps in
 * epoll, a flag when it polls).  With threads = 1 there is one worker, on
 * the main thread, and none of this runs.
 */
#include "gw_int.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local struct gw_shard *gw_cur_shard;

struct gw_shard *gw_shard_self(void)
{
    return gw_cur_shard;
}

struct gw_shard *gw_shard_of_ctx(struct gw *gw, const cw_context_t *ctx)
{
    for (unsigned k = 1; k < gw->nshards; k++)
        if (gw->shards[k].ctx == ctx)
            return &gw->shards[k];
    return &gw->shards[0];
}

/* gateway.threads: auto: one worker per CPU this process may run on (a
 * cpuset or taskset narrows it), at most GW_AUTO_THREADS: past that,
 * more workers than busy callers only hold memory and endpoints. */
#define GW_AUTO_THREADS 16

unsigned gw_threads_auto(void)
{
    cpu_set_t set;
    int n;

    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return 1;
    n = CPU_COUNT(&set);
    if (n < 1)
        return 1;
    return n > GW_AUTO_THREADS ? GW_AUTO_THREADS : (unsigned)n;
}

cw_status_t gw_shards_init(struct gw *gw, const struct cw_context_opts *o,
                           unsigned n)
{
    cw_status_t st;

    if (n == 0) {
        n = gw_threads_auto();
        GW_NOTICE("gateway.threads auto: %u workers", n);
    }
    if (n > GW_MAX_SHARDS) {
        CW_WARN(GW_LOG, "gateway.threads %u: at most %d are used", n,
                GW_MAX_SHARDS);
        n = GW_MAX_SHARDS;
    }
    gw->shards = calloc(n, sizeof(*gw->shards));
    if (gw->shards == NULL) {
        CW_ERROR(GW_LOG, "out of memory");
        return CW_NOMEM;
    }
    gw->threaded = n > 1;
    if (gw->threaded)
        cw_mutex_init(&gw->lock);
    for (unsigned i = 0; i < n; i++) {
        struct gw_shard *sh = &gw->shards[i];
        sh->gw = gw;
        sh->idx = i;
        atomic_init(&sh->inbox, NULL);
        nau_list_init(&sh->fwds);
        nau_pool_init(&sh->fwd_pool, sizeof(struct gw_fwd), GW_FWD_POOL_MAX);
        atomic_init(&sh->nqueued, 0);
        cw_mutex_init(&sh->addr_lock);
        cw_mutex_init(&sh->lock);
        gw->nshards++;
        st = cw_context_create(o, &sh->ctx);
        if (st != CW_OK) {
            CW_ERROR(GW_LOG, "cannot create the RPC context: %s",
                     cw_status_str(st));
            return st;
        }
    }
    gw->ctx = gw->shards[0].ctx;
    gw_cur_shard = &gw->shards[0];
    return CW_OK;
}

cw_status_t gw_shards_setup(struct gw *gw)
{
    for (unsigned i = 0; i < gw->nshards; i++) {
        struct gw_shard *sh = &gw->shards[i];
        cw_status_t st;

        if (i > 0) {
            st = cw_rpc_register(sh->ctx, GW_PING_RPC, gw_ping_handler, gw,
                                 NULL, NULL);
            if (st != CW_OK) {
                CW_ERROR(GW_LOG, "cannot register %s: %s", GW_PING_RPC,
                         cw_status_str(st));
                return st;
            }
        }
        st = cw_context_set_relay_hook(sh->ctx, gw_forward_hook_mt, sh);
        if (st != CW_OK) {
            CW_ERROR(GW_LOG, "cannot install the forward hook: %s",
                     cw_status_str(st));
            return st;
        }
    }
    return CW_OK;
}

void gw_shard_post(struct gw_shard *sh, struct gw_work *w)
{
    if (sh == gw_cur_shard)
        w->fn(w);
    else
        gw_shard_queue(sh, w);
}

bool gw_shard_push(struct gw_shard *sh, struct gw_work *w)
{
    struct gw_work *head;

    head = atomic_load_explicit(&sh->inbox, memory_order_relaxed);
    do {
        w->next = head;
    } while (!atomic_compare_exchange_weak_explicit(
        &sh->inbox, &head, w, memory_order_release, memory_order_relaxed));
    /* Only the push that found the queue empty needs to wake the owner:
     * later ones are taken in the same pass. */
    return head == NULL;
}

void gw_shard_wake(struct gw_shard *sh)
{
    (void)cw_context_interrupt(sh->ctx);
}

void gw_shard_queue(struct gw_shard *sh, struct gw_work *w)
{
    if (gw_shard_push(sh, w))
        gw_shard_wake(sh);
}

bool gw_shard_drain(struct gw_shard *sh)
{
    static _Thread_local bool draining, again;
    struct gw_work *w, *fifo;
    void *scope = NULL;
    bool ran = false;

    /* A work item that queues more for this shard and drains it (a
     * forward's end running the queue, gw_deferred_flush) must not run
     * them ahead of the older items of the batch being run: they are
     * taken after it. */
    if (draining) {
        again = true;
        return false;
    }
    draining = true;
    do {
        again = false;
        if (atomic_load_explicit(&sh->inbox, memory_order_relaxed) == NULL)
            break;
        /* The requests and answers the batch sends leave as from one pass
         * of the context's completion queue: those to one peer together
         * (coalescing, docs/wire.md "Batches"). */
        if (!ran)
            scope = cw_context_batch_begin(sh->ctx);
        w = atomic_exchange_explicit(&sh->inbox, NULL, memory_order_acquire);
        for (fifo = NULL; w != NULL;) { /* newest first: reverse */
            struct gw_work *next = w->next;
            w->next = fifo;
            fifo = w;
            w = next;
        }
        while (fifo != NULL) {
            w = fifo;
            fifo = w->next;
            w->fn(w);
        }
        ran = true;
    } while (again);
    if (ran)
        cw_context_batch_end(sh->ctx, scope);
    draining = false;
    return ran;
}

static void *gw_shard_main(void *arg)
{
    struct gw_shard *sh = arg;
    struct gw *gw = sh->gw;
    /* Hand-offs and the stop interrupt the context; the core bounds its
     * own sleeps (short while anything is in flight on it). */
    unsigned slice = gw->busy_poll ? 0 : 100;

    gw_cur_shard = sh;
    while (!atomic_load_explicit(&gw->threads_stop, memory_order_acquire)) {
        unsigned ran = 0;
        bool moved;

        /* One clock reading stamps what a pass forwards (log.h). */
        cw_clock_pass_begin();
        moved = gw_shard_drain(sh);
        (void)cw_progress(sh->ctx, moved ? 0 : slice);
        cw_trigger(sh->ctx, 0, 0, &ran);
        /* A slot freed on another worker, offered to this one's queue. */
        if (atomic_load_explicit(&sh->kick, memory_order_relaxed) != 0)
            gw_queue_kicked(sh);
        cw_clock_pass_end();
    }
    return NULL;
}

cw_status_t gw_threads_start(struct gw *gw)
{
    atomic_store(&gw->threads_stop, false);
    atomic_store(&gw->threads_on, gw->threaded);
    for (unsigned i = 1; i < gw->nshards; i++) {
        struct gw_shard *sh = &gw->shards[i];
        int rc = pthread_create(&sh->tid, NULL, gw_shard_main, sh);
        if (rc != 0) {
            CW_ERROR(GW_LOG, "pthread_create() failed: %s", strerror(rc));
            return CW_NOMEM;
        }
        sh->started = true;
    }
    if (gw->nshards > 1)
        CW_LOG(CW_LOG_INFO, GW_LOG, "%u shards, one progress thread each",
               gw->nshards);
    return CW_OK;
}

void gw_threads_stop(struct gw *gw)
{
    atomic_store_explicit(&gw->threads_stop, true, memory_order_release);
    for (unsigned i = 1; i < gw->nshards; i++) {
        struct gw_shard *sh = &gw->shards[i];
        if (!sh->started)
            continue;
        (void)cw_context_interrupt(sh->ctx);
        pthread_join(sh->tid, NULL);
        sh->started = false;
    }
    atomic_store(&gw->threads_on, false);
}

void gw_shards_quiesce(struct gw *gw)
{
    /* No other thread is left: what is still queued runs here. */
    for (bool ran = true; ran;) {
        ran = false;
        for (unsigned i = 0; i < gw->nshards; i++) {
            gw_cur_shard = &gw->shards[i];
            ran |= gw_shard_drain(&gw->shards[i]);
        }
    }
    gw_cur_shard = gw->nshards > 0 ? &gw->shards[0] : NULL;
}

void gw_shards_fini(struct gw *gw)
{
    gw_shards_quiesce(gw);
    gw_cur_shard = NULL;
    for (unsigned i = gw->nshards; i-- > 0;) {
        struct gw_shard *sh = &gw->shards[i];
        cw_context_destroy(sh->ctx);
        pthread_mutex_destroy(&sh->addr_lock);
        pthread_mutex_destroy(&sh->lock);
    }
    if (gw->threaded)
        pthread_mutex_destroy(&gw->lock);
    free(gw->shards);
    gw->shards = NULL;
    gw->nshards = 0;
    gw->ctx = NULL;
}

/* struct gw_counts is a run of uint64_t counters, summed as such. */
#define GW_NCOUNTS (sizeof(struct gw_counts) / sizeof(uint64_t))
_Static_assert(sizeof(struct gw_counts) == GW_NCOUNTS * sizeof(uint64_t),
               "struct gw_counts holds uint64_t counters only");

void gw_counts_sum(struct gw *gw, bool locked, struct gw_counts *c)
{
    uint64_t sum[GW_NCOUNTS] = {0}, one[GW_NCOUNTS];

    for (unsigned i = 0; i < gw->nshards; i++) {
        struct gw_shard *w = &gw->shards[i];

        if (!locked)
            gw_wlock(w);
        memcpy(one, &w->n, sizeof(one));
        if (!locked)
            gw_wunlock(w);
        for (size_t k = 0; k < GW_NCOUNTS; k++)
            sum[k] += one[k];
    }
    memcpy(c, sum, sizeof(sum));
}
