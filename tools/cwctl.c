/*
 * cwctl: talk to a running causewayd through its admin interface
 * (docs/cwctl.md).
 *
 *   cwctl [--admin unix:PATH|PATH|HOST:PORT] [--token-file FILE]
 *         status|routes|services|stats|metrics|peers|config|
 *         explain ADDR|reload|drain [--json]
 */
#include <stdbool.h>

#include "admin_client.h"

#include <causeway/config.h>
#include <causeway/status.h>

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *out)
{
    fprintf(out,
            "usage: cwctl [--admin ADDR] [--token-file FILE] COMMAND "
            "[--json]\n"
            "commands:\n"
            "  status         gateway state, networks, counters\n"
            "  routes         routes with state and per-route counters\n"
            "  services       services, backends and their health\n"
            "  stats          totals and added-latency histograms per route\n"
            "  metrics        the counters in Prometheus text format\n"
            "  peers          clients and next hops: in flight, last "
            "activity, health\n"
            "  config         the configuration running, its file and load "
            "time\n"
            "  explain ADDR   which route carries ADDR, and why\n"
            "  reload         re-read the configuration (like SIGHUP)\n"
            "  drain          stop accepting RPCs, finish those in flight, "
            "exit\n"
            "options:\n"
            "  --admin ADDR   unix:PATH, a PATH or HOST:PORT (default "
            "$CAUSEWAY_ADMIN, else\n"
            "                 " CW_ADMIN_SOCKET_DEFAULT
            " if it exists, else " CW_ADMIN_TCP_DEFAULT ")\n"
            "  --token-file F the TCP endpoint's token (gateway."
            "admin_token_file;\n"
            "                 default $CAUSEWAY_ADMIN_TOKEN_FILE)\n"
            "  --json         JSON for scripts instead of tables\n"
            "  --limit N      peers: rows of each kind (default 100)\n"
            "  --timeout MS   give up after MS (default 5000)\n"
            "exit status: 0 ok, 1 the gateway refused, 2 usage, 3 cannot "
            "reach it, 4 reloaded but some changed keys need a restart\n");
}

/* Where to connect when no --admin or $CAUSEWAY_ADMIN says: the shipped
 * configuration's Unix socket if there is one, else the default TCP
 * endpoint. */
static const char *default_admin(void)
{
    const char *e = getenv("CAUSEWAY_ADMIN");

    if (e != NULL && e[0] != '\0')
        return e;
    if (access(CW_ADMIN_SOCKET_DEFAULT, F_OK) == 0)
        return CW_ADMIN_SOCKET_DEFAULT;
    return CW_ADMIN_TCP_DEFAULT;
}

/* A reload's or an error's JSON body follows its ERR reason line. */
static int refused(char *body, bool json)
{
    /* A reload applied but for keys only a restart applies: 4. */
    int rc = strncmp(body, "restart needed:", 15) == 0 ? 4 : 1;
    char *nl = strchr(body, '\n');

    if (nl != NULL)
        *nl++ = '\0';
    fprintf(stderr, "cwctl: %s\n", body);
    if (json && nl != NULL && *nl == '{')
        fputs(nl, stdout);
    return rc;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"admin", required_argument, NULL, 'a'},
        {"token-file", required_argument, NULL, 'k'},
        {"json", no_argument, NULL, 'j'},
        {"limit", required_argument, NULL, 'l'},
        {"timeout", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const char *const commands[] = {
        "status", "routes", "services", "stats",  "metrics",
        "peers",  "config", "explain",  "reload", "drain"};
    const char *admin = default_admin();
    const char *token_file = getenv("CAUSEWAY_ADMIN_TOKEN_FILE");
    const char *cmd, *arg = NULL, *limit = NULL;
    char line[2560], err[512], *token = NULL, *end;
    unsigned timeout_ms = 5000;
    bool json = false, ok = false, known = false;
    char *body = NULL;
    cw_status_t st;
    int opt, rc;

    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'a':
            admin = optarg;
            break;
        case 'k':
            token_file = optarg;
            break;
        case 'j':
            json = true;
            break;
        case 'l':
            limit = optarg;
            break;
        case 't':
            timeout_ms = (unsigned)strtoul(optarg, NULL, 10);
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
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
    if (limit != NULL) {
        unsigned long v = strtoul(limit, &end, 10);
        if (strcmp(cmd, "peers") != 0 || *end != '\0' || v == 0 || v > 100000) {
            fprintf(stderr, "cwctl: --limit takes a count from 1 to 100000 "
                            "and goes with peers\n");
            return 2;
        }
        arg = limit;
    }
    if (token_file != NULL && token_file[0] != '\0' &&
        cw_admin_unix_path(admin) == NULL &&
        cw_config_read_token(token_file, &token, err, sizeof(err)) != CW_OK) {
        fprintf(stderr, "cwctl: %s\n", err);
        return 2;
    }
    snprintf(line, sizeof(line), "%s%s%s%s", cmd, arg ? " " : "",
             arg ? arg : "", json ? " json" : "");
    st = cw_admin_request(admin, token, line, timeout_ms, &ok, &body);
    if (token != NULL)
        explicit_bzero(token, strlen(token));
    free(token);
    if (st != CW_OK) {
        fprintf(stderr, "cwctl: %s: %s%s\n", admin, cw_status_str(st),
                st == CW_PERMISSION ? " (the socket file's mode or group "
                                      "does not let this user in)"
                                    : "");
        return 3;
    }
    if (!ok) {
        rc = refused(body, json);
        free(body);
        return rc;
    }
    fputs(body, stdout);
    free(body);
    return 0;
}
