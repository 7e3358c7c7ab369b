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
 *
 * With several workers each has its own sources and queue (a caller's
 * requests all reach one worker), and the bounds are shared: the slots
 * in flight (total, per network, per route) are taken with atomic
 * compare-and-swap, never past a bound; the shares are computed over the
 * sources of every worker.  A slot freed on one worker wakes the others
 * that have requests waiting (gw_queue_wake_others), and a request that
 * goes into a queue looks again at once (gw_forward_mt): no wake-up is
 * lost between them.
 *
 * Order: a source's requests to one route are forwarded in the order they
 * arrived.  A request does not take a free slot while an older one of its
 * source waits for its route (gw_older_waits); queued requests carry their
 * arrival number, and one that goes back to the queue goes back in that
 * order; a reload merges each source's lanes into one to be routed again
 * (gw_queue_relane).
 */
#include "gw_int.h"

#include <stdlib.h>
#include <string.h>

static void gw_sources_fini_one(struct gw_shard *w);

static void gw_source_free(struct gw_shard *w, struct gw_source *s);

/* The active source @p key (NULL if none: the parked one is not active,
 * gw_source_new takes it back). */
static struct gw_source *gw_source_find(struct gw_shard *w, const char *key)
{
    size_t len = strlen(key);
    /* Most requests come from the source that sent the last ones. */
    struct cw_hnode *n = cw_htable_find_recent(&w->srcs, key, len, 2);
    struct gw_source *s;

    if (n == NULL)
        n = cw_htable_find(&w->srcs, key, len);
    if (n == NULL)
        return NULL;
    s = CW_HNODE_ENTRY(n, struct gw_source, node);
    return s != w->parked ? s : NULL;
}

/* A new source, unless limits.max_sources hold requests already: every
 * active source has requests in flight or queued (gw_source_tidy), so
 * none can be dropped to make room, and the newcomer is refused
 * (*st_p = CW_BUSY, counted) until one finishes.  A request taken from the
 * queue (@p requeued) was admitted before and is not refused. */
static struct gw_source *gw_source_new(struct gw_shard *w, const char *key,
                                       bool requeued, cw_status_t *st_p)
{
    struct gw *gw = w->gw;
    unsigned max = gw->cfg->limits.max_sources;
    size_t n = strlen(key);
    struct gw_source *s;

    if (!requeued && max != 0 && gw->nsrcs >= max) {
        w->n.src_refused++;
        *st_p = CW_BUSY;
        return NULL;
    }
    s = w->parked;
    if (s != NULL && strcmp(s->key, key) == 0) {
        /* The source that went idle last comes back (a caller with one
         * request at a time goes idle after each): its record, still in
         * the table, and its address copy serve again. */
        w->parked = NULL;
        s->last_ns = 0;
        s->requests = 0; /* counted in its peer record (gw_peer_keep) */
        s->lcur = NULL;
        s->qprev = s->qnext = NULL;
    } else {
        s = malloc(sizeof(*s) + n + 1);
        if (s == NULL)
            goto err;
        memset(s, 0, sizeof(*s));
        memcpy(s->key, key, n + 1);
        if (cw_htable_insert(&w->srcs, &s->node, s->key, n) != CW_OK)
            goto err_free;
    }
    w->nsrcs++;
    gw->nsrcs++;
    return s;

err_free:
    free(s);
err:
    *st_p = CW_NOMEM;
    return NULL;
}

/* Remember idle source @p s for the admin's "peers": its record, made or
 * updated, becomes the newest; the least recently active go beyond
 * GW_PEERS_KEPT.  Out of memory, it is forgotten. */
static void gw_peer_keep(struct gw_shard *w, const struct gw_source *s)
{
    size_t n = strlen(s->key);
    /* An idle source that comes back and goes idle again is the newest. */
    struct cw_hnode *h = cw_htable_find_recent(&w->peers, s->key, n, 1);
    struct gw_peer *p;

    if (h == NULL)
        h = cw_htable_find(&w->peers, s->key, n);
    if (h != NULL) {
        p = CW_HNODE_ENTRY(h, struct gw_peer, node);
        cw_htable_touch(&w->peers, h);
    } else {
        p = malloc(sizeof(*p) + n + 1);
        if (p == NULL)
            return;
        p->requests = 0;
        memcpy(p->key, s->key, n + 1);
        if (cw_htable_insert(&w->peers, &p->node, p->key, n) != CW_OK) {
            free(p);
            return;
        }
    }
    p->last_ns = s->last_ns;
    p->requests += s->requests;
    while (cw_htable_count(&w->peers) > GW_PEERS_KEPT) {
        h = cw_htable_oldest(&w->peers);
        cw_htable_remove(&w->peers, h);
        free(CW_HNODE_ENTRY(h, struct gw_peer, node));
    }
}

/* Free @p s, out of w->srcs already. */
static void gw_source_free(struct gw_shard *w, struct gw_source *s)
{
    if (w->src_last == s)
        w->src_last = NULL;
    cw_addr_free(s->addr);
    free(s);
}

/* Take the parked source out of w->srcs and free it. */
static void gw_source_unpark(struct gw_shard *w)
{
    struct gw_source *s = w->parked;

    w->parked = NULL;
    cw_htable_remove(&w->srcs, &s->node);
    gw_source_free(w, s);
}

/* Drop @p s from the active sources once it holds nothing, so that shares
 * are computed over the sources active now.  It is parked (the one parked
 * before freed): it stays in w->srcs, counted nowhere, and its next
 * request, if it comes soon, finds it there. */
static void gw_source_tidy(struct gw_shard *w, struct gw_source *s)
{
    if (s->inflight > 0 || s->queued > 0)
        return;
    gw_peer_keep(w, s);
    w->nsrcs--;
    w->gw->nsrcs--;
    if (w->parked != NULL)
        gw_source_unpark(w);
    w->parked = s;
    if (s->lanes != NULL) /* emptied lanes are dropped: never here */
        gw_source_unpark(w);
}

void gw_sources_expire(struct gw *gw, uint64_t now, bool all)
{
    GW_ASSERT_WORKERS_LOCKED(gw);
    for (unsigned k = 0; k < gw->nshards; k++) {
        struct gw_shard *w = &gw->shards[k];

        /* last_ns is the worker's stamp, @p now the main thread's,
         * read before it took the workers' locks: a source admitted in
         * between is newer than @p now, not old. */
        if (w->parked != NULL &&
            (all || (now >= w->parked->last_ns &&
                     now - w->parked->last_ns >= GW_PARK_NS)))
            gw_source_unpark(w);
    }
}

/* Remember @p s, which request @p in comes from and which now holds it, as
 * the last admitted, with a copy of its address (without one, out of
 * memory, gw_source_key writes the string each time). */
static void gw_source_seen(struct gw_shard *w, struct gw_source *s,
                           cw_handle_t *in)
{
    if (s->addr == NULL)
        (void)cw_addr_dup(cw_handle_source(in), &s->addr);
    w->src_last = s;
}

const char *gw_source_key(struct gw_shard *w, cw_handle_t *in, char *buf,
                          size_t len)
{
    const cw_addr_t *a = cw_handle_source(in);
    const struct gw_source *s = w->src_last;

    /* Most requests come from the source of the last ones; a source in
     * the table holds requests, so its key stays until gw_forward is done
     * with it. */
    if (s != NULL && s->addr != NULL && cw_addr_cmp(s->addr, a))
        return s->key;
    if (cw_addr_to_string(a, buf, len) != CW_OK)
        buf[0] = '\0';
    return buf;
}

static struct gw_lane *gw_lane_find(struct gw_source *s,
                                    const struct gw_route_stats *rs)
{
    for (struct gw_lane *l = s->lanes; l != NULL; l = l->next)
        if (l->rs == rs)
            return l;
    return NULL;
}

/* Whether @p s has a request older than arrival number @p qseq (0: a new
 * request, younger than all) waiting for route @p rs, or waiting to be
 * routed again after a reload (it may be for @p rs). */
static bool gw_older_waits(const struct gw_source *s,
                           const struct gw_route_stats *rs, uint64_t qseq)
{
    for (const struct gw_lane *l = s->lanes; l != NULL; l = l->next)
        if ((l->rs == rs || l->rs == NULL) && l->qhead != NULL &&
            (qseq == 0 || l->qhead->seq < qseq))
            return true;
    return false;
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

/* Take one of the slots counted by @p c, bounded by @p cap (0: none):
 * never past the bound, whatever other workers do at the same time. */
static bool gw_slot_take(_Atomic unsigned *c, unsigned cap)
{
    unsigned v = atomic_load_explicit(c, memory_order_relaxed);

    if (cap == 0) {
        atomic_fetch_add(c, 1);
        return true;
    }
    do {
        if (v >= cap)
            return false;
    } while (!atomic_compare_exchange_weak(c, &v, v + 1));
    return true;
}

/* The total in flight (limits.max_inflight_rpcs) is counted in
 * gw->inflight, which every worker would otherwise write twice per
 * forward: a cache line passed between their cores, the cost that grew
 * with the workers.  A worker takes slots from it a batch at a time (its
 * lease) and its requests use them; it gives back what it does not use
 * beyond a few batches, and everything once it holds nothing or requests
 * wait in a queue, so that no slot idles in a lease while a request
 * waits, and gw->inflight is 0 whenever no request is in flight.  With
 * one worker, or a limit too small to split (fewer than 64 slots a
 * worker), the batch is one slot and nothing is kept: the exact count. */
void gw_lease_batch_set(struct gw *gw)
{
    unsigned limit = gw->cfg->limits.max_inflight_rpcs, b;

    if (gw->nshards < 2) {
        gw->lease_batch = 1;
        return;
    }
    b = limit != 0 ? limit / (gw->nshards * 32) : 64;
    gw->lease_batch = b > 64 ? 64 : (b ? b : 1);
}

static bool gw_total_take(struct gw_shard *w, unsigned limit)
{
    struct gw *gw = w->gw;
    unsigned want, n, v;

    if (w->held < w->lease) {
        w->held++;
        return true;
    }
    want = gw->nqueued != 0 ? 1 : gw->lease_batch;
    v = atomic_load_explicit(&gw->inflight, memory_order_relaxed);
    do {
        if (limit != 0 && v >= limit)
            return false;
        n = limit != 0 && limit - v < want ? limit - v : want;
    } while (!atomic_compare_exchange_weak(&gw->inflight, &v, v + n));
    w->lease += n;
    w->held++;
    return true;
}

void gw_total_put(struct gw_shard *w)
{
    struct gw *gw = w->gw;
    unsigned b = gw->lease_batch;
    unsigned keep = b > 1 && w->held > 1 && gw->nqueued == 0 ? 2 * b : 0;
    unsigned spare;

    w->held--;
    spare = w->lease - w->held;
    if (spare > keep) {
        atomic_fetch_sub(&gw->inflight, spare - keep);
        w->lease -= spare - keep;
    }
}

unsigned gw_inflight_now(const struct gw *gw)
{
    unsigned n = 0;

    for (unsigned k = 0; k < gw->nshards; k++)
        n += gw->shards[k].held;
    return n;
}

/* Admit one RPC from @p src_key on route @p rs: CW_OK, holding a slot in
 * flight in the total, its network's and its route's counts; CW_AGAIN
 * over a capacity bound (queue it); CW_BUSY over the source's fair
 * share. */
static cw_status_t gw_admit(struct gw_shard *w, struct gw_net *ingress,
                            struct gw_route_stats *rs, unsigned route_cap,
                            const char *src_key, uint64_t qseq, uint64_t now,
                            struct gw_source **src_p, unsigned *caps_p)
{
    struct gw *gw = w->gw;
    unsigned limit = gw->cfg->limits.max_inflight_rpcs;
    struct gw_source *s = gw_source_find(w, src_key);
    unsigned caps;
    cw_status_t st;

    /* Over its share the source is told at once, not queued. */
    if (s != NULL && s->inflight > 0 &&
        gw_over_share(limit, gw->nsrcs, s->inflight))
        return CW_BUSY;
    /* A slot freed by a completion is handed to the queue only at the end
     * of the pass: a request must not take it from its own source's older
     * requests to the same route (FIFO per source and route).  The oldest
     * of a lane, taken from it by the queue, is not held. */
    if (s != NULL && s->queued > 0 && gw_older_waits(s, rs, qseq))
        return CW_AGAIN;
    /* The shared counts of a route or network are taken only where it
     * has a limit; the per-worker ones (what the admin shows) always. */
    caps = (route_cap != 0 ? GW_CAP_ROUTE : 0) |
           (ingress != NULL && ingress->max_inflight != 0 ? GW_CAP_NET : 0);
    if (!gw_total_take(w, limit))
        return CW_AGAIN;
    if ((caps & GW_CAP_ROUTE) && !gw_slot_take(&rs->cap_held, route_cap)) {
        gw_total_put(w);
        return CW_AGAIN;
    }
    if ((caps & GW_CAP_NET) &&
        !gw_slot_take(&ingress->cap_held, ingress->max_inflight)) {
        if (caps & GW_CAP_ROUTE)
            rs->cap_held--;
        gw_total_put(w);
        return CW_AGAIN;
    }
    GW_CTR_INC(gw_rs_ctr(rs, w->idx)->inflight);
    if (ingress != NULL)
        GW_CTR_INC(ingress->per[w->idx].inflight);
    if (s == NULL && (s = gw_source_new(w, src_key, qseq != 0, &st)) == NULL) {
        gw_admit_undo(w, ingress, rs, NULL, caps);
        return st;
    }
    *caps_p = caps;
    s->inflight++;
    s->requests++;
    s->last_ns = now;
    *src_p = s;
    return CW_OK;
}

void gw_admit_undo(struct gw_shard *w, struct gw_net *ingress,
                   struct gw_route_stats *rs, struct gw_source *src,
                   unsigned caps)
{
    if (ingress != NULL) {
        GW_CTR_DEC(ingress->per[w->idx].inflight);
        if (caps & GW_CAP_NET)
            ingress->cap_held--;
    }
    GW_CTR_DEC(gw_rs_ctr(rs, w->idx)->inflight);
    if (caps & GW_CAP_ROUTE)
        rs->cap_held--;
    gw_total_put(w);
    gw_admit_done(w, src);
}

void gw_net_sum(const struct gw *gw, const struct gw_net *n,
                struct gw_net_sum *s)
{
    memset(s, 0, sizeof(*s));
    for (unsigned k = 0; k < gw->nshards; k++) {
        s->rx += GW_CTR_GET(n->per[k].rx);
        s->denied += GW_CTR_GET(n->per[k].denied);
        s->busy += GW_CTR_GET(n->per[k].busy);
    }
    s->inflight = gw_net_inflight(gw, n);
}

unsigned gw_net_inflight(const struct gw *gw, const struct gw_net *n)
{
    unsigned v = 0;

    for (unsigned k = 0; k < gw->nshards; k++)
        v += GW_CTR_GET(n->per[k].inflight);
    return v;
}

void gw_rs_sum(const struct gw *gw, const struct gw_route_stats *rs,
               struct gw_rs_sum *s)
{
    memset(s, 0, sizeof(*s));
    for (unsigned k = 0; k < gw->nshards; k++) {
        const struct gw_rs_ctr *c = &rs->per[k];
        s->forwarded += GW_CTR_GET(c->forwarded);
        s->failed += GW_CTR_GET(c->failed);
        s->timedout += GW_CTR_GET(c->timedout);
        s->denied += GW_CTR_GET(c->denied);
        s->busy += GW_CTR_GET(c->busy);
        s->canceled += GW_CTR_GET(c->canceled);
        s->lat_sum_ns += GW_CTR_GET(c->lat_sum_ns);
        s->lat_n += GW_CTR_GET(c->lat_n);
        for (unsigned b = 0; b < GW_HIST_BUCKETS; b++)
            s->hist[b] += GW_CTR_GET(c->hist[b]);
        s->inflight += GW_CTR_GET(c->inflight);
    }
}

void gw_admit_done(struct gw_shard *w, struct gw_source *src)
{
    if (src == NULL)
        return;
    src->inflight--;
    gw_source_tidy(w, src);
}

void gw_sources_fini(struct gw *gw)
{
    for (unsigned k = 0; k < gw->nshards; k++)
        gw_sources_fini_one(&gw->shards[k]);
    gw->nqsrcs = 0;
    gw->nqueued = 0;
    gw->nsrcs = 0;
}

static void gw_sources_fini_one(struct gw_shard *w)
{
    struct cw_hnode *n;

    while ((n = cw_htable_oldest(&w->srcs)) != NULL) {
        struct gw_source *s = CW_HNODE_ENTRY(n, struct gw_source, node);
        cw_htable_remove(&w->srcs, n);
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
        gw_source_free(w, s);
    }
    w->parked = NULL; /* freed with the others */
    cw_htable_fini(&w->srcs);
    while ((n = cw_htable_oldest(&w->peers)) != NULL) {
        cw_htable_remove(&w->peers, n);
        free(CW_HNODE_ENTRY(n, struct gw_peer, node));
    }
    cw_htable_fini(&w->peers);
    w->nsrcs = 0;
    w->qring = NULL;
    w->nqsrcs = 0;
    w->nqueued = 0;
}

/* ---- the wait queue ------------------------------------------------------ */

/* The ring of sources with queued requests; w->qring is served next, so a
 * source joins at the end of the round, just before it. */
static void gw_ring_join(struct gw_shard *w, struct gw_source *s)
{
    struct gw_source *first = w->qring;

    if (first == NULL) {
        s->qprev = s->qnext = s;
        w->qring = s;
    } else {
        s->qnext = first;
        s->qprev = first->qprev;
        first->qprev->qnext = s;
        first->qprev = s;
    }
    w->nqsrcs++;
    w->gw->nqsrcs++;
}

static void gw_ring_leave(struct gw_shard *w, struct gw_source *s)
{
    if (s->qnext == s) {
        w->qring = NULL;
    } else {
        s->qprev->qnext = s->qnext;
        s->qnext->qprev = s->qprev;
        if (w->qring == s)
            w->qring = s->qnext;
    }
    s->qprev = s->qnext = NULL;
    w->nqsrcs--;
    w->gw->nqsrcs--;
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
 * full.  @p qseq: 0 for a new request, which goes last; else the arrival
 * number of one taken from the queue, which goes back among that source's
 * requests to @p rs in arrival order (in front of them, unless it was
 * routed again after a reload, behind older ones moved there before). */
static cw_status_t gw_queue_push(struct gw_shard *w, cw_handle_t *in,
                                 const struct gw_net *ingress,
                                 const char *src_key, struct gw_route_stats *rs,
                                 unsigned route_cap, uint64_t qseq)
{
    struct gw *gw = w->gw;
    bool requeued = qseq != 0;
    unsigned limit = gw->cfg->limits.max_queued_rpcs;
    struct gw_source *s = gw_source_find(w, src_key);
    struct gw_lane *l = NULL;
    struct gw_queued *q, **pp;
    cw_status_t st;

    /* A request taken from the queue that still finds no slot goes back
     * where it was; only new ones are bounded. */
    if (!requeued &&
        (gw->nqueued >= limit || (s != NULL && s->queued > 0 &&
                                  gw_over_share(limit, gw->nqsrcs, s->queued))))
        return CW_BUSY;
    q = malloc(sizeof(*q));
    if (q == NULL)
        return CW_NOMEM;
    if (s == NULL && (s = gw_source_new(w, src_key, requeued, &st)) == NULL)
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
    q->in = in;
    q->net = ingress != NULL ? ingress->net : NULL;
    q->seq = requeued ? qseq : ++w->qseq;
    if (requeued) {
        for (pp = &l->qhead; *pp != NULL && (*pp)->seq < qseq;
             pp = &(*pp)->next)
            ;
        q->next = *pp;
        *pp = q;
        if (q->next == NULL)
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
        gw_ring_join(w, s);
    w->nqueued++;
    gw->nqueued++;
    return CW_OK;

err_tidy:
    gw_source_tidy(w, s);
    st = CW_NOMEM;
err_free_q:
    free(q);
    return st;
}

cw_status_t gw_admission(struct gw_shard *w, cw_handle_t *in,
                         struct gw_net *ingress, struct gw_route_stats *rs,
                         unsigned route_cap, const char *src_key, uint64_t qseq,
                         uint64_t now, struct gw_source **src_p,
                         unsigned *caps_p)
{
    cw_status_t st =
        gw_admit(w, ingress, rs, route_cap, src_key, qseq, now, src_p, caps_p);

    if (st == CW_OK) {
        gw_source_seen(w, *src_p, in);
        return CW_OK;
    }

    if (st == CW_AGAIN) {
        /* Over capacity: wait for a slot (bounded), else busy. */
        st = gw_queue_push(w, in, ingress, src_key, rs, route_cap, qseq);
        if (st == CW_OK) {
            if (qseq == 0)
                w->n.queued_total++;
            return CW_AGAIN;
        }
    }
    if (st != CW_OK) {
        w->n.busy++;
        GW_CTR_INC(gw_rs_ctr(rs, w->idx)->busy);
        if (ingress != NULL)
            GW_CTR_INC(ingress->per[w->idx].busy);
        /* A flood shows in the counts at once, in the log once a second. */
        CW_LOG_RL(CW_LOG_WARN, GW_LOG,
                  "overload: a request from %s answered %s (%u in flight, "
                  "%u queued, %u sources)",
                  src_key, cw_status_name(st), (unsigned)w->gw->inflight,
                  (unsigned)w->gw->nqueued, (unsigned)w->gw->nsrcs);
    }
    return st;
}

/* Whether the oldest request of @p l may find a slot on its route: it
 * waited for another bound (total, network), or the route has room, or
 * it is to be routed again after a reload. */
static bool gw_lane_open(const struct gw_lane *l)
{
    return l->rs == NULL || l->cap == 0 || l->rs->cap_held < l->cap;
}

/* Unlink the oldest request of lane @p l of @p s, for the caller to free;
 * the lane is dropped when empty, and the source if it holds nothing else
 * (gw_forward finds or makes it again). */
static struct gw_queued *gw_lane_pop(struct gw_shard *w, struct gw_source *s,
                                     struct gw_lane *l)
{
    struct gw_queued *q = l->qhead;

    l->qhead = q->next;
    if (l->qhead == NULL)
        gw_lane_drop(s, l);
    w->nqueued--;
    w->gw->nqueued--;
    if (--s->queued == 0)
        gw_ring_leave(w, s);
    gw_source_tidy(w, s);
    return q;
}

/* The next request of @p s: the oldest of those a reload left to be routed
 * again (*unrouted_p), else the next in turn among its lanes that are
 * open; NULL when every route it waits for is full.  At most one look per
 * lane. */
static struct gw_queued *gw_source_next(struct gw_shard *w, struct gw_source *s,
                                        bool *unrouted_p)
{
    struct gw_lane *first, *l = gw_lane_find(s, NULL);

    if (l != NULL) {
        *unrouted_p = true;
        return gw_lane_pop(w, s, l);
    }
    first = l = s->lcur != NULL ? s->lcur : s->lanes;
    do {
        if (gw_lane_open(l)) {
            s->lcur = l->next;
            *unrouted_p = false;
            return gw_lane_pop(w, s, l);
        }
        l = l->next != NULL ? l->next : s->lanes;
    } while (l != first);
    return NULL;
}

/* The next request in round-robin order, or NULL when none may go now;
 * a source with nothing that may go counts as a miss. */
static struct gw_queued *gw_queue_next(struct gw_shard *w, unsigned *misses,
                                       bool *unrouted_p)
{
    struct gw *gw = w->gw;
    unsigned limit = gw->cfg->limits.max_inflight_rpcs;

    if (limit != 0 && gw->inflight >= limit && w->held >= w->lease)
        return NULL;
    while (w->qring != NULL && *misses < w->nqsrcs) {
        struct gw_source *s = w->qring;
        struct gw_queued *q;

        w->qring = s->qnext; /* the next source goes next */
        q = gw_source_next(w, s, unrouted_p);
        if (q != NULL)
            return q;
        ++*misses;
    }
    return NULL;
}

/* Offer queued requests, one source after another, until there is no room
 * or a whole round finds none (each source's routes are full, or what it
 * offered went back to the queue: its network is still full).  Each
 * request is taken and forwarded under one hold of the worker's lock, so
 * that no new request of its source takes its slot in between. */
static unsigned gw_queue_round(struct gw_shard *w)
{
    static _Thread_local bool running;
    unsigned misses = 0, before, left = 0;
    struct gw_queued *q;
    cw_handle_t *in;
    uint64_t seq;
    bool unrouted = false;

    /* A forward that fails at once may end (gw_fwd_finish) on this thread
     * within gw_deferred_flush, and run the queue again: this loop goes on
     * instead. */
    if (running)
        return 0;
    running = true;
    for (;;) {
        gw_wlock(w);
        q = gw_queue_next(w, &misses, &unrouted);
        if (q != NULL) {
            in = q->in;
            seq = q->seq;
            free(q);
            before = w->nqueued;
            gw_forward(w, in, seq);
            /* Back in the queue is a miss, unless it only found its lane
             * after a reload. */
            if (w->nqueued > before) {
                misses = unrouted ? 0 : misses + 1;
            } else {
                misses = 0;
                left++;
            }
        }
        gw_wunlock(w);
        gw_deferred_flush();
        if (q == NULL)
            break;
    }
    running = false;
    return left;
}

unsigned gw_queue_run_mt(struct gw_shard *w)
{
    GW_ASSERT_UNLOCKED(w->gw, &w->lock);
    /* What it forwards to one next hop leaves together (coalescing), in
     * the pass of cw_trigger it runs in or a scope of its own. */
    void *scope = cw_context_batch_begin(w->ctx);
    unsigned left = gw_queue_round(w);

    cw_context_batch_end(w->ctx, scope);
    return left;
}

/* Offer a freed slot to the next worker in turn with requests waiting,
 * from @p w, whose offer has already passed @p hops workers. */
static void gw_queue_offer_from(struct gw_shard *w, unsigned hops)
{
    struct gw *gw = w->gw;
    unsigned n = gw->nshards, start;

    if (gw->nqueued == 0 || hops >= n)
        return;
    /* Round robin over the workers with requests waiting: the next turn
     * starts after the one taken now (workers racing here may both take
     * one; either way each gets its turn). */
    start = atomic_load(&gw->qturn);
    for (unsigned i = 0; i < n; i++) {
        struct gw_shard *t = &gw->shards[(start + i) % n];

        if (atomic_load(&t->nqueued) == 0)
            continue;
        atomic_store(&gw->qturn, (start + i + 1) % n);
        if (t == w) {
            if (gw_queue_run_mt(w) == 0)
                gw_queue_offer_from(w, hops + 1);
        } else {
            atomic_store(&t->kick, hops + 1);
            gw_shard_wake(t);
        }
        return;
    }
}

void gw_queue_offer(struct gw_shard *w)
{
    gw_queue_offer_from(w, 0);
}

void gw_queue_kicked(struct gw_shard *w)
{
    unsigned hops = atomic_exchange(&w->kick, 0);

    if (hops == 0)
        return;
    /* Nothing here could use it (its routes are full): the next one. */
    if (gw_queue_run_mt(w) == 0)
        gw_queue_offer_from(w, hops);
}

bool gw_queue_offered(struct gw *gw)
{
    for (unsigned k = 0; k < gw->nshards; k++)
        if (atomic_load(&gw->shards[k].kick) != 0)
            return true;
    return false;
}

void gw_queue_nudge(struct gw_shard *w)
{
    struct gw *gw = w->gw;

    GW_ASSERT_UNLOCKED(gw, &w->lock);
    /* An offer on its way goes on by itself; kicking every worker here
     * would let the one that is running anyway take the slot from the
     * one whose turn it is while that one is being woken (under load, a
     * wake-up takes longer than a housekeeping period). */
    if (atomic_load(&gw->nqueued) == 0 || gw_queue_offered(gw))
        return;
    gw_queue_offer_from(w, 0);
}

/* Merge the arrival-ordered request lists @p a and @p b. */
static struct gw_queued *gw_queued_merge(struct gw_queued *a,
                                         struct gw_queued *b)
{
    struct gw_queued *head = NULL, **tail = &head;

    while (a != NULL && b != NULL) {
        struct gw_queued **min = a->seq < b->seq ? &a : &b;
        *tail = *min;
        tail = &(*min)->next;
        *min = (*min)->next;
    }
    *tail = a != NULL ? a : b;
    return head;
}

/* A reload may route a destination through another lane: requests taken
 * from the old one and requeued one at a time would each go in front of
 * those moved before them, reversing them.  So every source's lanes become
 * one, in arrival order, served before its other lanes; each request is
 * routed again when its turn comes, and goes into its new lane in arrival
 * order (gw_queue_push). */
static void gw_queue_relane_one(struct gw_shard *w)
{
    struct gw_source *s = w->qring;

    for (unsigned n = w->nqsrcs; n-- > 0; s = s->qnext) {
        struct gw_lane *l = s->lanes, *o; /* not empty: it has queued ones */

        while ((o = l->next) != NULL) {
            l->qhead = gw_queued_merge(l->qhead, o->qhead);
            l->next = o->next;
            free(o);
        }
        l->rs = NULL;
        l->cap = 0;
        for (l->qtail = l->qhead; l->qtail->next != NULL;
             l->qtail = l->qtail->next)
            ;
        s->lcur = NULL;
    }
}

void gw_queue_relane(struct gw *gw)
{
    GW_ASSERT_LOCKED(gw, &gw->lock);
    for (unsigned k = 0; k < gw->nshards; k++)
        gw_queue_relane_one(&gw->shards[k]);
}

/* Answer the requests of lane @p l of @p s that expired (all of them with
 * @p all), or with @p net those that came in on it; the lane is left,
 * maybe empty, to the caller.  Returns how many were answered. */
static unsigned gw_lane_expire(struct gw_shard *w, struct gw_source *s,
                               struct gw_lane *l, bool all,
                               const cw_network_t *net, cw_status_t st)
{
    struct gw *gw = w->gw;
    struct gw_queued **pp = &l->qhead, *last = NULL;
    unsigned n = 0;

    while (*pp != NULL) {
        struct gw_queued *q = *pp;
        cw_status_t qst = st;
        if (net != NULL)
            qst = q->net == net ? st : CW_OK;
        else if (!all && cw_handle_remaining_ms(q->in) > 0)
            qst = cw_handle_canceled(q->in) ? CW_CANCELED : CW_OK;
        if (qst == CW_OK) {
            last = q;
            pp = &q->next;
            continue;
        }
        *pp = q->next;
        s->queued--;
        w->nqueued--;
        gw->nqueued--;
        if (qst == CW_TIMEOUT)
            w->n.timedout++;
        else if (qst == CW_CANCELED)
            w->n.canceled++;
        else
            w->n.noroute++; /* its network was removed (gw_forward) */
        gw_reject(gw, q->in, qst);
        free(q);
        n++;
    }
    l->qtail = last;
    return n;
}

static unsigned gw_queue_sweep_one(struct gw_shard *w, bool all,
                                   const cw_network_t *net, cw_status_t st)
{
    unsigned n = w->nqsrcs, answered = 0;
    struct gw_source *s = w->qring, *next;

    for (; n-- > 0; s = next) {
        struct gw_lane *l, *lnext;

        next = s->qnext;
        for (l = s->lanes; l != NULL; l = lnext) {
            lnext = l->next;
            answered += gw_lane_expire(w, s, l, all, net, st);
            if (l->qhead == NULL)
                gw_lane_drop(s, l);
        }
        if (s->queued == 0) {
            gw_ring_leave(w, s);
            gw_source_tidy(w, s);
        }
    }
    return answered;
}

static unsigned gw_queue_sweep(struct gw *gw, bool all, const cw_network_t *net,
                               cw_status_t st)
{
    unsigned answered = 0;

    for (unsigned k = 0; k < gw->nshards; k++)
        answered += gw_queue_sweep_one(&gw->shards[k], all, net, st);
    return answered;
}

void gw_queue_expire(struct gw *gw, bool all, cw_status_t st)
{
    GW_ASSERT_WORKERS_LOCKED(gw);
    (void)gw_queue_sweep(gw, all, NULL, st);
}

unsigned gw_queue_answer_net(struct gw *gw, const cw_network_t *net,
                             cw_status_t st)
{
    return gw_queue_sweep(gw, false, net, st);
}
