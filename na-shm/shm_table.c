/*
 * na-shm: the peer table's index by endpoint id, and the bound on peers
 * known only from ring slots.  Every message from the ring looks its
 * sender up by id, and whoever writes the ring picks the ids, so the
 * index is a hash table (open addressing, linear probing, the ids mixed
 * with a seed of this instance) holding the live peers, and a writer that
 * claims a new id in every slot cannot make the table grow without end.
 */
#include <stdlib.h>
#include <string.h>

#include "shm.h"

#define SHM_INDEX_MIN 64u

static size_t shm_index_home(const struct cw_na_class *cls, uint64_t uid)
{
    /* splitmix64's finalizer: every bit of the seeded id moves the slot. */
    uint64_t x = uid ^ cls->index_seed;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    return (size_t)x & (cls->index_size - 1);
}

static void shm_index_put(struct cw_na_class *cls, struct shm_peer *peer)
{
    size_t mask = cls->index_size - 1;
    size_t i = shm_index_home(cls, peer->uid);
    while (cls->index[i])
        i = (i + 1) & mask;
    cls->index[i] = peer;
}

static bool shm_index_grow(struct cw_na_class *cls)
{
    struct shm_peer **old = cls->index;
    size_t old_size = cls->index_size;
    size_t size = old_size ? old_size * 2 : SHM_INDEX_MIN;
    struct shm_peer **t = calloc(size, sizeof(*t));
    if (!t)
        return false;
    cls->index = t;
    cls->index_size = size;
    for (size_t i = 0; i < old_size; i++)
        if (old[i])
            shm_index_put(cls, old[i]);
    free(old);
    return true;
}

struct shm_peer *shm_peer_find_uid(struct cw_na_class *cls, uint64_t uid)
{
    if (cls->nindexed == 0)
        return NULL;
    size_t mask = cls->index_size - 1;
    for (size_t i = shm_index_home(cls, uid); cls->index[i];
         i = (i + 1) & mask) {
        if (cls->index[i]->uid == uid)
            return cls->index[i];
    }
    return NULL;
}

bool shm_peer_index(struct cw_na_class *cls, struct shm_peer *peer)
{
    if (peer->indexed || peer->uid == 0 || peer->state == SHM_PEER_DEAD)
        return true;
    /* At most half full, so that probe runs stay short. */
    if ((cls->nindexed + 1) * 2 > cls->index_size && !shm_index_grow(cls))
        return false;
    shm_index_put(cls, peer);
    peer->indexed = true;
    cls->nindexed++;
    return true;
}

void shm_peer_connected(struct cw_na_class *cls, struct shm_peer *peer)
{
    if (!peer->unsolicited)
        return;
    shm_list_del(&peer->ulink);
    peer->unsolicited = false;
    cls->nunsolicited--;
}

void shm_peer_unindex(struct cw_na_class *cls, struct shm_peer *peer)
{
    shm_peer_connected(cls, peer); /* no longer counted either way */
    if (!peer->indexed)
        return;
    size_t mask = cls->index_size - 1;
    size_t hole = shm_index_home(cls, peer->uid);
    while (cls->index[hole] != peer)
        hole = (hole + 1) & mask;
    /* Close the hole: an entry further on in the run moves into it unless
     * its home lies cyclically in (hole, j], where probing still finds
     * it.  No tombstones, so lookups never slow down with deletions. */
    for (size_t j = (hole + 1) & mask; cls->index[j]; j = (j + 1) & mask) {
        size_t home = shm_index_home(cls, cls->index[j]->uid);
        bool stays =
            hole < j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!stays) {
            cls->index[hole] = cls->index[j];
            hole = j;
        }
    }
    cls->index[hole] = NULL;
    peer->indexed = false;
    cls->nindexed--;
}

void shm_peer_forget_forged(struct cw_na_class *cls, struct shm_peer *peer,
                            const char *why)
{
    unsigned n = 0;

    /* What was queued under it came from whoever wrote those slots, not
     * provably from the endpoint that holds the id or the name. */
    for (struct shm_list *l = cls->early.next; l != &cls->early;) {
        struct shm_early *e = shm_container_of(l, struct shm_early, link);
        l = l->next;
        if (e->source != peer)
            continue;
        shm_list_del(&e->link);
        cls->nearly--;
        n++;
        shm_peer_unref(peer); /* the table's reference remains */
        free(e);
    }
    cls->dropped += n;
    SHM_WARN_RL(cls,
                "forgot shm://%s, known only from ring slots: %s; "
                "dropped its %u queued messages (%llu dropped so far)",
                peer->name, why, n, (unsigned long long)cls->dropped);
    /* Receives posted on this record (not on its id, which belongs to
     * another endpoint) will get nothing from it.  It has no backlog: a
     * send attaches first, and an attached record is not slot-only. */
    for (struct shm_list *l = cls->exp_posted.next; l != &cls->exp_posted;) {
        struct cw_na_op *op = shm_container_of(l, struct cw_na_op, link);
        l = l->next;
        if (op->peer == peer) {
            shm_list_del(&op->link);
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
    for (struct shm_list *l = cls->unsolicited.next; l != &cls->unsolicited;) {
        struct shm_peer *p = shm_container_of(l, struct shm_peer, ulink);
        l = l->next;
        if (shm_peer_slot_only(p) && p->uid != uid &&
            strcmp(p->name, name) == 0)
            shm_peer_forget_forged(cls, p,
                                   "another id listens under its "
                                   "name");
    }
}

void shm_peer_index_fini(struct cw_na_class *cls)
{
    free(cls->index);
    cls->index = NULL;
    cls->index_size = 0;
    cls->nindexed = 0;
}

/* Forget the peers known only from ring slots that nothing refers to any
 * more (no message of theirs queued, no address or operation held): all
 * they are is a name and an id, learnt again from their next slot. */
static void shm_unsolicited_reap(struct cw_na_class *cls)
{
    for (struct shm_list *l = cls->unsolicited.next; l != &cls->unsolicited;) {
        struct shm_peer *p = shm_container_of(l, struct shm_peer, ulink);
        l = l->next;
        if (p->refs == 1)
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
    shm_list_add_tail(&cls->unsolicited, &p->ulink);
    cls->nunsolicited++;
    *peer_p = p;
    return CW_OK;
}
