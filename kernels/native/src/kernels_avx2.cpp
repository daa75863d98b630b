// AVX2 + FMA + F16C kernels (this file is compiled with -mavx2 -mfma -mf16c).
#include "kernels_impl.h"
#include "steps_avx2.h"
#include "winograd_impl.h"

#include <immintrin.h>

namespace {

struct Avx2Simd : Avx2Steps {
  static constexpr int W = 8;
  static constexpr int MR = 6; // 6 rows x 2 vectors = 12 accumulators of 16 registers
  using VF = __m256;
  static VF zero() { return _mm256_setzero_ps(); }
  static VF load(const float *p) { return _mm256_loadu_ps(p); }
  static VF load(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
  }
  static VF bcast(float x) { return _mm256_set1_ps(x); }
  static VF bcast(uint16_t h) { return _mm256_set1_ps(_cvtsh_ss(h)); }
  static VF fma(VF a, VF b, VF c) { return _mm256_fmadd_ps(a, b, c); }
  static void store(float *p, VF x) { _mm256_storeu_ps(p, x); }
  // Epilogue steps on a block row still in its register (finish_block), in the order of
  // the epilogue_row steps: (x + bias) [+ residual], clamp, [LeakyRelu], store.
  static VF add(VF a, VF b) { return _mm256_add_ps(a, b); }
  // a > b ? a : b (b when either is NaN).
  static VF max(VF a, VF b) { return _mm256_max_ps(a, b); }
  static VF clamp(VF x, VF lo, VF hi) { return _mm256_min_ps(_mm256_max_ps(x, lo), hi); }
  static VF leaky(VF x, VF alpha) {
    return _mm256_blendv_ps(x, _mm256_mul_ps(x, alpha),
                            _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
  }
  static void store_out(float *out, VF x) { store8(out, x); }
  static void store_out(uint16_t *out, VF x) { store8(out, x); }
};

// Requantizing INT8 add, 8 elements per step: widen to INT32, subtract the zero points,
// convert, scale, add, clamp, divide, clamp, round to nearest even, add the zero point, pack.
// The same IEEE operations in the same order as int8_add_one (which does the tail).
void int8_add_avx2(const Int8AddJob &j) {
  const __m256 a_scale = _mm256_set1_ps(j.a_scale), b_scale = _mm256_set1_ps(j.b_scale);
  const __m256 out_scale = _mm256_set1_ps(j.out_scale);
  const __m256 act_lo = _mm256_set1_ps(j.act_lo), act_hi = _mm256_set1_ps(j.act_hi);
  const __m256 q_lo = _mm256_set1_ps(j.q_lo), q_hi = _mm256_set1_ps(j.q_hi);
  const __m256i a_zero = _mm256_set1_epi32(j.a_zero), b_zero = _mm256_set1_epi32(j.b_zero);
  const __m256i out_zero = _mm256_set1_epi32(j.out_zero);
  auto widen = [&](const uint8_t *p) {
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(p));
    return j.is_signed ? _mm256_cvtepi8_epi32(bytes) : _mm256_cvtepu8_epi32(bytes);
  };
  uint32_t i = 0;
  for (; i + 8 <= j.n; i += 8) {
    __m256 fa = _mm256_cvtepi32_ps(_mm256_sub_epi32(widen(j.a + i), a_zero));
    __m256 fb = _mm256_cvtepi32_ps(_mm256_sub_epi32(widen(j.b + i), b_zero));
    fa = _mm256_mul_ps(fa, a_scale);
    fb = _mm256_mul_ps(fb, b_scale);
    __asm__("" : "+x"(fa), "+x"(fb)); // no FMA contraction: the products are rounded
    __m256 v = _mm256_add_ps(fa, fb);
    // max/min return the second operand on NaN or equality, like `v > lo ? v : lo`.
    v = _mm256_min_ps(_mm256_max_ps(v, act_lo), act_hi);
    __m256 r = _mm256_div_ps(v, out_scale);
    r = _mm256_min_ps(_mm256_max_ps(r, q_lo), q_hi);
    r = _mm256_round_ps(r, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256i q = _mm256_add_epi32(_mm256_cvtps_epi32(r), out_zero);
    const __m128i q16 = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    const __m128i q8 = j.is_signed ? _mm_packs_epi16(q16, q16) : _mm_packus_epi16(q16, q16);
    _mm_storel_epi64(reinterpret_cast<__m128i *>(j.out + i), q8);
  }
  for (; i < j.n; ++i)
    j.out[i] = int8_add_one(j, i);
}

const IsaKernels kAvx2 = {"avx2",
                          Avx2Simd::MR,
                          conv_float<Avx2Simd>,
                          depthwise<Avx2Simd>,
                          winograd<Avx2Simd>,
                          winograd_weights<Avx2Simd>,
                          int8_add_avx2,
                          Avx2Simd::widen_halves,
                          Avx2Simd::narrow_halves,
                          Avx2Simd::max_halves,
                          pool_pixels<Avx2Simd, float>,
                          pool_pixels<Avx2Simd, uint16_t>};

} // namespace

namespace manycl::native {
const IsaKernels *avx2_kernels() {
  return &kAvx2;
}
} // namespace manycl::native
