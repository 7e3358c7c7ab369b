/* Route selection, services, ACL, health and client lookups (cmocka). */
#include <causeway/config.h>
#include <causeway/routing.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static struct cw_route_table *table_from(const char *yaml, unsigned flags)
{
    struct cw_config_diag *diag = cw_config_diag_new();
    struct cw_config *cfg = NULL;
    struct cw_route_table *t = NULL;
    cw_status_t st;

    st = cw_config_load_buffer("test.yaml", yaml, strlen(yaml), flags, diag,
                               &cfg);
    if (st != CW_OK)
        cw_config_diag_print(diag, stderr);
    assert_int_equal(st, CW_OK);
    assert_int_equal(cw_route_table_build(cfg, &t), CW_OK);
    cw_config_free(cfg); /* the table must not depend on the config */
    cw_config_diag_free(diag);
    return t;
}

static const char *pick(struct cw_route_table *t, const char *addr)
{
    struct cw_route_result res;

    if (cw_route_table_lookup_str(t, addr, &res) != CW_OK)
        return "NONE";
    return res.gateway ? res.gateway : res.network_name;
}

#define NETS                                                                   \
    "networks:\n"                                                              \
    "  - { name: eth0, address: \"ofi+tcp://10.1.0.1:7000\" }\n"               \
    "  - { name: ib0, address: \"ucx+tcp://10.2.0.1:7000\" }\n"

static void test_longest_prefix(void **state)
{
    struct cw_route_table *t = table_from(
        NETS "routes:\n"
             "  - { dest: \"ucx+tcp://10.0.0.0/8\", gateway: "
             "\"ucx+tcp://10.2.0.8:1\" }\n"
             "  - { dest: \"ucx+tcp://10.4.0.0/16\", gateway: "
             "\"ucx+tcp://10.2.0.16:1\" }\n"
             "  - { dest: \"ucx+tcp://10.4.5.0/24\", gateway: "
             "\"ucx+tcp://10.2.0.24:1\" }\n"
             "  - { dest: \"ucx+tcp://10.4.5.6\", gateway: "
             "\"ucx+tcp://10.2.0.32:1\" }\n"
             "  - { dest: \"ucx+tcp://10.4.5.6:99\", gateway: "
             "\"ucx+tcp://10.2.0.99:1\" }\n"
             "  - { dest: \"ucx+*://10.4.5.0/24\", gateway: "
             "\"ucx+tcp://10.2.0.77:1\" }\n"
             "  - { dest: \"*://*\", gateway: \"ofi+tcp://10.1.0.254:1\" }\n",
        0);
    (void)state;
    assert_string_equal(pick(t, "ucx+tcp://10.9.9.9:1"),
                        "ucx+tcp://10.2.0.8:1");
    assert_string_equal(pick(t, "ucx+tcp://10.4.9.9:1"),
                        "ucx+tcp://10.2.0.16:1");
    assert_string_equal(pick(t, "ucx+tcp://10.4.5.7:1"),
                        "ucx+tcp://10.2.0.24:1");
    assert_string_equal(pick(t, "ucx+tcp://10.4.5.6:1"),
                        "ucx+tcp://10.2.0.32:1");
    assert_string_equal(pick(t, "ucx+tcp://10.4.5.6:99"),
                        "ucx+tcp://10.2.0.99:1");
    /* Same prefix, wildcard protocol: exact plugin+protocol wins... */
    assert_string_equal(pick(t, "ucx+tcp://10.4.5.8:1"),
                        "ucx+tcp://10.2.0.24:1");
    /* ...but it is the only /24 for another protocol. */
    assert_string_equal(pick(t, "ucx+rc://10.4.5.8:1"),
                        "ucx+tcp://10.2.0.77:1");
    /* The connected network beats the catch-all for its own fabric. */
    assert_string_equal(pick(t, "ofi+tcp://10.1.0.7:1"), "eth0");
    assert_string_equal(pick(t, "ucx+tcp://11.0.0.1:1"), "ib0");
    assert_string_equal(pick(t, "shm://x"), "ofi+tcp://10.1.0.254:1");
    assert_int_equal(cw_route_table_size(t), 7);
    cw_route_table_unref(t);
}

static void test_no_route_and_bad_input(void **state)
{
    struct cw_route_table *t = table_from(
        NETS
        "routes:\n"
        "  - { dest: \"ofi+cxi://*\", gateway: \"ofi+tcp://10.1.0.2:7000\" }\n",
        0);
    struct cw_route_result res;
    (void)state;
    assert_int_equal(
        cw_route_table_lookup_str(t, "verbs://mlx5_0:1/1.2.3.4:5", &res),
        CW_NO_ROUTE);
    assert_int_equal(cw_route_table_lookup_str(t, "not an address", &res),
                     CW_INVALID_ARG);
    assert_int_equal(cw_route_table_lookup(NULL, NULL, &res), CW_INVALID_ARG);
    assert_int_equal(cw_route_table_lookup_str(t, "ofi+cxi://77", &res), CW_OK);
    assert_false(res.direct);
    assert_string_equal(res.gateway, "ofi+tcp://10.1.0.2:7000");
    assert_string_equal(res.network_name, "eth0");
    assert_int_equal(res.loc.line, 5);
    assert_string_equal(res.dest, "ofi+cxi://*");
    cw_route_table_unref(t);
}

static void test_priority_then_hop(void **state)
{
    struct cw_route_table *t =
        table_from(NETS "routes:\n"
                        "  - { dest: \"ofi+cxi://*\", gateway: "
                        "\"ofi+tcp://10.1.0.2:1\", priority: 2 }\n"
                        "  - { dest: \"ofi+cxi://*\", gateway: "
                        "\"ofi+tcp://10.1.0.3:1\", priority: 1, hop: 3 }\n"
                        "  - { dest: \"ofi+cxi://*\", gateway: "
                        "\"ofi+tcp://10.1.0.4:1\", priority: 1, hop: 2 }\n",
                   0);
    unsigned id;
    (void)state;
    for (int i = 0; i < 100; i++)
        assert_string_equal(pick(t, "ofi+cxi://5"), "ofi+tcp://10.1.0.4:1");
    /* Down: the next best takes over; up again: back. */
    assert_int_equal(
        cw_route_table_nexthop_find(t, "ofi+tcp://10.1.0.4:1", &id), CW_OK);
    cw_route_table_nexthop_set_up(t, id, false);
    assert_false(cw_route_table_nexthop_is_up(t, id));
    assert_string_equal(pick(t, "ofi+cxi://5"), "ofi+tcp://10.1.0.3:1");
    cw_route_table_nexthop_set_up(t, id, true);
    assert_string_equal(pick(t, "ofi+cxi://5"), "ofi+tcp://10.1.0.4:1");
    cw_route_table_unref(t);
}

/* A /16 with two next hops of different priority, and a default. */
#define FALLBACK_ROUTES                                                        \
    NETS "routes:\n"                                                           \
         "  - { dest: \"ofi+cxi://10.9.0.0/16\", gateway: "                    \
         "\"ofi+tcp://10.1.0.2:1\" }\n"                                        \
         "  - { dest: \"ofi+cxi://10.9.0.0/16\", gateway: "                    \
         "\"ofi+tcp://10.1.0.3:1\", priority: 1 }\n"                           \
         "  - { dest: \"ofi+cxi://*\", gateway: \"ofi+tcp://10.1.0.4:1\" }\n"

static void test_all_down_and_fallback(void **state)
{
    struct cw_route_table *t = table_from(FALLBACK_ROUTES, 0);
    unsigned a, b, c;
    (void)state;
    assert_int_equal(cw_route_table_nexthop_find(t, "ofi+tcp://10.1.0.2:1", &a),
                     CW_OK);
    assert_int_equal(cw_route_table_nexthop_find(t, "ofi+tcp://10.1.0.3:1", &b),
                     CW_OK);
    assert_int_equal(cw_route_table_nexthop_find(t, "ofi+tcp://10.1.0.4:1", &c),
                     CW_OK);
    assert_int_equal(cw_route_table_nexthop_find(t, "ofi+tcp://10.1.0.5:1", &c),
                     CW_NOENT);
    assert_int_equal(cw_route_table_nexthop_find(t, "ofi+tcp://10.1.0.4:1", &c),
                     CW_OK);
    cw_route_table_nexthop_set_up(t, a, false);
    assert_string_equal(pick(t, "ofi+cxi://10.9.1.1"), "ofi+tcp://10.1.0.3:1");
    /* Every next hop of the /16 down: the less specific route with an up
     * next hop is used. */
    cw_route_table_nexthop_set_up(t, b, false);
    assert_string_equal(pick(t, "ofi+cxi://10.9.1.1"), "ofi+tcp://10.1.0.4:1");
    /* Everything down: still try the best match rather than drop. */
    cw_route_table_nexthop_set_up(t, c, false);
    assert_string_equal(pick(t, "ofi+cxi://10.9.1.1"), "ofi+tcp://10.1.0.2:1");
    cw_route_table_unref(t);
}

/* A lookup through a memo answers as one without: health, fallback and
 * round robin on every call, the memo refilled for another table, and
 * destinations matching more patterns than a memo keeps. */
static const char *pick_memo(struct cw_route_table *t, const char *addr,
                             struct cw_route_memo *memo)
{
    struct cw_route_result res;
    struct cw_uri uri;

    assert_int_equal(cw_uri_parse(addr, &uri), CW_OK);
    if (cw_route_table_lookup_memo(t, &uri, memo, &res) != CW_OK)
        return "NONE";
    return res.gateway ? res.gateway : res.network_name;
}

static void test_lookup_memo(void **state)
{
    struct cw_route_table *t = table_from(FALLBACK_ROUTES, 0);
    struct cw_route_table *t2 = table_from(
        NETS
        "routes:\n"
        "  - { dest: \"ofi+cxi://*\", gateway: \"ofi+tcp://10.1.0.9:1\" }\n"
        "  - { dest: \"ofi+cxi://*\", gateway: \"ofi+tcp://10.1.0.8:1\" }\n",
        0);
    char many[4096] = NETS "routes:\n";
    struct cw_route_table *t3;
    struct cw_route_memo memo, none, deep;
    struct cw_route_result res;
    struct cw_uri uri;
    unsigned a, b, c, counts[2] = {0};
    (void)state;
    memset(&memo, 0, sizeof(memo));
    memset(&none, 0, sizeof(none));
    memset(&deep, 0, sizeof(deep));
    assert_int_equal(cw_route_table_nexthop_find(t, "ofi+tcp://10.1.0.2:1", &a),
                     CW_OK);
    assert_int_equal(cw_route_table_nexthop_find(t, "ofi+tcp://10.1.0.3:1", &b),
                     CW_OK);
    assert_int_equal(cw_route_table_nexthop_find(t, "ofi+tcp://10.1.0.4:1", &c),
                     CW_OK);
    assert_string_equal(pick_memo(t, "ofi+cxi://10.9.1.1", &memo),
                        "ofi+tcp://10.1.0.2:1");
    assert_string_equal(pick_memo(t, "ofi+cxi://10.9.1.1", &memo),
                        "ofi+tcp://10.1.0.2:1");
    cw_route_table_nexthop_set_up(t, a, false);
    assert_string_equal(pick_memo(t, "ofi+cxi://10.9.1.1", &memo),
                        "ofi+tcp://10.1.0.3:1");
    cw_route_table_nexthop_set_up(t, b, false);
    assert_string_equal(pick_memo(t, "ofi+cxi://10.9.1.1", &memo),
                        "ofi+tcp://10.1.0.4:1");
    cw_route_table_nexthop_set_up(t, c, false);
    assert_string_equal(pick_memo(t, "ofi+cxi://10.9.1.1", &memo),
                        "ofi+tcp://10.1.0.2:1");
    cw_route_table_nexthop_set_up(t, a, true);
    /* Another table (a reload): the memo is refilled from it, and round
     * robin among its equal routes goes on through the memo. */
    for (int i = 0; i < 10; i++) {
        const char *g = pick_memo(t2, "ofi+cxi://10.9.1.1", &memo);
        counts[strcmp(g, "ofi+tcp://10.1.0.9:1") == 0 ? 0 : 1]++;
        assert_true(strcmp(g, "ofi+tcp://10.1.0.9:1") == 0 ||
                    strcmp(g, "ofi+tcp://10.1.0.8:1") == 0);
    }
    assert_int_equal(counts[0], 5);
    assert_int_equal(counts[1], 5);
    assert_string_equal(pick_memo(t, "ofi+cxi://10.9.1.1", &memo),
                        "ofi+tcp://10.1.0.2:1");
    /* No route, remembered as such. */
    assert_string_equal(pick_memo(t2, "ucx+verbs://10.9.1.1", &none), "NONE");
    assert_string_equal(pick_memo(t2, "ucx+verbs://10.9.1.1", &none), "NONE");
    /* Thirteen nested prefixes match: more than a memo keeps, and the
     * most specific up one still wins. */
    for (int len = 8; len <= 20; len++) {
        char line[160];
        snprintf(line, sizeof(line),
                 "  - { dest: \"ofi+cxi://10.9.0.0/%d\", gateway: "
                 "\"ofi+tcp://10.1.1.%d:1\" }\n",
                 len, len);
        strcat(many, line);
    }
    t3 = table_from(many, 0);
    assert_string_equal(pick_memo(t3, "ofi+cxi://10.9.1.1", &deep),
                        "ofi+tcp://10.1.1.20:1");
    assert_true(deep.n > CW_ROUTE_MEMO_GROUPS);
    assert_int_equal(
        cw_route_table_nexthop_find(t3, "ofi+tcp://10.1.1.20:1", &a), CW_OK);
    cw_route_table_nexthop_set_up(t3, a, false);
    assert_string_equal(pick_memo(t3, "ofi+cxi://10.9.1.1", &deep),
                        "ofi+tcp://10.1.1.19:1");
    /* Bad arguments. */
    assert_int_equal(cw_uri_parse("ofi+cxi://10.9.1.1", &uri), CW_OK);
    assert_int_equal(cw_route_table_lookup_memo(t, &uri, NULL, &res),
                     CW_INVALID_ARG);
    assert_int_equal(cw_route_table_lookup_memo(NULL, &uri, &memo, &res),
                     CW_INVALID_ARG);
    assert_int_equal(cw_route_table_lookup_memo(t, NULL, &memo, &res),
                     CW_INVALID_ARG);
    cw_route_table_unref(t);
    cw_route_table_unref(t2);
    cw_route_table_unref(t3);
}

static void test_round_robin_fairness(void **state)
{
    struct cw_route_table *t = table_from(
        NETS
        "routes:\n"
        "  - { dest: \"ofi+cxi://*\", gateway: \"ofi+tcp://10.1.0.2:1\" }\n"
        "  - { dest: \"ofi+cxi://*\", gateway: \"ofi+tcp://10.1.0.3:1\" }\n"
        "  - { dest: \"ofi+cxi://*\", gateway: \"ofi+tcp://10.1.0.4:1\" }\n"
        "  - { dest: \"ofi+cxi://*\", gateway: \"ofi+tcp://10.1.0.5:1\", hop: "
        "2 }\n",
        0);
    unsigned counts[8] = {0};
    (void)state;
    for (int i = 0; i < 10000; i++) {
        struct cw_route_result res;
        assert_int_equal(cw_route_table_lookup_str(t, "ofi+cxi://1", &res),
                         CW_OK);
        assert_true(res.nexthop < 8);
        counts[res.nexthop]++;
    }
    /* Three equal routes share exactly; the longer path gets nothing. */
    assert_int_equal(counts[0] + counts[1] + counts[2], 10000);
    for (int i = 0; i < 3; i++)
        assert_true(counts[i] >= 3333 && counts[i] <= 3334);
    assert_int_equal(counts[3], 0);
    cw_route_table_unref(t);
}

static void test_least_loaded_and_healthiest(void **state)
{
    struct cw_route_table *t = table_from(
        NETS
        "health: { eject_after: 3, recover_after: 2 }\n"
        "routes:\n"
        "  - { dest: \"ofi+cxi://*\", gateway: \"ofi+tcp://10.1.0.2:1\" }\n"
        "  - { dest: \"ofi+cxi://*\", gateway: \"ofi+tcp://10.1.0.3:1\" }\n",
        0);
    unsigned a, b;
    (void)state;
    cw_route_table_nexthop_find(t, "ofi+tcp://10.1.0.2:1", &a);
    cw_route_table_nexthop_find(t, "ofi+tcp://10.1.0.3:1", &b);
    cw_route_table_nexthop_load(t, a, 5);
    assert_int_equal(cw_route_table_nexthop_inflight(t, a), 5);
    for (int i = 0; i < 10; i++)
        assert_string_equal(pick(t, "ofi+cxi://1"), "ofi+tcp://10.1.0.3:1");
    cw_route_table_nexthop_load(t, a, -5);
    /* A failure makes a hop less healthy than its peer. */
    cw_route_table_nexthop_report(t, b, false);
    for (int i = 0; i < 10; i++)
        assert_string_equal(pick(t, "ofi+cxi://1"), "ofi+tcp://10.1.0.2:1");
    /* eject_after consecutive failures take it down; recover_after
     * successes bring it back. */
    assert_int_equal(cw_route_table_nexthop_report(t, b, false),
                     CW_HEALTH_SAME);
    assert_true(cw_route_table_nexthop_is_up(t, b));
    assert_int_equal(cw_route_table_nexthop_report(t, b, false),
                     CW_HEALTH_DOWN);
    assert_false(cw_route_table_nexthop_is_up(t, b));
    /* Further failures change nothing; the change is reported once. */
    assert_int_equal(cw_route_table_nexthop_report(t, b, false),
                     CW_HEALTH_SAME);
    assert_int_equal(cw_route_table_nexthop_report(t, b, true), CW_HEALTH_SAME);
    assert_false(cw_route_table_nexthop_is_up(t, b));
    assert_int_equal(cw_route_table_nexthop_report(t, b, true), CW_HEALTH_UP);
    assert_true(cw_route_table_nexthop_is_up(t, b));
    assert_int_equal(cw_route_table_nexthop_report(t, b, true), CW_HEALTH_SAME);
    /* Out-of-range ids are ignored. */
    assert_int_equal(cw_route_table_nexthop_report(t, 999, false),
                     CW_HEALTH_SAME);
    cw_route_table_nexthop_set_up(t, 999, false);
    assert_null(cw_route_table_nexthop_name(t, 999));
    cw_route_table_unref(t);
}

static void test_two_networks_one_fabric(void **state)
{
    struct cw_route_table *t = table_from(
        "networks:\n"
        "  - { name: eth0, address: \"ofi+tcp://10.1.0.1:7000\" }\n"
        "  - { name: eth1, address: \"ofi+tcp://10.5.0.1:7000\" }\n"
        "  - { name: ib0, address: \"ucx+tcp://10.2.0.1:7000\" }\n"
        "routes:\n"
        "  - { dest: \"ofi+tcp://10.5.0.0/16\", via: eth1 }\n"
        "  - { dest: \"ofi+cxi://*\", gateway: \"ofi+tcp://10.5.0.9:7000\" }\n",
        0);
    struct cw_route_result res;
    (void)state;
    /* The next hop on 10.5/16 is reached over eth1, not the first
     * ofi+tcp network. */
    assert_int_equal(cw_route_table_lookup_str(t, "ofi+cxi://4", &res), CW_OK);
    assert_string_equal(res.network_name, "eth1");
    /* No connected route for a shared plugin+protocol: only what is
     * written, never a round robin between the two subnets. */
    for (int i = 0; i < 10; i++)
        assert_string_equal(pick(t, "ofi+tcp://10.5.3.3:1"), "eth1");
    assert_string_equal(pick(t, "ofi+tcp://10.1.3.3:1"), "NONE");
    assert_string_equal(pick(t, "ucx+tcp://10.9.3.3:1"), "ib0");
    cw_route_table_unref(t);
}

static void test_ipv6_and_device_locations(void **state)
{
    struct cw_route_table *t = table_from(
        "networks:\n"
        "  - { name: v6, address: \"ofi+tcp://[fd00::1]:7000\" }\n"
        "  - { name: ib0, address: \"verbs://mlx5_0:1/10.3.0.1:7000\" }\n"
        "routes:\n"
        "  - { dest: \"ofi+tcp://fd00:1::/32\", gateway: "
        "\"ofi+tcp://[fd00::2]:7000\" }\n"
        "  - { dest: \"ofi+tcp://fd00:1:2::/48\", gateway: "
        "\"ofi+tcp://[fd00::3]:7000\" }\n"
        "  - { dest: \"verbs://10.3.4.0/24\", via: ib0 }\n"
        "  - { dest: \"verbs://mlx5_1:1/10.3.9.9:7000\", gateway: "
        "\"verbs://mlx5_0:1/10.3.0.2:7000\" }\n",
        0);
    (void)state;
    assert_string_equal(pick(t, "ofi+tcp://[fd00:1:5::9]:80"),
                        "ofi+tcp://[fd00::2]:7000");
    assert_string_equal(pick(t, "ofi+tcp://[fd00:1:2::9]:80"),
                        "ofi+tcp://[fd00::3]:7000");
    assert_string_equal(pick(t, "ofi+tcp://10.0.0.1:80"), "v6");
    assert_string_equal(pick(t, "verbs://mlx5_3:1/10.3.4.7:7000"), "ib0");
    assert_string_equal(pick(t, "verbs://mlx5_1:1/10.3.9.9:7000"),
                        "verbs://mlx5_0:1/10.3.0.2:7000");
    cw_route_table_unref(t);
}

#define SERVICES                                                               \
    NETS "services:\n"                                                         \
         "  - { name: rr, backends: [\"ucx+tcp://10.2.0.5:1\", "               \
         "\"ucx+tcp://10.2.0.6:1\", \"ucx+tcp://10.2.0.7:1\"] }\n"             \
         "  - { name: least, policy: least_inflight, backends: "               \
         "[\"ucx+tcp://10.2.0.5:1\", \"ucx+tcp://10.2.0.6:1\"] }\n"            \
         "  - { name: sticky, policy: hash, backends: "                        \
         "[\"ucx+tcp://10.2.0.5:1\", \"ucx+tcp://10.2.0.6:1\", "               \
         "\"ucx+tcp://10.2.0.7:1\", \"ucx+tcp://10.2.0.8:1\"] }\n"

static void test_service_round_robin(void **state)
{
    struct cw_route_table *t = table_from(SERVICES, 0);
    struct cw_service_pick p;
    unsigned counts[3] = {0};
    (void)state;
    for (int i = 0; i < 3000; i++) {
        assert_int_equal(cw_route_table_service_pick(t, "svc:rr", NULL, &p),
                         CW_OK);
        counts[p.backend]++;
    }
    assert_int_equal(counts[0], 1000);
    assert_int_equal(counts[1], 1000);
    assert_int_equal(counts[2], 1000);
    assert_true(cw_route_table_backend_is_up(t, p.service, 1));
    cw_route_table_backend_set_ejected(t, p.service, 1, true);
    assert_false(cw_route_table_backend_is_up(t, p.service, 1));
    assert_false(cw_route_table_backend_is_up(t, p.service, 99));
    for (int i = 0; i < 100; i++) {
        assert_int_equal(cw_route_table_service_pick(t, "rr", NULL, &p), CW_OK);
        assert_int_not_equal(p.backend, 1);
    }
    cw_route_table_backend_load(t, p.service, 0, +2);
    assert_int_equal(cw_route_table_backend_inflight(t, p.service, 0), 2);
    cw_route_table_backend_load(t, p.service, 0, -2);
    assert_int_equal(cw_route_table_backend_inflight(t, p.service, 0), 0);
    assert_int_equal(cw_route_table_backend_inflight(t, p.service, 99), 0);
    /* All ejected: still answer rather than fail. */
    cw_route_table_backend_set_ejected(t, p.service, 0, true);
    cw_route_table_backend_set_ejected(t, p.service, 2, true);
    assert_int_equal(cw_route_table_service_pick(t, "rr", NULL, &p), CW_OK);
    assert_int_equal(cw_route_table_service_pick(t, "nope", NULL, &p),
                     CW_NOENT);
    cw_route_table_unref(t);
}

static void test_service_least_inflight(void **state)
{
    struct cw_route_table *t = table_from(SERVICES, 0);
    struct cw_service_pick p;
    (void)state;
    assert_int_equal(cw_route_table_service_pick(t, "least", NULL, &p), CW_OK);
    cw_route_table_backend_load(t, p.service, 0, 3);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(cw_route_table_service_pick(t, "least", NULL, &p),
                         CW_OK);
        assert_int_equal(p.backend, 1);
        assert_string_equal(p.address, "ucx+tcp://10.2.0.6:1");
    }
    /* Passive ejection: eject_after (3) failures; the third reports it. */
    for (int i = 0; i < 3; i++)
        assert_int_equal(cw_route_table_backend_report(t, p.service, 1, false),
                         i == 2 ? CW_HEALTH_DOWN : CW_HEALTH_SAME);
    assert_string_equal(cw_route_table_backend_address(t, p.service, 1),
                        "ucx+tcp://10.2.0.6:1");
    assert_null(cw_route_table_backend_address(t, p.service, 99));
    assert_int_equal(cw_route_table_backend_report(t, p.service, 99, false),
                     CW_HEALTH_SAME);
    assert_int_equal(cw_route_table_service_pick(t, "least", NULL, &p), CW_OK);
    assert_int_equal(p.backend, 0);
    /* recover_after (default) successes bring it back, reported once. */
    {
        unsigned ups = 0;
        for (int i = 0; i < 16; i++)
            ups += cw_route_table_backend_report(t, p.service, 1, true) ==
                   CW_HEALTH_UP;
        assert_int_equal(ups, 1);
        assert_true(cw_route_table_backend_is_up(t, p.service, 1));
    }
    cw_route_table_unref(t);
}

static void test_service_hash_sticky(void **state)
{
    struct cw_route_table *t = table_from(SERVICES, 0);
    struct cw_service_pick p;
    unsigned first[64];
    unsigned used[4] = {0};
    unsigned moved = 0;
    (void)state;
    for (int c = 0; c < 64; c++) {
        char caller[32];
        snprintf(caller, sizeof(caller), "ofi+tcp://10.1.%d.1:7000", c);
        assert_int_equal(cw_route_table_service_pick(t, "sticky", caller, &p),
                         CW_OK);
        first[c] = p.backend;
        used[p.backend]++;
        for (int k = 0; k < 5; k++) {
            assert_int_equal(
                cw_route_table_service_pick(t, "sticky", caller, &p), CW_OK);
            assert_int_equal(p.backend, first[c]);
        }
    }
    for (int b = 0; b < 4; b++)
        assert_true(used[b] > 0);
    /* Ejecting one backend moves only its callers. */
    cw_route_table_backend_set_ejected(t, p.service, 2, true);
    for (int c = 0; c < 64; c++) {
        char caller[32];
        snprintf(caller, sizeof(caller), "ofi+tcp://10.1.%d.1:7000", c);
        cw_route_table_service_pick(t, "sticky", caller, &p);
        assert_int_not_equal(p.backend, 2);
        if (p.backend != first[c]) {
            assert_int_equal(first[c], 2);
            moved++;
        }
    }
    assert_int_equal(moved, used[2]);
    cw_route_table_unref(t);
}

static void test_acl(void **state)
{
    struct cw_route_table *open_t = table_from(NETS, 0);
    struct cw_route_table *t = table_from(
        NETS "services:\n"
             "  - { name: storage, backends: [\"ucx+tcp://10.2.0.5:1\"] }\n"
             "  - { name: meta, backends: [\"ucx+tcp://10.2.0.6:1\"] }\n"
             "acl:\n"
             "  - { from: eth0, to: ib0, allow: [\"svc:storage\", "
             "\"ucx+tcp://10.2.0.0/16\"] }\n"
             "  - { from: ib0, allow: [\"*\"] }\n",
        0);
    struct cw_route_table *deny = table_from(NETS "acl: []\n", 0);
    (void)state;
    assert_int_equal(cw_route_table_acl_check(open_t, "eth0", "ib0", "svc:x"),
                     CW_OK);
    assert_int_equal(
        cw_route_table_acl_check(open_t, "eth0", NULL, "ucx+tcp://1.1.1.1:1"),
        CW_OK);
    assert_int_equal(cw_route_table_acl_check(t, "eth0", "ib0", "svc:storage"),
                     CW_OK);
    assert_int_equal(cw_route_table_acl_check(t, "eth0", "ib0", "svc:meta"),
                     CW_DENIED);
    assert_int_equal(
        cw_route_table_acl_check(t, "eth0", "ib0", "ucx+tcp://10.2.3.4:1"),
        CW_OK);
    assert_int_equal(
        cw_route_table_acl_check(t, "eth0", "ib0", "ucx+tcp://10.3.3.4:1"),
        CW_DENIED);
    assert_int_equal(
        cw_route_table_acl_check(t, "eth0", "eth0", "ucx+tcp://10.2.3.4:1"),
        CW_DENIED);
    assert_int_equal(
        cw_route_table_acl_check(t, "ib0", "eth0", "ofi+tcp://1.2.3.4:1"),
        CW_OK);
    assert_int_equal(cw_route_table_acl_check(t, "ib0", NULL, "svc:meta"),
                     CW_OK);
    assert_int_equal(cw_route_table_acl_check(t, NULL, NULL, "svc:meta"),
                     CW_DENIED);
    assert_int_equal(cw_route_table_acl_check(t, "eth0", "ib0", "garbage"),
                     CW_INVALID_ARG);
    assert_int_equal(
        cw_route_table_acl_check(deny, "eth0", "ib0", "svc:storage"),
        CW_DENIED);
    /* The same questions with the destination parsed beforehand. */
    {
        struct cw_uri in16, out16;
        assert_int_equal(cw_uri_parse("ucx+tcp://10.2.3.4:1", &in16), CW_OK);
        assert_int_equal(cw_uri_parse("ucx+tcp://10.3.3.4:1", &out16), CW_OK);
        assert_int_equal(
            cw_route_table_acl_check_parsed(open_t, "eth0", "ib0", "x", NULL),
            CW_OK);
        assert_int_equal(
            cw_route_table_acl_check_parsed(t, "eth0", "ib0", "storage", NULL),
            CW_OK);
        assert_int_equal(
            cw_route_table_acl_check_parsed(t, "eth0", "ib0", "meta", NULL),
            CW_DENIED);
        assert_int_equal(
            cw_route_table_acl_check_parsed(t, "eth0", "ib0", NULL, &in16),
            CW_OK);
        assert_int_equal(
            cw_route_table_acl_check_parsed(t, "eth0", "ib0", NULL, &out16),
            CW_DENIED);
        assert_int_equal(
            cw_route_table_acl_check_parsed(t, "ib0", NULL, "meta", NULL),
            CW_OK);
        assert_int_equal(cw_route_table_acl_check_parsed(deny, "eth0", "ib0",
                                                         "storage", NULL),
                         CW_DENIED);
        /* Exactly one of a service and an address. */
        assert_int_equal(
            cw_route_table_acl_check_parsed(t, "eth0", "ib0", NULL, NULL),
            CW_INVALID_ARG);
        assert_int_equal(
            cw_route_table_acl_check_parsed(t, "eth0", "ib0", "storage", &in16),
            CW_INVALID_ARG);
        assert_int_equal(cw_route_table_acl_check_parsed(NULL, "eth0", "ib0",
                                                         "storage", NULL),
                         CW_INVALID_ARG);
    }
    cw_route_table_unref(open_t);
    cw_route_table_unref(t);
    cw_route_table_unref(deny);
}

static void test_client_routes(void **state)
{
    char path[] = "/tmp/cw-client-routes-XXXXXX";
    const char *yaml = "routes:\n"
                       "  - { dest: \"ucx+tcp://10.2.0.0/16\", gateway: "
                       "\"ofi+tcp://10.1.0.1:7000\" }\n"
                       "  - { dest: \"ucx+tcp://10.2.9.0/24\", via: direct }\n";
    struct cw_route_table *t = NULL;
    struct cw_config_diag *diag = cw_config_diag_new();
    char gw[CW_URI_MAX];
    bool direct;
    int fd = mkstemp(path);
    (void)state;
    assert_true(fd >= 0);
    assert_int_equal(write(fd, yaml, strlen(yaml)), (ssize_t)strlen(yaml));
    close(fd);
    unsetenv("CAUSEWAY_ROUTES");
    assert_int_equal(cw_route_table_load_client(NULL, diag, &t), CW_NOENT);
    setenv("CAUSEWAY_ROUTES", path, 1);
    assert_int_equal(cw_route_table_load_client(NULL, diag, &t), CW_OK);
    assert_int_equal(cw_route_table_client_lookup(t, "ucx+tcp://10.2.3.4:7000",
                                                  gw, sizeof(gw), &direct),
                     CW_OK);
    assert_false(direct);
    assert_string_equal(gw, "ofi+tcp://10.1.0.1:7000");
    assert_int_equal(cw_route_table_client_lookup(t, "ucx+tcp://10.2.9.4:7000",
                                                  gw, sizeof(gw), &direct),
                     CW_OK);
    assert_true(direct);
    assert_int_equal(cw_route_table_client_lookup(t, "ofi+tcp://1.2.3.4:7000",
                                                  gw, sizeof(gw), &direct),
                     CW_OK);
    assert_true(direct);
    assert_int_equal(cw_route_table_client_lookup(t, "ucx+tcp://10.2.3.4:7000",
                                                  gw, 4, &direct),
                     CW_OVERFLOW);
    assert_int_equal(
        cw_route_table_client_lookup(t, "nonsense", gw, sizeof(gw), &direct),
        CW_INVALID_ARG);
    cw_route_table_unref(t);
    /* A gateway file is not a client routes file. */
    setenv("CAUSEWAY_ROUTES", "/nonexistent/routes.yaml", 1);
    assert_int_equal(cw_route_table_load_client(NULL, diag, &t), CW_IO);
    unsetenv("CAUSEWAY_ROUTES");
    unlink(path);
    cw_config_diag_free(diag);
}

static void test_refcount(void **state)
{
    struct cw_route_table *t = table_from(NETS, 0);
    struct cw_route_table *held = cw_route_table_ref(t);
    (void)state;
    /* The swapper drops its reference; the holder still uses the table. */
    cw_route_table_unref(t);
    assert_string_equal(pick(held, "ofi+tcp://10.1.0.9:1"), "eth0");
    cw_route_table_unref(held);
    cw_route_table_unref(NULL);
    assert_null(cw_route_table_ref(NULL));
}

static void test_explain(void **state)
{
    struct cw_route_table *t = table_from(
        NETS
        "routes:\n"
        "  - { dest: \"ofi+cxi://*\", gateway: \"ofi+tcp://10.1.0.2:1\" }\n"
        "  - { dest: \"ofi+cxi://10.0.0.0/8\", gateway: "
        "\"ofi+tcp://10.1.0.3:1\", priority: 1 }\n"
        "  - { dest: \"ofi+cxi://10.0.0.0/8\", gateway: "
        "\"ofi+tcp://10.1.0.4:1\", priority: 2 }\n"
        "services:\n"
        "  - { name: s, backends: [\"ofi+cxi://10.1.1.1:1\"] }\n",
        0);
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    (void)state;
    assert_int_equal(cw_route_table_explain(t, "ofi+cxi://10.1.2.3:1", mem),
                     CW_OK);
    assert_int_equal(cw_route_table_explain(t, "svc:s", mem), CW_OK);
    assert_int_equal(cw_route_table_explain(
                         t, "ofi+cxi://10.1.2.3:1@ofi+tcp://10.1.0.2:1", mem),
                     CW_OK);
    assert_int_equal(cw_route_table_explain(t, "shm://x", mem), CW_NO_ROUTE);
    assert_int_equal(cw_route_table_explain(t, "::bad::", mem), CW_INVALID_ARG);
    fclose(mem);
    assert_non_null(strstr(
        buf, "ofi+cxi://10.1.2.3:1 gateway ofi+tcp://10.1.0.3:1 dev eth0"));
    assert_non_null(strstr(buf, "lowest priority 1"));
    assert_non_null(strstr(buf, "test.yaml:7:5"));
    assert_non_null(strstr(buf, "[chosen]"));
    assert_non_null(strstr(buf, "service 's'"));
    assert_non_null(
        strstr(buf, "proxied address; the first hop is ofi+tcp://10.1.0.2:1"));
    assert_non_null(strstr(buf, "shm://x: no route"));
    free(buf);
    cw_route_table_unref(t);
}

/* Brackets balance outside strings, and every string ends: what a JSON
 * object needs of its shape (the integration tests parse it with jq). */
static void assert_json_shape(const char *s)
{
    int depth = 0;
    bool str = false;

    assert_int_equal(s[0], '{');
    for (; *s != '\0'; s++) {
        if (str && *s == '\\' && s[1] != '\0')
            s++;
        else if (*s == '"')
            str = !str;
        else if (!str && (*s == '{' || *s == '['))
            depth++;
        else if (!str && (*s == '}' || *s == ']'))
            assert_true(--depth >= 0);
    }
    assert_false(str);
    assert_int_equal(depth, 0);
}

static char *explain_json(struct cw_route_table *t, const char *addr,
                          cw_status_t want)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);

    assert_non_null(mem);
    assert_int_equal(cw_route_table_explain_json(t, addr, mem), want);
    fclose(mem);
    assert_json_shape(buf);
    return buf;
}

static void test_explain_json(void **state)
{
    struct cw_route_table *t = table_from(
        NETS "routes:\n"
             "  - { dest: \"ofi+cxi://10.0.0.0/8\", gateway: "
             "\"ofi+tcp://10.1.0.3:1\", priority: 1 }\n"
             "  - { dest: \"ofi+cxi://10.0.0.0/8\", gateway: "
             "\"ofi+tcp://10.1.0.4:1\", priority: 2 }\n"
             "services:\n"
             "  - { name: s, backends: [\"ofi+cxi://10.1.1.1:1\"] }\n",
        0);
    static const struct {
        const char *addr;
        cw_status_t st;
        const char *want;
    } cases[] = {
        {"ofi+cxi://10.1.2.3:1", CW_OK,
         "\"result\":\"route\",\"kind\":\"gateway\","
         "\"nexthop\":\"ofi+tcp://10.1.0.3:1\",\"network\":\"eth0\""},
        {"ofi+cxi://10.1.2.3:1", CW_OK,
         "\"chosen\":true,\"route\":\"routes[0]\",\"file\":\"test.yaml\","
         "\"line\":5"},
        {"ofi+cxi://10.1.2.3:1", CW_OK,
         "\"why\":\"most specific matching dest"},
        {"svc:s", CW_OK, "\"service\":{\"name\":\"s\",\"backends\":1,"},
        {"ofi+cxi://10.1.2.3:1@ofi+tcp://10.1.0.2:1", CW_OK,
         "\"gateways\":1,\"target\":\"ofi+tcp://10.1.0.2:1\""},
        {"shm://x", CW_NO_ROUTE, "\"result\":\"no_route\""},
        {"svc:none", CW_NOENT, "\"result\":\"no_service\""},
        {"::\"bad::", CW_INVALID_ARG,
         "\"address\":\"::\\\"bad::\",\"result\":\"invalid\""},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *b = explain_json(t, cases[i].addr, cases[i].st);
        if (strstr(b, cases[i].want) == NULL)
            fail_msg("%s: no %s in %s", cases[i].addr, cases[i].want, b);
        free(b);
    }
    cw_route_table_unref(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_longest_prefix),
        cmocka_unit_test(test_no_route_and_bad_input),
        cmocka_unit_test(test_priority_then_hop),
        cmocka_unit_test(test_all_down_and_fallback),
        cmocka_unit_test(test_lookup_memo),
        cmocka_unit_test(test_round_robin_fairness),
        cmocka_unit_test(test_least_loaded_and_healthiest),
        cmocka_unit_test(test_two_networks_one_fabric),
        cmocka_unit_test(test_ipv6_and_device_locations),
        cmocka_unit_test(test_service_round_robin),
        cmocka_unit_test(test_service_least_inflight),
        cmocka_unit_test(test_service_hash_sticky),
        cmocka_unit_test(test_acl),
        cmocka_unit_test(test_client_routes),
        cmocka_unit_test(test_refcount),
        cmocka_unit_test(test_explain),
        cmocka_unit_test(test_explain_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
