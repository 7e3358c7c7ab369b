/*
 * na-shm against a hostile peer that writes into the shared ring memory
 * while we use it: a receiver whose slot sequence numbers run ahead of its
 * tail (a send must return).  Children are reaped (and killed if stuck) on
 * every path; the segments are the endpoints' own and go with them.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
    cw_status_t st = cw_na_msg_send_unexpected(na, "hi", 3, r, 7, done_cb, &d,
                                               NULL);
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

    assert_int_equal(cw_na_open("shm://", CW_NA_LISTEN,
                                (const char *[]){"slots", "4", NULL}, &rcv),
                     CW_OK);
    self_uri(rcv, ruri);
    struct shm_seg_hdr *h = hostile_map(ruri + strlen("shm://"), &size);
    assert_non_null(h);
    struct shm_slot *s = &hostile_slots(h)[0];
    atomic_store(&s->seq, 5); /* the tail is 0 */

    pid_t pid = fork_child(child_send_one, ruri + strlen("shm://"), &rfd);
    bool sent = read_line_progress(rcv, rfd, line, sizeof(line), WAIT_MS);
    if (sent) {
        assert_string_equal(line, "sent 0");
        atomic_store(&s->seq, 0); /* sane again */
        assert_int_equal(cw_na_msg_recv_unexpected(rcv, in, sizeof(in),
                                                   done_cb, &r, NULL),
                         CW_OK);
        assert_true(wait_done(&rcv, 1, &r.calls, 1));
        assert_int_equal(r.status, CW_OK);
        assert_string_equal(in, "hi");
        assert_int_equal(r.tag, 7);
        cw_na_addr_free(rcv, r.source);
        assert_true(read_line_progress(rcv, rfd, line, sizeof(line),
                                       WAIT_MS));
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slot_ahead_of_tail),
    };
    cw_log_init();
    int rc = cmocka_run_group_tests_name("na-shm-hostile", tests, NULL, NULL);
    cw_plugins_unload();
    return rc;
}
