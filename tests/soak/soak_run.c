/*
 * The soak client: keeps K RPCs in flight to one server (through a
 * gateway), one of the K slots carrying bulk transfers while there are
 * bulk bytes to move.  Each RPC has the next sequence number of this
 * client; its completion is recorded once per number (a second one is a
 * duplicate), its answer checked against the server's pattern.  At the end
 * it asks the server what it received and compares: a number sent that
 * the server never saw is lost.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "../rpc_test_util.h"
#include "soak.h"

struct slot {
    struct soak_client *cl;
    cw_handle_t *h;
    cw_bulk_t *bulk;
    uint64_t seq, len;
    uint32_t reply_len;
    uint8_t dir; /* 0: an RPC, else SOAK_PULL or SOAK_PUSH */
    bool busy;
};

struct soak_client {
    const struct soak_run_opts *o;
    cw_context_t *ctx;
    cw_addr_t *dst;
    struct slot *slots;
    uint8_t *done; /* completions per sequence number */
    size_t done_cap;
    uint8_t *payload, *bulk_buf;
    uint64_t key, rng, next_seq;
    uint64_t rpcs_sent, bulk_issued; /* bulk bytes asked for so far */
    uint64_t bulk_n_issued;
    /* What this side saw. */
    uint64_t sent, completed, ok, failed, dup, corrupt, bytes;
    uint64_t bulk, bulk_bytes;
    unsigned busy;
    bool warm; /* said so: an RPC and a bulk transfer through */
    cw_status_t first_fail;
};

static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = (*s += 0x9E3779B97F4A7C15ull);

    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* 0 B .. 64 KiB, every power of two as likely as the next (a few bytes
 * as often as 32 KiB and up), 0 and 64 KiB exactly among them. */
static uint32_t pick_size(uint64_t *rng)
{
    unsigned e = (unsigned)(rng_next(rng) % 18);

    if (e == 0)
        return 0;
    if (e == 17)
        return SOAK_MAX_PAYLOAD;
    return (1u << (e - 1)) + (uint32_t)(rng_next(rng) % (1u << (e - 1)));
}

static void slot_free(struct slot *s)
{
    cw_handle_release(s->h);
    cw_bulk_free(s->bulk);
    s->h = NULL;
    s->bulk = NULL;
    s->busy = false;
    s->cl->busy--;
}

static void fail_one(struct soak_client *cl, uint64_t seq, cw_status_t st)
{
    cl->failed++;
    if (cl->failed <= 5)
        fprintf(stderr, "soak client %u: seq %llu ended %s\n", cl->o->id,
                (unsigned long long)seq, cw_status_name(st));
    if (cl->first_fail == CW_OK)
        cl->first_fail = st;
}

static void corrupt_one(struct soak_client *cl, struct slot *s,
                        const char *what)
{
    cl->corrupt++;
    if (cl->corrupt <= 5)
        fprintf(stderr, "soak client %u: seq %llu: %s\n", cl->o->id,
                (unsigned long long)s->seq, what);
}

/* Check an answer; true if it is what the server was to send. */
static bool answer_ok(struct soak_client *cl, struct slot *s)
{
    cw_buf_t *out = cw_handle_output(s->h);
    uint64_t key = 0, seq = 0, check = 0, seed = soak_seed(cl->key, s->seq);
    uint8_t req_ok = 0;
    const void *p = NULL;
    size_t n = 0;

    cw_buf_get_u64(out, &key);
    cw_buf_get_u64(out, &seq);
    cw_buf_get_u8(out, &req_ok);
    if (s->dir == 0)
        cw_buf_get_bytes(out, &p, &n);
    cw_buf_get_u64(out, &check);
    if (cw_buf_error(out) != CW_OK || key != cl->key || seq != s->seq) {
        corrupt_one(cl, s, "answer does not decode or names another RPC");
        return false;
    }
    if (!req_ok) {
        corrupt_one(cl, s,
                    s->dir == 0 ? "the server found the request corrupted"
                                : "the server found the pulled data corrupted");
        return false;
    }
    if (s->dir == 0) {
        if (n != s->reply_len || soak_fnv(p, n) != check ||
            !soak_check(p, n, seed ^ SOAK_REPLY_SALT)) {
            corrupt_one(cl, s, "reply corrupted");
            return false;
        }
        cl->bytes += s->len + n;
        return true;
    }
    seed ^= SOAK_BULK_SALT;
    if ((s->dir == SOAK_PUSH && !soak_check(cl->bulk_buf, s->len, seed)) ||
        soak_fnv(cl->bulk_buf, s->len) != check) {
        corrupt_one(cl, s,
                    s->dir == SOAK_PUSH
                        ? "pushed data corrupted"
                        : "checksum of the pulled data differs");
        return false;
    }
    cl->bulk++;
    cl->bulk_bytes += s->len;
    return true;
}

static void fwd_cb(cw_handle_t *h, cw_status_t st, void *arg)
{
    struct slot *s = arg;
    struct soak_client *cl = s->cl;

    (void)h;
    if (cl->done[s->seq]++ != 0) {
        cl->dup++;
        fprintf(stderr, "soak client %u: seq %llu completed again\n", cl->o->id,
                (unsigned long long)s->seq);
        return;
    }
    cl->completed++;
    if (st != CW_OK)
        fail_one(cl, s->seq, st);
    else if (answer_ok(cl, s))
        cl->ok++;
    /* Every path this client takes through the gateway (its connection,
     * the gateway's to the server, a bulk transfer's) has been used once:
     * soak.sh's warm-up waits for this line from every client. */
    if (!cl->warm && cl->ok > 0 && (cl->o->bulk_bytes == 0 || cl->bulk > 0)) {
        cl->warm = true;
        fprintf(stderr, "soak client %u: warm\n", cl->o->id);
    }
    slot_free(s);
}

/* Start the next RPC (or bulk transfer, @p bulk) in slot @p s. */
static cw_status_t slot_start(struct soak_client *cl, struct slot *s, bool bulk)
{
    const struct soak_run_opts *o = cl->o;
    cw_buf_t *in;
    cw_status_t st;
    uint64_t seed;

    s->seq = cl->next_seq++;
    if (!bulk)
        cl->rpcs_sent++;
    if (!soak_grow(&cl->done, &cl->done_cap, s->seq, 65536))
        return CW_NOMEM;
    seed = soak_seed(cl->key, s->seq);
    st = cw_handle_create(cl->ctx, cl->dst,
                          cw_rpc_id(bulk ? SOAK_BULK : SOAK_RPC), &s->h);
    if (st != CW_OK)
        return st;
    in = cw_handle_input(s->h);
    cw_buf_put_u64(in, cl->key);
    cw_buf_put_u64(in, s->seq);
    if (bulk) {
        struct cw_segment seg;

        s->len =
            o->bulk_min + rng_next(&cl->rng) % (o->bulk_max - o->bulk_min + 1);
        s->dir = cl->bulk_n_issued++ % 2 ? SOAK_PUSH : SOAK_PULL;
        cl->bulk_issued += s->len;
        if (s->dir == SOAK_PULL) {
            soak_fill(cl->bulk_buf, s->len, seed ^ SOAK_BULK_SALT);
            soak_corrupt(cl->bulk_buf, s->len);
        }
        seg.base = cl->bulk_buf;
        seg.len = s->len;
        st = cw_bulk_create(cl->ctx, &seg, 1,
                            s->dir == SOAK_PULL ? CW_BULK_READ_ONLY
                                                : CW_BULK_WRITE_ONLY,
                            &s->bulk);
        if (st != CW_OK)
            return st;
        cw_buf_put_u8(in, s->dir);
        cw_buf_put_u64(in, s->len);
        cw_buf_put_bulk(in, s->bulk);
    } else {
        uint64_t check;

        s->dir = 0;
        s->len = pick_size(&cl->rng);
        s->reply_len = pick_size(&cl->rng);
        soak_fill(cl->payload, s->len, seed);
        check = soak_fnv(cl->payload, s->len);
        soak_corrupt(cl->payload, s->len);
        cw_buf_put_u32(in, s->reply_len);
        cw_buf_put_bytes(in, cl->payload, s->len);
        cw_buf_put_u64(in, check);
    }
    st = cw_buf_error(in);
    if (st != CW_OK)
        return st;
    s->busy = true;
    cl->busy++;
    cl->sent++;
    st = cw_forward(s->h, o->timeout_ms, fwd_cb, s);
    if (st != CW_OK) {
        /* Sent as far as the counts go: it completed, with this error. */
        cl->done[s->seq]++;
        cl->completed++;
        fail_one(cl, s->seq, st);
        slot_free(s);
    }
    return CW_OK;
}

/* Ask the server what it saw from this client (30 s at most). */
static cw_status_t ask_server(struct soak_client *cl, struct soak_seen *sv_p)
{
    struct call w = {0};
    struct soak_seen sv;
    cw_handle_t *h;
    cw_buf_t *out;
    uint64_t t_end = soak_now_ms() + 30000;
    cw_status_t st;

    st = cw_handle_create(cl->ctx, cl->dst, cw_rpc_id(SOAK_REPORT), &h);
    if (st != CW_OK)
        return st;
    cw_buf_put_u64(cw_handle_input(h), cl->key);
    st = cw_forward(h, 20000, call_cb, &w);
    while (st == CW_OK && !w.done && soak_now_ms() < t_end) {
        cw_progress(cl->ctx, 50);
        cw_trigger(cl->ctx, 0, 0, NULL);
    }
    if (st == CW_OK && !w.done) {
        /* The deadline of 20 s has passed: the core must have completed
         * it; cancel, and wait for the callback before releasing. */
        cw_cancel(h);
        while (!w.done) {
            cw_progress(cl->ctx, 50);
            cw_trigger(cl->ctx, 0, 0, NULL);
        }
    }
    if (st == CW_OK)
        st = w.st;
    if (st == CW_OK) {
        out = cw_handle_output(h);
        cw_buf_get_u64(out, &sv.rpcs);
        cw_buf_get_u64(out, &sv.dup);
        cw_buf_get_u64(out, &sv.corrupt);
        cw_buf_get_u64(out, &sv.bytes);
        cw_buf_get_u64(out, &sv.bulk);
        cw_buf_get_u64(out, &sv.bulk_bytes);
        cw_buf_get_u64(out, &sv.bulk_corrupt);
        cw_buf_get_u64(out, &sv.bulk_failed);
        st = cw_buf_error(out);
    }
    cw_handle_release(h);
    if (st == CW_OK)
        *sv_p = sv;
    return st;
}

/* Send until the counts (or the duration) are spent and every RPC has
 * completed, or its deadline and 10 s more have passed. */
static void load(struct soak_client *cl)
{
    const struct soak_run_opts *o = cl->o;
    uint64_t t0 = soak_now_ms(), t_hard = 0, t_look = 0;
    bool stopped = false;

    for (;;) {
        uint64_t now = soak_now_ms();
        bool in_time;

        /* The stop file, looked for every 50 ms at most. */
        if (o->stop_file != NULL && !stopped && now >= t_look + 50) {
            t_look = now;
            stopped = access(o->stop_file, F_OK) == 0;
        }
        in_time = !stopped &&
                  (o->duration_s == 0 || now < t0 + o->duration_s * 1000ull);
        bool more_rpcs = in_time && (o->rpcs == 0 || cl->rpcs_sent < o->rpcs);
        bool more_bulk = in_time && cl->bulk_issued < o->bulk_bytes;

        for (unsigned i = 0; i < o->inflight && (more_rpcs || more_bulk); i++) {
            struct slot *s = &cl->slots[i];
            bool bulk = i == 0 && more_bulk;
            cw_status_t st;

            if (s->busy || (!bulk && !more_rpcs))
                continue;
            st = slot_start(cl, s, bulk);
            if (st != CW_OK) {
                /* Not sent: a local failure, counted as such. */
                cl->sent++;
                if (s->seq < cl->done_cap)
                    cl->done[s->seq]++;
                cl->completed++;
                fail_one(cl, s->seq, st);
                cw_handle_release(s->h);
                cw_bulk_free(s->bulk);
                s->h = NULL;
                s->bulk = NULL;
            }
            more_rpcs = in_time && (o->rpcs == 0 || cl->rpcs_sent < o->rpcs);
            more_bulk = in_time && cl->bulk_issued < o->bulk_bytes;
        }
        if (!more_rpcs && !more_bulk) {
            if (cl->busy == 0)
                return;
            if (t_hard == 0)
                t_hard = now + o->timeout_ms + 10000;
            else if (now > t_hard)
                return;
        }
        cw_progress(cl->ctx, 10);
        cw_trigger(cl->ctx, 0, 0, NULL);
    }
}

int soak_run(const struct soak_run_opts *o)
{
    struct soak_client cl = {.o = o,
                             .rng = o->seed * 0x2545F4914F6CDD1Dull + o->id};
    struct soak_seen sv = {0};
    uint64_t t0, ms, lost, unanswered;
    cw_status_t st, rst;
    bool pass;
    int rc = 1;

    if (getrandom(&cl.key, sizeof(cl.key), 0) != sizeof(cl.key)) {
        perror("getrandom");
        return 1;
    }
    cl.slots = calloc(o->inflight, sizeof(*cl.slots));
    cl.payload = malloc(SOAK_MAX_PAYLOAD);
    /* Cleared: over shm another process may fill it (process_vm_writev),
     * which memcheck in this one cannot see (README.md, "Memcheck"). */
    cl.bulk_buf = o->bulk_bytes > 0 ? calloc(1, o->bulk_max) : NULL;
    if (cl.slots == NULL || cl.payload == NULL ||
        (o->bulk_bytes > 0 && cl.bulk_buf == NULL)) {
        fprintf(stderr, "soak client %u: out of memory\n", o->id);
        goto err_free;
    }
    for (unsigned i = 0; i < o->inflight; i++)
        cl.slots[i].cl = &cl;
    st = cw_context_create(NULL, &cl.ctx);
    if (st == CW_OK)
        st = cw_addr_lookup(cl.ctx, o->target, &cl.dst);
    if (st != CW_OK) {
        fprintf(stderr, "soak client %u: %s: %s\n", o->id, o->target,
                cw_status_name(st));
        goto err_destroy;
    }
    t0 = soak_now_ms();
    load(&cl);
    ms = soak_now_ms() - t0;
    unanswered = cl.sent - cl.completed;
    if (cl.busy > 0) {
        /* Deadline passed without a completion: cancel, and count only
         * what completed in time (the cancels' callbacks count no more). */
        fprintf(stderr,
                "soak client %u: %llu RPCs without a completion "
                "%llu ms after their deadline\n",
                o->id, (unsigned long long)unanswered,
                (unsigned long long)(o->timeout_ms + 10000));
        for (unsigned i = 0; i < o->inflight; i++)
            if (cl.slots[i].busy)
                cw_cancel(cl.slots[i].h);
        while (cl.busy > 0) {
            cw_progress(cl.ctx, 50);
            cw_trigger(cl.ctx, 0, 0, NULL);
        }
    }
    rst = ask_server(&cl, &sv);
    lost = cl.sent > sv.rpcs ? cl.sent - sv.rpcs : 0;
    pass = rst == CW_OK && cl.failed == 0 && unanswered == 0 && lost == 0 &&
           sv.rpcs == cl.sent && cl.dup == 0 && sv.dup == 0 &&
           cl.corrupt == 0 && sv.corrupt == 0 && sv.bulk_corrupt == 0 &&
           sv.bulk_failed == 0 && sv.bytes == cl.bytes && sv.bulk == cl.bulk &&
           sv.bulk_bytes == cl.bulk_bytes;
    printf(
        "soak-client id=%u key=%016llx ms=%llu sent=%llu ok=%llu failed=%llu "
        "first_fail=%s unanswered=%llu dup=%llu corrupt=%llu bytes=%llu "
        "bulk=%llu bulk_bytes=%llu report=%s srv_rpcs=%llu srv_dup=%llu "
        "srv_corrupt=%llu srv_bytes=%llu srv_bulk=%llu srv_bulk_bytes=%llu "
        "srv_bulk_corrupt=%llu srv_bulk_failed=%llu lost=%llu result=%s\n",
        o->id, (unsigned long long)cl.key, (unsigned long long)ms,
        (unsigned long long)cl.sent, (unsigned long long)cl.ok,
        (unsigned long long)cl.failed, cw_status_name(cl.first_fail),
        (unsigned long long)unanswered, (unsigned long long)cl.dup,
        (unsigned long long)cl.corrupt, (unsigned long long)cl.bytes,
        (unsigned long long)cl.bulk, (unsigned long long)cl.bulk_bytes,
        cw_status_name(rst), (unsigned long long)sv.rpcs,
        (unsigned long long)sv.dup, (unsigned long long)sv.corrupt,
        (unsigned long long)sv.bytes, (unsigned long long)sv.bulk,
        (unsigned long long)sv.bulk_bytes, (unsigned long long)sv.bulk_corrupt,
        (unsigned long long)sv.bulk_failed, (unsigned long long)lost,
        pass ? "pass" : "FAIL");
    fflush(stdout);
    rc = pass ? 0 : 1;
err_destroy:
    cw_addr_free(cl.dst);
    cw_context_destroy(cl.ctx);
err_free:
    free(cl.slots);
    free(cl.payload);
    free(cl.bulk_buf);
    free(cl.done);
    return rc;
}
