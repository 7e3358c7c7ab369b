/*
 * na-shm tests across processes: stale segments of killed processes (at
 * init and at lookup), back-pressure on a 4-slot ring (a blocking sender
 * behind it sleeps rather than spins), a killed receiver
 * failing backlogged sends and pending receives, the error that names the
 * fix when the kernel refuses cross-memory attach, and a ring slot claimed
 * by a producer killed before publishing it, and a connection from
 * another user, which is refused.  Children are reaped (and
 * killed if stuck) on every path.
 *
 * Every endpoint here lives in a namespace of its own
 * (CAUSEWAY_SHM_NAMESPACE=t<pid>): another process opening na-shm beside
 * this test (meson runs tests in parallel) sweeps the stale segments of
 * its namespace only, so the killed children's segments stay until this
 * test's own instances remove them.
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
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "shm.h" /* ring layout, to play a producer that dies mid-push */
#include "shm_test_util.h"

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

/* Parameters selecting the default namespace whatever the environment. */
static const char *const dflt_ns[] = {"namespace", "", NULL};

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
    /* What any other test process does meanwhile: an instance in the
     * default namespace sweeps the stale segments of that namespace, and
     * leaves ours. */
    assert_int_equal(cw_na_open("shm://", CW_NA_LISTEN, dflt_ns, &na), CW_OK);
    cw_na_close(na);
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

/* Namespaces are checked, and apart: a name in one cannot be reached
 * from another, and the same name can be held in both at once. */
static void test_namespaces(void **state)
{
    (void)state;
    const char *const bad[] = {"namespace", "a-b", NULL};
    const char *const too_long[] = {"namespace", "n2345678901234567", NULL};
    const char *const ns16[] = {"namespace", "n234567890123456", NULL};
    char name[64], uri[URI_LEN];
    cw_na_t *na = NULL, *mine, *dflt;
    cw_na_addr_t *a = NULL;

    assert_int_equal(cw_na_open("shm://", 0, bad, &na), CW_INVALID_ARG);
    assert_int_equal(cw_na_open("shm://", 0, too_long, &na), CW_INVALID_ARG);
    assert_null(na);
    assert_int_equal(cw_na_open("shm://", 0, ns16, &na), CW_OK);
    cw_na_close(na);

    unique_name(name, sizeof(name), "ns");
    snprintf(uri, sizeof(uri), "shm://%s", name);
    assert_int_equal(cw_na_open(uri, CW_NA_LISTEN, dflt_ns, &dflt), CW_OK);
    assert_false(seg_exists(name)); /* not in this test's namespace */
    assert_int_equal(cw_na_open("shm://", 0, NULL, &mine), CW_OK);
    assert_int_equal(cw_na_addr_lookup(mine, uri, &a), CW_UNREACHABLE);
    cw_na_close(mine);
    assert_int_equal(cw_na_open(uri, CW_NA_LISTEN, NULL, &mine), CW_OK);
    assert_true(seg_exists(name));
    cw_na_close(mine);
    cw_na_close(dflt);
}

/* Child side: open a 4-slot endpoint and send its URI up the pipe. */
static cw_na_t *child_open_small(int wfd)
{
    const char *params[] = {"slots", "4", NULL};
    cw_na_t *na;
    char uri[URI_LEN], line[URI_LEN + 2];
    if (cw_na_open("shm://", CW_NA_LISTEN, params, &na) != CW_OK)
        return NULL;
    self_uri(na, uri);
    int n = snprintf(line, sizeof(line), "%s\n", uri);
    if (write(wfd, line, (size_t)n) != n) {
        cw_na_close(na);
        return NULL;
    }
    return na;
}

/* Child: a 4-slot receiver that takes messages one at a time (pausing
 * @p pause_us every @p every messages), checks the order and answers with
 * how many arrived in order. */
#define BP_COUNT 2000
struct slow_rx {
    uint32_t count, every, pause_us;
};
static int child_slow_receiver(void *arg, int wfd)
{
    const struct slow_rx *rx = arg;
    uint32_t in_order = 0;
    cw_na_addr_t *peer = NULL;
    cw_na_t *na = child_open_small(wfd);
    if (!na)
        return 1;
    for (uint32_t i = 0; i < rx->count; i++) {
        uint32_t v = 0;
        struct done d = {0};
        if (cw_na_msg_recv_unexpected(na, &v, sizeof(v), done_cb, &d, NULL))
            return 2;
        if (!wait_done_blocking(na, &d.calls, 1) || d.status != CW_OK)
            return 3;
        if (v == i)
            in_order++;
        if (peer)
            cw_na_addr_free(na, d.source);
        else
            peer = d.source;
        if (i % rx->every == 0)
            usleep(rx->pause_us); /* stay behind the sender */
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

    static const struct slow_rx rx = {BP_COUNT, 100, 1000};
    pid_t pid = fork_child(child_slow_receiver, (void *)&rx, &rfd);
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

/* A blocking sender stuck behind a full ring sleeps until the receiver
 * frees a slot instead of spinning: it keeps yielding the CPU. */
static void test_blocked_sender_sleeps(void **state)
{
    (void)state;
    enum { N = 200 };
    static const struct slow_rx rx = {N, 1, 2000};
    static uint32_t vals[N];
    static struct done sd[N];
    struct done rd = {0};
    uint32_t in_order = 0;
    char uri[URI_LEN];
    int rfd;
    cw_na_t *na;
    cw_na_addr_t *srv;

    pid_t pid = fork_child(child_slow_receiver, (void *)&rx, &rfd);
    assert_true(read_line(rfd, uri, sizeof(uri)));
    close(rfd);
    assert_int_equal(cw_na_open("shm://", CW_NA_LISTEN, NULL, &na), CW_OK);
    assert_int_equal(cw_na_addr_lookup(na, uri, &srv), CW_OK);
    assert_int_equal(cw_na_msg_recv_expected(na, &in_order, sizeof(in_order),
                                             srv, 5, done_cb, &rd, NULL),
                     CW_OK);
    memset(sd, 0, sizeof(sd));
    for (uint32_t i = 0; i < N; i++) {
        vals[i] = i;
        assert_int_equal(cw_na_msg_send_unexpected(na, &vals[i],
                                                   sizeof(vals[i]), srv, 1,
                                                   done_cb, &sd[i], NULL),
                         CW_OK);
    }
    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    uint64_t t0 = cw_now_ns();
    uint64_t deadline = t0 + 20000000000ull;
    while (sd[N - 1].calls == 0 && cw_now_ns() < deadline)
        cw_na_progress_wait(na, 100, NULL); /* blocking mode */
    uint64_t wall = cw_now_ns() - t0;
    getrusage(RUSAGE_SELF, &ru1);
    for (uint32_t i = 0; i < N; i++)
        assert_int_equal(sd[i].status, CW_OK);
    assert_int_equal(sd[N - 1].calls, 1);
    double cpu = (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec +
                          ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) *
                     1e9 +
                 (double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec +
                          ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) *
                     1e3;
    long sleeps = ru1.ru_nvcsw - ru0.ru_nvcsw;
    print_message("# blocked sender: %.0f ms wall, %.0f ms CPU, %ld "
                  "voluntary switches\n",
                  (double)wall / 1e6, cpu / 1e6, sleeps);
    /* Spinning would mean almost no voluntary switches and CPU ~ wall. */
    assert_true(sleeps >= N / 4);
    assert_true(cpu < 0.5 * (double)wall);
    while (rd.calls == 0 && cw_now_ns() < deadline)
        cw_na_progress_wait(na, 100, NULL);
    assert_int_equal(rd.status, CW_OK);
    assert_int_equal(in_order, N);
    cw_na_addr_free(na, srv);
    cw_na_close(na);
    assert_int_equal(reap(pid), 0);
}

/* Child: a 4-slot endpoint that never makes progress. */
static int child_stuck(void *arg, int wfd)
{
    (void)arg;
    if (!child_open_small(wfd))
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
        cw_na_mem_deserialize(na, ea->handle, ea->handle_len, &remote) != CW_OK)
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
    path[0] = '/';
    seg_name(path + 1, sizeof(path) - 1, me + strlen("shm://"));
    int fd = shm_open(path, O_RDONLY, 0);
    struct shm_seg_hdr own;
    if (fd < 0 || pread(fd, &own, sizeof(own), 0) != (ssize_t)sizeof(own))
        return 2;
    close(fd);
    seg_name(path + 1, sizeof(path) - 1, rname);
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
    assert_int_equal(
        cw_na_msg_recv_unexpected(rcv, in, sizeof(in), done_cb, &r1, NULL),
        CW_OK);
    pid_t pid = fork_child(child_claim_and_die, ruri + strlen("shm://"), &rfd);
    assert_true(wait_done(&rcv, 1, &r1.calls, 1));
    cw_na_addr_free(rcv, r1.source);
    assert_true(read_line(rfd, line, sizeof(line)));
    close(rfd);
    kill(pid, SIGKILL);
    assert_int_equal(reap(pid), 128);

    /* Another sender's message sits behind the dead claim. */
    assert_int_equal(cw_na_open("shm://", CW_NA_LISTEN, NULL, &snd), CW_OK);
    assert_int_equal(cw_na_addr_lookup(snd, ruri, &to_r), CW_OK);
    assert_int_equal(
        cw_na_msg_recv_unexpected(rcv, in, sizeof(in), done_cb, &r2, NULL),
        CW_OK);
    uint64_t t0 = cw_now_ns();
    assert_int_equal(
        cw_na_msg_send_unexpected(snd, "after", 6, to_r, 2, done_cb, &s2, NULL),
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

/* Child: become another user, connect to the endpoint's socket and say
 * HELLO; success (exit 0) is being disconnected. */
static int child_other_user(void *arg, int wfd)
{
    const char *name = arg;
    (void)wfd;
    if (setresgid(65534, 65534, 65534) != 0 ||
        setresuid(65534, 65534, 65534) != 0)
        return 10;
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    seg_name(sun.sun_path + 1, sizeof(sun.sun_path) - 1, name);
    socklen_t slen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
                                 strlen(sun.sun_path + 1));
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sun, slen) != 0)
        return 11;
    struct shm_sock_msg m = {.magic = SHM_SEG_MAGIC,
                             .version = SHM_VERSION,
                             .kind = SHM_SOCK_HELLO,
                             .pid = (uint32_t)getpid(),
                             .name_len = 3,
                             .uid = 12345,
                             .name = "evil"};
    m.name[3] = '\0';
    if (send(fd, &m, sizeof(m), 0) != (ssize_t)sizeof(m))
        return 12;
    char c;
    ssize_t r = recv(fd, &c, 1, 0); /* blocks until we are dropped */
    return r == 0 ? 0 : 13;
}

static void test_other_user_refused(void **state)
{
    (void)state;
    cw_na_t *na;
    char uri[URI_LEN];
    int rfd;
    assert_int_equal(cw_na_open("shm://", CW_NA_LISTEN, NULL, &na), CW_OK);
    self_uri(na, uri);
    pid_t pid = fork_child(child_other_user, uri + strlen("shm://"), &rfd);
    close(rfd);
    int rc = -1, status;
    uint64_t deadline = cw_now_ns() + WAIT_MS * 1000000ull;
    while (cw_now_ns() < deadline) {
        cw_na_progress(na, 0, NULL);
        if (waitpid(pid, &status, WNOHANG) == pid) {
            rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
            break;
        }
    }
    if (rc < 0)
        rc = reap(pid);
    assert_int_equal(rc, 0);
    cw_na_close(na);
}

int main(void)
{
    char ns[32];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stale_segments),
        cmocka_unit_test(test_namespaces),
        cmocka_unit_test(test_backpressure_cross_process),
        cmocka_unit_test(test_blocked_sender_sleeps),
        cmocka_unit_test(test_killed_receiver_fails_backlog),
        cmocka_unit_test(test_rma_eperm_names_fix),
        cmocka_unit_test(test_dead_producer_slot_skipped),
        cmocka_unit_test(test_other_user_refused),
    };
    snprintf(ns, sizeof(ns), "t%d", (int)getpid());
    setenv("CAUSEWAY_SHM_NAMESPACE", ns, 1);
    cw_log_init();
    int rc = cmocka_run_group_tests_name("na-shm-process", tests, NULL, NULL);
    cw_plugins_unload();
    return rc;
}
