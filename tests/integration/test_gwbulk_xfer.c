/*
 * Bulk through gateways (docs/bulk-gateway.md), driven by gw_bulk_*.sh.
 *
 *   test_gwbulk_xfer serve URI ADDR_FILE [ALT_URI]
 *   test_gwbulk_xfer run TARGET SIZES [SEED]    pull and push, checksummed
 *   test_gwbulk_xfer hostile TARGET -           forged / out-of-range /
 *                                               wrong-permission / wrong
 *                                               peer / revoked tokens
 *   test_gwbulk_xfer hold TARGET SIZE           one long pull (killed); prints
 *                                               its status, ms from the call
 *                                               and its end (realtime ms)
 *   test_gwbulk_xfer cancel TARGET SIZE MS      cancel a pull after MS
 *   test_gwbulk_xfer once TARGET SIZE pull|push idem|plain TMO_MS
 *                                               one checked call, idempotent
 *                                               or not; prints its status, ms
 *                                               and the server's counters
 *
 * The client exposes a multi-segment buffer (three separate allocations);
 * the server transfers on the handle it receives, which through a gateway
 * is a proxy handle, into a multi-segment buffer of its own, and checks
 * every byte against a position-dependent pattern.  Exit 0 = pass.
 */
#include "../../core/bulk_proxy.h"
#include "../../core/rpc_priv.h"

#include <causeway/routing.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RPC_XFER   "gwbulk.xfer"
#define OP_PULL    1 /* server pulls from the client and checks */
#define OP_PUSH    2 /* server pushes the pattern */
#define OP_HOSTILE 3 /* server abuses the token it got */
#define OP_REPLAY  4 /* server reuses the token of the previous RPC */
#define OP_EXPIRE  5 /* server waits past the deadline, then transfers */
#define OP_REPORT  6 /* what OP_EXPIRE saw */
#define NSEG       3

static uint64_t pat_word(uint64_t seed, uint64_t i)
{
    uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    return x ^ (x >> 29);
}

static uint8_t pat_byte(uint64_t seed, uint64_t off)
{
    return (uint8_t)(pat_word(seed, off / 8) >> (8 * (off % 8)));
}

/* A buffer in NSEG separate allocations. */
struct mbuf {
    struct cw_segment seg[NSEG];
    size_t len;
};

static int mbuf_alloc(struct mbuf *m, size_t len)
{
    size_t a = len / 3, b = len / 2;

    m->len = len;
    m->seg[0].len = a;
    m->seg[1].len = b - a;
    m->seg[2].len = len - b;
    /* Cleared: over shm another process fills it (process_vm_writev),
     * which memcheck in this one cannot see (README.md, "Memcheck"). */
    for (int i = 0; i < NSEG; i++) {
        m->seg[i].base = calloc(1, m->seg[i].len ? m->seg[i].len : 1);
        if (m->seg[i].base == NULL)
            return -1;
    }
    return 0;
}

static void mbuf_free(struct mbuf *m)
{
    for (int i = 0; i < NSEG; i++)
        free(m->seg[i].base);
}

static void mbuf_fill(struct mbuf *m, uint64_t seed)
{
    uint64_t off = 0;

    for (int s = 0; s < NSEG; s++) {
        uint8_t *p = m->seg[s].base;
        for (size_t j = 0; j < m->seg[s].len; j++, off++) {
            if (off % 8 == 0 && j + 8 <= m->seg[s].len) {
                uint64_t w = pat_word(seed, off / 8);
                memcpy(p + j, &w, 8);
                j += 7;
                off += 7;
                continue;
            }
            p[j] = pat_byte(seed, off);
        }
    }
}

/* First differing offset, or len when all match. */
static size_t mbuf_check(const struct mbuf *m, uint64_t seed)
{
    uint64_t off = 0;

    for (int s = 0; s < NSEG; s++) {
        const uint8_t *p = m->seg[s].base;
        for (size_t j = 0; j < m->seg[s].len; j++, off++) {
            if (off % 8 == 0 && j + 8 <= m->seg[s].len) {
                uint64_t w = pat_word(seed, off / 8);
                if (memcmp(p + j, &w, 8) != 0)
                    return off;
                j += 7;
                off += 7;
                continue;
            }
            if (p[j] != pat_byte(seed, off))
                return off;
        }
    }
    return m->len;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

struct wait {
    int done;
    cw_status_t st;
};

static void fwd_cb(cw_handle_t *h, cw_status_t st, void *arg)
{
    struct wait *w = arg;
    (void)h;
    w->st = st;
    w->done = 1;
}

/* Progress until @p w is done (bounded). */
static cw_status_t wait_done(cw_context_t *ctx, struct wait *w, unsigned ms)
{
    uint64_t end = now_ms() + ms;

    while (!w->done && now_ms() < end) {
        cw_progress(ctx, 10);
        cw_trigger(ctx, 0, 0, NULL);
    }
    return w->done ? w->st : CW_TIMEOUT;
}

/* ---- server ------------------------------------------------------------- */

static cw_handle_t *g_job;
static cw_bulk_t *g_job_bulk;
static uint8_t g_job_op;
static uint8_t g_old_token[CW_BPROXY_TOKEN_LEN];
static bool g_have_old;
static const char *g_alt_uri; /* server: second endpoint (hostile) */
static cw_status_t g_exp_local = CW_INTERNAL, g_exp_gw = CW_INTERNAL;
static bool g_granted; /* the last raw delegation got a zero-staging grant */

/* A grant in answer to a raw delegation must cover exactly what was asked
 * with the one right asked. */
static cw_status_t check_grant(cw_handle_t *h, uint8_t dir, uint64_t len)
{
    cw_buf_t *out = cw_handle_output(h);
    uint8_t kind = 0, perm = 0;
    uint64_t glen = 0;
    const char *owner = NULL;

    if (cw_buf_remaining(out) == 0)
        return CW_OK; /* staged by the gateway */
    cw_buf_get_u8(out, &kind);
    cw_buf_get_str(out, &owner);
    cw_buf_get_u8(out, &perm);
    cw_buf_get_u64(out, &glen);
    if (cw_buf_error(out) != CW_OK || kind != CW_BPROXY_GRANT ||
        owner == NULL || glen != len ||
        perm != (dir == CW_BULK_PULL ? CW_BULK_READ_ONLY : CW_BULK_WRITE_ONLY))
        return CW_PROTOCOL;
    g_granted = true;
    return CW_OK;
}

/* A raw delegation request, as a target's core would send it (asking for
 * a grant), but with fields chosen by the test. */
static cw_status_t raw_deleg(cw_context_t *ctx, cw_addr_t *gw,
                             const uint8_t *tok, uint8_t dir, uint64_t off,
                             uint64_t len)
{
    struct wait w = {0};
    struct mbuf m;
    cw_bulk_t *b = NULL;
    cw_handle_t *h = NULL;
    cw_buf_t *in;
    cw_status_t st;

    if (mbuf_alloc(&m, len) != 0)
        return CW_NOMEM;
    st = cw_bulk_create(
        ctx, m.seg, NSEG,
        dir == CW_BULK_PULL ? CW_BULK_WRITE_ONLY : CW_BULK_READ_ONLY, &b);
    if (st == CW_OK)
        st = cw_handle_create(ctx, gw, cw_rpc_id(CW_BPROXY_RPC), &h);
    if (st == CW_OK) {
        in = cw_handle_input(h);
        cw_buf_put_bytes(in, tok, CW_BPROXY_TOKEN_LEN);
        cw_buf_put_u8(in, dir);
        cw_buf_put_u64(in, off);
        cw_buf_put_u64(in, len);
        cw_buf_put_u32(in, CW_BPROXY_DIRECT);
        cw_buf_put_bulk(in, b);
        st = cw_buf_error(in);
    }
    if (st == CW_OK)
        st = cw_forward(h, 10000, fwd_cb, &w);
    if (st == CW_OK)
        st = wait_done(ctx, &w, 15000);
    g_granted = false;
    if (st == CW_OK)
        st = check_grant(h, dir, len);
    cw_handle_release(h);
    cw_bulk_free(b);
    mbuf_free(&m);
    return st;
}

/* The hostile cases; statuses go into the response. */
static void run_hostile(cw_context_t *ctx, cw_handle_t *h, cw_bulk_t *rb)
{
    cw_buf_t *out = cw_handle_output(h);
    cw_addr_t *gw = cw_handle_source(h);
    uint8_t forged[CW_BPROXY_TOKEN_LEN];
    cw_context_t *alt = NULL;
    cw_network_t *anet;
    cw_addr_t *agw = NULL;
    char gwuri[CW_ADDR_STR_MAX];
    size_t total = cw_bulk_size(rb);
    cw_status_t st;

    memcpy(forged, rb->ptoken, sizeof(forged));
    forged[5] ^= 0x40;
    cw_buf_put_u32(out, cw_bproxy_is_proxy(rb));
    cw_buf_put_u32(out, raw_deleg(ctx, gw, forged, CW_BULK_PULL, 0, 64));
    cw_buf_put_u32(
        out, raw_deleg(ctx, gw, rb->ptoken, CW_BULK_PULL, total - 10, 64));
    cw_buf_put_u32(out, raw_deleg(ctx, gw, rb->ptoken, CW_BULK_PUSH, 0, 64));
    /* The right token from another endpoint than the one it was issued
     * to. */
    st = cw_context_create(NULL, &alt);
    if (st == CW_OK)
        st = cw_network_open(alt, g_alt_uri, CW_NET_LISTEN, &anet);
    if (st == CW_OK)
        st = cw_addr_to_string(gw, gwuri, sizeof(gwuri));
    if (st == CW_OK)
        st = cw_addr_lookup(alt, gwuri, &agw);
    if (st == CW_OK)
        st = raw_deleg(alt, agw, rb->ptoken, CW_BULK_PULL, 0, 64);
    else
        fprintf(stderr, "server: second endpoint %s: %s\n", g_alt_uri,
                cw_status_str(st));
    cw_buf_put_u32(out, st);
    cw_addr_free(agw);
    cw_context_destroy(alt);
    /* And the legitimate use still works. */
    cw_buf_put_u32(out, raw_deleg(ctx, gw, rb->ptoken, CW_BULK_PULL, 0, 64));
    cw_buf_put_u32(out, g_granted);
    /* A request no target's core would send: direction 7. */
    cw_buf_put_u32(out, raw_deleg(ctx, gw, rb->ptoken, 7, 0, 64));
    memcpy(g_old_token, rb->ptoken, sizeof(g_old_token));
    g_have_old = true;
}

/* How many times the handler ran for each seed (a resumed RPC runs once,
 * a restarted one twice). */
#define NRUNS 64
static struct {
    uint64_t seed;
    uint64_t n;
} g_runs[NRUNS];
static unsigned g_nruns;

static uint64_t *runs_of(uint64_t seed)
{
    for (unsigned i = 0; i < g_nruns; i++)
        if (g_runs[i].seed == seed)
            return &g_runs[i].n;
    if (g_nruns == NRUNS)
        return &g_runs[NRUNS - 1].n;
    g_runs[g_nruns].seed = seed;
    return &g_runs[g_nruns++].n;
}

/* One data transfer on the server, completed from its callback (several
 * run at once). */
struct job {
    cw_handle_t *h;
    cw_bulk_t *rb, *lb;
    struct mbuf m;
    uint8_t op;
    uint64_t len, seed;
};

static void job_end(struct job *j, cw_status_t st)
{
    struct cw_context_stats cs = {0};
    cw_buf_t *out = cw_handle_output(j->h);

    cw_context_stats(cw_handle_context(j->h), &cs);
    cw_buf_put_u8(out, cw_bproxy_is_proxy(j->rb));
    /* What `once` prints: handler runs for this RPC, resumes attached,
     * bytes delegated again after a resume, transfers suspended. */
    cw_buf_put_u64(out, *runs_of(j->seed));
    cw_buf_put_u64(out, cs.resumed);
    cw_buf_put_u64(out, cs.resume_bytes);
    cw_buf_put_u64(out, cs.suspended);
    fprintf(stderr,
            "server: job %s of %llu bytes ended %s (handler runs %llu)"
            "\n",
            j->op == OP_PULL ? "pull" : "push", (unsigned long long)j->len,
            cw_status_name(st), (unsigned long long)*runs_of(j->seed));
    cw_respond(j->h, st, NULL, NULL);
    cw_handle_release(j->h);
    cw_bulk_free(j->rb);
    cw_bulk_free(j->lb);
    mbuf_free(&j->m);
    free(j);
}

static void job_cb(cw_status_t st, void *arg)
{
    struct job *j = arg;

    if (st == CW_OK && j->op == OP_PULL &&
        mbuf_check(&j->m, j->seed) != j->len) {
        fprintf(stderr, "server: pulled data differs at byte %zu of %zu\n",
                mbuf_check(&j->m, j->seed), (size_t)j->len);
        st = CW_IO;
    }
    job_end(j, st);
}

static void start_job(cw_context_t *ctx, cw_handle_t *h, uint8_t op,
                      uint64_t len, uint64_t seed, cw_bulk_t *rb)
{
    struct job *j = calloc(1, sizeof(*j));
    cw_status_t st;

    if (j == NULL) {
        cw_respond(h, CW_NOMEM, NULL, NULL);
        cw_handle_release(h);
        cw_bulk_free(rb);
        return;
    }
    j->h = h;
    j->rb = rb;
    j->op = op;
    j->len = len;
    j->seed = seed;
    (*runs_of(seed))++;
    if (mbuf_alloc(&j->m, len) != 0) {
        job_end(j, CW_NOMEM);
        return;
    }
    if (op == OP_PUSH)
        mbuf_fill(&j->m, seed);
    st = cw_bulk_create(ctx, j->m.seg, NSEG, CW_BULK_READ_WRITE, &j->lb);
    if (st == CW_OK)
        st = cw_bulk_transfer(ctx, op == OP_PULL ? CW_BULK_PULL : CW_BULK_PUSH,
                              cw_handle_source(h), rb, 0, j->lb, 0, len, job_cb,
                              j, NULL);
    if (st != CW_OK)
        job_end(j, st);
}

static void h_xfer(cw_handle_t *h, void *arg)
{
    cw_context_t *ctx = arg;
    cw_buf_t *in = cw_handle_input(h);
    uint8_t op = 0;
    uint64_t len = 0, seed = 0;
    cw_bulk_t *rb = NULL;

    cw_buf_get_u8(in, &op);
    cw_buf_get_u64(in, &len);
    cw_buf_get_u64(in, &seed);
    cw_buf_get_bulk(in, &rb);
    if (cw_buf_error(in) != CW_OK || g_job != NULL) {
        cw_respond(h, cw_buf_error(in) != CW_OK ? cw_buf_error(in) : CW_BUSY,
                   NULL, NULL);
        cw_handle_release(h);
        cw_bulk_free(rb);
        return;
    }
    if (op == OP_PULL || op == OP_PUSH) {
        start_job(ctx, h, op, len, seed, rb);
        return;
    }
    /* Hostile cases run from the main loop, which may wait. */
    g_job = h;
    g_job_bulk = rb;
    g_job_op = op;
}

static void run_job(cw_context_t *ctx, cw_handle_t *h, uint8_t op,
                    cw_bulk_t *rb)
{
    cw_status_t st = CW_OK;

    if (op == OP_HOSTILE) {
        run_hostile(ctx, h, rb);
    } else if (op == OP_EXPIRE) {
        /* Outlive the caller's deadline, then use the handle: the core
         * refuses it locally, the gateway too. */
        struct wait never = {0};
        struct mbuf m;
        cw_bulk_t *lb = NULL;

        wait_done(ctx, &never, 1500);
        if (mbuf_alloc(&m, 64) == 0) {
            if (cw_bulk_create(ctx, m.seg, NSEG, CW_BULK_READ_WRITE, &lb) ==
                CW_OK)
                g_exp_local =
                    cw_bulk_transfer(ctx, CW_BULK_PULL, cw_handle_source(h), rb,
                                     0, lb, 0, 64, NULL, NULL, NULL);
            cw_bulk_free(lb);
            mbuf_free(&m);
        }
        g_exp_gw = raw_deleg(ctx, cw_handle_source(h), rb->ptoken, CW_BULK_PULL,
                             0, 64);
    } else if (op == OP_REPORT) {
        cw_buf_put_u32(cw_handle_output(h), g_exp_local);
        cw_buf_put_u32(cw_handle_output(h), g_exp_gw);
    } else if (op == OP_REPLAY) {
        st = g_have_old ? raw_deleg(ctx, cw_handle_source(h), g_old_token,
                                    CW_BULK_PULL, 0, 64)
                        : CW_INTERNAL;
        cw_buf_put_u32(cw_handle_output(h), st);
        st = CW_OK;
    } else {
        st = CW_INVALID_ARG;
    }
    cw_respond(h, st, NULL, NULL);
    cw_handle_release(h);
    cw_bulk_free(rb);
}

static volatile sig_atomic_t g_stop;

static void on_term(int sig)
{
    (void)sig;
    g_stop = 1;
}

/* Serves until SIGTERM, then shuts down cleanly (the sanitizers check for
 * leaks at exit). */
static int serve(const char *uri, const char *addr_file)
{
    struct sigaction sa = {.sa_handler = on_term};
    cw_context_t *ctx;
    cw_network_t *net;
    char self[CW_URI_MAX];
    FILE *f;

    if (cw_context_create(NULL, &ctx) != CW_OK ||
        cw_network_open(ctx, uri, CW_NET_LISTEN, &net) != CW_OK ||
        cw_network_uri(net, self, sizeof(self)) != CW_OK ||
        cw_rpc_register(ctx, RPC_XFER, h_xfer, ctx, NULL, NULL) != CW_OK)
        return 2;
    f = fopen(addr_file, "w");
    if (f == NULL)
        return 2;
    fprintf(f, "%s\n", self);
    fclose(f);
    sigaction(SIGTERM, &sa, NULL);
    while (!g_stop) {
        cw_progress(ctx, 20);
        cw_trigger(ctx, 0, 0, NULL);
        if (g_job != NULL) {
            run_job(ctx, g_job, g_job_op, g_job_bulk);
            g_job = NULL;
        }
    }
    if (g_job != NULL) {
        cw_respond(g_job, CW_CANCELED, NULL, NULL);
        cw_handle_release(g_job);
        cw_bulk_free(g_job_bulk);
    }
    cw_context_destroy(ctx);
    return 0;
}

/* ---- client ------------------------------------------------------------- */

/* Send @p op on @p len bytes of @p m; *h_p and *b_p are set (may be NULL)
 * whatever happens, for the caller to release. */
static bool g_idempotent; /* client: mark calls idempotent */

static cw_status_t start_call(cw_context_t *ctx, cw_addr_t *dst, uint8_t op,
                              size_t len, uint64_t seed, uint32_t perm,
                              struct mbuf *m, unsigned tmo, struct wait *w,
                              cw_handle_t **h_p, cw_bulk_t **b_p)
{
    cw_buf_t *in;
    cw_status_t st;

    *h_p = NULL;
    st = cw_bulk_create(ctx, m->seg, NSEG, perm, b_p);
    if (st != CW_OK) {
        *b_p = NULL;
        return st;
    }
    st = cw_handle_create(ctx, dst, cw_rpc_id(RPC_XFER), h_p);
    if (st == CW_OK && g_idempotent)
        st = cw_handle_set_idempotent(*h_p, true);
    if (st != CW_OK)
        return st;
    in = cw_handle_input(*h_p);
    cw_buf_put_u8(in, op);
    cw_buf_put_u64(in, len);
    cw_buf_put_u64(in, seed);
    cw_buf_put_bulk(in, *b_p);
    st = cw_buf_error(in);
    if (st == CW_OK)
        st = cw_forward(*h_p, tmo, fwd_cb, w);
    return st;
}

/* One call: @p op on @p len bytes; returns the RPC status. */
static cw_status_t call(cw_context_t *ctx, cw_addr_t *dst, uint8_t op,
                        size_t len, uint64_t seed, uint32_t perm,
                        struct mbuf *m, cw_handle_t **h_p, unsigned tmo)
{
    struct wait w = {0};
    cw_bulk_t *b = NULL;
    cw_handle_t *h = NULL;
    cw_status_t st;

    st = start_call(ctx, dst, op, len, seed, perm, m, tmo, &w, &h, &b);
    if (st == CW_OK)
        st = wait_done(ctx, &w, tmo + 5000);
    if (h_p != NULL && h != NULL) {
        *h_p = h;
        h = NULL;
    }
    cw_handle_release(h);
    cw_bulk_free(b);
    return st;
}

static size_t parse_size(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);

    if (*end == 'K')
        v <<= 10;
    else if (*end == 'M')
        v <<= 20;
    else if (*end == 'G')
        v <<= 30;
    return (size_t)v;
}

static int run(cw_context_t *ctx, cw_addr_t *dst, char *sizes, uint64_t seed)
{
    int fails = 0;

    for (char *s = strtok(sizes, ","); s != NULL; s = strtok(NULL, ",")) {
        size_t len = parse_size(s);
        for (uint8_t op = OP_PULL; op <= OP_PUSH; op++) {
            struct mbuf m;
            cw_handle_t *h = NULL;
            uint8_t proxied = 0;
            uint64_t t0 = now_ms();
            cw_status_t st;
            size_t bad = len;

            if (mbuf_alloc(&m, len) != 0) {
                printf("not ok - cannot allocate %zu bytes\n", len);
                return 1;
            }
            if (op == OP_PULL)
                mbuf_fill(&m, seed + len);
            else
                for (int i = 0; i < NSEG; i++)
                    memset(m.seg[i].base, 0, m.seg[i].len);
            st = call(ctx, dst, op, len, seed + len,
                      op == OP_PULL ? CW_BULK_READ_ONLY : CW_BULK_WRITE_ONLY,
                      &m, &h, 600000);
            if (st == CW_OK)
                cw_buf_get_u8(cw_handle_output(h), &proxied);
            if (st == CW_OK && op == OP_PUSH)
                bad = mbuf_check(&m, seed + len);
            if (st != CW_OK || bad != len || !proxied) {
                printf("not ok - %s %zu bytes: %s%s, first bad byte %zu\n",
                       op == OP_PULL ? "pull" : "push", len, cw_status_name(st),
                       proxied ? "" : " (not proxied)", bad);
                fails++;
            } else {
                printf("ok - %s %zu bytes through proxy handles, checked "
                       "(%llu ms)\n",
                       op == OP_PULL ? "pull" : "push", len,
                       (unsigned long long)(now_ms() - t0));
            }
            cw_handle_release(h);
            mbuf_free(&m);
        }
    }
    return fails ? 1 : 0;
}

static int expect(const char *what, uint32_t got, cw_status_t want)
{
    if (got == (uint32_t)want) {
        printf("ok - %s: %s\n", what, cw_status_name(want));
        return 0;
    }
    printf("not ok - %s: %s, expected %s\n", what,
           cw_status_name((cw_status_t)got), cw_status_name(want));
    return 1;
}

static int hostile(cw_context_t *ctx, cw_addr_t *dst)
{
    struct mbuf m;
    cw_handle_t *h = NULL;
    uint32_t v[8] = {0};
    int fails = 0;
    cw_status_t st;

    if (mbuf_alloc(&m, 4096) != 0)
        return 1;
    mbuf_fill(&m, 7);
    st = call(ctx, dst, OP_HOSTILE, 4096, 7, CW_BULK_READ_ONLY, &m, &h, 60000);
    for (int i = 0; i < 8 && st == CW_OK; i++)
        st = cw_buf_get_u32(cw_handle_output(h), &v[i]);
    cw_handle_release(h);
    h = NULL;
    if (st != CW_OK) {
        printf("not ok - hostile RPC: %s\n", cw_status_name(st));
        mbuf_free(&m);
        return 1;
    }
    fails +=
        expect("target got a proxy handle", v[0] ? CW_OK : CW_INTERNAL, CW_OK);
    fails += expect("forged token", v[1], CW_BAD_HANDLE);
    fails += expect("out-of-bounds range", v[2], CW_RANGE);
    fails += expect("push on a read-only handle", v[3], CW_PERMISSION);
    fails += expect("token used by another peer", v[4], CW_BAD_HANDLE);
    fails += expect("legitimate use", v[5], CW_OK);
    printf(v[6] ? "ok - legitimate use answered with a grant\n"
                : "# legitimate use staged by the gateway\n");
    fails += expect("malformed delegation (direction 7)", v[7], CW_PROTOCOL);
    st = call(ctx, dst, OP_REPLAY, 4096, 7, CW_BULK_READ_ONLY, &m, &h, 60000);
    if (st == CW_OK)
        st = cw_buf_get_u32(cw_handle_output(h), &v[0]);
    cw_handle_release(h);
    fails += expect("token of a completed RPC (revoked)",
                    st == CW_OK ? v[0] : st, CW_BAD_HANDLE);
    /* A handle used after its RPC's deadline (1 s). */
    st = call(ctx, dst, OP_EXPIRE, 4096, 7, CW_BULK_READ_ONLY, &m, NULL, 1000);
    fails += expect("RPC outlived by its handler", st, CW_TIMEOUT);
    for (int i = 0; i < 100; i++) { /* the server is still in its wait */
        st =
            call(ctx, dst, OP_REPORT, 4096, 7, CW_BULK_READ_ONLY, &m, &h, 5000);
        if (st != CW_BUSY)
            break;
        cw_handle_release(h);
        h = NULL;
        usleep(50000);
    }
    if (st == CW_OK)
        st = cw_buf_get_u32(cw_handle_output(h), &v[0]);
    if (st == CW_OK)
        st = cw_buf_get_u32(cw_handle_output(h), &v[1]);
    cw_handle_release(h);
    fails += expect("expired handle, checked by the target's core",
                    st == CW_OK ? v[0] : st, CW_EXPIRED);
    /* At the gateway the token is past its expiry and, since the forward
     * timed out at that same deadline, revoked: either refusal is right. */
    if (st == CW_OK && v[1] == CW_EXPIRED)
        fails += expect("expired token at the gateway", v[1], CW_EXPIRED);
    else
        fails += expect("expired token at the gateway (already revoked)",
                        st == CW_OK ? v[1] : st, CW_BAD_HANDLE);
    mbuf_free(&m);
    return fails ? 1 : 0;
}

/* One call of @p op on @p len bytes, checked; prints "STATUS MS RUNS
 * RESUMED RESUME_BYTES SUSPENDED REFORWARDED" (four from the server, then
 * this client's re-forwards through another gateway of its routes). */
static int once(cw_context_t *ctx, cw_addr_t *dst, size_t len, uint8_t op,
                unsigned tmo)
{
    uint64_t seed = (uint64_t)now_ms() ^ ((uint64_t)getpid() << 32);
    uint64_t v[4] = {0}, t0;
    cw_handle_t *h = NULL;
    uint8_t proxied = 0;
    struct mbuf m;
    cw_status_t st;

    if (mbuf_alloc(&m, len) != 0)
        return 2;
    if (op == OP_PULL)
        mbuf_fill(&m, seed);
    else
        for (int i = 0; i < NSEG; i++)
            memset(m.seg[i].base, 0, m.seg[i].len);
    /* Timed from the call on, as its deadline is: filling 64 MiB under
     * ASan on a loaded machine took over a second, which once read as a
     * timeout 1.3 s past its deadline. */
    t0 = now_ms();
    st = call(ctx, dst, op, len, seed,
              op == OP_PULL ? CW_BULK_READ_ONLY : CW_BULK_WRITE_ONLY, &m, &h,
              tmo);
    if (st == CW_OK)
        st = cw_buf_get_u8(cw_handle_output(h), &proxied);
    for (int i = 0; i < 4 && st == CW_OK; i++)
        st = cw_buf_get_u64(cw_handle_output(h), &v[i]);
    if (st == CW_OK && op == OP_PUSH && mbuf_check(&m, seed) != len) {
        fprintf(stderr, "pushed data differs at byte %zu\n",
                mbuf_check(&m, seed));
        st = CW_IO;
    }
    if (st == CW_OK && !proxied)
        st = CW_INTERNAL;
    {
        struct cw_context_stats cs = {0};
        cw_context_stats(ctx, &cs);
        printf("%s %llu %llu %llu %llu %llu %llu\n", cw_status_name(st),
               (unsigned long long)(now_ms() - t0), (unsigned long long)v[0],
               (unsigned long long)v[1], (unsigned long long)v[2],
               (unsigned long long)v[3], (unsigned long long)cs.reforwarded);
    }
    cw_handle_release(h);
    mbuf_free(&m);
    return st == CW_OK ? 0 : 1;
}

/* Start a pull of @p len bytes and cancel it after @p ms: the forward
 * must end CW_CANCELED at once. */
static int cancel_after(cw_context_t *ctx, cw_addr_t *dst, size_t len,
                        unsigned ms)
{
    struct wait w = {0};
    struct mbuf m;
    cw_bulk_t *b = NULL;
    cw_handle_t *h = NULL;
    cw_status_t st;
    uint64_t t0, tc = 0;

    if (mbuf_alloc(&m, len) != 0)
        return 1;
    mbuf_fill(&m, 5);
    st = start_call(ctx, dst, OP_PULL, len, 5, CW_BULK_READ_ONLY, &m, 60000, &w,
                    &h, &b);
    t0 = now_ms();
    while (st == CW_OK && !w.done && now_ms() < t0 + 65000) {
        cw_progress(ctx, 5);
        cw_trigger(ctx, 0, 0, NULL);
        if (tc == 0 && now_ms() >= t0 + ms) {
            tc = now_ms();
            cw_cancel(h);
        }
    }
    if (st == CW_OK)
        st = w.done ? w.st : CW_TIMEOUT;
    printf("%s %llu\n", cw_status_name(st),
           (unsigned long long)(tc ? now_ms() - tc : 0));
    /* Stay a moment so the CANCEL reaches the gateway before the memory
     * goes away. */
    for (uint64_t t = now_ms(); now_ms() < t + 300;) {
        cw_progress(ctx, 10);
        cw_trigger(ctx, 0, 0, NULL);
    }
    cw_handle_release(h);
    cw_bulk_free(b);
    mbuf_free(&m);
    return st == CW_CANCELED ? 0 : 1;
}

int main(int argc, char **argv)
{
    cw_context_t *ctx = NULL;
    cw_addr_t *dst = NULL;
    int rc = 2;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if ((argc == 4 || argc == 5) && strcmp(argv[1], "serve") == 0) {
        g_alt_uri = argc == 5 ? argv[4] : "shm://";
        return serve(argv[2], argv[3]);
    }
    if (argc < 4) {
        fprintf(stderr, "usage: see the file header\n");
        return 2;
    }
    if (cw_context_create(NULL, &ctx) != CW_OK ||
        cw_client_routes_load(ctx, NULL) != CW_OK || /* $CAUSEWAY_ROUTES */
        cw_addr_lookup(ctx, argv[2], &dst) != CW_OK) {
        fprintf(stderr, "cannot reach %s\n", argv[2]);
        goto out;
    }
    if (strcmp(argv[1], "run") == 0)
        rc = run(ctx, dst, argv[3], argc > 4 ? strtoull(argv[4], NULL, 10) : 1);
    else if (strcmp(argv[1], "hostile") == 0)
        rc = hostile(ctx, dst);
    else if (strcmp(argv[1], "cancel") == 0 && argc == 5)
        rc = cancel_after(ctx, dst, parse_size(argv[3]),
                          (unsigned)strtoul(argv[4], NULL, 10));
    else if (strcmp(argv[1], "once") == 0 && argc == 7) {
        g_idempotent = strcmp(argv[5], "idem") == 0;
        rc = once(ctx, dst, parse_size(argv[3]),
                  strcmp(argv[4], "push") == 0 ? OP_PUSH : OP_PULL,
                  (unsigned)strtoul(argv[6], NULL, 10));
    } else if (strcmp(argv[1], "hold") == 0) {
        struct mbuf m;
        size_t len = parse_size(argv[3]);
        cw_status_t st;
        uint64_t t0;
        struct timespec end;

        if (mbuf_alloc(&m, len) == 0) {
            mbuf_fill(&m, 3);
            t0 = now_ms(); /* the deadline counts from here */
            st = call(ctx, dst, OP_PULL, len, 3, CW_BULK_READ_ONLY, &m, NULL,
                      20000);
            /* Also when it ended on the wall clock, which the script
             * compares with when it killed. */
            clock_gettime(CLOCK_REALTIME, &end);
            printf("%s %llu %llu\n", cw_status_name(st),
                   (unsigned long long)(now_ms() - t0),
                   (unsigned long long)end.tv_sec * 1000 +
                       (unsigned long long)end.tv_nsec / 1000000);
            mbuf_free(&m);
            rc = 0;
        }
    }
out:
    cw_addr_free(dst);
    cw_context_destroy(ctx);
    return rc;
}
