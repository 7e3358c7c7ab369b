/*
 * Causeway network abstraction: plugin loading and the per-instance API.
 *
 * This is the layer the RPC core is built on; tests and tools may use it
 * directly.  Every call validates its arguments and returns a status; none
 * aborts.  Semantics of each operation are those of the matching op in
 * <causeway/na_plugin.h>: completions are delivered exactly once, only from
 * inside cw_na_progress().
 *
 * Objects returned by an instance (addresses, memory handles, operations)
 * belong to that instance and must be passed back to the same instance.
 */
#ifndef CAUSEWAY_NA_H
#define CAUSEWAY_NA_H

#include <causeway/na_plugin.h>
#include <causeway/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/** One open plugin instance (a network endpoint). */
typedef struct cw_na cw_na_t;

/* ------------------------------------------------------------------------ */
/* Plugin loading                                                           */

/**
 * Load plugin modules (files named "cw-na-*.so").  Searched in order:
 * @p dir (if not NULL), each entry of CAUSEWAY_PLUGIN_PATH (colon-separated),
 * the build tree (uninstalled use), then the install directory.  The first
 * module to register a name wins; a later one with the same name is skipped
 * and logged.  A module that fails the checks (ABI version, ops size,
 * mandatory ops, dlopen/dlsym error) is reported with dlerror()/the reason
 * and skipped.  May be called more than once; thread-safe.
 *
 * @param[in] dir  extra directory searched first, or NULL.
 * @return CW_OK if at least one plugin is registered, CW_NOENT if none was
 *         found (the log names every directory tried).
 */
CW_PUBLIC cw_status_t cw_plugins_load(const char *dir);

/**
 * Load and register one module file.
 * @return CW_OK, CW_NOENT (dlopen failed), CW_VERSION (ABI or ops size),
 *         CW_EXIST (name already registered), CW_INVALID_ARG (missing op).
 *         @p err (may be NULL, size @p errlen) receives the reason.
 */
CW_PUBLIC cw_status_t cw_plugins_load_file(const char *path, char *err,
                                           size_t errlen);

/** Register a plugin already linked into the process (tests, static
 *  builds).  Same checks as for a module. */
CW_PUBLIC cw_status_t cw_plugins_register(const struct cw_na_plugin *plugin);

/** Names of registered plugins, comma-separated, into @p buf. */
CW_PUBLIC cw_status_t cw_plugins_list(char *buf, size_t len);

/** The registered plugin named @p name, or NULL. */
CW_PUBLIC const struct cw_na_plugin *cw_plugins_find(const char *name);

/**
 * The file a registered plugin was loaded from.
 * @param[in]  name  plugin name ("ofi").
 * @param[out] buf   its path, NUL-terminated ("" for a plugin registered
 *                   from the process itself, cw_plugins_register).
 * @return CW_OK, CW_NOENT (not registered), CW_OVERFLOW (@p len too
 *         small), CW_INVALID_ARG.
 */
CW_PUBLIC cw_status_t cw_plugins_path(const char *name, char *buf, size_t len);

/**
 * What plugin @p name finds on this machine (its ops->describe): the
 * network library's version found at run time, its providers, transports
 * and devices, one @p emit(arg, key, value) call per fact, keys
 * CW_NA_DESCRIBE_* (<causeway/na_plugin.h>).  Loads the module from the
 * search path if it is not registered yet.
 * @return CW_OK, CW_NOENT (no such plugin), CW_UNSUPPORTED (the plugin
 *         does not describe itself), or the plugin's error.
 */
CW_PUBLIC cw_status_t cw_plugins_describe(const char *name,
                                          cw_na_describe_cb_t emit, void *arg);

/** Unload every module (no instance may remain open). */
CW_PUBLIC void cw_plugins_unload(void);

/* ------------------------------------------------------------------------ */
/* Instances                                                                */

/**
 * Open an instance from a URI "plugin[+protocol]://location".  The location
 * may be empty ("shm://", "ofi+tcp://") to let the plugin choose.  If the
 * plugin is not registered yet, its module "cw-na-<plugin>.so" is looked up
 * on the search path of cw_plugins_load.
 *
 * @param[in]  uri     listen/bind address.
 * @param[in]  flags   CW_NA_LISTEN, CW_NA_BUSY, CW_NA_ASYNC_RMA.
 * @param[in]  params  NULL or NULL-terminated key/value list for the plugin.
 * @param[out] na_p    the instance.
 * @return CW_OK, CW_INVALID_ARG (bad URI), CW_NOENT (unknown plugin: the
 *         log says which were tried), CW_UNSUPPORTED (protocol), or the
 *         plugin's error.
 */
CW_PUBLIC cw_status_t cw_na_open(const char *uri, uint32_t flags,
                                 const char *const *params, cw_na_t **na_p);

/** Close an instance.  Operations still pending are dropped without
 *  callbacks (callers cancel and drain theirs first).  Addresses and memory
 *  handles obtained from it are invalid afterwards; callers release theirs
 *  first (na-ofi releases any left, and warns about open registrations).
 *  Accepts NULL. */
CW_PUBLIC void cw_na_close(cw_na_t *na);

/** Plugin name ("ofi"). */
CW_PUBLIC const char *cw_na_plugin_name(const cw_na_t *na);
/** Protocol ("tcp"), "" if none. */
CW_PUBLIC const char *cw_na_protocol(const cw_na_t *na);
/** Capabilities of the instance. */
CW_PUBLIC const struct cw_na_caps *cw_na_caps(const cw_na_t *na);

/* Addresses.  Strings are full URIs ("ofi+tcp://1.2.3.4:7000"). */
CW_PUBLIC cw_status_t cw_na_addr_lookup(cw_na_t *na, const char *uri,
                                        cw_na_addr_t **addr_p);
CW_PUBLIC cw_status_t cw_na_addr_self(cw_na_t *na, cw_na_addr_t **addr_p);
CW_PUBLIC cw_status_t cw_na_addr_dup(cw_na_t *na, cw_na_addr_t *addr,
                                     cw_na_addr_t **addr_p);
CW_PUBLIC void cw_na_addr_free(cw_na_t *na, cw_na_addr_t *addr);
CW_PUBLIC bool cw_na_addr_cmp(cw_na_t *na, cw_na_addr_t *a, cw_na_addr_t *b);
/** Full URI of @p addr into @p buf; CW_OVERFLOW if @p len is too small. */
CW_PUBLIC cw_status_t cw_na_addr_to_string(cw_na_t *na, cw_na_addr_t *addr,
                                           char *buf, size_t len);
CW_PUBLIC size_t cw_na_addr_serialize_size(cw_na_t *na, cw_na_addr_t *addr);
CW_PUBLIC cw_status_t cw_na_addr_serialize(cw_na_t *na, void *buf, size_t size,
                                           cw_na_addr_t *addr);
CW_PUBLIC cw_status_t cw_na_addr_deserialize(cw_na_t *na, const void *buf,
                                             size_t size,
                                             cw_na_addr_t **addr_p);

/* Messages. */
CW_PUBLIC cw_status_t cw_na_msg_send_unexpected(cw_na_t *na, const void *buf,
                                                size_t len, cw_na_addr_t *dest,
                                                uint32_t tag, cw_na_cb_t cb,
                                                void *arg, cw_na_op_t **op_p);
CW_PUBLIC cw_status_t cw_na_msg_recv_unexpected(cw_na_t *na, void *buf,
                                                size_t len, cw_na_cb_t cb,
                                                void *arg, cw_na_op_t **op_p);
CW_PUBLIC cw_status_t cw_na_msg_send_expected(cw_na_t *na, const void *buf,
                                              size_t len, cw_na_addr_t *dest,
                                              uint32_t tag, cw_na_cb_t cb,
                                              void *arg, cw_na_op_t **op_p);
/** Send a message at once, with no operation and no callback, if the
 *  plugin can take it now: CW_OK, sent and complete (@p buf may be reused);
 *  CW_AGAIN, nothing done (the plugin has no inject, or not now: send it
 *  with cw_na_msg_send_unexpected/_expected); or an error as those give.
 *  It never overtakes an earlier send to @p dest still queued. */
CW_PUBLIC cw_status_t cw_na_msg_inject(cw_na_t *na, const void *buf, size_t len,
                                       cw_na_addr_t *dest, uint32_t tag,
                                       bool expected);
CW_PUBLIC cw_status_t cw_na_msg_recv_expected(cw_na_t *na, void *buf,
                                              size_t len, cw_na_addr_t *source,
                                              uint32_t tag, cw_na_cb_t cb,
                                              void *arg, cw_na_op_t **op_p);

/* Memory and RMA. */
CW_PUBLIC cw_status_t cw_na_mem_register(cw_na_t *na,
                                         const struct cw_na_segment *segs,
                                         size_t n, uint32_t access,
                                         cw_na_mem_t **mem_p);
CW_PUBLIC void cw_na_mem_release(cw_na_t *na, cw_na_mem_t *mem);
CW_PUBLIC size_t cw_na_mem_serialize_size(cw_na_t *na, cw_na_mem_t *mem);
CW_PUBLIC cw_status_t cw_na_mem_serialize(cw_na_t *na, void *buf, size_t size,
                                          cw_na_mem_t *mem);
CW_PUBLIC cw_status_t cw_na_mem_deserialize(cw_na_t *na, const void *buf,
                                            size_t size, cw_na_mem_t **mem_p);
/** Messages the instance dropped before any user operation saw them
 *  (ops->dropped); 0 when the plugin does not count them. */
CW_PUBLIC uint64_t cw_na_dropped(cw_na_t *na);
/** Remote handle for part of a remote handle (ops->mem_restrict);
 *  CW_UNSUPPORTED when the plugin has no such op. */
CW_PUBLIC cw_status_t cw_na_mem_restrict(cw_na_t *na, cw_na_mem_t *mem,
                                         size_t off, size_t len,
                                         uint32_t access, cw_na_mem_t **mem_p);
CW_PUBLIC cw_status_t cw_na_put(cw_na_t *na, cw_na_mem_t *local,
                                size_t local_off, cw_na_mem_t *remote,
                                size_t remote_off, size_t len,
                                cw_na_addr_t *peer, cw_na_cb_t cb, void *arg,
                                cw_na_op_t **op_p);
CW_PUBLIC cw_status_t cw_na_get(cw_na_t *na, cw_na_mem_t *local,
                                size_t local_off, cw_na_mem_t *remote,
                                size_t remote_off, size_t len,
                                cw_na_addr_t *peer, cw_na_cb_t cb, void *arg,
                                cw_na_op_t **op_p);

/* Progress. */
/** Wait fd of the instance or -1. */
CW_PUBLIC int cw_na_get_wait_fd(cw_na_t *na);
/** Arm and report whether blocking on the wait fd is safe now. */
CW_PUBLIC bool cw_na_safe_to_sleep(cw_na_t *na);
/** Whether the instance has data moving that only polling advances
 *  (ops->streaming); false when the plugin does not say. */
CW_PUBLIC bool cw_na_streaming(cw_na_t *na);
/** Non-blocking progress; runs up to @p max callbacks (0 = all ready). */
CW_PUBLIC cw_status_t cw_na_progress(cw_na_t *na, unsigned max,
                                     unsigned *count_p);
/**
 * Progress, blocking up to @p timeout_ms for something to happen: polls,
 * then (unless the instance is busy-polling) waits on the wait fd for a
 * bounded slice and polls again.  Never trusts the fd alone.
 * @return CW_OK if at least one callback ran, CW_TIMEOUT otherwise.
 */
CW_PUBLIC cw_status_t cw_na_progress_wait(cw_na_t *na, unsigned timeout_ms,
                                          unsigned *count_p);
CW_PUBLIC cw_status_t cw_na_cancel(cw_na_t *na, cw_na_op_t *op);

#ifdef __cplusplus
}
#endif

#endif /* CAUSEWAY_NA_H */
