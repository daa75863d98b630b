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

// Every out-of-range value is refused with the field, the value and the allowed range.
TEST(DeviceConfig, OutOfRangeValuesNameFieldValueAndRange) {
  const struct {
    const char *json;
    const char *expect;
  } cases[] = {
      {R"({"clusters": 0})", "clusters = 0 is out of range (allowed: 1..256)"},
      {R"({"clusters": 257})", "clusters = 257"},
      {R"({"pes_per_cluster": 0})", "pes_per_cluster = 0"},
      {R"({"spm_bytes": 1})", "spm_bytes = 1 is out of range (allowed: 4096"},
      {R"({"spm_bytes": 2147483648})", "1 GiB"},
      {R"({"preset": "small", "spm_reserved_bytes": 262144})", "spm_reserved_bytes = 262144"},
      {R"({"ddr_bytes": 0})", "ddr_bytes = 0"},
      {R"({"ddr_bytes": 18446744073709551615})", "ddr_bytes = 18446744073709551615"},
      {R"({"clock_hz": 0})", "clock_hz = 0"},
      {R"({"clock_hz": -5})", "clock_hz = -5"},
      {R"({"clock_hz": 1e300})", "clock_hz = 1e+300"},
      {R"({"fp32_fmas_per_cycle": 0})", "fp32_fmas_per_cycle = 0"},
      {R"({"noc_bytes_per_cycle": 0})", "noc_bytes_per_cycle = 0"},
      {R"({"ddr_bytes_per_cycle": -1})", "ddr_bytes_per_cycle = -1"},
      {R"({"clusters": -1})", "'clusters' must be a non-negative integer"},
      {R"({"clusters": "5"})", "'clusters' must be a number"},
      {R"({"clusters": 5)", "not valid JSON: parse error at line 1"},
      {R"({"preset": "mppa9"})", "unknown device preset 'mppa9'"},
  };
  for (const auto &c : cases) {
    auto r = config_from_json_text(c.json);
    ASSERT_FALSE(r.ok()) << c.json;
    EXPECT_NE(r.error().message.find(c.expect), std::string::npos)
        << c.json << " -> " << r.error().message;
    EXPECT_EQ(r.error().message.find('\n'), std::string::npos) << r.error().message;
  }
}

TEST(DeviceConfig, MissingFileSaysWhy) {
  auto r = config_from_file("/nonexistent/manycl/device.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("cannot open device file '/nonexistent/manycl/device.json': "
                                   "No such file or directory"),
            std::string::npos)
      << r.error().message;
}
