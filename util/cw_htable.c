/* The resizable keyed hash table (cw_htable.h). */
#include "cw_htable.h"

#include <stdlib.h>
#include <string.h>

#define HT_MIN_BUCKETS 16

void cw_htable_set_key(struct cw_htable *t,
                       const uint8_t key[CW_SIPHASH_KEY_LEN])
{
    memcpy(t->key, key, sizeof(t->key));
    t->keyed = true;
}

uint64_t cw_htable_hash(struct cw_htable *t, const void *key, size_t len)
{
    if (!t->keyed) {
        cw_siphash_seed_get(t->key);
        t->keyed = true;
    }
    return cw_siphash_13(t->key, key, len);
}

static inline size_t ht_slot(const struct cw_htable *t, uint64_t hash)
{
    return (size_t)hash & (t->nbuckets - 1);
}

struct cw_hnode *cw_htable_find(struct cw_htable *t, const void *key,
                                size_t len)
{
    if (t->count == 0)
        return NULL;
    return cw_htable_find_hash(t, key, len, cw_htable_hash(t, key, len));
}

struct cw_hnode *cw_htable_find_hash(struct cw_htable *t, const void *key,
                                     size_t len, uint64_t h)
{
    if (t->count == 0)
        return NULL;
    for (struct cw_hnode *n = t->buckets[ht_slot(t, h)]; n; n = n->hnext)
        if (n->hash == h && n->klen == len && memcmp(n->key, key, len) == 0)
            return n;
    return NULL;
}

struct cw_hnode *cw_htable_find_str(struct cw_htable *t, const char *key)
{
    return cw_htable_find(t, key, strlen(key));
}

/* Move every entry into @p nb buckets; false when they cannot be had. */
static bool ht_resize(struct cw_htable *t, size_t nb)
{
    struct cw_hnode **b = calloc(nb, sizeof(*b));

    if (b == NULL)
        return false;
    for (size_t i = 0; i < t->nbuckets; i++) {
        while (t->buckets[i] != NULL) {
            struct cw_hnode *n = t->buckets[i];
            size_t j = (size_t)n->hash & (nb - 1);
            t->buckets[i] = n->hnext;
            n->hnext = b[j];
            b[j] = n;
        }
    }
    free(t->buckets);
    t->buckets = b;
    t->nbuckets = nb;
    t->resizes++;
    return true;
}

static void lru_unlink(struct cw_htable *t, struct cw_hnode *n)
{
    if (n->older != NULL)
        n->older->newer = n->newer;
    else
        t->oldest = n->newer;
    if (n->newer != NULL)
        n->newer->older = n->older;
    else
        t->newest = n->older;
}

static void lru_append(struct cw_htable *t, struct cw_hnode *n)
{
    n->newer = NULL;
    n->older = t->newest;
    if (t->newest != NULL)
        t->newest->newer = n;
    else
        t->oldest = n;
    t->newest = n;
}

cw_status_t cw_htable_insert(struct cw_htable *t, struct cw_hnode *n,
                             const void *key, size_t len)
{
    return cw_htable_insert_hash(t, n, key, len, cw_htable_hash(t, key, len));
}

cw_status_t cw_htable_insert_hash(struct cw_htable *t, struct cw_hnode *n,
                                  const void *key, size_t len, uint64_t hash)
{
    size_t j;

    if (t->buckets == NULL && !ht_resize(t, HT_MIN_BUCKETS))
        return CW_NOMEM;
    /* Past 3/4 load, double; a failed grow leaves longer chains only. */
    if ((t->count + 1) * 4 > t->nbuckets * 3 &&
        t->nbuckets <= SIZE_MAX / 2 / sizeof(*t->buckets))
        (void)ht_resize(t, t->nbuckets * 2);
    n->key = key;
    n->klen = len;
    n->hash = hash;
    j = ht_slot(t, n->hash);
    n->hnext = t->buckets[j];
    t->buckets[j] = n;
    lru_append(t, n);
    t->count++;
    return CW_OK;
}

cw_status_t cw_htable_insert_str(struct cw_htable *t, struct cw_hnode *n,
                                 const char *key)
{
    return cw_htable_insert(t, n, key, strlen(key));
}

void cw_htable_remove(struct cw_htable *t, struct cw_hnode *n)
{
    struct cw_hnode **pp = &t->buckets[ht_slot(t, n->hash)];

    while (*pp != n)
        pp = &(*pp)->hnext;
    *pp = n->hnext;
    n->hnext = NULL;
    lru_unlink(t, n);
    n->older = n->newer = NULL;
    t->count--;
    /* Below 1/16 load, halve (a flood's buckets are not kept for ever);
     * a failed shrink changes nothing. */
    if (t->nbuckets > HT_MIN_BUCKETS && t->count * 16 < t->nbuckets)
        (void)ht_resize(t, t->nbuckets / 2);
}

void cw_htable_touch(struct cw_htable *t, struct cw_hnode *n)
{
    if (t->newest == n)
        return;
    lru_unlink(t, n);
    lru_append(t, n);
}

void cw_htable_fini(struct cw_htable *t)
{
    free(t->buckets);
    t->buckets = NULL;
    t->nbuckets = 0;
    t->count = 0;
    t->oldest = t->newest = NULL;
}
