/*
 * Progress engine (design §6): poll every network, spin briefly, then block
 * in epoll across their wait fds for a bounded slice and poll again.  A wait
 * fd is never trusted alone, and busy mode never blocks.
 */
#include "rpc_priv.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

/* Poll this long before blocking: a wake-up from epoll costs 25-50 us on a
 * VM, and an RPC through one gateway over TCP takes about 40 us; a shorter
 * window puts the caller to sleep just before its answer arrives.  A
 * context whose last wait ended by a completion after it had blocked, at
 * most CW_SPIN_MAX_NS in, spins a quarter longer than that wait next time
 * (a 1 MiB shm pull answers in about 150-200 us: each call slept, and the
 * wake-up cost it a third of its rate); a longer wait, or none, brings it
 * back to CW_SPIN_NS. */
#define CW_SPIN_NS          50000ull
#define CW_SPIN_MAX_NS      1000000ull
#define CW_YIELD_AFTER_NS   1000ull /* then yield between polls */
#define CW_SLICE_MS         2       /* longest single block, work in flight */
#define CW_IDLE_SLICE_MS    100     /* ... and with nothing in flight */
#define CW_IDLE_AFTER_NS    250000000ull /* for this long after any activity */
#define CW_NOFD_SLEEP_NS    50000L       /* networks without a usable wait fd */
#define CW_TIMER_PERIOD_NS  1000000ull
#define CW_IDLE_POLLS       64 /* empty cw_progress(ctx, 0) calls, then yield */
#define CW_IDLE_YIELD_EVERY 16 /* ... on one call in this many */
#define CW_UNSAFE_YIELDS    64 /* then sleep: the plugin may never be safe */

/* Consecutive empty non-blocking calls on this thread. */
static CW_TLS unsigned idle_polls;

/* One non-blocking pass; returns how many completions ran. */
static unsigned progress_poll(cw_context_t *ctx)
{
    unsigned total = 0;
    uint64_t now;

    cw_clock_pass_stale(); /* what this poll finds is stamped afresh */
    cw_lock_take(&ctx->lock);
    for (unsigned i = 0; i < ctx->nnets; i++) {
        unsigned c = 0;
        cw_status_t st = cw_na_progress(ctx->nets[i]->na, 0, &c);
        if (st != CW_OK && st != CW_TIMEOUT && st != CW_AGAIN)
            CW_LOG_RL(CW_LOG_WARN, "core", "progress on %s failed: %s",
                      ctx->nets[i]->uri, cw_status_str(st));
        total += c;
    }
    /* Reading the clock costs as much as an idle poll: look at deadlines
     * on every 16th pass only (they are 1 ms-granular anyway). */
    if ((++ctx->polls & 15u) == 0) {
        now = cw_now_ns();
        if (now >= ctx->next_timer_ns) {
            cw_rpc_timers(ctx, now);
            cw_net_urecv_retry(ctx);
            ctx->next_timer_ns = now + CW_TIMER_PERIOD_NS;
        }
    }
    if (total > 0)
        ctx->active_ns = cw_now_pass_ns();
    if (ctx->cq_head != NULL)
        total++;
    cw_lock_give(&ctx->lock);
    return total;
}

/* Block for at most @p ms on the wait fds, if every network says it is
 * safe; otherwise a short sleep.  Returns after any event or the slice;
 * true if a descriptor of the application's (cw_context_watch_fd) is
 * readable.  The slice is short while anything is in flight (a provider
 * may progress it without signalling its fd) and for a while after any
 * activity (a provider's own protocol, such as rxm's connection set-up,
 * signals its fd once and then needs polls), and long once nothing has
 * happened for CW_IDLE_AFTER_NS: then only a new message or connection
 * can arrive, which every wait fd signals, and an idle process wakes ten
 * times a second instead of five hundred. */
static bool progress_block(cw_context_t *ctx, unsigned ms, unsigned *unsafe)
{
    struct epoll_event evs[CW_MAX_NETS + CW_MAX_WATCH + 1];
    bool safe = true, nofd = false, watched = false, netev = false;
    bool streaming = false;
    unsigned cap;
    int n;

    cw_lock_take(&ctx->lock);
    if (ctx->cq_head != NULL) {
        cw_lock_give(&ctx->lock);
        return false;
    }
    cap = cw_ctx_busy(ctx) || !nau_list_empty(&ctx->incoming) ||
                  cw_now_ns() - ctx->active_ns < CW_IDLE_AFTER_NS
              ? CW_SLICE_MS
              : CW_IDLE_SLICE_MS;
    if (ms > cap)
        ms = cap;
    for (unsigned i = 0; i < ctx->nnets && safe; i++) {
        cw_network_t *net = ctx->nets[i];
        nofd = net->wait_fd < 0;
        safe = !nofd && cw_na_safe_to_sleep(net->na);
    }
    /* Unsafe while data is moving on any network (ops->streaming): keep
     * polling however long that lasts, never the bounded sleeps. */
    for (unsigned i = 0; !safe && !nofd && !streaming && i < ctx->nnets; i++)
        streaming = cw_na_streaming(ctx->nets[i]->na);
    atomic_fetch_add(&ctx->sleepers, 1);
    cw_lock_give(&ctx->lock);
    /* After announcing the sleep: an interrupt either sees the sleeper
     * (and writes the eventfd) or is seen here. */
    if (atomic_load(&ctx->interrupted)) {
        atomic_fetch_sub(&ctx->sleepers, 1);
        return false;
    }
    if (!safe && !streaming)
        (*unsafe)++;
    else
        *unsafe = 0;
    if (safe) {
        n = epoll_wait(ctx->epfd, evs, (int)(sizeof(evs) / sizeof(evs[0])),
                       (int)ms);
        if (n < 0 && errno != EINTR)
            CW_LOG_RL(CW_LOG_WARN, "core", "epoll_wait() failed: %s",
                      strerror(errno));
        for (int i = 0; i < n; i++) {
            if (evs[i].data.u64 & CW_WATCH_TAG) {
                watched = true;
            } else if (evs[i].data.fd == ctx->evfd) {
                uint64_t v;
                (void)!read(ctx->evfd, &v, sizeof(v));
            } else {
                /* A network's fd, whether or not a completion follows. */
                netev = true;
            }
        }
    } else if (!nofd && *unsafe < CW_UNSAFE_YIELDS) {
        /* Work the plugin must retry (backlog, completions): poll again
         * soon, but let others run first. */
        sched_yield();
    } else {
        /* No wait object, or one that is never safe: bounded sleeps
         * between polls. */
        struct timespec ts = {0, CW_NOFD_SLEEP_NS};
        nanosleep(&ts, NULL);
    }
    atomic_fetch_sub(&ctx->sleepers, 1);
    if (netev) {
        cw_lock_take(&ctx->lock);
        ctx->active_ns = cw_now_ns();
        cw_lock_give(&ctx->lock);
    }
    return watched;
}

cw_status_t cw_context_interrupt(cw_context_t *ctx)
{
    uint64_t one = 1;

    if (ctx == NULL)
        return CW_INVALID_ARG;
    atomic_store(&ctx->interrupted, true);
    if (atomic_load(&ctx->sleepers) > 0)
        (void)!write(ctx->evfd, &one, sizeof(one));
    return CW_OK;
}

cw_status_t cw_context_watch_fd(cw_context_t *ctx, int fd)
{
    struct epoll_event ev = {.events = EPOLLIN};
    cw_status_t st = CW_OK;

    if (ctx == NULL || fd < 0)
        return CW_INVALID_ARG;
    cw_lock_take(&ctx->lock);
    for (unsigned i = 0; i < ctx->nwatch; i++)
        if (ctx->watch[i] == fd)
            st = CW_EXIST;
    if (st == CW_OK && ctx->nwatch == CW_MAX_WATCH)
        st = CW_BUSY;
    ev.data.u64 = CW_WATCH_TAG | (uint32_t)fd;
    if (st == CW_OK && epoll_ctl(ctx->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        int err = errno;
        /* EEXIST: one of the networks' own wait fds. */
        st = err == EEXIST                    ? CW_EXIST
             : err == ENOMEM || err == ENOSPC ? CW_NOMEM
                                              : CW_INVALID_ARG;
        CW_WARN("core", "cannot watch fd %d: %s", fd, strerror(err));
    }
    if (st == CW_OK)
        ctx->watch[ctx->nwatch++] = fd;
    cw_lock_give(&ctx->lock);
    return st;
}

cw_status_t cw_context_unwatch_fd(cw_context_t *ctx, int fd)
{
    cw_status_t st = CW_NOENT;

    if (ctx == NULL || fd < 0)
        return CW_INVALID_ARG;
    cw_lock_take(&ctx->lock);
    for (unsigned i = 0; i < ctx->nwatch; i++) {
        if (ctx->watch[i] != fd)
            continue;
        /* A descriptor closed before this call has left the epoll set
         * already (ENOENT/EBADF): it is no longer watched either way. */
        (void)epoll_ctl(ctx->epfd, EPOLL_CTL_DEL, fd, NULL);
        ctx->watch[i] = ctx->watch[--ctx->nwatch];
        st = CW_OK;
        break;
    }
    cw_lock_give(&ctx->lock);
    return st;
}

/* Consume an interrupt (cw_context_interrupt); true if there was one. */
static inline bool progress_interrupted(cw_context_t *ctx)
{
    return atomic_load_explicit(&ctx->interrupted, memory_order_relaxed) &&
           atomic_exchange(&ctx->interrupted, false);
}

uint64_t cw_progress_next_spin(uint64_t waited)
{
    uint64_t spin = CW_SPIN_NS;

    if (waited <= CW_SPIN_MAX_NS) {
        spin = waited + waited / 4;
        if (spin < CW_SPIN_NS)
            spin = CW_SPIN_NS;
        if (spin > CW_SPIN_MAX_NS)
            spin = CW_SPIN_MAX_NS;
    }
    return spin;
}

static void progress_learn(cw_context_t *ctx, uint64_t waited)
{
    atomic_store_explicit(&ctx->spin_ns, cw_progress_next_spin(waited),
                          memory_order_relaxed);
}

cw_status_t cw_progress(cw_context_t *ctx, unsigned timeout_ms)
{
    uint64_t start, deadline, now, spin;
    unsigned unsafe = 0;
    bool busy, blocked = false;

    if (ctx == NULL)
        return CW_INVALID_ARG;
    if (progress_poll(ctx) > 0) {
        idle_polls = 0;
        return CW_OK;
    }
    if (timeout_ms == 0) {
        /* A caller's own busy loop: after a run of empty polls, give the
         * core away now and then (the peer it waits for may be queued on
         * it).  A yield is a system call, a few hundred ns when nobody
         * else wants the core, and an answer that lands during one waits
         * for its end: yielding on every empty call cost a busy 64 B shm
         * round trip 1.71-2.00 us against 1.27-1.57 with one in 16
         * (cw-perf lat --busy, 4 alternated rounds). */
        if (++idle_polls > CW_IDLE_POLLS &&
            idle_polls % CW_IDLE_YIELD_EVERY == 0)
            sched_yield();
        return CW_TIMEOUT;
    }
    if (progress_interrupted(ctx))
        return CW_OK;
    busy = (ctx->opts.flags & CW_CTX_BUSY) != 0;
    spin = atomic_load_explicit(&ctx->spin_ns, memory_order_relaxed);
    if (spin == 0)
        spin = CW_SPIN_NS;
    start = cw_now_ns();
    deadline = start + (uint64_t)timeout_ms * 1000000ull;
    for (;;) {
        if (progress_poll(ctx) > 0) {
            idle_polls = 0;
            if (blocked)
                progress_learn(ctx, cw_now_ns() - start);
            return CW_OK;
        }
        if (progress_interrupted(ctx))
            return CW_OK;
        now = cw_now_ns();
        if (now >= deadline) {
            if (blocked)
                progress_learn(ctx, UINT64_MAX);
            return CW_TIMEOUT;
        }
        /* Past the first microseconds, yield between polls: on an
         * oversubscribed core the peer that must answer may be queued
         * behind this spinner, and would wait for its time slice. */
        if (busy || now - start < spin) {
            if (now - start >= CW_YIELD_AFTER_NS)
                sched_yield();
            continue;
        }
        uint64_t left_ms = (deadline - now + 999999ull) / 1000000ull;
        blocked = true;
        if (progress_block(ctx,
                           left_ms < CW_IDLE_SLICE_MS ? (unsigned)left_ms
                                                      : CW_IDLE_SLICE_MS,
                           &unsafe))
            return CW_OK;
    }
}
