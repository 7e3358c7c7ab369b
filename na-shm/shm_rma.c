/*
 * na-shm: memory handles and RMA.  A handle serializes the owner's pid, its
 * segments and access bits; put/get are one process_vm_writev/readv copy
 * per IOV_MAX pieces, done when posted (the completion is still reported
 * from progress).  Bounds and access are checked here, on the initiator,
 * since the kernel only checks that the pages exist.  A handle is not a
 * capability (the kernel lets any same-user process attach), so a gateway
 * may pass a restricted one on (mem_restrict, CW_NA_CAP_NODE_RMA).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "shm.h"

#define SHM_MEM_MAGIC 0x43575342u /* "CWSB" */
#define SHM_MEM_HDR   24u
#define SHM_MEM_SEG   16u
#ifndef IOV_MAX
#define IOV_MAX 1024
#endif

cw_status_t shm_mem_register(cw_na_class_t *cls,
                             const struct cw_na_segment *segs, size_t n,
                             uint32_t access, cw_na_mem_t **mem_p)
{
    if (!segs || n == 0 || !mem_p ||
        (access & ~(CW_NA_MEM_READ | CW_NA_MEM_WRITE)))
        return CW_INVALID_ARG;
    if (n > SHM_MAX_SEGMENTS) {
        SHM_ERR(cls, "%zu segments, at most %u per handle", n,
                SHM_MAX_SEGMENTS);
        return CW_RANGE;
    }
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if ((segs[i].len && !segs[i].base) ||
            (uintptr_t)segs[i].base > UINTPTR_MAX - segs[i].len ||
            segs[i].len > UINT64_MAX - total)
            return CW_INVALID_ARG;
        total += segs[i].len;
    }
    struct cw_na_mem *m = malloc(sizeof(*m) + n * sizeof(m->segs[0]));
    if (!m)
        return CW_NOMEM;
    m->remote = false;
    m->access = access;
    m->pid = getpid();
    m->total = total;
    m->nsegs = n;
    memcpy(m->segs, segs, n * sizeof(segs[0]));
    *mem_p = m;
    return CW_OK;
}

void shm_mem_release(cw_na_class_t *cls, cw_na_mem_t *mem)
{
    (void)cls;
    free(mem);
}

size_t shm_mem_serialize_size(cw_na_class_t *cls, cw_na_mem_t *mem)
{
    (void)cls;
    return SHM_MEM_HDR + mem->nsegs * SHM_MEM_SEG;
}

cw_status_t shm_mem_serialize(cw_na_class_t *cls, void *buf, size_t size,
                              cw_na_mem_t *mem)
{
    if (!buf || !mem || size < shm_mem_serialize_size(cls, mem))
        return CW_OVERFLOW;
    unsigned char *b = buf;
    uint32_t magic = SHM_MEM_MAGIC, pid = (uint32_t)mem->pid;
    uint32_t nsegs = (uint32_t)mem->nsegs;
    memcpy(b, &magic, 4);
    b[4] = SHM_VERSION;
    b[5] = (unsigned char)mem->access;
    b[6] = b[7] = 0;
    memcpy(b + 8, &pid, 4);
    memcpy(b + 12, &nsegs, 4);
    memcpy(b + 16, &mem->total, 8);
    for (size_t i = 0; i < mem->nsegs; i++) {
        uint64_t base = (uint64_t)(uintptr_t)mem->segs[i].base;
        uint64_t len = mem->segs[i].len;
        memcpy(b + SHM_MEM_HDR + i * SHM_MEM_SEG, &base, 8);
        memcpy(b + SHM_MEM_HDR + i * SHM_MEM_SEG + 8, &len, 8);
    }
    return CW_OK;
}

cw_status_t shm_mem_deserialize(cw_na_class_t *cls, const void *buf,
                                size_t size, cw_na_mem_t **mem_p)
{
    (void)cls;
    const unsigned char *b = buf;
    uint32_t magic, pid, nsegs;
    uint64_t total, sum = 0;
    if (!buf || !mem_p || size < SHM_MEM_HDR)
        return CW_PROTOCOL;
    memcpy(&magic, b, 4);
    memcpy(&pid, b + 8, 4);
    memcpy(&nsegs, b + 12, 4);
    memcpy(&total, b + 16, 8);
    if (magic != SHM_MEM_MAGIC || b[4] != SHM_VERSION ||
        (b[5] & ~(CW_NA_MEM_READ | CW_NA_MEM_WRITE)) || b[6] || b[7] ||
        pid == 0 || pid > INT_MAX || nsegs == 0 || nsegs > SHM_MAX_SEGMENTS ||
        size != SHM_MEM_HDR + (size_t)nsegs * SHM_MEM_SEG)
        return CW_PROTOCOL;
    struct cw_na_mem *m = malloc(sizeof(*m) + nsegs * sizeof(m->segs[0]));
    if (!m)
        return CW_NOMEM;
    for (uint32_t i = 0; i < nsegs; i++) {
        uint64_t base, len;
        memcpy(&base, b + SHM_MEM_HDR + i * SHM_MEM_SEG, 8);
        memcpy(&len, b + SHM_MEM_HDR + i * SHM_MEM_SEG + 8, 8);
        if (base > UINTPTR_MAX || len > SIZE_MAX || base > UINTPTR_MAX - len ||
            len > UINT64_MAX - sum || (len && !base)) {
            free(m);
            return CW_PROTOCOL;
        }
        sum += len;
        m->segs[i].base = (void *)(uintptr_t)base;
        m->segs[i].len = (size_t)len;
    }
    if (sum != total) {
        free(m);
        return CW_PROTOCOL;
    }
    m->remote = true;
    m->access = b[5];
    m->pid = (pid_t)pid;
    m->total = total;
    m->nsegs = nsegs;
    *mem_p = m;
    return CW_OK;
}

cw_status_t shm_mem_restrict(cw_na_class_t *cls, cw_na_mem_t *mem, size_t off,
                             size_t len, uint32_t access, cw_na_mem_t **mem_p)
{
    (void)cls;
    if (!mem || !mem->remote || len == 0 || !mem_p ||
        (access & ~(CW_NA_MEM_READ | CW_NA_MEM_WRITE)))
        return CW_INVALID_ARG;
    if (access & ~mem->access)
        return CW_PERMISSION;
    if (off > mem->total || len > mem->total - off)
        return CW_RANGE;
    size_t first = 0, n = 0;
    uint64_t skip = off;
    while (first < mem->nsegs && skip >= mem->segs[first].len) {
        skip -= mem->segs[first].len;
        first++;
    }
    /* Count the pieces the range touches, then copy them trimmed. */
    uint64_t left = len, s_off = skip;
    for (size_t i = first; i < mem->nsegs && left > 0; i++) {
        uint64_t take = mem->segs[i].len - s_off;
        if (take > left)
            take = left;
        if (take > 0)
            n++;
        left -= take;
        s_off = 0;
    }
    struct cw_na_mem *m = malloc(sizeof(*m) + n * sizeof(m->segs[0]));
    if (!m)
        return CW_NOMEM;
    left = len;
    s_off = skip;
    n = 0;
    for (size_t i = first; i < mem->nsegs && left > 0; i++) {
        uint64_t take = mem->segs[i].len - s_off;
        if (take > left)
            take = left;
        if (take > 0) {
            m->segs[n].base = (char *)mem->segs[i].base + s_off;
            m->segs[n].len = (size_t)take;
            n++;
        }
        left -= take;
        s_off = 0;
    }
    m->remote = true;
    m->access = access;
    m->pid = mem->pid;
    m->total = len;
    m->nsegs = n;
    *mem_p = m;
    return CW_OK;
}

/* Position inside a segment list. */
struct shm_cursor {
    const struct cw_na_mem *mem;
    size_t seg;
    size_t off;
};

static void shm_cursor_seek(struct shm_cursor *c, const struct cw_na_mem *m,
                            uint64_t off)
{
    c->mem = m;
    c->seg = 0;
    while (c->seg < m->nsegs && off >= m->segs[c->seg].len) {
        off -= m->segs[c->seg].len;
        c->seg++;
    }
    c->off = (size_t)off;
}

static size_t shm_cursor_avail(const struct shm_cursor *c)
{
    return c->mem->segs[c->seg].len - c->off;
}

static void shm_cursor_advance(struct shm_cursor *c, size_t n)
{
    c->off += n;
    while (c->seg < c->mem->nsegs && c->off >= c->mem->segs[c->seg].len &&
           (c->off > 0 || c->mem->segs[c->seg].len == 0)) {
        c->off -= c->mem->segs[c->seg].len;
        c->seg++;
    }
}

void shm_rma_eperm(struct cw_na_class *cls, const char *call, pid_t pid)
{
    int scope = -1;
    int fd = open("/proc/sys/kernel/yama/ptrace_scope", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        char c;
        if (read(fd, &c, 1) == 1)
            scope = c - '0';
        close(fd);
    }
    if (scope > 0)
        SHM_ERR_RL(cls,
                   "%s(pid %d) failed: %s: Yama ptrace_scope is %d; set "
                   "kernel.yama.ptrace_scope=0 (sysctl -w "
                   "kernel.yama.ptrace_scope=0), or give the process "
                   "CAP_SYS_PTRACE, and run both processes as the same user",
                   call, (int)pid, strerror(EPERM), scope);
    else
        SHM_ERR_RL(cls,
                   "%s(pid %d) failed: %s: cross-memory attach needs both "
                   "processes to run as the same user and be dumpable "
                   "(not setuid, no PR_SET_DUMPABLE=0), or CAP_SYS_PTRACE",
                   call, (int)pid, strerror(EPERM));
}

/* Up to @p maxv pieces of at most @p left bytes from the two cursors (a
 * piece ends where a segment ends on either side); @p bytes_p gets their
 * total.  Returns the number of pieces. */
static unsigned shm_iov_fill(struct shm_cursor *lc, struct shm_cursor *rc,
                             uint64_t left, struct iovec *liov,
                             struct iovec *riov, unsigned maxv,
                             uint64_t *bytes_p)
{
    uint64_t bytes = 0;
    unsigned cnt = 0;

    while (cnt < maxv && bytes < left) {
        size_t piece = shm_cursor_avail(lc);
        if (shm_cursor_avail(rc) < piece)
            piece = shm_cursor_avail(rc);
        if (piece > left - bytes)
            piece = (size_t)(left - bytes);
        if (piece == 0)
            break;
        liov[cnt].iov_base = (char *)lc->mem->segs[lc->seg].base + lc->off;
        riov[cnt].iov_base = (char *)rc->mem->segs[rc->seg].base + rc->off;
        liov[cnt].iov_len = riov[cnt].iov_len = piece;
        cnt++;
        bytes += piece;
        shm_cursor_advance(lc, piece);
        shm_cursor_advance(rc, piece);
    }
    *bytes_p = bytes;
    return cnt;
}

/* Copy @p len bytes between the two positions, IOV_MAX pieces a call. */
static cw_status_t shm_rma_copy(struct cw_na_class *cls, bool is_put,
                                const struct cw_na_mem *local, uint64_t loff,
                                const struct cw_na_mem *remote, uint64_t roff,
                                uint64_t len)
{
    struct iovec liov[256], riov[256];
    const int maxv = IOV_MAX < 256 ? IOV_MAX : 256;
    bool direct = !remote->remote; /* our own registered memory */
    struct shm_cursor lc, rc;
    uint64_t done = 0;
    while (done < len) {
        shm_cursor_seek(&lc, local, loff + done);
        shm_cursor_seek(&rc, remote, roff + done);
        uint64_t batch;
        int cnt = (int)shm_iov_fill(&lc, &rc, len - done, liov, riov,
                                    (unsigned)maxv, &batch);
        if (cnt == 0)
            return CW_INTERNAL; /* cannot happen: cursors skip empties */
        if (direct) {
            for (int i = 0; i < cnt; i++) {
                if (is_put)
                    memmove(riov[i].iov_base, liov[i].iov_base,
                            liov[i].iov_len);
                else
                    memmove(liov[i].iov_base, riov[i].iov_base,
                            liov[i].iov_len);
            }
            done += batch;
            continue;
        }
        ssize_t n =
            is_put ? process_vm_writev(remote->pid, liov, cnt, riov, cnt, 0)
                   : process_vm_readv(remote->pid, liov, cnt, riov, cnt, 0);
        if (n <= 0) {
            int err = n < 0 ? errno : EFAULT;
            const char *call =
                is_put ? "process_vm_writev" : "process_vm_readv";
            if (err == EINTR)
                continue;
            if (err == EPERM) {
                shm_rma_eperm(cls, call, remote->pid);
                return CW_PERMISSION;
            }
            if (err == ESRCH ||
                (err == EFAULT && shm_pid_exiting(remote->pid))) {
                SHM_ERR_RL(cls,
                           "%s(pid %d) failed: %s (the process is "
                           "gone)",
                           call, (int)remote->pid, strerror(err));
                return CW_DISCONNECTED;
            }
            SHM_ERR_RL(cls, "%s(pid %d, %llu bytes at offset %llu) failed: %s",
                       call, (int)remote->pid, (unsigned long long)batch,
                       (unsigned long long)(roff + done), strerror(err));
            return shm_errno_status(err);
        }
        done += (uint64_t)n; /* partial: resume from there */
    }
    return CW_OK;
}

/* Hand the whole copy to the engine, iovecs built now (a piece ends at a
 * segment boundary on either side, so there are at most nsegs + nsegs). */
static cw_status_t shm_rma_async(struct cw_na_class *cls, struct cw_na_op *op,
                                 bool is_put, const struct cw_na_mem *local,
                                 uint64_t loff, const struct cw_na_mem *remote,
                                 uint64_t roff, uint64_t len)
{
    size_t max = local->nsegs + remote->nsegs;
    struct iovec *liov = calloc(2 * max, sizeof(*liov)), *riov;
    struct shm_cursor lc, rc;
    unsigned cnt;
    uint64_t done;
    cw_status_t st;

    if (liov == NULL)
        return CW_NOMEM;
    riov = liov + max;
    shm_cursor_seek(&lc, local, loff);
    shm_cursor_seek(&rc, remote, roff);
    cnt = shm_iov_fill(&lc, &rc, len, liov, riov, (unsigned)max, &done);
    st = done == len
             ? shm_copy_post(cls, op, is_put, remote->pid, liov, riov, cnt)
             : CW_INTERNAL; /* cannot happen: bounds checked */
    free(liov);
    return st;
}

static cw_status_t shm_rma(cw_na_class_t *cls, bool is_put, cw_na_mem_t *local,
                           size_t local_off, cw_na_mem_t *remote,
                           size_t remote_off, size_t len,
                           cw_na_addr_t *peer_addr, cw_na_cb_t cb, void *arg,
                           cw_na_op_t **op_p)
{
    struct shm_peer *peer = shm_peer_of(peer_addr);
    if (!local || !remote || !peer || !cb || local->remote)
        return CW_INVALID_ARG;
    if (local_off > local->total || len > local->total - local_off ||
        remote_off > remote->total || len > remote->total - remote_off)
        return CW_RANGE;
    if (!(remote->access & (is_put ? CW_NA_MEM_WRITE : CW_NA_MEM_READ)))
        return CW_PERMISSION;
    if (remote->remote) {
        /* The handle must belong to the peer named: a forged pid would
         * otherwise let a message steer copies into a third process. */
        cw_status_t st = shm_peer_attach(cls, peer);
        if (st != CW_OK)
            return st;
        if (peer->pid != remote->pid) {
            SHM_ERR_RL(cls,
                       "memory handle of pid %d used with shm://%s "
                       "(pid %d)",
                       (int)remote->pid, peer->name, (int)peer->pid);
            return CW_BAD_HANDLE;
        }
    } else if (!peer->self) {
        return CW_INVALID_ARG; /* a local handle names our own memory */
    }
    struct cw_na_op *op =
        shm_op_new(cls, is_put ? CW_NA_OP_PUT : CW_NA_OP_GET, cb, arg);
    if (!op)
        return CW_NOMEM;
    shm_peer_ref(peer);
    op->peer = peer;
    if (remote->remote && shm_copy_wanted(cls, len) &&
        shm_rma_async(cls, op, is_put, local, local_off, remote, remote_off,
                      len) == CW_OK) {
        if (op_p)
            *op_p = op;
        return CW_OK; /* the engine completes it */
    }
    cw_status_t st =
        shm_rma_copy(cls, is_put, local, local_off, remote, remote_off, len);
    shm_op_complete(cls, op, st);
    if (op_p)
        *op_p = op;
    return CW_OK;
}

cw_status_t shm_put(cw_na_class_t *cls, cw_na_mem_t *local, size_t local_off,
                    cw_na_mem_t *remote, size_t remote_off, size_t len,
                    cw_na_addr_t *peer, cw_na_cb_t cb, void *arg,
                    cw_na_op_t **op_p)
{
    return shm_rma(cls, true, local, local_off, remote, remote_off, len, peer,
                   cb, arg, op_p);
}

cw_status_t shm_get(cw_na_class_t *cls, cw_na_mem_t *local, size_t local_off,
                    cw_na_mem_t *remote, size_t remote_off, size_t len,
                    cw_na_addr_t *peer, cw_na_cb_t cb, void *arg,
                    cw_na_op_t **op_p)
{
    return shm_rma(cls, false, local, local_off, remote, remote_off, len, peer,
                   cb, arg, op_p);
}
