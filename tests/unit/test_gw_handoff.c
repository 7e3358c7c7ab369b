/*
 * The threaded gateway's hand-off of admitted requests to their egress
 * shard (gateway/forward_mt.c, gateway/threads.c), with the real admission
 * queue (gateway/admission.c), against a fake core.  Every shard but 0 is
 * a real thread running the real shard loop; its cw_progress runs one step
 * the test hands it at a time, and a step can stop half-way (park) while
 * another thread runs, so the interleavings below are exact.  Shard 0 is
 * this thread; it can be stopped just after it drops gw->lock (a
 * --wrap of pthread_mutex_unlock) while another shard runs, and it runs
 * the real reload (gateway/reload.c) against a fake configuration whose
 * table moves a route to another shard.  What is checked is the order of
 * the cw_forward calls (what reaches the next hop): FIFO per source and
 * route.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "gw_bulk.h"
#include "gw_int.h"

#define NSHARDS 3
#define MAX_REQS 16
#define WAIT_MS 5000 /* bound on every wait for another thread */

/* ---- the fake core ------------------------------------------------------ */

struct cw_context {
    unsigned idx;
    bool interrupted;
    void (*step)(void *arg); /* handed by the test, run by cw_progress */
    void *step_arg;
    unsigned steps_done;
};
struct cw_addr {
    int unused;
};
struct cw_network {
    int unused;
};
/* An incoming request (from @c src on shard @c in_shard's network, to
 * route @c route) or an outgoing one (@c in: the request it forwards). */
struct cw_handle {
    unsigned id;
    const char *src;
    unsigned in_shard, route;
    int answers, relayed, released;
    bool done; /* outgoing: completed by the next hop */
    cw_status_t st;
    struct cw_handle *in;
    cw_context_t *ctx;
    cw_forward_cb_t cb;
    void *cb_arg;
};

static struct gw gw;
static struct cw_config cfg;
/* Route 0 leaves by a network on shard 1, route 1 by one on shard 2. */
static struct gw_route_stats routes[2];
static unsigned route_cap[2];
static unsigned route_shard[2];
/* What a reload's new table makes of route 0 (gw_set_config). */
static unsigned reload_shard0;
static struct cw_addr next_hop;
static struct cw_network nets[NSHARDS];
static struct cw_handle reqs[MAX_REQS];
static unsigned nreqs;
static struct cw_handle outs[MAX_REQS]; /* kept to the end: wire[] */
static unsigned nouts;
static struct cw_handle *wire[MAX_REQS]; /* outgoing, in the order sent */
static unsigned nwire;
static const char *harness_error; /* seen on a shard's thread */

/* Guards everything above that shard threads touch, and the steps. */
static pthread_mutex_t hx = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hcv = PTHREAD_COND_INITIALIZER;
static bool parked;

static void deadline_in(struct timespec *ts, unsigned ms)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

cw_status_t cw_context_create(const struct cw_context_opts *o,
                              cw_context_t **ctx_p)
{
    (void)o;
    *ctx_p = calloc(1, sizeof(**ctx_p));
    return *ctx_p != NULL ? CW_OK : CW_NOMEM;
}

void cw_context_destroy(cw_context_t *ctx)
{
    free(ctx);
}

/* The context whose batch scope (coalescing) this thread has open: a
 * shard sends what it was handed inside one, so that requests to one next
 * hop leave together (cw_forward checks). */
static _Thread_local cw_context_t *scope_open;

void *cw_context_batch_begin(cw_context_t *ctx)
{
    cw_context_t *prev = scope_open;

    scope_open = ctx;
    return prev;
}

void cw_context_batch_end(cw_context_t *ctx, void *token)
{
    if (scope_open != ctx) {
        pthread_mutex_lock(&hx);
        harness_error = "batch scope closed on another context";
        pthread_mutex_unlock(&hx);
    }
    scope_open = token;
}

cw_status_t cw_context_interrupt(cw_context_t *ctx)
{
    pthread_mutex_lock(&hx);
    ctx->interrupted = true;
    pthread_cond_broadcast(&hcv);
    pthread_mutex_unlock(&hx);
    return CW_OK;
}

/* An interrupt ends it at once (the shard loop then drains its inbox);
 * else it runs the step handed to this context, if one comes soon. */
cw_status_t cw_progress(cw_context_t *ctx, unsigned timeout_ms)
{
    void (*step)(void *);
    struct timespec ts;
    void *arg;

    (void)timeout_ms;
    deadline_in(&ts, 20);
    pthread_mutex_lock(&hx);
    while (!ctx->interrupted && ctx->step == NULL &&
           pthread_cond_timedwait(&hcv, &hx, &ts) != ETIMEDOUT)
        ;
    if (ctx->interrupted || ctx->step == NULL) {
        ctx->interrupted = false;
        pthread_mutex_unlock(&hx);
        return CW_TIMEOUT;
    }
    step = ctx->step;
    arg = ctx->step_arg;
    ctx->step = NULL;
    pthread_mutex_unlock(&hx);
    step(arg);
    pthread_mutex_lock(&hx);
    ctx->steps_done++;
    pthread_cond_broadcast(&hcv);
    pthread_mutex_unlock(&hx);
    return CW_OK;
}

cw_status_t cw_trigger(cw_context_t *ctx, unsigned timeout_ms,
                       unsigned max, unsigned *ran_p)
{
    (void)ctx;
    (void)timeout_ms;
    (void)max;
    if (ran_p != NULL)
        *ran_p = 0;
    return CW_OK;
}

cw_status_t cw_fwd_create_on(cw_context_t *out_ctx, cw_handle_t *in,
                             cw_addr_t *next, const char *dest,
                             cw_handle_t **out_p)
{
    cw_handle_t *out;

    (void)next;
    (void)dest;
    pthread_mutex_lock(&hx);
    out = nouts < MAX_REQS ? &outs[nouts++] : NULL;
    pthread_mutex_unlock(&hx);
    if (out == NULL)
        return CW_NOMEM;
    memset(out, 0, sizeof(*out));
    out->in = in;
    out->ctx = out_ctx;
    *out_p = out;
    return CW_OK;
}

/* What reaches the next hop, in order; only the egress shard's thread may
 * send on its context. */
cw_status_t cw_forward(cw_handle_t *h, uint64_t timeout_ms,
                       cw_forward_cb_t cb, void *arg)
{
    (void)timeout_ms;
    pthread_mutex_lock(&hx);
    if (gw_shard_self() != &gw.shards[h->ctx->idx])
        harness_error = "cw_forward called off the egress shard's thread";
    if (scope_open != h->ctx)
        harness_error = "cw_forward outside a batch scope of its context";
    h->cb = cb;
    h->cb_arg = arg;
    if (nwire < MAX_REQS)
        wire[nwire++] = h;
    else
        harness_error = "too many forwards";
    pthread_mutex_unlock(&hx);
    return CW_OK;
}

cw_status_t cw_fwd_respond(cw_handle_t *in, cw_handle_t *out,
                           cw_status_t status, cw_respond_cb_t cb, void *arg)
{
    (void)out;
    (void)cb;
    (void)arg;
    in->relayed++;
    in->st = status;
    return CW_OK;
}

void cw_handle_release(cw_handle_t *h)
{
    h->released++;
}

void cw_handle_ref(cw_handle_t *h)
{
    (void)h;
}

void gw_answer(cw_handle_t *in, cw_status_t st)
{
    in->answers++;
    in->st = st;
    cw_handle_release(in);
}

cw_status_t gw_addr_get(struct gw_shard *sh, const char *uri,
                        cw_addr_t **addr_p)
{
    (void)sh;
    (void)uri;
    *addr_p = &next_hop;
    return CW_OK;
}

cw_status_t cw_addr_dup(cw_addr_t *addr, cw_addr_t **addr_p)
{
    *addr_p = addr;
    return CW_OK;
}

void cw_addr_free(cw_addr_t *addr)
{
    (void)addr;
}

/* Only requests with bulk descriptors look their egress network up, and
 * this harness sends none. */
struct gw_net *gw_net_of(struct gw *g, const cw_network_t *net)
{
    (void)g;
    (void)net;
    harness_error = "gw_net_of called: the harness has no bulk";
    return NULL;
}

cw_context_t *cw_handle_context(cw_handle_t *h)
{
    return h->in != NULL ? h->ctx : gw.shards[h->in_shard].ctx;
}

cw_network_t *cw_addr_network(const cw_addr_t *addr)
{
    (void)addr;
    return &nets[0];
}

unsigned cw_fwd_desc_count(cw_handle_t *in)
{
    (void)in;
    return 0;
}

/* Not reached here: no bulk, no resume, no cancel, no hop down. */
cw_status_t cw_fwd_set_resume(cw_handle_t *out)
{
    (void)out;
    return CW_OK;
}

cw_status_t cw_fwd_fail(cw_handle_t *out, cw_status_t status)
{
    (void)out;
    (void)status;
    return CW_OK;
}

cw_status_t cw_cancel(cw_handle_t *h)
{
    (void)h;
    return CW_OK;
}

cw_status_t gw_bulk_rewrite(struct gw *g, struct gw_fwd *f, cw_handle_t *in,
                            struct gw_net *egress, cw_addr_t *next)
{
    (void)g;
    (void)f;
    (void)in;
    (void)egress;
    (void)next;
    return CW_OK;
}

bool gw_fwd_resume_mt(struct gw_fwd *f)
{
    (void)f;
    return false;
}

void gw_fwd_fail_account(struct gw_fwd *f, cw_status_t st)
{
    (void)f;
    (void)st;
}

/* gw_shards_setup's, not called here. */
cw_status_t cw_rpc_register(cw_context_t *ctx, const char *name,
                            cw_rpc_handler_t handler, void *arg,
                            const struct cw_rpc_opts *opts, cw_rpc_id_t *id_p)
{
    (void)ctx;
    (void)name;
    (void)handler;
    (void)arg;
    (void)opts;
    (void)id_p;
    return CW_OK;
}

cw_status_t cw_context_set_forward_hook(cw_context_t *ctx,
                                        cw_forward_hook_t hook, void *arg)
{
    (void)ctx;
    (void)hook;
    (void)arg;
    return CW_OK;
}

void gw_ping_handler(cw_handle_t *h, void *arg)
{
    (void)h;
    (void)arg;
}

void gw_forward_hook(cw_handle_t *in, void *arg)
{
    gw_forward(arg, in, 0);
}

/* ---- the fake configuration (gateway/reload.c) ------------------------- */

static struct cw_config next_cfg;
static struct cw_config_network next_nets[NSHARDS];
static char net_names[NSHARDS][8];
static struct cw_route_table *fake_table = (struct cw_route_table *)&next_cfg;

struct cw_config_diag *cw_config_diag_new(void)
{
    return (struct cw_config_diag *)&next_cfg;
}

void cw_config_diag_free(struct cw_config_diag *diag)
{
    (void)diag;
}

void cw_config_diag_clear(struct cw_config_diag *diag)
{
    (void)diag;
}

size_t cw_config_diag_count(const struct cw_config_diag *diag)
{
    (void)diag;
    return 0;
}

const char *cw_config_diag_get(const struct cw_config_diag *diag, size_t i)
{
    (void)diag;
    (void)i;
    return "";
}

/* The same networks, the same names: the reload changes the table only. */
cw_status_t cw_config_load(const char *path, unsigned flags,
                           struct cw_config_diag *diag,
                           struct cw_config **cfg_p)
{
    (void)path;
    (void)flags;
    (void)diag;
    next_cfg = cfg;
    next_cfg.networks = next_nets;
    next_cfg.nnetworks = NSHARDS;
    for (unsigned i = 0; i < NSHARDS; i++) {
        next_nets[i].name = net_names[i];
        next_nets[i].address = net_names[i];
    }
    *cfg_p = &next_cfg;
    return CW_OK;
}

void cw_config_free(struct cw_config *c)
{
    (void)c;
}

cw_status_t cw_config_check_reload(const struct cw_config *cur,
                                   const struct cw_config *next,
                                   struct cw_config_diag *diag)
{
    (void)cur;
    (void)next;
    (void)diag;
    return CW_OK;
}

cw_status_t cw_route_table_build(const struct cw_config *c,
                                 struct cw_route_table **table_p)
{
    (void)c;
    *table_p = fake_table;
    return CW_OK;
}

size_t cw_route_table_size(const struct cw_route_table *table)
{
    (void)table;
    return 2;
}

void cw_route_table_unref(struct cw_route_table *table)
{
    (void)table;
}

/* The new table is current from here: route 0 leaves by another network
 * (same next hop, so the same route). */
void gw_set_config(struct gw *g, struct cw_config *own,
                   const struct cw_config *c, struct cw_route_table *table)
{
    (void)own;
    (void)c;
    g->table = table;
    route_shard[0] = reload_shard0;
}

/* Not reached: no network is opened, removed or closed. */
cw_status_t gw_net_open(struct gw *g, const struct cw_config_network *cn,
                        struct gw_net *gn)
{
    (void)g;
    (void)cn;
    (void)gn;
    return CW_UNSUPPORTED;
}

cw_status_t cw_network_close(cw_network_t *net)
{
    (void)net;
    return CW_OK;
}

void gw_addr_cache_fini(struct gw *g)
{
    (void)g;
}

void gw_rcache_clear(struct gw *g)
{
    (void)g;
}

cw_status_t cw_context_stats(cw_context_t *ctx,
                             struct cw_context_stats *stats_p)
{
    (void)ctx;
    memset(stats_p, 0, sizeof(*stats_p));
    return CW_OK;
}

void gw_fwd_cancel_all(struct gw *g)
{
    (void)g;
}

bool gw_health_busy(const struct gw *g)
{
    (void)g;
    return false;
}

/* ---- the fake forward path ---------------------------------------------- */

uint64_t cw_handle_remaining_ms(cw_handle_t *h)
{
    (void)h;
    return 10000;
}

bool cw_handle_canceled(cw_handle_t *h)
{
    (void)h;
    return false;
}

void gw_fwd_free(struct gw_fwd *f)
{
    struct gw *g = f->gw;

    g->inflight--;
    f->ingress->inflight--;
    f->rs->inflight--;
    gw_admit_done(g, f->src);
    if (f->out != NULL)
        cw_handle_release(f->out);
    free(f);
}

void gw_fwd_account(struct gw_fwd *f, cw_status_t st, uint64_t t_end)
{
    (void)st;
    (void)t_end;
    gw_fwd_free(f);
}

/* Shard 0 stops just after it drops gw->lock over the request it takes
 * from the queue (pause_id), and runs pause_fn (another shard's turn). */
static _Thread_local bool pause_armed;
static unsigned pause_id = MAX_REQS;
static void (*pause_fn)(void);

int __real_pthread_mutex_unlock(pthread_mutex_t *m);
int __wrap_pthread_mutex_unlock(pthread_mutex_t *m);

int __wrap_pthread_mutex_unlock(pthread_mutex_t *m)
{
    int rc = __real_pthread_mutex_unlock(m);

    if (m == &gw.lock && pause_armed) {
        pause_armed = false;
        pause_fn();
    }
    return rc;
}

/* gateway/forward.c's gw_forward from the route lookup on, threaded. */
void gw_forward(struct gw *g, cw_handle_t *in, uint64_t qseq)
{
    struct gw_net *ingress = &g->nets[in->in_shard];
    struct gw_route_stats *rs = &routes[in->route];
    struct gw_source *source = NULL;
    struct gw_fwd *f;
    cw_status_t st;

    st = gw_admission(g, in, ingress, rs, route_cap[in->route], in->src,
                      qseq, &source);
    if (st == CW_AGAIN)
        return;
    if (st != CW_OK) {
        gw_reject(g, in, st);
        return;
    }
    f = calloc(1, sizeof(*f));
    if (f == NULL) {
        gw_admit_done(g, source);
        gw_reject(g, in, CW_NOMEM);
        return;
    }
    f->gw = g;
    f->in = in;
    f->rs = rs;
    f->src = source;
    f->ingress = ingress;
    g->inflight++;
    ingress->inflight++;
    rs->inflight++;
    f->eg_sh = &g->shards[route_shard[in->route]];
    snprintf(f->next_addr, sizeof(f->next_addr), "tcp://next:1");
    if (qseq != 0 && in->id == pause_id && gw_shard_self() == &g->shards[0])
        pause_armed = true;
    gw_fwd_stage(f);
}

/* ---- driving the shards ------------------------------------------------- */

static void wait_locked(bool (*done)(void *), void *arg, const char *what)
{
    struct timespec ts;

    deadline_in(&ts, WAIT_MS);
    while (!done(arg))
        if (pthread_cond_timedwait(&hcv, &hx, &ts) == ETIMEDOUT && !done(arg)) {
            pthread_mutex_unlock(&hx);
            fail_msg("timed out waiting for %s", what);
        }
}

struct step_wait {
    cw_context_t *ctx;
    unsigned target;
};

static bool step_is_done(void *arg)
{
    struct step_wait *w = arg;

    return w->ctx->steps_done >= w->target;
}

/* Hand @p fn to shard @p i's thread; its cw_progress runs it. */
static unsigned post_step(unsigned i, void (*fn)(void *), void *arg)
{
    cw_context_t *ctx = gw.shards[i].ctx;
    unsigned target;

    pthread_mutex_lock(&hx);
    assert_null(ctx->step);
    ctx->step = fn;
    ctx->step_arg = arg;
    target = ctx->steps_done + 1;
    pthread_cond_broadcast(&hcv);
    pthread_mutex_unlock(&hx);
    return target;
}

static void wait_step(unsigned i, unsigned target)
{
    struct step_wait w = {gw.shards[i].ctx, target};

    pthread_mutex_lock(&hx);
    wait_locked(step_is_done, &w, "a shard's step");
    pthread_mutex_unlock(&hx);
}

/* Run @p fn on shard @p i (this thread for shard 0) and wait for it. */
static void run_on(unsigned i, void (*fn)(void *), void *arg)
{
    if (i == 0) {
        fn(arg);
        return;
    }
    wait_step(i, post_step(i, fn, arg));
}

static bool is_parked(void *arg)
{
    (void)arg;
    return parked;
}

static bool is_unparked(void *arg)
{
    (void)arg;
    return !parked;
}

/* On a shard's thread: stop until the test says go on. */
static void park(void)
{
    struct timespec ts;

    deadline_in(&ts, WAIT_MS);
    pthread_mutex_lock(&hx);
    parked = true;
    pthread_cond_broadcast(&hcv);
    while (parked)
        if (pthread_cond_timedwait(&hcv, &hx, &ts) == ETIMEDOUT) {
            harness_error = "parked too long";
            parked = false;
        }
    pthread_mutex_unlock(&hx);
}

static void wait_parked(void)
{
    pthread_mutex_lock(&hx);
    wait_locked(is_parked, NULL, "a shard to park");
    pthread_mutex_unlock(&hx);
}

static void unpark(void)
{
    pthread_mutex_lock(&hx);
    parked = false;
    pthread_cond_broadcast(&hcv);
    wait_locked(is_unparked, NULL, "a shard to go on");
    pthread_mutex_unlock(&hx);
}

/* A request from @p src arrives on shard @p shard's network. */
static struct cw_handle *new_req(const char *src, unsigned shard)
{
    struct cw_handle *h = &reqs[nreqs];

    assert_true(nreqs < MAX_REQS);
    memset(h, 0, sizeof(*h));
    h->id = nreqs++;
    h->src = src;
    h->in_shard = shard;
    return h;
}

/* The forward hook of the request's ingress shard (run on that shard). */
static void arrive_step(void *arg)
{
    struct cw_handle *h = arg;

    gw_forward_hook_mt(h, &gw.shards[h->in_shard]);
}

static struct cw_handle *arrive_to(const char *src, unsigned shard,
                                   unsigned route)
{
    struct cw_handle *h = new_req(src, shard);

    h->route = route;
    run_on(shard, arrive_step, h);
    return h;
}

static struct cw_handle *arrive(const char *src, unsigned shard)
{
    return arrive_to(src, shard, 0);
}

static struct cw_handle *out_of(const struct cw_handle *in)
{
    struct cw_handle *out = NULL;

    pthread_mutex_lock(&hx);
    for (unsigned i = 0; i < nwire; i++)
        if (wire[i]->in == in)
            out = wire[i];
    pthread_mutex_unlock(&hx);
    return out;
}

/* The outgoing forward of @p arg (the request) completes at the next hop:
 * its callback runs on the egress shard, from cw_trigger. */
static void complete_step(void *arg)
{
    struct cw_handle *out = out_of(arg);

    if (out == NULL || out->done) {
        harness_error = "completing a request not in flight";
        return;
    }
    out->done = true;
    out->cb(out, CW_OK, out->cb_arg);
}

/* The shard that sent @p in (a reload may have moved its route since). */
static unsigned egress_of(const struct cw_handle *in)
{
    return out_of(in)->ctx->idx;
}

static void noop_step(void *arg)
{
    (void)arg;
}

/* Let every shard run what was handed to it, until nothing moves. */
static void settle(void)
{
    for (unsigned round = 0; round < 4; round++) {
        (void)gw_shard_drain(&gw.shards[0]);
        for (unsigned i = 1; i < NSHARDS; i++)
            run_on(i, noop_step, NULL);
    }
}

static bool was_sent(const struct cw_handle *in)
{
    for (unsigned i = 0; i < nwire; i++)
        if (wire[i]->in == in)
            return true;
    return false;
}

/* Up to @p total RPCs in flight (0: no bound), @p cap on route 0. */
static void setup_gw(unsigned total, unsigned cap)
{
    struct cw_context_opts o;

    memset(&gw, 0, sizeof(gw));
    memset(&cfg, 0, sizeof(cfg));
    memset(routes, 0, sizeof(routes));
    memset(&o, 0, sizeof(o));
    nreqs = nouts = nwire = 0;
    harness_error = NULL;
    pause_id = MAX_REQS;
    cfg.limits.max_inflight_rpcs = total;
    cfg.limits.max_queued_rpcs = 16;
    gw.cfg = &cfg;
    route_cap[0] = cap;
    route_cap[1] = 0;
    route_shard[0] = reload_shard0 = 1;
    route_shard[1] = 2;
    gw.config_path = "gw.yaml";
    assert_int_equal(gw_shards_init(&gw, &o, NSHARDS), CW_OK);
    for (unsigned i = 0; i < NSHARDS; i++) {
        gw.shards[i].ctx->idx = i;
        gw.nets[i].net = &nets[i];
        snprintf(net_names[i], sizeof(net_names[i]), "n%u", i);
        snprintf(gw.nets[i].name, sizeof(gw.nets[i].name), "n%u", i);
        snprintf(gw.nets[i].uri, sizeof(gw.nets[i].uri), "n%u", i);
        gw.nets[i].members[0] = &nets[i];
        gw.shards[i].nnets = 1;
    }
    gw.nnets = NSHARDS;
    assert_int_equal(gw_threads_start(&gw), CW_OK);
}

/* Complete everything still in flight, then check that each request was
 * relayed once and that @p src's requests left in arrival order. */
static void teardown_gw(const char *src)
{
    unsigned last = 0;
    bool first = true;

    settle();
    for (unsigned i = 0; i < nwire; i++) {
        if (wire[i]->done)
            continue;
        run_on(egress_of(wire[i]->in), complete_step, wire[i]->in);
        settle();
    }
    printf("# reached the next hop:");
    for (unsigned i = 0; i < nwire; i++)
        printf(" %s%u", wire[i]->in->src, wire[i]->in->id);
    printf("\n");
    gw_threads_stop(&gw);
    if (harness_error != NULL)
        fail_msg("%s", harness_error);
    for (unsigned i = 0; i < nreqs; i++) {
        assert_int_equal(reqs[i].relayed + reqs[i].answers, 1);
        assert_int_equal(reqs[i].released, 1);
    }
    for (unsigned i = 0; i < nouts; i++)
        assert_int_equal(outs[i].released, 1);
    assert_int_equal(gw.inflight, 0);
    assert_int_equal(gw.nqueued, 0);
    assert_int_equal(gw.nsrcs, 0);
    gw_sources_fini(&gw);
    gw_shards_fini(&gw);
    for (unsigned i = 0; i < nwire; i++) {
        const struct cw_handle *in = wire[i]->in;
        if (strcmp(in->src, src) != 0)
            continue;
        if (!first && in->id < last)
            fail_msg("%s's request %u reached the next hop before its "
                     "older request %u", src, last, in->id);
        first = false;
        last = in->id;
    }
}

/* ---- the tests ---------------------------------------------------------- */

/* Route 0 (egress on shard 1) capped at 2, held by T0 (on shard 0) and T1
 * (on shard 1); S, on shard 1, has @p nqueued requests waiting for it. */
static struct cw_handle *fill_route(unsigned nqueued, struct cw_handle **t1_p)
{
    struct cw_handle *t0, *first = NULL;

    setup_gw(0, 2);
    t0 = arrive("T", 0);
    *t1_p = arrive("U", 1);
    for (unsigned i = 0; i < nqueued; i++) {
        struct cw_handle *h = arrive("S", 1);
        if (first == NULL)
            first = h;
    }
    settle();
    assert_true(was_sent(t0));
    assert_true(was_sent(*t1_p));
    assert_int_equal(gw.nqueued, nqueued);
    /* T0's forward ends: the callback runs on shard 1 and hands it back
     * to shard 0, which runs the queue when it takes it. */
    run_on(1, complete_step, t0);
    return first;
}

static struct cw_handle *late_t1, *late_s;

/* Between shard 0's unlock and its hand-off: U's forward ends on shard 1
 * and S's next request arrives there, finding the slot free. */
static void new_on_egress(void)
{
    run_on(1, complete_step, late_t1);
    late_s = arrive("S", 1);
}

/* docs/gateway.md's window: S's queued request is taken by shard 0's
 * queue run; before it is in shard 1's inbox, S's next request arrives on
 * shard 1 and gets the slot U freed. */
static void test_new_request_on_egress_shard(void **state)
{
    struct cw_handle *s1;

    (void)state;
    late_s = NULL;
    s1 = fill_route(1, &late_t1);
    pause_id = s1->id;
    pause_fn = new_on_egress;
    (void)gw_shard_drain(&gw.shards[0]); /* T0's end: the queue runs */
    assert_non_null(late_s);
    assert_int_equal(late_s->answers, 0);
    teardown_gw("S");
}

/* Between shard 0's unlock and its hand-off: U's forward ends and shard 2
 * (U's ingress) runs the queue, which hands S's next queued request to
 * shard 1. */
static void queue_run_on_other_shard(void)
{
    run_on(1, complete_step, late_t1);
    run_on(2, noop_step, NULL); /* shard 2 takes U's end from its inbox */
}

/* The same window with the younger request taken by another shard's
 * queue run at the same moment. */
static void test_two_queue_runs(void **state)
{
    struct cw_handle *t0, *s1;

    (void)state;
    setup_gw(0, 2);
    t0 = arrive("T", 0);
    late_t1 = arrive("U", 2);
    s1 = arrive("S", 1);
    (void)arrive("S", 1);
    settle();
    assert_int_equal(gw.nqueued, 2);
    run_on(1, complete_step, t0);
    pause_id = s1->id;
    pause_fn = queue_run_on_other_shard;
    (void)gw_shard_drain(&gw.shards[0]);
    teardown_gw("S");
}

static struct cw_handle *park_t;

/* Shard 1 is in cw_trigger, relaying the end of U's forward, when a
 * request is handed to it. */
static void complete_after_park(void *arg)
{
    (void)arg;
    park();
    complete_step(park_t);
}

/* An older request of S waits in shard 1's inbox while shard 1 itself
 * runs the queue (the end of a forward that came in on it) and takes S's
 * younger one: the younger must not leave first. */
static void test_inbox_before_own_send(void **state)
{
    struct cw_handle *s0, *s1;
    unsigned target;

    (void)state;
    setup_gw(0, 2);
    park_t = arrive("U", 1);
    settle();
    target = post_step(1, complete_after_park, NULL);
    wait_parked();
    s0 = arrive("S", 0); /* admitted; handed to shard 1's inbox */
    s1 = arrive("S", 0); /* the route is full: queued */
    assert_int_equal(gw.nqueued, 1);
    unpark();
    wait_step(1, target);
    assert_true(s0->id < s1->id);
    teardown_gw("S");
}

static void park_step(void *arg)
{
    (void)arg;
    park();
}

/* Shard @p i stops in a step (it is busy) until unpark(); wait_step(@p i,
 * the value returned) waits for it to end. */
static unsigned park_shard(unsigned i)
{
    unsigned target = post_step(i, park_step, NULL);

    wait_parked();
    return target;
}

/* Shard 1 takes, in one batch from its inbox, the end of U's forward
 * (handed back by shard 2) and then S's older request; the end runs the
 * queue, which takes S's younger request, for shard 1 itself: it must
 * leave after the rest of the batch, not from a drain nested in it. */
static void test_batch_before_own_send(void **state)
{
    struct cw_handle *u, *s0, *s1;
    unsigned target;

    (void)state;
    setup_gw(2, 0);
    u = arrive_to("U", 1, 1); /* route 1: shard 2 sends it */
    settle();
    target = park_shard(1);
    run_on(2, complete_step, u); /* its end goes to shard 1's inbox */
    s0 = arrive("S", 0);         /* and S's request behind it */
    s1 = arrive("S", 0);         /* two in flight: queued */
    assert_int_equal(gw.nqueued, 1);
    unpark();
    wait_step(1, target);
    assert_true(s0->id < s1->id);
    teardown_gw("S");
}

/* A reload on shard 0 (gw_loop_mt: under gw->lock, then what it decided
 * is done) whose table sends route 0 through shard @p shard's network. */
static void reload_to(unsigned shard)
{
    char err[128];
    cw_status_t st;

    reload_shard0 = shard;
    pthread_mutex_lock(&gw.lock);
    st = gw_reload(&gw, err, sizeof(err));
    pthread_mutex_unlock(&gw.lock);
    gw_deferred_flush();
    assert_int_equal(st, CW_OK);
    assert_int_equal(route_shard[0], shard);
}

/* docs/gateway.md's reload window: S's request, admitted for route 0 and
 * handed to shard 1, still waits in shard 1's inbox when a reload moves
 * route 0 to a network of shard 2 (same next hop); S's next request,
 * admitted on the new table, goes to shard 2, which is idle.  It must
 * not leave before the older one. */
static void test_reload_moves_route(void **state)
{
    struct cw_handle *s0, *s1;
    unsigned target;

    (void)state;
    setup_gw(0, 0);
    target = park_shard(1); /* shard 1 is busy */
    s0 = arrive("S", 0);
    reload_to(2);
    s1 = arrive("S", 0);
    run_on(2, noop_step, NULL); /* shard 2 runs its inbox */
    unpark();
    wait_step(1, target);
    assert_true(s0->id < s1->id);
    teardown_gw("S");
}

/* The same with S's younger request waiting in the admission queue at
 * the reload: the end of T's forward on shard 2 runs the queue there,
 * which routes it on the new table, for shard 2 itself. */
static void test_reload_moves_queued(void **state)
{
    struct cw_handle *t, *s0, *s1;
    unsigned target;

    (void)state;
    setup_gw(2, 0);
    t = arrive_to("T", 2, 1); /* route 1: shard 2 sends it */
    settle();
    target = park_shard(1);
    s0 = arrive("S", 0);
    s1 = arrive("S", 0); /* two in flight: queued */
    assert_int_equal(gw.nqueued, 1);
    reload_to(2);
    run_on(2, complete_step, t);
    assert_int_equal(gw.nqueued, 0);
    unpark();
    wait_step(1, target);
    assert_true(s0->id < s1->id);
    teardown_gw("S");
}

/* Two reloads while shard 1 still holds S's oldest request: route 0 goes
 * to shard 2 and back.  Shard 2 runs the second reload's marker while it
 * holds S's request of the first; the request of the second, on shard 1,
 * must still wait for it. */
static void test_two_reloads(void **state)
{
    unsigned target;

    (void)state;
    setup_gw(0, 0);
    target = park_shard(1);
    (void)arrive("S", 0);
    reload_to(2);
    (void)arrive("S", 0);
    run_on(2, noop_step, NULL);
    reload_to(1);
    (void)arrive("S", 0);
    run_on(2, noop_step, NULL);
    unpark();
    wait_step(1, target);
    teardown_gw("S");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_request_on_egress_shard),
        cmocka_unit_test(test_two_queue_runs),
        cmocka_unit_test(test_inbox_before_own_send),
        cmocka_unit_test(test_batch_before_own_send),
        cmocka_unit_test(test_reload_moves_route),
        cmocka_unit_test(test_reload_moves_queued),
        cmocka_unit_test(test_two_reloads),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
