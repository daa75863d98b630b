// Host-side reference runner of a kann program on a simulated device, without OpenCL.
// It does exactly what the OpenCL runtime does for a kbin (see docs/kbin-format.md,
// "Running a program"): allocate and fill DDR buffers for PARAMS, SCRATCH and every kernel
// argument, start one command on the device's first cluster_count clusters, call
// mcl_kbin_run_cluster on each cluster with its stream, and read the outputs back.
// Used by tests and by `kann` itself to simulate a compiled network.
#pragma once

#include <cstdint>
#include <vector>

#include "kann/format.h"
#include "manycl/device/command.h"
#include "manycl/device/device.h"
#include "manycl/result.h"

namespace manycl::interp {

struct KbinRunResult {
  std::vector<std::vector<uint8_t>> outputs; // per kernel argument (inputs echo back)
  device::CommandStats stats;
};

// `args` holds the bytes of every kernel argument in argument-index order (outputs may be
// empty: they are allocated with their descriptor's byte size). The program must already
// have been validated (read_kbin / validate_program) against this device.
// Custom-operator records (MCL_NATIVE_FN_CUSTOM) in programs run_kbin runs call
// resolve(name) for their function; kann installs the resolver of the libraries given to
// --custom-ops (kann/custom_ops.h). nullptr (the default): such records fail, naming the
// function. Process-wide; set it before running.
void set_custom_resolver(void *(*resolve)(const char *name));

Result<KbinRunResult> run_kbin(device::Device &device, const kann::format::Program &program,
                               const std::vector<std::vector<uint8_t>> &args,
                               unsigned first_cluster = 0);

} // namespace manycl::interp
