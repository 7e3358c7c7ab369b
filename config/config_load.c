/* YAML -> struct cw_config: walks the libyaml document against the schema,
 * recording every error with its file:line:column. */
#include "config_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CFG_FILE_MAX (16u * 1024 * 1024)

#define LINE(n) ((unsigned)(n)->start_mark.line + 1)
#define COL(n)  ((unsigned)(n)->start_mark.column + 1)

static const char *node_kind(const yaml_node_t *n)
{
    switch (n->type) {
    case YAML_MAPPING_NODE:
        return "a mapping";
    case YAML_SEQUENCE_NODE:
        return "a list";
    default:
        return "a scalar";
    }
}

/* A plain "", "~" or "null" scalar: YAML's null. */
static bool node_is_null(const yaml_node_t *n)
{
    const char *v;

    if (n->type != YAML_SCALAR_NODE ||
        n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    v = (const char *)n->data.scalar.value;
    return v[0] == '\0' || strcmp(v, "~") == 0 || strcmp(v, "null") == 0;
}

/* Scalar text, refusing embedded NULs (they would truncate silently). */
static const char *scalar_text(struct cfg_ctx *ctx, const yaml_node_t *n)
{
    if (strlen((const char *)n->data.scalar.value) != n->data.scalar.length) {
        cfg_error(ctx, LINE(n), COL(n), "value contains a NUL character");
        return NULL;
    }
    return (const char *)n->data.scalar.value;
}

static void unknown_key(struct cfg_ctx *ctx, const yaml_node_t *kn,
                        const char *where, const char *const *cands,
                        size_t ncands)
{
    const char *key = (const char *)kn->data.scalar.value;
    const char *hint = cfg_suggest(key, cands, ncands);

    if (hint)
        cfg_error(ctx, LINE(kn), COL(kn),
                  "unknown key '%.64s' in %s (did you mean '%s'?)", key, where,
                  hint);
    else
        cfg_error(ctx, LINE(kn), COL(kn), "unknown key '%.64s' in %s", key,
                  where);
}

static cw_status_t store_list(struct cfg_ctx *ctx,
                              const struct cw_config_key *key, void *base,
                              yaml_document_t *doc, yaml_node_t *vn,
                              const char *where)
{
    struct cw_config_strlist *l =
        (struct cw_config_strlist *)((char *)base + key->offset);
    size_t n;
    char **v;

    if (vn->type != YAML_SEQUENCE_NODE) {
        cfg_error(ctx, LINE(vn), COL(vn),
                  "%s.%s: expected a list of strings, got %s", where, key->name,
                  node_kind(vn));
        return CW_INVALID_ARG;
    }
    n = (size_t)(vn->data.sequence.items.top - vn->data.sequence.items.start);
    if (n < key->min || n > key->max) {
        cfg_error(ctx, LINE(vn), COL(vn),
                  "%s.%s: expected %llu to %llu entries, got %zu", where,
                  key->name, (unsigned long long)key->min,
                  (unsigned long long)key->max, n);
        return CW_INVALID_ARG;
    }
    v = calloc(n ? n : 1, sizeof(*v));
    if (v == NULL)
        return CW_NOMEM;
    cfg_free_value(key, base);
    l->v = v;
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *in =
            yaml_document_get_node(doc, vn->data.sequence.items.start[i]);
        char err[CFG_ERR_MAX];
        const char *text;
        cw_status_t st;

        if (in == NULL)
            continue;
        if (in->type != YAML_SCALAR_NODE || node_is_null(in)) {
            cfg_error(ctx, LINE(in), COL(in),
                      "%s.%s[%zu]: expected a string, got %s", where, key->name,
                      i, node_is_null(in) ? "null" : node_kind(in));
            continue;
        }
        text = scalar_text(ctx, in);
        if (text == NULL)
            continue;
        if (key->type == CW_CFG_ADDRLIST) {
            struct cw_uri uri;
            st = cw_uri_parse_err(text, &uri, err, sizeof(err));
            if (st == CW_OK)
                st = cfg_addr_check(&uri, CFG_ADDR_PEER, err, sizeof(err));
        } else {
            st = cfg_parse_allow(text, err, sizeof(err));
        }
        if (st != CW_OK) {
            cfg_error(ctx, LINE(in), COL(in), "%s.%s[%zu]: %s", where,
                      key->name, i, err);
            continue;
        }
        for (size_t j = 0; j < l->n; j++) {
            if (strcmp(l->v[j], text) == 0) {
                cfg_error(ctx, LINE(in), COL(in),
                          "%s.%s[%zu]: duplicate entry '%.64s'", where,
                          key->name, i, text);
                text = NULL;
                break;
            }
        }
        if (text == NULL)
            continue;
        l->v[l->n] = strdup(text);
        if (l->v[l->n] == NULL)
            return CW_NOMEM;
        if (key->type == CW_CFG_ALLOWLIST) {
            struct cfg_entryloc *ne =
                realloc(ctx->entries, (ctx->nentries + 1) * sizeof(*ne));
            if (ne == NULL)
                return CW_NOMEM;
            ctx->entries = ne;
            ne[ctx->nentries++] =
                (struct cfg_entryloc){l, l->n, i, LINE(in), COL(in)};
        }
        l->n++;
    }
    return CW_OK;
}

/* Fill base (a section struct or one list item) from mapping node mn. */
static cw_status_t load_map(struct cfg_ctx *ctx,
                            const struct cw_config_section *sec, void *base,
                            yaml_document_t *doc, yaml_node_t *mn,
                            const char *where, struct cfg_keyloc *locs)
{
    const char *names[32];

    for (size_t k = 0; k < sec->nkeys; k++)
        names[k] = sec->keys[k].name;
    for (yaml_node_pair_t *p = mn->data.mapping.pairs.start;
         p < mn->data.mapping.pairs.top; p++) {
        yaml_node_t *kn = yaml_document_get_node(doc, p->key);
        yaml_node_t *vn = yaml_document_get_node(doc, p->value);
        const struct cw_config_key *key = NULL;
        size_t k;
        const char *text;
        char err[CFG_ERR_MAX];
        cw_status_t st;

        if (kn == NULL || vn == NULL)
            continue;
        if (kn->type != YAML_SCALAR_NODE) {
            cfg_error(ctx, LINE(kn), COL(kn),
                      "%s: keys must be plain words, "
                      "got %s",
                      where, node_kind(kn));
            continue;
        }
        for (k = 0; k < sec->nkeys; k++) {
            if (strcmp(sec->keys[k].name,
                       (const char *)kn->data.scalar.value) == 0) {
                key = &sec->keys[k];
                break;
            }
        }
        if (key == NULL) {
            unknown_key(ctx, kn, where, names, sec->nkeys);
            continue;
        }
        if (locs[k].line) {
            cfg_error(ctx, LINE(kn), COL(kn),
                      "duplicate key '%s' in %s (first given at line %u)",
                      key->name, where, locs[k].line);
            continue;
        }
        locs[k].line = LINE(vn);
        locs[k].column = COL(vn);
        if (key->type == CW_CFG_ADDRLIST || key->type == CW_CFG_ALLOWLIST) {
            st = store_list(ctx, key, base, doc, vn, where);
            if (st == CW_NOMEM)
                return st;
            continue;
        }
        if (vn->type != YAML_SCALAR_NODE || node_is_null(vn)) {
            const char *tn = cw_config_type_name(key->type);
            cfg_error(ctx, LINE(vn), COL(vn), "%s.%s: expected %s%s%s, got %s",
                      where, key->name, strchr("aeiou", tn[0]) ? "an " : "a ",
                      tn, key->type == CW_CFG_ENUM ? " word" : "",
                      node_is_null(vn) ? "nothing (null)" : node_kind(vn));
            continue;
        }
        text = scalar_text(ctx, vn);
        if (text == NULL)
            continue;
        st = cfg_store_scalar(key, base, text, err, sizeof(err));
        if (st == CW_NOMEM)
            return st;
        if (st != CW_OK)
            cfg_error(ctx, LINE(vn), COL(vn), "%s.%s: %s", where, key->name,
                      err);
    }
    for (size_t k = 0; k < sec->nkeys; k++) {
        if (!locs[k].line && sec->keys[k].def == NULL && !sec->keys[k].optional)
            cfg_error(ctx, LINE(mn), COL(mn), "%s: missing required key '%s'",
                      where, sec->keys[k].name);
    }
    return CW_OK;
}

static cw_status_t load_list(struct cfg_ctx *ctx, int s, yaml_document_t *doc,
                             yaml_node_t *ln)
{
    const struct cw_config_section *sec = &cw_config_schema(NULL)[s];
    char *arr;
    size_t n;
    struct cfg_keyloc **locs;

    if (node_is_null(ln))
        return CW_OK;
    if (ln->type != YAML_SEQUENCE_NODE) {
        cfg_error(ctx, LINE(ln), COL(ln),
                  "%s: expected a list (- {...}), "
                  "got %s",
                  sec->name, node_kind(ln));
        ctx->sec_bad[s] = true;
        return CW_OK;
    }
    n = (size_t)(ln->data.sequence.items.top - ln->data.sequence.items.start);
    if (n == 0)
        return CW_OK;
    arr = calloc(n, sec->item_size);
    locs = calloc(n, sizeof(*locs));
    if (arr == NULL || locs == NULL) {
        free(arr);
        free(locs);
        return CW_NOMEM;
    }
    *(void **)((char *)ctx->cfg + sec->offset) = arr;
    ctx->keylocs[s] = locs;
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *in =
            yaml_document_get_node(doc, ln->data.sequence.items.start[i]);
        void *item = arr + i * sec->item_size;
        struct cw_config_loc *loc = item; /* every item starts with its loc */
        char where[64];
        cw_status_t st;

        /* Count the item first so cw_config_free releases it. */
        (*(size_t *)((char *)ctx->cfg + sec->count_offset))++;
        locs[i] = calloc(sec->nkeys, sizeof(struct cfg_keyloc));
        if (locs[i] == NULL)
            return CW_NOMEM;
        if (in == NULL)
            continue;
        loc->file = ctx->cfg->path;
        loc->line = LINE(in);
        loc->column = COL(in);
        if (cfg_apply_defaults(sec->keys, sec->nkeys, item) != CW_OK)
            return CW_INTERNAL;
        snprintf(where, sizeof(where), "%s[%zu]", sec->name, i);
        if (in->type != YAML_MAPPING_NODE) {
            cfg_error(ctx, LINE(in), COL(in),
                      "%s: expected a mapping "
                      "({key: value, ...}), got %s",
                      where, node_kind(in));
            loc->line = 0; /* the cross checks skip this item */
            continue;
        }
        st = load_map(ctx, sec, item, doc, in, where, locs[i]);
        if (st != CW_OK)
            return st;
    }
    return CW_OK;
}

static cw_status_t load_root(struct cfg_ctx *ctx, yaml_document_t *doc)
{
    const struct cw_config_section *schema = cw_config_schema(NULL);
    yaml_node_t *root = yaml_document_get_root_node(doc);
    const char *names[SEC_COUNT];
    cw_status_t st;

    for (int s = 0; s < SEC_COUNT; s++) {
        names[s] = schema[s].name;
        if (!schema[s].is_list) {
            void *base = (char *)ctx->cfg + schema[s].offset;
            struct cw_config_loc *loc = base;
            if (cfg_apply_defaults(schema[s].keys, schema[s].nkeys, base) !=
                CW_OK)
                return CW_INTERNAL;
            loc->file = ctx->cfg->path;
            ctx->keylocs[s] = calloc(1, sizeof(*ctx->keylocs[s]));
            if (ctx->keylocs[s] == NULL)
                return CW_NOMEM;
            ctx->keylocs[s][0] =
                calloc(schema[s].nkeys, sizeof(struct cfg_keyloc));
            if (ctx->keylocs[s][0] == NULL)
                return CW_NOMEM;
        }
    }
    if (root == NULL || node_is_null(root)) {
        ctx->empty = true;
        if (!(ctx->flags & CW_CONFIG_ROUTES_ONLY))
            cfg_error(ctx, 1, 1,
                      "empty configuration: expected a mapping "
                      "with at least a networks section");
        return CW_OK;
    }
    if (root->type != YAML_MAPPING_NODE) {
        cfg_error(ctx, LINE(root), COL(root),
                  "expected a mapping of "
                  "sections (gateway:, networks:, routes:, ...), got %s",
                  node_kind(root));
        ctx->empty = true;
        return CW_OK;
    }
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start;
         p < root->data.mapping.pairs.top; p++) {
        yaml_node_t *kn = yaml_document_get_node(doc, p->key);
        yaml_node_t *vn = yaml_document_get_node(doc, p->value);
        int s;

        if (kn == NULL || vn == NULL)
            continue;
        if (kn->type != YAML_SCALAR_NODE) {
            cfg_error(ctx, LINE(kn), COL(kn),
                      "section names must be plain "
                      "words, got %s",
                      node_kind(kn));
            continue;
        }
        s = cfg_section_find((const char *)kn->data.scalar.value);
        if (s < 0) {
            unknown_key(ctx, kn, "the top level", names, SEC_COUNT);
            continue;
        }
        if (ctx->sec_loc[s].line) {
            cfg_error(ctx, LINE(kn), COL(kn),
                      "duplicate section '%s' (first "
                      "given at line %u)",
                      schema[s].name, ctx->sec_loc[s].line);
            continue;
        }
        ctx->sec_loc[s].line = LINE(kn);
        ctx->sec_loc[s].column = COL(kn);
        if ((ctx->flags & CW_CONFIG_ROUTES_ONLY) && s != SEC_ROUTES) {
            cfg_error(ctx, LINE(kn), COL(kn),
                      "section '%s' is not allowed "
                      "in a client routes file (only routes)",
                      schema[s].name);
            continue;
        }
        if (s == SEC_ACL)
            ctx->cfg->has_acl = true;
        if (schema[s].is_list) {
            st = load_list(ctx, s, doc, vn);
        } else if (node_is_null(vn)) {
            st = CW_OK;
        } else if (vn->type != YAML_MAPPING_NODE) {
            cfg_error(ctx, LINE(vn), COL(vn),
                      "%s: expected a mapping "
                      "({key: value, ...}), got %s",
                      schema[s].name, node_kind(vn));
            st = CW_OK;
        } else {
            void *base = (char *)ctx->cfg + schema[s].offset;
            struct cw_config_loc *loc = base;
            loc->line = LINE(vn);
            loc->column = COL(vn);
            st = load_map(ctx, &schema[s], base, doc, vn, schema[s].name,
                          ctx->keylocs[s][0]);
        }
        if (st != CW_OK)
            return st;
    }
    return CW_OK;
}

/* Column (1-based) of the first tab in the indentation of line @p line
 * (0-based) of text, or 0 when its indentation has none. */
static unsigned indent_tab(const char *text, size_t len, size_t line)
{
    size_t i = 0;

    for (size_t l = 0; l < line && i < len; i++)
        if (text[i] == '\n')
            l++;
    for (size_t start = i; i < len && (text[i] == ' ' || text[i] == '\t'); i++)
        if (text[i] == '\t')
            return (unsigned)(i - start + 1);
    return 0;
}

static void syntax_error(struct cfg_ctx *ctx, const yaml_parser_t *parser,
                         const char *text, size_t len)
{
    const char *problem = parser->problem ? parser->problem : "invalid YAML";
    unsigned tab;

    if (parser->error == YAML_MEMORY_ERROR) {
        cfg_error(ctx, 0, 0, "out of memory while parsing");
        return;
    }
    /* libyaml says "found character that cannot start any token" (or
     * speaks of a tab violating indentation) for what is, to a reader, a
     * tab where spaces belong. */
    tab = indent_tab(text, len, parser->problem_mark.line);
    if (tab) {
        cfg_error(ctx, (unsigned)parser->problem_mark.line + 1, tab,
                  "tabs are not allowed for indentation (YAML indents with "
                  "spaces)");
        return;
    }
    if (parser->context)
        cfg_error(ctx, (unsigned)parser->problem_mark.line + 1,
                  (unsigned)parser->problem_mark.column + 1,
                  "YAML syntax error: %s %s (line %u)", problem,
                  parser->context, (unsigned)parser->context_mark.line + 1);
    else
        cfg_error(ctx, (unsigned)parser->problem_mark.line + 1,
                  (unsigned)parser->problem_mark.column + 1,
                  "YAML syntax error: %s", problem);
}

/* A configuration is at most four levels deep; refuse absurd nesting
 * before libyaml builds a document of it (its cost grows faster than the
 * input).  Syntax errors are left for the real load to report. */
#define CFG_MAX_DEPTH 32

static bool prescan_ok(struct cfg_ctx *ctx, const char *text, size_t len)
{
    yaml_parser_t parser;
    yaml_event_t ev;
    unsigned depth = 0;
    bool ok = true;

    if (!yaml_parser_initialize(&parser))
        return true;
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    for (;;) {
        bool end;
        if (!yaml_parser_parse(&parser, &ev))
            break;
        if (ev.type == YAML_SEQUENCE_START_EVENT ||
            ev.type == YAML_MAPPING_START_EVENT) {
            if (++depth > CFG_MAX_DEPTH) {
                cfg_error(ctx, (unsigned)ev.start_mark.line + 1,
                          (unsigned)ev.start_mark.column + 1,
                          "nesting deeper than %d levels: a configuration "
                          "has at most 4",
                          CFG_MAX_DEPTH);
                ok = false;
            }
        } else if (ev.type == YAML_SEQUENCE_END_EVENT ||
                   ev.type == YAML_MAPPING_END_EVENT) {
            depth--;
        }
        end = ev.type == YAML_STREAM_END_EVENT;
        yaml_event_delete(&ev);
        if (end || !ok)
            break;
    }
    yaml_parser_delete(&parser);
    return ok;
}

static void ctx_free_keylocs(struct cfg_ctx *ctx)
{
    const struct cw_config_section *schema = cw_config_schema(NULL);

    for (int s = 0; s < SEC_COUNT; s++) {
        size_t n = 1;
        if (ctx->keylocs[s] == NULL)
            continue;
        if (schema[s].is_list)
            n = *(size_t *)((char *)ctx->cfg + schema[s].count_offset);
        for (size_t i = 0; i < n; i++)
            free(ctx->keylocs[s][i]);
        free(ctx->keylocs[s]);
        ctx->keylocs[s] = NULL;
    }
}

cw_status_t cw_config_load_buffer(const char *name, const char *text,
                                  size_t len, unsigned flags,
                                  struct cw_config_diag *diag,
                                  struct cw_config **cfg_p)
{
    struct cfg_ctx ctx;
    yaml_parser_t parser;
    yaml_document_t doc;
    yaml_document_t doc2;
    cw_status_t st = CW_OK;

    if (name == NULL || (text == NULL && len) || cfg_p == NULL)
        return CW_INVALID_ARG;
    memset(&ctx, 0, sizeof(ctx));
    ctx.flags = flags;
    ctx.diag = diag;
    ctx.cfg = calloc(1, sizeof(*ctx.cfg));
    if (ctx.cfg == NULL)
        return CW_NOMEM;
    ctx.cfg->path = strdup(name);
    if (ctx.cfg->path == NULL) {
        st = CW_NOMEM;
        goto err_free_cfg;
    }
    ctx.file = ctx.cfg->path;
    ctx.cfg->routes_only = (flags & CW_CONFIG_ROUTES_ONLY) != 0;
    if (!prescan_ok(&ctx, text, len)) {
        cfg_flush(&ctx);
        st = CW_CONFIG;
        goto err_free_cfg;
    }
    if (!yaml_parser_initialize(&parser)) {
        st = CW_NOMEM;
        goto err_free_cfg;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        syntax_error(&ctx, &parser, text, len);
        goto err_parser;
    }
    st = load_root(&ctx, &doc);
    if (st == CW_OK)
        cfg_check(&ctx);
    yaml_document_delete(&doc);
    if (st != CW_OK)
        goto err_parser;
    /* One document per file: a second one is a mistake, not ignored. */
    if (!yaml_parser_load(&parser, &doc2)) {
        syntax_error(&ctx, &parser, text, len);
    } else {
        yaml_node_t *r2 = yaml_document_get_root_node(&doc2);
        if (r2)
            cfg_error(&ctx, LINE(r2), COL(r2),
                      "a second YAML document "
                      "('---') is not allowed: one configuration per file");
        yaml_document_delete(&doc2);
    }
err_parser:
    yaml_parser_delete(&parser);
    ctx_free_keylocs(&ctx);
    free(ctx.entries);
    cfg_flush(&ctx);
    if (st == CW_OK && ctx.nerrors == 0) {
        *cfg_p = ctx.cfg;
        return CW_OK;
    }
    if (st == CW_OK)
        st = CW_CONFIG;
err_free_cfg:
    cw_config_free(ctx.cfg);
    return st;
}

cw_status_t cw_config_load(const char *path, unsigned flags,
                           struct cw_config_diag *diag,
                           struct cw_config **cfg_p)
{
    struct stat sb;
    char *buf = NULL;
    size_t off = 0;
    cw_status_t st;
    int fd;

    if (path == NULL || cfg_p == NULL)
        return CW_INVALID_ARG;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        cw_config_diag_add(diag, path, 0, 0, "cannot open: %s",
                           strerror(errno));
        return CW_IO;
    }
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) ||
        (uint64_t)sb.st_size > CFG_FILE_MAX) {
        cw_config_diag_add(diag, path, 0, 0,
                           "not a regular file of at most "
                           "%u bytes",
                           CFG_FILE_MAX);
        st = CW_IO;
        goto err_close;
    }
    buf = malloc((size_t)sb.st_size + 1);
    if (buf == NULL) {
        st = CW_NOMEM;
        goto err_close;
    }
    while (off < (size_t)sb.st_size) {
        ssize_t r = read(fd, buf + off, (size_t)sb.st_size - off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            cw_config_diag_add(diag, path, 0, 0, "read() failed: %s",
                               r < 0 ? strerror(errno) : "file shrank");
            st = CW_IO;
            goto err_free_buf;
        }
        off += (size_t)r;
    }
    buf[off] = '\0';
    st = cw_config_load_buffer(path, buf, off, flags, diag, cfg_p);
err_free_buf:
    free(buf);
err_close:
    close(fd);
    return st;
}

void cw_config_free(struct cw_config *cfg)
{
    const struct cw_config_section *schema = cw_config_schema(NULL);

    if (cfg == NULL)
        return;
    for (int s = 0; s < SEC_COUNT; s++) {
        const struct cw_config_section *sec = &schema[s];
        if (!sec->is_list) {
            for (size_t k = 0; k < sec->nkeys; k++)
                cfg_free_value(&sec->keys[k], (char *)cfg + sec->offset);
            continue;
        }
        char *arr = *(char **)((char *)cfg + sec->offset);
        size_t n = *(size_t *)((char *)cfg + sec->count_offset);
        for (size_t i = 0; i < n; i++)
            for (size_t k = 0; k < sec->nkeys; k++)
                cfg_free_value(&sec->keys[k], arr + i * sec->item_size);
        free(arr);
    }
    free(cfg->path);
    free(cfg);
}

int cw_config_network_find(const struct cw_config *cfg, const char *name)
{
    if (cfg == NULL || name == NULL)
        return -1;
    for (size_t i = 0; i < cfg->nnetworks; i++)
        if (cfg->networks[i].name && strcmp(cfg->networks[i].name, name) == 0)
            return (int)i;
    return -1;
}

int cw_config_service_find(const struct cw_config *cfg, const char *name)
{
    if (cfg == NULL || name == NULL)
        return -1;
    for (size_t i = 0; i < cfg->nservices; i++)
        if (cfg->services[i].name && strcmp(cfg->services[i].name, name) == 0)
            return (int)i;
    return -1;
}
