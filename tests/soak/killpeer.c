/*
 * Kill-matrix peer (tests/soak/kills.sh, docs/reliability.md): a target
 * and a caller whose phase of an RPC through a gateway can be seen from
 * outside, so that the test kills or stops a process in the phase it
 * names, not after a guessed delay.  Only the public API is used.
 *
 *   killpeer serve URI ADDR_FILE
 *   killpeer call TARGET OP [--n N] [--timeout MS] [--len BYTES]
 *                 [--hold-ms MS] [--go FILE] [--pause-in-response FILE]
 *                 [--pause-in-request FILE] [--stall]
 *   killpeer stream TARGET [--duration S] [--timeout MS] [--inflight K]
 *                 [--stop FILE]
 *
 * The server's RPCs, each event printed as a line on stdout (flushed), for
 * the test to wait for:
 *   kp.ping {}                   answered at once;
 *   kp.hold {u32 hold_ms}        held ("held N", N requests held so far),
 *                                answered CW_OK after hold_ms (0: never);
 *                                "answered STATUS T" when the answer left
 *                                or failed (T: wall clock, ms);
 *   kp.bulk {u8 dir, u64 len, bulk}  pulls (dir 1) or pushes (dir 2) len
 *                                bytes of the caller's memory; "bulk-start
 *                                LEN", then "bulk-end STATUS MS T" (MS from
 *                                the start) and the status as the answer;
 *   kp.big  {u32 len, u8 stall}  answers len bytes (beyond the eager limit
 *                                the caller's side pulls them); with stall,
 *                                once the answer has left (tx_responses
 *                                moved) and is not collected (uncollected),
 *                                "responding", and no progress any more: the
 *                                server then only waits for a signal;
 *   kp.args {bytes}              arguments past the eager limit (the
 *                                gateway pulls them from the caller):
 *                                "args LEN OK" when every byte is the
 *                                caller's pattern, answered CW_OK, else
 *                                "args LEN bad" and CW_PROTOCOL.
 *
 * The caller (call): a kp.ping through TARGET's path must end CW_OK
 * ("ready"); then, once the --go file exists, it sends N RPCs of OP (ping,
 * hold, pull, push, big, args), each with a deadline of --timeout ms ("sent N
 * T"), and prints "done I STATUS MS T" for each completion (MS since it
 * was sent, T the wall clock in ms, CLOCK_REALTIME, to compare with the
 * moment of a kill), a second completion of one as "dup I STATUS".  With
 * --pause-in-response FILE, once an answer has arrived (rx_responses
 * moved) while its RPC is not complete (its payload being pulled), it
 * prints "mid-response T" and makes no progress until FILE exists.  With
 * --pause-in-request FILE, once its requests are sent (their arguments,
 * past the eager limit, exposed for the next hop to pull), it prints
 * "mid-request T" and makes no progress until FILE exists: over a fabric
 * whose reads the caller's progress serves (ofi+tcp), the pull stalls
 * there.  It
 * gives up (cancels, counts "unanswered") 10 s after the deadline.  Last:
 * "summary sent=N completed=C dup=D ok=O err=E unanswered=U max_ms=M".
 * Exit 0 when every RPC completed exactly once, whatever its status.
 *
 * stream: kp.ping with K in flight until --duration or the --stop file,
 * one line per RPC: "rpc START END STATUS US" (wall clock ms; US its
 * latency in microseconds), and "ready" after the first CW_OK; for the
 * failover and the latency of a client beside a flood.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <causeway/causeway.h>

#define KP_PING  "kp.ping"
#define KP_HOLD  "kp.hold"
#define KP_BULK  "kp.bulk"
#define KP_BIG   "kp.big"
#define KP_ARGS  "kp.args"
#define KP_BYTE  0x3c /* the caller's bytes: kp.args checks them */
#define KP_PULL  1
#define KP_PUSH  2
#define KP_HOLDS 256
#define KP_MAX_N 256

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

static uint64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t mono_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static uint64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void say(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

/* ---- server -------------------------------------------------------------- */

struct held {
    cw_handle_t *h;
    uint64_t release_ms; /* 0: never */
};

struct job {
    cw_handle_t *h;
    cw_bulk_t *rb, *lb;
    void *buf;
    uint64_t len, t0;
};

static struct held g_held[KP_HOLDS];
static unsigned g_nheld, g_held_total;
static unsigned g_jobs; /* bulk transfers running */
static bool g_stall;
static uint64_t g_stall_tx; /* tx_responses before the stalled answer */

static void answered_cb(cw_handle_t *h, cw_status_t st, void *arg)
{
    (void)h;
    (void)arg;
    say("answered %s %llu", cw_status_name(st), (unsigned long long)wall_ms());
}

static void h_ping(cw_handle_t *h, void *arg)
{
    (void)arg;
    cw_respond(h, CW_OK, NULL, NULL);
    cw_handle_release(h);
}

static void h_hold(cw_handle_t *h, void *arg)
{
    uint32_t hold_ms = 0;

    (void)arg;
    if (cw_buf_get_u32(cw_handle_input(h), &hold_ms) != CW_OK ||
        g_nheld == KP_HOLDS) {
        cw_respond(h, g_nheld == KP_HOLDS ? CW_BUSY : CW_PROTOCOL, NULL, NULL);
        cw_handle_release(h);
        return;
    }
    g_held[g_nheld].h = h;
    g_held[g_nheld].release_ms = hold_ms ? mono_ms() + hold_ms : 0;
    g_nheld++;
    say("held %u", ++g_held_total);
}

static void release_held(bool all)
{
    uint64_t now = mono_ms();

    for (unsigned i = 0; i < g_nheld;) {
        struct held *e = &g_held[i];

        if (!all && (e->release_ms == 0 || e->release_ms > now)) {
            i++;
            continue;
        }
        cw_respond(e->h, all ? CW_CANCELED : CW_OK, answered_cb, NULL);
        cw_handle_release(e->h);
        *e = g_held[--g_nheld];
    }
}

static void job_cb(cw_status_t st, void *arg)
{
    struct job *j = arg;

    say("bulk-end %s %llu %llu", cw_status_name(st),
        (unsigned long long)(mono_ms() - j->t0), (unsigned long long)wall_ms());
    cw_respond(j->h, st, answered_cb, NULL);
    cw_handle_release(j->h);
    cw_bulk_free(j->rb);
    cw_bulk_free(j->lb);
    free(j->buf);
    free(j);
    g_jobs--;
}

static void h_bulk(cw_handle_t *h, void *arg)
{
    cw_context_t *ctx = arg;
    cw_buf_t *in = cw_handle_input(h);
    struct cw_segment seg;
    struct job *j;
    uint8_t dir = 0;
    uint64_t len = 0;
    cw_bulk_t *rb = NULL;
    cw_status_t st;

    cw_buf_get_u8(in, &dir);
    cw_buf_get_u64(in, &len);
    cw_buf_get_bulk(in, &rb);
    st = cw_buf_error(in);
    if (st == CW_OK && ((dir != KP_PULL && dir != KP_PUSH) || len == 0 ||
                        len > cw_bulk_size(rb)))
        st = CW_RANGE;
    j = st == CW_OK ? calloc(1, sizeof(*j)) : NULL;
    /* Cleared: over shm another process may fill it (process_vm_writev),
     * which memcheck in this one cannot see (README.md, "Memcheck"). */
    if (st == CW_OK && (j == NULL || (j->buf = calloc(1, len)) == NULL))
        st = CW_NOMEM;
    if (st != CW_OK) {
        free(j);
        cw_bulk_free(rb);
        cw_respond(h, st, NULL, NULL);
        cw_handle_release(h);
        return;
    }
    j->h = h;
    j->rb = rb;
    j->len = len;
    if (dir == KP_PUSH)
        memset(j->buf, 0x5a, len);
    seg.base = j->buf;
    seg.len = len;
    g_jobs++;
    j->t0 = mono_ms();
    say("bulk-start %llu", (unsigned long long)len);
    st = cw_bulk_create(ctx, &seg, 1, CW_BULK_READ_WRITE, &j->lb);
    if (st == CW_OK)
        st = cw_bulk_transfer(ctx, dir == KP_PULL ? CW_BULK_PULL : CW_BULK_PUSH,
                              cw_handle_source(h), rb, 0, j->lb, 0, len, job_cb,
                              j, NULL);
    if (st != CW_OK)
        job_cb(st, j);
}

static void h_big(cw_handle_t *h, void *arg)
{
    cw_context_t *ctx = arg;
    cw_buf_t *in = cw_handle_input(h), *out = cw_handle_output(h);
    struct cw_context_stats cs;
    uint32_t len = 0;
    uint8_t stall = 0;
    void *p;

    cw_buf_get_u32(in, &len);
    cw_buf_get_u8(in, &stall);
    p = cw_buf_error(in) == CW_OK ? malloc(len ? len : 1) : NULL;
    if (p == NULL) {
        cw_respond(h, cw_buf_error(in) != CW_OK ? CW_PROTOCOL : CW_NOMEM, NULL,
                   NULL);
        cw_handle_release(h);
        return;
    }
    memset(p, 0xa5, len);
    cw_buf_put_bytes(out, p, len);
    free(p);
    cw_context_stats(ctx, &cs);
    g_stall_tx = cs.tx_responses;
    g_stall = stall != 0;
    cw_respond(h, cw_buf_error(out), answered_cb, NULL);
    cw_handle_release(h);
}

static void h_args(cw_handle_t *h, void *arg)
{
    const uint8_t *p = NULL;
    size_t len = 0, i = 0;
    bool ok;

    (void)arg;
    if (cw_buf_get_bytes(cw_handle_input(h), (const void **)&p, &len) != CW_OK)
        p = NULL;
    for (; p != NULL && i < len && p[i] == KP_BYTE; i++)
        ;
    ok = p != NULL && i == len;
    say("args %zu %s", len, ok ? "OK" : "bad");
    cw_respond(h, ok ? CW_OK : CW_PROTOCOL, answered_cb, NULL);
    cw_handle_release(h);
}

/* A stalled answer has left and waits to be collected: say so and make no
 * progress until a signal. */
static void stall_check(cw_context_t *ctx)
{
    struct cw_context_stats cs;

    cw_context_stats(ctx, &cs);
    if (cs.tx_responses <= g_stall_tx || cs.uncollected == 0)
        return;
    say("responding");
    while (!g_stop)
        pause();
}

static int serve(const char *uri, const char *addr_file)
{
    struct sigaction sa = {.sa_handler = on_signal};
    cw_context_t *ctx = NULL;
    cw_network_t *net;
    char self[CW_URI_MAX];
    uint64_t t_end;
    cw_status_t st;
    FILE *f;
    int rc = 1;

    st = cw_context_create(NULL, &ctx);
    if (st == CW_OK)
        st = cw_network_open(ctx, uri, CW_NET_LISTEN, &net);
    if (st == CW_OK)
        st = cw_network_uri(net, self, sizeof(self));
    if (st == CW_OK)
        st = cw_rpc_register(ctx, KP_PING, h_ping, NULL, NULL, NULL);
    if (st == CW_OK)
        st = cw_rpc_register(ctx, KP_HOLD, h_hold, NULL, NULL, NULL);
    if (st == CW_OK)
        st = cw_rpc_register(ctx, KP_BULK, h_bulk, ctx, NULL, NULL);
    if (st == CW_OK)
        st = cw_rpc_register(ctx, KP_BIG, h_big, ctx, NULL, NULL);
    if (st == CW_OK)
        st = cw_rpc_register(ctx, KP_ARGS, h_args, NULL, NULL, NULL);
    if (st != CW_OK) {
        fprintf(stderr, "killpeer: serving %s: %s\n", uri, cw_status_name(st));
        goto out;
    }
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    f = fopen(addr_file, "w");
    if (f == NULL || fprintf(f, "%s\n", self) < 0 || fclose(f) != 0) {
        perror(addr_file);
        goto out;
    }
    while (!g_stop) {
        cw_progress(ctx, 10);
        cw_trigger(ctx, 0, 0, NULL);
        release_held(false);
        if (g_stall)
            stall_check(ctx);
    }
    /* What is held is answered CW_CANCELED; transfers still running end
     * with their callbacks (5 s at most). */
    release_held(true);
    t_end = mono_ms() + 5000;
    while (g_jobs > 0 && mono_ms() < t_end) {
        cw_progress(ctx, 50);
        cw_trigger(ctx, 0, 0, NULL);
    }
    rc = g_jobs == 0 ? 0 : 1;
out:
    cw_context_destroy(ctx);
    return rc;
}

/* ---- caller -------------------------------------------------------------- */

enum op { OP_PING, OP_HOLD, OP_PULL, OP_PUSH, OP_BIG, OP_ARGS };

struct call_opts {
    const char *target, *go, *pause_go, *req_go, *stop;
    enum op op;
    unsigned n, inflight, duration_s;
    uint64_t timeout_ms, len, hold_ms;
    bool stall;
};

struct rpc {
    cw_handle_t *h;
    cw_bulk_t *bulk;
    void *buf;
    uint64_t t0, t0_wall, t0_us, t1_us;
    unsigned idx, done;
    cw_status_t st;
};

static unsigned g_completed, g_dup, g_ok;
static bool g_quiet; /* stream: no "done" lines */

static void rpc_cb(cw_handle_t *h, cw_status_t st, void *arg)
{
    struct rpc *r = arg;

    (void)h;
    if (r->done++ != 0) {
        g_dup++;
        say("dup %u %s", r->idx, cw_status_name(st));
        return;
    }
    r->st = st;
    r->t1_us = mono_us();
    g_completed++;
    g_ok += st == CW_OK;
    if (!g_quiet)
        say("done %u %s %llu %llu", r->idx, cw_status_name(st),
            (unsigned long long)(mono_ms() - r->t0),
            (unsigned long long)wall_ms());
}

static void pump(cw_context_t *ctx, unsigned ms)
{
    cw_progress(ctx, ms);
    cw_trigger(ctx, 0, 0, NULL);
}

static bool exists(const char *path)
{
    return access(path, F_OK) == 0;
}

/* Build and send RPC @p r of kind @p op to @p dst. */
static cw_status_t rpc_start(cw_context_t *ctx, cw_addr_t *dst,
                             const struct call_opts *o, enum op op,
                             struct rpc *r)
{
    static const char *const names[] = {KP_PING, KP_HOLD, KP_BULK,
                                        KP_BULK, KP_BIG,  KP_ARGS};
    cw_status_t st;
    cw_buf_t *in;

    st = cw_handle_create(ctx, dst, cw_rpc_id(names[op]), &r->h);
    if (st != CW_OK)
        return st;
    in = cw_handle_input(r->h);
    switch (op) {
    case OP_HOLD:
        cw_buf_put_u32(in, (uint32_t)o->hold_ms);
        break;
    case OP_PULL:
    case OP_PUSH: {
        struct cw_segment seg;

        r->buf = malloc(o->len);
        if (r->buf == NULL)
            return CW_NOMEM;
        memset(r->buf, 0x3c, o->len);
        seg.base = r->buf;
        seg.len = o->len;
        st = cw_bulk_create(
            ctx, &seg, 1,
            op == OP_PULL ? CW_BULK_READ_ONLY : CW_BULK_WRITE_ONLY, &r->bulk);
        if (st != CW_OK)
            return st;
        cw_buf_put_u8(in, op == OP_PULL ? KP_PULL : KP_PUSH);
        cw_buf_put_u64(in, o->len);
        cw_buf_put_bulk(in, r->bulk);
        break;
    }
    case OP_BIG:
        cw_buf_put_u32(in, (uint32_t)o->len);
        cw_buf_put_u8(in, o->stall);
        break;
    case OP_ARGS:
        r->buf = malloc(o->len);
        if (r->buf == NULL)
            return CW_NOMEM;
        memset(r->buf, KP_BYTE, o->len);
        cw_buf_put_bytes(in, r->buf, o->len);
        break;
    default:
        break;
    }
    st = cw_buf_error(in);
    if (st != CW_OK)
        return st;
    r->t0 = mono_ms();
    r->t0_wall = wall_ms();
    r->t0_us = mono_us();
    return cw_forward(r->h, o->timeout_ms, rpc_cb, r);
}

/* A context and the address of @p target in it; false (said) if not. */
static bool open_target(const char *target, cw_context_t **ctx_p,
                        cw_addr_t **dst_p)
{
    cw_status_t st = cw_context_create(NULL, ctx_p);

    if (st == CW_OK)
        st = cw_addr_lookup(*ctx_p, target, dst_p);
    if (st != CW_OK)
        fprintf(stderr, "killpeer: %s: %s\n", target, cw_status_name(st));
    return st == CW_OK;
}

static void rpc_free(struct rpc *r)
{
    cw_handle_release(r->h);
    cw_bulk_free(r->bulk);
    free(r->buf);
    memset(r, 0, sizeof(*r));
}

static void warm_cb(cw_handle_t *h, cw_status_t st, void *arg)
{
    struct rpc *r = arg;

    (void)h;
    r->done++;
    r->st = st;
}

/* The warm-up: kp.ping through the same path, CW_OK within 30 s, twice in
 * at most four tries (it makes the connections the phases need, and a
 * connection attempt can fail on a loaded machine: said on stderr).  A
 * gateway with several workers gives the first call a worker to use
 * (docs/wire.md, "Spread addresses"), and the second makes the
 * connection to it, which a caller that stops progressing in a phase
 * (--pause-in-request) could not finish. */
static bool warm_up(cw_context_t *ctx, cw_addr_t *dst)
{
    for (int k = 0, ok = 0; k < 4; k++) {
        struct rpc r = {0};
        uint64_t t_end = mono_ms() + 30000;
        cw_status_t st;

        st = cw_handle_create(ctx, dst, cw_rpc_id(KP_PING), &r.h);
        if (st == CW_OK)
            st = cw_forward(r.h, 20000, warm_cb, &r);
        if (st != CW_OK) {
            fprintf(stderr, "killpeer: warm-up: %s\n", cw_status_name(st));
            rpc_free(&r);
            continue;
        }
        while (r.done == 0 && mono_ms() < t_end)
            pump(ctx, 10);
        if (r.done == 0) {
            cw_cancel(r.h);
            while (r.done == 0)
                pump(ctx, 10);
        }
        if (r.st != CW_OK)
            fprintf(stderr, "killpeer: warm-up ended %s\n",
                    cw_status_name(r.st));
        ok += r.st == CW_OK;
        rpc_free(&r);
        if (ok == 2)
            return true;
    }
    return false;
}

static int call(const struct call_opts *o)
{
    static struct rpc rpcs[KP_MAX_N];
    struct cw_context_stats cs;
    cw_context_t *ctx = NULL;
    cw_addr_t *dst = NULL;
    uint64_t rx0, t_give_up;
    unsigned sent = 0, unanswered;
    bool paused = false;
    cw_status_t st;
    int rc = 1;

    if (!open_target(o->target, &ctx, &dst))
        goto out;
    if (!warm_up(ctx, dst))
        goto out;
    say("ready");
    while (o->go != NULL && !exists(o->go))
        pump(ctx, 1);
    cw_context_stats(ctx, &cs);
    rx0 = cs.rx_responses;
    for (unsigned i = 0; i < o->n; i++) {
        rpcs[i].idx = i;
        st = rpc_start(ctx, dst, o, o->op, &rpcs[i]);
        sent++;
        if (st != CW_OK)
            rpc_cb(rpcs[i].h, st, &rpcs[i]);
    }
    say("sent %u %llu", sent, (unsigned long long)wall_ms());
    if (o->req_go != NULL) {
        say("mid-request %llu", (unsigned long long)wall_ms());
        while (!exists(o->req_go))
            usleep(1000);
    }
    t_give_up = mono_ms() + o->timeout_ms + 10000;
    while (g_completed < sent && mono_ms() < t_give_up) {
        pump(ctx, 1);
        if (o->pause_go == NULL || paused)
            continue;
        cw_context_stats(ctx, &cs);
        if (cs.rx_responses > rx0 && g_completed < sent) {
            paused = true;
            say("mid-response %llu", (unsigned long long)wall_ms());
            while (!exists(o->pause_go))
                usleep(1000);
        }
    }
    unanswered = sent - g_completed;
    if (unanswered > 0) {
        /* Past the deadline and 10 s more: a lost completion.  Cancel so
         * that the handles can be released; those callbacks still count
         * as completions but the RPCs stay counted unanswered. */
        for (unsigned i = 0; i < sent; i++)
            if (rpcs[i].done == 0)
                cw_cancel(rpcs[i].h);
        t_give_up = mono_ms() + 5000;
        while (g_completed < sent && mono_ms() < t_give_up)
            pump(ctx, 10);
    }
    say("summary sent=%u completed=%u dup=%u ok=%u err=%u unanswered=%u", sent,
        sent - unanswered, g_dup, g_ok, sent - unanswered - g_ok, unanswered);
    rc = unanswered == 0 && g_dup == 0 ? 0 : 1;
    for (unsigned i = 0; i < sent; i++)
        if (rpcs[i].done)
            rpc_free(&rpcs[i]);
out:
    cw_addr_free(dst);
    cw_context_destroy(ctx);
    return rc;
}

/* ---- stream -------------------------------------------------------------- */

static int stream(const struct call_opts *o)
{
    static struct rpc rpcs[KP_MAX_N];
    struct sigaction sa = {.sa_handler = on_signal};
    cw_context_t *ctx = NULL;
    cw_addr_t *dst = NULL;
    uint64_t t_end = mono_ms() + (uint64_t)o->duration_s * 1000;
    unsigned busy = 0;
    bool ready = false, more = true;
    cw_status_t st;
    int rc = 1;

    g_quiet = true;
    setvbuf(stdout, NULL, _IOLBF, 0); /* read while it runs */
    sigaction(SIGTERM, &sa, NULL);
    if (!open_target(o->target, &ctx, &dst))
        goto out;
    while (more || busy > 0) {
        more = !g_stop && mono_ms() < t_end &&
               (o->stop == NULL || !exists(o->stop));
        for (unsigned i = 0; more && i < o->inflight; i++) {
            struct rpc *r = &rpcs[i];

            if (r->h != NULL)
                continue;
            r->idx = i;
            st = rpc_start(ctx, dst, o, OP_PING, r);
            if (st != CW_OK) {
                printf("rpc %llu %llu %s 0\n", (unsigned long long)wall_ms(),
                       (unsigned long long)wall_ms(), cw_status_name(st));
                rpc_free(r);
                continue;
            }
            busy++;
        }
        pump(ctx, 1);
        for (unsigned i = 0; i < o->inflight; i++) {
            struct rpc *r = &rpcs[i];

            if (r->h == NULL || r->done == 0)
                continue;
            printf("rpc %llu %llu %s %llu\n", (unsigned long long)r->t0_wall,
                   (unsigned long long)wall_ms(), cw_status_name(r->st),
                   (unsigned long long)(r->t1_us - r->t0_us));
            if (!ready && r->st == CW_OK) {
                ready = true;
                say("ready");
            }
            rpc_free(r);
            busy--;
        }
    }
    fflush(stdout);
    rc = 0;
out:
    cw_addr_free(dst);
    cw_context_destroy(ctx);
    return rc;
}

/* ---- arguments ----------------------------------------------------------- */

/* A count or a size in bytes (the script converts K, M, G). */
static bool num(const char *s, uint64_t *v_p)
{
    char *end;

    errno = 0;
    *v_p = strtoull(s, &end, 10);
    return errno == 0 && end != s && *end == '\0' && *s != '-';
}

static int usage(void)
{
    fprintf(stderr,
            "usage: killpeer serve URI ADDR_FILE\n"
            "       killpeer call TARGET ping|hold|pull|push|big|args [--n N]\n"
            "                [--timeout MS] [--len B] [--hold-ms MS]\n"
            "                [--go FILE] [--pause-in-response FILE]\n"
            "                [--pause-in-request FILE] [--stall]\n"
            "       killpeer stream TARGET [--duration S] [--timeout MS]\n"
            "                [--inflight K] [--stop FILE]\n");
    return 2;
}

int main(int argc, char **argv)
{
    static const char *const ops[] = {"ping", "hold", "pull",
                                      "push", "big",  "args"};
    struct call_opts o = {.n = 1,
                          .inflight = 1,
                          .duration_s = 60,
                          .timeout_ms = 5000,
                          .len = 1 << 20};
    bool is_stream;
    int a;

    if (argc == 4 && strcmp(argv[1], "serve") == 0)
        return serve(argv[2], argv[3]);
    if (argc < 3 ||
        (strcmp(argv[1], "call") != 0 && strcmp(argv[1], "stream") != 0))
        return usage();
    is_stream = strcmp(argv[1], "stream") == 0;
    o.target = argv[2];
    a = 3;
    if (!is_stream) {
        unsigned k;

        if (argc < 4)
            return usage();
        for (k = 0; k < 6 && strcmp(argv[3], ops[k]) != 0; k++)
            ;
        if (k == 6)
            return usage();
        o.op = (enum op)k;
        a = 4;
    }
    for (; a < argc; a++) {
        const char *k = argv[a];
        uint64_t v = 0;

        if (strcmp(k, "--stall") == 0) {
            o.stall = true;
            continue;
        }
        if (a + 1 >= argc)
            return usage();
        if (strcmp(k, "--go") == 0)
            o.go = argv[++a];
        else if (strcmp(k, "--pause-in-response") == 0)
            o.pause_go = argv[++a];
        else if (strcmp(k, "--pause-in-request") == 0)
            o.req_go = argv[++a];
        else if (strcmp(k, "--stop") == 0)
            o.stop = argv[++a];
        else if (!num(argv[++a], &v))
            return usage();
        else if (strcmp(k, "--n") == 0 && v >= 1 && v <= KP_MAX_N)
            o.n = (unsigned)v;
        else if (strcmp(k, "--inflight") == 0 && v >= 1 && v <= KP_MAX_N)
            o.inflight = (unsigned)v;
        else if (strcmp(k, "--timeout") == 0 && v >= 1)
            o.timeout_ms = v;
        else if (strcmp(k, "--len") == 0 && v >= 1 && v <= (4ull << 30))
            o.len = v;
        else if (strcmp(k, "--hold-ms") == 0 && v <= UINT32_MAX)
            o.hold_ms = v;
        else if (strcmp(k, "--duration") == 0 && v >= 1 && v <= 86400)
            o.duration_s = (unsigned)v;
        else
            return usage();
    }
    if ((o.op == OP_BIG || o.op == OP_ARGS) && o.len > UINT32_MAX)
        return usage();
    return is_stream ? stream(&o) : call(&o);
}
