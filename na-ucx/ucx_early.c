/*
 * na-ucx: expected messages, matched by the plugin.
 *
 * An expected receive is posted to UCX (ucp_tag_recv_nbx), or, where the
 * caller already awaits several answers (ucx_msg_recv_expected), held by
 * the plugin: it waits in the plugin's matcher, cls->held, keyed by the
 * sender id and tag that the UCX tag carries, and its message lands in
 * UCX's unexpected queue, which UCX fills only while it progresses.  After
 * each progress call that moved anything, ucx_early_drain takes every
 * tagged message out of that queue; one that a held receive waits for is
 * received into that receive's buffer (ucp_tag_msg_recv_nbx).  Withdrawing
 * a held receive whose answer came another way (inside a batch) is only
 * taking it out of the matcher, where a receive posted to UCX has to be
 * cancelled there.
 *
 * A message no receive waits for is mostly a late answer to a cancelled
 * call or a hostile peer's, and UCX would keep every one for as long as
 * the connection lives (50 000 of them grew a process by tens of MiB):
 * the drain moves it into the plugin's own early queue, bounded in
 * messages and bytes; to make room the oldest is dropped and counted.  A
 * receive being posted looks there first (na-util's matcher keeps that
 * short while a flood fills the queue), so one that really is early is
 * still delivered.  Messages longer than the eager limit cannot be
 * expected messages and are discarded at once, unless a receive waits for
 * them (it ends CW_OVERFLOW if they do not fit, as a receive posted to UCX
 * did).
 *
 * No user code runs inside ucp_worker_progress() (our UCX callbacks only
 * queue), and every call of it that moved something is followed by a
 * drain (but finalize's, after which nothing is posted), so outside a
 * progress UCX's queue is empty: a receive being posted or held needs to
 * look at the plugin's early queue only (and UCX would match its own queue
 * against a posted one anyway).
 */
#include <stdlib.h>
#include <string.h>

#include "ucx.h"

static void ucx_early_free(struct ucx_cls *cls, struct ucx_early *e)
{
    nau_list_del(&e->link);
    nau_match_remove(&cls->early, &e->m);
    free(e->data);
    free(e);
}

/* Complete @p op with the landed message @p e (then freed). */
static void ucx_early_deliver(struct ucx_cls *cls, struct ucx_early *e,
                              struct cw_na_op *op)
{
    cw_status_t st = CW_OK;

    if (e->status != UCS_OK) {
        st = ucx_req_status(op, e->status);
    } else if (e->len > op->buf_len) {
        st = CW_OVERFLOW;
    } else {
        if (e->len > 0)
            memcpy(op->buf, e->data, e->len);
        op->len = e->len;
    }
    ucx_op_finish(op, st);
    ucx_early_free(cls, e);
}

static void ucx_early_recv_cb(void *req, ucs_status_t st,
                              const ucp_tag_recv_info_t *info, void *user_data)
{
    struct ucx_early *e = user_data;
    struct ucx_cls *cls = e->cls;

    if (e->released)
        return; /* finalize frees it once the worker is gone */
    ucp_request_free(req);
    e->req = NULL;
    e->status = st;
    e->landed = true;
    if (e->posting)
        return; /* UCX completed it inside the call: the drain goes on */
    if (e->waiter)
        ucx_early_deliver(cls, e, e->waiter);
    else if (e->dropped || st != UCS_OK)
        ucx_early_free(cls, e);
}

/* Drop the oldest entries until one of @p len bytes fits.  Entries a
 * receive already waits for are no longer in the matcher, so are kept. */
static void ucx_early_make_room(struct ucx_cls *cls, size_t len)
{
    struct nau_match_entry *m;

    while (nau_match_full(&cls->early, len) &&
           (m = nau_match_oldest(&cls->early)) != NULL) {
        struct ucx_early *e = nau_container_of(m, struct ucx_early, m);

        ucx_log_dropped(cls, "expected message no receive was posted for "
                             "(early queue full)");
        if (e->req == NULL) {
            ucx_early_free(cls, e);
        } else { /* still landing: freed by its completion */
            nau_match_remove(&cls->early, m);
            e->dropped = true;
        }
    }
}

/* Receive and discard a message UCX handed over. */
static void ucx_early_discard(struct ucx_cls *cls, ucp_tag_message_h msg)
{
    ucp_request_param_t p = {0};
    ucs_status_ptr_t req;

    req = ucp_tag_msg_recv_nbx(cls->worker, NULL, 0, msg, &p);
    if (UCS_PTR_IS_PTR(req))
        ucp_request_free(req); /* UCX releases it once done */
}

/* The expected message of a held receive (@p op) landed, or failed; its
 * length is the probe's (ucx_held_take). */
static void ucx_held_recv_cb(void *req, ucs_status_t st,
                             const ucp_tag_recv_info_t *info, void *user_data)
{
    (void)info;
    ucx_op_req_done(user_data, req, st, true);
}

/* Receive @p msg (@p info) into the held receive @p op. */
static void ucx_held_take(struct ucx_cls *cls, struct cw_na_op *op,
                          ucp_tag_message_h msg,
                          const ucp_tag_recv_info_t *info)
{
    ucp_request_param_t p = {0};
    ucs_status_ptr_t req;

    nau_match_remove(&cls->held, &op->hm);
    if (info->length > op->buf_len) {
        ucx_early_discard(cls, msg);
        ucx_op_finish(op, CW_OVERFLOW);
        return;
    }
    /* The length is the probe's: a receive of a probed message that
     * completes in the call fills no receive info. */
    op->len = info->length;
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.recv = ucx_held_recv_cb;
    p.user_data = op;
    req = ucp_tag_msg_recv_nbx(cls->worker, op->buf, info->length, msg, &p);
    if (req == NULL) {
        ucx_op_finish(op, CW_OK);
    } else if (UCS_PTR_IS_ERR(req)) {
        ucx_op_finish(op, ucx_status(UCS_PTR_STATUS(req)));
    } else {
        ucx_op_req_posted(op, &op->req, req);
    }
}

void ucx_early_drain(struct ucx_cls *cls)
{
    ucp_tag_recv_info_t info;
    ucp_tag_message_h msg;

    if (cls->finalizing)
        return; /* starts nothing new (ucx_finalize) */
    while ((msg = ucp_tag_probe_nb(cls->worker, 0, 0, 1, &info)) != NULL) {
        ucp_request_param_t p = {0};
        struct nau_match_entry *m;
        struct ucx_early *e;
        ucs_status_ptr_t req;

        m = nau_match_find(&cls->held, info.sender_tag >> 32,
                           (uint32_t)info.sender_tag);
        if (m != NULL) {
            ucx_held_take(cls, nau_container_of(m, struct cw_na_op, hm), msg,
                          &info);
            continue;
        }
        if (info.length > cls->eager_size) {
            ucx_log_dropped(cls, "expected message longer than the eager "
                                 "limit");
            ucx_early_discard(cls, msg);
            continue;
        }
        ucx_early_make_room(cls, info.length);
        e = calloc(1, sizeof(*e));
        if (e != NULL &&
            ((info.length > 0 && (e->data = malloc(info.length)) == NULL) ||
             nau_match_insert(&cls->early, &e->m, info.sender_tag >> 32,
                              (uint32_t)info.sender_tag,
                              info.length) != CW_OK)) {
            free(e->data);
            free(e);
            e = NULL;
        }
        if (e == NULL) {
            UCX_ERR(cls, "out of memory keeping an early expected message");
            ucx_early_discard(cls, msg);
            continue;
        }
        e->cls = cls;
        e->len = info.length;
        nau_list_add_tail(&cls->early_all, &e->link);
        p.op_attr_mask =
            UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
        p.cb.recv = ucx_early_recv_cb;
        p.user_data = e;
        e->posting = true;
        req = ucp_tag_msg_recv_nbx(cls->worker, e->data, e->len, msg, &p);
        e->posting = false;
        /* UCX 1.13 may complete a message whose fragments are all here
         * inside the call, callback included, and still return the
         * (then released) request. */
        if (UCS_PTR_IS_ERR(req) || (e->landed && e->status != UCS_OK))
            ucx_early_free(cls, e);
        else if (req != NULL && !e->landed)
            e->req = req;
    }
}

/* A receive for @p tag is being posted: if its message came already, @p op
 * takes it (completes now, or when it has landed) and true is returned. */
bool ucx_early_take(struct ucx_cls *cls, struct cw_na_op *op, uint64_t tag)
{
    struct nau_match_entry *m;
    struct ucx_early *e;

    /* UCX's own queue is empty outside a progress (above). */
    m = nau_match_find(&cls->early, tag >> 32, (uint32_t)tag);
    if (m == NULL)
        return false;
    e = nau_container_of(m, struct ucx_early, m);
    if (e->req == NULL) {
        ucx_early_deliver(cls, e, op);
    } else {
        nau_match_remove(&cls->early, m);
        e->waiter = op;
        op->early = e;
    }
    return true;
}

bool ucx_early_moving(const struct ucx_cls *cls)
{
    const struct nau_list *l;

    nau_list_for_each(l, &cls->early_all)
    {
        if (nau_container_of(l, struct ucx_early, link)->req != NULL)
            return true;
    }
    return false;
}

/* Finalize, drain timed out: let UCX release what is still out. */
void ucx_early_release_reqs(struct ucx_cls *cls)
{
    struct nau_list *l;

    nau_list_for_each(l, &cls->early_all)
    {
        struct ucx_early *e = nau_container_of(l, struct ucx_early, link);
        if (e->req && !e->released)
            ucp_request_free(e->req);
        e->released = true;
    }
}

/* Finalize, after the worker is gone. */
void ucx_early_free_all(struct ucx_cls *cls)
{
    while (!nau_list_empty(&cls->early_all))
        ucx_early_free(
            cls, nau_container_of(cls->early_all.next, struct ucx_early, link));
}
