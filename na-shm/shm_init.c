/*
 * na-shm: instance creation and teardown, segment naming and stale segment
 * removal, the errno translation, and the exported plugin entry.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "nau_param.h"
#include "shm.h"

/* Auto-picked names: p<pid>-<n>; shared by all instances of the process. */
static _Atomic unsigned shm_auto_counter;

cw_status_t shm_errno_status(int err)
{
    switch (err) {
    case 0:
        return CW_OK;
    case EINVAL:
        return CW_INVALID_ARG;
    case ENOMEM:
    case ENOSPC:
    case EMFILE:
    case ENFILE:
    case ENOBUFS:
        return CW_NOMEM;
    case ENOENT:
        return CW_NOENT;
    case EEXIST:
        return CW_EXIST;
    case EADDRINUSE:
        return CW_ADDR_IN_USE;
    case EAGAIN:
        return CW_AGAIN;
    case EPERM:
    case EACCES:
        return CW_PERMISSION;
    case ESRCH:
    case ECONNREFUSED:
        return CW_UNREACHABLE;
    case ECONNRESET:
    case EPIPE:
    case ENOTCONN:
        return CW_DISCONNECTED;
    case EFAULT:
        return CW_FAULT;
    case ETIMEDOUT:
        return CW_TIMEOUT;
    case ENAMETOOLONG:
    case ERANGE:
        return CW_RANGE;
    case ENOSYS:
    case EOPNOTSUPP:
        return CW_UNSUPPORTED;
    default:
        return CW_IO;
    }
}

/* Fields of /proc/PID/stat: state (3), flags (9) and starttime (22).
 * False if the process is gone or the file cannot be parsed. */
static bool shm_pid_stat(pid_t pid, char *state_p, unsigned long *flags_p,
                         uint64_t *start_p)
{
    char path[64];
    char buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    /* The command name may contain spaces and ')'; fields resume after the
     * last ')', with field 3 first. */
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ' || p[2] == '\0')
        return false;
    *state_p = p[2];
    p++;
    for (int field = 3; field < 22 && p; field++) {
        p = strchr(p + 1, ' ');
        if (p && field + 1 == 9)
            *flags_p = strtoul(p + 1, NULL, 10);
    }
    if (!p)
        return false;
    *start_p = strtoull(p + 1, NULL, 10);
    return true;
}

uint64_t shm_pid_start(pid_t pid)
{
    char state;
    unsigned long flags = 0;
    uint64_t start;

    return shm_pid_stat(pid, &state, &flags, &start) ? start : 0;
}

/* The kernel's PF_EXITING task flag (include/linux/sched.h). */
#define SHM_PF_EXITING 0x00000004ul

bool shm_pid_exiting(pid_t pid)
{
    char state;
    unsigned long flags = 0;
    uint64_t start;

    if (!shm_pid_stat(pid, &state, &flags, &start))
        return true;
    return state == 'Z' || state == 'X' || (flags & SHM_PF_EXITING) != 0;
}

bool shm_pid_alive(pid_t pid, uint64_t start)
{
    if (pid <= 0)
        return false;
    if (kill(pid, 0) < 0 && errno == ESRCH)
        return false;
    if (start != 0) {
        uint64_t now = shm_pid_start(pid);
        if (now != 0 && now != start)
            return false; /* the pid was reused */
    }
    return true;
}

bool shm_name_valid(const char *name, size_t len)
{
    if (len == 0 || len >= SHM_NAME_MAX || name[0] == '.')
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                  (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
        if (!ok)
            return false;
    }
    return true;
}

size_t shm_seg_size(uint32_t nslots)
{
    return sizeof(struct shm_seg_hdr) + (size_t)nslots * SHM_SLOT_SIZE;
}

bool shm_seg_hdr_valid(const struct shm_seg_hdr *h, size_t size)
{
    if (size < sizeof(*h))
        return false;
    if (atomic_load_explicit(&h->magic, memory_order_acquire) != SHM_SEG_MAGIC)
        return false;
    if (h->version != SHM_VERSION || h->slot_size != SHM_SLOT_SIZE)
        return false;
    if (h->nslots < SHM_MIN_SLOTS || h->nslots > SHM_MAX_SLOTS ||
        (h->nslots & (h->nslots - 1)) != 0)
        return false;
    if (size < shm_seg_size(h->nslots))
        return false;
    return h->name_len > 0 && h->name_len < SHM_NAME_MAX;
}

void shm_abstract_name(const char *prefix, const char *name, void *sun_v,
                       socklen_t *len_p)
{
    struct sockaddr_un *sun = sun_v;
    memset(sun, 0, sizeof(*sun));
    sun->sun_family = AF_UNIX;
    int n = snprintf(sun->sun_path + 1, sizeof(sun->sun_path) - 1, "%s%s",
                     prefix, name);
    *len_p =
        (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

void shm_seg_path(const char *prefix, const char *name, char path[SHM_PATH_MAX])
{
    snprintf(path, SHM_PATH_MAX, "/%s%s", prefix, name);
}

/* The pid of the process listening under @p name, by the kernel; 0 if
 * nobody does, -1 if that cannot be told (its backlog is full). */
pid_t shm_listener_pid(const char *prefix, const char *name)
{
    struct sockaddr_un sun;
    socklen_t slen;
    struct ucred cr;
    socklen_t crlen = sizeof(cr);
    pid_t pid = -1;
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    shm_abstract_name(prefix, name, &sun, &slen);
    if (connect(fd, (struct sockaddr *)&sun, slen) == 0) {
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) == 0)
            pid = cr.pid;
    } else if (errno == ECONNREFUSED) {
        pid = 0;
    }
    close(fd); /* it sees a connection without HELLO go */
    return pid;
}

/* Remove /dev/shm/<prefix><name> if its owner is gone.  Any peer can
 * write the header, so its word is not enough: the segment goes only if
 * nobody listens under the name either (the owner binds the name before
 * it creates the segment and holds it while it lives).  Segments being
 * created (no magic yet) and foreign ones are left alone. */
bool shm_stale_check(const struct cw_na_host *host, const char *prefix,
                     const char *name)
{
    char path[SHM_PATH_MAX];
    shm_seg_path(prefix, name, path);
    int fd = shm_open(path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return false;
    bool removed = false;
    struct shm_seg_hdr h;
    struct stat st1, st2;
    ssize_t n = pread(fd, &h, sizeof(h), 0);
    if (n == (ssize_t)sizeof(h) && fstat(fd, &st1) == 0 &&
        shm_seg_hdr_valid(&h, (size_t)st1.st_size) &&
        !shm_pid_alive((pid_t)h.owner_pid, h.owner_start) &&
        shm_listener_pid(prefix, name) == 0) {
        char devpath[SHM_PATH_MAX + 8];
        snprintf(devpath, sizeof(devpath), "/dev/shm%s", path);
        /* Unlink only if the name still refers to the file we examined. */
        if (stat(devpath, &st2) == 0 && st1.st_ino == st2.st_ino &&
            shm_unlink(path) == 0) {
            removed = true;
            CW_NA_LOG(host, CW_LOG_INFO, SHM_SUBSYS,
                      "removed stale segment %s of dead pid %u", devpath,
                      h.owner_pid);
        }
    }
    close(fd);
    return removed;
}

/* Only the segments of the instance's namespace: another namespace's
 * prefix does not start with "causeway-", nor ours with theirs. */
static void shm_stale_scan(const struct cw_na_host *host, const char *prefix)
{
    DIR *d = opendir("/dev/shm");
    if (!d)
        return;
    struct dirent *e;
    size_t plen = strlen(prefix);
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, plen) != 0)
            continue;
        const char *name = e->d_name + plen;
        if (shm_name_valid(name, strlen(name)))
            shm_stale_check(host, prefix, name);
    }
    closedir(d);
}

static uint64_t shm_new_uid(void)
{
    uint64_t uid = 0;
    if (getrandom(&uid, sizeof(uid), GRND_NONBLOCK) != (ssize_t)sizeof(uid)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uid = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^
              ((uint64_t)ts.tv_sec << 20);
    }
    return uid ? uid : 1;
}

static uint32_t shm_param_slots(const struct cw_na_init_info *info)
{
    const char *v = nau_param(info->params, "slots", "CAUSEWAY_SHM_SLOTS");
    uint64_t n = SHM_DEFAULT_SLOTS;

    if (v && (nau_param_uint(v, SHM_MIN_SLOTS, SHM_MAX_SLOTS, &n) != CW_OK ||
              (n & (n - 1)) != 0))
        return 0;
    return (uint32_t)n;
}

/* The namespace (parameter "namespace", else CAUSEWAY_SHM_NAMESPACE) into
 * cls->prefix; false if it is not 1..SHM_NS_MAX of [A-Za-z0-9_]. */
static bool shm_param_namespace(struct cw_na_class *cls,
                                const struct cw_na_init_info *info)
{
    const char *v =
        nau_param(info->params, "namespace", "CAUSEWAY_SHM_NAMESPACE");
    if (!v || !v[0]) {
        strcpy(cls->prefix, SHM_SEG_PREFIX);
        return true;
    }
    size_t n = strspn(v, "abcdefghijklmnopqrstuvwxyz"
                         "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
    if (v[n] != '\0' || n > SHM_NS_MAX)
        return false;
    snprintf(cls->prefix, sizeof(cls->prefix), "causeway.%s-", v);
    return true;
}

static int shm_epoll_add(struct cw_na_class *cls, struct shm_fdref *ref)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = ref};
    return epoll_ctl(cls->epfd, EPOLL_CTL_ADD, ref->fd, &ev);
}

/* Claim the name: the abstract socket is the lock (it vanishes with its
 * owner), so any segment left under the name afterwards is stale. */
static cw_status_t shm_listen_open(struct cw_na_class *cls)
{
    struct sockaddr_un sun;
    socklen_t slen;
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        int err = errno;
        SHM_ERR(cls, "socket(AF_UNIX) failed: %s", strerror(err));
        return shm_errno_status(err);
    }
    shm_abstract_name(cls->prefix, cls->name, &sun, &slen);
    if (bind(fd, (struct sockaddr *)&sun, slen) < 0 || listen(fd, 128) < 0) {
        int err = errno;
        if (err != EADDRINUSE)
            SHM_ERR(cls, "bind/listen on @%s%s failed: %s", cls->prefix,
                    cls->name, strerror(err));
        close(fd);
        return shm_errno_status(err);
    }
    cls->listen.fd = fd;
    return CW_OK;
}

static cw_status_t shm_seg_create(struct cw_na_class *cls)
{
    char path[SHM_PATH_MAX];
    shm_seg_path(cls->prefix, cls->name, path);
    size_t size = shm_seg_size(cls->nslots);
    int fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST) {
        /* We hold the name's socket, so the owner of this one is gone. */
        SHM_LOG(cls, CW_LOG_INFO, "replacing stale segment /dev/shm%s", path);
        shm_unlink(path);
        fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    }
    if (fd < 0) {
        int err = errno;
        SHM_ERR(cls, "shm_open(%s) failed: %s", path, strerror(err));
        return shm_errno_status(err);
    }
    int err;
    if (ftruncate(fd, (off_t)size) < 0) {
        err = errno;
        SHM_ERR(cls, "ftruncate(%s, %zu) failed: %s", path, size,
                strerror(err));
        goto err_unlink;
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        err = errno;
        SHM_ERR(cls, "mmap(%s, %zu) failed: %s", path, size, strerror(err));
        goto err_unlink;
    }
    struct shm_seg_hdr *h = p;
    struct shm_slot *slots = (struct shm_slot *)(h + 1);
    for (uint32_t i = 0; i < cls->nslots; i++)
        atomic_store_explicit(&slots[i].seq, i, memory_order_relaxed);
    h->version = SHM_VERSION;
    h->owner_pid = (uint32_t)getpid();
    h->owner_start = shm_pid_start(getpid());
    h->nslots = cls->nslots;
    h->uid = cls->uid;
    h->slot_size = SHM_SLOT_SIZE;
    h->name_len = (uint32_t)strlen(cls->name);
    memcpy(h->name, cls->name, h->name_len + 1);
    atomic_store_explicit(&h->magic, SHM_SEG_MAGIC, memory_order_release);
    cls->seg_fd = fd;
    cls->seg = h;
    cls->seg_size = size;
    return CW_OK;

err_unlink:
    close(fd);
    shm_unlink(path);
    return shm_errno_status(err);
}

static cw_status_t shm_pick_name(struct cw_na_class *cls, const char *loc)
{
    if (loc && loc[0]) {
        if (!shm_name_valid(loc, strlen(loc))) {
            SHM_ERR(cls,
                    "invalid shm name \"%s\": use 1-%d of [A-Za-z0-9._-], "
                    "not starting with '.'",
                    loc, SHM_NAME_MAX - 1);
            return CW_INVALID_ARG;
        }
        strcpy(cls->name, loc);
        cw_status_t st = shm_listen_open(cls);
        if (st == CW_ADDR_IN_USE)
            SHM_ERR(cls, "shm://%s is already in use by a live process", loc);
        return st;
    }
    for (int tries = 0; tries < 64; tries++) {
        unsigned n = atomic_fetch_add(&shm_auto_counter, 1);
        snprintf(cls->name, sizeof(cls->name), "p%d-%u", (int)getpid(), n);
        cw_status_t st = shm_listen_open(cls);
        if (st != CW_ADDR_IN_USE)
            return st;
    }
    SHM_ERR(cls, "could not pick a free shm name");
    return CW_ADDR_IN_USE;
}

static void shm_finalize(cw_na_class_t *cls);

static cw_status_t shm_init(const struct cw_na_host *host,
                            const struct cw_na_init_info *info,
                            cw_na_class_t **cls_p)
{
    if (!host || !info || !cls_p)
        return CW_INVALID_ARG;
    if (info->protocol && info->protocol[0] &&
        strcmp(info->protocol, "shm") != 0) {
        CW_NA_LOG(host, CW_LOG_ERROR, SHM_SUBSYS,
                  "unsupported protocol \"%s\" (na-shm takes shm://<name>)",
                  info->protocol);
        return CW_UNSUPPORTED;
    }
    struct cw_na_class *cls = calloc(1, sizeof(*cls));
    if (!cls)
        return CW_NOMEM;
    cls->host = host;
    cls->flags = info->flags;
    pthread_mutex_init(&cls->copy.lock, NULL);
    pthread_cond_init(&cls->copy.cond, NULL);
    cls->async_min = SHM_ASYNC_MIN;
    if (nau_param_uint(getenv("CAUSEWAY_SHM_ASYNC_MIN"), 1, UINT64_MAX,
                       &cls->async_min) == CW_OK)
        cls->flags |= CW_NA_ASYNC_RMA;
    cls->seg_fd = cls->efd = cls->epfd = -1;
    cls->listen = (struct shm_fdref){.kind = SHM_FD_LISTEN, .fd = -1};
    cls->event = (struct shm_fdref){.kind = SHM_FD_EVENT, .fd = -1};
    nau_list_init(&cls->peers);
    nau_list_init(&cls->unsolicited);
    nau_list_init(&cls->accepted);
    nau_list_init(&cls->unexp_posted);
    nau_list_init(&cls->exp_posted);
    nau_list_init(&cls->early_unexp);
    nau_match_init(&cls->early, SHM_EARLY_MAX, SIZE_MAX, nau_seed());
    nau_list_init(&cls->done);
    nau_pool_init(&cls->op_pool, sizeof(struct cw_na_op), SHM_OP_POOL_MAX);
    cls->uid = shm_new_uid();
    cls->nslots = shm_param_slots(info);
    cw_status_t st = nau_ptable_init(&cls->index, nau_seed());
    if (st != CW_OK)
        goto err;
    st = CW_INVALID_ARG;
    if (cls->nslots == 0) {
        SHM_ERR(cls, "slots must be a power of two in [%u, %u]", SHM_MIN_SLOTS,
                SHM_MAX_SLOTS);
        goto err;
    }
    if (!shm_param_namespace(cls, info)) {
        SHM_ERR(cls, "namespace must be 1-%d of [A-Za-z0-9_]", SHM_NS_MAX);
        goto err;
    }

    shm_stale_scan(host, cls->prefix);
    st = shm_pick_name(cls, info->location);
    if (st != CW_OK)
        goto err;
    cls->name_len = (uint32_t)strlen(cls->name);
    st = shm_seg_create(cls);
    if (st != CW_OK)
        goto err;

    cls->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    cls->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (cls->efd < 0 || cls->epfd < 0) {
        int err = errno;
        SHM_ERR(cls, "eventfd/epoll_create1 failed: %s", strerror(err));
        st = shm_errno_status(err);
        goto err;
    }
    cls->event.fd = cls->efd;
    if (shm_epoll_add(cls, &cls->event) < 0 ||
        shm_epoll_add(cls, &cls->listen) < 0) {
        int err = errno;
        SHM_ERR(cls, "epoll_ctl failed: %s", strerror(err));
        st = shm_errno_status(err);
        goto err;
    }

    st = shm_peer_get(cls, cls->name, cls->uid, &cls->self);
    if (st != CW_OK)
        goto err;
    cls->self->self = true;
    cls->self->state = SHM_PEER_ATTACHED;
    cls->self->seg = cls->seg;
    cls->self->nslots = cls->nslots;
    cls->self->pid = getpid();

#ifdef PR_SET_PTRACER
    /* Under Yama ptrace_scope=1 peers may read/write our memory only if we
     * say so; without Yama this fails harmlessly. */
    (void)prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
#endif
    SHM_DBG(cls, "endpoint shm://%s ready (%u slots of %u bytes)", cls->name,
            cls->nslots, SHM_EAGER_SIZE);
    *cls_p = cls;
    return CW_OK;

err:
    shm_finalize(cls);
    return st;
}

static void shm_finalize(cw_na_class_t *cls)
{
    if (!cls)
        return;
    shm_copy_fini(cls);
    shm_ops_drop_all(cls);
    shm_early_drop(cls, NULL);
    nau_match_fini(&cls->early);
    shm_peer_destroy_all(cls);
    if (cls->epfd >= 0)
        close(cls->epfd);
    if (cls->efd >= 0)
        close(cls->efd);
    if (cls->listen.fd >= 0)
        close(cls->listen.fd);
    if (cls->seg) {
        char path[SHM_PATH_MAX];
        shm_seg_path(cls->prefix, cls->name, path);
        atomic_store(&cls->seg->magic, 0);
        munmap(cls->seg, cls->seg_size);
        shm_unlink(path);
    }
    if (cls->seg_fd >= 0)
        close(cls->seg_fd);
    pthread_cond_destroy(&cls->copy.cond);
    pthread_mutex_destroy(&cls->copy.lock);
    free(cls);
}

static void shm_query(cw_na_class_t *cls, struct cw_na_caps *caps)
{
    (void)cls;
    *caps = (struct cw_na_caps){
        .max_unexpected_size = SHM_EAGER_SIZE,
        .max_expected_size = SHM_EAGER_SIZE,
        .max_tag = UINT32_MAX,
        .max_rma_size = 0,
        .max_segments = SHM_MAX_SEGMENTS,
        .flags = CW_NA_CAP_RMA | CW_NA_CAP_WAIT_FD | CW_NA_CAP_SAME_NODE |
                 CW_NA_CAP_NODE_RMA,
    };
}

static bool shm_check_protocol(const char *protocol)
{
    return !protocol || !protocol[0] || strcmp(protocol, "shm") == 0;
}

static uint64_t shm_dropped(cw_na_class_t *cls)
{
    return cls->dropped;
}

static const struct cw_na_ops shm_ops = {
    .check_protocol = shm_check_protocol,
    .init = shm_init,
    .finalize = shm_finalize,
    .query = shm_query,
    .addr_lookup = shm_addr_lookup,
    .addr_self = shm_addr_self,
    .addr_dup = shm_addr_dup,
    .addr_free = shm_addr_free,
    .addr_cmp = shm_addr_cmp,
    .addr_to_string = shm_addr_to_string,
    .addr_serialize_size = shm_addr_serialize_size,
    .addr_serialize = shm_addr_serialize,
    .addr_deserialize = shm_addr_deserialize,
    .msg_send_unexpected = shm_msg_send_unexpected,
    .msg_recv_unexpected = shm_msg_recv_unexpected,
    .msg_send_expected = shm_msg_send_expected,
    .msg_recv_expected = shm_msg_recv_expected,
    .mem_register = shm_mem_register,
    .mem_release = shm_mem_release,
    .mem_serialize_size = shm_mem_serialize_size,
    .mem_serialize = shm_mem_serialize,
    .mem_deserialize = shm_mem_deserialize,
    .put = shm_put,
    .get = shm_get,
    .get_wait_fd = shm_get_wait_fd,
    .safe_to_sleep = shm_safe_to_sleep,
    .progress = shm_progress,
    .cancel = shm_cancel,
    .mem_restrict = shm_mem_restrict,
    .dropped = shm_dropped,
    .msg_inject = shm_msg_inject,
};

CW_NA_EXPORT const struct cw_na_plugin cw_na_plugin_entry = {
    .abi_version = CW_NA_ABI_VERSION,
    .ops_size = sizeof(struct cw_na_ops),
    .name = "shm",
    .description = "shared-memory rings, eventfd wake-up, "
                   "process_vm_readv/writev RMA (same node)",
    .ops = &shm_ops,
};
