/*
 * Connections closed before their handshake (ofi+tcp).
 *
 * libfabric's tcp provider accepts every connection to the listening socket
 * and then waits for the peer's connection request on it.  When the peer
 * closes first, recv() returns 0 and the provider takes errno for the
 * reason (tcpx_cm_recv_req in 1.17, xnet_handle_conn later: "ofi_sockerr()
 * ? -ofi_sockerr() : -FI_EIO").  errno still holds what some earlier call
 * left; in a thread that has just polled a nonblocking socket that is
 * EAGAIN, so the provider keeps the socket and tries again at every
 * progress call, forever.  Each such connection holds a descriptor in
 * CLOSE-WAIT for the life of the endpoint and the level-triggered poll
 * spins on it: a peer connecting and closing in a loop took a gateway to
 * its descriptor limit (docs/reliability.md, "Floods").
 *
 * The plugin cannot reach the provider's sockets, but the kernel can list
 * this process's.  Every reap_ms, sock_diag names the TCP sockets in
 * CLOSE-WAIT on our listening port with nothing unread (then every tenth
 * of that while it names any); one named in two scans in a row is
 * dissolved (connect() to AF_UNSPEC: the kernel resets
 * it, and the provider's next recv() fails with ECONNRESET, so the provider
 * closes the socket and frees what it kept for it).  A connection the
 * provider would have closed anyway is reset instead: its peer has gone and
 * nothing it sent is unread.
 *
 * Only the class's own thread calls in here (FI_THREAD_DOMAIN), so the
 * provider does not close these sockets meanwhile; another class's thread
 * may, and the number be reused, so the checks and the reset act on a
 * duplicate of the descriptor, which names the same socket whatever
 * happens to the number.  At the descriptor limit, where nothing can be
 * duplicated, the reserve descriptor kept for that is given up for the
 * scan, and the reset acts on the number itself, right after its checks.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>

#include "ofi.h"

/* Sockets one scan keeps track of: a bound on what peers can make us hold
 * (8 bytes each); beyond it the rest wait for later scans. */
#define OFI_REAP_MAX 65536u

static bool ofi_reap_fd_full(void)
{
    return errno == EMFILE || errno == ENFILE;
}

/* A descriptor, using the reserve if the process has none left. */
static int ofi_reap_socket(struct ofi_reaper *r, int domain, int type,
                           int proto)
{
    int fd = socket(domain, type | SOCK_CLOEXEC, proto);

    if (fd < 0 && ofi_reap_fd_full() && r->reserve_fd >= 0) {
        close(r->reserve_fd);
        r->reserve_fd = -1;
        fd = socket(domain, type | SOCK_CLOEXEC, proto);
    }
    return fd;
}

static DIR *ofi_reap_opendir(struct ofi_reaper *r, const char *path)
{
    DIR *d = opendir(path);

    if (d == NULL && ofi_reap_fd_full() && r->reserve_fd >= 0) {
        close(r->reserve_fd);
        r->reserve_fd = -1;
        d = opendir(path);
    }
    return d;
}

static bool ofi_reap_same_host(const struct ofi_reaper *r,
                               const struct inet_diag_sockid *id)
{
    if (r->any_addr)
        return true;
    if (r->family == AF_INET)
        return memcmp(id->idiag_src, r->addr, 4) == 0;
    return memcmp(id->idiag_src, r->addr, 16) == 0;
}

static int ofi_cmp_ino(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return (x > y) - (x < y);
}

static bool ofi_ino_in(const uint64_t *set, size_t n, uint64_t ino)
{
    return n > 0 && bsearch(&ino, set, n, sizeof(*set), ofi_cmp_ino) != NULL;
}

/* Adds ino to the array *set of *n_p (room for *cap_p). */
static void ofi_ino_add(uint64_t **set, size_t *n_p, size_t *cap_p,
                        uint64_t ino)
{
    if (*n_p == *cap_p) {
        size_t cap = *cap_p != 0 ? *cap_p * 2 : 64;
        uint64_t *more;

        if (*n_p == OFI_REAP_MAX)
            return;
        if (cap > OFI_REAP_MAX)
            cap = OFI_REAP_MAX;
        more = realloc(*set, cap * sizeof(*more));
        if (more == NULL)
            return;
        *set = more;
        *cap_p = cap;
    }
    (*set)[(*n_p)++] = ino;
}

/* The inodes of the sockets in CLOSE-WAIT on our port with nothing unread,
 * sorted, into a new array *cur_p of *n_p (NULL if none).  false if the
 * kernel could not be asked. */
static bool ofi_reap_list(struct ofi_reaper *r, uint64_t **cur_p, size_t *n_p)
{
    struct {
        struct nlmsghdr nlh;
        struct inet_diag_req_v2 req;
    } q;
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    long buf[8192 / sizeof(long)];
    uint64_t *cur = NULL;
    size_t n = 0, cap = 0;
    bool done = false, ok = true;
    int fd = ofi_reap_socket(r, AF_NETLINK, SOCK_DGRAM, NETLINK_SOCK_DIAG);

    if (fd < 0)
        return false;
    memset(&q, 0, sizeof(q));
    q.nlh.nlmsg_len = sizeof(q);
    q.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    q.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    q.nlh.nlmsg_seq = 1;
    q.req.sdiag_family = (uint8_t)r->family;
    q.req.sdiag_protocol = IPPROTO_TCP;
    q.req.idiag_states = 1u << TCP_CLOSE_WAIT;
    if (sendto(fd, &q, sizeof(q), 0, (struct sockaddr *)&kernel,
               sizeof(kernel)) != (ssize_t)sizeof(q)) {
        close(fd);
        return false;
    }
    while (!done) {
        ssize_t len = recv(fd, buf, sizeof(buf), 0);
        struct nlmsghdr *h = (struct nlmsghdr *)buf;

        if (len <= 0) {
            if (len < 0 && errno == EINTR)
                continue;
            ok = false;
            break;
        }
        for (; NLMSG_OK(h, (size_t)len); h = NLMSG_NEXT(h, len)) {
            const struct inet_diag_msg *m = NLMSG_DATA(h);

            if (h->nlmsg_type == NLMSG_DONE) {
                done = true;
                break;
            }
            if (h->nlmsg_type == NLMSG_ERROR) {
                ok = false;
                done = true;
                break;
            }
            if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*m)))
                continue;
            if (m->idiag_state != TCP_CLOSE_WAIT ||
                ntohs(m->id.idiag_sport) != r->port ||
                !ofi_reap_same_host(r, &m->id) || m->idiag_rqueue != 0 ||
                m->idiag_inode == 0)
                continue;
            ofi_ino_add(&cur, &n, &cap, m->idiag_inode);
        }
    }
    close(fd);
    if (n > 0)
        qsort(cur, n, sizeof(*cur), ofi_cmp_ino);
    *cur_p = cur;
    *n_p = n;
    return ok;
}

/* Is fd (still) that socket, in CLOSE-WAIT with nothing unread? */
static bool ofi_reap_still(int fd, uint64_t ino)
{
    struct stat st;
    struct tcp_info ti;
    socklen_t tl = sizeof(ti);
    int unread = -1;

    return fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) &&
           (uint64_t)st.st_ino == ino &&
           getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) == 0 &&
           ti.tcpi_state == TCP_CLOSE_WAIT &&
           ioctl(fd, FIONREAD, &unread) == 0 && unread == 0;
}

static bool ofi_reap_one(int fd, uint64_t ino)
{
    struct sockaddr none = {.sa_family = AF_UNSPEC};
    int d = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    bool ok;

    if (d < 0) {
        if (!ofi_reap_fd_full())
            return false;
        d = fd; /* no number to spare: see the top of this file */
    }
    ok = ofi_reap_still(d, ino) && connect(d, &none, sizeof(none)) == 0;
    if (d != fd)
        close(d);
    return ok;
}

/* Resets the sockets of due (sorted) that are ours; returns how many. */
static unsigned ofi_reap_fds(struct ofi_reaper *r, const uint64_t *due,
                             size_t ndue)
{
    DIR *d = ofi_reap_opendir(r, "/proc/self/fd");
    struct dirent *e;
    unsigned n = 0;

    if (d == NULL)
        return 0;
    while ((e = readdir(d)) != NULL) {
        char link[64];
        unsigned long long ino;
        char *end;
        long fd = strtol(e->d_name, &end, 10);
        ssize_t len;

        if (*end != '\0' || end == e->d_name || fd == dirfd(d))
            continue;
        len = readlinkat(dirfd(d), e->d_name, link, sizeof(link) - 1);
        if (len <= 0)
            continue;
        link[len] = '\0';
        if (sscanf(link, "socket:[%llu]", &ino) != 1 ||
            !ofi_ino_in(due, ndue, (uint64_t)ino))
            continue;
        if (ofi_reap_one((int)fd, (uint64_t)ino))
            n++;
    }
    closedir(d);
    return n;
}

void ofi_reap_init(struct cw_na_class *cls, const void *raw, size_t len)
{
    struct ofi_reaper *r = &cls->reap;
    struct sockaddr_storage ss; /* raw is not aligned for a sockaddr */

    r->reserve_fd = -1;
    if (cls->reap_ns == 0 || len < sizeof(struct sockaddr_in) ||
        len > sizeof(ss))
        return;
    memset(&ss, 0, sizeof(ss));
    memcpy(&ss, raw, len);
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;

        r->port = ntohs(in->sin_port);
        memcpy(r->addr, &in->sin_addr, 4);
        r->any_addr = in->sin_addr.s_addr == htonl(INADDR_ANY);
    } else if (ss.ss_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;

        r->port = ntohs(in6->sin6_port);
        memcpy(r->addr, &in6->sin6_addr, 16);
        r->any_addr = IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr);
    } else {
        return;
    }
    if (r->port == 0)
        return;
    r->family = ss.ss_family;
    r->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    r->on = true;
}

void ofi_reap_tick(struct cw_na_class *cls, uint64_t now)
{
    struct ofi_reaper *r = &cls->reap;
    uint64_t *cur = NULL;
    size_t ncur = 0, ndue = 0;
    unsigned reset = 0;

    if (!r->on || now < r->next_ns)
        return;
    r->next_ns = now + cls->reap_ns;
    if (!ofi_reap_list(r, &cur, &ncur)) {
        OFI_WARN_RL(cls,
                    "cannot list this process's sockets (sock_diag: %s): "
                    "connections closed before their handshake are not "
                    "reaped",
                    strerror(errno));
        free(cur);
        cur = NULL;
        ncur = 0;
    }
    /* Those named last time too, in place (still sorted). */
    for (size_t i = 0; i < r->nseen; i++)
        if (ofi_ino_in(cur, ncur, r->seen[i]))
            r->seen[ndue++] = r->seen[i];
    if (ndue > 0)
        reset = ofi_reap_fds(r, r->seen, ndue);
    free(r->seen);
    r->seen = cur;
    r->nseen = ncur;
    if (r->reserve_fd < 0)
        r->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    /* Look again soon while there are any: each one the provider keeps
     * costs a system call at every progress call until it goes. */
    if (r->nseen > 0)
        r->next_ns = now + cls->reap_ns / 10;
    if (reset > 0) {
        r->reaped += reset;
        OFI_WARN_RL(cls,
                    "reset %u connection(s) to port %u closed by their peer "
                    "before any request (%llu so far)",
                    reset, r->port, (unsigned long long)r->reaped);
    }
}

void ofi_reap_fini(struct cw_na_class *cls)
{
    free(cls->reap.seen);
    cls->reap.seen = NULL;
    cls->reap.nseen = 0;
    if (cls->reap.reserve_fd >= 0)
        close(cls->reap.reserve_fd);
    cls->reap.reserve_fd = -1;
}
