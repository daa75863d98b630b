// Inputs the fuzzers (kann/fuzz) once crashed on, kept as regression tests: each must be
// compiled or rejected with a message, and a compiled one must give a valid JSON report.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kann/compile.h"
#include "kann/onnx_import.h"
#include "kann/passes.h"

namespace {

std::string read_bytes(const std::filesystem::path &path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(FuzzRegressions, EveryInputIsCompiledOrRejectedWithAMessage) {
  const std::filesystem::path dir =
      std::filesystem::path(KANN_SOURCE_DIR) / "tests/kann/fuzz_regressions";
  const auto small = manycl::device::preset("small");
  ASSERT_TRUE(small.ok());
  int inputs = 0;
  for (const auto &entry : std::filesystem::directory_iterator(dir)) {
    SCOPED_TRACE(entry.path().filename().string());
    ++inputs;
    auto graph = kann::import_onnx_bytes(read_bytes(entry.path()));
    if (!graph.ok()) {
      EXPECT_FALSE(graph.error().message.empty());
      continue;
    }
    auto optimized = kann::passes::optimize(graph.value());
    if (!optimized.ok()) {
      EXPECT_FALSE(optimized.error().message.empty());
      continue;
    }
    kann::CompileOptions options;
    options.device = small.value();
    options.clusters = 2;
    auto compiled = kann::compile_graph(graph.value(), options);
    if (!compiled.ok()) {
      EXPECT_FALSE(compiled.error().message.empty());
      continue;
    }
    EXPECT_TRUE(nlohmann::json::accept(compiled.value().report_json()));
  }
  EXPECT_GT(inputs, 0);
}

} // namespace
