/*
 * The forward path with gateway.threads > 1 (threads.c).  A request
 * arrives on its ingress shard A, whose thread runs gw_forward (resolve,
 * ACL, admission) under gw->lock; the record goes to the egress shard B,
 * whose thread creates the outgoing handle on B's context and sends
 * (gw_fwd_send).  B's cw_trigger completes it (gw_out_cb_mt) and hands it
 * back to A, which relays the response on A's network and does the
 * bookkeeping (gw_fwd_finish).  When A == B nothing is handed over.
 *
 * gw->lock is never held across a plugin call on this path: answers and
 * sends decided under it are deferred (gw_reject, gw_fwd_stage) and run by
 * gw_deferred_flush once it is dropped.
 *
 * Order: a request is put in its egress shard's queue under the hold of
 * gw->lock that admitted it, so each shard's queue holds its requests in
 * the order they were admitted, and a shard sends only from its queue,
 * oldest first (a request its own thread admitted too), so they leave in
 * that order: FIFO per source and route holds on the wire (admission.c).
 * A reload may move a route to another shard's network: a barrier
 * (gw_fwd_barrier) keeps the requests staged after it from leaving before
 * every shard has sent those staged before.
 */
#include "gw_int.h"
#include "gw_bulk.h"

#include <stdlib.h>
#include <string.h>

/* Decided under gw->lock on this thread, done after it is dropped. */
static _Thread_local struct gw_queued *gw_answers, **gw_answers_tail;
static _Thread_local struct gw_queued *gw_fails; /* q->in is the out handle */
/* Shards gw_fwd_stage found idle, and whether it handed this one work. */
static _Thread_local struct gw_shard *gw_wakes[GW_MAX_NETS];
static _Thread_local unsigned gw_nwakes;
static _Thread_local bool gw_sends_self;

static void gw_fwd_send_work(struct gw_work *w);
static void gw_fwd_finish_work(struct gw_work *w);

void gw_reject(struct gw *gw, cw_handle_t *in, cw_status_t st)
{
    struct gw_queued *q;

    if (!gw->threaded) {
        gw_answer(in, st);
        return;
    }
    q = malloc(sizeof(*q));
    if (q == NULL) {
        gw_answer(in, st); /* rare: answer under the lock rather than never */
        return;
    }
    q->in = in;
    q->st = st;
    q->next = NULL;
    if (gw_answers == NULL)
        gw_answers_tail = &gw_answers;
    *gw_answers_tail = q;
    gw_answers_tail = &q->next;
}

/* Push @p w on @p sh's queue now, under gw->lock; the wake-up, a system
 * call, waits until the lock is dropped (gw_deferred_flush). */
static void gw_stage_work(struct gw_shard *sh, struct gw_work *w)
{
    unsigned i = 0;
    bool idle = gw_shard_push(sh, w);

    if (sh == gw_shard_self()) {
        gw_sends_self = true;
        return;
    }
    if (!idle)
        return;
    while (i < gw_nwakes && gw_wakes[i] != sh)
        i++;
    if (i == gw_nwakes) /* at most one entry per shard */
        gw_wakes[gw_nwakes++] = sh;
}

void gw_fwd_stage(struct gw_fwd *f)
{
    struct gw_shard *self = gw_shard_self();

    f->in_sh = gw_shard_of_ctx(f->gw, cw_handle_context(f->in));
    if (f->eg_sh != self)
        atomic_fetch_add_explicit(&f->gw->handoffs, 1, memory_order_relaxed);
    f->work.fn = gw_fwd_send_work;
    f->epoch = f->gw->epoch;
    gw_stage_work(f->eg_sh, &f->work);
}

static void gw_barrier_pass(struct gw_work *w);

void gw_fwd_barrier(struct gw *gw)
{
    gw->epoch++;
    for (unsigned i = 0; i < gw->nshards; i++) {
        struct gw_shard *sh = &gw->shards[i];

        /* One still queued for an earlier reload goes again for this one
         * once it has run (gw_barrier_pass). */
        if (sh->mark_queued)
            continue;
        sh->mark_queued = true;
        sh->mark_epoch = gw->epoch;
        sh->mark.fn = gw_barrier_pass;
        gw_stage_work(sh, &sh->mark);
    }
}

/* On @p sh's thread, gw->lock held: every send staged on @p sh before
 * the epoch its last marker passed was run, and those not held were sent
 * (a shard's sends are in epoch order).  Raises gw->epoch_clear to the
 * lowest such epoch of all shards; true if it rose. */
static bool gw_barrier_update(struct gw *gw, struct gw_shard *sh)
{
    uint64_t clear = UINT64_MAX;

    sh->passed = sh->mark_passed;
    if (sh->held != NULL && gw_fwd_of_work(sh->held)->epoch < sh->passed)
        sh->passed = gw_fwd_of_work(sh->held)->epoch;
    for (unsigned i = 0; i < gw->nshards; i++)
        if (gw->shards[i].passed < clear)
            clear = gw->shards[i].passed;
    if (clear <= atomic_load_explicit(&gw->epoch_clear, memory_order_relaxed))
        return false;
    atomic_store_explicit(&gw->epoch_clear, clear, memory_order_release);
    return true;
}

/* The other shards may hold sends the barrier now lets go. */
static void gw_barrier_wake(struct gw *gw, struct gw_shard *sh)
{
    for (unsigned i = 0; i < gw->nshards; i++)
        if (&gw->shards[i] != sh)
            gw_shard_wake(&gw->shards[i]);
}

/* A shard's marker ran: every send staged on it before the reload of
 * sh->mark_epoch was run (sent, or held behind the barrier of an earlier
 * reload). */
static void gw_barrier_pass(struct gw_work *w)
{
    struct gw_shard *sh =
        (struct gw_shard *)(void *)((char *)w -
                                    offsetof(struct gw_shard, mark));
    struct gw *gw = sh->gw;
    bool raised;

    pthread_mutex_lock(&gw->lock);
    sh->mark_passed = sh->mark_epoch;
    if (sh->mark_epoch < gw->epoch) {
        /* Sends staged here since it was queued may still be behind it:
         * it vouches for the later reload from the end of the queue. */
        sh->mark_epoch = gw->epoch;
        gw_stage_work(sh, &sh->mark);
    } else {
        sh->mark_queued = false;
    }
    raised = gw_barrier_update(gw, sh);
    pthread_mutex_unlock(&gw->lock);
    if (raised)
        gw_barrier_wake(gw, sh);
    gw_deferred_flush(); /* its own queue, if it went again */
}

void gw_fwd_fail_later(cw_handle_t *out)
{
    struct gw_queued *q = malloc(sizeof(*q));

    if (q == NULL)
        return; /* the transport's own timeout ends it later */
    cw_handle_ref(out);
    q->in = out;
    q->st = CW_DISCONNECTED;
    q->next = gw_fails;
    gw_fails = q;
}

void gw_deferred_flush(void)
{
    while (gw_fails != NULL) {
        struct gw_queued *q = gw_fails;
        gw_fails = q->next;
        (void)cw_fwd_fail(q->in, q->st);
        cw_handle_release(q->in);
        free(q);
    }
    while (gw_answers != NULL) {
        struct gw_queued *q = gw_answers;
        gw_answers = q->next;
        gw_answer(q->in, q->st);
        free(q);
    }
    gw_answers_tail = NULL;
    while (gw_nwakes > 0)
        gw_shard_wake(gw_wakes[--gw_nwakes]);
    /* What this thread admitted for its own shard leaves from its queue
     * too, behind what other shards handed it before. */
    if (gw_sends_self) {
        gw_sends_self = false;
        (void)gw_shard_drain(gw_shard_self());
    }
}

void gw_forward_mt(struct gw *gw, cw_handle_t *in, uint64_t qseq)
{
    pthread_mutex_lock(&gw->lock);
    gw_forward(gw, in, qseq);
    pthread_mutex_unlock(&gw->lock);
    gw_deferred_flush();
}

void gw_forward_hook_mt(cw_handle_t *in, void *arg)
{
    struct gw_shard *sh = arg;

    gw_forward_mt(sh->gw, in, 0);
}

static void gw_out_cb_mt(cw_handle_t *out, cw_status_t st, void *arg)
{
    struct gw_fwd *f = arg;

    (void)out;
    f->t_done = cw_now_ns();
    f->st = st;
    f->work.fn = gw_fwd_finish_work;
    gw_shard_post(f->in_sh, &f->work);
}

/* Replace the descriptors of the request by proxy tokens written to
 * @p out (bulk_proxy_table.c). */
static cw_status_t gw_fwd_send_bulk(struct gw_fwd *f, cw_handle_t *out,
                                    cw_addr_t *next)
{
    struct gw *gw = f->gw;
    struct gw_net *egress = NULL;
    cw_status_t st;

    pthread_mutex_lock(&gw->lock);
    egress = gw_net_of(gw, cw_addr_network(next));
    f->out = out; /* gw_bulk_rewrite writes there; not sent yet */
    st = egress != NULL ? gw_bulk_rewrite(gw, f, f->in, egress, next)
                        : CW_UNREACHABLE;
    f->out = NULL;
    pthread_mutex_unlock(&gw->lock);
    return st;
}

void gw_fwd_send(struct gw_fwd *f)
{
    struct gw *gw = f->gw;
    struct gw_shard *sh = f->eg_sh;
    cw_handle_t *out = NULL;
    cw_addr_t *next = NULL;
    bool cut;
    cw_status_t st;

    /* The cached address may be forgotten by another thread as soon as
     * the cache lock is dropped: the outgoing handle takes its own
     * reference before that. */
    pthread_mutex_lock(&sh->addr_lock);
    st = gw_addr_get(sh, f->next_addr, &next);
    if (st == CW_OK)
        st = cw_fwd_create_on(sh->ctx, f->in, next,
                              f->dest[0] != '\0' ? f->dest : NULL, &out);
    if (st == CW_OK)
        st = cw_addr_dup(next, &next);
    else
        next = NULL;
    pthread_mutex_unlock(&sh->addr_lock);
    if (st == CW_OK && f->resume)
        st = cw_fwd_set_resume(out);
    if (st == CW_OK && cw_fwd_desc_count(f->in) > 0)
        st = gw_fwd_send_bulk(f, out, next);
    cw_addr_free(next);
    if (st == CW_OK) {
        f->t_sent = cw_now_ns();
        st = cw_forward(out, 0, gw_out_cb_mt, f);
    }
    if (st != CW_OK) {
        /* Never left: the ingress shard answers and counts it. */
        if (out != NULL)
            cw_handle_release(out);
        f->st = st;
        f->send_failed = true;
        f->work.fn = gw_fwd_finish_work;
        gw_shard_post(f->in_sh, &f->work);
        return;
    }
    /* From here the canceling scans (gw_fwd_cancel_mt) can see it. */
    pthread_mutex_lock(&gw->lock);
    f->out = out;
    cut = f->cut;
    pthread_mutex_unlock(&gw->lock);
    if (cut)
        (void)cw_cancel(out);
}

/* A send staged after a reload waits until every shard has sent those
 * staged before it, and the later ones of this shard wait behind it. */
static void gw_fwd_send_work(struct gw_work *w)
{
    struct gw_fwd *f = gw_fwd_of_work(w);
    struct gw_shard *sh = f->eg_sh;

    if (sh->held == NULL &&
        f->epoch <=
            atomic_load_explicit(&f->gw->epoch_clear, memory_order_acquire)) {
        gw_fwd_send(f);
        return;
    }
    w->next = NULL;
    if (sh->held == NULL)
        sh->held = w;
    else
        sh->held_tail->next = w;
    sh->held_tail = w;
}

bool gw_fwd_held_ready(struct gw_shard *sh)
{
    return sh->held != NULL &&
           gw_fwd_of_work(sh->held)->epoch <=
               atomic_load_explicit(&sh->gw->epoch_clear, memory_order_acquire);
}

void gw_fwd_held_run(struct gw_shard *sh)
{
    struct gw *gw = sh->gw;
    uint64_t clear =
        atomic_load_explicit(&gw->epoch_clear, memory_order_acquire);
    bool raised;

    while (sh->held != NULL && gw_fwd_of_work(sh->held)->epoch <= clear) {
        struct gw_work *w = sh->held;

        sh->held = w->next;
        gw_fwd_send(gw_fwd_of_work(w));
    }
    /* Sent: a later marker of this shard may vouch for more now. */
    if (sh->passed == sh->mark_passed)
        return;
    pthread_mutex_lock(&gw->lock);
    raised = gw_barrier_update(gw, sh);
    pthread_mutex_unlock(&gw->lock);
    if (raised)
        gw_barrier_wake(gw, sh);
}

void gw_fwd_finish(struct gw_fwd *f)
{
    struct gw *gw = f->gw;
    cw_handle_t *in = f->in, *out = f->out;
    cw_status_t st = f->st, rst;
    uint64_t t_end;
    bool queued;

    if (!f->send_failed && gw_fwd_resume_mt(f))
        return; /* sent again through another gateway (f->in kept) */
    if (f->send_failed) {
        gw_answer(in, st == CW_NOENT ? CW_UNREACHABLE : st);
        pthread_mutex_lock(&gw->lock);
        gw_fwd_fail_account(f, st);
        f->in = NULL;
        gw_fwd_free(f);
        queued = gw->nqueued != 0;
        pthread_mutex_unlock(&gw->lock);
        if (queued)
            gw_queue_run_mt(gw); /* the slot it held */
        return;
    }
    pthread_mutex_lock(&gw->lock); /* gw_fwd_cancel_mt sets cut */
    if (f->cut && st == CW_CANCELED)
        st = CW_TIMEOUT; /* limits.max_timeout, not the caller, ended it */
    pthread_mutex_unlock(&gw->lock);
    rst = cw_fwd_respond(in, out, st, NULL, NULL);
    if (rst != CW_OK)
        CW_LOG_RL(CW_LOG_WARN, GW_LOG, "cannot relay the response: %s",
                  cw_status_str(rst));
    t_end = cw_now_ns();
    pthread_mutex_lock(&gw->lock);
    f->in = NULL;
    f->out = NULL; /* released below, outside the lock */
    gw_fwd_account(f, st, t_end);
    queued = gw->nqueued != 0;
    pthread_mutex_unlock(&gw->lock);
    /* The outgoing handle first: across contexts it does not keep the
     * incoming one alive. */
    cw_handle_release(out);
    cw_handle_release(in);
    /* Its slot goes to the queue now, not at shard 0's next pass. */
    if (queued)
        gw_queue_run_mt(gw);
}

static void gw_fwd_finish_work(struct gw_work *w)
{
    gw_fwd_finish(gw_fwd_of_work(w));
}

void gw_fwd_cancel_mt(struct gw *gw, bool all)
{
    cw_handle_t **outs;
    unsigned n = 0, cap;
    uint64_t max, now;

    pthread_mutex_lock(&gw->lock);
    max = gw->cfg->limits.max_timeout_ns;
    /* Forwards are admitted on other threads: a clock read before taking
     * the lock could be older than a listed record's t_in and wrap
     * "now - t_in" (a fresh forward cut as if past limits.max_timeout). */
    now = cw_now_ns();
    if (!all) {
        /* A coarse 10 ms scan is enough for a limit in milliseconds. */
        if (now < gw->next_cut_ns) {
            pthread_mutex_unlock(&gw->lock);
            return;
        }
        gw->next_cut_ns = now + 10000000ull;
    }
    cap = gw->inflight;
    outs = cap > 0 ? malloc(cap * sizeof(*outs)) : NULL;
    for (struct gw_fwd *f = gw->fwds; f != NULL && outs != NULL; f = f->next) {
        if (!all) {
            if (f->cut || now < f->t_in || now - f->t_in < max)
                continue;
            f->cut = true; /* gw_fwd_send cancels it if not sent yet */
        }
        if (f->out != NULL && n < cap) {
            cw_handle_ref(f->out);
            outs[n++] = f->out;
        }
    }
    pthread_mutex_unlock(&gw->lock);
    /* Canceling tells the next hop (a plugin call): outside the lock. */
    for (unsigned i = 0; i < n; i++) {
        (void)cw_cancel(outs[i]);
        cw_handle_release(outs[i]);
    }
    free(outs);
}
