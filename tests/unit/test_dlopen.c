/*
 * dlopen smoke test: every built plugin module loads through the loader's
 * checks, registers the name its file claims, and opens no instance by
 * itself (no constructors doing work).  argv: plugin .so paths.
 */
#include <causeway/na.h>

#include <libgen.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    int failed = 0;

    for (int i = 1; i < argc; i++) {
        char err[512] = "";
        char path[1024];
        char want[64];
        const char *base;
        const struct cw_na_plugin *p;
        cw_status_t st = cw_plugins_load_file(argv[i], err, sizeof(err));

        snprintf(path, sizeof(path), "%s", argv[i]);
        base = basename(path);
        snprintf(want, sizeof(want), "%.*s", (int)(strlen(base) - 9),
                 base + 6); /* cw-na-<name>.so */
        p = cw_plugins_find(want);
        if (st != CW_OK || p == NULL) {
            printf("not ok %d - %s: %s\n", i, argv[i],
                   st != CW_OK ? err : "registered under another name");
            failed++;
            continue;
        }
        printf("ok %d - %s registers plugin '%s' (%s)\n", i, base, p->name,
               p->description ? p->description : "");
    }
    printf("1..%d\n", argc - 1);
    cw_plugins_unload();
    return failed ? 1 : 0;
}
