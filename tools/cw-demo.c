/*
 * cw-demo: a two-process tour of Causeway over na-shm.  Starts an echo
 * service in a child process, calls it with several argument sizes (one
 * past the eager limit, so it overflows into bulk), asks it to pull a
 * buffer by bulk transfer, prints what happened and exits 0.
 *
 *   cw-demo [--uri shm://]
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <causeway/causeway.h>

#define LIFETIME_NS (60ull * 1000000000ull)

static uint64_t sum64(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* ---- service (child) ---------------------------------------------------- */

static bool quit;

struct pull {
    cw_handle_t *h;
    cw_bulk_t *remote, *local;
    uint8_t *buf;
};

static void h_echo(cw_handle_t *h, void *arg)
{
    const void *p;
    size_t n;
    (void)arg;
    if (cw_buf_get_bytes(cw_handle_input(h), &p, &n) == CW_OK)
        cw_buf_put_bytes(cw_handle_output(h), p, n);
    cw_respond(h, cw_buf_error(cw_handle_input(h)), NULL, NULL);
    cw_handle_release(h);
}

static void pull_done(cw_status_t st, void *arg)
{
    struct pull *p = arg;
    if (st == CW_OK)
        cw_buf_put_u64(cw_handle_output(p->h),
                       sum64(p->buf, cw_bulk_size(p->remote)));
    cw_respond(p->h, st, NULL, NULL);
    cw_handle_release(p->h);
    cw_bulk_free(p->remote);
    cw_bulk_free(p->local);
    free(p->buf);
    free(p);
}

static void h_sum(cw_handle_t *h, void *arg)
{
    struct pull *p = calloc(1, sizeof(*p));
    struct cw_segment seg;
    cw_status_t st = CW_NOMEM;
    (void)arg;

    if (p == NULL)
        goto fail;
    p->h = h;
    st = cw_buf_get_bulk(cw_handle_input(h), &p->remote);
    if (st != CW_OK)
        goto fail_free;
    seg.len = cw_bulk_size(p->remote);
    seg.base = p->buf = malloc(seg.len ? seg.len : 1);
    st = cw_bulk_create(cw_handle_context(h), &seg, 1, CW_BULK_READ_WRITE,
                        &p->local);
    if (st == CW_OK)
        st = cw_bulk_transfer(cw_handle_context(h), CW_BULK_PULL,
                              cw_handle_source(h), p->remote, 0, p->local, 0,
                              seg.len, pull_done, p, NULL);
    if (st == CW_OK)
        return;
    pull_done(st, p);
    return;
fail_free:
    free(p);
fail:
    cw_respond(h, st, NULL, NULL);
    cw_handle_release(h);
}

static void h_quit(cw_handle_t *h, void *arg)
{
    (void)arg;
    quit = true;
    cw_respond(h, CW_OK, NULL, NULL);
    cw_handle_release(h);
}

static int service(const char *uri, int fd)
{
    cw_context_t *ctx;
    cw_network_t *net;
    char self[CW_URI_MAX];
    uint64_t end = cw_now_ns() + LIFETIME_NS;
    pid_t parent = getppid();

    if (cw_context_create(NULL, &ctx) != CW_OK)
        return 1;
    if (cw_network_open(ctx, uri, CW_NET_LISTEN, &net) != CW_OK ||
        cw_network_uri(net, self, sizeof(self)) != CW_OK) {
        cw_context_destroy(ctx);
        return 1;
    }
    cw_rpc_register(ctx, "demo.echo", h_echo, NULL, NULL, NULL);
    cw_rpc_register(ctx, "demo.sum", h_sum, NULL, NULL, NULL);
    cw_rpc_register(ctx, "demo.quit", h_quit, NULL, NULL, NULL);
    if (write(fd, self, strlen(self) + 1) < 0) {
        cw_context_destroy(ctx);
        return 1;
    }
    close(fd);
    while (!quit && cw_now_ns() < end && getppid() == parent) {
        cw_progress(ctx, 100);
        cw_trigger(ctx, 0, 0, NULL);
    }
    for (int i = 0; i < 20; i++) {
        cw_progress(ctx, 1);
        cw_trigger(ctx, 0, 0, NULL);
    }
    cw_context_destroy(ctx);
    return 0;
}

/* ---- client (parent) ---------------------------------------------------- */

struct call {
    bool done;
    cw_status_t st;
};

static void call_cb(cw_handle_t *h, cw_status_t st, void *arg)
{
    struct call *c = arg;
    (void)h;
    c->done = true;
    c->st = st;
}

static cw_status_t run(cw_context_t *ctx, cw_handle_t *h, uint64_t *ns_p)
{
    struct call c = {false, CW_OK};
    uint64_t t0 = cw_now_ns();
    cw_status_t st = cw_forward(h, 5000, call_cb, &c);

    if (st != CW_OK)
        return st;
    while (!c.done) {
        cw_progress(ctx, 100);
        cw_trigger(ctx, 0, 0, NULL);
    }
    *ns_p = cw_now_ns() - t0;
    return c.st;
}

static int client(const char *addr)
{
    cw_context_t *ctx;
    cw_addr_t *srv;
    cw_status_t st;
    size_t eager;
    int rc = 1;

    if (cw_context_create(NULL, &ctx) != CW_OK)
        return 1;
    st = cw_addr_lookup(ctx, addr, &srv);
    if (st != CW_OK) {
        fprintf(stderr, "cw-demo: cannot reach %s: %s\n", addr,
                cw_status_str(st));
        cw_context_destroy(ctx);
        return 1;
    }
    eager = cw_addr_eager_limit(srv);
    printf("service at %s (eager limit %zu bytes)\n", addr, eager);
    size_t sizes[] = {0, 64, 4096, eager + 1, 1 << 20};
    for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        uint8_t *data = malloc(sizes[i] ? sizes[i] : 1);
        cw_handle_t *h;
        const void *p;
        size_t n = 0;
        uint64_t ns = 0;
        for (size_t k = 0; k < sizes[i]; k++)
            data[k] = (uint8_t)(k * 13);
        st = cw_handle_create(ctx, srv, cw_rpc_id("demo.echo"), &h);
        if (st == CW_OK) {
            cw_buf_put_bytes(cw_handle_input(h), data, sizes[i]);
            st = run(ctx, h, &ns);
            if (st == CW_OK)
                st = cw_buf_get_bytes(cw_handle_output(h), &p, &n);
            if (st == CW_OK && (n != sizes[i] || memcmp(p, data, n) != 0))
                st = CW_PROTOCOL;
            cw_handle_release(h);
        }
        free(data);
        printf("echo %8zu bytes%-12s %8.1f us  %s\n", sizes[i],
               sizes[i] + 60 > eager ? " (overflow)" : "", ns / 1000.0,
               st == CW_OK ? "ok" : cw_status_str(st));
        if (st != CW_OK)
            goto out;
    }
    {
        size_t len = 8 << 20;
        uint8_t *buf = malloc(len);
        struct cw_segment seg = {buf, len};
        cw_bulk_t *b;
        cw_handle_t *h;
        uint64_t ns = 0, sum = 0;
        for (size_t k = 0; k < len; k++)
            buf[k] = (uint8_t)(k ^ (k >> 9));
        st = cw_bulk_create(ctx, &seg, 1, CW_BULK_READ_ONLY, &b);
        if (st == CW_OK) {
            st = cw_handle_create(ctx, srv, cw_rpc_id("demo.sum"), &h);
            if (st == CW_OK) {
                cw_buf_put_bulk(cw_handle_input(h), b);
                st = run(ctx, h, &ns);
                if (st == CW_OK)
                    st = cw_buf_get_u64(cw_handle_output(h), &sum);
                if (st == CW_OK && sum != sum64(buf, len))
                    st = CW_PROTOCOL;
                cw_handle_release(h);
            }
            cw_bulk_free(b);
        }
        free(buf);
        printf("bulk pull %zu MiB by the service: %.1f us (%.0f MiB/s), "
               "checksum %s\n",
               len >> 20, ns / 1000.0,
               ns ? (double)len / (1 << 20) / (ns / 1e9) : 0.0,
               st == CW_OK ? "matches" : cw_status_str(st));
        if (st != CW_OK)
            goto out;
    }
    rc = 0;
out : {
    cw_handle_t *h;
    uint64_t ns;
    if (cw_handle_create(ctx, srv, cw_rpc_id("demo.quit"), &h) == CW_OK) {
        run(ctx, h, &ns);
        cw_handle_release(h);
    }
}
    cw_addr_free(srv);
    cw_context_destroy(ctx);
    return rc;
}

int main(int argc, char **argv)
{
    const char *uri = "shm://";
    char addr[CW_ADDR_STR_MAX];
    size_t got = 0;
    int pfd[2], status, rc;
    pid_t pid;

    if (argc == 3 && strcmp(argv[1], "--uri") == 0)
        uri = argv[2];
    else if (argc != 1) {
        fprintf(stderr, "usage: cw-demo [--uri LISTEN-URI]\n");
        return 2;
    }
    if (pipe2(pfd, O_CLOEXEC) != 0) {
        perror("cw-demo: pipe2");
        return 1;
    }
    pid = fork();
    if (pid < 0) {
        perror("cw-demo: fork");
        return 1;
    }
    if (pid == 0) {
        close(pfd[0]);
        _exit(service(uri, pfd[1]));
    }
    close(pfd[1]);
    while (got < sizeof(addr)) {
        struct pollfd p = {.fd = pfd[0], .events = POLLIN};
        ssize_t n;
        if (poll(&p, 1, 10000) <= 0)
            break;
        n = read(pfd[0], addr + got, sizeof(addr) - got);
        if (n <= 0)
            break;
        got += (size_t)n;
        if (memchr(addr, '\0', got))
            break;
    }
    close(pfd[0]);
    if (got == 0 || !memchr(addr, '\0', got)) {
        fprintf(stderr, "cw-demo: the service did not start on %s\n", uri);
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        return 1;
    }
    printf("started echo service (pid %d) listening on %s\n", (int)pid, addr);
    rc = client(addr);
    for (int i = 0; i < 300; i++) {
        if (waitpid(pid, &status, WNOHANG) == pid) {
            pid = 0;
            break;
        }
        usleep(10000);
    }
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        rc = 1;
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        rc = 1;
    }
    printf("service stopped; %s\n", rc == 0 ? "demo OK" : "demo FAILED");
    return rc;
}
