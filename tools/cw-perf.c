/*
 * cw-perf: RPC latency/rate and bulk bandwidth benchmark.
 *
 *   cw-perf server --listen ADDR [--addr-file F] [--busy] [--coalesce]
 *                  [--contexts N] [--chunk SIZE] [--depth N]
 *   cw-perf client --target ADDR --test lat|rate|bw [--sizes LIST]
 *                  [--inflight N] [--iters N | --time S] [--reps N] [--busy]
 *                  [--json | --csv] [--dir pull|push|both] [--coalesce]
 *                  [--verify] [--reply-size N]
 *
 * Every figure is the median of --reps repeated runs; next to it, the
 * distribution of single calls over all of them (p50, p99, p99.9, max of
 * the time from cw_forward to the completion callback).  The target may be
 * a proxied address ("target@gateway"), which is how gateway overhead is
 * measured.  --coalesce opens the context with CW_CTX_COALESCE: the
 * server's answers given in one cw_trigger() pass, and the requests the
 * client sends in one refill of its window, leave one message per peer.
 * --contexts N serves the one address from N contexts on N threads, the
 * callers spread over them (cw_network_open_spread).  --chunk and --depth
 * set the server's bulk split size and chunks in flight per transfer
 * (cw_context_opts.bulk_chunk, bulk_depth), which the bw test's pulls and
 * pushes use.
 *
 * --verify makes every call carry a pattern drawn from its own seed: the
 * server checks the request and echoes it (lat, rate), checks what it
 * pulled or pushes a pattern the client checks (bw).  A verified call
 * costs a handle of its own and the filling and checking, so timing runs
 * leave it off.  CW_PERF_CORRUPT=N (tests only) flips a byte of every Nth
 * verified answer, transfer or request, to show that the checks work.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <causeway/causeway.h>

#include "cli_num.h"
#include "perf.h"
#include "perf_plot.h"

atomic_int perf_stop;
bool perf_busy;
bool perf_coalesce;
size_t perf_bulk_chunk;
unsigned perf_bulk_depth;
unsigned perf_bw_dirs = 3;
unsigned perf_corrupt_every;
static atomic_uint perf_corrupt_seen;

static void on_signal(int sig)
{
    (void)sig;
    perf_stop = 1;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: cw-perf server --listen ADDR [--addr-file F] [--busy]\n"
            "               [--coalesce] [--contexts N]\n"
            "               [--chunk SIZE] [--depth N]  (bulk: split size,\n"
            "               chunks in flight; default 1M and 4)\n"
            "       cw-perf client --target ADDR --test lat|rate|bw\n"
            "               [--sizes LIST] [--inflight N]\n"
            "               [--iters N | --time SECONDS] [--reps N]\n"
            "               [--busy] [--json | --csv] [--coalesce]\n"
            "               [--verify] [--reply-size N]  (lat, rate)\n"
            "               [--dir pull|push|both]   (bw only; default both)\n"
            "               [--plot FILE.png]   (latency and bandwidth "
            "against size, gnuplot)\n"
            "       cw-perf quit --target ADDR\n"
            "       cw-perf plot --plot FILE.png --plot-from A.json "
            "[B.json...]\n"
            "               (several runs side by side: direct vs through a "
            "gateway)\n"
            "sizes take K/M/G suffixes (powers of 1024), e.g. 0,64,4K,64K\n"
            "--time: each repetition runs SECONDS instead of --iters calls\n"
            "--verify: every call carries its own pattern, checked at the\n"
            "  other end (a mismatch fails the run, exit 1); it costs a\n"
            "  handle reset per call and the checking: timing runs leave\n"
            "  it off\n"
            "--reply-size N: the server answers N bytes (default: nothing;\n"
            "  with --verify, the request echoed)\n");
}

/* One pass of the pass clock (log.h): the core stamps what it receives,
 * answers and sends in it with one clock reading; no callback of ours
 * blocks. */
void perf_pump(cw_context_t *ctx)
{
    cw_clock_pass_begin();
    cw_progress(ctx, perf_busy ? 0 : 100);
    cw_trigger(ctx, 0, 0, NULL);
    cw_clock_pass_end();
}

void perf_maybe_corrupt(uint8_t *p, size_t len)
{
    unsigned k;

    if (perf_corrupt_every == 0 || len == 0)
        return;
    k = atomic_fetch_add(&perf_corrupt_seen, 1) + 1;
    if (k % perf_corrupt_every == 0)
        p[len / 2] ^= 0xff;
}

uint64_t perf_check_word(size_t bad, size_t len)
{
    return bad < len ? (uint64_t)bad + 1 : 0;
}

/* CW_PERF_CORRUPT=N (tests only), for both ends. */
static int corrupt_from_env(void)
{
    const char *e = getenv("CW_PERF_CORRUPT");
    unsigned long long v;

    if (e == NULL || *e == '\0')
        return 0;
    if (!cli_uint(e, UINT_MAX, &v) || v == 0) {
        fprintf(stderr,
                "cw-perf: CW_PERF_CORRUPT: expected a number from "
                "1, got '%s'\n",
                e);
        return -1;
    }
    perf_corrupt_every = (unsigned)v;
    fprintf(stderr,
            "cw-perf: CW_PERF_CORRUPT=%u: one verified datum sent "
            "in %u gets a byte flipped (a test of --verify)\n",
            perf_corrupt_every, perf_corrupt_every);
    return 0;
}

static bool parse_seconds(const char *s, double *v_p)
{
    char *end;
    double v;

    if (s == NULL || !(s[0] >= '0' && s[0] <= '9'))
        return false;
    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || *end != '\0' || !(v > 0) || v > 86400)
        return false;
    *v_p = v;
    return true;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"addr-file", required_argument, NULL, 'a'},
        {"target", required_argument, NULL, 't'},
        {"test", required_argument, NULL, 'T'},
        {"sizes", required_argument, NULL, 's'},
        {"inflight", required_argument, NULL, 'i'},
        {"iters", required_argument, NULL, 'n'},
        {"reps", required_argument, NULL, 'r'},
        {"time", required_argument, NULL, 'S'},
        {"busy", no_argument, NULL, 'b'},
        {"coalesce", no_argument, NULL, 'C'},
        {"json", no_argument, NULL, 'j'},
        {"csv", no_argument, NULL, 'v'},
        {"verify", no_argument, NULL, 'V'},
        {"reply-size", required_argument, NULL, 'R'},
        {"dir", required_argument, NULL, 'd'},
        {"contexts", required_argument, NULL, 'c'},
        {"chunk", required_argument, NULL, 'k'},
        {"depth", required_argument, NULL, 'D'},
        {"plot", required_argument, NULL, 'P'},
        {"plot-from", required_argument, NULL, 'F'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *listen = NULL, *addr_file = NULL, *mode;
    struct client_args ca = {.reps = 5, .reply = -1};
    unsigned nctx = 1;
    const char *plot_from[MAX_PLOT_FILES];
    unsigned nplot_from = 0;
    bool json = false, csv = false;
    int c;

    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    mode = argv[1];
    optind = 2;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'l':
            listen = optarg;
            break;
        case 'a':
            addr_file = optarg;
            break;
        case 't':
            ca.target = optarg;
            break;
        case 'T':
            ca.test = optarg;
            break;
        case 's':
            ca.sizes = optarg;
            break;
        case 'c': {
            unsigned long long v;
            if (!cli_uint(optarg, MAX_CONTEXTS, &v) || v == 0) {
                fprintf(stderr,
                        "cw-perf: --contexts: expected 1 to %d, got "
                        "'%s'\n",
                        MAX_CONTEXTS, optarg);
                return 2;
            }
            nctx = (unsigned)v;
            break;
        }
        case 'k': {
            unsigned long long v;
            if (!cli_size(optarg, 1ull << 30, &v) || v < 4096) {
                fprintf(stderr,
                        "cw-perf: --chunk: expected a size from 4K to 1G, "
                        "got '%s'\n",
                        optarg);
                return 2;
            }
            perf_bulk_chunk = (size_t)v;
            break;
        }
        case 'D': {
            unsigned long long v;
            if (!cli_uint(optarg, 16, &v) || v == 0) {
                fprintf(stderr,
                        "cw-perf: --depth: expected 1 to 16, got '%s'\n",
                        optarg);
                return 2;
            }
            perf_bulk_depth = (unsigned)v;
            break;
        }
        case 'i':
        case 'n':
        case 'r': {
            unsigned long long v;
            if (!cli_uint(optarg, UINT_MAX, &v)) {
                fprintf(stderr,
                        "cw-perf: --%s: expected a number, got "
                        "'%s'\n",
                        c == 'i'   ? "inflight"
                        : c == 'n' ? "iters"
                                   : "reps",
                        optarg);
                return 2;
            }
            *(c == 'i'   ? &ca.inflight
              : c == 'n' ? &ca.iters
                         : &ca.reps) = (unsigned)v;
            break;
        }
        case 'S':
            if (!parse_seconds(optarg, &ca.time_s)) {
                fprintf(stderr,
                        "cw-perf: --time: expected seconds (over 0, "
                        "at most 86400), got '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case 'R': {
            unsigned long long v;
            if (!cli_size(optarg, MAX_REPLY, &v)) {
                fprintf(stderr,
                        "cw-perf: --reply-size: expected a size up "
                        "to 1G, got '%s'\n",
                        optarg);
                return 2;
            }
            ca.reply = (long long)v;
            break;
        }
        case 'P':
            ca.plot = optarg;
            break;
        case 'F':
            if (nplot_from == MAX_PLOT_FILES) {
                fprintf(stderr, "cw-perf: at most %d --plot-from files\n",
                        MAX_PLOT_FILES);
                return 2;
            }
            plot_from[nplot_from++] = optarg;
            break;
        case 'b':
            perf_busy = true;
            break;
        case 'C':
            perf_coalesce = true;
            break;
        case 'j':
            json = true;
            break;
        case 'v':
            csv = true;
            break;
        case 'V':
            ca.verify = true;
            break;
        case 'd':
            perf_bw_dirs = strcmp(optarg, "pull") == 0   ? 1
                           : strcmp(optarg, "push") == 0 ? 2
                           : strcmp(optarg, "both") == 0 ? 3
                                                         : 0;
            if (!perf_bw_dirs) {
                fprintf(stderr, "cw-perf: --dir pull|push|both, not \"%s\"\n",
                        optarg);
                return 2;
            }
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (ca.inflight > MAX_INFLIGHT || ca.reps == 0 || ca.reps > MAX_REPS) {
        fprintf(stderr, "cw-perf: --inflight <= %d, 1 <= --reps <= %d\n",
                MAX_INFLIGHT, MAX_REPS);
        return 2;
    }
    if (json && csv) {
        fprintf(stderr, "cw-perf: --json or --csv, not both\n");
        return 2;
    }
    if (nplot_from > 0 && strcmp(mode, "plot") != 0) {
        fprintf(stderr, "cw-perf: --plot-from goes with 'cw-perf plot'\n");
        return 2;
    }
    if (ca.plot != NULL && strcmp(mode, "client") != 0 &&
        strcmp(mode, "plot") != 0) {
        fprintf(stderr, "cw-perf: --plot goes with 'cw-perf client' or "
                        "'cw-perf plot'\n");
        return 2;
    }
    if (ca.iters && ca.time_s > 0) {
        fprintf(stderr, "cw-perf: --iters or --time, not both\n");
        return 2;
    }
    ca.fmt = json ? FMT_JSON : csv ? FMT_CSV : FMT_TABLE;
    if (corrupt_from_env() != 0)
        return 2;
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    if (strcmp(mode, "server") == 0 && listen)
        return perf_run_server(listen, addr_file, nctx);
    if (strcmp(mode, "client") == 0 && ca.target && ca.test)
        return perf_run_client(&ca);
    if (strcmp(mode, "quit") == 0 && ca.target)
        return perf_quit_server(ca.target);
    if (strcmp(mode, "plot") == 0) {
        /* --plot-from A.json B.json: the files after the first too. */
        for (; optind < argc && nplot_from < MAX_PLOT_FILES; optind++)
            plot_from[nplot_from++] = argv[optind];
        if (optind < argc) {
            fprintf(stderr, "cw-perf: at most %d --plot-from files\n",
                    MAX_PLOT_FILES);
            return 2;
        }
        if (ca.plot == NULL || nplot_from == 0) {
            fprintf(stderr, "cw-perf: plot needs --plot FILE.png and "
                            "--plot-from FILE.json...\n");
            return 2;
        }
        return perf_plot_files(plot_from, nplot_from, ca.plot);
    }
    usage(stderr);
    return 2;
}
