/*
 * cw-info: which plugins this installation has (their files, the network
 * libraries they run with and what those find: providers, transports,
 * devices), which protocols work on this machine, and what each instance
 * can do (eager limits, RMA, wait fd).
 *
 *   cw-info [-v] [--json] [URI...]      (options and URIs in any order)
 *
 * Without URIs it probes a default set (shm, ofi+tcp, ofi+shm, ofi+sockets,
 * ofi+verbs, ofi+cxi, ucx+tcp, verbs).
 */
#include "cli_json.h"

#include <causeway/causeway.h>
#include <causeway/log.h>
#include <causeway/na.h>

#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const default_uris[] = {
    "shm://",
    "ofi+tcp://127.0.0.1:0",
    "ofi+shm://",
    "ofi+sockets://127.0.0.1:0",
    "ofi+verbs://",
    "ofi+cxi://",
    "ucx+tcp://127.0.0.1:0",
    "verbs://",
};

/* What ops->describe reported, by key, each value once. */
enum { FACT_LIBRARY, FACT_PROVIDER, FACT_TRANSPORT, FACT_DEVICE, FACT_KINDS };
static const char *const fact_keys[FACT_KINDS] = {
    CW_NA_DESCRIBE_LIBRARY,
    CW_NA_DESCRIBE_PROVIDER,
    CW_NA_DESCRIBE_TRANSPORT,
    CW_NA_DESCRIBE_DEVICE,
};
static const char *const fact_json[FACT_KINDS] = {
    "libraries",
    "providers",
    "transports",
    "devices",
};
static const char *const fact_label[FACT_KINDS] = {
    "library",
    "providers",
    "transports",
    "devices",
};

struct facts {
    char **v[FACT_KINDS];
    size_t n[FACT_KINDS];
    bool nomem;
};

static void facts_add(void *arg, const char *key, const char *value)
{
    struct facts *f = arg;
    char **grown;
    int k;

    for (k = 0; k < FACT_KINDS && strcmp(key, fact_keys[k]) != 0; k++)
        ;
    if (k == FACT_KINDS || value == NULL)
        return; /* a key this cw-info does not know */
    for (size_t i = 0; i < f->n[k]; i++)
        if (strcmp(f->v[k][i], value) == 0)
            return;
    grown = realloc(f->v[k], (f->n[k] + 1) * sizeof(*grown));
    if (grown == NULL) {
        f->nomem = true;
        return;
    }
    f->v[k] = grown;
    f->v[k][f->n[k]] = strdup(value);
    if (f->v[k][f->n[k]] == NULL) {
        f->nomem = true;
        return;
    }
    f->n[k]++;
}

static void facts_free(struct facts *f)
{
    for (int k = 0; k < FACT_KINDS; k++) {
        for (size_t i = 0; i < f->n[k]; i++)
            free(f->v[k][i]);
        free(f->v[k]);
    }
}

static void plugin_text(const char *name, const struct cw_na_plugin *p,
                        const char *path, const struct facts *f, cw_status_t st)
{
    printf("  %-8s %s\n", name, p && p->description ? p->description : "");
    printf("  %-8s   file: %s\n", "", path[0] ? path : "(in the process)");
    if (st == CW_UNSUPPORTED)
        printf("  %-8s   (reports no network library: it uses none, or "
               "predates describing itself)\n",
               "");
    else if (st != CW_OK)
        printf("  %-8s   cannot ask its library: %s\n", "", cw_status_str(st));
    for (int k = 0; k < FACT_KINDS; k++) {
        if (f->n[k] == 0)
            continue;
        printf("  %-8s   %s:", "", fact_label[k]);
        for (size_t i = 0; i < f->n[k]; i++)
            printf("%s %s", i ? "," : "", f->v[k][i]);
        printf("\n");
    }
    if (st == CW_OK && f->n[FACT_DEVICE] == 0)
        printf("  %-8s   devices: none found\n", "");
}

static void plugin_json(const char *name, const struct cw_na_plugin *p,
                        const char *path, const struct facts *f, cw_status_t st)
{
    printf("{\"name\":");
    cli_json_str(stdout, name);
    printf(",\"description\":");
    cli_json_str(stdout, p ? p->description : NULL);
    printf(",\"path\":");
    cli_json_str(stdout, path[0] ? path : NULL);
    printf(",\"describe\":");
    cli_json_str(stdout, st == CW_OK ? "ok" : cw_status_name(st));
    for (int k = 0; k < FACT_KINDS; k++) {
        printf(",\"%s\":[", fact_json[k]);
        for (size_t i = 0; i < f->n[k]; i++) {
            printf("%s", i ? "," : "");
            cli_json_str(stdout, f->v[k][i]);
        }
        printf("]");
    }
    printf("}");
}

/* Each registered plugin: its file and what it describes. */
static int plugins(bool json)
{
    char list[256] = "";
    char path[PATH_MAX];
    int first = 1;

    if (cw_plugins_list(list, sizeof(list)) != CW_OK) {
        fprintf(stderr, "cw-info: cannot list the plugins\n");
        return 1;
    }
    if (!json)
        printf("plugins: %s\n", list);
    for (char *name = strtok(list, ","); name; name = strtok(NULL, ",")) {
        const struct cw_na_plugin *p = cw_plugins_find(name);
        struct facts f = {0};
        cw_status_t st;

        if (cw_plugins_path(name, path, sizeof(path)) != CW_OK)
            path[0] = '\0';
        st = cw_plugins_describe(name, facts_add, &f);
        if (f.nomem) {
            facts_free(&f);
            fprintf(stderr, "cw-info: out of memory\n");
            return 1;
        }
        if (json) {
            printf("%s", first ? "" : ",");
            plugin_json(name, p, path, &f, st);
        } else {
            plugin_text(name, p, path, &f, st);
        }
        first = 0;
        facts_free(&f);
    }
    return 0;
}

/* What one put or get may carry: the caps' max_rma_size, 0 meaning the
 * plugin takes any size in one operation. */
static void rma_text(const struct cw_na_caps *caps)
{
    if (!(caps->flags & CW_NA_CAP_RMA)) {
        printf("RMA no");
        return;
    }
    if (caps->max_rma_size == 0)
        printf("RMA yes (one put/get of any size");
    else
        printf("RMA yes (one put/get up to %zu B, larger ones split",
               caps->max_rma_size);
    printf(", %u segments per memory handle)", caps->max_segments);
}

static int probe(const char *uri, bool json, bool first)
{
    cw_na_t *na;
    cw_na_addr_t *self;
    char buf[512] = "?";
    const struct cw_na_caps *caps;
    bool self_ok = false;
    cw_status_t st = cw_na_open(uri, CW_NA_LISTEN, NULL, &na);

    if (st != CW_OK) {
        if (json) {
            printf("%s{\"uri\":", first ? "" : ",");
            cli_json_str(stdout, uri);
            printf(",\"ok\":false,\"status\":\"%s\",\"error\":",
                   cw_status_name(st));
            cli_json_str(stdout, cw_status_str(st));
            printf("}");
        } else {
            printf("  %-28s unavailable: %s\n", uri, cw_status_str(st));
        }
        return 1;
    }
    caps = cw_na_caps(na);
    if (cw_na_addr_self(na, &self) == CW_OK) {
        size_t len = sizeof(buf);
        self_ok = cw_na_addr_to_string(na, self, buf, len) == CW_OK;
        cw_na_addr_free(na, self);
    }
    if (json) {
        printf("%s{\"uri\":", first ? "" : ",");
        cli_json_str(stdout, uri);
        printf(",\"ok\":true,\"plugin\":");
        cli_json_str(stdout, cw_na_plugin_name(na));
        printf(",\"self\":");
        cli_json_str(stdout, self_ok ? buf : NULL);
        printf(",\"max_unexpected_size\":%zu,\"max_expected_size\":%zu,"
               "\"max_tag\":%u,\"rma\":%s,\"max_rma_size\":",
               caps->max_unexpected_size, caps->max_expected_size,
               caps->max_tag, caps->flags & CW_NA_CAP_RMA ? "true" : "false");
        if (caps->max_rma_size == 0)
            printf("null");
        else
            printf("%zu", caps->max_rma_size);
        printf(",\"max_segments\":%u,\"wait_fd\":%s,\"same_node\":%s}",
               caps->max_segments,
               cw_na_get_wait_fd(na) >= 0 ? "true" : "false",
               caps->flags & CW_NA_CAP_SAME_NODE ? "true" : "false");
    } else {
        printf("  %-28s ok: self %s\n", uri, self_ok ? buf : "?");
        printf("  %-28s     eager %zu B unexpected / %zu B expected, max tag "
               "%#x, ",
               "", caps->max_unexpected_size, caps->max_expected_size,
               caps->max_tag);
        rma_text(caps);
        printf(", wait fd %s\n", cw_na_get_wait_fd(na) >= 0 ? "yes" : "no");
    }
    cw_na_close(na);
    return 0;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: cw-info [-v] [--json] [URI...]   (in any order)\n"
            "Lists the plugins (file, network library and version, "
            "providers, transports,\n"
            "devices) and probes each URI (default: every known "
            "plugin/protocol).\n"
            "  -v, --verbose  keep the library's log messages (why a "
            "protocol is unavailable)\n"
            "      --json     one JSON object: version, plugins, protocols\n"
            "  -h, --help     this text\n"
            "exit status: 0 ok; 1 no plugins, or a URI given could not be "
            "opened; 2 usage\n");
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"verbose", no_argument, NULL, 'v'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool verbose = false, json = false;
    int failures = 0;
    int probed = 0;
    int opt;

    while ((opt = getopt_long(argc, argv, "vh", longopts, NULL)) != -1) {
        switch (opt) {
        case 'v':
            verbose = true;
            break;
        case 'j':
            json = true;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (!verbose)
        cw_log_set_level(CW_LOG_NONE);
    if (cw_plugins_load(NULL) != CW_OK) {
        fprintf(json ? stderr : stdout,
                "no plugins found (set CAUSEWAY_PLUGIN_PATH; -v shows the "
                "directories searched)\n");
        return 1;
    }
    if (json)
        printf("{\"version\":\"%d.%d.%d\",\"plugin_abi\":%u,\"plugins\":[",
               CW_VERSION_MAJOR, CW_VERSION_MINOR, CW_VERSION_PATCH,
               CW_NA_ABI_VERSION);
    else
        printf("causeway %d.%d.%d, plugin ABI %u\n", CW_VERSION_MAJOR,
               CW_VERSION_MINOR, CW_VERSION_PATCH, CW_NA_ABI_VERSION);
    if (plugins(json) != 0) {
        cw_plugins_unload();
        return 1;
    }
    if (json)
        printf("],\"protocols\":[");
    else
        printf("protocols:\n");
    if (optind < argc) {
        for (int i = optind; i < argc; i++, probed++)
            failures += probe(argv[i], json, i == optind);
    } else {
        for (size_t i = 0; i < sizeof(default_uris) / sizeof(*default_uris);
             i++)
            probe(default_uris[i], json, i == 0);
    }
    if (json)
        printf("]}\n");
    cw_plugins_unload();
    return probed && failures ? 1 : 0;
}
