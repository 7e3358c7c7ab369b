/*
 * na-ucx: operations, completion queue, progress, cancel and wait fd.
 */
#include <stdlib.h>
#include <string.h>

#include "ucx.h"

/* ---- operations ---- */

struct cw_na_op *ucx_op_new(struct ucx_cls *cls, enum cw_na_op_type type,
                            cw_na_cb_t cb, void *arg)
{
    struct cw_na_op *op = nau_pool_get(&cls->op_pool);

    if (op == NULL)
        return NULL;
    memset(op, 0, offsetof(struct cw_na_op, tag_info));
    op->cls = cls;
    op->type = type;
    op->cb = cb;
    op->arg = arg;
    op->state = UCX_OP_ACTIVE;
    /* UCX cancels a request by itself only when its endpoint failed. */
    op->cancel_status = CW_DISCONNECTED;
    nau_list_add_tail(&cls->ops, &op->alink);
    return op;
}

static void ucx_op_detach(struct cw_na_op *op)
{
    struct ucx_cls *cls = op->cls;

    nau_list_del(&op->link);
    if (nau_list_linked(&op->hm.fifo)) /* a held receive ends */
        nau_match_remove(&cls->held, &op->hm);
    if (op->early) { /* it lands for nobody now: freed then */
        op->early->waiter = NULL;
        op->early->dropped = true;
        op->early = NULL;
    }
    nau_ptable_remove(&cls->rma_ops, &op->rnode);
    op->conn = NULL;
}

static void ucx_op_free(struct cw_na_op *op)
{
    struct ucx_cls *cls = op->cls;

    ucx_op_detach(op);
    nau_list_del(&op->alink);
    if (op->peer)
        ucx_peer_put(cls, op->peer);
    if (op->source)
        ucx_peer_put(cls, op->source);
    if (op->iov != op->iov_inline)
        free(op->iov);
    nau_pool_put(&cls->op_pool, op);
}

/* Finalize path: forget the operation without a callback.  Its memory is
 * only freed once no UCX request can still refer to it. */
void ucx_op_discard(struct cw_na_op *op)
{
    ucx_op_uncount(op);
    if (!ucx_op_any_busy(op)) {
        ucx_op_free(op);
        return;
    }
    ucx_op_detach(op);
    op->state = UCX_OP_FINISHED;
    op->orphan = true; /* freed by its last request callback or finalize */
}

/* Finalize: ask UCX to stop every request still referring to an op. */
void ucx_ops_cancel_all(struct ucx_cls *cls)
{
    for (struct nau_list *l = cls->ops.next; l != &cls->ops; l = l->next) {
        struct cw_na_op *op = nau_container_of(l, struct cw_na_op, alink);
        if (op->req)
            ucp_request_cancel(cls->worker, op->req);
        if (op->data_req)
            ucp_request_cancel(cls->worker, op->data_req);
        if (op->hdr_req)
            ucp_request_cancel(cls->worker, op->hdr_req);
    }
}

/* Finalize, drain timed out: let UCX release what is still out. */
void ucx_ops_release_reqs(struct ucx_cls *cls)
{
    for (struct nau_list *l = cls->ops.next; l != &cls->ops; l = l->next) {
        struct cw_na_op *op = nau_container_of(l, struct cw_na_op, alink);
        if (op->released)
            continue;
        if (op->req)
            ucp_request_free(op->req);
        if (op->data_req)
            ucp_request_free(op->data_req);
        if (op->hdr_req)
            ucp_request_free(op->hdr_req);
        op->released = true;
    }
}

/* Finalize, after the worker is gone: free what is left. */
void ucx_ops_free_all(struct ucx_cls *cls)
{
    while (!nau_list_empty(&cls->ops))
        ucx_op_free(nau_container_of(cls->ops.next, struct cw_na_op, alink));
}

static void ucx_op_push_done(struct cw_na_op *op)
{
    struct ucx_cls *cls = op->cls;

    if (op->orphan) {
        if (!ucx_op_any_busy(op))
            ucx_op_free(op);
        return;
    }
    nau_list_del(&op->link);
    op->state = UCX_OP_DONE;
    nau_list_add_tail(&cls->done, &op->link);
}

void ucx_op_finish(struct cw_na_op *op, cw_status_t st)
{
    if (op->state != UCX_OP_ACTIVE)
        return;
    op->status = st;
    op->state = UCX_OP_FINISHED;
    ucx_op_uncount(op);
    ucx_op_detach(op);
    if (!ucx_op_user_busy(op))
        ucx_op_push_done(op);
}

/* After a request of @p op went away outside ucx_op_req_done. */
void ucx_op_settle(struct cw_na_op *op)
{
    if (op->orphan) {
        if (!ucx_op_any_busy(op))
            ucx_op_free(op);
        return;
    }
    if (op->state == UCX_OP_FINISHED && !ucx_op_user_busy(op))
        ucx_op_push_done(op);
}

/* UCX 1.13 may run a request's callback inside the call that posts it and
 * still return the request (then released): seen with tagged messages
 * whose fragments had all arrived.  Such a request is not stored. */
void ucx_op_req_posted(struct cw_na_op *op, void **slot, void *req)
{
    bool done = req == op->inline_done;

    op->inline_done = NULL;
    if (!done)
        *slot = req;
}

/* The slot @p req was stored in no longer holds it; a request in no slot
 * completed inside its posting call. */
void ucx_op_req_forget(struct cw_na_op *op, void *req)
{
    if (op->req == req)
        op->req = NULL;
    else if (op->data_req == req)
        op->data_req = NULL;
    else if (op->hdr_req == req)
        op->hdr_req = NULL;
    else
        op->inline_done = req;
}

void ucx_op_req_done(struct cw_na_op *op, void *req, ucs_status_t st,
                     bool final)
{
    ucx_op_req_forget(op, req);
    if (req != NULL && !op->released)
        ucp_request_free(req);
    if (op->orphan) {
        if (!ucx_op_any_busy(op))
            ucx_op_free(op);
        return;
    }
    if (st != UCS_OK)
        ucx_op_finish(op, ucx_req_status(op, st));
    else if (final)
        ucx_op_finish(op, CW_OK);
    if (op->state == UCX_OP_FINISHED && !ucx_op_user_busy(op))
        ucx_op_push_done(op);
}

/* Completion of sends of every kind (user_data is the op). */
void ucx_send_cb(void *req, ucs_status_t st, void *user_data)
{
    struct cw_na_op *op = user_data;
    bool final = op->type == CW_NA_OP_SEND_UNEXPECTED ||
                 op->type == CW_NA_OP_SEND_EXPECTED;

    ucx_op_req_done(op, req, st, final);
}

static void ucx_op_complete(struct cw_na_op *op)
{
    struct cw_na_cb_info info;
    cw_na_cb_t cb = op->cb;

    memset(&info, 0, sizeof(info));
    info.status = op->status;
    info.type = op->type;
    info.arg = op->arg;
    if (op->type == CW_NA_OP_RECV_UNEXPECTED) {
        info.u.recv_unexpected.len = op->status == CW_OK ? op->len : 0;
        info.u.recv_unexpected.tag = op->tag;
        if (op->status == CW_OK) {
            info.u.recv_unexpected.source = op->source;
            op->source = NULL;
        }
    } else if (op->type == CW_NA_OP_RECV_EXPECTED) {
        info.u.recv_expected.len = op->status == CW_OK ? op->len : 0;
    }
    /* A request that only carries the op's own header may still be out:
     * the op then lives on, without callback, until it completes. */
    if (ucx_op_any_busy(op)) {
        ucx_op_detach(op);
        op->orphan = true;
    } else {
        ucx_op_free(op);
    }
    if (cb)
        cb(&info);
}

cw_status_t ucx_progress(cw_na_class_t *c, unsigned max, unsigned *count_p)
{
    struct ucx_cls *cls = ucx_cls(c);
    unsigned ran = 0;
    size_t budget = 0;
    bool moved = false;

    /* One call a pass: it runs each transport's progress once, and a pass
     * that finds work is followed by another (the core's loop, or
     * ucx_safe_to_sleep, which progresses once more before it arms).
     * Calling again until a call finds nothing cost one more of them on
     * every pass, an epoll_wait() in uct's tcp transport: about 400
     * instructions of a 64 B round trip at each end (callgrind,
     * tests/bench/rtt-instr.sh). */
    moved = ucp_worker_progress(cls->worker) != 0;
    /* UCX queues a message that no receive matches only while it
     * progresses, and each drain empties its queue: a pass that moved
     * nothing leaves nothing to probe for (ucp_tag_probe_nb was about 200
     * instructions of a 64 B round trip, callgrind). */
    if (moved)
        ucx_early_drain(cls);
    /* One clock read for the periodic checks of this call. */
    if (cls->live_timeout_ns != 0 || cls->listening) {
        uint64_t now = cls->host->now_ns();

        ucx_live_scan(cls, now);
        ucx_guard_tick(cls, now);
    }
    ucx_conns_reap(cls);

    /* Only what is done now: callbacks that post and complete again are
     * served by the next call. */
    for (struct nau_list *l = cls->done.next; l != &cls->done; l = l->next)
        budget++;
    while (budget-- > 0 && (max == 0 || ran < max)) {
        struct cw_na_op *op =
            nau_container_of(cls->done.next, struct cw_na_op, link);
        ucx_op_complete(op);
        ran++;
    }
    if (count_p)
        *count_p = ran;
    return CW_OK;
}

cw_status_t ucx_cancel(cw_na_class_t *c, cw_na_op_t *op)
{
    struct ucx_cls *cls = ucx_cls(c);

    if (op == NULL)
        return CW_INVALID_ARG;
    if (op->state != UCX_OP_ACTIVE)
        return CW_OK; /* finished first: its real status is reported */
    op->cancel_status = CW_CANCELED;
    switch (op->type) {
    case CW_NA_OP_RECV_UNEXPECTED:
    case CW_NA_OP_RECV_EXPECTED:
    case CW_NA_OP_SEND_UNEXPECTED:
    case CW_NA_OP_SEND_EXPECTED:
        if (op->data_req)
            ucp_request_cancel(cls->worker, op->data_req);
        else if (op->req)
            ucp_request_cancel(cls->worker, op->req);
        else
            ucx_op_finish(op, CW_CANCELED);
        break;
    case CW_NA_OP_PUT:
    case CW_NA_OP_GET:
        /* Data moving into our memory must stop (or finish) before the
         * callback may run; a request still on the wire keeps the op alive
         * (inflight) but its answer will be ignored. */
        if (op->data_req) {
            ucp_request_cancel(cls->worker, op->data_req);
        } else {
            if (op->type == CW_NA_OP_PUT && op->req)
                ucp_request_cancel(cls->worker, op->req);
            ucx_op_finish(op, CW_CANCELED);
        }
        break;
    default:
        return CW_INVALID_ARG;
    }
    return CW_OK;
}

int ucx_get_wait_fd(cw_na_class_t *c)
{
    return ucx_cls(c)->efd;
}

/* Data of a put or get moves only from progress calls (UCX's tcp
 * transport), ours or one another process drives on our memory (a ctl in
 * flight: put data we receive by rendezvous, a get's answer going out),
 * and completes nothing until its end: the core must keep polling
 * throughout.  Its fallback sleeps stalled such transfers, and sleeping
 * between fragments makes the sender pay for waking this CPU at each one
 * (through a gateway, a pipelined 64 MiB ofi+tcp -> ucx+tcp transfer ran
 * a quarter slower without this). */
bool ucx_streaming(cw_na_class_t *c)
{
    struct ucx_cls *cls = ucx_cls(c);

    return cls->rma_inflight > 0 || !nau_list_empty(&cls->ctls);
}

bool ucx_safe_to_sleep(cw_na_class_t *c)
{
    struct ucx_cls *cls = ucx_cls(c);
    ucs_status_t st;

    if (cls->busy || cls->efd < 0)
        return false;
    if (!nau_list_empty(&cls->done) || !nau_list_empty(&cls->dead))
        return false;
    if (ucp_worker_progress(cls->worker) != 0) {
        ucx_early_drain(cls);
        return false;
    }
    if (!nau_list_empty(&cls->done) || !nau_list_empty(&cls->dead) ||
        ucx_streaming(c))
        return false;
    st = ucp_worker_arm(cls->worker);
    if (st == UCS_OK)
        return true;
    if (st != UCS_ERR_BUSY)
        UCX_WARN(cls, "ucp_worker_arm() failed: %s", ucs_status_string(st));
    return false;
}

/* Finalize: progress until every endpoint close finished and no request
 * refers to an operation, or until the timeout. */
void ucx_drain_requests(struct ucx_cls *cls, uint64_t timeout_ns)
{
    uint64_t deadline = cls->host->now_ns() + timeout_ns;

    for (;;) {
        bool busy = !nau_list_empty(&cls->closing) ||
                    !nau_list_empty(&cls->ctls) || ucx_early_moving(cls);
        for (struct nau_list *l = cls->ops.next; !busy && l != &cls->ops;
             l = l->next)
            busy = ucx_op_any_busy(nau_container_of(l, struct cw_na_op, alink));
        if (!busy || cls->host->now_ns() > deadline)
            break;
        ucp_worker_progress(cls->worker);
        ucx_conns_reap(cls);
    }
}
