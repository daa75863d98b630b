// libFuzzer target: the kbin reader must reject or accept any byte string without crashing,
// hanging or reading out of bounds. Seed it with binaries written by `kann compile`.
#include <cstddef>
#include <cstdint>

#include "kann/format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kann::format::DeviceLimits limits;
  auto program = kann::format::read_kbin(data, size, limits);
  if (program.ok()) {
    // An accepted program must survive a write/read round trip unchanged in meaning.
    auto bytes = kann::format::write_kbin(program.value());
    if (!bytes.ok())
      __builtin_trap();
    auto again = kann::format::read_kbin(bytes.value().data(), bytes.value().size(), limits);
    if (!again.ok())
      __builtin_trap();
    for (const auto &stream : program.value().streams)
      for (const auto &record : stream)
        (void)kann::format::describe_record(record);
  }
  return 0;
}
