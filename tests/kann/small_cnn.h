// The small CNN used by the end-to-end and tiler tests, built as ONNX, with its reference.
#pragma once

#include "onnx_builder.h"
#include "reference.h"

namespace kann::test {

struct SmallCnn {
  static constexpr int C = 3;
  int H = 20, W = 18;
  std::string onnx;
  std::vector<float> input;
  std::vector<float> probs;    // [1,10]
  std::vector<float> features; // [1,16,5,5] (average pool output)
  std::vector<float> pooled;   // [1,16,1,1]
};

// The classifier reads the flattened average-pool features (exercising the NCHW flatten
// order of channel-last data) or, for large images, the globally pooled vector.
inline SmallCnn make_small_cnn(int H = 20, int W = 18, bool flatten_features = true) {
  SmallCnn m;
  m.H = H, m.W = W;
  OnnxBuilder b;
  b.input("image", {1, SmallCnn::C, H, W});
  auto w1 = b.weight("w1", {8, 3, 3, 3});
  auto b1 = b.weight("b1", {8}, 0.1f);
  auto g1 = b.weight("bn_g", {8}, 0.0f, {1.1f, 0.9f, 1.2f, 0.8f, 1.0f, 1.3f, 0.7f, 1.05f});
  auto be1 = b.weight("bn_b", {8}, 0.1f);
  auto mu1 = b.weight("bn_m", {8}, 0.05f);
  auto va1 = b.weight("bn_v", {8}, 0.0f, {1.0f, 0.5f, 2.0f, 1.5f, 0.8f, 1.2f, 0.9f, 1.1f});
  auto w2 = b.weight("w2", {16, 8, 3, 3}, 0.15f);
  auto b2 = b.weight("b2", {16}, 0.1f);
  auto w3 = b.weight("w3", {16, 16, 1, 1}, 0.2f);
  auto b3 = b.weight("b3", {16}, 0.1f);
  const int fh = ((H / 2) + 1) / 2, fw = ((W / 2) + 1) / 2; // after pool /2 and conv s2
  const int K = flatten_features ? 16 * fh * fw : 16;
  auto wf = b.weight("wf", {10, K}, 0.05f);
  auto bf = b.weight("bf", {10}, 0.1f);

  auto &c1 = b.node("Conv", {"image", "w1", "b1"}, {"c1"});
  OnnxBuilder::ints(c1, "pads", {1, 1, 1, 1});
  OnnxBuilder::ints(c1, "kernel_shape", {3, 3});
  auto &bn = b.node("BatchNormalization", {"c1", "bn_g", "bn_b", "bn_m", "bn_v"}, {"bn1"});
  OnnxBuilder::float1(bn, "epsilon", 1e-5f);
  b.node("Relu", {"bn1"}, {"r1"});
  auto &p1 = b.node("MaxPool", {"r1"}, {"p1"});
  OnnxBuilder::ints(p1, "kernel_shape", {2, 2});
  OnnxBuilder::ints(p1, "strides", {2, 2});
  auto &c2 = b.node("Conv", {"p1", "w2", "b2"}, {"c2"});
  OnnxBuilder::ints(c2, "pads", {1, 1, 1, 1});
  OnnxBuilder::ints(c2, "strides", {2, 2});
  b.node("Relu", {"c2"}, {"r2"});
  b.node("Conv", {"r2", "w3", "b3"}, {"c3"});
  b.node("Add", {"c3", "r2"}, {"s3"});
  b.node("Relu", {"s3"}, {"r3"});
  auto &ap = b.node("AveragePool", {"r3"}, {"features"});
  OnnxBuilder::ints(ap, "kernel_shape", {3, 3});
  OnnxBuilder::ints(ap, "pads", {1, 1, 1, 1});
  b.node("GlobalAveragePool", {"features"}, {"pooled"});
  b.node("Flatten", {flatten_features ? "features" : "pooled"}, {"flat"});
  auto &fc = b.node("Gemm", {"flat", "wf", "bf"}, {"logits"});
  OnnxBuilder::int1(fc, "transB", 1);
  b.node("Softmax", {"logits"}, {"probs"});
  b.output("probs");
  b.output("features");
  b.output("pooled");
  m.onnx = b.bytes();

  ref::T x = ref::make(SmallCnn::C, H, W);
  for (size_t i = 0; i < x.v.size(); ++i)
    x.v[i] = std::cos(0.13f * float(i)) + 0.1f * float(i % 7);
  m.input = x.v;
  auto t = ref::relu(ref::batchnorm(ref::conv(x, w1, b1, 8, 3, 1, 1), g1, be1, mu1, va1, 1e-5f));
  t = ref::pool(t, 2, 2, 0, true, false);
  auto r2 = ref::relu(ref::conv(t, w2, b2, 16, 3, 2, 1));
  auto r3 = ref::relu(ref::add(ref::conv(r2, w3, b3, 16, 1, 1, 0), r2));
  auto f = ref::pool(r3, 3, 1, 1, false, false);
  m.features = f.v;
  m.pooled = ref::global_avg(f).v;
  m.probs = ref::softmax(ref::gemm(flatten_features ? f.v : m.pooled, wf, bf, 10));
  return m;
}

} // namespace kann::test
