/*
 * na-verbs: the table through which every libibverbs and librdmacm call
 * goes (NCCL ibvwrap style).  Two implementations exist: vb_real_ops
 * (rdma-core) and vb_fake_ops (the fake device of fake_*.c, used by the
 * tests).  The types are rdma-core's own, so the plugin code is the same
 * for both.
 */
#ifndef CW_NA_VERBS_OPS_H
#define CW_NA_VERBS_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define VB_HIDDEN __attribute__((visibility("hidden")))

/**
 * Verbs and rdma_cm entry points.  Return conventions are those of the
 * rdma-core function of the same name: some return an errno value, some
 * return -1 and set errno, some return NULL and set errno; vb_status()
 * understands all of them.
 */
struct vb_ops {
    const char *name; /**< "rdma-core" or "fake" */

    struct ibv_device **(*get_device_list)(int *num);
    void (*free_device_list)(struct ibv_device **list);
    struct ibv_context *(*open_device)(struct ibv_device *dev);
    int (*close_device)(struct ibv_context *ctx);
    int (*query_device)(struct ibv_context *ctx, struct ibv_device_attr *attr);
    int (*query_port)(struct ibv_context *ctx, uint8_t port,
                      struct ibv_port_attr *attr);

    struct ibv_pd *(*alloc_pd)(struct ibv_context *ctx);
    int (*dealloc_pd)(struct ibv_pd *pd);
    struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t len,
                             int access);
    int (*dereg_mr)(struct ibv_mr *mr);

    struct ibv_comp_channel *(*create_comp_channel)(struct ibv_context *ctx);
    int (*destroy_comp_channel)(struct ibv_comp_channel *ch);
    struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe,
                                void *cq_context,
                                struct ibv_comp_channel *ch, int vector);
    int (*destroy_cq)(struct ibv_cq *cq);
    int (*req_notify_cq)(struct ibv_cq *cq, int solicited_only);
    int (*get_cq_event)(struct ibv_comp_channel *ch, struct ibv_cq **cq,
                        void **cq_context);
    void (*ack_cq_events)(struct ibv_cq *cq, unsigned int nevents);
    int (*poll_cq)(struct ibv_cq *cq, int n, struct ibv_wc *wc);

    struct ibv_srq *(*create_srq)(struct ibv_pd *pd,
                                  struct ibv_srq_init_attr *attr);
    int (*destroy_srq)(struct ibv_srq *srq);
    int (*post_srq_recv)(struct ibv_srq *srq, struct ibv_recv_wr *wr,
                         struct ibv_recv_wr **bad_wr);
    int (*post_recv)(struct ibv_qp *qp, struct ibv_recv_wr *wr,
                     struct ibv_recv_wr **bad_wr);
    int (*post_send)(struct ibv_qp *qp, struct ibv_send_wr *wr,
                     struct ibv_send_wr **bad_wr);
    int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr,
                     int attr_mask);

    struct rdma_event_channel *(*create_event_channel)(void);
    void (*destroy_event_channel)(struct rdma_event_channel *ch);
    int (*create_id)(struct rdma_event_channel *ch, struct rdma_cm_id **id,
                     void *context, enum rdma_port_space ps);
    int (*destroy_id)(struct rdma_cm_id *id);
    int (*bind_addr)(struct rdma_cm_id *id, struct sockaddr *addr);
    int (*listen)(struct rdma_cm_id *id, int backlog);
    int (*resolve_addr)(struct rdma_cm_id *id, struct sockaddr *src,
                        struct sockaddr *dst, int timeout_ms);
    int (*resolve_route)(struct rdma_cm_id *id, int timeout_ms);
    int (*create_qp)(struct rdma_cm_id *id, struct ibv_pd *pd,
                     struct ibv_qp_init_attr *attr);
    void (*destroy_qp)(struct rdma_cm_id *id);
    int (*connect)(struct rdma_cm_id *id, struct rdma_conn_param *param);
    int (*accept)(struct rdma_cm_id *id, struct rdma_conn_param *param);
    int (*reject)(struct rdma_cm_id *id, const void *pdata, uint8_t len);
    int (*disconnect)(struct rdma_cm_id *id);
    int (*get_cm_event)(struct rdma_event_channel *ch,
                        struct rdma_cm_event **event);
    int (*ack_cm_event)(struct rdma_cm_event *event);
};

/** rdma-core (libibverbs + librdmacm). */
VB_HIDDEN extern const struct vb_ops vb_real_ops;
/** The fake device (fake_*.c): devices "fake0".."fake3". */
VB_HIDDEN extern const struct vb_ops vb_fake_ops;

/** Counters of the fake device, process-wide (for tests). */
struct vb_fake_stats {
    uint64_t rnr_naks;        /**< SENDs that found no posted receive */
    uint64_t rnr_retry_exc;   /**< RNR retries exhausted (error WCs) */
    uint64_t access_naks;     /**< remote access errors (bad rkey, bounds,
                                   access flags) */
    uint64_t local_prot_errs; /**< bad lkey / bounds / local access */
    uint64_t qp_errors;       /**< QPs moved to the error state */
    uint64_t sends;           /**< SEND frames delivered */
    uint64_t writes;          /**< RDMA WRITEs executed */
    uint64_t reads;           /**< RDMA READs executed */
    uint64_t mrs_registered;  /**< successful reg_mr calls */
    uint64_t mrs_live;        /**< MRs currently registered */
};

/** Snapshot of the fake's counters. */
VB_HIDDEN void vb_fake_stats_get(struct vb_fake_stats *st);

/** True if @p name names a fake device ("fake" prefix). */
VB_HIDDEN bool vb_fake_name(const char *name);

#endif /* CW_NA_VERBS_OPS_H */
