/* na-util: the seeded, growing peer table. */
#include "nau_ptable.h"

#include <stdlib.h>

static void nau_ptable_link(struct nau_ptable_node **b,
                            struct nau_ptable_node *n)
{
    if ((n->next = *b) != NULL)
        n->next->pprev = &n->next;
    n->pprev = b;
    *b = n;
}

/* Rehash into @p size buckets (by the hashes kept: no key is read). */
static bool nau_ptable_resize(struct nau_ptable *t, size_t size)
{
    struct nau_ptable_node **b = calloc(size, sizeof(*b)), *n;

    if (b == NULL)
        return false;
    for (size_t i = 0; t->buckets != NULL && i <= t->mask; i++) {
        while ((n = t->buckets[i]) != NULL) {
            t->buckets[i] = n->next;
            nau_ptable_link(&b[n->hash & (size - 1)], n);
        }
    }
    free(t->buckets);
    t->buckets = b;
    t->mask = size - 1;
    return true;
}

cw_status_t nau_ptable_init(struct nau_ptable *t, uint64_t seed)
{
    *t = (struct nau_ptable){.seed = seed};
    return nau_ptable_resize(t, 16) ? CW_OK : CW_NOMEM;
}

void nau_ptable_fini(struct nau_ptable *t)
{
    free(t->buckets);
    *t = (struct nau_ptable){.seed = t->seed};
}

void nau_ptable_insert(struct nau_ptable *t, struct nau_ptable_node *n,
                       uint64_t hash)
{
    if (t->count > t->mask && nau_ptable_resize(t, (t->mask + 1) * 2))
        t->grows++;
    n->hash = hash;
    nau_ptable_link(&t->buckets[hash & t->mask], n);
    t->count++;
}

void nau_ptable_remove(struct nau_ptable *t, struct nau_ptable_node *n)
{
    if (n->pprev == NULL)
        return;
    if ((*n->pprev = n->next) != NULL)
        n->next->pprev = n->pprev;
    n->next = NULL;
    n->pprev = NULL;
    t->count--;
}

struct nau_ptable_node *nau_ptable_iter(const struct nau_ptable *t,
                                        const struct nau_ptable_node *n)
{
    size_t i = n ? (n->hash & t->mask) + 1 : 0;

    if (n != NULL && n->next != NULL)
        return n->next;
    for (; t->buckets != NULL && i <= t->mask; i++)
        if (t->buckets[i] != NULL)
            return t->buckets[i];
    return NULL;
}
