// Golden tests of the compiler's stages on small graphs: the IR as imported, the IR after the
// passes, and the schedule the tile compiler emits (steps, per-step operator, lowering, split
// and boxes, SPM buffers and offsets, every record of every cluster). Each stage's text is
// compared with a checked-in file of tests/kann/golden/; a change shows as a diff.
//
// After an intended change of the compiler's output, regenerate the files and review them
// with `git diff tests/kann/golden/`:
//   KANN_UPDATE_GOLDEN=1 build/tests/kann/kann_tests --gtest_filter='Golden*'
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kann/compile.h"
#include "kann/onnx_import.h"
#include "kann/passes.h"
#include "kann/quantize.h"
#include "small_cnn.h"

namespace {

using namespace kann;

std::string golden_path(const std::string &name) {
  return std::string(KANN_SOURCE_DIR) + "/tests/kann/golden/" + name;
}

std::vector<std::string> lines_of(const std::string &text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

// A unified-style diff (longest common subsequence of lines), at most `limit` lines shown.
std::string line_diff(const std::string &want, const std::string &got, size_t limit = 60) {
  const auto a = lines_of(want), b = lines_of(got);
  std::vector<std::vector<uint32_t>> lcs(a.size() + 1, std::vector<uint32_t>(b.size() + 1, 0));
  for (size_t i = a.size(); i-- > 0;)
    for (size_t j = b.size(); j-- > 0;)
      lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
  std::ostringstream o;
  size_t shown = 0, i = 0, j = 0;
  auto show = [&](char tag, size_t line, const std::string &text) {
    if (shown++ < limit)
      o << tag << " " << line + 1 << ": " << text << "\n";
  };
  while (i < a.size() || j < b.size()) {
    if (i < a.size() && j < b.size() && a[i] == b[j]) {
      ++i, ++j;
    } else if (i < a.size() && (j == b.size() || lcs[i + 1][j] >= lcs[i][j + 1])) {
      show('-', i, a[i]);
      ++i;
    } else {
      show('+', j, b[j]);
      ++j;
    }
  }
  if (shown > limit)
    o << "... " << shown - limit << " more changed lines\n";
  return o.str();
}

// Compares `got` with the golden file `name`, or rewrites the file with KANN_UPDATE_GOLDEN=1.
void expect_golden(const std::string &name, const std::string &got) {
  const std::string path = golden_path(name);
  const char *update = std::getenv("KANN_UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    std::ofstream(path, std::ios::binary) << got;
    return;
  }
  std::ifstream f(path, std::ios::binary);
  ASSERT_TRUE(f.good()) << path << " is missing; create it with KANN_UPDATE_GOLDEN=1";
  std::stringstream want;
  want << f.rdbuf();
  if (want.str() == got)
    return;
  ADD_FAILURE() << "the output differs from " << path << " (- golden, + now, by line):\n"
                << line_diff(want.str(), got)
                << "If the change is intended, regenerate the golden files with "
                   "KANN_UPDATE_GOLDEN=1 build/tests/kann/kann_tests --gtest_filter='Golden*' "
                   "and review `git diff tests/kann/golden/`.";
}

// Imports, optimizes and compiles `onnx`, checking each stage against <name>.{ir,opt,schedule}.txt.
void check_stages(const std::string &name, const std::string &onnx, CompileOptions options) {
  auto g = import_onnx_bytes(onnx);
  ASSERT_TRUE(g.ok()) << g.error().message;
  expect_golden(name + ".ir.txt", g.value().dump());
  ASSERT_TRUE(passes::optimize(g.value()).ok());
  expect_golden(name + ".opt.txt", g.value().dump());
  options.dump_schedule = true;
  auto out = compile_graph(g.value(), options);
  ASSERT_TRUE(out.ok()) << out.error().message;
  expect_golden(name + ".schedule.txt", out.value().schedule);
}

CompileOptions on(const char *preset, unsigned clusters, const char *precision) {
  CompileOptions o;
  o.device = manycl::device::preset(preset).value();
  o.clusters = clusters;
  o.precision = precision;
  o.schedule = "layer"; // the layer schedule's stages; the pipeline's have their own file
  return o;
}

// Conv + BatchNorm + Relu, pooling, a strided Conv, a residual Add, AveragePool, flatten and
// Gemm, Softmax: folding, fusion, row and channel splits, halo exchanges.
TEST(Golden, SmallCnnFp32TwoClusters) {
  check_stages("small_cnn_fp32_c2", test::make_small_cnn().onnx, on("mppa3", 2, "fp32"));
}

// The same network in the pipeline schedule: parameters loaded by pieces in earlier steps
// whose compute hides them (the buffers' lifetimes start earlier), the compute records those
// of the layer schedule.
TEST(Golden, SmallCnnFp32TwoClustersPipeline) {
  CompileOptions options = on("mppa3", 2, "fp32");
  options.schedule = "pipeline";
  auto g = import_onnx_bytes(test::make_small_cnn().onnx);
  ASSERT_TRUE(g.ok()) << g.error().message;
  ASSERT_TRUE(passes::optimize(g.value()).ok());
  options.dump_schedule = true;
  auto out = compile_graph(g.value(), options);
  ASSERT_TRUE(out.ok()) << out.error().message;
  expect_golden("small_cnn_fp32_c2_pipeline.schedule.txt", out.value().schedule);
}

// A SqueezeNet fire module (its Concat written in place by the expand convolutions), a nearest
// 2x Resize and a Sigmoid, in FP16 (Convert steps at the network's edges).
std::string fire_resize_model() {
  test::OnnxBuilder b;
  b.input("x", {1, 8, 10, 12});
  b.weight("ws", {4, 8, 1, 1});
  b.weight("bs", {4}, 0.1f);
  b.weight("we1", {8, 4, 1, 1});
  b.weight("be1", {8}, 0.1f);
  b.weight("we3", {8, 4, 3, 3}, 0.2f);
  b.weight("be3", {8}, 0.1f);
  b.weight("roi", {0}, 0.0f, {});
  b.weight("scales", {4}, 0.0f, {1.0f, 1.0f, 2.0f, 2.0f});
  b.node("Conv", {"x", "ws", "bs"}, {"s"});
  b.node("Relu", {"s"}, {"sr"});
  b.node("Conv", {"sr", "we1", "be1"}, {"e1"});
  b.node("Relu", {"e1"}, {"e1r"});
  test::OnnxBuilder::ints(b.node("Conv", {"sr", "we3", "be3"}, {"e3"}), "pads", {1, 1, 1, 1});
  b.node("Relu", {"e3"}, {"e3r"});
  test::OnnxBuilder::int1(b.node("Concat", {"e1r", "e3r"}, {"cat"}), "axis", 1);
  auto &r = b.node("Resize", {"cat", "roi", "scales"}, {"up"});
  auto *mode = r.add_attribute();
  mode->set_name("mode");
  mode->set_type(onnx::AttributeProto::STRING);
  mode->set_s("nearest");
  b.node("Sigmoid", {"up"}, {"y"});
  b.output("y");
  return b.bytes();
}

TEST(Golden, FireResizeFp16TwoClusters) {
  check_stages("fire_resize_fp16_c2", fire_resize_model(), on("mppa3", 2, "fp16"));
}

// The small CNN on larger images on the `small` preset (256 KiB SPM): operators tiled in bands
// inside the clusters, parameters streamed, activations spilled as the SPM requires.
TEST(Golden, SmallCnnTightSpm) {
  check_stages("small_cnn_tight_spm", test::make_small_cnn(160, 144, false).onnx,
               on("small", 2, "fp32"));
}

// The same in the group schedule: the spilled chain (the first convolution and its pooling)
// runs as one layer group, band by band with its intermediate in a rolling band buffer (the
// halo rows copied to the buffer's start), so nothing spills.
TEST(Golden, SmallCnnTightSpmGroup) {
  CompileOptions options = on("small", 2, "fp32");
  options.schedule = "group";
  auto g = import_onnx_bytes(test::make_small_cnn(160, 144, false).onnx);
  ASSERT_TRUE(g.ok()) << g.error().message;
  ASSERT_TRUE(passes::optimize(g.value()).ok());
  options.dump_schedule = true;
  auto out = compile_graph(g.value(), options);
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ(out.value().schedule_choice.chosen, "group");
  EXPECT_TRUE(out.value().spilled.empty());
  expect_golden("small_cnn_tight_spm_group.schedule.txt", out.value().schedule);
}

// The small CNN quantized to INT8 from one calibration sample (the QDQ form lowered to INT8
// kernels: <name>.int8.txt), on 2 clusters: INT8 convolutions, pooling, Add and Gemm, with
// the QuantizeLinear / DequantizeLinear copies at the network's edges.
TEST(Golden, SmallCnnInt8TwoClusters) {
  const auto m = test::make_small_cnn();
  auto g = import_onnx_bytes(m.onnx);
  ASSERT_TRUE(g.ok()) << g.error().message;
  ASSERT_TRUE(passes::optimize(g.value()).ok());
  CompileOptions options = on("mppa3", 2, "int8");
  quantize::split_activations(g.value());
  CompileOptions float_options = options;
  float_options.precision = "fp32";
  auto ranges = quantize::calibrate(g.value(), float_options, {{m.input}});
  ASSERT_TRUE(ranges.ok()) << ranges.error().message;
  auto count = quantize::quantize_int8(g.value(), ranges.value());
  ASSERT_TRUE(count.ok()) << count.error().message;
  expect_golden("small_cnn_int8_c2.int8.txt", g.value().dump());
  options.dump_schedule = true;
  auto out = compile_graph(g.value(), options);
  ASSERT_TRUE(out.ok()) << out.error().message;
  expect_golden("small_cnn_int8_c2.schedule.txt", out.value().schedule);
}

} // namespace
