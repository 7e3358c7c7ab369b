/*
 * Fuzz the RPC wire decoders (TAP output):
 *   1. mutated and random messages through cw_wire_decode, and whatever it
 *      accepts through the descriptor walker, the batch walker, the
 *      address parser and the argument decoders (wire_fuzz_one.c);
 *   2. mutated addresses through the address and pattern parsers, which
 *      must format back to what they parsed;
 *   3. mutated messages sent from a raw NA endpoint into a live context,
 *      which must survive, count what it drops and keep answering.
 *
 *   fuzz_rpc_wire [--iterations N] [--seconds S] [--seed X]
 *                 [--corpus-wire DIR] [--corpus-addr DIR]
 *   fuzz_rpc_wire --write-seeds DIR   (a corpus for fuzz_wire_libfuzzer)
 *
 * With --corpus-wire and --corpus-addr, every file of the committed
 * corpus (tests/fuzz/corpus/: the seeds of the libFuzzer campaigns and the
 * input of every crash they found, docs/reliability.md) first goes through
 * the same checker as is, the wire files into the live context too.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <causeway/causeway.h>
#include <causeway/na.h>

#include "rpc_priv.h"
#include "wire_fuzz_one.h"

static unsigned long iterations = 200000;
static const char *corpus_wire, *corpus_addr;
static unsigned seconds = 30;
static unsigned seed = 1;
static int failures;

static void ok(bool cond, const char *what)
{
    static int n;
    printf("%s %d - %s\n", cond ? "ok" : "not ok", ++n, what);
    if (!cond)
        failures++;
}

/* A valid request: routing destination, two descriptors, payload; with
 * @p flags IDEMPOTENT (and RESUME), the resume id after the header. */
static size_t seed_request_flags(uint8_t *buf, uint16_t flags)
{
    struct cw_wire_hdr h = {.type = CW_MSG_REQ,
                            .rpc_id = cw_rpc_id("echo"),
                            .req_id = 7,
                            .budget_us = 1000000,
                            .resp_tag = 3,
                            .flags = flags,
                            .resume_id = 0x5eed5eed5eedull};
    size_t d = cw_wire_desc_size(3, 16), off = cw_wire_hdr_size(flags);
    uint8_t *p;

    memcpy(buf + off, "shm://x", 7);
    off += 7;
    for (int i = 0; i < 2; i++) {
        p = cw_wire_desc_encode(buf + off, 0, CW_BULK_READ_WRITE, 4096, "shm",
                                16);
        memset(p, 0x40 + i, 16);
        off += d;
    }
    /* payload: u32 len + bytes, str, u32 bulk index */
    memcpy(buf + off,
           "\x05\x00\x00\x00hello\x03\x00\x00\x00hi\x00"
           "\x01\x00\x00\x00",
           20);
    h.dest_len = 7;
    h.ndesc = 2;
    h.desc_len = (uint32_t)(2 * d);
    h.payload_len = 20;
    cw_wire_hdr_encode(buf, &h);
    return off + 20;
}

static size_t seed_request(uint8_t *buf)
{
    return seed_request_flags(buf, 0);
}

/* A request resuming an idempotent one (docs/bulk-gateway.md). */
static size_t seed_resume(uint8_t *buf)
{
    return seed_request_flags(buf, CW_HF_IDEMPOTENT | CW_HF_RESUME);
}

/* A batch (docs/wire.md "Batches") of a request and a resume. */
static size_t seed_batch(uint8_t *buf)
{
    struct cw_wire_hdr h = {.type = CW_MSG_BATCH};
    uint8_t one[512];
    size_t off = CW_HDR_SIZE;

    off += cw_wire_batch_put(buf + off, one, seed_request(one));
    off += cw_wire_batch_put(buf + off, one, seed_resume(one));
    h.payload_len = (uint32_t)(off - CW_HDR_SIZE);
    cw_wire_hdr_encode(buf, &h);
    return off;
}

/* A valid overflowed response. */
static size_t seed_response(uint8_t *buf)
{
    struct cw_wire_hdr h = {.type = CW_MSG_RESP,
                            .flags = CW_HF_OVERFLOW,
                            .req_id = 9,
                            .status = CW_OK};
    size_t d = cw_wire_desc_size(3, 8);
    uint8_t *p = cw_wire_desc_encode(buf + CW_HDR_SIZE, 0, CW_BULK_READ_ONLY,
                                     100000, "shm", 8);
    memset(p, 1, 8);
    h.ovf_len = (uint16_t)d;
    h.payload_len = 100000;
    cw_wire_hdr_encode(buf, &h);
    return CW_HDR_SIZE + d;
}

static void mutate(uint8_t *buf, size_t *len, size_t cap)
{
    int kind = rand() % 6;
    size_t n = *len;

    switch (kind) {
    case 0: /* bit flips */
        for (int k = 1 + rand() % 4; k > 0 && n; k--)
            buf[(size_t)rand() % n] ^= (uint8_t)(1u << (rand() % 8));
        break;
    case 1: /* random byte */
        if (n)
            buf[(size_t)rand() % n] = (uint8_t)rand();
        break;
    case 2: /* truncate */
        *len = n ? (size_t)rand() % n : 0;
        break;
    case 3: /* extend with garbage */
        while (*len < cap && rand() % 4)
            buf[(*len)++] = (uint8_t)rand();
        break;
    case 4: /* interesting 16/32-bit values in the header */
        if (n >= CW_HDR_SIZE) {
            static const uint32_t vals[] = {0,      1,          0x7f,      0xff,
                                            0xffff, 0x7fffffff, 0xffffffff};
            uint32_t v = vals[rand() % 7];
            size_t at = (size_t)(rand() % (CW_HDR_SIZE - 3));
            memcpy(buf + at, &v, (size_t)(1 + rand() % 4));
        }
        break;
    default: /* all random */
        *len = (size_t)rand() % cap;
        for (size_t i = 0; i < *len; i++)
            buf[i] = (uint8_t)rand();
        break;
    }
}

/* Each regular file of @p dir, as is, through @p one (and, for a live
 * context, @p lf: sent to it); false if the directory cannot be read or a
 * file breaks a check.  @p n_p: the files. */
static bool replay(const char *dir, int (*one)(const uint8_t *, size_t),
                   struct live_fuzz *lf, unsigned *n_p)
{
    static uint8_t buf[65536];
    char path[4096];
    struct dirent *e;
    DIR *d = opendir(dir);
    bool good = d != NULL;

    *n_p = 0;
    if (d == NULL)
        perror(dir);
    while (d != NULL && (e = readdir(d)) != NULL) {
        FILE *f;
        size_t len;

        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        f = fopen(path, "rb");
        if (f == NULL) {
            perror(path);
            good = false;
            continue;
        }
        len = fread(buf, 1, sizeof(buf), f);
        fclose(f);
        (*n_p)++;
        if (one != NULL && one(buf, len) != 0) {
            fprintf(stderr, "corpus file %s breaks a check\n", path);
            good = false;
        }
        if (lf != NULL)
            (void)live_fuzz_send(lf, buf, len);
    }
    if (d != NULL)
        closedir(d);
    return good;
}

static void replay_corpus(void)
{
    unsigned n = 0;
    bool good;

    if (corpus_wire != NULL) {
        good = replay(corpus_wire, wire_fuzz_one, NULL, &n);
        printf("# %u files of %s\n", n, corpus_wire);
        ok(good && n > 0, "wire corpus replayed through the decoders");
    }
    if (corpus_addr != NULL) {
        good = replay(corpus_addr, addr_fuzz_one, NULL, &n);
        printf("# %u files of %s\n", n, corpus_addr);
        ok(good && n > 0, "address corpus replayed through the parsers");
    }
}

static void fuzz_decoder(void)
{
    uint8_t seeds[4][1024], buf[1024];
    size_t seed_len[4];
    uint64_t end = cw_now_ns() + (uint64_t)seconds * 1000000000ull;
    unsigned long i;
    int broken = 0;

    seed_len[0] = seed_request(seeds[0]);
    seed_len[1] = seed_response(seeds[1]);
    seed_len[2] = seed_resume(seeds[2]);
    seed_len[3] = seed_batch(seeds[3]);
    for (int k = 0; k < 4; k++) {
        struct cw_wire_msg m;
        ok(cw_wire_decode(seeds[k], seed_len[k], &m) == CW_OK,
           "seed message decodes");
    }
    for (i = 0; i < iterations && cw_now_ns() < end; i++) {
        int k = rand() % 4;
        size_t len = seed_len[k];

        memcpy(buf, seeds[k], len);
        for (int r = 1 + rand() % 3; r > 0; r--)
            mutate(buf, &len, sizeof(buf));
        if (wire_fuzz_one(buf, len) != 0)
            broken++;
    }
    printf("# %lu decoder iterations, %lu accepted\n", i, wire_fuzz_accepted);
    ok(i > 0 && broken == 0, "decoder survived mutated input");
}

/* Addresses: mutated valid ones and random text (wire_fuzz_one.c). */
static void fuzz_addresses(void)
{
    static const char *const seeds[] = {
        "ofi+tcp://10.1.0.5:7000",
        "ucx+tcp://[fd00::1]:7000",
        "verbs://mlx5_0:1/10.3.0.4:7000",
        "shm://cw-1234",
        "shm://a@ofi+tcp://127.0.0.1:1@ucx+tcp://10.0.0.1:2",
        "svc:storage@ofi+tcp://gw:7000",
        "ofi+tcp://10.2.0.0/16",
        "ucx+*://*",
        "*://host:7",
        "ofi+tcp://fd00::/8",
    };
    static const char alphabet[] = "shmofiucx+tcp:/@svc.0123456789ab_-*[]% ";
    uint64_t end = cw_now_ns() + 5000000000ull;
    uint8_t buf[512];
    unsigned long i;
    int broken = 0;

    for (i = 0; i < iterations && cw_now_ns() < end; i++) {
        const char *s =
            seeds[(size_t)rand() % (sizeof(seeds) / sizeof(*seeds))];
        size_t len = strlen(s);

        memcpy(buf, s, len);
        for (int r = 1 + rand() % 3; r > 0; r--) {
            size_t at = len ? (size_t)rand() % len : 0;
            switch (rand() % 4) {
            case 0: /* replace */
                if (len)
                    buf[at] = (uint8_t)
                        alphabet[(size_t)rand() % (sizeof(alphabet) - 1)];
                break;
            case 1: /* insert */
                if (len < sizeof(buf) - 1) {
                    memmove(buf + at + 1, buf + at, len - at);
                    buf[at] = (uint8_t)
                        alphabet[(size_t)rand() % (sizeof(alphabet) - 1)];
                    len++;
                }
                break;
            case 2: /* cut */
                len = at;
                break;
            default: /* grow a part past its limit */
                while (len < sizeof(buf) - 1 && rand() % 64)
                    buf[len++] = (uint8_t) "a1:."[rand() % 4];
                break;
            }
        }
        if (addr_fuzz_one(buf, len) != 0)
            broken++;
    }
    printf("# %lu address iterations, %lu parsed\n", i, addr_fuzz_accepted);
    ok(i > 0 && broken == 0, "address parsers survived and round-trip");
}

/* --write-seeds DIR: the seed messages as files, a corpus for the
 * libFuzzer build (fuzz_wire_libfuzzer). */
static int write_seeds(const char *dir)
{
    uint8_t buf[1024];
    size_t (*const fn[])(uint8_t *) = {seed_request, seed_response, seed_resume,
                                       seed_batch};
    char path[4096];

    for (unsigned k = 0; k < 4; k++) {
        size_t len = fn[k](buf);
        FILE *f;

        snprintf(path, sizeof(path), "%s/seed-%u", dir, k);
        f = fopen(path, "wb");
        if (f == NULL || fwrite(buf, 1, len, f) != len) {
            perror(path);
            if (f != NULL)
                fclose(f);
            return 1;
        }
        fclose(f);
    }
    return 0;
}

static void fuzz_live(void)
{
    struct live_fuzz lf;
    uint8_t seedmsg[3][1024], buf[1024];
    size_t seed_len[3] = {seed_request(seedmsg[0]), seed_resume(seedmsg[1]),
                          seed_batch(seedmsg[2])};
    struct cw_context_stats st, after;

    if (live_fuzz_open(&lf) != 0) {
        ok(false, "live context and raw endpoint");
        return;
    }
    if (corpus_wire != NULL) {
        unsigned n;

        /* The committed corpus first, as the live libFuzzer target got
         * it; the checks below then cover it too. */
        (void)replay(corpus_wire, NULL, &lf, &n);
        printf("# %u corpus files sent to the live context\n", n);
    }
    for (int i = 0; i < 3000; i++) {
        int s = rand() % 3;
        size_t len = seed_len[s];
        memcpy(buf, seedmsg[s], len);
        for (int r = 1 + rand() % 3; r > 0; r--)
            mutate(buf, &len, sizeof(buf));
        (void)live_fuzz_send(&lf, buf, len);
    }
    for (int k = 0; k < 300; k++) {
        cw_na_progress(lf.na, 0, NULL);
        cw_progress(lf.ctx, 1);
        cw_trigger(lf.ctx, 0, 0, NULL);
    }
    cw_context_stats(lf.ctx, &st);
    printf("# %d sent: %llu dropped, %llu requests, %llu unknown RPC\n",
           lf.posted, (unsigned long long)st.rx_dropped,
           (unsigned long long)st.rx_requests, (unsigned long long)st.no_rpc);
    /* A message counts once, dropped or as a request; a batch once for
     * itself and once per entry at most. */
    ok(st.rx_dropped > 0 && st.rx_batches > 0 &&
           st.rx_dropped + st.rx_requests <=
               (uint64_t)lf.posted + st.rx_batches * CW_BATCH_MAX,
       "malformed messages dropped and counted");
    /* A RESUME without IDEMPOTENT (no resume id): dropped and counted, one
     * drop for one message. */
    memcpy(buf, seedmsg[1], seed_len[1]);
    buf[6] = CW_HF_RESUME; /* flags, low byte */
    (void)live_fuzz_send(&lf, buf, seed_len[1]);
    for (int k = 0; k < 20; k++) {
        cw_progress(lf.ctx, 1);
        cw_trigger(lf.ctx, 0, 0, NULL);
    }
    cw_context_stats(lf.ctx, &after);
    ok(after.rx_dropped == st.rx_dropped + 1 &&
           after.rx_requests == st.rx_requests,
       "RESUME without a resume id dropped and counted");
    ok(live_fuzz_alive(&lf), "context still answers after the fuzzing");
    live_fuzz_close(&lf);
}

int main(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--iterations") == 0)
            iterations = strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--seconds") == 0)
            seconds = (unsigned)strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--seed") == 0)
            seed = (unsigned)strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--write-seeds") == 0)
            return write_seeds(argv[i + 1]);
        else if (strcmp(argv[i], "--corpus-wire") == 0)
            corpus_wire = argv[i + 1];
        else if (strcmp(argv[i], "--corpus-addr") == 0)
            corpus_addr = argv[i + 1];
    }
    printf("TAP version 13\n1..%d\n# seed %u\n",
           9 + (corpus_wire != NULL) + (corpus_addr != NULL), seed);
    srand(seed);
    replay_corpus();
    fuzz_decoder();
    fuzz_addresses();
    fuzz_live();
    return failures ? 1 : 0;
}
