/*
 * na-verbs: memory handles and one-sided RMA.  Registrations go through a
 * cache keyed by address range: a segment whose exact range is already
 * registered with the same access reuses that MR; an entry is deregistered
 * (invalidated) when the last handle using it is released, so no MR ever
 * outlives the handles that name it and memory freed after release is
 * never reached through a stale key.  put/get check bounds and the remote
 * handle's access on the initiator before posting, then split the transfer
 * at segment boundaries (and at 1 GiB) into RDMA WRITE/READ work requests,
 * each signalled so that an op whose connection fails half-way through
 * still completes exactly once.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vb.h"

#define VB_MEM_MAGIC "VBM1"
#define VB_MEM_FIXED 16
#define VB_MEM_SEG   24

/* ---- registration cache ---- */

static struct vb_rce *rcache_get(vb_class_t *cls, uintptr_t addr, size_t len,
                                 int access, cw_status_t *st_p)
{
    for (struct vb_rce *e = cls->rcache; e; e = e->next) {
        /* Same range and access exactly: a handle's rkey must not allow
         * more than the handle says (the device checks the MR, not the
         * handle, whose copy at the peer is the peer's to edit). */
        if (addr == e->addr && len == e->len && e->access == access) {
            e->refs++;
            cls->stats.rcache_hits++;
            return e;
        }
    }
    cls->stats.rcache_misses++;
    struct vb_rce *e = calloc(1, sizeof(*e));
    if (!e) {
        *st_p = CW_NOMEM;
        return NULL;
    }
    e->mr = cls->ops->reg_mr(cls->pd, (void *)addr, len, access);
    if (!e->mr) {
        int err = errno;
        VB_ERR(cls, "ibv_reg_mr(%p, %zu) failed: %s", (void *)addr, len,
               strerror(err));
        *st_p = vb_status(VB_E_RC, err);
        free(e);
        return NULL;
    }
    e->addr = addr;
    e->len = len;
    e->access = access;
    e->refs = 1;
    e->next = cls->rcache;
    cls->rcache = e;
    return e;
}

static void rcache_put(vb_class_t *cls, struct vb_rce *rce)
{
    if (!rce || --rce->refs > 0)
        return;
    for (struct vb_rce **pp = &cls->rcache; *pp; pp = &(*pp)->next)
        if (*pp == rce) {
            *pp = rce->next;
            break;
        }
    int rc = cls->ops->dereg_mr(rce->mr);
    if (rc) {
        char eb[64];
        VB_ERR(cls, "ibv_dereg_mr() failed: %s",
               vb_strerr(VB_E_RC, rc, eb, sizeof(eb)));
    }
    free(rce);
}

void vb_rcache_fini(vb_class_t *cls)
{
    while (cls->rcache) {
        struct vb_rce *e = cls->rcache;
        cls->rcache = e->next;
        cls->ops->dereg_mr(e->mr);
        free(e);
    }
}

/* ---- handles ---- */

cw_status_t vb_mem_register(cw_na_class_t *cls,
                            const struct cw_na_segment *segs, size_t n,
                            uint32_t access, cw_na_mem_t **mem_p)
{
    uint64_t total = 0;
    int vacc = IBV_ACCESS_LOCAL_WRITE;
    cw_status_t st = CW_OK;
    if (!segs || n == 0 || n > VB_MAX_SEGS || !mem_p ||
        (access & ~(CW_NA_MEM_READ | CW_NA_MEM_WRITE)))
        return CW_INVALID_ARG;
    for (size_t i = 0; i < n; i++) {
        if ((segs[i].len && !segs[i].base) ||
            segs[i].len > UINT64_MAX - total ||
            (uintptr_t)segs[i].base > UINTPTR_MAX - segs[i].len)
            return CW_INVALID_ARG;
        total += segs[i].len;
    }
    if (access & CW_NA_MEM_READ)
        vacc |= IBV_ACCESS_REMOTE_READ;
    if (access & CW_NA_MEM_WRITE)
        vacc |= IBV_ACCESS_REMOTE_WRITE;
    cw_na_mem_t *m = calloc(1, sizeof(*m) + n * sizeof(m->segs[0]));
    if (!m)
        return CW_NOMEM;
    m->access = access;
    m->n = n;
    m->total = total;
    for (size_t i = 0; i < n; i++) {
        m->segs[i].addr = (uintptr_t)segs[i].base;
        m->segs[i].len = segs[i].len;
        if (!segs[i].len)
            continue;
        m->segs[i].rce =
            rcache_get(cls, (uintptr_t)segs[i].base, segs[i].len, vacc, &st);
        if (!m->segs[i].rce) {
            vb_mem_release(cls, m);
            return st;
        }
        m->segs[i].key = m->segs[i].rce->mr->lkey;
    }
    *mem_p = m;
    return CW_OK;
}

void vb_mem_release(cw_na_class_t *cls, cw_na_mem_t *mem)
{
    if (!mem)
        return;
    for (size_t i = 0; i < mem->n; i++)
        rcache_put(cls, mem->segs[i].rce);
    free(mem);
}

size_t vb_mem_serialize_size(cw_na_class_t *cls, cw_na_mem_t *mem)
{
    return mem ? VB_MEM_FIXED + mem->n * VB_MEM_SEG : 0;
}

static uint32_t seg_rkey(const cw_na_mem_t *m, size_t i)
{
    if (m->remote)
        return m->segs[i].key;
    return m->segs[i].rce ? m->segs[i].rce->mr->rkey : 0;
}

/* Little-endian fixed layout: magic, access, n, 0, then per segment
 * addr (8), len (8), rkey (4), 0 (4). */
cw_status_t vb_mem_serialize(cw_na_class_t *cls, void *buf, size_t size,
                             cw_na_mem_t *mem)
{
    uint8_t *b = buf;
    uint32_t v;
    if (!mem || !buf)
        return CW_INVALID_ARG;
    if (size < vb_mem_serialize_size(cls, mem))
        return CW_OVERFLOW;
    memcpy(b, VB_MEM_MAGIC, 4);
    v = mem->access;
    memcpy(b + 4, &v, 4);
    v = (uint32_t)mem->n;
    memcpy(b + 8, &v, 4);
    memset(b + 12, 0, 4);
    for (size_t i = 0; i < mem->n; i++) {
        uint8_t *s = b + VB_MEM_FIXED + i * VB_MEM_SEG;
        v = seg_rkey(mem, i);
        memcpy(s, &mem->segs[i].addr, 8);
        memcpy(s + 8, &mem->segs[i].len, 8);
        memcpy(s + 16, &v, 4);
        memset(s + 20, 0, 4);
    }
    return CW_OK;
}

cw_status_t vb_mem_deserialize(cw_na_class_t *cls, const void *buf, size_t size,
                               cw_na_mem_t **mem_p)
{
    const uint8_t *b = buf;
    uint32_t access, n;
    uint64_t total = 0;
    if (!buf || !mem_p || size < VB_MEM_FIXED || memcmp(b, VB_MEM_MAGIC, 4))
        return CW_INVALID_ARG;
    memcpy(&access, b + 4, 4);
    memcpy(&n, b + 8, 4);
    if (n == 0 || n > VB_MAX_SEGS ||
        size != VB_MEM_FIXED + (size_t)n * VB_MEM_SEG ||
        (access & ~(CW_NA_MEM_READ | CW_NA_MEM_WRITE)))
        return CW_INVALID_ARG;
    cw_na_mem_t *m = calloc(1, sizeof(*m) + n * sizeof(m->segs[0]));
    if (!m)
        return CW_NOMEM;
    m->remote = true;
    m->access = access;
    m->n = n;
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *s = b + VB_MEM_FIXED + (size_t)i * VB_MEM_SEG;
        memcpy(&m->segs[i].addr, s, 8);
        memcpy(&m->segs[i].len, s + 8, 8);
        memcpy(&m->segs[i].key, s + 16, 4);
        if (m->segs[i].len > UINT64_MAX - total ||
            m->segs[i].addr > UINT64_MAX - m->segs[i].len) {
            free(m);
            return CW_INVALID_ARG;
        }
        total += m->segs[i].len;
    }
    m->total = total;
    *mem_p = m;
    return CW_OK;
}

/* ---- put / get ---- */

static cw_status_t build_pieces(const cw_na_mem_t *l, uint64_t loff,
                                const cw_na_mem_t *r, uint64_t roff,
                                uint64_t len, struct vb_piece **pieces_p,
                                size_t *n_p)
{
    size_t li = 0, ri = 0, cap = l->n + r->n + (size_t)(len / VB_RMA_PIECE) + 1;
    size_t n = 0;
    struct vb_piece *p = calloc(cap, sizeof(*p));
    if (!p)
        return CW_NOMEM;
    while (li < l->n && loff >= l->segs[li].len)
        loff -= l->segs[li++].len;
    while (ri < r->n && roff >= r->segs[ri].len)
        roff -= r->segs[ri++].len;
    while (len > 0 && li < l->n && ri < r->n && n < cap) {
        uint64_t piece = l->segs[li].len - loff;
        if (r->segs[ri].len - roff < piece)
            piece = r->segs[ri].len - roff;
        if (piece > len)
            piece = len;
        if (piece > VB_RMA_PIECE)
            piece = VB_RMA_PIECE;
        p[n].laddr = l->segs[li].addr + loff;
        p[n].lkey = l->segs[li].key;
        p[n].raddr = r->segs[ri].addr + roff;
        p[n].rkey = seg_rkey(r, ri);
        p[n].len = (uint32_t)piece;
        n++;
        len -= piece;
        loff += piece;
        roff += piece;
        if (loff == l->segs[li].len) {
            li++;
            loff = 0;
        }
        if (roff == r->segs[ri].len) {
            ri++;
            roff = 0;
        }
    }
    *pieces_p = p;
    *n_p = n;
    return CW_OK;
}

static cw_status_t rma(vb_class_t *cls, bool put, cw_na_mem_t *local,
                       size_t loff, cw_na_mem_t *remote, size_t roff,
                       size_t len, vb_peer_t *peer, cw_na_cb_t cb, void *arg,
                       cw_na_op_t **op_p)
{
    struct vb_conn *conn = NULL;
    cw_status_t st;
    if (!local || !remote || !peer || !cb || local->remote)
        return CW_INVALID_ARG;
    if (loff > local->total || len > local->total - loff ||
        roff > remote->total || len > remote->total - roff)
        return CW_RANGE;
    if (!(remote->access & (put ? CW_NA_MEM_WRITE : CW_NA_MEM_READ)))
        return CW_PERMISSION;
    if (len > 0 && (st = vb_conn_for_send(cls, peer, &conn)) != CW_OK)
        return st;
    struct cw_na_op *op =
        vb_op_new(cls, put ? CW_NA_OP_PUT : CW_NA_OP_GET, cb, arg);
    if (!op)
        return CW_NOMEM;
    op->peer = peer;
    nau_ptable_ref(&peer->pnode);
    if (len == 0) {
        vb_op_done(cls, op, CW_OK);
    } else {
        st = build_pieces(local, loff, remote, roff, len, &op->pieces,
                          &op->npieces);
        if (st != CW_OK) {
            vb_op_free(cls, op);
            return st;
        }
        op->conn = conn;
        vb_list_push(&conn->pending, op);
    }
    if (op_p)
        *op_p = op;
    if (conn)
        vb_conn_kick(conn);
    return CW_OK;
}

cw_status_t vb_post_rma_op(struct vb_conn *conn, struct cw_na_op *op,
                           bool *blocked_p)
{
    vb_class_t *cls = conn->cls;
    while (op->next_piece < op->npieces) {
        if (vb_sq_full(conn)) {
            *blocked_p = true;
            return CW_OK;
        }
        const struct vb_piece *p = &op->pieces[op->next_piece];
        struct ibv_sge sge = {
            .addr = p->laddr, .length = p->len, .lkey = p->lkey};
        struct ibv_send_wr wr =
                               {
                                   .wr_id = (uintptr_t)op | VB_WR_OP_PIECE,
                                   .sg_list = &sge,
                                   .num_sge = 1,
                                   .opcode = op->type == CW_NA_OP_PUT
                                                 ? IBV_WR_RDMA_WRITE
                                                 : IBV_WR_RDMA_READ,
                                   .send_flags = IBV_SEND_SIGNALED,
                               },
                           *bad;
        wr.wr.rdma.remote_addr = p->raddr;
        wr.wr.rdma.rkey = p->rkey;
        int rc = cls->ops->post_send(conn->id->qp, &wr, &bad);
        if (rc) {
            char eb[64];
            cw_status_t st = vb_status(VB_E_RC, rc);
            VB_ERR(cls, "ibv_post_send(RDMA %s) failed: %s",
                   op->type == CW_NA_OP_PUT ? "WRITE" : "READ",
                   vb_strerr(VB_E_RC, rc, eb, sizeof(eb)));
            if (op->next_piece == 0)
                vb_op_done(cls, op, st);
            else
                op->status = st; /* completes when its pieces come back */
            vb_conn_fail(conn, CW_DISCONNECTED);
            return st;
        }
        vb_sq_posted(conn, true);
        if (op->next_piece++ == 0) {
            op->posted = true;
            vb_list_remove(op);
            vb_list_push(&conn->posted, op);
        }
        conn->partial = op->next_piece < op->npieces ? op : NULL;
    }
    return CW_OK;
}

/* A WR of an RMA op came back (every piece is signalled, so each produces
 * exactly one completion, success or flush). */
void vb_rma_piece_done(struct vb_conn *conn, struct cw_na_op *op,
                       cw_status_t st)
{
    if (st != CW_OK && op->status == CW_OK)
        op->status = st;
    op->pieces_done++;
    if (op->pieces_done == op->npieces ||
        (conn->state == VC_CLOSING && conn->partial != op &&
         op->pieces_done == op->next_piece))
        vb_op_done(conn->cls, op, op->status);
}

cw_status_t vb_put(cw_na_class_t *cls, cw_na_mem_t *local, size_t local_off,
                   cw_na_mem_t *remote, size_t remote_off, size_t len,
                   cw_na_addr_t *peer, cw_na_cb_t cb, void *arg,
                   cw_na_op_t **op_p)
{
    return rma(cls, true, local, local_off, remote, remote_off, len, peer, cb,
               arg, op_p);
}

cw_status_t vb_get(cw_na_class_t *cls, cw_na_mem_t *local, size_t local_off,
                   cw_na_mem_t *remote, size_t remote_off, size_t len,
                   cw_na_addr_t *peer, cw_na_cb_t cb, void *arg,
                   cw_na_op_t **op_p)
{
    return rma(cls, false, local, local_off, remote, remote_off, len, peer, cb,
               arg, op_p);
}
