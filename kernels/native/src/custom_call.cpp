#include "custom_call.h"

namespace manycl::native {

namespace {
// A function call with its argument set-up, as for the built-in functions' call overhead.
constexpr uint64_t kCallOverhead = 64;
} // namespace

cost::Cost custom_cost(const mcl_custom_args &a) {
  cost::Cost c;
  c.overhead = kCallOverhead;
  c.vliw = a.cycles;
  c.total = a.cycles + kCallOverhead;
  c.bound = a.cycles > kCallOverhead ? MCL_NATIVE_BOUND_VLIW : MCL_NATIVE_BOUND_OVERHEAD;
  return c;
}

Status run_custom(const mcl_native_exec &exec, const mcl_custom_args &a) {
  const std::string name(a.function); // NUL-terminated: checked by the validator
  void *address = exec.resolve ? exec.resolve(exec.resolve_user, a.function) : nullptr;
  if (!address)
    return Status::Error(MCL_NATIVE_ERR_BAD_ARGS,
                         "custom function '" + name +
                             "' is not exported by any native library registered with "
                             "clAddNativeLibraryMCL / MANYCL_NATIVE_PATH");
  mcl_custom_call call{};
  call.input = exec.spm_base + a.input.offset;
  call.output = exec.spm_base + a.output.offset;
  call.input_tile = a.input;
  call.output_tile = a.output;
  call.params = a.params;
  call.param_count = a.param_count;
  call.pe_count = exec.pe_count;
  call.input_count = a.kind == MCL_CUSTOM_WHOLE ? a.input_count : 1;
  for (uint32_t i = 0; i < call.input_count && i < MCL_CUSTOM_INPUT_MAX; ++i) {
    const mcl_tile &t = i == 0 ? a.input : a.more_inputs[i - 1];
    call.inputs[i] = exec.spm_base + t.offset;
    call.input_tiles[i] = t;
  }
  // A data pointer from dlsym converts to a function pointer (POSIX guarantees it).
  const auto function = reinterpret_cast<mcl_custom_fn>(address);
  const int status = function(&call);
  if (status != 0)
    return Status::Error(MCL_NATIVE_ERR_BAD_ARGS,
                         "custom function '" + name + "' returned " + std::to_string(status));
  return Status::Ok();
}

} // namespace manycl::native
