/*
 * Admission control: bounded RPCs in flight (total, per ingress network,
 * per route) and per-source fairness.  A request over a capacity bound
 * waits in a bounded FIFO (limits.max_queued_rpcs) for a slot; a full
 * queue, or a source over its fair share, gets CW_BUSY at once.  A queued
 * request whose deadline passes is answered CW_TIMEOUT; none is dropped.
 *
 * Fairness: a quarter of the total limit is kept for sources that have
 * nothing in flight yet, and the rest is shared equally among the sources
 * that do, so a flooding client hits CW_BUSY while a newcomer still gets
 * through and then holds its own share.
 */
#include "gw_int.h"

#include <stdlib.h>
#include <string.h>

static size_t gw_src_bucket(const char *key)
{
    return gw_hash(key) % GW_SRC_BUCKETS;
}

static struct gw_source *gw_source_find(struct gw *gw, const char *key)
{
    for (struct gw_source *s = gw->srcs[gw_src_bucket(key)]; s != NULL;
         s = s->next)
        if (strcmp(s->key, key) == 0)
            return s;
    return NULL;
}

cw_status_t gw_admit(struct gw *gw, struct gw_net *ingress,
                     struct gw_route_stats *rs, unsigned route_cap,
                     const char *src_key, struct gw_source **src_p)
{
    unsigned limit = gw->cfg->limits.max_inflight_rpcs;
    struct gw_source *s = gw_source_find(gw, src_key);
    size_t n;

    if (limit != 0 && gw->inflight >= limit)
        return CW_AGAIN;
    if (route_cap != 0 && rs->inflight >= route_cap)
        return CW_AGAIN;
    if (ingress != NULL && ingress->max_inflight != 0 &&
        ingress->inflight >= ingress->max_inflight)
        return CW_AGAIN;
    if (limit >= 4) {
        /* A quarter of the slots is kept for sources that are not active
         * yet; the rest is shared equally among the active ones. */
        unsigned reserve = limit / 4;
        unsigned active = gw->nsrcs + (s == NULL ? 1 : 0);
        unsigned share = (limit - reserve) / (active ? active : 1);
        if (share == 0)
            share = 1;
        if (s != NULL && s->inflight >= share)
            return CW_BUSY;
    }
    if (s == NULL) {
        n = strlen(src_key);
        s = malloc(sizeof(*s) + n + 1);
        if (s == NULL)
            return CW_NOMEM;
        memcpy(s->key, src_key, n + 1);
        s->inflight = 0;
        size_t b = gw_src_bucket(src_key);
        s->next = gw->srcs[b];
        gw->srcs[b] = s;
        gw->nsrcs++;
    }
    s->inflight++;
    *src_p = s;
    return CW_OK;
}

void gw_admit_done(struct gw *gw, struct gw_source *src)
{
    struct gw_source **pp;

    if (src == NULL || --src->inflight > 0)
        return;
    /* Idle sources are dropped so that the share is computed over the
     * sources that are active now. */
    for (pp = &gw->srcs[gw_src_bucket(src->key)]; *pp != NULL;
         pp = &(*pp)->next) {
        if (*pp == src) {
            *pp = src->next;
            free(src);
            gw->nsrcs--;
            return;
        }
    }
}

void gw_sources_fini(struct gw *gw)
{
    for (unsigned b = 0; b < GW_SRC_BUCKETS; b++) {
        while (gw->srcs[b] != NULL) {
            struct gw_source *s = gw->srcs[b];
            gw->srcs[b] = s->next;
            free(s);
        }
    }
    gw->nsrcs = 0;
}

/* ---- the wait queue ------------------------------------------------------ */

cw_status_t gw_queue_push(struct gw *gw, cw_handle_t *in)
{
    struct gw_queued *q;

    if (gw->nqueued >= gw->cfg->limits.max_queued_rpcs)
        return CW_BUSY;
    q = malloc(sizeof(*q));
    if (q == NULL)
        return CW_NOMEM;
    q->in = in;
    q->next = NULL;
    if (gw->queue_tail != NULL)
        gw->queue_tail->next = q;
    else
        gw->queue_head = q;
    gw->queue_tail = q;
    gw->nqueued++;
    return CW_OK;
}

static cw_handle_t *gw_queue_pop(struct gw *gw)
{
    struct gw_queued *q = gw->queue_head;
    cw_handle_t *in;

    if (q == NULL)
        return NULL;
    gw->queue_head = q->next;
    if (gw->queue_head == NULL)
        gw->queue_tail = NULL;
    gw->nqueued--;
    in = q->in;
    free(q);
    return in;
}

void gw_queue_run(struct gw *gw)
{
    unsigned limit = gw->cfg->limits.max_inflight_rpcs;
    unsigned n = gw->nqueued;

    /* One pass over what is queued now; a request that still finds no
     * slot goes back to the tail. */
    while (n-- > 0 && gw->queue_head != NULL &&
           (limit == 0 || gw->inflight < limit))
        gw_forward(gw, gw_queue_pop(gw), true);
}

void gw_queue_run_mt(struct gw *gw)
{
    unsigned n;

    pthread_mutex_lock(&gw->lock);
    n = gw->nqueued;
    pthread_mutex_unlock(&gw->lock);
    while (n-- > 0) {
        unsigned limit;
        cw_handle_t *in = NULL;

        pthread_mutex_lock(&gw->lock);
        limit = gw->cfg->limits.max_inflight_rpcs;
        if (gw->queue_head != NULL && (limit == 0 || gw->inflight < limit))
            in = gw_queue_pop(gw);
        pthread_mutex_unlock(&gw->lock);
        if (in == NULL)
            break;
        gw_forward_mt(gw, in, true);
    }
}

void gw_queue_expire(struct gw *gw, bool all, cw_status_t st)
{
    struct gw_queued **pp = &gw->queue_head;

    gw->queue_tail = NULL;
    while (*pp != NULL) {
        struct gw_queued *q = *pp;
        cw_status_t qst = st;
        if (!all && cw_handle_remaining_ms(q->in) > 0)
            qst = cw_handle_canceled(q->in) ? CW_CANCELED : CW_OK;
        if (qst != CW_OK) {
            *pp = q->next;
            gw->nqueued--;
            if (qst == CW_TIMEOUT)
                gw->n_timedout++;
            else
                gw->n_canceled++;
            gw_reject(gw, q->in, qst);
            free(q);
        } else {
            gw->queue_tail = q;
            pp = &q->next;
        }
    }
}
