/* JSON output of the tools (--json): strings escaped per RFC 8259 by
 * util/cw_json.c (the writer routing and causewayd use), NULL as null.
 * Shared by cw-info, cw-ping and cw-perf. */
#ifndef CW_CLI_JSON_H
#define CW_CLI_JSON_H

#include <stdio.h>

#include "cw_json.h"

/* @p s as a JSON string, quotes included; NULL as null. */
static inline void cli_json_str(FILE *out, const char *s)
{
    if (s == NULL)
        fputs("null", out);
    else
        cw_json_str(out, s);
}

#endif /* CW_CLI_JSON_H */
