/*
 * cw-info: which plugins this installation has, which protocols work on
 * this machine, and what each instance can do (eager limits, RMA, wait fd).
 *
 *   cw-info [-v] [URI...]
 *
 * Without URIs it probes a default set (shm, ofi+tcp, ofi+shm, ofi+sockets,
 * ofi+verbs, ofi+cxi, ucx+tcp, verbs).
 */
#include <causeway/causeway.h>
#include <causeway/na.h>

#include <stdio.h>
#include <string.h>

static const char *const default_uris[] = {
    "shm://",       "ofi+tcp://127.0.0.1:0",  "ofi+shm://",
    "ofi+sockets://127.0.0.1:0", "ofi+verbs://", "ofi+cxi://",
    "ucx+tcp://127.0.0.1:0", "verbs://",
};

static int probe(const char *uri)
{
    cw_na_t *na;
    cw_na_addr_t *self;
    char buf[512] = "?";
    const struct cw_na_caps *caps;
    cw_status_t st = cw_na_open(uri, CW_NA_LISTEN, NULL, &na);

    if (st != CW_OK) {
        printf("  %-28s unavailable: %s\n", uri, cw_status_str(st));
        return 1;
    }
    caps = cw_na_caps(na);
    if (cw_na_addr_self(na, &self) == CW_OK) {
        cw_na_addr_to_string(na, self, buf, sizeof(buf));
        cw_na_addr_free(na, self);
    }
    printf("  %-28s ok: self %s\n", uri, buf);
    printf("  %-28s     eager %zu B unexpected / %zu B expected, max tag "
           "%#x, RMA %s (max %zu B/op, %u segs), wait fd %s\n",
           "", caps->max_unexpected_size, caps->max_expected_size,
           caps->max_tag, caps->flags & CW_NA_CAP_RMA ? "yes" : "no",
           caps->max_rma_size, caps->max_segments,
           cw_na_get_wait_fd(na) >= 0 ? "yes" : "no");
    cw_na_close(na);
    return 0;
}

int main(int argc, char **argv)
{
    char list[256] = "";
    int first = 1;
    int verbose = 0;
    int failures = 0;
    int probed = 0;

    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: cw-info [-v] [URI...]\n"
               "Lists loaded plugins and probes each URI (default: every "
               "known plugin/protocol).\n");
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "-v")) {
        verbose = 1;
        first = 2;
    }
    if (!verbose)
        cw_log_set_level(CW_LOG_NONE);
    printf("causeway %d.%d.%d, plugin ABI %u\n", CW_VERSION_MAJOR,
           CW_VERSION_MINOR, CW_VERSION_PATCH, CW_NA_ABI_VERSION);
    if (cw_plugins_load(NULL) != CW_OK) {
        printf("no plugins found (set CAUSEWAY_PLUGIN_PATH; -v shows the "
               "directories searched)\n");
        return 1;
    }
    cw_plugins_list(list, sizeof(list));
    printf("plugins: %s\n", list);
    for (char *name = strtok(list, ","); name; name = strtok(NULL, ",")) {
        const struct cw_na_plugin *p = cw_plugins_find(name);
        printf("  %-8s %s\n", name, p && p->description ? p->description : "");
    }
    printf("protocols:\n");
    if (argc > first) {
        for (int i = first; i < argc; i++, probed++)
            failures += probe(argv[i]);
    } else {
        for (size_t i = 0; i < sizeof(default_uris) / sizeof(*default_uris);
             i++)
            probe(default_uris[i]);
    }
    cw_plugins_unload();
    return probed && failures ? 1 : 0;
}
