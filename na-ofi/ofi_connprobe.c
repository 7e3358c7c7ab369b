/*
 * Telling a peer that has gone from one that is slow (ofi+tcp).
 *
 * When a tcp;ofi_rxm peer's process dies, rxm closes its connection and
 * connects again for the next send.  While those attempts are refused it
 * answers every post with -FI_EAGAIN, the same answer it gives while a
 * live peer is still being connected to: the keepalive ping is "refused"
 * and the peer is declared dead only after peer_timeout_ms (5 s by
 * default; docs/reliability.md found the callers of a killed gateway or
 * target waiting that long).
 *
 * The kernel can tell the two apart.  A peer we have heard from, probed
 * and refused, gets one TCP connect of our own to the address its
 * endpoint listens on: ECONNREFUSED means nothing listens there any more,
 * so the process we talked to has gone and its operations with us are
 * lost.  A connect that succeeds means something listens (the peer is
 * busy, or restarted at the same address: the ping decides, as before);
 * the probe socket is then reset (SO_LINGER 0), so the peer's provider
 * sees ECONNRESET at its first read and closes its side (a plain close
 * would leave it a half-closed socket it never frees; ofi_reap.c).  A
 * connect that neither succeeds nor fails (a host that is down) leaves
 * the decision to peer_timeout_ms.
 *
 * One probe per ping: cprobe_ping_ns remembers which.  The socket of a
 * connect in progress is kept on the peer (cprobe_fd1) and looked at by
 * later ticks without blocking.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ofi.h"

/* Close @p fd with a reset rather than a FIN. */
static void ofi_cprobe_reset(int fd)
{
    struct linger lg = {.l_onoff = 1, .l_linger = 0};

    (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    close(fd);
}

void ofi_cprobe_close(struct cw_na_addr *p)
{
    if (p->cprobe_fd1 == 0)
        return;
    ofi_cprobe_reset(p->cprobe_fd1 - 1);
    p->cprobe_fd1 = 0;
}

/* How a finished connect ended (@p err: 0 or its errno). */
static enum ofi_cprobe ofi_cprobe_outcome(int fd, int err)
{
    if (err == 0) {
        ofi_cprobe_reset(fd);
        return OFI_CPROBE_LISTENING;
    }
    close(fd);
    return err == ECONNREFUSED ? OFI_CPROBE_REFUSED : OFI_CPROBE_WAIT;
}

enum ofi_cprobe ofi_cprobe_run(struct cw_na_addr *p)
{
    struct sockaddr_storage ss; /* raw is not aligned for a sockaddr */
    socklen_t slen = sizeof(int);
    struct pollfd pfd;
    int fd, err = 0;

    if (p->cprobe_fd1 == 0) {
        if (p->cprobe_ping_ns == p->ping_sent_ns)
            return OFI_CPROBE_WAIT; /* this probe had its connect */
        p->cprobe_ping_ns = p->ping_sent_ns;
        if (p->len > sizeof(ss))
            return OFI_CPROBE_WAIT;
        memset(&ss, 0, sizeof(ss));
        memcpy(&ss, p->raw, p->len);
        if (!(ss.ss_family == AF_INET &&
              p->len >= sizeof(struct sockaddr_in)) &&
            !(ss.ss_family == AF_INET6 &&
              p->len >= sizeof(struct sockaddr_in6)))
            return OFI_CPROBE_WAIT;
        fd =
            socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return OFI_CPROBE_WAIT;
        if (connect(fd, (struct sockaddr *)&ss,
                    ss.ss_family == AF_INET ? sizeof(struct sockaddr_in)
                                            : sizeof(struct sockaddr_in6)) == 0)
            return ofi_cprobe_outcome(fd, 0);
        if (errno == EINPROGRESS) {
            p->cprobe_fd1 = fd + 1;
            return OFI_CPROBE_WAIT;
        }
        return ofi_cprobe_outcome(fd, errno == 0 ? EIO : errno);
    }
    fd = p->cprobe_fd1 - 1;
    pfd.fd = fd;
    pfd.events = POLLOUT;
    pfd.revents = 0;
    if (poll(&pfd, 1, 0) <= 0)
        return OFI_CPROBE_WAIT;
    p->cprobe_fd1 = 0;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &slen) != 0)
        err = errno == 0 ? EIO : errno;
    return ofi_cprobe_outcome(fd, err);
}
