/* Lookup structures: a string hash for exact keys and binary tries for IP
 * prefixes, so a lookup costs the same with 10 or 10 000 routes. */
#include "routing_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t rt_hash_str(const char *s, uint64_t seed)
{
    uint64_t h = 1469598103934665603ull ^ seed;

    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    /* Final mix so that low bits depend on every byte. */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static cw_status_t hash_grow(struct rt_hash *h)
{
    size_t ncap = h->cap ? h->cap * 2 : 64;
    char **keys = calloc(ncap, sizeof(*keys));
    void **vals = calloc(ncap, sizeof(*vals));

    if (keys == NULL || vals == NULL) {
        free(keys);
        free(vals);
        return CW_NOMEM;
    }
    for (size_t i = 0; i < h->cap; i++) {
        size_t j;
        if (h->keys[i] == NULL)
            continue;
        j = rt_hash_str(h->keys[i], 0) & (ncap - 1);
        while (keys[j])
            j = (j + 1) & (ncap - 1);
        keys[j] = h->keys[i];
        vals[j] = h->vals[i];
    }
    free(h->keys);
    free(h->vals);
    h->keys = keys;
    h->vals = vals;
    h->cap = ncap;
    return CW_OK;
}

cw_status_t rt_hash_put(struct rt_hash *h, const char *key, void *val)
{
    size_t j;

    if ((h->n + 1) * 2 > h->cap && hash_grow(h) != CW_OK)
        return CW_NOMEM;
    j = rt_hash_str(key, 0) & (h->cap - 1);
    while (h->keys[j]) {
        if (strcmp(h->keys[j], key) == 0)
            return CW_EXIST;
        j = (j + 1) & (h->cap - 1);
    }
    h->keys[j] = strdup(key);
    if (h->keys[j] == NULL)
        return CW_NOMEM;
    h->vals[j] = val;
    h->n++;
    return CW_OK;
}

void *rt_hash_get(const struct rt_hash *h, const char *key)
{
    size_t j;

    if (h->cap == 0)
        return NULL;
    j = rt_hash_str(key, 0) & (h->cap - 1);
    while (h->keys[j]) {
        if (strcmp(h->keys[j], key) == 0)
            return h->vals[j];
        j = (j + 1) & (h->cap - 1);
    }
    return NULL;
}

void rt_hash_free(struct rt_hash *h)
{
    for (size_t i = 0; i < h->cap; i++)
        free(h->keys[i]);
    free(h->keys);
    free(h->vals);
    memset(h, 0, sizeof(*h));
}

static int32_t trie_node_new(struct rt_trie *trie)
{
    if (trie->n == trie->cap) {
        size_t ncap = trie->cap ? trie->cap * 2 : 64;
        struct rt_trie_node *nn = realloc(trie->nodes, ncap * sizeof(*nn));
        if (nn == NULL)
            return -1;
        trie->nodes = nn;
        trie->cap = ncap;
    }
    trie->nodes[trie->n].child[0] = -1;
    trie->nodes[trie->n].child[1] = -1;
    trie->nodes[trie->n].group = -1;
    return (int32_t)trie->n++;
}

static unsigned ip_bit(const uint8_t *ip, unsigned b)
{
    return (ip[b / 8] >> (7 - b % 8)) & 1u;
}

cw_status_t rt_trie_insert(struct rt_trie *trie, const uint8_t *ip,
                           unsigned bits, int32_t group, int32_t *prev_p)
{
    int32_t cur;

    if (trie->n == 0 && trie_node_new(trie) < 0)
        return CW_NOMEM;
    cur = 0;
    for (unsigned b = 0; b < bits; b++) {
        unsigned bit = ip_bit(ip, b);
        int32_t next = trie->nodes[cur].child[bit];
        if (next < 0) {
            next = trie_node_new(trie);
            if (next < 0)
                return CW_NOMEM;
            trie->nodes[cur].child[bit] = next;
        }
        cur = next;
    }
    *prev_p = trie->nodes[cur].group;
    if (trie->nodes[cur].group < 0)
        trie->nodes[cur].group = group;
    return CW_OK;
}

unsigned rt_pattern_spec(const struct cw_addr_pattern *pat)
{
    static const unsigned cls[] = {
        [CW_PATTERN_ANY] = 1,      [CW_PATTERN_PREFIX] = 2,
        [CW_PATTERN_HOST] = 3,     [CW_PATTERN_HOSTPORT] = 4,
        [CW_PATTERN_EXACT] = 5,
    };
    bool plugin = strcmp(pat->plugin, "*") != 0;
    bool proto = strcmp(pat->protocol, "*") != 0;
    unsigned pp = plugin && proto ? 3 : plugin ? 2 : proto ? 1 : 0;
    unsigned len = pat->kind == CW_PATTERN_PREFIX ? pat->prefix_len : 0;

    return cls[pat->kind] << 16 | len << 8 | pp;
}

static void set_add(struct rt_match_set *set, struct rt_group *g)
{
    size_t i;

    if (g == NULL || set->n == RT_MAX_MATCHES)
        return;
    /* Insertion keeps the set sorted, most specific first. */
    i = set->n++;
    while (i > 0 && set->g[i - 1]->spec < g->spec) {
        set->g[i] = set->g[i - 1];
        i--;
    }
    set->g[i] = g;
}

static void trie_walk(const struct cw_route_table *t, const struct rt_trie *trie,
                      const uint8_t *ip, unsigned bits,
                      struct rt_match_set *set)
{
    int32_t cur = 0;

    if (trie->n == 0)
        return;
    for (unsigned b = 0;; b++) {
        const struct rt_trie_node *node = &trie->nodes[cur];
        if (node->group >= 0)
            set_add(set, t->groups[node->group]);
        if (b == bits)
            break;
        cur = node->child[ip_bit(ip, b)];
        if (cur < 0)
            break;
    }
}

void rt_match(const struct cw_route_table *t, const struct cw_uri *dest,
              struct rt_match_set *set)
{
    char pps[4][CW_URI_PLUGIN_MAX + CW_URI_PROTOCOL_MAX + 2];
    char key[512];
    char host[CW_URI_LOCATION_MAX];
    uint16_t port = 0;
    uint8_t fam = 0;
    uint8_t ip[16];
    bool host_ok;
    size_t npp = 0;

    set->n = 0;
    host_ok = cw_location_host(dest->location, host, &port, &fam, ip) == CW_OK;
    snprintf(pps[npp++], sizeof(pps[0]), "%s+%s", dest->plugin,
             dest->protocol);
    snprintf(pps[npp++], sizeof(pps[0]), "%s+*", dest->plugin);
    snprintf(pps[npp++], sizeof(pps[0]), "*+%s", dest->protocol);
    snprintf(pps[npp++], sizeof(pps[0]), "*+*");
    for (size_t k = 0; k < npp; k++) {
        const struct rt_bucket *b;
        bool dup = false;

        for (size_t j = 0; j < k; j++)
            dup = dup || strcmp(pps[j], pps[k]) == 0;
        if (dup)
            continue;
        b = rt_hash_get(&t->bucket_index, pps[k]);
        if (b == NULL)
            continue;
        snprintf(key, sizeof(key), "%s|E|%s", pps[k], dest->location);
        set_add(set, rt_hash_get(&t->group_index, key));
        if (host_ok && host[0]) {
            if (port) {
                snprintf(key, sizeof(key), "%s|P|%s#%u", pps[k], host, port);
                set_add(set, rt_hash_get(&t->group_index, key));
            }
            snprintf(key, sizeof(key), "%s|H|%s", pps[k], host);
            set_add(set, rt_hash_get(&t->group_index, key));
        }
        if (fam == 4)
            trie_walk(t, &b->trie4, ip, 32, set);
        else if (fam == 6)
            trie_walk(t, &b->trie6, ip, 128, set);
        snprintf(key, sizeof(key), "%s|*", pps[k]);
        set_add(set, rt_hash_get(&t->group_index, key));
    }
}

size_t rt_group_best(const struct cw_route_table *t, const struct rt_group *g,
                     unsigned *routes, size_t max)
{
    unsigned best_prio = ~0u;
    unsigned best_hop = ~0u;
    size_t n = 0;

    for (size_t i = 0; i < g->nroutes; i++) {
        const struct rt_route *r = &t->routes[g->routes[i]];
        if (r->priority < best_prio ||
            (r->priority == best_prio && r->hop < best_hop)) {
            best_prio = r->priority;
            best_hop = r->hop;
        }
    }
    for (size_t i = 0; i < g->nroutes && n < max; i++) {
        const struct rt_route *r = &t->routes[g->routes[i]];
        if (r->priority == best_prio && r->hop == best_hop)
            routes[n++] = g->routes[i];
    }
    return n;
}
