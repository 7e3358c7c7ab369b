/*
 * Plugin loader: every check refuses a broken module with a reason, the
 * search path finds the build tree, unknown plugins name what was tried.
 * argv[1] is the directory holding the bad-*.so modules.
 */
#include <causeway/na.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static const char *bad_dir;

static cw_status_t load_bad(const char *which, char *err, size_t len)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s.so", bad_dir, which);
    err[0] = '\0';
    return cw_plugins_load_file(path, err, len);
}

static void test_bad_modules(void **state)
{
    char err[512];

    assert_int_equal(load_bad("bad-abi", err, sizeof(err)), CW_VERSION);
    assert_non_null(strstr(err, "ABI version"));
    assert_int_equal(load_bad("bad-size", err, sizeof(err)), CW_VERSION);
    assert_non_null(strstr(err, "ops table"));
    assert_int_equal(load_bad("bad-ops", err, sizeof(err)), CW_INVALID_ARG);
    assert_non_null(strstr(err, "mandatory op"));
    assert_int_equal(load_bad("bad-rma", err, sizeof(err)), CW_INVALID_ARG);
    assert_non_null(strstr(err, "all or none"));
    assert_int_equal(load_bad("bad-name", err, sizeof(err)), CW_INVALID_ARG);
    assert_int_equal(load_bad("bad-nosym", err, sizeof(err)), CW_INVALID_ARG);
    assert_non_null(strstr(err, "cw_na_plugin_entry"));
    /* dlopen's own text is reported. */
    assert_int_equal(load_bad("does-not-exist", err, sizeof(err)), CW_NOENT);
    assert_non_null(strstr(err, "dlopen"));
    assert_non_null(strstr(err, "does-not-exist"));
    assert_null(cw_plugins_find("bad"));
}

/* A plugin built against the shorter, first ABI-1 ops table loads, with
 * the ops it does not know seen as absent. */
static void test_older_ops_table(void **state)
{
    const struct cw_na_plugin *old;
    char err[512];

    assert_int_equal(load_bad("bad-old", err, sizeof(err)), CW_OK);
    old = cw_plugins_find("oldabi");
    assert_non_null(old);
    assert_int_equal(old->ops_size, sizeof(struct cw_na_ops));
    assert_non_null(old->ops->init);
    assert_null(old->ops->mem_restrict);
    assert_null(old->ops->describe);
}

static void no_fact(void *arg, const char *key, const char *value)
{
    (void)key, (void)value;
    (*(unsigned *)arg)++;
}

/* cw_plugins_path names the module file; cw_plugins_describe answers
 * CW_UNSUPPORTED for a plugin without ops->describe (one built against
 * the older table) and CW_NOENT for none. */
static void test_path_describe(void **state)
{
    char path[1024], small[4];
    unsigned facts = 0;

    (void)state;
    assert_int_equal(cw_plugins_path("oldabi", path, sizeof(path)), CW_OK);
    assert_non_null(strstr(path, "/bad-old.so"));
    assert_int_equal(cw_plugins_path("oldabi", small, sizeof(small)),
                     CW_OVERFLOW);
    assert_int_equal(cw_plugins_path("nosuch", path, sizeof(path)), CW_NOENT);
    assert_int_equal(cw_plugins_path(NULL, path, sizeof(path)), CW_INVALID_ARG);
    assert_int_equal(cw_plugins_describe("oldabi", no_fact, &facts),
                     CW_UNSUPPORTED);
    assert_int_equal(cw_plugins_describe("nosuch", no_fact, &facts), CW_NOENT);
    assert_int_equal(cw_plugins_describe("oldabi", NULL, NULL), CW_INVALID_ARG);
    assert_int_equal(facts, 0);
}

static void test_unknown_plugin(void **state)
{
    cw_na_t *na = NULL;

    assert_int_equal(cw_na_open("nosuch+tcp://127.0.0.1:1", 0, NULL, &na),
                     CW_NOENT);
    assert_null(na);
    assert_int_equal(cw_na_open("not a uri", 0, NULL, &na), CW_INVALID_ARG);
    assert_int_equal(cw_na_open(NULL, 0, NULL, &na), CW_INVALID_ARG);
    assert_int_equal(cw_plugins_register(NULL), CW_INVALID_ARG);
    assert_int_equal(cw_plugins_load_file(NULL, NULL, 0), CW_INVALID_ARG);
}

static void test_search_path(void **state)
{
    char list[256];
    const struct cw_na_plugin *shm;
    char err[512];

    /* The build tree is on the search path, so na-shm is found. */
    assert_int_equal(cw_plugins_load(NULL), CW_OK);
    assert_int_equal(cw_plugins_list(list, sizeof(list)), CW_OK);
    assert_non_null(strstr(list, "shm"));
    shm = cw_plugins_find("shm");
    assert_non_null(shm);
    assert_int_equal(shm->abi_version, CW_NA_ABI_VERSION);
    /* Registering the same name again is refused. */
    assert_int_equal(cw_plugins_register(shm), CW_EXIST);
    (void)err;
    assert_int_equal(cw_plugins_list(list, 2), CW_OVERFLOW);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_modules),
        cmocka_unit_test(test_older_ops_table),
        cmocka_unit_test(test_path_describe),
        cmocka_unit_test(test_unknown_plugin),
        cmocka_unit_test(test_search_path),
    };
    int rc;

    if (argc < 2)
        return 2;
    bad_dir = argv[1];
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    cw_plugins_unload();
    return rc;
}
