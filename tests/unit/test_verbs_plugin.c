/*
 * na-verbs plugin on the fake device: credit flow (no RNR under a sender
 * flood), registration cache hits and invalidation, QP error teardown
 * while other connections carry on, peer death in another process.  The
 * plugin is linked in and registered directly so the test can read the
 * fake device's counters and the plugin's own statistics.
 */
#include <causeway/log.h>
#include <causeway/na.h>

#include <dlfcn.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>

#include <cmocka.h>

#include "vb.h"

#define WAIT_MS 10000u
#define URI     "verbs://fake0:1/127.0.0.1:0"

extern const struct cw_na_plugin cw_na_plugin_entry;

/* The fake device module the plugin loads (CAUSEWAY_VERBS_FAKE): the test
 * holds its own reference for the counters and to wrap its ops. */
static const struct vb_fake_module *fake_mod;

static void fake_stats(struct vb_fake_stats *st)
{
    fake_mod->stats_get(st);
}

struct done {
    int calls;
    cw_status_t status;
    size_t len;
    uint32_t tag;
    cw_na_addr_t *source;
};

static void done_cb(const struct cw_na_cb_info *info)
{
    struct done *d = info->arg;
    d->calls++;
    d->status = info->status;
    if (info->type == CW_NA_OP_RECV_UNEXPECTED) {
        d->len = info->u.recv_unexpected.len;
        d->tag = info->u.recv_unexpected.tag;
        d->source = info->u.recv_unexpected.source;
    } else if (info->type == CW_NA_OP_RECV_EXPECTED) {
        d->len = info->u.recv_expected.len;
    }
}

/* The plugin's class behind a cw_na_t: the core keeps it private, so go
 * through a tiny accessor that only this test uses.  Per thread: the
 * threads of test_threads open instances through the spy at once. */
static _Thread_local cw_na_class_t *last_cls;
static cw_status_t (*real_init)(const struct cw_na_host *,
                                const struct cw_na_init_info *,
                                cw_na_class_t **);
static cw_status_t spy_init(const struct cw_na_host *host,
                            const struct cw_na_init_info *info,
                            cw_na_class_t **cls_p)
{
    cw_status_t st = real_init(host, info, cls_p);
    if (st == CW_OK)
        last_cls = *cls_p;
    return st;
}
static struct cw_na_ops spy_ops;
static struct cw_na_plugin spy_plugin;

static cw_na_t *open_na(const char *uri, cw_na_class_t **cls_p)
{
    cw_na_t *na = NULL;
    last_cls = NULL;
    assert_int_equal(cw_na_open(uri, CW_NA_LISTEN, NULL, &na), CW_OK);
    if (cls_p)
        *cls_p = last_cls;
    return na;
}

static cw_na_addr_t *lookup_self_of(cw_na_t *from, cw_na_t *to)
{
    cw_na_addr_t *self, *a;
    char uri[256];
    assert_int_equal(cw_na_addr_self(to, &self), CW_OK);
    assert_int_equal(cw_na_addr_to_string(to, self, uri, sizeof(uri)), CW_OK);
    cw_na_addr_free(to, self);
    assert_int_equal(cw_na_addr_lookup(from, uri, &a), CW_OK);
    return a;
}

static bool wait_all(cw_na_t **nas, size_t nn, struct done *const *ds, size_t n,
                     unsigned ms)
{
    uint64_t deadline = cw_now_ns() + (uint64_t)ms * 1000000ull;
    for (;;) {
        size_t c = 0;
        for (size_t i = 0; i < n; i++)
            c += ds[i]->calls > 0;
        if (c == n)
            return true;
        if (cw_now_ns() > deadline)
            return false;
        for (size_t i = 0; i < nn; i++)
            cw_na_progress(nas[i], 0, NULL);
    }
}

/* ---------------------------------------------------------------------- */

#define FLOOD 3000

/* A sender that posts far more than the receiver's grant while the
 * receiver does not progress: credits must hold the sender back, and the
 * fake device must never see a SEND without a posted receive. */
static void test_credit_flood(void **state)
{
    cw_na_class_t *ca, *cb;
    cw_na_t *a = open_na(URI, &ca), *b = open_na(URI, &cb);
    cw_na_addr_t *b_at_a = lookup_self_of(a, b);
    cw_na_t *both[2] = {a, b};
    static uint32_t out[FLOOD];
    static struct done s[FLOOD];
    struct vb_fake_stats f0, f1;
    struct vb_stats sa, sb;
    uint32_t in[4];
    uint32_t next = 0;
    struct done r = {0};
    uint64_t deadline;

    /* Connect first (the receiver must accept), then stop the receiver. */
    r = (struct done){0};
    s[0] = (struct done){0};
    out[0] = 0;
    assert_int_equal(
        cw_na_msg_recv_unexpected(b, in, sizeof(in), done_cb, &r, NULL), CW_OK);
    assert_int_equal(cw_na_msg_send_unexpected(a, &out[0], sizeof(out[0]),
                                               b_at_a, 1, done_cb, &s[0], NULL),
                     CW_OK);
    assert_true(wait_all(both, 2, (struct done *[]){&r, &s[0]}, 2, WAIT_MS));
    cw_na_addr_free(b, r.source);
    fake_stats(&f0);
    memset(s, 0, sizeof(s));
    for (uint32_t i = 0; i < FLOOD; i++) {
        out[i] = i;
        assert_int_equal(cw_na_msg_send_unexpected(a, &out[i], sizeof(out[i]),
                                                   b_at_a, 1, done_cb, &s[i],
                                                   NULL),
                         CW_OK);
    }
    /* Only the sender progresses for a while: it must stall on credits. */
    for (int i = 0; i < 200; i++)
        cw_na_progress(a, 0, NULL);
    vb_class_stats(ca, &sa);
    assert_true(sa.credit_stalls > 0);
    /* Now the receiver takes them one at a time, in order. */
    deadline = cw_now_ns() + 30ull * 1000000000ull;
    while (next < FLOOD && cw_now_ns() < deadline) {
        r = (struct done){0};
        assert_int_equal(
            cw_na_msg_recv_unexpected(b, in, sizeof(in), done_cb, &r, NULL),
            CW_OK);
        assert_true(wait_all(both, 2, (struct done *[]){&r}, 1, WAIT_MS));
        assert_int_equal(r.status, CW_OK);
        assert_int_equal(r.len, sizeof(uint32_t));
        assert_int_equal(in[0], next);
        cw_na_addr_free(b, r.source);
        next++;
    }
    assert_int_equal(next, FLOOD);
    struct done *last[1] = {&s[FLOOD - 1]};
    assert_true(wait_all(both, 2, last, 1, WAIT_MS));
    for (int i = 0; i < FLOOD; i++) {
        assert_int_equal(s[i].calls, 1);
        assert_int_equal(s[i].status, CW_OK);
    }
    fake_stats(&f1);
    vb_class_stats(cb, &sb);
    vb_class_stats(ca, &sa);
    print_message("# flood %d: credit stalls %llu, credit msgs a=%llu b=%llu, "
                  "rnr naks %llu\n",
                  FLOOD, (unsigned long long)sa.credit_stalls,
                  (unsigned long long)sa.credit_msgs,
                  (unsigned long long)sb.credit_msgs,
                  (unsigned long long)(f1.rnr_naks - f0.rnr_naks));
    assert_true(sb.credit_msgs > 0);
    assert_int_equal(f1.rnr_naks - f0.rnr_naks, 0);
    assert_int_equal(f1.rnr_retry_exc - f0.rnr_retry_exc, 0);
    cw_na_addr_free(a, b_at_a);
    cw_na_close(a);
    cw_na_close(b);
}

/* Fewer receives posted than messages sent, both sides progressing. */
static void test_order_few_recvs(void **state)
{
    cw_na_t *a = open_na(URI, NULL), *b = open_na(URI, NULL);
    cw_na_addr_t *b_at_a = lookup_self_of(a, b);
    static uint32_t out[200];
    static struct done s[200];
    uint32_t in[8][4];
    struct done r[8] = {{0}};
    uint32_t next = 0;
    uint64_t deadline = cw_now_ns() + 20ull * 1000000000ull;

    memset(s, 0, sizeof(s));
    for (int i = 0; i < 8; i++)
        assert_int_equal(cw_na_msg_recv_unexpected(b, in[i], sizeof(in[i]),
                                                   done_cb, &r[i], NULL),
                         CW_OK);
    for (uint32_t i = 0; i < 200; i++) {
        out[i] = i;
        assert_int_equal(cw_na_msg_send_unexpected(a, &out[i], sizeof(out[i]),
                                                   b_at_a, 7, done_cb, &s[i],
                                                   NULL),
                         CW_OK);
    }
    while (next < 200 && cw_now_ns() < deadline) {
        cw_na_progress(a, 0, NULL);
        cw_na_progress(b, 0, NULL);
        for (bool again = true; again;) {
            again = false;
            for (int i = 0; i < 8; i++) {
                if (r[i].calls == 0 || in[i][0] != next)
                    continue;
                next++;
                cw_na_addr_free(b, r[i].source);
                r[i] = (struct done){0};
                assert_int_equal(
                    cw_na_msg_recv_unexpected(b, in[i], sizeof(in[i]), done_cb,
                                              &r[i], NULL),
                    CW_OK);
                again = true;
            }
        }
    }
    assert_int_equal(next, 200);
    uint64_t until = cw_now_ns() + 20000000ull;
    while (cw_now_ns() < until) {
        cw_na_progress(a, 0, NULL);
        cw_na_progress(b, 0, NULL);
    }
    int missing = 0, first = -1;
    for (int i = 0; i < 200; i++)
        if (s[i].calls != 1) {
            missing++;
            if (first < 0)
                first = i;
        }
    if (missing)
        print_message("# sends not completed: %d (first %d)\n", missing, first);
    assert_int_equal(missing, 0);
    cw_na_addr_free(a, b_at_a);
    cw_na_close(a);
    cw_na_close(b);
}

/* Registration cache: ranges inside a live registration with enough
 * access reuse its MR; the MR goes away with the last handle, and memory
 * registered again after that gets a fresh MR and fresh keys. */
static void test_rcache(void **state)
{
    cw_na_class_t *ca;
    cw_na_t *a = open_na(URI, &ca), *b = open_na(URI, NULL);
    cw_na_addr_t *b_at_a = lookup_self_of(a, b);
    cw_na_t *both[2] = {a, b};
    const size_t len = 1 << 16;
    char *buf = malloc(len), *dst = malloc(len);
    struct vb_fake_stats f0, f;
    struct vb_stats s0, s;
    cw_na_mem_t *big, *same, *inner, *rw, *remote, *local, *again;
    uint8_t ser[256], ser2[256];

    assert_non_null(buf);
    assert_non_null(dst);
    fake_stats(&f0);
    vb_class_stats(ca, &s0);
    struct cw_na_segment sb = {buf, len}, si = {buf + 4096, 4096};
    /* The same range and access again: a hit.  A range inside it: its
     * own MR, so its rkey reaches no further than the handle. */
    assert_int_equal(cw_na_mem_register(a, &sb, 1, CW_NA_MEM_READ, &big),
                     CW_OK);
    assert_int_equal(cw_na_mem_register(a, &sb, 1, CW_NA_MEM_READ, &same),
                     CW_OK);
    assert_int_equal(cw_na_mem_register(a, &si, 1, CW_NA_MEM_READ, &inner),
                     CW_OK);
    fake_stats(&f);
    vb_class_stats(ca, &s);
    assert_int_equal(f.mrs_live - f0.mrs_live, 2);
    assert_int_equal(s.rcache_misses - s0.rcache_misses, 2);
    assert_int_equal(s.rcache_hits - s0.rcache_hits, 1);
    /* More access than the cached MR has: a new registration. */
    assert_int_equal(
        cw_na_mem_register(a, &si, 1, CW_NA_MEM_READ | CW_NA_MEM_WRITE, &rw),
        CW_OK);
    fake_stats(&f);
    assert_int_equal(f.mrs_live - f0.mrs_live, 3);
    /* The second handle keeps the big MR alive. */
    cw_na_mem_release(a, big);
    fake_stats(&f);
    assert_int_equal(f.mrs_live - f0.mrs_live, 3);
    cw_na_mem_release(a, same);
    fake_stats(&f);
    assert_int_equal(f.mrs_live - f0.mrs_live, 2);
    /* B reads through A's inner handle. */
    for (size_t i = 0; i < len; i++)
        buf[i] = (char)(i * 3);
    size_t n = cw_na_mem_serialize_size(a, inner);
    assert_true(n <= sizeof(ser));
    assert_int_equal(cw_na_mem_serialize(a, ser, n, inner), CW_OK);
    assert_int_equal(cw_na_mem_deserialize(b, ser, n, &remote), CW_OK);
    struct cw_na_segment sd = {dst, 4096};
    assert_int_equal(cw_na_mem_register(b, &sd, 1, 0, &local), CW_OK);
    cw_na_addr_t *a_at_b = lookup_self_of(b, a);
    struct done g = {0};
    assert_int_equal(
        cw_na_get(b, local, 0, remote, 0, 4096, a_at_b, done_cb, &g, NULL),
        CW_OK);
    assert_true(wait_all(both, 2, (struct done *[]){&g}, 1, WAIT_MS));
    assert_int_equal(g.status, CW_OK);
    assert_memory_equal(dst, buf + 4096, 4096);
    cw_na_mem_release(b, local);
    cw_na_mem_release(b, remote);
    /* Last handles released: both of A's MRs are gone (invalidated); the
     * connection's receive pools are all that is left. */
    fake_stats(&f0);
    cw_na_mem_release(a, inner);
    cw_na_mem_release(a, rw);
    fake_stats(&f);
    assert_int_equal(f0.mrs_live - f.mrs_live, 2);
    /* Freed and registered again: a new MR with a new rkey. */
    free(buf);
    buf = malloc(len);
    assert_non_null(buf);
    struct cw_na_segment sa2 = {buf, len};
    vb_class_stats(ca, &s0);
    assert_int_equal(cw_na_mem_register(a, &sa2, 1, CW_NA_MEM_READ, &again),
                     CW_OK);
    vb_class_stats(ca, &s);
    assert_int_equal(s.rcache_misses - s0.rcache_misses, 1);
    assert_int_equal(cw_na_mem_serialize(a, ser2, n, again), CW_OK);
    assert_memory_not_equal(ser + 32, ser2 + 32, 4); /* rkey */
    cw_na_mem_release(a, again);
    cw_na_addr_free(b, a_at_b);
    cw_na_addr_free(a, b_at_a);
    cw_na_close(a);
    cw_na_close(b);
    free(buf);
    free(dst);
}

/* B's copy of a handle A gave it, edited by B at byte @p off of the
 * serialized form (a hostile peer's copy is its own to change). */
static cw_na_mem_t *edited_copy(cw_na_t *a, cw_na_t *b, cw_na_mem_t *given,
                                size_t off, const void *val, size_t vlen)
{
    uint8_t ser[128];
    cw_na_mem_t *m;
    size_t n = cw_na_mem_serialize_size(a, given);
    assert_int_equal(cw_na_mem_serialize(a, ser, n, given), CW_OK);
    memcpy(ser + off, val, vlen);
    assert_int_equal(cw_na_mem_deserialize(b, ser, n, &m), CW_OK);
    return m;
}

/* A handle's rkey must not allow more than the handle says: the device
 * checks the MR, not the handle.  A read-only handle over memory another
 * handle exports read-write, with the write bit set by the peer, and a
 * handle over part of a bigger registration, widened by the peer to all
 * of it, both get a remote access error and touch nothing. */
static void test_rcache_rkey_exact(void **state)
{
    cw_na_t *a = open_na(URI, NULL), *b = open_na(URI, NULL);
    cw_na_t *both[2] = {a, b};
    cw_na_addr_t *a_at_b = lookup_self_of(b, a);
    static char amem[1 << 16], bmem[1 << 16];
    struct cw_na_segment whole = {amem, sizeof(amem)},
                         inner = {amem + 4096, 4096}, bs = {bmem, sizeof(bmem)};
    cw_na_mem_t *rw, *ro, *part, *forged, *local;
    uint32_t acc = CW_NA_MEM_READ | CW_NA_MEM_WRITE;
    uint64_t wide[2] = {(uintptr_t)amem, sizeof(amem)};
    struct done d[2] = {{0}};

    memset(amem, 0x11, sizeof(amem));
    memset(bmem, 0x77, sizeof(bmem));
    assert_int_equal(cw_na_mem_register(a, &whole, 1, acc, &rw), CW_OK);
    assert_int_equal(cw_na_mem_register(a, &whole, 1, CW_NA_MEM_READ, &ro),
                     CW_OK);
    assert_int_equal(cw_na_mem_register(a, &inner, 1, acc, &part), CW_OK);
    assert_int_equal(cw_na_mem_register(b, &bs, 1, 0, &local), CW_OK);
    for (int k = 0; k < 2; k++) {
        forged = k ? edited_copy(a, b, part, 16, wide, sizeof(wide))
                   : edited_copy(a, b, ro, 4, &acc, sizeof(acc));
        assert_int_equal((k ? cw_na_get : cw_na_put)(b, local, 0, forged, 0,
                                                     sizeof(bmem), a_at_b,
                                                     done_cb, &d[k], NULL),
                         CW_OK);
        assert_true(wait_all(both, 2, (struct done *[]){&d[k]}, 1, WAIT_MS));
        assert_int_equal(d[k].status, CW_PERMISSION);
        cw_na_mem_release(b, forged);
    }
    assert_int_equal(amem[0], 0x11);
    assert_int_equal(bmem[0], 0x77);
    cw_na_mem_release(b, local);
    cw_na_mem_release(a, part);
    cw_na_mem_release(a, ro);
    cw_na_mem_release(a, rw);
    cw_na_addr_free(b, a_at_b);
    cw_na_close(a);
    cw_na_close(b);
}

/* One client's QP goes to error (a put with a forged rkey is NAKed by the
 * server's device): that client's op fails, its connection is torn down on
 * both sides, and another client carries on; the first reconnects. */
static void test_qp_error_teardown(void **state)
{
    cw_na_class_t *cs, *ca, *cb;
    cw_na_t *srv = open_na(URI, &cs), *a = open_na(URI, &ca),
            *b = open_na(URI, &cb);
    cw_na_t *all[3] = {srv, a, b};
    cw_na_addr_t *s_at_a = lookup_self_of(a, srv),
                 *s_at_b = lookup_self_of(b, srv);
    static char smem[4096], amem[4096];
    uint8_t ser[128];
    cw_na_mem_t *sh, *forged, *al;
    struct vb_stats st;
    struct vb_fake_stats f0, f1;
    uint32_t v = 42, in[4];

    /* Both clients talk to the server first. */
    for (int k = 0; k < 2; k++) {
        struct done r = {0}, sd = {0};
        cw_na_t *c = k ? b : a;
        assert_int_equal(
            cw_na_msg_recv_unexpected(srv, in, sizeof(in), done_cb, &r, NULL),
            CW_OK);
        assert_int_equal(cw_na_msg_send_unexpected(c, &v, sizeof(v),
                                                   k ? s_at_b : s_at_a, 1,
                                                   done_cb, &sd, NULL),
                         CW_OK);
        assert_true(wait_all(all, 3, (struct done *[]){&r, &sd}, 2, WAIT_MS));
        assert_int_equal(r.status, CW_OK);
        cw_na_addr_free(srv, r.source);
    }
    struct cw_na_segment seg = {smem, sizeof(smem)},
                         aseg = {amem, sizeof(amem)};
    assert_int_equal(
        cw_na_mem_register(srv, &seg, 1, CW_NA_MEM_READ | CW_NA_MEM_WRITE, &sh),
        CW_OK);
    size_t n = cw_na_mem_serialize_size(srv, sh);
    assert_int_equal(cw_na_mem_serialize(srv, ser, n, sh), CW_OK);
    ser[32] ^= 0x5a; /* the rkey: bounds and access still look right */
    assert_int_equal(cw_na_mem_deserialize(a, ser, n, &forged), CW_OK);
    assert_int_equal(cw_na_mem_register(a, &aseg, 1, 0, &al), CW_OK);
    fake_stats(&f0);
    struct done pd = {0};
    assert_int_equal(
        cw_na_put(a, al, 0, forged, 0, 64, s_at_a, done_cb, &pd, NULL), CW_OK);
    assert_true(wait_all(all, 3, (struct done *[]){&pd}, 1, WAIT_MS));
    assert_int_equal(pd.calls, 1);
    assert_int_equal(pd.status, CW_PERMISSION);
    fake_stats(&f1);
    assert_int_equal(f1.access_naks - f0.access_naks, 1);
    /* Both ends drop that connection (the server sees the disconnect). */
    uint64_t deadline = cw_now_ns() + 5000000000ull;
    while ((vb_class_conn_count(ca) > 0 || vb_class_conn_count(cs) > 1) &&
           cw_now_ns() < deadline)
        for (int i = 0; i < 3; i++)
            cw_na_progress(all[i], 0, NULL);
    assert_int_equal(vb_class_conn_count(ca), 0);
    assert_int_equal(vb_class_conn_count(cs), 1);
    vb_class_stats(ca, &st);
    assert_true(st.conns_torn_down >= 1);
    /* B still works, both ways. */
    for (int k = 0; k < 2; k++) {
        struct done r = {0}, sd = {0};
        cw_na_t *c = k ? a : b;
        assert_int_equal(
            cw_na_msg_recv_unexpected(srv, in, sizeof(in), done_cb, &r, NULL),
            CW_OK);
        assert_int_equal(cw_na_msg_send_unexpected(c, &v, sizeof(v),
                                                   k ? s_at_a : s_at_b, 2,
                                                   done_cb, &sd, NULL),
                         CW_OK);
        assert_true(wait_all(all, 3, (struct done *[]){&r, &sd}, 2, WAIT_MS));
        assert_int_equal(sd.status, CW_OK);
        assert_int_equal(r.status, CW_OK);
        assert_int_equal(r.tag, 2);
        /* ...and the server answers on the connection it came in on. */
        struct done er = {0}, es = {0};
        uint32_t ans = 7, got = 0;
        assert_int_equal(cw_na_msg_recv_expected(c, &got, sizeof(got),
                                                 k ? s_at_a : s_at_b, 9,
                                                 done_cb, &er, NULL),
                         CW_OK);
        assert_int_equal(cw_na_msg_send_expected(srv, &ans, sizeof(ans),
                                                 r.source, 9, done_cb, &es,
                                                 NULL),
                         CW_OK);
        assert_true(wait_all(all, 3, (struct done *[]){&er, &es}, 2, WAIT_MS));
        assert_int_equal(er.status, CW_OK);
        assert_int_equal(got, 7);
        cw_na_addr_free(srv, r.source);
    }
    cw_na_mem_release(a, forged);
    cw_na_mem_release(a, al);
    cw_na_mem_release(srv, sh);
    cw_na_addr_free(a, s_at_a);
    cw_na_addr_free(b, s_at_b);
    cw_na_close(a);
    cw_na_close(b);
    cw_na_close(srv);
}

/* The peer is another process that dies with work outstanding: a posted
 * expected receive from it and a get from it fail well before any
 * deadline, and the instance keeps serving. */
static void test_peer_process_dies(void **state)
{
    int up[2], down[2];
    /* Cleared: the child writes all of uri down the pipe, past its end. */
    char uri[256] = {0};
    uint8_t ser[128];
    size_t n;

    assert_int_equal(pipe(up), 0);
    assert_int_equal(pipe(down), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        static char mem[1 << 16];
        cw_na_t *c;
        cw_na_addr_t *self;
        cw_na_mem_t *h;
        char go;
        memset(mem, 0x3c, sizeof(mem));
        struct cw_na_segment sg = {mem, sizeof(mem)};
        if (cw_na_open(URI, CW_NA_LISTEN, NULL, &c) != CW_OK ||
            cw_na_addr_self(c, &self) != CW_OK ||
            cw_na_addr_to_string(c, self, uri, sizeof(uri)) != CW_OK ||
            cw_na_mem_register(c, &sg, 1, CW_NA_MEM_READ, &h) != CW_OK)
            _exit(2);
        n = cw_na_mem_serialize_size(c, h);
        if (cw_na_mem_serialize(c, ser, n, h) != CW_OK ||
            write(up[1], uri, sizeof(uri)) != (ssize_t)sizeof(uri) ||
            write(up[1], &n, sizeof(n)) != (ssize_t)sizeof(n) ||
            write(up[1], ser, n) != (ssize_t)n)
            _exit(3);
        fcntl(down[0], F_SETFL, O_NONBLOCK);
        for (;;) {
            cw_na_progress(c, 0, NULL);
            if (read(down[0], &go, 1) == 1)
                _exit(0); /* dies without closing anything */
        }
    }
    close(up[1]);
    close(down[0]);
    assert_int_equal(read(up[0], uri, sizeof(uri)), sizeof(uri));
    assert_int_equal(read(up[0], &n, sizeof(n)), sizeof(n));
    assert_int_equal(read(up[0], ser, n), (ssize_t)n);

    cw_na_t *me = open_na(URI, NULL), *other = open_na(URI, NULL);
    cw_na_t *two[2] = {me, other};
    cw_na_addr_t *child, *o_at_me = lookup_self_of(me, other);
    cw_na_mem_t *remote, *local;
    static char buf[1 << 16];
    struct cw_na_segment ls = {buf, sizeof(buf)};
    assert_int_equal(cw_na_addr_lookup(me, uri, &child), CW_OK);
    assert_int_equal(cw_na_mem_deserialize(me, ser, n, &remote), CW_OK);
    assert_int_equal(cw_na_mem_register(me, &ls, 1, 0, &local), CW_OK);
    struct done g = {0};
    assert_int_equal(cw_na_get(me, local, 0, remote, 0, sizeof(buf), child,
                               done_cb, &g, NULL),
                     CW_OK);
    assert_true(wait_all(two, 2, (struct done *[]){&g}, 1, WAIT_MS));
    assert_int_equal(g.status, CW_OK);
    assert_int_equal(buf[12345], 0x3c);

    uint32_t x;
    struct done er = {0};
    assert_int_equal(cw_na_msg_recv_expected(me, &x, sizeof(x), child, 5,
                                             done_cb, &er, NULL),
                     CW_OK);
    assert_int_equal(write(down[1], "x", 1), 1);
    waitpid(pid, NULL, 0);
    uint64_t t0 = cw_now_ns();
    struct done g2 = {0};
    cw_status_t st =
        cw_na_get(me, local, 0, remote, 0, 4096, child, done_cb, &g2, NULL);
    if (st == CW_OK)
        assert_true(wait_all(two, 2, (struct done *[]){&g2, &er}, 2, 3000));
    else
        assert_true(wait_all(two, 2, (struct done *[]){&er}, 1, 3000));
    assert_true(cw_now_ns() - t0 < 3000000000ull);
    assert_int_equal(er.calls, 1);
    assert_true(er.status == CW_DISCONNECTED || er.status == CW_UNREACHABLE);
    if (st == CW_OK)
        assert_int_not_equal(g2.status, CW_OK);
    print_message("# peer death noticed in %.1f ms (recv %s, get %s)\n",
                  (double)(cw_now_ns() - t0) / 1e6, cw_status_name(er.status),
                  st == CW_OK ? cw_status_name(g2.status) : cw_status_name(st));
    /* Still serving others. */
    struct done r = {0}, sd = {0};
    uint32_t in[2], v = 3;
    assert_int_equal(
        cw_na_msg_recv_unexpected(other, in, sizeof(in), done_cb, &r, NULL),
        CW_OK);
    assert_int_equal(cw_na_msg_send_unexpected(me, &v, sizeof(v), o_at_me, 1,
                                               done_cb, &sd, NULL),
                     CW_OK);
    assert_true(wait_all(two, 2, (struct done *[]){&r, &sd}, 2, WAIT_MS));
    assert_int_equal(r.status, CW_OK);
    cw_na_addr_free(other, r.source);
    cw_na_mem_release(me, remote);
    cw_na_mem_release(me, local);
    cw_na_addr_free(me, child);
    cw_na_addr_free(me, o_at_me);
    cw_na_close(me);
    cw_na_close(other);
    close(up[0]);
    close(down[1]);
}

/* Blocking: with nothing to do safe_to_sleep arms and says yes, and the
 * wait fd wakes when a message arrives; busy-poll: no fd, never armed. */
static void test_wait_fd_and_busy(void **state)
{
    cw_na_class_t *cb;
    cw_na_t *a = open_na(URI, NULL), *b = open_na(URI, &cb), *busy;
    cw_na_t *both[2] = {a, b};
    cw_na_addr_t *b_at_a = lookup_self_of(a, b);
    uint32_t v = 1, in[2];
    struct done r = {0}, s = {0};

    /* Connect first. */
    assert_int_equal(
        cw_na_msg_recv_unexpected(b, in, sizeof(in), done_cb, &r, NULL), CW_OK);
    assert_int_equal(cw_na_msg_send_unexpected(a, &v, sizeof(v), b_at_a, 1,
                                               done_cb, &s, NULL),
                     CW_OK);
    assert_true(wait_all(both, 2, (struct done *[]){&r, &s}, 2, WAIT_MS));
    cw_na_addr_free(b, r.source);
    for (int i = 0; i < 20; i++) {
        cw_na_progress(a, 0, NULL);
        cw_na_progress(b, 0, NULL);
    }
    int fd = cw_na_get_wait_fd(b);
    assert_true(fd >= 0);
    r = (struct done){0};
    s = (struct done){0};
    assert_int_equal(
        cw_na_msg_recv_unexpected(b, in, sizeof(in), done_cb, &r, NULL), CW_OK);
    cw_na_progress(b, 0, NULL);
    assert_true(cw_na_safe_to_sleep(b));
    assert_true(cb->cq_armed);
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    assert_int_equal(poll(&pfd, 1, 0), 0); /* nothing pending */
    uint64_t t0 = cw_now_ns();
    assert_int_equal(cw_na_msg_send_unexpected(a, &v, sizeof(v), b_at_a, 2,
                                               done_cb, &s, NULL),
                     CW_OK);
    cw_na_progress(a, 0, NULL);
    assert_int_equal(poll(&pfd, 1, 2000), 1);
    uint64_t woke = cw_now_ns() - t0;
    assert_true(wait_all(both, 2, (struct done *[]){&r, &s}, 2, WAIT_MS));
    assert_int_equal(r.tag, 2);
    /* The completion fired the armed CQ's event, and progress consumed it. */
    assert_false(cb->cq_armed);
    cw_na_addr_free(b, r.source);
    print_message("# wait fd woke %.1f us after the send was posted\n",
                  (double)woke / 1e3);

    /* A message already waiting when the CQ is armed raises no event: the
     * re-poll after arming must find it and say "not safe". */
    r = (struct done){0};
    s = (struct done){0};
    assert_int_equal(
        cw_na_msg_recv_unexpected(b, in, sizeof(in), done_cb, &r, NULL), CW_OK);
    assert_int_equal(cw_na_msg_send_unexpected(a, &v, sizeof(v), b_at_a, 4,
                                               done_cb, &s, NULL),
                     CW_OK);
    cw_na_progress(a, 0, NULL);
    /* (Loopback delivery may lag under load: ask until it is there.) */
    uint64_t until = cw_now_ns() + 2000000000ull;
    while (cw_na_safe_to_sleep(b) && cw_now_ns() < until)
        ;
    assert_true(cb->nstash > 0);
    assert_int_equal(r.calls, 0);
    unsigned ran = 0;
    assert_int_equal(cw_na_progress(b, 0, &ran), CW_OK);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.tag, 4);
    cw_na_addr_free(b, r.source);
    assert_true(wait_all(both, 2, (struct done *[]){&s}, 1, WAIT_MS));

    assert_int_equal(cw_na_open(URI, CW_NA_LISTEN | CW_NA_BUSY, NULL, &busy),
                     CW_OK);
    assert_int_equal(cw_na_get_wait_fd(busy), -1);
    assert_false(cw_na_caps(busy)->flags & CW_NA_CAP_WAIT_FD);
    assert_false(cw_na_safe_to_sleep(busy));
    cw_na_addr_t *busy_at_a = lookup_self_of(a, busy);
    cw_na_t *ab[2] = {a, busy};
    r = (struct done){0};
    s = (struct done){0};
    assert_int_equal(
        cw_na_msg_recv_unexpected(busy, in, sizeof(in), done_cb, &r, NULL),
        CW_OK);
    assert_int_equal(cw_na_msg_send_unexpected(a, &v, sizeof(v), busy_at_a, 3,
                                               done_cb, &s, NULL),
                     CW_OK);
    assert_true(wait_all(ab, 2, (struct done *[]){&r, &s}, 2, WAIT_MS));
    assert_int_equal(r.status, CW_OK);
    cw_na_addr_free(busy, r.source);
    cw_na_addr_free(a, busy_at_a);
    cw_na_addr_free(a, b_at_a);
    cw_na_close(busy);
    cw_na_close(a);
    cw_na_close(b);
}

/* Location parsing and the fake device/address binding. */
static void test_locations(void **state)
{
    cw_na_t *na;
    cw_na_addr_t *self, *x;
    char uri[256];

    /* fake1 owns 127.0.0.2; an address of another device is refused. */
    assert_int_equal(
        cw_na_open("verbs://fake1:1/127.0.0.2:0", CW_NA_LISTEN, NULL, &na),
        CW_OK);
    assert_int_equal(cw_na_addr_self(na, &self), CW_OK);
    assert_int_equal(cw_na_addr_to_string(na, self, uri, sizeof(uri)), CW_OK);
    assert_true(strncmp(uri, "verbs://fake1:1/127.0.0.2:", 26) == 0);
    cw_na_addr_free(na, self);
    cw_na_close(na);
    assert_int_equal(cw_na_open("verbs://fake1/", CW_NA_LISTEN, NULL, &na),
                     CW_OK);
    assert_int_equal(cw_na_addr_self(na, &self), CW_OK);
    assert_int_equal(cw_na_addr_to_string(na, self, uri, sizeof(uri)), CW_OK);
    assert_true(strncmp(uri, "verbs://fake1:1/127.0.0.2:", 26) == 0);
    /* Device part optional in lookups; same peer either way. */
    const char *port = strrchr(uri, ':');
    char plain[64];
    snprintf(plain, sizeof(plain), "verbs://127.0.0.2%s", port);
    assert_int_equal(cw_na_addr_lookup(na, plain, &x), CW_OK);
    assert_true(cw_na_addr_cmp(na, x, self));
    cw_na_addr_free(na, x);
    cw_na_addr_free(na, self);
    const char *bad[] = {
        "verbs://fake0:1/127.0.0.1",       /* no port */
        "verbs://fake0:0/127.0.0.1:5",     /* port 0 */
        "verbs://fake0:1/300.0.0.1:5",     /* bad ip */
        "verbs://fake0:1/127.0.0.1:99999", /* bad port */
        "verbs://a b/127.0.0.1:5",         "verbs://fake0:1/", NULL};
    for (int i = 0; bad[i]; i++)
        assert_int_not_equal(cw_na_addr_lookup(na, bad[i], &x), CW_OK);
    cw_na_close(na);
    /* fake3 sends at most 32 bytes inline: connections fall back to an
     * inline size that fits the credit header. */
    cw_na_class_t *c3;
    cw_na_t *p3 = open_na("verbs://fake3:1/127.0.0.4:0", &c3), *q3;
    assert_int_equal(cw_na_open("verbs://fake3/", CW_NA_LISTEN, NULL, &q3),
                     CW_OK);
    cw_na_t *pq[2] = {p3, q3};
    cw_na_addr_t *q_at_p = lookup_self_of(p3, q3);
    uint32_t v = 9, in[2];
    struct done r = {0}, s = {0};
    assert_int_equal(
        cw_na_msg_recv_unexpected(q3, in, sizeof(in), done_cb, &r, NULL),
        CW_OK);
    assert_int_equal(cw_na_msg_send_unexpected(p3, &v, sizeof(v), q_at_p, 1,
                                               done_cb, &s, NULL),
                     CW_OK);
    assert_true(wait_all(pq, 2, (struct done *[]){&r, &s}, 2, WAIT_MS));
    assert_int_equal(r.status, CW_OK);
    assert_int_equal(in[0], 9);
    assert_non_null(c3->conns);
    assert_int_equal(c3->conns->inline_max, sizeof(struct vb_hdr));
    cw_na_addr_free(q3, r.source);
    cw_na_addr_free(p3, q_at_p);
    cw_na_close(p3);
    cw_na_close(q3);
    assert_int_equal(
        cw_na_open("verbs://fake1:1/127.0.0.1:0", CW_NA_LISTEN, NULL, &na),
        CW_INVALID_ARG);
    assert_int_equal(
        cw_na_open("verbs://fake0:2/127.0.0.1:0", CW_NA_LISTEN, NULL, &na),
        CW_INVALID_ARG);
}

/* A receiver that progresses but posts no receives: messages queue up to
 * a bound, then credits are held back and the sender stalls; nothing is
 * dropped, order is kept, and everything flows once receives come. */
static void test_unexpected_backpressure(void **state)
{
    cw_na_class_t *ca, *cb;
    cw_na_t *a = open_na(URI, &ca), *b = open_na(URI, &cb);
    cw_na_t *both[2] = {a, b};
    cw_na_addr_t *b_at_a = lookup_self_of(a, b);
    enum { N = 3000 };
    static uint32_t out[N];
    static struct done s[N];
    uint32_t in[2];
    struct vb_fake_stats f0, f1;

    fake_stats(&f0);
    memset(s, 0, sizeof(s));
    for (uint32_t i = 0; i < N; i++) {
        out[i] = i;
        assert_int_equal(cw_na_msg_send_unexpected(a, &out[i], sizeof(out[i]),
                                                   b_at_a, 4, done_cb, &s[i],
                                                   NULL),
                         CW_OK);
    }
    /* Progress until the bound is reached, then a while longer: the queue
     * must stay bounded. */
    uint64_t end = cw_now_ns() + 20000000000ull, after = 0;
    unsigned max_q = 0;
    while (cw_now_ns() < end && (!after || cw_now_ns() < after)) {
        cw_na_progress(a, 0, NULL);
        cw_na_progress(b, 0, NULL);
        if (cb->unexp_q.n > max_q)
            max_q = cb->unexp_q.n;
        if (!after && max_q >= VB_UNEXP_QMAX)
            after = cw_now_ns() + 300000000ull;
    }
    print_message("# queued at most %u unreceived messages (bound %u)\n", max_q,
                  VB_UNEXP_QMAX);
    assert_true(max_q >= VB_UNEXP_QMAX);
    assert_true(max_q <= VB_UNEXP_QMAX + 2 * VB_DEFAULT_CREDITS);
    assert_true(s[N - 1].calls == 0);
    for (uint32_t i = 0; i < N; i++) {
        struct done r = {0};
        assert_int_equal(
            cw_na_msg_recv_unexpected(b, in, sizeof(in), done_cb, &r, NULL),
            CW_OK);
        assert_true(wait_all(both, 2, (struct done *[]){&r}, 1, WAIT_MS));
        assert_int_equal(r.status, CW_OK);
        assert_int_equal(in[0], i);
        cw_na_addr_free(b, r.source);
    }
    assert_true(wait_all(both, 2, (struct done *[]){&s[N - 1]}, 1, WAIT_MS));
    for (uint32_t i = 0; i < N; i++)
        assert_int_equal(s[i].status, CW_OK);
    fake_stats(&f1);
    assert_int_equal(f1.rnr_naks - f0.rnr_naks, 0);
    cw_na_addr_free(a, b_at_a);
    cw_na_close(a);
    cw_na_close(b);
}

/* Sends @p n expected messages from @p a to @p b, tag base + i, payload
 * the 32-bit value base + i in @p len bytes; waits until every send has
 * completed, which it must without B ever posting a receive. */
static void send_unmatched(cw_na_t *a, cw_na_t *b, cw_na_addr_t *b_at_a,
                           uint32_t base, unsigned n, size_t len)
{
    enum { BATCH = 256 };
    static struct done s[BATCH];
    cw_na_t *both[2] = {a, b};
    uint8_t *out = calloc(BATCH, len);

    assert_non_null(out);
    assert_true(len >= sizeof(uint32_t));
    for (unsigned i = 0; i < n; i += BATCH) {
        unsigned k = n - i < BATCH ? n - i : BATCH;
        struct done *ds[BATCH];
        for (unsigned j = 0; j < k; j++) {
            uint32_t v = base + i + j;
            s[j] = (struct done){0};
            ds[j] = &s[j];
            memcpy(out + j * len, &v, sizeof(v));
            assert_int_equal(cw_na_msg_send_expected(a, out + j * len, len,
                                                     b_at_a, v, done_cb, &s[j],
                                                     NULL),
                             CW_OK);
        }
        assert_true(wait_all(both, 2, ds, k, WAIT_MS));
        for (unsigned j = 0; j < k; j++)
            assert_int_equal(s[j].status, CW_OK);
    }
    free(out);
    /* Let the last ones land at B. */
    uint64_t until = cw_now_ns() + 50000000ull;
    while (cw_now_ns() < until) {
        cw_na_progress(a, 0, NULL);
        cw_na_progress(b, 0, NULL);
    }
}

/* B posts an expected receive for (@p from, @p tag); true if it completed
 * from the early queue at once (its payload in *v_p), false if it stayed
 * posted (then it is cancelled and must end CANCELED, once). */
static bool recv_early(cw_na_t *b, cw_na_addr_t *from, uint32_t tag,
                       uint32_t *v_p)
{
    static uint8_t in[1 << 18];
    struct done r = {0};
    cw_na_op_t *op = NULL;
    cw_na_t *one[1] = {b};

    assert_int_equal(
        cw_na_msg_recv_expected(b, in, sizeof(in), from, tag, done_cb, &r, &op),
        CW_OK);
    cw_na_progress(b, 0, NULL);
    if (r.calls == 0) {
        assert_int_equal(cw_na_cancel(b, op), CW_OK);
        assert_true(wait_all(one, 1, (struct done *[]){&r}, 1, WAIT_MS));
        cw_na_progress(b, 0, NULL);
        assert_int_equal(r.calls, 1);
        assert_int_equal(r.status, CW_CANCELED);
        return false;
    }
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.status, CW_OK);
    memcpy(v_p, in, sizeof(*v_p));
    return true;
}

/* Expected messages nobody posted a receive for: far more of them than the
 * connection has credits and receive buffers must neither stall the sender
 * nor hold buffers; the receiver keeps the newest VB_EARLY_MAX (dropping
 * and counting the oldest), delivers a kept one when its receive comes
 * (oldest first for one peer and tag, never another peer's), and still
 * matches receives posted before their message. */
static void test_expected_unmatched(void **state)
{
    enum { EXTRA = 1000, N = VB_EARLY_MAX + EXTRA };
    cw_na_class_t *cb;
    cw_na_t *a = open_na(URI, NULL), *b = open_na(URI, &cb);
    cw_na_t *c = open_na(URI, NULL);
    cw_na_t *all[3] = {a, b, c};
    cw_na_addr_t *b_at_a = lookup_self_of(a, b), *b_at_c = lookup_self_of(c, b);
    cw_na_addr_t *a_at_b = lookup_self_of(b, a), *c_at_b = lookup_self_of(b, c);
    struct vb_fake_stats f0, f1;
    struct vb_stats st0, st1;
    uint32_t v;

    fake_stats(&f0);
    vb_class_stats(cb, &st0);
    send_unmatched(a, b, b_at_a, 0, N, 64);
    vb_class_stats(cb, &st1);
    fake_stats(&f1);
    print_message("# %u unmatched expected messages (grant %u): %u kept "
                  "(%zu bytes), %llu dropped, %u receive buffers posted of "
                  "%u, rnr naks %llu\n",
                  (unsigned)N, cb->credits, cb->early.n, cb->early.bytes,
                  (unsigned long long)(st1.dropped - st0.dropped),
                  cb->srq_posted, cb->srq_target,
                  (unsigned long long)(f1.rnr_naks - f0.rnr_naks));
    assert_true(N > 10 * cb->credits);
    assert_int_equal(cb->early.n, VB_EARLY_MAX);
    assert_int_equal(cb->early.bytes, (size_t)VB_EARLY_MAX * 64);
    assert_int_equal(st1.dropped - st0.dropped, EXTRA);
    assert_int_equal(cb->srq_posted, cb->srq_target); /* no buffer held */
    assert_int_equal(f1.rnr_naks - f0.rnr_naks, 0);

    /* The oldest EXTRA went; the next oldest and the newest are there. */
    assert_false(recv_early(b, a_at_b, 0, &v));
    assert_false(recv_early(b, a_at_b, EXTRA - 1, &v));
    assert_true(recv_early(b, a_at_b, EXTRA, &v));
    assert_int_equal(v, EXTRA);
    assert_true(recv_early(b, a_at_b, N - 1, &v));
    assert_int_equal(v, N - 1);
    assert_false(recv_early(b, a_at_b, N - 1, &v)); /* delivered once */
    assert_int_equal(cb->early.n, VB_EARLY_MAX - 2);

    /* Per (peer, tag): C's message with a tag A used is not A's; two of
     * A's with one tag come oldest first. */
    send_unmatched(c, b, b_at_c, 77, 1, 64);
    assert_false(recv_early(b, a_at_b, 77, &v));
    assert_true(recv_early(b, c_at_b, 77, &v));
    assert_int_equal(v, 77);
    send_unmatched(a, b, b_at_a, 0x5000, 1, 64);
    {
        uint32_t w = 0x6000, t = 0x5000;
        struct done s = {0};
        assert_int_equal(cw_na_msg_send_expected(a, &w, sizeof(w), b_at_a, t,
                                                 done_cb, &s, NULL),
                         CW_OK);
        assert_true(wait_all(all, 3, (struct done *[]){&s}, 1, WAIT_MS));
        assert_int_equal(s.status, CW_OK);
        uint64_t until = cw_now_ns() + 50000000ull;
        while (cw_now_ns() < until)
            cw_na_progress(b, 0, NULL);
    }
    assert_true(recv_early(b, a_at_b, 0x5000, &v));
    assert_int_equal(v, 0x5000);
    assert_true(recv_early(b, a_at_b, 0x5000, &v));
    assert_int_equal(v, 0x6000);

    /* A receive posted first still matches its message, many times over. */
    for (uint32_t i = 0; i < 3 * cb->credits; i++) {
        uint32_t in = 0, out = 0xabc000 + i;
        struct done r = {0}, s = {0};
        assert_int_equal(cw_na_msg_recv_expected(b, &in, sizeof(in), a_at_b,
                                                 out, done_cb, &r, NULL),
                         CW_OK);
        assert_int_equal(cw_na_msg_send_expected(a, &out, sizeof(out), b_at_a,
                                                 out, done_cb, &s, NULL),
                         CW_OK);
        assert_true(wait_all(all, 3, (struct done *[]){&r, &s}, 2, WAIT_MS));
        assert_int_equal(r.status, CW_OK);
        assert_int_equal(in, out);
    }
    cw_na_addr_free(a, b_at_a);
    cw_na_addr_free(c, b_at_c);
    cw_na_addr_free(b, a_at_b);
    cw_na_addr_free(b, c_at_b);
    cw_na_close(a);
    cw_na_close(b);
    cw_na_close(c);
}

/* The early queue is bounded in bytes too: with 256 KiB messages it keeps
 * VB_EARLY_BYTES of them and drops the oldest beyond. */
static void test_expected_unmatched_bytes(void **state)
{
    const char *const big[] = {"eager_size", "262144", NULL};
    const size_t len = 1u << 18;
    const unsigned keep = VB_EARLY_BYTES / (1u << 18), n = keep + 4;
    cw_na_t *a, *b;
    cw_na_class_t *cb;
    struct vb_stats st0, st1;
    uint32_t v;

    assert_int_equal(cw_na_open(URI, CW_NA_LISTEN, big, &a), CW_OK);
    last_cls = NULL;
    assert_int_equal(cw_na_open(URI, CW_NA_LISTEN, big, &b), CW_OK);
    cb = last_cls;
    cw_na_addr_t *b_at_a = lookup_self_of(a, b), *a_at_b = lookup_self_of(b, a);
    vb_class_stats(cb, &st0);
    send_unmatched(a, b, b_at_a, 100, n, len);
    vb_class_stats(cb, &st1);
    print_message("# %u unmatched 256 KiB messages: %u kept (%zu bytes, bound "
                  "%u), %llu dropped\n",
                  n, cb->early.n, cb->early.bytes, (unsigned)VB_EARLY_BYTES,
                  (unsigned long long)(st1.dropped - st0.dropped));
    assert_int_equal(cb->early.n, keep);
    assert_true(cb->early.bytes <= VB_EARLY_BYTES);
    assert_int_equal(st1.dropped - st0.dropped, n - keep);
    assert_false(recv_early(b, a_at_b, 100 + n - keep - 1, &v));
    assert_true(recv_early(b, a_at_b, 100 + n - keep, &v));
    assert_int_equal(v, 100 + n - keep);
    cw_na_addr_free(a, b_at_a);
    cw_na_addr_free(b, a_at_b);
    cw_na_close(a);
    cw_na_close(b);
}

/* Messages and RMA to the instance's own address. */
static void test_self(void **state)
{
    cw_na_t *a = open_na(URI, NULL);
    cw_na_t *one[1] = {a};
    cw_na_addr_t *self;
    uint32_t v = 77, in[2] = {0};
    static char src[8192], dst[8192];
    cw_na_mem_t *ms, *md;
    struct done r = {0}, s = {0}, g = {0};

    assert_int_equal(cw_na_addr_self(a, &self), CW_OK);
    assert_int_equal(
        cw_na_msg_recv_expected(a, in, sizeof(in), self, 3, done_cb, &r, NULL),
        CW_OK);
    assert_int_equal(
        cw_na_msg_send_expected(a, &v, sizeof(v), self, 3, done_cb, &s, NULL),
        CW_OK);
    assert_true(wait_all(one, 1, (struct done *[]){&r, &s}, 2, WAIT_MS));
    assert_int_equal(r.status, CW_OK);
    assert_int_equal(in[0], 77);
    memset(src, 0x6b, sizeof(src));
    struct cw_na_segment ss = {src, sizeof(src)}, sd = {dst, sizeof(dst)};
    assert_int_equal(cw_na_mem_register(a, &ss, 1, CW_NA_MEM_READ, &ms), CW_OK);
    assert_int_equal(cw_na_mem_register(a, &sd, 1, 0, &md), CW_OK);
    assert_int_equal(
        cw_na_get(a, md, 0, ms, 0, sizeof(dst), self, done_cb, &g, NULL),
        CW_OK);
    assert_true(wait_all(one, 1, (struct done *[]){&g}, 1, WAIT_MS));
    assert_int_equal(g.status, CW_OK);
    assert_memory_equal(src, dst, sizeof(dst));
    cw_na_mem_release(a, ms);
    cw_na_mem_release(a, md);
    cw_na_addr_free(a, self);
    cw_na_close(a);
}

/* Hostile input: serialized handles and addresses that do not parse are
 * refused; a malformed message on the wire is dropped and counted, and the
 * connection keeps working. */
static void test_hostile_input(void **state)
{
    cw_na_class_t *ca, *cb;
    cw_na_t *a = open_na(URI, &ca), *b = open_na(URI, &cb);
    cw_na_t *both[2] = {a, b};
    cw_na_addr_t *b_at_a = lookup_self_of(a, b), *x;
    cw_na_mem_t *m;
    uint8_t buf[256];
    static char mem[4096];
    struct cw_na_segment sg = {mem, sizeof(mem)};

    srand(7);
    for (int i = 0; i < 20000; i++) {
        size_t n = (size_t)rand() % sizeof(buf);
        for (size_t k = 0; k < n; k++)
            buf[k] = (uint8_t)rand();
        if (i & 1) {
            memcpy(buf, "VBM1", n < 4 ? n : 4);
            if (n >= 12) {
                buf[8] = (uint8_t)(rand() % 4);
                buf[9] = buf[10] = buf[11] = 0;
            }
        } else {
            memcpy(buf, "VBA1", n < 4 ? n : 4);
        }
        if (cw_na_mem_deserialize(a, buf, n, &m) == CW_OK)
            cw_na_mem_release(a, m);
        if (cw_na_addr_deserialize(a, buf, n, &x) == CW_OK)
            cw_na_addr_free(a, x);
    }
    /* A handle claiming more segments than it carries. */
    assert_int_equal(cw_na_mem_register(b, &sg, 1, CW_NA_MEM_READ, &m), CW_OK);
    size_t n = cw_na_mem_serialize_size(b, m);
    assert_int_equal(cw_na_mem_serialize(b, buf, n, m), CW_OK);
    buf[8] = 2;
    cw_na_mem_t *bad;
    assert_int_equal(cw_na_mem_deserialize(a, buf, n, &bad), CW_INVALID_ARG);
    buf[8] = 1;
    assert_int_equal(cw_na_mem_deserialize(a, buf, n - 1, &bad),
                     CW_INVALID_ARG);
    cw_na_mem_release(b, m);

    /* Connect, then put garbage on the wire through A's own QP. */
    uint32_t v = 5, in[2];
    struct done r = {0}, s = {0};
    assert_int_equal(
        cw_na_msg_recv_unexpected(b, in, sizeof(in), done_cb, &r, NULL), CW_OK);
    assert_int_equal(cw_na_msg_send_unexpected(a, &v, sizeof(v), b_at_a, 1,
                                               done_cb, &s, NULL),
                     CW_OK);
    assert_true(wait_all(both, 2, (struct done *[]){&r, &s}, 2, WAIT_MS));
    cw_na_addr_free(b, r.source);
    struct vb_conn *c = b_at_a->conn;
    assert_non_null(c);
    struct vb_stats st0, st1;
    vb_class_stats(cb, &st0);
    /* The last returns 2048 credits: more than B ever granted A (B's
     * credits towards A would exceed the grant, and repeated, overflow). */
    const uint32_t lens[4] = {3, 8, 8, 8};
    const uint8_t garbage[4][8] = {
        {1, 1, 0},
        {9, VB_WIRE_VERSION, 0, 0, 1, 0, 0, 0},
        {VB_MSG_UNEXP, 99, 0, 0, 1, 0, 0, 0},
        {VB_MSG_CREDIT, VB_WIRE_VERSION, 0x00, 0x08, 0, 0, 0, 0}};
    for (int i = 0; i < 4; i++) {
        uint8_t *slot = ca->smem; /* send buffer 0 is free between sends */
        memcpy(slot, garbage[i], lens[i]);
        struct ibv_sge sge = {
            .addr = (uintptr_t)slot, .length = lens[i], .lkey = ca->smr->lkey};
        struct ibv_send_wr wr = {.wr_id = VB_WR_CTL,
                                 .sg_list = &sge,
                                 .num_sge = 1,
                                 .opcode = IBV_WR_SEND,
                                 .send_flags = IBV_SEND_INLINE},
                           *badwr;
        assert_int_equal(ca->ops->post_send(c->id->qp, &wr, &badwr), 0);
        c->credits--; /* it used one of B's buffers like any send */
        vb_sq_posted(c, false);
    }
    uint64_t end = cw_now_ns() + 2000000000ull;
    do {
        cw_na_progress(a, 0, NULL);
        cw_na_progress(b, 0, NULL);
        vb_class_stats(cb, &st1);
    } while (st1.dropped - st0.dropped < 4 && cw_now_ns() < end);
    assert_int_equal(st1.dropped - st0.dropped, 4);
    for (struct vb_conn *bc = cb->conns; bc; bc = bc->next)
        assert_true(bc->credits <= VB_DEFAULT_CREDITS);
    for (int k = 0; k < 100; k++) { /* and the connection still works */
        r = (struct done){0};
        s = (struct done){0};
        assert_int_equal(
            cw_na_msg_recv_unexpected(b, in, sizeof(in), done_cb, &r, NULL),
            CW_OK);
        assert_int_equal(cw_na_msg_send_unexpected(a, &v, sizeof(v), b_at_a, 2,
                                                   done_cb, &s, NULL),
                         CW_OK);
        assert_true(wait_all(both, 2, (struct done *[]){&r, &s}, 2, WAIT_MS));
        assert_int_equal(r.status, CW_OK);
        assert_int_equal(r.tag, 2);
        cw_na_addr_free(b, r.source);
    }
    cw_na_addr_free(a, b_at_a);
    cw_na_close(a);
    cw_na_close(b);
}

/* A message the sender saw complete (on hardware: acknowledged by our
 * HCA, its completion waiting in our CQ) and then the sender closes.  Our
 * next progress finds both the receive completion and the DISCONNECTED
 * event: the message is delivered, not dropped with its receive failed. */
static void test_last_message_before_close(void **state)
{
    cw_na_class_t *ca;
    cw_na_t *a = open_na(URI, &ca), *b = open_na(URI, NULL);
    cw_na_t *both[2] = {a, b};
    cw_na_addr_t *b_at_a = lookup_self_of(a, b), *a_at_b = lookup_self_of(b, a);
    uint32_t v = 0x5eed, got = 0;
    struct done er = {0}, es = {0};

    assert_int_equal(cw_na_msg_recv_expected(a, &got, sizeof(got), b_at_a, 9,
                                             done_cb, &er, NULL),
                     CW_OK);
    assert_int_equal(cw_na_msg_send_expected(b, &v, sizeof(v), a_at_b, 9,
                                             done_cb, &es, NULL),
                     CW_OK);
    /* A's "HCA" runs (its rdma_cm channel pumps the fake wire, which
     * receives and acknowledges), A's software does not poll its CQ. */
    uint64_t end = cw_now_ns() + (uint64_t)WAIT_MS * 1000000ull;
    while (es.calls == 0 && cw_now_ns() < end) {
        cw_na_progress(b, 0, NULL);
        vb_cm_progress(ca);
    }
    assert_int_equal(es.calls, 1);
    assert_int_equal(es.status, CW_OK);
    assert_int_equal(er.calls, 0);
    cw_na_addr_free(b, a_at_b);
    cw_na_close(b);
    assert_true(wait_all(both, 1, (struct done *[]){&er}, 1, WAIT_MS));
    assert_int_equal(er.calls, 1);
    assert_int_equal(er.status, CW_OK);
    assert_int_equal(got, 0x5eed);
    cw_na_addr_free(a, b_at_a);
    cw_na_close(a);
}

/* Instances used from several threads at once (one pair per thread). */
static void *thread_pair(void *arg)
{
    int *ok = arg;
    cw_na_t *a, *b;
    cw_na_addr_t *self, *b_at_a;
    char uri[256];
    static _Thread_local char src[65536], dst[65536];
    *ok = 0;
    if (cw_na_open(URI, CW_NA_LISTEN, NULL, &a) != CW_OK ||
        cw_na_open(URI, CW_NA_LISTEN, NULL, &b) != CW_OK)
        return NULL;
    cw_na_addr_self(b, &self);
    cw_na_addr_to_string(b, self, uri, sizeof(uri));
    cw_na_addr_free(b, self);
    if (cw_na_addr_lookup(a, uri, &b_at_a) != CW_OK)
        return NULL;
    cw_na_t *both[2] = {a, b};
    int good = 0;
    for (uint32_t i = 0; i < 300; i++) {
        uint32_t in[2] = {0}, v = i;
        struct done r = {0}, s = {0};
        cw_na_msg_recv_unexpected(b, in, sizeof(in), done_cb, &r, NULL);
        cw_na_msg_send_unexpected(a, &v, sizeof(v), b_at_a, 1, done_cb, &s,
                                  NULL);
        if (wait_all(both, 2, (struct done *[]){&r, &s}, 2, WAIT_MS) &&
            r.status == CW_OK && in[0] == i)
            good++;
        cw_na_addr_free(b, r.source);
    }
    cw_na_mem_t *ms, *md, *rs;
    struct cw_na_segment ss = {src, sizeof(src)}, sd = {dst, sizeof(dst)};
    uint8_t ser[64];
    memset(src, good & 0xff, sizeof(src));
    struct done g = {0};
    cw_na_mem_register(b, &ss, 1, CW_NA_MEM_READ, &ms);
    cw_na_mem_register(a, &sd, 1, 0, &md);
    cw_na_mem_serialize(b, ser, cw_na_mem_serialize_size(b, ms), ms);
    cw_na_mem_deserialize(a, ser, cw_na_mem_serialize_size(b, ms), &rs);
    cw_na_get(a, md, 0, rs, 0, sizeof(dst), b_at_a, done_cb, &g, NULL);
    if (wait_all(both, 2, (struct done *[]){&g}, 1, WAIT_MS) &&
        g.status == CW_OK && memcmp(src, dst, sizeof(dst)) == 0)
        good++;
    cw_na_mem_release(a, rs);
    cw_na_mem_release(a, md);
    cw_na_mem_release(b, ms);
    cw_na_addr_free(a, b_at_a);
    cw_na_close(a);
    cw_na_close(b);
    *ok = good == 301;
    return NULL;
}

static void test_threads(void **state)
{
    pthread_t t[4];
    int ok[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&t[i], NULL, thread_pair, &ok[i]), 0);
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_true(ok[i]);
    }
}

/* Runtime parameters: a small grant and eager size still carry a flood;
 * bad values are refused. */
static void test_params(void **state)
{
    const char *const small[] = {"credits", "4", "eager_size", "1024", NULL};
    const char *const bad1[] = {"credits", "1", NULL};
    const char *const bad2[] = {"eager_size", "12x", NULL};
    cw_na_t *a, *b, *x;
    enum { N = 500 };
    static struct done s[N];
    static char out[1024];
    char in[1100];

    assert_int_equal(cw_na_open(URI, CW_NA_LISTEN, bad1, &x), CW_INVALID_ARG);
    assert_int_equal(cw_na_open(URI, CW_NA_LISTEN, bad2, &x), CW_INVALID_ARG);
    last_cls = NULL;
    assert_int_equal(cw_na_open(URI, CW_NA_LISTEN, small, &a), CW_OK);
    cw_na_class_t *ca = last_cls;
    assert_int_equal(cw_na_open(URI, CW_NA_LISTEN, small, &b), CW_OK);
    assert_int_equal(cw_na_caps(a)->max_unexpected_size, 1024);
    cw_na_t *both[2] = {a, b};
    cw_na_addr_t *b_at_a = lookup_self_of(a, b);
    memset(s, 0, sizeof(s));
    assert_int_equal(cw_na_msg_send_unexpected(a, out, 1025, b_at_a, 1, done_cb,
                                               &s[0], NULL),
                     CW_OVERFLOW);
    for (int i = 0; i < N; i++) {
        out[0] = (char)i;
        assert_int_equal(cw_na_msg_send_unexpected(a, out, sizeof(out), b_at_a,
                                                   1, done_cb, &s[i], NULL),
                         CW_OK);
    }
    for (int i = 0; i < N; i++) {
        struct done r = {0};
        assert_int_equal(
            cw_na_msg_recv_unexpected(b, in, sizeof(in), done_cb, &r, NULL),
            CW_OK);
        assert_true(wait_all(both, 2, (struct done *[]){&r}, 1, WAIT_MS));
        assert_int_equal(r.len, sizeof(out));
        cw_na_addr_free(b, r.source);
    }
    assert_true(wait_all(both, 2, (struct done *[]){&s[N - 1]}, 1, WAIT_MS));
    struct vb_stats st;
    vb_class_stats(ca, &st);
    assert_true(st.credit_stalls > 0);
    cw_na_addr_free(a, b_at_a);
    cw_na_close(a);
    cw_na_close(b);
}

/* ---- fault injection and a hostile peer, behind the ops table ---- */

/* One unexpected message of @p len bytes from @p from to @p to (at
 * @p dest), delivered intact. */
static void roundtrip(cw_na_t **nas, size_t nn, cw_na_t *from,
                      cw_na_addr_t *dest, cw_na_t *to, size_t len, uint32_t tag)
{
    static char out[1024], in[1024];
    struct done r = {0}, s = {0};
    assert_true(len <= sizeof(out));
    assert_int_equal(
        cw_na_msg_recv_unexpected(to, in, sizeof(in), done_cb, &r, NULL),
        CW_OK);
    assert_int_equal(
        cw_na_msg_send_unexpected(from, out, len, dest, tag, done_cb, &s, NULL),
        CW_OK);
    assert_true(wait_all(nas, nn, (struct done *[]){&s}, 1, WAIT_MS));
    assert_int_equal(s.status, CW_OK); /* e.g. not CW_BUSY */
    assert_true(wait_all(nas, nn, (struct done *[]){&r}, 1, WAIT_MS));
    assert_int_equal(r.status, CW_OK);
    assert_int_equal(r.tag, tag);
    assert_int_equal(r.len, len);
    cw_na_addr_free(to, r.source);
}

/* A copy of the fake's ops with post_srq_recv failing once, after
 * srq_fail_after more calls have succeeded (-1: never). */
static struct vb_ops fault_ops;
static int srq_fail_after = -1;

static int fault_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
                               struct ibv_recv_wr **bad)
{
    if (srq_fail_after == 0) {
        srq_fail_after = -1;
        if (bad)
            *bad = wr;
        return ENOMEM;
    }
    if (srq_fail_after > 0)
        srq_fail_after--;
    return fake_mod->ops->post_srq_recv(srq, wr, bad);
}

/* A receive buffer that cannot be posted while a connection is being set
 * up fails that connection only: the receive budget raised for it is given
 * back.  Leaked, it would be gone for good: 16 such failures use up the
 * whole SRQ of an instance granting 1024 buffers a connection, and every
 * later connection fails with CW_BUSY. */
static void test_grant_fail_no_leak(void **state)
{
    const char *const big[] = {"credits", "1024", "eager_size", "256", NULL};
    cw_na_t *a, *b;
    cw_na_class_t *ca;
    uint32_t v = 7;

    last_cls = NULL;
    assert_int_equal(cw_na_open(URI, CW_NA_LISTEN, big, &a), CW_OK);
    ca = last_cls;
    assert_int_equal(cw_na_open(URI, CW_NA_LISTEN, big, &b), CW_OK);
    cw_na_t *both[2] = {a, b};
    cw_na_addr_t *b_at_a = lookup_self_of(a, b);
    unsigned attempts = ca->max_conns;
    assert_true(attempts >= 2 && attempts <= 64);

    fault_ops = *ca->ops;
    fault_ops.post_srq_recv = fault_post_srq_recv;
    ca->ops = &fault_ops;
    for (unsigned i = 0; i < attempts; i++) {
        struct done s = {0};
        srq_fail_after = 5; /* some buffers posted, then a failure */
        assert_int_equal(cw_na_msg_send_unexpected(a, &v, sizeof(v), b_at_a, 1,
                                                   done_cb, &s, NULL),
                         CW_OK);
        assert_true(wait_all(both, 2, (struct done *[]){&s}, 1, WAIT_MS));
        assert_int_not_equal(s.status, CW_OK);
        assert_int_equal(srq_fail_after, -1);
    }
    ca->ops = fake_mod->ops;

    roundtrip(both, 2, a, b_at_a, b, sizeof(v), 2);
    assert_int_equal(ca->srq_target, 1024);
    assert_int_equal(ca->srq_posted, 1024);
    cw_na_addr_free(a, b_at_a);
    cw_na_close(a);
    cw_na_close(b);
}

/* A hostile instance whose connect private data claims another address. */
static struct vb_ops spoof_ops;
static struct sockaddr_in spoof_as;

static int spoof_connect(struct rdma_cm_id *id, struct rdma_conn_param *cp)
{
    struct vb_pdata pd;
    struct rdma_conn_param mine = *cp;
    memcpy(&pd, cp->private_data, sizeof(pd));
    pd.ip = spoof_as.sin_addr.s_addr;
    pd.port = spoof_as.sin_port;
    mine.private_data = &pd;
    return fake_mod->ops->connect(id, &mine);
}

/* H (127.0.0.3) connects to A claiming to be V (127.0.0.2).  A must not
 * take it for V: neither hand H's message to A's application as V's, nor,
 * when H goes away, fail the receive A has posted for V's reply. */
static void test_peer_identity(void **state)
{
    cw_na_class_t *ca, *ch;
    cw_na_t *a = open_na(URI, &ca),
            *v = open_na("verbs://fake1:1/127.0.0.2:0", NULL),
            *h = open_na("verbs://fake2:1/127.0.0.3:0", &ch);
    cw_na_t *all[3] = {a, v, h};
    cw_na_addr_t *a_at_h = lookup_self_of(h, a), *a_at_v = lookup_self_of(v, a),
                 *v_at_a = lookup_self_of(a, v);
    struct done r = {0}, er = {0}, s = {0};
    uint32_t x = 1, got = 0, in[2];

    spoof_as = v_at_a->sin;
    spoof_ops = *ch->ops;
    spoof_ops.connect = spoof_connect;
    ch->ops = &spoof_ops;

    /* A awaits V's reply and any message; H sends one, posing as V. */
    assert_true(cw_na_msg_recv_expected(a, &got, sizeof(got), v_at_a, 9,
                                        done_cb, &er, NULL) == CW_OK &&
                cw_na_msg_recv_unexpected(a, in, sizeof(in), done_cb, &r,
                                          NULL) == CW_OK &&
                cw_na_msg_send_unexpected(h, &x, sizeof(x), a_at_h, 1, done_cb,
                                          &s, NULL) == CW_OK);
    assert_true(wait_all(all, 3, (struct done *[]){&s}, 1, WAIT_MS));
    for (uint64_t end = cw_now_ns() + 200000000ull; cw_now_ns() < end;)
        for (int i = 0; i < 3; i++)
            cw_na_progress(all[i], 0, NULL);
    if (r.calls)
        fail_msg("H's message was delivered as %s's",
                 cw_na_addr_cmp(a, r.source, v_at_a) ? "V" : "someone");
    assert_int_not_equal(s.status, CW_OK);
    struct vb_stats st;
    vb_class_stats(ca, &st);
    assert_true(st.conns_refused >= 1);

    /* H goes away: V's expected reply is still awaited. */
    cw_na_addr_free(h, a_at_h);
    cw_na_close(h);
    for (uint64_t end = cw_now_ns() + 200000000ull; cw_now_ns() < end;) {
        cw_na_progress(a, 0, NULL);
        cw_na_progress(v, 0, NULL);
    }
    assert_int_equal(er.calls, 0);

    /* The real V is still V: its reply and its message are its own. */
    x = 0xbeef;
    struct done s2[2] = {{0}};
    cw_status_t st2[2] = {cw_na_msg_send_expected(v, &x, sizeof(x), a_at_v, 9,
                                                  done_cb, &s2[0], NULL),
                          cw_na_msg_send_unexpected(v, &x, sizeof(x), a_at_v, 3,
                                                    done_cb, &s2[1], NULL)};
    assert_true(st2[0] == CW_OK && st2[1] == CW_OK);
    assert_true(wait_all(all, 2, (struct done *[]){&er, &r}, 2, WAIT_MS));
    assert_true(er.status == CW_OK && got == 0xbeef);
    assert_true(r.status == CW_OK && r.tag == 3 &&
                cw_na_addr_cmp(a, r.source, v_at_a));
    cw_na_addr_free(a, r.source);
    cw_na_addr_free(a, v_at_a);
    cw_na_addr_free(v, a_at_v);
    cw_na_close(v);
    cw_na_close(a);
}

/* A sender configured with a larger eager size than its peer: a message
 * the peer has no room for fails at post time with CW_OVERFLOW, and the
 * connection carries on (before, the receiver's SRQ buffer was too short:
 * local length error, and the connection was torn down). */
static void test_eager_mismatch(void **state)
{
    const char *const large[] = {"eager_size", "1024", NULL};
    const char *const small[] = {"eager_size", "256", NULL};
    cw_na_t *a, *b, *c;
    cw_na_class_t *ca;
    static char out[1024];
    char in[1024];
    struct vb_stats st0, st1;

    last_cls = NULL;
    assert_int_equal(cw_na_open(URI, CW_NA_LISTEN, large, &a), CW_OK);
    ca = last_cls;
    assert_int_equal(cw_na_open(URI, CW_NA_LISTEN, small, &b), CW_OK);
    assert_int_equal(cw_na_open(URI, CW_NA_LISTEN, large, &c), CW_OK);
    cw_na_t *all[3] = {a, b, c};
    cw_na_addr_t *b_at_a = lookup_self_of(a, b), *a_at_b = lookup_self_of(b, a),
                 *b_at_c = lookup_self_of(c, b);

    /* Connected first: the oversize send is refused when posted. */
    struct done r = {0}, s = {0};
    roundtrip(all, 2, a, b_at_a, b, 256, 1);
    vb_class_stats(ca, &st0);
    cw_status_t st =
        cw_na_msg_send_unexpected(a, out, 257, b_at_a, 2, done_cb, &s, NULL);
    if (st == CW_OK) {
        assert_true(wait_all(all, 2, (struct done *[]){&s}, 1, WAIT_MS));
        st = s.status;
    }
    assert_int_equal(st, CW_OVERFLOW);
    /* The other way round is fine: B's messages fit A's buffers. */
    roundtrip(all, 2, b, a_at_b, a, 256, 3);
    vb_class_stats(ca, &st1);
    assert_int_equal(st1.conns_torn_down, st0.conns_torn_down);

    /* Not connected yet: the oversize send, queued while connecting,
     * completes with CW_OVERFLOW; the next one goes through. */
    struct done s1 = {0}, s2 = {0};
    r = (struct done){0};
    assert_int_equal(
        cw_na_msg_recv_unexpected(b, in, sizeof(in), done_cb, &r, NULL), CW_OK);
    assert_int_equal(
        cw_na_msg_send_unexpected(c, out, 1024, b_at_c, 4, done_cb, &s1, NULL),
        CW_OK);
    assert_int_equal(
        cw_na_msg_send_unexpected(c, out, 100, b_at_c, 5, done_cb, &s2, NULL),
        CW_OK);
    assert_true(wait_all(all, 3, (struct done *[]){&s1, &s2, &r}, 3, WAIT_MS));
    assert_int_equal(s1.status, CW_OVERFLOW);
    assert_int_equal(s2.status, CW_OK);
    assert_int_equal(r.status, CW_OK);
    assert_int_equal(r.tag, 5);
    assert_int_equal(r.len, 100);
    cw_na_addr_free(b, r.source);

    cw_na_addr_free(a, b_at_a);
    cw_na_addr_free(b, a_at_b);
    cw_na_addr_free(c, b_at_c);
    cw_na_close(a);
    cw_na_close(b);
    cw_na_close(c);
}

/* A peer of wire version 1 (no eager size in its 36 bytes of private
 * data) is refused, not misread. */
static int v1_connect(struct rdma_cm_id *id, struct rdma_conn_param *cp)
{
    struct vb_pdata pd;
    struct rdma_conn_param mine = *cp;
    memcpy(&pd, cp->private_data, sizeof(pd));
    pd.version = 1;
    mine.private_data = &pd;
    mine.private_data_len = offsetof(struct vb_pdata, eager);
    return fake_mod->ops->connect(id, &mine);
}

static void test_wire_v1_refused(void **state)
{
    cw_na_class_t *ca, *ch;
    cw_na_t *a = open_na(URI, &ca), *h = open_na(URI, &ch);
    cw_na_t *both[2] = {a, h};
    cw_na_addr_t *a_at_h = lookup_self_of(h, a);
    struct vb_stats st0, st1;
    struct done s = {0};
    uint32_t x = 1;

    spoof_ops = *ch->ops;
    spoof_ops.connect = v1_connect;
    ch->ops = &spoof_ops;
    vb_class_stats(ca, &st0);
    assert_int_equal(cw_na_msg_send_unexpected(h, &x, sizeof(x), a_at_h, 1,
                                               done_cb, &s, NULL),
                     CW_OK);
    assert_true(wait_all(both, 2, (struct done *[]){&s}, 1, WAIT_MS));
    assert_int_not_equal(s.status, CW_OK);
    vb_class_stats(ca, &st1);
    assert_int_equal(st1.dropped - st0.dropped, 1);
    assert_int_equal(vb_class_conn_count(ca), 0);
    cw_na_addr_free(h, a_at_h);
    cw_na_close(h);
    cw_na_close(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_few_recvs),
        cmocka_unit_test(test_wait_fd_and_busy),
        cmocka_unit_test(test_locations),
        cmocka_unit_test(test_self),
        cmocka_unit_test(test_params),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_hostile_input),
        cmocka_unit_test(test_last_message_before_close),
        cmocka_unit_test(test_rcache),
        cmocka_unit_test(test_rcache_rkey_exact),
        cmocka_unit_test(test_qp_error_teardown),
        cmocka_unit_test(test_peer_process_dies),
        cmocka_unit_test(test_credit_flood),
        cmocka_unit_test(test_unexpected_backpressure),
        cmocka_unit_test(test_expected_unmatched),
        cmocka_unit_test(test_expected_unmatched_bytes),
        cmocka_unit_test(test_grant_fail_no_leak),
        cmocka_unit_test(test_peer_identity),
        cmocka_unit_test(test_eager_mismatch),
        cmocka_unit_test(test_wire_v1_refused),
    };
    const char *path = getenv(VB_FAKE_ENV);
    void *mod = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!mod || !(fake_mod = dlsym(mod, VB_FAKE_ENTRY))) {
        fprintf(stderr, "%s must name the fake device module (%s)\n",
                VB_FAKE_ENV,
                mod    ? "no entry symbol"
                : path ? dlerror()
                       : "unset");
        if (mod)
            dlclose(mod);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    spy_ops = *cw_na_plugin_entry.ops;
    real_init = spy_ops.init;
    spy_ops.init = spy_init;
    spy_plugin = cw_na_plugin_entry;
    spy_plugin.ops = &spy_ops;
    if (cw_plugins_register(&spy_plugin) != CW_OK) {
        fprintf(stderr, "cannot register the verbs plugin\n");
        dlclose(mod);
        return 1;
    }
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    dlclose(mod);
    return rc;
}
