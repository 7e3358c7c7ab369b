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
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static long long now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

const char *cw_admin_unix_path(const char *target)
{
    if (strncmp(target, "unix:", 5) == 0)
        return target + 5;
    return strchr(target, '/') != NULL ? target : NULL;
}

static cw_status_t admin_connect_unix(const char *path, int *fd_p)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    cw_status_t st;
    int fd;

    if (path[0] == '\0' || strlen(path) >= sizeof(sun.sun_path))
        return CW_INVALID_ARG;
    memcpy(sun.sun_path, path, strlen(path) + 1);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return CW_IO;
    if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0) {
        st = errno == EACCES || errno == EPERM ? CW_PERMISSION : CW_UNREACHABLE;
        close(fd);
        return st;
    }
    *fd_p = fd;
    return CW_OK;
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

/* Send all of @p s. */
static bool admin_send(int fd, const char *s)
{
    size_t n = strlen(s);

    return send(fd, s, n, MSG_NOSIGNAL) == (ssize_t)n;
}

cw_status_t cw_admin_request(const char *target, const char *token,
                             const char *line, unsigned timeout_ms, bool *ok_p,
                             char **body_p)
{
    long long end = now_ms() + timeout_ms;
    const char *path = cw_admin_unix_path(target);
    size_t len = 0, cap = 4096;
    char *buf, *nl;
    cw_status_t st;
    int fd;

    st = path != NULL ? admin_connect_unix(path, &fd)
                      : admin_connect(target, &fd);
    if (st != CW_OK)
        return st;
    buf = malloc(cap);
    if (buf == NULL) {
        close(fd);
        return CW_NOMEM;
    }
    if ((token != NULL && path == NULL &&
         (!admin_send(fd, "auth ") || !admin_send(fd, token) ||
          !admin_send(fd, "\n"))) ||
        !admin_send(fd, line) || !admin_send(fd, "\n")) {
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
        /* The reason, then what follows it (a JSON body). */
        *ok_p = false;
        *nl = '\n';
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
