// libFuzzer target: any byte string given to kann as an ONNX model is either compiled or
// rejected with an error message; never a crash, hang, or out-of-bounds access. Accepted
// graphs go through the optimization passes and the tile compiler for the small preset, so
// shapes and attributes that survive import are exercised all the way to record emission.
// Seed it with the ONNX files of examples/models and tests (see docs/kann.md, "Fuzzing").
#include <cstddef>
#include <cstdint>
#include <string>

#include "kann/compile.h"
#include "kann/onnx_import.h"
#include "kann/passes.h"
#include "manycl/device/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto graph = kann::import_onnx_bytes(std::string(reinterpret_cast<const char *>(data), size));
  if (!graph.ok()) {
    if (graph.error().message.empty())
      __builtin_trap(); // a rejection must say why
    return 0;
  }
  if (!kann::passes::optimize(graph.value()).ok())
    return 0;
  // Bound the work of one input: the fuzzer is after crashes, not after big networks.
  if (graph.value().nodes.size() > 64)
    return 0;
  static const manycl::device::DeviceConfig small = manycl::device::preset("small").value();
  kann::CompileOptions options;
  options.device = small;
  options.clusters = 2;
  auto compiled = kann::compile_graph(graph.value(), options);
  if (!compiled.ok() && compiled.error().message.empty())
    __builtin_trap();
  return 0;
}
