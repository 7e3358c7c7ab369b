/*
 * Mutexes whose use is checked where CW_ASSERT is on (cw_assert.h): there
 * they are error-checking, so that locking one twice from a thread or
 * unlocking one that thread does not hold fails an assertion instead of
 * deadlocking or corrupting, and CW_ASSERT_LOCKED(m) says in code what a
 * comment "called with the lock held" used to.  Release builds get plain
 * mutexes and no checks.
 *
 * The owner check asks the mutex itself: pthread_mutex_timedlock() on an
 * error-checking mutex fails with EDEADLK, without waiting, when the caller
 * holds it; with a deadline already past it fails with ETIMEDOUT when
 * another thread holds it, and takes it (then gives it back) when nobody
 * does.  Any code may therefore keep calling pthread_mutex_lock() on these
 * mutexes; cw_mutex_lock() adds the check of its result.
 */
#ifndef CW_MUTEX_H
#define CW_MUTEX_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#include "cw_assert.h"

/** Static initializer: error-checking where asserts are on. */
#if CW_ASSERTS
#define CW_MUTEX_INITIALIZER PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP
#else
#define CW_MUTEX_INITIALIZER PTHREAD_MUTEX_INITIALIZER
#endif

/** Initialize @p m: error-checking where asserts are on, else the default
 *  kind.  Never recursive. */
static inline void cw_mutex_init(pthread_mutex_t *m)
{
#if CW_ASSERTS
    pthread_mutexattr_t ma;

    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK);
    pthread_mutex_init(m, &ma);
    pthread_mutexattr_destroy(&ma);
#else
    pthread_mutex_init(m, NULL);
#endif
}

/** Lock @p m; a thread that already holds it fails an assertion. */
static inline void cw_mutex_lock(pthread_mutex_t *m)
{
    int rc = pthread_mutex_lock(m);

    CW_ASSERT(rc == 0);
    (void)rc;
}

/** Unlock @p m; a thread that does not hold it fails an assertion. */
static inline void cw_mutex_unlock(pthread_mutex_t *m)
{
    int rc = pthread_mutex_unlock(m);

    CW_ASSERT(rc == 0);
    (void)rc;
}

/** Whether the calling thread holds @p m, which must be error-checking
 *  (cw_mutex_init or CW_MUTEX_INITIALIZER where asserts are on).  Only for
 *  assertions: it may take and give back @p m when nobody holds it, which
 *  is why a const mutex (one in a const object) is accepted. */
static inline bool cw_mutex_held(const pthread_mutex_t *m)
{
    static const struct timespec past = {0, 0};
    pthread_mutex_t *mm = (pthread_mutex_t *)m;
    int rc = pthread_mutex_timedlock(mm, &past);

    if (rc == 0) {
        pthread_mutex_unlock(mm);
        return false;
    }
    return rc == EDEADLK;
}

/** The calling thread holds @p m. */
#define CW_ASSERT_LOCKED(m) CW_ASSERT(cw_mutex_held(m))
/** The calling thread does not hold @p m. */
#define CW_ASSERT_UNLOCKED(m) CW_ASSERT(!cw_mutex_held(m))

#endif /* CW_MUTEX_H */
