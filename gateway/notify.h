/*
 * The systemd readiness protocol (sd_notify(3), "Type=notify"), spoken
 * directly: libsystemd is not a dependency.  Does nothing unless
 * NOTIFY_SOCKET is set.
 */
#ifndef CW_GW_NOTIFY_H
#define CW_GW_NOTIFY_H

#include <stdbool.h>

/**
 * Send one datagram of newline-separated VAR=value assignments to the
 * service manager (NOTIFY_SOCKET: a socket path, or an abstract name
 * written "@name").  A failure is logged (once per kind) and otherwise
 * ignored: the gateway serves on without the manager hearing of it.
 * @param[in] fmt  printf format of the assignments, e.g. "READY=1".
 * @return true if sent, false if NOTIFY_SOCKET is unset or it failed.
 */
bool gw_notify(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/** "RELOADING=1", with MONOTONIC_USEC (CLOCK_MONOTONIC now, as systemd
 *  asks) and a STATUS= naming @p what. */
bool gw_notify_reloading(const char *what);

#endif /* CW_GW_NOTIFY_H */
