/* Numbers on the tools' command lines: digits only (no sign, no spaces), a
 * bound, and sizes with K/M/G suffixes (powers of 1024, "KiB"/"KB" too).
 * Header-only; shared by cw-perf and cw-ping. */
#ifndef CW_CLI_NUM_H
#define CW_CLI_NUM_H

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

/* Parse the leading digits of @p s into *@p v_p and point *@p end_p after
 * them; false without digits or on overflow. */
static inline bool cli_digits(const char *s, unsigned long long *v_p,
                              char **end_p)
{
    if (s == NULL || !isdigit((unsigned char)s[0]))
        return false;
    errno = 0;
    *v_p = strtoull(s, end_p, 10);
    return errno == 0;
}

/* A whole number from 0 to @p max. */
static inline bool cli_uint(const char *s, unsigned long long max,
                            unsigned long long *v_p)
{
    unsigned long long v;
    char *end;

    if (!cli_digits(s, &v, &end) || *end != '\0' || v > max)
        return false;
    *v_p = v;
    return true;
}

/* A size: digits, then K, M or G (optionally followed by "i" and "B"). */
static inline bool cli_size(const char *s, unsigned long long max,
                            unsigned long long *v_p)
{
    unsigned long long v;
    unsigned shift = 0;
    char *end;

    if (!cli_digits(s, &v, &end))
        return false;
    switch (*end) {
    case 'k':
    case 'K':
        shift = 10;
        end++;
        break;
    case 'm':
    case 'M':
        shift = 20;
        end++;
        break;
    case 'g':
    case 'G':
        shift = 30;
        end++;
        break;
    default:
        break;
    }
    if (shift != 0 && *end == 'i')
        end++;
    if (shift != 0 && *end == 'B')
        end++;
    if (*end != '\0' || v > (max >> shift))
        return false;
    *v_p = v << shift;
    return true;
}

#endif
