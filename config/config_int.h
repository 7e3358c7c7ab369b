/* config/ internals shared by the loader, the checks and the dump. */
#ifndef CW_CONFIG_INT_H
#define CW_CONFIG_INT_H

#include <causeway/config.h>

#include <yaml.h>

#define CFG_ERR_MAX 256 /* longest reason text from a value parser */

/* Section indices in the schema (file order). */
enum {
    SEC_GATEWAY,
    SEC_NETWORKS,
    SEC_ROUTES,
    SEC_SERVICES,
    SEC_BUFFERS,
    SEC_LIMITS,
    SEC_HEALTH,
    SEC_ACL,
    SEC_COUNT
};

/* Key indices of the list sections, used by the cross checks. */
enum { NET_NAME, NET_ADDRESS, NET_MAX_INFLIGHT, NET_BUSY_POLL };
enum { RT_DEST, RT_VIA, RT_GATEWAY, RT_PRIORITY, RT_HOP, RT_MAX_INFLIGHT };
enum { SVC_NAME, SVC_BACKENDS, SVC_POLICY };
enum { ACL_FROM, ACL_TO, ACL_ALLOW };
enum {
    GW_KEY_NAME,
    GW_KEY_ADMIN,
    GW_KEY_ADMIN_SOCKET,
    GW_KEY_ADMIN_SOCKET_MODE,
    GW_KEY_ADMIN_SOCKET_GROUP,
    GW_KEY_ADMIN_TOKEN_FILE
};

/* Where one key of one item was written (0 line = absent). */
struct cfg_keyloc {
    unsigned line;
    unsigned column;
};

/* State of one load: the diag, the error count, key locations. */
struct cfg_ctx {
    const char *file;
    unsigned flags;
    struct cw_config_diag *diag;
    unsigned nerrors;
    struct cw_config *cfg;
    /* Per section: per item (maps: one item): per key location. */
    struct cfg_keyloc **keylocs[16];
    struct cfg_keyloc sec_loc[16]; /* where each section was written */
    bool empty;                    /* the document had no content */
    bool sec_bad[16];              /* section present but of a wrong type */
    /* Where each stored allow-list entry was written. */
    struct cfg_entryloc *entries;
    size_t nentries;
    /* Errors are kept here and handed to diag sorted by position. */
    struct cfg_msg *msgs;
    size_t nmsgs;
    bool oom;
};

struct cfg_entryloc {
    const struct cw_config_strlist *list;
    size_t stored;  /* index in list->v */
    size_t written; /* index in the YAML sequence */
    unsigned line;
    unsigned column;
};

struct cfg_msg {
    unsigned line;
    unsigned column;
    size_t seq; /* discovery order, for a stable sort */
    char *text;
};

/* Hand the collected errors to ctx->diag in file order, and free them. */
void cfg_flush(struct cfg_ctx *ctx);

/* Record one error at line:column (1-based). */
void cfg_error(struct cfg_ctx *ctx, unsigned line, unsigned column,
               const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* Value parsers: CW_OK or CW_INVALID_ARG with "expected ..." in err. */
cw_status_t cfg_parse_uint(const char *s, uint64_t min, uint64_t max,
                           uint64_t *v_p, char *err, size_t errlen);
cw_status_t cfg_parse_size(const char *s, uint64_t min, uint64_t max,
                           uint64_t *v_p, char *err, size_t errlen);
cw_status_t cfg_parse_duration(const char *s, uint64_t min, uint64_t max,
                               uint64_t *v_p, char *err, size_t errlen);
cw_status_t cfg_parse_bool(const char *s, bool *v_p, char *err, size_t errlen);
cw_status_t cfg_parse_enum(const char *s, const char *const *words, int *v_p,
                           char *err, size_t errlen);
cw_status_t cfg_parse_name(const char *s, char *err, size_t errlen);
cw_status_t cfg_parse_hostport(const char *s, char *err, size_t errlen);
cw_status_t cfg_parse_allow(const char *s, char *err, size_t errlen);

/* What an address is used for: a network to listen on (port 0 or none and
 * an empty location let the plugin pick) or a peer to look up. */
enum cfg_addr_role { CFG_ADDR_LISTEN, CFG_ADDR_PEER };

/* Whether one of Causeway's plugins opens @p plugin with @p protocol
 * (either may be "*", as in a destination pattern).  CW_OK or
 * CW_INVALID_ARG with the reason in err (config_addr.c). */
cw_status_t cfg_fabric_check(const char *plugin, const char *protocol,
                             char *err, size_t errlen);

/* An address as its plugin would parse it for @p role: known plugin and
 * protocol, then the location's host, port, name or device syntax. */
cw_status_t cfg_addr_check(const struct cw_uri *uri, enum cfg_addr_role role,
                           char *err, size_t errlen);

/* Formatters producing what the parsers accept (canonical units). */
void cfg_format_size(uint64_t v, char *buf, size_t len);
void cfg_format_duration(uint64_t ns, char *buf, size_t len);
void cfg_format_bounds(const struct cw_config_key *key, char *buf, size_t len);

/* Edit distance for "did you mean"; returns the best candidate or NULL. */
const char *cfg_suggest(const char *word, const char *const *cands,
                        size_t ncands);

/* Store a value given as text into the struct at base + key->offset.
 * Lists are not handled here (see the loader). */
cw_status_t cfg_store_scalar(const struct cw_config_key *key, void *base,
                             const char *text, char *err, size_t errlen);

/* Release what a key owns inside base. */
void cfg_free_value(const struct cw_config_key *key, void *base);

/* Apply every default of a section's keys to base.  CW_INTERNAL if a default
 * of the schema does not parse (a bug, reported to stderr). */
cw_status_t cfg_apply_defaults(const struct cw_config_key *keys, size_t nkeys,
                               void *base);

/* Section lookup by name; -1 if none. */
int cfg_section_find(const char *name);

/* Cross-section checks after every key was stored. */
void cfg_check(struct cfg_ctx *ctx);

/* The admin plane's keys: socket path, mode and group, the token file
 * (config_admin.c). */
void cfg_check_admin(struct cfg_ctx *ctx);

/* Compare one key's values in two structs. */
bool cfg_value_equal(const struct cw_config_key *key, const void *a,
                     const void *b);

/* Write one key's value as YAML text (quoted when needed). */
void cfg_write_value(const struct cw_config_key *key, const void *base,
                     FILE *out);

#endif /* CW_CONFIG_INT_H */
