/*
 * Admission control: bounded RPCs in flight (total, per ingress network,
 * per route) and per-source fairness.  A request over a capacity bound
 * waits in a bounded queue (limits.max_queued_rpcs) for a slot; a full
 * queue, or a source over its fair share, gets CW_BUSY at once.  A queued
 * request whose deadline passes is answered CW_TIMEOUT; none is dropped.
 *
 * Fairness, in flight and in the queue alike: a quarter of the limit is
 * kept for sources that hold nothing yet, and the rest is shared equally
 * among the sources that do, so a flooding client hits CW_BUSY while a
 * newcomer still gets through and then holds its own share.  The queue is
 * one FIFO per source and route (a lane), the sources served in turn
 * (round robin) as slots free up, each from its next lane whose route has
 * room: a request waits behind its own source's earlier requests to the
 * same route, and behind at most one of each other source's per slot, not
 * behind a flood nor behind a full route it does not use.
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

static struct gw_source *gw_source_new(struct gw *gw, const char *key)
{
    size_t n = strlen(key), b = gw_src_bucket(key);
    struct gw_source *s = malloc(sizeof(*s) + n + 1);

    if (s == NULL)
        return NULL;
    memset(s, 0, sizeof(*s));
    memcpy(s->key, key, n + 1);
    s->next = gw->srcs[b];
    gw->srcs[b] = s;
    gw->nsrcs++;
    return s;
}

/* Drop @p s once it holds nothing, so that shares are computed over the
 * sources active now. */
static void gw_source_tidy(struct gw *gw, struct gw_source *s)
{
    struct gw_source **pp;

    if (s->inflight > 0 || s->queued > 0)
        return;
    for (pp = &gw->srcs[gw_src_bucket(s->key)]; *pp != NULL;
         pp = &(*pp)->next) {
        if (*pp == s) {
            *pp = s->next;
            free(s);
            gw->nsrcs--;
            return;
        }
    }
}

static struct gw_lane *gw_lane_find(struct gw_source *s,
                                    const struct gw_route_stats *rs)
{
    for (struct gw_lane *l = s->lanes; l != NULL; l = l->next)
        if (l->rs == rs)
            return l;
    return NULL;
}

/* Whether a source holding @p held of a @p limit shared by @p active
 * sources (itself included) is at its fair share. */
static bool gw_over_share(unsigned limit, unsigned active, unsigned held)
{
    unsigned reserve, share;

    if (limit < 4)
        return false;
    reserve = limit / 4;
    share = (limit - reserve) / (active ? active : 1);
    return held >= (share ? share : 1);
}

/* Admit one RPC from @p src_key on route @p rs: CW_OK; CW_AGAIN over a
 * capacity bound (queue it); CW_BUSY over the source's fair share. */
static cw_status_t gw_admit(struct gw *gw, struct gw_net *ingress,
                            struct gw_route_stats *rs, unsigned route_cap,
                            const char *src_key, bool requeued,
                            struct gw_source **src_p)
{
    unsigned limit = gw->cfg->limits.max_inflight_rpcs;
    struct gw_source *s = gw_source_find(gw, src_key);

    /* Over its share the source is told at once, not queued. */
    if (s != NULL && s->inflight > 0 &&
        gw_over_share(limit, gw->nsrcs, s->inflight))
        return CW_BUSY;
    if (limit != 0 && gw->inflight >= limit)
        return CW_AGAIN;
    if (route_cap != 0 && rs->inflight >= route_cap)
        return CW_AGAIN;
    if (ingress != NULL && ingress->max_inflight != 0 &&
        ingress->inflight >= ingress->max_inflight)
        return CW_AGAIN;
    /* A slot freed by a completion is handed to the queue only at the end
     * of the pass: a new request must not take it from its own source's
     * older requests to the same route (FIFO per source and route).  A
     * requeued one is the oldest of its lane. */
    if (!requeued && s != NULL && s->queued > 0 && gw_lane_find(s, rs) != NULL)
        return CW_AGAIN;
    if (s == NULL) {
        s = gw_source_new(gw, src_key);
        if (s == NULL)
            return CW_NOMEM;
    }
    s->inflight++;
    *src_p = s;
    return CW_OK;
}

void gw_admit_done(struct gw *gw, struct gw_source *src)
{
    if (src == NULL)
        return;
    src->inflight--;
    gw_source_tidy(gw, src);
}

void gw_sources_fini(struct gw *gw)
{
    for (unsigned b = 0; b < GW_SRC_BUCKETS; b++) {
        while (gw->srcs[b] != NULL) {
            struct gw_source *s = gw->srcs[b];
            gw->srcs[b] = s->next;
            while (s->lanes != NULL) { /* gw_queue_expire answered them */
                struct gw_lane *l = s->lanes;
                s->lanes = l->next;
                while (l->qhead != NULL) {
                    struct gw_queued *q = l->qhead;
                    l->qhead = q->next;
                    free(q);
                }
                free(l);
            }
            free(s);
        }
    }
    gw->nsrcs = 0;
    gw->qring = NULL;
    gw->nqsrcs = 0;
    gw->nqueued = 0;
}

/* ---- the wait queue ------------------------------------------------------ */

/* The ring of sources with queued requests; gw->qring is served next, so a
 * source joins at the end of the round, just before it. */
static void gw_ring_join(struct gw *gw, struct gw_source *s)
{
    struct gw_source *first = gw->qring;

    if (first == NULL) {
        s->qprev = s->qnext = s;
        gw->qring = s;
    } else {
        s->qnext = first;
        s->qprev = first->qprev;
        first->qprev->qnext = s;
        first->qprev = s;
    }
    gw->nqsrcs++;
}

static void gw_ring_leave(struct gw *gw, struct gw_source *s)
{
    if (s->qnext == s) {
        gw->qring = NULL;
    } else {
        s->qprev->qnext = s->qnext;
        s->qnext->qprev = s->qprev;
        if (gw->qring == s)
            gw->qring = s->qnext;
    }
    s->qprev = s->qnext = NULL;
    gw->nqsrcs--;
}

/* Unlink and free the empty lane @p l of @p s. */
static void gw_lane_drop(struct gw_source *s, struct gw_lane *l)
{
    struct gw_lane **pp = &s->lanes;

    while (*pp != l)
        pp = &(*pp)->next;
    *pp = l->next;
    if (s->lcur == l)
        s->lcur = l->next;
    free(l);
}

/* Queue a request from @p src_key over capacity, for route @p rs capped at
 * @p route_cap; CW_BUSY when the queue or the source's fair share of it is
 * full.  @p requeued: it was queued already and goes back in front of that
 * source's other requests to @p rs. */
static cw_status_t gw_queue_push(struct gw *gw, cw_handle_t *in,
                                 const char *src_key,
                                 struct gw_route_stats *rs,
                                 unsigned route_cap, bool requeued)
{
    unsigned limit = gw->cfg->limits.max_queued_rpcs;
    struct gw_source *s = gw_source_find(gw, src_key);
    struct gw_lane *l = NULL;
    struct gw_queued *q;

    /* A request taken from the queue that still finds no slot goes back
     * where it was; only new ones are bounded. */
    if (!requeued &&
        (gw->nqueued >= limit ||
         (s != NULL && s->queued > 0 &&
          gw_over_share(limit, gw->nqsrcs, s->queued))))
        return CW_BUSY;
    q = malloc(sizeof(*q));
    if (q == NULL)
        return CW_NOMEM;
    if (s == NULL && (s = gw_source_new(gw, src_key)) == NULL)
        goto err_free_q;
    if ((l = gw_lane_find(s, rs)) == NULL) {
        l = calloc(1, sizeof(*l));
        if (l == NULL)
            goto err_tidy;
        l->rs = rs;
        l->next = s->lanes;
        s->lanes = l;
    }
    /* What the request found full now, so that the queue looks at this
     * lane again only once that route has room (or the table changed). */
    l->cap = route_cap;
    l->gen = gw->reloads;
    q->in = in;
    if (requeued) {
        q->next = l->qhead;
        l->qhead = q;
        if (l->qtail == NULL)
            l->qtail = q;
    } else {
        q->next = NULL;
        if (l->qtail != NULL)
            l->qtail->next = q;
        else
            l->qhead = q;
        l->qtail = q;
    }
    if (s->queued++ == 0)
        gw_ring_join(gw, s);
    gw->nqueued++;
    return CW_OK;

err_tidy:
    gw_source_tidy(gw, s);
err_free_q:
    free(q);
    return CW_NOMEM;
}

cw_status_t gw_admission(struct gw *gw, cw_handle_t *in,
                         struct gw_net *ingress, struct gw_route_stats *rs,
                         unsigned route_cap, const char *src_key,
                         bool requeued, struct gw_source **src_p)
{
    cw_status_t st = gw_admit(gw, ingress, rs, route_cap, src_key, requeued,
                              src_p);

    if (st == CW_AGAIN) {
        /* Over capacity: wait for a slot (bounded), else busy. */
        st = gw_queue_push(gw, in, src_key, rs, route_cap, requeued);
        if (st == CW_OK) {
            if (!requeued)
                gw->n_queued_total++;
            return CW_AGAIN;
        }
    }
    if (st != CW_OK) {
        gw->n_busy++;
        rs->busy++;
        if (ingress != NULL)
            ingress->busy++;
    }
    return st;
}

/* Whether the oldest request of @p l may find a slot on its route: it
 * waited for another bound (total, network), or the route has room, or
 * the table was reloaded since (its route or cap may have changed). */
static bool gw_lane_open(const struct gw *gw, const struct gw_lane *l)
{
    return l->cap == 0 || l->rs->inflight < l->cap || l->gen != gw->reloads;
}

/* Unlink the oldest request of lane @p l of @p s; the lane is dropped when
 * empty, and the source if it holds nothing else (gw_forward finds or
 * makes it again). */
static cw_handle_t *gw_lane_pop(struct gw *gw, struct gw_source *s,
                                struct gw_lane *l)
{
    struct gw_queued *q = l->qhead;
    cw_handle_t *in = q->in;

    l->qhead = q->next;
    if (l->qhead == NULL)
        gw_lane_drop(s, l);
    free(q);
    gw->nqueued--;
    if (--s->queued == 0)
        gw_ring_leave(gw, s);
    gw_source_tidy(gw, s);
    return in;
}

/* The next request of @p s in turn among its lanes that are open, or NULL
 * when every route it waits for is full.  At most one look per lane. */
static cw_handle_t *gw_source_next(struct gw *gw, struct gw_source *s)
{
    struct gw_lane *first = s->lcur != NULL ? s->lcur : s->lanes, *l = first;

    do {
        if (gw_lane_open(gw, l)) {
            s->lcur = l->next;
            return gw_lane_pop(gw, s, l);
        }
        l = l->next != NULL ? l->next : s->lanes;
    } while (l != first);
    return NULL;
}

/* The next request in round-robin order, or NULL when none may go now;
 * a source with nothing that may go counts as a miss. */
static cw_handle_t *gw_queue_next(struct gw *gw, unsigned *misses)
{
    unsigned limit = gw->cfg->limits.max_inflight_rpcs;

    if (limit != 0 && gw->inflight >= limit)
        return NULL;
    while (gw->qring != NULL && *misses < gw->nqsrcs) {
        struct gw_source *s = gw->qring;
        cw_handle_t *in;

        gw->qring = s->qnext; /* the next source goes next */
        in = gw_source_next(gw, s);
        if (in != NULL)
            return in;
        ++*misses;
    }
    return NULL;
}

/* Offer queued requests, one source after another, until there is no room
 * or a whole round finds none (each source's routes are full, or what it
 * offered went back to the queue: its network is still full).  Threaded,
 * each request is taken and forwarded under one hold of gw->lock, so that
 * no new request of its source takes its slot in between. */
static void gw_queue_round(struct gw *gw, bool mt)
{
    static _Thread_local bool running;
    unsigned misses = 0, before;
    cw_handle_t *in;

    /* A forward that fails at once may end (gw_fwd_finish) on this thread
     * within gw_deferred_flush, and run the queue again: this loop goes on
     * instead. */
    if (running)
        return;
    running = true;
    for (;;) {
        if (mt)
            pthread_mutex_lock(&gw->lock);
        in = gw_queue_next(gw, &misses);
        if (in != NULL) {
            before = gw->nqueued;
            gw_forward(gw, in, true);
            misses = gw->nqueued > before ? misses + 1 : 0;
        }
        if (mt) {
            pthread_mutex_unlock(&gw->lock);
            gw_deferred_flush();
        }
        if (in == NULL)
            break;
    }
    running = false;
}

void gw_queue_run(struct gw *gw)
{
    gw_queue_round(gw, false);
}

void gw_queue_run_mt(struct gw *gw)
{
    gw_queue_round(gw, true);
}

/* Answer the requests of lane @p l of @p s that expired (all of them with
 * @p all); the lane is left, maybe empty, to the caller. */
static void gw_lane_expire(struct gw *gw, struct gw_source *s,
                           struct gw_lane *l, bool all, cw_status_t st)
{
    struct gw_queued **pp = &l->qhead, *last = NULL;

    while (*pp != NULL) {
        struct gw_queued *q = *pp;
        cw_status_t qst = st;
        if (!all && cw_handle_remaining_ms(q->in) > 0)
            qst = cw_handle_canceled(q->in) ? CW_CANCELED : CW_OK;
        if (qst == CW_OK) {
            last = q;
            pp = &q->next;
            continue;
        }
        *pp = q->next;
        s->queued--;
        gw->nqueued--;
        if (qst == CW_TIMEOUT)
            gw->n_timedout++;
        else
            gw->n_canceled++;
        gw_reject(gw, q->in, qst);
        free(q);
    }
    l->qtail = last;
}

void gw_queue_expire(struct gw *gw, bool all, cw_status_t st)
{
    unsigned n = gw->nqsrcs;
    struct gw_source *s = gw->qring, *next;

    for (; n-- > 0; s = next) {
        struct gw_lane *l, *lnext;

        next = s->qnext;
        for (l = s->lanes; l != NULL; l = lnext) {
            lnext = l->next;
            gw_lane_expire(gw, s, l, all, st);
            if (l->qhead == NULL)
                gw_lane_drop(s, l);
        }
        if (s->queued == 0) {
            gw_ring_leave(gw, s);
            gw_source_tidy(gw, s);
        }
    }
}
