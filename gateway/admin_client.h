/*
 * Client side of the gateway admin protocol (docs/cwctl.md), shared by
 * cwctl and the demo.
 */
#ifndef CW_GW_ADMIN_CLIENT_H
#define CW_GW_ADMIN_CLIENT_H

#include <stdbool.h>

#include <causeway/status.h>

/** Where cwctl looks first: the shipped configuration's
 *  gateway.admin_socket (systemd's RuntimeDirectory=causeway). */
#define CW_ADMIN_SOCKET_DEFAULT "/run/causeway/admin.sock"
/** ... and then: the default gateway.admin. */
#define CW_ADMIN_TCP_DEFAULT "127.0.0.1:9464"

/**
 * Send one command line to the admin interface at @p target and read the
 * whole answer (bounded by @p timeout_ms).
 * @param target        "host:port", "unix:PATH", or a path (a '/' in it).
 * @param token         the TCP endpoint's token (gateway.admin_token_file),
 *                      sent as a first line "auth TOKEN"; NULL: none.
 *                      Not sent over a Unix socket.
 * @param[out] ok_p     true if the gateway answered "OK".
 * @param[out] body_p   malloc'd answer without its status line (for ERR:
 *                      the reason, then any body); the caller frees it.
 * @return CW_OK, CW_INVALID_ARG (bad address), CW_UNREACHABLE (cannot
 *         connect), CW_PERMISSION (the socket file's mode refused us),
 *         CW_TIMEOUT, CW_PROTOCOL, CW_NOMEM.
 */
cw_status_t cw_admin_request(const char *target, const char *token,
                             const char *line, unsigned timeout_ms, bool *ok_p,
                             char **body_p);

/** The Unix socket path @p target names, or NULL if it is host:port. */
const char *cw_admin_unix_path(const char *target);

#endif /* CW_GW_ADMIN_CLIENT_H */
