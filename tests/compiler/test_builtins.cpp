// Builtin library: math accuracy spot checks, conversions, integer, vector,
// atomics, async copies, printf.
#include "helpers.h"

#include <cmath>
#include <cstring>
#include <numeric>

using namespace mct;

static int64_t ulpDiff(float a, double ref) {
  if (std::isnan(a) && std::isnan(ref))
    return 0;
  if (std::isinf(ref) && a == float(ref))
    return 0;
  float r = float(ref);
  double ulp = std::ldexp(1.0, std::ilogb(r == 0 ? std::numeric_limits<float>::min() : r) - 23);
  return int64_t(std::fabs(double(a) - ref) / ulp);
}

static void run1D(const Program &p, const char *k, std::vector<ArgValue> args, size_t n,
                  size_t ls = 0, ExecMode mode = ExecMode::LWI) {
  NDRange r;
  r.global[0] = n;
  r.local[0] = ls ? ls : n;
  Status s = runND(p, k, args, r, mode);
  ASSERT_TRUE(s) << s.message;
}

TEST(Builtins, MathAccuracy) {
  auto p = buildLoad(R"(
    __kernel void m(__global const float* x, __global float* out) {
      size_t i = get_global_id(0);
      float v = x[i];
      __global float* o = out + i * 16;
      o[0] = sin(v); o[1] = cos(v); o[2] = exp(v * 0.1f); o[3] = log(fabs(v) + 1.0f);
      o[4] = pow(fabs(v), 1.7f); o[5] = sqrt(fabs(v)); o[6] = tanh(v * 0.2f); o[7] = sinpi(v);
      o[8] = atan2(v, 3.0f); o[9] = rsqrt(fabs(v) + 1.0f); o[10] = cbrt(v); o[11] = exp2(v * 0.1f);
      o[12] = cospi(v); o[13] = log2(fabs(v) + 2.0f); o[14] = fma(v, v, 1.0f); o[15] = hypot(v, 2.0f);
    })");
  ASSERT_TRUE(p);
  const int n = 256;
  std::vector<float> x(n), out(n * 16);
  for (int i = 0; i < n; ++i)
    x[i] = -20.0f + 40.0f * float(i) / n + 0.0123f * float(i % 7);
  run1D(*p, "m", {ArgValue::pointer(x.data()), ArgValue::pointer(out.data())}, n, 64);
  const double pi = 3.14159265358979323846;
  for (int i = 0; i < n; ++i) {
    double v = x[i];
    double ref[16] = {std::sin(v),
                      std::cos(v),
                      std::exp(double(float(v * 0.1f))),
                      std::log(double(float(std::fabs(v) + 1.0f))),
                      std::pow(std::fabs(v), 1.7),
                      std::sqrt(std::fabs(v)),
                      std::tanh(double(float(v * 0.2f))),
                      std::sin(pi * std::fmod(v, 2.0)),
                      std::atan2(v, 3.0),
                      1.0 / std::sqrt(double(float(std::fabs(v) + 1.0f))),
                      std::cbrt(v),
                      std::exp2(double(float(v * 0.1f))),
                      std::cos(pi * std::fmod(v, 2.0)),
                      std::log2(double(float(std::fabs(v) + 2.0f))),
                      std::fma(v, v, 1.0),
                      std::hypot(v, 2.0)};
    (void)0;
    int64_t lim[16] = {4, 4, 3, 3, 16, 3, 5, 4, 6, 2, 2, 3, 4, 3, 0, 4};
    for (int f = 0; f < 16; ++f) {
      if (f == 7 || f == 12) {
        ASSERT_NEAR(out[i * 16 + f], ref[f], 2e-6) << "fn " << f << " x=" << v;
        continue;
      }
      ASSERT_LE(ulpDiff(out[i * 16 + f], ref[f]), lim[f])
          << "fn " << f << " x=" << v << " got " << out[i * 16 + f];
    }
  }
}

TEST(Builtins, Conversions) {
  auto p = buildLoad(R"(
    __kernel void c(__global const float* f, __global const int* n, __global int* o) {
      o[0] = convert_int_sat(f[0]);       // 1e10 -> INT_MAX
      o[1] = convert_int_sat(f[1]);       // -1e10 -> INT_MIN
      o[2] = convert_int_sat(f[2]);       // NaN -> 0
      o[3] = convert_int_rte(f[3]);       // 2.5 -> 2
      o[4] = convert_int_rtp(f[3]);       // 3
      o[5] = convert_int_rtn(-f[3]);      // -3
      o[6] = convert_int(f[4]);           // -2.7 -> -2 (rtz)
      o[7] = convert_uchar_sat(n[0]);     // 300 -> 255
      o[8] = convert_char_sat(n[1]);      // -300 -> -128
      o[9] = convert_uint_sat(n[1]) == 0; // negative -> 0
      o[10] = as_int(convert_float_rtz(n[2]));  // 16777217 -> 16777216
      o[11] = as_int(convert_float_rtp(n[2]));  // -> 16777218
      o[12] = as_int(convert_float_rtn(-n[2])); // -> -16777218
      o[13] = as_int(convert_float(n[2]));      // rte -> 16777216
      short4 s = convert_short4_sat((int4)(40000, -40000, 5, -5));
      o[14] = s.x; o[15] = s.y; o[16] = s.z; o[17] = s.w;
      uchar4 u = convert_uchar4_sat_rte((float4)(-1.0f, 254.5f, 255.5f, 1000.0f));
      o[18] = u.x; o[19] = u.y; o[20] = u.z; o[21] = u.w;
      o[22] = as_int(1.0f);
      o[23] = convert_long_sat(1e30f) == LONG_MAX;
      o[24] = convert_ulong_sat(-1.0f) == 0;
      o[25] = as_int(convert_float_rtz(1.0000001)); // double -> float rtz
    })");
  ASSERT_TRUE(p);
  float f[5] = {1e10f, -1e10f, NAN, 2.5f, -2.7f};
  int n[3] = {300, -300, 16777217};
  std::vector<int> o(32, -99);
  run1D(*p, "c", {ArgValue::pointer(f), ArgValue::pointer(n), ArgValue::pointer(o.data())}, 1);
  auto fi = [](float x) {
    int i;
    std::memcpy(&i, &x, 4);
    return i;
  };
  EXPECT_EQ(o[0], INT32_MAX);
  EXPECT_EQ(o[1], INT32_MIN);
  EXPECT_EQ(o[2], 0);
  EXPECT_EQ(o[3], 2);
  EXPECT_EQ(o[4], 3);
  EXPECT_EQ(o[5], -3);
  EXPECT_EQ(o[6], -2);
  EXPECT_EQ(o[7], 255);
  EXPECT_EQ(o[8], -128);
  EXPECT_EQ(o[9], 1);
  EXPECT_EQ(o[10], fi(16777216.0f));
  EXPECT_EQ(o[11], fi(16777218.0f));
  EXPECT_EQ(o[12], fi(-16777218.0f));
  EXPECT_EQ(o[13], fi(16777216.0f));
  EXPECT_EQ(o[14], 32767);
  EXPECT_EQ(o[15], -32768);
  EXPECT_EQ(o[16], 5);
  EXPECT_EQ(o[17], -5);
  EXPECT_EQ(o[18], 0);
  EXPECT_EQ(o[19], 254);
  EXPECT_EQ(o[20], 255);
  EXPECT_EQ(o[21], 255);
  EXPECT_EQ(o[22], 0x3f800000);
  EXPECT_EQ(o[23], 1);
  EXPECT_EQ(o[24], 1);
  EXPECT_EQ(o[25], fi(1.0f));
}

TEST(Builtins, IntegerAndRelational) {
  auto p = buildLoad(R"(
    __kernel void i(__global int* o, __global long* l) {
      o[0] = mul_hi(0x40000000, 8);
      o[1] = rotate(0x80000001u, 1u);
      o[2] = clz(1);
      o[3] = popcount(0xF0F0);
      o[4] = add_sat((char)120, (char)10);
      o[5] = abs(-7);
      o[6] = hadd(7, 4);
      o[7] = rhadd(7, 4);
      o[8] = mad_sat(0x7fffffff, 2, 0);
      o[9] = upsample((short)1, (ushort)2);
      o[10] = max(3, 9) + min(3, 9) * 100;
      o[11] = clamp(15, 0, 10);
      o[12] = isnan(NAN) + 2 * isinf(INFINITY) + 4 * signbit(-0.0f);
      int4 c = isless((float4)(1, 5, 2, 8), (float4)(2, 2, 2, 9));
      o[13] = c.x; o[14] = c.y; o[15] = c.z; o[16] = c.w;
      o[17] = any((int4)(0, 0, -1, 0)) + 2 * all((int4)(-1, -1, -1, 0));
      o[18] = select(1, 2, 1);
      int4 s = select((int4)(1, 2, 3, 4), (int4)(10, 20, 30, 40), (int4)(0, -1, 0, -1));
      o[19] = s.x + s.y + s.z + s.w;
      o[20] = sub_sat(0u, 5u);
      o[21] = abs_diff(-5, 10);
      l[0] = mul_hi((long)0x4000000000000000L, 8L);
      l[1] = mul_hi(0xffffffffffffffffUL, 2UL);
      l[2] = upsample(1, 2u);
    })");
  ASSERT_TRUE(p);
  std::vector<int> o(32, -99);
  std::vector<int64_t> l(4, -99);
  run1D(*p, "i", {ArgValue::pointer(o.data()), ArgValue::pointer(l.data())}, 1);
  EXPECT_EQ(o[0], 2);
  EXPECT_EQ(uint32_t(o[1]), 3u);
  EXPECT_EQ(o[2], 31);
  EXPECT_EQ(o[3], 8);
  EXPECT_EQ(o[4], 127);
  EXPECT_EQ(o[5], 7);
  EXPECT_EQ(o[6], 5);
  EXPECT_EQ(o[7], 6);
  EXPECT_EQ(o[8], INT32_MAX);
  EXPECT_EQ(o[9], 0x10002);
  EXPECT_EQ(o[10], 309);
  EXPECT_EQ(o[11], 10);
  EXPECT_EQ(o[12], 7);
  EXPECT_EQ(o[13], -1);
  EXPECT_EQ(o[14], 0);
  EXPECT_EQ(o[15], 0);
  EXPECT_EQ(o[16], -1);
  EXPECT_EQ(o[17], 1);
  EXPECT_EQ(o[18], 2);
  EXPECT_EQ(o[19], 1 + 20 + 3 + 40);
  EXPECT_EQ(o[20], 0);
  EXPECT_EQ(o[21], 15);
  EXPECT_EQ(l[0], 2);
  EXPECT_EQ(l[1], 1);
  EXPECT_EQ(l[2], (int64_t(1) << 32) | 2);
}

TEST(Builtins, VectorsGeometricAndLoadStore) {
  auto p = buildLoad(R"(
    __kernel void v(__global const float* in, __global float* out, float4 k, int3 idx) {
      size_t i = get_global_id(0);
      float4 a = vload4(i, in);
      float4 b = a * k + (float4)(1.0f);
      vstore4(b.wzyx, i, out);
      if (i == 0) {
        __global float* o = out + 4 * get_global_size(0);
        float3 c = cross((float3)(1, 0, 0), (float3)(0, 1, 0));
        o[0] = c.z;
        o[1] = dot((float4)(1, 2, 3, 4), (float4)(1, 1, 1, 1));
        o[2] = length((float2)(3, 4));
        float4 n = normalize((float4)(0, 0, 5, 0));
        o[3] = n.z;
        uint4 m = (uint4)(3, 2, 1, 0);
        float4 sh = shuffle((float4)(10, 20, 30, 40), m);
        o[4] = sh.x; o[5] = sh.w;
        o[6] = idx.x + idx.y * 10 + idx.z * 100;
        float8 e = (float8)(1, 2, 3, 4, 5, 6, 7, 8);
        o[7] = e.s7 + e.hi.x + e.odd.y;
        double2 d = (double2)(0.5, 0.25);
        o[8] = (float)(d.x + d.y);
        o[9] = distance((float4)(1, 1, 1, 1), (float4)(2, 2, 2, 2));
        o[10] = vload3(1, in).z;
      }
    })");
  ASSERT_TRUE(p);
  const int n = 64;
  std::vector<float> in(4 * n), out(4 * n + 16, 0);
  std::iota(in.begin(), in.end(), 0.0f);
  float k[4] = {2, 3, 4, 5};
  int idx[4] = {1, 2, 3, 0};
  for (ExecMode m : {ExecMode::LWI, ExecMode::SPMD}) {
    run1D(*p, "v",
          {ArgValue::pointer(in.data()), ArgValue::pointer(out.data()), ArgValue::value(k, 16),
           ArgValue::value(idx, 16)},
          n, 16, m);
    for (int i = 0; i < n; ++i)
      for (int c = 0; c < 4; ++c)
        ASSERT_EQ(out[4 * i + c], in[4 * i + 3 - c] * k[3 - c] + 1) << i;
    float *o = out.data() + 4 * n;
    EXPECT_EQ(o[0], 1);
    EXPECT_EQ(o[1], 10);
    EXPECT_EQ(o[2], 5);
    EXPECT_EQ(o[3], 1);
    EXPECT_EQ(o[4], 40);
    EXPECT_EQ(o[5], 10);
    EXPECT_EQ(o[6], 321);
    EXPECT_EQ(o[7], 8 + 5 + 4);
    EXPECT_EQ(o[8], 0.75f);
    EXPECT_EQ(o[9], 2);
    EXPECT_EQ(o[10], 5);
  }
}

class Atomics : public testing::TestWithParam<ModeParam> {};
TEST_P(Atomics, GlobalAndLocal) {
  auto p = buildLoad(R"(
    __kernel void hist(__global const uint* in, __global uint* hist, __global int* cnt, __global int* mm) {
      __local uint lh[16];
      size_t l = get_local_id(0);
      if (l < 16) lh[l] = 0;
      barrier(CLK_LOCAL_MEM_FENCE);
      atomic_inc(&lh[in[get_global_id(0)] % 16]);
      atomic_add(cnt, 1);
      atomic_max(&mm[0], (int)get_global_id(0));
      atomic_min(&mm[1], -(int)get_global_id(0));
      barrier(CLK_LOCAL_MEM_FENCE);
      if (l < 16) atomic_add(&hist[l], lh[l]);
    }
    __kernel void cas(__global int* v) {
      int old, nv;
      do { old = *v; nv = old + 2; } while (atomic_cmpxchg(v, old, nv) != old);
    })");
  ASSERT_TRUE(p);
  const int n = 1024;
  std::vector<uint32_t> in(n), hist(16, 0);
  for (int i = 0; i < n; ++i)
    in[i] = uint32_t(i * 7 + 3);
  int cnt = 0;
  int mm[2] = {-1, 1};
  NDRange r;
  r.global[0] = n;
  r.local[0] = 64;
  ASSERT_TRUE(runND(*p, "hist",
                    {ArgValue::pointer(in.data()), ArgValue::pointer(hist.data()),
                     ArgValue::pointer(&cnt), ArgValue::pointer(mm)},
                    r, GetParam().mode, GetParam().pes));
  std::vector<uint32_t> ref(16, 0);
  for (int i = 0; i < n; ++i)
    ref[in[i] % 16]++;
  EXPECT_EQ(hist, ref);
  EXPECT_EQ(cnt, n);
  EXPECT_EQ(mm[0], n - 1);
  EXPECT_EQ(mm[1], -(n - 1));
  int v = 0;
  ASSERT_TRUE(runND(*p, "cas", {ArgValue::pointer(&v)}, r, GetParam().mode, GetParam().pes));
  EXPECT_EQ(v, 2 * n);
}
INSTANTIATE_TEST_SUITE_P(Modes, Atomics,
                         testing::Values(ModeParam{ExecMode::LWI, 1}, ModeParam{ExecMode::SPMD, 4}),
                         modeName);

class Async : public testing::TestWithParam<ModeParam> {};
TEST_P(Async, CopyAndStrided) {
  auto p = buildLoad(R"(
    __kernel void scale(__global const float* in, __global float* out, __local float* buf) {
      size_t n = get_local_size(0), g = get_group_id(0);
      event_t e = async_work_group_copy(buf, in + g * n, n, 0);
      wait_group_events(1, &e);
      buf[get_local_id(0)] *= 2.0f;
      barrier(CLK_LOCAL_MEM_FENCE);
      // write out transposed by 2: strided store of even elements
      event_t e2 = async_work_group_strided_copy(out + g * n, buf, n / 2, 2, 0);
      event_t e3 = async_work_group_copy(out + g * n + 1, buf + n / 2, 0, e2);
      wait_group_events(1, &e3);
    }
    __kernel void gather(__global const int* in, __global int* out) {
      __local int t[32];
      event_t e = async_work_group_strided_copy(t, in, 32, 3, 0);
      wait_group_events(1, &e);
      out[get_global_id(0)] = t[get_local_id(0)];
      prefetch(in, 4);
    })");
  ASSERT_TRUE(p);
  const int ls = 32, groups = 4, n = ls * groups;
  std::vector<float> in(n), out(n, -1);
  std::iota(in.begin(), in.end(), 0.0f);
  NDRange r;
  r.global[0] = n;
  r.local[0] = ls;
  ASSERT_TRUE(
      runND(*p, "scale",
            {ArgValue::pointer(in.data()), ArgValue::pointer(out.data()), ArgValue::local(ls * 4)},
            r, GetParam().mode, GetParam().pes));
  for (int g = 0; g < groups; ++g)
    for (int i = 0; i < ls / 2; ++i)
      ASSERT_EQ(out[g * ls + 2 * i], 2 * in[g * ls + i]);
  std::vector<int> gi(32 * 3), go(32, 0);
  std::iota(gi.begin(), gi.end(), 0);
  NDRange r2;
  r2.global[0] = 32;
  r2.local[0] = 32;
  ASSERT_TRUE(runND(*p, "gather", {ArgValue::pointer(gi.data()), ArgValue::pointer(go.data())}, r2,
                    GetParam().mode, GetParam().pes));
  for (int i = 0; i < 32; ++i)
    ASSERT_EQ(go[i], 3 * i);
}
INSTANTIATE_TEST_SUITE_P(Modes, Async,
                         testing::Values(ModeParam{ExecMode::LWI, 1}, ModeParam{ExecMode::SPMD, 4}),
                         modeName);

TEST(Builtins, Printf) {
  auto p = buildLoad(R"(
    __kernel void pr(int n) {
      printf("i=%d f=%.3f s=%s v=%v4hlf c=%c x=%x l=%ld h=%v2hd e=%5.1e %%\n", n, 1.5f, "str",
             (float4)(1, 2, 3, 4), 'A', 255, 1234567890123L, (short2)(-1, 7), 31415.9f);
      printf("u=%v3hhu d=%v2f\n", (uchar3)(1, 2, 250), (double2)(0.5, -2.25));
    })");
  ASSERT_TRUE(p);
  int n = 42;
  testing::internal::CaptureStdout();
  run1D(*p, "pr", {ArgValue::of(n)}, 1);
  fflush(stdout);
  std::string got = testing::internal::GetCapturedStdout();
  EXPECT_EQ(got,
            "i=42 f=1.500 s=str v=1.000000,2.000000,3.000000,4.000000 c=A x=ff l=1234567890123 "
            "h=-1,7 e=3.1e+04 %\nu=1,2,250 d=0.500000,-2.250000\n");
}

TEST(Builtins, HalfStorageAndDouble) {
  auto p = buildLoad(R"(
    __kernel void h(__global const float* f, __global half* hs, __global float* back, __global double* d) {
      vstore_half(f[0], 0, hs);          // 1/3 rte
      vstore_half_rtz(f[0], 1, hs);
      vstore_half_rtp(f[0], 2, hs);
      vstore_half_rtn(-f[0], 3, hs);
      vstore_half4(vload4(0, f + 4), 1, hs);
      vstore_half_rtz(f[1], 8, hs);      // 1e6 -> 65504 with rtz
      back[0] = vload_half(0, hs);
      float4 v = vload_half4(1, hs);
      back[1] = v.x + v.y + v.z + v.w;
      double x = d[0];
      d[1] = sqrt(x) + exp(x) + sin(x);
      d[2] = convert_double(f[0]);
      d[3] = fma(x, x, 1.0);
    })");
  ASSERT_TRUE(p);
  float f[8] = {1.0f / 3.0f, 1e6f, 0, 0, 1, 2, 3, 4};
  uint16_t hs[12] = {};
  float back[2] = {};
  double d[4] = {0.7, 0, 0, 0};
  run1D(
      *p, "h",
      {ArgValue::pointer(f), ArgValue::pointer(hs), ArgValue::pointer(back), ArgValue::pointer(d)},
      1);
  EXPECT_EQ(hs[0], 0x3555); // 0.33325 (rte)
  EXPECT_EQ(hs[1], 0x3555); // rtz
  EXPECT_EQ(hs[2], 0x3556); // rtp
  EXPECT_EQ(hs[3], 0xb556); // rtn of negative
  EXPECT_EQ(hs[4], 0x3c00);
  EXPECT_EQ(hs[7], 0x4400);
  EXPECT_EQ(hs[8], 0x7bff);
  EXPECT_NEAR(back[0], 1.0f / 3.0f, 1e-3);
  EXPECT_EQ(back[1], 10.0f);
  EXPECT_DOUBLE_EQ(d[1], std::sqrt(0.7) + std::exp(0.7) + std::sin(0.7));
  EXPECT_EQ(d[2], double(1.0f / 3.0f));
  EXPECT_DOUBLE_EQ(d[3], 0.7 * 0.7 + 1.0);
}
