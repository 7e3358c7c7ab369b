/*
 * Causeway logging.  The level is checked before anything is formatted;
 * the call site is captured; errno is preserved across a log call.
 * The threshold comes from cw_log_set_level() or CAUSEWAY_LOG_LEVEL
 * (error|warn|info|debug|trace, default warn), read by cw_log_init().
 */
#ifndef CAUSEWAY_LOG_H
#define CAUSEWAY_LOG_H

#include <stdarg.h>
#include <stdint.h>
#ifndef __cplusplus
#include <stdatomic.h> /* CW_LOG_RL */
#endif

#include <causeway/na_plugin.h> /* enum cw_log_level */

#ifdef __cplusplus
extern "C" {
#endif

/** Current threshold (messages at or below it are printed). */
CW_PUBLIC extern volatile int cw_log_level_;

/** Read CAUSEWAY_LOG_LEVEL once; later calls do nothing. */
CW_PUBLIC void cw_log_init(void);
/** Set the threshold. */
CW_PUBLIC void cw_log_set_level(int level);
/** Parse "error", "warn", "info", "debug", "trace", "none"; -1 if bad. */
CW_PUBLIC int cw_log_level_parse(const char *s);
/** Name of a level. */
CW_PUBLIC const char *cw_log_level_name(int level);

/** Write one message to stderr, or to the handler set by
 *  cw_log_set_handler (used by the macros below).  A NULL
 *  subsystem, file, function or format is written as a placeholder. */
CW_PUBLIC void cw_log_write(int level, const char *subsys, const char *file,
                            int line, const char *func, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 6, 7)))
#endif
    ;
CW_PUBLIC void cw_log_vwrite(int level, const char *subsys, const char *file,
                             int line, const char *func, const char *fmt,
                             va_list ap);

/**
 * Receives one message instead of stderr (cw_log_set_handler).
 * @param[in] arg     the @p arg given to cw_log_set_handler.
 * @param[in] level   CW_LOG_ERROR .. CW_LOG_TRACE (enum cw_log_level).
 * @param[in] subsys  subsystem ("rpc", "ofi", "gateway", ...), never NULL.
 * @param[in] file    base name of the call site's source file, never NULL.
 * @param[in] line    its line.
 * @param[in] func    its function, never NULL.
 * @param[in] msg     the formatted message, without level, time or
 *                    newline; valid only during the call.
 * Called on whichever thread logs, one call at a time (the calls are
 * serialized, as lines written to stderr are); errno is restored after it
 * returns.  A handler must not call cw_log_set_handler;
 * a message it logs itself (through a Causeway call) goes to stderr.
 */
typedef void (*cw_log_handler_t)(void *arg, int level, const char *subsys,
                                 const char *file, int line, const char *func,
                                 const char *msg);

/**
 * Route Causeway's log messages (the library's, its plugins', the
 * gateway's) to @p fn instead of stderr; NULL restores stderr.  The level
 * threshold still applies first.  Thread-safe: once this returns no thread
 * is inside the previous handler, and it is not called again, so the
 * caller may free what its @p arg points to.
 * @param[in] fn   handler, or NULL for stderr.
 * @param[in] arg  passed to every call of @p fn.
 */
CW_PUBLIC void cw_log_set_handler(cw_log_handler_t fn, void *arg);

/** Monotonic clock in nanoseconds. */
CW_PUBLIC uint64_t cw_now_ns(void);

/**
 * The pass clock, for a loop whose every pass does a bounded amount of
 * work that never blocks: a gateway's worker, a server that answers from
 * its callbacks.  Between cw_clock_pass_begin() and cw_clock_pass_end() on
 * a thread, cw_now_pass_ns() reads the monotonic clock once and returns
 * that reading until the pass ends, the library polls its networks again
 * (each cw_progress() poll takes a new one) or it waits (a blocking
 * cw_trigger()).  The library stamps a request's arrival, its deadline
 * checks and a forward's budget with it, so a pass over many requests
 * reads the clock about once instead of several times each.  Outside a
 * pass it is cw_now_ns(), so a program that never begins one sees no
 * change.  Do not begin a pass around a callback that blocks: the time it
 * reads after the block would be the time before it.  Passes nest (only
 * the outermost end closes them), and each begin or end takes a new
 * reading on first use.
 */
CW_PUBLIC void cw_clock_pass_begin(void);
/** Ends the pass cw_clock_pass_begin() opened on this thread. */
CW_PUBLIC void cw_clock_pass_end(void);
/** This thread's pass reading, or cw_now_ns() outside a pass. */
CW_PUBLIC uint64_t cw_now_pass_ns(void);

#define CW_LOG(level, subsys, ...)                                             \
    do {                                                                       \
        if (cw_log_level_ >= (level))                                          \
            cw_log_write((level), (subsys), __FILE__, __LINE__, __func__,      \
                         __VA_ARGS__);                                         \
    } while (0)

#define CW_ERROR(subsys, ...) CW_LOG(CW_LOG_ERROR, subsys, __VA_ARGS__)
#define CW_WARN(subsys, ...)  CW_LOG(CW_LOG_WARN, subsys, __VA_ARGS__)
#define CW_INFO(subsys, ...)  CW_LOG(CW_LOG_INFO, subsys, __VA_ARGS__)
#define CW_DEBUG(subsys, ...) CW_LOG(CW_LOG_DEBUG, subsys, __VA_ARGS__)
#define CW_TRACE(subsys, ...) CW_LOG(CW_LOG_TRACE, subsys, __VA_ARGS__)

/**
 * Rate-limited variant for the data path: at most one message per second
 * per call site; the next printed message says how many were suppressed.
 * The per-site state is atomic: a site may run on several threads (one
 * context per thread, a gateway's shards) with no lock in common.
 */
#define CW_LOG_RL(level, subsys, ...)                                          \
    do {                                                                       \
        static _Atomic uint64_t cw_rl_next_;                                   \
        static _Atomic unsigned cw_rl_dropped_;                                \
        if (cw_log_level_ >= (level)) {                                        \
            uint64_t cw_rl_now_ = cw_now_ns();                                 \
            uint64_t cw_rl_at_ =                                               \
                atomic_load_explicit(&cw_rl_next_, memory_order_relaxed);      \
            if (cw_rl_now_ >= cw_rl_at_ &&                                     \
                atomic_compare_exchange_strong_explicit(                       \
                    &cw_rl_next_, &cw_rl_at_, cw_rl_now_ + 1000000000ull,      \
                    memory_order_relaxed, memory_order_relaxed)) {             \
                unsigned cw_rl_n_ = atomic_exchange_explicit(                  \
                    &cw_rl_dropped_, 0, memory_order_relaxed);                 \
                if (cw_rl_n_)                                                  \
                    cw_log_write((level), (subsys), __FILE__, __LINE__,        \
                                 __func__, "(%u similar messages suppressed)", \
                                 cw_rl_n_);                                    \
                cw_log_write((level), (subsys), __FILE__, __LINE__, __func__,  \
                             __VA_ARGS__);                                     \
            } else {                                                           \
                atomic_fetch_add_explicit(&cw_rl_dropped_, 1,                  \
                                          memory_order_relaxed);               \
            }                                                                  \
        }                                                                      \
    } while (0)

#ifdef __cplusplus
}
#endif

#endif /* CAUSEWAY_LOG_H */
