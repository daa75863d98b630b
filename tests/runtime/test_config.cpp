// Device configurations: run once per MANYCL_DEVICES / MANYCL_DEVICE_MODE setting (see
// CMakeLists.txt). MANYCL_TEST_EXPECT names what the configuration must report, so that the
// device queries are checked against independent numbers, not only against themselves.
#include "rt_common.h"

#include <cstdlib>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

using namespace rt_test;

namespace {

std::map<std::string, unsigned long long> expectations() {
  std::map<std::string, unsigned long long> m;
  const char *env = std::getenv("MANYCL_TEST_EXPECT");
  if (!env)
    return m;
  std::stringstream ss(env);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto eq = item.find('=');
    if (eq != std::string::npos)
      m[item.substr(0, eq)] = std::stoull(item.substr(eq + 1));
  }
  return m;
}

class ConfigTest : public ::testing::Test {
protected:
  void SetUp() override {
    expect = expectations();
    if (expect.count("devices") && expect["devices"] == 0)
      return; // a configuration that must hide the platform
    platform = manycl_platform();
    ASSERT_NE(nullptr, platform);
    devices = manycl_devices(platform);
    ASSERT_FALSE(devices.empty());
    device = devices[0];
    config = nlohmann::json::parse(device_config_json(platform, device));
  }
  unsigned long long want(const char *key) {
    if (!expect.count(key))
      ADD_FAILURE() << "MANYCL_TEST_EXPECT has no " << key;
    return expect[key];
  }
  std::map<std::string, unsigned long long> expect;
  cl_platform_id platform = nullptr;
  std::vector<cl_device_id> devices;
  cl_device_id device = nullptr;
  nlohmann::json config;
};

// A bad MANYCL_DEVICES hides the platform (the loader skips it) instead of crashing.
TEST_F(ConfigTest, BadConfigurationHidesThePlatform) {
  if (!expect.count("devices") || expect["devices"] != 0)
    GTEST_SKIP() << "valid configuration";
  EXPECT_EQ(nullptr, manycl_platform());
  cl_uint n = 0;
  cl_int e = clGetPlatformIDs(0, nullptr, &n);
  EXPECT_TRUE(e == CL_SUCCESS || e == CL_PLATFORM_NOT_FOUND_KHR) << e;
}

TEST_F(ConfigTest, DeviceReportsTheConfiguredMachine) {
  if (expect.empty())
    GTEST_SKIP() << "MANYCL_TEST_EXPECT not set";
  if (!platform)
    GTEST_SKIP() << "no platform expected";
  EXPECT_EQ(want("devices"), devices.size());
  EXPECT_EQ(want("clusters"), config["clusters"].get<unsigned long long>());
  EXPECT_EQ(want("pes"), config["pes_per_cluster"].get<unsigned long long>());
  EXPECT_EQ(want("cus"), device_info<cl_uint>(device, CL_DEVICE_MAX_COMPUTE_UNITS));
  EXPECT_EQ(want("spm"), device_info<cl_ulong>(device, CL_DEVICE_LOCAL_MEM_SIZE));
  EXPECT_EQ(want("ddr"), device_info<cl_ulong>(device, CL_DEVICE_GLOBAL_MEM_SIZE));
  // One sub-device per compute unit at most (cluster in SPMD mode, PE in LWI mode).
  EXPECT_EQ(want("cus") > 1 ? want("cus") : 0,
            device_info<cl_uint>(device, CL_DEVICE_PARTITION_MAX_SUB_DEVICES));
  const bool lwi = config["mode"] == "lwi";
  EXPECT_EQ(lwi ? want("clusters") * want("pes") : want("clusters"), want("cus"));
  std::string name = device_string(device, CL_DEVICE_NAME);
  EXPECT_NE(std::string::npos, name.find(lwi ? "LWI" : "SPMD")) << name;
  EXPECT_EQ(config["max_alloc_bytes"].get<unsigned long long>() != 0
                ? std::min(config["max_alloc_bytes"].get<unsigned long long>(), want("ddr"))
                : device_info<cl_ulong>(device, CL_DEVICE_MAX_MEM_ALLOC_SIZE),
            device_info<cl_ulong>(device, CL_DEVICE_MAX_MEM_ALLOC_SIZE));
}

TEST_F(ConfigTest, EveryDeviceIsUsable) {
  if (!platform)
    GTEST_SKIP() << "no platform expected";
  // Each configured device gets its own context, queue and a round trip through its DDR.
  for (cl_device_id d : devices) {
    cl_int err;
    cl_context c = clCreateContext(nullptr, 1, &d, nullptr, nullptr, &err);
    ASSERT_EQ(CL_SUCCESS, err);
    cl_command_queue q = clCreateCommandQueue(c, d, 0, &err);
    ASSERT_EQ(CL_SUCCESS, err);
    std::vector<int> data(1000), got(1000);
    for (int i = 0; i < 1000; ++i)
      data[i] = 7 * i;
    cl_mem m = clCreateBuffer(c, CL_MEM_COPY_HOST_PTR, data.size() * sizeof(int), data.data(), &err);
    ASSERT_EQ(CL_SUCCESS, err);
    CL_OK(clEnqueueReadBuffer(q, m, CL_TRUE, 0, got.size() * sizeof(int), got.data(), 0, nullptr, nullptr));
    EXPECT_EQ(data, got);
    clReleaseMemObject(m);
    clReleaseCommandQueue(q);
    clReleaseContext(c);
  }
  if (devices.size() > 1) {
    // One context over several devices: CL_CONTEXT_DEVICES lists them all, each gets a queue.
    cl_int err;
    cl_context c = clCreateContext(nullptr, static_cast<cl_uint>(devices.size()), devices.data(), nullptr, nullptr, &err);
    ASSERT_EQ(CL_SUCCESS, err);
    std::vector<cl_device_id> listed(devices.size());
    CL_OK(clGetContextInfo(c, CL_CONTEXT_DEVICES, listed.size() * sizeof(cl_device_id), listed.data(), nullptr));
    EXPECT_EQ(devices, listed);
    int v = 3, r = 0;
    cl_mem m = clCreateBuffer(c, CL_MEM_READ_WRITE, sizeof(int), nullptr, &err);
    ASSERT_EQ(CL_SUCCESS, err);
    cl_command_queue q0 = clCreateCommandQueue(c, devices[0], 0, &err);
    cl_command_queue q1 = clCreateCommandQueue(c, devices[1], 0, &err);
    CL_OK(clEnqueueWriteBuffer(q0, m, CL_TRUE, 0, sizeof(v), &v, 0, nullptr, nullptr));
    CL_OK(clEnqueueReadBuffer(q1, m, CL_TRUE, 0, sizeof(r), &r, 0, nullptr, nullptr));
    EXPECT_EQ(3, r);
    clReleaseMemObject(m);
    clReleaseCommandQueue(q0);
    clReleaseCommandQueue(q1);
    clReleaseContext(c);
  }
}

// In LWI mode a compute unit is a PE: sub-devices may own single PEs, several of them sharing
// a cluster (and its SPM), and each one runs kernels correctly, also all at once.
TEST_F(ConfigTest, LwiPartitionsIntoPes) {
  if (!platform)
    GTEST_SKIP() << "no platform expected";
  if (config["mode"] != "lwi")
    GTEST_SKIP() << "SPMD configuration";
  const cl_uint pes = config["pes_per_cluster"].get<cl_uint>();
  const cl_uint clusters = config["clusters"].get<cl_uint>();
  const cl_uint units = pes * clusters;
  EXPECT_EQ(units, device_info<cl_uint>(device, CL_DEVICE_PARTITION_MAX_SUB_DEVICES));
  cl_device_partition_property whole[] = {CL_DEVICE_PARTITION_EQUALLY, static_cast<cl_device_partition_property>(pes), 0};
  std::vector<cl_device_id> subs(clusters);
  cl_uint n = 0;
  CL_OK(clCreateSubDevices(device, whole, clusters, subs.data(), &n));
  EXPECT_EQ(clusters, n);
  for (cl_device_id s : subs) {
    EXPECT_EQ(pes, device_info<cl_uint>(s, CL_DEVICE_MAX_COMPUTE_UNITS));
    clReleaseDevice(s);
  }
  // EQUALLY 1: one sub-device per PE.
  cl_device_partition_property single[] = {CL_DEVICE_PARTITION_EQUALLY, 1, 0};
  CL_OK(clCreateSubDevices(device, single, 0, nullptr, &n));
  EXPECT_EQ(units, n);
  // EQUALLY with every compute unit would give the device itself.
  cl_device_partition_property all[] = {CL_DEVICE_PARTITION_EQUALLY, static_cast<cl_device_partition_property>(units), 0};
  EXPECT_EQ(CL_DEVICE_PARTITION_FAILED, clCreateSubDevices(device, all, 0, nullptr, &n));
  // BY_COUNTS {1, units - 1}: the first PE alone, the rest of its cluster with the others.
  cl_device_partition_property counts[] = {CL_DEVICE_PARTITION_BY_COUNTS, 1,
                                           static_cast<cl_device_partition_property>(units - 1),
                                           CL_DEVICE_PARTITION_BY_COUNTS_LIST_END, 0};
  cl_device_id pair[2] = {};
  CL_OK(clCreateSubDevices(device, counts, 2, pair, &n));
  ASSERT_EQ(2u, n);
  EXPECT_EQ(1u, device_info<cl_uint>(pair[0], CL_DEVICE_MAX_COMPUTE_UNITS));
  EXPECT_EQ(units - 1, device_info<cl_uint>(pair[1], CL_DEVICE_MAX_COMPUTE_UNITS));
  // A one-PE sub-device cannot be partitioned further.
  EXPECT_EQ(0u, device_info<cl_uint>(pair[0], CL_DEVICE_PARTITION_MAX_SUB_DEVICES));
  cl_device_partition_property too_many[] = {CL_DEVICE_PARTITION_BY_COUNTS, 1,
                                             static_cast<cl_device_partition_property>(units),
                                             CL_DEVICE_PARTITION_BY_COUNTS_LIST_END, 0};
  EXPECT_EQ(CL_INVALID_DEVICE_PARTITION_COUNT, clCreateSubDevices(device, too_many, 0, nullptr, &n));

  // Both sub-devices (sharing the first cluster) run a kernel at the same time.
  cl_int err = CL_SUCCESS;
  cl_context ctx = clCreateContext(nullptr, 2, pair, nullptr, nullptr, &err);
  ASSERT_EQ(CL_SUCCESS, err);
  const char *source = R"(__kernel void square(__global int *x, __local int *tmp) {
      size_t l = get_local_id(0);
      tmp[l] = x[get_global_id(0)];
      barrier(CLK_LOCAL_MEM_FENCE);
      x[get_global_id(0)] = tmp[l] * tmp[l];
    })";
  cl_program program = clCreateProgramWithSource(ctx, 1, &source, nullptr, &err);
  ASSERT_EQ(CL_SUCCESS, err);
  CL_OK(clBuildProgram(program, 0, nullptr, "", nullptr, nullptr));
  const size_t count = 4096, local = 64;
  std::vector<cl_mem> buffers;
  std::vector<cl_command_queue> queues;
  std::vector<cl_kernel> kernels;
  for (int d = 0; d < 2; ++d) {
    std::vector<cl_int> data(count);
    for (size_t i = 0; i < count; ++i)
      data[i] = static_cast<cl_int>(i % 1000) * (d + 1);
    buffers.push_back(clCreateBuffer(ctx, CL_MEM_COPY_HOST_PTR, count * 4, data.data(), &err));
    queues.push_back(clCreateCommandQueue(ctx, pair[d], 0, &err));
    kernels.push_back(clCreateKernel(program, "square", &err));
    CL_OK(clSetKernelArg(kernels[d], 0, sizeof(cl_mem), &buffers[d]));
    CL_OK(clSetKernelArg(kernels[d], 1, local * 4, nullptr));
  }
  for (int d = 0; d < 2; ++d)
    CL_OK(clEnqueueNDRangeKernel(queues[d], kernels[d], 1, nullptr, &count, &local, 0, nullptr, nullptr));
  for (int d = 0; d < 2; ++d) {
    std::vector<cl_int> out(count);
    CL_OK(clEnqueueReadBuffer(queues[d], buffers[d], CL_TRUE, 0, count * 4, out.data(), 0, nullptr, nullptr));
    for (size_t i = 0; i < count; i += 97) {
      cl_int v = static_cast<cl_int>(i % 1000) * (d + 1);
      ASSERT_EQ(v * v, out[i]) << "sub-device " << d << " item " << i;
    }
    clReleaseKernel(kernels[d]);
    clReleaseCommandQueue(queues[d]);
    clReleaseMemObject(buffers[d]);
  }
  clReleaseProgram(program);
  clReleaseContext(ctx);
  clReleaseDevice(pair[0]);
  clReleaseDevice(pair[1]);
}

// DDR capacity: only meaningful on a device with a small DDR (the small_ddr device file).
TEST_F(ConfigTest, DdrCapacityIsEnforced) {
  if (!platform)
    GTEST_SKIP() << "no platform expected";
  const cl_ulong ddr = device_info<cl_ulong>(device, CL_DEVICE_GLOBAL_MEM_SIZE);
  const cl_ulong max_alloc = device_info<cl_ulong>(device, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
  if (ddr > (64ull << 20))
    GTEST_SKIP() << "DDR too large to fill in a unit test";
  cl_int err;
  cl_context c = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &err);
  ASSERT_EQ(CL_SUCCESS, err);
  cl_command_queue q = clCreateCommandQueue(c, device, 0, &err);
  ASSERT_EQ(CL_SUCCESS, err);
  // Beyond CL_DEVICE_MAX_MEM_ALLOC_SIZE: CL_INVALID_BUFFER_SIZE.
  EXPECT_EQ(nullptr, clCreateBuffer(c, CL_MEM_READ_WRITE, max_alloc + 1, nullptr, &err));
  EXPECT_EQ(CL_INVALID_BUFFER_SIZE, err);
  // Fill the DDR with buffers of a quarter each, then one more fails.
  const size_t chunk = static_cast<size_t>(ddr / 4);
  ASSERT_LE(chunk, max_alloc);
  std::vector<cl_mem> held;
  for (int i = 0; i < 3; ++i) {
    std::vector<unsigned char> fill(chunk, static_cast<unsigned char>(0x10 + i));
    cl_mem m = clCreateBuffer(c, CL_MEM_COPY_HOST_PTR, chunk, fill.data(), &err);
    ASSERT_EQ(CL_SUCCESS, err) << i;
    held.push_back(m);
  }
  // The last quarter and a bit: does not fit.
  EXPECT_EQ(nullptr, clCreateBuffer(c, CL_MEM_READ_WRITE, chunk + 4096, nullptr, &err));
  EXPECT_EQ(CL_MEM_OBJECT_ALLOCATION_FAILURE, err);
  // Exactly the rest fits; then nothing more.
  cl_mem last = clCreateBuffer(c, CL_MEM_READ_WRITE, chunk, nullptr, &err);
  ASSERT_EQ(CL_SUCCESS, err);
  EXPECT_EQ(nullptr, clCreateBuffer(c, CL_MEM_READ_WRITE, 1, nullptr, &err));
  EXPECT_EQ(CL_MEM_OBJECT_ALLOCATION_FAILURE, err);
  // Earlier buffers are intact.
  for (int i = 0; i < 3; ++i) {
    std::vector<unsigned char> got(chunk);
    CL_OK(clEnqueueReadBuffer(q, held[i], CL_TRUE, 0, chunk, got.data(), 0, nullptr, nullptr));
    EXPECT_EQ(std::vector<unsigned char>(chunk, static_cast<unsigned char>(0x10 + i)), got) << i;
  }
  // Freed memory is reusable.
  CL_OK(clReleaseMemObject(last));
  cl_mem again = clCreateBuffer(c, CL_MEM_READ_WRITE, chunk, nullptr, &err);
  EXPECT_EQ(CL_SUCCESS, err);
  // Sub-devices share the DDR: a sub-device context sees the same exhaustion.
  if (device_info<cl_uint>(device, CL_DEVICE_PARTITION_MAX_SUB_DEVICES) >= 2) {
    cl_device_partition_property props[] = {CL_DEVICE_PARTITION_BY_AFFINITY_DOMAIN,
                                            CL_DEVICE_AFFINITY_DOMAIN_NEXT_PARTITIONABLE, 0};
    cl_device_id sub[8];
    cl_uint n = 0;
    CL_OK(clCreateSubDevices(device, props, 8, sub, &n));
    cl_context sc = clCreateContext(nullptr, 1, &sub[0], nullptr, nullptr, &err);
    ASSERT_EQ(CL_SUCCESS, err);
    EXPECT_EQ(nullptr, clCreateBuffer(sc, CL_MEM_READ_WRITE, 4096, nullptr, &err));
    EXPECT_EQ(CL_MEM_OBJECT_ALLOCATION_FAILURE, err);
    clReleaseContext(sc);
    for (cl_uint i = 0; i < n; ++i)
      clReleaseDevice(sub[i]);
  }
  if (again)
    clReleaseMemObject(again);
  for (cl_mem m : held)
    clReleaseMemObject(m);
  // Everything released: the whole DDR is available again.
  cl_mem whole = clCreateBuffer(c, CL_MEM_READ_WRITE, static_cast<size_t>(std::min(ddr, max_alloc)), nullptr, &err);
  EXPECT_EQ(CL_SUCCESS, err);
  if (whole)
    clReleaseMemObject(whole);
  clReleaseCommandQueue(q);
  clReleaseContext(c);
}

} // namespace
