/*
 * sd_notify without libsystemd.  The protocol is one AF_UNIX datagram per
 * notification, sent to the address in NOTIFY_SOCKET: a file-system path,
 * or "@name" for the abstract namespace (the '@' is a leading NUL on the
 * wire).  systemd checks the sender's credentials itself, so nothing but
 * the text is sent.  A socket is opened per message: the gateway notifies
 * a handful of times in its life (ready, each reload, stopping).
 */
#include "notify.h"
#include "gw_int.h"

#include <causeway/log.h>

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* Fills @p sa from NOTIFY_SOCKET; false (logged) if it cannot name one. */
static bool notify_addr(const char *name, struct sockaddr_un *sa,
                        socklen_t *len_p)
{
    size_t n = strlen(name);

    if ((name[0] != '/' && name[0] != '@') || n < 2 ||
        n >= sizeof(sa->sun_path)) {
        CW_LOG_RL(CW_LOG_WARN, GW_LOG,
                  "NOTIFY_SOCKET '%s': not a socket "
                  "path or @abstract name (at most %zu bytes): the service "
                  "manager is not told",
                  name, sizeof(sa->sun_path) - 1);
        return false;
    }
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    memcpy(sa->sun_path, name, n);
    if (name[0] == '@')
        sa->sun_path[0] = '\0';
    /* An abstract name is exactly n bytes long, with no NUL after it. */
    *len_p = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n +
                         (name[0] == '/' ? 1 : 0));
    return true;
}

static bool notify_send(const char *msg, size_t len)
{
    const char *name = getenv("NOTIFY_SOCKET");
    struct sockaddr_un sa;
    socklen_t salen;
    ssize_t sent;
    int fd;

    if (name == NULL || name[0] == '\0')
        return false;
    if (!notify_addr(name, &sa, &salen))
        return false;
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        CW_LOG_RL(CW_LOG_WARN, GW_LOG,
                  "socket(AF_UNIX) for NOTIFY_SOCKET "
                  "failed: %s",
                  strerror(errno));
        return false;
    }
    /* Never wait on a manager that does not read: this runs under every
     * worker's lock (a reload). */
    sent = sendto(fd, msg, len, MSG_NOSIGNAL | MSG_DONTWAIT,
                  (struct sockaddr *)&sa, salen);
    if (sent != (ssize_t)len)
        CW_LOG_RL(CW_LOG_WARN, GW_LOG, "sendto(NOTIFY_SOCKET %s) failed: %s",
                  name, sent < 0 ? strerror(errno) : "short write");
    close(fd);
    return sent == (ssize_t)len;
}

bool gw_notify(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    int n;

    if (getenv("NOTIFY_SOCKET") == NULL)
        return false;
    va_start(ap, fmt);
    n = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (n < 0)
        return false;
    /* A STATUS= text too long is cut, not dropped. */
    return notify_send(msg,
                       (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
}

bool gw_notify_reloading(const char *what)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return gw_notify("RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading %s",
                     (unsigned long long)ts.tv_sec * 1000000ull +
                         (unsigned long long)ts.tv_nsec / 1000ull,
                     what);
}
