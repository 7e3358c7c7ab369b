/*
 * na-util: a pool of fixed-size objects (operations), so that a stream of
 * messages allocates nothing once warm and, under ASan, does not churn the
 * quarantine.  An object comes from malloc() when the pool keeps none and
 * goes back to free() when it keeps max_free already; those kept are
 * chained by their first word and, under ASan, poisoned (a use after
 * nau_pool_put() is reported as one after free()).  A zeroed pool keeps
 * nothing and hands out nothing, so a half-built instance may put into
 * one.  Not thread-safe: the owner locks.
 */
#ifndef NAU_POOL_H
#define NAU_POOL_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define NAU_POISON(p, n)   ASAN_POISON_MEMORY_REGION((p), (n))
#define NAU_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define NAU_POISON(p, n)   ((void)(p), (void)(n))
#define NAU_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

struct nau_pool {
    size_t obj_size;   /**< at least a pointer's */
    unsigned max_free; /**< objects kept for reuse at most */
    unsigned nfree;    /**< objects kept now */
    void *free;        /**< the kept ones */
    uint64_t allocs;   /**< objects taken from malloc(): the growth */
};

/** A pool of objects of @p obj_size bytes keeping up to @p max_free. */
static inline void nau_pool_init(struct nau_pool *p, size_t obj_size,
                                 unsigned max_free)
{
    *p = (struct nau_pool){
        .obj_size = obj_size < sizeof(void *) ? sizeof(void *) : obj_size,
        .max_free = max_free};
}

/** An object, its bytes undefined (the caller initialises it), or NULL. */
static inline void *nau_pool_get(struct nau_pool *p)
{
    void *o = p->free;

    if (o == NULL) {
        o = p->obj_size ? malloc(p->obj_size) : NULL;
        p->allocs += o != NULL;
        return o;
    }
    NAU_UNPOISON(o, p->obj_size);
    p->free = *(void **)o;
    p->nfree--;
    return o;
}

/** Give back @p o (from nau_pool_get(), or NULL). */
static inline void nau_pool_put(struct nau_pool *p, void *o)
{
    if (o == NULL || p->nfree >= p->max_free) {
        free(o);
        return;
    }
    *(void **)o = p->free;
    p->free = o;
    p->nfree++;
    NAU_POISON(o, p->obj_size);
}

/** Free the objects kept; the pool stays usable. */
static inline void nau_pool_fini(struct nau_pool *p)
{
    while (p->free != NULL) {
        void *o = p->free;

        NAU_UNPOISON(o, p->obj_size);
        p->free = *(void **)o;
        free(o);
    }
    p->nfree = 0;
}

#endif /* NAU_POOL_H */
