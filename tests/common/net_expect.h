/*
 * Which networks a test must be able to open on this machine.
 *
 * meson passes the plugins it built in CW_TEST_PLUGINS ("shm,ofi,ucx,
 * verbs"; tests/meson.build).  A protocol of a built plugin is expected to
 * open, and failing to open it fails the test: a skip would hide a
 * provider-selection regression (FI_PROVIDER=^tcp on ofi+tcp) or a plugin
 * that no longer loads.  A test skips, saying why, only for a plugin that
 * was not built, or for a protocol that needs hardware (its run sets
 * CW_TEST_NEEDS_HW=1: ofi+verbs, ofi+cxi) that the library reports absent.
 * Run by hand without CW_TEST_PLUGINS, every plugin counts as built.
 */
#ifndef CW_TEST_NET_EXPECT_H
#define CW_TEST_NET_EXPECT_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether meson built the plugin of @p uri ("ofi" for "ofi+tcp://..."). */
static inline bool cw_test_plugin_built(const char *uri)
{
    const char *list = getenv("CW_TEST_PLUGINS");
    size_t n = strcspn(uri, "+:");

    if (list == NULL)
        return true;
    for (const char *p = list; *p != '\0';) {
        size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, uri, n) == 0)
            return true;
        p += len + (p[len] == ',');
    }
    return false;
}

/* For a whole-program test: true, having said why on stdout (TAP), when
 * the plugin of @p uri was not built here; main() then exits 77. */
static inline bool cw_test_skip_unbuilt(const char *uri)
{
    if (cw_test_plugin_built(uri))
        return false;
    printf("1..0 # SKIP %s: its plugin was not built here "
           "(CW_TEST_PLUGINS=%s)\n",
           uri, getenv("CW_TEST_PLUGINS"));
    return true;
}

/* Whether this run's protocol needs hardware the machine may lack. */
static inline bool cw_test_needs_hw(void)
{
    const char *v = getenv("CW_TEST_NEEDS_HW");

    return v != NULL && strcmp(v, "1") == 0;
}

#ifdef CMOCKA_H_
/* In a cmocka test: skip it, saying why, when the plugin of @p uri was not
 * built here; otherwise return (the caller then must open @p uri). */
static inline void cw_test_require_plugin(const char *uri)
{
    if (!cw_test_plugin_built(uri)) {
        print_message("# SKIP %s: its plugin was not built here "
                      "(CW_TEST_PLUGINS=%s)\n",
                      uri, getenv("CW_TEST_PLUGINS"));
        skip();
    }
}
#endif

#endif /* CW_TEST_NET_EXPECT_H */
