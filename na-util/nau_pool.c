/* na-util: the object pool's slow paths. */
#include "nau_pool.h"

cw_status_t nau_pool_init(struct nau_pool *p, size_t obj_size,
                          unsigned max_free)
{
    if (p == NULL || obj_size < sizeof(void *))
        return CW_INVALID_ARG;
    *p = (struct nau_pool){.obj_size = obj_size, .max_free = max_free};
    return CW_OK;
}

void *nau_pool_grow(struct nau_pool *p)
{
    /* A zeroed pool (never set up) hands out nothing. */
    void *o = p->obj_size ? malloc(p->obj_size) : NULL;

    if (o != NULL)
        p->allocs++;
    return o;
}

void nau_pool_fini(struct nau_pool *p)
{
    while (p->free != NULL) {
        void *o = p->free;

        NAU_UNPOISON(o, p->obj_size);
        p->free = *(void **)o;
        free(o);
    }
    p->nfree = 0;
}
