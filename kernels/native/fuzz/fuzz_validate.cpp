// Fuzzes mcl_native_validate (and, for blocks it accepts, mcl_native_run in checked mode on a
// small SPM): the loader's only defence against a hostile binary must never crash.
#include "manycl/native/native.h"

#include <cstring>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 4)
    return 0;
  uint32_t raw_fn;
  std::memcpy(&raw_fn, data, 4);
  const uint32_t fn = raw_fn % (MCL_NATIVE_FN_COUNT_ + 2);
  // Mostly blocks of the right size (padded with zeros), sometimes the raw size.
  std::vector<uint8_t> bytes(data + 4, data + size);
  if (!(raw_fn & 0x80000000u) && mcl_native_args_size(fn) != 0)
    bytes.resize(mcl_native_args_size(fn), 0);
  const uint8_t *block = bytes.data();
  const size_t block_size = bytes.size();
  constexpr uint64_t kSpm = 1 << 16;
  char msg[256];
  if (mcl_native_validate(fn, block, block_size, kSpm, msg, sizeof msg) != MCL_NATIVE_OK)
    return 0;
  // Accepted: running it must stay inside the SPM. Bound the work so the fuzzer stays fast.
  if (mcl_native_cost(fn, block, 1) > 2'000'000)
    return 0;
  static std::vector<uint8_t> spm(kSpm);
  mcl_native_exec exec;
  mcl_native_host_exec_init(&exec, nullptr, spm.data(), spm.size());
  exec.flags = MCL_NATIVE_EXEC_CHECKED;
  mcl_native_run(&exec, fn, block, block_size, msg, sizeof msg);
  return 0;
}
