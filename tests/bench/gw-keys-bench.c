/*
 * Client of gw-keys-bench.sh: N echo calls through a gateway to K distinct
 * destinations it has no route to (each parsed, cached and routed by the
 * gateway, then answered CW_NO_ROUTE), K at most N, WINDOW in flight.
 *
 *   gw-keys-bench GATEWAY_SHM_URI N K
 *
 * Call i goes to "ofi+tcp://127.a.b.c:7 (a from 100 up)@GATEWAY", a.b.c the
 * bytes of i % K (K at most 2^24).  Prints "calls N keys K ok A failed B" and
 * exits 0 when every call completed (none may succeed), 1 otherwise.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <causeway/causeway.h>

#define WINDOW 32

static unsigned done, n_ok, n_failed;

static void cb(cw_handle_t *h, cw_status_t st, void *arg)
{
    (void)arg;
    done++;
    if (st == CW_OK)
        n_ok++;
    else
        n_failed++;
    cw_handle_release(h);
}

static uint64_t now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec;
}

int main(int argc, char **argv)
{
    cw_context_t *ctx = NULL;
    cw_rpc_id_t id;
    unsigned n, k, sent = 0;
    uint64_t deadline;
    char path[2 * CW_URI_MAX + 2];
    cw_status_t st;
    int rc = 1;

    if (argc != 4) {
        fprintf(stderr, "usage: %s GATEWAY_SHM_URI N K\n", argv[0]);
        return 2;
    }
    n = (unsigned)strtoul(argv[2], NULL, 10);
    k = (unsigned)strtoul(argv[3], NULL, 10);
    if (n == 0 || k == 0 || k > n || k > (1u << 24)) {
        fprintf(stderr, "need 0 < K <= N, K <= 2^24\n");
        return 2;
    }
    st = cw_context_create(NULL, &ctx);
    if (st == CW_OK)
        st = cw_rpc_register(ctx, "causeway.echo", NULL, NULL, NULL, &id);
    if (st != CW_OK) {
        fprintf(stderr, "context: %s\n", cw_status_str(st));
        goto out;
    }
    deadline = now_s() + 3600;
    while (done < n && now_s() < deadline) {
        while (sent < n && sent - done < WINDOW) {
            cw_addr_t *a;
            cw_handle_t *h;
            unsigned key = sent % k;
            snprintf(path, sizeof(path), "ofi+tcp://127.%u.%u.%u:7@%s",
                     100 + ((key >> 16) & 127), (key >> 8) & 255, key & 255,
                     argv[1]);
            st = cw_addr_lookup(ctx, path, &a);
            if (st != CW_OK) {
                fprintf(stderr, "cw_addr_lookup(%s): %s\n", path,
                        cw_status_str(st));
                goto out;
            }
            st = cw_handle_create(ctx, a, id, &h);
            cw_addr_free(a);
            if (st == CW_OK)
                st = cw_forward(h, 30000, cb, NULL);
            if (st != CW_OK) {
                fprintf(stderr, "forward: %s\n", cw_status_str(st));
                goto out;
            }
            sent++;
        }
        cw_progress(ctx, 1);
        cw_trigger(ctx, 0, 0, NULL);
    }
    printf("calls %u keys %u ok %u failed %u\n", n, k, n_ok, n_failed);
    rc = done == n && n_ok == 0 ? 0 : 1;
out:
    /* Calls still in flight (an error above) complete CW_CANCELED here. */
    cw_context_destroy(ctx);
    return rc;
}
