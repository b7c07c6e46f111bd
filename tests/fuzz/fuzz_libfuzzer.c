/* libFuzzer entry point (clang -fsanitize=fuzzer): see scripts/fuzz.sh. */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_messages.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  (void)fuzz_messages_one(data, size);
  return 0;
}
