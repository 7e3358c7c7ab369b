/*
 * Causeway address strings (design §2).
 *
 *   plain    <plugin>[+<protocol>]://<location>     ofi+tcp://10.1.0.5:7000
 *   proxied  <target>@<gateway>[@<gateway>...]      rightmost hop first
 *   service  svc:<name>@<gateway>[@...]             resolved by the gateway
 *
 * Pure string functions: no I/O, no allocation, usable by config/ and
 * routing/ and safe on hostile input (every length is checked).
 */
#ifndef CAUSEWAY_ADDR_H
#define CAUSEWAY_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <causeway/status.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CW_URI_PLUGIN_MAX   16   /**< incl. NUL */
#define CW_URI_PROTOCOL_MAX 32   /**< incl. NUL */
#define CW_URI_LOCATION_MAX 192  /**< incl. NUL */
#define CW_URI_MAX          256  /**< longest formatted plain URI, incl. NUL */
#define CW_SERVICE_NAME_MAX 64   /**< incl. NUL */
#define CW_ADDR_MAX_HOPS    8    /**< gateways in one proxied address */
#define CW_ADDR_STR_MAX     2304 /**< longest proxied address, incl. NUL */

/** A parsed plain address. */
struct cw_uri {
    char plugin[CW_URI_PLUGIN_MAX];     /**< [a-z0-9_-], non-empty */
    char protocol[CW_URI_PROTOCOL_MAX]; /**< may be "" ; [a-z0-9_;.-] */
    char location[CW_URI_LOCATION_MAX]; /**< may be ""; printable, no '@',
                                             no whitespace */
};

/**
 * Parse a plain address.
 * @return CW_OK, or CW_INVALID_ARG naming nothing (use cw_uri_parse_err for
 *         a message).
 */
CW_PUBLIC cw_status_t cw_uri_parse(const char *s, struct cw_uri *uri_p);

/** As cw_uri_parse, with a human-readable reason in @p err on failure. */
CW_PUBLIC cw_status_t cw_uri_parse_err(const char *s, struct cw_uri *uri_p,
                                       char *err, size_t errlen);

/** Format back to "plugin[+proto]://location"; CW_OVERFLOW if too small. */
CW_PUBLIC cw_status_t cw_uri_format(const struct cw_uri *uri, char *buf,
                                    size_t len);

/** True if both name the same plugin, protocol and location. */
CW_PUBLIC bool cw_uri_equal(const struct cw_uri *a, const struct cw_uri *b);

/**
 * Split a location "host:port", "[v6]:port" or "host" into its parts.
 * @param[out] host  at least CW_URI_LOCATION_MAX bytes.
 * @param[out] port_p  port, or 0 when absent.
 */
CW_PUBLIC cw_status_t cw_location_split(const char *location, char *host,
                                        uint16_t *port_p);

/** A parsed, possibly proxied or service, address. */
struct cw_addr_path {
    bool is_service;                   /**< target is svc:<name> */
    char service[CW_SERVICE_NAME_MAX]; /**< when is_service */
    struct cw_uri target;              /**< when !is_service */
    unsigned nhops;                    /**< gateways, 0 = direct */
    /** hops[0] is contacted first (the rightmost in the string). */
    struct cw_uri hops[CW_ADDR_MAX_HOPS];
};

/**
 * Parse "target", "target@gw", "target@gw2@gw1", "svc:name@gw".
 * A service address must name at least one gateway.
 */
CW_PUBLIC cw_status_t cw_addr_path_parse(const char *s,
                                         struct cw_addr_path *path_p, char *err,
                                         size_t errlen);

/** Format back (inverse of cw_addr_path_parse). */
CW_PUBLIC cw_status_t cw_addr_path_format(const struct cw_addr_path *path,
                                          char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* CAUSEWAY_ADDR_H */
