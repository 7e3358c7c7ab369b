/*
 * Client side of the gateway admin protocol (docs/cwctl.md), shared by
 * cwctl and the demo.
 */
#ifndef CW_GW_ADMIN_CLIENT_H
#define CW_GW_ADMIN_CLIENT_H

#include <causeway/status.h>

/**
 * Send one command line to the admin interface at "host:port" and read
 * the whole answer (bounded by @p timeout_ms).
 * @param[out] ok_p     true if the gateway answered "OK".
 * @param[out] body_p   malloc'd answer without its status line (for ERR:
 *                      the reason); the caller frees it.
 * @return CW_OK, CW_INVALID_ARG (bad address), CW_UNREACHABLE (cannot
 *         connect), CW_TIMEOUT, CW_PROTOCOL, CW_NOMEM.
 */
cw_status_t cw_admin_request(const char *hostport, const char *line,
                             unsigned timeout_ms, bool *ok_p, char **body_p);

#endif /* CW_GW_ADMIN_CLIENT_H */
