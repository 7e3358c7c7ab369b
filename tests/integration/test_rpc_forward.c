/*
 * Gateway hooks: a minimal forwarder built on <causeway/forward.h>
 * (client -> gw1 [-> gw2] -> server over na-shm, three or four endpoints
 * progressed by one loop) proves that payloads and errors pass through
 * unchanged, the hop limit is enforced, descriptors can be refused and
 * requests without a hook get CW_NO_ROUTE.  In cross-context mode the
 * forwarder sends from another context (cw_relay_create_on, as causewayd's
 * shards do): payloads, errors and cancel still pass, and
 * cw_context_interrupt wakes a cw_progress blocked in another thread.
 * cw_context_watch_fd ends a blocking cw_progress on an application's fd,
 * and an idle context sleeps in long slices instead of waking every 2 ms.
 * Plain addresses reach the server through GW1 by client routes
 * (libcauseway-routes), an application's resolver or a default gateway.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmocka.h>

#include <causeway/causeway.h>
#include <causeway/forward.h>
#include <causeway/routing.h>

#include "rpc_test_util.h"

enum { SRV, GW1, GW2, CLI, GWX, NCTX };
#define CW_TEST_WATCH_MAX 8 /* cw_context_watch_fd's limit, + the pipe */
static cw_context_t *ctx[NCTX];
static char uri[NCTX][CW_URI_MAX];
static cw_handle_t *held;
static unsigned refused;
static cw_context_t *xctx_out; /* forward from this context when set */

static void pump(void)
{
    for (int i = 0; i < NCTX; i++) {
        cw_progress(ctx[i], 0);
        cw_trigger(ctx[i], 0, 0, NULL);
    }
}

/* ---- server ---- */

static void h_deny(cw_handle_t *h, void *arg)
{
    (void)arg;
    cw_buf_put_str(cw_handle_output(h), "go away");
    cw_respond(h, CW_DENIED, NULL, NULL);
    cw_handle_release(h);
}

/* Answers the permission and size of the bulk handle it received. */
static void h_perm(cw_handle_t *h, void *arg)
{
    cw_bulk_t *b = NULL;
    (void)arg;
    if (cw_buf_get_bulk(cw_handle_input(h), &b) == CW_OK) {
        cw_buf_put_u32(cw_handle_output(h), cw_bulk_perm(b));
        cw_buf_put_u64(cw_handle_output(h), cw_bulk_size(b));
        cw_bulk_free(b);
    }
    cw_respond(h, cw_buf_error(cw_handle_input(h)), NULL, NULL);
    cw_handle_release(h);
}

static unsigned oneway_runs;
static void h_oneway(cw_handle_t *h, void *arg)
{
    (void)arg;
    oneway_runs++;
    cw_handle_release(h);
}

static void h_hold(cw_handle_t *h, void *arg)
{
    (void)arg;
    held = h;
}

/* ---- the forwarder ---- */

static void fwd_done(cw_handle_t *out, cw_status_t st, void *arg)
{
    cw_handle_t *in = arg;
    cw_relay_respond(in, out, st, NULL, NULL);
    cw_handle_release(in);
    cw_handle_release(out);
}

static char last_dest[CW_ADDR_STR_MAX];

/* Forward a request with descriptors, rewriting descriptor 0 to read-only
 * on the way (what the proxy-handle work will do with real handles). */
static void perm_forward(cw_context_t *gw, cw_handle_t *in)
{
    const void *raw;
    size_t len;
    uint8_t copy[1024];
    cw_addr_t *next;
    cw_handle_t *out;

    assert_int_equal(cw_relay_desc_count(in), 1);
    assert_int_equal(cw_relay_desc_get(in, 0, &raw, &len), CW_OK);
    assert_true(len <= sizeof(copy) && len > 4);
    assert_int_equal(cw_relay_desc_get(in, 1, &raw, &len), CW_RANGE);
    assert_int_equal(cw_addr_lookup(gw, cw_relay_dest(in), &next), CW_OK);
    assert_int_equal(cw_relay_create(in, next, NULL, &out), CW_OK);
    cw_addr_free(next);
    assert_int_equal(cw_relay_desc_get(out, 0, &raw, &len), CW_OK);
    memcpy(copy, raw, len);
    copy[3] = CW_BULK_READ_ONLY; /* permission byte (docs/wire.md) */
    assert_int_equal(cw_relay_desc_replace(out, 0, copy, len), CW_OK);
    /* Garbage is refused. */
    copy[0] = 0xff;
    assert_int_equal(cw_relay_desc_replace(out, 0, copy, len), CW_INVALID_ARG);
    assert_int_equal(cw_forward(out, 0, fwd_done, in), CW_OK);
}

static void hook(cw_handle_t *in, void *arg)
{
    cw_context_t *gw = arg;
    cw_addr_t *next;
    cw_handle_t *out;
    cw_status_t st;

    snprintf(last_dest, sizeof(last_dest), "%s", cw_relay_dest(in));
    if (strncmp(last_dest, "svc:", 4) == 0) {
        /* This forwarder knows no services. */
        cw_respond(in, CW_NOENT, NULL, NULL);
        cw_handle_release(in);
        return;
    }

    if (cw_handle_rpc_id(in) == cw_rpc_id("perm")) {
        perm_forward(gw, in);
        return;
    }
    if (cw_relay_desc_count(in) > 0) {
        refused++;
        cw_respond(in, CW_UNSUPPORTED, NULL, NULL);
        cw_handle_release(in);
        return;
    }
    /* The destination may itself be proxied ("x@gw2"). */
    if (xctx_out != NULL) {
        st = cw_addr_lookup(xctx_out, cw_relay_dest(in), &next);
        if (st == CW_OK) {
            /* The next hop must belong to the outgoing context. */
            assert_int_equal(cw_relay_create_on(gw, in, next, NULL, &out),
                             CW_INVALID_ARG);
            st = cw_relay_create_on(xctx_out, in, next, NULL, &out);
            cw_addr_free(next);
        }
    } else {
        st = cw_addr_lookup(gw, cw_relay_dest(in), &next);
        if (st == CW_OK) {
            st = cw_relay_create(in, next, NULL, &out);
            cw_addr_free(next);
        }
    }
    if (st == CW_OK) {
        st = cw_forward(out, 0, fwd_done, in);
        if (st == CW_OK)
            return;
        cw_handle_release(out);
    }
    cw_respond(in, st == CW_NOENT ? CW_UNREACHABLE : st, NULL, NULL);
    cw_handle_release(in);
}

static int setup(void **state)
{
    (void)state;
    for (int i = 0; i < NCTX; i++) {
        cw_network_t *net;
        if (cw_context_create(NULL, &ctx[i]) != CW_OK ||
            cw_network_open(ctx[i], "shm://", CW_NET_LISTEN, &net) != CW_OK ||
            cw_network_uri(net, uri[i], sizeof(uri[i])) != CW_OK)
            return -1;
    }
    cw_rpc_register(ctx[SRV], "echo", h_echo, NULL, NULL, NULL);
    cw_rpc_register(ctx[SRV], "deny", h_deny, NULL, NULL, NULL);
    cw_rpc_register(ctx[SRV], "hold", h_hold, NULL, NULL, NULL);
    cw_rpc_register(ctx[SRV], "perm", h_perm, NULL, NULL, NULL);
    {
        struct cw_rpc_opts ow = {.one_way = true};
        cw_rpc_register(ctx[SRV], "oneway", h_oneway, NULL, &ow, NULL);
    }
    cw_context_set_relay_hook(ctx[GW1], hook, ctx[GW1]);
    cw_context_set_relay_hook(ctx[GW2], hook, ctx[GW2]);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = NCTX; i-- > 0;)
        cw_context_destroy(ctx[i]);
    return 0;
}

/* Call @p rpc at @p addr from the client with @p len bytes; returns the
 * handle (completed) for the caller to inspect and release. */
static cw_handle_t *call(const char *addr, const char *rpc, size_t len,
                         uint64_t timeout_ms, struct call *c)
{
    cw_addr_t *a;
    cw_handle_t *h;
    uint8_t *data = malloc(len ? len : 1);
    uint64_t end = cw_now_ns() + 20000000000ull;

    for (size_t i = 0; i < len; i++)
        data[i] = (uint8_t)(i * 31 + 7);
    assert_int_equal(cw_addr_lookup(ctx[CLI], addr, &a), CW_OK);
    assert_int_equal(cw_handle_create(ctx[CLI], a, cw_rpc_id(rpc), &h), CW_OK);
    cw_addr_free(a);
    cw_buf_put_bytes(cw_handle_input(h), data, len);
    memset(c, 0, sizeof(*c));
    assert_int_equal(cw_forward(h, timeout_ms, call_cb, c), CW_OK);
    while (c->done == 0 && cw_now_ns() < end)
        pump();
    for (int i = 0; i < 20; i++)
        pump();
    assert_int_equal(c->done, 1);
    if (c->st == CW_OK && strcmp(rpc, "echo") == 0) {
        const void *p;
        size_t n;
        assert_int_equal(cw_buf_get_bytes(cw_handle_output(h), &p, &n), CW_OK);
        assert_int_equal(n, len);
        assert_memory_equal(p, data, len);
    }
    free(data);
    return h;
}

static void test_payload_passes(void **state)
{
    static const size_t sizes[] = {0, 1, 100, 8000, 8200, 100000, 1 << 20};
    char addr[2 * CW_URI_MAX];
    struct call c;
    (void)state;

    snprintf(addr, sizeof(addr), "%s@%s", uri[SRV], uri[GW1]);
    for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        cw_handle_t *h = call(addr, "echo", sizes[i], 0, &c);
        assert_int_equal(c.st, CW_OK);
        cw_handle_release(h);
    }
}

static void test_two_hops(void **state)
{
    char addr[3 * CW_URI_MAX];
    struct call c;
    (void)state;

    snprintf(addr, sizeof(addr), "%s@%s@%s", uri[SRV], uri[GW2], uri[GW1]);
    cw_handle_t *h = call(addr, "echo", 50000, 0, &c);
    assert_int_equal(c.st, CW_OK);
    cw_handle_release(h);
}

static void test_errors_pass(void **state)
{
    char addr[2 * CW_URI_MAX];
    struct call c;
    const char *s;
    cw_handle_t *h;
    (void)state;

    snprintf(addr, sizeof(addr), "%s@%s", uri[SRV], uri[GW1]);
    h = call(addr, "deny", 3, 0, &c);
    assert_int_equal(c.st, CW_DENIED);
    /* The error's payload passes too. */
    assert_int_equal(cw_buf_get_str(cw_handle_output(h), &s), CW_OK);
    assert_string_equal(s, "go away");
    cw_handle_release(h);
    h = call(addr, "nope", 3, 0, &c);
    assert_int_equal(c.st, CW_NO_RPC);
    cw_handle_release(h);
}

static void test_ttl(void **state)
{
    char addr[3 * CW_URI_MAX];
    struct call c;
    cw_handle_t *h;
    (void)state;

    /* The server accepts requests that crossed at most one gateway. */
    assert_int_equal(cw_context_set_max_hops(ctx[SRV], 1), CW_OK);
    snprintf(addr, sizeof(addr), "%s@%s@%s", uri[SRV], uri[GW2], uri[GW1]);
    h = call(addr, "echo", 10, 0, &c);
    assert_int_equal(c.st, CW_TTL_EXPIRED);
    cw_handle_release(h);
    snprintf(addr, sizeof(addr), "%s@%s", uri[SRV], uri[GW1]);
    h = call(addr, "echo", 10, 0, &c);
    assert_int_equal(c.st, CW_OK);
    cw_handle_release(h);
    assert_int_equal(cw_context_set_max_hops(ctx[SRV], 8), CW_OK);
}

/* Call @p rpc at the server through GW1 with one read-write bulk handle of
 * 4000 bytes; returns the completed handle. */
static cw_handle_t *bulk_call(const char *rpc, struct call *c)
{
    char addr[2 * CW_URI_MAX];
    static uint8_t data[4000];
    struct cw_segment seg = {data, sizeof(data)};
    cw_bulk_t *b;
    cw_addr_t *a;
    cw_handle_t *h;
    uint64_t end = cw_now_ns() + 10000000000ull;

    snprintf(addr, sizeof(addr), "%s@%s", uri[SRV], uri[GW1]);
    assert_int_equal(cw_addr_lookup(ctx[CLI], addr, &a), CW_OK);
    assert_int_equal(cw_bulk_create(ctx[CLI], &seg, 1, CW_BULK_READ_WRITE, &b),
                     CW_OK);
    assert_int_equal(cw_handle_create(ctx[CLI], a, cw_rpc_id(rpc), &h), CW_OK);
    cw_buf_put_bulk(cw_handle_input(h), b);
    memset(c, 0, sizeof(*c));
    assert_int_equal(cw_forward(h, 0, call_cb, c), CW_OK);
    while (c->done == 0 && cw_now_ns() < end)
        pump();
    assert_int_equal(c->done, 1);
    cw_bulk_free(b);
    cw_addr_free(a);
    return h;
}

static void test_descriptors_refused(void **state)
{
    struct call c;
    unsigned before = refused;
    cw_handle_t *h = bulk_call("echo", &c);
    (void)state;

    assert_int_equal(c.st, CW_UNSUPPORTED);
    assert_int_equal(refused, before + 1);
    cw_handle_release(h);
}

static void test_one_way_through(void **state)
{
    char addr[2 * CW_URI_MAX];
    struct cw_rpc_opts ow = {.one_way = true};
    struct call c;
    cw_handle_t *h;
    uint64_t end;
    (void)state;

    assert_int_equal(cw_rpc_register(ctx[CLI], "oneway", NULL, NULL, &ow, NULL),
                     CW_OK);
    snprintf(addr, sizeof(addr), "%s@%s", uri[SRV], uri[GW1]);
    h = call(addr, "oneway", 10, 0, &c);
    assert_int_equal(c.st, CW_OK);
    cw_handle_release(h);
    end = cw_now_ns() + 5000000000ull;
    while (oneway_runs == 0 && cw_now_ns() < end)
        pump();
    assert_int_equal(oneway_runs, 1);
}

static void test_service_dest(void **state)
{
    char addr[2 * CW_URI_MAX];
    struct call c;
    cw_handle_t *h;
    (void)state;

    snprintf(addr, sizeof(addr), "svc:storage@%s", uri[GW1]);
    h = call(addr, "echo", 1, 0, &c);
    assert_string_equal(last_dest, "svc:storage");
    assert_int_equal(c.st, CW_NOENT);
    cw_handle_release(h);
}

static void test_descriptor_rewritten(void **state)
{
    struct call c;
    uint32_t perm = 0;
    uint64_t size = 0;
    cw_handle_t *h = bulk_call("perm", &c);
    (void)state;

    assert_int_equal(c.st, CW_OK);
    cw_buf_get_u32(cw_handle_output(h), &perm);
    cw_buf_get_u64(cw_handle_output(h), &size);
    assert_int_equal(cw_buf_error(cw_handle_output(h)), CW_OK);
    assert_int_equal(perm, CW_BULK_READ_ONLY);
    assert_int_equal(size, 4000);
    cw_handle_release(h);
}

static void test_no_hook(void **state)
{
    char addr[2 * CW_URI_MAX];
    struct call c;
    cw_handle_t *h;
    (void)state;

    /* The server has no relay hook: a request routed beyond it. */
    snprintf(addr, sizeof(addr), "shm://elsewhere@%s", uri[SRV]);
    h = call(addr, "echo", 1, 0, &c);
    assert_int_equal(c.st, CW_NO_ROUTE);
    cw_handle_release(h);
}

static void test_deadline_through(void **state)
{
    char addr[2 * CW_URI_MAX];
    struct call c;
    cw_handle_t *h;
    uint64_t t0 = cw_now_ns();
    (void)state;

    held = NULL;
    snprintf(addr, sizeof(addr), "%s@%s", uri[SRV], uri[GW1]);
    h = call(addr, "hold", 1, 200, &c);
    assert_int_equal(c.st, CW_TIMEOUT);
    assert_true(cw_now_ns() - t0 < 5000000000ull);
    /* The server saw the remaining budget, not a fresh default. */
    assert_non_null(held);
    assert_true(cw_handle_remaining_ms(held) <= 200);
    cw_respond(held, CW_OK, NULL, NULL);
    cw_handle_release(held);
    for (int i = 0; i < 50; i++)
        pump();
    cw_handle_release(h);
}

/* Client routing: a routes file, an application's resolver and a default
 * gateway send plain addresses through GW1 transparently.  One call to
 * @p addr from @p c (which it destroys) ends @p expect, through GW1. */
static void routed_call(cw_context_t *c, const char *addr, cw_status_t expect)
{
    cw_addr_t *a;
    cw_handle_t *h;
    struct call cl = {0};
    struct cw_context_stats before, after;
    uint64_t end = cw_now_ns() + 10000000000ull;

    cw_context_stats(ctx[GW1], &before);
    assert_int_equal(cw_addr_lookup(c, addr, &a), CW_OK);
    assert_int_equal(cw_handle_create(c, a, cw_rpc_id("echo"), &h), CW_OK);
    cw_buf_put_bytes(cw_handle_input(h), "routed", 6);
    assert_int_equal(cw_forward(h, 0, call_cb, &cl), CW_OK);
    while (cl.done == 0 && cw_now_ns() < end) {
        pump();
        cw_progress(c, 0);
        cw_trigger(c, 0, 0, NULL);
    }
    assert_int_equal(cl.done, 1);
    assert_int_equal(cl.st, expect);
    cw_context_stats(ctx[GW1], &after);
    assert_int_equal(after.rx_requests - before.rx_requests, 1);
    cw_handle_release(h);
    cw_addr_free(a);
    cw_context_destroy(c);
}

/* A file with @p text; its name into @p path (mkstemp template). */
static void write_file(char *path, const char *text)
{
    int fd = mkstemp(path);
    FILE *f;

    assert_true(fd >= 0);
    f = fdopen(fd, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_client_routes(void **state)
{
    char path[] = "/tmp/cw-test-routes-XXXXXX";
    char bad[] = "/tmp/cw-test-routes-XXXXXX";
    char text[CW_URI_MAX + 64];
    cw_context_t *c;
    (void)state;

    snprintf(text, sizeof(text),
             "routes:\n  - { dest: \"shm://*\", gateway: \"%s\" }\n", uri[GW1]);
    write_file(path, text);
    write_file(bad, "routes:\n  - { dest: \"shm://*\", gatway: \"x\" }\n");
    assert_int_equal(cw_context_create(NULL, &c), CW_OK);
    assert_int_equal(cw_client_routes_load(NULL, path), CW_INVALID_ARG);
    assert_int_equal(cw_client_routes_load(c, "/nonexistent/routes.yaml"),
                     CW_IO);
    assert_int_equal(cw_client_routes_load(c, bad), CW_CONFIG);
    /* No $CAUSEWAY_ROUTES: nothing to load, nothing installed. */
    unsetenv("CAUSEWAY_ROUTES");
    assert_int_equal(cw_client_routes_load(c, NULL), CW_OK);
    cw_context_destroy(c);

    assert_int_equal(cw_context_create(NULL, &c), CW_OK);
    assert_int_equal(cw_client_routes_load(c, path), CW_OK);
    routed_call(c, uri[SRV], CW_OK);
    /* The same from $CAUSEWAY_ROUTES. */
    setenv("CAUSEWAY_ROUTES", path, 1);
    assert_int_equal(cw_context_create(NULL, &c), CW_OK);
    assert_int_equal(cw_client_routes_load(c, NULL), CW_OK);
    unsetenv("CAUSEWAY_ROUTES");
    routed_call(c, uri[SRV], CW_OK);
    unlink(path);
    unlink(bad);
}

struct resolver {
    const char *gw; /* NULL: direct */
    cw_status_t st; /* returned */
    unsigned calls, released;
};

static cw_status_t resolve(void *arg, const char *dest, char *gateway,
                           size_t gateway_len, bool *direct_p)
{
    struct resolver *r = arg;

    assert_true(strchr(dest, '@') == NULL);
    r->calls++;
    if (r->st != CW_OK)
        return r->st;
    *direct_p = r->gw == NULL;
    if (r->gw)
        snprintf(gateway, gateway_len, "%s", r->gw);
    return CW_OK;
}

static void resolver_release(void *arg)
{
    ((struct resolver *)arg)->released++;
}

/* cw_context_set_resolver: asked about plain addresses only, replaced,
 * removed, released once each time. */
static void test_resolver(void **state)
{
    struct resolver a = {.gw = uri[GW1]}, b = {.st = CW_DENIED};
    char proxied[2 * CW_URI_MAX + 2];
    cw_context_t *c;
    cw_addr_t *addr;
    (void)state;

    assert_int_equal(cw_context_set_resolver(NULL, resolve, NULL, NULL),
                     CW_INVALID_ARG);
    assert_int_equal(cw_context_create(NULL, &c), CW_OK);
    assert_int_equal(cw_context_set_resolver(c, resolve, resolver_release, &a),
                     CW_OK);
    snprintf(proxied, sizeof(proxied), "%s@%s", uri[SRV], uri[GW1]);
    assert_int_equal(cw_addr_lookup(c, proxied, &addr), CW_OK);
    cw_addr_free(addr);
    assert_int_equal(a.calls, 0);
    /* Replaced: the first one is released; the second one's status is the
     * lookup's. */
    assert_int_equal(cw_context_set_resolver(c, resolve, resolver_release, &b),
                     CW_OK);
    assert_int_equal(a.released, 1);
    assert_int_equal(cw_addr_lookup(c, uri[SRV], &addr), CW_DENIED);
    assert_int_equal(b.calls, 1);
    /* Removed: plain addresses go directly again. */
    assert_int_equal(cw_context_set_resolver(c, NULL, NULL, NULL), CW_OK);
    assert_int_equal(b.released, 1);
    assert_int_equal(cw_addr_lookup(c, uri[SRV], &addr), CW_OK);
    cw_addr_free(addr);
    assert_int_equal(b.calls, 1);
    /* Through the gateway it names, and released with the context. */
    assert_int_equal(cw_context_set_resolver(c, resolve, resolver_release, &a),
                     CW_OK);
    routed_call(c, uri[SRV], CW_OK);
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.released, 2);
}

static void test_default_gateway(void **state)
{
    struct cw_context_opts o;
    cw_context_t *c;
    cw_addr_t *a;
    (void)state;

    cw_context_opts_init(&o);
    o.default_gateway = uri[GW1];
    /* No plugin "nosuch" here: the lookup goes through GW1, which cannot
     * reach it either and says so. */
    assert_int_equal(cw_context_create(&o, &c), CW_OK);
    routed_call(c, "nosuch://x", CW_UNREACHABLE);
    /* A reachable plain address still goes direct. */
    assert_int_equal(cw_context_create(&o, &c), CW_OK);
    assert_int_equal(cw_addr_lookup(c, uri[SRV], &a), CW_OK);
    cw_addr_free(a);
    cw_context_destroy(c);
}

/* Cancel a call to "hold" at @p addr at the origin: the server's handler
 * sees it, the origin gets CW_CANCELED once. */
static void cancel_through(const char *addr)
{
    cw_addr_t *a;
    cw_handle_t *h;
    struct call c = {0};
    uint64_t end = cw_now_ns() + 10000000000ull;

    held = NULL;
    assert_int_equal(cw_addr_lookup(ctx[CLI], addr, &a), CW_OK);
    assert_int_equal(cw_handle_create(ctx[CLI], a, cw_rpc_id("hold"), &h),
                     CW_OK);
    cw_addr_free(a);
    assert_int_equal(cw_forward(h, 0, call_cb, &c), CW_OK);
    while (held == NULL && cw_now_ns() < end)
        pump();
    assert_non_null(held);
    assert_false(cw_handle_canceled(held));
    assert_int_equal(cw_cancel(h), CW_OK);
    /* Origin, both gateways, then the server's handler sees it. */
    while (!cw_handle_canceled(held) && cw_now_ns() < end)
        pump();
    assert_true(cw_handle_canceled(held));
    assert_int_equal(c.done, 1);
    assert_int_equal(c.st, CW_CANCELED);
    /* The late answer sends nothing and completes its respond. */
    assert_int_equal(cw_respond(held, CW_OK, NULL, NULL), CW_OK);
    cw_handle_release(held);
    for (int i = 0; i < 50; i++)
        pump();
    assert_int_equal(c.done, 1);
    cw_handle_release(h);
}

static void test_cancel_propagates(void **state)
{
    char addr[3 * CW_URI_MAX];
    (void)state;

    snprintf(addr, sizeof(addr), "%s@%s@%s", uri[SRV], uri[GW2], uri[GW1]);
    cancel_through(addr);
}

/* GW1 receives on its context and sends from GWX's. */
static void test_cross_context(void **state)
{
    static const size_t sizes[] = {0, 100, 8200, 100000};
    char addr[2 * CW_URI_MAX];
    struct call c;
    cw_handle_t *h;
    (void)state;

    xctx_out = ctx[GWX];
    snprintf(addr, sizeof(addr), "%s@%s", uri[SRV], uri[GW1]);
    for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        h = call(addr, "echo", sizes[i], 0, &c);
        assert_int_equal(c.st, CW_OK);
        cw_handle_release(h);
    }
    h = call(addr, "deny", 3, 0, &c);
    assert_int_equal(c.st, CW_DENIED);
    cw_handle_release(h);
    cancel_through(addr);
    xctx_out = NULL;
}

static void *interrupt_later(void *arg)
{
    struct timespec ts = {0, 100000000};

    nanosleep(&ts, NULL);
    cw_context_interrupt(arg);
    return NULL;
}

static void test_interrupt(void **state)
{
    cw_context_t *c;
    pthread_t t;
    uint64_t t0;
    (void)state;

    assert_int_equal(cw_context_interrupt(NULL), CW_INVALID_ARG);
    assert_int_equal(cw_context_create(NULL, &c), CW_OK);
    /* Before the call: it returns at once, once. */
    assert_int_equal(cw_context_interrupt(c), CW_OK);
    t0 = cw_now_ns();
    assert_int_equal(cw_progress(c, 5000), CW_OK);
    assert_true(cw_now_ns() - t0 < 1000000000ull);
    t0 = cw_now_ns();
    assert_int_equal(cw_progress(c, 30), CW_TIMEOUT);
    assert_true(cw_now_ns() - t0 >= 25000000ull);
    /* While it blocks in another thread's call. */
    assert_int_equal(pthread_create(&t, NULL, interrupt_later, c), 0);
    t0 = cw_now_ns();
    assert_int_equal(cw_progress(c, 5000), CW_OK);
    assert_true(cw_now_ns() - t0 < 2000000000ull);
    pthread_join(t, NULL);
    cw_context_destroy(c);
}

static void *write_later(void *arg)
{
    struct timespec ts = {0, 100000000};

    nanosleep(&ts, NULL);
    assert_int_equal(write(*(int *)arg, "x", 1), 1);
    return NULL;
}

static void test_watch_fd(void **state)
{
    int p[2], more[CW_TEST_WATCH_MAX][2];
    cw_context_t *c;
    pthread_t t;
    uint64_t t0;
    char b;
    (void)state;

    assert_int_equal(cw_context_create(NULL, &c), CW_OK);
    assert_int_equal(pipe(p), 0);
    assert_int_equal(cw_context_watch_fd(NULL, p[0]), CW_INVALID_ARG);
    assert_int_equal(cw_context_watch_fd(c, -1), CW_INVALID_ARG);
    assert_int_equal(cw_context_unwatch_fd(NULL, p[0]), CW_INVALID_ARG);
    assert_int_equal(cw_context_unwatch_fd(c, -1), CW_INVALID_ARG);
    assert_int_equal(cw_context_unwatch_fd(c, p[0]), CW_NOENT);
    assert_int_equal(cw_context_watch_fd(c, 1 << 20), CW_INVALID_ARG);
    assert_int_equal(cw_context_watch_fd(c, p[0]), CW_OK);
    assert_int_equal(cw_context_watch_fd(c, p[0]), CW_EXIST);
    /* Nothing to read: the wait runs out. */
    assert_int_equal(cw_progress(c, 30), CW_TIMEOUT);
    /* Written while the call blocks: it returns, well before 5 s. */
    assert_int_equal(pthread_create(&t, NULL, write_later, &p[1]), 0);
    t0 = cw_now_ns();
    assert_int_equal(cw_progress(c, 5000), CW_OK);
    assert_true(cw_now_ns() - t0 < 2000000000ull);
    pthread_join(t, NULL);
    /* Level-triggered: unread, it still ends the wait; read, it does not. */
    assert_int_equal(cw_progress(c, 5000), CW_OK);
    assert_int_equal(read(p[0], &b, 1), 1);
    assert_int_equal(cw_progress(c, 30), CW_TIMEOUT);
    /* At most CW_TEST_WATCH_MAX per context. */
    for (int i = 0; i < CW_TEST_WATCH_MAX; i++) {
        assert_int_equal(pipe(more[i]), 0);
        assert_int_equal(cw_context_watch_fd(c, more[i][0]),
                         i < CW_TEST_WATCH_MAX - 1 ? CW_OK : CW_BUSY);
    }
    for (int i = 0; i < CW_TEST_WATCH_MAX; i++) {
        assert_int_equal(cw_context_unwatch_fd(c, more[i][0]),
                         i < CW_TEST_WATCH_MAX - 1 ? CW_OK : CW_NOENT);
        close(more[i][0]);
        close(more[i][1]);
    }
    /* Unwatched: a readable fd no longer ends the wait. */
    assert_int_equal(cw_context_unwatch_fd(c, p[0]), CW_OK);
    assert_int_equal(write(p[1], "x", 1), 1);
    assert_int_equal(cw_progress(c, 30), CW_TIMEOUT);
    close(p[0]);
    close(p[1]);
    cw_context_destroy(c);
}

/* An idle context (a listening network, nothing in flight, no activity
 * for 250 ms: the first wait) blocks in long slices: each slice is one
 * voluntary context switch, and 2 ms slices would make about 150 in the
 * second 300 ms. */
static void test_idle_sleeps(void **state)
{
    struct rusage r0, r1;
    (void)state;

    assert_int_equal(cw_progress(ctx[SRV], 300), CW_TIMEOUT);
    assert_int_equal(getrusage(RUSAGE_THREAD, &r0), 0);
    assert_int_equal(cw_progress(ctx[SRV], 300), CW_TIMEOUT);
    assert_int_equal(getrusage(RUSAGE_THREAD, &r1), 0);
    assert_true(r1.ru_nvcsw - r0.ru_nvcsw < 30);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_payload_passes),
        cmocka_unit_test(test_two_hops),
        cmocka_unit_test(test_errors_pass),
        cmocka_unit_test(test_ttl),
        cmocka_unit_test(test_descriptors_refused),
        cmocka_unit_test(test_one_way_through),
        cmocka_unit_test(test_service_dest),
        cmocka_unit_test(test_descriptor_rewritten),
        cmocka_unit_test(test_no_hook),
        cmocka_unit_test(test_deadline_through),
        cmocka_unit_test(test_cancel_propagates),
        cmocka_unit_test(test_cross_context),
        cmocka_unit_test(test_interrupt),
        cmocka_unit_test(test_watch_fd),
        cmocka_unit_test(test_idle_sleeps),
        cmocka_unit_test(test_client_routes),
        cmocka_unit_test(test_resolver),
        cmocka_unit_test(test_default_gateway),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
