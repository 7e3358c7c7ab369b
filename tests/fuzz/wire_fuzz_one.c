/* The checks run on every wire or address fuzz input (wire_fuzz_one.h). */
#include "wire_fuzz_one.h"

#include <causeway/addr.h>
#include <causeway/config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpc_priv.h"
#include "rpc_test_util.h"

unsigned long wire_fuzz_accepted, addr_fuzz_accepted;

/* Read the arguments as a handler would, in an order the input picks. */
static void read_args(const uint8_t *payload, uint32_t len, uint32_t pick)
{
    cw_buf_t *r;
    const void *p;
    const char *s;
    size_t n;
    uint32_t u;

    if (cw_buf_create_reader(payload, len, &r) != CW_OK)
        return;
    for (int k = 0; k < 8 && cw_buf_error(r) == CW_OK; k++, pick /= 3) {
        switch (pick % 3) {
        case 0:
            (void)cw_buf_get_bytes(r, &p, &n);
            break;
        case 1:
            (void)cw_buf_get_str(r, &s);
            break;
        default:
            (void)cw_buf_get_u32(r, &u);
            break;
        }
    }
    cw_buf_destroy(r);
}

static int check_msg(const struct cw_wire_msg *m, uint32_t pick, int depth);

/* Each entry as the receiver takes it: its own copy, decoded alone. */
static int check_batch(const struct cw_wire_msg *m, uint32_t pick, int depth)
{
    size_t off = 0, n;
    const uint8_t *e;
    int rc = 0;

    while (rc == 0 && cw_wire_batch_next(m->payload, m->hdr.payload_len, &off,
                                         &e, &n) == CW_OK) {
        struct cw_wire_msg em;
        uint8_t *copy = malloc(n ? n : 1);

        if (copy == NULL)
            return 0;
        memcpy(copy, e, n);
        if (cw_wire_decode(copy, n, &em) == CW_OK) {
            /* Receivers drop a batch inside a batch; it must still be
             * safe to look at. */
            rc = check_msg(&em, pick, depth + 1);
        }
        free(copy);
    }
    return rc;
}

static int check_msg(const struct cw_wire_msg *m, uint32_t pick, int depth)
{
    if (m->hdr.type == CW_MSG_BATCH)
        return depth < 2 ? check_batch(m, pick, depth) : 0;
    for (unsigned i = 0; i < m->hdr.ndesc; i++) {
        struct cw_wire_desc d;
        const uint8_t *raw;
        size_t raw_len;

        if (cw_wire_desc_get(m->desc, m->hdr.desc_len, m->hdr.ndesc, i, &d,
                             &raw, &raw_len) != CW_OK) {
            fprintf(stderr, "accepted section: descriptor %u unreadable\n", i);
            return -1;
        }
        if (raw < m->desc || raw + raw_len > m->desc + m->hdr.desc_len ||
            d.plugin < (const char *)raw || d.mem < raw ||
            d.mem + d.mem_len > raw + raw_len) {
            fprintf(stderr, "descriptor %u points outside its section\n", i);
            return -1;
        }
    }
    if (m->hdr.dest_len > 0) {
        /* The routing destination, as the gateway reads it. */
        char dest[CW_ADDR_STR_MAX];
        struct cw_addr_path path;

        if (m->hdr.dest_len < sizeof(dest)) {
            memcpy(dest, m->dest, m->hdr.dest_len);
            dest[m->hdr.dest_len] = '\0';
            (void)cw_addr_path_parse(dest, &path, NULL, 0);
        }
    }
    if (m->payload != NULL)
        read_args(m->payload, m->hdr.payload_len, pick);
    return 0;
}

int wire_fuzz_one(const uint8_t *data, size_t len)
{
    struct cw_wire_msg m;
    uint8_t *copy = malloc(len ? len : 1); /* exact size: ASan sees overruns */
    uint32_t pick = (uint32_t)len * 2654435761u;
    int rc = 0;

    if (copy == NULL)
        return 0;
    memcpy(copy, data, len);
    for (size_t i = 0; i < len && i < 8; i++)
        pick = pick * 31u + data[len - 1 - i];
    if (cw_wire_decode(copy, len, &m) == CW_OK) {
        wire_fuzz_accepted++;
        rc = check_msg(&m, pick, 0);
    }
    free(copy);
    return rc;
}

/* Parse, format, parse again: the two formatted texts must be equal. */
static int addr_round_trip(const char *s)
{
    char a[CW_ADDR_STR_MAX], b[CW_ADDR_STR_MAX];
    struct cw_addr_path p, q;
    struct cw_addr_pattern pp, pq;
    struct cw_uri u, v;
    char host[CW_URI_LOCATION_MAX], err[128];
    uint16_t port;
    uint8_t family, ip[16];
    int rc = 0;

    if (cw_uri_parse_err(s, &u, err, sizeof(err)) == CW_OK) {
        addr_fuzz_accepted++;
        if (cw_uri_format(&u, a, sizeof(a)) != CW_OK ||
            cw_uri_parse(a, &v) != CW_OK ||
            cw_uri_format(&v, b, sizeof(b)) != CW_OK || strcmp(a, b) != 0) {
            fprintf(stderr, "uri \"%s\" does not format back\n", s);
            rc = -1;
        }
        (void)cw_location_split(u.location, host, &port);
        (void)cw_location_host(u.location, host, &port, &family, ip);
    }
    if (cw_addr_path_parse(s, &p, err, sizeof(err)) == CW_OK) {
        addr_fuzz_accepted++;
        if (cw_addr_path_format(&p, a, sizeof(a)) != CW_OK ||
            cw_addr_path_parse(a, &q, NULL, 0) != CW_OK ||
            cw_addr_path_format(&q, b, sizeof(b)) != CW_OK ||
            strcmp(a, b) != 0) {
            fprintf(stderr, "address \"%s\" does not format back\n", s);
            rc = -1;
        }
    }
    if (cw_addr_pattern_parse(s, &pp, err, sizeof(err)) == CW_OK) {
        addr_fuzz_accepted++;
        if (cw_addr_pattern_format(&pp, a, sizeof(a)) != CW_OK ||
            cw_addr_pattern_parse(a, &pq, NULL, 0) != CW_OK ||
            cw_addr_pattern_format(&pq, b, sizeof(b)) != CW_OK ||
            strcmp(a, b) != 0) {
            fprintf(stderr, "pattern \"%s\" does not format back\n", s);
            rc = -1;
        }
        if (cw_uri_parse(s, &u) == CW_OK)
            (void)cw_addr_pattern_match(&pp, &u);
    }
    return rc;
}

int addr_fuzz_one(const uint8_t *data, size_t len)
{
    char *s = malloc(len + 1);
    int rc;

    if (s == NULL)
        return 0;
    memcpy(s, data, len);
    s[len] = '\0';
    rc = addr_round_trip(s);
    free(s);
    return rc;
}

int live_fuzz_open(struct live_fuzz *lf)
{
    char uri[CW_URI_MAX];

    memset(lf, 0, sizeof(*lf));
    if (cw_context_create(NULL, &lf->ctx) != CW_OK ||
        cw_network_open(lf->ctx, "shm://", CW_NET_LISTEN, &lf->net) != CW_OK ||
        cw_network_uri(lf->net, uri, sizeof(uri)) != CW_OK ||
        cw_rpc_register(lf->ctx, "echo", h_echo, NULL, NULL, NULL) != CW_OK ||
        cw_na_open("shm://", 0, NULL, &lf->na) != CW_OK ||
        cw_na_addr_lookup(lf->na, uri, &lf->dst) != CW_OK) {
        fprintf(stderr, "live context and raw endpoint: cannot open (is "
                        "CAUSEWAY_PLUGIN_PATH set?)\n");
        live_fuzz_close(lf);
        return -1;
    }
    return 0;
}

static void live_sent(const struct cw_na_cb_info *info)
{
    ((struct live_fuzz *)info->arg)->sent++;
}

static void live_pump(struct live_fuzz *lf)
{
    cw_na_progress(lf->na, 0, NULL);
    cw_progress(lf->ctx, 0);
    cw_trigger(lf->ctx, 0, 0, NULL);
}

bool live_fuzz_send(struct live_fuzz *lf, const void *msg, size_t len)
{
    if (cw_na_msg_send_unexpected(lf->na, msg, len, lf->dst, 0, live_sent, lf,
                                  NULL) != CW_OK)
        return false;
    lf->posted++;
    for (int k = 0; k < 200 && lf->sent < lf->posted; k++)
        live_pump(lf);
    return true;
}

bool live_fuzz_alive(struct live_fuzz *lf)
{
    struct call res = {0, CW_INTERNAL};
    cw_addr_t *self;
    cw_handle_t *h;
    uint64_t end = cw_now_ns() + 5000000000ull;

    if (cw_network_self(lf->net, &self) != CW_OK)
        return false;
    if (cw_handle_create(lf->ctx, self, cw_rpc_id("echo"), &h) != CW_OK) {
        cw_addr_free(self);
        return false;
    }
    cw_buf_put_bytes(cw_handle_input(h), "ok", 2);
    if (cw_forward(h, 0, call_cb, &res) == CW_OK)
        while (res.done == 0 && cw_now_ns() < end)
            live_pump(lf);
    cw_handle_release(h);
    cw_addr_free(self);
    return res.done == 1 && res.st == CW_OK;
}

void live_fuzz_close(struct live_fuzz *lf)
{
    if (lf->na != NULL) {
        /* What it still sends completes before it closes. */
        for (int k = 0; k < 1000 && lf->sent < lf->posted; k++)
            live_pump(lf);
        if (lf->dst != NULL)
            cw_na_addr_free(lf->na, lf->dst);
        cw_na_close(lf->na);
    }
    if (lf->ctx != NULL)
        cw_context_destroy(lf->ctx);
    memset(lf, 0, sizeof(*lf));
}

static struct live_fuzz live_one;
static unsigned long live_inputs;

static unsigned long live_unsent;

/* At exit: how many inputs reached the context, and what it made of them
 * (a campaign's figures mean something only if most were sent). */
static void live_one_close(void)
{
    struct cw_context_stats st;

    if (cw_context_stats(live_one.ctx, &st) == CW_OK)
        fprintf(stderr,
                "live: %lu inputs, %lu not sent; the context took %llu "
                "requests, dropped %llu messages, %llu for no RPC\n",
                live_inputs, live_unsent, (unsigned long long)st.rx_requests,
                (unsigned long long)st.rx_dropped,
                (unsigned long long)st.no_rpc);
    live_fuzz_close(&live_one);
}

int live_fuzz_one(const uint8_t *data, size_t len)
{
    if (live_one.ctx == NULL) {
        if (live_fuzz_open(&live_one) != 0)
            return -1;
        atexit(live_one_close);
    }
    if (!live_fuzz_send(&live_one, data, len))
        live_unsent++;
    for (int k = 0; k < 20; k++)
        live_pump(&live_one);
    if (++live_inputs % 256 == 0 && !live_fuzz_alive(&live_one)) {
        fprintf(stderr, "the context no longer answers after %lu inputs\n",
                live_inputs);
        return -1;
    }
    return 0;
}
