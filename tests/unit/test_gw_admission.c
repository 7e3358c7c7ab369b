/*
 * The gateway's admission queue (gateway/admission.c) against a fake
 * forward path: the test decides when requests arrive, when forwarded ones
 * complete and when the gateway loop hands freed slots to the queue
 * (gw_queue_run after each cw_trigger batch), so the order in which
 * requests reach the target is exact.  Two workers share the bounds, as
 * the threads of a gateway do: a source's requests reach one worker (its
 * name's first letter picks it), a slot freed on one worker goes to the
 * requests waiting on the other, and no wake-up is lost.  Every request
 * is forwarded or answered exactly once, and nothing leaks (run under
 * ASan).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gw_int.h"

#define MAX_REQS 64
#define NROUTES  2
#define NDESTS   2
#define NWORKERS 2

/* ---- the fake forward path ---------------------------------------------- */

/* A source address: its string.  A copy (cw_addr_dup) is allocated and
 * counted, so that the test sees each freed. */
struct cw_addr {
    const char *src;
    bool copy;
};

/* One incoming request: its source, its destination (routed by dest_route
 * below) and what became of it. */
struct cw_handle {
    unsigned id;
    const char *src;
    struct cw_addr addr; /* what cw_handle_source gives: src */
    unsigned dest;
    uint64_t remaining_ms;
    bool canceled;
    int answers; /* gw_reject */
    cw_status_t st;
    int forwarded; /* reached the target */
    bool done;     /* its forward completed */
    struct gw_source *source;
    struct gw_route_stats *rs;
    unsigned caps;      /* the limits it holds a slot of (GW_CAP_*) */
    struct gw_shard *w; /* the worker it reached */
};

static struct gw gw;
static struct gw_shard workers[NWORKERS];
static unsigned wakes[NWORKERS]; /* gw_shard_wake calls per worker */
static struct cw_config cfg;
static struct gw_route_stats routes[NROUTES];
static unsigned route_cap[NROUTES];
static unsigned dest_route[NDESTS]; /* the route table */
static struct cw_handle reqs[MAX_REQS];
static unsigned nreqs;
static unsigned sent[MAX_REQS]; /* ids in the order they reached the target */
static unsigned nsent;

static unsigned addr_copies;  /* live cw_addr_dup copies */
static unsigned addr_strings; /* cw_addr_to_string calls */

cw_addr_t *cw_handle_source(cw_handle_t *h)
{
    return &h->addr;
}

cw_status_t cw_addr_dup(cw_addr_t *addr, cw_addr_t **addr_p)
{
    cw_addr_t *c = malloc(sizeof(*c));

    if (c == NULL)
        return CW_NOMEM;
    *c = *addr;
    c->copy = true;
    addr_copies++;
    *addr_p = c;
    return CW_OK;
}

void cw_addr_free(cw_addr_t *addr)
{
    if (addr == NULL)
        return;
    assert_true(addr->copy);
    assert_true(addr_copies > 0);
    addr_copies--;
    free(addr);
}

bool cw_addr_cmp(const cw_addr_t *a, const cw_addr_t *b)
{
    return a != NULL && b != NULL && strcmp(a->src, b->src) == 0;
}

cw_status_t cw_addr_to_string(const cw_addr_t *addr, char *buf, size_t len)
{
    addr_strings++;
    if (strlen(addr->src) >= len)
        return CW_OVERFLOW;
    strcpy(buf, addr->src);
    return CW_OK;
}

uint64_t cw_handle_remaining_ms(cw_handle_t *h)
{
    return h->remaining_ms;
}

bool cw_handle_canceled(cw_handle_t *h)
{
    return h->canceled;
}

void gw_reject(struct gw *g, cw_handle_t *in, cw_status_t st)
{
    (void)g;
    in->answers++;
    in->st = st;
}

/* Threaded, forwards whose send fails at once (fail_at_once): they end on
 * this thread within gw_deferred_flush, as gw_fwd_finish does, and run the
 * queue again from inside the round that forwarded them. */
static bool fail_at_once;
static struct cw_handle *failing[MAX_REQS];
static unsigned nfailing;

/* A worker woken to run its queue (threads.c): it does at the end of its
 * next pass (pass() below). */
void gw_shard_wake(struct gw_shard *sh)
{
    wakes[sh->idx]++;
}

/* gw_fwd_free's admission part, on @p h's worker, and what gw_fwd_finish
 * does next. */
static void release_slot(struct cw_handle *h)
{
    struct gw_shard *w = h->w;

    gw_wlock(w);
    gw_admit_undo(w, NULL, h->rs, h->source, h->caps);
    h->done = true;
    gw_wunlock(w);
    gw_queue_offer(w); /* as gw_fwd_finish does */
}

void gw_deferred_flush(void)
{
    while (nfailing > 0)
        release_slot(failing[--nfailing]);
}

/* The batch scope a one-thread queue run opens (coalescing). */
static int scope_depth;

void *cw_context_batch_begin(cw_context_t *ctx)
{
    (void)ctx;
    scope_depth++;
    return NULL;
}

void cw_context_batch_end(cw_context_t *ctx, void *token)
{
    (void)ctx;
    (void)token;
    scope_depth--;
}

/* gateway/forward.c's gw_forward from the route lookup on: admission
 * (which takes the slots in flight) and the record of an admitted one. */
void gw_forward(struct gw_shard *w, cw_handle_t *in, uint64_t qseq)
{
    struct gw *g = w->gw;
    unsigned r = dest_route[in->dest];
    struct gw_source *source = NULL;
    unsigned caps = 0;
    cw_status_t st;

    assert_ptr_equal(w, in->w);
    /* A queued request leaves from a queue run, inside a batch scope, so
     * that several to one next hop go as one message. */
    if (qseq != 0)
        assert_true(scope_depth > 0);

    char buf[64];
    const char *key = gw_source_key(w, in, buf, sizeof(buf));

    /* The key is the source's string, found again or written. */
    assert_string_equal(key, in->src);
    st = gw_admission(w, in, NULL, &routes[r], route_cap[r], key, qseq,
                      cw_now_ns(), &source, &caps);
    if (st == CW_AGAIN)
        return;
    if (st != CW_OK) {
        gw_reject(g, in, st);
        return;
    }
    in->rs = &routes[r];
    in->caps = caps;
    assert_int_equal(caps, route_cap[r] != 0 ? GW_CAP_ROUTE : 0);
    in->source = source;
    in->forwarded++;
    assert_true(nsent < MAX_REQS);
    sent[nsent++] = in->id;
    if (fail_at_once && g->threaded && rand() % 3 == 0)
        failing[nfailing++] = in;
}

/* As forward_mt.c's: a request that went into the queue looks again,
 * unless a slot is being offered to a worker. */
void gw_forward_mt(struct gw_shard *w, cw_handle_t *in, uint64_t qseq)
{
    gw_wlock(w);
    gw_forward(w, in, qseq);
    gw_wunlock(w);
    gw_deferred_flush();
    if (w->nqueued != 0 && !gw_queue_offered(w->gw))
        (void)gw_queue_run_mt(w);
}

/* ---- what the gateway loop does ----------------------------------------- */

static void setup_gw(unsigned max_inflight, unsigned max_queued, bool threaded)
{
    memset(&gw, 0, sizeof(gw));
    memset(&cfg, 0, sizeof(cfg));
    memset(routes, 0, sizeof(routes));
    memset(reqs, 0, sizeof(reqs));
    memset(workers, 0, sizeof(workers));
    memset(wakes, 0, sizeof(wakes));
    nreqs = nsent = nfailing = 0;
    addr_strings = 0;
    cfg.limits.max_inflight_rpcs = max_inflight;
    cfg.limits.max_queued_rpcs = max_queued;
    gw.cfg = &cfg;
    gw.threaded = threaded;
    gw.shards = workers;
    gw.nshards = NWORKERS;
    gw_lease_batch_set(&gw);
    for (unsigned k = 0; k < NWORKERS; k++) {
        workers[k].gw = &gw;
        workers[k].idx = k;
        cw_mutex_init(&workers[k].lock);
    }
    if (threaded)
        cw_mutex_init(&gw.lock);
    for (unsigned i = 0; i < NROUTES; i++) {
        route_cap[i] = 0;
        dest_route[i] = i;
        routes[i].per = aligned_alloc(_Alignof(struct gw_rs_ctr),
                                      NWORKERS * sizeof(*routes[i].per));
        assert_non_null(routes[i].per);
        memset(routes[i].per, 0, NWORKERS * sizeof(*routes[i].per));
    }
}

static void lock_workers(void)
{
    for (unsigned k = 0; k < NWORKERS; k++)
        gw_wlock(&workers[k]);
}

static void unlock_workers(void)
{
    for (unsigned k = 0; k < NWORKERS; k++)
        gw_wunlock(&workers[k]);
}

static void teardown_gw(void)
{
    for (unsigned i = 0; i < nreqs; i++)
        assert_int_equal(reqs[i].forwarded + reqs[i].answers, 1);
    assert_int_equal(gw.nqueued, 0);
    assert_int_equal(gw.nsrcs, 0); /* every source tidied away */
    /* What is left is at most one parked source a worker, with its
     * address; the expiry frees them. */
    for (unsigned k = 0; k < NWORKERS; k++) {
        assert_int_equal(cw_htable_count(&workers[k].srcs),
                         workers[k].parked != NULL);
        if (workers[k].src_last != NULL)
            assert_ptr_equal(workers[k].src_last, workers[k].parked);
    }
    lock_workers();
    gw_sources_expire(&gw, 0, true);
    unlock_workers();
    assert_int_equal(addr_copies, 0); /* with its address */
    for (unsigned k = 0; k < NWORKERS; k++) {
        assert_null(workers[k].src_last);
        assert_null(workers[k].parked);
    }
    assert_int_equal(gw.inflight, 0);
    for (unsigned r = 0; r < NROUTES; r++) {
        struct gw_rs_sum c;
        gw_rs_sum(&gw, &routes[r], &c);
        assert_int_equal(c.inflight, 0);
        assert_int_equal(routes[r].cap_held, 0);
        free(routes[r].per);
        routes[r].per = NULL;
    }
    gw_sources_fini(&gw);
    for (unsigned k = 0; k < NWORKERS; k++)
        pthread_mutex_destroy(&workers[k].lock);
    if (gw.threaded)
        pthread_mutex_destroy(&gw.lock);
}

/* The worker a source's requests reach. */
static struct gw_shard *worker_of(const char *src)
{
    return &workers[(unsigned)(src[0] - 'A') % NWORKERS];
}

/* A request from @p src to @p dest arrives (the forward hook, run from
 * cw_trigger). */
static struct cw_handle *arrive(const char *src, unsigned dest)
{
    struct cw_handle *h = &reqs[nreqs];

    assert_true(nreqs < MAX_REQS);
    h->id = nreqs++;
    h->src = src;
    h->addr.src = src;
    h->dest = dest;
    h->remaining_ms = 10000;
    h->w = worker_of(src);
    gw_forward_mt(h->w, h, 0);
    return h;
}

/* The forward of @p h completes (gw_fwd_free's admission part); its
 * worker hands the slot to the queue at the end of its pass (pass()). */
static void complete(struct cw_handle *h)
{
    assert_int_equal(h->forwarded, 1);
    assert_false(h->done);
    release_slot(h);
}

/* The end of one pass of every worker's loop: freed slots go to the
 * queues (a worker another one woke runs its queue then too). */
static void pass(void)
{
    /* Threaded: until no worker has an offer left (a forward that fails
     * at once offers its slot on, maybe to a worker already past). */
    for (bool kicked = true; kicked;) {
        kicked = false;
        for (unsigned k = 0; k < NWORKERS; k++) {
            if (workers[k].kick != 0) {
                gw_queue_kicked(&workers[k]);
                kicked = true;
            }
        }
    }
}

/* A reload that changed the route table (gw_reload). */
static void reload(void)
{
    gw.reloads++;
    gw_queue_relane(&gw);
}

/* Complete what is in flight, one forward a pass, oldest first, until
 * everything was forwarded or answered. */
static void complete_all(void)
{
    for (unsigned guard = 0; guard < 4 * MAX_REQS; guard++) {
        unsigned i = 0;

        pass();
        while (i < nsent && reqs[sent[i]].done)
            i++;
        if (i == nsent) {
            if (gw.nqueued == 0)
                return;
            fail_msg("%u requests queued, none in flight", gw.nqueued);
        }
        complete(&reqs[sent[i]]);
    }
    fail_msg("the queue did not empty");
}

static void print_order(const char *what, const unsigned *ids, unsigned n)
{
    printf("# %s:", what);
    for (unsigned i = 0; i < n; i++)
        printf(" %u", ids[i]);
    printf("\n");
}

/* The ids of @p src's requests to @p dest in the order they reached the
 * target. */
static unsigned order_of(const char *src, unsigned dest, unsigned *ids)
{
    unsigned n = 0;

    for (unsigned i = 0; i < nsent; i++)
        if (strcmp(reqs[sent[i]].src, src) == 0 && reqs[sent[i]].dest == dest)
            ids[n++] = sent[i];
    return n;
}

static void assert_fifo(const char *src, unsigned dest)
{
    unsigned ids[MAX_REQS], n = order_of(src, dest, ids);

    if (!fail_at_once)
        print_order("reached the target", ids, n);
    for (unsigned i = 1; i < n; i++)
        if (ids[i] < ids[i - 1])
            fail_msg("%s's request %u to dest %u overtook its request %u", src,
                     ids[i], dest, ids[i - 1]);
}

/* ---- the tests ---------------------------------------------------------- */

/* A slot freed by a completion in one cw_trigger batch is taken by a new
 * request of the same batch before the queue runs at the end of the pass:
 * it must not overtake its own source's older requests to that route, and
 * the queue must hand the slot on in the same pass. */
static void run_new_behind_lane(bool threaded)
{
    struct cw_handle *h[6];
    unsigned n, third;

    setup_gw(0, 16, threaded);
    route_cap[0] = 2;
    for (unsigned i = 0; i < 5; i++)
        h[i] = arrive("A", 0);
    assert_int_equal(nsent, 2); /* 0, 1 in flight; 2, 3, 4 queued */
    assert_int_equal(gw.nqueued, 3);

    /* One batch: 0 completes, then 5 arrives; the pass ends. */
    complete(h[0]);
    h[5] = arrive("A", 0);
    pass();
    n = nsent;
    third = n >= 3 ? sent[2] : 0;
    complete_all();
    assert_int_equal(nsent, 6);
    assert_fifo("A", 0);
    /* The freed slot went to the oldest queued request, at once. */
    assert_int_equal(n, 3);
    assert_int_equal(third, 2);
    teardown_gw();
}

static void test_new_behind_lane(void **state)
{
    (void)state;
    run_new_behind_lane(false);
}

static void test_new_behind_lane_threads(void **state)
{
    (void)state;
    run_new_behind_lane(true);
}

/* A source's key is written once while it holds requests: the requests
 * after the first find it by its address (gw_source_key), until another
 * source's comes between or it goes idle. */
static void test_source_key_kept(void **state)
{
    (void)state;
    setup_gw(0, 16, false);
    for (unsigned i = 0; i < 4; i++)
        arrive("A", 0);
    assert_int_equal(addr_strings, 1);
    assert_int_equal(addr_copies, 1);
    arrive("C", 0); /* A and C share worker 0 */
    arrive("A", 0);
    assert_int_equal(addr_strings, 3);
    assert_int_equal(addr_copies, 2);
    complete_all();
    /* Both idle: A went idle last and is parked with its copy; C's
     * record and copy are freed. */
    assert_int_equal(addr_copies, 1);
    assert_int_equal(gw.nsrcs, 0);
    assert_non_null(workers[0].parked);
    assert_string_equal(workers[0].parked->key, "A");
    /* A comes back: its key and its address copy serve again. */
    arrive("A", 0);
    assert_int_equal(addr_strings, 3);
    assert_int_equal(addr_copies, 1);
    assert_null(workers[0].parked);
    assert_int_equal(gw.nsrcs, 1);
    complete_all();
    /* C comes back instead: its key is written and copied again. */
    arrive("C", 0);
    assert_int_equal(addr_strings, 4);
    complete_all();
    teardown_gw();
}

/* A caller with one request at a time goes idle after each: its record is
 * parked, not freed, and found again by its next request; a parked source
 * is not counted among the active ones (shares, limits.max_sources), and
 * the expiry frees it only once it has been idle for GW_PARK_NS. */
static void test_parked_source(void **state)
{
    struct gw_source *s;
    struct cw_handle *h;
    (void)state;
    setup_gw(0, 16, false);
    cfg.limits.max_sources = 1;
    for (unsigned i = 0; i < 50; i++) {
        h = arrive("A", 0);
        assert_int_equal(h->forwarded, 1);
        assert_int_equal(gw.nsrcs, 1);
        complete(h);
        pass();
        assert_int_equal(gw.nsrcs, 0);
        assert_non_null(workers[0].parked);
    }
    /* One record, one address copy and one key written for all 50. */
    assert_int_equal(addr_strings, 1);
    assert_int_equal(addr_copies, 1);
    /* A parked source holds no place under max_sources: another source
     * (on the same worker) is admitted, and the parked one is freed when
     * that one goes idle in its turn. */
    h = arrive("C", 0);
    assert_int_equal(h->forwarded, 1);
    assert_int_equal(h->answers, 0);
    complete(h);
    pass();
    assert_string_equal(workers[0].parked->key, "C");
    assert_int_equal(addr_copies, 1);
    /* Not expired before GW_PARK_NS after its last admission, nor by a
     * clock read before it (the main thread reads its clock before it
     * takes the workers' locks; the worker may stamp a later time). */
    s = workers[0].parked;
    assert_true(s->last_ns > 0);
    lock_workers();
    gw_sources_expire(&gw, s->last_ns - 1, false);
    unlock_workers();
    assert_ptr_equal(workers[0].parked, s);
    lock_workers();
    gw_sources_expire(&gw, s->last_ns + GW_PARK_NS - 1, false);
    unlock_workers();
    assert_ptr_equal(workers[0].parked, s);
    lock_workers();
    gw_sources_expire(&gw, s->last_ns + GW_PARK_NS, false);
    unlock_workers();
    assert_null(workers[0].parked);
    assert_null(workers[0].src_last);
    assert_int_equal(addr_copies, 0);
    /* And C's next request starts afresh. */
    h = arrive("C", 0);
    assert_int_equal(h->forwarded, 1);
    assert_int_equal(addr_strings, 3);
    complete(h);
    pass();
    teardown_gw();
}

/* The ordering is per source and route: a source's new request to a route
 * with room goes at once while its requests to a full route wait, and so
 * does another source's. */
static void test_other_route_not_held(void **state)
{
    struct cw_handle *a, *b;

    (void)state;
    setup_gw(0, 16, false);
    route_cap[0] = 1;
    for (unsigned i = 0; i < 3; i++)
        arrive("A", 0);
    assert_int_equal(gw.nqueued, 2);
    a = arrive("A", 1);
    b = arrive("B", 1);
    assert_int_equal(a->forwarded, 1);
    assert_int_equal(b->forwarded, 1);
    complete_all();
    assert_fifo("A", 0);
    teardown_gw();
}

/* Two routes capped at 1 RPC in flight; source A sends @p n requests to
 * destination 0 (route 0): the first goes, the others wait. */
static void setup_queued_on_route0(unsigned n)
{
    setup_gw(0, 16, false);
    route_cap[0] = 1;
    route_cap[1] = 1;
    for (unsigned i = 0; i < n; i++)
        arrive("A", 0);
    assert_int_equal(gw.nqueued, n - 1);
}

/* A reload moves a destination with queued requests to another route,
 * which is full: the requests move to their source's lane of that route,
 * and must keep their order. */
static void test_reload_keeps_order(void **state)
{
    struct cw_handle *b;

    (void)state;
    setup_queued_on_route0(5); /* 0 in flight on route 0; 1..4 queued */
    b = arrive("B", 1);        /* route 1 full */
    assert_int_equal(b->forwarded, 1);
    assert_int_equal(gw.nqueued, 4);

    dest_route[0] = 1; /* A's destination now goes through route 1 */
    reload();
    for (unsigned i = 0; i < 8; i++)
        pass(); /* the queued requests find route 1 full */
    assert_int_equal(nsent, 2);
    complete_all();
    assert_int_equal(nsent, 6);
    assert_fifo("A", 0);
    teardown_gw();
}

/* After the reload, a new request of the same source to the moved
 * destination must not overtake the older ones still to be moved. */
static void test_reload_new_behind_moved(void **state)
{
    (void)state;
    setup_queued_on_route0(4); /* 0 in flight on route 0; 1..3 queued */
    dest_route[0] = 1;         /* route 1 is empty */
    reload();
    arrive("A", 0); /* before the queue ran */
    complete_all();
    assert_int_equal(nsent, 5);
    assert_fifo("A", 0);
    teardown_gw();
}

/* The queue bounds still hold for a request that queues behind its lane,
 * and a queued request past its deadline is answered once, CW_TIMEOUT,
 * without disturbing the order of the others. */
static void test_bounds_and_expiry(void **state)
{
    struct cw_handle *h[6];

    (void)state;
    setup_gw(0, 3, false);
    route_cap[0] = 1;
    for (unsigned i = 0; i < 4; i++)
        h[i] = arrive("A", 0); /* 0 in flight, 1..3 queued: full */
    h[4] = arrive("A", 0);     /* the queue is full */
    assert_int_equal(h[4]->answers, 1);
    assert_int_equal(h[4]->st, CW_BUSY);
    complete(h[0]); /* its slot goes to 1 at once */
    assert_int_equal(h[1]->forwarded, 1);
    h[2]->remaining_ms = 0;
    gw_queue_expire(&gw, false, CW_TIMEOUT);
    assert_int_equal(h[2]->answers, 1);
    assert_int_equal(h[2]->st, CW_TIMEOUT);
    h[5] = arrive("A", 0);
    assert_int_equal(h[5]->forwarded, 0);
    complete_all();
    assert_int_equal(nsent, 4); /* 0, 1, 3, 5 */
    assert_fifo("A", 0);
    teardown_gw();
}

/* Two workers share the total bound: a slot freed on worker 1 ("B") goes
 * to the request waiting on worker 0 ("A"), whose worker is woken for it;
 * the bound is never passed. */
static void test_slot_to_other_worker(void **state)
{
    struct cw_handle *b0, *a0, *a1;

    (void)state;
    setup_gw(1, 16, true);
    b0 = arrive("B", 0); /* worker 1: the only slot */
    a0 = arrive("A", 1); /* worker 0: waits */
    assert_int_equal(b0->forwarded, 1);
    assert_int_equal(a0->forwarded, 0);
    assert_int_equal(workers[0].nqueued, 1);
    assert_int_equal(gw.inflight, 1);
    wakes[0] = 0;
    complete(b0); /* on worker 1 */
    assert_int_equal(wakes[0], 1);
    assert_int_equal(a0->forwarded, 0); /* until worker 0 runs */
    pass();
    assert_int_equal(a0->forwarded, 1);
    assert_int_equal(gw.inflight, 1);
    /* A request that queues on worker 0 while the slot is held, then
     * arrives after it was freed without a wake-up (the race the re-check
     * in gw_forward_mt closes): both go, in order. */
    a1 = arrive("A", 1);
    assert_int_equal(a1->forwarded, 0);
    gw_wlock(a0->w);
    /* freed, nobody woken yet */
    gw_admit_undo(a0->w, NULL, a0->rs, a0->source, a0->caps);
    a0->done = true;
    gw_wunlock(a0->w);
    arrive("A", 1);
    assert_int_equal(a1->forwarded, 1);
    complete_all();
    assert_fifo("A", 1);
    teardown_gw();
}

/* A slot offered to another worker's queue in its turn is not taken by a
 * request that arrives meanwhile on the worker that freed it (a flood
 * whose answers bring its next calls at once would otherwise take every
 * slot from a caller queued elsewhere). */
static void test_offer_not_stolen(void **state)
{
    struct cw_handle *a0, *a1, *b0;

    (void)state;
    setup_gw(1, 16, true);
    a0 = arrive("A", 0); /* worker 0: the only slot */
    b0 = arrive("B", 0); /* worker 1: waits */
    a1 = arrive("A", 0); /* worker 0: waits */
    gw.qturn = 1;        /* worker 1's turn */
    complete(a0);
    assert_int_equal(workers[1].kick, 1);
    arrive("A", 0); /* the flood's next call, on worker 0 */
    assert_int_equal(a1->forwarded, 0);
    assert_int_equal(b0->forwarded, 0);
    pass();
    assert_int_equal(b0->forwarded, 1);
    assert_int_equal(a1->forwarded, 0);
    complete_all();
    assert_fifo("A", 0);
    teardown_gw();
}

/* The housekeeping's periodic offer (gw_queue_nudge) leaves an offer on
 * its way alone: run by the worker that freed the slot while the worker
 * whose turn it is has not woken yet, it does not let the former take
 * it (before 2026-11-29 it kicked every worker, and the one already
 * running won: a caller queued on a slow-to-wake worker timed out behind
 * a flood in gw-busy-threads under load).  A slot freed with no offer
 * made goes to the worker whose turn it is. */
static void test_nudge_keeps_turn(void **state)
{
    struct cw_handle *a0, *a1, *b0, *b1;

    (void)state;
    setup_gw(1, 16, true);
    a0 = arrive("A", 0); /* worker 0: the only slot */
    b0 = arrive("B", 0); /* worker 1: waits */
    a1 = arrive("A", 0); /* worker 0: waits */
    gw.qturn = 1;
    complete(a0);
    assert_int_equal(workers[1].kick, 1);
    gw_queue_nudge(&workers[0]); /* worker 1 not woken yet */
    assert_int_equal(workers[0].kick, 0);
    assert_int_equal(a1->forwarded, 0);
    pass();
    assert_int_equal(b0->forwarded, 1);
    assert_int_equal(a1->forwarded, 0);
    /* b0's slot freed with no offer (as if the offer had found no
     * request yet): the nudge gives it to worker 0, whose turn it is. */
    b1 = arrive("B", 0);
    gw_wlock(b0->w);
    gw_admit_undo(b0->w, NULL, b0->rs, b0->source, b0->caps);
    b0->done = true;
    gw_wunlock(b0->w);
    assert_int_equal(gw.qturn, 0);
    gw_queue_nudge(&workers[1]);
    assert_int_equal(workers[0].kick, 1);
    pass();
    assert_int_equal(a1->forwarded, 1);
    assert_int_equal(b1->forwarded, 0);
    complete_all();
    assert_fifo("A", 0);
    assert_fifo("B", 0);
    teardown_gw();
}

/* Random arrivals from three sources, completions, passes, reloads that
 * move destinations and change caps, expiry, and (threaded) forwards that
 * fail at once: every request is forwarded or answered once, a source's
 * requests to one destination reach the target in arrival order, and a
 * pass leaves nothing that a second pass would forward. */
static void run_random(unsigned seed, bool threaded)
{
    static const char *const srcs[] = {"A", "B", "C"};

    srand(seed);
    setup_gw(1 + (unsigned)rand() % 6, 4 + (unsigned)rand() % 12, threaded);
    route_cap[0] = (unsigned)rand() % 3;
    route_cap[1] = (unsigned)rand() % 3;
    for (unsigned step = 0; step < 400 && nreqs < MAX_REQS; step++) {
        int op = rand() % 10;
        unsigned before;

        if (op < 4) {
            arrive(srcs[rand() % 3], (unsigned)rand() % NDESTS);
        } else if (op < 7) {
            for (unsigned i = 0; i < nsent; i++) {
                if (!reqs[sent[i]].done && rand() % 2) {
                    complete(&reqs[sent[i]]);
                    break;
                }
            }
        } else if (op < 8) {
            pass();
            before = nsent;
            pass();
            if (nsent != before)
                fail_msg("seed %u: a pass left %u requests that could go", seed,
                         nsent - before);
        } else if (op < 9) {
            dest_route[rand() % NDESTS] = (unsigned)rand() % NROUTES;
            route_cap[rand() % NROUTES] = (unsigned)rand() % 3;
            gw_lock_all(&gw);
            reload();
            gw_unlock_all(&gw);
        } else if (nreqs > 0) {
            reqs[rand() % nreqs].remaining_ms = 0;
            gw_lock_all(&gw);
            gw_queue_expire(&gw, false, CW_TIMEOUT);
            gw_unlock_all(&gw);
        }
    }
    complete_all();
    for (unsigned a = 0; a < 3; a++)
        for (unsigned d = 0; d < NDESTS; d++)
            assert_fifo(srcs[a], d);
    teardown_gw();
}

/* Workers take slots of the total in batches (gw_total_take): a forward
 * does not write the shared count; spare slots stay within two batches,
 * all go back once the worker holds nothing, and none is kept while
 * requests wait in a queue. */
static void test_total_lease(void **state)
{
    struct cw_handle *h[4];

    (void)state;
    setup_gw(128, 16, true); /* a batch: 128 / (2 workers x 32) = 2 */
    for (unsigned i = 0; i < 3; i++)
        h[i] = arrive("A", 0);
    assert_int_equal(gw_inflight_now(&gw), 3);
    assert_int_equal(gw.inflight, 4); /* two batches */
    complete(h[0]);
    complete(h[1]);
    assert_int_equal(gw_inflight_now(&gw), 1);
    assert_int_equal(gw.inflight, 4); /* a spare batch kept */
    complete(h[2]);
    assert_int_equal(gw.inflight, 0); /* nothing held: all given back */

    route_cap[0] = 1;
    h[0] = arrive("A", 0);
    h[1] = arrive("A", 0); /* waits: the route is full */
    assert_int_equal(h[1]->forwarded, 0);
    assert_int_equal(gw.nqueued, 1);
    h[2] = arrive("B", 1); /* worker 1 */
    h[3] = arrive("A", 1);
    assert_int_equal(h[3]->forwarded, 1);
    complete(h[3]); /* a request waits: no spare kept */
    assert_int_equal(gw.inflight, gw_inflight_now(&gw));
    complete(h[0]); /* the route's slot: h[1] goes */
    pass();
    assert_int_equal(h[1]->forwarded, 1);
    complete_all();
    assert_fifo("A", 0);
    teardown_gw();
}

static void test_random(void **state)
{
    (void)state;
    fail_at_once = true;
    for (unsigned seed = 1; seed <= 2000; seed++)
        run_random(seed, seed & 1);
    fail_at_once = false;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_behind_lane),
        cmocka_unit_test(test_new_behind_lane_threads),
        cmocka_unit_test(test_other_route_not_held),
        cmocka_unit_test(test_source_key_kept),
        cmocka_unit_test(test_parked_source),
        cmocka_unit_test(test_reload_keeps_order),
        cmocka_unit_test(test_reload_new_behind_moved),
        cmocka_unit_test(test_bounds_and_expiry),
        cmocka_unit_test(test_slot_to_other_worker),
        cmocka_unit_test(test_offer_not_stolen),
        cmocka_unit_test(test_nudge_keeps_turn),
        cmocka_unit_test(test_total_lease),
        cmocka_unit_test(test_random),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
