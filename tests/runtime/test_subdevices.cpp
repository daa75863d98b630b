// Sub-devices: the three partition schemes, nested partitions, queries, error cases, and
// contexts and queues on sub-devices.
#include "rt_common.h"

using namespace rt_test;

namespace {

class SubDeviceTest : public ::testing::Test {
protected:
  void SetUp() override {
    platform = manycl_platform();
    ASSERT_NE(nullptr, platform);
    root = manycl_devices(platform).at(0);
    units = device_info<cl_uint>(root, CL_DEVICE_MAX_COMPUTE_UNITS);
    max_sub = device_info<cl_uint>(root, CL_DEVICE_PARTITION_MAX_SUB_DEVICES);
    if (max_sub < 2)
      GTEST_SKIP() << "device cannot be partitioned";
    // Compute units per cluster: sub-devices own whole clusters.
    per_cluster = units / max_sub;
  }

  std::vector<cl_device_id> partition(cl_device_id dev, std::vector<cl_device_partition_property> props) {
    cl_uint n = 0;
    EXPECT_EQ(CL_SUCCESS, clCreateSubDevices(dev, props.data(), 0, nullptr, &n));
    std::vector<cl_device_id> subs(n);
    if (n) {
      cl_uint n2 = 0;
      EXPECT_EQ(CL_SUCCESS, clCreateSubDevices(dev, props.data(), n, subs.data(), &n2));
      EXPECT_EQ(n, n2);
    }
    return subs;
  }
  static void release_all(const std::vector<cl_device_id> &devs) {
    for (cl_device_id d : devs)
      EXPECT_EQ(CL_SUCCESS, clReleaseDevice(d));
  }

  cl_platform_id platform = nullptr;
  cl_device_id root = nullptr;
  cl_uint units = 0, max_sub = 0, per_cluster = 1;
};

TEST_F(SubDeviceTest, Equally) {
  auto subs = partition(root, {CL_DEVICE_PARTITION_EQUALLY, static_cast<cl_device_partition_property>(per_cluster), 0});
  ASSERT_EQ(max_sub, subs.size());
  for (cl_device_id s : subs) {
    EXPECT_EQ(per_cluster, device_info<cl_uint>(s, CL_DEVICE_MAX_COMPUTE_UNITS));
    EXPECT_EQ(root, device_info<cl_device_id>(s, CL_DEVICE_PARENT_DEVICE));
    EXPECT_EQ(1u, device_info<cl_uint>(s, CL_DEVICE_REFERENCE_COUNT));
    auto type = device_array<cl_device_partition_property>(s, CL_DEVICE_PARTITION_TYPE);
    std::vector<cl_device_partition_property> want = {CL_DEVICE_PARTITION_EQUALLY,
                                                      static_cast<cl_device_partition_property>(per_cluster), 0};
    EXPECT_EQ(want, type);
    // Shared properties.
    EXPECT_EQ(device_info<cl_ulong>(root, CL_DEVICE_GLOBAL_MEM_SIZE), device_info<cl_ulong>(s, CL_DEVICE_GLOBAL_MEM_SIZE));
    EXPECT_EQ(device_info<cl_ulong>(root, CL_DEVICE_LOCAL_MEM_SIZE), device_info<cl_ulong>(s, CL_DEVICE_LOCAL_MEM_SIZE));
    EXPECT_EQ(platform, device_info<cl_platform_id>(s, CL_DEVICE_PLATFORM));
    EXPECT_EQ(static_cast<cl_device_type>(CL_DEVICE_TYPE_ACCELERATOR), device_info<cl_device_type>(s, CL_DEVICE_TYPE));
    // One cluster: nothing left to partition.
    EXPECT_EQ(0u, device_info<cl_uint>(s, CL_DEVICE_PARTITION_MAX_SUB_DEVICES));
    auto props = device_array<cl_device_partition_property>(s, CL_DEVICE_PARTITION_PROPERTIES);
    EXPECT_TRUE(props.empty() || (props.size() == 1 && props[0] == 0));
  }
  // Retain / release on sub-devices counts.
  CL_OK(clRetainDevice(subs[0]));
  EXPECT_EQ(2u, device_info<cl_uint>(subs[0], CL_DEVICE_REFERENCE_COUNT));
  CL_OK(clReleaseDevice(subs[0]));
  EXPECT_EQ(1u, device_info<cl_uint>(subs[0], CL_DEVICE_REFERENCE_COUNT));
  release_all(subs);

  if (max_sub >= 4) {
    auto pairs = partition(root, {CL_DEVICE_PARTITION_EQUALLY, static_cast<cl_device_partition_property>(2 * per_cluster), 0});
    EXPECT_EQ(max_sub / 2, pairs.size());
    for (cl_device_id s : pairs)
      EXPECT_EQ(2 * per_cluster, device_info<cl_uint>(s, CL_DEVICE_MAX_COMPUTE_UNITS));
    release_all(pairs);
  }
}

TEST_F(SubDeviceTest, ByCounts) {
  cl_device_partition_property a = per_cluster, b = static_cast<cl_device_partition_property>(units - per_cluster);
  auto subs = partition(root, {CL_DEVICE_PARTITION_BY_COUNTS, a, b, CL_DEVICE_PARTITION_BY_COUNTS_LIST_END, 0});
  ASSERT_EQ(2u, subs.size());
  EXPECT_EQ(static_cast<cl_uint>(a), device_info<cl_uint>(subs[0], CL_DEVICE_MAX_COMPUTE_UNITS));
  EXPECT_EQ(static_cast<cl_uint>(b), device_info<cl_uint>(subs[1], CL_DEVICE_MAX_COMPUTE_UNITS));
  std::vector<cl_device_partition_property> want = {CL_DEVICE_PARTITION_BY_COUNTS, a, b,
                                                    CL_DEVICE_PARTITION_BY_COUNTS_LIST_END, 0};
  EXPECT_EQ(want, device_array<cl_device_partition_property>(subs[1], CL_DEVICE_PARTITION_TYPE));
  release_all(subs);
}

TEST_F(SubDeviceTest, ByAffinityDomain) {
  for (cl_device_partition_property domain :
       {cl_device_partition_property(CL_DEVICE_AFFINITY_DOMAIN_NEXT_PARTITIONABLE),
        cl_device_partition_property(CL_DEVICE_AFFINITY_DOMAIN_NUMA)}) {
    SCOPED_TRACE(domain);
    auto subs = partition(root, {CL_DEVICE_PARTITION_BY_AFFINITY_DOMAIN, domain, 0});
    ASSERT_EQ(max_sub, subs.size());
    cl_uint total = 0;
    for (cl_device_id s : subs) {
      total += device_info<cl_uint>(s, CL_DEVICE_MAX_COMPUTE_UNITS);
      auto type = device_array<cl_device_partition_property>(s, CL_DEVICE_PARTITION_TYPE);
      ASSERT_EQ(3u, type.size());
      EXPECT_EQ(CL_DEVICE_PARTITION_BY_AFFINITY_DOMAIN, type[0]);
      EXPECT_TRUE(type[1] == domain || type[1] == CL_DEVICE_AFFINITY_DOMAIN_NUMA);
      EXPECT_EQ(0, type[2]);
    }
    EXPECT_EQ(units, total);
    release_all(subs);
  }
  cl_device_partition_property l1[] = {CL_DEVICE_PARTITION_BY_AFFINITY_DOMAIN, CL_DEVICE_AFFINITY_DOMAIN_L1_CACHE, 0};
  cl_uint n;
  EXPECT_EQ(CL_INVALID_VALUE, clCreateSubDevices(root, l1, 0, nullptr, &n));
}

TEST_F(SubDeviceTest, NestedPartitions) {
  if (max_sub < 3)
    GTEST_SKIP();
  cl_device_partition_property two = 2 * per_cluster;
  auto top = partition(root, {CL_DEVICE_PARTITION_BY_COUNTS, two,
                              static_cast<cl_device_partition_property>(units - 2 * per_cluster),
                              CL_DEVICE_PARTITION_BY_COUNTS_LIST_END, 0});
  ASSERT_EQ(2u, top.size());
  EXPECT_EQ(2u, device_info<cl_uint>(top[0], CL_DEVICE_PARTITION_MAX_SUB_DEVICES));
  auto inner = partition(top[0], {CL_DEVICE_PARTITION_EQUALLY, static_cast<cl_device_partition_property>(per_cluster), 0});
  ASSERT_EQ(2u, inner.size());
  for (cl_device_id s : inner) {
    EXPECT_EQ(top[0], device_info<cl_device_id>(s, CL_DEVICE_PARENT_DEVICE));
    EXPECT_EQ(per_cluster, device_info<cl_uint>(s, CL_DEVICE_MAX_COMPUTE_UNITS));
  }
  auto grand = partition(top[0], {CL_DEVICE_PARTITION_BY_AFFINITY_DOMAIN, CL_DEVICE_AFFINITY_DOMAIN_NEXT_PARTITIONABLE, 0});
  EXPECT_EQ(2u, grand.size());
  release_all(grand);
  // The parent sub-device may be released first: its children keep it alive and keep
  // naming it as their parent.
  release_all(top);
  EXPECT_EQ(top[0], device_info<cl_device_id>(inner[0], CL_DEVICE_PARENT_DEVICE));
  // A queue on a nested sub-device works.
  cl_int err;
  cl_context c = clCreateContext(nullptr, 1, &inner[1], nullptr, nullptr, &err);
  ASSERT_EQ(CL_SUCCESS, err);
  cl_command_queue q = clCreateCommandQueue(c, inner[1], 0, &err);
  ASSERT_EQ(CL_SUCCESS, err);
  cl_mem m = clCreateBuffer(c, CL_MEM_READ_WRITE, 64, nullptr, &err);
  int v = 5, r = 0;
  CL_OK(clEnqueueWriteBuffer(q, m, CL_TRUE, 0, sizeof(v), &v, 0, nullptr, nullptr));
  CL_OK(clEnqueueReadBuffer(q, m, CL_TRUE, 0, sizeof(r), &r, 0, nullptr, nullptr));
  EXPECT_EQ(5, r);
  clReleaseMemObject(m);
  clReleaseCommandQueue(q);
  clReleaseContext(c);
  release_all(inner);
}

TEST_F(SubDeviceTest, Errors) {
  cl_uint n = 0;
  cl_device_id out[16];
  auto P = [](std::initializer_list<cl_device_partition_property> l) { return std::vector<cl_device_partition_property>(l); };
  // A partition equal to the parent.
  auto equal_parent = P({CL_DEVICE_PARTITION_EQUALLY, static_cast<cl_device_partition_property>(units), 0});
  EXPECT_EQ(CL_DEVICE_PARTITION_FAILED, clCreateSubDevices(root, equal_parent.data(), 0, nullptr, &n));
  // More compute units than the device has.
  auto too_many = P({CL_DEVICE_PARTITION_EQUALLY, static_cast<cl_device_partition_property>(units + per_cluster), 0});
  EXPECT_EQ(CL_INVALID_DEVICE_PARTITION_COUNT, clCreateSubDevices(root, too_many.data(), 0, nullptr, &n));
  auto counts_total = P({CL_DEVICE_PARTITION_BY_COUNTS, static_cast<cl_device_partition_property>(units),
                         static_cast<cl_device_partition_property>(per_cluster), CL_DEVICE_PARTITION_BY_COUNTS_LIST_END, 0});
  EXPECT_EQ(CL_INVALID_DEVICE_PARTITION_COUNT, clCreateSubDevices(root, counts_total.data(), 0, nullptr, &n));
  auto counts_one = P({CL_DEVICE_PARTITION_BY_COUNTS, static_cast<cl_device_partition_property>(units + 1),
                       CL_DEVICE_PARTITION_BY_COUNTS_LIST_END, 0});
  EXPECT_EQ(CL_INVALID_DEVICE_PARTITION_COUNT, clCreateSubDevices(root, counts_one.data(), 0, nullptr, &n));
  std::vector<cl_device_partition_property> counts_n = {CL_DEVICE_PARTITION_BY_COUNTS};
  for (cl_uint i = 0; i <= max_sub; ++i)
    counts_n.push_back(1);
  counts_n.push_back(CL_DEVICE_PARTITION_BY_COUNTS_LIST_END);
  counts_n.push_back(0);
  EXPECT_EQ(CL_INVALID_DEVICE_PARTITION_COUNT, clCreateSubDevices(root, counts_n.data(), 0, nullptr, &n));
  auto negative = P({CL_DEVICE_PARTITION_BY_COUNTS, -1, CL_DEVICE_PARTITION_BY_COUNTS_LIST_END, 0});
  EXPECT_EQ(CL_INVALID_DEVICE_PARTITION_COUNT, clCreateSubDevices(root, negative.data(), 0, nullptr, &n));
  // num_devices smaller than the number of sub-devices.
  auto eq = P({CL_DEVICE_PARTITION_EQUALLY, static_cast<cl_device_partition_property>(per_cluster), 0});
  EXPECT_EQ(CL_INVALID_VALUE, clCreateSubDevices(root, eq.data(), 1, out, &n));
  EXPECT_EQ(CL_INVALID_VALUE, clCreateSubDevices(root, nullptr, 0, nullptr, &n));
  auto unknown = P({0x7fff, 1, 0});
  EXPECT_EQ(CL_INVALID_VALUE, clCreateSubDevices(root, unknown.data(), 0, nullptr, &n));
  auto zero_eq = P({CL_DEVICE_PARTITION_EQUALLY, 0, 0});
  EXPECT_EQ(CL_INVALID_VALUE, clCreateSubDevices(root, zero_eq.data(), 0, nullptr, &n));
  EXPECT_EQ(CL_INVALID_DEVICE, clCreateSubDevices(wrong<cl_device_id>(platform), eq.data(), 0, nullptr, &n));
  // A one-cluster sub-device cannot be partitioned.
  cl_device_id one;
  auto first = P({CL_DEVICE_PARTITION_BY_COUNTS, static_cast<cl_device_partition_property>(per_cluster),
                  CL_DEVICE_PARTITION_BY_COUNTS_LIST_END, 0});
  CL_OK(clCreateSubDevices(root, first.data(), 1, &one, nullptr));
  auto again = P({CL_DEVICE_PARTITION_BY_AFFINITY_DOMAIN, CL_DEVICE_AFFINITY_DOMAIN_NEXT_PARTITIONABLE, 0});
  cl_int e = clCreateSubDevices(one, again.data(), 0, nullptr, &n);
  EXPECT_TRUE(e == CL_DEVICE_PARTITION_FAILED || e == CL_INVALID_VALUE) << e;
  CL_OK(clReleaseDevice(one));
  if (per_cluster > 1) {
    // LWI: sub-devices own whole clusters.
    auto part = P({CL_DEVICE_PARTITION_EQUALLY, static_cast<cl_device_partition_property>(per_cluster / 2), 0});
    e = clCreateSubDevices(root, part.data(), 0, nullptr, &n);
    EXPECT_TRUE(e == CL_DEVICE_PARTITION_FAILED || e == CL_INVALID_VALUE) << e;
  }
}

TEST_F(SubDeviceTest, ContextsAndQueuesOnSubDevices) {
  auto subs = partition(root, {CL_DEVICE_PARTITION_EQUALLY, static_cast<cl_device_partition_property>(per_cluster), 0});
  ASSERT_GE(subs.size(), 2u);
  cl_int err;
  cl_device_id pair[] = {subs[1], subs[0]};
  cl_context c = clCreateContext(nullptr, 2, pair, nullptr, nullptr, &err);
  ASSERT_EQ(CL_SUCCESS, err);
  // CL_CONTEXT_DEVICES lists exactly the devices passed, in order.
  size_t size = 0;
  CL_OK(clGetContextInfo(c, CL_CONTEXT_DEVICES, 0, nullptr, &size));
  ASSERT_EQ(2 * sizeof(cl_device_id), size);
  cl_device_id listed[2];
  CL_OK(clGetContextInfo(c, CL_CONTEXT_DEVICES, size, listed, nullptr));
  EXPECT_EQ(subs[1], listed[0]);
  EXPECT_EQ(subs[0], listed[1]);
  // The context holds its devices: the application may release them now.
  EXPECT_EQ(1u, device_info<cl_uint>(subs[0], CL_DEVICE_REFERENCE_COUNT));
  cl_command_queue q0 = clCreateCommandQueue(c, subs[0], 0, &err);
  ASSERT_EQ(CL_SUCCESS, err);
  cl_command_queue q1 = clCreateCommandQueue(c, subs[1], CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, &err);
  ASSERT_EQ(CL_SUCCESS, err);
  EXPECT_EQ(nullptr, clCreateCommandQueue(c, root, 0, &err));
  EXPECT_EQ(CL_INVALID_DEVICE, err);
  cl_device_id qd = nullptr;
  CL_OK(clGetCommandQueueInfo(q1, CL_QUEUE_DEVICE, sizeof(qd), &qd, nullptr));
  EXPECT_EQ(subs[1], qd);
  // Sub-devices share DDR: a buffer written on one is read on the other.
  std::vector<int> data(256), got(256);
  for (int i = 0; i < 256; ++i)
    data[i] = i * i;
  cl_mem m = clCreateBuffer(c, CL_MEM_READ_WRITE, data.size() * sizeof(int), nullptr, &err);
  ASSERT_EQ(CL_SUCCESS, err);
  cl_event written;
  CL_OK(clEnqueueWriteBuffer(q0, m, CL_FALSE, 0, data.size() * sizeof(int), data.data(), 0, nullptr, &written));
  CL_OK(clEnqueueReadBuffer(q1, m, CL_TRUE, 0, got.size() * sizeof(int), got.data(), 1, &written, nullptr));
  EXPECT_EQ(data, got);
  release_all(subs);
  // Devices stay valid while the context lives.
  CL_OK(clEnqueueReadBuffer(q0, m, CL_TRUE, 0, sizeof(int), got.data(), 0, nullptr, nullptr));
  clReleaseEvent(written);
  clReleaseMemObject(m);
  clReleaseCommandQueue(q0);
  clReleaseCommandQueue(q1);
  clReleaseContext(c);
}

TEST_F(SubDeviceTest, ConfigExtensionReportsClusters) {
  auto subs = partition(root, {CL_DEVICE_PARTITION_EQUALLY, static_cast<cl_device_partition_property>(per_cluster), 0});
  ASSERT_GE(subs.size(), 2u);
  std::string json = device_config_json(platform, subs[1]);
  EXPECT_NE(std::string::npos, json.find("\"clusters\":1")) << json;
  EXPECT_NE(std::string::npos, json.find("\"cluster_ids\":[1]")) << json;
  release_all(subs);
}

} // namespace
