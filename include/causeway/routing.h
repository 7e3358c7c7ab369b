/*
 * Causeway routing: route table, services and ACL built from a
 * struct cw_config (design §5).
 *
 * A table is immutable once built, except for the health and load counters
 * of its next hops and backends (atomics).  A reload builds a new table and
 * swaps a pointer; holders keep the old one alive with a reference
 * (cw_route_table_ref / cw_route_table_unref), so RPCs in flight finish on
 * the table they started with.  Every function here is thread-safe.
 *
 * Route choice for a destination: the most specific matching dest pattern
 * (exact host:port, then host, then longest IP prefix, then "*"; exact
 * plugin/protocol before wildcards), then the lowest priority, then the
 * fewest hops, then the healthiest and least loaded next hop, then round
 * robin.  Next hops that are down are skipped unless all are; when every
 * next hop of the most specific pattern is down, a less specific pattern
 * with an up next hop is used instead.  Lookup cost does not depend on the
 * number of routes (hash tables per plugin+protocol, and for IP prefixes
 * one hash probe per distinct prefix length present).
 *
 * Networks of a gateway config also act as implicit "connected" routes:
 * the network's plugin and protocol with any location ('*' location), via
 * that network, unless a route with that exact dest is written or another
 * network uses the same plugin and protocol (then routes must say which).
 */
#ifndef CAUSEWAY_ROUTING_H
#define CAUSEWAY_ROUTING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <causeway/addr.h>
#include <causeway/causeway.h>
#include <causeway/config.h>
#include <causeway/status.h>

#ifdef __cplusplus
extern "C" {
#endif

struct cw_route_table;

/** Result of a route lookup. */
struct cw_route_result {
    bool direct;              /**< deliver directly (via a network / client) */
    int network;              /**< index of the outgoing network, -1 if none */
    const char *network_name; /**< NULL if none */
    const char *gateway;      /**< next-hop gateway address, NULL when direct */
    unsigned nexthop;         /**< next-hop id (health / load calls) */
    unsigned priority;
    unsigned hop;
    unsigned max_inflight;    /**< route cap, 0 = unlimited */
    bool implicit;            /**< a connected network, not a written route */
    const char *dest;         /**< dest pattern as written */
    struct cw_config_loc loc; /**< where the route was written */
};

/**
 * Build a table from a loaded config (routes, networks, services, acl).
 * The table copies what it needs; @p cfg may be freed afterwards.
 * @param[out] table_p  written only on success; refcount 1.
 * @return CW_OK, CW_NOMEM, CW_INVALID_ARG.
 */
CW_PUBLIC cw_status_t cw_route_table_build(const struct cw_config *cfg,
                                           struct cw_route_table **table_p);

/** Take a reference; returns @p table. */
CW_PUBLIC struct cw_route_table *
cw_route_table_ref(struct cw_route_table *table);

/** Drop a reference; the last one frees the table (NULL accepted). */
CW_PUBLIC void cw_route_table_unref(struct cw_route_table *table);

/** Number of written (non-implicit) routes. */
CW_PUBLIC size_t cw_route_table_size(const struct cw_route_table *table);

/**
 * Choose the route for a plain destination.
 * @param[out] res_p  written only on success; its strings live as long as
 *                    the table.
 * @return CW_OK, or CW_NO_ROUTE when no pattern matches.
 */
CW_PUBLIC cw_status_t cw_route_table_lookup(struct cw_route_table *table,
                                            const struct cw_uri *dest,
                                            struct cw_route_result *res_p);

/** Route groups a destination matched in one table, as many as fit. */
#define CW_ROUTE_MEMO_GROUPS 8

/**
 * What a destination matched in one table, kept by a caller that looks the
 * same destination up again and again (a gateway, per destination string).
 * Zero-initialise it; it stays tied to the table it was filled from and
 * is refilled when used with another one.  Opaque.
 */
struct cw_route_memo {
    uint64_t table_serial; /**< 0: empty */
    uint32_t n; /**< matched groups; > CW_ROUTE_MEMO_GROUPS: too many to keep */
    const void *group[CW_ROUTE_MEMO_GROUPS];
};

/**
 * As cw_route_table_lookup, remembering in @p memo which route patterns
 * @p dest matched, so that the next lookup of the same destination in the
 * same table only chooses among them (health, load and round robin are
 * taken into account on every call, exactly as by cw_route_table_lookup).
 * The caller must pass the same @p dest with the same @p memo.
 */
CW_PUBLIC cw_status_t cw_route_table_lookup_memo(struct cw_route_table *table,
                                                 const struct cw_uri *dest,
                                                 struct cw_route_memo *memo,
                                                 struct cw_route_result *res_p);

/** As cw_route_table_lookup from a string (CW_INVALID_ARG if unparsable). */
CW_PUBLIC cw_status_t cw_route_table_lookup_str(struct cw_route_table *table,
                                                const char *dest,
                                                struct cw_route_result *res_p);

/**
 * Explain, like `ip route get`, which route would carry a message to
 * @p addr and why: every matching pattern from most to least specific, the
 * candidates of the chosen one and why the winner won; or that none would.
 * Writes to @p out.  Services ("svc:name") are resolved too.
 * @return CW_OK, CW_NO_ROUTE, or CW_INVALID_ARG for an unparsable address.
 */
CW_PUBLIC cw_status_t cw_route_table_explain(struct cw_route_table *table,
                                             const char *addr, FILE *out);

/**
 * cw_route_table_explain as one JSON object: "address", "result" (route,
 * no_route, no_service, invalid), for a route "target", "kind" (gateway,
 * via, direct), "nexthop", "network", "up", "route" (the chosen one),
 * "dest", "why" and "matches" (each matching dest, most specific first,
 * with its candidate routes); "service" for svc:NAME and "gateways" for a
 * proxied address; "reason" when there is no route.
 * @return as cw_route_table_explain.
 */
CW_PUBLIC cw_status_t cw_route_table_explain_json(struct cw_route_table *table,
                                                  const char *addr, FILE *out);

/* -- Next hops: health and load ----------------------------------------- */

/** What one health report changed (cw_route_table_nexthop_report,
 *  cw_route_table_backend_report).  Of concurrent reports, exactly one
 *  sees a given change. */
enum cw_health_change {
    CW_HEALTH_SAME = 0, /**< still in rotation, or still out of it */
    CW_HEALTH_DOWN,     /**< this report took it out of rotation */
    CW_HEALTH_UP,       /**< this report put it back in rotation */
};

/** Number of next hops (ids are 0..n-1). */
CW_PUBLIC unsigned
cw_route_table_nexthop_count(const struct cw_route_table *table);

/** Address (gateway) or network name of next hop @p id; NULL if bad id. */
CW_PUBLIC const char *
cw_route_table_nexthop_name(const struct cw_route_table *table, unsigned id);

/**
 * Find a next hop by gateway address or network name.
 * @return CW_OK or CW_NOENT.
 */
CW_PUBLIC cw_status_t cw_route_table_nexthop_find(
    const struct cw_route_table *table, const char *name, unsigned *id_p);

/** Mark a next hop up or down (health checks). */
CW_PUBLIC void cw_route_table_nexthop_set_up(struct cw_route_table *table,
                                             unsigned id, bool up);

/** True if the next hop is up (unknown ids: false). */
CW_PUBLIC bool cw_route_table_nexthop_is_up(const struct cw_route_table *table,
                                            unsigned id);

/**
 * Report one RPC outcome on a next hop: failures count towards
 * health.eject_after consecutive failures (then the hop is marked down),
 * successes towards health.recover_after (then it is up again).
 * @return the change this report made (CW_HEALTH_SAME for a bad id).
 */
CW_PUBLIC enum cw_health_change
cw_route_table_nexthop_report(struct cw_route_table *table, unsigned id,
                              bool success);

/** Count an RPC starting (+1) or finishing (-1) on a next hop. */
CW_PUBLIC void cw_route_table_nexthop_load(struct cw_route_table *table,
                                           unsigned id, int delta);

/** RPCs currently counted in flight on a next hop. */
CW_PUBLIC unsigned
cw_route_table_nexthop_inflight(const struct cw_route_table *table,
                                unsigned id);

/* -- Services ------------------------------------------------------------ */

/** Result of a service resolution. */
struct cw_service_pick {
    unsigned service;    /**< service index */
    unsigned backend;    /**< backend index in the service */
    const char *address; /**< backend address; lives as long as the table */
};

/**
 * Resolve svc:<name> to a backend by the service's policy, skipping
 * ejected backends (unless all are ejected).
 * @param[in] caller  caller identity for the hash policy (e.g. the source
 *                    address); may be NULL for the other policies.
 * @return CW_OK, CW_NOENT (no such service).
 */
CW_PUBLIC cw_status_t
cw_route_table_service_pick(struct cw_route_table *table, const char *name,
                            const char *caller, struct cw_service_pick *pick_p);

/** Mark a backend ejected (true) or back in rotation (false). */
CW_PUBLIC void cw_route_table_backend_set_ejected(struct cw_route_table *table,
                                                  unsigned service,
                                                  unsigned backend,
                                                  bool ejected);

/** True unless the backend is ejected (false for an unknown backend). */
CW_PUBLIC bool cw_route_table_backend_is_up(const struct cw_route_table *table,
                                            unsigned service, unsigned backend);

/** RPCs in flight on a backend, as counted by cw_route_table_backend_load
 *  (0 for an unknown backend). */
CW_PUBLIC unsigned
cw_route_table_backend_inflight(const struct cw_route_table *table,
                                unsigned service, unsigned backend);

/** Address of a backend; NULL for an unknown one.  Lives as long as the
 *  table. */
CW_PUBLIC const char *
cw_route_table_backend_address(const struct cw_route_table *table,
                               unsigned service, unsigned backend);

/** Report an RPC outcome on a backend (passive ejection, as next hops).
 *  @return the change this report made (CW_HEALTH_SAME if unknown). */
CW_PUBLIC enum cw_health_change
cw_route_table_backend_report(struct cw_route_table *table, unsigned service,
                              unsigned backend, bool success);

/** Count an RPC starting (+1) / finishing (-1) on a backend. */
CW_PUBLIC void cw_route_table_backend_load(struct cw_route_table *table,
                                           unsigned service, unsigned backend,
                                           int delta);

/* -- ACL ----------------------------------------------------------------- */

/**
 * May a message that arrived on network @p from (NULL: not from a network,
 * e.g. local; only "from: '*'" entries apply) go out on network @p to
 * (NULL: any) to destination @p dest ("svc:<name>" or a plain address)?
 * With no acl section everything is allowed; with one, only what an entry
 * allows.
 * @return CW_OK or CW_DENIED (CW_INVALID_ARG for an unparsable dest).
 */
CW_PUBLIC cw_status_t
cw_route_table_acl_check(const struct cw_route_table *table, const char *from,
                         const char *to, const char *dest);

/**
 * As cw_route_table_acl_check, for a destination already parsed: the
 * service @p service (its name, without "svc:"), or else the plain
 * address @p dest.  A caller that checks the same destination on every
 * message parses it once.
 * @return CW_OK, CW_DENIED, or CW_INVALID_ARG when both or neither of
 *         @p service and @p dest are given.
 */
CW_PUBLIC cw_status_t cw_route_table_acl_check_parsed(
    const struct cw_route_table *table, const char *from, const char *to,
    const char *service, const struct cw_uri *dest);

/* -- Clients ------------------------------------------------------------- */

/**
 * Give @p ctx client routes: load a routes file (a routes section only;
 * see CW_CONFIG_ROUTES_ONLY) and make it the context's resolver
 * (cw_context_set_resolver), so that cw_addr_lookup sends a plain address
 * that a route with a gateway matches through that gateway, and the rest
 * directly.  Equal routes take turns; a forward of an idempotent request
 * whose gateway failed is sent again through another one.  Call it after
 * cw_context_create, before looking addresses up; a second call replaces
 * the routes.
 * @param[in] ctx   the context.
 * @param[in] path  the file, or NULL for $CAUSEWAY_ROUTES: with NULL and the
 *                  variable unset or empty, nothing is installed.
 * @return CW_OK; CW_INVALID_ARG for a NULL @p ctx; else as cw_config_load
 *         (CW_IO, CW_CONFIG: each problem is logged with its
 *         file:line:column) or CW_NOMEM, and @p ctx is left as it was.
 */
CW_PUBLIC cw_status_t cw_client_routes_load(cw_context_t *ctx,
                                            const char *path);

/**
 * Load a client routes file (a routes section only; see
 * CW_CONFIG_ROUTES_ONLY) and build its table.
 * @param[in] path  file, or NULL to use $CAUSEWAY_ROUTES.
 * @param[in,out] diag  errors (may be NULL).
 * @return CW_OK; CW_NOENT when @p path is NULL and CAUSEWAY_ROUTES is unset
 *         or empty; else as cw_config_load.
 */
CW_PUBLIC cw_status_t
cw_route_table_load_client(const char *path, struct cw_config_diag *diag,
                           struct cw_route_table **table_p);

/**
 * Client lookup of a plain address.
 * @param[out] gateway   receives the gateway URI when not direct.
 * @param[out] direct_p  true: send directly (no route matched, or a
 *                       "via: direct" route); false: send through
 *                       @p gateway (as "<addr>@<gateway>").
 * @return CW_OK, CW_INVALID_ARG (unparsable), CW_OVERFLOW (buffer short).
 */
CW_PUBLIC cw_status_t cw_route_table_client_lookup(struct cw_route_table *table,
                                                   const char *addr,
                                                   char *gateway,
                                                   size_t gateway_len,
                                                   bool *direct_p);

/* -- Several gateways together ------------------------------------------ */

/**
 * Check the configs of several gateways as one system: routing loops,
 * next hops that are no loaded gateway's network, routes with no onward
 * path, and missing return routes (a gateway forwarding to a next hop that
 * has no route back to the forwarding gateway's other networks).  Each
 * problem names the file:line of the routes involved.
 * @return CW_OK or CW_CONFIG (problems in @p diag); CW_NOMEM.
 */
CW_PUBLIC cw_status_t cw_route_check_set(const struct cw_config *const *cfgs,
                                         size_t n, struct cw_config_diag *diag);

#ifdef __cplusplus
}
#endif

#endif /* CAUSEWAY_ROUTING_H */
