/* Destination patterns: "<plugin>[+<proto>]://<location>" with '*' parts
 * and IP prefixes.  Plain addresses are parsed by core (cw_uri_parse). */
#include "config_int.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static bool scheme_part_ok(const char *s, size_t len, bool proto)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '-';
        if (proto)
            ok = ok || isalnum(c) || c == ';' || c == '.';
        if (!ok)
            return false;
    }
    return true;
}

cw_status_t cw_location_host(const char *location, char *host, uint16_t *port_p,
                             uint8_t *family_p, uint8_t *ip)
{
    const char *slash = strrchr(location, '/');
    const char *hp = slash ? slash + 1 : location;
    uint16_t port;
    uint8_t fam = 0;

    if (cw_location_split(hp, host, &port) != CW_OK)
        return CW_INVALID_ARG;
    memset(ip, 0, 16);
    if (inet_pton(AF_INET, host, ip) == 1)
        fam = 4;
    else if (inet_pton(AF_INET6, host, ip) == 1)
        fam = 6;
    *port_p = port;
    *family_p = fam;
    return CW_OK;
}

/* "<ip>/<len>" at the end of a location; device prefixes allowed before. */
static bool parse_prefix(const char *loc, struct cw_addr_pattern *pat,
                         char *err, size_t errlen, bool *is_prefix_p)
{
    const char *slash = strrchr(loc, '/');
    char ipbuf[64];
    const char *ipstart;
    const char *prev;
    char *end;
    unsigned long len;
    size_t n;

    *is_prefix_p = false;
    if (slash == NULL || slash[1] == '\0')
        return true;
    for (const char *p = slash + 1; *p; p++)
        if (!isdigit((unsigned char)*p))
            return true;
    /* The IP starts after the previous '/', if any (device prefix). */
    prev = NULL;
    for (const char *p = loc; p < slash; p++)
        if (*p == '/')
            prev = p;
    ipstart = prev ? prev + 1 : loc;
    n = (size_t)(slash - ipstart);
    if (n == 0 || n >= sizeof(ipbuf)) {
        snprintf(err, errlen, "prefix '%.64s' has no address before '/'", loc);
        return false;
    }
    memcpy(ipbuf, ipstart, n);
    ipbuf[n] = '\0';
    *is_prefix_p = true;
    memset(pat->ip, 0, sizeof(pat->ip));
    if (inet_pton(AF_INET, ipbuf, pat->ip) == 1)
        pat->family = 4;
    else if (inet_pton(AF_INET6, ipbuf, pat->ip) == 1)
        pat->family = 6;
    else {
        snprintf(err, errlen,
                 "'%s' in prefix '%.64s' is not an IPv4 or IPv6 "
                 "address",
                 ipbuf, loc);
        return false;
    }
    len = strtoul(slash + 1, &end, 10);
    if (len > (pat->family == 4 ? 32u : 128u) || slash[1] == '\0' ||
        strlen(slash + 1) > 3) {
        snprintf(err, errlen, "prefix length /%.8s is out of range (0-%u)",
                 slash + 1, pat->family == 4 ? 32u : 128u);
        return false;
    }
    pat->prefix_len = (uint8_t)len;
    for (unsigned b = (unsigned)len; b < 128; b++)
        pat->ip[b / 8] &= (uint8_t) ~(0x80u >> (b % 8));
    return true;
}

/* The location part of a pattern as cw_addr_pattern_format writes it;
 * returns its length. */
static size_t pattern_loc(const struct cw_addr_pattern *pat, char *loc,
                          size_t size)
{
    int n;

    switch (pat->kind) {
    case CW_PATTERN_ANY:
        n = snprintf(loc, size, "*");
        break;
    case CW_PATTERN_PREFIX: {
        char ipbuf[INET6_ADDRSTRLEN];
        inet_ntop(pat->family == 4 ? AF_INET : AF_INET6, pat->ip, ipbuf,
                  sizeof(ipbuf));
        n = snprintf(loc, size, "%s/%u", ipbuf, pat->prefix_len);
        break;
    }
    case CW_PATTERN_HOSTPORT:
        if (strchr(pat->host, ':'))
            n = snprintf(loc, size, "[%s]:%u", pat->host, pat->port);
        else
            n = snprintf(loc, size, "%s:%u", pat->host, pat->port);
        break;
    case CW_PATTERN_HOST:
        /* An IPv6 host keeps its brackets: "fd00::1" would read back as
         * host "fd00:" and port 1. */
        n = snprintf(loc, size, strchr(pat->host, ':') ? "[%s]" : "%s",
                     pat->host);
        break;
    default:
        n = snprintf(loc, size, "%s", pat->host);
        break;
    }
    return n < 0 ? 0 : (size_t)n;
}

cw_status_t cw_addr_pattern_parse(const char *s, struct cw_addr_pattern *pat_p,
                                  char *err, size_t errlen)
{
    struct cw_addr_pattern pat;
    char dummy[8];
    const char *sep;
    const char *plus;
    const char *loc;
    size_t plen;
    bool is_prefix;

    if (err == NULL) {
        err = dummy;
        errlen = sizeof(dummy);
    }
    if (s == NULL || pat_p == NULL) {
        snprintf(err, errlen, "no pattern given");
        return CW_INVALID_ARG;
    }
    memset(&pat, 0, sizeof(pat));
    if (strcmp(s, "*") == 0) {
        strcpy(pat.plugin, "*");
        strcpy(pat.protocol, "*");
        pat.kind = CW_PATTERN_ANY;
        *pat_p = pat;
        return CW_OK;
    }
    sep = strstr(s, "://");
    if (sep == NULL) {
        snprintf(err, errlen,
                 "'%.64s' is not a pattern: expected "
                 "<plugin>[+<proto>]://<ip>/<len>, ://host[:port] or '*' "
                 "parts",
                 s);
        return CW_INVALID_ARG;
    }
    plus = memchr(s, '+', (size_t)(sep - s));
    plen = (size_t)((plus ? plus : sep) - s);
    if (plen == 0 || plen >= CW_URI_PLUGIN_MAX ||
        !((plen == 1 && s[0] == '*') || scheme_part_ok(s, plen, false))) {
        snprintf(err, errlen,
                 "plugin in '%.64s' must be '*' or 1-%d "
                 "characters [a-z0-9_-]",
                 s, CW_URI_PLUGIN_MAX - 1);
        return CW_INVALID_ARG;
    }
    memcpy(pat.plugin, s, plen);
    if (plus) {
        size_t qlen = (size_t)(sep - plus - 1);
        if (qlen == 0 || qlen >= CW_URI_PROTOCOL_MAX ||
            !((qlen == 1 && plus[1] == '*') ||
              scheme_part_ok(plus + 1, qlen, true))) {
            snprintf(err, errlen,
                     "protocol in '%.64s' must be '*' or 1-%d "
                     "characters",
                     s, CW_URI_PROTOCOL_MAX - 1);
            return CW_INVALID_ARG;
        }
        memcpy(pat.protocol, plus + 1, qlen);
    } else if (strcmp(pat.plugin, "*") == 0) {
        strcpy(pat.protocol, "*");
    }
    loc = sep + 3;
    if (strlen(loc) >= CW_URI_LOCATION_MAX) {
        snprintf(err, errlen, "location in '%.64s...' is longer than %d bytes",
                 s, CW_URI_LOCATION_MAX - 1);
        return CW_INVALID_ARG;
    }
    for (const char *p = loc; *p; p++) {
        if (*p <= 0x20 || *p >= 0x7f || *p == '@') {
            snprintf(err, errlen,
                     "invalid character in location of '%.64s' "
                     "(no spaces, '@' or control characters)",
                     s);
            return CW_INVALID_ARG;
        }
    }
    if (loc[0] == '\0') {
        snprintf(err, errlen,
                 "'%.64s' has an empty location: use '*' for "
                 "any",
                 s);
        return CW_INVALID_ARG;
    }
    if (strcmp(loc, "*") == 0) {
        pat.kind = CW_PATTERN_ANY;
    } else if (strchr(loc, '*')) {
        snprintf(err, errlen,
                 "'*' in '%.64s' must be a whole part (plugin, "
                 "protocol or location); use an IP prefix such as "
                 "10.0.0.0/8 for address ranges",
                 s);
        return CW_INVALID_ARG;
    } else {
        uint8_t ip6[16];

        /* "fd00::1:7000" is an IPv6 address or host "fd00::1" and port
         * 7000: ask for the brackets rather than guess. */
        if (loc[0] != '[' && inet_pton(AF_INET6, loc, ip6) == 1) {
            snprintf(err, errlen,
                     "'%.64s': an IPv6 address in a pattern "
                     "takes brackets ([%s], or [ADDRESS]:PORT with a port)",
                     s, loc);
            return CW_INVALID_ARG;
        }
        if (!parse_prefix(loc, &pat, err, errlen, &is_prefix))
            return CW_INVALID_ARG;
        if (is_prefix) {
            pat.kind = CW_PATTERN_PREFIX;
        } else {
            uint16_t port;
            uint8_t fam;
            uint8_t ip[16];
            if (strchr(loc, '/') == NULL &&
                cw_location_host(loc, pat.host, &port, &fam, ip) == CW_OK &&
                pat.host[0] != '\0') {
                char canon[CW_URI_LOCATION_MAX + 64];

                pat.port = port;
                pat.kind = port ? CW_PATTERN_HOSTPORT : CW_PATTERN_HOST;
                /* Written back with brackets around a host with ':'
                 * (cw_addr_pattern_format), it must still fit. */
                if (pattern_loc(&pat, canon, sizeof(canon)) >=
                    CW_URI_LOCATION_MAX) {
                    snprintf(err, errlen,
                             "location in '%.64s...' is longer "
                             "than %d bytes in its canonical form",
                             s, CW_URI_LOCATION_MAX - 1);
                    return CW_INVALID_ARG;
                }
            } else {
                /* Device-qualified or plugin-specific: compare exactly. */
                pat.kind = CW_PATTERN_EXACT;
                strcpy(pat.host, loc);
            }
        }
    }
    *pat_p = pat;
    return CW_OK;
}

static bool scheme_match(const struct cw_addr_pattern *pat,
                         const struct cw_uri *uri)
{
    if (strcmp(pat->plugin, "*") != 0 && strcmp(pat->plugin, uri->plugin))
        return false;
    if (strcmp(pat->protocol, "*") != 0 && strcmp(pat->protocol, uri->protocol))
        return false;
    return true;
}

bool cw_addr_pattern_match(const struct cw_addr_pattern *pat,
                           const struct cw_uri *uri)
{
    char host[CW_URI_LOCATION_MAX];
    uint16_t port;
    uint8_t fam;
    uint8_t ip[16];

    if (pat == NULL || uri == NULL || !scheme_match(pat, uri))
        return false;
    switch (pat->kind) {
    case CW_PATTERN_ANY:
        return true;
    case CW_PATTERN_EXACT:
        return strcmp(pat->host, uri->location) == 0;
    default:
        break;
    }
    if (cw_location_host(uri->location, host, &port, &fam, ip) != CW_OK)
        return false;
    switch (pat->kind) {
    case CW_PATTERN_HOST:
        return strcmp(host, pat->host) == 0;
    case CW_PATTERN_HOSTPORT:
        return strcmp(host, pat->host) == 0 && port == pat->port;
    case CW_PATTERN_PREFIX: {
        unsigned full = pat->prefix_len / 8u;
        unsigned rest = pat->prefix_len % 8u;
        if (fam != pat->family)
            return false;
        if (memcmp(ip, pat->ip, full) != 0)
            return false;
        if (rest == 0)
            return true;
        return ((ip[full] ^ pat->ip[full]) & (uint8_t)(0xffu << (8 - rest))) ==
               0;
    }
    default:
        return false;
    }
}

cw_status_t cw_addr_pattern_format(const struct cw_addr_pattern *pat, char *buf,
                                   size_t len)
{
    char scheme[CW_URI_PLUGIN_MAX + CW_URI_PROTOCOL_MAX + 2];
    char loc[CW_URI_LOCATION_MAX + 64];
    int n;

    if (pat == NULL || buf == NULL || len == 0)
        return CW_INVALID_ARG;
    if (strcmp(pat->plugin, "*") == 0 && strcmp(pat->protocol, "*") == 0)
        snprintf(scheme, sizeof(scheme), "*");
    else if (pat->protocol[0])
        snprintf(scheme, sizeof(scheme), "%s+%s", pat->plugin, pat->protocol);
    else
        snprintf(scheme, sizeof(scheme), "%s", pat->plugin);
    pattern_loc(pat, loc, sizeof(loc));
    n = snprintf(buf, len, "%s://%s", scheme, loc);
    if (n < 0)
        return CW_INTERNAL;
    return (size_t)n < len ? CW_OK : CW_OVERFLOW;
}
