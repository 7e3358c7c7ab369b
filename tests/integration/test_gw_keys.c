/*
 * Hostile keys through a real gateway (docs/gateway.md, "Caches and
 * limits"): causewayd on na-shm, driven by this process as many clients
 * and a server.
 *
 *   test_gw_keys CAUSEWAYD CWCTL [DESTS]
 *
 * 1. Sources: 40 clients, each from its own address, call a server that
 *    holds every request; with limits.max_sources 16, 16 are admitted and
 *    the 24 others get CW_BUSY at once, counted (sources_refused).  Once
 *    the server answers, the table empties and a refused client is served.
 * 2. Next-hop addresses: calls to 128 distinct live server addresses with
 *    limits.max_cached_addrs 32 (per gateway thread) all succeed, while the
 *    cache holds at most 32 a thread and counts what it evicted.
 * 3. Destinations: DESTS (default 10^5) calls to distinct destinations
 *    the gateway has no route to ("ofi+tcp://127.a.b.c:7", a >= 100: each
 *    is parsed,
 *    cached and routed, then answered CW_NO_ROUTE at once) with
 *    limits.max_cached_dests 1024 (per gateway thread, like the address
 *    cache): the destination cache stays at its bound, the gateway's RSS grows
 * by less than 8 MiB over the flood after the first 4096, and a normal client
 * is answered throughout. (Not shm names nobody listens on: na-shm keeps a
 * record of every name it was asked for, in a list, which is the plugin's own
 * hostile key problem, left to the plugins' issue.) With CW_GW_THREADS=N the
 * gateway runs N threads.  Prints TAP; exits 1 on the first failure (after
 * stopping the gateway).
 *
 * Memcheck (README.md, "Memcheck"): with CW_VALGRIND (a valgrind command
 * line with --error-exitcode), causewayd runs under it, its report in
 * gw.vg.log beside its log, which must say "0 errors" when it has exited;
 * the waits are CW_WAIT_SCALE times longer, and the RSS bound of case 3
 * is not judged (valgrind's own memory counts in the process's RSS).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <causeway/causeway.h>

#define NSRC          40
#define MAX_SOURCES   16
#define NLOAD         8 /* clients of cases 2 and 3: within max_sources */
#define NSRV          128
#define NET_PER_CTX   8 /* cw_network_open's limit per context */
#define NSRV_CTX      (NSRV / NET_PER_CTX)
#define MAX_ADDRS     32
#define MAX_DESTS     1024
#define WINDOW        64
#define RSS_SLACK_KIB (8 * 1024)

static char tmpdir[64], cfg_path[128], log_path[128], vg_log[160];
static const char *vg; /* $CW_VALGRIND, or NULL */
static char gw_shm[CW_URI_MAX], admin[192];
static const char *causewayd, *cwctl;
static pid_t gw_pid = -1;
static unsigned ntests, nthreads = 1;

static cw_context_t *srv_ctx[NSRV_CTX], *cli_ctx[NSRC];
static char srv_uri[NSRV][CW_URI_MAX];
static cw_rpc_id_t echo_id;

static bool hold; /* the server keeps requests */
static cw_handle_t *held[NSRC];
static unsigned nheld;

static void gw_stop(void)
{
    int st;

    if (gw_pid <= 0)
        return;
    kill(gw_pid, SIGKILL);
    waitpid(gw_pid, &st, 0);
    gw_pid = -1;
}

static void contexts_destroy(void)
{
    for (unsigned i = 0; i < NSRC; i++) {
        cw_context_destroy(cli_ctx[i]);
        cli_ctx[i] = NULL;
    }
    for (unsigned i = 0; i < NSRV_CTX; i++) {
        cw_context_destroy(srv_ctx[i]);
        srv_ctx[i] = NULL;
    }
}

static void fail(const char *fmt, ...)
{
    va_list ap;

    printf("not ok %u - ", ++ntests);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n# gateway log: %s\n", log_path);
    fflush(stdout);
    gw_stop();
    contexts_destroy();
    exit(1);
}

static void pass(const char *fmt, ...)
{
    va_list ap;

    printf("ok %u - ", ++ntests);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A wait of @p ms, CW_WAIT_SCALE times longer (under memcheck). */
static uint64_t scaled(uint64_t ms)
{
    const char *s = getenv("CW_WAIT_SCALE");
    unsigned long k = s != NULL ? strtoul(s, NULL, 10) : 1;

    return ms * (k > 0 ? k : 1);
}

/* ---- the gateway ----------------------------------------------------------
 */

static void gw_start(void)
{
    int pfd[2];
    FILE *f;
    char buf[1024], k[64], v[192];
    size_t len = 0;
    struct pollfd p;
    uint64_t deadline = now_ms() + scaled(60000);
    bool ready = false;

    snprintf(tmpdir, sizeof(tmpdir), "/tmp/cw-gwkeys.XXXXXX");
    if (mkdtemp(tmpdir) == NULL)
        fail("mkdtemp: %s", strerror(errno));
    snprintf(cfg_path, sizeof(cfg_path), "%s/gw.yaml", tmpdir);
    snprintf(log_path, sizeof(log_path), "%s/gw.log", tmpdir);
    snprintf(vg_log, sizeof(vg_log), "%s/gw.vg.log", tmpdir);
    f = fopen(cfg_path, "w");
    if (f == NULL)
        fail("%s: %s", cfg_path, strerror(errno));
    fprintf(f,
            "gateway: { name: keysgw, admin: \"127.0.0.1:0\", threads: %u }\n"
            "networks:\n"
            "  - { name: shm0, address: \"shm://cwkeys-%d-gw\" }\n"
            "limits: { max_sources: %u, max_cached_addrs: %u, "
            "max_cached_dests: %u }\n"
            "health: { enabled: false }\n",
            nthreads, (int)getpid(), MAX_SOURCES, MAX_ADDRS, MAX_DESTS);
    fclose(f);
    if (pipe2(pfd, O_CLOEXEC) != 0)
        fail("pipe2: %s", strerror(errno));
    gw_pid = fork();
    if (gw_pid < 0)
        fail("fork: %s", strerror(errno));
    if (gw_pid == 0) {
        char *const argv[] = {(char *)"causewayd",  (char *)"-c", cfg_path,
                              (char *)"--ready-fd", (char *)"3",  NULL};
        const char *asan = getenv("ASAN_OPTIONS");
        char asan_buf[512];
        int lfd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        /* The RSS check measures the gateway's own memory, not what a
         * sanitizer's quarantine keeps of what it freed. */
        snprintf(asan_buf, sizeof(asan_buf), "%s%squarantine_size_mb=4",
                 asan ? asan : "", asan && *asan ? ":" : "");
        setenv("ASAN_OPTIONS", asan_buf, 1);
        if (lfd < 0 || dup2(lfd, 2) < 0 || dup2(pfd[1], 3) < 0)
            _exit(126);
        if (vg != NULL)
            /* The command line is words, as gw_lib.sh takes it. */
            execl("/bin/sh", "sh", "-c",
                  "exec $CW_VALGRIND --log-file=\"$1\" \"$0\" -c \"$2\" "
                  "--ready-fd 3",
                  causewayd, vg_log, cfg_path, (char *)NULL);
        else
            execv(causewayd, argv);
        _exit(127);
    }
    close(pfd[1]);
    /* The ready lines: "NETWORK ADDRESS", "admin HOST:PORT", "ready". */
    p.fd = pfd[0];
    p.events = POLLIN;
    while (!ready && now_ms() < deadline) {
        char *nl;
        ssize_t n;
        if (poll(&p, 1, 1000) <= 0)
            continue;
        n = read(pfd[0], buf + len, sizeof(buf) - 1 - len);
        if (n <= 0)
            break;
        len += (size_t)n;
        buf[len] = '\0';
        while ((nl = strchr(buf, '\n')) != NULL) {
            *nl = '\0';
            if (strcmp(buf, "ready") == 0)
                ready = true;
            else if (sscanf(buf, "%63s %191s", k, v) == 2 &&
                     strcmp(k, "shm0") == 0)
                snprintf(gw_shm, sizeof(gw_shm), "%s", v);
            else if (sscanf(buf, "%63s %191s", k, v) == 2 &&
                     strcmp(k, "admin") == 0)
                snprintf(admin, sizeof(admin), "%s", v);
            len -= (size_t)(nl + 1 - buf);
            memmove(buf, nl + 1, len + 1);
        }
        if (len == sizeof(buf) - 1)
            break;
    }
    close(pfd[0]);
    if (!ready || gw_shm[0] == '\0' || admin[0] == '\0')
        fail("causewayd did not start");
}

/* SIGTERM: the gateway drains (nothing is in flight) and must exit 0
 * without a sanitizer report in its log. */
static void gw_stop_clean(void)
{
    uint64_t deadline = now_ms() + scaled(30000);
    char line[512];
    pid_t r = 0;
    int st = 0;
    FILE *f;

    kill(gw_pid, SIGTERM);
    while ((r = waitpid(gw_pid, &st, WNOHANG)) == 0 && now_ms() < deadline)
        poll(NULL, 0, 10);
    if (r != gw_pid)
        fail("causewayd did not exit within %u s of SIGTERM",
             (unsigned)(scaled(30000) / 1000));
    gw_pid = -1;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail("causewayd ended with status 0x%x%s%s", st,
             vg != NULL ? "; memcheck report: " : "", vg != NULL ? vg_log : "");
    f = fopen(log_path, "r");
    if (f == NULL)
        fail("%s: %s", log_path, strerror(errno));
    while (fgets(line, sizeof(line), f) != NULL)
        if (strstr(line, "Sanitizer") != NULL ||
            strstr(line, "runtime error") != NULL) {
            fclose(f);
            fail("causewayd log has a sanitizer report: %s", line);
        }
    fclose(f);
    pass("causewayd exited 0 on SIGTERM, no sanitizer report");
    if (vg != NULL) {
        bool clean = false;

        f = fopen(vg_log, "r");
        if (f == NULL)
            fail("%s: %s", vg_log, strerror(errno));
        while (fgets(line, sizeof(line), f) != NULL)
            if (strstr(line, "ERROR SUMMARY: 0 errors") != NULL)
                clean = true;
        fclose(f);
        if (!clean)
            fail("memcheck: causewayd's report %s does not say 0 errors",
                 vg_log);
        pass("memcheck: causewayd's report says 0 errors");
    }
}

/* A number from `cwctl stats --json` (@p metric false: "key":N) or
 * `cwctl metrics` (@p metric true: a sample line "key N"). */
static uint64_t cwctl_num(bool metric, const char *key)
{
    char cmd[256], buf[65536], pat[160];
    size_t n;
    FILE *p;
    const char *at;

    snprintf(cmd, sizeof(cmd), "'%s' --admin %s %s", cwctl, admin,
             metric ? "metrics" : "stats --json");
    p = popen(cmd, "r");
    if (p == NULL)
        fail("popen(%s): %s", cmd, strerror(errno));
    n = fread(buf, 1, sizeof(buf) - 1, p);
    buf[n] = '\0';
    if (pclose(p) != 0)
        fail("%s failed: %s", cmd, buf);
    snprintf(pat, sizeof(pat), metric ? "\n%s " : "\"%s\":", key);
    at = strstr(buf, pat);
    if (at == NULL)
        fail("no %s in %s: %s", key, metric ? "metrics" : "stats", buf);
    return strtoull(at + strlen(pat), NULL, 10);
}

static uint64_t stat_of(const char *key)
{
    return cwctl_num(false, key);
}

/* /metrics says what stats says. */
static void metrics_match(const char *metric, const char *key)
{
    uint64_t m = cwctl_num(true, metric), v = stat_of(key);

    if (m != v)
        fail("metrics %s is %" PRIu64 ", stats %s %" PRIu64, metric, m, key, v);
}

static uint64_t gw_rss_kib(void)
{
    char path[64], line[256];
    unsigned long long kib = 0;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)gw_pid);
    f = fopen(path, "r");
    if (f == NULL)
        fail("%s: %s", path, strerror(errno));
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "VmRSS: %llu", &kib) == 1)
            break;
    fclose(f);
    if (kib == 0)
        fail("no VmRSS in %s", path);
    return kib;
}

/* ---- clients and server ---------------------------------------------------
 */

static void pump(void)
{
    for (unsigned i = 0; i < NSRV_CTX; i++) {
        cw_progress(srv_ctx[i], 0);
        cw_trigger(srv_ctx[i], 0, 0, NULL);
    }
    for (unsigned i = 0; i < NSRC; i++) {
        cw_progress(cli_ctx[i], 0);
        cw_trigger(cli_ctx[i], 0, 0, NULL);
    }
}

static void h_echo(cw_handle_t *h, void *arg)
{
    (void)arg;
    if (hold && nheld < NSRC) {
        held[nheld++] = h;
        return;
    }
    cw_respond(h, CW_OK, NULL, NULL);
    cw_handle_release(h);
}

struct call {
    unsigned done;
    unsigned n_ok, n_busy, n_other;
};

static void call_cb(cw_handle_t *h, cw_status_t st, void *arg)
{
    struct call *c = arg;

    (void)h;
    c->done++;
    if (st == CW_OK)
        c->n_ok++;
    else if (st == CW_BUSY)
        c->n_busy++;
    else
        c->n_other++;
    cw_handle_release(h);
}

/* Call echo at @p dest (through the gateway) from client @p cli. */
static void call(unsigned cli, const char *dest, struct call *c)
{
    char path[2 * CW_URI_MAX + 2];
    cw_addr_t *a;
    cw_handle_t *h;
    cw_status_t st;

    snprintf(path, sizeof(path), "%s@%s", dest, gw_shm);
    st = cw_addr_lookup(cli_ctx[cli], path, &a);
    if (st != CW_OK)
        fail("cw_addr_lookup(%s): %s", path, cw_status_str(st));
    st = cw_handle_create(cli_ctx[cli], a, echo_id, &h);
    cw_addr_free(a);
    if (st == CW_OK)
        st = cw_forward(h, 20000, call_cb, c);
    if (st != CW_OK)
        fail("calling %s: %s", path, cw_status_str(st));
}

/* Pump until @p c has @p n completions (bounded). */
static void wait_done(struct call *c, unsigned n, const char *what)
{
    uint64_t deadline = now_ms() + scaled(60000);

    while (c->done < n && now_ms() < deadline)
        pump();
    if (c->done < n)
        fail("%s: %u of %u calls completed", what, c->done, n);
}

/* Pump until stats key @p key equals @p want (bounded). */
static void wait_stat(const char *key, uint64_t want)
{
    uint64_t deadline = now_ms() + scaled(30000), v;

    while ((v = stat_of(key)) != want && now_ms() < deadline) {
        uint64_t until = now_ms() + 20;
        while (now_ms() < until)
            pump();
    }
    if (v != want)
        fail("%s stays %" PRIu64 ", not %" PRIu64, key, v, want);
}

static void setup(void)
{
    struct cw_context_opts o;
    cw_network_t *net;
    cw_status_t st;

    cw_context_opts_init(&o);
    for (unsigned i = 0; i < NSRV_CTX; i++) {
        st = cw_context_create(&o, &srv_ctx[i]);
        if (st == CW_OK)
            st = cw_rpc_register(srv_ctx[i], "causeway.echo", h_echo, NULL,
                                 NULL, &echo_id);
        if (st != CW_OK)
            fail("server context: %s", cw_status_str(st));
    }
    for (unsigned i = 0; i < NSRV; i++) {
        char uri[CW_URI_MAX];
        snprintf(uri, sizeof(uri), "shm://cwkeys-%d-s%u", (int)getpid(), i);
        st =
            cw_network_open(srv_ctx[i / NET_PER_CTX], uri, CW_NET_LISTEN, &net);
        if (st == CW_OK)
            st = cw_network_uri(net, srv_uri[i], sizeof(srv_uri[i]));
        if (st != CW_OK)
            fail("cw_network_open(%s): %s", uri, cw_status_str(st));
    }
    for (unsigned i = 0; i < NSRC; i++) {
        char uri[CW_URI_MAX];
        snprintf(uri, sizeof(uri), "shm://cwkeys-%d-c%u", (int)getpid(), i);
        st = cw_context_create(&o, &cli_ctx[i]);
        if (st == CW_OK)
            st = cw_rpc_register(cli_ctx[i], "causeway.echo", NULL, NULL, NULL,
                                 NULL);
        if (st == CW_OK)
            st = cw_network_open(cli_ctx[i], uri, 0, &net);
        if (st != CW_OK)
            fail("client %u: %s", i, cw_status_str(st));
    }
}

/* ---- the cases ------------------------------------------------------------
 */

static void case_sources(void)
{
    struct call c = {0}, c2 = {0}, each[NSRC];
    uint64_t deadline = now_ms() + scaled(60000);
    unsigned refused = NSRC;

    memset(each, 0, sizeof(each));
    hold = true;
    for (unsigned i = 0; i < NSRC; i++)
        call(i, srv_uri[0], &each[i]);
    /* The refused answer at once; the admitted wait at the server. */
    for (;;) {
        memset(&c, 0, sizeof(c));
        for (unsigned i = 0; i < NSRC; i++) {
            c.done += each[i].done;
            c.n_ok += each[i].n_ok;
            c.n_busy += each[i].n_busy;
            if (each[i].n_busy != 0)
                refused = i;
        }
        if ((c.done >= NSRC - MAX_SOURCES && nheld >= MAX_SOURCES) ||
            now_ms() >= deadline)
            break;
        pump();
    }
    if (nheld != MAX_SOURCES || c.n_busy != NSRC - MAX_SOURCES ||
        c.done != NSRC - MAX_SOURCES)
        fail("sources: %u held at the server, %u busy, %u done", nheld,
             c.n_busy, c.done);
    if (stat_of("sources") != MAX_SOURCES ||
        stat_of("sources_refused") != NSRC - MAX_SOURCES)
        fail("sources: gateway counts %" PRIu64 " sources, %" PRIu64 " refused",
             stat_of("sources"), stat_of("sources_refused"));
    pass("sources: %u of %u admitted at max_sources, %u refused CW_BUSY "
         "and counted",
         MAX_SOURCES, NSRC, NSRC - MAX_SOURCES);
    hold = false;
    for (unsigned i = 0; i < nheld; i++) {
        cw_respond(held[i], CW_OK, NULL, NULL);
        cw_handle_release(held[i]);
    }
    nheld = 0;
    while (c.done < NSRC && now_ms() < deadline) {
        pump();
        c.done = c.n_ok = 0;
        for (unsigned i = 0; i < NSRC; i++) {
            c.done += each[i].done;
            c.n_ok += each[i].n_ok;
        }
    }
    if (c.done != NSRC || c.n_ok != MAX_SOURCES)
        fail("sources: %u of the held calls succeeded, %u of %u done", c.n_ok,
             c.done, NSRC);
    wait_stat("sources", 0);
    call(refused, srv_uri[0], &c2);
    wait_done(&c2, 1, "refused source again");
    if (c2.n_ok != 1)
        fail("a source refused before is not served once there is room");
    pass("sources: held calls answered, table empty, a refused source is "
         "served now");
}

static void case_addrs(void)
{
    struct call c = {0};
    unsigned sent = 0;
    uint64_t cached, evicted;

    /* Each address twice, WINDOW calls in flight. */
    while (c.done < 2 * NSRV) {
        while (sent < 2 * NSRV && sent - c.done < WINDOW) {
            call(sent % NLOAD, srv_uri[sent % NSRV], &c);
            sent++;
        }
        pump();
    }
    if (c.n_ok != 2 * NSRV)
        fail("addrs: %u of %u calls to live servers succeeded (%u busy, "
             "%u other)",
             c.n_ok, 2 * NSRV, c.n_busy, c.n_other);
    cached = stat_of("cached_addrs");
    evicted = stat_of("cached_addrs_evicted");
    if (cached > (uint64_t)MAX_ADDRS * nthreads || cached == 0 ||
        evicted < NSRV - (uint64_t)MAX_ADDRS * nthreads)
        fail("addrs: %" PRIu64 " cached (bound %u a thread), %" PRIu64
             " evicted",
             cached, MAX_ADDRS, evicted);
    pass("addrs: %u calls to %u addresses all answered; %" PRIu64
         " cached (bound %u a thread), %" PRIu64 " evicted",
         2 * NSRV, NSRV, cached, MAX_ADDRS, evicted);
}

static void case_dests(unsigned ndests)
{
    struct call c = {0}, normal = {0};
    unsigned sent = 0, nnormal = 0;
    uint64_t rss0 = 0, rss1, cached, evicted;
    char dest[CW_URI_MAX];

    while (c.done < ndests) {
        while (sent < ndests && sent - c.done < WINDOW) {
            snprintf(dest, sizeof(dest), "ofi+tcp://127.%u.%u.%u:7",
                     100 + ((sent >> 16) & 127), (sent >> 8) & 255, sent & 255);
            call(sent % NLOAD, dest, &c);
            sent++;
            if (sent % 1000 == 0) {
                call(0, srv_uri[0], &normal);
                nnormal++;
            }
        }
        pump();
        if (rss0 == 0 && c.done >= 4 * MAX_DESTS)
            rss0 = gw_rss_kib();
    }
    wait_done(&normal, nnormal, "normal client during the flood");
    rss1 = gw_rss_kib();
    if (c.n_other != ndests)
        fail("dests: %u of %u calls to unroutable destinations failed",
             c.n_other, ndests);
    if (normal.n_ok != nnormal)
        fail("dests: the normal client got %u of %u answers during the "
             "flood",
             normal.n_ok, nnormal);
    pass("dests: %u calls to distinct unroutable destinations failed, the "
         "normal client got all %u answers meanwhile",
         ndests, nnormal);
    cached = stat_of("cached_dests");
    evicted = stat_of("cached_dests_evicted");
    if (cached > (uint64_t)MAX_DESTS * nthreads ||
        evicted < ndests - (uint64_t)MAX_DESTS * nthreads)
        fail("dests: %" PRIu64 " cached (bound %u a thread), %" PRIu64
             " evicted",
             cached, MAX_DESTS, evicted);
    pass("dests: %" PRIu64 " cached (bound %u a thread), %" PRIu64 " evicted",
         cached, MAX_DESTS, evicted);
    metrics_match("causeway_gateway_cache_entries{cache=\"addrs\"}",
                  "cached_addrs");
    metrics_match("causeway_gateway_cache_entries{cache=\"dests\"}",
                  "cached_dests");
    metrics_match("causeway_gateway_cache_entries{cache=\"sources\"}",
                  "sources");
    metrics_match("causeway_gateway_cache_evictions_total{cache=\"addrs\"}",
                  "cached_addrs_evicted");
    metrics_match("causeway_gateway_cache_evictions_total{cache=\"dests\"}",
                  "cached_dests_evicted");
    metrics_match("causeway_gateway_sources_refused_total", "sources_refused");
    pass("metrics: cache entries, evictions and refused sources as in stats");
    if (vg != NULL) {
        printf("# dests: gateway RSS %" PRIu64 " -> %" PRIu64
               " KiB, not judged under memcheck\n",
               rss0, rss1);
        return;
    }
    if (rss1 > rss0 + RSS_SLACK_KIB)
        fail("dests: gateway RSS grew from %" PRIu64 " to %" PRIu64
             " KiB over the flood",
             rss0, rss1);
    pass("dests: gateway RSS %" PRIu64 " KiB after %u destinations, %" PRIu64
         " KiB after %u (allowed growth %u KiB)",
         rss0, 4 * MAX_DESTS, rss1, ndests, RSS_SLACK_KIB);
}

int main(int argc, char **argv)
{
    unsigned ndests = 100000;
    const char *th = getenv("CW_GW_THREADS");

    if (argc < 3) {
        fprintf(stderr, "usage: %s CAUSEWAYD CWCTL [DESTS]\n", argv[0]);
        return 2;
    }
    causewayd = argv[1];
    cwctl = argv[2];
    vg = getenv("CW_VALGRIND");
    if (vg != NULL && *vg == '\0')
        vg = NULL;
    if (argc > 3)
        ndests = (unsigned)strtoul(argv[3], NULL, 10);
    if (th != NULL && *th != '\0')
        nthreads = (unsigned)strtoul(th, NULL, 10);
    if (nthreads == 0)
        nthreads = 1;
    gw_start();
    setup();
    case_sources();
    case_addrs();
    case_dests(ndests);
    contexts_destroy();
    gw_stop_clean();
    printf("1..%u\n", ntests);
    unlink(cfg_path);
    unlink(log_path);
    unlink(vg_log);
    rmdir(tmpdir);
    return 0;
}
