/*
 * The soak server: checks every request against the pattern of its key and
 * sequence number, counts per client what it received (a bitmap of the
 * sequence numbers: the second arrival of one is a duplicate), answers
 * with a pattern of its own, and runs the bulk transfers the clients ask
 * for (several at once, each completed from its callback).  At SIGTERM it
 * cancels what is still running, prints its totals and frees everything,
 * so that the sanitizers' leak check at exit means something.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "soak.h"

#define MAX_CLIENTS 256

struct client {
    uint64_t key;
    uint8_t *seen; /* bit per sequence number */
    size_t seen_bytes;
    struct soak_seen s;
};

/* One bulk transfer in progress; on the list until it answered. */
struct job {
    struct job *next, *prev;
    struct client *c;
    cw_handle_t *h;
    cw_bulk_t *rb, *lb;
    cw_bulk_op_t *op;
    void *buf;
    uint64_t seq, len, seed;
    uint8_t dir;
};

static struct client g_clients[MAX_CLIENTS];
static unsigned g_nclients;
static uint64_t g_malformed; /* requests that did not decode */
static struct job g_jobs = {.next = &g_jobs, .prev = &g_jobs};
static uint8_t g_reply[SOAK_MAX_PAYLOAD];
static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

static struct client *client_of(uint64_t key, bool add)
{
    for (unsigned i = 0; i < g_nclients; i++)
        if (g_clients[i].key == key)
            return &g_clients[i];
    if (!add || g_nclients == MAX_CLIENTS)
        return NULL;
    g_clients[g_nclients].key = key;
    return &g_clients[g_nclients++];
}

/* Record the arrival of @p seq; false if the bitmap cannot grow. */
static bool client_saw(struct client *c, uint64_t seq)
{
    size_t byte = seq / 8;

    if (!soak_grow(&c->seen, &c->seen_bytes, byte, 4096))
        return false;
    if (c->seen[byte] & (1u << (seq % 8))) {
        c->s.dup++;
    } else {
        c->seen[byte] |= (uint8_t)(1u << (seq % 8));
        c->s.rpcs++;
    }
    return true;
}

static void answer(cw_handle_t *h, cw_status_t st)
{
    cw_respond(h, st, NULL, NULL);
    cw_handle_release(h);
}

static void h_rpc(cw_handle_t *h, void *arg)
{
    cw_buf_t *in = cw_handle_input(h), *out = cw_handle_output(h);
    uint64_t key = 0, seq = 0, check = 0, seed;
    uint32_t reply_len = 0;
    const void *p = NULL;
    size_t n = 0;
    struct client *c;
    bool ok;

    (void)arg;
    cw_buf_get_u64(in, &key);
    cw_buf_get_u64(in, &seq);
    cw_buf_get_u32(in, &reply_len);
    cw_buf_get_bytes(in, &p, &n);
    cw_buf_get_u64(in, &check);
    if (cw_buf_error(in) != CW_OK || reply_len > SOAK_MAX_PAYLOAD) {
        g_malformed++;
        answer(h, cw_buf_error(in) != CW_OK ? cw_buf_error(in) : CW_RANGE);
        return;
    }
    c = client_of(key, true);
    if (c == NULL || !client_saw(c, seq)) {
        answer(h, CW_NOMEM);
        return;
    }
    seed = soak_seed(key, seq);
    ok = soak_fnv(p, n) == check && soak_check(p, n, seed);
    if (!ok) {
        c->s.corrupt++;
        fprintf(stderr,
                "soak server: client %016llx seq %llu: request of "
                "%zu bytes corrupted\n",
                (unsigned long long)key, (unsigned long long)seq, n);
    }
    c->s.bytes += n + reply_len;
    soak_fill(g_reply, reply_len, seed ^ SOAK_REPLY_SALT);
    cw_buf_put_u64(out, key);
    cw_buf_put_u64(out, seq);
    cw_buf_put_u8(out, ok);
    check = soak_fnv(g_reply, reply_len);
    soak_corrupt(g_reply, reply_len);
    cw_buf_put_bytes(out, g_reply, reply_len);
    cw_buf_put_u64(out, check);
    answer(h, cw_buf_error(out));
}

static void job_end(struct job *j, cw_status_t st)
{
    cw_buf_t *out = cw_handle_output(j->h);
    bool ok = false;

    if (st == CW_OK) {
        ok = j->dir == SOAK_PUSH || soak_check(j->buf, j->len, j->seed);
        j->c->s.bulk++;
        j->c->s.bulk_bytes += j->len;
        if (!ok) {
            j->c->s.bulk_corrupt++;
            fprintf(stderr,
                    "soak server: client %016llx seq %llu: pulled "
                    "%llu bytes corrupted\n",
                    (unsigned long long)j->c->key, (unsigned long long)j->seq,
                    (unsigned long long)j->len);
        }
        cw_buf_put_u64(out, j->c->key);
        cw_buf_put_u64(out, j->seq);
        cw_buf_put_u8(out, ok);
        cw_buf_put_u64(out, soak_fnv(j->buf, j->len));
        st = cw_buf_error(out);
    } else {
        j->c->s.bulk_failed++;
        fprintf(stderr,
                "soak server: client %016llx seq %llu: %s of %llu "
                "bytes ended %s\n",
                (unsigned long long)j->c->key, (unsigned long long)j->seq,
                j->dir == SOAK_PULL ? "pull" : "push",
                (unsigned long long)j->len, cw_status_name(st));
    }
    answer(j->h, st);
    j->prev->next = j->next;
    j->next->prev = j->prev;
    cw_bulk_free(j->rb);
    cw_bulk_free(j->lb);
    free(j->buf);
    free(j);
}

static void job_cb(cw_status_t st, void *arg)
{
    struct job *j = arg;

    j->op = NULL;
    job_end(j, st);
}

static void h_bulk(cw_handle_t *h, void *arg)
{
    cw_context_t *ctx = arg;
    cw_buf_t *in = cw_handle_input(h);
    uint64_t key = 0, seq = 0, len = 0;
    uint8_t dir = 0;
    cw_bulk_t *rb = NULL;
    struct cw_segment seg;
    struct client *c;
    struct job *j;
    cw_status_t st;

    cw_buf_get_u64(in, &key);
    cw_buf_get_u64(in, &seq);
    cw_buf_get_u8(in, &dir);
    cw_buf_get_u64(in, &len);
    cw_buf_get_bulk(in, &rb);
    st = cw_buf_error(in);
    if (st == CW_OK && ((dir != SOAK_PULL && dir != SOAK_PUSH) || len == 0 ||
                        len > cw_bulk_size(rb)))
        st = CW_RANGE;
    if (st != CW_OK) {
        g_malformed++;
        cw_bulk_free(rb);
        answer(h, st);
        return;
    }
    c = client_of(key, true);
    j = calloc(1, sizeof(*j));
    if (c == NULL || j == NULL || !client_saw(c, seq) ||
        (j->buf = calloc(1, len)) == NULL) { /* cleared: see soak_run.c */
        free(j);
        cw_bulk_free(rb);
        answer(h, CW_NOMEM);
        return;
    }
    j->c = c;
    j->h = h;
    j->rb = rb;
    j->seq = seq;
    j->len = len;
    j->dir = dir;
    j->seed = soak_seed(key, seq) ^ SOAK_BULK_SALT;
    j->next = &g_jobs;
    j->prev = g_jobs.prev;
    g_jobs.prev->next = j;
    g_jobs.prev = j;
    if (dir == SOAK_PUSH) {
        soak_fill(j->buf, len, j->seed);
        soak_corrupt(j->buf, len);
    }
    seg.base = j->buf;
    seg.len = len;
    st = cw_bulk_create(ctx, &seg, 1, CW_BULK_READ_WRITE, &j->lb);
    if (st == CW_OK)
        st = cw_bulk_transfer(
            ctx, dir == SOAK_PULL ? CW_BULK_PULL : CW_BULK_PUSH,
            cw_handle_source(h), rb, 0, j->lb, 0, len, job_cb, j, &j->op);
    if (st != CW_OK)
        job_end(j, st);
}

static void h_report(cw_handle_t *h, void *arg)
{
    cw_buf_t *in = cw_handle_input(h), *out = cw_handle_output(h);
    struct soak_seen none = {0};
    const struct soak_seen *s;
    struct client *c;
    uint64_t key = 0;

    (void)arg;
    if (cw_buf_get_u64(in, &key) != CW_OK) {
        g_malformed++;
        answer(h, cw_buf_error(in));
        return;
    }
    c = client_of(key, false);
    s = c != NULL ? &c->s : &none;
    cw_buf_put_u64(out, s->rpcs);
    cw_buf_put_u64(out, s->dup);
    cw_buf_put_u64(out, s->corrupt);
    cw_buf_put_u64(out, s->bytes);
    cw_buf_put_u64(out, s->bulk);
    cw_buf_put_u64(out, s->bulk_bytes);
    cw_buf_put_u64(out, s->bulk_corrupt);
    cw_buf_put_u64(out, s->bulk_failed);
    answer(h, cw_buf_error(out));
}

static void print_totals(void)
{
    struct soak_seen t = {0};

    for (unsigned i = 0; i < g_nclients; i++) {
        const struct soak_seen *s = &g_clients[i].s;
        t.rpcs += s->rpcs;
        t.dup += s->dup;
        t.corrupt += s->corrupt;
        t.bytes += s->bytes;
        t.bulk += s->bulk;
        t.bulk_bytes += s->bulk_bytes;
        t.bulk_corrupt += s->bulk_corrupt;
        t.bulk_failed += s->bulk_failed;
    }
    printf("soak-server clients=%u rpcs=%llu dup=%llu corrupt=%llu bytes=%llu "
           "bulk=%llu bulk_bytes=%llu bulk_corrupt=%llu bulk_failed=%llu "
           "malformed=%llu\n",
           g_nclients, (unsigned long long)t.rpcs, (unsigned long long)t.dup,
           (unsigned long long)t.corrupt, (unsigned long long)t.bytes,
           (unsigned long long)t.bulk, (unsigned long long)t.bulk_bytes,
           (unsigned long long)t.bulk_corrupt,
           (unsigned long long)t.bulk_failed, (unsigned long long)g_malformed);
    fflush(stdout);
}

int soak_serve(const char *uri, const char *addr_file)
{
    struct sigaction sa = {.sa_handler = on_signal};
    cw_context_t *ctx = NULL;
    cw_network_t *net;
    char self[CW_URI_MAX];
    cw_status_t st;
    uint64_t t_end;
    FILE *f;
    int rc = 1;

    st = cw_context_create(NULL, &ctx);
    if (st == CW_OK)
        st = cw_network_open(ctx, uri, CW_NET_LISTEN, &net);
    if (st == CW_OK)
        st = cw_network_uri(net, self, sizeof(self));
    if (st == CW_OK)
        st = cw_rpc_register(ctx, SOAK_RPC, h_rpc, NULL, NULL, NULL);
    if (st == CW_OK)
        st = cw_rpc_register(ctx, SOAK_BULK, h_bulk, ctx, NULL, NULL);
    if (st == CW_OK)
        st = cw_rpc_register(ctx, SOAK_REPORT, h_report, NULL, NULL, NULL);
    if (st != CW_OK) {
        fprintf(stderr, "soak server: serving %s: %s\n", uri,
                cw_status_name(st));
        goto err_destroy;
    }
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    f = fopen(addr_file, "w");
    if (f == NULL) {
        perror(addr_file);
        goto err_destroy;
    }
    fprintf(f, "%s\n", self);
    if (fclose(f) != 0) {
        perror(addr_file);
        goto err_destroy;
    }
    while (!g_stop) {
        cw_progress(ctx, 100);
        cw_trigger(ctx, 0, 0, NULL);
    }
    /* Transfers still running (a client that died): cancel them and let
     * their callbacks answer and free them, 10 s at most. */
    for (struct job *j = g_jobs.next; j != &g_jobs; j = j->next)
        if (j->op != NULL)
            cw_bulk_cancel(j->op);
    t_end = soak_now_ms() + 10000;
    while (g_jobs.next != &g_jobs && soak_now_ms() < t_end) {
        cw_progress(ctx, 50);
        cw_trigger(ctx, 0, 0, NULL);
    }
    rc = g_jobs.next == &g_jobs ? 0 : 1;
    if (rc != 0)
        fprintf(stderr, "soak server: bulk transfers still running 10 s "
                        "after their cancel\n");
    print_totals();
err_destroy:
    cw_context_destroy(ctx);
    for (unsigned i = 0; i < g_nclients; i++)
        free(g_clients[i].seen);
    return rc;
}
