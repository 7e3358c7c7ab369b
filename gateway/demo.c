/*
 * causewayd --demo: an echo service on na-shm, a gateway bridging na-shm
 * and a second fabric (ofi+tcp on 127.0.0.1, else ucx+tcp), and a client
 * on that second fabric calling the service through the gateway with
 * "target@gateway" and "svc:echo@gateway".  Everything runs as real
 * processes on this machine and is cleaned up before exiting.
 */
#include "admin_client.h"
#include "echo.h"
#include "gateway.h"

#include <causeway/causeway.h>
#include <causeway/config.h>
#include <causeway/log.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEMO_STEP_MS 5000 /* longest wait for a child to come up or go */

/* The embedded configuration; %1$s is the echo backend, %2$d the pid,
 * %3$s the second fabric, %4$u the admin port. */
static const char demo_config_fmt[] =
    "# causewayd --demo: bridge na-shm and %3$s on this machine\n"
    "gateway:\n"
    "  name: demo-gw\n"
    "  admin: \"127.0.0.1:%4$u\"\n"
    "  drain_grace: 2s\n"
    "  log_level: error\n"
    "networks:\n"
    "  - { name: shm0, address: \"shm://cw-demo-gw-%2$d\" }\n"
    "  - { name: tcp0, address: \"%3$s://127.0.0.1:0\" }\n"
    "routes:\n"
    "  - { dest: \"shm://*\", via: shm0 }\n"
    "services:\n"
    "  - { name: echo, backends: [\"%1$s\"], policy: round_robin }\n"
    "limits: { max_inflight_rpcs: 256, default_timeout: 5s }\n"
    "health: { interval: 500ms, timeout: 250ms, eject_after: 3 }\n";

static const char *const demo_fabrics[] = {"ofi+tcp", "ucx+tcp"};

struct demo_child {
    pid_t pid;
    int rfd; /* its ready lines */
    int ctl; /* closing it tells the echo child to stop */
};

/* A free loopback TCP port for the admin interface (the kernel picks one;
 * it is released just before the gateway binds it). */
static unsigned demo_free_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t sl = sizeof(sa);
    unsigned port = 9464;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &sl) == 0)
        port = ntohs(sa.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static int demo_config_text(char *buf, size_t len, const char *backend,
                            const char *fabric)
{
    int n = snprintf(buf, len, demo_config_fmt, backend, (int)getpid(), fabric,
                     demo_free_port());
    return n < 0 || (size_t)n >= len ? -1 : n;
}

/* Read lines "<key> <value>" from @p fd until "ready"; fills @p keys. */
static int demo_read_ready(int fd, char lines[][CW_URI_MAX + 32], int max)
{
    char buf[4096];
    size_t len = 0;
    int n = 0;
    uint64_t end = cw_now_ns() + DEMO_STEP_MS * 1000000ull;

    while (cw_now_ns() < end) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        ssize_t r;
        char *nl;

        if (poll(&pfd, 1, 100) <= 0)
            continue;
        r = read(fd, buf + len, sizeof(buf) - 1 - len);
        if (r <= 0)
            return -1;
        len += (size_t)r;
        buf[len] = '\0';
        while ((nl = strchr(buf, '\n')) != NULL) {
            *nl = '\0';
            if (strcmp(buf, "ready") == 0)
                return n;
            if (n < max && strlen(buf) < CW_URI_MAX + 32)
                memcpy(lines[n++], buf, strlen(buf) + 1);
            len -= (size_t)(nl + 1 - buf);
            memmove(buf, nl + 1, len + 1);
        }
        if (len == sizeof(buf) - 1)
            return -1;
    }
    return -1;
}

static void demo_reap(struct demo_child *c, int sig)
{
    uint64_t end = cw_now_ns() + DEMO_STEP_MS * 1000000ull;
    int status;

    if (c->ctl >= 0)
        close(c->ctl);
    c->ctl = -1;
    if (c->rfd >= 0)
        close(c->rfd);
    c->rfd = -1;
    if (c->pid <= 0)
        return;
    if (sig != 0)
        kill(c->pid, sig);
    while (waitpid(c->pid, &status, WNOHANG) == 0) {
        if (cw_now_ns() >= end) {
            kill(c->pid, SIGKILL);
            waitpid(c->pid, &status, 0);
            break;
        }
        usleep(10000);
    }
    c->pid = -1;
}

/* Echo child: serve on shm until the parent closes the control pipe. */
static void demo_echo_child(int wfd, int ctl)
{
    cw_context_t *ctx = NULL;
    cw_network_t *net;
    char uri[CW_URI_MAX], line[CW_URI_MAX + 16], name[64];
    int n;

    snprintf(name, sizeof(name), "shm://cw-demo-echo-%d", (int)getppid());
    if (cw_context_create(NULL, &ctx) != CW_OK ||
        cw_network_open(ctx, name, CW_NET_LISTEN, &net) != CW_OK ||
        cw_network_uri(net, uri, sizeof(uri)) != CW_OK ||
        cw_echo_register(ctx, 0) != CW_OK)
        _exit(1);
    n = snprintf(line, sizeof(line), "echo %s\nready\n", uri);
    if (write(wfd, line, (size_t)n) != n)
        _exit(1);
    for (;;) {
        struct pollfd pfd = {.fd = ctl, .events = POLLIN};
        cw_echo_serve(ctx, 20);
        if (poll(&pfd, 1, 0) > 0)
            break; /* EOF: the demo is over */
    }
    cw_context_destroy(ctx);
    _exit(0);
}

static int demo_spawn(struct demo_child *c, const char *cfg_text)
{
    int rp[2], cp[2];

    if (pipe2(rp, O_CLOEXEC) != 0 || pipe2(cp, O_CLOEXEC) != 0) {
        perror("causewayd --demo: pipe2");
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    c->pid = fork();
    if (c->pid < 0) {
        perror("causewayd --demo: fork");
        return -1;
    }
    if (c->pid == 0) {
        close(rp[0]);
        close(cp[1]);
        if (cfg_text == NULL)
            demo_echo_child(rp[1], cp[0]);
        struct cw_config_diag *diag = cw_config_diag_new();
        struct cw_config *cfg = NULL;
        struct cw_gateway_run_opts o = {.ready_fd = rp[1], .log_level = -1};
        if (cw_config_load_buffer("demo.yaml", cfg_text, strlen(cfg_text), 0,
                                  diag, &cfg) != CW_OK) {
            cw_config_diag_print(diag, stderr);
            _exit(2);
        }
        cw_config_diag_free(diag);
        int rc = cw_gateway_main(cfg, NULL, &o);
        cw_config_free(cfg);
        _exit(rc);
    }
    close(rp[1]);
    close(cp[0]);
    c->rfd = rp[0];
    c->ctl = cp[1];
    return 0;
}

static const char *demo_value(char lines[][CW_URI_MAX + 32], int n,
                              const char *key)
{
    size_t k = strlen(key);

    for (int i = 0; i < n; i++)
        if (strncmp(lines[i], key, k) == 0 && lines[i][k] == ' ')
            return lines[i] + k + 1;
    return NULL;
}

static int demo_calls(cw_context_t *ctx, const char *label, const char *addr,
                      const char *route)
{
    static const size_t sizes[] = {0, 64, 4096, 65536};
    cw_addr_t *a = NULL;
    cw_status_t st;
    int fails = 0;

    st = cw_addr_lookup(ctx, addr, &a);
    if (st != CW_OK) {
        printf("  lookup of %s failed: %s\n", addr, cw_status_str(st));
        return 1;
    }
    printf("\n%s\n  address %s\n  path    %s\n", label, addr, route);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        uint64_t best = UINT64_MAX;
        for (unsigned rep = 0; rep < 5; rep++) {
            uint64_t rtt = 0;
            st = cw_echo_call(ctx, a, sizes[i], (unsigned)(i * 10 + rep), 3000,
                              &rtt);
            if (st != CW_OK)
                break;
            if (rtt < best)
                best = rtt;
        }
        if (st == CW_OK)
            printf("  %6zu B  echoed and verified  best rtt %8.1f us "
                   "(of 5)\n",
                   sizes[i], best / 1e3);
        else {
            printf("  %6zu B  FAILED: %s\n", sizes[i], cw_status_str(st));
            fails++;
        }
    }
    cw_addr_free(a);
    return fails;
}

int cw_gateway_demo(bool dump)
{
    struct demo_child echo = {-1, -1, -1}, gw = {-1, -1, -1};
    char lines[8][CW_URI_MAX + 32], cfg[4096], addr[CW_ADDR_STR_MAX];
    char route[512];
    const char *echo_uri, *gw_shm = NULL, *gw_far = NULL, *admin = NULL;
    const char *fabric = NULL;
    cw_context_t *ctx = NULL;
    struct cw_context_stats cs;
    int n, fails = 0, rc = 1;

    if (dump) {
        char backend[64];
        snprintf(backend, sizeof(backend), "shm://cw-demo-echo-%d",
                 (int)getpid());
        if (demo_config_text(cfg, sizeof(cfg), backend, demo_fabrics[0]) < 0)
            return 1;
        fputs(cfg, stdout);
        return 0;
    }
    printf("causeway gateway demo (pid %d)\n", (int)getpid());
    if (demo_spawn(&echo, NULL) != 0)
        goto out;
    n = demo_read_ready(echo.rfd, lines, 8);
    echo_uri = n > 0 ? demo_value(lines, n, "echo") : NULL;
    if (echo_uri == NULL) {
        fprintf(stderr, "causewayd --demo: the echo service did not start\n");
        goto out;
    }
    static char echo_addr[CW_URI_MAX];
    snprintf(echo_addr, sizeof(echo_addr), "%s", echo_uri);
    printf("echo service   pid %-7d listening on %s\n", (int)echo.pid,
           echo_addr);

    /* Bridge to the first second fabric that comes up here. */
    for (size_t f = 0; f < sizeof(demo_fabrics) / sizeof(demo_fabrics[0]);
         f++) {
        if (demo_config_text(cfg, sizeof(cfg), echo_addr, demo_fabrics[f]) < 0)
            goto out;
        if (demo_spawn(&gw, cfg) != 0)
            goto out;
        n = demo_read_ready(gw.rfd, lines, 8);
        if (n > 0) {
            fabric = demo_fabrics[f];
            break;
        }
        demo_reap(&gw, SIGTERM);
        printf("(%s unavailable here, trying the next fabric)\n",
               demo_fabrics[f]);
    }
    if (fabric == NULL) {
        fprintf(stderr, "causewayd --demo: the gateway did not start\n");
        goto out;
    }
    gw_shm = demo_value(lines, n, "shm0");
    gw_far = demo_value(lines, n, "tcp0");
    admin = demo_value(lines, n, "admin");
    if (gw_shm == NULL || gw_far == NULL) {
        fprintf(stderr, "causewayd --demo: the gateway did not report its "
                        "networks\n");
        goto out;
    }
    printf("gateway        pid %-7d shm0 %s\n"
           "                           tcp0 %s\n"
           "                           admin %s\n",
           (int)gw.pid, gw_shm, gw_far, admin ? admin : "-");

    if (cw_context_create(NULL, &ctx) != CW_OK) {
        fprintf(stderr, "causewayd --demo: cannot create the client "
                        "context\n");
        goto out;
    }
    printf("client         pid %-7d on %s only (cannot reach %s directly)\n",
           (int)getpid(), fabric, echo_addr);

    snprintf(addr, sizeof(addr), "%s@%s", echo_addr, gw_far);
    snprintf(route, sizeof(route),
             "client -[%s]-> gateway tcp0 -> shm0 "
             "-[shm]-> echo",
             fabric);
    fails += demo_calls(ctx, "1. proxy address target@gateway", addr, route);
    snprintf(addr, sizeof(addr), "svc:echo@%s", gw_far);
    snprintf(route, sizeof(route),
             "client -[%s]-> gateway resolves "
             "svc:echo -> %s",
             fabric, echo_addr);
    fails +=
        demo_calls(ctx, "2. service address svc:echo@gateway", addr, route);
    if (cw_context_stats(ctx, &cs) == CW_OK)
        printf("\nclient counters: %" PRIu64 " requests sent, %" PRIu64
               " responses, %" PRIu64 " overflowed into bulk\n",
               cs.tx_requests, cs.rx_responses, cs.overflows);
    if (admin != NULL) {
        bool ok = false;
        char *body = NULL;
        if (cw_admin_request(admin, NULL, "status", 2000, &ok, &body) ==
                CW_OK &&
            ok)
            printf("\ngateway status (cwctl --admin %s status):\n%s", admin,
                   body);
        free(body);
        body = NULL;
        if (cw_admin_request(admin, NULL, "stats", 2000, &ok, &body) == CW_OK &&
            ok)
            printf("\ngateway counters (cwctl --admin %s stats):\n%s", admin,
                   body);
        free(body);
    }
    rc = fails == 0 ? 0 : 1;
    printf("\n%s: %d failures\n", rc == 0 ? "demo OK" : "demo FAILED", fails);
out:
    cw_context_destroy(ctx);
    demo_reap(&gw, SIGTERM);
    demo_reap(&echo, 0);
    return rc;
}
