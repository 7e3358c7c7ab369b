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
 * Like cw_test_peer_spawn(), and the peer also registers @p mem_size bytes
 * (read and write, every byte 0xa5) and reports the serialized handle in
 * @p mem (@p mem_len bytes; its length in *mem_len_p).
 */
pid_t cw_test_peer_spawn_mem(const char *uri, char *addr, size_t len,
                             size_t mem_size, void *mem, size_t mem_len,
                             size_t *mem_len_p);

/**
 * If argv asks for a peer ("--peer URI FD [MEM_SIZE]"), run it and store its
 * exit status in *rc_p; @return whether it did.
 */
bool cw_test_peer_dispatch(int argc, char **argv, int *rc_p);

/**
 * This program's path, for a child to exec: readlink() of /proc/self/exe.
 * Under valgrind the kernel's /proc/self/exe is valgrind's tool, while
 * readlink() of it gives the program (valgrind answers it), so the child
 * still starts; "/proc/self/exe" itself when the file was replaced (a
 * rebuild meanwhile) or cannot be read.  Computed before fork().
 */
const char *cw_test_self_exe(void);

/** Read exactly @p len bytes from @p fd; @return false on EOF or error. */
bool cw_test_read_all(int fd, void *buf, size_t len);

#endif
