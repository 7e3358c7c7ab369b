/* na-util: the process's hash seed. */
#include "nau_hash.h"

#include <stdatomic.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static _Atomic uint64_t nau_seed_v; /* 0: not drawn yet */

uint64_t nau_seed(void)
{
    uint64_t s = atomic_load(&nau_seed_v), fresh = 0;
    struct timespec ts;

    if (s != 0)
        return s;
    if (getrandom(&fresh, sizeof(fresh), GRND_NONBLOCK) !=
        (ssize_t)sizeof(fresh)) {
        /* Early in boot: weaker, but still nothing a peer can read. */
        clock_gettime(CLOCK_MONOTONIC, &ts);
        fresh = nau_mix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^
                          ((uint64_t)getpid() << 48) ^ (uintptr_t)&fresh);
    }
    fresh |= 1;
    /* Threads racing here all return the first seed stored. */
    return atomic_compare_exchange_strong(&nau_seed_v, &s, fresh) ? fresh : s;
}
