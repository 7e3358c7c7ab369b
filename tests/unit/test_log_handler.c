/*
 * cw_log_set_handler: an application's handler gets every message that
 * passes the threshold (level, subsystem, call site, text) and stderr gets
 * none; NULL gives stderr back; errno survives a handler that changes it;
 * a handler that logs, or sets a handler, does not deadlock; and with
 * threads logging while the handler changes, every message goes exactly
 * once to one of them, and none reaches a handler after the call that
 * replaced it has returned.
 */
#include <causeway/log.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#define NTHREADS 4
#define NCALLS   3000
#define NSWAPS   400

struct seen {
    unsigned n;
    int level, line;
    char subsys[32], file[64], func[64], msg[128];
};

static void record(void *arg, int level, const char *subsys, const char *file,
                   int line, const char *func, const char *msg)
{
    struct seen *s = arg;

    s->n++;
    s->level = level;
    s->line = line;
    snprintf(s->subsys, sizeof(s->subsys), "%s", subsys);
    snprintf(s->file, sizeof(s->file), "%s", file);
    snprintf(s->func, sizeof(s->func), "%s", func);
    snprintf(s->msg, sizeof(s->msg), "%s", msg);
    errno = EBADF; /* the logger gives the caller's errno back */
}

/* stderr goes to a temporary file for the test; lines_since() counts what
 * was written to it after a given offset. */
static FILE *err_file;
static int saved_stderr = -1;

static int setup(void **state)
{
    (void)state;
    err_file = tmpfile();
    if (err_file == NULL)
        return -1;
    fflush(stderr);
    saved_stderr = dup(STDERR_FILENO);
    if (saved_stderr < 0 || dup2(fileno(err_file), STDERR_FILENO) < 0)
        return -1;
    cw_log_set_level(CW_LOG_INFO);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    cw_log_set_handler(NULL, NULL);
    fflush(stderr);
    dup2(saved_stderr, STDERR_FILENO);
    close(saved_stderr);
    fclose(err_file);
    return 0;
}

static long err_size(void)
{
    fflush(stderr);
    return lseek(STDERR_FILENO, 0, SEEK_END);
}

static unsigned err_lines_from(long off, const char *needle)
{
    char line[1200];
    unsigned n = 0;
    FILE *f;

    fflush(stderr);
    f = fopen("/proc/self/fd/2", "r");
    assert_non_null(f);
    fseek(f, off, SEEK_SET);
    while (fgets(line, sizeof(line), f) != NULL)
        if (needle == NULL || strstr(line, needle) != NULL)
            n++;
    fclose(f);
    return n;
}

static void test_handler_gets_messages(void **state)
{
    struct seen s = {0};
    long off = err_size();
    int line;

    (void)state;
    cw_log_set_handler(record, &s);
    errno = ENOENT;
    line = __LINE__ + 1;
    CW_WARN("subsys-x", "value %d of %s", 42, "many");
    assert_int_equal(errno, ENOENT);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.level, CW_LOG_WARN);
    assert_string_equal(s.subsys, "subsys-x");
    assert_string_equal(s.file, "test_log_handler.c");
    assert_int_equal(s.line, line);
    assert_string_equal(s.func, "test_handler_gets_messages");
    assert_string_equal(s.msg, "value 42 of many");
    /* Below the threshold: formatted for nobody. */
    CW_DEBUG("subsys-x", "not shown");
    assert_int_equal(s.n, 1);
    /* A NULL subsystem, file or function is never handed over. */
    cw_log_write(CW_LOG_ERROR, NULL, NULL, 7, NULL, "raw");
    assert_int_equal(s.n, 2);
    assert_string_equal(s.subsys, "cw");
    assert_string_equal(s.file, "?");
    assert_string_equal(s.func, "?");
    assert_int_equal(err_lines_from(off, NULL), 0);

    /* NULL: stderr again, and the old handler sees nothing more. */
    cw_log_set_handler(NULL, NULL);
    CW_WARN("subsys-x", "back on stderr");
    assert_int_equal(s.n, 2);
    assert_int_equal(err_lines_from(off, "back on stderr"), 1);
}

/* A handler that logs: its message goes to stderr (no recursion, no
 * deadlock on the lock this thread holds); one that sets a handler is
 * refused with a note on stderr. */
static void logging_handler(void *arg, int level, const char *subsys,
                            const char *file, int line, const char *func,
                            const char *msg)
{
    unsigned *n = arg;

    (void)level, (void)subsys, (void)file, (void)line, (void)func;
    (*n)++;
    CW_WARN("inner", "from the handler, about: %s", msg);
    cw_log_set_handler(NULL, NULL);
}

static void test_handler_reentry(void **state)
{
    unsigned n = 0;
    long off = err_size();

    (void)state;
    cw_log_set_handler(logging_handler, &n);
    CW_ERROR("outer", "first");
    CW_ERROR("outer", "second");
    assert_int_equal(n, 2);
    assert_int_equal(err_lines_from(off, "from the handler, about: first"), 1);
    assert_int_equal(err_lines_from(off, "from inside a log handler"), 2);
    assert_int_equal(err_lines_from(off, "outer: first"), 0);
    cw_log_set_handler(NULL, NULL);
}

/* The plugins' host->log entry (cw_log_vwrite) goes the same way. */
static void vwrite_call(int level, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    cw_log_vwrite(level, "plugin", "na_x.c", 3, "x_init", fmt, ap);
    va_end(ap);
}

static void test_vwrite_to_handler(void **state)
{
    struct seen s = {0};

    (void)state;
    cw_log_set_handler(record, &s);
    vwrite_call(CW_LOG_INFO, "fi_domain() failed: %s", "No such device");
    assert_int_equal(s.n, 1);
    assert_string_equal(s.subsys, "plugin");
    assert_string_equal(s.file, "na_x.c");
    assert_string_equal(s.msg, "fi_domain() failed: No such device");
    cw_log_set_handler(NULL, NULL);
}

/* Threads log while the main thread keeps changing the handler. */
struct counter {
    atomic_uint n;
    atomic_int inside;
};

static void counting(void *arg, int level, const char *subsys, const char *file,
                     int line, const char *func, const char *msg)
{
    struct counter *c = arg;

    (void)level, (void)subsys, (void)file, (void)line, (void)func, (void)msg;
    atomic_fetch_add(&c->inside, 1);
    atomic_fetch_add(&c->n, 1);
    atomic_fetch_sub(&c->inside, 1);
}

static pthread_barrier_t start;
static atomic_bool done;
static atomic_uint logged;

/* Logs until the swaps are over (NCALLS at least). */
static void *logger(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&start);
    for (int i = 0; i < NCALLS || !atomic_load(&done); i++) {
        CW_WARN("thr", "threaded message %d", i);
        atomic_fetch_add(&logged, 1);
    }
    return NULL;
}

static void test_handler_threads(void **state)
{
    struct counter a = {0}, b = {0};
    pthread_t th[NTHREADS];
    long off = err_size();
    unsigned stray = 0;

    (void)state;
    assert_int_equal(pthread_barrier_init(&start, NULL, NTHREADS + 1), 0);
    for (int i = 0; i < NTHREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, logger, NULL), 0);
    pthread_barrier_wait(&start);
    /* The first messages go to stderr; the swaps start among them. */
    while (err_lines_from(off, "threaded message") == 0)
        sched_yield();
    for (int k = 0; k < NSWAPS; k++) {
        struct counter *now = k % 3 == 0 ? &a : k % 3 == 1 ? &b : NULL;
        struct counter *before = k % 3 == 0 ? NULL : k % 3 == 1 ? &a : &b;
        unsigned seen = now ? atomic_load(&now->n) : 0;
        unsigned was;

        cw_log_set_handler(now ? counting : NULL, now);
        /* The new handler gets a message before the next change. */
        while (now != NULL && atomic_load(&now->n) == seen)
            sched_yield();
        if (before == NULL)
            continue;
        /* Replaced: nobody inside it now, and it stays unused. */
        if (atomic_load(&before->inside) != 0)
            stray++;
        was = atomic_load(&before->n);
        sched_yield();
        if (atomic_load(&before->n) != was)
            stray++;
    }
    atomic_store(&done, true);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    cw_log_set_handler(NULL, NULL);
    pthread_barrier_destroy(&start);
    assert_int_equal(stray, 0);
    assert_int_equal(atomic_load(&a.n) + atomic_load(&b.n) +
                         err_lines_from(off, "threaded message"),
                     atomic_load(&logged));
    /* Each had messages: the swaps ran among the loggers. */
    assert_true(atomic_load(&a.n) > 0 && atomic_load(&b.n) > 0);
    print_message("handler a %u, b %u, stderr %u messages\n", atomic_load(&a.n),
                  atomic_load(&b.n), err_lines_from(off, "threaded message"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handler_gets_messages),
        cmocka_unit_test(test_handler_reentry),
        cmocka_unit_test(test_vwrite_to_handler),
        cmocka_unit_test(test_handler_threads),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
