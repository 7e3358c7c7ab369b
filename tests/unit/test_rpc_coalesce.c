/*
 * Request coalescing (CW_CTX_COALESCE, docs/wire.md "Batches"): requests a
 * coalescing context forwards from the callbacks of one cw_trigger call to
 * one peer leave as one CW_MSG_BATCH when the call returns; each completes
 * once with its own answer; one cancelled while queued never leaves (nor
 * lingers, also when it overflowed: nobody can be pulling it); a
 * lone request leaves alone; a context without the flag batches only the
 * answers it gives in one pass to requests that came in a batch (answers
 * in kind), never requests nor answers to requests that came alone.
 * The receiving side checks each entry of a batch by itself: hostile
 * batches (bad frames, nested batches, responses, garbage) built by a raw
 * NA endpoint are dropped and counted, and the valid entries around them
 * still run.  On ofi+tcp and ucx+tcp; on shm (whose messages are copies
 * into shared memory, CW_NA_CAP_COALESCE unset) requests are not batched,
 * and batches from elsewhere are still taken in.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "rpc_priv.h"
#include "tests/common/net_expect.h"
#include "tests/rpc_test_util.h"

/* Run @p body until @p cond holds, for 10 s at most: ucx+tcp connects
 * from UCX's own thread, which a loaded machine may not run for a while,
 * so a count of polls is no bound. */
#define POLL_UNTIL(cond, body)                                                 \
    for (uint64_t end_ = cw_now_ns() + 10000000000ull;                         \
         !(cond) && cw_now_ns() < end_;) {                                     \
        body;                                                                  \
    }

#define NBATCH    20 /* requests forwarded from one callback */
#define CANCEL_AT 5

struct pair {
    cw_context_t *srv, *cli;
    cw_addr_t *dest;
    char uri[CW_URI_MAX];
    int served;
    cw_handle_t *held; /* coalesce.hold: answered by the test */
};

static bool cli_listen;

struct echo_call {
    int done;
    cw_status_t st;
    uint32_t want; /* the echoed value expected */
    uint32_t got;
};

struct kick {
    struct pair *p;
    cw_handle_t *h[NBATCH];
    struct echo_call c[NBATCH];
    bool cancel;
};

static void h_count_echo(cw_handle_t *h, void *arg)
{
    struct pair *p = arg;
    uint32_t v = 0;

    p->served++;
    cw_buf_get_u32(cw_handle_input(h), &v);
    cw_buf_put_u32(cw_handle_output(h), v);
    cw_respond(h, CW_OK, NULL, NULL);
    cw_handle_release(h);
}

static void h_hold(cw_handle_t *h, void *arg)
{
    ((struct pair *)arg)->held = h;
}

static void h_oneway(cw_handle_t *h, void *arg)
{
    ((struct pair *)arg)->served++;
    cw_handle_release(h);
}

static void echo_done(cw_handle_t *h, cw_status_t st, void *arg)
{
    struct echo_call *c = arg;

    c->done++;
    c->st = st;
    if (st == CW_OK)
        cw_buf_get_u32(cw_handle_output(h), &c->got);
}

/* Runs inside the client's cw_trigger: NBATCH forwards to one peer. */
static void kick_done(cw_handle_t *h0, cw_status_t st, void *arg)
{
    struct kick *k = arg;
    (void)h0;

    assert_int_equal(st, CW_OK);
    for (int i = 0; i < NBATCH; i++) {
        k->c[i].want = 1000u + (uint32_t)i;
        assert_int_equal(cw_handle_create(k->p->cli, k->p->dest,
                                          cw_rpc_id("coalesce.echo"), &k->h[i]),
                         CW_OK);
        assert_int_equal(cw_buf_put_u32(cw_handle_input(k->h[i]), k->c[i].want),
                         CW_OK);
        assert_int_equal(cw_forward(k->h[i], 20000, echo_done, &k->c[i]),
                         CW_OK);
        if (k->cancel && i == CANCEL_AT)
            assert_int_equal(cw_cancel(k->h[i]), CW_OK);
    }
}

static void pump(struct pair *p, int iters)
{
    for (int i = 0; i < iters; i++) {
        cw_progress(p->srv, 0);
        cw_trigger(p->srv, 0, 0, NULL);
        cw_progress(p->cli, 0);
        cw_trigger(p->cli, 0, 0, NULL);
    }
}

/* A server and a client context on @p uri, whose plugin was built here
 * (test_*() skip first otherwise): failing to open it fails the test. */
static void pair_open2(struct pair *p, const char *uri, uint32_t cli_flags,
                       uint32_t srv_flags)
{
    struct cw_context_opts o;
    cw_network_t *net;
    cw_addr_t *self;
    struct cw_rpc_opts ow = {.one_way = true};
    cw_network_t *cnet;
    cw_status_t st;

    memset(p, 0, sizeof(*p));
    cw_context_opts_init(&o);
    o.flags |= srv_flags;
    assert_int_equal(cw_context_create(&o, &p->srv), CW_OK);
    st = cw_network_open(p->srv, uri, CW_NA_LISTEN, &net);
    if (st != CW_OK)
        fail_msg("%s: cannot open a network (%s), though its plugin was "
                 "built here",
                 uri, cw_status_str(st));
    assert_int_equal(cw_network_self(net, &self), CW_OK);
    assert_int_equal(cw_addr_to_string(self, p->uri, sizeof(p->uri)), CW_OK);
    cw_addr_free(self);
    assert_int_equal(
        cw_rpc_register(p->srv, "coalesce.echo", h_count_echo, p, NULL, NULL),
        CW_OK);
    assert_int_equal(
        cw_rpc_register(p->srv, "coalesce.oneway", h_oneway, p, &ow, NULL),
        CW_OK);
    assert_int_equal(
        cw_rpc_register(p->srv, "coalesce.hold", h_hold, p, NULL, NULL), CW_OK);
    cw_context_opts_init(&o);
    o.flags |= cli_flags;
    assert_int_equal(cw_context_create(&o, &p->cli), CW_OK);
    /* A listening client network, which other peers can reach. */
    if (cli_listen)
        assert_int_equal(cw_network_open(p->cli, uri, CW_NET_LISTEN, &cnet),
                         CW_OK);
    assert_int_equal(cw_addr_lookup(p->cli, p->uri, &p->dest), CW_OK);
}

static void pair_open(struct pair *p, const char *uri, uint32_t cli_flags)
{
    pair_open2(p, uri, cli_flags, 0);
}

static void pair_close(struct pair *p)
{
    cw_addr_free(p->dest);
    cw_context_destroy(p->cli);
    cw_context_destroy(p->srv);
}

/* Progress both sides until the NBATCH calls of @p k completed (10 s at
 * most). */
static void kick_wait(struct pair *p, struct kick *k)
{
    int all = 0;

    POLL_UNTIL(all >= NBATCH, {
        pump(p, 10);
        all = 0;
        for (int i = 0; i < NBATCH; i++)
            all += k->c[i].done;
    });
}

/* One kick RPC; its callback forwards NBATCH more.  Returns the client's
 * and server's counters after all completed. */
static void run_kick(struct pair *p, bool cancel, struct cw_context_stats *cs,
                     struct cw_context_stats *ss)
{
    struct kick k = {.p = p, .cancel = cancel};
    cw_handle_t *h0;

    assert_int_equal(
        cw_handle_create(p->cli, p->dest, cw_rpc_id("coalesce.echo"), &h0),
        CW_OK);
    assert_int_equal(cw_buf_put_u32(cw_handle_input(h0), 7), CW_OK);
    assert_int_equal(cw_forward(h0, 20000, kick_done, &k), CW_OK);
    kick_wait(p, &k);
    for (int i = 0; i < NBATCH; i++) {
        assert_int_equal(k.c[i].done, 1);
        if (cancel && i == CANCEL_AT) {
            assert_int_equal(k.c[i].st, CW_CANCELED);
        } else {
            assert_int_equal(k.c[i].st, CW_OK);
            assert_int_equal(k.c[i].got, k.c[i].want);
        }
        cw_handle_release(k.h[i]);
    }
    cw_handle_release(h0);
    /* Let the server finish its responses before reading counters. */
    pump(p, 2000);
    cw_context_stats(p->cli, cs);
    cw_context_stats(p->srv, ss);
}

/* The NBATCH forwards of kick_done issued from outside cw_trigger, inside
 * a batch scope (@p scoped: 1) or two nested on the same context (2), or
 * not (0).  Returns the client's counters. */
static void run_scoped(struct pair *p, int scoped, struct cw_context_stats *cs)
{
    struct kick k = {.p = p};
    struct cw_context_stats before, mid;
    void *scope = NULL, *inner = NULL;

    cw_context_stats(p->cli, &before);
    if (scoped > 0)
        scope = cw_context_batch_begin(p->cli);
    if (scoped > 1)
        inner = cw_context_batch_begin(p->cli);
    kick_done(NULL, CW_OK, &k);
    if (scoped > 1) {
        /* The inner scope closing sends no batch: the outer one does. */
        cw_context_batch_end(p->cli, inner);
        cw_context_stats(p->cli, &mid);
        assert_int_equal(mid.tx_batches, before.tx_batches);
        assert_int_equal(mid.tx_batched, before.tx_batched);
    }
    if (scoped > 0)
        cw_context_batch_end(p->cli, scope);
    kick_wait(p, &k);
    for (int i = 0; i < NBATCH; i++) {
        assert_int_equal(k.c[i].done, 1);
        assert_int_equal(k.c[i].st, CW_OK);
        assert_int_equal(k.c[i].got, k.c[i].want);
        cw_handle_release(k.h[i]);
    }
    pump(p, 200);
    cw_context_stats(p->cli, cs);
}

/* Forwards from outside cw_trigger leave one by one, unless a batch scope
 * holds them: then as one batch when it closes. */
static void coalesce_scope(const char *uri)
{
    struct pair p;
    struct cw_context_stats cs;
    bool batches;

    pair_open(&p, uri, CW_CTX_COALESCE);
    batches = (p.dest->net->caps.flags & CW_NA_CAP_COALESCE) != 0;
    run_scoped(&p, 0, &cs);
    assert_int_equal(cs.tx_batches, 0);
    assert_int_equal(cs.tx_requests, NBATCH);
    run_scoped(&p, 1, &cs);
    assert_int_equal(cs.tx_batches, batches ? 1 : 0);
    assert_int_equal(cs.tx_batched, batches ? NBATCH : 0);
    assert_int_equal(cs.tx_requests, 2 * NBATCH);
    /* Nested scopes on one context (a forward hook's inside cw_trigger's
     * pass): one batch, when the outer one closes. */
    run_scoped(&p, 2, &cs);
    assert_int_equal(cs.tx_batches, batches ? 2 : 0);
    assert_int_equal(cs.tx_batched, batches ? 2 * NBATCH : 0);
    assert_int_equal(cs.tx_requests, 3 * NBATCH);
    /* NULL contexts: no effect, no crash. */
    assert_null(cw_context_batch_begin(NULL));
    cw_context_batch_end(NULL, NULL);
    if (batches)
        print_message("# %s: %d requests sent outside cw_trigger: one by "
                      "one, then in a batch scope as one batch\n",
                      uri, NBATCH);
    pair_close(&p);
}

static void coalesce_on(const char *uri)
{
    struct pair p;
    struct cw_context_stats cs, ss;
    bool batches;

    pair_open(&p, uri, CW_CTX_COALESCE);
    batches = (p.dest->net->caps.flags & CW_NA_CAP_COALESCE) != 0;
    /* The kick request left alone (no batch); its callback's NBATCH
     * requests left as one batch. */
    run_kick(&p, false, &cs, &ss);
    assert_int_equal(cs.tx_batches, batches ? 1 : 0);
    assert_int_equal(cs.tx_batched, batches ? NBATCH : 0);
    assert_int_equal(cs.tx_requests, 1 + NBATCH);
    assert_int_equal(ss.rx_batches, batches ? 1 : 0);
    assert_int_equal(ss.rx_requests, 1 + NBATCH);
    assert_int_equal(ss.rx_dropped, 0);
    assert_int_equal(p.served, 1 + NBATCH);
    /* The server does not coalesce, but answers in kind: what its handlers
     * answered in one pass to the batch's requests went back as a batch
     * (usually one; a plugin may hand the requests over in two passes),
     * each answer to its request once; the kick's, which came alone,
     * went alone. */
    if (batches) {
        assert_true(ss.tx_batches >= 1 && ss.tx_batches <= 2);
        assert_true(ss.tx_batched >= NBATCH - 1 && ss.tx_batched <= NBATCH);
        assert_int_equal(cs.rx_batches, ss.tx_batches);
        print_message("# %s: a server without CW_CTX_COALESCE answered the "
                      "batch of %d in kind: %d batch(es)\n",
                      uri, NBATCH, (int)ss.tx_batches);
    } else {
        assert_int_equal(ss.tx_batches, 0);
    }
    assert_int_equal(cs.rx_responses, 1 + NBATCH);
    assert_int_equal(cs.rx_dropped, 0);

    /* One cancelled while queued: completes CW_CANCELED, never leaves. */
    run_kick(&p, true, &cs, &ss);
    assert_int_equal(cs.tx_batches, batches ? 2 : 0);
    assert_int_equal(cs.tx_batched, batches ? 2 * NBATCH - 1 : 0);
    if (batches) {
        assert_int_equal(ss.rx_requests, 2 * (1 + NBATCH) - 1);
        assert_int_equal(p.served, 2 * (1 + NBATCH) - 1);
    }
    assert_int_equal(ss.rx_dropped, 0);
    if (batches)
        print_message("# %s: %d requests in one batch, each answered once; "
                      "one cancelled while queued never sent\n",
                      uri, NBATCH);
    else
        print_message("# %s: not a coalescing plugin: %d requests sent one "
                      "by one, each answered once\n",
                      uri, NBATCH);
    pair_close(&p);

    /* The server coalescing too: its handlers answer the batch from one
     * cw_trigger call, and the answers travel back as one batch (the
     * client network takes unexpected messages), each reaching its
     * request once, its posted receive withdrawn. */
    pair_open2(&p, uri, CW_CTX_COALESCE, CW_CTX_COALESCE);
    run_kick(&p, false, &cs, &ss);
    /* The requests arrive in one batch, so their handlers usually run in
     * one pass; a plugin may still hand them over in two. */
    if (batches) {
        assert_true(ss.tx_batches >= 1 && ss.tx_batches <= 2);
        assert_true(ss.tx_batched >= NBATCH - 1 && ss.tx_batched <= NBATCH);
        assert_int_equal(cs.rx_batches, ss.tx_batches);
    } else {
        assert_int_equal(ss.tx_batches, 0);
    }
    assert_int_equal(cs.rx_responses, 1 + NBATCH);
    assert_int_equal(cs.rx_dropped, 0);
    if (batches)
        print_message("# %s: %d answers in %d batch(es), each to its "
                      "request once\n",
                      uri, NBATCH, (int)ss.tx_batches);
    pair_close(&p);

    /* Without the flag: the same requests, no batch, and no answers in
     * kind to requests that came alone. */
    pair_open(&p, uri, 0);
    run_kick(&p, false, &cs, &ss);
    assert_int_equal(cs.tx_batches, 0);
    assert_int_equal(ss.rx_batches, 0);
    assert_int_equal(ss.tx_batches, 0);
    assert_int_equal(cs.rx_batches, 0);
    assert_int_equal(ss.rx_requests, 1 + NBATCH);
    pair_close(&p);
}

/* ---- an overflowed request cancelled while queued -----------------------*/

struct ovf_kick {
    struct pair *p;
    cw_handle_t *h;
    uint8_t *arg;
    size_t len;
    struct echo_call c;
};

static bool hold_bytes;

/* Echoes its bytes; while hold_bytes, the test holds the request
 * unanswered (p->held) and answers it itself. */
static void h_bytes_echo(cw_handle_t *h, void *arg)
{
    struct pair *p = arg;

    p->served++;
    if (hold_bytes && p->held == NULL) {
        p->held = h;
        return;
    }
    h_echo(h, NULL);
}

/* Runs inside the client's cw_trigger: an overflowed request, queued
 * until the pass ends, cancelled before it leaves. */
static void ovf_kick_done(cw_handle_t *h0, cw_status_t st, void *arg)
{
    struct ovf_kick *k = arg;
    (void)h0;

    assert_int_equal(st, CW_OK);
    assert_int_equal(cw_handle_create(k->p->cli, k->p->dest,
                                      cw_rpc_id("coalesce.bytes"), &k->h),
                     CW_OK);
    assert_int_equal(cw_buf_put_bytes(cw_handle_input(k->h), k->arg, k->len),
                     CW_OK);
    assert_int_equal(cw_forward(k->h, 20000, echo_done, &k->c), CW_OK);
    assert_int_equal(cw_cancel(k->h), CW_OK);
}

static bool cli_idle(struct pair *p)
{
    bool idle;

    cw_lock_take(&p->cli->lock);
    idle = nau_list_empty(&p->cli->inflight);
    cw_lock_give(&p->cli->lock);
    return idle;
}

/* The request never left, so nobody can be pulling its payload: it
 * completes CW_CANCELED at the flush, once, and lets go of the payload
 * then, not 5 s after its deadline (the server would hold it unanswered);
 * the handle can be forwarded again. */
static void cancel_overflow_on(const char *uri)
{
    struct pair p;
    struct ovf_kick k = {.p = &p};
    cw_handle_t *h0;
    uint64_t t0;
    bool batches;
    int served;

    pair_open(&p, uri, CW_CTX_COALESCE);
    assert_int_equal(
        cw_rpc_register(p.srv, "coalesce.bytes", h_bytes_echo, &p, NULL, NULL),
        CW_OK);
    batches = (p.dest->net->caps.flags & CW_NA_CAP_COALESCE) != 0;
    k.len = cw_addr_eager_limit(p.dest) + 1024;
    k.arg = malloc(k.len);
    assert_non_null(k.arg);
    fill(k.arg, k.len, 7);
    assert_int_equal(
        cw_handle_create(p.cli, p.dest, cw_rpc_id("coalesce.echo"), &h0),
        CW_OK);
    assert_int_equal(cw_buf_put_u32(cw_handle_input(h0), 7), CW_OK);
    hold_bytes = true;
    assert_int_equal(cw_forward(h0, 20000, ovf_kick_done, &k), CW_OK);
    POLL_UNTIL(k.c.done > 0, pump(&p, 10));
    assert_int_equal(k.c.done, 1);
    assert_int_equal(k.c.st, CW_CANCELED);
    pump(&p, 200);
    if (batches) {
        /* Never sent: nothing to wait for. */
        t0 = cw_now_ns();
        POLL_UNTIL(cli_idle(&p) || cw_now_ns() - t0 > 2000000000ull,
                   pump(&p, 10));
        assert_true(cli_idle(&p));
        assert_int_equal(p.served, 1); /* the kick only */
        assert_null(p.held);
    } else {
        /* It left at once: its payload stays exposed until the server,
         * which may be pulling it, answers. */
        POLL_UNTIL(p.held != NULL, pump(&p, 10));
        assert_non_null(p.held);
        assert_false(cli_idle(&p));
        assert_int_equal(cw_respond(p.held, CW_OK, NULL, NULL), CW_OK);
        cw_handle_release(p.held);
        POLL_UNTIL(cli_idle(&p), pump(&p, 10));
        assert_true(cli_idle(&p));
    }
    assert_int_equal(k.c.done, 1);
    hold_bytes = false;
    served = p.served;

    /* Forwarded again, not cancelled: it goes and is answered. */
    k.c.done = 0;
    assert_int_equal(cw_forward(k.h, 20000, echo_done, &k.c), CW_OK);
    POLL_UNTIL(k.c.done > 0, pump(&p, 10));
    assert_int_equal(k.c.done, 1);
    assert_int_equal(k.c.st, CW_OK);
    assert_int_equal(p.served, served + 1);
    print_message("# %s: an overflowed request cancelled %s completed "
                  "once; its handle went again\n",
                  uri, batches ? "while queued (never sent)" : "after it left");
    cw_handle_release(k.h);
    cw_handle_release(h0);
    free(k.arg);
    pair_close(&p);
}

/* ---- hostile batches ----------------------------------------------------*/

struct raw {
    cw_na_t *na;
    cw_na_addr_t *srv;
    int sent;
};

static void raw_sent(const struct cw_na_cb_info *info)
{
    ((struct raw *)info->arg)->sent++;
}

/* A one-way request for "coalesce.oneway" (@p len bytes at @p buf). */
static size_t oneway_req(uint8_t *buf, uint64_t id)
{
    struct cw_wire_hdr h = {.type = CW_MSG_REQ,
                            .flags = CW_HF_ONE_WAY,
                            .rpc_id = cw_rpc_id("coalesce.oneway"),
                            .req_id = id,
                            .budget_us = 10000000};

    cw_wire_hdr_encode(buf, &h);
    return CW_HDR_SIZE;
}

static void put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* A batch holding @p n messages; returns its length. */
static size_t batch(uint8_t *out, const uint8_t *const *msgs,
                    const size_t *lens, unsigned n)
{
    struct cw_wire_hdr h = {.type = CW_MSG_BATCH};
    size_t off = CW_HDR_SIZE;

    for (unsigned i = 0; i < n; i++) {
        put_le32(out + off, (uint32_t)lens[i]);
        memcpy(out + off + 4, msgs[i], lens[i]);
        off += 4 + lens[i];
    }
    h.payload_len = (uint32_t)(off - CW_HDR_SIZE);
    cw_wire_hdr_encode(out, &h);
    return off;
}

static void raw_send(struct pair *p, struct raw *r, const uint8_t *msg,
                     size_t len)
{
    int want = r->sent + 1;

    assert_int_equal(cw_na_msg_send_unexpected(r->na, msg, len, r->srv, 0,
                                               raw_sent, r, NULL),
                     CW_OK);
    POLL_UNTIL(r->sent >= want, {
        cw_na_progress(r->na, 0, NULL);
        cw_progress(p->srv, 0);
    });
    assert_int_equal(r->sent, want);
    for (int i = 0; i < 3000; i++) {
        cw_na_progress(r->na, 0, NULL);
        cw_progress(p->srv, 0);
        cw_trigger(p->srv, 0, 0, NULL);
    }
}

static uint64_t srv_stat(struct pair *p, int which)
{
    struct cw_context_stats s;

    cw_context_stats(p->srv, &s);
    return which == 0   ? s.rx_dropped
           : which == 1 ? s.rx_batches
                        : s.rx_requests;
}

static void hostile_on(const char *uri)
{
    struct pair p;
    struct raw r = {0};
    uint8_t a[CW_HDR_SIZE], b[CW_HDR_SIZE], junk[CW_HDR_SIZE],
        resp[CW_HDR_SIZE];
    uint8_t inner[512], out[2048];
    const uint8_t *msgs[4];
    size_t lens[4], n;
    uint64_t d0, q0;
    struct cw_wire_hdr rh = {.type = CW_MSG_RESP, .req_id = 9};

    pair_open(&p, uri, 0);
    assert_int_equal(cw_na_open(uri[0] == 's'   ? "shm://"
                                : uri[0] == 'o' ? "ofi+tcp://127.0.0.1:0"
                                                : "ucx+tcp://127.0.0.1:0",
                                0, NULL, &r.na),
                     CW_OK);
    assert_int_equal(cw_na_addr_lookup(r.na, p.uri, &r.srv), CW_OK);
    oneway_req(a, 1);
    oneway_req(b, 2);
    memset(junk, 0x5a, sizeof(junk));
    cw_wire_hdr_encode(resp, &rh);
    d0 = srv_stat(&p, 0);
    q0 = srv_stat(&p, 2);

    /* Valid, garbage, response, valid: both valid ones run, two dropped. */
    msgs[0] = a;
    msgs[1] = junk;
    msgs[2] = resp;
    msgs[3] = b;
    for (int i = 0; i < 4; i++)
        lens[i] = CW_HDR_SIZE;
    n = batch(out, msgs, lens, 4);
    raw_send(&p, &r, out, n);
    assert_int_equal(p.served, 2);
    assert_int_equal(srv_stat(&p, 0), d0 + 2);
    assert_int_equal(srv_stat(&p, 1), 1);

    /* A batch inside a batch: dropped; the valid entry before it runs. */
    msgs[0] = a;
    lens[0] = CW_HDR_SIZE;
    n = batch(inner, msgs, lens, 1);
    msgs[0] = b;
    msgs[1] = inner;
    lens[0] = CW_HDR_SIZE;
    lens[1] = n;
    n = batch(out, msgs, lens, 2);
    raw_send(&p, &r, out, n);
    assert_int_equal(p.served, 3);
    assert_int_equal(srv_stat(&p, 0), d0 + 3);

    /* A frame claiming more bytes than the batch holds: the rest dropped
     * (the entry before it still ran), counted once. */
    msgs[0] = a;
    msgs[1] = b;
    lens[0] = lens[1] = CW_HDR_SIZE;
    n = batch(out, msgs, lens, 2);
    put_le32(out + CW_HDR_SIZE + 4 + CW_HDR_SIZE, 100000);
    raw_send(&p, &r, out, n);
    assert_int_equal(p.served, 4);
    assert_int_equal(srv_stat(&p, 0), d0 + 4);

    /* A frame shorter than a header, and a trailing partial length. */
    n = batch(out, msgs, lens, 1);
    put_le32(out + CW_HDR_SIZE, 3);
    raw_send(&p, &r, out, n);
    n = batch(out, msgs, lens, 1);
    out[n] = 1; /* two bytes of a length prefix after the entry */
    out[n + 1] = 0;
    {
        struct cw_wire_hdr h = {.type = CW_MSG_BATCH,
                                .payload_len = (uint32_t)(n + 2 - CW_HDR_SIZE)};
        cw_wire_hdr_encode(out, &h);
    }
    raw_send(&p, &r, out, n + 2);
    assert_int_equal(p.served, 5);
    assert_int_equal(srv_stat(&p, 0), d0 + 6);

    /* An empty batch, and one with fields a batch must not carry: the
     * whole message is malformed. */
    {
        struct cw_wire_hdr h = {.type = CW_MSG_BATCH};
        cw_wire_hdr_encode(out, &h);
        raw_send(&p, &r, out, CW_HDR_SIZE);
        n = batch(out, msgs, lens, 1);
        h.payload_len = (uint32_t)(n - CW_HDR_SIZE);
        h.rpc_id = 5;
        cw_wire_hdr_encode(out, &h);
        raw_send(&p, &r, out, n);
    }
    assert_int_equal(p.served, 5);
    assert_int_equal(srv_stat(&p, 0), d0 + 8);
    assert_int_equal(srv_stat(&p, 2), q0 + 5);
    print_message("# %s: hostile batches: 8 bad entries or frames dropped and "
                  "counted, the 5 valid requests around them ran\n",
                  uri);

    cw_na_addr_free(r.na, r.srv);
    cw_na_close(r.na);
    pair_close(&p);
}

/* A response in a batch for a request in flight, sent by a peer the
 * request did not go to: dropped and counted; the real answer still
 * completes the request, once. */
static void forged_resp_on(const char *uri)
{
    struct pair p;
    struct raw r = {0};
    struct echo_call c = {0};
    cw_handle_t *h;
    cw_addr_t *cself;
    char curi[CW_URI_MAX];
    uint8_t resp[CW_HDR_SIZE + 8], out[256];
    const uint8_t *msgs[1] = {resp};
    size_t lens[1] = {sizeof(resp)}, n;
    struct cw_context_stats cs;
    uint64_t d0;

    cli_listen = true;
    pair_open(&p, uri, 0);
    cli_listen = false;
    /* Only the coalescing plugins (ofi+tcp, ucx+tcp) come here. */
    assert_true(p.dest->net->caps.flags & CW_NA_CAP_COALESCE);
    assert_int_equal(
        cw_handle_create(p.cli, p.dest, cw_rpc_id("coalesce.hold"), &h), CW_OK);
    assert_int_equal(cw_forward(h, 20000, echo_done, &c), CW_OK);
    POLL_UNTIL(p.held != NULL, pump(&p, 1));
    assert_non_null(p.held);
    /* Another peer answers in the server's stead, in a batch, to the
     * client network. */
    assert_int_equal(cw_network_self(p.dest->net, &cself), CW_OK);
    assert_int_equal(cw_addr_to_string(cself, curi, sizeof(curi)), CW_OK);
    cw_addr_free(cself);
    assert_int_equal(cw_na_open(uri, 0, NULL, &r.na), CW_OK);
    assert_int_equal(cw_na_addr_lookup(r.na, curi, &r.srv), CW_OK);
    {
        struct cw_wire_hdr rh = {.type = CW_MSG_RESP,
                                 .req_id = h->use.req_id,
                                 .rpc_id = cw_rpc_id("coalesce.hold"),
                                 .payload_len = 8};
        cw_wire_hdr_encode(resp, &rh);
        memcpy(resp + CW_HDR_SIZE, "\x04\0\0\0forg", 8);
    }
    cw_context_stats(p.cli, &cs);
    d0 = cs.rx_dropped;
    n = batch(out, msgs, lens, 1);
    {
        int want = r.sent + 1;
        assert_int_equal(cw_na_msg_send_unexpected(r.na, out, n, r.srv, 0,
                                                   raw_sent, &r, NULL),
                         CW_OK);
        POLL_UNTIL(r.sent >= want, {
            cw_na_progress(r.na, 0, NULL);
            pump(&p, 1);
        });
        for (int i = 0; i < 3000; i++) {
            cw_na_progress(r.na, 0, NULL);
            pump(&p, 1);
        }
    }
    cw_context_stats(p.cli, &cs);
    assert_int_equal(cs.rx_dropped, d0 + 1);
    assert_int_equal(c.done, 0);
    /* The real answer. */
    cw_buf_put_u32(cw_handle_output(p.held), 77);
    assert_int_equal(cw_respond(p.held, CW_OK, NULL, NULL), CW_OK);
    cw_handle_release(p.held);
    POLL_UNTIL(c.done != 0, pump(&p, 1));
    assert_int_equal(c.done, 1);
    assert_int_equal(c.st, CW_OK);
    assert_int_equal(c.got, 77);
    cw_handle_release(h);
    cw_na_addr_free(r.na, r.srv);
    cw_na_close(r.na);
    pair_close(&p);
    print_message("# %s: a response in a batch from another peer dropped; "
                  "the real one completed the request once\n",
                  uri);
}

static void test_wire(void **state)
{
    uint8_t a[CW_HDR_SIZE], out[512];
    const uint8_t *msgs[2] = {a, a}, *m;
    size_t lens[2] = {CW_HDR_SIZE, CW_HDR_SIZE}, n, off = 0, len;
    struct cw_wire_msg w;
    (void)state;

    oneway_req(a, 3);
    n = batch(out, msgs, lens, 2);
    assert_int_equal(cw_wire_decode(out, n, &w), CW_OK);
    assert_int_equal(w.hdr.type, CW_MSG_BATCH);
    assert_int_equal(
        cw_wire_batch_next(w.payload, w.hdr.payload_len, &off, &m, &len),
        CW_OK);
    assert_int_equal(len, CW_HDR_SIZE);
    assert_memory_equal(m, a, CW_HDR_SIZE);
    assert_int_equal(
        cw_wire_batch_next(w.payload, w.hdr.payload_len, &off, &m, &len),
        CW_OK);
    assert_int_equal(
        cw_wire_batch_next(w.payload, w.hdr.payload_len, &off, &m, &len),
        CW_NOENT);
    /* Every truncation of the payload is a bad frame, never a read past
     * its end. */
    for (size_t cut = 1; cut < w.hdr.payload_len; cut++) {
        cw_status_t st = CW_OK;
        off = 0;
        while (st == CW_OK)
            st = cw_wire_batch_next(w.payload, w.hdr.payload_len - cut, &off,
                                    &m, &len);
        if (w.hdr.payload_len - cut == 4 + CW_HDR_SIZE)
            assert_int_equal(st, CW_NOENT);
        else
            assert_int_equal(st, CW_PROTOCOL);
    }
}

static void test_shm(void **state)
{
    (void)state;
    coalesce_on("shm://");
    coalesce_scope("shm://");
    cancel_overflow_on("shm://");
    hostile_on("shm://");
}

static void test_ofi_tcp(void **state)
{
    (void)state;
    cw_test_require_plugin("ofi+tcp://");
    coalesce_on("ofi+tcp://127.0.0.1:0");
    coalesce_scope("ofi+tcp://127.0.0.1:0");
    cancel_overflow_on("ofi+tcp://127.0.0.1:0");
    hostile_on("ofi+tcp://127.0.0.1:0");
    forged_resp_on("ofi+tcp://127.0.0.1:0");
}

static void test_ucx_tcp(void **state)
{
    (void)state;
    cw_test_require_plugin("ucx+tcp://");
    coalesce_on("ucx+tcp://127.0.0.1:0");
    coalesce_scope("ucx+tcp://127.0.0.1:0");
    cancel_overflow_on("ucx+tcp://127.0.0.1:0");
    hostile_on("ucx+tcp://127.0.0.1:0");
    forged_resp_on("ucx+tcp://127.0.0.1:0");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wire),
        cmocka_unit_test(test_shm),
        cmocka_unit_test(test_ofi_tcp),
        cmocka_unit_test(test_ucx_tcp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
