// End-to-end numerics without OpenCL: compile the small CNN for 1, 2 and 5 clusters and the
// small preset, run every cluster's records with the interpreter on a simulated device, and
// compare with the plain C++ reference.
#include <gtest/gtest.h>

#include <fstream>

#include "handmade_program.h"
#include "kann/compile.h"
#include "kann/onnx_import.h"
#include "kann/passes.h"
#include "manycl/kbin_runner.h"
#include "small_cnn.h"

namespace {

using namespace kann;

// Imports and optimizes `onnx`, compiles it for `clusters` of `small` at `precision`, runs it
// on the simulated device with input x; returns the first output.
manycl::Result<std::vector<float>> compile_and_run(const std::string &onnx, unsigned clusters,
                                                   const char *precision,
                                                   const std::vector<float> &x) {
  auto graph = import_onnx_bytes(onnx);
  if (!graph)
    return graph.error();
  if (auto r = passes::optimize(graph.value()); !r)
    return r.error();
  CompileOptions options;
  options.device = manycl::device::preset("small").value();
  options.clusters = clusters;
  options.precision = precision;
  auto out = compile_graph(graph.value(), options);
  if (!out)
    return out.error();
  manycl::device::Device device(options.device);
  auto run = manycl::interp::run_kbin(device, out.value().program, {test::as_bytes(x), {}});
  if (!run)
    return run.error();
  return test::as_floats(run.value().outputs[1]);
}

struct Case {
  const char *preset;
  unsigned clusters;
  int H = 20, W = 18;
  bool flatten_features = true;
  const char *precision = "fp32";
};

class EndToEnd : public ::testing::TestWithParam<Case> {};

// FP32 matches the reference to rounding; FP16 (binary16 storage, FP32 accumulation) within
// the documented tolerance of 2e-2 absolute + 2e-2 relative on these O(1) activations.
void expect_close(const std::vector<float> &got, const std::vector<float> &want, const char *what,
                  float tol = 1e-4f) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol + tol * std::fabs(want[i])) << what << " element " << i;
}

TEST_P(EndToEnd, SmallCnnMatchesReference) {
  const Case c = GetParam();
  auto m = test::make_small_cnn(c.H, c.W, c.flatten_features);
  auto graph = import_onnx_bytes(m.onnx);
  ASSERT_TRUE(graph.ok()) << graph.error().message;
  ASSERT_TRUE(passes::optimize(graph.value()).ok());
  auto config = manycl::device::preset(c.preset);
  ASSERT_TRUE(config.ok());
  config.value().ddr_bytes = 256ull << 20;
  CompileOptions options;
  options.device = config.value();
  options.clusters = c.clusters;
  options.precision = c.precision;
  auto out = compile_graph(graph.value(), options);
  ASSERT_TRUE(out.ok()) << out.error().message;
  const float tol = std::string(c.precision) == "fp16" ? 2e-2f : 1e-4f;

  // Through the binary format, as the runtime would see it.
  auto bytes = format::write_kbin(out.value().program);
  ASSERT_TRUE(bytes.ok()) << bytes.error().message;
  auto program = format::read_kbin(bytes.value().data(), bytes.value().size(),
                                   {c.clusters, config.value().spm_bytes});
  ASSERT_TRUE(program.ok()) << program.error().message;
  const auto &p = program.value();
  ASSERT_EQ(p.tensors.size(), 4u);
  EXPECT_EQ(p.tensors[0].name, "image");

  manycl::device::Device device(config.value());
  std::vector<std::vector<uint8_t>> args(p.arg_count);
  args[0] = test::as_bytes(m.input);
  auto run = manycl::interp::run_kbin(device, p, args);
  ASSERT_TRUE(run.ok()) << run.error().message;
  std::map<std::string, std::vector<float>> outputs;
  for (const auto &t : p.tensors)
    outputs[t.name] = test::as_floats(run.value().outputs[t.arg_index]);
  expect_close(outputs["features"], m.features, "features", tol);
  expect_close(outputs["pooled"], m.pooled, "pooled", tol);
  expect_close(outputs["probs"], m.probs, "probs", tol);

  // Parameters cross DDR once (multicast), activations never: DDR reads are the parameter
  // blob (tables included), plus the input image (its halo rows are read by two clusters).
  const auto &stats = run.value().stats;
  if (out.value().spilled.empty()) {
    EXPECT_LE(stats.ddr_bytes_read, p.params.size() + m.input.size() * 4 * 2);
    EXPECT_EQ(stats.ddr_bytes_written, (m.probs.size() + m.features.size() + m.pooled.size()) * 4);
  }
  EXPECT_LE(stats.spm_high_water, p.spm_required);
  EXPECT_GT(stats.cycles(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Presets, EndToEnd,
                         ::testing::Values(Case{"mppa3", 1}, Case{"mppa3", 2}, Case{"mppa3", 5},
                                           Case{"small", 2}, Case{"small", 1},
                                           // too large for the small SPM: tiling and spills
                                           Case{"small", 2, 96, 80, false},
                                           Case{"small", 2, 160, 128, false},
                                           Case{"small", 1, 64, 64, false},
                                           Case{"mppa3", 5, 20, 18, true, "fp16"},
                                           Case{"small", 2, 20, 18, true, "fp16"},
                                           Case{"small", 2, 160, 128, false, "fp16"}),
                         [](const auto &info) {
                           return std::string(info.param.preset) + "_" +
                                  std::to_string(info.param.clusters) + "_" +
                                  std::to_string(info.param.H) + "x" +
                                  std::to_string(info.param.W) + "_" + info.param.precision;
                         });

// A large image on the small preset must be tiled inside the clusters and spill activations.
TEST(EndToEndTiling, LargeImageOnSmallPresetTilesAndSpills) {
  auto m = test::make_small_cnn(160, 128, false);
  auto graph = import_onnx_bytes(m.onnx);
  ASSERT_TRUE(graph.ok());
  ASSERT_TRUE(passes::optimize(graph.value()).ok());
  CompileOptions options;
  options.device = manycl::device::preset("small").value();
  options.schedule = "layer"; // one operator per step: bands, then a spill
  auto out = compile_graph(graph.value(), options);
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_FALSE(out.value().spilled.empty());
  // auto removes the spill with a layer group (docs/kann.md, "Schedules").
  options.schedule = "auto";
  auto automatic = compile_graph(graph.value(), options);
  ASSERT_TRUE(automatic.ok()) << automatic.error().message;
  EXPECT_EQ(automatic.value().schedule_choice.chosen, "group");
  EXPECT_TRUE(automatic.value().spilled.empty()) << automatic.value().report_text();
  bool tiled = false;
  for (const auto &op : out.value().ops)
    tiled |= op.split.find(" x") != std::string::npos;
  EXPECT_TRUE(tiled) << out.value().report_text();
  EXPECT_LE(out.value().program.spm_required, options.device.spm_bytes);
  if (::testing::Test::HasFailure())
    std::cerr << out.value().report_text();
}

} // namespace

namespace {

// A QDQ model (as ONNX Runtime's quantizer writes them): int8 weights with per-channel
// scales folded at compile time, activations quantized/dequantized by requantizing copies.
TEST(EndToEndQdq, QuantizedConvMatchesFakeQuantReference) {
  test::OnnxBuilder b;
  b.input("x", {1, 2, 6, 6});
  b.weight("xs", {}, 0.0f, {0.02f});
  auto &xz = *b.model().mutable_graph()->add_initializer();
  xz.set_name("xz");
  xz.set_data_type(onnx::TensorProto::INT8);
  xz.add_int32_data(-3);
  auto &wq = *b.model().mutable_graph()->add_initializer();
  wq.set_name("wq");
  wq.set_data_type(onnx::TensorProto::INT8);
  for (int64_t d : {3, 2, 3, 3})
    wq.add_dims(d);
  std::vector<int> wint;
  for (int i = 0; i < 54; ++i) {
    wint.push_back((i * 37) % 255 - 127);
    wq.add_int32_data(wint.back());
  }
  auto ws = b.weight("ws", {3}, 0.0f, {0.004f, 0.002f, 0.003f});
  auto &wz = *b.model().mutable_graph()->add_initializer();
  wz.set_name("wz");
  wz.set_data_type(onnx::TensorProto::INT8);
  wz.add_dims(3);
  for (int i = 0; i < 3; ++i)
    wz.add_int32_data(0);
  b.weight("ys", {}, 0.0f, {0.05f});
  auto &yz = *b.model().mutable_graph()->add_initializer();
  yz.set_name("yz");
  yz.set_data_type(onnx::TensorProto::INT8);
  yz.add_int32_data(5);
  b.node("QuantizeLinear", {"x", "xs", "xz"}, {"xq"});
  b.node("DequantizeLinear", {"xq", "xs", "xz"}, {"xd"});
  auto &dq = b.node("DequantizeLinear", {"wq", "ws", "wz"}, {"w"});
  test::OnnxBuilder::int1(dq, "axis", 0);
  auto &conv = b.node("Conv", {"xd", "w"}, {"c"});
  test::OnnxBuilder::ints(conv, "pads", {1, 1, 1, 1});
  b.node("QuantizeLinear", {"c", "ys", "yz"}, {"cq"});
  b.node("DequantizeLinear", {"cq", "ys", "yz"}, {"y"});
  b.output("y");

  auto graph = import_onnx_bytes(b.bytes());
  ASSERT_TRUE(graph.ok()) << graph.error().message;
  ASSERT_TRUE(passes::optimize(graph.value()).ok());
  CompileOptions options;
  options.device = manycl::device::preset("small").value();
  auto out = compile_graph(graph.value(), options);
  ASSERT_TRUE(out.ok()) << out.error().message;

  auto fq = [](float v, float s, int z) {
    float q = std::nearbyint(v / s) + float(z);
    q = std::min(127.0f, std::max(-128.0f, q));
    return (q - float(z)) * s;
  };
  test::ref::T x = test::ref::make(2, 6, 6);
  for (size_t i = 0; i < x.v.size(); ++i)
    x.v[i] = std::sin(0.3f * float(i)) * 2.0f;
  test::ref::T xd = x;
  for (float &v : xd.v)
    v = fq(v, 0.02f, -3);
  std::vector<float> w(54);
  for (int i = 0; i < 54; ++i)
    w[i] = float(wint[i]) * ws[i / 18];
  auto c = test::ref::conv(xd, w, {}, 3, 3, 1, 1);
  manycl::device::Device device(options.device);
  auto run = manycl::interp::run_kbin(device, out.value().program, {test::as_bytes(x.v), {}});
  ASSERT_TRUE(run.ok()) << run.error().message;
  auto got = test::as_floats(run.value().outputs[1]);
  ASSERT_EQ(got.size(), c.v.size());
  int off_by_one = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float want = fq(c.v[i], 0.05f, 5);
    ASSERT_NEAR(got[i], want, 0.05f * 1.01f) << i; // at most one quantization step
    off_by_one += std::fabs(got[i] - want) > 1e-6f;
  }
  EXPECT_LT(off_by_one, int(got.size()) / 10); // rounding ties only
}

} // namespace

namespace {

// SqueezeNet-style fire module: two expand convolutions concatenated by channels. The
// producers write straight into the concat buffer (no copy record); a second concat with
// the network input (not eliminable) runs as copies. Checked on several configurations,
// including one where activations spill.
struct FireCase {
  const char *preset;
  unsigned clusters;
  int H, W;
};
class Fire : public ::testing::TestWithParam<FireCase> {};

TEST_P(Fire, ConcatEliminationMatchesReference) {
  const FireCase fc = GetParam();
  test::OnnxBuilder b;
  b.input("x", {1, 4, fc.H, fc.W});
  auto ws = b.weight("ws", {3, 4, 1, 1});
  auto bs = b.weight("bs", {3}, 0.1f);
  auto we1 = b.weight("we1", {5, 3, 1, 1});
  auto be1 = b.weight("be1", {5}, 0.1f);
  auto we3 = b.weight("we3", {6, 3, 3, 3}, 0.2f);
  auto be3 = b.weight("be3", {6}, 0.1f);
  b.node("Conv", {"x", "ws", "bs"}, {"s"});
  b.node("Relu", {"s"}, {"sr"});
  b.node("Conv", {"sr", "we1", "be1"}, {"e1"});
  b.node("Relu", {"e1"}, {"e1r"});
  auto &c3 = b.node("Conv", {"sr", "we3", "be3"}, {"e3"});
  test::OnnxBuilder::ints(c3, "pads", {1, 1, 1, 1});
  b.node("Relu", {"e3"}, {"e3r"});
  auto &cat = b.node("Concat", {"e1r", "e3r"}, {"fire"});
  test::OnnxBuilder::int1(cat, "axis", 1);
  auto &cat2 = b.node("Concat", {"fire", "x"}, {"y"});
  test::OnnxBuilder::int1(cat2, "axis", 1);
  b.output("y");

  auto graph = import_onnx_bytes(b.bytes());
  ASSERT_TRUE(graph.ok()) << graph.error().message;
  ASSERT_TRUE(passes::optimize(graph.value()).ok());
  CompileOptions options;
  options.device = manycl::device::preset(fc.preset).value();
  options.clusters = fc.clusters;
  auto out = compile_graph(graph.value(), options);
  ASSERT_TRUE(out.ok()) << out.error().message;
  int copies = 0;
  for (const auto &s : out.value().program.streams)
    for (const auto &r : s)
      copies += r.function_id == MCL_NATIVE_FN_COPY;
  // Only the second concat copies (2 inputs per cluster with work, per tile).
  EXPECT_GT(copies, 0);
  int concat_ops = 0;
  for (const auto &op : out.value().ops)
    concat_ops += op.op == "Concat";
  EXPECT_EQ(concat_ops, 1) << out.value().report_text();

  test::ref::T x = test::ref::make(4, fc.H, fc.W);
  for (size_t i = 0; i < x.v.size(); ++i)
    x.v[i] = std::cos(0.21f * float(i));
  auto sr = test::ref::relu(test::ref::conv(x, ws, bs, 3, 1, 1, 0));
  auto e1 = test::ref::relu(test::ref::conv(sr, we1, be1, 5, 1, 1, 0));
  auto e3 = test::ref::relu(test::ref::conv(sr, we3, be3, 6, 3, 1, 1));
  std::vector<float> want = e1.v;
  want.insert(want.end(), e3.v.begin(), e3.v.end());
  want.insert(want.end(), x.v.begin(), x.v.end());

  manycl::device::Device device(options.device);
  auto run = manycl::interp::run_kbin(device, out.value().program, {test::as_bytes(x.v), {}});
  ASSERT_TRUE(run.ok()) << run.error().message;
  auto got = test::as_floats(run.value().outputs[1]);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-4f + 1e-4f * std::fabs(want[i])) << i;
}

INSTANTIATE_TEST_SUITE_P(Presets, Fire,
                         ::testing::Values(FireCase{"mppa3", 1, 9, 7}, FireCase{"mppa3", 5, 9, 7},
                                           FireCase{"small", 2, 9, 7},
                                           FireCase{"small", 2, 120, 100}),
                         [](const auto &info) {
                           return std::string(info.param.preset) + "_" +
                                  std::to_string(info.param.clusters) + "_" +
                                  std::to_string(info.param.H);
                         });

} // namespace

namespace {

std::vector<float> read_npy_f32(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), {});
  if (bytes.size() < 10)
    return {};
  const uint16_t header = uint16_t(uint8_t(bytes[8]) | uint8_t(bytes[9]) << 8);
  std::vector<float> v((bytes.size() - 10 - header) / 4);
  std::memcpy(v.data(), bytes.data() + 10 + header, v.size() * 4);
  return v;
}

// The bundled digits classifier (scripts/models/train_digits.py), FP32 and its QDQ INT8
// form (ONNX Runtime's quantizer; convolutions, pooling and GEMMs become INT8 kernels):
// the sample's logits match the framework's within FP32 rounding, and within a few output
// quantization steps for INT8, with the same predicted class.
TEST(EndToEndDigits, BundledModelsFp32AndInt8) {
  const std::string dir = std::string(KANN_SOURCE_DIR) + "/examples/models/digits/";
  auto sample = read_npy_f32(dir + "sample_input.npy");
  if (sample.size() != 64)
    GTEST_SKIP() << "bundled digits model not found";
  auto reference = read_npy_f32(dir + "reference_logits.npy"); // [360,10], row 0 = sample
  ASSERT_GE(reference.size(), 10u);
  for (const char *file : {"model.onnx", "model_int8.onnx"}) {
    auto graph = import_onnx_file(dir + file);
    ASSERT_TRUE(graph.ok()) << graph.error().message;
    ASSERT_TRUE(passes::optimize(graph.value()).ok());
    const bool int8 = std::string(file) == "model_int8.onnx";
    int int8_nodes = 0;
    for (const auto &n : graph.value().nodes)
      int8_nodes += n.ints.count("int8") != 0;
    EXPECT_EQ(int8_nodes, int8 ? 5 : 0) << graph.value().dump();
    CompileOptions options;
    options.device = manycl::device::preset("small").value();
    auto out = compile_graph(graph.value(), options);
    ASSERT_TRUE(out.ok()) << out.error().message;
    manycl::device::Device device(options.device);
    auto run = manycl::interp::run_kbin(device, out.value().program, {test::as_bytes(sample), {}});
    ASSERT_TRUE(run.ok()) << run.error().message;
    auto logits = test::as_floats(run.value().outputs[1]);
    ASSERT_EQ(logits.size(), 10u);
    for (int i = 0; i < 10; ++i)
      EXPECT_NEAR(logits[i], reference[i], int8 ? 2.0f : 1e-4f) << file << " logit " << i;
    auto argmax = [](const float *v) { return int(std::max_element(v, v + 10) - v); };
    EXPECT_EQ(argmax(logits.data()), argmax(reference.data())) << file;
  }
}

} // namespace

namespace {

// Nearest 2x upsampling (the YOLOv3 neck) split by output rows over 2 clusters.
TEST(EndToEndResize, NearestUpsampleMatchesReference) {
  test::OnnxBuilder b;
  b.input("x", {1, 3, 5, 4});
  b.weight("roi", {0}, 0.0f, {});
  b.weight("scales", {4}, 0.0f, {1.0f, 1.0f, 2.0f, 2.0f});
  auto &r = b.node("Resize", {"x", "roi", "scales"}, {"y"});
  auto *m = r.add_attribute();
  m->set_name("mode");
  m->set_type(onnx::AttributeProto::STRING);
  m->set_s("nearest");
  auto *c = r.add_attribute();
  c->set_name("coordinate_transformation_mode");
  c->set_type(onnx::AttributeProto::STRING);
  c->set_s("asymmetric");
  auto *nm = r.add_attribute();
  nm->set_name("nearest_mode");
  nm->set_type(onnx::AttributeProto::STRING);
  nm->set_s("floor");
  b.output("y");
  auto graph = import_onnx_bytes(b.bytes());
  ASSERT_TRUE(graph.ok()) << graph.error().message;
  CompileOptions options;
  options.device = manycl::device::preset("small").value();
  auto out = compile_graph(graph.value(), options);
  ASSERT_TRUE(out.ok()) << out.error().message;
  std::vector<float> x(60);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = float(i);
  manycl::device::Device device(options.device);
  auto run = manycl::interp::run_kbin(device, out.value().program, {test::as_bytes(x), {}});
  ASSERT_TRUE(run.ok()) << run.error().message;
  auto y = test::as_floats(run.value().outputs[1]);
  ASSERT_EQ(y.size(), 240u);
  for (int ch = 0; ch < 3; ++ch)
    for (int yy = 0; yy < 10; ++yy)
      for (int xx = 0; xx < 8; ++xx)
        ASSERT_EQ(y[(ch * 10 + yy) * 8 + xx], x[(ch * 5 + yy / 2) * 4 + xx / 2]);
}

// Squeeze-and-excitation and spatial attention: a per-channel gate [1,C,1,1] and a per-pixel
// mask [1,1,H,W] broadcast over an activation (Mul), and the gate added back (Add), on 1 and
// 2 clusters of `small`, FP32 and FP16, against a reference computed here.
TEST(EndToEndBroadcast, GateAndMaskBroadcastBetweenActivations) {
  constexpr int C = 4, H = 6, W = 5;
  test::OnnxBuilder b;
  b.input("x", {1, C, H, W});
  auto wm = b.weight("wm", {1, C, 1, 1});
  b.node("GlobalAveragePool", {"x"}, {"pooled"});
  b.node("Sigmoid", {"pooled"}, {"gate"});
  b.node("Mul", {"x", "gate"}, {"gated"});
  b.node("Conv", {"x", "wm"}, {"logits"});
  b.node("Sigmoid", {"logits"}, {"mask"});
  b.node("Mul", {"mask", "gated"}, {"masked"});
  b.node("Add", {"masked", "gate"}, {"y"});
  b.output("y");
  std::vector<float> x(C * H * W);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::sin(0.37f * float(i)) * 1.5f;
  auto sigmoid = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  std::vector<double> gate(C), mask(H * W, 0.0), want(x.size());
  for (int c = 0; c < C; ++c) {
    double sum = 0;
    for (int i = 0; i < H * W; ++i)
      sum += x[c * H * W + i];
    gate[c] = sigmoid(sum / (H * W));
  }
  for (int i = 0; i < H * W; ++i) {
    double l = 0;
    for (int c = 0; c < C; ++c)
      l += double(wm[c]) * x[c * H * W + i];
    mask[i] = sigmoid(l);
  }
  for (int c = 0; c < C; ++c)
    for (int i = 0; i < H * W; ++i)
      want[c * H * W + i] = mask[i] * x[c * H * W + i] * gate[c] + gate[c];
  for (unsigned clusters : {1u, 2u})
    for (const char *precision : {"fp32", "fp16"}) {
      auto got = compile_and_run(b.bytes(), clusters, precision, x);
      ASSERT_TRUE(got.ok()) << got.error().message;
      const auto &y = got.value();
      ASSERT_EQ(y.size(), want.size());
      const double tol = std::string(precision) == "fp16" ? 4e-3 : 1e-5;
      for (size_t i = 0; i < y.size(); ++i)
        ASSERT_NEAR(y[i], want[i], tol * (1 + std::fabs(want[i])))
            << precision << " x" << clusters << " element " << i;
    }
}

TEST(EndToEndBroadcast, NonBroadcastableShapesAreRejectedWithTheShapes) {
  test::OnnxBuilder b;
  b.input("x", {1, 4, 6, 5});
  b.input("z", {1, 2, 6, 5});
  b.node("Mul", {"x", "z"}, {"y"});
  b.output("y");
  auto graph = import_onnx_bytes(b.bytes());
  if (!graph.ok()) { // rejected at import: also fine, with a message
    EXPECT_FALSE(graph.error().message.empty());
    return;
  }
  CompileOptions options;
  options.device = manycl::device::preset("small").value();
  auto out = compile_graph(graph.value(), options);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().message.find("does not broadcast"), std::string::npos)
      << out.error().message;
  EXPECT_EQ(out.error().message.find('\n'), std::string::npos) << out.error().message;
}

// A grouped convolution (not depthwise) whose weights exceed the `small` SPM streams them in
// slices of whole groups, each a smaller grouped convolution on its groups' input channels
// (slices of 16 channels across groups computed wrong results before); against the
// definition on 1 and 2 clusters.
TEST(EndToEndGroupedConv, WeightSlicesOfWholeGroupsMatchDefinition) {
  constexpr int C = 256, G = 8, H = 6, W = 5, K = 3;
  constexpr int per = C / G; // input and output channels per group
  test::OnnxBuilder b;
  b.input("x", {1, C, H, W});
  auto w = b.weight("w", {C, per, K, K}, 0.1f); // 295 KB of FP32 weights > the 256 KiB SPM
  auto &conv = b.node("Conv", {"x", "w"}, {"y"});
  test::OnnxBuilder::int1(conv, "group", G);
  test::OnnxBuilder::ints(conv, "pads", {1, 1, 1, 1});
  b.output("y");
  std::vector<float> x(size_t(C) * H * W);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::sin(0.11f * float(i));
  std::vector<double> want(x.size(), 0.0);
  for (int o = 0; o < C; ++o)
    for (int oy = 0; oy < H; ++oy)
      for (int ox = 0; ox < W; ++ox) {
        double acc = 0;
        for (int ci = 0; ci < per; ++ci)
          for (int ky = 0; ky < K; ++ky)
            for (int kx = 0; kx < K; ++kx) {
              const int iy = oy + ky - 1, ix = ox + kx - 1;
              if (iy < 0 || ix < 0 || iy >= H || ix >= W)
                continue;
              const int c = o / per * per + ci; // the output channel's group
              acc += double(x[(size_t(c) * H + iy) * W + ix]) *
                     w[((size_t(o) * per + ci) * K + ky) * K + kx];
            }
        want[(size_t(o) * H + oy) * W + ox] = acc;
      }
  for (unsigned clusters : {1u, 2u}) {
    auto got = compile_and_run(b.bytes(), clusters, "fp32", x);
    ASSERT_TRUE(got.ok()) << got.error().message;
    ASSERT_EQ(got.value().size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got.value()[i], want[i], 1e-4 * (1 + std::fabs(want[i])))
          << "x" << clusters << " element " << i;
  }
}

// ConvTranspose with stride, padding, output padding and dilation, bias and a fused ReLU,
// on 1 and 2 clusters, FP32, against the definition (each input pixel scatters its taps).
TEST(EndToEndConvTranspose, StridedPaddedDilatedMatchesDefinition) {
  struct Case {
    int stride, pad, out_pad, dilation, k;
  };
  for (const Case &cs :
       {Case{2, 0, 0, 1, 2}, Case{2, 1, 1, 1, 3}, Case{3, 2, 0, 2, 3}, Case{1, 1, 0, 1, 3}}) {
    constexpr int CI = 3, CO = 5, H = 5, W = 4;
    test::OnnxBuilder b;
    b.input("x", {1, CI, H, W});
    auto w = b.weight("w", {CI, CO, cs.k, cs.k});
    auto bias = b.weight("b", {CO});
    auto &ct = b.node("ConvTranspose", {"x", "w", "b"}, {"c"});
    test::OnnxBuilder::ints(ct, "strides", {cs.stride, cs.stride});
    test::OnnxBuilder::ints(ct, "pads", {cs.pad, cs.pad, cs.pad, cs.pad});
    test::OnnxBuilder::ints(ct, "output_padding", {cs.out_pad, cs.out_pad});
    test::OnnxBuilder::ints(ct, "dilations", {cs.dilation, cs.dilation});
    b.node("Relu", {"c"}, {"y"});
    b.output("y");
    const int span = (cs.k - 1) * cs.dilation + 1;
    const int OH = (H - 1) * cs.stride + span + cs.out_pad - 2 * cs.pad;
    const int OW = (W - 1) * cs.stride + span + cs.out_pad - 2 * cs.pad;
    std::vector<float> x(CI * H * W);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = std::cos(0.41f * float(i)) * 1.3f;
    std::vector<double> want(size_t(CO) * OH * OW);
    for (int o = 0; o < CO; ++o)
      for (int i = 0; i < OH * OW; ++i)
        want[size_t(o) * OH * OW + i] = bias[o];
    for (int ci = 0; ci < CI; ++ci)
      for (int iy = 0; iy < H; ++iy)
        for (int ix = 0; ix < W; ++ix)
          for (int o = 0; o < CO; ++o)
            for (int ky = 0; ky < cs.k; ++ky)
              for (int kx = 0; kx < cs.k; ++kx) {
                const int oy = iy * cs.stride + ky * cs.dilation - cs.pad;
                const int ox = ix * cs.stride + kx * cs.dilation - cs.pad;
                if (oy < 0 || ox < 0 || oy >= OH || ox >= OW)
                  continue;
                want[(size_t(o) * OH + oy) * OW + ox] +=
                    double(x[(ci * H + iy) * W + ix]) * w[((ci * CO + o) * cs.k + ky) * cs.k + kx];
              }
    for (double &v : want)
      v = std::max(v, 0.0);
    for (unsigned clusters : {1u, 2u}) {
      auto got = compile_and_run(b.bytes(), clusters, "fp32", x);
      ASSERT_TRUE(got.ok()) << got.error().message;
      const auto &y = got.value();
      ASSERT_EQ(y.size(), want.size()) << "stride " << cs.stride;
      for (size_t i = 0; i < y.size(); ++i)
        ASSERT_NEAR(y[i], want[i], 1e-5 * (1 + std::fabs(want[i])))
            << "stride " << cs.stride << " pad " << cs.pad << " x" << clusters << " element " << i;
    }
  }
}

// Grouped transposed convolutions (ONNX weights [cin][cout/group][kh][kw]): two groups of
// 2 -> 3 channels and a depthwise one (group = cin = cout), strided, padded, with output
// padding, on 1 and 2 clusters, FP32, against the definition.
TEST(EndToEndConvTranspose, GroupedAndDepthwiseMatchDefinition) {
  struct Case {
    int ci, co, group;
  };
  for (const Case &cs : {Case{4, 6, 2}, Case{8, 8, 8}, Case{6, 3, 3}}) {
    constexpr int H = 6, W = 5, k = 3, stride = 2, pad = 1, out_pad = 1;
    const int cin_g = cs.ci / cs.group, cout_g = cs.co / cs.group;
    test::OnnxBuilder b;
    b.input("x", {1, cs.ci, H, W});
    auto w = b.weight("w", {cs.ci, cout_g, k, k});
    auto bias = b.weight("b", {cs.co});
    auto &ct = b.node("ConvTranspose", {"x", "w", "b"}, {"y"});
    test::OnnxBuilder::int1(ct, "group", cs.group);
    test::OnnxBuilder::ints(ct, "strides", {stride, stride});
    test::OnnxBuilder::ints(ct, "pads", {pad, pad, pad, pad});
    test::OnnxBuilder::ints(ct, "output_padding", {out_pad, out_pad});
    b.output("y");
    const int OH = (H - 1) * stride + k + out_pad - 2 * pad;
    const int OW = (W - 1) * stride + k + out_pad - 2 * pad;
    std::vector<float> x(size_t(cs.ci) * H * W);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = std::cos(0.37f * float(i)) * 1.1f;
    std::vector<double> want(size_t(cs.co) * OH * OW);
    for (int o = 0; o < cs.co; ++o)
      for (int i = 0; i < OH * OW; ++i)
        want[size_t(o) * OH * OW + i] = bias[o];
    for (int ci = 0; ci < cs.ci; ++ci)
      for (int iy = 0; iy < H; ++iy)
        for (int ix = 0; ix < W; ++ix)
          for (int col = 0; col < cout_g; ++col)
            for (int ky = 0; ky < k; ++ky)
              for (int kx = 0; kx < k; ++kx) {
                const int oy = iy * stride + ky - pad, ox = ix * stride + kx - pad;
                if (oy < 0 || ox < 0 || oy >= OH || ox >= OW)
                  continue;
                const int o = ci / cin_g * cout_g + col; // the input channel's group
                want[(size_t(o) * OH + oy) * OW + ox] +=
                    double(x[(ci * H + iy) * W + ix]) * w[((ci * cout_g + col) * k + ky) * k + kx];
              }
    for (unsigned clusters : {1u, 2u}) {
      auto got = compile_and_run(b.bytes(), clusters, "fp32", x);
      ASSERT_TRUE(got.ok()) << got.error().message;
      const auto &y = got.value();
      ASSERT_EQ(y.size(), want.size()) << "group " << cs.group;
      for (size_t i = 0; i < y.size(); ++i)
        ASSERT_NEAR(y[i], want[i], 1e-5 * (1 + std::fabs(want[i])))
            << "group " << cs.group << " x" << clusters << " element " << i;
    }
  }
}

// A grouped transposed convolution whose weights exceed the `small` SPM streams them in
// slices of whole groups, each a smaller grouped transposed convolution on its groups' input
// channels (its weights were packed whole before: the SPM error); against the definition on
// 1 and 2 clusters.
TEST(EndToEndConvTranspose, WeightSlicesOfWholeGroupsMatchDefinition) {
  constexpr int C = 256, G = 8, H = 4, W = 3, K = 3, S = 2;
  constexpr int per = C / G; // input and output channels per group
  test::OnnxBuilder b;
  b.input("x", {1, C, H, W});
  auto w = b.weight("w", {C, per, K, K}, 0.1f); // 295 KB of FP32 weights > the 256 KiB SPM
  auto bias = b.weight("b", {C});
  auto &ct = b.node("ConvTranspose", {"x", "w", "b"}, {"y"});
  test::OnnxBuilder::int1(ct, "group", G);
  test::OnnxBuilder::ints(ct, "strides", {S, S});
  test::OnnxBuilder::ints(ct, "pads", {1, 1, 1, 1});
  b.output("y");
  const int OH = (H - 1) * S + K - 2, OW = (W - 1) * S + K - 2;
  std::vector<float> x(size_t(C) * H * W);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::sin(0.13f * float(i));
  std::vector<double> want(size_t(C) * OH * OW);
  for (int o = 0; o < C; ++o)
    for (int i = 0; i < OH * OW; ++i)
      want[size_t(o) * OH * OW + i] = bias[o];
  for (int ci = 0; ci < C; ++ci)
    for (int iy = 0; iy < H; ++iy)
      for (int ix = 0; ix < W; ++ix)
        for (int col = 0; col < per; ++col)
          for (int ky = 0; ky < K; ++ky)
            for (int kx = 0; kx < K; ++kx) {
              const int oy = iy * S + ky - 1, ox = ix * S + kx - 1;
              if (oy < 0 || ox < 0 || oy >= OH || ox >= OW)
                continue;
              const int o = ci / per * per + col; // the input channel's group
              want[(size_t(o) * OH + oy) * OW + ox] +=
                  double(x[(size_t(ci) * H + iy) * W + ix]) *
                  w[((size_t(ci) * per + col) * K + ky) * K + kx];
            }
  for (unsigned clusters : {1u, 2u}) {
    auto got = compile_and_run(b.bytes(), clusters, "fp32", x);
    ASSERT_TRUE(got.ok()) << got.error().message;
    ASSERT_EQ(got.value().size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got.value()[i], want[i], 1e-4 * (1 + std::fabs(want[i])))
          << "x" << clusters << " element " << i;
  }
}

// A depthwise transposed convolution (group = channels) whose weights exceed half the
// `small` SPM streams them in slices of whole groups, each a smaller depthwise transposed
// convolution on its channels (packed whole before: the SPM error); against the definition
// on 1 and 2 clusters.
TEST(EndToEndConvTranspose, DepthwiseWeightSlicesMatchDefinition) {
  constexpr int C = 2048, H = 3, W = 4, K = 4, S = 2, P = 1;
  test::OnnxBuilder b;
  b.input("x", {1, C, H, W});
  auto w = b.weight("w", {C, 1, K, K}, 0.2f); // 131 KB of FP32 weights + 8 KB of bias
  auto bias = b.weight("b", {C});
  auto &ct = b.node("ConvTranspose", {"x", "w", "b"}, {"y"});
  test::OnnxBuilder::int1(ct, "group", C);
  test::OnnxBuilder::ints(ct, "strides", {S, S});
  test::OnnxBuilder::ints(ct, "pads", {P, P, P, P});
  b.output("y");
  const int OH = (H - 1) * S + K - 2 * P, OW = (W - 1) * S + K - 2 * P;
  std::vector<float> x(size_t(C) * H * W);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::sin(0.17f * float(i));
  std::vector<double> want(size_t(C) * OH * OW);
  for (int c = 0; c < C; ++c)
    for (int i = 0; i < OH * OW; ++i)
      want[size_t(c) * OH * OW + i] = bias[size_t(c)];
  for (int c = 0; c < C; ++c)
    for (int iy = 0; iy < H; ++iy)
      for (int ix = 0; ix < W; ++ix)
        for (int ky = 0; ky < K; ++ky)
          for (int kx = 0; kx < K; ++kx) {
            const int oy = iy * S + ky - P, ox = ix * S + kx - P;
            if (oy < 0 || ox < 0 || oy >= OH || ox >= OW)
              continue;
            want[(size_t(c) * OH + oy) * OW + ox] +=
                double(x[(size_t(c) * H + iy) * W + ix]) * w[(size_t(c) * K + ky) * K + kx];
          }
  for (unsigned clusters : {1u, 2u}) {
    auto got = compile_and_run(b.bytes(), clusters, "fp32", x);
    ASSERT_TRUE(got.ok()) << got.error().message;
    ASSERT_EQ(got.value().size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got.value()[i], want[i], 1e-5 * (1 + std::fabs(want[i])))
          << "x" << clusters << " element " << i;
  }
}

TEST(EndToEndConvTranspose, UnsupportedFormsAreOneLineErrors) {
  test::OnnxBuilder b;
  b.input("x", {1, 4, 5, 5});
  b.weight("w", {4, 2, 3, 3});
  auto &ct = b.node("ConvTranspose", {"x", "w"}, {"y"});
  test::OnnxBuilder::int1(ct, "group", 3); // 4 input channels are no 3 groups
  b.output("y");
  auto graph = import_onnx_bytes(b.bytes());
  ASSERT_FALSE(graph.ok());
  EXPECT_NE(graph.error().message.find("weight shape"), std::string::npos) << graph.error().message;
  EXPECT_EQ(graph.error().message.find('\n'), std::string::npos);
}

// Zero padding as a separate Pad node (DenseNet's transitions, TF-style exports): folded into
// the following convolution (same result as the convolution's own padding), removed when all
// pads are 0; padding a max pool would need -inf and is refused in one line.
TEST(EndToEndPad, ZeroPadFoldsIntoConvolution) {
  auto build = [](bool separate_pad, bool empty_pad) {
    test::OnnxBuilder b;
    b.input("x", {1, 2, 5, 6});
    b.weight("w", {3, 2, 3, 3});
    b.int64s("pads", {0, 0, empty_pad ? 0 : 1, empty_pad ? 0 : 2, 0, 0, empty_pad ? 0 : 1,
                      empty_pad ? 0 : 2});
    if (separate_pad) {
      b.node("Pad", {"x", "pads"}, {"xp"});
      b.node("Conv", {"xp", "w"}, {"y"});
    } else {
      auto &c = b.node("Conv", {"x", "w"}, {"y"});
      test::OnnxBuilder::ints(
          c, "pads", {empty_pad ? 0 : 1, empty_pad ? 0 : 2, empty_pad ? 0 : 1, empty_pad ? 0 : 2});
    }
    b.output("y");
    return b.bytes();
  };
  std::vector<float> x(60);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::sin(0.53f * float(i));
  auto run = [&](const std::string &onnx, size_t &nodes) {
    auto graph = import_onnx_bytes(onnx);
    EXPECT_TRUE(graph.ok()) << graph.error().message;
    EXPECT_TRUE(passes::optimize(graph.value()).ok());
    nodes = 0;
    for (const auto &n : graph.value().nodes)
      nodes += !n.dead;
    CompileOptions options;
    options.device = manycl::device::preset("small").value();
    auto out = compile_graph(graph.value(), options);
    EXPECT_TRUE(out.ok()) << out.error().message;
    manycl::device::Device device(options.device);
    auto r = manycl::interp::run_kbin(device, out.value().program, {test::as_bytes(x), {}});
    EXPECT_TRUE(r.ok()) << r.error().message;
    return test::as_floats(r.value().outputs[1]);
  };
  for (bool empty : {false, true}) {
    size_t n_pad = 0, n_conv = 0;
    auto with_pad = run(build(true, empty), n_pad);
    auto reference = run(build(false, empty), n_conv);
    EXPECT_EQ(n_pad, n_conv) << "the Pad node is folded away";
    ASSERT_EQ(with_pad.size(), reference.size());
    ASSERT_EQ(with_pad.size(), size_t(3 * (empty ? 3 * 4 : 5 * 8)));
    for (size_t i = 0; i < with_pad.size(); ++i)
      ASSERT_FLOAT_EQ(with_pad[i], reference[i]) << i;
  }
  // Padding before a max pool: not folded (the pool would pad with -inf), a copy with zeros
  // around the input (lower_layout.cpp), then the pool: the definition.
  test::OnnxBuilder b;
  b.input("x", {1, 2, 5, 6});
  b.int64s("pads", {0, 0, 1, 1, 0, 0, 1, 1});
  b.node("Pad", {"x", "pads"}, {"xp"});
  auto &mp = b.node("MaxPool", {"xp"}, {"y"});
  test::OnnxBuilder::ints(mp, "kernel_shape", {2, 2});
  b.output("y");
  auto graph = import_onnx_bytes(b.bytes());
  ASSERT_TRUE(graph.ok()) << graph.error().message;
  ASSERT_TRUE(passes::optimize(graph.value()).ok());
  CompileOptions options;
  options.device = manycl::device::preset("small").value();
  auto out = compile_graph(graph.value(), options);
  ASSERT_TRUE(out.ok()) << out.error().message;
  manycl::device::Device device(options.device);
  auto r = manycl::interp::run_kbin(device, out.value().program, {test::as_bytes(x), {}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto y = test::as_floats(r.value().outputs[1]);
  ASSERT_EQ(y.size(), size_t(2 * 6 * 7));
  auto padded = [&](int c, int py, int px) {
    const int iy = py - 1, ix = px - 1;
    return iy < 0 || ix < 0 || iy >= 5 || ix >= 6 ? 0.0f : x[size_t((c * 5 + iy) * 6 + ix)];
  };
  for (int c = 0; c < 2; ++c)
    for (int oy = 0; oy < 6; ++oy)
      for (int ox = 0; ox < 7; ++ox) {
        const float want = std::max(std::max(padded(c, oy, ox), padded(c, oy, ox + 1)),
                                    std::max(padded(c, oy + 1, ox), padded(c, oy + 1, ox + 1)));
        ASSERT_EQ(y[size_t((c * 6 + oy) * 7 + ox)], want) << c << " " << oy << " " << ox;
      }
}

// ShuffleNet's block plumbing: a channel split (Slice over axis 1), a channel shuffle
// (Reshape [1,G,C/G,H,W], Transpose [0,2,1,3,4], Reshape back) fused into one strided copy
// per group, and a spatial ReduceMean, on 1 and 2 clusters against the definition.
TEST(EndToEndShuffle, SliceShuffleAndReduceMeanMatchDefinition) {
  constexpr int C = 6, H = 4, W = 3, G = 3;
  test::OnnxBuilder b;
  b.input("x", {1, C, H, W});
  b.int64s("s0", {2});
  b.int64s("s1", {6});
  b.int64s("ax", {1});
  b.int64s("five", {1, G, C / G, H, W});
  b.int64s("four", {1, C, H, W});
  b.int64s("hw", {2, 3});
  b.node("Slice", {"x", "s0", "s1", "ax"}, {"part"}); // channels 2..5
  b.node("Relu", {"part"}, {"relu"});
  b.int64s("z0", {0});
  b.int64s("z1", {2});
  b.node("Slice", {"x", "z0", "z1", "ax"}, {"keep"}); // channels 0..1
  auto &cat = b.node("Concat", {"keep", "relu"}, {"cat"});
  test::OnnxBuilder::int1(cat, "axis", 1);
  b.node("Reshape", {"cat", "five"}, {"r5"});
  auto &t = b.node("Transpose", {"r5"}, {"t5"});
  test::OnnxBuilder::ints(t, "perm", {0, 2, 1, 3, 4});
  b.node("Reshape", {"t5", "four"}, {"shuffled"});
  auto &rm = b.node("ReduceMean", {"shuffled", "hw"}, {"y"});
  test::OnnxBuilder::int1(rm, "keepdims", 1);
  b.output("y");
  std::vector<float> x(C * H * W);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::sin(0.29f * float(i)) * 2.0f;
  std::vector<double> catv(x.size()), want(C, 0.0);
  for (int c = 0; c < C; ++c)
    for (int i = 0; i < H * W; ++i) {
      const double v = x[c * H * W + i];
      catv[c * H * W + i] = c < 2 ? v : std::max(v, 0.0);
    }
  for (int j = 0; j < C; ++j) { // output channel b*G + a <- input channel a*(C/G) + b
    const int a = j % G, bb = j / G, src = a * (C / G) + bb;
    for (int i = 0; i < H * W; ++i)
      want[j] += catv[src * H * W + i] / (H * W);
  }
  for (unsigned clusters : {1u, 2u}) {
    auto got = compile_and_run(b.bytes(), clusters, "fp32", x);
    ASSERT_TRUE(got.ok()) << got.error().message;
    const auto &y = got.value();
    ASSERT_EQ(y.size(), size_t(C));
    for (int j = 0; j < C; ++j)
      EXPECT_NEAR(y[j], want[j], 1e-5) << "channel " << j << " x" << clusters;
  }
  // Any other transpose of an image is a strided copy (lower_layout.cpp): H and W swapped
  // after a Relu (the image is channel-last in the SPM; the output row-major [1,C,W,H]).
  test::OnnxBuilder other;
  other.input("x", {1, C, H, W});
  other.node("Relu", {"x"}, {"r"});
  auto &tt = other.node("Transpose", {"r"}, {"y"});
  test::OnnxBuilder::ints(tt, "perm", {0, 1, 3, 2});
  other.output("y");
  for (unsigned clusters : {1u, 2u}) {
    auto got = compile_and_run(other.bytes(), clusters, "fp32", x);
    ASSERT_TRUE(got.ok()) << got.error().message;
    ASSERT_EQ(got.value().size(), size_t(C * H * W));
    for (int c = 0; c < C; ++c)
      for (int h = 0; h < H; ++h)
        for (int w = 0; w < W; ++w)
          EXPECT_EQ(got.value()[size_t((c * W + w) * H + h)],
                    std::max(0.0f, x[size_t((c * H + h) * W + w)]))
              << c << "," << h << "," << w << " x" << clusters;
  }
}

// A model with a static batch of 3: one program runs the three images (one after another on
// all clusters, or in cluster groups), each result equal to the batch-1 program's on that
// image (FP32, 1 and 2 clusters).
TEST(EndToEndBatch, StaticBatchRunsEveryImage) {
  auto build = [](int64_t batch) {
    test::OnnxBuilder b;
    b.input("x", {batch, 2, 6, 5});
    b.weight("w", {4, 2, 3, 3});
    b.weight("fc", {4, 3});
    auto &c = b.node("Conv", {"x", "w"}, {"c"});
    test::OnnxBuilder::ints(c, "pads", {1, 1, 1, 1});
    b.node("Relu", {"c"}, {"r"});
    b.node("GlobalAveragePool", {"r"}, {"g"});
    b.node("Flatten", {"g"}, {"f"});
    b.node("MatMul", {"f", "fc"}, {"y"});
    b.output("y");
    return b.bytes();
  };
  constexpr size_t image = 2 * 6 * 5;
  std::vector<float> x(3 * image);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::sin(0.17f * float(i)) + 0.1f * float(i / image);
  for (const std::string split : {"sequential", "clusters"})
    for (unsigned clusters : {1u, 2u}) {
      auto compile = [&](int64_t batch) {
        auto graph = import_onnx_bytes(build(batch));
        EXPECT_TRUE(graph.ok()) << graph.error().message;
        EXPECT_EQ(graph.value().batch, batch);
        EXPECT_TRUE(passes::optimize(graph.value()).ok());
        CompileOptions options;
        options.device = manycl::device::preset("small").value();
        options.clusters = clusters;
        options.batch_split = split;
        auto out = compile_graph(graph.value(), options);
        EXPECT_TRUE(out.ok()) << out.error().message;
        return std::move(out.value());
      };
      const CompileOutput three = compile(3), one = compile(1);
      manycl::device::DeviceConfig dev = manycl::device::preset("small").value();
      const auto &in = three.program.tensors[0];
      ASSERT_EQ(in.dims[0], 3u);
      ASSERT_EQ(in.byte_size, 3 * image * 4);
      manycl::device::Device device(dev);
      auto run = manycl::interp::run_kbin(device, three.program, {test::as_bytes(x), {}});
      ASSERT_TRUE(run.ok()) << run.error().message;
      auto batched = test::as_floats(run.value().outputs[1]);
      ASSERT_EQ(batched.size(), 3u * 3);
      for (size_t b = 0; b < 3; ++b) {
        std::vector<float> xi(x.begin() + b * image, x.begin() + (b + 1) * image);
        manycl::device::Device d1(dev);
        auto single = manycl::interp::run_kbin(d1, one.program, {test::as_bytes(xi), {}});
        ASSERT_TRUE(single.ok()) << single.error().message;
        auto y = test::as_floats(single.value().outputs[1]);
        for (size_t j = 0; j < 3; ++j)
          EXPECT_EQ(batched[b * 3 + j], y[j]) << "image " << b << " x" << clusters;
      }
      EXPECT_NE(batched[0], batched[3]); // the images differ, so do their results
      // Modeled time: the predicted cycles are those of the simulated run (whole device; a
      // 1-cluster program is predicted for a 1-cluster sub-device's share of the DDR).
      if (clusters == dev.clusters) {
        EXPECT_EQ(three.total_cycles, run.value().stats.cycles());
      }
      EXPECT_EQ(three.batch.images, 3);
      if (split == "sequential" || clusters == 1) {
        EXPECT_EQ(three.batch.split, "sequential");
        EXPECT_GT(three.total_cycles, 2 * one.total_cycles);
      } else { // two 1-cluster groups: images 0, 2 on cluster 0 and image 1 on cluster 1
        EXPECT_EQ(three.batch.split, "clusters");
        EXPECT_EQ(three.batch.chosen, "clusters 1x2");
      }
    }
}

// Cluster groups never reach into each other: every multicast, exchange and signal of a
// group's streams targets the group's clusters, no BARRIER (over all clusters) remains, and
// each image's argument bytes are touched only by the group running that image.
TEST(EndToEndBatch, ClusterGroupsStayApart) {
  test::OnnxBuilder b;
  b.input("x", {1, 4, 12, 10}, /*dynamic_batch=*/true);
  b.weight("w", {8, 4, 3, 3});
  auto &c = b.node("Conv", {"x", "w"}, {"c"});
  test::OnnxBuilder::ints(c, "pads", {1, 1, 1, 1});
  b.node("Relu", {"c"}, {"r"});
  b.weight("w2", {8, 8, 3, 3});
  b.node("Conv", {"r", "w2"}, {"y"});
  b.output("y");
  auto graph = import_onnx_bytes(b.bytes());
  ASSERT_TRUE(graph.ok()) << graph.error().message;
  ASSERT_TRUE(passes::optimize(graph.value()).ok());
  CompileOptions options;
  options.device = manycl::device::preset("mppa3").value();
  options.batch = 5;
  options.batch_split = "clusters";
  options.batch_group_clusters = 2; // groups {0,1}, {2,3}, {4}
  auto out = compile_graph(graph.value(), options);
  ASSERT_TRUE(out.ok()) << out.error().message;
  const format::Program &p = out.value().program;
  const BatchReport &report = out.value().batch;
  EXPECT_EQ(report.chosen, "clusters 2x2+1");
  std::vector<int> group_of(p.cluster_count, -1), image_group(5, -1);
  for (size_t g = 0; g < report.groups.size(); ++g) {
    for (unsigned k = 0; k < report.groups[g].clusters; ++k)
      group_of[report.groups[g].first_cluster + k] = int(g);
    for (int64_t i : report.groups[g].images)
      image_group[size_t(i)] = int(g);
  }
  const auto &in = p.tensors[0];
  const uint64_t image_bytes = in.byte_size / 5;
  size_t exchanges = 0;
  for (uint32_t cl = 0; cl < p.cluster_count; ++cl)
    for (const format::Record &r : p.streams[cl]) {
      EXPECT_NE(r.function_id, uint32_t(KBIN_FN_BARRIER)) << "cluster " << cl;
      kbin_dma_args d;
      kbin_signal_args s;
      if (r.function_id == KBIN_FN_DMA && r.decode(d)) {
        if (d.kind == KBIN_DMA_EXCHANGE || d.kind == KBIN_DMA_EXCHANGE_MULTICAST)
          ++exchanges;
        if (d.kind == KBIN_DMA_EXCHANGE) {
          EXPECT_EQ(group_of[d.dst_cluster], group_of[cl]);
        }
        for (uint32_t t = 0; t < p.cluster_count; ++t) {
          if (d.cluster_mask >> t & 1u) {
            EXPECT_EQ(group_of[t], group_of[cl]);
          }
        }
        if (d.ddr.space == KBIN_DDR_ARG && d.ddr.arg_index == in.arg_index) {
          EXPECT_EQ(image_group[d.ddr.offset / image_bytes], group_of[cl]);
        }
      } else if (r.function_id == KBIN_FN_SIGNAL && r.decode(s)) {
        EXPECT_EQ(group_of[s.cluster], group_of[cl]);
      }
    }
  EXPECT_GT(exchanges, 0u); // the 2-cluster groups exchange halos: the check is not vacuous
}

// `CompileOptions::batch` (kann compile --batch N) on a symbolic or batch-1 model; a batch
// contradicting a static one is refused.
TEST(EndToEndBatch, BatchOption) {
  auto graph_of = [](int64_t batch, bool symbolic) {
    test::OnnxBuilder b;
    b.input("x", {batch, 2, 6, 5}, symbolic);
    b.weight("w", {4, 2, 3, 3});
    b.node("Conv", {"x", "w"}, {"y"});
    b.output("y");
    auto g = import_onnx_bytes(b.bytes());
    EXPECT_TRUE(g.ok()) << g.error().message;
    EXPECT_TRUE(passes::optimize(g.value()).ok());
    return std::move(g.value());
  };
  CompileOptions options;
  options.device = manycl::device::preset("small").value();
  options.batch = 4;
  for (bool symbolic : {true, false}) {
    auto out = compile_graph(graph_of(1, symbolic), options);
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_EQ(out.value().program.tensors[0].dims[0], 4u);
    EXPECT_EQ(out.value().program.tensors[1].dims[0], 4u);
    EXPECT_EQ(out.value().batch.candidates.size(), 2u); // sequential, 1-cluster groups
  }
  auto same = compile_graph(graph_of(4, false), options);
  EXPECT_TRUE(same.ok());
  options.batch = 3;
  auto contradicts = compile_graph(graph_of(4, false), options);
  ASSERT_FALSE(contradicts.ok());
  EXPECT_EQ(contradicts.error().message,
            "--batch 3 contradicts the model's static batch 4 (export it with a symbolic or "
            "batch-1 first dimension)");
  options.batch_split = "diagonal";
  EXPECT_FALSE(compile_graph(graph_of(1, true), options).ok());
}

} // namespace

namespace {

// A layer normalization written out in ONNX operators on a [1,4,8] tensor (row-major
// storage, not an image): ReduceMean over the last axis, a broadcast Sub and Div between
// activations, a scalar constant Add (a ScaleShift), Sqrt (the math function), then a
// Transpose of the result: FP32 on 1 and 2 clusters against the definition.
TEST(EndToEndAnyRank, LayerNormWrittenOutAndTransposedMatchesDefinition) {
  constexpr int R = 4, L = 8;
  test::OnnxBuilder b;
  b.input("x", {1, R, L});
  b.weight("eps", {}, 0.0f, {1e-5f});
  auto &m = b.node("ReduceMean", {"x"}, {"mean"});
  test::OnnxBuilder::ints(m, "axes", {-1});
  b.node("Sub", {"x", "mean"}, {"d"});
  b.node("Mul", {"d", "d"}, {"d2"});
  auto &v = b.node("ReduceMean", {"d2"}, {"var"});
  test::OnnxBuilder::ints(v, "axes", {-1});
  b.node("Add", {"var", "eps"}, {"ve"});
  b.node("Sqrt", {"ve"}, {"sd"});
  b.node("Div", {"d", "sd"}, {"n"});
  auto &t = b.node("Transpose", {"n"}, {"y"});
  test::OnnxBuilder::ints(t, "perm", {0, 2, 1});
  b.output("y");
  std::vector<float> x(R * L);
  for (int i = 0; i < R * L; ++i)
    x[size_t(i)] = std::sin(0.37f * float(i)) * (1.0f + float(i % 5));
  std::vector<double> want(R * L);
  for (int r = 0; r < R; ++r) {
    double mean = 0, var = 0;
    for (int l = 0; l < L; ++l)
      mean += x[size_t(r * L + l)] / double(L);
    for (int l = 0; l < L; ++l)
      var += (x[size_t(r * L + l)] - mean) * (x[size_t(r * L + l)] - mean) / double(L);
    for (int l = 0; l < L; ++l)
      want[size_t(l * R + r)] = (x[size_t(r * L + l)] - mean) / std::sqrt(var + 1e-5);
  }
  for (unsigned clusters : {1u, 2u}) {
    auto got = compile_and_run(b.bytes(), clusters, "fp32", x);
    ASSERT_TRUE(got.ok()) << got.error().message;
    ASSERT_EQ(got.value().size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(got.value()[i], want[i], 1e-5) << i << " x" << clusters;
  }
}

} // namespace

namespace {

// PRelu with one slope (PyTorch's nn.PReLU()) runs as a LeakyRelu on any rank.
TEST(EndToEndAnyRank, OneSlopePReluIsALeakyRelu) {
  test::OnnxBuilder b;
  b.input("x", {1, 3, 7});
  b.weight("slope", {1}, 0.0f, {0.25f});
  b.node("PRelu", {"x", "slope"}, {"y"});
  b.output("y");
  std::vector<float> x(21);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = float(i) - 10.5f;
  auto got = compile_and_run(b.bytes(), 2, "fp32", x);
  ASSERT_TRUE(got.ok()) << got.error().message;
  ASSERT_EQ(got.value().size(), x.size());
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(got.value()[i], x[i] < 0 ? 0.25f * x[i] : x[i]) << i;
}

// PRelu with one slope per channel (PyTorch's nn.PReLU(C), slope [C,1,1]) on an image:
// Relu(x) + (-slope) * Relu(-x), the product a per-channel ScaleShift; on 1 and 2 clusters.
TEST(EndToEndAnyRank, PerChannelPReluMatchesDefinition) {
  test::OnnxBuilder b;
  b.input("x", {1, 3, 4, 5});
  b.weight("slope", {3, 1, 1}, 0.0f, {0.25f, -0.5f, 2.0f});
  b.node("PRelu", {"x", "slope"}, {"y"});
  b.output("y");
  std::vector<float> x(60);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::sin(0.7f * float(i)) * 3.0f;
  const float slope[3] = {0.25f, -0.5f, 2.0f};
  for (unsigned clusters : {1u, 2u}) {
    auto got = compile_and_run(b.bytes(), clusters, "fp32", x);
    ASSERT_TRUE(got.ok()) << got.error().message;
    ASSERT_EQ(got.value().size(), x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const float s = slope[i / 20];
      EXPECT_FLOAT_EQ(got.value()[i], x[i] < 0 ? s * x[i] : x[i]) << i << " x" << clusters;
    }
  }
}

} // namespace
