/* Diagnostics list and the "did you mean" helper. */
#include "config_int.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

struct cw_config_diag {
    char **msgs;
    size_t n;
    size_t cap;
    bool oom; /* a message could not be stored */
};

struct cw_config_diag *cw_config_diag_new(void)
{
    return calloc(1, sizeof(struct cw_config_diag));
}

void cw_config_diag_clear(struct cw_config_diag *diag)
{
    if (diag == NULL)
        return;
    for (size_t i = 0; i < diag->n; i++)
        free(diag->msgs[i]);
    diag->n = 0;
    diag->oom = false;
}

void cw_config_diag_free(struct cw_config_diag *diag)
{
    if (diag == NULL)
        return;
    cw_config_diag_clear(diag);
    free(diag->msgs);
    free(diag);
}

size_t cw_config_diag_count(const struct cw_config_diag *diag)
{
    return diag ? diag->n : 0;
}

const char *cw_config_diag_get(const struct cw_config_diag *diag, size_t i)
{
    if (diag == NULL || i >= diag->n)
        return NULL;
    return diag->msgs[i];
}

void cw_config_diag_print(const struct cw_config_diag *diag, FILE *out)
{
    if (diag == NULL)
        return;
    for (size_t i = 0; i < diag->n; i++)
        fprintf(out, "%s\n", diag->msgs[i]);
    if (diag->oom)
        fprintf(out, "(further messages lost: out of memory)\n");
}

static void diag_vadd(struct cw_config_diag *diag, const char *file,
                      unsigned line, unsigned column, const char *fmt,
                      va_list ap)
{
    char prefix[512] = "";
    char body[1024];
    size_t plen;
    size_t blen;
    char *msg;

    if (diag == NULL)
        return;
    if (file && line && column)
        snprintf(prefix, sizeof(prefix), "%s:%u:%u: ", file, line, column);
    else if (file && line)
        snprintf(prefix, sizeof(prefix), "%s:%u: ", file, line);
    else if (file)
        snprintf(prefix, sizeof(prefix), "%s: ", file);
    vsnprintf(body, sizeof(body), fmt, ap);
    if (diag->n == diag->cap) {
        size_t ncap = diag->cap ? diag->cap * 2 : 8;
        char **nm = realloc(diag->msgs, ncap * sizeof(*nm));
        if (nm == NULL) {
            diag->oom = true;
            return;
        }
        diag->msgs = nm;
        diag->cap = ncap;
    }
    plen = strlen(prefix);
    blen = strlen(body);
    msg = malloc(plen + blen + 1);
    if (msg == NULL) {
        diag->oom = true;
        return;
    }
    memcpy(msg, prefix, plen);
    memcpy(msg + plen, body, blen + 1);
    diag->msgs[diag->n++] = msg;
}

void cw_config_diag_add(struct cw_config_diag *diag, const char *file,
                        unsigned line, unsigned column, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    diag_vadd(diag, file, line, column, fmt, ap);
    va_end(ap);
}

void cfg_error(struct cfg_ctx *ctx, unsigned line, unsigned column,
               const char *fmt, ...)
{
    struct cfg_msg *nm;
    char body[1024];
    va_list ap;

    ctx->nerrors++;
    va_start(ap, fmt);
    vsnprintf(body, sizeof(body), fmt, ap);
    va_end(ap);
    nm = realloc(ctx->msgs, (ctx->nmsgs + 1) * sizeof(*nm));
    if (nm == NULL) {
        ctx->oom = true;
        return;
    }
    ctx->msgs = nm;
    nm[ctx->nmsgs].line = line;
    nm[ctx->nmsgs].column = column;
    nm[ctx->nmsgs].seq = ctx->nmsgs;
    nm[ctx->nmsgs].text = strdup(body);
    if (nm[ctx->nmsgs].text == NULL) {
        ctx->oom = true;
        return;
    }
    ctx->nmsgs++;
}

static int msg_cmp(const void *a, const void *b)
{
    const struct cfg_msg *x = a;
    const struct cfg_msg *y = b;

    if (x->line != y->line)
        return x->line < y->line ? -1 : 1;
    if (x->column != y->column)
        return x->column < y->column ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

void cfg_flush(struct cfg_ctx *ctx)
{
    if (ctx->nmsgs > 1)
        qsort(ctx->msgs, ctx->nmsgs, sizeof(*ctx->msgs), msg_cmp);
    for (size_t i = 0; i < ctx->nmsgs; i++) {
        cw_config_diag_add(ctx->diag, ctx->file, ctx->msgs[i].line,
                           ctx->msgs[i].column, "%s", ctx->msgs[i].text);
        free(ctx->msgs[i].text);
    }
    if (ctx->oom && ctx->diag)
        ctx->diag->oom = true;
    free(ctx->msgs);
    ctx->msgs = NULL;
    ctx->nmsgs = 0;
}

static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a);
    size_t lb = strlen(b);
    size_t row[65];

    if (la > 64 || lb > 64)
        return (size_t)-1;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag_prev = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            size_t best = diag_prev + cost;
            if (row[j] + 1 < best)
                best = row[j] + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag_prev = up;
        }
    }
    return row[lb];
}

const char *cfg_suggest(const char *word, const char *const *cands,
                        size_t ncands)
{
    const char *best = NULL;
    size_t best_d = (size_t)-1;
    size_t limit = strlen(word) / 3 + 1;

    if (limit > 3)
        limit = 3;
    for (size_t i = 0; i < ncands; i++) {
        size_t d;
        if (cands[i] == NULL)
            continue;
        d = edit_distance(word, cands[i]);
        if (d < best_d) {
            best_d = d;
            best = cands[i];
        }
    }
    /* A key that contains the word or the reverse is a likely typo too
     * ("timeout" for "default_timeout"). */
    if (best_d <= limit)
        return best;
    for (size_t i = 0; i < ncands; i++) {
        if (cands[i] && strlen(word) >= 4 &&
            (strstr(cands[i], word) || strstr(word, cands[i])))
            return cands[i];
    }
    return NULL;
}
