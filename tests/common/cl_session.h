// A context and queue on the ManyCL device, found through the ICD loader, for test programs
// that run OpenCL C kernels as an application does.
#pragma once

#include <CL/cl.h>
#include <gtest/gtest.h>

#include <string>

#include "manycl_platform.h"

namespace manycl_test {

struct ClSession {
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;

  // On `d`, or the platform's first accelerator; `platform` stays nullptr without ManyCL.
  explicit ClSession(cl_device_id d = nullptr, cl_command_queue_properties properties = 0) {
    platform = find_manycl_platform();
    if (!platform)
      return;
    device = d;
    if (!device)
      clGetDeviceIDs(platform, CL_DEVICE_TYPE_ACCELERATOR, 1, &device, nullptr);
    cl_int err;
    context = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &err);
    queue = clCreateCommandQueue(context, device, properties, &err);
  }
  ~ClSession() {
    if (queue)
      clReleaseCommandQueue(queue);
    if (context)
      clReleaseContext(context);
  }
  ClSession(const ClSession &) = delete;
  ClSession &operator=(const ClSession &) = delete;

  // nullptr (and a test failure with the build log) when the build fails.
  cl_program build(const std::string &source, const char *options = "") {
    const char *text = source.c_str();
    cl_int err;
    cl_program p = clCreateProgramWithSource(context, 1, &text, nullptr, &err);
    EXPECT_EQ(err, CL_SUCCESS);
    if (clBuildProgram(p, 1, &device, options, nullptr, nullptr) != CL_SUCCESS) {
      std::string log(16384, '\0');
      clGetProgramBuildInfo(p, device, CL_PROGRAM_BUILD_LOG, log.size(), log.data(), nullptr);
      ADD_FAILURE() << "build failed: " << log.c_str();
      clReleaseProgram(p);
      return nullptr;
    }
    return p;
  }
};

} // namespace manycl_test
