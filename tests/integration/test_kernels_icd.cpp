// OpenCL C kernels through the ICD: async_work_group_copy on the RDMA engine (results and
// modeled DMA traffic), barrier kernels with real PE threads in SPMD mode, and NDRanges on
// sub-devices running concurrently.
#include <CL/cl.h>
#include <CL/cl_ext_manycl.h>

#include <gtest/gtest.h>

#include "../common/cl_session.h"

#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace {

// Profiling on: the tests read the commands' modeled times.
struct Cl : manycl_test::ClSession {
  explicit Cl(cl_device_id d = nullptr) : ClSession(d, CL_QUEUE_PROFILING_ENABLE) {}
};

const char *kAsyncCopy = R"(
kernel void scale_tiles(global const float *in, global float *out, local float *tile, float factor) {
  size_t n = get_local_size(0), base = get_group_id(0) * n;
  event_t e = async_work_group_copy(tile, in + base, n, 0);
  wait_group_events(1, &e);
  size_t l = get_local_id(0);
  tile[l] *= factor;
  barrier(CLK_LOCAL_MEM_FENCE);
  e = async_work_group_copy(out + base, tile, n, 0);
  wait_group_events(1, &e);
}
)";

TEST(KernelsIcd, AsyncWorkGroupCopyRunsOnTheRdmaEngine) {
  Cl cl;
  ASSERT_NE(cl.platform, nullptr);
  cl_program program = cl.build(kAsyncCopy);
  cl_int err;
  cl_kernel kernel = clCreateKernel(program, "scale_tiles", &err);
  ASSERT_EQ(err, CL_SUCCESS);
  const size_t n = 4096, local = 128;
  std::vector<float> host(n);
  for (size_t i = 0; i < n; ++i)
    host[i] = static_cast<float>(i);
  cl_mem in = clCreateBuffer(cl.context, CL_MEM_COPY_HOST_PTR, n * 4, host.data(), &err);
  cl_mem out = clCreateBuffer(cl.context, CL_MEM_READ_WRITE, n * 4, nullptr, &err);
  float factor = 3.0f;
  clSetKernelArg(kernel, 0, sizeof in, &in);
  clSetKernelArg(kernel, 1, sizeof out, &out);
  clSetKernelArg(kernel, 2, local * 4, nullptr);
  clSetKernelArg(kernel, 3, sizeof factor, &factor);
  cl_event done;
  ASSERT_EQ(clEnqueueNDRangeKernel(cl.queue, kernel, 1, nullptr, &n, &local, 0, nullptr, &done),
            CL_SUCCESS);
  std::vector<float> result(n);
  ASSERT_EQ(clEnqueueReadBuffer(cl.queue, out, CL_TRUE, 0, n * 4, result.data(), 1, &done, nullptr),
            CL_SUCCESS);
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(result[i], 3.0f * i) << i;

  // The copies went through the clusters' RDMA engines: DDR read and written by DMA, with
  // modeled time to show for it.
  size_t size = 0;
  ASSERT_EQ(clGetEventInfo(done, CL_EVENT_COMMAND_STATS_MCL, 0, nullptr, &size), CL_SUCCESS);
  std::string text(size, '\0');
  ASSERT_EQ(clGetEventInfo(done, CL_EVENT_COMMAND_STATS_MCL, size, text.data(), nullptr),
            CL_SUCCESS);
  text.resize(std::strlen(text.c_str()));
  auto stats = nlohmann::json::parse(text);
  EXPECT_EQ(stats["dma_transfers"].get<uint64_t>(), 2 * n / local);
  EXPECT_EQ(stats["ddr_bytes_read"].get<uint64_t>(), n * 4);
  EXPECT_EQ(stats["ddr_bytes_written"].get<uint64_t>(), n * 4);
  EXPECT_GT(stats["modeled_cycles"].get<uint64_t>(), 0u);
  cl_ulong modeled_start = 0, modeled_end = 0;
  ASSERT_EQ(clGetEventProfilingInfo(done, CL_PROFILING_MODELED_START_MCL, sizeof modeled_start,
                                    &modeled_start, nullptr),
            CL_SUCCESS);
  ASSERT_EQ(clGetEventProfilingInfo(done, CL_PROFILING_MODELED_END_MCL, sizeof modeled_end,
                                    &modeled_end, nullptr),
            CL_SUCCESS);
  EXPECT_GT(modeled_end, modeled_start);
  clReleaseEvent(done);
  clReleaseMemObject(in);
  clReleaseMemObject(out);
  clReleaseKernel(kernel);
  clReleaseProgram(program);
}

const char *kPrefixSum = R"(
kernel void block_scan(global const int *in, global int *out, local int *a, local int *b) {
  size_t l = get_local_id(0), n = get_local_size(0), g = get_global_id(0);
  a[l] = in[g];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (size_t step = 1; step < n; step <<= 1) {
    b[l] = l >= step ? a[l] + a[l - step] : a[l];
    barrier(CLK_LOCAL_MEM_FENCE);
    a[l] = b[l];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  out[g] = a[l];
}
)";

// Hillis-Steele scan needs every barrier: with the work-items of a group spread over real PE
// threads (MANYCL_PE_THREADS set by the test's environment), a missing synchronization shows.
TEST(KernelsIcd, BarrierKernelAcrossPeThreads) {
  Cl cl;
  ASSERT_NE(cl.platform, nullptr);
  cl_program program = cl.build(kPrefixSum);
  cl_int err;
  cl_kernel kernel = clCreateKernel(program, "block_scan", &err);
  ASSERT_EQ(err, CL_SUCCESS);
  for (size_t local : {16u, 64u, 256u}) {
    const size_t n = local * 40;
    std::vector<int> host(n);
    for (size_t i = 0; i < n; ++i)
      host[i] = static_cast<int>(i % 7) - 3;
    cl_mem in = clCreateBuffer(cl.context, CL_MEM_COPY_HOST_PTR, n * 4, host.data(), &err);
    cl_mem out = clCreateBuffer(cl.context, CL_MEM_READ_WRITE, n * 4, nullptr, &err);
    clSetKernelArg(kernel, 0, sizeof in, &in);
    clSetKernelArg(kernel, 1, sizeof out, &out);
    clSetKernelArg(kernel, 2, local * 4, nullptr);
    clSetKernelArg(kernel, 3, local * 4, nullptr);
    ASSERT_EQ(clEnqueueNDRangeKernel(cl.queue, kernel, 1, nullptr, &n, &local, 0, nullptr, nullptr),
              CL_SUCCESS);
    std::vector<int> result(n);
    ASSERT_EQ(
        clEnqueueReadBuffer(cl.queue, out, CL_TRUE, 0, n * 4, result.data(), 0, nullptr, nullptr),
        CL_SUCCESS);
    for (size_t g = 0; g < n / local; ++g) {
      int sum = 0;
      for (size_t l = 0; l < local; ++l) {
        sum += host[g * local + l];
        ASSERT_EQ(result[g * local + l], sum)
            << "local size " << local << " group " << g << " item " << l;
      }
    }
    clReleaseMemObject(in);
    clReleaseMemObject(out);
  }
  clReleaseKernel(kernel);
  clReleaseProgram(program);
}

const char *kSpin = R"(
kernel void busy(global float *out, int rounds) {
  float x = get_global_id(0);
  for (int i = 0; i < rounds; ++i)
    x = x * 0.999f + 0.5f;
  out[get_global_id(0)] = x;
}
)";

// Kernels on two sub-devices overlap: the pair finishes well before the sum of both alone.
TEST(KernelsIcd, SubDeviceKernelsRunConcurrently) {
  Cl root;
  ASSERT_NE(root.platform, nullptr);
  cl_device_partition_property props[] = {CL_DEVICE_PARTITION_BY_AFFINITY_DOMAIN,
                                          CL_DEVICE_AFFINITY_DOMAIN_NUMA, 0};
  cl_device_id subs[8];
  cl_uint made = 0;
  ASSERT_EQ(clCreateSubDevices(root.device, props, 8, subs, &made), CL_SUCCESS);
  ASSERT_GE(made, 2u);
  Cl a(subs[0]), b(subs[1]);
  cl_program pa = a.build(kSpin), pb = b.build(kSpin);
  cl_int err;
  cl_kernel ka = clCreateKernel(pa, "busy", &err), kb = clCreateKernel(pb, "busy", &err);
  const size_t n = 64;
  int rounds = 3000000;
  cl_mem oa = clCreateBuffer(a.context, CL_MEM_READ_WRITE, n * 4, nullptr, &err);
  cl_mem ob = clCreateBuffer(b.context, CL_MEM_READ_WRITE, n * 4, nullptr, &err);
  clSetKernelArg(ka, 0, sizeof oa, &oa);
  clSetKernelArg(ka, 1, sizeof rounds, &rounds);
  clSetKernelArg(kb, 0, sizeof ob, &ob);
  clSetKernelArg(kb, 1, sizeof rounds, &rounds);
  // Both kernels are running at the same time: each starts before the other ends (host
  // profiling timestamps; independent of how loaded the host is).
  cl_event ea, eb;
  ASSERT_EQ(clEnqueueNDRangeKernel(a.queue, ka, 1, nullptr, &n, &n, 0, nullptr, &ea), CL_SUCCESS);
  ASSERT_EQ(clEnqueueNDRangeKernel(b.queue, kb, 1, nullptr, &n, &n, 0, nullptr, &eb), CL_SUCCESS);
  clFinish(a.queue);
  clFinish(b.queue);
  cl_ulong a0, a1, b0, b1;
  clGetEventProfilingInfo(ea, CL_PROFILING_COMMAND_START, sizeof a0, &a0, nullptr);
  clGetEventProfilingInfo(ea, CL_PROFILING_COMMAND_END, sizeof a1, &a1, nullptr);
  clGetEventProfilingInfo(eb, CL_PROFILING_COMMAND_START, sizeof b0, &b0, nullptr);
  clGetEventProfilingInfo(eb, CL_PROFILING_COMMAND_END, sizeof b1, &b1, nullptr);
  EXPECT_LT(a0, b1);
  EXPECT_LT(b0, a1);
  // And they ran on different clusters of the device.
  auto clusters_of = [](cl_event e) {
    size_t size = 0;
    clGetEventInfo(e, CL_EVENT_COMMAND_STATS_MCL, 0, nullptr, &size);
    std::string text(size, '\0');
    clGetEventInfo(e, CL_EVENT_COMMAND_STATS_MCL, size, text.data(), nullptr);
    text.resize(std::strlen(text.c_str()));
    auto j = nlohmann::json::parse(text);
    std::vector<unsigned> ids;
    for (auto &c : j["clusters"])
      ids.push_back(c["cluster"].get<unsigned>());
    return ids;
  };
  EXPECT_EQ(clusters_of(ea), std::vector<unsigned>{0});
  EXPECT_EQ(clusters_of(eb), std::vector<unsigned>{1});
  clReleaseEvent(ea);
  clReleaseEvent(eb);
  clReleaseMemObject(oa);
  clReleaseMemObject(ob);
  clReleaseKernel(ka);
  clReleaseKernel(kb);
  clReleaseProgram(pa);
  clReleaseProgram(pb);
  for (cl_uint i = 0; i < made; ++i)
    clReleaseDevice(subs[i]);
}

} // namespace
