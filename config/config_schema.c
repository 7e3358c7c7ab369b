/* The schema: one table per section.  Defaults are written as a user would
 * write them and go through the same parsers as the file. */
#include "config_int.h"

#include <stddef.h>
#include <string.h>

#define NS_PER_MS 1000000ull
#define NS_PER_S  1000000000ull
#define KIB       1024ull
#define MIB       (1024ull * KIB)
#define GIB       (1024ull * MIB)
#define TIB       (1024ull * GIB)

static const char *const log_words[] = {"none",  "error", "warn", "info",
                                        "debug", "trace", NULL};
static const char *const policy_words[] = {"round_robin", "least_inflight",
                                           "hash", NULL};
static const char *const auto_words[] = {"auto", NULL};

#define K(struct_, field) offsetof(struct struct_, field)

static const struct cw_config_key gateway_keys[] = {
    {"name", CW_CFG_NAME, K(cw_config_gateway, name), "causewayd", false, 0, 0,
     NULL, false, "Name of this gateway in logs, stats and cwctl."},
    {"admin", CW_CFG_HOSTPORT, K(cw_config_gateway, admin), "127.0.0.1:9464",
     false, 0, 0, NULL, false,
     "Admin/stats endpoint \"host:port\" over TCP; \"\" disables it. "
     "reload and drain are accepted from loopback clients only; with "
     "admin_token_file every request needs the token."},
    {"admin_socket", CW_CFG_STRING, K(cw_config_gateway, admin_socket), "",
     false, 0, 0, NULL, false,
     "Admin endpoint on a Unix socket at this path: the protocol and "
     "commands of admin, reload and drain included; \"\" disables it. Who "
     "may connect is the file's mode and group: it is created with "
     "admin_socket_mode and admin_socket_group, replacing a stale socket "
     "file nothing listens on, and removed on exit. The shipped "
     "configuration uses /run/causeway/admin.sock, cwctl's default."},
    {"admin_socket_mode", CW_CFG_STRING,
     K(cw_config_gateway, admin_socket_mode), "0660", false, 0, 0, NULL, false,
     "File mode of admin_socket, in octal (connecting needs write "
     "permission)."},
    {"admin_socket_group", CW_CFG_STRING,
     K(cw_config_gateway, admin_socket_group), "", false, 0, 0, NULL, false,
     "Group of admin_socket (a name or a number), whose members may use it "
     "with mode 0660; \"\": the gateway's own group."},
    {"admin_token_file", CW_CFG_STRING, K(cw_config_gateway, admin_token_file),
     "", false, 0, 0, NULL, false,
     "File holding a bearer token that every request on the TCP admin "
     "endpoint must carry (HTTP \"Authorization: Bearer TOKEN\", or a "
     "first line \"auth TOKEN\"); answered 401 without it. The file must "
     "exist, hold the token (one line of printable ASCII; trailing white "
     "space ignored) and be neither readable nor writable by other users, "
     "else the gateway does not start. \"\": no token."},
    {"threads", CW_CFG_UINT, K(cw_config_gateway, threads), "auto", false, 1,
     256, auto_words, false,
     "Worker threads, or auto: one per CPU the process may run on (its "
     "affinity), at most 16. Each has its own context and an endpoint on "
     "every network behind the one published address, and runs the "
     "requests of the callers spread to it from start to end (at most 64 "
     "are used)."},
    {"log_level", CW_CFG_ENUM, K(cw_config_gateway, log_level), "warn", false,
     0, 0, log_words, true,
     "Log threshold (CAUSEWAY_LOG_LEVEL and --log-level override it)."},
    {"busy_poll", CW_CFG_BOOL, K(cw_config_gateway, busy_poll), "false", false,
     0, 0, NULL, false,
     "Spin on progress instead of blocking in epoll (lowest latency, one "
     "core per thread)."},
    {"drain_grace", CW_CFG_DURATION, K(cw_config_gateway, drain_grace_ns),
     "30s", false, 0, 3600 * NS_PER_S, NULL, true,
     "On SIGTERM, time given to RPCs in flight before they are cancelled; "
     "new RPCs get CW_DRAINING meanwhile."},
};

static const struct cw_config_key network_keys[] = {
    {"name", CW_CFG_NAME, K(cw_config_network, name), NULL, false, 0, 0, NULL,
     true,
     "Unique name, used by routes (via) and acl. A reload may add and "
     "remove networks."},
    {"address", CW_CFG_ADDR, K(cw_config_network, address), NULL, false, 0, 0,
     NULL, true,
     "Listen address, e.g. \"ofi+tcp://10.1.0.1:7000\"; also the address "
     "other gateways use as a next hop."},
    {"max_inflight", CW_CFG_UINT, K(cw_config_network, max_inflight), "0",
     false, 0, 1048576, NULL, true,
     "RPCs forwarded at once that arrived on this network (LNet "
     "credits); 0 = only limits.max_inflight_rpcs."},
    {"busy_poll", CW_CFG_BOOL, K(cw_config_network, busy_poll), "false", false,
     0, 0, NULL, false, "Spin on this network's progress."},
};

static const struct cw_config_key route_keys[] = {
    {"dest", CW_CFG_PATTERN, K(cw_config_route, dest), NULL, false, 0, 0, NULL,
     true,
     "Destination pattern: \"<plugin>[+<proto>]://<ip>/<len>\", exact "
     "\"host[:port]\", or \"*\" parts (\"ofi+*://*\")."},
    {"via", CW_CFG_NAME, K(cw_config_route, via), NULL, true, 0, 0, NULL, true,
     "Deliver directly on this network (a client routes file: \"direct\"). "
     "Exactly one of via and gateway."},
    {"gateway", CW_CFG_ADDR, K(cw_config_route, gateway), NULL, true, 0, 0,
     NULL, true, "Next-hop gateway address. Exactly one of via and gateway."},
    {"priority", CW_CFG_UINT, K(cw_config_route, priority), "0", false, 0,
     2147483647, NULL, true, "Lower is preferred among equal matches."},
    {"hop", CW_CFG_UINT, K(cw_config_route, hop), "1", false, 1, 255, NULL,
     true, "Gateways to cross to the destination; fewer is preferred."},
    {"max_inflight", CW_CFG_UINT, K(cw_config_route, max_inflight), "0", false,
     0, 1048576, NULL, true, "RPCs in flight on this route; 0 = unlimited."},
};

static const struct cw_config_key service_keys[] = {
    {"name", CW_CFG_NAME, K(cw_config_service, name), NULL, false, 0, 0, NULL,
     true, "Unique name; clients address it as svc:<name>@<gateway>."},
    {"backends", CW_CFG_ADDRLIST, K(cw_config_service, backends), NULL, false,
     1, 1024, NULL, true, "Backend addresses."},
    {"policy", CW_CFG_ENUM, K(cw_config_service, policy), "round_robin", false,
     0, 0, policy_words, true,
     "Backend choice: round_robin, least_inflight, or hash (by caller, "
     "sticky)."},
};

static const struct cw_config_key buffers_keys[] = {
    {"chunk", CW_CFG_SIZE, K(cw_config_buffers, chunk), "1MiB", false, 4 * KIB,
     64 * MIB, NULL, false, "Bulk pipeline chunk size."},
    {"depth", CW_CFG_UINT, K(cw_config_buffers, depth), "8", false, 1, 64, NULL,
     false, "Chunks in flight per transfer."},
    {"staging", CW_CFG_SIZE, K(cw_config_buffers, staging), "256MiB", false,
     1 * MIB, 1 * TIB, NULL, false,
     "Staging memory registered on both fabrics; at least chunk x depth."},
    {"zero_copy", CW_CFG_BOOL, K(cw_config_buffers, zero_copy), "true", false,
     0, 0, NULL, true,
     "Where origin and target are on the same node-local plugin (shm), let "
     "the target copy directly instead of staging (docs/bulk-gateway.md)."},
};

static const struct cw_config_key limits_keys[] = {
    {"max_inflight_rpcs", CW_CFG_UINT, K(cw_config_limits, max_inflight_rpcs),
     "4096", false, 1, 1048576, NULL, true,
     "RPCs forwarded at once; beyond, they queue."},
    {"max_bulk_bytes_inflight", CW_CFG_SIZE,
     K(cw_config_limits, max_bulk_bytes_inflight), "512MiB", false, 1 * MIB,
     1 * TIB, NULL, true, "Bulk bytes being moved at once."},
    {"default_timeout", CW_CFG_DURATION,
     K(cw_config_limits, default_timeout_ns), "30s", false, 1 * NS_PER_MS,
     3600 * NS_PER_S, NULL, true, "Deadline given to RPCs that carry none."},
    {"max_timeout", CW_CFG_DURATION, K(cw_config_limits, max_timeout_ns), "5m",
     false, 1 * NS_PER_MS, 24 * 3600 * NS_PER_S, NULL, true,
     "Longer deadlines are cut to this."},
    {"max_hops", CW_CFG_UINT, K(cw_config_limits, max_hops), "8", false, 1, 64,
     NULL, true, "Hop limit (TTL) of forwarded messages; stops routing loops."},
    {"max_queued_rpcs", CW_CFG_UINT, K(cw_config_limits, max_queued_rpcs),
     "1024", false, 0, 1048576, NULL, true,
     "RPCs waiting for a slot; beyond, new ones get CW_BUSY at once."},
    {"max_payload_size", CW_CFG_SIZE, K(cw_config_limits, max_payload_size),
     "64MiB", false, 4 * KIB, 4 * GIB, NULL, false,
     "Largest RPC arguments taken from a caller, or answer from a target "
     "(beyond the eager limit they are pulled); larger ones are refused "
     "with CW_OVERFLOW before any memory is set aside for them."},
    {"max_cached_addrs", CW_CFG_UINT, K(cw_config_limits, max_cached_addrs),
     "16384", false, 16, 16777216, NULL, true,
     "Resolved next-hop addresses kept per progress thread; beyond, the "
     "least recently used are dropped (RPCs in flight keep theirs)."},
    {"max_cached_dests", CW_CFG_UINT, K(cw_config_limits, max_cached_dests),
     "16384", false, 16, 16777216, NULL, true,
     "Parsed routing destinations kept per worker thread; beyond, the "
     "least recently used are dropped."},
    {"max_sources", CW_CFG_UINT, K(cw_config_limits, max_sources), "65536",
     false, 16, 16777216, NULL, true,
     "Callers with RPCs in flight or queued at once; a new caller beyond "
     "gets CW_BUSY."},
};

static const struct cw_config_key health_keys[] = {
    {"enabled", CW_CFG_BOOL, K(cw_config_health, enabled), "true", false, 0, 0,
     NULL, true, "Send periodic health pings to next hops and backends."},
    {"interval", CW_CFG_DURATION, K(cw_config_health, interval_ns), "1s", false,
     10 * NS_PER_MS, 3600 * NS_PER_S, NULL, true, "Time between health pings."},
    {"timeout", CW_CFG_DURATION, K(cw_config_health, timeout_ns), "500ms",
     false, 1 * NS_PER_MS, 3600 * NS_PER_S, NULL, true,
     "A ping not answered in this time fails; at most interval."},
    {"eject_after", CW_CFG_UINT, K(cw_config_health, eject_after), "3", false,
     1, 1000, NULL, true,
     "Consecutive failures (pings or RPCs) that mark a next hop down."},
    {"recover_after", CW_CFG_UINT, K(cw_config_health, recover_after), "2",
     false, 1, 1000, NULL, true,
     "Consecutive successful pings that bring it back."},
};

static const struct cw_config_key acl_keys[] = {
    {"from", CW_CFG_STRING, K(cw_config_acl, from), NULL, false, 0, 0, NULL,
     true, "Network the message arrived on, or \"*\"."},
    {"to", CW_CFG_STRING, K(cw_config_acl, to), "*", false, 0, 0, NULL, true,
     "Network it leaves on, or \"*\"."},
    {"allow", CW_CFG_ALLOWLIST, K(cw_config_acl, allow), NULL, false, 1, 4096,
     NULL, true,
     "Destinations allowed: \"svc:<name>\", \"svc:*\", \"*\" or "
     "destination patterns."},
};

#define N(a) (sizeof(a) / sizeof((a)[0]))

static const struct cw_config_section sections[SEC_COUNT] = {
    [SEC_GATEWAY] = {"gateway", false, false, K(cw_config, gateway), 0, 0,
                     gateway_keys, N(gateway_keys),
                     "The gateway process itself."},
    [SEC_NETWORKS] = {"networks", true, true, K(cw_config, networks),
                      K(cw_config, nnetworks), sizeof(struct cw_config_network),
                      network_keys, N(network_keys),
                      "Networks the gateway listens on (at least one)."},
    [SEC_ROUTES] = {"routes", true, true, K(cw_config, routes),
                    K(cw_config, nroutes), sizeof(struct cw_config_route),
                    route_keys, N(route_keys),
                    "How destinations are reached. Several routes may "
                    "share a dest (multi-gateway)."},
    [SEC_SERVICES] = {"services", true, true, K(cw_config, services),
                      K(cw_config, nservices), sizeof(struct cw_config_service),
                      service_keys, N(service_keys),
                      "Named backend sets (svc:<name>)."},
    [SEC_BUFFERS] = {"buffers", false, false, K(cw_config, buffers), 0, 0,
                     buffers_keys, N(buffers_keys),
                     "Bulk staging through the gateway."},
    [SEC_LIMITS] = {"limits", false, true, K(cw_config, limits), 0, 0,
                    limits_keys, N(limits_keys), "Overload protection."},
    [SEC_HEALTH] = {"health", false, true, K(cw_config, health), 0, 0,
                    health_keys, N(health_keys),
                    "Health checks and passive ejection."},
    [SEC_ACL] = {"acl", true, true, K(cw_config, acl), K(cw_config, nacl),
                 sizeof(struct cw_config_acl), acl_keys, N(acl_keys),
                 "Access control. Absent: everything allowed. Present: only "
                 "what an entry allows."},
};

const struct cw_config_section *cw_config_schema(size_t *count_p)
{
    if (count_p)
        *count_p = SEC_COUNT;
    return sections;
}

int cfg_section_find(const char *name)
{
    for (int i = 0; i < SEC_COUNT; i++)
        if (strcmp(sections[i].name, name) == 0)
            return i;
    return -1;
}

const char *cw_config_type_name(enum cw_config_type type)
{
    switch (type) {
    case CW_CFG_STRING:
        return "string";
    case CW_CFG_NAME:
        return "name";
    case CW_CFG_UINT:
        return "integer";
    case CW_CFG_SIZE:
        return "size";
    case CW_CFG_DURATION:
        return "duration";
    case CW_CFG_BOOL:
        return "bool";
    case CW_CFG_ENUM:
        return "enum";
    case CW_CFG_ADDR:
        return "address";
    case CW_CFG_HOSTPORT:
        return "host:port";
    case CW_CFG_PATTERN:
        return "pattern";
    case CW_CFG_ADDRLIST:
        return "address list";
    case CW_CFG_ALLOWLIST:
        return "allow list";
    }
    return "?";
}

void cw_config_schema_markdown(FILE *out)
{
    for (size_t s = 0; s < SEC_COUNT; s++) {
        const struct cw_config_section *sec = &sections[s];
        fprintf(out, "### `%s`%s\n\n%s%s\n\n", sec->name,
                sec->is_list ? " (list)" : "", sec->help,
                sec->is_list ? (sec->reload ? " A reload may change the list."
                                            : " A reload may not change the "
                                              "list.")
                             : "");
        fprintf(out, "| key | type | default | bounds | reload | help |\n");
        fprintf(out, "|---|---|---|---|---|---|\n");
        for (size_t k = 0; k < sec->nkeys; k++) {
            const struct cw_config_key *key = &sec->keys[k];
            char bounds[256];
            cfg_format_bounds(key, bounds, sizeof(bounds));
            fprintf(out, "| `%s` | %s | %s%s%s | %s | %s | %s |\n", key->name,
                    cw_config_type_name(key->type), key->def ? "`" : "",
                    key->def ? (key->def[0] ? key->def : "\"\"")
                             : (key->optional ? "(none)" : "required"),
                    key->def ? "`" : "", bounds, key->reload ? "yes" : "no",
                    key->help);
        }
        fprintf(out, "\n");
    }
}
