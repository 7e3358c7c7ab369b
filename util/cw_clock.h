/*
 * The pass clock's state, for the library's own code (the API is in
 * causeway/log.h): a blocking wait inside the library marks the pass's
 * reading stale, so that a pass never carries a time from before a wait.
 */
#ifndef CW_CLOCK_H
#define CW_CLOCK_H

#include <stdint.h>

#define CW_TLS_IE _Thread_local __attribute__((tls_model("initial-exec")))

/** This thread's pass: how many begins are open, and the reading taken in
 *  it (0: none yet). */
struct cw_pass_clock {
    uint64_t ns;
    unsigned open;
};

extern CW_TLS_IE struct cw_pass_clock cw_pass_clock_
    __attribute__((visibility("hidden")));

/** The next cw_now_pass_ns() reads the clock again. */
static inline void cw_clock_pass_stale(void)
{
    cw_pass_clock_.ns = 0;
}

#endif
