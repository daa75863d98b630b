// Several inferences at once, one per sub-device, each from its own host thread, with the
// kann::Session application library over the standard OpenCL API.
//
//   concurrent_inference MODEL.kbin [ITERATIONS]
//
// The binary must be compiled for one cluster (kann compile ... --clusters 1): the device
// is split into one sub-device per cluster and every sub-device runs its own Session.
#include <CL/cl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include "kann/session.h"

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.kbin [ITERATIONS]\n", argv[0]);
    return 2;
  }
  int iterations = argc > 2 ? std::atoi(argv[2]) : 100;
  std::ifstream in(argv[1], std::ios::binary);
  std::vector<uint8_t> kbin((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());

  cl_platform_id platform = nullptr;
  cl_uint n = 0;
  if (clGetPlatformIDs(0, nullptr, &n) != CL_SUCCESS)
    n = 0;
  std::vector<cl_platform_id> platforms(n);
  if (n)
    clGetPlatformIDs(n, platforms.data(), nullptr);
  for (auto p : platforms) {
    char name[64] = {};
    clGetPlatformInfo(p, CL_PLATFORM_NAME, sizeof name, name, nullptr);
    if (!std::strcmp(name, "ManyCL"))
      platform = p;
  }
  if (!platform) {
    // A bad configuration hides the platform after ManyCL printed the cause on stderr.
    std::fprintf(stderr, "no ManyCL platform: if a 'ManyCL:' line is printed above, fix "
                         "MANYCL_DEVICES / MANYCL_DEVICE_MODE as it says; otherwise set "
                         "OCL_ICD_VENDORS to <build>/vendors\n");
    return 1;
  }
  cl_device_id root;
  clGetDeviceIDs(platform, CL_DEVICE_TYPE_ACCELERATOR, 1, &root, nullptr);
  cl_device_partition_property per_cluster[] = {CL_DEVICE_PARTITION_BY_AFFINITY_DOMAIN,
                                                CL_DEVICE_AFFINITY_DOMAIN_NUMA, 0};
  cl_uint count = 0;
  clCreateSubDevices(root, per_cluster, 0, nullptr, &count);
  std::vector<cl_device_id> subs(count);
  if (clCreateSubDevices(root, per_cluster, count, subs.data(), nullptr) != CL_SUCCESS) {
    std::fprintf(stderr, "cannot partition the device\n");
    return 1;
  }

  struct Result {
    double modeled_seconds = 0;
    std::vector<float> first_output;
    std::string error;
  };
  std::vector<Result> results(count);
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (cl_uint k = 0; k < count; ++k) {
    threads.emplace_back([&, k] {
      cl_int err;
      cl_context context = clCreateContext(nullptr, 1, &subs[k], nullptr, nullptr, &err);
      cl_command_queue queue = clCreateCommandQueue(context, subs[k], CL_QUEUE_PROFILING_ENABLE, &err);
      {
        auto session = kann::Session::load(context, subs[k], kbin);
        if (!session.ok()) {
          results[k].error = session.error().message;
        } else {
          std::vector<float> input(session.value()->inputs()[0].elements(), 0.5f);
          for (int i = 0; i < iterations && results[k].error.empty(); ++i) {
            session.value()->write_input(queue, 0, input);
            auto event = session.value()->run(queue);
            if (!event.ok()) {
              results[k].error = event.error().message;
              break;
            }
            auto out = session.value()->read_output(queue, 0, event.value());
            if (i == 0 && out.ok())
              results[k].first_output = out.value();
            results[k].modeled_seconds += session.value()->stats(event.value()).modeled_seconds;
            clReleaseEvent(event.value());
          }
        }
      }
      clReleaseCommandQueue(queue);
      clReleaseContext(context);
    });
  }
  for (auto &t : threads)
    t.join();
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  bool agree = true;
  double modeled_per_inference = 0;
  for (cl_uint k = 0; k < count; ++k) {
    if (!results[k].error.empty()) {
      std::fprintf(stderr, "sub-device %u: %s\n", k, results[k].error.c_str());
      return 1;
    }
    agree &= results[k].first_output == results[0].first_output;
    modeled_per_inference += results[k].modeled_seconds / iterations / count;
  }
  std::printf("%u sub-devices x %d inferences: %s results\n", count, iterations, agree ? "identical" : "DIFFERENT");
  std::printf("aggregate throughput: %.1f inferences/s host time, %.1f inferences/s modeled device time\n",
              count * iterations / wall, count / modeled_per_inference);
  for (auto d : subs)
    clReleaseDevice(d);
  return agree ? 0 : 1;
}
