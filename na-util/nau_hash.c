/* na-util: the process's hash seed. */
#include "nau_hash.h"

#include <stdatomic.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static _Atomic uint64_t nau_seed_v;

uint64_t nau_seed(void)
{
    uint64_t s = atomic_load_explicit(&nau_seed_v, memory_order_acquire);
    uint64_t fresh = 0;
    struct timespec ts;

    if (s != 0)
        return s;
    if (getrandom(&fresh, sizeof(fresh), GRND_NONBLOCK) !=
        (ssize_t)sizeof(fresh)) {
        /* Early in boot, or a kernel without getrandom(): weaker, but
         * still nothing a remote peer can read. */
        clock_gettime(CLOCK_MONOTONIC, &ts);
        fresh =
            nau_mix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^
                      ((uint64_t)getpid() << 48) ^ (uint64_t)(uintptr_t)&fresh);
    }
    fresh |= 1; /* 0 means "not drawn yet" */
    /* Threads racing here all return the first seed stored. */
    if (!atomic_compare_exchange_strong_explicit(
            &nau_seed_v, &s, fresh, memory_order_acq_rel, memory_order_acquire))
        return s;
    return fresh;
}
