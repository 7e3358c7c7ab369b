/*
 * The slow paths of cw_lock.h: sleeping on the lock word and on a
 * condition variable's sequence number with futex(2).
 */
#include "cw_lock.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Tries before a contended taker sleeps: a holder keeps the lock for a
 * few hundred nanoseconds on the request path, less than a futex round
 * trip through the kernel; on a machine with fewer cores than threads the
 * holder may not be running, so it is kept short. */
#define CW_LOCK_SPINS 64

static long cw_futex(atomic_uint *word, int op, unsigned val,
                     const struct timespec *abs, unsigned mask)
{
    return syscall(SYS_futex, (unsigned *)word, op, val, abs, NULL, mask);
}

static inline void cw_lock_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

#if CW_ASSERTS
uintptr_t cw_lock_self(void)
{
    static _Thread_local char self;

    return (uintptr_t)&self;
}
#endif

void cw_lock_take_slow(cw_lock_t *l)
{
    unsigned c;

    for (int i = 0; i < CW_LOCK_SPINS; i++) {
        c = 0;
        if (atomic_load_explicit(&l->word, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_weak_explicit(
                &l->word, &c, 1, memory_order_acquire, memory_order_relaxed))
            return;
        cw_lock_relax();
    }
    /* Mark it as having sleepers before sleeping: the holder's give then
     * wakes one.  Whoever takes it this way leaves it marked, which costs
     * at most one needless wake. */
    c = atomic_exchange_explicit(&l->word, 2, memory_order_acquire);
    while (c != 0) {
        (void)cw_futex(&l->word, FUTEX_WAIT_PRIVATE, 2, NULL, 0);
        c = atomic_exchange_explicit(&l->word, 2, memory_order_acquire);
    }
}

void cw_lock_wake(cw_lock_t *l)
{
    (void)cw_futex(&l->word, FUTEX_WAKE_PRIVATE, 1, NULL, 0);
}

void cw_cond_signal(cw_cond_t *c)
{
    atomic_fetch_add_explicit(&c->seq, 1, memory_order_relaxed);
    (void)cw_futex(&c->seq, FUTEX_WAKE_PRIVATE, 1, NULL, 0);
}

int cw_cond_timedwait(cw_cond_t *c, cw_lock_t *l, const struct timespec *abs)
{
    /* Read under the lock: a signal given after the lock is given back
     * changes it, and the wait then returns at once. */
    unsigned seq = atomic_load_explicit(&c->seq, memory_order_relaxed);
    int err = 0;

    cw_lock_give(l);
    /* FUTEX_WAIT_BITSET takes an absolute time on CLOCK_MONOTONIC. */
    if (cw_futex(&c->seq, FUTEX_WAIT_BITSET_PRIVATE, seq, abs,
                 FUTEX_BITSET_MATCH_ANY) != 0 &&
        errno == ETIMEDOUT)
        err = ETIMEDOUT;
    cw_lock_take(l);
    return err;
}
