/* Internal interface of the plugin registry (core/plugin.c). */
#ifndef CW_CORE_PLUGIN_INT_H
#define CW_CORE_PLUGIN_INT_H

#include <causeway/na.h>

/**
 * The registered plugin @p name, loading "cw-na-<name>.so" from the search
 * path if it is not registered yet.  On failure @p err says what was tried.
 * Takes a use count released by cw_plugin_put().
 */
cw_status_t cw_plugin_get(const char *name, const struct cw_na_plugin **p_p,
                          char *err, size_t errlen);
void cw_plugin_put(const struct cw_na_plugin *plugin);

#endif
