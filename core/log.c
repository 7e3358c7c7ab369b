/* Logging: level checked by the macros before formatting; errno kept. */
#include <causeway/log.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

volatile int cw_log_level_ = CW_LOG_WARN;

static pthread_once_t log_once = PTHREAD_ONCE_INIT;

static const char *const level_names[] = {
    [CW_LOG_NONE] = "none",   [CW_LOG_ERROR] = "error",
    [CW_LOG_WARN] = "warn",   [CW_LOG_INFO] = "info",
    [CW_LOG_DEBUG] = "debug", [CW_LOG_TRACE] = "trace",
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

uint64_t cw_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void cw_log_vwrite(int level, const char *subsys, const char *file, int line,
                   const char *func, const char *fmt, va_list ap)
{
    int saved_errno = errno;
    char msg[1024];
    struct timespec ts;
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
    clock_gettime(CLOCK_REALTIME, &ts);
    /* One fprintf call per message keeps lines whole across threads. */
    fprintf(stderr, "%lld.%06ld %d %-5s %s: %s (%s:%d %s)\n",
            (long long)ts.tv_sec, ts.tv_nsec / 1000, (int)getpid(),
            cw_log_level_name(level), subsys ? subsys : "cw", msg,
            base ? base + 1 : file, line, func);
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
