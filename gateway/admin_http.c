/*
 * The admin commands over HTTP/1.0, for curl, probes and Prometheus:
 * "GET /stats?json" is the command line "stats json", "GET
 * /explain?dest=shm%3A%2F%2Fx" is "explain shm://x".  Query arguments are
 * percent-decoded ('+' stays '+': addresses such as ofi+tcp:// carry it);
 * a malformed escape is answered 400.  reload and drain, which change the
 * gateway, answer POST only (405 to a GET, with nothing done: a crawler
 * or a prefetching proxy must not drain it).  Every answer says its
 * Content-Type: the Prometheus text format for /metrics, application/json
 * for a JSON body, text/plain otherwise.
 */
#include "gw_int.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define GW_HTTP_TEXT "text/plain; charset=utf-8"
#define GW_HTTP_JSON "application/json"
#define GW_HTTP_PROM "text/plain; version=0.0.4; charset=utf-8"

/* The HTTP status of answer @p body to command @p cmd. */
static const char *gw_http_status(const char *cmd, const char *body)
{
    if (strncmp(body, "OK\n", 3) == 0)
        return "200 OK";
    if (strncmp(body, "ERR forbidden", 13) == 0)
        return "403 Forbidden";
    if (strncmp(body, "ERR unknown command", 19) == 0)
        return "404 Not Found";
    if (strncmp(body, "ERR restart needed", 18) == 0)
        return "409 Conflict";
    if (strcmp(cmd, "ready") == 0)
        return "503 Service Unavailable";
    return "400 Bad Request";
}

static void gw_http_answer(FILE *out, const char *status, const char *type,
                           const char *extra, const char *body)
{
    fprintf(out,
            "HTTP/1.0 %s\r\n%sContent-Type: %s\r\nConnection: close\r\n"
            "\r\n%s",
            status, extra, type, body);
}

void gw_admin_http_unauthorized(FILE *out)
{
    gw_http_answer(out, "401 Unauthorized", GW_HTTP_TEXT,
                   "WWW-Authenticate: Bearer realm=\"causeway\"\r\n",
                   "unauthorized: this admin endpoint needs its token "
                   "(Authorization: Bearer TOKEN)\n");
}

static int gw_hex(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = tolower(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Percent-decode @p in into @p out (@p outlen bytes).  False, with the
 * reason in @p why, for a malformed escape, a decoded blank or control
 * character (the command line could not carry it) or an overflow. */
static bool gw_http_decode(const char *in, char *out, size_t outlen,
                           const char **why)
{
    size_t n = 0;

    for (; *in != '\0'; in++) {
        int c = (unsigned char)*in;
        if (c == '%') {
            int hi = gw_hex((unsigned char)in[1]);
            int lo = hi < 0 ? -1 : gw_hex((unsigned char)in[2]);
            if (lo < 0) {
                *why = "malformed percent escape (%XX, two hex digits)";
                return false;
            }
            c = hi * 16 + lo;
            in += 2;
        }
        if (c <= 0x20 || c == 0x7f) {
            *why = "blank or control character in an argument";
            return false;
        }
        if (n + 1 >= outlen) {
            *why = "argument too long";
            return false;
        }
        out[n++] = (char)c;
    }
    out[n] = '\0';
    return true;
}

/* The query "json", "dest=ADDR", "addr=ADDR" or a bare ADDR, joined by
 * '&': the argument (decoded) into @p arg, "json" into *@p json_p. */
static bool gw_http_query(char *q, char *arg, size_t arglen, bool *json_p,
                          const char **why)
{
    char *save = NULL;

    for (char *part = strtok_r(q, "&", &save); part != NULL;
         part = strtok_r(NULL, "&", &save)) {
        char *v = part;
        if (strcmp(part, "json") == 0 || strcmp(part, "json=1") == 0 ||
            strcmp(part, "json=true") == 0) {
            *json_p = true;
            continue;
        }
        if (strncmp(part, "dest=", 5) == 0 || strncmp(part, "addr=", 5) == 0)
            v = part + 5;
        if (arg[0] != '\0') {
            *why = "more than one argument";
            return false;
        }
        if (!gw_http_decode(v, arg, arglen, why))
            return false;
    }
    return true;
}

void gw_admin_http(struct gw *gw, const char *req, bool local, FILE *out)
{
    char method[8] = "", target[GW_ADMIN_REQ_MAX] = "", *q, *body = NULL;
    char cmd[32], arg[CW_ADDR_STR_MAX] = "", line[CW_ADDR_STR_MAX + 48];
    const char *why = NULL, *type, *text;
    bool json = false, ok;
    size_t blen = 0;
    FILE *b;

    if (sscanf(req, "%7s /%4095s", method, target) < 1)
        target[0] = '\0';
    q = strchr(target, '?');
    if (q != NULL)
        *q++ = '\0';
    snprintf(cmd, sizeof(cmd), "%s", target);
    if (strspn(cmd, "abcdefghijklmnopqrstuvwxyz") != strlen(target)) {
        gw_http_answer(out, "404 Not Found", GW_HTTP_TEXT, "",
                       "no such command (status, routes, services, stats, "
                       "metrics, ready, peers, config, explain, reload, "
                       "drain)\n");
        return;
    }
    if (q != NULL && !gw_http_query(q, arg, sizeof(arg), &json, &why)) {
        fprintf(out,
                "HTTP/1.0 400 Bad Request\r\nContent-Type: %s\r\n"
                "Connection: close\r\n\r\nbad query: %s\n",
                GW_HTTP_TEXT, why);
        return;
    }
    if (strcmp(method, "POST") != 0 &&
        (strcmp(cmd, "reload") == 0 || strcmp(cmd, "drain") == 0)) {
        fprintf(out,
                "HTTP/1.0 405 Method Not Allowed\r\nAllow: POST\r\n"
                "Content-Type: %s\r\nConnection: close\r\n\r\n"
                "%s changes the gateway: POST only\n",
                GW_HTTP_TEXT, cmd);
        return;
    }
    snprintf(line, sizeof(line), "%s%s%s%s", cmd, arg[0] ? " " : "", arg,
             json ? " json" : "");
    b = open_memstream(&body, &blen);
    if (b == NULL)
        return;
    gw_admin_exec(gw, line, local, b);
    if (fclose(b) != 0) {
        free(body);
        return;
    }
    ok = strncmp(body, "OK\n", 3) == 0;
    text = ok ? body + 3 : body;
    type = GW_HTTP_TEXT;
    if (ok && strcmp(cmd, "metrics") == 0) {
        type = GW_HTTP_PROM;
    } else if (json && ok) {
        type = GW_HTTP_JSON;
    } else if (json && strchr(body, '\n') != NULL &&
               strchr(body, '\n')[1] == '{') {
        /* An error answered in JSON too (reload): the JSON is the body. */
        type = GW_HTTP_JSON;
        text = strchr(body, '\n') + 1;
    }
    gw_http_answer(out, gw_http_status(cmd, body), type, "", text);
    free(body);
}
