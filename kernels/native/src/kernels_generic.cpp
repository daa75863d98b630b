// Portable kernels: plain arrays the compiler may vectorize for the baseline ISA.
#include "kernels_impl.h"

namespace {

struct GenericSimd : PortableSteps {
  static constexpr int W = 8;
  static constexpr int MR = 4;
  struct VF {
    float v[W];
  };
  struct VI {
    int32_t v[W];
  };
  static VF zero() { return VF{}; }
  static VF load(const float *p) {
    VF r;
    for (int i = 0; i < W; ++i)
      r.v[i] = p[i];
    return r;
  }
  static VF load(const uint16_t *p) {
    VF r;
    for (int i = 0; i < W; ++i)
      r.v[i] = half_to_float(p[i]);
    return r;
  }
  static VF bcast(float x) {
    VF r;
    for (int i = 0; i < W; ++i)
      r.v[i] = x;
    return r;
  }
  static VF bcast(uint16_t h) { return bcast(half_to_float(h)); }
  static VF fma(VF a, VF b, VF c) {
    for (int i = 0; i < W; ++i)
      c.v[i] += a.v[i] * b.v[i];
    return c;
  }
  static void store(float *p, VF x) {
    for (int i = 0; i < W; ++i)
      p[i] = x.v[i];
  }
  static VI izero() { return VI{}; }
  // W INT32 lanes, each a pair of INT16 values.
  static VI load_pairs(const int16_t *p) {
    VI r;
    for (int i = 0; i < W; ++i) {
      uint32_t lo = (uint16_t)p[2 * i], hi = (uint16_t)p[2 * i + 1];
      r.v[i] = (int32_t)(lo | hi << 16);
    }
    return r;
  }
  static VI bcast_i32(int32_t x) {
    VI r;
    for (int i = 0; i < W; ++i)
      r.v[i] = x;
    return r;
  }
  // acc + a.lo*b.lo + a.hi*b.hi per lane, wrapping like vpmaddwd + vpaddd.
  static VI madd_add(VI acc, VI a, VI b) {
    for (int i = 0; i < W; ++i) {
      int32_t p0 = (int32_t)(int16_t)(a.v[i] & 0xffff) * (int16_t)(b.v[i] & 0xffff);
      int32_t p1 = (int32_t)(int16_t)((uint32_t)a.v[i] >> 16) *
                   (int16_t)((uint32_t)b.v[i] >> 16);
      acc.v[i] = (int32_t)((uint32_t)acc.v[i] + (uint32_t)p0 + (uint32_t)p1);
    }
    return acc;
  }
  static void store_i(int32_t *p, VI x) {
    for (int i = 0; i < W; ++i)
      p[i] = x.v[i];
  }
};

const IsaKernels kGeneric = {"generic", GenericSimd::MR, conv_float<GenericSimd>,
                             conv_int8<GenericSimd>, depthwise<GenericSimd>};

} // namespace

namespace manycl::native {
const IsaKernels &generic_kernels() { return kGeneric; }
} // namespace manycl::native

// Stubs for ISAs this build does not compile.
namespace manycl::native {
#ifndef MANYCL_NATIVE_HAVE_AVX2
const IsaKernels *avx2_kernels() { return nullptr; }
#endif
#ifndef MANYCL_NATIVE_HAVE_AVX512
const IsaKernels *avx512_kernels() { return nullptr; }
#endif
} // namespace manycl::native
