/*
 * cw-perf: RPC latency/rate and bulk bandwidth benchmark.
 *
 *   cw-perf server --listen ADDR [--addr-file F] [--busy] [--coalesce]
 *                  [--contexts N]
 *   cw-perf client --target ADDR --test lat|rate|bw [--sizes LIST]
 *                  [--inflight N] [--iters N | --time S] [--reps N] [--busy]
 *                  [--json | --csv] [--dir pull|push|both] [--coalesce]
 *                  [--verify] [--reply-size N]
 *
 * Every figure is the median of --reps repeated runs; next to it, the
 * distribution of single calls over all of them (p50, p99, p99.9, max of
 * the time from cw_forward to the completion callback).  The target may be
 * a proxied address ("target@gateway"), which is how gateway overhead is
 * measured.  --coalesce opens the context with CW_CTX_COALESCE: the
 * server's answers given in one cw_trigger() pass, and the requests the
 * client sends in one refill of its window, leave one message per peer.
 * --contexts N serves the one address from N contexts on N threads, the
 * callers spread over them (cw_network_open_spread).
 *
 * --verify makes every call carry a pattern drawn from its own seed: the
 * server checks the request and echoes it (lat, rate), checks what it
 * pulled or pushes a pattern the client checks (bw).  A verified call
 * costs a handle of its own and the filling and checking, so timing runs
 * leave it off.  CW_PERF_CORRUPT=N (tests only) flips a byte of every Nth
 * verified answer, transfer or request, to show that the checks work.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <causeway/causeway.h>
#include <causeway/routing.h>

#include "cli_json.h"
#include "cli_num.h"
#include "perf_check.h"
#include "perf_plot.h"

#define RPC_ECHO       "cw-perf.rpc"
#define RPC_BULK       "cw-perf.bulk"
#define RPC_QUIT       "cw-perf.quit"
#define MAX_SIZES      16
#define MAX_INFLIGHT   256
#define MAX_CONTEXTS   64
#define MAX_REPS       64
#define MAX_REPLY      (1u << 30)
#define MAX_PLOT_FILES 16

/* Wire (only this program speaks it).  RPC_ECHO: bytes payload, then
 * optionally u8 flags, u32 reply size, u64 seed; without the trailer the
 * answer is empty (how timing runs call), with it the answer is the reply:
 * [u64 request check, u8 byte seen, with ECHO_VERIFY] bytes reply.  RPC_BULK:
 * u8 dir (1 pull, 2 push; | DIR_VERIFY), bulk, [u64 seed]; answer u64 transfer
 * ns, [u64 check, u8 byte seen, with DIR_VERIFY].  A check is 0 when the
 * data matched, else 1 + the offset of the first wrong byte. */
#define ECHO_VERIFY 0x1u
#define DIR_VERIFY  0x80u

static atomic_int stop; /* signals, the quit RPC, any server thread */
static bool busy;
static bool coalesce;
/* Directions --test bw measures: bit 0 pull, bit 1 push. */
static unsigned bw_dirs = 3;
/* CW_PERF_CORRUPT: every Nth verified datum gets a byte flipped. */
static unsigned corrupt_every;
static atomic_uint corrupt_seen;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: cw-perf server --listen ADDR [--addr-file F] [--busy]\n"
            "               [--coalesce] [--contexts N]\n"
            "       cw-perf client --target ADDR --test lat|rate|bw\n"
            "               [--sizes LIST] [--inflight N]\n"
            "               [--iters N | --time SECONDS] [--reps N]\n"
            "               [--busy] [--json | --csv] [--coalesce]\n"
            "               [--verify] [--reply-size N]  (lat, rate)\n"
            "               [--dir pull|push|both]   (bw only; default both)\n"
            "               [--plot FILE.png]   (latency and bandwidth "
            "against size, gnuplot)\n"
            "       cw-perf quit --target ADDR\n"
            "       cw-perf plot --plot FILE.png --plot-from A.json "
            "[B.json...]\n"
            "               (several runs side by side: direct vs through a "
            "gateway)\n"
            "sizes take K/M/G suffixes (powers of 1024), e.g. 0,64,4K,64K\n"
            "--time: each repetition runs SECONDS instead of --iters calls\n"
            "--verify: every call carries its own pattern, checked at the\n"
            "  other end (a mismatch fails the run, exit 1); it costs a\n"
            "  handle per call and the checking: timing runs leave it off\n"
            "--reply-size N: the server answers N bytes (default: nothing;\n"
            "  with --verify, the request echoed)\n");
}

static bool parse_size(const char *s, size_t *v_p)
{
    unsigned long long v;

    if (!cli_size(s, SIZE_MAX, &v))
        return false;
    *v_p = (size_t)v;
    return true;
}

static int parse_sizes(const char *list, size_t *sizes)
{
    char buf[512];
    int n = 0;

    snprintf(buf, sizeof(buf), "%s", list);
    for (char *save, *t = strtok_r(buf, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
        if (n == MAX_SIZES || !parse_size(t, &sizes[n]))
            return -1;
        n++;
    }
    return n;
}

static void pump(cw_context_t *ctx)
{
    cw_progress(ctx, busy ? 0 : 100);
    cw_trigger(ctx, 0, 0, NULL);
}

/* Flip a byte of @p p if this is the Nth datum (CW_PERF_CORRUPT=N). */
static void maybe_corrupt(uint8_t *p, size_t len)
{
    unsigned k;

    if (corrupt_every == 0 || len == 0)
        return;
    k = atomic_fetch_add(&corrupt_seen, 1) + 1;
    if (k % corrupt_every == 0)
        p[len / 2] ^= 0xff;
}

static uint64_t check_word(size_t bad, size_t len)
{
    return bad < len ? (uint64_t)bad + 1 : 0;
}

/* ---- server ------------------------------------------------------------ */

struct srv {
    cw_context_t *ctx;
    uint8_t *buf; /* unverified transfers, all of them at once */
    size_t cap;
    cw_bulk_t *local;
    uint8_t *reply; /* answers, composed one at a time */
    size_t reply_cap;
};

struct srv_xfer {
    cw_handle_t *h;
    cw_bulk_t *remote;
    uint64_t t0;
    uint64_t seed;
    uint8_t dir;
    bool verify;
    size_t len;
    /* A verified transfer has memory of its own; others share srv's. */
    uint8_t *buf;
    cw_bulk_t *own;
};

/* Grow @p *p_p to @p len bytes, new bytes zeroed. */
static bool grow(uint8_t **p_p, size_t *cap_p, size_t len)
{
    uint8_t *nb;

    if (len <= *cap_p)
        return true;
    nb = realloc(*p_p, len);
    if (nb == NULL)
        return false;
    memset(nb + *cap_p, 0, len - *cap_p);
    *p_p = nb;
    *cap_p = len;
    return true;
}

static cw_status_t srv_reply(struct srv *s, cw_buf_t *out, const uint8_t *p,
                             size_t n, uint8_t flags, uint32_t rsize,
                             uint64_t seed)
{
    if (!grow(&s->reply, &s->reply_cap, rsize))
        return CW_NOMEM;
    if (flags & ECHO_VERIFY) {
        size_t keep = n < rsize ? n : rsize;

        size_t bad = perf_pattern_find(p, n, seed);

        cw_buf_put_u64(out, check_word(bad, n));
        cw_buf_put_u8(out, bad < n ? p[bad] : 0);
        if (keep > 0)
            memcpy(s->reply, p, keep);
        perf_pattern_fill(s->reply, keep, rsize, seed);
        maybe_corrupt(s->reply, rsize);
    }
    return cw_buf_put_bytes(out, s->reply, rsize);
}

static void h_rpc(cw_handle_t *h, void *arg)
{
    struct srv *s = arg;
    cw_buf_t *in = cw_handle_input(h);
    const void *p = NULL;
    size_t n = 0;
    uint8_t flags = 0;
    uint32_t rsize = 0;
    uint64_t seed = 0;
    cw_status_t st;

    cw_buf_get_bytes(in, &p, &n);
    if (cw_buf_remaining(in) > 0) {
        cw_buf_get_u8(in, &flags);
        cw_buf_get_u32(in, &rsize);
        cw_buf_get_u64(in, &seed);
    }
    st = cw_buf_error(in);
    if (st == CW_OK && rsize > MAX_REPLY)
        st = CW_INVALID_ARG;
    if (st == CW_OK && ((flags & ECHO_VERIFY) || rsize > 0))
        st = srv_reply(s, cw_handle_output(h), p, n, flags, rsize, seed);
    cw_respond(h, st, NULL, NULL);
    cw_handle_release(h);
}

static void xfer_free(struct srv_xfer *x)
{
    cw_bulk_free(x->remote);
    cw_bulk_free(x->own);
    free(x->buf);
    free(x);
}

static void xfer_done(cw_status_t st, void *arg)
{
    struct srv_xfer *x = arg;
    cw_buf_t *out = cw_handle_output(x->h);

    cw_buf_put_u64(out, cw_now_ns() - x->t0);
    if (x->verify) {
        size_t bad = x->len;

        if (x->dir == 1) {
            maybe_corrupt(x->buf, x->len);
            bad = perf_pattern_find(x->buf, x->len, x->seed);
        }
        cw_buf_put_u64(out, check_word(bad, x->len));
        cw_buf_put_u8(out, bad < x->len ? x->buf[bad] : 0);
    }
    cw_respond(x->h, st, NULL, NULL);
    cw_handle_release(x->h);
    xfer_free(x);
}

/* The shared memory of unverified transfers, grown to @p len. */
static cw_status_t srv_shared(struct srv *s, size_t len)
{
    struct cw_segment seg;
    size_t old = s->cap;

    if (len <= s->cap)
        return CW_OK;
    if (!grow(&s->buf, &s->cap, len))
        return CW_NOMEM;
    memset(s->buf + old, 0xa5, len - old);
    cw_bulk_free(s->local);
    s->local = NULL;
    seg.base = s->buf;
    seg.len = len;
    return cw_bulk_create(s->ctx, &seg, 1, CW_BULK_READ_WRITE, &s->local);
}

/* Memory of a verified transfer's own; a push's holds its pattern. */
static cw_status_t xfer_own(struct srv *s, struct srv_xfer *x)
{
    struct cw_segment seg;

    x->buf = malloc(x->len ? x->len : 1);
    if (x->buf == NULL)
        return CW_NOMEM;
    if (x->dir == 2) {
        perf_pattern_fill(x->buf, 0, x->len, x->seed);
        maybe_corrupt(x->buf, x->len);
    }
    seg.base = x->buf;
    seg.len = x->len;
    return cw_bulk_create(s->ctx, &seg, 1, CW_BULK_READ_WRITE, &x->own);
}

static void h_bulk(cw_handle_t *h, void *arg)
{
    struct srv *s = arg;
    cw_buf_t *in = cw_handle_input(h);
    struct srv_xfer *x = calloc(1, sizeof(*x));
    cw_status_t st = CW_NOMEM;

    if (x == NULL)
        goto fail;
    x->h = h;
    cw_buf_get_u8(in, &x->dir);
    x->verify = x->dir & DIR_VERIFY;
    x->dir &= (uint8_t)~DIR_VERIFY;
    cw_buf_get_bulk(in, &x->remote);
    if (x->verify)
        cw_buf_get_u64(in, &x->seed);
    st = cw_buf_error(in);
    if (st != CW_OK)
        goto fail;
    x->len = cw_bulk_size(x->remote);
    st = x->verify ? xfer_own(s, x) : srv_shared(s, x->len);
    if (st != CW_OK)
        goto fail;
    x->t0 = cw_now_ns();
    st = cw_bulk_transfer(s->ctx, x->dir == 1 ? CW_BULK_PULL : CW_BULK_PUSH,
                          cw_handle_source(h), x->remote, 0,
                          x->verify ? x->own : s->local, 0, x->len, xfer_done,
                          x, NULL);
    if (st == CW_OK)
        return;
fail:
    if (x)
        xfer_free(x);
    cw_respond(h, st, NULL, NULL);
    cw_handle_release(h);
}

static void h_quit(cw_handle_t *h, void *arg)
{
    (void)arg;
    cw_respond(h, CW_OK, NULL, NULL);
    cw_handle_release(h);
    stop = 1;
}

static int write_addr_file(const char *path, const char *uri)
{
    char tmp[4096];
    FILE *f;

    snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
    f = fopen(tmp, "we");
    if (f == NULL) {
        fprintf(stderr, "cw-perf: %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    fprintf(f, "%s\n", uri);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "cw-perf: %s: %s\n", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

static int srv_init(struct srv *s)
{
    struct cw_context_opts o;
    cw_status_t st;

    cw_context_opts_init(&o);
    if (busy)
        o.flags |= CW_CTX_BUSY;
    if (coalesce)
        o.flags |= CW_CTX_COALESCE;
    st = cw_context_create(&o, &s->ctx);
    if (st != CW_OK) {
        fprintf(stderr, "cw-perf: context: %s\n", cw_status_str(st));
        return -1;
    }
    if ((st = cw_rpc_register(s->ctx, RPC_ECHO, h_rpc, s, NULL, NULL)) !=
            CW_OK ||
        (st = cw_rpc_register(s->ctx, RPC_BULK, h_bulk, s, NULL, NULL)) !=
            CW_OK ||
        (st = cw_rpc_register(s->ctx, RPC_QUIT, h_quit, s, NULL, NULL)) !=
            CW_OK) {
        fprintf(stderr, "cw-perf: cw_rpc_register: %s\n", cw_status_str(st));
        return -1;
    }
    return 0;
}

/* One context's thread: its own progress and trigger, nothing shared. */
static void *srv_thread(void *arg)
{
    struct srv *s = arg;

    while (!stop)
        pump(s->ctx);
    return NULL;
}

/* With --contexts N, one published address served by N contexts, each on
 * its own thread (cw_network_open_spread); on exit each context's request
 * count goes to stderr as "cw-perf: context I served N requests". */
static int run_server(const char *listen, const char *addr_file, unsigned nctx)
{
    struct srv *s;
    cw_context_t **ctxs;
    cw_network_t **nets;
    pthread_t *tids;
    unsigned i, started = 0;
    char uri[CW_URI_MAX];
    cw_status_t st;
    int rc = 1;

    s = calloc(nctx, sizeof(*s));
    ctxs = calloc(nctx, sizeof(*ctxs));
    nets = calloc(nctx, sizeof(*nets));
    tids = calloc(nctx, sizeof(*tids));
    if (s == NULL || ctxs == NULL || nets == NULL || tids == NULL) {
        fprintf(stderr, "cw-perf: out of memory\n");
        goto out;
    }
    for (i = 0; i < nctx; i++) {
        if (srv_init(&s[i]) != 0)
            goto out;
        ctxs[i] = s[i].ctx;
    }
    st = cw_network_open_spread(ctxs, nctx, listen, CW_NET_LISTEN, nets);
    if (st == CW_OK)
        st = cw_network_uri(nets[0], uri, sizeof(uri));
    if (st != CW_OK) {
        fprintf(stderr, "cw-perf: cannot listen on %s: %s\n", listen,
                cw_status_str(st));
        goto out;
    }
    for (started = 1; started < nctx; started++) {
        int e = pthread_create(&tids[started], NULL, srv_thread, &s[started]);
        if (e != 0) {
            fprintf(stderr, "cw-perf: pthread_create: %s\n", strerror(e));
            stop = 1;
            goto join;
        }
    }
    if (addr_file && write_addr_file(addr_file, uri) != 0) {
        stop = 1;
        goto join;
    }
    printf("%s\n", uri);
    fflush(stdout);
    srv_thread(&s[0]);
    rc = 0;
join:
    for (i = 1; i < started; i++)
        pthread_join(tids[i], NULL);
    /* Let the last answers leave. */
    for (int k = 0; k < 20; k++)
        for (i = 0; i < nctx; i++) {
            cw_progress(s[i].ctx, 1);
            cw_trigger(s[i].ctx, 0, 0, NULL);
        }
    for (i = 0; i < nctx && rc == 0; i++) {
        struct cw_context_stats cs;
        if (cw_context_stats(s[i].ctx, &cs) == CW_OK)
            fprintf(stderr, "cw-perf: context %u served %llu requests\n", i,
                    (unsigned long long)cs.rx_requests);
    }
out:
    for (i = 0; s != NULL && i < nctx; i++) {
        cw_bulk_free(s[i].local);
        cw_context_destroy(s[i].ctx);
        free(s[i].buf);
        free(s[i].reply);
    }
    free(tids);
    free(nets);
    free(ctxs);
    free(s);
    return rc;
}

/* ---- client ------------------------------------------------------------ */

enum test_kind { TEST_LAT, TEST_RATE, TEST_BW };

static const char *const test_names[] = {"lat", "rate", "bw"};

/* One slot of the window: a call in flight or ready to go. */
struct call {
    struct cli *c;
    cw_handle_t *h;
    uint64_t t0;
    uint64_t no; /* the call's number in this run, for messages */
    uint64_t seed;
    uint8_t *buf;    /* lat/rate: the request payload; bw: client memory */
    cw_bulk_t *bulk; /* bw */
    struct call *next_free;
};

struct cli {
    cw_context_t *ctx;
    cw_addr_t *target;
    enum test_kind kind;
    cw_rpc_id_t id;
    bool verify;
    bool echo;      /* lat/rate requests carry the trailer */
    size_t size;    /* request payload or transfer */
    uint32_t rsize; /* reply payload (echo) */
    uint8_t dir;    /* bw: 1 pull, 2 push */
    struct call *calls;
    unsigned ncalls;
    struct call *free_calls;
    unsigned outstanding;
    unsigned failed;
    cw_status_t last_err;
    bool bad; /* a check failed (and said so) */
    bool record;
    uint64_t nonce;
    uint64_t numbered;
    struct perf_hist hist;
    uint64_t xfer_ns, xfers;
    /* The progress line (stderr on a terminal, runs over 2 s). */
    bool progress;
    bool progress_shown;
    uint64_t progress_t0, progress_next;
    unsigned rep, reps;
};

static void progress_clear(struct cli *c)
{
    if (c->progress_shown)
        fprintf(stderr, "\r\033[K");
    c->progress_shown = false;
}

static void progress_tick(struct cli *c, uint64_t now, uint64_t sent)
{
    char what[32] = "warm-up";

    if (!c->progress || now - c->progress_t0 < 2000000000ull ||
        now < c->progress_next)
        return;
    c->progress_next = now + 500000000ull;
    c->progress_shown = true;
    if (c->record)
        snprintf(what, sizeof(what), "rep %u/%u", c->rep + 1, c->reps);
    fprintf(stderr, "\rcw-perf: %s %zu B%s%s: %s, %llu calls, %.0f s\033[K",
            test_names[c->kind], c->size, c->kind == TEST_BW ? " " : "",
            c->kind == TEST_BW ? (c->dir == 1 ? "pull" : "push") : "", what,
            (unsigned long long)sent, (double)(now - c->progress_t0) / 1e9);
}

static void cli_err(struct cli *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void cli_err(struct cli *c, const char *fmt, ...)
{
    va_list ap;

    progress_clear(c);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

/* A verified call's data was wrong: say where, once, and end the run. */
static void mismatch(struct call *k, const char *what, size_t off, unsigned got,
                     unsigned want)
{
    struct cli *c = k->c;

    if (!c->bad)
        cli_err(c,
                "cw-perf: verify failed: %s %zu B%s%s, call %llu: %s "
                "byte %zu is 0x%02x, expected 0x%02x\n",
                test_names[c->kind], c->size, c->kind == TEST_BW ? " " : "",
                c->kind == TEST_BW ? (c->dir == 1 ? "pull" : "push") : "",
                (unsigned long long)k->no, what, off, got, want);
    c->bad = true;
}

static void check_echo(struct call *k, cw_buf_t *out)
{
    struct cli *c = k->c;
    const void *p = NULL;
    size_t len = 0, off;
    uint64_t req = 0;
    uint8_t seen = 0;

    if (c->verify) {
        cw_buf_get_u64(out, &req);
        cw_buf_get_u8(out, &seen);
    }
    cw_buf_get_bytes(out, &p, &len);
    if (cw_buf_error(out) != CW_OK || len != c->rsize) {
        if (!c->bad)
            cli_err(c,
                    "cw-perf: %s: %s %zu B, call %llu: a reply of %zu "
                    "bytes, expected %u (%s)\n",
                    c->verify ? "verify failed" : "bad reply",
                    test_names[c->kind], c->size, (unsigned long long)k->no,
                    len, c->rsize, cw_status_str(cw_buf_error(out)));
        c->bad = true;
        return;
    }
    if (!c->verify)
        return;
    if (req != 0) {
        off = (size_t)(req - 1);
        mismatch(k, "the server found request", off, seen,
                 perf_pattern_byte(k->seed, off));
        return;
    }
    off = perf_pattern_find(p, len, k->seed);
    if (off < len)
        mismatch(k, "reply", off, ((const uint8_t *)p)[off],
                 perf_pattern_byte(k->seed, off));
}

static void check_bulk(struct call *k, cw_buf_t *out)
{
    struct cli *c = k->c;
    uint64_t ns = 0, bad = 0;
    uint8_t got = 0;
    size_t off;

    cw_buf_get_u64(out, &ns);
    c->xfer_ns += ns;
    c->xfers++;
    if (!c->verify)
        return;
    cw_buf_get_u64(out, &bad);
    cw_buf_get_u8(out, &got);
    if (cw_buf_error(out) != CW_OK) {
        if (!c->bad)
            cli_err(c,
                    "cw-perf: verify failed: bw call %llu: answer "
                    "without its check (%s)\n",
                    (unsigned long long)k->no,
                    cw_status_str(cw_buf_error(out)));
        c->bad = true;
        return;
    }
    if (c->dir == 1) {
        if (bad != 0)
            mismatch(k, "the server pulled", (size_t)(bad - 1), got,
                     perf_pattern_byte(k->seed, (size_t)(bad - 1)));
        return;
    }
    off = perf_pattern_find(k->buf, c->size, k->seed);
    if (off < c->size)
        mismatch(k, "the server pushed", off, k->buf[off],
                 perf_pattern_byte(k->seed, off));
}

static void call_done(cw_handle_t *h, cw_status_t st, void *arg)
{
    struct call *k = arg;
    struct cli *c = k->c;
    uint64_t t = cw_now_ns() - k->t0;

    c->outstanding--;
    if (st != CW_OK) {
        c->failed++;
        c->last_err = st;
    } else {
        if (c->record)
            perf_hist_add(&c->hist, t);
        if (c->kind == TEST_BW)
            check_bulk(k, cw_handle_output(h));
        else if (c->echo)
            check_echo(k, cw_handle_output(h));
    }
    if (c->verify) {
        cw_handle_release(h);
        k->h = NULL;
    }
    k->next_free = c->free_calls;
    c->free_calls = k;
}

static cw_status_t call_encode(struct cli *c, struct call *k)
{
    cw_buf_t *in = cw_handle_input(k->h);

    if (c->kind == TEST_BW) {
        cw_buf_put_u8(in, (uint8_t)(c->dir | (c->verify ? DIR_VERIFY : 0)));
        cw_buf_put_bulk(in, k->bulk);
        if (c->verify)
            cw_buf_put_u64(in, k->seed);
    } else {
        cw_buf_put_bytes(in, k->buf, c->size);
        if (c->echo) {
            cw_buf_put_u8(in, c->verify ? ECHO_VERIFY : 0);
            cw_buf_put_u32(in, c->rsize);
            cw_buf_put_u64(in, k->seed);
        }
    }
    return cw_buf_error(in);
}

static cw_status_t call_handle(struct cli *c, struct call *k)
{
    cw_status_t st;

    st = cw_handle_create(c->ctx, c->target, c->id, &k->h);
    if (st == CW_OK)
        st = call_encode(c, k);
    if (st != CW_OK) {
        cw_handle_release(k->h);
        k->h = NULL;
    }
    return st;
}

/* Send @p k.  A verified call gets a new seed, its pattern (what the
 * client sends: lat/rate payloads, what a pull reads) and a new handle;
 * the others keep theirs from one call to the next. */
static cw_status_t call_start(struct cli *c, struct call *k)
{
    cw_status_t st;

    k->no = ++c->numbered;
    if (c->verify) {
        k->seed = perf_seed(c->nonce, k->no);
        if (c->kind != TEST_BW || c->dir == 1) {
            perf_pattern_fill(k->buf, 0, c->size, k->seed);
            maybe_corrupt(k->buf, c->size);
        }
        st = call_handle(c, k);
        if (st != CW_OK)
            return st;
    }
    k->t0 = cw_now_ns();
    st = cw_forward(k->h, 0, call_done, k);
    if (st != CW_OK && c->verify) {
        cw_handle_release(k->h);
        k->h = NULL;
    }
    return st;
}

static void calls_free(struct cli *c)
{
    for (unsigned i = 0; c->calls != NULL && i < c->ncalls; i++) {
        cw_handle_release(c->calls[i].h);
        cw_bulk_free(c->calls[i].bulk);
        free(c->calls[i].buf);
    }
    free(c->calls);
    c->calls = NULL;
    c->ncalls = 0;
}

/* The window of @p n calls for the current size (and direction). */
static int calls_setup(struct cli *c, unsigned n)
{
    cw_status_t st = CW_OK;

    c->calls = calloc(n, sizeof(*c->calls));
    if (c->calls == NULL)
        goto nomem;
    c->ncalls = n;
    c->free_calls = NULL;
    for (unsigned i = n; i-- > 0;) {
        struct call *k = &c->calls[i];

        k->c = c;
        k->buf = calloc(1, c->size ? c->size : 1);
        if (k->buf == NULL)
            goto nomem;
        if (c->kind == TEST_BW) {
            struct cw_segment seg = {.base = k->buf, .len = c->size};

            memset(k->buf, 0x3c, c->size);
            st = cw_bulk_create(
                c->ctx, &seg, 1,
                c->dir == 1 ? CW_BULK_READ_ONLY : CW_BULK_WRITE_ONLY, &k->bulk);
        }
        if (st == CW_OK && !c->verify)
            st = call_handle(c, k);
        if (st != CW_OK) {
            cli_err(c, "cw-perf: preparing calls: %s\n", cw_status_str(st));
            calls_free(c);
            return -1;
        }
        k->next_free = c->free_calls;
        c->free_calls = k;
    }
    return 0;
nomem:
    cli_err(c, "cw-perf: out of memory\n");
    calls_free(c);
    return -1;
}

/*
 * Run up to @p limit calls, for at most @p dur_ns (0: no limit), with the
 * whole window in flight; no new call after a failure or a failed check.
 * Returns the elapsed ns and the calls made in @p calls_p, 0 on failure.
 */
static uint64_t run_calls(struct cli *c, uint64_t limit, uint64_t dur_ns,
                          uint64_t *calls_p)
{
    uint64_t t0 = cw_now_ns(), now = t0, sent = 0;
    uint64_t end = dur_ns ? t0 + dur_ns : UINT64_MAX;
    bool broken = false;

    c->failed = 0;
    for (;;) {
        bool more = sent < limit && now < end && !stop && !broken && !c->bad &&
                    c->failed == 0;

        if (!more && c->outstanding == 0)
            break;
        if (more) {
            /* One refill is one batch scope (without --coalesce, a
             * no-op). */
            void *scope = cw_context_batch_begin(c->ctx);
            cw_status_t st = CW_OK;

            while (sent < limit && c->free_calls != NULL) {
                struct call *k = c->free_calls;

                c->free_calls = k->next_free;
                st = call_start(c, k);
                if (st != CW_OK) {
                    k->next_free = c->free_calls;
                    c->free_calls = k;
                    break;
                }
                c->outstanding++;
                sent++;
            }
            cw_context_batch_end(c->ctx, scope);
            if (st != CW_OK) {
                cli_err(c, "cw-perf: forward: %s\n", cw_status_str(st));
                broken = true;
            }
        }
        pump(c->ctx);
        /* A clock read per pass only where something needs it. */
        if (dur_ns || c->progress) {
            now = cw_now_ns();
            progress_tick(c, now, sent);
        }
    }
    now = cw_now_ns();
    if (c->failed)
        cli_err(c, "cw-perf: %u RPCs failed (%s)\n", c->failed,
                cw_status_str(c->last_err));
    if (broken || stop || c->bad || c->failed || sent == 0)
        return 0;
    *calls_p = sent;
    return now - t0;
}

struct result {
    size_t size;
    const char *dir;
    double med, min, max;        /* lat: us; rate: RPC/s; bw: MiB/s */
    double extra;                /* bw: server-side transfer MiB/s */
    long long reply;             /* lat/rate: bytes answered, -1 none */
    uint64_t calls;              /* calls measured, all repetitions */
    double p50, p99, p999, pmax; /* one call, forward to completion: us */
};

/* How much to measure: per repetition, --iters calls or --time. */
struct plan {
    unsigned inflight;
    uint64_t iters;
    uint64_t dur_ns;
    unsigned reps;
};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, unsigned n)
{
    qsort(v, n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double hist_us(const struct perf_hist *hi, double q)
{
    return (double)perf_hist_quantile(hi, q) / 1000.0;
}

/* Measure the current size (and direction) into @p res. */
static int bench_one(struct cli *c, const struct plan *pl, struct result *res)
{
    double v[MAX_REPS], xv[MAX_REPS];
    uint64_t n = pl->iters, calls = 0, ns;
    uint64_t warm = c->kind == TEST_BW ? pl->inflight
                    : pl->dur_ns       ? UINT64_MAX
                                       : pl->iters / 10 + pl->inflight;
    int rc = -1;

    /* Keep each bulk run to a few hundred MiB. */
    if (c->kind == TEST_BW && c->size > 0 && n > (512ull << 20) / c->size)
        n = (512ull << 20) / c->size;
    if (pl->dur_ns)
        n = UINT64_MAX;
    if (n < pl->inflight)
        n = pl->inflight;
    if (calls_setup(c, pl->inflight) != 0)
        return -1;
    /* Warm-up (connections, pools, page faults). */
    c->record = false;
    c->rep = 0;
    c->reps = pl->reps;
    if (run_calls(c, warm, pl->dur_ns / 10, &calls) == 0)
        goto out;
    perf_hist_reset(&c->hist);
    c->record = true;
    for (unsigned r = 0; r < pl->reps; r++) {
        c->rep = r;
        c->xfer_ns = 0;
        c->xfers = 0;
        ns = run_calls(c, n, pl->dur_ns, &calls);
        if (ns == 0)
            goto out;
        v[r] = c->kind == TEST_LAT    ? (double)ns / (double)calls / 1000.0
               : c->kind == TEST_RATE ? (double)calls * 1e9 / (double)ns
                                      : (double)calls * (double)c->size /
                                            (1 << 20) / ((double)ns / 1e9);
        xv[r] = c->xfer_ns ? (double)c->size * (double)c->xfers / (1 << 20) /
                                 ((double)c->xfer_ns / 1e9)
                           : 0;
    }
    res->size = c->size;
    res->dir = c->kind != TEST_BW ? "" : c->dir == 1 ? "pull" : "push";
    res->reply = c->echo ? (long long)c->rsize : -1;
    res->med = median(v, pl->reps);
    res->min = v[0];
    res->max = v[pl->reps - 1];
    res->extra = median(xv, pl->reps);
    res->calls = c->hist.n;
    res->p50 = hist_us(&c->hist, 0.5);
    res->p99 = hist_us(&c->hist, 0.99);
    res->p999 = hist_us(&c->hist, 0.999);
    res->pmax = (double)c->hist.max / 1000.0;
    rc = 0;
out:
    calls_free(c);
    return rc;
}

enum format { FMT_TABLE, FMT_JSON, FMT_CSV };

struct out_opts {
    enum format fmt;
    const char *target;
    unsigned inflight;
    const struct plan *plan;
    bool verify;
    long long reply; /* -1: none given */
};

static void print_json(enum test_kind kind, const char *unit,
                       const struct out_opts *o, const struct result *res,
                       int n)
{
    printf("{\"test\":\"%s\",\"target\":", test_names[kind]);
    cli_json_str(stdout, o->target);
    printf(",\"mode\":\"%s\","
           "\"inflight\":%u,\"reps\":%u,\"unit\":\"%s\",\"verify\":%s,",
           busy ? "busy" : "blocking", o->inflight, o->plan->reps, unit,
           o->verify ? "true" : "false");
    if (o->reply >= 0)
        printf("\"reply_size\":%lld,", o->reply);
    if (o->plan->dur_ns)
        printf("\"time_s\":%.3f,", (double)o->plan->dur_ns / 1e9);
    printf("\"results\":[");
    for (int i = 0; i < n; i++) {
        printf("%s{\"size\":%zu,", i ? "," : "", res[i].size);
        if (res[i].dir[0])
            printf("\"dir\":\"%s\",\"server_xfer\":%.1f,", res[i].dir,
                   res[i].extra);
        if (res[i].reply >= 0)
            printf("\"reply\":%lld,", res[i].reply);
        printf("\"median\":%.3f,\"min\":%.3f,\"max\":%.3f,\"calls\":%llu,"
               "\"p50_us\":%.3f,\"p99_us\":%.3f,\"p999_us\":%.3f,"
               "\"max_us\":%.3f}",
               res[i].med, res[i].min, res[i].max,
               (unsigned long long)res[i].calls, res[i].p50, res[i].p99,
               res[i].p999, res[i].pmax);
    }
    printf("]}\n");
}

static void print_csv(enum test_kind kind, const char *unit,
                      const struct out_opts *o, const struct result *res, int n)
{
    printf("test,target,mode,inflight,reps,verify,reply_size,size,dir,"
           "median,min,max,unit,server_xfer,calls,p50_us,p99_us,p999_us,"
           "max_us\n");
    for (int i = 0; i < n; i++) {
        printf("%s,\"", test_names[kind]);
        for (const char *t = o->target; *t; t++) {
            if (*t == '"')
                putchar('"');
            putchar(*t);
        }
        printf("\",%s,%u,%u,%d,", busy ? "busy" : "blocking", o->inflight,
               o->plan->reps, o->verify ? 1 : 0);
        if (res[i].reply >= 0)
            printf("%lld", res[i].reply);
        printf(",%zu,%s,%.3f,%.3f,%.3f,%s,", res[i].size, res[i].dir,
               res[i].med, res[i].min, res[i].max, unit);
        if (res[i].dir[0])
            printf("%.1f", res[i].extra);
        printf(",%llu,%.3f,%.3f,%.3f,%.3f\n", (unsigned long long)res[i].calls,
               res[i].p50, res[i].p99, res[i].p999, res[i].pmax);
    }
}

static void print_results(enum test_kind kind, const struct out_opts *o,
                          const struct result *res, int n)
{
    const char *unit = kind == TEST_LAT    ? "us"
                       : kind == TEST_RATE ? "rpc/s"
                                           : "MiB/s";

    if (o->fmt == FMT_JSON) {
        print_json(kind, unit, o, res, n);
        return;
    }
    if (o->fmt == FMT_CSV) {
        print_csv(kind, unit, o, res, n);
        return;
    }
    printf("# cw-perf %s  target %s  mode %s  inflight %u  median of %u  "
           "verify %s",
           test_names[kind], o->target, busy ? "busy" : "blocking", o->inflight,
           o->plan->reps, o->verify ? "on" : "off");
    if (o->reply >= 0)
        printf("  reply %lld B", o->reply);
    else if (o->verify && kind != TEST_BW)
        printf("  reply echoed");
    printf("\n# per call, forward to completion, all repetitions: calls, "
           "p50 p99 p99.9 max in us\n");
    if (kind == TEST_BW)
        printf("%12s %5s %12s %12s %12s %14s %6s", "size", "dir", "median",
               "min", "max", "server-xfer", "");
    else
        printf("%12s %12s %12s %12s %6s", "size", "median", "min", "max", "");
    printf(" %9s %10s %10s %10s %10s\n", "calls", "p50", "p99", "p99.9", "max");
    for (int i = 0; i < n; i++) {
        if (res[i].dir[0])
            printf("%12zu %5s %12.1f %12.1f %12.1f %14.1f  %-5s", res[i].size,
                   res[i].dir, res[i].med, res[i].min, res[i].max, res[i].extra,
                   unit);
        else
            printf("%12zu %12.3f %12.3f %12.3f  %-5s", res[i].size, res[i].med,
                   res[i].min, res[i].max, unit);
        printf(" %9llu %10.2f %10.2f %10.2f %10.2f\n",
               (unsigned long long)res[i].calls, res[i].p50, res[i].p99,
               res[i].p999, res[i].pmax);
    }
}

struct client_args {
    const char *target;
    const char *test;
    const char *sizes;
    unsigned inflight;
    unsigned iters;
    double time_s;
    unsigned reps;
    enum format fmt;
    bool verify;
    long long reply;  /* -1: no --reply-size */
    const char *plot; /* --plot FILE.png, or NULL */
};

/* --plot: this run's results drawn by gnuplot. */
static int plot_results(enum test_kind kind, const char *target,
                        const struct result *res, int n, const char *png)
{
    struct plot pl = {0};
    const char *dir[2 * MAX_SIZES];
    double size[2 * MAX_SIZES], med[2 * MAX_SIZES], p50[2 * MAX_SIZES];
    char title[CW_URI_MAX + 64], err[512];
    int rc = 0;

    for (int i = 0; i < n; i++) {
        dir[i] = res[i].dir;
        size[i] = (double)res[i].size;
        med[i] = res[i].med;
        p50[i] = res[i].p50;
    }
    snprintf(title, sizeof(title), "cw-perf %s, target %s", test_names[kind],
             target);
    if (perf_plot_add_run(&pl, "", test_names[kind], dir, size, med, p50,
                          (size_t)n) != 0) {
        snprintf(err, sizeof(err), "out of memory");
        rc = -1;
    }
    if (rc == 0)
        rc = perf_plot_draw(&pl, title, png, err, sizeof(err));
    perf_plot_free(&pl);
    if (rc != 0) {
        fprintf(stderr, "cw-perf: --plot %s: %s\n", png, err);
        return 1;
    }
    fprintf(stderr, "cw-perf: plotted %d results into %s\n", n, png);
    return 0;
}

/* cw-perf plot: the runs of several --json files in one picture. */
static int plot_files(const char *const *files, unsigned n, const char *png)
{
    struct plot pl = {0};
    char title[1024] = "cw-perf:", err[1024];
    size_t used = strlen(title);
    int rc = 0;

    for (unsigned i = 0; i < n && rc == 0; i++) {
        const char *base = strrchr(files[i], '/');

        rc = perf_plot_add_file(&pl, files[i], err, sizeof(err));
        if (used < sizeof(title))
            used +=
                (size_t)snprintf(title + used, sizeof(title) - used, "%s %s",
                                 i ? "," : "", base ? base + 1 : files[i]);
    }
    if (rc == 0)
        rc = perf_plot_draw(&pl, title, png, err, sizeof(err));
    if (rc != 0)
        fprintf(stderr, "cw-perf: plot: %s\n", err);
    else
        fprintf(stderr,
                "cw-perf: plotted %zu series from %u files into "
                "%s\n",
                pl.n, n, png);
    perf_plot_free(&pl);
    return rc != 0 ? 1 : 0;
}

static int run_client(const struct client_args *a)
{
    struct cw_context_opts o;
    struct cli *c;
    size_t sizes[MAX_SIZES];
    struct result res[2 * MAX_SIZES];
    struct plan pl;
    struct out_opts oo;
    enum test_kind kind;
    int n, k = 0;
    cw_status_t st;

    if (strcmp(a->test, "lat") == 0)
        kind = TEST_LAT;
    else if (strcmp(a->test, "rate") == 0)
        kind = TEST_RATE;
    else if (strcmp(a->test, "bw") == 0)
        kind = TEST_BW;
    else {
        fprintf(stderr, "cw-perf: unknown test \"%s\"\n", a->test);
        return 2;
    }
    if (a->plot != NULL && !perf_plot_have_gnuplot()) {
        fprintf(stderr, "cw-perf: --plot needs gnuplot, which is not on "
                        "PATH (install the Debian package gnuplot-nox)\n");
        return 1;
    }
    if (kind == TEST_BW && a->reply >= 0) {
        fprintf(stderr, "cw-perf: --reply-size is for lat and rate\n");
        return 2;
    }
    n = parse_sizes(a->sizes          ? a->sizes
                    : kind == TEST_BW ? "64K,1M,16M,64M"
                                      : "0,64,4K,64K",
                    sizes);
    if (n <= 0) {
        fprintf(stderr, "cw-perf: bad --sizes \"%s\"\n", a->sizes);
        return 2;
    }
    pl.reps = a->reps;
    pl.dur_ns = (uint64_t)(a->time_s * 1e9);
    pl.iters = a->iters ? a->iters : kind == TEST_BW ? 64 : 20000;
    pl.inflight = kind == TEST_LAT  ? 1
                  : a->inflight     ? a->inflight
                  : kind == TEST_BW ? 1
                                    : 16;
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        fprintf(stderr, "cw-perf: out of memory\n");
        return 1;
    }
    c->kind = kind;
    c->id = cw_rpc_id(kind == TEST_BW ? RPC_BULK : RPC_ECHO);
    c->verify = a->verify;
    c->rsize = (uint32_t)(a->reply >= 0 ? a->reply : 0);
    c->nonce = cw_now_ns() ^ ((uint64_t)getpid() << 32);
    c->progress = isatty(STDERR_FILENO);
    c->progress_t0 = cw_now_ns();
    cw_context_opts_init(&o);
    if (busy)
        o.flags |= CW_CTX_BUSY;
    if (coalesce)
        o.flags |= CW_CTX_COALESCE;
    st = cw_context_create(&o, &c->ctx);
    if (st == CW_OK)
        st = cw_client_routes_load(c->ctx, NULL); /* $CAUSEWAY_ROUTES */
    if (st == CW_OK)
        st = cw_addr_lookup(c->ctx, a->target, &c->target);
    if (st != CW_OK) {
        fprintf(stderr, "cw-perf: cannot reach %s: %s\n", a->target,
                cw_status_str(st));
        k = -1;
    }
    for (int s = 0; s < n && k >= 0; s++) {
        c->size = sizes[s];
        if (kind != TEST_BW) {
            /* --verify alone echoes the request. */
            if (c->verify && a->reply < 0)
                c->rsize =
                    (uint32_t)(c->size < MAX_REPLY ? c->size : MAX_REPLY);
            c->echo = c->verify || c->rsize > 0;
            k = bench_one(c, &pl, &res[k]) == 0 ? k + 1 : -1;
            continue;
        }
        for (c->dir = 1; c->dir <= 2 && k >= 0; c->dir++)
            if (bw_dirs & (1u << (c->dir - 1)))
                k = bench_one(c, &pl, &res[k]) == 0 ? k + 1 : -1;
    }
    progress_clear(c);
    oo.fmt = a->fmt;
    oo.target = a->target;
    oo.inflight = pl.inflight;
    oo.plan = &pl;
    oo.verify = a->verify;
    oo.reply = a->reply;
    if (k > 0)
        print_results(kind, &oo, res, k);
    cw_addr_free(c->target);
    cw_context_destroy(c->ctx);
    free(c);
    if (k > 0 && a->plot != NULL)
        return plot_results(kind, a->target, res, k, a->plot);
    return k > 0 ? 0 : 1;
}

static void quit_cb(cw_handle_t *h, cw_status_t st, void *arg)
{
    cw_status_t *st_p = arg;

    (void)h;
    *st_p = st;
}

static int quit_server(const char *target)
{
    cw_context_t *ctx;
    cw_addr_t *a;
    cw_handle_t *h;
    cw_status_t st = CW_BUSY;

    if (cw_context_create(NULL, &ctx) != CW_OK)
        return 1;
    if (cw_client_routes_load(ctx, NULL) != CW_OK ||
        cw_addr_lookup(ctx, target, &a) != CW_OK) {
        cw_context_destroy(ctx);
        return 1;
    }
    if (cw_handle_create(ctx, a, cw_rpc_id(RPC_QUIT), &h) != CW_OK) {
        cw_addr_free(a);
        cw_context_destroy(ctx);
        return 1;
    }
    if (cw_forward(h, 5000, quit_cb, &st) == CW_OK)
        while (st == CW_BUSY)
            pump(ctx);
    cw_handle_release(h);
    cw_addr_free(a);
    cw_context_destroy(ctx);
    return st == CW_OK ? 0 : 1;
}

/* CW_PERF_CORRUPT=N (tests only), for both ends. */
static int corrupt_from_env(void)
{
    const char *e = getenv("CW_PERF_CORRUPT");
    unsigned long long v;

    if (e == NULL || *e == '\0')
        return 0;
    if (!cli_uint(e, UINT_MAX, &v) || v == 0) {
        fprintf(stderr,
                "cw-perf: CW_PERF_CORRUPT: expected a number from "
                "1, got '%s'\n",
                e);
        return -1;
    }
    corrupt_every = (unsigned)v;
    fprintf(stderr,
            "cw-perf: CW_PERF_CORRUPT=%u: one verified datum sent "
            "in %u gets a byte flipped (a test of --verify)\n",
            corrupt_every, corrupt_every);
    return 0;
}

static bool parse_seconds(const char *s, double *v_p)
{
    char *end;
    double v;

    if (s == NULL || !(s[0] >= '0' && s[0] <= '9'))
        return false;
    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || *end != '\0' || !(v > 0) || v > 86400)
        return false;
    *v_p = v;
    return true;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"addr-file", required_argument, NULL, 'a'},
        {"target", required_argument, NULL, 't'},
        {"test", required_argument, NULL, 'T'},
        {"sizes", required_argument, NULL, 's'},
        {"inflight", required_argument, NULL, 'i'},
        {"iters", required_argument, NULL, 'n'},
        {"reps", required_argument, NULL, 'r'},
        {"time", required_argument, NULL, 'S'},
        {"busy", no_argument, NULL, 'b'},
        {"coalesce", no_argument, NULL, 'C'},
        {"json", no_argument, NULL, 'j'},
        {"csv", no_argument, NULL, 'v'},
        {"verify", no_argument, NULL, 'V'},
        {"reply-size", required_argument, NULL, 'R'},
        {"dir", required_argument, NULL, 'd'},
        {"contexts", required_argument, NULL, 'c'},
        {"plot", required_argument, NULL, 'P'},
        {"plot-from", required_argument, NULL, 'F'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *listen = NULL, *addr_file = NULL, *mode;
    struct client_args ca = {.reps = 5, .reply = -1};
    unsigned nctx = 1;
    const char *plot_from[MAX_PLOT_FILES];
    unsigned nplot_from = 0;
    bool json = false, csv = false;
    int c;

    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    mode = argv[1];
    optind = 2;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'l':
            listen = optarg;
            break;
        case 'a':
            addr_file = optarg;
            break;
        case 't':
            ca.target = optarg;
            break;
        case 'T':
            ca.test = optarg;
            break;
        case 's':
            ca.sizes = optarg;
            break;
        case 'c': {
            unsigned long long v;
            if (!cli_uint(optarg, MAX_CONTEXTS, &v) || v == 0) {
                fprintf(stderr,
                        "cw-perf: --contexts: expected 1 to %d, got "
                        "'%s'\n",
                        MAX_CONTEXTS, optarg);
                return 2;
            }
            nctx = (unsigned)v;
            break;
        }
        case 'i':
        case 'n':
        case 'r': {
            unsigned long long v;
            if (!cli_uint(optarg, UINT_MAX, &v)) {
                fprintf(stderr,
                        "cw-perf: --%s: expected a number, got "
                        "'%s'\n",
                        c == 'i'   ? "inflight"
                        : c == 'n' ? "iters"
                                   : "reps",
                        optarg);
                return 2;
            }
            *(c == 'i'   ? &ca.inflight
              : c == 'n' ? &ca.iters
                         : &ca.reps) = (unsigned)v;
            break;
        }
        case 'S':
            if (!parse_seconds(optarg, &ca.time_s)) {
                fprintf(stderr,
                        "cw-perf: --time: expected seconds (over 0, "
                        "at most 86400), got '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case 'R': {
            unsigned long long v;
            if (!cli_size(optarg, MAX_REPLY, &v)) {
                fprintf(stderr,
                        "cw-perf: --reply-size: expected a size up "
                        "to 1G, got '%s'\n",
                        optarg);
                return 2;
            }
            ca.reply = (long long)v;
            break;
        }
        case 'P':
            ca.plot = optarg;
            break;
        case 'F':
            if (nplot_from == MAX_PLOT_FILES) {
                fprintf(stderr, "cw-perf: at most %d --plot-from files\n",
                        MAX_PLOT_FILES);
                return 2;
            }
            plot_from[nplot_from++] = optarg;
            break;
        case 'b':
            busy = true;
            break;
        case 'C':
            coalesce = true;
            break;
        case 'j':
            json = true;
            break;
        case 'v':
            csv = true;
            break;
        case 'V':
            ca.verify = true;
            break;
        case 'd':
            bw_dirs = strcmp(optarg, "pull") == 0   ? 1
                      : strcmp(optarg, "push") == 0 ? 2
                      : strcmp(optarg, "both") == 0 ? 3
                                                    : 0;
            if (!bw_dirs) {
                fprintf(stderr, "cw-perf: --dir pull|push|both, not \"%s\"\n",
                        optarg);
                return 2;
            }
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (ca.inflight > MAX_INFLIGHT || ca.reps == 0 || ca.reps > MAX_REPS) {
        fprintf(stderr, "cw-perf: --inflight <= %d, 1 <= --reps <= %d\n",
                MAX_INFLIGHT, MAX_REPS);
        return 2;
    }
    if (json && csv) {
        fprintf(stderr, "cw-perf: --json or --csv, not both\n");
        return 2;
    }
    if (nplot_from > 0 && strcmp(mode, "plot") != 0) {
        fprintf(stderr, "cw-perf: --plot-from goes with 'cw-perf plot'\n");
        return 2;
    }
    if (ca.plot != NULL && strcmp(mode, "client") != 0 &&
        strcmp(mode, "plot") != 0) {
        fprintf(stderr, "cw-perf: --plot goes with 'cw-perf client' or "
                        "'cw-perf plot'\n");
        return 2;
    }
    if (ca.iters && ca.time_s > 0) {
        fprintf(stderr, "cw-perf: --iters or --time, not both\n");
        return 2;
    }
    ca.fmt = json ? FMT_JSON : csv ? FMT_CSV : FMT_TABLE;
    if (corrupt_from_env() != 0)
        return 2;
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    if (strcmp(mode, "server") == 0 && listen)
        return run_server(listen, addr_file, nctx);
    if (strcmp(mode, "client") == 0 && ca.target && ca.test)
        return run_client(&ca);
    if (strcmp(mode, "quit") == 0 && ca.target)
        return quit_server(ca.target);
    if (strcmp(mode, "plot") == 0) {
        /* --plot-from A.json B.json: the files after the first too. */
        for (; optind < argc && nplot_from < MAX_PLOT_FILES; optind++)
            plot_from[nplot_from++] = argv[optind];
        if (optind < argc) {
            fprintf(stderr, "cw-perf: at most %d --plot-from files\n",
                    MAX_PLOT_FILES);
            return 2;
        }
        if (ca.plot == NULL || nplot_from == 0) {
            fprintf(stderr, "cw-perf: plot needs --plot FILE.png and "
                            "--plot-from FILE.json...\n");
            return 2;
        }
        return plot_files(plot_from, nplot_from, ca.plot);
    }
    usage(stderr);
    return 2;
}
