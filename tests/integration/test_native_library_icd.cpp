// mppa_native functions from a shared library registered with clAddNativeLibraryMCL (or
// MANYCL_NATIVE_PATH): resolved ones run, unresolved ones fail the build with a log line.
#include <CL/cl.h>
#include <CL/cl_ext_manycl.h>

#include <gtest/gtest.h>

#include "../common/manycl_platform.h"

#include <cstring>
#include <string>
#include <vector>

namespace {

const char *kUsesNative = R"(
float mcl_test_native_cube(float x) __attribute__((mppa_native));
kernel void cube(global float *data) {
  size_t i = get_global_id(0);
  data[i] = mcl_test_native_cube(data[i]);
}
)";

const char *kUsesMissing = R"(
float mcl_test_no_such_function(float x) __attribute__((mppa_native));
kernel void missing(global float *data) { data[0] = mcl_test_no_such_function(data[0]); }
)";

struct NativeLibraryIcd : ::testing::Test {
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;
  void SetUp() override {
    platform = manycl_test::find_manycl_platform();
    ASSERT_NE(platform, nullptr);
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_ACCELERATOR, 1, &device, nullptr);
    cl_int err;
    context = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &err);
    queue = clCreateCommandQueue(context, device, 0, &err);
  }
  void TearDown() override {
    clReleaseCommandQueue(queue);
    clReleaseContext(context);
  }
  cl_int build(const char *source, cl_program &program, std::string &log) {
    cl_int err;
    program = clCreateProgramWithSource(context, 1, &source, nullptr, &err);
    err = clBuildProgram(program, 1, &device, "", nullptr, nullptr);
    size_t size = 0;
    clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size);
    log.assign(size, '\0');
    clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
    return err;
  }
};

TEST_F(NativeLibraryIcd, RegisteredLibraryFunctionsRunInKernels) {
  auto add = reinterpret_cast<clAddNativeLibraryMCL_fn>(
      clGetExtensionFunctionAddressForPlatform(platform, "clAddNativeLibraryMCL"));
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add(platform, "/nonexistent/libnothing.so"), CL_INVALID_VALUE);
  EXPECT_EQ(add(platform, nullptr), CL_INVALID_VALUE);
  EXPECT_EQ(add(nullptr, NATIVE_LIBRARY), CL_INVALID_PLATFORM);
  ASSERT_EQ(add(platform, NATIVE_LIBRARY), CL_SUCCESS);

  cl_program program;
  std::string log;
  ASSERT_EQ(build(kUsesNative, program, log), CL_SUCCESS) << log;
  cl_int err;
  cl_kernel kernel = clCreateKernel(program, "cube", &err);
  ASSERT_EQ(err, CL_SUCCESS);
  std::vector<float> data{1, 2, 3, -4, 0.5f};
  cl_mem buffer = clCreateBuffer(context, CL_MEM_COPY_HOST_PTR, data.size() * 4, data.data(), &err);
  clSetKernelArg(kernel, 0, sizeof buffer, &buffer);
  size_t n = data.size();
  ASSERT_EQ(clEnqueueNDRangeKernel(queue, kernel, 1, nullptr, &n, nullptr, 0, nullptr, nullptr),
            CL_SUCCESS);
  std::vector<float> out(n);
  ASSERT_EQ(clEnqueueReadBuffer(queue, buffer, CL_TRUE, 0, n * 4, out.data(), 0, nullptr, nullptr),
            CL_SUCCESS);
  for (size_t i = 0; i < n; ++i)
    EXPECT_FLOAT_EQ(out[i], data[i] * data[i] * data[i]);
  clReleaseMemObject(buffer);
  clReleaseKernel(kernel);
  clReleaseProgram(program);
}

TEST_F(NativeLibraryIcd, UnresolvedNativeFunctionFailsTheBuildWithALogLine) {
  cl_program program;
  std::string log;
  EXPECT_EQ(build(kUsesMissing, program, log), CL_BUILD_PROGRAM_FAILURE);
  EXPECT_NE(log.find("mcl_test_no_such_function"), std::string::npos) << log;
  clReleaseProgram(program);
}

} // namespace
