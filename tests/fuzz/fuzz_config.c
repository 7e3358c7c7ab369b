/*
 * Deterministic random-mutation and truncation test of the config loader
 * (TAP).  Seeds are the YAML cases; every prefix of every seed is loaded,
 * then mutated variants (bit flips, byte insertions and deletions, token
 * splices, duplications) for a bounded number of rounds and seconds.
 *
 *   fuzz_config SEED_DIR... [--iterations N] [--seconds S]
 */
#include "config_fuzz_one.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_SEEDS      256
#define FUZZ_INPUT_MAX 8192

struct seed {
    uint8_t *data;
    size_t len;
};

static struct seed seeds[MAX_SEEDS];
static size_t nseeds;

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
    /* xorshift64*: deterministic, so a failure reproduces. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

static void add_seed_file(const char *path)
{
    FILE *f = fopen(path, "re");
    uint8_t *buf;
    size_t n;

    if (f == NULL || nseeds == MAX_SEEDS) {
        if (f)
            fclose(f);
        return;
    }
    buf = malloc(FUZZ_INPUT_MAX);
    n = buf ? fread(buf, 1, FUZZ_INPUT_MAX, f) : 0;
    fclose(f);
    if (buf == NULL)
        return;
    seeds[nseeds].data = buf;
    seeds[nseeds].len = n;
    nseeds++;
}

static void add_seed_dir(const char *dir, int depth)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[4096];

    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (e->d_type == DT_DIR && depth < 3)
            add_seed_dir(path, depth + 1);
        else if (len > 5 && strcmp(e->d_name + len - 5, ".yaml") == 0)
            add_seed_file(path);
    }
    closedir(d);
}

static const char *const tokens[] = {
    ":",           "- ",
    "{",           "}",
    "[",           "]",
    ",",           "\"",
    "'",           "\n",
    "  ",          "#",
    "&a ",         "*a",
    "!!str ",      "---\n",
    "...\n",       "? ",
    "|\n",         ">\n",
    "~",           "null",
    "\t",          "\\",
    "%YAML 1.1\n", "via: ",
    "gateway: ",   "dest: ",
    "*://*",       "svc:",
    "1MiB",        "30s",
    "0",           "18446744073709551615",
    "-1",          "ofi+tcp://",
    "/33",         "::",
    "@",           "\xff\xfe",
    "\0",
};

static size_t mutate(const struct seed *s, uint8_t *out)
{
    size_t len = s->len;
    unsigned nmut = 1 + (unsigned)(rng() % 8);

    memcpy(out, s->data, len);
    for (unsigned m = 0; m < nmut; m++) {
        size_t pos = len ? (size_t)(rng() % (len + 1)) : 0;
        switch (rng() % 6) {
        case 0: /* bit flip */
            if (len)
                out[pos % len] ^= (uint8_t)(1u << (rng() % 8));
            break;
        case 1: /* random byte insert */
            if (len < FUZZ_INPUT_MAX) {
                memmove(out + pos + 1, out + pos, len - pos);
                out[pos] = (uint8_t)rng();
                len++;
            }
            break;
        case 2: { /* delete a run */
            size_t n = 1 + (size_t)(rng() % 16);
            if (pos < len) {
                if (n > len - pos)
                    n = len - pos;
                memmove(out + pos, out + pos + n, len - pos - n);
                len -= n;
            }
            break;
        }
        case 3: { /* insert a YAML token */
            const char *tok =
                tokens[rng() % (sizeof(tokens) / sizeof(tokens[0]))];
            size_t tl = strlen(tok) ? strlen(tok) : 1;
            if (len + tl <= FUZZ_INPUT_MAX) {
                memmove(out + pos + tl, out + pos, len - pos);
                memcpy(out + pos, tok, tl);
                len += tl;
            }
            break;
        }
        case 4: { /* duplicate a chunk (repeated keys, items) */
            size_t n = 1 + (size_t)(rng() % 64);
            size_t from = len ? (size_t)(rng() % len) : 0;
            if (from + n > len)
                n = len - from;
            if (len + n <= FUZZ_INPUT_MAX && n) {
                uint8_t tmp[64];
                memcpy(tmp, out + from, n);
                memmove(out + pos + n, out + pos, len - pos);
                memcpy(out + pos, tmp, n);
                len += n;
            }
            break;
        }
        default: /* truncate */
            len = pos;
            break;
        }
    }
    return len;
}

int main(int argc, char **argv)
{
    unsigned long iterations = 20000;
    double seconds = 60;
    unsigned long failures = 0;
    unsigned long runs = 0;
    uint8_t *buf = malloc(FUZZ_INPUT_MAX);
    struct timespec t0, t1;
    unsigned long i;

    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--iterations") == 0 && a + 1 < argc)
            iterations = strtoul(argv[++a], NULL, 10);
        else if (strcmp(argv[a], "--seconds") == 0 && a + 1 < argc)
            seconds = strtod(argv[++a], NULL);
        else
            add_seed_dir(argv[a], 0);
    }
    printf("1..3\n");
    if (nseeds == 0 || buf == NULL) {
        printf("not ok 1 - seeds found\n");
        return 1;
    }
    printf("ok 1 - %zu seeds found\n", nseeds);
    /* Every prefix of every seed: truncated files. */
    for (size_t s = 0; s < nseeds; s++) {
        for (size_t l = 0; l <= seeds[s].len; l++) {
            memcpy(buf, seeds[s].data, l);
            if (config_fuzz_one(buf, l) != 0)
                failures++;
            runs++;
        }
    }
    printf("%sok 2 - %lu truncated inputs (%lu invariant failures)\n",
           failures ? "not " : "", runs, failures);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    runs = 0;
    for (i = 0; i < iterations; i++) {
        const struct seed *s = &seeds[rng() % nseeds];
        size_t len = mutate(s, buf);
        if (config_fuzz_one(buf, len) != 0) {
            failures++;
            fprintf(stderr, "fuzz: failing input (iteration %lu):\n%.*s\n", i,
                    (int)len, (const char *)buf);
        }
        runs++;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if ((double)(t1.tv_sec - t0.tv_sec) +
                (double)(t1.tv_nsec - t0.tv_nsec) / 1e9 >
            seconds)
            break;
    }
    printf("%sok 3 - %lu mutated inputs (%lu invariant failures; %lu of all "
           "inputs were valid configs)\n",
           failures ? "not " : "", runs, failures, config_fuzz_loaded);
    for (size_t s = 0; s < nseeds; s++)
        free(seeds[s].data);
    free(buf);
    return failures ? 1 : 0;
}
