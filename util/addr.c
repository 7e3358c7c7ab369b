/* Address string parsing (design §2).  Hostile-input safe, no allocation. */
#include <causeway/addr.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ADDR_ERR(err, errlen, ...)                                             \
    do {                                                                       \
        if ((err) && (errlen))                                                 \
            snprintf((err), (errlen), __VA_ARGS__);                            \
    } while (0)

static bool is_plugin_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
}

static bool is_protocol_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == ';' || c == '.' ||
           c == '-';
}

static bool is_location_char(char c)
{
    return c > 0x20 && c < 0x7f && c != '@';
}

cw_status_t cw_uri_parse_err(const char *s, struct cw_uri *uri_p, char *err,
                             size_t errlen)
{
    struct cw_uri uri;
    const char *sep;
    const char *plus;
    size_t plugin_len;
    size_t proto_len = 0;
    size_t loc_len;

    if (s == NULL || uri_p == NULL) {
        ADDR_ERR(err, errlen, "no address given");
        return CW_INVALID_ARG;
    }
    memset(&uri, 0, sizeof(uri));
    sep = strstr(s, "://");
    if (sep == NULL) {
        ADDR_ERR(err, errlen,
                 "'%.64s' is not an address: expected "
                 "<plugin>[+<protocol>]://<location>",
                 s);
        return CW_INVALID_ARG;
    }
    plus = memchr(s, '+', (size_t)(sep - s));
    plugin_len = (size_t)((plus ? plus : sep) - s);
    if (plugin_len == 0 || plugin_len >= CW_URI_PLUGIN_MAX) {
        ADDR_ERR(err, errlen, "plugin name in '%.64s' must be 1-%d characters",
                 s, CW_URI_PLUGIN_MAX - 1);
        return CW_INVALID_ARG;
    }
    for (size_t i = 0; i < plugin_len; i++) {
        if (!is_plugin_char(s[i])) {
            ADDR_ERR(err, errlen,
                     "invalid character '%c' in plugin name of '%.64s' "
                     "(lower-case letters, digits, '_' and '-')",
                     isprint((unsigned char)s[i]) ? s[i] : '?', s);
            return CW_INVALID_ARG;
        }
    }
    memcpy(uri.plugin, s, plugin_len);
    if (plus) {
        proto_len = (size_t)(sep - plus - 1);
        if (proto_len == 0 || proto_len >= CW_URI_PROTOCOL_MAX) {
            ADDR_ERR(err, errlen, "protocol in '%.64s' must be 1-%d characters",
                     s, CW_URI_PROTOCOL_MAX - 1);
            return CW_INVALID_ARG;
        }
        for (size_t i = 0; i < proto_len; i++) {
            if (!is_protocol_char(plus[1 + i])) {
                ADDR_ERR(err, errlen,
                         "invalid character in protocol of '%.64s'", s);
                return CW_INVALID_ARG;
            }
        }
        memcpy(uri.protocol, plus + 1, proto_len);
    }
    sep += 3;
    loc_len = strlen(sep);
    if (loc_len >= CW_URI_LOCATION_MAX) {
        ADDR_ERR(err, errlen, "location in '%.64s...' is longer than %d bytes",
                 s, CW_URI_LOCATION_MAX - 1);
        return CW_INVALID_ARG;
    }
    for (size_t i = 0; i < loc_len; i++) {
        if (!is_location_char(sep[i])) {
            ADDR_ERR(err, errlen,
                     "invalid character in location of '%.64s' (no spaces, "
                     "'@' or control characters)",
                     s);
            return CW_INVALID_ARG;
        }
    }
    memcpy(uri.location, sep, loc_len);
    *uri_p = uri;
    return CW_OK;
}

cw_status_t cw_uri_parse(const char *s, struct cw_uri *uri_p)
{
    return cw_uri_parse_err(s, uri_p, NULL, 0);
}

/* Appends @p s to @p buf (@p len bytes, at least 1) from @p off as far as
 * it fits, NUL-terminated; returns where the whole of it would end. */
static size_t str_put(char *buf, size_t len, size_t off, const char *s)
{
    size_t n = strlen(s);

    if (off < len - 1) {
        size_t k = n < len - 1 - off ? n : len - 1 - off;

        memcpy(buf + off, s, k);
        buf[off + k] = '\0';
    }
    return off + n;
}

cw_status_t cw_uri_format(const struct cw_uri *uri, char *buf, size_t len)
{
    size_t n;

    if (uri == NULL || buf == NULL || len == 0)
        return CW_INVALID_ARG;
    /* Without snprintf: a gateway formats two of these for every new
     * destination, and printf's machinery was about 900 instructions of
     * it (callgrind, gw-keys-bench "distinct"). */
    buf[0] = '\0';
    n = str_put(buf, len, 0, uri->plugin);
    if (uri->protocol[0]) {
        n = str_put(buf, len, n, "+");
        n = str_put(buf, len, n, uri->protocol);
    }
    n = str_put(buf, len, n, "://");
    n = str_put(buf, len, n, uri->location);
    return n < len ? CW_OK : CW_OVERFLOW;
}

bool cw_uri_equal(const struct cw_uri *a, const struct cw_uri *b)
{
    if (a == NULL || b == NULL)
        return false;
    return strcmp(a->plugin, b->plugin) == 0 &&
           strcmp(a->protocol, b->protocol) == 0 &&
           strcmp(a->location, b->location) == 0;
}

cw_status_t cw_location_split(const char *location, char *host,
                              uint16_t *port_p)
{
    const char *colon;
    const char *host_start = location;
    size_t host_len;
    unsigned long port = 0;

    if (location == NULL || host == NULL || port_p == NULL)
        return CW_INVALID_ARG;
    if (strlen(location) >= CW_URI_LOCATION_MAX)
        return CW_INVALID_ARG;
    if (location[0] == '[') {
        const char *close = strchr(location, ']');
        if (close == NULL)
            return CW_INVALID_ARG;
        host_start = location + 1;
        host_len = (size_t)(close - host_start);
        colon = close[1] == ':' ? close + 1 : NULL;
        if (close[1] != '\0' && colon == NULL)
            return CW_INVALID_ARG;
    } else {
        colon = strrchr(location, ':');
        host_len = colon ? (size_t)(colon - location) : strlen(location);
    }
    if (colon) {
        char *end;
        if (colon[1] == '\0' || !isdigit((unsigned char)colon[1]))
            return CW_INVALID_ARG;
        port = strtoul(colon + 1, &end, 10);
        if (*end != '\0' || port > 65535)
            return CW_INVALID_ARG;
    }
    memcpy(host, host_start, host_len);
    host[host_len] = '\0';
    *port_p = (uint16_t)port;
    return CW_OK;
}

static bool valid_service_name(const char *s, size_t len)
{
    if (len == 0 || len >= CW_SERVICE_NAME_MAX)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-' &&
            s[i] != '.')
            return false;
    return true;
}

/* Parses one '@'-free token [s, s+len) as a plain URI. */
static cw_status_t parse_token(const char *s, size_t len, struct cw_uri *uri,
                               char *err, size_t errlen)
{
    char tmp[CW_URI_MAX];

    if (len >= sizeof(tmp)) {
        ADDR_ERR(err, errlen, "address part '%.64s...' is too long", s);
        return CW_INVALID_ARG;
    }
    memcpy(tmp, s, len);
    tmp[len] = '\0';
    return cw_uri_parse_err(tmp, uri, err, errlen);
}

cw_status_t cw_addr_path_parse(const char *s, struct cw_addr_path *path_p,
                               char *err, size_t errlen)
{
    struct cw_addr_path path;
    const char *at;
    const char *end;
    size_t target_len;
    cw_status_t st;

    if (s == NULL || path_p == NULL) {
        ADDR_ERR(err, errlen, "no address given");
        return CW_INVALID_ARG;
    }
    memset(&path, 0, sizeof(path));
    at = strchr(s, '@');
    target_len = at ? (size_t)(at - s) : strlen(s);
    if (strncmp(s, "svc:", 4) == 0) {
        if (!valid_service_name(s + 4, target_len - 4)) {
            ADDR_ERR(err, errlen,
                     "invalid service name in '%.64s' (1-%d letters, digits, "
                     "'_', '-', '.')",
                     s, CW_SERVICE_NAME_MAX - 1);
            return CW_INVALID_ARG;
        }
        path.is_service = true;
        memcpy(path.service, s + 4, target_len - 4);
        if (at == NULL) {
            ADDR_ERR(err, errlen,
                     "service address '%.64s' must name a gateway: "
                     "svc:<name>@<gateway>",
                     s);
            return CW_INVALID_ARG;
        }
    } else {
        st = parse_token(s, target_len, &path.target, err, errlen);
        if (st != CW_OK)
            return st;
    }
    /* Gateways are listed left to right; the rightmost is contacted first. */
    end = s + strlen(s);
    if (at != NULL) {
        const char *tok_end = end;
        const char *p = end;
        while (p > at) {
            const char *tok_start = p;
            while (tok_start > at + 1 && tok_start[-1] != '@')
                tok_start--;
            if (path.nhops == CW_ADDR_MAX_HOPS) {
                ADDR_ERR(err, errlen, "'%.64s' names more than %d gateways", s,
                         CW_ADDR_MAX_HOPS);
                return CW_INVALID_ARG;
            }
            if (tok_start == tok_end) {
                ADDR_ERR(err, errlen, "empty gateway in '%.64s'", s);
                return CW_INVALID_ARG;
            }
            st = parse_token(tok_start, (size_t)(tok_end - tok_start),
                             &path.hops[path.nhops], err, errlen);
            if (st != CW_OK)
                return st;
            path.nhops++;
            p = tok_start - 1; /* the '@' before this token */
            tok_end = p;
        }
    }
    *path_p = path;
    return CW_OK;
}

cw_status_t cw_addr_path_format(const struct cw_addr_path *path, char *buf,
                                size_t len)
{
    size_t used;
    cw_status_t st;

    if (path == NULL || buf == NULL || len == 0 ||
        path->nhops > CW_ADDR_MAX_HOPS)
        return CW_INVALID_ARG;
    if (path->is_service) {
        int n = snprintf(buf, len, "svc:%s", path->service);
        if (n < 0 || (size_t)n >= len)
            return CW_OVERFLOW;
    } else {
        st = cw_uri_format(&path->target, buf, len);
        if (st != CW_OK)
            return st;
    }
    used = strlen(buf);
    for (unsigned i = path->nhops; i-- > 0;) {
        if (used + 1 >= len)
            return CW_OVERFLOW;
        buf[used++] = '@';
        buf[used] = '\0';
        st = cw_uri_format(&path->hops[i], buf + used, len - used);
        if (st != CW_OK)
            return st;
        used += strlen(buf + used);
    }
    return CW_OK;
}
