/*
 * Address syntax of the plugins Causeway ships, read as each plugin's own
 * parser reads it (na-shm shm_pick_name, na-ofi ofi_location_to_raw, na-ucx
 * ucx_split, na-verbs vb_parse_location), so that a load, and with it
 * `causewayd --check`, refuses what the gateway could not open or look up
 * instead of printing "ok" for it.  Only syntax is judged here: whether a
 * host resolves, an interface exists or a provider is installed is the
 * plugin's to say when it opens (`causewayd --check --probe`).
 */
#include "config_int.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#define NAME_MAX_SHM     47 /* na-shm: SHM_NAME_MAX - 1 */
#define NAME_MAX_OFI_SHM 48 /* na-ofi: OFI_SHM_NAME_MAX */
#define VERBS_DEV_MAX    20 /* na-verbs: VB_DEV_MAX */

typedef bool (*loc_check_fn)(const char *loc, const char *protocol,
                             enum cfg_addr_role role, char *err, size_t errlen);

struct cfg_plugin {
    const char *name;
    /* Protocols it opens; NULL: any the URI syntax allows (UCX_TLS). */
    const char *const *protocols;
    const char *form; /* what a location looks like, for messages */
    loc_check_fn check;
};

static bool name_char(char c)
{
    return isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.';
}

/* 1 to @p maxlen decimal digits [s, s+n) worth at most @p max. */
static bool digits(const char *s, size_t n, size_t maxlen, unsigned long max,
                   unsigned long *v_p)
{
    unsigned long v = 0;

    if (n == 0 || n > maxlen)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i]))
            return false;
        v = v * 10 + (unsigned long)(s[i] - '0');
    }
    if (v > max)
        return false;
    *v_p = v;
    return true;
}

static bool shm_name(const char *s, size_t max, bool dot_first_ok)
{
    size_t n = strlen(s);

    if (n == 0 || n > max || (!dot_first_ok && s[0] == '.'))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!name_char(s[i]))
            return false;
    return true;
}

static bool check_shm(const char *loc, const char *protocol,
                      enum cfg_addr_role role, char *err, size_t errlen)
{
    (void)protocol;
    if (loc[0] == '\0' && role == CFG_ADDR_LISTEN)
        return true; /* the plugin picks a free name */
    if (shm_name(loc, NAME_MAX_SHM, false))
        return true;
    snprintf(err, errlen,
             "'%.64s' is not an shm name: 1-%d of "
             "[A-Za-z0-9._-], not starting with '.'",
             loc, NAME_MAX_SHM);
    return false;
}

/* "host", "host:port" or "[v6]:port" as na-ofi and na-ucx split them. */
static bool check_hostport(const char *loc, enum cfg_addr_role role,
                           bool any_host_ok, char *err, size_t errlen)
{
    char host[CW_URI_LOCATION_MAX];
    const char *colon;
    const char *hstart = loc;
    size_t hlen;
    unsigned long port = 0;

    if (loc[0] == '\0') {
        if (role == CFG_ADDR_LISTEN)
            return true; /* any interface, a port the plugin picks */
        snprintf(err, errlen,
                 "a next hop needs host:port, got an empty "
                 "location");
        return false;
    }
    if (loc[0] == '[') {
        const char *close = strchr(loc, ']');
        if (close == NULL || (close[1] != '\0' && close[1] != ':')) {
            snprintf(err, errlen, "'%.64s': expected [IPv6]:port", loc);
            return false;
        }
        hstart = loc + 1;
        hlen = (size_t)(close - hstart);
        colon = close[1] == ':' ? close + 1 : NULL;
    } else {
        colon = strrchr(loc, ':');
        if (colon != NULL && strchr(loc, ':') != colon) {
            snprintf(err, errlen,
                     "'%.64s': an IPv6 address takes brackets "
                     "([ADDRESS]:PORT)",
                     loc);
            return false;
        }
        hlen = colon ? (size_t)(colon - loc) : strlen(loc);
    }
    memcpy(host, hstart, hlen);
    host[hlen] = '\0';
    if (hlen == 0) {
        snprintf(err, errlen,
                 "'%.64s' has no host (expected host:port, "
                 "[IPv6]:port or interface:port)",
                 loc);
        return false;
    }
    if (hstart != loc) {
        unsigned char ip[16];
        if (inet_pton(AF_INET6, host, ip) != 1) {
            snprintf(err, errlen,
                     "'%.64s' in brackets is not an IPv6 "
                     "address",
                     host);
            return false;
        }
    } else if (!(any_host_ok && strcmp(host, "*") == 0)) {
        for (size_t i = 0; i < hlen; i++) {
            if (!name_char(host[i])) {
                snprintf(err, errlen,
                         "'%.64s' is not a host name, IP "
                         "address or interface",
                         host);
                return false;
            }
        }
    }
    if (colon != NULL &&
        !digits(colon + 1, strlen(colon + 1), 5, 65535, &port)) {
        snprintf(err, errlen,
                 "port '%.16s' in '%.64s' is not a number from "
                 "0 to 65535",
                 colon + 1, loc);
        return false;
    }
    if (role == CFG_ADDR_PEER && port == 0) {
        snprintf(err, errlen,
                 "'%.64s' has no port: a next hop needs "
                 "host:port",
                 loc);
        return false;
    }
    return true;
}

static bool check_ofi(const char *loc, const char *protocol,
                      enum cfg_addr_role role, char *err, size_t errlen)
{
    if (strcmp(protocol, "shm") == 0) {
        if (loc[0] == '\0' && role == CFG_ADDR_LISTEN)
            return true;
        if (shm_name(loc, NAME_MAX_OFI_SHM, true))
            return true;
        snprintf(err, errlen,
                 "'%.64s' is not an fi_shm name: 1-%d of "
                 "[A-Za-z0-9._-]",
                 loc, NAME_MAX_OFI_SHM);
        return false;
    }
    return check_hostport(loc, role, false, err, errlen);
}

static bool check_ucx(const char *loc, const char *protocol,
                      enum cfg_addr_role role, char *err, size_t errlen)
{
    (void)protocol;
    return check_hostport(loc, role, role == CFG_ADDR_LISTEN, err, errlen);
}

/* "<device>[:<port>]" of [s, s+n): na-verbs parse_dev. */
static bool verbs_dev(const char *s, size_t n)
{
    const char *colon = memchr(s, ':', n);
    size_t dlen = colon ? (size_t)(colon - s) : n;
    size_t plen = colon ? n - dlen - 1 : 0;
    unsigned long port = 1;

    if (dlen == 0 || dlen > VERBS_DEV_MAX)
        return false;
    for (size_t i = 0; i < dlen; i++)
        if (!name_char(s[i]))
            return false;
    if (colon && !digits(colon + 1, plen, 3, 255, &port))
        return false;
    return port >= 1;
}

/* "<ipv4>[:<port>]" or "" of [s, s+n): na-verbs parse_ip.  *ip_p: an
 * address other than 0.0.0.0 was given; *port_p: the port or 0. */
static bool verbs_ip(const char *s, size_t n, bool *ip_p, unsigned long *port_p)
{
    char host[INET_ADDRSTRLEN];
    const char *colon = memchr(s, ':', n);
    size_t hlen = colon ? (size_t)(colon - s) : n;
    size_t plen = colon ? n - hlen - 1 : 0;
    struct in_addr in;
    unsigned long port = 0;

    if (hlen >= sizeof(host))
        return false;
    if (colon && !digits(colon + 1, plen, 5, 65535, &port))
        return false;
    memcpy(host, s, hlen);
    host[hlen] = '\0';
    if (hlen > 0 && inet_pton(AF_INET, host, &in) != 1)
        return false;
    *ip_p = hlen > 0 && in.s_addr != 0;
    *port_p = port;
    return true;
}

/* "[<device>[:<port>]/]<ipv4>[:<tcp port>]", or a device alone. */
static bool check_verbs(const char *loc, const char *protocol,
                        enum cfg_addr_role role, char *err, size_t errlen)
{
    const char *slash = strchr(loc, '/');
    size_t n = strlen(loc);
    bool has_ip = false;
    unsigned long port = 0;
    bool ok;

    (void)protocol;
    if (slash) {
        ok = verbs_dev(loc, (size_t)(slash - loc)) &&
             verbs_ip(slash + 1, n - (size_t)(slash - loc) - 1, &has_ip, &port);
    } else {
        ok = verbs_ip(loc, n, &has_ip, &port) || (n > 0 && verbs_dev(loc, n));
    }
    if (!ok) {
        snprintf(err, errlen,
                 "'%.64s': expected [device[:port]/]IPv4[:port] "
                 "(device: 1-%d of [A-Za-z0-9._-], port 1-255; na-verbs "
                 "takes IPv4 addresses only)",
                 loc, VERBS_DEV_MAX);
        return false;
    }
    if (role == CFG_ADDR_PEER && (!has_ip || port == 0)) {
        snprintf(err, errlen,
                 "'%.64s': a next hop needs "
                 "[device[:port]/]IPv4:port",
                 loc);
        return false;
    }
    return true;
}

static const char *const shm_protocols[] = {"", "shm", NULL};
/* na-ofi's ofi_protos; "" is tcp. */
static const char *const ofi_protocols[] = {"",      "tcp", "shm", "sockets",
                                            "verbs", "cxi", NULL};
static const char *const verbs_protocols[] = {"", NULL};

static const struct cfg_plugin plugins[] = {
    {"shm", shm_protocols, "shm://NAME", check_shm},
    {"ofi", ofi_protocols, "ofi+PROVIDER://HOST:PORT", check_ofi},
    {"ucx", NULL, "ucx+TRANSPORTS://HOST:PORT", check_ucx},
    {"verbs", verbs_protocols, "verbs://DEVICE:PORT/IPV4:PORT", check_verbs},
};
#define NPLUGINS (sizeof(plugins) / sizeof(plugins[0]))

static const struct cfg_plugin *plugin_find(const char *name)
{
    for (size_t i = 0; i < NPLUGINS; i++)
        if (strcmp(plugins[i].name, name) == 0)
            return &plugins[i];
    return NULL;
}

static bool in_list(const char *const *list, const char *s)
{
    for (; *list; list++)
        if (strcmp(*list, s) == 0)
            return true;
    return false;
}

static void unknown_plugin(const char *plugin, const char *protocol, char *err,
                           size_t errlen)
{
    const char *names[NPLUGINS];
    const char *hint;

    for (size_t i = 0; i < NPLUGINS; i++)
        names[i] = plugins[i].name;
    if (protocol[0] == '\0' && in_list(ofi_protocols, plugin)) {
        snprintf(err, errlen,
                 "unknown plugin '%s' (plugins: shm, ofi, ucx, "
                 "verbs): a libfabric provider is written ofi+%s://",
                 plugin, plugin);
        return;
    }
    if (strcmp(plugin, "na") == 0) {
        snprintf(err, errlen,
                 "unknown plugin 'na' (plugins: shm, ofi, ucx, "
                 "verbs): Mercury's na+sm:// is shm://NAME here, ofi+tcp:// "
                 "and ucx+tcp:// keep their names");
        return;
    }
    hint = cfg_suggest(plugin, names, NPLUGINS);
    snprintf(err, errlen,
             "unknown plugin '%s' (plugins: shm, ofi, ucx, "
             "verbs)%s%s%s",
             plugin, hint ? "; did you mean '" : "", hint ? hint : "",
             hint ? "'?" : "");
}

cw_status_t cfg_fabric_check(const char *plugin, const char *protocol,
                             char *err, size_t errlen)
{
    const struct cfg_plugin *p;

    if (strcmp(plugin, "*") == 0)
        return CW_OK;
    p = plugin_find(plugin);
    if (p == NULL) {
        unknown_plugin(plugin, protocol, err, errlen);
        return CW_INVALID_ARG;
    }
    if (p->protocols == NULL || strcmp(protocol, "*") == 0 ||
        in_list(p->protocols, protocol))
        return CW_OK;
    if (p->protocols[1] == NULL)
        snprintf(err, errlen,
                 "plugin '%s' takes no protocol (%s), got "
                 "'%s+%s'",
                 plugin, p->form, plugin, protocol);
    else if (p == plugin_find("ofi"))
        snprintf(err, errlen,
                 "plugin 'ofi' has no protocol '%s' (tcp, shm, "
                 "sockets, verbs, cxi; ofi:// is tcp)",
                 protocol);
    else
        snprintf(err, errlen, "plugin '%s' has no protocol '%s' (%s)", plugin,
                 protocol, p->form);
    return CW_INVALID_ARG;
}

cw_status_t cfg_addr_check(const struct cw_uri *uri, enum cfg_addr_role role,
                           char *err, size_t errlen)
{
    const struct cfg_plugin *p;
    cw_status_t st = cfg_fabric_check(uri->plugin, uri->protocol, err, errlen);

    if (st != CW_OK)
        return st;
    p = plugin_find(uri->plugin);
    if (!p->check(uri->location, uri->protocol, role, err, errlen))
        return CW_INVALID_ARG;
    return CW_OK;
}
