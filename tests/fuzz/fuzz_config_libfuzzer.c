/* libFuzzer entry point for the config loader (built only with clang's
 * -fsanitize=fuzzer). */
#include "config_fuzz_one.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (config_fuzz_one(data, size) != 0)
        abort();
    return 0;
}
