/* Tables under concurrency: lookups on many threads while health flips,
 * load counters move and the table is rebuilt and swapped, each reader
 * holding a reference to the table it started with; health reports racing
 * on one hop, each change of state seen by exactly one reporter (cmocka). */
#include <causeway/config.h>
#include <causeway/routing.h>

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#define NREADERS 4
#define RUN_NS   700000000ull

static const char yaml[] =
    "networks:\n"
    "  - { name: eth0, address: \"ofi+tcp://10.1.0.1:7000\" }\n"
    "routes:\n"
    "  - { dest: \"ofi+cxi://10.0.0.0/8\", gateway: \"ofi+tcp://10.1.0.2:1\" "
    "}\n"
    "  - { dest: \"ofi+cxi://10.0.0.0/8\", gateway: \"ofi+tcp://10.1.0.3:1\" "
    "}\n"
    "  - { dest: \"ofi+cxi://*\", gateway: \"ofi+tcp://10.1.0.4:1\" }\n";

static pthread_mutex_t swap_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cw_route_table *current;
static atomic_bool stop;
static atomic_ulong lookups;
static atomic_ulong bad;

static uint64_t now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct cw_route_table *build(void)
{
    struct cw_config *cfg = NULL;
    struct cw_route_table *t = NULL;

    if (cw_config_load_buffer("t.yaml", yaml, strlen(yaml), 0, NULL, &cfg) !=
        CW_OK)
        return NULL;
    if (cw_route_table_build(cfg, &t) != CW_OK)
        t = NULL;
    cw_config_free(cfg);
    return t;
}

static struct cw_route_table *acquire(void)
{
    struct cw_route_table *t;

    pthread_mutex_lock(&swap_lock);
    t = cw_route_table_ref(current);
    pthread_mutex_unlock(&swap_lock);
    return t;
}

static void *reader(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        struct cw_route_table *t = acquire();
        struct cw_route_result res;
        for (int i = 0; i < 64; i++) {
            if (cw_route_table_lookup_str(t, "ofi+cxi://10.9.9.9:1", &res) !=
                    CW_OK ||
                strncmp(res.gateway, "ofi+tcp://10.1.0.", 17) != 0) {
                atomic_fetch_add(&bad, 1);
                continue;
            }
            /* An RPC in flight on this table. */
            cw_route_table_nexthop_load(t, res.nexthop, 1);
            cw_route_table_nexthop_report(t, res.nexthop, i % 7 != 0);
            cw_route_table_nexthop_load(t, res.nexthop, -1);
            atomic_fetch_add(&lookups, 1);
        }
        cw_route_table_unref(t);
    }
    return NULL;
}

static void *health_flipper(void *arg)
{
    unsigned k = 0;
    (void)arg;
    while (!atomic_load(&stop)) {
        struct cw_route_table *t = acquire();
        unsigned n = cw_route_table_nexthop_count(t);
        cw_route_table_nexthop_set_up(t, k % n, (k / n) % 2 == 0);
        cw_route_table_unref(t);
        k++;
    }
    return NULL;
}

static void test_concurrent_lookup_and_swap(void **state)
{
    pthread_t readers[NREADERS];
    pthread_t flipper;
    unsigned swaps = 0;
    uint64_t end;
    (void)state;

    current = build();
    assert_non_null(current);
    for (int i = 0; i < NREADERS; i++)
        assert_int_equal(pthread_create(&readers[i], NULL, reader, NULL), 0);
    assert_int_equal(pthread_create(&flipper, NULL, health_flipper, NULL), 0);
    end = now() + RUN_NS;
    while (now() < end) {
        struct cw_route_table *next = build();
        struct cw_route_table *old;
        assert_non_null(next);
        pthread_mutex_lock(&swap_lock);
        old = current;
        current = next;
        pthread_mutex_unlock(&swap_lock);
        /* Readers still holding old keep it alive. */
        cw_route_table_unref(old);
        swaps++;
    }
    atomic_store(&stop, true);
    for (int i = 0; i < NREADERS; i++)
        pthread_join(readers[i], NULL);
    pthread_join(flipper, NULL);
    for (unsigned i = 0; i < cw_route_table_nexthop_count(current); i++)
        assert_int_equal(cw_route_table_nexthop_inflight(current, i), 0);
    cw_route_table_unref(current);
    printf("# %lu lookups, %u table swaps\n", atomic_load(&lookups), swaps);
    assert_int_equal(atomic_load(&bad), 0);
    assert_true(atomic_load(&lookups) > 0);
    assert_true(swaps > 0);
}

/* Reporters racing on one next hop: runs of failures and successes from
 * every thread.  Each change of state goes to exactly one reporter, so the
 * changes seen alternate: as many "down" as "up", or one more "down" when
 * the hop ends out of rotation. */
static struct cw_route_table *race_table;
static atomic_ulong race_down, race_up;

static void *racer(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg, left = 0;
    bool ok = true;

    for (int i = 0; i < 20000; i++) {
        /* Alternating runs of 1-8 reports of the same outcome. */
        if (left == 0) {
            seed = seed * 1103515245u + 12345u;
            left = 1 + (seed >> 16) % 8;
            ok = !ok;
        }
        left--;
        enum cw_health_change ch =
            cw_route_table_nexthop_report(race_table, 0, ok);
        if (ch == CW_HEALTH_DOWN)
            atomic_fetch_add(&race_down, 1);
        else if (ch == CW_HEALTH_UP)
            atomic_fetch_add(&race_up, 1);
    }
    return NULL;
}

static void test_concurrent_reports(void **state)
{
    pthread_t th[NREADERS];
    unsigned long down, up;
    (void)state;

    race_table = build();
    assert_non_null(race_table);
    for (int i = 0; i < NREADERS; i++)
        assert_int_equal(
            pthread_create(&th[i], NULL, racer, (void *)(uintptr_t)(i * 7 + 1)),
            0);
    for (int i = 0; i < NREADERS; i++)
        pthread_join(th[i], NULL);
    down = atomic_load(&race_down);
    up = atomic_load(&race_up);
    printf("# %lu times out of rotation, %lu back\n", down, up);
    assert_true(down > 0);
    assert_true(down == up || down == up + 1);
    assert_int_equal(cw_route_table_nexthop_is_up(race_table, 0), down == up);
    cw_route_table_unref(race_table);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_lookup_and_swap),
        cmocka_unit_test(test_concurrent_reports),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
