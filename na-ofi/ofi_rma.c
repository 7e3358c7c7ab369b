/*
 * na-ofi memory registration and RMA.  One fid_mr per segment (rxm allows
 * one iov per registration); put/get walk the local and remote segment
 * lists together and post fi_writemsg/fi_readmsg pieces that each cover
 * one contiguous remote range and up to iov_limit local pieces, never more
 * than the provider's max_msg_size.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "ofi.h"

#define OFI_RMA_MAX_INFLIGHT 64u
#define OFI_MEM_HDR          16u
#define OFI_MEM_SEG          24u

static void ofi_put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t ofi_get64(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static void ofi_put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t ofi_get32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

/* A key for a registration whose key the plugin chooses (no
 * FI_MR_PROV_KEY: tcp;ofi_rxm and fi_shm here).  Those providers check
 * only that the key names a registration that covers the range, and
 * addresses are offsets into it: with keys 1, 2, 3..., a peer holding any
 * handle reached every other registration by editing its key.  A random
 * 64-bit key makes the handle the capability. */
static bool ofi_mr_key(const struct cw_na_class *cls, uint64_t *key_p)
{
    size_t size = cls->info->domain_attr->mr_key_size;
    uint64_t key;

    if (getrandom(&key, sizeof(key), 0) != (ssize_t)sizeof(key))
        return false;
    if (size > 0 && size < sizeof(key))
        key &= (1ull << (8 * size)) - 1;
    *key_p = key;
    return true;
}

static cw_status_t ofi_mr_open(struct cw_na_class *cls, struct ofi_seg *s,
                               uint32_t access)
{
    uint64_t acc = FI_READ | FI_WRITE;
    uint64_t key = 0;
    int rc, tries = 0;

    if (access & CW_NA_MEM_READ)
        acc |= FI_REMOTE_READ;
    if (access & CW_NA_MEM_WRITE)
        acc |= FI_REMOTE_WRITE;
    do {
        if (!(cls->mr_mode & FI_MR_PROV_KEY) && !ofi_mr_key(cls, &key)) {
            OFI_ERR(cls, "getrandom() for a memory key failed: %s",
                    strerror(errno));
            return CW_INTERNAL;
        }
        rc = fi_mr_reg(cls->domain, s->base, (size_t)s->len, acc, 0, key, 0,
                       &s->mr, NULL);
    } while (rc == -FI_ENOKEY && !(cls->mr_mode & FI_MR_PROV_KEY) &&
             ++tries < 4); /* that key is taken */
    if (rc != 0) {
        OFI_ERR(cls, "fi_mr_reg(%p, %llu) failed: %s", s->base,
                (unsigned long long)s->len, fi_strerror(-rc));
        s->mr = NULL;
        return ofi_status(rc);
    }
    if (cls->mr_mode & FI_MR_ENDPOINT) {
        rc = fi_mr_bind(s->mr, &cls->ep->fid, 0);
        if (rc == 0)
            rc = fi_mr_enable(s->mr);
        if (rc != 0) {
            OFI_ERR(cls, "binding a memory region to the endpoint failed: %s",
                    fi_strerror(-rc));
            return ofi_status(rc);
        }
    }
    s->desc = fi_mr_desc(s->mr);
    s->key = fi_mr_key(s->mr);
    s->addr =
        (cls->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)s->base : 0;
    return CW_OK;
}

cw_status_t ofi_mem_register(cw_na_class_t *cls,
                             const struct cw_na_segment *segs, size_t n,
                             uint32_t access, cw_na_mem_t **mem_p)
{
    struct cw_na_mem *m;
    cw_status_t st;

    if (segs == NULL || n == 0 || n > OFI_MAX_SEGMENTS || mem_p == NULL ||
        (access & ~(CW_NA_MEM_READ | CW_NA_MEM_WRITE)) != 0)
        return CW_INVALID_ARG;
    m = calloc(1, sizeof(*m) + n * sizeof(m->seg[0]));
    if (m == NULL)
        return CW_NOMEM;
    nau_list_add_tail(&cls->mems, &m->link);
    m->local = true;
    m->access = access;
    m->nseg = (uint32_t)n;
    for (size_t i = 0; i < n; i++) {
        if (segs[i].len > 0 && segs[i].base == NULL) {
            st = CW_INVALID_ARG;
            goto err_release;
        }
        if (segs[i].len > UINT64_MAX - m->total) {
            st = CW_RANGE;
            goto err_release;
        }
        m->seg[i].base = segs[i].base;
        m->seg[i].len = segs[i].len;
        m->total += segs[i].len;
        if (segs[i].len == 0)
            continue;
        st = ofi_mr_open(cls, &m->seg[i], access);
        if (st != CW_OK)
            goto err_release;
    }
    *mem_p = m;
    return CW_OK;

err_release:
    ofi_mem_release(cls, m);
    return st;
}

void ofi_mem_release(cw_na_class_t *cls, cw_na_mem_t *mem)
{
    if (mem == NULL)
        return;
    nau_list_del(&mem->link);
    for (uint32_t i = 0; i < mem->nseg; i++) {
        if (mem->seg[i].mr != NULL) {
            int rc = fi_close(&mem->seg[i].mr->fid);

            if (rc != 0)
                OFI_WARN(cls, "fi_close(memory region) failed: %s",
                         fi_strerror(-rc));
        }
    }
    free(mem);
}

/* Handles the user did not release before closing the instance.  An open
 * registration keeps the domain busy (fi_close() answers -FI_EBUSY and the
 * domain and fabric leak), so they go with the instance, like its
 * addresses: the handles are invalid from here on.  The endpoint is
 * already closed, so no RMA can still be using them. */
void ofi_mem_fini(struct cw_na_class *cls)
{
    unsigned nlocal = 0, nremote = 0;

    if (cls->mems.next == NULL)
        return;
    while (!nau_list_empty(&cls->mems)) {
        struct cw_na_mem *m =
            nau_container_of(cls->mems.next, struct cw_na_mem, link);

        if (m->local)
            nlocal++;
        else
            nremote++;
        ofi_mem_release(cls, m);
    }
    if (nlocal > 0)
        OFI_WARN(cls,
                 "closing with %u memory registration(s) still open "
                 "(and %u remote handle(s)): released; callers should "
                 "release them first",
                 nlocal, nremote);
    else if (nremote > 0)
        OFI_DBG(cls,
                "closing with %u remote handle(s) not released: "
                "released",
                nremote);
}

size_t ofi_mem_serialize_size(cw_na_class_t *cls, cw_na_mem_t *mem)
{
    return mem ? OFI_MEM_HDR + (size_t)mem->nseg * OFI_MEM_SEG : 0;
}

cw_status_t ofi_mem_serialize(cw_na_class_t *cls, void *buf, size_t size,
                              cw_na_mem_t *mem)
{
    uint8_t *p = buf;

    if (mem == NULL || buf == NULL)
        return CW_INVALID_ARG;
    if (size < ofi_mem_serialize_size(cls, mem))
        return CW_OVERFLOW;
    ofi_put32(p, OFI_MEM_MAGIC);
    ofi_put32(p + 4, mem->access);
    ofi_put32(p + 8, mem->nseg);
    ofi_put32(p + 12, 0);
    p += OFI_MEM_HDR;
    for (uint32_t i = 0; i < mem->nseg; i++, p += OFI_MEM_SEG) {
        ofi_put64(p, mem->seg[i].addr);
        ofi_put64(p + 8, mem->seg[i].len);
        ofi_put64(p + 16, mem->seg[i].key);
    }
    return CW_OK;
}

cw_status_t ofi_mem_deserialize(cw_na_class_t *cls, const void *buf,
                                size_t size, cw_na_mem_t **mem_p)
{
    const uint8_t *p = buf;
    struct cw_na_mem *m;
    uint32_t n, access;

    if (buf == NULL || mem_p == NULL || size < OFI_MEM_HDR)
        return CW_INVALID_ARG;
    if (ofi_get32(p) != OFI_MEM_MAGIC)
        return CW_PROTOCOL;
    access = ofi_get32(p + 4);
    n = ofi_get32(p + 8);
    if ((access & ~(CW_NA_MEM_READ | CW_NA_MEM_WRITE)) != 0 || n == 0 ||
        n > OFI_MAX_SEGMENTS || ofi_get32(p + 12) != 0 ||
        (size - OFI_MEM_HDR) / OFI_MEM_SEG < n)
        return CW_PROTOCOL;
    m = calloc(1, sizeof(*m) + n * sizeof(m->seg[0]));
    if (m == NULL)
        return CW_NOMEM;
    m->access = access;
    m->nseg = n;
    nau_list_add_tail(&cls->mems, &m->link);
    p += OFI_MEM_HDR;
    for (uint32_t i = 0; i < n; i++, p += OFI_MEM_SEG) {
        m->seg[i].addr = ofi_get64(p);
        m->seg[i].len = ofi_get64(p + 8);
        m->seg[i].key = ofi_get64(p + 16);
        if (m->seg[i].len > UINT64_MAX - m->total ||
            m->seg[i].len > UINT64_MAX - m->seg[i].addr) {
            ofi_mem_release(cls, m);
            return CW_PROTOCOL;
        }
        m->total += m->seg[i].len;
    }
    *mem_p = m;
    return CW_OK;
}

/* Segment holding byte @p off of @p m, and the offset inside it. */
static uint32_t ofi_seg_at(const struct cw_na_mem *m, uint64_t off,
                           uint64_t *in_p)
{
    uint32_t i = 0;

    while (i < m->nseg && off >= m->seg[i].len) {
        off -= m->seg[i].len;
        i++;
    }
    *in_p = off;
    return i;
}

/* Posts pieces until done, -FI_EAGAIN or an error.  Returns CW_AGAIN when
 * the rest must be retried, an error only when nothing is in flight. */
cw_status_t ofi_rma_post(struct cw_na_class *cls, struct cw_na_op *op)
{
    while (op->pos < op->len && op->status == CW_OK && op->forced == CW_OK &&
           op->inflight < OFI_RMA_MAX_INFLIGHT) {
        struct iovec iov[8];
        void *desc[8];
        struct fi_rma_iov rma;
        struct fi_msg_rma msg;
        uint64_t rin, lin, want, got = 0;
        uint32_t ri = ofi_seg_at(op->remote, op->roff + op->pos, &rin);
        uint32_t li = ofi_seg_at(op->local, op->loff + op->pos, &lin);
        size_t niov = 0, maxiov = cls->iov_limit < 8 ? cls->iov_limit : 8;
        struct ofi_sub *sub;
        int rc;

        want = op->remote->seg[ri].len - rin;
        if (want > op->len - op->pos)
            want = op->len - op->pos;
        if (want > cls->max_msg_size)
            want = cls->max_msg_size;
        while (got < want && niov < maxiov && li < op->local->nseg) {
            uint64_t piece = op->local->seg[li].len - lin;

            if (piece > want - got)
                piece = want - got;
            if (piece > 0) {
                iov[niov].iov_base = (char *)op->local->seg[li].base + lin;
                iov[niov].iov_len = (size_t)piece;
                desc[niov++] = op->local->seg[li].desc;
                got += piece;
            }
            li++;
            lin = 0;
        }
        sub = calloc(1, sizeof(*sub));
        if (sub == NULL) {
            op->status = CW_NOMEM;
            break;
        }
        sub->ctx.kind = OFI_CTX_SUB;
        sub->op = op;
        rma.addr = op->remote->seg[ri].addr + rin;
        rma.len = (size_t)got;
        rma.key = op->remote->seg[ri].key;
        memset(&msg, 0, sizeof(msg));
        msg.msg_iov = iov;
        msg.desc = desc;
        msg.iov_count = niov;
        msg.addr = op->peer->fi;
        msg.rma_iov = &rma;
        msg.rma_iov_count = 1;
        msg.context = &sub->ctx;
        rc = op->type == CW_NA_OP_PUT
                 ? (int)fi_writemsg(cls->ep, &msg,
                                    FI_COMPLETION | cls->put_flags)
                 : (int)fi_readmsg(cls->ep, &msg, FI_COMPLETION);
        if (rc == -FI_EAGAIN) {
            free(sub);
            return CW_AGAIN;
        }
        if (rc != 0) {
            char str[128];

            ofi_format_raw(cls, op->peer->raw, op->peer->len, str, sizeof(str));
            OFI_ERR_RL(cls, "%s to %s failed: %s",
                       op->type == CW_NA_OP_PUT ? "fi_writemsg()"
                                                : "fi_readmsg()",
                       str, fi_strerror(-rc));
            free(sub);
            op->status = ofi_status(rc);
            break;
        }
        nau_list_add_tail(&op->subs, &sub->link);
        op->inflight++;
        op->in_provider = true;
        op->pos += got;
    }
    if (op->inflight == 0) {
        if (op->status != CW_OK)
            return op->status;
        if (op->pos == op->len)
            ofi_op_finish(cls, op, CW_OK);
    }
    return CW_OK;
}

void ofi_rma_sub_done(struct cw_na_class *cls, struct ofi_sub *sub, int err)
{
    struct cw_na_op *op = sub->op;

    nau_list_del(&sub->link);
    free(sub);
    op->inflight--;
    if (err != 0) {
        cw_status_t st = ofi_op_error(op, err);

        if (op->status == CW_OK)
            op->status = st;
        if (op->forced == CW_OK &&
            (st == CW_UNREACHABLE || st == CW_DISCONNECTED))
            ofi_peer_suspect(cls, op->peer);
    } else {
        ofi_peer_alive(cls, op->peer);
    }
    if (op->inflight > 0)
        return;
    op->in_provider = false;
    if (op->finished) {
        ofi_op_finish(cls, op, op->status);
        return;
    }
    if (op->status == CW_OK && op->forced == CW_OK && op->pos < op->len) {
        cw_status_t st = ofi_rma_post(cls, op);

        if (st == CW_AGAIN)
            ofi_retry_push(cls, op);
        else if (st != CW_OK)
            ofi_op_finish(cls, op, st);
        return;
    }
    ofi_op_finish(cls, op, op->status != CW_OK ? op->status : op->forced);
}

static cw_status_t ofi_rma(struct cw_na_class *cls, enum cw_na_op_type type,
                           struct cw_na_mem *local, size_t local_off,
                           struct cw_na_mem *remote, size_t remote_off,
                           size_t len, struct cw_na_addr *peer, cw_na_cb_t cb,
                           void *arg, cw_na_op_t **op_p)
{
    uint32_t need = type == CW_NA_OP_PUT ? CW_NA_MEM_WRITE : CW_NA_MEM_READ;
    struct cw_na_op *op;

    if (local == NULL || remote == NULL || peer == NULL || cb == NULL ||
        !local->local)
        return CW_INVALID_ARG;
    if (local_off > local->total || len > local->total - local_off ||
        remote_off > remote->total || len > remote->total - remote_off)
        return CW_RANGE;
    if (!(remote->access & need))
        return CW_PERMISSION;
    op = ofi_op_new(cls, type, peer, cb, arg);
    if (op == NULL)
        return CW_NOMEM;
    op->local = local;
    op->remote = remote;
    op->loff = local_off;
    op->roff = remote_off;
    op->len = len;
    return ofi_op_submit(cls, op, op_p);
}

cw_status_t ofi_put(cw_na_class_t *cls, cw_na_mem_t *local, size_t local_off,
                    cw_na_mem_t *remote, size_t remote_off, size_t len,
                    cw_na_addr_t *peer, cw_na_cb_t cb, void *arg,
                    cw_na_op_t **op_p)
{
    return ofi_rma(cls, CW_NA_OP_PUT, local, local_off, remote, remote_off, len,
                   peer, cb, arg, op_p);
}

cw_status_t ofi_get(cw_na_class_t *cls, cw_na_mem_t *local, size_t local_off,
                    cw_na_mem_t *remote, size_t remote_off, size_t len,
                    cw_na_addr_t *peer, cw_na_cb_t cb, void *arg,
                    cw_na_op_t **op_p)
{
    return ofi_rma(cls, CW_NA_OP_GET, local, local_off, remote, remote_off, len,
                   peer, cb, arg, op_p);
}
