// Residual Adds fused into the convolution epilogue (passes::fuse_residual_adds,
// MCL_CONV_RESIDUAL) through the ICD loader: ResNet-style blocks compiled by kann for 1, 2 and
// 5 clusters of mppa3 in every schedule, fused and unfused (CompileOptions::fuse_residual_adds),
// run with kann::Session on a (sub-)device of that many clusters.
//   - FP32: fused and unfused outputs are bit-identical (the epilogue adds in the Add's order),
//     and within 1e-4 of a reference computed here; FP16 within the documented 2e-2 + 2e-2 |ref|.
//   - The fused binaries hold no element-wise record, the unfused ones one per Add.
#include <CL/cl.h>

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "../common/manycl_platform.h"
#include "kann/compile.h"
#include "kann/format.h"
#include "kann/onnx_import.h"
#include "kann/passes.h"
#include "kann/session.h"
#include "manycl/device/config.h"
#include "onnx_builder.h"
#include "reference.h"

namespace {

using kann::test::OnnxBuilder;
namespace ref = kann::test::ref;

constexpr int kC = 16, kH = 14, kW = 12;

void conv_node(OnnxBuilder &b, const std::string &x, const std::string &w, const std::string &bias,
               const std::string &y, int k, int stride) {
  auto &n = b.node("Conv", {x, w, bias}, {y});
  OnnxBuilder::ints(n, "kernel_shape", {k, k});
  OnnxBuilder::ints(n, "strides", {stride, stride});
  const int p = k / 2;
  OnnxBuilder::ints(n, "pads", {p, p, p, p});
}

// Three blocks: an identity shortcut (Add(conv, x) then Relu); a downsampling one whose 1x1
// shortcut convolution comes first and whose main path ends in a convolution with its own
// Relu (only the shortcut can take the Add, and the fused node moves to the Add's place);
// an Add with the convolution as second operand and no activation.
struct Model {
  std::string onnx;
  std::vector<float> x;
  std::vector<float> want;
};

Model resnet_blocks() {
  OnnxBuilder b;
  b.input("x", {1, kC, kH, kW});
  auto w1 = b.weight("w1", {kC, kC, 3, 3}, 0.15f), b1 = b.weight("b1", {kC}, 0.1f);
  auto w2 = b.weight("w2", {kC, kC, 3, 3}, 0.15f), b2 = b.weight("b2", {kC}, 0.1f);
  auto wd = b.weight("wd", {2 * kC, kC, 1, 1}, 0.3f), bd = b.weight("bd", {2 * kC}, 0.1f);
  auto w3 = b.weight("w3", {2 * kC, kC, 3, 3}, 0.15f), b3 = b.weight("b3", {2 * kC}, 0.1f);
  auto w4 = b.weight("w4", {2 * kC, 2 * kC, 3, 3}, 0.1f), b4 = b.weight("b4", {2 * kC}, 0.1f);
  auto w5 = b.weight("w5", {2 * kC, 2 * kC, 1, 1}, 0.2f), b5 = b.weight("b5", {2 * kC}, 0.1f);
  conv_node(b, "x", "w1", "b1", "c1", 3, 1);
  b.node("Relu", {"c1"}, {"r1"});
  conv_node(b, "r1", "w2", "b2", "c2", 3, 1);
  b.node("Add", {"c2", "x"}, {"s1"});
  b.node("Relu", {"s1"}, {"y1"});
  conv_node(b, "y1", "wd", "bd", "d", 1, 2);
  conv_node(b, "y1", "w3", "b3", "c3", 3, 2);
  b.node("Relu", {"c3"}, {"r3"});
  conv_node(b, "r3", "w4", "b4", "c4", 3, 1);
  b.node("Relu", {"c4"}, {"r4"});
  b.node("Add", {"r4", "d"}, {"s2"});
  b.node("Relu", {"s2"}, {"y2"});
  conv_node(b, "y2", "w5", "b5", "c5", 1, 1);
  b.node("Add", {"y2", "c5"}, {"y"});
  b.output("y");

  Model m;
  m.onnx = b.bytes();
  ref::T x = ref::make(kC, kH, kW);
  for (size_t i = 0; i < x.v.size(); ++i)
    x.v[i] = std::sin(0.37f * float(i)) * 1.5f;
  m.x = x.v;
  const ref::T y1 = ref::relu(
      ref::add(ref::conv(ref::relu(ref::conv(x, w1, b1, kC, 3, 1, 1)), w2, b2, kC, 3, 1, 1), x));
  const ref::T d = ref::conv(y1, wd, bd, 2 * kC, 1, 2, 0);
  const ref::T r3 = ref::relu(ref::conv(y1, w3, b3, 2 * kC, 3, 2, 1));
  const ref::T r4 = ref::relu(ref::conv(r3, w4, b4, 2 * kC, 3, 1, 1));
  const ref::T y2 = ref::relu(ref::add(r4, d));
  m.want = ref::add(y2, ref::conv(y2, w5, b5, 2 * kC, 1, 1, 0)).v;
  return m;
}

struct Compiled {
  std::vector<uint8_t> kbin;
  size_t eltwise_records = 0;
};

Compiled compile(const std::string &onnx, unsigned clusters, const std::string &precision,
                 const std::string &schedule, bool fuse) {
  Compiled c;
  auto graph = kann::import_onnx_bytes(onnx);
  EXPECT_TRUE(graph.ok());
  if (!graph.ok())
    return c;
  EXPECT_TRUE(kann::passes::optimize(graph.value()).ok());
  kann::CompileOptions options;
  options.device = manycl::device::preset("mppa3").value();
  options.clusters = clusters;
  options.precision = precision;
  options.schedule = schedule;
  options.fuse_residual_adds = fuse;
  auto out = kann::compile_graph(graph.value(), options);
  EXPECT_TRUE(out.ok()) << (out.ok() ? "" : out.error().message);
  if (!out.ok())
    return c;
  for (const auto &stream : out.value().program.streams)
    for (const auto &r : stream)
      c.eltwise_records += r.function_id == MCL_NATIVE_FN_ELTWISE;
  auto bytes = kann::format::write_kbin(out.value().program);
  EXPECT_TRUE(bytes.ok());
  if (bytes.ok())
    c.kbin = bytes.value();
  return c;
}

class ResidualIcd : public ::testing::Test {
protected:
  void SetUp() override {
    std::string why;
    cl_platform_id platform = manycl_test::find_manycl_platform(&why);
    ASSERT_NE(platform, nullptr) << why;
    ASSERT_EQ(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ACCELERATOR, 1, &root_, nullptr), CL_SUCCESS);
    for (cl_uint count : {1u, 2u}) {
      cl_device_partition_property by_counts[] = {CL_DEVICE_PARTITION_BY_COUNTS,
                                                  cl_device_partition_property(count),
                                                  CL_DEVICE_PARTITION_BY_COUNTS_LIST_END, 0};
      cl_device_id sub = nullptr;
      ASSERT_EQ(clCreateSubDevices(root_, by_counts, 1, &sub, nullptr), CL_SUCCESS);
      subs_.push_back(sub);
    }
    std::vector<cl_device_id> all = {root_, subs_[0], subs_[1]};
    cl_int err = CL_SUCCESS;
    context_ = clCreateContext(nullptr, cl_uint(all.size()), all.data(), nullptr, nullptr, &err);
    ASSERT_EQ(err, CL_SUCCESS);
  }
  void TearDown() override {
    if (context_)
      clReleaseContext(context_);
    for (cl_device_id d : subs_)
      clReleaseDevice(d);
  }
  cl_device_id device_for(unsigned clusters) const {
    return clusters == 1 ? subs_[0] : clusters == 2 ? subs_[1] : root_;
  }

  std::vector<float> run(unsigned clusters, const std::vector<uint8_t> &kbin,
                         const std::vector<float> &x) {
    cl_device_id device = device_for(clusters);
    auto session = kann::Session::load(context_, device, kbin);
    EXPECT_TRUE(session.ok()) << (session.ok() ? "" : session.error().message);
    if (!session.ok())
      return {};
    cl_int err = CL_SUCCESS;
    cl_command_queue queue = clCreateCommandQueueWithProperties(context_, device, nullptr, &err);
    EXPECT_EQ(err, CL_SUCCESS);
    std::vector<float> y;
    EXPECT_TRUE(session.value()->write_input(queue, 0, x).ok());
    auto event = session.value()->run(queue);
    EXPECT_TRUE(event.ok());
    if (event.ok()) {
      auto out = session.value()->read_output(queue, 0, event.value());
      EXPECT_TRUE(out.ok());
      if (out.ok())
        y = out.value();
      clReleaseEvent(event.value());
    }
    clReleaseCommandQueue(queue);
    return y;
  }

  cl_device_id root_ = nullptr;
  std::vector<cl_device_id> subs_;
  cl_context context_ = nullptr;
};

TEST_F(ResidualIcd, Fp32FusedEqualsUnfusedInEverySchedule) {
  const Model m = resnet_blocks();
  for (unsigned clusters : {1u, 2u, 5u})
    for (const char *schedule : {"layer", "pipeline", "group", "auto"}) {
      SCOPED_TRACE(std::string(schedule) + " x" + std::to_string(clusters));
      const Compiled fused = compile(m.onnx, clusters, "fp32", schedule, true);
      const Compiled plain = compile(m.onnx, clusters, "fp32", schedule, false);
      EXPECT_EQ(fused.eltwise_records, 0u);
      EXPECT_GE(plain.eltwise_records, 3u);
      const std::vector<float> got = run(clusters, fused.kbin, m.x);
      const std::vector<float> unfused = run(clusters, plain.kbin, m.x);
      ASSERT_EQ(got.size(), m.want.size());
      ASSERT_EQ(unfused.size(), m.want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i], unfused[i]) << "element " << i;
        ASSERT_NEAR(got[i], m.want[i], 1e-4 + 1e-4 * std::fabs(m.want[i])) << "element " << i;
      }
    }
}

TEST_F(ResidualIcd, Fp16FusedWithinTolerance) {
  const Model m = resnet_blocks();
  for (unsigned clusters : {1u, 2u, 5u})
    for (const char *schedule : {"layer", "group"}) {
      SCOPED_TRACE(std::string(schedule) + " x" + std::to_string(clusters));
      const Compiled fused = compile(m.onnx, clusters, "fp16", schedule, true);
      EXPECT_EQ(fused.eltwise_records, 0u);
      const std::vector<float> got = run(clusters, fused.kbin, m.x);
      ASSERT_EQ(got.size(), m.want.size());
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], m.want[i], 2e-2 + 2e-2 * std::fabs(m.want[i])) << "element " << i;
    }
}

} // namespace
