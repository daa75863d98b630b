// Images, samplers, programs and kernels: the device has no image support, so every image
// and sampler entry point exists and returns the error the specification names. Program
// tests follow CL_DEVICE_COMPILER_AVAILABLE (kernels themselves are tested in tests/compiler).
#include "rt_common.h"

using namespace rt_test;

namespace {

using ImageTest = RuntimeTest;

TEST_F(ImageTest, CreationFailsWithoutImageSupport) {
  cl_image_format fmt{CL_RGBA, CL_UNORM_INT8};
  cl_image_desc desc{};
  desc.image_type = CL_MEM_OBJECT_IMAGE2D;
  desc.image_width = 16;
  desc.image_height = 16;
  cl_int err = CL_SUCCESS;
  EXPECT_EQ(nullptr, clCreateImage(context, CL_MEM_READ_WRITE, &fmt, &desc, nullptr, &err));
  EXPECT_EQ(CL_INVALID_OPERATION, err);
  err = CL_SUCCESS;
  EXPECT_EQ(nullptr, clCreateImage2D(context, CL_MEM_READ_WRITE, &fmt, 16, 16, 0, nullptr, &err));
  EXPECT_EQ(CL_INVALID_OPERATION, err);
  err = CL_SUCCESS;
  EXPECT_EQ(nullptr, clCreateImage3D(context, CL_MEM_READ_WRITE, &fmt, 16, 16, 4, 0, 0, nullptr, &err));
  EXPECT_EQ(CL_INVALID_OPERATION, err);
  EXPECT_EQ(nullptr, clCreateImage(wrong<cl_context>(queue), CL_MEM_READ_WRITE, &fmt, &desc, nullptr, &err));
  EXPECT_EQ(CL_INVALID_CONTEXT, err);
  cl_uint n = 99;
  CL_OK(clGetSupportedImageFormats(context, CL_MEM_READ_WRITE, CL_MEM_OBJECT_IMAGE2D, 0, nullptr, &n));
  EXPECT_EQ(0u, n);
  EXPECT_EQ(CL_INVALID_VALUE, clGetSupportedImageFormats(context, CL_MEM_READ_WRITE, CL_MEM_OBJECT_BUFFER, 0, nullptr, &n));
  EXPECT_EQ(CL_INVALID_CONTEXT, clGetSupportedImageFormats(wrong<cl_context>(queue), CL_MEM_READ_WRITE, CL_MEM_OBJECT_IMAGE2D, 0, nullptr, &n));
}

TEST_F(ImageTest, ImageCommandsRejectBuffers) {
  cl_mem buf = make_buffer(1024);
  size_t origin[3] = {0, 0, 0}, region[3] = {1, 1, 1};
  char host[64];
  size_t info;
  EXPECT_EQ(CL_INVALID_MEM_OBJECT, clGetImageInfo(buf, CL_IMAGE_WIDTH, sizeof(info), &info, nullptr));
  EXPECT_EQ(CL_INVALID_MEM_OBJECT, clEnqueueReadImage(queue, buf, CL_TRUE, origin, region, 0, 0, host, 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_MEM_OBJECT, clEnqueueWriteImage(queue, buf, CL_TRUE, origin, region, 0, 0, host, 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_MEM_OBJECT, clEnqueueCopyImage(queue, buf, buf, origin, origin, region, 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_MEM_OBJECT, clEnqueueCopyImageToBuffer(queue, buf, buf, origin, region, 0, 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_MEM_OBJECT, clEnqueueCopyBufferToImage(queue, buf, buf, 0, origin, region, 0, nullptr, nullptr));
  float color[4] = {};
  EXPECT_EQ(CL_INVALID_MEM_OBJECT, clEnqueueFillImage(queue, buf, color, origin, region, 0, nullptr, nullptr));
  cl_int err = CL_SUCCESS;
  size_t pitch;
  EXPECT_EQ(nullptr, clEnqueueMapImage(queue, buf, CL_TRUE, CL_MAP_READ, origin, region, &pitch, &pitch, 0, nullptr, nullptr, &err));
  EXPECT_EQ(CL_INVALID_MEM_OBJECT, err);
  EXPECT_EQ(CL_INVALID_COMMAND_QUEUE, clEnqueueReadImage(wrong<cl_command_queue>(buf), buf, CL_TRUE, origin, region, 0, 0, host, 0, nullptr, nullptr));
  clReleaseMemObject(buf);
}

TEST_F(ImageTest, Samplers) {
  cl_int err = CL_SUCCESS;
  EXPECT_EQ(nullptr, clCreateSampler(context, CL_FALSE, CL_ADDRESS_CLAMP, CL_FILTER_NEAREST, &err));
  EXPECT_EQ(CL_INVALID_OPERATION, err);
  EXPECT_EQ(nullptr, clCreateSampler(wrong<cl_context>(queue), CL_FALSE, CL_ADDRESS_CLAMP, CL_FILTER_NEAREST, &err));
  EXPECT_EQ(CL_INVALID_CONTEXT, err);
  // Handles of other types are not samplers.
  EXPECT_EQ(CL_INVALID_SAMPLER, clRetainSampler(wrong<cl_sampler>(context)));
  EXPECT_EQ(CL_INVALID_SAMPLER, clReleaseSampler(wrong<cl_sampler>(context)));
  cl_uint v;
  EXPECT_EQ(CL_INVALID_SAMPLER, clGetSamplerInfo(wrong<cl_sampler>(context), CL_SAMPLER_REFERENCE_COUNT, sizeof(v), &v, nullptr));
}

using ProgramTest = RuntimeTest;

void CL_CALLBACK build_notify(cl_program, void *data) { *static_cast<int *>(data) += 1; }

TEST_F(ProgramTest, SourceProgramBuild) {
  const char *parts[] = {"kernel void k(global int *p) ", "{ p[0] = 1; }"};
  cl_int err;
  cl_program p = clCreateProgramWithSource(context, 2, parts, nullptr, &err);
  ASSERT_EQ(CL_SUCCESS, err);
  size_t size = 0;
  CL_OK(clGetProgramInfo(p, CL_PROGRAM_SOURCE, 0, nullptr, &size));
  std::string src(size, '\0');
  CL_OK(clGetProgramInfo(p, CL_PROGRAM_SOURCE, size, src.data(), nullptr));
  EXPECT_STREQ("kernel void k(global int *p) { p[0] = 1; }", src.c_str());
  cl_context c = nullptr;
  CL_OK(clGetProgramInfo(p, CL_PROGRAM_CONTEXT, sizeof(c), &c, nullptr));
  EXPECT_EQ(context, c);
  cl_uint n = 0;
  CL_OK(clGetProgramInfo(p, CL_PROGRAM_NUM_DEVICES, sizeof(n), &n, nullptr));
  EXPECT_EQ(1u, n);
  cl_device_id d = nullptr;
  CL_OK(clGetProgramInfo(p, CL_PROGRAM_DEVICES, sizeof(d), &d, nullptr));
  EXPECT_EQ(device, d);
  CL_OK(clRetainProgram(p));
  CL_OK(clGetProgramInfo(p, CL_PROGRAM_REFERENCE_COUNT, sizeof(n), &n, nullptr));
  EXPECT_EQ(2u, n);
  CL_OK(clReleaseProgram(p));

  int notified = 0;
  const bool compiler = device_info<cl_bool>(device, CL_DEVICE_COMPILER_AVAILABLE);
  cl_build_status status = CL_BUILD_NONE;
  EXPECT_EQ(CL_INVALID_VALUE, clBuildProgram(p, 0, nullptr, nullptr, nullptr, &notified));
  EXPECT_EQ(CL_INVALID_VALUE, clBuildProgram(p, 1, nullptr, nullptr, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_DEVICE, clBuildProgram(p, 1, reinterpret_cast<cl_device_id *>(&context), nullptr, nullptr, nullptr));
  // Before a successful build there is no executable.
  EXPECT_EQ(nullptr, clCreateKernel(p, "k", &err));
  EXPECT_EQ(CL_INVALID_PROGRAM_EXECUTABLE, err);
  cl_kernel k;
  EXPECT_EQ(CL_INVALID_PROGRAM_EXECUTABLE, clCreateKernelsInProgram(p, 1, &k, &n));
  if (!compiler) {
    EXPECT_EQ(CL_COMPILER_NOT_AVAILABLE, clBuildProgram(p, 1, &device, "-cl-std=CL1.2", build_notify, &notified));
    EXPECT_EQ(1, notified);
    CL_OK(clGetProgramBuildInfo(p, device, CL_PROGRAM_BUILD_STATUS, sizeof(status), &status, nullptr));
    EXPECT_EQ(CL_BUILD_ERROR, status);
    CL_OK(clGetProgramBuildInfo(p, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size));
    EXPECT_GT(size, 1u);
    EXPECT_EQ(CL_COMPILER_NOT_AVAILABLE, clCompileProgram(p, 0, nullptr, nullptr, 0, nullptr, nullptr, nullptr, nullptr));
    EXPECT_EQ(nullptr, clLinkProgram(context, 0, nullptr, nullptr, 1, &p, nullptr, nullptr, &err));
    EXPECT_EQ(CL_LINKER_NOT_AVAILABLE, err);
  } else {
    CL_OK(clBuildProgram(p, 1, &device, "-cl-std=CL1.2", build_notify, &notified));
    EXPECT_EQ(1, notified);
    CL_OK(clGetProgramBuildInfo(p, device, CL_PROGRAM_BUILD_STATUS, sizeof(status), &status, nullptr));
    EXPECT_EQ(CL_BUILD_SUCCESS, status);
    cl_kernel kernel = clCreateKernel(p, "k", &err);
    ASSERT_EQ(CL_SUCCESS, err);
    EXPECT_EQ(CL_INVALID_KERNEL_NAME, clCreateKernel(p, "no_such_kernel", &err) ? CL_SUCCESS : err);
    CL_OK(clReleaseKernel(kernel));
    // A source that does not compile: CL_BUILD_PROGRAM_FAILURE with a log.
    const char *bad = "kernel void broken( { }";
    cl_program q = clCreateProgramWithSource(context, 1, &bad, nullptr, &err);
    ASSERT_EQ(CL_SUCCESS, err);
    EXPECT_EQ(CL_BUILD_PROGRAM_FAILURE, clBuildProgram(q, 0, nullptr, nullptr, nullptr, nullptr));
    CL_OK(clGetProgramBuildInfo(q, device, CL_PROGRAM_BUILD_STATUS, sizeof(status), &status, nullptr));
    EXPECT_EQ(CL_BUILD_ERROR, status);
    CL_OK(clGetProgramBuildInfo(q, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size));
    EXPECT_GT(size, 1u);
    CL_OK(clReleaseProgram(q));
  }
  CL_OK(clUnloadPlatformCompiler(platform));
  CL_OK(clUnloadCompiler());
  CL_OK(clReleaseProgram(p));
}

TEST_F(ProgramTest, Errors) {
  cl_int err;
  const char *src = "kernel void k() {}";
  EXPECT_EQ(nullptr, clCreateProgramWithSource(context, 0, &src, nullptr, &err));
  EXPECT_EQ(CL_INVALID_VALUE, err);
  const char *null_src[] = {nullptr};
  EXPECT_EQ(nullptr, clCreateProgramWithSource(context, 1, null_src, nullptr, &err));
  EXPECT_EQ(CL_INVALID_VALUE, err);
  EXPECT_EQ(nullptr, clCreateProgramWithSource(wrong<cl_context>(queue), 1, &src, nullptr, &err));
  EXPECT_EQ(CL_INVALID_CONTEXT, err);
  const unsigned char junk[] = {1, 2, 3, 4};
  const unsigned char *bins[] = {junk};
  size_t lens[] = {sizeof(junk)};
  cl_int status = CL_SUCCESS;
  EXPECT_EQ(nullptr, clCreateProgramWithBinary(context, 1, &device, lens, bins, &status, &err));
  EXPECT_EQ(CL_INVALID_BINARY, err);
  EXPECT_EQ(CL_INVALID_BINARY, status);
  size_t zero[] = {0};
  EXPECT_EQ(nullptr, clCreateProgramWithBinary(context, 1, &device, zero, bins, &status, &err));
  EXPECT_EQ(CL_INVALID_VALUE, err);
  EXPECT_EQ(nullptr, clCreateProgramWithBuiltInKernels(context, 1, &device, "nothing", &err));
  EXPECT_EQ(CL_INVALID_VALUE, err);
  EXPECT_EQ(CL_INVALID_PROGRAM, clRetainProgram(wrong<cl_program>(context)));
  EXPECT_EQ(CL_INVALID_PROGRAM, clReleaseProgram(wrong<cl_program>(context)));
  EXPECT_EQ(CL_INVALID_PROGRAM, clBuildProgram(wrong<cl_program>(context), 0, nullptr, nullptr, nullptr, nullptr));
  cl_uint v;
  EXPECT_EQ(CL_INVALID_PROGRAM, clGetProgramInfo(wrong<cl_program>(context), CL_PROGRAM_REFERENCE_COUNT, sizeof(v), &v, nullptr));
  EXPECT_EQ(nullptr, clCreateKernel(wrong<cl_program>(context), "k", &err));
  EXPECT_EQ(CL_INVALID_PROGRAM, err);
}

TEST_F(ProgramTest, KernelEntryPointsRejectNonKernels) {
  cl_kernel k = wrong<cl_kernel>(context);
  cl_uint v = 0;
  size_t s = 0;
  EXPECT_EQ(CL_INVALID_KERNEL, clRetainKernel(k));
  EXPECT_EQ(CL_INVALID_KERNEL, clReleaseKernel(k));
  EXPECT_EQ(CL_INVALID_KERNEL, clSetKernelArg(k, 0, sizeof(v), &v));
  EXPECT_EQ(CL_INVALID_KERNEL, clGetKernelInfo(k, CL_KERNEL_NUM_ARGS, sizeof(v), &v, nullptr));
  EXPECT_EQ(CL_INVALID_KERNEL, clGetKernelArgInfo(k, 0, CL_KERNEL_ARG_NAME, 0, nullptr, &s));
  EXPECT_EQ(CL_INVALID_KERNEL, clGetKernelWorkGroupInfo(k, device, CL_KERNEL_WORK_GROUP_SIZE, sizeof(s), &s, nullptr));
  size_t gws = 1;
  EXPECT_EQ(CL_INVALID_KERNEL, clEnqueueNDRangeKernel(queue, k, 1, nullptr, &gws, nullptr, 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_KERNEL, clEnqueueTask(queue, k, 0, nullptr, nullptr));
}

} // namespace
