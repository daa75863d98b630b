// Mixed FP16 / FP32 binaries: passes::convert_to_fp16 with float32 operators, and
// kann::mixed::choose_fp32_operators finding the activation whose binary16 storage ruins the
// outputs (kann/mixed_precision.h).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "handmade_program.h"
#include "kann/compile.h"
#include "kann/mixed_precision.h"
#include "kann/onnx_import.h"
#include "kann/passes.h"
#include "manycl/kbin_runner.h"
#include "onnx_builder.h"

namespace {

using namespace kann;
using test::OnnxBuilder;

ir::Graph optimized(const OnnxBuilder &b) {
  auto g = import_onnx_bytes(b.bytes());
  EXPECT_TRUE(g.ok()) << g.error().message;
  EXPECT_TRUE(passes::optimize(g.value()).ok());
  return g.value();
}

const ir::Node &node(const ir::Graph &g, const std::string &name) {
  for (const auto &n : g.nodes)
    if (n.name == name)
      return n;
  ADD_FAILURE() << "no node " << name;
  return g.nodes.front();
}

int converts(const ir::Graph &g) {
  int count = 0;
  for (const auto &n : g.nodes)
    count += n.op == ir::Op::Convert;
  return count;
}

// x -> a -> b -> c -> y, 1x1 convolutions.
OnnxBuilder chain() {
  OnnxBuilder b;
  b.input("x", {1, 4, 6, 6});
  for (const char *name : {"a", "b", "c"}) {
    b.weight(std::string("w") + name, {4, 4, 1, 1});
    const std::string in = name[0] == 'a' ? "x" : std::string(1, char(name[0] - 1)) + "_out";
    b.node("Conv", {in, std::string("w") + name},
           {name[0] == 'c' ? "y" : std::string(name) + "_out"}, name);
  }
  b.output("y");
  return b;
}

TEST(MixedPrecision, Float32OperatorsKeepTheirTensorsInFloat32) {
  auto g = optimized(chain());
  // b and c in float32: a's output is converted once for b, c's output is the network's.
  EXPECT_EQ(passes::convert_to_fp16(g, {"b", "c"}), 2);
  EXPECT_EQ(converts(g), 2);
  const auto type_of = [&](int t) { return g.tensors[size_t(t)].dtype; };
  EXPECT_EQ(type_of(node(g, "a").inputs[0]), ir::DType::F16);
  EXPECT_EQ(type_of(node(g, "a").outputs[0]), ir::DType::F16);
  EXPECT_EQ(type_of(node(g, "b").inputs[0]), ir::DType::F32);
  EXPECT_EQ(g.tensors[size_t(node(g, "b").inputs[0])].name, "a_out.f32");
  EXPECT_EQ(type_of(node(g, "b").outputs[0]), ir::DType::F32);
  EXPECT_EQ(type_of(node(g, "c").outputs[0]), ir::DType::F32);
  EXPECT_EQ(g.tensors[size_t(g.outputs[0])].name, "y");

  // a in float32 only: it reads the float32 input itself, b reads its output rounded.
  auto h = optimized(chain());
  EXPECT_EQ(passes::convert_to_fp16(h, {"a"}), 2); // a_out.to_f16, y.to_f32
  EXPECT_EQ(h.tensors[size_t(node(h, "a").inputs[0])].name, "x");
  EXPECT_EQ(h.tensors[size_t(node(h, "b").inputs[0])].dtype, ir::DType::F16);
}

TEST(MixedPrecision, CompileRejectsFloat32OperatorsOutsideFp16) {
  auto g = optimized(chain());
  CompileOptions options;
  options.device = manycl::device::preset("small").value();
  options.fp32_operators = {"b"};
  auto fp32 = compile_graph(g, options);
  ASSERT_FALSE(fp32.ok());
  EXPECT_NE(fp32.error().message.find("--precision fp16"), std::string::npos);
  options.precision = "fp16";
  options.fp32_operators = {"no_such_node"};
  auto unknown = compile_graph(g, options);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("no_such_node"), std::string::npos);
}

std::vector<float> uniform_input(unsigned seed, size_t n) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(n);
  for (float &v : x)
    v = u(random);
  return x;
}

// x + 2048 then - 2048: binary16 holds 2048 + x only to its spacing of 2 there, so rounding
// `lifted` loses x entirely, while every other tensor rounds harmlessly. The analysis must keep
// exactly `lifted` in float32 (its producer and its reader), and the mixed binary must then
// meet the tolerance on an input it never saw.
TEST(MixedPrecision, AnalysisKeepsTheCancellingActivationInFloat32) {
  OnnxBuilder b;
  b.input("x", {1, 4, 8, 8});
  std::vector<float> identity(16, 0.0f);
  for (int c = 0; c < 4; ++c)
    identity[size_t(c * 4 + c)] = 1.0f;
  b.weight("w_lift", {4, 4, 1, 1}, 0, identity);
  b.weight("b_lift", {4}, 0, {2048, 2048, 2048, 2048});
  b.weight("w_back", {4, 4, 1, 1}, 0, identity);
  b.weight("b_back", {4}, 0, {-2048, -2048, -2048, -2048});
  b.weight("w_mix", {4, 4, 1, 1});
  b.node("Conv", {"x", "w_lift", "b_lift"}, {"lifted"}, "lift");
  b.node("Conv", {"lifted", "w_back", "b_back"}, {"back"}, "down");
  b.node("Conv", {"back", "w_mix"}, {"y"}, "mix");
  b.output("y");
  auto g = optimized(b);
  CompileOptions options;
  options.device = manycl::device::preset("small").value();
  options.clusters = 2;
  options.precision = "fp16";
  const std::vector<std::vector<std::vector<float>>> samples = {{uniform_input(1, 256)},
                                                                {uniform_input(2, 256)}};
  auto choice = mixed::choose_fp32_operators(g, options, samples, {});
  ASSERT_TRUE(choice.ok()) << choice.error().message;
  const auto &c = choice.value();
  EXPECT_GT(c.fp16_error, 1.0) << "all binary16 must fail the tolerance here";
  ASSERT_FALSE(c.ranking.empty());
  EXPECT_EQ(c.ranking[0].tensor, "lifted");
  EXPECT_EQ(c.kept_tensors, std::vector<std::string>{"lifted"});
  EXPECT_EQ(c.fp32_operators, (std::set<std::string>{"lift", "down"}));
  EXPECT_LE(c.mixed_error, 0.8);
  EXPECT_GT(c.mixed_params_bytes, c.fp16_params_bytes); // two float32 weight blocks
  EXPECT_GT(c.mixed_spm_bytes, 0u);

  options.fp32_operators = c.fp32_operators;
  auto mixed = compile_graph(g, options);
  ASSERT_TRUE(mixed.ok()) << mixed.error().message;
  CompileOptions fp32_options = options;
  fp32_options.precision = "fp32";
  fp32_options.fp32_operators.clear();
  auto fp32 = compile_graph(g, fp32_options);
  ASSERT_TRUE(fp32.ok()) << fp32.error().message;
  const auto x = uniform_input(3, 256);
  manycl::device::Device device(options.device);
  auto got = manycl::interp::run_kbin(device, mixed.value().program, {test::as_bytes(x), {}});
  auto want = manycl::interp::run_kbin(device, fp32.value().program, {test::as_bytes(x), {}});
  ASSERT_TRUE(got.ok() && want.ok());
  const auto a = test::as_floats(got.value().outputs[1]),
             r = test::as_floats(want.value().outputs[1]);
  ASSERT_EQ(a.size(), r.size());
  for (size_t k = 0; k < a.size(); ++k)
    ASSERT_NEAR(a[k], r[k], 2e-2 + 2e-2 * std::fabs(r[k])) << k;
}

} // namespace
