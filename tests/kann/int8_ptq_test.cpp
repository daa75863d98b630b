// Post-training INT8 quantization (--precision int8 --calibration): calibration ranges
// measured on the simulated device, the quantized graph's operators, accuracy on the small CNN
// and on the bundled digits model (in-process and through `kann compile` / `kann simulate`),
// and the errors without calibration data.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <map>

#include "int8_common.h"
#include "kann/quantize.h"
#include "small_cnn.h"

namespace {

using namespace kann;
namespace fs = std::filesystem;

ir::Graph optimized(const std::string &onnx) {
  auto g = import_onnx_bytes(onnx);
  EXPECT_TRUE(g.ok()) << g.error().message;
  EXPECT_TRUE(passes::optimize(g.value()).ok());
  return g.ok() ? std::move(g.value()) : ir::Graph{};
}

CompileOptions small_options(unsigned clusters = 2) {
  CompileOptions options;
  options.device = manycl::device::preset("small").value();
  options.clusters = clusters;
  return options;
}

// Runs a compiled graph; outputs by name.
std::map<std::string, std::vector<float>> run(const ir::Graph &g, const CompileOptions &options,
                                              const std::vector<float> &input) {
  auto out = compile_graph(g, options);
  EXPECT_TRUE(out.ok()) << out.error().message;
  if (!out.ok())
    return {};
  const auto &prog = out.value().program;
  manycl::device::Device device(options.device);
  std::vector<std::vector<uint8_t>> args(prog.arg_count);
  args[0] = test::float_bytes(input);
  auto r = manycl::interp::run_kbin(device, prog, args);
  EXPECT_TRUE(r.ok()) << r.error().message;
  std::map<std::string, std::vector<float>> outputs;
  for (const auto &t : prog.tensors)
    if (r.ok() && t.role == KBIN_ROLE_OUTPUT)
      outputs[t.name] = test::bytes_floats(r.value().outputs[t.arg_index]);
  return outputs;
}

std::vector<std::vector<std::vector<float>>> small_cnn_samples(const std::vector<float> &base,
                                                               int count) {
  std::vector<std::vector<std::vector<float>>> samples;
  for (int s = 0; s < count; ++s) {
    std::vector<float> x = base;
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = x[i] * (0.8f + 0.1f * float(s)) + 0.2f * std::sin(0.05f * float(i * (s + 1)));
    samples.push_back({x});
  }
  return samples;
}

TEST(Calibration, RangesAreTheFloatGraphsMinMax) {
  auto m = test::make_small_cnn();
  auto g = optimized(m.onnx);
  auto ranges = quantize::calibrate(g, small_options(), {{m.input}});
  ASSERT_TRUE(ranges.ok()) << ranges.error().message;
  auto expect_range = [&](const char *name, const std::vector<float> &values) {
    const int t = g.find(name);
    ASSERT_GE(t, 0) << name;
    const auto &r = ranges.value()[size_t(t)];
    ASSERT_TRUE(r.seen) << name;
    EXPECT_NEAR(r.min, *std::min_element(values.begin(), values.end()), 1e-4f) << name;
    EXPECT_NEAR(r.max, *std::max_element(values.begin(), values.end()), 1e-4f) << name;
  };
  expect_range("image", m.input);
  expect_range("features", m.features); // an average pool inside the network
  expect_range("pooled", m.pooled);
  // Percentiles narrow the range to the bulk of the values.
  quantize::CalibrationOptions p;
  p.percentile = 90.0;
  auto narrow = quantize::calibrate(g, small_options(), {{m.input}}, p);
  ASSERT_TRUE(narrow.ok()) << narrow.error().message;
  const int image = g.find("image");
  EXPECT_GT(narrow.value()[size_t(image)].min, ranges.value()[size_t(image)].min);
  EXPECT_LT(narrow.value()[size_t(image)].max, ranges.value()[size_t(image)].max);
  // Samples that do not fit the model are an error, not a crash.
  auto bad = quantize::calibrate(g, small_options(), {{std::vector<float>(5, 0.0f)}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("needs"), std::string::npos) << bad.error().message;
}

TEST(Quantize, SmallCnnRunsInt8CloseToFloat) {
  auto m = test::make_small_cnn();
  auto g = optimized(m.onnx);
  auto ranges = quantize::calibrate(g, small_options(), small_cnn_samples(m.input, 6));
  ASSERT_TRUE(ranges.ok()) << ranges.error().message;
  auto count = quantize::quantize_int8(g, ranges.value());
  ASSERT_TRUE(count.ok()) << count.error().message;
  std::map<std::string, int> int8_ops;
  for (const auto &n : g.nodes)
    if (!n.dead && n.ints.count("int8"))
      ++int8_ops[ir::op_name(n.op)];
  // Conv x3 (BatchNorm folded), MaxPool, the residual Add, AveragePool, GlobalAveragePool, Gemm.
  EXPECT_EQ(count.value(), 8) << g.dump();
  EXPECT_EQ(int8_ops["Conv"], 3);
  EXPECT_EQ(int8_ops["Add"], 1);
  EXPECT_EQ(int8_ops["Gemm"], 1);
  EXPECT_EQ(int8_ops["GlobalAveragePool"], 1);
  for (const auto &n : g.nodes) // weights: per-output-channel symmetric int8
    if (!n.dead && n.op == ir::Op::Conv) {
      const auto &w = g.tensors[n.inputs[1]];
      EXPECT_EQ(w.qscales.size(), size_t(w.shape[0]));
      EXPECT_EQ(*std::max_element(w.qvalues.begin(), w.qvalues.end(),
                                  [](int a, int b) { return std::abs(a) < std::abs(b); }) == 127 ||
                    *std::min_element(w.qvalues.begin(), w.qvalues.end()) == -127,
                true);
    }
  auto options = small_options();
  options.precision = "int8";
  auto out = run(g, options, m.input);
  ASSERT_EQ(out["probs"].size(), 10u);
  ASSERT_EQ(out["features"].size(), m.features.size());
  const float feature_span = *std::max_element(m.features.begin(), m.features.end()) -
                             *std::min_element(m.features.begin(), m.features.end());
  double err = 0.0, norm = 0.0;
  for (size_t i = 0; i < m.features.size(); ++i) {
    err += std::pow(double(out["features"][i] - m.features[i]), 2);
    norm += std::pow(double(m.features[i]), 2);
    EXPECT_NEAR(out["features"][i], m.features[i], 0.06f * feature_span) << i;
  }
  EXPECT_LT(std::sqrt(err / norm), 0.03);
  for (int i = 0; i < 10; ++i)
    EXPECT_NEAR(out["probs"][i], m.probs[i], 0.02f) << i;
}

// INT8 weights are read from DDR as bytes: the parameter DMAs of a quantized network (dense,
// depthwise and strided convolutions, a Gemm) carry at most 1.05x its parameter count (weights
// plus biases; the rest is the per-channel INT32 bias and FP32 multiplier, and the padding of
// the last 16-channel panel), against 2x when the kernels took INT16 weights.
TEST(Quantize, Int8ParametersAreReadFromDdrAtTheirSize) {
  test::OnnxBuilder b;
  b.input("x", {1, 64, 12, 12});
  const auto w1 = b.weight("w1", {128, 64, 3, 3}, 0.05f);
  const auto b1 = b.weight("b1", {128}, 0.1f);
  const auto w2 = b.weight("w2", {128, 1, 3, 3}, 0.2f);
  const auto b2 = b.weight("b2", {128}, 0.1f);
  const auto w3 = b.weight("w3", {32, 128, 1, 1}, 0.05f);
  const auto b3 = b.weight("b3", {32}, 0.1f);
  const auto w4 = b.weight("w4", {32, 32 * 6 * 6}, 0.02f);
  const auto b4 = b.weight("b4", {32}, 0.1f);
  auto &c1 = b.node("Conv", {"x", "w1", "b1"}, {"c1"});
  test::OnnxBuilder::ints(c1, "pads", {1, 1, 1, 1});
  b.node("Relu", {"c1"}, {"r1"});
  auto &c2 = b.node("Conv", {"r1", "w2", "b2"}, {"c2"});
  test::OnnxBuilder::ints(c2, "pads", {1, 1, 1, 1});
  test::OnnxBuilder::ints(c2, "group", {128});
  test::OnnxBuilder::ints(c2, "strides", {2, 2});
  b.node("Relu", {"c2"}, {"r2"});
  b.node("Conv", {"r2", "w3", "b3"}, {"c3"});
  b.node("Flatten", {"c3"}, {"f"});
  auto &fc = b.node("Gemm", {"f", "w4", "b4"}, {"logits"});
  test::OnnxBuilder::ints(fc, "transB", {1});
  b.output("logits");
  const uint64_t parameters =
      w1.size() + b1.size() + w2.size() + b2.size() + w3.size() + b3.size() + w4.size() + b4.size();
  std::vector<float> x(64 * 12 * 12);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::sin(0.37f * float(i));
  for (unsigned clusters : {1u, 2u}) {
    SCOPED_TRACE(clusters);
    auto g = optimized(b.bytes());
    auto ranges = quantize::calibrate(g, small_options(clusters), {{x}});
    ASSERT_TRUE(ranges.ok()) << ranges.error().message;
    auto count = quantize::quantize_int8(g, ranges.value());
    ASSERT_TRUE(count.ok()) << count.error().message;
    auto options = small_options(clusters);
    options.precision = "int8";
    auto out = compile_graph(g, options);
    ASSERT_TRUE(out.ok()) << out.error().message;
    int int8_products = 0;
    for (const auto &n : g.nodes)
      int8_products +=
          !n.dead && n.ints.count("int8") && (n.op == ir::Op::Conv || n.op == ir::Op::Gemm);
    EXPECT_EQ(int8_products, 4) << g.dump();
    uint64_t param_bytes = 0;
    for (const auto &stream : out.value().program.streams)
      for (const auto &r : stream) {
        kbin_dma_args d;
        if (r.function_id == KBIN_FN_DMA && r.decode(d) && d.ddr.space == KBIN_DDR_PARAMS)
          param_bytes += d.shape.row_bytes * d.shape.rows * d.shape.planes;
      }
    EXPECT_GE(param_bytes, parameters);
    EXPECT_LE(double(param_bytes), 1.05 * double(parameters))
        << param_bytes << " parameter bytes read for " << parameters << " parameters";
  }
}

// A fire module (squeeze, two expands concatenated): the concat's inputs take its
// quantization, so the expands write straight into its buffer (no copy, no requantization).
TEST(Quantize, FireConcatIsEliminatedInInt8) {
  test::OnnxBuilder b;
  b.input("x", {1, 4, 9, 7});
  b.weight("ws", {3, 4, 1, 1});
  b.weight("we1", {5, 3, 1, 1});
  b.weight("we3", {6, 3, 3, 3}, 0.2f);
  b.weight("wh", {2, 11, 1, 1});
  b.node("Conv", {"x", "ws"}, {"s"});
  b.node("Relu", {"s"}, {"sr"});
  b.node("Conv", {"sr", "we1"}, {"e1"});
  b.node("Relu", {"e1"}, {"e1r"});
  test::OnnxBuilder::ints(b.node("Conv", {"sr", "we3"}, {"e3"}), "pads", {1, 1, 1, 1});
  b.node("Relu", {"e3"}, {"e3r"});
  test::OnnxBuilder::int1(b.node("Concat", {"e1r", "e3r"}, {"cat"}), "axis", 1);
  b.node("Conv", {"cat", "wh"}, {"y"});
  b.output("y");
  auto g = optimized(b.bytes());
  std::vector<float> x(4 * 9 * 7);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::sin(0.21f * float(i)) + 0.3f;
  const auto options = small_options();
  auto want = run(g, options, x)["y"];
  auto ranges = quantize::calibrate(g, options, {{x}});
  ASSERT_TRUE(ranges.ok()) << ranges.error().message;
  auto count = quantize::quantize_int8(g, ranges.value());
  ASSERT_TRUE(count.ok()) << count.error().message;
  EXPECT_EQ(count.value(), 5) << g.dump(); // 4 Conv + Concat
  auto int8_options = options;
  int8_options.precision = "int8";
  auto compiled = compile_graph(g, int8_options);
  ASSERT_TRUE(compiled.ok()) << compiled.error().message;
  for (const auto &op : compiled.value().ops)
    EXPECT_NE(op.op, "Concat") << "the concat should write in place";
  auto got = run(g, int8_options, x)["y"];
  ASSERT_EQ(got.size(), want.size());
  float span = 0.0f;
  for (float v : want)
    span = std::max(span, std::fabs(v));
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 0.05f * span) << i;
}

// A channel of near-zero weights with a large bias: its weight scale is raised so the int32
// bias (bias / (x_scale * w_scale)) does not overflow; the output is still the bias.
TEST(Quantize, TinyWeightsWithLargeBiasKeepTheBias) {
  test::OnnxBuilder b;
  b.input("x", {1, 8});
  std::vector<float> w(3 * 8);
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = i < 8 ? 1e-9f * float(i + 1) : 0.1f * std::sin(float(i));
  b.weight("w", {3, 8}, 0.0f, w);
  b.weight("bias", {3}, 0.0f, {2.5f, -0.5f, 0.25f});
  test::OnnxBuilder::int1(b.node("Gemm", {"x", "w", "bias"}, {"y"}), "transB", 1);
  b.output("y");
  auto g = optimized(b.bytes());
  std::vector<float> x(8);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = 0.5f * std::cos(float(i));
  const auto options = small_options();
  auto want = run(g, options, x)["y"];
  auto ranges = quantize::calibrate(g, options, {{x}});
  ASSERT_TRUE(ranges.ok()) << ranges.error().message;
  auto count = quantize::quantize_int8(g, ranges.value());
  ASSERT_TRUE(count.ok()) << count.error().message;
  EXPECT_EQ(count.value(), 1);
  auto int8_options = options;
  int8_options.precision = "int8";
  auto got = run(g, int8_options, x)["y"];
  ASSERT_EQ(got.size(), 3u);
  for (int i = 0; i < 3; ++i) // one output step: the range [-0.5.., 2.5..] over 255 steps
    EXPECT_NEAR(got[i], want[i], 0.02f) << i;
}

// Convolutions ending in LeakyReLU / Sigmoid: the activation is split from the convolution
// (INT8 kernels only clamp) and runs on the quantized tensor, INT8 in and out.
TEST(Quantize, NonClampActivationsRunOnInt8Tensors) {
  test::OnnxBuilder b;
  b.input("x", {1, 3, 8, 6});
  b.weight("w1", {6, 3, 3, 3}, 0.3f);
  b.weight("w2", {4, 6, 1, 1}, 0.4f);
  test::OnnxBuilder::ints(b.node("Conv", {"x", "w1"}, {"c1"}), "pads", {1, 1, 1, 1});
  test::OnnxBuilder::float1(b.node("LeakyRelu", {"c1"}, {"l1"}), "alpha", 0.1f);
  b.node("Conv", {"l1", "w2"}, {"c2"});
  b.node("Sigmoid", {"c2"}, {"y"});
  b.output("y");
  auto g = optimized(b.bytes());
  std::vector<float> x(3 * 8 * 6);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::sin(0.37f * float(i)) - 0.2f;
  const auto options = small_options();
  auto want = run(g, options, x)["y"];
  EXPECT_EQ(quantize::split_activations(g), 2);
  auto ranges = quantize::calibrate(g, options, {{x}});
  ASSERT_TRUE(ranges.ok()) << ranges.error().message;
  auto count = quantize::quantize_int8(g, ranges.value());
  ASSERT_TRUE(count.ok()) << count.error().message;
  std::map<std::string, int> int8_ops;
  for (const auto &n : g.nodes)
    if (!n.dead && n.ints.count("int8"))
      ++int8_ops[ir::op_name(n.op)];
  EXPECT_EQ(int8_ops["Conv"], 2) << g.dump();
  EXPECT_EQ(int8_ops["LeakyRelu"], 1) << g.dump();
  EXPECT_EQ(int8_ops["Sigmoid"], 1) << g.dump();
  auto int8_options = options;
  int8_options.precision = "int8";
  auto got = run(g, int8_options, x)["y"];
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) // sigmoid outputs in (0, 1)
    EXPECT_NEAR(got[i], want[i], 0.03f) << i;
}

TEST(Quantize, FloatGraphWithoutCalibrationIsAnError) {
  auto m = test::make_small_cnn();
  auto g = optimized(m.onnx);
  auto options = small_options();
  options.precision = "int8";
  auto out = compile_graph(g, options);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().message.find("calibration data is needed"), std::string::npos)
      << out.error().message;
  // A QDQ model is already quantized: quantizing it again is refused.
  auto digits =
      import_onnx_file(std::string(KANN_SOURCE_DIR) + "/examples/models/digits/model_int8.onnx");
  ASSERT_TRUE(digits.ok()) << digits.error().message;
  ASSERT_TRUE(passes::optimize(digits.value()).ok());
  std::vector<quantize::Range> none(digits.value().tensors.size());
  EXPECT_FALSE(quantize::quantize_int8(digits.value(), none).ok());
}

// .npy arrays of the bundled data (float32 or int64, C order).
template <class T> std::vector<T> read_npy(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), {});
  if (bytes.size() < 10)
    return {};
  const size_t header = size_t(uint8_t(bytes[8]) | uint8_t(bytes[9]) << 8);
  std::vector<T> v((bytes.size() - 10 - header) / sizeof(T));
  std::memcpy(v.data(), bytes.data() + 10 + header, v.size() * sizeof(T));
  return v;
}

// The bundled digits classifier quantized from its float model, calibrated on the first 64
// test samples: accuracy on all 360 within 1 % of FP32's 98.33 %.
TEST(QuantizeDigits, AccuracyWithinOnePercentOfFloat) {
  const std::string dir = std::string(KANN_SOURCE_DIR) + "/examples/models/digits/";
  auto inputs = read_npy<float>(dir + "test_inputs.npy");
  auto labels = read_npy<int64_t>(dir + "test_labels.npy");
  ASSERT_EQ(inputs.size(), 360u * 64);
  ASSERT_EQ(labels.size(), 360u);
  auto graph = import_onnx_file(dir + "model.onnx");
  ASSERT_TRUE(graph.ok()) << graph.error().message;
  ASSERT_TRUE(passes::optimize(graph.value()).ok());
  auto &g = graph.value();
  std::vector<std::vector<std::vector<float>>> samples;
  for (size_t s = 0; s < 64; ++s)
    samples.push_back({std::vector<float>(inputs.begin() + ptrdiff_t(s * 64),
                                          inputs.begin() + ptrdiff_t(s * 64 + 64))});
  auto options = small_options(1);
  auto ranges = quantize::calibrate(g, options, samples);
  ASSERT_TRUE(ranges.ok()) << ranges.error().message;
  auto count = quantize::quantize_int8(g, ranges.value());
  ASSERT_TRUE(count.ok()) << count.error().message;
  EXPECT_EQ(count.value(), 5);    // 2 Conv, MaxPool, 2 Gemm
  std::map<std::string, int> ops; // INT8 from the input's quantization to the logits'
  for (const auto &n : g.nodes)
    ++ops[ir::op_name(n.op)];
  EXPECT_EQ(ops["QuantizeLinear"], 1) << g.dump();   // the network input
  EXPECT_EQ(ops["DequantizeLinear"], 1) << g.dump(); // the logits
  EXPECT_EQ(ops["Flatten"], 1) << g.dump();          // a view of the INT8 pooled tensor
  options.precision = "int8";
  auto out = compile_graph(g, options);
  ASSERT_TRUE(out.ok()) << out.error().message;
  const auto &prog = out.value().program;
  manycl::device::Device device(options.device);
  int correct = 0;
  for (size_t s = 0; s < 360; ++s) {
    std::vector<float> x(inputs.begin() + ptrdiff_t(s * 64),
                         inputs.begin() + ptrdiff_t(s * 64 + 64));
    auto r = manycl::interp::run_kbin(device, prog, {test::float_bytes(x), {}});
    ASSERT_TRUE(r.ok()) << r.error().message;
    auto logits = test::bytes_floats(r.value().outputs[1]);
    ASSERT_EQ(logits.size(), 10u);
    correct += std::max_element(logits.begin(), logits.end()) - logits.begin() == labels[s];
  }
  EXPECT_GE(correct, 351) << "FP32: 354/360"; // 97.5 %
}

// The same through the tool: `kann compile --precision int8 --calibration` then `kann
// simulate`; a float model without --calibration is a one-line error.
TEST(QuantizeDigits, ToolCompileAndSimulate) {
  const std::string dir = std::string(KANN_SOURCE_DIR) + "/examples/models/digits/";
  const fs::path tmp = fs::temp_directory_path() / ("kann_int8_" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  auto sh = [](const std::string &cmd, std::string *output = nullptr) {
    FILE *p = popen((cmd + " 2>&1").c_str(), "r");
    std::string out;
    char buf[4096];
    while (p && fgets(buf, sizeof buf, p))
      out += buf;
    const int st = p ? pclose(p) : -1;
    if (output)
      *output = out;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  };
  const std::string tool = KANN_TOOL_PATH;
  const std::string kbin = (tmp / "d8.kbin").string();
  std::string log;
  EXPECT_EQ(sh(tool + " compile " + dir + "model.onnx -o " + kbin +
                   " --precision int8 --clusters 2 --calibration " + dir + "test_inputs.npy",
               &log),
            0)
      << log;
  EXPECT_NE(log.find("calibrating on 360 samples"), std::string::npos) << log;
  EXPECT_NE(log.find("5 INT8 operators"), std::string::npos) << log;
  EXPECT_EQ(sh(tool + " simulate " + kbin + " --input " + dir + "sample_input.npy --output-dir " +
                   tmp.string(),
               &log),
            0)
      << log;
  auto logits = test::read_npy_tail((tmp / "logits.npy").string(), 10);
  auto reference = read_npy<float>(dir + "reference_logits.npy"); // FP32, row 0 = the sample
  ASSERT_EQ(logits.size(), 10u);
  ASSERT_GE(reference.size(), 10u);
  auto argmax = [](const float *v) { return std::max_element(v, v + 10) - v; };
  EXPECT_EQ(argmax(logits.data()), argmax(reference.data()));
  for (int i = 0; i < 10; ++i)
    EXPECT_NEAR(logits[i], reference[i], 1.0f) << i;
  EXPECT_NE(sh(tool + " compile " + dir + "model.onnx -o " + kbin + " --precision int8", &log), 0);
  EXPECT_NE(log.find("kann: --precision int8 on a float model needs calibration data"),
            std::string::npos)
      << log;
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 2) << log; // "importing", the error
  EXPECT_NE(sh(tool + " compile " + dir + "model_int8.onnx -o " + kbin +
                   " --precision int8 --calibration " + dir + "test_inputs.npy",
               &log),
            0);
  EXPECT_NE(log.find("already quantized"), std::string::npos) << log;
  EXPECT_NE(sh(tool + " compile " + dir + "model.onnx -o " + kbin +
                   " --precision int8 --calibration " + dir + "test_labels.npy",
               &log),
            0);
  EXPECT_NE(log.find("kann: "), std::string::npos) << log;
  fs::remove_all(tmp);
}

// A model with two inputs, calibrated per input (`--calibration NAME=FILE.npy`, several files
// of one input adding up), compiled to INT8 and simulated against the float definition; the
// one-line errors of calibration data that does not fit the inputs.
TEST(QuantizeTwoInputs, ToolCalibratesEachNamedInput) {
  test::OnnxBuilder b;
  b.input("a", {1, 3, 6, 6});
  b.input("b", {1, 3, 6, 6});
  const auto wa = b.weight("wa", {4, 3, 1, 1}), wb = b.weight("wb", {4, 3, 1, 1});
  b.node("Conv", {"a", "wa"}, {"ca"});
  b.node("Conv", {"b", "wb"}, {"cb"});
  b.node("Add", {"ca", "cb"}, {"s"});
  b.node("Relu", {"s"}, {"y"});
  b.output("y");
  const fs::path tmp = fs::temp_directory_path() / ("kann_int8_two_" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  {
    std::ofstream f(tmp / "m.onnx", std::ios::binary);
    f << b.bytes();
  }
  constexpr size_t per = 3 * 6 * 6;
  auto samples = [&](size_t n, float phase, float gain) { // n samples of one input
    std::vector<float> v(n * per);
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = gain * std::sin(phase + 0.37f * float(i));
    return v;
  };
  const auto a = samples(12, 0.0f, 1.0f), b1 = samples(4, 1.0f, 2.0f), b2 = samples(8, 2.0f, 2.0f);
  test::write_npy((tmp / "a.npy").string(), {12, 3, 6, 6}, a);
  test::write_npy((tmp / "b1.npy").string(), {4, 3, 6, 6}, b1);
  test::write_npy((tmp / "b2.npy").string(), {8, 3, 6, 6}, b2);
  test::write_npy((tmp / "a0.npy").string(), {1, 3, 6, 6}, {a.begin(), a.begin() + per});
  test::write_npy((tmp / "b0.npy").string(), {1, 3, 6, 6}, {b1.begin(), b1.begin() + per});
  auto sh = [](const std::string &cmd, std::string &out) {
    FILE *p = popen((cmd + " 2>&1").c_str(), "r");
    out.clear();
    char buf[4096];
    while (p && fgets(buf, sizeof buf, p))
      out += buf;
    const int st = p ? pclose(p) : -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  };
  const std::string tool = KANN_TOOL_PATH, d = tmp.string() + "/";
  const std::string compile =
      tool + " compile " + d + "m.onnx -o " + d + "m.kbin --precision int8 --clusters 2";
  std::string log;
  ASSERT_EQ(sh(compile + " --calibration b=" + d + "b1.npy --calibration a=" + d +
                   "a.npy --calibration b=" + d + "b2.npy",
               log),
            0)
      << log;
  EXPECT_NE(log.find("calibrating on 12 samples"), std::string::npos) << log;
  ASSERT_EQ(sh(tool + " simulate " + d + "m.kbin --input a=" + d + "a0.npy --input b=" + d +
                   "b0.npy --output-dir " + d,
               log),
            0)
      << log;
  const auto y = test::read_npy_tail(d + "y.npy", 4 * 36);
  ASSERT_EQ(y.size(), 4u * 36);
  double worst = 0, range = 0;
  for (size_t o = 0; o < 4; ++o)
    for (size_t p = 0; p < 36; ++p) {
      double want = 0;
      for (size_t c = 0; c < 3; ++c)
        want += double(wa[o * 3 + c]) * a[c * 36 + p] + double(wb[o * 3 + c]) * b1[c * 36 + p];
      want = std::max(want, 0.0);
      worst = std::max(worst, std::fabs(double(y[o * 36 + p]) - want));
      range = std::max(range, want);
    }
  EXPECT_LT(worst, 0.03 * range) << "INT8 error " << worst << " of an output range " << range;
  // Errors: a file naming no input, an input without samples, different sample counts, an
  // unknown input.
  const std::pair<std::string, std::string> errors[] = {
      {" --calibration " + d + "a.npy --calibration b=" + d + "b2.npy",
       "names no input, and the model has 2 ('a', 'b')"},
      {" --calibration a=" + d + "a.npy", "no samples for input 'b'"},
      {" --calibration a=" + d + "a.npy --calibration b=" + d + "b2.npy",
       "input 'b' has 8 samples, input 'a' 12"},
      {" --calibration c=" + d + "a.npy", "'c' is not an input of the model"}};
  for (const auto &[args, message] : errors) {
    EXPECT_NE(sh(compile + args, log), 0) << args;
    EXPECT_NE(log.find(message), std::string::npos) << log;
    EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 2) << log; // "importing", the error
  }
  fs::remove_all(tmp);
}

} // namespace
