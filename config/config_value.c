/* Value parsers and formatters: one parser serves user input and the
 * schema's defaults, and the formatters write what the parsers accept. */
#include "config_int.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

struct unit {
    const char *name;
    uint64_t mult;
};

static const struct unit size_units[] = {
    {"TiB", 1ull << 40},
    {"GiB", 1ull << 30},
    {"MiB", 1ull << 20},
    {"KiB", 1ull << 10},
    {"B", 1},
    {NULL, 0},
};

static const struct unit duration_units[] = {
    {"h", 3600000000000ull}, {"m", 60000000000ull}, {"s", 1000000000ull},
    {"ms", 1000000ull},      {"us", 1000ull},       {NULL, 0},
};

/* Decimal digits then the rest; false on no digits or overflow. */
static bool parse_digits(const char *s, uint64_t *v_p, const char **end_p)
{
    uint64_t v = 0;
    const char *p = s;

    if (!isdigit((unsigned char)*p))
        return false;
    while (isdigit((unsigned char)*p)) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
        p++;
    }
    *v_p = v;
    *end_p = p;
    return true;
}

cw_status_t cfg_parse_uint(const char *s, uint64_t min, uint64_t max,
                           uint64_t *v_p, char *err, size_t errlen)
{
    uint64_t v;
    const char *end;

    if (!parse_digits(s, &v, &end) || *end != '\0') {
        snprintf(err, errlen,
                 "expected an integer between %" PRIu64 " and %" PRIu64
                 ", got '%.64s'",
                 min, max, s);
        return CW_INVALID_ARG;
    }
    if (v < min || v > max) {
        snprintf(err, errlen,
                 "%" PRIu64 " is out of range: expected an "
                 "integer between %" PRIu64 " and %" PRIu64,
                 v, min, max);
        return CW_INVALID_ARG;
    }
    *v_p = v;
    return CW_OK;
}

static cw_status_t parse_with_units(const char *s, const struct unit *units,
                                    bool unit_required, uint64_t *v_p)
{
    uint64_t v;
    const char *end;

    if (!parse_digits(s, &v, &end))
        return CW_INVALID_ARG;
    while (*end == ' ')
        end++;
    if (*end == '\0') {
        if (unit_required && v != 0)
            return CW_INVALID_ARG;
        *v_p = v;
        return CW_OK;
    }
    for (const struct unit *u = units; u->name; u++) {
        if (strcmp(end, u->name) == 0) {
            if (v > UINT64_MAX / u->mult)
                return CW_OVERFLOW;
            *v_p = v * u->mult;
            return CW_OK;
        }
    }
    return CW_INVALID_ARG;
}

/* Number with a unit, bounds-checked; what names the kind in messages. */
static cw_status_t parse_measure(const char *s, const struct unit *units,
                                 bool unit_required, uint64_t min, uint64_t max,
                                 const char *what,
                                 void (*fmt)(uint64_t, char *, size_t),
                                 uint64_t *v_p, char *err, size_t errlen)
{
    uint64_t v;
    char lo[32];
    char hi[32];

    if (parse_with_units(s, units, unit_required, &v) != CW_OK) {
        snprintf(err, errlen, "expected %s, got '%.64s'", what, s);
        return CW_INVALID_ARG;
    }
    if (v < min || v > max) {
        fmt(min, lo, sizeof(lo));
        fmt(max, hi, sizeof(hi));
        snprintf(err, errlen,
                 "%.64s is out of range: expected between %s "
                 "and %s",
                 s, lo, hi);
        return CW_INVALID_ARG;
    }
    *v_p = v;
    return CW_OK;
}

cw_status_t cfg_parse_size(const char *s, uint64_t min, uint64_t max,
                           uint64_t *v_p, char *err, size_t errlen)
{
    return parse_measure(s, size_units, false, min, max,
                         "a size such as 64KiB or 1MiB (units B, KiB, MiB, "
                         "GiB, TiB)",
                         cfg_format_size, v_p, err, errlen);
}

cw_status_t cfg_parse_duration(const char *s, uint64_t min, uint64_t max,
                               uint64_t *v_p, char *err, size_t errlen)
{
    return parse_measure(s, duration_units, true, min, max,
                         "a duration such as 500ms or 30s (units us, ms, s, "
                         "m, h)",
                         cfg_format_duration, v_p, err, errlen);
}

cw_status_t cfg_parse_bool(const char *s, bool *v_p, char *err, size_t errlen)
{
    if (strcmp(s, "true") == 0) {
        *v_p = true;
        return CW_OK;
    }
    if (strcmp(s, "false") == 0) {
        *v_p = false;
        return CW_OK;
    }
    snprintf(err, errlen, "expected true or false, got '%.64s'", s);
    return CW_INVALID_ARG;
}

cw_status_t cfg_parse_enum(const char *s, const char *const *words, int *v_p,
                           char *err, size_t errlen)
{
    size_t n = 0;
    size_t off;
    const char *hint;

    for (; words[n]; n++) {
        if (strcmp(s, words[n]) == 0) {
            *v_p = (int)n;
            return CW_OK;
        }
    }
    off = (size_t)snprintf(err, errlen, "expected one of ");
    for (size_t i = 0; i < n && off < errlen; i++)
        off += (size_t)snprintf(err + off, errlen - off, "%s%s", i ? ", " : "",
                                words[i]);
    if (off < errlen)
        off += (size_t)snprintf(err + off, errlen - off, "; got '%.64s'", s);
    hint = cfg_suggest(s, words, n);
    if (hint && off < errlen)
        snprintf(err + off, errlen - off, " (did you mean '%s'?)", hint);
    return CW_INVALID_ARG;
}

cw_status_t cfg_parse_name(const char *s, char *err, size_t errlen)
{
    size_t len = strlen(s);

    if (len == 0 || len > 31) {
        snprintf(err, errlen,
                 "expected a name of 1 to 31 characters, got "
                 "'%.64s'",
                 s);
        return CW_INVALID_ARG;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!isalnum(c) && c != '_' && c != '-' && c != '.') {
            snprintf(err, errlen,
                     "expected a name of letters, digits, '_', "
                     "'-' and '.', got '%.64s'",
                     s);
            return CW_INVALID_ARG;
        }
    }
    return CW_OK;
}

cw_status_t cfg_parse_hostport(const char *s, char *err, size_t errlen)
{
    char host[CW_URI_LOCATION_MAX];
    uint16_t port;

    if (s[0] == '\0')
        return CW_OK;
    /* Port 0 lets the kernel pick; the gateway logs what it bound. */
    if (cw_location_split(s, host, &port) != CW_OK || host[0] == '\0' ||
        strchr(s, ':') == NULL) {
        (void)port;
        snprintf(err, errlen,
                 "expected \"host:port\" (port 0 picks a free "
                 "one; \"\" disables), got '%.64s'",
                 s);
        return CW_INVALID_ARG;
    }
    return CW_OK;
}

cw_status_t cfg_parse_allow(const char *s, char *err, size_t errlen)
{
    struct cw_addr_pattern pat;
    char why[CFG_ERR_MAX];

    if (strncmp(s, "svc:", 4) == 0) {
        if (strcmp(s + 4, "*") == 0 ||
            cfg_parse_name(s + 4, why, sizeof(why)) == CW_OK)
            return CW_OK;
        snprintf(err, errlen,
                 "expected \"svc:<name>\" or \"svc:*\", got "
                 "'%.64s'",
                 s);
        return CW_INVALID_ARG;
    }
    if (strcmp(s, "*") == 0)
        return CW_OK;
    if (cw_addr_pattern_parse(s, &pat, why, sizeof(why)) != CW_OK) {
        snprintf(err, errlen,
                 "expected \"svc:<name>\", \"*\" or a "
                 "destination pattern: %s",
                 why);
        return CW_INVALID_ARG;
    }
    if (cfg_fabric_check(pat.plugin, pat.protocol, why, sizeof(why)) != CW_OK) {
        snprintf(err, errlen, "%s", why);
        return CW_INVALID_ARG;
    }
    return CW_OK;
}

static void format_units(uint64_t v, const struct unit *units, const char *zero,
                         char *buf, size_t len)
{
    if (v == 0) {
        snprintf(buf, len, "%s", zero);
        return;
    }
    for (const struct unit *u = units; u->name; u++) {
        if (v % u->mult == 0) {
            snprintf(buf, len, "%" PRIu64 "%s", v / u->mult, u->name);
            return;
        }
    }
    snprintf(buf, len, "%" PRIu64, v);
}

void cfg_format_size(uint64_t v, char *buf, size_t len)
{
    format_units(v, size_units, "0", buf, len);
}

void cfg_format_duration(uint64_t ns, char *buf, size_t len)
{
    /* Below a microsecond cannot be written; the parser never makes it. */
    format_units(ns, duration_units, "0s", buf, len);
}

void cfg_format_bounds(const struct cw_config_key *key, char *buf, size_t len)
{
    char lo[32];
    char hi[32];

    switch (key->type) {
    case CW_CFG_UINT:
        if (key->words != NULL)
            snprintf(buf, len, "%s, %" PRIu64 "..%" PRIu64, key->words[0],
                     key->min, key->max);
        else
            snprintf(buf, len, "%" PRIu64 "..%" PRIu64, key->min, key->max);
        break;
    case CW_CFG_SIZE:
        cfg_format_size(key->min, lo, sizeof(lo));
        cfg_format_size(key->max, hi, sizeof(hi));
        snprintf(buf, len, "%s..%s", lo, hi);
        break;
    case CW_CFG_DURATION:
        cfg_format_duration(key->min, lo, sizeof(lo));
        cfg_format_duration(key->max, hi, sizeof(hi));
        snprintf(buf, len, "%s..%s", lo, hi);
        break;
    case CW_CFG_ENUM: {
        size_t off = 0;
        buf[0] = '\0';
        for (size_t i = 0; key->words[i] && off < len; i++)
            off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? ", " : "",
                                    key->words[i]);
        break;
    }
    case CW_CFG_ADDRLIST:
    case CW_CFG_ALLOWLIST:
        snprintf(buf, len, "%" PRIu64 "..%" PRIu64 " entries", key->min,
                 key->max);
        break;
    default:
        snprintf(buf, len, "-");
        break;
    }
}

#define FIELD(base, key, type) ((type *)((char *)(base) + (key)->offset))
#define CFIELD(base, key, type)                                                \
    ((const type *)((const char *)(base) + (key)->offset))

cw_status_t cfg_store_scalar(const struct cw_config_key *key, void *base,
                             const char *text, char *err, size_t errlen)
{
    uint64_t v;
    cw_status_t st = CW_OK;
    char *dup;

    switch (key->type) {
    case CW_CFG_UINT:
        /* An integer key may take one word too (words[0]), stored as 0:
         * "auto" for gateway.threads. */
        if (key->words != NULL && strcmp(text, key->words[0]) == 0) {
            *FIELD(base, key, uint32_t) = 0;
            return CW_OK;
        }
        st = cfg_parse_uint(text, key->min, key->max, &v, err, errlen);
        if (st != CW_OK && key->words != NULL)
            snprintf(err, errlen,
                     "expected %s or an integer between %" PRIu64
                     " and %" PRIu64 ", got '%.64s'",
                     key->words[0], key->min, key->max, text);
        if (st == CW_OK)
            *FIELD(base, key, uint32_t) = (uint32_t)v;
        return st;
    case CW_CFG_SIZE:
        st = cfg_parse_size(text, key->min, key->max, &v, err, errlen);
        if (st == CW_OK)
            *FIELD(base, key, uint64_t) = v;
        return st;
    case CW_CFG_DURATION:
        st = cfg_parse_duration(text, key->min, key->max, &v, err, errlen);
        if (st == CW_OK)
            *FIELD(base, key, uint64_t) = v;
        return st;
    case CW_CFG_BOOL:
        return cfg_parse_bool(text, FIELD(base, key, bool), err, errlen);
    case CW_CFG_ENUM:
        return cfg_parse_enum(text, key->words, FIELD(base, key, int), err,
                              errlen);
    case CW_CFG_NAME:
        st = cfg_parse_name(text, err, errlen);
        break;
    case CW_CFG_HOSTPORT:
        st = cfg_parse_hostport(text, err, errlen);
        break;
    case CW_CFG_ADDR: {
        struct cw_uri uri;
        char why[CFG_ERR_MAX];
        if (cw_uri_parse_err(text, &uri, why, sizeof(why)) != CW_OK) {
            snprintf(err, errlen, "%s", why);
            return CW_INVALID_ARG;
        }
        break;
    }
    case CW_CFG_PATTERN: {
        struct cw_addr_pattern pat;
        char why[CFG_ERR_MAX];
        if (cw_addr_pattern_parse(text, &pat, why, sizeof(why)) != CW_OK) {
            snprintf(err, errlen, "expected a destination pattern: %s", why);
            return CW_INVALID_ARG;
        }
        break;
    }
    case CW_CFG_STRING:
        break;
    case CW_CFG_ADDRLIST:
    case CW_CFG_ALLOWLIST:
        snprintf(err, errlen, "expected a list");
        return CW_INVALID_ARG;
    }
    if (st != CW_OK)
        return st;
    dup = strdup(text);
    if (dup == NULL) {
        snprintf(err, errlen, "out of memory");
        return CW_NOMEM;
    }
    free(*FIELD(base, key, char *));
    *FIELD(base, key, char *) = dup;
    return CW_OK;
}

void cfg_free_value(const struct cw_config_key *key, void *base)
{
    switch (key->type) {
    case CW_CFG_STRING:
    case CW_CFG_NAME:
    case CW_CFG_ADDR:
    case CW_CFG_HOSTPORT:
    case CW_CFG_PATTERN:
        free(*FIELD(base, key, char *));
        *FIELD(base, key, char *) = NULL;
        break;
    case CW_CFG_ADDRLIST:
    case CW_CFG_ALLOWLIST: {
        struct cw_config_strlist *l =
            FIELD(base, key, struct cw_config_strlist);
        for (size_t i = 0; i < l->n; i++)
            free(l->v[i]);
        free(l->v);
        l->v = NULL;
        l->n = 0;
        break;
    }
    default:
        break;
    }
}

cw_status_t cfg_apply_defaults(const struct cw_config_key *keys, size_t nkeys,
                               void *base)
{
    char err[CFG_ERR_MAX];

    for (size_t i = 0; i < nkeys; i++) {
        if (keys[i].def == NULL)
            continue;
        if (cfg_store_scalar(&keys[i], base, keys[i].def, err, sizeof(err)) !=
            CW_OK) {
            fprintf(stderr,
                    "causeway config schema: default '%s' of '%s' "
                    "is invalid: %s\n",
                    keys[i].def, keys[i].name, err);
            return CW_INTERNAL;
        }
    }
    return CW_OK;
}

static bool str_equal(const char *a, const char *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    return strcmp(a, b) == 0;
}

bool cfg_value_equal(const struct cw_config_key *key, const void *a,
                     const void *b)
{
    switch (key->type) {
    case CW_CFG_UINT:
        return *CFIELD(a, key, uint32_t) == *CFIELD(b, key, uint32_t);
    case CW_CFG_SIZE:
    case CW_CFG_DURATION:
        return *CFIELD(a, key, uint64_t) == *CFIELD(b, key, uint64_t);
    case CW_CFG_BOOL:
        return *CFIELD(a, key, bool) == *CFIELD(b, key, bool);
    case CW_CFG_ENUM:
        return *CFIELD(a, key, int) == *CFIELD(b, key, int);
    case CW_CFG_ADDRLIST:
    case CW_CFG_ALLOWLIST: {
        const struct cw_config_strlist *x =
            CFIELD(a, key, struct cw_config_strlist);
        const struct cw_config_strlist *y =
            CFIELD(b, key, struct cw_config_strlist);
        if (x->n != y->n)
            return false;
        for (size_t i = 0; i < x->n; i++)
            if (strcmp(x->v[i], y->v[i]) != 0)
                return false;
        return true;
    }
    default:
        return str_equal(*CFIELD(a, key, char *const),
                         *CFIELD(b, key, char *const));
    }
}

static void write_quoted(const char *s, FILE *out)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(out, "\\u%04x", *p); /* YAML and JSON both */
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

void cfg_write_value(const struct cw_config_key *key, const void *base,
                     FILE *out)
{
    char buf[64];

    switch (key->type) {
    case CW_CFG_UINT:
        if (key->words != NULL && *CFIELD(base, key, uint32_t) == 0)
            fputs(key->words[0], out);
        else
            fprintf(out, "%" PRIu32, *CFIELD(base, key, uint32_t));
        break;
    case CW_CFG_SIZE:
        cfg_format_size(*CFIELD(base, key, uint64_t), buf, sizeof(buf));
        fputs(buf, out);
        break;
    case CW_CFG_DURATION:
        cfg_format_duration(*CFIELD(base, key, uint64_t), buf, sizeof(buf));
        fputs(buf, out);
        break;
    case CW_CFG_BOOL:
        fputs(*CFIELD(base, key, bool) ? "true" : "false", out);
        break;
    case CW_CFG_ENUM:
        fputs(key->words[*CFIELD(base, key, int)], out);
        break;
    case CW_CFG_ADDRLIST:
    case CW_CFG_ALLOWLIST: {
        const struct cw_config_strlist *l =
            CFIELD(base, key, struct cw_config_strlist);
        fputc('[', out);
        for (size_t i = 0; i < l->n; i++) {
            if (i)
                fputs(", ", out);
            write_quoted(l->v[i], out);
        }
        fputc(']', out);
        break;
    }
    default: {
        const char *s = *CFIELD(base, key, char *const);
        if (s == NULL)
            fputs("null", out);
        else
            write_quoted(s, out);
        break;
    }
    }
}
