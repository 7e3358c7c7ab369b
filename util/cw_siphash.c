/* SipHash-2-4 and SipHash-1-3, written from the paper's description
 * (section 2), and the process's random key. */
#include "cw_siphash.h"
#include "cw_mutex.h"

#include <causeway/log.h>

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static inline uint64_t rotl(uint64_t x, unsigned b)
{
    return (x << b) | (x >> (64 - b));
}

/* A little-endian word from @p n (at most 8) bytes at @p p, the rest zero:
 * one unaligned load where the compiler can, on any host. */
static inline uint64_t load_le(const uint8_t *p, size_t n)
{
    uint64_t v = 0;

    memcpy(&v, p, n);
    return le64toh(v);
}

#define SIPROUND(v0, v1, v2, v3)                                               \
    do {                                                                       \
        v0 += v1;                                                              \
        v1 = rotl(v1, 13);                                                     \
        v1 ^= v0;                                                              \
        v0 = rotl(v0, 32);                                                     \
        v2 += v3;                                                              \
        v3 = rotl(v3, 16);                                                     \
        v3 ^= v2;                                                              \
        v0 += v3;                                                              \
        v3 = rotl(v3, 21);                                                     \
        v3 ^= v0;                                                              \
        v2 += v1;                                                              \
        v1 = rotl(v1, 17);                                                     \
        v1 ^= v2;                                                              \
        v2 = rotl(v2, 32);                                                     \
    } while (0)

/* SipHash-c-d: @p c rounds per message word, @p d at the end (constants
 * where inlined, so the loops unroll). */
static inline uint64_t siphash_cd(const uint8_t key[CW_SIPHASH_KEY_LEN],
                                  const void *data, size_t len, unsigned c,
                                  unsigned d)
{
    const uint8_t *p = data;
    uint64_t k0 = load_le(key, 8), k1 = load_le(key + 8, 8);
    uint64_t v0 = k0 ^ 0x736f6d6570736575ull;
    uint64_t v1 = k1 ^ 0x646f72616e646f6dull;
    uint64_t v2 = k0 ^ 0x6c7967656e657261ull;
    uint64_t v3 = k1 ^ 0x7465646279746573ull;
    uint64_t m, last = (uint64_t)len << 56;
    size_t full = len & ~(size_t)7;

    for (size_t i = 0; i < full; i += 8) {
        m = load_le(p + i, 8);
        v3 ^= m;
        for (unsigned r = 0; r < c; r++)
            SIPROUND(v0, v1, v2, v3);
        v0 ^= m;
    }
    /* The last word: the remaining bytes, the length's low byte on top. */
    if (len > full)
        last |= load_le(p + full, len - full);
    v3 ^= last;
    for (unsigned r = 0; r < c; r++)
        SIPROUND(v0, v1, v2, v3);
    v0 ^= last;
    v2 ^= 0xff;
    for (unsigned r = 0; r < d; r++)
        SIPROUND(v0, v1, v2, v3);
    return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t cw_siphash_24(const uint8_t key[CW_SIPHASH_KEY_LEN], const void *data,
                       size_t len)
{
    return siphash_cd(key, data, len, 2, 4);
}

uint64_t cw_siphash_13(const uint8_t key[CW_SIPHASH_KEY_LEN], const void *data,
                       size_t len)
{
    return siphash_cd(key, data, len, 1, 3);
}

static pthread_mutex_t seed_lock = CW_MUTEX_INITIALIZER;
static atomic_bool seed_ready; /* seed_key is fixed from then on */
static uint8_t seed_key[CW_SIPHASH_KEY_LEN];

static bool seed_urandom(uint8_t *k)
{
    size_t got = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

    if (fd < 0)
        return false;
    while (got < CW_SIPHASH_KEY_LEN) {
        ssize_t n = read(fd, k + got, CW_SIPHASH_KEY_LEN - got);
        if (n <= 0 && !(n < 0 && errno == EINTR))
            break;
        if (n > 0)
            got += (size_t)n;
    }
    close(fd);
    return got == CW_SIPHASH_KEY_LEN;
}

/* Fill seed_key. */
static void seed_draw(void)
{
    ssize_t n;
    struct timespec ts;
    uint64_t w[2];

    CW_ASSERT_LOCKED(&seed_lock);
    do
        n = getrandom(seed_key, sizeof(seed_key), 0);
    while (n < 0 && errno == EINTR);
    if (n == (ssize_t)sizeof(seed_key) || seed_urandom(seed_key))
        return;
    /* No entropy source at all: better than a constant key. */
    CW_LOG(CW_LOG_WARN, "util",
           "getrandom() and /dev/urandom failed: hash "
           "tables are keyed from the clock");
    clock_gettime(CLOCK_MONOTONIC, &ts);
    w[0] = (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
    w[1] = (uint64_t)ts.tv_sec ^ (uint64_t)(uintptr_t)&ts;
    memcpy(seed_key, w, sizeof(seed_key));
}

/* The key, drawn on first use; fixed from then on, so it is read without
 * the lock once seed_ready says so. */
static const uint8_t *seed(void)
{
    if (!atomic_load_explicit(&seed_ready, memory_order_acquire)) {
        cw_mutex_lock(&seed_lock);
        if (!atomic_load_explicit(&seed_ready, memory_order_relaxed)) {
            seed_draw();
            atomic_store_explicit(&seed_ready, true, memory_order_release);
        }
        cw_mutex_unlock(&seed_lock);
    }
    return seed_key;
}

void cw_siphash_seed_get(uint8_t key_p[CW_SIPHASH_KEY_LEN])
{
    memcpy(key_p, seed(), CW_SIPHASH_KEY_LEN);
}

bool cw_siphash_seed_set(const uint8_t key[CW_SIPHASH_KEY_LEN])
{
    bool ok = false;

    cw_mutex_lock(&seed_lock);
    if (!atomic_load_explicit(&seed_ready, memory_order_relaxed)) {
        memcpy(seed_key, key, sizeof(seed_key));
        atomic_store_explicit(&seed_ready, true, memory_order_release);
        ok = true;
    }
    cw_mutex_unlock(&seed_lock);
    return ok;
}

uint64_t cw_siphash_str(const char *s)
{
    return cw_siphash_13(seed(), s, strlen(s));
}
