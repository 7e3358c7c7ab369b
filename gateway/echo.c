/*
 * Echo service and synchronous echo call (see echo.h).
 */
#include "echo.h"

#include <causeway/log.h>

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct echo_delayed {
    struct echo_delayed *next;
    cw_handle_t *h;
    uint64_t due_ns;
};

struct echo_state {
    unsigned delay_ms;
    struct echo_delayed *delayed;
    uint64_t served, canceled;
};

/* One service per process is all the tools need. */
static struct echo_state echo_state;

static void echo_answer(cw_handle_t *h)
{
    echo_state.served++;
    cw_buf_t *in = cw_handle_input(h), *out = cw_handle_output(h);
    const void *p = NULL;
    size_t len = 0;
    cw_status_t st = cw_buf_get_bytes(in, &p, &len);

    if (st == CW_OK)
        st = cw_buf_put_bytes(out, p, len);
    st = cw_respond(h, st, NULL, NULL);
    if (st != CW_OK)
        CW_LOG_RL(CW_LOG_WARN, "echo", "cw_respond() failed: %s",
                  cw_status_str(st));
    cw_handle_release(h);
}

static void echo_handler(cw_handle_t *h, void *arg)
{
    struct echo_state *es = arg;
    struct echo_delayed *d;

    if (es->delay_ms == 0) {
        echo_answer(h);
        return;
    }
    d = malloc(sizeof(*d));
    if (d == NULL) {
        (void)cw_respond(h, CW_NOMEM, NULL, NULL);
        cw_handle_release(h);
        return;
    }
    d->h = h;
    d->due_ns = cw_now_ns() + es->delay_ms * 1000000ull;
    d->next = es->delayed;
    es->delayed = d;
}

static void ping_handler(cw_handle_t *h, void *arg)
{
    (void)arg;
    (void)cw_respond(h, CW_OK, NULL, NULL);
    cw_handle_release(h);
}

cw_status_t cw_echo_register(cw_context_t *ctx, unsigned delay_ms)
{
    cw_status_t st;

    echo_state.delay_ms = delay_ms;
    st = cw_rpc_register(ctx, CW_ECHO_RPC, echo_handler, &echo_state, NULL,
                         NULL);
    if (st == CW_OK)
        st = cw_rpc_register(ctx, "causeway.ping", ping_handler, NULL, NULL,
                             NULL);
    return st;
}

void cw_echo_serve(cw_context_t *ctx, unsigned ms)
{
    uint64_t end = cw_now_ns() + ms * 1000000ull;

    do {
        struct echo_delayed **pp = &echo_state.delayed;
        uint64_t now;

        cw_progress(ctx, echo_state.delayed ? 1 : 5);
        cw_trigger(ctx, 0, 0, NULL);
        now = cw_now_ns();
        while (*pp != NULL) {
            struct echo_delayed *d = *pp;
            if (now < d->due_ns && cw_handle_canceled(d->h)) {
                /* The caller gave up (cancel propagated to us): stop
                 * early; the answer is not sent. */
                *pp = d->next;
                echo_state.canceled++;
                (void)cw_respond(d->h, CW_CANCELED, NULL, NULL);
                cw_handle_release(d->h);
                free(d);
            } else if (now >= d->due_ns) {
                *pp = d->next;
                echo_answer(d->h);
                free(d);
            } else {
                pp = &d->next;
            }
        }
    } while (cw_now_ns() < end);
}

void cw_echo_counts(uint64_t *served_p, uint64_t *canceled_p)
{
    *served_p = echo_state.served;
    *canceled_p = echo_state.canceled;
}

struct echo_call {
    bool done;
    cw_status_t st;
};

static void echo_call_cb(cw_handle_t *h, cw_status_t st, void *arg)
{
    struct echo_call *c = arg;

    (void)h;
    c->st = st;
    c->done = true;
}

static void echo_fill(uint8_t *p, size_t len, unsigned seed)
{
    uint32_t x = seed * 2654435761u + 1;

    for (size_t i = 0; i < len; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (uint8_t)(x >> 16);
    }
}

cw_status_t cw_echo_call(cw_context_t *ctx, cw_addr_t *dest, size_t len,
                         unsigned seed, uint64_t timeout_ms, uint64_t *rtt_ns_p)
{
    struct echo_call c = {false, CW_OK};
    uint8_t *buf = malloc(len ? len : 1);
    cw_handle_t *h = NULL;
    const void *p;
    size_t plen;
    uint64_t t0;
    cw_status_t st;

    if (buf == NULL)
        return CW_NOMEM;
    echo_fill(buf, len, seed);
    st = cw_handle_create(ctx, dest, cw_rpc_id(CW_ECHO_RPC), &h);
    if (st != CW_OK)
        goto out;
    st = cw_buf_put_bytes(cw_handle_input(h), buf, len);
    if (st != CW_OK)
        goto out;
    t0 = cw_now_ns();
    st = cw_forward(h, timeout_ms, echo_call_cb, &c);
    if (st != CW_OK)
        goto out;
    while (!c.done) {
        cw_progress(ctx, 5);
        cw_trigger(ctx, 0, 0, NULL);
    }
    if (rtt_ns_p != NULL)
        *rtt_ns_p = cw_now_ns() - t0;
    st = c.st;
    if (st != CW_OK)
        goto out;
    st = cw_buf_get_bytes(cw_handle_output(h), &p, &plen);
    if (st == CW_OK && (plen != len || (len && memcmp(p, buf, len) != 0)))
        st = CW_PROTOCOL;
out:
    cw_handle_release(h);
    free(buf);
    return st;
}
