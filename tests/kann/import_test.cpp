// ONNX import: shapes, attributes, shape-arithmetic folding, and one-line errors.
#include <gtest/gtest.h>

#include "kann/compile.h"
#include "kann/onnx_import.h"
#include "manycl/device/config.h"
#include "onnx_builder.h"

namespace {

using kann::test::OnnxBuilder;

std::string error_of(const std::string &bytes) {
  auto g = kann::import_onnx_bytes(bytes);
  if (g.ok())
    return "";
  EXPECT_EQ(g.error().message.find('\n'), std::string::npos) << "errors are one line";
  return g.error().message;
}

TEST(Import, ConvPoolGemmShapes) {
  OnnxBuilder b;
  b.input("x", {1, 3, 11, 9});
  b.weight("w", {4, 3, 3, 3});
  auto &c = b.node("Conv", {"x", "w"}, {"c"});
  OnnxBuilder::ints(c, "strides", {2, 2});
  auto ap = std::string("SAME_UPPER");
  auto *a = c.add_attribute();
  a->set_name("auto_pad");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(ap);
  auto &p = b.node("MaxPool", {"c"}, {"p"});
  OnnxBuilder::ints(p, "kernel_shape", {3, 3});
  OnnxBuilder::int1(p, "ceil_mode", 1);
  OnnxBuilder::ints(p, "strides", {2, 2});
  b.node("Flatten", {"p"}, {"f"});
  b.weight("fc", {24, 5});
  b.node("MatMul", {"f", "fc"}, {"y"});
  b.output("y");
  auto g = kann::import_onnx_bytes(b.bytes());
  ASSERT_TRUE(g.ok()) << g.error().message;
  auto &G = g.value();
  EXPECT_EQ(G.tensors[G.find("c")].shape, (std::vector<int64_t>{1, 4, 6, 5}));
  EXPECT_EQ(G.tensors[G.find("p")].shape, (std::vector<int64_t>{1, 4, 3, 2}));
  EXPECT_EQ(G.tensors[G.find("y")].shape, (std::vector<int64_t>{1, 5}));
  // auto_pad resolved into explicit pads (SAME_UPPER puts the extra row at the end).
  EXPECT_EQ(G.nodes[0].attrs("pads"), (std::vector<int64_t>{1, 1, 1, 1}));
}

TEST(Import, FoldsShapeArithmeticIntoReshape) {
  // The PyTorch flatten idiom: Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])).
  OnnxBuilder b;
  b.input("x", {1, 2, 3, 4});
  b.node("Shape", {"x"}, {"s"});
  b.int64s("zero", {0});
  auto &ga = b.node("Gather", {"s", "zero"}, {"n"});
  OnnxBuilder::int1(ga, "axis", 0);
  b.int64s("axes", {0});
  b.node("Unsqueeze", {"n", "axes"}, {"n1"});
  b.int64s("minus1", {-1});
  auto &cc = b.node("Concat", {"n1", "minus1"}, {"shape"});
  OnnxBuilder::int1(cc, "axis", 0);
  b.node("Reshape", {"x", "shape"}, {"y"});
  b.output("y");
  auto g = kann::import_onnx_bytes(b.bytes());
  ASSERT_TRUE(g.ok()) << g.error().message;
  auto &G = g.value();
  EXPECT_EQ(G.tensors[G.find("y")].shape, (std::vector<int64_t>{1, 24}));
  EXPECT_TRUE(G.tensors[G.find("shape")].is_const);
  int alive = 0;
  for (auto &n : G.nodes)
    alive += !n.dead;
  EXPECT_EQ(alive, 1); // only the Reshape is left
}

TEST(Import, UnsupportedOperatorNamesTheNode) {
  OnnxBuilder b;
  b.input("x", {1, 3, 4, 4});
  b.node("LSTM", {"x"}, {"y"}, "my_lstm");
  b.output("y");
  auto e = error_of(b.bytes());
  EXPECT_NE(e.find("my_lstm"), std::string::npos) << e;
  EXPECT_NE(e.find("unsupported operator"), std::string::npos) << e;
}

// A batched MatMul (an operand of rank 3 or more) with a constant B is a grouped 1x1
// convolution between layout copies; one of two activations is kept (a native product per
// batch index: tiler/lower_layout.cpp) in whole tensors; inner dimensions must agree.
TEST(Import, BatchedMatMulShapesAndErrors) {
  OnnxBuilder two;
  two.input("a", {2, 3, 4});
  two.input("b", {2, 4, 5});
  two.node("MatMul", {"a", "b"}, {"y"}, "attention");
  two.output("y");
  auto products = kann::import_onnx_bytes(two.bytes());
  ASSERT_TRUE(products.ok()) << products.error().message;
  EXPECT_TRUE(products.value().whole_tensors);
  EXPECT_EQ(products.value().tensors[size_t(products.value().outputs[0])].shape,
            (std::vector<int64_t>{2, 3, 5}));
  OnnxBuilder mismatch;
  mismatch.input("a", {2, 3, 4});
  mismatch.input("b", {2, 6, 5});
  mismatch.node("MatMul", {"a", "b"}, {"y"}, "attention");
  mismatch.output("y");
  auto e = error_of(mismatch.bytes());
  EXPECT_NE(e.find("attention"), std::string::npos) << e;
  EXPECT_NE(e.find("inner dimensions differ (4 and 6)"), std::string::npos) << e;
  OnnxBuilder inner;
  inner.input("a", {2, 3, 4});
  inner.weight("b", {2, 5, 6});
  inner.node("MatMul", {"a", "b"}, {"y"}, "mm");
  inner.output("y");
  EXPECT_NE(error_of(inner.bytes()).find("inner dimensions differ (4 and 5)"), std::string::npos)
      << error_of(inner.bytes());
  OnnxBuilder ok;
  ok.input("a", {2, 3, 4});
  ok.weight("b", {2, 4, 6});
  ok.node("MatMul", {"a", "b"}, {"y"}, "mm");
  ok.output("y");
  auto g = kann::import_onnx_bytes(ok.bytes());
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_TRUE(g.value().whole_tensors);
  EXPECT_EQ(g.value().tensors[size_t(g.value().outputs[0])].shape, (std::vector<int64_t>{2, 3, 6}));
  int convs = 0;
  for (const auto &n : g.value().nodes)
    if (n.op == kann::ir::Op::Conv) {
      ++convs;
      EXPECT_EQ(n.attr("group", 0), 2); // one group per batch product
    }
  EXPECT_EQ(convs, 1);
}

TEST(Import, DynamicShapesAreRejected) {
  OnnxBuilder b;
  b.input("x", {1, 3, 4, 4}, /*dynamic_batch=*/false, /*dynamic_axis=*/2);
  b.node("Relu", {"x"}, {"y"});
  b.output("y");
  EXPECT_NE(error_of(b.bytes()).find("dynamic"), std::string::npos);
}

// A symbolic first dimension is the batch: one image, the count chosen by `--batch N`.
TEST(Import, SymbolicBatchIsOneImage) {
  OnnxBuilder b;
  b.input("x", {1, 3, 4, 4}, /*dynamic_batch=*/true);
  b.node("Relu", {"x"}, {"y"});
  b.output("y");
  auto g = kann::import_onnx_bytes(b.bytes());
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g.value().batch, 1);
  EXPECT_EQ(g.value().tensors[g.value().inputs[0]].shape, (std::vector<int64_t>{1, 3, 4, 4}));
}

TEST(Import, BatchIsRecordedAndInputsMustAgree) {
  OnnxBuilder b;
  b.input("x", {2, 3, 4, 4});
  b.node("Relu", {"x"}, {"y"});
  b.output("y");
  auto g = kann::import_onnx_bytes(b.bytes());
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g.value().batch, 2); // compiled for one image, run for each
  EXPECT_EQ(g.value().tensors[g.value().inputs[0]].shape[0], 1);
  // First dimensions that differ: no batch; as whole tensors they must broadcast.
  OnnxBuilder two;
  two.input("x", {2, 3, 4, 4});
  two.input("z", {3, 3, 4, 4});
  two.node("Add", {"x", "z"}, {"y"});
  two.output("y");
  EXPECT_NE(error_of(two.bytes()).find("cannot be broadcast"), std::string::npos);
  // A [2,5] tensor and a [5] one: whole tensors (dimension 0 is the tensor's own).
  OnnxBuilder whole;
  whole.input("x", {2, 5});
  whole.input("v", {5});
  whole.node("Add", {"x", "v"}, {"y"});
  whole.output("y");
  auto w = kann::import_onnx_bytes(whole.bytes());
  ASSERT_TRUE(w.ok()) << w.error().message;
  EXPECT_TRUE(w.value().whole_tensors);
  EXPECT_EQ(w.value().batch, 1);
  EXPECT_EQ(w.value().tensors[w.value().inputs[0]].shape, (std::vector<int64_t>{2, 5}));
}

TEST(Import, OldOpsetAndGarbageAreRejected) {
  // Operators whose definition changed are refused before the version kann implements
  // (Clip took its bounds as attributes before opset 11); unchanged ones are accepted.
  OnnxBuilder old(9);
  old.input("x", {1, 3});
  old.node("Clip", {"x"}, {"y"});
  old.output("y");
  EXPECT_NE(error_of(old.bytes()).find("opset 9 predates"), std::string::npos)
      << error_of(old.bytes());
  OnnxBuilder relu(9);
  relu.input("x", {1, 3});
  relu.node("Relu", {"x"}, {"y"});
  relu.output("y");
  EXPECT_TRUE(kann::import_onnx_bytes(relu.bytes()).ok());
  EXPECT_NE(error_of("this is not a protobuf \x01\x02\xff"), "");
  EXPECT_NE(error_of(""), "");
}

TEST(Import, BadWeightShapeIsAnErrorNotACrash) {
  OnnxBuilder b;
  b.input("x", {1, 3, 8, 8});
  b.weight("w", {4, 5, 3, 3}); // 5 input channels for a 3-channel input
  b.node("Conv", {"x", "w"}, {"y"}, "conv_bad");
  b.output("y");
  auto e = error_of(b.bytes());
  EXPECT_NE(e.find("conv_bad"), std::string::npos) << e;
}

TEST(Import, RandomMutationsNeverCrash) {
  OnnxBuilder b;
  b.input("x", {1, 3, 8, 8});
  b.weight("w", {4, 3, 3, 3});
  b.node("Conv", {"x", "w"}, {"c"});
  b.node("Relu", {"c"}, {"y"});
  b.output("y");
  const std::string good = b.bytes();
  uint32_t state = 1;
  for (int i = 0; i < 2000; ++i) {
    std::string bytes = good;
    for (int j = 0; j < 3; ++j) {
      state = state * 1664525u + 1013904223u;
      bytes[state % bytes.size()] ^= char(1 << ((state >> 8) % 8));
    }
    (void)kann::import_onnx_bytes(bytes); // must return, ok or not
  }
}

} // namespace

// A whole-tensor model has no batch axis: --batch is refused in one line.
TEST(Import, WholeTensorModelsRefuseABatch) {
  OnnxBuilder b;
  b.input("x", {2, 5});
  b.input("v", {5});
  b.node("Add", {"x", "v"}, {"y"});
  b.output("y");
  auto g = kann::import_onnx_bytes(b.bytes());
  ASSERT_TRUE(g.ok()) << g.error().message;
  kann::CompileOptions options;
  options.device = manycl::device::preset("mppa3").value();
  options.batch = 3;
  auto out = kann::compile_graph(g.value(), options);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().message.find("whole tensors"), std::string::npos) << out.error().message;
  options.batch = 0;
  EXPECT_TRUE(kann::compile_graph(g.value(), options).ok());
}
