/*
 * Fake verbs device: devices, protection domains, memory regions,
 * completion queues and channels, shared receive queues.  Checks follow
 * what rdma-core/mlx5 reject: bad access combinations, unmapped memory,
 * queue overflows, unknown keys, out-of-bounds or unauthorised access.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "fake.h"

struct fake_dev {
    struct ibv_device dev;
    struct ibv_context ctx;
};

static struct fake_dev fake_devs[FAKE_NDEV];
static pthread_once_t fake_once = PTHREAD_ONCE_INIT;
static atomic_uint_fast32_t fake_key_next;

struct fake_counters fake_cnt;

static void fake_devs_init(void)
{
    for (int i = 0; i < FAKE_NDEV; i++) {
        struct fake_dev *d = &fake_devs[i];
        snprintf(d->dev.name, sizeof(d->dev.name), "fake%d", i);
        snprintf(d->dev.dev_name, sizeof(d->dev.dev_name), "uverbs-fake%d", i);
        d->dev.node_type = IBV_NODE_CA;
        d->dev.transport_type = IBV_TRANSPORT_IB;
        d->ctx.device = &d->dev;
        d->ctx.cmd_fd = -1;
        d->ctx.async_fd = -1;
    }
    atomic_store(&fake_key_next, (uint32_t)(getpid() & 0xfff) * 4096u + 1u);
}

uint64_t fake_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct fake_dev *fake_dev_of(struct ibv_context *ctx)
{
    pthread_once(&fake_once, fake_devs_init);
    for (int i = 0; i < FAKE_NDEV; i++)
        if (ctx == &fake_devs[i].ctx)
            return &fake_devs[i];
    return NULL;
}

struct ibv_context *fake_ctx_for_ip(uint32_t ip)
{
    pthread_once(&fake_once, fake_devs_init);
    if ((ip >> 24) != 127 || (ip & 0xffu) == 0)
        return NULL;
    return &fake_devs[((ip & 0xffu) - 1u) % FAKE_NDEV].ctx;
}

/* fake3 has a small inline limit, as some real devices do. */
uint32_t fake_max_inline(struct ibv_context *ctx)
{
    struct fake_dev *d = fake_dev_of(ctx);
    return d && d == &fake_devs[FAKE_NDEV - 1] ? 32 : FAKE_MAX_INLINE;
}

/* Device fakeN owns 127.0.0.(N+1) (and every 4th address after). */
static int fake_default_addr(const char *dev, struct in_addr *addr_p)
{
    unsigned idx = 0;
    if (dev && dev[0]) {
        char *end;
        if (strncmp(dev, "fake", 4) != 0)
            return ENODEV;
        unsigned long v = strtoul(dev + 4, &end, 10);
        if (end == dev + 4 || *end || v >= FAKE_NDEV)
            return ENODEV;
        idx = (unsigned)v;
    }
    addr_p->s_addr = htonl(0x7f000001u + idx);
    return 0;
}

void fake_stats_get(struct vb_fake_stats *st)
{
    st->rnr_naks = atomic_load(&fake_cnt.rnr_naks);
    st->rnr_retry_exc = atomic_load(&fake_cnt.rnr_retry_exc);
    st->access_naks = atomic_load(&fake_cnt.access_naks);
    st->local_prot_errs = atomic_load(&fake_cnt.local_prot_errs);
    st->qp_errors = atomic_load(&fake_cnt.qp_errors);
    st->sends = atomic_load(&fake_cnt.sends);
    st->writes = atomic_load(&fake_cnt.writes);
    st->reads = atomic_load(&fake_cnt.reads);
    st->mrs_registered = atomic_load(&fake_cnt.mrs_registered);
    st->mrs_live = atomic_load(&fake_cnt.mrs_live);
}

/* ---- devices ---- */

static struct ibv_device **fake_get_device_list(int *num)
{
    pthread_once(&fake_once, fake_devs_init);
    struct ibv_device **l = calloc(FAKE_NDEV + 1, sizeof(*l));
    if (!l) {
        errno = ENOMEM;
        return NULL;
    }
    for (int i = 0; i < FAKE_NDEV; i++)
        l[i] = &fake_devs[i].dev;
    if (num)
        *num = FAKE_NDEV;
    return l;
}

static void fake_free_device_list(struct ibv_device **list)
{
    free(list);
}

static struct ibv_context *fake_open_device(struct ibv_device *dev)
{
    pthread_once(&fake_once, fake_devs_init);
    for (int i = 0; i < FAKE_NDEV; i++)
        if (dev == &fake_devs[i].dev)
            return &fake_devs[i].ctx;
    errno = ENODEV;
    return NULL;
}

static int fake_close_device(struct ibv_context *ctx)
{
    return fake_dev_of(ctx) ? 0 : EINVAL;
}

static int fake_query_device(struct ibv_context *ctx,
                             struct ibv_device_attr *attr)
{
    if (!fake_dev_of(ctx) || !attr)
        return EINVAL;
    memset(attr, 0, sizeof(*attr));
    snprintf(attr->fw_ver, sizeof(attr->fw_ver), "fake-1");
    attr->max_mr_size = 1ull << 40;
    attr->max_qp = 1 << 16;
    attr->max_qp_wr = FAKE_MAX_QP_WR;
    attr->max_sge = FAKE_MAX_SGE;
    attr->max_cq = 1 << 16;
    attr->max_cqe = FAKE_MAX_CQE;
    attr->max_mr = FAKE_MRT_SLOTS;
    attr->max_pd = 1 << 16;
    attr->max_qp_rd_atom = FAKE_MAX_RD_ATOM;
    attr->max_qp_init_rd_atom = FAKE_MAX_RD_ATOM;
    attr->max_srq = 1 << 10;
    attr->max_srq_wr = FAKE_MAX_SRQ_WR;
    attr->max_srq_sge = FAKE_MAX_SGE;
    attr->phys_port_cnt = 1;
    return 0;
}

static int fake_query_port(struct ibv_context *ctx, uint8_t port,
                           struct ibv_port_attr *attr)
{
    struct fake_dev *d = fake_dev_of(ctx);
    if (!d || !attr || port != 1)
        return EINVAL;
    memset(attr, 0, sizeof(*attr));
    attr->state = IBV_PORT_ACTIVE;
    attr->max_mtu = IBV_MTU_4096;
    attr->active_mtu = IBV_MTU_4096;
    attr->lid = (uint16_t)(d - fake_devs + 1);
    attr->link_layer = IBV_LINK_LAYER_INFINIBAND;
    attr->max_msg_sz = 1u << 31;
    return 0;
}

/* ---- protection domains and memory regions ---- */

static struct ibv_pd *fake_alloc_pd(struct ibv_context *ctx)
{
    if (!fake_dev_of(ctx)) {
        errno = EINVAL;
        return NULL;
    }
    struct fake_pd *pd = calloc(1, sizeof(*pd));
    if (!pd) {
        errno = ENOMEM;
        return NULL;
    }
    pd->pd.context = ctx;
    return &pd->pd;
}

static int fake_dealloc_pd(struct ibv_pd *ibpd)
{
    struct fake_pd *pd = (struct fake_pd *)ibpd;
    if (!pd)
        return EINVAL;
    if (pd->mrs || pd->nobj)
        return EBUSY;
    free(pd);
    return 0;
}

/* Whether every page of [addr, addr + len) is mapped, as pinning needs.
 * mincore() fails with ENOMEM on a range with a hole and, unlike msync(),
 * neither reads nor writes back the pages (valgrind's memcheck took
 * msync's range for bytes the call reads, and flagged every registration
 * of a buffer not yet written).  In chunks, so its vector stays small. */
static bool fake_range_mapped(const void *addr, size_t len)
{
    unsigned char vec[1024];
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)addr & ~((uintptr_t)pg - 1);
    uintptr_t end = (uintptr_t)addr + len;

    while (start < end) {
        size_t n = end - start;

        if (n > sizeof(vec) * pg)
            n = sizeof(vec) * pg;
        if (mincore((void *)start, n, vec) != 0)
            return false;
        start += n;
    }
    return true;
}

static struct ibv_mr *fake_reg_mr(struct ibv_pd *ibpd, void *addr, size_t len,
                                  int access)
{
    struct fake_pd *pd = (struct fake_pd *)ibpd;
    const int known = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                      IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    if (!pd || (access & ~known) || len == 0 ||
        (uintptr_t)addr > UINTPTR_MAX - len) {
        errno = EINVAL;
        return NULL;
    }
    /* Remote write or atomic access needs local write (verbs spec). */
    if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
        !(access & IBV_ACCESS_LOCAL_WRITE)) {
        errno = EINVAL;
        return NULL;
    }
    /* Pinning fails on unmapped memory. */
    if (!fake_range_mapped(addr, len)) {
        errno = EFAULT;
        return NULL;
    }
    struct fake_mr *mr = calloc(1, sizeof(*mr));
    if (!mr) {
        errno = ENOMEM;
        return NULL;
    }
    mr->mr.context = ibpd->context;
    mr->mr.pd = ibpd;
    mr->mr.addr = addr;
    mr->mr.length = len;
    mr->access = access;
    uint32_t k =
        fake_mrt_add(mr, (uint32_t)atomic_fetch_add(&fake_key_next, 1));
    if (k == 0) {
        free(mr);
        errno = ENOMEM; /* more MRs than the device has */
        return NULL;
    }
    mr->mr.lkey = (k << 8) | 0x17u;
    mr->mr.rkey = (k << 8) | 0xa9u;
    mr->next = pd->mrs;
    pd->mrs = mr;
    atomic_fetch_add(&fake_cnt.mrs_registered, 1);
    atomic_fetch_add(&fake_cnt.mrs_live, 1);
    return &mr->mr;
}

static int fake_dereg_mr(struct ibv_mr *ibmr)
{
    if (!ibmr)
        return EINVAL;
    struct fake_pd *pd = (struct fake_pd *)ibmr->pd;
    for (struct fake_mr **pp = &pd->mrs; *pp; pp = &(*pp)->next) {
        if (&(*pp)->mr == ibmr) {
            struct fake_mr *mr = *pp;
            *pp = mr->next;
            fake_mrt_del(mr);
            free(mr);
            atomic_fetch_sub(&fake_cnt.mrs_live, 1);
            return 0;
        }
    }
    return EINVAL;
}

int fake_mr_check(struct fake_pd *pd, uint32_t key, bool remote, uint64_t addr,
                  uint64_t len, int need_access)
{
    for (struct fake_mr *mr = pd->mrs; mr; mr = mr->next) {
        if ((remote ? mr->mr.rkey : mr->mr.lkey) != key)
            continue;
        uint64_t base = (uint64_t)(uintptr_t)mr->mr.addr;
        if (addr < base || len > mr->mr.length ||
            addr - base > mr->mr.length - len)
            return -1;
        if ((mr->access & need_access) != need_access)
            return -1;
        return 0;
    }
    return -1;
}

int fake_sge_copy_out(struct fake_pd *pd, const struct ibv_sge *sge, int n,
                      uint8_t *dst, uint32_t *len_p)
{
    uint32_t total = 0;
    for (int i = 0; i < n; i++) {
        if (sge[i].length == 0)
            continue;
        if (fake_mr_check(pd, sge[i].lkey, false, sge[i].addr, sge[i].length,
                          0) != 0)
            return -1;
        if (dst)
            memcpy(dst + total, (const void *)(uintptr_t)sge[i].addr,
                   sge[i].length);
        total += sge[i].length;
    }
    *len_p = total;
    return 0;
}

/* Scatter @p len bytes; -1 on a protection error, -2 if too long. */
int fake_sge_copy_in(struct fake_pd *pd, const struct ibv_sge *sge, int n,
                     const uint8_t *src, uint32_t len)
{
    uint64_t room = 0;
    for (int i = 0; i < n; i++)
        room += sge[i].length;
    if (room < len)
        return -2;
    uint32_t done = 0;
    for (int i = 0; i < n && done < len; i++) {
        uint32_t piece = sge[i].length;
        if (piece > len - done)
            piece = len - done;
        if (piece == 0)
            continue;
        if (fake_mr_check(pd, sge[i].lkey, false, sge[i].addr, piece,
                          IBV_ACCESS_LOCAL_WRITE) != 0)
            return -1;
        memcpy((void *)(uintptr_t)sge[i].addr, src + done, piece);
        done += piece;
    }
    return 0;
}

/* ---- completion channels and queues ---- */

static struct ibv_comp_channel *
fake_create_comp_channel(struct ibv_context *ctx)
{
    if (!fake_dev_of(ctx)) {
        errno = EINVAL;
        return NULL;
    }
    struct fake_chan *ch = calloc(1, sizeof(*ch));
    if (!ch) {
        errno = ENOMEM;
        return NULL;
    }
    ch->ch.context = ctx;
    ch->ch.fd = eventfd(0, EFD_CLOEXEC);
    if (ch->ch.fd < 0) {
        int e = errno;
        free(ch);
        errno = e;
        return NULL;
    }
    return &ch->ch;
}

static int fake_destroy_comp_channel(struct ibv_comp_channel *ibch)
{
    struct fake_chan *ch = (struct fake_chan *)ibch;
    if (!ch)
        return EINVAL;
    if (ch->cqs)
        return EBUSY;
    close(ch->ch.fd);
    free(ch);
    return 0;
}

static void fake_chan_signal(struct fake_chan *ch, bool on)
{
    uint64_t v = 1;
    if (on) {
        if (write(ch->ch.fd, &v, sizeof(v)) < 0)
            return;
    } else {
        struct pollfd p = {.fd = ch->ch.fd, .events = POLLIN};
        if (poll(&p, 1, 0) == 1 && read(ch->ch.fd, &v, sizeof(v)) < 0)
            return;
    }
}

static struct ibv_cq *fake_create_cq(struct ibv_context *ctx, int cqe,
                                     void *cq_context,
                                     struct ibv_comp_channel *ibch, int vector)
{
    if (!fake_dev_of(ctx) || cqe <= 0 || cqe > FAKE_MAX_CQE || vector != 0 ||
        (ibch && ibch->context != ctx)) {
        errno = EINVAL;
        return NULL;
    }
    struct fake_cq *cq = calloc(1, sizeof(*cq));
    if (!cq)
        goto err_nomem;
    cq->ring = calloc((size_t)cqe, sizeof(*cq->ring));
    if (!cq->ring)
        goto err_free_cq;
    cq->cap = cqe;
    cq->cq.context = ctx;
    cq->cq.channel = ibch;
    cq->cq.cq_context = cq_context;
    cq->cq.cqe = cqe;
    if (ibch) {
        cq->chan = (struct fake_chan *)ibch;
        cq->chan_next = cq->chan->cqs;
        cq->chan->cqs = cq;
    }
    return &cq->cq;

err_free_cq:
    free(cq);
err_nomem:
    errno = ENOMEM;
    return NULL;
}

static int fake_destroy_cq(struct ibv_cq *ibcq)
{
    struct fake_cq *cq = (struct fake_cq *)ibcq;
    if (!cq)
        return EINVAL;
    if (cq->nqps || cq->events != cq->acked)
        return EBUSY;
    if (cq->chan) {
        for (struct fake_cq **pp = &cq->chan->cqs; *pp; pp = &(*pp)->chan_next)
            if (*pp == cq) {
                *pp = cq->chan_next;
                break;
            }
        if (cq->queued_event) {
            struct fake_cq *prev = NULL;
            for (struct fake_cq *c = cq->chan->evhead; c; c = c->ev_next) {
                if (c == cq) {
                    if (prev)
                        prev->ev_next = c->ev_next;
                    else
                        cq->chan->evhead = c->ev_next;
                    if (cq->chan->evtail == c)
                        cq->chan->evtail = prev;
                    break;
                }
                prev = c;
            }
            if (!cq->chan->evhead)
                fake_chan_signal(cq->chan, false);
        }
    }
    free(cq->qps);
    free(cq->ring);
    free(cq);
    return 0;
}

void fake_cq_attach(struct fake_cq *cq, struct fake_qp *qp)
{
    for (size_t i = 0; i < cq->nqps; i++)
        if (cq->qps[i] == qp)
            return;
    if (cq->nqps == cq->qps_cap) {
        size_t ncap = cq->qps_cap ? cq->qps_cap * 2 : 8;
        struct fake_qp **n = realloc(cq->qps, ncap * sizeof(*n));
        if (!n)
            return; /* the QP is then only progressed through its id */
        cq->qps = n;
        cq->qps_cap = ncap;
    }
    cq->qps[cq->nqps++] = qp;
}

void fake_cq_detach(struct fake_cq *cq, struct fake_qp *qp)
{
    for (size_t i = 0; i < cq->nqps; i++)
        if (cq->qps[i] == qp) {
            cq->qps[i] = cq->qps[--cq->nqps];
            return;
        }
}

void fake_cq_push(struct fake_cq *cq, const struct ibv_wc *wc)
{
    if (cq->count == cq->cap) {
        /* CQ overrun: the hardware reports an error and stops. */
        cq->overrun = true;
        return;
    }
    cq->ring[(cq->head + cq->count) % cq->cap] = *wc;
    cq->count++;
    if (cq->armed && cq->chan) {
        cq->armed = false;
        if (!cq->queued_event) {
            cq->queued_event = true;
            cq->ev_next = NULL;
            if (cq->chan->evtail)
                cq->chan->evtail->ev_next = cq;
            else {
                cq->chan->evhead = cq;
                fake_chan_signal(cq->chan, true);
            }
            cq->chan->evtail = cq;
        }
    }
}

static void fake_cq_pump(struct fake_cq *cq)
{
    /* The QP list can change when a packet moves a QP to error; walk a
     * snapshot by index and re-check the bound. */
    for (size_t i = 0; i < cq->nqps; i++) {
        struct fake_qp *qp = cq->qps[i];
        if (qp->id)
            fake_id_pump(qp->id);
        fake_qp_tick(qp);
    }
}

static int fake_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
    struct fake_cq *cq = (struct fake_cq *)ibcq;
    if (!cq || n < 0 || (n > 0 && !wc))
        return -EINVAL;
    fake_cq_pump(cq);
    if (cq->overrun)
        return -EOVERFLOW;
    int got = 0;
    while (got < n && cq->count > 0) {
        wc[got++] = cq->ring[cq->head];
        cq->head = (cq->head + 1) % cq->cap;
        cq->count--;
    }
    return got;
}

static int fake_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
    struct fake_cq *cq = (struct fake_cq *)ibcq;
    if (!cq || !cq->chan)
        return EINVAL;
    cq->armed = true;
    return 0;
}

static int fake_get_cq_event(struct ibv_comp_channel *ibch,
                             struct ibv_cq **cq_p, void **ctx_p)
{
    struct fake_chan *ch = (struct fake_chan *)ibch;
    if (!ch || !cq_p || !ctx_p) {
        errno = EINVAL;
        return -1;
    }
    for (;;) {
        for (struct fake_cq *c = ch->cqs; c; c = c->chan_next)
            fake_cq_pump(c);
        struct fake_cq *cq = ch->evhead;
        if (cq) {
            ch->evhead = cq->ev_next;
            if (!ch->evhead) {
                ch->evtail = NULL;
                fake_chan_signal(ch, false);
            }
            cq->queued_event = false;
            cq->events++;
            *cq_p = &cq->cq;
            *ctx_p = cq->cq.cq_context;
            return 0;
        }
        int fl = fcntl(ch->ch.fd, F_GETFL);
        if (fl >= 0 && (fl & O_NONBLOCK)) {
            errno = EAGAIN;
            return -1;
        }
        /* Blocking channel: the fabric below only moves when we pump. */
        poll(NULL, 0, 1);
    }
}

static void fake_ack_cq_events(struct ibv_cq *ibcq, unsigned int n)
{
    struct fake_cq *cq = (struct fake_cq *)ibcq;
    if (cq)
        cq->acked += n;
}

/* ---- shared receive queues ---- */

static struct ibv_srq *fake_create_srq(struct ibv_pd *ibpd,
                                       struct ibv_srq_init_attr *attr)
{
    struct fake_pd *pd = (struct fake_pd *)ibpd;
    if (!pd || !attr || attr->attr.max_wr == 0 ||
        attr->attr.max_wr > FAKE_MAX_SRQ_WR || attr->attr.max_sge == 0 ||
        attr->attr.max_sge > FAKE_MAX_SGE) {
        errno = EINVAL;
        return NULL;
    }
    struct fake_srq *srq = calloc(1, sizeof(*srq));
    if (!srq)
        goto err_nomem;
    srq->ring = calloc(attr->attr.max_wr, sizeof(*srq->ring));
    if (!srq->ring)
        goto err_free_srq;
    srq->cap = (int)attr->attr.max_wr;
    srq->max_sge = (int)attr->attr.max_sge;
    srq->srq.context = ibpd->context;
    srq->srq.pd = ibpd;
    srq->srq.srq_context = attr->srq_context;
    pd->nobj++;
    return &srq->srq;

err_free_srq:
    free(srq);
err_nomem:
    errno = ENOMEM;
    return NULL;
}

static int fake_destroy_srq(struct ibv_srq *ibsrq)
{
    struct fake_srq *srq = (struct fake_srq *)ibsrq;
    if (!srq)
        return EINVAL;
    ((struct fake_pd *)ibsrq->pd)->nobj--;
    free(srq->ring);
    free(srq);
    return 0;
}

static int fake_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
                              struct ibv_recv_wr **bad_wr)
{
    struct fake_srq *srq = (struct fake_srq *)ibsrq;
    for (; wr; wr = wr->next) {
        int err = 0;
        if (wr->num_sge < 0 || wr->num_sge > srq->max_sge)
            err = EINVAL;
        else if (srq->count == srq->cap)
            err = ENOMEM;
        if (err) {
            if (bad_wr)
                *bad_wr = wr;
            return err;
        }
        struct fake_rwqe *w = &srq->ring[(srq->head + srq->count) % srq->cap];
        w->wr_id = wr->wr_id;
        w->num_sge = wr->num_sge;
        memcpy(w->sge, wr->sg_list, sizeof(w->sge[0]) * (size_t)wr->num_sge);
        srq->count++;
    }
    return 0;
}

bool fake_srq_take(struct fake_srq *srq, struct fake_rwqe *wqe)
{
    if (srq->count == 0)
        return false;
    *wqe = srq->ring[srq->head];
    srq->head = (srq->head + 1) % srq->cap;
    srq->count--;
    return true;
}

const struct vb_ops vb_fake_ops = {
    .name = "fake",
    .get_device_list = fake_get_device_list,
    .free_device_list = fake_free_device_list,
    .open_device = fake_open_device,
    .close_device = fake_close_device,
    .query_device = fake_query_device,
    .query_port = fake_query_port,
    .alloc_pd = fake_alloc_pd,
    .dealloc_pd = fake_dealloc_pd,
    .reg_mr = fake_reg_mr,
    .dereg_mr = fake_dereg_mr,
    .create_comp_channel = fake_create_comp_channel,
    .destroy_comp_channel = fake_destroy_comp_channel,
    .create_cq = fake_create_cq,
    .destroy_cq = fake_destroy_cq,
    .req_notify_cq = fake_req_notify_cq,
    .get_cq_event = fake_get_cq_event,
    .ack_cq_events = fake_ack_cq_events,
    .poll_cq = fake_poll_cq,
    .create_srq = fake_create_srq,
    .destroy_srq = fake_destroy_srq,
    .post_srq_recv = fake_post_srq_recv,
    .post_recv = fake_post_recv,
    .post_send = fake_post_send,
    .modify_qp = fake_modify_qp,
    .create_event_channel = fake_create_event_channel,
    .destroy_event_channel = fake_destroy_event_channel,
    .create_id = fake_create_id,
    .destroy_id = fake_destroy_id,
    .bind_addr = fake_bind_addr,
    .listen = fake_listen,
    .resolve_addr = fake_resolve_addr,
    .resolve_route = fake_resolve_route,
    .create_qp = fake_create_qp,
    .destroy_qp = fake_destroy_qp,
    .connect = fake_connect,
    .accept = fake_accept,
    .reject = fake_reject,
    .disconnect = fake_disconnect,
    .get_cm_event = fake_get_cm_event,
    .ack_cm_event = fake_ack_cm_event,
    .default_addr = fake_default_addr,
};
