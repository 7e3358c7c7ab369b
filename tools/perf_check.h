/* What cw-perf checks and counts: the data pattern --verify fills and
 * compares, and the per-call latency histogram behind p50/p99/p99.9.
 * Header-only; cw-perf's alone. */
#ifndef CW_PERF_CHECK_H
#define CW_PERF_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- data pattern ------------------------------------------------------ */
/*
 * Byte i of the pattern of seed S is byte (i % 8) of word i / 8, word k
 * being S + (k + 1) golden steps (a Weyl sequence: one add a word, no two
 * words of a buffer alike).  Every call draws its own seed through
 * splitmix64 (perf_seed), so an answer that belongs to another call, or
 * one left over from an earlier transfer into the same buffer, differs
 * from the expected pattern within its first 8 bytes, and bytes moved to
 * another offset differ where they land.
 */
#define PERF_GOLDEN 0x9e3779b97f4a7c15ull

static inline uint64_t perf_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The seed of call @p n of a run whose nonce is @p nonce. */
static inline uint64_t perf_seed(uint64_t nonce, uint64_t n)
{
    return perf_mix(nonce + n * PERF_GOLDEN);
}

/* Word @p k of the pattern of @p seed. */
static inline uint64_t perf_pattern_word(uint64_t seed, size_t k)
{
    return seed + ((uint64_t)k + 1) * PERF_GOLDEN;
}

static inline uint8_t perf_pattern_byte(uint64_t seed, size_t i)
{
    return (uint8_t)(perf_pattern_word(seed, i / 8) >> (8 * (i % 8)));
}

/* The pattern is defined byte by byte (byte j of a word is bits 8j..8j+7),
 * so a word goes to and from memory least significant byte first; on a
 * little-endian host that is one unaligned load or store. */
static inline void perf_store_le64(uint8_t *p, uint64_t w)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(p, &w, 8);
#else
    for (unsigned j = 0; j < 8; j++)
        p[j] = (uint8_t)(w >> (8 * j));
#endif
}

static inline uint64_t perf_load_le64(const uint8_t *p)
{
    uint64_t w = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(&w, p, 8);
#else
    for (unsigned j = 0; j < 8; j++)
        w |= (uint64_t)p[j] << (8 * j);
#endif
    return w;
}

/* Write bytes [@p from, @p to) of the pattern at p[from..to). */
static inline void perf_pattern_fill(uint8_t *p, size_t from, size_t to,
                                     uint64_t seed)
{
    size_t i = from;

    for (; i < to && i % 8 != 0; i++)
        p[i] = perf_pattern_byte(seed, i);
    for (uint64_t w = perf_pattern_word(seed, i / 8); i + 8 <= to;
         i += 8, w += PERF_GOLDEN)
        perf_store_le64(p + i, w);
    for (; i < to; i++)
        p[i] = perf_pattern_byte(seed, i);
}

/* Offset of the first of the @p len bytes at @p p that is not the
 * pattern of @p seed, or @p len if all are.  A word at a time: the first
 * differing byte of a word is its lowest nonzero byte of the difference. */
static inline size_t perf_pattern_find(const uint8_t *p, size_t len,
                                       uint64_t seed)
{
    size_t i = 0;

    for (uint64_t w = perf_pattern_word(seed, 0); i + 8 <= len;
         i += 8, w += PERF_GOLDEN) {
        uint64_t d = perf_load_le64(p + i) ^ w;
        if (d != 0)
            return i + (size_t)__builtin_ctzll(d) / 8;
    }
    for (; i < len; i++)
        if (p[i] != perf_pattern_byte(seed, i))
            return i;
    return len;
}

/* ---- latency histogram ------------------------------------------------- */
/*
 * Log-linear, in nanoseconds: values under 32 ns exactly, above that 16
 * buckets per octave (a bucket is at most 1/16 of its lower bound wide, so
 * a reported value is within 3.2% of the true one).  Exact count, minimum
 * and maximum alongside.
 */
#define PERF_HIST_SUB     16
#define PERF_HIST_BUCKETS ((64 - 3) * PERF_HIST_SUB)

struct perf_hist {
    uint64_t n, min, max;
    uint64_t count[PERF_HIST_BUCKETS];
};

static inline void perf_hist_reset(struct perf_hist *hi)
{
    memset(hi, 0, sizeof(*hi));
    hi->min = UINT64_MAX;
}

static inline unsigned perf_hist_bucket(uint64_t v)
{
    unsigned msb;

    if (v < 2 * PERF_HIST_SUB)
        return (unsigned)v;
    msb = 63u - (unsigned)__builtin_clzll(v);
    return (msb - 3) * PERF_HIST_SUB +
           (unsigned)((v >> (msb - 4)) & (PERF_HIST_SUB - 1));
}

/* The middle of bucket @p b. */
static inline uint64_t perf_hist_value(unsigned b)
{
    unsigned shift;

    if (b < 2 * PERF_HIST_SUB)
        return b;
    shift = b / PERF_HIST_SUB - 1;
    return ((uint64_t)(PERF_HIST_SUB + b % PERF_HIST_SUB) << shift) +
           ((1ull << shift) >> 1);
}

static inline void perf_hist_add(struct perf_hist *hi, uint64_t v)
{
    hi->count[perf_hist_bucket(v)]++;
    hi->n++;
    if (v < hi->min)
        hi->min = v;
    if (v > hi->max)
        hi->max = v;
}

/* The value at quantile @p q (0 < q <= 1), kept within [min, max] so that
 * quantiles never pass the exact maximum; 0 for an empty histogram. */
static inline uint64_t perf_hist_quantile(const struct perf_hist *hi, double q)
{
    uint64_t rank = (uint64_t)(q * (double)hi->n + 0.999999), seen = 0;

    if (hi->n == 0)
        return 0;
    if (rank < 1)
        rank = 1;
    for (unsigned b = 0; b < PERF_HIST_BUCKETS; b++) {
        seen += hi->count[b];
        if (seen >= rank) {
            uint64_t v = perf_hist_value(b);
            return v < hi->min ? hi->min : v > hi->max ? hi->max : v;
        }
    }
    return hi->max;
}

#endif
