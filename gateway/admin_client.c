/*
 * Admin protocol client (see admin_client.h).
 */
#include <stdbool.h>

#include "admin_client.h"

#include <causeway/addr.h>

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long long now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static cw_status_t admin_connect(const char *hostport, int *fd_p)
{
    char host[CW_URI_LOCATION_MAX], port[8];
    struct addrinfo hints = {0}, *ai = NULL;
    uint16_t p;
    int fd;

    if (cw_location_split(hostport, host, &p) != CW_OK || p == 0)
        return CW_INVALID_ARG;
    snprintf(port, sizeof(port), "%u", p);
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    if (getaddrinfo(host, port, &hints, &ai) != 0)
        return CW_INVALID_ARG;
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        if (fd >= 0)
            close(fd);
        freeaddrinfo(ai);
        return CW_UNREACHABLE;
    }
    freeaddrinfo(ai);
    *fd_p = fd;
    return CW_OK;
}

cw_status_t cw_admin_request(const char *hostport, const char *line,
                             unsigned timeout_ms, bool *ok_p, char **body_p)
{
    long long end = now_ms() + timeout_ms;
    size_t len = 0, cap = 4096, n = strlen(line);
    char *buf, *nl;
    cw_status_t st;
    int fd;

    st = admin_connect(hostport, &fd);
    if (st != CW_OK)
        return st;
    buf = malloc(cap);
    if (buf == NULL) {
        close(fd);
        return CW_NOMEM;
    }
    if (send(fd, line, n, MSG_NOSIGNAL) != (ssize_t)n ||
        send(fd, "\n", 1, MSG_NOSIGNAL) != 1) {
        st = CW_IO;
        goto out;
    }
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        long long left = end - now_ms();
        ssize_t r;

        if (left <= 0) {
            st = CW_TIMEOUT;
            goto out;
        }
        if (poll(&pfd, 1, (int)left) <= 0)
            continue;
        if (len + 1024 > cap) {
            char *nb = realloc(buf, cap * 2);
            if (nb == NULL) {
                st = CW_NOMEM;
                goto out;
            }
            buf = nb;
            cap *= 2;
        }
        r = recv(fd, buf + len, cap - len - 1, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    buf[len] = '\0';
    nl = strchr(buf, '\n');
    if (nl == NULL) {
        st = CW_PROTOCOL;
        goto out;
    }
    *nl = '\0';
    if (strcmp(buf, "OK") == 0) {
        *ok_p = true;
        memmove(buf, nl + 1, strlen(nl + 1) + 1);
    } else if (strncmp(buf, "ERR", 3) == 0) {
        *ok_p = false;
        memmove(buf, buf + (buf[3] == ' ' ? 4 : 3),
                strlen(buf + (buf[3] == ' ' ? 4 : 3)) + 1);
    } else {
        st = CW_PROTOCOL;
        goto out;
    }
    *body_p = buf;
    buf = NULL;
    st = CW_OK;
out:
    free(buf);
    close(fd);
    return st;
}
