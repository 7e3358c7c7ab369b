/*
 * Flooding peers for tests/soak/floods.sh (docs/reliability.md, "Floods"):
 * each mode sends as fast as it can for a while and prints what it did.
 *
 *   flood connect HOST PORT SECONDS [HOLD]
 *       TCP connections to HOST:PORT (a gateway's ofi+tcp or ucx+tcp
 *       listener), opened without a byte sent; each is closed at once, or
 *       with HOLD > 0 kept until HOLD are open (then the oldest is closed
 *       for each new one).  Prints "connect: N opened, F failed (first
 *       error ...), H held at the end".
 *   flood peers TARGET SECONDS
 *       One new Causeway endpoint after another (context, network, one
 *       echo call to TARGET, which is proxied through the gateway, then
 *       closed): each is a new connection and a new source at the gateway.
 *       Prints "peers: N endpoints, OK ok, statuses ...".
 *   flood unexpected URI SECONDS [WINDOW]
 *       A raw NA endpoint of URI's plugin sends the gateway network at URI
 *       unexpected messages, WINDOW (64) in flight: random bytes (0-255),
 *       and well-formed requests for an RPC nobody registered, in turn.
 *       Prints "unexpected: N sent, F failed".
 *   flood dests GATEWAY N [WINDOW [PREFIX]]
 *       N echo calls, WINDOW (64) in flight, each to a destination of its
 *       own through GATEWAY ("PREFIX127.A.B.C:7@GATEWAY", A >= 100,
 *       PREFIX "ofi+tcp://" by default: each is parsed, cached and routed
 *       by the gateway); prints "dests: N calls, statuses ...".
 * Exit 0 when the flood ran (whatever the gateway answered), 1 if it could
 * not start.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <causeway/causeway.h>
#include <causeway/na.h>

#include "rpc_priv.h"

#define FLOOD_MSG_MAX 256
#define FLOOD_WINDOW  1024

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

/* Statuses seen, counted by name, printed as NAME=N. */
struct tally {
    unsigned n[CW_STATUS_MAX + 1];
};

static void tally_add(struct tally *t, cw_status_t st)
{
    t->n[(unsigned)st <= CW_STATUS_MAX ? (unsigned)st : CW_STATUS_MAX]++;
}

static void tally_print(const struct tally *t)
{
    for (unsigned i = 0; i <= CW_STATUS_MAX; i++)
        if (t->n[i] > 0)
            printf(" %s=%u", cw_status_name((cw_status_t)i), t->n[i]);
}

/* ---- connect ------------------------------------------------------------- */

static int flood_connect(const char *host, unsigned port, unsigned seconds,
                         unsigned hold)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    int *held = NULL;
    unsigned nheld = 0, next = 0, first_errno = 0;
    unsigned long opened = 0, failed = 0;
    uint64_t end = mono_ms() + (uint64_t)seconds * 1000;

    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        fprintf(stderr, "flood: %s: not an IPv4 address\n", host);
        return 1;
    }
    if (hold > 0 && (held = calloc(hold, sizeof(*held))) == NULL)
        return 1;
    while (!g_stop && mono_ms() < end) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
            if (first_errno == 0)
                first_errno = (unsigned)errno;
            failed++;
            if (fd >= 0)
                close(fd);
            continue;
        }
        opened++;
        if (hold == 0) {
            close(fd);
            continue;
        }
        if (nheld == hold)
            close(held[next]);
        else
            nheld++;
        held[next] = fd;
        next = (next + 1) % hold;
    }
    printf("connect: %lu opened, %lu failed (first error: %s), %u held at "
           "the end\n",
           opened, failed, first_errno ? strerror((int)first_errno) : "none",
           nheld);
    fflush(stdout);
    for (unsigned i = 0; i < nheld; i++)
        close(held[i]);
    free(held);
    return 0;
}

/* ---- peers --------------------------------------------------------------- */

struct call {
    int done;
    cw_status_t st;
};

static void call_cb(cw_handle_t *h, cw_status_t st, void *arg)
{
    struct call *c = arg;

    (void)h;
    c->done++;
    c->st = st;
}

/* One new endpoint: a context, an echo call to @p target (5 s deadline),
 * closed; its status. */
static cw_status_t one_peer(const char *target)
{
    struct call c = {0};
    cw_context_t *ctx = NULL;
    cw_addr_t *dst = NULL;
    cw_handle_t *h = NULL;
    cw_status_t st;

    st = cw_context_create(NULL, &ctx);
    if (st == CW_OK)
        st = cw_addr_lookup(ctx, target, &dst);
    if (st == CW_OK)
        st = cw_handle_create(ctx, dst, cw_rpc_id("causeway.echo"), &h);
    if (st == CW_OK)
        cw_buf_put_bytes(cw_handle_input(h), "flood", 5);
    if (st == CW_OK)
        st = cw_forward(h, 5000, call_cb, &c);
    while (st == CW_OK && c.done == 0) {
        cw_progress(ctx, 10);
        cw_trigger(ctx, 0, 0, NULL);
    }
    if (st == CW_OK)
        st = c.st;
    cw_handle_release(h);
    cw_addr_free(dst);
    cw_context_destroy(ctx);
    return st;
}

static int flood_peers(const char *target, unsigned seconds)
{
    uint64_t end = mono_ms() + (uint64_t)seconds * 1000;
    struct tally t = {0};
    unsigned long n = 0;

    while (!g_stop && mono_ms() < end) {
        tally_add(&t, one_peer(target));
        n++;
    }
    printf("peers: %lu endpoints, %u ok, statuses", n, t.n[CW_OK]);
    tally_print(&t);
    printf("\n");
    fflush(stdout);
    return 0;
}

/* ---- unexpected ---------------------------------------------------------- */

struct sender {
    cw_na_t *na;
    unsigned long posted, done, failed;
};

static void sent_cb(const struct cw_na_cb_info *info)
{
    struct sender *s = info->arg;

    s->done++;
    if (info->status != CW_OK)
        s->failed++;
}

/* Message @p i: random bytes, or a well-formed request for an RPC nobody
 * registered. */
static size_t build(uint8_t *p, unsigned long i)
{
    struct cw_wire_hdr h = {.type = CW_MSG_REQ,
                            .rpc_id = cw_rpc_id("flood.nobody"),
                            .req_id = i + 1,
                            .budget_us = 1000000,
                            .resp_tag = (uint32_t)(i % 4096)};
    size_t len;

    if (i % 2 == 0) {
        len = (size_t)rand() % FLOOD_MSG_MAX;
        for (size_t k = 0; k < len; k++)
            p[k] = (uint8_t)rand();
        return len;
    }
    h.payload_len = 8;
    cw_wire_hdr_encode(p, &h);
    memcpy(p + CW_HDR_SIZE, "\x04\x00\x00\x00ping", 8);
    return CW_HDR_SIZE + 8;
}

static int flood_unexpected(const char *uri, unsigned seconds, unsigned window)
{
    static uint8_t bufs[FLOOD_WINDOW][CW_HDR_SIZE + FLOOD_MSG_MAX];
    struct sender s = {0};
    char scheme[64];
    const char *sep = strstr(uri, "://");
    cw_na_addr_t *dst = NULL;
    uint64_t end = mono_ms() + (uint64_t)seconds * 1000;
    cw_status_t st;

    if (sep == NULL || (size_t)(sep - uri) + 16 > sizeof(scheme))
        return 1;
    snprintf(scheme, sizeof(scheme), "%.*s://%s", (int)(sep - uri), uri,
             strncmp(uri, "shm", 3) == 0 ? "" : "127.0.0.1:0");
    st = cw_na_open(scheme, 0, NULL, &s.na);
    if (st == CW_OK)
        st = cw_na_addr_lookup(s.na, uri, &dst);
    if (st != CW_OK) {
        fprintf(stderr, "flood: %s: %s\n", uri, cw_status_str(st));
        goto out;
    }
    while (!g_stop && mono_ms() < end) {
        /* The buffer of a send is reused once the window has moved past
         * it: sends complete in order on one connection, and a slot is
         * taken only when fewer than @p window are outstanding. */
        while (s.posted - s.done < window) {
            uint8_t *p = bufs[s.posted % window];
            size_t len = build(p, s.posted);

            if (cw_na_msg_send_unexpected(s.na, p, len, dst, 0, sent_cb, &s,
                                          NULL) != CW_OK) {
                s.failed++;
                break;
            }
            s.posted++;
        }
        cw_na_progress_wait(s.na, 1, NULL);
    }
    end = mono_ms() + 10000;
    while (s.done < s.posted && mono_ms() < end)
        cw_na_progress_wait(s.na, 10, NULL);
    printf("unexpected: %lu sent, %lu failed, %lu not completed\n", s.posted,
           s.failed, s.posted - s.done);
    fflush(stdout);
out:
    if (s.na != NULL) {
        if (dst != NULL)
            cw_na_addr_free(s.na, dst);
        cw_na_close(s.na);
    }
    return st == CW_OK ? 0 : 1;
}

/* ---- dests --------------------------------------------------------------- */

struct dcall {
    cw_handle_t *h;
    cw_addr_t *dst;
};

static struct tally g_dtally;
static unsigned g_dbusy;
static const char *g_dprefix = "ofi+tcp://";

static void dcall_free(struct dcall *d)
{
    cw_handle_release(d->h);
    cw_addr_free(d->dst);
    d->h = NULL;
    d->dst = NULL;
}

static void dcall_cb(cw_handle_t *h, cw_status_t st, void *arg)
{
    (void)h;
    tally_add(&g_dtally, st);
    dcall_free(arg);
    g_dbusy--;
}

/* Start call @p i (its own destination) in free slot @p d. */
static void dcall_start(cw_context_t *ctx, struct dcall *d, const char *gw,
                        unsigned long i)
{
    char dest[CW_URI_MAX * 2];
    cw_status_t st;

    snprintf(dest, sizeof(dest), "%s127.%lu.%lu.%lu:7@%s", g_dprefix,
             100 + i / 65536 % 156, i / 256 % 256, i % 256, gw);
    st = cw_addr_lookup(ctx, dest, &d->dst);
    if (st == CW_OK)
        st = cw_handle_create(ctx, d->dst, cw_rpc_id("causeway.echo"), &d->h);
    if (st == CW_OK)
        st = cw_forward(d->h, 5000, dcall_cb, d);
    if (st == CW_OK) {
        g_dbusy++;
        return;
    }
    tally_add(&g_dtally, st);
    dcall_free(d);
}

static int flood_dests(const char *gw, unsigned long n, unsigned window)
{
    static struct dcall calls[FLOOD_WINDOW];
    cw_context_t *ctx = NULL;
    unsigned long sent = 0;

    if (cw_context_create(NULL, &ctx) != CW_OK)
        return 1;
    while (!g_stop && (sent < n || g_dbusy > 0)) {
        for (unsigned i = 0; i < window && sent < n; i++)
            if (calls[i].h == NULL)
                dcall_start(ctx, &calls[i], gw, sent++);
        cw_progress(ctx, 1);
        cw_trigger(ctx, 0, 0, NULL);
    }
    printf("dests: %lu calls, statuses", sent);
    tally_print(&g_dtally);
    printf("\n");
    fflush(stdout);
    cw_context_destroy(ctx);
    return 0;
}

int main(int argc, char **argv)
{
    struct sigaction sa = {.sa_handler = on_signal};

    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    srand(1);
    if ((argc == 5 || argc == 6) && strcmp(argv[1], "connect") == 0)
        return flood_connect(argv[2], (unsigned)atoi(argv[3]),
                             (unsigned)atoi(argv[4]),
                             argc == 6 ? (unsigned)atoi(argv[5]) : 0);
    if (argc == 4 && strcmp(argv[1], "peers") == 0)
        return flood_peers(argv[2], (unsigned)atoi(argv[3]));
    if ((argc == 4 || argc == 5) && strcmp(argv[1], "unexpected") == 0) {
        unsigned w = argc == 5 ? (unsigned)atoi(argv[4]) : 64;
        return flood_unexpected(argv[2], (unsigned)atoi(argv[3]),
                                w >= 1 && w <= FLOOD_WINDOW ? w : 64);
    }
    if (argc >= 4 && argc <= 6 && strcmp(argv[1], "dests") == 0) {
        unsigned w = argc >= 5 ? (unsigned)atoi(argv[4]) : 64;

        if (argc == 6)
            g_dprefix = argv[5];
        return flood_dests(argv[2], strtoul(argv[3], NULL, 10),
                           w >= 1 && w <= FLOOD_WINDOW ? w : 64);
    }
    fprintf(stderr, "usage: flood connect HOST PORT SECONDS [HOLD]\n"
                    "       flood peers TARGET SECONDS\n"
                    "       flood unexpected URI SECONDS [WINDOW]\n"
                    "       flood dests GATEWAY N [WINDOW [PREFIX]]\n");
    return 2;
}
