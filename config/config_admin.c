/* The admin plane's keys (gateway.admin_socket*, admin_token_file):
 * checked when the file is loaded, so that --check reports what would
 * stop a start, and the token file reader the gateway uses. */
#include "config_int.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <grp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define TOKEN_FILE_MAX 4096

cw_status_t cw_config_read_token(const char *path, char **token_p, char *err,
                                 size_t errlen)
{
    char *buf = NULL;
    struct stat sb;
    ssize_t n;
    size_t len = 0;
    int fd;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open token file \"%s\": %s", path,
                 strerror(errno));
        return CW_NOENT;
    }
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        snprintf(err, errlen, "token file \"%s\" is not a regular file", path);
        goto err_close;
    }
    /* A secret others may read is no secret: refuse, as ssh does. */
    if ((sb.st_mode & S_IRWXO) != 0) {
        snprintf(err, errlen,
                 "token file \"%s\" is accessible to other "
                 "users (mode %04o): chmod o-rwx it",
                 path, (unsigned)(sb.st_mode & 07777));
        goto err_close;
    }
    buf = malloc(TOKEN_FILE_MAX + 1);
    if (buf == NULL) {
        snprintf(err, errlen, "out of memory");
        goto err_close;
    }
    while (len < TOKEN_FILE_MAX) {
        n = read(fd, buf + len, TOKEN_FILE_MAX - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(err, errlen, "cannot read token file \"%s\": %s", path,
                     strerror(errno));
            goto err_free;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    if (len == TOKEN_FILE_MAX) {
        snprintf(err, errlen, "token file \"%s\" is longer than %u bytes", path,
                 TOKEN_FILE_MAX - 1);
        goto err_free;
    }
    while (len > 0 && strchr(" \t\r\n", buf[len - 1]) != NULL)
        len--;
    buf[len] = '\0';
    if (len == 0) {
        snprintf(err, errlen, "token file \"%s\" is empty", path);
        goto err_free;
    }
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)buf[i] <= 0x20 || (unsigned char)buf[i] >= 0x7f) {
            snprintf(err, errlen,
                     "token file \"%s\": the token has a "
                     "blank or control character at byte %zu (one line of "
                     "printable ASCII expected)",
                     path, i + 1);
            goto err_free;
        }
    close(fd);
    *token_p = buf;
    return CW_OK;

err_free:
    free(buf);
err_close:
    close(fd);
    return CW_CONFIG;
}

cw_status_t cw_config_socket_mode(const char *text, unsigned *mode_p)
{
    char *end;
    unsigned long v;

    if (text == NULL || text[0] == '\0' ||
        strspn(text, "01234567") != strlen(text) || strlen(text) > 4)
        return CW_INVALID_ARG;
    v = strtoul(text, &end, 8);
    if (*end != '\0' || v > 0777)
        return CW_INVALID_ARG;
    *mode_p = (unsigned)v;
    return CW_OK;
}

cw_status_t cw_config_group_id(const char *name, unsigned *gid_p)
{
    struct group gr, *res = NULL;
    char buf[4096], *end;
    unsigned long v;

    if (name == NULL || name[0] == '\0')
        return CW_INVALID_ARG;
    if (strspn(name, "0123456789") == strlen(name)) {
        v = strtoul(name, &end, 10);
        if (*end != '\0' || v >= 0xffffffffUL)
            return CW_INVALID_ARG;
        *gid_p = (unsigned)v;
        return CW_OK;
    }
    if (getgrnam_r(name, &gr, buf, sizeof(buf), &res) != 0 || res == NULL)
        return CW_NOENT;
    *gid_p = (unsigned)res->gr_gid;
    return CW_OK;
}

/* An error about gateway key k: at the key when it was written, else at
 * the section, else at the top of the file. */
static void admin_error(struct cfg_ctx *ctx, int k, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void admin_error(struct cfg_ctx *ctx, int k, const char *fmt, ...)
{
    const struct cfg_keyloc *kl = &ctx->keylocs[SEC_GATEWAY][0][k];
    const struct cw_config_loc *sec = &ctx->cfg->gateway.loc;
    unsigned line = kl->line ? kl->line : sec->line ? sec->line : 1;
    unsigned col = kl->line ? kl->column : sec->line ? sec->column : 1;
    char msg[CFG_ERR_MAX * 3];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    cfg_error(ctx, line, col, "%s", msg);
}

void cfg_check_admin(struct cfg_ctx *ctx)
{
    const struct cw_config_gateway *g = &ctx->cfg->gateway;
    struct sockaddr_un sun;
    unsigned v;
    char err[512];

    if (ctx->cfg->routes_only)
        return;
    if (g->admin_socket != NULL && g->admin_socket[0] != '\0') {
        if (g->admin_socket[0] != '/')
            admin_error(ctx, GW_KEY_ADMIN_SOCKET,
                        "gateway.admin_socket: "
                        "\"%.200s\" is not an absolute path",
                        g->admin_socket);
        else if (strlen(g->admin_socket) >= sizeof(sun.sun_path))
            admin_error(ctx, GW_KEY_ADMIN_SOCKET,
                        "gateway.admin_socket: "
                        "\"%.200s\" is longer than a socket path may be "
                        "(%zu bytes)",
                        g->admin_socket, sizeof(sun.sun_path) - 1);
    }
    if (cw_config_socket_mode(g->admin_socket_mode, &v) != CW_OK)
        admin_error(ctx, GW_KEY_ADMIN_SOCKET_MODE,
                    "gateway.admin_socket_mode:"
                    " expected an octal file mode such as \"0660\", at most "
                    "0777, got \"%.40s\"",
                    g->admin_socket_mode);
    if (g->admin_socket_group != NULL && g->admin_socket_group[0] != '\0' &&
        cw_config_group_id(g->admin_socket_group, &v) != CW_OK)
        admin_error(ctx, GW_KEY_ADMIN_SOCKET_GROUP,
                    "gateway."
                    "admin_socket_group: no group \"%.64s\" on this host",
                    g->admin_socket_group);
    if (g->admin_token_file != NULL && g->admin_token_file[0] != '\0') {
        char *token = NULL;

        if (cw_config_read_token(g->admin_token_file, &token, err,
                                 sizeof(err)) != CW_OK)
            admin_error(ctx, GW_KEY_ADMIN_TOKEN_FILE,
                        "gateway.admin_token_file: %s", err);
        if (token != NULL)
            explicit_bzero(token, strlen(token));
        free(token);
    }
}
