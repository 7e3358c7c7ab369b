/*
 * Client routes in a context (design §2): the core knows nothing of routes;
 * it asks the resolver installed here (cw_context_set_resolver) where a
 * plain address goes, and the resolver looks it up in the client routes
 * table (cw_route_table_client_lookup, route_explain.c).  Its own object
 * file: programs that link the routing library statically without the core
 * (the config and routing tests) do not pull it in.
 */
#include "routing_int.h"

#include <causeway/causeway.h>

static cw_status_t client_resolve(void *arg, const char *dest, char *gateway,
                                  size_t gateway_len, bool *direct_p)
{
    return cw_route_table_client_lookup(arg, dest, gateway, gateway_len,
                                        direct_p);
}

static void client_release(void *arg)
{
    cw_route_table_unref(arg);
}

cw_status_t cw_client_routes_load(cw_context_t *ctx, const char *path)
{
    struct cw_route_table *table;
    struct cw_config_diag *diag;
    cw_status_t st;

    if (ctx == NULL)
        return CW_INVALID_ARG;
    diag = cw_config_diag_new();
    if (diag == NULL)
        return CW_NOMEM;
    st = cw_route_table_load_client(path, diag, &table);
    if (st == CW_NOENT && path == NULL) {
        st = CW_OK; /* $CAUSEWAY_ROUTES unset: nothing to install */
        goto out;
    }
    if (st != CW_OK) {
        for (size_t i = 0; i < cw_config_diag_count(diag); i++)
            CW_ERROR("routing", "%s", cw_config_diag_get(diag, i));
        CW_ERROR("routing", "client routes %s: %s",
                 path ? path : "$CAUSEWAY_ROUTES", cw_status_str(st));
        goto out;
    }
    st = cw_context_set_resolver(ctx, client_resolve, client_release, table);
    if (st != CW_OK)
        cw_route_table_unref(table);
out:
    cw_config_diag_free(diag);
    return st;
}
