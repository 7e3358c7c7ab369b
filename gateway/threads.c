/*
 * gateway.threads > 1: helper threads that drive the networks' progress
 * while the main thread runs the completions (forward hook, responses,
 * admin, health).  All gateway state stays on the main thread; the core
 * context is thread-safe and hands completions over through its queue and
 * eventfd.
 */
#include "gw_int.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

static void *gw_thread_main(void *arg)
{
    struct gw *gw = arg;
    unsigned slice = gw->busy_poll ? 0 : 5;

    while (!atomic_load_explicit(&gw->threads_stop, memory_order_acquire)) {
        /* cw_progress returns at once while completions wait for the main
         * thread's trigger; yield then instead of spinning on the lock. */
        if (cw_progress(gw->ctx, slice) == CW_OK)
            sched_yield();
    }
    return NULL;
}

cw_status_t gw_threads_start(struct gw *gw, unsigned n)
{
    gw->threads = calloc(n, sizeof(*gw->threads));
    if (gw->threads == NULL)
        return CW_NOMEM;
    atomic_store(&gw->threads_stop, false);
    for (unsigned i = 0; i < n; i++) {
        int rc = pthread_create(&gw->threads[i], NULL, gw_thread_main, gw);
        if (rc != 0) {
            CW_ERROR(GW_LOG, "pthread_create() failed: %s", strerror(rc));
            return CW_NOMEM;
        }
        gw->nthreads++;
    }
    CW_LOG(CW_LOG_INFO, GW_LOG, "%u helper progress threads", n);
    return CW_OK;
}

void gw_threads_stop(struct gw *gw)
{
    atomic_store_explicit(&gw->threads_stop, true, memory_order_release);
    for (unsigned i = 0; i < gw->nthreads; i++)
        pthread_join(gw->threads[i], NULL);
    free(gw->threads);
    gw->threads = NULL;
    gw->nthreads = 0;
}
