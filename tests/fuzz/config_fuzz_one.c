/* The checks run on every fuzz input: the loader never crashes or leaks,
 * and whatever loads dumps to YAML that loads back to the same dump and
 * builds a route table that answers lookups. */
#include "config_fuzz_one.h"

#include <causeway/config.h>
#include <causeway/routing.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

unsigned long config_fuzz_loaded;

static char *dump_of(const struct cw_config *cfg)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);

    if (mem == NULL)
        return NULL;
    cw_config_dump(cfg, mem);
    fclose(mem);
    return buf;
}

static int check_loaded(const struct cw_config *cfg, unsigned flags)
{
    static const char *const probes[] = {
        "ofi+tcp://10.1.0.1:7000",
        "ucx+tcp://10.2.3.4:1",
        "shm://x",
        "verbs://mlx5_0:1/10.3.0.4:7000",
        "ofi+tcp://[fd00::1]:7000",
        "svc:storage",
    };
    struct cw_config_diag *diag = cw_config_diag_new();
    struct cw_config *again = NULL;
    struct cw_route_table *t = NULL;
    char *d1 = dump_of(cfg);
    char *d2 = NULL;
    int rc = 0;
    FILE *devnull = fopen("/dev/null", "we");

    if (d1 == NULL || diag == NULL || devnull == NULL)
        goto out;
    if (cw_config_load_buffer(cfg->path, d1, strlen(d1), flags, diag, &again) !=
        CW_OK) {
        fprintf(stderr, "fuzz: the dump does not load back:\n%s\n", d1);
        cw_config_diag_print(diag, stderr);
        rc = -1;
        goto out;
    }
    d2 = dump_of(again);
    if (d2 == NULL || strcmp(d1, d2) != 0) {
        fprintf(stderr, "fuzz: dump of the dump differs:\n%s\n---\n%s\n", d1,
                d2 ? d2 : "(null)");
        rc = -1;
        goto out;
    }
    if (cw_route_table_build(cfg, &t) != CW_OK) {
        fprintf(stderr, "fuzz: a valid config does not build a table\n");
        rc = -1;
        goto out;
    }
    for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
        struct cw_route_result res;
        cw_route_table_lookup_str(t, probes[i], &res);
        cw_route_table_explain(t, probes[i], devnull);
        cw_route_table_acl_check(t, "eth0", NULL, probes[i]);
    }
out:
    if (devnull)
        fclose(devnull);
    cw_route_table_unref(t);
    cw_config_free(again);
    free(d1);
    free(d2);
    cw_config_diag_free(diag);
    return rc;
}

int config_fuzz_one(const uint8_t *data, size_t len)
{
    static const unsigned flags[] = {0, CW_CONFIG_ROUTES_ONLY};
    int rc = 0;

    for (size_t f = 0; f < 2; f++) {
        struct cw_config_diag *diag = cw_config_diag_new();
        struct cw_config *cfg = NULL;
        cw_status_t st;

        st = cw_config_load_buffer("fuzz.yaml", (const char *)data, len,
                                   flags[f], diag, &cfg);
        if (st == CW_OK) {
            config_fuzz_loaded++;
            if (check_loaded(cfg, flags[f]) != 0)
                rc = -1;
            cw_config_free(cfg);
        } else if (st == CW_CONFIG && cw_config_diag_count(diag) == 0) {
            fprintf(stderr, "fuzz: CW_CONFIG without a message\n");
            rc = -1;
        } else {
            /* Every message names the file and a position. */
            for (size_t i = 0; i < cw_config_diag_count(diag); i++) {
                const char *m = cw_config_diag_get(diag, i);
                if (strncmp(m, "fuzz.yaml:", 10) != 0) {
                    fprintf(stderr, "fuzz: message without position: %s\n", m);
                    rc = -1;
                }
            }
        }
        cw_config_diag_free(diag);
    }
    return rc;
}
