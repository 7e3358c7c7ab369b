/*
 * Hostile peer for the gateway soak test (gw_chaos.sh): a raw NA endpoint
 * that sends a gateway network messages no well-behaved peer sends, so
 * that the gateway's drop counters (cwctl stats: rx_dropped) must grow
 * while the legitimate load through it keeps exact accounting.
 *
 *   test_gw_hostile URI COUNT SEED [KIND]
 *
 * URI is the gateway network's address ("ofi+tcp://127.0.0.1:7000",
 * "shm://name"); the raw endpoint is opened on the same plugin.  Each of
 * COUNT messages is one of:
 *   - random bytes (0..255 bytes);
 *   - a valid request header cut short;
 *   - a header whose section lengths exceed the message;
 *   - a header with a wrong version;
 *   - a RESP sent as an unexpected message;
 *   - a CANCEL and a DONE for request ids the peer never sent (ids other
 *     clients may use: they must be matched by sender, not by id alone);
 *   - a request whose arguments "overflowed" into memory described by a
 *     forged descriptor (random memory handle bytes of this plugin);
 *   - a request for a random destination string (routing parses it);
 *   - an expected-class RESP on a small tag (the tags the gateway's own
 *     requests used when they were counted from 1; now permuted, they
 *     match nothing and wait in the plugin's early queue until dropped).
 * With KIND (0..9), only messages of that kind (9: a flood of expected-class
 * responses nobody waits for).
 * None may be executed, answered as someone else's, or crash the gateway.
 * Prints "hostile: N sent, M expected-class" and exits 0 once every send
 * completed (or 1 if the endpoint cannot be opened or a send stalls).
 */
#include <causeway/causeway.h>
#include <causeway/na.h>

#include "rpc_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HOSTILE_KINDS   10
#define HOSTILE_MSG_MAX 512

struct hostile {
    const char *plugin; /* for forged descriptors */
    cw_na_t *na;
    cw_na_addr_t *dst;
    unsigned posted, completed;
    uint8_t buf[HOSTILE_KINDS][HOSTILE_MSG_MAX];
};

static void hostile_sent(const struct cw_na_cb_info *info)
{
    struct hostile *hs = info->arg;

    hs->completed++;
}

/* A plausible request header for an RPC nobody registered. */
static void hostile_hdr(struct cw_wire_hdr *h, unsigned i, uint8_t type)
{
    memset(h, 0, sizeof(*h));
    h->type = type;
    h->rpc_id = cw_rpc_id("chaos.hostile");
    h->req_id = 1 + i % 64; /* ids clients used when they were counted */
    h->budget_us = 1000000;
    h->resp_tag = i % 64;
}

/* Build message @p i of kind @p kind in @p p; @return its length. */
static size_t hostile_build(const struct hostile *hs, uint8_t *p, unsigned i,
                            unsigned kind)
{
    static const char dchars[] = "abcxyz019:/@+*._-";
    struct cw_wire_hdr h;
    size_t len, mlen;
    uint8_t *mem;

    switch (kind) {
    case 0: /* random bytes */
        len = (size_t)rand() % 256;
        for (size_t k = 0; k < len; k++)
            p[k] = (uint8_t)rand();
        return len;
    case 1: /* a request header cut short */
        hostile_hdr(&h, i, CW_MSG_REQ);
        cw_wire_hdr_encode(p, &h);
        return (size_t)rand() % CW_HDR_SIZE;
    case 2: /* sections longer than the message */
        hostile_hdr(&h, i, CW_MSG_REQ);
        h.dest_len = 200;
        h.ndesc = 3;
        h.desc_len = 0xffffff00u;
        h.payload_len = 0x7fffffffu;
        cw_wire_hdr_encode(p, &h);
        memset(p + CW_HDR_SIZE, 'x', 16);
        return CW_HDR_SIZE + 16;
    case 3: /* wrong version */
        hostile_hdr(&h, i, CW_MSG_REQ);
        cw_wire_hdr_encode(p, &h);
        p[4] = (uint8_t)(CW_WIRE_VERSION + 1 + rand() % 100);
        return CW_HDR_SIZE;
    case 4: /* a response where requests arrive */
        hostile_hdr(&h, i, CW_MSG_RESP);
        cw_wire_hdr_encode(p, &h);
        return CW_HDR_SIZE;
    case 5: /* cancel of another client's request id */
        hostile_hdr(&h, i, CW_MSG_CANCEL);
        cw_wire_hdr_encode(p, &h);
        return CW_HDR_SIZE;
    case 6: /* "pulled your overflowed response" for another's id */
        hostile_hdr(&h, i, CW_MSG_DONE);
        cw_wire_hdr_encode(p, &h);
        return CW_HDR_SIZE;
    case 7: /* overflowed arguments behind a forged memory handle */
        hostile_hdr(&h, i, CW_MSG_REQ);
        h.flags = CW_HF_OVERFLOW;
        mlen = 1 + (size_t)rand() % 96;
        h.ovf_len = (uint16_t)cw_wire_desc_size(strlen(hs->plugin), mlen);
        h.payload_len = 1 + (uint32_t)rand() % (1u << 20);
        mem = cw_wire_desc_encode(p + CW_HDR_SIZE, 0, CW_BULK_READ_ONLY,
                                  h.payload_len, hs->plugin, mlen);
        for (size_t k = 0; k < mlen; k++)
            mem[k] = (uint8_t)rand();
        cw_wire_hdr_encode(p, &h);
        return CW_HDR_SIZE + h.ovf_len;
    case 8: /* a random destination */
        hostile_hdr(&h, i, CW_MSG_REQ);
        h.rpc_id = cw_rpc_id("causeway.ping");
        h.dest_len = (uint16_t)(1 + rand() % 120);
        for (size_t k = 0; k < h.dest_len; k++)
            p[CW_HDR_SIZE + k] = (uint8_t)dchars[rand() % (sizeof(dchars) - 1)];
        cw_wire_hdr_encode(p, &h);
        return CW_HDR_SIZE + h.dest_len;
    default: /* expected-class response, below */
        hostile_hdr(&h, i, CW_MSG_RESP);
        h.payload_len = 8;
        cw_wire_hdr_encode(p, &h);
        memcpy(p + CW_HDR_SIZE, "\x04\x00\x00\x00evil", 8);
        return CW_HDR_SIZE + 8;
    }
}

/* Progress until every posted send completed; false after 10 s. */
static bool hostile_drain(struct hostile *hs)
{
    uint64_t end = cw_now_ns() + 10000000000ull;

    while (hs->completed < hs->posted) {
        if (cw_now_ns() > end)
            return false;
        cw_na_progress_wait(hs->na, 10, NULL);
    }
    return true;
}

int main(int argc, char **argv)
{
    struct hostile *hs = NULL;
    char scheme[64];
    const char *sep;
    unsigned count, expected = 0, only = HOSTILE_KINDS;
    cw_status_t st;
    int rc = 1;

    if (argc < 4 || argc > 5 || (sep = strstr(argv[1], "://")) == NULL ||
        (size_t)(sep - argv[1]) + 4 > sizeof(scheme)) {
        fprintf(stderr, "usage: test_gw_hostile URI COUNT SEED [KIND]\n");
        return 2;
    }
    count = (unsigned)strtoul(argv[2], NULL, 10);
    srand((unsigned)strtoul(argv[3], NULL, 10));
    if (argc == 5)
        only = (unsigned)strtoul(argv[4], NULL, 10) % HOSTILE_KINDS;
    snprintf(scheme, sizeof(scheme), "%.*s://", (int)(sep - argv[1]), argv[1]);
    if (strncmp(scheme, "ofi+tcp", 7) == 0 || strncmp(scheme, "ucx+", 4) == 0)
        snprintf(scheme + strlen(scheme), sizeof(scheme) - strlen(scheme),
                 "127.0.0.1:0");
    hs = calloc(1, sizeof(*hs));
    if (hs == NULL)
        return 1;
    st = cw_na_open(scheme, 0, NULL, &hs->na);
    if (st == CW_OK) {
        hs->plugin = cw_na_plugin_name(hs->na);
        st = cw_na_addr_lookup(hs->na, argv[1], &hs->dst);
    }
    if (st != CW_OK) {
        fprintf(stderr, "test_gw_hostile: %s: %s\n", argv[1],
                cw_status_str(st));
        goto out;
    }
    for (unsigned i = 0; i < count; i++) {
        unsigned kind = only < HOSTILE_KINDS ? only : i % HOSTILE_KINDS;
        uint8_t *p = hs->buf[kind];
        size_t len;

        /* One buffer per kind, reused once every send completed. */
        if (!hostile_drain(hs))
            break;
        len = hostile_build(hs, p, i, kind);
        if (kind == HOSTILE_KINDS - 1) {
            st = cw_na_msg_send_expected(hs->na, p, len, hs->dst, i % 64,
                                         hostile_sent, hs, NULL);
            expected += st == CW_OK;
        } else {
            st = cw_na_msg_send_unexpected(hs->na, p, len, hs->dst, 0,
                                           hostile_sent, hs, NULL);
        }
        if (st == CW_OK)
            hs->posted++;
    }
    if (!hostile_drain(hs)) {
        fprintf(stderr, "test_gw_hostile: %u of %u sends never completed\n",
                hs->posted - hs->completed, hs->posted);
        goto out;
    }
    printf("hostile: %u sent, %u expected-class\n", hs->posted, expected);
    rc = hs->posted > 0 ? 0 : 1;
out:
    if (hs->dst != NULL)
        cw_na_addr_free(hs->na, hs->dst);
    cw_na_close(hs->na);
    free(hs);
    return rc;
}
