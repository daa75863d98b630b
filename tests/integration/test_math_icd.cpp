// Math builtins at the edges the OpenCL C specification pins down (7.4 "Math functions", the
// special-value tables) and cl_khr_fp64, through the ICD loader, for float and double: ilogb
// of NaN, 0 and inf; the powr table; rootn of signed zeros and its double accuracy; tanpi at
// integers and half-integers; remquo's 7 low quotient bits with their sign.
#include <CL/cl.h>

#include <gtest/gtest.h>

#include "../common/cl_session.h"

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace {

struct Cl : manycl_test::ClSession {
  template <class T> cl_mem buffer(std::vector<T> &v) {
    cl_int err;
    cl_mem m = clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, v.size() * sizeof(T),
                              v.data(), &err);
    EXPECT_EQ(err, CL_SUCCESS);
    return m;
  }

  // Runs `kernel` over n work-items with the buffers as arguments, then reads every buffer back.
  template <class... V> void run(cl_program program, const char *name, size_t n, std::vector<V> &...vs) {
    cl_int err;
    cl_kernel k = clCreateKernel(program, name, &err);
    ASSERT_EQ(err, CL_SUCCESS) << name;
    std::vector<cl_mem> mems{buffer(vs)...};
    for (cl_uint i = 0; i < mems.size(); ++i)
      ASSERT_EQ(clSetKernelArg(k, i, sizeof(cl_mem), &mems[i]), CL_SUCCESS);
    ASSERT_EQ(clEnqueueNDRangeKernel(queue, k, 1, nullptr, &n, nullptr, 0, nullptr, nullptr),
              CL_SUCCESS);
    size_t i = 0;
    (void)std::initializer_list<int>{
        (clEnqueueReadBuffer(queue, mems[i++], CL_TRUE, 0, vs.size() * sizeof(V), vs.data(), 0,
                             nullptr, nullptr),
         0)...};
    for (cl_mem m : mems)
      clReleaseMemObject(m);
    clReleaseKernel(k);
  }
};

std::string device_string(cl_device_id d, cl_device_info what) {
  size_t size = 0;
  clGetDeviceInfo(d, what, 0, nullptr, &size);
  std::string s(size, '\0');
  clGetDeviceInfo(d, what, size, s.data(), nullptr);
  return s.c_str();
}

template <class T> const char *type_name();
template <> const char *type_name<float>() { return "float"; }
template <> const char *type_name<double>() { return "double"; }

// The kernels, for T = float or double.
std::string kernels(const char *t) {
  std::string s = R"(
#ifdef USE_DOUBLE
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif
kernel void k_ilogb(global T *x, global int *o) { size_t i = get_global_id(0); o[i] = ilogb(x[i]); }
kernel void k_ilogb_consts(global int *o) { o[0] = FP_ILOGB0; o[1] = FP_ILOGBNAN; }
kernel void k_powr(global T *x, global T *y, global T *o) {
  size_t i = get_global_id(0); o[i] = powr(x[i], y[i]);
}
kernel void k_powr2(global T *x, global T *y, global T *o) {
  size_t i = get_global_id(0); vstore2(powr(vload2(i, x), vload2(i, y)), i, o);
}
kernel void k_rootn(global T *x, global int *n, global T *o) {
  size_t i = get_global_id(0); o[i] = rootn(x[i], n[i]);
}
kernel void k_tanpi(global T *x, global T *o) { size_t i = get_global_id(0); o[i] = tanpi(x[i]); }
kernel void k_remquo(global T *x, global T *y, global T *o, global int *q) {
  size_t i = get_global_id(0); int k; o[i] = remquo(x[i], y[i], &k); q[i] = k;
}
kernel void k_remquo2(global T *x, global T *y, global T *o, global int *q) {
  size_t i = get_global_id(0); int2 k;
  vstore2(remquo(vload2(i, x), vload2(i, y), &k), i, o); vstore2(k, i, q);
}
)";
  std::string head = std::string("#define T ") + t + "\n";
  if (std::string(t) == "double")
    head += "#define USE_DOUBLE 1\n";
  return head + s;
}

template <class T> uint64_t bits(T v) {
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof v);
  return b;
}

// Exact match, with every NaN equal to every NaN and +0 != -0.
template <class T> ::testing::AssertionResult same(T got, T want) {
  if ((std::isnan(got) && std::isnan(want)) || bits(got) == bits(want))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << got << " (bits " << std::hex << bits(got)
                                       << "), want " << std::dec << want << " (bits " << std::hex
                                       << bits(want) << ")";
}

template <class T> double ulps(T got, long double want) {
  int e = std::ilogb(static_cast<T>(want));
  long double ulp = std::ldexp(1.0L, e - (std::numeric_limits<T>::digits - 1));
  return static_cast<double>(std::fabs(static_cast<long double>(got) - want) / ulp);
}

template <class T> class MathEdges : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_NE(cl.platform, nullptr) << manycl_test::kNoPlatformHint;
    program = cl.build(kernels(type_name<T>()));
    ASSERT_NE(program, nullptr);
  }
  void TearDown() override {
    if (program)
      clReleaseProgram(program);
  }
  static constexpr T inf = std::numeric_limits<T>::infinity();
  static constexpr T nan = std::numeric_limits<T>::quiet_NaN();
  Cl cl;
  cl_program program = nullptr;
};
using Types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(MathEdges, Types);

TYPED_TEST(MathEdges, IlogbOfNanZeroInfAndSubnormals) {
  using T = TypeParam;
  using L = std::numeric_limits<T>;
  std::vector<int> consts(2);
  this->cl.run(this->program, "k_ilogb_consts", 1, consts);
  EXPECT_EQ(consts[0], INT_MIN); // FP_ILOGB0
  EXPECT_EQ(consts[1], INT_MAX); // FP_ILOGBNAN
  std::vector<T> x{L::quiet_NaN(), -L::quiet_NaN(), T(0), T(-0.0), L::infinity(), -L::infinity(),
                   T(1), T(0.5), T(-3), L::denorm_min(), L::min(), L::max(),
                   L::min() - L::denorm_min()};
  std::vector<int> want{INT_MAX, INT_MAX, INT_MIN, INT_MIN, INT_MAX, INT_MAX, 0, -1, 1,
                        L::min_exponent - L::digits, L::min_exponent - 1, L::max_exponent - 1,
                        L::min_exponent - 2};
  std::vector<int> got(x.size());
  this->cl.run(this->program, "k_ilogb", x.size(), x, got);
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(got[i], want[i]) << "ilogb(" << x[i] << ")";
}

// OpenCL C: powr(x, y) = exp2(y log2 x), defined for x >= 0 only.
TYPED_TEST(MathEdges, PowrSpecialValueTable) {
  using T = TypeParam;
  const T inf = this->inf, nan = this->nan;
  struct Case {
    T x, y, want;
  };
  std::vector<Case> cases{
      {T(-1), T(2), nan},     {T(-0.5), T(0), nan},   {-inf, T(2), nan},      // x < 0
      {T(0), T(0), nan},      {T(-0.0), T(0), nan},   {T(0), T(-0.0), nan},   // (+-0, +-0)
      {inf, T(0), nan},       {inf, T(-0.0), nan},                            // (+inf, +-0)
      {T(1), inf, nan},       {T(1), -inf, nan},                              // (+1, +-inf)
      {T(2), nan, nan},       {T(0), nan, nan},       {T(1), nan, nan},       // (x, NaN)
      {nan, T(0), nan},       {nan, T(1), nan},                               // (NaN, y)
      {T(0), T(-3), inf},     {T(-0.0), T(-3), inf},  {T(0), -inf, inf},      // (+-0, y < 0)
      {T(0), T(2), T(0)},     {T(-0.0), T(3), T(0)},  {T(-0.0), inf, T(0)},   // (+-0, y > 0)
      {T(4), T(0), T(1)},     {T(4), T(-0.0), T(1)},  {T(1), T(5), T(1)},     // 1
      {T(2), T(10), T(1024)}, {inf, T(2), inf},       {inf, T(-2), T(0)},
      {T(0.5), inf, T(0)},    {T(2), inf, inf},       {T(2), -inf, T(0)},     {T(9), T(0.5), T(3)}};
  while (cases.size() % 4)
    cases.push_back({T(16), T(0.25), T(2)});
  std::vector<T> x, y, got(cases.size()), got2(cases.size());
  for (auto &c : cases) {
    x.push_back(c.x);
    y.push_back(c.y);
  }
  this->cl.run(this->program, "k_powr", cases.size(), x, y, got);
  this->cl.run(this->program, "k_powr2", cases.size() / 2, x, y, got2);
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_TRUE(same(got[i], cases[i].want)) << "powr(" << x[i] << ", " << y[i] << ")";
    EXPECT_TRUE(same(got2[i], cases[i].want)) << "powr2(" << x[i] << ", " << y[i] << ")";
  }
}

TYPED_TEST(MathEdges, RootnSignedZerosInfinitiesAndAccuracy) {
  using T = TypeParam;
  const T inf = this->inf, nan = this->nan;
  struct Case {
    T x;
    int n;
    T want;
  };
  std::vector<Case> cases{
      {T(-0.0), 3, T(-0.0)}, {T(-0.0), -3, -inf},   {T(0), 3, T(0)},     {T(0), -3, inf},
      {T(-0.0), 2, T(0)},    {T(-0.0), -2, inf},    {T(0), -2, inf},     {T(5), 0, nan},
      {T(-8), 2, nan},       {T(-8), 3, T(-2)},     {T(27), 3, T(3)},    {T(-inf), 3, -inf},
      {-inf, -3, T(-0.0)},   {inf, -4, T(0)},       {inf, 5, inf},       {T(-32), -5, T(-0.5)},
      {T(-7), 1, T(-7)},     {T(-4), -1, T(-0.25)}, {nan, 3, nan}};
  std::vector<T> x, got(cases.size());
  std::vector<int> n;
  for (auto &c : cases) {
    x.push_back(c.x);
    n.push_back(c.n);
  }
  this->cl.run(this->program, "k_rootn", cases.size(), x, n, got);
  for (size_t i = 0; i < cases.size(); ++i)
    EXPECT_TRUE(same(got[i], cases[i].want)) << "rootn(" << x[i] << ", " << n[i] << ")";

  // Large |log x| / n: pow(x, 1.0 / n) alone is hundreds of double ulps off for these.
  std::vector<T> ax{T(1e30), T(3e-30), T(1.5e38), T(7.25e-39), std::numeric_limits<T>::max(),
                    std::numeric_limits<T>::denorm_min(), T(-1e30), T(123.456)};
  std::vector<int> an{3, 3, 7, -3, 3, 5, -3, 9};
  std::vector<T> agot(ax.size());
  this->cl.run(this->program, "k_rootn", ax.size(), ax, an, agot);
  for (size_t i = 0; i < ax.size(); ++i) {
    long double want = std::copysign(
        std::pow(std::fabs(static_cast<long double>(ax[i])), 1.0L / an[i]), static_cast<long double>(ax[i]));
    EXPECT_LE(ulps(agot[i], want), 2.0) << "rootn(" << ax[i] << ", " << an[i] << ") = " << agot[i];
  }
}

// tanpi(n) = copysign(0, n) for even n and copysign(0, -n) for odd n; tanpi(n + 1/2) = +inf for
// even n and -inf for odd n.
TYPED_TEST(MathEdges, TanpiAtIntegersAndHalfIntegers) {
  using T = TypeParam;
  const T inf = this->inf, nan = this->nan;
  const T big_odd = std::ldexp(T(1), std::numeric_limits<T>::digits - 1) + 1; // 2^23 + 1 or 2^52 + 1
  struct Case {
    T x, want;
  };
  std::vector<Case> cases{
      {T(0), T(0)},     {T(-0.0), T(-0.0)}, {T(2), T(0)},      {T(-2), T(-0.0)},  {T(1), T(-0.0)},
      {T(-1), T(0)},    {T(3), T(-0.0)},    {T(-5), T(0)},     {T(0.5), inf},     {T(-0.5), -inf},
      {T(1.5), -inf},   {T(-1.5), inf},     {T(2.5), inf},     {T(3.5), -inf},    {T(-2.5), -inf},
      {T(1024.5), inf}, {T(1025.5), -inf},  {inf, nan},        {-inf, nan},       {nan, nan},
      {big_odd, T(-0.0)}, {-big_odd, T(0)}, {T(1) / std::numeric_limits<T>::epsilon() * 4, T(0)}};
  std::vector<T> x, got(cases.size());
  for (auto &c : cases)
    x.push_back(c.x);
  this->cl.run(this->program, "k_tanpi", cases.size(), x, got);
  for (size_t i = 0; i < cases.size(); ++i)
    EXPECT_TRUE(same(got[i], cases[i].want)) << "tanpi(" << x[i] << ")";

  // Away from the special points: within the spec's 6 ulps of tan(pi x) in long double.
  std::vector<T> ax{T(0.25), T(-0.75), T(0.125), T(0.4999), T(-1.4999), T(1e-30), T(100.3), T(0.5) - std::numeric_limits<T>::epsilon()};
  std::vector<T> agot(ax.size());
  this->cl.run(this->program, "k_tanpi", ax.size(), ax, agot);
  const long double pi = 3.141592653589793238462643383279502884L;
  for (size_t i = 0; i < ax.size(); ++i) {
    // Reduced to |f| <= 1/2 and, near the pole, reflected so that the long double reference
    // itself stays far more accurate than a double ulp.
    long double v = static_cast<long double>(ax[i]), f = v - std::nearbyint(v), g = std::fabs(f);
    long double t = g > 0.25L ? 1.0L / std::tan(pi * (0.5L - g)) : std::tan(pi * g);
    long double want = f < 0 ? -t : t;
    EXPECT_LE(ulps(agot[i], want), 2.0) << "tanpi(" << ax[i] << ") = " << agot[i];
  }
}

// The quotient of x / y rounded to nearest (ties to even), from exact integer arithmetic for
// integral x and y: quotient (mod 128) and the remainder.
template <class T> void exact_remquo(T x, T y, T &rem, int &quo7) {
  __int128 X = static_cast<__int128>(x), Y = static_cast<__int128>(y);
  __int128 q = X / Y, r = X - q * Y; // truncated
  __int128 ay = Y < 0 ? -Y : Y, ar = r < 0 ? -r : r;
  if (2 * ar > ay || (2 * ar == ay && (q & 1))) {
    bool same_sign = (r < 0) == (Y < 0);
    q += same_sign ? 1 : -1;
    r = X - q * Y;
  }
  __int128 aq = q < 0 ? -q : q;
  quo7 = static_cast<int>(aq % 128) * (q < 0 ? -1 : 1);
  rem = static_cast<T>(r);
  if (r == 0)
    rem = std::copysign(T(0), x);
}

TYPED_TEST(MathEdges, RemquoSevenQuotientBitsWithSign) {
  using T = TypeParam;
  struct Case {
    T x, y;
  };
  // Integral operands (exact reference below): quotients from 0 to far beyond 2^7, both signs,
  // ties, and quotients with more than 64 bits.
  std::vector<Case> cases{{100, 1},     {-100, 1},  {100, -1},    {-100, -1},   {300, 1},
                          {-300, 7},    {127, 1},   {128, 1},     {129, -1},    {11, 2},
                          {13, 2},      {-11, 2},   {5, 10},      {15, 10},     {1000003, 3},
                          {T(1e30), 3}, {T(-1e30), 7}, {T(3e37), -11}, {T(1.5e30), T(1.25e6)},
                          {7, 7},       {-7, 7},    {0, 3},       {1, 3}};
  std::vector<T> x, y, got(cases.size());
  std::vector<int> q(cases.size());
  for (auto &c : cases) {
    x.push_back(c.x);
    y.push_back(c.y);
  }
  this->cl.run(this->program, "k_remquo", cases.size(), x, y, got, q);
  for (size_t i = 0; i < cases.size(); ++i) {
    T rem;
    int quo7;
    exact_remquo(x[i], y[i], rem, quo7);
    EXPECT_TRUE(same(got[i], rem)) << "remquo(" << x[i] << ", " << y[i] << ") remainder";
    EXPECT_EQ(q[i], quo7) << "remquo(" << x[i] << ", " << y[i] << ") quotient";
    EXPECT_LT(std::abs(q[i]), 128);
    // The remainder is IEEE remainder(), exactly.
    EXPECT_TRUE(same(got[i], std::remainder(x[i], y[i])));
  }

  // Fractional operands: the remainder is remainder() and the quotient's 7 low bits match
  // (x - r) / y, which is exact here.
  std::vector<T> fx{T(7.25), T(-7.25), T(100.5), T(-1000.75), T(5.5), T(4.5), T(-0.0), T(37.125)},
      fy{T(0.5), T(0.75), T(-0.25), T(0.125), T(1), T(1), T(2), T(-0.375)};
  std::vector<T> fgot(fx.size());
  std::vector<int> fq(fx.size());
  this->cl.run(this->program, "k_remquo2", fx.size() / 2, fx, fy, fgot, fq);
  for (size_t i = 0; i < fx.size(); ++i) {
    T r = std::remainder(fx[i], fy[i]);
    long long full = std::llround((static_cast<long double>(fx[i]) - r) / fy[i]);
    int want = static_cast<int>(std::llabs(full) % 128) * (full < 0 ? -1 : 1);
    EXPECT_TRUE(same(fgot[i], r)) << "remquo(" << fx[i] << ", " << fy[i] << ")";
    EXPECT_EQ(fq[i], want) << "remquo(" << fx[i] << ", " << fy[i] << ") quotient";
  }
  // Undefined quotient, but a NaN remainder: y = 0, x infinite, NaN operands.
  std::vector<T> nx{T(1), this->inf, this->nan, T(1)}, ny{T(0), T(1), T(1), this->nan};
  std::vector<T> ngot(nx.size());
  std::vector<int> nq(nx.size());
  this->cl.run(this->program, "k_remquo", nx.size(), nx, ny, ngot, nq);
  for (size_t i = 0; i < nx.size(); ++i)
    EXPECT_TRUE(std::isnan(ngot[i])) << "remquo(" << nx[i] << ", " << ny[i] << ")";
}

// half_powr shares powr's special-value table (half_ changes only the accuracy).
TEST(MathEdgesHalf, HalfPowrSpecialValues) {
  Cl cl;
  ASSERT_NE(cl.platform, nullptr) << manycl_test::kNoPlatformHint;
  cl_program p = cl.build(R"(
kernel void k(global float *x, global float *y, global float *o) {
  size_t i = get_global_id(0); o[i] = half_powr(x[i], y[i]);
})");
  ASSERT_NE(p, nullptr);
  const float inf = INFINITY, nan = NAN;
  std::vector<float> x{-1, 0, -0.0f, inf, 1, 2, nan, 0, 4, 0}, y{2, 0, 0, 0, inf, nan, 1, -3, 0, 2};
  std::vector<float> want{nan, nan, nan, nan, nan, nan, nan, inf, 1, 0}, got(x.size());
  cl.run(p, "k", x.size(), x, y, got);
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_TRUE(same(got[i], want[i])) << "half_powr(" << x[i] << ", " << y[i] << ")";
  clReleaseProgram(p);
}

// glibc's double cbrt is up to about 2 ulps off at these (the CTS math_brute_force cases);
// OpenCL allows 2, the builtin corrects it to within one.
TEST(MathEdgesDouble, CbrtWithinOneUlp) {
  Cl cl;
  ASSERT_NE(cl.platform, nullptr) << manycl_test::kNoPlatformHint;
  cl_program p = cl.build(R"(
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
kernel void k(global double *x, global double *o) { size_t i = get_global_id(0); o[i] = cbrt(x[i]); })");
  ASSERT_NE(p, nullptr);
  std::vector<double> x{-0x1.27p+898, -0x1.27p+961, 27.0, -8.0, 0x1p-1074, 0x1.fffffffffffffp+1023,
                        1e-310, 3.0, -0.0, INFINITY, -INFINITY};
  std::vector<double> got(x.size());
  cl.run(p, "k", x.size(), x, got);
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] == 0 || std::isinf(x[i])) {
      EXPECT_TRUE(same(got[i], x[i])) << "cbrt(" << x[i] << ")";
      continue;
    }
    EXPECT_LE(ulps(got[i], std::cbrt(static_cast<long double>(x[i]))), 1.0) << "cbrt(" << x[i] << ")";
  }
  EXPECT_EQ(got[2], 3.0);
  EXPECT_EQ(got[3], -2.0);
  clReleaseProgram(p);
}

TEST(Fp64, ReportedByTheDevice) {
  Cl cl;
  ASSERT_NE(cl.platform, nullptr) << manycl_test::kNoPlatformHint;
  std::string ext = " " + device_string(cl.device, CL_DEVICE_EXTENSIONS) + " ";
  EXPECT_NE(ext.find(" cl_khr_fp64 "), std::string::npos) << ext;

  // What the host's binary64 really gives, and the minimum OpenCL 1.2 sets for cl_khr_fp64.
  cl_device_fp_config config = 0;
  ASSERT_EQ(clGetDeviceInfo(cl.device, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof config, &config, nullptr),
            CL_SUCCESS);
  EXPECT_EQ(config, cl_device_fp_config(CL_FP_FMA | CL_FP_ROUND_TO_NEAREST | CL_FP_ROUND_TO_ZERO |
                                        CL_FP_ROUND_TO_INF | CL_FP_INF_NAN | CL_FP_DENORM));
  for (cl_device_info w : {CL_DEVICE_PREFERRED_VECTOR_WIDTH_DOUBLE, CL_DEVICE_NATIVE_VECTOR_WIDTH_DOUBLE}) {
    cl_uint width = 0;
    ASSERT_EQ(clGetDeviceInfo(cl.device, w, sizeof width, &width, nullptr), CL_SUCCESS);
    EXPECT_GE(width, 2u) << w; // non-zero: doubles are supported (one host vector register)
  }
}

TEST(Fp64, DefinedInKernelsAndComputesInDouble) {
  Cl cl;
  ASSERT_NE(cl.platform, nullptr) << manycl_test::kNoPlatformHint;
  const char *src = R"(
#ifndef cl_khr_fp64
#error cl_khr_fp64 is not defined
#endif
#if __OPENCL_C_VERSION__ >= 300 && !defined(__opencl_c_fp64)
#error __opencl_c_fp64 is not defined
#endif
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
kernel void k(global double *a, global double *b, global double *o) {
  size_t i = get_global_id(0);
  o[4 * i] = fma(a[i], b[i], -a[i] * b[i]); // the product's rounding error
  o[4 * i + 1] = (a[i] + 0x1p-40) - a[i];
  o[4 * i + 2] = sqrt(b[i]);
  double2 v = (double2)(a[i], b[i]);
  o[4 * i + 3] = dot(v, v);
})";
  for (const char *options : {"", "-cl-std=CL1.2", "-cl-std=CL3.0"}) {
    cl_program p = cl.build(src, options);
    ASSERT_NE(p, nullptr) << options;
    std::vector<double> a{1.0 / 3, 1.0, 1e300}, b{3.0 + 0x1p-50, 2.0, 1e-300};
    std::vector<double> o(4 * a.size());
    cl.run(p, "k", a.size(), a, b, o);
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(o[4 * i], std::fma(a[i], b[i], -(a[i] * b[i]))) << options << " " << i;
      EXPECT_EQ(o[4 * i + 1], (a[i] + 0x1p-40) - a[i]) << options << " " << i;
      EXPECT_EQ(o[4 * i + 2], std::sqrt(b[i])) << options << " " << i;
      EXPECT_EQ(o[4 * i + 3], a[i] * a[i] + b[i] * b[i]) << options << " " << i;
    }
    EXPECT_EQ(o[1], 0x1p-40); // would be 0 in float
    clReleaseProgram(p);
  }
}

} // namespace
