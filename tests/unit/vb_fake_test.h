/*
 * Helpers of the tests that drive the fake verbs device through its ops
 * table directly (test_verbs_fake.c, test_verbs_qp_state.c).
 */
#ifndef CW_TEST_VB_FAKE_TEST_H
#define CW_TEST_VB_FAKE_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "fake.h"

static inline uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static inline void nonblock(int fd)
{
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* An RC QP on @p cq for both queues, 16 WRs each way, 2 send SGEs. */
static inline void qp_init_attr(struct ibv_qp_init_attr *qa, struct ibv_cq *cq)
{
    memset(qa, 0, sizeof(*qa));
    qa->send_cq = cq;
    qa->recv_cq = cq;
    qa->qp_type = IBV_QPT_RC;
    qa->cap.max_send_wr = 16;
    qa->cap.max_recv_wr = 16;
    qa->cap.max_send_sge = 2;
    qa->cap.max_recv_sge = 1;
}

/* Next CM event on the (non-blocking) channel, which must be @p type; the
 * caller acks it.  Waits on the channel fd, 5 s at most. */
static inline struct rdma_cm_event *wait_ev(struct rdma_event_channel *ch,
                                            enum rdma_cm_event_type type)
{
    uint64_t end = now_ms() + 5000;
    struct rdma_cm_event *ev;
    while (now_ms() < end) {
        if (vb_fake_ops.get_cm_event(ch, &ev) == 0) {
            if (ev->event != type)
                fail_msg("got %s, wanted %s", rdma_event_str(ev->event),
                         rdma_event_str(type));
            return ev;
        }
        assert_int_equal(errno, EAGAIN);
        struct pollfd p = {.fd = ch->fd, .events = POLLIN};
        poll(&p, 1, 10);
    }
    fail_msg("no %s within 5 s", rdma_event_str(type));
    return NULL;
}

#endif /* CW_TEST_VB_FAKE_TEST_H */
