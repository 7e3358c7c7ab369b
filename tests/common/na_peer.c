/* Peer process for NA tests (see na_peer.h). */
#include "na_peer.h"

#include <causeway/log.h>
#include <causeway/na.h>

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define PEER_RECVS   8
#define PEER_LIFE_NS (60ull * 1000000000ull)

static cw_na_t *peer_na;

/* Received messages are dropped; the sender's address is released. */
static void peer_recv_cb(const struct cw_na_cb_info *info)
{
    if (info->type == CW_NA_OP_RECV_UNEXPECTED &&
        info->u.recv_unexpected.source != NULL)
        cw_na_addr_free(peer_na, info->u.recv_unexpected.source);
}

/* The region of "--peer URI FD MEM_SIZE", its handle serialized after the
 * address on the pipe: u32 length, then the bytes. */
static int peer_report_mem(int fd, size_t size, void **region_p,
                           cw_na_mem_t **mem_p)
{
    struct cw_na_segment seg;
    unsigned char ser[1024];
    uint32_t n;

    *region_p = malloc(size);
    if (*region_p == NULL)
        return 1;
    memset(*region_p, 0xa5, size);
    seg.base = *region_p;
    seg.len = size;
    if (cw_na_mem_register(peer_na, &seg, 1, CW_NA_MEM_READ | CW_NA_MEM_WRITE,
                           mem_p) != CW_OK)
        return 1;
    n = (uint32_t)cw_na_mem_serialize_size(peer_na, *mem_p);
    if (n > sizeof(ser) ||
        cw_na_mem_serialize(peer_na, ser, n, *mem_p) != CW_OK)
        return 1;
    if (write(fd, &n, sizeof(n)) != (ssize_t)sizeof(n) ||
        write(fd, ser, n) != (ssize_t)n)
        return 1;
    return 0;
}

static int peer_main(const char *uri, int fd, size_t mem_size)
{
    static char in[PEER_RECVS][256];
    cw_na_addr_t *self;
    cw_na_mem_t *mem = NULL;
    void *region = NULL;
    char buf[512];

    if (cw_na_open(uri, CW_NA_LISTEN, NULL, &peer_na) != CW_OK ||
        cw_na_addr_self(peer_na, &self) != CW_OK)
        return 1;
    if (cw_na_addr_to_string(peer_na, self, buf, sizeof(buf)) != CW_OK)
        return 1;
    cw_na_addr_free(peer_na, self);
    for (int i = 0; i < PEER_RECVS; i++)
        cw_na_msg_recv_unexpected(peer_na, in[i], sizeof(in[i]), peer_recv_cb,
                                  NULL, NULL);
    if (write(fd, buf, strlen(buf) + 1) < 0)
        return 1;
    if (mem_size > 0 && peer_report_mem(fd, mem_size, &region, &mem) != 0)
        return 1;
    close(fd);
    /* Bounded: a peer nobody kills goes away by itself. */
    for (uint64_t end = cw_now_ns() + PEER_LIFE_NS; cw_now_ns() < end;)
        cw_na_progress_wait(peer_na, 10, NULL);
    if (mem)
        cw_na_mem_release(peer_na, mem);
    free(region);
    return 0;
}

bool cw_test_peer_dispatch(int argc, char **argv, int *rc_p)
{
    if ((argc != 4 && argc != 5) || strcmp(argv[1], "--peer") != 0)
        return false;
    *rc_p = peer_main(argv[2], atoi(argv[3]),
                      argc == 5 ? strtoull(argv[4], NULL, 10) : 0);
    return true;
}

bool cw_test_read_all(int fd, void *buf, size_t len)
{
    char *p = buf;

    while (len > 0) {
        ssize_t n = read(fd, p, len);
        if (n <= 0)
            return false;
        p += n;
        len -= (size_t)n;
    }
    return true;
}

/* The address: bytes up to and including its NUL. */
static bool peer_read_addr(int fd, char *addr, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (read(fd, &addr[i], 1) != 1)
            return false;
        if (addr[i] == '\0')
            return true;
    }
    return false;
}

const char *cw_test_self_exe(void)
{
    static char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

    if (n <= 0)
        return "/proc/self/exe";
    self[n] = '\0';
    if (strstr(self, " (deleted)") != NULL)
        return "/proc/self/exe";
    return self;
}

pid_t cw_test_peer_spawn_mem(const char *uri, char *addr, size_t len,
                             size_t mem_size, void *mem, size_t mem_len,
                             size_t *mem_len_p)
{
    int fds[2];
    char fdstr[16], sizestr[24];
    const char *exe = cw_test_self_exe();
    uint32_t n;
    pid_t pid;

    if (pipe(fds) != 0) {
        perror("pipe");
        return -1;
    }
    snprintf(fdstr, sizeof(fdstr), "%d", fds[1]);
    snprintf(sizestr, sizeof(sizestr), "%zu", mem_size);
    pid = fork();
    if (pid < 0) {
        perror("fork");
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        if (mem_size > 0)
            execl(exe, "cw-test-peer", "--peer", uri, fdstr, sizestr,
                  (char *)NULL);
        else
            execl(exe, "cw-test-peer", "--peer", uri, fdstr, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    if (!peer_read_addr(fds[0], addr, len)) {
        fprintf(stderr, "peer %d reported no address for %s\n", (int)pid, uri);
        goto fail;
    }
    if (mem_size > 0) {
        if (!cw_test_read_all(fds[0], &n, sizeof(n)) || n > mem_len ||
            !cw_test_read_all(fds[0], mem, n)) {
            fprintf(stderr, "peer %d reported no memory handle\n", (int)pid);
            goto fail;
        }
        *mem_len_p = n;
    }
    close(fds[0]);
    return pid;

fail:
    close(fds[0]);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

pid_t cw_test_peer_spawn(const char *uri, char *addr, size_t len)
{
    return cw_test_peer_spawn_mem(uri, addr, len, 0, NULL, 0, NULL);
}
