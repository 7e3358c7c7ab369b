/* The schema: one table per section.  Defaults are written as a user would
 * write them and go through the same parsers as the file.  A field left out
 * of an entry is zero: no default (the key is required unless .optional),
 * no bounds, no enum words, not changed by a reload. */
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
    {.name = "name",
     .type = CW_CFG_NAME,
     .offset = K(cw_config_gateway, name),
     .def = "causewayd",
     .help = "Name of this gateway in logs, stats and cwctl."},
    {.name = "admin",
     .type = CW_CFG_HOSTPORT,
     .offset = K(cw_config_gateway, admin),
     .def = "127.0.0.1:9464",
     .help = "Admin/stats endpoint \"host:port\" over TCP; \"\" disables it. "
             "reload and drain are accepted from loopback clients only; with "
             "admin_token_file every request needs the token."},
    {.name = "admin_socket",
     .type = CW_CFG_STRING,
     .offset = K(cw_config_gateway, admin_socket),
     .def = "",
     .help =
         "Admin endpoint on a Unix socket at this path: the protocol and "
         "commands of admin, reload and drain included; \"\" disables it. Who "
         "may connect is the file's mode and group: it is created with "
         "admin_socket_mode and admin_socket_group, replacing a stale socket "
         "file nothing listens on, and removed on exit. The shipped "
         "configuration uses /run/causeway/admin.sock, cwctl's default."},
    {.name = "admin_socket_mode",
     .type = CW_CFG_STRING,
     .offset = K(cw_config_gateway, admin_socket_mode),
     .def = "0660",
     .help = "File mode of admin_socket, in octal (connecting needs write "
             "permission)."},
    {.name = "admin_socket_group",
     .type = CW_CFG_STRING,
     .offset = K(cw_config_gateway, admin_socket_group),
     .def = "",
     .help =
         "Group of admin_socket (a name or a number), whose members may use it "
         "with mode 0660; \"\": the gateway's own group."},
    {.name = "admin_token_file",
     .type = CW_CFG_STRING,
     .offset = K(cw_config_gateway, admin_token_file),
     .def = "",
     .help =
         "File holding a bearer token that every request on the TCP admin "
         "endpoint must carry (HTTP \"Authorization: Bearer TOKEN\", or a "
         "first line \"auth TOKEN\"); answered 401 without it. The file must "
         "exist, hold the token (one line of printable ASCII; trailing white "
         "space ignored) and be neither readable nor writable by other users, "
         "else the gateway does not start. \"\": no token."},
    {.name = "threads",
     .type = CW_CFG_UINT,
     .offset = K(cw_config_gateway, threads),
     .def = "auto",
     .min = 1,
     .max = 256,
     .words = auto_words,
     .help =
         "Worker threads, or auto: one per CPU the process may run on (its "
         "affinity), at most 16. Each has its own context and an endpoint on "
         "every network behind the one published address, and runs the "
         "requests of the callers spread to it from start to end (at most 64 "
         "are used)."},
    {.name = "log_level",
     .type = CW_CFG_ENUM,
     .offset = K(cw_config_gateway, log_level),
     .def = "warn",
     .words = log_words,
     .reload = true,
     .help = "Log threshold (CAUSEWAY_LOG_LEVEL and --log-level override it)."},
    {.name = "busy_poll",
     .type = CW_CFG_BOOL,
     .offset = K(cw_config_gateway, busy_poll),
     .def = "false",
     .help =
         "Spin on progress instead of blocking in epoll (lowest latency, one "
         "core per thread)."},
    {.name = "drain_grace",
     .type = CW_CFG_DURATION,
     .offset = K(cw_config_gateway, drain_grace_ns),
     .def = "30s",
     .max = 3600 * NS_PER_S,
     .reload = true,
     .help =
         "On SIGTERM, time given to RPCs in flight before they are cancelled; "
         "new RPCs get CW_DRAINING meanwhile."},
};

static const struct cw_config_key network_keys[] = {
    {.name = "name",
     .type = CW_CFG_NAME,
     .offset = K(cw_config_network, name),
     .reload = true,
     .help = "Unique name, used by routes (via) and acl. A reload may add and "
             "remove networks."},
    {.name = "address",
     .type = CW_CFG_ADDR,
     .offset = K(cw_config_network, address),
     .reload = true,
     .help =
         "Listen address, e.g. \"ofi+tcp://10.1.0.1:7000\"; also the address "
         "other gateways use as a next hop."},
    {.name = "max_inflight",
     .type = CW_CFG_UINT,
     .offset = K(cw_config_network, max_inflight),
     .def = "0",
     .max = 1048576,
     .reload = true,
     .help = "RPCs forwarded at once that arrived on this network (LNet "
             "credits); 0 = only limits.max_inflight_rpcs."},
    {.name = "busy_poll",
     .type = CW_CFG_BOOL,
     .offset = K(cw_config_network, busy_poll),
     .def = "false",
     .help = "Spin on this network's progress."},
};

static const struct cw_config_key route_keys[] = {
    {.name = "dest",
     .type = CW_CFG_PATTERN,
     .offset = K(cw_config_route, dest),
     .reload = true,
     .help = "Destination pattern: \"<plugin>[+<proto>]://<ip>/<len>\", exact "
             "\"host[:port]\", or \"*\" parts (\"ofi+*://*\")."},
    {.name = "via",
     .type = CW_CFG_NAME,
     .offset = K(cw_config_route, via),
     .optional = true,
     .reload = true,
     .help =
         "Deliver directly on this network (a client routes file: \"direct\"). "
         "Exactly one of via and gateway."},
    {.name = "gateway",
     .type = CW_CFG_ADDR,
     .offset = K(cw_config_route, gateway),
     .optional = true,
     .reload = true,
     .help = "Next-hop gateway address. Exactly one of via and gateway."},
    {.name = "priority",
     .type = CW_CFG_UINT,
     .offset = K(cw_config_route, priority),
     .def = "0",
     .max = 2147483647,
     .reload = true,
     .help = "Lower is preferred among equal matches."},
    {.name = "hop",
     .type = CW_CFG_UINT,
     .offset = K(cw_config_route, hop),
     .def = "1",
     .min = 1,
     .max = 255,
     .reload = true,
     .help = "Gateways to cross to the destination; fewer is preferred."},
    {.name = "max_inflight",
     .type = CW_CFG_UINT,
     .offset = K(cw_config_route, max_inflight),
     .def = "0",
     .max = 1048576,
     .reload = true,
     .help = "RPCs in flight on this route; 0 = unlimited."},
};

static const struct cw_config_key service_keys[] = {
    {.name = "name",
     .type = CW_CFG_NAME,
     .offset = K(cw_config_service, name),
     .reload = true,
     .help = "Unique name; clients address it as svc:<name>@<gateway>."},
    {.name = "backends",
     .type = CW_CFG_ADDRLIST,
     .offset = K(cw_config_service, backends),
     .min = 1,
     .max = 1024,
     .reload = true,
     .help = "Backend addresses."},
    {.name = "policy",
     .type = CW_CFG_ENUM,
     .offset = K(cw_config_service, policy),
     .def = "round_robin",
     .words = policy_words,
     .reload = true,
     .help = "Backend choice: round_robin, least_inflight, or hash (by caller, "
             "sticky)."},
};

static const struct cw_config_key buffers_keys[] = {
    {.name = "chunk",
     .type = CW_CFG_SIZE,
     .offset = K(cw_config_buffers, chunk),
     .def = "1MiB",
     .min = 4 * KIB,
     .max = 64 * MIB,
     .help = "Bulk pipeline chunk size."},
    {.name = "depth",
     .type = CW_CFG_UINT,
     .offset = K(cw_config_buffers, depth),
     .def = "8",
     .min = 1,
     .max = 64,
     .help = "Chunks in flight per transfer."},
    {.name = "staging",
     .type = CW_CFG_SIZE,
     .offset = K(cw_config_buffers, staging),
     .def = "256MiB",
     .min = 1 * MIB,
     .max = 1 * TIB,
     .help =
         "Staging memory registered on both fabrics; at least chunk x depth."},
    {.name = "zero_copy",
     .type = CW_CFG_BOOL,
     .offset = K(cw_config_buffers, zero_copy),
     .def = "true",
     .reload = true,
     .help =
         "Where origin and target are on the same node-local plugin (shm), let "
         "the target copy directly instead of staging (docs/bulk-gateway.md)."},
};

static const struct cw_config_key limits_keys[] = {
    {.name = "max_inflight_rpcs",
     .type = CW_CFG_UINT,
     .offset = K(cw_config_limits, max_inflight_rpcs),
     .def = "4096",
     .min = 1,
     .max = 1048576,
     .reload = true,
     .help = "RPCs forwarded at once; beyond, they queue."},
    {.name = "max_bulk_bytes_inflight",
     .type = CW_CFG_SIZE,
     .offset = K(cw_config_limits, max_bulk_bytes_inflight),
     .def = "512MiB",
     .min = 1 * MIB,
     .max = 1 * TIB,
     .reload = true,
     .help = "Bulk bytes being moved at once."},
    {.name = "default_timeout",
     .type = CW_CFG_DURATION,
     .offset = K(cw_config_limits, default_timeout_ns),
     .def = "30s",
     .min = 1 * NS_PER_MS,
     .max = 3600 * NS_PER_S,
     .reload = true,
     .help = "Deadline given to RPCs that carry none."},
    {.name = "max_timeout",
     .type = CW_CFG_DURATION,
     .offset = K(cw_config_limits, max_timeout_ns),
     .def = "5m",
     .min = 1 * NS_PER_MS,
     .max = 24 * 3600 * NS_PER_S,
     .reload = true,
     .help = "Longer deadlines are cut to this."},
    {.name = "max_hops",
     .type = CW_CFG_UINT,
     .offset = K(cw_config_limits, max_hops),
     .def = "8",
     .min = 1,
     .max = 64,
     .reload = true,
     .help = "Hop limit (TTL) of forwarded messages; stops routing loops."},
    {.name = "max_queued_rpcs",
     .type = CW_CFG_UINT,
     .offset = K(cw_config_limits, max_queued_rpcs),
     .def = "1024",
     .max = 1048576,
     .reload = true,
     .help = "RPCs waiting for a slot; beyond, new ones get CW_BUSY at once."},
    {.name = "max_payload_size",
     .type = CW_CFG_SIZE,
     .offset = K(cw_config_limits, max_payload_size),
     .def = "64MiB",
     .min = 4 * KIB,
     .max = 4 * GIB,
     .help =
         "Largest RPC arguments taken from a caller, or answer from a target "
         "(beyond the eager limit they are pulled); larger ones are refused "
         "with CW_OVERFLOW before any memory is set aside for them."},
    {.name = "max_cached_addrs",
     .type = CW_CFG_UINT,
     .offset = K(cw_config_limits, max_cached_addrs),
     .def = "16384",
     .min = 16,
     .max = 16777216,
     .reload = true,
     .help =
         "Resolved next-hop addresses kept per progress thread; beyond, the "
         "least recently used are dropped (RPCs in flight keep theirs)."},
    {.name = "max_cached_dests",
     .type = CW_CFG_UINT,
     .offset = K(cw_config_limits, max_cached_dests),
     .def = "16384",
     .min = 16,
     .max = 16777216,
     .reload = true,
     .help = "Parsed routing destinations kept per worker thread; beyond, the "
             "least recently used are dropped."},
    {.name = "max_sources",
     .type = CW_CFG_UINT,
     .offset = K(cw_config_limits, max_sources),
     .def = "65536",
     .min = 16,
     .max = 16777216,
     .reload = true,
     .help =
         "Callers with RPCs in flight or queued at once; a new caller beyond "
         "gets CW_BUSY."},
};

static const struct cw_config_key health_keys[] = {
    {.name = "enabled",
     .type = CW_CFG_BOOL,
     .offset = K(cw_config_health, enabled),
     .def = "true",
     .reload = true,
     .help = "Send periodic health pings to next hops and backends."},
    {.name = "interval",
     .type = CW_CFG_DURATION,
     .offset = K(cw_config_health, interval_ns),
     .def = "1s",
     .min = 10 * NS_PER_MS,
     .max = 3600 * NS_PER_S,
     .reload = true,
     .help = "Time between health pings."},
    {.name = "timeout",
     .type = CW_CFG_DURATION,
     .offset = K(cw_config_health, timeout_ns),
     .def = "500ms",
     .min = 1 * NS_PER_MS,
     .max = 3600 * NS_PER_S,
     .reload = true,
     .help = "A ping not answered in this time fails; at most interval."},
    {.name = "eject_after",
     .type = CW_CFG_UINT,
     .offset = K(cw_config_health, eject_after),
     .def = "3",
     .min = 1,
     .max = 1000,
     .reload = true,
     .help = "Consecutive failures (pings or RPCs) that mark a next hop down."},
    {.name = "recover_after",
     .type = CW_CFG_UINT,
     .offset = K(cw_config_health, recover_after),
     .def = "2",
     .min = 1,
     .max = 1000,
     .reload = true,
     .help = "Consecutive successful pings that bring it back."},
};

static const struct cw_config_key acl_keys[] = {
    {.name = "from",
     .type = CW_CFG_STRING,
     .offset = K(cw_config_acl, from),
     .reload = true,
     .help = "Network the message arrived on, or \"*\"."},
    {.name = "to",
     .type = CW_CFG_STRING,
     .offset = K(cw_config_acl, to),
     .def = "*",
     .reload = true,
     .help = "Network it leaves on, or \"*\"."},
    {.name = "allow",
     .type = CW_CFG_ALLOWLIST,
     .offset = K(cw_config_acl, allow),
     .min = 1,
     .max = 4096,
     .reload = true,
     .help = "Destinations allowed: \"svc:<name>\", \"svc:*\", \"*\" or "
             "destination patterns."},
};

#define N(a) (sizeof(a) / sizeof((a)[0]))

static const struct cw_config_section sections[SEC_COUNT] = {
    [SEC_GATEWAY] = {.name = "gateway",
                     .offset = K(cw_config, gateway),
                     .keys = gateway_keys,
                     .nkeys = N(gateway_keys),
                     .help = "The gateway process itself."},
    [SEC_NETWORKS] = {.name = "networks",
                      .is_list = true,
                      .reload = true,
                      .offset = K(cw_config, networks),
                      .count_offset = K(cw_config, nnetworks),
                      .item_size = sizeof(struct cw_config_network),
                      .keys = network_keys,
                      .nkeys = N(network_keys),
                      .help =
                          "Networks the gateway listens on (at least one)."},
    [SEC_ROUTES] = {.name = "routes",
                    .is_list = true,
                    .reload = true,
                    .offset = K(cw_config, routes),
                    .count_offset = K(cw_config, nroutes),
                    .item_size = sizeof(struct cw_config_route),
                    .keys = route_keys,
                    .nkeys = N(route_keys),
                    .help = "How destinations are reached. Several routes may "
                            "share a dest (multi-gateway)."},
    [SEC_SERVICES] = {.name = "services",
                      .is_list = true,
                      .reload = true,
                      .offset = K(cw_config, services),
                      .count_offset = K(cw_config, nservices),
                      .item_size = sizeof(struct cw_config_service),
                      .keys = service_keys,
                      .nkeys = N(service_keys),
                      .help = "Named backend sets (svc:<name>)."},
    [SEC_BUFFERS] = {.name = "buffers",
                     .offset = K(cw_config, buffers),
                     .keys = buffers_keys,
                     .nkeys = N(buffers_keys),
                     .help = "Bulk staging through the gateway."},
    [SEC_LIMITS] = {.name = "limits",
                    .reload = true,
                    .offset = K(cw_config, limits),
                    .keys = limits_keys,
                    .nkeys = N(limits_keys),
                    .help = "Overload protection."},
    [SEC_HEALTH] = {.name = "health",
                    .reload = true,
                    .offset = K(cw_config, health),
                    .keys = health_keys,
                    .nkeys = N(health_keys),
                    .help = "Health checks and passive ejection."},
    [SEC_ACL] =
        {.name = "acl",
         .is_list = true,
         .reload = true,
         .offset = K(cw_config, acl),
         .count_offset = K(cw_config, nacl),
         .item_size = sizeof(struct cw_config_acl),
         .keys = acl_keys,
         .nkeys = N(acl_keys),
         .help = "Access control. Absent: everything allowed. Present: only "
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
