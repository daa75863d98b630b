// A tour of a ManyCL device through the standard OpenCL API: list the platform and device,
// split the device into one sub-device per compute unit group, and run the same small job
// (upload, a native kernel on the device's worker threads, download, check) on each
// sub-device, first one after the other, then all at once from separate queues.
#include <CL/cl.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

#define CHECK(call)                                                                                \
  do {                                                                                             \
    cl_int err_ = (call);                                                                          \
    if (err_ != CL_SUCCESS) {                                                                      \
      std::fprintf(stderr, "%s failed: %d (line %d)\n", #call, err_, __LINE__);                   \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

std::string device_string(cl_device_id d, cl_device_info what) {
  size_t n = 0;
  CHECK(clGetDeviceInfo(d, what, 0, nullptr, &n));
  std::string s(n, '\0');
  CHECK(clGetDeviceInfo(d, what, n, s.data(), nullptr));
  if (!s.empty() && s.back() == '\0')
    s.pop_back();
  return s;
}

template <class T> T device_value(cl_device_id d, cl_device_info what) {
  T v{};
  CHECK(clGetDeviceInfo(d, what, sizeof(v), &v, nullptr));
  return v;
}

// The native kernel: y = a * x + y over n floats. Its arguments are copied by the runtime,
// with the buffer pointers replaced by the buffers' device addresses.
struct SaxpyArgs {
  float *x;
  float *y;
  float a;
  size_t n;
};

void CL_CALLBACK saxpy(void *raw) {
  auto *args = static_cast<SaxpyArgs *>(raw);
  for (size_t i = 0; i < args->n; ++i)
    args->y[i] = args->a * args->x[i] + args->y[i];
}

struct JobResult {
  bool ok = false;
  double ms = 0;
};

JobResult run_job(cl_context context, cl_command_queue queue, size_t n, float a) {
  auto start = std::chrono::steady_clock::now();
  std::vector<float> x(n), y(n);
  for (size_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i % 1000) * 0.5f;
    y[i] = 1.0f;
  }
  cl_int err;
  cl_mem bx = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, n * sizeof(float), x.data(), &err);
  CHECK(err);
  cl_mem by = clCreateBuffer(context, CL_MEM_READ_WRITE, n * sizeof(float), nullptr, &err);
  CHECK(err);
  CHECK(clEnqueueWriteBuffer(queue, by, CL_FALSE, 0, n * sizeof(float), y.data(), 0, nullptr, nullptr));
  SaxpyArgs args{nullptr, nullptr, a, n};
  cl_mem mems[] = {bx, by};
  const void *locations[] = {&args.x, &args.y};
  CHECK(clEnqueueNativeKernel(queue, saxpy, &args, sizeof(args), 2, mems, locations, 0, nullptr, nullptr));
  std::vector<float> out(n);
  CHECK(clEnqueueReadBuffer(queue, by, CL_TRUE, 0, n * sizeof(float), out.data(), 0, nullptr, nullptr));
  bool ok = true;
  for (size_t i = 0; i < n; ++i)
    ok &= std::fabs(out[i] - (a * x[i] + y[i])) <= 1e-5f * std::fabs(out[i]);
  CHECK(clReleaseMemObject(bx));
  CHECK(clReleaseMemObject(by));
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return {ok, ms};
}

} // namespace

int main() {
  cl_uint count = 0;
  // No platform at all is CL_PLATFORM_NOT_FOUND_KHR from the loader, not a failure to report
  // by error code: the message below says what to check.
  if (clGetPlatformIDs(0, nullptr, &count) != CL_SUCCESS)
    count = 0;
  std::vector<cl_platform_id> platforms(count);
  if (count)
    CHECK(clGetPlatformIDs(count, platforms.data(), nullptr));
  cl_platform_id platform = nullptr;
  for (cl_platform_id p : platforms) {
    char name[256] = {};
    clGetPlatformInfo(p, CL_PLATFORM_NAME, sizeof(name), name, nullptr);
    if (std::strcmp(name, "ManyCL") == 0)
      platform = p;
  }
  if (!platform) {
    // A bad configuration hides the platform after ManyCL printed the cause on stderr.
    std::fprintf(stderr, "no ManyCL platform: if a 'ManyCL:' line is printed above, fix "
                         "MANYCL_DEVICES / MANYCL_DEVICE_MODE as it says; otherwise set "
                         "OCL_ICD_VENDORS to <build>/vendors\n");
    return 1;
  }
  char version[256] = {};
  CHECK(clGetPlatformInfo(platform, CL_PLATFORM_VERSION, sizeof(version), version, nullptr));
  std::printf("Platform: ManyCL, %s\n", version);

  cl_device_id device;
  CHECK(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ACCELERATOR, 1, &device, nullptr));
  cl_uint units = device_value<cl_uint>(device, CL_DEVICE_MAX_COMPUTE_UNITS);
  cl_uint max_sub = device_value<cl_uint>(device, CL_DEVICE_PARTITION_MAX_SUB_DEVICES);
  std::printf("Device: %s\n", device_string(device, CL_DEVICE_NAME).c_str());
  std::printf("  compute units %u, local memory (SPM) %llu KiB, global memory (DDR) %llu MiB, %u MHz\n", units,
              static_cast<unsigned long long>(device_value<cl_ulong>(device, CL_DEVICE_LOCAL_MEM_SIZE) >> 10),
              static_cast<unsigned long long>(device_value<cl_ulong>(device, CL_DEVICE_GLOBAL_MEM_SIZE) >> 20),
              device_value<cl_uint>(device, CL_DEVICE_MAX_CLOCK_FREQUENCY));

  // One sub-device per cluster: partition by affinity domain (each cluster is a NUMA node,
  // with its own scratchpad).
  std::vector<cl_device_id> subs(max_sub);
  cl_uint made = 0;
  cl_device_partition_property by_cluster[] = {CL_DEVICE_PARTITION_BY_AFFINITY_DOMAIN,
                                               CL_DEVICE_AFFINITY_DOMAIN_NUMA, 0};
  CHECK(clCreateSubDevices(device, by_cluster, max_sub, subs.data(), &made));
  subs.resize(made);
  std::printf("Sub-devices: %u\n", made);

  const size_t n = 1 << 20;
  cl_int err;
  std::vector<cl_context> contexts;
  std::vector<cl_command_queue> queues;
  for (cl_uint i = 0; i < made; ++i) {
    contexts.push_back(clCreateContext(nullptr, 1, &subs[i], nullptr, nullptr, &err));
    CHECK(err);
    queues.push_back(clCreateCommandQueue(contexts.back(), subs[i], 0, &err));
    CHECK(err);
    JobResult r = run_job(contexts[i], queues[i], n, 2.0f + i);
    std::printf("  sub-device %u: %s, %u compute unit(s): saxpy on %zu floats %s in %.2f ms (host time)\n", i,
                device_string(subs[i], CL_DEVICE_NAME).c_str(), device_value<cl_uint>(subs[i], CL_DEVICE_MAX_COMPUTE_UNITS),
                n, r.ok ? "correct" : "WRONG", r.ms);
    if (!r.ok)
      return 1;
  }

  // All sub-devices at once, one host thread each.
  auto start = std::chrono::steady_clock::now();
  std::vector<JobResult> results(made);
  std::vector<std::thread> threads;
  for (cl_uint i = 0; i < made; ++i)
    threads.emplace_back([&, i] { results[i] = run_job(contexts[i], queues[i], n, 3.0f); });
  for (auto &t : threads)
    t.join();
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  bool all_ok = true;
  for (auto &r : results)
    all_ok &= r.ok;
  std::printf("Concurrent: %u jobs on %u sub-devices %s in %.2f ms (host time)\n", made, made,
              all_ok ? "correct" : "WRONG", ms);

  for (cl_uint i = 0; i < made; ++i) {
    CHECK(clReleaseCommandQueue(queues[i]));
    CHECK(clReleaseContext(contexts[i]));
    CHECK(clReleaseDevice(subs[i]));
  }
  return all_ok ? 0 : 1;
}
