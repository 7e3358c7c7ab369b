/*
 * util/cw_assert.h and util/cw_mutex.h: CW_ASSERT aborts with where and
 * what where asserts are on (debug and sanitizer builds) and evaluates
 * nothing where they are off (release); cw_mutex_held tells the owner of an
 * error-checking mutex; CW_ASSERT_LOCKED, a second lock by the owner and an
 * unlock by another thread abort (death tests: a forked child must die of
 * SIGABRT, saying so on stderr).
 *
 * Not tested here: that cw_trigger's wait (a condition variable on
 * CLOCK_MONOTONIC) ignores a step of the wall clock; that would need
 * setting the system clock, which a test may not do.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cw_assert.h"
#include "cw_mutex.h"

/* Under ThreadSanitizer a death test's misuse (an unlock of a mutex not
 * held) is reported before the check aborts the child: its report goes
 * to a file of the child's own, removed once the child is reaped, not to
 * the tree's log path, where any report fails a TSan run (README). */
#if defined(__SANITIZE_THREAD__)
#define TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TEST_TSAN 1
#endif
#endif
#ifdef TEST_TSAN
#include <sanitizer/common_interface_defs.h>
#define DEATH_REPORT "/tmp/cw-test-mutex-death"
#endif

static pthread_mutex_t m;
static pthread_mutex_t held_elsewhere;
static pthread_mutex_t static_m = CW_MUTEX_INITIALIZER;

/* Run @p fn in a child with stderr on a pipe: true if it died of SIGABRT;
 * what it wrote goes to @p err. */
static bool dies(void (*fn)(void), char *err, size_t len)
{
    int fds[2], status;
    ssize_t n, got = 0;
    pid_t pid;

    assert_int_equal(pipe(fds), 0);
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], STDERR_FILENO);
#ifdef TEST_TSAN
        __sanitizer_set_report_path(DEATH_REPORT);
#endif
        fn();
        _exit(0);
    }
    close(fds[1]);
    while (got < (ssize_t)len - 1 &&
           (n = read(fds[0], err + got, len - 1 - (size_t)got)) > 0)
        got += n;
    err[got] = '\0';
    close(fds[0]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
#ifdef TEST_TSAN
    {
        char report[64];

        snprintf(report, sizeof(report), "%s.%d", DEATH_REPORT, (int)pid);
        (void)unlink(report);
    }
#endif
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}

static void assert_false_cond(void)
{
    int zero = 0;

    CW_ASSERT(zero == 1);
}

static void assert_locked_free(void)
{
    CW_ASSERT_LOCKED(&m);
}

static void lock_twice(void)
{
    cw_mutex_lock(&m);
    cw_mutex_lock(&m);
}

static void unlock_not_held(void)
{
    cw_mutex_unlock(&m);
}

static void assert_locked_elsewhere(void)
{
    CW_ASSERT_LOCKED(&held_elsewhere); /* a child has one thread: the
                                          parent's holder is not it */
}

static void *hold(void *arg)
{
    pthread_barrier_t *b = arg;

    cw_mutex_lock(&held_elsewhere);
    pthread_barrier_wait(b); /* held */
    pthread_barrier_wait(b); /* checked */
    cw_mutex_unlock(&held_elsewhere);
    return NULL;
}

static void test_held(void **state)
{
    pthread_barrier_t b;
    pthread_t t;
    (void)state;

    if (!CW_ASSERTS)
        skip(); /* release build: plain mutexes, nothing to ask */
    assert_false(cw_mutex_held(&m));
    cw_mutex_lock(&m);
    assert_true(cw_mutex_held(&m));
    CW_ASSERT_LOCKED(&m);
    cw_mutex_unlock(&m);
    assert_false(cw_mutex_held(&m));
    CW_ASSERT_UNLOCKED(&m);
    /* Static ones too. */
    cw_mutex_lock(&static_m);
    assert_true(cw_mutex_held(&static_m));
    cw_mutex_unlock(&static_m);
    assert_false(cw_mutex_held(&static_m));
    /* Held by another thread: not ours, and asking does not wait. */
    pthread_barrier_init(&b, NULL, 2);
    assert_int_equal(pthread_create(&t, NULL, hold, &b), 0);
    pthread_barrier_wait(&b);
    assert_false(cw_mutex_held(&held_elsewhere));
    CW_ASSERT_UNLOCKED(&held_elsewhere);
    pthread_barrier_wait(&b);
    pthread_join(t, NULL);
    pthread_barrier_destroy(&b);
}

static void test_deaths(void **state)
{
    char err[512];
    (void)state;

    if (!CW_ASSERTS)
        skip();
    assert_true(dies(assert_false_cond, err, sizeof(err)));
    assert_non_null(strstr(err, "assertion failed: zero == 1"));
    assert_non_null(strstr(err, "test_mutex.c:"));
    assert_true(dies(assert_locked_free, err, sizeof(err)));
    assert_non_null(strstr(err, "cw_mutex_held(&m)"));
    assert_true(dies(lock_twice, err, sizeof(err)));
    assert_non_null(strstr(err, "rc == 0"));
    assert_true(dies(unlock_not_held, err, sizeof(err)));
    assert_non_null(strstr(err, "rc == 0"));
    {
        pthread_barrier_t b;
        pthread_t t;

        pthread_barrier_init(&b, NULL, 2);
        assert_int_equal(pthread_create(&t, NULL, hold, &b), 0);
        pthread_barrier_wait(&b);
        assert_true(dies(assert_locked_elsewhere, err, sizeof(err)));
        pthread_barrier_wait(&b);
        pthread_join(t, NULL);
        pthread_barrier_destroy(&b);
    }
}

static int evaluations;

static int count(void)
{
    return ++evaluations;
}

/* Off: the condition is compiled, not evaluated; on: evaluated once. */
static void test_evaluation(void **state)
{
    (void)state;
    evaluations = 0;
    CW_ASSERT(count() > 0);
    assert_int_equal(evaluations, CW_ASSERTS ? 1 : 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_held),
        cmocka_unit_test(test_deaths),
        cmocka_unit_test(test_evaluation),
    };

    cw_mutex_init(&m);
    cw_mutex_init(&held_elsewhere);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
