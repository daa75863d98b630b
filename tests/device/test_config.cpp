#include <gtest/gtest.h>

#include "manycl/device/config.h"

using namespace manycl::device;

TEST(DeviceConfig, JsonRoundTripOfPresets) {
  for (const auto &name : preset_names()) {
    auto config = preset(name);
    ASSERT_TRUE(config.ok());
    auto back = config_from_json_text(config_to_json(config.value()));
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(back.value(), config.value()) << name;
  }
}

TEST(DeviceConfig, JsonRoundTripOfEveryField) {
  DeviceConfig c;
  c.name = "custom";
  c.clusters = 3;
  c.pes_per_cluster = 5;
  c.spm_bytes = 1 << 20;
  c.spm_reserved_bytes = 4096;
  c.ddr_bytes = 64ull << 20;
  c.max_alloc_bytes = 8ull << 20;
  c.clock_hz = 0.9e9;
  c.mode = ExecutionMode::LWI;
  c.int8_macs_per_cycle = 100;
  c.int16_macs_per_cycle = 50;
  c.fp16_fmas_per_cycle = 12;
  c.fp32_fmas_per_cycle = 6;
  c.ddr_bytes_per_cycle = 12.5;
  c.noc_bytes_per_cycle = 7.25;
  c.dma_latency_cycles = 321;
  c.barrier_latency_cycles = 77;
  c.signal_latency_cycles = 33;
  auto back = config_from_json_text(config_to_json(c));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back.value(), c);
}

TEST(DeviceConfig, SyncLatenciesOverridableAndUnknownKeysRejected) {
  auto c = config_from_json_text(
      R"({"preset": "small", "barrier_latency_cycles": 9, "signal_latency_cycles": 4})");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->barrier_latency_cycles, 9u);
  EXPECT_EQ(c->signal_latency_cycles, 4u);
  EXPECT_EQ(c->clusters, 2u);
  auto bad = config_from_json_text(R"({"barrier_latency": 9})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("barrier_latency"), std::string::npos);
}
