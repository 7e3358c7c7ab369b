/*
 * na-util: the intrusive doubly linked list (after libfabric's ofi_list.h).
 * A head is initialised with nau_list_init(); a node is on at most one
 * list, and one on none has a NULL next: a zeroed node is on no list,
 * nau_list_del() leaves a node so and deleting such a node does nothing.
 */
#ifndef NAU_LIST_H
#define NAU_LIST_H

#include <stdbool.h>
#include <stddef.h>

/** A list head, or a node in an entry. */
struct nau_list {
    struct nau_list *next, *prev;
};

/** The entry of type @p type whose member @p member is at @p ptr. */
#define nau_container_of(ptr, type, member)                                    \
    ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

/** Iterate @p pos over the nodes of head @p h. */
#define nau_list_for_each(pos, h)                                              \
    for ((pos) = (h)->next; (pos) != (h); (pos) = (pos)->next)

/** The same where the body may delete @p pos (@p tmp: the next node). */
#define nau_list_for_each_safe(pos, tmp, h)                                    \
    for ((pos) = (h)->next, (tmp) = (pos)->next; (pos) != (h);                 \
         (pos) = (tmp), (tmp) = (pos)->next)

static inline void nau_list_init(struct nau_list *h)
{
    h->next = h->prev = h;
}

/** Mark node @p n as on no list, as a zeroed one is. */
static inline void nau_list_node_init(struct nau_list *n)
{
    n->next = n->prev = NULL;
}

static inline bool nau_list_empty(const struct nau_list *h)
{
    return h->next == h;
}

/** True if node @p n is on a list. */
static inline bool nau_list_linked(const struct nau_list *n)
{
    return n->next != NULL;
}

/** Append node @p n (on no list) to head @p h. */
static inline void nau_list_add_tail(struct nau_list *h, struct nau_list *n)
{
    n->prev = h->prev;
    n->next = h;
    h->prev->next = n;
    h->prev = n;
}

/** Take node @p n off its list, if it is on one. */
static inline void nau_list_del(struct nau_list *n)
{
    if (n->next == NULL)
        return;
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->next = n->prev = NULL;
}

#endif /* NAU_LIST_H */
