/* Config API: patterns, reload rules, load failures leave nothing behind,
 * and the schema's every key documented in docs/config.md (cmocka). */
#include <causeway/config.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static const char *docs_path;

static struct cw_config *load(const char *yaml, struct cw_config_diag *diag)
{
    struct cw_config *cfg = NULL;

    if (cw_config_load_buffer("t.yaml", yaml, strlen(yaml), 0, diag, &cfg) !=
        CW_OK)
        return NULL;
    return cfg;
}

static void test_patterns(void **state)
{
    static const struct {
        const char *pattern;
        const char *addr;
        bool match;
    } cases[] = {
        {"ucx+tcp://10.2.0.0/16", "ucx+tcp://10.2.255.1:7000", true},
        {"ucx+tcp://10.2.0.0/16", "ucx+tcp://10.3.0.1:7000", false},
        {"ucx+tcp://10.2.0.0/16", "ucx+rc://10.2.0.1:7000", false},
        {"ucx+*://10.2.0.0/16", "ucx+rc://10.2.0.1:7000", true},
        {"ucx+*://10.2.0.0/16", "ucx://10.2.0.1:7000", true},
        {"ucx://10.2.0.0/16", "ucx+tcp://10.2.0.1:7000", false},
        {"ucx://10.2.0.0/16", "ucx://10.2.0.1:7000", true},
        {"*://*", "shm://anything", true},
        {"*", "verbs://mlx5_0:1/1.2.3.4:5", true},
        {"*+tcp://*", "ofi+tcp://h:1", true},
        {"*+tcp://*", "ofi+rxm://h:1", false},
        {"ofi+tcp://node1", "ofi+tcp://node1:7000", true},
        {"ofi+tcp://node1:7000", "ofi+tcp://node1:7001", false},
        {"ofi+tcp://10.0.0.0/0", "ofi+tcp://192.168.1.1:1", true},
        {"ofi+tcp://10.1.2.3/32", "ofi+tcp://10.1.2.3:1", true},
        {"ofi+tcp://10.1.2.0/23", "ofi+tcp://10.1.3.9:1", true},
        {"ofi+tcp://10.1.2.0/23", "ofi+tcp://10.1.4.9:1", false},
        {"ofi+tcp://fd00::/8", "ofi+tcp://[fd12::1]:7000", true},
        {"ofi+tcp://fd00::/8", "ofi+tcp://10.0.0.1:7000", false},
        {"ofi+tcp://[fd00::1]:7000", "ofi+tcp://[fd00::1]:7000", true},
        {"verbs://10.3.0.0/16", "verbs://mlx5_0:1/10.3.4.5:7000", true},
        {"verbs://mlx5_0:1/10.3.4.5:7000", "verbs://mlx5_0:1/10.3.4.5:7000",
         true},
        {"verbs://mlx5_0:1/10.3.4.5:7000", "verbs://mlx5_1:1/10.3.4.5:7000",
         false},
        {"shm://gw1", "shm://gw1", true},
        {"shm://gw1", "shm://gw2", false},
    };
    static const char *const bad[] = {
        "",
        "ofi+tcp",
        "ofi+tcp://",
        "OFI://*",
        "ofi+://*",
        "ofi+tcp://1.*",
        "ofi+tcp://10.0.0.0/33",
        "ofi+tcp://fd00::/129",
        "ofi+tcp://x y",
        "ofi+tcp://a@b",
        "ofi+tcp://300.0.0.0/8",
        "ofi+tcp:///8",
        "waytoolongpluginname+tcp://*",
        "ucx+tcp://fd00::1",
        "ofi+tcp://fd00::1:7000", /* IPv6 without brackets: ambiguous */
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct cw_addr_pattern pat;
        struct cw_uri uri;
        char err[256];
        assert_int_equal(
            cw_addr_pattern_parse(cases[i].pattern, &pat, err, sizeof(err)),
            CW_OK);
        assert_int_equal(cw_uri_parse(cases[i].addr, &uri), CW_OK);
        if (cw_addr_pattern_match(&pat, &uri) != cases[i].match)
            fail_msg("%s vs %s: expected %s", cases[i].pattern, cases[i].addr,
                     cases[i].match ? "match" : "no match");
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct cw_addr_pattern pat;
        char err[256] = "";
        if (cw_addr_pattern_parse(bad[i], &pat, err, sizeof(err)) == CW_OK)
            fail_msg("'%s' parsed", bad[i]);
        assert_true(err[0] != '\0');
    }
}

static void test_pattern_format(void **state)
{
    static const char *const pats[] = {
        "ucx+tcp://10.2.0.0/16",
        "*://*",
        "ofi+*://fd00::/8",
        "ofi+tcp://node1:7000",
        "ofi+tcp://[fd00::1]:7000",
        "shm://gw1",
        "ofi://host",
        "ucx+tcp://[fd00::1]", /* not "fd00::1": host "fd00:" */
    };
    (void)state;
    for (size_t i = 0; i < sizeof(pats) / sizeof(pats[0]); i++) {
        struct cw_addr_pattern a, b;
        char buf[CW_URI_MAX];
        assert_int_equal(cw_addr_pattern_parse(pats[i], &a, NULL, 0), CW_OK);
        assert_int_equal(cw_addr_pattern_format(&a, buf, sizeof(buf)), CW_OK);
        assert_string_equal(buf, pats[i]);
        assert_int_equal(cw_addr_pattern_parse(buf, &b, NULL, 0), CW_OK);
        assert_memory_equal(&a, &b, sizeof(a));
        assert_int_equal(cw_addr_pattern_format(&a, buf, 4), CW_OVERFLOW);
    }
    /* A host with ':' that fits only without its brackets is refused: its
     * canonical form would not parse back (found by fuzz-rpc-wire). */
    {
        char s[CW_URI_MAX], err[256] = "";
        struct cw_addr_pattern a;
        int n = snprintf(s, sizeof(s), "ofi+tcp://");

        memset(s + n, 'a', CW_URI_LOCATION_MAX - 5);
        memcpy(s + n + CW_URI_LOCATION_MAX - 5, ":b:1", 5);
        assert_int_equal(cw_addr_pattern_parse(s, &a, err, sizeof(err)),
                         CW_INVALID_ARG);
        assert_non_null(strstr(err, "canonical"));
    }
}

#define BASE                                                                   \
    "networks:\n  - { name: eth0, address: \"ofi+tcp://127.0.0.1:7000\" }\n"

static void test_reload_rules(void **state)
{
    struct cw_config_diag *diag = cw_config_diag_new();
    struct cw_config *cur = load(BASE "gateway: { threads: 2 }\n", diag);
    struct cw_config *ok =
        load(BASE "gateway: { threads: 2, log_level: debug }\n"
                  "routes: [ { dest: \"*\", via: eth0 } ]\n"
                  "limits: { max_inflight_rpcs: 10 }\n",
             diag);
    struct cw_config *bad1 = load(BASE "gateway: { threads: 3 }\n", diag);
    struct cw_config *bad2 = load(
        "networks:\n  - { name: eth0, address: \"ofi+tcp://127.0.0.1:7001\", "
        "busy_poll: true }\n  - { name: eth1, address: \"shm://x\" }\n"
        "gateway: { threads: 2 }\nbuffers: { chunk: 2MiB }\n",
        diag);
    (void)state;
    assert_non_null(cur);
    assert_non_null(ok);
    assert_non_null(bad1);
    assert_non_null(bad2);
    assert_int_equal(cw_config_diag_count(diag), 0);
    assert_int_equal(cw_config_check_reload(cur, ok, diag), CW_OK);
    assert_int_equal(cw_config_diag_count(diag), 0);
    assert_int_equal(cw_config_check_reload(cur, bad1, diag), CW_CONFIG);
    assert_string_equal(cw_config_diag_get(diag, 0),
                        "t.yaml:3:10: gateway.threads: cannot be changed by a "
                        "reload (restart the gateway)");
    cw_config_diag_clear(diag);
    /* A network's address may change (the gateway reopens it); its
     * busy_poll may not; buffers may not. */
    assert_int_equal(cw_config_check_reload(cur, bad2, diag), CW_CONFIG);
    assert_int_equal(cw_config_diag_count(diag), 2);
    assert_string_equal(cw_config_diag_get(diag, 0),
                        "t.yaml:2:5: networks[0].busy_poll: cannot be changed "
                        "by a reload (restart the gateway)");
    assert_non_null(
        strstr(cw_config_diag_get(diag, 1), "buffers.chunk: cannot"));
    assert_null(cw_config_diag_get(diag, 2));
    cw_config_free(cur);
    cw_config_free(ok);
    cw_config_free(bad1);
    cw_config_free(bad2);
    cw_config_diag_free(diag);
}

static void test_failed_load_leaves_nothing(void **state)
{
    struct cw_config_diag *diag = cw_config_diag_new();
    struct cw_config *cfg = (struct cw_config *)(uintptr_t)0x1;
    (void)state;
    /* Half the file is fine; the output must stay untouched. */
    assert_int_equal(cw_config_load_buffer("t.yaml", BASE "routes: 5\n",
                                           strlen(BASE "routes: 5\n"), 0, diag,
                                           &cfg),
                     CW_CONFIG);
    assert_ptr_equal(cfg, (struct cw_config *)(uintptr_t)0x1);
    assert_int_equal(cw_config_diag_count(diag), 1);
    assert_int_equal(cw_config_load("/nonexistent.yaml", 0, diag, &cfg), CW_IO);
    assert_int_equal(cw_config_load_buffer(NULL, "", 0, 0, diag, &cfg),
                     CW_INVALID_ARG);
    assert_int_equal(cw_config_load("/", 0, diag, &cfg), CW_IO);
    cw_config_diag_free(diag);
}

static void test_defaults_and_lookups(void **state)
{
    struct cw_config_diag *diag = cw_config_diag_new();
    struct cw_config *cfg =
        load(BASE "services: [ { name: s, backends: [\"shm://x\"] } ]\n", diag);
    (void)state;
    assert_non_null(cfg);
    assert_int_equal(cfg->buffers.chunk, 1024 * 1024);
    assert_int_equal(cfg->buffers.depth, 8);
    assert_int_equal(cfg->limits.default_timeout_ns, 30000000000ull);
    assert_int_equal(cfg->health.timeout_ns, 500000000ull);
    assert_int_equal(cfg->gateway.threads, 0); /* auto */
    assert_false(cfg->has_acl);
    assert_int_equal(cw_config_network_find(cfg, "eth0"), 0);
    assert_int_equal(cw_config_network_find(cfg, "eth1"), -1);
    assert_int_equal(cw_config_service_find(cfg, "s"), 0);
    assert_int_equal(cw_config_service_find(cfg, NULL), -1);
    assert_string_equal(cfg->networks[0].uri.plugin, "ofi");
    assert_int_equal(cfg->networks[0].loc.line, 2);
    cw_config_free(cfg);
    cw_config_free(NULL);
    cw_config_diag_free(diag);
}

/* Every section and key of the schema appears in docs/config.md, and the
 * generated reference tables there are current. */
static void test_docs_cover_schema(void **state)
{
    FILE *f = fopen(docs_path, "re");
    char *doc = NULL;
    size_t len = 0;
    char *gen = NULL;
    size_t glen = 0;
    FILE *mem;
    size_t nsec;
    const struct cw_config_section *sec = cw_config_schema(&nsec);
    (void)state;
    assert_non_null(f);
    mem = open_memstream(&doc, &len);
    for (int c; (c = fgetc(f)) != EOF;)
        fputc(c, mem);
    fclose(mem);
    fclose(f);
    for (size_t s = 0; s < nsec; s++) {
        char want[128];
        snprintf(want, sizeof(want), "### `%s`", sec[s].name);
        if (strstr(doc, want) == NULL)
            fail_msg("docs/config.md lacks section %s", sec[s].name);
        for (size_t k = 0; k < sec[s].nkeys; k++) {
            snprintf(want, sizeof(want), "| `%s` |", sec[s].keys[k].name);
            if (strstr(doc, want) == NULL)
                fail_msg("docs/config.md lacks %s.%s", sec[s].name,
                         sec[s].keys[k].name);
        }
    }
    mem = open_memstream(&gen, &glen);
    cw_config_schema_markdown(mem);
    fclose(mem);
    if (strstr(doc, gen) == NULL)
        fail_msg("docs/config.md reference tables are stale: regenerate with "
                 "causewayd --schema");
    free(gen);
    free(doc);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_patterns),
        cmocka_unit_test(test_pattern_format),
        cmocka_unit_test(test_reload_rules),
        cmocka_unit_test(test_failed_load_leaves_nothing),
        cmocka_unit_test(test_defaults_and_lookups),
        cmocka_unit_test(test_docs_cover_schema),
    };
    docs_path = argc > 1 ? argv[1] : "docs/config.md";
    return cmocka_run_group_tests(tests, NULL, NULL);
}
