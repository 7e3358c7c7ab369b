/*
 * na-ucx: the listener pauses near the descriptor limit.
 *
 * UCX 1.13 accepts connections on its own thread and does not survive
 * accept() failing for want of a descriptor: it logs the failure for every
 * attempt, then closes a descriptor that is not open and aborts the process
 * (async.c "Assertion handler->caller == ((pthread_t)-1)", or a SIGSEGV in
 * uct_tcp_sockcm_close_ep at exit; docs/reliability.md, "Floods").  A peer
 * that opens enough connections and keeps them could stop any process
 * that listens on ucx+tcp.
 *
 * So the class watches how many descriptors the process has left.  While
 * fewer than fd_reserve are (at most an eighth of the limit), it refuses
 * connection requests (UCX closes their sockets) and, at its next progress
 * call, closes its listener: what connects meanwhile waits in the kernel's
 * backlog or is refused there, and no accept() runs.  The connections made
 * stay.  Once twice fd_reserve are free it opens the listener again, on the
 * same address and port.  Counting takes one pass over /proc/self/fd, at most
 * every UCX_GUARD_FAST_NS while fewer than four reserves are left and every
 * UCX_GUARD_SLOW_NS otherwise; all classes of the process share the count.
 *
 * UCX also keeps at most UCX_ASYNC_MAX_EVENTS (1024) handlers per worker,
 * one per connection not yet handed to us, and 1.13 fails the 1025th in
 * its accept path by closing the new descriptor twice (tcp_listener.c,
 * err_delete_ep): the second close hits whatever took the number
 * meanwhile, and the process dies on a corrupted handler table
 * ("Assertion handler->id == id", async.c).  A peer holding 1 025
 * connections it never uses was enough.  Before the first worker is
 * created the limit is raised to the process's descriptor limit (at most
 * UCX_ASYNC_EVENTS_MAX), and the pause counts against the lower of the
 * two, so the listener closes before either is reached.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>

#include <ucs/config/global_opts.h>

#include "ucx.h"

#define UCX_GUARD_SLOW_NS 100000000ull /* 100 ms */
#define UCX_GUARD_FAST_NS 10000000ull  /* 10 ms */

/* Descriptors the process has open (-1: none left to count them with),
 * and when that was counted: shared by every class, any thread. */
static _Atomic long ucx_guard_open = 0;
static _Atomic uint64_t ucx_guard_at_ns = 0;

static long ucx_count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    long n = 0;

    if (d == NULL)
        return errno == EMFILE || errno == ENFILE ? -1 : 0;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the directory's own */
}

/* Are fewer than @p mult times the reserve descriptors left?  The reserve
 * is fd_reserve, at most an eighth of the limit.  Counted again if the
 * last count is older than @p max_age_ns. */
static bool ucx_fds_short(struct ucx_cls *cls, uint64_t now,
                          uint64_t max_age_ns, unsigned mult)
{
    struct rlimit rl;
    rlim_t reserve;
    long open;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return false;
    /* UCX's handler limit binds first where it is the lower. */
    if (rl.rlim_cur == RLIM_INFINITY ||
        rl.rlim_cur > ucs_global_opts.async_max_events)
        rl.rlim_cur = ucs_global_opts.async_max_events;
    reserve = cls->fd_reserve;
    if (reserve > rl.rlim_cur / 8)
        reserve = rl.rlim_cur / 8;
    reserve *= mult;
    if (now - atomic_load_explicit(&ucx_guard_at_ns, memory_order_relaxed) >=
        max_age_ns) {
        atomic_store_explicit(&ucx_guard_open, ucx_count_fds(),
                              memory_order_relaxed);
        atomic_store_explicit(&ucx_guard_at_ns, now, memory_order_relaxed);
    }
    open = atomic_load_explicit(&ucx_guard_open, memory_order_relaxed);
    return open < 0 || (rlim_t)open + reserve > rl.rlim_cur;
}

bool ucx_guard_refuse(struct ucx_cls *cls)
{
    if (cls->fd_reserve == 0)
        return false;
    if (ucx_fds_short(cls, cls->host->now_ns(), UCX_GUARD_FAST_NS, 1))
        cls->fds_low = true;
    if (cls->fds_low)
        UCX_WARN_RL(cls,
                    "connection refused: file descriptors short "
                    "(fd_reserve %zu, at most an eighth of the limit)",
                    cls->fd_reserve);
    return cls->fds_low;
}

void ucx_guard_tick(struct ucx_cls *cls, uint64_t now)
{
    if (!cls->listening || cls->fd_reserve == 0)
        return;
    if (now < cls->guard_next_ns)
        return;
    if (cls->listener != NULL) {
        cls->fds_low = ucx_fds_short(cls, now, UCX_GUARD_FAST_NS, 1);
        if (cls->fds_low) {
            ucp_listener_destroy(cls->listener);
            cls->listener = NULL;
            cls->guard_paused++;
            UCX_WARN_RL(cls,
                        "file descriptors short (fd_reserve %zu, at most an "
                        "eighth of the limit): not accepting connections "
                        "until twice that are free (%llu pauses so far)",
                        cls->fd_reserve, (unsigned long long)cls->guard_paused);
        }
    } else if (!ucx_fds_short(cls, now, UCX_GUARD_FAST_NS, 2)) {
        ucs_status_t st = ucx_listener_open(cls);

        if (st == UCS_OK) {
            cls->fds_low = false;
            UCX_INFO_RL(cls, "accepting connections again");
        } else {
            cls->listener = NULL;
            UCX_ERR_RL(cls, "cannot listen again: %s", ucs_status_string(st));
        }
    }
    /* Within four reserves of the limit, look often: UCX accepts on its
     * own thread meanwhile. */
    cls->guard_next_ns =
        now + (cls->fds_low || cls->listener == NULL ||
                       ucx_fds_short(cls, now, UCX_GUARD_FAST_NS, 4)
                   ? UCX_GUARD_FAST_NS
                   : UCX_GUARD_SLOW_NS);
}

/* UCX keeps a queue of that many 8-byte entries per worker, all written
 * at once: 512 KiB at this cap. */
#define UCX_ASYNC_EVENTS_MAX (1u << 16)

static void ucx_raise_async_limit(void)
{
    struct rlimit rl;
    rlim_t want = UCX_ASYNC_EVENTS_MAX;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < want)
        want = rl.rlim_cur;
    if (ucs_global_opts.async_max_events < want)
        ucs_global_opts.async_max_events = (unsigned)want;
}

void ucx_guard_init(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;

    pthread_once(&once, ucx_raise_async_limit);
}
