/*
 * Helpers shared by the na-shm tests (test_shm_plugin.c, test_shm_process.c):
 * completion records, bounded progress loops, unique names, and child
 * processes that report on a pipe and are always reaped.
 */
#ifndef CW_TEST_SHM_UTIL_H
#define CW_TEST_SHM_UTIL_H

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <causeway/log.h>
#include <causeway/na.h>

#define WAIT_MS 5000u
#define URI_LEN 256

struct done {
    int calls;
    cw_status_t status;
    size_t len;
    uint32_t tag;
    cw_na_addr_t *source;
};

static inline void done_cb(const struct cw_na_cb_info *info)
{
    struct done *d = info->arg;
    d->calls++;
    d->status = info->status;
    if (info->type == CW_NA_OP_RECV_UNEXPECTED) {
        d->len = info->u.recv_unexpected.len;
        d->tag = info->u.recv_unexpected.tag;
        d->source = info->u.recv_unexpected.source;
    } else if (info->type == CW_NA_OP_RECV_EXPECTED) {
        d->len = info->u.recv_expected.len;
    }
}

/* Progress every instance until d->calls >= want (bounded). */
static inline bool wait_done(cw_na_t **nas, size_t n, const int *calls,
                             int want)
{
    uint64_t deadline = cw_now_ns() + WAIT_MS * 1000000ull;
    while (*calls < want) {
        if (cw_now_ns() > deadline)
            return false;
        for (size_t i = 0; i < n; i++)
            cw_na_progress(nas[i], 0, NULL);
    }
    return true;
}

/* As wait_done for one instance, but blocking in cw_na_progress_wait so
 * that an idle process gives the CPU away (children of busy tests). */
static inline bool wait_done_blocking(cw_na_t *na, const int *calls, int want)
{
    uint64_t deadline = cw_now_ns() + WAIT_MS * 1000000ull;
    while (*calls < want) {
        if (cw_now_ns() > deadline)
            return false;
        cw_na_progress_wait(na, 10, NULL);
    }
    return true;
}

static inline void unique_name(char *buf, size_t len, const char *what)
{
    static unsigned counter;
    snprintf(buf, len, "t%d-%s-%u", (int)getpid(), what, counter++);
}

/* "<prefix><name>", the name na-shm gives endpoint @p name's segment
 * (under /dev/shm) and socket (abstract) in this process's namespace:
 * "causeway-<name>", or "causeway.<ns>-<name>" under
 * CAUSEWAY_SHM_NAMESPACE=<ns> (docs/na-shm.md). */
static inline void seg_name(char *buf, size_t len, const char *name)
{
    const char *ns = getenv("CAUSEWAY_SHM_NAMESPACE");
    int n;

    if (ns != NULL && ns[0] != '\0')
        n = snprintf(buf, len, "causeway.%s-%s", ns, name);
    else
        n = snprintf(buf, len, "causeway-%s", name);
    assert_true(n > 0 && (size_t)n < len);
}

static inline bool seg_exists(const char *name)
{
    char seg[96], path[128];
    struct stat st;
    seg_name(seg, sizeof(seg), name);
    snprintf(path, sizeof(path), "/dev/shm/%s", seg);
    return stat(path, &st) == 0;
}

static inline void self_uri(cw_na_t *na, char *buf)
{
    cw_na_addr_t *self;
    assert_int_equal(cw_na_addr_self(na, &self), CW_OK);
    assert_int_equal(cw_na_addr_to_string(na, self, buf, URI_LEN), CW_OK);
    cw_na_addr_free(na, self);
}

/* Child process helpers: the child reports on a pipe, the parent reaps. */
static inline pid_t fork_child(int (*fn)(void *, int), void *arg, int *rfd_p)
{
    int pfd[2];
    assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(pfd[0]);
        alarm(60);
        _exit(fn(arg, pfd[1]));
    }
    close(pfd[1]);
    *rfd_p = pfd[0];
    return pid;
}

/* Read a line from @p fd, progressing @p na (if not NULL) while waiting:
 * the writer may need us to take its message.  False at EOF or after
 * @p ms. */
static inline bool read_line_progress(cw_na_t *na, int fd, char *buf,
                                      size_t len, unsigned ms)
{
    uint64_t deadline = cw_now_ns() + (uint64_t)ms * 1000000ull;
    size_t got = 0;
    while (got + 1 < len && cw_now_ns() < deadline) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (na)
            cw_na_progress(na, 0, NULL);
        if (poll(&pfd, 1, na ? 1 : 100) <= 0)
            continue;
        ssize_t n = read(fd, buf + got, 1);
        if (n <= 0)
            return false;
        if (buf[got] == '\n') {
            buf[got] = '\0';
            return true;
        }
        got++;
    }
    return false;
}

static inline bool read_line(int fd, char *buf, size_t len)
{
    return read_line_progress(NULL, fd, buf, len, UINT_MAX);
}

static inline int reap(pid_t pid)
{
    int status = 0;
    for (int i = 0; i < 1000; i++) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return 255;
}

#endif /* CW_TEST_SHM_UTIL_H */
