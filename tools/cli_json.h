/* JSON output of the tools (--json): strings escaped per RFC 8259.
 * Header-only; shared by cw-info, cw-ping and cw-perf. */
#ifndef CW_CLI_JSON_H
#define CW_CLI_JSON_H

#include <stdio.h>

/* @p s as a JSON string, quotes included; NULL as null. */
static inline void cli_json_str(FILE *out, const char *s)
{
    if (s == NULL) {
        fputs("null", out);
        return;
    }
    fputc('"', out);
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;

        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 0x20)
            fprintf(out, "\\u%04x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

#endif /* CW_CLI_JSON_H */
