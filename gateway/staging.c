/*
 * The staging pool: buffers.staging bytes (bounded further by
 * limits.max_bulk_bytes_inflight) cut into buffers.chunk slots, each a
 * bulk handle registered lazily on every network it is used on and kept
 * registered.  A transfer holds at most buffers.depth slots; when none is
 * free it waits in a FIFO and returned slots are handed out one per
 * waiting transfer in turn, so a large transfer cannot starve the rest.
 */
#include "gw_bulk.h"

#include <stdlib.h>
#include <sys/mman.h>

cw_status_t gw_staging_init(struct gw_staging *s, struct gw *gw, size_t bytes,
                            size_t chunk)
{
    void *mem;
    cw_status_t st;

    if (chunk == 0 || bytes < chunk)
        return CW_INVALID_ARG;
    s->chunk = chunk;
    s->nslots = (unsigned)(bytes / chunk);
    s->bytes = (size_t)s->nslots * chunk;
    /* Pages are touched only when a slot is first used. */
    mem = mmap(NULL, s->bytes, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        CW_ERROR(GW_LOG, "cannot map %zu bytes of bulk staging", s->bytes);
        return CW_NOMEM;
    }
    s->mem = mem;
    s->nshards = gw->nshards;
    s->slots = calloc(s->nslots, sizeof(*s->slots));
    s->bulks = calloc((size_t)s->nslots * s->nshards, sizeof(*s->bulks));
    if (s->slots == NULL || s->bulks == NULL) {
        st = CW_NOMEM;
        goto err;
    }
    for (unsigned i = 0; i < s->nslots; i++) {
        struct cw_segment seg = {s->mem + (size_t)i * chunk, chunk};
        s->slots[i].bulk = &s->bulks[(size_t)i * s->nshards];
        for (unsigned k = 0; k < s->nshards; k++) {
            st = cw_bulk_create(gw->shards[k].ctx, &seg, 1, CW_BULK_READ_WRITE,
                                &s->slots[i].bulk[k]);
            if (st != CW_OK)
                goto err;
        }
        s->slots[i].next = s->free;
        s->free = &s->slots[i];
    }
    s->nfree = s->nslots;
    return CW_OK;

err:
    gw_staging_fini(s);
    return st;
}

struct gw_stage_slot *gw_staging_get(struct gw_staging *s, struct gw_pipe *p)
{
    struct gw_stage_slot *slot = s->free;

    /* Waiting transfers come first: a newcomer may not jump the queue. */
    if (slot == NULL ||
        (s->wait_head != NULL && !p->waiting && s->wait_head != p)) {
        if (!p->waiting) {
            p->waiting = true;
            p->wnext = NULL;
            if (s->wait_tail)
                s->wait_tail->wnext = p;
            else
                s->wait_head = p;
            s->wait_tail = p;
            s->waits++;
        }
        return NULL;
    }
    s->free = slot->next;
    s->nfree--;
    s->uses++;
    slot->next = NULL;
    slot->pipe = p;
    return slot;
}

void gw_staging_unwait(struct gw_staging *s, struct gw_pipe *p)
{
    struct gw_pipe **pp = &s->wait_head, *prev = NULL;

    if (!p->waiting)
        return;
    for (; *pp != NULL; prev = *pp, pp = &(*pp)->wnext)
        if (*pp == p) {
            *pp = p->wnext;
            if (s->wait_tail == p)
                s->wait_tail = prev;
            break;
        }
    p->waiting = false;
    p->wnext = NULL;
}

void gw_staging_put(struct gw_staging *s, struct gw_stage_slot *slot)
{
    slot->pipe = NULL;
    slot->next = s->free;
    s->free = slot;
    s->nfree++;
    /* One slot per waiting transfer in turn (it queues again at the tail
     * if it still wants more). */
    while (s->free != NULL && s->wait_head != NULL) {
        struct gw_pipe *p = s->wait_head;
        gw_staging_unwait(s, p);
        slot = s->free;
        s->free = slot->next;
        s->nfree--;
        s->uses++;
        slot->next = NULL;
        slot->pipe = p;
        gw_pipe_resume(p, slot);
    }
}

void gw_staging_fini(struct gw_staging *s)
{
    if (s->bulks != NULL)
        for (size_t i = 0; i < (size_t)s->nslots * s->nshards; i++)
            cw_bulk_free(s->bulks[i]);
    free(s->bulks);
    free(s->slots);
    if (s->mem != NULL)
        munmap(s->mem, s->bytes);
    s->slots = NULL;
    s->bulks = NULL;
    s->mem = NULL;
    s->free = NULL;
    s->nfree = s->nslots = 0;
}
