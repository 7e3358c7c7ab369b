/*
 * cwctl: talk to a running causewayd through its admin interface
 * (docs/cwctl.md).
 *
 *   cwctl [--admin HOST:PORT] status|routes|services|stats|metrics|
 *         explain ADDR|reload|drain [--json]
 */
#include <stdbool.h>

#include "admin_client.h"

#include <causeway/status.h>

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CWCTL_DEFAULT_ADMIN "127.0.0.1:9464"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: cwctl [--admin HOST:PORT] COMMAND [--json]\n"
            "commands:\n"
            "  status         gateway state, networks, counters\n"
            "  routes         routes with state and per-route counters\n"
            "  services       services, backends and their health\n"
            "  stats          totals and added-latency histograms per route\n"
            "  metrics        the counters in Prometheus text format\n"
            "  explain ADDR   which route carries ADDR, and why\n"
            "  reload         re-read the configuration (like SIGHUP)\n"
            "  drain          stop accepting RPCs, finish those in flight, "
            "exit\n"
            "options:\n"
            "  --admin A      admin address (default $CAUSEWAY_ADMIN or "
            CWCTL_DEFAULT_ADMIN ")\n"
            "  --json         JSON for scripts instead of tables\n"
            "  --timeout MS   give up after MS (default 5000)\n"
            "exit status: 0 ok, 1 the gateway refused, 2 usage, 3 cannot "
            "reach it, 4 reloaded but some changed keys need a restart\n");
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"admin", required_argument, NULL, 'a'},
        {"json", no_argument, NULL, 'j'},
        {"timeout", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const char *const commands[] = {"status",  "routes",  "services",
                                           "stats",   "metrics", "explain",
                                           "reload",  "drain"};
    const char *admin = getenv("CAUSEWAY_ADMIN");
    const char *cmd, *arg = NULL;
    char line[2560];
    unsigned timeout_ms = 5000;
    bool json = false, ok = false, known = false;
    char *body = NULL;
    cw_status_t st;
    int opt;

    if (admin == NULL || admin[0] == '\0')
        admin = CWCTL_DEFAULT_ADMIN;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'a': admin = optarg; break;
        case 'j': json = true; break;
        case 't': timeout_ms = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return 2;
    }
    cmd = argv[optind++];
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        known = known || strcmp(cmd, commands[i]) == 0;
    if (!known) {
        fprintf(stderr, "cwctl: unknown command '%s'\n", cmd);
        usage(stderr);
        return 2;
    }
    if (strcmp(cmd, "explain") == 0) {
        if (optind >= argc) {
            fprintf(stderr, "cwctl: explain needs an address\n");
            return 2;
        }
        arg = argv[optind++];
    }
    if (optind < argc) {
        fprintf(stderr, "cwctl: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (arg != NULL && strpbrk(arg, " \t\r\n") != NULL) {
        fprintf(stderr, "cwctl: an address has no white space\n");
        return 2;
    }
    snprintf(line, sizeof(line), "%s%s%s%s", cmd, arg ? " " : "",
             arg ? arg : "", json ? " json" : "");
    st = cw_admin_request(admin, line, timeout_ms, &ok, &body);
    if (st != CW_OK) {
        fprintf(stderr, "cwctl: %s: %s\n", admin, cw_status_str(st));
        return 3;
    }
    if (!ok) {
        /* A reload applied but for keys only a restart applies: 4. */
        int rc = strncmp(body, "restart needed:", 15) == 0 ? 4 : 1;

        fprintf(stderr, "cwctl: %s\n", body);
        free(body);
        return rc;
    }
    fputs(body, stdout);
    free(body);
    return 0;
}
