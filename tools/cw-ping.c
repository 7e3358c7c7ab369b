/*
 * cw-ping: call the echo RPC at any address (plain, target@gateway,
 * svc:name@gateway) and report round trips and statuses; or serve it.
 *
 *   cw-ping [options] ADDR...         client (the same calls to each)
 *   cw-ping --serve URI [--addr-file F] [--delay MS]
 */
#include "cli_json.h"
#include "cli_num.h"
#include "echo.h"

#include <causeway/causeway.h>
#include <causeway/log.h>
#include <causeway/routing.h>

#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#define PING_MAX_SIZES 16
#define PING_LINGER_NS 100000000ull /* progress after the last completion */

struct ping_opts {
    unsigned count, inflight, interval_ms;
    uint64_t timeout_ms;
    size_t sizes[PING_MAX_SIZES];
    unsigned nsizes;
    int expect; /* status the calls must end with (-1: CW_OK) */
    bool quiet;
    bool json;                /* the summaries as JSON, one per line */
    unsigned cancel_after_ms; /* cancel each call after this long */
    bool with_bulk;           /* attach a bulk handle to each request */
};

struct ping_call {
    struct ping_run *run;
    cw_handle_t *h;
    uint8_t *data;
    size_t len;
    unsigned seq;
    uint64_t t0;
    bool active;
    bool canceled;
    cw_bulk_t *bulk;
};

struct ping_run {
    const struct ping_opts *o;
    unsigned done, sent;
    uint64_t counts[CW_STATUS_MAX + 1];
    uint64_t rtt_min, rtt_max, rtt_sum, nrtt;
    unsigned bad_data;
    unsigned duplicate; /* callbacks of calls that had already completed */
};

static void ping_fill(uint8_t *p, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++)
        p[i] = (uint8_t)(seed * 31u + i * 7u + (i >> 8));
}

static void ping_cb(cw_handle_t *h, cw_status_t st, void *arg)
{
    struct ping_call *c = arg;
    struct ping_run *r = c->run;
    uint64_t rtt = cw_now_ns() - c->t0;
    const void *p;
    size_t len;

    if (!c->active || c->h != h) {
        /* This call completed already (its slot may be running another
         * call by now): a second completion of one operation.  The handle
         * was released at the first one; it is not touched again. */
        r->duplicate++;
        fprintf(stderr,
                "cw-ping: duplicate completion (%s) of a call "
                "that already completed\n",
                cw_status_name(st));
        return;
    }
    if (st == CW_OK) {
        if (cw_buf_get_bytes(cw_handle_output(h), &p, &len) != CW_OK ||
            len != c->len || (len && memcmp(p, c->data, len) != 0)) {
            r->bad_data++;
            st = CW_PROTOCOL;
        }
    }
    r->counts[st <= CW_STATUS_MAX ? st : CW_STATUS_MAX]++;
    if (st == CW_OK) {
        r->rtt_sum += rtt;
        r->nrtt++;
        if (r->rtt_min == 0 || rtt < r->rtt_min)
            r->rtt_min = rtt;
        if (rtt > r->rtt_max)
            r->rtt_max = rtt;
    }
    if (!r->o->quiet) {
        if (st == CW_OK)
            printf("%zu B: seq=%u rtt=%.1f us\n", c->len, c->seq, rtt / 1e3);
        else
            printf("%zu B: seq=%u %s (%s) after %.1f us\n", c->len, c->seq,
                   cw_status_name(st), cw_status_str(st), rtt / 1e3);
    }
    r->done++;
    c->active = false;
    cw_handle_release(h);
    c->h = NULL;
}

static cw_status_t ping_start(cw_context_t *ctx, cw_addr_t *dest,
                              cw_rpc_id_t id, struct ping_call *c)
{
    const struct ping_opts *o = c->run->o;
    cw_status_t st;

    c->seq = c->run->sent++;
    c->len = o->sizes[c->seq % o->nsizes];
    ping_fill(c->data, c->len, c->seq);
    st = cw_handle_create(ctx, dest, id, &c->h);
    if (st == CW_OK)
        st = cw_buf_put_bytes(cw_handle_input(c->h), c->data, c->len);
    if (st == CW_OK && o->with_bulk) {
        struct cw_segment seg = {c->data, c->len ? c->len : 1};
        cw_bulk_free(c->bulk);
        c->bulk = NULL;
        st = cw_bulk_create(ctx, &seg, 1, CW_BULK_READ_ONLY, &c->bulk);
        if (st == CW_OK)
            st = cw_buf_put_bulk(cw_handle_input(c->h), c->bulk);
    }
    c->t0 = cw_now_ns();
    c->active = true;
    c->canceled = false;
    if (st == CW_OK)
        st = cw_forward(c->h, o->timeout_ms, ping_cb, c);
    if (st != CW_OK) {
        /* Count a call that could not even be sent like a failed one. */
        c->active = false;
        c->run->counts[st <= CW_STATUS_MAX ? st : CW_STATUS_MAX]++;
        c->run->done++;
        if (!o->quiet)
            printf("%zu B: seq=%u not sent: %s\n", c->len, c->seq,
                   cw_status_name(st));
        cw_handle_release(c->h);
        c->h = NULL;
    }
    return st;
}

/* One address called: its calls and their tally. */
struct ping_target {
    const char *name;
    cw_addr_t *dest;
    struct ping_run run;
    struct ping_call *calls;
    uint64_t next_ns;
};

static bool ping_busy(const struct ping_target *t, unsigned n)
{
    for (unsigned k = 0; k < n; k++)
        if (t[k].run.done < t[k].run.o->count)
            return true;
    return false;
}

/* The summary as one JSON object on one line (docs/man/cw-ping.1.scd). */
static void ping_summary_json(const struct ping_target *t, bool ok)
{
    const struct ping_run *r = &t->run;
    const struct ping_opts *o = r->o;
    bool first = true;

    printf("{\"target\":");
    cli_json_str(stdout, t->name);
    printf(",\"calls\":%u,\"sizes\":[", r->done);
    for (unsigned i = 0; i < o->nsizes; i++)
        printf("%s%zu", i ? "," : "", o->sizes[i]);
    printf("],\"expect\":\"%s\",\"statuses\":{",
           cw_status_name((cw_status_t)(o->expect < 0 ? CW_OK : o->expect)));
    for (unsigned s = 0; s <= CW_STATUS_MAX; s++) {
        if (!r->counts[s])
            continue;
        printf("%s\"%s\":%" PRIu64, first ? "" : ",",
               s < CW_STATUS_MAX ? cw_status_name((cw_status_t)s) : "other",
               r->counts[s]);
        first = false;
    }
    printf("},\"rtt_us\":");
    if (r->nrtt)
        printf("{\"min\":%.1f,\"avg\":%.1f,\"max\":%.1f,\"n\":%" PRIu64 "}",
               r->rtt_min / 1e3, r->rtt_sum / 1e3 / r->nrtt, r->rtt_max / 1e3,
               r->nrtt);
    else
        printf("null");
    printf(",\"bad_data\":%u,\"duplicate\":%u,\"ok\":%s}\n", r->bad_data,
           r->duplicate, ok ? "true" : "false");
}

static void ping_summary(const struct ping_target *t)
{
    const struct ping_run *r = &t->run;

    printf("--- %s: %u calls", t->name, r->done);
    for (unsigned s = 0; s <= CW_STATUS_MAX; s++)
        if (r->counts[s])
            printf(", %s=%" PRIu64,
                   s < CW_STATUS_MAX ? cw_status_name((cw_status_t)s) : "other",
                   r->counts[s]);
    if (r->nrtt)
        printf("; rtt min/avg/max %.1f/%.1f/%.1f us", r->rtt_min / 1e3,
               r->rtt_sum / 1e3 / r->nrtt, r->rtt_max / 1e3);
    printf("; duplicate=%u\n", r->duplicate);
}

/* The same calls to each of @p n addresses at once, from one context (so
 * one source address as the gateway sees it). */
static int ping_client(char **names, unsigned n, const struct ping_opts *o)
{
    struct ping_target *tg;
    cw_context_t *ctx = NULL;
    cw_rpc_id_t id = cw_rpc_id(CW_ECHO_RPC);
    size_t maxlen = 0;
    unsigned k;
    cw_status_t st;
    int rc = 1;

    for (unsigned i = 0; i < o->nsizes; i++)
        if (o->sizes[i] > maxlen)
            maxlen = o->sizes[i];
    tg = calloc(n, sizeof(*tg));
    if (tg == NULL)
        return 1;
    for (k = 0; k < n; k++) {
        tg[k].name = names[k];
        tg[k].run.o = o;
        tg[k].calls = calloc(o->inflight, sizeof(*tg[k].calls));
        if (tg[k].calls == NULL)
            goto out;
        for (unsigned i = 0; i < o->inflight; i++) {
            tg[k].calls[i].run = &tg[k].run;
            tg[k].calls[i].data = malloc(maxlen ? maxlen : 1);
            if (tg[k].calls[i].data == NULL)
                goto out;
        }
    }
    st = cw_context_create(NULL, &ctx);
    if (st == CW_OK)
        st = cw_client_routes_load(ctx, NULL); /* $CAUSEWAY_ROUTES */
    if (st == CW_OK)
        st = cw_rpc_register(ctx, CW_ECHO_RPC, NULL, NULL, NULL, NULL);
    for (k = 0; k < n && st == CW_OK; k++)
        st = cw_addr_lookup(ctx, names[k], &tg[k].dest);
    if (st != CW_OK) {
        fprintf(stderr, "cw-ping: %s: %s\n", names[k > 0 ? k - 1 : 0],
                cw_status_str(st));
        goto out;
    }
    while (ping_busy(tg, n)) {
        uint64_t now = cw_now_ns();

        for (k = 0; k < n; k++) {
            struct ping_target *t = &tg[k];
            for (unsigned i = 0; i < o->inflight && t->run.sent < o->count;
                 i++) {
                if (t->calls[i].active || now < t->next_ns)
                    continue;
                ping_start(ctx, t->dest, id, &t->calls[i]);
                t->next_ns =
                    o->interval_ms ? now + o->interval_ms * 1000000ull : 0;
            }
        }
        now = cw_now_ns(); /* calls started above have a later t0 */
        if (o->cancel_after_ms)
            for (k = 0; k < n; k++)
                for (unsigned i = 0; i < o->inflight; i++) {
                    struct ping_call *c = &tg[k].calls[i];
                    if (c->active && !c->canceled &&
                        now - c->t0 >= o->cancel_after_ms * 1000000ull) {
                        c->canceled = true;
                        cw_cancel(c->h);
                    }
                }
        cw_progress(ctx, 1);
        cw_trigger(ctx, 0, 0, NULL);
    }
    /* Keep progressing a little: a late second completion of a call that
     * already completed is caught here instead of going unnoticed. */
    for (uint64_t end = cw_now_ns() + PING_LINGER_NS; cw_now_ns() < end;) {
        cw_progress(ctx, 1);
        cw_trigger(ctx, 0, 0, NULL);
    }
    rc = 0;
    for (k = 0; k < n; k++) {
        const struct ping_run *r = &tg[k].run;
        int want = o->expect < 0 ? CW_OK : o->expect;
        bool ok = r->counts[want] == r->done && r->duplicate == 0;

        if (o->json)
            ping_summary_json(&tg[k], ok);
        else
            ping_summary(&tg[k]);
        if (!ok)
            rc = 1;
    }
out:
    for (k = 0; k < n; k++) {
        cw_addr_free(tg[k].dest);
        if (tg[k].calls != NULL)
            for (unsigned i = 0; i < o->inflight; i++) {
                cw_bulk_free(tg[k].calls[i].bulk);
                tg[k].calls[i].bulk = NULL;
            }
    }
    cw_context_destroy(ctx);
    for (k = 0; k < n; k++) {
        if (tg[k].calls != NULL)
            for (unsigned i = 0; i < o->inflight; i++)
                free(tg[k].calls[i].data);
        free(tg[k].calls);
    }
    free(tg);
    return rc;
}

static int ping_serve(const char *uri, const char *addr_file, unsigned delay_ms)
{
    cw_context_t *ctx = NULL;
    cw_network_t *net;
    char self[CW_URI_MAX];
    struct signalfd_siginfo si;
    sigset_t set;
    cw_status_t st;
    int sfd, rc = 1;

    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_BLOCK, &set, NULL);
    sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sfd < 0) {
        perror("cw-ping: signalfd");
        return 1;
    }
    st = cw_context_create(NULL, &ctx);
    if (st == CW_OK)
        st = cw_network_open(ctx, uri, CW_NET_LISTEN, &net);
    if (st == CW_OK)
        st = cw_network_uri(net, self, sizeof(self));
    if (st == CW_OK)
        st = cw_echo_register(ctx, delay_ms);
    if (st != CW_OK) {
        fprintf(stderr, "cw-ping: cannot serve on %s: %s\n", uri,
                cw_status_str(st));
        goto out;
    }
    if (addr_file != NULL) {
        char tmp[4096];
        FILE *f;
        snprintf(tmp, sizeof(tmp), "%s.tmp", addr_file);
        f = fopen(tmp, "we");
        if (f == NULL || fprintf(f, "%s\n", self) < 0 || fclose(f) != 0 ||
            rename(tmp, addr_file) != 0) {
            perror("cw-ping: addr-file");
            goto out;
        }
    } else {
        printf("%s\n", self);
        fflush(stdout);
    }
    while (read(sfd, &si, sizeof(si)) != (ssize_t)sizeof(si))
        cw_echo_serve(ctx, 20);
    {
        uint64_t served, canceled;
        cw_echo_counts(&served, &canceled);
        fprintf(stderr,
                "cw-ping: served %" PRIu64 ", canceled by their "
                "caller %" PRIu64 "\n",
                served, canceled);
    }
    rc = 0;
out:
    cw_context_destroy(ctx);
    close(sfd);
    return rc;
}

static int parse_sizes(const char *s, struct ping_opts *o)
{
    char *copy = strdup(s), *save = NULL, *tok;

    o->nsizes = 0;
    if (copy == NULL)
        return -1;
    for (tok = strtok_r(copy, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        unsigned long long v;
        if (!cli_size(tok, 64u << 20, &v) || o->nsizes == PING_MAX_SIZES) {
            free(copy);
            return -1;
        }
        o->sizes[o->nsizes++] = (size_t)v;
    }
    free(copy);
    return o->nsizes ? 0 : -1;
}

static const char *opt_name(int opt)
{
    switch (opt) {
    case 'c':
        return "-c";
    case 'n':
        return "-n";
    case 'i':
        return "-i";
    case 't':
        return "-t";
    case 'D':
        return "--delay";
    default:
        return "--cancel-after";
    }
}

static int status_parse(const char *s)
{
    for (int i = 0; i < CW_STATUS_MAX; i++)
        if (strcmp(s, cw_status_name((cw_status_t)i)) == 0 ||
            (strncmp(s, "CW_", 3) != 0 &&
             strcmp(s, cw_status_name((cw_status_t)i) + 3) == 0))
            return i;
    return -1;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: cw-ping [options] ADDR...  call causeway.echo at ADDR "
            "(plain, target@gw, svc:name@gw)\n"
            "                                  (several: the same calls to "
            "each at once, a summary each)\n"
            "  -c N            calls (default 4)\n"
            "  -s LIST         sizes in bytes, comma separated, K/M suffixes "
            "(default 64)\n"
            "  -n N            calls in flight at once (default 1)\n"
            "  -i MS           interval between calls (default 0)\n"
            "  -t MS           deadline of each call (default 5000)\n"
            "  -q              print only the summary\n"
            "  --json          print only the summary, as one JSON object "
            "per ADDR (a line each)\n"
            "  --expect ST     succeed if every call ends with status ST "
            "(e.g. CW_DENIED)\n"
            "  --cancel-after MS  cancel each call after MS\n"
            "  --with-bulk     also pass the data as a bulk handle\n"
            "       cw-ping --serve URI [--addr-file F] [--delay MS]   echo "
            "server\n"
            "exit status 0 when every call ended as expected and none "
            "completed twice\n"
            "(the summary's duplicate=N counts second completions)\n");
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"serve", required_argument, NULL, 'S'},
        {"addr-file", required_argument, NULL, 'A'},
        {"delay", required_argument, NULL, 'D'},
        {"expect", required_argument, NULL, 'E'},
        {"cancel-after", required_argument, NULL, 'C'},
        {"with-bulk", no_argument, NULL, 'B'},
        {"json", no_argument, NULL, 'J'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct ping_opts o = {.count = 4,
                          .inflight = 1,
                          .timeout_ms = 5000,
                          .sizes = {64},
                          .nsizes = 1,
                          .expect = -1};
    const char *serve = NULL, *addr_file = NULL;
    unsigned delay = 0, timeout_ms = 5000;
    int opt;

    cw_log_init();
    while ((opt = getopt_long(argc, argv, "c:s:n:i:t:qh", longopts, NULL)) !=
           -1) {
        switch (opt) {
        case 'c':
        case 'n':
        case 'i':
        case 't':
        case 'D':
        case 'C': {
            unsigned long long v;
            if (!cli_uint(optarg, UINT_MAX, &v)) {
                fprintf(stderr, "cw-ping: %s: expected a number, got '%s'\n",
                        opt_name(opt), optarg);
                return 2;
            }
            *(opt == 'c'   ? &o.count
              : opt == 'n' ? &o.inflight
              : opt == 'i' ? &o.interval_ms
              : opt == 'D' ? &delay
              : opt == 'C' ? &o.cancel_after_ms
                           : &timeout_ms) = (unsigned)v;
            break;
        }
        case 'q':
            o.quiet = true;
            break;
        case 'S':
            serve = optarg;
            break;
        case 'A':
            addr_file = optarg;
            break;
        case 'B':
            o.with_bulk = true;
            break;
        case 'J':
            o.json = o.quiet = true;
            break;
        case 's':
            if (parse_sizes(optarg, &o) != 0) {
                fprintf(stderr, "cw-ping: bad size list '%s'\n", optarg);
                return 2;
            }
            break;
        case 'E':
            o.expect = status_parse(optarg);
            if (o.expect < 0) {
                fprintf(stderr, "cw-ping: unknown status '%s'\n", optarg);
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
    o.timeout_ms = timeout_ms;
    if (serve != NULL && o.json) {
        fprintf(stderr, "cw-ping: --json is for the client's summaries, "
                        "not --serve\n");
        return 2;
    }
    if (serve != NULL)
        return ping_serve(serve, addr_file, delay);
    if (optind >= argc || o.count == 0 || o.inflight == 0) {
        usage(stderr);
        return 2;
    }
    if (o.inflight > o.count)
        o.inflight = o.count;
    return ping_client(argv + optind, (unsigned)(argc - optind), &o);
}
