/* The normalized dump: every key of every section, defaults filled in,
 * written so that it loads back to an identical configuration. */
#include "config_int.h"

/* An optional key with no default that was not written: left out. */
static bool key_absent(const struct cw_config_key *key, const void *base)
{
    return key->optional && key->def == NULL &&
           *(char *const *)((const char *)base + key->offset) == NULL;
}

static void dump_map(const struct cw_config_section *sec, const void *base,
                     const char *indent, const char *first, FILE *out)
{
    for (size_t k = 0; k < sec->nkeys; k++) {
        const struct cw_config_key *key = &sec->keys[k];
        if (key_absent(key, base))
            continue;
        fprintf(out, "%s%s: ", first ? first : indent, key->name);
        first = NULL;
        cfg_write_value(key, base, out);
        fputc('\n', out);
    }
}

cw_status_t cw_config_dump(const struct cw_config *cfg, FILE *out)
{
    const struct cw_config_section *schema = cw_config_schema(NULL);

    if (cfg == NULL || out == NULL)
        return CW_INVALID_ARG;
    fprintf(out, "# normalized configuration of %s%s\n", cfg->path,
            cfg->routes_only ? " (client routes file)" : "");
    for (int s = 0; s < SEC_COUNT; s++) {
        const struct cw_config_section *sec = &schema[s];
        if (cfg->routes_only && s != SEC_ROUTES)
            continue;
        if (s == SEC_ACL && !cfg->has_acl) {
            fprintf(out, "# acl: absent, so every destination is allowed\n");
            continue;
        }
        if (!sec->is_list) {
            fprintf(out, "%s:\n", sec->name);
            dump_map(sec, (const char *)cfg + sec->offset, "  ", NULL, out);
            continue;
        }
        const char *arr = *(char *const *)((const char *)cfg + sec->offset);
        size_t n = *(const size_t *)((const char *)cfg + sec->count_offset);
        if (n == 0) {
            fprintf(out, "%s: []\n", sec->name);
            continue;
        }
        fprintf(out, "%s:\n", sec->name);
        for (size_t i = 0; i < n; i++)
            dump_map(sec, arr + i * sec->item_size, "    ", "  - ", out);
    }
    fflush(out);
    return ferror(out) ? CW_IO : CW_OK;
}

/* One value as JSON: numbers and booleans bare, sizes, durations and
 * words as the strings the file would hold, strings and lists as the YAML
 * dump writes them (its double quotes are JSON's). */
static void json_value(const struct cw_config_key *key, const void *base,
                       FILE *out)
{
    bool quote = key->type == CW_CFG_SIZE || key->type == CW_CFG_DURATION ||
                 key->type == CW_CFG_ENUM ||
                 (key->type == CW_CFG_UINT && key->words != NULL &&
                  *(const uint32_t *)((const char *)base + key->offset) == 0);

    if (quote)
        fputc('"', out);
    cfg_write_value(key, base, out);
    if (quote)
        fputc('"', out);
}

static void json_map(const struct cw_config_section *sec, const void *base,
                     FILE *out)
{
    bool first = true;

    fputc('{', out);
    for (size_t k = 0; k < sec->nkeys; k++) {
        if (key_absent(&sec->keys[k], base))
            continue;
        fprintf(out, "%s\"%s\":", first ? "" : ",", sec->keys[k].name);
        first = false;
        json_value(&sec->keys[k], base, out);
    }
    fputc('}', out);
}

cw_status_t cw_config_dump_json(const struct cw_config *cfg, FILE *out)
{
    const struct cw_config_section *schema = cw_config_schema(NULL);

    if (cfg == NULL || out == NULL)
        return CW_INVALID_ARG;
    fputc('{', out);
    for (int s = 0; s < SEC_COUNT; s++) {
        const struct cw_config_section *sec = &schema[s];
        if (cfg->routes_only && s != SEC_ROUTES)
            continue;
        fprintf(out, "%s\"%s\":", s == 0 || cfg->routes_only ? "" : ",",
                sec->name);
        if (s == SEC_ACL && !cfg->has_acl) {
            fputs("null", out); /* absent: every destination allowed */
            continue;
        }
        if (!sec->is_list) {
            json_map(sec, (const char *)cfg + sec->offset, out);
            continue;
        }
        const char *arr = *(char *const *)((const char *)cfg + sec->offset);
        size_t n = *(const size_t *)((const char *)cfg + sec->count_offset);
        fputc('[', out);
        for (size_t i = 0; i < n; i++) {
            if (i > 0)
                fputc(',', out);
            json_map(sec, arr + i * sec->item_size, out);
        }
        fputc(']', out);
    }
    fputc('}', out);
    fflush(out);
    return ferror(out) ? CW_IO : CW_OK;
}
