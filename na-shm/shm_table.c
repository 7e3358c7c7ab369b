/*
 * na-shm: the peer table's index by endpoint id, and the bound on peers
 * known only from ring slots.  Every message from the ring looks its
 * sender up by id, and whoever writes the ring picks the ids, so the
 * index is na-util's seeded peer table holding the live peers, and a
 * writer that claims a new id in every slot cannot make the table grow
 * without end.
 */
#include <stdlib.h>
#include <string.h>

#include "shm.h"

struct shm_peer *shm_peer_find_uid(struct cw_na_class *cls, uint64_t uid)
{
    struct nau_ptable_node *n = nau_ptable_find_u64(&cls->index, uid);

    return n ? nau_container_of(n, struct shm_peer, inode) : NULL;
}

void shm_peer_index(struct cw_na_class *cls, struct shm_peer *peer)
{
    if (!shm_peer_indexed(peer) && peer->uid != 0 &&
        peer->state != SHM_PEER_DEAD)
        nau_ptable_insert_u64(&cls->index, &peer->inode, peer->uid);
}

void shm_peer_connected(struct cw_na_class *cls, struct shm_peer *peer)
{
    if (!peer->unsolicited)
        return;
    nau_list_del(&peer->ulink);
    peer->unsolicited = false;
    cls->nunsolicited--;
}

void shm_peer_unindex(struct cw_na_class *cls, struct shm_peer *peer)
{
    shm_peer_connected(cls, peer); /* no longer counted either way */
    nau_ptable_remove(&cls->index, &peer->inode);
}

void shm_peer_forget_forged(struct cw_na_class *cls, struct shm_peer *peer,
                            const char *why)
{
    /* What was queued under it came from whoever wrote those slots, not
     * provably from the endpoint that holds the id or the name. */
    unsigned n = shm_early_drop(cls, peer);

    cls->dropped += n;
    SHM_WARN_RL(cls,
                "forgot shm://%s, known only from ring slots: %s; "
                "dropped its %u queued messages (%llu dropped so far)",
                peer->name, why, n, (unsigned long long)cls->dropped);
    /* Receives posted on this record (not on its id, which belongs to
     * another endpoint) will get nothing from it.  It has no backlog: a
     * send attaches first, and an attached record is not slot-only. */
    for (struct nau_list *l = cls->exp_posted.next; l != &cls->exp_posted;) {
        struct cw_na_op *op = nau_container_of(l, struct cw_na_op, link);
        l = l->next;
        if (op->peer == peer) {
            nau_list_del(&op->link);
            shm_op_complete(cls, op, CW_DISCONNECTED);
        }
    }
    shm_peer_unindex(cls, peer);
    peer->state = SHM_PEER_DEAD;
    cls->ndead++;
    /* The id is not its own: addresses still held compare by name from
     * now on, and match no message (ids in slots are never 0). */
    peer->uid = 0;
}

void shm_peer_forget_name_claims(struct cw_na_class *cls, const char *name,
                                 uint64_t uid)
{
    for (struct nau_list *l = cls->unsolicited.next; l != &cls->unsolicited;) {
        struct shm_peer *p = nau_container_of(l, struct shm_peer, ulink);
        l = l->next;
        if (shm_peer_slot_only(p) && p->uid != uid &&
            strcmp(p->name, name) == 0)
            shm_peer_forget_forged(cls, p,
                                   "another id listens under its "
                                   "name");
    }
}

/* Forget the peers known only from ring slots that nothing refers to any
 * more (no message of theirs queued, no address or operation held): all
 * they are is a name and an id, learnt again from their next slot. */
static void shm_unsolicited_reap(struct cw_na_class *cls)
{
    for (struct nau_list *l = cls->unsolicited.next; l != &cls->unsolicited;) {
        struct shm_peer *p = nau_container_of(l, struct shm_peer, ulink);
        l = l->next;
        if (p->inode.refs == 1)
            shm_peer_unref(p); /* the table's: it goes */
    }
}

cw_status_t shm_peer_from_slot(struct cw_na_class *cls, const char *name,
                               uint64_t uid, struct shm_peer **peer_p)
{
    struct shm_peer *p;

    if (cls->nunsolicited >= SHM_UNSOLICITED_MAX)
        shm_unsolicited_reap(cls);
    if (cls->nunsolicited >= SHM_UNSOLICITED_MAX) {
        /* A new sender connects and says HELLO before it pushes: read
         * that before refusing its message (its connection may have been
         * accepted before the HELLO came). */
        shm_hello_read_pending(cls);
        p = shm_peer_find_uid(cls, uid);
        if (!p)
            return CW_OVERFLOW;
        *peer_p = p;
        return CW_OK;
    }
    cw_status_t st = shm_peer_get(cls, name, uid, &p);
    if (st != CW_OK)
        return st;
    shm_peer_unref(p); /* the table keeps it */
    p->unsolicited = true;
    nau_list_add_tail(&cls->unsolicited, &p->ulink);
    cls->nunsolicited++;
    *peer_p = p;
    return CW_OK;
}
