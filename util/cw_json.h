/*
 * JSON output helpers shared by routing (explain) and causewayd (admin
 * answers).  Built hidden, like the rest of util/.
 */
#ifndef CW_JSON_H
#define CW_JSON_H

#include <stdio.h>

/**
 * Write @p s to @p out as a JSON string: quoted, '"' and '\' escaped,
 * control characters and DEL as \u00XX.  NULL is written as "".
 */
void cw_json_str(FILE *out, const char *s);

#endif /* CW_JSON_H */
