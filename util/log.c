/* Logging: level checked by the macros before formatting; errno kept. */
#include <causeway/log.h>

#include "cw_clock.h"
#include "cw_mutex.h"

#include <errno.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

volatile int cw_log_level_ = CW_LOG_WARN;

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static pthread_once_t journal_once = PTHREAD_ONCE_INIT;
static bool log_journal; /* stderr is the journal: "<N>" prefixes */

/* The application's handler (cw_log_set_handler), called holding the
 * handler turn: once the setter returns no thread is still inside the old
 * handler, and the handler sees one message at a time, as stderr's own
 * lock orders the lines written there.  Turns are taken in order (a ticket
 * lock): with a plain mutex, or an rwlock of either preference, threads
 * that log without pause kept a setter waiting until they stopped.  A
 * message the handler itself logs goes to stderr (log_in_handler): a turn
 * is not recursive. */
static pthread_mutex_t handler_lock = CW_MUTEX_INITIALIZER;
static pthread_cond_t handler_cond = PTHREAD_COND_INITIALIZER;
static uint64_t handler_next, handler_serving;
static cw_log_handler_t log_handler;
static void *log_handler_arg;
/* Whether log_handler may be set: without one, no turn is taken. */
static atomic_bool log_handler_on;
static _Thread_local bool log_in_handler;

static const char *const level_names[] = {
    [CW_LOG_NONE] = "none", [CW_LOG_ERROR] = "error", [CW_LOG_WARN] = "warn",
    [CW_LOG_INFO] = "info", [CW_LOG_DEBUG] = "debug", [CW_LOG_TRACE] = "trace",
};

int cw_log_level_parse(const char *s)
{
    if (s == NULL)
        return -1;
    for (int i = CW_LOG_NONE; i <= CW_LOG_TRACE; i++)
        if (strcasecmp(s, level_names[i]) == 0)
            return i;
    if (strcasecmp(s, "warning") == 0)
        return CW_LOG_WARN;
    return -1;
}

const char *cw_log_level_name(int level)
{
    if (level < CW_LOG_NONE || level > CW_LOG_TRACE)
        return "?";
    return level_names[level];
}

static void log_init_once(void)
{
    int level = cw_log_level_parse(getenv("CAUSEWAY_LOG_LEVEL"));
    if (level >= 0)
        cw_log_level_ = level;
}

/* systemd names the stream it connected to stderr in JOURNAL_STREAM
 * ("dev:inode"); a child whose stderr was redirected inherits the variable,
 * hence the comparison (systemd.exec(5)). */
static void journal_init_once(void)
{
    const char *v = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    struct stat st;

    log_journal = v != NULL && sscanf(v, "%llu:%llu", &dev, &ino) == 2 &&
                  fstat(STDERR_FILENO, &st) == 0 &&
                  (unsigned long long)st.st_dev == dev &&
                  (unsigned long long)st.st_ino == ino;
}

void cw_log_init(void)
{
    pthread_once(&log_once, log_init_once);
}

void cw_log_set_level(int level)
{
    pthread_once(&log_once, log_init_once);
    if (level < CW_LOG_NONE)
        level = CW_LOG_NONE;
    if (level > CW_LOG_TRACE)
        level = CW_LOG_TRACE;
    cw_log_level_ = level;
}

static void handler_turn_take(void)
{
    uint64_t ticket;

    cw_mutex_lock(&handler_lock);
    ticket = handler_next++;
    while (ticket != handler_serving)
        pthread_cond_wait(&handler_cond, &handler_lock);
    cw_mutex_unlock(&handler_lock);
}

static void handler_turn_give(void)
{
    cw_mutex_lock(&handler_lock);
    handler_serving++;
    pthread_cond_broadcast(&handler_cond);
    cw_mutex_unlock(&handler_lock);
}

void cw_log_set_handler(cw_log_handler_t fn, void *arg)
{
    if (log_in_handler) {
        /* This thread holds the turn. */
        fprintf(stderr, "cw_log_set_handler() called from inside a log "
                        "handler: ignored\n");
        return;
    }
    handler_turn_take();
    log_handler = fn;
    log_handler_arg = fn != NULL ? arg : NULL;
    atomic_store_explicit(&log_handler_on, fn != NULL, memory_order_relaxed);
    handler_turn_give();
}

/* Hands @p msg to the application's handler; false when there is none. */
static bool log_to_handler(int level, const char *subsys, const char *file,
                           int line, const char *func, const char *msg)
{
    bool handled = false;

    if (log_in_handler ||
        !atomic_load_explicit(&log_handler_on, memory_order_relaxed))
        return false;
    handler_turn_take();
    if (log_handler != NULL) {
        log_in_handler = true;
        log_handler(log_handler_arg, level, subsys, file, line, func, msg);
        log_in_handler = false;
        handled = true;
    }
    handler_turn_give();
    return handled;
}

uint64_t cw_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The pass clock (log.h, cw_clock.h).  A forward through a gateway read
 * the clock eight times (its arrival, the deadline checks of the relay and
 * of the answer, the send and completion stamps), about 34 ns each on a
 * VM's vDSO: 0.27 us of a forward's 2-3.  Within one pass of a worker's
 * loop the readings differ by less than the pass, and the uses that take
 * a pass reading tolerate that (deadlines are 1 ms-granular; a time the
 * gateway subtracts from another to measure itself reads the clock), so a
 * pass reads it once, as Envoy's dispatcher keeps an
 * approximate monotonic time per event-loop iteration. */
CW_TLS_IE struct cw_pass_clock cw_pass_clock_;

void cw_clock_pass_begin(void)
{
    cw_pass_clock_.open++;
    cw_pass_clock_.ns = 0;
}

void cw_clock_pass_end(void)
{
    if (cw_pass_clock_.open > 0)
        cw_pass_clock_.open--;
    cw_pass_clock_.ns = 0;
}

uint64_t cw_now_pass_ns(void)
{
    if (cw_pass_clock_.open == 0)
        return cw_now_ns();
    if (cw_pass_clock_.ns == 0)
        cw_pass_clock_.ns = cw_now_ns();
    return cw_pass_clock_.ns;
}

void cw_log_vwrite(int level, const char *subsys, const char *file, int line,
                   const char *func, const char *fmt, va_list ap)
{
    /* syslog priorities: err, warning, info, debug (trace is debug). */
    static const int prio[] = {
        [CW_LOG_NONE] = 3, [CW_LOG_ERROR] = 3, [CW_LOG_WARN] = 4,
        [CW_LOG_INFO] = 6, [CW_LOG_DEBUG] = 7, [CW_LOG_TRACE] = 7};
    int saved_errno = errno;
    char msg[1024];
    char when[32];
    struct timespec ts;
    struct tm tm;
    const char *base;

    if (file == NULL)
        file = "?";
    if (func == NULL)
        func = "?";
    base = strrchr(file, '/');
    if (fmt != NULL)
        vsnprintf(msg, sizeof(msg), fmt, ap);
    else
        msg[0] = '\0';
    if (log_to_handler(level, subsys ? subsys : "cw", base ? base + 1 : file,
                       line, func, msg)) {
        errno = saved_errno;
        return;
    }
    pthread_once(&journal_once, journal_init_once);
    /* One fprintf call per message keeps lines whole across threads.  The
     * journal stamps time and pid itself and filters on the priority. */
    if (log_journal) {
        fprintf(stderr, "<%d>%-5s %s: %s (%s:%d %s)\n",
                prio[level < CW_LOG_NONE || level > CW_LOG_TRACE ? 0 : level],
                cw_log_level_name(level), subsys ? subsys : "cw", msg,
                base ? base + 1 : file, line, func);
        errno = saved_errno;
        return;
    }
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
    fprintf(stderr, "%s.%06ldZ %d %-5s %s: %s (%s:%d %s)\n", when,
            ts.tv_nsec / 1000, (int)getpid(), cw_log_level_name(level),
            subsys ? subsys : "cw", msg, base ? base + 1 : file, line, func);
    errno = saved_errno;
}

void cw_log_write(int level, const char *subsys, const char *file, int line,
                  const char *func, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cw_log_vwrite(level, subsys, file, line, func, fmt, ap);
    va_end(ap);
}
