/*
 * ofi-raw-bw: raw libfabric RMA streaming bandwidth between two processes,
 * the baseline for na-ofi bulk numbers (Debian's libfabric-bin has no
 * fabtests, so no fi_rma_bw here).
 *
 *   ofi-raw-bw [-p PROVIDER] [-n ITERS] [-w INFLIGHT] [-b] [-y] [HOST]
 *
 * Forks a target that registers a 16 MiB buffer and keeps progressing
 * (spinning, or with -b sleeping in fi_cq_sread() on the CQ's wait object,
 * which leaves the CPU to the initiator on a small machine); the parent
 * posts fi_write/fi_read of 64 KiB, 1 MiB and 16 MiB, INFLIGHT at a time,
 * and prints GB/s.  With -y both sides sched_yield() when a poll finds
 * nothing, leaving the CPU to the kernel's loopback processing.  Defaults:
 * tcp;ofi_rxm, 127.0.0.1, 8 in flight.
 */
#include <arpa/inet.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#define BUF_SIZE (16u << 20)
#define MAX_W    64

struct ep {
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    struct fid_cq *cq;
    struct fid_ep *ep;
};

struct target_info {
    uint8_t name[64];
    size_t namelen;
    uint64_t addr, key;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void check(int rc, const char *what)
{
    if (rc != 0) {
        fprintf(stderr, "%s failed: %s\n", what, fi_strerror(-rc));
        exit(1);
    }
}

static bool block_target, yield_idle;

static void open_ep(struct ep *e, const char *prov, const char *host,
                    bool wait_fd)
{
    struct fi_info *hints = fi_allocinfo();
    struct fi_av_attr av_attr = {.type = FI_AV_UNSPEC};
    struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED,
                                 .wait_obj =
                                     wait_fd ? FI_WAIT_FD : FI_WAIT_NONE};

    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_TAGGED | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ |
                  FI_REMOTE_WRITE;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->domain_attr->mr_mode =
        FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
    hints->fabric_attr->prov_name = strdup(prov);
    check(fi_getinfo(FI_VERSION(1, 17), host, "0", FI_SOURCE, hints, &e->info),
          "fi_getinfo()");
    fi_freeinfo(hints);
    check(fi_fabric(e->info->fabric_attr, &e->fabric, NULL), "fi_fabric()");
    check(fi_domain(e->fabric, e->info, &e->domain, NULL), "fi_domain()");
    check(fi_av_open(e->domain, &av_attr, &e->av, NULL), "fi_av_open()");
    check(fi_cq_open(e->domain, &cq_attr, &e->cq, NULL), "fi_cq_open()");
    check(fi_endpoint(e->domain, e->info, &e->ep, NULL), "fi_endpoint()");
    check(fi_ep_bind(e->ep, &e->av->fid, 0), "fi_ep_bind(av)");
    check(fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV),
          "fi_ep_bind(cq)");
    check(fi_enable(e->ep), "fi_enable()");
}

static void close_ep(struct ep *e)
{
    fi_close(&e->ep->fid);
    fi_close(&e->av->fid);
    fi_close(&e->cq->fid);
    fi_close(&e->domain->fid);
    fi_close(&e->fabric->fid);
    fi_freeinfo(e->info);
}

/* Reads completions; returns how many, exits on an error entry. */
static int drain(struct ep *e)
{
    struct fi_cq_tagged_entry ev[16];
    ssize_t n = fi_cq_read(e->cq, ev, 16);

    if (n == -FI_EAVAIL) {
        struct fi_cq_err_entry err = {0};
        fi_cq_readerr(e->cq, &err, 0);
        fprintf(stderr, "completion error: %s\n", fi_strerror(err.err));
        exit(1);
    }
    return n > 0 ? (int)n : 0;
}

static void target(int wfd, int rfd, const char *prov, const char *host)
{
    struct ep e;
    struct target_info ti = {.namelen = sizeof(ti.name)};
    struct fid_mr *mr;
    void *buf = aligned_alloc(4096, BUF_SIZE);
    struct fi_context2 ctx;
    char quit;

    memset(buf, 1, BUF_SIZE);
    open_ep(&e, prov, host, block_target);
    check(fi_mr_reg(e.domain, buf, BUF_SIZE, FI_REMOTE_READ | FI_REMOTE_WRITE,
                    0, 0, 0, &mr, NULL),
          "fi_mr_reg()");
    check(fi_getname(&e.ep->fid, ti.name, &ti.namelen), "fi_getname()");
    ti.key = fi_mr_key(mr);
    ti.addr = (e.info->domain_attr->mr_mode & FI_MR_VIRT_ADDR)
                  ? (uint64_t)(uintptr_t)buf
                  : 0;
    check(fi_trecv(e.ep, &quit, 1, NULL, FI_ADDR_UNSPEC, 9, 0, &ctx),
          "fi_trecv()");
    if (write(wfd, &ti, sizeof(ti)) != (ssize_t)sizeof(ti))
        exit(1);
    /* rxm moves RMA data only when the target progresses too. */
    for (double end = now_s() + 300; now_s() < end;) {
        if (block_target) {
            struct fi_cq_tagged_entry ev;
            if (fi_cq_sread(e.cq, &ev, 1, NULL, 100) == 1)
                break;
        } else if (drain(&e) > 0) {
            break;
        } else if (yield_idle) {
            sched_yield();
        }
    }
    (void)rfd;
    fi_close(&mr->fid);
    close_ep(&e);
    free(buf);
    exit(0);
}

int main(int argc, char **argv)
{
    const char *prov = "tcp;ofi_rxm", *host = "127.0.0.1";
    int iters = 200, w = 8, opt, p[2];
    struct target_info ti;
    struct ep e;
    fi_addr_t peer;
    struct fid_mr *mr;
    void *buf;
    pid_t pid;
    static const size_t sizes[] = {65536, 1u << 20, 16u << 20};
    struct fi_context2 ctx[MAX_W + 1];

    setvbuf(stdout, NULL, _IOLBF, 0);
    while ((opt = getopt(argc, argv, "p:n:w:by")) != -1) {
        if (opt == 'b')
            block_target = true;
        else if (opt == 'y')
            yield_idle = true;
        else if (opt == 'p')
            prov = optarg;
        else if (opt == 'n')
            iters = atoi(optarg);
        else if (opt == 'w')
            w = atoi(optarg);
        else {
            fprintf(stderr,
                    "usage: %s [-p PROV] [-n ITERS] [-w INFLIGHT] "
                    "[-b] [-y] [HOST]\n",
                    argv[0]);
            return 2;
        }
    }
    if (optind < argc)
        host = argv[optind];
    if (w < 1 || w > MAX_W || iters < 1)
        return 2;
    if (pipe(p) != 0)
        return 1;
    pid = fork();
    if (pid == 0) {
        close(p[0]);
        target(p[1], -1, prov, host);
    }
    close(p[1]);
    if (read(p[0], &ti, sizeof(ti)) != (ssize_t)sizeof(ti)) {
        fprintf(stderr, "target failed to start\n");
        return 1;
    }
    open_ep(&e, prov, host, false);
    if (fi_av_insert(e.av, ti.name, 1, &peer, 0, NULL) != 1)
        return 1;
    buf = aligned_alloc(4096, BUF_SIZE);
    memset(buf, 2, BUF_SIZE);
    check(fi_mr_reg(e.domain, buf, BUF_SIZE, FI_READ | FI_WRITE, 0, 0, 0, &mr,
                    NULL),
          "fi_mr_reg()");
    printf("# raw libfabric %s RMA, %d in flight, %s target%s\n", prov, w,
           block_target ? "blocking" : "spinning",
           yield_idle ? ", yielding when idle" : "");
    printf("%-6s %10s %10s\n", "op", "size", "GB/s");
    for (int op = 0; op < 2; op++) {
        for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
            size_t sz = sizes[si];
            int n = sz >= (16u << 20) ? iters / 10 + 4 : iters;
            int posted = 0, done = 0, inflight = 0;
            double t0 = now_s(), dt;

            while (done < n) {
                while (posted < n && inflight < w) {
                    ssize_t rc =
                        op == 0 ? fi_write(e.ep, buf, sz, fi_mr_desc(mr), peer,
                                           ti.addr, ti.key, &ctx[posted % w])
                                : fi_read(e.ep, buf, sz, fi_mr_desc(mr), peer,
                                          ti.addr, ti.key, &ctx[posted % w]);
                    if (rc == -FI_EAGAIN)
                        break;
                    check((int)rc, op == 0 ? "fi_write()" : "fi_read()");
                    posted++;
                    inflight++;
                }
                int got = drain(&e);
                if (got == 0 && yield_idle)
                    sched_yield();
                done += got;
                inflight -= got;
            }
            dt = now_s() - t0;
            printf("%-6s %10zu %10.3f\n", op == 0 ? "write" : "read", sz,
                   (double)sz * n / dt / 1e9);
        }
    }
    {
        char q = 'q';
        int sent = 0;
        while (!sent) {
            ssize_t rc = fi_tsend(e.ep, &q, 1, NULL, peer, 9, &ctx[MAX_W]);
            if (rc == 0)
                sent = 1;
            else if (rc != -FI_EAGAIN)
                check((int)rc, "fi_tsend()");
            drain(&e);
        }
        for (double end = now_s() + 5; drain(&e) == 0 && now_s() < end;)
            ;
    }
    waitpid(pid, NULL, 0);
    fi_close(&mr->fid);
    close_ep(&e);
    free(buf);
    return 0;
}
