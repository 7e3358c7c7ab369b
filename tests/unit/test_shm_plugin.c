/*
 * na-shm specific tests, through the core NA API (the generic behaviour is
 * covered by tests/conformance): names and parameters, several endpoints
 * in one process, stale segments of killed processes (at init and at
 * lookup), back-pressure on a 4-slot ring across processes, a killed
 * receiver failing backlogged sends, hostile serialized addresses and
 * memory handles, forged handle pids, RMA split over many iovecs, and the
 * error that names the fix when the kernel refuses cross-memory attach,
 * a ring slot claimed by a producer killed before publishing it, local
 * connections that never say HELLO, and instances driven from two threads.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <causeway/log.h>
#include <causeway/na.h>

#include "shm.h" /* ring layout, to play a producer that dies mid-push */

#define WAIT_MS 5000u
#define URI_LEN 256

struct done {
    int calls;
    cw_status_t status;
    size_t len;
    uint32_t tag;
    cw_na_addr_t *source;
};

static void done_cb(const struct cw_na_cb_info *info)
{
    struct done *d = info->arg;
    d->calls++;
    d->status = info->status;
    if (info->type == CW_NA_OP_RECV_UNEXPECTED) {
        d->len = info->u.recv_unexpected.len;
        d->tag = info->u.recv_unexpected.tag;
        d->source = info->u.recv_unexpected.source;
    } else if (info->type == CW_NA_OP_RECV_EXPECTED) {
        d->len = info->u.recv_expected.len;
    }
}

/* Progress every instance until d->calls >= want (bounded). */
static bool wait_done(cw_na_t **nas, size_t n, const int *calls, int want)
{
    uint64_t deadline = cw_now_ns() + WAIT_MS * 1000000ull;
    while (*calls < want) {
        if (cw_now_ns() > deadline)
            return false;
        for (size_t i = 0; i < n; i++)
            cw_na_progress(nas[i], 0, NULL);
    }
    return true;
}

static void unique_name(char *buf, size_t len, const char *what)
{
    static unsigned counter;
    snprintf(buf, len, "t%d-%s-%u", (int)getpid(), what, counter++);
}

static bool seg_exists(const char *name)
{
    char path[128];
    struct stat st;
    snprintf(path, sizeof(path), "/dev/shm/causeway-%s", name);
    return stat(path, &st) == 0;
}

static void self_uri(cw_na_t *na, char *buf)
{
    cw_na_addr_t *self;
    assert_int_equal(cw_na_addr_self(na, &self), CW_OK);
    assert_int_equal(cw_na_addr_to_string(na, self, buf, URI_LEN), CW_OK);
    cw_na_addr_free(na, self);
}

/* Child process helpers: the child reports on a pipe, the parent reaps. */
static pid_t fork_child(int (*fn)(void *, int), void *arg, int *rfd_p)
{
    int pfd[2];
    assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(pfd[0]);
        alarm(60);
        _exit(fn(arg, pfd[1]));
    }
    close(pfd[1]);
    *rfd_p = pfd[0];
    return pid;
}

static bool read_line(int fd, char *buf, size_t len)
{
    size_t got = 0;
    while (got + 1 < len) {
        ssize_t n = read(fd, buf + got, 1);
        if (n <= 0)
            return false;
        if (buf[got] == '\n') {
            buf[got] = '\0';
            return true;
        }
        got++;
    }
    return false;
}

static int reap(pid_t pid)
{
    int status = 0;
    for (int i = 0; i < 1000; i++) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return 255;
}

/* ------------------------------------------------------------------ */

static void test_names_and_params(void **state)
{
    (void)state;
    cw_na_t *a = NULL, *b = NULL;
    char name[64], uri[URI_LEN], got[URI_LEN];
    const char *bad_slots[] = {"slots", "3", NULL};
    const char *ok_slots[] = {"slots", "4", NULL};

    assert_int_equal(cw_na_open("shm://bad/name", 0, NULL, &a),
                     CW_INVALID_ARG);
    assert_int_equal(cw_na_open("shm://.hidden", 0, NULL, &a),
                     CW_INVALID_ARG);
    assert_int_equal(
        cw_na_open("shm://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 0,
                   NULL, &a),
        CW_INVALID_ARG); /* 48 characters: one too many */
    assert_int_equal(cw_na_open("shm://", 0, bad_slots, &a), CW_INVALID_ARG);

    unique_name(name, sizeof(name), "n");
    snprintf(uri, sizeof(uri), "shm://%s", name);
    assert_int_equal(cw_na_open(uri, CW_NA_LISTEN, ok_slots, &a), CW_OK);
    self_uri(a, got);
    assert_string_equal(got, uri);
    assert_true(seg_exists(name));
    /* The name is held while the instance lives. */
    assert_int_equal(cw_na_open(uri, CW_NA_LISTEN, NULL, &b),
                     CW_ADDR_IN_USE);
    assert_int_equal(cw_na_caps(a)->max_unexpected_size >= 4096 + 128, true);
    cw_na_close(a);
    assert_false(seg_exists(name));
    /* And free again afterwards. */
    assert_int_equal(cw_na_open(uri, CW_NA_LISTEN, NULL, &b), CW_OK);
    cw_na_close(b);
}

static void test_multiple_endpoints(void **state)
{
    (void)state;
    enum { N = 3 };
    cw_na_t *na[N];
    char uri[N][URI_LEN];
    cw_na_addr_t *to[N][N] = {{NULL}};
    struct done r[N][N], s[N][N];
    char in[N][N][64], out[N][N][64];

    for (int i = 0; i < N; i++) {
        assert_int_equal(cw_na_open("shm://", CW_NA_LISTEN, NULL, &na[i]),
                         CW_OK);
        self_uri(na[i], uri[i]);
    }
    memset(r, 0, sizeof(r));
    memset(s, 0, sizeof(s));
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            if (i == j)
                continue;
            assert_int_equal(cw_na_addr_lookup(na[i], uri[j], &to[i][j]),
                             CW_OK);
        }
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            if (i == j)
                continue;
            snprintf(out[i][j], 64, "from %d to %d", i, j);
            assert_int_equal(cw_na_msg_recv_expected(na[j], in[j][i], 64,
                                                     to[j][i], 7, done_cb,
                                                     &r[j][i], NULL),
                             CW_OK);
            assert_int_equal(cw_na_msg_send_expected(na[i], out[i][j], 64,
                                                     to[i][j], 7, done_cb,
                                                     &s[i][j], NULL),
                             CW_OK);
        }
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            if (i == j)
                continue;
            assert_true(wait_done(na, N, &r[j][i].calls, 1));
            assert_true(wait_done(na, N, &s[i][j].calls, 1));
            assert_int_equal(r[j][i].status, CW_OK);
            assert_int_equal(r[j][i].len, 64);
            char want[64];
            snprintf(want, sizeof(want), "from %d to %d", i, j);
            assert_string_equal(in[j][i], want);
        }
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < N; j++)
            cw_na_addr_free(na[i], to[i][j]);
    }
    for (int i = 0; i < N; i++)
        cw_na_close(na[i]);
}

/* Child: open two named endpoints, report, then wait to be killed. */
static int child_hold(void *arg, int wfd)
{
    const char *base = arg;
    char uri[URI_LEN];
    cw_na_t *a, *b;
    snprintf(uri, sizeof(uri), "shm://%s-a", base);
    if (cw_na_open(uri, CW_NA_LISTEN, NULL, &a) != CW_OK)
        return 1;
    snprintf(uri, sizeof(uri), "shm://%s-b", base);
    if (cw_na_open(uri, CW_NA_LISTEN, NULL, &b) != CW_OK)
        return 1;
    if (write(wfd, "up\n", 3) != 3)
        return 1;
    pause();
    return 0;
}

static void test_stale_segments(void **state)
{
    (void)state;
    char base[64], name[96], uri[URI_LEN], line[64];
    int rfd;
    cw_na_t *na, *na2;
    cw_na_addr_t *addr = NULL;

    unique_name(base, sizeof(base), "stale");
    pid_t pid = fork_child(child_hold, base, &rfd);
    assert_true(read_line(rfd, line, sizeof(line)));
    close(rfd);
    kill(pid, SIGKILL); /* no cleanup: its segments stay behind */
    assert_int_equal(reap(pid), 128);
    snprintf(name, sizeof(name), "%s-a", base);
    assert_true(seg_exists(name));
    snprintf(name, sizeof(name), "%s-b", base);
    assert_true(seg_exists(name));

    /* Init removes segments whose owner is gone... */
    assert_int_equal(cw_na_open("shm://", CW_NA_LISTEN, NULL, &na), CW_OK);
    assert_false(seg_exists(name));
    snprintf(name, sizeof(name), "%s-a", base);
    assert_false(seg_exists(name));
    cw_na_close(na);

    /* ... and so does a lookup that finds one. */
    pid = fork_child(child_hold, base, &rfd);
    assert_true(read_line(rfd, line, sizeof(line)));
    close(rfd);
    assert_int_equal(cw_na_open("shm://", CW_NA_LISTEN, NULL, &na), CW_OK);
    kill(pid, SIGKILL);
    assert_int_equal(reap(pid), 128);
    assert_true(seg_exists(name));
    snprintf(uri, sizeof(uri), "shm://%s", name);
    assert_int_equal(cw_na_addr_lookup(na, uri, &addr), CW_UNREACHABLE);
    assert_false(seg_exists(name));
    /* A dead process' name can be taken over at once. */
    assert_int_equal(cw_na_open(uri, CW_NA_LISTEN, NULL, &na2), CW_OK);
    cw_na_close(na2);
    cw_na_close(na);
    snprintf(name, sizeof(name), "%s-b", base);
    if (seg_exists(name)) { /* removed by the next init; do it here */
        assert_int_equal(cw_na_open("shm://", 0, NULL, &na), CW_OK);
        cw_na_close(na);
    }
    assert_false(seg_exists(name));
}

/* Child: a 4-slot receiver that takes messages one at a time, checks the
 * order and answers with how many arrived in order. */
#define BP_COUNT 2000
static int child_slow_receiver(void *arg, int wfd)
{
    (void)arg;
    const char *params[] = {"slots", "4", NULL};
    cw_na_t *na;
    char uri[URI_LEN], line[URI_LEN + 2];
    uint32_t in_order = 0;
    cw_na_addr_t *peer = NULL;
    if (cw_na_open("shm://", CW_NA_LISTEN, params, &na) != CW_OK)
        return 1;
    cw_na_addr_t *self;
    cw_na_addr_self(na, &self);
    cw_na_addr_to_string(na, self, uri, sizeof(uri));
    cw_na_addr_free(na, self);
    int n = snprintf(line, sizeof(line), "%s\n", uri);
    if (write(wfd, line, (size_t)n) != n)
        return 1;
    for (uint32_t i = 0; i < BP_COUNT; i++) {
        uint32_t v = 0;
        struct done d = {0};
        if (cw_na_msg_recv_unexpected(na, &v, sizeof(v), done_cb, &d, NULL))
            return 2;
        if (!wait_done(&na, 1, &d.calls, 1) || d.status != CW_OK)
            return 3;
        if (v == i)
            in_order++;
        if (peer)
            cw_na_addr_free(na, d.source);
        else
            peer = d.source;
        if (i % 100 == 0)
            usleep(1000); /* stay behind the sender */
    }
    struct done s = {0};
    if (cw_na_msg_send_expected(na, &in_order, sizeof(in_order), peer, 5,
                                done_cb, &s, NULL) ||
        !wait_done(&na, 1, &s.calls, 1))
        return 4;
    cw_na_addr_free(na, peer);
    /* Linger so the answer is read before the segment goes away. */
    for (int i = 0; i < 100; i++) {
        cw_na_progress(na, 0, NULL);
        usleep(1000);
    }
    cw_na_close(na);
    return 0;
}

static void test_backpressure_cross_process(void **state)
{
    (void)state;
    int rfd;
    char uri[URI_LEN];
    static uint32_t vals[BP_COUNT];
    static struct done sd[BP_COUNT];
    struct done rd = {0};
    uint32_t in_order = 0;
    cw_na_t *na;
    cw_na_addr_t *srv;

    pid_t pid = fork_child(child_slow_receiver, NULL, &rfd);
    assert_true(read_line(rfd, uri, sizeof(uri)));
    close(rfd);
    assert_int_equal(cw_na_open("shm://", CW_NA_LISTEN, NULL, &na), CW_OK);
    assert_int_equal(cw_na_addr_lookup(na, uri, &srv), CW_OK);
    assert_int_equal(cw_na_msg_recv_expected(na, &in_order, sizeof(in_order),
                                             srv, 5, done_cb, &rd, NULL),
                     CW_OK);
    memset(sd, 0, sizeof(sd));
    /* All posted at once: 4 fit, the rest wait in the backlog. */
    for (uint32_t i = 0; i < BP_COUNT; i++) {
        vals[i] = i;
        assert_int_equal(cw_na_msg_send_unexpected(na, &vals[i],
                                                   sizeof(vals[i]), srv, 1,
                                                   done_cb, &sd[i], NULL),
                         CW_OK);
    }
    for (uint32_t i = 0; i < BP_COUNT; i++) {
        assert_true(wait_done(&na, 1, &sd[i].calls, 1));
        assert_int_equal(sd[i].status, CW_OK);
        assert_int_equal(sd[i].calls, 1);
    }
    assert_true(wait_done(&na, 1, &rd.calls, 1));
    assert_int_equal(rd.status, CW_OK);
    assert_int_equal(in_order, BP_COUNT);
    cw_na_addr_free(na, srv);
    cw_na_close(na);
    assert_int_equal(reap(pid), 0);
}

/* Child: a 4-slot endpoint that never makes progress. */
static int child_stuck(void *arg, int wfd)
{
    (void)arg;
    const char *params[] = {"slots", "4", NULL};
    cw_na_t *na;
    char uri[URI_LEN], line[URI_LEN + 2];
    if (cw_na_open("shm://", CW_NA_LISTEN, params, &na) != CW_OK)
        return 1;
    self_uri(na, uri);
    int n = snprintf(line, sizeof(line), "%s\n", uri);
    if (write(wfd, line, (size_t)n) != n)
        return 1;
    pause();
    return 0;
}

static void test_killed_receiver_fails_backlog(void **state)
{
    (void)state;
    enum { N = 12 };
    int rfd;
    char uri[URI_LEN], msg[32] = "x";
    struct done sd[N], rd = {0};
    char in[32];
    cw_na_t *na;
    cw_na_addr_t *peer;

    pid_t pid = fork_child(child_stuck, NULL, &rfd);
    assert_true(read_line(rfd, uri, sizeof(uri)));
    close(rfd);
    assert_int_equal(cw_na_open("shm://", CW_NA_LISTEN, NULL, &na), CW_OK);
    assert_int_equal(cw_na_addr_lookup(na, uri, &peer), CW_OK);
    memset(sd, 0, sizeof(sd));
    for (int i = 0; i < N; i++)
        assert_int_equal(cw_na_msg_send_unexpected(na, msg, sizeof(msg), peer,
                                                   1, done_cb, &sd[i], NULL),
                         CW_OK);
    assert_int_equal(cw_na_msg_recv_expected(na, in, sizeof(in), peer, 2,
                                             done_cb, &rd, NULL),
                     CW_OK);
    /* The ring takes 4; the others stay queued while the peer lives. */
    for (int i = 0; i < 4; i++)
        assert_true(wait_done(&na, 1, &sd[i].calls, 1));
    for (int i = 0; i < 200; i++)
        cw_na_progress(na, 0, NULL);
    assert_int_equal(sd[N - 1].calls, 0);
    assert_int_equal(rd.calls, 0);

    uint64_t t0 = cw_now_ns();
    kill(pid, SIGKILL);
    assert_int_equal(reap(pid), 128);
    for (int i = 4; i < N; i++) {
        assert_true(wait_done(&na, 1, &sd[i].calls, 1));
        assert_int_equal(sd[i].status, CW_DISCONNECTED);
    }
    assert_true(wait_done(&na, 1, &rd.calls, 1));
    assert_int_equal(rd.status, CW_DISCONNECTED);
    /* Noticed within a second, not at some RPC deadline. */
    assert_true(cw_now_ns() - t0 < 1000000000ull);
    /* New operations to it fail at once. */
    struct done late = {0};
    assert_int_not_equal(cw_na_msg_send_unexpected(na, msg, sizeof(msg), peer,
                                                   1, done_cb, &late, NULL),
                         CW_OK);
    assert_int_equal(cw_na_addr_lookup(na, uri, &(cw_na_addr_t *){NULL}),
                     CW_UNREACHABLE);
    cw_na_addr_free(na, peer);
    cw_na_close(na);
}

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void test_hostile_deserialize(void **state)
{
    (void)state;
    cw_na_t *na;
    cw_na_addr_t *self, *a;
    cw_na_mem_t *mem, *m;
    unsigned char abuf[128], mbuf[1024], fuzz[1024];
    char data[3][100];
    struct cw_na_segment segs[3] = {
        {data[0], 100}, {data[1], 100}, {data[2], 100}};

    assert_int_equal(cw_na_open("shm://", CW_NA_LISTEN, NULL, &na), CW_OK);
    assert_int_equal(cw_na_addr_self(na, &self), CW_OK);
    size_t alen = cw_na_addr_serialize_size(na, self);
    assert_true(alen <= sizeof(abuf));
    assert_int_equal(cw_na_addr_serialize(na, abuf, alen, self), CW_OK);
    assert_int_equal(cw_na_mem_register(na, segs, 3, CW_NA_MEM_READ, &mem),
                     CW_OK);
    size_t mlen = cw_na_mem_serialize_size(na, mem);
    assert_true(mlen <= sizeof(mbuf));
    assert_int_equal(cw_na_mem_serialize(na, mbuf, mlen, mem), CW_OK);

    /* Every truncation and extension is refused. */
    for (size_t n = 0; n < alen + 8; n++) {
        if (n == alen)
            continue;
        assert_int_not_equal(cw_na_addr_deserialize(na, abuf, n, &a), CW_OK);
    }
    for (size_t n = 0; n < mlen + 16; n++) {
        if (n == mlen)
            continue;
        assert_int_not_equal(cw_na_mem_deserialize(na, mbuf, n, &m), CW_OK);
    }
    assert_int_equal(cw_na_addr_deserialize(na, abuf, alen, &a), CW_OK);
    assert_true(cw_na_addr_cmp(na, a, self));
    cw_na_addr_free(na, a);
    assert_int_equal(cw_na_mem_deserialize(na, mbuf, mlen, &m), CW_OK);
    cw_na_mem_release(na, m);

    /* A name with a '/' in it, a segment count that lies, lengths that
     * do not add up, a base that wraps. */
    memcpy(fuzz, abuf, alen);
    fuzz[16] = '/';
    assert_int_equal(cw_na_addr_deserialize(na, fuzz, alen, &a), CW_PROTOCOL);
    memcpy(fuzz, mbuf, mlen);
    fuzz[12] = 4; /* nsegs */
    assert_int_equal(cw_na_mem_deserialize(na, fuzz, mlen, &m), CW_PROTOCOL);
    memcpy(fuzz, mbuf, mlen);
    fuzz[16] ^= 1; /* total */
    assert_int_equal(cw_na_mem_deserialize(na, fuzz, mlen, &m), CW_PROTOCOL);
    memcpy(fuzz, mbuf, mlen);
    memset(fuzz + 24, 0xff, 8); /* base = ~0 */
    assert_int_equal(cw_na_mem_deserialize(na, fuzz, mlen, &m), CW_PROTOCOL);

    /* Random mutations: an error or a consistent handle, never a crash. */
    for (int i = 0; i < 20000; i++) {
        size_t n = (size_t)(rng() % 96);
        memcpy(fuzz, (i & 1) ? abuf : mbuf, 96);
        for (int k = 0; k < 3; k++)
            fuzz[rng() % 96] = (unsigned char)rng();
        if (i & 1) {
            if (cw_na_addr_deserialize(na, fuzz, n, &a) == CW_OK)
                cw_na_addr_free(na, a);
        } else if (cw_na_mem_deserialize(na, fuzz, n, &m) == CW_OK) {
            cw_na_mem_release(na, m);
        }
    }
    cw_na_mem_release(na, mem);
    cw_na_addr_free(na, self);
    cw_na_close(na);
}

static void test_forged_handle_pid(void **state)
{
    (void)state;
    cw_na_t *a, *b;
    char ub[URI_LEN];
    cw_na_addr_t *to_b;
    static char src[4096], dst[4096];
    struct cw_na_segment ls = {src, sizeof(src)}, rs = {dst, sizeof(dst)};
    cw_na_mem_t *local, *remote_b, *remote;
    unsigned char buf[256];
    struct done d = {0};

    assert_int_equal(cw_na_open("shm://", CW_NA_LISTEN, NULL, &a), CW_OK);
    assert_int_equal(cw_na_open("shm://", CW_NA_LISTEN, NULL, &b), CW_OK);
    self_uri(b, ub);
    assert_int_equal(cw_na_addr_lookup(a, ub, &to_b), CW_OK);
    assert_int_equal(cw_na_mem_register(a, &ls, 1, CW_NA_MEM_READ, &local),
                     CW_OK);
    assert_int_equal(cw_na_mem_register(b, &rs, 1,
                                        CW_NA_MEM_READ | CW_NA_MEM_WRITE,
                                        &remote_b),
                     CW_OK);
    size_t n = cw_na_mem_serialize_size(b, remote_b);
    assert_int_equal(cw_na_mem_serialize(b, buf, n, remote_b), CW_OK);
    /* Point the handle at another process (pid 1). */
    uint32_t one = 1;
    memcpy(buf + 8, &one, 4);
    assert_int_equal(cw_na_mem_deserialize(a, buf, n, &remote), CW_OK);
    assert_int_equal(cw_na_put(a, local, 0, remote, 0, 16, to_b, done_cb, &d,
                               NULL),
                     CW_BAD_HANDLE);
    assert_int_equal(d.calls, 0);
    cw_na_mem_release(a, remote);
    cw_na_mem_release(a, local);
    cw_na_mem_release(b, remote_b);
    cw_na_addr_free(a, to_b);
    cw_na_close(a);
    cw_na_close(b);
}

/* Many small segments on both sides, misaligned: more pieces than one
 * process_vm_writev call takes, so the copy is split. */
static void test_rma_many_iovecs(void **state)
{
    (void)state;
    enum { NL = 1024, LS = 1000, NR = 1000, RS = 1031 };
    cw_na_t *a, *b;
    char ub[URI_LEN];
    cw_na_addr_t *to_b;
    static struct cw_na_segment lsegs[NL], rsegs[NR];
    cw_na_mem_t *local, *rb, *remote;
    unsigned char hbuf[32 * 1024];
    struct done d = {0};
    size_t len = (size_t)NL * LS - 777;

    for (int i = 0; i < NL; i++) {
        lsegs[i].base = malloc(LS);
        lsegs[i].len = LS;
        for (int k = 0; k < LS; k++)
            ((unsigned char *)lsegs[i].base)[k] =
                (unsigned char)((size_t)i * LS + (size_t)k);
    }
    for (int i = 0; i < NR; i++) {
        rsegs[i].base = calloc(1, RS);
        rsegs[i].len = RS;
    }
    assert_int_equal(cw_na_open("shm://", CW_NA_LISTEN, NULL, &a), CW_OK);
    assert_int_equal(cw_na_open("shm://", CW_NA_LISTEN, NULL, &b), CW_OK);
    self_uri(b, ub);
    assert_int_equal(cw_na_addr_lookup(a, ub, &to_b), CW_OK);
    assert_int_equal(cw_na_mem_register(a, lsegs, NL, CW_NA_MEM_READ, &local),
                     CW_OK);
    assert_int_equal(cw_na_mem_register(b, rsegs, NR, CW_NA_MEM_WRITE, &rb),
                     CW_OK);
    size_t n = cw_na_mem_serialize_size(b, rb);
    assert_true(n <= sizeof(hbuf));
    assert_int_equal(cw_na_mem_serialize(b, hbuf, n, rb), CW_OK);
    assert_int_equal(cw_na_mem_deserialize(a, hbuf, n, &remote), CW_OK);
    assert_int_equal(cw_na_put(a, local, 777, remote, 5, len, to_b, done_cb,
                               &d, NULL),
                     CW_OK);
    cw_na_t *both[2] = {a, b};
    assert_true(wait_done(both, 2, &d.calls, 1));
    assert_int_equal(d.status, CW_OK);
    /* Byte k of the transfer came from local offset 777 + k. */
    for (size_t k = 0; k < len; k += 997) {
        size_t ro = 5 + k, lo = 777 + k;
        unsigned char got = ((unsigned char *)rsegs[ro / RS].base)[ro % RS];
        assert_int_equal(got, (unsigned char)lo);
    }
    cw_na_mem_release(a, remote);
    cw_na_mem_release(a, local);
    cw_na_mem_release(b, rb);
    cw_na_addr_free(a, to_b);
    cw_na_close(a);
    cw_na_close(b);
    for (int i = 0; i < NL; i++)
        free(lsegs[i].base);
    for (int i = 0; i < NR; i++)
        free(rsegs[i].base);
}

/* Target: a non-dumpable process holding a registered buffer. */
static int child_nondumpable_target(void *arg, int wfd)
{
    (void)arg;
    static char buf[4096];
    struct cw_na_segment seg = {buf, sizeof(buf)};
    cw_na_t *na;
    cw_na_mem_t *mem;
    unsigned char h[256];
    char uri[URI_LEN], line[URI_LEN + 600];
    if (cw_na_open("shm://", CW_NA_LISTEN, NULL, &na) != CW_OK ||
        cw_na_mem_register(na, &seg, 1, CW_NA_MEM_READ, &mem) != CW_OK)
        return 1;
    size_t n = cw_na_mem_serialize_size(na, mem);
    if (n > sizeof(h) || cw_na_mem_serialize(na, h, n, mem) != CW_OK)
        return 1;
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
        return 1;
    self_uri(na, uri);
    int k = snprintf(line, sizeof(line), "%s ", uri);
    for (size_t i = 0; i < n; i++)
        k += snprintf(line + k, sizeof(line) - (size_t)k, "%02x", h[i]);
    k += snprintf(line + k, sizeof(line) - (size_t)k, "\n");
    if (write(wfd, line, (size_t)k) != k)
        return 1;
    for (;;) { /* answer handshakes until killed */
        cw_na_progress_wait(na, 100, NULL);
    }
}

struct eperm_arg {
    char uri[URI_LEN];
    unsigned char handle[256];
    size_t handle_len;
};

/* Initiator: without CAP_SYS_PTRACE, get from the target; the log goes to
 * the pipe so the parent can read the advice. */
static int child_eperm_initiator(void *arg, int wfd)
{
    struct eperm_arg *ea = arg;
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    static char buf[4096];
    struct cw_na_segment seg = {buf, sizeof(buf)};
    cw_na_t *na;
    cw_na_addr_t *peer;
    cw_na_mem_t *local, *remote;
    struct done d = {0};

    if (syscall(SYS_capget, &hdr, data) != 0)
        return 10;
    data[0].effective &= ~(1u << CAP_SYS_PTRACE);
    data[0].permitted &= ~(1u << CAP_SYS_PTRACE);
    data[0].inheritable &= ~(1u << CAP_SYS_PTRACE);
    if (syscall(SYS_capset, &hdr, data) != 0)
        return 11;
    if (dup2(wfd, 2) < 0)
        return 12;
    if (cw_na_open("shm://", CW_NA_LISTEN, NULL, &na) != CW_OK ||
        cw_na_addr_lookup(na, ea->uri, &peer) != CW_OK ||
        cw_na_mem_register(na, &seg, 1, CW_NA_MEM_WRITE, &local) != CW_OK ||
        cw_na_mem_deserialize(na, ea->handle, ea->handle_len, &remote) !=
            CW_OK)
        return 13;
    if (cw_na_get(na, local, 0, remote, 0, 64, peer, done_cb, &d, NULL) !=
            CW_OK ||
        !wait_done(&na, 1, &d.calls, 1))
        return 14;
    cw_na_mem_release(na, remote);
    cw_na_mem_release(na, local);
    cw_na_addr_free(na, peer);
    cw_na_close(na);
    return d.status == CW_PERMISSION ? 0 : 15;
}

static void test_rma_eperm_names_fix(void **state)
{
    (void)state;
    static struct eperm_arg ea;
    char line[URI_LEN + 600], log[8192];
    int tfd, ifd;

    pid_t target = fork_child(child_nondumpable_target, NULL, &tfd);
    assert_true(read_line(tfd, line, sizeof(line)));
    close(tfd);
    char *sp = strchr(line, ' ');
    assert_non_null(sp);
    *sp = '\0';
    size_t ul = strlen(line);
    assert_true(ul < sizeof(ea.uri));
    memcpy(ea.uri, line, ul + 1);
    ea.handle_len = strlen(sp + 1) / 2;
    for (size_t i = 0; i < ea.handle_len; i++) {
        unsigned v;
        assert_int_equal(sscanf(sp + 1 + 2 * i, "%2x", &v), 1);
        ea.handle[i] = (unsigned char)v;
    }
    pid_t init = fork_child(child_eperm_initiator, &ea, &ifd);
    size_t got = 0;
    ssize_t n;
    while (got + 1 < sizeof(log) &&
           (n = read(ifd, log + got, sizeof(log) - 1 - got)) > 0)
        got += (size_t)n;
    log[got] = '\0';
    close(ifd);
    int rc = reap(init);
    kill(target, SIGKILL);
    reap(target);
    print_message("# initiator exit %d, log:\n%s", rc, log);
    assert_int_equal(rc, 0);
    /* The message names the call, the kernel's text and the fix. */
    assert_non_null(strstr(log, "process_vm_readv"));
    assert_non_null(strstr(log, "Operation not permitted"));
    assert_non_null(strstr(log, "CAP_SYS_PTRACE"));
    assert_non_null(strstr(log, "same user"));
}

/* Child: talk to the receiver once, then claim a slot in its ring the way
 * a producer does and stop before publishing it; the parent kills us. */
static int child_claim_and_die(void *arg, int wfd)
{
    const char *rname = arg;
    char uri[URI_LEN], me[URI_LEN], path[URI_LEN + 16];
    cw_na_t *na;
    cw_na_addr_t *r;
    struct done d = {0};
    snprintf(uri, sizeof(uri), "shm://%s", rname);
    if (cw_na_open("shm://", CW_NA_LISTEN, NULL, &na) != CW_OK ||
        cw_na_addr_lookup(na, uri, &r) != CW_OK ||
        cw_na_msg_send_unexpected(na, "hi", 3, r, 1, done_cb, &d, NULL) !=
            CW_OK ||
        !wait_done(&na, 1, &d.calls, 1))
        return 1;
    self_uri(na, me);
    snprintf(path, sizeof(path), "/causeway-%s", me + strlen("shm://"));
    int fd = shm_open(path, O_RDONLY, 0);
    struct shm_seg_hdr own;
    if (fd < 0 || pread(fd, &own, sizeof(own), 0) != (ssize_t)sizeof(own))
        return 2;
    close(fd);
    snprintf(path, sizeof(path), "/causeway-%s", rname);
    fd = shm_open(path, O_RDWR, 0);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        return 3;
    struct shm_seg_hdr *h = mmap(NULL, (size_t)st.st_size,
                                 PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (h == MAP_FAILED)
        return 4;
    struct shm_slot *slots = (struct shm_slot *)(void *)(h + 1);
    uint64_t pos = atomic_fetch_add(&h->tail, 1);
    atomic_store(&slots[pos & (h->nslots - 1)].sender_uid, own.uid);
    if (write(wfd, "claimed\n", 8) != 8)
        return 5;
    pause();
    return 0;
}

static void test_dead_producer_slot_skipped(void **state)
{
    (void)state;
    cw_na_t *rcv, *snd;
    char ruri[URI_LEN], line[64], in[64];
    cw_na_addr_t *to_r;
    struct done r1 = {0}, r2 = {0}, s2 = {0};
    int rfd;

    assert_int_equal(cw_na_open("shm://", CW_NA_LISTEN, NULL, &rcv), CW_OK);
    self_uri(rcv, ruri);
    assert_int_equal(cw_na_msg_recv_unexpected(rcv, in, sizeof(in), done_cb,
                                               &r1, NULL),
                     CW_OK);
    pid_t pid = fork_child(child_claim_and_die, ruri + strlen("shm://"),
                           &rfd);
    assert_true(wait_done(&rcv, 1, &r1.calls, 1));
    cw_na_addr_free(rcv, r1.source);
    assert_true(read_line(rfd, line, sizeof(line)));
    close(rfd);
    kill(pid, SIGKILL);
    assert_int_equal(reap(pid), 128);

    /* Another sender's message sits behind the dead claim. */
    assert_int_equal(cw_na_open("shm://", CW_NA_LISTEN, NULL, &snd), CW_OK);
    assert_int_equal(cw_na_addr_lookup(snd, ruri, &to_r), CW_OK);
    assert_int_equal(cw_na_msg_recv_unexpected(rcv, in, sizeof(in), done_cb,
                                               &r2, NULL),
                     CW_OK);
    uint64_t t0 = cw_now_ns();
    assert_int_equal(cw_na_msg_send_unexpected(snd, "after", 6, to_r, 2,
                                               done_cb, &s2, NULL),
                     CW_OK);
    cw_na_t *both[2] = {rcv, snd};
    assert_true(wait_done(both, 2, &r2.calls, 1));
    uint64_t waited = cw_now_ns() - t0;
    assert_int_equal(r2.status, CW_OK);
    assert_string_equal(in, "after");
    /* Skipped after the grace period, not before. */
    assert_true(waited >= 900000000ull);
    assert_true(waited < 4000000000ull);
    cw_na_addr_free(rcv, r2.source);
    assert_true(wait_done(both, 2, &s2.calls, 1));
    cw_na_addr_free(snd, to_r);
    cw_na_close(snd);
    cw_na_close(rcv);
}

/* Local processes that connect and say nothing, or say garbage, are
 * handled and cleaned up at close (LSan checks the rest). */
static void test_silent_and_garbage_connections(void **state)
{
    (void)state;
    cw_na_t *na;
    char uri[URI_LEN];
    int fds[3];

    assert_int_equal(cw_na_open("shm://", CW_NA_LISTEN, NULL, &na), CW_OK);
    self_uri(na, uri);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    int n = snprintf(sun.sun_path + 1, sizeof(sun.sun_path) - 1,
                     "causeway-%s", uri + strlen("shm://"));
    socklen_t slen =
        (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
    for (int i = 0; i < 3; i++) {
        fds[i] = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        assert_true(fds[i] >= 0);
        assert_int_equal(connect(fds[i], (struct sockaddr *)&sun, slen), 0);
    }
    char junk[200];
    memset(junk, 0xab, sizeof(junk));
    assert_int_equal(send(fds[1], junk, sizeof(junk), 0), sizeof(junk));
    assert_int_equal(send(fds[2], junk, 3, 0), 3);
    /* A garbage HELLO gets the connection closed: we read EOF. */
    uint64_t deadline = cw_now_ns() + WAIT_MS * 1000000ull;
    char c;
    ssize_t r = -1;
    while (cw_now_ns() < deadline) {
        cw_na_progress(na, 0, NULL);
        r = recv(fds[1], &c, 1, MSG_DONTWAIT);
        if (r == 0)
            break;
    }
    assert_int_equal(r, 0);
    /* The instance still serves a real peer. */
    cw_na_t *b;
    cw_na_addr_t *to;
    struct done sd = {0}, rd = {0};
    char in[16];
    assert_int_equal(cw_na_open("shm://", CW_NA_LISTEN, NULL, &b), CW_OK);
    assert_int_equal(cw_na_addr_lookup(b, uri, &to), CW_OK);
    assert_int_equal(cw_na_msg_recv_unexpected(na, in, sizeof(in), done_cb,
                                               &rd, NULL),
                     CW_OK);
    assert_int_equal(cw_na_msg_send_unexpected(b, "ok", 3, to, 1, done_cb,
                                               &sd, NULL),
                     CW_OK);
    cw_na_t *both[2] = {na, b};
    assert_true(wait_done(both, 2, &rd.calls, 1));
    assert_int_equal(rd.status, CW_OK);
    cw_na_addr_free(na, rd.source);
    assert_true(wait_done(both, 2, &sd.calls, 1));
    cw_na_addr_free(b, to);
    cw_na_close(b);
    cw_na_close(na); /* the silent connection is still pending here */
    for (int i = 0; i < 3; i++)
        close(fds[i]);
}

/* Instances are independent: two threads, each with its own pair. */
struct thread_pair {
    int ok;
};

static void *pingpong_thread(void *arg)
{
    struct thread_pair *tp = arg;
    cw_na_t *na[2];
    char uri[2][URI_LEN];
    cw_na_addr_t *to1, *to0;
    if (cw_na_open("shm://", CW_NA_LISTEN, NULL, &na[0]) != CW_OK ||
        cw_na_open("shm://", CW_NA_LISTEN, NULL, &na[1]) != CW_OK)
        return NULL;
    for (int i = 0; i < 2; i++) {
        cw_na_addr_t *self;
        cw_na_addr_self(na[i], &self);
        cw_na_addr_to_string(na[i], self, uri[i], URI_LEN);
        cw_na_addr_free(na[i], self);
    }
    if (cw_na_addr_lookup(na[0], uri[1], &to1) != CW_OK ||
        cw_na_addr_lookup(na[1], uri[0], &to0) != CW_OK)
        return NULL;
    int good = 0;
    for (uint32_t i = 0; i < 2000; i++) {
        uint32_t v = i, got = ~0u, back = ~0u;
        struct done r1 = {0}, s1 = {0}, r0 = {0}, s0 = {0};
        cw_na_msg_recv_unexpected(na[1], &got, sizeof(got), done_cb, &r1,
                                  NULL);
        cw_na_msg_recv_expected(na[0], &back, sizeof(back), to1, 3, done_cb,
                                &r0, NULL);
        cw_na_msg_send_unexpected(na[0], &v, sizeof(v), to1, 2, done_cb, &s1,
                                  NULL);
        if (!wait_done(na, 2, &r1.calls, 1))
            break;
        cw_na_msg_send_expected(na[1], &got, sizeof(got), r1.source, 3,
                                done_cb, &s0, NULL);
        if (!wait_done(na, 2, &r0.calls, 1) || !wait_done(na, 2, &s0.calls, 1) ||
            !wait_done(na, 2, &s1.calls, 1))
            break;
        cw_na_addr_free(na[1], r1.source);
        good += back == i;
    }
    tp->ok = good == 2000;
    cw_na_addr_free(na[0], to1);
    cw_na_addr_free(na[1], to0);
    cw_na_close(na[0]);
    cw_na_close(na[1]);
    return NULL;
}

static void test_instances_in_threads(void **state)
{
    (void)state;
    pthread_t th[2];
    struct thread_pair tp[2] = {{0}, {0}};
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, pingpong_thread, &tp[i]),
                         0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    assert_true(tp[0].ok);
    assert_true(tp[1].ok);
}

static void test_expected_before_post(void **state)
{
    (void)state;
    cw_na_t *a, *b;
    char ua[URI_LEN], ub[URI_LEN];
    cw_na_addr_t *to_b, *to_a;
    char out[100] = "early bird", in[100];
    struct done s = {0}, r = {0};
    cw_na_t *both[2];

    assert_int_equal(cw_na_open("shm://", CW_NA_LISTEN, NULL, &a), CW_OK);
    assert_int_equal(cw_na_open("shm://", CW_NA_LISTEN, NULL, &b), CW_OK);
    both[0] = a;
    both[1] = b;
    self_uri(a, ua);
    self_uri(b, ub);
    assert_int_equal(cw_na_addr_lookup(a, ub, &to_b), CW_OK);
    assert_int_equal(cw_na_addr_lookup(b, ua, &to_a), CW_OK);
    assert_int_equal(cw_na_msg_send_expected(a, out, sizeof(out), to_b, 9,
                                             done_cb, &s, NULL),
                     CW_OK);
    assert_true(wait_done(both, 2, &s.calls, 1));
    for (int i = 0; i < 50; i++)
        cw_na_progress(b, 0, NULL); /* b takes it off the ring, unmatched */
    assert_int_equal(cw_na_msg_recv_expected(b, in, sizeof(in), to_a, 9,
                                             done_cb, &r, NULL),
                     CW_OK);
    assert_int_equal(r.calls, 0); /* never from inside the post */
    assert_true(wait_done(both, 2, &r.calls, 1));
    assert_int_equal(r.status, CW_OK);
    assert_string_equal(in, out);
    cw_na_addr_free(a, to_b);
    cw_na_addr_free(b, to_a);
    cw_na_close(a);
    cw_na_close(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_and_params),
        cmocka_unit_test(test_multiple_endpoints),
        cmocka_unit_test(test_stale_segments),
        cmocka_unit_test(test_backpressure_cross_process),
        cmocka_unit_test(test_killed_receiver_fails_backlog),
        cmocka_unit_test(test_hostile_deserialize),
        cmocka_unit_test(test_forged_handle_pid),
        cmocka_unit_test(test_rma_many_iovecs),
        cmocka_unit_test(test_expected_before_post),
        cmocka_unit_test(test_rma_eperm_names_fix),
        cmocka_unit_test(test_dead_producer_slot_skipped),
        cmocka_unit_test(test_silent_and_garbage_connections),
        cmocka_unit_test(test_instances_in_threads),
    };
    cw_log_init();
    int rc = cmocka_run_group_tests_name("na-shm", tests, NULL, NULL);
    cw_plugins_unload();
    return rc;
}
