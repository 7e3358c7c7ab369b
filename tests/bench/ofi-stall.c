/*
 * ofi-stall: per-transfer latency of many single 64 KiB RMA transfers, to
 * catch progress stalls in blocking mode (Mercury sees ~1 ms stalls at
 * random with tcp;ofi_rxm).  Works on any NA URI; written for na-ofi.
 *
 *   ofi-stall [--busy] [--target-busy] [--iters N] [--size BYTES]
 *             [--op get|put] URI
 *
 * Forks a target that registers a buffer, sends its handle, and then waits
 * in cw_na_progress_wait() (blocking) or spins in cw_na_progress() (--busy)
 * until told to quit; the parent times each transfer from post to
 * callback, waiting the same way, and prints p50/p99/p99.9/max, how many
 * took over 500 us and how many fell in the 0.9-1.5 ms band (one missed
 * wake-up of the core's 1 ms wait slice).  --target-busy makes only the
 * target spin, to tell target-side wake-up stalls from the rest.
 */
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <causeway/log.h>
#include <causeway/na.h>

#define TAG_HELLO  1
#define TAG_HANDLE 2
#define TAG_QUIT   3

struct flag {
    int calls;
    cw_status_t st;
    size_t len;
    cw_na_addr_t *src;
};

static void flag_cb(const struct cw_na_cb_info *info)
{
    struct flag *f = info->arg;

    f->calls++;
    f->st = info->status;
    if (info->type == CW_NA_OP_RECV_UNEXPECTED) {
        f->len = info->u.recv_unexpected.len;
        f->src = info->u.recv_unexpected.source;
    } else if (info->type == CW_NA_OP_RECV_EXPECTED) {
        f->len = info->u.recv_expected.len;
    }
}

static bool busy, target_busy;

static bool wait_for(cw_na_t *na, struct flag *f, unsigned ms)
{
    uint64_t end = cw_now_ns() + (uint64_t)ms * 1000000ull;

    while (f->calls == 0 && cw_now_ns() < end) {
        if (busy)
            cw_na_progress(na, 0, NULL);
        else
            cw_na_progress_wait(na, 100, NULL);
    }
    return f->calls > 0;
}

static int target(const char *uri, int wfd, size_t size)
{
    cw_na_t *na;
    cw_na_addr_t *self;
    cw_na_mem_t *mem;
    char addr[256], hello[8];
    uint8_t ser[512];
    void *buf = calloc(1, size);
    struct cw_na_segment seg = {buf, size};
    struct flag h = {0}, s = {0}, q = {0};
    size_t n;

    busy = busy || target_busy;
    if (cw_na_open(uri, CW_NA_LISTEN | (busy ? CW_NA_BUSY : 0), NULL, &na) ||
        cw_na_addr_self(na, &self) ||
        cw_na_addr_to_string(na, self, addr, sizeof(addr)) ||
        cw_na_mem_register(na, &seg, 1, CW_NA_MEM_READ | CW_NA_MEM_WRITE, &mem))
        return 1;
    cw_na_msg_recv_unexpected(na, hello, sizeof(hello), flag_cb, &h, NULL);
    if (write(wfd, addr, strlen(addr) + 1) < 0 || !wait_for(na, &h, 10000))
        return 1;
    n = cw_na_mem_serialize_size(na, mem);
    cw_na_mem_serialize(na, ser, n, mem);
    cw_na_msg_recv_unexpected(na, hello, sizeof(hello), flag_cb, &q, NULL);
    cw_na_msg_send_expected(na, ser, n, h.src, TAG_HANDLE, flag_cb, &s, NULL);
    while (q.calls == 0) {
        if (busy)
            cw_na_progress(na, 0, NULL);
        else
            cw_na_progress_wait(na, 100, NULL);
    }
    cw_na_addr_free(na, h.src);
    cw_na_addr_free(na, q.src);
    cw_na_addr_free(na, self);
    cw_na_mem_release(na, mem);
    cw_na_close(na);
    free(buf);
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    static const struct option lopts[] = {
        {"busy", no_argument, NULL, 'b'},
        {"target-busy", no_argument, NULL, 't'},
        {"iters", required_argument, NULL, 'n'},
        {"size", required_argument, NULL, 's'},
        {"op", required_argument, NULL, 'o'},
        {NULL, 0, NULL, 0},
    };
    int iters = 10000, p[2], o, rc = 1;
    size_t size = 65536, over = 0, band = 0;
    bool put = false;
    char addr[256], hello[8] = "hi";
    uint8_t ser[512];
    const char *uri;
    cw_na_t *na;
    cw_na_addr_t *peer;
    cw_na_mem_t *local, *remote;
    struct flag s = {0}, r = {0};
    uint64_t *lat;
    void *buf;
    pid_t pid;

    while ((o = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
        if (o == 'b')
            busy = true;
        else if (o == 't')
            target_busy = true;
        else if (o == 'n')
            iters = atoi(optarg);
        else if (o == 's')
            size = strtoul(optarg, NULL, 0);
        else if (o == 'o')
            put = strcmp(optarg, "put") == 0;
        else
            return 2;
    }
    if (optind >= argc || iters < 1 || size == 0) {
        fprintf(stderr,
                "usage: %s [--busy] [--iters N] [--size B] "
                "[--op get|put] URI\n",
                argv[0]);
        return 2;
    }
    uri = argv[optind];
    cw_log_init();
    if (pipe(p) != 0)
        return 1;
    pid = fork();
    if (pid == 0) {
        close(p[0]);
        _exit(target(uri, p[1], size));
    }
    close(p[1]);
    if (read(p[0], addr, sizeof(addr)) <= 0)
        goto out_kill;
    buf = calloc(1, size);
    lat = calloc((size_t)iters, sizeof(*lat));
    {
        struct cw_na_segment seg = {buf, size};
        if (cw_na_open(uri, busy ? CW_NA_BUSY : 0, NULL, &na) ||
            cw_na_addr_lookup(na, addr, &peer) ||
            cw_na_mem_register(na, &seg, 1, 0, &local))
            goto out_kill;
    }
    cw_na_msg_recv_expected(na, ser, sizeof(ser), peer, TAG_HANDLE, flag_cb, &r,
                            NULL);
    cw_na_msg_send_unexpected(na, hello, sizeof(hello), peer, TAG_HELLO,
                              flag_cb, &s, NULL);
    if (!wait_for(na, &r, 10000) || r.st != CW_OK ||
        cw_na_mem_deserialize(na, ser, r.len, &remote) != CW_OK)
        goto out_kill;
    for (int i = 0; i < iters; i++) {
        struct flag x = {0};
        uint64_t t0 = cw_now_ns();
        cw_status_t st = put ? cw_na_put(na, local, 0, remote, 0, size, peer,
                                         flag_cb, &x, NULL)
                             : cw_na_get(na, local, 0, remote, 0, size, peer,
                                         flag_cb, &x, NULL);
        if (st != CW_OK || !wait_for(na, &x, 10000) || x.st != CW_OK) {
            fprintf(stderr, "transfer %d failed: %s\n", i,
                    cw_status_str(st != CW_OK ? st : x.st));
            goto out_kill;
        }
        lat[i] = cw_now_ns() - t0;
        over += lat[i] > 500000;
        band += lat[i] >= 900000 && lat[i] < 1500000;
    }
    qsort(lat, (size_t)iters, sizeof(*lat), cmp_u64);
    printf("# %s, %s mode%s, %d x %zu-byte %s\n", uri,
           busy ? "busy" : "blocking", target_busy ? " (target busy)" : "",
           iters, size, put ? "put" : "get");
    printf("p50_us %.1f p99_us %.1f p99.9_us %.1f max_us %.1f over_500us %zu "
           "in_0.9-1.5ms %zu\n",
           lat[iters / 2] / 1e3, lat[iters * 99 / 100] / 1e3,
           lat[(size_t)iters * 999 / 1000] / 1e3, lat[iters - 1] / 1e3, over,
           band);
    {
        struct flag qs = {0};
        cw_na_msg_send_unexpected(na, hello, sizeof(hello), peer, TAG_QUIT,
                                  flag_cb, &qs, NULL);
        wait_for(na, &qs, 5000);
    }
    rc = waitpid(pid, NULL, 0) == pid ? 0 : 1;
    cw_na_mem_release(na, remote);
    cw_na_mem_release(na, local);
    cw_na_addr_free(na, peer);
    cw_na_close(na);
    free(buf);
    free(lat);
    return rc;

out_kill:
    fprintf(stderr, "ofi-stall: setup or transfer failed\n");
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return 1;
}
