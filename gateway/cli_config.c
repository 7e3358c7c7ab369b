/* causewayd --check / --dump / --explain. */
#include "cli_config.h"

#include <causeway/causeway.h>
#include <causeway/config.h>
#include <causeway/na.h>
#include <causeway/routing.h>

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define EXIT_NOROUTE 1
#define EXIT_INVALID 2

static unsigned load_flags(bool client)
{
    return client ? CW_CONFIG_ROUTES_ONLY : 0;
}

/* Load one file; errors go to err.  NULL on failure. */
static struct cw_config *load(const char *path, bool client, FILE *err)
{
    struct cw_config_diag *diag = cw_config_diag_new();
    struct cw_config *cfg = NULL;
    cw_status_t st;

    if (diag == NULL) {
        fprintf(err, "causewayd: out of memory\n");
        return NULL;
    }
    st = cw_config_load(path, load_flags(client), diag, &cfg);
    if (st != CW_OK) {
        cw_config_diag_print(diag, err);
        if (cw_config_diag_count(diag) == 0)
            fprintf(err, "%s: %s\n", path, cw_status_str(st));
        cfg = NULL;
    }
    cw_config_diag_free(diag);
    return cfg;
}

/* The address --probe opens for a network: its plugin and protocol on
 * its host with port 0, or a free name for the named (shm) kinds, so that
 * the probe neither takes the gateway's own port or name nor fails when a
 * gateway already runs with this file. */
static void probe_uri(const struct cw_uri *u, char *buf, size_t len)
{
    char loc[CW_URI_LOCATION_MAX];
    const char *slash = strrchr(u->location, '/');
    const char *hp = slash ? slash + 1 : u->location;
    const char *port = hp[0] == '[' ? strstr(hp, "]:") : strrchr(hp, ':');
    bool named =
        strcmp(u->plugin, "shm") == 0 ||
        (strcmp(u->plugin, "ofi") == 0 && strcmp(u->protocol, "shm") == 0);
    /* "mlx5_0:1" alone is a verbs device and its port, not host:port. */
    bool device_only = strcmp(u->plugin, "verbs") == 0 && slash == NULL &&
                       !isdigit((unsigned char)hp[0]);

    if (port != NULL && port[0] == ']')
        port++;
    if (named)
        loc[0] = '\0';
    else if (port != NULL && !device_only)
        snprintf(loc, sizeof(loc), "%.*s:0", (int)(port - u->location),
                 u->location);
    else
        snprintf(loc, sizeof(loc), "%s", u->location);
    snprintf(buf, len, "%s%s%s://%s", u->plugin, u->protocol[0] ? "+" : "",
             u->protocol, loc);
}

/* Open every network's plugin and protocol as the gateway would; each
 * failure is reported at its address in the file.  Returns the number of
 * networks that would not open. */
static size_t probe_networks(const struct cw_config *cfg, FILE *out, FILE *err)
{
    size_t bad = 0;

    for (size_t i = 0; i < cfg->nnetworks; i++) {
        const struct cw_config_network *net = &cfg->networks[i];
        char uri[CW_URI_MAX + 8];
        cw_na_t *na = NULL;
        cw_status_t st;

        probe_uri(&net->uri, uri, sizeof(uri));
        st = cw_na_open(uri, 0, NULL, &na);
        if (st != CW_OK) {
            fprintf(err,
                    "%s:%u:%u: networks[%zu].address: '%s' would not "
                    "open here: %s (probed as %s)\n",
                    cfg->path, net->loc.line, net->loc.column, i, net->address,
                    cw_status_str(st), uri);
            bad++;
            continue;
        }
        fprintf(out, "%s: network %s: %s opens (probed as %s)\n", cfg->path,
                net->name, net->address, uri);
        cw_na_close(na);
    }
    return bad;
}

int cw_cli_check(const char *const *paths, size_t n, bool client, bool probe,
                 FILE *out, FILE *err)
{
    struct cw_config **cfgs;
    struct cw_config_diag *diag = NULL;
    int rc = 0;
    size_t nok = 0;

    if (paths == NULL || n == 0) {
        fprintf(err, "causewayd: --check needs -c FILE\n");
        return EXIT_INVALID;
    }
    cfgs = calloc(n, sizeof(*cfgs));
    if (cfgs == NULL) {
        fprintf(err, "causewayd: out of memory\n");
        return EXIT_INVALID;
    }
    for (size_t i = 0; i < n; i++) {
        cfgs[i] = load(paths[i], client, err);
        if (cfgs[i] == NULL)
            rc = EXIT_INVALID;
        else
            nok++;
    }
    if (rc == 0 && n > 1 && !client) {
        cw_status_t st;
        diag = cw_config_diag_new();
        if (diag == NULL) {
            fprintf(err, "causewayd: out of memory\n");
            rc = EXIT_INVALID;
            goto out;
        }
        st = cw_route_check_set((const struct cw_config *const *)cfgs, n, diag);
        if (st != CW_OK) {
            cw_config_diag_print(diag, err);
            if (cw_config_diag_count(diag) == 0)
                fprintf(err, "causewayd: check failed: %s\n",
                        cw_status_str(st));
            rc = EXIT_INVALID;
        }
    }
    if (rc == 0 && probe && !client) {
        size_t bad = 0;
        if (cw_plugins_load(NULL) != CW_OK) {
            fprintf(err, "causewayd: --probe: no plugins found (set "
                         "CAUSEWAY_PLUGIN_PATH; --log-level debug shows the "
                         "directories searched)\n");
            rc = EXIT_INVALID;
            goto out;
        }
        for (size_t i = 0; i < n; i++)
            bad += probe_networks(cfgs[i], out, err);
        cw_plugins_unload();
        if (bad) {
            fprintf(err, "causewayd: %zu network(s) would not open\n", bad);
            rc = EXIT_INVALID;
        }
    }
    if (rc == 0) {
        for (size_t i = 0; i < n; i++)
            fprintf(out, "%s: ok\n", paths[i]);
        if (n > 1)
            fprintf(out,
                    "%zu gateways checked together: no loops, every "
                    "next hop reachable, return routes present\n",
                    n);
    } else if (nok < n) {
        for (size_t i = 0; i < n; i++)
            if (cfgs[i] != NULL)
                fprintf(out, "%s: ok\n", paths[i]);
        fprintf(err, "causewayd: %zu of %zu file(s) invalid\n", n - nok, n);
    }
out:
    cw_config_diag_free(diag);
    for (size_t i = 0; i < n; i++)
        cw_config_free(cfgs[i]);
    free(cfgs);
    return rc;
}

int cw_cli_dump(const char *path, bool client, FILE *out, FILE *err)
{
    struct cw_config *cfg = load(path, client, err);
    int rc = 0;

    if (cfg == NULL)
        return EXIT_INVALID;
    if (cw_config_dump(cfg, out) != CW_OK) {
        fprintf(err, "causewayd: cannot write the dump\n");
        rc = EXIT_INVALID;
    }
    cw_config_free(cfg);
    return rc;
}

int cw_cli_explain(const char *path, bool client, const char *addr, FILE *out,
                   FILE *err)
{
    struct cw_config *cfg = load(path, client, err);
    struct cw_route_table *table = NULL;
    cw_status_t st;
    int rc;

    if (cfg == NULL)
        return EXIT_INVALID;
    st = cw_route_table_build(cfg, &table);
    cw_config_free(cfg);
    if (st != CW_OK) {
        fprintf(err, "causewayd: cannot build the route table: %s\n",
                cw_status_str(st));
        return EXIT_INVALID;
    }
    st = cw_route_table_explain(table, addr, out);
    rc = st == CW_OK ? 0 : st == CW_NO_ROUTE ? EXIT_NOROUTE : EXIT_INVALID;
    cw_route_table_unref(table);
    return rc;
}
