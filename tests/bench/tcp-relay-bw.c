/*
 * tcp-relay-bw: raw TCP stream bandwidth on loopback, directly or through a
 * TCP relay (haproxy), the baseline the gateway's bulk bandwidth is
 * compared with (tests/bench/gw-bulk-bench.sh).
 *
 *   tcp-relay-bw listen PORT_FILE           receiver; writes its port, then
 *                                           prints MiB/s of each stream
 *   tcp-relay-bw send PORT BYTES [REPS]     sender to 127.0.0.1:PORT
 *
 * The receiver times each stream from its first byte to its last and
 * answers one byte, so the sender's figure includes the relay's drain.
 * The sender prints the median MiB/s of REPS streams.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BUF_SIZE (1u << 20)
#define MAX_REPS 64

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int serve(const char *port_file)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t sl = sizeof(sa);
    char *buf = malloc(BUF_SIZE);
    int ls, one = 1;
    FILE *f;

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (buf == NULL || ls < 0 ||
        setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(ls, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        listen(ls, 16) != 0 ||
        getsockname(ls, (struct sockaddr *)&sa, &sl) != 0) {
        fprintf(stderr, "tcp-relay-bw: listen: %s\n", strerror(errno));
        return 1;
    }
    f = fopen(port_file, "w");
    if (f == NULL || fprintf(f, "%u\n", ntohs(sa.sin_port)) < 0 ||
        fclose(f) != 0) {
        fprintf(stderr, "tcp-relay-bw: %s: %s\n", port_file, strerror(errno));
        return 1;
    }
    for (;;) {
        int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
        uint64_t total = 0;
        double t0 = 0;
        ssize_t n;

        if (c < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "tcp-relay-bw: accept: %s\n", strerror(errno));
            return 1;
        }
        while ((n = read(c, buf, BUF_SIZE)) > 0) {
            if (total == 0)
                t0 = now_s();
            total += (uint64_t)n;
        }
        if (total > 0)
            printf("%.1f MiB/s (%llu bytes)\n",
                   (double)total / (now_s() - t0) / 1048576.0,
                   (unsigned long long)total);
        fflush(stdout);
        close(c);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static int send_one(unsigned port, uint64_t bytes, const char *buf,
                    double *mibs_p)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    uint64_t left = bytes;
    double t0;
    int s;

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons((uint16_t)port);
    s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        fprintf(stderr, "tcp-relay-bw: connect: %s\n", strerror(errno));
        if (s >= 0)
            close(s);
        return -1;
    }
    t0 = now_s();
    while (left > 0) {
        size_t chunk = left < BUF_SIZE ? (size_t)left : BUF_SIZE;
        ssize_t n = write(s, buf, chunk);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "tcp-relay-bw: write: %s\n", strerror(errno));
            close(s);
            return -1;
        }
        left -= (uint64_t)n;
    }
    /* Wait for the far end to have read everything: it closes when the
     * relay closed its side after draining. */
    shutdown(s, SHUT_WR);
    {
        char c;
        while (read(s, &c, 1) > 0)
            ;
    }
    *mibs_p = (double)bytes / (now_s() - t0) / 1048576.0;
    close(s);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "listen") == 0)
        return serve(argv[2]);
    if ((argc == 4 || argc == 5) && strcmp(argv[1], "send") == 0) {
        unsigned port = (unsigned)strtoul(argv[2], NULL, 10);
        uint64_t bytes = strtoull(argv[3], NULL, 10);
        int reps = argc == 5 ? atoi(argv[4]) : 5;
        double r[MAX_REPS];
        char *buf = malloc(BUF_SIZE);

        if (buf == NULL || port == 0 || port > 65535 || bytes == 0 ||
            reps < 1 || reps > MAX_REPS) {
            fprintf(stderr, "tcp-relay-bw: bad arguments\n");
            free(buf);
            return 2;
        }
        memset(buf, 0x5a, BUF_SIZE);
        for (int i = 0; i < reps; i++) {
            if (send_one(port, bytes, buf, &r[i]) != 0) {
                free(buf);
                return 1;
            }
        }
        qsort(r, (size_t)reps, sizeof(r[0]), cmp_double);
        printf("%.1f\n", r[reps / 2]);
        free(buf);
        return 0;
    }
    fprintf(stderr, "usage: tcp-relay-bw listen PORT_FILE | "
                    "send PORT BYTES [REPS]\n");
    return 2;
}
