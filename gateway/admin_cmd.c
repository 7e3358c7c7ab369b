/*
 * Admin commands: status, routes, services, stats, config, explain,
 * reload, drain; each rendered as a table or as JSON (metrics:
 * admin_metrics.c, peers: admin_peers.c).
 */
#include "gw_int.h"
#include "gw_bulk.h"
#include "cw_json.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* gw->restart_pending ("a, b") as a JSON array of strings. */
static void json_restart_pending(struct gw *gw, FILE *out)
{
    fputc('[', out);
    for (const char *k = gw->restart_pending; *k != '\0';) {
        size_t n = strcspn(k, ",");
        fprintf(out, "%s\"%.*s\"", k == gw->restart_pending ? "" : ",", (int)n,
                k);
        k += n;
        k += strspn(k, ", ");
    }
    fputc(']', out);
}

/* Wall-clock time @p s as ISO-8601 UTC ("2026-11-29T03:05:59Z"). */
void gw_iso_time(int64_t s, char *buf, size_t len)
{
    time_t t = (time_t)s;
    struct tm tm;

    if (gmtime_r(&t, &tm) == NULL ||
        strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(buf, len, "-");
}

static const char *gw_nexthop_state(struct gw *gw, const char *nexthop)
{
    unsigned id;

    if (nexthop == NULL || strstr(nexthop, "://") == NULL)
        return "up"; /* a network of ours */
    if (cw_route_table_nexthop_find(gw->table, nexthop, &id) != CW_OK)
        return "-";
    return cw_route_table_nexthop_is_up(gw->table, id) ? "up" : "down";
}

static void cmd_status(struct gw *gw, FILE *out, bool json)
{
    double up = (cw_now_ns() - gw->started_ns) / 1e9;
    const char *name = gw->cfg->gateway.name ? gw->cfg->gateway.name : "";
    const char *state = gw->draining ? "draining" : "serving";

    if (json) {
        fprintf(out, "{\"name\":");
        cw_json_str(out, name);
        fprintf(out,
                ",\"state\":\"%s\",\"uptime_s\":%.3f,\"inflight\":%u,"
                "\"unanswered\":%" PRIu64 ",\"config\":",
                state, up, gw_inflight_now(gw), gw->unanswered);
        cw_json_str(out, gw->config_path);
        fprintf(out,
                ",\"reloads\":%" PRIu64 ",\"reload_failures\":%" PRIu64
                ",\"last_reload_error\":",
                gw->reloads, gw->reload_failures);
        cw_json_str(out, gw->last_reload_error);
        /* The keys a reload changed that only a restart applies. */
        fprintf(out, ",\"restart_pending\":");
        json_restart_pending(gw, out);
        fprintf(out, ",\"routes\":%zu,\"networks\":[",
                cw_route_table_size(gw->table));
        for (unsigned i = 0; i < gw->nnets; i++) {
            struct gw_net *n = &gw->nets[i];
            struct gw_net_sum ns;
            gw_net_sum(gw, n, &ns);
            fprintf(out, "%s{\"name\":", i ? "," : "");
            cw_json_str(out, n->name);
            fprintf(out, ",\"address\":");
            cw_json_str(out, n->self);
            fprintf(out,
                    ",\"removed\":%s,\"rx\":%" PRIu64 ",\"inflight\":%u,"
                    "\"denied\":%" PRIu64 ",\"busy\":%" PRIu64 "}",
                    n->removed ? "true" : "false", ns.rx, ns.inflight,
                    ns.denied, ns.busy);
        }
        fprintf(out, "]}\n");
        return;
    }
    fprintf(out,
            "gateway   %s (%s)\nstate     %s\nuptime    %.1f s\n"
            "config    %s\nin flight %u (%" PRIu64 " requests unanswered or "
            "answers uncollected)\n"
            "routes    %zu\nreloads   %" PRIu64 " ok, %" PRIu64
            " failed%s%s\n%s%s%s\n",
            name, gw->busy_poll ? "busy-poll" : "blocking", state, up,
            gw->config_path ? gw->config_path : "-", gw_inflight_now(gw),
            gw->unanswered, cw_route_table_size(gw->table), gw->reloads,
            gw->reload_failures, gw->last_reload_error[0] ? ": " : "",
            gw->last_reload_error,
            gw->restart_pending[0] ? "restart   needed for " : "",
            gw->restart_pending, gw->restart_pending[0] ? "\n" : "");
    fprintf(out, "%-10s %-40s %10s %8s %8s %8s\n", "NETWORK", "ADDRESS", "RX",
            "INFLIGHT", "DENIED", "BUSY");
    for (unsigned i = 0; i < gw->nnets; i++) {
        struct gw_net *n = &gw->nets[i];
        struct gw_net_sum ns;
        gw_net_sum(gw, n, &ns);
        fprintf(out,
                "%-10s %-40s %10" PRIu64 " %8u %8" PRIu64 " %8" PRIu64 "%s\n",
                n->name, n->self, ns.rx, ns.inflight, ns.denied, ns.busy,
                n->removed ? "  (removed)" : "");
    }
}

static struct gw_route_stats *gw_rs_find(struct gw *gw, const char *dest,
                                         const char *nexthop)
{
    for (struct gw_route_stats *rs = gw->routes; rs != NULL; rs = rs->next)
        if (strcmp(rs->dest, dest) == 0 && strcmp(rs->nexthop, nexthop) == 0)
            return rs;
    return NULL;
}

struct gw_route_row {
    const char *dest, *nexthop, *kind;
    unsigned priority, hop;
    struct gw_route_stats *rs;
};

static void route_row(struct gw *gw, FILE *out, bool json, bool *first,
                      const struct gw_route_row *r)
{
    struct gw_rs_sum c = {0};
    const char *state = gw_nexthop_state(gw, r->nexthop);

    if (r->rs != NULL)
        gw_rs_sum(gw, r->rs, &c);

    if (json) {
        fprintf(out, "%s{\"dest\":", *first ? "" : ",");
        cw_json_str(out, r->dest);
        fprintf(out, ",\"nexthop\":");
        cw_json_str(out, r->nexthop);
        fprintf(out,
                ",\"kind\":\"%s\",\"priority\":%u,\"hop\":%u,"
                "\"state\":\"%s\",\"inflight\":%u,\"forwarded\":%" PRIu64
                ",\"failed\":%" PRIu64 ",\"timedout\":%" PRIu64
                ",\"denied\":%" PRIu64 ",\"busy\":%" PRIu64
                ",\"canceled\":%" PRIu64 "}",
                r->kind, r->priority, r->hop, state, c.inflight, c.forwarded,
                c.failed, c.timedout, c.denied, c.busy, c.canceled);
    } else {
        fprintf(out,
                "%-28s %-28s %-9s %3u %3u %-5s %6u %9" PRIu64 " %7" PRIu64
                " %7" PRIu64 " %7" PRIu64 " %7" PRIu64 "\n",
                r->dest, r->nexthop, r->kind, r->priority, r->hop, state,
                c.inflight, c.forwarded, c.failed, c.timedout, c.denied,
                c.busy);
    }
    *first = false;
}

static void cmd_routes(struct gw *gw, FILE *out, bool json)
{
    const struct cw_config *cfg = gw->cfg;
    bool first = true;

    if (json)
        fprintf(out, "[");
    else
        fprintf(out, "%-28s %-28s %-9s %3s %3s %-5s %6s %9s %7s %7s %7s %7s\n",
                "DEST", "NEXT HOP", "KIND", "PRI", "HOP", "STATE", "INFL",
                "FORWARDED", "FAILED", "TIMEOUT", "DENIED", "BUSY");
    for (size_t i = 0; i < cfg->nroutes; i++) {
        const struct cw_config_route *r = &cfg->routes[i];
        struct gw_route_row row = {
            .dest = r->dest,
            .nexthop = r->via ? r->via : r->gateway,
            .kind = r->via ? "via" : "gateway",
            .priority = r->priority,
            .hop = r->hop,
        };
        row.rs = gw_rs_find(gw, row.dest, row.nexthop);
        route_row(gw, out, json, &first, &row);
    }
    /* Connected networks and anything else that carried traffic
     * (services, routes of an older table). */
    for (struct gw_route_stats *rs = gw->routes; rs != NULL; rs = rs->next) {
        bool written = false;
        for (size_t i = 0; i < cfg->nroutes && !written; i++) {
            const struct cw_config_route *r = &cfg->routes[i];
            written = strcmp(r->dest, rs->dest) == 0 &&
                      strcmp(r->via ? r->via : r->gateway, rs->nexthop) == 0;
        }
        if (written)
            continue;
        struct gw_route_row row = {
            .dest = rs->dest,
            .nexthop = rs->nexthop,
            .kind = strncmp(rs->dest, "svc:", 4) == 0 ? "service" : "connected",
            .rs = rs,
        };
        route_row(gw, out, json, &first, &row);
    }
    if (json)
        fprintf(out, "]\n");
}

static const struct gw_hc *gw_hc_find(struct gw *gw, size_t s, size_t b)
{
    for (unsigned i = 0; i < gw->nhcs; i++)
        if (gw->hcs[i].is_backend && gw->hcs[i].service == s &&
            gw->hcs[i].backend == b)
            return &gw->hcs[i];
    return NULL;
}

static void cmd_services(struct gw *gw, FILE *out, bool json)
{
    static const char *const policies[] = {"round_robin", "least_inflight",
                                           "hash"};
    const struct cw_config *cfg = gw->cfg;

    if (json)
        fprintf(out, "[");
    else
        fprintf(out, "%-16s %-15s %-36s %-7s %8s %-8s %8s %8s %s\n", "SERVICE",
                "POLICY", "BACKEND", "STATE", "INFLIGHT", "HEALTH", "PINGS_OK",
                "FAILED", "LAST");
    for (size_t s = 0; s < cfg->nservices; s++) {
        const struct cw_config_service *sv = &cfg->services[s];
        const char *pol =
            sv->policy >= 0 && sv->policy < 3 ? policies[sv->policy] : "?";
        if (json) {
            fprintf(out, "%s{\"name\":", s ? "," : "");
            cw_json_str(out, sv->name);
            fprintf(out, ",\"policy\":\"%s\",\"backends\":[", pol);
        }
        for (size_t b = 0; b < sv->backends.n; b++) {
            const struct gw_hc *hc = gw_hc_find(gw, s, b);
            const char *health = hc == NULL || hc->last == CW_NOT_READY
                                     ? "unknown"
                                 : gw_status_is_transport(hc->last) ? "failing"
                                                                    : "ok";
            /* The route table's view: what selection uses right now. */
            const char *state = cw_route_table_backend_is_up(
                                    gw->table, (unsigned)s, (unsigned)b)
                                    ? "up"
                                    : "ejected";
            unsigned inflight = cw_route_table_backend_inflight(
                gw->table, (unsigned)s, (unsigned)b);
            if (json) {
                fprintf(out, "%s{\"address\":", b ? "," : "");
                cw_json_str(out, sv->backends.v[b]);
                fprintf(out,
                        ",\"health\":\"%s\",\"pings_ok\":%" PRIu64
                        ",\"pings_failed\":%" PRIu64 ",\"last\":\"%s\""
                        ",\"state\":\"%s\",\"inflight\":%u}",
                        health, hc ? hc->ok : 0, hc ? hc->fail : 0,
                        hc ? cw_status_name(hc->last) : "-", state, inflight);
            } else {
                fprintf(out,
                        "%-16s %-15s %-36s %-7s %8u %-8s %8" PRIu64 " %8" PRIu64
                        " %s\n",
                        b == 0 ? sv->name : "", b == 0 ? pol : "",
                        sv->backends.v[b], state, inflight, health,
                        hc ? hc->ok : 0, hc ? hc->fail : 0,
                        hc ? cw_status_name(hc->last) : "-");
            }
        }
        if (json)
            fprintf(out, "]}");
    }
    if (json)
        fprintf(out, "]\n");
}

static void cmd_stats(struct gw *gw, FILE *out, bool json)
{
    const struct gw_counts c = gw_counts_locked(gw);
    struct cw_context_stats cs;
    uint64_t naddrs, addrs_evicted;

    gw_ctx_totals(gw, &cs);
    gw_addr_cache_stats(gw, &naddrs, &addrs_evicted);
    if (json) {
        fprintf(
            out,
            "{\"inflight\":%u,\"forwarded\":%" PRIu64 ",\"failed\":%" PRIu64
            ",\"timedout\":%" PRIu64 ",\"denied\":%" PRIu64 ",\"busy\":%" PRIu64
            ",\"no_route\":%" PRIu64 ",\"draining\":%" PRIu64
            ",\"refused_bulk\":%" PRIu64 ",\"canceled\":%" PRIu64
            ",\"rx_dropped\":%" PRIu64 ",\"na_dropped\":%" PRIu64
            ",\"ttl_or_unknown\":%" PRIu64 ",\"queued\":%u"
            ",\"queued_total\":%" PRIu64 ",\"resumed\":%" PRIu64
            ",\"tx_batches\":%" PRIu64 ",\"tx_batched\":%" PRIu64
            ",\"cached_addrs\":%" PRIu64 ",\"cached_addrs_evicted\":%" PRIu64
            ",\"cached_dests\":%zu"
            ",\"cached_dests_evicted\":%" PRIu64 ",\"sources\":%u"
            ",\"sources_refused\":%" PRIu64 ",\"handoffs\":%" PRIu64
            ",\"workers\":[",
            gw_inflight_now(gw), c.forwarded, c.failed, c.timedout, c.denied,
            c.busy, c.noroute, c.draining, c.refused_bulk, c.canceled,
            cs.rx_dropped, cs.na_dropped, cs.no_rpc, gw->nqueued,
            c.queued_total, c.resumed, cs.tx_batches, cs.tx_batched, naddrs,
            addrs_evicted, gw_rcache_count(gw), c.rcache_evicted, gw->nsrcs,
            c.src_refused, (uint64_t)atomic_load(&gw->handoffs));
        for (unsigned k = 0; k < gw->nshards; k++)
            fprintf(out, "%s{\"forwarded\":%" PRIu64 "}", k ? "," : "",
                    gw->shards[k].n.forwarded);
        fprintf(out, "],\"routes\":[");
        for (struct gw_route_stats *rs = gw->routes; rs != NULL;
             rs = rs->next) {
            struct gw_rs_sum rc;
            gw_rs_sum(gw, rs, &rc);
            fprintf(out, "%s{\"dest\":", rs == gw->routes ? "" : ",");
            cw_json_str(out, rs->dest);
            fprintf(out, ",\"nexthop\":");
            cw_json_str(out, rs->nexthop);
            fprintf(out,
                    ",\"forwarded\":%" PRIu64 ",\"failed\":%" PRIu64
                    ",\"timedout\":%" PRIu64 ",\"denied\":%" PRIu64
                    ",\"busy\":%" PRIu64 ",\"inflight\":%u,"
                    "\"added_latency_mean_ns\":%" PRIu64
                    ",\"added_latency_hist_us_log2\":[",
                    rc.forwarded, rc.failed, rc.timedout, rc.denied, rc.busy,
                    rc.inflight, rc.lat_n ? rc.lat_sum_ns / rc.lat_n : 0);
            for (unsigned b = 0; b < GW_HIST_BUCKETS; b++)
                fprintf(out, "%s%" PRIu64, b ? "," : "", rc.hist[b]);
            fprintf(out, "]}");
        }
        fprintf(out, "]");
        gw_bulk_stats(gw, out, true);
        fprintf(out, "}\n");
        return;
    }
    fprintf(out,
            "in flight     %u\nforwarded     %" PRIu64
            "\nfailed        %" PRIu64 "\ntimed out     %" PRIu64
            "\ndenied        %" PRIu64 "\nbusy          %" PRIu64
            "\nno route      %" PRIu64 "\ndraining      %" PRIu64
            "\nrefused bulk  %" PRIu64 "\ncanceled      %" PRIu64
            "\nrx dropped    %" PRIu64 "\nplugin drops  %" PRIu64
            "\nqueued now    %u\nqueued total  %" PRIu64
            "\nresumed       %" PRIu64 "\nbatches sent  %" PRIu64 " (%" PRIu64
            " messages)"
            "\naddresses     %" PRIu64 " cached, %" PRIu64 " evicted"
            "\ndestinations  %zu cached, %" PRIu64 " evicted"
            "\nsources       %u, %" PRIu64 " refused\n",
            gw_inflight_now(gw), c.forwarded, c.failed, c.timedout, c.denied,
            c.busy, c.noroute, c.draining, c.refused_bulk, c.canceled,
            cs.rx_dropped, cs.na_dropped, gw->nqueued, c.queued_total,
            c.resumed, cs.tx_batches, cs.tx_batched, naddrs, addrs_evicted,
            gw_rcache_count(gw), c.rcache_evicted, gw->nsrcs, c.src_refused);
    fprintf(out, "handoffs      %" PRIu64 "\nper worker   ",
            (uint64_t)atomic_load(&gw->handoffs));
    for (unsigned k = 0; k < gw->nshards; k++)
        fprintf(out, " %" PRIu64, gw->shards[k].n.forwarded);
    fprintf(out, " forwarded\n\n");
    gw_bulk_stats(gw, out, false);
    for (struct gw_route_stats *rs = gw->routes; rs != NULL; rs = rs->next) {
        struct gw_rs_sum rc;
        gw_rs_sum(gw, rs, &rc);
        fprintf(out,
                "route %s -> %s: %" PRIu64 " forwarded, %" PRIu64
                " failed, %" PRIu64 " timed out, %" PRIu64 " denied, %" PRIu64
                " busy; added latency mean %.1f us\n",
                rs->dest, rs->nexthop, rc.forwarded, rc.failed, rc.timedout,
                rc.denied, rc.busy,
                rc.lat_n ? rc.lat_sum_ns / 1e3 / rc.lat_n : 0.0);
        for (unsigned b = 0; b < GW_HIST_BUCKETS; b++)
            if (rc.hist[b] != 0)
                fprintf(out, "  %s%8llu us %10" PRIu64 "\n",
                        b == GW_HIST_BUCKETS - 1 ? ">=" : "< ",
                        (unsigned long long)2 << b, rc.hist[b]);
    }
}

/* The configuration the gateway runs, normalized as causewayd --dump
 * writes it, with its file and when it was loaded (start or the last
 * successful reload). */
static void cmd_config(struct gw *gw, FILE *out, bool json)
{
    char when[32],
        *abs = gw->config_path ? realpath(gw->config_path, NULL) : NULL;
    const char *src = abs ? abs : gw->config_path ? gw->config_path : "-";

    gw_iso_time(gw->config_loaded_s, when, sizeof(when));
    if (json) {
        fprintf(out, "{\"sources\":[");
        cw_json_str(out, src);
        fprintf(out,
                "],\"loaded_at\":\"%s\",\"loaded_at_unix\":%" PRId64
                ",\"reloads\":%" PRIu64 ",\"restart_pending\":",
                when, gw->config_loaded_s, gw->reloads);
        json_restart_pending(gw, out);
        fprintf(out, ",\"config\":");
        (void)cw_config_dump_json(gw->cfg, out);
        fprintf(out, "}\n");
    } else {
        fprintf(out, "# source: %s\n# loaded: %s (%" PRIu64 " reloads)\n", src,
                when, gw->reloads);
        if (gw->restart_pending[0] != '\0')
            fprintf(out, "# not applied until a restart: %s\n",
                    gw->restart_pending);
        (void)cw_config_dump(gw->cfg, out);
    }
    free(abs);
}

/* reload: "OK" and a summary, or ERR with the reason; with @p json, a
 * JSON body follows either line (cwctl reload --json prints it). */
static void cmd_reload(struct gw *gw, FILE *out, bool json)
{
    char err[256], when[32];
    cw_status_t st = gw_reload(gw, err, sizeof(err));
    const char *result = st != CW_OK                      ? "failed"
                         : gw->restart_pending[0] != '\0' ? "restart_needed"
                                                          : "reloaded";

    if (st != CW_OK)
        fprintf(out, "ERR reload failed, old table kept: %s\n", err);
    else if (gw->restart_pending[0] != '\0')
        /* Applied, but not all of it: the caller must know. */
        fprintf(out,
                "ERR restart needed: reloaded %s: %zu routes; "
                "not applied until a restart: %s\n",
                gw->config_path, cw_route_table_size(gw->table),
                gw->restart_pending);
    else
        fprintf(out, "OK\n");
    if (!json) {
        if (st == CW_OK && gw->restart_pending[0] == '\0')
            fprintf(out, "reloaded %s: %zu routes\n", gw->config_path,
                    cw_route_table_size(gw->table));
        return;
    }
    gw_iso_time(gw->config_loaded_s, when, sizeof(when));
    fprintf(out, "{\"result\":\"%s\",\"config\":", result);
    cw_json_str(out, gw->config_path);
    fprintf(out, ",\"error\":");
    cw_json_str(out, st != CW_OK ? err : "");
    fprintf(out,
            ",\"routes\":%zu,\"loaded_at\":\"%s\",\"reloads\":%" PRIu64
            ",\"reload_failures\":%" PRIu64 ",\"restart_pending\":",
            cw_route_table_size(gw->table), when, gw->reloads,
            gw->reload_failures);
    json_restart_pending(gw, out);
    fprintf(out, "}\n");
}

void gw_admin_exec(struct gw *gw, const char *line, bool local, FILE *out)
{
    char cmd[32] = "", arg[CW_ADDR_STR_MAX] = "", extra[16] = "";
    bool json = false;
    int n = sscanf(line, "%31s %2303s %15s", cmd, arg, extra);

    if (n >= 2 && strcmp(arg, "json") == 0) {
        json = true;
        arg[0] = '\0';
    } else if (n == 3 && strcmp(extra, "json") == 0) {
        json = true;
    }
    if (!local && (strcmp(cmd, "reload") == 0 || strcmp(cmd, "drain") == 0)) {
        fprintf(out,
                "ERR forbidden: %s is accepted from this host only "
                "(a loopback address)\n",
                cmd);
        CW_LOG_RL(CW_LOG_WARN, GW_LOG,
                  "admin: %s from a remote address "
                  "refused",
                  cmd);
        return;
    }
    if (strcmp(cmd, "status") == 0) {
        fprintf(out, "OK\n");
        cmd_status(gw, out, json);
    } else if (strcmp(cmd, "routes") == 0) {
        fprintf(out, "OK\n");
        cmd_routes(gw, out, json);
    } else if (strcmp(cmd, "services") == 0) {
        fprintf(out, "OK\n");
        cmd_services(gw, out, json);
    } else if (strcmp(cmd, "stats") == 0) {
        fprintf(out, "OK\n");
        cmd_stats(gw, out, json);
    } else if (strcmp(cmd, "metrics") == 0) {
        fprintf(out, "OK\n");
        gw_admin_metrics(gw, out);
    } else if (strcmp(cmd, "ready") == 0) {
        /* For load balancers and probes: serving, or not any more. */
        if (gw->draining)
            fprintf(out, "ERR not ready: draining\n");
        else
            fprintf(out, "OK\nready\n");
    } else if (strcmp(cmd, "explain") == 0) {
        if (arg[0] == '\0') {
            fprintf(out, "ERR explain needs an address\n");
            return;
        }
        fprintf(out, "OK\n");
        if (json)
            (void)cw_route_table_explain_json(gw->table, arg, out);
        else
            (void)cw_route_table_explain(gw->table, arg, out);
    } else if (strcmp(cmd, "config") == 0) {
        fprintf(out, "OK\n");
        cmd_config(gw, out, json);
    } else if (strcmp(cmd, "peers") == 0) {
        char *end;
        unsigned long limit = arg[0] ? strtoul(arg, &end, 10) : GW_PEERS_SHOWN;
        if (arg[0] != '\0' && (*end != '\0' || limit == 0 || limit > 100000)) {
            fprintf(out,
                    "ERR peers takes a count of rows to show (1 to "
                    "100000), not \"%s\"\n",
                    arg);
            return;
        }
        gw_admin_peers(gw, out, json, (unsigned)limit);
    } else if (strcmp(cmd, "reload") == 0) {
        cmd_reload(gw, out, json);
    } else if (strcmp(cmd, "drain") == 0) {
        gw_drain_start(gw, "admin drain");
        fprintf(out, "OK\ndraining %u RPCs in flight\n", gw_inflight_now(gw));
    } else {
        fprintf(out,
                "ERR unknown command \"%s\" (status, routes, services, "
                "stats, metrics, ready, peers [N], config, explain ADDR, "
                "reload, drain)\n",
                cmd);
    }
}
