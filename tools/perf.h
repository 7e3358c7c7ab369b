/*
 * cw-perf's parts (cw-perf.c: options and main; perf_server.c; perf_client.c:
 * the call window and the measurement; perf_report.c: table, JSON, CSV and
 * plots): what they share.  Only this program includes it.
 */
#ifndef CW_TOOLS_PERF_H
#define CW_TOOLS_PERF_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <causeway/causeway.h>

#define RPC_ECHO       "cw-perf.rpc"
#define RPC_BULK       "cw-perf.bulk"
#define RPC_QUIT       "cw-perf.quit"
#define MAX_SIZES      16
#define MAX_INFLIGHT   256
#define MAX_CONTEXTS   64
#define MAX_REPS       64
#define MAX_REPLY      (1u << 30)
#define MAX_PLOT_FILES 16

/* Wire (only this program speaks it).  RPC_ECHO: bytes payload, then
 * optionally u8 flags, u32 reply size, u64 seed; without the trailer the
 * answer is empty (how timing runs call), with it the answer is the reply:
 * [u64 request check, u8 byte seen, with ECHO_VERIFY] bytes reply.  RPC_BULK:
 * u8 dir (1 pull, 2 push; | DIR_VERIFY), bulk, [u64 seed]; answer u64 transfer
 * ns, [u64 check, u8 byte seen, with DIR_VERIFY].  A check is 0 when the
 * data matched, else 1 + the offset of the first wrong byte. */
#define ECHO_VERIFY 0x1u
#define DIR_VERIFY  0x80u

enum test_kind { TEST_LAT, TEST_RATE, TEST_BW };
extern const char *const perf_test_names[]; /* by enum test_kind */

/* Set once by main from the options, read by every part. */
extern atomic_int perf_stop; /* signals, the quit RPC, any server thread */
extern bool perf_busy;
extern bool perf_coalesce;
/* Server: cw_context_opts.bulk_chunk and bulk_depth (0: the defaults). */
extern size_t perf_bulk_chunk;
extern unsigned perf_bulk_depth;
/* Directions --test bw measures: bit 0 pull, bit 1 push. */
extern unsigned perf_bw_dirs;
/* CW_PERF_CORRUPT: every Nth verified datum gets a byte flipped. */
extern unsigned perf_corrupt_every;

struct result {
    size_t size;
    const char *dir;
    double med, min, max;        /* lat: us; rate: RPC/s; bw: MiB/s */
    double extra;                /* bw: server-side transfer MiB/s */
    long long reply;             /* lat/rate: bytes answered, -1 none */
    uint64_t calls;              /* calls measured, all repetitions */
    double p50, p99, p999, pmax; /* one call, forward to completion: us */
};

/* How much to measure: per repetition, --iters calls or --time. */
struct plan {
    unsigned inflight;
    uint64_t iters;
    uint64_t dur_ns;
    unsigned reps;
};

enum format { FMT_TABLE, FMT_JSON, FMT_CSV };

struct out_opts {
    enum format fmt;
    const char *target;
    unsigned inflight;
    const struct plan *plan;
    bool verify;
    long long reply; /* -1: none given */
};

struct client_args {
    const char *target;
    const char *test;
    const char *sizes;
    unsigned inflight;
    unsigned iters;
    double time_s;
    unsigned reps;
    enum format fmt;
    bool verify;
    long long reply;  /* -1: no --reply-size */
    const char *plot; /* --plot FILE.png, or NULL */
};

/* One progress pass: cw_progress (busy or blocking), then cw_trigger. */
void perf_pump(cw_context_t *ctx);
/* Flip a byte of @p p if this is the Nth datum (CW_PERF_CORRUPT=N). */
void perf_maybe_corrupt(uint8_t *p, size_t len);
/* A check word: 0 when @p bad (first wrong offset) is @p len, else bad + 1. */
uint64_t perf_check_word(size_t bad, size_t len);
/* "0,64,4K" into @p sizes (MAX_SIZES at most): the count, -1 if malformed. */
int perf_parse_sizes(const char *list, size_t *sizes);

int perf_run_server(const char *listen, const char *addr_file, unsigned nctx);
int perf_run_client(const struct client_args *a);
int perf_quit_server(const char *target);

void perf_print_results(enum test_kind kind, const struct out_opts *o,
                        const struct result *res, int n);
int perf_plot_results(enum test_kind kind, const char *target,
                      const struct result *res, int n, const char *png);
int perf_plot_files(const char *const *files, unsigned n, const char *png);

#endif
