// INT8 element-wise Add and channel Concat of QDQ models: each input keeps its own scale and
// zero point, the output is requantized (fused ReLU as the clamp), compared bit for bit with
// the ONNX formulas (DequantizeLinear, FP32 add, QuantizeLinear).
#include <gtest/gtest.h>

#include <map>

#include "int8_common.h"
#include "manycl/native/native.h"

namespace {

using namespace kann;
using test::int_initializer;
using test::OnnxBuilder;

struct EltCase {
  bool is_signed;
  bool concat; // else Add + Relu
  unsigned clusters;
};

// A readable, stable test name (gtest would print the struct's bytes, padding included).
void PrintTo(const EltCase &k, std::ostream *os) {
  *os << (k.is_signed ? "s8" : "u8") << (k.concat ? "_concat" : "_add_relu") << "_c"
      << k.clusters;
}

class Int8Eltwise : public ::testing::TestWithParam<EltCase> {};

TEST_P(Int8Eltwise, MatchesQdqFormulaBitExact) {
  const EltCase k = GetParam();
  const int C = 5, H = 7, W = 6;
  const int type = k.is_signed ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8;
  const float sa = 0.021f, sb = 0.0137f, sy = 0.029f;
  const int32_t za = k.is_signed ? -9 : 131, zb = k.is_signed ? 4 : 90, zy = k.is_signed ? -20 : 60;
  OnnxBuilder b;
  b.input("a", {1, C, H, W});
  b.input("b", {1, C, H, W});
  b.weight("sa", {}, 0.0f, {sa});
  b.weight("sb", {}, 0.0f, {sb});
  b.weight("sy", {}, 0.0f, {sy});
  int_initializer(b, "za", type, {}, {za});
  int_initializer(b, "zb", type, {}, {zb});
  int_initializer(b, "zy", type, {}, {zy});
  b.node("QuantizeLinear", {"a", "sa", "za"}, {"aq"});
  b.node("QuantizeLinear", {"b", "sb", "zb"}, {"bq"});
  b.node("DequantizeLinear", {"aq", "sa", "za"}, {"ad"});
  b.node("DequantizeLinear", {"bq", "sb", "zb"}, {"bd"});
  if (k.concat) {
    OnnxBuilder::int1(b.node("Concat", {"ad", "bd"}, {"s"}), "axis", 1);
    b.node("QuantizeLinear", {"s", "sy", "zy"}, {"yq"});
  } else {
    b.node("Add", {"ad", "bd"}, {"s"});
    b.node("Relu", {"s"}, {"r"});
    b.node("QuantizeLinear", {"r", "sy", "zy"}, {"yq"});
  }
  b.node("DequantizeLinear", {"yq", "sy", "zy"}, {"y"});
  b.output("y");

  auto graph = import_onnx_bytes(b.bytes());
  ASSERT_TRUE(graph.ok()) << graph.error().message;
  ASSERT_TRUE(passes::optimize(graph.value()).ok());
  std::map<std::string, int> int8_ops;
  for (const auto &n : graph.value().nodes)
    if (!n.dead && n.ints.count("int8"))
      ++int8_ops[ir::op_name(n.op)];
  EXPECT_EQ(int8_ops[k.concat ? "Concat" : "Add"], 1) << graph.value().dump();
  CompileOptions options;
  options.device = manycl::device::preset("mppa3").value();
  options.clusters = k.clusters;
  auto out = compile_graph(graph.value(), options);
  ASSERT_TRUE(out.ok()) << out.error().message;
  std::map<std::string, int> steps; // no float detour: the kernel reads the INT8 inputs
  for (const auto &op : out.value().ops)
    ++steps[op.op];
  EXPECT_EQ(steps["QuantizeLinear"], 2);   // the network inputs
  EXPECT_EQ(steps["DequantizeLinear"], 1); // the network output

  std::vector<float> a(size_t(C) * H * W), bv(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = 2.1f * std::sin(0.29f * float(i)) + (k.is_signed ? 0.0f : 0.4f);
    bv[i] = 1.3f * std::cos(0.41f * float(i) + 1.0f);
  }
  const auto &prog = out.value().program;
  std::vector<std::vector<uint8_t>> args(prog.arg_count);
  for (const auto &t : prog.tensors)
    if (t.role == KBIN_ROLE_INPUT)
      args[t.arg_index] = test::float_bytes(t.name == "a" ? a : bv);
  auto check = [&](const std::vector<float> &y, const char *isa) {
    ASSERT_EQ(y.size(), k.concat ? 2 * a.size() : a.size());
    auto dq = [](int32_t q, float s, int32_t z) { return float(q - z) * s; };
    int mismatches = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      int32_t want;
      if (k.concat) {
        const bool first = i < a.size();
        const size_t j = first ? i : i - a.size();
        const float v = first ? dq(test::quantize(a[j], sa, za, k.is_signed), sa, za)
                              : dq(test::quantize(bv[j], sb, zb, k.is_signed), sb, zb);
        want = test::quantize(v, sy, zy, k.is_signed);
      } else {
        const float v = dq(test::quantize(a[i], sa, za, k.is_signed), sa, za) +
                        dq(test::quantize(bv[i], sb, zb, k.is_signed), sb, zb);
        want = test::quantize(std::max(v, 0.0f), sy, zy, k.is_signed);
      }
      const int32_t got = test::requantized(y[i], sy, zy);
      if (got != want && ++mismatches < 5)
        ADD_FAILURE() << isa << " element " << i << ": got " << got << " want " << want;
    }
    EXPECT_EQ(mismatches, 0) << isa;
  };
  // Every vector ISA of the host (the INT8 add has a row kernel per ISA): the same bytes.
  const std::string initial_isa = mcl_native_isa();
  for (const char *isa : {"generic", "avx2", "avx512"}) {
    if (mcl_native_set_isa(isa) != MCL_NATIVE_OK)
      continue;
    manycl::device::Device device(options.device);
    auto run = manycl::interp::run_kbin(device, prog, args);
    ASSERT_TRUE(run.ok()) << run.error().message;
    std::vector<float> y;
    for (const auto &t : prog.tensors)
      if (t.role == KBIN_ROLE_OUTPUT)
        y = test::bytes_floats(run.value().outputs[t.arg_index]);
    check(y, isa);
  }
  mcl_native_set_isa(initial_isa.c_str());
}

INSTANTIATE_TEST_SUITE_P(Cases, Int8Eltwise,
                         ::testing::Values(EltCase{false, false, 1}, EltCase{false, false, 5},
                                           EltCase{true, false, 2}, EltCase{false, true, 1},
                                           EltCase{false, true, 5}, EltCase{true, true, 2}),
                         [](const auto &info) { return ::testing::PrintToString(info.param); });

} // namespace
