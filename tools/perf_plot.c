/*
 * cw-perf --plot (perf_plot.h).  The results files are cw-perf's own
 * --json lines, read by a small JSON reader that knows only what it needs
 * (it skips any other key); gnuplot gets a data file with one block per
 * series and a script, both in a private temporary directory removed
 * afterwards.
 */
#include "perf_plot.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PLOT_MAX_RESULTS 64

static void plot_err(char *err, size_t errlen, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void plot_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

int perf_plot_add(struct plot *p, const char *label, const char *test,
                  const double *size, const double *median,
                  const double *p50_us, size_t n)
{
    struct plot_series *grown, *s;
    int kind = !strcmp(test, "lat")    ? 0
               : !strcmp(test, "rate") ? 1
               : !strcmp(test, "bw")   ? 2
                                       : -1;

    if (kind < 0)
        return -1;
    grown = realloc(p->s, (p->n + 1) * sizeof(*grown));
    if (grown == NULL)
        return -1;
    p->s = grown;
    s = &p->s[p->n];
    s->label = strdup(label);
    s->pts = calloc(n ? n : 1, sizeof(*s->pts));
    s->n = n;
    if (s->label == NULL || s->pts == NULL) {
        free(s->label);
        free(s->pts);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        struct plot_point *pt = &s->pts[i];
        double mib = size[i] / (1 << 20);

        pt->size = size[i];
        if (kind == 0) { /* us per call, one in flight */
            pt->lat_us = median[i];
            pt->bw_mibs = median[i] > 0 ? mib / (median[i] / 1e6) : 0;
        } else if (kind == 1) { /* calls per second */
            pt->lat_us = p50_us[i];
            pt->bw_mibs = mib * median[i];
        } else { /* MiB/s */
            pt->lat_us = p50_us[i];
            pt->bw_mibs = median[i];
        }
    }
    p->n++;
    return 0;
}

void perf_plot_free(struct plot *p)
{
    for (size_t i = 0; i < p->n; i++) {
        free(p->s[i].label);
        free(p->s[i].pts);
    }
    free(p->s);
    p->s = NULL;
    p->n = 0;
}

/* ---- reading cw-perf --json ---------------------------------------- */

static void js_ws(const char **p)
{
    while (**p == ' ' || **p == '\t' || **p == '\r' || **p == '\n')
        (*p)++;
}

/* A string into @p out (truncated to @p len; escapes decoded, \u as '?'
 * beyond ASCII); false if malformed. */
static bool js_str(const char **p, char *out, size_t len)
{
    size_t k = 0;

    js_ws(p);
    if (**p != '"')
        return false;
    for ((*p)++; **p != '"'; (*p)++) {
        char c = **p;

        if (c == '\0')
            return false;
        if (c == '\\') {
            static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
            const char *e;

            c = *++(*p);
            if (c == 'u') {
                unsigned v;
                if (sscanf(*p + 1, "%4x", &v) != 1)
                    return false;
                *p += 4;
                c = v < 0x80 ? (char)v : '?';
            } else if (c != '\0' && (e = strchr(from, c)) != NULL) {
                c = to[e - from];
            } else {
                return false;
            }
        }
        if (k + 1 < len)
            out[k++] = c;
    }
    (*p)++;
    out[k] = '\0';
    return true;
}

static bool js_num(const char **p, double *v_p)
{
    char *end;

    js_ws(p);
    errno = 0;
    *v_p = strtod(*p, &end);
    if (end == *p || errno != 0)
        return false;
    *p = end;
    return true;
}

/* The members of the container at *@p p that @p open begins and @p close
 * ends: @p member reads each.  False if malformed or if @p member says
 * so. */
static bool js_seq(const char **p, char open, char close,
                   bool (*member)(const char **p, void *arg), void *arg)
{
    js_ws(p);
    if (*(*p)++ != open)
        return false;
    js_ws(p);
    if (**p == close) {
        (*p)++;
        return true;
    }
    for (;;) {
        if (!member(p, arg))
            return false;
        js_ws(p);
        if (**p == ',') {
            (*p)++;
            continue;
        }
        return *(*p)++ == close;
    }
}

/* Calls @p fn for each element of the array at *@p p, with *@p p on it;
 * @p fn reads or skips it. */
static bool js_array(const char **p, bool (*fn)(const char **p, void *arg),
                     void *arg)
{
    return js_seq(p, '[', ']', fn, arg);
}

struct js_member {
    bool (*fn)(const char *key, const char **p, void *arg);
    void *arg;
};

static bool js_member_read(const char **p, void *arg)
{
    const struct js_member *m = arg;
    char key[64];

    if (!js_str(p, key, sizeof(key)))
        return false;
    js_ws(p);
    return *(*p)++ == ':' && m->fn(key, p, m->arg);
}

/* Calls @p fn for each key of the object at *@p p, with *@p p on its
 * value; @p fn reads or skips the value. */
static bool js_object(const char **p,
                      bool (*fn)(const char *key, const char **p, void *arg),
                      void *arg)
{
    struct js_member m = {fn, arg};

    return js_seq(p, '{', '}', js_member_read, &m);
}

static bool js_skip(const char **p, int depth);

static bool js_skip_elem(const char **p, void *arg)
{
    return js_skip(p, *(int *)arg + 1);
}

static bool js_skip_member(const char *key, const char **p, void *arg)
{
    (void)key;
    return js_skip_elem(p, arg);
}

/* Skips one value of any kind. */
static bool js_skip(const char **p, int depth)
{
    char buf[8];
    double v;

    js_ws(p);
    if (depth > 16)
        return false;
    if (**p == '"')
        return js_str(p, buf, sizeof(buf));
    if (**p == '{')
        return js_object(p, js_skip_member, &depth);
    if (**p == '[')
        return js_array(p, js_skip_elem, &depth);
    if (!strncmp(*p, "true", 4) || !strncmp(*p, "null", 4)) {
        *p += 4;
        return true;
    }
    if (!strncmp(*p, "false", 5)) {
        *p += 5;
        return true;
    }
    return js_num(p, &v);
}

/* One run (a line of cw-perf --json). */
struct run {
    char test[16];
    char target[512];
    size_t n;
    bool results_seen;
    double size[PLOT_MAX_RESULTS], median[PLOT_MAX_RESULTS],
        p50[PLOT_MAX_RESULTS];
    char dir[PLOT_MAX_RESULTS][8];
    unsigned have[PLOT_MAX_RESULTS]; /* bits: size, median, p50 */
};

static bool result_key(const char *key, const char **p, void *arg)
{
    struct run *r = arg;
    static const char *const nums[] = {"size", "median", "p50_us"};
    double *dest[] = {&r->size[r->n], &r->median[r->n], &r->p50[r->n]};

    for (unsigned k = 0; k < 3; k++)
        if (!strcmp(key, nums[k])) {
            r->have[r->n] |= 1u << k;
            return js_num(p, dest[k]);
        }
    if (!strcmp(key, "dir"))
        return js_str(p, r->dir[r->n], sizeof(r->dir[r->n]));
    return js_skip(p, 0);
}

/* One result: size, median and p50_us, and dir for bw. */
static bool result_elem(const char **p, void *arg)
{
    struct run *r = arg;

    if (r->n == PLOT_MAX_RESULTS)
        return false;
    r->dir[r->n][0] = '\0';
    r->have[r->n] = 0;
    if (!js_object(p, result_key, r) || r->have[r->n] != 7)
        return false;
    r->n++;
    return true;
}

static bool run_key(const char *key, const char **p, void *arg)
{
    struct run *r = arg;

    if (!strcmp(key, "test"))
        return js_str(p, r->test, sizeof(r->test));
    if (!strcmp(key, "target"))
        return js_str(p, r->target, sizeof(r->target));
    if (strcmp(key, "results"))
        return js_skip(p, 0);
    r->results_seen = true;
    return js_array(p, result_elem, r);
}

int perf_plot_add_run(struct plot *p, const char *name, const char *test,
                      const char *const *dir, const double *size,
                      const double *median, const double *p50_us, size_t n)
{
    static const char *const dirs[] = {"", "pull", "push"};

    if (n > PLOT_MAX_RESULTS)
        return -1;
    for (size_t d = 0; d < sizeof(dirs) / sizeof(*dirs); d++) {
        double sz[PLOT_MAX_RESULTS], med[PLOT_MAX_RESULTS],
            p50[PLOT_MAX_RESULTS];
        char label[700];
        size_t k = 0;

        for (size_t i = 0; i < n; i++)
            if (!strcmp(dir[i], dirs[d])) {
                sz[k] = size[i];
                med[k] = median[i];
                p50[k++] = p50_us[i];
            }
        if (k == 0)
            continue;
        snprintf(label, sizeof(label), "%s%s%s%s%s", name, name[0] ? " " : "",
                 test, dirs[d][0] ? " " : "", dirs[d]);
        if (perf_plot_add(p, label, test, sz, med, p50, k) != 0)
            return -1;
    }
    return 0;
}

/* The series of one run of a file. */
static int run_series(struct plot *p, const struct run *r, const char *name)
{
    const char *dir[PLOT_MAX_RESULTS];

    for (size_t i = 0; i < r->n; i++)
        dir[i] = r->dir[i];
    return perf_plot_add_run(p, name, r->test, dir, r->size, r->median, r->p50,
                             r->n);
}

int perf_plot_add_file(struct plot *p, const char *path, char *err,
                       size_t errlen)
{
    char *line = NULL;
    size_t cap = 0;
    unsigned lineno = 0, runs = 0;
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    char name[256];
    FILE *f = fopen(path, "re");
    int rc = -1;

    if (f == NULL) {
        plot_err(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    /* "direct.json" is labelled "direct". */
    snprintf(name, sizeof(name), "%s", base);
    if (strlen(name) > 5 && !strcmp(name + strlen(name) - 5, ".json"))
        name[strlen(name) - 5] = '\0';
    while (getline(&line, &cap, f) > 0) {
        struct run *r;
        const char *q = line;

        lineno++;
        js_ws(&q);
        if (*q == '\0')
            continue;
        r = calloc(1, sizeof(*r));
        if (r == NULL) {
            plot_err(err, errlen, "out of memory");
            goto out;
        }
        if (!js_object(&q, run_key, r) || (js_ws(&q), *q != '\0') ||
            !r->results_seen ||
            (strcmp(r->test, "lat") && strcmp(r->test, "rate") &&
             strcmp(r->test, "bw"))) {
            plot_err(err, errlen,
                     "%s:%u: not a cw-perf --json result "
                     "(an object with test lat|rate|bw and results, each "
                     "with size, median and p50_us)",
                     path, lineno);
            free(r);
            goto out;
        }
        if (run_series(p, r, name) != 0) {
            plot_err(err, errlen, "out of memory");
            free(r);
            goto out;
        }
        free(r);
        runs++;
    }
    if (ferror(f)) {
        plot_err(err, errlen, "%s: %s", path, strerror(errno));
        goto out;
    }
    if (runs == 0) {
        plot_err(err, errlen, "%s: no cw-perf --json result in it", path);
        goto out;
    }
    rc = 0;
out:
    free(line);
    fclose(f);
    return rc;
}

/* ---- drawing -------------------------------------------------------- */

bool perf_plot_have_gnuplot(void)
{
    const char *path = getenv("PATH");
    char dir[4096];

    if (path == NULL || *path == '\0')
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        size_t n = strcspn(path, ":");

        snprintf(dir, sizeof(dir), "%.*s/gnuplot", (int)n, n ? path : ".");
        if (access(dir, X_OK) == 0)
            return true;
        path += n;
        if (*path == ':')
            path++;
    }
    return false;
}

/* @p s in gnuplot's single quotes (a quote is doubled). */
static void gp_quoted(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputc('\'', f);
        fputc(*s == '\n' ? ' ' : *s, f);
    }
    fputc('\'', f);
}

/* The data file: a block per series (gnuplot's "index"), sizes over 0. */
static int write_data(const struct plot *p, const char *path, size_t *drawn_p)
{
    FILE *f = fopen(path, "we");
    size_t drawn = 0;

    if (f == NULL)
        return -1;
    for (size_t i = 0; i < p->n; i++) {
        fprintf(f, "# %s\n", p->s[i].label);
        for (size_t k = 0; k < p->s[i].n; k++) {
            const struct plot_point *pt = &p->s[i].pts[k];
            if (pt->size <= 0)
                continue;
            fprintf(f, "%.0f %.6g %.6g\n", pt->size, pt->lat_us, pt->bw_mibs);
            drawn++;
        }
        /* An empty block still counts as one for "index". */
        fprintf(f, "\n\n");
    }
    *drawn_p = drawn;
    return fclose(f) == 0 ? 0 : -1;
}

static int write_script(const struct plot *p, const char *title,
                        const char *png, const char *data, const char *path)
{
    static const char *const panel[2][2] = {
        {"latency per call (us)", "2"},
        {"bandwidth (MiB/s)", "3"},
    };
    FILE *f = fopen(path, "we");

    if (f == NULL)
        return -1;
    fprintf(f, "set terminal pngcairo size 1400,600 noenhanced\n"
               "set output ");
    gp_quoted(f, png);
    fprintf(f, "\nset multiplot layout 1,2 title ");
    gp_quoted(f, title);
    fprintf(f, "\nset logscale x 2\nset logscale y\n"
               "set format x '%%.0b%%BB'\n"
               "set xlabel 'message size'\nset grid\n"
               "set key top left\n");
    for (int k = 0; k < 2; k++) {
        fprintf(f, "set ylabel '%s'\nplot", panel[k][0]);
        for (size_t i = 0; i < p->n; i++) {
            fprintf(f, "%s ", i ? ", \\\n    " : "");
            gp_quoted(f, data);
            fprintf(f, " index %zu using 1:%s with linespoints title ", i,
                    panel[k][1]);
            gp_quoted(f, p->s[i].label);
        }
        fprintf(f, "\n");
    }
    fprintf(f, "unset multiplot\n");
    return fclose(f) == 0 ? 0 : -1;
}

/* Runs gnuplot on @p script; its messages go to our stderr. */
static int run_gnuplot(const char *script, char *err, size_t errlen)
{
    pid_t pid = fork();
    int status;

    if (pid < 0) {
        plot_err(err, errlen, "fork() failed: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        execlp("gnuplot", "gnuplot", script, (char *)NULL);
        fprintf(stderr, "cw-perf: cannot run gnuplot: %s\n", strerror(errno));
        _exit(127);
    }
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            plot_err(err, errlen, "waitpid() failed: %s", strerror(errno));
            return -1;
        }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        plot_err(err, errlen,
                 "gnuplot could not be run (install the "
                 "Debian package gnuplot-nox)");
    else
        plot_err(err, errlen,
                 "gnuplot failed (%s %d; its messages are "
                 "above)",
                 WIFEXITED(status) ? "exit status" : "signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    return -1;
}

int perf_plot_draw(const struct plot *p, const char *title, const char *png,
                   char *err, size_t errlen)
{
    char dir[] = "/tmp/cw-perf-plot.XXXXXX";
    char data[64], script[64];
    struct stat st;
    size_t drawn = 0;
    int rc = -1;

    if (!perf_plot_have_gnuplot()) {
        plot_err(err, errlen,
                 "--plot needs gnuplot, which is not on PATH "
                 "(install the Debian package gnuplot-nox)");
        return -1;
    }
    if (p->n == 0) {
        plot_err(err, errlen, "nothing to plot: no results");
        return -1;
    }
    if (mkdtemp(dir) == NULL) {
        plot_err(err, errlen, "mkdtemp(%s) failed: %s", dir, strerror(errno));
        return -1;
    }
    snprintf(data, sizeof(data), "%s/data", dir);
    snprintf(script, sizeof(script), "%s/plot.gp", dir);
    if (write_data(p, data, &drawn) != 0 ||
        write_script(p, title, png, data, script) != 0) {
        plot_err(err, errlen, "cannot write %s: %s", dir, strerror(errno));
        goto out;
    }
    if (drawn == 0) {
        plot_err(err, errlen,
                 "nothing to plot: every size is 0, which a "
                 "log scale cannot show");
        goto out;
    }
    if (run_gnuplot(script, err, errlen) != 0)
        goto out;
    if (stat(png, &st) != 0 || st.st_size == 0) {
        plot_err(err, errlen, "gnuplot wrote no %s", png);
        goto out;
    }
    rc = 0;
out:
    unlink(data);
    unlink(script);
    rmdir(dir);
    return rc;
}
