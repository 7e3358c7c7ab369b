/*
 * A peer process for NA tests: a fresh process (fork + exec of the test
 * binary itself, so no network library state crosses fork — UCX and verbs
 * forbid that) that opens an instance, reports its address and serves
 * until it is killed.  The test's main() must start with
 *
 *     int rc;
 *     if (cw_test_peer_dispatch(argc, argv, &rc))
 *         return rc;
 */
#ifndef CW_TEST_NA_PEER_H
#define CW_TEST_NA_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/**
 * Start a peer listening on @p uri; its address is written to @p addr
 * (@p len bytes).  @return its pid, or -1 (with the reason on stderr).
 */
pid_t cw_test_peer_spawn(const char *uri, char *addr, size_t len);

/**
 * If argv asks for a peer ("--peer URI FD"), run it and store its exit
 * status in *rc_p; @return whether it did.
 */
bool cw_test_peer_dispatch(int argc, char **argv, int *rc_p);

#endif
