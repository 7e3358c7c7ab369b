/* Lookup structures: string hashes for exact keys and a hash per prefix
 * prefixes, so a lookup costs the same with 10 or 10 000 routes. */
#include "routing_int.h"
#include "cw_siphash.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t rt_hash_key(const char *s)
{
    /* Lookups hash destinations that peers choose: keyed, so that none
     * can aim at the clusters of the table's probe sequences. */
    return cw_siphash_str(s);
}

uint64_t rt_hash_seeded(const char *s, uint64_t seed)
{
    uint8_t key[CW_SIPHASH_KEY_LEN];

    /* The same on every gateway and across restarts (rendezvous hashing
     * keeps a caller on its backend); not a table, nothing to flood. */
    for (unsigned i = 0; i < 8; i++) {
        key[i] = (uint8_t)(seed >> (8 * i));
        key[8 + i] = (uint8_t)(~seed >> (8 * i));
    }
    return cw_siphash_24(key, s, strlen(s));
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
        j = rt_hash_key(h->keys[i]) & (ncap - 1);
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
    j = rt_hash_key(key) & (h->cap - 1);
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
    j = rt_hash_key(key) & (h->cap - 1);
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

static uint64_t pfx_hash(uint8_t family, uint8_t len, const uint8_t *ip)
{
    uint64_t w0;
    uint64_t w1;
    uint64_t h;

    memcpy(&w0, ip, 8);
    memcpy(&w1, ip + 8, 8);
    h = w0 * 0x9e3779b97f4a7c15ull ^
        (w1 + 0x632be59bd9b4e019ull) * 0xc2b2ae3d27d4eb4full;
    h ^= (uint64_t)family << 8 | len;
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    return h;
}

static struct rt_pfx_entry *pfx_slot(const struct rt_pfx_table *t,
                                     uint8_t family, uint8_t len,
                                     const uint8_t *ip)
{
    size_t j = pfx_hash(family, len, ip) & (t->cap - 1);

    while (t->e[j].used) {
        const struct rt_pfx_entry *e = &t->e[j];
        if (e->family == family && e->len == len && memcmp(e->ip, ip, 16) == 0)
            break;
        j = (j + 1) & (t->cap - 1);
    }
    return &t->e[j];
}

static cw_status_t pfx_grow(struct rt_pfx_table *t)
{
    struct rt_pfx_table nt = {NULL, t->cap ? t->cap * 2 : 32, 0};

    nt.e = calloc(nt.cap, sizeof(*nt.e));
    if (nt.e == NULL)
        return CW_NOMEM;
    for (size_t i = 0; i < t->cap; i++) {
        if (t->e[i].used) {
            *pfx_slot(&nt, t->e[i].family, t->e[i].len, t->e[i].ip) = t->e[i];
            nt.n++;
        }
    }
    free(t->e);
    *t = nt;
    return CW_OK;
}

static void lens_add(uint8_t *lens, unsigned *n, uint8_t len)
{
    unsigned i = 0;

    while (i < *n && lens[i] > len)
        i++;
    if (i < *n && lens[i] == len)
        return;
    memmove(lens + i + 1, lens + i, *n - i);
    lens[i] = len;
    (*n)++;
}

cw_status_t rt_pfx_insert(struct rt_bucket *b, uint8_t family, uint8_t len,
                          const uint8_t *ip, int32_t group)
{
    struct rt_pfx_entry *e;

    if ((b->pfx.n + 1) * 2 > b->pfx.cap && pfx_grow(&b->pfx) != CW_OK)
        return CW_NOMEM;
    e = pfx_slot(&b->pfx, family, len, ip);
    if (e->used)
        return CW_EXIST;
    e->used = true;
    e->family = family;
    e->len = len;
    memcpy(e->ip, ip, 16);
    e->group = group;
    b->pfx.n++;
    if (family == 4)
        lens_add(b->lens4, &b->n4, len);
    else
        lens_add(b->lens6, &b->n6, len);
    return CW_OK;
}

int32_t rt_pfx_find(const struct rt_bucket *b, uint8_t family, uint8_t len,
                    const uint8_t *ip)
{
    const struct rt_pfx_entry *e;

    if (b->pfx.cap == 0)
        return -1;
    e = pfx_slot(&b->pfx, family, len, ip);
    return e->used ? e->group : -1;
}

void rt_pfx_free(struct rt_bucket *b)
{
    free(b->pfx.e);
    b->pfx.e = NULL;
    b->pfx.cap = b->pfx.n = 0;
}

unsigned rt_pattern_spec(const struct cw_addr_pattern *pat)
{
    static const unsigned cls[] = {
        [CW_PATTERN_ANY] = 1,   [CW_PATTERN_PREFIX] = 2,
        [CW_PATTERN_HOST] = 3,  [CW_PATTERN_HOSTPORT] = 4,
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

static void pfx_walk(const struct cw_route_table *t, const struct rt_bucket *b,
                     uint8_t family, const uint8_t *ip,
                     struct rt_match_set *set)
{
    const uint8_t *lens = family == 4 ? b->lens4 : b->lens6;
    unsigned n = family == 4 ? b->n4 : b->n6;
    uint8_t masked[16];

    if (b->pfx.n == 0)
        return;
    for (unsigned i = 0; i < n; i++) {
        unsigned len = lens[i];
        const struct rt_pfx_entry *e;

        memset(masked, 0, sizeof(masked));
        memcpy(masked, ip, len / 8);
        if (len % 8)
            masked[len / 8] = (uint8_t)(ip[len / 8] & (0xffu << (8 - len % 8)));
        e = pfx_slot(&b->pfx, family, (uint8_t)len, masked);
        if (e->used)
            set_add(set, t->groups[e->group]);
    }
}

/* out = a + b + c (+ d), truncated to cap; returns out. */
static const char *key_cat(char *out, size_t cap, const char *a, const char *b,
                           const char *c, const char *d)
{
    const char *parts[4] = {a, b, c, d};
    size_t off = 0;

    for (int i = 0; i < 4 && parts[i]; i++) {
        size_t l = strlen(parts[i]);
        if (off + l >= cap)
            l = cap - off - 1;
        memcpy(out + off, parts[i], l);
        off += l;
    }
    out[off] = '\0';
    return out;
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
    char portbuf[8] = "";
    bool host_ok;
    size_t npp = 0;

    set->n = 0;
    host_ok = cw_location_host(dest->location, host, &port, &fam, ip) == CW_OK;
    if (host_ok && port) {
        /* "#<port>" as the table builder writes it. */
        char digits[8];
        int nd = 0;
        unsigned p = port;
        do {
            digits[nd++] = (char)('0' + p % 10);
            p /= 10;
        } while (p);
        portbuf[0] = '#';
        for (int i = 0; i < nd; i++)
            portbuf[1 + i] = digits[nd - 1 - i];
        portbuf[1 + nd] = '\0';
    }
    key_cat(pps[npp++], sizeof(pps[0]), dest->plugin, "+", dest->protocol,
            NULL);
    key_cat(pps[npp++], sizeof(pps[0]), dest->plugin, "+*", NULL, NULL);
    key_cat(pps[npp++], sizeof(pps[0]), "*+", dest->protocol, NULL, NULL);
    key_cat(pps[npp++], sizeof(pps[0]), "*+*", NULL, NULL, NULL);
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
        set_add(set, rt_hash_get(&b->exact, dest->location));
        if (host_ok && host[0]) {
            if (port && b->hostport.n)
                set_add(set, rt_hash_get(&b->hostport,
                                         key_cat(key, sizeof(key), host,
                                                 portbuf, NULL, NULL)));
            set_add(set, rt_hash_get(&b->host, host));
        }
        if (fam)
            pfx_walk(t, b, fam, ip, set);
        set_add(set, b->any);
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
