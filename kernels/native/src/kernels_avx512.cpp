// AVX-512 (F + BW) kernels (this file is compiled with -mavx512f -mavx512bw -mfma -mf16c).
#include "kernels_impl.h"
#include "steps_avx2.h"

#include <immintrin.h>

namespace {

struct Avx512Simd : Avx2Steps {
  static constexpr int W = 16;
  static constexpr int MR = 14; // 14 accumulators + panel + broadcast of 32 registers
  using VF = __m512;
  using VI = __m512i;
  static VF zero() { return _mm512_setzero_ps(); }
  static VF load(const float *p) { return _mm512_loadu_ps(p); }
  static VF load(const uint16_t *p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)));
  }
  static VF bcast(float x) { return _mm512_set1_ps(x); }
  static VF bcast(uint16_t h) { return _mm512_set1_ps(_cvtsh_ss(h)); }
  static VF fma(VF a, VF b, VF c) { return _mm512_fmadd_ps(a, b, c); }
  static void store(float *p, VF x) { _mm512_storeu_ps(p, x); }
  static VI izero() { return _mm512_setzero_si512(); }
  static VI load_pairs(const int16_t *p) { return _mm512_loadu_si512(p); }
  static VI bcast_i32(int32_t x) { return _mm512_set1_epi32(x); }
  static VI madd_add(VI acc, VI a, VI b) { return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b)); }
  static void store_i(int32_t *p, VI x) { _mm512_storeu_si512(p, x); }
};

const IsaKernels kAvx512 = {"avx512",
                            Avx512Simd::MR,
                            conv_float<Avx512Simd>,
                            conv_int8<Avx512Simd>,
                            depthwise<Avx512Simd>,
                            int8_add_portable,
                            Avx512Simd::widen_halves,
                            Avx512Simd::narrow_halves};

} // namespace

namespace manycl::native {
const IsaKernels *avx512_kernels() {
  return &kAvx512;
}
} // namespace manycl::native
