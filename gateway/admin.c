/*
 * Admin interface on gateway.admin (TCP, loopback by default) and
 * gateway.admin_socket (a Unix socket whose file mode and group say who
 * may connect).  Protocol (docs/cwctl.md): the client sends one line
 * "<command> [<argument>] [json]\n", after a line "auth <token>" where the
 * TCP endpoint has a token; the gateway answers "OK\n" or "ERR <reason>\n",
 * then the body, and closes.  The same commands also answer HTTP/1.0
 * ("GET /stats?json", admin_http.c).  Bodies are tables for people, or
 * JSON with the "json" word.
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
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* A client's time to send its request, to take the answer and to close
 * after it, and what it may send meanwhile. */
#define GW_ADMIN_READ_NS    2000000000ull
#define GW_ADMIN_WRITE_NS   5000000000ull
#define GW_ADMIN_LINGER_NS  1000000000ull
#define GW_ADMIN_LINGER_MAX 65536u

static cw_status_t gw_admin_open_tcp(struct gw *gw, const char *hostport)
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
                snprintf(gw->admin_addr, sizeof(gw->admin_addr), "[%s]:%u", h,
                         bport);
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

/* Whether the Unix socket at @p path is stale: nothing listens on it (a
 * refused connection).  Anything else (it accepts, its backlog is full,
 * this user may not connect) keeps it. */
static bool gw_admin_unix_stale(const char *path)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    bool stale;
    int fd;

    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false; /* cannot tell: do not remove it */
    memcpy(sun.sun_path, path, strlen(path) + 1);
    stale = connect(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0 &&
            errno == ECONNREFUSED;
    close(fd);
    return stale;
}

/* Bind @p fd to @p path; a socket file left by a gateway that died is
 * replaced, never one a live process listens on nor any other file. */
static cw_status_t gw_admin_unix_bind(int fd, const char *path)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    struct stat sb;
    mode_t old;
    int rc, err;

    memcpy(sun.sun_path, path, strlen(path) + 1);
    for (int attempt = 0; attempt < 2; attempt++) {
        /* Nobody but the owner may connect until the mode is set. */
        old = umask(0177);
        rc = bind(fd, (struct sockaddr *)&sun, sizeof(sun));
        err = errno;
        umask(old);
        if (rc == 0)
            return CW_OK;
        if (err != EADDRINUSE || attempt > 0)
            break;
        if (lstat(path, &sb) != 0 || !S_ISSOCK(sb.st_mode)) {
            CW_ERROR(GW_LOG,
                     "admin_socket %s exists and is not a socket: "
                     "not replaced",
                     path);
            return CW_ADDR_IN_USE;
        }
        if (!gw_admin_unix_stale(path)) {
            CW_ERROR(GW_LOG,
                     "admin_socket %s: another process listens on "
                     "it (another gateway?), or this user may not connect "
                     "to it: not replaced",
                     path);
            return CW_ADDR_IN_USE;
        }
        GW_NOTICE("admin_socket %s: removing the stale socket file", path);
        if (unlink(path) != 0 && errno != ENOENT) {
            err = errno;
            break;
        }
    }
    CW_ERROR(GW_LOG, "admin_socket: bind(%s) failed: %s", path, strerror(err));
    return err == EADDRINUSE ? CW_ADDR_IN_USE : CW_IO;
}

/* The Unix-socket endpoint: created owner-only, then given its group and
 * mode, so that no one else can connect in between. */
static cw_status_t gw_admin_open_unix(struct gw *gw,
                                      const struct cw_config_gateway *g)
{
    const char *path = g->admin_socket;
    unsigned mode, gid = (unsigned)-1;
    struct stat sb;
    cw_status_t st;
    int fd;

    if (strlen(path) >= sizeof(gw->admin_unix_path) ||
        cw_config_socket_mode(g->admin_socket_mode, &mode) != CW_OK) {
        CW_ERROR(GW_LOG, "admin_socket %s: bad path or mode \"%s\"", path,
                 g->admin_socket_mode);
        return CW_INVALID_ARG;
    }
    if (g->admin_socket_group != NULL && g->admin_socket_group[0] != '\0' &&
        cw_config_group_id(g->admin_socket_group, &gid) != CW_OK) {
        CW_ERROR(GW_LOG, "admin_socket_group: no group \"%s\"",
                 g->admin_socket_group);
        return CW_INVALID_ARG;
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        CW_ERROR(GW_LOG, "socket(AF_UNIX) failed: %s", strerror(errno));
        return CW_IO;
    }
    st = gw_admin_unix_bind(fd, path);
    if (st != CW_OK)
        goto err_close;
    if (gid != (unsigned)-1 && chown(path, (uid_t)-1, (gid_t)gid) != 0) {
        CW_ERROR(GW_LOG, "admin_socket: chown(%s, group %s) failed: %s", path,
                 g->admin_socket_group, strerror(errno));
        st = CW_PERMISSION;
        goto err_unlink;
    }
    if (chmod(path, (mode_t)mode) != 0 || lstat(path, &sb) != 0) {
        CW_ERROR(GW_LOG, "admin_socket: chmod(%s, %04o) failed: %s", path, mode,
                 strerror(errno));
        st = CW_IO;
        goto err_unlink;
    }
    if (listen(fd, 16) != 0) {
        CW_ERROR(GW_LOG, "admin_socket: listen(%s) failed: %s", path,
                 strerror(errno));
        st = CW_IO;
        goto err_unlink;
    }
    memcpy(gw->admin_unix_path, path, strlen(path) + 1);
    gw->admin_unix_dev = sb.st_dev;
    gw->admin_unix_ino = sb.st_ino;
    gw->admin_unix_fd = fd;
    GW_NOTICE("admin interface on unix:%s (mode %04o%s%s)", path, mode,
              gid != (unsigned)-1 ? ", group " : "",
              gid != (unsigned)-1 ? g->admin_socket_group : "");
    return CW_OK;

err_unlink:
    unlink(path);
err_close:
    close(fd);
    return st;
}

cw_status_t gw_admin_open(struct gw *gw, const struct cw_config_gateway *g)
{
    char err[512];
    cw_status_t st;

    if (g->admin_token_file != NULL && g->admin_token_file[0] != '\0') {
        st = cw_config_read_token(g->admin_token_file, &gw->admin_token, err,
                                  sizeof(err));
        if (st != CW_OK) {
            CW_ERROR(GW_LOG, "gateway.admin_token_file: %s", err);
            return st;
        }
    }
    if (g->admin != NULL && g->admin[0] != '\0') {
        st = gw_admin_open_tcp(gw, g->admin);
        if (st != CW_OK)
            return st;
    }
    if (g->admin_socket != NULL && g->admin_socket[0] != '\0')
        return gw_admin_open_unix(gw, g);
    return CW_OK;
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
    struct stat sb;

    for (unsigned i = 0; i < GW_ADMIN_CONNS; i++)
        gw_admin_conn_close(&gw->conns[i]);
    if (gw->admin_fd >= 0)
        close(gw->admin_fd);
    gw->admin_fd = -1;
    /* Remove the socket file if it is still the one bound here. */
    if (gw->admin_unix_fd >= 0 && lstat(gw->admin_unix_path, &sb) == 0 &&
        sb.st_dev == gw->admin_unix_dev && sb.st_ino == gw->admin_unix_ino)
        unlink(gw->admin_unix_path);
    if (gw->admin_unix_fd >= 0)
        close(gw->admin_unix_fd);
    gw->admin_unix_fd = -1;
    if (gw->admin_token != NULL)
        explicit_bzero(gw->admin_token, strlen(gw->admin_token));
    free(gw->admin_token);
    gw->admin_token = NULL;
}

static bool gw_admin_is_http(const char *buf)
{
    return strncmp(buf, "GET /", 5) == 0 || strncmp(buf, "POST /", 6) == 0;
}

/* @p given equals @p want, in a time that does not depend on where they
 * differ (a client must not learn the token a byte at a time). */
static bool gw_admin_token_equal(const char *want, const char *given)
{
    size_t lw = strlen(want), lg = strlen(given);
    volatile unsigned char d = lw != lg;

    for (size_t i = 0; i < lw; i++)
        d |= (unsigned char)want[i] ^ (unsigned char)(i < lg ? given[i] : 0);
    return d == 0;
}

/* The token request @p buf carries, copied to @p tok: HTTP's
 * "Authorization: Bearer TOKEN" header, or the line protocol's first line
 * "auth TOKEN" (then *@p cmd_p points past it).  "" if none. */
static void gw_admin_token_of(char *buf, char *tok, size_t toklen, char **cmd_p)
{
    const char *v = NULL;
    size_t n;

    tok[0] = '\0';
    *cmd_p = buf;
    if (gw_admin_is_http(buf)) {
        for (const char *l = strchr(buf, '\n'); l != NULL && v == NULL;
             l = strchr(l, '\n')) {
            l++;
            if (strncasecmp(l, "Authorization:", 14) != 0)
                continue;
            l += 14 + strspn(l + 14, " \t");
            if (strncasecmp(l, "Bearer ", 7) == 0)
                v = l + 7 + strspn(l + 7, " \t");
        }
    } else if (strncmp(buf, "auth ", 5) == 0) {
        v = buf + 5;
        *cmd_p = buf + strcspn(buf, "\n");
        if (**cmd_p == '\n')
            (*cmd_p)++;
    }
    if (v == NULL)
        return;
    n = strcspn(v, " \t\r\n");
    if (n >= toklen)
        n = toklen - 1; /* longer than any token: never equal */
    memcpy(tok, v, n);
    tok[n] = '\0';
}

/* The request is complete: run it and keep the answer for the writes. */
static void gw_admin_answer(struct gw *gw, struct gw_admin_conn *c,
                            uint64_t now)
{
    char *text = NULL, *cmd, tok[GW_ADMIN_TOKEN_MAX + 2];
    bool http, authorized = true;
    size_t len = 0;
    FILE *out;

    c->buf[c->len] = '\0';
    http = gw_admin_is_http(c->buf);
    gw_admin_token_of(c->buf, tok, sizeof(tok), &cmd);
    /* The Unix socket's file mode is its access control; a token guards
     * the TCP endpoint. */
    if (c->tcp && gw->admin_token != NULL)
        authorized = gw_admin_token_equal(gw->admin_token, tok);
    explicit_bzero(tok, sizeof(tok));
    out = open_memstream(&text, &len);
    if (out == NULL) {
        gw_admin_conn_close(c);
        return;
    }
    if (!authorized) {
        CW_LOG_RL(CW_LOG_WARN, GW_LOG,
                  "admin: a request without the "
                  "admin token refused");
        if (http)
            gw_admin_http_unauthorized(out);
        else
            fprintf(out, "ERR unauthorized: this admin endpoint needs its "
                         "token (a first line \"auth TOKEN\"; cwctl "
                         "--token-file)\n");
    } else if (http) {
        gw_admin_http(gw, c->buf, c->local, out);
    } else {
        cmd[strcspn(cmd, "\r\n")] = '\0';
        gw_admin_exec(gw, cmd, c->local, out);
    }
    explicit_bzero(c->buf, c->len);
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
    const char *nl;

    c->buf[c->len] = '\0';
    if (gw_admin_is_http(c->buf))
        return strstr(c->buf, "\r\n\r\n") != NULL ||
               strstr(c->buf, "\n\n") != NULL;
    nl = memchr(c->buf, '\n', c->len);
    /* "auth TOKEN\n" comes before the command line. */
    if (nl != NULL && strncmp(c->buf, "auth ", 5) == 0)
        nl = strchr(nl + 1, '\n');
    return nl != NULL;
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

/* Accept the clients waiting on listening socket @p lfd while a
 * connection slot is free. */
static void gw_admin_accept(struct gw *gw, int lfd, bool tcp, uint64_t now)
{
    while (lfd >= 0) {
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
        fd = accept4(lfd, (struct sockaddr *)&peer, &sl,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            break;
        c->fd = fd;
        c->tcp = tcp;
        /* Whoever the socket file lets in is on this host. */
        c->local = !tcp || gw_admin_peer_local(&peer);
        c->len = 0;
        c->deadline_ns = now + GW_ADMIN_READ_NS;
    }
}

void gw_admin_poll(struct gw *gw, uint64_t now)
{
    if (gw->admin_fd < 0 && gw->admin_unix_fd < 0)
        return;
    gw_admin_accept(gw, gw->admin_fd, true, now);
    gw_admin_accept(gw, gw->admin_unix_fd, false, now);
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
