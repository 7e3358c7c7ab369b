/* Peer process for NA tests (see na_peer.h). */
#include "na_peer.h"

#include <causeway/log.h>
#include <causeway/na.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PEER_RECVS 8
#define PEER_LIFE_NS (60ull * 1000000000ull)

static cw_na_t *peer_na;

/* Received messages are dropped; the sender's address is released. */
static void peer_recv_cb(const struct cw_na_cb_info *info)
{
    if (info->type == CW_NA_OP_RECV_UNEXPECTED &&
        info->u.recv_unexpected.source != NULL)
        cw_na_addr_free(peer_na, info->u.recv_unexpected.source);
}

static int peer_main(const char *uri, int fd)
{
    static char in[PEER_RECVS][256];
    cw_na_addr_t *self;
    char buf[512];

    if (cw_na_open(uri, CW_NA_LISTEN, NULL, &peer_na) != CW_OK ||
        cw_na_addr_self(peer_na, &self) != CW_OK)
        return 1;
    if (cw_na_addr_to_string(peer_na, self, buf, sizeof(buf)) != CW_OK)
        return 1;
    cw_na_addr_free(peer_na, self);
    for (int i = 0; i < PEER_RECVS; i++)
        cw_na_msg_recv_unexpected(peer_na, in[i], sizeof(in[i]),
                                  peer_recv_cb, NULL, NULL);
    if (write(fd, buf, strlen(buf) + 1) < 0)
        return 1;
    close(fd);
    /* Bounded: a peer nobody kills goes away by itself. */
    for (uint64_t end = cw_now_ns() + PEER_LIFE_NS; cw_now_ns() < end;)
        cw_na_progress_wait(peer_na, 10, NULL);
    return 0;
}

bool cw_test_peer_dispatch(int argc, char **argv, int *rc_p)
{
    if (argc != 4 || strcmp(argv[1], "--peer") != 0)
        return false;
    *rc_p = peer_main(argv[2], atoi(argv[3]));
    return true;
}

pid_t cw_test_peer_spawn(const char *uri, char *addr, size_t len)
{
    int fds[2];
    char fdstr[16];
    pid_t pid;
    ssize_t n;

    if (pipe(fds) != 0) {
        perror("pipe");
        return -1;
    }
    snprintf(fdstr, sizeof(fdstr), "%d", fds[1]);
    pid = fork();
    if (pid < 0) {
        perror("fork");
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        execl("/proc/self/exe", "cw-test-peer", "--peer", uri, fdstr,
              (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    n = read(fds[0], addr, len);
    close(fds[0]);
    if (n <= 0) {
        fprintf(stderr, "peer %d reported no address for %s\n", (int)pid,
                uri);
        return -1;
    }
    addr[len - 1] = '\0';
    return pid;
}
