// Portable kernels: plain arrays the compiler may vectorize for the baseline ISA.
#include "kernels_impl.h"
#include "winograd_impl.h"

namespace {

// GCC/Clang vector extensions: portable 4-lane (16-byte) types the compiler maps to the
// baseline ISA (SSE2 on x86-64, NEON on AArch64): 3 rows x 4 vectors = 12 accumulators of
// the 16 registers. Loads and stores go through memcpy (no alignment assumed).
struct GenericSimd : PortableSteps {
  static constexpr int W = 4;
  static constexpr int MR = 3;
  typedef float VF __attribute__((vector_size(16)));
  static VF zero() { return VF{}; }
  static VF load(const float *p) {
    VF r;
    std::memcpy(&r, p, sizeof r);
    return r;
  }
  static VF load(const uint16_t *p) {
    VF r;
    for (int i = 0; i < W; ++i)
      r[i] = half_to_float(p[i]);
    return r;
  }
  static VF bcast(float x) { return VF{} + x; }
  static VF bcast(uint16_t h) { return bcast(half_to_float(h)); }
  static VF fma(VF a, VF b, VF c) { return c + a * b; }
  static void store(float *p, VF x) { std::memcpy(p, &x, sizeof x); }
  static VF add(VF a, VF b) { return a + b; }
  // a > b ? a : b lane by lane (b when either is NaN).
  static VF max(VF a, VF b) { return a > b ? a : b; }
};

const IsaKernels kGeneric = {"generic",
                             GenericSimd::MR,
                             conv_float<GenericSimd>,
                             depthwise<GenericSimd>,
                             winograd<GenericSimd>,
                             winograd_weights<GenericSimd>,
                             int8_add_portable,
                             GenericSimd::widen_halves,
                             GenericSimd::narrow_halves,
                             GenericSimd::max_halves,
                             pool_pixels<GenericSimd, float>,
                             pool_pixels<GenericSimd, uint16_t>};

} // namespace

namespace manycl::native {
const IsaKernels &generic_kernels() {
  return kGeneric;
}
} // namespace manycl::native

// Stubs for ISAs this build does not compile.
namespace manycl::native {
#ifndef MANYCL_NATIVE_HAVE_AVX2
const IsaKernels *avx2_kernels() {
  return nullptr;
}
#endif
#ifndef MANYCL_NATIVE_HAVE_AVX512
const IsaKernels *avx512_kernels() {
  return nullptr;
}
#endif
} // namespace manycl::native
