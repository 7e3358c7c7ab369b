/*
 * The forward path, with one worker or many (threads.c).  A request runs
 * to completion on the worker whose endpoint it reached: gw_forward
 * (resolve, ACL, admission) under that worker's lock, then the send from
 * the worker's own queue once the lock is dropped (gw_fwd_send, on the
 * worker's context), the completion (gw_out_cb_mt) and the relay of the
 * answer with the bookkeeping (gw_fwd_finish), all on the same thread.
 * No other worker's state is touched and no process-wide lock is taken
 * per request: the worker's lock is contended only by the control plane
 * (reload, admin, health, drain), which takes it briefly.
 *
 * A worker's lock is never held across a plugin call on this path:
 * answers and sends decided under it are deferred (gw_reject,
 * gw_fwd_stage) and run by gw_deferred_flush once it is dropped.
 *
 * Order: a request is put in its worker's queue under the hold of the
 * lock that admitted it, and the worker sends only from that queue,
 * oldest first, so a source's requests to one route leave in the order
 * they were admitted (admission.c).  A reload changes the route table
 * under every worker's lock; a route that moves to another network still
 * leaves from the same worker, behind what was queued before.
 */
#include "gw_int.h"
#include "gw_bulk.h"

#include <stdlib.h>
#include <string.h>

/* Decided under a worker's lock (or the control plane's, gw_lock_all) on
 * this thread, done after it is dropped. */
static _Thread_local struct gw_queued *gw_answers, **gw_answers_tail;
static _Thread_local struct gw_queued *gw_fails; /* q->in is the out handle */
/* Whether gw_fwd_stage queued sends on this thread's worker. */
static _Thread_local bool gw_sends_self;

static void gw_fwd_send_work(struct gw_work *w);
static void gw_fwd_finish_work(struct gw_work *w);

void gw_reject(struct gw *gw, cw_handle_t *in, cw_status_t st)
{
    struct gw_queued *q;

    (void)gw;
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

void gw_fwd_stage(struct gw_fwd *f)
{
    GW_ASSERT_LOCKED(f->gw, &f->in_sh->lock);
    /* Staged on another thread than its worker's: counted, so that an
     * operator sees it (gw_forward runs on the worker; nothing does). */
    if (f->eg_sh != gw_shard_self())
        atomic_fetch_add_explicit(&f->gw->handoffs, 1, memory_order_relaxed);
    f->work.fn = gw_fwd_send_work;
    if (gw_shard_push(f->eg_sh, &f->work) && f->eg_sh != gw_shard_self())
        gw_shard_wake(f->eg_sh);
    else if (f->eg_sh == gw_shard_self())
        gw_sends_self = true;
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
        (void)cw_relay_fail(q->in, q->st);
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
    /* What this thread admitted leaves from its worker's queue, behind
     * what was queued there before. */
    if (gw_sends_self) {
        gw_sends_self = false;
        (void)gw_shard_drain(gw_shard_self());
    }
}

void gw_forward_mt(struct gw_shard *w, cw_handle_t *in, uint64_t qseq)
{
    gw_wlock(w);
    gw_forward(w, in, qseq);
    gw_wunlock(w);
    gw_deferred_flush();
    /* Requests wait here: one may have just gone in while another worker
     * freed a slot without seeing it yet (gw_queue_offer reads this
     * worker's count after its release): look again now, unless a slot is
     * being offered to a worker already, which passes it on to this one
     * if it cannot use it (taking it here would take it from its turn). */
    if (atomic_load(&w->nqueued) != 0 && !gw_queue_offered(w->gw))
        (void)gw_queue_run_mt(w);
}

void gw_forward_hook_mt(cw_handle_t *in, void *arg)
{
    gw_forward_mt(arg, in, 0);
}

static void gw_out_cb_mt(cw_handle_t *out, cw_status_t st, void *arg)
{
    struct gw_fwd *f = arg;

    (void)out;
    f->t_done = cw_now_pass_ns();
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

    /* The bulk tokens are shared with the bulk handlers (gw->lock). */
    gw_wlock(f->in_sh);
    gw_lock(gw);
    egress = gw_net_of(gw, cw_addr_network(next));
    f->out = out; /* gw_bulk_rewrite writes there; not sent yet */
    st = egress != NULL ? gw_bulk_rewrite(gw, f, f->in, egress, next)
                        : CW_UNREACHABLE;
    f->out = NULL;
    gw_unlock(gw);
    gw_wunlock(f->in_sh);
    return st;
}

void gw_fwd_send(struct gw_fwd *f)
{
    struct gw_shard *sh = f->eg_sh;
    cw_handle_t *out = NULL;
    cw_addr_t *cached = NULL, *next = NULL;
    bool cut;
    cw_status_t st;

    /* The cached address may be forgotten by another thread as soon as
     * the cache lock is dropped: the outgoing handle takes its own
     * reference before that, and the bulk rewrite, which needs it after,
     * one of its own. */
    gw_alock(sh);
    st = gw_addr_get(sh, f->next_addr, f->t_in, &cached);
    if (st == CW_OK)
        st = cw_relay_create_on(sh->ctx, f->in, cached,
                                f->dest[0] != '\0' ? f->dest : NULL, &out);
    if (st == CW_OK && cw_relay_desc_count(f->in) > 0)
        st = cw_addr_dup(cached, &next);
    gw_aunlock(sh);
    if (st == CW_OK && f->resume)
        st = cw_relay_set_resume(out);
    if (st == CW_OK && next != NULL)
        st = gw_fwd_send_bulk(f, out, next);
    cw_addr_free(next);
    if (st == CW_OK) {
        /* The clock itself: t_sent - t_in is the gateway's own time on the
         * way in (added_latency), which a pass reading would round to 0. */
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
    gw_wlock(sh);
    f->out = out;
    cut = f->cut;
    gw_wunlock(sh);
    if (cut)
        (void)cw_cancel(out);
}

static void gw_fwd_send_work(struct gw_work *w)
{
    gw_fwd_send(gw_fwd_of_work(w));
}

void gw_fwd_finish(struct gw_fwd *f)
{
    struct gw_shard *w = f->in_sh;
    cw_handle_t *in = f->in, *out = f->out;
    cw_status_t st = f->st, rst;
    uint64_t t_end;

    if (!f->send_failed && gw_fwd_resume_mt(f))
        return; /* sent again through another gateway (f->in kept) */
    if (f->send_failed) {
        gw_answer(in, st == CW_NOENT ? CW_UNREACHABLE : st);
        gw_wlock(w);
        gw_fwd_fail_account(f, st);
        f->in = NULL;
        gw_fwd_free(f);
        gw_wunlock(w);
        gw_queue_offer(w); /* the slot it held */
        return;
    }
    if (st == CW_CANCELED) {
        gw_wlock(w); /* gw_fwd_cancel_mt sets cut */
        if (f->cut)
            st = CW_TIMEOUT; /* limits.max_timeout, not the caller, ended it */
        gw_wunlock(w);
    }
    rst = cw_relay_respond(in, out, st, NULL, NULL);
    if (rst != CW_OK)
        CW_LOG_RL(CW_LOG_WARN, GW_LOG, "cannot relay the response: %s",
                  cw_status_str(rst));
    t_end = cw_now_ns(); /* the way back's own time (as t_sent) */
    gw_wlock(w);
    f->in = NULL;
    f->out = NULL; /* released below, outside the lock */
    gw_fwd_account(f, st, t_end);
    gw_wunlock(w);
    /* The outgoing handle first: across contexts it does not keep the
     * incoming one alive. */
    cw_handle_release(out);
    cw_handle_release(in);
    /* Its slot goes to a queue now: this worker's or, in turn, another
     * one's that has requests waiting. */
    gw_queue_offer(w);
}

static void gw_fwd_finish_work(struct gw_work *w)
{
    gw_fwd_finish(gw_fwd_of_work(w));
}

/* One worker's part of gw_fwd_cancel_mt. */
static void gw_fwd_cancel_one(struct gw_shard *w, bool all)
{
    struct gw *gw = w->gw;
    cw_handle_t **outs;
    unsigned n = 0, cap;
    uint64_t max, now;

    gw_wlock(w);
    /* A start that failed before any configuration was installed (a
     * network that could not be opened) stops here too. */
    max = gw->cfg != NULL ? gw->cfg->limits.max_timeout_ns : UINT64_MAX;
    /* Forwards are admitted on other threads: a clock read before taking
     * the lock could be older than a listed record's t_in and wrap
     * "now - t_in" (a fresh forward cut as if past limits.max_timeout). */
    now = cw_now_ns();
    cap = w->inflight;
    outs = cap > 0 ? malloc(cap * sizeof(*outs)) : NULL;
    struct nau_list *l;

    nau_list_for_each(l, &w->fwds)
    {
        struct gw_fwd *f = nau_container_of(l, struct gw_fwd, link);

        if (outs == NULL)
            break;
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
    gw_wunlock(w);
    /* Canceling tells the next hop (a plugin call): outside the lock. */
    for (unsigned i = 0; i < n; i++) {
        (void)cw_cancel(outs[i]);
        cw_handle_release(outs[i]);
    }
    free(outs);
}

void gw_fwd_cancel_mt(struct gw *gw, bool all)
{
    /* The main thread's scan: a coarse 10 ms one is enough for a limit in
     * milliseconds. */
    if (!all) {
        uint64_t now = cw_now_ns();

        if (now < gw->shards[0].next_cut_ns)
            return;
        gw->shards[0].next_cut_ns = now + 10000000ull;
    }
    for (unsigned k = 0; k < gw->nshards; k++)
        gw_fwd_cancel_one(&gw->shards[k], all);
}
