/* One fuzz input through the RPC wire decoders, or through the address
 * parsers: shared by the TAP fuzzers and the libFuzzer entry points. */
#ifndef CW_WIRE_FUZZ_ONE_H
#define CW_WIRE_FUZZ_ONE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Decode @p data as a received message (from an exact-size copy, so that
 * ASan sees any read past it) and, if accepted, read it as a receiver
 * would: descriptors, batch entries, routing destination, arguments.
 * Returns 0, or -1 when an invariant broke (message on stderr). */
int wire_fuzz_one(const uint8_t *data, size_t len);

/* Parse @p data (up to its first NUL) as an address, a proxied address
 * and a route pattern; whatever parses must format back to text that
 * parses to the same thing.  Returns 0, or -1 (message on stderr). */
int addr_fuzz_one(const uint8_t *data, size_t len);

/* A live context (shm network, "echo" registered) and a raw NA endpoint
 * that sends it whatever it is given. */
struct live_fuzz {
    struct cw_context *ctx;
    struct cw_network *net;
    struct cw_na *na;
    struct cw_na_addr *dst;
    int posted, sent;
};

/* Open @p lf; 0 or -1 (message on stderr). */
int live_fuzz_open(struct live_fuzz *lf);
/* Send @p len bytes to the context as an unexpected message from the raw
 * endpoint and let the context take them in; false if not sent. */
bool live_fuzz_send(struct live_fuzz *lf, const void *msg, size_t len);
/* An echo RPC from the context to itself over its network completes CW_OK
 * within 5 s. */
bool live_fuzz_alive(struct live_fuzz *lf);
void live_fuzz_close(struct live_fuzz *lf);

/* libFuzzer: @p data into one process-wide live context, which must
 * still answer every 256 inputs.  Returns 0, or -1 (message on stderr). */
int live_fuzz_one(const uint8_t *data, size_t len);

/* Inputs accepted so far (messages decoded; addresses parsed). */
extern unsigned long wire_fuzz_accepted, addr_fuzz_accepted;

#endif
