// CLBlast SGEMM (C = A * B, row-major, n x n) through the OpenCL platform the loader shows
// first: what a program using Debian's libclblast runs. Prints one line:
//
//   clblast_sgemm platform=<name> n=<n> gflops=<median GFLOP/s> first_ms=<first call, ms>
//
// The first call includes CLBlast's kernel build (its own in-process cache starts empty); the
// GFLOP/s are the median of the timed calls after it. C is checked on sampled entries against
// a host dot product.
//
//   clblast_sgemm_bench [--n N] [--repeats R]
#include <CL/cl.h>
#include <clblast_c.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

bool check_cl(cl_int err, const char *what) {
  if (err == CL_SUCCESS)
    return true;
  std::fprintf(stderr, "clblast_sgemm_bench: %s failed: %d\n", what, err);
  return false;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

} // namespace

int main(int argc, char **argv) {
  size_t n = 1024;
  int repeats = 5;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--n") && i + 1 < argc)
      n = std::strtoul(argv[++i], nullptr, 10);
    else if (!std::strcmp(argv[i], "--repeats") && i + 1 < argc)
      repeats = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: clblast_sgemm_bench [--n N] [--repeats R]\n");
      return 2;
    }
  }
  if (n == 0 || repeats < 1) {
    std::fprintf(stderr, "clblast_sgemm_bench: --n and --repeats must be positive\n");
    return 2;
  }

  cl_platform_id platform;
  cl_uint platforms = 0;
  if (!check_cl(clGetPlatformIDs(1, &platform, &platforms), "clGetPlatformIDs") || !platforms)
    return 1;
  char name[256] = {};
  clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof name - 1, name, nullptr);
  cl_device_id device;
  if (!check_cl(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, nullptr),
                "clGetDeviceIDs"))
    return 1;
  cl_int err;
  cl_context ctx = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &err);
  if (!check_cl(err, "clCreateContext"))
    return 1;
  cl_command_queue queue = clCreateCommandQueue(ctx, device, 0, &err);
  if (!check_cl(err, "clCreateCommandQueue"))
    return 1;

  std::vector<float> a(n * n), b(n * n), c(n * n, 0.0f);
  std::mt19937 rng(15);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto &v : a)
    v = dist(rng);
  for (auto &v : b)
    v = dist(rng);
  size_t bytes = n * n * sizeof(float);
  cl_mem da = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes, a.data(), &err);
  cl_mem db = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes, b.data(), &err);
  cl_mem dc = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes, c.data(), &err);
  if (!check_cl(err, "clCreateBuffer"))
    return 1;

  auto sgemm = [&]() -> bool {
    cl_event done = nullptr;
    CLBlastStatusCode s =
        CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, n, n, n, 1.0f,
                     da, 0, n, db, 0, n, 0.0f, dc, 0, n, &queue, &done);
    if (s != CLBlastSuccess) {
      std::fprintf(stderr, "clblast_sgemm_bench: CLBlastSgemm failed: %d\n", static_cast<int>(s));
      return false;
    }
    clWaitForEvents(1, &done);
    clReleaseEvent(done);
    return true;
  };

  auto t0 = Clock::now();
  if (!sgemm())
    return 1;
  double first_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  std::vector<double> seconds;
  for (int r = 0; r < repeats; ++r) {
    auto t = Clock::now();
    if (!sgemm())
      return 1;
    seconds.push_back(std::chrono::duration<double>(Clock::now() - t).count());
  }

  if (!check_cl(clEnqueueReadBuffer(queue, dc, CL_TRUE, 0, bytes, c.data(), 0, nullptr, nullptr),
                "clEnqueueReadBuffer"))
    return 1;
  std::mt19937 pick(7);
  for (int s = 0; s < 256; ++s) {
    size_t i = pick() % n, j = pick() % n;
    double want = 0.0, mag = 0.0;
    for (size_t k = 0; k < n; ++k) {
      want += double(a[i * n + k]) * b[k * n + j];
      mag += std::fabs(double(a[i * n + k]) * b[k * n + j]);
    }
    if (std::fabs(c[i * n + j] - want) > 1e-4 * mag + 1e-4) {
      std::fprintf(stderr, "clblast_sgemm_bench: C[%zu][%zu] = %g, expected %g\n", i, j,
                   c[i * n + j], want);
      return 1;
    }
  }
  double gflops = 2.0 * double(n) * n * n / median(seconds) * 1e-9;
  std::printf("clblast_sgemm platform=\"%s\" n=%zu gflops=%.3f first_ms=%.1f\n", name, n, gflops,
              first_ms);
  clReleaseMemObject(da);
  clReleaseMemObject(db);
  clReleaseMemObject(dc);
  clReleaseCommandQueue(queue);
  clReleaseContext(ctx);
  return 0;
}
