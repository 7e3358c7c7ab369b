/*
 * util/cw_assert.h, util/cw_mutex.h and util/cw_lock.h: CW_ASSERT aborts
 * with where and what where asserts are on (debug and sanitizer builds)
 * and evaluates nothing where they are off (release); cw_mutex_held and
 * cw_lock_held tell the owner; CW_ASSERT_LOCKED, a second lock by the
 * owner and an unlock by another thread abort (death tests: a forked child
 * must die of SIGABRT, saying so on stderr).  The context lock (cw_lock_t)
 * excludes under contention, through its futex slow path, and its
 * condition variable wakes a waiter or times out.
 *
 * Not tested here: that cw_trigger's wait (a condition variable on
 * CLOCK_MONOTONIC) ignores a step of the wall clock; that would need
 * setting the system clock, which a test may not do.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cw_assert.h"
#include "cw_lock.h"
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

/* ---- cw_lock_t ---------------------------------------------------------- */

static cw_lock_t lk, lk_elsewhere;

static void lock_take_twice(void)
{
    cw_lock_take(&lk);
    cw_lock_take(&lk);
}

static void lock_give_not_held(void)
{
    cw_lock_give(&lk);
}

static void lock_assert_free(void)
{
    CW_LOCK_ASSERT_HELD(&lk);
}

static void *lock_hold(void *arg)
{
    pthread_barrier_t *b = arg;

    cw_lock_take(&lk_elsewhere);
    pthread_barrier_wait(b); /* held */
    pthread_barrier_wait(b); /* checked */
    cw_lock_give(&lk_elsewhere);
    return NULL;
}

static void test_lock_held(void **state)
{
    pthread_barrier_t b;
    pthread_t t;
    char err[512];
    (void)state;

    if (!CW_ASSERTS)
        skip(); /* release build: no owner kept, nothing to ask */
    cw_lock_init(&lk);
    cw_lock_init(&lk_elsewhere);
    assert_false(cw_lock_held(&lk));
    cw_lock_take(&lk);
    assert_true(cw_lock_held(&lk));
    CW_LOCK_ASSERT_HELD(&lk);
    cw_lock_give(&lk);
    assert_false(cw_lock_held(&lk));
    CW_LOCK_ASSERT_FREE(&lk);
    pthread_barrier_init(&b, NULL, 2);
    assert_int_equal(pthread_create(&t, NULL, lock_hold, &b), 0);
    pthread_barrier_wait(&b);
    assert_false(cw_lock_held(&lk_elsewhere));
    CW_LOCK_ASSERT_FREE(&lk_elsewhere);
    pthread_barrier_wait(&b);
    pthread_join(t, NULL);
    pthread_barrier_destroy(&b);

    assert_true(dies(lock_take_twice, err, sizeof(err)));
    assert_non_null(strstr(err, "!cw_lock_held(l)"));
    assert_true(dies(lock_give_not_held, err, sizeof(err)));
    assert_non_null(strstr(err, "cw_lock_held(l)"));
    assert_true(dies(lock_assert_free, err, sizeof(err)));
    assert_non_null(strstr(err, "cw_lock_held(&lk)"));
}

#define LOCK_THREADS 4
#define LOCK_ROUNDS  200000

static cw_lock_t counted;
static unsigned long counter; /* only under counted */
static unsigned long sleeps;  /* takes that found the word marked */

static void *lock_count(void *arg)
{
    (void)arg;
    for (int i = 0; i < LOCK_ROUNDS; i++) {
        cw_lock_take(&counted);
        /* A read, a pause and a write: a lock that let two in would lose
         * increments. */
        unsigned long c = counter;
        if ((i & 255) == 0)
            sched_yield();
        if ((i & 4095) == 0) {
            /* Held longer than a taker spins (about a microsecond), on any
             * number of cores: the takers meanwhile sleep in the kernel. */
            struct timespec held = {0, 100000};
            nanosleep(&held, NULL);
        }
        counter = c + 1;
        if (atomic_load_explicit(&counted.word, memory_order_relaxed) == 2)
            sleeps++;
        cw_lock_give(&counted);
    }
    return NULL;
}

/* Four threads on two cores, holders that yield the CPU: every increment
 * counted, some takers went to sleep in the kernel (the word marked 2),
 * and the word is free at the end. */
static void test_lock_contended(void **state)
{
    pthread_t t[LOCK_THREADS];
    (void)state;

    cw_lock_init(&counted);
    counter = sleeps = 0;
    for (int i = 0; i < LOCK_THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, lock_count, NULL), 0);
    for (int i = 0; i < LOCK_THREADS; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(counter, (unsigned long)LOCK_THREADS * LOCK_ROUNDS);
    assert_true(sleeps > 0);
    assert_int_equal(atomic_load(&counted.word), 0);
    printf("# %lu increments, %lu under a lock with sleepers\n", counter,
           sleeps);
}

static cw_lock_t cond_lock;
static cw_cond_t cond;
static bool cond_flag;

static void *cond_setter(void *arg)
{
    pthread_barrier_t *b = arg;

    pthread_barrier_wait(b); /* the waiter holds the lock, about to wait */
    cw_lock_take(&cond_lock);
    cond_flag = true;
    cw_cond_signal(&cond);
    cw_lock_give(&cond_lock);
    return NULL;
}

static void deadline_in(struct timespec *abs, long ms)
{
    clock_gettime(CLOCK_MONOTONIC, abs);
    abs->tv_sec += ms / 1000;
    abs->tv_nsec += (ms % 1000) * 1000000L;
    if (abs->tv_nsec >= 1000000000L) {
        abs->tv_sec++;
        abs->tv_nsec -= 1000000000L;
    }
}

/* A deadline passes with ETIMEDOUT and the lock held again; a signal
 * wakes the waiter long before its deadline. */
static void test_cond(void **state)
{
    struct timespec abs, t0, t1;
    pthread_barrier_t b;
    pthread_t t;
    int rc = 0;
    (void)state;

    cw_lock_init(&cond_lock);
    cw_cond_init(&cond);
    cond_flag = false;

    cw_lock_take(&cond_lock);
    deadline_in(&abs, 20);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (rc == 0)
        rc = cw_cond_timedwait(&cond, &cond_lock, &abs);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_int_equal(rc, ETIMEDOUT);
    assert_true(t1.tv_sec > abs.tv_sec ||
                (t1.tv_sec == abs.tv_sec && t1.tv_nsec >= abs.tv_nsec));
    assert_true(cw_lock_held(&cond_lock));
    cw_lock_give(&cond_lock);

    pthread_barrier_init(&b, NULL, 2);
    assert_int_equal(pthread_create(&t, NULL, cond_setter, &b), 0);
    cw_lock_take(&cond_lock);
    deadline_in(&abs, 30000);
    pthread_barrier_wait(&b);
    rc = 0;
    while (!cond_flag && rc == 0)
        rc = cw_cond_timedwait(&cond, &cond_lock, &abs);
    assert_int_equal(rc, 0);
    assert_true(cond_flag);
    cw_lock_give(&cond_lock);
    pthread_join(t, NULL);
    pthread_barrier_destroy(&b);
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
        cmocka_unit_test(test_held),           cmocka_unit_test(test_deaths),
        cmocka_unit_test(test_evaluation),     cmocka_unit_test(test_lock_held),
        cmocka_unit_test(test_lock_contended), cmocka_unit_test(test_cond),
    };

    cw_mutex_init(&m);
    cw_mutex_init(&held_elsewhere);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
