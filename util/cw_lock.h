/*
 * The context lock: a futex word taken with one compare-and-swap and given
 * back with one exchange when nobody waits, and a condition variable over
 * it for the one thread that sleeps in cw_trigger().
 *
 * Why not a pthread mutex: every call on the request path takes a
 * context's lock once or more (a gateway's forward, about eight times),
 * almost always uncontended, and glibc's mutex costs about 55 instructions
 * a pair there (type dispatch, owner and user counts) against about ten for
 * this one (measured with callgrind: tests/bench/gw-instr.sh).  The word
 * follows "Futexes Are Tricky" (Drepper), mutex 3: 0 free, 1 taken,
 * 2 taken with sleepers; a contended taker spins briefly before it sleeps.
 * Acquire and release orders make it visible to ThreadSanitizer.
 *
 * Where CW_ASSERT is on it keeps its owner, so that taking it twice from a
 * thread or giving back one the thread does not hold fails an assertion
 * (as cw_mutex.h's error-checking mutexes do) and CW_LOCK_ASSERT_HELD says
 * in code what "called with the lock held" means.
 */
#ifndef CW_LOCK_H
#define CW_LOCK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "cw_assert.h"

/** A lock; zero-filled or cw_lock_init()ed is free. */
typedef struct {
    atomic_uint word;
#if CW_ASSERTS
    atomic_uintptr_t owner;
#endif
} cw_lock_t;

/** A condition variable used with one cw_lock_t. */
typedef struct {
    atomic_uint seq;
} cw_cond_t;

/** The taker's slow path: spin, then sleep on the word (util/cw_lock.c). */
void cw_lock_take_slow(cw_lock_t *l);
/** Wake one sleeper of a word set to 2 (util/cw_lock.c). */
void cw_lock_wake(cw_lock_t *l);

#if CW_ASSERTS
/** An identifier of the calling thread: the address of a thread-local. */
uintptr_t cw_lock_self(void);
#endif

static inline void cw_lock_init(cw_lock_t *l)
{
    atomic_init(&l->word, 0);
#if CW_ASSERTS
    atomic_init(&l->owner, 0);
#endif
}

/** Whether the calling thread holds @p l.  Only for assertions. */
static inline bool cw_lock_held(const cw_lock_t *l)
{
#if CW_ASSERTS
    return atomic_load_explicit(&((cw_lock_t *)l)->owner,
                                memory_order_relaxed) == cw_lock_self();
#else
    (void)l;
    return true;
#endif
}

/** Take @p l; a thread that already holds it fails an assertion. */
static inline void cw_lock_take(cw_lock_t *l)
{
    unsigned free_word = 0;

    CW_ASSERT(!cw_lock_held(l));
    if (!atomic_compare_exchange_strong_explicit(&l->word, &free_word, 1,
                                                 memory_order_acquire,
                                                 memory_order_relaxed))
        cw_lock_take_slow(l);
#if CW_ASSERTS
    atomic_store_explicit(&l->owner, cw_lock_self(), memory_order_relaxed);
#endif
}

/** Give back @p l; a thread that does not hold it fails an assertion. */
static inline void cw_lock_give(cw_lock_t *l)
{
    CW_ASSERT(cw_lock_held(l));
#if CW_ASSERTS
    atomic_store_explicit(&l->owner, 0, memory_order_relaxed);
#endif
    if (atomic_exchange_explicit(&l->word, 0, memory_order_release) == 2)
        cw_lock_wake(l);
}

static inline void cw_cond_init(cw_cond_t *c)
{
    atomic_init(&c->seq, 0);
}

/** Wake one thread waiting on @p c (call with its lock held). */
void cw_cond_signal(cw_cond_t *c);

/** Give back @p l, wait on @p c until signalled or CLOCK_MONOTONIC time
 *  @p abs, take @p l again.  Returns 0 or ETIMEDOUT; like a pthread
 *  condition variable, it may return 0 without a signal (check the
 *  state). */
int cw_cond_timedwait(cw_cond_t *c, cw_lock_t *l, const struct timespec *abs);

/** The calling thread holds @p l. */
#define CW_LOCK_ASSERT_HELD(l) CW_ASSERT(cw_lock_held(l))
/** The calling thread does not hold @p l. */
#define CW_LOCK_ASSERT_FREE(l) CW_ASSERT(!cw_lock_held(l))

#endif /* CW_LOCK_H */
