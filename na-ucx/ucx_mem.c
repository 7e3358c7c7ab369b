/*
 * na-ucx: memory handles, and put/get with UCX RMA and packed remote keys
 * ("rma=rkey").  A remote key is valid only on the endpoint that unpacked
 * it, so each remote handle keeps one set of unpacked keys per endpoint,
 * created on first use and destroyed when either the handle is released or
 * the endpoint closes.
 *
 * Wire form of a handle: magic(4) version(1) access(1) pad(2) id(8) key(8)
 * total(8); version 2 appends nsegs(4) and per segment addr(8) len(8)
 * keylen(4) key.  Version 1 handles (the default "am" mode) are served by
 * the owner through active messages (ucx_rma.c).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "ucx.h"

#define UCX_MEM_WIRE_SIZE 32u
#define UCX_MEM_WIRE_V1   1u
#define UCX_MEM_WIRE_V2   2u
#define UCX_RKEY_MAX      4096u

/* Unpacked keys of one remote handle on one endpoint. */
struct ucx_rkey_set {
    struct nau_list mlink; /* mem->rkey_sets */
    struct nau_list clink; /* conn->rkeys */
    size_t n;
    ucp_rkey_h rk[];
};

static void ucx_rkey_set_free(struct ucx_rkey_set *set)
{
    nau_list_del(&set->mlink);
    nau_list_del(&set->clink);
    for (size_t i = 0; i < set->n; i++)
        if (set->rk[i])
            ucp_rkey_destroy(set->rk[i]);
    free(set);
}

void ucx_rkey_conn_closed(struct ucx_conn *conn)
{
    while (!nau_list_empty(&conn->rkeys))
        ucx_rkey_set_free(
            nau_container_of(conn->rkeys.next, struct ucx_rkey_set, clink));
}

static void ucx_rsegs_free(struct ucx_cls *cls, struct cw_na_mem *mem)
{
    while (mem->rkey_sets.next && !nau_list_empty(&mem->rkey_sets))
        ucx_rkey_set_free(
            nau_container_of(mem->rkey_sets.next, struct ucx_rkey_set, mlink));
    for (size_t i = 0; mem->rsegs && i < mem->nrsegs; i++) {
        if (mem->rsegs[i].memh)
            ucp_mem_unmap(cls->context, mem->rsegs[i].memh);
        free(mem->rsegs[i].blob);
    }
    free(mem->rsegs);
    mem->rsegs = NULL;
}

static void ucx_mem_free(struct ucx_cls *cls, struct cw_na_mem *mem)
{
    ucx_rsegs_free(cls, mem);
    free(mem->segs);
    free(mem);
}

/* Map every segment and pack its key. */
static cw_status_t ucx_rkey_register(struct ucx_cls *cls, struct cw_na_mem *mem)
{
    mem->rsegs = calloc(mem->nsegs, sizeof(*mem->rsegs));
    if (mem->rsegs == NULL)
        return CW_NOMEM;
    mem->nrsegs = mem->nsegs;
    for (size_t i = 0; i < mem->nsegs; i++) {
        struct ucx_rseg *r = &mem->rsegs[i];
        ucp_mem_map_params_t mp = {0};
        void *packed;
        size_t size;
        ucs_status_t st;

        r->addr = (uint64_t)(uintptr_t)mem->segs[i].base;
        r->len = mem->segs[i].len;
        if (r->len == 0)
            continue;
        mp.field_mask =
            UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
        mp.address = mem->segs[i].base;
        mp.length = r->len;
        st = ucp_mem_map(cls->context, &mp, &r->memh);
        if (st != UCS_OK) {
            UCX_ERR(cls, "ucp_mem_map(%zu bytes) failed: %s", (size_t)r->len,
                    ucs_status_string(st));
            return ucx_status(st);
        }
        st = ucp_rkey_pack(cls->context, r->memh, &packed, &size);
        if (st != UCS_OK) {
            UCX_ERR(cls, "ucp_rkey_pack() failed: %s", ucs_status_string(st));
            return ucx_status(st);
        }
        if (size > UCX_RKEY_MAX ||
            (r->blob = malloc(size ? size : 1)) == NULL) {
            ucp_rkey_buffer_release(packed);
            UCX_ERR(cls, "packed remote key of %zu bytes not kept", size);
            return CW_NOMEM;
        }
        memcpy(r->blob, packed, size);
        r->bloblen = (uint32_t)size;
        ucp_rkey_buffer_release(packed);
    }
    return CW_OK;
}

cw_status_t ucx_mem_register(cw_na_class_t *c, const struct cw_na_segment *segs,
                             size_t n, uint32_t access, cw_na_mem_t **mem_p)
{
    struct ucx_cls *cls = ucx_cls(c);
    struct cw_na_mem *mem;
    uint64_t total = 0;
    cw_status_t ret;

    if (segs == NULL || n == 0 || mem_p == NULL ||
        (access & ~(CW_NA_MEM_READ | CW_NA_MEM_WRITE)) != 0)
        return CW_INVALID_ARG;
    if (n > UCX_MAX_SEGS)
        return CW_OVERFLOW;
    for (size_t i = 0; i < n; i++) {
        if (segs[i].base == NULL && segs[i].len > 0)
            return CW_INVALID_ARG;
        if (segs[i].len > UINT64_MAX - total)
            return CW_RANGE;
        total += segs[i].len;
    }
    mem = calloc(1, sizeof(*mem));
    if (mem == NULL)
        return CW_NOMEM;
    nau_list_init(&mem->rkey_sets);
    mem->segs = calloc(n, sizeof(*segs));
    if (mem->segs == NULL) {
        ret = CW_NOMEM;
        goto err_free;
    }
    memcpy(mem->segs, segs, n * sizeof(*segs));
    mem->nsegs = n;
    mem->local = true;
    mem->access = access;
    mem->total = total;
    if (cls->rma_rkey) {
        ret = ucx_rkey_register(cls, mem);
        if (ret != CW_OK)
            goto err_free;
    }
    mem->id = cls->next_mem_id++;
    if (getrandom(&mem->key, sizeof(mem->key), GRND_NONBLOCK) !=
        (ssize_t)sizeof(mem->key))
        mem->key = cls->host->now_ns() ^ ((uint64_t)(uintptr_t)mem << 16);
    nau_ptable_insert_u64(&cls->mems, &mem->mnode, mem->id);
    *mem_p = mem;
    return CW_OK;

err_free:
    ucx_mem_free(cls, mem);
    return ret;
}

void ucx_mem_release(cw_na_class_t *c, cw_na_mem_t *mem)
{
    if (mem == NULL)
        return;
    if (mem->local) {
        nau_ptable_remove(&ucx_cls(c)->mems, &mem->mnode);
        ucx_rma_mem_released(ucx_cls(c), mem);
    }
    ucx_mem_free(ucx_cls(c), mem);
}

void ucx_mems_release_all(struct ucx_cls *cls)
{
    struct nau_ptable_node *n;

    while ((n = nau_ptable_iter(&cls->mems, NULL)) != NULL) {
        nau_ptable_remove(&cls->mems, n);
        ucx_mem_free(cls, nau_container_of(n, struct cw_na_mem, mnode));
    }
}

size_t ucx_mem_serialize_size(cw_na_class_t *c, cw_na_mem_t *mem)
{
    size_t n = UCX_MEM_WIRE_SIZE;

    if (mem == NULL || mem->rsegs == NULL)
        return n;
    n += 4;
    for (size_t i = 0; i < mem->nrsegs; i++)
        n += 20 + mem->rsegs[i].bloblen;
    return n;
}

cw_status_t ucx_mem_serialize(cw_na_class_t *c, void *buf, size_t size,
                              cw_na_mem_t *mem)
{
    uint8_t *p = buf;
    uint32_t magic = UCX_WIRE_MAGIC, nseg;

    if (buf == NULL || mem == NULL)
        return CW_INVALID_ARG;
    if (size < ucx_mem_serialize_size(c, mem))
        return CW_OVERFLOW;
    memset(p, 0, UCX_MEM_WIRE_SIZE);
    memcpy(p, &magic, 4);
    p[4] = mem->rsegs ? UCX_MEM_WIRE_V2 : UCX_MEM_WIRE_V1;
    p[5] = (uint8_t)mem->access;
    memcpy(p + 8, &mem->id, 8);
    memcpy(p + 16, &mem->key, 8);
    memcpy(p + 24, &mem->total, 8);
    if (mem->rsegs == NULL)
        return CW_OK;
    p += UCX_MEM_WIRE_SIZE;
    nseg = (uint32_t)mem->nrsegs;
    memcpy(p, &nseg, 4);
    p += 4;
    for (size_t i = 0; i < mem->nrsegs; i++) {
        const struct ucx_rseg *r = &mem->rsegs[i];
        memcpy(p, &r->addr, 8);
        memcpy(p + 8, &r->len, 8);
        memcpy(p + 16, &r->bloblen, 4);
        memcpy(p + 20, r->blob, r->bloblen);
        p += 20 + r->bloblen;
    }
    return CW_OK;
}

/* Version 2 segment list; every length is checked against @p size. */
static cw_status_t ucx_rsegs_read(struct cw_na_mem *mem, const uint8_t *p,
                                  size_t size)
{
    uint64_t sum = 0;
    uint32_t nseg;

    if (size < 4)
        return CW_INVALID_ARG;
    memcpy(&nseg, p, 4);
    p += 4;
    size -= 4;
    if (nseg == 0 || nseg > UCX_MAX_SEGS)
        return CW_INVALID_ARG;
    mem->rsegs = calloc(nseg, sizeof(*mem->rsegs));
    if (mem->rsegs == NULL)
        return CW_NOMEM;
    mem->nrsegs = nseg;
    for (uint32_t i = 0; i < nseg; i++) {
        struct ucx_rseg *r = &mem->rsegs[i];
        if (size < 20)
            return CW_INVALID_ARG;
        memcpy(&r->addr, p, 8);
        memcpy(&r->len, p + 8, 8);
        memcpy(&r->bloblen, p + 16, 4);
        p += 20;
        size -= 20;
        if (r->bloblen > UCX_RKEY_MAX || r->bloblen > size ||
            r->len > UINT64_MAX - sum || (r->len > 0) != (r->bloblen > 0))
            return CW_INVALID_ARG;
        sum += r->len;
        if (r->bloblen) {
            r->blob = malloc(r->bloblen);
            if (r->blob == NULL)
                return CW_NOMEM;
            memcpy(r->blob, p, r->bloblen);
        }
        p += r->bloblen;
        size -= r->bloblen;
    }
    return size == 0 && sum == mem->total ? CW_OK : CW_INVALID_ARG;
}

cw_status_t ucx_mem_deserialize(cw_na_class_t *c, const void *buf, size_t size,
                                cw_na_mem_t **mem_p)
{
    const uint8_t *p = buf;
    struct cw_na_mem *mem;
    uint32_t magic;
    cw_status_t ret;

    if (buf == NULL || mem_p == NULL || size < UCX_MEM_WIRE_SIZE)
        return CW_INVALID_ARG;
    memcpy(&magic, p, 4);
    if (magic != UCX_WIRE_MAGIC ||
        (p[4] != UCX_MEM_WIRE_V1 && p[4] != UCX_MEM_WIRE_V2) ||
        (p[4] == UCX_MEM_WIRE_V1 && size != UCX_MEM_WIRE_SIZE) ||
        (p[5] & ~(CW_NA_MEM_READ | CW_NA_MEM_WRITE)) != 0 || p[6] || p[7])
        return CW_INVALID_ARG;
    mem = calloc(1, sizeof(*mem));
    if (mem == NULL)
        return CW_NOMEM;
    nau_list_init(&mem->rkey_sets);
    mem->access = p[5];
    memcpy(&mem->id, p + 8, 8);
    memcpy(&mem->key, p + 16, 8);
    memcpy(&mem->total, p + 24, 8);
    ret = mem->id == 0 ? CW_INVALID_ARG : CW_OK;
    if (ret == CW_OK && p[4] == UCX_MEM_WIRE_V2)
        ret = ucx_rsegs_read(mem, p + UCX_MEM_WIRE_SIZE,
                             size - UCX_MEM_WIRE_SIZE);
    if (ret != CW_OK) {
        ucx_mem_free(ucx_cls(c), mem);
        return ret;
    }
    *mem_p = mem;
    return CW_OK;
}

/* ---- put/get with remote keys ---- */

static struct ucx_rkey_set *ucx_rkey_set_get(struct ucx_cls *cls,
                                             struct cw_na_mem *mem,
                                             struct ucx_conn *conn)
{
    struct ucx_rkey_set *set;

    for (struct nau_list *l = conn->rkeys.next; l != &conn->rkeys;
         l = l->next) {
        set = nau_container_of(l, struct ucx_rkey_set, clink);
        for (struct nau_list *m = mem->rkey_sets.next; m != &mem->rkey_sets;
             m = m->next)
            if (m == &set->mlink)
                return set;
    }
    set = calloc(1, sizeof(*set) + mem->nrsegs * sizeof(set->rk[0]));
    if (set == NULL)
        return NULL;
    set->n = mem->nrsegs;
    for (size_t i = 0; i < mem->nrsegs; i++) {
        ucs_status_t st;
        if (mem->rsegs[i].bloblen == 0)
            continue;
        st = ucp_ep_rkey_unpack(conn->ep, mem->rsegs[i].blob, &set->rk[i]);
        if (st != UCS_OK) {
            UCX_ERR(cls, "ucp_ep_rkey_unpack(%s) failed: %s",
                    conn->peer ? conn->peer->str : "?", ucs_status_string(st));
            ucx_rkey_set_free(set);
            return NULL;
        }
    }
    nau_list_add_tail(&mem->rkey_sets, &set->mlink);
    nau_list_add_tail(&conn->rkeys, &set->clink);
    return set;
}

static void ucx_rkey_check_done(struct cw_na_op *op)
{
    if (op->flushed && op->nrma == 0)
        ucx_op_finish(op, op->rma_err);
    ucx_op_settle(op);
}

static void ucx_rkey_piece_cb(void *req, ucs_status_t st, void *user_data)
{
    struct cw_na_op *op = user_data;

    if (!op->released)
        ucp_request_free(req);
    op->nrma--;
    if (st != UCS_OK && op->rma_err == CW_OK)
        op->rma_err = ucx_req_status(op, st);
    ucx_rkey_check_done(op);
}

static void ucx_rkey_flush_cb(void *req, ucs_status_t st, void *user_data)
{
    struct cw_na_op *op = user_data;

    if (!op->released)
        ucp_request_free(req);
    ucx_op_req_forget(op, req);
    op->flushed = true;
    if (st != UCS_OK && op->rma_err == CW_OK)
        op->rma_err = ucx_req_status(op, st);
    ucx_rkey_check_done(op);
}

/* Post the pieces (contiguous on both sides), then an endpoint flush whose
 * completion means every piece is done at the remote end. */
cw_status_t ucx_rkey_post(struct ucx_cls *cls, struct cw_na_op *op,
                          struct ucx_conn *conn, cw_na_mem_t *local,
                          size_t local_off, cw_na_mem_t *remote,
                          size_t remote_off, size_t len)
{
    struct ucx_rkey_set *set = ucx_rkey_set_get(cls, remote, conn);
    size_t li = 0, ri = 0;
    ucp_request_param_t p = {0};
    ucs_status_ptr_t req;

    if (set == NULL)
        return CW_INTERNAL;
    while (li < local->nsegs && local_off >= local->segs[li].len)
        local_off -= local->segs[li++].len;
    while (ri < remote->nrsegs && remote_off >= remote->rsegs[ri].len)
        remote_off -= remote->rsegs[ri++].len;
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = ucx_rkey_piece_cb;
    p.user_data = op;
    while (len > 0) {
        size_t n = len;
        char *lptr;
        uint64_t raddr;

        if (li >= local->nsegs || ri >= remote->nrsegs)
            return CW_RANGE; /* bounds were checked: totals disagree */
        n = n < local->segs[li].len - local_off
                ? n
                : local->segs[li].len - local_off;
        if (n > remote->rsegs[ri].len - remote_off)
            n = remote->rsegs[ri].len - remote_off;
        lptr = (char *)local->segs[li].base + local_off;
        raddr = remote->rsegs[ri].addr + remote_off;
        if (op->type == CW_NA_OP_PUT)
            req = ucp_put_nbx(conn->ep, lptr, n, raddr, set->rk[ri], &p);
        else
            req = ucp_get_nbx(conn->ep, lptr, n, raddr, set->rk[ri], &p);
        if (UCS_PTR_IS_ERR(req)) {
            UCX_WARN(cls, "ucp_%s_nbx(%s) failed: %s",
                     op->type == CW_NA_OP_PUT ? "put" : "get",
                     conn->peer ? conn->peer->str : "?",
                     ucs_status_string(UCS_PTR_STATUS(req)));
            op->rma_err = ucx_status(UCS_PTR_STATUS(req));
            break;
        }
        if (req != NULL)
            op->nrma++;
        len -= n;
        local_off += n;
        remote_off += n;
        if (local_off == local->segs[li].len) {
            li++;
            local_off = 0;
        }
        if (remote_off == remote->rsegs[ri].len) {
            ri++;
            remote_off = 0;
        }
    }
    p.cb.send = ucx_rkey_flush_cb;
    req = ucp_ep_flush_nbx(conn->ep, &p);
    if (UCS_PTR_IS_PTR(req)) {
        ucx_op_req_posted(op, &op->req, req);
    } else {
        op->flushed = true;
        if (UCS_PTR_IS_ERR(req) && op->rma_err == CW_OK)
            op->rma_err = ucx_status(UCS_PTR_STATUS(req));
        ucx_rkey_check_done(op);
    }
    return CW_OK;
}
