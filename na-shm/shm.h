/*
 * na-shm private definitions.
 *
 * Each endpoint owns one shared segment /dev/shm/causeway-<name> holding a
 * bounded multi-producer / single-consumer ring of fixed-size message
 * slots (per-slot sequence numbers, so producers only CAS the tail and
 * never wait for each other).  Senders map the receiver's segment and copy
 * straight into a slot.  A SOCK_SEQPACKET unix socket in the abstract
 * namespace ("\0causeway-<name>") carries the one-time handshake (the
 * receiver's eventfd travels back with SCM_RIGHTS) and tells each side when
 * the other endpoint is gone (EOF).  The eventfd is written only when the
 * receiver has announced in its segment that it may sleep, so the busy path
 * makes no system call.  RMA is a single copy with process_vm_readv/writev.
 * Under a namespace (CAUSEWAY_SHM_NAMESPACE or the "namespace" parameter)
 * both names are "causeway.<ns>-<name>": endpoints see, reach and sweep
 * only those of their own namespace.
 */
#ifndef CW_NA_SHM_H
#define CW_NA_SHM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <causeway/na_plugin.h>

#include "nau_list.h"
#include "nau_match.h"
#include "nau_pool.h"
#include "nau_ptable.h"

#define SHM_SUBSYS "na-shm"
#define SHM_LOG(cls, level, ...)                                               \
    CW_NA_LOG((cls)->host, (level), SHM_SUBSYS, __VA_ARGS__)
#define SHM_ERR(cls, ...)  SHM_LOG(cls, CW_LOG_ERROR, __VA_ARGS__)
#define SHM_WARN(cls, ...) SHM_LOG(cls, CW_LOG_WARN, __VA_ARGS__)
#define SHM_DBG(cls, ...)  SHM_LOG(cls, CW_LOG_DEBUG, __VA_ARGS__)

/* Data-path variant: at most one message per second per call site (the
 * state is atomic: instances may run in different threads). */
#define SHM_LOG_RL(cls, level, ...)                                            \
    CW_NA_LOG_RL((cls)->host, (level), SHM_SUBSYS, __VA_ARGS__)
#define SHM_ERR_RL(cls, ...)  SHM_LOG_RL(cls, CW_LOG_ERROR, __VA_ARGS__)
#define SHM_WARN_RL(cls, ...) SHM_LOG_RL(cls, CW_LOG_WARN, __VA_ARGS__)

#define SHM_CACHELINE  64
#define SHM_NAME_MAX   48          /* incl. NUL: names are 1..47 chars */
#define SHM_SEG_PREFIX "causeway-" /* /dev/shm/causeway-<name> */
#define SHM_NS_MAX     16          /* namespace: 1..16 of [A-Za-z0-9_] */
/* "causeway.<ns>-" with its NUL */
#define SHM_PREFIX_MAX (sizeof("causeway.-") + SHM_NS_MAX)
/* "/<prefix><name>" with its NUL */
#define SHM_PATH_MAX  (1 + SHM_PREFIX_MAX + SHM_NAME_MAX)
#define SHM_SEG_MAGIC 0x43575348u /* "CWSH" */
#define SHM_VERSION   2u          /* 2: name in the slot tail */

/* Eager size: a 4 KiB RPC argument plus its header fits with room left. */
#define SHM_EAGER_SIZE    8192u
#define SHM_SLOT_HDR      128u
#define SHM_SLOT_SIZE     (SHM_SLOT_HDR + SHM_EAGER_SIZE)
#define SHM_DEFAULT_SLOTS 256u
#define SHM_MIN_SLOTS     4u
#define SHM_MAX_SLOTS     65536u
#define SHM_MAX_SEGMENTS  1024u /* per memory handle (IOV_MAX) */

/* Claim attempts of one push before the ring counts as full (the tail is
 * in the receiver's memory; a legitimate race needs a handful). */
#define SHM_PUSH_TRIES 1024u

/* Early (not yet matched) messages buffered locally, unexpected and
 * expected ones together.  When full, the oldest expected one is dropped
 * (it may never be matched); only a queue full of unexpected messages stops
 * the ring being drained (back-pressure on the senders, until receives are
 * posted). */
#define SHM_EARLY_MAX 4096u

/* Connections accepted but still without HELLO; beyond this new ones are
 * refused, so a process that connects and says nothing cannot pile up
 * descriptors here. */
#define SHM_ACCEPTED_MAX 256u

/* Peers known only from slots of our ring: a sender whose HELLO is not
 * read yet, or a writer that never connects and may claim a new id in
 * every slot.  At this many the idle ones are forgotten; if none is idle,
 * a slot from yet another unknown sender is dropped and counted. */
#define SHM_UNSOLICITED_MAX 1024u

/* How often the busy path looks at the sockets (connects, peers gone). */
#define SHM_SOCK_CHECK_NS 100000ull

/* A slot claimed but not published for this long, by a producer that is
 * gone, is skipped so that the ring does not stay blocked. */
#define SHM_STUCK_NS 1000000000ull

enum shm_msg_type {
    SHM_MSG_UNEXPECTED = 1,
    SHM_MSG_EXPECTED = 2,
};

/* One ring slot: a one-line head, the payload, and the sender's name in a
 * tail line that the consumer reads only for a sender it does not know,
 * so a small message moves two cache lines between the cores. */
struct shm_slot {
    _Atomic uint64_t seq;
    uint32_t type;
    uint32_t tag;
    uint32_t len;
    uint32_t name_len;
    /* Written first after the claim, cleared by the consumer on release:
     * names the claimer of a slot that is never published. */
    _Atomic uint64_t sender_uid;
    char pad0_[SHM_CACHELINE - 32];
    unsigned char data[SHM_EAGER_SIZE];
    char sender_name[SHM_NAME_MAX];
    char pad1_[SHM_CACHELINE - SHM_NAME_MAX];
};
_Static_assert(sizeof(struct shm_slot) == SHM_SLOT_SIZE, "slot layout");

/* Segment header, followed by the slots. */
struct shm_seg_hdr {
    _Atomic uint32_t magic; /* written last at creation */
    uint32_t version;
    uint32_t owner_pid;
    uint32_t nslots;
    uint64_t owner_start; /* /proc/<pid>/stat starttime, against pid reuse */
    uint64_t uid;         /* endpoint incarnation */
    uint32_t slot_size;
    uint32_t name_len;
    char name[SHM_NAME_MAX];
    char pad0_[SHM_CACHELINE * 2 - 40 - SHM_NAME_MAX];
    /* Set by the consumer before it blocks; senders then write the eventfd. */
    _Atomic uint32_t sleeping;
    /* Set by a sender that found the ring full and wants to block; the
     * consumer then wakes its connected senders after freeing slots. */
    _Atomic uint32_t senders_waiting;
    char pad1_[SHM_CACHELINE - 8];
    _Atomic uint64_t tail; /* producers */
    char pad2_[SHM_CACHELINE - 8];
    /* A copy of the consumer's head, for anyone to look at; producers
     * can write it too, so the consumer never reads it back. */
    _Atomic uint64_t head;
    char pad3_[SHM_CACHELINE - 8];
};
_Static_assert(sizeof(struct shm_seg_hdr) == 5 * SHM_CACHELINE, "hdr layout");

/* Handshake over the unix socket. */
enum shm_sock_kind {
    SHM_SOCK_HELLO = 1, /* connector -> listener */
    SHM_SOCK_REPLY = 2, /* listener -> connector, carries the eventfd */
    SHM_SOCK_WAKE = 3,  /* wake-up before the eventfd is known */
};
struct shm_sock_msg {
    uint32_t magic;
    uint16_t version;
    uint16_t kind;
    uint32_t pid;
    uint32_t name_len;
    uint64_t uid;
    char name[SHM_NAME_MAX];
};

/* Tests that walk cls->peers know the list type by this name. */
#define shm_list nau_list

/* What an epoll entry refers to. */
enum shm_fd_kind {
    SHM_FD_EVENT = 1,
    SHM_FD_LISTEN,
    SHM_FD_ACCEPTED, /* accepted, HELLO not read yet */
    SHM_FD_PEER_IN,  /* accepted, bound to a peer */
    SHM_FD_PEER_OUT, /* our connection to a peer */
};
struct shm_fdref {
    enum shm_fd_kind kind;
    int fd;
    struct shm_peer *peer;
    struct nau_list link; /* pending accepted sockets */
};

enum shm_peer_state {
    SHM_PEER_DETACHED = 0, /* known by name/uid, segment not mapped */
    SHM_PEER_ATTACHED,     /* segment mapped, connected */
    SHM_PEER_DEAD,
};

/* A remote (or our own) endpoint.  An address (cw_na_addr_t) is a counted
 * reference to a peer; the two pointer types convert with shm_addr() and
 * shm_peer_of(). */
struct shm_peer {
    /* In cls->index (live, id known) by uid; refs: the table's (cls->peers)
     * + addresses + operations. */
    struct nau_ptable_node inode;
    struct cw_na_class *cls;
    enum shm_peer_state state;
    bool self;
    bool unsolicited; /* known only from ring slots */
    uint64_t uid;     /* 0 until known */
    pid_t pid;
    char name[SHM_NAME_MAX];
    struct shm_seg_hdr *seg; /* mapping of the peer's segment */
    size_t seg_size;
    uint32_t nslots;         /* validated at attach, never re-read */
    int efd;                 /* peer's eventfd, -1 until REPLY */
    struct shm_fdref out;    /* our connection to it (fd -1 if none) */
    struct shm_fdref in;     /* its connection to us (fd -1 if none) */
    struct nau_list backlog; /* sends waiting for ring space */
    struct nau_list link;    /* cls->peers (on it: in the table) */
    struct nau_list ulink;   /* cls->unsolicited */
};

static inline bool shm_peer_indexed(const struct shm_peer *p)
{
    return p->inode.pprev != NULL;
}

/* Known only from ring slots: never connected, its name and id are the
 * word of whoever wrote the slot (a verified record has the pid of the
 * process listening under its name, from SO_PEERCRED). */
static inline bool shm_peer_slot_only(const struct shm_peer *p)
{
    return p->unsolicited && p->pid == 0;
}

static inline cw_na_addr_t *shm_addr(struct shm_peer *p)
{
    return (cw_na_addr_t *)(void *)p;
}
static inline struct shm_peer *shm_peer_of(cw_na_addr_t *a)
{
    return (struct shm_peer *)(void *)a;
}

/* A posted operation. */
struct cw_na_op {
    struct cw_na_class *cls;
    enum cw_na_op_type type;
    cw_na_cb_t cb;
    void *arg;
    cw_status_t status;
    bool completed;        /* on cls->done */
    struct shm_peer *peer; /* destination / source filter, referenced */
    const void *sbuf;
    void *rbuf;
    size_t len;  /* buffer size (recv) or message size (send) */
    size_t rlen; /* bytes received */
    uint32_t tag;
    struct shm_peer *source; /* unexpected recv: sender, referenced */
    struct nau_list link;    /* posted list / backlog / done */
};

/* A message that arrived before its receive was posted: an unexpected one
 * on cls->early_unexp (m.fifo), an expected one in cls->early by (uid of
 * its source, tag). */
struct shm_early {
    struct nau_match_entry m;
    struct shm_peer *source; /* referenced */
    size_t len;
    unsigned char data[];
};

/* Local or remote memory handle. */
struct cw_na_mem {
    bool remote;
    uint32_t access;
    pid_t pid;
    uint64_t total;
    size_t nsegs;
    struct cw_na_segment segs[];
};

/* The copy engine (shm_copy.c): large put/get on a thread of their own
 * when the caller opened the endpoint with CW_NA_ASYNC_RMA. */
#define SHM_ASYNC_MIN (256u * 1024u)

struct shm_copy_req;

struct shm_copy {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t thread;
    bool started, stop, broken;
    struct shm_copy_req *queue, *queue_tail; /* posted, in order */
    struct shm_copy_req *done;               /* finished, newest first */
    atomic_uint ndone;                       /* read without the lock */
    unsigned inflight;                       /* posted, not reaped */
    uint64_t wake_errors;
};

struct cw_na_class {
    const struct cw_na_host *host;
    uint32_t flags;
    char name[SHM_NAME_MAX];
    uint32_t name_len;
    char prefix[SHM_PREFIX_MAX]; /* of segment and socket names */
    uint64_t uid;
    uint32_t nslots;

    int seg_fd;
    struct shm_seg_hdr *seg; /* own segment */
    size_t seg_size;
    uint64_t head; /* next slot to read (seg->head: a copy) */
    int efd;       /* own eventfd */
    int epfd;      /* wait fd */
    struct shm_fdref listen;
    struct shm_fdref event;

    bool armed; /* safe_to_sleep said yes; drain on progress */
    uint64_t next_sock_check;
    unsigned clock_skip; /* progress calls since the clock was read */

    struct shm_peer *self;
    struct nau_list peers;
    /* Live peers by id (shm_table.c); ids are the peers' choice: seeded. */
    struct nau_ptable index;
    struct nau_list unsolicited; /* peers known only from ring slots */
    unsigned nunsolicited;
    struct nau_list accepted; /* shm_fdref awaiting HELLO */
    unsigned naccepted;
    struct nau_list unexp_posted;
    struct nau_list exp_posted;
    struct nau_list early_unexp; /* unexpected shm_early, arrival order */
    unsigned nearly_unexp;
    struct nau_match early; /* expected ones; SHM_EARLY_MAX with those */
    struct nau_list done;   /* completed ops, callbacks pending */
    unsigned nbacklog;      /* sends waiting in peer backlogs */
    unsigned ndead;         /* dead peers not yet swept */

    struct shm_copy copy;    /* the copy engine */
    uint64_t async_min;      /* engine copies from this size */
    uint64_t dropped;        /* malformed slots dropped */
    struct nau_pool op_pool; /* recycled operations */
    uint64_t stuck_head;     /* head slot seen claimed, unpublished */
    uint64_t stuck_since;    /* 0: not stuck */
};

#define SHM_OP_POOL_MAX 256u

/* shm_init.c */
cw_status_t shm_errno_status(int err);
bool shm_pid_alive(pid_t pid, uint64_t start);
uint64_t shm_pid_start(pid_t pid);
/* The process is gone or on its way out (its memory may already be):
 * what a cross-memory copy failing with EFAULT then means. */
bool shm_pid_exiting(pid_t pid);
bool shm_name_valid(const char *name, size_t len);
size_t shm_seg_size(uint32_t nslots);
bool shm_seg_hdr_valid(const struct shm_seg_hdr *h, size_t size);
/* Names are taken in a namespace: @p prefix is an instance's prefix
 * ("causeway-" or "causeway.<ns>-"). */
void shm_abstract_name(const char *prefix, const char *name, void *sun,
                       socklen_t *len_p);
/* "/<prefix><name>", the segment's name for shm_open. */
void shm_seg_path(const char *prefix, const char *name,
                  char path[SHM_PATH_MAX]);
/* The pid listening under @p name (kernel's word), 0 if nobody, -1 if
 * that cannot be told. */
pid_t shm_listener_pid(const char *prefix, const char *name);
bool shm_stale_check(const struct cw_na_host *host, const char *prefix,
                     const char *name);

/* shm_table.c */
/** The live peer with id @p uid, or NULL. */
struct shm_peer *shm_peer_find_uid(struct cw_na_class *cls, uint64_t uid);
/** Make a live peer whose id is known findable by it. */
void shm_peer_index(struct cw_na_class *cls, struct shm_peer *peer);
/** Take a peer out of the index (it died or goes) and out of the count
 *  of unsolicited peers. */
void shm_peer_unindex(struct cw_na_class *cls, struct shm_peer *peer);
/** The peer has a connection: it no longer counts as unsolicited. */
void shm_peer_connected(struct cw_na_class *cls, struct shm_peer *peer);
/** Forget a record known only from ring slots that a verified endpoint
 *  contradicts (@p why, for the log): its queued messages are dropped and
 *  counted, receives posted on it fail, it is dead and loses its id. */
void shm_peer_forget_forged(struct cw_na_class *cls, struct shm_peer *peer,
                            const char *why);
/** The endpoint listening under @p name has id @p uid: forget the records
 *  known only from ring slots that claim the name under another id. */
void shm_peer_forget_name_claims(struct cw_na_class *cls, const char *name,
                                 uint64_t uid);
/** The peer of a slot from unknown sender @p uid named @p name (the
 *  table's reference, in *peer_p); CW_OVERFLOW if SHM_UNSOLICITED_MAX
 *  peers known only from slots are all in use (drop the slot). */
cw_status_t shm_peer_from_slot(struct cw_na_class *cls, const char *name,
                               uint64_t uid, struct shm_peer **peer_p);

/* shm_addr.c */
cw_status_t shm_peer_get(struct cw_na_class *cls, const char *name,
                         uint64_t uid, struct shm_peer **peer_p);
cw_status_t shm_peer_attach(struct cw_na_class *cls, struct shm_peer *peer);
void shm_peer_ref(struct shm_peer *peer);
void shm_peer_unref(struct shm_peer *peer);
void shm_peer_destroy_all(struct cw_na_class *cls);
void shm_peer_wake(struct shm_peer *peer);
void shm_wake_senders(struct cw_na_class *cls);
void shm_fdref_close(struct cw_na_class *cls, struct shm_fdref *ref);
void shm_sock_handle(struct cw_na_class *cls, struct shm_fdref *ref);
void shm_listen_accept(struct cw_na_class *cls);
/** Read the HELLOs that wait on the listening socket and on accepted
 *  connections (a sender says HELLO before it pushes). */
void shm_hello_read_pending(struct cw_na_class *cls);

/* shm_msg.c */
bool shm_ring_push(struct shm_peer *dest, uint32_t type, uint32_t tag,
                   const void *buf, size_t len);
unsigned shm_ring_drain(struct cw_na_class *cls, unsigned max);
bool shm_ring_pending(struct cw_na_class *cls);
bool shm_ring_has_room(struct shm_peer *dest);
bool shm_backlog_arm(struct cw_na_class *cls);
void shm_ring_unstick(struct cw_na_class *cls);
void shm_backlog_retry(struct cw_na_class *cls);
/** Free the early messages from @p source (NULL: all); returns how many. */
unsigned shm_early_drop(struct cw_na_class *cls, const struct shm_peer *source);

/* shm_copy.c */
/** True if a copy of @p len bytes should go to the engine. */
bool shm_copy_wanted(struct cw_na_class *cls, uint64_t len);
/** Hand a copy (iovecs copied) to the engine; it completes @p op. */
cw_status_t shm_copy_post(struct cw_na_class *cls, struct cw_na_op *op,
                          bool is_put, pid_t pid, const struct iovec *liov,
                          const struct iovec *riov, unsigned niov);
/** True if finished copies wait to be reaped. */
bool shm_copy_pending(struct cw_na_class *cls);
/** Complete the finished copies' operations (onto cls->done). */
void shm_copy_reap(struct cw_na_class *cls);
/** Let posted copies finish, stop the engine, reap. */
void shm_copy_fini(struct cw_na_class *cls);
/** Log the EPERM of a cross-memory-attach call with the fix. */
void shm_rma_eperm(struct cw_na_class *cls, const char *call, pid_t pid);

/* shm_progress.c */
void shm_op_complete(struct cw_na_class *cls, struct cw_na_op *op,
                     cw_status_t st);
struct cw_na_op *shm_op_new(struct cw_na_class *cls, enum cw_na_op_type type,
                            cw_na_cb_t cb, void *arg);
void shm_op_free(struct cw_na_op *op);
void shm_peer_failed(struct cw_na_class *cls, struct shm_peer *peer,
                     cw_status_t st);
void shm_ops_drop_all(struct cw_na_class *cls);
void shm_sock_poll(struct cw_na_class *cls);

/* Ops, one file each. */
cw_status_t shm_addr_lookup(cw_na_class_t *cls, const char *location,
                            cw_na_addr_t **addr_p);
cw_status_t shm_addr_self(cw_na_class_t *cls, cw_na_addr_t **addr_p);
cw_status_t shm_addr_dup(cw_na_class_t *cls, cw_na_addr_t *addr,
                         cw_na_addr_t **addr_p);
void shm_addr_free(cw_na_class_t *cls, cw_na_addr_t *addr);
bool shm_addr_cmp(cw_na_class_t *cls, cw_na_addr_t *a, cw_na_addr_t *b);
cw_status_t shm_addr_to_string(cw_na_class_t *cls, cw_na_addr_t *addr,
                               char *buf, size_t *len_p);
size_t shm_addr_serialize_size(cw_na_class_t *cls, cw_na_addr_t *addr);
cw_status_t shm_addr_serialize(cw_na_class_t *cls, void *buf, size_t size,
                               cw_na_addr_t *addr);
cw_status_t shm_addr_deserialize(cw_na_class_t *cls, const void *buf,
                                 size_t size, cw_na_addr_t **addr_p);

cw_status_t shm_msg_send_unexpected(cw_na_class_t *cls, const void *buf,
                                    size_t len, cw_na_addr_t *dest,
                                    uint32_t tag, cw_na_cb_t cb, void *arg,
                                    cw_na_op_t **op_p);
cw_status_t shm_msg_recv_unexpected(cw_na_class_t *cls, void *buf, size_t len,
                                    cw_na_cb_t cb, void *arg,
                                    cw_na_op_t **op_p);
cw_status_t shm_msg_send_expected(cw_na_class_t *cls, const void *buf,
                                  size_t len, cw_na_addr_t *dest, uint32_t tag,
                                  cw_na_cb_t cb, void *arg, cw_na_op_t **op_p);
cw_status_t shm_msg_inject(cw_na_class_t *cls, const void *buf, size_t len,
                           cw_na_addr_t *dest, uint32_t tag, bool expected);
cw_status_t shm_msg_recv_expected(cw_na_class_t *cls, void *buf, size_t len,
                                  cw_na_addr_t *source, uint32_t tag,
                                  cw_na_cb_t cb, void *arg, cw_na_op_t **op_p);

cw_status_t shm_mem_register(cw_na_class_t *cls,
                             const struct cw_na_segment *segs, size_t n,
                             uint32_t access, cw_na_mem_t **mem_p);
void shm_mem_release(cw_na_class_t *cls, cw_na_mem_t *mem);
size_t shm_mem_serialize_size(cw_na_class_t *cls, cw_na_mem_t *mem);
cw_status_t shm_mem_serialize(cw_na_class_t *cls, void *buf, size_t size,
                              cw_na_mem_t *mem);
cw_status_t shm_mem_deserialize(cw_na_class_t *cls, const void *buf,
                                size_t size, cw_na_mem_t **mem_p);
cw_status_t shm_mem_restrict(cw_na_class_t *cls, cw_na_mem_t *mem, size_t off,
                             size_t len, uint32_t access, cw_na_mem_t **mem_p);
cw_status_t shm_put(cw_na_class_t *cls, cw_na_mem_t *local, size_t local_off,
                    cw_na_mem_t *remote, size_t remote_off, size_t len,
                    cw_na_addr_t *peer, cw_na_cb_t cb, void *arg,
                    cw_na_op_t **op_p);
cw_status_t shm_get(cw_na_class_t *cls, cw_na_mem_t *local, size_t local_off,
                    cw_na_mem_t *remote, size_t remote_off, size_t len,
                    cw_na_addr_t *peer, cw_na_cb_t cb, void *arg,
                    cw_na_op_t **op_p);

int shm_get_wait_fd(cw_na_class_t *cls);
bool shm_safe_to_sleep(cw_na_class_t *cls);
cw_status_t shm_progress(cw_na_class_t *cls, unsigned max, unsigned *count_p);
cw_status_t shm_cancel(cw_na_class_t *cls, cw_na_op_t *op);

#endif /* CW_NA_SHM_H */
