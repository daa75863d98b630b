// The `kann` command-line tool: compile, inspect, simulate, and one-line errors.
#include <gtest/gtest.h>

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

} // namespace
