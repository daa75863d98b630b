// The native library's cache of Winograd-transformed weights, through the ICD: it is keyed by
// the generation of a program's uploaded parameters, so a program loaded where a freed one's
// parameters were (same DDR offset, other weights) computes with its own weights, and
// sub-devices running networks at the same time share or separate entries correctly.
#include <CL/cl.h>

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../common/kann_queue.h"
#include "../common/manycl_platform.h"
#include "../kann/onnx_builder.h"
#include "kann/compile.h"
#include "kann/format.h"
#include "kann/onnx_import.h"
#include "kann/passes.h"
#include "kann/session.h"
#include "manycl/device/config.h"
#include "manycl/native/args.h"

namespace {

// Two 3x3 convolutions (48 -> 64 -> 40 channels, 20x20, padding 1): Winograd calls with
// several channel chunks and panels.
std::string conv_net_onnx(float weight_scale) {
  kann::test::OnnxBuilder b;
  b.input("image", {1, 48, 20, 20});
  b.weight("w1", {64, 48, 3, 3}, weight_scale);
  b.weight("b1", {64}, 0.05f);
  b.weight("w2", {40, 64, 3, 3}, weight_scale);
  b.weight("b2", {40}, 0.05f);
  auto &c1 = b.node("Conv", {"image", "w1", "b1"}, {"conv1"});
  kann::test::OnnxBuilder::ints(c1, "pads", {1, 1, 1, 1});
  b.node("Relu", {"conv1"}, {"relu1"});
  auto &c2 = b.node("Conv", {"relu1", "w2", "b2"}, {"out"});
  kann::test::OnnxBuilder::ints(c2, "pads", {1, 1, 1, 1});
  b.output("out");
  return b.bytes();
}

std::vector<uint8_t> compile_winograd(const std::string &onnx, uint32_t clusters) {
  auto graph = kann::import_onnx_bytes(onnx);
  EXPECT_TRUE(graph.ok()) << graph.error().message;
  EXPECT_TRUE(kann::passes::optimize(graph.value()).ok());
  kann::CompileOptions options;
  options.device = manycl::device::preset("mppa3").value();
  options.clusters = clusters;
  options.winograd = "all";
  auto out = kann::compile_graph(graph.value(), options);
  EXPECT_TRUE(out.ok()) << out.error().message;
  size_t winograd_calls = 0;
  for (const auto &stream : out.value().program.streams)
    for (const auto &record : stream) {
      mcl_conv_args conv;
      if (record.function_id == MCL_NATIVE_FN_CONV2D && record.decode(conv) &&
          (conv.flags & MCL_CONV_WINOGRAD))
        ++winograd_calls;
    }
  EXPECT_GE(winograd_calls, 2u) << "the test needs Winograd calls";
  auto bytes = kann::format::write_kbin(out.value().program);
  EXPECT_TRUE(bytes.ok());
  return bytes.value();
}

class WinogradWeightCache : public ::testing::Test {
protected:
  void SetUp() override {
    std::string why;
    platform = manycl_test::find_manycl_platform(&why);
    ASSERT_NE(platform, nullptr) << why;
    ASSERT_EQ(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ACCELERATOR, 1, &root, nullptr), CL_SUCCESS);
  }

  std::unique_ptr<manycl_test::KannQueue> queue_on(cl_device_id device, bool owns = false) {
    return std::make_unique<manycl_test::KannQueue>(device, owns);
  }

  cl_platform_id platform = nullptr;
  cl_device_id root = nullptr;
};

std::vector<float> test_input() {
  std::vector<float> input(48 * 20 * 20);
  for (size_t i = 0; i < input.size(); ++i)
    input[i] = std::sin(0.01f * float(i));
  return input;
}

TEST_F(WinogradWeightCache, ANewProgramAtAFreedProgramsPlaceUsesItsOwnWeights) {
  // Program B, then A, then B again, one at a time on the whole device: same shapes, same
  // parameter layout, so the same weights' offsets inside the blob; each upload usually lands
  // where the previous one's was freed. The key holds no address or content: the upload's
  // generation alone must keep A's transformed weights from B.
  const auto a = compile_winograd(conv_net_onnx(0.02f), 5);
  const auto b = compile_winograd(conv_net_onnx(0.03f), 5);
  ASSERT_EQ(a.size(), b.size());
  const auto input = test_input();
  std::vector<float> b_first, a_out;
  {
    auto q = queue_on(root);
    q->load(b);
    ASSERT_FALSE(HasFatalFailure());
    b_first = q->infer(input);
    EXPECT_EQ(q->infer(input), b_first) << "the second run (cached weights) differs";
  }
  {
    auto q = queue_on(root);
    q->load(a);
    ASSERT_FALSE(HasFatalFailure());
    a_out = q->infer(input);
    EXPECT_EQ(q->infer(input), a_out);
  }
  ASSERT_EQ(a_out.size(), 40u * 20 * 20);
  EXPECT_NE(a_out, b_first);
  auto q = queue_on(root);
  q->load(b);
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_EQ(q->infer(input), b_first);
  EXPECT_EQ(q->infer(input), b_first);
}

TEST_F(WinogradWeightCache, SubDevicesRunningAtOnceGetTheirOwnResults) {
  // One-cluster sub-devices, each with its own queue, run two networks at the same time
  // (A on even sub-devices, B on odd ones: both share parameters, hence cache entries, with
  // the other sub-devices of the same network) several times: every run gives what the
  // network gives alone.
  const auto a = compile_winograd(conv_net_onnx(0.02f), 1);
  const auto b = compile_winograd(conv_net_onnx(0.03f), 1);
  const auto input = test_input();
  cl_device_partition_property props[] = {CL_DEVICE_PARTITION_BY_AFFINITY_DOMAIN,
                                          CL_DEVICE_AFFINITY_DOMAIN_NUMA, 0};
  cl_uint made = 0;
  ASSERT_EQ(clCreateSubDevices(root, props, 0, nullptr, &made), CL_SUCCESS);
  ASSERT_GE(made, 2u);
  std::vector<cl_device_id> ids(made);
  ASSERT_EQ(clCreateSubDevices(root, props, made, ids.data(), nullptr), CL_SUCCESS);
  std::vector<std::unique_ptr<manycl_test::KannQueue>> queues;
  for (cl_uint k = 0; k < made; ++k) {
    queues.push_back(queue_on(ids[k], /*owns=*/true));
    queues.back()->load(k % 2 ? b : a);
    ASSERT_FALSE(HasFatalFailure());
  }
  // Each network alone first (its first run transforms the weights).
  const std::vector<float> expected[2] = {queues[0]->infer(input), queues[1]->infer(input)};
  ASSERT_EQ(expected[0].size(), 40u * 20 * 20);
  ASSERT_NE(expected[0], expected[1]);

  std::vector<int> mismatches(made, 0);
  std::vector<std::thread> threads;
  for (cl_uint k = 0; k < made; ++k)
    threads.emplace_back([&, k] {
      for (int run = 0; run < 4; ++run)
        if (queues[k]->infer(input) != expected[k % 2])
          ++mismatches[k];
    });
  for (auto &t : threads)
    t.join();
  for (cl_uint k = 0; k < made; ++k)
    EXPECT_EQ(mismatches[k], 0) << "sub-device " << k;
}

} // namespace
