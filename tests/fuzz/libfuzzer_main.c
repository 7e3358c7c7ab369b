/* libFuzzer entry point (built only with clang's -fsanitize=fuzzer), one
 * executable per checker: FUZZ_ONE names it (config_fuzz_one,
 * wire_fuzz_one, addr_fuzz_one), FUZZ_HEADER its header. */
#include FUZZ_HEADER

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (FUZZ_ONE(data, size) != 0)
        abort();
    return 0;
}
