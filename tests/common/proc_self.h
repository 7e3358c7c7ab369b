/*
 * Test helper: a number from one of this process's /proc files (resident
 * set in "status", write calls in "io", ...).
 */
#ifndef CW_TEST_PROC_SELF_H
#define CW_TEST_PROC_SELF_H

#include <stdio.h>
#include <string.h>

/* The number after "KEY:" in /proc/self/FILE, or -1 when the file cannot be
 * read or has no such line. */
static inline long long proc_self_value(const char *file, const char *key)
{
    char path[64], line[256];
    size_t klen = strlen(key);
    long long v = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/self/%s", file);
    f = fopen(path, "r");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, key, klen) == 0 && line[klen] == ':' &&
            sscanf(line + klen + 1, "%lld", &v) == 1)
            break;
    fclose(f);
    return v;
}

#endif
