/*
 * Admin interface on gateway.admin (loopback TCP).  Protocol (docs/cwctl.md):
 * the client sends one line "<command> [<argument>] [json]\n"; the gateway
 * answers "OK\n" or "ERR <reason>\n", then the body, and closes.  The same
 * commands also answer HTTP/1.0 ("GET /stats?json").  Commands:
 * status, routes, services, stats, explain <addr>, reload, drain.  Bodies
 * are tables for people, or JSON with the "json" word.
 */
#include "gw_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define GW_ADMIN_READ_NS 2000000000ull

cw_status_t gw_admin_open(struct gw *gw, const char *hostport)
{
    char host[CW_URI_LOCATION_MAX], port[8];
    struct addrinfo hints = {0}, *ai = NULL;
    uint16_t p;
    int fd = -1, one = 1, rc;

    if (cw_location_split(hostport, host, &p) != CW_OK) {
        CW_ERROR(GW_LOG, "admin address \"%s\" is not host:port", hostport);
        return CW_INVALID_ARG;
    }
    snprintf(port, sizeof(port), "%u", p);
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    rc = getaddrinfo(host, port, &hints, &ai);
    if (rc != 0) {
        CW_ERROR(GW_LOG, "getaddrinfo(%s) failed: %s", host, gai_strerror(rc));
        return CW_INVALID_ARG;
    }
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        CW_ERROR(GW_LOG, "socket() failed: %s", strerror(errno));
        goto err_free;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        CW_ERROR(GW_LOG, "admin: bind(%s) failed: %s", hostport,
                 strerror(errno));
        goto err_close;
    }
    if (listen(fd, 16) != 0) {
        CW_ERROR(GW_LOG, "admin: listen(%s) failed: %s", hostport,
                 strerror(errno));
        goto err_close;
    }
    freeaddrinfo(ai);
    gw->admin_fd = fd;
    /* Port 0 lets the kernel choose; report what it chose. */
    {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        char h[INET6_ADDRSTRLEN] = "?";
        unsigned bport = 0;
        if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
            if (ss.ss_family == AF_INET) {
                struct sockaddr_in *a = (struct sockaddr_in *)&ss;
                inet_ntop(AF_INET, &a->sin_addr, h, sizeof(h));
                bport = ntohs(a->sin_port);
                snprintf(gw->admin_addr, sizeof(gw->admin_addr), "%s:%u", h,
                         bport);
            } else {
                struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
                inet_ntop(AF_INET6, &a->sin6_addr, h, sizeof(h));
                bport = ntohs(a->sin6_port);
                snprintf(gw->admin_addr, sizeof(gw->admin_addr), "[%s]:%u",
                         h, bport);
            }
        }
    }
    GW_NOTICE("admin interface on %s", gw->admin_addr);
    return CW_OK;

err_close:
    close(fd);
err_free:
    freeaddrinfo(ai);
    return errno == EADDRINUSE ? CW_ADDR_IN_USE : CW_IO;
}

void gw_admin_close(struct gw *gw)
{
    for (unsigned i = 0; i < GW_ADMIN_CONNS; i++) {
        if (gw->conns[i].fd >= 0)
            close(gw->conns[i].fd);
        gw->conns[i].fd = -1;
    }
    if (gw->admin_fd >= 0)
        close(gw->admin_fd);
    gw->admin_fd = -1;
}

/* HTTP/1.0 for curl and monitoring agents: "GET /stats?json" is the
 * command line "stats json"; "GET /explain?ADDR" is "explain ADDR";
 * reload and drain also answer POST.  The body is the same; the status
 * line says 200, 403 (a change asked from a remote address) or 400. */
static void gw_admin_http(struct gw *gw, const char *req, bool local,
                          FILE *out)
{
    char line[600], path[512] = "", *q, *body = NULL;
    size_t blen = 0;
    FILE *b;
    bool ok;

    if (sscanf(req, "%*s /%511s", path) != 1)
        path[0] = '\0';
    q = strchr(path, '?');
    if (q != NULL)
        *q++ = '\0';
    snprintf(line, sizeof(line), "%s%s%s", path, q ? " " : "", q ? q : "");
    for (char *p = line; *p != '\0'; p++)
        if (*p == '&')
            *p = ' ';
    b = open_memstream(&body, &blen);
    if (b == NULL)
        return;
    gw_admin_exec(gw, line, local, b);
    fclose(b);
    ok = strncmp(body, "OK\n", 3) == 0;
    fprintf(out, "HTTP/1.0 %s\r\nContent-Type: %s\r\n"
            "Connection: close\r\n\r\n%s",
            ok ? "200 OK"
            : strncmp(body, "ERR forbidden", 13) == 0 ? "403 Forbidden"
                                                      : "400 Bad Request",
            strstr(line, "json") ? "application/json"
            : ok && strncmp(line, "metrics", 7) == 0
                ? "text/plain; version=0.0.4; charset=utf-8"
                : "text/plain",
            ok ? body + 3 : body);
    free(body);
}

static void gw_admin_reply(struct gw *gw, struct gw_admin_conn *c)
{
    struct timeval tv = {.tv_sec = 1};
    char *text = NULL;
    size_t len = 0, off = 0;
    FILE *out;
    int flags;

    c->buf[c->len] = '\0';
    c->buf[strcspn(c->buf, "\r\n")] = '\0';
    out = open_memstream(&text, &len);
    if (out == NULL)
        goto done;
    if (strncmp(c->buf, "GET /", 5) == 0 || strncmp(c->buf, "POST /", 6) == 0)
        gw_admin_http(gw, c->buf, c->local, out);
    else
        gw_admin_exec(gw, c->buf, c->local, out);
    fclose(out);
    /* Replies are small: write them out with a bounded blocking send. */
    flags = fcntl(c->fd, F_GETFL);
    fcntl(c->fd, F_SETFL, flags & ~O_NONBLOCK);
    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    while (off < len) {
        ssize_t n = send(c->fd, text + off, len - off, MSG_NOSIGNAL);
        if (n <= 0)
            break;
        off += (size_t)n;
    }
    /* Read what the client still sent (HTTP headers) so that closing does
     * not reset the connection before it has read the answer. */
    shutdown(c->fd, SHUT_WR);
    fcntl(c->fd, F_SETFL, flags | O_NONBLOCK);
    while (recv(c->fd, c->buf, sizeof(c->buf), 0) > 0)
        ;
done:
    free(text);
    close(c->fd);
    c->fd = -1;
}

/* A command is one line; an HTTP request ends with its headers (an empty
 * line): answering after its first line and closing would reset the
 * connection under a client still writing the rest (bash writes each line
 * of a request separately), which then dies of SIGPIPE. */
static bool gw_admin_complete(struct gw_admin_conn *c)
{
    c->buf[c->len] = '\0';
    if (strncmp(c->buf, "GET /", 5) == 0 || strncmp(c->buf, "POST /", 6) == 0)
        return strstr(c->buf, "\r\n\r\n") != NULL ||
               strstr(c->buf, "\n\n") != NULL;
    return memchr(c->buf, '\n', c->len) != NULL;
}

/* A client on 127.0.0.0/8, ::1 or an IPv4-mapped loopback address. */
static bool gw_admin_peer_local(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
    }
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        const uint8_t *b = a->sin6_addr.s6_addr;
        return IN6_IS_ADDR_LOOPBACK(&a->sin6_addr) ||
               (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr) && b[12] == 127);
    }
    return false;
}

void gw_admin_poll(struct gw *gw, uint64_t now)
{
    if (gw->admin_fd < 0)
        return;
    for (;;) {
        struct gw_admin_conn *c = NULL;
        struct sockaddr_storage peer;
        socklen_t sl;
        int fd;

        for (unsigned i = 0; i < GW_ADMIN_CONNS && c == NULL; i++)
            if (gw->conns[i].fd < 0)
                c = &gw->conns[i];
        if (c == NULL)
            break;
        sl = sizeof(peer);
        fd = accept4(gw->admin_fd, (struct sockaddr *)&peer, &sl,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            break;
        c->fd = fd;
        c->local = gw_admin_peer_local(&peer);
        c->len = 0;
        c->deadline_ns = now + GW_ADMIN_READ_NS;
    }
    for (unsigned i = 0; i < GW_ADMIN_CONNS; i++) {
        struct gw_admin_conn *c = &gw->conns[i];
        ssize_t n;

        if (c->fd < 0)
            continue;
        n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - 1 - c->len, 0);
        if (n > 0)
            c->len += (size_t)n;
        if (gw_admin_complete(c) || n == 0 || c->len == sizeof(c->buf) - 1) {
            gw_admin_reply(gw, c);
        } else if ((n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) ||
                   now >= c->deadline_ns) {
            close(c->fd);
            c->fd = -1;
        }
    }
}
