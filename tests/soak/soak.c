/*
 * soak: the load of the soak experiments (tests/soak/soak.sh, reloads.sh;
 * docs/reliability.md).
 *
 *   soak serve URI ADDR_FILE
 *   soak run TARGET [--id N] [--rpcs N] [--inflight K] [--bulk-bytes B]
 *            [--bulk-min B] [--bulk-max B] [--duration S] [--timeout MS]
 *            [--seed S] [--stop-file F]
 *
 * Every payload is a pattern drawn from the client's key and the RPC's
 * sequence number and carries its FNV-1a; both ends check both.  The
 * server counts, per client, the sequence numbers it received (once,
 * again), the corrupted requests and the bulk bytes it checked; at the end
 * the client asks for those counts and prints them beside its own.  Exit
 * 0 only when nothing was lost, duplicated, corrupted or failed.
 * SOAK_CORRUPT=N in the environment of either side flips a byte of every
 * Nth datum it sends after its checksum (tests/soak/detects.sh).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "soak.h"

static uint64_t pat_word(uint64_t seed, uint64_t i)
{
    uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;

    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    return x ^ (x >> 29);
}

uint64_t soak_seed(uint64_t key, uint64_t seq)
{
    return pat_word(key, seq);
}

void soak_fill(void *p, size_t len, uint64_t seed)
{
    uint8_t *b = p;
    size_t i;

    for (i = 0; i + 8 <= len; i += 8) {
        uint64_t w = pat_word(seed, i / 8);
        memcpy(b + i, &w, 8);
    }
    if (i < len) {
        uint64_t w = pat_word(seed, i / 8);
        memcpy(b + i, &w, len - i);
    }
}

bool soak_check(const void *p, size_t len, uint64_t seed)
{
    const uint8_t *b = p;
    size_t i;

    for (i = 0; i + 8 <= len; i += 8) {
        uint64_t w = pat_word(seed, i / 8);
        if (memcmp(b + i, &w, 8) != 0)
            return false;
    }
    if (i < len) {
        uint64_t w = pat_word(seed, i / 8);
        if (memcmp(b + i, &w, len - i) != 0)
            return false;
    }
    return true;
}

uint64_t soak_fnv(const void *p, size_t len)
{
    const uint8_t *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    size_t i;

    for (i = 0; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
    }
    for (; i < len; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

bool soak_grow(uint8_t **a_p, size_t *n_p, uint64_t i, size_t first)
{
    size_t n = *n_p ? *n_p : first;
    uint8_t *p;

    if (i < *n_p)
        return true;
    while (n <= i)
        n *= 2;
    p = realloc(*a_p, n);
    if (p == NULL)
        return false;
    memset(p + *n_p, 0, n - *n_p);
    *a_p = p;
    *n_p = n;
    return true;
}

void soak_corrupt(void *p, size_t len)
{
    static uint64_t every, n;
    const char *e;

    if (every == 0) {
        e = getenv("SOAK_CORRUPT");
        every = e != NULL && atoi(e) > 0 ? (uint64_t)atoi(e) : UINT64_MAX;
    }
    if (len > 0 && ++n % every == 0)
        ((uint8_t *)p)[len / 2] ^= 0x20;
}

uint64_t soak_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: soak serve URI ADDR_FILE\n"
            "       soak run TARGET [--id N] [--rpcs N] [--inflight K]\n"
            "                [--bulk-bytes B] [--bulk-min B] [--bulk-max B]\n"
            "                [--duration S] [--timeout MS] [--seed S]\n"
            "                [--stop-file F]\n"
            "sizes take K, M, G (binary) suffixes\n");
}

/* A count or size: decimal, with an optional K, M or G (binary) suffix. */
static bool parse_num(const char *s, uint64_t *v_p)
{
    char *end;
    unsigned long long v;
    unsigned shift = 0;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || *s == '-')
        return false;
    switch (*end) {
    case 'K':
        shift = 10;
        end++;
        break;
    case 'M':
        shift = 20;
        end++;
        break;
    case 'G':
        shift = 30;
        end++;
        break;
    default:
        break;
    }
    if (*end != '\0' || (shift != 0 && v > (UINT64_MAX >> shift)))
        return false;
    *v_p = (uint64_t)v << shift;
    return true;
}

static int run_main(int argc, char **argv)
{
    struct soak_run_opts o = {
        .target = argv[0],
        .inflight = 32,
        .rpcs = 1000,
        .bulk_min = 1u << 20,
        .bulk_max = 64u << 20,
        .timeout_ms = 60000,
        .seed = 1,
    };

    for (int i = 1; i < argc; i += 2) {
        const char *k = argv[i];
        uint64_t v;

        if (strcmp(k, "--stop-file") == 0 && i + 1 < argc) {
            o.stop_file = argv[i + 1];
            continue;
        }
        if (i + 1 >= argc || !parse_num(argv[i + 1], &v)) {
            fprintf(stderr, "soak: %s needs a number\n", k);
            return 2;
        }
        if (strcmp(k, "--id") == 0 && v <= 65535)
            o.id = (unsigned)v;
        else if (strcmp(k, "--rpcs") == 0)
            o.rpcs = v;
        else if (strcmp(k, "--inflight") == 0 && v >= 1 && v <= 1024)
            o.inflight = (unsigned)v;
        else if (strcmp(k, "--bulk-bytes") == 0)
            o.bulk_bytes = v;
        else if (strcmp(k, "--bulk-min") == 0 && v >= 1 && v <= (1u << 30))
            o.bulk_min = v;
        else if (strcmp(k, "--bulk-max") == 0 && v >= 1 && v <= (1u << 30))
            o.bulk_max = v;
        else if (strcmp(k, "--duration") == 0 && v <= 86400 * 7)
            o.duration_s = (unsigned)v;
        else if (strcmp(k, "--timeout") == 0 && v >= 1)
            o.timeout_ms = v;
        else if (strcmp(k, "--seed") == 0)
            o.seed = v;
        else {
            fprintf(stderr, "soak: bad option or value: %s %s\n", k,
                    argv[i + 1]);
            return 2;
        }
    }
    if (o.bulk_min > o.bulk_max) {
        fprintf(stderr, "soak: --bulk-min is above --bulk-max\n");
        return 2;
    }
    if (o.rpcs == 0 && o.duration_s == 0) {
        fprintf(stderr, "soak: --rpcs 0 needs a --duration\n");
        return 2;
    }
    return soak_run(&o);
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "serve") == 0)
        return soak_serve(argv[2], argv[3]);
    if (argc >= 3 && strcmp(argv[1], "run") == 0)
        return run_main(argc - 2, argv + 2);
    usage(argc == 2 && strcmp(argv[1], "--help") == 0 ? stdout : stderr);
    return 2;
}
