/*
 * na-verbs: the table through which every libibverbs and librdmacm call
 * goes (NCCL ibvwrap style).  The plugin contains one implementation,
 * vb_real_ops (rdma-core).  The fake device used by the tests (fake_*.c)
 * is a separate module, cw-verbs-fake.so, built with the tests and never
 * installed; the plugin loads it only when CAUSEWAY_VERBS_FAKE names it
 * (vb_ops_load.c).  The types are rdma-core's own, so the plugin code is
 * the same for both.
 */
#ifndef CW_NA_VERBS_OPS_H
#define CW_NA_VERBS_OPS_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
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
                                void *cq_context, struct ibv_comp_channel *ch,
                                int vector);
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

    /**
     * Optional (NULL for rdma-core): the IPv4 address (network order) of
     * device @p dev (empty: any device) when its addresses are not those
     * of a network interface, as with the fake's 127.0.0.N.  Returns 0 or
     * an errno value.
     */
    int (*default_addr)(const char *dev, struct in_addr *addr_p);
};

/** rdma-core (libibverbs + librdmacm). */
VB_HIDDEN extern const struct vb_ops vb_real_ops;

/** Environment variable naming the fake device module to load. */
#define VB_FAKE_ENV "CAUSEWAY_VERBS_FAKE"
/** The one symbol cw-verbs-fake.so exports (a struct vb_fake_module). */
#define VB_FAKE_ENTRY "vb_fake_module_entry"
#define VB_FAKE_ABI   2

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

/** What cw-verbs-fake.so exports; checked by the loader. */
struct vb_fake_module {
    uint32_t abi;      /**< VB_FAKE_ABI */
    uint32_t ops_size; /**< sizeof(struct vb_ops) */
    const struct vb_ops *ops;
    /** Snapshot of the fake's process-wide counters. */
    void (*stats_get)(struct vb_fake_stats *st);
};

/**
 * The ops a new instance uses: rdma-core, or the fake module when
 * VB_FAKE_ENV names one (loaded with dlopen, one reference per call).
 * @param[out] ops_p   the table
 * @param[out] handle_p  the module's handle (NULL for rdma-core), to give
 *                       to vb_ops_release()
 * @param[out] err     a message on failure
 * Returns 0, or -1 with @p err filled.
 */
VB_HIDDEN int vb_ops_acquire(const struct vb_ops **ops_p, void **handle_p,
                             char *err, size_t errlen);
/** Drop the reference vb_ops_acquire() took (NULL: nothing). */
VB_HIDDEN void vb_ops_release(void *handle);

#endif /* CW_NA_VERBS_OPS_H */
