// A bad device configuration hides the platform, and ManyCL says why: one line on stderr,
// prefixed "ManyCL:", naming the setting and what is allowed. Each case runs a fresh process
// (platform_probe.cpp) through the ICD loader, since the platform reads its environment once.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "child_process.h"

namespace {

namespace fs = std::filesystem;

using Probe = rt_test::ChildRun; // out: the probe's "manycl=0|1"

// Runs the probe with `env` (shell words: VAR=value ...) and MANYCL_DEVICE_MODE unset unless
// `env` sets it.
Probe probe(const std::string &env) {
  return rt_test::run_child("env -u MANYCL_DEVICE_MODE -u MANYCL_DEVICES " + env + " " +
                            PLATFORM_PROBE);
}

class ConfigErrors : public ::testing::Test {
protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("manycl_cfg_errors_" + std::to_string(getpid()));
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  std::string device_file(const std::string &name, const std::string &json) {
    std::ofstream((dir / name).string()) << json;
    return (dir / name).string();
  }
  // The platform must be hidden and the one "ManyCL:" line must contain every `expected`.
  void expect_hidden_because(const std::string &env, const std::vector<std::string> &expected) {
    SCOPED_TRACE(env);
    Probe r = probe(env);
    EXPECT_EQ(r.out, "manycl=0\n") << "the platform must be hidden; stderr:\n" << r.err;
    ASSERT_EQ(r.manycl_err.size(), 1u) << "exactly one ManyCL: line expected; stderr:\n" << r.err;
    for (const auto &e : expected)
      EXPECT_NE(r.manycl_err[0].find(e), std::string::npos)
          << "expected '" << e << "' in: " << r.manycl_err[0];
  }
  fs::path dir;
};

TEST_F(ConfigErrors, ValidConfigurationShowsThePlatformAndPrintsNothing) {
  Probe r = probe("MANYCL_DEVICES=small");
  EXPECT_EQ(r.out, "manycl=1\n") << r.err;
  EXPECT_TRUE(r.manycl_err.empty()) << r.err;
  r = probe("MANYCL_DEVICES=" + device_file("ok.json", R"({"preset": "small", "clusters": 3})") +
            " MANYCL_DEVICE_MODE=lwi");
  EXPECT_EQ(r.out, "manycl=1\n") << r.err;
  EXPECT_TRUE(r.manycl_err.empty()) << r.err;
}

TEST_F(ConfigErrors, MalformedJson) {
  auto path = device_file("broken.json", R"({"preset": "small", "clusters": })");
  expect_hidden_because("MANYCL_DEVICES=" + path,
                        {"MANYCL_DEVICES", path, "not valid JSON", "line 1", "hidden"});
}

TEST_F(ConfigErrors, ZeroClusters) {
  expect_hidden_because("MANYCL_DEVICES=" + device_file("c0.json", R"({"clusters": 0})"),
                        {"clusters = 0", "allowed: 1..256"});
}

TEST_F(ConfigErrors, NegativeClusters) {
  expect_hidden_because("MANYCL_DEVICES=" + device_file("cneg.json", R"({"clusters": -1})"),
                        {"'clusters'", "non-negative integer"});
}

TEST_F(ConfigErrors, ZeroPes) {
  expect_hidden_because("MANYCL_DEVICES=" + device_file("p0.json", R"({"pes_per_cluster": 0})"),
                        {"pes_per_cluster = 0", "1..256"});
}

TEST_F(ConfigErrors, OneByteSpm) {
  expect_hidden_because("MANYCL_DEVICES=" + device_file("spm1.json", R"({"spm_bytes": 1})"),
                        {"spm_bytes = 1 ", "4096"});
}

TEST_F(ConfigErrors, ReservedSpmLeavesNothing) {
  expect_hidden_because(
      "MANYCL_DEVICES=" +
          device_file("res.json", R"({"preset": "small", "spm_reserved_bytes": 262144})"),
      {"spm_reserved_bytes = 262144", "below spm_bytes"});
}

TEST_F(ConfigErrors, AbsurdAndZeroDdr) {
  expect_hidden_because("MANYCL_DEVICES=" +
                            device_file("ddr_huge.json", R"({"ddr_bytes": 1125899906842624})"),
                        {"ddr_bytes = 1125899906842624", "1 TiB"});
  expect_hidden_because("MANYCL_DEVICES=" + device_file("ddr0.json", R"({"ddr_bytes": 0})"),
                        {"ddr_bytes = 0", "1 MiB"});
}

TEST_F(ConfigErrors, ZeroClockAndBandwidth) {
  expect_hidden_because("MANYCL_DEVICES=" + device_file("clk.json", R"({"clock_hz": 0})"),
                        {"clock_hz = 0", "Hz"});
  expect_hidden_because("MANYCL_DEVICES=" + device_file("bw.json", R"({"ddr_bytes_per_cycle": 0})"),
                        {"ddr_bytes_per_cycle = 0"});
}

TEST_F(ConfigErrors, UnknownPreset) {
  expect_hidden_because("MANYCL_DEVICES=mppa9", {"unknown device preset 'mppa9'", "mppa3, small"});
}

TEST_F(ConfigErrors, MissingFile) {
  const std::string path = (dir / "absent.json").string();
  expect_hidden_because("MANYCL_DEVICES=" + path, {"cannot open device file", path});
}

TEST_F(ConfigErrors, EmptyDeviceList) {
  expect_hidden_because("MANYCL_DEVICES=,", {"names no device"});
}

TEST_F(ConfigErrors, BadDeviceMode) {
  expect_hidden_because("MANYCL_DEVICES=small MANYCL_DEVICE_MODE=simd",
                        {"MANYCL_DEVICE_MODE='simd'", "lwi, spmd"});
}

// One bad entry in a list hides the whole platform: exposing the others would silently
// renumber the devices an application was configured for.
TEST_F(ConfigErrors, OneBadDeviceInAList) {
  expect_hidden_because("MANYCL_DEVICES=small," + device_file("c0.json", R"({"clusters": 0})"),
                        {"clusters = 0"});
}

} // namespace
