/*
 * The copy engine: with CW_NA_ASYNC_RMA (asked for by a gateway, which
 * receives from another fabric on its own thread while it copies), a put
 * or get of at least SHM_ASYNC_MIN bytes is handed to one engine thread
 * per endpoint (CAUSEWAY_SHM_ASYNC_MIN=N sets the size and turns the
 * engine on for any endpoint: tests), which runs process_vm_writev/readv and
 * hands the result back through a locked list and the endpoint's own eventfd.
 * The iovecs are built when the operation is posted, so the engine never
 * touches the memory handles, whose owners may release them once the operation
 * is posted.  Smaller copies, and copies within this process, stay inline:
 * handing a copy over costs a wake-up (tens of microseconds here).
 */
#include "shm.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

struct shm_copy_req {
    struct shm_copy_req *next;
    struct cw_na_op *op;
    bool is_put;
    pid_t pid;
    cw_status_t st;
    int err; /* errno of a failed copy */
    unsigned niov;
    struct iovec *liov, *riov; /* niov each, one allocation after this */
};

static void *shm_copy_main(void *arg);

static cw_status_t shm_copy_start(struct cw_na_class *cls)
{
    struct shm_copy *c = &cls->copy;
    int rc;

    rc = pthread_create(&c->thread, NULL, shm_copy_main, cls);
    if (rc != 0) {
        SHM_ERR(cls, "pthread_create() failed: %s", strerror(rc));
        return CW_NOMEM;
    }
    c->started = true;
    return CW_OK;
}

bool shm_copy_wanted(struct cw_na_class *cls, uint64_t len)
{
    return (cls->flags & CW_NA_ASYNC_RMA) && len >= cls->async_min &&
           !cls->copy.broken;
}

/* Run one request: IOV_MAX pieces a call, resuming after partial copies. */
static cw_status_t shm_copy_run(struct shm_copy_req *r)
{
    const unsigned maxv = IOV_MAX < 256 ? IOV_MAX : 256;
    unsigned i = 0;

    while (i < r->niov) {
        unsigned cnt = r->niov - i < maxv ? r->niov - i : maxv;
        ssize_t n;

        n = r->is_put ? process_vm_writev(r->pid, &r->liov[i], cnt, &r->riov[i],
                                          cnt, 0)
                      : process_vm_readv(r->pid, &r->liov[i], cnt, &r->riov[i],
                                         cnt, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            r->err = n < 0 ? errno : EFAULT;
            if (r->err == EPERM)
                return CW_PERMISSION;
            if (r->err == ESRCH ||
                (r->err == EFAULT && shm_pid_exiting(r->pid)))
                return CW_DISCONNECTED;
            return shm_errno_status(r->err);
        }
        /* Skip what was copied; a piece copied in part shrinks. */
        size_t left = (size_t)n;
        while (left > 0 && i < r->niov) {
            size_t l = r->liov[i].iov_len;
            if (left >= l) {
                left -= l;
                i++;
            } else {
                r->liov[i].iov_base = (char *)r->liov[i].iov_base + left;
                r->riov[i].iov_base = (char *)r->riov[i].iov_base + left;
                r->liov[i].iov_len -= left;
                r->riov[i].iov_len -= left;
                left = 0;
            }
        }
    }
    return CW_OK;
}

static void *shm_copy_main(void *arg)
{
    struct cw_na_class *cls = arg;
    struct shm_copy *c = &cls->copy;

    pthread_mutex_lock(&c->lock);
    for (;;) {
        struct shm_copy_req *r;
        uint64_t one = 1;

        while (c->queue == NULL && !c->stop)
            pthread_cond_wait(&c->cond, &c->lock);
        if (c->queue == NULL)
            break; /* stopping with nothing left */
        r = c->queue;
        c->queue = r->next;
        if (c->queue == NULL)
            c->queue_tail = NULL;
        pthread_mutex_unlock(&c->lock);

        r->st = shm_copy_run(r);

        pthread_mutex_lock(&c->lock);
        r->next = c->done;
        c->done = r;
        atomic_fetch_add_explicit(&c->ndone, 1, memory_order_release);
        /* After the count: a progress thread that found nothing either sees
         * the count or is woken by this. */
        if (write(cls->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
            c->wake_errors++;
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

cw_status_t shm_copy_post(struct cw_na_class *cls, struct cw_na_op *op,
                          bool is_put, pid_t pid, const struct iovec *liov,
                          const struct iovec *riov, unsigned niov)
{
    struct shm_copy *c = &cls->copy;
    struct shm_copy_req *r;

    if (!c->started) {
        cw_status_t st = shm_copy_start(cls);
        if (st != CW_OK) {
            c->broken = true; /* copy inline from now on */
            return st;
        }
    }
    r = malloc(sizeof(*r) + 2 * niov * sizeof(struct iovec));
    if (r == NULL)
        return CW_NOMEM;
    r->next = NULL;
    r->op = op;
    r->is_put = is_put;
    r->pid = pid;
    r->st = CW_OK;
    r->err = 0;
    r->niov = niov;
    r->liov = (struct iovec *)(r + 1);
    r->riov = r->liov + niov;
    memcpy(r->liov, liov, niov * sizeof(*liov));
    memcpy(r->riov, riov, niov * sizeof(*riov));
    pthread_mutex_lock(&c->lock);
    if (c->queue_tail != NULL)
        c->queue_tail->next = r;
    else
        c->queue = r;
    c->queue_tail = r;
    c->inflight++;
    pthread_cond_signal(&c->cond);
    pthread_mutex_unlock(&c->lock);
    return CW_OK;
}

bool shm_copy_pending(struct cw_na_class *cls)
{
    return atomic_load_explicit(&cls->copy.ndone, memory_order_acquire) != 0;
}

void shm_copy_reap(struct cw_na_class *cls)
{
    struct shm_copy *c = &cls->copy;
    struct shm_copy_req *r, *list, *rev = NULL;

    if (!shm_copy_pending(cls))
        return;
    pthread_mutex_lock(&c->lock);
    list = c->done;
    c->done = NULL;
    atomic_store_explicit(&c->ndone, 0, memory_order_relaxed);
    pthread_mutex_unlock(&c->lock);
    while (list != NULL) { /* finished order */
        r = list;
        list = r->next;
        r->next = rev;
        rev = r;
    }
    while (rev != NULL) {
        r = rev;
        rev = r->next;
        if (r->st == CW_PERMISSION)
            shm_rma_eperm(cls,
                          r->is_put ? "process_vm_writev" : "process_vm_readv",
                          r->pid);
        else if (r->st != CW_OK)
            SHM_ERR_RL(cls, "%s(pid %d) failed: %s",
                       r->is_put ? "process_vm_writev" : "process_vm_readv",
                       (int)r->pid, strerror(r->err));
        c->inflight--;
        shm_op_complete(cls, r->op, r->st);
        free(r);
    }
}

void shm_copy_fini(struct cw_na_class *cls)
{
    struct shm_copy *c = &cls->copy;

    if (c->started) {
        /* Copies already handed over finish (they write into peers that
         * were promised the bytes); then the thread ends. */
        pthread_mutex_lock(&c->lock);
        c->stop = true;
        pthread_cond_signal(&c->cond);
        pthread_mutex_unlock(&c->lock);
        pthread_join(c->thread, NULL);
        c->started = false;
        atomic_store(&c->ndone, 1);
        shm_copy_reap(cls); /* onto cls->done, dropped with the rest */
    }
}
