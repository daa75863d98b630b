// Regressions found by the OpenCL-CTS and by real programs (pyopencl), each reproduced here
// through the ICD loader exactly as the program that found it uses ManyCL.
#include "rt_common.h"

#include <climits>
#include <cstdio>
#include <unistd.h>

using namespace rt_test;

namespace {

class ConformanceRegressionTest : public RuntimeTest {
protected:
  // Builds `source` for the test's device; fails the test with the build log on error.
  cl_program build(const char *source, const char *options = "") {
    cl_int err = CL_SUCCESS;
    cl_program program = clCreateProgramWithSource(context, 1, &source, nullptr, &err);
    EXPECT_EQ(CL_SUCCESS, err);
    err = clBuildProgram(program, 1, &device, options, nullptr, nullptr);
    EXPECT_EQ(CL_SUCCESS, err) << build_log(program, device);
    return program;
  }
  static std::string build_log(cl_program program, cl_device_id dev) {
    size_t size = 0;
    clGetProgramBuildInfo(program, dev, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size);
    std::string log(size, '\0');
    clGetProgramBuildInfo(program, dev, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
    return log;
  }
  cl_kernel kernel(cl_program program, const char *name) {
    cl_int err = CL_SUCCESS;
    cl_kernel k = clCreateKernel(program, name, &err);
    EXPECT_EQ(CL_SUCCESS, err);
    return k;
  }
  template <class T> std::vector<T> read(cl_mem buffer, size_t count) {
    std::vector<T> out(count);
    EXPECT_EQ(CL_SUCCESS, clEnqueueReadBuffer(queue, buffer, CL_TRUE, 0, count * sizeof(T),
                                              out.data(), 0, nullptr, nullptr));
    return out;
  }
  void run(cl_kernel k, size_t global, size_t local = 0) {
    CL_OK(clEnqueueNDRangeKernel(queue, k, 1, nullptr, &global, local ? &local : nullptr, 0,
                                 nullptr, nullptr));
    CL_OK(clFinish(queue));
  }
};

// pyopencl's match_dtype_to_c_struct: the offset of a member at offset 0 is a constant
// expression that uses the __local variable twice (clBuildProgram freed it twice).
TEST_F(ConformanceRegressionTest, OffsetOfLocalStructMemberBuilds) {
  cl_program p = build(R"(
    typedef struct { int a; char b; long c; } T;
    __kernel void offsets(__global uint *r) {
      __local T d;
      if (get_local_id(0) == 0) {
        r[0] = (uint)((__local char *)&d.a - (__local char *)&d);
        r[1] = (uint)((__local char *)&d.b - (__local char *)&d);
        r[2] = (uint)((__local char *)&d.c - (__local char *)&d);
        r[3] = (uint)((__local char *)&d.a - (__local char *)&d.a) + (uint)sizeof(d);
      }
    })");
  cl_kernel k = kernel(p, "offsets");
  cl_mem r = make_buffer(4 * sizeof(cl_uint));
  CL_OK(clSetKernelArg(k, 0, sizeof(r), &r));
  run(k, 1);
  EXPECT_EQ((std::vector<cl_uint>{0, 4, 8, 16}), read<cl_uint>(r, 4));
  clReleaseMemObject(r);
  clReleaseKernel(k);
  clReleaseProgram(p);
}

// CTS integer_ops: x / 0, x % 0 and INT_MIN / -1 are undefined values in OpenCL C, never a
// trap of the host process. Ordinary divisions keep their exact results.
TEST_F(ConformanceRegressionTest, IntegerDivisionNeverTraps) {
  cl_program p = build(R"(
    __kernel void divide(__global const int *a, __global const int *b, __global int *q,
                         __global int *m, __global const long *la, __global const long *lb,
                         __global long *lq, __global uint *uq, __global int4 *vq) {
      size_t i = get_global_id(0);
      q[i] = a[i] / b[i];
      m[i] = a[i] % b[i];
      lq[i] = la[i] / lb[i] + la[i] % lb[i];
      uq[i] = (uint)a[i] / (uint)b[i] + (uint)a[i] % (uint)b[i];
      int4 va = (int4)(a[i]), vb = (int4)(b[i], 1, b[i], -1);
      vq[i] = va / vb + va % vb;
    })");
  cl_kernel k = kernel(p, "divide");
  std::vector<cl_int> a = {7, INT_MIN, 5, -9, 100};
  std::vector<cl_int> b = {2, -1, 0, 0, -7};
  std::vector<cl_long> la = {LLONG_MIN, 9, 40};
  std::vector<cl_long> lb = {-1, 0, 6};
  la.resize(a.size(), 1);
  lb.resize(a.size(), 1);
  const size_t n = a.size();
  cl_mem ba = make_buffer(n * 4, CL_MEM_COPY_HOST_PTR, a.data());
  cl_mem bb = make_buffer(n * 4, CL_MEM_COPY_HOST_PTR, b.data());
  cl_mem bla = make_buffer(n * 8, CL_MEM_COPY_HOST_PTR, la.data());
  cl_mem blb = make_buffer(n * 8, CL_MEM_COPY_HOST_PTR, lb.data());
  cl_mem q = make_buffer(n * 4), m = make_buffer(n * 4), lq = make_buffer(n * 8),
         uq = make_buffer(n * 4), vq = make_buffer(n * 16);
  cl_mem args[] = {ba, bb, q, m, bla, blb, lq, uq, vq};
  for (cl_uint i = 0; i < 9; ++i)
    CL_OK(clSetKernelArg(k, i, sizeof(cl_mem), &args[i]));
  run(k, n);
  auto quotients = read<cl_int>(q, n);
  auto remainders = read<cl_int>(m, n);
  EXPECT_EQ(3, quotients[0]);
  EXPECT_EQ(1, remainders[0]);
  EXPECT_EQ(INT_MIN, quotients[1]); // the wrapped quotient
  EXPECT_EQ(0, remainders[1]);
  EXPECT_EQ(-14, quotients[4]);
  EXPECT_EQ(2, remainders[4]);
  auto longs = read<cl_long>(lq, n);
  EXPECT_EQ(LLONG_MIN, longs[0]);
  EXPECT_EQ(6 + 4, longs[2]);
  auto uns = read<cl_uint>(uq, n);
  EXPECT_EQ(3u + 1u, uns[0]);
  auto vec = read<cl_int>(vq, 4 * n);
  EXPECT_EQ(7, vec[1]);  // 7 / 1 + 7 % 1
  EXPECT_EQ(-7, vec[3]); // 7 / -1 + 7 % -1
  EXPECT_EQ(INT_MIN, vec[4 + 3]); // INT_MIN / -1 + INT_MIN % -1
  for (cl_mem mem : args)
    clReleaseMemObject(mem);
  clReleaseKernel(k);
  clReleaseProgram(p);
}

// CTS api get_buffer_info: a sub-buffer may narrow the host's access to none under any
// parent, never widen it or switch between read-only and write-only.
TEST_F(ConformanceRegressionTest, SubBufferHostAccessFlags) {
  const cl_mem_flags parents[] = {CL_MEM_HOST_READ_ONLY, CL_MEM_HOST_WRITE_ONLY,
                                  CL_MEM_HOST_NO_ACCESS};
  for (cl_mem_flags parent_flags : parents) {
    cl_mem parent = make_buffer(4096, CL_MEM_READ_WRITE | parent_flags);
    cl_buffer_region region = {0, 1024};
    cl_int err = CL_SUCCESS;
    cl_mem sub = clCreateSubBuffer(parent, CL_MEM_HOST_NO_ACCESS, CL_BUFFER_CREATE_TYPE_REGION,
                                   &region, &err);
    EXPECT_EQ(CL_SUCCESS, err) << "parent host flags " << parent_flags;
    if (sub) {
      EXPECT_EQ(CL_MEM_HOST_NO_ACCESS, mem_info<cl_mem_flags>(sub, CL_MEM_FLAGS) &
                                           (CL_MEM_HOST_NO_ACCESS | CL_MEM_HOST_READ_ONLY |
                                            CL_MEM_HOST_WRITE_ONLY));
      clReleaseMemObject(sub);
    }
    for (cl_mem_flags wider : {CL_MEM_HOST_READ_ONLY, CL_MEM_HOST_WRITE_ONLY}) {
      if (wider == parent_flags)
        continue;
      sub = clCreateSubBuffer(parent, wider, CL_BUFFER_CREATE_TYPE_REGION, &region, &err);
      EXPECT_EQ(CL_INVALID_VALUE, err) << parent_flags << " -> " << wider;
      EXPECT_EQ(nullptr, sub);
    }
    clReleaseMemObject(parent);
  }
}

struct DestructorRecord {
  int calls = 0;
};

// CTS api retain_mem_object_set_kernel_arg: a kernel argument does not keep the buffer
// alive; releasing it runs its destructor callback, and the kernel then refuses to launch
// with it rather than touching freed memory.
TEST_F(ConformanceRegressionTest, KernelArgumentDoesNotRetainBuffer) {
  cl_program p = build("__kernel void fill(__global int *out) { out[get_global_id(0)] = 5; }");
  cl_kernel k = kernel(p, "fill");
  cl_mem buffer = make_buffer(64);
  DestructorRecord record;
  CL_OK(clSetMemObjectDestructorCallback(
      buffer, [](cl_mem, void *user) { ++static_cast<DestructorRecord *>(user)->calls; },
      &record));
  CL_OK(clSetKernelArg(k, 0, sizeof(buffer), &buffer));
  EXPECT_EQ(1u, ref_count_mem(buffer));
  run(k, 16);
  CL_OK(clReleaseMemObject(buffer));
  EXPECT_TRUE(eventually([&] { return record.calls == 1; }));
  size_t global = 16;
  EXPECT_EQ(CL_INVALID_MEM_OBJECT,
            clEnqueueNDRangeKernel(queue, k, 1, nullptr, &global, nullptr, 0, nullptr, nullptr));
  // A new argument makes the kernel usable again.
  cl_mem other = make_buffer(64);
  CL_OK(clSetKernelArg(k, 0, sizeof(other), &other));
  run(k, 16);
  EXPECT_EQ(5, read<cl_int>(other, 16)[15]);
  clReleaseMemObject(other);
  clReleaseKernel(k);
  clReleaseProgram(p);
}

// CTS api min_max_local_mem_size: a kernel may use all of CL_DEVICE_LOCAL_MEM_SIZE.
TEST_F(ConformanceRegressionTest, KernelUsesAllLocalMemory) {
  const cl_ulong local_size = device_info<cl_ulong>(device, CL_DEVICE_LOCAL_MEM_SIZE);
  cl_program p = build(R"(
    __kernel void touch(__local int *scratch, __global int *out, uint n) {
      size_t lid = get_local_id(0), ls = get_local_size(0);
      for (uint i = lid; i < n; i += ls)
        scratch[i] = (int)i;
      barrier(CLK_LOCAL_MEM_FENCE);
      if (lid == 0)
        out[get_group_id(0)] = scratch[n - 1] + scratch[0];
    })");
  cl_kernel k = kernel(p, "touch");
  cl_mem out = make_buffer(2 * sizeof(cl_int));
  const cl_uint n = static_cast<cl_uint>(local_size / sizeof(cl_int));
  CL_OK(clSetKernelArg(k, 0, n * sizeof(cl_int), nullptr));
  CL_OK(clSetKernelArg(k, 1, sizeof(out), &out));
  CL_OK(clSetKernelArg(k, 2, sizeof(n), &n));
  cl_ulong kernel_local = 0;
  CL_OK(clGetKernelWorkGroupInfo(k, device, CL_KERNEL_LOCAL_MEM_SIZE, sizeof(kernel_local),
                                 &kernel_local, nullptr));
  EXPECT_EQ(n * sizeof(cl_int), kernel_local);
  run(k, 32, 16);
  auto got = read<cl_int>(out, 2);
  EXPECT_EQ(static_cast<cl_int>(n - 1), got[0]);
  EXPECT_EQ(static_cast<cl_int>(n - 1), got[1]);
  // One byte more than the device has is refused at enqueue.
  CL_OK(clSetKernelArg(k, 0, local_size + 1, nullptr));
  size_t global = 16;
  EXPECT_EQ(CL_OUT_OF_RESOURCES,
            clEnqueueNDRangeKernel(queue, k, 1, nullptr, &global, nullptr, 0, nullptr, nullptr));
  clReleaseMemObject(out);
  clReleaseKernel(k);
  clReleaseProgram(p);
}

// CTS compiler and basic kernel_preprocessor_macros: every OpenCL 1.2 build option is
// accepted, and the device's OpenCL version is visible to kernels.
TEST_F(ConformanceRegressionTest, BuildOptionsAndVersionMacros) {
  cl_program p = build(R"(
    __kernel void versions(__global int *out) {
      out[0] = __OPENCL_VERSION__;
      out[1] = __OPENCL_C_VERSION__;
    #ifdef __ENDIAN_LITTLE__
      out[2] = __ENDIAN_LITTLE__;
    #else
      out[2] = 0;
    #endif
    })",
                       "-cl-denorms-are-zero -cl-mad-enable -cl-no-signed-zeros");
  cl_kernel k = kernel(p, "versions");
  cl_mem out = make_buffer(3 * sizeof(cl_int));
  CL_OK(clSetKernelArg(k, 0, sizeof(out), &out));
  run(k, 1);
  auto got = read<cl_int>(out, 3);
  EXPECT_EQ(120, got[0]); // CL_DEVICE_VERSION "OpenCL 1.2 ..."
  EXPECT_EQ(120, got[1]);
  EXPECT_EQ(1, got[2]);
  EXPECT_EQ(0u, device_string(device, CL_DEVICE_VERSION).rfind("OpenCL 1.2 ", 0));
  clReleaseMemObject(out);
  clReleaseKernel(k);
  clReleaseProgram(p);
}

// CTS vectors vec_align_struct: __local data is aligned as its type requires, up to the
// 128 bytes of long16.
TEST_F(ConformanceRegressionTest, LocalDataAlignedForLong16) {
  cl_program p = build(R"(
    typedef struct { char c; long16 v; } S;
    __kernel void align(__local char *arg, __global ulong *out) {
      __local S s;
      __local char pad[3];
      __local long16 w;
      if (get_local_id(0) == 0) {
        pad[0] = 1;
        out[0] = (ulong)&s.v % 128;
        out[1] = (ulong)&w % 128;
        out[2] = (ulong)arg % 128;
        out[3] = (ulong)pad % 16;
      }
    })");
  cl_kernel k = kernel(p, "align");
  cl_mem out = make_buffer(4 * sizeof(cl_ulong));
  CL_OK(clSetKernelArg(k, 0, 3, nullptr));
  CL_OK(clSetKernelArg(k, 1, sizeof(out), &out));
  run(k, 4, 4);
  EXPECT_EQ((std::vector<cl_ulong>{0, 0, 0, 0}), read<cl_ulong>(out, 4));
  clReleaseMemObject(out);
  clReleaseKernel(k);
  clReleaseProgram(p);
}

// CTS printf: vectors of 8 and 16 elements (passed through `...` differently by code built
// for AVX) print their values.
TEST_F(ConformanceRegressionTest, PrintfWideVectors) {
  cl_program p = build(R"(
    __kernel void wide(void) {
      printf("%v8d|%v16hhd|%v8hlf|%v16hd|%v4ld\n", (int8)(1, 2, 3, 4, 5, 6, 7, 8),
             (char16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, -15),
             (float8)(0.5f, 1, 2, 3, 4, 5, 6, -7.25f),
             (short16)(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16),
             (long4)(1, -2, 3, 4000000000L));
    })");
  cl_kernel k = kernel(p, "wide");
  testing::internal::CaptureStdout();
  run(k, 1);
  fflush(stdout);
  std::string got = testing::internal::GetCapturedStdout();
  EXPECT_EQ("1,2,3,4,5,6,7,8|0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,-15|"
            "0.500000,1.000000,2.000000,3.000000,4.000000,5.000000,6.000000,-7.250000|"
            "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16|1,-2,3,4000000000\n",
            got);
  clReleaseKernel(k);
  clReleaseProgram(p);
}

// CTS device_partition: a program built for a device serves the sub-devices of it that are
// in the program's context, without building again.
TEST_F(ConformanceRegressionTest, BuildForParentServesSubDevices) {
  cl_uint max_sub = device_info<cl_uint>(device, CL_DEVICE_PARTITION_MAX_SUB_DEVICES);
  if (max_sub < 2)
    GTEST_SKIP() << "device cannot be partitioned";
  cl_device_partition_property props[] = {CL_DEVICE_PARTITION_EQUALLY,
                                          static_cast<cl_device_partition_property>(
                                              device_info<cl_uint>(device, CL_DEVICE_MAX_COMPUTE_UNITS) /
                                              max_sub),
                                          0};
  cl_uint n = 0;
  CL_OK(clCreateSubDevices(device, props, 0, nullptr, &n));
  std::vector<cl_device_id> devices(n + 1);
  CL_OK(clCreateSubDevices(device, props, n, devices.data(), nullptr));
  devices[n] = device;
  cl_int err = CL_SUCCESS;
  cl_context ctx = clCreateContext(nullptr, n + 1, devices.data(), nullptr, nullptr, &err);
  CL_OK(err);
  const char *source = "__kernel void twice(__global int *x) { x[get_global_id(0)] *= 2; }";
  cl_program p = clCreateProgramWithSource(ctx, 1, &source, nullptr, &err);
  CL_OK(err);
  CL_OK(clBuildProgram(p, 1, &device, "", nullptr, nullptr));
  for (cl_device_id d : devices) {
    cl_build_status status = CL_BUILD_NONE;
    CL_OK(clGetProgramBuildInfo(p, d, CL_PROGRAM_BUILD_STATUS, sizeof(status), &status, nullptr));
    EXPECT_EQ(CL_BUILD_SUCCESS, status);
  }
  cl_kernel k = clCreateKernel(p, "twice", &err);
  CL_OK(err);
  for (cl_uint i = 0; i < n; ++i) {
    cl_command_queue q = clCreateCommandQueue(ctx, devices[i], 0, &err);
    CL_OK(err);
    std::vector<cl_int> data(64, static_cast<cl_int>(i + 1));
    cl_mem buffer = clCreateBuffer(ctx, CL_MEM_COPY_HOST_PTR, data.size() * 4, data.data(), &err);
    CL_OK(err);
    CL_OK(clSetKernelArg(k, 0, sizeof(buffer), &buffer));
    size_t global = data.size();
    CL_OK(clEnqueueNDRangeKernel(q, k, 1, nullptr, &global, nullptr, 0, nullptr, nullptr));
    CL_OK(clEnqueueReadBuffer(q, buffer, CL_TRUE, 0, data.size() * 4, data.data(), 0, nullptr,
                              nullptr));
    EXPECT_EQ(static_cast<cl_int>(2 * (i + 1)), data[63]);
    clReleaseMemObject(buffer);
    clReleaseCommandQueue(q);
  }
  // A build for one sub-device covers neither its siblings nor its parent.
  cl_program only_first = clCreateProgramWithSource(ctx, 1, &source, nullptr, &err);
  CL_OK(clBuildProgram(only_first, 1, &devices[0], "", nullptr, nullptr));
  cl_build_status status = CL_BUILD_SUCCESS;
  CL_OK(clGetProgramBuildInfo(only_first, devices[1], CL_PROGRAM_BUILD_STATUS, sizeof(status),
                              &status, nullptr));
  EXPECT_EQ(CL_BUILD_NONE, status);
  CL_OK(clGetProgramBuildInfo(only_first, device, CL_PROGRAM_BUILD_STATUS, sizeof(status),
                              &status, nullptr));
  EXPECT_EQ(CL_BUILD_NONE, status);
  clReleaseProgram(only_first);
  clReleaseKernel(k);
  clReleaseProgram(p);
  clReleaseContext(ctx);
  for (cl_uint i = 0; i < n; ++i)
    clReleaseDevice(devices[i]);
}

// pyopencl's random number kernels pass long4 / double4 to functions: clang warned that the
// x86-64 calling convention of 256-bit vectors needs AVX (an ABI of ManyCL's own, shared with
// the builtin library), so every build "succeeded with warnings" and -Werror failed it.
TEST_F(ConformanceRegressionTest, WideVectorCallsBuildWithoutAbiWarnings) {
  cl_program p = build(R"(
    long4 twice(long4 v) { return v * 2; }
    float8 halve(float8 v) { return v * 0.5f; }
    __kernel void wide(__global const int4 *in, __global long4 *l, __global float8 *f) {
      size_t i = get_global_id(0);
      l[i] = twice(convert_long4(in[i]));
      f[i] = halve(convert_float8((int8)(in[i], in[i] + 1)));
    })",
                       "-Werror");
  EXPECT_EQ(std::string::npos, build_log(p, device).find("ABI")) << build_log(p, device);
  cl_kernel k = kernel(p, "wide");
  std::vector<cl_int> input(4 * 8);
  for (size_t i = 0; i < input.size(); ++i)
    input[i] = static_cast<cl_int>(i) - 5;
  cl_int err = CL_SUCCESS;
  cl_mem in = clCreateBuffer(context, CL_MEM_COPY_HOST_PTR, input.size() * sizeof(cl_int),
                             input.data(), &err);
  CL_OK(err);
  cl_mem l = make_buffer(input.size() * sizeof(cl_long));
  cl_mem f = make_buffer(2 * input.size() * sizeof(cl_float));
  CL_OK(clSetKernelArg(k, 0, sizeof(in), &in));
  CL_OK(clSetKernelArg(k, 1, sizeof(l), &l));
  CL_OK(clSetKernelArg(k, 2, sizeof(f), &f));
  run(k, input.size() / 4);
  std::vector<cl_long> longs = read<cl_long>(l, input.size());
  std::vector<cl_float> floats = read<cl_float>(f, 2 * input.size());
  for (size_t i = 0; i < input.size(); ++i) {
    EXPECT_EQ(2 * static_cast<cl_long>(input[i]), longs[i]) << i;
    size_t item = i / 4, lane = i % 4;
    EXPECT_EQ(input[i] * 0.5f, floats[item * 8 + lane]) << i;
    EXPECT_EQ((input[i] + 1) * 0.5f, floats[item * 8 + 4 + lane]) << i;
  }
  clReleaseMemObject(in);
  clReleaseMemObject(l);
  clReleaseMemObject(f);
  clReleaseKernel(k);
  clReleaseProgram(p);
}

// CTS half (once cl_khr_fp64 is reported): double -> half conversions have no x86 instruction,
// code generation calls libgcc's __truncdfhf2, which the JIT must resolve.
TEST_F(ConformanceRegressionTest, VstoreHalfFromDouble) {
  cl_program p = build(R"(
    #pragma OPENCL EXTENSION cl_khr_fp64 : enable
    __kernel void store(__global const double *d, __global half *h) {
      size_t i = get_global_id(0);
      vstore_half(d[i], i, h);
      vstore_half_rtz(d[i], i + 4, h);
    })");
  cl_kernel k = kernel(p, "store");
  const cl_double in[4] = {1.0 / 3.0, -2.5, 65504.0, 1e-5};
  cl_mem d = make_buffer(sizeof(in), CL_MEM_COPY_HOST_PTR, const_cast<cl_double *>(in));
  cl_mem h = make_buffer(8 * sizeof(cl_half));
  CL_OK(clSetKernelArg(k, 0, sizeof(d), &d));
  CL_OK(clSetKernelArg(k, 1, sizeof(h), &h));
  run(k, 4);
  // binary16 bit patterns: round to nearest even, then toward zero.
  EXPECT_EQ((std::vector<cl_half>{0x3555, 0xc100, 0x7bff, 0x00a8, 0x3555, 0xc100, 0x7bff, 0x00a7}),
            read<cl_half>(h, 8));
  clReleaseMemObject(d);
  clReleaseMemObject(h);
  clReleaseKernel(k);
  clReleaseProgram(p);
}

// bench/runtime's vector add (NULL local size): barrier-free kernels get groups of up to
// CL_KERNEL_WORK_GROUP_SIZE items and kernels with barriers up to 256, each a divisor of the
// global size; host threads claim runs of groups, and every item still runs exactly once.
TEST_F(ConformanceRegressionTest, DefaultLocalSizeAndGroupClaimsCoverEveryItemOnce) {
  cl_program p = build(R"(
    __kernel void count(__global uint *hits, __global uint *local_sizes) {
      size_t gid = get_global_id(0);
      hits[gid] += 1u;
      if (get_local_id(0) == 0)
        local_sizes[get_group_id(0)] = (uint)get_local_size(0);
    }
    __kernel void count_with_barrier(__global uint *hits, __global uint *local_sizes) {
      size_t gid = get_global_id(0);
      hits[gid] += 1u;
      barrier(CLK_GLOBAL_MEM_FENCE);
      if (get_local_id(0) == 0)
        local_sizes[get_group_id(0)] = (uint)get_local_size(0);
    })");
  size_t max_group = 0;
  cl_kernel probe = kernel(p, "count");
  CL_OK(clGetKernelWorkGroupInfo(probe, device, CL_KERNEL_WORK_GROUP_SIZE, sizeof(max_group),
                                 &max_group, nullptr));
  clReleaseKernel(probe);
  struct Case {
    const char *name;
    size_t global, expected_local;
  };
  const Case cases[] = {{"count", size_t(1) << 20, max_group},
                        {"count", 3000, 1000},
                        {"count_with_barrier", size_t(1) << 16, 256},
                        {"count_with_barrier", 3000, 250}};
  for (const Case &c : cases) {
    SCOPED_TRACE(std::string(c.name) + " global " + std::to_string(c.global));
    cl_kernel k = kernel(p, c.name);
    std::vector<cl_uint> zeros(c.global, 0);
    cl_mem hits = make_buffer(c.global * sizeof(cl_uint), CL_MEM_COPY_HOST_PTR, zeros.data());
    cl_mem sizes = make_buffer(c.global * sizeof(cl_uint), CL_MEM_COPY_HOST_PTR, zeros.data());
    CL_OK(clSetKernelArg(k, 0, sizeof(hits), &hits));
    CL_OK(clSetKernelArg(k, 1, sizeof(sizes), &sizes));
    run(k, c.global);
    auto h = read<cl_uint>(hits, c.global);
    size_t wrong = 0;
    for (cl_uint v : h)
      wrong += v != 1u;
    EXPECT_EQ(0u, wrong) << "items not run exactly once";
    auto l = read<cl_uint>(sizes, c.global / c.expected_local);
    for (size_t g = 0; g < l.size(); ++g)
      ASSERT_EQ(c.expected_local, l[g]) << "group " << g;
    clReleaseMemObject(hits);
    clReleaseMemObject(sizes);
    clReleaseKernel(k);
  }
  clReleaseProgram(p);
}

} // namespace
