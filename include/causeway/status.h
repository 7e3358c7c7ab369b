/*
 * Causeway status codes.
 *
 * Statuses cross the wire (RPC responses, gateway answers), so every code has
 * a fixed number that is never reused or renumbered.  New codes are appended
 * with the next free number.  The string table is generated from the same
 * list (CW_STATUS_LIST) so the two cannot drift apart.
 */
#ifndef CAUSEWAY_STATUS_H
#define CAUSEWAY_STATUS_H

#include <stdbool.h>

/* What libcauseway exports: the functions and variables these headers
 * declare, nothing else (the library is built with hidden visibility). */
#if defined(__GNUC__)
#define CW_PUBLIC __attribute__((visibility("default")))
#else
#define CW_PUBLIC
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* X(NAME, number, description) */
#define CW_STATUS_LIST(X)                                                      \
    X(OK, 0, "success")                                                        \
    X(INVALID_ARG, 1, "invalid argument")                                      \
    X(NOMEM, 2, "out of memory")                                               \
    X(NOENT, 3, "no such entry")                                               \
    X(EXIST, 4, "already exists")                                              \
    X(TIMEOUT, 5, "timed out")                                                 \
    X(CANCELED, 6, "operation canceled")                                       \
    X(AGAIN, 7, "resource temporarily unavailable")                            \
    X(BUSY, 8, "busy, try again later")                                        \
    X(UNSUPPORTED, 9, "operation not supported")                               \
    X(PERMISSION, 10, "permission denied")                                     \
    X(OVERFLOW, 11, "message or buffer too large")                             \
    X(PROTOCOL, 12, "malformed or unexpected message")                         \
    X(UNREACHABLE, 13, "destination unreachable")                              \
    X(DISCONNECTED, 14, "peer disconnected")                                   \
    X(ADDR_IN_USE, 15, "address already in use")                               \
    X(IO, 16, "input/output error")                                            \
    X(FAULT, 17, "bad memory address")                                         \
    X(RANGE, 18, "out of range")                                               \
    X(NO_RPC, 19, "no such RPC registered")                                    \
    X(DENIED, 20, "denied by access control")                                  \
    X(DRAINING, 21, "draining, not accepting new requests")                    \
    X(TTL_EXPIRED, 22, "hop limit exceeded")                                   \
    X(VERSION, 23, "version mismatch")                                         \
    X(NO_ROUTE, 24, "no route to destination")                                 \
    X(CONFIG, 25, "invalid configuration")                                     \
    X(INTERNAL, 26, "internal error")                                          \
    X(EXPIRED, 27, "handle expired")                                           \
    X(BAD_HANDLE, 28, "invalid or forged handle")                              \
    X(NOT_READY, 29, "not ready")                                              \
    X(REMOTE, 30, "remote handler failed")

/** Status of every Causeway call; CW_OK is zero, errors are positive. */
typedef enum cw_status {
#define CW_STATUS_ENUM_(name, num, desc) CW_##name = num,
    CW_STATUS_LIST(CW_STATUS_ENUM_)
#undef CW_STATUS_ENUM_
} cw_status_t;

/** Number one past the highest status code currently defined. */
#define CW_STATUS_MAX 31

/**
 * Human-readable description of a status.
 * @param[in] status  any value; unknown values give "unknown status".
 * @return a static string, never NULL.
 */
CW_PUBLIC const char *cw_status_str(cw_status_t status);

/**
 * Symbolic name of a status ("CW_TIMEOUT").
 * @return a static string, never NULL ("CW_UNKNOWN" for unknown values).
 */
CW_PUBLIC const char *cw_status_name(cw_status_t status);

/** True if @p status is a code this build knows. */
CW_PUBLIC bool cw_status_valid(int status);

#ifdef __cplusplus
}
#endif

#endif /* CAUSEWAY_STATUS_H */
