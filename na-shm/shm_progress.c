/*
 * na-shm: operations, completion, progress, blocking support and cancel.
 *
 * Busy path: drain the own ring, retry backlogged sends, run callbacks --
 * no system call.  The sockets (new connections, peers gone) are looked at
 * every SHM_SOCK_CHECK_NS, and always after a blocking wait.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "shm.h"

struct cw_na_op *shm_op_new(struct cw_na_class *cls, enum cw_na_op_type type,
                            cw_na_cb_t cb, void *arg)
{
    struct cw_na_op *op = nau_pool_get(&cls->op_pool);
    if (!op)
        return NULL;
    /* One compound literal: the compiler zeroes the rest with a few wide
     * stores inline, where memset() was a call and a loop per operation
     * (four a forward). */
    *op = (struct cw_na_op){.cls = cls, .type = type, .cb = cb, .arg = arg};
    return op;
}

void shm_op_free(struct cw_na_op *op)
{
    shm_peer_unref(op->peer);
    nau_pool_put(&op->cls->op_pool, op);
}

void shm_op_complete(struct cw_na_class *cls, struct cw_na_op *op,
                     cw_status_t st)
{
    op->status = st;
    op->completed = true;
    nau_list_add_tail(&cls->done, &op->link);
}

static void shm_drop_list(struct nau_list *list)
{
    while (!nau_list_empty(list)) {
        struct cw_na_op *op =
            nau_container_of(list->next, struct cw_na_op, link);
        nau_list_del(&op->link);
        shm_peer_unref(op->source);
        shm_op_free(op);
    }
}

void shm_ops_drop_all(struct cw_na_class *cls)
{
    shm_drop_list(&cls->done);
    shm_drop_list(&cls->unexp_posted);
    shm_drop_list(&cls->exp_posted);
    for (struct nau_list *l = cls->peers.next; l != &cls->peers; l = l->next)
        shm_drop_list(&nau_container_of(l, struct shm_peer, link)->backlog);
    cls->nbacklog = 0;
    nau_pool_fini(&cls->op_pool);
}

void shm_peer_failed(struct cw_na_class *cls, struct shm_peer *peer,
                     cw_status_t st)
{
    if (peer->self || peer->state == SHM_PEER_DEAD)
        return;
    /* Rate-limited: a peer can come and go at any rate (a flood of new
     * endpoints logged 340 lines a second, docs/reliability.md). */
    SHM_LOG_RL(cls, CW_LOG_INFO,
               "shm://%s (pid %d) is gone: failing its "
               "pending operations (status %d)",
               peer->name, (int)peer->pid, (int)st);
    peer->state = SHM_PEER_DEAD;
    shm_peer_unindex(cls, peer);
    cls->ndead++;
    while (!nau_list_empty(&peer->backlog)) {
        struct cw_na_op *op =
            nau_container_of(peer->backlog.next, struct cw_na_op, link);
        nau_list_del(&op->link);
        cls->nbacklog--;
        shm_op_complete(cls, op, st);
    }
    for (struct nau_list *l = cls->exp_posted.next; l != &cls->exp_posted;) {
        struct cw_na_op *op = nau_container_of(l, struct cw_na_op, link);
        l = l->next;
        if (op->peer == peer || op->peer->uid == peer->uid) {
            nau_list_del(&op->link);
            shm_op_complete(cls, op, st);
        }
    }
    /* The fds go now (the mapping and the object when unreferenced). */
    shm_fdref_close(cls, &peer->out);
    shm_fdref_close(cls, &peer->in);
    if (peer->efd >= 0) {
        close(peer->efd);
        peer->efd = -1;
    }
}

static void shm_dead_sweep(struct cw_na_class *cls)
{
    for (struct nau_list *l = cls->peers.next; l != &cls->peers;) {
        struct shm_peer *p = nau_container_of(l, struct shm_peer, link);
        l = l->next;
        if (p->state == SHM_PEER_DEAD && p->inode.refs == 1) {
            nau_list_del(&p->link);
            cls->ndead--;
            shm_peer_unref(p);
        }
    }
}

static void shm_event_drain(struct cw_na_class *cls)
{
    uint64_t v;
    ssize_t n = read(cls->efd, &v, sizeof(v));
    (void)n; /* EAGAIN: nothing was written */
}

void shm_sock_poll(struct cw_na_class *cls)
{
    struct epoll_event evs[32];
    cls->next_sock_check = cls->host->now_ns() + SHM_SOCK_CHECK_NS;
    int n = epoll_wait(cls->epfd, evs, 32, 0);
    for (int i = 0; i < n; i++) {
        struct shm_fdref *ref = evs[i].data.ptr;
        switch (ref->kind) {
        case SHM_FD_EVENT:
            shm_event_drain(cls);
            break;
        case SHM_FD_LISTEN:
            shm_listen_accept(cls);
            break;
        default:
            if (ref->fd >= 0)
                shm_sock_handle(cls, ref);
            break;
        }
    }
    shm_ring_unstick(cls);
    if (cls->ndead)
        shm_dead_sweep(cls);
}

cw_status_t shm_progress(cw_na_class_t *cls, unsigned max, unsigned *count_p)
{
    /* After a wake-up the answer goes out first; the system calls (socket
     * events) come after the callbacks. */
    bool woke = cls->armed;
    if (woke) {
        cls->armed = false;
        atomic_store_explicit(&cls->seg->sleeping, 0, memory_order_relaxed);
    }
    if (cls->nbacklog)
        shm_backlog_retry(cls);
    shm_ring_drain(cls, cls->nslots);
    shm_copy_reap(cls);

    /* Run only what is done now (up to the last op done): callbacks may
     * post operations that complete at once, and those wait for the next
     * call. */
    const struct nau_list *last = cls->done.prev;
    bool more = last != &cls->done;
    unsigned n = 0;
    while (more && (max == 0 || n < max)) {
        struct cw_na_op *op =
            nau_container_of(cls->done.next, struct cw_na_op, link);
        more = &op->link != last;
        nau_list_del(&op->link);
        struct cw_na_cb_info info = {
            .status = op->status, .type = op->type, .arg = op->arg};
        if (op->type == CW_NA_OP_RECV_UNEXPECTED) {
            info.u.recv_unexpected.len = op->status == CW_OK ? op->rlen : 0;
            info.u.recv_unexpected.tag = op->tag;
            info.u.recv_unexpected.source =
                op->source ? shm_addr(op->source) : NULL;
            op->source = NULL; /* the callback owns it now */
        } else if (op->type == CW_NA_OP_RECV_EXPECTED) {
            info.u.recv_expected.len = op->status == CW_OK ? op->rlen : 0;
        }
        op->cb(&info);
        shm_op_free(op);
        n++;
    }
    /* The clock costs as much as an idle pass: look at it on every 16th
     * call only (busy loops make millions; blocking ones come through
     * @c woke). */
    if (woke || ((++cls->clock_skip & 15u) == 0 &&
                 cls->host->now_ns() >= cls->next_sock_check))
        shm_sock_poll(cls);
    if (count_p)
        *count_p = n;
    return CW_OK;
}

int shm_get_wait_fd(cw_na_class_t *cls)
{
    return cls->epfd;
}

bool shm_safe_to_sleep(cw_na_class_t *cls)
{
    if ((cls->flags & CW_NA_BUSY) || !nau_list_empty(&cls->done))
        return false;
    /* Backlogged sends: sleep only if every full receiver will wake us. */
    if (cls->nbacklog && !shm_backlog_arm(cls))
        return false;
    atomic_store_explicit(&cls->seg->sleeping, 1, memory_order_relaxed);
    /* Pairs with the fence in shm_ring_push. */
    atomic_thread_fence(memory_order_seq_cst);
    cls->armed = true;
    /* Reset the eventfd now, off the wake-up path: a sender that wrote it
     * before this read pushed its message first, which the check below
     * sees; one that writes later finds the flag set. */
    shm_event_drain(cls);
    if (shm_ring_pending(cls) || shm_copy_pending(cls))
        return false; /* progress() clears the flag */
    return true;
}

cw_status_t shm_cancel(cw_na_class_t *cls, cw_na_op_t *op)
{
    if (!op)
        return CW_INVALID_ARG;
    if (op->completed)
        return CW_OK; /* its real status will be reported */
    switch (op->type) {
    case CW_NA_OP_SEND_UNEXPECTED:
    case CW_NA_OP_SEND_EXPECTED:
        cls->nbacklog--;
        break;
    case CW_NA_OP_RECV_UNEXPECTED:
    case CW_NA_OP_RECV_EXPECTED:
        break;
    default: /* RMA completes when posted */
        return CW_OK;
    }
    nau_list_del(&op->link);
    shm_op_complete(cls, op, CW_CANCELED);
    return CW_OK;
}
