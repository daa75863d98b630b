// libFuzzer target: the kbin reader must reject or accept any byte string without crashing,
// hanging or reading out of bounds. Seed it with binaries written by `kann compile`.
//
// Every mutation would otherwise stop at the checksum (kbin version 2), so the target stores
// the right checksum in its copy of the input first: what is fuzzed is the structural and
// semantic validation behind it.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kann/format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<uint8_t> input(data, data + size);
  kann::format::reseal_kbin(input.data(), input.size());
  kann::format::DeviceLimits limits;
  auto program = kann::format::read_kbin(input.data(), input.size(), limits);
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
  // The input as given is judged too: unless its checksum was already right (the resealed
  // copy is byte-identical), the reader must refuse it.
  if (size > 0 && std::memcmp(data, input.data(), size) != 0 &&
      kann::format::read_kbin(data, size, limits).ok())
    __builtin_trap();
  return 0;
}
