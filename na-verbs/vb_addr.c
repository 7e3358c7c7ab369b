/*
 * na-verbs: addresses.  A location is "[<device>[:<port>]/]<ipv4>[:<tcp>]";
 * a peer is identified by the IPv4 address and port its rdma_cm id listens
 * on, and each instance keeps one refcounted object per peer so that
 * addr_cmp is a pointer comparison and connections can hang off it.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vb.h"

#define VB_ADDR_MAGIC "VBA1"
#define VB_ADDR_FIXED 12

static bool dev_char_ok(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
}

static bool parse_u(const char *s, size_t n, unsigned long max,
                    unsigned long *v_p)
{
    unsigned long v = 0;
    if (n == 0 || n > 5)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (unsigned long)(s[i] - '0');
    }
    if (v > max)
        return false;
    *v_p = v;
    return true;
}

static cw_status_t parse_dev(const char *s, size_t n, char *dev,
                             uint8_t *devport_p)
{
    const char *colon = memchr(s, ':', n);
    size_t dlen = colon ? (size_t)(colon - s) : n;
    unsigned long port = 1;
    if (dlen == 0 || dlen > VB_DEV_MAX)
        return CW_INVALID_ARG;
    for (size_t i = 0; i < dlen; i++)
        if (!dev_char_ok(s[i]))
            return CW_INVALID_ARG;
    if (colon && (!parse_u(colon + 1, n - dlen - 1, 255, &port) || port == 0))
        return CW_INVALID_ARG;
    memcpy(dev, s, dlen);
    dev[dlen] = '\0';
    *devport_p = (uint8_t)port;
    return CW_OK;
}

static cw_status_t parse_ip(const char *s, size_t n, struct sockaddr_in *sin,
                            bool *has_ip_p)
{
    char host[INET_ADDRSTRLEN];
    const char *colon = memchr(s, ':', n);
    size_t hlen = colon ? (size_t)(colon - s) : n;
    unsigned long port = 0;
    if (hlen >= sizeof(host))
        return CW_INVALID_ARG;
    if (colon && !parse_u(colon + 1, n - hlen - 1, 65535, &port))
        return CW_INVALID_ARG;
    memcpy(host, s, hlen);
    host[hlen] = '\0';
    sin->sin_family = AF_INET;
    sin->sin_port = htons((uint16_t)port);
    if (hlen == 0) {
        sin->sin_addr.s_addr = htonl(INADDR_ANY);
        *has_ip_p = false;
        return CW_OK;
    }
    if (inet_pton(AF_INET, host, &sin->sin_addr) != 1)
        return CW_INVALID_ARG;
    *has_ip_p = true;
    return CW_OK;
}

cw_status_t vb_parse_location(const char *loc, char *dev, uint8_t *devport_p,
                              struct sockaddr_in *sin_p, bool *has_ip_p)
{
    struct sockaddr_in sin;
    char d[VB_DEV_MAX + 1] = "";
    uint8_t dp = 1;
    bool has_ip = false;
    size_t n = strlen(loc);
    const char *slash = memchr(loc, '/', n);
    cw_status_t st;

    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    if (slash) {
        st = parse_dev(loc, (size_t)(slash - loc), d, &dp);
        if (st == CW_OK)
            st = parse_ip(slash + 1, n - (size_t)(slash - loc) - 1, &sin,
                          &has_ip);
    } else if (n == 0) {
        st = CW_OK;
    } else {
        /* "ip[:port]" or, failing that, "dev[:port]". */
        st = parse_ip(loc, n, &sin, &has_ip);
        if (st != CW_OK || !has_ip) {
            memset(&sin, 0, sizeof(sin));
            sin.sin_family = AF_INET;
            has_ip = false;
            st = parse_dev(loc, n, d, &dp);
        }
    }
    if (st != CW_OK)
        return st;
    memcpy(dev, d, sizeof(d));
    *devport_p = dp;
    *sin_p = sin;
    *has_ip_p = has_ip;
    return CW_OK;
}

/* The key of a peer in cls->peers: its IPv4 address and port. */
static uint64_t vb_peer_key(const struct sockaddr_in *sin)
{
    return (uint64_t)sin->sin_addr.s_addr << 16 | sin->sin_port;
}

vb_peer_t *vb_peer_get(vb_class_t *cls, const struct sockaddr_in *sin,
                       const char *dev, uint8_t devport)
{
    struct nau_ptable_node *n =
        nau_ptable_find_u64(&cls->peers, vb_peer_key(sin));
    vb_peer_t *p;

    if (n) {
        p = nau_container_of(n, vb_peer_t, pnode);
        if (!p->dev[0] && dev && dev[0]) {
            snprintf(p->dev, sizeof(p->dev), "%s", dev);
            p->devport = devport;
        }
        nau_ptable_ref(&p->pnode);
        return p;
    }
    p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->pnode.refs = 1;
    p->sin.sin_family = AF_INET;
    p->sin.sin_addr = sin->sin_addr;
    p->sin.sin_port = sin->sin_port;
    if (dev)
        snprintf(p->dev, sizeof(p->dev), "%s", dev);
    p->devport = devport ? devport : 1;
    nau_ptable_insert_u64(&cls->peers, &p->pnode, vb_peer_key(sin));
    return p;
}

void vb_peer_put(vb_class_t *cls, vb_peer_t *peer)
{
    if (!peer || !nau_ptable_unref(&peer->pnode))
        return;
    nau_ptable_remove(&cls->peers, &peer->pnode);
    free(peer);
}

/* Finalize: the peers nothing refers to any more, or that a leak kept. */
void vb_peers_free_all(vb_class_t *cls)
{
    struct nau_ptable_node *n;

    while ((n = nau_ptable_iter(&cls->peers, NULL)) != NULL) {
        nau_ptable_remove(&cls->peers, n);
        free(nau_container_of(n, vb_peer_t, pnode));
    }
    nau_ptable_fini(&cls->peers);
}

const char *vb_peer_format(const vb_peer_t *peer, char *buf, size_t len)
{
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &peer->sin.sin_addr, ip, sizeof(ip));
    if (peer->dev[0])
        snprintf(buf, len, "%s:%u/%s:%u", peer->dev, peer->devport, ip,
                 ntohs(peer->sin.sin_port));
    else
        snprintf(buf, len, "%s:%u", ip, ntohs(peer->sin.sin_port));
    return buf;
}

cw_status_t vb_addr_lookup(cw_na_class_t *cls, const char *location,
                           cw_na_addr_t **addr_p)
{
    struct sockaddr_in sin;
    char dev[VB_DEV_MAX + 1];
    uint8_t devport;
    bool has_ip;
    if (!location || !addr_p)
        return CW_INVALID_ARG;
    if (vb_parse_location(location, dev, &devport, &sin, &has_ip) != CW_OK ||
        !has_ip || sin.sin_port == 0 || sin.sin_addr.s_addr == INADDR_ANY) {
        VB_ERR(cls, "bad verbs address '%s' (want [dev[:port]/]ip:port)",
               location);
        return CW_INVALID_ARG;
    }
    vb_peer_t *p = vb_peer_get(cls, &sin, dev, devport);
    if (!p)
        return CW_NOMEM;
    *addr_p = p;
    return CW_OK;
}

cw_status_t vb_addr_self(cw_na_class_t *cls, cw_na_addr_t **addr_p)
{
    if (!addr_p)
        return CW_INVALID_ARG;
    nau_ptable_ref(&cls->self->pnode);
    *addr_p = cls->self;
    return CW_OK;
}

cw_status_t vb_addr_dup(cw_na_class_t *cls, cw_na_addr_t *addr,
                        cw_na_addr_t **addr_p)
{
    if (!addr || !addr_p)
        return CW_INVALID_ARG;
    nau_ptable_ref(&addr->pnode);
    *addr_p = addr;
    return CW_OK;
}

void vb_addr_free(cw_na_class_t *cls, cw_na_addr_t *addr)
{
    vb_peer_put(cls, addr);
}

bool vb_addr_cmp(cw_na_class_t *cls, cw_na_addr_t *a, cw_na_addr_t *b)
{
    return a && a == b;
}

cw_status_t vb_addr_to_string(cw_na_class_t *cls, cw_na_addr_t *addr, char *buf,
                              size_t *len_p)
{
    char s[64];
    if (!addr || !len_p)
        return CW_INVALID_ARG;
    vb_peer_format(addr, s, sizeof(s));
    size_t need = strlen(s) + 1;
    if (!buf || *len_p < need) {
        *len_p = need;
        return CW_OVERFLOW;
    }
    memcpy(buf, s, need);
    return CW_OK;
}

size_t vb_addr_serialize_size(cw_na_class_t *cls, cw_na_addr_t *addr)
{
    return addr ? VB_ADDR_FIXED + strlen(addr->dev) : 0;
}

cw_status_t vb_addr_serialize(cw_na_class_t *cls, void *buf, size_t size,
                              cw_na_addr_t *addr)
{
    uint8_t *b = buf;
    if (!addr || !buf)
        return CW_INVALID_ARG;
    size_t dl = strlen(addr->dev);
    if (size < VB_ADDR_FIXED + dl)
        return CW_OVERFLOW;
    memcpy(b, VB_ADDR_MAGIC, 4);
    memcpy(b + 4, &addr->sin.sin_addr.s_addr, 4);
    memcpy(b + 8, &addr->sin.sin_port, 2);
    b[10] = addr->devport;
    b[11] = (uint8_t)dl;
    memcpy(b + VB_ADDR_FIXED, addr->dev, dl);
    return CW_OK;
}

cw_status_t vb_addr_deserialize(cw_na_class_t *cls, const void *buf,
                                size_t size, cw_na_addr_t **addr_p)
{
    const uint8_t *b = buf;
    struct sockaddr_in sin = {.sin_family = AF_INET};
    char dev[VB_DEV_MAX + 1];
    if (!buf || !addr_p || size < VB_ADDR_FIXED ||
        memcmp(b, VB_ADDR_MAGIC, 4) != 0)
        return CW_INVALID_ARG;
    size_t dl = b[11];
    if (dl > VB_DEV_MAX || size != VB_ADDR_FIXED + dl || b[10] == 0)
        return CW_INVALID_ARG;
    for (size_t i = 0; i < dl; i++)
        if (!dev_char_ok((char)b[VB_ADDR_FIXED + i]))
            return CW_INVALID_ARG;
    memcpy(dev, b + VB_ADDR_FIXED, dl);
    dev[dl] = '\0';
    memcpy(&sin.sin_addr.s_addr, b + 4, 4);
    memcpy(&sin.sin_port, b + 8, 2);
    if (sin.sin_port == 0 || sin.sin_addr.s_addr == INADDR_ANY)
        return CW_INVALID_ARG;
    vb_peer_t *p = vb_peer_get(cls, &sin, dev, b[10]);
    if (!p)
        return CW_NOMEM;
    *addr_p = p;
    return CW_OK;
}
