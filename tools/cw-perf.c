/*
 * cw-perf: RPC latency/rate and bulk bandwidth benchmark.
 *
 *   cw-perf server --listen ADDR [--addr-file F] [--busy] [--coalesce]
 *                  [--contexts N]
 *   cw-perf client --target ADDR --test lat|rate|bw [--sizes LIST]
 *                  [--inflight N] [--iters N] [--reps N] [--busy] [--json]
 *                  [--dir pull|push|both] [--coalesce]
 *
 * Every figure is the median of --reps repeated runs.  The target may be a
 * proxied address ("target@gateway"), which is how gateway overhead is
 * measured.  --coalesce opens the context with CW_CTX_COALESCE: the
 * server's answers given in one cw_trigger() pass, and the requests the
 * client sends in one refill of its window, leave one message per peer.
 * --contexts N serves the one address from N contexts on N threads, the
 * callers spread over them (cw_network_open_spread).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <causeway/causeway.h>

#include "cli_num.h"

#define RPC_ECHO "cw-perf.rpc"
#define RPC_BULK "cw-perf.bulk"
#define RPC_QUIT "cw-perf.quit"
#define MAX_SIZES 16
#define MAX_INFLIGHT 256
#define MAX_CONTEXTS 64

static atomic_int stop; /* signals, the quit RPC, any server thread */
static bool busy;
static bool coalesce;
/* Directions --test bw measures: bit 0 pull, bit 1 push. */
static unsigned bw_dirs = 3;

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
            "               [--sizes LIST] [--inflight N] [--iters N]\n"
            "               [--reps N] [--busy] [--json] [--coalesce]\n"
            "               [--dir pull|push|both]   (bw only; default both)\n"
            "sizes take K/M/G suffixes (powers of 1024), e.g. 0,64,4K,64K\n");
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

/* ---- server ------------------------------------------------------------ */

struct srv {
    cw_context_t *ctx;
    uint8_t *buf;
    size_t cap;
    cw_bulk_t *local;
};

struct srv_xfer {
    cw_handle_t *h;
    cw_bulk_t *remote;
    uint64_t t0;
};

static void h_rpc(cw_handle_t *h, void *arg)
{
    (void)arg;
    cw_respond(h, CW_OK, NULL, NULL);
    cw_handle_release(h);
}

static void xfer_done(cw_status_t st, void *arg)
{
    struct srv_xfer *x = arg;

    cw_buf_put_u64(cw_handle_output(x->h), cw_now_ns() - x->t0);
    cw_respond(x->h, st, NULL, NULL);
    cw_handle_release(x->h);
    cw_bulk_free(x->remote);
    free(x);
}

/* Input: u8 dir (1 pull, 2 push), bulk.  Output: u64 transfer ns. */
static void h_bulk(cw_handle_t *h, void *arg)
{
    struct srv *s = arg;
    struct srv_xfer *x = calloc(1, sizeof(*x));
    uint8_t dir = 0;
    size_t len;
    cw_status_t st = CW_NOMEM;

    if (x == NULL)
        goto fail;
    x->h = h;
    cw_buf_get_u8(cw_handle_input(h), &dir);
    st = cw_buf_get_bulk(cw_handle_input(h), &x->remote);
    if (st != CW_OK)
        goto fail;
    len = cw_bulk_size(x->remote);
    if (len > s->cap) {
        struct cw_segment seg;
        uint8_t *nb = realloc(s->buf, len);
        st = CW_NOMEM;
        if (nb == NULL)
            goto fail;
        memset(nb, 0xa5, len);
        cw_bulk_free(s->local);
        s->local = NULL;
        s->buf = nb;
        s->cap = len;
        seg.base = nb;
        seg.len = len;
        st = cw_bulk_create(s->ctx, &seg, 1, CW_BULK_READ_WRITE, &s->local);
        if (st != CW_OK)
            goto fail;
    }
    x->t0 = cw_now_ns();
    st = cw_bulk_transfer(s->ctx, dir == 1 ? CW_BULK_PULL : CW_BULK_PUSH,
                          cw_handle_source(h), x->remote, 0, s->local, 0, len,
                          xfer_done, x, NULL);
    if (st == CW_OK)
        return;
fail:
    if (x) {
        cw_bulk_free(x->remote);
        free(x);
    }
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
static int run_server(const char *listen, const char *addr_file,
                      unsigned nctx)
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
    }
    free(tids);
    free(nets);
    free(ctxs);
    free(s);
    return rc;
}

/* ---- client ------------------------------------------------------------ */

struct cli {
    cw_context_t *ctx;
    cw_addr_t *target;
    unsigned outstanding;
    unsigned failed;
    cw_status_t last_err;
};

static void cli_cb(cw_handle_t *h, cw_status_t st, void *arg)
{
    struct cli *c = arg;
    (void)h;
    c->outstanding--;
    if (st != CW_OK) {
        c->failed++;
        c->last_err = st;
    }
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

/* Run @p iters RPCs of @p n handles (prepared) with up to @p inflight
 * outstanding; returns elapsed ns, 0 on failure. */
static uint64_t run_calls(struct cli *c, cw_handle_t **hs, unsigned inflight,
                          unsigned iters)
{
    uint64_t t0 = cw_now_ns();
    unsigned sent = 0, next = 0;

    c->outstanding = 0;
    c->failed = 0;
    while (sent < iters || c->outstanding > 0) {
        /* One refill is one batch scope (without --coalesce, a no-op). */
        void *scope = cw_context_batch_begin(c->ctx);
        cw_status_t st = CW_OK;

        while (sent < iters && c->outstanding < inflight) {
            st = cw_forward(hs[next], 0, cli_cb, c);
            if (st != CW_OK)
                break;
            next = (next + 1) % inflight;
            c->outstanding++;
            sent++;
        }
        cw_context_batch_end(c->ctx, scope);
        if (st != CW_OK && st != CW_BUSY) {
            fprintf(stderr, "cw-perf: forward: %s\n", cw_status_str(st));
            return 0;
        }
        pump(c->ctx);
        if (stop)
            return 0;
    }
    if (c->failed) {
        fprintf(stderr, "cw-perf: %u RPCs failed (%s)\n", c->failed,
                cw_status_str(c->last_err));
        return 0;
    }
    return cw_now_ns() - t0;
}

struct result {
    size_t size;
    const char *dir;
    double med, min, max; /* lat: us; rate: RPC/s; bw: MiB/s */
    double extra;         /* bw: server-side transfer MiB/s */
};

static int bench_rpc(struct cli *c, bool lat, const size_t *sizes, int nsizes,
                     unsigned inflight, unsigned iters, unsigned reps,
                     struct result *res)
{
    cw_rpc_id_t id = cw_rpc_id(RPC_ECHO);

    if (lat)
        inflight = 1;
    for (int s = 0; s < nsizes; s++) {
        cw_handle_t *hs[MAX_INFLIGHT];
        double v[64];
        uint8_t *arg = calloc(1, sizes[s] ? sizes[s] : 1);

        for (unsigned i = 0; i < inflight; i++) {
            if (cw_handle_create(c->ctx, c->target, id, &hs[i]) != CW_OK)
                return -1;
            cw_buf_put_bytes(cw_handle_input(hs[i]), arg, sizes[s]);
        }
        /* Warm-up (connections, pools, page faults). */
        if (run_calls(c, hs, inflight, iters / 10 + inflight) == 0)
            return -1;
        for (unsigned r = 0; r < reps; r++) {
            uint64_t ns = run_calls(c, hs, inflight, iters);
            if (ns == 0)
                return -1;
            v[r] = lat ? (double)ns / iters / 1000.0
                       : (double)iters * 1e9 / (double)ns;
        }
        for (unsigned i = 0; i < inflight; i++)
            cw_handle_release(hs[i]);
        free(arg);
        res[s].size = sizes[s];
        res[s].dir = "";
        res[s].med = median(v, reps);
        res[s].min = v[0];
        res[s].max = v[reps - 1];
    }
    return 0;
}

static int bench_bw(struct cli *c, const size_t *sizes, int nsizes,
                    unsigned inflight, unsigned iters, unsigned reps,
                    struct result *res)
{
    cw_rpc_id_t id = cw_rpc_id(RPC_BULK);
    int k = 0;

    for (int s = 0; s < nsizes; s++) {
        for (int d = 1; d <= 2; d++) {
            if (!(bw_dirs & (1u << (d - 1))))
                continue;
            cw_handle_t *hs[MAX_INFLIGHT];
            cw_bulk_t *bulks[MAX_INFLIGHT];
            uint8_t *bufs[MAX_INFLIGHT];
            double v[64], xv[64];
            unsigned n = iters;
            /* Keep each run to a few hundred MiB. */
            if (sizes[s] > 0 && (uint64_t)n * sizes[s] > (512ull << 20))
                n = (unsigned)((512ull << 20) / sizes[s]);
            if (n < inflight)
                n = inflight;
            for (unsigned i = 0; i < inflight; i++) {
                struct cw_segment seg;
                bufs[i] = malloc(sizes[s] ? sizes[s] : 1);
                memset(bufs[i], 0x3c, sizes[s]);
                seg.base = bufs[i];
                seg.len = sizes[s];
                if (cw_bulk_create(c->ctx, &seg, 1,
                                   d == 1 ? CW_BULK_READ_ONLY
                                          : CW_BULK_WRITE_ONLY,
                                   &bulks[i]) != CW_OK ||
                    cw_handle_create(c->ctx, c->target, id, &hs[i]) != CW_OK)
                    return -1;
                cw_buf_put_u8(cw_handle_input(hs[i]), (uint8_t)d);
                cw_buf_put_bulk(cw_handle_input(hs[i]), bulks[i]);
            }
            if (run_calls(c, hs, inflight, inflight) == 0)
                return -1;
            for (unsigned r = 0; r < reps; r++) {
                uint64_t ns = run_calls(c, hs, inflight, n), xns = 0;
                if (ns == 0)
                    return -1;
                v[r] = (double)n * sizes[s] / (1 << 20) / ((double)ns / 1e9);
                for (unsigned i = 0; i < inflight; i++) {
                    uint64_t t = 0;
                    cw_buf_get_u64(cw_handle_output(hs[i]), &t);
                    xns += t;
                }
                xv[r] = xns ? (double)sizes[s] * inflight / (1 << 20) /
                                  ((double)xns / 1e9)
                            : 0;
            }
            for (unsigned i = 0; i < inflight; i++) {
                cw_handle_release(hs[i]);
                cw_bulk_free(bulks[i]);
                free(bufs[i]);
            }
            res[k].size = sizes[s];
            res[k].dir = d == 1 ? "pull" : "push";
            res[k].med = median(v, reps);
            res[k].min = v[0];
            res[k].max = v[reps - 1];
            res[k].extra = median(xv, reps);
            k++;
        }
    }
    return k;
}

static void print_results(const char *test, const char *target,
                          unsigned inflight, unsigned reps, bool json,
                          const struct result *res, int n)
{
    const char *unit = strcmp(test, "lat") == 0    ? "us"
                       : strcmp(test, "rate") == 0 ? "rpc/s"
                                                   : "MiB/s";
    if (json) {
        printf("{\"test\":\"%s\",\"target\":\"%s\",\"mode\":\"%s\","
               "\"inflight\":%u,\"reps\":%u,\"unit\":\"%s\",\"results\":[",
               test, target, busy ? "busy" : "blocking", inflight, reps, unit);
        for (int i = 0; i < n; i++) {
            printf("%s{\"size\":%zu,", i ? "," : "", res[i].size);
            if (res[i].dir[0])
                printf("\"dir\":\"%s\",\"server_xfer\":%.1f,", res[i].dir,
                       res[i].extra);
            printf("\"median\":%.3f,\"min\":%.3f,\"max\":%.3f}", res[i].med,
                   res[i].min, res[i].max);
        }
        printf("]}\n");
        return;
    }
    printf("# cw-perf %s  target %s  mode %s  inflight %u  median of %u\n",
           test, target, busy ? "busy" : "blocking", inflight, reps);
    if (strcmp(test, "bw") == 0)
        printf("%12s %5s %12s %12s %12s %14s\n", "size", "dir", "median",
               "min", "max", "server-xfer");
    else
        printf("%12s %12s %12s %12s\n", "size", "median", "min", "max");
    for (int i = 0; i < n; i++) {
        if (res[i].dir[0])
            printf("%12zu %5s %12.1f %12.1f %12.1f %14.1f  %s\n", res[i].size,
                   res[i].dir, res[i].med, res[i].min, res[i].max,
                   res[i].extra, unit);
        else
            printf("%12zu %12.3f %12.3f %12.3f  %s\n", res[i].size,
                   res[i].med, res[i].min, res[i].max, unit);
    }
}

static int run_client(const char *target, const char *test,
                      const char *sizes_s, unsigned inflight, unsigned iters,
                      unsigned reps, bool json)
{
    struct cw_context_opts o;
    struct cli c = {0};
    size_t sizes[MAX_SIZES];
    struct result res[2 * MAX_SIZES];
    bool bw = strcmp(test, "bw") == 0;
    int n, k;
    cw_status_t st;

    if (!sizes_s)
        sizes_s = bw ? "64K,1M,16M,64M" : "0,64,4K,64K";
    n = parse_sizes(sizes_s, sizes);
    if (n <= 0) {
        fprintf(stderr, "cw-perf: bad --sizes \"%s\"\n", sizes_s);
        return 2;
    }
    if (!iters)
        iters = bw ? 64 : 20000;
    if (!inflight)
        inflight = strcmp(test, "lat") == 0 ? 1 : bw ? 1 : 16;
    cw_context_opts_init(&o);
    if (busy)
        o.flags |= CW_CTX_BUSY;
    if (coalesce)
        o.flags |= CW_CTX_COALESCE;
    st = cw_context_create(&o, &c.ctx);
    if (st == CW_OK)
        st = cw_addr_lookup(c.ctx, target, &c.target);
    if (st != CW_OK) {
        fprintf(stderr, "cw-perf: cannot reach %s: %s\n", target,
                cw_status_str(st));
        cw_context_destroy(c.ctx);
        return 1;
    }
    if (bw)
        k = bench_bw(&c, sizes, n, inflight, iters, reps, res);
    else if (strcmp(test, "lat") == 0 || strcmp(test, "rate") == 0)
        k = bench_rpc(&c, strcmp(test, "lat") == 0, sizes, n, inflight, iters,
                      reps, res) == 0 ? n : -1;
    else {
        fprintf(stderr, "cw-perf: unknown test \"%s\"\n", test);
        k = -2;
    }
    if (k > 0)
        print_results(test, target, strcmp(test, "lat") == 0 ? 1 : inflight,
                      reps, json, res, k);
    cw_addr_free(c.target);
    cw_context_destroy(c.ctx);
    return k > 0 ? 0 : k == -2 ? 2 : 1;
}

static int quit_server(const char *target)
{
    cw_context_t *ctx;
    cw_addr_t *a;
    cw_handle_t *h;
    struct cli c = {0};

    if (cw_context_create(NULL, &ctx) != CW_OK)
        return 1;
    c.ctx = ctx;
    if (cw_addr_lookup(ctx, target, &a) != CW_OK ||
        cw_handle_create(ctx, a, cw_rpc_id(RPC_QUIT), &h) != CW_OK) {
        cw_context_destroy(ctx);
        return 1;
    }
    c.outstanding = 1;
    if (cw_forward(h, 5000, cli_cb, &c) == CW_OK)
        while (c.outstanding)
            pump(ctx);
    cw_handle_release(h);
    cw_addr_free(a);
    cw_context_destroy(ctx);
    return c.failed ? 1 : 0;
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
        {"busy", no_argument, NULL, 'b'},
        {"coalesce", no_argument, NULL, 'C'},
        {"json", no_argument, NULL, 'j'},
        {"dir", required_argument, NULL, 'd'},
        {"contexts", required_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *listen = NULL, *addr_file = NULL, *target = NULL;
    const char *test = NULL, *sizes = NULL, *mode;
    unsigned inflight = 0, iters = 0, reps = 5, nctx = 1;
    bool json = false;
    int c;

    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    mode = argv[1];
    optind = 2;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'l': listen = optarg; break;
        case 'a': addr_file = optarg; break;
        case 't': target = optarg; break;
        case 'T': test = optarg; break;
        case 's': sizes = optarg; break;
        case 'c': {
            unsigned long long v;
            if (!cli_uint(optarg, MAX_CONTEXTS, &v) || v == 0) {
                fprintf(stderr, "cw-perf: --contexts: expected 1 to %d, got "
                        "'%s'\n", MAX_CONTEXTS, optarg);
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
                fprintf(stderr, "cw-perf: --%s: expected a number, got "
                        "'%s'\n", c == 'i' ? "inflight" : c == 'n' ? "iters"
                                                              : "reps",
                        optarg);
                return 2;
            }
            *(c == 'i' ? &inflight : c == 'n' ? &iters : &reps) = (unsigned)v;
            break;
        }
        case 'b': busy = true; break;
        case 'C': coalesce = true; break;
        case 'j': json = true; break;
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
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (inflight > MAX_INFLIGHT || reps == 0 || reps > 64) {
        fprintf(stderr, "cw-perf: --inflight <= %d, 1 <= --reps <= 64\n",
                MAX_INFLIGHT);
        return 2;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    if (strcmp(mode, "server") == 0 && listen)
        return run_server(listen, addr_file, nctx);
    if (strcmp(mode, "client") == 0 && target && test)
        return run_client(target, test, sizes, inflight, iters, reps, json);
    if (strcmp(mode, "quit") == 0 && target)
        return quit_server(target);
    usage(stderr);
    return 2;
}
