/* causewayd command line: configuration commands and the run mode. */
#include "cli_config.h"
#include "gateway.h"

#include <causeway/config.h>
#include <causeway/log.h>

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#ifndef CAUSEWAYD_VERSION
#define CAUSEWAYD_VERSION "unknown"
#endif

#define MAX_CONFIGS 64

enum {
    OPT_CHECK = 256,
    OPT_DUMP,
    OPT_EXPLAIN,
    OPT_LOG_LEVEL,
    OPT_VERSION,
    OPT_CLIENT,
    OPT_SCHEMA,
    OPT_READY_FD,
    OPT_DEMO,
    OPT_PROBE,
};

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: causewayd -c FILE [--log-level LEVEL]       run the gateway\n"
        "       causewayd --check [--probe] -c FILE [FILE...]  validate "
        "each file;\n"
        "                 with several also check them together (loops, "
        "unreachable\n"
        "                 next hops, missing return routes)\n"
        "       causewayd --dump -c FILE                   normalized "
        "config, defaults filled in\n"
        "       causewayd --explain ADDR -c FILE           which route "
        "carries ADDR, and why\n"
        "       causewayd --demo [--dump]                  two-fabric "
        "demo\n"
        "\n"
        "options:\n"
        "  -c, --config FILE    configuration file (--check takes several: "
        "-c A B, -c A -c B)\n"
        "      --probe          --check: also open each network's "
        "plugin and protocol\n"
        "                       here (on port 0), as the gateway would "
        "at start\n"
        "      --client         FILE is a client routes file (routes "
        "only)\n"
        "      --log-level L    error|warn|info|debug|trace|none\n"
        "      --ready-fd N     run mode: write \"<network> <uri>\" "
        "lines to fd N when up\n"
        "      --schema         print the configuration reference "
        "(Markdown)\n"
        "  -h, --help           this text\n"
        "      --version        print the version\n"
        "\n"
        "exit status: 0 ok; 1 --explain found no route; 2 invalid "
        "configuration or usage\n");
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"config", required_argument, NULL, 'c'},
        {"check", no_argument, NULL, OPT_CHECK},
        {"dump", no_argument, NULL, OPT_DUMP},
        {"explain", required_argument, NULL, OPT_EXPLAIN},
        {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
        {"client", no_argument, NULL, OPT_CLIENT},
        {"schema", no_argument, NULL, OPT_SCHEMA},
        {"ready-fd", required_argument, NULL, OPT_READY_FD},
        {"demo", no_argument, NULL, OPT_DEMO},
        {"probe", no_argument, NULL, OPT_PROBE},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    const char *configs[MAX_CONFIGS];
    size_t nconfigs = 0;
    bool check = false, dump = false, client = false, schema = false;
    bool demo = false, probe = false;
    const char *explain = NULL;
    int log_level = -1;
    int ready_fd = -1;
    int opt;

    cw_log_init();
    while ((opt = getopt_long(argc, argv, "c:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            if (nconfigs == MAX_CONFIGS) {
                fprintf(stderr, "causewayd: at most %d -c files\n",
                        MAX_CONFIGS);
                return 2;
            }
            configs[nconfigs++] = optarg;
            break;
        case OPT_CHECK:
            check = true;
            break;
        case OPT_DUMP:
            dump = true;
            break;
        case OPT_EXPLAIN:
            explain = optarg;
            break;
        case OPT_CLIENT:
            client = true;
            break;
        case OPT_SCHEMA:
            schema = true;
            break;
        case OPT_DEMO:
            demo = true;
            break;
        case OPT_PROBE:
            probe = true;
            break;
        case OPT_READY_FD: {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end != '\0' || v < 0 || v > 65535) {
                fprintf(stderr,
                        "causewayd: --ready-fd: expected a file "
                        "descriptor number, got '%s'\n",
                        optarg);
                return 2;
            }
            ready_fd = (int)v;
            break;
        }
        case OPT_LOG_LEVEL:
            log_level = cw_log_level_parse(optarg);
            if (log_level < 0) {
                fprintf(stderr,
                        "causewayd: --log-level: expected error, "
                        "warn, info, debug, trace or none, got '%s'\n",
                        optarg);
                return 2;
            }
            cw_log_set_level(log_level);
            break;
        case 'h':
            usage(stdout);
            return 0;
        case OPT_VERSION:
            printf("causewayd %s\n", CAUSEWAYD_VERSION);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    /* "--check -c a.yaml b.yaml": files after the options are more -c
     * files.  Only --check reads several. */
    if (optind < argc && check && nconfigs > 0) {
        for (; optind < argc; optind++) {
            if (nconfigs == MAX_CONFIGS) {
                fprintf(stderr,
                        "causewayd: at most %d configuration "
                        "files\n",
                        MAX_CONFIGS);
                return 2;
            }
            configs[nconfigs++] = argv[optind];
        }
    }
    if (optind < argc) {
        fprintf(stderr, "causewayd: unexpected argument '%s'%s\n", argv[optind],
                check ? ": give files with -c (--check -c A "
                        "B)"
                      : "; several files are for --check (causewayd --check "
                        "-c A B)");
        usage(stderr);
        return 2;
    }
    if (probe && !check) {
        fprintf(stderr, "causewayd: --probe goes with --check\n");
        return 2;
    }
    if (probe && client) {
        fprintf(stderr, "causewayd: --probe: a client routes file has no "
                        "networks to open\n");
        return 2;
    }
    if (schema) {
        cw_config_schema_markdown(stdout);
        return 0;
    }
    if ((int)check + (int)(dump && !demo) + (int)(explain != NULL) + (int)demo >
        1) {
        fprintf(stderr, "causewayd: give only one of --check, --dump, "
                        "--explain, --demo\n");
        return 2;
    }
    if (demo) {
        return cw_gateway_demo(dump);
    }
    if (nconfigs == 0) {
        fprintf(stderr, "causewayd: no configuration: give -c FILE\n");
        usage(stderr);
        return 2;
    }
    if (check)
        return cw_cli_check(configs, nconfigs, client, probe, stdout, stderr);
    if (nconfigs > 1) {
        fprintf(stderr, "causewayd: several -c files are only accepted with "
                        "--check\n");
        return 2;
    }
    if (dump)
        return cw_cli_dump(configs[0], client, stdout, stderr);
    if (explain)
        return cw_cli_explain(configs[0], client, explain, stdout, stderr);
    if (client) {
        fprintf(stderr, "causewayd: --client only applies to --check, --dump "
                        "and --explain\n");
        return 2;
    }
    {
        struct cw_config_diag *diag = cw_config_diag_new();
        struct cw_gateway_run_opts opts = {.ready_fd = ready_fd,
                                           .log_level = log_level};
        struct cw_config *cfg = NULL;
        cw_status_t st;
        int rc;

        if (diag == NULL)
            return 1;
        st = cw_config_load(configs[0], 0, diag, &cfg);
        if (st != CW_OK) {
            cw_config_diag_print(diag, stderr);
            if (cw_config_diag_count(diag) == 0)
                fprintf(stderr, "%s: %s\n", configs[0], cw_status_str(st));
            cw_config_diag_free(diag);
            return 2;
        }
        cw_config_diag_free(diag);
        /* --log-level, then CAUSEWAY_LOG_LEVEL, then the file. */
        if (log_level < 0 &&
            (getenv("CAUSEWAY_LOG_LEVEL") == NULL ||
             cw_log_level_parse(getenv("CAUSEWAY_LOG_LEVEL")) < 0))
            cw_log_set_level(cfg->gateway.log_level);
        rc = cw_gateway_main(cfg, configs[0], &opts);
        cw_config_free(cfg);
        return rc;
    }
}
