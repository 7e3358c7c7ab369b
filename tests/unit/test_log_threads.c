/* CW_LOG_RL from several threads at one call site: every call is either
 * printed or counted in the next "(N similar messages suppressed)" line,
 * and the per-site state is shared without a data race (TSan). */
#include <causeway/log.h>

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#define NTHREADS 4
#define NCALLS   2000

static pthread_barrier_t start;

static void rl_site(int i)
{
    CW_LOG_RL(CW_LOG_WARN, "test", "rate-limited call %d", i);
}

static void *caller(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&start);
    for (int i = 0; i < NCALLS; i++)
        rl_site(i);
    return NULL;
}

/* Printed calls and the sum of the suppressed counts in @p f. */
static void count_lines(FILE *f, unsigned *printed_p, unsigned *dropped_p)
{
    char line[1200];
    unsigned printed = 0, dropped = 0;

    rewind(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        const char *p = strstr(line, "test: (");
        if (strstr(line, "rate-limited call") != NULL)
            printed++;
        else if (p != NULL)
            dropped += (unsigned)strtoul(p + 7, NULL, 10);
    }
    *printed_p = printed;
    *dropped_p = dropped;
}

static void test_rl_shared_site(void **state)
{
    pthread_t t[NTHREADS];
    FILE *f = tmpfile();
    int saved = dup(STDERR_FILENO);
    struct timespec pause = {1, 50000000L}; /* past the 1 s window */
    unsigned printed, dropped;
    (void)state;

    assert_non_null(f);
    assert_true(saved >= 0);
    cw_log_set_level(CW_LOG_WARN);
    assert_int_equal(pthread_barrier_init(&start, NULL, NTHREADS), 0);
    fflush(stderr);
    assert_true(dup2(fileno(f), STDERR_FILENO) >= 0);
    for (int i = 0; i < NTHREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, caller, NULL), 0);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    nanosleep(&pause, NULL);
    rl_site(-1); /* prints, with the count of what the window dropped */
    fflush(stderr);
    assert_true(dup2(saved, STDERR_FILENO) >= 0);
    close(saved);
    pthread_barrier_destroy(&start);

    count_lines(f, &printed, &dropped);
    fclose(f);
    assert_true(printed >= 2);
    assert_int_equal(printed + dropped, NTHREADS * NCALLS + 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rl_shared_site),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
