// The compiler's prediction of a program's modeled time: a replay of the record streams
// under the simulator's timing rules (docs/device-model.md, "Modeled time") that executes
// nothing. Compute records cost what the native library reports (mcl_native_cost), DMA
// transfers go through the same DDR calendar (manycl::device::DdrCalendar) in the same
// arbitration order (issue time, reservations so far, cluster), barriers and signals merge
// clocks as the simulator does. For a deterministic simulator the prediction is exact up to
// what the replay cannot see (e.g. other commands sharing the device).
#pragma once

#include <cstdint>
#include <vector>

#include "kann/format.h"
#include "manycl/device/config.h"
#include "manycl/result.h"

namespace kann {

struct ProgramTiming {
  uint64_t total_cycles = 0;            // command start to the last cluster's end
  std::vector<uint64_t> compute_cycles; // per cluster: native compute accounted
  // Where each cluster's clock went besides compute (per cluster; compute + these = its end):
  std::vector<uint64_t> dma_wait_cycles;         // WAIT_DMA and the final drain of transfers
  std::vector<uint64_t> barrier_wait_cycles;     // at barriers: the later clusters + the latency
  std::vector<uint64_t> signal_wait_cycles;      // WAIT_SIGNAL
  std::vector<std::vector<uint64_t>> time_after; // per cluster, per record: its clock after it
};

// The DDR bandwidth a program for `clusters` clusters runs with: the whole device's, or, for
// fewer clusters than the device has, the K/N share of the K-cluster sub-device it runs on
// (docs/device-model.md, "Determinism").
double program_ddr_bytes_per_cycle(const manycl::device::DeviceConfig &device, unsigned clusters);

// `ddr_bytes_per_cycle` is the DDR bandwidth the program's clusters have (the device's, or
// the share of the sub-device it runs on). Fails on a malformed stream or a deadlock
// (a barrier or signal wait that can never be released).
manycl::Result<ProgramTiming> predict_timing(const format::Program &program,
                                             const manycl::device::DeviceConfig &device,
                                             double ddr_bytes_per_cycle);

} // namespace kann
