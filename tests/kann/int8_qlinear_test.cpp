// QLinearConv / QLinearMatMul: imported into the INT8 kernels of QDQ models and compared with
// a host implementation of the ONNX formula
//   y = saturate(round_half_even(sum((x - x_zp) * (w - w_zp)) + bias) * x_scale * w_scale /
//   y_scale)
//       + y_zp)
// (the multiplier x_scale * w_scale / y_scale in FP32, as ONNX Runtime computes it), quantized
// outputs compared bit for bit. Also ONNX's own node tests when libonnx-testdata is installed.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "int8_common.h"

namespace {

using namespace kann;
using test::int_initializer;
using test::OnnxBuilder;

// Requantization of an exact INT32 accumulator, ONNX formula with an FP32 multiplier.
int32_t requantize(int64_t acc, float x_scale, float w_scale, float y_scale, int32_t y_zp,
                   bool is_signed) {
  const float multiplier = (x_scale * w_scale) / y_scale;
  const double v = std::nearbyint(double(acc) * double(multiplier)) + y_zp;
  return int32_t(std::clamp(v, is_signed ? -128.0 : 0.0, is_signed ? 127.0 : 255.0));
}

struct ConvCase {
  bool signed_activations;
  bool uint8_weights;
  bool per_channel;
  int groups, stride, pad, kernel;
  bool bias;
  unsigned clusters;
};

// A readable, stable test name (gtest would print the struct's bytes, padding included).
void PrintTo(const ConvCase &k, std::ostream *os) {
  *os << (k.signed_activations ? "s8" : "u8") << (k.uint8_weights ? "_wu8" : "_ws8")
      << (k.per_channel ? "_perchannel" : "_pertensor") << "_g" << k.groups << "_s" << k.stride
      << "_p" << k.pad << "_k" << k.kernel << (k.bias ? "_bias" : "") << "_c" << k.clusters;
}

class QLinearConv : public ::testing::TestWithParam<ConvCase> {};

TEST_P(QLinearConv, MatchesOnnxFormulaBitExact) {
  const ConvCase k = GetParam();
  const int C = 4, H = 9, W = 7, M = 6, cin_g = C / k.groups;
  const int x_type = k.signed_activations ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8;
  const int w_type = k.uint8_weights ? onnx::TensorProto::UINT8 : onnx::TensorProto::INT8;
  const float x_scale = 0.031f, y_scale = 0.047f;
  const int32_t x_zp = k.signed_activations ? -7 : 121, y_zp = k.signed_activations ? 3 : 117;
  OnnxBuilder b;
  b.input("x", {1, C, H, W});
  b.weight("x_scale", {}, 0.0f, {x_scale});
  int_initializer(b, "x_zp", x_type, {}, {x_zp});
  std::vector<int32_t> w(size_t(M) * cin_g * k.kernel * k.kernel);
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = k.uint8_weights ? int32_t((i * 53 + 11) % 256) : int32_t((i * 37) % 255) - 127;
  int_initializer(b, "w", w_type, {M, cin_g, k.kernel, k.kernel}, w);
  const int scales = k.per_channel ? M : 1;
  std::vector<float> w_scale;
  std::vector<int32_t> w_zp;
  for (int c = 0; c < scales; ++c) {
    w_scale.push_back(0.002f + 0.0007f * float(c));
    w_zp.push_back(k.uint8_weights ? 120 + 3 * c : 0);
  }
  b.weight("w_scale", {scales}, 0.0f, w_scale);
  int_initializer(b, "w_zp", w_type, {scales}, w_zp);
  b.weight("y_scale", {}, 0.0f, {y_scale});
  int_initializer(b, "y_zp", x_type, {}, {y_zp});
  std::vector<int32_t> bias;
  for (int c = 0; c < M; ++c)
    bias.push_back(c * 517 - 1300);
  std::vector<std::string> inputs = {"xq",      "x_scale", "x_zp",    "w",
                                     "w_scale", "w_zp",    "y_scale", "y_zp"};
  if (k.bias) {
    int_initializer(b, "bias", onnx::TensorProto::INT32, {M}, bias);
    inputs.push_back("bias");
  }
  b.node("QuantizeLinear", {"x", "x_scale", "x_zp"}, {"xq"});
  auto &conv = b.node("QLinearConv", inputs, {"yq"});
  OnnxBuilder::ints(conv, "pads", {k.pad, k.pad, k.pad, k.pad});
  OnnxBuilder::ints(conv, "strides", {k.stride, k.stride});
  OnnxBuilder::int1(conv, "group", k.groups);
  b.node("DequantizeLinear", {"yq", "y_scale", "y_zp"}, {"y"});
  b.output("y");

  std::vector<float> x(size_t(C) * H * W);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = 3.5f * std::sin(0.37f * float(i) + 0.2f) + (k.signed_activations ? 0.0f : 0.6f);
  CompileOptions options;
  options.device = manycl::device::preset("mppa3").value();
  options.clusters = k.clusters;
  int int8_nodes = 0;
  auto y = test::compile_and_run(b.bytes(), x, options, &int8_nodes);
  EXPECT_EQ(int8_nodes, 1);

  const int OH = (H + 2 * k.pad - k.kernel) / k.stride + 1;
  const int OW = (W + 2 * k.pad - k.kernel) / k.stride + 1;
  ASSERT_EQ(y.size(), size_t(M) * OH * OW);
  std::vector<int32_t> xq(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    xq[i] = test::quantize(x[i], x_scale, x_zp, k.signed_activations);
  int mismatches = 0;
  for (int m = 0; m < M; ++m) {
    const int g = m / (M / k.groups);
    const int s = k.per_channel ? m : 0;
    for (int oy = 0; oy < OH; ++oy)
      for (int ox = 0; ox < OW; ++ox) {
        int64_t acc = k.bias ? bias[m] : 0;
        for (int c = 0; c < cin_g; ++c)
          for (int ky = 0; ky < k.kernel; ++ky)
            for (int kx = 0; kx < k.kernel; ++kx) {
              const int iy = oy * k.stride - k.pad + ky, ix = ox * k.stride - k.pad + kx;
              if (iy < 0 || ix < 0 || iy >= H || ix >= W)
                continue; // padding is x_zp: contributes 0
              const int32_t xv = xq[(size_t(g * cin_g + c) * H + iy) * W + ix] - x_zp;
              const int32_t wv = w[((size_t(m) * cin_g + c) * k.kernel + ky) * k.kernel + kx];
              acc += int64_t(xv) * (wv - w_zp[s]);
            }
        const int32_t want =
            requantize(acc, x_scale, w_scale[s], y_scale, y_zp, k.signed_activations);
        const int32_t got = test::requantized(y[(size_t(m) * OH + oy) * OW + ox], y_scale, y_zp);
        if (got != want && ++mismatches < 5)
          ADD_FAILURE() << "m " << m << " y " << oy << " x " << ox << ": got " << got << " want "
                        << want;
      }
  }
  EXPECT_EQ(mismatches, 0);
}

INSTANTIATE_TEST_SUITE_P(Cases, QLinearConv,
                         ::testing::Values(ConvCase{false, false, true, 1, 1, 1, 3, true, 1},
                                           ConvCase{false, false, false, 1, 2, 1, 3, true, 5},
                                           ConvCase{true, false, true, 2, 1, 0, 3, false, 2},
                                           ConvCase{false, true, true, 1, 1, 1, 3, true, 5},
                                           ConvCase{true, true, false, 2, 2, 2, 5, true, 1},
                                           ConvCase{false, false, true, 1, 1, 0, 1, true, 5}),
                         [](const auto &info) { return ::testing::PrintToString(info.param); });

TEST(QLinearMatMul, MatchesOnnxFormulaBitExact) {
  const int K = 37, N = 11;
  for (bool uint8_b : {false, true}) {
    OnnxBuilder b;
    b.input("a", {1, K});
    const float a_scale = 0.021f, y_scale = 0.09f;
    const int32_t a_zp = 130, y_zp = 100;
    b.weight("a_scale", {}, 0.0f, {a_scale});
    int_initializer(b, "a_zp", onnx::TensorProto::UINT8, {}, {a_zp});
    std::vector<int32_t> bm(size_t(K) * N);
    for (size_t i = 0; i < bm.size(); ++i)
      bm[i] = uint8_b ? int32_t((i * 29 + 5) % 256) : int32_t((i * 41) % 255) - 127;
    const int b_type = uint8_b ? onnx::TensorProto::UINT8 : onnx::TensorProto::INT8;
    int_initializer(b, "b", b_type, {K, N}, bm);
    std::vector<float> b_scale;
    std::vector<int32_t> b_zp;
    for (int n = 0; n < N; ++n) { // per column
      b_scale.push_back(0.003f + 0.0002f * float(n));
      b_zp.push_back(uint8_b ? 125 + n : 0);
    }
    b.weight("b_scale", {N}, 0.0f, b_scale);
    int_initializer(b, "b_zp", b_type, {N}, b_zp);
    b.weight("y_scale", {}, 0.0f, {y_scale});
    int_initializer(b, "y_zp", onnx::TensorProto::UINT8, {}, {y_zp});
    b.node("QuantizeLinear", {"a", "a_scale", "a_zp"}, {"aq"});
    b.node("QLinearMatMul", {"aq", "a_scale", "a_zp", "b", "b_scale", "b_zp", "y_scale", "y_zp"},
           {"yq"});
    b.node("DequantizeLinear", {"yq", "y_scale", "y_zp"}, {"y"});
    b.output("y");
    std::vector<float> a(K);
    for (int i = 0; i < K; ++i)
      a[i] = 2.5f * std::cos(0.61f * float(i));
    CompileOptions options;
    options.device = manycl::device::preset("mppa3").value();
    int int8_nodes = 0;
    auto y = test::compile_and_run(b.bytes(), a, options, &int8_nodes);
    EXPECT_EQ(int8_nodes, 1);
    ASSERT_EQ(y.size(), size_t(N));
    for (int n = 0; n < N; ++n) {
      int64_t acc = 0;
      for (int k = 0; k < K; ++k)
        acc += int64_t(test::quantize(a[k], a_scale, a_zp, false) - a_zp) *
               (bm[size_t(k) * N + n] - b_zp[n]);
      EXPECT_EQ(test::requantized(y[n], y_scale, y_zp),
                requantize(acc, a_scale, b_scale[n], y_scale, y_zp, false))
          << "uint8 b " << uint8_b << " column " << n;
    }
  }
}

// A QLinearConv model through `kann compile` and `kann simulate`: the same quantized output
// as the in-process run checked bit-exact above.
TEST(QLinear, ThroughKannSimulate) {
  OnnxBuilder b;
  b.input("x", {1, 3, 6, 5});
  b.weight("x_scale", {}, 0.0f, {0.02f});
  int_initializer(b, "x_zp", onnx::TensorProto::UINT8, {}, {128});
  std::vector<int32_t> w(4 * 3 * 3 * 3);
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = int32_t((i * 59) % 255) - 127;
  int_initializer(b, "w", onnx::TensorProto::INT8, {4, 3, 3, 3}, w);
  b.weight("w_scale", {4}, 0.0f, {0.003f, 0.004f, 0.005f, 0.002f});
  int_initializer(b, "w_zp", onnx::TensorProto::INT8, {4}, {0, 0, 0, 0});
  b.weight("y_scale", {}, 0.0f, {0.06f});
  int_initializer(b, "y_zp", onnx::TensorProto::UINT8, {}, {100});
  b.node("QuantizeLinear", {"x", "x_scale", "x_zp"}, {"xq"});
  auto &conv = b.node("QLinearConv",
                      {"xq", "x_scale", "x_zp", "w", "w_scale", "w_zp", "y_scale", "y_zp"}, {"yq"});
  OnnxBuilder::ints(conv, "pads", {1, 1, 1, 1});
  b.node("DequantizeLinear", {"yq", "y_scale", "y_zp"}, {"y"});
  b.output("y");
  std::vector<float> x(3 * 6 * 5);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = 2.0f * std::sin(0.5f * float(i));
  CompileOptions options;
  options.device = manycl::device::preset("mppa3").value();
  auto want = test::compile_and_run(b.bytes(), x, options);
  ASSERT_EQ(want.size(), 4u * 6 * 5);

  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("kann_qlinear_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream((dir / "q.onnx").string(), std::ios::binary) << b.bytes();
  test::write_npy((dir / "x.npy").string(), {1, 3, 6, 5}, x);
  const std::string tool = KANN_TOOL_PATH;
  const std::string cmd =
      tool + " compile " + (dir / "q.onnx").string() + " -o " + (dir / "q.kbin").string() +
      " > /dev/null 2>&1 && " + tool + " simulate " + (dir / "q.kbin").string() + " --input " +
      (dir / "x.npy").string() + " --output-dir " + dir.string() + " > /dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto got = test::read_npy_tail((dir / "y.npy").string(), want.size());
  fs::remove_all(dir);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(got[i], want[i]) << i;
}

TEST(QLinear, MalformedNodesAreErrors) {
  OnnxBuilder b;
  b.input("x", {1, 2, 4, 4});
  b.weight("s", {}, 0.0f, {0.1f});
  int_initializer(b, "z", onnx::TensorProto::UINT8, {}, {128});
  b.weight("wf", {3, 2, 1, 1}); // float weights: not a QLinearConv
  b.node("QuantizeLinear", {"x", "s", "z"}, {"xq"});
  b.node("QLinearConv", {"xq", "s", "z", "wf", "s", "z", "s", "z"}, {"yq"});
  b.node("DequantizeLinear", {"yq", "s", "z"}, {"y"});
  b.output("y");
  auto g = import_onnx_bytes(b.bytes());
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().message.find("weights must be int8 or uint8"), std::string::npos)
      << g.error().message;
}

// ONNX's node tests (libonnx-testdata): every input but the first becomes an initializer,
// the uint8 input is fed through QuantizeLinear of its dequantized values (exact) and the
// output is read back through DequantizeLinear. Batched rows of QLinearMatMul run one by one.
const char *kNodeTests = "/usr/share/libonnx-testdata/data/node/";

onnx::TensorProto load_tensor(const std::string &path) {
  onnx::TensorProto t;
  std::ifstream f(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), {});
  EXPECT_TRUE(t.ParseFromString(bytes)) << path;
  return t;
}

std::vector<int32_t> ints_of(const onnx::TensorProto &t) {
  std::vector<int32_t> v;
  if (!t.raw_data().empty()) {
    for (unsigned char c : t.raw_data())
      v.push_back(t.data_type() == onnx::TensorProto::INT8 ? int32_t(int8_t(c)) : int32_t(c));
  } else {
    v.assign(t.int32_data().begin(), t.int32_data().end());
  }
  return v;
}

float float_of(const onnx::TensorProto &t) {
  if (!t.raw_data().empty()) {
    float f;
    std::memcpy(&f, t.raw_data().data(), 4);
    return f;
  }
  return t.float_data(0);
}

void run_node_test(const std::string &name, int rows) {
  const std::string dir = std::string(kNodeTests) + name + "/";
  onnx::ModelProto model;
  {
    std::ifstream f(dir + "model.onnx", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(f)), {});
    ASSERT_TRUE(model.ParseFromString(bytes));
  }
  const std::string ds = dir + "test_data_set_0/";
  auto x = load_tensor(ds + "input_0.pb");
  auto expected = load_tensor(ds + "output_0.pb");
  const float x_scale = float_of(load_tensor(ds + "input_1.pb"));
  const int32_t x_zp = ints_of(load_tensor(ds + "input_2.pb"))[0];
  const float y_scale = float_of(load_tensor(ds + "input_6.pb"));
  const int32_t y_zp = ints_of(load_tensor(ds + "input_7.pb"))[0];
  const bool is_signed = x.data_type() == onnx::TensorProto::INT8;
  const auto xv = ints_of(x), want = ints_of(expected);
  const size_t in_row = xv.size() / size_t(rows), out_row = want.size() / size_t(rows);
  for (int r = 0; r < rows; ++r) {
    onnx::ModelProto m = model;
    m.mutable_opset_import(0)->set_version(13); // QLinear* are unchanged from 10 to 13
    auto *g = m.mutable_graph();
    const std::string x_name = g->input(0).name();
    for (int i = 1; i < g->input_size(); ++i) {
      auto t = load_tensor(ds + "input_" + std::to_string(i) + ".pb");
      t.set_name(g->input(i).name());
      *g->add_initializer() = t;
    }
    g->mutable_input()->DeleteSubrange(1, g->input_size() - 1);
    auto *in = g->mutable_input(0);
    in->set_name("x_float");
    auto *tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    if (rows > 1) { // one row of the batch: [1, K]
      tt->mutable_shape()->clear_dim();
      tt->mutable_shape()->add_dim()->set_dim_value(1);
      tt->mutable_shape()->add_dim()->set_dim_value(int64_t(in_row));
    }
    auto *q = g->add_node();
    q->set_op_type("QuantizeLinear");
    q->add_input("x_float");
    q->add_input(g->node(0).input(1));
    q->add_input(g->node(0).input(2));
    q->add_output(x_name);
    // Keep topological order: the QuantizeLinear first.
    for (int i = g->node_size() - 1; i > 0; --i)
      g->mutable_node()->SwapElements(i, i - 1);
    const std::string y_name = g->output(0).name();
    auto *dq = g->add_node();
    dq->set_op_type("DequantizeLinear");
    dq->add_input(y_name);
    dq->add_input(g->node(1).input(6));
    dq->add_input(g->node(1).input(7));
    dq->add_output("y_float");
    g->mutable_output(0)->set_name("y_float");
    g->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
        onnx::TensorProto::FLOAT);
    if (name == "test_qlinearmatmul_3D") { // batched B: this row's matrix
      auto *b = g->mutable_initializer(2);
      ASSERT_EQ(b->dims_size(), 3);
      const int64_t kk = b->dims(1), nn = b->dims(2);
      const int batch = r / (rows / int(b->dims(0)));
      std::string raw = b->raw_data().substr(size_t(batch * kk * nn), size_t(kk * nn));
      b->clear_dims();
      b->add_dims(kk);
      b->add_dims(nn);
      b->set_raw_data(raw);
    }
    std::vector<float> input(in_row);
    for (size_t i = 0; i < in_row; ++i)
      input[i] = float(xv[r * in_row + i] - x_zp) * x_scale;
    for (size_t i = 0; i < in_row; ++i)
      ASSERT_EQ(test::quantize(input[i], x_scale, x_zp, is_signed), xv[r * in_row + i]);
    CompileOptions options;
    options.device = manycl::device::preset("small").value();
    auto y = test::compile_and_run(m.SerializeAsString(), input, options);
    ASSERT_EQ(y.size(), out_row) << name;
    for (size_t i = 0; i < out_row; ++i)
      EXPECT_EQ(test::requantized(y[i], y_scale, y_zp), want[r * out_row + i])
          << name << " row " << r << " element " << i;
  }
}

TEST(OnnxNodeTests, QLinearConvAndMatMul) {
  if (!std::filesystem::exists(std::string(kNodeTests) + "test_qlinearconv/model.onnx"))
    GTEST_SKIP() << "libonnx-testdata is not installed";
  run_node_test("test_qlinearconv", 1);
  run_node_test("test_qlinearmatmul_2D", 2);
  run_node_test("test_qlinearmatmul_3D", 4);
}

} // namespace
