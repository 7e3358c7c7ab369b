/* One fuzz input through the RPC wire decoders, or through the address
 * parsers: shared by the TAP fuzzers and the libFuzzer entry points. */
#ifndef CW_WIRE_FUZZ_ONE_H
#define CW_WIRE_FUZZ_ONE_H

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

/* Inputs accepted so far (messages decoded; addresses parsed). */
extern unsigned long wire_fuzz_accepted, addr_fuzz_accepted;

#endif
