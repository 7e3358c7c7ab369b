/*
 * Public API argument checks.  The project rule: a public call with bad
 * arguments returns a status, never aborts.  Every function declared in
 * causeway.h, addr.h, na.h, status.h and log.h is called with each pointer
 * argument NULL in turn (the others valid: a real context, shm network,
 * handles, bulk handles, buffers and NA instance) and with out-of-range
 * values where its header gives a range (zero counts, unknown flags,
 * too-small lengths).  A NULL pointer, an unknown flag or a zero count
 * must give CW_INVALID_ARG, another bad value the status its header names
 * (any failure where it names none); optional pointers (callbacks, user
 * arguments, outputs a call may skip) must be accepted.  Functions
 * returning a pointer or value give NULL, 0 or false for a NULL object.
 */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmocka.h>

#include <causeway/causeway.h>
#include <causeway/na.h>

#include "rpc_test_util.h"
#include "shm_test_util.h"

#define INVAL(call) assert_int_equal((call), CW_INVALID_ARG)
#define FAILS(call) assert_int_not_equal((call), CW_OK)
#define NELEM(a)    (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------------------ */
/* status.h, log.h, addr.h: no object needed                                */

static void test_status(void **state)
{
    const int bad[] = {-1, CW_STATUS_MAX, 1000, INT_MIN, INT_MAX};
    (void)state;

    for (size_t i = 0; i < NELEM(bad); i++) {
        assert_false(cw_status_valid(bad[i]));
        assert_string_equal(cw_status_str((cw_status_t)bad[i]),
                            "unknown status");
        assert_string_equal(cw_status_name((cw_status_t)bad[i]), "CW_UNKNOWN");
    }
}

/* cw_log_write without its format attribute: a NULL format below. */
typedef void (*log_write_fn)(int, const char *, const char *, int, const char *,
                             const char *, ...);

/* cw_log_vwrite with a va_list of the arguments after @p fmt. */
static void log_v(int level, const char *subsys, const char *file,
                  const char *func, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    cw_log_vwrite(level, subsys, file, __LINE__, func, fmt, ap);
    va_end(ap);
}

static void test_log(void **state)
{
    log_write_fn wr = cw_log_write;
    int saved = cw_log_level_;
    (void)state;

    cw_log_init();
    assert_int_equal(cw_log_level_parse(NULL), -1);
    assert_int_equal(cw_log_level_parse("loud"), -1);
    assert_non_null(cw_log_level_name(-1));
    assert_non_null(cw_log_level_name(CW_LOG_TRACE + 1));
    cw_log_set_level(-7);
    assert_int_equal(cw_log_level_, CW_LOG_NONE);
    cw_log_set_level(99);
    assert_int_equal(cw_log_level_, CW_LOG_TRACE);
    cw_log_set_level(saved);

    wr(CW_LOG_WARN, NULL, "f.c", 1, "fn", "%s", "no subsystem");
    wr(CW_LOG_WARN, "t", NULL, 1, "fn", "%s", "no file");
    wr(CW_LOG_WARN, "t", "f.c", 1, NULL, "%s", "no function");
    wr(CW_LOG_WARN, "t", "f.c", 1, "fn", NULL);
    wr(-3, "t", "f.c", 1, "fn", "%s", "level out of range");
    log_v(CW_LOG_WARN, NULL, "f.c", "fn", "%s", "no subsystem");
    log_v(CW_LOG_WARN, "t", NULL, "fn", "%s", "no file");
    log_v(CW_LOG_WARN, "t", "f.c", NULL, "%s", "no function");
    log_v(CW_LOG_WARN, "t", "f.c", "fn", NULL);
    log_v(42, "t", "f.c", "fn", "%s", "level out of range");
    assert_true(cw_now_ns() > 0);
}

static void test_uri(void **state)
{
    struct cw_uri u, v;
    char buf[CW_URI_MAX], err[64], host[CW_URI_LOCATION_MAX];
    uint16_t port;
    (void)state;

    INVAL(cw_uri_parse(NULL, &u));
    INVAL(cw_uri_parse("shm://a", NULL));
    INVAL(cw_uri_parse("no scheme", &u));
    INVAL(cw_uri_parse_err(NULL, &u, err, sizeof(err)));
    INVAL(cw_uri_parse_err("shm://a", NULL, err, sizeof(err)));
    INVAL(cw_uri_parse_err("no scheme", &u, NULL, sizeof(err)));
    INVAL(cw_uri_parse_err("no scheme", &u, err, 0));
    /* The reason is optional (cw_uri_parse passes none). */
    assert_int_equal(cw_uri_parse_err("ofi+tcp://h:1", &u, NULL, 0), CW_OK);
    v = u;

    INVAL(cw_uri_format(NULL, buf, sizeof(buf)));
    INVAL(cw_uri_format(&u, NULL, sizeof(buf)));
    INVAL(cw_uri_format(&u, buf, 0));
    assert_int_equal(cw_uri_format(&u, buf, 4), CW_OVERFLOW);
    assert_false(cw_uri_equal(NULL, &v));
    assert_false(cw_uri_equal(&u, NULL));
    assert_true(cw_uri_equal(&u, &v));

    INVAL(cw_location_split(NULL, host, &port));
    INVAL(cw_location_split("h:1", NULL, &port));
    INVAL(cw_location_split("h:1", host, NULL));
    FAILS(cw_location_split("h:65536", host, &port));
    FAILS(cw_location_split("h:", host, &port));
    FAILS(cw_location_split("[::1", host, &port));
}

static void test_addr_path(void **state)
{
    struct cw_addr_path p;
    char buf[CW_ADDR_STR_MAX], err[64];
    size_t used = 0;
    (void)state;

    INVAL(cw_addr_path_parse(NULL, &p, err, sizeof(err)));
    INVAL(cw_addr_path_parse("shm://a", NULL, err, sizeof(err)));
    INVAL(cw_addr_path_parse("no scheme", &p, NULL, 0));
    /* A service address must name a gateway. */
    FAILS(cw_addr_path_parse("svc:x", &p, err, sizeof(err)));
    /* At most CW_ADDR_MAX_HOPS gateways. */
    used = (size_t)snprintf(buf, sizeof(buf), "shm://t");
    for (int i = 0; i <= CW_ADDR_MAX_HOPS; i++)
        used +=
            (size_t)snprintf(buf + used, sizeof(buf) - used, "@shm://g%d", i);
    FAILS(cw_addr_path_parse(buf, &p, err, sizeof(err)));

    assert_int_equal(cw_addr_path_parse("shm://t@shm://g", &p, NULL, 0), CW_OK);
    INVAL(cw_addr_path_format(NULL, buf, sizeof(buf)));
    INVAL(cw_addr_path_format(&p, NULL, sizeof(buf)));
    INVAL(cw_addr_path_format(&p, buf, 0));
    FAILS(cw_addr_path_format(&p, buf, 8));
    p.nhops = CW_ADDR_MAX_HOPS + 1;
    INVAL(cw_addr_path_format(&p, buf, sizeof(buf)));
}

/* ------------------------------------------------------------------------ */
/* causeway.h: a context with a listening shm network                      */

static cw_context_t *ctx;
static cw_network_t *net;
static cw_addr_t *self;
static cw_rpc_id_t id_echo, id_hold, id_oneway;
static cw_handle_t *held; /* server handle of "hold" */
static int held_n;

static void h_hold(cw_handle_t *h, void *arg)
{
    (void)arg;
    held = h;
    held_n++;
}

static int core_setup(void **state)
{
    struct cw_rpc_opts ow = {.one_way = true};
    (void)state;

    if (cw_context_create(NULL, &ctx) != CW_OK ||
        cw_network_open(ctx, "shm://", CW_NET_LISTEN, &net) != CW_OK ||
        cw_network_self(net, &self) != CW_OK ||
        cw_rpc_register(ctx, "echo", h_echo, NULL, NULL, &id_echo) != CW_OK ||
        cw_rpc_register(ctx, "hold", h_hold, NULL, NULL, &id_hold) != CW_OK ||
        cw_rpc_register(ctx, "oneway", NULL, NULL, &ow, &id_oneway) != CW_OK)
        return -1;
    return 0;
}

static int core_teardown(void **state)
{
    (void)state;
    cw_addr_free(self);
    cw_context_destroy(ctx);
    return 0;
}

/* Progress and trigger until *flag reaches @p want (bounded). */
static void drive(const int *flag, int want)
{
    uint64_t end = cw_now_ns() + 10000000000ull;

    while (*flag < want && cw_now_ns() < end) {
        cw_progress(ctx, 1);
        cw_trigger(ctx, 0, 0, NULL);
    }
    assert_int_equal(*flag, want);
}

/* Progress and trigger until nothing completes any more. */
static void drain(void)
{
    for (int idle = 0; idle < 5;) {
        bool any = cw_progress(ctx, 1) == CW_OK;
        any |= cw_trigger(ctx, 0, 0, NULL) == CW_OK;
        idle = any ? 0 : idle + 1;
    }
}

static void test_context(void **state)
{
    struct cw_context_opts o;
    struct cw_context_stats s;
    cw_context_t *c2;
    (void)state;

    cw_context_opts_init(NULL);
    cw_context_destroy(NULL);
    INVAL(cw_context_create(NULL, NULL));
    cw_context_opts_init(&o);
    o.flags = 0x80u; /* not a CW_CTX_* flag */
    INVAL(cw_context_create(&o, &c2));
    cw_context_opts_init(&o);
    o.default_gateway = "not an address";
    assert_int_equal(cw_context_create(&o, &c2), CW_CONFIG);
    {
        /* No file descriptor left for the epoll instance: the system
         * call's failure, not an internal error. */
        struct rlimit saved, none;
        int lowest = dup(0);

        assert_true(lowest >= 0);
        close(lowest);
        assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
        none = saved;
        none.rlim_cur = (rlim_t)lowest;
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &none), 0);
        assert_int_equal(cw_context_create(NULL, &c2), CW_IO);
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
    }
    /* "at most 16": a larger depth is capped, not refused. */
    cw_context_opts_init(&o);
    o.bulk_depth = 1000;
    assert_int_equal(cw_context_create(&o, &c2), CW_OK);
    cw_context_destroy(c2);

    INVAL(cw_context_set_resolver(NULL, NULL, NULL, NULL));
    assert_int_equal(cw_context_set_resolver(ctx, NULL, NULL, NULL), CW_OK);
    INVAL(cw_context_stats(NULL, &s));
    INVAL(cw_context_stats(ctx, NULL));
    assert_int_equal(cw_context_stats(ctx, &s), CW_OK);
    assert_true(cw_rpc_header_size() > 0);
}

static void test_network(void **state)
{
    cw_context_t *c2;
    cw_network_t *n2;
    cw_addr_t *a, *b;
    cw_handle_t *h, *h2;
    char buf[CW_URI_MAX];
    (void)state;

    assert_int_equal(cw_context_create(NULL, &c2), CW_OK);
    INVAL(cw_network_open(NULL, "shm://", 0, &n2));
    INVAL(cw_network_open(c2, NULL, 0, &n2));
    INVAL(cw_network_open(c2, "shm://", 0x80u, &n2));
    FAILS(cw_network_open(c2, "nosuch://", 0, &n2));
    FAILS(cw_network_open(c2, "not a uri", 0, &n2));
    /* The network is optional output: the context owns it. */
    assert_int_equal(cw_network_open(c2, "shm://", 0, NULL), CW_OK);
    assert_int_equal(cw_network_open(c2, "shm://", 0, &n2), CW_OK);

    INVAL(cw_network_self(NULL, &a));
    INVAL(cw_network_self(n2, NULL));
    INVAL(cw_network_uri(NULL, buf, sizeof(buf)));
    INVAL(cw_network_uri(n2, NULL, sizeof(buf)));
    FAILS(cw_network_uri(n2, buf, 0));
    FAILS(cw_network_uri(n2, buf, 4));
    assert_int_equal(cw_network_uri(n2, buf, sizeof(buf)), CW_OK);

    /* An address of another context is not a destination here. */
    FAILS(cw_handle_create(c2, self, id_echo, &h));

    /* Closed: a second close and the address kept fail as documented. */
    assert_int_equal(cw_network_self(n2, &a), CW_OK);
    assert_int_equal(cw_handle_create(c2, a, id_echo, &h), CW_OK);
    INVAL(cw_handle_reset(h, self, id_echo)); /* another context's */
    INVAL(cw_network_close(NULL));
    assert_int_equal(cw_network_close(n2), CW_OK);
    INVAL(cw_network_close(n2));
    assert_int_equal(cw_network_self(n2, &b), CW_DISCONNECTED);
    assert_int_equal(cw_handle_create(c2, a, id_echo, &h2), CW_DISCONNECTED);
    assert_int_equal(cw_handle_reset(h, NULL, id_echo), CW_DISCONNECTED);
    cw_handle_release(h);
    cw_addr_free(a);
    cw_context_destroy(c2);
}

static void test_network_spread(void **state)
{
    cw_context_t *cs[2] = {NULL, NULL}, *twice[2];
    cw_network_t *ns[2] = {NULL, NULL};
    char uri[CW_URI_MAX];
    (void)state;

    assert_int_equal(cw_context_create(NULL, &cs[0]), CW_OK);
    assert_int_equal(cw_context_create(NULL, &cs[1]), CW_OK);
    twice[0] = twice[1] = cs[0];
    INVAL(cw_network_open_spread(NULL, 2, "shm://", CW_NET_LISTEN, ns));
    INVAL(cw_network_open_spread(cs, 0, "shm://", CW_NET_LISTEN, ns));
    INVAL(cw_network_open_spread(cs, 2, NULL, CW_NET_LISTEN, ns));
    INVAL(cw_network_open_spread(cs, 2, "shm://", CW_NET_LISTEN, NULL));
    INVAL(cw_network_open_spread(cs, 2, "shm://", 0, ns));
    INVAL(cw_network_open_spread(twice, 2, "shm://", CW_NET_LISTEN, ns));
    FAILS(cw_network_open_spread(cs, 2, "nosuch://", CW_NET_LISTEN, ns));
    /* A failed open leaves nothing open: the same call then works. */
    assert_int_equal(cw_network_open_spread(cs, 2, "shm://", CW_NET_LISTEN, ns),
                     CW_OK);
    assert_int_equal(cw_network_uri(ns[0], uri, sizeof(uri)), CW_OK);
    assert_int_equal(cw_network_close(ns[0]), CW_OK);
    assert_int_equal(cw_network_close(ns[1]), CW_OK);
    cw_context_destroy(cs[0]);
    cw_context_destroy(cs[1]);
}

static void test_addr(void **state)
{
    char uri[CW_URI_MAX], buf[CW_ADDR_STR_MAX], proxied[2 * CW_URI_MAX];
    cw_addr_t *a, *px;
    (void)state;

    assert_int_equal(cw_network_uri(net, uri, sizeof(uri)), CW_OK);
    INVAL(cw_addr_lookup(NULL, uri, &a));
    INVAL(cw_addr_lookup(ctx, NULL, &a));
    INVAL(cw_addr_lookup(ctx, uri, NULL));
    FAILS(cw_addr_lookup(ctx, "not an address", &a));
    FAILS(cw_addr_lookup(ctx, "svc:x", &a));

    INVAL(cw_addr_dup(NULL, &a));
    INVAL(cw_addr_dup(self, NULL));
    cw_addr_free(NULL);

    INVAL(cw_addr_to_string(NULL, buf, sizeof(buf)));
    INVAL(cw_addr_to_string(self, NULL, sizeof(buf)));
    FAILS(cw_addr_to_string(self, buf, 0));
    FAILS(cw_addr_to_string(self, buf, 4));
    INVAL(cw_addr_to_canonical(NULL, buf, sizeof(buf)));
    INVAL(cw_addr_to_canonical(self, NULL, sizeof(buf)));
    FAILS(cw_addr_to_canonical(self, buf, 0));
    FAILS(cw_addr_to_canonical(self, buf, 4));
    /* A proxy address is not one peer. */
    snprintf(proxied, sizeof(proxied), "%s@%s", uri, uri);
    assert_int_equal(cw_addr_lookup(ctx, proxied, &px), CW_OK);
    INVAL(cw_addr_to_canonical(px, buf, sizeof(buf)));
    /* Same peer, same routing: the network's own address looked up by its
     * URI is its self address; through a gateway it is another way. */
    assert_false(cw_addr_cmp(NULL, self));
    assert_false(cw_addr_cmp(self, NULL));
    assert_true(cw_addr_cmp(self, self));
    assert_int_equal(cw_addr_lookup(ctx, uri, &a), CW_OK);
    assert_true(cw_addr_cmp(self, a));
    assert_true(cw_addr_cmp(a, self));
    assert_false(cw_addr_cmp(a, px));
    assert_false(cw_addr_cmp(px, a));
    assert_true(cw_addr_cmp(px, px));
    cw_addr_free(a);
    cw_addr_free(px);

    assert_false(cw_addr_is_self(NULL));
    assert_null(cw_addr_network(NULL));
    assert_int_equal(cw_addr_eager_limit(NULL), 0);
}

static void test_rpc_register(void **state)
{
    cw_rpc_id_t id;
    (void)state;

    assert_int_equal(cw_rpc_id(NULL), 0);
    INVAL(cw_rpc_register(NULL, "x", h_echo, NULL, NULL, &id));
    INVAL(cw_rpc_register(ctx, NULL, h_echo, NULL, NULL, &id));
    FAILS(cw_rpc_register(ctx, "", h_echo, NULL, NULL, &id));
    /* Handler (on a client), argument, options and id are optional. */
    assert_int_equal(cw_rpc_register(ctx, "opt", NULL, NULL, NULL, NULL),
                     CW_OK);
    assert_int_equal(cw_rpc_register(ctx, "opt", h_echo, NULL, NULL, &id),
                     CW_EXIST);
    INVAL(cw_rpc_deregister(NULL, cw_rpc_id("opt")));
    assert_int_equal(cw_rpc_deregister(ctx, cw_rpc_id("opt")), CW_OK);
    FAILS(cw_rpc_deregister(ctx, cw_rpc_id("opt")));
}

static void test_handle_null(void **state)
{
    cw_handle_t *h;
    (void)state;

    INVAL(cw_handle_create(NULL, self, id_echo, &h));
    INVAL(cw_handle_create(ctx, NULL, id_echo, &h));
    INVAL(cw_handle_create(ctx, self, id_echo, NULL));
    cw_handle_release(NULL);
    cw_handle_ref(NULL);
    assert_null(cw_handle_input(NULL));
    assert_null(cw_handle_output(NULL));
    assert_null(cw_handle_source(NULL));
    assert_null(cw_handle_context(NULL));
    assert_int_equal(cw_handle_rpc_id(NULL), 0);
    assert_int_equal(cw_handle_remaining_ms(NULL), 0);
    assert_false(cw_handle_canceled(NULL));
    assert_false(cw_handle_idempotent(NULL));
    INVAL(cw_handle_set_idempotent(NULL, true));
    INVAL(cw_handle_reset(NULL, self, id_echo));
    INVAL(cw_forward(NULL, 0, call_cb, NULL));
    INVAL(cw_respond(NULL, CW_OK, NULL, NULL));
    INVAL(cw_cancel(NULL));

    /* Not for a one-way RPC. */
    assert_int_equal(cw_handle_create(ctx, self, id_oneway, &h), CW_OK);
    INVAL(cw_handle_set_idempotent(h, true));
    cw_handle_release(h);
}

/* Forward @p h, just reset, with @p s as its input to "echo": the answer
 * is @p s. */
static void echo_once(cw_handle_t *h, const char *s, struct call *c)
{
    const void *p;
    size_t n;
    int want = c->done + 1;

    assert_int_equal(cw_buf_put_bytes(cw_handle_input(h), s, strlen(s)), CW_OK);
    assert_int_equal(cw_forward(h, 0, call_cb, c), CW_OK);
    drive(&c->done, want);
    assert_int_equal(c->st, CW_OK);
    assert_int_equal(cw_buf_get_bytes(cw_handle_output(h), &p, &n), CW_OK);
    assert_int_equal(n, strlen(s));
    assert_memory_equal(p, s, n);
}

/* Each side's calls that are the other side's, on a live request. */
static void test_handle_sides(void **state)
{
    struct call c = {0};
    cw_handle_t *h;
    cw_addr_t *other;
    char uri[CW_URI_MAX];
    const void *p;
    size_t n;
    (void)state;

    assert_int_equal(cw_handle_create(ctx, self, id_hold, &h), CW_OK);
    FAILS(cw_respond(h, CW_OK, NULL, NULL));
    assert_int_equal(cw_forward(h, 0, call_cb, &c), CW_OK);
    INVAL(cw_handle_set_idempotent(h, true)); /* forward in flight */
    assert_int_equal(cw_handle_reset(h, NULL, id_echo), CW_BUSY);
    drive(&held_n, 1);

    FAILS(cw_forward(held, 0, call_cb, &c));
    INVAL(cw_handle_set_idempotent(held, true));
    INVAL(cw_handle_reset(held, NULL, id_echo));
    FAILS(cw_cancel(held));
    FAILS(cw_respond(held, (cw_status_t)CW_STATUS_MAX, NULL, NULL));
    FAILS(cw_respond(held, (cw_status_t)-1, NULL, NULL));
    assert_int_equal(cw_respond(held, CW_OK, NULL, NULL), CW_OK);
    cw_handle_release(held);
    drive(&c.done, 1);
    assert_int_equal(c.st, CW_OK);

    /* Reset: the same handle, another RPC, a new input; the mark and the
     * last output dropped. */
    assert_int_equal(cw_handle_set_idempotent(h, true), CW_OK);
    assert_int_equal(cw_handle_reset(h, NULL, id_echo), CW_OK);
    assert_false(cw_handle_idempotent(h));
    assert_int_equal(cw_handle_rpc_id(h), id_echo);
    echo_once(h, "abc", &c);
    /* Again, to another address of the same target: the echo's answer is
     * gone, and the input is the new one alone. */
    assert_int_equal(cw_network_uri(net, uri, sizeof(uri)), CW_OK);
    assert_int_equal(cw_addr_lookup(ctx, uri, &other), CW_OK);
    assert_ptr_not_equal(other, self);
    assert_int_equal(cw_handle_reset(h, other, id_echo), CW_OK);
    cw_addr_free(other); /* the handle holds its own reference */
    FAILS(cw_buf_get_bytes(cw_handle_output(h), &p, &n));
    echo_once(h, "de", &c);
    cw_handle_release(h);

    /* No completion callback: the forward still runs to its end. */
    assert_int_equal(cw_handle_create(ctx, self, id_echo, &h), CW_OK);
    assert_int_equal(cw_buf_put_bytes(cw_handle_input(h), "x", 1), CW_OK);
    assert_int_equal(cw_forward(h, 0, NULL, NULL), CW_OK);
    cw_handle_release(h);
    drain();
}

static void test_progress(void **state)
{
    int fds[9];
    unsigned n;
    (void)state;

    INVAL(cw_progress(NULL, 0));
    INVAL(cw_trigger(NULL, 0, 0, &n));
    drain();
    assert_int_equal(cw_trigger(ctx, 0, 0, NULL), CW_TIMEOUT);
    INVAL(cw_context_interrupt(NULL));
    assert_int_equal(cw_context_interrupt(ctx), CW_OK);
    assert_int_equal(cw_progress(ctx, 10000), CW_OK);

    INVAL(cw_context_watch_fd(NULL, 0));
    INVAL(cw_context_watch_fd(ctx, -1));
    INVAL(cw_context_watch_fd(ctx, INT_MAX)); /* not an open fd */
    INVAL(cw_context_unwatch_fd(NULL, 0));
    INVAL(cw_context_unwatch_fd(ctx, -1));
    for (size_t i = 0; i < NELEM(fds); i++) {
        fds[i] = eventfd(0, EFD_CLOEXEC);
        assert_true(fds[i] >= 0);
    }
    assert_int_equal(cw_context_unwatch_fd(ctx, fds[0]), CW_NOENT);
    for (size_t i = 0; i < 8; i++)
        assert_int_equal(cw_context_watch_fd(ctx, fds[i]), CW_OK);
    assert_int_equal(cw_context_watch_fd(ctx, fds[0]), CW_EXIST);
    assert_int_equal(cw_context_watch_fd(ctx, fds[8]), CW_BUSY);
    for (size_t i = 0; i < 8; i++)
        assert_int_equal(cw_context_unwatch_fd(ctx, fds[i]), CW_OK);
    for (size_t i = 0; i < NELEM(fds); i++)
        close(fds[i]);
}

/* Every encoder on @p b must return @p want. */
static void puts_give(cw_buf_t *b, cw_bulk_t *bulk, cw_status_t want)
{
    assert_int_equal(cw_buf_put_u8(b, 1), want);
    assert_int_equal(cw_buf_put_u16(b, 2), want);
    assert_int_equal(cw_buf_put_u32(b, 3), want);
    assert_int_equal(cw_buf_put_u64(b, 4), want);
    assert_int_equal(cw_buf_put_i64(b, -5), want);
    assert_int_equal(cw_buf_put_bytes(b, "six", 3), want);
    assert_int_equal(cw_buf_put_str(b, "seven"), want);
    assert_int_equal(cw_buf_put_bulk(b, bulk), want);
}

/* Every decoder on @p b must return @p want. */
static void gets_give(cw_buf_t *b, cw_status_t want)
{
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
    int64_t i64;
    const void *p;
    size_t len;
    const char *s;
    cw_bulk_t *bulk;

    assert_int_equal(cw_buf_get_u8(b, &u8), want);
    assert_int_equal(cw_buf_get_u16(b, &u16), want);
    assert_int_equal(cw_buf_get_u32(b, &u32), want);
    assert_int_equal(cw_buf_get_u64(b, &u64), want);
    assert_int_equal(cw_buf_get_i64(b, &i64), want);
    assert_int_equal(cw_buf_get_bytes(b, &p, &len), want);
    assert_int_equal(cw_buf_get_str(b, &s), want);
    assert_int_equal(cw_buf_get_bulk(b, &bulk), want);
}

static cw_bulk_t *bulk_of(void *base, size_t len, uint32_t perm)
{
    struct cw_segment seg = {base, len};
    cw_bulk_t *b;

    assert_int_equal(cw_bulk_create(ctx, &seg, 1, perm, &b), CW_OK);
    return b;
}

static void test_buf_misuse(void **state)
{
    uint8_t d[8];
    cw_bulk_t *bulk = bulk_of(d, sizeof(d), CW_BULK_READ_WRITE);
    cw_buf_t *w, *r;
    (void)state;

    INVAL(cw_buf_create_reader(NULL, 4, &r));
    INVAL(cw_buf_create_reader(d, sizeof(d), NULL));
    INVAL(cw_buf_create_writer(0, NULL));
    FAILS(cw_buf_create_writer(SIZE_MAX, &w));
    INVAL(cw_buf_error(NULL));
    assert_int_equal(cw_buf_len(NULL), 0);
    assert_int_equal(cw_buf_remaining(NULL), 0);
    assert_null(cw_buf_data(NULL));
    cw_buf_destroy(NULL);

    puts_give(NULL, bulk, CW_INVALID_ARG);
    gets_give(NULL, CW_INVALID_ARG);
    /* Encoding into a decoder and the reverse; errors stick. */
    assert_int_equal(cw_buf_create_reader(NULL, 0, &r), CW_OK);
    puts_give(r, bulk, CW_INVALID_ARG);
    assert_int_equal(cw_buf_error(r), CW_INVALID_ARG);
    cw_buf_destroy(r);
    assert_int_equal(cw_buf_create_writer(0, &w), CW_OK);
    gets_give(w, CW_INVALID_ARG);
    cw_buf_destroy(w);
    /* Reading past the end. */
    assert_int_equal(cw_buf_create_reader(d, 0, &r), CW_OK);
    gets_give(r, CW_RANGE);
    cw_buf_destroy(r);
    cw_bulk_free(bulk);
}

static void test_buf_args(void **state)
{
    uint8_t d[8];
    cw_bulk_t *bulk = bulk_of(d, sizeof(d), CW_BULK_READ_WRITE);
    cw_buf_t *w, *r;
    (void)state;

    assert_int_equal(cw_buf_create_writer(0, &w), CW_OK);
    INVAL(cw_buf_put_bytes(w, NULL, 5));
    cw_buf_destroy(w);
    assert_int_equal(cw_buf_create_writer(0, &w), CW_OK);
    FAILS(cw_buf_put_bytes(w, d, (size_t)UINT32_MAX + 1));
    cw_buf_destroy(w);
    assert_int_equal(cw_buf_create_writer(0, &w), CW_OK);
    INVAL(cw_buf_put_bulk(w, NULL));
    cw_buf_destroy(w);
    /* At most 64 bulk handles. */
    assert_int_equal(cw_buf_create_writer(0, &w), CW_OK);
    for (int i = 0; i < 64; i++)
        assert_int_equal(cw_buf_put_bulk(w, bulk), CW_OK);
    assert_int_equal(cw_buf_put_bulk(w, bulk), CW_OVERFLOW);
    cw_buf_destroy(w);

    /* Decoders skip a value whose output pointer is NULL. */
    assert_int_equal(cw_buf_create_writer(16, &w), CW_OK);
    puts_give(w, bulk, CW_OK);
    assert_int_equal(cw_buf_put_str(w, NULL), CW_OK); /* absent */
    assert_int_equal(cw_buf_create_reader(cw_buf_data(w), cw_buf_len(w), &r),
                     CW_OK);
    assert_int_equal(cw_buf_get_u8(r, NULL), CW_OK);
    assert_int_equal(cw_buf_get_u16(r, NULL), CW_OK);
    assert_int_equal(cw_buf_get_u32(r, NULL), CW_OK);
    assert_int_equal(cw_buf_get_u64(r, NULL), CW_OK);
    assert_int_equal(cw_buf_get_i64(r, NULL), CW_OK);
    assert_int_equal(cw_buf_get_bytes(r, NULL, NULL), CW_OK);
    assert_int_equal(cw_buf_get_str(r, NULL), CW_OK);
    INVAL(cw_buf_get_bulk(r, NULL));
    assert_true(cw_buf_remaining(r) > 0);
    cw_buf_destroy(r);
    cw_buf_destroy(w);

    /* A string without its NUL. */
    assert_int_equal(cw_buf_create_reader("\x02\0\0\0ab", 6, &r), CW_OK);
    assert_int_equal(cw_buf_get_str(r, NULL), CW_PROTOCOL);
    cw_buf_destroy(r);
    cw_bulk_free(bulk);
}

static int xfers;
static void xfer_cb(cw_status_t st, void *arg)
{
    (void)arg;
    assert_int_equal(st, CW_OK);
    xfers++;
}

static void test_bulk(void **state)
{
    uint8_t d[16] = "0123456789abcdef", e[16] = {0};
    struct cw_segment seg = {d, sizeof(d)}, nullseg = {NULL, 4};
    cw_bulk_t *b, *rw, *ro, *loc;
    cw_bulk_op_t *op;
    (void)state;

    INVAL(cw_bulk_create(NULL, &seg, 1, CW_BULK_READ_WRITE, &b));
    INVAL(cw_bulk_create(ctx, NULL, 1, CW_BULK_READ_WRITE, &b));
    INVAL(cw_bulk_create(ctx, &seg, 0, CW_BULK_READ_WRITE, &b));
    INVAL(cw_bulk_create(ctx, &seg, 1, 0, &b));
    INVAL(cw_bulk_create(ctx, &seg, 1, 0x4u, &b));
    INVAL(cw_bulk_create(ctx, &seg, 1, CW_BULK_READ_WRITE, NULL));
    INVAL(cw_bulk_create(ctx, &nullseg, 1, CW_BULK_READ_WRITE, &b));
    cw_bulk_free(NULL);
    assert_int_equal(cw_bulk_size(NULL), 0);
    assert_int_equal(cw_bulk_perm(NULL), 0);
    INVAL(cw_bulk_cancel(NULL));

    rw = bulk_of(d, sizeof(d), CW_BULK_READ_WRITE);
    ro = bulk_of(d, sizeof(d), CW_BULK_READ_ONLY);
    loc = bulk_of(e, sizeof(e), CW_BULK_READ_WRITE);
    INVAL(cw_bulk_transfer(NULL, CW_BULK_PULL, self, rw, 0, loc, 0, 4, xfer_cb,
                           NULL, &op));
    INVAL(cw_bulk_transfer(ctx, CW_BULK_PULL, NULL, rw, 0, loc, 0, 4, xfer_cb,
                           NULL, &op));
    INVAL(cw_bulk_transfer(ctx, CW_BULK_PULL, self, NULL, 0, loc, 0, 4, xfer_cb,
                           NULL, &op));
    INVAL(cw_bulk_transfer(ctx, CW_BULK_PULL, self, rw, 0, NULL, 0, 4, xfer_cb,
                           NULL, &op));
    INVAL(cw_bulk_transfer(ctx, (enum cw_bulk_dir)0, self, rw, 0, loc, 0, 4,
                           xfer_cb, NULL, &op));
    INVAL(cw_bulk_transfer(ctx, (enum cw_bulk_dir)3, self, rw, 0, loc, 0, 4,
                           xfer_cb, NULL, &op));
    assert_int_equal(cw_bulk_transfer(ctx, CW_BULK_PUSH, self, ro, 0, loc, 0, 4,
                                      xfer_cb, NULL, &op),
                     CW_PERMISSION);
    assert_int_equal(cw_bulk_transfer(ctx, CW_BULK_PULL, self, rw, 0, loc, 0,
                                      17, xfer_cb, NULL, &op),
                     CW_RANGE);
    assert_int_equal(cw_bulk_transfer(ctx, CW_BULK_PULL, self, rw, 17, loc, 0,
                                      0, xfer_cb, NULL, &op),
                     CW_RANGE);
    assert_int_equal(cw_bulk_transfer(ctx, CW_BULK_PULL, self, rw, 0, loc, 13,
                                      4, xfer_cb, NULL, &op),
                     CW_RANGE);
    /* Callback, its argument and the operation are optional. */
    assert_int_equal(cw_bulk_transfer(ctx, CW_BULK_PULL, self, rw, 0, loc, 0, 4,
                                      NULL, NULL, NULL),
                     CW_OK);
    assert_int_equal(cw_bulk_transfer(ctx, CW_BULK_PULL, self, rw, 4, loc, 4, 4,
                                      xfer_cb, NULL, NULL),
                     CW_OK);
    drive(&xfers, 1);
    drain();
    assert_memory_equal(e, d, 8);
    cw_bulk_free(rw);
    cw_bulk_free(ro);
    cw_bulk_free(loc);
}

/* ------------------------------------------------------------------------ */
/* na.h: a shm instance                                                     */

static cw_na_t *na;
static cw_na_addr_t *me;

/*
 * The serialize trio of addresses (@p what addr) and memory handles (mem)
 * on @p obj: NULLs, a short buffer, an empty and a truncated input.  Leaves
 * the serialized form in @p ser and its size in @p n; @p out_p receives
 * nothing.
 */
#define SERIALIZE_ARGS(what, obj, ser, n, out_p)                               \
    do {                                                                       \
        assert_int_equal(cw_na_##what##_serialize_size(NULL, obj), 0);         \
        assert_int_equal(cw_na_##what##_serialize_size(na, NULL), 0);          \
        n = cw_na_##what##_serialize_size(na, obj);                            \
        assert_true(n > 1 && n <= sizeof(ser));                                \
        INVAL(cw_na_##what##_serialize(NULL, ser, n, obj));                    \
        INVAL(cw_na_##what##_serialize(na, NULL, n, obj));                     \
        INVAL(cw_na_##what##_serialize(na, ser, n, NULL));                     \
        FAILS(cw_na_##what##_serialize(na, ser, n - 1, obj));                  \
        assert_int_equal(cw_na_##what##_serialize(na, ser, n, obj), CW_OK);    \
        INVAL(cw_na_##what##_deserialize(NULL, ser, n, out_p));                \
        INVAL(cw_na_##what##_deserialize(na, NULL, n, out_p));                 \
        FAILS(cw_na_##what##_deserialize(na, ser, 0, out_p));                  \
        FAILS(cw_na_##what##_deserialize(na, ser, n - 1, out_p));              \
        INVAL(cw_na_##what##_deserialize(na, ser, n, NULL));                   \
    } while (0)

static int na_setup(void **state)
{
    (void)state;
    if (cw_na_open("shm://", 0, NULL, &na) != CW_OK ||
        cw_na_addr_self(na, &me) != CW_OK)
        return -1;
    return 0;
}

static int na_teardown(void **state)
{
    (void)state;
    cw_na_addr_free(na, me);
    cw_na_close(na);
    cw_plugins_unload();
    return 0;
}

static void test_plugins(void **state)
{
    const struct cw_na_plugin *shm;
    struct cw_na_plugin bad;
    char buf[64], err[64];
    (void)state;

    assert_int_equal(cw_plugins_load(NULL), CW_OK);
    assert_int_equal(cw_plugins_load("/nonexistent"), CW_OK);
    INVAL(cw_plugins_load_file(NULL, err, sizeof(err)));
    assert_int_equal(
        cw_plugins_load_file("/nonexistent/cw-na-x.so", NULL, sizeof(err)),
        CW_NOENT);
    assert_int_equal(cw_plugins_load_file("/nonexistent/cw-na-x.so", err, 0),
                     CW_NOENT);

    shm = cw_plugins_find("shm");
    assert_non_null(shm);
    assert_null(cw_plugins_find(NULL));
    assert_null(cw_plugins_find("nosuch"));
    INVAL(cw_plugins_register(NULL));
    assert_int_equal(cw_plugins_register(shm), CW_EXIST);
    bad = *shm;
    bad.abi_version = CW_NA_ABI_VERSION + 1;
    assert_int_equal(cw_plugins_register(&bad), CW_VERSION);
    bad = *shm;
    bad.ops_size = 0;
    assert_int_equal(cw_plugins_register(&bad), CW_VERSION);
    bad = *shm;
    bad.name = NULL;
    INVAL(cw_plugins_register(&bad));
    bad = *shm;
    bad.ops = NULL;
    INVAL(cw_plugins_register(&bad));

    INVAL(cw_plugins_list(NULL, sizeof(buf)));
    INVAL(cw_plugins_list(buf, 0));
    FAILS(cw_plugins_list(buf, 2));
    assert_int_equal(cw_plugins_list(buf, sizeof(buf)), CW_OK);
}

static void test_na_open(void **state)
{
    cw_na_t *x;
    (void)state;

    INVAL(cw_na_open(NULL, 0, NULL, &x));
    INVAL(cw_na_open("shm://", 0, NULL, NULL));
    INVAL(cw_na_open("shm://", 0x100u, NULL, &x));
    INVAL(cw_na_open("not a uri", 0, NULL, &x));
    assert_int_equal(cw_na_open("nosuch://", 0, NULL, &x), CW_NOENT);
    cw_na_close(NULL);
    assert_null(cw_na_plugin_name(NULL));
    assert_null(cw_na_protocol(NULL));
    assert_null(cw_na_caps(NULL));
}

static void test_na_addr(void **state)
{
    char uri[URI_LEN];
    uint8_t ser[256];
    cw_na_addr_t *a;
    size_t n;
    (void)state;

    INVAL(cw_na_addr_self(NULL, &a));
    INVAL(cw_na_addr_self(na, NULL));
    self_uri(na, uri);
    INVAL(cw_na_addr_lookup(NULL, uri, &a));
    INVAL(cw_na_addr_lookup(na, NULL, &a));
    INVAL(cw_na_addr_lookup(na, uri, NULL));
    FAILS(cw_na_addr_lookup(na, "not a uri", &a));
    FAILS(cw_na_addr_lookup(na, "ofi+tcp://127.0.0.1:1", &a));
    INVAL(cw_na_addr_dup(NULL, me, &a));
    INVAL(cw_na_addr_dup(na, NULL, &a));
    INVAL(cw_na_addr_dup(na, me, NULL));
    cw_na_addr_free(NULL, me);
    cw_na_addr_free(na, NULL);
    assert_false(cw_na_addr_cmp(NULL, me, me));
    assert_false(cw_na_addr_cmp(na, NULL, me));
    assert_false(cw_na_addr_cmp(na, me, NULL));

    INVAL(cw_na_addr_to_string(NULL, me, uri, sizeof(uri)));
    INVAL(cw_na_addr_to_string(na, NULL, uri, sizeof(uri)));
    INVAL(cw_na_addr_to_string(na, me, NULL, sizeof(uri)));
    FAILS(cw_na_addr_to_string(na, me, uri, 0));
    assert_int_equal(cw_na_addr_to_string(na, me, uri, 3), CW_OVERFLOW);
    assert_int_equal(cw_na_addr_to_string(na, me, uri, strlen("shm://") + 2),
                     CW_OVERFLOW);

    SERIALIZE_ARGS(addr, me, ser, n, &a);
}

typedef cw_status_t (*send_fn)(cw_na_t *, const void *, size_t, cw_na_addr_t *,
                               uint32_t, cw_na_cb_t, void *, cw_na_op_t **);

/* A send (@p fn) with each pointer NULL and a message longer than @p max;
 * nothing may start. */
static void send_args(send_fn fn, size_t max)
{
    uint8_t b[64] = "hello";
    struct done s = {0};
    cw_na_op_t *op;

    INVAL(fn(NULL, b, 8, me, 0, done_cb, &s, &op));
    INVAL(fn(na, NULL, 8, me, 0, done_cb, &s, &op));
    INVAL(fn(na, b, 8, NULL, 0, done_cb, &s, &op));
    INVAL(fn(na, b, 8, me, 0, NULL, &s, &op));
    FAILS(fn(na, b, max + 1, me, 0, done_cb, &s, &op));
    cw_na_progress(na, 0, NULL);
    assert_int_equal(s.calls, 0);
}

static void test_na_msg(void **state)
{
    const struct cw_na_caps *caps = cw_na_caps(na);
    uint8_t b[64] = "hello", rb[64];
    struct done s = {0}, r = {0}, c = {0};
    cw_na_op_t *op;
    (void)state;

    send_args(cw_na_msg_send_unexpected, caps->max_unexpected_size);
    send_args(cw_na_msg_send_expected, caps->max_expected_size);
    INVAL(cw_na_msg_recv_unexpected(NULL, rb, sizeof(rb), done_cb, &r, &op));
    INVAL(cw_na_msg_recv_unexpected(na, NULL, sizeof(rb), done_cb, &r, &op));
    INVAL(cw_na_msg_recv_unexpected(na, rb, 0, done_cb, &r, &op));
    INVAL(cw_na_msg_recv_unexpected(na, rb, sizeof(rb), NULL, &r, &op));
    INVAL(cw_na_msg_recv_expected(NULL, rb, 8, me, 0, done_cb, &r, &op));
    INVAL(cw_na_msg_recv_expected(na, NULL, 8, me, 0, done_cb, &r, &op));
    INVAL(cw_na_msg_recv_expected(na, rb, 8, NULL, 0, done_cb, &r, &op));
    INVAL(cw_na_msg_recv_expected(na, rb, 8, me, 0, NULL, &r, &op));
    INVAL(cw_na_cancel(na, NULL));
    assert_int_equal(
        cw_na_msg_recv_expected(na, rb, sizeof(rb), me, 9, done_cb, &c, &op),
        CW_OK);
    INVAL(cw_na_cancel(NULL, op));
    assert_int_equal(cw_na_cancel(na, op), CW_OK);
    assert_true(wait_done(&na, 1, &c.calls, 1));
    assert_int_equal(c.status, CW_CANCELED);

    /* The operation is an optional output. */
    assert_int_equal(
        cw_na_msg_recv_expected(na, rb, sizeof(rb), me, 7, done_cb, &r, NULL),
        CW_OK);
    assert_int_equal(
        cw_na_msg_send_expected(na, b, 5, me, 7, done_cb, &s, NULL), CW_OK);
    assert_true(wait_done(&na, 1, &r.calls, 1));
    assert_true(wait_done(&na, 1, &s.calls, 1));
    assert_int_equal(r.status, CW_OK);
    assert_int_equal(s.status, CW_OK);
    assert_memory_equal(rb, "hello", 5);
}

static void test_na_mem(void **state)
{
    const struct cw_na_caps *caps = cw_na_caps(na);
    uint8_t src[32] = "abcdefgh", dst[32] = {0}, ser[512];
    struct cw_na_segment ss = {src, sizeof(src)}, ds = {dst, sizeof(dst)};
    struct cw_na_segment nullseg = {NULL, 8}, *many;
    cw_na_mem_t *lm, *wm, *rm, *x;
    const uint32_t rw = CW_NA_MEM_READ | CW_NA_MEM_WRITE;
    size_t n;
    (void)state;

    INVAL(cw_na_mem_register(NULL, &ss, 1, rw, &lm));
    INVAL(cw_na_mem_register(na, NULL, 1, rw, &lm));
    INVAL(cw_na_mem_register(na, &ss, 0, rw, &lm));
    INVAL(cw_na_mem_register(na, &ss, 1, 0x4u, &lm));
    INVAL(cw_na_mem_register(na, &ss, 1, rw, NULL));
    INVAL(cw_na_mem_register(na, &nullseg, 1, rw, &lm));
    assert_true(caps->max_segments > 0);
    many = calloc(caps->max_segments + 1, sizeof(*many));
    assert_non_null(many);
    for (size_t i = 0; i <= caps->max_segments; i++)
        many[i] = (struct cw_na_segment){src, 1};
    FAILS(cw_na_mem_register(na, many, caps->max_segments + 1, rw, &lm));
    free(many);

    assert_int_equal(cw_na_mem_register(na, &ss, 1, rw, &lm), CW_OK);
    assert_int_equal(cw_na_mem_register(na, &ds, 1, CW_NA_MEM_WRITE, &wm),
                     CW_OK);
    cw_na_mem_release(NULL, lm);
    cw_na_mem_release(na, NULL);
    SERIALIZE_ARGS(mem, wm, ser, n, &rm);
    assert_int_equal(cw_na_mem_deserialize(na, ser, n, &rm), CW_OK);

    INVAL(cw_na_mem_restrict(NULL, rm, 0, 8, CW_NA_MEM_WRITE, &x));
    INVAL(cw_na_mem_restrict(na, NULL, 0, 8, CW_NA_MEM_WRITE, &x));
    INVAL(cw_na_mem_restrict(na, rm, 0, 0, CW_NA_MEM_WRITE, &x));
    INVAL(cw_na_mem_restrict(na, rm, 0, 8, 0, &x));
    INVAL(cw_na_mem_restrict(na, rm, 0, 8, 0x4u, &x));
    INVAL(cw_na_mem_restrict(na, rm, 0, 8, CW_NA_MEM_WRITE, NULL));
    INVAL(cw_na_mem_restrict(na, lm, 0, 8, CW_NA_MEM_READ, &x)); /* local */
    assert_int_equal(cw_na_mem_restrict(na, rm, 0, 33, CW_NA_MEM_WRITE, &x),
                     CW_RANGE);
    assert_int_equal(cw_na_mem_restrict(na, rm, 0, 8, CW_NA_MEM_READ, &x),
                     CW_PERMISSION);

    cw_na_mem_release(na, rm);
    cw_na_mem_release(na, wm);
    cw_na_mem_release(na, lm);
}

typedef cw_status_t (*rma_fn)(cw_na_t *, cw_na_mem_t *, size_t, cw_na_mem_t *,
                              size_t, size_t, cw_na_addr_t *, cw_na_cb_t,
                              void *, cw_na_op_t **);

/* cw_na_put or cw_na_get between @p lm and @p rm (32 bytes each) with each
 * pointer NULL and ranges past either end, and to @p denied, which lacks
 * the access @p fn needs.  Nothing may start. */
static void rma_args(rma_fn fn, cw_na_mem_t *lm, cw_na_mem_t *rm,
                     cw_na_mem_t *denied)
{
    struct done d = {0};
    cw_na_op_t *op;

    INVAL(fn(NULL, lm, 0, rm, 0, 8, me, done_cb, &d, &op));
    INVAL(fn(na, NULL, 0, rm, 0, 8, me, done_cb, &d, &op));
    INVAL(fn(na, lm, 0, NULL, 0, 8, me, done_cb, &d, &op));
    INVAL(fn(na, lm, 0, rm, 0, 8, NULL, done_cb, &d, &op));
    INVAL(fn(na, lm, 0, rm, 0, 8, me, NULL, &d, &op));
    assert_int_equal(fn(na, lm, 0, rm, 0, 33, me, done_cb, &d, &op), CW_RANGE);
    assert_int_equal(fn(na, lm, 30, rm, 0, 4, me, done_cb, &d, &op), CW_RANGE);
    assert_int_equal(fn(na, lm, 0, rm, 30, 4, me, done_cb, &d, &op), CW_RANGE);
    assert_int_equal(fn(na, lm, 0, denied, 0, 8, me, done_cb, &d, &op),
                     CW_PERMISSION);
    cw_na_progress(na, 0, NULL);
    assert_int_equal(d.calls, 0);
}

static void test_na_rma(void **state)
{
    uint8_t src[32] = "abcdefgh", dst[32] = {0};
    struct cw_na_segment ss = {src, sizeof(src)}, ds = {dst, sizeof(dst)};
    const uint32_t rw = CW_NA_MEM_READ | CW_NA_MEM_WRITE;
    cw_na_mem_t *lm, *dm, *rom, *wom;
    struct done d = {0};
    (void)state;

    assert_int_equal(cw_na_mem_register(na, &ss, 1, rw, &lm), CW_OK);
    assert_int_equal(cw_na_mem_register(na, &ds, 1, rw, &dm), CW_OK);
    assert_int_equal(cw_na_mem_register(na, &ds, 1, CW_NA_MEM_READ, &rom),
                     CW_OK);
    assert_int_equal(cw_na_mem_register(na, &ds, 1, CW_NA_MEM_WRITE, &wom),
                     CW_OK);
    rma_args(cw_na_put, lm, dm, rom);
    rma_args(cw_na_get, lm, dm, wom);

    /* The operation is an optional output. */
    assert_int_equal(cw_na_put(na, lm, 0, wom, 0, 8, me, done_cb, &d, NULL),
                     CW_OK);
    assert_true(wait_done(&na, 1, &d.calls, 1));
    assert_int_equal(d.status, CW_OK);
    assert_memory_equal(dst, src, 8);

    cw_na_mem_release(na, wom);
    cw_na_mem_release(na, rom);
    cw_na_mem_release(na, dm);
    cw_na_mem_release(na, lm);
}

static void test_na_progress(void **state)
{
    unsigned n;
    (void)state;

    assert_int_equal(cw_na_get_wait_fd(NULL), -1);
    assert_false(cw_na_safe_to_sleep(NULL));
    assert_false(cw_na_streaming(NULL));
    assert_int_equal(cw_na_dropped(NULL), 0);
    INVAL(cw_na_progress(NULL, 0, &n));
    INVAL(cw_na_progress_wait(NULL, 1, &n));
    /* The count is an optional output. */
    assert_int_equal(cw_na_progress(na, 0, NULL), CW_OK);
    assert_int_equal(cw_na_progress_wait(na, 1, NULL), CW_TIMEOUT);
}

int main(void)
{
    const struct CMUnitTest plain[] = {
        cmocka_unit_test(test_status),
        cmocka_unit_test(test_log),
        cmocka_unit_test(test_uri),
        cmocka_unit_test(test_addr_path),
    };
    const struct CMUnitTest core[] = {
        cmocka_unit_test(test_context),
        cmocka_unit_test(test_network),
        cmocka_unit_test(test_network_spread),
        cmocka_unit_test(test_addr),
        cmocka_unit_test(test_rpc_register),
        cmocka_unit_test(test_handle_null),
        cmocka_unit_test(test_handle_sides),
        cmocka_unit_test(test_progress),
        cmocka_unit_test(test_buf_misuse),
        cmocka_unit_test(test_buf_args),
        cmocka_unit_test(test_bulk),
    };
    const struct CMUnitTest nas[] = {
        cmocka_unit_test(test_plugins),     cmocka_unit_test(test_na_open),
        cmocka_unit_test(test_na_addr),     cmocka_unit_test(test_na_msg),
        cmocka_unit_test(test_na_mem),      cmocka_unit_test(test_na_rma),
        cmocka_unit_test(test_na_progress),
    };
    int failed = cmocka_run_group_tests_name("plain", plain, NULL, NULL);

    failed +=
        cmocka_run_group_tests_name("core", core, core_setup, core_teardown);
    failed += cmocka_run_group_tests_name("na", nas, na_setup, na_teardown);
    return failed;
}
