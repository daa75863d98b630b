// ManyCL vs PoCL on the same machine, same host program, one run: runtime overheads and
// classic kernels. Every platform found through the loader is measured; set
// OCL_ICD_VENDORS=<build>/bench-vendors to see exactly ManyCL and PoCL. Each kernel's result
// is verified. Times are host wall time (ManyCL's modeled device time is reported elsewhere).
//
//   ocl_peer_bench [--repeats N] [--quick] [--only GROUP[,GROUP...]]
//
// GROUP is one of latency (null kernel and 10,000 kernels), vadd, sgemm, reduce, compute
// (clpeak-style chains of multiply-adds in int, int4, int16 and float16), build.
#include <CL/cl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace {

#define CHECK(call)                                                                                \
  do {                                                                                             \
    cl_int err_ = (call);                                                                          \
    if (err_ != CL_SUCCESS) {                                                                      \
      std::fprintf(stderr, "%s failed: %d (line %d)\n", #call, err_, __LINE__);                    \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

const char *kKernels = R"CLC(
kernel void empty(void) {}

kernel void vadd(global const float *a, global const float *b, global float *c) {
  size_t i = get_global_id(0);
  c[i] = a[i] + b[i];
}

kernel void sgemm_naive(int n, global const float *a, global const float *b, global float *c) {
  int col = get_global_id(0), row = get_global_id(1);
  float acc = 0.0f;
  for (int k = 0; k < n; ++k)
    acc += a[row * n + k] * b[k * n + col];
  c[row * n + col] = acc;
}

#define TILE 16
kernel void sgemm_tiled(int n, global const float *a, global const float *b, global float *c) {
  local float ta[TILE][TILE];
  local float tb[TILE][TILE];
  int lx = get_local_id(0), ly = get_local_id(1);
  int col = get_global_id(0), row = get_global_id(1);
  float acc = 0.0f;
  for (int t = 0; t < n; t += TILE) {
    ta[ly][lx] = a[row * n + t + lx];
    tb[ly][lx] = b[(t + ly) * n + col];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = 0; k < TILE; ++k)
      acc += ta[ly][k] * tb[k][lx];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  c[row * n + col] = acc;
}

kernel void reduce(global const float *in, global float *out, local float *scratch) {
  size_t l = get_local_id(0);
  scratch[l] = in[get_global_id(0)];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (size_t s = get_local_size(0) / 2; s > 0; s >>= 1) {
    if (l < s)
      scratch[l] += scratch[l + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (l == 0)
    out[get_group_id(0)] = scratch[0];
}
)CLC";

// Compute throughput in the manner of clpeak: each work-item runs a dependent chain of
// multiply-adds on two values of the element type (32 rounds of 64 multiply-adds, 2 operations per
// element and step) and writes one value so that nothing is dead. Only the type differs.
const char *kComputeKernels = R"CLC(
#define STEP(a, b) a = b * a + b; b = a * b + a;
#define STEP8(a, b) STEP(a, b) STEP(a, b) STEP(a, b) STEP(a, b)
#define STEP64(a, b) STEP8(a, b) STEP8(a, b) STEP8(a, b) STEP8(a, b) \
                     STEP8(a, b) STEP8(a, b) STEP8(a, b) STEP8(a, b)
#define COMPUTE(name, T, S, fold)                                   \
  kernel void name(global S *out, S seed) {                         \
    T a = (T)seed, b = (T)((S)get_local_id(0));                     \
    for (int round = 0; round < 32; ++round) { STEP64(a, b) }       \
    T v = b; out[get_global_id(0)] = fold;                          \
  }
COMPUTE(mad_int, int, int, v)
COMPUTE(mad_int4, int4, int, v.s0 + v.s1 + v.s2 + v.s3)
COMPUTE(mad_int16, int16, int, v.s0 + v.s1 + v.s2 + v.s3 + v.s4 + v.s5 + v.s6 + v.s7 + \
        v.s8 + v.s9 + v.sa + v.sb + v.sc + v.sd + v.se + v.sf)
COMPUTE(mad_float16, float16, float, v.s0 + v.s1 + v.s2 + v.s3 + v.s4 + v.s5 + v.s6 + v.s7 + \
        v.s8 + v.s9 + v.sa + v.sb + v.sc + v.sd + v.se + v.sf)
)CLC";

// A "medium" kernel for build timing: a few helper functions, loops and math builtins.
const char *kMediumKernel = R"CLC(
float4 rotate4(float4 v, float a) { float c = cos(a), s = sin(a); return (float4)(c*v.x - s*v.y, s*v.x + c*v.y, v.z, v.w); }
float smooth(float x) { return x * x * (3.0f - 2.0f * x); }
float noise(int x, int y) { int n = x + y * 57 + SALT; n = (n << 13) ^ n; return 1.0f - ((n * (n * n * 15731 + 789221) + 1376312589) & 0x7fffffff) / 1073741824.0f; }
kernel void medium(global const float4 *in, global float4 *out, int iterations, float angle) {
  size_t i = get_global_id(0);
  float4 v = in[i];
  for (int k = 0; k < iterations; ++k) {
    v = rotate4(v, angle + k);
    v.z = smooth(clamp(v.z, 0.0f, 1.0f)) + noise((int)i, k) * 0.001f;
    v.w = sqrt(fabs(v.x * v.y)) + exp(-fabs(v.z)) + log1p(fabs(v.w));
  }
  out[i] = v;
}
)CLC";

struct Platform {
  std::string name;
  cl_platform_id id;
  cl_device_id device;
  cl_context context;
  cl_command_queue queue;
  cl_program program;
};

cl_program build(Platform &p, const char *source, const std::string &options) {
  cl_int err;
  cl_program program = clCreateProgramWithSource(p.context, 1, &source, nullptr, &err);
  CHECK(err);
  err = clBuildProgram(program, 1, &p.device, options.c_str(), nullptr, nullptr);
  if (err != CL_SUCCESS) {
    std::vector<char> log(1 << 16);
    clGetProgramBuildInfo(program, p.device, CL_PROGRAM_BUILD_LOG, log.size(), log.data(), nullptr);
    std::fprintf(stderr, "%s: build failed (%d): %s\n", p.name.c_str(), err, log.data());
    std::exit(1);
  }
  return program;
}

cl_kernel kernel(Platform &p, const char *name) {
  cl_int err;
  cl_kernel k = clCreateKernel(p.program, name, &err);
  CHECK(err);
  return k;
}

cl_mem buffer(Platform &p, size_t bytes, const void *data = nullptr) {
  cl_int err;
  cl_mem m = clCreateBuffer(p.context, data ? CL_MEM_COPY_HOST_PTR : CL_MEM_READ_WRITE, bytes,
                            const_cast<void *>(data), &err);
  CHECK(err);
  return m;
}

struct Row {
  std::string name;
  std::string unit; // what the number is
  bool lower_is_better;
  std::map<std::string, double> value; // per platform
  std::map<std::string, bool> verified;
};

void fail_verify(const std::string &platform, const char *what) {
  std::fprintf(stderr, "%s: %s gave a wrong result\n", platform.c_str(), what);
  std::exit(2);
}

} // namespace

int main(int argc, char **argv) {
  int repeats = 5;
  bool quick = false;
  std::string only; // comma-separated groups; empty: all
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--repeats") && i + 1 < argc)
      repeats = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--quick"))
      quick = true;
    else if (!std::strcmp(argv[i], "--only") && i + 1 < argc)
      only = argv[++i];
    else {
      std::fprintf(stderr,
                   "usage: %s [--repeats N] [--quick] [--only "
                   "latency,vadd,sgemm,reduce,compute,build]\n",
                   argv[0]);
      return 1;
    }
  }
  auto selected = [&](const std::string &group) {
    if (only.empty())
      return true;
    std::string list = "," + only + ",";
    return list.find("," + group + ",") != std::string::npos;
  };

  cl_uint count = 0;
  CHECK(clGetPlatformIDs(0, nullptr, &count));
  std::vector<cl_platform_id> ids(count);
  CHECK(clGetPlatformIDs(count, ids.data(), nullptr));
  std::vector<Platform> platforms;
  for (cl_platform_id id : ids) {
    Platform p{};
    char name[256] = {};
    clGetPlatformInfo(id, CL_PLATFORM_NAME, sizeof(name), name, nullptr);
    p.name = std::strstr(name, "Portable") ? "PoCL" : name;
    p.id = id;
    if (clGetDeviceIDs(id, CL_DEVICE_TYPE_ALL, 1, &p.device, nullptr) != CL_SUCCESS)
      continue;
    cl_int err;
    p.context = clCreateContext(nullptr, 1, &p.device, nullptr, nullptr, &err);
    CHECK(err);
    p.queue = clCreateCommandQueue(p.context, p.device, 0, &err);
    CHECK(err);
    p.program = build(p, kKernels, "");
    char dev[256] = {};
    clGetDeviceInfo(p.device, CL_DEVICE_NAME, sizeof(dev), dev, nullptr);
    std::printf("platform %-8s device %s\n", p.name.c_str(), dev);
    platforms.push_back(p);
  }

  const size_t vec_n = quick ? (1u << 20) : (16u << 20);
  const int gemm_n = quick ? 256 : 1024;
  const size_t red_n = quick ? (1u << 20) : (16u << 20);
  std::vector<Row> rows;
  auto row = [&](const std::string &name, const std::string &unit, bool lower) -> Row & {
    for (auto &r : rows)
      if (r.name == name)
        return r;
    rows.push_back({name, unit, lower, {}, {}});
    return rows.back();
  };

  std::mt19937 rng(42);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> va(vec_n), vb(vec_n);
  for (size_t i = 0; i < vec_n; ++i) {
    va[i] = uni(rng);
    vb[i] = uni(rng);
  }
  std::vector<float> ga(size_t(gemm_n) * gemm_n), gb(ga.size());
  for (auto &x : ga)
    x = uni(rng);
  for (auto &x : gb)
    x = uni(rng);
  std::vector<float> rin(red_n);
  for (auto &x : rin)
    x = uni(rng);

  for (Platform &p : platforms) {
    cl_kernel empty = kernel(p, "empty");
    size_t one = 1;
    // Null kernel: enqueue to completion.
    if (selected("latency")) {
      std::vector<double> t;
      for (int i = 0; i < 20; ++i) {
        CHECK(clEnqueueNDRangeKernel(p.queue, empty, 1, nullptr, &one, &one, 0, nullptr, nullptr));
        CHECK(clFinish(p.queue));
      }
      for (int i = 0; i < 200; ++i) {
        auto start = Clock::now();
        CHECK(clEnqueueNDRangeKernel(p.queue, empty, 1, nullptr, &one, &one, 0, nullptr, nullptr));
        CHECK(clFinish(p.queue));
        t.push_back(seconds_since(start) * 1e6);
      }
      row("null kernel, enqueue to completion", "us", true).value[p.name] = median(t);
    }
    // 10,000 back-to-back empty kernels.
    if (selected("latency")) {
      std::vector<double> t;
      for (int r = 0; r < std::max(3, repeats / 2); ++r) {
        auto start = Clock::now();
        for (int i = 0; i < 10000; ++i)
          CHECK(
              clEnqueueNDRangeKernel(p.queue, empty, 1, nullptr, &one, &one, 0, nullptr, nullptr));
        CHECK(clFinish(p.queue));
        t.push_back(seconds_since(start) * 1e3);
      }
      row("10,000 back-to-back empty kernels", "ms", true).value[p.name] = median(t);
    }
    clReleaseKernel(empty);

    // Vector add.
    if (selected("vadd")) {
      cl_mem a = buffer(p, vec_n * 4, va.data()), b = buffer(p, vec_n * 4, vb.data()),
             c = buffer(p, vec_n * 4);
      cl_kernel k = kernel(p, "vadd");
      CHECK(clSetKernelArg(k, 0, sizeof(cl_mem), &a));
      CHECK(clSetKernelArg(k, 1, sizeof(cl_mem), &b));
      CHECK(clSetKernelArg(k, 2, sizeof(cl_mem), &c));
      std::vector<double> t;
      for (int r = 0; r <= repeats; ++r) {
        auto start = Clock::now();
        CHECK(clEnqueueNDRangeKernel(p.queue, k, 1, nullptr, &vec_n, nullptr, 0, nullptr, nullptr));
        CHECK(clFinish(p.queue));
        if (r > 0)
          t.push_back(seconds_since(start));
      }
      std::vector<float> out(vec_n);
      CHECK(
          clEnqueueReadBuffer(p.queue, c, CL_TRUE, 0, vec_n * 4, out.data(), 0, nullptr, nullptr));
      for (size_t i = 0; i < vec_n; ++i)
        if (out[i] != va[i] + vb[i])
          fail_verify(p.name, "vadd");
      row("vector add, " + std::to_string(vec_n >> 20) + "M floats", "GB/s", false).value[p.name] =
          3.0 * vec_n * 4 / median(t) / 1e9;
      clReleaseKernel(k);
      clReleaseMemObject(a);
      clReleaseMemObject(b);
      clReleaseMemObject(c);
    }

    // SGEMM, naive and tiled.
    for (const char *name : {"sgemm_naive", "sgemm_tiled"}) {
      if (!selected("sgemm"))
        break;
      size_t bytes = ga.size() * 4;
      cl_mem a = buffer(p, bytes, ga.data()), b = buffer(p, bytes, gb.data()), c = buffer(p, bytes);
      cl_kernel k = kernel(p, name);
      CHECK(clSetKernelArg(k, 0, sizeof(int), &gemm_n));
      CHECK(clSetKernelArg(k, 1, sizeof(cl_mem), &a));
      CHECK(clSetKernelArg(k, 2, sizeof(cl_mem), &b));
      CHECK(clSetKernelArg(k, 3, sizeof(cl_mem), &c));
      size_t global[2] = {size_t(gemm_n), size_t(gemm_n)}, local[2] = {16, 16};
      std::vector<double> t;
      int reps = std::max(2, repeats / 2);
      for (int r = 0; r <= reps; ++r) {
        auto start = Clock::now();
        CHECK(clEnqueueNDRangeKernel(p.queue, k, 2, nullptr, global, local, 0, nullptr, nullptr));
        CHECK(clFinish(p.queue));
        if (r > 0)
          t.push_back(seconds_since(start));
      }
      std::vector<float> out(ga.size());
      CHECK(clEnqueueReadBuffer(p.queue, c, CL_TRUE, 0, bytes, out.data(), 0, nullptr, nullptr));
      std::uniform_int_distribution<int> pick(0, gemm_n - 1);
      for (int s = 0; s < 256; ++s) {
        int i = pick(rng), j = pick(rng);
        double ref = 0;
        for (int kk = 0; kk < gemm_n; ++kk)
          ref += double(ga[size_t(i) * gemm_n + kk]) * gb[size_t(kk) * gemm_n + j];
        if (std::fabs(out[size_t(i) * gemm_n + j] - ref) > 1e-3 * gemm_n)
          fail_verify(p.name, name);
      }
      std::string label =
          std::string(name == std::string("sgemm_naive") ? "SGEMM naive "
                                                         : "SGEMM 16x16 local tiles ") +
          std::to_string(gemm_n) + "^3";
      row(label, "GFLOP/s", false).value[p.name] =
          2.0 * gemm_n * double(gemm_n) * gemm_n / median(t) / 1e9;
      clReleaseKernel(k);
      clReleaseMemObject(a);
      clReleaseMemObject(b);
      clReleaseMemObject(c);
    }

    // Reduction with __local memory and barriers, groups of 256.
    if (selected("reduce")) {
      size_t local = 256, groups = red_n / local;
      cl_mem in = buffer(p, red_n * 4, rin.data()), out = buffer(p, groups * 4);
      cl_kernel k = kernel(p, "reduce");
      CHECK(clSetKernelArg(k, 0, sizeof(cl_mem), &in));
      CHECK(clSetKernelArg(k, 1, sizeof(cl_mem), &out));
      CHECK(clSetKernelArg(k, 2, local * 4, nullptr));
      std::vector<double> t;
      for (int r = 0; r <= repeats; ++r) {
        auto start = Clock::now();
        CHECK(clEnqueueNDRangeKernel(p.queue, k, 1, nullptr, &red_n, &local, 0, nullptr, nullptr));
        CHECK(clFinish(p.queue));
        if (r > 0)
          t.push_back(seconds_since(start));
      }
      std::vector<float> partial(groups);
      CHECK(clEnqueueReadBuffer(p.queue, out, CL_TRUE, 0, groups * 4, partial.data(), 0, nullptr,
                                nullptr));
      for (size_t g = 0; g < groups; g += 97) {
        double ref = 0;
        for (size_t i = 0; i < local; ++i)
          ref += rin[g * local + i];
        if (std::fabs(partial[g] - ref) > 1e-4 * local)
          fail_verify(p.name, "reduce");
      }
      row("reduction, " + std::to_string(red_n >> 20) + "M floats, groups of 256", "GB/s", false)
          .value[p.name] = red_n * 4.0 / median(t) / 1e9;
      clReleaseKernel(k);
      clReleaseMemObject(in);
      clReleaseMemObject(out);
    }

    // Compute throughput: int, int4, int16, float16 multiply-add chains, groups of 256.
    if (selected("compute")) {
      cl_program compute = build(p, kComputeKernels, "");
      struct Kind {
        const char *kernel, *label;
        int width;
        bool is_float;
      };
      for (Kind kind :
           {Kind{"mad_int", "int", 1, false}, Kind{"mad_int4", "int4", 4, false},
            Kind{"mad_int16", "int16", 16, false}, Kind{"mad_float16", "float16", 16, true}}) {
        // About 2^32 operations per launch at full size (fewer elements for wider types).
        size_t items = (quick ? (1u << 16) : (1u << 19)) / size_t(kind.width), local = 256;
        cl_int err;
        cl_kernel k = clCreateKernel(compute, kind.kernel, &err);
        CHECK(err);
        cl_mem out = buffer(p, items * 4);
        int seed_i = 3;
        float seed_f = 1.0f;
        CHECK(clSetKernelArg(k, 0, sizeof(cl_mem), &out));
        if (kind.is_float)
          CHECK(clSetKernelArg(k, 1, sizeof(float), &seed_f));
        else
          CHECK(clSetKernelArg(k, 1, sizeof(int), &seed_i));
        std::vector<double> t;
        for (int r = 0; r <= repeats; ++r) {
          auto start = Clock::now();
          CHECK(
              clEnqueueNDRangeKernel(p.queue, k, 1, nullptr, &items, &local, 0, nullptr, nullptr));
          CHECK(clFinish(p.queue));
          if (r > 0)
            t.push_back(seconds_since(start));
        }
        // Verify a few work-items on the host: the same chain, same wrap-around (int) or
        // float arithmetic (compared loosely: the device may contract to fma).
        std::vector<int> got(items);
        CHECK(clEnqueueReadBuffer(p.queue, out, CL_TRUE, 0, items * 4, got.data(), 0, nullptr,
                                  nullptr));
        for (size_t i = 0; i < items; i += 4099) {
          uint32_t lid = uint32_t(i % local);
          if (kind.is_float) {
            float a = seed_f, b = float(lid);
            for (int s = 0; s < 32 * 32; ++s) { // 32 rounds of 32 steps
              a = b * a + b;
              b = a * b + a;
            }
            float want = b * float(kind.width), have;
            std::memcpy(&have, &got[i], 4);
            bool same_class = std::isfinite(want) == std::isfinite(have);
            if (!same_class ||
                (std::isfinite(want) && std::fabs(have - want) > 1e-3f * std::fabs(want) + 1e-3f))
              fail_verify(p.name, kind.kernel);
          } else {
            uint32_t a = uint32_t(seed_i), b = lid;
            for (int s = 0; s < 32 * 32; ++s) { // 32 rounds of 32 steps
              a = b * a + b;
              b = a * b + a;
            }
            if (uint32_t(got[i]) != b * uint32_t(kind.width))
              fail_verify(p.name, kind.kernel);
          }
        }
        double ops = double(items) * 32 * 64 * 2 * 2 * kind.width;
        row(std::string(kind.is_float ? "compute " : "integer compute ") + kind.label +
                ", multiply-add chains",
            kind.is_float ? "GFLOP/s" : "GIOP/s", false)
            .value[p.name] = ops / median(t) / 1e9;
        clReleaseKernel(k);
        clReleaseMemObject(out);
      }
      clReleaseProgram(compute);
    }

    // Build time of a medium kernel: first (a salt no cache has seen) and cached (same
    // source and options again, new program object).
    if (selected("build")) {
      std::string salt = "-DSALT=" + std::to_string(std::random_device{}() & 0x7fffffff);
      auto start = Clock::now();
      cl_program first = build(p, kMediumKernel, salt);
      double first_ms = seconds_since(start) * 1e3;
      std::vector<double> cached;
      for (int r = 0; r < 3; ++r) {
        start = Clock::now();
        cl_program again = build(p, kMediumKernel, salt);
        cached.push_back(seconds_since(start) * 1e3);
        clReleaseProgram(again);
      }
      clReleaseProgram(first);
      row("build of a medium kernel, first", "ms", true).value[p.name] = first_ms;
      row("build of a medium kernel, cached", "ms", true).value[p.name] = median(cached);
    }
  }

  // Table: ratio = ManyCL / PoCL as a time ratio (lower is better for ManyCL).
  std::printf(
      "\n| benchmark | unit | ManyCL | PoCL | ManyCL time / PoCL time |\n|---|---|---|---|---|\n");
  for (auto &r : rows) {
    auto m = r.value.find("ManyCL"), q = r.value.find("PoCL");
    std::printf("| %s | %s | %s | %s |", r.name.c_str(), r.unit.c_str(),
                m != r.value.end() ? std::to_string(m->second).c_str() : "-",
                q != r.value.end() ? std::to_string(q->second).c_str() : "-");
    if (m != r.value.end() && q != r.value.end()) {
      double ratio = r.lower_is_better ? m->second / q->second : q->second / m->second;
      std::printf(" %.2f |\n", ratio);
    } else {
      std::printf(" - |\n");
    }
  }
  for (Platform &p : platforms) {
    clReleaseProgram(p.program);
    clReleaseCommandQueue(p.queue);
    clReleaseContext(p.context);
  }
  return 0;
}
