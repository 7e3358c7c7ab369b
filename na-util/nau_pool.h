/*
 * na-util: a pool of fixed-size objects (operations), so that a stream of
 * messages allocates nothing once warm and, under ASan, does not churn the
 * quarantine.  Objects come from malloc() when the pool has none and go
 * back to it when the pool already keeps max_free; the ones kept are
 * chained through their first word (and poisoned under ASan, so a use
 * after nau_pool_put() is reported as one after free() would be).  Not
 * thread-safe: the owner locks.  A zeroed pool keeps nothing: every put
 * frees, so a half-built instance may put into one.
 */
#ifndef NAU_POOL_H
#define NAU_POOL_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <causeway/status.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define NAU_POISON(p, n)   ASAN_POISON_MEMORY_REGION((p), (n))
#define NAU_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define NAU_POISON(p, n)   ((void)(p), (void)(n))
#define NAU_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

struct nau_pool {
    size_t obj_size;
    unsigned max_free; /**< objects kept for reuse at most */
    unsigned nfree;    /**< objects kept now */
    void *free;        /**< the kept ones, chained by their first word */
    uint64_t allocs;   /**< objects taken from malloc() (growth) */
};

/**
 * Set up @p p for objects of @p obj_size bytes, keeping up to @p max_free.
 * @return CW_OK; CW_INVALID_ARG for a size below a pointer's.
 */
cw_status_t nau_pool_init(struct nau_pool *p, size_t obj_size,
                          unsigned max_free);

/** Out of line part of nau_pool_get(): a fresh object, or NULL. */
void *nau_pool_grow(struct nau_pool *p);

/**
 * An object of the pool's size, or NULL when out of memory.  Its bytes
 * are undefined: the caller initialises it.
 */
static inline void *nau_pool_get(struct nau_pool *p)
{
    void *o = p->free;

    if (o == NULL)
        return nau_pool_grow(p);
    NAU_UNPOISON(o, p->obj_size);
    p->free = *(void **)o;
    p->nfree--;
    return o;
}

/** Give @p o (from nau_pool_get(), or NULL) back. */
static inline void nau_pool_put(struct nau_pool *p, void *o)
{
    if (o == NULL)
        return;
    if (p->nfree >= p->max_free) {
        free(o);
        return;
    }
    *(void **)o = p->free;
    p->free = o;
    p->nfree++;
    NAU_POISON(o, p->obj_size);
}

/** Free the objects kept; the pool stays usable. */
void nau_pool_fini(struct nau_pool *p);

#endif /* NAU_POOL_H */
