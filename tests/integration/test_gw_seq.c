/*
 * Sequence-numbered RPCs for the gateway worker tests (gw_workers.sh).
 *
 *   test_gw_seq serve URI ADDR_FILE   answer "seq" RPCs; check each
 *       caller's sequence numbers arrive in order; on SIGTERM print
 *       "served N callers M out-of-order K" and exit 0 (1 if any arrived
 *       out of order)
 *   test_gw_seq call ADDR ID COUNT    COUNT RPCs, 16 in flight, numbered
 *       0.. for caller ID; print "caller ID done N failed F" and exit 0
 *       only when all succeeded
 *
 * A caller is its ID (< 4096), not its address: through a gateway every
 * request comes from the gateway.
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <causeway/causeway.h>

#define MAX_CALLERS 4096
#define WINDOW      16

static volatile sig_atomic_t stop;
static int64_t last[MAX_CALLERS];
static uint64_t served, out_of_order;
static unsigned callers;

static void on_term(int sig)
{
    (void)sig;
    stop = 1;
}

/* Input: u32 caller, u64 sequence number. */
static void h_seq(cw_handle_t *h, void *arg)
{
    uint32_t who = UINT32_MAX;
    uint64_t seq = 0;
    cw_status_t st;

    (void)arg;
    cw_buf_get_u32(cw_handle_input(h), &who);
    cw_buf_get_u64(cw_handle_input(h), &seq);
    st = cw_buf_error(cw_handle_input(h));
    if (st == CW_OK && who < MAX_CALLERS) {
        if (last[who] < 0)
            callers++;
        if ((int64_t)seq != last[who] + 1) {
            out_of_order++;
            fprintf(stderr, "caller %u: %llu after %lld\n", who,
                    (unsigned long long)seq, (long long)last[who]);
        }
        last[who] = (int64_t)seq;
        served++;
    } else if (st == CW_OK) {
        st = CW_INVALID_ARG;
    }
    cw_respond(h, st, NULL, NULL);
    cw_handle_release(h);
}

static int serve(const char *uri, const char *addr_file)
{
    cw_context_t *ctx;
    cw_network_t *net;
    char self[CW_URI_MAX], tmp[4096];
    FILE *f;

    for (unsigned i = 0; i < MAX_CALLERS; i++)
        last[i] = -1;
    signal(SIGTERM, on_term);
    signal(SIGINT, on_term);
    if (cw_context_create(NULL, &ctx) != CW_OK ||
        cw_rpc_register(ctx, "seq", h_seq, NULL, NULL, NULL) != CW_OK ||
        cw_network_open(ctx, uri, CW_NET_LISTEN, &net) != CW_OK ||
        cw_network_uri(net, self, sizeof(self)) != CW_OK) {
        fprintf(stderr, "test_gw_seq: cannot serve on %s\n", uri);
        return 1;
    }
    snprintf(tmp, sizeof(tmp), "%s.tmp", addr_file);
    f = fopen(tmp, "we");
    if (f == NULL || fprintf(f, "%s\n", self) < 0 || fclose(f) != 0 ||
        rename(tmp, addr_file) != 0) {
        fprintf(stderr, "test_gw_seq: cannot write %s\n", addr_file);
        return 1;
    }
    while (!stop) {
        cw_progress(ctx, 100);
        cw_trigger(ctx, 0, 0, NULL);
    }
    printf("served %llu callers %u out-of-order %llu\n",
           (unsigned long long)served, callers,
           (unsigned long long)out_of_order);
    cw_context_destroy(ctx);
    return out_of_order == 0 ? 0 : 1;
}

struct caller {
    cw_context_t *ctx;
    cw_addr_t *addr;
    uint32_t id;
    uint64_t next, count;
    unsigned inflight, done, failed;
    cw_status_t last_err;
};

static void call_one(struct caller *c);

static void call_cb(cw_handle_t *h, cw_status_t st, void *arg)
{
    struct caller *c = arg;

    c->inflight--;
    if (st == CW_OK) {
        c->done++;
    } else {
        c->failed++;
        c->last_err = st;
    }
    cw_handle_release(h);
    if (c->next < c->count)
        call_one(c);
}

static void call_one(struct caller *c)
{
    cw_handle_t *h;
    cw_status_t st;

    st = cw_handle_create(c->ctx, c->addr, cw_rpc_id("seq"), &h);
    if (st == CW_OK) {
        cw_buf_put_u32(cw_handle_input(h), c->id);
        cw_buf_put_u64(cw_handle_input(h), c->next);
        st = cw_forward(h, 10000, call_cb, c);
        if (st != CW_OK)
            cw_handle_release(h);
    }
    c->next++;
    if (st == CW_OK) {
        c->inflight++;
    } else {
        c->failed++;
        c->last_err = st;
    }
}

static int call(const char *addr, uint32_t id, uint64_t count)
{
    struct caller c = {.id = id, .count = count};

    if (cw_context_create(NULL, &c.ctx) != CW_OK ||
        cw_addr_lookup(c.ctx, addr, &c.addr) != CW_OK) {
        fprintf(stderr, "test_gw_seq: cannot reach %s\n", addr);
        return 1;
    }
    while (c.next < count && c.inflight < WINDOW)
        call_one(&c);
    /* Bounded: every call has a 10 s deadline. */
    while (c.inflight > 0) {
        cw_progress(c.ctx, 100);
        cw_trigger(c.ctx, 0, 0, NULL);
    }
    printf("caller %u done %u failed %u%s%s\n", id, c.done, c.failed,
           c.failed ? " last " : "",
           c.failed ? cw_status_name(c.last_err) : "");
    cw_addr_free(c.addr);
    cw_context_destroy(c.ctx);
    return c.failed == 0 && c.done == count ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "serve") == 0)
        return serve(argv[2], argv[3]);
    if (argc == 5 && strcmp(argv[1], "call") == 0) {
        unsigned long id = strtoul(argv[3], NULL, 10);
        unsigned long long n = strtoull(argv[4], NULL, 10);
        if (id >= MAX_CALLERS || n == 0) {
            fprintf(stderr, "test_gw_seq: ID < %d, COUNT > 0\n", MAX_CALLERS);
            return 2;
        }
        return call(argv[2], (uint32_t)id, n);
    }
    fprintf(stderr, "usage: test_gw_seq serve URI ADDR_FILE | "
                    "call ADDR ID COUNT\n");
    return 2;
}
