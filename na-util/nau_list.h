/*
 * na-util: the intrusive doubly linked list every plugin uses (after
 * libfabric's include/ofi_list.h).  A list is a head (struct nau_list,
 * initialised with nau_list_init()) and the nodes embedded in its entries.
 * A node is on at most one list at a time; one that is on none has a NULL
 * next, so a zeroed entry is off every list, nau_list_del() leaves a node
 * that way and deleting a node that is on no list does nothing.
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

/** Make @p h an empty list. */
static inline void nau_list_init(struct nau_list *h)
{
    h->next = h->prev = h;
}

/** True if the list headed by @p h has no node. */
static inline bool nau_list_empty(const struct nau_list *h)
{
    return h->next == h;
}

/** True if node @p n is on a list. */
static inline bool nau_list_linked(const struct nau_list *n)
{
    return n->next != NULL;
}

/** Append node @p n (on no list) to the list headed by @p h. */
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

/** Move every node of @p from to the end of @p to; @p from is left empty. */
static inline void nau_list_splice_tail(struct nau_list *to,
                                        struct nau_list *from)
{
    if (nau_list_empty(from))
        return;
    from->next->prev = to->prev;
    to->prev->next = from->next;
    from->prev->next = to;
    to->prev = from->prev;
    nau_list_init(from);
}

/** Iterate @p pos (a struct nau_list *) over the nodes of @p h. */
#define nau_list_for_each(pos, h)                                              \
    for ((pos) = (h)->next; (pos) != (h); (pos) = (pos)->next)

/** The same where the body may delete @p pos (@p tmp: the next node). */
#define nau_list_for_each_safe(pos, tmp, h)                                    \
    for ((pos) = (h)->next, (tmp) = (pos)->next; (pos) != (h);                 \
         (pos) = (tmp), (tmp) = (pos)->next)

#endif /* NAU_LIST_H */
