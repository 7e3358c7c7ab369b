/* routing/ internals: the immutable table and its atomic counters. */
#ifndef CW_ROUTING_INT_H
#define CW_ROUTING_INT_H

#include <causeway/routing.h>

#include <stdatomic.h>

/* A string -> pointer hash table (open addressing, built once). */
struct rt_hash {
    char **keys;
    void **vals;
    size_t cap; /* power of two */
    size_t n;
};

cw_status_t rt_hash_put(struct rt_hash *h, const char *key, void *val);
void *rt_hash_get(const struct rt_hash *h, const char *key);
void rt_hash_free(struct rt_hash *h);
uint64_t rt_hash_str(const char *s, uint64_t seed);

/* A next hop: a network (direct delivery) or a gateway address. */
struct rt_nexthop {
    char *name;
    bool is_gateway;
    int network;
    atomic_bool up;
    atomic_uint fails;
    atomic_uint successes;
    atomic_uint inflight;
};

struct rt_route {
    unsigned nexthop;
    unsigned priority;
    unsigned hop;
    unsigned max_inflight;
    bool implicit;
    int cfg_index; /* routes[] index, -1 when implicit */
    char *dest;
    struct cw_config_loc loc;
};

/* Routes sharing one dest pattern (multi-gateway). */
struct rt_group {
    struct cw_addr_pattern pat;
    unsigned spec; /* specificity, larger wins */
    unsigned *routes;
    size_t nroutes;
    atomic_uint rr;
};

/* One binary trie node for IP prefixes. */
struct rt_trie_node {
    int32_t child[2];
    int32_t group; /* -1: none */
};

struct rt_trie {
    struct rt_trie_node *nodes;
    size_t n;
    size_t cap;
};

/* Patterns of one "<plugin>+<proto>" scheme key (either may be '*'). */
struct rt_bucket {
    unsigned pp_rank; /* 3 exact, 2 plugin+*, 1 *+proto, 0 *+* */
    struct rt_trie trie4;
    struct rt_trie trie6;
};

struct rt_backend {
    char *address;
    atomic_bool ejected;
    atomic_uint fails;
    atomic_uint successes;
    atomic_uint inflight;
};

struct rt_service {
    char *name;
    int policy;
    struct rt_backend *backends;
    size_t nbackends;
    atomic_uint rr;
};

enum rt_allow_kind { RT_ALLOW_ANY, RT_ALLOW_SVC, RT_ALLOW_SVC_ANY,
                     RT_ALLOW_PATTERN };

struct rt_allow {
    enum rt_allow_kind kind;
    char *svc;
    struct cw_addr_pattern pat;
};

struct rt_acl {
    char *from;
    char *to;
    struct rt_allow *allow;
    size_t nallow;
};

struct cw_route_table {
    atomic_uint refs;
    char *path;
    char **network_names;
    size_t nnetworks;
    struct rt_nexthop *nexthops;
    size_t nnexthops;
    struct rt_route *routes;
    size_t nroutes;      /* written + implicit */
    size_t nwritten;
    struct rt_group **groups;
    size_t ngroups;
    struct rt_hash group_index;  /* "<pp>|<kind>|<text>" -> group */
    struct rt_hash bucket_index; /* "<pp>" -> bucket */
    struct rt_bucket **buckets;
    size_t nbuckets;
    struct rt_service *services;
    size_t nservices;
    struct rt_hash service_index;
    bool has_acl;
    struct rt_acl *acl;
    size_t nacl;
    unsigned eject_after;
    unsigned recover_after;
};

/* Every group matching a destination, most specific first. */
#define RT_MAX_MATCHES 600
struct rt_match_set {
    struct rt_group *g[RT_MAX_MATCHES];
    size_t n;
};

void rt_match(const struct cw_route_table *t, const struct cw_uri *dest,
              struct rt_match_set *set);

/* The routes of group g that the selection would consider equal-best
 * (lowest priority then hop, ignoring health); returns how many. */
size_t rt_group_best(const struct cw_route_table *t, const struct rt_group *g,
                     unsigned *routes, size_t max);

cw_status_t rt_trie_insert(struct rt_trie *trie, const uint8_t *ip,
                           unsigned bits, int32_t group, int32_t *prev_p);

/* Route selection; returns the route index or -1 (set: what matched). */
long rt_select(struct cw_route_table *t, const struct cw_uri *dest,
               struct rt_match_set *set);
void rt_fill_result(const struct cw_route_table *t, unsigned ri,
                    struct cw_route_result *res);

/* Consecutive failures take a next hop / backend out, consecutive
 * successes bring it back.  invert: the flag means "out" (ejected). */
bool rt_health_report(atomic_bool *flag, bool invert, atomic_uint *fails,
                      atomic_uint *successes, bool success,
                      unsigned eject_after, unsigned recover_after);

cw_status_t rt_build_services(struct cw_route_table *t,
                              const struct cw_config *cfg);
cw_status_t rt_build_acl(struct cw_route_table *t,
                         const struct cw_config *cfg);

/* Specificity score of a pattern. */
unsigned rt_pattern_spec(const struct cw_addr_pattern *pat);

#endif /* CW_ROUTING_INT_H */
