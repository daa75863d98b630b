// Configuration of one simulated accelerator: its topology, memories and the constants of
// its cost model. Built from a named preset, optionally overridden by a JSON device file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "manycl/result.h"

namespace manycl::device {

enum class ExecutionMode { LWI, SPMD };

struct DeviceConfig {
  std::string name = "mppa3";
  unsigned clusters = 5;
  unsigned pes_per_cluster = 16;
  uint64_t spm_bytes = 4ull << 20; // per cluster
  uint64_t spm_reserved_bytes = 0; // kept back from __local for the runtime
  uint64_t ddr_bytes = 8ull << 30; // shared by all clusters, allocated lazily
  uint64_t max_alloc_bytes = 0;    // 0: ddr_bytes / 4, rounded down to 1 MiB
  double clock_hz = 1.2e9;
  ExecutionMode mode = ExecutionMode::SPMD;

  // Cost model (per PE, per cycle); see docs/device-model.md for their sources.
  unsigned int8_macs_per_cycle = 128;
  unsigned int16_macs_per_cycle = 64;
  unsigned fp16_fmas_per_cycle = 16;
  unsigned fp32_fmas_per_cycle = 8;
  double ddr_bytes_per_cycle = 20.0; // whole chip, shared by all clusters
  double noc_bytes_per_cycle = 16.0; // per cluster link
  unsigned dma_latency_cycles = 500;
  // Synchronization costs (modeled): the time from the last cluster's arrival at a barrier
  // to the release of all, and from a signal post to its visibility at the target.
  unsigned barrier_latency_cycles = 200;
  unsigned signal_latency_cycles = 100;

  bool operator==(const DeviceConfig &) const = default;

  uint64_t local_mem_bytes() const { return spm_bytes - spm_reserved_bytes; }
  uint64_t max_alloc() const;
  unsigned compute_units() const {
    return mode == ExecutionMode::SPMD ? clusters : clusters * pes_per_cluster;
  }

  // Checks that every number is usable (non-zero counts, SPM/DDR sizes in range).
  Result<void> validate() const;
};

// Names of the built-in presets: "mppa3" (5 × 16 PEs × 4 MiB) and "small" (2 × 4 × 256 KiB).
std::vector<std::string> preset_names();
Result<DeviceConfig> preset(const std::string &name);

// Reads a JSON device file: {"preset": "...", "clusters": N, ...}; any key of DeviceConfig
// overrides the preset's value. Unknown keys are an error (a typo must not pass silently).
Result<DeviceConfig> config_from_json_text(const std::string &text);
Result<DeviceConfig> config_from_file(const std::string &path);

// A preset name or a path to a JSON file (anything containing '/' or ending in .json).
Result<DeviceConfig> config_from_spec(const std::string &spec);

// The devices this process exposes: MANYCL_DEVICES="spec[,spec...]" (default "mppa3").
// MANYCL_DEVICE_MODE=lwi|spmd overrides the execution mode of all of them.
Result<std::vector<DeviceConfig>> configs_from_environment();

} // namespace manycl::device

namespace manycl::device {
// The configuration as a JSON object with the keys config_from_json_text() accepts.
std::string config_to_json(const DeviceConfig &config);
} // namespace manycl::device
