/*
 * Admin "metrics": the gateway's counters in the Prometheus text
 * exposition format (version 0.0.4), for a scraper pointed at
 * http://<gateway.admin>/metrics.  Counters end in _total; the added
 * latency per route is a histogram whose buckets are the log2 buckets of
 * `stats` (2 us, 4 us, ... in seconds).
 */
#include "gw_int.h"
#include "gw_bulk.h"

#include <dirent.h>
#include <inttypes.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* A label value: backslash, double quote and newline escaped. */
static void label(FILE *out, const char *name, const char *v, bool more)
{
    fprintf(out, "%s=\"", name);
    for (; v != NULL && *v != '\0'; v++) {
        if (*v == '\\' || *v == '"')
            fprintf(out, "\\%c", *v);
        else if (*v == '\n')
            fputs("\\n", out);
        else
            fputc(*v, out);
    }
    fprintf(out, "\"%s", more ? "," : "");
}

void gw_metric_head(FILE *out, const char *name, const char *type,
                    const char *help)
{
    fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void route_labels(FILE *out, const struct gw_route_stats *rs)
{
    fputc('{', out);
    label(out, "dest", rs->dest, true);
    label(out, "nexthop", rs->nexthop, false);
}

static void route_results(FILE *out, const struct gw *gw)
{
    static const char *const results[] = {"forwarded", "failed", "timedout",
                                          "denied",    "busy",   "canceled"};

    gw_metric_head(out, "causeway_route_rpcs_total", "counter",
                   "RPCs that ended on a route, by result.");
    for (const struct gw_route_stats *rs = gw->routes; rs; rs = rs->next) {
        struct gw_rs_sum c;
        gw_rs_sum(gw, rs, &c);
        const uint64_t v[] = {c.forwarded, c.failed, c.timedout,
                              c.denied,    c.busy,   c.canceled};
        for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
            fputs("causeway_route_rpcs_total", out);
            route_labels(out, rs);
            fputc(',', out);
            label(out, "result", results[i], false);
            fprintf(out, "} %" PRIu64 "\n", v[i]);
        }
    }
    gw_metric_head(out, "causeway_route_inflight_rpcs", "gauge",
                   "RPCs forwarded on a route and not answered yet.");
    for (const struct gw_route_stats *rs = gw->routes; rs; rs = rs->next) {
        struct gw_rs_sum c;
        gw_rs_sum(gw, rs, &c);
        fputs("causeway_route_inflight_rpcs", out);
        route_labels(out, rs);
        fprintf(out, "} %u\n", c.inflight);
    }
}

static void route_latency(FILE *out, const struct gw *gw)
{
    gw_metric_head(
        out, "causeway_route_added_latency_seconds", "histogram",
        "Time RPCs spent inside the gateway (request in to forward out, "
        "plus response in to answer out).");
    for (const struct gw_route_stats *rs = gw->routes; rs; rs = rs->next) {
        uint64_t cum = 0;
        struct gw_rs_sum c;
        gw_rs_sum(gw, rs, &c);
        /* The last log2 bucket is the overflow: only +Inf holds it. */
        for (unsigned b = 0; b + 1 < GW_HIST_BUCKETS; b++) {
            cum += c.hist[b];
            fputs("causeway_route_added_latency_seconds_bucket", out);
            route_labels(out, rs);
            fprintf(out, ",le=\"%.9g\"} %" PRIu64 "\n",
                    (double)(2ull << b) * 1e-6, cum);
        }
        fputs("causeway_route_added_latency_seconds_bucket", out);
        route_labels(out, rs);
        fprintf(out, ",le=\"+Inf\"} %" PRIu64 "\n", c.lat_n);
        fputs("causeway_route_added_latency_seconds_sum", out);
        route_labels(out, rs);
        fprintf(out, "} %.9f\n", (double)c.lat_sum_ns * 1e-9);
        fputs("causeway_route_added_latency_seconds_count", out);
        route_labels(out, rs);
        fprintf(out, "} %" PRIu64 "\n", c.lat_n);
    }
}

static void networks(FILE *out, const struct gw *gw)
{
    static const struct {
        const char *name, *type, *help;
    } m[] = {
        {"causeway_network_requests_total", "counter",
         "Requests that arrived on a network."},
        {"causeway_network_denied_total", "counter",
         "Requests from a network the ACL denied."},
        {"causeway_network_busy_total", "counter",
         "Requests from a network answered busy (limits)."},
        {"causeway_network_inflight_rpcs", "gauge",
         "Forwarded RPCs that came in on a network, not answered yet."},
    };

    for (size_t k = 0; k < sizeof(m) / sizeof(m[0]); k++) {
        gw_metric_head(out, m[k].name, m[k].type, m[k].help);
        for (unsigned i = 0; i < gw->nnets; i++) {
            const struct gw_net *n = &gw->nets[i];
            struct gw_net_sum c;
            gw_net_sum(gw, n, &c);
            const uint64_t v[] = {c.rx, c.denied, c.busy, c.inflight};
            fprintf(out, "%s{", m[k].name);
            label(out, "network", n->name, true);
            label(out, "address", n->self, false);
            fprintf(out, "} %" PRIu64 "\n", v[k]);
        }
    }
}

static void health(FILE *out, const struct gw *gw)
{
    const struct cw_config *cfg = gw->cfg;

    gw_metric_head(
        out, "causeway_nexthop_up", "gauge",
        "1 if a next-hop gateway is in rotation, 0 if health took it out.");
    for (unsigned i = 0; i < cw_route_table_nexthop_count(gw->table); i++) {
        const char *name = cw_route_table_nexthop_name(gw->table, i);
        if (name == NULL || strstr(name, "://") == NULL)
            continue; /* a network of ours */
        fputs("causeway_nexthop_up{", out);
        label(out, "nexthop", name, false);
        fprintf(out, "} %d\n", cw_route_table_nexthop_is_up(gw->table, i));
    }
    gw_metric_head(out, "causeway_backend_up", "gauge",
                   "1 if a service backend is in rotation, 0 if ejected.");
    for (size_t s = 0; s < cfg->nservices; s++)
        for (size_t b = 0; b < cfg->services[s].backends.n; b++) {
            fputs("causeway_backend_up{", out);
            label(out, "service", cfg->services[s].name, true);
            label(out, "backend", cfg->services[s].backends.v[b], false);
            fprintf(out, "} %d\n",
                    cw_route_table_backend_is_up(gw->table, (unsigned)s,
                                                 (unsigned)b));
        }
}

/* rx_dropped, na_dropped, no_rpc, tx_batches and tx_batched summed over
 * the shards' contexts (one per shard); the other fields zero. */
void gw_ctx_totals(struct gw *gw, struct cw_context_stats *cs)
{
    struct cw_context_stats one;

    memset(cs, 0, sizeof(*cs));
    for (unsigned i = 0; i < gw->nshards; i++)
        if (cw_context_stats(gw->shards[i].ctx, &one) == CW_OK) {
            cs->rx_dropped += one.rx_dropped;
            cs->na_dropped += one.na_dropped;
            cs->no_rpc += one.no_rpc;
            cs->tx_batches += one.tx_batches;
            cs->tx_batched += one.tx_batched;
            cs->rx_responses += one.rx_responses;
            cs->unanswered += one.unanswered;
            cs->uncollected += one.uncollected;
        }
}

/* The bounded tables that peers fill (docs/gateway.md, "Caches and
 * limits"): entries now, and what their bounds dropped or refused. */
static void caches(FILE *out, struct gw *gw)
{
    const struct gw_counts c = gw_counts_locked(gw);
    uint64_t naddrs, addrs_evicted;

    gw_addr_cache_stats(gw, &naddrs, &addrs_evicted);
    gw_metric_head(
        out, "causeway_gateway_cache_entries", "gauge",
        "Entries in the next-hop address cache (all threads), the parsed "
        "destination cache and the source table.");
    fprintf(out,
            "causeway_gateway_cache_entries{cache=\"addrs\"} %" PRIu64
            "\ncauseway_gateway_cache_entries{cache=\"dests\"} %zu\n"
            "causeway_gateway_cache_entries{cache=\"sources\"} %u\n",
            naddrs, gw_rcache_count(gw), gw->nsrcs);
    gw_metric_head(
        out, "causeway_gateway_cache_evictions_total", "counter",
        "Least recently used entries dropped at limits.max_cached_addrs "
        "and limits.max_cached_dests.");
    fprintf(out,
            "causeway_gateway_cache_evictions_total{cache=\"addrs\"} %" PRIu64
            "\ncauseway_gateway_cache_evictions_total{cache=\"dests\"}"
            " %" PRIu64 "\n",
            addrs_evicted, c.rcache_evicted);
    gw_metric_head(out, "causeway_gateway_sources_refused_total", "counter",
                   "Requests from a new source refused with CW_BUSY at "
                   "limits.max_sources.");
    fprintf(out, "causeway_gateway_sources_refused_total %" PRIu64 "\n",
            c.src_refused);
}

/* Descriptors open in this process (/proc/self/fd, less the one that
 * reads it); -1 when it cannot be read. */
static long gw_open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    long n = 0;

    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1;
}

/* The standard process_* families of Prometheus client libraries and the
 * build's version, so that a scraper sees restarts, growth and leaks. */
static void gw_process_metrics(struct gw *gw, FILE *out)
{
    unsigned long vsz = 0, rss = 0;
    long page = sysconf(_SC_PAGESIZE), fds = gw_open_fds();
    struct timespec wall;
    struct rusage ru;
    struct rlimit rl;
    FILE *f;

    gw_metric_head(out, "causeway_build_info", "gauge",
                   "The Causeway version this gateway runs (value 1).");
    fprintf(out, "causeway_build_info{version=\"%d.%d.%d\"} 1\n",
            CW_VERSION_MAJOR, CW_VERSION_MINOR, CW_VERSION_PATCH);
    clock_gettime(CLOCK_REALTIME, &wall);
    gw_metric_head(
        out, "process_start_time_seconds", "gauge",
        "Start time of the process since the Unix epoch, in seconds.");
    fprintf(out, "process_start_time_seconds %.3f\n",
            (double)wall.tv_sec + wall.tv_nsec * 1e-9 -
                (double)(cw_now_ns() - gw->started_ns) * 1e-9);
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        gw_metric_head(out, "process_cpu_seconds_total", "counter",
                       "User and system CPU time spent, in seconds.");
        fprintf(out, "process_cpu_seconds_total %.3f\n",
                (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                    (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6);
    }
    f = fopen("/proc/self/statm", "r");
    if (f != NULL && fscanf(f, "%lu %lu", &vsz, &rss) == 2 && page > 0) {
        gw_metric_head(out, "process_resident_memory_bytes", "gauge",
                       "Resident memory size in bytes.");
        fprintf(out, "process_resident_memory_bytes %lu\n",
                rss * (unsigned long)page);
        gw_metric_head(out, "process_virtual_memory_bytes", "gauge",
                       "Virtual memory size in bytes.");
        fprintf(out, "process_virtual_memory_bytes %lu\n",
                vsz * (unsigned long)page);
    }
    if (f != NULL)
        fclose(f);
    if (fds >= 0) {
        gw_metric_head(out, "process_open_fds", "gauge",
                       "Number of open file descriptors.");
        fprintf(out, "process_open_fds %ld\n", fds);
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        gw_metric_head(out, "process_max_fds", "gauge",
                       "Maximum number of open file descriptors.");
        fprintf(out, "process_max_fds %llu\n", (unsigned long long)rl.rlim_cur);
    }
}

void gw_admin_metrics(struct gw *gw, FILE *out)
{
    struct cw_context_stats cs;
    static const char *const results[] = {
        "forwarded", "failed",   "timedout",     "denied",   "busy",
        "no_route",  "draining", "refused_bulk", "canceled", "resumed"};
    const struct gw_counts c = gw_counts_locked(gw);
    const uint64_t totals[] = {
        c.forwarded, c.failed,   c.timedout,     c.denied,   c.busy,
        c.noroute,   c.draining, c.refused_bulk, c.canceled, c.resumed};

    gw_ctx_totals(gw, &cs);
    gw_process_metrics(gw, out);
    gw_metric_head(out, "causeway_gateway_info", "gauge",
                   "The gateway's name and progress mode (value 1).");
    fputs("causeway_gateway_info{", out);
    label(out, "name", gw->cfg->gateway.name, true);
    label(out, "mode", gw->busy_poll ? "busy-poll" : "blocking", false);
    fputs("} 1\n", out);
    gw_metric_head(out, "causeway_gateway_uptime_seconds", "gauge",
                   "Seconds since the gateway started.");
    fprintf(out, "causeway_gateway_uptime_seconds %.3f\n",
            (double)(cw_now_ns() - gw->started_ns) * 1e-9);
    gw_metric_head(out, "causeway_gateway_draining", "gauge",
                   "1 while draining (SIGTERM or cwctl drain).");
    fprintf(out, "causeway_gateway_draining %d\n", gw->draining ? 1 : 0);
    gw_metric_head(
        out, "causeway_gateway_worker_forwarded_total", "counter",
        "RPCs forwarded and answered, by the worker thread that ran them.");
    for (unsigned k = 0; k < gw->nshards; k++)
        fprintf(
            out,
            "causeway_gateway_worker_forwarded_total{worker=\"%u\"} %" PRIu64
            "\n",
            k, gw->shards[k].n.forwarded);
    gw_metric_head(
        out, "causeway_gateway_handoffs_total", "counter",
        "Forwards that had to change thread (a queued request started by "
        "another worker than the one it came in on).");
    fprintf(out, "causeway_gateway_handoffs_total %" PRIu64 "\n",
            (uint64_t)atomic_load(&gw->handoffs));
    gw_metric_head(out, "causeway_gateway_inflight_rpcs", "gauge",
                   "RPCs forwarded and not answered yet.");
    fprintf(out, "causeway_gateway_inflight_rpcs %u\n", gw_inflight_now(gw));
    gw_metric_head(out, "causeway_gateway_queued_rpcs", "gauge",
                   "RPCs waiting for an admission slot.");
    fprintf(out, "causeway_gateway_queued_rpcs %u\n", gw->nqueued);
    gw_metric_head(out, "causeway_gateway_rpcs_total", "counter",
                   "RPCs the gateway ended, by result.");
    for (size_t i = 0; i < sizeof(totals) / sizeof(totals[0]); i++)
        fprintf(out, "causeway_gateway_rpcs_total{result=\"%s\"} %" PRIu64 "\n",
                results[i], totals[i]);
    gw_metric_head(out, "causeway_gateway_rx_dropped_total", "counter",
                   "Malformed or unwanted messages dropped on receipt.");
    fprintf(out, "causeway_gateway_rx_dropped_total %" PRIu64 "\n",
            cs.rx_dropped);
    gw_metric_head(
        out, "causeway_gateway_plugin_dropped_total", "counter",
        "Messages the network plugins dropped before the RPC layer saw "
        "them (malformed, unmatched, on unused tags).");
    fprintf(out, "causeway_gateway_plugin_dropped_total %" PRIu64 "\n",
            cs.na_dropped);
    gw_metric_head(
        out, "causeway_gateway_batches_total", "counter",
        "Messages sent as batches (coalescing): batches, and the requests "
        "and answers they carried.");
    fprintf(out, "causeway_gateway_batches_total %" PRIu64 "\n", cs.tx_batches);
    gw_metric_head(out, "causeway_gateway_batched_messages_total", "counter",
                   "Requests and answers sent inside batches.");
    fprintf(out, "causeway_gateway_batched_messages_total %" PRIu64 "\n",
            cs.tx_batched);
    gw_metric_head(out, "causeway_gateway_responses_received_total", "counter",
                   "Answers received from next hops and targets (counted on "
                   "arrival, before an overflowed payload is pulled).");
    fprintf(out, "causeway_gateway_responses_received_total %" PRIu64 "\n",
            cs.rx_responses);
    gw_metric_head(out, "causeway_gateway_unanswered_requests", "gauge",
                   "Requests received and not answered yet (forwards "
                   "running, or overflowed arguments being pulled).");
    fprintf(out, "causeway_gateway_unanswered_requests %" PRIu64 "\n",
            cs.unanswered);
    gw_metric_head(out, "causeway_gateway_uncollected_answers", "gauge",
                   "Answers whose overflowed payload the caller has not "
                   "pulled yet (their memory is still held).");
    fprintf(out, "causeway_gateway_uncollected_answers %" PRIu64 "\n",
            cs.uncollected);
    gw_metric_head(out, "causeway_gateway_reloads_total", "counter",
                   "Configuration reloads, by result.");
    fprintf(out,
            "causeway_gateway_reloads_total{result=\"ok\"} %" PRIu64
            "\ncauseway_gateway_reloads_total{result=\"failed\"} %" PRIu64 "\n",
            gw->reloads, gw->reload_failures);
    caches(out, gw);
    networks(out, gw);
    route_results(out, gw);
    route_latency(out, gw);
    health(out, gw);
    gw_bulk_metrics(gw, out);
}
