/*
 * cw-perf's output: the table, --json, --csv, and --plot (gnuplot) of a
 * run or of several --json files.
 */
#include <stdio.h>
#include <string.h>

#include <causeway/causeway.h>

#include "cli_json.h"
#include "perf.h"
#include "perf_check.h"
#include "perf_plot.h"

static void print_json(enum test_kind kind, const char *unit,
                       const struct out_opts *o, const struct result *res,
                       int n)
{
    printf("{\"test\":\"%s\",\"target\":", perf_test_names[kind]);
    cli_json_str(stdout, o->target);
    printf(",\"mode\":\"%s\","
           "\"inflight\":%u,\"reps\":%u,\"unit\":\"%s\",\"verify\":%s,",
           perf_busy ? "busy" : "blocking", o->inflight, o->plan->reps, unit,
           o->verify ? "true" : "false");
    if (o->reply >= 0)
        printf("\"reply_size\":%lld,", o->reply);
    if (o->plan->dur_ns)
        printf("\"time_s\":%.3f,", (double)o->plan->dur_ns / 1e9);
    printf("\"results\":[");
    for (int i = 0; i < n; i++) {
        printf("%s{\"size\":%zu,", i ? "," : "", res[i].size);
        if (res[i].dir[0])
            printf("\"dir\":\"%s\",\"server_xfer\":%.1f,", res[i].dir,
                   res[i].extra);
        if (res[i].reply >= 0)
            printf("\"reply\":%lld,", res[i].reply);
        printf("\"median\":%.3f,\"min\":%.3f,\"max\":%.3f,\"calls\":%llu,"
               "\"p50_us\":%.3f,\"p99_us\":%.3f,\"p999_us\":%.3f,"
               "\"max_us\":%.3f}",
               res[i].med, res[i].min, res[i].max,
               (unsigned long long)res[i].calls, res[i].p50, res[i].p99,
               res[i].p999, res[i].pmax);
    }
    printf("]}\n");
}

static void print_csv(enum test_kind kind, const char *unit,
                      const struct out_opts *o, const struct result *res, int n)
{
    printf("test,target,mode,inflight,reps,verify,reply_size,size,dir,"
           "median,min,max,unit,server_xfer,calls,p50_us,p99_us,p999_us,"
           "max_us\n");
    for (int i = 0; i < n; i++) {
        printf("%s,\"", perf_test_names[kind]);
        for (const char *t = o->target; *t; t++) {
            if (*t == '"')
                putchar('"');
            putchar(*t);
        }
        printf("\",%s,%u,%u,%d,", perf_busy ? "busy" : "blocking", o->inflight,
               o->plan->reps, o->verify ? 1 : 0);
        if (res[i].reply >= 0)
            printf("%lld", res[i].reply);
        printf(",%zu,%s,%.3f,%.3f,%.3f,%s,", res[i].size, res[i].dir,
               res[i].med, res[i].min, res[i].max, unit);
        if (res[i].dir[0])
            printf("%.1f", res[i].extra);
        printf(",%llu,%.3f,%.3f,%.3f,%.3f\n", (unsigned long long)res[i].calls,
               res[i].p50, res[i].p99, res[i].p999, res[i].pmax);
    }
}

void perf_print_results(enum test_kind kind, const struct out_opts *o,
                        const struct result *res, int n)
{
    const char *unit = kind == TEST_LAT    ? "us"
                       : kind == TEST_RATE ? "rpc/s"
                                           : "MiB/s";

    if (o->fmt == FMT_JSON) {
        print_json(kind, unit, o, res, n);
        return;
    }
    if (o->fmt == FMT_CSV) {
        print_csv(kind, unit, o, res, n);
        return;
    }
    printf("# cw-perf %s  target %s  mode %s  inflight %u  median of %u  "
           "verify %s",
           perf_test_names[kind], o->target, perf_busy ? "busy" : "blocking",
           o->inflight, o->plan->reps, o->verify ? "on" : "off");
    if (o->reply >= 0)
        printf("  reply %lld B", o->reply);
    else if (o->verify && kind != TEST_BW)
        printf("  reply echoed");
    printf("\n# per call, forward to completion, all repetitions: calls, "
           "p50 p99 p99.9 max in us\n");
    if (kind == TEST_BW)
        printf("%12s %5s %12s %12s %12s %14s %6s", "size", "dir", "median",
               "min", "max", "server-xfer", "");
    else
        printf("%12s %12s %12s %12s %6s", "size", "median", "min", "max", "");
    printf(" %9s %10s %10s %10s %10s\n", "calls", "p50", "p99", "p99.9", "max");
    for (int i = 0; i < n; i++) {
        if (res[i].dir[0])
            printf("%12zu %5s %12.1f %12.1f %12.1f %14.1f  %-5s", res[i].size,
                   res[i].dir, res[i].med, res[i].min, res[i].max, res[i].extra,
                   unit);
        else
            printf("%12zu %12.3f %12.3f %12.3f  %-5s", res[i].size, res[i].med,
                   res[i].min, res[i].max, unit);
        printf(" %9llu %10.2f %10.2f %10.2f %10.2f\n",
               (unsigned long long)res[i].calls, res[i].p50, res[i].p99,
               res[i].p999, res[i].pmax);
    }
}

/* --plot: this run's results drawn by gnuplot. */
int perf_plot_results(enum test_kind kind, const char *target,
                      const struct result *res, int n, const char *png)
{
    struct plot pl = {0};
    const char *dir[2 * MAX_SIZES];
    double size[2 * MAX_SIZES], med[2 * MAX_SIZES], p50[2 * MAX_SIZES];
    char title[CW_URI_MAX + 64], err[512];
    int rc = 0;

    for (int i = 0; i < n; i++) {
        dir[i] = res[i].dir;
        size[i] = (double)res[i].size;
        med[i] = res[i].med;
        p50[i] = res[i].p50;
    }
    snprintf(title, sizeof(title), "cw-perf %s, target %s",
             perf_test_names[kind], target);
    if (perf_plot_add_run(&pl, "", perf_test_names[kind], dir, size, med, p50,
                          (size_t)n) != 0) {
        snprintf(err, sizeof(err), "out of memory");
        rc = -1;
    }
    if (rc == 0)
        rc = perf_plot_draw(&pl, title, png, err, sizeof(err));
    perf_plot_free(&pl);
    if (rc != 0) {
        fprintf(stderr, "cw-perf: --plot %s: %s\n", png, err);
        return 1;
    }
    fprintf(stderr, "cw-perf: plotted %d results into %s\n", n, png);
    return 0;
}

/* cw-perf plot: the runs of several --json files in one picture. */
int perf_plot_files(const char *const *files, unsigned n, const char *png)
{
    struct plot pl = {0};
    char title[1024] = "cw-perf:", err[1024];
    size_t used = strlen(title);
    int rc = 0;

    for (unsigned i = 0; i < n && rc == 0; i++) {
        const char *base = strrchr(files[i], '/');

        rc = perf_plot_add_file(&pl, files[i], err, sizeof(err));
        if (used < sizeof(title))
            used +=
                (size_t)snprintf(title + used, sizeof(title) - used, "%s %s",
                                 i ? "," : "", base ? base + 1 : files[i]);
    }
    if (rc == 0)
        rc = perf_plot_draw(&pl, title, png, err, sizeof(err));
    if (rc != 0)
        fprintf(stderr, "cw-perf: plot: %s\n", err);
    else
        fprintf(stderr,
                "cw-perf: plotted %zu series from %u files into "
                "%s\n",
                pl.n, n, png);
    perf_plot_free(&pl);
    return rc != 0 ? 1 : 0;
}
