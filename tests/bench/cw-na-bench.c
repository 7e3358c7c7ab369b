/*
 * cw-na-bench: NA-level benchmark for any plugin, through the core NA API.
 *
 *   cw-na-bench [--mode busy|block|both] [--iters N] [--runs R]
 *               [--inflight W] [--gap-us G] [--json] URI
 *
 * Forks a server process that opens URI (e.g. "shm://", "ofi+tcp://
 * 127.0.0.1:0") and passes its address back through a pipe; the parent is
 * the client on a second instance of the same URI.  Measured, per mode:
 *   - message round trip (unexpected request, expected reply) at 64 B and
 *     4 KiB: median over R runs of the mean of N round trips, plus the
 *     min run, and the p50/p99 of single round trips; with --gap-us the
 *     client pauses before each one so a blocking server is asleep;
 *   - put and get bandwidth at 64 KiB, 1 MiB and 16 MiB (W in flight);
 *   - a raw process_vm_readv bandwidth at 1 MiB from the server's buffer
 *     (same node only), the ceiling for a single-copy plugin.
 * Busy mode opens both instances with CW_NA_BUSY and spins in
 * cw_na_progress(); blocking mode waits in cw_na_progress_wait().
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <causeway/addr.h>
#include <causeway/log.h>
#include <causeway/na.h>

enum {
    TAG_PING = 1,
    TAG_PONG = 2,
    TAG_HELLO = 3,
    TAG_HELLO_REPLY = 4,
    TAG_QUIT = 9,
    TAG_QUIT_ACK = 10,
};

#define BUF_MAX     (16u << 20)
#define SRV_SLOTS   4
#define DEADLINE_MS 20000u

struct opt {
    const char *uri;
    int iters;
    int runs;
    int inflight;
    int gap_us;
    bool json;
};

struct comp {
    int done;
    cw_status_t st;
    size_t len;
    uint32_t tag;
    cw_na_addr_t *src;
};

static void comp_cb(const struct cw_na_cb_info *info)
{
    struct comp *c = info->arg;
    c->done++;
    c->st = info->status;
    if (info->type == CW_NA_OP_RECV_UNEXPECTED) {
        c->len = info->u.recv_unexpected.len;
        c->tag = info->u.recv_unexpected.tag;
        c->src = info->u.recv_unexpected.source;
    } else if (info->type == CW_NA_OP_RECV_EXPECTED) {
        c->len = info->u.recv_expected.len;
    }
}

static bool busy_mode;

/* Progress until *done >= want; false on timeout or error. */
static bool wait_for(cw_na_t *na, const int *done, int want)
{
    uint64_t deadline = cw_now_ns() + DEADLINE_MS * 1000000ull;
    while (*done < want) {
        cw_status_t st = busy_mode ? cw_na_progress(na, 0, NULL)
                                   : cw_na_progress_wait(na, 100, NULL);
        if (st != CW_OK && st != CW_TIMEOUT)
            return false;
        if (cw_now_ns() > deadline)
            return false;
    }
    return true;
}

/* ---------------------------------------------------------------- server */

struct hello_info {
    uint64_t pid;
    uint64_t base;
    uint64_t handle_len;
    unsigned char handle[4096];
};

struct srv {
    cw_na_t *na;
    size_t msg_max;
    bool quit;
    struct hello_info hello;
    size_t hello_len;
    struct slot {
        struct srv *srv;
        char *buf;
        cw_na_addr_t *src;
    } slots[SRV_SLOTS];
};

static void srv_recv_cb(const struct cw_na_cb_info *info);

static void srv_post(struct slot *s)
{
    cw_status_t st = cw_na_msg_recv_unexpected(
        s->srv->na, s->buf, s->srv->msg_max, srv_recv_cb, s, NULL);
    if (st != CW_OK) {
        fprintf(stderr, "server: recv_unexpected: %s\n", cw_status_str(st));
        s->srv->quit = true;
    }
}

static void srv_sent_cb(const struct cw_na_cb_info *info)
{
    struct slot *s = info->arg;
    cw_na_addr_free(s->srv->na, s->src);
    s->src = NULL;
    if (!s->srv->quit)
        srv_post(s);
}

static void srv_recv_cb(const struct cw_na_cb_info *info)
{
    struct slot *s = info->arg;
    struct srv *srv = s->srv;
    if (info->status != CW_OK) {
        if (info->status != CW_CANCELED)
            fprintf(stderr, "server: receive failed: %s\n",
                    cw_status_str(info->status));
        return;
    }
    s->src = info->u.recv_unexpected.source;
    const void *reply = s->buf;
    size_t len = info->u.recv_unexpected.len;
    uint32_t tag = TAG_PONG;
    switch (info->u.recv_unexpected.tag) {
    case TAG_PING:
        break;
    case TAG_HELLO:
        reply = &srv->hello;
        len = srv->hello_len;
        tag = TAG_HELLO_REPLY;
        break;
    case TAG_QUIT:
        len = 0;
        tag = TAG_QUIT_ACK;
        srv->quit = true;
        break;
    default:
        fprintf(stderr, "server: unknown tag %u\n",
                info->u.recv_unexpected.tag);
        srv->quit = true;
        return;
    }
    cw_status_t st = cw_na_msg_send_expected(srv->na, reply, len, s->src, tag,
                                             srv_sent_cb, s, NULL);
    if (st != CW_OK) {
        fprintf(stderr, "server: send_expected: %s\n", cw_status_str(st));
        srv->quit = true;
    }
}

static int server_main(const struct opt *o, uint32_t flags, int wfd)
{
    static struct srv srv;
    char addr[CW_URI_MAX] = "";
    cw_na_addr_t *self = NULL;
    cw_na_mem_t *mem = NULL;
    char *buf = malloc(BUF_MAX);
    int rc = 1;

    memset(&srv, 0, sizeof(srv));
    if (!buf || cw_na_open(o->uri, flags | CW_NA_LISTEN, NULL, &srv.na) ||
        cw_na_addr_self(srv.na, &self) ||
        cw_na_addr_to_string(srv.na, self, addr, sizeof(addr)))
        goto out;
    srv.msg_max = cw_na_caps(srv.na)->max_unexpected_size;
    memset(buf, 0x5a, BUF_MAX);
    if (cw_na_caps(srv.na)->flags & CW_NA_CAP_RMA) {
        struct cw_na_segment seg = {buf, BUF_MAX};
        size_t n;
        if (cw_na_mem_register(srv.na, &seg, 1,
                               CW_NA_MEM_READ | CW_NA_MEM_WRITE, &mem))
            goto out;
        n = cw_na_mem_serialize_size(srv.na, mem);
        if (n > sizeof(srv.hello.handle) ||
            cw_na_mem_serialize(srv.na, srv.hello.handle, n, mem))
            goto out;
        srv.hello.handle_len = n;
    }
    srv.hello.pid = (uint64_t)getpid();
    srv.hello.base = (uint64_t)(uintptr_t)buf;
    srv.hello_len =
        offsetof(struct hello_info, handle) + (size_t)srv.hello.handle_len;
    for (int i = 0; i < SRV_SLOTS; i++) {
        srv.slots[i].srv = &srv;
        srv.slots[i].buf = malloc(srv.msg_max ? srv.msg_max : 1);
        if (!srv.slots[i].buf)
            goto out;
        srv_post(&srv.slots[i]);
    }
    if (write(wfd, addr, strlen(addr) + 1) < 0)
        goto out;
    close(wfd);
    wfd = -1;
    /* Serve until QUIT is answered (bounded by the parent's watchdog). */
    while (!srv.quit) {
        if (busy_mode)
            cw_na_progress(srv.na, 0, NULL);
        else
            cw_na_progress_wait(srv.na, 100, NULL);
    }
    for (int i = 0; i < 200; i++) /* flush the QUIT_ACK */
        cw_na_progress(srv.na, 0, NULL);
    rc = 0;
out:
    if (wfd >= 0)
        close(wfd);
    cw_na_addr_free(srv.na, self);
    cw_na_mem_release(srv.na, mem);
    srv.quit = true; /* no reposting from callbacks run by close */
    for (int i = 0; i < SRV_SLOTS; i++) {
        cw_na_addr_free(srv.na, srv.slots[i].src);
        srv.slots[i].src = NULL;
    }
    cw_na_close(srv.na); /* cancels the posted receives */
    for (int i = 0; i < SRV_SLOTS; i++)
        free(srv.slots[i].buf);
    free(buf);
    return rc;
}

/* ---------------------------------------------------------------- client */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct client {
    cw_na_t *na;
    cw_na_addr_t *srv;
    const struct opt *o;
    char *sbuf, *rbuf;
};

/* One request/reply; returns the round trip in ns or 0 on failure. */
static uint64_t round_trip(struct client *c, size_t len, uint32_t tag,
                           uint32_t reply_tag, size_t reply_max)
{
    struct comp s = {0}, r = {0};
    uint64_t t0 = cw_now_ns();
    if (cw_na_msg_recv_expected(c->na, c->rbuf, reply_max, c->srv, reply_tag,
                                comp_cb, &r, NULL) ||
        cw_na_msg_send_unexpected(c->na, c->sbuf, len, c->srv, tag, comp_cb, &s,
                                  NULL))
        return 0;
    if (!wait_for(c->na, &r.done, 1) || !wait_for(c->na, &s.done, 1) ||
        r.st != CW_OK || s.st != CW_OK ||
        r.len != (tag == TAG_PING ? len : r.len))
        return 0;
    return cw_now_ns() - t0;
}

static int bench_latency(struct client *c, size_t len, double *med_us,
                         double *min_us, double *p50_us, double *p99_us)
{
    int iters = c->o->iters, runs = c->o->runs;
    double *per_run = calloc((size_t)runs, sizeof(double));
    double *single = calloc((size_t)runs * (size_t)iters, sizeof(double));
    int rc = -1;
    if (!per_run || !single)
        goto out;
    memset(c->sbuf, 0x11, len);
    for (int i = 0; i < iters / 10 + 10; i++) /* warm up */
        if (!round_trip(c, len, TAG_PING, TAG_PONG, len))
            goto out;
    for (int r = 0; r < runs; r++) {
        double sum = 0;
        for (int i = 0; i < iters; i++) {
            if (c->o->gap_us) /* let the server go to sleep first */
                usleep((useconds_t)c->o->gap_us);
            uint64_t ns = round_trip(c, len, TAG_PING, TAG_PONG, len);
            if (!ns)
                goto out;
            single[r * iters + i] = (double)ns / 1e3;
            sum += (double)ns / 1e3;
        }
        per_run[r] = sum / iters;
    }
    *med_us = median(per_run, runs);
    *min_us = per_run[0];
    qsort(single, (size_t)runs * (size_t)iters, sizeof(double), cmp_double);
    *p50_us = single[(size_t)runs * (size_t)iters / 2];
    *p99_us = single[(size_t)((double)runs * iters * 0.99)];
    rc = 0;
out:
    free(per_run);
    free(single);
    return rc;
}

static int bench_rma(struct client *c, bool put, cw_na_mem_t *local,
                     cw_na_mem_t *remote, size_t size, double *gbps)
{
    int runs = c->o->runs, window = c->o->inflight;
    double *res = calloc((size_t)runs, sizeof(double));
    struct comp *w = calloc((size_t)window, sizeof(struct comp));
    int rc = -1;
    size_t count = (size_t)(256u << 20) / size;
    if (count < 8)
        count = 8;
    if (!res || !w)
        goto out;
    for (int r = 0; r < runs; r++) {
        int done_total = 0;
        size_t posted = 0;
        uint64_t t0 = cw_now_ns();
        /* Keep @p window transfers in flight at distinct offsets. */
        while ((size_t)done_total < count) {
            for (int k = 0; k < window && posted < count; k++) {
                if (w[k].done == 0 && w[k].st == CW_INTERNAL)
                    continue; /* in flight */
                if (w[k].st != CW_OK) {
                    fprintf(stderr, "%s failed: %s\n", put ? "put" : "get",
                            cw_status_str(w[k].st));
                    goto out;
                }
                size_t off = (size_t)k * size % (BUF_MAX - size + 1);
                w[k].done = 0;
                w[k].st = CW_INTERNAL; /* marks in flight */
                cw_status_t st =
                    put ? cw_na_put(c->na, local, off, remote, off, size,
                                    c->srv, comp_cb, &w[k], NULL)
                        : cw_na_get(c->na, local, off, remote, off, size,
                                    c->srv, comp_cb, &w[k], NULL);
                if (st != CW_OK) {
                    fprintf(stderr, "post: %s\n", cw_status_str(st));
                    goto out;
                }
                posted++;
            }
            int before = 0;
            for (int k = 0; k < window; k++)
                before += w[k].done;
            int target = before + 1;
            int sum;
            uint64_t deadline = cw_now_ns() + DEADLINE_MS * 1000000ull;
            do {
                if (busy_mode)
                    cw_na_progress(c->na, 0, NULL);
                else
                    cw_na_progress_wait(c->na, 100, NULL);
                sum = 0;
                for (int k = 0; k < window; k++)
                    sum += w[k].done;
                if (cw_now_ns() > deadline)
                    goto out;
            } while (sum < target);
            done_total += sum - before;
        }
        /* Drain what is still in flight. */
        for (int k = 0; k < window; k++) {
            if (w[k].st == CW_INTERNAL && !wait_for(c->na, &w[k].done, 1))
                goto out;
            w[k] = (struct comp){0};
        }
        res[r] = (double)count * (double)size /
                 (double)(cw_now_ns() - t0); /* bytes/ns = GB/s */
    }
    *gbps = median(res, runs);
    rc = 0;
out:
    free(res);
    free(w);
    return rc;
}

static double raw_readv_gbps(pid_t pid, uint64_t base, char *dst, int runs)
{
    const size_t size = 1u << 20;
    double *res = calloc((size_t)runs, sizeof(double));
    double ret = 0;
    if (!res)
        return 0;
    for (int r = 0; r < runs; r++) {
        uint64_t t0 = cw_now_ns();
        for (int i = 0; i < 256; i++) {
            struct iovec l = {dst + (size_t)(i % 8) * size, size};
            struct iovec rv = {
                (void *)(uintptr_t)(base + (uint64_t)(i % 8) * size), size};
            if (process_vm_readv(pid, &l, 1, &rv, 1, 0) != (ssize_t)size) {
                fprintf(stderr, "raw process_vm_readv: %s\n", strerror(errno));
                goto out;
            }
        }
        res[r] = 256.0 * (double)size / (double)(cw_now_ns() - t0);
    }
    ret = median(res, runs);
out:
    free(res);
    return ret;
}

static int client_main(const struct opt *o, uint32_t flags,
                       const char *srv_addr, const char *mode)
{
    struct client c = {.o = o};
    struct hello_info *hello;
    cw_na_mem_t *local = NULL, *remote = NULL;
    char *lbuf = malloc(BUF_MAX);
    static const size_t msg_sizes[] = {64, 4096};
    static const size_t rma_sizes[] = {64u << 10, 1u << 20, 16u << 20};
    int rc = 1;

    c.sbuf = malloc(BUF_MAX);
    c.rbuf = malloc(BUF_MAX);
    if (!lbuf || !c.sbuf || !c.rbuf)
        goto out;
    if (cw_na_open(o->uri, flags, NULL, &c.na) ||
        cw_na_addr_lookup(c.na, srv_addr, &c.srv)) {
        fprintf(stderr, "client: cannot reach %s\n", srv_addr);
        goto out;
    }
    size_t msg_max = cw_na_caps(c.na)->max_expected_size;
    if (!round_trip(&c, 0, TAG_HELLO, TAG_HELLO_REPLY,
                    msg_max < sizeof(*hello) ? msg_max : sizeof(*hello))) {
        fprintf(stderr, "client: no HELLO reply\n");
        goto out;
    }
    hello = (struct hello_info *)(void *)c.rbuf;
    struct hello_info h = *hello;

    if (o->json)
        printf("{\"uri\": \"%s\", \"mode\": \"%s\", \"gap_us\": %d, "
               "\"latency\": [",
               o->uri, mode, o->gap_us);
    else
        printf("# %s, %s mode (%d runs x %d iters, gap %d us)\n"
               "%-10s %10s %12s %12s %12s %12s\n",
               o->uri, mode, o->runs, o->iters, o->gap_us, "test", "size",
               "median_us", "min_run_us", "p50_us", "p99_us");
    for (size_t i = 0; i < 2; i++) {
        double med, mn, p50, p99;
        if (msg_sizes[i] > msg_max)
            continue;
        if (bench_latency(&c, msg_sizes[i], &med, &mn, &p50, &p99)) {
            fprintf(stderr, "latency %zu failed\n", msg_sizes[i]);
            goto out;
        }
        if (o->json)
            printf("%s{\"size\": %zu, \"median_us\": %.3f, \"min_run_us\": "
                   "%.3f, \"p50_us\": %.3f, \"p99_us\": %.3f}",
                   i ? ", " : "", msg_sizes[i], med, mn, p50, p99);
        else
            printf("%-10s %10zu %12.3f %12.3f %12.3f %12.3f\n", "rtt",
                   msg_sizes[i], med, mn, p50, p99);
    }
    if (o->json)
        printf("], \"rma\": [");
    else
        printf("%-10s %10s %12s\n", "test", "size", "GB/s");
    if (h.handle_len) {
        struct cw_na_segment seg = {lbuf, BUF_MAX};
        memset(lbuf, 0x22, BUF_MAX);
        if (cw_na_mem_register(c.na, &seg, 1, CW_NA_MEM_READ | CW_NA_MEM_WRITE,
                               &local) ||
            cw_na_mem_deserialize(c.na, h.handle, h.handle_len, &remote))
            goto out;
        bool first = true;
        for (int put = 1; put >= 0; put--) {
            for (size_t i = 0; i < 3; i++) {
                double gbps;
                if (bench_rma(&c, put, local, remote, rma_sizes[i], &gbps)) {
                    fprintf(stderr, "%s %zu failed\n", put ? "put" : "get",
                            rma_sizes[i]);
                    goto out;
                }
                if (o->json)
                    printf("%s{\"op\": \"%s\", \"size\": %zu, \"gbps\": "
                           "%.3f}",
                           first ? "" : ", ", put ? "put" : "get", rma_sizes[i],
                           gbps);
                else
                    printf("%-10s %10zu %12.3f\n", put ? "put" : "get",
                           rma_sizes[i], gbps);
                first = false;
            }
        }
    }
    double raw = raw_readv_gbps((pid_t)h.pid, h.base, lbuf, o->runs);
    if (o->json)
        printf("], \"raw_process_vm_readv_1MiB_gbps\": %.3f}\n", raw);
    else
        printf("%-10s %10u %12.3f\n", "raw_readv", 1u << 20, raw);
    fflush(stdout);
    rc = 0;
out:
    if (c.na && c.srv) { /* stop the server in any case */
        round_trip(&c, 0, TAG_QUIT, TAG_QUIT_ACK, 0);
    }
    cw_na_mem_release(c.na, local);
    cw_na_mem_release(c.na, remote);
    cw_na_addr_free(c.na, c.srv);
    cw_na_close(c.na);
    free(lbuf);
    free(c.sbuf);
    free(c.rbuf);
    return rc;
}

/* Fork the server, run the client, reap the server (killed if stuck). */
static int run_mode(const struct opt *o, bool busy)
{
    int pfd[2];
    char addr[CW_URI_MAX];
    size_t got = 0;
    uint32_t flags = busy ? CW_NA_BUSY : 0;
    busy_mode = busy;
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return 1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        close(pfd[0]);
        alarm(600); /* never outlive a broken parent */
        _exit(server_main(o, flags, pfd[1]));
    }
    close(pfd[1]);
    while (got < sizeof(addr)) {
        ssize_t n = read(pfd[0], addr + got, sizeof(addr) - got);
        if (n <= 0)
            break;
        got += (size_t)n;
        if (memchr(addr, '\0', got))
            break;
    }
    close(pfd[0]);
    int rc = 1;
    if (got && memchr(addr, '\0', got))
        rc = client_main(o, flags, addr, busy ? "busy" : "blocking");
    else
        fprintf(stderr, "server did not start\n");
    int status = 0;
    for (int i = 0; i < 500; i++) { /* 5 s grace, then kill */
        if (waitpid(pid, &status, WNOHANG) == pid)
            return rc;
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return 1;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: cw-na-bench [--mode busy|block|both] [--iters N] "
            "[--runs R] [--inflight W] [--gap-us G] [--json] URI\n"
            "  --gap-us G  pause G us before each round trip, so that a\n"
            "              blocking server really sleeps (wake-up latency)\n"
            "  e.g. cw-na-bench shm://   cw-na-bench "
            "ofi+tcp://127.0.0.1:0\n");
}

int main(int argc, char **argv)
{
    struct opt o = {.iters = 10000, .runs = 5, .inflight = 4};
    const char *mode = "both";
    static const struct option lo[] = {
        {"mode", required_argument, NULL, 'm'},
        {"iters", required_argument, NULL, 'n'},
        {"runs", required_argument, NULL, 'r'},
        {"inflight", required_argument, NULL, 'w'},
        {"gap-us", required_argument, NULL, 'g'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int ch;
    while ((ch = getopt_long(argc, argv, "m:n:r:w:g:jh", lo, NULL)) != -1) {
        switch (ch) {
        case 'm':
            mode = optarg;
            break;
        case 'n':
            o.iters = atoi(optarg);
            break;
        case 'r':
            o.runs = atoi(optarg);
            break;
        case 'w':
            o.inflight = atoi(optarg);
            break;
        case 'g':
            o.gap_us = atoi(optarg);
            break;
        case 'j':
            o.json = true;
            break;
        default:
            usage();
            return ch == 'h' ? 0 : 2;
        }
    }
    if (optind != argc - 1 || o.iters < 1 || o.runs < 1 || o.inflight < 1 ||
        (strcmp(mode, "busy") && strcmp(mode, "block") &&
         strcmp(mode, "both"))) {
        usage();
        return 2;
    }
    o.uri = argv[optind];
    cw_log_init();
    int rc = 0;
    if (strcmp(mode, "block") != 0)
        rc |= run_mode(&o, true);
    if (strcmp(mode, "busy") != 0)
        rc |= run_mode(&o, false);
    return rc;
}
