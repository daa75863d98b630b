// One network on every sub-device of a device holds its parameters in the device DDR once:
// on an mppa3 with 64 MiB of DDR, a network with 21 MB of parameters loads on all five
// one-cluster sub-devices at once (five copies would need 105 MB), every sub-device gives the
// same outputs, and the parameters are freed with the last program that uses them.
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

namespace {

// A 1x1 convolution from 2048 to 2560 channels on a 4x4 image: 5.2 M weights, 21 MB in FP32.
std::string wide_conv_onnx(float weight_scale) {
  kann::test::OnnxBuilder b;
  b.input("image", {1, 2048, 4, 4});
  b.weight("w", {2560, 2048, 1, 1}, weight_scale);
  b.weight("bias", {2560}, 0.05f);
  b.node("Conv", {"image", "w", "bias"}, {"conv"});
  b.node("Relu", {"conv"}, {"out"});
  b.output("out");
  return b.bytes();
}

std::vector<uint8_t> compile_one_cluster(const std::string &onnx) {
  auto graph = kann::import_onnx_bytes(onnx);
  EXPECT_TRUE(graph.ok()) << graph.error().message;
  EXPECT_TRUE(kann::passes::optimize(graph.value()).ok());
  kann::CompileOptions options;
  options.device = manycl::device::preset("mppa3").value();
  options.clusters = 1;
  auto out = kann::compile_graph(graph.value(), options);
  EXPECT_TRUE(out.ok()) << out.error().message;
  auto bytes = kann::format::write_kbin(out.value().program);
  EXPECT_TRUE(bytes.ok());
  return bytes.value();
}

class SharedParams : public ::testing::Test {
protected:
  void SetUp() override {
    std::string why;
    platform = manycl_test::find_manycl_platform(&why);
    ASSERT_NE(platform, nullptr) << why;
    ASSERT_EQ(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ACCELERATOR, 1, &root, nullptr), CL_SUCCESS);
    cl_ulong ddr = 0;
    clGetDeviceInfo(root, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof ddr, &ddr, nullptr);
    ASSERT_EQ(ddr, 64ull << 20) << "run with MANYCL_DEVICES naming mppa3_64mib_ddr.json";
  }

  // One-cluster sub-devices, each with its own context and queue (as `kann run --subdevices`).
  std::vector<std::unique_ptr<manycl_test::KannQueue>> sub_devices() {
    cl_device_partition_property props[] = {CL_DEVICE_PARTITION_BY_AFFINITY_DOMAIN,
                                            CL_DEVICE_AFFINITY_DOMAIN_NUMA, 0};
    cl_uint made = 0;
    EXPECT_EQ(clCreateSubDevices(root, props, 0, nullptr, &made), CL_SUCCESS);
    std::vector<cl_device_id> ids(made);
    EXPECT_EQ(clCreateSubDevices(root, props, made, ids.data(), nullptr), CL_SUCCESS);
    std::vector<std::unique_ptr<manycl_test::KannQueue>> subs;
    for (cl_device_id id : ids)
      subs.push_back(std::make_unique<manycl_test::KannQueue>(id, /*owns=*/true));
    return subs;
  }

  cl_platform_id platform = nullptr;
  cl_device_id root = nullptr;
};

std::vector<float> test_input() {
  std::vector<float> input(2048 * 4 * 4);
  for (size_t i = 0; i < input.size(); ++i)
    input[i] = std::sin(0.01f * float(i));
  return input;
}

TEST_F(SharedParams, OneNetworkOnEverySubDeviceHoldsItsParametersOnce) {
  const auto kbin = compile_one_cluster(wide_conv_onnx(0.02f));
  auto subs = sub_devices();
  ASSERT_EQ(subs.size(), 5u);
  for (auto &sub : subs) {
    sub->load(kbin);
    ASSERT_FALSE(HasFatalFailure());
  }
  const auto input = test_input();
  std::vector<std::vector<float>> outputs(subs.size());
  std::vector<std::thread> threads;
  for (size_t k = 0; k < subs.size(); ++k)
    threads.emplace_back([&, k] { outputs[k] = subs[k]->infer(input); });
  for (auto &t : threads)
    t.join();
  ASSERT_EQ(outputs[0].size(), 2560u * 16);
  for (size_t k = 1; k < subs.size(); ++k)
    EXPECT_EQ(outputs[k], outputs[0]) << "sub-device " << k;
}

TEST_F(SharedParams, OtherParametersGetTheirOwnCopyAndTheLastUserFreesIt) {
  // Two networks of the same shape and size but other weights are never merged: the second
  // needs its own 21 MB, and gives other outputs.
  const auto first = compile_one_cluster(wide_conv_onnx(0.02f));
  const auto second = compile_one_cluster(wide_conv_onnx(0.03f));
  ASSERT_EQ(first.size(), second.size());
  const auto input = test_input();
  std::vector<float> before;
  for (int round = 0; round < 3; ++round) {
    // Each round loads both on two sub-devices and unloads them: if a program's parameters
    // were not freed with their last user, the third round would not fit in 64 MiB.
    auto subs = sub_devices();
    ASSERT_GE(subs.size(), 2u);
    auto a = kann::Session::load(subs[0]->context, subs[0]->device, first);
    ASSERT_TRUE(a.ok()) << "round " << round << ": " << a.error().message;
    subs[0]->session = std::move(a.value());
    auto b = kann::Session::load(subs[1]->context, subs[1]->device, second);
    ASSERT_TRUE(b.ok()) << "round " << round << ": " << b.error().message;
    subs[1]->session = std::move(b.value());
    const auto out_a = subs[0]->infer(input), out_b = subs[1]->infer(input);
    ASSERT_EQ(out_a.size(), out_b.size());
    EXPECT_NE(out_a, out_b);
    if (round == 0)
      before = out_a;
    EXPECT_EQ(out_a, before) << "round " << round;
  }
}

} // namespace
