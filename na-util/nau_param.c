/* na-util: plugin parameters. */
#include "nau_param.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *nau_param(const char *const *params, const char *key,
                      const char *env)
{
    const char *v = NULL;

    for (const char *const *p = params; p && p[0] && p[1]; p += 2)
        if (strcmp(p[0], key) == 0)
            v = p[1];
    return v != NULL || env == NULL ? v : getenv(env);
}

cw_status_t nau_param_uint(const char *s, uint64_t min, uint64_t max,
                           uint64_t *v_p)
{
    unsigned long long v;
    char *end;

    if (s == NULL || !isdigit((unsigned char)*s)) /* strtoull takes "-1" */
        return CW_INVALID_ARG;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max)
        return CW_INVALID_ARG;
    *v_p = v;
    return CW_OK;
}
