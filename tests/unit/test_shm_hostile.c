/*
 * na-shm against a hostile peer that writes into the shared ring memory
 * while we use it: a receiver whose slot sequence numbers run ahead of its
 * tail (a send must return), a segment header whose geometry changes
 * after it was validated (the sender keeps the geometry it checked), and
 * a producer that changes a published slot's length while it is being
 * consumed (the receiver uses the length it checked), a producer claiming
 * a new sender id in every slot (the peer table stays bounded), one that
 * rewrites the ring's shared head (the consumer keeps its own), a dead
 * pid written into a live endpoint's header (the next init's scan leaves
 * the segment alone), and slots claiming another endpoint's id or name
 * before it talks to us (its verified HELLO, our lookup and its address
 * still reach it).
 * Children are reaped (and killed if stuck) on every path; the segments
 * are the endpoints' own and go with them.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "shm.h" /* segment layout, to play the hostile side */
#include "shm_test_util.h"

/* Map the segment of endpoint @p name read-write, as its peers do. */
static struct shm_seg_hdr *hostile_map(const char *name, size_t *size_p)
{
    char path[URI_LEN + 16];
    struct stat st;
    snprintf(path, sizeof(path), "/causeway-%s", name);
    int fd = shm_open(path, O_RDWR, 0);
    if (fd < 0)
        return NULL;
    void *p = MAP_FAILED;
    if (fstat(fd, &st) == 0)
        p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED,
                 fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return NULL;
    *size_p = (size_t)st.st_size;
    return p;
}

static struct shm_slot *hostile_slots(struct shm_seg_hdr *h)
{
    return (struct shm_slot *)(void *)(h + 1);
}

/* Open a 4-slot endpoint, its URI in @p uri, and map its segment. */
static struct shm_seg_hdr *open_mapped(cw_na_t **na_p, char *uri,
                                       size_t *size_p)
{
    assert_int_equal(cw_na_open("shm://", CW_NA_LISTEN,
                                (const char *[]){"slots", "4", NULL}, na_p),
                     CW_OK);
    self_uri(*na_p, uri);
    struct shm_seg_hdr *h = hostile_map(uri + strlen("shm://"), size_p);
    assert_non_null(h);
    return h;
}

/* Child: send one message to the endpoint named @p arg; report when the
 * send call has returned and when it has completed. */
static int child_send_one(void *arg, int wfd)
{
    const char *rname = arg;
    char uri[URI_LEN], line[64];
    cw_na_t *na;
    cw_na_addr_t *r;
    struct done d = {0};
    snprintf(uri, sizeof(uri), "shm://%s", rname);
    if (cw_na_open("shm://", 0, NULL, &na) != CW_OK)
        return 1;
    if (cw_na_addr_lookup(na, uri, &r) != CW_OK)
        return 2;
    cw_status_t st =
        cw_na_msg_send_unexpected(na, "hi", 3, r, 7, done_cb, &d, NULL);
    int n = snprintf(line, sizeof(line), "sent %d\n", (int)st);
    if (write(wfd, line, (size_t)n) != n)
        return 3;
    bool ok = st == CW_OK && wait_done(&na, 1, &d.calls, 1);
    n = snprintf(line, sizeof(line), "done %d\n", ok ? (int)d.status : -1);
    if (write(wfd, line, (size_t)n) != n)
        return 4;
    cw_na_addr_free(na, r);
    cw_na_close(na);
    return ok ? 0 : 5;
}

/* A receiver's slot whose sequence number is ahead of the ring's tail
 * (only a corrupt or hostile receiver has one) used to make the sender's
 * push re-read the tail forever: the send call never returned.  Now the
 * ring counts as full, the send waits in the backlog, and it goes out
 * once the slot is sane again. */
static void test_slot_ahead_of_tail(void **state)
{
    (void)state;
    cw_na_t *rcv;
    char ruri[URI_LEN], line[64], in[16];
    struct done r = {0};
    size_t size;
    int rfd;

    struct shm_seg_hdr *h = open_mapped(&rcv, ruri, &size);
    struct shm_slot *s = &hostile_slots(h)[0];
    atomic_store(&s->seq, 5); /* the tail is 0 */

    pid_t pid = fork_child(child_send_one, ruri + strlen("shm://"), &rfd);
    bool sent = read_line_progress(rcv, rfd, line, sizeof(line), WAIT_MS);
    if (sent) {
        assert_string_equal(line, "sent 0");
        atomic_store(&s->seq, 0); /* sane again */
        assert_int_equal(
            cw_na_msg_recv_unexpected(rcv, in, sizeof(in), done_cb, &r, NULL),
            CW_OK);
        assert_true(wait_done(&rcv, 1, &r.calls, 1));
        assert_int_equal(r.status, CW_OK);
        assert_string_equal(in, "hi");
        assert_int_equal(r.tag, 7);
        cw_na_addr_free(rcv, r.source);
        assert_true(read_line_progress(rcv, rfd, line, sizeof(line), WAIT_MS));
        assert_string_equal(line, "done 0");
    } else {
        kill(pid, SIGKILL); /* stuck in the send */
    }
    close(rfd);
    int rc = reap(pid);
    munmap(h, size);
    cw_na_close(rcv);
    assert_true(sent);
    assert_int_equal(rc, 0);
}

/* Flips the ring size in a segment header until told to stop. */
struct flipper {
    volatile uint32_t *word;
    uint32_t a, b;
    atomic_bool stop;
};

static void *flip_main(void *arg)
{
    struct flipper *f = arg;
    while (!atomic_load_explicit(&f->stop, memory_order_relaxed)) {
        *f->word = f->b;
        *f->word = f->a;
    }
    return NULL;
}

/* The owner of a segment can rewrite its header at any time.  The sender
 * validated the ring size and then read it again to keep: a size changed
 * in between (here to 65536 slots in a 4-slot segment) became the mask of
 * every later push, so slots far beyond the mapping were written.  The
 * sender must keep the geometry it validated. */
static void test_header_changed_after_check(void **state)
{
    (void)state;
    cw_na_t *rcv, *snd;
    char ruri[URI_LEN];
    size_t size;
    unsigned attached = 0, wrong = 0;

    struct shm_seg_hdr *h = open_mapped(&rcv, ruri, &size);
    struct flipper f = {.word = &h->nslots, .a = 4, .b = SHM_MAX_SLOTS};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, flip_main, &f), 0);

    assert_int_equal(cw_na_open("shm://", 0, NULL, &snd), CW_OK);
    uint64_t deadline = cw_now_ns() + 3000000000ull;
    while (attached < 1000 && wrong == 0 && cw_now_ns() < deadline) {
        cw_na_addr_t *r;
        cw_na_progress(rcv, 0, NULL);
        if (cw_na_addr_lookup(snd, ruri, &r) != CW_OK)
            continue; /* saw the bad size: refused, as it should be */
        attached++;
        if (((struct shm_peer *)(void *)r)->nslots != 4)
            wrong++;
        cw_na_addr_free(snd, r);
        cw_na_close(snd); /* a fresh sender for the next try */
        assert_int_equal(cw_na_open("shm://", 0, NULL, &snd), CW_OK);
    }
    atomic_store(&f.stop, true);
    pthread_join(t, NULL);
    h->nslots = 4;
    cw_na_close(snd);
    munmap(h, size);
    cw_na_close(rcv);
    assert_true(attached > 0);
    assert_int_equal(wrong, 0);
}

#define HOSTILE_UID     0x686f7374696c65ull
#define HOSTILE_BIG_LEN (16u << 20)

struct early_rcv {
    cw_na_t *na;
    unsigned got;
};

static void early_cb(const struct cw_na_cb_info *info)
{
    struct early_rcv *e = info->arg;
    if (info->status == CW_OK)
        e->got++;
    cw_na_addr_free(e->na, info->u.recv_unexpected.source);
}

/* Child: a receiver that never has a receive posted while it drains its
 * ring (so every message goes to the early queue, copied by the slot's
 * length) and empties that queue after each pass.  Reports its name, runs
 * for 3 s, exits 0 if it lived and got messages. */
static int child_early_receiver(void *arg, int wfd)
{
    (void)arg;
    char uri[URI_LEN], line[URI_LEN + 8];
    unsigned char buf[64];
    struct early_rcv e = {0};
    if (cw_na_open("shm://", CW_NA_LISTEN, (const char *[]){"slots", "4", NULL},
                   &e.na) != CW_OK)
        return 1;
    self_uri(e.na, uri);
    int n = snprintf(line, sizeof(line), "%s\n", uri + strlen("shm://"));
    if (write(wfd, line, (size_t)n) != n)
        return 2;
    uint64_t deadline = cw_now_ns() + 3000000000ull;
    while (cw_now_ns() < deadline) {
        cw_na_progress(e.na, 0, NULL);
        /* Take what was queued; a receive left posted is cancelled. */
        for (int i = 0; i < 8; i++) {
            cw_na_op_t *op;
            if (cw_na_msg_recv_unexpected(e.na, buf, sizeof(buf), early_cb, &e,
                                          &op) != CW_OK)
                return 3;
            if (cw_na_cancel(e.na, op) != CW_OK)
                return 4;
        }
    }
    cw_na_progress(e.na, 0, NULL);
    cw_na_close(e.na);
    return e.got > 0 ? 0 : 5;
}

/* A producer may rewrite a slot it published while the receiver consumes
 * it.  The receiver checked the length and read it again to copy: a
 * length changed in between (here to 16 MiB) was copied out of the
 * 33 KiB segment.  Each published message here has its length flipped
 * until it is consumed; the receiver must survive and drop or deliver
 * each one by the length it checked. */
static void test_slot_changed_after_check(void **state)
{
    (void)state;
    char name[URI_LEN];
    size_t size;
    int rfd;
    unsigned sent = 0;

    pid_t pid = fork_child(child_early_receiver, NULL, &rfd);
    assert_true(read_line(rfd, name, sizeof(name)));
    close(rfd);
    struct shm_seg_hdr *h = hostile_map(name, &size);
    assert_non_null(h);
    struct shm_slot *slots = hostile_slots(h);
    uint64_t mask = h->nslots - 1;
    uint64_t deadline = cw_now_ns() + 2000000000ull;
    while (cw_now_ns() < deadline) {
        uint64_t pos = atomic_fetch_add(&h->tail, 1);
        struct shm_slot *s = &slots[pos & mask];
        while (atomic_load(&s->seq) != pos && cw_now_ns() < deadline)
            ;
        if (atomic_load(&s->seq) != pos)
            break;
        atomic_store(&s->sender_uid, HOSTILE_UID);
        s->type = SHM_MSG_UNEXPECTED;
        s->tag = 1;
        s->len = 8;
        s->name_len = 4;
        memcpy(s->sender_name, "evil", 5);
        memset(s->data, 'x', 8);
        atomic_store(&s->seq, pos + 1);
        sent++;
        /* Each length stays for a while, so that either is seen. */
        volatile uint32_t *len = &s->len;
        for (unsigned k = 1; atomic_load(&s->seq) == pos + 1; k++) {
            *len = k & 1 ? HOSTILE_BIG_LEN : 8;
            if ((k & 255) == 0 && cw_now_ns() >= deadline)
                break;
        }
    }
    munmap(h, size);
    int rc = reap(pid);
    assert_true(sent > 0);
    assert_int_equal(rc, 0);
}

/* What a hostile endpoint hands to its peers for the pid test below. */
struct pid_forge {
    int go_fd;                /* the child waits for the forged header */
    const char *name;         /* the hostile endpoint */
    unsigned char handle[64]; /* serialized handle of pid_target */
    size_t handle_len;
};

static char pid_target[16] = "untouched";

/* Child: attach to the hostile endpoint, whose segment header names this
 * child's pid, and put into the handle it gave out, patched to name this
 * pid too (a handle is the owner's to forge).  Reports "lookup <status>"
 * or "put <status>"; exits 0 if pid_target (here: in this process, which
 * is not the peer) was left alone. */
static int child_forged_pid(void *arg, int wfd)
{
    struct pid_forge *f = arg;
    char uri[URI_LEN], line[64], go;
    cw_na_t *na;
    cw_na_addr_t *h;
    cw_na_mem_t *local, *remote;
    struct done d = {0};
    uint32_t me = (uint32_t)getpid();
    int n;

    if (read(f->go_fd, &go, 1) != 1)
        return 1;
    if (cw_na_open("shm://", 0, NULL, &na) != CW_OK)
        return 2;
    snprintf(uri, sizeof(uri), "shm://%s", f->name);
    cw_status_t st = cw_na_addr_lookup(na, uri, &h);
    if (st != CW_OK) {
        n = snprintf(line, sizeof(line), "lookup %d\n", (int)st);
        cw_na_close(na);
        return write(wfd, line, (size_t)n) == n &&
                       strcmp(pid_target, "untouched") == 0
                   ? 0
                   : 3;
    }
    memcpy(f->handle + 8, &me, 4); /* the handle's pid */
    char pwned[] = "PWNED";
    struct cw_na_segment ls = {.base = pwned, .len = sizeof(pwned)};
    if (cw_na_mem_register(na, &ls, 1, CW_NA_MEM_READ, &local) != CW_OK)
        return 4;
    if (cw_na_mem_deserialize(na, f->handle, f->handle_len, &remote) != CW_OK)
        return 5;
    st = cw_na_put(na, local, 0, remote, 0, 6, h, done_cb, &d, NULL);
    if (st == CW_OK && wait_done(&na, 1, &d.calls, 1))
        st = d.status;
    n = snprintf(line, sizeof(line), "put %d\n", (int)st);
    cw_na_mem_release(na, remote);
    cw_na_mem_release(na, local);
    cw_na_addr_free(na, h);
    cw_na_close(na);
    if (write(wfd, line, (size_t)n) != n)
        return 6;
    return strcmp(pid_target, "untouched") == 0 ? 0 : 7;
}

/* A peer's pid (against which the pid in every memory handle it sends is
 * checked) was taken from the peer's own segment header, which the peer
 * writes.  A hostile endpoint naming another process there, and in its
 * handles, steered our process_vm_writev into that process (here: the
 * attaching child itself).  The pid is now the kernel's (SO_PEERCRED of
 * the connection), and a header that disagrees is refused. */
static void test_header_pid_forged(void **state)
{
    (void)state;
    cw_na_t *hna;
    cw_na_mem_t *mem;
    char huri[URI_LEN], line[64];
    size_t size;
    int rfd, go[2];
    struct pid_forge f;

    struct shm_seg_hdr *h = open_mapped(&hna, huri, &size);
    struct cw_na_segment seg = {.base = pid_target, .len = sizeof(pid_target)};
    assert_int_equal(cw_na_mem_register(hna, &seg, 1, CW_NA_MEM_WRITE, &mem),
                     CW_OK);
    f.handle_len = cw_na_mem_serialize_size(hna, mem);
    assert_true(f.handle_len <= sizeof(f.handle));
    assert_int_equal(cw_na_mem_serialize(hna, f.handle, f.handle_len, mem),
                     CW_OK);
    assert_int_equal(pipe2(go, O_CLOEXEC), 0);
    f.go_fd = go[0];
    f.name = huri + strlen("shm://");

    pid_t pid = fork_child(child_forged_pid, &f, &rfd);
    close(go[0]);
    uint32_t owner_pid = h->owner_pid;
    uint64_t owner_start = h->owner_start;
    h->owner_pid = (uint32_t)pid; /* alive; start 0 is not checked */
    h->owner_start = 0;
    assert_int_equal(write(go[1], "g", 1), 1);
    close(go[1]);
    bool got = read_line_progress(hna, rfd, line, sizeof(line), WAIT_MS);
    close(rfd);
    int rc = reap(pid);
    h->owner_pid = owner_pid;
    h->owner_start = owner_start;
    munmap(h, size);
    cw_na_mem_release(hna, mem);
    cw_na_close(hna);
    assert_true(got);
    char want[32];
    snprintf(want, sizeof(want), "lookup %d", (int)CW_UNREACHABLE);
    assert_string_equal(line, want);
    assert_int_equal(rc, 0);
    assert_string_equal(pid_target, "untouched");
}

/* Who the impostor below claims to be, and whom it tells. */
struct forge_hello {
    const char *to; /* the receiving endpoint */
    const char *as; /* the endpoint it pretends to be */
    uint64_t as_uid;
};

/* Child: connect to @p to's socket and say HELLO as @p as (name and id are
 * in any serialized address).  Reports "reply" if answered, "closed" if
 * refused; exits (closing the connection) right after. */
static int child_forge_hello(void *arg, int wfd)
{
    const struct forge_hello *f = arg;
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    struct shm_sock_msg m = {.magic = SHM_SEG_MAGIC,
                             .version = SHM_VERSION,
                             .kind = SHM_SOCK_HELLO,
                             .pid = (uint32_t)getpid(),
                             .name_len = (uint32_t)strlen(f->as),
                             .uid = f->as_uid};
    int n = snprintf(sun.sun_path + 1, sizeof(sun.sun_path) - 1, "causeway-%s",
                     f->to);
    socklen_t slen =
        (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
    memcpy(m.name, f->as, m.name_len + 1);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sun, slen) < 0)
        return 1;
    if (send(fd, &m, sizeof(m), MSG_NOSIGNAL) != (ssize_t)sizeof(m))
        return 2;
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    if (poll(&pfd, 1, (int)WAIT_MS) != 1)
        return 3;
    const char *what = recv(fd, &m, sizeof(m), 0) > 0 ? "reply\n" : "closed\n";
    close(fd);
    return write(wfd, what, strlen(what)) == (ssize_t)strlen(what) ? 0 : 4;
}

/* Run the impostor against @p to, progressing @p nas meanwhile and for a
 * while after it is gone (so that any EOF is seen); its report in @p line. */
static void run_impostor(cw_na_t **nas, size_t n, const char *to, cw_na_t *as,
                         char *line, size_t len)
{
    char as_uri[URI_LEN];
    unsigned char ser[64];
    cw_na_addr_t *self;
    int rfd;

    self_uri(as, as_uri);
    assert_int_equal(cw_na_addr_self(as, &self), CW_OK);
    assert_true(cw_na_addr_serialize_size(as, self) <= sizeof(ser));
    assert_int_equal(cw_na_addr_serialize(as, ser, sizeof(ser), self), CW_OK);
    cw_na_addr_free(as, self);
    struct forge_hello f = {.to = to, .as = as_uri + strlen("shm://")};
    memcpy(&f.as_uid, ser + 8, 8); /* the id in a serialized address */

    pid_t pid = fork_child(child_forge_hello, &f, &rfd);
    bool got = read_line_progress(nas[0], rfd, line, len, WAIT_MS);
    close(rfd);
    int rc = reap(pid);
    uint64_t until = cw_now_ns() + 200000000ull;
    while (cw_now_ns() < until)
        for (size_t i = 0; i < n; i++)
            cw_na_progress(nas[i], 0, NULL);
    assert_true(got);
    assert_int_equal(rc, 0);
}

/* Send @p msg from @p snd to @p to and have @p rcv take it (bounded). */
static cw_status_t send_and_take(cw_na_t *nas[2], cw_na_addr_t *to,
                                 const char *msg)
{
    struct done s = {0}, r = {0};
    char in[16] = "";
    cw_status_t st = cw_na_msg_send_unexpected(nas[1], msg, strlen(msg) + 1, to,
                                               3, done_cb, &s, NULL);
    if (st != CW_OK)
        return st;
    assert_int_equal(
        cw_na_msg_recv_unexpected(nas[0], in, sizeof(in), done_cb, &r, NULL),
        CW_OK);
    assert_true(wait_done(nas, 2, &s.calls, 1));
    assert_true(wait_done(nas, 2, &r.calls, 1));
    cw_na_addr_free(nas[0], r.source);
    if (s.status != CW_OK)
        return s.status;
    assert_int_equal(r.status, CW_OK);
    assert_string_equal(in, msg);
    return CW_OK;
}

/* The ids of endpoints are not secret.  A HELLO carrying the id of a
 * connected peer used to replace the peer's connection: the peer saw EOF
 * and took the receiver for dead (its next send: CW_DISCONNECTED).  A
 * HELLO now counts only from the process listening under the name it
 * claims (SO_PEERCRED); the impostor's is dropped. */
static void test_forged_hello_connected(void **state)
{
    (void)state;
    cw_na_t *nas[2]; /* receiver, sender */
    cw_na_addr_t *to;
    char ruri[URI_LEN], line[16];

    assert_int_equal(cw_na_open("shm://", CW_NA_LISTEN, NULL, &nas[0]), CW_OK);
    assert_int_equal(cw_na_open("shm://", CW_NA_LISTEN, NULL, &nas[1]), CW_OK);
    self_uri(nas[0], ruri);
    assert_int_equal(cw_na_addr_lookup(nas[1], ruri, &to), CW_OK);
    assert_int_equal(send_and_take(nas, to, "one"), CW_OK);
    uint64_t dropped = cw_na_dropped(nas[0]);

    run_impostor(nas, 2, ruri + strlen("shm://"), nas[1], line, sizeof(line));
    cw_status_t st = send_and_take(nas, to, "two");
    uint64_t dropped_after = cw_na_dropped(nas[0]);

    cw_na_addr_free(nas[1], to);
    cw_na_close(nas[1]);
    cw_na_close(nas[0]);
    assert_int_equal(st, CW_OK);
    assert_string_equal(line, "closed");
    assert_int_equal(dropped_after, dropped + 1);
}

/* The same before the peer connects: the impostor's HELLO created the
 * peer, and its EOF then failed the receive posted for the real one
 * (CW_DISCONNECTED), which is alive and sends afterwards. */
static void test_forged_hello_first(void **state)
{
    (void)state;
    cw_na_t *nas[2]; /* receiver, sender */
    cw_na_addr_t *to, *from, *self;
    char ruri[URI_LEN], line[16], in[16] = "";
    unsigned char ser[64];
    struct done s = {0}, r = {0};

    assert_int_equal(cw_na_open("shm://", CW_NA_LISTEN, NULL, &nas[0]), CW_OK);
    assert_int_equal(cw_na_open("shm://", CW_NA_LISTEN, NULL, &nas[1]), CW_OK);
    self_uri(nas[0], ruri);
    assert_int_equal(cw_na_addr_self(nas[1], &self), CW_OK);
    size_t sz = cw_na_addr_serialize_size(nas[1], self);
    assert_int_equal(cw_na_addr_serialize(nas[1], ser, sizeof(ser), self),
                     CW_OK);
    cw_na_addr_free(nas[1], self);
    assert_int_equal(cw_na_addr_deserialize(nas[0], ser, sz, &from), CW_OK);
    assert_int_equal(cw_na_msg_recv_expected(nas[0], in, sizeof(in), from, 9,
                                             done_cb, &r, NULL),
                     CW_OK);

    run_impostor(nas, 2, ruri + strlen("shm://"), nas[1], line, sizeof(line));
    int early_calls = r.calls;
    assert_int_equal(cw_na_addr_lookup(nas[1], ruri, &to), CW_OK);
    assert_int_equal(
        cw_na_msg_send_expected(nas[1], "late", 5, to, 9, done_cb, &s, NULL),
        CW_OK);
    bool sent = wait_done(nas, 2, &s.calls, 1);
    bool taken = wait_done(nas, 2, &r.calls, 1);

    cw_na_addr_free(nas[1], to);
    cw_na_addr_free(nas[0], from);
    cw_na_close(nas[1]);
    cw_na_close(nas[0]);
    assert_int_equal(early_calls, 0);
    assert_true(sent && taken);
    assert_int_equal(s.status, CW_OK);
    assert_int_equal(r.status, CW_OK);
    assert_string_equal(in, "late");
    assert_string_equal(line, "closed");
}

/* The plugin's state behind an instance (its self address is a peer). */
static struct cw_na_class *hostile_cls(cw_na_t *na)
{
    cw_na_addr_t *self;
    assert_int_equal(cw_na_addr_self(na, &self), CW_OK);
    struct cw_na_class *cls = ((struct shm_peer *)(void *)self)->cls;
    cw_na_addr_free(na, self);
    return cls;
}

static unsigned hostile_npeers(cw_na_t *na)
{
    struct cw_na_class *cls = hostile_cls(na);
    unsigned n = 0;
    for (struct shm_list *l = cls->peers.next; l != &cls->peers; l = l->next)
        n++;
    return n;
}

/* Write one message into the ring as a producer that never connected,
 * claiming sender id @p uid and name @p name; false if the ring is full. */
static bool hostile_push_as(struct shm_seg_hdr *h, uint64_t uid,
                            const char *name, uint32_t tag)
{
    uint64_t pos = atomic_load(&h->tail);
    struct shm_slot *s = &hostile_slots(h)[pos & (h->nslots - 1)];
    if (atomic_load(&s->seq) != pos ||
        !atomic_compare_exchange_strong(&h->tail, &pos, pos + 1))
        return false;
    atomic_store(&s->sender_uid, uid);
    s->type = SHM_MSG_UNEXPECTED;
    s->tag = tag;
    s->len = 4;
    s->name_len = (uint32_t)strlen(name);
    memcpy(s->sender_name, name, s->name_len + 1);
    memcpy(s->data, &tag, 4);
    atomic_store(&s->seq, pos + 1);
    return true;
}

static bool hostile_push(struct shm_seg_hdr *h, uint64_t uid, uint32_t tag)
{
    return hostile_push_as(h, uid, "evil", tag);
}

/* Push @p n messages from ids @p uid0.. into @p rcv's ring, progressing
 * it between ring fulls; with @p take, a receive is posted for each. */
static void hostile_flood(cw_na_t *rcv, struct shm_seg_hdr *h, uint64_t uid0,
                          unsigned n, bool take, struct early_rcv *u)
{
    static unsigned char buf[16];
    unsigned pushed = 0;
    uint64_t deadline = cw_now_ns() + 60000000000ull;
    while (pushed < n && cw_now_ns() < deadline) {
        unsigned batch = 0;
        while (pushed < n && hostile_push(h, uid0 + pushed, pushed)) {
            pushed++;
            batch++;
        }
        for (unsigned i = 0; take && i < batch; i++)
            assert_int_equal(cw_na_msg_recv_unexpected(rcv, buf, sizeof(buf),
                                                       early_cb, u, NULL),
                             CW_OK);
        cw_na_progress(rcv, 0, NULL);
    }
    for (int i = 0; i < 100; i++)
        cw_na_progress(rcv, 0, NULL);
    assert_int_equal(pushed, n);
}

/* A producer that never connects can claim a new sender id in every slot.
 * Each one used to add a peer to the table for good, searched linearly on
 * every message from an unknown sender: 20000 slots left 20000 peers
 * behind and slowed each lookup.  Peers known only from slots are now
 * bounded (SHM_UNSOLICITED_MAX); idle ones are forgotten, and when all are
 * still referenced (their messages wait in the early queue) a slot from
 * yet another unknown sender is dropped and counted.  A peer that has
 * connected is never counted, so a new sender still gets through. */
static void test_unsolicited_ids_bounded(void **state)
{
    (void)state;
    cw_na_t *nas[3]; /* receiver, connected sender, new sender */
    cw_na_addr_t *to, *to2;
    char ruri[URI_LEN], in[16] = "";
    size_t size;
    struct early_rcv u = {0};
    struct done s = {0}, s1 = {0}, r1 = {0};
    const unsigned n = 20000, over = 500;

    assert_int_equal(cw_na_open("shm://", CW_NA_LISTEN, NULL, &nas[0]), CW_OK);
    u.na = nas[0];
    self_uri(nas[0], ruri);
    struct shm_seg_hdr *h = hostile_map(ruri + strlen("shm://"), &size);
    assert_non_null(h);
    assert_int_equal(cw_na_open("shm://", 0, NULL, &nas[1]), CW_OK);
    assert_int_equal(cw_na_addr_lookup(nas[1], ruri, &to), CW_OK);
    assert_int_equal(cw_na_msg_send_unexpected(nas[1], "hello", 6, to, 3,
                                               done_cb, &s1, NULL),
                     CW_OK);
    assert_int_equal(
        cw_na_msg_recv_unexpected(nas[0], in, sizeof(in), done_cb, &r1, NULL),
        CW_OK);
    assert_true(wait_done(nas, 2, &r1.calls, 1));
    cw_na_addr_t *from = r1.source; /* kept: the connected sender */

    /* Every message taken and its source freed: the peers are idle. */
    uint64_t t0 = cw_now_ns();
    hostile_flood(nas[0], h, HOSTILE_UID, n, true, &u);
    uint64_t t1 = cw_now_ns();
    unsigned npeers = hostile_npeers(nas[0]);
    uint64_t dropped = cw_na_dropped(nas[0]);
    print_message("%u unsolicited ids: %u messages taken, %u peers, "
                  "%llu dropped, %.0f ns a message\n",
                  n, u.got, npeers, (unsigned long long)dropped,
                  (double)(t1 - t0) / n);

    /* No receives: each message holds its peer in the early queue. */
    hostile_flood(nas[0], h, HOSTILE_UID + n, SHM_UNSOLICITED_MAX + over, false,
                  &u);
    unsigned npeers2 = hostile_npeers(nas[0]);
    uint64_t dropped2 = cw_na_dropped(nas[0]) - dropped;
    print_message("%u more, none taken: %u peers, %llu dropped\n",
                  SHM_UNSOLICITED_MAX + over, npeers2,
                  (unsigned long long)dropped2);

    /* The connected sender and a new one are still heard. */
    r1 = (struct done){0};
    assert_int_equal(cw_na_msg_recv_expected(nas[0], in, sizeof(in), from, 4,
                                             done_cb, &r1, NULL),
                     CW_OK);
    assert_int_equal(
        cw_na_msg_send_expected(nas[1], "still", 6, to, 4, done_cb, &s1, NULL),
        CW_OK);
    bool still = wait_done(nas, 2, &r1.calls, 1);
    assert_int_equal(cw_na_open("shm://", 0, NULL, &nas[2]), CW_OK);
    assert_int_equal(cw_na_addr_lookup(nas[2], ruri, &to2), CW_OK);
    assert_int_equal(
        cw_na_msg_send_unexpected(nas[2], "new", 4, to2, 5, done_cb, &s, NULL),
        CW_OK);
    bool sent = wait_done(&nas[2], 1, &s.calls, 1);
    unsigned got = u.got, want = SHM_UNSOLICITED_MAX + 1;
    unsigned char buf[16] = "";
    for (unsigned i = 0; i < want; i++)
        assert_int_equal(cw_na_msg_recv_unexpected(nas[0], buf, sizeof(buf),
                                                   early_cb, &u, NULL),
                         CW_OK);
    uint64_t deadline = cw_now_ns() + WAIT_MS * 1000000ull;
    while (u.got < got + want && cw_now_ns() < deadline)
        cw_na_progress(nas[0], 0, NULL);

    cw_na_addr_free(nas[2], to2);
    cw_na_addr_free(nas[1], to);
    cw_na_addr_free(nas[0], from);
    munmap(h, size);
    for (int i = 2; i >= 0; i--)
        cw_na_close(nas[i]);
    assert_true(still);
    assert_int_equal(r1.status, CW_OK);
    assert_string_equal(in, "still");
    assert_int_equal(u.got, got + want);
    assert_string_equal((char *)buf, "new");
    assert_true(sent);
    assert_int_equal(s.status, CW_OK);
    assert_int_equal(dropped, 0);
    assert_true(npeers <= SHM_UNSOLICITED_MAX + 3);
    assert_int_equal(dropped2, over);
    assert_true(npeers2 <= SHM_UNSOLICITED_MAX + 3);
}

/* The serialized address of @p na (name and id: what anyone can learn)
 * in @p ser; its size. */
static size_t hostile_self_ser(cw_na_t *na, unsigned char ser[64])
{
    cw_na_addr_t *self;
    assert_int_equal(cw_na_addr_self(na, &self), CW_OK);
    size_t sz = cw_na_addr_serialize_size(na, self);
    assert_true(sz <= 64);
    assert_int_equal(cw_na_addr_serialize(na, ser, sz, self), CW_OK);
    cw_na_addr_free(na, self);
    return sz;
}

static uint64_t hostile_self_uid(cw_na_t *na)
{
    unsigned char ser[64];
    uint64_t uid;
    hostile_self_ser(na, ser);
    memcpy(&uid, ser + 8, 8);
    return uid;
}

/* A receiver (its segment mapped, returned) and a victim, in @p nas. */
static struct shm_seg_hdr *squat_open(cw_na_t *nas[2], char *ruri, char *vuri,
                                      size_t *size_p)
{
    assert_int_equal(cw_na_open("shm://", CW_NA_LISTEN, NULL, &nas[0]), CW_OK);
    assert_int_equal(cw_na_open("shm://", CW_NA_LISTEN, NULL, &nas[1]), CW_OK);
    self_uri(nas[0], ruri);
    self_uri(nas[1], vuri);
    struct shm_seg_hdr *h = hostile_map(ruri + strlen("shm://"), size_p);
    assert_non_null(h);
    return h;
}

/* A slot from @p uid named @p name in @p rcv's ring, consumed (queued). */
static void hostile_plant(cw_na_t *rcv, struct shm_seg_hdr *h, uint64_t uid,
                          const char *name)
{
    assert_true(hostile_push_as(h, uid, name, 1));
    for (int i = 0; i < 100; i++)
        cw_na_progress(rcv, 0, NULL);
    assert_int_equal(atomic_load(&hostile_slots(h)[0].sender_uid), 0);
}

/* Identity squatting.  A writer that never connects put the id of an
 * endpoint that had not talked to us yet in a slot under another name;
 * the record made from it (known only from the ring) then refused the
 * endpoint's genuine HELLO (the names differ), so our connection to it
 * closed and it took us for dead: any local process knowing an id could
 * cut that endpoint off from us for good.  A verified HELLO now replaces
 * a record known only from the ring, and the forged message queued under
 * it is dropped and counted. */
static void test_squat_id_before_hello(void **state)
{
    (void)state;
    cw_na_t *nas[2]; /* receiver, victim */
    cw_na_addr_t *to;
    char ruri[URI_LEN], vuri[URI_LEN], src[URI_LEN] = "", in[16] = "",
                                       back[16] = "";
    size_t size;
    struct done s = {0}, r = {0}, s2 = {0}, r2 = {0}, s3 = {0};

    struct shm_seg_hdr *h = squat_open(nas, ruri, vuri, &size);
    uint64_t dropped = cw_na_dropped(nas[0]);
    hostile_plant(nas[0], h, hostile_self_uid(nas[1]), "evil");

    assert_int_equal(cw_na_addr_lookup(nas[1], ruri, &to), CW_OK);
    assert_int_equal(
        cw_na_msg_send_unexpected(nas[1], "real", 5, to, 3, done_cb, &s, NULL),
        CW_OK);
    assert_true(wait_done(nas, 2, &s.calls, 1));
    uint64_t until = cw_now_ns() + 200000000ull; /* any EOF is seen */
    while (cw_now_ns() < until)
        for (int i = 0; i < 2; i++)
            cw_na_progress(nas[i], 0, NULL);
    assert_int_equal(
        cw_na_msg_recv_unexpected(nas[0], in, sizeof(in), done_cb, &r, NULL),
        CW_OK);
    assert_true(wait_done(nas, 2, &r.calls, 1));
    assert_int_equal(cw_na_addr_to_string(nas[0], r.source, src, sizeof(src)),
                     CW_OK);
    uint64_t dropped_after = cw_na_dropped(nas[0]) - dropped;

    /* The answer goes back to the source, and the victim talks on. */
    cw_status_t rst = cw_na_msg_recv_expected(nas[1], back, sizeof(back), to, 4,
                                              done_cb, &r2, NULL);
    cw_status_t sst = cw_na_msg_send_expected(nas[0], "back", 5, r.source, 4,
                                              done_cb, &s2, NULL);
    bool answered =
        rst == CW_OK && sst == CW_OK && wait_done(nas, 2, &r2.calls, 1);
    cw_status_t again =
        cw_na_msg_send_unexpected(nas[1], "two", 4, to, 3, done_cb, &s3, NULL);
    if (again == CW_OK && wait_done(nas, 2, &s3.calls, 1))
        again = s3.status;
    print_message("victim's first message: \"%s\" from %s (%llu dropped); "
                  "answer: recv %d send %d status %d \"%s\"; its next "
                  "send: %d\n",
                  in, src, (unsigned long long)dropped_after, (int)rst,
                  (int)sst, answered ? (int)r2.status : -1, back, (int)again);

    cw_na_addr_free(nas[0], r.source);
    cw_na_addr_free(nas[1], to);
    munmap(h, size);
    cw_na_close(nas[1]);
    cw_na_close(nas[0]);
    assert_int_equal(r.status, CW_OK);
    assert_string_equal(in, "real");
    assert_string_equal(src, vuri);
    assert_int_equal(dropped_after, 1); /* the forged message */
    assert_true(answered);
    assert_int_equal(r2.status, CW_OK);
    assert_string_equal(back, "back");
    assert_int_equal(again, CW_OK);
}

/* The same with the name: a slot claiming an endpoint's name under a
 * made-up id made our own lookup of that name take the record from the
 * ring, whose id then disagreed with the endpoint's segment: the lookup
 * failed (CW_DISCONNECTED) although the endpoint was alive. */
static void test_squat_name_before_lookup(void **state)
{
    (void)state;
    cw_na_t *nas[2]; /* receiver (looks up), victim */
    cw_na_addr_t *to = NULL;
    char ruri[URI_LEN], vuri[URI_LEN], in[16] = "";
    size_t size;
    struct done s = {0}, r = {0};

    struct shm_seg_hdr *h = squat_open(nas, ruri, vuri, &size);
    hostile_plant(nas[0], h, HOSTILE_UID + 7, vuri + strlen("shm://"));

    cw_status_t st = cw_na_addr_lookup(nas[0], vuri, &to);
    if (st == CW_OK) {
        assert_int_equal(cw_na_msg_send_unexpected(nas[0], "hi", 3, to, 2,
                                                   done_cb, &s, NULL),
                         CW_OK);
        assert_int_equal(cw_na_msg_recv_unexpected(nas[1], in, sizeof(in),
                                                   done_cb, &r, NULL),
                         CW_OK);
        if (wait_done(nas, 2, &r.calls, 1))
            cw_na_addr_free(nas[1], r.source);
        cw_na_addr_free(nas[0], to);
    }
    print_message("lookup of the name claimed in the ring: %d, received "
                  "\"%s\"\n",
                  (int)st, in);
    munmap(h, size);
    cw_na_close(nas[1]);
    cw_na_close(nas[0]);
    assert_int_equal(st, CW_OK);
    assert_int_equal(r.status, CW_OK);
    assert_string_equal(in, "hi");
}

/* And with an address: the victim's serialized address (its name and id)
 * was resolved by the id alone to the record made from a forged slot, so
 * it came back under the forger's name, and a send to it went to that
 * name (here nobody: CW_UNREACHABLE) instead of the victim. */
static void test_squat_id_deserialize(void **state)
{
    (void)state;
    cw_na_t *nas[2]; /* receiver, victim */
    cw_na_addr_t *to;
    char ruri[URI_LEN], vuri[URI_LEN], name[URI_LEN] = "", in[16] = "";
    unsigned char ser[64];
    size_t size;
    struct done s = {0}, r = {0};

    struct shm_seg_hdr *h = squat_open(nas, ruri, vuri, &size);
    hostile_plant(nas[0], h, hostile_self_uid(nas[1]), "evil");

    size_t sz = hostile_self_ser(nas[1], ser);
    assert_int_equal(cw_na_addr_deserialize(nas[0], ser, sz, &to), CW_OK);
    assert_int_equal(cw_na_addr_to_string(nas[0], to, name, sizeof(name)),
                     CW_OK);
    cw_status_t st =
        cw_na_msg_send_unexpected(nas[0], "hi", 3, to, 2, done_cb, &s, NULL);
    if (st == CW_OK) {
        assert_int_equal(cw_na_msg_recv_unexpected(nas[1], in, sizeof(in),
                                                   done_cb, &r, NULL),
                         CW_OK);
        if (wait_done(nas, 2, &r.calls, 1))
            cw_na_addr_free(nas[1], r.source);
    }
    print_message("victim's address resolved to %s, send %d, received "
                  "\"%s\"\n",
                  name, (int)st, in);
    cw_na_addr_free(nas[0], to);
    munmap(h, size);
    cw_na_close(nas[1]);
    cw_na_close(nas[0]);
    assert_string_equal(name, vuri);
    assert_int_equal(st, CW_OK);
    assert_int_equal(r.status, CW_OK);
    assert_string_equal(in, "hi");
}

/* Rewrites a ring's shared head near its value until told to stop. */
struct head_writer {
    struct shm_seg_hdr *h;
    atomic_bool stop;
    unsigned long writes;
};

static void *head_writer_main(void *arg)
{
    struct head_writer *w = arg;
    uint64_t x = 88172645463325252ull;
    while (!atomic_load_explicit(&w->stop, memory_order_relaxed)) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        uint64_t head = atomic_load(&w->h->head);
        atomic_store(&w->h->head, head + (x % 5) - 2);
        w->writes++;
        for (volatile int i = 0; i < 200; i++)
            ;
    }
    return NULL;
}

/* The ring's read index lives in the shared segment so that producers can
 * see it, and the consumer read it back from there: a producer rewriting
 * it made the consumer skip messages (left published in the ring, which
 * then stalls) or stop.  The consumer now keeps its head to itself and
 * only publishes a copy.  Here a thread rewrites the shared head (by -2..2)
 * while 5000 numbered messages flow; each must arrive once, in order. */
static void test_shared_head_rewritten(void **state)
{
    (void)state;
    cw_na_t *nas[2]; /* receiver, sender */
    cw_na_addr_t *to;
    char ruri[URI_LEN];
    size_t size;
    const unsigned n = 5000;
    unsigned sent = 0, got = 0, wrong = 0, last = 0;
    int first_wrong = -1;
    uint32_t vals[64], in = 0;
    struct done s[64], r;

    assert_int_equal(cw_na_open("shm://", CW_NA_LISTEN,
                                (const char *[]){"slots", "16", NULL}, &nas[0]),
                     CW_OK);
    self_uri(nas[0], ruri);
    struct shm_seg_hdr *h = hostile_map(ruri + strlen("shm://"), &size);
    assert_non_null(h);
    assert_int_equal(cw_na_open("shm://", 0, NULL, &nas[1]), CW_OK);
    assert_int_equal(cw_na_addr_lookup(nas[1], ruri, &to), CW_OK);

    struct head_writer w = {.h = h};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, head_writer_main, &w), 0);
    uint64_t idle_since = cw_now_ns();
    while (got < n && cw_now_ns() - idle_since < 2000000000ull) {
        /* Up to 64 sends in flight, one receive posted at a time. */
        while (sent < n && sent - last < 64) {
            unsigned k = sent % 64;
            vals[k] = sent;
            s[k] = (struct done){0};
            assert_int_equal(cw_na_msg_send_unexpected(nas[1], &vals[k], 4, to,
                                                       1, done_cb, &s[k], NULL),
                             CW_OK);
            sent++;
        }
        r = (struct done){0};
        assert_int_equal(cw_na_msg_recv_unexpected(nas[0], &in, sizeof(in),
                                                   done_cb, &r, NULL),
                         CW_OK);
        while (r.calls == 0 && cw_now_ns() - idle_since < 2000000000ull) {
            cw_na_progress(nas[1], 0, NULL);
            cw_na_progress(nas[0], 0, NULL);
        }
        if (r.calls == 0)
            break; /* stalled; the receive stays posted until close */
        cw_na_addr_free(nas[0], r.source);
        if (in != got && first_wrong < 0)
            first_wrong = (int)in;
        wrong += in != got;
        got++;
        last = in + 1 > last ? in + 1 : last;
        idle_since = cw_now_ns();
        cw_na_progress(nas[1], 0, NULL);
    }
    atomic_store(&w.stop, true);
    pthread_join(t, NULL);
    print_message("%u of %u messages arrived, %u out of place (first: %d), "
                  "%lu rewrites of the shared head\n",
                  got, n, wrong, first_wrong, w.writes);
    cw_na_addr_free(nas[1], to);
    munmap(h, size);
    cw_na_close(nas[1]);
    cw_na_close(nas[0]);
    assert_int_equal(got, n);
    assert_int_equal(wrong, 0);
}

/* Child: exit at once (its pid is then dead). */
static int child_exit(void *arg, int wfd)
{
    (void)arg;
    (void)wfd;
    return 0;
}

/* Every init removes the segments of dead owners, and took the owner from
 * the segment's header, which any peer can write: a dead pid written into
 * a live endpoint's header made the next init unlink the live segment, so
 * nobody could reach that endpoint again.  A segment is now removed only
 * if nobody listens under its name. */
static void test_header_dead_pid_scan(void **state)
{
    (void)state;
    cw_na_t *live, *other, *snd;
    cw_na_addr_t *to = NULL;
    char name[64], uri[URI_LEN], in[16] = "";
    size_t size;
    int rfd;
    struct done s = {0}, r = {0};

    unique_name(name, sizeof(name), "deadpid");
    snprintf(uri, sizeof(uri), "shm://%s", name);
    assert_int_equal(cw_na_open(uri, CW_NA_LISTEN, NULL, &live), CW_OK);
    struct shm_seg_hdr *h = hostile_map(name, &size);
    assert_non_null(h);
    pid_t dead = fork_child(child_exit, NULL, &rfd);
    close(rfd);
    assert_int_equal(reap(dead), 0);
    uint32_t owner_pid = h->owner_pid;
    h->owner_pid = (uint32_t)dead;

    assert_int_equal(cw_na_open("shm://", 0, NULL, &other), CW_OK);
    bool kept = seg_exists(name);
    cw_na_close(other);
    h->owner_pid = owner_pid; /* the hostile writer goes away */
    munmap(h, size);

    assert_int_equal(cw_na_open("shm://", 0, NULL, &snd), CW_OK);
    cw_na_t *nas[2] = {live, snd};
    cw_status_t st = cw_na_addr_lookup(snd, uri, &to);
    if (st == CW_OK) {
        assert_int_equal(cw_na_msg_send_unexpected(snd, "alive", 6, to, 2,
                                                   done_cb, &s, NULL),
                         CW_OK);
        assert_int_equal(
            cw_na_msg_recv_unexpected(live, in, sizeof(in), done_cb, &r, NULL),
            CW_OK);
        assert_true(wait_done(nas, 2, &r.calls, 1));
        cw_na_addr_free(live, r.source);
        cw_na_addr_free(snd, to);
    }
    print_message("after another init: segment %s, lookup %d, received "
                  "\"%s\"\n",
                  kept ? "kept" : "removed", (int)st, in);
    cw_na_close(snd);
    cw_na_close(live);
    assert_true(kept);
    assert_int_equal(st, CW_OK);
    assert_int_equal(r.status, CW_OK);
    assert_string_equal(in, "alive");
}

/* Connect to @p to's socket as a raw client, without a word yet. */
static int hostile_connect(const char *to)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    int n =
        snprintf(sun.sun_path + 1, sizeof(sun.sun_path) - 1, "causeway-%s", to);
    socklen_t slen =
        (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&sun, slen), 0);
    return fd;
}

/* Say HELLO on @p fd as endpoint @p as with id @p uid. */
static void hostile_hello(int fd, const char *as, uint64_t uid)
{
    struct shm_sock_msg m = {.magic = SHM_SEG_MAGIC,
                             .version = SHM_VERSION,
                             .kind = SHM_SOCK_HELLO,
                             .pid = (uint32_t)getpid(),
                             .name_len = (uint32_t)strlen(as),
                             .uid = uid};
    memcpy(m.name, as, m.name_len + 1);
    assert_int_equal(send(fd, &m, sizeof(m), MSG_NOSIGNAL), (ssize_t)sizeof(m));
}

/* At the bound on peers known only from slots (all still referenced), a
 * slot from a new sender is refused unless that sender's HELLO is read
 * first.  Only connections not accepted yet were read: a sender whose
 * connection had been accepted before its HELLO arrived (a receiver
 * polling its sockets between the sender's connect and its HELLO) lost
 * its message although its HELLO was waiting. */
static void test_bound_hello_accepted_earlier(void **state)
{
    (void)state;
    cw_na_t *nas[2]; /* receiver, sender (its name listens in this process) */
    char ruri[URI_LEN], vuri[URI_LEN];
    size_t size;
    struct early_rcv u = {0};

    struct shm_seg_hdr *h = squat_open(nas, ruri, vuri, &size);
    u.na = nas[0];
    struct cw_na_class *cls = hostile_cls(nas[0]);
    hostile_flood(nas[0], h, HOSTILE_UID, SHM_UNSOLICITED_MAX, false, &u);
    assert_int_equal(cls->nunsolicited, SHM_UNSOLICITED_MAX);

    /* The sender connects; the receiver accepts before its HELLO. */
    unsigned accepted = cls->naccepted;
    int fd = hostile_connect(ruri + strlen("shm://"));
    uint64_t deadline = cw_now_ns() + WAIT_MS * 1000000ull;
    while (cls->naccepted == accepted && cw_now_ns() < deadline)
        cw_na_progress(nas[0], 0, NULL);
    assert_int_equal(cls->naccepted, accepted + 1);
    /* Its HELLO, then its message, as a sender does. */
    uint64_t dropped = cw_na_dropped(nas[0]);
    hostile_hello(fd, vuri + strlen("shm://"), hostile_self_uid(nas[1]));
    assert_true(hostile_push_as(h, hostile_self_uid(nas[1]),
                                vuri + strlen("shm://"), 77));
    cw_na_progress(nas[0], 0, NULL);
    uint64_t dropped_after = cw_na_dropped(nas[0]) - dropped;

    unsigned char buf[16];
    for (unsigned i = 0; i < SHM_UNSOLICITED_MAX + 1; i++)
        assert_int_equal(cw_na_msg_recv_unexpected(nas[0], buf, sizeof(buf),
                                                   early_cb, &u, NULL),
                         CW_OK);
    deadline = cw_now_ns() + WAIT_MS * 1000000ull;
    while (u.got < SHM_UNSOLICITED_MAX + 1 && cw_now_ns() < deadline)
        cw_na_progress(nas[0], 0, NULL);
    uint32_t last;
    memcpy(&last, buf, 4);
    print_message("at the bound, a sender accepted before its HELLO: "
                  "%llu dropped, %u of %u taken, last tag %u\n",
                  (unsigned long long)dropped_after, u.got,
                  SHM_UNSOLICITED_MAX + 1, last);

    close(fd);
    munmap(h, size);
    cw_na_close(nas[1]);
    cw_na_close(nas[0]);
    assert_int_equal(dropped_after, 0);
    assert_int_equal(u.got, SHM_UNSOLICITED_MAX + 1);
    assert_int_equal(last, 77);
}

/* An address whose id a record of another name holds (here one made from
 * a forged slot) is a record of its own until attaching it proves the
 * pair.  Each deserialization of the same address made one more such
 * record, which nothing ever freed: an address passed along in every
 * request grew the peer table (searched linearly by name) without end. */
static void test_held_id_deserialize_repeated(void **state)
{
    (void)state;
    cw_na_t *nas[2]; /* receiver, victim */
    char ruri[URI_LEN], vuri[URI_LEN];
    unsigned char ser[64];
    size_t size;

    struct shm_seg_hdr *h = squat_open(nas, ruri, vuri, &size);
    hostile_plant(nas[0], h, hostile_self_uid(nas[1]), "evil");
    size_t sz = hostile_self_ser(nas[1], ser);
    unsigned before = hostile_npeers(nas[0]);
    for (int i = 0; i < 1000; i++) {
        cw_na_addr_t *a;
        assert_int_equal(cw_na_addr_deserialize(nas[0], ser, sz, &a), CW_OK);
        cw_na_addr_free(nas[0], a);
    }
    unsigned after = hostile_npeers(nas[0]);
    print_message("1000 deserializations of an address whose id is held "
                  "under another name: %u peers before, %u after\n",
                  before, after);
    munmap(h, size);
    cw_na_close(nas[1]);
    cw_na_close(nas[0]);
    assert_true(after <= before + 1);
}

/* A slot claimed and never published is skipped after SHM_STUCK_NS if
 * its claimer is no live producer.  A record known only from ring slots
 * (never connected: no producer we know of) counted as a live producer,
 * so a claim under its id stopped the ring for good and nobody was heard
 * again. */
static void test_stuck_slot_slot_only_claimer(void **state)
{
    (void)state;
    cw_na_t *nas[2]; /* receiver, sender */
    cw_na_addr_t *to;
    char ruri[URI_LEN], vuri[URI_LEN], in[16] = "";
    size_t size;
    struct done s = {0}, r = {0};

    struct shm_seg_hdr *h = squat_open(nas, ruri, vuri, &size);
    hostile_plant(nas[0], h, HOSTILE_UID + 9, "ghost");
    /* A claim under that id, never published. */
    uint64_t pos = atomic_load(&h->tail);
    struct shm_slot *sl = &hostile_slots(h)[pos & (h->nslots - 1)];
    assert_true(atomic_compare_exchange_strong(&h->tail, &pos, pos + 1));
    atomic_store(&sl->sender_uid, HOSTILE_UID + 9);
    uint64_t dropped = cw_na_dropped(nas[0]);

    assert_int_equal(cw_na_addr_lookup(nas[1], ruri, &to), CW_OK);
    assert_int_equal(
        cw_na_msg_send_unexpected(nas[1], "after", 6, to, 2, done_cb, &s, NULL),
        CW_OK);
    assert_int_equal(
        cw_na_msg_recv_unexpected(nas[0], in, sizeof(in), done_cb, &r, NULL),
        CW_OK);
    /* The early message of "ghost" takes the first receive. */
    assert_true(wait_done(nas, 2, &r.calls, 1));
    cw_na_addr_free(nas[0], r.source);
    r = (struct done){0};
    assert_int_equal(
        cw_na_msg_recv_unexpected(nas[0], in, sizeof(in), done_cb, &r, NULL),
        CW_OK);
    bool got = wait_done(nas, 2, &r.calls, 1);
    uint64_t dropped_after = cw_na_dropped(nas[0]) - dropped;
    print_message("slot claimed under an id known only from the ring: "
                  "next message %s \"%s\", %llu dropped\n",
                  got ? "received" : "not received", in,
                  (unsigned long long)dropped_after);
    if (got)
        cw_na_addr_free(nas[0], r.source);
    cw_na_addr_free(nas[1], to);
    munmap(h, size);
    cw_na_close(nas[1]);
    cw_na_close(nas[0]);
    assert_true(got);
    assert_string_equal(in, "after");
    assert_int_equal(dropped_after, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slot_ahead_of_tail),
        cmocka_unit_test(test_header_changed_after_check),
        cmocka_unit_test(test_slot_changed_after_check),
        cmocka_unit_test(test_header_pid_forged),
        cmocka_unit_test(test_forged_hello_connected),
        cmocka_unit_test(test_forged_hello_first),
        cmocka_unit_test(test_unsolicited_ids_bounded),
        cmocka_unit_test(test_squat_id_before_hello),
        cmocka_unit_test(test_squat_name_before_lookup),
        cmocka_unit_test(test_squat_id_deserialize),
        cmocka_unit_test(test_shared_head_rewritten),
        cmocka_unit_test(test_header_dead_pid_scan),
        cmocka_unit_test(test_bound_hello_accepted_earlier),
        cmocka_unit_test(test_held_id_deserialize_repeated),
        cmocka_unit_test(test_stuck_slot_slot_only_claimer),
    };
    cw_log_init();
    int rc = cmocka_run_group_tests_name("na-shm-hostile", tests, NULL, NULL);
    cw_plugins_unload();
    return rc;
}
