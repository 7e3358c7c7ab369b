/*
 * Wire format of RPC messages (docs/wire.md).  Decoders treat input as
 * hostile: every length and count is checked against the bytes received
 * before it is used.
 */
#include "rpc_priv.h"

#include <endian.h>
#include <string.h>

static void put16(uint8_t *p, uint16_t v)
{
    v = htole16(v);
    memcpy(p, &v, 2);
}
static void put32(uint8_t *p, uint32_t v)
{
    v = htole32(v);
    memcpy(p, &v, 4);
}
static void put64(uint8_t *p, uint64_t v)
{
    v = htole64(v);
    memcpy(p, &v, 8);
}
static uint16_t get16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return le16toh(v);
}
static uint32_t get32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return le32toh(v);
}
static uint64_t get64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return le64toh(v);
}

void cw_wire_hdr_encode(void *buf, const struct cw_wire_hdr *h)
{
    uint8_t *p = buf;

    put32(p + 0, CW_WIRE_MAGIC);
    p[4] = CW_WIRE_VERSION;
    p[5] = h->type;
    put16(p + 6, h->flags);
    put64(p + 8, h->rpc_id);
    put64(p + 16, h->req_id);
    put64(p + 24, h->budget_us);
    put32(p + 32, h->resp_tag);
    put16(p + 36, h->status);
    p[38] = h->hops;
    p[39] = (uint8_t)(h->resp_limit >> 16);
    put16(p + 40, h->dest_len);
    put16(p + 42, h->ndesc);
    put32(p + 44, h->desc_len);
    put32(p + 48, h->payload_len);
    put16(p + 52, h->ovf_len);
    put16(p + 54, (uint16_t)h->resp_limit);
    if (h->flags & CW_HF_IDEMPOTENT)
        put64(p + CW_HDR_SIZE, h->resume_id);
}

size_t cw_wire_desc_size(size_t plugin_len, size_t mem_len)
{
    /* len16 | flags8 perm8 total64 plen8 plugin mlen16 mem */
    return 2 + 1 + 1 + 8 + 1 + plugin_len + 2 + mem_len;
}

uint8_t *cw_wire_desc_encode(uint8_t *p, uint8_t flags, uint8_t perm,
                             uint64_t total, const char *plugin, size_t mem_len)
{
    size_t plen = strlen(plugin);

    put16(p, (uint16_t)(cw_wire_desc_size(plen, mem_len) - 2));
    p[2] = flags;
    p[3] = perm;
    put64(p + 4, total);
    p[12] = (uint8_t)plen;
    memcpy(p + 13, plugin, plen);
    put16(p + 13 + plen, (uint16_t)mem_len);
    return p + 15 + plen;
}

/* Decode one entry at p (avail bytes left); *used_p = bytes it spans. */
static cw_status_t desc_parse(const uint8_t *p, size_t avail,
                              struct cw_wire_desc *d, size_t *used_p)
{
    size_t body, plen, mlen;

    if (avail < 2)
        return CW_PROTOCOL;
    body = get16(p);
    if (body > avail - 2 || body < 13)
        return CW_PROTOCOL;
    d->flags = p[2];
    d->perm = p[3];
    d->total = get64(p + 4);
    plen = p[12];
    if (plen == 0 || plen >= CW_URI_PLUGIN_MAX || 13 + plen + 2 > 2 + body)
        return CW_PROTOCOL;
    d->plugin = (const char *)p + 13;
    d->plugin_len = (uint8_t)plen;
    mlen = get16(p + 13 + plen);
    if (13 + plen + 2 + mlen != 2 + body)
        return CW_PROTOCOL;
    d->mem = p + 15 + plen;
    d->mem_len = (uint16_t)mlen;
    if ((d->flags & ~CW_DF_ALL) != 0 || d->perm == 0 ||
        (d->perm & ~(uint8_t)CW_BULK_READ_WRITE) != 0)
        return CW_PROTOCOL;
    for (size_t i = 0; i < plen; i++) {
        char c = d->plugin[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '-'))
            return CW_PROTOCOL;
    }
    *used_p = 2 + body;
    return CW_OK;
}

cw_status_t cw_wire_desc_check(const uint8_t *p, size_t len, unsigned n)
{
    size_t off = 0;

    if (n > CW_MAX_DESC)
        return CW_PROTOCOL;
    for (unsigned i = 0; i < n; i++) {
        struct cw_wire_desc d;
        size_t used;
        if (desc_parse(p + off, len - off, &d, &used) != CW_OK)
            return CW_PROTOCOL;
        off += used;
    }
    return off == len ? CW_OK : CW_PROTOCOL;
}

cw_status_t cw_wire_desc_get(const uint8_t *p, size_t len, unsigned n,
                             unsigned i, struct cw_wire_desc *d_p,
                             const uint8_t **raw_p, size_t *raw_len_p)
{
    size_t off = 0;
    struct cw_wire_desc d;

    if (i >= n)
        return CW_RANGE;
    for (unsigned k = 0;; k++) {
        size_t used;
        if (desc_parse(p + off, len - off, &d, &used) != CW_OK)
            return CW_PROTOCOL;
        if (k == i) {
            if (d_p)
                *d_p = d;
            if (raw_p)
                *raw_p = p + off;
            if (raw_len_p)
                *raw_len_p = used;
            return CW_OK;
        }
        off += used;
    }
}

/* Whether every byte of @p p is printable ASCII other than space ('!' to
 * '~'), eight bytes at a time.  Once no byte has its top bit set, each is
 * 0x00-0x7f: adding 0x01 sets a byte's top bit only for 0x7f and never
 * carries into the next byte, and (x - 0x21..) & ~x & 0x80.. is non-zero
 * exactly when some byte is below 0x21 (the exact "has a byte less than n"
 * test, n <= 128). */
static bool wire_printable(const uint8_t *p, size_t n)
{
    const uint64_t ones = 0x0101010101010101ull, high = ones * 0x80;
    size_t i = 0;
    uint64_t x;

    if (n < 8) {
        for (; i < n; i++)
            if (p[i] <= ' ' || p[i] > '~')
                return false;
        return true;
    }
    /* Words from the start, then the last eight bytes (overlapping what
     * was checked already) instead of a byte loop for the tail. */
    for (;;) {
        memcpy(&x, p + i, 8);
        /* Any byte with its top bit set is out of range (> '~'). */
        if (x & high)
            return false;
        /* Below '!': (x - 0x21) borrows into the lane's top bit. */
        if ((x - ones * 0x21) & ~x & high)
            return false;
        /* Above '~' (0x7f, top bits clear): (x + 0x01) reaches 0x80. */
        if ((x + ones) & high)
            return false;
        if (i + 8 == n)
            return true;
        i = i + 16 <= n ? i + 8 : n - 8;
    }
}

cw_status_t cw_wire_decode(const void *msg, size_t len, struct cw_wire_msg *m_p)
{
    const uint8_t *p = msg;
    struct cw_wire_msg *m = m_p;
    size_t need;

    if (p == NULL || len < CW_HDR_SIZE)
        return CW_PROTOCOL;
    if (get32(p) != CW_WIRE_MAGIC)
        return CW_PROTOCOL;
    if (p[4] != CW_WIRE_VERSION)
        return CW_VERSION;
    /* Written in place, every field (no memset and no copy: this runs
     * twice a forward); on failure *m_p holds parts of the message. */
    m->hdr.type = p[5];
    m->hdr.flags = get16(p + 6);
    m->hdr.rpc_id = get64(p + 8);
    m->hdr.req_id = get64(p + 16);
    m->hdr.budget_us = get64(p + 24);
    m->hdr.resp_tag = get32(p + 32);
    m->hdr.status = get16(p + 36);
    m->hdr.hops = p[38];
    m->hdr.dest_len = get16(p + 40);
    m->hdr.ndesc = get16(p + 42);
    m->hdr.desc_len = get32(p + 44);
    m->hdr.payload_len = get32(p + 48);
    m->hdr.ovf_len = get16(p + 52);
    if (m->hdr.type < CW_MSG_REQ || m->hdr.type > CW_MSG_LAST)
        return CW_PROTOCOL;
    if (m->hdr.type == CW_MSG_BATCH &&
        (m->hdr.flags != 0 || m->hdr.rpc_id != 0 || m->hdr.req_id != 0 ||
         m->hdr.budget_us != 0 || m->hdr.resp_tag != 0 || m->hdr.status != 0 ||
         m->hdr.hops != 0 || m->hdr.ndesc != 0 || m->hdr.desc_len != 0 ||
         m->hdr.payload_len == 0))
        return CW_PROTOCOL;
    m->hdr.resp_limit = (uint32_t)p[39] << 16 | get16(p + 54);
    if ((m->hdr.flags & ~CW_HF_ALL) != 0)
        return CW_PROTOCOL;
    if (m->hdr.type != CW_MSG_REQ && m->hdr.resp_limit != 0)
        return CW_PROTOCOL;
    /* Only a request is idempotent, and only an idempotent one resumes. */
    if ((m->hdr.flags & (CW_HF_IDEMPOTENT | CW_HF_RESUME)) &&
        m->hdr.type != CW_MSG_REQ)
        return CW_PROTOCOL;
    if ((m->hdr.flags & CW_HF_RESUME) && !(m->hdr.flags & CW_HF_IDEMPOTENT))
        return CW_PROTOCOL;
    if ((m->hdr.flags & CW_HF_BATCHES) && m->hdr.type != CW_MSG_REQ)
        return CW_PROTOCOL;
    if (m->hdr.status != CW_OK && !cw_status_valid(m->hdr.status))
        return CW_PROTOCOL;
    if (m->hdr.ndesc > CW_MAX_DESC)
        return CW_PROTOCOL;
    if (((m->hdr.flags & CW_HF_OVERFLOW) != 0) != (m->hdr.ovf_len != 0))
        return CW_PROTOCOL;
    /* A request asks for a member; only an answer names one, and it has
     * a name exactly when it says so. */
    if ((m->hdr.flags & CW_HF_PIN_ASK) && m->hdr.type != CW_MSG_REQ)
        return CW_PROTOCOL;
    if ((m->hdr.flags & CW_HF_PIN) &&
        (m->hdr.type != CW_MSG_RESP || m->hdr.dest_len == 0))
        return CW_PROTOCOL;
    if (m->hdr.type != CW_MSG_REQ && m->hdr.dest_len != 0 &&
        !(m->hdr.flags & CW_HF_PIN))
        return CW_PROTOCOL;
    /* 64-bit sums of 16/32-bit fields cannot wrap. */
    need = cw_wire_hdr_size(m->hdr.flags) + m->hdr.dest_len +
           (size_t)m->hdr.desc_len + m->hdr.ovf_len;
    if (!(m->hdr.flags & CW_HF_OVERFLOW))
        need += m->hdr.payload_len;
    if (need != len)
        return CW_PROTOCOL;
    p += CW_HDR_SIZE;
    m->hdr.resume_id = 0;
    if (m->hdr.flags & CW_HF_IDEMPOTENT) {
        m->hdr.resume_id = get64(p);
        p += CW_HDR_EXT_RESUME;
    }
    m->dest = (const char *)p;
    if (!wire_printable(p, m->hdr.dest_len))
        return CW_PROTOCOL;
    p += m->hdr.dest_len;
    m->desc = p;
    if ((m->hdr.ndesc != 0 || m->hdr.desc_len != 0) &&
        cw_wire_desc_check(p, m->hdr.desc_len, m->hdr.ndesc) != CW_OK)
        return CW_PROTOCOL;
    p += m->hdr.desc_len;
    m->ovf = NULL;
    m->payload = NULL;
    if (m->hdr.ovf_len) {
        struct cw_wire_desc d;
        m->ovf = p;
        if (cw_wire_desc_check(p, m->hdr.ovf_len, 1) != CW_OK ||
            cw_wire_desc_get(p, m->hdr.ovf_len, 1, 0, &d, NULL, NULL) != CW_OK)
            return CW_PROTOCOL;
        if (d.total != m->hdr.payload_len || !(d.perm & CW_BULK_READ_ONLY))
            return CW_PROTOCOL;
        p += m->hdr.ovf_len;
    } else {
        m->payload = p;
    }
    return CW_OK;
}

cw_status_t cw_wire_batch_next(const uint8_t *p, size_t len, size_t *off_p,
                               const uint8_t **msg_p, size_t *msg_len_p)
{
    size_t off = *off_p, n;

    if (off == len)
        return CW_NOENT;
    if (off > len || len - off < CW_BATCH_ENTRY_HDR)
        return CW_PROTOCOL;
    n = get32(p + off);
    off += CW_BATCH_ENTRY_HDR;
    if (n < CW_HDR_SIZE || n > len - off)
        return CW_PROTOCOL;
    *msg_p = p + off;
    *msg_len_p = n;
    *off_p = off + n;
    return CW_OK;
}

size_t cw_wire_batch_put(uint8_t *p, const void *msg, size_t len)
{
    put32(p, (uint32_t)len);
    memcpy(p + CW_BATCH_ENTRY_HDR, msg, len);
    return CW_BATCH_ENTRY_HDR + len;
}
