// Graph passes on small graphs.
#include <gtest/gtest.h>

#include "kann/onnx_import.h"
#include "kann/passes.h"
#include "onnx_builder.h"

namespace {

using kann::test::OnnxBuilder;

kann::ir::Graph import(const OnnxBuilder &b) {
  auto g = kann::import_onnx_bytes(b.bytes());
  EXPECT_TRUE(g.ok()) << g.error().message;
  return g.value();
}

int count(const kann::ir::Graph &g, kann::ir::Op op) {
  int n = 0;
  for (auto &node : g.nodes)
    n += !node.dead && node.op == op;
  return n;
}

TEST(Passes, BatchNormFoldsIntoConvWithExactWeights) {
  OnnxBuilder b;
  b.input("x", {1, 2, 4, 4});
  auto w = b.weight("w", {3, 2, 1, 1});
  auto bias = b.weight("b", {3});
  auto g = b.weight("g", {3}, 0.0f, {2.0f, 0.5f, 1.0f});
  auto be = b.weight("be", {3}, 0.0f, {0.1f, 0.2f, 0.3f});
  auto m = b.weight("m", {3}, 0.0f, {1.0f, -1.0f, 0.0f});
  auto v = b.weight("v", {3}, 0.0f, {4.0f, 1.0f, 0.25f});
  b.node("Conv", {"x", "w", "b"}, {"c"});
  auto &bn = b.node("BatchNormalization", {"c", "g", "be", "m", "v"}, {"y"});
  OnnxBuilder::float1(bn, "epsilon", 0.0f);
  b.output("y");
  auto G = import(b);
  EXPECT_EQ(kann::passes::fold_batchnorm(G), 1);
  ASSERT_EQ(count(G, kann::ir::Op::BatchNormalization), 0);
  ASSERT_EQ(count(G, kann::ir::Op::Conv), 1);
  const auto &conv = G.nodes[0];
  EXPECT_EQ(G.tensors[conv.outputs[0]].name, "y");
  const auto &wf = G.tensors[conv.inputs[1]].data;
  const auto &bf = G.tensors[conv.inputs[2]].data;
  const float s[3] = {2.0f / 2.0f, 0.5f / 1.0f, 1.0f / 0.5f};
  for (int o = 0; o < 3; ++o) {
    for (int i = 0; i < 2; ++i)
      EXPECT_FLOAT_EQ(wf[o * 2 + i], w[o * 2 + i] * s[o]);
    EXPECT_FLOAT_EQ(bf[o], (bias[o] - m[o]) * s[o] + be[o]);
  }
}

TEST(Passes, StandaloneBatchNormAndPerChannelMulBecomeScaleShift) {
  OnnxBuilder b;
  b.input("x", {1, 2, 4, 4});
  b.weight("g", {2});
  b.weight("be", {2});
  b.weight("m", {2});
  b.weight("v", {2}, 0.0f, {1.0f, 2.0f});
  b.weight("k", {2, 1, 1}, 0.0f, {3.0f, 4.0f});
  b.node("BatchNormalization", {"x", "g", "be", "m", "v"}, {"bn"});
  b.node("Mul", {"bn", "k"}, {"y"});
  b.output("y");
  auto G = import(b);
  EXPECT_EQ(kann::passes::fold_batchnorm(G), 2);
  EXPECT_EQ(count(G, kann::ir::Op::ScaleShift), 2);
}

TEST(Passes, ActivationsFuseIntoConvGemmAndAdd) {
  OnnxBuilder b;
  b.input("x", {1, 2, 4, 4});
  b.weight("w", {2, 2, 3, 3});
  auto &c = b.node("Conv", {"x", "w"}, {"c"});
  OnnxBuilder::ints(c, "pads", {1, 1, 1, 1});
  auto &clip = b.node("Clip", {"c"}, {"r"});
  OnnxBuilder::float1(clip, "min", 0.0f);
  OnnxBuilder::float1(clip, "max", 6.0f);
  b.node("Add", {"r", "x"}, {"s"});
  b.node("Relu", {"s"}, {"y"});
  b.node("Sigmoid", {"x"}, {"z"}); // input has no producer: stays
  b.output("y");
  b.output("z");
  auto G = import(b);
  EXPECT_EQ(kann::passes::fuse_activations(G), 2);
  EXPECT_EQ(count(G, kann::ir::Op::Clip), 0);
  EXPECT_EQ(count(G, kann::ir::Op::Relu), 0);
  EXPECT_EQ(count(G, kann::ir::Op::Sigmoid), 1);
  EXPECT_EQ(G.nodes[0].act.kind, uint32_t(MCL_ACT_CLIP));
  EXPECT_FLOAT_EQ(G.nodes[0].act.beta, 6.0f);
  EXPECT_EQ(G.nodes[1].act.kind, uint32_t(MCL_ACT_RELU));
}

TEST(Passes, ActivationIsNotFusedWhenTheProducerHasOtherReaders) {
  OnnxBuilder b;
  b.input("x", {1, 2, 4, 4});
  b.weight("w", {2, 2, 1, 1});
  b.node("Conv", {"x", "w"}, {"c"});
  b.node("Relu", {"c"}, {"r"});
  b.node("Add", {"c", "r"}, {"y"});
  b.output("y");
  auto G = import(b);
  EXPECT_EQ(kann::passes::fuse_activations(G), 0);
}

// PyTorch's hardswish before opset 14: x * HardSigmoid(x, alpha 1/6, beta 1/2) becomes one
// HardSwish, fused into the Conv; another alpha, or a gate of another tensor (a squeeze-and-
// excitation product), stays a HardSigmoid and a Mul.
TEST(Passes, HardSigmoidGateOfItsOwnInputBecomesHardSwish) {
  for (const float alpha : {1.0f / 6.0f, 0.2f}) {
    OnnxBuilder b;
    b.input("x", {1, 2, 4, 4});
    b.weight("w", {2, 2, 1, 1});
    b.node("Conv", {"x", "w"}, {"c"});
    auto &hs = b.node("HardSigmoid", {"c"}, {"h"});
    OnnxBuilder::float1(hs, "alpha", alpha);
    b.node("Mul", {"c", "h"}, {"m"});
    auto &gate = b.node("HardSigmoid", {"x"}, {"g"});
    OnnxBuilder::float1(gate, "alpha", 1.0f / 6.0f);
    b.node("Mul", {"m", "g"}, {"y"}); // gates another tensor: kept
    b.output("y");
    auto G = import(b);
    const bool hardswish = alpha == 1.0f / 6.0f;
    EXPECT_EQ(kann::passes::fuse_gated_activations(G), hardswish ? 1 : 0) << alpha;
    EXPECT_EQ(count(G, kann::ir::Op::HardSwish), hardswish ? 1 : 0);
    EXPECT_EQ(count(G, kann::ir::Op::HardSigmoid), hardswish ? 1 : 2);
    EXPECT_EQ(count(G, kann::ir::Op::Mul), hardswish ? 1 : 2);
    kann::passes::fuse_activations(G); // the Conv's output has two readers unless fused
    EXPECT_EQ(G.nodes[0].act.kind, uint32_t(hardswish ? MCL_ACT_HARD_SWISH : MCL_ACT_NONE));
  }
}

// x * Sigmoid(x) (PyTorch's SiLU) becomes one Silu, fused into the Conv.
TEST(Passes, SigmoidGateOfItsOwnInputBecomesSilu) {
  OnnxBuilder b;
  b.input("x", {1, 2, 4, 4});
  b.weight("w", {2, 2, 1, 1});
  b.node("Conv", {"x", "w"}, {"c"});
  b.node("Sigmoid", {"c"}, {"s"});
  b.node("Mul", {"s", "c"}, {"y"});
  b.output("y");
  auto G = import(b);
  EXPECT_EQ(kann::passes::fuse_gated_activations(G), 1);
  EXPECT_EQ(count(G, kann::ir::Op::Sigmoid), 0);
  EXPECT_EQ(count(G, kann::ir::Op::Mul), 0);
  EXPECT_EQ(kann::passes::fuse_activations(G), 1);
  EXPECT_EQ(G.nodes[0].act.kind, uint32_t(MCL_ACT_SILU));
}

TEST(Passes, IdentityAndDropoutDisappear) {
  OnnxBuilder b;
  b.input("x", {1, 4});
  b.node("Relu", {"x"}, {"a"});
  b.node("Identity", {"a"}, {"b"});
  b.node("Dropout", {"b"}, {"y"});
  b.output("y");
  auto G = import(b);
  EXPECT_EQ(kann::passes::remove_identities(G), 2);
  EXPECT_EQ(count(G, kann::ir::Op::Relu), 1);
  EXPECT_EQ(G.tensors[G.outputs[0]].name, "y"); // the network keeps its output name
}

} // namespace

namespace {

TEST(Passes, HalfConversionRoundsToNearestEven) {
  using kann::passes::float_to_half;
  EXPECT_EQ(float_to_half(0.0f), 0x0000);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(1e6f), 0x7c00);                  // overflow -> inf
  EXPECT_EQ(float_to_half(5.9604645e-8f), 0x0001);         // smallest subnormal
  EXPECT_EQ(float_to_half(1.0f + 1.0f / 2048.0f), 0x3c00); // tie -> even
  EXPECT_EQ(float_to_half(1.0f + 3.0f / 2048.0f), 0x3c02); // tie -> even (up)
}

TEST(Passes, Fp16ConversionKeepsNetworkIoInFp32) {
  OnnxBuilder b;
  b.input("x", {1, 2, 4, 4});
  b.weight("w", {2, 2, 1, 1});
  b.node("Conv", {"x", "w"}, {"y"});
  b.output("y");
  auto G = import(b);
  EXPECT_EQ(kann::passes::convert_to_fp16(G), 2);
  EXPECT_EQ(count(G, kann::ir::Op::Convert), 2);
  EXPECT_EQ(G.tensors[G.inputs[0]].dtype, kann::ir::DType::F32);
  EXPECT_EQ(G.tensors[G.outputs[0]].dtype, kann::ir::DType::F32);
  EXPECT_EQ(G.tensors[G.outputs[0]].name, "y");
  const auto &conv = G.nodes[1];
  ASSERT_EQ(conv.op, kann::ir::Op::Conv);
  EXPECT_EQ(G.tensors[conv.inputs[0]].dtype, kann::ir::DType::F16);
  EXPECT_EQ(G.tensors[conv.outputs[0]].dtype, kann::ir::DType::F16);
  EXPECT_EQ(G.tensors[conv.inputs[1]].dtype, kann::ir::DType::F32); // packed by the tiler
}

} // namespace

namespace {

// The node (alive) that produces tensor `name`.
const kann::ir::Node &producer_of(const kann::ir::Graph &g, const std::string &name) {
  return g.nodes[size_t(g.tensors[size_t(g.find(name))].producer)];
}

TEST(Passes, ResidualAddsFuseIntoTheLaterConvolution) {
  OnnxBuilder b;
  b.input("x", {1, 4, 6, 6});
  b.weight("w", {4, 4, 3, 3});
  b.weight("bias", {4});
  b.weight("wd", {8, 4, 1, 1});
  b.weight("w3", {8, 4, 1, 1});
  auto pads = [](onnx::NodeProto &n) { OnnxBuilder::ints(n, "pads", {1, 1, 1, 1}); };
  pads(b.node("Conv", {"x", "w", "bias"}, {"c1"}));
  b.node("Add", {"c1", "x"}, {"s1"}); // identity shortcut, then Relu
  b.node("Relu", {"s1"}, {"y1"});
  b.node("Conv", {"y1", "wd"}, {"d"}); // shortcut first: the main path's conv is later
  b.node("Conv", {"y1", "w3"}, {"c3"});
  b.node("Add", {"d", "c3"}, {"y"});
  b.output("y");
  auto G = import(b);
  kann::passes::fuse_activations(G);
  EXPECT_EQ(kann::passes::fuse_residual_adds(G), 2);
  EXPECT_EQ(count(G, kann::ir::Op::Add), 0);
  const auto &first = producer_of(G, "y1");
  EXPECT_EQ(first.op, kann::ir::Op::Conv);
  EXPECT_EQ(first.act.kind, MCL_ACT_RELU);
  ASSERT_EQ(first.inputs.size(), 4u);
  EXPECT_EQ(G.tensors[size_t(first.inputs[3])].name, "x");
  const auto &second = producer_of(G, "y");
  ASSERT_EQ(second.inputs.size(), 4u);
  EXPECT_EQ(second.inputs[2], -1); // no bias
  EXPECT_EQ(G.tensors[size_t(second.inputs[0])].name, "y1");
  EXPECT_EQ(G.tensors[size_t(second.inputs[3])].name, "d");
}

TEST(Passes, ResidualFusionMovesTheConvolutionAfterALaterResidual) {
  OnnxBuilder b;
  b.input("x", {1, 4, 6, 6});
  b.weight("wd", {4, 4, 1, 1});
  b.weight("w", {4, 4, 1, 1});
  b.node("Conv", {"x", "wd"}, {"d"}); // the only candidate: the other conv has its Relu
  b.node("Conv", {"x", "w"}, {"c"});
  b.node("Relu", {"c"}, {"r"});
  b.node("Add", {"r", "d"}, {"y"});
  b.output("y");
  auto G = import(b);
  kann::passes::fuse_activations(G);
  ASSERT_EQ(kann::passes::fuse_residual_adds(G), 1);
  // Execution order: the Relu'd conv first, then the fused one reading its output.
  ASSERT_EQ(G.nodes.size(), 2u);
  EXPECT_EQ(G.tensors[size_t(G.nodes[0].outputs[0])].name, "r");
  EXPECT_EQ(G.tensors[size_t(G.nodes[1].outputs[0])].name, "y");
  EXPECT_EQ(G.tensors[size_t(G.nodes[1].inputs[3])].name, "r");
  EXPECT_EQ(G.tensors[size_t(G.find("y"))].producer, 1);
}

TEST(Passes, ResidualFusionSkipsWhatTheEpilogueCannotAdd) {
  // A conv with its own activation, a broadcast operand, a conv output read twice, a
  // constant operand, an output that is a network output: nothing fuses.
  OnnxBuilder b;
  b.input("x", {1, 4, 6, 6});
  b.weight("w", {4, 4, 1, 1});
  b.weight("k", {1, 4, 1, 1});
  b.weight("full", {1, 4, 6, 6});
  b.node("Conv", {"x", "w"}, {"c1"});
  b.node("Relu", {"c1"}, {"r1"});
  b.node("Add", {"r1", "x"}, {"s1"}); // the producer (Conv+Relu) has an activation
  b.node("Conv", {"s1", "w"}, {"c2"});
  b.node("Add", {"c2", "k"}, {"s2"}); // broadcast constant
  b.node("Conv", {"s2", "w"}, {"c3"});
  b.node("Add", {"c3", "s2"}, {"s3"});
  b.node("Mul", {"c3", "s3"}, {"s4"}); // c3 has a second reader
  b.node("Conv", {"s4", "w"}, {"c5"});
  b.node("Add", {"c5", "full"}, {"s5"}); // a constant operand of the full shape
  b.node("Conv", {"s5", "w"}, {"c6"});
  b.node("Add", {"c6", "s5"}, {"y"});
  b.output("y");
  b.output("c6"); // the convolution's output is a network output too
  auto G = import(b);
  kann::passes::fuse_activations(G);
  EXPECT_EQ(kann::passes::fuse_residual_adds(G), 0);
  EXPECT_EQ(count(G, kann::ir::Op::Add), 5);
}

TEST(Passes, ResidualFusionLeavesInt8AddsToTheirRequantization) {
  OnnxBuilder b;
  b.input("x", {1, 4, 6, 6});
  b.weight("w", {4, 4, 1, 1});
  b.node("Conv", {"x", "w"}, {"c"});
  b.node("Add", {"c", "x"}, {"y"});
  b.output("y");
  auto G = import(b);
  for (auto &n : G.nodes)
    n.ints["int8"] = {1};
  EXPECT_EQ(kann::passes::fuse_residual_adds(G), 0);
}

} // namespace
