// The `kann` command-line tool: compile, inspect, simulate, and one-line errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "small_cnn.h"

namespace {

namespace fs = std::filesystem;

struct Run {
  int status;
  std::string output;
};

Run sh(const std::string &cmd) {
  std::string full = cmd + " 2>&1";
  FILE *p = popen(full.c_str(), "r");
  std::string out;
  char buf[4096];
  while (p && fgets(buf, sizeof buf, p))
    out += buf;
  int st = p ? pclose(p) : -1;
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

class Tool : public ::testing::Test {
protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("kann_tool_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    auto m = kann::test::make_small_cnn();
    std::ofstream(dir / "cnn.onnx", std::ios::binary) << m.onnx;
    // input.npy: float32 [1,3,20,18]
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 20, 18), }";
    while ((10 + header.size() + 1) % 64)
      header += ' ';
    header += '\n';
    std::ofstream f(dir / "x.npy", std::ios::binary);
    f.write("\x93NUMPY\x01\x00", 8);
    uint16_t n = uint16_t(header.size());
    f.write(reinterpret_cast<const char *>(&n), 2);
    f << header;
    f.write(reinterpret_cast<const char *>(m.input.data()), std::streamsize(m.input.size() * 4));
    probs = m.probs;
  }
  void TearDown() override { fs::remove_all(dir); }
  std::string path(const char *name) const { return (dir / name).string(); }
  fs::path dir;
  std::vector<float> probs;
};

const std::string kann_tool = KANN_TOOL_PATH;

// --dump-ir and --dump-schedule print the stages (what tests/kann/golden/ checks in-process)
// without changing the binary.
TEST_F(Tool, DumpIrAndScheduleLeaveTheBinaryAlone) {
  auto plain =
      sh(kann_tool + " compile " + path("cnn.onnx") + " -o " + path("a.kbin") + " --clusters 2");
  ASSERT_EQ(plain.status, 0) << plain.output;
  auto dumped = sh(kann_tool + " compile " + path("cnn.onnx") + " -o " + path("b.kbin") +
                   " --clusters 2 --dump-ir --dump-schedule");
  ASSERT_EQ(dumped.status, 0) << dumped.output;
  EXPECT_NE(dumped.output.find("Conv+act"), std::string::npos) << dumped.output;
  EXPECT_NE(dumped.output.find("schedule: 2 cluster(s)"), std::string::npos) << dumped.output;
  EXPECT_NE(dumped.output.find("step 1: "), std::string::npos) << dumped.output;
  std::ifstream a(path("a.kbin"), std::ios::binary), b(path("b.kbin"), std::ios::binary);
  const std::string abytes((std::istreambuf_iterator<char>(a)), {});
  const std::string bbytes((std::istreambuf_iterator<char>(b)), {});
  EXPECT_FALSE(abytes.empty());
  EXPECT_TRUE(abytes == bbytes) << "--dump-schedule changed the binary";
}

// --schedule group: the tool builds layer groups and says so; the simulated output is the
// network's; an unknown schedule is a one-line error.
TEST_F(Tool, ScheduleGroupCompilesAndSimulates) {
  auto r = sh(kann_tool + " compile " + path("cnn.onnx") + " -o " + path("g.kbin") +
              " --clusters 2 --schedule group");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("schedule group (--schedule group"), std::string::npos) << r.output;
  r = sh(kann_tool + " simulate " + path("g.kbin") + " --input " + path("x.npy") +
         " --output-dir " + dir.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("1.0000 x simulated"), std::string::npos) << r.output;
  std::ifstream f(dir / "probs.npy", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), {});
  ASSERT_GE(bytes.size(), 40u + 128);
  std::vector<float> got(10);
  std::memcpy(got.data(), bytes.data() + bytes.size() - 40, 40);
  for (int i = 0; i < 10; ++i)
    EXPECT_NEAR(got[i], probs[i], 1e-4);
  r = sh(kann_tool + " compile " + path("cnn.onnx") + " -o " + path("h.kbin") +
         " --schedule columns");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--schedule must be layer, pipeline, group or auto"), std::string::npos)
      << r.output;
}

TEST_F(Tool, CompileInspectSimulate) {
  auto r = sh(kann_tool + " compile " + path("cnn.onnx") + " -o " + path("cnn.kbin") +
              " --clusters 2 --device-config small --report " + path("r.html"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("modeled cycles"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::file_size(path("r.html")) > 1000);
  r = sh(kann_tool + " inspect " + path("cnn.kbin") + " --records");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("multicast"), std::string::npos);
  EXPECT_NE(r.output.find("conv2d"), std::string::npos);
  r = sh(kann_tool + " simulate " + path("cnn.kbin") + " --input " + path("x.npy") +
         " --output-dir " + dir.string());
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream f(dir / "probs.npy", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), {});
  ASSERT_GE(bytes.size(), 40u + 128);
  std::vector<float> got(10);
  std::memcpy(got.data(), bytes.data() + bytes.size() - 40, 40);
  for (int i = 0; i < 10; ++i)
    EXPECT_NEAR(got[i], probs[i], 1e-4);
}

TEST_F(Tool, BadInputsAreOneLineErrors) {
  std::ofstream(dir / "junk.onnx") << "not a model";
  for (const std::string &args : std::vector<std::string>{
           "compile " + path("junk.onnx") + " -o " + path("j.kbin"),
           "compile " + path("missing.onnx") + " -o " + path("j.kbin"),
           "compile " + path("cnn.onnx") + " -o " + path("j.kbin") + " --clusters 9",
           "compile " + path("cnn.onnx") + " -o " + path("j.kbin") + " --device-config nope",
           "inspect " + path("junk.onnx"), std::string("frobnicate")}) {
    auto r = sh(kann_tool + " " + args);
    EXPECT_NE(r.status, 0) << args;
    EXPECT_NE(r.output.find("kann: "), std::string::npos) << r.output;
  }
}

// Numbers are taken whole and in range: "--clusters 0" used to mean "all clusters" and
// "--clusters -1" 4294967295.
TEST_F(Tool, NumericOptionsOutOfRangeAreOneLineErrors) {
  const std::string compile = kann_tool + " compile " + path("cnn.onnx") + " -o " + path("n.kbin") +
                              " --device-config small ";
  const struct {
    std::string args;
    std::string expect;
  } cases[] = {
      {"--clusters 0", "kann: --clusters: 0 is out of range (expected an integer in 1..2); the "
                       "device 'small' has 2 clusters"},
      {"--clusters -1", "kann: --clusters: '-1' is not a number (expected an integer in 1..2)"},
      {"--clusters 4294967298", "kann: --clusters: 4294967298 is out of range"},
      {"--clusters 99999999999999999999999", "kann: --clusters: 99999999999999999999999 is out"},
      {"--clusters 2x", "kann: --clusters: '2x' is not a number"},
      {"--clusters ''", "kann: --clusters: '' is not a number"},
      {"--clusters 3", "kann: --clusters: 3 is out of range (expected an integer in 1..2)"},
      {"--calibration-percentile nan", "kann: --calibration-percentile: 'nan' is not a number"},
      {"--calibration-percentile 20", "kann: --calibration-percentile: 20 is out of range"},
      {"--calibration-percentile 99.9x", "'99.9x' is not a number"},
  };
  for (const auto &c : cases) {
    auto r = sh(compile + c.args);
    EXPECT_EQ(r.status, 1) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
    EXPECT_FALSE(fs::exists(path("n.kbin"))) << c.args;
  }
  // In range still compiles.
  auto r = sh(compile + "--clusters 1");
  EXPECT_EQ(r.status, 0) << r.output;
}

// Mixed precision (--fp16-tolerance, --fp32-operators): refused with a one-line error where
// it cannot apply; the analysis runs on --calibration samples and says what it kept.
TEST_F(Tool, MixedPrecisionOptions) {
  const std::string compile = kann_tool + " compile " + path("cnn.onnx") + " -o " + path("m.kbin") +
                              " --device-config small ";
  const std::string x = path("x.npy");
  const struct {
    std::string args;
    std::string expect;
  } cases[] = {
      {"--fp16-tolerance 0.02 --calibration " + x, "kann: --fp16-tolerance needs --precision fp16"},
      {"--fp32-operators a", "kann: --fp32-operators needs --precision fp16"},
      {"--precision fp16 --fp16-tolerance 0.02",
       "kann: --fp16-tolerance measures the error on calibration data"},
      {"--precision fp16 --fp16-tolerance 0.02x --calibration " + x,
       "kann: --fp16-tolerance: '0.02x' is not a number"},
      {"--precision fp16 --fp16-tolerance 0.02,-1 --calibration " + x,
       "kann: --fp16-tolerance: -1 is out of range"},
      {"--precision fp16 --fp32-operators a --fp16-tolerance 0.02 --calibration " + x,
       "kann: --fp32-operators and --fp16-tolerance exclude each other"},
      {"--precision fp16 --fp32-operators nope",
       "kann: float32 operator 'nope' is not an operator of the optimized graph"},
      {"--precision fp16 --calibration " + x,
       "kann: --calibration is only used with --precision int8 or with --fp16-tolerance"},
  };
  for (const auto &c : cases) {
    auto r = sh(compile + c.args);
    EXPECT_EQ(r.status, 1) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_EQ(r.output.find("kann: ", r.output.find(c.expect) + 1), std::string::npos)
        << "the error is the last line: " << r.output;
    EXPECT_FALSE(fs::exists(path("m.kbin"))) << c.args;
  }
  // The small CNN keeps within 2e-2 in binary16: nothing to keep in float32.
  auto r = sh(compile + "--precision fp16 --fp16-tolerance 0.02 --calibration " + x);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("kann: mixed precision: 0 activation(s) kept in float32, 0 operator(s)"),
            std::string::npos)
      << r.output;
  // Named operators (the small CNN's first two convolutions) compile in float32.
  r = sh(compile + "--precision fp16 --fp32-operators c1,c2");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(fs::exists(path("m.kbin")));
}

// Writes a float32 .npy of `shape` holding `values`.
void write_npy(const fs::path &file, const std::string &shape, const std::vector<float> &values) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64)
    header += ' ';
  header += '\n';
  std::ofstream f(file, std::ios::binary);
  f.write("\x93NUMPY\x01\x00", 8);
  uint16_t n = uint16_t(header.size());
  f.write(reinterpret_cast<const char *>(&n), 2);
  f << header;
  f.write(reinterpret_cast<const char *>(values.data()), std::streamsize(values.size() * 4));
}

// The right number of values in another shape is refused with both shapes.
TEST_F(Tool, SimulateRefusesAnInputOfAnotherShape) {
  auto r = sh(kann_tool + " compile " + path("cnn.onnx") + " -o " + path("s.kbin") +
              " --clusters 2 --device-config small");
  ASSERT_EQ(r.status, 0) << r.output;
  std::vector<float> values(3 * 20 * 18, 0.5f);
  for (const std::string shape : {"(1080,)", "(1, 1080)", "(3, 20, 18)", "(1, 3, 18, 20)"}) {
    write_npy(dir / "flat.npy", shape, values);
    r = sh(kann_tool + " simulate " + path("s.kbin") + " --input " + path("flat.npy") +
           " --output-dir " + dir.string());
    EXPECT_EQ(r.status, 1) << shape << "\n" << r.output;
    EXPECT_NE(r.output.find("shape " + shape + " does not match the input's shape (1, 3, 20, 18)"),
              std::string::npos)
        << r.output;
  }
  write_npy(dir / "ok.npy", "(1, 3, 20, 18)", values);
  r = sh(kann_tool + " simulate " + path("s.kbin") + " --input " + path("ok.npy") +
         " --output-dir " + dir.string());
  EXPECT_EQ(r.status, 0) << r.output;
}

} // namespace
