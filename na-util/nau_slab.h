/*
 * Slabs for a plugin's queue of unexpected messages: records filled into
 * 256 KiB mappings of the queue's own, in the order they come, each
 * mapping unmapped once its last record is freed, so that a drained queue
 * gives its memory back to the system.  From malloc() the copies of a
 * flood were left between chunks still in use and stayed with the process
 * (docs/reliability.md, "Floods").
 *
 * One record still queued keeps its whole slab, so the slabs mapped are
 * bounded by the caller's cap (its queue's bound; plus the current slab):
 * past it, as for a record over 32 KiB, malloc() serves.  Under
 * AddressSanitizer a slab's free room and a 16-byte zone after each
 * record are poisoned, as the heap's are.  Not thread-safe: one queue,
 * one caller at a time (a plugin instance's calls are serialized).
 */
#ifndef NAU_SLAB_H
#define NAU_SLAB_H

#include <stddef.h>

struct nau_slab;

struct nau_slabs {
    struct nau_slab *cur; /* where records are put now */
    size_t mapped;        /* bytes of slabs mapped */
};

/* @p size bytes (16-byte aligned) for a record; *@p slab_p is its slab,
 * or NULL when malloc() served.  NULL out of memory. */
void *nau_slab_alloc(struct nau_slabs *ss, size_t size, size_t cap,
                     struct nau_slab **slab_p);
/* Free record @p p of @p size bytes from nau_slab_alloc (@p slab: its
 * *slab_p). */
void nau_slab_free(struct nau_slabs *ss, void *p, size_t size,
                   struct nau_slab *slab);
/* Every record freed: unmap the current slab.  Returns the bytes still
 * mapped, 0 unless a record was never freed. */
size_t nau_slabs_fini(struct nau_slabs *ss);

#endif
