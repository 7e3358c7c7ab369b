/* Address parsing: plain URIs, proxied paths, services, hostile input. */
#include <causeway/addr.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static void test_uri_plain(void **state)
{
    struct cw_uri u;
    char buf[CW_URI_MAX];

    assert_int_equal(cw_uri_parse("ofi+tcp://10.1.0.5:7000", &u), CW_OK);
    assert_string_equal(u.plugin, "ofi");
    assert_string_equal(u.protocol, "tcp");
    assert_string_equal(u.location, "10.1.0.5:7000");
    assert_int_equal(cw_uri_format(&u, buf, sizeof(buf)), CW_OK);
    assert_string_equal(buf, "ofi+tcp://10.1.0.5:7000");

    assert_int_equal(cw_uri_parse("shm://demo", &u), CW_OK);
    assert_string_equal(u.plugin, "shm");
    assert_string_equal(u.protocol, "");
    assert_string_equal(u.location, "demo");
    assert_int_equal(cw_uri_format(&u, buf, sizeof(buf)), CW_OK);
    assert_string_equal(buf, "shm://demo");

    assert_int_equal(cw_uri_parse("verbs://mlx5_0:1/10.3.0.4:7000", &u), CW_OK);
    assert_string_equal(u.location, "mlx5_0:1/10.3.0.4:7000");
    assert_int_equal(cw_uri_parse("ofi+tcp;ofi_rxm://h:1", &u), CW_OK);
    assert_string_equal(u.protocol, "tcp;ofi_rxm");
    assert_int_equal(cw_uri_parse("ucx+tcp://", &u), CW_OK);
    assert_string_equal(u.location, "");
    assert_int_equal(cw_uri_format(&u, buf, 5), CW_OVERFLOW);
    assert_string_equal(buf, "ucx+"); /* cut, terminated, as snprintf */
    assert_int_equal(cw_uri_format(&u, buf, 11), CW_OK);
    assert_string_equal(buf, "ucx+tcp://");
    assert_int_equal(cw_uri_format(&u, buf, 1), CW_OVERFLOW);
    assert_string_equal(buf, "");
    assert_int_equal(cw_uri_format(&u, buf, 9), CW_OVERFLOW);
    assert_string_equal(buf, "ucx+tcp:");
}

static void test_uri_bad(void **state)
{
    static const char *const bad[] = {
        "",
        "ofi",
        "ofi+tcp:/x",
        "://x",
        "+tcp://x",
        "ofi+://x",
        "OFI+tcp://x",
        "of i://x",
        "ofi+tcp://a b",
        "ofi+tcp://a@b",
        "ofi+tcp://a\tb",
        "ofi+t/cp://x",
        "averyveryverylongpluginname://x",
        "ofi+tcp://\x01",
    };
    struct cw_uri u;
    char err[256];

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        assert_int_equal(cw_uri_parse_err(bad[i], &u, err, sizeof(err)),
                         CW_INVALID_ARG);
        assert_true(strlen(err) > 0);
    }
    assert_int_equal(cw_uri_parse(NULL, &u), CW_INVALID_ARG);
    assert_int_equal(cw_uri_parse("shm://x", NULL), CW_INVALID_ARG);
}

static void test_uri_long(void **state)
{
    char s[400];
    struct cw_uri u;

    memset(s, 'a', sizeof(s));
    memcpy(s, "shm://", 6);
    s[6 + CW_URI_LOCATION_MAX - 1] = '\0'; /* exactly max location length */
    assert_int_equal(cw_uri_parse(s, &u), CW_OK);
    s[6 + CW_URI_LOCATION_MAX - 1] = 'a';
    s[6 + CW_URI_LOCATION_MAX] = '\0';
    assert_int_equal(cw_uri_parse(s, &u), CW_INVALID_ARG);
}

static void test_location_split(void **state)
{
    char host[CW_URI_LOCATION_MAX];
    uint16_t port;

    assert_int_equal(cw_location_split("10.0.0.1:7000", host, &port), CW_OK);
    assert_string_equal(host, "10.0.0.1");
    assert_int_equal(port, 7000);
    assert_int_equal(cw_location_split("eth0", host, &port), CW_OK);
    assert_string_equal(host, "eth0");
    assert_int_equal(port, 0);
    assert_int_equal(cw_location_split("[::1]:99", host, &port), CW_OK);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 99);
    assert_int_equal(cw_location_split("[::1]", host, &port), CW_OK);
    assert_int_equal(cw_location_split("h:65536", host, &port), CW_INVALID_ARG);
    assert_int_equal(cw_location_split("h:", host, &port), CW_INVALID_ARG);
    assert_int_equal(cw_location_split("h:12x", host, &port), CW_INVALID_ARG);
    assert_int_equal(cw_location_split("[::1", host, &port), CW_INVALID_ARG);
    assert_int_equal(cw_location_split("[::1]x", host, &port), CW_INVALID_ARG);
    assert_int_equal(cw_location_split("h:-1", host, &port), CW_INVALID_ARG);
}

static void test_path_proxied(void **state)
{
    struct cw_addr_path p;
    char buf[CW_ADDR_STR_MAX];
    char err[256];
    const char *s = "ucx+tcp://10.2.0.9:7000@ofi+tcp://10.1.0.2:7000@shm://gw1";

    assert_int_equal(cw_addr_path_parse(s, &p, err, sizeof(err)), CW_OK);
    assert_false(p.is_service);
    assert_string_equal(p.target.plugin, "ucx");
    assert_string_equal(p.target.location, "10.2.0.9:7000");
    assert_int_equal(p.nhops, 2);
    /* Rightmost hop is contacted first. */
    assert_string_equal(p.hops[0].plugin, "shm");
    assert_string_equal(p.hops[0].location, "gw1");
    assert_string_equal(p.hops[1].plugin, "ofi");
    assert_int_equal(cw_addr_path_format(&p, buf, sizeof(buf)), CW_OK);
    assert_string_equal(buf, s);

    assert_int_equal(cw_addr_path_parse("shm://a", &p, NULL, 0), CW_OK);
    assert_int_equal(p.nhops, 0);
    assert_int_equal(cw_addr_path_format(&p, buf, sizeof(buf)), CW_OK);
    assert_string_equal(buf, "shm://a");
}

static void test_path_service(void **state)
{
    struct cw_addr_path p;
    char buf[CW_ADDR_STR_MAX];
    char err[256];

    assert_int_equal(cw_addr_path_parse("svc:storage@ofi+tcp://1.2.3.4:5", &p,
                                        err, sizeof(err)),
                     CW_OK);
    assert_true(p.is_service);
    assert_string_equal(p.service, "storage");
    assert_int_equal(p.nhops, 1);
    assert_int_equal(cw_addr_path_format(&p, buf, sizeof(buf)), CW_OK);
    assert_string_equal(buf, "svc:storage@ofi+tcp://1.2.3.4:5");
    /* A service needs a gateway to resolve it. */
    assert_int_equal(cw_addr_path_parse("svc:storage", &p, err, sizeof(err)),
                     CW_INVALID_ARG);
    assert_non_null(strstr(err, "gateway"));
    assert_int_equal(cw_addr_path_parse("svc:@shm://g", &p, err, sizeof(err)),
                     CW_INVALID_ARG);
    assert_int_equal(
        cw_addr_path_parse("svc:a b@shm://g", &p, err, sizeof(err)),
        CW_INVALID_ARG);
}

static void test_path_bad(void **state)
{
    static const char *const bad[] = {
        "shm://a@",     "shm://a@@shm://b", "@shm://a",
        "shm://a@junk", "shm://a@shm://b@", "junk@shm://g",
    };
    struct cw_addr_path p;
    char err[256];
    char many[4096] = "shm://t";

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        assert_int_equal(cw_addr_path_parse(bad[i], &p, err, sizeof(err)),
                         CW_INVALID_ARG);
        assert_true(strlen(err) > 0);
    }
    for (int i = 0; i < CW_ADDR_MAX_HOPS; i++)
        strcat(many, "@shm://g");
    assert_int_equal(cw_addr_path_parse(many, &p, err, sizeof(err)), CW_OK);
    assert_int_equal(p.nhops, CW_ADDR_MAX_HOPS);
    strcat(many, "@shm://g");
    assert_int_equal(cw_addr_path_parse(many, &p, err, sizeof(err)),
                     CW_INVALID_ARG);
}

/* Random strings never crash the parser, and whatever parses formats back
 * to something that parses to the same thing. */
static void test_path_random(void **state)
{
    static const char alphabet[] = "shmofi+tcp:/@svc.0123456789ab_-*[] \x01";
    char s[128];
    struct cw_addr_path p, q;
    char buf[CW_ADDR_STR_MAX];

    srand(1234);
    for (int round = 0; round < 200000; round++) {
        size_t len = (size_t)rand() % (sizeof(s) - 1);
        for (size_t i = 0; i < len; i++)
            s[i] = alphabet[(size_t)rand() % (sizeof(alphabet) - 1)];
        s[len] = '\0';
        if (round % 3 == 0 && len > 10)
            memcpy(s, "shm://", 6);
        if (cw_addr_path_parse(s, &p, NULL, 0) != CW_OK)
            continue;
        assert_int_equal(cw_addr_path_format(&p, buf, sizeof(buf)), CW_OK);
        assert_int_equal(cw_addr_path_parse(buf, &q, NULL, 0), CW_OK);
        assert_memory_equal(&p, &q, sizeof(p));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uri_plain),
        cmocka_unit_test(test_uri_bad),
        cmocka_unit_test(test_uri_long),
        cmocka_unit_test(test_location_split),
        cmocka_unit_test(test_path_proxied),
        cmocka_unit_test(test_path_service),
        cmocka_unit_test(test_path_bad),
        cmocka_unit_test(test_path_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
