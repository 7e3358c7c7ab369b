/*
 * The gateway's delegation pipeline and staging credits
 * (gateway/bulk_pipe.c, gateway/staging.c) against a fake core: every
 * chunk transfer is recorded and completed by the test in the order it
 * chooses, so interleavings of two transfers sharing the pool are exact.
 * Each delegation must be answered exactly once, no pipe is touched after
 * it is freed (run under ASan), and every staging chunk comes back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gw_bulk.h"

#define CHUNK   64u
#define MAX_OPS 1024

/* ---- the fake core ------------------------------------------------------ */

struct cw_context {
    int unused;
};
struct cw_addr {
    int unused;
};
/* A handle's bytes; a transfer reaching past @c valid fails when it is
 * started (as a hostile requester's short memory handle does in na-shm). */
struct cw_bulk {
    size_t valid;
    bool heap; /* a staging chunk's, made by cw_bulk_create */
};
struct cw_bulk_op {
    cw_bulk_cb_t cb;
    void *arg;
    enum cw_bulk_dir dir;
    cw_bulk_t *remote;
    size_t roff;
    bool done, canceled;
};
/* One delegation request and the token it presents. */
struct cw_handle {
    struct cw_bproxy_req req;
    cw_bulk_t bulk;
    struct gw_btok tok;
    int answers;
    cw_status_t st;
    bool released;
};

static struct cw_context fake_ctx;
static struct cw_addr fake_peer;
static struct cw_bulk_op ops[MAX_OPS];
static unsigned nops;
static cw_rpc_handler_t bproxy_handler;
static void *bproxy_arg;
static cw_bulk_t origin = {SIZE_MAX, false};
/* When set, every delegation presents this token (else its own). */
static struct gw_btok *shared_tok;

cw_status_t cw_rpc_register(cw_context_t *ctx, const char *name,
                            cw_rpc_handler_t handler, void *arg,
                            const struct cw_rpc_opts *opts, cw_rpc_id_t *id_p)
{
    (void)ctx;
    (void)name;
    (void)opts;
    bproxy_handler = handler;
    bproxy_arg = arg;
    *id_p = 1;
    return CW_OK;
}

cw_status_t cw_rpc_deregister(cw_context_t *ctx, cw_rpc_id_t id)
{
    (void)ctx;
    (void)id;
    return CW_OK;
}

cw_status_t cw_bulk_create(cw_context_t *ctx, const struct cw_segment *segs,
                           size_t n, uint32_t perm, cw_bulk_t **bulk_p)
{
    cw_bulk_t *b = calloc(1, sizeof(*b));

    (void)ctx;
    (void)segs;
    (void)n;
    (void)perm;
    if (b == NULL)
        return CW_NOMEM;
    b->valid = SIZE_MAX;
    b->heap = true;
    *bulk_p = b;
    return CW_OK;
}

void cw_bulk_free(cw_bulk_t *bulk)
{
    if (bulk != NULL && bulk->heap)
        free(bulk);
}

cw_status_t cw_bulk_transfer(cw_context_t *ctx, enum cw_bulk_dir dir,
                             cw_addr_t *peer, cw_bulk_t *remote,
                             size_t remote_off, cw_bulk_t *local,
                             size_t local_off, size_t len, cw_bulk_cb_t cb,
                             void *arg, cw_bulk_op_t **op_p)
{
    struct cw_bulk_op *op;

    (void)ctx;
    (void)peer;
    (void)local;
    (void)local_off;
    if (remote_off + len > remote->valid)
        return CW_RANGE;
    assert_true(nops < MAX_OPS);
    op = &ops[nops++];
    op->cb = cb;
    op->arg = arg;
    op->dir = dir;
    op->remote = remote;
    op->roff = remote_off;
    *op_p = op;
    return CW_OK;
}

cw_status_t cw_bulk_cancel(cw_bulk_op_t *op)
{
    op->canceled = true;
    return CW_OK;
}

cw_status_t cw_bproxy_req_decode(cw_handle_t *h, struct cw_bproxy_req *r)
{
    *r = h->req;
    r->bulk = &h->bulk;
    return CW_OK;
}

bool cw_bgrant_possible(cw_handle_t *h, const struct cw_bproxy_req *r,
                        const cw_bulk_t *o)
{
    (void)h;
    (void)r;
    (void)o;
    return false;
}

cw_status_t cw_bgrant_write(cw_handle_t *h, const struct cw_bproxy_req *r,
                            cw_bulk_t *o, cw_addr_t *owner, uint64_t life_ms)
{
    (void)h;
    (void)r;
    (void)o;
    (void)owner;
    (void)life_ms;
    return CW_UNSUPPORTED;
}

cw_status_t cw_respond(cw_handle_t *h, cw_status_t status, cw_respond_cb_t cb,
                       void *arg)
{
    (void)cb;
    (void)arg;
    h->answers++;
    h->st = status;
    return CW_OK;
}

void cw_handle_release(cw_handle_t *h)
{
    h->released = true;
}

cw_addr_t *cw_handle_source(cw_handle_t *h)
{
    (void)h;
    return &fake_peer;
}

cw_context_t *cw_handle_context(cw_handle_t *h)
{
    (void)h;
    return &fake_ctx;
}

bool cw_handle_canceled(cw_handle_t *h)
{
    (void)h;
    return false;
}

cw_status_t cw_progress(cw_context_t *ctx, unsigned timeout_ms)
{
    (void)ctx;
    (void)timeout_ms;
    return CW_OK;
}

cw_status_t cw_trigger(cw_context_t *ctx, unsigned timeout_ms, unsigned max,
                       unsigned *count_p)
{
    (void)ctx;
    (void)timeout_ms;
    (void)max;
    (void)count_p;
    return CW_OK;
}

void gw_answer(cw_handle_t *in, cw_status_t st)
{
    cw_respond(in, st, NULL, NULL);
    cw_handle_release(in);
}

void gw_metric_head(FILE *out, const char *name, const char *type,
                    const char *help)
{
    (void)out;
    (void)name;
    (void)type;
    (void)help;
}

cw_status_t gw_btok_check(struct gw_bulk *gb, const struct cw_bproxy_req *r,
                          cw_handle_t *h, struct gw_btok **tok_p)
{
    struct gw_btok *t = shared_tok != NULL ? shared_tok : &h->tok;

    (void)gb;
    (void)r;
    t->refs++;
    *tok_p = t;
    return CW_OK;
}

void gw_btok_unref(struct gw_btok *t)
{
    if (t != NULL)
        t->refs--;
}

void gw_btok_fini(struct gw_bulk *gb)
{
    (void)gb;
}

/* ---- helpers ------------------------------------------------------------ */

struct fixture {
    struct gw gw;
    struct gw_shard shard;
    struct cw_config cfg;
};

/* A gateway with a pool of @p nslots chunks and @p depth per transfer. */
static struct fixture *gw_new(unsigned nslots, unsigned depth)
{
    struct fixture *fx = calloc(1, sizeof(*fx));

    assert_non_null(fx);
    fx->cfg.buffers.chunk = CHUNK;
    fx->cfg.buffers.depth = depth;
    fx->cfg.buffers.staging = (uint64_t)nslots * CHUNK;
    fx->gw.cfg = &fx->cfg;
    fx->gw.shards = &fx->shard;
    fx->gw.nshards = 1;
    fx->shard.ctx = &fake_ctx;
    memset(ops, 0, sizeof(ops));
    nops = 0;
    assert_int_equal(gw_bulk_init(&fx->gw, &fx->cfg), CW_OK);
    return fx;
}

static void gw_del(struct fixture *fx)
{
    gw_bulk_fini(&fx->gw);
    free(fx);
}

/* A token of the table (one reference) for 1 MiB of the origin. */
static void token_init(struct fixture *fx, struct gw_btok *t)
{
    memset(t, 0, sizeof(*t));
    t->bulk = &origin;
    t->peer = &fake_peer;
    t->sh = &fx->gw.shards[0];
    t->perm = CW_BULK_READ_WRITE;
    t->total = 1u << 20;
    t->refs = 1;
}

/* A delegation of @p len bytes; the requester's handle is good for its
 * first @p valid bytes. */
static void delegate(struct fixture *fx, cw_handle_t *h, enum cw_bulk_dir dir,
                     size_t len, size_t valid)
{
    memset(h, 0, sizeof(*h));
    token_init(fx, &h->tok);
    h->req.dir = dir;
    h->req.len = len;
    h->bulk.valid = valid;
    bproxy_handler(h, bproxy_arg);
}

/* Complete recorded op @p i (once) with @p st. */
static void complete(unsigned i, cw_status_t st)
{
    assert_true(i < nops);
    assert_false(ops[i].done);
    ops[i].done = true;
    ops[i].cb(st, ops[i].arg);
}

/* Complete every op still open, oldest first, until none is left. */
static void drain(void)
{
    for (unsigned i = 0; i < nops; i++)
        if (!ops[i].done)
            complete(i, ops[i].canceled ? CW_CANCELED : CW_OK);
}

/* ---- tests -------------------------------------------------------------- */

/* A waiting transfer handed the chunk its own write just returned, whose
 * next read then fails to start, finishes inside that hand-over: the
 * write's completion must not touch it afterwards (use after free), and it
 * is answered once with the failure. */
static void test_own_slot_sync_failure(void **state)
{
    struct fixture *fx = gw_new(2, 2);
    cw_handle_t big, bad;

    (void)state;
    /* big takes both chunks: reads 0 and 1. */
    delegate(fx, &big, CW_BULK_PULL, 8 * CHUNK, SIZE_MAX);
    assert_int_equal(nops, 2);
    /* bad waits; its bytes end after its first chunk. */
    delegate(fx, &bad, CW_BULK_PUSH, 4 * CHUNK, CHUNK);
    assert_int_equal(nops, 2);
    complete(0, CW_OK); /* big's read -> its write (op 2) */
    assert_int_equal(nops, 3);
    complete(2, CW_OK); /* big's write: the chunk goes to bad (op 3) */
    assert_int_equal(nops, 4);
    assert_int_equal(ops[3].dir, CW_BULK_PULL);
    complete(3, CW_OK); /* bad's read -> its write (op 4) */
    assert_int_equal(nops, 5);
    /* bad's write: bad is first in the queue and gets its chunk back;
     * its next read cannot start (CW_RANGE) and it stops there. */
    complete(4, CW_OK);
    assert_int_equal(bad.answers, 1);
    assert_int_equal(bad.st, CW_RANGE);
    assert_true(bad.released);
    drain();
    drain();
    drain();
    assert_int_equal(big.answers, 1);
    assert_int_equal(big.st, CW_OK);
    assert_int_equal(fx->gw.bulk->pool.nfree, fx->gw.bulk->pool.nslots);
    assert_int_equal(fx->gw.bulk->npipes, 0);
    assert_int_equal(big.tok.refs, 1);
    assert_int_equal(bad.tok.refs, 1);
    gw_del(fx);
}

/* A transfer waiting for staging whose token is revoked meanwhile (its RPC
 * completed: the origin may reuse its buffer) must not move a byte when a
 * chunk frees up: it stops with CW_CANCELED. */
static void test_revoked_while_waiting(void **state)
{
    struct fixture *fx = gw_new(2, 2);
    cw_handle_t big, late;
    unsigned before;

    (void)state;
    delegate(fx, &big, CW_BULK_PULL, 4 * CHUNK, SIZE_MAX);
    assert_int_equal(nops, 2);
    delegate(fx, &late, CW_BULK_PUSH, 2 * CHUNK, SIZE_MAX);
    assert_int_equal(nops, 2); /* waiting, nothing started */
    late.tok.revoked = true;   /* gw_bulk_revoke */
    complete(0, CW_OK);        /* big's read -> its write (op 2) */
    before = nops;
    complete(2, CW_OK); /* big's write returns a chunk */
    for (unsigned i = before; i < nops; i++)
        assert_ptr_not_equal(ops[i].remote, &late.bulk);
    assert_int_equal(late.answers, 1);
    assert_int_equal(late.st, CW_CANCELED);
    drain();
    drain();
    assert_int_equal(big.answers, 1);
    assert_int_equal(big.st, CW_OK);
    assert_int_equal(fx->gw.bulk->pool.nfree, fx->gw.bulk->pool.nslots);
    assert_int_equal(late.tok.refs, 1);
    gw_del(fx);
}

/* Revocation answers the delegations on the token that wait for staging
 * at once, not when a chunk next frees up (which may be long after, or
 * never), each once; a delegation on another token keeps its place, and
 * the pool's accounting is intact. */
static void test_revoke_wakes_waiting(void **state)
{
    struct fixture *fx = gw_new(2, 2);
    cw_handle_t big, late, late2, other;
    struct gw_btok tok;

    (void)state;
    delegate(fx, &big, CW_BULK_PULL, 4 * CHUNK, SIZE_MAX);
    assert_int_equal(nops, 2); /* big holds both chunks */
    token_init(fx, &tok);
    shared_tok = &tok;
    delegate(fx, &late, CW_BULK_PUSH, 2 * CHUNK, SIZE_MAX);
    delegate(fx, &late2, CW_BULK_PULL, CHUNK, SIZE_MAX);
    shared_tok = NULL;
    delegate(fx, &other, CW_BULK_PULL, CHUNK, SIZE_MAX);
    assert_int_equal(nops, 2); /* three waiting, nothing started */
    assert_int_equal(tok.npipes, 2);

    tok.revoked = true; /* as gw_bulk_revoke does */
    gw_pipe_revoke(fx->gw.bulk, &tok);
    assert_int_equal(late.answers, 1);
    assert_int_equal(late.st, CW_CANCELED);
    assert_true(late.released);
    assert_int_equal(late2.answers, 1);
    assert_int_equal(late2.st, CW_CANCELED);
    assert_int_equal(tok.npipes, 0);
    assert_int_equal(tok.refs, 1);
    assert_int_equal(other.answers, 0);
    assert_int_equal(fx->gw.bulk->npipes, 2);
    /* other's, the newest of the two left, waits (pipes: oldest first). */
    assert_ptr_equal(
        fx->gw.bulk->pool.wait_head,
        nau_container_of(fx->gw.bulk->pipes.prev, struct gw_pipe, link));

    drain(); /* big's reads; its writes hand other a chunk */
    drain();
    drain();
    assert_int_equal(big.answers, 1);
    assert_int_equal(big.st, CW_OK);
    assert_int_equal(other.answers, 1);
    assert_int_equal(other.st, CW_OK);
    assert_int_equal(late.answers, 1);
    assert_int_equal(late2.answers, 1);
    for (unsigned i = 0; i < nops; i++)
        assert_ptr_not_equal(ops[i].remote, &late.bulk);
    assert_int_equal(fx->gw.bulk->pool.nfree, fx->gw.bulk->pool.nslots);
    assert_null(fx->gw.bulk->pool.wait_head);
    assert_null(fx->gw.bulk->pool.wait_tail);
    assert_int_equal(fx->gw.bulk->failed, 2);
    gw_del(fx);
}

/* One token may hold GW_BTOK_MAX_PIPES staged delegations at once; the
 * next is answered CW_BUSY at once and counted, and the others all finish
 * and give the token back. */
static void test_token_pipe_cap(void **state)
{
    struct fixture *fx = gw_new(1, 1);
    cw_handle_t *hs = calloc(GW_BTOK_MAX_PIPES + 1, sizeof(*hs));
    struct gw_btok tok;

    (void)state;
    assert_non_null(hs);
    token_init(fx, &tok);
    shared_tok = &tok;
    for (unsigned i = 0; i < GW_BTOK_MAX_PIPES; i++)
        delegate(fx, &hs[i], CW_BULK_PULL, CHUNK, SIZE_MAX);
    assert_int_equal(nops, 1); /* one chunk: the rest wait */
    assert_int_equal(tok.npipes, GW_BTOK_MAX_PIPES);
    delegate(fx, &hs[GW_BTOK_MAX_PIPES], CW_BULK_PULL, CHUNK, SIZE_MAX);
    assert_int_equal(hs[GW_BTOK_MAX_PIPES].answers, 1);
    assert_int_equal(hs[GW_BTOK_MAX_PIPES].st, CW_BUSY);
    assert_int_equal(fx->gw.bulk->rej_busy, 1);
    drain();
    for (unsigned i = 0; i < GW_BTOK_MAX_PIPES; i++) {
        assert_int_equal(hs[i].answers, 1);
        assert_int_equal(hs[i].st, CW_OK);
    }
    assert_int_equal(tok.npipes, 0);
    assert_int_equal(tok.refs, 1);
    assert_int_equal(fx->gw.bulk->pool.nfree, fx->gw.bulk->pool.nslots);
    shared_tok = NULL;
    free(hs);
    gw_del(fx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_own_slot_sync_failure),
        cmocka_unit_test(test_revoked_while_waiting),
        cmocka_unit_test(test_revoke_wakes_waiting),
        cmocka_unit_test(test_token_pipe_cap),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
