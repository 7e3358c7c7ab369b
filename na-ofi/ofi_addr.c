/*
 * na-ofi addresses: location strings ("host:port", "lo:7000", fi_shm
 * names), the peer table that keeps one AV entry per raw address, and the
 * portable serialized form.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "ofi.h"

#define OFI_SER_MAGIC 0x4f46u

static bool ofi_shm_name_valid(const char *name)
{
    size_t n = strlen(name);

    if (n == 0 || n > OFI_SHM_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)name[i]) && name[i] != '-' &&
            name[i] != '_' && name[i] != '.')
            return false;
    return true;
}

/* An interface name ("lo", "eth0") resolves to its first IPv4 address, or
 * IPv6 if it has none. */
static bool ofi_iface_addr(const char *name, struct sockaddr_storage *ss)
{
    struct ifaddrs *ifa, *it;
    bool found = false;

    if (getifaddrs(&ifa) != 0)
        return false;
    for (int pass = 0; pass < 2 && !found; pass++) {
        for (it = ifa; it != NULL; it = it->ifa_next) {
            if (it->ifa_addr == NULL || strcmp(it->ifa_name, name) != 0)
                continue;
            if (it->ifa_addr->sa_family == (pass == 0 ? AF_INET : AF_INET6)) {
                memcpy(ss, it->ifa_addr,
                       pass == 0 ? sizeof(struct sockaddr_in)
                                 : sizeof(struct sockaddr_in6));
                found = true;
                break;
            }
        }
    }
    freeifaddrs(ifa);
    return found;
}

static cw_status_t ofi_host_to_sockaddr(const struct cw_na_class *cls,
                                        const char *host, uint16_t port,
                                        void *raw, size_t *len_p)
{
    struct sockaddr_storage ss;
    struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
    size_t len;

    memset(&ss, 0, sizeof(ss));
    if (inet_pton(AF_INET, host, &sin->sin_addr) == 1) {
        sin->sin_family = AF_INET;
    } else if (inet_pton(AF_INET6, host, &sin6->sin6_addr) == 1) {
        sin6->sin6_family = AF_INET6;
    } else if (!ofi_iface_addr(host, &ss)) {
        struct addrinfo hints = {.ai_family = AF_INET,
                                 .ai_socktype = SOCK_STREAM};
        struct addrinfo *res = NULL;
        int rc = getaddrinfo(host, NULL, &hints, &res);

        if (rc != 0) {
            hints.ai_family = AF_INET6;
            rc = getaddrinfo(host, NULL, &hints, &res);
        }
        if (rc != 0 || res == NULL) {
            OFI_ERR(cls, "cannot resolve host \"%s\": %s", host,
                    gai_strerror(rc));
            return CW_NOENT;
        }
        memcpy(&ss, res->ai_addr, res->ai_addrlen);
        freeaddrinfo(res);
    }
    if (ss.ss_family == AF_INET) {
        sin->sin_port = htons(port);
        len = sizeof(*sin);
    } else {
        sin6->sin6_port = htons(port);
        len = sizeof(*sin6);
    }
    if (len > *len_p)
        return CW_OVERFLOW;
    memcpy(raw, &ss, len);
    *len_p = len;
    return CW_OK;
}

cw_status_t ofi_location_to_raw(const struct cw_na_class *cls,
                                const char *location, bool for_bind, void *raw,
                                size_t *len_p)
{
    char host[256];
    const char *colon, *hstart = location;
    size_t hlen;
    unsigned long port = 0;

    if (location == NULL)
        return CW_INVALID_ARG;
    if (cls->str_addr) {
        size_t n = strlen(location);

        if (!ofi_shm_name_valid(location) || n + 1 > *len_p) {
            OFI_ERR(cls,
                    "invalid fi_shm name \"%s\" (1-%d characters of "
                    "[A-Za-z0-9._-])",
                    location, OFI_SHM_NAME_MAX);
            return CW_INVALID_ARG;
        }
        memcpy(raw, location, n + 1);
        *len_p = n + 1;
        return CW_OK;
    }
    if (location[0] == '[') {
        const char *close = strchr(location, ']');

        if (close == NULL)
            goto err_syntax;
        hstart = location + 1;
        hlen = (size_t)(close - hstart);
        colon = close[1] == ':' ? close + 1 : NULL;
        if (close[1] != '\0' && colon == NULL)
            goto err_syntax;
    } else {
        colon = strrchr(location, ':');
        if (colon != NULL && strchr(location, ':') != colon)
            goto err_syntax; /* bare IPv6 needs brackets */
        hlen = colon ? (size_t)(colon - location) : strlen(location);
    }
    if (hlen == 0 || hlen >= sizeof(host))
        goto err_syntax;
    memcpy(host, hstart, hlen);
    host[hlen] = '\0';
    if (colon != NULL) {
        char *end;

        errno = 0;
        port = strtoul(colon + 1, &end, 10);
        if (colon[1] == '\0' || *end != '\0' || errno != 0 || port > 65535)
            goto err_syntax;
    }
    if (port == 0 && !for_bind) {
        OFI_ERR(cls, "address \"%s\" has no port", location);
        return CW_INVALID_ARG;
    }
    return ofi_host_to_sockaddr(cls, host, (uint16_t)port, raw, len_p);

err_syntax:
    OFI_ERR(cls,
            "malformed address \"%s\" (expected host:port, "
            "[ipv6]:port or interface:port)",
            location);
    return CW_INVALID_ARG;
}

int ofi_format_raw(const struct cw_na_class *cls, const uint8_t *raw,
                   size_t len, char *buf, size_t size)
{
    char ip[INET6_ADDRSTRLEN];
    struct sockaddr_storage ss;

    if (cls->str_addr)
        return snprintf(buf, size, "%.*s", (int)strnlen((const char *)raw, len),
                        (const char *)raw);
    memset(&ss, 0, sizeof(ss));
    memcpy(&ss, raw, len < sizeof(ss) ? len : sizeof(ss));
    if (ss.ss_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)&ss;

        inet_ntop(AF_INET, &sin->sin_addr, ip, sizeof(ip));
        return snprintf(buf, size, "%s:%u", ip, ntohs(sin->sin_port));
    }
    if (ss.ss_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)&ss;

        inet_ntop(AF_INET6, &sin6->sin6_addr, ip, sizeof(ip));
        return snprintf(buf, size, "[%s]:%u", ip, ntohs(sin6->sin6_port));
    }
    return snprintf(buf, size, "<%zu-byte address>", len);
}

/* Raw addresses that come off the wire must at least look like the form
 * this provider uses before they reach fi_av_insert(). */
static bool ofi_raw_valid(const struct cw_na_class *cls, const uint8_t *raw,
                          size_t len)
{
    if (len == 0 || len > OFI_ADDR_MAX)
        return false;
    if (cls->str_addr)
        return raw[len - 1] == '\0' && ofi_shm_name_valid((const char *)raw);
    if (len == sizeof(struct sockaddr_in))
        return ((const struct sockaddr *)raw)->sa_family == AF_INET;
    if (len == sizeof(struct sockaddr_in6))
        return ((const struct sockaddr *)raw)->sa_family == AF_INET6;
    return false;
}

/*
 * fi_shm liveness.  A killed process leaves its region in /dev/shm and
 * sends into it still succeed, so each instance holds an OFD read lock on
 * its own region file; the kernel drops it when the process dies, and a
 * peer tests for it with F_OFD_GETLK (which takes nothing).
 * Returns -1 if the region does not exist, 0 if nobody holds the lock, 1 if
 * its owner does.
 */
int ofi_shm_owner(const char *name)
{
    char path[OFI_SHM_NAME_MAX + 16];
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    int fd, rc;

    snprintf(path, sizeof(path), "/dev/shm/%s", name);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? -1 : 1; /* cannot tell: assume alive */
    rc = fcntl(fd, F_OFD_GETLK, &fl);
    close(fd);
    if (rc != 0)
        return 1;
    return fl.l_type == F_UNLCK ? 0 : 1;
}

/* Removes the region a dead Causeway peer left behind (its lock is gone,
 * so no live process owns it), so the name can be used again. */
void ofi_shm_reap(struct cw_na_class *cls, const char *name)
{
    char path[OFI_SHM_NAME_MAX + 16];

    snprintf(path, sizeof(path), "/dev/shm/%s", name);
    if (unlink(path) == 0)
        OFI_DBG(cls, "removed %s left by a dead peer", path);
}

/* Regions named the way this plugin names them ("cw-PID-N") whose process
 * is gone and whose lock nobody holds: left by a process killed before any
 * peer noticed its death (a peer removes them then).  Removed when an shm
 * instance opens, so they do not pile up on a node. */
void ofi_shm_reap_dead(struct cw_na_class *cls)
{
    DIR *d = opendir("/dev/shm");
    struct dirent *de;

    if (d == NULL)
        return;
    while ((de = readdir(d)) != NULL) {
        long pid;
        unsigned seq;
        int end = 0;

        if (strlen(de->d_name) > OFI_SHM_NAME_MAX ||
            sscanf(de->d_name, "cw-%ld-%u%n", &pid, &seq, &end) != 2 ||
            de->d_name[end] != '\0' || pid <= 0 || (pid_t)pid == getpid())
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        if (ofi_shm_owner(de->d_name) == 0)
            ofi_shm_reap(cls, de->d_name);
    }
    closedir(d);
}

cw_status_t ofi_shm_lock_self(struct cw_na_class *cls)
{
    char path[OFI_SHM_NAME_MAX + 16];
    struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET};

    snprintf(path, sizeof(path), "/dev/shm/%s", (const char *)cls->self->raw);
    cls->shm_lock_fd = open(path, O_RDONLY | O_CLOEXEC);
    if (cls->shm_lock_fd < 0) {
        /* Liveness then falls back to probes; not fatal. */
        OFI_WARN(cls,
                 "open(%s) failed: %s; peers will detect our death by "
                 "timeout only",
                 path, strerror(errno));
        return CW_OK;
    }
    if (fcntl(cls->shm_lock_fd, F_OFD_SETLK, &fl) != 0)
        OFI_WARN(cls, "fcntl(%s, F_OFD_SETLK) failed: %s", path,
                 strerror(errno));
    return CW_OK;
}

struct cw_na_addr *ofi_peer_find(struct cw_na_class *cls, const void *raw,
                                 size_t len)
{
    struct nau_ptable_node *n =
        nau_ptable_first(&cls->peers, nau_ptable_hash(&cls->peers, raw, len));

    for (; n != NULL; n = nau_ptable_next(n)) {
        struct cw_na_addr *a = nau_container_of(n, struct cw_na_addr, pnode);

        if (a->len == len && memcmp(a->raw, raw, len) == 0)
            return a;
    }
    return NULL;
}

cw_status_t ofi_peer_get(struct cw_na_class *cls, const void *raw, size_t len,
                         struct cw_na_addr **addr_p)
{
    struct cw_na_addr *a;
    char str[128];
    int rc;

    if (!ofi_raw_valid(cls, raw, len))
        return CW_INVALID_ARG;
    a = ofi_peer_find(cls, raw, len);
    if (a != NULL) {
        nau_ptable_ref(&a->pnode);
        *addr_p = a;
        return CW_OK;
    }
    if (cls->str_addr && cls->self != NULL) {
        /* libfabric 1.17's shm crashes sending to a region that does not
         * exist, so refuse those here. */
        int owner = ofi_shm_owner((const char *)raw);

        if (owner < 0) {
            OFI_ERR_RL(cls,
                       "fi_shm peer %s: no region /dev/shm/%s (not running)",
                       (const char *)raw, (const char *)raw);
            return CW_UNREACHABLE;
        }
        if (owner == 0)
            OFI_DBG(cls, "fi_shm peer %s holds no liveness lock",
                    (const char *)raw);
    }
    a = calloc(1, sizeof(*a));
    if (a == NULL)
        return CW_NOMEM;
    nau_list_init(&a->uq);
    a->lock_seen = cls->str_addr && cls->self != NULL &&
                   ofi_shm_owner((const char *)raw) == 1;
    memcpy(a->raw, raw, len);
    a->len = (uint16_t)len;
    rc = fi_av_insert(cls->av, a->raw, 1, &a->fi, 0, NULL);
    if (rc != 1) {
        ofi_format_raw(cls, a->raw, a->len, str, sizeof(str));
        OFI_ERR_RL(cls, "fi_av_insert(%s) failed: %s", str,
                   fi_strerror(rc < 0 ? -rc : FI_EINVAL));
        free(a);
        return rc < 0 ? ofi_status(rc) : CW_UNREACHABLE;
    }
    nau_ptable_insert(&cls->peers, &a->pnode,
                      nau_ptable_hash(&cls->peers, raw, len));
    a->pnode.refs = 1;
    a->last_alive_ns = ofi_now(cls);
    a->last_used_ns = a->last_alive_ns;
    *addr_p = a;
    return CW_OK;
}

/* rxm keeps a connection that failed in that state; a fresh AV entry makes
 * the next operation connect again (the peer may have restarted). */
void ofi_peer_reset(struct cw_na_class *cls, struct cw_na_addr *peer)
{
    fi_addr_t fresh;
    int rc;

    if (peer == cls->self)
        return;
    rc = fi_av_remove(cls->av, &peer->fi, 1, 0);
    if (rc != 0)
        OFI_DBG(cls, "fi_av_remove() failed: %s", fi_strerror(-rc));
    rc = fi_av_insert(cls->av, peer->raw, 1, &fresh, 0, NULL);
    if (rc == 1)
        peer->fi = fresh;
    else
        OFI_WARN_RL(cls, "fi_av_insert() after a connection failure failed: %s",
                    fi_strerror(rc < 0 ? -rc : FI_EINVAL));
}

cw_status_t ofi_addr_init_self(struct cw_na_class *cls)
{
    uint8_t raw[OFI_ADDR_MAX + 8];
    size_t len = sizeof(raw);
    int rc = fi_getname(&cls->ep->fid, raw, &len);

    if (rc != 0) {
        OFI_ERR(cls, "fi_getname() failed: %s", fi_strerror(-rc));
        return ofi_status(rc);
    }
    if (len > OFI_ADDR_MAX) {
        OFI_ERR(cls, "%s address is %zu bytes, more than the %d supported",
                cls->prov_name, len, OFI_ADDR_MAX);
        return CW_UNSUPPORTED;
    }
    if (cls->str_addr && (len == 0 || raw[len - 1] != '\0')) {
        if (len >= OFI_ADDR_MAX)
            return CW_UNSUPPORTED;
        raw[len++] = '\0';
    }
    return ofi_peer_get(cls, raw, len, &cls->self);
}

void ofi_addr_fini(struct cw_na_class *cls)
{
    struct nau_ptable_node *n, *next;

    for (n = nau_ptable_iter(&cls->peers, NULL); n != NULL; n = next) {
        next = nau_ptable_iter(&cls->peers, n);
        nau_ptable_remove(&cls->peers, n);
        ofi_cprobe_close(nau_container_of(n, struct cw_na_addr, pnode));
        free(nau_container_of(n, struct cw_na_addr, pnode));
    }
    nau_ptable_fini(&cls->peers);
    cls->self = NULL;
}

void ofi_hdr_fill(struct cw_na_class *cls, struct ofi_hdr *hdr, uint8_t kind)
{
    hdr->magic = OFI_HDR_MAGIC;
    hdr->version = OFI_HDR_VERSION;
    hdr->kind = kind;
    hdr->addrlen = cls->self->len;
    hdr->tag = 0;
    memcpy(hdr->addr, cls->self->raw, cls->self->len);
    memset(hdr->addr + cls->self->len, 0, OFI_ADDR_MAX - cls->self->len);
}

bool ofi_hdr_valid(const struct ofi_hdr *hdr, size_t len)
{
    return len >= OFI_HDR_SIZE && hdr->magic == OFI_HDR_MAGIC &&
           hdr->version == OFI_HDR_VERSION && hdr->addrlen > 0 &&
           hdr->addrlen <= OFI_ADDR_MAX;
}

cw_status_t ofi_addr_lookup(cw_na_class_t *cls, const char *location,
                            cw_na_addr_t **addr_p)
{
    uint8_t raw[OFI_ADDR_MAX];
    size_t len = sizeof(raw);
    cw_status_t st = ofi_location_to_raw(cls, location, false, raw, &len);

    if (st != CW_OK)
        return st;
    return ofi_peer_get(cls, raw, len, addr_p);
}

cw_status_t ofi_addr_self(cw_na_class_t *cls, cw_na_addr_t **addr_p)
{
    nau_ptable_ref(&cls->self->pnode);
    *addr_p = cls->self;
    return CW_OK;
}

cw_status_t ofi_addr_dup(cw_na_class_t *cls, cw_na_addr_t *addr,
                         cw_na_addr_t **addr_p)
{
    if (addr == NULL)
        return CW_INVALID_ARG;
    nau_ptable_ref(&addr->pnode);
    *addr_p = addr;
    return CW_OK;
}

void ofi_addr_free(cw_na_class_t *cls, cw_na_addr_t *addr)
{
    if (addr != NULL && addr->pnode.refs > 0 && nau_ptable_unref(&addr->pnode))
        addr->last_used_ns = ofi_now(cls);
}

/* Removes peers nobody has used for peer_idle_s: no reference, no op, no
 * control message in flight. */
void ofi_peers_reap(struct cw_na_class *cls, uint64_t now)
{
    struct nau_ptable_node *n, *next;

    if (cls->peer_idle_ns == 0)
        return;
    for (n = nau_ptable_iter(&cls->peers, NULL); n != NULL; n = next) {
        struct cw_na_addr *a = nau_container_of(n, struct cw_na_addr, pnode);
        int rc;

        next = nau_ptable_iter(&cls->peers, n);
        if (a == cls->self || a->pnode.refs > 0 || a->nactive > 0 ||
            a->nctrl > 0 || a->pong_due ||
            now - a->last_used_ns < cls->peer_idle_ns)
            continue;
        rc = fi_av_remove(cls->av, &a->fi, 1, 0);
        if (rc != 0)
            OFI_DBG(cls, "fi_av_remove() failed: %s", fi_strerror(-rc));
        if (cls->host->log_level && *cls->host->log_level >= CW_LOG_DEBUG) {
            char str[128];

            ofi_format_raw(cls, a->raw, a->len, str, sizeof(str));
            OFI_DBG(cls, "dropped idle peer %s", str);
        }
        nau_ptable_remove(&cls->peers, n);
        ofi_cprobe_close(a);
        free(a);
    }
}

bool ofi_addr_cmp(cw_na_class_t *cls, cw_na_addr_t *a, cw_na_addr_t *b)
{
    if (a == b)
        return true;
    if (a == NULL || b == NULL)
        return false;
    return a->len == b->len && memcmp(a->raw, b->raw, a->len) == 0;
}

cw_status_t ofi_addr_to_string(cw_na_class_t *cls, cw_na_addr_t *addr,
                               char *buf, size_t *len_p)
{
    int n;

    if (addr == NULL || len_p == NULL)
        return CW_INVALID_ARG;
    if (addr->str_len == 0) {
        n = ofi_format_raw(cls, addr->raw, addr->len, addr->str,
                           sizeof(addr->str));
        if (n > 0 && (size_t)n < sizeof(addr->str))
            addr->str_len = (uint8_t)n;
    }
    if (addr->str_len != 0) {
        n = addr->str_len;
        if (buf != NULL && (size_t)n + 1 <= *len_p)
            memcpy(buf, addr->str, (size_t)n + 1);
    } else {
        n = ofi_format_raw(cls, addr->raw, addr->len, buf, buf ? *len_p : 0);
    }
    if (n < 0)
        return CW_INTERNAL;
    if ((size_t)n + 1 > *len_p) {
        *len_p = (size_t)n + 1;
        return CW_OVERFLOW;
    }
    return CW_OK;
}

/* Serialized form: u16 magic, u16 length, raw bytes (little-endian). */
size_t ofi_addr_serialize_size(cw_na_class_t *cls, cw_na_addr_t *addr)
{
    return addr ? 4u + addr->len : 0;
}

cw_status_t ofi_addr_serialize(cw_na_class_t *cls, void *buf, size_t size,
                               cw_na_addr_t *addr)
{
    uint8_t *p = buf;

    if (addr == NULL || buf == NULL)
        return CW_INVALID_ARG;
    if (size < 4u + addr->len)
        return CW_OVERFLOW;
    p[0] = OFI_SER_MAGIC & 0xff;
    p[1] = OFI_SER_MAGIC >> 8;
    p[2] = addr->len & 0xff;
    p[3] = (uint8_t)(addr->len >> 8);
    memcpy(p + 4, addr->raw, addr->len);
    return CW_OK;
}

cw_status_t ofi_addr_deserialize(cw_na_class_t *cls, const void *buf,
                                 size_t size, cw_na_addr_t **addr_p)
{
    const uint8_t *p = buf;
    size_t len;

    if (buf == NULL || size < 4)
        return CW_INVALID_ARG;
    if ((p[0] | (p[1] << 8)) != OFI_SER_MAGIC)
        return CW_PROTOCOL;
    len = (size_t)p[2] | ((size_t)p[3] << 8);
    if (len == 0 || len > OFI_ADDR_MAX || size - 4 < len)
        return CW_PROTOCOL;
    if (!ofi_raw_valid(cls, p + 4, len))
        return CW_PROTOCOL;
    return ofi_peer_get(cls, p + 4, len, addr_p);
}
