/*
 * Forged responses (docs/wire.md): a client's response tags and request
 * ids are neither counted nor shared between requests, and a well-formed
 * message on a request's response tag that is not its answer (another
 * request id, another message type) is dropped and counted while the
 * request keeps waiting for its real answer, which completes it once.
 *
 * The server is a raw NA endpoint on each plugin built here (shm,
 * ofi+tcp, ucx+tcp), so the test sees the request headers the client put
 * on the wire and can answer on their tags whatever it likes.
 *
 * The other way round, a server does not take a caller's word for the
 * size of an overflowed request: past the context's max_payload_size it
 * refuses it with CW_OVERFLOW before allocating or pulling anything.
 * And a receive slot whose re-post the plugin refused (a wrapper of na-shm
 * registered here) is posted again later instead of being lost.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/net_expect.h"
#include "rpc_priv.h"

#define NREQ    32
#define MSG_MAX 4096

struct call {
    int done;
    cw_status_t st;
    char answer[32];
};

struct raw {
    cw_na_t *na;
    char uri[CW_URI_MAX];
    uint8_t buf[MSG_MAX];
    int got, sent;
    size_t len;
    cw_na_addr_t *src;
};

struct req {
    uint32_t tag;
    uint64_t id;
};

static void call_done(cw_handle_t *h, cw_status_t st, void *arg)
{
    struct call *c = arg;
    const void *p;
    size_t n;

    c->done++;
    c->st = st;
    if (st == CW_OK && cw_buf_get_bytes(cw_handle_output(h), &p, &n) == CW_OK &&
        n < sizeof(c->answer))
        memcpy(c->answer, p, n);
}

static void raw_recv(const struct cw_na_cb_info *info)
{
    struct raw *r = info->arg;

    assert_int_equal(info->status, CW_OK);
    r->len = info->u.recv_unexpected.len;
    if (r->src == NULL)
        r->src = info->u.recv_unexpected.source;
    else
        cw_na_addr_free(r->na, info->u.recv_unexpected.source);
    r->got++;
}

static void raw_sent(const struct cw_na_cb_info *info)
{
    assert_int_equal(info->status, CW_OK);
    ((struct raw *)info->arg)->sent++;
}

/* Poll both sides until *@p flag reaches @p want (10 s at most: a loaded
 * machine may need many polls, ucx+tcp to connect), or, with no flag, 200
 * times. */
static void spin(cw_context_t *ctx, struct raw *r, int *flag, int want)
{
    uint64_t end = cw_now_ns() + 10000000000ull;

    for (int i = 0; flag == NULL ? i <= 200 : *flag < want; i++) {
        cw_na_progress(r->na, 0, NULL);
        cw_progress(ctx, 0);
        cw_trigger(ctx, 0, 0, NULL);
        if (flag != NULL && (i & 255) == 255 && cw_now_ns() >= end)
            break;
    }
}

/* Send on @p tag a message of @p type for @p id carrying @p text. */
static void raw_answer(cw_context_t *ctx, struct raw *r, uint32_t tag,
                       uint8_t type, uint64_t id, const char *text)
{
    struct cw_wire_hdr h = {.type = type, .req_id = id};
    static uint8_t msg[CW_HDR_SIZE + 64];
    size_t n = strlen(text);
    int want = r->sent + 1;

    /* The payload as cw_buf_put_bytes writes it: length (le32), bytes. */
    h.payload_len = (uint32_t)(4 + n);
    cw_wire_hdr_encode(msg, &h);
    for (int i = 0; i < 4; i++)
        msg[CW_HDR_SIZE + i] = (uint8_t)(n >> (8 * i));
    memcpy(msg + CW_HDR_SIZE + 4, text, n);
    assert_int_equal(cw_na_msg_send_expected(r->na, msg, CW_HDR_SIZE + 4 + n,
                                             r->src, tag, raw_sent, r, NULL),
                     CW_OK);
    spin(ctx, r, &r->sent, want);
    assert_int_equal(r->sent, want);
    spin(ctx, r, NULL, 0); /* let the client take it in */
}

static uint64_t dropped(cw_context_t *ctx)
{
    struct cw_context_stats st;

    cw_context_stats(ctx, &st);
    return st.rx_dropped;
}

static void forged_on(const char *uri)
{
    struct raw r = {0};
    cw_context_t *ctx;
    cw_na_addr_t *self;
    cw_addr_t *dest;
    cw_handle_t *h[NREQ];
    struct call c[NREQ] = {{0}};
    struct req q[NREQ];
    int order[NREQ]; /* request indexes in the order they arrived */
    unsigned sequential = 0;
    uint64_t d0;
    cw_status_t st;

    /* Its plugin was built here: failing to open it fails the test. */
    cw_test_require_plugin(uri);
    st = cw_na_open(uri, CW_NA_LISTEN, NULL, &r.na);
    if (st != CW_OK)
        fail_msg("%s: cannot open (%s), though its plugin was built here", uri,
                 cw_status_str(st));
    assert_int_equal(cw_na_addr_self(r.na, &self), CW_OK);
    assert_int_equal(cw_na_addr_to_string(r.na, self, r.uri, sizeof(r.uri)),
                     CW_OK);
    cw_na_addr_free(r.na, self);
    assert_int_equal(cw_context_create(NULL, &ctx), CW_OK);
    assert_int_equal(cw_addr_lookup(ctx, r.uri, &dest), CW_OK);

    /* NREQ requests in flight; the raw server reads their headers. */
    for (int i = 0; i < NREQ; i++) {
        char arg[16];
        snprintf(arg, sizeof(arg), "q%d", i);
        assert_int_equal(
            cw_handle_create(ctx, dest, cw_rpc_id("forged.x"), &h[i]), CW_OK);
        assert_int_equal(
            cw_buf_put_bytes(cw_handle_input(h[i]), arg, strlen(arg)), CW_OK);
        assert_int_equal(cw_forward(h[i], 20000, call_done, &c[i]), CW_OK);
    }
    memset(q, 0, sizeof(q));
    for (int i = 0; i < NREQ; i++) {
        struct cw_wire_msg m;
        int want = r.got + 1, k;
        char arg[16];
        assert_int_equal(cw_na_msg_recv_unexpected(r.na, r.buf, sizeof(r.buf),
                                                   raw_recv, &r, NULL),
                         CW_OK);
        spin(ctx, &r, &r.got, want);
        assert_int_equal(r.got, want);
        assert_int_equal(cw_wire_decode(r.buf, r.len, &m), CW_OK);
        assert_int_equal(m.hdr.type, CW_MSG_REQ);
        /* Which request (a plugin may deliver them in another order):
         * its argument "q<k>" after the bytes' length. */
        assert_true(m.hdr.payload_len > 5 && m.hdr.payload_len < 12);
        memcpy(arg, m.payload + 4, m.hdr.payload_len - 4);
        arg[m.hdr.payload_len - 4] = '\0';
        k = atoi(arg + 1);
        assert_true(k >= 0 && k < NREQ && q[k].tag == 0);
        q[k].tag = m.hdr.resp_tag;
        q[k].id = m.hdr.req_id;
        order[i] = k;
    }

    /* Unique, and not a count: no two requests share a tag or an id, and
     * the next ones cannot be told from the last ones.  (Each difference
     * is 1 with probability 2^-32 or 2^-64.) */
    for (int i = 0; i < NREQ; i++) {
        for (int j = i + 1; j < NREQ; j++) {
            assert_true(q[i].tag != q[j].tag);
            assert_true(q[i].id != q[j].id);
        }
        assert_true(q[i].tag != 0 && q[i].id != 0);
        if (i > 0 &&
            (q[order[i]].tag - q[order[i - 1]].tag == 1 ||
             q[i].tag - q[i - 1].tag == 1 || q[i].id - q[i - 1].id == 1))
            sequential++;
    }
    assert_int_equal(sequential, 0);

    /* On request 0's tag: a response for another id, then a DONE for its
     * own id.  Both dropped and counted; the request still waits. */
    d0 = dropped(ctx);
    raw_answer(ctx, &r, q[0].tag, CW_MSG_RESP, q[0].id ^ 1, "forged");
    assert_int_equal(c[0].done, 0);
    assert_int_equal(dropped(ctx), d0 + 1);
    raw_answer(ctx, &r, q[0].tag, CW_MSG_DONE, q[0].id, "");
    assert_int_equal(c[0].done, 0);
    assert_int_equal(dropped(ctx), d0 + 2);
    /* Request 1's real answer on request 0's tag: not request 0's. */
    raw_answer(ctx, &r, q[0].tag, CW_MSG_RESP, q[1].id, "a1");
    assert_int_equal(c[0].done, 0);
    assert_int_equal(c[1].done, 0);
    assert_int_equal(dropped(ctx), d0 + 3);

    /* The real answers complete every request once, with its own. */
    for (int i = NREQ - 1; i >= 0; i--) {
        char text[16];
        snprintf(text, sizeof(text), "a%d", i);
        raw_answer(ctx, &r, q[i].tag, CW_MSG_RESP, q[i].id, text);
    }
    for (int i = 0; i < 2000; i++) {
        int all = 1;
        for (int k = 0; k < NREQ; k++)
            all &= c[k].done == 1;
        if (all)
            break;
        spin(ctx, &r, NULL, 0);
    }
    for (int i = 0; i < NREQ; i++) {
        char text[16];
        snprintf(text, sizeof(text), "a%d", i);
        assert_int_equal(c[i].done, 1);
        assert_int_equal(c[i].st, CW_OK);
        assert_string_equal(c[i].answer, text);
        cw_handle_release(h[i]);
    }
    assert_int_equal(dropped(ctx), d0 + 3);
    print_message("# %s: %d requests, tags and ids unique and uncounted, "
                  "3 wrong messages on a response tag dropped\n",
                  uri, NREQ);

    cw_addr_free(dest);
    cw_context_destroy(ctx);
    cw_na_addr_free(r.na, r.src);
    cw_na_close(r.na);
}

static void test_shm(void **state)
{
    (void)state;
    forged_on("shm://");
}

static void test_ofi_tcp(void **state)
{
    (void)state;
    forged_on("ofi+tcp://127.0.0.1:0");
}

static void test_ucx_tcp(void **state)
{
    (void)state;
    forged_on("ucx+tcp://127.0.0.1:0");
}

/* ---- oversized requests ------------------------------------------------*/

static int big_runs;

static void h_big(cw_handle_t *h, void *arg)
{
    const void *p;
    size_t n;
    (void)arg;
    big_runs++;
    if (cw_buf_get_bytes(cw_handle_input(h), &p, &n) == CW_OK)
        cw_buf_put_bytes(cw_handle_output(h), p, n);
    cw_respond(h, cw_buf_error(cw_handle_input(h)), NULL, NULL);
    cw_handle_release(h);
}

static void h_big_oneway(cw_handle_t *h, void *arg)
{
    (void)arg;
    big_runs++;
    cw_handle_release(h);
}

/* Forward @p n argument bytes (a length-prefixed byte string: n + 4 bytes
 * of payload) from @p cli to @p dest and wait for the completion; returns
 * its status.  The forward must complete exactly once. */
static cw_status_t big_call(cw_context_t *srv, cw_context_t *cli,
                            cw_addr_t *dest, const char *rpc, size_t n)
{
    struct call c = {0};
    uint8_t *arg = malloc(n ? n : 1);
    cw_handle_t *h;
    uint64_t end = cw_now_ns() + 20000000000ull;

    assert_non_null(arg);
    memset(arg, 0x5a, n);
    assert_int_equal(cw_handle_create(cli, dest, cw_rpc_id(rpc), &h), CW_OK);
    assert_int_equal(cw_buf_put_bytes(cw_handle_input(h), arg, n), CW_OK);
    assert_int_equal(cw_forward(h, 20000, call_done, &c), CW_OK);
    while (c.done == 0 && cw_now_ns() < end) {
        cw_progress(srv, 0);
        cw_trigger(srv, 0, 0, NULL);
        cw_progress(cli, 0);
        cw_trigger(cli, 0, 0, NULL);
    }
    for (int i = 0; i < 200; i++) { /* nothing more may come */
        cw_progress(srv, 0);
        cw_trigger(srv, 0, 0, NULL);
        cw_progress(cli, 0);
        cw_trigger(cli, 0, 0, NULL);
    }
    assert_int_equal(c.done, 1);
    cw_handle_release(h);
    free(arg);
    return c.st;
}

/* A server context with max_payload_size @p srv_max (0: the default) on
 * shm, and a client context with @p cli_max reaching it. */
static void big_pair(size_t srv_max, size_t cli_max, cw_context_t **srv_p,
                     cw_context_t **cli_p, cw_addr_t **dest_p)
{
    struct cw_context_opts o;
    struct cw_rpc_opts ow = {.one_way = true};
    cw_network_t *net;
    char uri[CW_URI_MAX];

    cw_context_opts_init(&o);
    assert_int_equal(o.max_payload_size, 64u << 20);
    o.max_payload_size = srv_max;
    assert_int_equal(cw_context_create(&o, srv_p), CW_OK);
    assert_int_equal(cw_network_open(*srv_p, "shm://", CW_NET_LISTEN, &net),
                     CW_OK);
    assert_int_equal(cw_network_uri(net, uri, sizeof(uri)), CW_OK);
    assert_int_equal(
        cw_rpc_register(*srv_p, "big.echo", h_big, NULL, NULL, NULL), CW_OK);
    assert_int_equal(
        cw_rpc_register(*srv_p, "big.oneway", h_big_oneway, NULL, &ow, NULL),
        CW_OK);
    o.max_payload_size = cli_max;
    assert_int_equal(cw_context_create(&o, cli_p), CW_OK);
    assert_int_equal(
        cw_rpc_register(*cli_p, "big.oneway", NULL, NULL, &ow, NULL), CW_OK);
    assert_int_equal(cw_addr_lookup(*cli_p, uri, dest_p), CW_OK);
}

static void test_request_limit(void **state)
{
    struct cw_context_stats s0, s1;
    cw_context_t *srv, *cli;
    cw_addr_t *dest;
    (void)state;

    /* The default limit (64 MiB): a request just past it is refused,
     * unpulled; the handler never runs. */
    big_pair(0, 0, &srv, &cli, &dest);
    big_runs = 0;
    cw_context_stats(srv, &s0);
    assert_int_equal(big_call(srv, cli, dest, "big.echo", 64u << 20),
                     CW_OVERFLOW);
    cw_context_stats(srv, &s1);
    assert_int_equal(big_runs, 0);
    assert_int_equal(s1.rx_dropped, s0.rx_dropped + 1);
    assert_int_equal(s1.overflows, s0.overflows);
    assert_int_equal(s1.bulk_bytes, s0.bulk_bytes);
    assert_int_equal(s1.unanswered, 0);
    cw_addr_free(dest);
    cw_context_destroy(cli);
    cw_context_destroy(srv);

    /* A limit of 1 MiB: a request of exactly that is served, one byte
     * more is refused, also a one-way one (its ack says why). */
    big_pair(1u << 20, 0, &srv, &cli, &dest);
    big_runs = 0;
    cw_context_stats(srv, &s0);
    assert_int_equal(big_call(srv, cli, dest, "big.echo", (1u << 20) - 4),
                     CW_OK);
    assert_int_equal(big_runs, 1);
    assert_int_equal(big_call(srv, cli, dest, "big.echo", (1u << 20) - 3),
                     CW_OVERFLOW);
    assert_int_equal(big_call(srv, cli, dest, "big.oneway", (1u << 20) - 3),
                     CW_OVERFLOW);
    assert_int_equal(big_runs, 1);
    assert_int_equal(big_call(srv, cli, dest, "big.oneway", 1u << 16), CW_OK);
    assert_int_equal(big_runs, 2);
    cw_context_stats(srv, &s1);
    assert_int_equal(s1.rx_dropped, s0.rx_dropped + 2);
    /* Pulled: the request served and the one-way one; the echo's answer
     * overflowed too. */
    assert_int_equal(s1.overflows, s0.overflows + 3);
    assert_int_equal(s1.unanswered, 0);
    print_message("# shm: overflowed requests past max_payload_size refused "
                  "with CW_OVERFLOW, unpulled, counted\n");
    cw_addr_free(dest);
    cw_context_destroy(cli);
    cw_context_destroy(srv);
}

/* The client's side: an overflowed answer past its max_payload_size is
 * refused unpulled, and the server told to release it. */
static void test_answer_limit(void **state)
{
    struct cw_context_stats c0, c1, s1;
    cw_context_t *srv, *cli;
    cw_addr_t *dest;
    (void)state;

    big_pair(0, 1u << 20, &srv, &cli, &dest);
    big_runs = 0;
    /* Arguments and answer of exactly 1 MiB: taken. */
    assert_int_equal(big_call(srv, cli, dest, "big.echo", (1u << 20) - 4),
                     CW_OK);
    cw_context_stats(cli, &c0);
    /* 2 MiB: the server takes it (its limit is 64 MiB) and answers; the
     * client refuses the answer. */
    assert_int_equal(big_call(srv, cli, dest, "big.echo", 2u << 20),
                     CW_OVERFLOW);
    assert_int_equal(big_runs, 2);
    cw_context_stats(cli, &c1);
    assert_int_equal(c1.rx_dropped, c0.rx_dropped + 1);
    assert_int_equal(c1.overflows, c0.overflows + 1); /* its request only */
    cw_context_stats(srv, &s1);
    assert_int_equal(s1.uncollected, 0); /* released on the client's word */
    assert_int_equal(s1.unanswered, 0);
    /* The client is served afterwards. */
    assert_int_equal(big_call(srv, cli, dest, "big.echo", 1u << 16), CW_OK);
    print_message("# shm: an overflowed answer past the client's "
                  "max_payload_size refused with CW_OVERFLOW, unpulled\n");
    cw_addr_free(dest);
    cw_context_destroy(cli);
    cw_context_destroy(srv);
}

/* Handles go back to the pool without what a large RPC grew their
 * buffers to: a pool of 256 could otherwise keep 2 x max_payload_size
 * each. */
static void pool_check(cw_context_t *ctx)
{
    unsigned n = 0;

    for (unsigned k = 0; k < 2; k++) {
        for (cw_handle_t *h = ctx->free_handles[k]; h != NULL;
             h = h->next_free) {
            assert_true(h->ovf_cap <= 1u << 20);
            assert_true(h->in.cap <= 1u << 20);
            assert_true(h->out.cap <= 1u << 20);
            /* Each on the list of its shape. */
            assert_int_equal(h->out.writer, k);
            n++;
        }
    }
    assert_int_equal(n, ctx->nfree_handles);
    assert_true(n > 0);
}

static void test_pool_trim(void **state)
{
    cw_context_t *srv, *cli;
    cw_addr_t *dest;
    (void)state;

    big_pair(0, 0, &srv, &cli, &dest);
    assert_int_equal(big_call(srv, cli, dest, "big.echo", 8u << 20), CW_OK);
    pool_check(srv);
    pool_check(cli);
    print_message("# shm: after an 8 MiB echo, no pooled handle keeps more "
                  "than 1 MiB of buffer\n");
    cw_addr_free(dest);
    cw_context_destroy(cli);
    cw_context_destroy(srv);
}

/* ---- receive slots whose re-post fails -----------------------------------*/

/* "flaky": na-shm with a switch that makes posting unexpected receives
 * fail, registered from here. */
static struct cw_na_ops flaky_ops;
static struct cw_na_plugin flaky_plugin;
static const struct cw_na_ops *flaky_real;
static int flaky_fail; /* posts still to refuse */

static cw_status_t flaky_recv_unexpected(cw_na_class_t *cls, void *buf,
                                         size_t len, cw_na_cb_t cb, void *arg,
                                         cw_na_op_t **op_p)
{
    if (flaky_fail > 0) {
        flaky_fail--;
        return CW_AGAIN;
    }
    return flaky_real->msg_recv_unexpected(cls, buf, len, cb, arg, op_p);
}

static void flaky_register(void)
{
    const struct cw_na_plugin *shm;

    if (flaky_real != NULL)
        return;
    assert_int_equal(cw_plugins_load(NULL), CW_OK);
    shm = cw_plugins_find("shm");
    assert_non_null(shm);
    flaky_real = shm->ops;
    flaky_ops = *shm->ops;
    flaky_ops.msg_recv_unexpected = flaky_recv_unexpected;
    flaky_plugin = *shm;
    flaky_plugin.name = "flaky";
    flaky_plugin.ops = &flaky_ops;
    assert_int_equal(cw_plugins_register(&flaky_plugin), CW_OK);
}

/* A server with two receive slots whose re-posts failed after two requests
 * has none left: once the plugin takes receives again they are posted
 * again by a later progress pass, and the third request is served. */
static void test_urecv_repost(void **state)
{
    struct cw_context_opts o;
    cw_context_t *srv, *cli;
    cw_network_t *net;
    cw_addr_t *dest;
    char uri[CW_URI_MAX];
    uint64_t t0;
    (void)state;

    flaky_register();
    cw_context_opts_init(&o);
    o.unexpected_bufs = 2;
    assert_int_equal(cw_context_create(&o, &srv), CW_OK);
    assert_int_equal(cw_network_open(srv, "flaky://", CW_NET_LISTEN, &net),
                     CW_OK);
    assert_int_equal(net->urecv_posted, 2);
    assert_int_equal(cw_network_uri(net, uri, sizeof(uri)), CW_OK);
    assert_int_equal(cw_rpc_register(srv, "big.echo", h_big, NULL, NULL, NULL),
                     CW_OK);
    assert_int_equal(cw_context_create(NULL, &cli), CW_OK);
    assert_int_equal(cw_addr_lookup(cli, uri, &dest), CW_OK);
    big_runs = 0;
    /* Every re-post refused: each request served takes its slot away. */
    flaky_fail = 1 << 30;
    assert_int_equal(big_call(srv, cli, dest, "big.echo", 16), CW_OK);
    assert_int_equal(big_call(srv, cli, dest, "big.echo", 16), CW_OK);
    assert_int_equal(net->urecv_posted, 0);
    /* The plugin takes receives again: both slots come back. */
    flaky_fail = 0;
    t0 = cw_now_ns();
    while (net->urecv_posted < 2 && cw_now_ns() - t0 < 2000000000ull)
        cw_progress(srv, 1);
    assert_int_equal(net->urecv_posted, 2);
    assert_int_equal(big_call(srv, cli, dest, "big.echo", 16), CW_OK);
    assert_int_equal(big_runs, 3);
    print_message("# flaky (shm): both receive slots lost to failed "
                  "re-posts came back; the third request served\n");
    cw_addr_free(dest);
    cw_context_destroy(cli);
    cw_context_destroy(srv);
}

static int cmp32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static int cmp64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The permutations are injective on 2^20 consecutive inputs (as Feistel
 * networks they are bijections), and two generators (two keys) order them
 * differently. */
static void test_perm(void **state)
{
    enum { N = 1 << 20 };
    struct cw_idgen a, b;
    uint32_t *o32 = malloc(N * sizeof(*o32));
    uint64_t *o64 = malloc(N * sizeof(*o64));
    unsigned same = 0;
    (void)state;

    assert_non_null(o32);
    assert_non_null(o64);
    assert_int_equal(cw_idgen_init(&a), CW_OK);
    assert_int_equal(cw_idgen_init(&b), CW_OK);
    for (uint32_t x = 0; x < N; x++) {
        o32[x] = cw_idgen_perm32(&a, x);
        o64[x] = cw_idgen_perm64(&a, x);
        same += o32[x] == cw_idgen_perm32(&b, x);
    }
    assert_true(same < 4);
    qsort(o32, N, sizeof(*o32), cmp32);
    qsort(o64, N, sizeof(*o64), cmp64);
    for (size_t i = 1; i < N; i++) {
        assert_true(o32[i - 1] != o32[i]);
        assert_true(o64[i - 1] != o64[i]);
    }
    free(o32);
    free(o64);
    /* Counted where a plugin has fewer tags. */
    a.next = 0;
    assert_int_equal(cw_idgen_next32(&a, 3), 1);
    assert_int_equal(cw_idgen_next32(&a, 3), 2);
    assert_int_equal(cw_idgen_next32(&a, 3), 3);
    assert_int_equal(cw_idgen_next32(&a, 3), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_perm),
        cmocka_unit_test(test_request_limit),
        cmocka_unit_test(test_answer_limit),
        cmocka_unit_test(test_pool_trim),
        cmocka_unit_test(test_urecv_repost),
        cmocka_unit_test(test_shm),
        cmocka_unit_test(test_ofi_tcp),
        cmocka_unit_test(test_ucx_tcp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
