/*
 * na-ucx: memory handles and put/get.
 *
 * UCX 1.13's tcp transport emulates put/get slowly, so put and get are
 * active-message requests served by the memory owner: a put carries its
 * data (rendezvous for large sizes) which the owner receives straight into
 * the registered segments and acknowledges; a get asks the owner, who
 * answers with the data, received straight into the local segments.  The
 * initiator checks bounds and access on the handle it holds, and the owner
 * checks them again against its own registration (id + random key).
 */
#include <stdlib.h>
#include <string.h>

#include "ucx.h"

/* An RMA control message (ack, get answer) or an owner-side data receive. */
struct ucx_ctl {
    struct nau_list link; /* cls->ctls */
    struct ucx_cls *cls;
    ucp_ep_h ep;
    struct ucx_rma_ack ack;
    ucp_dt_iov_t *iov;
    size_t iovcnt;
    ucp_dt_iov_t iov_inline[UCX_IOV_INLINE];
    struct cw_na_mem *mem; /* our handle req moves data of, or NULL */
    void *req;
    bool released;    /* req handed back to UCX at finalize */
    bool posting;     /* inside the UCX call that posts req */
    bool done_inline; /* req completed inside that call */
    ucs_status_t inline_st;
};

/* ---- segment helpers ---- */

struct ucx_iov_ctx {
    ucp_dt_iov_t *iov;
    size_t n;
};

static cw_status_t ucx_iov_count_fn(void *base, size_t piece, size_t si,
                                    size_t so, void *ctx)
{
    ((struct ucx_iov_ctx *)ctx)->n++;
    return CW_OK;
}

static cw_status_t ucx_iov_fill_fn(void *base, size_t piece, size_t si,
                                   size_t so, void *ctx)
{
    struct ucx_iov_ctx *c = ctx;

    c->iov[c->n].buffer = base;
    c->iov[c->n].length = piece;
    c->n++;
    return CW_OK;
}

/* The pieces of [off, off+len) of @p mem, in @p inl when they fit. */
static cw_status_t ucx_build_iov(const struct cw_na_mem *mem, size_t off,
                                 size_t len, ucp_dt_iov_t *inl,
                                 ucp_dt_iov_t **iov_p, size_t *cnt_p)
{
    struct ucx_iov_ctx c = {NULL, 0};
    cw_status_t ret;

    ret = cw_na_seg_walk(mem->segs, mem->nsegs, off, len, ucx_iov_count_fn, &c);
    if (ret != CW_OK)
        return ret;
    c.iov = c.n <= UCX_IOV_INLINE ? inl : calloc(c.n, sizeof(*c.iov));
    if (c.iov == NULL)
        return CW_NOMEM;
    *cnt_p = c.n;
    c.n = 0;
    cw_na_seg_walk(mem->segs, mem->nsegs, off, len, ucx_iov_fill_fn, &c);
    *iov_p = c.iov;
    return CW_OK;
}

static void ucx_iov_copy_in(const ucp_dt_iov_t *iov, size_t cnt,
                            const void *data)
{
    const char *p = data;

    for (size_t i = 0; i < cnt; i++) {
        memcpy(iov[i].buffer, p, iov[i].length);
        p += iov[i].length;
    }
}

/* Datatype of an iov list: contiguous when it has a single piece. */
static void ucx_iov_param(ucp_request_param_t *p, const ucp_dt_iov_t *iov,
                          size_t cnt, void **buf_p, size_t *count_p)
{
    if (cnt == 1) {
        *buf_p = iov[0].buffer;
        *count_p = iov[0].length;
        return;
    }
    p->op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
    p->datatype = ucp_dt_make_iov();
    *buf_p = (void *)iov;
    *count_p = cnt;
}

/* ---- control messages ---- */

static struct ucx_ctl *ucx_ctl_new(struct ucx_cls *cls, ucp_ep_h ep,
                                   uint64_t op_id, cw_status_t st)
{
    struct ucx_ctl *ctl = calloc(1, sizeof(*ctl));

    if (ctl == NULL)
        return NULL;
    ctl->cls = cls;
    ctl->ep = ep;
    ctl->ack.magic = UCX_WIRE_MAGIC;
    ctl->ack.status = (uint32_t)st;
    ctl->ack.op_id = op_id;
    nau_list_add_tail(&cls->ctls, &ctl->link);
    return ctl;
}

static void ucx_ctl_free(struct ucx_ctl *ctl)
{
    nau_list_del(&ctl->link);
    if (ctl->iov != ctl->iov_inline)
        free(ctl->iov);
    free(ctl);
}

static void ucx_ctl_sent_cb(void *req, ucs_status_t st, void *user_data)
{
    struct ucx_ctl *ctl = user_data;

    if (!ctl->released)
        ucp_request_free(req);
    if (ctl->posting) { /* see ucx_op_req_posted() */
        ctl->done_inline = true;
        return;
    }
    ucx_ctl_free(ctl);
}

/* Send an ack or a get answer (with the ctl's iov as data, if any). */
static void ucx_ctl_send(struct ucx_cls *cls, struct ucx_ctl *ctl,
                         unsigned am_id)
{
    ucp_request_param_t p = {0};
    ucs_status_ptr_t req;
    void *buf = NULL;
    size_t count = 0;

    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                     UCP_OP_ATTR_FIELD_FLAGS;
    p.cb.send = ucx_ctl_sent_cb;
    p.user_data = ctl;
    p.flags = UCP_AM_SEND_FLAG_REPLY;
    if (ctl->iovcnt > 0)
        ucx_iov_param(&p, ctl->iov, ctl->iovcnt, &buf, &count);
    ctl->posting = true;
    req = ucp_am_send_nbx(ctl->ep, am_id, &ctl->ack, sizeof(ctl->ack), buf,
                          count, &p);
    ctl->posting = false;
    if (ctl->done_inline) {
        ucx_ctl_free(ctl);
        return;
    }
    if (UCS_PTR_IS_PTR(req)) {
        ctl->req = req;
        return;
    }
    if (UCS_PTR_IS_ERR(req))
        UCX_WARN_RL(cls, "ucp_am_send_nbx(rma answer) failed: %s",
                    ucs_status_string(UCS_PTR_STATUS(req)));
    ucx_ctl_free(ctl);
}

/* ---- owner side ---- */

static struct cw_na_mem *ucx_mem_find(struct ucx_cls *cls, uint64_t id)
{
    struct nau_ptable_node *n = nau_ptable_find_u64(&cls->mems, id);

    return n ? nau_container_of(n, struct cw_na_mem, mnode) : NULL;
}

/* Validate a request against our registration. */
static cw_status_t ucx_rma_check(struct ucx_cls *cls,
                                 const struct ucx_rma_hdr *h, uint32_t need,
                                 struct cw_na_mem **mem_p)
{
    struct cw_na_mem *mem = ucx_mem_find(cls, h->mem_id);

    if (mem == NULL || mem->key != h->key)
        return CW_BAD_HANDLE;
    if (!(mem->access & need))
        return CW_PERMISSION;
    if (h->off > mem->total || h->len > mem->total - h->off)
        return CW_RANGE;
    *mem_p = mem;
    return CW_OK;
}

static bool ucx_rma_hdr_ok(const void *header, size_t hlen,
                           const ucp_am_recv_param_t *param,
                           struct ucx_rma_hdr *h)
{
    if (hlen != sizeof(*h) ||
        !(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP))
        return false;
    memcpy(h, header, sizeof(*h));
    return h->magic == UCX_WIRE_MAGIC;
}

/* The data of a put landed (or failed): acknowledge it. */
static void ucx_put_data_done(struct ucx_ctl *ctl, ucs_status_t st)
{
    struct ucx_cls *cls = ctl->cls;
    struct ucx_conn *conn = ucx_conn_by_ep(cls, ctl->ep);

    ctl->mem = NULL;
    if (ctl->released || conn == NULL || conn->failed) {
        ucx_ctl_free(ctl);
        return;
    }
    if (ctl->iov != ctl->iov_inline)
        free(ctl->iov);
    ctl->iov = NULL;
    ctl->iovcnt = 0;
    ctl->ack.status = (uint32_t)ucx_status(st);
    ucx_ctl_send(cls, ctl, UCX_AM_PUT_ACK);
}

static void ucx_put_data_cb(void *req, ucs_status_t st, size_t length,
                            void *user_data)
{
    struct ucx_ctl *ctl = user_data;

    if (!ctl->released)
        ucp_request_free(req);
    ctl->req = NULL;
    if (ctl->posting) { /* see ucx_op_req_posted() */
        ctl->done_inline = true;
        ctl->inline_st = st;
        return;
    }
    ucx_put_data_done(ctl, st);
}

static ucs_status_t ucx_am_put_cb(void *arg, const void *header, size_t hlen,
                                  void *data, size_t length,
                                  const ucp_am_recv_param_t *param)
{
    struct ucx_cls *cls = arg;
    ucp_request_param_t p = {0};
    struct cw_na_mem *mem = NULL;
    struct ucx_rma_hdr h;
    struct ucx_ctl *ctl;
    ucs_status_ptr_t req;
    cw_status_t st;
    void *buf;
    size_t count;

    if (cls->finalizing)
        return UCS_OK;
    if (!ucx_rma_hdr_ok(header, hlen, param, &h)) {
        ucx_log_dropped(cls, "malformed put request");
        return UCS_OK;
    }
    st = ucx_rma_check(cls, &h, CW_NA_MEM_WRITE, &mem);
    if (st == CW_OK && length != h.len)
        st = CW_PROTOCOL;
    ctl = ucx_ctl_new(cls, param->reply_ep, h.op_id, st);
    if (ctl == NULL) {
        UCX_ERR(cls, "out of memory serving a put");
        return UCS_OK;
    }
    if (st == CW_OK && h.len > 0)
        st = ucx_build_iov(mem, h.off, h.len, ctl->iov_inline, &ctl->iov,
                           &ctl->iovcnt);
    if (st != CW_OK || h.len == 0) {
        ctl->ack.status = (uint32_t)st;
        ucx_ctl_send(cls, ctl, UCX_AM_PUT_ACK);
        return UCS_OK; /* rendezvous data, if any, is dropped */
    }
    if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
        ucx_iov_copy_in(ctl->iov, ctl->iovcnt, data);
        if (ctl->iov != ctl->iov_inline)
            free(ctl->iov);
        ctl->iov = NULL;
        ctl->iovcnt = 0;
        ucx_ctl_send(cls, ctl, UCX_AM_PUT_ACK);
        return UCS_OK;
    }
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.recv_am = ucx_put_data_cb;
    p.user_data = ctl;
    ucx_iov_param(&p, ctl->iov, ctl->iovcnt, &buf, &count);
    ctl->posting = true;
    req = ucp_am_recv_data_nbx(cls->worker, data, buf, count, &p);
    ctl->posting = false;
    if (ctl->done_inline) {
        ctl->done_inline = false;
        ucx_put_data_done(ctl, ctl->inline_st);
        return UCS_OK;
    }
    if (UCS_PTR_IS_PTR(req)) {
        ctl->req = req;
        ctl->mem = mem;
        return UCS_OK;
    }
    ctl->ack.status =
        (uint32_t)(req == NULL ? CW_OK : ucx_status(UCS_PTR_STATUS(req)));
    if (ctl->iov != ctl->iov_inline)
        free(ctl->iov);
    ctl->iov = NULL;
    ctl->iovcnt = 0;
    ucx_ctl_send(cls, ctl, UCX_AM_PUT_ACK);
    return UCS_OK;
}

static ucs_status_t ucx_am_get_cb(void *arg, const void *header, size_t hlen,
                                  void *data, size_t length,
                                  const ucp_am_recv_param_t *param)
{
    struct ucx_cls *cls = arg;
    struct cw_na_mem *mem = NULL;
    struct ucx_rma_hdr h;
    struct ucx_ctl *ctl;
    cw_status_t st;

    if (cls->finalizing)
        return UCS_OK;
    if (!ucx_rma_hdr_ok(header, hlen, param, &h) || length != 0) {
        ucx_log_dropped(cls, "malformed get request");
        return UCS_OK;
    }
    st = ucx_rma_check(cls, &h, CW_NA_MEM_READ, &mem);
    ctl = ucx_ctl_new(cls, param->reply_ep, h.op_id, st);
    if (ctl == NULL) {
        UCX_ERR(cls, "out of memory serving a get");
        return UCS_OK;
    }
    if (st == CW_OK && h.len > 0) {
        st = ucx_build_iov(mem, h.off, h.len, ctl->iov_inline, &ctl->iov,
                           &ctl->iovcnt);
        ctl->ack.status = (uint32_t)st;
        if (st == CW_OK)
            ctl->mem = mem;
    }
    ucx_ctl_send(cls, ctl, UCX_AM_GET_RESP);
    return UCS_OK;
}

/* ---- initiator side ---- */

/* The operation an answer is for, or NULL (late answer to a cancelled
 * operation, or forged). */
static struct cw_na_op *ucx_rma_answer(struct ucx_cls *cls, const void *header,
                                       size_t hlen,
                                       const ucp_am_recv_param_t *param,
                                       enum cw_na_op_type type,
                                       cw_status_t *st_p)
{
    struct ucx_rma_ack a;
    struct nau_ptable_node *n;
    struct cw_na_op *op;

    if (cls->finalizing)
        return NULL; /* the op is dropped with the instance */
    if (hlen != sizeof(a))
        goto drop;
    memcpy(&a, header, sizeof(a));
    if (a.magic != UCX_WIRE_MAGIC || a.op_id == 0)
        goto drop;
    n = nau_ptable_find_u64(&cls->rma_ops, a.op_id);
    if (n == NULL)
        return NULL;
    op = nau_container_of(n, struct cw_na_op, rnode);
    /* Our answers always carry their endpoint: one without it could come
     * from any peer that guessed the (sequential) operation id. */
    if (op->type != type ||
        !(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) ||
        op->conn == NULL || op->conn->ep != param->reply_ep)
        goto drop;
    *st_p = a.status < CW_STATUS_MAX ? (cw_status_t)a.status : CW_PROTOCOL;
    if (op->conn && cls->live_timeout_ns) {
        op->conn->heard_ns = cls->host->now_ns();
        op->conn->probing = false;
    }
    return op;
drop:
    ucx_log_dropped(cls, "malformed RMA answer");
    return NULL;
}

static ucs_status_t ucx_am_put_ack_cb(void *arg, const void *header,
                                      size_t hlen, void *data, size_t length,
                                      const ucp_am_recv_param_t *param)
{
    struct ucx_cls *cls = arg;
    cw_status_t st = CW_OK;
    struct cw_na_op *op;

    op = ucx_rma_answer(cls, header, hlen, param, CW_NA_OP_PUT, &st);
    if (op)
        ucx_op_finish(op, st);
    return UCS_OK;
}

static void ucx_get_data_cb(void *req, ucs_status_t st, size_t length,
                            void *user_data)
{
    ucx_op_req_done(user_data, req, st, true);
}

static ucs_status_t ucx_am_get_resp_cb(void *arg, const void *header,
                                       size_t hlen, void *data, size_t length,
                                       const ucp_am_recv_param_t *param)
{
    struct ucx_cls *cls = arg;
    ucp_request_param_t p = {0};
    cw_status_t st = CW_OK;
    ucs_status_ptr_t req;
    struct cw_na_op *op;
    void *buf;
    size_t count;

    op = ucx_rma_answer(cls, header, hlen, param, CW_NA_OP_GET, &st);
    if (op == NULL)
        return UCS_OK;
    if (st == CW_OK && length != op->buf_len) {
        ucx_log_dropped(cls, "malformed get answer (wrong length)");
        st = CW_PROTOCOL;
    }
    if (st != CW_OK || length == 0) {
        ucx_op_finish(op, st);
        return UCS_OK;
    }
    if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
        ucx_iov_copy_in(op->iov, op->iovcnt, data);
        ucx_op_finish(op, CW_OK);
        return UCS_OK;
    }
    /* Data is on its way: the op now waits on the data receive only. */
    nau_list_del(&op->link);
    nau_ptable_remove(&cls->rma_ops, &op->rnode);
    op->conn = NULL;
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.recv_am = ucx_get_data_cb;
    p.user_data = op;
    ucx_iov_param(&p, op->iov, op->iovcnt, &buf, &count);
    req = ucp_am_recv_data_nbx(cls->worker, data, buf, count, &p);
    if (req == NULL)
        ucx_op_finish(op, CW_OK);
    else if (UCS_PTR_IS_ERR(req))
        ucx_op_finish(op, ucx_status(UCS_PTR_STATUS(req)));
    else
        ucx_op_req_posted(op, &op->data_req, req);
    return UCS_OK;
}

cw_status_t ucx_rma_register_am(struct ucx_cls *cls)
{
    static const struct {
        unsigned id;
        ucp_am_recv_callback_t cb;
    } h[] = {
        {UCX_AM_PUT, ucx_am_put_cb},
        {UCX_AM_PUT_ACK, ucx_am_put_ack_cb},
        {UCX_AM_GET, ucx_am_get_cb},
        {UCX_AM_GET_RESP, ucx_am_get_resp_cb},
    };

    for (size_t i = 0; i < sizeof(h) / sizeof(h[0]); i++) {
        cw_status_t st =
            ucx_set_am_handler(cls, h[i].id, h[i].cb, UCP_AM_FLAG_WHOLE_MSG);
        if (st != CW_OK)
            return st;
    }
    return CW_OK;
}

void ucx_rma_fail_conn(struct ucx_cls *cls, struct ucx_conn *conn,
                       cw_status_t st)
{
    while (!nau_list_empty(&conn->rma))
        ucx_op_finish(nau_container_of(conn->rma.next, struct cw_na_op, link),
                      st);
}

/* Our handle @p mem is being released while UCX may still move a peer's
 * put or get through it (rendezvous: a get's answer is read from the
 * segments as the peer pulls it).  ucp_request_cancel() stops tagged
 * receives only, so the one way to make UCX let go of the memory before
 * the caller frees it is to close the connection the transfer runs on:
 * the peer's operation, and whatever else it has in flight on that
 * connection, fails, and its next operation connects again. */
void ucx_rma_mem_released(struct ucx_cls *cls, struct cw_na_mem *mem)
{
    bool closing = false;

    for (struct nau_list *l = cls->ctls.next; l != &cls->ctls; l = l->next) {
        struct ucx_ctl *ctl = nau_container_of(l, struct ucx_ctl, link);
        struct ucx_conn *conn;

        if (ctl->mem != mem)
            continue;
        ctl->mem = NULL;
        if (ctl->req == NULL || ctl->released)
            continue;
        conn = ucx_conn_by_ep(cls, ctl->ep);
        if (conn == NULL)
            continue;
        UCX_WARN_RL(cls,
                    "memory handle released while %s moves data through "
                    "it: closing that connection",
                    conn->peer ? conn->peer->str : "a peer");
        ucx_conn_fail(conn, UCS_ERR_CANCELED);
        closing = true;
    }
    if (closing)
        ucx_conns_reap(cls);
}

void ucx_rma_release_ctls(struct ucx_cls *cls)
{
    for (struct nau_list *l = cls->ctls.next; l != &cls->ctls; l = l->next) {
        struct ucx_ctl *ctl = nau_container_of(l, struct ucx_ctl, link);
        if (ctl->req && !ctl->released)
            ucp_request_free(ctl->req);
        ctl->released = true;
    }
}

void ucx_rma_free_ctls(struct ucx_cls *cls)
{
    while (!nau_list_empty(&cls->ctls))
        ucx_ctl_free(nau_container_of(cls->ctls.next, struct ucx_ctl, link));
}

static void ucx_rma_sent_cb(void *req, ucs_status_t st, void *user_data)
{
    ucx_op_req_done(user_data, req, st, false);
}

static cw_status_t ucx_rma_post(struct ucx_cls *cls, enum cw_na_op_type type,
                                cw_na_mem_t *local, size_t local_off,
                                cw_na_mem_t *remote, size_t remote_off,
                                size_t len, cw_na_addr_t *peer, cw_na_cb_t cb,
                                void *arg, cw_na_op_t **op_p)
{
    uint32_t need = type == CW_NA_OP_PUT ? CW_NA_MEM_WRITE : CW_NA_MEM_READ;
    ucp_request_param_t p = {0};
    struct ucx_conn *conn;
    ucs_status_ptr_t req;
    struct cw_na_op *op;
    cw_status_t ret;
    void *buf = NULL;
    size_t count = 0;

    if (local == NULL || remote == NULL || peer == NULL || !local->local)
        return CW_INVALID_ARG;
    if (!(remote->access & need))
        return CW_PERMISSION;
    if (local_off > local->total || len > local->total - local_off ||
        remote_off > remote->total || len > remote->total - remote_off)
        return CW_RANGE;
    ret = ucx_peer_conn(cls, peer, &conn);
    if (ret != CW_OK)
        return ret;
    op = ucx_op_new(cls, type, cb, arg);
    if (op == NULL)
        return CW_NOMEM;
    op->rma_counted = true; /* until it finishes: ucx_streaming() */
    cls->rma_inflight++;
    if (cls->rma_rkey && remote->rsegs != NULL) {
        ret = ucx_rkey_post(cls, op, conn, local, local_off, remote, remote_off,
                            len);
        if (ret != CW_OK)
            goto err_discard;
        if (op_p)
            *op_p = op;
        return CW_OK;
    }
    op->buf_len = len;
    op->iov = op->iov_inline;
    if (len > 0) {
        ret = ucx_build_iov(local, local_off, len, op->iov_inline, &op->iov,
                            &op->iovcnt);
        if (ret != CW_OK)
            goto err_discard;
    }
    memset(&op->hdr.rma, 0, sizeof(op->hdr.rma)); /* its pad is sent */
    op->hdr.rma.magic = UCX_WIRE_MAGIC;
    op->hdr.rma.op_id = cls->next_op_id++;
    op->hdr.rma.mem_id = remote->id;
    op->hdr.rma.key = remote->key;
    op->hdr.rma.off = remote_off;
    op->hdr.rma.len = len;
    nau_ptable_insert_u64(&cls->rma_ops, &op->rnode, op->hdr.rma.op_id);
    op->conn = conn;
    nau_list_add_tail(&conn->rma, &op->link);

    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                     UCP_OP_ATTR_FIELD_FLAGS;
    p.cb.send = ucx_rma_sent_cb;
    p.user_data = op;
    p.flags = UCP_AM_SEND_FLAG_REPLY;
    if (type == CW_NA_OP_PUT && op->iovcnt > 0)
        ucx_iov_param(&p, op->iov, op->iovcnt, &buf, &count);
    req = ucp_am_send_nbx(conn->ep,
                          type == CW_NA_OP_PUT ? UCX_AM_PUT : UCX_AM_GET,
                          &op->hdr.rma, sizeof(op->hdr.rma), buf, count, &p);
    if (UCS_PTR_IS_ERR(req)) {
        ret = ucx_status(UCS_PTR_STATUS(req));
        goto err_discard;
    }
    if (req != NULL)
        ucx_op_req_posted(op, type == CW_NA_OP_PUT ? &op->req : &op->hdr_req,
                          req);
    if (op_p)
        *op_p = op;
    return CW_OK;

err_discard:
    ucx_op_discard(op);
    return ret;
}

cw_status_t ucx_put(cw_na_class_t *c, cw_na_mem_t *local, size_t local_off,
                    cw_na_mem_t *remote, size_t remote_off, size_t len,
                    cw_na_addr_t *peer, cw_na_cb_t cb, void *arg,
                    cw_na_op_t **op_p)
{
    return ucx_rma_post(ucx_cls(c), CW_NA_OP_PUT, local, local_off, remote,
                        remote_off, len, peer, cb, arg, op_p);
}

cw_status_t ucx_get(cw_na_class_t *c, cw_na_mem_t *local, size_t local_off,
                    cw_na_mem_t *remote, size_t remote_off, size_t len,
                    cw_na_addr_t *peer, cw_na_cb_t cb, void *arg,
                    cw_na_op_t **op_p)
{
    return ucx_rma_post(ucx_cls(c), CW_NA_OP_GET, local, local_off, remote,
                        remote_off, len, peer, cb, arg, op_p);
}
