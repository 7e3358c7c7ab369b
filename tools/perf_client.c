/*
 * cw-perf client: the window of calls in flight, their checks (--verify),
 * the per-call histogram, the repetitions of one size and the run over
 * every size.
 */
#include <stdarg.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <causeway/causeway.h>
#include <causeway/routing.h>

#include "cli_num.h"
#include "perf.h"
#include "perf_check.h"
#include "perf_plot.h"

const char *const perf_test_names[] = {"lat", "rate", "bw"};

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
            perf_test_names[c->kind], c->size, c->kind == TEST_BW ? " " : "",
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
                perf_test_names[c->kind], c->size,
                c->kind == TEST_BW ? " " : "",
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
                    perf_test_names[c->kind], c->size,
                    (unsigned long long)k->no, len, c->rsize,
                    cw_status_str(cw_buf_error(out)));
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
 * client sends: lat/rate payloads, what a pull reads) and its handle reset
 * and encoded again; the others send the same request each time. */
static cw_status_t call_start(struct cli *c, struct call *k)
{
    cw_status_t st;

    k->no = ++c->numbered;
    if (c->verify) {
        k->seed = perf_seed(c->nonce, k->no);
        if (c->kind != TEST_BW || c->dir == 1) {
            perf_pattern_fill(k->buf, 0, c->size, k->seed);
            perf_maybe_corrupt(k->buf, c->size);
        }
        st = cw_handle_reset(k->h, c->target, c->id);
        if (st == CW_OK)
            st = call_encode(c, k);
        if (st != CW_OK)
            return st;
    }
    k->t0 = cw_now_ns();
    return cw_forward(k->h, 0, call_done, k);
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
        if (st == CW_OK)
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
        bool more = sent < limit && now < end && !perf_stop && !broken &&
                    !c->bad && c->failed == 0;

        if (!more && c->outstanding == 0)
            break;
        /* A pass of the pass clock: the refill's forwards share a clock
         * reading (perf_pump's own pass takes new ones); the latencies
         * measured here read the clock itself. */
        cw_clock_pass_begin();
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
        perf_pump(c->ctx);
        cw_clock_pass_end();
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
    if (broken || perf_stop || c->bad || c->failed || sent == 0)
        return 0;
    *calls_p = sent;
    return now - t0;
}

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

static bool parse_size(const char *s, size_t *v_p)
{
    unsigned long long v;

    if (!cli_size(s, SIZE_MAX, &v))
        return false;
    *v_p = (size_t)v;
    return true;
}

int perf_parse_sizes(const char *list, size_t *sizes)
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

int perf_run_client(const struct client_args *a)
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
    n = perf_parse_sizes(a->sizes          ? a->sizes
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
    if (perf_busy)
        o.flags |= CW_CTX_BUSY;
    if (perf_coalesce)
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
            if (perf_bw_dirs & (1u << (c->dir - 1)))
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
        perf_print_results(kind, &oo, res, k);
    cw_addr_free(c->target);
    cw_context_destroy(c->ctx);
    free(c);
    if (k > 0 && a->plot != NULL)
        return perf_plot_results(kind, a->target, res, k, a->plot);
    return k > 0 ? 0 : 1;
}

static void quit_cb(cw_handle_t *h, cw_status_t st, void *arg)
{
    cw_status_t *st_p = arg;

    (void)h;
    *st_p = st;
}

int perf_quit_server(const char *target)
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
            perf_pump(ctx);
    cw_handle_release(h);
    cw_addr_free(a);
    cw_context_destroy(ctx);
    return st == CW_OK ? 0 : 1;
}
