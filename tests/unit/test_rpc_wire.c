/*
 * RPC ids, argument serialization (round trip, truncated and random
 * input) and wire header decoding of hostile input.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rpc_priv.h"

static void test_rpc_id(void **state)
{
    (void)state;
    /* FNV-1a 64 reference values: the id must never change. */
    assert_int_equal(cw_rpc_id(""), 0xcbf29ce484222325ull);
    assert_int_equal(cw_rpc_id("a"), 0xaf63dc4c8601ec8cull);
    assert_int_equal(cw_rpc_id("foobar"), 0x85944171f73967e8ull);
    assert_int_not_equal(cw_rpc_id("echo"), cw_rpc_id("ohce"));
    assert_int_equal(cw_rpc_id(NULL), 0);
}

static cw_buf_t *encode_sample(void)
{
    cw_buf_t *w;
    static const uint8_t bytes[5] = {1, 2, 3, 0, 5};

    assert_int_equal(cw_buf_create_writer(0, &w), CW_OK);
    assert_int_equal(cw_buf_put_u8(w, 0xab), CW_OK);
    assert_int_equal(cw_buf_put_u16(w, 0xbeef), CW_OK);
    assert_int_equal(cw_buf_put_u32(w, 0xdeadbeef), CW_OK);
    assert_int_equal(cw_buf_put_u64(w, 0x0123456789abcdefull), CW_OK);
    assert_int_equal(cw_buf_put_i64(w, -42), CW_OK);
    assert_int_equal(cw_buf_put_str(w, "hello"), CW_OK);
    assert_int_equal(cw_buf_put_str(w, NULL), CW_OK);
    assert_int_equal(cw_buf_put_str(w, ""), CW_OK);
    assert_int_equal(cw_buf_put_bytes(w, bytes, sizeof(bytes)), CW_OK);
    assert_int_equal(cw_buf_put_bytes(w, NULL, 0), CW_OK);
    return w;
}

/* Decode the sample; returns the first error. */
static cw_status_t decode_sample(const void *p, size_t len, bool check)
{
    cw_buf_t *r;
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
    int64_t i64;
    const char *s1, *s2, *s3;
    const void *b1, *b2;
    size_t l1, l2;
    cw_status_t st;

    assert_int_equal(cw_buf_create_reader(p, len, &r), CW_OK);
    cw_buf_get_u8(r, &u8);
    cw_buf_get_u16(r, &u16);
    cw_buf_get_u32(r, &u32);
    cw_buf_get_u64(r, &u64);
    cw_buf_get_i64(r, &i64);
    cw_buf_get_str(r, &s1);
    cw_buf_get_str(r, &s2);
    cw_buf_get_str(r, &s3);
    cw_buf_get_bytes(r, &b1, &l1);
    cw_buf_get_bytes(r, &b2, &l2);
    st = cw_buf_error(r);
    if (check) {
        assert_int_equal(st, CW_OK);
        assert_int_equal(u8, 0xab);
        assert_int_equal(u16, 0xbeef);
        assert_int_equal(u32, 0xdeadbeef);
        assert_int_equal(u64, 0x0123456789abcdefull);
        assert_int_equal(i64, -42);
        assert_string_equal(s1, "hello");
        assert_null(s2);
        assert_string_equal(s3, "");
        assert_int_equal(l1, 5);
        assert_memory_equal(b1, "\1\2\3\0\5", 5);
        assert_int_equal(l2, 0);
        assert_int_equal(cw_buf_remaining(r), 0);
    }
    cw_buf_destroy(r);
    return st;
}

static void test_buf_roundtrip(void **state)
{
    cw_buf_t *w = encode_sample();
    (void)state;

    assert_int_equal(cw_buf_error(w), CW_OK);
    decode_sample(cw_buf_data(w), cw_buf_len(w), true);
    cw_buf_destroy(w);
}

static void test_buf_truncated(void **state)
{
    cw_buf_t *w = encode_sample();
    size_t len = cw_buf_len(w);
    (void)state;

    /* Every strict prefix must fail cleanly (copied so ASan sees the end). */
    for (size_t n = 0; n < len; n++) {
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, cw_buf_data(w), n);
        assert_int_not_equal(decode_sample(copy, n, false), CW_OK);
        free(copy);
    }
    cw_buf_destroy(w);
}

static void test_buf_hostile(void **state)
{
    cw_buf_t *r;
    const void *p;
    size_t l;
    const char *s;
    uint32_t v;
    (void)state;

    /* Length past the end. */
    static const uint8_t big[] = {0xff, 0xff, 0xff, 0x7f, 'a', 'b'};
    assert_int_equal(cw_buf_create_reader(big, sizeof(big), &r), CW_OK);
    assert_int_equal(cw_buf_get_bytes(r, &p, &l), CW_RANGE);
    /* Errors stick. */
    assert_int_equal(cw_buf_get_u32(r, &v), CW_RANGE);
    cw_buf_destroy(r);

    /* String without its NUL, and with an embedded NUL. */
    static const uint8_t nonul[] = {3, 0, 0, 0, 'a', 'b', 'c'};
    assert_int_equal(cw_buf_create_reader(nonul, sizeof(nonul), &r), CW_OK);
    assert_int_equal(cw_buf_get_str(r, &s), CW_PROTOCOL);
    cw_buf_destroy(r);
    static const uint8_t emb[] = {3, 0, 0, 0, 'a', 0, 0};
    assert_int_equal(cw_buf_create_reader(emb, sizeof(emb), &r), CW_OK);
    assert_int_equal(cw_buf_get_str(r, &s), CW_PROTOCOL);
    cw_buf_destroy(r);

    /* A bulk index in a buffer without descriptors. */
    static const uint8_t idx[] = {0, 0, 0, 0};
    cw_bulk_t *b;
    assert_int_equal(cw_buf_create_reader(idx, sizeof(idx), &r), CW_OK);
    assert_int_equal(cw_buf_get_bulk(r, &b), CW_RANGE);
    cw_buf_destroy(r);

    /* Writers refuse reads and readers refuse writes. */
    assert_int_equal(cw_buf_create_reader(idx, sizeof(idx), &r), CW_OK);
    assert_int_equal(cw_buf_put_u8(r, 1), CW_INVALID_ARG);
    cw_buf_destroy(r);
    assert_int_equal(cw_buf_get_u8(NULL, NULL), CW_INVALID_ARG);
}

static void test_buf_random(void **state)
{
    uint8_t data[64];
    (void)state;

    srand(12345);
    for (int i = 0; i < 20000; i++) {
        size_t n = (size_t)rand() % sizeof(data);
        uint8_t *copy = malloc(n ? n : 1);
        for (size_t k = 0; k < n; k++)
            data[k] = (uint8_t)rand();
        /* Bias lengths small so the string/bytes paths get exercised. */
        if (n > 20 && (rand() & 1))
            data[19] = data[20] = data[21] = 0;
        memcpy(copy, data, n);
        (void)decode_sample(copy, n, false);
        free(copy);
    }
}

/* ---- wire header ---------------------------------------------------------*/

static size_t make_msg(uint8_t *buf, size_t cap, const char *dest,
                       const uint8_t *payload, size_t plen)
{
    struct cw_wire_hdr h = {
        .type = CW_MSG_REQ,
        .rpc_id = 7,
        .req_id = 9,
        .budget_us = 1000,
        .resp_tag = 3,
        .hops = 1,
    };
    size_t dl = dest ? strlen(dest) : 0;
    size_t total = CW_HDR_SIZE + dl + plen;

    assert_true(total <= cap);
    h.dest_len = (uint16_t)dl;
    h.payload_len = (uint32_t)plen;
    cw_wire_hdr_encode(buf, &h);
    memcpy(buf + CW_HDR_SIZE, dest, dl);
    memcpy(buf + CW_HDR_SIZE + dl, payload, plen);
    return total;
}

static void test_wire_ok(void **state)
{
    uint8_t buf[256];
    struct cw_wire_msg m;
    size_t n = make_msg(buf, sizeof(buf), "shm://x", (const uint8_t *)"hi", 2);
    (void)state;

    assert_int_equal(cw_wire_decode(buf, n, &m), CW_OK);
    assert_int_equal(m.hdr.rpc_id, 7);
    assert_int_equal(m.hdr.req_id, 9);
    assert_int_equal(m.hdr.budget_us, 1000);
    assert_int_equal(m.hdr.hops, 1);
    assert_int_equal(m.hdr.dest_len, 7);
    assert_memory_equal(m.dest, "shm://x", 7);
    assert_memory_equal(m.payload, "hi", 2);
}

static void test_wire_hostile(void **state)
{
    uint8_t buf[256], bad[256];
    struct cw_wire_msg m;
    size_t n = make_msg(buf, sizeof(buf), "shm://x", (const uint8_t *)"hi", 2);
    (void)state;

    /* Truncated at every length. */
    for (size_t k = 0; k < n; k++) {
        uint8_t *copy = malloc(k ? k : 1);
        memcpy(copy, buf, k);
        assert_int_not_equal(cw_wire_decode(copy, k, &m), CW_OK);
        free(copy);
    }
    /* Trailing garbage. */
    memcpy(bad, buf, n);
    assert_int_not_equal(cw_wire_decode(bad, n + 1, &m), CW_OK);
    /* Bad magic, bad version, bad type, unknown flags, bad status. */
    memcpy(bad, buf, n);
    bad[0] ^= 1;
    assert_int_equal(cw_wire_decode(bad, n, &m), CW_PROTOCOL);
    memcpy(bad, buf, n);
    bad[4] = 2;
    assert_int_equal(cw_wire_decode(bad, n, &m), CW_VERSION);
    memcpy(bad, buf, n);
    bad[5] = 9;
    assert_int_equal(cw_wire_decode(bad, n, &m), CW_PROTOCOL);
    memcpy(bad, buf, n);
    bad[6] = 0x80;
    assert_int_equal(cw_wire_decode(bad, n, &m), CW_PROTOCOL);
    memcpy(bad, buf, n);
    bad[36] = 0xff;
    assert_int_equal(cw_wire_decode(bad, n, &m), CW_PROTOCOL);
    /* Lengths past the end. */
    memcpy(bad, buf, n);
    bad[48] = 0xff; /* payload_len */
    assert_int_equal(cw_wire_decode(bad, n, &m), CW_PROTOCOL);
    memcpy(bad, buf, n);
    bad[40] = 0xff; /* dest_len */
    assert_int_equal(cw_wire_decode(bad, n, &m), CW_PROTOCOL);
    memcpy(bad, buf, n);
    bad[47] = 0x7f; /* desc_len huge */
    assert_int_equal(cw_wire_decode(bad, n, &m), CW_PROTOCOL);
    /* Absurd descriptor count. */
    memcpy(bad, buf, n);
    bad[42] = 0xff;
    bad[43] = 0xff;
    assert_int_equal(cw_wire_decode(bad, n, &m), CW_PROTOCOL);
    /* Overflow flag without its descriptor. */
    memcpy(bad, buf, n);
    bad[6] = CW_HF_OVERFLOW;
    assert_int_equal(cw_wire_decode(bad, n, &m), CW_PROTOCOL);
    /* A response limit is only for requests. */
    memcpy(bad, buf, n);
    bad[54] = 1;
    assert_int_equal(cw_wire_decode(bad, n, &m), CW_OK);
    assert_int_equal(m.hdr.resp_limit, 1);
    bad[39] = 2;
    assert_int_equal(cw_wire_decode(bad, n, &m), CW_OK);
    assert_int_equal(m.hdr.resp_limit, 0x20001);
    {
        struct cw_wire_hdr d = {.type = CW_MSG_DONE, .req_id = 9};
        cw_wire_hdr_encode(bad, &d);
        assert_int_equal(cw_wire_decode(bad, CW_HDR_SIZE, &m), CW_OK);
        bad[54] = 1;
        assert_int_equal(cw_wire_decode(bad, CW_HDR_SIZE, &m), CW_PROTOCOL);
    }
    /* Non-printable routing destination. */
    memcpy(bad, buf, n);
    bad[CW_HDR_SIZE + 2] = '\n';
    assert_int_equal(cw_wire_decode(bad, n, &m), CW_PROTOCOL);
    /* Every byte value at every position of destinations of every length
     * up to 40 (the check reads one byte at a time below eight, else eight
     * at a time and then the last eight, overlapping): only '!' to '~'
     * pass. */
    for (size_t dl = 1; dl <= 40; dl++) {
        static const char lng[] = "ofi+tcp://127.0.0.1:7000/abc@x~shm://gw-1";
        char d[48];
        size_t ln;

        memcpy(d, lng, dl);
        d[dl] = '\0';
        ln = make_msg(buf, sizeof(buf), d, (const uint8_t *)"p", 1);
        assert_int_equal(cw_wire_decode(buf, ln, &m), CW_OK);
        for (size_t pos = 0; pos < dl; pos++) {
            for (unsigned v = 0; v < 256; v++) {
                cw_status_t want = v > ' ' && v <= '~' ? CW_OK : CW_PROTOCOL;
                memcpy(bad, buf, ln);
                bad[CW_HDR_SIZE + pos] = (uint8_t)v;
                assert_int_equal(cw_wire_decode(bad, ln, &m), want);
            }
        }
    }
}

static void test_wire_desc(void **state)
{
    uint8_t sect[128];
    uint8_t *p;
    struct cw_wire_desc d;
    const uint8_t *raw;
    size_t raw_len, one = cw_wire_desc_size(3, 4);
    (void)state;

    p = cw_wire_desc_encode(sect, 0, CW_BULK_READ_ONLY, 1234, "shm", 4);
    memcpy(p, "\1\2\3\4", 4);
    p = cw_wire_desc_encode(sect + one, CW_DF_PROXY, CW_BULK_READ_WRITE, 5,
                            "ofi", 4);
    memcpy(p, "wxyz", 4);
    assert_int_equal(cw_wire_desc_check(sect, 2 * one, 2), CW_OK);
    assert_int_equal(cw_wire_desc_get(sect, 2 * one, 2, 1, &d, &raw, &raw_len),
                     CW_OK);
    assert_int_equal(d.total, 5);
    assert_int_equal(d.flags, CW_DF_PROXY);
    assert_memory_equal(d.plugin, "ofi", 3);
    assert_memory_equal(d.mem, "wxyz", 4);
    assert_ptr_equal(raw, sect + one);
    assert_int_equal(raw_len, one);
    /* Count and section length must agree exactly. */
    assert_int_not_equal(cw_wire_desc_check(sect, 2 * one, 1), CW_OK);
    assert_int_not_equal(cw_wire_desc_check(sect, 2 * one, 3), CW_OK);
    assert_int_not_equal(cw_wire_desc_check(sect, 2 * one - 1, 2), CW_OK);
    /* Inner lengths are checked. */
    sect[12] = 200; /* plugin length past the entry */
    assert_int_not_equal(cw_wire_desc_check(sect, 2 * one, 2), CW_OK);
    sect[12] = 3;
    sect[3] = 0; /* no permission */
    assert_int_not_equal(cw_wire_desc_check(sect, 2 * one, 2), CW_OK);
    sect[3] = 1;
    sect[13] = 'S'; /* bad plugin name */
    assert_int_not_equal(cw_wire_desc_check(sect, 2 * one, 2), CW_OK);
    /* Random bytes never crash the checker. */
    srand(7);
    for (int i = 0; i < 20000; i++) {
        size_t n = (size_t)rand() % sizeof(sect);
        uint8_t *copy = malloc(n ? n : 1);
        for (size_t k = 0; k < n; k++)
            copy[k] = (uint8_t)rand();
        if (n > 2) {
            copy[0] = (uint8_t)(n - 2);
            copy[1] = 0;
        }
        (void)cw_wire_desc_check(copy, n, (unsigned)(rand() % 3));
        free(copy);
    }
}

/* The resume id of an idempotent request (docs/wire.md): 8 bytes after the
 * header, only with IDEMPOTENT, only in a request; RESUME needs IDEMPOTENT. */
static void test_wire_resume(void **state)
{
    struct cw_wire_hdr h = {
        .type = CW_MSG_REQ,
        .flags = CW_HF_IDEMPOTENT | CW_HF_RESUME,
        .rpc_id = 7,
        .req_id = 9,
        .budget_us = 1000,
        .resp_tag = 3,
        .dest_len = 7,
        .payload_len = 2,
        .resume_id = 0x0123456789abcdefull,
    };
    uint8_t buf[128], bad[128];
    struct cw_wire_msg m;
    size_t n = CW_HDR_SIZE + CW_HDR_EXT_RESUME + 7 + 2;
    (void)state;

    assert_int_equal(cw_wire_hdr_size(h.flags), CW_HDR_SIZE + 8);
    assert_int_equal(cw_wire_hdr_size(CW_HF_ONE_WAY), CW_HDR_SIZE);
    cw_wire_hdr_encode(buf, &h);
    memcpy(buf + CW_HDR_SIZE + 8, "shm://x", 7);
    memcpy(buf + CW_HDR_SIZE + 15, "hi", 2);
    assert_int_equal(cw_wire_decode(buf, n, &m), CW_OK);
    assert_int_equal(m.hdr.flags, CW_HF_IDEMPOTENT | CW_HF_RESUME);
    assert_true(m.hdr.resume_id == 0x0123456789abcdefull);
    assert_memory_equal(m.dest, "shm://x", 7);
    assert_memory_equal(m.payload, "hi", 2);
    /* IDEMPOTENT alone is fine. */
    memcpy(bad, buf, n);
    bad[6] = CW_HF_IDEMPOTENT;
    assert_int_equal(cw_wire_decode(bad, n, &m), CW_OK);
    /* The 8 bytes are counted: without the flag the lengths do not add up,
     * nor with one byte fewer or more. */
    bad[6] = 0;
    assert_int_equal(cw_wire_decode(bad, n, &m), CW_PROTOCOL);
    memcpy(bad, buf, n);
    assert_int_equal(cw_wire_decode(bad, n - 1, &m), CW_PROTOCOL);
    assert_int_equal(cw_wire_decode(bad, n + 1, &m), CW_PROTOCOL);
    /* RESUME without IDEMPOTENT. */
    bad[6] = CW_HF_RESUME;
    assert_int_equal(cw_wire_decode(bad, n, &m), CW_PROTOCOL);
    /* Only a request carries them. */
    for (uint8_t type = CW_MSG_RESP; type <= CW_MSG_CANCEL; type++) {
        struct cw_wire_hdr r = {
            .type = type, .flags = CW_HF_IDEMPOTENT, .req_id = 9};
        cw_wire_hdr_encode(bad, &r);
        assert_int_equal(cw_wire_decode(bad, CW_HDR_SIZE + 8, &m), CW_PROTOCOL);
        assert_int_equal(cw_wire_decode(bad, CW_HDR_SIZE, &m), CW_PROTOCOL);
    }
    /* Truncated anywhere: refused. */
    for (size_t k = 0; k < n; k++) {
        uint8_t *copy = malloc(k ? k : 1);
        memcpy(copy, buf, k);
        assert_int_not_equal(cw_wire_decode(copy, k, &m), CW_OK);
        free(copy);
    }
}

/* Bit flips and truncations of a valid message with descriptors and an
 * overflow descriptor: the decoder never reads out of bounds (ASan) and
 * whatever it accepts is self-consistent. */
static void test_wire_mutations(void **state)
{
    uint8_t base[512];
    struct cw_wire_hdr h = {
        .type = CW_MSG_REQ,
        .flags = CW_HF_OVERFLOW,
        .rpc_id = 1,
        .req_id = 2,
        .budget_us = 3,
        .resp_tag = 4,
    };
    size_t d1 = cw_wire_desc_size(3, 8), len;
    uint8_t *p;
    (void)state;

    memcpy(base + CW_HDR_SIZE, "shm://gw", 8);
    p = cw_wire_desc_encode(base + CW_HDR_SIZE + 8, 0, CW_BULK_READ_ONLY, 100,
                            "shm", 8);
    memset(p, 0x11, 8);
    p = cw_wire_desc_encode(base + CW_HDR_SIZE + 8 + d1, 0, CW_BULK_READ_ONLY,
                            5000, "shm", 8);
    memset(p, 0x22, 8);
    h.dest_len = 8;
    h.ndesc = 1;
    h.desc_len = (uint32_t)d1;
    h.ovf_len = (uint16_t)d1;
    h.payload_len = 5000;
    cw_wire_hdr_encode(base, &h);
    len = CW_HDR_SIZE + 8 + 2 * d1;
    {
        struct cw_wire_msg m;
        assert_int_equal(cw_wire_decode(base, len, &m), CW_OK);
        assert_null(m.payload);
        assert_non_null(m.ovf);
    }
    srand(4242);
    for (int i = 0; i < 100000; i++) {
        size_t n = len;
        uint8_t *copy;
        struct cw_wire_msg m;
        int flips = 1 + rand() % 4;
        if (rand() % 8 == 0)
            n = (size_t)rand() % (len + 1);
        copy = malloc(n ? n : 1);
        memcpy(copy, base, n);
        for (int k = 0; k < flips && n > 0; k++)
            copy[(size_t)rand() % n] ^= (uint8_t)(1u << (rand() % 8));
        if (cw_wire_decode(copy, n, &m) == CW_OK) {
            size_t need = cw_wire_hdr_size(m.hdr.flags) + m.hdr.dest_len +
                          m.hdr.desc_len + m.hdr.ovf_len;
            if (!(m.hdr.flags & CW_HF_OVERFLOW))
                need += m.hdr.payload_len;
            assert_int_equal(need, n);
            for (unsigned k = 0; k < m.hdr.ndesc; k++)
                assert_int_equal(cw_wire_desc_get(m.desc, m.hdr.desc_len,
                                                  m.hdr.ndesc, k, NULL, NULL,
                                                  NULL),
                                 CW_OK);
        }
        free(copy);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rpc_id),
        cmocka_unit_test(test_buf_roundtrip),
        cmocka_unit_test(test_buf_truncated),
        cmocka_unit_test(test_buf_hostile),
        cmocka_unit_test(test_buf_random),
        cmocka_unit_test(test_wire_ok),
        cmocka_unit_test(test_wire_hostile),
        cmocka_unit_test(test_wire_desc),
        cmocka_unit_test(test_wire_mutations),
        cmocka_unit_test(test_wire_resume),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
