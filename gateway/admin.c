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
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* A client's time to send its request, to take the answer and to close
 * after it, and what it may send meanwhile. */
#define GW_ADMIN_READ_NS 2000000000ull
#define GW_ADMIN_WRITE_NS   5000000000ull
#define GW_ADMIN_LINGER_NS  1000000000ull
#define GW_ADMIN_LINGER_MAX 65536u

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

static void gw_admin_conn_close(struct gw_admin_conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    free(c->out);
    c->out = NULL;
    c->out_len = c->out_off = 0;
    c->closing = false;
}

void gw_admin_close(struct gw *gw)
{
    for (unsigned i = 0; i < GW_ADMIN_CONNS; i++)
        gw_admin_conn_close(&gw->conns[i]);
    if (gw->admin_fd >= 0)
        close(gw->admin_fd);
    gw->admin_fd = -1;
}

/* The HTTP status of an answer @p body to command @p line. */
static const char *gw_http_status(const char *line, const char *body)
{
    if (strncmp(body, "OK\n", 3) == 0)
        return "200 OK";
    if (strncmp(body, "ERR forbidden", 13) == 0)
        return "403 Forbidden";
    if (strncmp(body, "ERR unknown command", 19) == 0)
        return "404 Not Found";
    if (strncmp(body, "ERR restart needed", 18) == 0)
        return "409 Conflict";
    if (strncmp(line, "ready", 5) == 0)
        return "503 Service Unavailable";
    return "400 Bad Request";
}

/* HTTP/1.0 for curl and monitoring agents: "GET /stats?json" is the
 * command line "stats json"; "GET /explain?ADDR" is "explain ADDR";
 * reload and drain, which change the gateway, only by POST (405 to a
 * GET, with nothing done: a crawler or a prefetching proxy must not drain
 * it); "GET /ready" answers 200 while serving, 503 once draining.  The
 * body is the command's; the status line says 200, 403 (a change asked
 * from a remote address), 404 (no such command), 405, 503 or 400. */
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
    if (strncmp(req, "GET ", 4) == 0 &&
        (strcmp(path, "reload") == 0 || strcmp(path, "drain") == 0)) {
        fprintf(out, "HTTP/1.0 405 Method Not Allowed\r\nAllow: POST\r\n"
                "Content-Type: text/plain\r\nConnection: close\r\n\r\n"
                "%s changes the gateway: POST only\n", path);
        return;
    }
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
            gw_http_status(line, body),
            strstr(line, "json") ? "application/json"
            : ok && strncmp(line, "metrics", 7) == 0
                ? "text/plain; version=0.0.4; charset=utf-8"
                : "text/plain",
            ok ? body + 3 : body);
    free(body);
}

/* The request is complete: run it and keep the answer for the writes. */
static void gw_admin_answer(struct gw *gw, struct gw_admin_conn *c,
                            uint64_t now)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out;

    c->buf[c->len] = '\0';
    c->buf[strcspn(c->buf, "\r\n")] = '\0';
    out = open_memstream(&text, &len);
    if (out == NULL) {
        gw_admin_conn_close(c);
        return;
    }
    if (strncmp(c->buf, "GET /", 5) == 0 || strncmp(c->buf, "POST /", 6) == 0)
        gw_admin_http(gw, c->buf, c->local, out);
    else
        gw_admin_exec(gw, c->buf, c->local, out);
    if (fclose(out) != 0) {
        free(text);
        gw_admin_conn_close(c);
        return;
    }
    c->out = text;
    c->out_len = len;
    c->out_off = 0;
    c->deadline_ns = now + GW_ADMIN_WRITE_NS;
}

/* Write what the socket takes now; never block the thread that forwards
 * (a client that does not read once held it 1 s per answer).  Returns
 * false once the connection is closed. */
static bool gw_admin_write(struct gw_admin_conn *c, uint64_t now)
{
    while (c->out_off < c->out_len) {
        ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            c->out_off += (size_t)n;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) &&
            now < c->deadline_ns)
            return true;
        if (n < 0 && errno == EINTR)
            continue;
        gw_admin_conn_close(c);
        return false;
    }
    /* Then read what the client still sends (HTTP headers) until it
     * closes, so that closing does not reset the connection before it has
     * read the answer. */
    shutdown(c->fd, SHUT_WR);
    free(c->out);
    c->out = NULL;
    c->closing = true;
    c->len = 0;
    c->deadline_ns = now + GW_ADMIN_LINGER_NS;
    return true;
}

/* Closing: discard what the client sends until it closes, the deadline
 * passes or it has sent more than any request's remainder would be. */
static void gw_admin_linger(struct gw_admin_conn *c, uint64_t now)
{
    char junk[4096];

    while (c->len <= GW_ADMIN_LINGER_MAX) {
        ssize_t n = recv(c->fd, junk, sizeof(junk), MSG_DONTWAIT);
        if (n > 0) {
            c->len += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        gw_admin_conn_close(c); /* closed by the client, or an error */
        return;
    }
    if (now >= c->deadline_ns || c->len > GW_ADMIN_LINGER_MAX)
        gw_admin_conn_close(c);
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
        if (c->closing) {
            gw_admin_linger(c, now);
            continue;
        }
        if (c->out != NULL) {
            gw_admin_write(c, now);
            continue;
        }
        n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - 1 - c->len, 0);
        if (n > 0)
            c->len += (size_t)n;
        if (gw_admin_complete(c) || n == 0 || c->len == sizeof(c->buf) - 1) {
            gw_admin_answer(gw, c, now);
            if (c->fd >= 0)
                gw_admin_write(c, now);
        } else if ((n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) ||
                   now >= c->deadline_ns) {
            gw_admin_conn_close(c);
        }
    }
}
