/*
 * na-ucx hostile wire input: a raw UCP client connects to a ucx instance's
 * listener and sends malformed active messages (short or garbled headers,
 * bad sender addresses, RMA requests on forged handles, answers for
 * operations that do not exist).  The instance must drop them, count them
 * (its rate-limited warning carries the count), answer RMA requests with an
 * error status rather than touch memory, and keep serving a real peer.
 */
#include <causeway/log.h>
#include <causeway/na.h>

#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cmocka.h>
#include <ucp/api/ucp.h>

#define URI   "ucx+tcp://127.0.0.1:0"
#define MAGIC 0x43575558u

struct raw {
    ucp_context_h ctx;
    ucp_worker_h worker;
    ucp_ep_h ep;
    int answers;          /* RMA answers received */
    uint32_t last_status; /* status field of the last answer */
};

static ucs_status_t raw_answer_cb(void *arg, const void *header, size_t hlen,
                                  void *data, size_t length,
                                  const ucp_am_recv_param_t *param)
{
    struct raw *r = arg;
    uint32_t v[2];

    if (hlen >= 8) {
        memcpy(v, header, 8);
        r->last_status = v[1];
    }
    r->answers++;
    return UCS_OK;
}

static void raw_open(struct raw *r, uint16_t port)
{
    ucp_params_t p = {0};
    ucp_worker_params_t wp = {0};
    ucp_ep_params_t ep = {0};
    ucp_config_t *cfg;
    struct sockaddr_in sin = {0};

    assert_int_equal(ucp_config_read(NULL, NULL, &cfg), UCS_OK);
    assert_int_equal(ucp_config_modify(cfg, "TLS", "tcp"), UCS_OK);
    p.field_mask = UCP_PARAM_FIELD_FEATURES;
    p.features = UCP_FEATURE_AM;
    assert_int_equal(ucp_init(&p, cfg, &r->ctx), UCS_OK);
    ucp_config_release(cfg);
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    assert_int_equal(ucp_worker_create(r->ctx, &wp, &r->worker), UCS_OK);
    for (unsigned id = 3; id <= 5; id += 2) {
        ucp_am_handler_param_t hp = {0};
        hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                        UCP_AM_HANDLER_PARAM_FIELD_CB |
                        UCP_AM_HANDLER_PARAM_FIELD_ARG;
        hp.id = id; /* put ack, get answer */
        hp.cb = raw_answer_cb;
        hp.arg = r;
        assert_int_equal(ucp_worker_set_am_recv_handler(r->worker, &hp),
                         UCS_OK);
    }
    sin.sin_family = AF_INET;
    sin.sin_port = htons(port);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ep.field_mask = UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_FLAGS |
                    UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    ep.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER; /* as the plugin's endpoints */
    ep.sockaddr.addr = (struct sockaddr *)&sin;
    ep.sockaddr.addrlen = sizeof(sin);
    assert_int_equal(ucp_ep_create(r->worker, &ep, &r->ep), UCS_OK);
}

static void raw_close(struct raw *r)
{
    ucp_request_param_t p = {0};
    void *req;

    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_EP_CLOSE_FLAG_FORCE;
    req = ucp_ep_close_nbx(r->ep, &p);
    if (UCS_PTR_IS_PTR(req)) {
        while (ucp_request_check_status(req) == UCS_INPROGRESS)
            ucp_worker_progress(r->worker);
        ucp_request_free(req);
    }
    ucp_worker_destroy(r->worker);
    ucp_cleanup(r->ctx);
}

/* Send one AM (header, data) with UCP_AM_SEND_FLAG_* @p flags and wait for
 * local completion while also progressing the instance under test. */
static void raw_send_flags(struct raw *r, cw_na_t *na, unsigned id,
                           uint32_t flags, const void *hdr, size_t hlen,
                           const void *data, size_t len)
{
    ucp_request_param_t p = {0};
    uint64_t end = cw_now_ns() + 5000000000ull;
    void *req;

    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = flags;
    req = ucp_am_send_nbx(r->ep, id, hdr, hlen, data, len, &p);
    assert_false(UCS_PTR_IS_ERR(req));
    while (UCS_PTR_IS_PTR(req) &&
           ucp_request_check_status(req) == UCS_INPROGRESS &&
           cw_now_ns() < end) {
        ucp_worker_progress(r->worker);
        cw_na_progress(na, 0, NULL);
    }
    if (UCS_PTR_IS_PTR(req))
        ucp_request_free(req);
    for (int i = 0; i < 200; i++) {
        ucp_worker_progress(r->worker);
        cw_na_progress(na, 0, NULL);
    }
}

/* The same, as the plugin sends: with a reply endpoint. */
static void raw_send(struct raw *r, cw_na_t *na, unsigned id, const void *hdr,
                     size_t hlen, const void *data, size_t len)
{
    raw_send_flags(r, na, id, UCP_AM_SEND_FLAG_REPLY, hdr, hlen, data, len);
}

struct rec {
    int calls;
    cw_status_t status;
    cw_na_addr_t *source;
};

static void rec_cb(const struct cw_na_cb_info *info)
{
    struct rec *c = info->arg;

    c->calls++;
    c->status = info->status;
    if (info->type == CW_NA_OP_RECV_UNEXPECTED)
        c->source = info->u.recv_unexpected.source;
}

static void test_hostile_messages(void **state)
{
    char logpath[] = "/tmp/cw-ucx-wire-XXXXXX";
    int logfd = mkstemp(logpath), saved = dup(2);
    cw_na_t *na, *peer;
    cw_na_addr_t *self, *na_at_peer;
    char uri[256], buf[256], log[8192];
    uint8_t hdr[128];
    struct rec r = {0}, s = {0};
    struct raw raw = {0};
    uint32_t magic = MAGIC, tag = 7;
    uint64_t rma[5];
    ssize_t n;

    assert_true(logfd >= 0 && saved >= 0);
    unlink(logpath); /* the fd is enough: nothing is left if a check fails */
    assert_int_equal(cw_na_open(URI, CW_NA_LISTEN, NULL, &na), CW_OK);
    assert_int_equal(cw_na_addr_self(na, &self), CW_OK);
    assert_int_equal(cw_na_addr_to_string(na, self, uri, sizeof(uri)), CW_OK);
    cw_na_addr_free(na, self);
    assert_int_equal(
        cw_na_msg_recv_unexpected(na, buf, sizeof(buf), rec_cb, &r, NULL),
        CW_OK);

    /* Capture the instance's warnings. */
    cw_log_set_level(CW_LOG_WARN);
    assert_true(dup2(logfd, 2) == 2);
    raw_open(&raw, (uint16_t)atoi(strrchr(uri, ':') + 1));

    /* 1: unexpected message, header too short. */
    raw_send(&raw, na, 1, "abc", 3, "x", 1);
    /* 2: right size, wrong magic. */
    memset(hdr, 0, sizeof(hdr));
    hdr[8] = 9;
    memcpy(hdr + 9, "1.2.3.4:5", 9);
    raw_send(&raw, na, 1, hdr, 18, "x", 1);
    /* 3: address length beyond the header. */
    memcpy(hdr, &magic, 4);
    memcpy(hdr + 4, &tag, 4);
    hdr[8] = 60;
    raw_send(&raw, na, 1, hdr, 18, "x", 1);
    /* 4: not a canonical numeric address (no name lookups on wire input). */
    hdr[8] = 13;
    memcpy(hdr + 9, "localhost:123", 13);
    raw_send(&raw, na, 1, hdr, 22, "x", 1);
    /* 5: embedded NUL. */
    hdr[8] = 9;
    memcpy(hdr + 9, "1.2.3\0:45", 9);
    raw_send(&raw, na, 1, hdr, 18, "x", 1);
    /* 6: put request with a short header. */
    raw_send(&raw, na, 2, hdr, 12, "x", 1);
    /* 7: answers for operations that never existed are ignored. */
    memset(rma, 0, sizeof(rma));
    memcpy(rma, &magic, 4);
    rma[1] = 12345;
    raw_send(&raw, na, 5, rma, 16, NULL, 0);
    raw_send(&raw, na, 3, rma, 12, NULL, 0);

    /* A well-formed get on a forged handle is answered CW_BAD_HANDLE. */
    {
        uint64_t req[6] = {0};
        uint64_t end = cw_now_ns() + 5000000000ull;
        memcpy(req, &magic, 4);
        req[1] = 99;     /* op id */
        req[2] = 1;      /* handle id */
        req[3] = 0xdead; /* key */
        req[4] = 0;      /* offset */
        req[5] = 16;     /* length */
        raw_send(&raw, na, 4, req, sizeof(req), NULL, 0);
        while (raw.answers == 0 && cw_now_ns() < end) {
            ucp_worker_progress(raw.worker);
            cw_na_progress(na, 0, NULL);
        }
        assert_int_equal(raw.answers, 1);
        assert_int_equal(raw.last_status, CW_BAD_HANDLE);
    }
    raw_close(&raw);
    fflush(stderr);
    assert_true(dup2(saved, 2) == 2);
    close(saved);

    /* Nothing reached the posted buffer. */
    assert_int_equal(r.calls, 0);
    lseek(logfd, 0, SEEK_SET);
    n = read(logfd, log, sizeof(log) - 1);
    close(logfd);
    assert_true(n > 0);
    log[n] = '\0';
    assert_non_null(strstr(log, "dropped malformed unexpected message header "
                                "(1 dropped so far)"));

    /* The instance still serves a real peer. */
    assert_int_equal(cw_na_open(URI, CW_NA_LISTEN, NULL, &peer), CW_OK);
    assert_int_equal(cw_na_addr_lookup(peer, uri, &na_at_peer), CW_OK);
    assert_int_equal(cw_na_msg_send_unexpected(peer, "ok", 3, na_at_peer, 1,
                                               rec_cb, &s, NULL),
                     CW_OK);
    for (uint64_t end = cw_now_ns() + 10000000000ull;
         (r.calls == 0 || s.calls == 0) && cw_now_ns() < end;) {
        cw_na_progress(na, 0, NULL);
        cw_na_progress(peer, 0, NULL);
    }
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.status, CW_OK);
    assert_string_equal(buf, "ok");
    cw_na_addr_free(na, r.source);
    cw_na_addr_free(peer, na_at_peer);
    cw_na_close(peer);
    cw_na_close(na);
}

/* A get's answer must come from the peer the get went to: a raw client
 * that answers it in the owner's place (right operation id, right length)
 * is dropped, also when it sends without a reply endpoint (which skipped
 * the check), and the real
 * answer then completes the get with the owner's data. */
static void test_forged_get_answer(void **state)
{
    char uri[256], buri[256], owner_buf[16], local[16];
    struct cw_na_segment oseg = {owner_buf, sizeof(owner_buf)},
                         lseg = {local, sizeof(local)};
    cw_na_mem_t *omem, *lmem, *remote;
    cw_na_addr_t *self, *b_at_na;
    unsigned char ser[256];
    uint32_t magic = MAGIC;
    uint64_t ans[2] = {0};
    struct raw raw = {0};
    struct rec g = {0};
    cw_na_t *na, *b;
    size_t sz;

    memset(owner_buf, 'B', sizeof(owner_buf));
    memset(local, 0, sizeof(local));
    assert_int_equal(cw_na_open(URI, CW_NA_LISTEN, NULL, &na), CW_OK);
    assert_int_equal(cw_na_open(URI, CW_NA_LISTEN, NULL, &b), CW_OK);
    assert_int_equal(cw_na_addr_self(na, &self), CW_OK);
    assert_int_equal(cw_na_addr_to_string(na, self, uri, sizeof(uri)), CW_OK);
    cw_na_addr_free(na, self);
    assert_int_equal(cw_na_addr_self(b, &self), CW_OK);
    assert_int_equal(cw_na_addr_to_string(b, self, buri, sizeof(buri)), CW_OK);
    cw_na_addr_free(b, self);
    assert_int_equal(cw_na_addr_lookup(na, buri, &b_at_na), CW_OK);
    assert_int_equal(cw_na_mem_register(b, &oseg, 1, CW_NA_MEM_READ, &omem),
                     CW_OK);
    assert_int_equal(cw_na_mem_register(na, &lseg, 1, CW_NA_MEM_WRITE, &lmem),
                     CW_OK);
    sz = cw_na_mem_serialize_size(b, omem);
    assert_true(sz <= sizeof(ser));
    assert_int_equal(cw_na_mem_serialize(b, ser, sz, omem), CW_OK);
    assert_int_equal(cw_na_mem_deserialize(na, ser, sz, &remote), CW_OK);

    /* The owner does not progress: the get waits for its answer. */
    assert_int_equal(cw_na_get(na, lmem, 0, remote, 0, sizeof(local), b_at_na,
                               rec_cb, &g, NULL),
                     CW_OK);
    raw_open(&raw, (uint16_t)atoi(strrchr(uri, ':') + 1));
    memcpy(ans, &magic, 4); /* status 0 = CW_OK */
    ans[1] = 1;             /* the instance's first operation id */
    raw_send_flags(&raw, na, 5, 0, ans, sizeof(ans), "EVILEVILEVILEVIL", 16);
    raw_send(&raw, na, 5, ans, sizeof(ans), "EVILEVILEVILEVIL", 16);
    assert_int_equal(g.calls, 0);
    assert_int_equal(memcmp(local, "EVIL", 4) == 0, 0);
    assert_true(cw_na_dropped(na) >= 2);

    for (uint64_t end = cw_now_ns() + 10000000000ull;
         g.calls == 0 && cw_now_ns() < end;) {
        cw_na_progress(na, 0, NULL);
        cw_na_progress(b, 0, NULL);
    }
    assert_int_equal(g.calls, 1);
    assert_int_equal(g.status, CW_OK);
    assert_int_equal(memcmp(local, owner_buf, sizeof(local)), 0);
    raw_close(&raw);
    cw_na_mem_release(na, remote);
    cw_na_mem_release(na, lmem);
    cw_na_mem_release(b, omem);
    cw_na_addr_free(na, b_at_na);
    cw_na_close(b);
    cw_na_close(na);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hostile_messages),
        cmocka_unit_test(test_forged_get_answer),
    };

    cw_log_init();
    if (cw_plugins_load(NULL) != CW_OK || cw_plugins_find("ucx") == NULL) {
        printf("# na-ucx not built\n");
        return 77;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
