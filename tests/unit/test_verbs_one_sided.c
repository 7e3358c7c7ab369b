/*
 * One-sided RDMA on the fake verbs device: a target process registers
 * memory, accepts its connections and then never calls into the fake
 * again (it blocks on a pipe), yet serves 10^4 READs and WRITEs of 1 B to
 * 16 MiB, as an HCA serves them without the target's CPU.  Every READ is
 * checked against a shadow copy of the target's memory kept from the
 * WRITEs, and the target's own checksum of its memory must match the
 * shadow at the end.  A bad rkey, an out-of-bounds READ and a WRITE to
 * memory registered without remote write each fail with
 * IBV_WC_REM_ACCESS_ERR and take their QP to the error state, leaving the
 * target's memory untouched.  Every wait is bounded; the target is killed
 * and reaped on any failure.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <stddef.h>

#include <cmocka.h>

#include "vb_fake_test.h"

#define BUF     (16u << 20)
#define RO_LEN  (64u << 10)
#define NOPS    10000
#define NQP     4 /* data, bad rkey, out of bounds, wrong access */
#define WAIT_MS 10000

static const struct vb_ops *F = &vb_fake_ops;
static pid_t target_pid = -1;

struct target_info {
    uint16_t port;
    uint32_t rw_rkey, ro_rkey;
    uint64_t rw_addr, ro_addr;
};

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("not ok - ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    if (target_pid > 0) {
        kill(target_pid, SIGKILL);
        waitpid(target_pid, NULL, 0);
    }
    exit(1);
}

#define CHECK(c, ...)                                                          \
    do {                                                                       \
        if (!(c))                                                              \
            die(__VA_ARGS__);                                                  \
    } while (0)

static uint64_t fnv(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(seed + i * 131u + (i >> 11));
}

static uint32_t mix(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    return x ^ (x >> 16);
}

/* Bounded read of exactly @p n bytes from a pipe. */
static bool pipe_read(int fd, void *buf, size_t n)
{
    uint8_t *p = buf;
    uint64_t end = now_ms() + WAIT_MS;
    while (n > 0 && now_ms() < end) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, 100) <= 0)
            continue;
        ssize_t r = read(fd, p, n);
        if (r <= 0)
            return false;
        p += r;
        n -= (size_t)r;
    }
    return n == 0;
}

static struct rdma_cm_event *next_ev(struct rdma_event_channel *ch)
{
    uint64_t end = now_ms() + WAIT_MS;
    struct rdma_cm_event *ev;
    while (now_ms() < end) {
        if (F->get_cm_event(ch, &ev) == 0)
            return ev;
        struct pollfd pf = {.fd = ch->fd, .events = POLLIN};
        poll(&pf, 1, 10);
    }
    return NULL;
}

static const struct rdma_conn_param conn_param = {.responder_resources = 4,
                                                  .initiator_depth = 4,
                                                  .retry_count = 7,
                                                  .rnr_retry_count = 7};

/* The target: set up, accept NQP connections, report ready, then block on
 * the pipe without entering the fake until asked for checksums. */
static int target(int wfd, int rfd)
{
    struct sockaddr_in l = {.sin_family = AF_INET};
    struct rdma_cm_id *lid, *ids[NQP];
    struct target_info ti = {0};
    int nids = 0, established = 0;
    char cmd;

    inet_pton(AF_INET, "127.0.0.1", &l.sin_addr);
    struct rdma_event_channel *ch = F->create_event_channel();
    if (!ch)
        return 2;
    nonblock(ch->fd);
    if (F->create_id(ch, &lid, NULL, RDMA_PS_TCP) ||
        F->bind_addr(lid, (struct sockaddr *)&l) || F->listen(lid, NQP))
        return 3;
    struct ibv_pd *pd = F->alloc_pd(lid->verbs);
    struct ibv_cq *cq = F->create_cq(lid->verbs, 64, NULL, NULL, 0);
    uint8_t *rw = mmap(NULL, BUF, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint8_t *ro = mmap(NULL, RO_LEN, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (!pd || !cq || rw == MAP_FAILED || ro == MAP_FAILED)
        return 4;
    fill(rw, BUF, 1);
    fill(ro, RO_LEN, 2);
    struct ibv_mr *mrw =
        F->reg_mr(pd, rw, BUF,
                  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
                      IBV_ACCESS_REMOTE_WRITE);
    struct ibv_mr *mro = F->reg_mr(
        pd, ro, RO_LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
    if (!mrw || !mro)
        return 5;
    ti.port = ntohs(lid->route.addr.src_sin.sin_port);
    ti.rw_rkey = mrw->rkey;
    ti.ro_rkey = mro->rkey;
    ti.rw_addr = (uintptr_t)rw;
    ti.ro_addr = (uintptr_t)ro;
    if (write(wfd, &ti, sizeof(ti)) != (ssize_t)sizeof(ti))
        return 6;
    while (established < NQP) {
        struct rdma_cm_event *ev = next_ev(ch);
        struct ibv_qp_init_attr qa;
        if (!ev)
            return 7;
        if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST && nids < NQP) {
            struct rdma_cm_id *id = ev->id;
            F->ack_cm_event(ev);
            qp_init_attr(&qa, cq);
            if (F->create_qp(id, pd, &qa) || F->accept(id, (void *)&conn_param))
                return 8;
            ids[nids++] = id;
        } else if (ev->event == RDMA_CM_EVENT_ESTABLISHED) {
            established++;
            F->ack_cm_event(ev);
        } else {
            return 9;
        }
    }
    /* From here on the fake is not entered until 'V'. */
    cmd = 'R';
    if (write(wfd, &cmd, 1) != 1)
        return 10;
    if (read(rfd, &cmd, 1) != 1 || cmd != 'V')
        return 11;
    uint64_t sums[2] = {fnv(rw, BUF), fnv(ro, RO_LEN)};
    if (write(wfd, sums, sizeof(sums)) != (ssize_t)sizeof(sums))
        return 12;
    if (read(rfd, &cmd, 1) != 1 || cmd != 'Q')
        return 13;
    for (int i = 0; i < nids; i++) {
        F->destroy_qp(ids[i]);
        F->destroy_id(ids[i]);
    }
    F->destroy_id(lid);
    F->dereg_mr(mrw);
    F->dereg_mr(mro);
    F->destroy_cq(cq);
    F->dealloc_pd(pd);
    F->destroy_event_channel(ch);
    munmap(rw, BUF);
    munmap(ro, RO_LEN);
    return 0;
}

struct init {
    struct rdma_event_channel *ch;
    struct rdma_cm_id *ids[NQP];
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_mr *mr;
    uint8_t *local;
};

static void connect_all(struct init *in, uint16_t port)
{
    struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
    for (int q = 0; q < NQP; q++) {
        struct rdma_cm_id *id;
        struct rdma_cm_event *ev;
        struct ibv_qp_init_attr qa;
        CHECK(F->create_id(in->ch, &id, NULL, RDMA_PS_TCP) == 0, "create_id");
        CHECK(F->resolve_addr(id, NULL, (struct sockaddr *)&dst, 1000) == 0,
              "resolve_addr");
        ev = next_ev(in->ch);
        CHECK(ev && ev->event == RDMA_CM_EVENT_ADDR_RESOLVED, "addr resolved");
        F->ack_cm_event(ev);
        CHECK(F->resolve_route(id, 1000) == 0, "resolve_route");
        ev = next_ev(in->ch);
        CHECK(ev && ev->event == RDMA_CM_EVENT_ROUTE_RESOLVED, "route");
        F->ack_cm_event(ev);
        if (!in->pd) {
            in->pd = F->alloc_pd(id->verbs);
            in->cq = F->create_cq(id->verbs, 64, NULL, NULL, 0);
            CHECK(in->pd && in->cq, "pd/cq");
        }
        qp_init_attr(&qa, in->cq);
        CHECK(F->create_qp(id, in->pd, &qa) == 0, "create_qp");
        CHECK(F->connect(id, (void *)&conn_param) == 0, "connect");
        ev = next_ev(in->ch);
        CHECK(ev && ev->event == RDMA_CM_EVENT_ESTABLISHED,
              "connection %d not established (%s)", q,
              ev ? rdma_event_str(ev->event) : "no event");
        F->ack_cm_event(ev);
        in->ids[q] = id;
    }
}

/* Post one RDMA op on QP @p q (one or two local SGEs) and wait for its
 * completion, polling our own CQ only. */
static struct ibv_wc rdma1(struct init *in, int q, enum ibv_wr_opcode op,
                           uint64_t id, uint8_t *laddr, uint32_t len,
                           uint64_t raddr, uint32_t rkey, bool split)
{
    struct ibv_sge sge[2] = {
        {.addr = (uintptr_t)laddr, .length = len, .lkey = in->mr->lkey}};
    struct ibv_send_wr wr = {.wr_id = id,
                             .sg_list = sge,
                             .num_sge = 1,
                             .opcode = op,
                             .send_flags = IBV_SEND_SIGNALED},
                       *bad;
    struct ibv_wc wc;
    if (split && len > 1) {
        sge[0].length = len / 2;
        sge[1] = (struct ibv_sge){.addr = (uintptr_t)laddr + len / 2,
                                  .length = len - len / 2,
                                  .lkey = in->mr->lkey};
        wr.num_sge = 2;
    }
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    CHECK(F->post_send(in->ids[q]->qp, &wr, &bad) == 0, "post_send %" PRIu64,
          id);
    uint64_t end = now_ms() + WAIT_MS;
    for (;;) {
        int n = F->poll_cq(in->cq, 1, &wc);
        CHECK(n >= 0, "poll_cq: %d", n);
        if (n == 1)
            break;
        CHECK(now_ms() < end, "op %" PRIu64 " not complete in %d ms", id,
              WAIT_MS);
    }
    CHECK(wc.wr_id == id, "completion for %" PRIu64 ", wanted %" PRIu64,
          wc.wr_id, id);
    return wc;
}

static void data_phase(struct init *in, const struct target_info *ti,
                       uint8_t *shadow)
{
    struct vb_fake_stats s0, s1;
    uint32_t min = BUF, max = 0;
    fake_stats_get(&s0);
    for (uint32_t i = 0; i < NOPS; i++) {
        uint32_t len;
        if (i % 500 == 0)
            len = BUF;
        else if (i % 97 == 1)
            len = 1;
        else if (i % 50 == 0)
            len = (1u << 20) + i;
        else
            len = 1 + mix(i) % 65536;
        uint32_t off = mix(i ^ 0x5bd1e995u) % (BUF - len + 1);
        uint32_t loff = mix(i * 3u) % (BUF - len + 1);
        bool put = (i & 1) == 0;
        bool split = i % 3 == 0;
        min = len < min ? len : min;
        max = len > max ? len : max;
        if (put) {
            fill(in->local + loff, len, i);
            struct ibv_wc wc =
                rdma1(in, 0, IBV_WR_RDMA_WRITE, i, in->local + loff, len,
                      ti->rw_addr + off, ti->rw_rkey, split);
            CHECK(wc.status == IBV_WC_SUCCESS, "put %u (%u B): %s", i, len,
                  ibv_wc_status_str(wc.status));
            memcpy(shadow + off, in->local + loff, len);
        } else {
            memset(in->local + loff, 0xee, len);
            struct ibv_wc wc =
                rdma1(in, 0, IBV_WR_RDMA_READ, i, in->local + loff, len,
                      ti->rw_addr + off, ti->rw_rkey, split);
            CHECK(wc.status == IBV_WC_SUCCESS, "get %u (%u B): %s", i, len,
                  ibv_wc_status_str(wc.status));
            CHECK(wc.byte_len == len, "get %u: byte_len %u", i, wc.byte_len);
            CHECK(memcmp(in->local + loff, shadow + off, len) == 0,
                  "get %u (%u B at %u): data differs from what was put", i, len,
                  off);
        }
    }
    fake_stats_get(&s1);
    /* This process, the initiator, executed them all. */
    CHECK(s1.writes - s0.writes == NOPS / 2 && s1.reads - s0.reads == NOPS / 2,
          "initiator executed %" PRIu64 " writes, %" PRIu64 " reads",
          s1.writes - s0.writes, s1.reads - s0.reads);
    printf("ok - %d gets and puts of %u B..%u B served by a target that "
           "does not progress, data verified\n",
           NOPS, min, max);
}

static void refused(struct init *in, int q, enum ibv_wr_opcode op,
                    uint64_t raddr, uint32_t rkey, uint32_t len,
                    const char *what)
{
    struct ibv_wc wc =
        rdma1(in, q, op, 100 + (uint64_t)q, in->local, len, raddr, rkey, false);
    CHECK(wc.status == IBV_WC_REM_ACCESS_ERR, "%s: %s, wanted %s", what,
          ibv_wc_status_str(wc.status),
          ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR));
    CHECK(in->ids[q]->qp->state == IBV_QPS_ERR, "%s: QP not in error", what);
    /* Further work on that QP is flushed. */
    wc = rdma1(in, q, IBV_WR_RDMA_READ, 200 + (uint64_t)q, in->local, 8, raddr,
               rkey, false);
    CHECK(wc.status == IBV_WC_WR_FLUSH_ERR, "%s: next WR %s", what,
          ibv_wc_status_str(wc.status));
    printf("ok - %s: IBV_WC_REM_ACCESS_ERR, QP in error\n", what);
}

int main(void)
{
    int to_init[2], to_target[2];
    struct target_info ti;
    struct init in = {0};
    char cmd;

    signal(SIGPIPE, SIG_IGN);
    CHECK(pipe(to_init) == 0 && pipe(to_target) == 0, "pipe");
    target_pid = fork();
    CHECK(target_pid >= 0, "fork: %s", strerror(errno));
    if (target_pid == 0) {
        close(to_init[0]);
        close(to_target[1]);
        _exit(target(to_init[1], to_target[0]));
    }
    close(to_init[1]);
    close(to_target[0]);
    CHECK(pipe_read(to_init[0], &ti, sizeof(ti)), "no target info");

    uint8_t *shadow = mmap(NULL, BUF, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    in.local = mmap(NULL, BUF, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(shadow != MAP_FAILED && in.local != MAP_FAILED, "mmap");
    fill(shadow, BUF, 1);
    in.ch = F->create_event_channel();
    CHECK(in.ch, "create_event_channel");
    nonblock(in.ch->fd);
    connect_all(&in, ti.port);
    in.mr = F->reg_mr(in.pd, in.local, BUF, IBV_ACCESS_LOCAL_WRITE);
    CHECK(in.mr, "reg_mr");
    CHECK(pipe_read(to_init[0], &cmd, 1) && cmd == 'R', "target not ready");

    data_phase(&in, &ti, shadow);

    struct vb_fake_stats s0, s1;
    fake_stats_get(&s0);
    refused(&in, 1, IBV_WR_RDMA_READ, ti.rw_addr, ti.rw_rkey ^ 0x00800000u, 8,
            "bad rkey");
    refused(&in, 2, IBV_WR_RDMA_READ, ti.rw_addr + BUF - 4, ti.rw_rkey, 8,
            "out of bounds");
    refused(&in, 3, IBV_WR_RDMA_WRITE, ti.ro_addr, ti.ro_rkey, 64,
            "write to memory registered without remote write");
    fake_stats_get(&s1);
    CHECK(s1.access_naks - s0.access_naks == 3, "%" PRIu64 " access errors",
          s1.access_naks - s0.access_naks);

    /* The target's memory is what the puts made it; the refused write
     * left the read-only region alone. */
    uint64_t sums[2];
    uint8_t *ro = malloc(RO_LEN);
    CHECK(ro, "malloc");
    fill(ro, RO_LEN, 2);
    cmd = 'V';
    CHECK(write(to_target[1], &cmd, 1) == 1, "write V");
    CHECK(pipe_read(to_init[0], sums, sizeof(sums)), "no checksums");
    CHECK(sums[0] == fnv(shadow, BUF), "target memory differs from the puts");
    CHECK(sums[1] == fnv(ro, RO_LEN), "read-only region was written");
    printf("ok - target memory matches the puts; read-only region intact\n");
    free(ro);

    cmd = 'Q';
    CHECK(write(to_target[1], &cmd, 1) == 1, "write Q");
    for (int q = 0; q < NQP; q++) {
        F->destroy_qp(in.ids[q]);
        CHECK(F->destroy_id(in.ids[q]) == 0, "destroy_id");
    }
    CHECK(F->dereg_mr(in.mr) == 0, "dereg_mr");
    CHECK(F->destroy_cq(in.cq) == 0, "destroy_cq");
    CHECK(F->dealloc_pd(in.pd) == 0, "dealloc_pd");
    F->destroy_event_channel(in.ch);
    munmap(shadow, BUF);
    munmap(in.local, BUF);

    int st = 0;
    uint64_t end = now_ms() + WAIT_MS;
    pid_t w;
    while ((w = waitpid(target_pid, &st, WNOHANG)) == 0 && now_ms() < end) {
        struct pollfd pf = {.fd = to_init[0], .events = POLLIN};
        poll(&pf, 1, 50); /* EOF once the target has exited */
    }
    CHECK(w == target_pid, "target did not exit");
    target_pid = -1;
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "target failed (status %d)",
          st);
    close(to_init[0]);
    close(to_target[1]);
    printf("ok - target exited cleanly\n");
    return 0;
}
