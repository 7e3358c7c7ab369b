/*
 * tcp-relay-rtt: small-message round trips over raw TCP on loopback,
 * directly or through a minimal relay: the floor under what any gateway
 * can add to a TCP round trip on this machine (tests/bench/gw-bench.sh,
 * fabric "tcp").
 *
 *   tcp-relay-rtt server PORT_FILE [--busy]
 *       echo server: writes its port, echoes every byte on every connection
 *   tcp-relay-rtt relay PORT_FILE DEST_PORT [--busy]
 *       L4 relay: each connection it accepts gets one to 127.0.0.1:DEST_PORT,
 *       and bytes are copied both ways as they come, nothing parsed
 *   tcp-relay-rtt client PORT --test lat|rate [--iters N] [--reps R]
 *                        [--inflight W] [--size S] [--busy]
 *       lat: median round trip of S-byte messages, in us;
 *       rate: messages a second with W in flight (one send per message);
 *       prints {"test":...,"median":X} (the median over R repetitions)
 *
 * Every process waits the way Causeway's progress engine does
 * (core/progress.c): it polls for up to 50 us, yielding after the first,
 * then blocks in epoll; --busy polls and never blocks.  The relay thus
 * does the least work a gateway can do per message (one receive, one send
 * each way, no decoding, no allocation), with the same waiting policy, so
 * its added latency and rate ratio bound what causewayd can reach here.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SPIN_NS        50000ull /* as CW_SPIN_NS */
#define YIELD_AFTER_NS 1000ull
#define IO_BUF         (1u << 20) /* a relay does best with large reads */
#define MAX_CONNS      64
#define MAX_REPS       64
#define MAX_SIZE       (1u << 20)

static bool busy;

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

_Noreturn static void die(const char *what)
{
    fprintf(stderr, "tcp-relay-rtt: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void set_nodelay(int fd)
{
    int one = 1;

    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0)
        die("setsockopt(TCP_NODELAY)");
}

/* Writes all of buf, waiting for room if the socket is full. */
static int write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);

        if (n > 0) {
            buf += n;
            len -= (size_t)n;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            (void)poll(&p, 1, 100);
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else {
            return -1;
        }
    }
    return 0;
}

/* The waiting policy: poll until SPIN_NS have passed without an event,
 * yielding after the first microsecond, then block (bounded).  Returns the
 * number of events in evs. */
static int wait_events(int ep, struct epoll_event *evs, int max)
{
    uint64_t start = now_ns();

    for (;;) {
        int n = epoll_wait(ep, evs, max, 0);
        uint64_t t;

        if (n != 0)
            return n;
        t = now_ns() - start;
        if (busy || t < SPIN_NS) {
            if (t >= YIELD_AFTER_NS)
                sched_yield();
            continue;
        }
        n = epoll_wait(ep, evs, max, 100);
        if (n != 0)
            return n;
    }
}

static int listen_on(const char *port_file)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t sl = sizeof(sa);
    int ls, one = 1;
    FILE *f;

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (ls < 0 ||
        setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(ls, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        listen(ls, 16) != 0 ||
        getsockname(ls, (struct sockaddr *)&sa, &sl) != 0)
        die("listen");
    f = fopen(port_file, "w");
    if (f == NULL || fprintf(f, "%u\n", ntohs(sa.sin_port)) < 0 ||
        fclose(f) != 0)
        die(port_file);
    return ls;
}

static int connect_to(unsigned port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    int s;

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons((uint16_t)port);
    s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)) != 0)
        die("connect");
    set_nodelay(s);
    return s;
}

/* Server and relay: one epoll loop.  peer[fd] is where bytes read on fd go:
 * fd itself for the echo server, the other leg for the relay. */
_Noreturn static void serve(const char *port_file, unsigned dest_port)
{
    static int peer[1024];
    static bool live[1024];
    struct epoll_event evs[MAX_CONNS];
    char *buf = malloc(IO_BUF);
    int ls = listen_on(port_file);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = ls};

    if (buf == NULL || ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev) != 0)
        die("epoll");
    for (;;) {
        int n = wait_events(ep, evs, MAX_CONNS);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            die("epoll_wait");
        }
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;

            if (fd == ls) {
                int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                int up = c;

                if (c < 0)
                    continue;
                set_nodelay(c);
                if (dest_port != 0)
                    up = connect_to(dest_port);
                if (c >= 1024 || up >= 1024) {
                    close(c);
                    if (up != c)
                        close(up);
                    continue;
                }
                peer[c] = up;
                peer[up] = c;
                live[c] = live[up] = true;
                ev.data.fd = c;
                if (epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev) != 0)
                    die("epoll_ctl");
                if (up != c) {
                    ev.data.fd = up;
                    if (epoll_ctl(ep, EPOLL_CTL_ADD, up, &ev) != 0)
                        die("epoll_ctl");
                }
                continue;
            }
            if (!live[fd])
                continue; /* closed earlier in this batch */
            ssize_t r = recv(fd, buf, IO_BUF, MSG_DONTWAIT);
            if (r < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            if (r <= 0 || write_all(peer[fd], buf, (size_t)r) != 0) {
                int other = peer[fd];

                live[fd] = live[other] = false;
                close(fd);
                if (other != fd)
                    close(other);
            }
        }
    }
}

/* One step of the waiting policy on fd, idle since `since`: while spinning,
 * return at once (yielding after the first microsecond); past the window,
 * block in poll (bounded). */
static void wait_step(int fd, uint64_t since)
{
    uint64_t t = now_ns() - since;
    struct pollfd p = {.fd = fd, .events = POLLIN};

    if (busy || t < SPIN_NS) {
        if (t >= YIELD_AFTER_NS)
            sched_yield();
        return;
    }
    (void)poll(&p, 1, 100);
}

/* Reads until want bytes have come, with the waiting policy. */
static int read_n(int s, char *buf, size_t want)
{
    size_t got = 0;
    uint64_t start = now_ns();

    while (got < want) {
        ssize_t n = recv(s, buf + got, want - got, MSG_DONTWAIT);

        if (n > 0) {
            got += (size_t)n;
            start = now_ns();
            continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EINTR))
            return -1;
        wait_step(s, start);
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static double run_lat(int s, char *buf, size_t size, unsigned iters)
{
    double *t = malloc(iters * sizeof(*t)), m;

    if (t == NULL)
        die("malloc");
    for (unsigned i = 0; i < iters; i++) {
        uint64_t t0 = now_ns();

        if (write_all(s, buf, size) != 0 || read_n(s, buf, size) != 0)
            die("round trip");
        t[i] = (double)(now_ns() - t0) / 1000.0;
    }
    qsort(t, iters, sizeof(*t), cmp_double);
    m = t[iters / 2];
    free(t);
    return m;
}

/* Messages a second with `window` in flight, one send per message. */
static double run_rate(int s, char *buf, size_t size, unsigned iters,
                       unsigned window)
{
    char *in = malloc(IO_BUF);
    unsigned sent = 0, done = 0;
    size_t partial = 0;
    uint64_t t0 = now_ns(), idle = t0;

    if (in == NULL)
        die("malloc");
    while (sent < window && sent < iters) {
        if (write_all(s, buf, size) != 0)
            die("send");
        sent++;
    }
    while (done < iters) {
        ssize_t n = recv(s, in, IO_BUF, MSG_DONTWAIT);

        if (n > 0) {
            partial += (size_t)n;
            while (partial >= size) {
                partial -= size;
                done++;
                if (sent < iters) {
                    if (write_all(s, buf, size) != 0)
                        die("send");
                    sent++;
                }
            }
            idle = now_ns();
            continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EINTR))
            die("recv");
        wait_step(s, idle);
    }
    free(in);
    return (double)iters * 1e9 / (double)(now_ns() - t0);
}

static int client(int argc, char **argv)
{
    unsigned port = (unsigned)strtoul(argv[2], NULL, 10);
    unsigned iters = 20000, reps = 5, window = 16;
    size_t size = 64;
    const char *test = "lat";
    double r[MAX_REPS];
    char *buf;
    int s;

    for (int i = 3; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(argv[i], "--busy") == 0)
            busy = true;
        else if (v != NULL && strcmp(argv[i], "--test") == 0)
            test = argv[++i];
        else if (v != NULL && strcmp(argv[i], "--iters") == 0)
            iters = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (v != NULL && strcmp(argv[i], "--reps") == 0)
            reps = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (v != NULL && strcmp(argv[i], "--inflight") == 0)
            window = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (v != NULL && strcmp(argv[i], "--size") == 0)
            size = (size_t)strtoul(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "tcp-relay-rtt: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (port == 0 || port > 65535 || iters == 0 || reps == 0 ||
        reps > MAX_REPS || window == 0 || size == 0 || size > MAX_SIZE ||
        (strcmp(test, "lat") != 0 && strcmp(test, "rate") != 0)) {
        fprintf(stderr, "tcp-relay-rtt: bad arguments\n");
        return 2;
    }
    buf = malloc(size);
    if (buf == NULL)
        die("malloc");
    memset(buf, 0x5a, size);
    s = connect_to(port);
    for (unsigned i = 0; i < reps; i++)
        r[i] = strcmp(test, "lat") == 0 ? run_lat(s, buf, size, iters)
                                        : run_rate(s, buf, size, iters, window);
    qsort(r, reps, sizeof(r[0]), cmp_double);
    printf("{\"test\":\"%s\",\"size\":%zu,\"median\":%.2f,\"min\":%.2f,"
           "\"max\":%.2f}\n",
           test, size, r[reps / 2], r[0], r[reps - 1]);
    close(s);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    bool is_busy = argc > 1 && strcmp(argv[argc - 1], "--busy") == 0;

    if ((argc == 3 || (argc == 4 && is_busy)) &&
        strcmp(argv[1], "server") == 0) {
        busy = is_busy;
        serve(argv[2], 0);
    }
    if ((argc == 4 || (argc == 5 && is_busy)) &&
        strcmp(argv[1], "relay") == 0) {
        unsigned dest = (unsigned)strtoul(argv[3], NULL, 10);

        if (dest == 0 || dest > 65535) {
            fprintf(stderr, "tcp-relay-rtt: bad port %s\n", argv[3]);
            return 2;
        }
        busy = is_busy;
        serve(argv[2], dest);
    }
    if (argc >= 3 && strcmp(argv[1], "client") == 0)
        return client(argc, argv);
    fprintf(stderr,
            "usage: tcp-relay-rtt server PORT_FILE [--busy]\n"
            "       tcp-relay-rtt relay PORT_FILE DEST_PORT [--busy]\n"
            "       tcp-relay-rtt client PORT --test lat|rate [--iters N] "
            "[--reps R] [--inflight W] [--size S] [--busy]\n");
    return 2;
}
