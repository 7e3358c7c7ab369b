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
/** Hash of a key of struct rt_hash: SipHash under the process's key. */
uint64_t rt_hash_key(const char *s);
/** Hash of @p s under a key made of @p seed: the same in every process. */
uint64_t rt_hash_seeded(const char *s, uint64_t seed);

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

/* IP prefixes of one bucket: a hash of (family, length, masked address)
 * probed once per distinct prefix length present, longest first, so a
 * lookup costs at most 33 (IPv4) probes whatever the number of routes. */
struct rt_pfx_entry {
    bool used;
    uint8_t family;
    uint8_t len;
    uint8_t ip[16];
    int32_t group;
};

struct rt_pfx_table {
    struct rt_pfx_entry *e;
    size_t cap; /* power of two */
    size_t n;
};

/* Patterns of one "<plugin>+<proto>" scheme key (either may be '*'). */
struct rt_bucket {
    unsigned pp_rank; /* 3 exact, 2 plugin+*, 1 *+proto, 0 *+* */
    uint8_t lens4[33];
    unsigned n4;
    uint8_t lens6[129];
    unsigned n6;
    struct rt_pfx_table pfx;
    struct rt_hash exact;    /* location -> group (CW_PATTERN_EXACT) */
    struct rt_hash hostport; /* "host#port" -> group */
    struct rt_hash host;     /* host -> group */
    struct rt_group *any;    /* "*" location */
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

enum rt_allow_kind {
    RT_ALLOW_ANY,
    RT_ALLOW_SVC,
    RT_ALLOW_SVC_ANY,
    RT_ALLOW_PATTERN
};

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
    uint64_t serial; /* unique per built table, never 0 (route memos) */
    char *path;
    char **network_names;
    size_t nnetworks;
    struct rt_nexthop *nexthops;
    size_t nnexthops;
    struct rt_route *routes;
    size_t nroutes; /* written + implicit */
    size_t nwritten;
    struct rt_group **groups;
    size_t ngroups;
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

/* Add a prefix of a bucket; CW_EXIST when it is already there. */
cw_status_t rt_pfx_insert(struct rt_bucket *b, uint8_t family, uint8_t len,
                          const uint8_t *ip, int32_t group);
void rt_pfx_free(struct rt_bucket *b);
/* The group of exactly this prefix, or -1. */
int32_t rt_pfx_find(const struct rt_bucket *b, uint8_t family, uint8_t len,
                    const uint8_t *ip);

/* Route selection; returns the route index or -1 (set: what matched). */
long rt_select(struct cw_route_table *t, const struct cw_uri *dest,
               struct rt_match_set *set);
void rt_fill_result(const struct cw_route_table *t, unsigned ri,
                    struct cw_route_result *res);

/* Consecutive failures take a next hop / backend out, consecutive
 * successes bring it back.  invert: the flag means "out" (ejected). */
enum cw_health_change rt_health_report(atomic_bool *flag, bool invert,
                                       atomic_uint *fails,
                                       atomic_uint *successes, bool success,
                                       unsigned eject_after,
                                       unsigned recover_after);

cw_status_t rt_build_services(struct cw_route_table *t,
                              const struct cw_config *cfg);
cw_status_t rt_build_acl(struct cw_route_table *t, const struct cw_config *cfg);

/* Specificity score of a pattern. */
unsigned rt_pattern_spec(const struct cw_addr_pattern *pat);

#endif /* CW_ROUTING_INT_H */
