/*
 * Route lookup cost against table size: builds tables of 10, 100, 1000 and
 * 10 000 routes (IPv4 /24 and /16 prefixes, exact host:port, wildcard
 * protocols, several gateways per dest) from generated YAML, then times
 * lookups of random destinations.  A linear scan over the same patterns is
 * timed as the baseline the table must beat.
 *
 *   bench_routes [--lookups N] [--no-linear]
 */
#include <causeway/config.h>
#include <causeway/routing.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NPROBES 4096

static uint64_t rng_state = 88172645463325252ull;

static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static double now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Routes: 70% /24, 10% /16, 15% exact host:port, 5% wildcard protocol;
 * every tenth dest has a second gateway (multi-gateway). */
static char samples[10000][128]; /* one matching address per dest */
static unsigned nsamples;

static char *make_yaml(unsigned nroutes)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    unsigned written = 0;

    nsamples = 0;
    fprintf(f, "networks:\n"
               "  - { name: eth0, address: \"ofi+tcp://10.250.0.1:7000\" }\n"
               "  - { name: ib0, address: \"ucx+tcp://10.251.0.1:7000\" }\n"
               "routes:\n");
    for (unsigned i = 0; written < nroutes; i++) {
        unsigned kind = (unsigned)(rng() % 100);
        /* Octets from the index keep every dest distinct. */
        unsigned a = (i / 256) % 200, b = i % 256;
        unsigned c = 1 + (unsigned)(rng() % 254);
        unsigned gw = (unsigned)(rng() % 8) + 2;
        char dest[96];

        if (kind < 70)
            snprintf(dest, sizeof(dest), "ucx+tcp://10.%u.%u.0/24#", a, b);
        else if (kind < 80)
            snprintf(dest, sizeof(dest), "ucx+tcp://%u.%u.0.0/16#", a + 20, b);
        else if (kind < 95)
            snprintf(dest, sizeof(dest), "ucx+tcp://11.%u.%u.%u:7000#", a, b,
                     c);
        else
            snprintf(dest, sizeof(dest), "ucx+*://12.%u.%u.0/24#", a, b);
        *strchr(dest, '#') = '\0';
        if (kind < 70)
            snprintf(samples[nsamples], 128, "ucx+tcp://10.%u.%u.%u:7000", a, b,
                     c);
        else if (kind < 80)
            snprintf(samples[nsamples], 128, "ucx+tcp://%u.%u.%u.9:7000",
                     a + 20, b, c);
        else if (kind < 95)
            snprintf(samples[nsamples], 128, "%s", dest);
        else
            snprintf(samples[nsamples], 128, "ucx+rc://12.%u.%u.%u:7000", a, b,
                     c);
        if (nsamples < 9999)
            nsamples++;
        fprintf(
            f,
            "  - { dest: \"%s\", gateway: \"ofi+tcp://10.250.0.%u:7000\" }\n",
            dest, gw);
        written++;
        if (i % 10 == 0 && written < nroutes) {
            fprintf(f,
                    "  - { dest: \"%s\", gateway: "
                    "\"ofi+tcp://10.250.0.%u:7000\", priority: 1 }\n",
                    dest, gw + 10);
            written++;
        }
    }
    fclose(f);
    return buf;
}

/* Half the probes match a written dest, half are random addresses. */
static void make_probes(struct cw_uri *probes)
{
    for (unsigned i = 0; i < NPROBES; i++) {
        char s[128];
        if (i % 2)
            snprintf(s, sizeof(s), "ucx+tcp://%u.%u.%u.%u:7000",
                     (unsigned)(rng() % 256), (unsigned)(rng() % 256),
                     (unsigned)(rng() % 256), (unsigned)(rng() % 256));
        else
            snprintf(s, sizeof(s), "%s", samples[rng() % nsamples]);
        cw_uri_parse(s, &probes[i]);
    }
}

/* The baseline: scan every route, keep the most specific match. */
static unsigned linear_lookup(const struct cw_config *cfg,
                              const struct cw_uri *uri)
{
    unsigned best = ~0u;
    int best_spec = -1;

    for (size_t i = 0; i < cfg->nroutes; i++) {
        const struct cw_addr_pattern *p = &cfg->routes[i].pattern;
        int spec;
        if (!cw_addr_pattern_match(p, uri))
            continue;
        spec = (int)p->kind * 256 + p->prefix_len;
        if (spec > best_spec) {
            best_spec = spec;
            best = (unsigned)i;
        }
    }
    return best;
}

int main(int argc, char **argv)
{
    static const unsigned sizes[] = {10, 100, 1000, 10000};
    unsigned long lookups = 2000000;
    struct cw_uri *probes = calloc(NPROBES, sizeof(*probes));

    bool linear = true;

    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--lookups") == 0 && a + 1 < argc)
            lookups = strtoul(argv[++a], NULL, 10);
        else if (strcmp(argv[a], "--no-linear") == 0)
            linear = false;
    }
    if (probes == NULL)
        return 1;
    printf("%8s %10s %10s %14s %14s %9s\n", "routes", "load_ms", "build_ms",
           "table_ns/lkp", "linear_ns/lkp", "hit_rate");
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        struct cw_config_diag *diag = cw_config_diag_new();
        struct cw_config *cfg = NULL;
        struct cw_route_table *t = NULL;
        char *yaml = make_yaml(sizes[s]);
        unsigned long hits = 0;
        unsigned long linear_n =
            linear ? lookups / (sizes[s] >= 1000 ? 100 : 10) : 0;
        volatile unsigned sink = 0;
        double tl, t0, t1, t2;

        make_probes(probes);
        tl = now_ns();
        if (cw_config_load_buffer("bench.yaml", yaml, strlen(yaml), 0, diag,
                                  &cfg) != CW_OK) {
            cw_config_diag_print(diag, stderr);
            return 1;
        }
        t0 = now_ns();
        if (cw_route_table_build(cfg, &t) != CW_OK)
            return 1;
        t1 = now_ns();
        for (unsigned long i = 0; i < lookups; i++) {
            struct cw_route_result res;
            if (cw_route_table_lookup(t, &probes[i % NPROBES], &res) == CW_OK &&
                !res.implicit)
                hits++;
        }
        t2 = now_ns();
        {
            double l0 = now_ns();
            for (unsigned long i = 0; i < linear_n; i++)
                sink += linear_lookup(cfg, &probes[i % NPROBES]);
            double l1 = now_ns();
            printf("%8u %10.2f %10.2f %14.1f %14.1f %8.1f%%\n", sizes[s],
                   (t0 - tl) / 1e6, (t1 - t0) / 1e6,
                   (t2 - t1) / (double)lookups,
                   linear_n ? (l1 - l0) / (double)linear_n : 0.0,
                   100.0 * (double)hits / (double)lookups);
        }
        (void)sink;
        cw_route_table_unref(t);
        cw_config_free(cfg);
        cw_config_diag_free(diag);
        free(yaml);
    }
    free(probes);
    return 0;
}
