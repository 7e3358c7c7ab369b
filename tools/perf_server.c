/*
 * cw-perf server: the echo and bulk handlers (with --verify, the checks of
 * what arrived and the patterns sent back) on one context or on N contexts
 * on N threads (--contexts, cw_network_open_spread).
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <causeway/causeway.h>

#include "perf.h"
#include "perf_check.h"

struct srv {
    cw_context_t *ctx;
    uint8_t *buf; /* unverified transfers, all of them at once */
    size_t cap;
    cw_bulk_t *local;
    uint8_t *reply; /* answers, composed one at a time */
    size_t reply_cap;
};

struct srv_xfer {
    cw_handle_t *h;
    cw_bulk_t *remote;
    uint64_t t0;
    uint64_t seed;
    uint8_t dir;
    bool verify;
    size_t len;
    /* A verified transfer has memory of its own; others share srv's. */
    uint8_t *buf;
    cw_bulk_t *own;
};

/* Grow @p *p_p to @p len bytes, new bytes zeroed. */
static bool grow(uint8_t **p_p, size_t *cap_p, size_t len)
{
    uint8_t *nb;

    if (len <= *cap_p)
        return true;
    nb = realloc(*p_p, len);
    if (nb == NULL)
        return false;
    memset(nb + *cap_p, 0, len - *cap_p);
    *p_p = nb;
    *cap_p = len;
    return true;
}

static cw_status_t srv_reply(struct srv *s, cw_buf_t *out, const uint8_t *p,
                             size_t n, uint8_t flags, uint32_t rsize,
                             uint64_t seed)
{
    if (!grow(&s->reply, &s->reply_cap, rsize))
        return CW_NOMEM;
    if (flags & ECHO_VERIFY) {
        size_t keep = n < rsize ? n : rsize;

        size_t bad = perf_pattern_find(p, n, seed);

        cw_buf_put_u64(out, perf_check_word(bad, n));
        cw_buf_put_u8(out, bad < n ? p[bad] : 0);
        if (keep > 0)
            memcpy(s->reply, p, keep);
        perf_pattern_fill(s->reply, keep, rsize, seed);
        perf_maybe_corrupt(s->reply, rsize);
    }
    return cw_buf_put_bytes(out, s->reply, rsize);
}

static void h_rpc(cw_handle_t *h, void *arg)
{
    struct srv *s = arg;
    cw_buf_t *in = cw_handle_input(h);
    const void *p = NULL;
    size_t n = 0;
    uint8_t flags = 0;
    uint32_t rsize = 0;
    uint64_t seed = 0;
    cw_status_t st;

    cw_buf_get_bytes(in, &p, &n);
    if (cw_buf_remaining(in) > 0) {
        cw_buf_get_u8(in, &flags);
        cw_buf_get_u32(in, &rsize);
        cw_buf_get_u64(in, &seed);
    }
    st = cw_buf_error(in);
    if (st == CW_OK && rsize > MAX_REPLY)
        st = CW_INVALID_ARG;
    if (st == CW_OK && ((flags & ECHO_VERIFY) || rsize > 0))
        st = srv_reply(s, cw_handle_output(h), p, n, flags, rsize, seed);
    cw_respond(h, st, NULL, NULL);
    cw_handle_release(h);
}

static void xfer_free(struct srv_xfer *x)
{
    cw_bulk_free(x->remote);
    cw_bulk_free(x->own);
    free(x->buf);
    free(x);
}

static void xfer_done(cw_status_t st, void *arg)
{
    struct srv_xfer *x = arg;
    cw_buf_t *out = cw_handle_output(x->h);

    cw_buf_put_u64(out, cw_now_ns() - x->t0);
    if (x->verify) {
        size_t bad = x->len;

        if (x->dir == 1) {
            perf_maybe_corrupt(x->buf, x->len);
            bad = perf_pattern_find(x->buf, x->len, x->seed);
        }
        cw_buf_put_u64(out, perf_check_word(bad, x->len));
        cw_buf_put_u8(out, bad < x->len ? x->buf[bad] : 0);
    }
    cw_respond(x->h, st, NULL, NULL);
    cw_handle_release(x->h);
    xfer_free(x);
}

/* The shared memory of unverified transfers, grown to @p len. */
static cw_status_t srv_shared(struct srv *s, size_t len)
{
    struct cw_segment seg;
    size_t old = s->cap;

    if (len <= s->cap)
        return CW_OK;
    if (!grow(&s->buf, &s->cap, len))
        return CW_NOMEM;
    memset(s->buf + old, 0xa5, len - old);
    cw_bulk_free(s->local);
    s->local = NULL;
    seg.base = s->buf;
    seg.len = len;
    return cw_bulk_create(s->ctx, &seg, 1, CW_BULK_READ_WRITE, &s->local);
}

/* Memory of a verified transfer's own; a push's holds its pattern. */
static cw_status_t xfer_own(struct srv *s, struct srv_xfer *x)
{
    struct cw_segment seg;

    x->buf = malloc(x->len ? x->len : 1);
    if (x->buf == NULL)
        return CW_NOMEM;
    if (x->dir == 2) {
        perf_pattern_fill(x->buf, 0, x->len, x->seed);
        perf_maybe_corrupt(x->buf, x->len);
    }
    seg.base = x->buf;
    seg.len = x->len;
    return cw_bulk_create(s->ctx, &seg, 1, CW_BULK_READ_WRITE, &x->own);
}

static void h_bulk(cw_handle_t *h, void *arg)
{
    struct srv *s = arg;
    cw_buf_t *in = cw_handle_input(h);
    struct srv_xfer *x = calloc(1, sizeof(*x));
    cw_status_t st = CW_NOMEM;

    if (x == NULL)
        goto fail;
    x->h = h;
    cw_buf_get_u8(in, &x->dir);
    x->verify = x->dir & DIR_VERIFY;
    x->dir &= (uint8_t)~DIR_VERIFY;
    cw_buf_get_bulk(in, &x->remote);
    if (x->verify)
        cw_buf_get_u64(in, &x->seed);
    st = cw_buf_error(in);
    if (st != CW_OK)
        goto fail;
    x->len = cw_bulk_size(x->remote);
    st = x->verify ? xfer_own(s, x) : srv_shared(s, x->len);
    if (st != CW_OK)
        goto fail;
    x->t0 = cw_now_ns();
    st = cw_bulk_transfer(s->ctx, x->dir == 1 ? CW_BULK_PULL : CW_BULK_PUSH,
                          cw_handle_source(h), x->remote, 0,
                          x->verify ? x->own : s->local, 0, x->len, xfer_done,
                          x, NULL);
    if (st == CW_OK)
        return;
fail:
    if (x)
        xfer_free(x);
    cw_respond(h, st, NULL, NULL);
    cw_handle_release(h);
}

static void h_quit(cw_handle_t *h, void *arg)
{
    (void)arg;
    cw_respond(h, CW_OK, NULL, NULL);
    cw_handle_release(h);
    perf_stop = 1;
}

static int write_addr_file(const char *path, const char *uri)
{
    char tmp[4096];
    FILE *f;

    snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
    f = fopen(tmp, "we");
    if (f == NULL) {
        fprintf(stderr, "cw-perf: %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    fprintf(f, "%s\n", uri);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "cw-perf: %s: %s\n", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

static int srv_init(struct srv *s)
{
    struct cw_context_opts o;
    cw_status_t st;

    cw_context_opts_init(&o);
    if (perf_busy)
        o.flags |= CW_CTX_BUSY;
    if (perf_coalesce)
        o.flags |= CW_CTX_COALESCE;
    o.bulk_chunk = perf_bulk_chunk;
    o.bulk_depth = perf_bulk_depth;
    st = cw_context_create(&o, &s->ctx);
    if (st != CW_OK) {
        fprintf(stderr, "cw-perf: context: %s\n", cw_status_str(st));
        return -1;
    }
    if ((st = cw_rpc_register(s->ctx, RPC_ECHO, h_rpc, s, NULL, NULL)) !=
            CW_OK ||
        (st = cw_rpc_register(s->ctx, RPC_BULK, h_bulk, s, NULL, NULL)) !=
            CW_OK ||
        (st = cw_rpc_register(s->ctx, RPC_QUIT, h_quit, s, NULL, NULL)) !=
            CW_OK) {
        fprintf(stderr, "cw-perf: cw_rpc_register: %s\n", cw_status_str(st));
        return -1;
    }
    return 0;
}

/* One context's thread: its own progress and trigger, nothing shared. */
static void *srv_thread(void *arg)
{
    struct srv *s = arg;

    while (!perf_stop)
        perf_pump(s->ctx);
    return NULL;
}

/* With --contexts N, one published address served by N contexts, each on
 * its own thread (cw_network_open_spread); on exit each context's request
 * count goes to stderr as "cw-perf: context I served N requests". */
int perf_run_server(const char *listen, const char *addr_file, unsigned nctx)
{
    struct srv *s;
    cw_context_t **ctxs;
    cw_network_t **nets;
    pthread_t *tids;
    unsigned i, started = 0;
    char uri[CW_URI_MAX];
    cw_status_t st;
    int rc = 1;

    s = calloc(nctx, sizeof(*s));
    ctxs = calloc(nctx, sizeof(*ctxs));
    nets = calloc(nctx, sizeof(*nets));
    tids = calloc(nctx, sizeof(*tids));
    if (s == NULL || ctxs == NULL || nets == NULL || tids == NULL) {
        fprintf(stderr, "cw-perf: out of memory\n");
        goto out;
    }
    for (i = 0; i < nctx; i++) {
        if (srv_init(&s[i]) != 0)
            goto out;
        ctxs[i] = s[i].ctx;
    }
    st = cw_network_open_spread(ctxs, nctx, listen, CW_NET_LISTEN, nets);
    if (st == CW_OK)
        st = cw_network_uri(nets[0], uri, sizeof(uri));
    if (st != CW_OK) {
        fprintf(stderr, "cw-perf: cannot listen on %s: %s\n", listen,
                cw_status_str(st));
        goto out;
    }
    for (started = 1; started < nctx; started++) {
        int e = pthread_create(&tids[started], NULL, srv_thread, &s[started]);
        if (e != 0) {
            fprintf(stderr, "cw-perf: pthread_create: %s\n", strerror(e));
            perf_stop = 1;
            goto join;
        }
    }
    if (addr_file && write_addr_file(addr_file, uri) != 0) {
        perf_stop = 1;
        goto join;
    }
    printf("%s\n", uri);
    fflush(stdout);
    srv_thread(&s[0]);
    rc = 0;
join:
    for (i = 1; i < started; i++)
        pthread_join(tids[i], NULL);
    /* Let the last answers leave. */
    for (int k = 0; k < 20; k++)
        for (i = 0; i < nctx; i++) {
            cw_progress(s[i].ctx, 1);
            cw_trigger(s[i].ctx, 0, 0, NULL);
        }
    for (i = 0; i < nctx && rc == 0; i++) {
        struct cw_context_stats cs;
        if (cw_context_stats(s[i].ctx, &cs) == CW_OK)
            fprintf(stderr, "cw-perf: context %u served %llu requests\n", i,
                    (unsigned long long)cs.rx_requests);
    }
out:
    for (i = 0; s != NULL && i < nctx; i++) {
        cw_bulk_free(s[i].local);
        cw_context_destroy(s[i].ctx);
        free(s[i].buf);
        free(s[i].reply);
    }
    free(tids);
    free(nets);
    free(ctxs);
    free(s);
    return rc;
}
