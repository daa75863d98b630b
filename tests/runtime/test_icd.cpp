// The ICD contract: extension lookup, cl_khr_icd entry points (2.0 loader-managed dispatch
// included), the dispatch table in every object, every slot filled.
#include "rt_common.h"

#include <CL/cl_icd.h>

#include <cstddef>

using namespace rt_test;

namespace {

using IcdTest = RuntimeTest;

using GetPlatformIDsKHR = cl_int(CL_API_CALL *)(cl_uint, cl_platform_id *, cl_uint *);
using SetDispatchDataKHR = cl_int(CL_API_CALL *)(cl_platform_id, void *);
using GetFunctionAddressKHR = void *(CL_API_CALL *)(cl_platform_id, const char *);

const cl_icd_dispatch *dispatch_of(const void *object) { return *static_cast<const cl_icd_dispatch *const *>(object); }
void *dispatch_data_of(const void *object) { return static_cast<void *const *>(object)[1]; }

TEST_F(IcdTest, SuffixAndVendorExtension) {
  EXPECT_EQ("MCL", platform_string(platform, CL_PLATFORM_ICD_SUFFIX_KHR));
  auto fn = reinterpret_cast<clGetDeviceConfigMCL_fn>(clGetExtensionFunctionAddressForPlatform(platform, "clGetDeviceConfigMCL"));
  ASSERT_NE(nullptr, fn);
  // Through the loader's platform-less lookup too (it forwards names ending in the suffix).
  EXPECT_NE(nullptr, clGetExtensionFunctionAddress("clGetDeviceConfigMCL"));
  EXPECT_EQ(nullptr, clGetExtensionFunctionAddressForPlatform(platform, "clNoSuchFunctionMCL"));
  EXPECT_EQ(nullptr, clGetExtensionFunctionAddressForPlatform(platform, "clGetDeviceInfo")); // core: not an extension
  // The vendor function follows the clGet*Info size rules.
  size_t size = 0;
  CL_OK(fn(device, 0, nullptr, &size));
  ASSERT_GT(size, 2u);
  std::string json(size, '\0');
  size_t ret = 0;
  CL_OK(fn(device, size, json.data(), &ret));
  EXPECT_EQ(size, ret);
  EXPECT_EQ('\0', json.back());
  EXPECT_EQ('{', json[0]);
  EXPECT_EQ(CL_INVALID_VALUE, fn(device, size - 1, json.data(), nullptr));
  EXPECT_EQ(CL_INVALID_DEVICE, fn(wrong<cl_device_id>(context), 0, nullptr, &size));
  EXPECT_EQ(CL_INVALID_DEVICE, fn(nullptr, 0, nullptr, &size));
  EXPECT_NE(std::string::npos, json.find("\"cluster_ids\""));
}

TEST_F(IcdTest, KhrIcdFunctions) {
  auto get_ids = reinterpret_cast<GetPlatformIDsKHR>(clGetExtensionFunctionAddressForPlatform(platform, "clIcdGetPlatformIDsKHR"));
  auto set_data = reinterpret_cast<SetDispatchDataKHR>(
      clGetExtensionFunctionAddressForPlatform(platform, "clIcdSetPlatformDispatchDataKHR"));
  auto get_fn = reinterpret_cast<GetFunctionAddressKHR>(
      clGetExtensionFunctionAddressForPlatform(platform, "clIcdGetFunctionAddressForPlatformKHR"));
  ASSERT_NE(nullptr, get_ids);
  ASSERT_NE(nullptr, set_data);
  ASSERT_NE(nullptr, get_fn);

  cl_uint n = 0;
  CL_OK(get_ids(0, nullptr, &n));
  EXPECT_EQ(1u, n);
  cl_platform_id p = nullptr;
  CL_OK(get_ids(1, &p, nullptr));
  EXPECT_EQ(platform, p);
  EXPECT_EQ(CL_INVALID_VALUE, get_ids(0, &p, nullptr));

  const cl_icd_dispatch *table = dispatch_of(platform);
  EXPECT_EQ(reinterpret_cast<void *>(table->clGetDeviceInfo), get_fn(platform, "clGetDeviceInfo"));
  EXPECT_EQ(reinterpret_cast<void *>(table->clEnqueueNativeKernel), get_fn(platform, "clEnqueueNativeKernel"));
  EXPECT_NE(nullptr, get_fn(platform, "clGetDeviceConfigMCL"));
  EXPECT_EQ(nullptr, get_fn(platform, "clNoSuchFunction"));
  EXPECT_EQ(nullptr, get_fn(wrong<cl_platform_id>(device), "clGetDeviceInfo"));

  // Loader-managed dispatch: objects created after clIcdSetPlatformDispatchDataKHR carry the
  // loader's pointer right after the dispatch pointer.
  void *before = dispatch_data_of(platform);
  int marker = 0;
  CL_OK(set_data(platform, &marker));
  EXPECT_EQ(&marker, dispatch_data_of(platform));
  EXPECT_EQ(&marker, dispatch_data_of(device));
  cl_mem m = make_buffer(16);
  EXPECT_EQ(&marker, dispatch_data_of(m));
  clReleaseMemObject(m);
  CL_OK(set_data(platform, before));
  EXPECT_EQ(before, dispatch_data_of(platform));
  EXPECT_EQ(CL_INVALID_PLATFORM, set_data(wrong<cl_platform_id>(device), &marker));
}

TEST_F(IcdTest, EveryObjectStartsWithTheDispatchTable) {
  const cl_icd_dispatch *table = dispatch_of(platform);
  ASSERT_NE(nullptr, table);
  cl_mem m = make_buffer(16);
  cl_event u = user_event();
  cl_event marker;
  CL_OK(clEnqueueMarkerWithWaitList(queue, 0, nullptr, &marker));
  const char *src = "kernel void k() {}";
  cl_int err;
  cl_program prog = clCreateProgramWithSource(context, 1, &src, nullptr, &err);
  ASSERT_EQ(CL_SUCCESS, err);
  for (const void *obj : {static_cast<const void *>(device), static_cast<const void *>(context),
                          static_cast<const void *>(queue), static_cast<const void *>(m),
                          static_cast<const void *>(u), static_cast<const void *>(marker),
                          static_cast<const void *>(prog)})
    EXPECT_EQ(table, dispatch_of(obj));
  clSetUserEventStatus(u, CL_COMPLETE);
  clReleaseEvent(u);
  clReleaseEvent(marker);
  clReleaseProgram(prog);
  clReleaseMemObject(m);
}

TEST_F(IcdTest, EveryDispatchSlotIsFilled) {
  const cl_icd_dispatch *table = dispatch_of(platform);
  // The table handed to the loader is at least as large as the headers' cl_icd_dispatch: read
  // every slot of it.
  auto *slots = reinterpret_cast<void *const *>(table);
  const size_t count = sizeof(cl_icd_dispatch) / sizeof(void *);
  EXPECT_EQ(sizeof(cl_icd_dispatch), count * sizeof(void *));
  EXPECT_GE(count, 140u);
  for (size_t i = 0; i < count; ++i)
    EXPECT_NE(nullptr, slots[i]) << "slot " << i;
}

// Every OpenCL 1.0-1.2 entry point sits in its named slot, and the name lookup agrees.
TEST_F(IcdTest, OpenCL12EntryPointsByName) {
  auto get_fn = reinterpret_cast<GetFunctionAddressKHR>(
      clGetExtensionFunctionAddressForPlatform(platform, "clIcdGetFunctionAddressForPlatformKHR"));
  ASSERT_NE(nullptr, get_fn);
  const cl_icd_dispatch *table = dispatch_of(platform);
  auto *bytes = reinterpret_cast<const unsigned char *>(table);
  int checked = 0;
#define SLOT(name)                                                                                                  \
  do {                                                                                                            \
    void *slot = *reinterpret_cast<void *const *>(bytes + offsetof(cl_icd_dispatch, name));                       \
    EXPECT_NE(nullptr, slot) << #name;                                                                             \
    EXPECT_EQ(slot, get_fn(platform, #name)) << #name;                                                             \
    ++checked;                                                                                                     \
  } while (0)
  SLOT(clGetPlatformIDs); SLOT(clGetPlatformInfo); SLOT(clGetDeviceIDs); SLOT(clGetDeviceInfo);
  SLOT(clCreateSubDevices); SLOT(clRetainDevice); SLOT(clReleaseDevice);
  SLOT(clCreateContext); SLOT(clCreateContextFromType); SLOT(clRetainContext); SLOT(clReleaseContext);
  SLOT(clGetContextInfo); SLOT(clCreateCommandQueue); SLOT(clRetainCommandQueue); SLOT(clReleaseCommandQueue);
  SLOT(clGetCommandQueueInfo); SLOT(clSetCommandQueueProperty);
  SLOT(clCreateBuffer); SLOT(clCreateSubBuffer); SLOT(clCreateImage); SLOT(clCreateImage2D); SLOT(clCreateImage3D);
  SLOT(clRetainMemObject); SLOT(clReleaseMemObject); SLOT(clGetSupportedImageFormats); SLOT(clGetMemObjectInfo);
  SLOT(clGetImageInfo); SLOT(clSetMemObjectDestructorCallback);
  SLOT(clCreateSampler); SLOT(clRetainSampler); SLOT(clReleaseSampler); SLOT(clGetSamplerInfo);
  SLOT(clCreateProgramWithSource); SLOT(clCreateProgramWithBinary); SLOT(clCreateProgramWithBuiltInKernels);
  SLOT(clRetainProgram); SLOT(clReleaseProgram); SLOT(clBuildProgram); SLOT(clCompileProgram); SLOT(clLinkProgram);
  SLOT(clUnloadCompiler); SLOT(clUnloadPlatformCompiler); SLOT(clGetProgramInfo); SLOT(clGetProgramBuildInfo);
  SLOT(clCreateKernel); SLOT(clCreateKernelsInProgram); SLOT(clRetainKernel); SLOT(clReleaseKernel);
  SLOT(clSetKernelArg); SLOT(clGetKernelInfo); SLOT(clGetKernelArgInfo); SLOT(clGetKernelWorkGroupInfo);
  SLOT(clWaitForEvents); SLOT(clGetEventInfo); SLOT(clCreateUserEvent); SLOT(clRetainEvent); SLOT(clReleaseEvent);
  SLOT(clSetUserEventStatus); SLOT(clSetEventCallback); SLOT(clGetEventProfilingInfo);
  SLOT(clFlush); SLOT(clFinish);
  SLOT(clEnqueueReadBuffer); SLOT(clEnqueueReadBufferRect); SLOT(clEnqueueWriteBuffer); SLOT(clEnqueueWriteBufferRect);
  SLOT(clEnqueueFillBuffer); SLOT(clEnqueueCopyBuffer); SLOT(clEnqueueCopyBufferRect);
  SLOT(clEnqueueReadImage); SLOT(clEnqueueWriteImage); SLOT(clEnqueueFillImage); SLOT(clEnqueueCopyImage);
  SLOT(clEnqueueCopyImageToBuffer); SLOT(clEnqueueCopyBufferToImage); SLOT(clEnqueueMapBuffer); SLOT(clEnqueueMapImage);
  SLOT(clEnqueueUnmapMemObject); SLOT(clEnqueueMigrateMemObjects); SLOT(clEnqueueNDRangeKernel); SLOT(clEnqueueTask);
  SLOT(clEnqueueNativeKernel); SLOT(clEnqueueMarkerWithWaitList); SLOT(clEnqueueBarrierWithWaitList);
  SLOT(clEnqueueMarker); SLOT(clEnqueueWaitForEvents); SLOT(clEnqueueBarrier);
  SLOT(clGetExtensionFunctionAddress); SLOT(clGetExtensionFunctionAddressForPlatform);
#undef SLOT
  EXPECT_EQ(89, checked);
}

TEST_F(IcdTest, UnsupportedSlotsAnswerWithErrors) {
  const cl_icd_dispatch *table = dispatch_of(platform);
  cl_int err = CL_SUCCESS;
  EXPECT_EQ(nullptr, table->clCreateFromGLBuffer(context, CL_MEM_READ_WRITE, 0, &err));
  EXPECT_EQ(CL_INVALID_CONTEXT, err);
  EXPECT_EQ(nullptr, table->clSVMAlloc(context, CL_MEM_READ_WRITE, 64, 0));
  err = CL_SUCCESS;
  EXPECT_EQ(nullptr, table->clCreatePipe(context, CL_MEM_READ_WRITE, 4, 4, nullptr, &err));
  EXPECT_EQ(CL_INVALID_OPERATION, err);
}

} // namespace
