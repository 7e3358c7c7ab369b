/*
 * Fake verbs device: one-sided RDMA READ and WRITE, executed by the
 * initiator as an HCA executes them, without the target's CPU.  Each
 * process's registrations live in a table in its own memory; the
 * initiator reads the target's entry for the rkey with process_vm_readv
 * (the entry is a seqlock: read until two reads agree on an even
 * sequence), checks it as the responder's adapter would (key, PD of the
 * target QP, bounds, the MR's and the QP's remote access) and moves the
 * bytes with process_vm_readv/writev, within one process too.  A refused
 * access completes with IBV_WC_REM_ACCESS_ERR, moves the initiator's QP to
 * error and tells the target's QP to do the same (FP_ABORT), as the
 * responder's NAK does on hardware; a target process that is gone is a
 * transport retry error, as when an HCA's retries run out.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fake.h"

static struct fake_mrt_ent fake_mrt[FAKE_MRT_SLOTS];
static pthread_mutex_t fake_mrt_lock = PTHREAD_MUTEX_INITIALIZER;

static void mrt_write(struct fake_mrt_ent *e, const struct fake_mrt_ent *v)
{
    uint32_t seq = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);
    __atomic_store_n(&e->seq, seq + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    e->rkey = v->rkey;
    e->access = v->access;
    e->pd = v->pd;
    e->addr = v->addr;
    e->len = v->len;
    __atomic_store_n(&e->seq, seq + 2, __ATOMIC_RELEASE);
}

uint32_t fake_mrt_add(struct fake_mr *mr, uint32_t key_hint)
{
    uint32_t key = 0;
    pthread_mutex_lock(&fake_mrt_lock);
    for (uint32_t i = 0; i < FAKE_MRT_SLOTS; i++) {
        uint32_t k = (key_hint + i) & 0xffffffu;
        if (k == 0)
            continue;
        struct fake_mrt_ent *e = &fake_mrt[k % FAKE_MRT_SLOTS];
        if (e->rkey != 0)
            continue;
        struct fake_mrt_ent v = {
            .rkey = (k << 8) | 0xa9u,
            .access = (uint32_t)mr->access,
            .pd = (uint64_t)(uintptr_t)mr->mr.pd,
            .addr = (uint64_t)(uintptr_t)mr->mr.addr,
            .len = mr->mr.length,
        };
        mrt_write(e, &v);
        mr->slot = k % FAKE_MRT_SLOTS;
        key = k;
        break;
    }
    pthread_mutex_unlock(&fake_mrt_lock);
    return key;
}

void fake_mrt_del(struct fake_mr *mr)
{
    struct fake_mrt_ent none = {0};
    pthread_mutex_lock(&fake_mrt_lock);
    mrt_write(&fake_mrt[mr->slot], &none);
    pthread_mutex_unlock(&fake_mrt_lock);
}

void fake_cm_peer_self(struct fake_cm_peer *me, struct ibv_qp *qp)
{
    me->pid = (uint32_t)getpid();
    me->qp_access = (uint32_t)((struct fake_qp *)qp)->attr.access;
    me->mrt = (uint64_t)(uintptr_t)fake_mrt;
    me->pd = (uint64_t)(uintptr_t)qp->pd;
}

/* The target's entry for @p rkey; -1 with errno from process_vm_readv if
 * the target cannot be read, 1 if the entry never read consistently. */
static int mrt_read(const struct fake_cm_peer *peer, uint32_t rkey,
                    struct fake_mrt_ent *e_p)
{
    uint64_t at = peer->mrt + (uint64_t)((rkey >> 8) % FAKE_MRT_SLOTS) *
                                  sizeof(struct fake_mrt_ent);
    for (int tries = 0; tries < 64; tries++) {
        struct fake_mrt_ent a, b;
        struct iovec la = {&a, sizeof(a)}, lb = {&b, sizeof(b)};
        struct iovec r = {(void *)(uintptr_t)at, sizeof(a)};
        if (process_vm_readv((pid_t)peer->pid, &la, 1, &r, 1, 0) !=
                (ssize_t)sizeof(a) ||
            process_vm_readv((pid_t)peer->pid, &lb, 1, &r, 1, 0) !=
                (ssize_t)sizeof(b))
            return -1;
        if (!(a.seq & 1) && memcmp(&a, &b, sizeof(a)) == 0) {
            *e_p = a;
            return 0;
        }
    }
    return 1;
}

/* The local side as iovecs: every SGE checked against our own MRs with
 * @p need (LOCAL_WRITE for a READ's destination). */
static int local_iov(struct fake_qp *qp, const struct fake_swqe *w, int need,
                     struct iovec *iov, int *n_p)
{
    struct fake_pd *pd = (struct fake_pd *)qp->qp.pd;
    int n = 0;
    if (w->inl) {
        iov[0].iov_base = w->inl;
        iov[0].iov_len = w->len;
        *n_p = 1;
        return 0;
    }
    for (int i = 0; i < w->num_sge; i++) {
        const struct ibv_sge *s = &w->sge[i];
        if (s->length == 0)
            continue;
        if (fake_mr_check(pd, s->lkey, false, s->addr, s->length, need) != 0)
            return -1;
        iov[n].iov_base = (void *)(uintptr_t)s->addr;
        iov[n].iov_len = s->length;
        n++;
    }
    *n_p = n;
    return 0;
}

/* process_vm_readv/writev until every byte has moved (they may stop
 * short, between iovecs). */
static int xfer(pid_t pid, bool read, struct iovec *liov, int ln,
                uint64_t raddr, uint64_t len)
{
    uint64_t done = 0;
    int li = 0;
    while (done < len) {
        while (li < ln && liov[li].iov_len == 0)
            li++;
        if (li == ln)
            return EFAULT;
        struct iovec r = {(void *)(uintptr_t)(raddr + done), len - done};
        ssize_t n = read
                        ? process_vm_readv(pid, liov + li,
                                           (unsigned long)(ln - li), &r, 1, 0)
                        : process_vm_writev(pid, liov + li,
                                            (unsigned long)(ln - li), &r, 1, 0);
        if (n <= 0)
            return n < 0 ? errno : EFAULT;
        done += (uint64_t)n;
        for (size_t left = (size_t)n; left > 0 && li < ln;) {
            size_t take = liov[li].iov_len < left ? liov[li].iov_len : left;
            liov[li].iov_base = (uint8_t *)liov[li].iov_base + take;
            liov[li].iov_len -= take;
            left -= take;
            if (liov[li].iov_len == 0)
                li++;
        }
    }
    return 0;
}

enum ibv_wc_status fake_rma_exec(struct fake_qp *qp, const struct fake_swqe *w)
{
    const struct fake_cm_peer *peer = &qp->id->peer;
    bool read = w->opcode == IBV_WR_RDMA_READ;
    int need = read ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_WRITE;
    struct iovec liov[FAKE_MAX_SGE];
    struct fake_mrt_ent e;
    int ln = 0;

    if (local_iov(qp, w, read ? IBV_ACCESS_LOCAL_WRITE : 0, liov, &ln) != 0) {
        atomic_fetch_add(&fake_cnt.local_prot_errs, 1);
        return IBV_WC_LOC_PROT_ERR;
    }
    int rc = mrt_read(peer, w->rkey, &e);
    if (rc < 0)
        return errno == ESRCH ? IBV_WC_RETRY_EXC_ERR : IBV_WC_REM_OP_ERR;
    if (rc > 0 || e.rkey != w->rkey || e.pd != peer->pd || w->raddr < e.addr ||
        w->len > e.len || w->raddr - e.addr > e.len - w->len ||
        (e.access & (uint32_t)need) != (uint32_t)need ||
        (peer->qp_access & (uint32_t)need) != (uint32_t)need) {
        atomic_fetch_add(&fake_cnt.access_naks, 1);
        return IBV_WC_REM_ACCESS_ERR;
    }
    if (w->len) {
        rc = xfer((pid_t)peer->pid, read, liov, ln, w->raddr, w->len);
        if (rc)
            return rc == ESRCH ? IBV_WC_RETRY_EXC_ERR : IBV_WC_REM_OP_ERR;
    }
    atomic_fetch_add(read ? &fake_cnt.reads : &fake_cnt.writes, 1);
    return IBV_WC_SUCCESS;
}
