/* One fuzz input through the config loader, dump and route table. */
#ifndef CW_CONFIG_FUZZ_ONE_H
#define CW_CONFIG_FUZZ_ONE_H

#include <stddef.h>
#include <stdint.h>

/* Returns 0, or -1 when an invariant broke (message on stderr). */
int config_fuzz_one(const uint8_t *data, size_t len);

/* Inputs that loaded as a valid configuration so far. */
extern unsigned long config_fuzz_loaded;

#endif
