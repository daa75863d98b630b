// A tiny device whose cost-model constants make modeled times easy to compute by hand.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "manycl/device/command.h"
#include "manycl/device/device.h"

namespace manycl::device::test {

// 4 clusters × 2 PEs × 64 KiB SPM, 16 MiB DDR, 1 GHz.
// DMA: latency 100 cycles, NoC 16 B/cycle per link, DDR 8 B/cycle shared.
// Coprocessor per PE: INT8 128 MAC/cycle, FP16 16 FMA/cycle. Barrier 50, signal 20 cycles.
inline DeviceConfig tiny_config() {
  DeviceConfig c;
  c.name = "tiny";
  c.clusters = 4;
  c.pes_per_cluster = 2;
  c.spm_bytes = 64 << 10;
  c.ddr_bytes = 16 << 20;
  c.clock_hz = 1e9;
  c.int8_macs_per_cycle = 128;
  c.int16_macs_per_cycle = 64;
  c.fp16_fmas_per_cycle = 16;
  c.fp32_fmas_per_cycle = 8;
  c.dma_latency_cycles = 100;
  c.noc_bytes_per_cycle = 16;
  c.ddr_bytes_per_cycle = 8;
  c.barrier_latency_cycles = 50;
  c.signal_latency_cycles = 20;
  return c;
}

class DeviceTest : public ::testing::Test {
protected:
  DeviceTest() : device(std::make_unique<Device>(tiny_config())) {}

  std::shared_ptr<CommandRecorder> begin(std::vector<unsigned> clusters = {0, 1, 2, 3},
                                         uint64_t not_before = 0) {
    auto r = CommandRecorder::begin(*device, "test", std::move(clusters), not_before);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.value();
  }

  // A DDR block filled with bytes (i * 7 + seed) & 0xff.
  uint64_t ddr_block(uint64_t size, unsigned seed = 1) {
    auto offset = device->ddr().allocate(size);
    EXPECT_TRUE(offset.ok());
    auto *p = reinterpret_cast<uint8_t *>(device->ddr().at(offset.value()));
    for (uint64_t i = 0; i < size; ++i)
      p[i] = static_cast<uint8_t>(i * 7 + seed);
    return offset.value();
  }
  uint8_t *ddr(uint64_t offset) { return reinterpret_cast<uint8_t *>(device->ddr().at(offset)); }
  uint8_t *spm(unsigned cluster) {
    return reinterpret_cast<uint8_t *>(device->cluster(cluster).spm());
  }

  std::unique_ptr<Device> device;
};

} // namespace manycl::device::test
