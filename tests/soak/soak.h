/*
 * Soak client and server (tests/soak/soak.c, docs/reliability.md): what
 * both sides share.  Only the public API (include/causeway/) is used.
 *
 * Wire (only this program speaks it):
 *   soak.rpc     in:  u64 key, u64 seq, u32 reply_len, bytes payload,
 *                     u64 check (FNV-1a of the payload)
 *                out: u64 key, u64 seq, u8 request_ok, bytes reply,
 *                     u64 check (FNV-1a of the reply)
 *   soak.bulk    in:  u64 key, u64 seq, u8 op (SOAK_PULL, SOAK_PUSH),
 *                     u64 len, bulk (the client's buffer)
 *                out: u64 key, u64 seq, u8 data_ok, u64 check (FNV-1a of
 *                     the bytes the server pulled or pushed)
 *   soak.report  in:  u64 key
 *                out: struct soak_seen, field by field as u64
 * The payload of RPC (key, seq) is the pattern of soak_seed(key, seq), its
 * reply the pattern of soak_seed(key, seq) ^ SOAK_REPLY_SALT; a bulk
 * transfer's data the pattern of soak_seed(key, seq) ^ SOAK_BULK_SALT.
 */
#ifndef CW_TESTS_SOAK_H
#define CW_TESTS_SOAK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <causeway/causeway.h>

#define SOAK_RPC         "soak.rpc"
#define SOAK_BULK        "soak.bulk"
#define SOAK_REPORT      "soak.report"
#define SOAK_PULL        1 /* the server pulls the client's pattern and checks it */
#define SOAK_PUSH        2 /* the server pushes a pattern the client checks */
#define SOAK_REPLY_SALT  0x5bd1e9955bd1e995ull
#define SOAK_BULK_SALT   0xc2b2ae3d27d4eb4full
#define SOAK_MAX_PAYLOAD 65536u

/* What the server saw from one client (one key). */
struct soak_seen {
    uint64_t rpcs;         /* distinct sequence numbers received */
    uint64_t dup;          /* sequence numbers received again */
    uint64_t corrupt;      /* requests whose payload or check was wrong */
    uint64_t bytes;        /* request + reply payload bytes */
    uint64_t bulk;         /* bulk transfers completed */
    uint64_t bulk_bytes;   /* their bytes */
    uint64_t bulk_corrupt; /* pulled data that was not the pattern */
    uint64_t bulk_failed;  /* transfers that ended with an error */
};

/** Seed of the data of RPC @p seq of client @p key. */
uint64_t soak_seed(uint64_t key, uint64_t seq);

/** Fill @p len bytes at @p p with the pattern of @p seed. */
void soak_fill(void *p, size_t len, uint64_t seed);

/** True if the @p len bytes at @p p are the pattern of @p seed. */
bool soak_check(const void *p, size_t len, uint64_t seed);

/** FNV-1a (64 bits) over 8-byte little-endian words, then the tail bytes. */
uint64_t soak_fnv(const void *p, size_t len);

/** Make the zeroed byte array *@p a_p (of *@p n_p bytes) hold index
 *  @p i, doubling it (from @p first bytes) as needed; new bytes are 0.
 *  @return false, nothing changed, if memory is short. */
bool soak_grow(uint8_t **a_p, size_t *n_p, uint64_t i, size_t first);

/** SOAK_CORRUPT=N (to show that the checks work): flip a byte of the
 *  @p len bytes at @p p if this is the Nth datum offered (empty ones are
 *  not counted).  The client offers its requests and the data of its
 *  pulls, the server its replies and the data of its pushes. */
void soak_corrupt(void *p, size_t len);

/** Monotonic milliseconds. */
uint64_t soak_now_ms(void);

/** Server: serve SOAK_* on @p uri, write the address to @p addr_file,
 *  run until SIGTERM/SIGINT, print its totals on stdout.  @return exit
 *  status. */
int soak_serve(const char *uri, const char *addr_file);

struct soak_run_opts {
    const char *target;  /* the server's address, through the gateway */
    unsigned id;         /* this client's number, in what it prints */
    uint64_t rpcs;       /* RPCs to send (0: until the duration) */
    unsigned inflight;   /* RPCs in flight at once (one of them bulk) */
    uint64_t bulk_bytes; /* bulk bytes to move (0: no bulk) */
    size_t bulk_min;     /* size of one transfer: bulk_min..bulk_max */
    size_t bulk_max;
    unsigned duration_s;   /* stop sending after this (0: no limit) */
    uint64_t timeout_ms;   /* each RPC's deadline */
    uint64_t seed;         /* sizes and directions (not the data) */
    const char *stop_file; /* stop sending once this file exists */
};

/** Client: run the load, ask the server what it saw, print both; @return
 *  0 when nothing was lost, duplicated, corrupted or failed. */
int soak_run(const struct soak_run_opts *o);

#endif
