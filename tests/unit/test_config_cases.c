/*
 * Table-driven configuration cases (TAP).
 *
 *   test_config_cases good  DIR   NAME.yaml loads; its dump equals NAME.dump
 *                                  and the dump loads back to the same dump
 *   test_config_cases bad   DIR   NAME.yaml fails with exactly NAME.err
 *   test_config_cases multi DIR   each DIR/CASE/ holds *.yaml checked
 *                                  together; CASE/expected.err (empty: ok)
 *
 * Files named client-*.yaml load as client routes files.  With
 * CW_CASES_UPDATE=1 the expected files are (re)written instead.
 */
#include <causeway/config.h>
#include <causeway/routing.h>

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_FILES 512

static int ntests;
static int nfailed;
static bool update;

static void result(bool ok, const char *name, const char *why)
{
    ntests++;
    if (!ok)
        nfailed++;
    printf("%sok %d - %s%s%s\n", ok ? "" : "not ", ntests, name,
           why ? " # " : "", why ? why : "");
}

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "re");
    char *buf = NULL;
    size_t len = 0;
    FILE *mem;
    int c;

    if (f == NULL)
        return NULL;
    mem = open_memstream(&buf, &len);
    if (mem == NULL) {
        fclose(f);
        return NULL;
    }
    while ((c = fgetc(f)) != EOF)
        fputc(c, mem);
    fclose(f);
    fclose(mem);
    return buf;
}

static bool write_all(const char *path, const char *text)
{
    FILE *f = fopen(path, "we");
    bool ok;

    if (f == NULL)
        return false;
    ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names in dir ending with suffix (or directories if suffix NULL). */
static size_t list_dir(const char *dir, const char *suffix, char **names)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t n = 0;

    if (d == NULL)
        return 0;
    while ((e = readdir(d)) != NULL && n < MAX_FILES) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.')
            continue;
        if (suffix) {
            size_t sl = strlen(suffix);
            if (len <= sl || strcmp(e->d_name + len - sl, suffix) != 0)
                continue;
        } else if (e->d_type != DT_DIR) {
            continue;
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof(*names), cmp_str);
    return n;
}

static void print_diag(const void *diag, FILE *out)
{
    cw_config_diag_print(diag, out);
}

static void print_dump(const void *cfg, FILE *out)
{
    cw_config_dump(cfg, out);
}

/* What fn writes, as a string. */
static char *capture(void (*fn)(const void *, FILE *), const void *arg)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);

    if (mem == NULL)
        return NULL;
    fn(arg, mem);
    fclose(mem);
    return buf;
}

#define diag_text(d) capture(print_diag, (d))
#define dump_text(c) capture(print_dump, (c))

static void sibling(const char *yaml, const char *ext, char *out, size_t len)
{
    snprintf(out, len, "%.*s%s", (int)(strlen(yaml) - 5), yaml, ext);
}

static unsigned flags_for(const char *name)
{
    return strncmp(name, "client-", 7) == 0 ? CW_CONFIG_ROUTES_ONLY : 0;
}

static void run_good(const char *name)
{
    struct cw_config_diag *diag = cw_config_diag_new();
    struct cw_config *cfg = NULL;
    struct cw_config *again = NULL;
    struct cw_route_table *table = NULL;
    char expf[512];
    char *dump = NULL;
    char *dump2 = NULL;
    char *expect = NULL;
    cw_status_t st;

    st = cw_config_load(name, flags_for(name), diag, &cfg);
    if (st != CW_OK) {
        char *t = diag_text(diag);
        fprintf(stdout, "# %s", t ? t : "");
        free(t);
        result(false, name, "does not load");
        goto out;
    }
    dump = dump_text(cfg);
    sibling(name, ".dump", expf, sizeof(expf));
    if (update)
        write_all(expf, dump);
    expect = read_all(expf);
    if (expect == NULL || strcmp(expect, dump) != 0) {
        printf("# got:\n%s", dump);
        result(false, name, expect ? "dump differs from .dump" : "no .dump");
        goto out;
    }
    /* The dump is YAML that loads back to the same configuration. */
    st = cw_config_load_buffer(name, dump, strlen(dump), flags_for(name), diag,
                               &again);
    if (st != CW_OK) {
        result(false, name, "dump does not load back");
        goto out;
    }
    dump2 = dump_text(again);
    if (strcmp(dump, dump2) != 0) {
        result(false, name, "dump of the dump differs");
        goto out;
    }
    if (cw_route_table_build(cfg, &table) != CW_OK) {
        result(false, name, "route table does not build");
        goto out;
    }
    result(true, name, NULL);
out:
    cw_route_table_unref(table);
    free(dump);
    free(dump2);
    free(expect);
    cw_config_free(cfg);
    cw_config_free(again);
    cw_config_diag_free(diag);
}

static void run_bad(const char *name)
{
    struct cw_config_diag *diag = cw_config_diag_new();
    struct cw_config *cfg = NULL;
    char expf[512];
    char *got = NULL;
    char *expect = NULL;
    cw_status_t st;

    st = cw_config_load(name, flags_for(name), diag, &cfg);
    if (st == CW_OK) {
        result(false, name, "loads, but must fail");
        goto out;
    }
    got = diag_text(diag);
    sibling(name, ".err", expf, sizeof(expf));
    if (update)
        write_all(expf, got);
    expect = read_all(expf);
    if (st != CW_CONFIG || cw_config_diag_count(diag) == 0) {
        result(false, name, "failed without CW_CONFIG and a message");
        goto out;
    }
    if (expect == NULL || strcmp(expect, got) != 0) {
        printf("# got:\n%s", got);
        result(false, name, expect ? "errors differ from .err" : "no .err");
        goto out;
    }
    result(true, name, NULL);
out:
    free(got);
    free(expect);
    cw_config_free(cfg);
    cw_config_diag_free(diag);
}

static void run_multi(const char *casedir)
{
    char *names[MAX_FILES];
    struct cw_config *cfgs[MAX_FILES];
    struct cw_config_diag *diag = cw_config_diag_new();
    char *got = NULL;
    char *expect = NULL;
    size_t n;
    bool loaded = true;
    cw_status_t st;

    if (chdir(casedir) != 0) {
        result(false, casedir, "cannot enter");
        cw_config_diag_free(diag);
        return;
    }
    n = list_dir(".", ".yaml", names);
    for (size_t i = 0; i < n; i++) {
        cfgs[i] = NULL;
        if (cw_config_load(names[i], 0, diag, &cfgs[i]) != CW_OK)
            loaded = false;
    }
    if (!loaded || n == 0) {
        result(false, casedir, n ? "a file does not load" : "no files");
        goto out;
    }
    st = cw_route_check_set((const struct cw_config *const *)cfgs, n, diag);
    got = diag_text(diag);
    if (update)
        write_all("expected.err", got);
    expect = read_all("expected.err");
    if (expect == NULL || strcmp(expect, got) != 0 ||
        (st == CW_OK) != (got[0] == '\0')) {
        printf("# got:\n%s", got);
        result(false, casedir, "problems differ from expected.err");
        goto out;
    }
    result(true, casedir, NULL);
out:
    for (size_t i = 0; i < n; i++) {
        cw_config_free(cfgs[i]);
        free(names[i]);
    }
    free(got);
    free(expect);
    cw_config_diag_free(diag);
    if (chdir("..") != 0)
        perror("chdir");
}

int main(int argc, char **argv)
{
    char *names[MAX_FILES];
    size_t n;

    if (argc != 3) {
        fprintf(stderr, "usage: %s good|bad|multi DIR\n", argv[0]);
        return 2;
    }
    update = getenv("CW_CASES_UPDATE") != NULL;
    if (chdir(argv[2]) != 0) {
        perror(argv[2]);
        return 2;
    }
    n = list_dir(".", strcmp(argv[1], "multi") ? ".yaml" : NULL, names);
    printf("1..%zu\n", n);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(argv[1], "good") == 0)
            run_good(names[i]);
        else if (strcmp(argv[1], "bad") == 0)
            run_bad(names[i]);
        else
            run_multi(names[i]);
        free(names[i]);
    }
    if (n == 0) {
        printf("not ok 1 - no cases in %s\n", argv[2]);
        return 1;
    }
    return nfailed ? 1 : 0;
}
