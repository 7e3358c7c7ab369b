/*
 * na-ucx: expected messages that come before their receive is posted.
 *
 * UCX keeps a tagged message that no posted receive matches in its own
 * unexpected queue until one does, for as long as the connection lives.
 * Causeway posts an expected receive before the message that answers it
 * can be sent, so such a message is mostly a late answer to a cancelled
 * call or a hostile peer's, and UCX would keep every one: 50 000 of them
 * grew a process by tens of MiB.  So after each progress the plugin takes
 * every tagged message out of UCX's queue into its own, bounded in messages
 * and bytes; to make room the oldest is dropped and counted.  A receive
 * being posted looks there first (an index on the tag, which carries the
 * sender's id, keeps that short while a flood fills the queue), so one
 * that really is early is still delivered.  Messages longer than the
 * eager limit cannot be expected messages and are discarded at once.
 */
#include <stdlib.h>
#include <string.h>

#include "ucx.h"

#define UCX_EARLY_MAX_MSGS  4096u
#define UCX_EARLY_MAX_BYTES (16u << 20)

static struct ucx_list *ucx_early_bucket(struct ucx_cls *cls, uint64_t tag)
{
    uint64_t h = tag * 0x9e3779b97f4a7c15ull;

    return &cls->early_hash[(h >> 32) % UCX_EARLY_BUCKETS];
}

static void ucx_early_free(struct ucx_cls *cls, struct ucx_early *e)
{
    ucx_list_del(&e->link);
    ucx_list_del(&e->blink);
    if (!e->dropped) {
        cls->nearly--;
        cls->early_bytes -= e->len;
    }
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
 * receive already waits for are kept. */
static void ucx_early_make_room(struct ucx_cls *cls, size_t len)
{
    struct ucx_list *l = cls->early.next;

    while ((cls->nearly >= UCX_EARLY_MAX_MSGS ||
            cls->early_bytes + len > UCX_EARLY_MAX_BYTES) &&
           l != &cls->early) {
        struct ucx_early *e = ucx_container_of(l, struct ucx_early, link);
        l = l->next;
        if (e->dropped || e->waiter)
            continue;
        ucx_log_dropped(cls, "expected message no receive was posted for "
                             "(early queue full)");
        if (e->req == NULL) {
            ucx_early_free(cls, e);
        } else { /* still landing: freed by its completion */
            cls->nearly--;
            cls->early_bytes -= e->len;
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

void ucx_early_drain(struct ucx_cls *cls)
{
    ucp_tag_recv_info_t info;
    ucp_tag_message_h msg;

    while ((msg = ucp_tag_probe_nb(cls->worker, 0, 0, 1, &info)) != NULL) {
        ucp_request_param_t p = {0};
        struct ucx_early *e;
        ucs_status_ptr_t req;

        if (info.length > cls->eager_size) {
            ucx_log_dropped(cls, "expected message longer than the eager "
                                 "limit");
            ucx_early_discard(cls, msg);
            continue;
        }
        e = calloc(1, sizeof(*e));
        if (e != NULL && info.length > 0 &&
            (e->data = malloc(info.length)) == NULL) {
            free(e);
            e = NULL;
        }
        if (e == NULL) {
            UCX_ERR(cls, "out of memory keeping an early expected message");
            ucx_early_discard(cls, msg);
            continue;
        }
        e->cls = cls;
        e->tag = info.sender_tag;
        e->len = info.length;
        ucx_early_make_room(cls, e->len);
        ucx_list_add_tail(&cls->early, &e->link);
        ucx_list_add_tail(ucx_early_bucket(cls, e->tag), &e->blink);
        cls->nearly++;
        cls->early_bytes += e->len;
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
    struct ucx_list *b;

    ucx_early_drain(cls); /* UCX's own queue is empty from here on */
    b = ucx_early_bucket(cls, tag);
    for (struct ucx_list *l = b->next; l != b; l = l->next) {
        struct ucx_early *e = ucx_container_of(l, struct ucx_early, blink);
        if (e->dropped || e->waiter || e->tag != tag)
            continue;
        if (e->req == NULL) {
            ucx_early_deliver(cls, e, op);
        } else {
            e->waiter = op;
            op->early = e;
        }
        return true;
    }
    return false;
}

bool ucx_early_moving(const struct ucx_cls *cls)
{
    for (const struct ucx_list *l = cls->early.next; l != &cls->early;
         l = l->next)
        if (ucx_container_of(l, struct ucx_early, link)->req != NULL)
            return true;
    return false;
}

/* Finalize, drain timed out: let UCX release what is still out. */
void ucx_early_release_reqs(struct ucx_cls *cls)
{
    for (struct ucx_list *l = cls->early.next; l != &cls->early; l = l->next) {
        struct ucx_early *e = ucx_container_of(l, struct ucx_early, link);
        if (e->req && !e->released)
            ucp_request_free(e->req);
        e->released = true;
    }
}

/* Finalize, after the worker is gone. */
void ucx_early_free_all(struct ucx_cls *cls)
{
    while (!ucx_list_empty(&cls->early))
        ucx_early_free(
            cls, ucx_container_of(cls->early.next, struct ucx_early, link));
}
