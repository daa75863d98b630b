// ManyCL OpenCL C builtin library (definitions for the declarations of
// Clang's opencl-c.h). Compiled to bitcode at build time twice:
//   -cl-std=CL1.2                          everything, named address spaces
//   -cl-std=CL2.0 -DMANYCL_GENERIC_ONLY    the generic-address-space
//                                          overloads of pointer builtins
// and linked into one module; the compiler links only what a program uses.
// Work-item functions and barrier() are lowered by the compiler itself.
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#pragma OPENCL EXTENSION cl_khr_fp16 : enable

#define OVL __attribute__((overloadable))
#define INL __attribute__((always_inline))

#define FOR_N(M, ...) M(2, __VA_ARGS__) M(3, __VA_ARGS__) M(4, __VA_ARGS__) M(8, __VA_ARGS__) M(16, __VA_ARGS__)
#define FOR_INT(M, ...) M(char, __VA_ARGS__) M(uchar, __VA_ARGS__) M(short, __VA_ARGS__) M(ushort, __VA_ARGS__) \
  M(int, __VA_ARGS__) M(uint, __VA_ARGS__) M(long, __VA_ARGS__) M(ulong, __VA_ARGS__)
#define FOR_FLT(M, ...) M(float, __VA_ARGS__) M(double, __VA_ARGS__)
#define FOR_ALL(M, ...) FOR_INT(M, __VA_ARGS__) FOR_FLT(M, __VA_ARGS__)

// Component-wise vector versions from the scalar ones.
#define V1(N, RT, T, NAME) \
  RT##N OVL NAME(T##N x) { RT##N r; for (int i = 0; i < N; ++i) r[i] = NAME(x[i]); return r; }
#define V2(N, RT, T, NAME) \
  RT##N OVL NAME(T##N x, T##N y) { RT##N r; for (int i = 0; i < N; ++i) r[i] = NAME(x[i], y[i]); return r; }
#define V3(N, RT, T, NAME) \
  RT##N OVL NAME(T##N x, T##N y, T##N z) { RT##N r; for (int i = 0; i < N; ++i) r[i] = NAME(x[i], y[i], z[i]); return r; }
// f(vector, scalar)
#define V2S(N, RT, T, NAME) \
  RT##N OVL NAME(T##N x, T y) { RT##N r; for (int i = 0; i < N; ++i) r[i] = NAME(x[i], y); return r; }
#define V3SS(N, RT, T, NAME) \
  RT##N OVL NAME(T##N x, T y, T z) { RT##N r; for (int i = 0; i < N; ++i) r[i] = NAME(x[i], y, z); return r; }
// f(vector, intN)
#define V2I(N, RT, T, NAME) \
  RT##N OVL NAME(T##N x, int##N y) { RT##N r; for (int i = 0; i < N; ++i) r[i] = NAME(x[i], y[i]); return r; }

#define FOR_RND(M, ...) M(, __VA_ARGS__) M(_rte, __VA_ARGS__) M(_rtz, __VA_ARGS__) M(_rtp, __VA_ARGS__) M(_rtn, __VA_ARGS__)
#define ADDR_SPACES(M, ...) M(__global, __VA_ARGS__) M(__local, __VA_ARGS__) M(__private, __VA_ARGS__)
#ifdef MANYCL_GENERIC_ONLY
#undef ADDR_SPACES
#define ADDR_SPACES(M, ...) M(, __VA_ARGS__)
#endif

// ===================================================================== math
#ifndef MANYCL_GENERIC_ONLY
// Host libm (resolved by the JIT from the process).
#define LIBM1(name) float name##f(float); double __host_##name(double) __asm__(#name);
#define LIBM2(name) float name##f(float, float); double __host_##name(double, double) __asm__(#name);
LIBM1(acos) LIBM1(acosh) LIBM1(asin) LIBM1(asinh) LIBM1(atan) LIBM1(atanh) LIBM1(cbrt)
LIBM1(cos) LIBM1(cosh) LIBM1(erfc) LIBM1(erf) LIBM1(exp) LIBM1(exp2) LIBM1(exp10) LIBM1(expm1)
LIBM1(lgamma) LIBM1(log) LIBM1(log2) LIBM1(log10) LIBM1(log1p) LIBM1(logb) LIBM1(sin) LIBM1(sinh)
LIBM1(tan) LIBM1(tanh) LIBM1(tgamma)
LIBM2(atan2) LIBM2(fmod) LIBM2(hypot) LIBM2(nextafter) LIBM2(pow) LIBM2(remainder)
float lgammaf_r(float, int *);
double __host_lgamma_r(double, int *) __asm__("lgamma_r");

#define WRAP1(name) \
  float OVL name(float x) { return name##f(x); } \
  double OVL name(double x) { return __host_##name(x); } \
  FOR_N(V1, float, float, name) FOR_N(V1, double, double, name)
#define WRAP2(name) \
  float OVL name(float x, float y) { return name##f(x, y); } \
  double OVL name(double x, double y) { return __host_##name(x, y); } \
  FOR_N(V2, float, float, name) FOR_N(V2, double, double, name)

WRAP1(acos) WRAP1(acosh) WRAP1(asin) WRAP1(asinh) WRAP1(atan) WRAP1(atanh)
WRAP1(cos) WRAP1(cosh) WRAP1(erfc) WRAP1(erf) WRAP1(exp) WRAP1(exp2) WRAP1(exp10) WRAP1(expm1)
WRAP1(lgamma) WRAP1(log) WRAP1(log2) WRAP1(log10) WRAP1(log1p) WRAP1(logb) WRAP1(sin) WRAP1(sinh)
WRAP1(tan) WRAP1(tanh) WRAP1(tgamma)
WRAP2(atan2) WRAP2(fmod) WRAP2(hypot) WRAP2(nextafter) WRAP2(pow) WRAP2(remainder)

// cbrt: glibc's double cbrt is up to about 2 ulps off (OpenCL allows 2). One Newton step on
// m = x / 2^(3k) in [0.5, 4), with y^3 carried in two doubles (fma gives the rounding errors),
// brings it within half an ulp plus one rounding; the scaling keeps y^3 clear of overflow and
// subnormals.
float OVL cbrt(float x) { return cbrtf(x); }
double OVL cbrt(double x) {
  if (x == 0 || __builtin_isinf(x) || __builtin_isnan(x)) return x;
  int e;
  double f = __builtin_frexp(__builtin_fabs(x), &e);
  int r = ((e % 3) + 3) % 3, k = (e - r) / 3;
  double m = __builtin_ldexp(f, r), y = __host_cbrt(m);
  double y2 = y * y, y2e = __builtin_fma(y, y, -y2);
  double y3 = y2 * y, y3e = __builtin_fma(y2, y, -y3) + y2e * y;
  y -= ((y3 - m) + y3e) / (3.0 * y2);
  return __builtin_copysign(__builtin_ldexp(y, k), x);
}
FOR_N(V1, float, float, cbrt) FOR_N(V1, double, double, cbrt)

// LLVM intrinsics (vectorizable, correctly rounded).
#define INTR1(name, bf, bd) \
  float OVL name(float x) { return bf(x); } \
  double OVL name(double x) { return bd(x); } \
  FOR_N(V1, float, float, name) FOR_N(V1, double, double, name)
INTR1(sqrt, __builtin_sqrtf, __builtin_sqrt)
INTR1(fabs, __builtin_fabsf, __builtin_fabs)
INTR1(floor, __builtin_floorf, __builtin_floor)
INTR1(ceil, __builtin_ceilf, __builtin_ceil)
INTR1(trunc, __builtin_truncf, __builtin_trunc)
INTR1(rint, __builtin_rintf, __builtin_rint)
INTR1(round, __builtin_roundf, __builtin_round)
#define INTR2(name, bf, bd) \
  float OVL name(float x, float y) { return bf(x, y); } \
  double OVL name(double x, double y) { return bd(x, y); } \
  FOR_N(V2, float, float, name) FOR_N(V2, double, double, name)
INTR2(copysign, __builtin_copysignf, __builtin_copysign)
INTR2(fmax, __builtin_fmaxf, __builtin_fmax)
INTR2(fmin, __builtin_fminf, __builtin_fmin)
FOR_N(V2S, float, float, fmax) FOR_N(V2S, double, double, fmax)
FOR_N(V2S, float, float, fmin) FOR_N(V2S, double, double, fmin)

float OVL fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
double OVL fma(double a, double b, double c) { return __builtin_fma(a, b, c); }
FOR_N(V3, float, float, fma) FOR_N(V3, double, double, fma)
#pragma OPENCL FP_CONTRACT ON
float OVL mad(float a, float b, float c) { return a * b + c; }
double OVL mad(double a, double b, double c) { return a * b + c; }
#pragma OPENCL FP_CONTRACT OFF
FOR_N(V3, float, float, mad) FOR_N(V3, double, double, mad)

#define M_PI_D 3.14159265358979323846
// Accurate float versions computed in double.
float OVL rsqrt(float x) { return (float)(1.0 / __builtin_sqrt((double)x)); }
double OVL rsqrt(double x) { return 1.0 / __builtin_sqrt(x); }
float OVL acospi(float x) { return (float)(__host_acos((double)x) / M_PI_D); }
double OVL acospi(double x) { return __host_acos(x) / M_PI_D; }
float OVL asinpi(float x) { return (float)(__host_asin((double)x) / M_PI_D); }
double OVL asinpi(double x) { return __host_asin(x) / M_PI_D; }
float OVL atanpi(float x) { return (float)(__host_atan((double)x) / M_PI_D); }
double OVL atanpi(double x) { return __host_atan(x) / M_PI_D; }
float OVL atan2pi(float y, float x) { return (float)(__host_atan2((double)y, (double)x) / M_PI_D); }
double OVL atan2pi(double y, double x) { return __host_atan2(y, x) / M_PI_D; }
// pi as a sum of two doubles, for arguments pi * r carried to about 106 bits.
#define MCL_PI_HI 0x1.921fb54442d18p+1
#define MCL_PI_LO 0x1.1a62633145c07p-53
// sin, cos and tan of pi * r (|r| <= 0.5) for the double versions: the product's rounding
// error (up to an ulp) is folded back in by a first-order correction, which keeps the results
// within an ulp or two where sin/tan are steep relative to their value.
static double mcl_sin_pi(double r) {
  double hi = MCL_PI_HI * r, lo = __builtin_fma(MCL_PI_HI, r, -hi) + MCL_PI_LO * r;
  return __host_sin(hi) + lo * __host_cos(hi);
}
static double mcl_cos_pi(double r) {
  double hi = MCL_PI_HI * r, lo = __builtin_fma(MCL_PI_HI, r, -hi) + MCL_PI_LO * r;
  return __host_cos(hi) - lo * __host_sin(hi);
}
static double mcl_tan_pi(double r) {
  double hi = MCL_PI_HI * r, lo = __builtin_fma(MCL_PI_HI, r, -hi) + MCL_PI_LO * r;
  double t = __host_tan(hi);
  return t + lo * (1.0 + t * t);
}
float OVL sinpi(float x) {
  if (__builtin_isinf(x)) return __builtin_nanf("");
  double r = (double)x - 2.0 * __builtin_rint((double)x * 0.5);
  float s = (float)__host_sin(M_PI_D * r);
  return r == 0.0 || __builtin_fabs(r) == 1.0 ? __builtin_copysignf(0.0f, x) : s;
}
double OVL sinpi(double x) {
  if (__builtin_isinf(x)) return __builtin_nan("");
  // r in [-1, 1], then folded into [-0.5, 0.5] (sin(pi r) = sin(pi (1 - r))), all exact.
  double r = x - 2.0 * __builtin_rint(x * 0.5);
  if (r > 0.5) r = 1.0 - r;
  else if (r < -0.5) r = -1.0 - r;
  if (r == 0.0) return __builtin_copysign(0.0, x);
  return mcl_sin_pi(r);
}
float OVL cospi(float x) {
  if (__builtin_isinf(x)) return __builtin_nanf("");
  double r = __builtin_fabs((double)x - 2.0 * __builtin_rint((double)x * 0.5));
  if (r == 0.5) return 0.0f;
  return (float)__host_cos(M_PI_D * r);
}
double OVL cospi(double x) {
  if (__builtin_isinf(x)) return __builtin_nan("");
  double r = __builtin_fabs(x - 2.0 * __builtin_rint(x * 0.5)); // [0, 1]
  if (r == 0.5) return 0.0;
  // Near the zero at 1/2, cos(pi r) = sin(pi (1/2 - r)); 1/2 - r is exact for r in [1/4, 1].
  return r < 0.25 ? mcl_cos_pi(r) : mcl_sin_pi(0.5 - r);
}
// tanpi (OpenCL C 7.4 edge cases): tanpi(+-0) = +-0; tanpi(+-inf) = NaN; at an integer n the
// zero is copysign(0, n) for even n and copysign(0, -n) for odd n; at n + 1/2 the result is
// +inf for even n and -inf for odd n. tanpi is odd, so |x| is reduced and the sign applied last.
double OVL tanpi(double x) {
  if (__builtin_isinf(x) || __builtin_isnan(x)) return x - x;
  double ax = __builtin_fabs(x), r;
  if (ax >= 0x1p53) {
    r = 0.0; // every double this large is an even integer
  } else {
    double k = __builtin_floor(ax), f = ax - k; // both exact
    int odd = __builtin_floor(k * 0.5) != k * 0.5;
    if (f == 0.0) {
      r = odd ? -0.0 : 0.0;
    } else if (f == 0.5) {
      r = odd ? -__builtin_inf() : __builtin_inf();
    } else {
      // g: distance to the nearest integer (exact); beyond 1/4, tan(pi g) = 1 / tan(pi (1/2 - g)).
      double g = f < 0.5 ? f : 1.0 - f;
      double t = g > 0.25 ? 1.0 / mcl_tan_pi(0.5 - g) : mcl_tan_pi(g);
      r = f < 0.5 ? t : -t;
    }
  }
  return __builtin_signbit(x) ? -r : r;
}
float OVL tanpi(float x) { return (float)tanpi((double)x); }
// powr(x, y) = exp2(y * log2(x)), for x >= 0 only (OpenCL C 7.4 edge cases): NaN for x < 0,
// for (+-0, +-0), (+inf, +-0), (+1, +-inf) and any NaN operand; +inf for (+-0, y < 0), +0 for
// (+-0, y > 0), 1 for (x > 0 finite, +-0) and (+1, finite y); the rest is pow.
#define MCL_POWR(T, POW)                                                                       \
  T OVL powr(T x, T y) {                                                                       \
    if (__builtin_isnan(x) || __builtin_isnan(y)) return x + y;                                \
    if (x < 0) return (T)__builtin_nan("");                                                    \
    if (x == 1) return __builtin_isinf(y) ? (T)__builtin_nan("") : (T)1;                       \
    if (y == 0) return x == 0 || __builtin_isinf(x) ? (T)__builtin_nan("") : (T)1;             \
    if (x == 0) return y < 0 ? (T)__builtin_inf() : (T)0;                                      \
    return POW(x, y);                                                                          \
  }
MCL_POWR(float, powf)
MCL_POWR(double, __host_pow)
float OVL pown(float x, int n) { return (float)__host_pow((double)x, (double)n); }
double OVL pown(double x, int n) { return __host_pow(x, (double)n); }
// rootn edge cases: NaN for n = 0 and for x < 0 with n even; for odd n the result has the sign
// of x (rootn(-0, 3) = -0, rootn(-0, -3) = -inf), for even n it is positive.
float OVL rootn(float x, int n) {
  if (n == 0 || (x < 0 && (n & 1) == 0)) return __builtin_nanf("");
  // In double, the rounding of 1/n moves the result by far less than a float ulp.
  double r = __host_pow(__builtin_fabs((double)x), 1.0 / n);
  return (float)((n & 1) ? __builtin_copysign(r, (double)x) : r);
}
double OVL rootn(double x, int n) {
  if (n == 0 || (x < 0 && (n & 1) == 0)) return __builtin_nan("");
  double ax = __builtin_fabs(x), r;
  if (n == 1) {
    r = ax;
  } else if (n == -1) {
    r = 1.0 / ax;
  } else {
    // 1/n = hi + lo exactly enough: x^(1/n) = x^hi * x^lo, and x^lo = 1 + lo ln(x) to far
    // below an ulp. pow(x, hi) alone is off by |ln(x) / n| ulps (hundreds for large x).
    double dn = (double)n, hi = 1.0 / dn;
    r = __host_pow(ax, hi);
    if (ax != 0 && !__builtin_isinf(ax) && r != 0 && !__builtin_isinf(r)) {
      double lo = __builtin_fma(-hi, dn, 1.0) / dn;
      r = __builtin_fma(r, lo * __host_log(ax), r);
    }
  }
  return (n & 1) ? __builtin_copysign(r, x) : r;
}
float OVL fdim(float x, float y) { return x != x || y != y ? __builtin_nanf("") : (x > y ? x - y : 0.0f); }
double OVL fdim(double x, double y) { return x != x || y != y ? __builtin_nan("") : (x > y ? x - y : 0.0); }
float OVL maxmag(float x, float y) { float ax = __builtin_fabsf(x), ay = __builtin_fabsf(y); return ax > ay ? x : ay > ax ? y : __builtin_fmaxf(x, y); }
double OVL maxmag(double x, double y) { double ax = __builtin_fabs(x), ay = __builtin_fabs(y); return ax > ay ? x : ay > ax ? y : __builtin_fmax(x, y); }
float OVL minmag(float x, float y) { float ax = __builtin_fabsf(x), ay = __builtin_fabsf(y); return ax < ay ? x : ay < ax ? y : __builtin_fminf(x, y); }
double OVL minmag(double x, double y) { double ax = __builtin_fabs(x), ay = __builtin_fabs(y); return ax < ay ? x : ay < ax ? y : __builtin_fmin(x, y); }
float OVL ldexp(float x, int n) { return __builtin_ldexpf(x, n); }
double OVL ldexp(double x, int n) { return __builtin_ldexp(x, n); }
// ilogb from the bits: the host's ilogb follows C (FP_ILOGBNAN = INT_MIN on glibc), OpenCL C
// wants FP_ILOGBNAN (INT_MAX) for NaN, FP_ILOGB0 for +-0 and INT_MAX for +-inf.
int OVL ilogb(float x) {
  uint u = as_uint(x) & 0x7fffffffu;
  if (u >= 0x7f800000u) return u == 0x7f800000u ? INT_MAX : FP_ILOGBNAN;
  if (u == 0) return FP_ILOGB0;
  if (u < 0x00800000u) return -118 - (int)__builtin_clz(u); // subnormal: 31 - clz - 149
  return (int)(u >> 23) - 127;
}
int OVL ilogb(double x) {
  ulong u = as_ulong(x) & 0x7ffffffffffffffful;
  if (u >= 0x7ff0000000000000ul) return u == 0x7ff0000000000000ul ? INT_MAX : FP_ILOGBNAN;
  if (u == 0) return FP_ILOGB0;
  if (u < 0x0010000000000000ul) return -1011 - (int)__builtin_clzl(u); // 63 - clz - 1074
  return (int)(u >> 52) - 1023;
}
float OVL nan(uint c) { return as_float(0x7fc00000u | (c & 0x3fffffu)); }
double OVL nan(ulong c) { return as_double(0x7ff8000000000000ul | (c & 0x7fffffffffffful)); }
FOR_N(V1, float, float, rsqrt) FOR_N(V1, double, double, rsqrt)
FOR_N(V1, float, float, acospi) FOR_N(V1, double, double, acospi)
FOR_N(V1, float, float, asinpi) FOR_N(V1, double, double, asinpi)
FOR_N(V1, float, float, atanpi) FOR_N(V1, double, double, atanpi)
FOR_N(V1, float, float, sinpi) FOR_N(V1, double, double, sinpi)
FOR_N(V1, float, float, cospi) FOR_N(V1, double, double, cospi)
FOR_N(V1, float, float, tanpi) FOR_N(V1, double, double, tanpi)
FOR_N(V2, float, float, atan2pi) FOR_N(V2, double, double, atan2pi)
FOR_N(V2, float, float, powr) FOR_N(V2, double, double, powr)
FOR_N(V2, float, float, fdim) FOR_N(V2, double, double, fdim)
FOR_N(V2, float, float, maxmag) FOR_N(V2, double, double, maxmag)
FOR_N(V2, float, float, minmag) FOR_N(V2, double, double, minmag)
FOR_N(V2I, float, float, pown) FOR_N(V2I, double, double, pown)
FOR_N(V2I, float, float, rootn) FOR_N(V2I, double, double, rootn)
FOR_N(V2I, float, float, ldexp) FOR_N(V2I, double, double, ldexp)
#define VLDEXP_S(N, T) T##N OVL ldexp(T##N x, int n) { T##N r; for (int i = 0; i < N; ++i) r[i] = ldexp(x[i], n); return r; }
FOR_N(VLDEXP_S, float) FOR_N(VLDEXP_S, double)
FOR_N(V1, int, float, ilogb) FOR_N(V1, int, double, ilogb)
#define VNAN(N, T, U) T##N OVL nan(U##N c) { T##N r; for (int i = 0; i < N; ++i) r[i] = nan(c[i]); return r; }
FOR_N(VNAN, float, uint) FOR_N(VNAN, double, ulong)

// half_ and native_ variants: full precision versions.
#define ALIAS1(pre, name) \
  float OVL pre##name(float x) { return name(x); } \
  FOR_N(V1, float, float, pre##name)
#define ALIAS2(pre, name) \
  float OVL pre##name(float x, float y) { return name(x, y); } \
  FOR_N(V2, float, float, pre##name)
#define ALIASES(pre) \
  ALIAS1(pre, cos) ALIAS1(pre, exp) ALIAS1(pre, exp2) ALIAS1(pre, exp10) ALIAS1(pre, log) \
  ALIAS1(pre, log2) ALIAS1(pre, log10) ALIAS1(pre, rsqrt) ALIAS1(pre, sin) ALIAS1(pre, sqrt) \
  ALIAS1(pre, tan) ALIAS2(pre, powr)
ALIASES(half_) ALIASES(native_)
float OVL half_divide(float x, float y) { return x / y; }
float OVL native_divide(float x, float y) { return x / y; }
float OVL half_recip(float x) { return 1.0f / x; }
float OVL native_recip(float x) { return 1.0f / x; }
FOR_N(V2, float, float, half_divide) FOR_N(V2, float, float, native_divide)
FOR_N(V1, float, float, half_recip) FOR_N(V1, float, float, native_recip)
#endif // !MANYCL_GENERIC_ONLY

// Math builtins with pointer arguments (per address space).
#define PTRMATH(AS, T, IT)                                                              \
  T OVL fract(T x, AS T *ip) {                                                          \
    T f = __builtin_floor(x); *ip = f;                                                   \
    if (x != x) return x;                                                                \
    if (__builtin_isinf(x)) return __builtin_copysign((T)0, x);                          \
    T r = x - f; T lim = (T)1 - (sizeof(T) == 4 ? (T)0x1p-24 : (T)0x1p-53);            \
    return r < lim ? r : lim;                                                            \
  }                                                                                      \
  T OVL modf(T x, AS T *ip) {                                                           \
    T i = __builtin_trunc(x); *ip = i;                                                   \
    if (__builtin_isinf(x)) return __builtin_copysign((T)0, x);                          \
    return __builtin_copysign(x - i, x);                                                 \
  }                                                                                      \
  T OVL frexp(T x, AS int *e) { int t; T r = __builtin_frexp(x, &t); *e = t; return r; } \
  T OVL sincos(T x, AS T *c) { *c = cos(x); return sin(x); }                             \
  T OVL lgamma_r(T x, AS int *s) { int t; T r = MANYCL_LGR(x, &t); *s = t; return r; }   \
  T OVL remquo(T x, T y, AS int *q) { int t; T r = MANYCL_RQ(x, y, &t); *q = t; return r; }
#ifdef MANYCL_GENERIC_ONLY
float lgammaf_r(float, int *);
double __host_lgamma_r(double, int *) __asm__("lgamma_r");
float fmodf(float, float);
double __host_fmod(double, double) __asm__("fmod");
#endif
static float OVL MANYCL_LGR(float x, int *s) { return lgammaf_r(x, s); }
static double OVL MANYCL_LGR(double x, int *s) { return __host_lgamma_r(x, s); }
// remquo: OpenCL C wants at least the 7 low bits of the quotient (glibc's remquo gives 3).
// fmod by 128 |y| keeps the quotient modulo 128 (and its parity, for ties), then binary long
// division finds the rest: every subtraction r - 2^k |y| with 2^k |y| <= r < 2^(k+1) |y| is
// exact (Sterbenz), and so is the final rounding step, so r is the exact IEEE remainder.
#define MCL_REMQUO(T, FMOD)                                                                    \
  static T OVL MANYCL_RQ(T x, T y, int *quo) {                                                 \
    *quo = 0;                                                                                  \
    if (__builtin_isnan(x) || __builtin_isnan(y) || __builtin_isinf(x) || y == 0)              \
      return (T)__builtin_nan("");                                                             \
    if (__builtin_isinf(y) || x == 0) return x;                                                \
    T ay = __builtin_fabs(y);                                                                  \
    T r = __builtin_fabs(x);                                                                   \
    if (r >= ay * (T)128) r = FMOD(r, ay * (T)128);                                            \
    int q = 0;                                                                                 \
    for (int b = 64; b >= 1; b >>= 1)                                                          \
      if (r >= ay * (T)b) { r -= ay * (T)b; q += b; }                                          \
    if ((T)2 * r > ay || ((T)2 * r == ay && (q & 1))) { r -= ay; ++q; }                        \
    q &= 127;                                                                                  \
    *quo = (__builtin_signbit(x) != 0) != (__builtin_signbit(y) != 0) ? -q : q;                \
    return __builtin_signbit(x) ? -r : r;                                                      \
  }
MCL_REMQUO(float, fmodf)
MCL_REMQUO(double, __host_fmod)
#define PTRMATH_V(N, AS, T)                                                                       \
  T##N OVL fract(T##N x, AS T##N *ip) { T##N r, f; for (int i = 0; i < N; ++i) { T t; r[i] = fract(x[i], &t); f[i] = t; } *ip = f; return r; } \
  T##N OVL modf(T##N x, AS T##N *ip) { T##N r, f; for (int i = 0; i < N; ++i) { T t; r[i] = modf(x[i], &t); f[i] = t; } *ip = f; return r; } \
  T##N OVL sincos(T##N x, AS T##N *c) { T##N r, f; for (int i = 0; i < N; ++i) { T t; r[i] = sincos(x[i], &t); f[i] = t; } *c = f; return r; } \
  T##N OVL frexp(T##N x, AS int##N *e) { T##N r; int##N f; for (int i = 0; i < N; ++i) { int t; r[i] = frexp(x[i], &t); f[i] = t; } *e = f; return r; } \
  T##N OVL lgamma_r(T##N x, AS int##N *e) { T##N r; int##N f; for (int i = 0; i < N; ++i) { int t; r[i] = lgamma_r(x[i], &t); f[i] = t; } *e = f; return r; } \
  T##N OVL remquo(T##N x, T##N y, AS int##N *e) { T##N r; int##N f; for (int i = 0; i < N; ++i) { int t; r[i] = remquo(x[i], y[i], &t); f[i] = t; } *e = f; return r; }
#define PTRMATH_ALL(AS, _) PTRMATH(AS, float, int) PTRMATH(AS, double, int) \
  FOR_N(PTRMATH_V, AS, float) FOR_N(PTRMATH_V, AS, double)
ADDR_SPACES(PTRMATH_ALL, _)

#ifndef MANYCL_GENERIC_ONLY
// ================================================================= integer
#define UT_char uchar
#define UT_uchar uchar
#define UT_short ushort
#define UT_ushort ushort
#define UT_int uint
#define UT_uint uint
#define UT_long ulong
#define UT_ulong ulong
#define UTYPE(T) UT_##T
#define ISSIGNED(T) ((T)(-1) < (T)0)
#define BITS(T) ((int)sizeof(T) * 8)
#define MCL_MAX(T) (ISSIGNED(T) ? (T)(((ulong)1 << (BITS(T) - 1)) - 1) : (T)-1)
#define MCL_MIN(T) (ISSIGNED(T) ? (T)((ulong)1 << (BITS(T) - 1)) : (T)0)

#define INT_SCALAR(T, _)                                                                       \
  UTYPE(T) OVL abs(T x) { UTYPE(T) u = (UTYPE(T))x; return ISSIGNED(T) && x < 0 ? (UTYPE(T))(0 - u) : u; } \
  UTYPE(T) OVL abs_diff(T x, T y) { return x > y ? (UTYPE(T))((UTYPE(T))x - (UTYPE(T))y) : (UTYPE(T))((UTYPE(T))y - (UTYPE(T))x); } \
  T OVL add_sat(T x, T y) {                                                                    \
    T r;                                                                                       \
    if (__builtin_add_overflow(x, y, &r)) return ISSIGNED(T) ? (x < 0 ? MCL_MIN(T) : MCL_MAX(T)) : MCL_MAX(T); \
    return r;                                                                                  \
  }                                                                                            \
  T OVL sub_sat(T x, T y) {                                                                    \
    T r;                                                                                       \
    if (__builtin_sub_overflow(x, y, &r)) return ISSIGNED(T) ? (x < 0 ? MCL_MIN(T) : MCL_MAX(T)) : (T)0; \
    return r;                                                                                  \
  }                                                                                            \
  T OVL hadd(T x, T y) { return (x >> 1) + (y >> 1) + (x & y & 1); }                           \
  T OVL rhadd(T x, T y) { return (x >> 1) + (y >> 1) + ((x | y) & 1); }                        \
  T OVL max(T x, T y) { return x > y ? x : y; }                                                \
  T OVL min(T x, T y) { return x < y ? x : y; }                                                \
  T OVL clamp(T x, T lo, T hi) { return min(max(x, lo), hi); }                                 \
  T OVL clz(T x) {                                                                             \
    UTYPE(T) u = (UTYPE(T))x;                                                                  \
    if (u == 0) return (T)BITS(T);                                                             \
    return (T)(__builtin_clzl((ulong)u) - (64 - BITS(T)));                                    \
  }                                                                                            \
  T OVL popcount(T x) { return (T)__builtin_popcountl((ulong)(UTYPE(T))x); }                 \
  T OVL rotate(T x, T n) {                                                                     \
    UTYPE(T) u = (UTYPE(T))x; int s = (int)((UTYPE(T))n & (BITS(T) - 1));                      \
    return s == 0 ? x : (T)((UTYPE(T))(u << s) | (UTYPE(T))(u >> (BITS(T) - s)));             \
  }                                                                                            \
  T OVL mad24(T a, T b, T c) { return a * b + c; }                                             \
  T OVL mul24(T a, T b) { return a * b; }
FOR_INT(INT_SCALAR, _)
#define INT_VEC(T, _) FOR_N(V1, UTYPE(T), T, abs) FOR_N(V2, UTYPE(T), T, abs_diff)              \
  FOR_N(V2, T, T, add_sat) FOR_N(V2, T, T, sub_sat) FOR_N(V2, T, T, hadd) FOR_N(V2, T, T, rhadd) \
  FOR_N(V2, T, T, max) FOR_N(V2, T, T, min) FOR_N(V3, T, T, clamp) FOR_N(V1, T, T, clz)       \
  FOR_N(V1, T, T, popcount) FOR_N(V2, T, T, rotate) FOR_N(V2S, T, T, max) FOR_N(V2S, T, T, min) \
  FOR_N(V3SS, T, T, clamp) FOR_N(V3, T, T, mad24) FOR_N(V2, T, T, mul24)
// helper so that UTYPE(T)##N pastes correctly
#define V1X(N, RT, T, NAME) V1(N, RT, T, NAME)
#define V2X(N, RT, T, NAME) V2(N, RT, T, NAME)
#define V1U(N, T, NAME) V1X(N, UTYPE(T), T, NAME)
#define V2U(N, T, NAME) V2X(N, UTYPE(T), T, NAME)
#define INT_VEC2(T, _) FOR_N(V1U, T, abs) FOR_N(V2U, T, abs_diff)                               \
  FOR_N(V2, T, T, add_sat) FOR_N(V2, T, T, sub_sat) FOR_N(V2, T, T, hadd) FOR_N(V2, T, T, rhadd) \
  FOR_N(V2, T, T, max) FOR_N(V2, T, T, min) FOR_N(V3, T, T, clamp) FOR_N(V1, T, T, clz)       \
  FOR_N(V1, T, T, popcount) FOR_N(V2, T, T, rotate) FOR_N(V2S, T, T, max) FOR_N(V2S, T, T, min) \
  FOR_N(V3SS, T, T, clamp) FOR_N(V3, T, T, mad24) FOR_N(V2, T, T, mul24)
FOR_INT(INT_VEC2, _)

// mul_hi / mad_hi / mad_sat / upsample
#define MULHI_NARROW(T, W)                                                                     \
  T OVL mul_hi(T a, T b) { return (T)(((W)a * (W)b) >> BITS(T)); }                             \
  T OVL mad_hi(T a, T b, T c) { return mul_hi(a, b) + c; }                                     \
  T OVL mad_sat(T a, T b, T c) {                                                               \
    long r = (long)a * (long)b + (long)c;                                                      \
    long lo = ISSIGNED(T) ? -(1l << (BITS(T) - 1)) : 0;                                        \
    long hi = ISSIGNED(T) ? (1l << (BITS(T) - 1)) - 1 : (long)((1ul << BITS(T)) - 1);          \
    return (T)(r < lo ? lo : r > hi ? hi : r);                                                 \
  }
MULHI_NARROW(char, short) MULHI_NARROW(uchar, ushort) MULHI_NARROW(short, int)
MULHI_NARROW(ushort, uint) MULHI_NARROW(int, long) MULHI_NARROW(uint, ulong)
long OVL mul_hi(long a, long b) { return (long)(((__int128)a * (__int128)b) >> 64); }
ulong OVL mul_hi(ulong a, ulong b) { return (ulong)(((unsigned __int128)a * (unsigned __int128)b) >> 64); }
long OVL mad_hi(long a, long b, long c) { return mul_hi(a, b) + c; }
ulong OVL mad_hi(ulong a, ulong b, ulong c) { return mul_hi(a, b) + c; }
long OVL mad_sat(long a, long b, long c) {
  __int128 r = (__int128)a * (__int128)b + (__int128)c;
  __int128 hi = (__int128)0x7fffffffffffffffl, lo = -hi - 1;
  return (long)(r < lo ? lo : r > hi ? hi : r);
}
ulong OVL mad_sat(ulong a, ulong b, ulong c) {
  unsigned __int128 r = (unsigned __int128)a * (unsigned __int128)b + (unsigned __int128)c;
  return r > (unsigned __int128)0xfffffffffffffffful ? 0xfffffffffffffffful : (ulong)r;
}
#define MULHI_V(T, _) FOR_N(V2, T, T, mul_hi) FOR_N(V3, T, T, mad_hi) FOR_N(V3, T, T, mad_sat)
FOR_INT(MULHI_V, _)
#define UPS(HT, LT, RT) RT OVL upsample(HT hi, LT lo) { return ((RT)hi << (BITS(LT))) | (RT)lo; }
#define UPSV(N, HT, LT, RT) RT##N OVL upsample(HT##N hi, LT##N lo) { RT##N r; for (int i = 0; i < N; ++i) r[i] = upsample(hi[i], lo[i]); return r; }
UPS(char, uchar, short) UPS(uchar, uchar, ushort) UPS(short, ushort, int) UPS(ushort, ushort, uint)
UPS(int, uint, long) UPS(uint, uint, ulong)
FOR_N(UPSV, char, uchar, short) FOR_N(UPSV, uchar, uchar, ushort) FOR_N(UPSV, short, ushort, int)
FOR_N(UPSV, ushort, ushort, uint) FOR_N(UPSV, int, uint, long) FOR_N(UPSV, uint, uint, ulong)

// ================================================================== common
#define COMMON_F(T, _)                                                                         \
  T OVL clamp(T x, T lo, T hi) { return fmin(fmax(x, lo), hi); }                               \
  T OVL degrees(T r) { return (T)(180.0 / M_PI_D) * r; }                                      \
  T OVL radians(T d) { return (T)(M_PI_D / 180.0) * d; }                                      \
  T OVL max(T x, T y) { return fmax(x, y); }                                                   \
  T OVL min(T x, T y) { return fmin(x, y); }                                                   \
  T OVL mix(T x, T y, T a) { return x + (y - x) * a; }                                         \
  T OVL step(T edge, T x) { return x < edge ? (T)0 : (T)1; }                                   \
  T OVL smoothstep(T e0, T e1, T x) { T t = clamp((x - e0) / (e1 - e0), (T)0, (T)1); return t * t * ((T)3 - (T)2 * t); } \
  T OVL sign(T x) { return x != x ? (T)0 : x > 0 ? (T)1 : x < 0 ? (T)-1 : x; }
FOR_FLT(COMMON_F, _)
#define STEP_SV(N, T)                                                                          \
  T##N OVL step(T edge, T##N x) { T##N r; for (int i = 0; i < N; ++i) r[i] = step(edge, x[i]); return r; } \
  T##N OVL smoothstep(T e0, T e1, T##N x) { T##N r; for (int i = 0; i < N; ++i) r[i] = smoothstep(e0, e1, x[i]); return r; } \
  T##N OVL mix(T##N x, T##N y, T a) { T##N r; for (int i = 0; i < N; ++i) r[i] = mix(x[i], y[i], a); return r; }
#define COMMON_FV(T, _) FOR_N(V3, T, T, clamp) FOR_N(V3SS, T, T, clamp) FOR_N(V1, T, T, degrees)      \
  FOR_N(V1, T, T, radians) FOR_N(V2, T, T, max) FOR_N(V2, T, T, min) FOR_N(V2S, T, T, max)           \
  FOR_N(V2S, T, T, min) FOR_N(V3, T, T, mix) FOR_N(V2, T, T, step) FOR_N(V3, T, T, smoothstep)        \
  FOR_N(V1, T, T, sign) FOR_N(STEP_SV, T)
FOR_FLT(COMMON_FV, _)

// =============================================================== geometric
#define GEOM(T)                                                                                \
  T OVL dot(T a, T b) { return a * b; }                                                        \
  T OVL length(T a) { return fabs(a); }                                              \
  T OVL distance(T a, T b) { return fabs(a - b); }                                   \
  T OVL normalize(T a) { return a == 0 ? a : a != a ? a : copysign((T)1, a); }        \
  GEOMV(2, T) GEOMV(3, T) GEOMV(4, T)
#define GEOMV(N, T)                                                                            \
  T OVL dot(T##N a, T##N b) { T s = 0; for (int i = 0; i < N; ++i) s += a[i] * b[i]; return s; } \
  T OVL length(T##N a) {                                                                       \
    T m = 0; for (int i = 0; i < N; ++i) m = fmax(m, fabs(a[i]));                    \
    if (m == 0 || isinf(m)) return m;                                                \
    T##N s = a / m; return m * sqrt(dot(s, s));                                                \
  }                                                                                            \
  T OVL distance(T##N a, T##N b) { return length(a - b); }                                    \
  T##N OVL normalize(T##N a) {                                                                 \
    T l = length(a);                                                                           \
    if (l == 0) return a;                                                                      \
    if (isinf(l)) { T##N r; for (int i = 0; i < N; ++i) r[i] = isinf(a[i]) ? copysign((T)1, a[i]) : (T)0; return r / length(r); } \
    return a / l;                                                                              \
  }
GEOM(float) GEOM(double)
float4 OVL cross(float4 a, float4 b) { return (float4)(a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x, 0.0f); }
float3 OVL cross(float3 a, float3 b) { return (float3)(a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x); }
double4 OVL cross(double4 a, double4 b) { return (double4)(a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x, 0.0); }
double3 OVL cross(double3 a, double3 b) { return (double3)(a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x); }
#define FASTGEOM(T) \
  float OVL fast_length(T a) { return length(a); } \
  float OVL fast_distance(T a, T b) { return distance(a, b); } \
  T OVL fast_normalize(T a) { return normalize(a); }
FASTGEOM(float) FASTGEOM(float2) FASTGEOM(float3) FASTGEOM(float4)

// ============================================================== relational
#define REL_SCALAR(T, IT)                                                                      \
  int OVL isequal(T a, T b) { return a == b; }                                                 \
  int OVL isnotequal(T a, T b) { return a != b; }                                              \
  int OVL isgreater(T a, T b) { return a > b; }                                                \
  int OVL isgreaterequal(T a, T b) { return a >= b; }                                          \
  int OVL isless(T a, T b) { return a < b; }                                                   \
  int OVL islessequal(T a, T b) { return a <= b; }                                             \
  int OVL islessgreater(T a, T b) { return a < b || a > b; }                                   \
  int OVL isfinite(T a) { return __builtin_isfinite(a); }                                      \
  int OVL isinf(T a) { return __builtin_isinf(a); }                                            \
  int OVL isnan(T a) { return a != a; }                                                        \
  int OVL isnormal(T a) { return __builtin_isnormal(a); }                                      \
  int OVL isordered(T a, T b) { return a == a && b == b; }                                     \
  int OVL isunordered(T a, T b) { return a != a || b != b; }                                   \
  int OVL signbit(T a) { return __builtin_signbit(a) != 0; }
REL_SCALAR(float, int) REL_SCALAR(double, long)
#define REL_V1(N, T, IT, NAME) IT##N OVL NAME(T##N a) { IT##N r; for (int i = 0; i < N; ++i) r[i] = NAME(a[i]) ? -1 : 0; return r; }
#define REL_V2(N, T, IT, NAME) IT##N OVL NAME(T##N a, T##N b) { IT##N r; for (int i = 0; i < N; ++i) r[i] = NAME(a[i], b[i]) ? -1 : 0; return r; }
#define REL_VEC(N, T, IT)                                                                      \
  REL_V2(N, T, IT, isequal) REL_V2(N, T, IT, isnotequal) REL_V2(N, T, IT, isgreater)           \
  REL_V2(N, T, IT, isgreaterequal) REL_V2(N, T, IT, isless) REL_V2(N, T, IT, islessequal)      \
  REL_V2(N, T, IT, islessgreater) REL_V1(N, T, IT, isfinite) REL_V1(N, T, IT, isinf)           \
  REL_V1(N, T, IT, isnan) REL_V1(N, T, IT, isnormal) REL_V2(N, T, IT, isordered)               \
  REL_V2(N, T, IT, isunordered) REL_V1(N, T, IT, signbit)
FOR_N(REL_VEC, float, int) FOR_N(REL_VEC, double, long)

#define ANYALL(T, _)                                                                           \
  int OVL any(T x) { return x < 0; }                                                           \
  int OVL all(T x) { return x < 0; }                                                           \
  ANYALLV(2, T) ANYALLV(3, T) ANYALLV(4, T) ANYALLV(8, T) ANYALLV(16, T)
#define ANYALLV(N, T)                                                                          \
  int OVL any(T##N x) { for (int i = 0; i < N; ++i) if (x[i] < 0) return 1; return 0; }        \
  int OVL all(T##N x) { for (int i = 0; i < N; ++i) if (x[i] >= 0) return 0; return 1; }
ANYALL(char, _) ANYALL(short, _) ANYALL(int, _) ANYALL(long, _)

#define SELECT_I(T, _) T OVL bitselect(T a, T b, T c) { return (a & ~c) | (b & c); } \
  FOR_N(V3, T, T, bitselect)
FOR_INT(SELECT_I, _)
#define SELECT_F(T, IT)                                                                        \
  T OVL bitselect(T a, T b, T c) { return as_##T((as_##IT(a) & ~as_##IT(c)) | (as_##IT(b) & as_##IT(c))); }
SELECT_F(float, uint) SELECT_F(double, ulong)
#define SELECT_FV(N, T, IT) T##N OVL bitselect(T##N a, T##N b, T##N c) { T##N r; for (int i = 0; i < N; ++i) r[i] = bitselect(a[i], b[i], c[i]); return r; }
FOR_N(SELECT_FV, float, uint) FOR_N(SELECT_FV, double, ulong)
// select(a, b, c): scalar c: c ? b : a; vector c: MSB of each component.
#define SEL_S(T, CT) T OVL select(T a, T b, CT c) { return c ? b : a; }
#define SEL_V(N, T, CT) T##N OVL select(T##N a, T##N b, CT##N c) { T##N r; for (int i = 0; i < N; ++i) r[i] = (c[i] >> (BITS(CT) - 1)) & 1 ? b[i] : a[i]; return r; }
#define SEL_ALL(T, CT, CU) SEL_S(T, CT) SEL_S(T, CU) FOR_N(SEL_V, T, CT) FOR_N(SEL_V, T, CU)
SEL_ALL(char, char, uchar) SEL_ALL(uchar, char, uchar) SEL_ALL(short, short, ushort)
SEL_ALL(ushort, short, ushort) SEL_ALL(int, int, uint) SEL_ALL(uint, int, uint)
SEL_ALL(long, long, ulong) SEL_ALL(ulong, long, ulong) SEL_ALL(float, int, uint)
SEL_ALL(double, long, ulong)

// ================================================================= shuffle
#define SHUF(M, N, T, U)                                                                       \
  T##M OVL shuffle(T##N x, U##M mask) { T##M r; for (int i = 0; i < M; ++i) r[i] = x[mask[i] % N]; return r; } \
  T##M OVL shuffle2(T##N x, T##N y, U##M mask) { T##M r; for (int i = 0; i < M; ++i) { U k = mask[i] % (2 * N); r[i] = k < N ? x[k] : y[k - N]; } return r; }
#define SHUF_N(N, T, U) SHUF(2, N, T, U) SHUF(4, N, T, U) SHUF(8, N, T, U) SHUF(16, N, T, U)
#define SHUF_T(T, U) SHUF_N(2, T, U) SHUF_N(4, T, U) SHUF_N(8, T, U) SHUF_N(16, T, U)
SHUF_T(char, uchar) SHUF_T(uchar, uchar) SHUF_T(short, ushort) SHUF_T(ushort, ushort)
SHUF_T(int, uint) SHUF_T(uint, uint) SHUF_T(long, ulong) SHUF_T(ulong, ulong)
SHUF_T(float, uint) SHUF_T(double, ulong)
#endif // !MANYCL_GENERIC_ONLY

#ifndef MANYCL_GENERIC_ONLY
// ============================================================= conversions
#define SIGNED_char 1
#define SIGNED_uchar 0
#define SIGNED_short 1
#define SIGNED_ushort 0
#define SIGNED_int 1
#define SIGNED_uint 0
#define SIGNED_long 1
#define SIGNED_ulong 0
#define LO_L_char (-128l)
#define LO_L_uchar 0l
#define LO_L_short (-32768l)
#define LO_L_ushort 0l
#define LO_L_int (-2147483647l - 1)
#define LO_L_uint 0l
#define LO_L_long (-9223372036854775807l - 1)
#define LO_L_ulong 0l
#define HI_L_char 127l
#define HI_L_uchar 255l
#define HI_L_short 32767l
#define HI_L_ushort 65535l
#define HI_L_int 2147483647l
#define HI_L_uint 4294967295l
#define HI_L_long 9223372036854775807l
#define HI_L_ulong 9223372036854775807l
#define HI_UL_char 127ul
#define HI_UL_uchar 255ul
#define HI_UL_short 32767ul
#define HI_UL_ushort 65535ul
#define HI_UL_int 2147483647ul
#define HI_UL_uint 4294967295ul
#define HI_UL_long 9223372036854775807ul
#define HI_UL_ulong 18446744073709551615ul
#define UPPER_char 128.0
#define UPPER_uchar 256.0
#define UPPER_short 32768.0
#define UPPER_ushort 65536.0
#define UPPER_int 2147483648.0
#define UPPER_uint 4294967296.0
#define UPPER_long 9223372036854775808.0
#define UPPER_ulong 18446744073709551616.0

#define RND_(x) trunc(x)
#define RND__rtz(x) trunc(x)
#define RND__rte(x) rint(x)
#define RND__rtp(x) ceil(x)
#define RND__rtn(x) floor(x)

#define FOR_INT2(M, ...) M(char, __VA_ARGS__) M(uchar, __VA_ARGS__) M(short, __VA_ARGS__) M(ushort, __VA_ARGS__) \
  M(int, __VA_ARGS__) M(uint, __VA_ARGS__) M(long, __VA_ARGS__) M(ulong, __VA_ARGS__)

// vector versions of one scalar conversion
#define CV_VEC(N, D, S, SUF) D##N OVL convert_##D##N##SUF(S##N x) { D##N r; for (int i = 0; i < N; ++i) r[i] = convert_##D##SUF(x[i]); return r; }
#define CV_ALLN(D, S, SUF) FOR_N(CV_VEC, D, S, SUF)

// int -> int
#define CV_II_R(R, D, S)                                                                       \
  D OVL convert_##D##R(S x) { return (D)x; }                                                   \
  D OVL convert_##D##_sat##R(S x) {                                                            \
    if (SIGNED_##S) { long v = (long)x; if (v < LO_L_##D) return (D)LO_L_##D; if (v > HI_L_##D) return (D)HI_L_##D; return (D)v; } \
    else { ulong v = (ulong)x; if (v > HI_UL_##D) return (D)HI_UL_##D; return (D)v; }         \
  }                                                                                            \
  CV_ALLN(D, S, R) CV_ALLN(D, S, _sat##R)
#define CV_II(S, D) FOR_RND(CV_II_R, D, S)
#define CV_II_D(D, _) FOR_INT2(CV_II, D)
FOR_INT(CV_II_D, _)

// float -> int
#define CV_FI_R(R, D, S)                                                                       \
  D OVL convert_##D##R(S x) { return (D)RND_##R(x); }                                         \
  D OVL convert_##D##_sat##R(S x) {                                                            \
    if (x != x) return (D)0;                                                                   \
    S r = RND_##R(x);                                                                          \
    if (r < (S)LO_L_##D) return (D)LO_L_##D;                                                   \
    if (r >= (S)UPPER_##D) return (D)HI_UL_##D;                                                \
    return (D)r;                                                                               \
  }                                                                                            \
  CV_ALLN(D, S, R) CV_ALLN(D, S, _sat##R)
#define CV_FI(D, S) FOR_RND(CV_FI_R, D, S)
CV_FI(char, float) CV_FI(uchar, float) CV_FI(short, float) CV_FI(ushort, float)
CV_FI(int, float) CV_FI(uint, float) CV_FI(long, float) CV_FI(ulong, float)
CV_FI(char, double) CV_FI(uchar, double) CV_FI(short, double) CV_FI(ushort, double)
CV_FI(int, double) CV_FI(uint, double) CV_FI(long, double) CV_FI(ulong, double)

// int -> float: sign of (f - x), exactly
#define CMP_FI(D, S) \
  static int OVL mcl_cmp(D f, S x) { \
    if (f >= (D)UPPER_##S) return 1; \
    if (f < (D)LO_L_##S) return -1; \
    S fi = (S)f; return fi < x ? -1 : fi > x ? 1 : 0; }
#define ADJ_(D, f, c, neg)
#define ADJ__rte(D, f, c, neg)
#define ADJ__rtz(D, f, c, neg) if (neg ? c < 0 : c > 0) f = nextafter(f, (D)0);
#define ADJ__rtp(D, f, c, neg) if (c < 0) f = nextafter(f, (D)INFINITY);
#define ADJ__rtn(D, f, c, neg) if (c > 0) f = nextafter(f, -(D)INFINITY);
#define CV_IF_R(R, D, S)                                                                       \
  D OVL convert_##D##R(S x) { D f = (D)x; int c = mcl_cmp(f, x); (void)c; ADJ_##R(D, f, c, x < 0) return f; } \
  CV_ALLN(D, S, R)
#define CV_IF(S, D) CMP_FI(D, S) FOR_RND(CV_IF_R, D, S)
FOR_INT(CV_IF, float) FOR_INT(CV_IF, double)

// float <-> double
#define CV_FF_ID(R, T) T OVL convert_##T##R(T x) { return x; } CV_ALLN(T, T, R)
FOR_RND(CV_FF_ID, float) FOR_RND(CV_FF_ID, double)
#define CV_DF_R(R, _)                                                                          \
  double OVL convert_double##R(float x) { return (double)x; } CV_ALLN(double, float, R)       \
  float OVL convert_float##R(double x) {                                                       \
    float f = (float)x;                                                                        \
    if (x == x) { int c = (double)f < x ? -1 : (double)f > x ? 1 : 0; (void)c; ADJ_##R(float, f, c, x < 0) } \
    return f;                                                                                  \
  }                                                                                            \
  CV_ALLN(float, double, R)
FOR_RND(CV_DF_R, _)

// ========================================================= vload / vstore
#define VLS(N, AS, T)                                                                          \
  T##N OVL vload##N(size_t off, const AS T *p) { const AS T *q = p + off * N; T##N r; for (int i = 0; i < N; ++i) r[i] = q[i]; return r; }
#define VST(N, AS, T)                                                                          \
  void OVL vstore##N(T##N v, size_t off, AS T *p) { AS T *q = p + off * N; for (int i = 0; i < N; ++i) q[i] = v[i]; }
#define VLS_T(T, AS) FOR_N(VLS, AS, T)
#define VST_T(T, AS) FOR_N(VST, AS, T)
FOR_ALL(VLS_T, __constant)
#endif // !MANYCL_GENERIC_ONLY

#ifndef VLS
#define VLS(N, AS, T)                                                                          \
  T##N OVL vload##N(size_t off, const AS T *p) { const AS T *q = p + off * N; T##N r; for (int i = 0; i < N; ++i) r[i] = q[i]; return r; }
#define VST(N, AS, T)                                                                          \
  void OVL vstore##N(T##N v, size_t off, AS T *p) { AS T *q = p + off * N; for (int i = 0; i < N; ++i) q[i] = v[i]; }
#define VLS_T(T, AS) FOR_N(VLS, AS, T)
#define VST_T(T, AS) FOR_N(VST, AS, T)
#define FOR_INT2(M, ...) M(char, __VA_ARGS__) M(uchar, __VA_ARGS__) M(short, __VA_ARGS__) M(ushort, __VA_ARGS__) \
  M(int, __VA_ARGS__) M(uint, __VA_ARGS__) M(long, __VA_ARGS__) M(ulong, __VA_ARGS__)
#endif
#define VLSST_AS(AS, _) FOR_ALL(VLS_T, AS) FOR_ALL(VST_T, AS)
ADDR_SPACES(VLSST_AS, _)

// half storage
static half mcl_hstep(half h, int up) {
  ushort b = as_ushort(h);
  if ((b & 0x7fff) == 0) return as_half((ushort)(up ? 0x0001 : 0x8001));
  int neg = b >> 15;
  b = (neg ^ up) ? (ushort)(b + 1) : (ushort)(b - 1);
  return as_half(b);
}
#define F2H(R, T)                                                                              \
  static half mcl_f2h_##T##R(T v) {                                                            \
    half h = (half)v;                                                                          \
    if (v != v) return h;                                                                      \
    T g = (T)h;                                                                                \
    MCL_HADJ##R                                                                                \
    return h;                                                                                  \
  }
#define MCL_HADJ
#define MCL_HADJ_rte
#define MCL_HADJ_rtz if (fabs(g) > fabs(v)) h = as_half((ushort)(as_ushort(h) - 1));
#define MCL_HADJ_rtp if (g < v) h = mcl_hstep(h, 1);
#define MCL_HADJ_rtn if (g > v) h = mcl_hstep(h, 0);
FOR_RND(F2H, float) FOR_RND(F2H, double)

#define VHALF_LOAD(AS, _)                                                                      \
  float OVL vload_half(size_t off, const AS half *p) { return (float)p[off]; }                 \
  VHALF_LOADN(2, AS) VHALF_LOADN(3, AS) VHALF_LOADN(4, AS) VHALF_LOADN(8, AS) VHALF_LOADN(16, AS)
#define VHALF_LOADN(N, AS)                                                                     \
  float##N OVL vload_half##N(size_t off, const AS half *p) { float##N r; for (int i = 0; i < N; ++i) r[i] = (float)p[off * N + i]; return r; } \
  float##N OVL vloada_half##N(size_t off, const AS half *p) { const int S = N == 3 ? 4 : N; float##N r; for (int i = 0; i < N; ++i) r[i] = (float)p[off * S + i]; return r; }
#define VHALF_STORE_R(R, AS, T)                                                                \
  void OVL vstore_half##R(T v, size_t off, AS half *p) { p[off] = mcl_f2h_##T##R(v); }          \
  VHALF_STOREN(2, R, AS, T) VHALF_STOREN(3, R, AS, T) VHALF_STOREN(4, R, AS, T) VHALF_STOREN(8, R, AS, T) VHALF_STOREN(16, R, AS, T)
#define VHALF_STOREN(N, R, AS, T)                                                              \
  void OVL vstore_half##N##R(T##N v, size_t off, AS half *p) { for (int i = 0; i < N; ++i) p[off * N + i] = mcl_f2h_##T##R(v[i]); } \
  void OVL vstorea_half##N##R(T##N v, size_t off, AS half *p) { const int S = N == 3 ? 4 : N; for (int i = 0; i < N; ++i) p[off * S + i] = mcl_f2h_##T##R(v[i]); }
#define VHALF_STORE(AS, _) FOR_RND(VHALF_STORE_R, AS, float) FOR_RND(VHALF_STORE_R, AS, double)
ADDR_SPACES(VHALF_LOAD, _)
ADDR_SPACES(VHALF_STORE, _)
#ifndef MANYCL_GENERIC_ONLY
VHALF_LOAD(__constant, _)

// ================================================================= atomics
#define ATOMIC_T(AS, T, P)                                                                     \
  T OVL P##_add(volatile AS T *p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); } \
  T OVL P##_sub(volatile AS T *p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST); } \
  T OVL P##_xchg(volatile AS T *p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); } \
  T OVL P##_inc(volatile AS T *p) { return __atomic_fetch_add(p, (T)1, __ATOMIC_SEQ_CST); }   \
  T OVL P##_dec(volatile AS T *p) { return __atomic_fetch_sub(p, (T)1, __ATOMIC_SEQ_CST); }   \
  T OVL P##_cmpxchg(volatile AS T *p, T cmp, T v) {                                            \
    __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);        \
    return cmp;                                                                                \
  }                                                                                            \
  T OVL P##_min(volatile AS T *p, T v) { return __atomic_fetch_min(p, v, __ATOMIC_SEQ_CST); } \
  T OVL P##_max(volatile AS T *p, T v) { return __atomic_fetch_max(p, v, __ATOMIC_SEQ_CST); } \
  T OVL P##_and(volatile AS T *p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST); } \
  T OVL P##_or(volatile AS T *p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }   \
  T OVL P##_xor(volatile AS T *p, T v) { return __atomic_fetch_xor(p, v, __ATOMIC_SEQ_CST); }
#define ATOMIC_AS(AS)                                                                          \
  ATOMIC_T(AS, int, atomic) ATOMIC_T(AS, uint, atomic) ATOMIC_T(AS, int, atom) ATOMIC_T(AS, uint, atom) \
  ATOMIC_T(AS, long, atom) ATOMIC_T(AS, ulong, atom)                                           \
  float OVL atomic_xchg(volatile AS float *p, float v) {                                       \
    return as_float(__atomic_exchange_n((volatile AS int *)p, as_int(v), __ATOMIC_SEQ_CST));   \
  }
ATOMIC_AS(__global) ATOMIC_AS(__local)

// ====================================================== fences, async copy
void OVL mem_fence(cl_mem_fence_flags f) { (void)f; __atomic_thread_fence(__ATOMIC_ACQ_REL); }
void OVL read_mem_fence(cl_mem_fence_flags f) { (void)f; __atomic_thread_fence(__ATOMIC_ACQUIRE); }
void OVL write_mem_fence(cl_mem_fence_flags f) { (void)f; __atomic_thread_fence(__ATOMIC_RELEASE); }

// Provided by the compiler (replaced in the work-item function) and the host.
__global void *__manycl_wctx(void);
size_t __manycl_local_linear_id(void);
void __manycl_async_copy_g2l(__global void *ctx, __local void *dst, const __global void *src,
                             size_t es, size_t n, size_t ss, size_t ds);
void __manycl_async_copy_l2g(__global void *ctx, __global void *dst, const __local void *src,
                             size_t es, size_t n, size_t ss, size_t ds);
#define ASYNC_T(T, _)                                                                          \
  event_t OVL async_work_group_copy(__local T *dst, const __global T *src, size_t n, event_t e) { \
    if (__manycl_local_linear_id() == 0) __manycl_async_copy_g2l(__manycl_wctx(), dst, src, sizeof(T), n, 1, 1); \
    return e;                                                                                  \
  }                                                                                            \
  event_t OVL async_work_group_copy(__global T *dst, const __local T *src, size_t n, event_t e) { \
    if (__manycl_local_linear_id() == 0) __manycl_async_copy_l2g(__manycl_wctx(), dst, src, sizeof(T), n, 1, 1); \
    return e;                                                                                  \
  }                                                                                            \
  event_t OVL async_work_group_strided_copy(__local T *dst, const __global T *src, size_t n, size_t st, event_t e) { \
    if (__manycl_local_linear_id() == 0) __manycl_async_copy_g2l(__manycl_wctx(), dst, src, sizeof(T), n, st, 1); \
    return e;                                                                                  \
  }                                                                                            \
  event_t OVL async_work_group_strided_copy(__global T *dst, const __local T *src, size_t n, size_t st, event_t e) { \
    if (__manycl_local_linear_id() == 0) __manycl_async_copy_l2g(__manycl_wctx(), dst, src, sizeof(T), n, 1, st); \
    return e;                                                                                  \
  }                                                                                            \
  void OVL prefetch(const __global T *p, size_t n) { (void)p; (void)n; }
#define ASYNC_TN(N, T) ASYNC_T(T##N, _)
#define ASYNC_ALL(T, _) ASYNC_T(T, _) FOR_N(ASYNC_TN, T)
FOR_ALL(ASYNC_ALL, _)
#endif // !MANYCL_GENERIC_ONLY

void OVL wait_group_events(int n, event_t *events) {
  (void)n; (void)events;
  barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
}
