// A kann session on its own context and queue of one ManyCL device (the whole device or a
// sub-device), as `kann run` uses them, for the tests that run networks through the ICD loader.
#pragma once

#include <CL/cl.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "kann/session.h"

namespace manycl_test {

struct KannQueue {
  cl_device_id device = nullptr;
  bool owns_device = false; // a sub-device this queue releases
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;
  std::unique_ptr<kann::Session> session;

  KannQueue(cl_device_id d, bool owns) : device(d), owns_device(owns) {
    cl_int err;
    context = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &err);
    EXPECT_EQ(err, CL_SUCCESS);
    queue = clCreateCommandQueue(context, device, 0, &err);
    EXPECT_EQ(err, CL_SUCCESS);
  }
  ~KannQueue() {
    session.reset();
    if (queue)
      clReleaseCommandQueue(queue);
    if (context)
      clReleaseContext(context);
    if (owns_device && device)
      clReleaseDevice(device);
  }
  KannQueue(const KannQueue &) = delete;
  KannQueue &operator=(const KannQueue &) = delete;

  // Loads `kbin` as this queue's session (a test failure when it cannot).
  void load(const std::vector<uint8_t> &kbin) {
    auto s = kann::Session::load(context, device, kbin);
    ASSERT_TRUE(s.ok()) << s.error().message;
    session = std::move(s.value());
  }

  // One inference of the session's first input and output; empty (and a test failure) when a
  // step fails.
  std::vector<float> infer(const std::vector<float> &input) {
    EXPECT_TRUE(session->write_input(queue, 0, input).ok());
    auto event = session->run(queue);
    EXPECT_TRUE(event.ok()) << (event.ok() ? "" : event.error().message);
    if (!event.ok())
      return {};
    auto out = session->read_output(queue, 0, event.value());
    clReleaseEvent(event.value());
    EXPECT_TRUE(out.ok());
    return out.ok() ? out.value() : std::vector<float>{};
  }
};

} // namespace manycl_test
