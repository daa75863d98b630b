// AVX2 + FMA + F16C kernels (this file is compiled with -mavx2 -mfma -mf16c).
#include "kernels_impl.h"
#include "steps_avx2.h"

#include <immintrin.h>

namespace {

struct Avx2Simd : Avx2Steps {
  static constexpr int W = 8;
  static constexpr int MR = 6; // 6 rows x 2 vectors = 12 accumulators of 16 registers
  using VF = __m256;
  using VI = __m256i;
  static VF zero() { return _mm256_setzero_ps(); }
  static VF load(const float *p) { return _mm256_loadu_ps(p); }
  static VF load(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
  }
  static VF bcast(float x) { return _mm256_set1_ps(x); }
  static VF bcast(uint16_t h) { return _mm256_set1_ps(_cvtsh_ss(h)); }
  static VF fma(VF a, VF b, VF c) { return _mm256_fmadd_ps(a, b, c); }
  static void store(float *p, VF x) { _mm256_storeu_ps(p, x); }
  static VI izero() { return _mm256_setzero_si256(); }
  static VI load_pairs(const int16_t *p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
  }
  static VI bcast_i32(int32_t x) { return _mm256_set1_epi32(x); }
  static VI madd_add(VI acc, VI a, VI b) { return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b)); }
  static void store_i(int32_t *p, VI x) { _mm256_storeu_si256(reinterpret_cast<__m256i *>(p), x); }
};

const IsaKernels kAvx2 = {"avx2", Avx2Simd::MR, conv_float<Avx2Simd>, conv_int8<Avx2Simd>,
                             depthwise<Avx2Simd>};

} // namespace

namespace manycl::native {
const IsaKernels *avx2_kernels() { return &kAvx2; }
} // namespace manycl::native
