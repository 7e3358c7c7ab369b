/*
 * Causeway configuration (YAML, design §5).
 *
 * A file is parsed with libyaml, checked against a schema table per section
 * (type, bounds, default, reload-ability, help) and turned into a typed,
 * fully defaulted struct cw_config.  Every problem found is recorded in a
 * struct cw_config_diag as "file:line:column: message"; all problems of a
 * file are reported, not only the first.  A failed load returns no config
 * at all (nothing half-built).
 *
 * Top-level sections: gateway, networks, routes, services, buffers, limits,
 * health, acl.  docs/config.md is the reference for every key.
 *
 * Thread-safety: a loaded struct cw_config is immutable; it may be read from
 * any number of threads.  A diag object belongs to one thread at a time.
 */
#ifndef CAUSEWAY_CONFIG_H
#define CAUSEWAY_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <causeway/addr.h>
#include <causeway/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Diagnostics                                                              */
/* ------------------------------------------------------------------------ */

/** An ordered list of error messages ("file:line:column: message"). */
struct cw_config_diag;

/** Create an empty diagnostics list; NULL on allocation failure. */
CW_PUBLIC struct cw_config_diag *cw_config_diag_new(void);

/** Free a list (NULL is accepted). */
CW_PUBLIC void cw_config_diag_free(struct cw_config_diag *diag);

/** Number of messages recorded so far. */
CW_PUBLIC size_t cw_config_diag_count(const struct cw_config_diag *diag);

/**
 * Message @p i (0-based, in the order found).
 * @return the message, or NULL when @p i is out of range.
 */
CW_PUBLIC const char *cw_config_diag_get(const struct cw_config_diag *diag,
                                         size_t i);

/** Write every message to @p out, one a line. */
CW_PUBLIC void cw_config_diag_print(const struct cw_config_diag *diag,
                                    FILE *out);

/** Drop all messages (the list can be reused). */
CW_PUBLIC void cw_config_diag_clear(struct cw_config_diag *diag);

/**
 * Append a message "file:line:column: <fmt...>".  @p file may be NULL (the
 * prefix is then omitted); line/column 0 omits those parts.
 */
CW_PUBLIC void cw_config_diag_add(struct cw_config_diag *diag, const char *file,
                                  unsigned line, unsigned column,
                                  const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

/* ------------------------------------------------------------------------ */
/* Destination patterns ("dest" of routes, entries of acl allow lists)      */
/* ------------------------------------------------------------------------ */

/** How the location part of a pattern matches. */
enum cw_pattern_kind {
    CW_PATTERN_ANY = 0,      /**< "*": any location */
    CW_PATTERN_PREFIX = 1,   /**< "<ip>/<len>": IPv4/IPv6 prefix, any port */
    CW_PATTERN_HOST = 2,     /**< "<host>": that host, any port */
    CW_PATTERN_HOSTPORT = 3, /**< "<host>:<port>": exactly that endpoint */
    CW_PATTERN_EXACT = 4,    /**< any other location, compared as a string */
};

/**
 * A parsed destination pattern: "<plugin>[+<proto>]://<location>" where
 * plugin and proto may be "*", and location is "*", an IP prefix
 * ("10.2.0.0/16", "fd00::/8"), a host, a host:port or an exact location.
 * "plugin://..." (no "+proto") matches only addresses without a protocol;
 * "plugin+*://..." matches any protocol.  For locations with a device
 * prefix ("mlx5_0:1/10.3.0.4:7000") host, port and prefix patterns apply to
 * the part after the last '/'.
 */
struct cw_addr_pattern {
    char plugin[CW_URI_PLUGIN_MAX];     /**< "*" matches any plugin */
    char protocol[CW_URI_PROTOCOL_MAX]; /**< "*" any, "" none */
    enum cw_pattern_kind kind;          /**< location kind */
    uint8_t family;                     /**< 4 or 6 for CW_PATTERN_PREFIX */
    uint8_t prefix_len;                 /**< bits, for CW_PATTERN_PREFIX */
    uint8_t ip[16];                     /**< network bytes (masked) */
    uint16_t port;                      /**< for CW_PATTERN_HOSTPORT */
    char host[CW_URI_LOCATION_MAX];     /**< HOST/HOSTPORT; EXACT location */
};

/**
 * Parse a destination pattern.
 * @param[in]  s       pattern text.
 * @param[out] pat_p   written only on success.
 * @param[out] err     reason on failure ("expected ..."), may be NULL.
 * @return CW_OK or CW_INVALID_ARG.
 */
CW_PUBLIC cw_status_t cw_addr_pattern_parse(const char *s,
                                            struct cw_addr_pattern *pat_p,
                                            char *err, size_t errlen);

/** True if plain address @p uri matches @p pat. */
CW_PUBLIC bool cw_addr_pattern_match(const struct cw_addr_pattern *pat,
                                     const struct cw_uri *uri);

/** Format back to text (canonical form); CW_OVERFLOW if @p len is short. */
CW_PUBLIC cw_status_t cw_addr_pattern_format(const struct cw_addr_pattern *pat,
                                             char *buf, size_t len);

/**
 * Host part of a location for matching: the text after the last '/' split
 * by cw_location_split.  Also parses it as an IP address when it is one.
 * @param[out] host    at least CW_URI_LOCATION_MAX bytes.
 * @param[out] port_p  port or 0.
 * @param[out] family_p 4, 6, or 0 when the host is not an IP literal.
 * @param[out] ip      16 bytes, network order, when *family_p != 0.
 */
CW_PUBLIC cw_status_t cw_location_host(const char *location, char *host,
                                       uint16_t *port_p, uint8_t *family_p,
                                       uint8_t *ip);

/* ------------------------------------------------------------------------ */
/* The typed configuration                                                  */
/* ------------------------------------------------------------------------ */

/** Where an item was written (file is the config's path). */
struct cw_config_loc {
    const char *file; /**< points into the owning struct cw_config */
    unsigned line;    /**< 1-based */
    unsigned column;  /**< 1-based */
};

/** A list of strings (backends, allow entries). */
struct cw_config_strlist {
    char **v;
    size_t n;
};

/** Backend selection policy of a service. */
enum cw_service_policy {
    CW_POLICY_ROUND_ROBIN = 0,
    CW_POLICY_LEAST_INFLIGHT = 1,
    CW_POLICY_HASH = 2, /**< by caller (sticky) */
};

/** gateway: the process itself. */
struct cw_config_gateway {
    struct cw_config_loc loc;
    char *name;               /**< gateway name (stats, logs) */
    char *admin;              /**< admin/stats "host:port", "" = disabled */
    char *admin_socket;       /**< admin Unix socket path, "" = none */
    char *admin_socket_mode;  /**< its file mode, octal text ("0660") */
    char *admin_socket_group; /**< its group, "" = the gateway's own */
    char *admin_token_file;   /**< bearer token for the TCP endpoint, from
                                   this file; "" = no token */
    uint32_t threads;         /**< worker threads; 0: auto (one per CPU
                                   the process may run on, at most 16) */
    int log_level;            /**< enum cw_log_level */
    bool busy_poll;           /**< spin instead of blocking */
    uint64_t drain_grace_ns;  /**< SIGTERM: time to finish in-flight work */
};

/** networks[]: one listening endpoint each. */
struct cw_config_network {
    struct cw_config_loc loc;
    char *name;            /**< unique */
    char *address;         /**< listen address as written */
    uint32_t max_inflight; /**< 0 = only limits.max_inflight_rpcs */
    bool busy_poll;        /**< spin on this network's progress */
    struct cw_uri uri;     /**< parsed address */
};

/** routes[]: either via (direct on a network) or gateway (next hop). */
struct cw_config_route {
    struct cw_config_loc loc;
    char *dest;            /**< destination pattern as written */
    char *via;             /**< network name, or NULL */
    char *gateway;         /**< next-hop gateway address, or NULL */
    uint32_t priority;     /**< lower is preferred */
    uint32_t hop;          /**< hops to the destination, lower preferred */
    uint32_t max_inflight; /**< per-route cap, 0 = unlimited */
    struct cw_addr_pattern pattern; /**< parsed dest */
    struct cw_uri gateway_uri;      /**< parsed gateway (when gateway) */
    /** Network the route leaves on: the via network, or for a gateway route
     *  the network with the gateway's plugin and protocol; -1 in a
     *  routes-only (client) file or for via: direct. */
    int network;
};

/** services[]: a named set of backends. */
struct cw_config_service {
    struct cw_config_loc loc;
    char *name;                        /**< unique */
    struct cw_config_strlist backends; /**< plain addresses, >= 1 */
    int policy;                        /**< enum cw_service_policy */
};

/** buffers: bulk staging through the gateway. */
struct cw_config_buffers {
    struct cw_config_loc loc;
    uint64_t chunk;   /**< pipeline chunk size, bytes */
    uint32_t depth;   /**< chunks in flight per transfer */
    uint64_t staging; /**< staging pool per network pair, bytes */
    bool zero_copy;   /**< grant same-family transfers instead of staging */
};

/** limits: overload protection. */
struct cw_config_limits {
    struct cw_config_loc loc;
    uint32_t max_inflight_rpcs;
    uint64_t max_bulk_bytes_inflight;
    uint64_t default_timeout_ns;
    uint64_t max_timeout_ns;
    uint32_t max_hops;         /**< TTL given to forwarded messages */
    uint32_t max_queued_rpcs;  /**< queued beyond that: CW_BUSY */
    uint64_t max_payload_size; /**< cw_context_opts.max_payload_size */
    uint32_t max_cached_addrs; /**< next-hop address cache, per shard */
    uint32_t max_cached_dests; /**< parsed destination (route) cache */
    uint32_t max_sources;      /**< callers holding requests at once */
};

/** health: active checks and passive ejection of next hops/backends. */
struct cw_config_health {
    struct cw_config_loc loc;
    bool enabled;
    uint64_t interval_ns;
    uint64_t timeout_ns;
    uint32_t eject_after;   /**< consecutive failures */
    uint32_t recover_after; /**< consecutive successes */
};

/** acl[]: traffic from one network to another. */
struct cw_config_acl {
    struct cw_config_loc loc;
    char *from;                     /**< network name or "*" */
    char *to;                       /**< network name or "*" */
    struct cw_config_strlist allow; /**< "svc:<name>", "svc:*", patterns */
};

/** A whole configuration file. */
struct cw_config {
    char *path;       /**< file name as given to the loader */
    bool routes_only; /**< loaded as a client routes file */
    struct cw_config_gateway gateway;
    struct cw_config_network *networks;
    size_t nnetworks;
    struct cw_config_route *routes;
    size_t nroutes;
    struct cw_config_service *services;
    size_t nservices;
    struct cw_config_buffers buffers;
    struct cw_config_limits limits;
    struct cw_config_health health;
    bool has_acl; /**< an acl section was present (default deny) */
    struct cw_config_acl *acl;
    size_t nacl;
};

/** Load flags. */
enum {
    /** Client routes file: only a routes section; via may only be
     *  "direct"; gateway routes need no network. */
    CW_CONFIG_ROUTES_ONLY = 1u << 0,
};

/**
 * Read a secret token from @p path (gateway.admin_token_file): one line of
 * printable ASCII, trailing white space ignored.  The file must be a
 * regular file that other users can neither read nor write.
 * @param[out] token_p  malloc'd token, written only on success.
 * @param[out] err      the reason, naming the file, on failure.
 * @return CW_OK; CW_NOENT when it cannot be opened; CW_CONFIG when it is
 *         not a regular file, is accessible to others, is empty, too long
 *         or holds blanks or control characters.
 */
CW_PUBLIC cw_status_t cw_config_read_token(const char *path, char **token_p,
                                           char *err, size_t errlen);

/**
 * Parse a file mode written in octal ("0660"), at most 0777.
 * @return CW_OK with *@p mode_p set, else CW_INVALID_ARG.
 */
CW_PUBLIC cw_status_t cw_config_socket_mode(const char *text, unsigned *mode_p);

/**
 * The group id of @p name, a group name or a number.
 * @return CW_OK with *@p gid_p set; CW_NOENT for no such group;
 *         CW_INVALID_ARG for an empty name or a number out of range.
 */
CW_PUBLIC cw_status_t cw_config_group_id(const char *name, unsigned *gid_p);

/**
 * Load and validate a configuration file.
 * @param[in]  path   file to read.
 * @param[in]  flags  0 or CW_CONFIG_ROUTES_ONLY.
 * @param[in,out] diag  receives every error found (may be NULL).
 * @param[out] cfg_p  the config, written only on success.
 * @return CW_OK; CW_CONFIG when the file has errors (see @p diag); CW_IO
 *         when it cannot be read; CW_NOMEM.
 */
CW_PUBLIC cw_status_t cw_config_load(const char *path, unsigned flags,
                                     struct cw_config_diag *diag,
                                     struct cw_config **cfg_p);

/**
 * As cw_config_load, from memory.  @p name is used in messages.
 */
CW_PUBLIC cw_status_t cw_config_load_buffer(const char *name, const char *text,
                                            size_t len, unsigned flags,
                                            struct cw_config_diag *diag,
                                            struct cw_config **cfg_p);

/** Free a config (NULL accepted). */
CW_PUBLIC void cw_config_free(struct cw_config *cfg);

/**
 * Write the normalized configuration, every default filled in, as YAML that
 * loads back to an identical config.
 * @return CW_OK or CW_IO.
 */
CW_PUBLIC cw_status_t cw_config_dump(const struct cw_config *cfg, FILE *out);

/**
 * The same configuration as one JSON object: a member per section (acl
 * null when absent), every key with its value, defaults filled in; sizes,
 * durations and words as the strings cw_config_dump writes.
 * @return CW_OK, CW_INVALID_ARG, or CW_IO if writing failed.
 */
CW_PUBLIC cw_status_t cw_config_dump_json(const struct cw_config *cfg,
                                          FILE *out);

/**
 * Check that @p next may replace @p cur by a reload: every key whose schema
 * entry says "reload: no" must be unchanged.  In list sections whose items
 * have names (networks, services) items may be added and removed; an item
 * kept under the same name may change only its reloadable keys.  Each
 * violation is added to @p diag with the location in @p next.
 * @return CW_OK or CW_CONFIG.
 */
CW_PUBLIC cw_status_t cw_config_check_reload(const struct cw_config *cur,
                                             const struct cw_config *next,
                                             struct cw_config_diag *diag);

/** Index of the network called @p name, or -1. */
CW_PUBLIC int cw_config_network_find(const struct cw_config *cfg,
                                     const char *name);

/** Index of the service called @p name, or -1. */
CW_PUBLIC int cw_config_service_find(const struct cw_config *cfg,
                                     const char *name);

/* ------------------------------------------------------------------------ */
/* Schema (for docs and tools)                                              */
/* ------------------------------------------------------------------------ */

/** Value types of schema keys. */
enum cw_config_type {
    CW_CFG_STRING,   /**< free text */
    CW_CFG_NAME,     /**< identifier [A-Za-z0-9_.-], 1..31 chars */
    CW_CFG_UINT,     /**< unsigned integer (uint32_t) */
    CW_CFG_SIZE,     /**< bytes with B/KiB/MiB/GiB/TiB (uint64_t) */
    CW_CFG_DURATION, /**< us/ms/s/m/h, stored in ns (uint64_t) */
    CW_CFG_BOOL,     /**< true/false */
    CW_CFG_ENUM,     /**< one of a fixed set of words (int) */
    CW_CFG_ADDR,     /**< plain address (char *) */
    CW_CFG_HOSTPORT, /**< "host:port" or "" (char *) */
    CW_CFG_PATTERN,  /**< destination pattern (char *) */
    CW_CFG_ADDRLIST, /**< list of plain addresses (strlist) */
    CW_CFG_ALLOWLIST /**< list of "svc:<name>" / patterns (strlist) */
};

/** One key of a section. */
struct cw_config_key {
    const char *name;
    enum cw_config_type type;
    size_t offset;            /**< into the section/item struct */
    const char *def;          /**< default as the user writes it; NULL =
                                   required (or optional, see below) */
    bool optional;            /**< may be absent with no default */
    uint64_t min, max;        /**< bounds (UINT/SIZE/DURATION/lists) */
    const char *const *words; /**< ENUM words, NULL-terminated */
    bool reload;              /**< a reload may change it */
    const char *help;
};

/** One top-level section. */
struct cw_config_section {
    const char *name;
    bool is_list;        /**< a sequence of mappings */
    bool reload;         /**< for lists: a reload may change the list */
    size_t offset;       /**< struct (map) or pointer to array (list) */
    size_t count_offset; /**< list: size_t count */
    size_t item_size;    /**< list: size of one item */
    const struct cw_config_key *keys;
    size_t nkeys;
    const char *help;
};

/**
 * The schema: every section in file order.
 * @param[out] count_p number of sections.
 */
CW_PUBLIC const struct cw_config_section *cw_config_schema(size_t *count_p);

/** Name of a type as shown in docs and errors ("size", "duration"...). */
CW_PUBLIC const char *cw_config_type_name(enum cw_config_type type);

/** Write the schema as the Markdown reference tables of docs/config.md. */
CW_PUBLIC void cw_config_schema_markdown(FILE *out);

#ifdef __cplusplus
}
#endif

#endif /* CAUSEWAY_CONFIG_H */
