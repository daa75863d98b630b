// Platform and device queries: every OpenCL 1.2 clGetPlatformInfo / clGetDeviceInfo
// parameter, the size conventions, and the handle checks.
#include "rt_common.h"

#include <map>

using namespace rt_test;

namespace {

class PlatformTest : public ::testing::Test {
protected:
  void SetUp() override {
    platform = manycl_platform();
    ASSERT_NE(nullptr, platform);
    auto devices = manycl_devices(platform);
    ASSERT_FALSE(devices.empty());
    device = devices[0];
  }
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
};

TEST_F(PlatformTest, GetPlatformIDsArguments) {
  cl_uint n = 0;
  CL_OK(clGetPlatformIDs(0, nullptr, &n));
  EXPECT_GE(n, 1u);
  cl_platform_id p;
  EXPECT_EQ(CL_INVALID_VALUE, clGetPlatformIDs(0, &p, nullptr));
  EXPECT_EQ(CL_INVALID_VALUE, clGetPlatformIDs(1, nullptr, nullptr));
}

TEST_F(PlatformTest, PlatformStrings) {
  EXPECT_EQ("ManyCL", platform_string(platform, CL_PLATFORM_NAME));
  EXPECT_EQ("FULL_PROFILE", platform_string(platform, CL_PLATFORM_PROFILE));
  EXPECT_EQ(0u, platform_string(platform, CL_PLATFORM_VERSION).rfind("OpenCL 1.2 ", 0));
  EXPECT_FALSE(platform_string(platform, CL_PLATFORM_VENDOR).empty());
  std::string ext = platform_string(platform, CL_PLATFORM_EXTENSIONS);
  EXPECT_NE(std::string::npos, ext.find("cl_khr_icd"));
  EXPECT_EQ("MCL", platform_string(platform, CL_PLATFORM_ICD_SUFFIX_KHR));
}

TEST_F(PlatformTest, PlatformInfoSizeRules) {
  size_t size = 0;
  CL_OK(clGetPlatformInfo(platform, CL_PLATFORM_NAME, 0, nullptr, &size));
  EXPECT_EQ(sizeof("ManyCL"), size);
  char small[3];
  EXPECT_EQ(CL_INVALID_VALUE, clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof(small), small, nullptr));
  char exact[sizeof("ManyCL")];
  size_t ret = 0;
  CL_OK(clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof(exact), exact, &ret));
  EXPECT_STREQ("ManyCL", exact);
  EXPECT_EQ(sizeof(exact), ret);
  EXPECT_EQ(CL_INVALID_VALUE, clGetPlatformInfo(platform, 0x7fff, 0, nullptr, &size));
}

TEST_F(PlatformTest, PlatformWrongHandle) {
  // A device handle is ours but of another type: rejected, not misread.
  char name[64];
  EXPECT_EQ(CL_INVALID_PLATFORM,
            clGetPlatformInfo(wrong<cl_platform_id>(device), CL_PLATFORM_NAME, sizeof(name), name, nullptr));
  cl_uint n = 0;
  EXPECT_EQ(CL_INVALID_PLATFORM, clGetDeviceIDs(wrong<cl_platform_id>(device), CL_DEVICE_TYPE_ALL, 0, nullptr, &n));
}

TEST_F(PlatformTest, GetDeviceIDs) {
  cl_uint n = 0;
  CL_OK(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &n));
  EXPECT_GE(n, 1u);
  CL_OK(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ACCELERATOR, 0, nullptr, &n));
  EXPECT_GE(n, 1u);
  cl_device_id d = nullptr;
  CL_OK(clGetDeviceIDs(platform, CL_DEVICE_TYPE_DEFAULT, 1, &d, &n));
  EXPECT_EQ(1u, n);
  EXPECT_EQ(device, d);
  EXPECT_EQ(CL_DEVICE_NOT_FOUND, clGetDeviceIDs(platform, CL_DEVICE_TYPE_GPU, 0, nullptr, &n));
  EXPECT_EQ(CL_DEVICE_NOT_FOUND, clGetDeviceIDs(platform, CL_DEVICE_TYPE_CPU, 0, nullptr, &n));
  EXPECT_EQ(CL_INVALID_DEVICE_TYPE, clGetDeviceIDs(platform, cl_device_type(1) << 40, 0, nullptr, &n));
  EXPECT_EQ(CL_INVALID_VALUE, clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, &d, nullptr));
  EXPECT_EQ(CL_INVALID_VALUE, clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, nullptr, nullptr));
}

enum class Kind { Uint, Ulong, Size, Bool, Bitfield, String, Pointer, SizeArray, PropArray };

struct Param {
  cl_device_info id;
  const char *name;
  Kind kind;
};

#define P(name, kind) {name, #name, Kind::kind}
const Param kDeviceParams[] = {
    P(CL_DEVICE_TYPE, Bitfield), P(CL_DEVICE_VENDOR_ID, Uint), P(CL_DEVICE_MAX_COMPUTE_UNITS, Uint),
    P(CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS, Uint), P(CL_DEVICE_MAX_WORK_ITEM_SIZES, SizeArray),
    P(CL_DEVICE_MAX_WORK_GROUP_SIZE, Size), P(CL_DEVICE_PREFERRED_VECTOR_WIDTH_CHAR, Uint),
    P(CL_DEVICE_PREFERRED_VECTOR_WIDTH_SHORT, Uint), P(CL_DEVICE_PREFERRED_VECTOR_WIDTH_INT, Uint),
    P(CL_DEVICE_PREFERRED_VECTOR_WIDTH_LONG, Uint), P(CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT, Uint),
    P(CL_DEVICE_PREFERRED_VECTOR_WIDTH_DOUBLE, Uint), P(CL_DEVICE_PREFERRED_VECTOR_WIDTH_HALF, Uint),
    P(CL_DEVICE_NATIVE_VECTOR_WIDTH_CHAR, Uint), P(CL_DEVICE_NATIVE_VECTOR_WIDTH_SHORT, Uint),
    P(CL_DEVICE_NATIVE_VECTOR_WIDTH_INT, Uint), P(CL_DEVICE_NATIVE_VECTOR_WIDTH_LONG, Uint),
    P(CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, Uint), P(CL_DEVICE_NATIVE_VECTOR_WIDTH_DOUBLE, Uint),
    P(CL_DEVICE_NATIVE_VECTOR_WIDTH_HALF, Uint), P(CL_DEVICE_MAX_CLOCK_FREQUENCY, Uint),
    P(CL_DEVICE_ADDRESS_BITS, Uint), P(CL_DEVICE_MAX_MEM_ALLOC_SIZE, Ulong), P(CL_DEVICE_IMAGE_SUPPORT, Bool),
    P(CL_DEVICE_MAX_READ_IMAGE_ARGS, Uint), P(CL_DEVICE_MAX_WRITE_IMAGE_ARGS, Uint),
    P(CL_DEVICE_IMAGE2D_MAX_WIDTH, Size), P(CL_DEVICE_IMAGE2D_MAX_HEIGHT, Size),
    P(CL_DEVICE_IMAGE3D_MAX_WIDTH, Size), P(CL_DEVICE_IMAGE3D_MAX_HEIGHT, Size),
    P(CL_DEVICE_IMAGE3D_MAX_DEPTH, Size), P(CL_DEVICE_IMAGE_MAX_BUFFER_SIZE, Size),
    P(CL_DEVICE_IMAGE_MAX_ARRAY_SIZE, Size), P(CL_DEVICE_MAX_SAMPLERS, Uint),
    P(CL_DEVICE_MAX_PARAMETER_SIZE, Size), P(CL_DEVICE_MEM_BASE_ADDR_ALIGN, Uint),
    P(CL_DEVICE_MIN_DATA_TYPE_ALIGN_SIZE, Uint), P(CL_DEVICE_SINGLE_FP_CONFIG, Bitfield),
    P(CL_DEVICE_DOUBLE_FP_CONFIG, Bitfield), P(CL_DEVICE_GLOBAL_MEM_CACHE_TYPE, Uint),
    P(CL_DEVICE_GLOBAL_MEM_CACHELINE_SIZE, Uint), P(CL_DEVICE_GLOBAL_MEM_CACHE_SIZE, Ulong),
    P(CL_DEVICE_GLOBAL_MEM_SIZE, Ulong), P(CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE, Ulong),
    P(CL_DEVICE_MAX_CONSTANT_ARGS, Uint), P(CL_DEVICE_LOCAL_MEM_TYPE, Uint), P(CL_DEVICE_LOCAL_MEM_SIZE, Ulong),
    P(CL_DEVICE_ERROR_CORRECTION_SUPPORT, Bool), P(CL_DEVICE_HOST_UNIFIED_MEMORY, Bool),
    P(CL_DEVICE_PROFILING_TIMER_RESOLUTION, Size), P(CL_DEVICE_ENDIAN_LITTLE, Bool),
    P(CL_DEVICE_AVAILABLE, Bool), P(CL_DEVICE_COMPILER_AVAILABLE, Bool), P(CL_DEVICE_LINKER_AVAILABLE, Bool),
    P(CL_DEVICE_EXECUTION_CAPABILITIES, Bitfield), P(CL_DEVICE_QUEUE_PROPERTIES, Bitfield),
    P(CL_DEVICE_BUILT_IN_KERNELS, String), P(CL_DEVICE_PLATFORM, Pointer), P(CL_DEVICE_NAME, String),
    P(CL_DEVICE_VENDOR, String), P(CL_DRIVER_VERSION, String), P(CL_DEVICE_PROFILE, String),
    P(CL_DEVICE_VERSION, String), P(CL_DEVICE_OPENCL_C_VERSION, String), P(CL_DEVICE_EXTENSIONS, String),
    P(CL_DEVICE_PRINTF_BUFFER_SIZE, Size), P(CL_DEVICE_PREFERRED_INTEROP_USER_SYNC, Bool),
    P(CL_DEVICE_PARENT_DEVICE, Pointer), P(CL_DEVICE_PARTITION_MAX_SUB_DEVICES, Uint),
    P(CL_DEVICE_PARTITION_PROPERTIES, PropArray), P(CL_DEVICE_PARTITION_AFFINITY_DOMAIN, Bitfield),
    P(CL_DEVICE_PARTITION_TYPE, PropArray), P(CL_DEVICE_REFERENCE_COUNT, Uint),
};
#undef P

size_t expected_size(Kind k) {
  switch (k) {
  case Kind::Uint:
    return sizeof(cl_uint);
  case Kind::Ulong:
  case Kind::Bitfield:
    return sizeof(cl_ulong);
  case Kind::Size:
    return sizeof(size_t);
  case Kind::Bool:
    return sizeof(cl_bool);
  case Kind::Pointer:
    return sizeof(void *);
  default:
    return 0; // variable
  }
}

TEST_F(PlatformTest, EveryDeviceParamAnswersWithSizeRules) {
  for (const Param &p : kDeviceParams) {
    SCOPED_TRACE(p.name);
    size_t size = 12345;
    ASSERT_EQ(CL_SUCCESS, clGetDeviceInfo(device, p.id, 0, nullptr, &size));
    if (size_t want = expected_size(p.kind))
      EXPECT_EQ(want, size);
    if (p.kind == Kind::String)
      EXPECT_GE(size, 1u);
    if (p.kind == Kind::SizeArray)
      EXPECT_EQ(0u, size % sizeof(size_t));
    if (p.kind == Kind::PropArray)
      EXPECT_EQ(0u, size % sizeof(cl_device_partition_property));
    std::vector<unsigned char> buf(size + 8, 0xab);
    size_t ret = 0;
    EXPECT_EQ(CL_SUCCESS, clGetDeviceInfo(device, p.id, size, size ? buf.data() : nullptr, &ret));
    EXPECT_EQ(size, ret);
    EXPECT_EQ(0xab, buf[size]) << "wrote past param_value_size";
    if (p.kind == Kind::String)
      EXPECT_EQ('\0', buf[size - 1]) << "string not terminated";
    if (size > 0) {
      // One byte too small: CL_INVALID_VALUE, nothing required of the buffer.
      EXPECT_EQ(CL_INVALID_VALUE, clGetDeviceInfo(device, p.id, size - 1, buf.data(), nullptr));
      // A larger buffer is fine and the returned size is still the exact one.
      EXPECT_EQ(CL_SUCCESS, clGetDeviceInfo(device, p.id, size + 8, buf.data(), &ret));
      EXPECT_EQ(size, ret);
    }
  }
}

TEST_F(PlatformTest, DeviceInfoErrors) {
  cl_uint v = 0;
  size_t size = 0;
  EXPECT_EQ(CL_INVALID_VALUE, clGetDeviceInfo(device, 0x7fff, sizeof(v), &v, &size));
  EXPECT_EQ(CL_INVALID_DEVICE, clGetDeviceInfo(nullptr, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof(v), &v, nullptr));
  EXPECT_EQ(CL_INVALID_DEVICE,
            clGetDeviceInfo(wrong<cl_device_id>(platform), CL_DEVICE_MAX_COMPUTE_UNITS, sizeof(v), &v, nullptr));
}

TEST_F(PlatformTest, DeviceValuesMatchConfig) {
  std::string json = device_config_json(platform, device);
  ASSERT_FALSE(json.empty());
  auto num = [&](const char *key) -> unsigned long long {
    std::string k = std::string("\"") + key + "\":";
    auto pos = json.find(k);
    EXPECT_NE(std::string::npos, pos) << key;
    return pos == std::string::npos ? 0 : std::stoull(json.substr(pos + k.size()));
  };
  const bool spmd = json.find("\"mode\":\"spmd\"") != std::string::npos;
  const cl_uint clusters = static_cast<cl_uint>(num("clusters"));
  const cl_uint pes = static_cast<cl_uint>(num("pes_per_cluster"));
  EXPECT_EQ(spmd ? clusters : clusters * pes, device_info<cl_uint>(device, CL_DEVICE_MAX_COMPUTE_UNITS));
  EXPECT_EQ(num("spm_bytes") - num("spm_reserved_bytes"), device_info<cl_ulong>(device, CL_DEVICE_LOCAL_MEM_SIZE));
  EXPECT_EQ(num("ddr_bytes"), device_info<cl_ulong>(device, CL_DEVICE_GLOBAL_MEM_SIZE));
  EXPECT_EQ(static_cast<cl_device_local_mem_type>(CL_LOCAL),
            device_info<cl_device_local_mem_type>(device, CL_DEVICE_LOCAL_MEM_TYPE));
  cl_ulong max_alloc = device_info<cl_ulong>(device, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
  EXPECT_LE(max_alloc, device_info<cl_ulong>(device, CL_DEVICE_GLOBAL_MEM_SIZE));
  EXPECT_GE(max_alloc, device_info<cl_ulong>(device, CL_DEVICE_GLOBAL_MEM_SIZE) / 4);
  EXPECT_EQ(static_cast<cl_device_type>(CL_DEVICE_TYPE_ACCELERATOR), device_info<cl_device_type>(device, CL_DEVICE_TYPE));
  EXPECT_EQ(CL_FALSE, device_info<cl_bool>(device, CL_DEVICE_IMAGE_SUPPORT));
  // A linker comes with the compiler (OpenCL 1.2: LINKER may be false only without a compiler).
  if (device_info<cl_bool>(device, CL_DEVICE_COMPILER_AVAILABLE))
    EXPECT_EQ(CL_TRUE, device_info<cl_bool>(device, CL_DEVICE_LINKER_AVAILABLE));
  EXPECT_EQ(CL_TRUE, device_info<cl_bool>(device, CL_DEVICE_AVAILABLE));
  EXPECT_EQ(platform, device_info<cl_platform_id>(device, CL_DEVICE_PLATFORM));
  EXPECT_EQ(nullptr, device_info<cl_device_id>(device, CL_DEVICE_PARENT_DEVICE));
  EXPECT_EQ(1u, device_info<cl_uint>(device, CL_DEVICE_REFERENCE_COUNT));
  EXPECT_TRUE(device_info<cl_device_exec_capabilities>(device, CL_DEVICE_EXECUTION_CAPABILITIES) &
              CL_EXEC_NATIVE_KERNEL);
  auto qp = device_info<cl_command_queue_properties>(device, CL_DEVICE_QUEUE_PROPERTIES);
  EXPECT_TRUE(qp & CL_QUEUE_PROFILING_ENABLE);
  EXPECT_TRUE(qp & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE);
  EXPECT_EQ(0u, device_string(device, CL_DEVICE_VERSION).rfind("OpenCL 1.2 ", 0));
  EXPECT_EQ(0u, device_string(device, CL_DEVICE_OPENCL_C_VERSION).rfind("OpenCL C 1.2", 0));
  EXPECT_EQ("FULL_PROFILE", device_string(device, CL_DEVICE_PROFILE));
  EXPECT_EQ(static_cast<cl_uint>(num("clock_hz") / 1000000), device_info<cl_uint>(device, CL_DEVICE_MAX_CLOCK_FREQUENCY));

  // OpenCL 1.2 full-profile minimums.
  EXPECT_EQ(3u, device_info<cl_uint>(device, CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS));
  auto sizes = device_array<size_t>(device, CL_DEVICE_MAX_WORK_ITEM_SIZES);
  ASSERT_EQ(3u, sizes.size());
  for (size_t s : sizes)
    EXPECT_GE(s, 1u);
  EXPECT_GE(device_info<size_t>(device, CL_DEVICE_MAX_WORK_GROUP_SIZE), 1u);
  EXPECT_GE(device_info<size_t>(device, CL_DEVICE_MAX_PARAMETER_SIZE), 1024u);
  EXPECT_GE(device_info<cl_ulong>(device, CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE), 64u * 1024);
  EXPECT_GE(device_info<cl_uint>(device, CL_DEVICE_MAX_CONSTANT_ARGS), 8u);
  EXPECT_GE(device_info<cl_ulong>(device, CL_DEVICE_LOCAL_MEM_SIZE), 32u * 1024);
  EXPECT_GE(device_info<cl_uint>(device, CL_DEVICE_MEM_BASE_ADDR_ALIGN), 1024u); // long16, in bits
  auto fp = device_info<cl_device_fp_config>(device, CL_DEVICE_SINGLE_FP_CONFIG);
  EXPECT_TRUE((fp & CL_FP_ROUND_TO_NEAREST) && (fp & CL_FP_INF_NAN));

  // Partitioning: whole clusters.
  cl_uint max_sub = device_info<cl_uint>(device, CL_DEVICE_PARTITION_MAX_SUB_DEVICES);
  EXPECT_EQ(clusters > 1 ? clusters : 0u, max_sub);
  EXPECT_LE(max_sub, device_info<cl_uint>(device, CL_DEVICE_MAX_COMPUTE_UNITS));
  auto props = device_array<cl_device_partition_property>(device, CL_DEVICE_PARTITION_PROPERTIES);
  if (clusters > 1) {
    std::vector<cl_device_partition_property> want = {CL_DEVICE_PARTITION_EQUALLY, CL_DEVICE_PARTITION_BY_COUNTS,
                                                      CL_DEVICE_PARTITION_BY_AFFINITY_DOMAIN};
    EXPECT_EQ(want, props);
    auto dom = device_info<cl_device_affinity_domain>(device, CL_DEVICE_PARTITION_AFFINITY_DOMAIN);
    EXPECT_EQ(static_cast<cl_device_affinity_domain>(CL_DEVICE_AFFINITY_DOMAIN_NUMA |
                                                     CL_DEVICE_AFFINITY_DOMAIN_NEXT_PARTITIONABLE),
              dom);
  }
  // A root device has no partition type: size 0, or a single 0 terminator.
  auto type = device_array<cl_device_partition_property>(device, CL_DEVICE_PARTITION_TYPE);
  EXPECT_TRUE(type.empty() || (type.size() == 1 && type[0] == 0));
}

TEST_F(PlatformTest, RootDeviceRetainReleaseAreNoOps) {
  CL_OK(clRetainDevice(device));
  EXPECT_EQ(1u, device_info<cl_uint>(device, CL_DEVICE_REFERENCE_COUNT));
  CL_OK(clReleaseDevice(device));
  CL_OK(clReleaseDevice(device));
  EXPECT_EQ(1u, device_info<cl_uint>(device, CL_DEVICE_REFERENCE_COUNT));
  EXPECT_EQ(CL_INVALID_DEVICE, clRetainDevice(wrong<cl_device_id>(platform)));
  EXPECT_EQ(CL_INVALID_DEVICE, clReleaseDevice(wrong<cl_device_id>(platform)));
}

TEST_F(PlatformTest, HostTimers) {
  // OpenCL 2.1 timers, reached through the loader when it knows them.
  cl_ulong dev = 0, host = 0;
  cl_int err = clGetDeviceAndHostTimer(device, &dev, &host);
  if (err == CL_INVALID_OPERATION)
    GTEST_SKIP() << "loader without clGetDeviceAndHostTimer";
  CL_OK(err);
  EXPECT_GT(dev, 0u);
  cl_ulong later = 0;
  CL_OK(clGetHostTimer(device, &later));
  EXPECT_GE(later, host);
  EXPECT_EQ(CL_INVALID_VALUE, clGetHostTimer(device, nullptr));
}

} // namespace
