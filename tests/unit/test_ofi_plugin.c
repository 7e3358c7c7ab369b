/*
 * na-ofi specific tests, through the core NA API (plus raw libfabric for a
 * malformed sender): interface-name hosts, fi_shm names, parameters,
 * hostile serialized input, RMA over more segments than the provider's iov
 * limit, malformed unexpected messages, the bounded early queue of expected
 * messages, cancel of every kind of op, a peer editing its copy of a
 * memory handle (a real process as the target), raw TCP connections closed
 * before their handshake.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <causeway/log.h>

#include "proc_self.h"
#include <causeway/na.h>

#include "na_peer.h"

#define WAIT_NS (10ull * 1000000000ull)

struct done {
    int calls;
    cw_status_t status;
    size_t len;
    uint32_t tag;
    cw_na_t *owner;
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
        if (info->u.recv_unexpected.source != NULL)
            cw_na_addr_free(d->owner, info->u.recv_unexpected.source);
    } else if (info->type == CW_NA_OP_RECV_EXPECTED) {
        d->len = info->u.recv_expected.len;
    }
}

static bool wait_done(cw_na_t *a, cw_na_t *b, struct done *d, int calls)
{
    uint64_t end = cw_now_ns() + WAIT_NS;

    while (d->calls < calls && cw_now_ns() < end) {
        cw_na_progress(a, 0, NULL);
        if (b != NULL)
            cw_na_progress(b, 0, NULL);
    }
    return d->calls == calls;
}

struct pair {
    cw_na_t *a, *b;
    cw_na_addr_t *b_at_a, *a_at_b;
};

/* @p of's own address, as @p owner looks it up. */
static cw_na_addr_t *lookup_self(cw_na_t *owner, cw_na_t *of)
{
    cw_na_addr_t *self, *addr;
    char s[256];

    assert_int_equal(cw_na_addr_self(of, &self), CW_OK);
    assert_int_equal(cw_na_addr_to_string(of, self, s, sizeof(s)), CW_OK);
    cw_na_addr_free(of, self);
    assert_int_equal(cw_na_addr_lookup(owner, s, &addr), CW_OK);
    return addr;
}

/* A listening ofi+tcp instance on a port of its own, with @p params. */
static cw_na_t *tcp_open(const char *const *params)
{
    cw_na_t *na = NULL;

    assert_int_equal(
        cw_na_open("ofi+tcp://127.0.0.1:0", CW_NA_LISTEN, params, &na), CW_OK);
    return na;
}

static void pair_open(struct pair *p, const char *uri)
{
    assert_int_equal(cw_na_open(uri, CW_NA_LISTEN, NULL, &p->a), CW_OK);
    assert_int_equal(cw_na_open(uri, CW_NA_LISTEN, NULL, &p->b), CW_OK);
    p->b_at_a = lookup_self(p->a, p->b);
    p->a_at_b = lookup_self(p->b, p->a);
}

static void pair_close(struct pair *p)
{
    cw_na_addr_free(p->a, p->b_at_a);
    cw_na_addr_free(p->b, p->a_at_b);
    cw_na_close(p->a);
    cw_na_close(p->b);
}

static void test_iface_host(void **state)
{
    cw_na_t *na;
    cw_na_addr_t *self;
    char s[256];
    (void)state;

    assert_int_equal(cw_na_open("ofi+tcp://lo:0", CW_NA_LISTEN, NULL, &na),
                     CW_OK);
    assert_int_equal(cw_na_addr_self(na, &self), CW_OK);
    assert_int_equal(cw_na_addr_to_string(na, self, s, sizeof(s)), CW_OK);
    assert_true(strncmp(s, "ofi+tcp://127.0.0.1:", 20) == 0);
    assert_true(strcmp(s, "ofi+tcp://127.0.0.1:0") != 0); /* port picked */
    cw_na_addr_free(na, self);
    cw_na_close(na);
    assert_int_not_equal(cw_na_open("ofi+tcp://no-such-if-or-host.invalid:0",
                                    CW_NA_LISTEN, NULL, &na),
                         CW_OK);
    assert_int_equal(cw_na_open("ofi+tcp://1.2.3.4:5:6", 0, NULL, &na),
                     CW_INVALID_ARG);
    assert_int_equal(cw_na_open("ofi+nosuchproto://x", 0, NULL, &na),
                     CW_UNSUPPORTED);
}

static void test_shm_names(void **state)
{
    cw_na_t *na;
    cw_na_addr_t *self, *gone;
    char name[64], want[96], s[256];
    (void)state;

    snprintf(name, sizeof(name), "cwt-ofi-%ld", (long)getpid());
    snprintf(want, sizeof(want), "ofi+shm://%s", name);
    assert_int_equal(cw_na_open(want, CW_NA_LISTEN, NULL, &na), CW_OK);
    assert_int_equal(cw_na_addr_self(na, &self), CW_OK);
    assert_int_equal(cw_na_addr_to_string(na, self, s, sizeof(s)), CW_OK);
    assert_string_equal(s, want);
    cw_na_addr_free(na, self);
    /* A name nobody uses is refused at lookup, not at the first send. */
    assert_int_equal(cw_na_addr_lookup(na, "ofi+shm://cwt-nobody-here", &gone),
                     CW_UNREACHABLE);
    assert_int_equal(cw_na_addr_lookup(na, "ofi+shm://bad/name", &gone),
                     CW_INVALID_ARG);
    cw_na_close(na);
    assert_int_equal(access("/dev/shm/cwt-nobody-here", F_OK), -1);
}

static void test_params(void **state)
{
    const char *small[] = {"eager_size", "1024", NULL};
    const char *bad[] = {"eager_size", "lots", NULL};
    const char *bad_early[] = {"early_max", "2000000", NULL};
    const char *tiny[] = {"keepalive_ms", "0",   "eager_size", "64",
                          "spin_us",      "100", NULL};
    static char buf[2048];
    struct done d = {0};
    cw_na_t *na;
    cw_na_addr_t *self;
    (void)state;

    assert_int_equal(cw_na_open("ofi+tcp://127.0.0.1:0", 0, small, &na), CW_OK);
    assert_int_equal(cw_na_caps(na)->max_unexpected_size, 1024);
    assert_int_equal(cw_na_caps(na)->max_expected_size, 1024);
    assert_int_equal(cw_na_addr_self(na, &self), CW_OK);
    assert_int_equal(
        cw_na_msg_send_unexpected(na, buf, 1025, self, 1, done_cb, &d, NULL),
        CW_OVERFLOW);
    assert_int_equal(
        cw_na_msg_send_expected(na, buf, 1025, self, 1, done_cb, &d, NULL),
        CW_OVERFLOW);
    cw_na_addr_free(na, self);
    cw_na_close(na);
    assert_int_equal(d.calls, 0);
    assert_int_equal(cw_na_open("ofi+tcp://127.0.0.1:0", 0, bad, &na),
                     CW_INVALID_ARG);
    assert_int_equal(cw_na_open("ofi+tcp://127.0.0.1:0", 0, bad_early, &na),
                     CW_INVALID_ARG);
    assert_int_equal(cw_na_open("ofi+tcp://127.0.0.1:0", 0, tiny, &na), CW_OK);
    assert_int_equal(cw_na_caps(na)->max_unexpected_size, 64);
    cw_na_close(na);
}

static void test_hostile_input(void **state)
{
    struct pair p;
    uint8_t buf[4096];
    cw_na_addr_t *addr;
    cw_na_mem_t *mem;
    char data[100];
    struct cw_na_segment seg = {data, sizeof(data)};
    size_t n;
    (void)state;

    pair_open(&p, "ofi+tcp://127.0.0.1:0");
    /* Round trip first. */
    n = cw_na_addr_serialize_size(p.a, p.b_at_a);
    assert_true(n > 0 && n < sizeof(buf));
    assert_int_equal(cw_na_addr_serialize(p.a, buf, n, p.b_at_a), CW_OK);
    assert_int_equal(cw_na_addr_deserialize(p.a, buf, n, &addr), CW_OK);
    assert_true(cw_na_addr_cmp(p.a, addr, p.b_at_a));
    cw_na_addr_free(p.a, addr);
    /* Every truncation fails. */
    for (size_t k = 0; k < n; k++)
        assert_int_not_equal(cw_na_addr_deserialize(p.a, buf, k, &addr), CW_OK);
    /* A wrong address family in otherwise well-formed framing. */
    buf[4] ^= 0xff;
    assert_int_not_equal(cw_na_addr_deserialize(p.a, buf, n, &addr), CW_OK);

    assert_int_equal(cw_na_mem_register(p.a, &seg, 1, CW_NA_MEM_READ, &mem),
                     CW_OK);
    n = cw_na_mem_serialize_size(p.a, mem);
    assert_int_equal(cw_na_mem_serialize(p.a, buf, n, mem), CW_OK);
    cw_na_mem_release(p.a, mem);
    for (size_t k = 0; k < n; k++)
        assert_int_not_equal(cw_na_mem_deserialize(p.a, buf, k, &mem), CW_OK);
    /* Segment count far beyond the buffer. */
    buf[8] = 0xff;
    buf[9] = 0xff;
    assert_int_not_equal(cw_na_mem_deserialize(p.a, buf, n, &mem), CW_OK);
    /* Random bytes: never OK without the magic, never a crash. */
    srand(7);
    for (int it = 0; it < 20000; it++) {
        size_t len = (size_t)rand() % 200;
        for (size_t k = 0; k < len; k++)
            buf[k] = (uint8_t)rand();
        if (cw_na_addr_deserialize(p.a, buf, len, &addr) == CW_OK)
            cw_na_addr_free(p.a, addr);
        if (cw_na_mem_deserialize(p.a, buf, len, &mem) == CW_OK)
            cw_na_mem_release(p.a, mem);
    }
    pair_close(&p);
}

static uint64_t sum_range(const uint8_t *b, size_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* 11 local segments (one empty) against 3 remote ones: each piece spans
 * more local segments than iov_limit (4 on tcp;ofi_rxm and shm). */
static void rma_segments(const char *uri)
{
    static const size_t lens[] = {1000, 3,   0, 4096,  17, 65536,
                                  5,    700, 1, 20000, 333};
    enum { NL = sizeof(lens) / sizeof(lens[0]) };
    struct cw_na_segment ls[NL], rs[3], back[NL];
    uint8_t *lbuf[NL], *bbuf[NL], *rbuf[3];
    size_t rlens[3] = {30000, 1, 100000}, total = 0;
    cw_na_mem_t *lm, *bm, *rm, *rm_at_a;
    uint8_t ser[512];
    uint8_t *flat_src, *flat_dst;
    struct pair p;
    struct done d;
    size_t n;

    pair_open(&p, uri);
    for (int i = 0; i < NL; i++) {
        lbuf[i] = malloc(lens[i] + 1);
        bbuf[i] = calloc(1, lens[i] + 1);
        for (size_t k = 0; k < lens[i]; k++)
            lbuf[i][k] = (uint8_t)(k * 31 + i);
        ls[i] = (struct cw_na_segment){lbuf[i], lens[i]};
        back[i] = (struct cw_na_segment){bbuf[i], lens[i]};
        total += lens[i];
    }
    for (int i = 0; i < 3; i++) {
        rbuf[i] = calloc(1, rlens[i]);
        rs[i] = (struct cw_na_segment){rbuf[i], rlens[i]};
    }
    assert_int_equal(cw_na_mem_register(p.a, ls, NL, 0, &lm), CW_OK);
    assert_int_equal(cw_na_mem_register(p.a, back, NL, 0, &bm), CW_OK);
    assert_int_equal(
        cw_na_mem_register(p.b, rs, 3, CW_NA_MEM_READ | CW_NA_MEM_WRITE, &rm),
        CW_OK);
    n = cw_na_mem_serialize_size(p.b, rm);
    assert_true(n <= sizeof(ser));
    assert_int_equal(cw_na_mem_serialize(p.b, ser, n, rm), CW_OK);
    assert_int_equal(cw_na_mem_deserialize(p.a, ser, n, &rm_at_a), CW_OK);

    /* Put [7, total-7) of the local handle at remote offset 29990 (it
     * straddles all three remote segments), then get it back. */
    size_t off = 7, len = total - 14, roff = 29990;
    memset(&d, 0, sizeof(d));
    /* An RMA in flight is "streaming" (the core keeps polling: the
     * provider moves it only from progress calls) until it completes. */
    assert_false(cw_na_streaming(p.a));
    assert_int_equal(cw_na_put(p.a, lm, off, rm_at_a, roff, len, p.b_at_a,
                               done_cb, &d, NULL),
                     CW_OK);
    assert_true(cw_na_streaming(p.a));
    assert_true(wait_done(p.a, p.b, &d, 1));
    assert_int_equal(d.status, CW_OK);
    assert_false(cw_na_streaming(p.a));
    memset(&d, 0, sizeof(d));
    assert_int_equal(cw_na_get(p.a, bm, off, rm_at_a, roff, len, p.b_at_a,
                               done_cb, &d, NULL),
                     CW_OK);
    assert_true(cw_na_streaming(p.a));
    assert_true(wait_done(p.a, p.b, &d, 1));
    assert_int_equal(d.status, CW_OK);
    assert_false(cw_na_streaming(p.a));

    flat_src = malloc(total);
    flat_dst = malloc(total);
    for (size_t i = 0, at = 0; i < NL; at += lens[i], i++) {
        memcpy(flat_src + at, lbuf[i], lens[i]);
        memcpy(flat_dst + at, bbuf[i], lens[i]);
    }
    assert_true(sum_range(flat_src + off, len) ==
                sum_range(flat_dst + off, len));
    assert_true(flat_dst[off - 1] == 0 && flat_dst[off + len] == 0);
    /* And the remote bytes landed where they should. */
    assert_memory_equal(rbuf[0] + roff, flat_src + off, rlens[0] - roff);
    assert_int_equal(rbuf[1][0], flat_src[off + rlens[0] - roff]);
    free(flat_src);
    free(flat_dst);

    cw_na_mem_release(p.a, rm_at_a);
    cw_na_mem_release(p.b, rm);
    cw_na_mem_release(p.a, bm);
    cw_na_mem_release(p.a, lm);
    for (int i = 0; i < NL; i++) {
        free(lbuf[i]);
        free(bbuf[i]);
    }
    for (int i = 0; i < 3; i++)
        free(rbuf[i]);
    pair_close(&p);
}

static void test_rma_segments_tcp(void **state)
{
    (void)state;
    rma_segments("ofi+tcp://127.0.0.1:0");
}

static void test_rma_segments_shm(void **state)
{
    (void)state;
    rma_segments("ofi+shm://");
}

/* A raw tcp;ofi_rxm endpoint on 127.0.0.1 (an ephemeral port). */
struct raw_ep {
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    struct fid_cq *cq;
    struct fid_ep *ep;
    struct sockaddr_in sin; /* its address */
};

static void raw_ep_open(struct raw_ep *r)
{
    struct fi_info *hints = fi_allocinfo();
    struct fi_av_attr av_attr = {.type = FI_AV_UNSPEC};
    struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED};
    size_t len = sizeof(r->sin);

    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_TAGGED;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->fabric_attr->prov_name = strdup("tcp;ofi_rxm");
    assert_int_equal(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "0", FI_SOURCE,
                                hints, &r->info),
                     0);
    fi_freeinfo(hints);
    assert_int_equal(fi_fabric(r->info->fabric_attr, &r->fabric, NULL), 0);
    assert_int_equal(fi_domain(r->fabric, r->info, &r->domain, NULL), 0);
    assert_int_equal(fi_av_open(r->domain, &av_attr, &r->av, NULL), 0);
    assert_int_equal(fi_cq_open(r->domain, &cq_attr, &r->cq, NULL), 0);
    assert_int_equal(fi_endpoint(r->domain, r->info, &r->ep, NULL), 0);
    assert_int_equal(fi_ep_bind(r->ep, &r->av->fid, 0), 0);
    assert_int_equal(fi_ep_bind(r->ep, &r->cq->fid, FI_TRANSMIT | FI_RECV), 0);
    assert_int_equal(fi_enable(r->ep), 0);
    assert_int_equal(fi_getname(&r->ep->fid, &r->sin, &len), 0);
}

static void raw_ep_close(struct raw_ep *r)
{
    fi_close(&r->ep->fid);
    fi_close(&r->av->fid);
    fi_close(&r->cq->fid);
    fi_close(&r->domain->fid);
    fi_close(&r->fabric->fid);
    fi_freeinfo(r->info);
}

/* A raw libfabric sender that knows the tag layout but not the header:
 * @p count messages of 40 bytes on @p tags in turn, up to 64 in flight,
 * progressing @p target meanwhile. */
#define RAW_WINDOW 64
static void raw_send_garbage(cw_na_t *target, const char *dest_ip,
                             uint16_t port, const uint64_t *tags, size_t ntags,
                             unsigned count)
{
    struct raw_ep r;
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
    static struct fi_context2 ctx[RAW_WINDOW];
    struct fi_cq_tagged_entry ev[RAW_WINDOW];
    char junk[40];
    fi_addr_t dest;
    uint64_t end = cw_now_ns() + 3 * WAIT_NS;
    unsigned sent = 0, done = 0;

    memset(junk, 0x5a, sizeof(junk));
    inet_pton(AF_INET, dest_ip, &sin.sin_addr);
    raw_ep_open(&r);
    assert_int_equal(fi_av_insert(r.av, &sin, 1, &dest, 0, NULL), 1);
    /* rxm connects only while both sides progress. */
    while (done < count && cw_now_ns() < end) {
        ssize_t rc = 0, n;

        while (sent < count && sent - done < RAW_WINDOW && rc == 0) {
            rc = fi_tsend(r.ep, junk, sizeof(junk), NULL, dest,
                          tags[sent % ntags], &ctx[sent % RAW_WINDOW]);
            if (rc == 0)
                sent++;
            else
                assert_int_equal(rc, -FI_EAGAIN);
        }
        n = fi_cq_read(r.cq, ev, RAW_WINDOW);
        if (n > 0)
            done += (unsigned)n;
        else
            assert_int_equal(n, -FI_EAGAIN);
        cw_na_progress(target, 0, NULL);
    }
    assert_int_equal(done, count);
    raw_ep_close(&r);
}

static unsigned self_port(cw_na_t *na)
{
    cw_na_addr_t *self;
    char s[256];
    unsigned port;

    assert_int_equal(cw_na_addr_self(na, &self), CW_OK);
    assert_int_equal(cw_na_addr_to_string(na, self, s, sizeof(s)), CW_OK);
    cw_na_addr_free(na, self);
    assert_int_equal(sscanf(s, "ofi+tcp://127.0.0.1:%u", &port), 1);
    return port;
}

/* AddressSanitizer's quarantine (256 MiB by default) would count in the
 * resident set as if the plugin kept freed memory: 8 MiB here. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "quarantine_size_mb=8";
}

/* ThreadSanitizer's shadow memory grows with every byte touched. */
#if defined(__SANITIZE_THREAD__)
#define UNUSED_TAGS_RSS_MAX_KIB (64 * 1024)
#else
#define UNUSED_TAGS_RSS_MAX_KIB (32 * 1024)
#endif

/* Resident set of this process, KiB. */
static long rss_kib(void)
{
    long long kib = proc_self_value("status", "VmRSS");

    assert_true(kib >= 0);
    return (long)kib;
}

/* Garbage was sent to p->b, whose one unexpected receive (into @p in) must
 * still be posted: a real message completes it. */
static void real_message_after(struct pair *p, struct done *r, char *in)
{
    char out[32] = "a real message";
    struct done sd = {0};

    /* The garbage arrives and is dropped; the receive stays posted. */
    for (uint64_t end = cw_now_ns() + 200000000ull; cw_now_ns() < end;)
        cw_na_progress(p->b, 0, NULL);
    assert_int_equal(r->calls, 0);
    assert_int_equal(cw_na_msg_send_unexpected(p->a, out, sizeof(out),
                                               p->b_at_a, 77, done_cb, &sd,
                                               NULL),
                     CW_OK);
    assert_true(wait_done(p->a, p->b, r, 1));
    assert_int_equal(r->status, CW_OK);
    assert_int_equal(r->len, sizeof(out));
    assert_int_equal(r->tag, 77);
    assert_string_equal(in, out);
    assert_true(wait_done(p->a, p->b, &sd, 1));
}

static void test_malformed_dropped(void **state)
{
    struct pair p;
    char in[256];
    struct done r = {0};
    const uint64_t tag = 1ull << 63;
    (void)state;

    pair_open(&p, "ofi+tcp://127.0.0.1:0");
    r.owner = p.b;
    assert_int_equal(
        cw_na_msg_recv_unexpected(p.b, in, sizeof(in), done_cb, &r, NULL),
        CW_OK);
    raw_send_garbage(p.b, "127.0.0.1", (uint16_t)self_port(p.b), &tag, 1, 1);
    real_message_after(&p, &r, in);
    assert_int_equal(cw_na_dropped(p.b), 1);
    assert_int_equal(cw_na_dropped(p.a), 0);
    pair_close(&p);
}

/* Tagged messages on tags the plugin posts no receive for (docs/na-ofi.md,
 * "Tag sinks"): rxm would keep each in a buffer of its own until the
 * connection closed (about 500 MiB per 50 000 of them, and every receive
 * posted later scanned them all); they are received and dropped, and
 * after a first flood the receiver does not grow.  Every class of tag: low
 * bits, none, bits 61, 62 and 63 with others, both high bits. */
static void test_unused_tags_drained(void **state)
{
    struct pair p;
    char in[256];
    struct done r = {0};
    const uint64_t tags[] = {
        7, 0, 1ull << 61, 3ull << 62, (1ull << 63) | 9, (1ull << 62) | 5};
    long before, after;
    (void)state;

    pair_open(&p, "ofi+tcp://127.0.0.1:0");
    r.owner = p.b;
    assert_int_equal(
        cw_na_msg_recv_unexpected(p.b, in, sizeof(in), done_cb, &r, NULL),
        CW_OK);
    /* A first flood sizes the pools (rxm's, the sender's, ASan's); a second
     * one must not grow the process further. */
    raw_send_garbage(p.b, "127.0.0.1", (uint16_t)self_port(p.b), tags,
                     sizeof(tags) / sizeof(tags[0]), 20000);
    before = rss_kib();
    raw_send_garbage(p.b, "127.0.0.1", (uint16_t)self_port(p.b), tags,
                     sizeof(tags) / sizeof(tags[0]), 20000);
    real_message_after(&p, &r, in);
    after = rss_kib();
    print_message("# 20000 more messages on unused tags: grew by %ld KiB; "
                  "%llu dropped in all\n",
                  after - before, (unsigned long long)cw_na_dropped(p.b));
    assert_int_equal(cw_na_dropped(p.b), 40000); /* each, once */
    assert_true(after - before < UNUSED_TAGS_RSS_MAX_KIB);
    pair_close(&p);
}

/* Polls @p na until @p n messages were dropped in all (bounded). */
static void wait_dropped(cw_na_t *na, uint64_t n)
{
    for (uint64_t end = cw_now_ns() + 3 * WAIT_NS;
         cw_na_dropped(na) < n && cw_now_ns() < end;)
        cw_na_progress(na, 0, NULL);
    assert_int_equal(cw_na_dropped(na), n);
}

/* Only one sink per class (three on tcp, where unexpected messages are
 * untagged) is posted at rest: the first drop posts them all, and once no
 * message has come on an unused tag for a second the others are canceled
 * (as the log says: 3 x 32 - 3), their cancel completions consumed; a
 * second flood posts them again and is drained in the same way, and a
 * real message still gets through. */
static void test_unused_tags_calm(void **state)
{
    static char log[1 << 16];
    const char *calm = "back to one receive per class (93 canceled)";
    const uint64_t tags[] = {0, 3ull << 62, 1ull << 63};
    struct pair p;
    char in[256];
    struct done r = {0};
    FILE *f = tmpfile();
    int saved = dup(2), level = cw_log_level_;
    bool seen = false;
    (void)state;

    assert_non_null(f);
    assert_true(saved >= 0);
    pair_open(&p, "ofi+tcp://127.0.0.1:0");
    r.owner = p.b;
    assert_int_equal(
        cw_na_msg_recv_unexpected(p.b, in, sizeof(in), done_cb, &r, NULL),
        CW_OK);
    cw_log_set_level(CW_LOG_INFO);
    fflush(stderr);
    assert_int_equal(dup2(fileno(f), 2), 2);
    raw_send_garbage(p.b, "127.0.0.1", (uint16_t)self_port(p.b), tags, 3, 2000);
    wait_dropped(p.b, 2000);
    for (uint64_t end = cw_now_ns() + 3 * WAIT_NS;
         !seen && cw_now_ns() < end;) {
        ssize_t n;

        cw_na_progress(p.b, 10, NULL);
        fflush(stderr);
        n = pread(fileno(f), log, sizeof(log) - 1, 0);
        log[n > 0 ? n : 0] = '\0';
        seen = strstr(log, calm) != NULL;
    }
    fflush(stderr);
    assert_int_equal(dup2(saved, 2), 2);
    close(saved);
    fclose(f);
    cw_log_set_level(level);
    fputs(log, stderr);
    assert_non_null(strstr(log, "while they last"));
    assert_true(seen);
    raw_send_garbage(p.b, "127.0.0.1", (uint16_t)self_port(p.b), tags, 3, 2000);
    wait_dropped(p.b, 4000);
    real_message_after(&p, &r, in);
    assert_int_equal(cw_na_dropped(p.b), 4000);
    pair_close(&p);
}

/* Unexpected messages nobody has posted a receive for wait in the
 * plugin's queue (ofi+tcp sends them untagged, into the catch-alls), per
 * sender and served in turn, bounded per sender (unexpected_peer_bytes)
 * and in all (unexpected_queue_bytes); beyond either they are dropped and
 * counted.  Each 1000-byte message is charged 1000 bytes and its record
 * (1064 in all on x86-64): 8 of a's 10 fit its share of 9216 bytes, and
 * of c's 6 only 4 fit the queue's 12768 (12 messages). */
static void unexp_send(cw_na_t *from, cw_na_addr_t *to, cw_na_t *at,
                       uint32_t tag)
{
    char out[1000];
    struct done d = {0};

    memset(out, 'a' + (int)(tag % 26), sizeof(out));
    assert_int_equal(cw_na_msg_send_unexpected(from, out, sizeof(out), to, tag,
                                               done_cb, &d, NULL),
                     CW_OK);
    for (uint64_t end = cw_now_ns() + WAIT_NS;
         d.calls == 0 && cw_now_ns() < end;) {
        cw_na_progress(from, 0, NULL);
        cw_na_progress(at, 0, NULL);
    }
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.status, CW_OK);
}

static void test_unexpected_turns_tcp(void **state)
{
    static const char *const params[] = {"unexpected_peer_bytes", "9216",
                                         "unexpected_queue_bytes", "12768",
                                         NULL};
    static const uint32_t order[12] = {0, 100, 1, 101, 2, 102,
                                       3, 103, 4, 5,   6, 7};
    cw_na_t *a, *b, *c;
    cw_na_addr_t *b_at_a, *b_at_c;
    char in[13][1024];
    struct done r[13] = {{0}};
    cw_na_op_t *last;
    (void)state;

    a = tcp_open(NULL);
    b = tcp_open(params);
    c = tcp_open(NULL);
    b_at_a = lookup_self(a, b);
    b_at_c = lookup_self(c, b);
    /* A sender's messages arrive in order: once its last ones were dropped,
     * the earlier ones were queued. */
    for (uint32_t i = 0; i < 10; i++)
        unexp_send(a, b_at_a, b, i);
    wait_dropped(b, 2);
    for (uint32_t i = 0; i < 6; i++)
        unexp_send(c, b_at_c, b, 100 + i);
    wait_dropped(b, 4);

    for (int i = 0; i < 13; i++) {
        r[i].owner = b;
        assert_int_equal(cw_na_msg_recv_unexpected(b, in[i], sizeof(in[i]),
                                                   done_cb, &r[i],
                                                   i == 12 ? &last : NULL),
                         CW_OK);
        if (i == 12)
            break;
        for (uint64_t end = cw_now_ns() + WAIT_NS;
             r[i].calls == 0 && cw_now_ns() < end;)
            cw_na_progress(b, 0, NULL);
        assert_int_equal(r[i].calls, 1);
        assert_int_equal(r[i].status, CW_OK);
        assert_int_equal(r[i].len, 1000);
        assert_int_equal(r[i].tag, order[i]);
        assert_int_equal((unsigned char)in[i][999], 'a' + order[i] % 26);
    }
    /* Nothing else was kept: the last receive still waits, and a cancel
     * completes it once. */
    for (int k = 0; k < 100; k++)
        cw_na_progress(b, 0, NULL);
    assert_int_equal(r[12].calls, 0);
    assert_int_equal(cw_na_cancel(b, last), CW_OK);
    for (uint64_t end = cw_now_ns() + WAIT_NS;
         r[12].calls == 0 && cw_now_ns() < end;)
        cw_na_progress(b, 0, NULL);
    assert_int_equal(r[12].calls, 1);
    assert_int_equal(r[12].status, CW_CANCELED);
    assert_int_equal(cw_na_dropped(b), 4);
    cw_na_addr_free(a, b_at_a);
    cw_na_addr_free(c, b_at_c);
    cw_na_close(a);
    cw_na_close(c);
    cw_na_close(b);
}

/* cw_na_msg_inject over ofi+tcp (fi_inject, fi_tinject): once connected,
 * a message up to inject_size goes with no op and no callback; a longer
 * one, or any while a send to the peer is still an op, answers CW_AGAIN
 * (nothing overtakes it); a peer that does not read bounds them;
 * inject_size 0 turns injects off, and a value past its bound is refused
 * at open.  Whatever the path, the messages
 * arrive once and in order, unexpected and expected alike. */
#define INJ_N 32
static void test_inject_tcp(void **state)
{
    static const char *const off[] = {"inject_size", "0", NULL};
    static const char *const big[] = {"inject_size", "4097", NULL};
    static char buf[4200], in[INJ_N][600];
    struct done d = {0}, d2 = {0}, r[INJ_N], re = {0};
    unsigned injected = 0;
    struct pair p;
    cw_na_t *na;
    (void)state;

    pair_open(&p, "ofi+tcp://127.0.0.1:0");
    /* The first contact connects (rxm answers -FI_EAGAIN until then). */
    memset(&r[0], 0, sizeof(r[0]));
    r[0].owner = p.b;
    assert_int_equal(cw_na_msg_recv_unexpected(p.b, in[0], sizeof(in[0]),
                                               done_cb, &r[0], NULL),
                     CW_OK);
    assert_int_equal(
        cw_na_msg_send_unexpected(p.a, "hi", 3, p.b_at_a, 1, done_cb, &d, NULL),
        CW_OK);
    assert_true(wait_done(p.a, p.b, &r[0], 1));
    assert_true(wait_done(p.a, p.b, &d, 1));
    /* Past inject_size (4096 by default): not injected. */
    assert_int_equal(cw_na_msg_inject(p.a, buf, 4097, p.b_at_a, 2, false),
                     CW_AGAIN);
    /* A run of injects, every message carrying its index. */
    for (unsigned i = 0; i < INJ_N; i++) {
        memset(&r[i], 0, sizeof(r[i]));
        r[i].owner = p.b;
        assert_int_equal(cw_na_msg_recv_unexpected(p.b, in[i], sizeof(in[i]),
                                                   done_cb, &r[i], NULL),
                         CW_OK);
    }
    for (unsigned i = 0; i < INJ_N; i++) {
        cw_status_t st;

        memset(buf, 'a' + (int)i % 26, 200);
        st = cw_na_msg_inject(p.a, buf, 200, p.b_at_a, 100 + i, false);
        if (st == CW_OK) {
            injected++;
            continue;
        }
        /* The provider's transmit queue may be full: the usual way. */
        assert_int_equal(st, CW_AGAIN);
        d = (struct done){0};
        assert_int_equal(cw_na_msg_send_unexpected(p.a, buf, 200, p.b_at_a,
                                                   100 + i, done_cb, &d, NULL),
                         CW_OK);
        assert_true(wait_done(p.a, p.b, &d, 1));
    }
    assert_true(injected > 0);
    assert_true(wait_done(p.b, p.a, &r[INJ_N - 1], 1));
    for (unsigned i = 0; i < INJ_N; i++) {
        assert_int_equal(r[i].calls, 1);
        assert_int_equal(r[i].status, CW_OK);
        assert_int_equal(r[i].len, 200);
        assert_int_equal(r[i].tag, 100 + i);
        assert_int_equal(in[i][0], 'a' + (int)i % 26);
        assert_int_equal(in[i][199], 'a' + (int)i % 26);
    }
    print_message("# %u of %u injected\n", injected, INJ_N);
    /* A send still an op (not yet completed: no progress since) keeps
     * later ones from being injected ahead of it. */
    d = (struct done){0};
    assert_int_equal(
        cw_na_msg_send_expected(p.a, "one", 4, p.b_at_a, 7, done_cb, &d, NULL),
        CW_OK);
    assert_int_equal(cw_na_msg_inject(p.a, "two", 4, p.b_at_a, 8, true),
                     CW_AGAIN);
    assert_int_equal(
        cw_na_msg_send_expected(p.a, "two", 4, p.b_at_a, 8, done_cb, &d2, NULL),
        CW_OK);
    assert_int_equal(cw_na_msg_recv_expected(p.b, in[0], sizeof(in[0]),
                                             p.a_at_b, 7, done_cb, &re, NULL),
                     CW_OK);
    assert_true(wait_done(p.b, p.a, &re, 1));
    assert_string_equal(in[0], "one");
    assert_true(wait_done(p.a, p.b, &d2, 1));
    assert_true(wait_done(p.a, p.b, &d, 1));
    /* With nothing outstanding, an expected message is injected. */
    re = (struct done){0};
    assert_int_equal(cw_na_msg_recv_expected(p.b, in[1], sizeof(in[1]),
                                             p.a_at_b, 8, done_cb, &re, NULL),
                     CW_OK);
    assert_true(wait_done(p.b, p.a, &re, 1));
    assert_string_equal(in[1], "two");
    re = (struct done){0};
    assert_int_equal(cw_na_msg_recv_expected(p.b, in[2], sizeof(in[2]),
                                             p.a_at_b, 9, done_cb, &re, NULL),
                     CW_OK);
    assert_int_equal(cw_na_msg_inject(p.a, "three", 6, p.b_at_a, 9, true),
                     CW_OK);
    assert_true(wait_done(p.b, p.a, &re, 1));
    assert_string_equal(in[2], "three");
    assert_int_equal(cw_na_dropped(p.a), 0);
    assert_int_equal(cw_na_dropped(p.b), 0);
    /* A peer that does not read: the provider's transmit queue fills and
     * injects are refused (2 048 of 200 bytes here), where a send would
     * then be an op under peer_sends_max; once it reads, every injected
     * message arrives, once and in order. */
    unsigned n = 0;
    for (; n < 100000; n++) {
        uint32_t seq = n;
        memcpy(buf, &seq, sizeof(seq));
        if (cw_na_msg_inject(p.a, buf, 200, p.b_at_a, 3, false) != CW_OK)
            break;
    }
    print_message("# %u injected before the first CW_AGAIN\n", n);
    assert_true(n > 0 && n < 100000);
    for (unsigned i = 0; i < n; i++) {
        uint32_t seq;
        re = (struct done){.owner = p.b};
        assert_int_equal(cw_na_msg_recv_unexpected(p.b, in[0], sizeof(in[0]),
                                                   done_cb, &re, NULL),
                         CW_OK);
        assert_true(wait_done(p.b, p.a, &re, 1));
        assert_int_equal(re.status, CW_OK);
        assert_int_equal(re.len, 200);
        memcpy(&seq, in[0], sizeof(seq));
        assert_int_equal(seq, i);
    }
    assert_int_equal(cw_na_dropped(p.b), 0);
    pair_close(&p);

    /* inject_size 0: never injected. */
    na = tcp_open(off);
    cw_na_addr_t *self;
    assert_int_equal(cw_na_addr_self(na, &self), CW_OK);
    assert_int_equal(cw_na_msg_inject(na, "x", 2, self, 1, false), CW_AGAIN);
    cw_na_addr_free(na, self);
    cw_na_close(na);
    assert_int_equal(cw_na_open("ofi+tcp://127.0.0.1:0", 0, big, &na),
                     CW_INVALID_ARG);
}

/* A peer that does not read: past peer_sends_max sends waiting for their
 * completion, a new one to it is refused (CW_BUSY), dropped and counted,
 * and nothing else is; once the peer reads, the waiting ones complete and
 * sends are accepted again.  Here the peer does not progress at all, so
 * rxm cannot even connect and every send waits. */
static void test_peer_sends_max(void **state)
{
    static const char *const params[] = {"peer_sends_max", "4", NULL};
    cw_na_t *a, *b;
    cw_na_addr_t *b_at_a;
    struct done d[6] = {{0}};
    char in[6][64];
    struct done r[6] = {{0}};
    (void)state;

    a = tcp_open(params);
    b = tcp_open(NULL);
    b_at_a = lookup_self(a, b);
    for (int i = 0; i < 4; i++)
        assert_int_equal(cw_na_msg_send_unexpected(a, "hello", 6, b_at_a,
                                                   (uint32_t)i, done_cb, &d[i],
                                                   NULL),
                         CW_OK);
    for (int k = 0; k < 50; k++)
        cw_na_progress(a, 0, NULL);
    assert_int_equal(cw_na_msg_send_unexpected(a, "hello", 6, b_at_a, 4,
                                               done_cb, &d[4], NULL),
                     CW_BUSY);
    assert_int_equal(cw_na_dropped(a), 1);
    for (int i = 0; i < 5; i++) {
        r[i].owner = b;
        assert_int_equal(cw_na_msg_recv_unexpected(b, in[i], sizeof(in[i]),
                                                   done_cb, &r[i], NULL),
                         CW_OK);
    }
    for (uint64_t end = cw_now_ns() + WAIT_NS;
         (d[3].calls == 0 || r[3].calls == 0) && cw_now_ns() < end;) {
        cw_na_progress(a, 0, NULL);
        cw_na_progress(b, 0, NULL);
    }
    /* Each once; rxm may deliver a new connection's first messages out of
     * order (docs/na-ofi.md). */
    unsigned seen = 0;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(d[i].calls, 1);
        assert_int_equal(d[i].status, CW_OK);
        assert_int_equal(r[i].calls, 1);
        assert_true(r[i].tag < 4);
        seen |= 1u << r[i].tag;
    }
    assert_int_equal(seen, 0xf);
    assert_int_equal(d[4].calls, 0); /* refused: no callback */
    assert_int_equal(cw_na_msg_send_unexpected(a, "hello", 6, b_at_a, 5,
                                               done_cb, &d[5], NULL),
                     CW_OK);
    for (uint64_t end = cw_now_ns() + WAIT_NS;
         (d[5].calls == 0 || r[4].calls == 0) && cw_now_ns() < end;) {
        cw_na_progress(a, 0, NULL);
        cw_na_progress(b, 0, NULL);
    }
    assert_int_equal(d[5].status, CW_OK);
    assert_int_equal(r[4].tag, 5);
    assert_int_equal(cw_na_dropped(a), 1);
    cw_na_addr_free(a, b_at_a);
    cw_na_close(a);
    cw_na_close(b);
}

/* A peer none of whose connection attempts succeed (a listener that
 * accepts each connection and closes it before the handshake): a send to
 * it is refused with -FI_EAGAIN, and each post starts another attempt.
 * The plugin spaces them out (ofi_progress.c, "Back-off": one per
 * progress call for 1 ms, then gaps from 1 ms doubling to 1 s), where it
 * used to post again at every progress call.  The send ends once, with
 * CW_TIMEOUT (retry_timeout_ms); and a send to a live peer meanwhile
 * completes while it still waits (the retry list goes on past a peer that
 * backs off). */
static void test_refused_peer_backoff(void **state)
{
    static const char *const params[] = {"retry_timeout_ms", "1500",
                                         "keepalive_ms", "0", NULL};
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    cw_na_t *a, *b;
    cw_na_addr_t *dead, *b_at_a;
    struct done dd = {0}, ld = {0};
    unsigned attempts = 0;
    bool live_sent = false, live_seen = false;
    char uri[64];
    uint64_t t0, end;
    (void)state;

    assert_true(lfd >= 0);
    assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(lfd, 128), 0);
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&sa, &sl), 0);
    snprintf(uri, sizeof(uri), "ofi+tcp://127.0.0.1:%u",
             (unsigned)ntohs(sa.sin_port));
    a = tcp_open(params);
    b = tcp_open(NULL);
    assert_int_equal(cw_na_addr_lookup(a, uri, &dead), CW_OK);
    b_at_a = lookup_self(a, b);
    assert_int_equal(
        cw_na_msg_send_unexpected(a, "lost", 5, dead, 1, done_cb, &dd, NULL),
        CW_OK);
    t0 = cw_now_ns();
    end = t0 + WAIT_NS;
    while (dd.calls == 0 && cw_now_ns() < end) {
        int fd;

        cw_na_progress(a, 0, NULL);
        cw_na_progress(b, 0, NULL);
        while ((fd = accept(lfd, NULL, NULL)) >= 0) {
            attempts++;
            close(fd);
        }
        if (!live_sent && cw_now_ns() - t0 > 300ull * 1000000ull) {
            assert_int_equal(cw_na_msg_send_unexpected(a, "live", 5, b_at_a, 2,
                                                       done_cb, &ld, NULL),
                             CW_OK);
            live_sent = true;
        }
        if (ld.calls == 1 && !live_seen) {
            live_seen = true;
            assert_int_equal(dd.calls, 0); /* not held behind it */
        }
    }
    assert_int_equal(dd.calls, 1);
    assert_int_equal(dd.status, CW_TIMEOUT);
    assert_int_equal(ld.calls, 1);
    assert_int_equal(ld.status, CW_OK);
    /* In 1.5 s: a few in the first millisecond, then about 11.  Posting at
     * every progress call made one per accept-and-close, hundreds. */
    print_message("%u connection attempts in %llu ms\n", attempts,
                  (unsigned long long)((cw_now_ns() - t0) / 1000000ull));
    assert_true(attempts >= 2);
    assert_true(attempts <= 40);
    cw_na_addr_free(a, dead);
    cw_na_addr_free(a, b_at_a);
    cw_na_close(a);
    cw_na_close(b);
    close(lfd);
}

/* A peer that has gone (ofi_connprobe.c).  b talks to a, then closes:
 * rxm's attempts to reconnect are refused, and so is the plugin's own TCP
 * connect to b's address, so a fails the receive it had posted for b
 * with CW_DISCONNECTED at the first keepalive probe, where it used to wait
 * for peer_timeout_ms (10 minutes here: nothing else can end it within
 * the test's bound).  Then the two cases the probe must leave alone, with
 * a peer timeout of 1.5 s:
 * - something still listens at the address (a plain socket that accepts
 *   and closes each connection: rxm never connects, the probe's connect
 *   succeeds): the receive ends at the peer timeout, not before;
 * - a peer never heard from: CW_UNREACHABLE at the peer timeout, as
 *   before (a server not up yet is not judged by its port). */
static void gone_peer_recv(const char *const *params, bool relisten,
                           cw_status_t want, uint64_t min_ms, uint64_t max_ms)
{
    cw_na_t *a = tcp_open(params), *b = tcp_open(NULL);
    cw_na_addr_t *b_at_a = lookup_self(a, b), *a_at_b = lookup_self(b, a);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct done r = {0}, sd = {0}, x = {0};
    char in[64], buf[64];
    int one = 1, lfd = -1;
    uint64_t t0, ms;

    r.owner = a;
    assert_int_equal(
        cw_na_msg_recv_unexpected(a, in, sizeof(in), done_cb, &r, NULL), CW_OK);
    assert_int_equal(
        cw_na_msg_send_unexpected(b, "hi", 3, a_at_b, 1, done_cb, &sd, NULL),
        CW_OK);
    assert_true(wait_done(a, b, &r, 1));
    assert_int_equal(r.status, CW_OK);
    assert_true(wait_done(b, a, &sd, 1));
    sa.sin_port = htons((uint16_t)self_port(b));
    assert_int_equal(cw_na_msg_recv_expected(a, buf, sizeof(buf), b_at_a, 7,
                                             done_cb, &x, NULL),
                     CW_OK);
    cw_na_addr_free(b, a_at_b);
    cw_na_close(b);
    if (relisten) {
        lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        assert_true(lfd >= 0);
        assert_int_equal(
            setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)), 0);
        assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        assert_int_equal(listen(lfd, 128), 0);
    }
    t0 = cw_now_ns();
    for (uint64_t end = t0 + WAIT_NS; x.calls == 0 && cw_now_ns() < end;) {
        int fd;

        cw_na_progress(a, 0, NULL);
        while (lfd >= 0 && (fd = accept(lfd, NULL, NULL)) >= 0)
            close(fd);
    }
    ms = (cw_now_ns() - t0) / 1000000ull;
    print_message("receive from the closed peer ended %s after %llu ms\n",
                  cw_status_name(x.status), (unsigned long long)ms);
    assert_int_equal(x.calls, 1);
    assert_int_equal(x.status, want);
    assert_true(ms >= min_ms);
    assert_true(ms <= max_ms);
    if (lfd >= 0)
        close(lfd);
    cw_na_addr_free(a, b_at_a);
    cw_na_close(a);
}

static void test_gone_peer_refused_tcp(void **state)
{
    static const char *const probe[] = {"keepalive_ms", "100",
                                        "peer_timeout_ms", "600000", NULL};
    static const char *const timeout[] = {"keepalive_ms", "100",
                                          "peer_timeout_ms", "1500", NULL};
    static const char *const params[] = {"keepalive_ms", "100",
                                         "peer_timeout_ms", "1500", NULL};
    struct done x = {0};
    cw_na_t *a;
    cw_na_addr_t *dead;
    char uri[64], buf[16];
    uint64_t t0, ms;
    int lfd;
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    (void)state;

    gone_peer_recv(probe, false, CW_DISCONNECTED, 0, WAIT_NS / 1000000ull);
    gone_peer_recv(timeout, true, CW_DISCONNECTED, 1500, WAIT_NS / 1000000ull);

    /* Never heard from: a port nothing listens on. */
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(lfd >= 0);
    assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&sa, &sl), 0);
    close(lfd);
    snprintf(uri, sizeof(uri), "ofi+tcp://127.0.0.1:%u",
             (unsigned)ntohs(sa.sin_port));
    a = tcp_open(params);
    assert_int_equal(cw_na_addr_lookup(a, uri, &dead), CW_OK);
    assert_int_equal(cw_na_msg_recv_expected(a, buf, sizeof(buf), dead, 7,
                                             done_cb, &x, NULL),
                     CW_OK);
    t0 = cw_now_ns();
    assert_true(wait_done(a, NULL, &x, 1));
    ms = (cw_now_ns() - t0) / 1000000ull;
    print_message("receive from a peer never heard from ended %s after %llu "
                  "ms\n",
                  cw_status_name(x.status), (unsigned long long)ms);
    assert_int_equal(x.status, CW_UNREACHABLE);
    assert_true(ms >= 1500);
    cw_na_addr_free(a, dead);
    cw_na_close(a);
}

/* Messages queued for nobody are freed with the instance (LeakSanitizer
 * checks it), and their senders' references with them. */
static void test_unexpected_queued_at_close(void **state)
{
    cw_na_t *a, *b;
    cw_na_addr_t *b_at_a;
    (void)state;

    a = tcp_open(NULL);
    b = tcp_open(NULL);
    b_at_a = lookup_self(a, b);
    for (uint32_t i = 0; i < 4; i++)
        unexp_send(a, b_at_a, b, i);
    for (int k = 0; k < 100; k++)
        cw_na_progress(b, 0, NULL);
    assert_int_equal(cw_na_dropped(b), 0);
    cw_na_addr_free(a, b_at_a);
    cw_na_close(b);
    cw_na_close(a);
}

/* Expected messages nobody has posted a receive for wait in a bounded early
 * queue (early_max): a message that came early is delivered when its
 * receive is posted, even after many unmatched ones; beyond the bound the
 * oldest are dropped; receives match on (source, tag), oldest message
 * first. */
struct early_fix {
    cw_na_t *a, *b, *c; /* a receives; b and c send */
    cw_na_addr_t *a_at_b, *a_at_c, *b_at_a;
};

/* Sends one expected message from @p from and waits for its completion. */
static void early_send(struct early_fix *f, cw_na_t *from, cw_na_addr_t *to,
                       uint32_t tag, const char *text)
{
    struct done d = {0};

    assert_int_equal(cw_na_msg_send_expected(from, text, strlen(text) + 1, to,
                                             tag, done_cb, &d, NULL),
                     CW_OK);
    for (uint64_t end = cw_now_ns() + WAIT_NS;
         d.calls == 0 && cw_now_ns() < end;) {
        cw_na_progress(from, 0, NULL);
        cw_na_progress(f->a, 0, NULL);
    }
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.status, CW_OK);
}

static void early_progress(struct early_fix *f, struct done *d,
                           uint64_t wait_ns)
{
    for (uint64_t end = cw_now_ns() + wait_ns;
         d->calls == 0 && cw_now_ns() < end;) {
        cw_na_progress(f->a, 0, NULL);
        cw_na_progress(f->b, 0, NULL);
        cw_na_progress(f->c, 0, NULL);
    }
}

/* Posts a receive for @p tag from b on a and waits up to @p wait_ns. */
static void early_recv(struct early_fix *f, uint32_t tag, char *in, size_t size,
                       uint64_t wait_ns, struct done *d, cw_na_op_t **op_p)
{
    *d = (struct done){0};
    memset(in, 0, size);
    assert_int_equal(cw_na_msg_recv_expected(f->a, in, size, f->b_at_a, tag,
                                             done_cb, d, op_p),
                     CW_OK);
    early_progress(f, d, wait_ns);
}

/* Cancels a receive that matched nothing: it completes once, canceled. */
static void early_cancel(struct early_fix *f, struct done *d, cw_na_op_t *op)
{
    assert_int_equal(d->calls, 0);
    assert_int_equal(cw_na_cancel(f->a, op), CW_OK);
    early_progress(f, d, WAIT_NS);
    assert_int_equal(d->calls, 1);
    assert_int_equal(d->status, CW_CANCELED);
}

/* A marker message to a posted receive: once it is in, everything b sent
 * before it has been through a's matching (one connection, in order). */
static void early_sync(struct early_fix *f)
{
    char in[32];
    struct done d = {0}, s = {0};

    assert_int_equal(cw_na_msg_recv_expected(f->a, in, sizeof(in), f->b_at_a,
                                             0xfffffff0u, done_cb, &d, NULL),
                     CW_OK);
    assert_int_equal(cw_na_msg_send_expected(f->b, "sync", 5, f->a_at_b,
                                             0xfffffff0u, done_cb, &s, NULL),
                     CW_OK);
    for (uint64_t end = cw_now_ns() + WAIT_NS;
         (d.calls == 0 || s.calls == 0) && cw_now_ns() < end;) {
        cw_na_progress(f->a, 0, NULL);
        cw_na_progress(f->b, 0, NULL);
    }
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.status, CW_OK);
    assert_string_equal(in, "sync");
}

static void early_queue(const char *uri)
{
    const char *params[] = {"early_max", "8", NULL};
    struct early_fix f;
    struct done d;
    cw_na_op_t *op = NULL;
    char in[64], text[32];

    assert_int_equal(cw_na_open(uri, CW_NA_LISTEN, params, &f.a), CW_OK);
    assert_int_equal(cw_na_open(uri, CW_NA_LISTEN, NULL, &f.b), CW_OK);
    assert_int_equal(cw_na_open(uri, CW_NA_LISTEN, NULL, &f.c), CW_OK);
    f.a_at_b = lookup_self(f.b, f.a);
    f.a_at_c = lookup_self(f.c, f.a);
    f.b_at_a = lookup_self(f.a, f.b);

    /* Early, then seven unmatched: eight kept, the early one delivered. */
    early_send(&f, f.b, f.a_at_b, 7, "early");
    for (uint32_t t = 100; t < 107; t++) {
        snprintf(text, sizeof(text), "unmatched %u", t);
        early_send(&f, f.b, f.a_at_b, t, text);
    }
    early_sync(&f);
    early_recv(&f, 7, in, sizeof(in), WAIT_NS, &d, NULL);
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.status, CW_OK);
    assert_int_equal(d.len, 6);
    assert_string_equal(in, "early");

    /* Eight more: the seven oldest (100..106) go, 200..207 stay. */
    for (uint32_t t = 200; t < 208; t++) {
        snprintf(text, sizeof(text), "kept %u", t);
        early_send(&f, f.b, f.a_at_b, t, text);
    }
    early_sync(&f);
    early_recv(&f, 200, in, sizeof(in), WAIT_NS, &d, NULL);
    assert_int_equal(d.status, CW_OK);
    assert_string_equal(in, "kept 200");
    early_recv(&f, 207, in, sizeof(in), WAIT_NS, &d, NULL);
    assert_int_equal(d.status, CW_OK);
    assert_string_equal(in, "kept 207");
    early_recv(&f, 106, in, sizeof(in), 100000000ull, &d, &op);
    early_cancel(&f, &d, op); /* dropped: nothing to match */

    /* Same (source, tag) twice: the oldest message first. */
    early_send(&f, f.b, f.a_at_b, 9, "one");
    early_send(&f, f.b, f.a_at_b, 9, "two");
    early_sync(&f);
    early_recv(&f, 9, in, sizeof(in), WAIT_NS, &d, NULL);
    assert_string_equal(in, "one");
    early_recv(&f, 9, in, sizeof(in), WAIT_NS, &d, NULL);
    assert_string_equal(in, "two");

    /* Another source's message with the same tag does not match. */
    early_send(&f, f.c, f.a_at_c, 300, "from c");
    early_recv(&f, 300, in, sizeof(in), 100000000ull, &d, &op);
    early_cancel(&f, &d, op);
    early_send(&f, f.b, f.a_at_b, 300, "from b");
    early_sync(&f);
    early_recv(&f, 300, in, sizeof(in), WAIT_NS, &d, NULL);
    assert_int_equal(d.status, CW_OK);
    assert_string_equal(in, "from b");

    /* Two receives posted for one tag, from b and from c (the plugin
     * files them under the tag alone): each message goes to the receive
     * for its sender, whichever comes first. */
    {
        cw_na_addr_t *c_at_a = lookup_self(f.a, f.c);
        struct done db = {0}, dc = {0};
        char inb[32] = "", inc[32] = "";

        assert_int_equal(cw_na_msg_recv_expected(f.a, inb, sizeof(inb),
                                                 f.b_at_a, 500, done_cb, &db,
                                                 NULL),
                         CW_OK);
        assert_int_equal(cw_na_msg_recv_expected(f.a, inc, sizeof(inc), c_at_a,
                                                 500, done_cb, &dc, NULL),
                         CW_OK);
        early_send(&f, f.c, f.a_at_c, 500, "to c's");
        early_send(&f, f.b, f.a_at_b, 500, "to b's");
        early_progress(&f, &db, WAIT_NS);
        early_progress(&f, &dc, WAIT_NS);
        assert_int_equal(db.calls, 1);
        assert_int_equal(dc.calls, 1);
        assert_string_equal(inb, "to b's");
        assert_string_equal(inc, "to c's");
        cw_na_addr_free(f.a, c_at_a);
    }

    cw_na_addr_free(f.b, f.a_at_b);
    cw_na_addr_free(f.c, f.a_at_c);
    cw_na_addr_free(f.a, f.b_at_a);
    cw_na_close(f.c);
    cw_na_close(f.b);
    cw_na_close(f.a);
}

static void test_early_queue_tcp(void **state)
{
    (void)state;
    early_queue("ofi+tcp://127.0.0.1:0");
}

static void test_early_queue_shm(void **state)
{
    (void)state;
    early_queue("ofi+shm://");
}

/* An unexpected or expected message longer than the posted buffer
 * completes the receive with CW_OVERFLOW and leaves the connection alone:
 * the next messages between the pair, both ways, go through at once. */
static void overflow_keeps_connection(const char *uri)
{
    struct pair p;
    char small[4], in[64];
    const char *text = "longer than four bytes";
    struct done r = {0}, s = {0}, r2 = {0}, s2 = {0};

    pair_open(&p, uri);
    r.owner = p.b;
    assert_int_equal(
        cw_na_msg_recv_unexpected(p.b, small, sizeof(small), done_cb, &r, NULL),
        CW_OK);
    assert_int_equal(cw_na_msg_send_unexpected(p.a, text, strlen(text) + 1,
                                               p.b_at_a, 399, done_cb, &s,
                                               NULL),
                     CW_OK);
    assert_true(wait_done(p.a, p.b, &r, 1));
    assert_true(wait_done(p.a, p.b, &s, 1));
    assert_int_equal(r.status, CW_OVERFLOW);
    assert_int_equal(s.status, CW_OK);
    r = (struct done){0};
    s = (struct done){0};
    assert_int_equal(cw_na_msg_recv_expected(p.b, small, sizeof(small),
                                             p.a_at_b, 400, done_cb, &r, NULL),
                     CW_OK);
    assert_int_equal(cw_na_msg_send_expected(p.a, text, strlen(text) + 1,
                                             p.b_at_a, 400, done_cb, &s, NULL),
                     CW_OK);
    assert_true(wait_done(p.a, p.b, &r, 1));
    assert_true(wait_done(p.a, p.b, &s, 1));
    assert_int_equal(r.status, CW_OVERFLOW);
    assert_int_equal(s.status, CW_OK);
    for (int dir = 0; dir < 2; dir++) {
        cw_na_t *to = dir ? p.a : p.b, *from = dir ? p.b : p.a;
        cw_na_addr_t *src = dir ? p.b_at_a : p.a_at_b;
        cw_na_addr_t *dst = dir ? p.a_at_b : p.b_at_a;

        r2 = (struct done){0};
        s2 = (struct done){0};
        assert_int_equal(cw_na_msg_recv_expected(to, in, sizeof(in), src, 401,
                                                 done_cb, &r2, NULL),
                         CW_OK);
        assert_int_equal(cw_na_msg_send_expected(from, text, strlen(text) + 1,
                                                 dst, 401, done_cb, &s2, NULL),
                         CW_OK);
        assert_true(wait_done(p.a, p.b, &r2, 1));
        assert_true(wait_done(p.a, p.b, &s2, 1));
        assert_int_equal(s2.status, CW_OK);
        assert_int_equal(r2.status, CW_OK);
        assert_string_equal(in, text);
    }
    pair_close(&p);
}

static void test_overflow_keeps_connection_tcp(void **state)
{
    (void)state;
    overflow_keeps_connection("ofi+tcp://127.0.0.1:0");
}

static void test_overflow_keeps_connection_shm(void **state)
{
    (void)state;
    overflow_keeps_connection("ofi+shm://");
}

/* Expected messages longer than the receiver's eager_size (a sender with a
 * larger one) are dropped, and the catch-alls stay posted: then 4200
 * eager-sized expected messages from another peer (34 MiB: each of the
 * multi-receive buffers of a listening instance is filled, released and
 * reposted twice) all arrive, intact. */
static void oversized_expected(const char *uri)
{
    const char *big[] = {"eager_size", "65536", NULL};
    static char payload[32768];
    cw_na_t *a, *b, *c;
    cw_na_addr_t *b_at_a, *b_at_c, *c_at_b;

    assert_int_equal(cw_na_open(uri, CW_NA_LISTEN, big, &a), CW_OK);
    assert_int_equal(cw_na_open(uri, CW_NA_LISTEN, NULL, &b), CW_OK);
    assert_int_equal(cw_na_open(uri, CW_NA_LISTEN, NULL, &c), CW_OK);
    b_at_a = lookup_self(a, b);
    b_at_c = lookup_self(c, b);
    c_at_b = lookup_self(b, c);
    memset(payload, 0x5a, sizeof(payload));
    for (uint32_t i = 0; i < 12; i++) {
        struct done s = {0};
        /* A connection dropped over the last one may refuse this one. */
        if (cw_na_msg_send_expected(a, payload, sizeof(payload), b_at_a,
                                    500 + i, done_cb, &s, NULL) == CW_OK)
            assert_true(wait_done(a, b, &s, 1));
    }
    for (uint32_t k = 0; k < 4200; k++) {
        static uint8_t in[8192], out[8192];
        struct done r = {0}, s = {0};
        size_t n = cw_na_caps(b)->max_expected_size;

        assert_true(n <= sizeof(out));
        memset(out, (int)(k & 0xff), n);
        out[0] = (uint8_t)(k >> 8);
        memset(in, 0, n);
        assert_int_equal(cw_na_msg_recv_expected(b, in, n, c_at_b, 700 + k,
                                                 done_cb, &r, NULL),
                         CW_OK);
        assert_int_equal(cw_na_msg_send_expected(c, out, n, b_at_c, 700 + k,
                                                 done_cb, &s, NULL),
                         CW_OK);
        assert_true(wait_done(c, b, &r, 1));
        assert_true(wait_done(c, b, &s, 1));
        assert_int_equal(r.status, CW_OK);
        assert_int_equal(s.status, CW_OK);
        assert_int_equal(r.len, n);
        assert_memory_equal(in, out, n);
    }
    cw_na_addr_free(a, b_at_a);
    cw_na_addr_free(c, b_at_c);
    cw_na_addr_free(b, c_at_b);
    cw_na_close(a);
    cw_na_close(b);
    cw_na_close(c);
}

static void test_oversized_expected_tcp(void **state)
{
    (void)state;
    oversized_expected("ofi+tcp://127.0.0.1:0");
}

static void test_oversized_expected_shm(void **state)
{
    (void)state;
    oversized_expected("ofi+shm://");
}

static void test_cancel_all_kinds(void **state)
{
    struct pair p;
    static uint8_t big[1 << 20], rbig[1 << 20];
    struct cw_na_segment ls = {big, sizeof(big)}, rs = {rbig, sizeof(rbig)};
    cw_na_mem_t *lm, *rm, *rm_at_a;
    uint8_t ser[256];
    size_t n;
    cw_na_op_t *ops[5];
    struct done d[5];
    char in[64], in2[64], out[64] = "x";
    (void)state;

    memset(d, 0, sizeof(d));
    pair_open(&p, "ofi+tcp://127.0.0.1:0");
    assert_int_equal(cw_na_mem_register(p.a, &ls, 1, 0, &lm), CW_OK);
    assert_int_equal(
        cw_na_mem_register(p.b, &rs, 1, CW_NA_MEM_READ | CW_NA_MEM_WRITE, &rm),
        CW_OK);
    n = cw_na_mem_serialize_size(p.b, rm);
    assert_int_equal(cw_na_mem_serialize(p.b, ser, n, rm), CW_OK);
    assert_int_equal(cw_na_mem_deserialize(p.a, ser, n, &rm_at_a), CW_OK);
    d[0].owner = p.b;
    assert_int_equal(
        cw_na_msg_recv_unexpected(p.b, in, sizeof(in), done_cb, &d[0], &ops[0]),
        CW_OK);
    assert_int_equal(cw_na_msg_recv_expected(p.a, in2, sizeof(in2), p.b_at_a, 5,
                                             done_cb, &d[1], &ops[1]),
                     CW_OK);
    assert_int_equal(cw_na_msg_send_expected(p.a, out, sizeof(out), p.b_at_a, 6,
                                             done_cb, &d[2], &ops[2]),
                     CW_OK);
    assert_int_equal(cw_na_put(p.a, lm, 0, rm_at_a, 0, sizeof(big), p.b_at_a,
                               done_cb, &d[3], &ops[3]),
                     CW_OK);
    assert_int_equal(cw_na_get(p.a, lm, 0, rm_at_a, 0, sizeof(big), p.b_at_a,
                               done_cb, &d[4], &ops[4]),
                     CW_OK);
    assert_int_equal(cw_na_cancel(p.b, ops[0]), CW_OK);
    for (int i = 1; i < 5; i++)
        assert_int_equal(cw_na_cancel(p.a, ops[i]), CW_OK);
    for (int i = 0; i < 5; i++) {
        assert_true(wait_done(p.a, p.b, &d[i], 1));
        /* Receives cannot have finished; the others may have. */
        if (i < 2)
            assert_int_equal(d[i].status, CW_CANCELED);
        else
            assert_true(d[i].status == CW_CANCELED || d[i].status == CW_OK);
    }
    /* Exactly once: nothing more arrives. */
    for (uint64_t end = cw_now_ns() + 100000000ull; cw_now_ns() < end;) {
        cw_na_progress(p.a, 0, NULL);
        cw_na_progress(p.b, 0, NULL);
    }
    for (int i = 0; i < 5; i++)
        assert_int_equal(d[i].calls, 1);
    cw_na_mem_release(p.a, rm_at_a);
    cw_na_mem_release(p.b, rm);
    cw_na_mem_release(p.a, lm);
    pair_close(&p);
}

/* A get from a region its owner already released makes libfabric's tcp
 * provider drop the connection.  The get fails (not "canceled": nobody
 * canceled it) and, after the plugin's probe renews the peer, traffic to the
 * same peer flows again. */
static void test_released_region_recovers(void **state)
{
    struct pair p;
    static char lbuf[65536], rbuf[65536];
    struct cw_na_segment ls = {lbuf, sizeof(lbuf)}, rs = {rbuf, sizeof(rbuf)};
    cw_na_mem_t *lm, *rm, *rm_at_a;
    uint8_t ser[256];
    struct done g = {0};
    int ok = 0;
    size_t n;
    (void)state;

    pair_open(&p, "ofi+tcp://127.0.0.1:0");
    assert_int_equal(cw_na_mem_register(p.a, &ls, 1, 0, &lm), CW_OK);
    assert_int_equal(cw_na_mem_register(p.b, &rs, 1, CW_NA_MEM_READ, &rm),
                     CW_OK);
    n = cw_na_mem_serialize_size(p.b, rm);
    assert_int_equal(cw_na_mem_serialize(p.b, ser, n, rm), CW_OK);
    assert_int_equal(cw_na_mem_deserialize(p.a, ser, n, &rm_at_a), CW_OK);
    cw_na_mem_release(p.b, rm);
    assert_int_equal(cw_na_get(p.a, lm, 0, rm_at_a, 0, sizeof(lbuf), p.b_at_a,
                               done_cb, &g, NULL),
                     CW_OK);
    assert_true(wait_done(p.a, p.b, &g, 1));
    assert_int_not_equal(g.status, CW_OK);
    assert_int_not_equal(g.status, CW_CANCELED);
    for (int attempt = 0; attempt < 50 && ok < 3; attempt++) {
        char in[16], out[16] = "again";
        struct done r = {.owner = p.b}, sd = {0};
        cw_na_op_t *rop;

        assert_int_equal(
            cw_na_msg_recv_unexpected(p.b, in, sizeof(in), done_cb, &r, &rop),
            CW_OK);
        assert_int_equal(cw_na_msg_send_unexpected(p.a, out, sizeof(out),
                                                   p.b_at_a, 1, done_cb, &sd,
                                                   NULL),
                         CW_OK);
        assert_true(wait_done(p.a, p.b, &sd, 1));
        if (sd.status == CW_OK && wait_done(p.a, p.b, &r, 1)) {
            ok++;
            continue;
        }
        cw_na_cancel(p.b, rop);
        assert_true(wait_done(p.a, p.b, &r, 1));
        for (uint64_t end = cw_now_ns() + 100000000ull; cw_now_ns() < end;) {
            cw_na_progress(p.a, 0, NULL);
            cw_na_progress(p.b, 0, NULL);
        }
    }
    assert_int_equal(ok, 3);
    cw_na_mem_release(p.a, rm_at_a);
    cw_na_mem_release(p.a, lm);
    pair_close(&p);
}

/* With peer_idle_s=1 both sides drop each other once unused; talking again
 * later inserts them afresh and works. */
static void test_idle_peers_dropped(void **state)
{
    const char *idle[] = {"peer_idle_s", "1", NULL};
    cw_na_t *a, *b;
    cw_na_addr_t *self, *b_at_a;
    char s[256];
    (void)state;

    a = tcp_open(idle);
    b = tcp_open(idle);
    assert_int_equal(cw_na_addr_self(b, &self), CW_OK);
    assert_int_equal(cw_na_addr_to_string(b, self, s, sizeof(s)), CW_OK);
    cw_na_addr_free(b, self);
    for (int round = 0; round < 2; round++) {
        char in[16], out[16] = "idle?";
        struct done r = {.owner = b}, sd = {0};

        assert_int_equal(cw_na_addr_lookup(a, s, &b_at_a), CW_OK);
        assert_int_equal(
            cw_na_msg_recv_unexpected(b, in, sizeof(in), done_cb, &r, NULL),
            CW_OK);
        assert_int_equal(cw_na_msg_send_unexpected(a, out, sizeof(out), b_at_a,
                                                   9, done_cb, &sd, NULL),
                         CW_OK);
        assert_true(wait_done(a, b, &sd, 1));
        assert_true(wait_done(a, b, &r, 1));
        assert_int_equal(sd.status, CW_OK);
        assert_int_equal(r.status, CW_OK);
        assert_int_equal(r.tag, 9);
        cw_na_addr_free(a, b_at_a);
        /* Unused for over a second: both entries go. */
        for (uint64_t end = cw_now_ns() + 1300000000ull; cw_now_ns() < end;) {
            cw_na_progress(a, 0, NULL);
            cw_na_progress(b, 0, NULL);
        }
    }
    cw_na_close(a);
    cw_na_close(b);
}

/* ---- a peer editing its copy of a serialized memory handle ----
 *
 * The target (a child process) registers two neighbouring regions: a
 * "secret" one, read-write, meant for somebody else, and the one it hands
 * out, read-only, with guard bytes in front.  The attacker edits the
 * handle it was given (access bits, length, address, key) and tries put
 * and get through each edit, each from a fresh instance (tcp drops the
 * connection on a rejected access).  Nothing outside the handed-out
 * region may be read, and nothing at all written. */
#define WID_PAGE   4096u
#define WID_GUARD  0xaa
#define WID_GIVEN  0x11
#define WID_SECRET 0x5e
#define WID_EVIL   0x77
#define WID_WONLY  0x33

static void write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n <= 0)
            _exit(90);
        p += n;
        len -= (size_t)n;
    }
}

/* Child processes are the test binary run again ("--child ROLE URI UP
 * DOWN", see main()), so no libfabric state crosses fork.  @p up_p gets
 * the end to read from the child, @p down_p the one to write to it. */
static pid_t child_spawn(const char *role, const char *uri, int *up_p,
                         int *down_p)
{
    int up[2], down[2];
    char ups[16], downs[16];
    pid_t pid;

    assert_int_equal(pipe(up), 0);
    assert_int_equal(pipe(down), 0);
    snprintf(ups, sizeof(ups), "%d", up[1]);
    snprintf(downs, sizeof(downs), "%d", down[0]);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(up[0]);
        close(down[1]);
        execl(cw_test_self_exe(), "test_ofi_plugin", "--child", role, uri, ups,
              downs, (char *)NULL);
        _exit(89);
    }
    close(up[1]);
    close(down[0]);
    *up_p = up[0];
    *down_p = down[1];
    return pid;
}

/* Waits for a child and checks it exited with 0. */
static void child_reap(pid_t pid, int up, int down)
{
    int status;

    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    close(up);
    close(down);
}

/* In a child: opens an instance on @p uri and sends its address up. */
static cw_na_t *child_open(const char *uri, int up)
{
    cw_na_addr_t *self;
    char addr[256] = ""; /* all 256 bytes are sent */
    cw_na_t *na;

    if (cw_na_open(uri, CW_NA_LISTEN, NULL, &na) != CW_OK ||
        cw_na_addr_self(na, &self) != CW_OK ||
        cw_na_addr_to_string(na, self, addr, sizeof(addr)) != CW_OK)
        _exit(92);
    cw_na_addr_free(na, self);
    write_all(up, addr, sizeof(addr));
    return na;
}

static bool all_bytes(const uint8_t *b, size_t len, uint8_t v)
{
    for (size_t i = 0; i < len; i++)
        if (b[i] != v)
            return false;
    return true;
}

/* Child: serves the regions until the parent says stop, then reports
 * which pages changed (bit 0 guard, 1 given, 2 secret, 3 write-only). */
static void widen_target(const char *uri, int up, int down)
{
    uint8_t *region = aligned_alloc(WID_PAGE, 4 * WID_PAGE);
    struct cw_na_segment secret = {region + 2 * WID_PAGE, WID_PAGE};
    struct cw_na_segment given = {region + WID_PAGE, WID_PAGE};
    struct cw_na_segment wonly = {region + 3 * WID_PAGE, WID_PAGE};
    cw_na_mem_t *sm, *gm, *wm;
    cw_na_t *na;
    uint8_t ser[256];
    uint32_t n32;
    uint8_t mask = 0;
    char c;
    size_t n;

    if (region == NULL)
        _exit(91);
    memset(region, WID_GUARD, WID_PAGE);
    memset(region + WID_PAGE, WID_GIVEN, WID_PAGE);
    memset(region + 2 * WID_PAGE, WID_SECRET, WID_PAGE);
    memset(region + 3 * WID_PAGE, WID_WONLY, WID_PAGE);
    na = child_open(uri, up);
    if (cw_na_mem_register(na, &secret, 1, CW_NA_MEM_READ | CW_NA_MEM_WRITE,
                           &sm) != CW_OK ||
        cw_na_mem_register(na, &given, 1, CW_NA_MEM_READ, &gm) != CW_OK ||
        cw_na_mem_register(na, &wonly, 1, CW_NA_MEM_WRITE, &wm) != CW_OK)
        _exit(93);
    n = cw_na_mem_serialize_size(na, gm);
    if (n > sizeof(ser) || cw_na_mem_serialize(na, ser, n, gm) != CW_OK)
        _exit(93);
    n32 = (uint32_t)n;
    write_all(up, &n32, sizeof(n32));
    write_all(up, ser, n);
    if (cw_na_mem_serialize(na, ser, n, wm) != CW_OK)
        _exit(94);
    write_all(up, ser, n);
    fcntl(down, F_SETFL, O_NONBLOCK);
    for (uint64_t end = cw_now_ns() + 60 * 1000000000ull;
         cw_now_ns() < end && read(down, &c, 1) != 1;)
        cw_na_progress(na, 0, NULL);
    if (!all_bytes(region, WID_PAGE, WID_GUARD))
        mask |= 1;
    if (!all_bytes(region + WID_PAGE, WID_PAGE, WID_GIVEN))
        mask |= 2;
    if (!all_bytes(region + 2 * WID_PAGE, WID_PAGE, WID_SECRET))
        mask |= 4;
    if (!all_bytes(region + 3 * WID_PAGE, WID_PAGE, WID_WONLY))
        mask |= 8;
    write_all(up, &mask, 1);
    cw_na_mem_release(na, wm);
    cw_na_mem_release(na, gm);
    cw_na_mem_release(na, sm);
    cw_na_close(na);
    free(region);
}

/* Serialized handles are little-endian, like every host this runs on. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "little-endian");

static uint64_t wid_get64(const uint8_t *p)
{
    uint64_t v;

    memcpy(&v, p, sizeof(v));
    return v;
}

static void wid_put64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, sizeof(v));
}

enum wid_edit { WID_NONE, WID_ACCESS, WID_LONGER, WID_EARLIER, WID_KEY };

/* One attempt from a fresh instance: put or get 16 bytes at @p off
 * through the handle edited by @p edit.  Returns the op's status (or the
 * status of the call that refused it); *got gets what a get read. */
static cw_status_t widen_try(const char *uri, const char *addr,
                             const uint8_t *ser, size_t n, enum wid_edit edit,
                             bool put, size_t off, uint8_t *got)
{
    const char *params[] = {"keepalive_ms", "100", "peer_timeout_ms", "1000",
                            NULL};
    uint8_t h[256], buf[16];
    struct cw_na_segment ls = {buf, sizeof(buf)};
    cw_na_mem_t *lm, *rm;
    cw_na_addr_t *peer;
    struct done d = {0};
    cw_status_t st;
    cw_na_t *na;
    uint64_t a = wid_get64(ser + 16), len = wid_get64(ser + 24);

    memcpy(h, ser, n);
    switch (edit) {
    case WID_NONE:
        break;
    case WID_ACCESS: /* claim the access the handle does not grant */
        h[4] |= 3;
        break;
    case WID_LONGER: /* into the secret page after it */
        wid_put64(h + 24, len + WID_PAGE);
        h[4] |= 3;
        break;
    case WID_EARLIER: /* into the guard page before it */
        wid_put64(h + 16, a - WID_PAGE);
        wid_put64(h + 24, len + WID_PAGE);
        h[4] |= 3;
        break;
    case WID_KEY: /* the secret region: registered just before, next page */
        wid_put64(h + 32, wid_get64(ser + 32) - 1);
        if (a != 0)
            wid_put64(h + 16, a + WID_PAGE);
        h[4] |= 3;
        break;
    }
    memset(buf, put ? WID_EVIL : 0, sizeof(buf));
    assert_int_equal(cw_na_open(uri, 0, params, &na), CW_OK);
    assert_int_equal(cw_na_addr_lookup(na, addr, &peer), CW_OK);
    assert_int_equal(cw_na_mem_register(na, &ls, 1, 0, &lm), CW_OK);
    st = cw_na_mem_deserialize(na, h, n, &rm);
    if (st == CW_OK) {
        st = put ? cw_na_put(na, lm, 0, rm, off, sizeof(buf), peer, done_cb, &d,
                             NULL)
                 : cw_na_get(na, lm, 0, rm, off, sizeof(buf), peer, done_cb, &d,
                             NULL);
        if (st == CW_OK) {
            assert_true(wait_done(na, NULL, &d, 1));
            st = d.status;
        }
        cw_na_mem_release(na, rm);
    }
    memcpy(got, buf, sizeof(buf));
    cw_na_mem_release(na, lm);
    cw_na_addr_free(na, peer);
    cw_na_close(na);
    return st;
}

static void handle_widening(const char *uri)
{
    static const struct {
        enum wid_edit edit;
        bool put, wonly;
        size_t off;
    } tries[] = {
        {WID_ACCESS, true, false, 0},
        {WID_ACCESS, false, true, 0},
        {WID_LONGER, false, false, WID_PAGE},
        {WID_LONGER, true, false, WID_PAGE},
        {WID_EARLIER, false, false, 0},
        {WID_EARLIER, true, false, 0},
        {WID_KEY, false, false, 0},
        {WID_KEY, true, false, 0},
    };
    int up, down;
    char addr[256];
    uint8_t ser[256], wser[256], got[16], mask = 0xff;
    int leaked = 0;
    uint32_t n32;
    cw_status_t st;
    pid_t pid = child_spawn("widen-target", uri, &up, &down);

    assert_true(cw_test_read_all(up, addr, sizeof(addr)));
    assert_true(cw_test_read_all(up, &n32, sizeof(n32)));
    assert_true(n32 >= 40 && n32 <= sizeof(ser));
    assert_true(cw_test_read_all(up, ser, n32));
    assert_true(cw_test_read_all(up, wser, n32));

    /* The handle as given works for what it grants. */
    st = widen_try(uri, addr, ser, n32, WID_NONE, false, 0, got);
    assert_int_equal(st, CW_OK);
    assert_true(all_bytes(got, sizeof(got), WID_GIVEN));
    for (size_t i = 0; i < sizeof(tries) / sizeof(tries[0]); i++) {
        st = widen_try(uri, addr, tries[i].wonly ? wser : ser, n32,
                       tries[i].edit, tries[i].put, tries[i].off, got);
        print_message(
            "edit %d %s%s: %s\n", tries[i].edit, tries[i].put ? "put" : "get",
            tries[i].wonly ? " (write-only handle)" : "", cw_status_str(st));
        if (!tries[i].put && st == CW_OK &&
            (all_bytes(got, sizeof(got), WID_GUARD) ||
             all_bytes(got, sizeof(got), WID_SECRET) ||
             all_bytes(got, sizeof(got), WID_WONLY)))
            leaked++;
    }
    /* And the target still serves it. */
    st = widen_try(uri, addr, ser, n32, WID_NONE, false, 0, got);
    assert_int_equal(st, CW_OK);
    write_all(down, "x", 1);
    assert_true(cw_test_read_all(up, &mask, 1));
    child_reap(pid, up, down);
    /* Bit 0: the guard page changed, 1: the read-only region, 2: the
     * secret one, 3: the write-only one. */
    print_message("pages written: 0x%x, reads outside the handle: %d\n", mask,
                  leaked);
    assert_int_equal(mask, 0);
    assert_int_equal(leaked, 0);
}

static void test_handle_widening_tcp(void **state)
{
    (void)state;
    handle_widening("ofi+tcp://127.0.0.1:0");
}

static void test_handle_widening_shm(void **state)
{
    (void)state;
    handle_widening("ofi+shm://");
}

/* ---- what a peer sent before it went away ----
 *
 * A child sends many expected messages nobody waits for, then the one the
 * parent has a receive posted for, and exits once all are sent (fi_shm:
 * complete at the sender, in the parent's region).  The parent, which
 * did not progress meanwhile, then notices the death (the region's lock
 * is gone) while those messages are still to be read: the posted receive
 * must get its message, not CW_DISCONNECTED. */
#define LAST_WORDS_FLOOD 400u
#define LAST_WORDS_TAG   7u

static void last_words_child(const char *uri, int up, int down)
{
    char parent[256];
    cw_na_addr_t *to;
    struct done d = {0};
    cw_na_t *na = child_open(uri, up);
    char c;

    if (!cw_test_read_all(down, parent, sizeof(parent)) ||
        cw_na_addr_lookup(na, parent, &to) != CW_OK)
        _exit(93);
    /* First contact (fi_shm connects through the receiver's progress). */
    if (cw_na_msg_send_expected(na, "hello", 6, to, 1, done_cb, &d, NULL) !=
        CW_OK)
        _exit(94);
    for (uint64_t end = cw_now_ns() + WAIT_NS;
         d.calls < 1 && cw_now_ns() < end;)
        cw_na_progress(na, 0, NULL);
    if (d.calls != 1 || d.status != CW_OK || !cw_test_read_all(down, &c, 1))
        _exit(95);
    d = (struct done){0};
    for (unsigned i = 0; i < LAST_WORDS_FLOOD; i++)
        if (cw_na_msg_send_expected(na, "unwanted", 9, to, 1000 + i, done_cb,
                                    &d, NULL) != CW_OK)
            _exit(96);
    if (cw_na_msg_send_expected(na, "last words", 11, to, LAST_WORDS_TAG,
                                done_cb, &d, NULL) != CW_OK)
        _exit(97);
    for (uint64_t end = cw_now_ns() + WAIT_NS;
         d.calls < (int)LAST_WORDS_FLOOD + 1 && cw_now_ns() < end;)
        cw_na_progress(na, 0, NULL);
    if (d.calls != (int)LAST_WORDS_FLOOD + 1 || d.status != CW_OK)
        _exit(98);
    cw_na_addr_free(na, to);
    cw_na_close(na);
}

static void test_last_words_shm(void **state)
{
    const char *uri = "ofi+shm://";
    int up, down;
    char addr[256] = "", in[32] = "", hello[8]; /* all 256 bytes are sent */
    cw_na_addr_t *self, *child;
    struct done h = {0}, r = {0};
    cw_na_t *na;
    pid_t pid = child_spawn("last-words", uri, &up, &down);
    (void)state;

    assert_int_equal(cw_na_open(uri, CW_NA_LISTEN, NULL, &na), CW_OK);
    assert_int_equal(cw_na_addr_self(na, &self), CW_OK);
    assert_int_equal(cw_na_addr_to_string(na, self, addr, sizeof(addr)), CW_OK);
    cw_na_addr_free(na, self);
    write_all(down, addr, sizeof(addr));
    assert_true(cw_test_read_all(up, addr, sizeof(addr)));
    assert_int_equal(cw_na_addr_lookup(na, addr, &child), CW_OK);
    assert_int_equal(cw_na_msg_recv_expected(na, hello, sizeof(hello), child, 1,
                                             done_cb, &h, NULL),
                     CW_OK);
    assert_true(wait_done(na, NULL, &h, 1));
    assert_int_equal(h.status, CW_OK);
    assert_int_equal(cw_na_msg_recv_expected(na, in, sizeof(in), child,
                                             LAST_WORDS_TAG, done_cb, &r, NULL),
                     CW_OK);
    /* Let the child send everything and go, without progressing here. */
    write_all(down, "g", 1);
    child_reap(pid, up, down);
    usleep(100000); /* past the plugin's 50 ms liveness tick */
    assert_true(wait_done(na, NULL, &r, 1));
    assert_int_equal(r.status, CW_OK);
    assert_string_equal(in, "last words");
    cw_na_addr_free(na, child);
    cw_na_close(na);
}

/* A control ping as the plugin sends it (ofi.h, struct ofi_hdr), claiming
 * to come from @p from. */
static void forged_ping(uint8_t hdr[64], const struct sockaddr_in *from)
{
    uint32_t magic = 0x46574f43u;
    uint16_t len = sizeof(*from);

    memset(hdr, 0, 64);
    memcpy(hdr, &magic, 4);
    hdr[4] = 3; /* version */
    hdr[5] = 1; /* OFI_CTRL_PING */
    memcpy(hdr + 6, &len, 2);
    memcpy(hdr + 12, from, sizeof(*from));
}

#define PING_TAG   (1ull << 62)
#define PING_COUNT 400u

/* @p s sends PING_COUNT control pings to @p target, each claiming to come
 * from the next of @p nfrom addresses, progressing @p target and @p v (may
 * be NULL) meanwhile, then for @p linger_ns more.  Returns how many
 * control messages @p v received. */
static unsigned forge_pings(struct raw_ep *s, cw_na_t *target, struct raw_ep *v,
                            const struct sockaddr_in *from, unsigned nfrom,
                            uint64_t linger_ns)
{
    static struct fi_context2 sctx[RAW_WINDOW], vctx[RAW_WINDOW];
    static uint8_t hdr[RAW_WINDOW][64], vbuf[RAW_WINDOW][64];
    struct fi_cq_tagged_entry ev[RAW_WINDOW];
    struct sockaddr_in sin = {.sin_family = AF_INET};
    uint64_t end = cw_now_ns() + 3 * WAIT_NS, stop = 0;
    unsigned sent = 0, done = 0, pongs = 0;
    fi_addr_t dest;

    inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
    sin.sin_port = htons((uint16_t)self_port(target));
    assert_int_equal(fi_av_insert(s->av, &sin, 1, &dest, 0, NULL), 1);
    for (unsigned i = 0; v != NULL && i < RAW_WINDOW; i++)
        assert_int_equal(fi_trecv(v->ep, vbuf[i], 64, NULL, FI_ADDR_UNSPEC,
                                  PING_TAG, 0, &vctx[i]),
                         0);
    while (cw_now_ns() < end && (stop == 0 || cw_now_ns() < stop)) {
        ssize_t rc = 0, n;

        while (sent < PING_COUNT && sent - done < RAW_WINDOW && rc == 0) {
            uint8_t *h = hdr[sent % RAW_WINDOW];

            forged_ping(h, &from[sent % nfrom]);
            rc = fi_tsend(s->ep, h, 64, NULL, dest, PING_TAG,
                          &sctx[sent % RAW_WINDOW]);
            if (rc == 0)
                sent++;
            else
                assert_int_equal(rc, -FI_EAGAIN);
        }
        n = fi_cq_read(s->cq, ev, RAW_WINDOW);
        if (n > 0)
            done += (unsigned)n;
        else
            assert_int_equal(n, -FI_EAGAIN);
        if (done == PING_COUNT && stop == 0)
            stop = cw_now_ns() + linger_ns;
        cw_na_progress(target, 0, NULL);
        if (v == NULL)
            continue;
        n = fi_cq_read(v->cq, ev, RAW_WINDOW);
        for (ssize_t i = 0; i < n; i++) {
            struct fi_context2 *c = ev[i].op_context;

            pongs++;
            assert_int_equal(fi_trecv(v->ep, vbuf[c - vctx], 64, NULL,
                                      FI_ADDR_UNSPEC, PING_TAG, 0, c),
                             0);
        }
    }
    assert_int_equal(done, PING_COUNT);
    return pongs;
}

/* Control pings claim their sender's address and are answered there: a
 * forged one made the plugin send a pong (and connect) wherever it said.
 * Answers are bounded: pings from addresses the instance does not know
 * are answered at a bounded rate (the rest dropped and counted), and a
 * known peer gets at most one pong per tick however many pings name it. */
static void test_forged_ping_bounded(void **state)
{
    struct raw_ep s, v;
    struct sockaddr_in nowhere[PING_COUNT];
    uint64_t dropped;
    unsigned pongs;
    cw_na_t *t;
    (void)state;

    t = tcp_open(NULL);
    raw_ep_open(&s);
    raw_ep_open(&v);
    /* One victim: before, one pong each (400). */
    pongs = forge_pings(&s, t, &v, &v.sin, 1, 300000000ull);
    fprintf(stderr, "pongs reflected to one claimed address: %u of %u\n", pongs,
            PING_COUNT);
    assert_true(pongs >= 1);
    assert_true(pongs <= 16);
    /* Many addresses nobody listens on: before, none dropped. */
    for (unsigned i = 0; i < PING_COUNT; i++) {
        nowhere[i] = v.sin;
        nowhere[i].sin_port = htons((uint16_t)(20000 + i));
    }
    dropped = cw_na_dropped(t);
    forge_pings(&s, t, NULL, nowhere, PING_COUNT, 500000000ull);
    dropped = cw_na_dropped(t) - dropped;
    fprintf(stderr, "pings from %u unknown addresses dropped: %llu\n",
            PING_COUNT, (unsigned long long)dropped);
    assert_true(dropped >= PING_COUNT - 64);
    raw_ep_close(&s);
    raw_ep_close(&v);
    cw_na_close(t);
}

/* A put the target's provider rejects (a key it does not know, a range
 * past the registration) must not be reported CW_OK to its initiator:
 * before, tcp;ofi_rxm completed it when the data left (transmit complete)
 * and only the target knew it was dropped. */
static cw_status_t rejected_put(struct pair *p, size_t len, bool bad_key)
{
    static uint8_t lbuf[65536], rbuf[65536];
    struct cw_na_segment ls = {lbuf, len}, rs = {rbuf, len};
    cw_na_mem_t *lm, *rm, *rm_at_a;
    uint8_t ser[256];
    struct done d = {0};
    size_t n;

    memset(lbuf, 0x77, sizeof(lbuf));
    memset(rbuf, 0, sizeof(rbuf));
    assert_int_equal(cw_na_mem_register(p->a, &ls, 1, 0, &lm), CW_OK);
    assert_int_equal(cw_na_mem_register(p->b, &rs, 1, CW_NA_MEM_WRITE, &rm),
                     CW_OK);
    n = cw_na_mem_serialize_size(p->b, rm);
    assert_int_equal(cw_na_mem_serialize(p->b, ser, n, rm), CW_OK);
    if (bad_key)
        ser[32] ^= 1; /* seg[0].key, lowest byte */
    else
        ser[24] += 1; /* seg[0].len: one byte past the registration */
    assert_int_equal(cw_na_mem_deserialize(p->a, ser, n, &rm_at_a), CW_OK);
    assert_int_equal(cw_na_put(p->a, lm, 0, rm_at_a, bad_key ? 0 : 1, len,
                               p->b_at_a, done_cb, &d, NULL),
                     CW_OK);
    assert_true(wait_done(p->a, p->b, &d, 1));
    assert_true(all_bytes(rbuf, sizeof(rbuf), 0)); /* nothing written */
    cw_na_mem_release(p->a, rm_at_a);
    cw_na_mem_release(p->b, rm);
    cw_na_mem_release(p->a, lm);
    return d.status;
}

static void test_rejected_put_reported_tcp(void **state)
{
    const size_t lens[] = {64, 4096, 65536};
    struct pair p;
    int bad = 0;
    (void)state;

    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        for (int bad_key = 0; bad_key < 2; bad_key++) {
            cw_status_t st;

            pair_open(&p, "ofi+tcp://127.0.0.1:0");
            st = rejected_put(&p, lens[i], bad_key);
            fprintf(stderr, "rejected put of %zu bytes (%s): %s\n", lens[i],
                    bad_key ? "bad key" : "past the end", cw_status_str(st));
            bad += st == CW_OK;
            pair_close(&p);
        }
    }
    assert_int_equal(bad, 0);
}

/* Runs cw_na_close(@p na) with stderr going to a file; returns what the
 * close logged (static buffer). */
/* ---- connections closed before their handshake ----
 *
 * libfabric's tcp provider keeps an accepted socket whose peer closed
 * before sending its connection request when errno happens to hold EAGAIN
 * at that moment (it reads the reason from errno after a recv() of 0), and
 * then holds it, in CLOSE-WAIT, forever.  A thread that last polled a
 * nonblocking socket with nothing to read leaves exactly that, so each
 * progress call below starts with errno = EAGAIN, as in a busy gateway.
 * The plugin resets such sockets (ofi_reap.c): the descriptors come back,
 * and a live peer is untouched. */
static unsigned open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    unsigned n = 0;

    assert_non_null(d);
    while (readdir(d) != NULL)
        n++;
    closedir(d);
    return n;
}

/* Connections waiting in the accept queue of the listening socket on
 * 127.0.0.1:port (/proc/net/tcp: a listening socket's rx_queue). */
static unsigned accept_queue(unsigned port)
{
    FILE *f = fopen("/proc/net/tcp", "r");
    char line[256];
    unsigned q = 0;

    assert_non_null(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned lport, st, txq, rxq;

        if (sscanf(line, " %*u: %*x:%x %*x:%*x %x %x:%x", &lport, &st, &txq,
                   &rxq) == 4 &&
            lport == port && st == 0x0a)
            q += rxq;
    }
    fclose(f);
    return q;
}

static void progress_stale_errno(cw_na_t *a, cw_na_t *b)
{
    errno = EAGAIN;
    cw_na_progress(a, 0, NULL);
    errno = EAGAIN;
    cw_na_progress(b, 0, NULL);
}

#define PREHANDSHAKE_CONNS 64

/* b sends a message to a on tag, which a receives. */
static void b_to_a(struct pair *p, uint32_t tag)
{
    struct done r = {.owner = p->a}, sd = {0};
    char in[32], out[32] = "still here";

    assert_int_equal(
        cw_na_msg_recv_unexpected(p->a, in, sizeof(in), done_cb, &r, NULL),
        CW_OK);
    assert_int_equal(cw_na_msg_send_unexpected(p->b, out, sizeof(out),
                                               p->a_at_b, tag, done_cb, &sd,
                                               NULL),
                     CW_OK);
    assert_true(wait_done(p->a, p->b, &sd, 1));
    assert_true(wait_done(p->a, p->b, &r, 1));
    assert_int_equal(sd.status, CW_OK);
    assert_int_equal(r.status, CW_OK);
    assert_int_equal(r.tag, tag);
}

static void test_closed_before_handshake_reaped(void **state)
{
    const char *params[] = {"reap_ms", "100", NULL};
    struct sockaddr_in sin = {.sin_family = AF_INET};
    struct pair p;
    unsigned base, peak = 0, now = 0, port, queued = 0;
    uint64_t end;
    (void)state;

    p.a = tcp_open(params);
    p.b = tcp_open(NULL);
    p.b_at_a = lookup_self(p.a, p.b);
    p.a_at_b = lookup_self(p.b, p.a);
    /* b connects to a and stays connected throughout. */
    b_to_a(&p, 1);
    for (int i = 0; i < 100; i++)
        progress_stale_errno(p.a, p.b);
    base = open_fds();

    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    port = self_port(p.a);
    sin.sin_port = htons((uint16_t)port);
    for (int i = 0; i < PREHANDSHAKE_CONNS; i++) {
        int s = socket(AF_INET, SOCK_STREAM, 0);

        assert_true(s >= 0);
        assert_int_equal(connect(s, (struct sockaddr *)&sin, sizeof(sin)), 0);
        close(s);
    }
    /* The provider accepts them (the descriptors rise: how far depends on
     * how fast it accepts against how fast they are reset), and they all
     * go again within a few scans, none left to accept. */
    end = cw_now_ns() + WAIT_NS;
    while (cw_now_ns() < end) {
        progress_stale_errno(p.a, p.b);
        now = open_fds();
        if (now > peak)
            peak = now;
        if (peak > base && now <= base && (queued = accept_queue(port)) == 0)
            break;
    }
    fprintf(stderr,
            "descriptors: %u before, %u at most, %u after; %u not accepted\n",
            base, peak, now, queued);
    assert_true(peak > base);
    assert_true(now <= base);
    assert_int_equal(queued, 0);
    /* b's connection was not touched: a message still goes through. */
    b_to_a(&p, 2);
    pair_close(&p);
}

static const char *close_logged(cw_na_t *na)
{
    static char log[4096];
    FILE *f = tmpfile();
    int saved = dup(2);
    size_t n;

    assert_non_null(f);
    assert_true(saved >= 0);
    fflush(stderr);
    assert_int_equal(dup2(fileno(f), 2), 2);
    cw_na_close(na);
    fflush(stderr);
    assert_int_equal(dup2(saved, 2), 2);
    close(saved);
    rewind(f);
    n = fread(log, 1, sizeof(log) - 1, f);
    log[n] = '\0';
    fclose(f);
    fputs(log, stderr);
    return log;
}

/* An instance closed while memory registrations (and a remote handle) are
 * still open releases them: every libfabric object is closed (before,
 * fi_close(domain) failed with -FI_EBUSY and the domain, the fabric and
 * the registrations leaked), and LeakSanitizer finds nothing at exit. */
static void close_with_registrations(const char *uri)
{
    static char buf[2][4096];
    struct cw_na_segment segs[2] = {{buf[0], sizeof(buf[0])},
                                    {buf[1], sizeof(buf[1])}};
    cw_na_mem_t *mem, *mem2, *remote;
    uint8_t ser[256];
    const char *log;
    cw_na_t *na;
    size_t n;

    assert_int_equal(cw_na_open(uri, CW_NA_LISTEN, NULL, &na), CW_OK);
    assert_int_equal(cw_na_mem_register(na, segs, 2, CW_NA_MEM_READ, &mem),
                     CW_OK);
    assert_int_equal(cw_na_mem_register(na, segs, 1, CW_NA_MEM_WRITE, &mem2),
                     CW_OK);
    n = cw_na_mem_serialize_size(na, mem);
    assert_int_equal(cw_na_mem_serialize(na, ser, n, mem), CW_OK);
    assert_int_equal(cw_na_mem_deserialize(na, ser, n, &remote), CW_OK);
    log = close_logged(na);
    assert_null(strstr(log, "fi_close("));
    assert_non_null(strstr(log, "2 memory registration(s)"));
}

static void test_close_with_registrations_tcp(void **state)
{
    (void)state;
    close_with_registrations("ofi+tcp://127.0.0.1:0");
}

static void test_close_with_registrations_shm(void **state)
{
    (void)state;
    close_with_registrations("ofi+shm://");
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_iface_host),
        cmocka_unit_test(test_shm_names),
        cmocka_unit_test(test_params),
        cmocka_unit_test(test_hostile_input),
        cmocka_unit_test(test_rma_segments_tcp),
        cmocka_unit_test(test_rma_segments_shm),
        cmocka_unit_test(test_malformed_dropped),
        cmocka_unit_test(test_unused_tags_drained),
        cmocka_unit_test(test_unused_tags_calm),
        cmocka_unit_test(test_unexpected_turns_tcp),
        cmocka_unit_test(test_unexpected_queued_at_close),
        cmocka_unit_test(test_inject_tcp),
        cmocka_unit_test(test_peer_sends_max),
        cmocka_unit_test(test_refused_peer_backoff),
        cmocka_unit_test(test_gone_peer_refused_tcp),
        cmocka_unit_test(test_early_queue_tcp),
        cmocka_unit_test(test_early_queue_shm),
        cmocka_unit_test(test_overflow_keeps_connection_tcp),
        cmocka_unit_test(test_overflow_keeps_connection_shm),
        cmocka_unit_test(test_oversized_expected_tcp),
        cmocka_unit_test(test_oversized_expected_shm),
        cmocka_unit_test(test_cancel_all_kinds),
        cmocka_unit_test(test_released_region_recovers),
        cmocka_unit_test(test_idle_peers_dropped),
        cmocka_unit_test(test_handle_widening_tcp),
        cmocka_unit_test(test_handle_widening_shm),
        cmocka_unit_test(test_last_words_shm),
        cmocka_unit_test(test_close_with_registrations_tcp),
        cmocka_unit_test(test_close_with_registrations_shm),
        cmocka_unit_test(test_forged_ping_bounded),
        cmocka_unit_test(test_rejected_put_reported_tcp),
        cmocka_unit_test(test_closed_before_handshake_reaped),
    };
    int rc;

    cw_log_init();
    if (argc == 6 && strcmp(argv[1], "--child") == 0) {
        int up = atoi(argv[4]), down = atoi(argv[5]);

        if (strcmp(argv[2], "widen-target") == 0)
            widen_target(argv[3], up, down);
        else if (strcmp(argv[2], "last-words") == 0)
            last_words_child(argv[3], up, down);
        else
            return 2;
        cw_plugins_unload();
        return 0;
    }
    rc = cmocka_run_group_tests_name("na-ofi", tests, NULL, NULL);
    cw_plugins_unload();
    return rc;
}
