/*
 * na-shm: peers and addresses.  A peer is attached by connecting to its
 * abstract socket (proof that it is alive and first contact), mapping its
 * segment, and sending HELLO; its REPLY brings its eventfd (SCM_RIGHTS).
 * The connections stay open for the life of the instance: EOF on either
 * one means that endpoint is gone.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "shm.h"

#define SHM_ADDR_MAGIC 0x43575341u /* "CWSA" */
#define SHM_ADDR_HDR   16u

void shm_peer_ref(struct shm_peer *peer)
{
    nau_ptable_ref(&peer->inode);
}

void shm_fdref_close(struct cw_na_class *cls, struct shm_fdref *ref)
{
    if (ref->fd < 0)
        return;
    epoll_ctl(cls->epfd, EPOLL_CTL_DEL, ref->fd, NULL);
    close(ref->fd);
    ref->fd = -1;
}

static void shm_accepted_close(struct cw_na_class *cls, struct shm_fdref *ref)
{
    nau_list_del(&ref->link);
    cls->naccepted--;
    epoll_ctl(cls->epfd, EPOLL_CTL_DEL, ref->fd, NULL);
    close(ref->fd);
    free(ref);
}

/* Drop everything that ties us to the peer's process. */
static void shm_peer_detach(struct shm_peer *peer)
{
    struct cw_na_class *cls = peer->cls;
    shm_fdref_close(cls, &peer->out);
    shm_fdref_close(cls, &peer->in);
    if (peer->efd >= 0) {
        close(peer->efd);
        peer->efd = -1;
    }
    if (peer->seg && !peer->self)
        munmap(peer->seg, peer->seg_size);
    peer->seg = NULL;
}

static void shm_peer_free(struct shm_peer *peer)
{
    shm_peer_unindex(peer->cls, peer);
    nau_list_del(&peer->link);
    shm_peer_detach(peer);
    free(peer);
}

void shm_peer_unref(struct shm_peer *peer)
{
    if (!peer)
        return;
    /* Dead peers still in the table are swept by shm_sock_poll, never
     * freed here: an epoll batch may still point into them. */
    if (nau_ptable_unref(&peer->inode))
        shm_peer_free(peer);
}

void shm_peer_destroy_all(struct cw_na_class *cls)
{
    while (!nau_list_empty(&cls->accepted))
        shm_accepted_close(
            cls, nau_container_of(cls->accepted.next, struct shm_fdref, link));
    while (!nau_list_empty(&cls->peers)) {
        struct shm_peer *p =
            nau_container_of(cls->peers.next, struct shm_peer, link);
        shm_peer_free(p);
    }
    nau_ptable_fini(&cls->index);
    cls->self = NULL;
}

/* A live record of @p name; one known only from ring slots (whose name
 * anyone can claim) only if there is no other. */
static struct shm_peer *shm_peer_find_name(struct cw_na_class *cls,
                                           const char *name)
{
    struct shm_peer *slot_only = NULL;
    for (struct nau_list *l = cls->peers.next; l != &cls->peers; l = l->next) {
        struct shm_peer *p = nau_container_of(l, struct shm_peer, link);
        if (p->state == SHM_PEER_DEAD || strcmp(p->name, name) != 0)
            continue;
        if (!shm_peer_slot_only(p))
            return p;
        if (!slot_only)
            slot_only = p;
    }
    return slot_only;
}

/* The live record of @p name with id @p uid that is not indexed (its id
 * is held under another name), made by an earlier shm_peer_get: reused, so
 * that the same address resolved again does not add a record each time. */
static struct shm_peer *shm_peer_find_held(struct cw_na_class *cls,
                                           const char *name, uint64_t uid)
{
    for (struct nau_list *l = cls->peers.next; l != &cls->peers; l = l->next) {
        struct shm_peer *p = nau_container_of(l, struct shm_peer, link);
        if (p->uid == uid && !shm_peer_indexed(p) &&
            p->state != SHM_PEER_DEAD && strcmp(p->name, name) == 0)
            return p;
    }
    return NULL;
}

cw_status_t shm_peer_get(struct cw_na_class *cls, const char *name,
                         uint64_t uid, struct shm_peer **peer_p)
{
    struct shm_peer *p =
        uid ? shm_peer_find_uid(cls, uid) : shm_peer_find_name(cls, name);
    /* The id is held under another name: the address is not that record
     * (sends to it must go to @p name).  The new record is indexed when
     * attaching it proves that @p name listens with this id. */
    bool held = p && strcmp(p->name, name) != 0;
    if (held)
        p = shm_peer_find_held(cls, name, uid);
    if (!p) {
        p = calloc(1, sizeof(*p));
        if (!p)
            return CW_NOMEM;
        p->cls = cls;
        p->inode.refs = 1; /* the table's */
        p->uid = uid;
        p->efd = -1;
        p->out =
            (struct shm_fdref){.kind = SHM_FD_PEER_OUT, .fd = -1, .peer = p};
        p->in = (struct shm_fdref){.kind = SHM_FD_PEER_IN, .fd = -1, .peer = p};
        snprintf(p->name, sizeof(p->name), "%s", name);
        nau_list_init(&p->backlog);
        if (!held)
            shm_peer_index(cls, p);
        nau_list_add_tail(&cls->peers, &p->link);
    }
    shm_peer_ref(p);
    *peer_p = p;
    return CW_OK;
}

static cw_status_t shm_sock_send(int fd, enum shm_sock_kind kind,
                                 const struct cw_na_class *cls, int pass_fd)
{
    struct shm_sock_msg m = {
        .magic = SHM_SEG_MAGIC,
        .version = SHM_VERSION,
        .kind = (uint16_t)kind,
        .pid = (uint32_t)getpid(),
        .name_len = (uint32_t)strlen(cls->name),
        .uid = cls->uid,
    };
    memcpy(m.name, cls->name, m.name_len + 1);
    struct iovec iov = {.iov_base = &m, .iov_len = sizeof(m)};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (pass_fd >= 0) {
        memset(&u, 0, sizeof(u));
        mh.msg_control = u.buf;
        mh.msg_controllen = sizeof(u.buf);
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
    }
    if (sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof(m)) {
        int err = errno;
        /* EPIPE/ECONNRESET: the other side is gone, which the caller
         * handles; anything else is worth an error. */
        CW_NA_LOG(cls->host,
                  err == EPIPE || err == ECONNRESET ? CW_LOG_DEBUG
                                                    : CW_LOG_ERROR,
                  SHM_SUBSYS, "sendmsg(handshake) failed: %s", strerror(err));
        return shm_errno_status(err);
    }
    return CW_OK;
}

/* Open and check the segment of the peer whose listener is process @p pid
 * (the kernel's word); on success it is mapped read-write. */
static cw_status_t shm_seg_map(struct cw_na_class *cls, struct shm_peer *peer,
                               pid_t pid)
{
    char path[SHM_PATH_MAX];
    shm_seg_path(cls->prefix, peer->name, path);
    int fd = shm_open(path, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) {
        int err = errno;
        SHM_ERR_RL(cls, "shm://%s: shm_open(%s) failed: %s", peer->name, path,
                   strerror(err));
        return err == ENOENT ? CW_UNREACHABLE : shm_errno_status(err);
    }
    struct stat st;
    cw_status_t ret = CW_UNREACHABLE;
    void *p = MAP_FAILED;
    if (fstat(fd, &st) < 0 || (size_t)st.st_size < sizeof(struct shm_seg_hdr))
        goto err_bad;
    p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
             0);
    if (p == MAP_FAILED) {
        int err = errno;
        SHM_ERR_RL(cls, "shm://%s: mmap(%s) failed: %s", peer->name, path,
                   strerror(err));
        close(fd);
        return shm_errno_status(err);
    }
    /* The owner may rewrite its header at any time: check one copy of it
     * (taken after the magic, which is stored last) and keep that. */
    struct shm_seg_hdr *h = p, hdr;
    if (atomic_load_explicit(&h->magic, memory_order_acquire) != SHM_SEG_MAGIC)
        goto err_bad;
    memcpy(&hdr, h, sizeof(hdr));
    if (!shm_seg_hdr_valid(&hdr, (size_t)st.st_size) ||
        strncmp(hdr.name, peer->name, SHM_NAME_MAX) != 0)
        goto err_bad;
    if (!shm_pid_alive((pid_t)hdr.owner_pid, hdr.owner_start)) {
        SHM_ERR_RL(cls, "shm://%s: segment %s belongs to dead pid %u",
                   peer->name, path, hdr.owner_pid);
        goto err_unmap;
    }
    /* The pid of a memory handle is checked against this one, so it must
     * not be the peer's say: a header naming another process would steer
     * our copies into it. */
    if (hdr.owner_pid != (uint32_t)pid) {
        SHM_ERR_RL(cls,
                   "shm://%s: segment %s names pid %u, the endpoint is "
                   "pid %d",
                   peer->name, path, hdr.owner_pid, (int)pid);
        goto err_unmap;
    }
    if (peer->uid && peer->uid != hdr.uid && shm_peer_slot_only(peer)) {
        /* Its id was only the word of whoever wrote a slot in our ring
         * under this name; forget every such false claim at once. */
        shm_peer_forget_name_claims(cls, peer->name, hdr.uid);
        ret = CW_DISCONNECTED;
        goto err_unmap;
    }
    if (peer->uid && peer->uid != hdr.uid) {
        SHM_ERR_RL(cls,
                   "shm://%s: the endpoint was restarted since this address "
                   "was obtained",
                   peer->name);
        ret = CW_DISCONNECTED;
        goto err_unmap;
    }
    close(fd);
    peer->seg = h;
    peer->seg_size = (size_t)st.st_size;
    peer->uid = hdr.uid;
    peer->pid = pid;
    peer->nslots = hdr.nslots;
    return CW_OK;

err_bad:
    SHM_ERR_RL(cls,
               "shm://%s: %s is not a valid Causeway segment (or not ready)",
               peer->name, path);
err_unmap:
    if (p != MAP_FAILED)
        munmap(p, (size_t)st.st_size);
    close(fd);
    return ret;
}

cw_status_t shm_peer_attach(struct cw_na_class *cls, struct shm_peer *peer)
{
    if (peer->state == SHM_PEER_ATTACHED)
        return CW_OK;
    if (peer->state == SHM_PEER_DEAD)
        return CW_DISCONNECTED;

    struct sockaddr_un sun;
    socklen_t slen;
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        int err = errno;
        SHM_ERR_RL(cls, "shm://%s: socket() failed: %s", peer->name,
                   strerror(err));
        return shm_errno_status(err);
    }
    shm_abstract_name(cls->prefix, peer->name, &sun, &slen);
    if (connect(fd, (struct sockaddr *)&sun, slen) < 0) {
        int err = errno;
        /* Nobody holds the name: a segment left under it is stale. */
        bool stale = err == ECONNREFUSED &&
                     shm_stale_check(cls->host, cls->prefix, peer->name);
        SHM_ERR_RL(cls, "shm://%s: cannot connect to the endpoint: %s%s",
                   peer->name, strerror(err),
                   stale ? " (removed the stale segment of its dead owner)"
                         : "");
        close(fd);
        return err == EAGAIN ? CW_AGAIN : CW_UNREACHABLE;
    }
    struct ucred cr;
    socklen_t crlen = sizeof(cr);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) < 0) {
        int err = errno;
        SHM_ERR_RL(cls, "shm://%s: getsockopt(SO_PEERCRED) failed: %s",
                   peer->name, strerror(err));
        close(fd);
        return shm_errno_status(err);
    }
    cw_status_t st = shm_seg_map(cls, peer, cr.pid);
    if (st != CW_OK)
        goto err_close;
    /* The endpoint listening under the name has this id: a record known
     * only from ring slots that gives the id another name was forged.
     * Any other holder stays (a verified one is never displaced), and
     * this record is then not indexed (the holder gets its slots). */
    struct shm_peer *holder = shm_peer_find_uid(cls, peer->uid);
    if (holder && holder != peer && strcmp(holder->name, peer->name) != 0) {
        if (shm_peer_slot_only(holder)) {
            shm_peer_forget_forged(cls, holder,
                                   "another name listens with "
                                   "its id");
            holder = NULL;
        } else {
            SHM_WARN_RL(cls, "shm://%s: its id is also claimed by shm://%s",
                        peer->name, holder->name);
        }
    }
    if (!holder) /* its id may be new */
        shm_peer_index(cls, peer);
    st = shm_sock_send(fd, SHM_SOCK_HELLO, cls, -1);
    if (st != CW_OK)
        goto err_unmap;
    peer->out.fd = fd;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &peer->out};
    if (epoll_ctl(cls->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        int err = errno;
        SHM_ERR(cls, "epoll_ctl failed: %s", strerror(err));
        peer->out.fd = -1;
        st = shm_errno_status(err);
        goto err_unmap;
    }
    peer->state = SHM_PEER_ATTACHED;
    shm_peer_connected(cls, peer);
    return CW_OK;

err_unmap:
    munmap(peer->seg, peer->seg_size);
    peer->seg = NULL;
err_close:
    close(fd);
    if (st == CW_DISCONNECTED && peer->state != SHM_PEER_DEAD) {
        /* Another incarnation holds the name. */
        peer->state = SHM_PEER_DEAD;
        shm_peer_unindex(cls, peer);
        cls->ndead++;
    }
    return st;
}

void shm_peer_wake(struct shm_peer *peer)
{
    if (peer->efd >= 0) {
        uint64_t one = 1;
        ssize_t n = write(peer->efd, &one, sizeof(one));
        (void)n; /* EAGAIN: the counter is saturated, a wake is pending */
    } else if (peer->out.fd >= 0) {
        /* REPLY not read yet: the socket itself wakes the peer. */
        struct shm_sock_msg m = {.magic = SHM_SEG_MAGIC,
                                 .version = SHM_VERSION,
                                 .kind = SHM_SOCK_WAKE};
        ssize_t n =
            send(peer->out.fd, &m, sizeof(m), MSG_DONTWAIT | MSG_NOSIGNAL);
        (void)n;
    }
}

/* Senders blocked on our full ring: each is connected to us, and its end
 * of that connection is in its wait set. */
void shm_wake_senders(struct cw_na_class *cls)
{
    atomic_store_explicit(&cls->seg->senders_waiting, 0, memory_order_relaxed);
    struct shm_sock_msg m = {
        .magic = SHM_SEG_MAGIC, .version = SHM_VERSION, .kind = SHM_SOCK_WAKE};
    for (struct nau_list *l = cls->peers.next; l != &cls->peers; l = l->next) {
        struct shm_peer *p = nau_container_of(l, struct shm_peer, link);
        if (p->in.fd >= 0) {
            ssize_t n =
                send(p->in.fd, &m, sizeof(m), MSG_DONTWAIT | MSG_NOSIGNAL);
            (void)n; /* EAGAIN: wake-ups are already queued there */
        }
    }
}

/* Read one socket message; returns 1 on a message, 0 on EOF/error (peer
 * gone), -1 if nothing to read.  A passed fd lands in *fd_p (or -1). */
static int shm_sock_recv(int fd, struct shm_sock_msg *m, int *fd_p)
{
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct iovec iov = {.iov_base = m, .iov_len = sizeof(*m)};
    struct msghdr mh = {.msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = u.buf,
                        .msg_controllen = sizeof(u.buf)};
    *fd_p = -1;
    ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0)
        return (errno == EAGAIN || errno == EINTR) ? -1 : 0;
    if (n == 0)
        return 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
            c->cmsg_len >= CMSG_LEN(sizeof(int))) {
            size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < nfd; i++) {
                int got;
                memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                if (*fd_p < 0)
                    *fd_p = got;
                else
                    close(got);
            }
        }
    }
    if ((size_t)n != sizeof(*m) || m->magic != SHM_SEG_MAGIC ||
        m->version != SHM_VERSION || m->name_len >= SHM_NAME_MAX ||
        m->name[m->name_len] != '\0') {
        m->kind = 0; /* malformed: caller drops it */
    }
    return 1;
}

void shm_listen_accept(struct cw_na_class *cls)
{
    for (int i = 0; i < 64; i++) {
        int fd =
            accept4(cls->listen.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
                SHM_WARN_RL(cls, "accept4 failed: %s", strerror(errno));
            return;
        }
        if (cls->naccepted >= SHM_ACCEPTED_MAX) {
            /* Refuse the newcomer: the pending ones may be in the epoll
             * batch being handled, so they are not closed here. */
            SHM_WARN_RL(cls,
                        "refusing a connection: %u connected without "
                        "HELLO",
                        cls->naccepted);
            close(fd);
            continue;
        }
        struct shm_fdref *ref = calloc(1, sizeof(*ref));
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = ref};
        if (!ref || epoll_ctl(cls->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
            SHM_WARN_RL(cls, "dropping a connection: out of resources");
            free(ref);
            close(fd);
            continue;
        }
        ref->kind = SHM_FD_ACCEPTED;
        ref->fd = fd;
        nau_list_add_tail(&cls->accepted, &ref->link);
        cls->naccepted++;
        /* The HELLO is normally there already. */
        shm_sock_handle(cls, ref);
    }
}

void shm_hello_read_pending(struct cw_na_class *cls)
{
    shm_listen_accept(cls);
    for (struct nau_list *l = cls->accepted.next; l != &cls->accepted;) {
        struct shm_fdref *ref = nau_container_of(l, struct shm_fdref, link);
        l = l->next; /* ref leaves the list once its HELLO is read */
        shm_sock_handle(cls, ref);
    }
}

/* Ids and names are not secret (they are in every address and ring
 * slot): a HELLO speaks for an endpoint only if it comes from the process
 * listening under the name it claims, and names the peer its id is known
 * by, unless that peer is known only from ring slots (anyone can write
 * one; the verified HELLO then wins).  Otherwise anyone could replace a
 * peer's connection with its own and, by closing it, make the peer look
 * dead.  Returns the pid the HELLO must come from, 0 if nobody listens
 * under the name (the endpoint is gone), -1 if no pid will do. */
static pid_t shm_hello_pid(struct cw_na_class *cls,
                           const struct shm_sock_msg *m)
{
    struct shm_peer *known = shm_peer_find_uid(cls, m->uid);

    if (known && strcmp(known->name, m->name) != 0) {
        if (!shm_peer_slot_only(known))
            return -1;
        known = NULL;
    }
    if (strcmp(m->name, cls->name) == 0)
        return -1;
    if (known && known->pid)
        return known->pid;
    return shm_listener_pid(cls->prefix, m->name);
}

/* HELLO on an accepted connection: bind it to its peer and reply. */
static void shm_accepted_hello(struct cw_na_class *cls, struct shm_fdref *ref,
                               const struct shm_sock_msg *m)
{
    struct shm_peer *peer = NULL;
    struct ucred cr;
    socklen_t crlen = sizeof(cr);
    nau_list_del(&ref->link);
    cls->naccepted--;
    /* The kernel says who connected: only our user (or root, who can map
     * our 0600 segment anyway) may talk to us. */
    if (getsockopt(ref->fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) < 0 ||
        (cr.uid != geteuid() && cr.uid != 0)) {
        SHM_WARN_RL(cls,
                    "refusing a connection from uid %d pid %d (not our "
                    "user)",
                    (int)cr.uid, (int)cr.pid);
        cls->dropped++;
        goto err_close;
    }
    if (m->kind != SHM_SOCK_HELLO || m->uid == 0 ||
        !shm_name_valid(m->name, m->name_len)) {
        cls->dropped++;
        goto err_close;
    }
    pid_t want = shm_hello_pid(cls, m);
    if (want != 0 && want != cr.pid) {
        SHM_WARN_RL(cls,
                    "dropped a HELLO from pid %d claiming to be "
                    "shm://%s (pid %d)",
                    (int)cr.pid, m->name, (int)want);
        cls->dropped++;
        goto err_close;
    }
    struct shm_peer *known = shm_peer_find_uid(cls, m->uid);
    if (known && strcmp(known->name, m->name) != 0) {
        /* Known only from ring slots (shm_hello_pid): forged, if the HELLO
         * is verified; if nobody listens under its name, neither is. */
        if (want == 0) {
            cls->dropped++;
            goto err_close;
        }
        shm_peer_forget_forged(cls, known, "a verified endpoint has its id");
    }
    if (shm_peer_get(cls, m->name, m->uid, &peer) != CW_OK)
        goto err_close;
    if (peer->self || peer->state == SHM_PEER_DEAD)
        goto err_unref;
    if (want == 0) {
        /* Nobody listens under its name: it said HELLO and left, and
         * what it sent (or claimed) in our ring is all it will send. */
        shm_peer_failed(cls, peer, CW_DISCONNECTED);
        goto err_unref;
    }
    if (peer->in.fd >= 0)
        shm_fdref_close(cls, &peer->in);
    cw_status_t st = shm_sock_send(ref->fd, SHM_SOCK_REPLY, cls, cls->efd);
    if (st != CW_OK) {
        /* It connected, said HELLO and left: its endpoint is gone, and
         * what it sent (or claimed) in our ring is all it will send. */
        if (st == CW_DISCONNECTED)
            shm_peer_failed(cls, peer, CW_DISCONNECTED);
        goto err_unref;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &peer->in};
    if (epoll_ctl(cls->epfd, EPOLL_CTL_MOD, ref->fd, &ev) < 0)
        goto err_unref;
    peer->in.fd = ref->fd;
    if (!peer->pid)
        peer->pid = cr.pid;
    shm_peer_connected(cls, peer);
    shm_peer_unref(peer);
    free(ref);
    return;

err_unref:
    shm_peer_unref(peer);
err_close:
    epoll_ctl(cls->epfd, EPOLL_CTL_DEL, ref->fd, NULL);
    close(ref->fd);
    free(ref);
}

void shm_sock_handle(struct cw_na_class *cls, struct shm_fdref *ref)
{
    for (int i = 0; i < 16 && ref->fd >= 0; i++) {
        struct shm_sock_msg m;
        int pfd;
        int r = shm_sock_recv(ref->fd, &m, &pfd);
        if (r < 0)
            return;
        if (ref->kind == SHM_FD_ACCEPTED) {
            if (pfd >= 0)
                close(pfd);
            if (r == 0) {
                shm_accepted_close(cls, ref);
            } else {
                shm_accepted_hello(cls, ref, &m);
            }
            return; /* ref is gone or now belongs to a peer */
        }
        struct shm_peer *peer = ref->peer;
        if (r == 0) {
            SHM_DBG(cls, "shm://%s disconnected", peer->name);
            if (pfd >= 0)
                close(pfd);
            shm_peer_failed(cls, peer, CW_DISCONNECTED);
            return;
        }
        if (m.kind == SHM_SOCK_REPLY && ref->kind == SHM_FD_PEER_OUT &&
            pfd >= 0 && m.uid == peer->uid) {
            if (peer->efd >= 0)
                close(peer->efd);
            peer->efd = pfd;
            continue;
        }
        if (pfd >= 0)
            close(pfd);
        if (m.kind == SHM_SOCK_REPLY && m.uid != peer->uid) {
            SHM_ERR_RL(cls, "shm://%s answered as another incarnation",
                       peer->name);
            shm_peer_failed(cls, peer, CW_DISCONNECTED);
            return;
        }
        if (m.kind != SHM_SOCK_WAKE)
            cls->dropped++;
    }
}

/* ---- address operations ---- */

cw_status_t shm_addr_lookup(cw_na_class_t *cls, const char *location,
                            cw_na_addr_t **addr_p)
{
    if (!location || !shm_name_valid(location, strlen(location))) {
        SHM_ERR(cls, "invalid shm address \"%s\"", location ? location : "");
        return CW_INVALID_ARG;
    }
    if (strcmp(location, cls->name) == 0)
        return shm_addr_self(cls, addr_p);
    shm_sock_poll(cls); /* notice peers that went away */
    struct shm_peer *peer;
    cw_status_t st = shm_peer_get(cls, location, 0, &peer);
    if (st != CW_OK)
        return st;
    bool slot_only = shm_peer_slot_only(peer);
    st = shm_peer_attach(cls, peer);
    if (st == CW_DISCONNECTED && slot_only) {
        /* Its id was a slot writer's claim, now forgotten with all other
         * false claims to the name: the next record is the endpoint's. */
        shm_peer_unref(peer);
        st = shm_peer_get(cls, location, 0, &peer);
        if (st != CW_OK)
            return st;
        st = shm_peer_attach(cls, peer);
    }
    if (st != CW_OK) {
        shm_peer_unref(peer);
        return st;
    }
    *addr_p = shm_addr(peer);
    return CW_OK;
}

cw_status_t shm_addr_self(cw_na_class_t *cls, cw_na_addr_t **addr_p)
{
    shm_peer_ref(cls->self);
    *addr_p = shm_addr(cls->self);
    return CW_OK;
}

cw_status_t shm_addr_dup(cw_na_class_t *cls, cw_na_addr_t *addr,
                         cw_na_addr_t **addr_p)
{
    (void)cls;
    shm_peer_ref(shm_peer_of(addr));
    *addr_p = addr;
    return CW_OK;
}

void shm_addr_free(cw_na_class_t *cls, cw_na_addr_t *addr)
{
    (void)cls;
    if (addr)
        shm_peer_unref(shm_peer_of(addr));
}

bool shm_addr_cmp(cw_na_class_t *cls, cw_na_addr_t *a, cw_na_addr_t *b)
{
    (void)cls;
    struct shm_peer *pa = shm_peer_of(a), *pb = shm_peer_of(b);
    if (pa == pb)
        return true;
    if (!pa || !pb)
        return false;
    if (pa->uid && pb->uid)
        return pa->uid == pb->uid;
    return strcmp(pa->name, pb->name) == 0;
}

cw_status_t shm_addr_to_string(cw_na_class_t *cls, cw_na_addr_t *addr,
                               char *buf, size_t *len_p)
{
    (void)cls;
    const struct shm_peer *p = shm_peer_of(addr);
    size_t need = strlen(p->name) + 1;
    if (!buf || *len_p < need) {
        *len_p = need;
        return CW_OVERFLOW;
    }
    memcpy(buf, p->name, need);
    return CW_OK;
}

size_t shm_addr_serialize_size(cw_na_class_t *cls, cw_na_addr_t *addr)
{
    (void)cls;
    return SHM_ADDR_HDR + strlen(shm_peer_of(addr)->name);
}

cw_status_t shm_addr_serialize(cw_na_class_t *cls, void *buf, size_t size,
                               cw_na_addr_t *addr)
{
    const struct shm_peer *p = shm_peer_of(addr);
    size_t nlen = strlen(p->name);
    if (!buf || size < shm_addr_serialize_size(cls, addr))
        return CW_OVERFLOW;
    unsigned char *b = buf;
    uint32_t magic = SHM_ADDR_MAGIC;
    memcpy(b, &magic, 4);
    b[4] = SHM_VERSION;
    b[5] = (unsigned char)nlen;
    b[6] = b[7] = 0;
    memcpy(b + 8, &p->uid, 8);
    memcpy(b + SHM_ADDR_HDR, p->name, nlen);
    return CW_OK;
}

cw_status_t shm_addr_deserialize(cw_na_class_t *cls, const void *buf,
                                 size_t size, cw_na_addr_t **addr_p)
{
    const unsigned char *b = buf;
    uint32_t magic;
    uint64_t uid;
    char name[SHM_NAME_MAX];
    if (!buf || size < SHM_ADDR_HDR)
        return CW_PROTOCOL;
    memcpy(&magic, b, 4);
    memcpy(&uid, b + 8, 8);
    size_t nlen = b[5];
    if (magic != SHM_ADDR_MAGIC || b[4] != SHM_VERSION || b[6] || b[7] ||
        size != SHM_ADDR_HDR + nlen || nlen >= SHM_NAME_MAX)
        return CW_PROTOCOL;
    memcpy(name, b + SHM_ADDR_HDR, nlen);
    name[nlen] = '\0';
    if (!shm_name_valid(name, nlen))
        return CW_PROTOCOL;
    if (uid == cls->uid || (uid == 0 && strcmp(name, cls->name) == 0))
        return shm_addr_self(cls, addr_p);
    struct shm_peer *peer;
    cw_status_t st = shm_peer_get(cls, name, uid, &peer);
    if (st != CW_OK)
        return st;
    *addr_p = shm_addr(peer);
    return CW_OK;
}
